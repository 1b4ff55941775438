//! The statistics levels (task, agent, repeat, across repeats) over one *profiled set*: the measured rollouts of
//! a profile (all agents) or of one aggregate group.
//!
//! A profiled set is a list of table rows sorted by (task, label, rollout), each with an
//! agent label. From it we derive the numeric fields (in order of first numeric
//! appearance in (task, rollout) order, usage overlay), one dense `f64` column per field
//! (NaN = missing), and then the task, agent, repeat and across-repeat levels. Columns
//! are computed in parallel (rayon, one job per field or per group range); sums follow
//! numpy's pairwise order so results match NeMo Gym's pandas to the last bit.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use rayon::prelude::*;

use super::warnings::{self, Warnings};
use crate::json::{Json, Key, Members};

/// A repeat-level entry: label id, rollout index, members without `agent_ref`.
pub type RepeatEntry = (u32, i64, Members);
use crate::ingest::fields::discover_fields;
pub use crate::ingest::fields::Field;
use crate::ingest::{tag, RolloutTable};
use crate::schema;
use crate::stats;

/// The rows of one profiled set and their numeric columns.
pub struct Profiled<'a> {
    pub t: &'a RolloutTable,
    /// Table rows sorted by (task, label, rollout).
    pub rows: Vec<usize>,
    /// Label id per position (index into `labels`).
    pub label: Vec<u32>,
    /// Label names; ids are assigned so that id order is name order.
    pub labels: Vec<String>,
    pub fields: Vec<Field>,
    /// `vals[f][pos]`: value of field f at position pos, NaN when missing.
    pub vals: Vec<Vec<f64>>,
    /// Whether every field is an int or bool in every row (then max/min are written as integers).
    pub all_int: bool,
    /// With `all_int`: the exact integers, `ints[f][pos]` (max/min are written from them).
    pub ints: Vec<Vec<i64>>,
    /// Task-level grouping per (task, label) rather than per task.
    pub fan_out: bool,
}

impl<'a> Profiled<'a> {
    /// Builds a profiled set from table rows and a label per row.
    pub fn new(t: &'a RolloutTable, rows: &[usize], row_label: &[&str]) -> Profiled<'a> {
        Self::build(t, rows, row_label, None)
    }

    /// A profiled set whose fields and integer flag were settled over a larger set (the
    /// whole sweep, of which `t` holds one bucket of tasks): `fields` in that set's order,
    /// resolved to `t`'s columns, and its `all_int`.
    pub fn with_fields(
        t: &'a RolloutTable,
        rows: &[usize],
        row_label: &[&str],
        fields: Vec<Field>,
        all_int: bool,
    ) -> Profiled<'a> {
        Self::build(t, rows, row_label, Some((fields, all_int)))
    }

