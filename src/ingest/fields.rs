//! The numeric fields of a set of rollouts: which keys count as statistics and in what
//! order. A key counts when some row holds a number or bool under it (ints, floats and
//! bools; text, null and containers do not), `_`-prefixed keys never count, and a value
//! under `response.usage` replaces the top-level value of the same name. Fields are
//! ordered by first numeric appearance in (task, rollout) order, as NeMo Gym's pandas
//! frame orders its columns.

use std::collections::{HashMap, HashSet};

use super::rollouts::SEP;
use super::{tag, Column, RolloutTable, Source};

/// One numeric field of a profiled set.
#[derive(Debug, Clone)]
pub struct Field {
    pub name: String,
    pub top: Option<usize>,
    pub usage: Option<usize>,
}

impl Field {
    /// The overlaid value's tag and number at a table row (usage replaces top-level).
    #[inline]
    pub fn at(&self, t: &RolloutTable, row: usize) -> (u8, f64) {
        match self.column(t, row) {
            Some(c) => (c.tags[row], if tag::is_numeric(c.tags[row]) { c.float(row) } else { 0.0 }),
            None => (tag::ABSENT, 0.0),
        }
    }

    /// The column that holds the overlaid value at `row`.
    #[inline]
    pub fn column<'t>(&self, t: &'t RolloutTable, row: usize) -> Option<&'t Column> {
        if let Some(u) = self.usage {
            let c = &t.columns[u];
            if c.tags[row] != tag::ABSENT {
                return Some(c);
            }
        }
        self.top.map(|tp| &t.columns[tp])
    }

    /// The exact integer at `row` (for int and bool values).
    #[inline]
    pub fn int(&self, t: &RolloutTable, row: usize) -> i64 {
        self.column(t, row).map(|c| c.int(row)).unwrap_or(0)
    }
}

/// Derives the numeric fields of the given rows (already in (task, rollout) order).
pub fn discover_fields(t: &RolloutTable, rows_task_rollout_order: &[usize]) -> Vec<Field> {
    // Names that could ever be numeric, to stop early once all are found.
    let mut possible: HashSet<&str> = HashSet::new();
    for c in &t.columns {
        // `_`-prefixed keys never count, also when they come from `response.usage`.
        if (c.source == Source::Top || c.source == Source::Usage) && !c.name.starts_with('_') && c.has_numbers() {
            possible.insert(c.name.as_str());
        }
    }
    let mut seen: Vec<String> = Vec::new();
    let mut seen_set: HashSet<String> = HashSet::new();
    let mut usage_names: Vec<&str> = Vec::new();
    for &r in rows_task_rollout_order {
        if seen_set.len() == possible.len() {
            break;
        }
        let seq = &t.orders[t.order[r] as usize];
        let sep = seq.iter().position(|&c| c == SEP).unwrap_or(seq.len());
        usage_names.clear();
        usage_names.extend(seq[sep + 1..].iter().map(|&c| t.columns[c as usize].name.as_str()));
        let consider = |name: &str, tg: u8, seen: &mut Vec<String>, seen_set: &mut HashSet<String>| {
            if tag::is_numeric(tg) && !name.starts_with('_') && !seen_set.contains(name) {
                seen_set.insert(name.to_string());
                seen.push(name.to_string());
            }
        };
        for &c in &seq[..sep] {
            let col = &t.columns[c as usize];
            let name = col.name.as_str();
            let tg = match seq[sep + 1..].iter().find(|&&u| t.columns[u as usize].name == name) {
                Some(&u) => t.columns[u as usize].tags[r],
                None => col.tags[r],
            };
            consider(name, tg, &mut seen, &mut seen_set);
        }
        for &u in &seq[sep + 1..] {
            let col = &t.columns[u as usize];
            let name = col.name.as_str();
            if seq[..sep].iter().any(|&c| t.columns[c as usize].name == name) {
                continue;
            }
            consider(name, col.tags[r], &mut seen, &mut seen_set);
        }
    }
    resolve_fields(t, seen)
}

/// The fields named `names`, in that order, with their columns in `t` (none when `t`
/// has no such column: every value is then missing).
pub fn resolve_fields(t: &RolloutTable, names: impl IntoIterator<Item = String>) -> Vec<Field> {
    // Columns by (source, name), the first of each: a search per field would make rows
    // of many fields quadratic.
    let mut index: HashMap<(Source, &str), usize> = HashMap::new();
    for (i, c) in t.columns.iter().enumerate() {
        if c.source == Source::Top || c.source == Source::Usage {
            index.entry((c.source, c.name.as_str())).or_insert(i);
        }
    }
    let at = |source: Source, name: &str| index.get(&(source, name)).copied();
    names.into_iter().map(|name| Field { top: at(Source::Top, &name), usage: at(Source::Usage, &name), name }).collect()
}
