//! `rollstat compare`: is one run better than another, beyond noise? Each run's mean
//! score over tasks with a task-level standard error (clustered with `--cluster-key`), and
//! each run against a baseline, paired on the tasks both measured: difference, its
//! standard error and 95% interval, t test p-value, wins/losses/ties, and the unpaired
//! standard error for contrast. Runs are the run labels of one rollouts file (agents
//! fanned out over the same tasks), or of several files (a checkpoint against another).

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use super::common::{self, RunsFiles};
use super::query::{Format, TableOut};
use crate::error::{Error, Result};
use crate::export::atomic::OutputSet;
use crate::export::compare::{frame, json_with_flips, markdown, text};
use crate::workflow::CompareConfig;

#[derive(ClapArgs, Debug, Clone)]
#[command(group(clap::ArgGroup::new("runs_given").required(true).multiple(true).args(["rollouts", "files"])))]
pub struct Args {
    #[command(flatten)]
    pub runs: RunsFiles,
    /// Numeric field to compare (`--metric FIELD`, its earlier name, still works; on
    /// `profile` and `aggregate`, `--metric` adds a custom metric instead).
    #[arg(long = "field", alias = "metric", value_name = "FIELD", default_value = "reward")]
    pub metric: String,
    /// Compare each task's pass@K (NeMo Gym's estimator: unbiased for 0/1 scores, best of
    /// the first K otherwise) instead of its mean; tasks with fewer than K measured
    /// rollouts are left out.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub pass_at: Option<u32>,
    /// The run the others are compared against (default: the first run listed).
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Field that groups tasks into clusters (questions on one passage, variants of one
    /// problem): standard errors are clustered by it. Every measured rollout of a task
    /// must carry the same value.
    #[arg(long, value_name = "FIELD")]
    pub cluster_key: Option<String>,
    /// Repeat the comparison for each group of tasks by a field (`subset`, a difficulty):
    /// per-group means, differences, intervals and tests. Every measured rollout of a
    /// task must carry the same value, all numbers or all text.
    #[arg(long, value_name = "FIELD")]
    pub by: Option<String>,
    /// Is the eval big enough? The smallest difference each comparison would detect
    /// (two-sided 5% paired t test, 80% power) given the observed task-level spread, and
    /// per run the share of the task means' variance that is repeat noise, with what
    /// twice the repeats or twice the tasks would do to the interval.
    #[arg(long)]
    pub mde: bool,
    /// The number of tasks each comparison needs to detect a difference of DIFF (in the
    /// metric's units) with 80% power at 5%, given the observed spread.
    #[arg(long, value_name = "DIFF", allow_negative_numbers = true)]
    pub detect: Option<f64>,
    /// List the N tasks that changed most against the baseline per run, with their
    /// per-rollout scores (table, markdown and json).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub flips: Option<u32>,
    #[command(flatten)]
    pub pairing: super::common::Pairing,
    #[command(flatten)]
    pub output: TableOut,
}

impl Args {
    /// The validated configuration; flag values that cannot be used are refused before
    /// any reading.
    pub fn config(&self) -> Result<CompareConfig> {
        if self.flips.is_some() && matches!(self.output.format, Format::Csv | Format::Parquet) {
            return Err(Error::Usage(
                "--flips lists tasks beside the runs, which one CSV or Parquet table cannot hold; use --format table, markdown or json".into(),
            ));
        }
        let c = CompareConfig {
            rollouts: self.runs.rollouts(),
            inputs: self.runs.inputs.clone(),
            agent: self.runs.agent.clone(),
            metric: self.metric.clone(),
            pass_at: self.pass_at,
            baseline: self.baseline.clone(),
            cluster_key: self.cluster_key.clone(),
            by: self.by.clone(),
            mde: self.mde,
            detect: self.detect,
            flips: self.flips,
            pairing: self.pairing.config(),
        };
        c.validate()?;
        Ok(c)
    }
}

pub fn run(a: Args) -> Result<()> {
    let c = a.config()?;
    let view = c.view(a.output.precision.into());
    let mut read: Vec<&Path> = c.rollouts.iter().map(PathBuf::as_path).collect();
    read.extend(c.inputs.iter().map(PathBuf::as_path));
    let out = OutputSet::new(&read);
    // Refused before reading, not after.
    a.output.check(&out)?;
    let (_, r) = crate::workflow::compare(&c)?;
    common::print_warnings(&r.warnings);
    let df = frame(&view, &r)?;
    let bytes = match a.output.format {
        Format::Json if a.flips.is_some() => Some(json_with_flips(&df, &r)),
        Format::Markdown => Some(markdown(&view, &r, &df, a.flips.is_some())?),
        _ => None,
    };
    match bytes {
        // Written as the readable form is: the rows count stays the runs'.
        Some(b) => TableOut { format: Format::Table, ..a.output.clone() }.write(out, df, |_| b, "runs"),
        None => a.output.write(out, df, |_| text(&view, &r).into_bytes(), "runs"),
    }
}