    fn build(
        t: &'a RolloutTable,
        rows: &[usize],
        row_label: &[&str],
        given: Option<(Vec<Field>, bool)>,
    ) -> Profiled<'a> {
        // Label ids in name order.
        let mut first: HashMap<&str, u32> = HashMap::new();
        let mut distinct: Vec<&str> = Vec::new();
        let mut lid: Vec<u32> = Vec::with_capacity(row_label.len());
        let mut last: Option<(&str, u32)> = None;
        for &l in row_label {
            let id = match last {
                Some((s, id)) if std::ptr::eq(s, l) || s == l => id,
                _ => *first.entry(l).or_insert_with(|| {
                    distinct.push(l);
                    (distinct.len() - 1) as u32
                }),
            };
            last = Some((l, id));
            lid.push(id);
        }
        let mut by_name: Vec<u32> = (0..distinct.len() as u32).collect();
        by_name.sort_by(|&a, &b| distinct[a as usize].cmp(distinct[b as usize]));
        let mut rank = vec![0u32; distinct.len()];
        for (r, &i) in by_name.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        let labels: Vec<String> = by_name.iter().map(|&i| distinct[i as usize].to_string()).collect();
        for l in lid.iter_mut() {
            *l = rank[*l as usize];
        }
        // (task, rollout) order for field discovery.
        // The orders below are sorted only when they are not already: rows usually come
        // in table order, which is (task, rollout) order, under one label.
        fn sorted_by<K: Ord + Send>(n: usize, key: impl Fn(usize) -> K + Sync) -> Option<Vec<usize>> {
            let mut ord: Vec<usize> = (0..n).collect();
            if ord.is_sorted_by_key(|&i| key(i)) {
                return None;
            }
            ord.par_sort_unstable_by_key(|&i| key(i));
            Some(ord)
        }
        let (fields, given_int) = match given {
            Some((fields, all_int)) => (fields, Some(all_int)),
            None => {
                let tr_rows: Vec<usize> = match sorted_by(rows.len(), |i| (t.task[rows[i]], t.rollout[rows[i]])) {
                    Some(tr) => tr.iter().map(|&i| rows[i]).collect(),
                    None => rows.to_vec(),
                };
                (discover_fields(t, &tr_rows), None)
            }
        };
        // Fan-out: some task under more than one label.
        let mut pairs: Vec<(i64, u32)> = (0..rows.len()).map(|i| (t.task[rows[i]], lid[i])).collect();
        if !pairs.is_sorted() {
            pairs.par_sort_unstable();
        }
        pairs.dedup();
        let mut tasks: Vec<i64> = pairs.iter().map(|p| p.0).collect();
        tasks.dedup();
        let fan_out = pairs.len() > tasks.len();
        // Final order: (task, label, rollout).
        let (rows_sorted, label): (Vec<usize>, Vec<u32>) =
            match sorted_by(rows.len(), |i| (t.task[rows[i]], lid[i], t.rollout[rows[i]])) {
                Some(ord) => (ord.iter().map(|&i| rows[i]).collect(), ord.iter().map(|&i| lid[i]).collect()),
                None => (rows.to_vec(), lid),
            };
        let cols: Vec<(Vec<f64>, bool)> = fields
            .par_iter()
            .map(|f| {
                let mut all_int = true;
                let v = rows_sorted
                    .iter()
                    .map(|&r| {
                        let (tg, x) = f.at(t, r);
                        if tg != tag::INT && tg != tag::BOOL {
                            all_int = false;
                        }
                        if tag::is_numeric(tg) {
                            x
                        } else {
                            f64::NAN
                        }
                    })
                    .collect();
                (v, all_int)
            })
            .collect();
        let all_int = given_int.unwrap_or_else(|| cols.iter().all(|c| c.1));
        let vals = cols.into_iter().map(|c| c.0).collect();
        let ints = if all_int {
            fields.par_iter().map(|f| rows_sorted.iter().map(|&r| f.int(t, r)).collect()).collect()
        } else {
            Vec::new()
        };
        Profiled { t, rows: rows_sorted, label, labels, fields, vals, all_int, ints, fan_out }
    }

    pub fn task(&self, pos: usize) -> i64 {
        self.t.task[self.rows[pos]]
    }
    pub fn rollout(&self, pos: usize) -> i64 {
        self.t.rollout[self.rows[pos]]
    }

    /// Task-level groups as position ranges: per task, or per (task, label) under fan-out.
    pub fn task_groups(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut a = 0;
        for i in 1..=self.rows.len() {
            let split = i == self.rows.len()
                || self.task(i) != self.task(a)
                || (self.fan_out && self.label[i] != self.label[a]);
            if split {
                out.push((a, i));
                a = i;
            }
        }
        out
    }

    /// Positions of each label, in order.
    pub fn label_positions(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.labels.len()];
        for (p, &l) in self.label.iter().enumerate() {
            out[l as usize].push(p);
        }
        out
    }
}

