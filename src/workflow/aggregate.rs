//! The aggregate workflow: the `_aggregate_metrics.json` that `gym eval run` writes, one
//! entry per run label with agent, key, task-level and repeat-level metrics.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::custom::{sql_metrics, Metrics};
use super::{read_both, status_after_read};
use crate::error::{Error, Result};
use crate::export::atomic::OutputSet;
use crate::export::nemo_gym::{artifact_path, check_beside};
use crate::export::tasks::write_aggregate;
use crate::ingest::{InputTable, RolloutTable};
use crate::json::Json;
use crate::metrics::aggregate::AggregateOptions;
use crate::metrics::warnings::Warnings;
use crate::trace::trace;

/// What to aggregate and where the file goes.
#[derive(Debug, Clone)]
pub struct AggregateConfig {
    /// The run's rollouts files (one, or the shards it was written as).
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL: labels rollouts by their input rows' agent and server.
    pub inputs: Option<PathBuf>,
    /// Output file; `None`: `S_aggregate_metrics.json` beside `S.jsonl`.
    pub out: Option<PathBuf>,
    /// Label for rollouts that name no agent (without it such rollouts are an error).
    pub agent: Option<String>,
    pub metrics: Metrics,
    /// Key-metric selection patterns; empty means every `mean/*` plus coverage.
    pub key_metrics: Vec<String>,
}

/// What an aggregate run wrote.
pub struct AggregateRun {
    pub file: PathBuf,
    /// Each run label with its key metrics.
    pub key_metrics: Vec<(String, Json)>,
    pub warnings: Warnings,
}

pub fn aggregate(c: &AggregateConfig) -> Result<AggregateRun> {
    if c.out.is_none() {
        check_beside(&c.rollouts, "--out FILE")?;
    }
    let path = c.out.clone().unwrap_or_else(|| artifact_path(&c.rollouts[0], None, "aggregate_metrics", "json"));
    let mut read: Vec<&Path> = c.rollouts.iter().map(PathBuf::as_path).collect();
    read.extend(c.inputs.as_deref());
    read.extend(c.metrics.files.iter().map(PathBuf::as_path));
    let out = OutputSet::new(&read);
    out.check(&path)?;
    let (t, inputs) = read_both(&c.rollouts, c.inputs.as_deref())?;
    aggregate_table(c, &t, inputs.as_ref(), out, &path)
}

/// The statistics and the file `path` (staged in `out`, committed here) from a table
/// already read: `aggregate` after reading its files, `merge` after reading slices.
pub fn aggregate_table(
    c: &AggregateConfig,
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    mut out: OutputSet,
    path: &Path,
) -> Result<AggregateRun> {
    let status = status_after_read(t, inputs);
    status.say("computing statistics");
    let sql = c.metrics.sql();
    let extra = if sql.is_empty() { HashMap::new() } else { sql_metrics(t, inputs, c.agent.as_deref(), &sql)? };
    let opts = AggregateOptions {
        default_agent: c.agent.clone(),
        metrics: c.metrics.builtin(),
        key_metrics: c.key_metrics.clone(),
        extra,
    };
    let t0 = std::time::Instant::now();
    let (entries, warnings) = crate::metrics::aggregate::aggregate(t, inputs, &opts)?;
    trace("statistics", t0);
    let t0 = std::time::Instant::now();
    status.writing(path);
    let mut w = out.create(path)?;
    write_aggregate(&entries, &mut w).map_err(|e| e.at(path))?;
    w.finish().map_err(|e| Error::write(path, e))?;
    drop(w);
    trace("task entries + write", t0);
    drop(status);
    let mut files = out.commit()?;
    let key_metrics = entries
        .iter()
        .map(|e| (e.label().to_string(), e.member("key_metrics").cloned().unwrap_or(Json::obj())))
        .collect();
    Ok(AggregateRun { file: files.remove(0), key_metrics, warnings })
}
