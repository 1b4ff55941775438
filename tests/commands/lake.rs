//! `export --lake`, `query --lake` and `report --lake`: a folder of sweeps that grows,
//! is written atomically by any number of writers, keeps one type per column, and whose
//! trend page gives `compare`'s paired numbers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use super::read_pq;
use crate::common::*;

/// Generates a sweep into `dir` (2 agents fanned out over `tasks` tasks × 4 repeats,
/// asked by `--task-seed 5`, outcomes by `seed`) with `extra` options.
fn generated(dir: &Path, tasks: &str, seed: &str, extra: &[&str]) -> (PathBuf, PathBuf) {
    let mut args = vec!["generate", "-q", "--tasks", tasks, "--repeats", "4", "--agents", "2", "--fan-out"];
    args.extend(["--seed", seed, "--task-seed", "5", "--out-dir", dir.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    (dir.join("rollouts.jsonl"), dir.join("materialized_inputs.jsonl"))
}

/// A sweep of the tests, with mixed rewards.
fn sweep(dir: &Path, tasks: &str, seed: &str) -> (PathBuf, PathBuf) {
    generated(dir, tasks, seed, &["--reward", "mixed"])
}

/// Adds a sweep to the lake; returns the command's output.
fn add(lake: &Path, files: &(PathBuf, PathBuf), extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "export",
        "--rollouts",
        files.0.to_str().unwrap(),
        "--inputs",
        files.1.to_str().unwrap(),
        "--lake",
        lake.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args)
}

/// Rewrites each JSON line of `src` into `dst` with `f`.
fn rewrite(src: &Path, dst: &Path, f: impl Fn(&mut serde_json::Map<String, serde_json::Value>)) {
    let text = std::fs::read_to_string(src).unwrap();
    let mut out = String::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        f(v.as_object_mut().unwrap());
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write(dst, out).unwrap();
}

/// Every file under `dir`, relative to it, sorted.
fn listing(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().display().to_string());
            }
        }
    }
    let mut v = Vec::new();
    if dir.is_dir() {
        walk(dir, dir, &mut v);
    }
    v.sort();
    v
}

/// A query over the lake as CSV rows (header first).
fn query(lake: &Path, sql: &str) -> Vec<Vec<String>> {
    let o = run(&["query", "--lake", lake.to_str().unwrap(), "--format", "csv", sql]);
    assert!(o.status.success(), "{sql}: {}", stderr(&o));
    stdout(&o).lines().map(|l| l.split(',').map(str::to_string).collect()).collect()
}

/// The sweep id a run printed (`Sweep ID added to …`).
fn sweep_id(o: &std::process::Output) -> String {
    let s = stdout(o);
    s.split_whitespace().nth(1).unwrap_or_else(|| panic!("no sweep id in {s:?}")).to_string()
}