/// Number of distinct values: by runs when they come sorted (table order), else hashed.
pub fn distinct(values: impl Iterator<Item = i64> + Clone) -> usize {
    let mut prev: Option<i64> = None;
    let mut runs = 0;
    for v in values.clone() {
        match prev {
            Some(p) if p > v => {
                return values.collect::<std::collections::HashSet<i64, foldhash::fast::RandomState>>().len();
            }
            Some(p) if p == v => {}
            _ => runs += 1,
        }
        prev = Some(v);
    }
    runs
}

/// Keys `"<stat>/<field>"` for the five describe statistics, built once per field.
pub struct StatKeys {
    pub keys: Vec<[Key; 5]>,
    /// The same keys JSON-escaped with their quotes, for streaming writers.
    pub quoted: Vec<[Vec<u8>; 5]>,
}

pub use crate::schema::DESCRIBE;

impl StatKeys {
    pub fn new(fields: &[Field]) -> Self {
        Self::of_names(fields.iter().map(|f| f.name.as_str()))
    }

    /// The keys of fields known by name only (a merge's statistics state).
    pub fn of_names<'a>(names: impl Iterator<Item = &'a str>) -> Self {
        let keys: Vec<[Key; 5]> = names
            .map(|name| std::array::from_fn(|s| Arc::from(schema::stat_key(DESCRIBE[s], name).as_str())))
            .collect();
        let quoted = keys.iter().map(|k| std::array::from_fn(|s| crate::json::stream::quoted(&k[s]))).collect();
        StatKeys { keys, quoted }
    }
}

/// pandas `describe_dataframe` for one group: per field mean/max/min/median/std of the
/// values (NaN = missing), with the one-rollout rule for std: when std is undefined for
/// every field, fields without missing values get 0.0.
pub fn describe_stats(cols: &[&[f64]], scratch: &mut Vec<f64>) -> Vec<[Option<f64>; 5]> {
    fn one(col: &[f64], scratch: &mut Vec<f64>, squares: &mut Vec<f64>) -> [Option<f64>; 5] {
        scratch.clear();
        scratch.extend(col.iter().copied().filter(|x| !x.is_nan()));
        let n = scratch.len();
        if n == 0 {
            return [None; 5];
        }
        let (mean, std) = if n == col.len() {
            (stats::mean(scratch), stats::var_with_scratch(scratch, 1, squares).map(f64::sqrt))
        } else {
            (stats::nan_mean(col), stats::nan_std(col, 1))
        };
        if n <= 64 {
            stats::sort_f64(scratch);
        } else {
            let at = stats::positions_for(n, &[]);
            stats::order_at(scratch, &at);
        }
        let median = stats::median_sorted(scratch);
        [mean, Some(scratch[n - 1]), Some(scratch[0]), Some(median), std]
    }
    // Large groups (an agent's every rollout): one job per field.
    let mut st: Vec<[Option<f64>; 5]> = if cols.first().is_some_and(|c| c.len() > 65_536) {
        cols.par_iter().map(|c| one(c, &mut Vec::new(), &mut Vec::new())).collect()
    } else {
        let mut squares = Vec::new();
        cols.iter().map(|c| one(c, scratch, &mut squares)).collect()
    };
    one_rollout_rule(&mut st, |f| cols[f].iter().any(|x| x.is_nan()));
    st
}

/// The one-rollout rule of `describe`: when std is undefined for every field, the
/// fields without missing values get 0.0.
pub fn one_rollout_rule(st: &mut [[Option<f64>; 5]], has_missing: impl Fn(usize) -> bool) {
    if st.iter().all(|s| s[4].is_none()) {
        for (f, s) in st.iter_mut().enumerate() {
            if !has_missing(f) {
                s[4] = Some(0.0);
            }
        }
    }
}

/// Exact (max, min) of integers.
pub fn int_extremes(v: &[i64]) -> (i64, i64) {
    v.iter().fold((i64::MIN, i64::MAX), |(hi, lo), &x| (hi.max(x), lo.min(x)))
}

