//! `rollstat eval-compare` (NeMo Gym's `gym eval compare`): every case of the compare
//! conformance corpus against NeMo Gym 0.7.0's own reports, refusals, bad
//! aggregate files, `--compute-missing`, the rebuild of older aggregate files, and the
//! output rules (nothing partial, no input overwritten).

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::common::*;
use rollstat::json::Json;

/// Runs `rollstat eval-compare ARGS` in `cwd`.
fn eval_compare(cwd: &Path, args: &[&str]) -> Output {
    rollstat().current_dir(cwd).arg("eval-compare").args(args).output()
}

fn str_of(j: Option<&Json>) -> String {
    match j {
        Some(Json::Str(s)) => s.clone(),
        _ => String::new(),
    }
}

/// `warning: MSG` / `warning: MSG (N times)` lines of stderr, with `case` written `<CASE>`.
fn our_warnings(stderr: &str, case: &str) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("warning: "))
        .map(|m| {
            let m = m.replace(case, "<CASE>");
            if let Some((msg, n)) = m.strip_suffix(" times)").and_then(|b| b.rsplit_once(" (")) {
                if let Ok(n) = n.parse() {
                    return (msg.to_string(), n);
                }
            }
            (m, 1)
        })
        .collect();
    out.sort();
    out
}

fn expected_warnings(file: &Path) -> Vec<(String, i64)> {
    let w = read_json(file);
    let mut out: Vec<(String, i64)> = match w.get("warnings") {
        Some(Json::Arr(list)) => list
            .iter()
            .map(|i| {
                let count = match i.get("count") {
                    Some(Json::Int(c)) => *c,
                    _ => 1,
                };
                (str_of(i.get("message")), count)
            })
            .collect(),
        _ => vec![],
    };
    out.sort();
    out
}

/// Compares like `common::diff` (keys, order, int/float typing, 1e-12 relative) and
/// records the largest relative difference of two unequal floats in `worst`.
fn diff_json(got: &Json, want: &Json, path: &str, worst: &mut f64) -> Option<String> {
    match (got, want) {
        (Json::Obj(g), Json::Obj(w)) => {
            let gk: Vec<&str> = g.iter().map(|(k, _)| &**k).collect();
            let wk: Vec<&str> = w.iter().map(|(k, _)| &**k).collect();
            if gk != wk {
                return Some(format!("{path}: keys {gk:?} != {wk:?}"));
            }
            g.iter().zip(w).find_map(|((k, a), (_, b))| diff_json(a, b, &format!("{path}.{k}"), worst))
        }
        (Json::Arr(g), Json::Arr(w)) => {
            if g.len() != w.len() {
                return Some(format!("{path}: {} items != {}", g.len(), w.len()));
            }
            g.iter().zip(w).enumerate().find_map(|(i, (a, b))| diff_json(a, b, &format!("{path}[{i}]"), worst))
        }
        (Json::Float(a), Json::Float(b)) => {
            if a != b {
                let rel = (a - b).abs() / a.abs().max(b.abs());
                *worst = worst.max(rel);
            }
            (!close(*a, *b)).then(|| format!("{path}: {a:?} != {b:?}"))
        }
        (a, b) => (a != b).then(|| format!("{path}: {a:?} != {b:?}")),
    }
}

/// The report's own provenance (when, which writer, which command) is ours.
fn without_provenance(mut j: Json) -> Json {
    for k in ["generated_at", "nemo_gym_version", "command"] {
        j.set(k, Json::Str(String::new()));
    }
    j
}

/// Our report text with the case folder written `<CASE>`.
fn read_ours(file: &Path, case: &str) -> String {
    std::fs::read_to_string(file).unwrap_or_default().replace(case, "<CASE>")
}

fn check_markdown(got: &str, want: &str, what: &str, fails: &mut Vec<String>) {
    let keep = |l: &&str| !l.starts_with("Generated") && !l.starts_with("Command:");
    let g: Vec<&str> = got.split('\n').filter(keep).collect();
    let w: Vec<&str> = want.split('\n').filter(keep).collect();
    if let Some(i) = (0..g.len().max(w.len())).find(|&i| g.get(i) != w.get(i)) {
        fails.push(format!("{what} compare_report.md line {}:\n  ours: {:?}\n  want: {:?}", i + 1, g.get(i), w.get(i)));
    }
}

