//! The query workflow: Polars SQL over the `rollouts`, `tasks`, `agents` and `repeats`
//! tables, built from rollouts files, read from a folder of exported Parquet tables, or
//! read from a lake of sweeps. The query is SQL text, a `.sql` file, or the name of a
//! bundled report (`leaderboard`, `hardest_tasks`, `token_cost`, `task_slices`).

use std::path::PathBuf;

use polars::prelude::*;

use crate::error::{Error, Msg, Opt, Result};
use crate::metrics::warnings::Warnings;

/// The query and the tables it runs over: rollouts files (with their inputs), an
/// export folder or a lake; exactly one of them.
#[derive(Debug, Clone, Default)]
pub struct QueryConfig {
    /// SQL text, a `.sql` file, or a bundled report's name.
    pub query: String,
    /// Rollouts files to build the tables from (one run, read as one).
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL (for run labels).
    pub inputs: Option<PathBuf>,
    /// Label for rollouts that name no agent.
    pub agent: Option<String>,
    /// Folder with `rollouts/tasks/agents/repeats.parquet` from `export`.
    pub parquet_dir: Option<PathBuf>,
    /// A lake of sweeps: the tables hold every sweep, beside a `sweeps` table.
    pub lake: Option<PathBuf>,
}

impl QueryConfig {
    /// The files the query reads, which its output must not overwrite.
    pub fn files_read(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.rollouts.iter().chain(&self.inputs).cloned().collect();
        if let Some(dir) = &self.parquet_dir {
            v.extend(["rollouts", "tasks", "agents", "repeats"].map(|n| dir.join(format!("{n}.parquet"))));
        }
        if let Some(dir) = &self.lake {
            v.extend(crate::export::lake::files(dir));
        }
        if !crate::query::REPORTS.iter().chain(&crate::query::LAKE_REPORTS).any(|(n, _)| *n == self.query) {
            v.push(PathBuf::from(&self.query));
        }
        v
    }
}

/// The query text for SQL_OR_FILE.
pub fn query_text(q: &str, lake: bool) -> Result<String> {
    if let Some((_, s)) = crate::query::REPORTS.iter().find(|(n, _)| *n == q) {
        return Ok(s.to_string());
    }
    if let Some((_, s)) = crate::query::LAKE_REPORTS.iter().find(|(n, _)| *n == q) {
        if !lake {
            let msg = Msg::default().text(format!("{q} is a query over a lake of sweeps: give "));
            return Err(Error::refused(None, msg.opt(Opt::value("lake", "DIR"))));
        }
        return Ok(s.to_string());
    }
    let p = std::path::Path::new(q);
    if q.ends_with(".sql") || (p.is_file() && !q.contains(' ')) {
        return std::fs::read_to_string(p).map_err(|e| Error::read(p, e));
    }
    // One bare word is a report name (or a file) mistyped, not SQL.
    if !q.trim().is_empty() && q.trim().chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')) {
        let known: Vec<&str> =
            crate::query::REPORTS.iter().chain(&crate::query::LAKE_REPORTS).map(|(n, _)| *n).collect();
        return Err(Error::Usage(format!("{q:?} is neither a bundled report ({}), a file, nor SQL", known.join(", "))));
    }
    Ok(q.to_string())
}

/// Runs the query; returns its result and the warnings of building the tables.
pub fn query(c: &QueryConfig) -> Result<(DataFrame, Warnings)> {
    let sql = query_text(&c.query, c.lake.is_some())?;
    let mut warnings = Warnings::default();
    let tables: Vec<(&str, LazyFrame)> = if let Some(dir) = &c.lake {
        crate::query::lake::Lake::open(dir)?.tables()?
    } else if let Some(dir) = &c.parquet_dir {
        let mut v = Vec::new();
        for name in ["rollouts", "tasks", "agents", "repeats"] {
            let p = dir.join(format!("{name}.parquet"));
            if p.exists() {
                v.push((name, crate::ingest::parquet::scan_parquet(&p)?));
            }
        }
        if v.is_empty() {
            let msg = Msg::default()
                .text(format!("{}: no rollouts/tasks/agents/repeats.parquet here (write them with ", dir.display()))
                .per_door("`rollstat export`", "`rollstat.export`")
                .text(")");
            return Err(Error::refused(None, msg));
        }
        v
    } else if !c.rollouts.is_empty() {
        let (tables, w) = super::tables(&c.rollouts, c.inputs.as_deref(), c.agent.as_deref())?;
        warnings = w;
        tables.into_iter().map(|(n, df)| (n, df.lazy())).collect()
    } else {
        let msg = Msg::default()
            .text("give ")
            .opt(Opt::value("rollouts", "FILE"))
            .text(", ")
            .opt(Opt::value("parquet_dir", "DIR"))
            .text(" or ")
            .opt(Opt::value("lake", "DIR"));
        return Err(Error::refused(None, msg));
    };
    Ok((crate::query::run_sql(tables, &sql)?, warnings))
}
