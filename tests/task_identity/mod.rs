//! Pairing only the same task: `compare` and `report` check each task index holds the
//! same question (its fingerprint, a hash of its user messages) in every run before
//! pairing, refuse runs on different questions, and pair by content on request.

use std::path::{Path, PathBuf};

use crate::common::*;

/// A one-agent run of 60 tasks x 3 repeats: `task_seed` fixes the questions, `seed`
/// the outcomes.
fn sweep(d: &TempDir, name: &str, seed: u32, task_seed: u32) -> PathBuf {
    let dir = d.join(name);
    let (s, t) = (seed.to_string(), task_seed.to_string());
    generate(&dir, &["-q", "--tasks", "60", "--repeats", "3", "--agents", "1", "--seed", &s, "--task-seed", &t]);
    dir.join("rollouts.jsonl")
}

fn compare(args: &[&str]) -> std::process::Output {
    let mut a = vec!["compare", "--format", "json"];
    a.extend_from_slice(args);
    run(&a)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Rewrites every line of `src` into `dst` with `edit` applied to its JSON value.
fn rewrite(src: &Path, dst: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let text: String = std::fs::read_to_string(src)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            edit(&mut v);
            format!("{}\n", serde_json::to_string(&v).unwrap())
        })
        .collect();
    std::fs::write(dst, text).unwrap();
}