/// [`describe_stats`] as members in stat-major order, appended to `out`; with `ints`
/// (an all-int profile) `max`/`min` are the exact integers.
pub fn describe(cols: &[&[f64]], keys: &StatKeys, ints: Option<&[&[i64]]>, out: &mut Members, scratch: &mut Vec<f64>) {
    let st = describe_stats(cols, scratch);
    let extremes: Option<Vec<(i64, i64)>> = ints.map(|ints| ints.iter().map(|v| int_extremes(v)).collect());
    describe_members(&st, keys, extremes.as_deref(), out);
}

/// The describe statistics of each field as members in stat-major order, appended to
/// `out`; with `extremes` (an all-int profile: each field's exact (max, min))
/// `max`/`min` are those integers.
pub fn describe_members(st: &[[Option<f64>; 5]], keys: &StatKeys, extremes: Option<&[(i64, i64)]>, out: &mut Members) {
    for s in 0..5 {
        for (f, row) in st.iter().enumerate() {
            if let Some(v) = row[s] {
                let j = match extremes {
                    Some(x) if s == 1 || s == 2 => Json::Int(if s == 1 { x[f].0 } else { x[f].1 }),
                    _ => Json::Float(v),
                };
                out.push((keys.keys[f][s].clone(), j));
            }
        }
    }
}

/// Positions per (label id, rollout index), in key order. Rollout indexes are usually
/// a small range (the repeats), indexed directly instead of looked up per position.
fn positions_by_label_and_rollout(p: &Profiled<'_>) -> BTreeMap<(u32, i64), Vec<usize>> {
    let mut by: BTreeMap<(u32, i64), Vec<usize>> = BTreeMap::new();
    let n = p.rows.len();
    let lo = (0..n).map(|pos| p.rollout(pos)).min().unwrap_or(0);
    let hi = (0..n).map(|pos| p.rollout(pos)).max().unwrap_or(0);
    let span = hi.checked_sub(lo).and_then(|s| usize::try_from(s).ok()).and_then(|s| s.checked_add(1));
    match span.filter(|&s| s.saturating_mul(p.labels.len()) <= 1 << 16) {
        Some(span) => {
            let mut dense: Vec<Vec<usize>> = vec![Vec::new(); span * p.labels.len()];
            for pos in 0..n {
                dense[p.label[pos] as usize * span + (p.rollout(pos) - lo) as usize].push(pos);
            }
            for (k, v) in dense.into_iter().enumerate() {
                if !v.is_empty() {
                    by.insert(((k / span) as u32, lo + (k % span) as i64), v);
                }
            }
        }
        None => {
            for pos in 0..n {
                by.entry((p.label[pos], p.rollout(pos))).or_default().push(pos);
            }
        }
    }
    by
}

