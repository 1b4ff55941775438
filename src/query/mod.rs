//! SQL over rollstat's tables with Polars SQL: `rollouts` (one row per rollout),
//! `tasks` (one row per agent and task), `agents` (one row per agent) and `repeats`
//! (one row per agent and rollout index). Also runs SQL metrics — the files of
//! `queries/metrics/` (built into the binary) and of a user's `--metric-dir`.

pub mod lake;

use std::path::Path;

use polars::prelude::*;
use polars::sql::SQLContext;

use crate::error::{Error, Result};
use crate::json::Json;

/// The SQL metrics shipped with rollstat (`queries/metrics/*.sql`).
pub const BUILTIN_SQL_METRICS: [(&str, &str); 4] = [
    ("reward_variance_sql", include_str!("../../queries/metrics/reward_variance.sql")),
    ("frac_reward_zero_std", include_str!("../../queries/metrics/frac_reward_zero_std.sql")),
    ("mean_reward_by_subset", include_str!("../../queries/metrics/mean_reward_by_subset.sql")),
    ("pass_at_1", include_str!("../../queries/metrics/pass_at_1.sql")),
];

/// Example report queries (`queries/*.sql`), by name.
pub const REPORTS: [(&str, &str); 4] = [
    ("leaderboard", include_str!("../../queries/leaderboard.sql")),
    ("hardest_tasks", include_str!("../../queries/hardest_tasks.sql")),
    ("token_cost", include_str!("../../queries/token_cost.sql")),
    ("task_slices", include_str!("../../queries/task_slices.sql")),
];

/// Report queries over a lake of sweeps (`queries/lake/*.sql`), by name.
pub const LAKE_REPORTS: [(&str, &str); 2] = [
    ("sweep_leaderboard", include_str!("../../queries/lake/sweep_leaderboard.sql")),
    ("sweep_flips", include_str!("../../queries/lake/sweep_flips.sql")),
];

/// SQL metrics by name: the built-in ones, then `dir/*.sql` (a user's file replaces a
/// built-in of the same name). The built-in `reward_variance.sql` is registered as
/// `reward_variance_sql` so it does not shadow the built-in Rust metric.
pub fn metric_files(dir: Option<&Path>) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> =
        BUILTIN_SQL_METRICS.iter().map(|(n, s)| (n.to_string(), s.to_string())).collect();
    if let Some(d) = dir {
        let rd = std::fs::read_dir(d).map_err(|e| Error::read(d, e))?;
        let mut files: Vec<_> =
            rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "sql")).collect();
        files.sort();
        for p in files {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).map_err(|e| Error::read(&p, e))?;
            out.retain(|(n, _)| *n != name);
            out.push((name, text));
        }
    }
    Ok(out)
}

/// Runs SQL with the given tables registered by name (frames in memory, or Parquet
/// scans that read only what the query needs).
///
/// With a `rollouts` table, `measured_rollouts` is registered beside it: the rollouts the
/// statistics count (`mask_sample` false). `rollouts` keeps the masked ones, so
/// `AVG(output_tokens)` over it differs from `mean/output_tokens` when something is masked.
pub fn run_sql(tables: Vec<(&str, LazyFrame)>, sql: &str) -> Result<DataFrame> {
    let mut ctx = SQLContext::new();
    for (name, lf) in tables {
        if name == "rollouts" {
            ctx.register("measured_rollouts", lf.clone().filter(col("mask_sample").not()));
        }
        ctx.register(name, lf);
    }
    let lf = ctx.execute(sql).map_err(|e| Error::Query(e.to_string()))?;
    lf.collect().map_err(|e| Error::Query(e.to_string()))
}

/// One label's named values.
pub type LabelledValues = (String, Vec<(String, Json)>);

/// Runs one SQL metric over the rollouts frame: one row per `agent`, numeric columns
/// merged as `NAME/<column>`.
pub fn run_metric(rollouts: &DataFrame, name: &str, sql: &str) -> Result<Vec<LabelledValues>> {
    let df = run_sql(vec![("rollouts", rollouts.clone().lazy())], sql)
        .map_err(|e| Error::Query(format!("metric {name}: {e}")))?;
    let agent = df
        .column("agent")
        .map_err(|_| Error::Query(format!("metric {name}: the query must return a column named `agent`")))?
        .cast(&DataType::String)?;
    let agent = agent.str()?.clone();
    // A metric is one number per agent: a column of text, or an agent on two rows (a
    // missing GROUP BY), would otherwise lose values without a word.
    for c in df.columns() {
        let dt = c.dtype();
        if c.name().as_str() != "agent"
            && !(dt.is_integer() || dt.is_float() || *dt == DataType::Boolean || *dt == DataType::Null)
        {
            return Err(Error::Query(format!(
                "metric {name}: column `{}` is {dt}; a metric's values must be numbers or booleans",
                c.name()
            )));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for label in agent.iter().flatten() {
        if !seen.insert(label) {
            return Err(Error::Query(format!(
                "metric {name}: agent `{label}` is on more than one row; a metric returns one row per agent (GROUP BY agent)"
            )));
        }
    }
    let mut out = Vec::new();
    for i in 0..df.height() {
        let Some(label) = agent.get(i) else { continue };
        let mut vals = Vec::new();
        for c in df.columns() {
            if c.name().as_str() == "agent" {
                continue;
            }
            let v = match c.dtype() {
                dt if dt.is_integer() => c.cast(&DataType::Int64)?.i64()?.get(i).map(Json::Int),
                dt if dt.is_float() => c.cast(&DataType::Float64)?.f64()?.get(i).map(Json::Float),
                DataType::Boolean => c.bool()?.get(i).map(|b| Json::Int(i64::from(b))),
                _ => None,
            };
            vals.push((format!("{name}/{}", c.name()), v.unwrap_or(Json::Null)));
        }
        out.push((label.to_string(), vals));
    }
    Ok(out)
}
