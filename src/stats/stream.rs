//! The pandas statistics of a column that arrives in pieces and is never held whole.
//!
//! [`PairwiseStream`] adds values one at a time in exactly numpy's pairwise order: that
//! order depends only on the number of values and their positions, so with the length
//! known in advance the tree can be walked left to right, keeping one leaf block (at
//! most 128 values) and the finished left halves of the open nodes (one per level).
//!
//! [`Select`] finds the values at given ranks of the column in sorted order (IEEE total
//! order, as [`super::sort_f64`] sorts) over repeated passes: each pass counts the
//! values by the next bits of their order key inside the bins that hold the ranks, until
//! a bin is small enough to gather and sort. Memory is a few histograms and the gathered
//! bins, whatever the length of the column.

use serde::{Deserialize, Serialize};

use super::sum::PW_BLOCKSIZE;

/// numpy's pairwise sum fed one value at a time; see [`super::pairwise_sum`]. Whole
/// nodes of the tree summed elsewhere can be fed as their sums ([`Self::push_piece`]).
pub struct PairwiseStream {
    /// Open nodes from the root down: (length, split, finished left half, first position).
    stack: Vec<(u64, u64, Option<f64>, u64)>,
    leaf: Vec<f64>,
    leaf_len: u64,
    /// Values taken so far (whole nodes count their length).
    pos: u64,
    result: Option<f64>,
    /// More values than announced, or a piece that is no node of this tree.
    broken: bool,
}

/// numpy's split of a node of `n > 128` values: half, rounded down to a multiple of 8.
fn split(n: u64) -> u64 {
    let h = n / 2;
    h - h % 8
}

impl PairwiseStream {
    /// A sum of exactly `n` values.
    pub fn new(n: u64) -> PairwiseStream {
        let mut s =
            PairwiseStream { stack: Vec::new(), leaf: Vec::new(), leaf_len: 0, pos: 0, result: None, broken: false };
        s.descend(n);
        if n == 0 {
            s.result = Some(-0.0);
        }
        s
    }

    /// Opens the nodes from one of `n` values down to its leftmost leaf.
    fn descend(&mut self, mut n: u64) {
        while n > PW_BLOCKSIZE as u64 {
            let h = split(n);
            self.stack.push((n, h, None, self.pos));
            n = h;
        }
        self.leaf_len = n;
        self.leaf.clear();
    }

    pub fn push(&mut self, x: f64) {
        if self.result.is_some() || self.broken {
            // More values than announced: `numpy_sum` reports it.
            self.broken = true;
            return;
        }
        self.leaf.push(x);
        self.pos += 1;
        if self.leaf.len() as u64 == self.leaf_len {
            self.up(super::pairwise_sum(&self.leaf));
        }
    }

    /// Takes `s`, the sum of the node just finished, up the open nodes: as the left half
    /// of the first node that has none yet (then down its right half), or added to it.
    fn up(&mut self, mut s: f64) {
        loop {
            match self.stack.last_mut() {
                None => {
                    self.result = Some(s);
                    return;
                }
                Some((n, h, left @ None, _)) => {
                    *left = Some(s);
                    let right = *n - *h;
                    self.descend(right);
                    return;
                }
                Some((_, _, Some(l), _)) => {
                    // left + right (IEEE addition commutes exactly).
                    s += *l;
                    self.stack.pop();
                }
            }
        }
    }

    /// Takes the next piece of a share of the values ([`TreeCut`]): a value, or the sum
    /// of a whole node of `len` values starting here. False (and the sum is lost) when
    /// no node of that length starts here: the shares did not cut this tree.
    pub fn push_piece(&mut self, p: Piece) -> bool {
        let (len, sum) = match p {
            Piece::Value(x) => {
                self.push(x);
                return true;
            }
            Piece::Node(len, sum) => (len, sum),
        };
        if self.result.is_some() || self.broken || !self.leaf.is_empty() {
            self.broken = true;
            return false;
        }
        if len == self.leaf_len {
            self.pos += len;
            self.up(sum);
            return true;
        }
        // The open nodes starting here were opened by one descent: at most one has `len`.
        match self.stack.iter().rposition(|&(n, _, left, start)| start == self.pos && left.is_none() && n == len) {
            Some(i) => {
                self.stack.truncate(i);
                self.pos += len;
                self.up(sum);
                true
            }
            None => {
                self.broken = true;
                false
            }
        }
    }

