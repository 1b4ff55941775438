//! `rollstat export`: the rollouts, tasks, agents and repeats tables as Parquet (zstd)
//! for DuckDB, Spark, pandas and BI tools, into a folder or added to a lake of sweeps.
//! Schemas and the lake's layout are in the command reference (docs/commands.md).

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, LakeArgs, RunFiles};
use crate::error::Result;
use crate::workflow::ExportConfig;

#[derive(ClapArgs, Debug, Clone)]
#[command(group(clap::ArgGroup::new("to").required(true).args(["out_dir", "lake"])))]
pub struct Args {
    #[command(flatten)]
    pub run: RunFiles,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    #[command(flatten)]
    pub lake: LakeArgs,
}

pub fn run(a: Args) -> Result<()> {
    let rollouts = a.run.rollouts();
    if let Some(to) = a.lake.target()? {
        let r =
            crate::workflow::export::export_to_lake(&rollouts, a.run.inputs.as_deref(), a.run.agent.as_deref(), &to)?;
        common::print_warnings(&r.warnings.across_runs());
        say!("{}", r.summary());
        return Ok(());
    }
    let out_dir = a.out_dir.expect("clap requires --out-dir or --lake");
    let c = ExportConfig { rollouts, inputs: a.run.inputs.clone(), agent: a.run.agent.clone(), out_dir };
    let (files, warnings) = crate::workflow::export(&c)?;
    common::print_warnings(&warnings.across_runs());
    for f in files {
        say!("Wrote {}", f.display());
    }
    Ok(())
}
