//! The result tables every SQL query and Parquet export sees: `rollouts` (one row per
//! rollout), `tasks` (one row per agent and task), `agents` (one row per agent) and
//! `repeats` (one row per agent and rollout index), as typed frames built from the same
//! results the aggregate file is written from, so the numbers agree to the bit.

use std::sync::Arc;

use polars::prelude::*;
use rayon::prelude::*;

use super::aggregate::{aggregate, AggEntry, AggregateOptions};
use super::failures::{labelled, Failed, Idx};
use super::warnings::Warnings;
use crate::error::Result;
use crate::ingest::frame::rollouts_frame;
use crate::ingest::labels::{runs, Runs};
use crate::ingest::{InputTable, RolloutTable};
use crate::json::{Json, Key};
use crate::schema;

/// Table names, in the order they are written and registered.
pub const NAMES: [&str; 4] = ["rollouts", "tasks", "agents", "repeats"];

/// The four result tables of one rollouts file.
pub struct Tables {
    pub rollouts: DataFrame,
    pub tasks: DataFrame,
    pub agents: DataFrame,
    pub repeats: DataFrame,
}

impl Tables {
    /// The tables by name, in [`NAMES`] order.
    pub fn named(self) -> Vec<(&'static str, DataFrame)> {
        vec![(NAMES[0], self.rollouts), (NAMES[1], self.tasks), (NAMES[2], self.agents), (NAMES[3], self.repeats)]
    }
}

/// Builds the four tables from a rollouts table (and its inputs, for run labels and
/// expected counts); `default_agent` labels rollouts that name no agent. The warnings
/// are the aggregate's (rollouts left out for want of an input row, among others).
/// `failed` are the run's standing failures without a result (from its failures
/// sidecars), counted per task and per agent in the `failures` columns. `rollouts` is
/// the rollouts table when the run built it already (for its SQL metrics).
pub fn tables(
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    default_agent: Option<&str>,
    failed: &[Failed],
    rollouts: Option<DataFrame>,
) -> Result<(Tables, Warnings)> {
    let rollouts = match rollouts {
        Some(df) => df,
        None => rollouts_frame(t, &runs(t, inputs), default_agent)?,
    };
    let ((tasks, agents, repeats), warnings) = levels(t, inputs, default_agent, failed)?;
    Ok((Tables { rollouts, tasks, agents, repeats }, warnings))
}

/// The tasks, agents and repeats tables of [`tables`] alone, without the rollouts table.
pub fn levels(
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    default_agent: Option<&str>,
    failed: &[Failed],
) -> Result<((DataFrame, DataFrame, DataFrame), Warnings)> {
    levels_with(t, inputs, default_agent, failed, &|_| true)
}

/// [`levels`] with only the `tasks` columns that `keep` accepts (and `agent` and
/// `_ng_task_index`, which every row is named by): a caller that needs a few columns of a
/// million tasks does not build the others.
pub fn levels_with(
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    default_agent: Option<&str>,
    failed: &[Failed],
    keep: &(dyn Fn(&str) -> bool + Sync),
) -> Result<((DataFrame, DataFrame, DataFrame), Warnings)> {
    let run_of = runs(t, inputs);
    let opts = AggregateOptions { default_agent: default_agent.map(str::to_string), ..Default::default() };
    let (entries, warnings) = aggregate(t, inputs, &opts)?;
    let keep_task = |k: &str| k == schema::AGENT || k == schema::TASK_INDEX || keep(k);
    let (mut tasks, mut agents, repeats) = level_tables(&entries, &keep_task)?;
    if keep_task(schema::TASK_FINGERPRINT) {
        with_fingerprints(&mut tasks, t)?;
    }
    with_failures(&mut tasks, &mut agents, &run_of, failed, keep_task(schema::FAILURES))?;
    Ok(((tasks, agents, repeats), warnings))
}

