//! How both bucket-by-bucket merges read a sweep: its slices in bucket order, each with
//! the input rows of its tasks (the inputs file cut by task range, or the input slices
//! of those tasks), one slice read ahead on a thread of its own; and the whole-sweep
//! checks of the rollouts against their inputs, gathered bucket by bucket.
//!
//! Buckets are ranges of tasks, so the input rows of one bucket's tasks are all those
//! its rollouts may join to, and line numbers count files as the whole sweep does, so
//! rows of different buckets compare by line and are named as in the whole table.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use crate::error::{Error, Location, Result};
use crate::ingest::input_slice::SlicedInputs;
use crate::ingest::labels::{input_labels, run_keys, NONE};
use crate::ingest::slice::read_slices;
use crate::ingest::{InputTable, LineMap, RolloutTable};

/// A merge's materialized inputs: the file, read whole, or its input slices, read a
/// range of tasks at a time.
#[allow(clippy::large_enum_variant)] // one per merge
pub(super) enum MergeInputs {
    /// The file; `by_task` orders its rows by task when they are not (stable).
    File {
        t: InputTable,
        by_task: Option<Vec<usize>>,
    },
    Sliced(SlicedInputs),
}

impl MergeInputs {
    /// The inputs file, read whole.
    pub(super) fn file(t: InputTable) -> MergeInputs {
        let by_task = (!t.task.is_sorted()).then(|| {
            let mut o: Vec<usize> = (0..t.len()).collect();
            o.sort_by_key(|&r| t.task[r]);
            o
        });
        MergeInputs::File { t, by_task }
    }

    /// The inputs file, as messages name it.
    pub(super) fn path(&self) -> &Path {
        match self {
            MergeInputs::File { t, .. } => &t.path,
            MergeInputs::Sliced(s) => &s.path,
        }
    }

    /// The inputs file's read warnings (a cut-off last line).
    pub(super) fn read_warnings(&self) -> Vec<String> {
        match self {
            MergeInputs::File { t, .. } => t.report.warnings.clone(),
            MergeInputs::Sliced(s) => s.warnings().to_vec(),
        }
    }

    /// Run labels, settled over every input row.
    pub(super) fn labels(&self) -> HashMap<String, String> {
        match self {
            MergeInputs::File { t, .. } => input_labels(t),
            MergeInputs::Sliced(s) => s.labels(),
        }
    }

    /// Tasks after `after` up to `upto` cut into ranges of bounded input rows: an input
    /// bucket each, or for the file about a million rows, whole tasks each.
    fn cut(&self, after: Option<i64>, upto: Option<i64>) -> Vec<(Option<i64>, Option<i64>)> {
        const ROWS: usize = 1 << 20;
        let (t, by_task) = match self {
            MergeInputs::Sliced(s) => return s.cut(after, upto),
            MergeInputs::File { t, by_task } => (t, by_task),
        };
        let task_at = |k: usize| by_task.as_ref().map_or(t.task[k], |o| t.task[o[k]]);
        let (lo, hi) = self.positions(after, upto);
        let mut out = Vec::new();
        let mut start = lo;
        while start < hi {
            let mut end = (start + ROWS).min(hi);
            while end < hi && task_at(end) == task_at(end - 1) {
                end += 1;
            }
            let a = if start == lo { after } else { Some(task_at(start - 1)) };
            let z = if end == hi { upto } else { Some(task_at(end - 1)) };
            out.push((a, z));
            start = end;
        }
        out
    }

    /// For the file: the positions (in task order) of the tasks after `after` up to `upto`.
    fn positions(&self, after: Option<i64>, upto: Option<i64>) -> (usize, usize) {
        let MergeInputs::File { t, by_task } = self else { return (0, 0) };
        // The first position whose task is above `x`.
        let above = |x: i64| match by_task {
            None => t.task.partition_point(|&k| k <= x),
            Some(o) => o.partition_point(|&r| t.task[r] <= x),
        };
        let lo = after.map_or(0, above);
        (lo, upto.map_or(t.len(), above).max(lo))
    }

    /// The input rows of the tasks after `after` up to `upto` (`None`: no bound), in
    /// the file's order.
    fn range(&self, after: Option<i64>, upto: Option<i64>) -> Result<InputTable> {
        match self {
            MergeInputs::Sliced(s) => s.for_range(after, upto),
            MergeInputs::File { t, by_task } => {
                let (lo, hi) = self.positions(after, upto);
                let rows: Vec<usize> = match by_task {
                    None => (lo..hi).collect(),
                    Some(o) => {
                        let mut r = o[lo..hi].to_vec();
                        r.sort_unstable();
                        r
                    }
                };
                Ok(t.subset(&rows))
            }
        }
    }
}

/// One step of a pass: a bucket of rollouts read from `slice` (or none, for input rows
/// of tasks without rollouts) with the input rows of its tasks when the merge has inputs.
pub(super) struct Step<'a> {
    pub(super) t: RolloutTable,
    pub(super) inputs: Option<InputTable>,
    /// The slice the rollouts came from (the sweep's name for input rows alone).
    pub(super) slice: &'a Path,
}

