//! The agent and repeat levels of one run, read bucket by bucket without keeping a
//! column (`merge aggregate --low-memory`).
//!
//! The first pass counts: rows, present values per field and per (repeat, field),
//! extremes, tasks per repeat, and the first round of each column's order statistics.
//! Knowing the counts fixes the shape of numpy's pairwise tree, so the second pass adds
//! the values in that tree ([`PairwiseStream`]) for the means, the third adds the squared
//! deviations from those means for the standard deviations (pandas' two passes), and the
//! medians and quartiles come from [`Select`], which narrows each rank to a bin of the
//! value's order key pass after pass until the bin can be sorted. The numbers are those
//! of the single-machine code on the run's whole columns.

use std::collections::BTreeMap;

use crate::json::Members;
use crate::metrics::levels::{
    describe_members, finish_repeats, one_rollout_rule, repeat_field_members, repeat_head, Profiled, RepeatEntry,
    StatKeys,
};
use crate::metrics::warnings::Warnings;
use crate::stats::stream::{PairwiseStream, Select};
use crate::stats::{median_at, positions_for};

/// Where the passes are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Pass {
    Count,
    Sum,
    Square,
    Select,
}

/// One column's statistics: an agent's field (missing values zero-filled in place, as
/// pandas sums them) or a repeat's field (present values only).
struct Column {
    present: u64,
    lo: f64,
    hi: f64,
    ilo: i64,
    ihi: i64,
    select: Select,
    sum: Option<PairwiseStream>,
    square: Option<PairwiseStream>,
    mean: f64,
    var: Option<f64>,
    /// Values taken in this pass (missing ones too where they are zero-filled).
    seen: u64,
}

impl Column {
    fn new() -> Column {
        Column {
            present: 0,
            lo: f64::NAN,
            hi: f64::NAN,
            ilo: i64::MAX,
            ihi: i64::MIN,
            select: Select::new(),
            sum: None,
            square: None,
            mean: f64::NAN,
            var: None,
            seen: 0,
        }
    }

    /// Takes the next value of the column (NaN: missing).
    fn visit(&mut self, pass: Pass, x: f64, int: Option<i64>, zero_filled: bool) {
        let missing = x.is_nan();
        if missing && !zero_filled {
            return;
        }
        self.seen += 1;
        match pass {
            Pass::Count => {
                if missing {
                    return;
                }
                if self.present == 0 || x.total_cmp(&self.lo).is_lt() {
                    self.lo = x;
                }
                if self.present == 0 || x.total_cmp(&self.hi).is_gt() {
                    self.hi = x;
                }
                if let Some(i) = int {
                    self.ilo = self.ilo.min(i);
                    self.ihi = self.ihi.max(i);
                }
                self.present += 1;
            }
            Pass::Sum => {
                if let Some(s) = &mut self.sum {
                    s.push(if missing { 0.0 } else { x });
                }
            }
            Pass::Square => {
                if let Some(s) = &mut self.square {
                    s.push(if missing {
                        0.0
                    } else {
                        let d = self.mean - x;
                        d * d
                    });
                }
            }
            Pass::Select => {}
        }
        if !missing && self.select.wants_pass() {
            self.select.push(x);
        }
    }

    /// Ends a pass over a column of `len` values (counting the missing ones where they
    /// are zero-filled); false when this pass took other values than the first.
    fn end(&mut self, pass: Pass, len: u64) -> bool {
        let n = self.present;
        let seen = std::mem::take(&mut self.seen);
        let same = pass == Pass::Count || seen == len;
        match pass {
            Pass::Count => {
                // The first and last ranks are the extremes, known already.
                let ranks: Vec<u64> = match n {
                    0 => Vec::new(),
                    _ => positions_for(n as usize, &[0.25, 0.75])
                        .into_iter()
                        .map(|k| k as u64)
                        .filter(|&k| k != 0 && k != n - 1)
                        .collect(),
                };
                self.select.end_pass(&ranks);
                if n > 0 {
                    self.sum = Some(PairwiseStream::new(len));
                }
            }
            Pass::Sum => {
                self.select.end_pass(&[]);
                if let Some(s) = self.sum.take() {
                    let Some(sum) = s.numpy_sum() else { return false };
                    self.mean = sum / n as f64;
                }
                if n > 1 {
                    self.square = Some(PairwiseStream::new(len));
                }
            }
            Pass::Square => {
                self.select.end_pass(&[]);
                if let Some(s) = self.square.take() {
                    let Some(sum) = s.numpy_sum() else { return false };
                    self.var = Some(sum / (n - 1) as f64);
                }
            }
            Pass::Select => self.select.end_pass(&[]),
        }
        same && !self.select.changed()
    }

    /// The k-th smallest present value.
    fn at(&self, k: usize) -> f64 {
        if k == 0 {
            self.lo
        } else if k as u64 == self.present - 1 {
            self.hi
        } else {
            self.select.at(k as u64)
        }
    }
}

struct Repeat {
    last_task: Option<i64>,
    tasks: usize,
    fields: Vec<Column>,
}

/// What one run keeps of its scored rollouts for the agent and repeat levels.
pub struct LeanRun {
    /// Scored rollouts seen (the length of the agent's columns).
    rows: u64,
    /// By field, in the run's order of first appearance.
    fields: Vec<Column>,
    repeats: BTreeMap<i64, Repeat>,
    pass: Pass,
}

impl Default for LeanRun {
    fn default() -> Self {
        LeanRun { rows: 0, fields: Vec::new(), repeats: BTreeMap::new(), pass: Pass::Count }
    }
}

/// The passes over a run's buckets did not see the same rows.
#[derive(Debug)]
pub struct Changed;

