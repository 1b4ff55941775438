//! Unit tests for the sweep generator (serde_json is used here only, to check
//! what was written).

use super::*;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rollstat-generate-test-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

struct Sweep {
    summary: GenerateSummary,
    inputs: Vec<Value>,
    rollouts: Vec<Value>,
    raw_inputs: Vec<u8>,
    raw_rollouts: Vec<u8>,
}

fn parse_lines(raw: &[u8], what: &str) -> Vec<Value> {
    let text = std::str::from_utf8(raw).expect("output is UTF-8");
    if !text.is_empty() {
        assert!(text.ends_with('\n'), "{what}: last line not terminated");
    }
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{what} line {}: {e}: {l}", i + 1));
            assert!(v.is_object(), "{what} line {} is not an object", i + 1);
            v
        })
        .collect()
}

fn run(opts: &GenerateOptions, name: &str) -> Sweep {
    let dir = Scratch::new(name);
    let summary = generate(opts, &dir.0).expect("generate");
    let raw_inputs = fs::read(&summary.inputs_path).unwrap();
    let raw_rollouts = fs::read(&summary.rollouts_path).unwrap();
    // Only the two outputs are left in the directory (no temporary files).
    let mut names: Vec<String> =
        fs::read_dir(&dir.0).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["materialized_inputs.jsonl", "rollouts.jsonl"]);
    let inputs = parse_lines(&raw_inputs, "inputs");
    let rollouts = parse_lines(&raw_rollouts, "rollouts");
    assert_eq!(summary.expected, inputs.len());
    assert_eq!(summary.rollouts, rollouts.len());
    assert_eq!(summary.bytes_inputs, raw_inputs.len() as u64);
    assert_eq!(summary.bytes_rollouts, raw_rollouts.len() as u64);
    Sweep { summary, inputs, rollouts, raw_inputs, raw_rollouts }
}

fn key(v: &Value) -> (u64, u64) {
    (v["_ng_task_index"].as_u64().expect("_ng_task_index"), v["_ng_rollout_index"].as_u64().expect("_ng_rollout_index"))
}

fn rich() -> GenerateOptions {
    GenerateOptions {
        tasks: 60,
        repeats: 3,
        agents: 6,
        seed: 7,
        task_seed: None,
        missing_frac: 0.05,
        failure_frac: 0.0,
        masked_frac: 0.05,
        reward: RewardKind::Mixed,
        fan_out: true,
        env_server_stamp: true,
        ng_perf_frac: 0.5,
        text_bytes: 150,
        threads: 2,
    }
}

#[test]
fn defaults_match_the_documented_values() {
    let d = GenerateOptions::default();
    assert_eq!((d.tasks, d.repeats, d.agents, d.seed), (100, 4, 2, 1));
    assert_eq!((d.missing_frac, d.masked_frac, d.ng_perf_frac), (0.0, 0.0, 0.0));
    assert_eq!(d.reward, RewardKind::Mixed);
    assert!(!d.fan_out && !d.env_server_stamp);
    assert_eq!((d.text_bytes, d.threads), (1000, 0));
}

#[test]
fn same_bytes_for_any_thread_count() {
    // 2500 * 3 * 3 = 22500 input rows: more than one batch of chunks.
    let base = GenerateOptions { tasks: 2500, repeats: 3, agents: 3, text_bytes: 60, ..rich() };
    // Bytes only: parsing is checked by the other tests (keeps debug runs quick).
    let bytes = |opts: GenerateOptions| {
        let dir = Scratch::new("threads");
        let sum = generate(&opts, &dir.0).unwrap();
        assert_eq!(sum.expected, 22_500);
        (fs::read(&sum.inputs_path).unwrap(), fs::read(&sum.rollouts_path).unwrap())
    };
    let reference = bytes(GenerateOptions { threads: 1, ..base.clone() });
    for threads in [2, 3, 0] {
        let got = bytes(GenerateOptions { threads, ..base.clone() });
        assert!(reference == got, "output differs with {threads} threads");
    }
    // A different seed gives different bytes.
    let other = bytes(GenerateOptions { seed: 8, ..base });
    assert!(reference.1 != other.1);
}