    /// The pairwise sum itself (not `0.0 +` it, as [`Self::numpy_sum`]): the sum of a
    /// node inside a larger tree.
    fn node_sum(&self) -> Option<f64> {
        self.result.filter(|_| !self.broken)
    }

    /// `np.sum` of the values: `0.0 +` their pairwise sum; `None` unless exactly the
    /// announced number of values was pushed.
    pub fn numpy_sum(&self) -> Option<f64> {
        self.result.filter(|_| !self.broken).map(|r| 0.0 + r)
    }
}

/// A piece of one share of a pairwise sum: a value, or the sum of a whole node of the
/// tree (its length and its pairwise sum).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Piece {
    Value(f64),
    Node(u64, f64),
}

/// The pieces of numpy's pairwise tree over `n` values that positions `[start, end)`
/// hold, in order: `(length, whole)`, a whole node (summed by its holder) or that many
/// values of a leaf block shared with a neighbouring range (passed on as they are).
fn tree_cut(n: u64, start: u64, end: u64) -> Vec<(u64, bool)> {
    fn walk(at: u64, len: u64, start: u64, end: u64, out: &mut Vec<(u64, bool)>) {
        if end <= at || at + len <= start || len == 0 {
            return;
        }
        if start <= at && at + len <= end {
            out.push((len, true));
        } else if len <= PW_BLOCKSIZE as u64 {
            out.push((end.min(at + len) - start.max(at), false));
        } else {
            let h = split(len);
            walk(at, h, start, end, out);
            walk(at + h, len - h, start, end, out);
        }
    }
    let mut out = Vec::new();
    if start < end.min(n) {
        walk(0, n, start, end.min(n), &mut out);
    }
    out
}

/// One share of a pairwise sum: the values at positions `[start, start + len)` of a sum
/// of `n`, summed as far as the share can (each whole node of the tree inside it), so
/// that feeding every share's pieces in order to a [`PairwiseStream`] of `n` gives
/// numpy's sum bit for bit. A share holds at most two pieces per level of the tree
/// plus at most 254 values (of the two leaf blocks it shares with its neighbours).
pub struct TreeCut {
    plan: std::vec::IntoIter<(u64, bool)>,
    /// The piece being filled: values still wanted, and the node's sum so far.
    current: Option<(u64, Option<PairwiseStream>)>,
    out: Vec<Piece>,
    /// More values came than the share holds.
    over: bool,
}

impl TreeCut {
    pub fn new(n: u64, start: u64, len: u64) -> TreeCut {
        let plan = tree_cut(n, start, start.saturating_add(len));
        let fits = start.checked_add(len).is_some_and(|e| e <= n);
        let mut c = TreeCut { plan: plan.into_iter(), current: None, out: Vec::new(), over: !fits };
        c.next_piece();
        c
    }

    fn next_piece(&mut self) {
        self.current = self.plan.next().map(|(len, whole)| (len, whole.then(|| PairwiseStream::new(len))));
    }

    pub fn push(&mut self, x: f64) {
        let Some((left, node)) = &mut self.current else {
            self.over = true;
            return;
        };
        match node {
            Some(s) => s.push(x),
            None => self.out.push(Piece::Value(x)),
        }
        *left -= 1;
        if *left == 0 {
            if let Some((_, Some(s))) = self.current.take() {
                self.out.push(Piece::Node(s.pos, s.node_sum().expect("a node of the values pushed")));
            }
            self.next_piece();
        }
    }

    /// The share's pieces, or `None` unless exactly its values were pushed.
    pub fn finish(self) -> Option<Vec<Piece>> {
        (!self.over && self.current.is_none()).then_some(self.out)
    }
}

/// Bits of the order key fixed by the first round: sign and exponent.
const FIRST_BITS: u32 = 12;
/// Bits each later counting round adds.
const ROUND_BITS: u32 = 12;
/// A bin of at most this many values is gathered and sorted instead of counted again.
const GATHER: u64 = 1 << 16;
/// The first pass keeps up to this many values (as many bytes as its histogram) before it
/// starts counting: a short column is sorted at the end of that pass, with no histogram.
const FIRST_KEEP: usize = 1 << FIRST_BITS;

