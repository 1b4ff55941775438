//! The ingest workflow: a rollouts file (and optionally its materialized inputs, for run
//! labels) into the typed `rollouts` Parquet table (zstd).

use std::path::{Path, PathBuf};

use super::{read_both, status_after_read};
use crate::error::Result;
use crate::export::atomic::OutputSet;
use crate::export::parquet::write_parquet;
use crate::ingest::frame::rollouts_frame;
use crate::ingest::labels::runs;
use crate::trace::trace;

/// What to ingest and where the table goes.
#[derive(Debug, Clone)]
pub struct IngestConfig {
    /// The run's rollouts files (one, or the shards it was written as).
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL (labels rollouts by their input rows' agent and server).
    pub inputs: Option<PathBuf>,
    /// The `agent` of rollouts that name none (else null in the table).
    pub agent: Option<String>,
    /// Output Parquet file.
    pub out: PathBuf,
}

/// What ingest read and wrote.
pub struct IngestRun {
    pub rows: usize,
    pub columns: usize,
    pub agents: Vec<String>,
    pub tasks: usize,
    pub repeats: usize,
    pub fields: Vec<String>,
    pub bytes: u64,
}

/// The typed rollouts table of a run, in memory: what `ingest` writes, and the
/// `rollouts` table of `export`.
pub fn rollouts_table(
    rollouts: &[PathBuf],
    inputs: Option<&Path>,
    agent: Option<&str>,
) -> Result<polars::prelude::DataFrame> {
    let (t, inputs) = read_both(rollouts, inputs, Default::default())?;
    Ok(rollouts_frame(&t, &runs(&t, inputs.as_ref()), agent)?)
}

pub fn ingest(c: &IngestConfig) -> Result<IngestRun> {
    let mut read: Vec<&Path> = c.rollouts.iter().map(PathBuf::as_path).collect();
    read.extend(c.inputs.as_deref());
    let mut out = OutputSet::new(&read);
    out.check(&c.out)?;
    let (t, inputs) = read_both(&c.rollouts, c.inputs.as_deref(), Default::default())?;
    let status = status_after_read(&t, inputs.as_ref());
    status.say("building the table");
    let runs = runs(&t, inputs.as_ref());
    let t0 = std::time::Instant::now();
    let mut df = rollouts_frame(&t, &runs, c.agent.as_deref())?;
    trace("frame", t0);
    let t0 = std::time::Instant::now();
    status.writing(&c.out);
    let mut w = out.create(&c.out)?;
    write_parquet(&mut df, &c.out, &mut w)?;
    trace("parquet", t0);
    drop(status);
    out.commit()?;
    let mut agents: Vec<String> = runs.labels.clone();
    agents.sort();
    let mut tasks = t.task.clone();
    tasks.sort_unstable();
    tasks.dedup();
    let mut reps = t.rollout.clone();
    reps.sort_unstable();
    reps.dedup();
    let fields: Vec<String> = df.get_column_names().iter().skip(5).map(|s| s.to_string()).collect();
    Ok(IngestRun {
        rows: t.len(),
        columns: df.width(),
        agents,
        tasks: tasks.len(),
        repeats: reps.len(),
        fields,
        bytes: t.report.bytes,
    })
}
