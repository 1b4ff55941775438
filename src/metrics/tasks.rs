//! The task level as a *spec*: the profiled set, its task groups and what each task
//! entry carries besides statistics. Entries are computed and serialized batch by batch
//! by `export::tasks`, so a million-rollout profile never holds its task entries (or
//! their `sample` rows) in memory at once.

use std::sync::Arc;

use super::levels::{describe, describe_stats, int_extremes, Profiled, StatKeys};
use crate::ingest::rollouts::SEP;
use crate::ingest::{tag, InputTable, RolloutTable};
use crate::json::{Json, Members};

/// Where each task entry's `sample` comes from.
pub enum Samples<'a> {
    /// The same value for every task (aggregate: `{"agent_ref": {"name": "agent"}}`).
    Fixed(Json),
    /// The input row (index into the table) of each group's first measured rollout.
    Inputs { table: &'a InputTable, rows: Vec<usize> },
}

/// Everything needed to write the task entries of one profiled set.
pub struct TaskSpec<'a> {
    pub p: Profiled<'a>,
    pub keys: StatKeys,
    /// Position ranges of `p`, one per task entry, in output order.
    pub groups: Vec<(usize, usize)>,
    /// Expected rollouts per group; `None` means "as many as were measured".
    pub expected: Option<Vec<i64>>,
    pub samples: Samples<'a>,
    pub with_agent_ref: bool,
    /// Per key order of the table, how its rows write `rollout_infos`.
    pub info: std::sync::Arc<Vec<InfoSpec>>,
    /// Per column of the table, its name JSON-quoted (the `rollout_infos` keys).
    pub quoted_names: std::sync::Arc<Vec<Vec<u8>>>,
}

impl TaskSpec<'_> {
    /// The five describe statistics per field for group `g`.
    pub fn stats(&self, g: usize, scratch: &mut Vec<f64>) -> Vec<[Option<f64>; 5]> {
        let (a, b) = self.groups[g];
        let cols: Vec<&[f64]> = self.p.vals.iter().map(|v| &v[a..b]).collect();
        describe_stats(&cols, scratch)
    }

    /// In an all-int profile, the exact `max` (s = 1) or `min` (s = 2) of field `f` in
    /// group `g`; `None` for other statistics or when some value is a float.
    pub fn int_extreme(&self, g: usize, f: usize, s: usize) -> Option<i64> {
        if !self.p.all_int || !(s == 1 || s == 2) {
            return None;
        }
        let (a, b) = self.groups[g];
        let (hi, lo) = int_extremes(&self.p.ints[f][a..b]);
        Some(if s == 1 { hi } else { lo })
    }

    pub fn expected(&self, g: usize) -> i64 {
        let (a, b) = self.groups[g];
        match &self.expected {
            Some(e) => e[g],
            None => (b - a) as i64,
        }
    }

    /// Each entry's scalar members (no `sample`, no `rollout_infos`) that `keep` accepts,
    /// for tables; entries are computed in parallel, and only the statistics of fields
    /// with a member kept (a field's statistics do not depend on the other fields').
    pub fn members(&self, keep: &(dyn Fn(&str) -> bool + Sync)) -> Vec<Members> {
        use rayon::prelude::*;
        let fields: Vec<usize> =
            (0..self.keys.keys.len()).filter(|&f| self.keys.keys[f].iter().any(|k| keep(k))).collect();
        let keys = StatKeys {
            keys: fields.iter().map(|&f| self.keys.keys[f].clone()).collect(),
            quoted: fields.iter().map(|&f| self.keys.quoted[f].clone()).collect(),
        };
        let dropped: Vec<&Arc<str>> = keys.keys.iter().flatten().filter(|k| !keep(k)).collect();
        let counts = ["num_rollouts", "expected_num_rollouts", "missing_num_rollouts"].map(|k| keep(k).then_some(k));
        let index = keep("_ng_task_index");
        (0..self.groups.len())
            .into_par_iter()
            .map_init(Vec::new, |scratch, g| {
                let (a, b) = self.groups[g];
                let mut m: Members = Vec::new();
                if index {
                    m.push((Arc::from("_ng_task_index"), Json::Int(self.p.task(a))));
                }
                let cols: Vec<&[f64]> = fields.iter().map(|&f| &self.p.vals[f][a..b]).collect();
                let ints: Option<Vec<&[i64]>> =
                    self.p.all_int.then(|| fields.iter().map(|&f| &self.p.ints[f][a..b]).collect());
                describe(&cols, &keys, ints.as_deref(), &mut m, scratch);
                if !dropped.is_empty() {
                    m.retain(|(k, _)| !dropped.iter().any(|d| Arc::ptr_eq(d, k)));
                }
                let n = (b - a) as i64;
                let e = self.expected(g);
                for (k, v) in counts.iter().zip([n, e, e - n]) {
                    if let Some(k) = k {
                        m.push((Arc::from(*k), Json::Int(v)));
                    }
                }
                m
            })
            .collect()
    }
}

