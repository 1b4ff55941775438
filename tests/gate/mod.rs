//! `rollstat gate` end to end: its estimates are `compare`'s, its verdicts hold where
//! the truth is known by construction (a candidate made better or worse by hand, two
//! runs from one distribution, too few tasks), its exit statuses and formats, and the
//! policy files it refuses before reading any rollout.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;

/// A run of one agent over `tasks` tasks × 4 repeats with continuous rewards: one task
/// seed, so runs with different `seed`s ask the same questions. Copied to `dir/name`.
fn one_run(dir: &TempDir, name: &str, tasks: usize, seed: u64) -> PathBuf {
    let out = dir.join(&format!("gen-{name}"));
    let (tasks, seed) = (tasks.to_string(), seed.to_string());
    generate(
        &out,
        &[
            "--tasks",
            &tasks,
            "--repeats",
            "4",
            "--agents",
            "1",
            "--task-seed",
            "1",
            "--seed",
            &seed,
            "--reward",
            "continuous",
        ],
    );
    let to = dir.join(&format!("{name}.jsonl"));
    std::fs::copy(out.join("rollouts.jsonl"), &to).unwrap();
    to
}

/// Two runs from one distribution by construction: one run of 8 repeats per task split
/// by rollout index, the even repeats in `dir/a.jsonl`, the odd ones in `dir/b.jsonl`
/// (one agent, the same tasks, the same chance of success on each).
fn halves(dir: &TempDir, tasks: usize, seed: u64) -> (PathBuf, PathBuf) {
    let out = dir.join("gen-halves");
    let (tasks, seed) = (tasks.to_string(), seed.to_string());
    generate(&out, &["--tasks", &tasks, "--repeats", "8", "--agents", "1", "--seed", &seed, "--reward", "continuous"]);
    let (mut a, mut b) = (String::new(), String::new());
    for line in std::fs::read_to_string(out.join("rollouts.jsonl")).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let half = if v["_ng_rollout_index"].as_i64().unwrap() % 2 == 0 { &mut a } else { &mut b };
        half.push_str(line);
        half.push('\n');
    }
    let (pa, pb) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    std::fs::write(&pa, a).unwrap();
    std::fs::write(&pb, b).unwrap();
    (pa, pb)
}

/// `from` with every reward moved by `shift` (a candidate better or worse by exactly
/// that much on every rollout, with the other run's spread), written as `dir/name`.
fn shifted(dir: &TempDir, from: &Path, name: &str, shift: f64) -> PathBuf {
    let mut out = String::new();
    for line in std::fs::read_to_string(from).unwrap().lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if let Some(r) = v["reward"].as_f64() {
            v["reward"] = Value::from(r + shift);
        }
        out.push_str(&serde_json::to_string(&v).unwrap());
        out.push('\n');
    }
    let to = dir.join(&format!("{name}.jsonl"));
    std::fs::write(&to, out).unwrap();
    to
}