#[test]
fn different_datasets_are_refused() {
    let d = TempDir::new("tid-diff");
    let (a, b) = (sweep(&d, "a", 1, 1), sweep(&d, "b", 2, 2));
    let o = compare(&[s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("hold different tasks under the same index"), "{e}");
    assert!(e.contains("task 0 is ") && e.contains(", line "), "names the index and both lines: {e}");
    assert!(e.contains("60 of the 60 shared task indexes differ"), "{e}");
    assert!(e.contains("--allow-task-mismatch") && !e.contains("--pair-by"), "{e}");
    assert!(stdout(&o).is_empty(), "nothing written");
    // Pairing by index anyway, as NeMo Gym does: a warning counts the mismatched pairs.
    let o = compare(&[s(&a), s(&b), "--allow-task-mismatch"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("60 of 60 shared task indexes hold different tasks"), "{}", stderr(&o));
    // The report refuses them too.
    let o = run(&["report", s(&a), s(&b), "--out", s(&d.join("r.html"))]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!d.join("r.html").exists());
}

#[test]
fn the_same_tasks_with_other_outcomes_pair_as_before() {
    let d = TempDir::new("tid-same");
    let (a, b) = (sweep(&d, "a", 1, 7), sweep(&d, "b", 2, 7));
    let o = compare(&[s(&a), s(&b)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("different tasks"), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[1]["paired_tasks"], 60, "{v}");
    // The tasks that changed most name what they ask, as the tasks table does.
    let o = compare(&[s(&a), s(&b), "--flips", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let flips = v["flips"].as_array().unwrap();
    assert_eq!(flips.len(), 3);
    assert!(flips.iter().all(|f| f["task_fingerprint"].as_str().is_some_and(|h| h.len() == 16)), "{v}");
}

#[test]
fn another_system_message_or_temperature_is_the_same_task() {
    let d = TempDir::new("tid-sys");
    let a = sweep(&d, "a", 1, 7);
    let b = d.join("b.jsonl");
    rewrite(&sweep(&d, "b0", 2, 7), &b, |v| {
        let p = &mut v["responses_create_params"];
        p["temperature"] = serde_json::json!(0.3);
        p["input"][0]["content"] = serde_json::json!("You are a careful assistant. Think step by step.");
    });
    let o = compare(&[s(&a), s(&b)]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn a_shuffled_dataset_is_refused_with_the_hint_and_pairs_by_content() {
    let d = TempDir::new("tid-shuf");
    let a = sweep(&d, "a", 1, 7);
    // The same questions under other indexes: task t becomes 59 − t.
    let b = d.join("b.jsonl");
    rewrite(&sweep(&d, "b0", 2, 7), &b, |v| {
        let t = v["_ng_task_index"].as_i64().unwrap();
        v["_ng_task_index"] = serde_json::json!(59 - t);
    });
    let o = compare(&[s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--pair-by fingerprint pairs tasks by what they ask"), "{}", stderr(&o));
    let by_content = compare(&[s(&a), s(&b), "--pair-by", "fingerprint"]);
    assert!(by_content.status.success(), "{}", stderr(&by_content));
    assert!(
        stderr(&by_content).contains("60 task(s) sit under another index, 0 have no partner"),
        "{}",
        stderr(&by_content)
    );
    // Paired by content, the numbers are those of the unshuffled pair.
    let unshuffled = compare(&[s(&a), s(&sweep(&d, "b1", 2, 7))]);
    let (x, y): (serde_json::Value, serde_json::Value) =
        (serde_json::from_str(&stdout(&by_content)).unwrap(), serde_json::from_str(&stdout(&unshuffled)).unwrap());
    for k in ["paired_tasks", "diff", "diff_se", "p_value", "wins", "losses", "ties"] {
        assert_eq!(x[1][k], y[1][k], "{k}");
    }
    // An identity field of the user's own pairs them the same way.
    let by_key = compare(&[s(&a), s(&b), "--task-key", "question_id"]);
    assert!(by_key.status.success(), "{}", stderr(&by_key));
    let z: serde_json::Value = serde_json::from_str(&stdout(&by_key)).unwrap();
    for k in ["paired_tasks", "diff", "diff_se", "p_value", "wins", "losses", "ties"] {
        assert_eq!(z[1][k], y[1][k], "{k}");
    }
    // A task whose rollouts carry two values of the key is refused, naming the field.
    let two = d.join("two.jsonl");
    rewrite(&b, &two, |v| {
        if v["_ng_task_index"] == 3 && v["_ng_rollout_index"] == 1 {
            v["question_id"] = serde_json::json!(-1);
        }
    });
    let o = compare(&[s(&a), s(&two), "--task-key", "question_id"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("key `question_id`: task 3 has another value of --task-key question_id"),
        "{}",
        stderr(&o)
    );
    // One way to pair at a time.
    let o = compare(&[s(&a), s(&b), "--task-key", "question_id", "--pair-by", "fingerprint"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("three ways to pair tasks"), "{}", stderr(&o));
}

#[test]
fn a_changed_limit_pairs_the_common_prefix() {
    let d = TempDir::new("tid-limit");
    let a = sweep(&d, "a", 1, 7);
    // The second run stopped after 40 tasks: a prefix of the same dataset.
    let b = d.join("b.jsonl");
    let full = sweep(&d, "b0", 2, 7);
    let text: String = std::fs::read_to_string(&full)
        .unwrap()
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["_ng_task_index"].as_i64().unwrap() < 40)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&b, text).unwrap();
    let o = compare(&[s(&a), s(&b)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[1]["paired_tasks"], 40);
}

#[test]
fn fan_out_agents_that_disagree_on_a_task_are_refused() {
    let d = TempDir::new("tid-fan");
    generate(&d.join("f"), &["-q", "--tasks", "30", "--repeats", "2", "--agents", "2", "--fan-out", "--seed", "3"]);
    let src = d.join("f").join("rollouts.jsonl");
    let bad = d.join("bad.jsonl");
    let first_agent = {
        let l = std::fs::read_to_string(&src).unwrap();
        let v: serde_json::Value = serde_json::from_str(l.lines().next().unwrap()).unwrap();
        v["agent_ref"]["name"].as_str().unwrap().to_string()
    };
    rewrite(&src, &bad, |v| {
        if v["_ng_task_index"] == 5 && v["agent_ref"]["name"] == first_agent.as_str() {
            let input = &mut v["responses_create_params"]["input"];
            let last = input.as_array().unwrap().len() - 1;
            input[last]["content"] = serde_json::json!("an entirely different question");
        }
    });
    assert!(compare(&[s(&src)]).status.success());
    let o = compare(&[s(&bad)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("task 5 asks another question here than at line"), "{}", stderr(&o));
    assert!(compare(&[s(&bad), "--allow-task-mismatch"]).status.success());
}

/// The exported tasks table carries each task's fingerprint: equal across runs of one
/// task seed (whatever the agent), different across task seeds, and the same through a
/// sharded merge.
#[test]
fn the_fingerprint_travels_in_the_tasks_table() {
    use polars::prelude::*;
    let d = TempDir::new("tid-table");
    let fingerprints = |rollouts: &Path, out: &str| -> Vec<(i64, Option<String>)> {
        let dir = d.join(out);
        let o = run(&["export", s(rollouts), "--out-dir", s(&dir)]);
        assert!(o.status.success(), "{}", stderr(&o));
        let df = ParquetReader::new(std::fs::File::open(dir.join("tasks.parquet")).unwrap()).finish().unwrap();
        let t = df.column("_ng_task_index").unwrap().i64().unwrap().clone();
        let f = df.column("task_fingerprint").unwrap().str().unwrap().clone();
        let mut v: Vec<(i64, Option<String>)> =
            t.iter().zip(f.iter()).map(|(t, f)| (t.unwrap(), f.map(str::to_string))).collect();
        v.sort();
        v
    };
    let a = fingerprints(&sweep(&d, "a", 1, 7), "ta");
    let b = fingerprints(&sweep(&d, "b", 2, 7), "tb");
    let c = fingerprints(&sweep(&d, "c", 1, 8), "tc");
    assert_eq!(a.len(), 60);
    assert!(a.iter().all(|(_, f)| f.as_ref().is_some_and(|f| f.len() == 16)), "{a:?}");
    assert_eq!(a, b, "one task seed, one fingerprint per task");
    assert!(a.iter().zip(&c).all(|(x, y)| x.1 != y.1), "other questions, other fingerprints");
    // Sharded and merged: the same tasks table, fingerprints included.
    let rollouts = d.join("a").join("rollouts.jsonl");
    let shards = d.join("shards");
    let o = run(&["shard", s(&rollouts), "--out-dir", s(&shards), "--task-width", "16"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut slices: Vec<String> = std::fs::read_dir(&shards)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".slice"))
        .collect();
    slices.sort();
    let merged = d.join("merged");
    let mut args = vec!["merge", "export", "--name", "rollouts.jsonl", "--out-dir", s(&merged), "-q"];
    args.extend(slices.iter().map(String::as_str));
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(merged.join("tasks.parquet")).unwrap(),
        std::fs::read(d.join("ta").join("tasks.parquet")).unwrap(),
        "merge export gives export's bytes"
    );
}

/// A lake's rollouts tables are checked as their files are: each sweep's tasks table
/// holds its tasks' fingerprints, so two sweeps on other questions are refused, and two
/// on the same questions pair as the files do.
#[test]
fn lake_rollouts_tables_pair_only_the_same_tasks() {
    let d = TempDir::new("tid-lake");
    let lake = d.join("lake");
    let mut parts = Vec::new();
    for (name, seed, task_seed) in [("a", 1, 1), ("b", 2, 1), ("c", 3, 2)] {
        sweep(&d, name, seed, task_seed);
        add_to_lake(&d.join(name), &lake, &["--sweep-id", name]);
        parts.push(lake.join("rollouts").join(format!("sweep={name}")).join("part-0.parquet"));
    }
    let same = compare(&[s(&parts[0]), s(&parts[1])]);
    assert!(same.status.success(), "{}", stderr(&same));
    assert!(!stderr(&same).contains("not verified"), "{}", stderr(&same));
    let files = compare(&[s(&d.join("a").join("rollouts.jsonl")), s(&d.join("b").join("rollouts.jsonl"))]);
    let as_files = ["a", "b"].iter().fold(stdout(&same), |t, x| {
        t.replace(&format!("lake/rollouts/sweep={x}/part-0.parquet"), &format!("{x}/rollouts.jsonl"))
    });
    assert_eq!(as_files, stdout(&files), "the lake's tables give the files' numbers");
    let other = compare(&[s(&parts[0]), s(&parts[2])]);
    assert_eq!(other.status.code(), Some(2), "{}", stderr(&other));
    assert!(stderr(&other).contains("hold different tasks under the same index"), "{}", stderr(&other));
    assert!(stdout(&other).is_empty(), "nothing written");
}

/// `eval-compare` checks the same way, and with `--pair-by fingerprint` joins a shuffled
/// candidate's task entries to the baseline's by what they ask: the flips are those of
/// the unshuffled pair.
#[test]
fn eval_compare_pairs_a_shuffled_run_by_content() {
    let d = TempDir::new("tid-evalcmp");
    let a = sweep(&d, "a", 1, 7);
    let shuffled = d.join("s");
    std::fs::create_dir_all(&shuffled).unwrap();
    rewrite(&sweep(&d, "b0", 2, 7), &shuffled.join("rollouts.jsonl"), |v| {
        let t = v["_ng_task_index"].as_i64().unwrap();
        v["_ng_task_index"] = serde_json::json!(59 - t);
    });
    let plain = sweep(&d, "b1", 2, 7);
    let flips = |cand: &Path, extra: &[&str]| -> std::process::Output {
        let out = d.join(&format!("out-{}", cand.parent().unwrap().file_name().unwrap().to_string_lossy()));
        let mut args = vec!["eval-compare", "--baseline", s(&a), "--candidates", s(cand), "--compute-missing"];
        args.extend(["--report-format", "json", "--output-dir", s(&out), "-q"]);
        args.extend_from_slice(extra);
        run(&args)
    };
    let o = flips(&shuffled.join("rollouts.jsonl"), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--pair-by fingerprint"), "{}", stderr(&o));
    let o = flips(&shuffled.join("rollouts.jsonl"), &["--pair-by", "fingerprint"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(flips(&plain, &[]).status.success());
    // An identity field of the rollouts joins them the same way.
    let by_key = d.join("k");
    std::fs::create_dir_all(&by_key).unwrap();
    std::fs::copy(shuffled.join("rollouts.jsonl"), by_key.join("rollouts.jsonl")).unwrap();
    let o = flips(&by_key.join("rollouts.jsonl"), &["--task-key", "question_id"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let read = |name: &str| -> serde_json::Value {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join(name).join("compare_report.json")).unwrap()).unwrap();
        v["comparisons"][0]["flips"].clone()
    };
    assert_eq!(read("out-s"), read("out-b1"));
    assert_eq!(read("out-k"), read("out-b1"));
}
