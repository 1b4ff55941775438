//! `rollstat merge`: `aggregate` or `profile` over the slices of a sharded sweep, with
//! the same flags and the same output bytes as on the rollouts files concatenated.

use std::path::PathBuf;

use clap::{Args as ClapArgs, Subcommand};

use super::common::{self, MetricArgs};
use crate::error::Result;
use crate::workflow::merge::{self, MergeAggregateConfig, MergeOutcome, MergeProfileConfig, SliceSweep};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Subcommand, Debug, Clone)]
pub enum What {
    /// NeMo Gym's `_aggregate_metrics.json` over the slices.
    Aggregate(AggregateArgs),
    /// NeMo Gym's reward profiling artifacts over the slices.
    Profile(ProfileArgs),
    /// `export`'s four Parquet tables over the slices.
    Export(ExportArgs),
    /// Adds one round's shares (`merge aggregate|profile --share-out`) to the plan; prints
    /// `more` (another round is needed) or `done` (give the plan to `merge aggregate
    /// --plan`).
    Combine(CombineArgs),
}

#[derive(ClapArgs, Debug, Clone)]
pub struct ExportArgs {
    #[command(flatten)]
    pub slices: Slices,
    /// Materialized inputs JSONL (labels and expected counts), or their input slices
    /// among the slices.
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Option<PathBuf>,
    /// Label for rollouts that name no agent (without it such rollouts are an error).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct CombineArgs {
    /// The round's shares, in bucket order.
    #[arg(value_name = "SHARE", required = true)]
    pub shares: Vec<PathBuf>,
    /// The last round's plan (none for the counting round's shares).
    #[arg(long, value_name = "PLAN")]
    pub plan: Option<PathBuf>,
    /// The next plan.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// The slices and the sweep's name, common to both.
#[derive(ClapArgs, Debug, Clone)]
pub struct Slices {
    /// The slices, in bucket order (`join` outputs, or `shard` outputs in file order);
    /// with them, in any order, the input slices of `shard --inputs` instead of --inputs.
    #[arg(value_name = "SLICE", required = true)]
    pub slices: Vec<PathBuf>,
    /// The rollouts file name the sweep goes by (names profile's artifacts S_…).
    #[arg(long, value_name = "S.jsonl", default_value = "rollouts.jsonl")]
    pub name: PathBuf,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct AggregateArgs {
    #[command(flatten)]
    pub slices: Slices,
    /// Materialized inputs JSONL: labels each rollout by its input row's agent and server.
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Option<PathBuf>,
    /// Label for rollouts that name no agent (without it such rollouts are an error).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Output file.
    #[arg(long, value_name = "FILE", required_unless_present = "share_out", conflicts_with = "share_out")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub metrics: MetricArgs,
    /// Key metrics to select (as for `aggregate`).
    #[arg(long = "key-metric", value_name = "PATTERN")]
    pub key_metric: Vec<String>,
    #[command(flatten)]
    pub hold: Hold,
    #[command(flatten)]
    pub rounds: Rounds,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub slices: Slices,
    /// Materialized inputs JSONL (one row per expected rollout); required unless input
    /// slices are given.
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Option<PathBuf>,
    /// Profile what completed when some input rows have no rollout.
    #[arg(long)]
    pub allow_partial: bool,
    /// Folder for the three artifacts (created if missing).
    #[arg(long, value_name = "DIR", required_unless_present = "share_out", conflicts_with = "share_out")]
    pub out_dir: Option<PathBuf>,
    #[command(flatten)]
    pub metrics: MetricArgs,
    #[command(flatten)]
    pub hold: Hold,
    #[command(flatten)]
    pub rounds: Rounds,
}

/// How the merge holds the sweep.
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct Hold {
    /// Read every slice into one table instead of one bucket at a time: each slice is
    /// read once, but the sweep's table is held (some 4 GB for 10M rollouts). The bytes
    /// are the same. Custom metrics and slices not in task order always take the whole
    /// table.
    #[arg(long)]
    pub whole_table: bool,
    /// Accepted for scripts written before every bucket-by-bucket merge kept no column;
    /// changes nothing.
    #[arg(long, hide = true)]
    pub low_memory: bool,
}

/// The statistics as rounds of tasks on a cluster: a share per bucket, `merge combine`,
/// until the plan is done.
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct Rounds {
    /// The statistics from this finished plan (rounds of --share-out and `merge
    /// combine`, run on a cluster) instead of rounds over the slices here, which are
    /// then read twice.
    #[arg(long, value_name = "PLAN", conflicts_with = "whole_table")]
    pub plan: Option<PathBuf>,
    /// Write these buckets' share of the next round of statistics (the counting round
    /// without --plan) to FILE instead of merging.
    #[arg(long, value_name = "FILE", conflicts_with = "whole_table")]
    pub share_out: Option<PathBuf>,
}

impl Slices {
    /// The slices with how the merge holds the sweep and its rounds.
    fn sweep(&self, hold: &Hold, rounds: &Rounds) -> SliceSweep {
        SliceSweep {
            slices: self.slices.clone(),
            name: self.name.clone(),
            whole_table: hold.whole_table,
            plan: rounds.plan.clone(),
            share_out: rounds.share_out.clone(),
        }
    }
}

pub fn run(a: Args) -> Result<()> {
    match a.what {
        What::Export(a) => {
            let (slices, input_slices) = a.slices.sweep(&Hold::default(), &Rounds::default()).split()?;
            let c = crate::workflow::ExportConfig {
                rollouts: vec![a.slices.name.clone()],
                inputs: a.inputs,
                agent: a.agent,
                out_dir: a.out_dir,
            };
            let (files, warnings) = merge::merge_export(&c, &slices, &input_slices)?;
            common::print_warnings(&warnings);
            for f in files {
                say!("Wrote {}", f.display());
            }
        }
        What::Combine(a) => {
            let plan = merge::combine(a.plan.as_deref(), &a.shares, &a.out)?;
            if !common::quiet() {
                eprintln!("Combined {} shares: round {} (wrote {})", a.shares.len(), plan.round, a.out.display());
            }
            println!("{}", if plan.more() { "more" } else { "done" });
        }
        What::Aggregate(a) => {
            if let Some(out) = &a.out {
                common::outputs_to_stdout(&[out]);
            }
            let c = MergeAggregateConfig {
                sweep: a.slices.sweep(&a.hold, &a.rounds),
                inputs: a.inputs,
                out: a.out,
                agent: a.agent,
                metrics: a.metrics.resolve()?,
                key_metrics: a.key_metric,
            };
            report(&c.sweep, merge::aggregate_slices(&c)?, |r| {
                common::print_warnings(&r.warnings);
                if !common::quiet() {
                    super::aggregate::print_key_metrics(&r.key_metrics);
                }
                if let Some(f) = &r.file {
                    say!("Aggregate metrics: {}", f.display());
                }
            });
        }
        What::Profile(a) => {
            let c = MergeProfileConfig {
                sweep: a.slices.sweep(&a.hold, &a.rounds),
                inputs: a.inputs,
                allow_partial: a.allow_partial,
                out_dir: a.out_dir,
                metrics: a.metrics.resolve()?,
            };
            report(&c.sweep, merge::profile_slices(&c)?, |r| {
                let warnings = common::print_warnings(&r.warnings);
                super::profile::print_summary(r, warnings);
            });
        }
    }
    Ok(())
}

/// What `merge aggregate` and `merge profile` say alike: the shares written, or how
/// the sweep was merged and then the `merged` result's own report.
fn report<R>(sweep: &SliceSweep, outcome: MergeOutcome<R>, merged: impl FnOnce(&R)) {
    match outcome {
        MergeOutcome::Shares(n) => {
            if let (false, Some(share)) = (common::quiet(), &sweep.share_out) {
                eprintln!("Wrote {} ({n} run shares)", share.display());
            }
        }
        MergeOutcome::Merged(r, how) => {
            if !common::quiet() {
                say!("Merged {how}");
            }
            merged(&r);
        }
    }
}