fn policy(dir: &TempDir, text: &str) -> PathBuf {
    let p = dir.join("gate.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs `gate --format json` and returns its exit status and report.
fn gate(policy: &Path, runs: &[&Path], extra: &[&str]) -> (i32, Value) {
    let mut args: Vec<String> = vec!["gate".into(), "--policy".into(), policy.display().to_string()];
    for r in runs {
        args.extend(["--rollouts".into(), r.display().to_string()]);
    }
    args.extend(["--format".into(), "json".into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let o = rollstat().args(&args).output();
    let code = o.status.code().unwrap();
    assert!(matches!(code, 0 | 3 | 4), "{args:?}: exit {code}\n{}", stderr(&o));
    (code, serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o))))
}

fn verdicts(v: &Value) -> Vec<&str> {
    v["checks"].as_array().unwrap().iter().map(|c| c["verdict"].as_str().unwrap()).collect()
}

#[test]
fn estimates_and_errors_are_compares() {
    let d = TempDir::new("gate-cmp");
    let base = one_run(&d, "base", 120, 1);
    let cand = one_run(&d, "cand", 120, 2);
    let p = policy(
        &d,
        "[[check]]\nname = \"ni\"\nmetric = \"reward\"\nkind = \"non_inferiority\"\nmargin = 0.05\n\n\
         [[check]]\nname = \"by subset\"\nmetric = \"reward\"\nkind = \"superiority\"\nby = \"subset\"\n\n\
         [[check]]\nname = \"floor\"\nmetric = \"reward\"\nkind = \"threshold\"\nmin = 0.2\n",
    );
    let (_, g) = gate(&p, &[&base, &cand], &[]);
    let checks = g["checks"].as_array().unwrap();
    let cmp = |extra: &[&str]| -> Vec<Value> {
        let mut args = vec!["compare", "--rollouts", base.to_str().unwrap(), "--rollouts", cand.to_str().unwrap()];
        args.extend(["--format", "json"]);
        args.extend(extra);
        let o = rollstat().args(&args).ok();
        serde_json::from_slice::<Value>(&o.stdout).unwrap().as_array().unwrap().clone()
    };
    let overall = cmp(&[]);
    let row = &overall[1];
    assert!(g["baseline"].as_str().unwrap().starts_with("base:"), "{g}");
    // The same floats, not merely close: one computation of the paired difference.
    let ni = &checks[0];
    assert_eq!((&ni["estimate"], &ni["se"], &ni["tasks"]), (&row["diff"], &row["diff_se"], &row["paired_tasks"]));
    // The one-sided test against the margin and the 90% interval, from the estimate.
    let (m, s, df) = (row["diff"].as_f64().unwrap(), row["diff_se"].as_f64().unwrap(), row["df"].as_f64().unwrap());
    let p_want = rollstat::stats::t_upper_p((m + 0.05) / s, df);
    assert!((ni["p"].as_f64().unwrap() - p_want).abs() <= 1e-15 * p_want.max(1e-300), "{ni}");
    let half = rollstat::stats::t_ppf(0.95, df) * s;
    assert!((ni["ci_low"].as_f64().unwrap() - (m - half)).abs() < 1e-14);
    assert!((ni["ci_high"].as_f64().unwrap() - (m + half)).abs() < 1e-14);
    // Per group: compare --by's group rows.
    let by_rows = cmp(&["--by", "subset"]);
    let groups: Vec<&Value> = by_rows.iter().filter(|r| !r["group"].is_null() && !r["diff"].is_null()).collect();
    let by: Vec<&Value> = checks.iter().filter(|c| c["name"] == "by subset").collect();
    assert_eq!(by.len(), groups.len());
    assert!(by.len() >= 2);
    for (c, r) in by.iter().zip(&groups) {
        assert_eq!((&c["group"], &c["estimate"], &c["se"]), (&r["group"], &r["diff"], &r["diff_se"]));
    }
    // A threshold tests the candidate's own mean.
    let floor = checks.iter().find(|c| c["name"] == "floor").unwrap();
    assert_eq!((&floor["estimate"], &floor["se"], &floor["tasks"]), (&row["mean"], &row["se"], &row["tasks"]));
    assert!(floor["candidate"].as_str().unwrap().starts_with("cand:"), "{floor}");
}

#[test]
fn a_clear_improvement_passes_and_a_clear_regression_fails() {
    let d = TempDir::new("gate-truth");
    let (base, other) = halves(&d, 150, 1);
    let better = shifted(&d, &other, "better", 0.2);
    let worse = shifted(&d, &other, "worse", -0.2);
    let p = policy(
        &d,
        "[[check]]\nname = \"better\"\nmetric = \"reward\"\nkind = \"superiority\"\n\n\
         [[check]]\nname = \"no regression\"\nmetric = \"reward\"\nkind = \"non_inferiority\"\nmargin = 0.02\n",
    );
    let (code, g) = gate(&p, &[&base, &better], &[]);
    assert_eq!((code, g["verdict"].as_str(), verdicts(&g)), (0, Some("PASS"), vec!["PASS", "PASS"]), "{g}");
    let (code, g) = gate(&p, &[&base, &worse], &[]);
    assert_eq!((code, g["verdict"].as_str(), verdicts(&g)), (3, Some("FAIL"), vec!["FAIL", "FAIL"]), "{g}");
    // Lower is better: the regression of the reward is an improvement of a cost.
    let lower = policy(
        &d,
        "[[check]]\nmetric = \"reward\"\nkind = \"non_inferiority\"\ndirection = \"lower\"\nmargin = 0.02\n",
    );
    let (code, g) = gate(&lower, &[&base, &worse], &[]);
    assert_eq!((code, verdicts(&g)), (0, vec!["PASS"]), "{g}");
    let (code, g) = gate(&lower, &[&base, &better], &[]);
    assert_eq!((code, verdicts(&g)), (3, vec!["FAIL"]), "{g}");
    // Advisory: a failure warns, and the gate passes.
    let advisory =
        policy(&d, "[[check]]\nmetric = \"reward\"\nkind = \"non_inferiority\"\nmargin = 0.02\nrequired = false\n");
    let (code, g) = gate(&advisory, &[&base, &worse], &[]);
    assert_eq!((code, g["verdict"].as_str(), verdicts(&g)), (0, Some("PASS"), vec!["WARN"]), "{g}");
}

#[test]
fn one_distribution_is_equivalent_within_a_wide_margin_only() {
    let d = TempDir::new("gate-eq");
    let (base, cand) = halves(&d, 200, 1);
    let wide = policy(&d, "[[check]]\nmetric = \"reward\"\nkind = \"equivalence\"\nmargin = 0.2\n");
    let (code, g) = gate(&wide, &[&base, &cand], &[]);
    assert_eq!((code, verdicts(&g)), (0, vec!["PASS"]), "{g}");
    let tiny = policy(&d, "[[check]]\nmetric = \"reward\"\nkind = \"equivalence\"\nmargin = 0.0001\n");
    let (code, g) = gate(&tiny, &[&base, &cand], &[]);
    assert_eq!((code, g["verdict"].as_str(), verdicts(&g)), (4, Some("INCONCLUSIVE"), vec!["INCONCLUSIVE"]), "{g}");
    // How many tasks a decision would take: far more than the 200 here.
    assert!(g["checks"][0]["tasks_needed"].as_u64().unwrap() > 200, "{g}");
}

#[test]
fn too_few_tasks_are_inconclusive_with_the_tasks_needed() {
    let d = TempDir::new("gate-few");
    let (base, other) = halves(&d, 6, 1);
    let cand = shifted(&d, &other, "cand", 0.05);
    let p = policy(&d, "[[check]]\nmetric = \"reward\"\nkind = \"superiority\"\n");
    let (code, g) = gate(&p, &[&base, &cand], &[]);
    let c = &g["checks"][0];
    assert_eq!((code, c["verdict"].as_str(), c["tasks"].as_u64()), (4, Some("INCONCLUSIVE"), Some(6)), "{g}");
    // compare's power analysis for the estimate's distance from the margin (0), one-sided
    // at 5% (two-sided at 10%).
    let o = rollstat()
        .args(["compare", "--rollouts", base.to_str().unwrap(), "--rollouts", cand.to_str().unwrap()])
        .args(["--format", "json", "--detect", &c["estimate"].as_f64().unwrap().to_string()])
        .ok();
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    let at_5 = rows[1]["tasks_needed"].as_u64().unwrap();
    let needed = c["tasks_needed"].as_u64().unwrap();
    assert!(needed > 6 && needed < at_5, "gate {needed}, compare (two-sided 5%) {at_5}");
}

#[test]
fn several_candidates_share_one_holm_family() {
    let d = TempDir::new("gate-holm");
    let base = one_run(&d, "base", 80, 1);
    let a = shifted(&d, &one_run(&d, "a0", 80, 2), "a", 0.03);
    let b = shifted(&d, &one_run(&d, "b0", 80, 3), "b", 0.01);
    let p = policy(
        &d,
        "alpha = 0.1\n[[check]]\nname = \"up\"\nmetric = \"reward\"\nkind = \"superiority\"\n\n\
         [[check]]\nname = \"same\"\nmetric = \"reward\"\nkind = \"non_inferiority\"\nmargin = 0.05\n\n\
         [[check]]\nname = \"advice\"\nmetric = \"reward\"\nkind = \"equivalence\"\nmargin = 0.05\nrequired = false\n",
    );
    let (code, g) = gate(&p, &[&base, &a, &b], &[]);
    let checks = g["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 6);
    // Runs named by file, as the files share their agent's label.
    let cands: Vec<&str> = checks.iter().map(|c| c["candidate"].as_str().unwrap().split(':').next().unwrap()).collect();
    assert_eq!(cands, ["a", "b", "a", "b", "a", "b"]);
    let p_of = |c: &Value| Some(c["p"].as_f64().unwrap());
    let required: Vec<Option<f64>> = checks[..4].iter().map(p_of).collect();
    let want = rollstat::stats::holm::holm(&required);
    for (c, w) in checks[..4].iter().zip(&want) {
        assert_eq!(c["p_adjusted"].as_f64(), *w, "{c}");
        let pass = w.unwrap() < 0.1;
        assert_eq!(c["verdict"] == "PASS", pass, "{c}");
    }
    // The advisory checks are a family of their own.
    let advisory: Vec<Option<f64>> = checks[4..].iter().map(p_of).collect();
    for (c, w) in checks[4..].iter().zip(rollstat::stats::holm::holm(&advisory)) {
        assert_eq!(c["p_adjusted"].as_f64(), w, "{c}");
    }
    let want_code = match g["verdict"].as_str().unwrap() {
        "PASS" => 0,
        "FAIL" => 3,
        _ => 4,
    };
    assert_eq!(code, want_code);
    assert_eq!((g["alpha"].as_f64(), g["ci_level"].as_f64()), (Some(0.1), Some(0.8)));
}

#[test]
fn the_formats_say_the_same() {
    let d = TempDir::new("gate-fmt");
    let base = one_run(&d, "base", 100, 1);
    let cand = shifted(&d, &one_run(&d, "c0", 100, 2), "cand", -0.2);
    let p = policy(
        &d,
        "[[check]]\nname = \"reward <ok> & fine\"\nmetric = \"reward\"\nkind = \"non_inferiority\"\nmargin = 0.02\n\n\
         [[check]]\nname = \"by subset\"\nmetric = \"reward\"\nkind = \"equivalence\"\nmargin = 0.5\nby = \"subset\"\n",
    );
    let (_, g) = gate(&p, &[&base, &cand], &[]);
    let rows = g["checks"].as_array().unwrap();
    let args = |format: &str| -> Vec<String> {
        ["gate", "--policy", p.to_str().unwrap(), "--rollouts", base.to_str().unwrap(), "--rollouts"]
            .iter()
            .map(|s| s.to_string())
            .chain([cand.display().to_string(), "--format".into(), format.into()])
            .collect()
    };
    // Text: a header, then one line per check beginning with its verdict, then the gate.
    let o = rollstat().args(args("text")).fails(3);
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("verdict") && lines[0].contains("90% interval"), "{text}");
    for (l, r) in lines[1..].iter().zip(rows) {
        assert!(l.starts_with(r["verdict"].as_str().unwrap()), "{l}");
        assert!(l.contains(r["candidate"].as_str().unwrap()), "{l}");
    }
    assert_eq!(lines[rows.len() + 1], "");
    assert!(lines[rows.len() + 2].starts_with("gate: FAIL"), "{text}");
    // Markdown, to stdout and appended to the job summary.
    let summary = d.join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let o = rollstat().args(args("markdown")).env("GITHUB_STEP_SUMMARY", &summary).fails(3);
    let md = stdout(&o);
    assert!(md.starts_with("## rollstat gate: **FAIL**\n\n| verdict | check |"), "{md}");
    assert_eq!(md.lines().filter(|l| l.starts_with("| **")).count(), rows.len(), "{md}");
    assert_eq!(std::fs::read_to_string(&summary).unwrap(), format!("earlier step\n{md}"));
    // A summary that cannot be written is a warning; the verdict stands.
    let o = rollstat().args(args("markdown")).env("GITHUB_STEP_SUMMARY", d.join("no/such/dir/summary.md")).fails(3);
    assert_eq!(stdout(&o), md);
    assert!(stderr(&o).contains("warning: GITHUB_STEP_SUMMARY="), "{}", stderr(&o));
    // JUnit: one test case per row, a failure per FAIL; names escaped.
    let out = d.join("gate.xml");
    let mut a = args("junit");
    a.extend(["--out".into(), out.display().to_string()]);
    rollstat().args(a).fails(3);
    let xml = std::fs::read_to_string(&out).unwrap();
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites"), "{xml}");
    assert_eq!(xml.matches("<testcase ").count(), rows.len());
    let fails = rows.iter().filter(|r| r["verdict"] == "FAIL").count();
    assert!(fails >= 1);
    assert_eq!(xml.matches("<failure ").count(), fails, "{xml}");
    assert!(xml.contains(&format!("failures=\"{fails}\"")), "{xml}");
    assert!(xml.contains("name=\"reward &lt;ok&gt; &amp; fine\""), "{xml}");
    // JSON: the keys of the gate and of each check, in order.
    let o = rollstat().args(args("json")).fails(3);
    let Ok(rollstat::json::Json::Obj(top)) = rollstat::json::parse(&o.stdout) else { panic!("{}", stdout(&o)) };
    let names =
        |m: &[(rollstat::json::Key, rollstat::json::Json)]| m.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>();
    assert_eq!(names(&top), ["verdict", "checks", "baseline", "alpha", "ci_level"]);
    let rollstat::json::Json::Arr(checks) = &top[1].1 else { panic!() };
    let rollstat::json::Json::Obj(first) = &checks[0] else { panic!() };
    let want = [
        "name",
        "metric",
        "kind",
        "verdict",
        "estimate",
        "ci_low",
        "ci_high",
        "p",
        "p_adjusted",
        "tasks",
        "tasks_needed",
        "se",
        "candidate",
        "group",
        "required",
    ];
    assert_eq!(names(first), want);
}

#[test]
fn policy_problems_are_refused_with_their_line_and_key() {
    let d = TempDir::new("gate-policy");
    let base = one_run(&d, "base", 20, 1);
    let cand = one_run(&d, "cand", 20, 2);
    let head = "alpha = 0.05\n\n[[check]]\nname = \"x\"\n";
    let cases = [
        (format!("{head}metric = \"reward\"\nkind = \"non_inferiority\"\nmargn = 0.02\n"), 7, "margn"),
        (format!("{head}metric = \"reward\"\nkind = \"non_inferiority\"\nmargin = -0.02\n"), 7, "margin"),
        (format!("{head}metric = \"reward\"\nkind = \"better\"\nmargin = 0.02\n"), 6, "kind"),
        (format!("{head}metric = \"reward\"\nkind = \"threshold\"\nmargin = 0.02\n"), 7, "margin"),
        (format!("{head}metric = \"pass@0\"\nkind = \"superiority\"\n"), 5, "metric"),
        (format!("{head}metric = \"reward\"\nkind = \"superiority\"\nrequired = \"yes\"\n"), 7, "required"),
    ];
    for (text, line, key) in &cases {
        let p = policy(&d, text);
        // The rollouts named do not exist: the policy is refused before any is read.
        let o = rollstat()
            .args([
                "gate",
                "--policy",
                p.to_str().unwrap(),
                "--rollouts",
                "missing-base.jsonl",
                "--rollouts",
                "missing.jsonl",
            ])
            .fails(2);
        let e = stderr(&o);
        assert!(e.contains(&format!("gate.toml, line {line}, key `{key}`")), "{text}\n{e}");
        assert!(!e.contains("missing"), "{e}");
    }
    // A metric no rollout has, and a breakdown field none has: named at the policy's
    // line, after reading, and no output is written.
    let out = d.join("gate.json");
    for (text, line, key) in [
        (format!("{head}metric = \"rewrd\"\nkind = \"superiority\"\n"), 5, "metric"),
        (format!("{head}metric = \"reward\"\nkind = \"superiority\"\nby = \"nope\"\n"), 7, "by"),
    ] {
        let p = policy(&d, &text);
        let o = rollstat()
            .args(["gate", "--policy", p.to_str().unwrap(), "--rollouts", base.to_str().unwrap()])
            .args(["--rollouts", cand.to_str().unwrap(), "--format", "json", "--out", out.to_str().unwrap()])
            .fails(2);
        let e = stderr(&o);
        assert!(e.contains(&format!("gate.toml, line {line}, key `{key}`")), "{text}\n{e}");
        assert!(!out.exists());
    }
}

#[test]
fn the_noise_floor_is_a_seeded_a_a_split_of_the_repeats() {
    let d = TempDir::new("gate-noise");
    let (run, _) = halves(&d, 120, 1);
    // The same run with no repeat noise: every rollout of a task scores the same.
    let mut flat = String::new();
    for line in std::fs::read_to_string(&run).unwrap().lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        let t = v["_ng_task_index"].as_i64().unwrap();
        v["reward"] = Value::from((t % 7) as f64 / 7.0);
        flat.push_str(&serde_json::to_string(&v).unwrap());
        flat.push('\n');
    }
    let quiet = d.join("quiet.jsonl");
    std::fs::write(&quiet, flat).unwrap();
    let p = policy(
        &d,
        "[[check]]\nname = \"ni\"\nmetric = \"reward\"\nkind = \"non_inferiority\"\nmargin = 0.001\n\n\
         [[check]]\nname = \"eq\"\nmetric = \"reward\"\nkind = \"equivalence\"\nmargin = 0.9\nby = \"subset\"\n",
    );
    let noise = |file: &Path, seed: &str, format: &str| {
        rollstat()
            .args(["gate", "--noise", "--policy", p.to_str().unwrap(), "--rollouts", file.to_str().unwrap()])
            .args(["--splits", "40", "--seed", seed, "--format", format])
            .ok()
            .stdout
    };
    let one = noise(&run, "3", "json");
    assert_eq!(one, noise(&run, "3", "json"), "the same seed, the same splits");
    assert_ne!(one, noise(&run, "4", "json"));
    let v: Value = serde_json::from_slice(&one).unwrap();
    let rows = v["checks"].as_array().unwrap();
    assert_eq!(rows[0]["splits"], 40);
    assert!(rows.len() >= 3, "one row per subset for the second check: {v}");
    for r in rows {
        let (floor, median) = (r["floor"].as_f64().unwrap(), r["median"].as_f64().unwrap());
        assert!(0.0 < median && median <= floor && floor < 0.9, "{r}");
    }
    // Without repeat noise the halves agree exactly on every task: nothing to resolve.
    let v: Value = serde_json::from_slice(&noise(&quiet, "3", "json")).unwrap();
    for r in v["checks"].as_array().unwrap() {
        assert_eq!((r["floor"].as_f64(), r["median"].as_f64()), (Some(0.0), Some(0.0)), "{r}");
    }
    // The text names a margin set below the floor.
    let text = String::from_utf8(noise(&run, "3", "text")).unwrap();
    let ni = text.lines().find(|l| l.starts_with("ni ")).unwrap();
    assert!(ni.ends_with("below the noise floor"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("eq ") && l.contains("below")), "{text}");
}

