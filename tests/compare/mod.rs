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

/// `(se, df)`: `sd(ddof=1)/sqrt(n)` with `n - 1`; with cluster labels (fewer than 20
/// here) CR2, `sqrt(Σ_g S_g² / (1 - n_g/n)) / n` with `S_g = Σ_{i∈g} e_i`, and the
/// Bell-McCaffrey degrees of freedom `(1/n²) / Σλ²` written out.
fn se(x: &[f64], clusters: Option<&[String]>) -> (f64, f64) {
    let m = mean(x);
    let n = x.len() as f64;
    match clusters {
        None => ((x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (n - 1.0)).sqrt() / n.sqrt(), n - 1.0),
        Some(c) => {
            let mut sums: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
            for (v, g) in x.iter().zip(c) {
                let e = sums.entry(g.as_str()).or_default();
                e.0 += v - m;
                e.1 += 1.0;
            }
            let a2 = |ng: f64| 1.0 / (1.0 - ng / n);
            let se = sums.values().map(|(s, ng)| s * s * a2(*ng)).sum::<f64>().sqrt() / n;
            let s1: f64 = sums.values().map(|(_, ng)| a2(*ng) * ng * ng).sum();
            let s2: f64 = sums.values().map(|(_, ng)| a2(*ng).powi(2) * ng.powi(3)).sum();
            let s3: f64 = sums.values().map(|(_, ng)| a2(*ng).powi(2) * ng * ng).sum();
            let lam2 = (s1 * s1 / (n * n) - 2.0 * s2 / n + s3) / n.powi(4);
            (se, 1.0 / (n * n) / lam2)
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
            close(&row["se"], se(&x, cl).0, "se");
            if *agent == agents[0] {
                assert!(row["diff"].is_null() && row["baseline"].is_null());
                continue;
            }
            assert_eq!(row["baseline"], **agents[0]);
            let shared: Vec<i64> = base.keys().filter(|t| m.contains_key(t)).copied().collect();
            let d: Vec<f64> = shared.iter().map(|t| m[t] - base[t]).collect();
            let dc: Vec<String> = shared.iter().map(|t| subset[t].clone()).collect();
            let (s, df) = se(&d, cluster.then_some(dc.as_slice()));
            assert_eq!(row["paired_tasks"], shared.len());
            close(&row["df"], df, "df");
            close(&row["diff"], mean(&d), "diff");
            close(&row["diff_se"], s, "diff_se");
            close(&row["t"], mean(&d) / s, "t");
            // The p-value function itself is checked against scipy in the unit tests.
            close(&row["p_value"], rollstat::stats::t_two_sided_p(mean(&d) / s, df), "p");
            let half = rollstat::stats::t_ppf(0.975, df) * s;
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
    // The table, then (three runs: two candidates) a note naming Holm's family.
    let (table, notes) = md.split_once("\n\n").unwrap_or((&md, ""));
    assert!(notes.starts_with("p_value_holm: Holm-adjusted over the 2 runs compared with"), "{md}");
    let md_lines: Vec<&str> = table.lines().collect();
    assert_eq!(md_lines.len(), rows.len() + 2, "{md}");
    assert_eq!(md_lines[0], format!("| {} |", header.join(" | ")));
    assert!(md_lines[1].starts_with("|---|---|---:|---:|---:|"), "{}", md_lines[1]);
    // Cells are the CSV's, floats rounded to 4 significant digits for reading.
    for (m, c) in md_lines[2..].iter().zip(csv.lines().skip(1)) {
        let cells: Vec<&str> = m.trim_matches('|').split(" | ").map(str::trim).collect();
        let full: Vec<&str> = c.split(',').collect();
        assert_eq!(cells.len(), full.len(), "{m}");
        for (shown, exact) in cells.iter().zip(&full) {
            let float = exact.contains(['.', 'e']) && exact.parse::<f64>().is_ok();
            if !float {
                assert_eq!(shown, exact, "{m}");
                continue;
            }
            let (x, y) = (exact.parse::<f64>().unwrap(), shown.parse::<f64>().unwrap());
            assert!((x - y).abs() <= 5.0001e-4 * x.abs(), "{shown} is not {exact} rounded");
            let mantissa = shown.trim_start_matches(['-', '+']).split('e').next().unwrap();
            let digits = mantissa.replace('.', "");
            assert!(digits.trim_start_matches('0').len() <= 4, "{shown}: more than 4 significant digits");
        }
    }
    // --precision changes the digits shown.
    let md6 = stdout(&run(&["compare", "--rollouts", r, "--format", "markdown", "--precision", "6"]));
    assert_ne!(md6, md);
    assert_eq!(md6.lines().count(), md.lines().count());
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

#[test]
fn mde_and_tasks_needed_reach_80_percent_power() {
    let d = TempDir::new("cmp-mde");
    sweep(&d, "13");
    let r = d.join("rollouts.jsonl");
    let rows = json_rows(&run(&[
        "compare",
        "--rollouts",
        r.to_str().unwrap(),
        "--mde",
        "--detect",
        "0.05",
        "--format",
        "json",
    ]));
    for row in rows.iter().filter(|r| !r["diff"].is_null()) {
        let (se, df, n) =
            (row["diff_se"].as_f64().unwrap(), row["df"].as_f64().unwrap(), row["paired_tasks"].as_f64().unwrap());
        let mde = row["mde"].as_f64().unwrap();
        let power = rollstat::stats::power::power(mde / se, df, 0.05);
        assert!((power - 0.8).abs() < 1e-12, "{row}: power at the MDE {power}");
        // The smallest whole number of tasks with 80% power at the observed spread.
        let need = row["tasks_needed"].as_f64().unwrap();
        let sd = se * n.sqrt();
        let at = |k: f64| rollstat::stats::power::power(0.05 / sd * k.sqrt(), k - 1.0, 0.05);
        assert!(at(need) >= 0.8 && at(need - 1.0) < 0.8, "{row}");
        assert_eq!(row["detect_diff"].as_f64(), Some(0.05));
    }
    // Without the flags the sizing columns are absent.
    let rows = json_rows(&run(&["compare", "--rollouts", r.to_str().unwrap(), "--format", "json"]));
    assert!(rows[1].get("mde").is_none() && rows[1].get("tasks_needed").is_none());
}

#[test]
fn holm_adjusts_the_p_values_of_two_or_more_candidates() {
    let d = TempDir::new("cmp-holm");
    sweep(&d, "14");
    let r = d.join("rollouts.jsonl");
    let rows = json_rows(&run(&["compare", "--rollouts", r.to_str().unwrap(), "--format", "json"]));
    let p: Vec<Option<f64>> = rows[1..].iter().map(|r| r["p_value"].as_f64()).collect();
    let want = rollstat::stats::holm::holm(&p);
    let got: Vec<Option<f64>> = rows[1..].iter().map(|r| r["p_value_holm"].as_f64()).collect();
    assert_eq!(got, want);
    assert!(rows[0]["p_value_holm"].is_null());
    let t = stdout(&run(&["compare", "--rollouts", r.to_str().unwrap()]));
    assert!(t.contains("p-values (Holm over the 2 runs compared):"), "{t}");
}

#[test]
fn by_repeats_the_comparison_per_group() {
    let d = TempDir::new("cmp-by");
    sweep(&d, "15");
    let r = d.join("rollouts.jsonl");
    let (means, subset) = direct(&r);
    let rows = json_rows(&run(&["compare", "--rollouts", r.to_str().unwrap(), "--by", "subset", "--format", "json"]));
    let agents: Vec<&String> = means.keys().collect();
    // Three runs overall, then three per group, groups in order.
    assert_eq!(rows.len(), 3 + 3 * 3);
    assert!(rows[..3].iter().all(|r| r["group"].is_null()));
    let groups: Vec<&str> = rows[3..].iter().step_by(3).map(|r| r["group"].as_str().unwrap()).collect();
    assert_eq!(groups, ["easy", "hard", "medium"]);
    for row in rows[3..].iter().filter(|r| !r["diff"].is_null()) {
        let g = row["group"].as_str().unwrap();
        let (base, m) = (&means[agents[0]], &means[row["run"].as_str().unwrap()]);
        let shared: Vec<i64> = base.keys().filter(|t| m.contains_key(t) && subset[t] == g).copied().collect();
        let diffs: Vec<f64> = shared.iter().map(|t| m[t] - base[t]).collect();
        let (s, df) = se(&diffs, None);
        assert_eq!(row["paired_tasks"], shared.len());
        close(&row["diff"], mean(&diffs), "group diff");
        close(&row["diff_se"], s, "group diff se");
        let half = rollstat::stats::t_ppf(0.975, df) * s;
        close(&row["diff_ci_low_95"], mean(&diffs) - half, "group ci low");
    }
    let t = stdout(&run(&["compare", "--rollouts", r.to_str().unwrap(), "--by", "subset"]));
    let section = &t[t.find("\nby `subset`").expect("a breakdown section")..];
    assert_eq!(section.lines().filter(|l| l.starts_with("easy ")).count(), 2, "{t}");
}

#[test]
fn bad_breakdowns_and_one_sided_agents_are_refused_without_output() {
    let d = TempDir::new("cmp-by-bad");
    let out = d.join("out.json");
    let o = out.to_str().unwrap();
    // Numbers in some rollouts, text in others.
    let mixed = d.write(
        "mixed.jsonl",
        &lines(&[(0, 0, "A", 1.0, "1"), (1, 0, "A", 0.0, "\"x\""), (0, 0, "B", 1.0, "1"), (1, 0, "B", 1.0, "\"x\"")]),
    );
    let x = run(&["compare", "--rollouts", mixed.to_str().unwrap(), "--by", "grp", "--format", "json", "--out", o]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
    assert!(stderr(&x).contains("--by field holds numbers (line 1) and text (line 2)"), "{}", stderr(&x));
    assert!(!out.exists());
    // Numbers in one file, text in the other.
    let nums = d.write("nums.jsonl", &lines(&[(0, 0, "A", 1.0, "1"), (0, 0, "B", 1.0, "1")]));
    let text = d.write("text.jsonl", &lines(&[(0, 0, "C", 1.0, "\"1\""), (0, 0, "D", 0.0, "\"1\"")]));
    let x = run(&[
        "compare",
        "--rollouts",
        nums.to_str().unwrap(),
        "--rollouts",
        text.to_str().unwrap(),
        "--by",
        "grp",
        "--out",
        o,
    ]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
    assert!(stderr(&x).contains("the field holds numbers in") && stderr(&x).contains("and text in"), "{}", stderr(&x));
    assert!(!out.exists());
    // A task in different groups in two runs.
    let moved = d.write("moved.jsonl", &lines(&[(0, 0, "A", 1.0, "1"), (0, 0, "B", 1.0, "2")]));
    let x = run(&["compare", "--rollouts", moved.to_str().unwrap(), "--by", "grp", "--out", o]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
    assert!(stderr(&x).contains("task 0 is in group 1 in A and in group 2 in B"), "{}", stderr(&x));
    assert!(!out.exists());
    // An agent in one file only, where the files share agent names.
    let both = d.write("both.jsonl", &lines(&[(0, 0, "A", 1.0, "0"), (0, 0, "B", 1.0, "0")]));
    let one = d.write("one.jsonl", &lines(&[(0, 0, "A", 0.0, "0")]));
    let x = run(&["compare", "--rollouts", both.to_str().unwrap(), "--rollouts", one.to_str().unwrap(), "--out", o]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
    assert!(
        stderr(&x).contains("agent B is in")
            && stderr(&x).contains("files that share agent names must hold the same agents"),
        "{}",
        stderr(&x)
    );
    assert!(!out.exists());
    // --flips needs a format that can hold a second list.
    let x = run(&["compare", "--rollouts", both.to_str().unwrap(), "--flips", "3", "--format", "csv", "--out", o]);
    assert_eq!(x.status.code(), Some(2), "{}", stderr(&x));
    assert!(!out.exists());
}

#[test]
fn binary_single_rollouts_get_mcnemar_and_wilson() {
    let d = TempDir::new("cmp-binary");
    // 30 tasks: B wins 7, loses 1, ties 22; A scores 1 on every task.
    let mut rows = Vec::new();
    for t in 0..30i64 {
        let (a, b) = if t < 7 {
            (0.0, 1.0)
        } else if t < 8 {
            (1.0, 0.0)
        } else {
            (1.0, 1.0)
        };
        rows.push((t, 0, "A", a, "0"));
        rows.push((t, 1, "B", b, "0"));
        rows.push((t, 2, "C", 1.0, "0"));
    }
    let f = d.write("bin.jsonl", &lines(&rows));
    let rows = json_rows(&run(&["compare", "--rollouts", f.to_str().unwrap(), "--format", "json"]));
    let b = &rows[1];
    assert_eq!(b["exact_test"], "mcnemar");
    assert_eq!(b["exact_p"].as_f64(), Some(0.0703125));
    assert!((b["p_value"].as_f64().unwrap() - 0.031).abs() < 5e-4, "{b}");
    // C is at 1.0 on all 30 tasks: Wilson, not [1, 1].
    let c = &rows[2];
    assert_eq!(c["ci_method"], "wilson");
    assert_eq!(c["ci_high_95"].as_f64(), Some(1.0));
    close(&c["ci_low_95"], 30.0 / (30.0 + 1.959963984540054f64.powi(2)), "wilson low");
}

#[test]
fn flips_list_the_tasks_that_changed_most() {
    let d = TempDir::new("cmp-flips");
    sweep(&d, "16");
    let r = d.join("rollouts.jsonl");
    let o = run(&["compare", "--rollouts", r.to_str().unwrap(), "--flips", "4", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let flips = doc["flips"].as_array().unwrap();
    assert_eq!(doc["runs"].as_array().unwrap().len(), 3);
    assert_eq!(flips.len(), 8);
    let (means, _) = direct(&r);
    for f in flips {
        let run_means = &means[f["run"].as_str().unwrap()];
        let base = &means[f["baseline"].as_str().unwrap()];
        let t = f["_ng_task_index"].as_i64().unwrap();
        close(&f["diff"], run_means[&t] - base[&t], "flip diff");
        let scores: Vec<f64> = f["run_scores"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        close(&f["run_value"], mean(&scores), "flip run value");
    }
    // Largest changes first, per run.
    let d0: Vec<f64> = flips[..4].iter().map(|f| f["diff"].as_f64().unwrap().abs()).collect();
    assert!(d0.windows(2).all(|w| w[0] >= w[1]), "{d0:?}");
    let t = stdout(&run(&["compare", "--rollouts", r.to_str().unwrap(), "--flips", "4"]));
    assert!(t.contains("tasks that changed most against"), "{t}");
}

#[test]
fn new_text_sections_fit_80_columns() {
    let d = TempDir::new("cmp-80");
    let mut rows = Vec::new();
    for t in 0..40i64 {
        for k in 0..4i64 {
            let g = if t % 2 == 0 { "\"easy\"" } else { "\"hard\"" };
            rows.push((t, k, "base", ((t + k) % 3 == 0) as i64 as f64, g));
            rows.push((t, k + 4, "cand_one", ((t + k) % 2 == 0) as i64 as f64, g));
            rows.push((t, k + 8, "cand_two", ((t * k) % 3 == 0) as i64 as f64, g));
        }
    }
    let f = d.write("r.jsonl", &lines(&rows));
    let o = run(&[
        "compare",
        "--rollouts",
        f.to_str().unwrap(),
        "--mde",
        "--detect",
        "0.05",
        "--by",
        "grp",
        "--flips",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = stdout(&o);
    let start = t.find("\np-values (").expect("a p-value section");
    // The tables every report has (also repeated per group) are left as they were.
    let old = |l: &&str| l.contains("95% interval") || l.contains("wins/losses/ties") || l.contains('[');
    for l in t[start..].lines().filter(|l| !old(l)) {
        assert!(l.chars().count() <= 80, "{} columns: {l}", l.chars().count());
    }
    assert!(t.contains("is the eval big enough?") && t.contains("tasks or repeats?"), "{t}");
}

/// The compared field is `--field`; `--metric`, its earlier name, gives the same report.
#[test]
fn field_and_its_old_name_metric_agree() {
    let d = TempDir::new("cmp-field");
    generate(d.path(), &["--tasks", "40", "--repeats", "2", "--agents", "2", "--fan-out", "--seed", "9"]);
    let r = d.join("rollouts.jsonl");
    let by_field = run(&["compare", r.to_str().unwrap(), "--field", "num_steps", "--format", "csv"]);
    let by_metric = run(&["compare", r.to_str().unwrap(), "--metric", "num_steps", "--format", "csv"]);
    assert!(by_field.status.success(), "{}", stderr(&by_field));
    assert_eq!(stdout(&by_field), stdout(&by_metric));
    assert!(stdout(&by_field).contains(",num_steps,"), "{}", stdout(&by_field));
}
