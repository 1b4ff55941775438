//! `rollstat batch-metrics`: custom metrics over a VAGEN / verl training batch — rows
//! with a group id (`group_idx`, falling back to `uid`) and `token_level_scores`
//! (summed per sample) or a plain `reward` — printed as the flat `{prefix}/{name}`
//! JSON VAGEN logs to W&B.

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use polars::prelude::*;

use crate::error::{Error, Location, Result};
use crate::json::{write_compact, Json};
use crate::metrics::pass_at_k::{self, Rollout, Score};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Batch file: JSONL or Parquet.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Metric to compute (repeatable; default: every built-in that applies).
    #[arg(long = "metric", value_name = "NAME")]
    pub metric: Vec<String>,
    /// Group id column (falls back to `uid` when absent).
    #[arg(long, default_value = "group_idx")]
    pub group_key: String,
    /// Prefix of the logged names.
    #[arg(long, default_value = "custom_metrics/train")]
    pub prefix: String,
    /// Delta degrees of freedom of reward_variance.
    #[arg(long, default_value_t = 0)]
    pub ddof: usize,
}

/// One sample: its group id (as text) and total reward.
pub type Sample = (String, f64);

/// A group id as a grouping key, equal where Python's dict keys are equal: text by its
/// characters, numbers and bools by value (`1`, `1.0` and `true` are one group), and the
/// two kinds apart (`1` and `"1"` are two groups).
fn json_group(v: &serde_json::Value) -> Option<String> {
    use crate::metrics::custom::{float_key, int_key};
    let number = |key: String| format!("\u{0}{key}");
    match v {
        serde_json::Value::Null => None,
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Bool(b) => Some(number(float_key(f64::from(u8::from(*b))))),
        serde_json::Value::Number(n) => Some(number(match n.as_i64() {
            Some(i) => int_key(i),
            None => float_key(n.as_f64().unwrap_or(f64::NAN)),
        })),
        other => Some(other.to_string()),
    }
}

/// Reads samples from JSONL.
pub fn read_jsonl(path: &Path, group_key: &str) -> Result<Vec<Sample>> {
    let text = std::fs::read(path).map_err(|e| Error::read(path, e))?;
    let mut out = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let loc = || Location::line(path, i as u64 + 1);
        let v: serde_json::Value =
            serde_json::from_slice(line).map_err(|e| Error::bad(loc(), format!("invalid JSON: {e}")))?;
        let obj = v.as_object().ok_or_else(|| Error::bad(loc(), "expected a JSON object"))?;
        let group =
            obj.get(group_key).and_then(json_group).or_else(|| obj.get("uid").and_then(json_group)).ok_or_else(
                || Error::bad(loc().key(group_key), format!("missing; expected a group id (`{group_key}` or `uid`)")),
            )?;
        let reward = if let Some(s) = obj.get("token_level_scores") {
            let arr = s
                .as_array()
                .ok_or_else(|| Error::bad(loc().key("token_level_scores"), "expected a list of numbers"))?;
            let mut total = 0.0;
            for x in arr {
                total += x
                    .as_f64()
                    .ok_or_else(|| Error::bad(loc().key("token_level_scores"), "expected a list of numbers"))?;
            }
            total
        } else if let Some(r) = obj.get("reward") {
            match r {
                serde_json::Value::Bool(b) => f64::from(u8::from(*b)),
                other => other.as_f64().ok_or_else(|| Error::bad(loc().key("reward"), "expected a number"))?,
            }
        } else {
            return Err(Error::bad(loc(), "expected `token_level_scores` (list of numbers) or `reward`"));
        };
        out.push((group, reward));
    }
    Ok(out)
}

/// Reads samples from Parquet.
pub fn read_parquet(path: &Path, group_key: &str) -> Result<Vec<Sample>> {
    let df = crate::export::parquet::read_parquet(path)?;
    let loc = || Location::file(path);
    let g = df
        .column(group_key)
        .or_else(|_| df.column("uid"))
        .map_err(|_| {
            Error::bad(loc().key(group_key), format!("no `{group_key}` or `uid` column; expected a group id"))
        })?
        .cast(&DataType::String)?;
    let g = g.str()?.clone();
    let rewards: Vec<Option<f64>> = if let Ok(s) = df.column("token_level_scores") {
        let s = s.cast(&DataType::List(Box::new(DataType::Float64)))?;
        let l = s.list()?.clone();
        (0..l.len())
            .map(|i| l.get_as_series(i).and_then(|x| x.f64().ok().map(|a| (0..a.len()).filter_map(|j| a.get(j)).sum())))
            .collect()
    } else if let Ok(r) = df.column("reward") {
        let r = r.cast(&DataType::Float64)?;
        let r = r.f64()?;
        (0..r.len()).map(|i| r.get(i)).collect()
    } else {
        return Err(Error::bad(loc(), "expected a `token_level_scores` or `reward` column"));
    };
    let mut out = Vec::new();
    for (i, r) in rewards.into_iter().enumerate() {
        let gid = g.get(i);
        let gid = gid.ok_or_else(|| Error::bad(loc().key(group_key), format!("row {}: null group id", i + 1)))?;
        let r = r.ok_or_else(|| Error::bad(loc().key("token_level_scores"), format!("row {}: null reward", i + 1)))?;
        out.push((gid.to_string(), r));
    }
    Ok(out)
}

