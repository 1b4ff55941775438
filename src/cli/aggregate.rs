//! `rollstat aggregate`: the `_aggregate_metrics.json` that `gym eval run` writes — one
//! entry per run label with agent, key, task-level and repeat-level metrics.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, MetricArgs, RunFiles};
use crate::error::Result;
use crate::json::Json;
use crate::metrics::failures::{Note, Policy};
use crate::workflow::aggregate::{AggregateRun, RunOptions};
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
    /// A shard's failures sidecar, one per shard in order (default: S_failures.jsonl
    /// beside each S.jsonl, read when it exists).
    #[arg(long, value_name = "FILE")]
    pub failures: Vec<PathBuf>,
    /// Count the standing failures of this class as zero-reward rows instead of leaving
    /// them out of the score (repeatable).
    #[arg(long = "count-failures-as-zero", value_name = "CLASS")]
    pub count_failures: Vec<String>,
    /// Count materialized rollouts that left no row and no failure as zero-reward rows
    /// (read from S_materialized_inputs.jsonl beside each shard).
    #[arg(long = "count-missing-as-zero")]
    pub count_missing: bool,
    /// Also write every record of the shards, in (task, rollout) order, into FILE.
    #[arg(long, value_name = "FILE")]
    pub merge_into: Option<PathBuf>,
    /// Skip the rollout health check (quality_summary.json and rollout_verdicts.jsonl
    /// beside the aggregate file).
    #[arg(long)]
    pub no_health_check: bool,
    /// Also write what the score covers as JSON: records read, rows counted by each
    /// policy, failures left out by class, expected and scored rollouts, health verdicts.
    #[arg(long, value_name = "FILE")]
    pub coverage_out: Option<PathBuf>,
    /// Health checks to skip, comma-separated (see `rollstat health`).
    #[arg(long, value_name = "CHECKS", conflicts_with = "no_health_check")]
    pub ignore_checks: Vec<String>,
    #[command(flatten)]
    pub lake: super::common::LakeArgs,
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
            run: RunOptions {
                failures: self.failures.clone(),
                policy: Policy { count_classes: self.count_failures.clone(), count_missing: self.count_missing },
                merge_into: self.merge_into.clone(),
                coverage_out: self.coverage_out.clone(),
                health: if self.no_health_check {
                    None
                } else {
                    Some(crate::health::parse_ignored(&self.ignore_checks)?)
                },
                lake: self.lake.target()?,
            },
        })
    }
}

pub fn run(a: Args) -> Result<()> {
    if let Some(out) = &a.out {
        common::outputs_to_stdout(&[out]);
    }
    let r = crate::workflow::aggregate(&a.config()?)?;
    print_run(&r);
    Ok(())
}

/// The closing report: what was read and counted, the key metrics, what the score
/// covers and the health check's verdicts.
pub fn print_run(r: &AggregateRun) {
    let quiet = common::quiet();
    if !quiet {
        if r.shards.len() > 1 {
            say!("Aggregating {} shard(s):", r.shards.len());
            for s in &r.shards {
                say!("  - {}", s.display());
            }
        }
        say!("Loaded {} rollout record(s) from {} shard(s)", r.records, r.shards.len());
    }
    for n in r.coverage.iter().flat_map(|c| &c.notes) {
        match n {
            Note::Say(line) if !quiet => say!("{line}"),
            Note::Warn(line) => eprintln!("warning: {line}"),
            Note::Say(_) => {}
        }
    }
    common::print_warnings(&r.warnings);
    if !quiet {
        print_key_metrics(&r.key_metrics);
    }
    if let Some(m) = &r.merged {
        say!("Merged rollouts: {}", m.display());
    }
    match &r.file {
        Some(f) => say!("Aggregate metrics: {}", f.display()),
        None => say!("Aggregate metrics: None (nothing to score: no record and no counted row)"),
    }
    if !quiet {
        for line in r.coverage.iter().flat_map(|c| c.summary_lines()) {
            say!("{line}");
        }
    }
    if let Some((h, summary)) = &r.health {
        if !quiet {
            say!("{}", h.summary_line());
        }
        say!("Quality summary: {}", summary.display());
    }
    if let Some(l) = &r.lake {
        say!("{}", l.summary());
    }
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