impl LeanRun {
    /// Takes one bucket's scored rollouts of the run: `p`, whose field `f` is the run's
    /// field `global[f]` (in the counting pass; later passes give every field of the run
    /// in order).
    pub fn visit(&mut self, p: &Profiled<'_>, global: &[usize]) {
        let pass = self.pass;
        if pass == Pass::Count {
            let need = global.iter().map(|&g| g + 1).max().unwrap_or(0);
            while self.fields.len() < need {
                self.fields.push(Column::new());
            }
        }
        for pos in 0..p.rows.len() {
            let r = p.rollout(pos);
            let repeat =
                self.repeats.entry(r).or_insert_with(|| Repeat { last_task: None, tasks: 0, fields: Vec::new() });
            if pass == Pass::Count {
                self.rows += 1;
                let task = p.task(pos);
                if repeat.last_task != Some(task) {
                    repeat.last_task = Some(task);
                    repeat.tasks += 1;
                }
                if repeat.fields.len() < self.fields.len() {
                    repeat.fields.resize_with(self.fields.len(), Column::new);
                }
            }
            for (f, &g) in global.iter().enumerate() {
                let x = p.vals[f][pos];
                let int = (pass == Pass::Count && p.all_int).then(|| p.ints[f][pos]);
                self.fields[g].visit(pass, x, int, true);
                // A run of one repeat has no repeat level: its columns go after counting.
                if let Some(c) = repeat.fields.get_mut(g) {
                    c.visit(pass, x, int, false);
                }
            }
        }
    }

    /// Ends a pass; returns whether another is needed, or [`Changed`] when this pass
    /// took other rows or values than the first.
    pub fn end_pass(&mut self) -> Result<bool, Changed> {
        let pass = self.pass;
        let mut same = true;
        for c in &mut self.fields {
            same &= c.end(pass, self.rows);
        }
        let one_repeat = self.repeats.len() < 2;
        for r in self.repeats.values_mut() {
            if one_repeat {
                r.fields = Vec::new();
                continue;
            }
            if pass == Pass::Count {
                r.fields.resize_with(self.fields.len(), Column::new);
            }
            for c in &mut r.fields {
                let len = c.present;
                same &= c.end(pass, len);
            }
        }
        if !same {
            return Err(Changed);
        }
        self.pass = match pass {
            Pass::Count => Pass::Sum,
            Pass::Sum => Pass::Square,
            Pass::Square | Pass::Select => Pass::Select,
        };
        Ok(self.pass != Pass::Select || self.columns().any(|c| c.select.wants_pass()))
    }

    fn columns(&self) -> impl Iterator<Item = &Column> {
        self.fields.iter().chain(self.repeats.values().flat_map(|r| r.fields.iter()))
    }

    /// The agent-level members of the run (fields named `names`, in the run's order),
    /// as `describe` gives them; `all_int` writes the extremes as integers.
    pub fn agent_members(&self, keys: &StatKeys, all_int: bool) -> Members {
        let mut st: Vec<[Option<f64>; 5]> = self
            .fields
            .iter()
            .map(|c| match c.present {
                0 => [None; 5],
                n => [
                    Some(c.mean),
                    Some(c.hi),
                    Some(c.lo),
                    Some(median_at(n as usize, |k| c.at(k))),
                    c.var.map(f64::sqrt),
                ],
            })
            .collect();
        one_rollout_rule(&mut st, |f| self.fields[f].present < self.rows);
        let extremes: Option<Vec<(i64, i64)>> = all_int.then(|| self.fields.iter().map(|c| (c.ihi, c.ilo)).collect());
        let mut out = Vec::new();
        describe_members(&st, keys, extremes.as_deref(), &mut out);
        out
    }

    /// Gives the run `n` fields (the last ones without a value) when it has fewer: in a
    /// profile every label has every field of the profiled set. Before the counting
    /// pass ends.
    pub fn pad_fields(&mut self, n: usize) {
        while self.fields.len() < n {
            self.fields.push(Column::new());
        }
    }

    /// The repeat-level entries of the run labelled `label` (none with fewer than two
    /// repeats), given its field names and number of scored tasks.
    pub fn repeat_entries(&self, label: &str, names: &[String], tasks: usize, warn: &mut Warnings) -> Vec<RepeatEntry> {
        finish_repeats(self.raw_repeat_entries(0, label, names, tasks), &[label.to_string()], warn)
    }

    /// [`Self::repeat_entries`] before they are finished, with their own warnings, under
    /// label id `id`: for several runs finished together.
    pub fn raw_repeat_entries(
        &self,
        id: u32,
        label: &str,
        names: &[String],
        tasks: usize,
    ) -> Vec<(RepeatEntry, Warnings)> {
        if self.repeats.len() < 2 {
            return Vec::new();
        }
        let mut alpha: Vec<usize> = (0..names.len()).collect();
        alpha.sort_by(|&a, &b| names[a].cmp(&names[b]));
        let entries = self
            .repeats
            .iter()
            .map(|(&r, rep)| {
                let mut w = Warnings::default();
                let mut e = repeat_head(r, rep.tasks, tasks);
                for &g in &alpha {
                    let c = &rep.fields[g];
                    if c.present == 0 {
                        continue;
                    }
                    let n = c.present as usize;
                    let std = c.var.map_or(0.0, f64::sqrt);
                    let what = || format!("`{}`, {label}, repeat {r}", names[g]);
                    repeat_field_members(&names[g], n, c.mean, std, |k| c.at(k), &mut e, &mut w, what);
                }
                ((id, r, e), w)
            })
            .collect();
        entries
    }
}
