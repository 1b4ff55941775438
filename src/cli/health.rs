//! `rollstat health`: the rollout health check alone — fourteen deterministic checks
//! over the rollout records and their `ng_trajectory` evidence, written as
//! `quality_summary.json` and `rollout_verdicts.jsonl`.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::error::Result;
use crate::health::parse_ignored;
use crate::workflow::HealthConfig;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Rollouts JSONL files, read in order as one run.
    #[arg(value_name = "ROLLOUTS.jsonl", required = true)]
    pub rollouts: Vec<PathBuf>,
    /// Folder for quality_summary.json and rollout_verdicts.jsonl (created when missing;
    /// default: the first file's folder).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Checks to skip, comma-separated (repeatable): they are not run and count as
    /// ignored.
    #[arg(long, value_name = "CHECKS")]
    pub ignore_checks: Vec<String>,
}

pub fn run(a: Args) -> Result<()> {
    let c = HealthConfig { ignored: parse_ignored(&a.ignore_checks)?, rollouts: a.rollouts, out_dir: a.out_dir };
    let (h, summary) = crate::workflow::health(&c)?;
    if !super::common::quiet() {
        say!("{}", h.summary_line());
    }
    say!("Quality summary: {}", summary.display());
    Ok(())
}
