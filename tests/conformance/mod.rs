//! Conformance: every case of the corpus (the constructed and generated cases in
//! tests/fixtures, and the cases on NeMo Gym's own examples from the optional folder)
//! through `profile` (strict and --allow-partial), `aggregate` and pass@k, compared with
//! what NeMo Gym 0.7.0 produced, by the rules of the corpus README.

use std::path::{Path, PathBuf};

use crate::common::*;
use rollstat::json::Json;

fn cases() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for r in [fixtures().join("conformance/constructed"), fixtures().join("conformance/generated")] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&r)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("case.json").exists())
            .collect();
        v.sort();
        out.extend(v);
    }
    out.extend(example_cases("nemo_gym_examples", "case.json", |_| true));
    out
}

fn oracle<'a>(case: &'a Json, key: &str) -> Option<&'a Json> {
    case.get("oracle").and_then(|o| o.get(key))
}

fn str_of(j: Option<&Json>) -> Option<String> {
    match j {
        Some(Json::Str(s)) => Some(s.clone()),
        _ => None,
    }
}

/// Parses `warning: MSG` / `warning: MSG (N times)` lines.
fn our_warnings(stderr: &str) -> Vec<(String, i64)> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("warning: "))
        .map(|m| {
            if let Some(body) = m.strip_suffix(" times)") {
                if let Some((msg, n)) = body.rsplit_once(" (") {
                    if let Ok(n) = n.parse() {
                        return (msg.to_string(), n);
                    }
                }
            }
            (m.to_string(), 1)
        })
        .collect()
}

/// A warning with the agent it names (`agent='…'`) blanked, and without the `[field,
/// agent, repeat]` rollstat adds to the zero-standard-error warning.
fn unnamed_agent(msg: &str) -> String {
    let msg = match msg.strip_suffix(']').and_then(|m| m.rsplit_once(" [")) {
        Some((head, _)) if head.starts_with("Standard error is 0") => head,
        _ => msg,
    };
    match msg.split_once("agent='") {
        Some((head, rest)) => match rest.split_once('\'') {
            Some((_, tail)) => format!("{head}agent='…'{tail}"),
            None => msg.to_string(),
        },
        None => msg.to_string(),
    }
}

fn check_warnings(expected: &Path, stderr: &str, what: &str, fails: &mut Vec<String>) {
    if !expected.exists() {
        return;
    }
    let w = read_json(expected);
    // Warnings must come under the same conditions, with the same counts and numbers; the
    // agent they name may differ: NeMo Gym's aggregate names a placeholder (`agent='agent'`)
    // where rollstat names the run's real label. Messages equal but for that name count
    // together.
    let mut ours: Vec<(String, i64)> = Vec::new();
    for (m, c) in our_warnings(stderr) {
        let m = unnamed_agent(&m);
        match ours.iter_mut().find(|(x, _)| *x == m) {
            Some(slot) => slot.1 += c,
            None => ours.push((m, c)),
        }
    }
    if let Some(Json::Arr(list)) = w.get("warnings") {
        for item in list {
            let msg = unnamed_agent(&str_of(item.get("message")).unwrap_or_default());
            let count = match item.get("count") {
                Some(Json::Int(c)) => *c,
                _ => 1,
            };
            if !ours.iter().any(|(m, c)| *m == msg && *c == count) {
                fails.push(format!("{what}: missing warning ({count}x) {msg:?}; ours: {ours:?}"));
            }
        }
    }
}

/// The reference refused: we must exit 2, write nothing, and name the same problem.
fn check_refusal(err_file: &Path, out: &std::process::Output, outdir: &TempDir, what: &str, fails: &mut Vec<String>) {
    let e = read_json(err_file);
    let msg = str_of(e.get("message")).unwrap_or_default();
    let ours = stderr(out);
    if out.status.code() != Some(2) {
        fails.push(format!("{what}: expected exit 2 (reference: {msg}), got {:?}; stderr {ours}", out.status.code()));
        return;
    }
    let leftovers: Vec<String> =
        outdir.files().into_iter().filter(|f| !f.ends_with(".jsonl") || f.contains("_reward_profiling")).collect();
    if !leftovers.is_empty() {
        fails.push(format!("{what}: refused but left files {leftovers:?}"));
    }
    // The same keys: the first "(a, b)" tuple of the reference message.
    if let Some(start) = msg.find('(') {
        if let Some(end) = msg[start..].find(')') {
            let tuple = &msg[start..=start + end];
            if tuple.contains(", ")
                && tuple[1..tuple.len() - 1].split(", ").all(|p| p.parse::<i64>().is_ok())
                && !ours.contains(tuple)
            {
                fails.push(format!("{what}: our error does not name {tuple}: {ours}"));
            }
        }
    }
    let phrase_ok = if msg.contains("Malformed JSON") {
        ours.contains("invalid JSON") || ours.contains("expected a JSON object")
    } else if msg.contains("KeyError") || msg.starts_with('\'') {
        ours.contains("_ng_task_index") || ours.contains("_ng_rollout_index")
    } else if msg.contains("Duplicate") {
        ours.contains("Duplicate") || ours.contains("_ng_task_index")
    } else if msg.contains("no matching materialized input rows") {
        ours.contains("no matching materialized input rows")
    } else if msg.contains("Missing rollout results") {
        ours.contains("Missing rollout results") && ours.contains("--allow-partial")
    } else {
        // A refusal this check does not know: teach it the reference's phrase, rather
        // than accepting any error.
        fails.push(format!("{what}: unrecognised reference refusal {msg:?}; ours: {ours}"));
        return;
    };
    if !phrase_ok {
        fails.push(format!("{what}: our error names another problem.\n  reference: {msg}\n  ours: {ours}"));
    }
}

