//! `rollstat aggregate`: what its warnings name.

use rollstat::json::Json;

use crate::common::*;

/// The unequal-repeats warning names the run's own label (NeMo Gym's aggregate names a
/// placeholder, `agent='agent'`, which tells a user nothing on a fanned-out sweep).
#[test]
fn unequal_repeats_warning_names_the_real_agent() {
    let d = TempDir::new("agg-warn");
    generate(
        d.path(),
        &["--tasks", "40", "--repeats", "3", "--agents", "2", "--fan-out", "--seed", "5", "--missing-frac", "0.1"],
    );
    let r = d.join("rollouts.jsonl");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", d.join("a.json").to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let named: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("repeat(s) are missing rollouts"))
        .filter_map(|l| l.split("agent='").nth(1).and_then(|t| t.split('\'').next()))
        .collect();
    assert_eq!(named.len(), 2, "one warning per agent: {err}");
    assert!(named.iter().all(|n| n.ends_with("_agent") && *n != "agent"), "{named:?}");
    assert_ne!(named[0], named[1], "{named:?}");
}

/// The zero-standard-error warning says which field of which agent (and repeat) it is
/// about, so the same message no longer stands for unrelated fields.
#[test]
fn zero_standard_error_warning_names_field_and_agent() {
    let d = TempDir::new("agg-zero-se");
    generate(d.path(), &["--tasks", "30", "--repeats", "3", "--agents", "2", "--fan-out", "--seed", "6"]);
    let r = d.join("rollouts.jsonl");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", d.join("a.json").to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let zero: Vec<&str> = err.lines().filter(|l| l.contains("Standard error is 0")).collect();
    assert!(!zero.is_empty(), "a generated sweep has fields constant across repeats: {err}");
    for l in zero {
        let what = l.rsplit_once(" [").map(|(_, w)| w).unwrap_or_else(|| panic!("no field named: {l}"));
        assert!(what.starts_with('`') && what.contains("_agent"), "{l}");
    }
}

/// Rollouts and materialized inputs from different runs are refused, naming the first
/// rollout whose agent its input row contradicts (they were accepted, and rollouts were
/// reported under the input row's agent).
#[test]
fn inputs_of_another_run_are_refused() {
    let d = TempDir::new("agg-mismatch");
    let a = d.join("a");
    let b = d.join("b");
    generate(&a, &["--tasks", "60", "--repeats", "2", "--agents", "3", "--seed", "1"]);
    generate(&b, &["--tasks", "60", "--repeats", "2", "--agents", "2", "--seed", "2"]);
    let rollouts = a.join("rollouts.jsonl");
    let other_inputs = b.join("materialized_inputs.jsonl");
    let out = d.join("agg.json");
    let o = run(&[
        "aggregate",
        rollouts.to_str().unwrap(),
        "--inputs",
        other_inputs.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("{}, line ", rollouts.display())), "{err}");
    assert!(err.contains("agent_ref.name") && err.contains(other_inputs.to_str().unwrap()), "{err}");
    assert!(err.contains("different runs"), "{err}");
    assert!(!out.exists());
    // Its own inputs are fine.
    let o = run(&[
        "aggregate",
        rollouts.to_str().unwrap(),
        "--inputs",
        a.join("materialized_inputs.jsonl").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Swapped files, files of different runs with no key in common, and a rollouts file
/// without rewards are refused (exit 2, nothing written), naming the file that looks
/// wrong; they used to be accepted with a warning or none.
#[test]
fn swapped_and_unrelated_files_are_refused() {
    let d = TempDir::new("agg-swap");
    generate(d.path(), &["--tasks", "20", "--repeats", "2", "--agents", "2", "--seed", "3"]);
    let rollouts = d.join("rollouts.jsonl");
    let inputs = d.join("materialized_inputs.jsonl");
    let out = d.join("agg.json");
    let agg = |r: &std::path::Path, i: &std::path::Path| {
        run(&["aggregate", r.to_str().unwrap(), "--inputs", i.to_str().unwrap(), "--out", out.to_str().unwrap()])
    };
    for (cmd, flag) in [("aggregate", "--out"), ("profile", "--out-dir")] {
        let o = run(&[
            cmd,
            "--rollouts",
            inputs.to_str().unwrap(),
            "--inputs",
            rollouts.to_str().unwrap(),
            flag,
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(&format!("{}, line 1", rollouts.display())) && err.contains("swapped"), "{err}");
        assert!(!out.exists());
    }
    // Keys shifted past every input row: no rollout belongs to these inputs.
    let text = std::fs::read_to_string(&rollouts).unwrap();
    let shifted = d.write("shifted.jsonl", &text.replace("\"_ng_task_index\":", "\"_ng_task_index\":1000"));
    let o = agg(&shifted, &inputs);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(shifted.to_str().unwrap()) && err.contains("no rollout key"), "{err}");
    assert!(err.contains(inputs.to_str().unwrap()), "{err}");
    assert!(!out.exists());
    // A copy of the inputs given as the rollouts: no row has a reward or a response.
    let bare = d.join("copy_of_inputs.jsonl");
    std::fs::copy(&inputs, &bare).unwrap();
    let o = agg(&bare, &inputs);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(bare.to_str().unwrap()) && err.contains("`reward`"), "{err}");
    assert!(!out.exists());
    // The right pair still works.
    let o = agg(&rollouts, &inputs);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.exists());
}

/// Rows with very many fields (20,000 numbers each) are aggregated, every field in the
/// result. Warnings and across-repeat statistics were searched once per field, which
/// made this case take 41 s where it now takes about 1 s.
#[test]
fn rows_with_twenty_thousand_fields_are_aggregated() {
    let d = TempDir::new("agg-wide");
    let mut text = String::new();
    for task in 0..3 {
        for rollout in 0..2 {
            text.push_str(&format!(
                "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, \"agent_ref\": {{\"name\": \"a\"}}, \"reward\": 1.0"
            ));
            for k in 0..20_000 {
                text.push_str(&format!(", \"k{k}\": {}", k as f64 * 0.5));
            }
            text.push_str("}\n");
        }
    }
    let r = d.write("wide.jsonl", &text);
    let out = d.join("wide.json");
    let o = run(&["aggregate", r.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let Json::Arr(entries) = read_json(&out) else { panic!() };
    let m = entries[0].get("agent_metrics").unwrap();
    assert_eq!(m.get("mean/k19999").and_then(Json::as_f64), Some(9999.5));
    assert_eq!(m.get("mean_across_repeats/mean/k19999").and_then(Json::as_f64), Some(9999.5));
}
