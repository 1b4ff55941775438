//! `rollstat report`: one self-contained HTML page per sweep — leaderboard, paired
//! differences against a baseline, pass@k curves, task difficulty, repeat noise, cost
//! and coverage — with inline charts and nothing fetched, to read offline or send on.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, RunsFiles};
use crate::error::Result;
use crate::workflow::ReportConfig;

#[derive(ClapArgs, Debug, Clone)]
#[command(group(clap::ArgGroup::new("runs_given").required(true).multiple(true).args(["rollouts", "files", "lake"])))]
pub struct Args {
    #[command(flatten)]
    pub runs: RunsFiles,
    /// Draw the trend over a lake of sweeps (`rollstat export --lake DIR`) instead: each
    /// run's metric per sweep, and the paired change between consecutive sweeps, marked
    /// where it is beyond noise (default output: DIR_trend.html beside the lake).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["rollouts", "files", "inputs", "agent", "baseline", "cluster_key", "pair_by", "task_key", "allow_task_mismatch"])]
    pub lake: Option<PathBuf>,
    /// With --lake: the sweep label that orders the sweeps (and places them on the x axis
    /// when every value is a number), e.g. `step`; default: the order they were added in.
    #[arg(long, value_name = "LABEL", requires = "lake")]
    pub by: Option<String>,
    /// Numeric field the page is about (`--field FIELD` works too, as on `compare`).
    #[arg(long = "metric", alias = "field", value_name = "FIELD", default_value = "reward")]
    pub metric: String,
    /// The run the others are compared against (default: the first run listed).
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Field that groups tasks into clusters: standard errors are clustered by it.
    #[arg(long, value_name = "FIELD")]
    pub cluster_key: Option<String>,
    /// Output file (default: S_report.html beside the first rollouts file S.jsonl).
    /// The page's time stamp is SOURCE_DATE_EPOCH when that is set, for reproducible bytes.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub pairing: super::common::Pairing,
}

impl Args {
    /// The validated configuration.
    pub fn config(&self) -> Result<ReportConfig> {
        Ok(ReportConfig {
            rollouts: self.runs.rollouts(),
            inputs: self.runs.inputs.clone(),
            agent: self.runs.agent.clone(),
            metric: self.metric.clone(),
            baseline: self.baseline.clone(),
            cluster_key: self.cluster_key.clone(),
            out: self.out.clone(),
            made_at: common::made_at()?,
            pairing: self.pairing.config(),
        })
    }
}

pub fn run(a: Args) -> Result<()> {
    if let Some(out) = &a.out {
        common::outputs_to_stdout(&[out]);
    }
    if let Some(lake) = &a.lake {
        let c = crate::workflow::trend::TrendConfig {
            lake: lake.clone(),
            by: a.by.clone(),
            metric: a.metric.clone(),
            out: a.out.clone(),
            made_at: common::made_at()?,
        };
        let r = crate::workflow::trend::trend(&c)?;
        common::print_warnings(&r.warnings);
        say!("Trend report: {} ({} KB)", r.file.display(), r.bytes.div_ceil(1024));
        return Ok(());
    }
    let r = crate::workflow::report(&a.config()?)?;
    common::print_warnings(&r.warnings);
    say!("Report: {} ({} KB)", r.file.display(), r.bytes.div_ceil(1024));
    Ok(())
}
