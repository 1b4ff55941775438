//! `merge profile` one bucket at a time. A bucket is a range of tasks, and every
//! statistic of the profile is computed over rows in (task, label, rollout) order, so
//! the merge need not hold the sweep's table. Each bucket of rollouts is read with the
//! input rows of its tasks (the inputs file cut by task range, or the input slices of
//! those tasks), in two passes:
//!
//! - the first joins them by rollout key, keeps for each measured rollout only its key,
//!   run and numeric values (the columns the agent and repeat levels read), and counts
//!   what the completion summary, the coverage and the errors need;
//! - once the labels are settled over the whole sweep, the levels come from those
//!   columns with the single-machine code, and a second pass writes each bucket's task
//!   entries with its own input rows as samples.
//!
//! With `--low-memory` each run keeps the low-memory aggregate's state ([`LeanRun`])
//! instead of columns, and passes of their own settle the statistics before the writing
//! pass. Custom metrics and slices whose task ranges overlap go to the whole-table merge.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::merge_lean::{passes, Columns, LeanRun};
use super::merge_rounds::{
    write_share_file, write_task_pieces, BucketInfo, Command, LevelsFrom, Plan, ProfileEntries, Share, TaskPiece,
};
use super::merge_stream::{prefetched_iter, read_bucket, MergeInputs, RunChecks};
use super::profile::ProfileConfig;
use crate::error::{Error, Result};
use crate::export::atomic::OutputSet;
use crate::export::nemo_gym::compact_array;
use crate::export::tasks::{write_task_entries, StreamError};
use crate::ingest::fields::{resolve_fields, Field};
use crate::ingest::labels::{labels_for, run_key};
use crate::ingest::{InputTable, LineMap, RolloutTable};
use crate::json::Json;
use crate::metrics::levels::{distinct, finish_repeats, Profiled, StatKeys};
use crate::metrics::profile::{
    agents_and_repeats, assemble_levels, completion_summary, coverage_counts, expected_per_group, index_by_key,
    inputs_fan_out, match_keys, measured_inputs, unmatched_error, unnamed_input, with_coverage, CompletionSummary,
};
use crate::metrics::tasks::{info_plans, quoted_names, Samples, TaskPlan};
use crate::metrics::warnings::Warnings;
use crate::trace::trace;

/// What the merge hands back for the run's summary.
pub(super) struct MergedProfile {
    pub summary: CompletionSummary,
    pub agents: Vec<Json>,
    pub warnings: Warnings,
}

/// The input rows of a range of tasks.
enum RangeInputs<'a> {
    /// The whole file; `by_task` orders its rows by task when they are not (stable).
    File {
        t: &'a InputTable,
        by_task: Option<Vec<usize>>,
    },
    Sliced(&'a crate::ingest::input_slice::SlicedInputs),
}