/// Per task: its standing failures (sidecar keys with no row) over its rows and those.
fn failure_rates(rollouts: &Path) -> std::collections::BTreeMap<i64, f64> {
    use std::collections::{BTreeMap, BTreeSet};
    let key = |v: &Value| (v["_ng_task_index"].as_i64().unwrap(), v["_ng_rollout_index"].as_i64().unwrap());
    let mut rows: BTreeMap<i64, usize> = BTreeMap::new();
    let mut present = BTreeSet::new();
    for line in std::fs::read_to_string(rollouts).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        *rows.entry(key(&v).0).or_default() += 1;
        present.insert(key(&v));
    }
    let sidecar = rollouts.with_file_name("rollouts_failures.jsonl");
    let mut failed: BTreeSet<(i64, i64)> = BTreeSet::new();
    for line in std::fs::read_to_string(sidecar).unwrap().lines() {
        let k = key(&serde_json::from_str(line).unwrap());
        if !present.contains(&k) {
            failed.insert(k);
        }
    }
    let tasks: BTreeSet<i64> = rows.keys().copied().chain(failed.iter().map(|k| k.0)).collect();
    tasks
        .into_iter()
        .map(|t| {
            let f = failed.iter().filter(|k| k.0 == t).count() as f64;
            (t, f / (rows.get(&t).copied().unwrap_or(0) as f64 + f))
        })
        .collect()
}

