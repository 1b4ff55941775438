//! Inputs at the edges of shape and size: deep nesting, very wide lines, many agents, a
//! sweep without any numeric field. Each either works or is refused with a one-line
//! error and exit status 2, never an allocator abort or a stack overflow. The sizes
//! measured in docs/guarantees.md are larger; these keep the test suite fast.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Output;

use crate::common::{read_json, run, stderr, TempDir};
use rollstat::json::Json;

/// A rollout line of task `task` for agent `agent`, with `extra` members spliced in.
fn line(task: usize, agent: &str, extra: &str) -> String {
    format!(
        "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": 0, \"agent_ref\": {{\"name\": \"{agent}\"}}, {extra}\"reward\": {}}}\n",
        task % 2
    )
}

/// `aggregate` of `rollouts` (written into `d`); the output path and the run.
fn aggregate(d: &TempDir, rollouts: &str) -> (std::path::PathBuf, Output) {
    let r = d.write("rollouts.jsonl", rollouts);
    let out = d.join("agg.json");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    (out, o)
}

fn profile(d: &TempDir, inputs: &str, rollouts: &str) -> (std::path::PathBuf, Output) {
    let i = d.write("inputs.jsonl", inputs);
    let r = d.write("rollouts.jsonl", rollouts);
    let out = d.join("profile");
    let args = ["profile", "--inputs", i.to_str().unwrap(), "--rollouts", r.to_str().unwrap(), "--out-dir"];
    let o = run(&[&args[..], &[out.to_str().unwrap()]].concat());
    (out, o)
}

/// The agent entry of an aggregate file, by label.
fn entry<'a>(agg: &'a Json, agent: &str) -> &'a Json {
    let Json::Arr(entries) = agg else { panic!("not a list: {agg:?}") };
    entries
        .iter()
        .find(|e| e.get("agent_ref").and_then(|a| a.get("name")) == Some(&Json::Str(agent.into())))
        .unwrap_or_else(|| panic!("no entry for {agent}"))
}

fn refused(o: &Output, out: &Path, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.lines().last().unwrap_or("").contains(needle), "{err}");
    assert!(!out.exists(), "a refused run left {}", out.display());
}

const DEEP: usize = 100_000;

/// The rollout reader crosses model payloads with an explicit stack, so any depth is
/// read (NeMo Gym's reader stops at 1,024 levels; rollstat reads more).
#[test]
fn a_rollout_nested_100_000_levels_deep_is_read() {
    let d = TempDir::new("deep-rollout");
    let payload = format!("\"response\": {}{}, ", "[".repeat(DEEP), "]".repeat(DEEP));
    let rollouts = format!("{}{}", line(0, "a", &payload), line(1, "a", ""));
    let (out, o) = aggregate(&d, &rollouts);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(entry(&read_json(&out), "a").get("agent_metrics").unwrap().get("mean/reward"), Some(&Json::Float(0.5)));
}

/// An input row is written back whole (as the task's `sample`), and rows nested deeper
/// than 1,024 levels are refused as NeMo Gym's reader refuses them.
#[test]
fn an_input_row_nested_too_deep_is_refused() {
    let d = TempDir::new("deep-input");
    let deep = format!("{}{}", "{\"a\": ".repeat(DEEP), "1".to_string() + &"}".repeat(DEEP));
    let inputs = format!(
        "{{\"_ng_task_index\": 0, \"_ng_rollout_index\": 0, \"agent_ref\": {{\"name\": \"a\"}}, \"deep\": {deep}}}\n"
    );
    let (out, o) = profile(&d, &inputs, &line(0, "a", ""));
    refused(&o, &out, "nesting deeper than 1,024 levels");
    assert!(stderr(&o).contains("inputs.jsonl, line 1"), "{}", stderr(&o));
}

/// 1,000,000 keys on one line, in a payload object: crossed, not built.
#[test]
fn a_line_with_a_million_keys_in_a_payload() {
    let d = TempDir::new("wide-payload");
    let mut payload = String::from("\"info\": {");
    for k in 0..1_000_000 {
        let _ = write!(payload, "\"k{k}\": {k}, ");
    }
    payload.push_str("\"end\": 0}, ");
    let rollouts = format!("{}{}", line(0, "a", &payload), line(1, "a", ""));
    let (out, o) = aggregate(&d, &rollouts);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.exists());
}

