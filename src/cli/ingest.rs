//! `rollstat ingest`: a rollouts file (and optionally its materialized inputs, for run
//! labels) into the typed `rollouts` Parquet table (zstd). Schema: see the README and
//! [`crate::ingest::frame`].

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common;
use crate::error::Result;
use crate::export::atomic::OutputSet;
use crate::export::parquet::write_parquet;
use crate::ingest::frame::rollouts_frame;
use crate::metrics::labels::runs;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Rollouts JSONL.
    #[arg(value_name = "ROLLOUTS.jsonl")]
    pub rollouts: PathBuf,
    /// Materialized inputs JSONL (labels rollouts by their input rows' agent and server).
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Option<PathBuf>,
    /// Output Parquet file.
    #[arg(long, value_name = "FILE", default_value = "rollouts.parquet")]
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

pub fn execute(a: &Args) -> Result<IngestRun> {
    let mut ins = vec![a.rollouts.as_path()];
    if let Some(i) = &a.inputs {
        ins.push(i.as_path());
    }
    let mut out = OutputSet::new(&ins);
    out.check(&a.out)?;
    let (t, inputs) = common::read_both(&a.rollouts, a.inputs.as_deref())?;
    let status = common::status_after_read(&t, inputs.as_ref());
    status.say("building the table");
    let runs = runs(&t, inputs.as_ref());
    let t0 = std::time::Instant::now();
    let mut df = rollouts_frame(&t, &runs, None)?;
    common::trace("frame", t0);
    let t0 = std::time::Instant::now();
    status.writing(&a.out);
    let mut w = out.create(&a.out)?;
    write_parquet(&mut df, &a.out, &mut w)?;
    common::trace("parquet", t0);
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

pub fn run(a: Args) -> Result<()> {
    super::common::outputs_to_stdout(&[&a.out]);
    let start = std::time::Instant::now();
    let r = execute(&a)?;
    let secs = start.elapsed().as_secs_f64();
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
    say!("Wrote {} ({} columns)", a.out.display(), r.columns);
    Ok(())
}