#[test]
fn input_rows_have_the_materialized_shape() {
    let s = run(&rich(), "inputs-shape");
    let expected_keys = [
        "responses_create_params",
        "question_id",
        "expected_answer",
        "subset",
        "difficulty",
        "agent_ref",
        "_ng_task_index",
        "_ng_rollout_index",
        "_ng_environment_server",
    ];
    let text = std::str::from_utf8(&s.raw_inputs).unwrap();
    for (line, v) in text.lines().zip(&s.inputs) {
        // Key order as written (serde_json's map is sorted, so check the text).
        let mut at = 0;
        for k in expected_keys {
            let needle = format!("\"{k}\":");
            let pos = line[at..].find(&needle).map(|p| p + at);
            let pos = pos.unwrap_or_else(|| panic!("{k} missing or out of order in {line}"));
            at = pos + needle.len();
        }
        assert_eq!(v.as_object().unwrap().len(), expected_keys.len());
        let params = &v["responses_create_params"];
        let input = params["input"].as_array().unwrap();
        assert_eq!(input.len(), 2);
        assert_eq!(input[0]["role"], "system");
        assert_eq!(input[1]["role"], "user");
        assert!(input[1]["content"].is_string());
        assert!(params["max_output_tokens"].is_u64());
        assert!(params["temperature"].is_f64());
        assert!(["easy", "medium", "hard"].contains(&v["subset"].as_str().unwrap()));
        let d = v["difficulty"].as_u64().unwrap();
        assert!((1..=5).contains(&d));
        assert_eq!(v["agent_ref"]["type"], "responses_api_agents");
        assert!(v["agent_ref"]["name"].is_string());
        assert!(v["_ng_environment_server"].is_string());
    }
    // Inputs are written in (task, agent, repeat) order.
    let keys: Vec<(u64, u64)> = s.inputs.iter().map(key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
}

#[test]
fn rollout_rows_have_the_nemo_gym_shape() {
    let s = run(&rich(), "rollout-shape");
    assert!(!s.rollouts.is_empty());
    let text = std::str::from_utf8(&s.raw_rollouts).unwrap();
    let mut saw_reasoning = false;
    let mut saw_plain_usage = false;
    let mut saw_details = false;
    let mut saw_unicode = false;
    for (line, v) in text.lines().zip(&s.rollouts) {
        assert!(line.starts_with("{\"responses_create_params\":{"));
        assert!(line.contains("},\"response\":{\"id\":\"resp_"));
        // Identity keys come last, in NeMo Gym's order.
        let tail = line.rfind(",\"_ng_task_index\":").unwrap();
        let tail = &line[tail..];
        let ri = tail.find(",\"_ng_rollout_index\":").unwrap();
        let ar = tail.find(",\"agent_ref\":").unwrap();
        let srv = tail.find(",\"_ng_environment_server\":").unwrap();
        assert!(ri < ar && ar < srv);
        let obj = v.as_object().unwrap();
        let names: Vec<&String> = obj.keys().collect();
        assert!(names.iter().all(|k| !k.is_empty()));
        let resp = &v["response"];
        assert_eq!(resp["object"], "response");
        assert!(resp["error"].is_null());
        assert!(resp["created_at"].is_f64());
        let output = resp["output"].as_array().unwrap();
        let msg = output.last().unwrap();
        assert_eq!(msg["type"], "message");
        assert_eq!(msg["content"][0]["type"], "output_text");
        assert!(msg["content"][0]["text"].is_string());
        if output.len() == 2 {
            saw_reasoning = true;
            assert_eq!(output[0]["type"], "reasoning");
            assert_eq!(output[0]["summary"][0]["type"], "summary_text");
        }
        let usage = &resp["usage"];
        let (i, o, t) = (
            usage["input_tokens"].as_u64().unwrap(),
            usage["output_tokens"].as_u64().unwrap(),
            usage["total_tokens"].as_u64().unwrap(),
        );
        assert_eq!(i + o, t);
        if usage.get("input_tokens_details").is_some() {
            saw_details = true;
        } else {
            saw_plain_usage = true;
        }
        let status = resp["status"].as_str().unwrap();
        assert_eq!(resp["incomplete_details"].is_null(), status == "completed");
        for k in ["question_id", "expected_answer", "subset", "extracted_answer"] {
            assert!(obj.contains_key(k), "{k} missing in {line}");
        }
        assert!(v["terminated"].is_boolean());
        assert!(v["failure_kind"].is_null() || v["failure_kind"].is_string());
        if let Some(score) = v.get("verifier_score") {
            let x = score.as_f64().unwrap();
            assert!((0.0..=1.0).contains(&x));
        }
        if let Some(p) = v.get("ng_perf") {
            assert!(p["num_turns"].is_u64());
            assert!(p["num_tool_calls"].is_u64());
            assert!(p["token_observability_coverage"].is_f64());
            assert!(p["total_latency_ms"].as_f64().unwrap() > 0.0);
        }
        saw_unicode |= !line.is_ascii();
    }
    assert!(saw_reasoning && saw_plain_usage && saw_details && saw_unicode);
    // Several field shapes appear: info objects, lists, private fields.
    let any = |k: &str| s.rollouts.iter().any(|v| v.get(k).is_some());
    for k in [
        "info",
        "judge_evaluations",
        "instruction_results",
        "num_steps",
        "truncated",
        "verdict",
        "_ng_attempt_index",
        "ng_perf",
    ] {
        assert!(any(k), "no rollout has {k}");
    }
    // Some rows lack mask_sample, some lack verifier_score.
    assert!(s.rollouts.iter().any(|v| v.get("mask_sample").is_none()));
    assert!(s.rollouts.iter().any(|v| v.get("verifier_score").is_none()));
}

#[test]
fn counts_keys_and_alignment() {
    for fan_out in [false, true] {
        let opts =
            GenerateOptions { tasks: 37, repeats: 4, agents: 3, fan_out, missing_frac: 0.1, text_bytes: 40, ..rich() };
        let s = run(&opts, "counts");
        let expected = if fan_out { 37 * 3 * 4 } else { 37 * 4 };
        assert_eq!(s.summary.expected, expected);
        assert_eq!(s.inputs.len(), expected);
        let input_keys: HashMap<(u64, u64), &Value> = s.inputs.iter().map(|v| (key(v), v)).collect();
        assert_eq!(input_keys.len(), expected, "duplicate input key");
        let mut seen = HashSet::new();
        for r in &s.rollouts {
            let k = key(r);
            assert!(seen.insert(k), "duplicate rollout key {k:?}");
            let inp = input_keys.get(&k).expect("rollout without input row");
            assert_eq!(r["agent_ref"], inp["agent_ref"]);
            assert_eq!(r["_ng_environment_server"], inp["_ng_environment_server"]);
            assert_eq!(r["question_id"], inp["question_id"]);
            assert_eq!(
                r["responses_create_params"]["input"][1]["content"],
                inp["responses_create_params"]["input"][1]["content"]
            );
        }
        let tasks: HashSet<u64> = s.inputs.iter().map(|v| key(v).0).collect();
        assert_eq!(tasks.len(), 37);
        // Per task: fan-out puts every agent on every task, otherwise one.
        let mut labels: HashMap<u64, HashSet<String>> = HashMap::new();
        for v in &s.inputs {
            labels.entry(key(v).0).or_default().insert(v["_ng_environment_server"].as_str().unwrap().to_string());
        }
        let want = if fan_out { 3 } else { 1 };
        assert!(labels.values().all(|l| l.len() == want));
        // Rollout indexes: fan-out a*repeats + r, otherwise r.
        let max_ri = s.inputs.iter().map(|v| key(v).1).max().unwrap();
        assert_eq!(max_ri, if fan_out { 11 } else { 3 });
    }
}

#[test]
fn fractions_are_close_to_the_options() {
    let opts = GenerateOptions {
        tasks: 2000,
        repeats: 5,
        agents: 2,
        missing_frac: 0.1,
        failure_frac: 0.0,
        masked_frac: 0.07,
        ng_perf_frac: 0.3,
        text_bytes: 20,
        fan_out: false,
        env_server_stamp: false,
        ..rich()
    };
    let s = run(&opts, "fractions");
    let expected = s.summary.expected as f64;
    let missing = 1.0 - s.rollouts.len() as f64 / expected;
    assert!((missing - 0.1).abs() < 0.015, "missing {missing}");
    let n = s.rollouts.len() as f64;
    let masked = s.rollouts.iter().filter(|v| v.get("mask_sample") == Some(&Value::Bool(true))).count() as f64 / n;
    assert!((masked - 0.07).abs() < 0.015, "masked {masked}");
    let perf = s.rollouts.iter().filter(|v| v.get("ng_perf").is_some()).count() as f64 / n;
    assert!((perf - 0.3).abs() < 0.02, "ng_perf {perf}");
    // Masked rollouts say why.
    for v in &s.rollouts {
        if v.get("mask_sample") == Some(&Value::Bool(true)) {
            assert!(v["failure_kind"].is_string());
        }
    }
    // Shuffled like an asynchronous collection, not in key order.
    let keys: Vec<(u64, u64)> = s.rollouts.iter().map(key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert!(keys != sorted);

    // Extremes.
    let none = run(&GenerateOptions { missing_frac: 1.0, tasks: 10, ..opts.clone() }, "all-missing");
    assert_eq!(none.summary.rollouts, 0);
    assert_eq!(none.summary.expected, 50);
    let all = run(&GenerateOptions { masked_frac: 1.0, missing_frac: 0.0, tasks: 10, ..opts }, "all-masked");
    assert!(all.rollouts.iter().all(|v| v["mask_sample"] == Value::Bool(true)));
}

#[test]
fn reward_kinds() {
    let base = GenerateOptions { tasks: 400, repeats: 3, agents: 6, text_bytes: 10, ..rich() };
    let bin = run(&GenerateOptions { reward: RewardKind::Binary, ..base.clone() }, "binary");
    for v in &bin.rollouts {
        let r = &v["reward"];
        assert!(r.is_f64(), "binary reward {r}");
        let x = r.as_f64().unwrap();
        assert!(x == 0.0 || x == 1.0);
    }
    let cont = run(&GenerateOptions { reward: RewardKind::Continuous, ..base.clone() }, "cont");
    let mut fractional = 0;
    for v in &cont.rollouts {
        let x = v["reward"].as_f64().expect("continuous reward is a float");
        assert!(v["reward"].is_f64());
        assert!((0.0..=1.0).contains(&x));
        if x > 0.0 && x < 1.0 {
            fractional += 1;
        }
    }
    assert!(fractional > cont.rollouts.len() / 3);
    let mixed = run(&GenerateOptions { reward: RewardKind::Mixed, ..base }, "mixed");
    let mut kinds: HashMap<&str, usize> = HashMap::new();
    for v in &mixed.rollouts {
        let r = &v["reward"];
        let kind = if r.is_null() {
            "null"
        } else if r.is_boolean() {
            "bool"
        } else if r.is_u64() {
            "int"
        } else if r.as_f64() == Some(0.5) {
            "half"
        } else {
            "float"
        };
        *kinds.entry(kind).or_default() += 1;
    }
    for k in ["null", "bool", "int", "half", "float"] {
        assert!(kinds.get(k).copied().unwrap_or(0) > 0, "no {k} reward: {kinds:?}");
    }
}

#[test]
fn reward_tracks_task_difficulty_and_agent_skill() {
    let opts = GenerateOptions {
        tasks: 1500,
        repeats: 2,
        agents: 3,
        reward: RewardKind::Binary,
        fan_out: true,
        env_server_stamp: false,
        missing_frac: 0.0,
        failure_frac: 0.0,
        masked_frac: 0.0,
        text_bytes: 10,
        ..rich()
    };
    let s = run(&opts, "skill");
    let mut by_subset: HashMap<String, (f64, f64)> = HashMap::new();
    let mut by_agent: HashMap<String, (f64, f64)> = HashMap::new();
    for v in &s.rollouts {
        let x = v["reward"].as_f64().unwrap();
        let e = by_subset.entry(v["subset"].as_str().unwrap().to_string()).or_default();
        e.0 += x;
        e.1 += 1.0;
        let e = by_agent.entry(v["agent_ref"]["name"].as_str().unwrap().to_string()).or_default();
        e.0 += x;
        e.1 += 1.0;
    }
    let mean = |m: &HashMap<String, (f64, f64)>, k: &str| m[k].0 / m[k].1;
    assert!(mean(&by_subset, "easy") > mean(&by_subset, "medium") + 0.05);
    assert!(mean(&by_subset, "medium") > mean(&by_subset, "hard") + 0.05);
    let means: Vec<f64> = by_agent.keys().map(|k| mean(&by_agent, k)).collect();
    let spread = means.iter().cloned().fold(f64::MIN, f64::max) - means.iter().cloned().fold(f64::MAX, f64::min);
    assert!(spread > 0.03, "agents indistinguishable: {means:?}");
}

#[test]
fn free_text_is_about_text_bytes() {
    for text_bytes in [200usize, 2000] {
        let opts = GenerateOptions { tasks: 300, repeats: 2, agents: 2, text_bytes, ..rich() };
        let s = run(&opts, "text");
        let mut total = 0usize;
        for v in &s.rollouts {
            for item in v["response"]["output"].as_array().unwrap() {
                let t =
                    if item["type"] == "reasoning" { &item["summary"][0]["text"] } else { &item["content"][0]["text"] };
                // Bytes as written in the file (escaped, without quotes).
                total += serde_json::to_string(t).unwrap().len() - 2;
            }
        }
        let mean = total as f64 / s.rollouts.len() as f64;
        let ratio = mean / text_bytes as f64;
        assert!((0.9..1.15).contains(&ratio), "text_bytes {text_bytes}: mean {mean}");
    }
}

#[test]
fn two_servers_front_one_agent_when_stamped() {
    let opts = GenerateOptions { tasks: 20, repeats: 2, agents: 3, fan_out: true, env_server_stamp: true, ..rich() };
    let s = run(&opts, "servers");
    let mut servers: HashMap<String, HashSet<String>> = HashMap::new();
    for v in &s.inputs {
        servers
            .entry(v["agent_ref"]["name"].as_str().unwrap().to_string())
            .or_default()
            .insert(v["_ng_environment_server"].as_str().unwrap().to_string());
    }
    assert_eq!(servers.len(), 2, "{servers:?}");
    assert!(servers.values().any(|s| s.len() == 2), "{servers:?}");
    // Without the stamp, no server field and one name per agent.
    let plain = run(&GenerateOptions { env_server_stamp: false, ..opts }, "no-stamp");
    assert!(plain.inputs.iter().all(|v| v.get("_ng_environment_server").is_none()));
    assert!(plain.rollouts.iter().all(|v| v.get("_ng_environment_server").is_none()));
    let names: HashSet<&str> = plain.inputs.iter().map(|v| v["agent_ref"]["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 3);
}

#[test]
fn floats_are_written_in_shortest_round_trip_form() {
    let s = run(&rich(), "floats");
    let text = std::str::from_utf8(&s.raw_rollouts).unwrap();
    let mut checked = 0;
    for (line, v) in text.lines().zip(&s.rollouts) {
        for (field, value) in [
            ("\"verifier_score\":", v.get("verifier_score")),
            ("\"created_at\":", Some(&v["response"]["created_at"])),
            ("\"total_latency_ms\":", v.get("ng_perf").map(|p| &p["total_latency_ms"])),
        ] {
            let (Some(value), Some(pos)) = (value, line.find(field)) else {
                continue;
            };
            let rest = &line[pos + field.len()..];
            let token = &rest[..rest.find([',', '}']).unwrap()];
            let x = value.as_f64().unwrap();
            let mut buf = ryu::Buffer::new();
            assert_eq!(token, buf.format(x), "not shortest form");
            assert_eq!(token.parse::<f64>().unwrap(), x);
            checked += 1;
        }
    }
    assert!(checked > 100);
    assert!(!text.contains("NaN") && !text.contains("Infinity"));
}

#[test]
fn tasks_split_among_agents_without_fan_out() {
    let opts = GenerateOptions { tasks: 10, repeats: 2, agents: 4, fan_out: false, env_server_stamp: false, ..rich() };
    let s = run(&opts, "split");
    let mut per_agent: HashMap<String, HashSet<u64>> = HashMap::new();
    for v in &s.inputs {
        per_agent.entry(v["agent_ref"]["name"].as_str().unwrap().to_string()).or_default().insert(key(v).0);
    }
    assert_eq!(per_agent.len(), 4);
    let total: usize = per_agent.values().map(|t| t.len()).sum();
    assert_eq!(total, 10, "a task under two agents");
}

#[test]
fn invalid_options_are_rejected() {
    let dir = Scratch::new("invalid");
    let bad = [
        GenerateOptions { tasks: 0, ..Default::default() },
        GenerateOptions { repeats: 0, ..Default::default() },
        GenerateOptions { agents: 0, ..Default::default() },
        GenerateOptions { missing_frac: 1.5, ..Default::default() },
        GenerateOptions { masked_frac: -0.1, ..Default::default() },
        GenerateOptions { text_bytes: usize::MAX, ..Default::default() },
        GenerateOptions { ng_perf_frac: f64::NAN, ..Default::default() },
        GenerateOptions { tasks: usize::MAX, fan_out: true, agents: 4, ..Default::default() },
    ];
    for opts in bad {
        let err = generate(&opts, &dir.0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{opts:?}");
        assert!(err.to_string().starts_with("generate: "), "{err}");
    }
    assert!(!dir.0.exists(), "nothing is created for invalid options");
}

#[test]
fn regenerating_replaces_previous_files() {
    let dir = Scratch::new("replace");
    let small = GenerateOptions { tasks: 5, repeats: 2, text_bytes: 30, ..Default::default() };
    generate(&GenerateOptions { seed: 1, ..small.clone() }, &dir.0).unwrap();
    let second = generate(&GenerateOptions { seed: 2, ..small.clone() }, &dir.0).unwrap();
    let fresh = Scratch::new("replace-fresh");
    let expect = generate(&GenerateOptions { seed: 2, ..small }, &fresh.0).unwrap();
    assert_eq!(fs::read(second.rollouts_path).unwrap(), fs::read(expect.rollouts_path).unwrap());
    assert_eq!(fs::read_dir(&dir.0).unwrap().count(), 2);
}

#[test]
fn one_task_seed_asks_the_same_questions() {
    // Two seeds, one task seed: the same inputs (prompts, answers) under every index,
    // other outcomes. Without the task seed the questions differ too.
    let opts = |seed, task_seed| GenerateOptions { tasks: 40, repeats: 2, agents: 1, seed, task_seed, ..rich() };
    let inputs = |o: GenerateOptions| {
        let d = std::env::temp_dir().join(format!(
            "rollstat-task-seed-{}-{:?}-{}",
            o.seed,
            o.task_seed,
            std::process::id()
        ));
        let g = crate::generate::generate_sweep(&o, &d).unwrap();
        let i = std::fs::read(&g.inputs_path).unwrap();
        let r = std::fs::read(&g.rollouts_path).unwrap();
        let _ = std::fs::remove_dir_all(&d);
        (i, r)
    };
    let (i1, r1) = inputs(opts(1, Some(9)));
    let (i2, r2) = inputs(opts(2, Some(9)));
    assert_eq!(i1, i2);
    assert_ne!(r1, r2);
    let (i3, _) = inputs(opts(2, None));
    assert_ne!(i1, i3);
}