/// The key whose unsigned order is `f64::total_cmp`'s order.
pub fn order_key(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

fn from_order_key(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}

#[derive(Serialize, Deserialize)]
enum Work {
    /// Counts per value of the next `bits` bits of the key.
    Count {
        bits: u32,
        counts: Vec<u64>,
    },
    Gather(Vec<f64>),
}

/// The values whose key starts with `prefix` (its top `fixed` bits), with the ranks
/// (among them) still to find there.
#[derive(Serialize, Deserialize)]
struct Target {
    prefix: u64,
    fixed: u32,
    /// (rank in the column, rank among this target's values)
    ranks: Vec<(u64, u64)>,
    work: Work,
    /// The least and greatest key seen: when they are equal, every value is that one
    /// (a column of many equal values would otherwise be narrowed bit by bit).
    lo: u64,
    hi: u64,
}

impl Target {
    fn holds(&self, key: u64) -> bool {
        self.fixed == 0 || key >> (64 - self.fixed) == self.prefix
    }
}

/// Exact order statistics of a column read in several passes; see the module notes.
#[derive(Serialize, Deserialize)]
pub struct Select {
    targets: Vec<Target>,
    found: Vec<(u64, f64)>,
    first: bool,
    /// The first values of the first pass, until there are too many to keep.
    kept: Option<Vec<f64>>,
    /// A pass saw other values than the passes before it (the column changed).
    changed: bool,
}

impl Default for Select {
    fn default() -> Self {
        Select::new()
    }
}

impl Select {
    /// Ready for the first pass, which counts every value by sign and exponent; the
    /// ranks are named when it ends ([`Select::end_pass`]).
    pub fn new() -> Select {
        Select { targets: Vec::new(), found: Vec::new(), first: true, kept: Some(Vec::new()), changed: false }
    }

    /// Whether another pass over the column is needed.
    pub fn wants_pass(&self) -> bool {
        self.kept.is_some() || !self.targets.is_empty()
    }

    /// Stops keeping the first pass's values: counts them, and every value after them.
    fn count_kept(&mut self) {
        let first = Target {
            prefix: 0,
            fixed: 0,
            ranks: Vec::new(),
            work: Work::Count { bits: FIRST_BITS, counts: vec![0; 1 << FIRST_BITS] },
            lo: u64::MAX,
            hi: 0,
        };
        self.targets.push(first);
        for x in self.kept.take().expect("kept values") {
            self.push(x);
        }
    }

    pub fn push(&mut self, x: f64) {
        if let Some(kept) = &mut self.kept {
            if kept.len() < FIRST_KEEP {
                kept.push(x);
                return;
            }
            self.count_kept();
        }
        let key = order_key(x);
        for t in &mut self.targets {
            if !t.holds(key) {
                continue;
            }
            t.lo = t.lo.min(key);
            t.hi = t.hi.max(key);
            match &mut t.work {
                Work::Count { bits, counts } => {
                    let shift = 64 - t.fixed - *bits;
                    counts[((key >> shift) & ((1u64 << *bits) - 1)) as usize] += 1;
                }
                Work::Gather(v) => v.push(x),
            }
        }
    }

    /// Ends a pass. The first pass names the ranks wanted (each below the number of
    /// values pushed); later passes pass `&[]`.
    pub fn end_pass(&mut self, ranks: &[u64]) {
        if std::mem::take(&mut self.first) {
            let mut r: Vec<u64> = ranks.to_vec();
            r.sort_unstable();
            r.dedup();
            if let Some(mut kept) = self.kept.take() {
                super::sort_f64(&mut kept);
                for &k in &r {
                    match kept.get(k as usize) {
                        Some(&x) => self.found.push((k, x)),
                        None => self.changed = true,
                    }
                }
                return;
            }
            if self.targets.is_empty() {
                self.changed |= !r.is_empty();
                return;
            }
            self.targets[0].ranks = r.iter().map(|&k| (k, k)).collect();
        }
        let mut next = Vec::new();
        for t in std::mem::take(&mut self.targets) {
            if t.lo == t.hi {
                self.found.extend(t.ranks.iter().map(|&(k, _)| (k, from_order_key(t.lo))));
                continue;
            }
            match t.work {
                Work::Gather(mut v) => {
                    super::sort_f64(&mut v);
                    for &(k, within) in &t.ranks {
                        match v.get(within as usize) {
                            Some(&x) => self.found.push((k, x)),
                            None => self.changed = true,
                        }
                    }
                }
                Work::Count { bits, counts } => {
                    let fixed = t.fixed + bits;
                    // Ranks in increasing order fall in bins in increasing order.
                    let mut below = 0u64;
                    let mut bin = 0usize;
                    for &(k, within) in &t.ranks {
                        while bin < counts.len() && below + counts[bin] <= within {
                            below += counts[bin];
                            bin += 1;
                        }
                        if bin == counts.len() {
                            self.changed = true;
                            break;
                        }
                        let prefix = if t.fixed == 0 { bin as u64 } else { t.prefix << bits | bin as u64 };
                        let rank = (k, within - below);
                        if fixed == 64 {
                            self.found.push((k, from_order_key(prefix)));
                            continue;
                        }
                        match next.last_mut() {
                            Some(Target { prefix: p, fixed: f, ranks, .. }) if *p == prefix && *f == fixed => {
                                ranks.push(rank)
                            }
                            _ => {
                                let n = counts[bin];
                                let work = if n <= GATHER {
                                    Work::Gather(Vec::with_capacity(n as usize))
                                } else {
                                    let bits = ROUND_BITS.min(64 - fixed);
                                    Work::Count { bits, counts: vec![0; 1 << bits] }
                                };
                                next.push(Target { prefix, fixed, ranks: vec![rank], work, lo: u64::MAX, hi: 0 });
                            }
                        }
                    }
                }
            }
        }
        self.targets = next;
    }

    /// An empty state for one share of this pass's values (read elsewhere, say one
    /// bucket of them): the same bins, nothing counted. Its values go back with
    /// [`Self::absorb`].
    pub fn share(&self) -> Select {
        if self.first {
            return Select::new();
        }
        let targets = self
            .targets
            .iter()
            .map(|t| Target {
                prefix: t.prefix,
                fixed: t.fixed,
                ranks: Vec::new(),
                work: match &t.work {
                    Work::Count { bits, counts } => Work::Count { bits: *bits, counts: vec![0; counts.len()] },
                    Work::Gather(_) => Work::Gather(Vec::new()),
                },
                lo: u64::MAX,
                hi: 0,
            })
            .collect();
        Select { targets, found: Vec::new(), first: false, kept: None, changed: false }
    }

    /// Adds what a [`Self::share`] of this pass counted, as if its values had been
    /// pushed here. Shares of another pass or column make the column [`Self::changed`].
    pub fn absorb(&mut self, other: Select) {
        self.changed |= other.changed;
        if let Some(kept) = other.kept {
            for x in kept {
                self.push(x);
            }
            return;
        }
        if other.targets.is_empty() {
            return;
        }
        if self.kept.is_some() {
            self.count_kept();
        }
        if other.targets.len() != self.targets.len() {
            self.changed = true;
            return;
        }
        for (t, o) in self.targets.iter_mut().zip(other.targets) {
            if o.lo > o.hi {
                continue;
            }
            t.lo = t.lo.min(o.lo);
            t.hi = t.hi.max(o.hi);
            match (&mut t.work, o.work) {
                (Work::Count { counts, .. }, Work::Count { counts: more, .. }) if counts.len() == more.len() => {
                    for (a, b) in counts.iter_mut().zip(more) {
                        *a += b;
                    }
                }
                (Work::Gather(v), Work::Gather(more)) => v.extend(more),
                _ => self.changed = true,
            }
        }
    }

    /// Whether a state read back (between passes, or a share after its pass) is one
    /// the passes could have left: a few bins searched, each counting whole bits of the
    /// key in a histogram of their size.
    pub fn valid(&self) -> bool {
        self.targets.len() <= 16
            && self.targets.iter().all(|t| {
                t.fixed <= 64
                    && (t.fixed > 0 || t.prefix == 0)
                    && match &t.work {
                        Work::Count { bits, counts } => {
                            (1..=FIRST_BITS.max(ROUND_BITS)).contains(bits)
                                && t.fixed + bits <= 64
                                && counts.len() == 1 << bits
                        }
                        Work::Gather(_) => true,
                    }
            })
    }

    /// Whether some pass saw fewer values than the ranks named need: the column was not
    /// the same in every pass. The ranks are then not all found.
    pub fn changed(&self) -> bool {
        self.changed
    }

    /// The value at `rank` (in sorted order), once no pass is wanted. Panics for a rank
    /// not named.
    pub fn at(&self, rank: u64) -> f64 {
        self.found.iter().find(|f| f.0 == rank).expect("a rank named after the first pass").1
    }

    /// Whether the value at `rank` was found (a state read back may lack it).
    pub fn has(&self, rank: u64) -> bool {
        self.found.iter().any(|f| f.0 == rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lcg(seed: &mut u64) -> u64 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *seed >> 11
    }

    /// `n` values of mixed magnitude and sign, where the order of the additions shows.
    fn mixed(seed: &mut u64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let r = lcg(seed);
                let mag = [1e-3, 1.0, 1e9, 1e16][(r % 4) as usize];
                (r % 1_000_003) as f64 * mag * if r & 16 == 0 { 1.0 } else { -1.0 }
            })
            .collect()
    }

    #[test]
    fn streamed_sums_are_numpy_sums_bit_for_bit() {
        let mut seed = 7u64;
        let mut lens: Vec<usize> = (0..300).collect();
        lens.extend([1000, 1023, 1024, 1025, 4096 + 8, 65_537, 200_003]);
        for n in lens {
            let xs = mixed(&mut seed, n);
            let mut s = PairwiseStream::new(n as u64);
            for &x in &xs {
                s.push(x);
            }
            assert_eq!(s.numpy_sum().map(f64::to_bits), Some(super::super::numpy_sum(&xs).to_bits()), "n = {n}");
            s.push(1.0);
            assert_eq!(s.numpy_sum(), None, "a value more than announced");
        }
    }

    #[test]
    fn shares_cut_anywhere_give_numpy_sums_bit_for_bit() {
        let mut seed = 5u64;
        let mut lens: Vec<u64> = (0..260).collect();
        lens.extend([1000, 1024, 1031, 4099, 65_536, 100_003]);
        for n in lens {
            let xs = mixed(&mut seed, n as usize);
            let want = super::super::numpy_sum(&xs).to_bits();
            for shares in [1usize, 2, 3, 7, 40] {
                // Random cuts, some shares empty.
                let mut cuts: Vec<u64> =
                    (0..shares - 1).map(|_| if n == 0 { 0 } else { lcg(&mut seed) % (n + 1) }).collect();
                cuts.push(0);
                cuts.push(n);
                cuts.sort_unstable();
                let mut total = PairwiseStream::new(n);
                let mut pieces = 0;
                for w in cuts.windows(2) {
                    let mut c = TreeCut::new(n, w[0], w[1] - w[0]);
                    for &x in &xs[w[0] as usize..w[1] as usize] {
                        c.push(x);
                    }
                    let got = c.finish().expect("exactly the share's values");
                    let values = got.iter().filter(|p| matches!(p, Piece::Value(_))).count();
                    assert!(values <= 2 * (PW_BLOCKSIZE - 1), "n = {n}: {values} loose values");
                    pieces += got.len();
                    for p in got {
                        assert!(total.push_piece(p), "n = {n}, cuts {cuts:?}");
                    }
                }
                assert!(pieces as u64 <= n.max(1), "never more pieces than values");
                assert_eq!(total.numpy_sum().map(f64::to_bits), Some(want), "n = {n}, cuts {cuts:?}");
            }
        }
    }

    #[test]
    fn shares_of_another_tree_or_length_are_refused() {
        let xs: Vec<f64> = (0..1000).map(|i| i as f64 * 0.1).collect();
        let mut c = TreeCut::new(1000, 0, 500);
        for &x in &xs[..499] {
            c.push(x);
        }
        assert!(c.finish().is_none(), "a value short");
        let mut c = TreeCut::new(1000, 600, 400);
        for &x in &xs[..401] {
            c.push(x);
        }
        assert!(c.finish().is_none(), "a value more");
        assert!(TreeCut::new(10, 5, 6).finish().is_none(), "a share past the end");
        // The first half of a tree of 1000 fed to a tree of 1200: its node is not one there.
        let mut c = TreeCut::new(1000, 0, 496);
        for &x in &xs[..496] {
            c.push(x);
        }
        let mut other = PairwiseStream::new(1200);
        let ok = c.finish().unwrap().into_iter().all(|p| other.push_piece(p));
        assert!(!ok && other.numpy_sum().is_none());
    }

    fn check_select(xs: &[f64]) {
        let mut sorted = xs.to_vec();
        super::super::sort_f64(&mut sorted);
        let n = xs.len() as u64;
        let ranks: Vec<u64> = [0, n / 4, n / 2, n.saturating_sub(1) / 2, n - 1].to_vec();
        let mut s = Select::new();
        let mut passes = 0;
        while s.wants_pass() {
            for &x in xs {
                s.push(x);
            }
            s.end_pass(if passes == 0 { &ranks } else { &[] });
            passes += 1;
            assert!(passes <= 7, "a rank found within the key's bits");
        }
        for &k in &ranks {
            assert_eq!(s.at(k).to_bits(), sorted[k as usize].to_bits(), "rank {k} of {n}");
        }
    }

    #[test]
    fn selected_values_are_those_of_the_sorted_column() {
        let mut seed = 11u64;
        // Spread values, signed zeros and infinities, a few values repeated many times,
        // and values that differ only in their last bits (timestamps).
        let spread: Vec<f64> = (0..300_000).map(|_| (lcg(&mut seed) % 10_000_000) as f64 / 7.0 - 7e5).collect();
        check_select(&spread);
        let mut odd = vec![0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, 1.0, -1.0, 5e-324];
        odd.extend(std::iter::repeat_n(-0.0, 100_000));
        odd.extend(std::iter::repeat_n(0.0, 100_000));
        check_select(&odd);
        let stamps: Vec<f64> =
            (0..200_000).map(|_| 1.7e9 + (lcg(&mut seed) % 1_000_000) as f64 * f64::EPSILON * 1e9).collect();
        check_select(&stamps);
        let two: Vec<f64> = (0..150_000).map(|i| if i % 3 == 0 { 0.0 } else { 1.0 }).collect();
        check_select(&two);
        for n in 1..40 {
            let small: Vec<f64> = (0..n).map(|_| (lcg(&mut seed) % 5) as f64 - 2.0).collect();
            check_select(&small);
        }
    }

    #[test]
    fn a_column_that_changes_between_passes_is_reported() {
        let xs: Vec<f64> = (0..200_000).map(|i| (i % 5000) as f64).collect();
        let mut s = Select::new();
        for &x in &xs {
            s.push(x);
        }
        s.end_pass(&[100_000, 150_000]);
        for &x in &xs[..1000] {
            s.push(x);
        }
        s.end_pass(&[]);
        assert!(s.changed());
        let mut short = Select::new();
        short.push(1.0);
        short.end_pass(&[3]);
        assert!(short.changed() && !short.wants_pass());
        let mut fine = Select::new();
        for x in [3.0, 1.0, 2.0] {
            fine.push(x);
        }
        fine.end_pass(&[1]);
        assert!(!fine.changed() && !fine.wants_pass());
        assert_eq!(fine.at(1), 2.0);
    }

    #[test]
    fn states_read_back_with_bins_the_passes_never_make_are_refused() {
        let counting = || {
            let mut s = Select::new();
            (0..5000).for_each(|i| s.push(i as f64));
            s
        };
        assert!(counting().valid());
        let mut s = counting();
        let Work::Count { counts, .. } = &mut s.targets[0].work else { panic!("a histogram") };
        counts.pop();
        assert!(!s.valid(), "a histogram smaller than its bits");
        let mut s = counting();
        let Work::Count { bits, .. } = &mut s.targets[0].work else { panic!("a histogram") };
        *bits = 13;
        assert!(!s.valid(), "more bits than a round counts");
        let mut s = counting();
        s.targets[0].prefix = 1;
        assert!(!s.valid(), "a prefix of no bits");
    }

    #[test]
    fn order_keys_follow_total_order() {
        let xs = [f64::NEG_INFINITY, -1e300, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0, 1e300, f64::INFINITY];
        for w in xs.windows(2) {
            assert!(order_key(w[0]) < order_key(w[1]));
        }
        for &x in &xs {
            assert_eq!(from_order_key(order_key(x)).to_bits(), x.to_bits());
        }
    }
}
