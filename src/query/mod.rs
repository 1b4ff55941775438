//! SQL over rollstat's tables with Polars SQL: `rollouts` (one row per rollout),
//! `tasks` (one row per agent and task), `agents` (one row per agent) and `repeats`
//! (one row per agent and rollout index). Also runs SQL metrics — the files of
//! `queries/metrics/` (built into the binary) and of a user's `--metric-dir`.

use std::path::Path;

use polars::prelude::*;
use polars::sql::SQLContext;

use crate::error::{Error, Result};
use crate::export::json::Json;
use crate::metrics::aggregate::AggEntry;

/// The SQL metrics shipped with rollstat (`queries/metrics/*.sql`).
pub const BUILTIN_SQL_METRICS: [(&str, &str); 4] = [
    ("reward_variance_sql", include_str!("../../queries/metrics/reward_variance.sql")),
    ("frac_reward_zero_std", include_str!("../../queries/metrics/frac_reward_zero_std.sql")),
    ("mean_reward_by_subset", include_str!("../../queries/metrics/mean_reward_by_subset.sql")),
    ("pass_at_1", include_str!("../../queries/metrics/pass_at_1.sql")),
];

/// Example report queries (`queries/*.sql`), by name.
pub const REPORTS: [(&str, &str); 3] = [
    ("leaderboard", include_str!("../../queries/leaderboard.sql")),
    ("hardest_tasks", include_str!("../../queries/hardest_tasks.sql")),
    ("token_cost", include_str!("../../queries/token_cost.sql")),
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

/// Runs SQL with the given tables registered by name.
pub fn run_sql(tables: &[(&str, DataFrame)], sql: &str) -> Result<DataFrame> {
    let mut ctx = SQLContext::new();
    for (name, df) in tables {
        ctx.register(name, df.clone().lazy());
    }
    let lf = ctx.execute(sql).map_err(|e| Error::Query(e.to_string()))?;
    lf.collect().map_err(|e| Error::Query(e.to_string()))
}

/// One label's named values.
pub type LabelledValues = (String, Vec<(String, Json)>);

/// Runs one SQL metric over the rollouts frame: one row per `agent`, numeric columns
/// merged as `NAME/<column>`.
pub fn run_metric(rollouts: &DataFrame, name: &str, sql: &str) -> Result<Vec<LabelledValues>> {
    let df =
        run_sql(&[("rollouts", rollouts.clone())], sql).map_err(|e| Error::Query(format!("metric {name}: {e}")))?;
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

/// Turns JSON objects (all with scalar values of interest) into a frame: columns in
/// order of first appearance; ints stay Int64 when every value is an int; strings are
/// String; objects and arrays are left out.
pub fn objects_to_frame(rows: &[Vec<(String, Json)>]) -> Result<DataFrame> {
    let mut names: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for r in rows {
        for (k, v) in r {
            if matches!(v, Json::Obj(_) | Json::Arr(_)) {
                continue;
            }
            if seen.insert(k.clone()) {
                names.push(k.clone());
            }
        }
    }
    let n = rows.len();
    let index: Vec<std::collections::HashMap<&str, &Json>> =
        rows.iter().map(|r| r.iter().map(|(k, v)| (k.as_str(), v)).collect()).collect();
    let mut cols = Vec::new();
    for name in &names {
        let vals: Vec<Option<&Json>> = index.iter().map(|m| m.get(name.as_str()).copied()).collect();
        let all_int = vals.iter().all(|v| matches!(v, None | Some(Json::Int(_)) | Some(Json::Null)));
        let any_str = vals.iter().any(|v| matches!(v, Some(Json::Str(_))));
        let col = if any_str {
            let v: Vec<Option<String>> = vals
                .iter()
                .map(|v| match v {
                    Some(Json::Str(s)) => Some(s.clone()),
                    _ => None,
                })
                .collect();
            Column::new(name.as_str().into(), v)
        } else if all_int {
            let v: Vec<Option<i64>> = vals
                .iter()
                .map(|v| match v {
                    Some(Json::Int(i)) => Some(*i),
                    _ => None,
                })
                .collect();
            Column::new(name.as_str().into(), v)
        } else {
            let v: Vec<Option<f64>> = vals.iter().map(|v| v.and_then(|j| j.as_f64())).collect();
            Column::new(name.as_str().into(), v)
        };
        cols.push(col);
    }
    Ok(DataFrame::new(n, cols)?)
}

/// The `tasks`, `agents` and `repeats` tables from aggregate entries.
pub fn level_tables(entries: &[AggEntry<'_>]) -> Result<(DataFrame, DataFrame, DataFrame)> {
    let mut tasks = Vec::new();
    let mut agents = Vec::new();
    let mut repeats = Vec::new();
    for e in entries {
        let label = e.label().to_string();
        let head = || vec![("agent".to_string(), Json::Str(label.clone()))];
        if let Some(Json::Obj(items)) = e.member("agent_metrics") {
            let mut row = head();
            row.extend(items.iter().map(|(k, v)| (k.to_string(), v.clone())));
            agents.push(row);
        }
        if let Some(plan) = &e.tasks {
            for m in plan.members() {
                let mut row = head();
                row.extend(m.into_iter().map(|(k, v)| (k.to_string(), v)));
                tasks.push(row);
            }
        }
        for g in &e.repeats {
            if let Json::Obj(items) = g {
                let mut row = head();
                row.extend(items.iter().map(|(k, v)| (k.to_string(), v.clone())));
                repeats.push(row);
            }
        }
    }
    // Columns every table has, also with no rows or with one repeat (no across-repeat
    // statistics), so that queries and readers that need a schema find one.
    let tasks = with_columns(
        objects_to_frame(&tasks)?,
        &[
            ("agent", DataType::String),
            ("_ng_task_index", DataType::Int64),
            ("mean/reward", DataType::Float64),
            ("num_rollouts", DataType::Int64),
            ("expected_num_rollouts", DataType::Int64),
            ("missing_num_rollouts", DataType::Int64),
        ],
    )?;
    let agents = with_columns(
        objects_to_frame(&agents)?,
        &[
            ("agent", DataType::String),
            ("mean/reward", DataType::Float64),
            ("mean_across_repeats/mean/reward", DataType::Float64),
            ("ci_low_95_across_repeats/mean/reward", DataType::Float64),
            ("ci_high_95_across_repeats/mean/reward", DataType::Float64),
            ("num_repeats", DataType::Int64),
        ],
    )?;
    let repeats = with_columns(
        objects_to_frame(&repeats)?,
        &[
            ("agent", DataType::String),
            ("_ng_rollout_index", DataType::Int64),
            ("sample_count", DataType::Int64),
            ("missing_count", DataType::Int64),
        ],
    )?;
    Ok((tasks, agents, repeats))
}

/// `df` with each of `cols` it lacks added as an all-null column of the given type.
fn with_columns(mut df: DataFrame, cols: &[(&str, DataType)]) -> Result<DataFrame> {
    let n = df.height();
    for (name, dt) in cols {
        if df.column(name).is_err() {
            df.with_column(Column::full_null((*name).into(), n, dt))?;
        }
    }
    Ok(df)
}
