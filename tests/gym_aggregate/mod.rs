//! `gym eval aggregate` whole: every case of the corpus (shards, failures sidecars, the
//! two count-as-zero policies, the merged file, refusals) through `rollstat aggregate`,
//! and the health-check cases through `rollstat health`, compared with what NeMo Gym
//! 0.7.0 wrote and printed. The constructed cases are in tests/fixtures; the cases on NeMo
//! Gym's own example files come from the optional folder (see `common::example_cases`).

use std::path::{Path, PathBuf};

use crate::common::*;
use rollstat::json::Json;

fn case_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(root) else { return Vec::new() };
    let mut v: Vec<PathBuf> = rd.map(|e| e.unwrap().path()).filter(|p| p.join("case.json").exists()).collect();
    v.sort();
    v
}

/// `*` and `?` matched against a file name.
fn matches(pat: &[u8], name: &[u8]) -> bool {
    match (pat.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => matches(&pat[1..], name) || (!name.is_empty() && matches(pat, &name[1..])),
        (Some(b'?'), Some(_)) => matches(&pat[1..], &name[1..]),
        (Some(a), Some(b)) if a == b => matches(&pat[1..], &name[1..]),
        _ => false,
    }
}

/// The shard arguments as a shell expands them: sorted matches of each pattern.
fn expand(dir: &Path, shards: &Json) -> Vec<String> {
    let mut out = Vec::new();
    let Some(Json::Arr(items)) = Some(shards) else { unreachable!() };
    for s in items {
        let s = s.as_str().unwrap();
        if !s.contains(['*', '?']) {
            out.push(s.to_string());
            continue;
        }
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| matches(s.as_bytes(), n.as_bytes()))
            .collect();
        names.sort();
        out.extend(names);
    }
    out
}

fn strings(j: Option<&Json>) -> Vec<String> {
    match j {
        Some(Json::Arr(v)) => v.iter().map(|x| x.as_str().unwrap().to_string()).collect(),
        _ => Vec::new(),
    }
}

fn int(j: Option<&Json>) -> Option<i64> {
    match j {
        Some(Json::Int(i)) => Some(*i),
        _ => None,
    }
}

/// Compares JSON files as values, JSONL files line by line.
fn same_jsonl(got: &Path, want: &Path, what: &str, fails: &mut Vec<String>) {
    if !got.exists() {
        fails.push(format!("{what}: not written"));
        return;
    }
    if got.extension().is_some_and(|e| e == "json") {
        if let Some(d) = diff(&read_json(got), &read_json(want), what) {
            fails.push(d);
        }
        return;
    }
    let (g, w) = (read_jsonl(got), read_jsonl(want));
    if g.len() != w.len() {
        fails.push(format!("{what}: {} lines, expected {}", g.len(), w.len()));
        return;
    }
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        if let Some(d) = diff(a, b, &format!("{what}:{}", i + 1)) {
            fails.push(d);
            return;
        }
    }
}

/// The lines the terminal output must carry, from the numbers NeMo Gym printed.
fn printed_lines(counts: &Json) -> Vec<String> {
    let mut want = vec![format!("Loaded {} rollout record(s)", int(counts.get("loaded_records")).unwrap())];
    if let Some(n) = int(counts.get("counted_failure_rows")) {
        want.push(format!("Counting {n} failure row(s) as scored zeros"));
    }
    if let Some(n) = int(counts.get("counted_missing_rollouts")) {
        want.push(format!("Counting {n} materialized rollout(s) with no row as scored zeros"));
    }
    let (d, e) = (int(counts.get("missing_from_score")).unwrap(), int(counts.get("expected_rollouts")).unwrap());
    if d > 0 {
        want.push(format!("Rollouts missing from the score: {d} of {e} materialized ("));
        if let Some(Json::Obj(by)) = counts.get("dropped_by_class") {
            let classes: Vec<String> = by.iter().map(|(c, n)| format!("{} {c}", int(Some(n)).unwrap())).collect();
            want.push(format!("({} routed this run", classes.join(", ")));
        }
        want.push(format!("Metrics cover: {} of {e} rollouts", int(counts.get("scored_rollouts")).unwrap()));
    }
    let imputed = int(counts.get("imputed_zeros")).unwrap();
    if imputed > 0 {
        want.push(format!("Scored as zero because they left no row: {imputed} of {e} rollouts"));
    }
    if let Some(Json::Obj(h)) = counts.get("health") {
        let n = |k: &str| h.iter().find(|(kk, _)| &**kk == k).and_then(|(_, v)| int(Some(v))).unwrap();
        want.push(format!(
            "Rollout health: {} checked, {} healthy, {} unhealthy, {} unobserved",
            n("checked"),
            n("healthy"),
            n("unhealthy"),
            n("unobserved")
        ));
    }
    want
}