#[test]
fn failure_rates_are_gated_from_the_failures_sidecars() {
    let d = TempDir::new("gate-failures");
    let gen = |name: &str, frac: &str| {
        let out = d.join(name);
        let args = ["--tasks", "150", "--repeats", "4", "--agents", "1", "--task-seed", "1", "--seed", "1"];
        generate(&out, &[&args[..], &["--failure-frac", frac]].concat());
        out.join("rollouts.jsonl")
    };
    let (few, many) = (gen("few", "0.02"), gen("many", "0.3"));
    let p = policy(
        &d,
        "[[check]]\nname = \"no more failures\"\nmetric = \"failure_rate\"\nkind = \"non_inferiority\"\nmargin = 0.02\n\n\
         [[check]]\nname = \"at most 10% fail\"\nmetric = \"failure_rate\"\nkind = \"threshold\"\nmax = 0.1\n",
    );
    let (code, g) = gate(&p, &[&few, &many], &[]);
    assert_eq!((code, verdicts(&g)), (3, vec!["FAIL", "FAIL"]), "{g}");
    // The estimate: the mean over the paired tasks of the difference of their rates.
    let (a, b) = (failure_rates(&few), failure_rates(&many));
    let shared: Vec<i64> = a.keys().filter(|t| b.contains_key(t)).copied().collect();
    let want = shared.iter().map(|t| b[t] - a[t]).sum::<f64>() / shared.len() as f64;
    let c = &g["checks"][0];
    assert_eq!(c["tasks"].as_u64(), Some(shared.len() as u64));
    assert!((c["estimate"].as_f64().unwrap() - want).abs() < 1e-12, "{c} vs {want}");
    let mean = b.values().sum::<f64>() / b.len() as f64;
    assert!((g["checks"][1]["estimate"].as_f64().unwrap() - mean).abs() < 1e-12, "{g}");
    // The other way round, fewer failures pass (lower is better by default).
    let (code, g) = gate(&p, &[&many, &few], &[]);
    assert_eq!((code, verdicts(&g)), (0, vec!["PASS", "PASS"]), "{g}");
}

