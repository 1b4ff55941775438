//! `rollstat batch-metrics`: VAGEN / verl batches in JSONL and Parquet.

use polars::prelude::*;

use super::*;
use crate::common::*;

#[test]
fn batch_metrics_on_jsonl_and_parquet() {
    let d = TempDir::new("batch");
    let jsonl = d.write(
        "batch.jsonl",
        r#"{"group_idx": 0, "token_level_scores": [0.0, 0.5, 0.5]}
{"group_idx": 0, "token_level_scores": [0.0, 0.0, 0.0]}
{"group_idx": 1, "token_level_scores": [1.0]}
{"uid": "u7", "reward": 0.25}
{"uid": "u7", "reward": 0.75}
{"uid": "u7", "reward": 1.0}
"#,
    );
    let groups = vec![vec![1.0, 0.0], vec![1.0], vec![0.25, 0.75, 1.0]];
    for ddof in [0usize, 1] {
        let o = run(&[
            "batch-metrics",
            jsonl.to_str().unwrap(),
            "--metric",
            "reward_variance",
            "--ddof",
            &ddof.to_string(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
        let got = v.get("custom_metrics/train/reward_variance").and_then(|x| x.as_f64()).unwrap();
        let want = direct_reward_variance(&groups, ddof);
        assert!(close(got, want), "ddof {ddof}: {got} vs {want}");
    }
    // The SQL metric agrees on the same batch.
    let o = run(&["batch-metrics", jsonl.to_str().unwrap(), "--metric", "reward_variance_sql"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
    let sql = v.get("custom_metrics/train/reward_variance_sql/value").and_then(|x| x.as_f64()).unwrap();
    assert!(close(sql, direct_reward_variance(&groups, 0)), "{sql}");
    // The same batch as Parquet.
    let mut df = df!(
        "group_idx" => [0i64, 0, 1, 2, 2, 2],
        "reward" => [1.0f64, 0.0, 1.0, 0.25, 0.75, 1.0]
    )
    .unwrap();
    let pq = d.join("batch.parquet");
    ParquetWriter::new(std::fs::File::create(&pq).unwrap()).finish(&mut df).unwrap();
    let o = run(&["batch-metrics", pq.to_str().unwrap(), "--prefix", "p"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
    assert!(close(v.get("p/reward_variance").and_then(|x| x.as_f64()).unwrap(), direct_reward_variance(&groups, 0)));
    assert!(v.get("p/pass@1/accuracy").is_some());
    let o = run(&["batch-metrics", pq.to_str().unwrap(), "--metric", "reward_variance_sql", "--prefix", "p"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
    assert!(close(
        v.get("p/reward_variance_sql/value").and_then(|x| x.as_f64()).unwrap(),
        direct_reward_variance(&groups, 0)
    ));
    // An empty batch has no groups: 0.0.
    let empty = d.write("empty.jsonl", "\n");
    let o = run(&["batch-metrics", empty.to_str().unwrap(), "--metric", "reward_variance"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"custom_metrics/train/reward_variance\": 0.0"), "{}", stdout(&o));
}

/// `batch-metrics` groups as VAGEN does, by `str(uid)`: `1` and `"1"` are one group,
/// `1.0` another.
#[test]
fn batch_groups_follow_python_str() {
    let d = TempDir::new("batch-keys");
    let b = d.write(
        "batch.jsonl",
        "{\"uid\":1,\"reward\":0}\n{\"uid\":1.0,\"reward\":1}\n{\"uid\":\"1\",\"reward\":1}\n{\"uid\":\"1\",\"reward\":1}\n",
    );
    let o = run(&["batch-metrics", b.to_str().unwrap(), "--metric", "reward_variance"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // np.var([0, 1, 1]) = 2/9 and 0 for {1}; their mean, as numpy gives it.
    assert!(stdout(&o).contains("\"custom_metrics/train/reward_variance\": 0.11111111111111112"), "{}", stdout(&o));
}