/// Repeat-level entries for every label with two or more rollout indexes.
/// Each entry is (label id, rollout index, object without `agent_ref`).
pub fn repeat_level(p: &Profiled<'_>, warn: &mut Warnings) -> Vec<RepeatEntry> {
    let by = positions_by_label_and_rollout(p);
    let mut n_repeats = vec![0usize; p.labels.len()];
    for &(l, _) in by.keys() {
        n_repeats[l as usize] += 1;
    }
    // Distinct tasks per label (positions are in task order).
    let mut tasks_of = vec![0usize; p.labels.len()];
    let mut last_task: Vec<Option<i64>> = vec![None; p.labels.len()];
    for pos in 0..p.rows.len() {
        let l = p.label[pos] as usize;
        let task = p.task(pos);
        if last_task[l] != Some(task) {
            last_task[l] = Some(task);
            tasks_of[l] += 1;
        }
    }
    // Fields in alphabetical order.
    let mut alpha: Vec<usize> = (0..p.fields.len()).collect();
    alpha.sort_by(|&a, &b| p.fields[a].name.cmp(&p.fields[b].name));
    let groups: Vec<(&(u32, i64), &Vec<usize>)> = by.iter().filter(|(k, _)| n_repeats[k.0 as usize] >= 2).collect();
    // One job per (repeat, field): a handful of repeats alone would leave cores idle.
    let jobs: Vec<(usize, usize)> = (0..groups.len()).flat_map(|g| alpha.iter().map(move |&f| (g, f))).collect();
    let field_stats: Vec<(Vec<(Key, Json)>, Warnings)> = jobs
        .par_iter()
        .map_init(Vec::new, |x: &mut Vec<f64>, &(g, f)| {
            let mut w = Warnings::default();
            let mut e: Vec<(Key, Json)> = Vec::new();
            x.clear();
            x.extend(groups[g].1.iter().map(|&pos| p.vals[f][pos]).filter(|v| !v.is_nan()));
            let n = x.len();
            if n == 0 {
                return (e, w);
            }
            let mean = stats::mean(x).unwrap_or(f64::NAN);
            let std = if n > 1 { stats::std(x, 1).unwrap_or(f64::NAN) } else { 0.0 };
            let sorted = x;
            let at = stats::positions_for(n, &[0.25, 0.75]);
            stats::order_at(sorted, &at);
            let (label, rollout) = *groups[g].0;
            let what = || format!("`{}`, {}, repeat {rollout}", p.fields[f].name, p.labels[label as usize]);
            repeat_field_members(&p.fields[f].name, n, mean, std, |k| sorted[k], &mut e, &mut w, what);
            (e, w)
        })
        .collect();
    let mut field_stats = field_stats.into_iter();
    let entries: Vec<(RepeatEntry, Warnings)> = groups
        .iter()
        .map(|&(&(l, r), positions)| {
            let mut w = Warnings::default();
            // Positions are in task order: distinct tasks are counted by runs.
            let sample_count = distinct(positions.iter().map(|&pos| p.task(pos)));
            let mut e = repeat_head(r, sample_count, tasks_of[l as usize]);
            for _ in &alpha {
                let (members, fw) = field_stats.next().expect("one result per (repeat, field)");
                e.extend(members);
                w.extend(fw);
            }
            ((l, r, e), w)
        })
        .collect();
    finish_repeats(entries, &p.labels, warn)
}

/// The first members of a repeat-level entry: its rollout index, the number of tasks
/// it has and how many of the label's `tasks` it misses.
pub fn repeat_head(rollout: i64, sample_count: usize, tasks: usize) -> Members {
    vec![
        (Arc::from("_ng_rollout_index"), Json::Int(rollout)),
        (Arc::from("sample_count"), Json::Int(sample_count as i64)),
        (Arc::from("missing_count"), Json::Int((tasks - sample_count) as i64)),
    ]
}

/// One field's members of a repeat-level entry, from its `n > 0` present values: their
/// `mean`, `std` and the k-th smallest value `at(k)`; `what` names the field, label and
/// repeat in a warning.
#[allow(clippy::too_many_arguments)]
pub fn repeat_field_members(
    name: &str,
    n: usize,
    mean: f64,
    std: f64,
    at: impl Fn(usize) -> f64,
    e: &mut Members,
    w: &mut Warnings,
    what: impl FnOnce() -> String,
) {
    let sem = std / (n as f64).sqrt();
    let k = |s: &str| -> Key { Arc::from(schema::stat_key(s, name).as_str()) };
    let point = [
        mean,
        stats::median_at(n, &at),
        std,
        sem,
        at(0),
        at(n - 1),
        stats::quantile_linear_at(n, 0.25, &at),
        stats::quantile_linear_at(n, 0.75, &at),
    ];
    for (s, v) in schema::REPEAT.iter().zip(point) {
        e.push((k(s), Json::Float(v)));
    }
    if let Some((lo, hi)) = interval(mean, sem, n, w, what) {
        e.push((k(schema::REPEAT[8]), Json::Float(lo)));
        e.push((k(schema::REPEAT[9]), Json::Float(hi)));
    }
}

