//! `rollstat export`: the rollouts, tasks, agents and repeats tables as Parquet (zstd)
//! for DuckDB, Spark, pandas and BI tools. Schemas are documented in the README.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common;
use crate::error::Result;
use crate::workflow::ExportConfig;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Rollouts JSONL.
    #[arg(long, value_name = "ROLLOUTS.jsonl")]
    pub rollouts: PathBuf,
    /// Materialized inputs JSONL (for run labels).
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Option<PathBuf>,
    /// Label for rollouts that name no agent.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
}

impl Args {
    /// The validated configuration.
    pub fn config(&self) -> ExportConfig {
        ExportConfig {
            rollouts: self.rollouts.clone(),
            inputs: self.inputs.clone(),
            agent: self.agent.clone(),
            out_dir: self.out_dir.clone(),
        }
    }
}

pub fn run(a: Args) -> Result<()> {
    let (files, warnings) = crate::workflow::export(&a.config())?;
    common::print_warnings(&warnings);
    for f in files {
        say!("Wrote {}", f.display());
    }
    Ok(())
}