/// The reference refused: exit 2, nothing written, and our message names the same
/// problem (the missing file; the unknown agent, its file and the available agents).
fn check_refusal(err: &Json, o: &Output, out_dir: &TempDir, case: &str, what: &str, fails: &mut Vec<String>) {
    let msg = str_of(err.get("message"));
    let ours = stderr(o).replace(case, "<CASE>");
    if o.status.code() != Some(2) {
        fails.push(format!("{what}: expected exit 2 ({msg}), got {:?}: {ours}", o.status.code()));
    }
    if !out_dir.files().is_empty() {
        fails.push(format!("{what}: refused but wrote {:?}", out_dir.files()));
    }
    let quoted: Vec<&str> = msg.split('\'').skip(1).step_by(2).collect();
    let must: Vec<String> = match str_of(err.get("type")).as_str() {
        "ConfigPathNotFoundError" => vec![quoted[0].to_string()],
        "ConfigError" if msg.contains(" is not in ") => {
            let available = msg.split("Available: ").nth(1).unwrap_or("").trim_end_matches('.');
            vec![quoted[0].to_string(), quoted[1].to_string(), format!("Available: {available}")]
        }
        other => {
            fails.push(format!("{what}: a refusal this check does not know ({other}: {msg})"));
            return;
        }
    };
    for m in must {
        if !ours.contains(&m) {
            fails.push(format!("{what}: our error does not name {m:?}: {ours}"));
        }
    }
}

fn case_args(c: &Json) -> Vec<String> {
    match c.get("args") {
        Some(Json::Arr(a)) => a.iter().map(|x| str_of(Some(x))).collect(),
        _ => vec![],
    }
}