/// The repeat-level entries in order with their warnings, and the warning for repeats
/// that miss tasks.
pub fn finish_repeats(
    entries: Vec<(RepeatEntry, Warnings)>,
    labels: &[String],
    warn: &mut Warnings,
) -> Vec<RepeatEntry> {
    let mut out = Vec::with_capacity(entries.len());
    let mut incomplete: Vec<(u32, i64, usize)> = Vec::new();
    for ((l, r, e), w) in entries {
        warn.extend(w);
        if let Some(Json::Int(m)) = e.iter().find(|(k, _)| &**k == "missing_count").map(|x| &x.1) {
            if *m > 0 {
                incomplete.push((l, r, *m as usize));
            }
        }
        out.push((l, r, e));
    }
    if let Some(&(l, r, m)) = incomplete.first() {
        warn.add(warnings::unequal_repeats(incomplete.len(), &labels[l as usize], r, m));
    }
    out
}

/// The Student-t 95% interval `mean ± t(0.975, n-1)·se`, or None for n <= 1; a zero standard error
/// collapses it to (mean, mean) with a warning.
pub fn interval(
    mean: f64,
    se: f64,
    n: usize,
    warn: &mut Warnings,
    what: impl FnOnce() -> String,
) -> Option<(f64, f64)> {
    if n <= 1 {
        return None;
    }
    if se == 0.0 {
        warn.add(warnings::zero_se(n, &what()));
        return Some((mean, mean));
    }
    Some(stats::t_interval(0.95, (n - 1) as f64, mean, se))
}

/// Whether a metric name is a point estimate to aggregate across repeats.
pub fn is_primary_metric(name: &str) -> bool {
    const NAMES: [&str; 7] = [
        "_ng_task_index",
        "_ng_rollout_index",
        "_ng_attempt_index",
        "sample_count",
        "missing_count",
        "num_repeats",
        "token_usage_version",
    ];
    const PREFIXES: [&str; 11] =
        ["max/", "min/", "median/", "std/", "sem/", "se/", "p25/", "p75/", "ci_low_95/", "ci_high_95/", "histogram/"];
    const SUFFIXES: [&str; 19] = [
        "/max",
        "/min",
        "/median",
        "/p5",
        "/p25",
        "/p75",
        "/p95",
        "/ci_low_95",
        "/ci_high_95",
        "/ci_lower",
        "/ci_upper",
        "_ci_lower",
        "_ci_upper",
        "_ci95_lower",
        "_ci95_upper",
        "/_ng_attempt_index",
        "/std_dev_across_runs",
        "/std_err_across_runs",
        "/avg_sample_std_dev",
    ];
    !NAMES.contains(&name)
        && !PREFIXES.iter().any(|p| name.starts_with(p))
        && !SUFFIXES.iter().any(|s| name.ends_with(s))
        && !name.contains("_across_repeats/")
}

