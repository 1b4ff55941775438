//! Custom metrics on `aggregate` and `profile`: built-ins and SQL metrics against direct formulas.

use rollstat::json::Json;

use super::*;
use crate::common::*;

#[test]
fn reward_variance_builtin_and_sql_equal_a_direct_formula() {
    let d = TempDir::new("rv");
    let (r, i) = sweep(&d);
    let agg = aggregate_sweep(
        &d,
        &r,
        &i,
        &[
            "--metric",
            "reward_variance",
            "--metric",
            "reward_variance_sql",
            "--metric",
            "frac_reward_zero_std",
            "--metric",
            "pass_at_1",
        ],
    );
    let Json::Arr(entries) = agg else { panic!() };
    // Independent reading of rewards per (agent, task).
    let text = std::fs::read_to_string(&r).unwrap();
    let mut by: std::collections::BTreeMap<(String, i64), Vec<f64>> = Default::default();
    let inputs_text = std::fs::read_to_string(&i).unwrap();
    let mut agent_of: std::collections::HashMap<(i64, i64), String> = Default::default();
    for l in inputs_text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        agent_of.insert(
            (v["_ng_task_index"].as_i64().unwrap(), v["_ng_rollout_index"].as_i64().unwrap()),
            v["agent_ref"]["name"].as_str().unwrap().to_string(),
        );
    }
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v.get("mask_sample").and_then(|m| m.as_bool()) == Some(true) {
            continue;
        }
        let key = (v["_ng_task_index"].as_i64().unwrap(), v["_ng_rollout_index"].as_i64().unwrap());
        let reward = match &v["reward"] {
            serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
            x => x.as_f64(),
        };
        let e = by.entry((agent_of[&key].clone(), key.0)).or_default();
        if let Some(x) = reward {
            e.push(x);
        }
    }
    for e in &entries {
        let Some(Json::Str(name)) = e.get("agent_ref").and_then(|a| a.get("name")).cloned() else { panic!() };
        let groups: Vec<Vec<f64>> = by.iter().filter(|((a, _), _)| *a == name).map(|(_, v)| v.clone()).collect();
        let want = direct_reward_variance(&groups, 0);
        let am = e.get("agent_metrics").unwrap();
        let builtin = am.get("reward_variance").and_then(|v| v.as_f64()).unwrap();
        let sql = am.get("reward_variance_sql/value").and_then(|v| v.as_f64()).unwrap();
        assert!(close(builtin, want) || (builtin - want).abs() < 1e-15, "{name}: builtin {builtin} vs {want}");
        assert!(
            (sql - want).abs() <= 1e-12 * want.abs().max(1e-300) || (sql - want).abs() < 1e-15,
            "{name}: sql {sql} vs {want}"
        );
        let zero_std = groups.iter().filter(|g| !g.is_empty()).filter(|g| g.iter().all(|x| *x == g[0])).count() as f64
            / groups.iter().filter(|g| !g.is_empty()).count() as f64;
        assert!(close(am.get("frac_reward_zero_std/value").and_then(|v| v.as_f64()).unwrap(), zero_std));
        assert!(am.get("pass_at_1/value").is_some());
    }
}

/// Differential findings against NeMo Gym 0.7.0 on inputs outside the corpus.
mod reference_rules {
    use super::*;

    const INPUTS: &str = "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"agent_ref\":{\"name\":\"a\"}}\n";

