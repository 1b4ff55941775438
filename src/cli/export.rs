//! `rollstat export`: the rollouts, tasks, agents and repeats tables as Parquet (zstd)
//! for DuckDB, Spark, pandas and BI tools. Schemas are in the command reference (docs/commands.md).

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, RunFiles};
use crate::error::Result;
use crate::workflow::ExportConfig;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub run: RunFiles,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
}

impl Args {
    /// The validated configuration.
    pub fn config(&self) -> ExportConfig {
        ExportConfig {
            rollouts: self.run.rollouts(),
            inputs: self.run.inputs.clone(),
            agent: self.run.agent.clone(),
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