/// Across-repeat keys per label, from the repeat entries.
/// `labels`: the name of each label id, for warnings.
pub fn across_repeats(repeats: &[RepeatEntry], labels: &[&str], warn: &mut Warnings) -> Vec<Vec<(Key, Json)>> {
    let n_labels = labels.len();
    // Numeric columns in order of first appearance over all entries.
    let mut cols: Vec<Key> = Vec::new();
    let mut seen: HashSet<Key> = HashSet::new();
    for (_, _, e) in repeats {
        for (k, v) in e {
            if matches!(v, Json::Int(_) | Json::Float(_)) && is_primary_metric(k) && !seen.contains(k) {
                seen.insert(k.clone());
                cols.push(k.clone());
            }
        }
    }
    let mut out = vec![Vec::new(); n_labels];
    for (l, slot) in out.iter_mut().enumerate() {
        // Each repeat's members by key (the first of a repeated key, as a search would
        // find): a search per column would make rows of many fields quadratic.
        let mine: Vec<HashMap<&str, &Json>> = repeats
            .iter()
            .filter(|x| x.0 as usize == l)
            .map(|x| {
                let mut by_key: HashMap<&str, &Json> = HashMap::with_capacity(x.2.len());
                for (k, v) in &x.2 {
                    by_key.entry(&**k).or_insert(v);
                }
                by_key
            })
            .collect();
        if mine.is_empty() {
            continue;
        }
        for c in &cols {
            let x: Vec<f64> =
                mine.iter().filter_map(|e| e.get(&**c).and_then(|v| v.as_f64())).filter(|v| !v.is_nan()).collect();
            let n = x.len();
            if n == 0 {
                continue;
            }
            let mean = stats::mean(&x).unwrap_or(f64::NAN);
            let std = if n > 1 { stats::std(&x, 1).unwrap_or(f64::NAN) } else { 0.0 };
            let se = std / (n as f64).sqrt();
            let mut sorted = x.clone();
            stats::sort_f64(&mut sorted);
            let k = |s: &str| -> Key { Arc::from(schema::across_key(s, c).as_str()) };
            let point = [mean, stats::median_sorted(&sorted), std, sorted[0], sorted[n - 1], se];
            for (s, v) in schema::ACROSS_REPEATS.iter().zip(point) {
                slot.push((k(s), Json::Float(v)));
            }
            let what = || format!("`{c}` across repeats, {}", labels[l]);
            if let Some((lo, hi)) = interval(mean, se, n, warn, what) {
                slot.push((k(schema::ACROSS_REPEATS[6]), Json::Float(lo)));
                slot.push((k(schema::ACROSS_REPEATS[7]), Json::Float(hi)));
            }
        }
    }
    out
}

/// Agent-level statistics per label, stat-major keys.
/// Each column's values at `positions`: the columns themselves when `whole` (every
/// position, in order), else gathered copies.
fn columns_at<'v, T: Copy>(cols: &'v [Vec<T>], positions: &[usize], whole: bool) -> Vec<std::borrow::Cow<'v, [T]>> {
    use std::borrow::Cow;
    cols.iter()
        .map(|v| {
            if whole {
                Cow::Borrowed(v.as_slice())
            } else {
                Cow::Owned(positions.iter().map(|&pos| v[pos]).collect())
            }
        })
        .collect()
}

/// [`agent_level`] and [`repeat_level`] side by side (they read the same columns and
/// share the cores), with the repeat level's warnings.
pub fn agent_and_repeat_levels(p: &Profiled<'_>, keys: &StatKeys) -> (Vec<Members>, Vec<RepeatEntry>, Warnings) {
    let (agents, (repeats, w)) = rayon::join(
        || agent_level(p, keys),
        || {
            let mut w = Warnings::default();
            (repeat_level(p, &mut w), w)
        },
    );
    (agents, repeats, w)
}

pub fn agent_level(p: &Profiled<'_>, keys: &StatKeys) -> Vec<Vec<(Key, Json)>> {
    p.label_positions()
        .par_iter()
        .map(|positions| {
            // One label holding every position (the usual case) reads the columns as they are.
            let whole = positions.len() == p.rows.len();
            let cols = columns_at(&p.vals, positions, whole);
            let refs: Vec<&[f64]> = cols.iter().map(|c| &**c).collect();
            let ints = p.all_int.then(|| columns_at(&p.ints, positions, whole));
            let int_refs: Option<Vec<&[i64]>> = ints.as_ref().map(|v| v.iter().map(|c| &**c).collect());
            let mut out = Vec::new();
            let mut scratch = Vec::new();
            describe(&refs, keys, int_refs.as_deref(), &mut out, &mut scratch);
            out
        })
        .collect()
}