/// Runs one case into a fresh report folder; checks it; returns the largest relative
/// float difference of its JSON report.
fn check_case(case: &Path, fails: &mut Vec<String>) -> f64 {
    let c = read_json(&case.join("case.json"));
    let what = case.file_name().unwrap().to_string_lossy().into_owned();
    let real = std::fs::canonicalize(case).unwrap().display().to_string();
    let out_dir = TempDir::new("evalcmp-conf");
    let mut args = case_args(&c);
    args.extend(["--output-dir".to_string(), out_dir.path().display().to_string()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut o = eval_compare(case, &a);
    // Runs on different questions are refused first (NeMo Gym pairs them by index); with
    // --allow-task-mismatch the report is NeMo Gym's. Which cases those are is decided
    // here independently, from the rollouts' user messages.
    let refused = stderr(&o).contains("hold different tasks under the same index");
    let differ = tasks_differ(case, &case_args(&c));
    if refused != differ {
        fails.push(format!("{what}: refused as different tasks: {refused}, the user messages differ: {differ}"));
        return 0.0;
    }
    if refused {
        if o.status.code() != Some(2) || std::fs::read_dir(out_dir.path()).map_or(0, |d| d.count()) > 0 {
            fails.push(format!("{what}: a task mismatch must exit 2 and write nothing: {}", stderr(&o)));
        }
        let mut again = a.clone();
        again.push("--allow-task-mismatch");
        o = eval_compare(case, &again);
        let refuses = matches!(c.get("oracle_exit"), Some(Json::Int(2)));
        if !refuses && !stderr(&o).contains("shared task indexes hold different tasks") {
            fails.push(format!("{what}: --allow-task-mismatch gave no warning counting the pairs: {}", stderr(&o)));
        }
    }
    let exp = case.join("expected");
    let mut worst = 0.0;
    let kept: String = stderr(&o)
        .lines()
        .filter(|l| !l.contains("shared task indexes hold different tasks"))
        .map(|l| format!("{l}\n"))
        .collect();
    let ours_w = our_warnings(&kept, &real);
    let want_w = expected_warnings(&exp.join("compare_warnings.json"));
    if ours_w != want_w {
        fails.push(format!("{what}: warnings differ\n  ours: {ours_w:?}\n  want: {want_w:?}"));
    }
    if matches!(c.get("oracle_exit"), Some(Json::Int(2))) {
        check_refusal(&read_json(&exp.join("compare_error.json")), &o, &out_dir, &real, &what, fails);
        return worst;
    }
    if !o.status.success() {
        fails.push(format!("{what}: failed: {}", stderr(&o)));
        return worst;
    }
    let got = read_ours(&out_dir.join("compare_report.json"), &real);
    match rollstat::json::parse(got.as_bytes()) {
        Ok(g) => {
            let w = read_json(&exp.join("compare_report.json"));
            if let Some(d) = diff_json(&without_provenance(g), &without_provenance(w), "", &mut worst) {
                fails.push(format!("{what} compare_report.json {d}"));
            }
        }
        Err(e) => fails.push(format!("{what}: our compare_report.json does not parse: {e}")),
    }
    let want_md = std::fs::read_to_string(exp.join("compare_report.md")).unwrap();
    check_markdown(&read_ours(&out_dir.join("compare_report.md"), &real), &want_md, &what, fails);
    worst
}

/// Whether the case's baseline and candidate rollouts hold different user messages under
/// a shared task index (read with serde_json, apart from rollstat's fingerprint).
fn tasks_differ(case: &Path, args: &[String]) -> bool {
    let after = |flag: &str| args.iter().position(|a| a == flag).map(|i| args[i + 1].clone());
    let mut files = vec![after("--baseline").unwrap()];
    files.extend(after("--candidates").unwrap().split(',').map(str::to_string));
    let questions = |f: &str| -> Option<std::collections::BTreeMap<i64, String>> {
        let text = std::fs::read_to_string(case.join(f)).ok()?;
        let mut out = std::collections::BTreeMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            let Some(t) = v["_ng_task_index"].as_i64() else { continue };
            let input = &v["responses_create_params"]["input"];
            let user: Vec<String> = match input {
                serde_json::Value::String(s) => vec![s.clone()],
                serde_json::Value::Array(items) => items
                    .iter()
                    .filter(|m| m["role"] == "user")
                    .map(|m| match &m["content"] {
                        serde_json::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect(),
                _ => continue,
            };
            out.insert(t, user.join("\u{ff}"));
        }
        Some(out)
    };
    let Some(base) = questions(&files[0]) else { return false };
    files[1..].iter().filter_map(|f| questions(f)).any(|q| q.iter().any(|(t, u)| base.get(t).is_some_and(|b| b != u)))
}

/// The compare cases: the generated ones in tests/fixtures, then those on NeMo Gym's
/// real aggregate files from the optional folder.
fn compare_cases() -> Vec<PathBuf> {
    let root = fixtures().join("conformance/compare");
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.join("case.json").exists()).collect();
    v.sort();
    assert!(v.len() >= 9, "the generated compare cases are in tests/fixtures: {v:?}");
    v.extend(example_cases("compare", "case.json", |n| n.starts_with("real_")));
    v
}

/// Every case of the compare corpus: the same reports (JSON within 1e-12 relative, same
/// keys, order and typing; Markdown line for line but for the `Generated`/`Command:`
/// lines), the same warnings with their counts, and the same refusals.
#[test]
fn conformance_compare_corpus() {
    let cases = compare_cases();
    let mut fails = Vec::new();
    let mut worst = 0.0f64;
    for case in &cases {
        let (_scratch, copy) = unpacked(case);
        worst = worst.max(check_case(&copy, &mut fails));
    }
    eprintln!("eval-compare conformance: {} cases, max relative float difference {worst:e}", cases.len());
    if !fails.is_empty() {
        panic!("{} compare conformance failures:\n{}", fails.len(), fails.join("\n"));
    }
}

/// A sweep of `tasks` x `repeats` with two agents (the same tasks in every sweep),
/// aggregated by rollstat, in `dir`.
fn run_dir(dir: &Path, seed: &str, tasks: &str, repeats: &str) -> PathBuf {
    // One task seed: every run asks the same questions, with its own outcomes.
    generate(
        dir,
        &[
            "--tasks",
            tasks,
            "--repeats",
            repeats,
            "--agents",
            "2",
            "--seed",
            seed,
            "--task-seed",
            "5",
            "--reward",
            "binary",
        ],
    );
    let rollouts = dir.join("rollouts.jsonl");
    let o = run(&["aggregate", "--rollouts", rollouts.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    dir.join("rollouts_aggregate_metrics.json")
}

/// Two aggregated runs `base/` and `cand/` in a fresh folder.
fn two_runs() -> TempDir {
    let d = TempDir::new("evalcmp");
    run_dir(&d.join("base"), "11", "30", "3");
    run_dir(&d.join("cand"), "12", "30", "3");
    d
}

fn report(dir: &Path) -> Json {
    without_provenance(read_json(&dir.join("compare_report.json")))
}

/// The report records the command as it was run, shell-quoted, in both formats.
#[test]
fn reports_record_the_command_line() {
    let d = two_runs();
    let args = ["--baseline", "base/rollouts.jsonl", "--candidates", "cand/rollouts.jsonl", "--output-dir", "out dir"];
    let o = eval_compare(d.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let want =
        "rollstat eval-compare --baseline base/rollouts.jsonl --candidates cand/rollouts.jsonl --output-dir 'out dir'";
    let r = read_json(&d.join("out dir/compare_report.json"));
    assert_eq!(r.get("command").and_then(Json::as_str), Some(want));
    let md = std::fs::read_to_string(d.join("out dir/compare_report.md")).unwrap();
    assert!(md.lines().any(|l| l == format!("Command: `{want}`")), "{md}");
}

/// An output folder that is a file is refused naming the flag as it was given, and the
/// file is left as it was.
#[test]
fn an_output_dir_that_is_a_file_is_refused_by_its_flag() {
    let d = two_runs();
    std::fs::write(d.join("taken"), "keep").unwrap();
    let args = ["--baseline", "base/rollouts.jsonl", "--candidates", "cand/rollouts.jsonl", "--output-dir", "taken"];
    let o = eval_compare(d.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("taken: is not a folder; --output-dir takes a folder"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(d.join("taken")).unwrap(), "keep");
}

/// With no flags besides the runs, the reports land in the candidate's folder, both
/// formats, comparing every agent both runs have.
#[test]
fn writes_both_reports_beside_the_candidate() {
    let d = two_runs();
    let o = eval_compare(d.path(), &["--baseline", "base/rollouts.jsonl", "--candidates", "cand/rollouts.jsonl"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report(&d.join("cand"));
    let Some(Json::Arr(comparisons)) = r.get("comparisons") else { panic!("no comparisons") };
    assert_eq!(comparisons.len(), 2);
    assert!(d.join("cand/compare_report.md").exists());
    assert!(stdout(&o).contains("Agents compared: "), "{}", stdout(&o));
}

#[test]
fn report_format_md_writes_only_markdown() {
    let d = two_runs();
    let out = d.join("reports");
    let o = eval_compare(
        d.path(),
        &[
            "--baseline",
            "base/rollouts.jsonl",
            "--candidates",
            "cand/rollouts.jsonl",
            "--report-format",
            "md",
            "--output-dir",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, vec!["compare_report.md".to_string()]);
}

/// A candidate without its aggregate file is refused (exit 2, the file named, nothing
/// written); `--compute-missing` computes it first and gives the report a precomputed
/// file gives.
#[test]
fn missing_aggregate_refused_unless_computed() {
    let d = two_runs();
    let agg = d.join("cand/rollouts_aggregate_metrics.json");
    let out = d.join("reports");
    let args = [
        "--baseline",
        "base/rollouts.jsonl",
        "--candidates",
        "cand/rollouts.jsonl",
        "--output-dir",
        out.to_str().unwrap(),
    ];
    let o = eval_compare(d.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = report(&out);
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_file(&agg).unwrap();

    let o = eval_compare(d.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&agg.display().to_string()), "{}", stderr(&o));
    assert!(stderr(&o).contains("--compute-missing"), "{}", stderr(&o));
    assert!(!out.exists() && !agg.exists());

    let mut with = args.to_vec();
    with.push("--compute-missing");
    let o = eval_compare(d.path(), &with);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(agg.exists());
    assert_eq!(report(&out), before);
}

/// The reference's missing-aggregate case, computed: the candidate's rollouts are the
/// same sweep as `binary_two_agents`, so the report is that case's report.
#[test]
fn compute_missing_reproduces_the_reference_report() {
    let root = fixtures().join("conformance/compare");
    let (_scratch, d) = unpacked(&root.join("missing_aggregate"));
    assert!(!d.join("cand/rollouts_aggregate_metrics.json").exists());
    let out = d.join("out");
    let o = eval_compare(
        &d,
        &[
            "--baseline",
            "base/rollouts.jsonl",
            "--candidates",
            "cand/rollouts.jsonl",
            "--compute-missing",
            // The corpus pair holds different tasks; NeMo Gym's report pairs them by index.
            "--allow-task-mismatch",
            "--output-dir",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.join("cand/rollouts_aggregate_metrics.json").exists());
    let real = std::fs::canonicalize(&d).unwrap().display().to_string();
    let got = rollstat::json::parse(read_ours(&out.join("compare_report.json"), &real).as_bytes()).unwrap();
    let want = read_json(&root.join("binary_two_agents/expected/compare_report.json"));
    let mut worst = 0.0;
    if let Some(e) = diff_json(&without_provenance(got), &without_provenance(want), "", &mut worst) {
        panic!("{e}");
    }
}

/// An agent only the baseline has is refused naming the candidate's file and its agents.
#[test]
fn agent_on_one_side_only_is_refused() {
    let d = TempDir::new("evalcmp-agent");
    run_dir(&d.join("base"), "3", "10", "2");
    let cand = d.join("cand");
    generate(
        &cand,
        &["--tasks", "10", "--repeats", "2", "--agents", "1", "--seed", "4", "--task-seed", "5", "--reward", "binary"],
    );
    let o = run(&["aggregate", "--rollouts", cand.join("rollouts.jsonl").to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let base_agg = read_json(&d.join("base/rollouts_aggregate_metrics.json"));
    let Json::Arr(entries) = &base_agg else { panic!() };
    let only_base = entries
        .iter()
        .map(|e| str_of(e.get("agent_ref").and_then(|r| r.get("name"))))
        .find(|n| !std::fs::read_to_string(cand.join("rollouts_aggregate_metrics.json")).unwrap().contains(n.as_str()))
        .expect("an agent only the baseline has");
    let out = d.join("out");
    let o = eval_compare(
        d.path(),
        &[
            "--baseline",
            "base/rollouts.jsonl",
            "--candidates",
            "cand/rollouts.jsonl",
            "--agent",
            &only_base,
            "--output-dir",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains(&format!("Agent '{only_base}' is not in")), "{e}");
    assert!(e.contains("cand/rollouts_aggregate_metrics.json") && e.contains("Available: "), "{e}");
    assert!(!out.exists());
}

/// Malformed aggregate files: each refused with exit 2, naming the file and what was
/// expected (and the key where one is at fault), with no report.
#[test]
fn malformed_aggregate_files_are_refused() {
    let d = two_runs();
    let agg = d.join("cand/rollouts_aggregate_metrics.json");
    let good = std::fs::read_to_string(&agg).unwrap();
    let cases: Vec<(String, &str)> = vec![
        ("{\"agent_ref\": ".to_string(), "not valid JSON"),
        ("{}".to_string(), "expected a JSON list of per-agent entries"),
        ("[]".to_string(), "contains no agent entries"),
        ("[1]".to_string(), "entry 0 is a number, not an object"),
        ("[{\"agent_metrics\": {}}]".to_string(), "key `agent_ref.name`"),
        (
            "[{\"agent_ref\": {\"name\": \"a\"}, \"group_level_metrics\": {}}]".to_string(),
            "key `group_level_metrics`: agent 'a': `group_level_metrics` is an object; expected a list of objects",
        ),
        (
            "[{\"agent_ref\": {\"name\": \"a\"}, \"group_level_metrics\": [{\"_ng_task_index\": \"7\"}]}]".to_string(),
            "`_ng_task_index` is a string; expected an integer",
        ),
        (
            "[{\"agent_ref\": {\"name\": \"a\"}}, {\"agent_ref\": {\"name\": \"a\"}}]".to_string(),
            "two entries for agent 'a'",
        ),
    ];
    let out = d.join("out");
    for (text, want) in cases {
        std::fs::write(&agg, &text).unwrap();
        let o = eval_compare(
            d.path(),
            &[
                "--baseline",
                "base/rollouts.jsonl",
                "--candidates",
                "cand/rollouts.jsonl",
                "--output-dir",
                out.to_str().unwrap(),
            ],
        );
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{text}: {e}");
        assert!(e.contains(&agg.display().to_string()) && e.contains(want), "{text}: {e}");
        assert!(!out.exists(), "{text}: wrote a report");
    }
    std::fs::write(&agg, good).unwrap();
}

/// An aggregate file from before repeat-level metrics: rebuilt from its rollout
/// summaries (with NeMo Gym's warning), it gives the Welch intervals the full file gives.
#[test]
fn older_aggregate_files_are_rebuilt_from_rollout_summaries() {
    let d = two_runs();
    let args = ["--baseline", "base/rollouts.jsonl", "--candidates", "cand/rollouts.jsonl", "--agent"];
    let agent = {
        let a = read_json(&d.join("base/rollouts_aggregate_metrics.json"));
        let Json::Arr(e) = a else { panic!() };
        str_of(e[0].get("agent_ref").and_then(|r| r.get("name")))
    };
    let full = d.join("full");
    let mut a: Vec<&str> = args.to_vec();
    a.extend([agent.as_str(), "--output-dir", full.to_str().unwrap()]);
    let o = eval_compare(d.path(), &a);
    assert!(o.status.success(), "{}", stderr(&o));
    // Strip what older files lack: repeat-level metrics and the across-repeat keys.
    let agg = d.join("cand/rollouts_aggregate_metrics.json");
    let Json::Arr(mut entries) = read_json(&agg) else { panic!() };
    for e in &mut entries {
        e.remove("repeat_level_metrics");
        if let Some(Json::Obj(m)) = e.get("agent_metrics").cloned() {
            let kept: Vec<_> = m.into_iter().filter(|(k, _)| !k.contains("_across_repeats/")).collect();
            e.set("agent_metrics", Json::Obj(kept));
        }
    }
    let mut text = Vec::new();
    rollstat::json::write_indented(&mut text, &Json::Arr(entries), 0);
    std::fs::write(&agg, text).unwrap();
    let rebuilt = d.join("rebuilt");
    let mut a: Vec<&str> = args.to_vec();
    a.extend([agent.as_str(), "--output-dir", rebuilt.to_str().unwrap()]);
    let o = eval_compare(d.path(), &a);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Repeat-level metrics are missing in") && stderr(&o).contains("stored rollout summaries"),
        "{}",
        stderr(&o)
    );
    let rows = |dir: &Path| {
        let r = report(dir);
        let Some(Json::Arr(c)) = r.get("comparisons") else { panic!() };
        let Some(Json::Arr(m)) = c[0].get("metrics") else { panic!() };
        m.iter()
            .map(|row| (str_of(row.get("metric")), row.get("candidates").cloned().unwrap()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let (f, r) = (rows(&full), rows(&rebuilt));
    assert!(f.contains_key("mean/reward"));
    for (metric, cands) in &f {
        let mut worst = 0.0;
        assert_eq!(diff_json(&r[metric], cands, metric, &mut worst), None);
    }
}

/// A report path that is one of the inputs is refused before anything is written.
#[test]
fn never_overwrites_an_input() {
    let d = two_runs();
    let out = d.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let input = out.join("compare_report.json");
    std::fs::copy(d.join("base/rollouts_aggregate_metrics.json"), &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let o = eval_compare(
        d.path(),
        &[
            "--baseline",
            "base/rollouts.jsonl",
            "--baseline-agg-metrics",
            input.to_str().unwrap(),
            "--candidates",
            "cand/rollouts.jsonl",
            "--output-dir",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("refusing to overwrite an input"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&input).unwrap(), before);
    assert!(!out.join("compare_report.md").exists());
}

/// Without agent flags, an agent only one run has is left out: the report lists it under
/// `skipped_agents` and in its warnings, stderr notes it, and the shared agent is compared.
#[test]
fn agents_of_one_run_only_are_left_out_by_default() {
    let d = TempDir::new("evalcmp-skip");
    run_dir(&d.join("base"), "3", "10", "2");
    let cand = d.join("cand");
    generate(
        &cand,
        &["--tasks", "10", "--repeats", "2", "--agents", "1", "--seed", "4", "--task-seed", "5", "--reward", "binary"],
    );
    let o = run(&["aggregate", "--rollouts", cand.join("rollouts.jsonl").to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = eval_compare(d.path(), &["--baseline", "base/rollouts.jsonl", "--candidates", "cand/rollouts.jsonl"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r = report(&cand);
    let Some(Json::Obj(skipped)) = r.get("skipped_agents") else { panic!("no skipped_agents") };
    assert_eq!(skipped.len(), 1);
    assert_eq!(&*skipped[0].0, "baseline");
    let Json::Arr(names) = &skipped[0].1 else { panic!() };
    let left_out = str_of(names.first());
    let Some(Json::Arr(comparisons)) = r.get("comparisons") else { panic!() };
    assert_eq!(comparisons.len(), 1);
    assert_ne!(str_of(comparisons[0].get("baseline_agent")), left_out);
    let note = format!("note: Agent(s) {left_out} are present only in baseline and were not compared.");
    assert!(stderr(&o).contains(&note), "{}", stderr(&o));
    let md = std::fs::read_to_string(cand.join("compare_report.md")).unwrap();
    assert!(md.contains(&format!("## Warnings\n\n- Agent(s) {left_out} are present only in baseline")), "{md}");
}