/// Reads the slices in order as steps, the input rows cut by task range so that the
/// ranges tile the tasks: a bucket takes the input rows of its own tasks (from its first
/// to its last); with `gaps`, the input rows of the tasks between buckets, before the
/// first and after the last come as steps of their own, one input bucket (or a bounded
/// number of rows) at a time.
struct Steps<'a> {
    sweep: Sweep<'a>,
    lines: LineMap,
    gaps: bool,
    /// The next slice to read (one past the last once the tasks after it are cut).
    next: usize,
    last: Option<i64>,
    pending: VecDeque<(Option<i64>, Option<i64>)>,
    ready: Option<Result<Step<'a>>>,
}

impl<'a> Iterator for Steps<'a> {
    type Item = Result<Step<'a>>;

    /// The next step; after an error the caller stops (reading on is harmless).
    fn next(&mut self) -> Option<Result<Step<'a>>> {
        let Sweep { slices, name, inputs } = self.sweep;
        loop {
            if let (Some((a, b)), Some(inp)) = (self.pending.pop_front(), inputs) {
                let t = RolloutTable::empty(self.lines.clone());
                return Some(inp.range(a, b).map(|inp| Step { t, inputs: Some(inp), slice: name }));
            }
            if let Some(s) = self.ready.take() {
                return Some(s);
            }
            let Some(slice) = slices.get(self.next) else {
                // Past the last bucket: the tasks after it, once.
                let after = (self.next == slices.len() && self.gaps).then_some(inputs).flatten();
                self.pending.extend(after.map(|inp| inp.cut(self.last, None)).unwrap_or_default());
                self.next = slices.len() + 1;
                if self.pending.is_empty() {
                    return None;
                }
                continue;
            };
            self.next += 1;
            let t = match read_bucket(slice, name, &mut self.lines) {
                Ok(t) => t,
                Err(e) => return Some(Err(e)),
            };
            let (Some(&first), Some(&last)) = (t.task.first(), t.task.last()) else { continue };
            // The tasks before this bucket's first that no bucket holds.
            let before = first.checked_sub(1);
            if let (true, Some(inp), Some(_)) = (self.gaps, inputs, before) {
                self.pending.extend(inp.cut(self.last, before));
            }
            self.last = Some(last);
            let inputs = inputs.map(|inp| inp.range(before, Some(last))).transpose();
            self.ready = Some(inputs.map(|inputs| Step { t, inputs, slice }));
        }
    }
}

/// A sweep as its slices in bucket order, named `name` (the file the artifacts are
/// named for), with its inputs when the merge has them.
#[derive(Clone, Copy)]
pub(super) struct Sweep<'a> {
    pub(super) slices: &'a [PathBuf],
    pub(super) name: &'a Path,
    pub(super) inputs: Option<&'a MergeInputs>,
}

impl Sweep<'_> {
    /// Runs `each` on every step of the slices (in task order, with the input rows of
    /// their tasks), read one ahead; then the files of every slice, numbered as the whole
    /// table numbers them. `gaps`: the input rows of tasks without rollouts come too.
    pub(super) fn each_step<E: From<Error>>(
        &self,
        gaps: bool,
        mut each: impl FnMut(&Step<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<LineMap, E> {
        let steps = Steps {
            sweep: *self,
            lines: LineMap::default(),
            gaps,
            next: 0,
            last: None,
            pending: VecDeque::new(),
            ready: None,
        };
        Ok(prefetched(steps, |s| each(&s?))?.lines)
    }
}

/// Hands the items of `items` to `each` in order, each drawn on a thread of its own one
/// item ahead, so reading the next slice overlaps working on this one (at most two are
/// held). Drawing stops after an item that is an error, and `each` returning one stops
/// the loop; else the iterator comes back once drawn to its end.
fn prefetched<I: Iterator<Item = Result<T>> + Send, T: Send, E>(
    mut items: I,
    mut each: impl FnMut(Result<T>) -> std::result::Result<(), E>,
) -> std::result::Result<I, E> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel(0);
        let drawing = scope.spawn(move || {
            for x in items.by_ref() {
                let failed = x.is_err();
                if tx.send(x).is_err() || failed {
                    break;
                }
            }
            items
        });
        for x in rx.iter() {
            each(x)?;
        }
        Ok(drawing.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    })
}

/// Reads one slice as a table whose line numbers count files as the whole sweep does
/// (`lines`, grown by the files this slice names).
fn read_bucket(slice: &Path, name: &Path, lines: &mut LineMap) -> Result<RolloutTable> {
    let mut t = read_slices(&[slice.to_path_buf()], name)?;
    let map: Vec<usize> = t.lines.files().iter().map(|f| lines.file(f)).collect();
    for l in &mut t.line {
        let (file, line) = LineMap::split(*l);
        *l = LineMap::number(map[file], line);
    }
    t.lines = lines.clone();
    Ok(t)
}

