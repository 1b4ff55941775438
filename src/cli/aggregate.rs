//! `rollstat aggregate`: the `_aggregate_metrics.json` that `gym eval run` writes — one
//! entry per run label with agent, key, task-level and repeat-level metrics.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, MetricArgs, RunFiles};
use crate::error::Result;
use crate::json::Json;
use crate::workflow::AggregateConfig;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub run: RunFiles,
    /// Output file (default: S_aggregate_metrics.json beside S.jsonl).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub metrics: MetricArgs,
    /// Key metrics to select: exact names, `*` globs, or highest-k patterns like
    /// `pass@{k}` (repeatable; default every mean/* plus coverage).
    #[arg(long = "key-metric", value_name = "PATTERN")]
    pub key_metric: Vec<String>,
}

impl Args {
    /// The validated configuration.
    pub fn config(&self) -> Result<AggregateConfig> {
        Ok(AggregateConfig {
            rollouts: self.run.rollouts(),
            inputs: self.run.inputs.clone(),
            out: self.out.clone(),
            agent: self.run.agent.clone(),
            metrics: self.metrics.resolve()?,
            key_metrics: self.key_metric.clone(),
        })
    }
}

pub fn run(a: Args) -> Result<()> {
    if let Some(out) = &a.out {
        common::outputs_to_stdout(&[out]);
    }
    let r = crate::workflow::aggregate(&a.config()?)?;
    common::print_warnings(&r.warnings);
    if !common::quiet() {
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
                crate::json::write_compact(&mut b, v);
                say!("  {k}: {}", String::from_utf8_lossy(&b));
            }
        }
    }
}
