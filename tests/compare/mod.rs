//! `rollstat compare` end to end: its numbers against a direct computation from the
//! rollout lines (read with serde_json), its formats against each other, clustering,
//! runs from two files, and the inputs it refuses.

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::*;
use serde_json::Value;

use crate::common::*;

/// Per agent, per task: the mean reward of the measured rollouts (not masked, numeric),
/// and each task's `subset`.
type TaskMeans = BTreeMap<String, BTreeMap<i64, f64>>;

fn direct(rollouts: &Path) -> (TaskMeans, BTreeMap<i64, String>) {
    let mut sums: BTreeMap<String, BTreeMap<i64, (f64, f64)>> = BTreeMap::new();
    let mut subset = BTreeMap::new();
    for line in std::fs::read_to_string(rollouts).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let Some(r) = v["reward"].as_f64() else { continue };
        if v["mask_sample"].as_bool() == Some(true) {
            continue;
        }
        let task = v["_ng_task_index"].as_i64().unwrap();
        let agent = v["agent_ref"]["name"].as_str().unwrap().to_string();
        let s = sums.entry(agent).or_default().entry(task).or_default();
        s.0 += r;
        s.1 += 1.0;
        subset.insert(task, v["subset"].as_str().unwrap().to_string());
    }
    let means = sums.into_iter().map(|(a, m)| (a, m.into_iter().map(|(t, (s, n))| (t, s / n)).collect())).collect();
    (means, subset)
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// `sd(ddof=1)/sqrt(n)`, or with cluster labels `sqrt(G/(G-1) Σ_g (Σ_{i∈g} e_i)²) / n`.
fn se(x: &[f64], clusters: Option<&[String]>) -> f64 {
    let m = mean(x);
    let n = x.len() as f64;
    match clusters {
        None => (x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0)).sqrt() / n.sqrt(),
        Some(c) => {
            let mut sums: BTreeMap<&str, f64> = BTreeMap::new();
            for (v, g) in x.iter().zip(c) {
                *sums.entry(g.as_str()).or_default() += v - m;
            }
            let g = sums.len() as f64;
            (g / (g - 1.0) * sums.values().map(|s| s * s).sum::<f64>()).sqrt() / n
        }
    }
}

fn close(got: &Value, want: f64, what: &str) {
    let g = got.as_f64().unwrap_or_else(|| panic!("{what}: {got}"));
    assert!((g - want).abs() <= 1e-12 * want.abs().max(1e-6), "{what}: got {g}, want {want}");
}