/// The runs of one bucket table: its run keys (with whether each is a server stamp;
/// `None` for the rollouts nothing names, always last) and each row's index into them,
/// or [`ORPHAN`] for a rollout without an input row when inputs are given.
pub(super) struct BucketRuns {
    pub(super) keys: Vec<(Option<String>, bool)>,
    pub(super) row: Vec<u32>,
}

pub(super) const ORPHAN: u32 = u32::MAX;

impl BucketRuns {
    pub(super) fn of(s: &Step<'_>) -> BucketRuns {
        let (t, inputs) = (&s.t, s.inputs.as_ref());
        let r = run_keys(t, inputs);
        let mut keys: Vec<(Option<String>, bool)> =
            r.keys.iter().zip(&r.key_is_server).map(|(k, &server)| (Some(k.clone()), server)).collect();
        let unnamed = keys.len() as u32;
        keys.push((None, false));
        let row = (0..t.len())
            .map(|row| match r.key[row] {
                _ if inputs.is_some() && !r.has_input[row] => ORPHAN,
                NONE => unnamed,
                k => k,
            })
            .collect();
        BucketRuns { keys, row }
    }

    /// The scored (unmasked) rows of `t` by the index `index` gives their run key (rows
    /// of runs it gives none for are left out), each in table order.
    pub(super) fn scored_by(
        &self,
        t: &RolloutTable,
        index: impl Fn(&Option<String>) -> Option<usize>,
    ) -> BTreeMap<usize, Vec<usize>> {
        let of: Vec<Option<usize>> = self.keys.iter().map(|(k, _)| index(k)).collect();
        let mut by: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (r, &k) in self.row.iter().enumerate() {
            if k != ORPHAN && !t.masked[r] {
                if let Some(i) = of[k as usize] {
                    by.entry(i).or_default().push(r);
                }
            }
        }
        by
    }
}

/// Whole-sweep checks of the rollouts against their inputs, gathered bucket by bucket
/// (the single-machine path checks the whole table; the first failing check wins, and
/// within a check the row of least line).
#[derive(Default)]
pub(super) struct RunChecks {
    any_rows: bool,
    any_reward: bool,
    any_input_row: bool,
    /// The row of least line: its line, location and key.
    first_row: Option<(u64, Location, (i64, i64))>,
    /// The contradiction of least line.
    contradiction: Option<(u64, Error)>,
}

impl RunChecks {
    /// Adds one bucket's rows `t` (not empty), with the input rows they may join to.
    pub(super) fn visit(&mut self, t: &RolloutTable, inp: &InputTable) {
        self.any_rows = true;
        self.any_reward |= t.has_response || t.column(crate::ingest::Source::Top, "reward").is_some();
        self.any_input_row |= (0..t.len()).any(|k| inp.row_of(t.task[k], t.rollout[k]).is_some());
        let first = (0..t.len()).min_by_key(|&k| t.line[k]).unwrap_or(0);
        if self.first_row.as_ref().is_none_or(|f| t.line[first] < f.0) {
            self.first_row = Some((t.line[first], t.location(first), (t.task[first], t.rollout[first])));
        }
        if let Some((line, e)) = crate::workflow::contradiction_error(t, inp) {
            if self.contradiction.as_ref().is_none_or(|f| line < f.0) {
                self.contradiction = Some((line, e));
            }
        }
    }

    /// The first check that fails, in the order the whole table's checks run (none
    /// when the sweep has no rows); `inputs` and `lines` name the files.
    pub(super) fn result(self, inputs: &Path, lines: &LineMap) -> Result<()> {
        if !self.any_rows {
            return Ok(());
        }
        if !self.any_reward {
            return Err(crate::workflow::no_results(lines, inputs));
        }
        if !self.any_input_row {
            let (_, loc, key) = self.first_row.expect("a slice holds rows");
            return Err(crate::workflow::no_input_rows(loc, key, inputs));
        }
        match self.contradiction {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prefetched;
    use crate::error::Error;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

    #[test]
    fn prefetched_hands_items_over_in_order_and_stops_at_an_error() {
        let drawn = AtomicUsize::new(0);
        let three = || Error::Usage("item 3".into());
        let items = |n: usize| (0..n).inspect(|_| _ = drawn.fetch_add(1, Relaxed)).map(|x| (x != 3).then_some(x));
        let items = |n| items(n).map(|x| x.ok_or_else(three));
        let mut seen = Vec::new();
        assert!(prefetched(items(3), |x| x.map(|x| seen.push(x))).is_ok());
        // An error among the items comes back, and nothing is drawn after it.
        assert!(matches!(prefetched(items(10), |x| x.map(|x| seen.push(x))), Err(Error::Usage(_))));
        assert_eq!((seen, drawn.load(Relaxed)), (vec![0, 1, 2, 0, 1, 2], 7));
        // An error of `each` stops the loop.
        let mut n = 0;
        let failed = prefetched(items(10), |_| {
            n += 1;
            if n == 2 {
                Err(n)
            } else {
                Ok(())
            }
        });
        assert_eq!((failed.err(), n), (Some(2), 2));
    }
}