fn compare_file(got: &Path, want: &Path, what: &str, fails: &mut Vec<String>) {
    if !got.exists() {
        fails.push(format!("{what}: {} not written", got.display()));
        return;
    }
    let (g, w) = if want.extension().is_some_and(|e| e == "jsonl") {
        (Json::Arr(read_jsonl(got)), Json::Arr(read_jsonl(want)))
    } else {
        (read_json(got), read_json(want))
    };
    if let Some(d) = diff(&g, &w, "") {
        fails.push(format!("{what}: {d}"));
    }
}

fn number_after(text: &str, prefix: &str) -> Option<i64> {
    let at = text.find(prefix)? + prefix.len();
    let digits: String = text[at..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

fn check_summary(expected: &Path, stdout: &str, what: &str, fails: &mut Vec<String>) {
    if !expected.exists() {
        return;
    }
    let s = read_json(expected);
    let int = |k: &str| match s.get(k) {
        Some(Json::Int(i)) => *i,
        _ => -1,
    };
    let got = [
        number_after(stdout, "Reward profile completion: "),
        stdout.find("Reward profile completion: ").and_then(|i| number_after(&stdout[i..], "/")),
        number_after(stdout, "Input rows: "),
        stdout.find("total; ").and_then(|i| number_after(&stdout[i..], "total; ")),
        stdout.find("complete; ").and_then(|i| number_after(&stdout[i..], "complete; ")),
        stdout.find("partial; ").and_then(|i| number_after(&stdout[i..], "partial; ")),
    ];
    let want = [
        int("completed_rollout_rows"),
        int("expected_rollout_rows"),
        int("total_input_rows"),
        int("complete_input_rows"),
        int("partial_input_rows"),
        int("missing_input_rows"),
    ];
    for (g, w) in got.iter().zip(want) {
        if *g != Some(w) {
            fails.push(format!("{what}: completion summary {got:?} != {want:?}\n{stdout}"));
            return;
        }
    }
}

fn check_profile(case: &Path, c: &Json, partial: bool, fails: &mut Vec<String>) {
    let key = if partial { "profile-partial" } else { "profile" };
    let Some(verdict) = str_of(oracle(c, key)) else { return };
    let inputs = case.join("materialized_inputs.jsonl");
    if !inputs.exists() {
        return;
    }
    let out_dir = TempDir::new("conf");
    let mut args = vec![
        "profile".to_string(),
        "--inputs".into(),
        inputs.display().to_string(),
        "--rollouts".into(),
        case.join("rollouts.jsonl").display().to_string(),
        "--out-dir".into(),
        out_dir.path().display().to_string(),
    ];
    if partial {
        args.push("--allow-partial".into());
    }
    let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let o = run(&args);
    let what = format!("{} {key}", case.display());
    let exp = case.join("expected").join(key);
    if verdict == "error" {
        check_refusal(&exp.join("rollouts_error.json"), &o, &out_dir, &what, fails);
        return;
    }
    if !o.status.success() {
        fails.push(format!("{what}: failed: {}", stderr(&o)));
        return;
    }
    for f in ["rollouts_reward_profiling.jsonl", "rollouts_agent_metrics.json", "rollouts_repeat_level_metrics.json"] {
        compare_file(&out_dir.join(f), &exp.join(f), &format!("{what} {f}"), fails);
    }
    check_summary(&exp.join("rollouts_completion_summary.json"), &stdout(&o), &what, fails);
    if let Some(m) = std::fs::read_to_string(exp.join("stdout.txt"))
        .ok()
        .and_then(|t| number_after(&t, "Masked from quality metrics: "))
    {
        if number_after(&stdout(&o), "Masked from quality metrics: ") != Some(m) {
            fails.push(format!("{what}: masked count differs from {m}"));
        }
    }
    check_warnings(&exp.join("rollouts_warnings.json"), &stderr(&o), &what, fails);
}

fn aggregate_args(c: &Json) -> Vec<String> {
    match oracle(c, "aggregate_args") {
        Some(Json::Arr(a)) => a.iter().filter_map(|x| str_of(Some(x))).collect(),
        _ => vec![],
    }
}

fn check_aggregate(case: &Path, c: &Json, fails: &mut Vec<String>) {
    let Some(verdict) = str_of(oracle(c, "aggregate")) else { return };
    let out_dir = TempDir::new("agg");
    let out = out_dir.join("rollouts_aggregate_metrics.json");
    let mut args = vec![
        "aggregate".to_string(),
        "--rollouts".into(),
        case.join("rollouts.jsonl").display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "-q".into(),
    ];
    let inputs = case.join("materialized_inputs.jsonl");
    if inputs.exists() {
        args.push("--inputs".into());
        args.push(inputs.display().to_string());
    }
    let extra = aggregate_args(c);
    let what = format!("{} aggregate", case.display());
    if !extra.is_empty() && verdict == "ok" {
        // Without --agent, rollouts that name no agent are refused.
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let o = run(&a);
        if o.status.code() != Some(2) || !stderr(&o).contains("--agent") || out.exists() {
            fails.push(format!(
                "{what}: expected a refusal naming --agent without it, got {:?}: {}",
                o.status.code(),
                stderr(&o)
            ));
        }
    }
    args.extend(extra);
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let o = run(&a);
    let exp = case.join("expected/aggregate");
    if verdict == "error" {
        check_refusal(&exp.join("rollouts_aggregate_metrics_error.json"), &o, &out_dir, &what, fails);
        return;
    }
    // Where NeMo Gym silently wrote `[]` (no row both names an agent and carries task
    // indexes), rollstat refuses instead and says why.
    let expected_empty = read_json(&exp.join("rollouts_aggregate_metrics.json")) == Json::Arr(vec![]);
    if expected_empty && o.status.code() == Some(2) {
        let e = stderr(&o);
        if !(e.contains("_ng_task_index") || e.contains("--agent")) || out.exists() {
            fails.push(format!("{what}: refusal of an input NeMo Gym aggregates to [] must name the missing key: {e}"));
        }
        return;
    }
    if !o.status.success() {
        fails.push(format!("{what}: failed: {}", stderr(&o)));
        return;
    }
    compare_file(&out, &exp.join("rollouts_aggregate_metrics.json"), &what, fails);
    check_warnings(&exp.join("rollouts_aggregate_metrics_warnings.json"), &stderr(&o), &what, fails);
}

fn check_passk(case: &Path, c: &Json, fails: &mut Vec<String>) {
    let expected = case.join("expected/passk.json");
    if !expected.exists() {
        return;
    }
    let out_dir = TempDir::new("passk");
    let out = out_dir.join("agg.json");
    let mut args = vec![
        "aggregate".to_string(),
        "--rollouts".into(),
        case.join("rollouts.jsonl").display().to_string(),
        "--out".into(),
        out.display().to_string(),
        "-q".into(),
        "--metric".into(),
        "pass_at_k".into(),
    ];
    let inputs = case.join("materialized_inputs.jsonl");
    if inputs.exists() {
        args.push("--inputs".into());
        args.push(inputs.display().to_string());
    }
    args.extend(aggregate_args(c));
    let flags = c.get("flags");
    if let Some(k) = str_of(flags.and_then(|f| f.get("answer_key"))) {
        args.push("--answer-key".into());
        args.push(k);
    }
    if let Some(k) = str_of(flags.and_then(|f| f.get("subset_key"))) {
        args.push("--subset-key".into());
        args.push(k);
    }
    let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let o = run(&a);
    let what = format!("{} passk", case.display());
    if !o.status.success() {
        fails.push(format!("{what}: failed: {}", stderr(&o)));
        return;
    }
    let got = read_json(&out);
    let want = read_json(&expected);
    let Json::Obj(labels) = &want else { return };
    for (label, metrics) in labels {
        let Json::Arr(entries) = &got else { return };
        let Some(entry) = entries
            .iter()
            .find(|e| e.get("agent_ref").and_then(|r| r.get("name")) == Some(&Json::Str(label.to_string())))
        else {
            fails.push(format!("{what}: no entry for {label}"));
            continue;
        };
        let am = entry.get("agent_metrics").cloned().unwrap_or(Json::Null);
        let Json::Obj(items) = metrics else { continue };
        let mut flat: Vec<(String, Json)> = Vec::new();
        for (k, v) in items {
            if &**k == "subsets" {
                if let Json::Obj(sub) = v {
                    flat.extend(sub.iter().map(|(a, b)| (a.to_string(), b.clone())));
                }
            } else {
                flat.push((k.to_string(), v.clone()));
            }
        }
        for (k, v) in flat {
            match am.get(&k) {
                None => fails.push(format!("{what} {label}: missing {k}")),
                Some(g) => {
                    if let Some(d) = diff(g, &v, &k) {
                        fails.push(format!("{what} {label}: {d}"));
                    }
                }
            }
        }
    }
}

#[test]
fn conformance_corpus() {
    let cases = cases();
    assert!(cases.len() >= 22, "conformance cases not found");
    let mut fails = Vec::new();
    for case in &cases {
        let c = read_json(&case.join("case.json"));
        check_profile(case, &c, false, &mut fails);
        check_profile(case, &c, true, &mut fails);
        check_aggregate(case, &c, &mut fails);
        check_passk(case, &c, &mut fails);
    }
    if !fails.is_empty() {
        let n = fails.len();
        let shown: Vec<String> = fails.into_iter().take(40).collect();
        panic!("{n} conformance failures:\n{}", shown.join("\n"));
    }
}