#[test]
fn health_checks_are_gated_per_rollout() {
    // The candidate: rollouts whose trajectories trip the health checks, beside the
    // verdicts NeMo Gym's check wrote for them; the baseline: the same rollouts without
    // their trajectories (nothing to flag).
    let d = TempDir::new("gate-health");
    let case = fixtures().join("conformance/gym_aggregate/health/rollout_checks");
    let text = std::fs::read_to_string(case.join("rollouts.jsonl")).unwrap();
    let candidate = d.join("candidate.jsonl");
    std::fs::write(&candidate, &text).unwrap();
    let baseline = d.join("baseline.jsonl");
    let stripped: Vec<String> = text
        .lines()
        .map(|l| {
            let mut v: serde_json::Map<String, Value> = serde_json::from_str(l).unwrap();
            v.remove("ng_trajectory");
            serde_json::to_string(&v).unwrap()
        })
        .collect();
    std::fs::write(&baseline, stripped.join("\n") + "\n").unwrap();
    let check = "model_call_zero_completion_tokens";
    // Per task, the share of its measured rollouts the check flagged.
    let verdicts_text = std::fs::read_to_string(case.join("expected/rollout_verdicts.jsonl")).unwrap();
    let mut flagged = std::collections::BTreeSet::new();
    for line in verdicts_text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["findings"].as_array().unwrap().iter().any(|f| f["check"] == check) {
            flagged.insert((v["_ng_task_index"].as_i64().unwrap(), v["_ng_rollout_index"].as_i64().unwrap()));
        }
    }
    assert!(!flagged.is_empty());
    let mut share: std::collections::BTreeMap<i64, (f64, f64)> = Default::default();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["mask_sample"] == Value::Bool(true) || !v["reward"].is_number() {
            continue;
        }
        let key = (v["_ng_task_index"].as_i64().unwrap(), v["_ng_rollout_index"].as_i64().unwrap());
        let e = share.entry(key.0).or_default();
        e.0 += f64::from(u8::from(flagged.contains(&key)));
        e.1 += 1.0;
    }
    let want = share.values().map(|(k, n)| k / n).sum::<f64>() / share.len() as f64;
    let p = policy(
        &d,
        &format!(
            "[[check]]\nname = \"no more empty completions\"\nmetric = \"health:{check}\"\nkind = \"non_inferiority\"\nmargin = 0.01\n\n\
             [[check]]\nname = \"few empty completions\"\nmetric = \"health:{check}\"\nkind = \"threshold\"\nmax = 0.5\nrequired = false\n"
        ),
    );
    let (_, g) = gate(&p, &[&baseline, &candidate], &[]);
    let c = &g["checks"][0];
    assert_eq!(c["metric"], format!("health:{check}"));
    assert_eq!(c["tasks"].as_u64(), Some(share.len() as u64), "{c}");
    assert!((c["estimate"].as_f64().unwrap() - want).abs() < 1e-12, "{c} vs {want}");
    assert!((g["checks"][1]["estimate"].as_f64().unwrap() - want).abs() < 1e-12, "{g}");
    assert_ne!(c["verdict"], "PASS", "more flagged rollouts do not pass (lower is better): {c}");
    // The other way round the candidate has nothing flagged: not worse.
    let (_, g) = gate(&p, &[&candidate, &baseline], &[]);
    assert!((g["checks"][0]["estimate"].as_f64().unwrap() + want).abs() < 1e-12, "{g}");
    assert_eq!(g["checks"][1]["estimate"].as_f64(), Some(0.0), "{g}");

    // A name that is not a rollout check is refused at its line.
    let bad =
        policy(&d, "[[check]]\nname = \"x\"\nmetric = \"health:no_such_check\"\nkind = \"threshold\"\nmax = 0.1\n");
    let o = rollstat()
        .args(["gate", "--policy"])
        .arg(&bad)
        .arg("--rollouts")
        .arg(&baseline)
        .arg("--rollouts")
        .arg(&candidate)
        .output();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("gate.toml, line 3, key `metric`") && err.contains("model_call_failed"), "{err}");
}