fn run_case(dir: &Path, fails: &mut Vec<String>) {
    let case = read_json(&dir.join("case.json"));
    let flags = case.get("flags").unwrap();
    let out = TempDir::new("gymagg");
    let agg = out.join("rollouts_aggregate_metrics.json");
    let merged = out.join("rollouts.jsonl");
    let mut args: Vec<String> = vec!["aggregate".into()];
    args.extend(expand(dir, case.get("shards").unwrap()));
    args.extend(["--out".into(), agg.display().to_string()]);
    for c in strings(flags.get("count_failure_classes_as_zero")) {
        args.extend(["--count-failures-as-zero".into(), c]);
    }
    if flags.get("count_missing_rollouts_as_zero") == Some(&Json::Bool(true)) {
        args.push("--count-missing-as-zero".into());
    }
    if flags.get("merge_shards") == Some(&Json::Bool(true)) {
        args.extend(["--merge-into".into(), merged.display().to_string()]);
    }
    let health = flags.get("health_check") == Some(&Json::Bool(true));
    if !health {
        args.push("--no-health-check".into());
    }
    let coverage = out.join("coverage.json");
    args.extend(["--coverage-out".into(), coverage.display().to_string()]);
    let o = rollstat().args(&args).current_dir(dir).output();
    let (so, se) = (stdout(&o), stderr(&o));
    let exp = dir.join("expected");
    let want_exit = int(case.get("oracle").and_then(|o| o.get("exit"))).unwrap();
    let naming_nobody = case.get("rows_naming_no_agent") == Some(&Json::Bool(true));
    let code = o.status.code().unwrap_or(-1) as i64;
    if want_exit == 2 || (naming_nobody && code == 2) {
        if code != 2 {
            fails.push(format!("exit {code}, expected 2\n{se}"));
        }
        for n in strings(case.get("refusal_names")) {
            if !se.contains(&n) {
                fails.push(format!("the refusal does not name {n:?}: {se}"));
            }
        }
        if !out.files().is_empty() {
            fails.push(format!("a refused run wrote {:?}", out.files()));
        }
        return;
    }
    if code != want_exit {
        fails.push(format!("exit {code}, expected {want_exit}\n{se}"));
        return;
    }
    let want_agg = exp.join("rollouts_aggregate_metrics.json");
    match (want_agg.exists(), agg.exists()) {
        (true, true) => {
            if let Some(d) = diff(&read_json(&agg), &read_json(&want_agg), "$") {
                fails.push(format!("aggregate: {d}"));
            }
        }
        (true, false) => fails.push("no aggregate file".into()),
        (false, true) => fails.push("an aggregate file where nothing was scored".into()),
        (false, false) => {}
    }
    if exp.join("rollouts.jsonl").exists() {
        same_jsonl(&merged, &exp.join("rollouts.jsonl"), "merged", fails);
    }
    if health {
        for f in ["quality_summary.json", "rollout_verdicts.jsonl"] {
            if exp.join(f).exists() {
                same_jsonl(&out.join(f), &exp.join(f), f, fails);
            }
        }
    }
    let counts = read_json(&exp.join("counts.json"));
    // --coverage-out carries the same numbers, under the same names.
    let ours = read_json(&coverage);
    for key in [
        "loaded_records",
        "counted_failure_rows",
        "counted_missing_rollouts",
        "expected_rollouts",
        "scored_rollouts",
        "missing_from_score",
        "dropped_by_class",
        "imputed_zeros",
        "aggregate_entries",
        "health",
    ] {
        if let Some(d) = diff(ours.get(key).unwrap_or(&Json::Null), counts.get(key).unwrap(), key) {
            fails.push(format!("--coverage-out: {d}"));
        }
    }
    for want in printed_lines(&counts) {
        if !so.contains(&want) {
            fails.push(format!("stdout lacks {want:?}:\n{so}"));
        }
    }
    for w in strings(counts.get("warnings")) {
        let w = w.trim_start_matches("[WARNING] ");
        let w = w.rsplit('/').next().unwrap();
        if !se.lines().any(|l| l.starts_with("warning: ") && l.ends_with(w)) {
            fails.push(format!("stderr lacks the warning {w:?}:\n{se}"));
        }
    }
}