/// Fills the `failures` columns: per task (tasks table) and per run (agents table), the
/// failed attempts that stand without a result. A failure belongs to the run whose key
/// is its group (server, else agent); a run with no result at all keeps its group's name.
/// The tasks table gets its column only `per_task`.
fn with_failures(
    tasks: &mut DataFrame,
    agents: &mut DataFrame,
    run_of: &Runs,
    failed: &[Failed],
    per_task: bool,
) -> Result<()> {
    use std::collections::HashMap;
    let mut of_task: HashMap<(&str, i64), i64> = HashMap::new();
    let mut per_run: HashMap<&str, i64> = HashMap::new();
    for (label, (_, task, _)) in labelled(failed, run_of) {
        *per_run.entry(label).or_default() += 1;
        if let Idx::Int(task) = task {
            *of_task.entry((label, *task)).or_default() += 1;
        }
    }
    if per_task {
        let labels = tasks.column(schema::AGENT)?.str()?.clone();
        let index = tasks.column(schema::TASK_INDEX)?.cast(&DataType::Int64)?;
        let counts: Int64Chunked = labels
            .iter()
            .zip(index.i64()?.iter())
            .map(|(l, t)| Some(l.zip(t).and_then(|k| of_task.get(&k)).copied().unwrap_or(0)))
            .collect();
        tasks.with_column(counts.with_name(schema::FAILURES.into()).into_column())?;
    }
    let labels = agents.column(schema::AGENT)?.str()?.clone();
    let counts: Int64Chunked =
        labels.iter().map(|l| Some(l.and_then(|l| per_run.get(l)).copied().unwrap_or(0))).collect();
    agents.with_column(counts.with_name(schema::FAILURES.into()).into_column())?;
    Ok(())
}

/// Fills the tasks table's `task_fingerprint`: each task's fingerprint (the first of its
/// rows that has one, see [`crate::ingest::fingerprint`]) as 16 hex digits, null where
/// no row has one. SQL joins runs across sweeps on it rather than on position.
fn with_fingerprints(tasks: &mut DataFrame, t: &RolloutTable) -> Result<()> {
    let mut of_task: std::collections::HashMap<i64, u64> = std::collections::HashMap::new();
    for (&task, &fp) in t.task.iter().zip(t.fingerprints()) {
        if fp != 0 {
            of_task.entry(task).or_insert(fp);
        }
    }
    let index = tasks.column(schema::TASK_INDEX)?.cast(&DataType::Int64)?;
    let hex: StringChunked =
        index.i64()?.iter().map(|t| t.and_then(|t| of_task.get(&t)).map(|fp| format!("{fp:016x}"))).collect();
    tasks.with_column(hex.with_name(schema::TASK_FINGERPRINT.into()).into_column())?;
    Ok(())
}

/// Turns JSON objects (all with scalar values of interest) into a frame: columns in
/// order of first appearance; ints stay Int64 when every value is an int; strings are
/// String; objects and arrays are left out. Rows mostly list their keys in one order, so
/// a key is first compared with the key at its place in the row before.
pub fn objects_to_frame<K: AsRef<str>>(rows: &[Vec<(K, Json)>]) -> Result<DataFrame> {
    let mut names: Vec<&str> = Vec::new();
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    // Per row, per member: its column (usize::MAX: an object or array under a name that
    // no scalar has had yet).
    let mut slots: Vec<Vec<usize>> = Vec::with_capacity(rows.len());
    for (row, r) in rows.iter().enumerate() {
        let prev = row.checked_sub(1).map(|p| (&rows[p], &slots[p]));
        let mut at = Vec::with_capacity(r.len());
        for (i, (k, v)) in r.iter().enumerate() {
            let k = k.as_ref();
            let cached = match prev {
                Some((p, s)) if p.get(i).is_some_and(|(pk, _)| pk.as_ref() == k) => s[i],
                _ => usize::MAX,
            };
            let mut c = if cached != usize::MAX { cached } else { index.get(k).copied().unwrap_or(usize::MAX) };
            if c == usize::MAX && !matches!(v, Json::Obj(_) | Json::Arr(_)) {
                c = names.len();
                names.push(k);
                index.insert(k, c);
            }
            at.push(c);
        }
        slots.push(at);
    }
    // An object or array under a name that is a column (from a later row) is a cell of it.
    for (r, at) in rows.iter().zip(slots.iter_mut()) {
        for ((k, _), c) in r.iter().zip(at.iter_mut()) {
            if *c == usize::MAX {
                *c = index.get(k.as_ref()).copied().unwrap_or(usize::MAX);
            }
        }
    }
    let n = rows.len();
    let mut cells: Vec<Vec<Option<&Json>>> = vec![vec![None; n]; names.len()];
    for (row, (r, at)) in rows.iter().zip(&slots).enumerate() {
        for ((_, v), &c) in r.iter().zip(at) {
            if c != usize::MAX {
                cells[c][row] = Some(v);
            }
        }
    }
    let cols = names.par_iter().zip(cells.into_par_iter()).map(|(name, vals)| {
        let all_int = vals.iter().all(|v| matches!(v, None | Some(Json::Int(_)) | Some(Json::Null)));
        let any_str = vals.iter().any(|v| matches!(v, Some(Json::Str(_))));
        let name: PlSmallStr = (*name).into();
        if any_str {
            let v: StringChunked = vals
                .iter()
                .map(|v| match v {
                    Some(Json::Str(s)) => Some(s.as_str()),
                    _ => None,
                })
                .collect();
            v.with_name(name).into_column()
        } else if all_int {
            let v: Int64Chunked = vals
                .iter()
                .map(|v| match v {
                    Some(Json::Int(i)) => Some(*i),
                    _ => None,
                })
                .collect();
            v.with_name(name).into_column()
        } else {
            let v: Float64Chunked = vals.iter().map(|v| v.and_then(|j| j.as_f64())).collect();
            v.with_name(name).into_column()
        }
    });
    Ok(DataFrame::new(n, cols.collect())?)
}

