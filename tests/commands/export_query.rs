//! `rollstat export` and `rollstat query`: the four tables and SQL over them, against the
//! DataFrame API.

use polars::prelude::*;
use rollstat::json::Json;

use super::*;
use crate::common::*;

#[test]
fn export_tables_have_documented_columns_and_query_matches_dataframe_api() {
    let d = TempDir::new("export");
    let (r, i) = sweep(&d);
    let out = d.join("tables");
    let o = run(&[
        "export",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rollouts = read_pq(&out.join("rollouts.parquet"));
    let tasks = read_pq(&out.join("tasks.parquet"));
    let agents = read_pq(&out.join("agents.parquet"));
    let repeats = read_pq(&out.join("repeats.parquet"));
    for c in ["_ng_task_index", "_ng_rollout_index", "run_key", "agent", "mask_sample", "reward"] {
        assert!(rollouts.column(c).is_ok(), "rollouts.{c}");
    }
    for c in ["agent", "_ng_task_index", "mean/reward", "num_rollouts"] {
        assert!(tasks.column(c).is_ok(), "tasks.{c}");
    }
    for c in ["agent", "mean/reward", "num_repeats"] {
        assert!(agents.column(c).is_ok(), "agents.{c}");
    }
    for c in ["agent", "_ng_rollout_index", "sample_count", "mean/reward", "ci_low_95/reward"] {
        assert!(repeats.column(c).is_ok(), "repeats.{c}");
    }
    assert_eq!(agents.height(), 3);
    // SQL against the DataFrame API.
    let sql = "SELECT agent, AVG(CAST(reward AS DOUBLE)) AS m, COUNT(*) AS n FROM rollouts WHERE NOT mask_sample AND reward IS NOT NULL GROUP BY agent ORDER BY agent";
    let o = run(&["query", sql, "--parquet-dir", out.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
    let want = rollouts
        .clone()
        .lazy()
        .filter(col("mask_sample").not().and(col("reward").is_not_null()))
        .group_by([col("agent")])
        .agg([col("reward").cast(DataType::Float64).mean().alias("m"), len().alias("n")])
        .sort(["agent"], Default::default())
        .collect()
        .unwrap();
    let Json::Arr(rows) = got else { panic!() };
    assert_eq!(rows.len(), want.height());
    let wa = want.column("agent").unwrap().str().unwrap().clone();
    let wm = want.column("m").unwrap().f64().unwrap().clone();
    let wn = want.column("n").unwrap().cast(&DataType::Int64).unwrap().i64().unwrap().clone();
    for (k, row) in rows.iter().enumerate() {
        assert_eq!(row.get("agent"), Some(&Json::Str(wa.get(k).unwrap().to_string())));
        assert!(close(row.get("m").unwrap().as_f64().unwrap(), wm.get(k).unwrap()));
        assert_eq!(row.get("n"), Some(&Json::Int(wn.get(k).unwrap())));
    }
    // The leaderboard's mean is the centre of its interval (the mean across repeats, not
    // the pooled mean, which differs here: masked rollouts leave repeats unequal).
    // A mistyped report name is named as such, with the known reports.
    let o = run(&["query", "leaderbord", "--parquet-dir", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("\"leaderbord\" is neither a bundled report (leaderboard, "), "{}", stderr(&o));
    let o = run(&["query", "leaderboard", "--parquet-dir", out.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let Json::Arr(board) = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap() else { panic!() };
    assert_eq!(board.len(), 3);
    let mut differs = false;
    for row in &board {
        let f = |k: &str| row.get(k).and_then(Json::as_f64).unwrap_or_else(|| panic!("{k} in {row:?}"));
        let (m, lo, hi, pooled) = (f("mean_reward"), f("ci_low"), f("ci_high"), f("pooled_mean_reward"));
        assert!(lo <= m && m <= hi && close((lo + hi) / 2.0, m), "{row:?}");
        differs |= !close(m, pooled);
    }
    assert!(differs, "the sweep should make the two means differ: {board:?}");
    // The bundled reports hold what the tables say. hardest_tasks: the 20 (agent, task)
    // rows of lowest mean reward, in that order, each row's values those of `tasks`.
    let report = |name: &str| -> Vec<Json> {
        let o = run(&["query", name, "--parquet-dir", out.to_str().unwrap(), "--format", "json"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let Json::Arr(rows) = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap() else { panic!("{name}") };
        rows
    };
    let hardest = report("hardest_tasks");
    assert_eq!(hardest.len(), 20);
    let mut task_means: Vec<f64> = tasks.column("mean/reward").unwrap().f64().unwrap().into_no_null_iter().collect();
    task_means.sort_by(f64::total_cmp);
    let agent_col = tasks.column("agent").unwrap().str().unwrap().clone();
    let task_col = tasks.column("_ng_task_index").unwrap().i64().unwrap().clone();
    let mean_col = tasks.column("mean/reward").unwrap().f64().unwrap().clone();
    let rollouts_col = tasks.column("num_rollouts").unwrap().cast(&DataType::Int64).unwrap();
    for (k, row) in hardest.iter().enumerate() {
        let agent = row.get("agent").and_then(Json::as_str).unwrap();
        let task = row.get("_ng_task_index").and_then(Json::as_f64).unwrap() as i64;
        let at = (0..tasks.height())
            .find(|&i| agent_col.get(i) == Some(agent) && task_col.get(i) == Some(task))
            .unwrap_or_else(|| panic!("{row:?} is no row of tasks"));
        assert_eq!(row.get("mean_reward").and_then(Json::as_f64), mean_col.get(at), "{row:?}");
        assert_eq!(row.get("mean_reward").and_then(Json::as_f64), Some(task_means[k]), "row {k} out of order");
        let n = rollouts_col.i64().unwrap().get(at).unwrap();
        assert_eq!(row.get("num_rollouts").and_then(Json::as_f64), Some(n as f64), "{row:?}");
    }
    // token_cost: per agent, the output tokens of its measured rollouts over its rollouts
    // with reward >= 1, counted here from the rollouts table.
    let cost = report("token_cost");
    let measured = rollouts.clone().lazy().filter(col("mask_sample").not()).collect().unwrap();
    let agents_seen: Vec<&str> = cost.iter().map(|r| r.get("agent").and_then(Json::as_str).unwrap()).collect();
    assert_eq!(agents_seen.len(), 3, "{cost:?}");
    for row in &cost {
        let agent = row.get("agent").and_then(Json::as_str).unwrap();
        let mine = measured.clone().lazy().filter(col("agent").eq(lit(agent))).collect().unwrap();
        let tokens: f64 =
            mine.column("output_tokens").unwrap().cast(&DataType::Float64).unwrap().f64().unwrap().sum().unwrap();
        let correct = mine
            .column("reward")
            .unwrap()
            .cast(&DataType::Float64)
            .unwrap()
            .f64()
            .unwrap()
            .iter()
            .filter(|r| r.is_some_and(|r| r >= 1.0))
            .count() as f64;
        assert_eq!(row.get("output_tokens").and_then(Json::as_f64), Some(tokens), "{row:?}");
        assert_eq!(row.get("correct").and_then(Json::as_f64), Some(correct), "{row:?}");
        assert!(close(row.get("tokens_per_correct").and_then(Json::as_f64).unwrap(), tokens / correct), "{row:?}");
    }
    // A table written to a file holds every row and column, text uncut.
    let txt = d.join("all.txt");
    let sql = "SELECT *, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' AS long_text FROM rollouts";
    let o = run(&["query", sql, "--parquet-dir", out.to_str().unwrap(), "--out", txt.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&txt).unwrap();
    let rows = read_pq(&out.join("rollouts.parquet")).height();
    assert!(rows > 50 && text.lines().count() >= rows + 5, "{} lines for {rows} rows", text.lines().count());
    assert!(text.contains(&"x".repeat(60)) && !text.contains('…'), "{}", &text[..2000.min(text.len())]);
    // Markdown escapes what would break a table row (`|`, backslashes) or start inline
    // markup, but not an underscore inside a word; null is an empty cell.
    let sql = "SELECT 'a|b' AS s_1, 'c\\d *e* _f_ <b>' AS t, 1.5 AS x, NULL AS n";
    let o = run(&["query", sql, "--parquet-dir", out.to_str().unwrap(), "--format", "markdown"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "| s_1 | t | x | n |\n|---|---|---:|---|\n| a\\|b | c\\\\d \\*e\\* \\_f\\_ \\<b\\> | 1.5 |  |\n"
    );
}

/// With one repeat (no across-repeat statistics) or no rows at all, the tables keep their
/// documented key columns, so Parquet readers and the bundled reports still work.
#[test]
fn tables_keep_their_columns_with_one_repeat_or_no_rows() {
    let d = TempDir::new("one-repeat");
    generate(d.path(), &["--tasks", "20", "--repeats", "1", "--agents", "2", "--seed", "3"]);
    let (r, i) = (d.join("rollouts.jsonl"), d.join("materialized_inputs.jsonl"));
    let t = d.join("t");
    let o = run(&[
        "export",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        t.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let repeats = read_pq(&t.join("repeats.parquet"));
    for c in ["agent", "_ng_rollout_index", "sample_count", "missing_count"] {
        assert!(repeats.column(c).is_ok(), "repeats.parquet lacks {c}: {:?}", repeats.get_column_names());
    }
    let o = run(&["query", "leaderboard", "--parquet-dir", t.to_str().unwrap(), "--format", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.lines().skip(1).all(|l| l.split(',').nth(1).is_some_and(|m| !m.is_empty())), "{out}");
    // Every rollout masked: no task rows, same columns.
    let m = d.write(
        "masked.jsonl",
        "{\"reward\":1,\"mask_sample\":true,\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n",
    );
    let t2 = d.join("t2");
    let o = run(&["export", "--rollouts", m.to_str().unwrap(), "--out-dir", t2.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tasks = read_pq(&t2.join("tasks.parquet"));
    assert_eq!(tasks.height(), 0);
    assert!(tasks.column("_ng_task_index").is_ok() && tasks.column("agent").is_ok());
    let o = run(&["query", "hardest_tasks", "--parquet-dir", t2.to_str().unwrap(), "--format", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// CSV writes infinities and NaN as the table shows them, and `export` passes on the
/// aggregate's warning about rollouts without an input row.
#[test]
fn csv_infinities_and_export_warnings() {
    let d = TempDir::new("csv-inf");
    let r = d.write(
        "rollouts.jsonl",
        "{\"reward\":0,\"output_tokens\":10,\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n{\"reward\":1,\"output_tokens\":5,\"_ng_task_index\":1,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n",
    );
    let o = run(&[
        "query",
        "SELECT agent, CAST(reward AS DOUBLE) / 0.0 AS x FROM rollouts ORDER BY _ng_task_index",
        "--rollouts",
        r.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "agent,x\na,NaN\na,inf\n");
    let i = d.write("inputs.jsonl", "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n");
    let t = d.join("t");
    let o = run(&[
        "export",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        t.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 rollout(s) of") && stderr(&o).contains("have no materialized input row"),
        "{}",
        stderr(&o)
    );
}

/// `measured_rollouts` holds the rollouts the statistics count: an SQL metric averaging
/// over it gives `aggregate`'s own mean (over `rollouts`, masked rows count too), and in
/// `query` it is the rollouts table without the masked rows.
#[test]
fn measured_rollouts_is_what_the_statistics_count() {
    let d = TempDir::new("measured");
    let (r, i) = sweep(&d);
    let metrics = d.join("metrics");
    std::fs::create_dir_all(&metrics).unwrap();
    std::fs::write(
        metrics.join("tok.sql"),
        "SELECT agent, AVG(output_tokens) AS measured FROM measured_rollouts GROUP BY agent",
    )
    .unwrap();
    std::fs::write(metrics.join("all.sql"), "SELECT agent, AVG(output_tokens) AS every FROM rollouts GROUP BY agent")
        .unwrap();
    let agg =
        aggregate_sweep(&d, &r, &i, &["--metric-dir", metrics.to_str().unwrap(), "--metric", "tok", "--metric", "all"]);
    let Json::Arr(entries) = agg else { panic!() };
    let mut differs = false;
    for e in &entries {
        let m = e.get("agent_metrics").unwrap();
        let f = |k: &str| m.get(k).and_then(Json::as_f64).unwrap_or_else(|| panic!("{k} in {m:?}"));
        assert!(close(f("tok/measured"), f("mean/output_tokens")), "{m:?}");
        differs |= !close(f("all/every"), f("mean/output_tokens"));
    }
    assert!(differs, "the sweep masks rollouts, so the two averages should differ somewhere");
    let count = |sql: &str| -> String {
        let o =
            run(&["query", sql, "--rollouts", r.to_str().unwrap(), "--inputs", i.to_str().unwrap(), "--format", "csv"]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(
        count("SELECT COUNT(*) AS n FROM measured_rollouts"),
        count("SELECT COUNT(*) AS n FROM rollouts WHERE NOT mask_sample")
    );
}
