//! `rollstat ingest`: a rollouts file (and optionally its materialized inputs, for run
//! labels) into the typed `rollouts` Parquet table (zstd). Schema: see the README and
//! [`crate::ingest::frame`].

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, RunFiles};
use crate::error::Result;
use crate::workflow::IngestConfig;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub run: RunFiles,
    /// Output Parquet file.
    #[arg(long, value_name = "FILE", default_value = "rollouts.parquet")]
    pub out: PathBuf,
}

impl Args {
    /// The validated configuration.
    pub fn config(&self) -> IngestConfig {
        IngestConfig {
            rollouts: self.run.rollouts(),
            inputs: self.run.inputs.clone(),
            agent: self.run.agent.clone(),
            out: self.out.clone(),
        }
    }
}

pub fn run(a: Args) -> Result<()> {
    super::common::outputs_to_stdout(&[&a.out]);
    let start = std::time::Instant::now();
    let r = crate::workflow::ingest(&a.config())?;
    let secs = start.elapsed().as_secs_f64();
    if !common::quiet() {
        say!(
            "Read {} rollouts ({:.1} MB in {:.2}s, {:.2} GB/s): {} agents, {} tasks, {} rollout indexes, {} fields",
            r.rows,
            r.bytes as f64 / 1e6,
            secs,
            r.bytes as f64 / 1e9 / secs,
            r.agents.len(),
            r.tasks,
            r.repeats,
            r.fields.len()
        );
        say!("Agents: {}", r.agents.join(", "));
        say!("Fields: {}", r.fields.join(", "));
    }
    say!("Wrote {} ({} columns)", a.out.display(), r.columns);
    Ok(())
}