/// The `tasks`, `agents` and `repeats` tables from aggregate entries; the `tasks` table
/// with the columns `keep` accepts.
pub fn level_tables(
    entries: &[AggEntry<'_>],
    keep: &(dyn Fn(&str) -> bool + Sync),
) -> Result<(DataFrame, DataFrame, DataFrame)> {
    let mut tasks = Vec::new();
    let mut agents = Vec::new();
    let mut repeats = Vec::new();
    for e in entries {
        let agent: Key = Arc::from(schema::AGENT);
        let label = e.label().to_string();
        let head = || vec![(agent.clone(), Json::Str(label.clone()))];
        if let Some(Json::Obj(items)) = e.member("agent_metrics") {
            let mut row = head();
            row.extend(items.iter().cloned());
            agents.push(row);
        }
        if let Some(plan) = &e.tasks {
            tasks.extend(plan.members(keep).into_iter().map(|m| {
                let mut row = head();
                row.extend(m);
                row
            }));
        }
        for g in &e.repeats {
            if let Json::Obj(items) = g {
                let mut row = head();
                row.extend(items.iter().cloned());
                repeats.push(row);
            }
        }
    }
    // Columns every table has, also with no rows or with one repeat (no across-repeat
    // statistics), so that queries and readers that need a schema find one.
    let fixed: Vec<schema::Fixed> = schema::TASKS.into_iter().filter(|c| keep(c.name)).collect();
    let tasks = with_columns(objects_to_frame(&tasks)?, &fixed)?;
    let agents = with_columns(objects_to_frame(&agents)?, &schema::AGENTS)?;
    let repeats = with_columns(objects_to_frame(&repeats)?, &schema::REPEATS)?;
    Ok((tasks, agents, repeats))
}

/// `df` with each of the fixed columns it lacks added as an all-null column of its type.
fn with_columns(mut df: DataFrame, cols: &[schema::Fixed]) -> Result<DataFrame> {
    let n = df.height();
    for c in cols {
        if df.column(c.name).is_err() {
            df.with_column(Column::full_null(c.name.into(), n, &c.dtype.dtype()))?;
        }
    }
    Ok(df)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(items: &[(&str, Json)]) -> Vec<(String, Json)> {
        items.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
    }

    #[test]
    fn columns_come_in_order_of_first_scalar_and_keep_their_types() {
        let obj = Json::Obj(vec![]);
        let rows = vec![
            row(&[("a", Json::Int(1)), ("o", obj.clone()), ("b", Json::Float(0.5))]),
            // Another key order, a key given twice (the last counts), a new key.
            row(&[("b", Json::Int(2)), ("a", Json::Int(3)), ("a", Json::Int(4)), ("c", Json::Str("x".into()))]),
            // An object under a name that is a column: a cell of it, which is no integer.
            row(&[("o", Json::Int(7)), ("c", Json::Null)]),
            row(&[("a", Json::Null), ("i", Json::Int(5)), ("o", obj)]),
        ];
        let df = objects_to_frame(&rows).unwrap();
        let names: Vec<&str> = df.get_column_names().into_iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "o", "i"]);
        let a: Vec<Option<i64>> = df.column("a").unwrap().i64().unwrap().iter().collect();
        assert_eq!(a, [Some(1), Some(4), None, None]);
        let b: Vec<Option<f64>> = df.column("b").unwrap().f64().unwrap().iter().collect();
        assert_eq!(b, [Some(0.5), Some(2.0), None, None]);
        let c: Vec<Option<&str>> = df.column("c").unwrap().str().unwrap().iter().collect();
        assert_eq!(c, [None, Some("x"), None, None]);
        let o: Vec<Option<f64>> = df.column("o").unwrap().f64().unwrap().iter().collect();
        assert_eq!(o, [None, None, Some(7.0), None]);
        assert_eq!(df.column("i").unwrap().dtype(), &DataType::Int64);
    }
}
