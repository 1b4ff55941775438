//! `rollstat ingest`: the typed rollouts table, checked against an independent serde_json reading.

use std::path::Path;

use polars::prelude::*;

use super::*;
use crate::common::*;

/// An independent reading of one rollout line: numeric fields with the usage overlay.
fn overlay(v: &serde_json::Value) -> Vec<(String, Option<f64>)> {
    let mut out: Vec<(String, Option<f64>)> = Vec::new();
    let num = |x: &serde_json::Value| -> Option<f64> {
        match x {
            serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
            serde_json::Value::Number(n) => n.as_f64(),
            _ => None,
        }
    };
    let obj = v.as_object().unwrap();
    let usage = obj.get("response").and_then(|r| r.get("usage")).and_then(|u| u.as_object());
    for (k, x) in obj {
        if k.starts_with('_') || k == "mask_sample" {
            continue;
        }
        let x = usage.and_then(|u| u.get(k)).unwrap_or(x);
        out.push((k.clone(), num(x)));
    }
    if let Some(u) = usage {
        for (k, x) in u {
            if !obj.contains_key(k) {
                out.push((k.clone(), num(x)));
            }
        }
    }
    out
}

/// Checks a written Parquet table against a serde_json reading of the JSONL file.
fn check_parquet_against_serde(jsonl: &Path, pq: &Path) {
    let df = read_pq(pq);
    let text = std::fs::read_to_string(jsonl).unwrap();
    let mut rows: Vec<serde_json::Value> =
        text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    // The table is sorted by (task, rollout); the sort is stable, so equal keys keep file order.
    rows.sort_by_key(|v| (v["_ng_task_index"].as_i64(), v["_ng_rollout_index"].as_i64()));
    assert_eq!(df.height(), rows.len(), "{}", jsonl.display());
    let task = df.column("_ng_task_index").unwrap().i64().unwrap().clone();
    let rollout = df.column("_ng_rollout_index").unwrap().i64().unwrap().clone();
    for (i, v) in rows.iter().enumerate() {
        assert_eq!(task.get(i), v["_ng_task_index"].as_i64());
        assert_eq!(rollout.get(i), v["_ng_rollout_index"].as_i64());
        for (k, want) in overlay(v) {
            let Ok(col) = df.column(&k) else {
                assert!(want.is_none() || k == "mask_sample", "{}: numeric field {k} has no column", jsonl.display());
                continue;
            };
            if !(col.dtype().is_integer() || col.dtype().is_float()) {
                continue;
            }
            let got = col.cast(&DataType::Float64).unwrap().f64().unwrap().get(i);
            match (got, want) {
                (Some(g), Some(w)) => assert!(close(g, w) || (g.is_nan() && w.is_nan()), "{k} row {i}: {g} != {w}"),
                (None, None) => {}
                (g, w) => panic!("{}: {k} row {i}: {g:?} != {w:?}", jsonl.display()),
            }
        }
    }
}

#[test]
fn ingest_writes_typed_parquet_equal_to_an_independent_reading() {
    let d = TempDir::new("ingest");
    generate(
        d.path(),
        &[
            "--tasks",
            "40",
            "--repeats",
            "3",
            "--agents",
            "2",
            "--seed",
            "9",
            "--masked-frac",
            "0.1",
            "--missing-frac",
            "0.05",
            "--ng-perf-frac",
            "0.5",
        ],
    );
    let pq = d.join("r.parquet");
    let o = run(&[
        "ingest",
        d.join("rollouts.jsonl").to_str().unwrap(),
        "--inputs",
        d.join("materialized_inputs.jsonl").to_str().unwrap(),
        "--out",
        pq.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let df = read_pq(&pq);
    assert_eq!(df.column("_ng_task_index").unwrap().dtype(), &DataType::Int64);
    assert_eq!(df.column("mask_sample").unwrap().dtype(), &DataType::Boolean);
    assert_eq!(df.column("agent").unwrap().dtype(), &DataType::String);
    assert_eq!(df.column("extracted_answer").unwrap().dtype(), &DataType::String);
    assert!(df.column("extracted_answer").unwrap().null_count() > 0, "null answers stay null");
    assert_eq!(df.column("output_tokens").unwrap().dtype(), &DataType::Int64);
    assert!(df.column("mask_sample").unwrap().bool().unwrap().sum().unwrap() > 0);
    check_parquet_against_serde(&d.join("rollouts.jsonl"), &pq);
}

/// Whether an independent reading would refuse the file (a line that is not JSON, or
/// without integer task/rollout indexes).
fn refused_by_serde(p: &Path) -> bool {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    if text.trim().is_empty() {
        return true;
    }
    text.lines().filter(|l| !l.trim().is_empty()).any(|l| match serde_json::from_str::<serde_json::Value>(l) {
        Ok(v) => !(v.is_object() && v["_ng_task_index"].is_i64() && v["_ng_rollout_index"].is_i64()),
        Err(_) => !(l.contains("NaN") || l.contains("Infinity")),
    })
}

#[test]
fn ingest_every_corpus_rollouts_file() {
    let mut cases = Vec::new();
    for group in std::fs::read_dir(fixtures().join("conformance")).unwrap() {
        let group = group.unwrap().path();
        if group.is_dir() {
            cases.extend(std::fs::read_dir(&group).unwrap().map(|c| c.unwrap().path()));
        }
    }
    cases.extend(example_cases("nemo_gym_examples", "rollouts.jsonl", |_| true));
    let mut n = 0;
    for case in cases {
        let r = case.join("rollouts.jsonl");
        if !r.exists() {
            continue;
        }
        n += 1;
        let d = TempDir::new("corpus");
        let pq = d.join("out.parquet");
        let o = run(&["ingest", r.to_str().unwrap(), "--out", pq.to_str().unwrap()]);
        let text = std::fs::read_to_string(&r).unwrap_or_default();
        let has_nan = text.contains("NaN") || text.contains("Infinity");
        if refused_by_serde(&r) {
            assert_eq!(o.status.code(), Some(2), "{} should be refused: {}", r.display(), stderr(&o));
            assert!(stderr(&o).contains("rollouts.jsonl"), "{}", stderr(&o));
            assert!(d.files().is_empty(), "refused but wrote {:?}", d.files());
        } else {
            assert!(o.status.success(), "{}: {}", r.display(), stderr(&o));
            if !has_nan {
                check_parquet_against_serde(&r, &pq);
            }
        }
    }
    assert!(n >= 22, "{n} rollouts files in the corpus");
}

/// A rollout field named like a column of the rollouts table is left out of it, with a
/// warning naming it; the table's own column keeps its meaning.
#[test]
fn fields_named_like_the_tables_own_columns_are_named_in_a_warning() {
    let d = TempDir::new("clash");
    let r = d.write(
        "rollouts.jsonl",
        "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1,\"run_key\":5,\"agent_ref\":{\"name\":\"a\"}}\n",
    );
    let o =
        run(&["query", "SELECT run_key, reward FROM rollouts", "--rollouts", r.to_str().unwrap(), "--format", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "run_key,reward\na,1\n");
    assert!(
        stderr(&o).contains("field `run_key` has the name of one of the rollouts table's own columns"),
        "{}",
        stderr(&o)
    );
}
