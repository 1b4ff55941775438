//! The export workflow: the rollouts, tasks, agents and repeats tables of one rollouts
//! file as Parquet (zstd) for DuckDB, Spark, pandas and BI tools; and the same tables
//! in memory for SQL.

use std::path::{Path, PathBuf};

use polars::prelude::DataFrame;

use super::read_both;
use crate::error::Result;
use crate::export::atomic::{in_out_dir, OutputSet};
use crate::export::parquet::write_parquet;
use crate::ingest::ReadOptions;
use crate::metrics::tables::NAMES;
use crate::metrics::warnings::Warnings;

/// Which rollouts to export and where.
#[derive(Debug, Clone)]
pub struct ExportConfig {
    /// The run's rollouts files (one, or the shards it was written as).
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL (for run labels and expected counts).
    pub inputs: Option<PathBuf>,
    /// Label for rollouts that name no agent.
    pub agent: Option<String>,
    /// Output folder (created when missing; removed again if the run fails and made it).
    pub out_dir: PathBuf,
}

/// Reads the rollouts (and inputs) and builds the four tables, by name, with the
/// aggregate's warnings (rollouts left out for want of an input row, among others).
pub fn tables(
    rollouts: &[PathBuf],
    inputs: Option<&Path>,
    agent: Option<&str>,
) -> Result<(Vec<(&'static str, DataFrame)>, Warnings)> {
    let (t, inputs) = read_both(rollouts, inputs, ReadOptions::FINGERPRINTS)?;
    let failed = super::aggregate::failures_beside(rollouts, &t)?.map(|c| c.failures).unwrap_or_default();
    let (tables, warnings) = crate::metrics::tables::tables(&t, inputs.as_ref(), agent, &failed, None)?;
    Ok((tables.named(), warnings))
}

/// Writes `rollouts.parquet`, `tasks.parquet`, `agents.parquet` and `repeats.parquet`
/// into the output folder; returns the files written and the warnings.
pub fn export(c: &ExportConfig) -> Result<(Vec<PathBuf>, Warnings)> {
    in_out_dir(&c.out_dir, || {
        let mut read: Vec<&Path> = c.rollouts.iter().map(PathBuf::as_path).collect();
        read.extend(c.inputs.as_deref());
        let mut out = OutputSet::new(&read);
        let paths = NAMES.map(|name| c.out_dir.join(format!("{name}.parquet")));
        // Checked before reading: the outputs can be written there.
        for path in &paths {
            out.check(path)?;
        }
        let (tables, warnings) = tables(&c.rollouts, c.inputs.as_deref(), c.agent.as_deref())?;
        for ((_, mut df), path) in tables.into_iter().zip(&paths) {
            let mut w = out.create(path)?;
            write_parquet(&mut df, path, &mut w)?;
        }
        Ok((out.commit()?, warnings))
    })
}

/// Adds the sweep read from `rollouts` (and `inputs`) to the lake `to`, with the tables
/// [`export`] writes.
pub fn export_to_lake(
    rollouts: &[PathBuf],
    inputs: Option<&Path>,
    agent: Option<&str>,
    to: &super::lake::LakeTarget,
) -> Result<super::lake::LakeRun> {
    if let Some(id) = &to.sweep_id {
        crate::export::lake::check_sweep_id(id)?;
    }
    let (t, read_inputs) = read_both(rollouts, inputs, ReadOptions::FINGERPRINTS)?;
    let failed = super::aggregate::failures_beside(rollouts, &t)?.map(|c| c.failures).unwrap_or_default();
    let mut read: Vec<&Path> = rollouts.iter().map(PathBuf::as_path).collect();
    read.extend(inputs);
    super::lake::add_run(&t, read_inputs.as_ref(), agent, &failed, None, &read, to)
}