/// A value of a rollout's compact record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Val<'a> {
    Int(i64),
    Float(f64),
    Bool(bool),
    Null,
    Str(&'a str),
}

/// How a rollout with a given key order writes its `rollout_infos` record: precomputed
/// once per distinct key order so each row is written without allocating.
#[derive(Debug, Clone, Default)]
pub struct InfoSpec {
    /// The top-level `reward` column, if the row has the key.
    pub reward: Option<usize>,
    /// Usage columns in order, each with the top-level column of the same name (whose
    /// numeric value, when present, replaces the usage value at the usage key's place).
    pub usage: Vec<(usize, Option<usize>)>,
    /// Top-level columns in order (not `reward`), each with the usage column of the same
    /// name (when that usage value is numeric, the key was already written).
    pub top: Vec<(usize, Option<usize>)>,
    /// The usage column named `reward`, if any.
    pub usage_reward: Option<usize>,
}

/// One [`InfoSpec`] per interned key order of the table.
pub fn info_specs(t: &RolloutTable) -> Vec<InfoSpec> {
    t.orders
        .iter()
        .map(|seq| {
            let sep = seq.iter().position(|&c| c == SEP).unwrap_or(seq.len());
            let (top, usage) = (&seq[..sep], &seq[(sep + 1).min(seq.len())..]);
            let name = |c: u32| t.columns[c as usize].name.as_str();
            let find = |list: &[u32], n: &str| list.iter().find(|&&c| name(c) == n).map(|&c| c as usize);
            InfoSpec {
                reward: find(top, "reward"),
                usage_reward: find(usage, "reward"),
                usage: usage.iter().map(|&u| (u as usize, find(top, name(u)))).collect(),
                top: top
                    .iter()
                    .filter(|&&c| name(c) != "reward")
                    .map(|&c| (c as usize, find(usage, name(c))))
                    .collect(),
            }
        })
        .collect()
}

/// A numeric value of a rollout's record (bools as 0/1 unless `keep_bool`).
#[inline]
pub fn info_value(t: &RolloutTable, c: usize, row: usize, keep_bool: bool) -> Option<Val<'_>> {
    let col = &t.columns[c];
    match col.tags[row] {
        tag::INT => Some(Val::Int(col.int(row))),
        tag::FLOAT => Some(Val::Float(col.nums[row])),
        tag::BOOL if keep_bool => Some(Val::Bool(col.nums[row] != 0.0)),
        tag::BOOL => Some(Val::Int(col.nums[row] as i64)),
        _ => None,
    }
}

/// Calls `emit` for each member of a rollout's record after the three ids:
/// `reward` as given, then numeric `response.usage` keys, then other numeric non-`_`
/// top-level keys (bools as 0/1); a top-level key that repeats a usage key keeps the
/// usage key's place and takes the top-level value, as a Python dict update does.
#[inline]
/// `emit` receives the column index (whose name is the key) and the value.
pub fn rollout_info_each<'t>(t: &'t RolloutTable, spec: &InfoSpec, row: usize, mut emit: impl FnMut(usize, Val<'t>)) {
    // A numeric usage `reward` overwrites the top-level one, keeping its first place.
    let usage_reward = spec.usage_reward;
    if let Some(rc) = spec.reward {
        let col = &t.columns[rc];
        let v = match usage_reward.and_then(|u| info_value(t, u, row, false)) {
            Some(v) => Some(v),
            None => match col.tags[row] {
                tag::NULL | tag::LONG_STR => Some(Val::Null),
                tag::STR => col.str_at(row).map(Val::Str),
                _ => info_value(t, rc, row, true),
            },
        };
        if let Some(v) = v {
            emit(rc, v);
        }
    }
    for &(u, dup) in &spec.usage {
        if spec.reward.is_some() && Some(u) == usage_reward {
            continue;
        }
        if let Some(v) = info_value(t, u, row, false) {
            let v = dup.and_then(|c| info_value(t, c, row, false)).unwrap_or(v);
            emit(u, v);
        }
    }
    for &(c, dup) in &spec.top {
        if dup.is_some_and(|u| info_value(t, u, row, false).is_some()) {
            continue;
        }
        if let Some(v) = info_value(t, c, row, false) {
            emit(c, v);
        }
    }
}

/// Every column's name JSON-quoted, for [`TaskSpec::quoted_names`].
pub fn quoted_names(t: &RolloutTable) -> Vec<Vec<u8>> {
    t.columns.iter().map(|c| crate::json::stream::quoted(&c.name)).collect()
}