/// Groups in first-seen order.
pub fn groups(samples: &[Sample]) -> Vec<Vec<f64>> {
    let mut order: Vec<&str> = Vec::new();
    let mut by: std::collections::HashMap<&str, Vec<f64>> = std::collections::HashMap::new();
    for (g, r) in samples {
        if !by.contains_key(g.as_str()) {
            order.push(g);
        }
        by.entry(g).or_default().push(*r);
    }
    order.into_iter().map(|g| by.remove(g).unwrap()).collect()
}

/// The flat metrics for a batch.
pub fn compute(samples: &[Sample], metrics: &[String], prefix: &str, ddof: usize) -> Result<Vec<(String, Json)>> {
    let gs = groups(samples);
    let names: Vec<String> =
        if metrics.is_empty() { vec!["reward_variance".into(), "pass_at_k".into()] } else { metrics.to_vec() };
    let mut out = Vec::new();
    for m in &names {
        match m.as_str() {
            "reward_variance" => {
                if let Some(m) = crate::stats::variance::ddof_warning(&gs, ddof) {
                    eprintln!("warning: {m}");
                }
                out.push((format!("{prefix}/reward_variance"), Json::Float(crate::stats::reward_variance(&gs, ddof))))
            }
            "pass_at_k" => {
                let tasks: Vec<Vec<Rollout>> = gs
                    .iter()
                    .map(|g| {
                        g.iter()
                            .map(|&r| Rollout { scores: vec![("accuracy".into(), Score::Float(r))], answer: None })
                            .collect()
                    })
                    .collect();
                for (k, v) in pass_at_k::metrics(&tasks, false, true) {
                    if matches!(v, Json::Float(_) | Json::Int(_)) {
                        out.push((format!("{prefix}/{k}"), v));
                    }
                }
            }
            other => {
                // A SQL metric: the batch as a `rollouts` table with one agent, `batch`.
                let sql = crate::query::metric_files(None)?;
                let Some((_, text)) = sql.iter().find(|(n, _)| n == other) else {
                    let known: Vec<&str> = sql.iter().map(|(n, _)| n.as_str()).collect();
                    return Err(Error::Usage(format!(
                        "--metric {other}: no such metric; known: reward_variance, pass_at_k, {}",
                        known.join(", ")
                    )));
                };
                let frame = batch_frame(samples)?;
                for (_, vals) in crate::query::run_metric(&frame, other, text)? {
                    out.extend(vals.into_iter().map(|(k, v)| (format!("{prefix}/{k}"), v)));
                }
            }
        }
    }
    Ok(out)
}

/// A batch as the `rollouts` table SQL metrics read: agent `batch`, one task per group
/// (first-seen order), `reward` = the sample's total reward, nothing masked.
pub fn batch_frame(samples: &[Sample]) -> Result<DataFrame> {
    let mut ids: std::collections::HashMap<&str, i64> = std::collections::HashMap::new();
    let mut task = Vec::with_capacity(samples.len());
    let mut rollout = Vec::with_capacity(samples.len());
    let mut per: Vec<i64> = Vec::new();
    for (g, _) in samples {
        let next = ids.len() as i64;
        let id = *ids.entry(g.as_str()).or_insert(next);
        if id as usize == per.len() {
            per.push(0);
        }
        task.push(id);
        rollout.push(per[id as usize]);
        per[id as usize] += 1;
    }
    let n = samples.len();
    Ok(DataFrame::new(
        n,
        vec![
            Column::new("_ng_task_index".into(), task),
            Column::new("_ng_rollout_index".into(), rollout),
            Column::new("agent".into(), vec!["batch"; n]),
            Column::new("mask_sample".into(), vec![false; n]),
            Column::new("reward".into(), samples.iter().map(|s| s.1).collect::<Vec<f64>>()),
        ],
    )?)
}

pub fn run(a: Args) -> Result<()> {
    let is_parquet = a.file.extension().is_some_and(|e| e == "parquet");
    let samples = if is_parquet { read_parquet(&a.file, &a.group_key)? } else { read_jsonl(&a.file, &a.group_key)? };
    let vals = compute(&samples, &a.metric, &a.prefix, a.ddof)?;
    let obj = Json::Obj(vals.into_iter().map(|(k, v)| (std::sync::Arc::from(k.as_str()), v)).collect());
    let mut out = Vec::new();
    crate::json::write_indented(&mut out, &obj, 0);
    let _ = write_compact;
    out.push(b'\n');
    std::io::Write::write_all(&mut std::io::stdout().lock(), &out)
        .map_err(|e| crate::error::Error::write(Path::new("<stdout>"), e))?;
    Ok(())
}