#[test]
fn adding_a_sweep_again_replaces_it_and_labels_become_columns() {
    let t = TempDir::new("lake-add");
    let (a, b) = (sweep(&t.join("a"), "40", "1"), sweep(&t.join("b"), "40", "2"));
    let lake = t.join("lake");
    let first = add(&lake, &a, &["--label", "step=1000", "--label", "model=m1"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(stdout(&first).contains("added to"), "{}", stdout(&first));
    let files = listing(&lake);
    let again = add(&lake, &a, &["--label", "step=1000", "--label", "model=m1"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(stdout(&again).contains("replaced in"), "{}", stdout(&again));
    assert_eq!(sweep_id(&first), sweep_id(&again), "the id follows the files' contents");
    assert_eq!(listing(&lake), files, "the same sweep again is no second sweep");
    assert_eq!(files.len(), 5, "{files:?}");
    let id_a = sweep_id(&first);
    let second = add(&lake, &b, &["--label", "step=2000", "--sweep-id", "step-2000"]);
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(sweep_id(&second), "step-2000");

    // The sweeps table: the sources with their sizes and checksums.
    let row = read_pq(&lake.join(format!("sweeps/sweep={id_a}/part-0.parquet")));
    let sources = row.column("sources").unwrap().str().unwrap().get(0).unwrap().to_string();
    let sources: serde_json::Value = serde_json::from_str(&sources).unwrap();
    for (s, f) in sources.as_array().unwrap().iter().zip([&a.0, &a.1]) {
        assert_eq!(s["bytes"].as_u64().unwrap(), std::fs::metadata(f).unwrap().len());
        assert_eq!(s["xxh3_128"].as_str().unwrap().len(), 32);
        assert!(s["path"].as_str().unwrap().ends_with(f.file_name().unwrap().to_str().unwrap()));
    }
    assert_eq!(row.column("num_rollouts").unwrap().i64().unwrap().get(0), Some(40 * 4 * 2));
    assert_eq!(row.column("num_tasks").unwrap().i64().unwrap().get(0), Some(40));

    // Labels and the sweep are columns of every table; a label a sweep lacks is null.
    let rows = query(
        &lake,
        "SELECT sweep, sweep_order, step, model, COUNT(*) AS n FROM rollouts GROUP BY sweep, sweep_order, step, model ORDER BY sweep_order",
    );
    assert_eq!(rows[0], ["sweep", "sweep_order", "step", "model", "n"]);
    assert_eq!(rows[1], [id_a.as_str(), "1", "1000", "m1", "320"]);
    assert_eq!(rows[2], ["step-2000", "2", "2000", "", "320"]);
    // The sweeps table holds its labels once.
    let rows = query(&lake, "SELECT sweep, step, model, num_agents FROM sweeps ORDER BY sweep_order");
    assert_eq!(rows[1], [id_a.as_str(), "1000", "m1", "2"]);

    // Sweeps keep the order they were added in, also within one second.
    let last = add(&lake, &b, &["--sweep-id", "a-last"]);
    assert!(last.status.success(), "{}", stderr(&last));
    let rows = query(&lake, "SELECT sweep FROM sweeps ORDER BY sweep_order");
    assert_eq!(rows[1..], [[id_a.as_str()], ["step-2000"], ["a-last"]]);

    // Refused before anything is written: a label that is a column, a bad id.
    for (args, says) in [
        (vec!["--label", "agent=x"], "`agent` is a column of the sweep's"),
        (vec!["--label", "sweep=x"], "column of the sweeps table"),
        (vec!["--label", "step"], "KEY=VALUE"),
        (vec!["--sweep-id", "../x"], "--sweep-id"),
    ] {
        let before = listing(&lake);
        let o = add(&lake, &b, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert_eq!(listing(&lake), before);
    }
}

#[test]
fn a_new_field_is_null_in_older_sweeps_and_a_changed_type_is_refused() {
    let t = TempDir::new("lake-schema");
    let (a, b) = (sweep(&t.join("a"), "30", "1"), sweep(&t.join("b"), "30", "2"));
    let scored = (t.join("b/scored.jsonl"), b.1.clone());
    rewrite(&b.0, &scored.0, |o| {
        let r = o["reward"].as_f64().unwrap_or(0.0);
        o.insert("judge_score".into(), serde_json::json!(r / 2.0 + 0.125));
    });
    let lake = t.join("lake");
    assert!(add(&lake, &a, &["--sweep-id", "old"]).status.success());
    let o = add(&lake, &scored, &["--sweep-id", "new"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = query(
        &lake,
        "SELECT sweep, COUNT(judge_score) AS scored, COUNT(*) AS n FROM rollouts GROUP BY sweep ORDER BY sweep",
    );
    assert_eq!(rows[1], ["new", "240", "240"]);
    assert_eq!(rows[2], ["old", "0", "240"]);
    let rows = query(&lake, r#"SELECT sweep, COUNT("mean/judge_score") AS m FROM tasks GROUP BY sweep ORDER BY sweep"#);
    assert_eq!(rows[1..], [["new", "60"], ["old", "0"]], "the old sweep's tasks have no mean/judge_score");

    // A field whose type changes: `judge_score` as text in a third sweep.
    let texted = (t.join("b/texted.jsonl"), b.1.clone());
    rewrite(&b.0, &texted.0, |o| {
        o.insert("judge_score".into(), serde_json::json!("high"));
    });
    let before = listing(&lake);
    let o = add(&lake, &texted, &["--sweep-id", "third"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("`judge_score`") && e.contains("third") && e.contains("new"), "{e}");
    assert_eq!(listing(&lake), before, "nothing written");

    // Whole in one sweep, fractional in the next: one type (double) in the lake.
    let whole = (t.join("b/whole.jsonl"), b.1.clone());
    rewrite(&b.0, &whole.0, |o| {
        o.insert("judge_score".into(), serde_json::json!(1));
    });
    let o = add(&lake, &whole, &["--sweep-id", "whole"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = query(&lake, "SELECT SUM(judge_score) AS s FROM rollouts WHERE sweep = 'whole'");
    assert_eq!(rows[1], ["240.0"]);
}

/// A label keeps its type: integers order as numbers in SQL, a double label takes whole
/// values as doubles, and text (or a fraction) for an integer label is refused with the
/// message of a changed column type, writing nothing.
#[test]
fn labels_keep_their_type_across_sweeps() {
    let t = TempDir::new("lake-label-types");
    let lake = t.join("lake");
    for (i, (step, lr)) in [("500", "0.5"), ("10000", "1"), ("-20", "2.5e-3")].into_iter().enumerate() {
        let files = sweep(&t.join(&format!("s{i}")), "10", &format!("{}", i + 1));
        let (id, step, lr) = (format!("s{i}"), format!("step={step}"), format!("lr={lr}"));
        let o = add(&lake, &files, &["--sweep-id", &id, "--label", &step, "--label", &lr, "--label", "tag=007"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let row = read_pq(&lake.join("sweeps/sweep=s1/part-0.parquet"));
    assert_eq!(row.column("step").unwrap().i64().unwrap().get(0), Some(10000));
    assert_eq!(row.column("lr").unwrap().f64().unwrap().get(0), Some(1.0), "a whole value of a double label");
    assert_eq!(row.column("tag").unwrap().str().unwrap().get(0), Some("007"), "not a number as written");
    let rows = query(&lake, "SELECT DISTINCT sweep, step, lr FROM tasks ORDER BY step");
    assert_eq!(rows[1..], [["s2", "-20", "0.0025"], ["s0", "500", "0.5"], ["s1", "10000", "1.0"]]);
    let rows = query(&lake, "SELECT sweep FROM sweeps WHERE step > 600");
    assert_eq!(rows[1..], [["s1"]]);

    let before = listing(&lake);
    let files = sweep(&t.join("s3"), "10", "4");
    let mut messages = Vec::new();
    for value in ["final", "1.5"] {
        let o = add(&lake, &files, &["--sweep-id", "s3", "--label", &format!("step={value}")]);
        assert_eq!(o.status.code(), Some(2), "step={value}: {}", stderr(&o));
        messages.push(stderr(&o));
    }
    assert_eq!(listing(&lake), before, "nothing written");
    assert!(
        messages[0].contains("column `step` of the sweeps table is str in sweep s3 but i64 in sweep s0"),
        "{}",
        messages[0]
    );
    assert!(messages[0].contains("a column keeps one type across the lake"), "{}", messages[0]);
    assert!(
        messages[1].contains("column `step` of the sweeps table is f64 in sweep s3 but i64 in sweep s0"),
        "{}",
        messages[1]
    );
    // A number given to a text label is text.
    let o = add(&lake, &files, &["--sweep-id", "s3", "--label", "tag=8"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let row = read_pq(&lake.join("sweeps/sweep=s3/part-0.parquet"));
    assert_eq!(row.column("tag").unwrap().str().unwrap().get(0), Some("8"));
}

/// `export` writes every run's tables: a warning raised for several runs (a field constant
/// across repeats) is said once, naming them; `aggregate`, NeMo Gym's command, says it
/// per run as NeMo Gym does.
#[test]
fn export_says_each_warning_once_naming_the_runs() {
    let t = TempDir::new("lake-warnings");
    let dir = t.join("s");
    let args = ["--tasks", "150", "--repeats", "4", "--agents", "3", "--fan-out", "--task-seed", "3", "--seed", "1000"];
    generate(&dir, &args);
    let files = (dir.join("rollouts.jsonl"), dir.join("materialized_inputs.jsonl"));
    let lake = t.join("lake");
    let o = add(&lake, &files, &["--label", "step=1000"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let warned = |o: &std::process::Output, field: &str| -> Vec<String> {
        let needle = format!("[`{field}` across repeats, ");
        stderr(o).lines().filter(|l| l.starts_with("warning: ") && l.contains(&needle)).map(str::to_string).collect()
    };
    let lines = warned(&o, "mean/question_id");
    assert_eq!(lines.len(), 1, "{}", stderr(&o));
    let agents = ["blackjack_gymnasium_agent", "code_gen_simple_agent", "math_with_judge_simple_agent"];
    assert!(lines[0].ends_with(&format!("across repeats, runs {}] (3 times)", agents.join(", "))), "{}", lines[0]);
    let (r, i) = (files.0.to_str().unwrap(), files.1.to_str().unwrap());
    let (tables, agg) = (t.join("tables"), t.join("a.json"));
    let o = run(&["export", r, "--inputs", i, "--out-dir", tables.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(warned(&o, "mean/question_id"), lines);
    let o = run(&["aggregate", r, "--inputs", i, "--out", agg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let per_run = warned(&o, "mean/question_id");
    assert_eq!(per_run.len(), 3, "{}", stderr(&o));
    for (line, agent) in per_run.iter().zip(agents) {
        assert!(line.ends_with(&format!("across repeats, {agent}]")), "{line}");
    }
}

/// Per agent: the trend page's paired rows (`data-key` → `data-value`), by (run, to).
fn trend_rows(html: &str) -> BTreeMap<(String, String), BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for row in html.split("<tr data-run=\"").skip(1) {
        let row = &row[..row.find("</tr>").unwrap()];
        let run = row[..row.find('"').unwrap()].to_string();
        let to = row.split("data-to=\"").nth(1).unwrap();
        let to = to[..to.find('"').unwrap()].to_string();
        let mut cells = BTreeMap::new();
        for cell in row.split("data-key=\"").skip(1) {
            let key = &cell[..cell.find('"').unwrap()];
            if let Some(v) = cell.split("data-value=\"").nth(1) {
                let v = &v[..v.find('"').unwrap()];
                cells.insert(key.to_string(), v.to_string());
            } else {
                let text = &cell[cell.find('>').unwrap() + 1..];
                cells.insert(key.to_string(), text[..text.find('<').unwrap()].to_string());
            }
        }
        out.insert((run, to), cells);
    }
    out
}

#[test]
fn the_trend_report_gives_compares_paired_differences() {
    let t = TempDir::new("lake-trend");
    let sweeps: Vec<(PathBuf, PathBuf)> =
        ["1", "2", "3"].iter().map(|s| sweep(&t.join(&format!("s{s}")), "60", s)).collect();
    let lake = t.join("lake");
    // Added out of order: the page orders them by the label.
    for (i, step) in [(2, "3000"), (0, "1000"), (1, "2000")] {
        let o = add(&lake, &sweeps[i], &["--label", &format!("step={step}"), "--sweep-id", &format!("s{step}")]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let page = t.join("trend.html");
    let o = run(&["report", "--lake", lake.to_str().unwrap(), "--by", "step", "--out", page.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = trend_rows(&std::fs::read_to_string(&page).unwrap());
    assert_eq!(rows.len(), 4, "2 runs × 2 consecutive pairs: {rows:?}");
    let mut ps = Vec::new();
    for ((agent, to), cells) in &rows {
        let (from, to_i) = if to == "s2000" { (0, 1) } else { (1, 2) };
        assert!(to == "s2000" || to == "s3000", "{to}");
        let base = format!("{}:{agent}", sweeps[from].0.display());
        let o = run(&[
            "compare",
            "--rollouts",
            sweeps[from].0.to_str().unwrap(),
            "--rollouts",
            sweeps[to_i].0.to_str().unwrap(),
            "--inputs",
            sweeps[from].1.to_str().unwrap(),
            "--inputs",
            sweeps[to_i].1.to_str().unwrap(),
            "--pair-by",
            "fingerprint",
            "--baseline",
            &base,
            "--format",
            "json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let want = rollstat::json::parse(&o.stdout).unwrap();
        let name = format!("{}:{agent}", sweeps[to_i].0.display());
        let rollstat::json::Json::Arr(want) = want else { panic!("compare's JSON is a list") };
        let row = want.iter().find(|r| r.get("run").and_then(|v| v.as_str()) == Some(&name)).unwrap();
        let num = |k: &str| row.get(k).and_then(|v| v.as_f64()).unwrap();
        let got = |k: &str| cells[k].parse::<f64>().unwrap();
        // The same numbers to the bit: the same task values and the same statistics.
        for k in ["diff", "p_value"] {
            assert_eq!(got(k), num(k), "{agent} → {to}: {k}");
        }
        assert_eq!(got("paired_tasks"), num("paired_tasks"));
        assert_eq!(got("wins"), num("wins"));
        assert_eq!(got("losses"), num("losses"));
        ps.push((got("p_value"), got("p_value_holm")));
    }
    // Holm over the four changes shown.
    let raw: Vec<Option<f64>> = ps.iter().map(|p| Some(p.0)).collect();
    for (adj, (_, shown)) in rollstat::stats::holm::holm(&raw).into_iter().zip(&ps) {
        assert!(close(adj.unwrap(), *shown), "{adj:?} vs {shown}");
    }
}

#[test]
fn flips_pair_tasks_by_fingerprint_wherever_they_sit() {
    let t = TempDir::new("lake-flips");
    let (a, b) = (sweep(&t.join("a"), "50", "1"), sweep(&t.join("b"), "50", "9"));
    // The second sweep asks the same questions at other task indexes.
    let moved = (t.join("b/moved.jsonl"), t.join("b/moved_inputs.jsonl"));
    let shift = |o: &mut serde_json::Map<String, serde_json::Value>| {
        let i = o["_ng_task_index"].as_i64().unwrap();
        o.insert("_ng_task_index".into(), serde_json::json!((i + 17) % 50));
    };
    rewrite(&b.0, &moved.0, shift);
    rewrite(&b.1, &moved.1, shift);
    let lake = t.join("lake");
    assert!(add(&lake, &a, &["--sweep-id", "a"]).status.success());
    let o = add(&lake, &moved, &["--sweep-id", "b"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = query(&lake, "sweep_flips");
    let head = &rows[0];
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let got: BTreeSet<(String, String, String)> = rows[1..]
        .iter()
        .map(|r| (r[col("agent")].clone(), r[col("task_fingerprint")].clone(), r[col("flip")].clone()))
        .collect();
    for r in &rows[1..] {
        let (from, to): (i64, i64) = (r[col("from_task")].parse().unwrap(), r[col("to_task")].parse().unwrap());
        assert_eq!((from + 17) % 50, to, "paired on what the task asks, not where it sits");
    }
    // The same pairs, found here from the two tasks partitions.
    let read = |s: &str| {
        let df = read_pq(&lake.join(format!("tasks/sweep={s}/part-0.parquet")));
        let (ag, fp, m) =
            (df.column("agent").unwrap(), df.column("task_fingerprint").unwrap(), df.column("mean/reward").unwrap());
        let mut out = BTreeMap::new();
        for i in 0..df.height() {
            out.insert(
                (ag.str().unwrap().get(i).unwrap().to_string(), fp.str().unwrap().get(i).unwrap().to_string()),
                m.f64().unwrap().get(i).unwrap(),
            );
        }
        out
    };
    let (ta, tb) = (read("a"), read("b"));
    let mut want = BTreeSet::new();
    for (k, &x) in &ta {
        let Some(&y) = tb.get(k) else { continue };
        if (x >= 0.5) != (y >= 0.5) {
            want.insert((k.0.clone(), k.1.clone(), if y >= 0.5 { "fixed" } else { "broken" }.to_string()));
        }
    }
    assert!(!want.is_empty(), "the sweeps differ somewhere");
    assert_eq!(got, want);
}

fn spawn_add(lake: &Path, files: &(PathBuf, PathBuf), id: &str) -> Child {
    rollstat()
        .args(["export", "--rollouts", files.0.to_str().unwrap(), "--inputs", files.1.to_str().unwrap()])
        .args(["--lake", lake.to_str().unwrap(), "--sweep-id", id])
        .spawn()
}

/// How long adding `files` to a scratch lake takes here, in milliseconds: kills are drawn
/// across that span, so they land while reading, writing and renaming alike.
fn add_millis(t: &TempDir, files: &(PathBuf, PathBuf)) -> u64 {
    let start = std::time::Instant::now();
    assert!(add(&t.join("timing-lake"), files, &[]).status.success());
    start.elapsed().as_millis() as u64
}

/// The bigger sweep the kill tests interrupt (48,000 rollouts).
fn big_sweep(dir: &Path, seed: &str) -> (PathBuf, PathBuf) {
    generated(dir, "6000", seed, &["--text-bytes", "100"])
}

/// The lake is readable: every Parquet file opens, and each sweep the sweeps table lists
/// has all five files.
fn assert_readable(lake: &Path) -> BTreeSet<String> {
    let files = listing(lake);
    for f in files.iter().filter(|f| f.ends_with(".parquet")) {
        let _ = read_pq(&lake.join(f));
    }
    let ids: BTreeSet<String> = query(lake, "SELECT sweep FROM sweeps")[1..].iter().map(|r| r[0].clone()).collect();
    for id in &ids {
        for table in ["rollouts", "tasks", "agents", "repeats", "sweeps"] {
            assert!(files.contains(&format!("{table}/sweep={id}/part-0.parquet")), "{id}: no {table} in {files:?}");
        }
    }
    ids
}

#[test]
fn two_writers_at_once_both_land_and_a_killed_one_leaves_the_lake_readable() {
    let t = TempDir::new("lake-writers");
    let (a, b) = (big_sweep(&t.join("a"), "1"), big_sweep(&t.join("b"), "2"));
    let lake = t.join("lake");
    let (mut x, mut y) = (spawn_add(&lake, &a, "a"), spawn_add(&lake, &b, "b"));
    assert!(x.wait().unwrap().success() && y.wait().unwrap().success());
    assert_eq!(assert_readable(&lake), BTreeSet::from(["a".to_string(), "b".to_string()]));

    // Killed at random points while adding (and while replacing) a sweep.
    let (mut rng, span) = (Rng(7), add_millis(&t, &b));
    for round in 0..8 {
        let id = if round % 2 == 0 { "c" } else { "a" };
        let mut child = spawn_add(&lake, &b, id);
        std::thread::sleep(std::time::Duration::from_millis(rng.below(span + 20)));
        // SAFETY: kill on the pid of a child we have not waited for yet.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        let ids = assert_readable(&lake);
        assert!(ids.contains("a") && ids.contains("b"), "{ids:?}");
        // Nothing a Parquet reader would pick up is left half-written.
        for f in listing(&lake) {
            assert!(f.ends_with("/part-0.parquet"), "left behind: {f}");
        }
    }
    let o = add(&lake, &b, &["--sweep-id", "c"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(assert_readable(&lake).contains("c"));
}

#[test]
fn aggregate_and_profile_add_the_sweep_export_would() {
    let t = TempDir::new("lake-runs");
    let a = sweep(&t.join("a"), "30", "1");
    let (lake, agg) = (t.join("lake"), t.join("a/agg.json"));
    let (r, i) = (a.0.to_str().unwrap(), a.1.to_str().unwrap());
    let o = run(&["aggregate", r, "--inputs", i, "--out", agg.to_str().unwrap(), "--lake", lake.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(agg.is_file());
    let id = stdout(&o).lines().find_map(|l| l.strip_prefix("Sweep ")).unwrap().split(' ').next().unwrap().to_string();
    let table = |name: &str| std::fs::read(lake.join(format!("{name}/sweep={id}/part-0.parquet"))).unwrap();
    let before: Vec<Vec<u8>> = ["rollouts", "tasks", "agents", "repeats"].map(table).to_vec();
    // `export` of the same files is the same sweep, with the same tables.
    let o = add(&lake, &a, &[]);
    assert!(stdout(&o).contains(&format!("Sweep {id} replaced in")), "{}", stdout(&o));
    assert_eq!(["rollouts", "tasks", "agents", "repeats"].map(table).to_vec(), before);
    let prof = t.join("prof");
    let o = run(&[
        "profile",
        r,
        "--inputs",
        i,
        "--out-dir",
        prof.to_str().unwrap(),
        "--lake",
        lake.to_str().unwrap(),
        "--sweep-id",
        "p",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(lake.join("tasks/sweep=p/part-0.parquet")).unwrap(), before[1]);

    // A sweep the lake refuses writes none of the command's files either.
    let texted = (t.join("a/texted.jsonl"), a.1.clone());
    rewrite(&a.0, &texted.0, |o| {
        o.insert("num_steps".into(), serde_json::json!("many"));
    });
    let out = t.join("a/refused.json");
    let o = run(&[
        "aggregate",
        texted.0.to_str().unwrap(),
        "--inputs",
        i,
        "--out",
        out.to_str().unwrap(),
        "--no-health-check",
        "--lake",
        lake.to_str().unwrap(),
        "--sweep-id",
        "q",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("`num_steps`"), "{}", stderr(&o));
    assert!(!out.exists() && !lake.join("sweeps/sweep=q").exists());
}

#[test]
fn the_next_writer_removes_what_a_killed_one_left() {
    let t = TempDir::new("lake-leftovers");
    let (a, b) = (sweep(&t.join("a"), "400", "1"), big_sweep(&t.join("b"), "2"));
    let lake = t.join("lake");
    assert!(add(&lake, &a, &["--sweep-id", "a"]).status.success());
    // Where the file system has no unnamed temporaries, a killed writer leaves hidden ones
    // (and partition folders it made): never a file a Parquet reader picks up.
    let (mut rng, span) = (Rng(11), add_millis(&t, &b));
    let mut left = Vec::new();
    // Until a kill has landed while writing (at least five rounds, at most thirty).
    for round in 0..30 {
        if round >= 5 && !left.is_empty() {
            break;
        }
        let mut child = rollstat()
            .args(["export", "--rollouts", b.0.to_str().unwrap(), "--inputs", b.1.to_str().unwrap()])
            .args(["--lake", lake.to_str().unwrap(), "--sweep-id", &format!("k{round}")])
            .env("ROLLSTAT_TMPFILE", "0")
            .spawn();
        // The second half of the run: writing and renaming.
        std::thread::sleep(std::time::Duration::from_millis(span / 2 + rng.below(span / 2 + 20)));
        // SAFETY: kill on the pid of a child we have not waited for yet.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        assert!(assert_readable(&lake).contains("a"));
        left.extend(listing(&lake).into_iter().filter(|f| !f.ends_with("/part-0.parquet")));
    }
    assert!(!left.is_empty(), "no kill landed while a file was being written");
    for f in &left {
        assert!(f.contains("/.part-0.parquet.rollstat-tmp-"), "left behind: {f}");
    }
    // Aged past the minute a live writer on another machine is given, they go with the
    // next writer, as do the partitions of sweeps whose row never landed.
    for p in left.iter().map(|f| lake.join(f)).filter(|p| p.exists()) {
        let o = Command::new("touch").args(["-d", "-3 minutes"]).arg(p).output().unwrap();
        assert!(o.status.success());
    }
    // A partition whose sweep never landed is removed a minute after it was renamed into
    // place (its status change time, which `touch` cannot move back): wait that out only
    // when a kill left one.
    let orphans = listing(&lake)
        .iter()
        .filter(|f| {
            let id = f.split('/').nth(1).unwrap_or("").trim_start_matches("sweep=").to_string();
            f.ends_with("/part-0.parquet") && !lake.join(format!("sweeps/sweep={id}/part-0.parquet")).exists()
        })
        .count();
    if orphans > 0 {
        std::thread::sleep(std::time::Duration::from_secs(61));
    }
    let o = add(&lake, &a, &["--sweep-id", "next"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let files = listing(&lake);
    assert!(files.iter().all(|f| f.ends_with("/part-0.parquet")), "{files:?}");
    let ids = assert_readable(&lake);
    for f in files {
        let id = f.split('/').nth(1).unwrap().trim_start_matches("sweep=").to_string();
        assert!(ids.contains(&id), "{f}: a partition of a sweep that never landed is left");
    }
}

#[test]
fn labels_never_shadow_columns_and_the_lake_answers_any_query() {
    let t = TempDir::new("lake-labels");
    let (a, b) = (sweep(&t.join("a"), "20", "1"), sweep(&t.join("b"), "20", "2"));
    let scored = (t.join("b/scored.jsonl"), b.1.clone());
    rewrite(&b.0, &scored.0, |o| {
        o.insert("foo".into(), serde_json::json!(1.5));
    });
    let lake = t.join("lake");
    assert!(add(&lake, &a, &["--sweep-id", "a", "--label", "foo=bar"]).status.success());
    // A later sweep with a column named like an earlier label, and a label named like an
    // earlier sweep's column: both refused, nothing written.
    let before = listing(&lake);
    let o = add(&lake, &scored, &["--sweep-id", "b"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("label `foo`"), "{}", stderr(&o));
    assert_eq!(listing(&lake), before);
    let lake2 = t.join("lake2");
    assert!(add(&lake2, &scored, &["--sweep-id", "b"]).status.success());
    let o = add(&lake2, &a, &["--sweep-id", "a", "--label", "foo=bar"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("column of the rollouts table of sweep b"), "{}", stderr(&o));

    // Queries that need no column of a table (a count) work on a lake too.
    assert!(add(&lake2, &b, &["--sweep-id", "c", "--label", "step=2"]).status.success());
    for (sql, want) in [
        ("SELECT COUNT(*) AS n FROM rollouts", "320"),
        ("SELECT COUNT(*) AS n FROM tasks", "80"),
        ("SELECT COUNT(*) AS n FROM sweeps", "2"),
        ("SELECT COUNT(*) AS n FROM rollouts WHERE sweep = 'c'", "160"),
    ] {
        assert_eq!(query(&lake2, sql)[1], [want], "{sql}");
    }

    // The page never replaces a file of the lake, and its default name follows the
    // lake's folder however it is written.
    let part = lake2.join("tasks/sweep=c/part-0.parquet");
    let o = run(&["report", "--lake", lake2.to_str().unwrap(), "--out", part.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let _ = read_pq(&part);
    rollstat().args(["report", "--lake", "."]).current_dir(&lake2).ok();
    assert!(t.join("lake2_trend.html").is_file(), "{:?}", t.files());
    // Not a field of the rollouts: refused.
    for metric in ["sweep_order", "_ng_rollout_index", "step", "nope"] {
        let o = run(&["report", "--lake", lake2.to_str().unwrap(), "--metric", metric, "--out", "/dev/null"]);
        assert_eq!(o.status.code(), Some(2), "{metric}: {}", stderr(&o));
    }
}
