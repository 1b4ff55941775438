//! `rollstat report`: the page's figures are `aggregate`'s and `compare`'s, read back
//! from the `data-value` attributes of its table cells; bad input leaves no page.

use std::collections::HashMap;
use std::path::Path;

use super::aggregate_sweep;
use crate::common::*;

/// A sweep whose three agents share their 50 tasks (so comparisons pair them).
fn sweep(d: &TempDir) -> (std::path::PathBuf, std::path::PathBuf) {
    let args = ["--tasks", "50", "--repeats", "4", "--agents", "3", "--seed", "21", "--masked-frac", "0.05"];
    generate(d.path(), &[&args[..], &["--reward", "mixed", "--fan-out"]].concat());
    (d.join("rollouts.jsonl"), d.join("materialized_inputs.jsonl"))
}

/// The `data-key` → `data-value` pairs of each `<tr data-run=…>` row in the section
/// with id `section`, by run name.
fn rows(html: &str, section: &str) -> HashMap<String, HashMap<String, f64>> {
    let start = html.find(&format!(r#"<section id="{section}">"#)).unwrap_or_else(|| panic!("no section {section}"));
    let body = &html[start..start + html[start..].find("</section>").unwrap()];
    let mut out = HashMap::new();
    for tr in body.split(r#"<tr data-run=""#).skip(1) {
        let (name, rest) = tr.split_once('"').unwrap();
        let row = &rest[..rest.find("</tr>").unwrap()];
        let mut cells = HashMap::new();
        for cell in row.split(r#"data-key=""#).skip(1) {
            let (key, rest) = cell.split_once('"').unwrap();
            if let Some(v) = rest.strip_prefix(r#" data-value=""#) {
                cells.insert(key.to_string(), v.split('"').next().unwrap().parse::<f64>().unwrap());
            }
        }
        out.insert(name.replace("&amp;", "&"), cells);
    }
    out
}

/// `compare`'s CSV as one map per run.
fn compare_csv(args: &[&str], out: &Path) -> HashMap<String, HashMap<String, String>> {
    let mut a = vec!["compare"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--format", "csv", "--out", out.to_str().unwrap(), "-q"]);
    let o = run(&a);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(out).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            let m: HashMap<String, String> =
                head.iter().zip(l.split(',')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
            (m["run"].clone(), m)
        })
        .collect()
}

fn f(m: &HashMap<String, String>, k: &str) -> f64 {
    m[k].parse().unwrap_or_else(|_| panic!("{k}: {:?}", m[k]))
}

/// Every checked figure equals what `aggregate` and `compare` write for the same files,
/// and the page is reproducible byte for byte under SOURCE_DATE_EPOCH.
#[test]
fn figures_match_aggregate_and_compare() {
    let d = TempDir::new("report");
    let (r, i) = sweep(&d);
    let (rs, is) = (r.to_str().unwrap(), i.to_str().unwrap());
    let page = d.join("page.html");
    let make = || {
        rollstat()
            .args(["report", rs, "--inputs", is, "--out", page.to_str().unwrap()])
            .env("SOURCE_DATE_EPOCH", "1700000000")
            .ok()
    };
    let o = make();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("2023-11-14 22:13:20 UTC"), "the time stamp is SOURCE_DATE_EPOCH's");
    // Self-contained: nothing is fetched.
    for bad in ["<script", "<link", "src=", "url(", "https://"] {
        assert!(!html.contains(bad), "{bad} in the page");
    }
    // The same warnings on stderr as on the page.
    let warned = stderr(&o).lines().filter(|l| l.starts_with("warning: ")).count();
    assert_eq!(html.matches("<li>").count(), warned, "{}", stderr(&o));

    let agg = aggregate_sweep(&d, &r, &i, &[]);
    let cmp = compare_csv(&["--rollouts", rs, "--inputs", is], &d.join("c.csv"));
    let pass1 = compare_csv(&["--rollouts", rs, "--inputs", is, "--pass-at", "1"], &d.join("p1.csv"));
    let pass4 = compare_csv(&["--rollouts", rs, "--inputs", is, "--pass-at", "4"], &d.join("p4.csv"));
    let board = rows(&html, "leaderboard");
    let base = rows(&html, "baseline");
    let noise = rows(&html, "repeats");
    let entries = match &agg {
        rollstat::json::Json::Arr(e) => e,
        _ => panic!("aggregate writes an array"),
    };
    assert_eq!(board.len(), 3);
    assert_eq!(base.len(), 2, "every run but the baseline is compared");
    for e in entries {
        let name = e.get("agent_ref").and_then(|a| a.get("name")).and_then(|n| n.as_str()).unwrap();
        let am = e.get("agent_metrics").unwrap();
        let want = |k: &str| am.get(k).and_then(|v| v.as_f64()).unwrap();
        let row = &board[name];
        assert!(close(row["pooled_mean"], want("mean/reward")), "{name}");
        assert!(close(row["across_repeats_mean"], want("mean_across_repeats/mean/reward")), "{name}");
        assert!(close(noise[name]["across_repeats_mean"], want("mean_across_repeats/mean/reward")), "{name}");
        let c = &cmp[name];
        assert!(close(row["mean"], f(c, "mean")), "{name}");
        assert_eq!(row["tasks"], f(c, "tasks"));
        assert!(close(row["pass_at_1"], f(&pass1[name], "mean")), "{name}");
        assert!(close(row["pass_at_k"], f(&pass4[name], "mean")), "{name}");
        if let Some(b) = base.get(name) {
            for (page_key, csv_key) in
                [("diff", "diff"), ("p_value", "p_value"), ("wins", "wins"), ("losses", "losses"), ("ties", "ties")]
            {
                let got = *b.get(page_key).unwrap_or_else(|| panic!("{name} {page_key}: {b:?} {c:?}"));
                assert!(close(got, f(c, csv_key)), "{name} {page_key}: {got} vs {}", c[csv_key]);
            }
        } else {
            assert!(c["diff"].is_empty(), "{name} is the baseline");
        }
    }
    let rollouts = std::fs::read_to_string(&r).unwrap().lines().count();
    assert!(html.contains(&format!(r#"data-key="rollouts" data-value="{rollouts}""#)));
    // Reproducible bytes.
    let first = std::fs::read(&page).unwrap();
    make();
    assert_eq!(std::fs::read(&page).unwrap(), first);
}

/// `--baseline` picks the run the others are compared against.
#[test]
fn baseline_is_chosen() {
    let d = TempDir::new("report-base");
    let (r, i) = sweep(&d);
    let cmp = compare_csv(&["--rollouts", r.to_str().unwrap()], &d.join("c.csv"));
    let last = cmp.keys().max().unwrap().clone();
    let page = d.join("p.html");
    let o = run(&[
        "report",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--baseline",
        &last,
        "--out",
        page.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let base = rows(&std::fs::read_to_string(&page).unwrap(), "baseline");
    assert_eq!(base.len(), 2);
    assert!(!base.contains_key(&last));
}

/// Bad input: exit 2, a message naming the file and line, and no page (nor a
/// temporary file) left behind.
#[test]
fn bad_input_leaves_no_page() {
    let d = TempDir::new("report-bad");
    let (r, _) = sweep(&d);
    let mut text = std::fs::read_to_string(&r).unwrap();
    text.push_str("{\"reward\": 1, \"_ng_task_index\": \n");
    let bad = d.write("bad.jsonl", &text);
    let before = d.files();
    let o = run(&["report", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("bad.jsonl") && err.contains("line"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert_eq!(d.files(), before, "nothing written");

    // A field no rollout has.
    let o = run(&["report", r.to_str().unwrap(), "--metric", "no_such_field"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no_such_field"), "{}", stderr(&o));
    assert_eq!(d.files(), before, "nothing written");

    // The page may not overwrite an input.
    let o = run(&["report", r.to_str().unwrap(), "--out", r.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(d.files(), before);
}

/// The default page goes beside the rollouts file.
#[test]
fn default_output_beside_rollouts() {
    let d = TempDir::new("report-default");
    let (r, _) = sweep(&d);
    let o = run(&["report", r.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.join("rollouts_report.html").exists(), "{:?}", d.files());
}
