//! The agent and repeat levels of one run, read bucket by bucket without keeping a
//! column (both bucket-by-bucket merges).
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

use serde::{Deserialize, Serialize};

use crate::json::Members;
use crate::metrics::levels::{
    describe_members, finish_repeats, one_rollout_rule, repeat_field_members, repeat_head, Profiled, RepeatEntry,
    StatKeys,
};
use crate::metrics::warnings::Warnings;
use crate::stats::stream::{PairwiseStream, Piece, Select, TreeCut};
use crate::stats::{median_at, positions_for};

/// Where the passes are.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Pass {
    Count,
    Sum,
    Square,
    Select,
}

impl Pass {
    /// The pass after this one (selecting passes follow each other).
    fn next(self) -> Pass {
        match self {
            Pass::Count => Pass::Sum,
            Pass::Sum => Pass::Square,
            Pass::Square | Pass::Select => Pass::Select,
        }
    }
}

/// One column's statistics: an agent's field (missing values zero-filled in place, as
/// pandas sums them) or a repeat's field (present values only).
#[derive(Serialize, Deserialize)]
struct Column {
    present: u64,
    lo: f64,
    hi: f64,
    ilo: i64,
    ihi: i64,
    select: Select,
    /// The sums the pass adds to: fresh between passes, so a state read back opens them
    /// again ([`Self::open_sums`]).
    #[serde(skip)]
    sum: Option<PairwiseStream>,
    #[serde(skip)]
    square: Option<PairwiseStream>,
    mean: f64,
    var: Option<f64>,
    /// Values taken in this pass (missing ones too where they are zero-filled).
    seen: u64,
    /// The length of the column's sums (the run's rows where missing values are
    /// zero-filled, else the values present), once counted.
    len: u64,
    /// In a share: where its values lie in the column (until it is closed), and their
    /// pieces of the sum.
    #[serde(skip)]
    cut: Option<TreeCut>,
    pieces: Option<Vec<Piece>>,
    /// A share held other values than the column's (or none of them): the column changed.
    broken: bool,
    /// Per bucket holding present values (by the first task of the run's rows there):
    /// the values before it and its own, for a column of present values only.
    starts: Vec<(i64, u64, u64)>,
    /// A digest of the values counted, bucket by bucket: tells a plan of other values
    /// (a sweep scored again) from the one counted, not a checksum against malice.
    digest: u64,
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
            len: 0,
            cut: None,
            pieces: None,
            broken: false,
            starts: Vec::new(),
            digest: 0,
        }
    }

    /// An empty column for one bucket's share of the next pass, whose values of this
    /// column are at `at` (first position, count) when it has any.
    fn share(&self, pass: Pass, at: Option<(u64, u64)>) -> Column {
        let mut c = Column::new();
        c.mean = self.mean;
        c.len = self.len;
        c.select = self.select.share();
        let summed = match pass {
            Pass::Sum => self.sum.is_some(),
            Pass::Square => self.square.is_some(),
            Pass::Count | Pass::Select => false,
        };
        if summed {
            let (start, n) = at.unwrap_or((0, 0));
            c.cut = Some(TreeCut::new(self.len, start, n));
        }
        c
    }

    /// Ends a share: its pieces of the sum are settled.
    fn close_share(&mut self) {
        if let Some(c) = self.cut.take() {
            match c.finish() {
                Some(p) => self.pieces = Some(p),
                None => self.broken = true,
            }
        }
    }

    /// Adds a share of this pass, as if its values had been visited here.
    fn absorb(&mut self, pass: Pass, o: Column) {
        self.seen += o.seen;
        self.broken |= o.broken;
        match pass {
            Pass::Count => {
                if o.present > 0 {
                    if self.present == 0 || o.lo.total_cmp(&self.lo).is_lt() {
                        self.lo = o.lo;
                    }
                    if self.present == 0 || o.hi.total_cmp(&self.hi).is_gt() {
                        self.hi = o.hi;
                    }
                    self.ilo = self.ilo.min(o.ilo);
                    self.ihi = self.ihi.max(o.ihi);
                }
                self.present += o.present;
                self.digest = mix(self.digest, o.digest);
            }
            Pass::Sum | Pass::Square => {
                let stream = if pass == Pass::Sum { &mut self.sum } else { &mut self.square };
                if let (Some(s), Some(pieces)) = (stream, o.pieces) {
                    for p in pieces {
                        if !s.push_piece(p) {
                            self.broken = true;
                            break;
                        }
                    }
                }
            }
            Pass::Select => {}
        }
        self.select.absorb(o.select);
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
                self.digest = mix(self.digest, x.to_bits());
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
            Pass::Sum | Pass::Square => {
                let v = match missing {
                    true => 0.0,
                    false if pass == Pass::Sum => x,
                    false => {
                        let d = self.mean - x;
                        d * d
                    }
                };
                let stream = if pass == Pass::Sum { &mut self.sum } else { &mut self.square };
                match (&mut self.cut, stream) {
                    (Some(c), _) => c.push(v),
                    (None, Some(s)) => s.push(v),
                    (None, None) => {}
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
        let same = (pass == Pass::Count || seen == len) && !std::mem::take(&mut self.broken);
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
                self.len = len;
            }
            Pass::Sum => {
                self.select.end_pass(&[]);
                if let Some(s) = self.sum.take() {
                    let Some(sum) = s.numpy_sum() else { return false };
                    self.mean = sum / n as f64;
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
        self.open_sums(pass.next());
        same && !self.select.changed()
    }

    /// Opens the sums pass `next` adds to: the values' for the mean (of a column with
    /// values), their squared deviations' for the variance (with two or more).
    fn open_sums(&mut self, next: Pass) {
        let n = self.present;
        self.sum = (next == Pass::Sum && n > 0).then(|| PairwiseStream::new(self.len));
        self.square = (next == Pass::Square && n > 1).then(|| PairwiseStream::new(self.len));
    }

    /// Whether the column's statistics are all known (see [`LeanRun::finished`]).
    fn settled(&self) -> bool {
        let n = self.present;
        let ranks = match n {
            0 => Vec::new(),
            _ => positions_for(n as usize, &[0.25, 0.75]),
        };
        !self.select.wants_pass()
            && !self.select.changed()
            && (n < 2 || self.var.is_some())
            && ranks.into_iter().all(|k| k == 0 || k as u64 == n - 1 || self.select.has(k as u64))
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

#[derive(Serialize, Deserialize)]
struct Repeat {
    /// The last task counted, within the counting pass over a bucket.
    #[serde(skip)]
    last_task: Option<i64>,
    tasks: usize,
    fields: Vec<Column>,
}

impl Repeat {
    fn new() -> Repeat {
        Repeat { last_task: None, tasks: 0, fields: Vec::new() }
    }
}

/// What one run keeps of its scored rollouts for the agent and repeat levels.
#[derive(Serialize, Deserialize)]
pub struct LeanRun {
    /// Scored rollouts seen (the length of the agent's columns).
    rows: u64,
    /// By field, in the run's order of first appearance.
    fields: Vec<Column>,
    repeats: BTreeMap<i64, Repeat>,
    pass: Pass,
    /// Per bucket holding rows (by the first task of the run's rows there): the rows
    /// before it and its own.
    bucket_rows: Vec<(i64, u64, u64)>,
}

impl Default for LeanRun {
    fn default() -> Self {
        LeanRun { rows: 0, fields: Vec::new(), repeats: BTreeMap::new(), pass: Pass::Count, bucket_rows: Vec::new() }
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
            let repeat = self.repeats.entry(r).or_insert_with(Repeat::new);
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
        self.pass = pass.next();
        Ok(self.pass != Pass::Select || self.columns().any(|c| c.select.wants_pass()))
    }

    /// An empty state for one bucket's share of this pass: the bucket whose rows of the
    /// run start at task `first_task`. Its rows go to [`Self::visit`] (every field of the
    /// run, in order) and it comes back with [`Self::absorb`], wherever it was read. The
    /// counting pass needs no state: its share is a fresh [`LeanRun`].
    pub fn share(&self, first_task: i64) -> LeanRun {
        // Starts are kept in bucket order, so by increasing first task.
        let at = |starts: &[(i64, u64, u64)]| {
            starts.binary_search_by_key(&first_task, |s| s.0).ok().map(|i| (starts[i].1, starts[i].2))
        };
        let rows = at(&self.bucket_rows);
        LeanRun {
            rows: 0,
            fields: self.fields.iter().map(|c| c.share(self.pass, rows)).collect(),
            repeats: self
                .repeats
                .iter()
                .map(|(&r, rep)| {
                    let fields = rep.fields.iter().map(|c| c.share(self.pass, at(&c.starts))).collect();
                    (r, Repeat { fields, ..Repeat::new() })
                })
                .collect(),
            pass: self.pass,
            bucket_rows: Vec::new(),
        }
    }

    /// Ends a share: its pieces of the sums are settled (and what it holds can be
    /// written and read elsewhere).
    pub fn close_share(&mut self) {
        self.columns_mut().for_each(Column::close_share);
    }

    /// Adds one bucket's closed share of this pass (the bucket whose rows of the run
    /// start at task `first_task`), in bucket order, as if its rows had been visited
    /// here; the share's field `f` is the run's field `global[f]`.
    pub fn absorb(&mut self, first_task: i64, share: LeanRun, global: &[usize]) {
        let pass = self.pass;
        if pass == Pass::Count {
            self.bucket_rows.push((first_task, self.rows, share.rows));
            self.rows += share.rows;
            let need = global.iter().map(|&g| g + 1).max().unwrap_or(0);
            while self.fields.len() < need {
                self.fields.push(Column::new());
            }
        }
        for (c, &g) in share.fields.into_iter().zip(global) {
            self.fields[g].absorb(pass, c);
        }
        let width = self.fields.len();
        for (r, rep) in share.repeats {
            let mine = match pass {
                Pass::Count => self.repeats.entry(r).or_insert_with(Repeat::new),
                _ => match self.repeats.get_mut(&r) {
                    Some(m) => m,
                    None => {
                        // A repeat the counting pass did not see: the column changed.
                        self.fields.iter_mut().for_each(|c| c.broken = true);
                        continue;
                    }
                },
            };
            if pass == Pass::Count {
                mine.tasks += rep.tasks;
                if mine.fields.len() < width {
                    mine.fields.resize_with(width, Column::new);
                }
            }
            for (c, &g) in rep.fields.into_iter().zip(global) {
                let Some(col) = mine.fields.get_mut(g) else { continue };
                if pass == Pass::Count && c.present > 0 {
                    col.starts.push((first_task, col.present, c.present));
                }
                col.absorb(pass, c);
            }
        }
    }

    /// Whether a state read back (between passes, or a closed share) is one the passes
    /// could have left; it then has the sums its pass adds to, which are not written.
    pub(crate) fn restore(&mut self) -> bool {
        let (width, pass) = (self.fields.len(), self.pass);
        // A repeat has every field of its run, or none (a run of one repeat); buckets
        // are looked up by first task, in increasing order.
        let increasing = |s: &[(i64, u64, u64)]| s.windows(2).all(|w| w[0].0 < w[1].0);
        if self.repeats.values().any(|r| !r.fields.is_empty() && r.fields.len() != width)
            || !increasing(&self.bucket_rows)
        {
            return false;
        }
        for c in self.columns_mut() {
            if !c.select.valid() || !increasing(&c.starts) {
                return false;
            }
            c.open_sums(pass);
        }
        true
    }

    /// The run's rows and each field's count of present values.
    pub fn counts(&self) -> (u64, Vec<u64>) {
        (self.rows, self.fields.iter().map(|c| c.present).collect())
    }

    /// What the counting pass found, to tell the rows a state was counted from: rows
    /// and buckets, and per column its counts, extremes, bucket starts and the digest
    /// of its values.
    pub fn fingerprint(&self) -> Vec<u64> {
        let mut f = vec![self.rows];
        for &(t, a, n) in &self.bucket_rows {
            f.extend([t as u64, a, n]);
        }
        let column = |c: &Column, f: &mut Vec<u64>| {
            f.extend([c.present, c.lo.to_bits(), c.hi.to_bits(), c.ilo as u64, c.ihi as u64, c.digest]);
            for &(t, a, n) in &c.starts {
                f.extend([t as u64, a, n]);
            }
        };
        for c in &self.fields {
            column(c, &mut f);
        }
        for (&r, rep) in &self.repeats {
            f.extend([r as u64, rep.tasks as u64, rep.fields.len() as u64]);
            for c in &rep.fields {
                column(c, &mut f);
            }
        }
        f
    }

    /// Whether every statistic is settled: no column wants another pass, and each has
    /// the values at the ranks its median and quartiles read.
    pub fn finished(&self) -> bool {
        self.pass != Pass::Count && self.columns().all(Column::settled)
    }

    fn columns(&self) -> impl Iterator<Item = &Column> {
        self.fields.iter().chain(self.repeats.values().flat_map(|r| r.fields.iter()))
    }

    fn columns_mut(&mut self) -> impl Iterator<Item = &mut Column> {
        self.fields.iter_mut().chain(self.repeats.values_mut().flat_map(|r| r.fields.iter_mut()))
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

/// Mixes `x` into the digest `h` (FNV-1a over 64-bit words).
pub(super) fn mix(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(0x0000_0100_0000_01B3)
}

#[cfg(test)]
mod tests {
    use super::{Column, LeanRun};

    #[test]
    fn a_state_whose_buckets_are_not_in_task_order_is_refused() {
        let mut l = LeanRun { bucket_rows: vec![(5, 0, 2), (3, 2, 2)], ..Default::default() };
        assert!(!l.restore(), "buckets out of order");
        l.bucket_rows.swap(0, 1);
        assert!(l.restore());
        l.fields.push(Column { starts: vec![(3, 0, 1), (3, 1, 1)], ..Column::new() });
        assert!(!l.restore(), "a column's bucket twice");
        l.fields[0].starts.pop();
        assert!(l.restore());
    }
}
