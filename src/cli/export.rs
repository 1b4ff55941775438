//! `rollstat export`: the rollouts, tasks, agents and repeats tables as Parquet (zstd)
//! for DuckDB, Spark, pandas and BI tools. Schemas are documented in the README.

use std::path::PathBuf;

use clap::Args as ClapArgs;
use polars::prelude::DataFrame;

use super::common;
use crate::error::Result;
use crate::export::atomic::OutputSet;
use crate::export::parquet::write_parquet;
use crate::ingest::frame::rollouts_frame;
use crate::metrics::aggregate::{aggregate, AggregateOptions};
use crate::metrics::labels::runs;

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

/// Builds the four tables.
pub fn tables(a: &Args) -> Result<Vec<(&'static str, DataFrame)>> {
    let (t, inputs) = common::read_both(&a.rollouts, a.inputs.as_deref())?;
    let rollouts = rollouts_frame(&t, &runs(&t, inputs.as_ref()), a.agent.as_deref())?;
    let opts = AggregateOptions { default_agent: a.agent.clone(), ..Default::default() };
    let (entries, warnings) = aggregate(&t, inputs.as_ref(), &opts)?;
    // The level tables are the aggregate's numbers, with its warnings (rollouts left out
    // for want of an input row, among others).
    common::print_warnings(&warnings);
    let (tasks, agents, repeats) = crate::query::level_tables(&entries)?;
    Ok(vec![(NAMES[0], rollouts), (NAMES[1], tasks), (NAMES[2], agents), (NAMES[3], repeats)])
}

/// The tables, in the order they are written.
const NAMES: [&str; 4] = ["rollouts", "tasks", "agents", "repeats"];

pub fn execute(a: &Args) -> Result<Vec<PathBuf>> {
    crate::export::atomic::in_out_dir(&a.out_dir, || {
        let mut ins = vec![a.rollouts.as_path()];
        if let Some(i) = &a.inputs {
            ins.push(i.as_path());
        }
        let mut out = OutputSet::new(&ins);
        let paths = NAMES.map(|name| a.out_dir.join(format!("{name}.parquet")));
        // Checked before reading: the outputs can be written there.
        for path in &paths {
            out.check(path)?;
        }
        for ((_, mut df), path) in tables(a)?.into_iter().zip(&paths) {
            let mut w = out.create(path)?;
            write_parquet(&mut df, path, &mut w)?;
        }
        out.commit()
    })
}

pub fn run(a: Args) -> Result<()> {
    for f in execute(&a)? {
        say!("Wrote {}", f.display());
    }
    Ok(())
}