/// Runs `check` on every case, then fails once, listing every case that differs.
fn check_each(cases: &[PathBuf], check: fn(&Path, &mut Vec<String>)) {
    let mut failed = Vec::new();
    for dir in cases {
        let mut fails = Vec::new();
        check(dir, &mut fails);
        if !fails.is_empty() {
            failed.push(format!("{}:\n  {}", dir.display(), fails.join("\n  ")));
        }
    }
    assert!(failed.is_empty(), "{} case(s) differ:\n{}", failed.len(), failed.join("\n"));
}

#[test]
fn every_aggregate_case_matches_nemo_gym() {
    let mut cases = case_dirs(&fixtures().join("conformance/gym_aggregate"));
    assert!(cases.len() >= 16, "the aggregate cases are in tests/fixtures");
    cases.retain(|c| c.file_name().unwrap() != "health");
    check_each(&cases, run_case);
}

fn health_case(dir: &Path, fails: &mut Vec<String>) {
    let case = read_json(&dir.join("case.json"));
    let out = TempDir::new("health");
    let mut args: Vec<String> = vec!["health".into()];
    args.extend(strings(case.get("rollouts")));
    args.extend(["--out-dir".into(), out.path().display().to_string()]);
    let ignored = strings(case.get("flags").and_then(|f| f.get("ignore_checks")));
    if !ignored.is_empty() {
        args.extend(["--ignore-checks".into(), ignored.join(",")]);
    }
    let o = rollstat().args(&args).current_dir(dir).output();
    if !o.status.success() {
        fails.push(format!("exit {:?}: {}", o.status.code(), stderr(&o)));
        return;
    }
    let exp = dir.join("expected");
    for f in ["quality_summary.json", "rollout_verdicts.jsonl"] {
        same_jsonl(&out.join(f), &exp.join(f), f, fails);
    }
    let want = std::fs::read_to_string(exp.join("stdout.txt")).unwrap();
    let line = want.lines().find(|l| l.starts_with("Rollout health:")).unwrap();
    if !stdout(&o).contains(line) {
        fails.push(format!("stdout lacks {line:?}: {}", stdout(&o)));
    }
}

#[test]
fn every_health_case_matches_nemo_gym() {
    let mut cases = case_dirs(&fixtures().join("conformance/gym_aggregate/health"));
    assert!(cases.len() >= 4, "the constructed health cases are in tests/fixtures");
    cases.extend(example_cases("gym_aggregate/health", "case.json", |n| n.starts_with("real_")));
    check_each(&cases, health_case);
}

/// A generated sweep whose failed rollouts are in its sidecar.
fn failing_sweep(d: &TempDir, name: &str, extra: &[&str]) -> PathBuf {
    let dir = d.join(name);
    let mut args = vec!["--tasks", "40", "--repeats", "2", "--agents", "2", "--fan-out", "--task-seed", "3"];
    args.extend_from_slice(extra);
    generate(&dir, &args);
    dir
}

/// The failures that stand in a run's sidecar, counted from the files: per (task,
/// rollout) the last line, unless a result of that rollout exists. Keyed by (agent,
/// task), with the class.
fn standing(dir: &Path) -> Vec<(String, i64, String)> {
    let key = |r: &Json| {
        let agent = r.get("agent_ref").and_then(|a| a.get("name")).and_then(Json::as_str).unwrap().to_string();
        (agent, int(r.get("_ng_task_index")).unwrap(), int(r.get("_ng_rollout_index")).unwrap())
    };
    let results: std::collections::HashSet<_> = read_jsonl(&dir.join("rollouts.jsonl")).iter().map(key).collect();
    let mut last: std::collections::BTreeMap<(String, i64, i64), String> = Default::default();
    for r in read_jsonl(&dir.join("rollouts_failures.jsonl")) {
        last.insert(key(&r), r.get("_ng_failure_class").and_then(Json::as_str).unwrap().to_string());
    }
    last.into_iter().filter(|(k, _)| !results.contains(k)).map(|((a, t, _), c)| (a, t, c)).collect()
}