    fn profile(rollouts: &str) -> (TempDir, Vec<Json>, Json) {
        let d = TempDir::new("rules");
        let i = d.write("inputs.jsonl", INPUTS);
        let r = d.write("rollouts.jsonl", rollouts);
        let o = run(&["profile", "--inputs", i.to_str().unwrap(), "--rollouts", r.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let tasks = read_jsonl(&d.join("rollouts_reward_profiling.jsonl"));
        let Json::Arr(mut agents) = read_json(&d.join("rollouts_agent_metrics.json")) else { panic!() };
        (d, tasks, agents.remove(0))
    }

    #[test]
    fn underscore_usage_keys_are_not_statistics() {
        let (_d, tasks, agent) = profile(
            "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1,\"response\":{\"usage\":{\"_hidden\":1,\"output_tokens\":3}}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"reward\":0,\"response\":{\"usage\":{\"_hidden\":2,\"output_tokens\":5}}}\n",
        );
        assert!(agent.get("mean/_hidden").is_none() && tasks[0].get("max/_hidden").is_none());
        assert_eq!(agent.get("mean/output_tokens"), Some(&Json::Float(4.0)));
        // rollout_infos keeps every numeric usage key, as NeMo Gym does.
        let Some(Json::Arr(infos)) = tasks[0].get("rollout_infos") else { panic!() };
        assert_eq!(infos[0].get("_hidden"), Some(&Json::Int(1)));
    }

    #[test]
    fn integers_beyond_2_pow_53_stay_exact() {
        let (_d, tasks, agent) = profile(
            "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1,\"ts_ns\":9007199254740993}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"reward\":0,\"ts_ns\":9007199254740995}\n",
        );
        assert_eq!(agent.get("max/ts_ns"), Some(&Json::Int(9007199254740995)));
        assert_eq!(tasks[0].get("min/ts_ns"), Some(&Json::Int(9007199254740993)));
        let Some(Json::Arr(infos)) = tasks[0].get("rollout_infos") else { panic!() };
        assert_eq!(infos[1].get("ts_ns"), Some(&Json::Int(9007199254740995)));
    }

    #[test]
    fn a_usage_reward_overrides_the_record_reward_in_place() {
        let (_d, tasks, _) = profile(
            "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1,\"response\":{\"usage\":{\"reward\":0.5}}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"reward\":0,\"response\":{\"usage\":{\"reward\":0.5}}}\n",
        );
        let Some(Json::Arr(infos)) = tasks[0].get("rollout_infos") else { panic!() };
        let Json::Obj(members) = &infos[0] else { panic!() };
        assert_eq!(&*members[3].0, "reward");
        assert_eq!(members[3].1, Json::Float(0.5));
    }

    #[test]
    fn pass_at_k_leaves_out_rollouts_without_a_numeric_reward_with_a_warning() {
        let d = TempDir::new("passk-null");
        let r = d.write(
            "rollouts.jsonl",
            "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1,\"agent_ref\":{\"name\":\"a\"}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"reward\":null,\"agent_ref\":{\"name\":\"a\"}}\n",
        );
        let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--metric", "pass_at_k", "-q"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stderr(&o).contains("no numeric reward"), "{}", stderr(&o));
        let Json::Arr(e) = read_json(&d.join("rollouts_aggregate_metrics.json")) else { panic!() };
        assert_eq!(e[0].get("agent_metrics").unwrap().get("pass@1/accuracy"), Some(&Json::Float(100.0)));
    }
}

#[test]
fn a_users_sql_metric_folder_adds_metrics_by_file_name() {
    let d = TempDir::new("metric-dir");
    let (r, i) = sweep(&d);
    let dir = d.join("my_metrics");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("rollouts_per_agent.sql"),
        "-- rollouts_per_agent: how many measured rollouts each agent has.\nSELECT agent, COUNT(*) AS n FROM rollouts WHERE NOT mask_sample GROUP BY agent\n",
    )
    .unwrap();
    let agg = aggregate_sweep(
        &d,
        &r,
        &i,
        &[
            "--metric-dir",
            dir.to_str().unwrap(),
            "--metric",
            "rollouts_per_agent",
            "--key-metric",
            "rollouts_per_agent/*",
        ],
    );
    let Json::Arr(entries) = agg else { panic!() };
    for e in &entries {
        let am = e.get("agent_metrics").unwrap();
        let Some(Json::Obj(cov)) = e.get("key_metrics").cloned() else { panic!() };
        let measured = match am.get("coverage/measured_rollouts") {
            Some(Json::Int(n)) => *n,
            _ => match e.get("group_level_metrics") {
                Some(Json::Arr(tasks)) => tasks
                    .iter()
                    .map(|t| match t.get("num_rollouts") {
                        Some(Json::Int(n)) => *n,
                        _ => 0,
                    })
                    .sum(),
                _ => 0,
            },
        };
        assert_eq!(am.get("rollouts_per_agent/n"), Some(&Json::Int(measured)));
        assert!(cov.iter().any(|(k, _)| &**k == "rollouts_per_agent/n"), "key metric selected by glob");
    }
    // A metric that is not one number per agent is refused, naming what is wrong.
    for (file, sql, says) in [
        (
            "per_task.sql",
            "SELECT agent, AVG(reward) AS m FROM rollouts GROUP BY agent, _ng_task_index",
            "more than one row",
        ),
        ("text.sql", "SELECT agent, MAX(agent) AS who FROM rollouts GROUP BY agent", "column `who` is"),
    ] {
        std::fs::write(dir.join(file), sql).unwrap();
        let name = file.trim_end_matches(".sql");
        let out = d.join("bad.json");
        let args = ["aggregate", "--rollouts", r.to_str().unwrap(), "--inputs", i.to_str().unwrap()];
        let o = run(&[
            &args[..],
            &["--metric-dir", dir.to_str().unwrap(), "--metric", name, "--out", out.to_str().unwrap()],
        ]
        .concat());
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(&format!("metric {name}: ")) && stderr(&o).contains(says), "{}", stderr(&o));
        assert!(!out.exists());
    }
    // An unknown metric name is a usage error that lists what exists.
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--metric", "nope", "-q"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("pass_at_k") && stderr(&o).contains("frac_reward_zero_std"), "{}", stderr(&o));
}
