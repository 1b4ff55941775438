//! Custom metrics in a workflow: the metrics a run asked for, resolved once at the
//! command line's boundary, and the SQL metrics, which run over the rollouts table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use polars::prelude::DataFrame;

use crate::error::Result;
use crate::ingest::labels::runs;
use crate::ingest::{InputTable, RolloutTable};
use crate::json::Json;
use crate::metrics::custom::{self, MetricSpec};
use crate::metrics::warnings::Warnings;

/// Custom metrics to merge into each agent's metrics.
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// What to compute, in the order asked (built-in metrics and SQL metrics).
    pub specs: Vec<MetricSpec>,
    /// The SQL files the metrics came from: read by the run, so never an output.
    pub files: Vec<PathBuf>,
}

impl Metrics {
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The built-in metrics (computed by the aggregate per run).
    pub fn builtin(&self) -> Vec<MetricSpec> {
        self.specs.iter().filter(|m| !matches!(m, MetricSpec::Sql { .. })).cloned().collect()
    }

    /// The SQL metrics.
    pub fn sql(&self) -> Vec<&MetricSpec> {
        self.specs.iter().filter(|m| matches!(m, MetricSpec::Sql { .. })).collect()
    }

    /// Resolves metric names (built-ins first, then the SQL files of `metric_dir`),
    /// with the options of the built-ins; a SQL file a built-in hides is a warning.
    pub fn resolve(
        names: &[String],
        metric_dir: Option<&Path>,
        answer_key: Option<&str>,
        subset_key: Option<&str>,
        ddof: usize,
    ) -> Result<Metrics> {
        let sql = crate::query::metric_files(metric_dir)?;
        let mut specs = Vec::new();
        for name in names {
            if let Some(m) = custom::builtin(name, answer_key, subset_key, ddof)? {
                if let (Some(d), true) = (metric_dir, sql.iter().any(|(n, _)| n == name)) {
                    let file = d.join(format!("{name}.sql"));
                    if file.exists() {
                        super::warn(format!(
                            "{}: `{name}` is a built-in metric, which --metric {name} runs; rename the file to run it",
                            file.display()
                        ));
                    }
                }
                specs.push(m);
            } else if let Some((_, text)) = sql.iter().find(|(n, _)| n == name) {
                specs.push(MetricSpec::Sql { name: name.clone(), sql: text.clone() });
            } else {
                return Err(custom::unknown(name, &sql.iter().map(|s| s.0.clone()).collect::<Vec<_>>()));
            }
        }
        Ok(Metrics { specs, files: sql_files(metric_dir) })
    }
}

/// The SQL files of a metric folder, which outputs must not overwrite.
fn sql_files(metric_dir: Option<&Path>) -> Vec<PathBuf> {
    let Some(d) = metric_dir else { return Vec::new() };
    let Ok(rd) = std::fs::read_dir(d) else { return Vec::new() };
    rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "sql")).collect()
}

/// SQL metrics' `NAME/<column>` values, by label.
pub type SqlValues = HashMap<String, Vec<(String, Json)>>;

/// Runs SQL metrics over the measured rollouts; returns `NAME/<column>` values per
/// label, and the rollouts table they ran over, which a run that adds its tables to a
/// lake hands on (so the table is built once).
pub fn sql_metrics(
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    default_agent: Option<&str>,
    specs: &[&MetricSpec],
) -> Result<(SqlValues, DataFrame)> {
    let frame = crate::ingest::frame::rollouts_frame(t, &runs(t, inputs), default_agent)?;
    let mut out = SqlValues::new();
    for m in specs {
        if let MetricSpec::Sql { name, sql } = m {
            for (label, vals) in crate::query::run_metric(&frame, name, sql)? {
                out.entry(label).or_default().extend(vals);
            }
        }
    }
    Ok((out, frame))
}

/// Merges custom metrics into profile agent entries (by label), after their statistics;
/// returns the rollouts table SQL metrics ran over, if any did.
pub fn merge_into_profile(
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    specs: &[MetricSpec],
    agents: &mut [Json],
    warnings: &mut Warnings,
) -> Result<Option<DataFrame>> {
    let runs = runs(t, inputs);
    let sql: Vec<&MetricSpec> = specs.iter().filter(|m| matches!(m, MetricSpec::Sql { .. })).collect();
    let (sql_vals, frame) = if sql.is_empty() {
        (HashMap::new(), None)
    } else {
        sql_metrics(t, inputs, None, &sql).map(|(v, f)| (v, Some(f)))?
    };
    // Each label's measured rows, in table order, gathered in one pass.
    let mut rows_of: HashMap<&str, Vec<usize>> = HashMap::new();
    for r in (0..t.len()).filter(|&r| !t.masked[r]) {
        if let Some(l) = runs.label_of(r) {
            rows_of.entry(l).or_default().push(r);
        }
    }
    for e in agents.iter_mut() {
        let name = match e.get("agent_ref").and_then(|r| r.get("name")) {
            Some(Json::Str(s)) => s.clone(),
            _ => continue,
        };
        let Some(rows) = rows_of.get(name.as_str()) else { continue };
        let tasks = custom::tasks_of(t, rows);
        for m in specs {
            e.set_all(custom::compute(m, t, &tasks, warnings)?);
        }
        if let Some(vals) = sql_vals.get(&name) {
            e.set_all(vals.iter().map(|(k, v)| (k, v.clone())));
        }
    }
    Ok(frame)
}
