//! The rollout table as a Polars `DataFrame` — the `rollouts` table of the Parquet
//! export and of SQL queries.
//!
//! Schema (in this order):
//! - `_ng_task_index` (Int64), `_ng_rollout_index` (Int64)
//! - `run_key` (String, null when nothing names the run), `agent` (String: the run label)
//! - `mask_sample` (Boolean)
//! - every numeric field in field order: Int64 when every present value is an
//!   int or bool, else Float64; null where the field is missing (or not a number)
//! - every short top-level string field (no numeric values anywhere): String, in order
//!   of first appearance over the rows in (task, rollout) order

use polars::prelude::*;

use crate::schema::ROLLOUTS;

use super::fields::discover_fields;
use super::labels::Runs;
use super::table::{tag, Source};
use super::RolloutTable;

/// Builds the rollouts frame from the runs; `default_agent` labels rollouts
/// that name no agent.
pub fn rollouts_frame(t: &RolloutTable, runs: &Runs, default_agent: Option<&str>) -> PolarsResult<DataFrame> {
    let n = t.len();
    let run_keys: Vec<Option<&str>> = (0..n).map(|r| runs.key_of(r)).collect();
    let labels: Vec<Option<&str>> = (0..n).map(|r| runs.label_of(r).or(default_agent)).collect();
    let mut cols: Vec<Column> = vec![
        Column::new(ROLLOUTS[0].name.into(), t.task.clone()),
        Column::new(ROLLOUTS[1].name.into(), t.rollout.clone()),
        Column::new(ROLLOUTS[2].name.into(), run_keys),
        Column::new(ROLLOUTS[3].name.into(), labels),
        Column::new(ROLLOUTS[4].name.into(), t.masked.clone()),
    ];
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_unstable_by_key(|&r| (t.task[r], t.rollout[r]));
    let fields = discover_fields(t, &order);
    let mut taken: std::collections::HashSet<String> = ROLLOUTS.iter().map(|c| c.name.to_string()).collect();
    let own = taken.clone();
    let clash = |name: &str| {
        if own.contains(name) {
            crate::warn::say(format!(
                "{}: field `{name}` has the name of one of the rollouts table's own columns and is left out of the table",
                t.lines.name()
            ));
        }
    };
    for f in &fields {
        if !taken.insert(f.name.clone()) {
            clash(&f.name);
            continue;
        }
        let mut all_int = true;
        let mut vals: Vec<Option<f64>> = Vec::with_capacity(n);
        for r in 0..n {
            let (tg, x) = f.at(t, r);
            if tag::is_numeric(tg) {
                if tg == tag::FLOAT {
                    all_int = false;
                }
                vals.push(Some(x));
            } else {
                vals.push(None);
            }
        }
        if all_int {
            let v: Vec<Option<i64>> = vals.iter().enumerate().map(|(r, o)| o.map(|_| f.int(t, r))).collect();
            cols.push(Column::new(f.name.as_str().into(), v));
        } else {
            cols.push(Column::new(f.name.as_str().into(), vals));
        }
    }
    // String fields in order of first appearance over the rows in (task, rollout)
    // order, as the numeric fields, then in that row's key order: the same for the
    // files in any order of lines, and for slices read back bucket by bucket.
    let pos = |r: usize, id: usize| -> usize {
        t.orders.get(t.order[r] as usize).and_then(|o| o.iter().position(|&c| c as usize == id)).unwrap_or(usize::MAX)
    };
    let mut strings: Vec<((usize, usize), &super::table::Column)> = t
        .columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.source == Source::Top && !c.has_numbers() && !c.codes.is_empty())
        .map(|(id, c)| {
            let first = order.iter().position(|&r| c.tags[r] != tag::ABSENT);
            let key = first.map_or((usize::MAX, usize::MAX), |k| (k, pos(order[k], id)));
            (key, c)
        })
        .collect();
    strings.sort_by_key(|&(key, _)| key);
    for (_, c) in strings {
        if taken.contains(&c.name) {
            clash(&c.name);
            continue;
        }
        taken.insert(c.name.clone());
        let v: Vec<Option<&str>> = (0..n).map(|r| c.str_at(r)).collect();
        cols.push(Column::new(c.name.as_str().into(), v));
    }
    DataFrame::new(n, cols)
}