/// Top-level numeric fields are statistics: every one of them gets its mean.
#[test]
fn a_row_with_20_000_numeric_fields() {
    let d = TempDir::new("wide-fields");
    let mut fields = String::new();
    for k in 0..20_000 {
        let _ = write!(fields, "\"f{k}\": {k}, ");
    }
    let rollouts = format!("{}{}", line(0, "a", &fields), line(1, "a", &fields));
    let (out, o) = aggregate(&d, &rollouts);
    assert!(o.status.success(), "{}", stderr(&o));
    let metrics = entry(&read_json(&out), "a").get("agent_metrics").unwrap().clone();
    assert_eq!(metrics.get("mean/f19999"), Some(&Json::Float(19_999.0)));
}

/// Every rollout its own agent: one aggregate entry each.
#[test]
fn twenty_thousand_distinct_agents() {
    let d = TempDir::new("many-agents");
    let n = 20_000;
    let mut rollouts = String::new();
    for i in 0..n {
        rollouts.push_str(&line(i, &format!("agent-{i}"), ""));
    }
    let (out, o) = aggregate(&d, &rollouts);
    assert!(o.status.success(), "{}", stderr(&o));
    let Json::Arr(entries) = read_json(&out) else { panic!() };
    assert_eq!(entries.len(), n);
    assert_eq!(
        entry(&Json::Arr(entries), "agent-7").get("agent_metrics").unwrap().get("mean/reward"),
        Some(&Json::Float(1.0))
    );
}

/// A sweep whose rows carry no numeric field at all (every reward null): the entry
/// holds only its repeat count, no statistic.
#[test]
fn a_sweep_without_numeric_fields() {
    let d = TempDir::new("no-numbers");
    let mut rollouts = String::new();
    for t in 0..4 {
        let _ = writeln!(
            rollouts,
            "{{\"_ng_task_index\": {t}, \"_ng_rollout_index\": 0, \"agent_ref\": {{\"name\": \"a\"}}, \"answer\": \"x\", \"reward\": null}}"
        );
    }
    let (out, o) = aggregate(&d, &rollouts);
    assert!(o.status.success(), "{}", stderr(&o));
    let agg = read_json(&out);
    let metrics = entry(&agg, "a").get("agent_metrics").unwrap();
    assert_eq!(metrics, &Json::Obj(vec![("num_repeats".into(), Json::Int(1))]));
}

/// Every task its own subset: pass@k is written per subset, tens of thousands of keys
/// in one agent's metrics, each found and placed in linear time.
#[test]
fn twenty_thousand_distinct_subsets() {
    let d = TempDir::new("many-subsets");
    let n = 20_000;
    let mut rollouts = String::new();
    for i in 0..n {
        rollouts.push_str(&line(i, "a", &format!("\"subset\": \"s{i}\", ")));
    }
    let r = d.write("rollouts.jsonl", &rollouts);
    let out = d.join("agg.json");
    let args = ["aggregate", "--rollouts", r.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let o = run(&[&args[..], &["--metric", "pass_at_k", "--subset-key", "subset"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let agg = read_json(&out);
    let metrics = entry(&agg, "a").get("agent_metrics").unwrap();
    let Json::Obj(members) = metrics else { panic!("not an object") };
    let per_subset = |s: &str| members.iter().filter(|(k, _)| k.starts_with(&format!("{s}/"))).count();
    assert!(per_subset("s19999") > 0, "no pass@k keys for the last subset");
    assert_eq!(per_subset("s7"), per_subset("s19999"));
    assert_eq!(metrics.get("s7/pass@1[avg-of-1]/accuracy"), Some(&Json::Float(100.0)));
}

/// A line of 64 MB (a model's output text) is checked where it lies, not copied.
#[test]
fn a_64_mb_line_is_read() {
    let d = TempDir::new("long-line");
    let payload = format!("\"response\": {{\"output_text\": \"{}\"}}, ", "abcdefgh".repeat(8 << 20));
    let rollouts = format!("{}{}", line(0, "a", &payload), line(1, "a", ""));
    let (out, o) = aggregate(&d, &rollouts);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(entry(&read_json(&out), "a").get("agent_metrics").unwrap().get("mean/reward"), Some(&Json::Float(0.5)));
}