impl<'a> RangeInputs<'a> {
    fn new(m: &'a MergeInputs) -> RangeInputs<'a> {
        match m {
            MergeInputs::File(t) => {
                let by_task = (!t.task.is_sorted()).then(|| {
                    let mut o: Vec<usize> = (0..t.len()).collect();
                    o.sort_by_key(|&r| t.task[r]);
                    o
                });
                RangeInputs::File { t, by_task }
            }
            MergeInputs::Sliced(s) => RangeInputs::Sliced(s),
        }
    }

    /// Tasks after `after` up to `upto` cut into ranges of bounded input rows: an input
    /// bucket each, or for the file about a million rows, whole tasks each.
    fn cut(&self, after: Option<i64>, upto: Option<i64>) -> Vec<(Option<i64>, Option<i64>)> {
        const ROWS: usize = 1 << 20;
        match self {
            RangeInputs::Sliced(s) => s.cut(after, upto),
            RangeInputs::File { t, by_task } => {
                let task_at = |k: usize| match by_task {
                    None => t.task[k],
                    Some(o) => t.task[o[k]],
                };
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
        }
    }

    /// For the file: the positions (in task order) of the tasks after `after` up to `upto`.
    fn positions(&self, after: Option<i64>, upto: Option<i64>) -> (usize, usize) {
        let RangeInputs::File { t, by_task } = self else { return (0, 0) };
        let task_at = |k: usize| match by_task {
            None => t.task[k],
            Some(o) => t.task[o[k]],
        };
        // The first position whose task is above `x`.
        let above = |x: i64| {
            let (mut lo, mut hi) = (0, t.len());
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if task_at(mid) <= x {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            lo
        };
        let lo = after.map_or(0, above);
        (lo, upto.map_or(t.len(), above).max(lo))
    }

    /// The input rows of the tasks after `after` up to `upto` (`None`: no bound), in
    /// the file's order.
    fn range(&self, after: Option<i64>, upto: Option<i64>) -> Result<InputTable> {
        match self {
            RangeInputs::Sliced(s) => s.for_range(after, upto),
            RangeInputs::File { t, by_task } => {
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

/// One step of a pass: a bucket of rollouts (or none, for input rows of tasks without
/// rollouts) with the input rows of its tasks.
enum Step {
    /// A slice whose tasks do not all come after the previous slices'.
    OutOfOrder,
    Rows(Box<(RolloutTable, InputTable)>),
}

/// Reads the slices in order as steps, the input rows cut by task range so that the
/// ranges tile the tasks: a bucket takes the input rows of its own tasks (from its first
/// to its last); in the first pass, the input rows of the tasks between buckets, before
/// the first and after the last come as steps of their own, one input bucket (or a
/// bounded number of rows) at a time.
struct Steps<'a> {
    slices: &'a [PathBuf],
    name: &'a Path,
    lines: LineMap,
    inputs: &'a RangeInputs<'a>,
    counting: bool,
    next: usize,
    last: Option<i64>,
    gaps: std::collections::VecDeque<(Option<i64>, Option<i64>)>,
    ready: Option<Step>,
    done: bool,
}

impl Steps<'_> {
    fn step(&mut self) -> Option<Result<Step>> {
        loop {
            if let Some((a, b)) = self.gaps.pop_front() {
                let t = RolloutTable::empty(self.lines.clone());
                return Some(self.inputs.range(a, b).map(|inp| Step::Rows(Box::new((t, inp)))));
            }
            if let Some(s) = self.ready.take() {
                return Some(Ok(s));
            }
            if self.done {
                return None;
            }
            if self.next == self.slices.len() {
                self.done = true;
                if self.counting {
                    self.gaps.extend(self.inputs.cut(self.last, None));
                }
                continue;
            }
            let k = self.next;
            self.next += 1;
            let t = match read_bucket(&self.slices[k], self.name, &mut self.lines, None) {
                Ok(b) => b.t,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            let (Some(&first), Some(&last)) = (t.task.first(), t.task.last()) else { continue };
            if self.last.is_some_and(|l| first <= l) {
                self.done = true;
                return Some(Ok(Step::OutOfOrder));
            }
            // The tasks before this bucket's first that no bucket holds.
            let before = first.checked_sub(1);
            if self.counting && before.is_some() {
                self.gaps.extend(self.inputs.cut(self.last, before));
            }
            self.last = Some(last);
            match self.inputs.range(before, Some(last)) {
                Ok(inp) => self.ready = Some(Step::Rows(Box::new((t, inp)))),
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl Iterator for Steps<'_> {
    type Item = Result<Step>;
    fn next(&mut self) -> Option<Result<Step>> {
        self.step()
    }
}

/// What the first pass gathers.
struct Gather {
    checks: RunChecks,
    /// The first duplicate key of the inputs and of the results (key order).
    input_dup: Option<Error>,
    result_dup: Option<Error>,
    extra: usize,
    first_extra: Vec<(i64, i64)>,
    missing: usize,
    first_missing: Vec<(i64, i64)>,
    /// The first measured input row that names no agent.
    unnamed: Option<Error>,
    summary: CompletionSummary,
    /// Distinct (server, agent) pairs of the measured input rows, in key order.
    label_pairs: Vec<(Option<String>, Option<String>)>,
    /// The first task of each bucket with measured rollouts, in order.
    bucket_firsts: Vec<i64>,
    pair_seen: HashSet<(Option<String>, Option<String>)>,
    keys: Vec<String>,
    key_ids: HashMap<String, u32>,
    fan_out: bool,
    /// Measured rollouts so far.
    measured: usize,
    /// With `--low-memory`: per run key, the levels' state instead of columns, and its
    /// measured tasks.
    lean: Option<Vec<LeanRun>>,
    run_tasks: Vec<usize>,
    cov: Vec<(String, [usize; 4])>,
    cov_index: HashMap<String, usize>,
    /// The measured rollouts in (task, run key, rollout) order: key, run and values.
    task: Vec<i64>,
    rollout: Vec<i64>,
    key: Vec<u32>,
    cols: Columns,
}

impl Gather {
    fn new(lean: bool) -> Gather {
        Gather {
            measured: 0,
            lean: lean.then(Vec::new),
            run_tasks: Vec::new(),
            checks: RunChecks::default(),
            input_dup: None,
            result_dup: None,
            extra: 0,
            first_extra: Vec::new(),
            missing: 0,
            first_missing: Vec::new(),
            unnamed: None,
            summary: CompletionSummary::default(),
            label_pairs: Vec::new(),
            bucket_firsts: Vec::new(),
            pair_seen: HashSet::new(),
            keys: Vec::new(),
            key_ids: HashMap::new(),
            fan_out: false,
            cov: Vec::new(),
            cov_index: HashMap::new(),
            task: Vec::new(),
            rollout: Vec::new(),
            key: Vec::new(),
            cols: Columns::new(!lean),
        }
    }

    fn visit(&mut self, t: &RolloutTable, inp: &InputTable) {
        if !t.is_empty() {
            self.checks.visit(t, inp);
        }
        let rows_idx =
            match index_by_key(&inp.task, &inp.rollout, &inp.line, "materialized input", &LineMap::single(&inp.path)) {
                Ok(v) => v,
                Err(e) => {
                    self.input_dup.get_or_insert(e);
                    return;
                }
            };
        let res_idx = match index_by_key(&t.task, &t.rollout, &t.line, "result", &t.lines) {
            Ok(v) => v,
            Err(e) => {
                self.result_dup.get_or_insert(e);
                return;
            }
        };
        if self.input_dup.is_some() || self.result_dup.is_some() {
            return;
        }
        let m = match_keys(&rows_idx, &res_idx);
        self.extra += m.extra.len();
        self.missing += m.missing.len();
        for (all, first) in [(&m.extra, &mut self.first_extra), (&m.missing, &mut self.first_missing)] {
            let room = 10usize.saturating_sub(first.len());
            first.extend(all.iter().take(room));
        }
        if self.extra > 0 {
            return;
        }
        let s = completion_summary(t, inp, &rows_idx, &m.matched);
        add_summary(&mut self.summary, &s);
        let measured = measured_inputs(t, inp.len(), &rows_idx, &m.matched);
        let names = |i: usize| (inp.name(inp.server[i]), inp.name(inp.agent[i]));
        let mut last = None;
        for &i in &measured {
            let pair = names(i);
            if last == Some(pair) {
                continue;
            }
            last = Some(pair);
            let owned = (pair.0.map(str::to_string), pair.1.map(str::to_string));
            if self.pair_seen.insert(owned.clone()) {
                self.label_pairs.push(owned);
            }
        }
        self.fan_out |= inputs_fan_out(measured.iter().filter_map(|&i| {
            let (s, a) = names(i);
            run_key(s, a).map(|k| (inp.task[i], k))
        }));
        for (name, c) in coverage_counts(t, inp, &m.matched) {
            match self.cov_index.get(&name) {
                Some(&at) => (0..4).for_each(|k| self.cov[at].1[k] += c[k]),
                None => {
                    self.cov_index.insert(name.clone(), self.cov.len());
                    self.cov.push((name, c));
                }
            }
        }
        if self.unnamed.is_some() {
            return;
        }
        let pairs: Vec<(usize, usize)> = m.matched.iter().copied().filter(|&(_, r)| !t.masked[r]).collect();
        let mut row_keys: Vec<&str> = Vec::with_capacity(pairs.len());
        for &(i, r) in &pairs {
            let (s, a) = names(i);
            match run_key(s, a) {
                Some(k) => row_keys.push(k),
                None => {
                    self.unnamed = Some(unnamed_input(t, inp, i, r));
                    return;
                }
            }
        }
        if pairs.is_empty() {
            return;
        }
        let result_rows: Vec<usize> = pairs.iter().map(|&(_, r)| r).collect();
        let p = Profiled::new(t, &result_rows, &row_keys);
        self.fan_out |= p.fan_out;
        self.add(&p);
    }

    /// Takes a bucket's measured rollouts (`p`, labelled by run key): its fields go after
    /// those seen before, its values to the columns or, with `--low-memory`, to each
    /// run's state.
    fn add(&mut self, p: &Profiled<'_>) {
        self.bucket_firsts.push(p.t.task[0]);
        let before = self.measured;
        let global = self.cols.add_fields(p, before);
        let ids: Vec<u32> = p
            .labels
            .iter()
            .map(|k| {
                *self.key_ids.entry(k.clone()).or_insert_with(|| {
                    self.keys.push(k.clone());
                    self.run_tasks.push(0);
                    if let Some(runs) = &mut self.lean {
                        runs.push(LeanRun::default());
                    }
                    (self.keys.len() - 1) as u32
                })
            })
            .collect();
        let n = p.rows.len();
        self.measured += n;
        if let Some(runs) = &mut self.lean {
            for (l, positions) in p.label_positions().into_iter().enumerate() {
                let rows: Vec<usize> = positions.iter().map(|&pos| p.rows[pos]).collect();
                let k = ids[l] as usize;
                self.run_tasks[k] += distinct(positions.iter().map(|&pos| p.task(pos)));
                let one = Profiled::with_fields(p.t, &rows, &vec![""; rows.len()], p.fields.clone(), p.all_int);
                runs[k].add_bucket(&one, &global);
            }
            return;
        }
        self.cols.add_values(p, before);
        self.task.extend((0..n).map(|pos| p.task(pos)));
        self.rollout.extend((0..n).map(|pos| p.rollout(pos)));
        self.key.extend(p.label.iter().map(|&l| ids[l as usize]));
    }

    /// The errors the whole table's profile would stop at, in its order.
    /// The inputs' read warnings (`pending`) are printed where the whole table's run
    /// prints them: once the run checks pass.
    fn errors(&mut self, inputs: &Path, lines: &LineMap, allow_partial: bool, pending: &mut Vec<String>) -> Result<()> {
        std::mem::take(&mut self.checks).result(inputs, lines)?;
        super::report_read_warnings(&std::mem::take(pending));
        if let Some(e) = self.input_dup.take().or(self.result_dup.take()) {
            return Err(e);
        }
        let (extra, missing) = (self.extra, self.missing);
        if let Some(e) = unmatched_error(extra, &self.first_extra, missing, &self.first_missing, allow_partial) {
            return Err(e);
        }
        match self.unnamed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// A bucket joined to its input rows once the first pass found nothing wrong.
struct Joined {
    /// The measured input rows, in key order.
    measured: Vec<usize>,
    /// (input row, result row) of the measured rollouts, in key order.
    pairs: Vec<(usize, usize)>,
}

fn join_bucket(t: &RolloutTable, inp: &InputTable) -> Result<Joined> {
    let rows_idx = index_by_key(&inp.task, &inp.rollout, &inp.line, "materialized input", &LineMap::single(&inp.path))?;
    let res_idx = index_by_key(&t.task, &t.rollout, &t.line, "result", &t.lines)?;
    let m = match_keys(&rows_idx, &res_idx);
    let measured = measured_inputs(t, inp.len(), &rows_idx, &m.matched);
    let pairs = m.matched.into_iter().filter(|&(_, r)| !t.masked[r]).collect();
    Ok(Joined { measured, pairs })
}

/// `merge profile`'s shares of one round for the buckets `slices` (in bucket order),
/// each joined to its input rows as the profile joins them (a run is the run key of
/// its rollouts' input rows); see `merge_stream::write_aggregate_shares`.
pub(super) fn write_profile_shares(
    c: &super::profile::ProfileConfig,
    slices: &[PathBuf],
    inputs: &MergeInputs,
    plan: Option<&Plan>,
    out: &Path,
    tasks_out: Option<&Path>,
    read: &[&Path],
) -> Result<usize> {
    let name = &c.rollouts[0];
    let mut shares: Vec<Share> = Vec::new();
    let mut infos: Vec<BucketInfo> = Vec::new();
    let mut pieces: Vec<TaskPiece> = Vec::new();
    // The labels and rules the task entries need, settled by the counting round.
    let labels = plan.map(|p| labels_for(p.entries.pairs.iter().map(|(s, a)| (s.as_deref(), a.as_deref()))));
    for slice in slices {
        let b = read_bucket(slice, name, &mut LineMap::default(), Some(inputs))?;
        let t = &b.t;
        let Some(inp) = b.inputs.as_deref() else { continue };
        if t.is_empty() {
            continue;
        }
        // A bucket the merge refuses (a key twice) has no share; the merge says why.
        let Ok(Joined { measured, pairs }) = join_bucket(t, inp) else { continue };
        let keyed: Vec<(usize, &str)> = pairs.iter().filter_map(|&(i, r)| key_of(inp, i).map(|k| (r, k))).collect();
        match plan {
            None => {
                let names = |i: usize| (inp.name(inp.server[i]), inp.name(inp.agent[i]));
                let mut info = BucketInfo { pairs: Vec::new(), fan_out: false, measured: None };
                let mut seen = std::collections::HashSet::new();
                for &i in &measured {
                    let (s, a) = names(i);
                    let pair = (s.map(str::to_string), a.map(str::to_string));
                    if seen.insert(pair.clone()) {
                        info.pairs.push(pair);
                    }
                }
                info.fan_out = inputs_fan_out(measured.iter().filter_map(|&i| {
                    let (s, a) = names(i);
                    run_key(s, a).map(|k| (inp.task[i], k))
                }));
                if keyed.is_empty() || keyed.len() < pairs.len() {
                    // No measured rollout, or one whose input row names no agent (which
                    // the merge refuses): no share.
                    infos.push(info);
                    continue;
                }
                let rows: Vec<usize> = keyed.iter().map(|&(r, _)| r).collect();
                let keys: Vec<&str> = keyed.iter().map(|&(_, k)| k).collect();
                let p = Profiled::new(t, &rows, &keys);
                let names: Vec<String> = p.fields.iter().map(|f| f.name.clone()).collect();
                info.fan_out |= p.fan_out;
                info.measured = Some((names.clone(), p.all_int, rows.len() as u64));
                infos.push(info);
                let local: Vec<usize> = (0..p.fields.len()).collect();
                for (l, positions) in p.label_positions().into_iter().enumerate() {
                    let run_rows: Vec<usize> = positions.iter().map(|&pos| p.rows[pos]).collect();
                    let one =
                        Profiled::with_fields(t, &run_rows, &vec![""; run_rows.len()], p.fields.clone(), p.all_int);
                    let mut lean = LeanRun::default();
                    lean.visit(&one, &local);
                    lean.close_share();
                    let key = Some(p.labels[l].clone());
                    shares.push(Share { key, first_task: one.task(0), names: names.clone(), all_int: p.all_int, lean });
                }
            }
            Some(plan) => {
                if let (Some(path), Some(labels)) = (tasks_out, &labels) {
                    let e = &plan.entries;
                    let label_by_key: HashMap<&str, &str> =
                        labels.iter().map(|(k, l)| (k.as_str(), l.as_str())).collect();
                    let mut bytes = Vec::new();
                    let wrote = write_bucket_entries(
                        t,
                        inp,
                        (&measured, &pairs),
                        (plan.fields(), e.all_int, e.fan_out),
                        &label_by_key,
                        true,
                        &mut bytes,
                    )
                    .map_err(|e| e.at(path))?;
                    if wrote {
                        pieces.push(TaskPiece { key: None, first_task: t.task[0], depth: 0, bytes });
                    }
                }
                let mut by: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
                for &(r, k) in &keyed {
                    by.entry(k).or_default().push(r);
                }
                let all: Vec<usize> = (0..plan.fields().len()).collect();
                for (k, rows) in by {
                    let key = Some(k.to_string());
                    let run = plan.run_in(&key, slice)?;
                    if !run.more {
                        continue;
                    }
                    let fields = resolve_fields(t, plan.fields().iter().cloned());
                    let one = Profiled::with_fields(t, &rows, &vec![""; rows.len()], fields, false);
                    let mut lean = run.lean.share(one.task(0));
                    lean.visit(&one, &all);
                    lean.close_share();
                    shares.push(Share { key, first_task: one.task(0), names: Vec::new(), all_int: false, lean });
                }
            }
        }
    }
    // A round with task entries has a plan (checked before reading).
    if let (Some(path), Some(plan)) = (tasks_out, plan) {
        write_task_pieces(&pieces, plan, path, read)?;
    }
    write_share_file(&shares, &infos, plan, Command::Profile, out, read)?;
    Ok(shares.len())
}

/// Writes the task entries of bucket `t` (joined to its input rows `inp`: the measured
/// input rows and the measured rollouts' pairs) to `w`, each with its input row as the
/// sample, with the sweep's `fields`, integer rule and fan-out and each run key's label;
/// false when the bucket has no measured rollout. `started`: entries were written
/// before (compact entries take no separator either way).
#[allow(clippy::type_complexity)]
fn write_bucket_entries<W: std::io::Write + Send>(
    t: &RolloutTable,
    inp: &InputTable,
    (measured, pairs): (&[usize], &[(usize, usize)]),
    (fields, all_int, fan_out): (&[String], bool, bool),
    label_by_key: &HashMap<&str, &str>,
    started: bool,
    w: &mut W,
) -> std::result::Result<bool, StreamError> {
    let label_of = |i: usize| -> Option<&str> { key_of(inp, i).and_then(|k| label_by_key.get(k).copied()) };
    if pairs.is_empty() {
        return Ok(false);
    }
    let result_rows: Vec<usize> = pairs.iter().map(|&(_, r)| r).collect();
    let row_labels: Vec<&str> = pairs.iter().map(|&(i, _)| label_of(i).unwrap_or_default()).collect();
    let mut input_of: HashMap<usize, usize> = HashMap::with_capacity(pairs.len());
    for &(i, r) in pairs {
        input_of.insert(r, i);
    }
    let resolved = resolve_fields(t, fields.iter().cloned());
    let mut p = Profiled::with_fields(t, &result_rows, &row_labels, resolved, all_int);
    p.fan_out = fan_out;
    let groups = p.task_groups();
    let expected = expected_per_group(&p, &groups, inp, measured, label_of);
    let sample_rows: Vec<usize> = groups.iter().map(|&(a, _)| input_of[&p.rows[a]]).collect();
    let keys = StatKeys::new(&p.fields);
    let plan = TaskPlan {
        p,
        keys,
        groups,
        expected: Some(expected),
        samples: Samples::Inputs { table: inp, rows: sample_rows },
        with_agent_ref: fan_out,
        info: Arc::new(info_plans(t)),
        quoted_names: Arc::new(quoted_names(t)),
    };
    write_task_entries(&plan, None, started, w)?;
    Ok(true)
}

/// The run key of input row `i`.
fn key_of(inp: &InputTable, i: usize) -> Option<&str> {
    run_key(inp.name(inp.server[i]), inp.name(inp.agent[i]))
}

fn add_summary(to: &mut CompletionSummary, s: &CompletionSummary) {
    to.expected_rollout_rows += s.expected_rollout_rows;
    to.completed_rollout_rows += s.completed_rollout_rows;
    to.missing_rollout_rows += s.missing_rollout_rows;
    to.extra_rollout_rows += s.extra_rollout_rows;
    to.total_input_rows += s.total_input_rows;
    to.complete_input_rows += s.complete_input_rows;
    to.partial_input_rows += s.partial_input_rows;
    to.missing_input_rows += s.missing_input_rows;
    to.masked_rollout_rows += s.masked_rollout_rows;
}

/// Runs `each` on every step of the slices (with the input rows of their tasks), read
/// one ahead; `false` when a slice's tasks are not all after the previous slices'.
/// `counting`: the first pass, which also sees the input rows of tasks without rollouts.
fn each_step(
    slices: &[PathBuf],
    name: &Path,
    inputs: &RangeInputs<'_>,
    counting: bool,
    mut each: impl FnMut(&RolloutTable, &InputTable) -> Result<()>,
) -> Result<bool> {
    let steps = Steps {
        slices,
        name,
        lines: LineMap::default(),
        inputs,
        counting,
        next: 0,
        last: None,
        gaps: Default::default(),
        ready: None,
        done: false,
    };
    prefetched_iter(steps, |s: Result<Step>| -> Result<bool> {
        match s? {
            Step::OutOfOrder => Ok(false),
            Step::Rows(b) => each(&b.0, &b.1).map(|()| true),
        }
    })
}

/// `merge profile` bucket by bucket, staging the three artifacts `paths` in `out`; `None`
/// when this run needs the whole table (nothing is staged then).
pub(super) fn merge_profile_streamed(
    c: &ProfileConfig,
    slices: &[PathBuf],
    inputs: &MergeInputs,
    out: &mut OutputSet,
    paths: &[PathBuf; 3],
    levels: LevelsFrom,
    pending: &mut Vec<String>,
) -> Result<Option<MergedProfile>> {
    let lean = levels.lean();
    if !c.metrics.is_empty() {
        return Ok(None);
    }
    // Task entries rendered by the round tasks, copied in instead of written here, and
    // the rules the rounds rendered them by.
    let mut levels = levels;
    let (mut pieces, entry_rules) = match &mut levels {
        LevelsFrom::Plan(p) => (p.tasks.take(), p.entries.clone()),
        _ => (None, ProfileEntries::default()),
    };
    let name = &c.rollouts[0];
    let t0 = std::time::Instant::now();
    let mut g = Gather::new(lean);
    let ranges = RangeInputs::new(inputs);
    let mut all_lines = LineMap::default();
    let mut any_rows = false;
    let in_order = each_step(slices, name, &ranges, true, |t, inp| {
        if !t.is_empty() {
            all_lines = t.lines.clone();
            any_rows = true;
        }
        g.visit(t, inp);
        Ok(())
    })?;
    // Slices without a row are refused as the whole table refuses them.
    if !in_order || !any_rows {
        return Ok(None);
    }
    trace("merge: gather", t0);
    g.errors(inputs.path(), &all_lines, c.allow_partial, pending)?;
    let mut summary = std::mem::take(&mut g.summary);
    let (exp, done) = (summary.expected_rollout_rows, summary.completed_rollout_rows);
    summary.reward_profile_completion_pct = if exp == 0 { 100.0 } else { 100.0 * done as f64 / exp as f64 };
    let mut warnings = Warnings::default();
    let cov = std::mem::take(&mut g.cov);
    if g.measured == 0 {
        let agents = with_coverage(&[], cov);
        out.add(&paths[0], b"")?;
        out.add(&paths[1], &compact_array(&agents))?;
        out.add(&paths[2], &compact_array(&[]))?;
        return Ok(Some(MergedProfile { summary, agents, warnings }));
    }
    // Labels, settled over the whole sweep, and each run key's.
    let labels = labels_for(g.label_pairs.iter().map(|(s, a)| (s.as_deref(), a.as_deref())));
    let label_of_key: Vec<String> =
        g.keys.iter().map(|k| labels.get(k).cloned().unwrap_or_else(|| k.clone())).collect();
    if let Some(runs) = &mut g.lean {
        match levels {
            // The statistics rounds ran elsewhere: the plan holds their results.
            LevelsFrom::Plan(mut plan) => {
                plan.check_no_other_runs(&g.keys.iter().cloned().map(Some).collect::<Vec<_>>())?;
                for (k, run) in runs.iter_mut().enumerate() {
                    run.pad_fields(g.cols.fields.len());
                    *run = plan.take_finished(&Some(g.keys[k].clone()), &g.cols.fields, std::mem::take(run))?;
                }
            }
            LevelsFrom::Passes | LevelsFrom::Columns => {
                lean_passes(slices, name, &ranges, runs, &g.key_ids, &g.cols.fields)?
            }
        }
    }
    let t0 = std::time::Instant::now();
    let mut names: Vec<&str> = label_of_key.iter().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    let labels_sorted: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let rank: Vec<u32> =
        label_of_key.iter().map(|l| names.binary_search(&l.as_str()).expect("a label of the list") as u32).collect();
    let fields: Vec<Field> = g.cols.fields.iter().map(|f| Field { name: f.clone(), top: None, usage: None }).collect();
    let keys = StatKeys::new(&fields);
    let (agents, repeats) = match &g.lean {
        Some(runs) => {
            // Labels and run keys go one to one; each label's levels from its run's state.
            let mut by_rank: Vec<usize> = (0..runs.len()).collect();
            by_rank.sort_by_key(|&k| rank[k]);
            let agent_stats = by_rank.iter().map(|&k| runs[k].agent_members(&keys, g.cols.all_int)).collect();
            let entries = by_rank
                .iter()
                .flat_map(|&k| runs[k].raw_repeat_entries(rank[k], &label_of_key[k], &g.cols.fields, g.run_tasks[k]))
                .collect();
            let mut repeat_warnings = Warnings::default();
            let repeats = finish_repeats(entries, &labels_sorted, &mut repeat_warnings);
            warnings.extend(repeat_warnings);
            assemble_levels(&labels_sorted, agent_stats, repeats, cov, &mut warnings)
        }
        None => {
            // Within a task, rows are in run key order rather than label order: the levels
            // read each label's positions alone, in (task, rollout) order either way.
            let label: Vec<u32> = g.key.iter().map(|&k| rank[k as usize]).collect();
            let n = label.len();
            let mut t = RolloutTable::empty(LineMap::default());
            t.task = std::mem::take(&mut g.task);
            t.rollout = std::mem::take(&mut g.rollout);
            let p = Profiled {
                t: &t,
                rows: (0..n).collect(),
                label,
                labels: labels_sorted,
                fields,
                vals: std::mem::take(&mut g.cols.vals),
                all_int: g.cols.all_int,
                ints: std::mem::take(&mut g.cols.ints),
                fan_out: g.fan_out,
            };
            agents_and_repeats(&p, &keys, cov, &mut warnings)
        }
    };
    trace("merge: statistics", t0);
    // The task entries, bucket by bucket, each with its own input rows as samples.
    let t0 = std::time::Instant::now();
    let label_by_key: HashMap<&str, &str> =
        g.keys.iter().zip(&label_of_key).map(|(k, l)| (k.as_str(), l.as_str())).collect();
    let mut w = out.create(&paths[0])?;
    let (fields, all_int, fan_out) = (&g.cols.fields, g.cols.all_int, g.fan_out);
    let mut started = false;
    if let Some(pieces) = &mut pieces {
        // Rendered by the round tasks: copied in, bucket after bucket.
        if (&g.label_pairs, g.fan_out, g.cols.all_int) != (&entry_rules.pairs, entry_rules.fan_out, entry_rules.all_int)
        {
            return Err(Error::Mismatch(
                "the plan settled other labels or rules for the task entries than these slices give: give the plan \
                 and task entries of these slices' rounds"
                    .into(),
            ));
        }
        for &first in &g.bucket_firsts {
            pieces.copy(&None, first, 0, true, &mut w).map_err(|e| e.at(&paths[0]))?;
        }
        pieces.check_all_taken()?;
    }
    let wrote = pieces.is_some()
        || each_step(slices, name, &ranges, false, |t, inp| {
            if t.is_empty() {
                return Ok(());
            }
            let Joined { measured, pairs } = join_bucket(t, inp)?;
            let what = (fields.as_slice(), all_int, fan_out);
            if write_bucket_entries(t, inp, (&measured, &pairs), what, &label_by_key, started, &mut w)
                .map_err(|e: StreamError| e.at(&paths[0]))?
            {
                started = true;
            }
            Ok(())
        })?;
    if !wrote {
        return Err(Error::Mismatch(
            "the slices changed while the merge read them; merge slices that nothing writes to".into(),
        ));
    }
    w.finish().map_err(|e| Error::write(&paths[0], e))?;
    drop(w);
    trace("merge: task entries + write", t0);
    out.add(&paths[1], &compact_array(&agents))?;
    out.add(&paths[2], &compact_array(&repeats))?;
    Ok(Some(MergedProfile { summary, agents, warnings }))
}

/// The passes of `--low-memory` after the first ([`passes`]): each reads every bucket
/// and hands each run key that needs another pass its measured rollouts.
fn lean_passes(
    slices: &[PathBuf],
    name: &Path,
    ranges: &RangeInputs<'_>,
    runs: &mut [LeanRun],
    key_ids: &HashMap<String, u32>,
    fields: &[String],
) -> Result<()> {
    let changed = |_| {
        Error::Mismatch(
            "the slices changed while the merge read them: a pass over them did not find the rollouts the first \
             pass found; merge slices that nothing writes to"
                .into(),
        )
    };
    for r in runs.iter_mut() {
        r.pad_fields(fields.len());
    }
    let mut lean: Vec<Option<&mut LeanRun>> = runs.iter_mut().map(Some).collect();
    passes(&mut lean, changed, |more, add| {
        each_step(slices, name, ranges, false, |t, inp| {
            if t.is_empty() {
                return Ok(());
            }
            let mut by: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for &(i, r) in &join_bucket(t, inp)?.pairs {
                let k = key_of(inp, i).and_then(|k| key_ids.get(k)).ok_or_else(|| changed(0))?;
                if more[*k as usize] {
                    by.entry(*k as usize).or_default().push(r);
                }
            }
            for (k, rows) in by {
                let fields_here = resolve_fields(t, fields.iter().cloned());
                add(k, &Profiled::with_fields(t, &rows, &vec![""; rows.len()], fields_here, false));
            }
            Ok(())
        })
        .map(|_| ())
    })
}
