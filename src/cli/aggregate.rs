//! `rollstat aggregate`: the `_aggregate_metrics.json` that `gym eval run` writes — one
//! entry per run label with agent, key, task-level and repeat-level metrics (SPEC §7).

use std::collections::HashMap;
use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, MetricArgs};

use crate::error::{Error, Result};
use crate::export::atomic::{stream_error, OutputSet};
use crate::export::json::Json;
use crate::export::nemo_gym::{artifact_path, check_beside};
use crate::export::tasks::write_aggregate;
use crate::ingest::{InputTable, RolloutTable};
use crate::metrics::aggregate::{aggregate, AggregateOptions};
use crate::metrics::custom::{self, MetricSpec};
use crate::metrics::labels::runs;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Rollouts JSONL.
    #[arg(long, value_name = "ROLLOUTS.jsonl")]
    pub rollouts: PathBuf,
    /// Materialized inputs JSONL: labels rollouts by their input rows' agent and server.
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Option<PathBuf>,
    /// Output file (default: S_aggregate_metrics.json beside S.jsonl).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Label for rollouts that name no agent (without it such rollouts are an error).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    #[command(flatten)]
    pub metrics: MetricArgs,
    /// Do not print each agent's key metrics.
    #[arg(long, short)]
    pub quiet: bool,
}

pub struct AggregateRun {
    pub file: PathBuf,
    /// Each run label with its key metrics.
    pub key_metrics: Vec<(String, Json)>,
    pub warnings: usize,
}

pub fn run(a: Args) -> Result<()> {
    if let Some(out) = &a.out {
        common::outputs_to_stdout(&[out]);
    }
    let r = execute(&a)?;
    if !a.quiet {
        print_key_metrics(&r.key_metrics);
    }
    say!("Aggregate metrics: {}", r.file.display());
    Ok(())
}

pub fn print_key_metrics(entries: &[(String, Json)]) {
    for (name, km) in entries {
        say!("Key metrics for {name}:");
        if let Json::Obj(items) = km {
            for (k, v) in items {
                let mut b = Vec::new();
                crate::export::json::write_compact(&mut b, v);
                say!("  {k}: {}", String::from_utf8_lossy(&b));
            }
        }
    }
}

pub fn execute(a: &Args) -> Result<AggregateRun> {
    let specs = a.metrics.specs()?;
    if a.out.is_none() {
        check_beside(&a.rollouts, "--out FILE")?;
    }
    let path = a.out.clone().unwrap_or_else(|| artifact_path(&a.rollouts, None, "aggregate_metrics", "json"));
    let sql = a.metrics.files_read();
    let mut inputs_list = vec![a.rollouts.as_path()];
    if let Some(i) = &a.inputs {
        inputs_list.push(i.as_path());
    }
    inputs_list.extend(sql.iter().map(PathBuf::as_path));
    let mut out = OutputSet::new(&inputs_list);
    out.check(&path)?;
    let (t, inputs) = common::read_both(&a.rollouts, a.inputs.as_deref())?;
    let status = common::status_after_read(&t, inputs.as_ref());
    status.say("computing statistics");
    let builtin: Vec<MetricSpec> = specs.iter().filter(|m| !matches!(m, MetricSpec::Sql { .. })).cloned().collect();
    let sql: Vec<&MetricSpec> = specs.iter().filter(|m| matches!(m, MetricSpec::Sql { .. })).collect();
    let extra =
        if sql.is_empty() { HashMap::new() } else { sql_metrics(&t, inputs.as_ref(), a.agent.as_deref(), &sql)? };
    let opts = AggregateOptions {
        default_agent: a.agent.clone(),
        metrics: builtin,
        key_metrics: a.metrics.key_metric.clone(),
        extra,
    };
    let t0 = std::time::Instant::now();
    let (entries, warnings) = aggregate(&t, inputs.as_ref(), &opts)?;
    common::trace("statistics", t0);
    let t0 = std::time::Instant::now();
    status.writing(&path);
    let mut w = out.create(&path)?;
    write_aggregate(&entries, &mut w).map_err(|e| stream_error(&path, e))?;
    w.finish().map_err(|e| Error::write(&path, e))?;
    drop(w);
    common::trace("task entries + write", t0);
    drop(status);
    let mut files = out.commit()?;
    let warnings = common::print_warnings(&warnings);
    let key_metrics = entries
        .iter()
        .map(|e| (e.label().to_string(), e.member("key_metrics").cloned().unwrap_or(Json::obj())))
        .collect();
    Ok(AggregateRun { file: files.remove(0), key_metrics, warnings })
}

/// Runs SQL metrics over the measured rollouts; returns `NAME/<column>` values per label.
pub fn sql_metrics(
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    default_agent: Option<&str>,
    specs: &[&MetricSpec],
) -> Result<HashMap<String, Vec<(String, Json)>>> {
    let frame = crate::ingest::frame::rollouts_frame(t, &runs(t, inputs), default_agent)?;
    let mut out: HashMap<String, Vec<(String, Json)>> = HashMap::new();
    for m in specs {
        if let MetricSpec::Sql { name, sql } = m {
            for (label, vals) in crate::query::run_metric(&frame, name, sql)? {
                out.entry(label).or_default().extend(vals);
            }
        }
    }
    Ok(out)
}

/// Merges custom metrics into profile agent entries (by label), after their statistics.
pub fn merge_custom_profile(
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    specs: &[MetricSpec],
    agents: &mut [Json],
    warnings: &mut crate::metrics::warnings::Warnings,
) -> Result<()> {
    let runs = runs(t, inputs);
    let sql: Vec<&MetricSpec> = specs.iter().filter(|m| matches!(m, MetricSpec::Sql { .. })).collect();
    let sql_vals = if sql.is_empty() { HashMap::new() } else { sql_metrics(t, inputs, None, &sql)? };
    for e in agents.iter_mut() {
        let name = match e.get("agent_ref").and_then(|r| r.get("name")) {
            Some(Json::Str(s)) => s.clone(),
            _ => continue,
        };
        let rows: Vec<usize> =
            (0..t.len()).filter(|&r| !t.masked[r] && runs.label_of(r) == Some(name.as_str())).collect();
        if rows.is_empty() {
            continue;
        }
        let tasks = custom::tasks_of(t, &rows);
        for m in specs {
            let vals = custom::compute(m, t, &tasks, warnings)?;
            for (k, v) in vals {
                e.set(&k, v);
            }
        }
        if let Some(vals) = sql_vals.get(&name) {
            for (k, v) in vals {
                e.set(k, v.clone());
            }
        }
    }
    Ok(())
}