/// A run with a sidecar shows its failures by class in `aggregate`'s and `profile`'s
/// closing reports, in the Parquet tasks and agents tables, and in the report's coverage
/// section.
#[test]
fn failures_show_in_the_summary_the_tables_and_the_report() {
    use polars::prelude::*;
    let d = TempDir::new("failures");
    let dir = failing_sweep(&d, "run", &["--failure-frac", "0.15"]);
    let rollouts = dir.join("rollouts.jsonl");
    let failed = standing(&dir);
    assert!(failed.len() > 5, "the sweep has failures: {failed:?}");
    let mut by_class: std::collections::BTreeMap<&str, usize> = Default::default();
    for (_, _, c) in &failed {
        *by_class.entry(c.as_str()).or_default() += 1;
    }
    let classes: Vec<String> = by_class.iter().map(|(c, n)| format!("{n} {c}")).collect();

    let o = run(&["aggregate", rollouts.to_str().unwrap(), "--no-health-check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let results = read_jsonl(&rollouts).len();
    let want = format!(
        "Rollouts missing from the score: {} of {} materialized ({} routed this run",
        failed.len(),
        results + failed.len(),
        classes.join(", ")
    );
    assert!(stdout(&o).contains(&want), "{want}\n{}", stdout(&o));
    assert!(stdout(&o).contains(&format!("Metrics cover: {results} of {}", results + failed.len())));

    // profile names them too, beside its completion counts.
    let inputs = dir.join("materialized_inputs.jsonl");
    let prof = d.join("prof");
    let o = run(&[
        "profile",
        rollouts.to_str().unwrap(),
        "--inputs",
        inputs.to_str().unwrap(),
        "--allow-partial",
        "--out-dir",
        prof.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let want = format!("Failed attempts without a result: {} ({};", failed.len(), classes.join(", "));
    assert!(stdout(&o).contains(&want), "{want}\n{}", stdout(&o));

    let tables = d.join("tables");
    let o = run(&["export", rollouts.to_str().unwrap(), "--out-dir", tables.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let read = |name: &str| ParquetReader::new(std::fs::File::open(tables.join(name)).unwrap()).finish().unwrap();
    let tasks = read("tasks.parquet");
    let (agent, task, n) = (
        tasks.column("agent").unwrap().str().unwrap().clone(),
        tasks.column("_ng_task_index").unwrap().i64().unwrap().clone(),
        tasks.column("failures").unwrap().i64().unwrap().clone(),
    );
    for ((a, t), n) in agent.iter().zip(task.iter()).zip(n.iter()) {
        let (a, t) = (a.unwrap(), t.unwrap());
        let want = failed.iter().filter(|f| f.0 == a && f.1 == t).count() as i64;
        assert_eq!(n, Some(want), "failures of {a} task {t}");
    }
    let agents = read("agents.parquet");
    let (agent, n) = (
        agents.column("agent").unwrap().str().unwrap().clone(),
        agents.column("failures").unwrap().i64().unwrap().clone(),
    );
    for (a, n) in agent.iter().zip(n.iter()) {
        let a = a.unwrap();
        assert_eq!(n, Some(failed.iter().filter(|f| f.0 == a).count() as i64), "failures of {a}");
    }

    let page = d.join("report.html");
    let o = run(&["report", rollouts.to_str().unwrap(), "--out", page.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    let agents_seen: std::collections::BTreeSet<&str> = failed.iter().map(|f| f.0.as_str()).collect();
    for a in agents_seen {
        let mut mine: std::collections::BTreeMap<&str, usize> = Default::default();
        for (_, _, c) in failed.iter().filter(|f| f.0 == a) {
            *mine.entry(c.as_str()).or_default() += 1;
        }
        let line: Vec<String> = mine.iter().map(|(c, n)| format!("{n} {c}")).collect();
        let want = format!("{a}: {}</li>", line.join(", "));
        assert!(html.contains(&want), "the report lacks {want:?}");
    }
}

/// `compare` counts, per run, the tasks it could not pair because the run's rollouts of
/// them failed, and says so.
#[test]
fn compare_counts_the_tasks_lost_to_failures() {
    let d = TempDir::new("failures-cmp");
    let base = failing_sweep(&d, "base", &["--seed", "1"]);
    let cand = failing_sweep(&d, "cand", &["--seed", "2", "--failure-frac", "0.5"]);
    let measured = |dir: &Path| -> std::collections::BTreeSet<(String, i64)> {
        read_jsonl(&dir.join("rollouts.jsonl"))
            .iter()
            .filter(|r| r.get("mask_sample") != Some(&Json::Bool(true)))
            .filter(|r| r.get("reward").is_some_and(|v| v.as_f64().is_some()))
            .map(|r| {
                let a = r.get("agent_ref").and_then(|a| a.get("name")).and_then(Json::as_str).unwrap();
                (a.to_string(), int(r.get("_ng_task_index")).unwrap())
            })
            .collect()
    };
    let (on_base, on_cand) = (measured(&base), measured(&cand));
    let failed: std::collections::BTreeSet<(String, i64)> =
        standing(&cand).into_iter().map(|(a, t, _)| (a, t)).collect();
    let agent = on_base.iter().next().unwrap().0.clone();
    let want = on_base.iter().filter(|k| k.0 == agent && !on_cand.contains(k) && failed.contains(k)).count();
    assert!(want > 0, "half the candidate's rollouts failed, so some of its tasks have no result");
    let o = run(&[
        "compare",
        base.join("rollouts.jsonl").to_str().unwrap(),
        cand.join("rollouts.jsonl").to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let mut lines = out.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name}: {head:?}"));
    let (run_col, lost_col) = (col("run"), col("unpaired_failed_tasks"));
    let row = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|r| r[run_col].ends_with(&agent) && r[run_col].contains("cand"))
        .unwrap_or_else(|| panic!("no row of the candidate's {agent}: {out}"));
    assert_eq!(row[lost_col], want.to_string(), "{out}");
    assert!(stderr(&o).contains("have no result because a rollout failed"), "{}", stderr(&o));
}

/// `aggregate` judges health from the records it read (re-reading only the lines with
/// trajectories, rollout ids or stages): its reports are byte-identical to `rollstat
/// health` on the same file, for trajectories of every kind, a generated sweep and one
/// whose last line was cut off mid-write.
#[test]
fn aggregate_and_health_write_the_same_reports() {
    let d = TempDir::new("health-same");
    let sweep = d.join("sweep");
    generate(&sweep, &["--tasks", "30", "--repeats", "3", "--agents", "2", "--masked-frac", "0.1"]);
    let checks = fixtures().join("conformance/gym_aggregate/health/rollout_checks/rollouts.jsonl");
    // A run that crashed mid-write: its last line is cut off (a warning for aggregate, an
    // unreadable record for the health check).
    let text = std::fs::read(sweep.join("rollouts.jsonl")).unwrap();
    let cut = d.join("cut.jsonl");
    std::fs::write(&cut, &text[..text.len() - 200]).unwrap();
    for (k, rollouts) in [sweep.join("rollouts.jsonl"), checks, cut].iter().enumerate() {
        let (a, h) = (d.join(&format!("a{k}")), d.join(&format!("h{k}")));
        std::fs::create_dir_all(&a).unwrap();
        let o = run(&["aggregate", rollouts.to_str().unwrap(), "--out", a.join("agg.json").to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let o = run(&["health", rollouts.to_str().unwrap(), "--out-dir", h.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        for f in ["quality_summary.json", "rollout_verdicts.jsonl"] {
            let (x, y) = (std::fs::read(a.join(f)).unwrap(), std::fs::read(h.join(f)).unwrap());
            assert!(x == y, "{f} of {} differs between aggregate and health", rollouts.display());
        }
    }
}

/// Rollouts from a pipe: without trajectories the health check needs nothing more; with
/// them it would read lines again, which a pipe cannot give, so the run is refused
/// (exit 2, nothing written), naming `--no-health-check`, which runs it.
#[test]
fn a_pipe_of_trajectories_is_refused_for_the_health_check() {
    let d = TempDir::new("health-pipe");
    let text =
        std::fs::read(fixtures().join("conformance/gym_aggregate/health/rollout_checks/rollouts.jsonl")).unwrap();
    let agg = d.join("agg.json");
    let piped = || rollstat().args(["aggregate", "/dev/stdin", "--out", agg.to_str().unwrap()]).stdin(text.clone());
    let o = piped().fails(2);
    assert!(stderr(&o).contains("--no-health-check"), "{}", stderr(&o));
    assert!(d.files().is_empty(), "{:?}", d.files());
    piped().arg("--no-health-check").ok();
    assert_eq!(d.files(), vec!["agg.json"]);
}
