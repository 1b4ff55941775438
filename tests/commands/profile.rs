//! `rollstat profile`: lines read as NeMo Gym reads them, fan-out, subsets, warnings.

use rollstat::json::Json;

use super::*;
use crate::common::*;

/// Keys written with `\u` escapes, and keys given twice in one line, read as NeMo Gym's
/// reader (orjson) reads them: escapes decoded, the last value kept. Each file below
/// must give the same artifacts, byte for byte, as its plain form (what that reader
/// makes of it, written out again).
#[test]
fn escaped_and_repeated_keys_read_as_their_plain_form() {
    let d = TempDir::new("keys");
    let rollouts_odd = [
        // Escaped top-level, nested, index, mask, private and agent keys.
        r#"{"reward":1.0,"r\u0065sponse":{"\u0075sage":{"tok":3}},"mask_\u0073ample":false,"\u005fng_task_index":0,"_ng_rollout_index":0,"\u005fhidden":5,"agent_ref":{"n\u0061me":"A"}}"#,
        // A second `response` replaces the first one's usage.
        r#"{"reward":0.0,"response":{"usage":{"tok":4,"gone":1}},"response":{"usage":{"tok":5}},"mask_sample":false,"_ng_task_index":0,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
        // An object after a number of the same key, a second `ng_perf` and `agent_ref`.
        r#"{"reward":1.0,"score":2,"score":{"a":1},"ng_perf":{"x":1},"ng_perf":null,"_ng_task_index":1,"_ng_rollout_index":0,"agent_ref":{"name":"B"},"agent_ref":{"name":"A"}}"#,
        // A stamp taken back, an agent name given twice.
        r#"{"reward":0.5,"response":{"usage":{"tok":6}},"_ng_environment_server":"S","_ng_environment_server":null,"_ng_task_index":1,"_ng_rollout_index":1,"agent_ref":{"name":"B","name":"A"}}"#,
    ];
    let rollouts_odd = [
        rollouts_odd[0],
        rollouts_odd[1],
        rollouts_odd[2],
        rollouts_odd[3],
        // Repeated keys inside `usage`, and a second `usage`: the last value wins.
        r#"{"reward":1.0,"tok":3,"response":{"usage":{"tok":"n/a","tok":7,"w":1,"w":"x"}},"_ng_task_index":2,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":0.0,"response":{"usage":{"z":1},"usage":{"tok":8}},"_ng_task_index":2,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let rollouts_plain = [
        r#"{"reward":1.0,"response":{"usage":{"tok":3}},"mask_sample":false,"_ng_task_index":0,"_ng_rollout_index":0,"_hidden":5,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":0.0,"response":{"usage":{"tok":5}},"mask_sample":false,"_ng_task_index":0,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":1.0,"score":{"a":1},"ng_perf":null,"_ng_task_index":1,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":0.5,"response":{"usage":{"tok":6}},"_ng_environment_server":null,"_ng_task_index":1,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":1.0,"tok":3,"response":{"usage":{"tok":7,"w":"x"}},"_ng_task_index":2,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":0.0,"response":{"usage":{"tok":8}},"_ng_task_index":2,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let inputs_odd = [
        r#"{"q":"one","\u005fng_task_index":0,"_ng_rollout_index":0,"agent_ref":{"n\u0061me":"A"}}"#,
        r#"{"q":"one","_ng_task_index":0,"_ng_rollout_index":1,"agent_ref":{"name":"A"},"_ng_environment_server":"S","_ng_environment_server":null}"#,
        r#"{"q":"two","_ng_task_index":1,"_ng_rollout_index":0,"agent_ref":{"name":"B"},"agent_ref":{"name":"A"}}"#,
        r#"{"q":"two","_ng_task_index":1,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let inputs_odd = [
        inputs_odd[0],
        inputs_odd[1],
        inputs_odd[2],
        inputs_odd[3],
        r#"{"q":"three","_ng_task_index":2,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"three","_ng_task_index":2,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let inputs_plain = [
        r#"{"q":"one","_ng_task_index":0,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"one","_ng_task_index":0,"_ng_rollout_index":1,"agent_ref":{"name":"A"},"_ng_environment_server":null}"#,
        r#"{"q":"two","_ng_task_index":1,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"two","_ng_task_index":1,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"three","_ng_task_index":2,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"three","_ng_task_index":2,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let mut outs = Vec::new();
    for (name, r, i) in [("odd", rollouts_odd, inputs_odd), ("plain", rollouts_plain, inputs_plain)] {
        let r = d.write(&format!("{name}_rollouts.jsonl"), &(r.join("\n") + "\n"));
        let i = d.write(&format!("{name}_inputs.jsonl"), &(i.join("\n") + "\n"));
        let od = d.join(&format!("out_{name}"));
        std::fs::create_dir_all(&od).unwrap();
        let o = run(&[
            "profile",
            "--rollouts",
            r.to_str().unwrap(),
            "--inputs",
            i.to_str().unwrap(),
            "--out-dir",
            od.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let agg = od.join("agg.json");
        let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", agg.to_str().unwrap(), "-q"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let mut files = Vec::new();
        for f in std::fs::read_dir(&od).unwrap() {
            let f = f.unwrap().path();
            files.push((f.file_name().unwrap().to_string_lossy().replace(name, ""), std::fs::read(&f).unwrap()));
        }
        files.sort();
        outs.push(files);
    }
    // The three profile files, the aggregate and its two health reports.
    assert_eq!(outs[0].len(), 6);
    for (odd, plain) in outs[0].iter().zip(&outs[1]) {
        assert_eq!(odd.0, plain.0);
        assert_eq!(String::from_utf8_lossy(&odd.1), String::from_utf8_lossy(&plain.1), "{}", odd.0);
    }
    // What the plain form holds, so that the comparison is not between two failures.
    let agg = std::fs::read_to_string(d.join("out_plain/agg.json")).unwrap();
    assert!(agg.contains("\"mean/tok\": 5.8"), "{agg}");
    for absent in ["gone", "_hidden", "score", "perf_summary", "\"B\"", "/w\"", "/z\""] {
        assert!(!agg.contains(absent), "{absent} in {agg}");
    }
}

/// Two NeMo Gym rules checked against its own output (0.7.0, same inputs): fan-out is
/// decided by the input rows, also when one agent completed nothing; and a
/// `response.usage` value replaces the top-level value of the same name whatever it is,
/// so text there leaves no statistics and no float typing behind.
#[test]
fn fan_out_from_inputs_and_usage_text_as_nemo_gym_reads_them() {
    let d = TempDir::new("fanout-usage");
    let i = d.write(
        "inputs.jsonl",
        "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"agent_ref\":{\"name\":\"b\"}}\n",
    );
    let r = d.write("rollouts.jsonl", "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1}\n");
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let o = run(&[
        "profile",
        "--inputs",
        i.to_str().unwrap(),
        "--rollouts",
        r.to_str().unwrap(),
        "--allow-partial",
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tasks = read_jsonl(&out.join("rollouts_reward_profiling.jsonl"));
    assert_eq!(tasks.len(), 1);
    let t = &tasks[0];
    assert_eq!(t.get("agent_ref").and_then(|a| a.get("name")), Some(&Json::Str("a".into())), "{t:?}");
    assert_eq!(t.get("expected_num_rollouts"), Some(&Json::Int(1)));
    assert_eq!(t.get("missing_num_rollouts"), Some(&Json::Int(0)));
    assert_eq!(t.get("reward_profile_completion_pct"), Some(&Json::Float(100.0)));

    let lines = [
        r#"{"response": {"usage": {"tok": "n/a", "extra": null}}, "reward": 0, "tok": 5, "extra": 1, "_ng_task_index": 0, "_ng_rollout_index": 0, "agent_ref": {"name": "a1"}}"#,
        r#"{"response": {"usage": {"tok": [1], "extra": null}}, "reward": 1, "tok": 5, "extra": 1, "_ng_task_index": 0, "_ng_rollout_index": 1, "agent_ref": {"name": "a1"}}"#,
        r#"{"response": {"usage": {"tok": {"n": 1}}}, "reward": 0, "tok": 6, "_ng_task_index": 1, "_ng_rollout_index": 0, "agent_ref": {"name": "a1"}}"#,
    ];
    let r = d.write("usage.jsonl", &(lines.join("\n") + "\n"));
    let agg = d.join("agg.json");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", agg.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&agg).unwrap();
    assert!(!text.contains("/tok\"") && !text.contains("/extra\""), "{text}");
    let Json::Arr(entries) = read_json(&agg) else { panic!() };
    let am = entries[0].get("agent_metrics").unwrap();
    assert_eq!(am.get("max/reward"), Some(&Json::Int(1)), "{am:?}");
    assert_eq!(am.get("min/reward"), Some(&Json::Int(0)), "{am:?}");
}

/// Numeric subsets of pass@k are Python dict keys, as in NeMo Gym 0.7.0: `1` and `1.0`
/// are one subset, named `1` (the first seen), and a float is named as Python's `str()`
/// writes it (`1e-05`).
#[test]
fn numeric_subsets_group_and_name_as_python_does() {
    let d = TempDir::new("subsets");
    // `agent_metrics` of pass@k per `subset` on one-rollout tasks of agent `a` with these
    // (reward, subset) pairs.
    let metrics = |name: &str, rows: &[(i32, &str)]| -> Json {
        let lines: Vec<String> = rows
            .iter()
            .enumerate()
            .map(|(t, (reward, subset))| {
                format!(r#"{{"reward": {reward}, "subset": {subset}, "_ng_task_index": {t}, "_ng_rollout_index": 0, "agent_ref": {{"name": "a"}}}}"#)
            })
            .collect();
        let r = d.write(name, &(lines.join("\n") + "\n"));
        let agg = d.join("agg.json");
        let o = run(&[
            "aggregate",
            "--rollouts",
            r.to_str().unwrap(),
            "--metric",
            "pass_at_k",
            "--subset-key",
            "subset",
            "--out",
            agg.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let Json::Arr(entries) = read_json(&agg) else { panic!() };
        entries[0].get("agent_metrics").unwrap().clone()
    };
    let am = metrics("rollouts.jsonl", &[(1, "1"), (0, "1.0"), (1, "1e-05"), (1, "\"1\"")]);
    let Json::Obj(members) = &am else { panic!() };
    let subset_keys: Vec<&str> = members
        .iter()
        .map(|(k, _)| &**k)
        .filter(|k| k.ends_with("/pass@1/accuracy") && !k.starts_with("pass@"))
        .collect();
    // The text "1" is another key with the same name; the later one's values win, in the
    // first one's place (a dict update).
    assert_eq!(subset_keys, ["1/pass@1/accuracy", "1e-05/pass@1/accuracy"], "{am:?}");
    assert_eq!(am.get("1e-05/pass@1/accuracy").and_then(Json::as_f64), Some(100.0));
    assert_eq!(am.get("1/pass@1/accuracy").and_then(Json::as_f64), Some(100.0));
    // Integers a double cannot tell apart are still two subsets.
    let am = metrics("big.jsonl", &[(1, "9007199254740993"), (0, "9007199254740992")]);
    assert_eq!(am.get("9007199254740993/pass@1/accuracy").and_then(Json::as_f64), Some(100.0), "{am:?}");
    assert_eq!(am.get("9007199254740992/pass@1/accuracy").and_then(Json::as_f64), Some(0.0), "{am:?}");
}

/// A task's `sample` row nested as deep as NeMo Gym's reader reads (1,024 levels) is
/// written back whole, by every thread.
#[test]
fn deeply_nested_sample_rows_are_written_back() {
    let d = TempDir::new("deep-sample");
    let n = 1020;
    let deep = format!("{}{}", "[".repeat(n), "]".repeat(n));
    let i = d.write(
        "inputs.jsonl",
        &format!("{{\"p\":{{\"input\":{deep}}},\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{{\"name\":\"a\"}}}}\n"),
    );
    let r = d.write("rollouts.jsonl", "{\"reward\":1,\"_ng_task_index\":0,\"_ng_rollout_index\":0}\n");
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let o = run(&[
        "profile",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(out.join("rollouts_reward_profiling.jsonl")).unwrap();
    assert!(
        text.contains(&format!("\"sample\":{{\"p\":{{\"input\":{deep}}},\"agent_ref\":{{\"name\":\"a\"}}}}")),
        "{}",
        &text[..200]
    );
}

/// `profile`'s closing count covers every warning it printed, custom metrics' included.
#[test]
fn profile_counts_every_warning_it_prints() {
    let d = TempDir::new("prof-count");
    let (r, i) = sweep(&d);
    let out = d.join("out");
    let o = run(&[
        "profile",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--metric",
        "pass_at_k",
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("pass_at_k: "), "the sweep should make pass_at_k warn: {err}");
    let printed: usize = err
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .map(|l| {
            l.rsplit_once(" (").and_then(|(_, t)| t.strip_suffix(" times)")).and_then(|n| n.parse().ok()).unwrap_or(1)
        })
        .sum();
    assert!(stdout(&o).contains(&format!("Warnings: {printed} (on stderr)")), "{printed} printed; {}", stdout(&o));
}