fn sweep(dir: &TempDir, seed: &str) {
    let o = run(&[
        "generate",
        "--tasks",
        "120",
        "--repeats",
        "3",
        "--agents",
        "3",
        "--fan-out",
        "--seed",
        seed,
        "--missing-frac",
        "0.05",
        "--masked-frac",
        "0.05",
        "--out-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

fn json_rows(o: &std::process::Output) -> Vec<Value> {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice::<Value>(&o.stdout).unwrap().as_array().unwrap().clone()
}

#[test]
fn compare_matches_a_direct_computation() {
    let d = TempDir::new("cmp");
    sweep(&d, "8");
    let r = d.join("rollouts.jsonl");
    let (means, subset) = direct(&r);
    let agents: Vec<&String> = means.keys().collect();
    assert_eq!(agents.len(), 3);
    for cluster in [false, true] {
        let mut args = vec!["compare", "--rollouts", r.to_str().unwrap(), "--format", "json"];
        if cluster {
            args.extend(["--cluster-key", "subset"]);
        }
        let rows = json_rows(&run(&args));
        assert_eq!(rows.len(), 3);
        let base = &means[agents[0]];
        for (row, agent) in rows.iter().zip(&agents) {
            let m = &means[*agent];
            let x: Vec<f64> = m.values().copied().collect();
            let c: Vec<String> = m.keys().map(|t| subset[t].clone()).collect();
            let cl = cluster.then_some(c.as_slice());
            assert_eq!(row["run"], **agent);
            assert_eq!(row["tasks"], m.len());
            close(&row["mean"], mean(&x), "mean");
            close(&row["se"], se(&x, cl), "se");
            if *agent == agents[0] {
                assert!(row["diff"].is_null() && row["baseline"].is_null());
                continue;
            }
            assert_eq!(row["baseline"], **agents[0]);
            let shared: Vec<i64> = base.keys().filter(|t| m.contains_key(t)).copied().collect();
            let d: Vec<f64> = shared.iter().map(|t| m[t] - base[t]).collect();
            let dc: Vec<String> = shared.iter().map(|t| subset[t].clone()).collect();
            let s = se(&d, cluster.then_some(dc.as_slice()));
            let df = if cluster { dc.iter().collect::<std::collections::BTreeSet<_>>().len() - 1 } else { d.len() - 1 };
            assert_eq!(row["paired_tasks"], shared.len());
            assert_eq!(row["df"].as_f64(), Some(df as f64));
            close(&row["diff"], mean(&d), "diff");
            close(&row["diff_se"], s, "diff_se");
            close(&row["t"], mean(&d) / s, "t");
            // The p-value function itself is checked against scipy in the unit tests.
            close(&row["p_value"], rollstat::stats::t_two_sided_p(mean(&d) / s, df as f64), "p");
            let half = rollstat::stats::t_ppf(0.975, df as f64) * s;
            close(&row["diff_ci_low_95"], mean(&d) - half, "ci low");
            close(&row["diff_ci_high_95"], mean(&d) + half, "ci high");
            assert_eq!(row["wins"], d.iter().filter(|v| **v > 0.0).count());
            assert_eq!(row["losses"], d.iter().filter(|v| **v < 0.0).count());
            assert_eq!(row["ties"], d.iter().filter(|v| **v == 0.0).count());
        }
    }
}

#[test]
fn formats_and_thread_counts_agree() {
    let d = TempDir::new("cmp-fmt");
    sweep(&d, "9");
    let r = d.join("rollouts.jsonl");
    let r = r.to_str().unwrap();
    let one = run(&["--threads", "1", "compare", "--rollouts", r, "--format", "csv"]);
    let two = run(&["--threads", "2", "compare", "--rollouts", r, "--format", "csv"]);
    assert!(one.status.success(), "{}", stderr(&one));
    assert_eq!(one.stdout, two.stdout);
    let rows = json_rows(&run(&["compare", "--rollouts", r, "--format", "json"]));
    let pq = d.join("cmp.parquet");
    let o = run(&["compare", "--rollouts", r, "--format", "parquet", "--out", pq.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let df = ParquetReader::new(std::fs::File::open(&pq).unwrap()).finish().unwrap();
    assert_eq!(df.height(), rows.len());
    let csv = String::from_utf8(one.stdout).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(header, df.get_column_names().iter().map(|n| n.as_str()).collect::<Vec<_>>());
    for (i, row) in rows.iter().enumerate() {
        for name in ["mean", "se", "diff", "diff_se", "p_value", "correlation"] {
            let pv = df.column(name).unwrap().f64().unwrap().get(i);
            assert_eq!(pv, row[name].as_f64(), "{name}, row {i}");
        }
    }
    // Markdown: the CSV's header and cells, as a table with numbers right-aligned.
    let md = run(&["compare", "--rollouts", r, "--format", "markdown"]);
    assert!(md.status.success(), "{}", stderr(&md));
    let md = stdout(&md);
    let md_lines: Vec<&str> = md.lines().collect();
    assert_eq!(md_lines.len(), rows.len() + 2, "{md}");
    assert_eq!(md_lines[0], format!("| {} |", header.join(" | ")));
    assert!(md_lines[1].starts_with("|---|---|---:|---:|---:|"), "{}", md_lines[1]);
    for (m, c) in md_lines[2..].iter().zip(csv.lines().skip(1)) {
        assert_eq!(*m, format!("| {} |", c.split(',').collect::<Vec<_>>().join(" | ")));
    }
    // The same rollouts read back from `ingest`'s Parquet table give the same bytes.
    let table = d.join("rollouts.parquet");
    let o = run(&["ingest", r, "--out", table.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let from_table = run(&["compare", "--rollouts", table.to_str().unwrap(), "--format", "csv"]);
    assert!(from_table.status.success(), "{}", stderr(&from_table));
    assert_eq!(from_table.stdout, csv.as_bytes());
    // The readable report names every run and marks the baseline.
    let t = run(&["compare", "--rollouts", r]);
    let text = stdout(&t);
    for row in &rows {
        assert!(text.contains(row["run"].as_str().unwrap()), "{text}");
    }
    assert!(text.contains("(baseline)") && text.contains("wins/losses/ties"), "{text}");
    assert!(text.lines().all(|l| !l.ends_with(' ')), "{text}");
}

#[test]
fn runs_from_two_files_are_named_by_file() {
    let d = TempDir::new("cmp-files");
    sweep(&d, "10");
    let base = d.join("base.jsonl");
    let cand = d.join("cand.jsonl");
    std::fs::copy(d.join("rollouts.jsonl"), &base).unwrap();
    std::fs::copy(d.join("rollouts.jsonl"), &cand).unwrap();
    let (means, _) = direct(&base);
    let agent = means.keys().next().unwrap().clone();
    let o = run(&[
        "compare",
        "--rollouts",
        base.to_str().unwrap(),
        "--rollouts",
        cand.to_str().unwrap(),
        "--baseline",
        &format!("base:{agent}"),
        "--format",
        "json",
    ]);
    let rows = json_rows(&o);
    assert_eq!(rows.len(), 6);
    let same = rows.iter().find(|r| r["run"] == format!("cand:{agent}")).unwrap();
    // The same rollouts: every task ties, the difference is 0 with no spread, so no test.
    assert_eq!(same["diff"].as_f64(), Some(0.0));
    assert_eq!(same["diff_se"].as_f64(), Some(0.0));
    assert!(same["p_value"].is_null() && same["t"].is_null());
    assert_eq!(same["ties"], means[&agent].len());
    assert!(stderr(&o).contains("standard error is 0 (all"), "{}", stderr(&o));
}

/// Hand-made rollout lines: (task, rollout, agent, reward, cluster value as JSON).
fn lines(rows: &[(i64, i64, &str, f64, &str)]) -> String {
    rows.iter()
        .map(|(t, r, a, v, c)| {
            format!(
                "{{\"_ng_task_index\":{t},\"_ng_rollout_index\":{r},\"agent_ref\":{{\"name\":\"{a}\"}},\"reward\":{v},\"grp\":{c}}}\n"
            )
        })
        .collect()
}

#[test]
fn clusters_compare_as_python_values_and_keys_are_unique() {
    let d = TempDir::new("cmp-keys");
    // Task 1's cluster is the number 1 in both files, written 1 in one and 1.0 in the
    // other (where a 0.5 makes the column a float column): one cluster.
    // So is 2**53, an int in one file and a float in the other.
    let a = d.write(
        "a.jsonl",
        &lines(&[(0, 0, "A", 1.0, "0.5"), (1, 0, "A", 0.0, "1"), (2, 0, "A", 1.0, "9007199254740992")]),
    );
    let b = d.write(
        "b.jsonl",
        &lines(&[(0, 0, "B", 0.0, "0.5"), (1, 0, "B", 1.0, "1.0"), (2, 0, "B", 1.0, "9007199254740992.0")]),
    );
    let o = run(&[
        "compare",
        "--rollouts",
        a.to_str().unwrap(),
        "--rollouts",
        b.to_str().unwrap(),
        "--cluster-key",
        "grp",
        "--format",
        "csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The text "1" is not the number 1.
    let c = d
        .write("c.jsonl", &lines(&[(0, 0, "C", 0.0, "\"0.5\""), (1, 0, "C", 1.0, "\"1\""), (2, 0, "C", 1.0, "\"2\"")]));
    let o =
        run(&["compare", "--rollouts", a.to_str().unwrap(), "--rollouts", c.to_str().unwrap(), "--cluster-key", "grp"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("task 0 is in cluster 0.5 in A and in cluster \"0.5\" in C"), "{}", stderr(&o));
    // A rollout key twice for one run is refused, as `aggregate` refuses it.
    let dup = d.write(
        "dup.jsonl",
        &lines(&[(0, 0, "A", 1.0, "0"), (0, 1, "A", 0.0, "0"), (0, 0, "A", 1.0, "0"), (0, 0, "B", 1.0, "0")]),
    );
    let o = run(&["compare", "--rollouts", dup.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("lines 1 and 3 have the same _ng_task_index and _ng_rollout_index"), "{}", stderr(&o));
    // A constant non-zero difference: t = inf, p = 0 (scipy's ttest_rel), interval (1, 1).
    let k = d.write(
        "const.jsonl",
        &lines(&[(0, 0, "A", 0.0, "0"), (1, 0, "A", 0.0, "0"), (0, 1, "B", 1.0, "0"), (1, 1, "B", 1.0, "0")]),
    );
    let out = d.join("const.json");
    let o = run(&["compare", "--rollouts", k.to_str().unwrap(), "--format", "json", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("Wrote ") && stdout(&o).contains("(2 runs)"), "{}", stdout(&o));
    let rows: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let b = &rows[1];
    assert_eq!(
        (b["diff"].as_f64(), b["p_value"].as_f64(), b["diff_ci_low_95"].as_f64()),
        (Some(1.0), Some(0.0), Some(1.0))
    );
    assert!(b["t"].is_null(), "JSON has no infinity: {b}");
}

#[test]
fn compare_refuses_what_it_cannot_use() {
    let d = TempDir::new("cmp-bad");
    sweep(&d, "11");
    let r = d.join("rollouts.jsonl");
    let r = r.to_str().unwrap();
    let out = d.join("out.csv");
    let o = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--metric", "nope"], "no rollout has a numeric `nope`"),
        (vec!["--metric", "subset"], "holds text, not numbers"),
        (vec!["--cluster-key", "extracted_answer"], "a cluster must hold whole tasks"),
        (vec!["--cluster-key", "nope"], "no rollout has this field"),
        (vec!["--baseline", "nope"], "is not a run here"),
        (vec!["--inputs", r, "--inputs", r], "give --inputs once per --rollouts file"),
        (vec!["--rollouts", r], "is given twice as --rollouts"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["compare", "--rollouts", r, "--format", "csv", "--out", o];
        args.extend(extra.iter().copied());
        let x = run(&args);
        assert_eq!(x.status.code(), Some(2), "{extra:?}: {}", stderr(&x));
        assert!(stderr(&x).contains(needle), "{extra:?}: {}", stderr(&x));
        assert!(!out.exists(), "{extra:?} left an output");
    }
    // A table from elsewhere: agents as integers, mask flags as integers (truthiness),
    // are read; a float task index is refused, naming the column.
    let mk = |name: &str, task: Column| {
        let mut df = DataFrame::new(
            4,
            vec![
                Column::new("agent".into(), [1i64, 1, 2, 2]),
                task,
                Column::new("_ng_rollout_index".into(), [0i64, 0, 1, 1]),
                Column::new("mask_sample".into(), [0i64, 2, 0, 0]),
                Column::new("reward".into(), [1.0f64, 0.0, 0.5, 0.25]),
            ],
        )
        .unwrap();
        let p = d.join(name);
        ParquetWriter::new(std::fs::File::create(&p).unwrap()).finish(&mut df).unwrap();
        p
    };
    let good = mk("ints.parquet", Column::new("_ng_task_index".into(), [0i64, 1, 0, 1]));
    let rows = json_rows(&run(&["compare", "--rollouts", good.to_str().unwrap(), "--format", "json"]));
    assert_eq!(
        (rows[0]["run"].as_str(), rows[0]["masked"].as_i64(), rows[1]["diff"].as_f64()),
        (Some("1"), Some(1), Some(-0.5))
    );
    let bad = mk("floats.parquet", Column::new("_ng_task_index".into(), [0.0f64, 1.5, 0.0, 1.5]));
    let x = run(&["compare", "--rollouts", bad.to_str().unwrap()]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
    assert!(stderr(&x).contains("floats.parquet, key `_ng_task_index`: the column holds f64"), "{}", stderr(&x));
    // A file named .parquet that is not Parquet is the input's fault.
    let fake = d.join("fake.parquet");
    std::fs::write(&fake, "not parquet\n").unwrap();
    let x = run(&["compare", "--rollouts", fake.to_str().unwrap()]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
    assert!(stderr(&x).contains("fake.parquet: not a readable Parquet file"), "{}", stderr(&x));
    // One run only.
    let single = TempDir::new("cmp-one");
    let g = run(&["generate", "--tasks", "5", "--agents", "1", "--out-dir", single.path().to_str().unwrap()]);
    assert!(g.status.success(), "{}", stderr(&g));
    let x = run(&["compare", "--rollouts", single.join("rollouts.jsonl").to_str().unwrap()]);
    assert_eq!(x.status.code(), Some(2));
    assert!(stderr(&x).contains("compare needs two runs"), "{}", stderr(&x));
    // Its output may not overwrite what it reads.
    let before = std::fs::read(r).unwrap();
    let x = run(&["compare", "--rollouts", r, "--format", "csv", "--out", r]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
    assert_eq!(std::fs::read(r).unwrap(), before);
}

#[test]
fn pass_at_k_per_task_matches_aggregates_pass_at_k() {
    let d = TempDir::new("cmp-pass");
    sweep(&d, "12");
    let r = d.join("rollouts.jsonl");
    let agg = d.join("agg.json");
    let o = run(&[
        "aggregate",
        "--rollouts",
        r.to_str().unwrap(),
        "--metric",
        "pass_at_k",
        "--out",
        agg.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let entries: Value = serde_json::from_slice(&std::fs::read(&agg).unwrap()).unwrap();
    for k in 1..=3 {
        let rows = json_rows(&run(&[
            "compare",
            "--rollouts",
            r.to_str().unwrap(),
            "--pass-at",
            &k.to_string(),
            "--format",
            "json",
        ]));
        for row in &rows {
            let e = entries.as_array().unwrap().iter().find(|e| e["agent_ref"]["name"] == row["run"]).unwrap();
            // aggregate's pass@k/accuracy is the mean over tasks of the same per-task
            // values, in percent.
            let want = e["agent_metrics"][format!("pass@{k}/accuracy")].as_f64().unwrap() / 100.0;
            close(&row["mean"], want, &format!("pass@{k} of {}", row["run"]));
            assert_eq!(row["statistic"], format!("pass@{k}/accuracy"));
        }
    }
    // More than any task of any run has: nothing to compare.
    let x = run(&["compare", "--rollouts", r.to_str().unwrap(), "--pass-at", "9"]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
    assert!(stderr(&x).contains("no task of any run has 9 measured rollouts (at most 3)"), "{}", stderr(&x));
    let x = run(&["compare", "--rollouts", r.to_str().unwrap(), "--pass-at", "0"]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
}
