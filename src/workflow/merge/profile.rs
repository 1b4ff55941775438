//! `merge profile` one bucket at a time. A bucket is a range of tasks, and every
//! statistic of the profile is computed over rows in (task, label, rollout) order, so
//! the merge need not hold the sweep's table. Each bucket of rollouts is read with the
//! input rows of its tasks (the inputs file cut by task range, or the input slices of
//! those tasks):
//!
//! - the first pass joins them by rollout key as the single-machine profile does,
//!   counts what the completion summary, the coverage and the errors need, and counts
//!   each run key's measured rollouts into the plan of the statistics' rounds;
//! - the rounds (`rounds.rs`) settle the agent and repeat levels, every label with
//!   every field of the profile;
//! - a last pass writes each bucket's task entries with its own input rows as samples.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::buckets::{MergeInputs, RunChecks, Step, Sweep};
use super::rounds::{absorb_own, counting_share, round_share, settle, BucketInfo, Command, Plan, Share};
use super::{round_here, BucketShares};
use crate::error::{Error, Result};
use crate::export::atomic::OutputSet;
use crate::export::nemo_gym::compact_array;
use crate::export::tasks::{write_task_entries, StreamError};
use crate::ingest::fields::resolve_fields;
use crate::ingest::labels::{labels_for, run_key};
use crate::ingest::{InputTable, LineMap, RolloutTable};
use crate::json::Json;
use crate::metrics::levels::{distinct, finish_repeats, Profiled, StatKeys};
use crate::metrics::profile::{
    assemble_levels, completion_summary, coverage_counts, expected_per_group, index_by_key, inputs_fan_out, match_keys,
    measured_inputs, unmatched_error, unnamed_input, with_coverage, CompletionSummary, Matched,
};
use crate::metrics::tasks::{info_specs, quoted_names, Samples, TaskSpec};
use crate::metrics::warnings::Warnings;
use crate::trace::trace;
use crate::workflow::profile::{ProfileConfig, ProfileRun};

/// What the first pass gathers besides the statistics' counting round.
#[derive(Default)]
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
    /// Measured rollouts so far.
    measured: usize,
    /// Per run key, its measured tasks.
    run_tasks: HashMap<String, usize>,
    cov: Vec<(String, [usize; 4])>,
    cov_index: HashMap<String, usize>,
}

impl Gather {
    /// Takes a bucket joined to its input rows; its runs' counting shares go to `plan`.
    fn visit(&mut self, t: &RolloutTable, inp: &InputTable, plan: &mut Plan) -> Result<()> {
        if !t.is_empty() {
            self.checks.visit(t, inp);
        }
        let Joined { rows_idx, m, measured, pairs } = match join_bucket(t, inp) {
            Ok(j) if self.input_dup.is_none() && self.result_dup.is_none() => j,
            Ok(_) => return Ok(()),
            Err((input, e)) => {
                let dup = if input { &mut self.input_dup } else { &mut self.result_dup };
                dup.get_or_insert(e);
                return Ok(());
            }
        };
        self.extra += m.extra.len();
        self.missing += m.missing.len();
        for (all, first) in [(&m.extra, &mut self.first_extra), (&m.missing, &mut self.first_missing)] {
            let room = 10usize.saturating_sub(first.len());
            first.extend(all.iter().take(room));
        }
        if self.extra > 0 {
            return Ok(());
        }
        let s = completion_summary(t, inp, &rows_idx, &m.matched);
        add_summary(&mut self.summary, &s);
        for (name, c) in coverage_counts(t, inp, &m.matched) {
            match self.cov_index.get(&name) {
                Some(&at) => (0..4).for_each(|k| self.cov[at].1[k] += c[k]),
                None => {
                    self.cov_index.insert(name.clone(), self.cov.len());
                    self.cov.push((name, c));
                }
            }
        }
        let (info, shares) = counting_shares(t, inp, &measured, &pairs);
        let shares = match shares {
            Ok(shares) if self.unnamed.is_none() => shares,
            Ok(_) => Vec::new(),
            Err((i, r)) => {
                self.unnamed.get_or_insert_with(|| unnamed_input(t, inp, i, r));
                Vec::new()
            }
        };
        let shares = shares
            .into_iter()
            .map(|(s, rows, tasks)| {
                self.measured += rows;
                *self.run_tasks.entry(s.key.clone().unwrap_or_default()).or_default() += tasks;
                s
            })
            .collect();
        absorb_own(plan, shares, vec![info])
    }

    /// The errors the whole table's profile would stop at, in its order.
    /// The inputs' read warnings (`pending`) are printed where the whole table's run
    /// prints them: once the run checks pass.
    fn errors(&mut self, inputs: &Path, lines: &LineMap, allow_partial: bool, pending: &mut Vec<String>) -> Result<()> {
        std::mem::take(&mut self.checks).result(inputs, lines)?;
        crate::workflow::report_read_warnings(&std::mem::take(pending));
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

/// The counting round of a bucket joined to its input rows (`measured` input rows,
/// `pairs` of (input row, result row) of its measured rollouts): what it tells besides
/// its runs' shares (the (server, agent) pairs of its measured input rows, fan-out,
/// fields), and a share per run key with its rows and tasks; or the first measured rollout whose input row
/// names no agent (which the merge refuses).
#[allow(clippy::type_complexity)]
fn counting_shares(
    t: &RolloutTable,
    inp: &InputTable,
    measured: &[usize],
    pairs: &[(usize, usize)],
) -> (BucketInfo, std::result::Result<Vec<(Share, usize, usize)>, (usize, usize)>) {
    let names = |i: usize| (inp.name(inp.server[i]), inp.name(inp.agent[i]));
    let mut info = BucketInfo { pairs: Vec::new(), fan_out: false, measured: None };
    let mut seen = HashSet::new();
    for &i in measured {
        let (s, a) = names(i);
        let pair = (s.map(str::to_string), a.map(str::to_string));
        if seen.insert(pair.clone()) {
            info.pairs.push(pair);
        }
    }
    info.fan_out = inputs_fan_out(measured.iter().filter_map(|&i| key_of(inp, i).map(|k| (inp.task[i], k))));
    let mut keys = Vec::with_capacity(pairs.len());
    for &(i, r) in pairs {
        match key_of(inp, i) {
            Some(k) => keys.push(k),
            None => return (info, Err((i, r))),
        }
    }
    if pairs.is_empty() {
        return (info, Ok(Vec::new()));
    }
    let rows: Vec<usize> = pairs.iter().map(|&(_, r)| r).collect();
    let p = Profiled::new(t, &rows, &keys);
    info.fan_out |= p.fan_out;
    info.measured = Some((p.fields.iter().map(|f| f.name.clone()).collect(), p.all_int, rows.len() as u64));
    let shares = p
        .label_positions()
        .into_iter()
        .enumerate()
        .map(|(l, positions)| {
            let run_rows: Vec<usize> = positions.iter().map(|&pos| p.rows[pos]).collect();
            let one = Profiled::with_fields(t, &run_rows, &vec![""; run_rows.len()], p.fields.clone(), p.all_int);
            let tasks = distinct(positions.iter().map(|&pos| p.task(pos)));
            (counting_share(Some(p.labels[l].clone()), &one), run_rows.len(), tasks)
        })
        .collect();
    (info, Ok(shares))
}

/// A bucket joined to its input rows by rollout key, as the profile joins them.
struct Joined {
    rows_idx: Vec<((i64, i64), usize)>,
    m: Matched,
    /// The measured input rows, in key order.
    measured: Vec<usize>,
    /// (input row, result row) of the measured rollouts, in key order.
    pairs: Vec<(usize, usize)>,
}

/// [`Joined`], or a key found twice: among the input rows (`true`) or the results.
fn join_bucket(t: &RolloutTable, inp: &InputTable) -> std::result::Result<Joined, (bool, Error)> {
    let rows_idx = index_by_key(&inp.task, &inp.rollout, &inp.line, "materialized input", &LineMap::single(&inp.path))
        .map_err(|e| (true, e))?;
    let res_idx = index_by_key(&t.task, &t.rollout, &t.line, "result", &t.lines).map_err(|e| (false, e))?;
    let m = match_keys(&rows_idx, &res_idx);
    let measured = measured_inputs(t, inp.len(), &rows_idx, &m.matched);
    let pairs = m.matched.iter().copied().filter(|&(_, r)| !t.masked[r]).collect();
    Ok(Joined { rows_idx, m, measured, pairs })
}

/// `merge profile`'s shares: a bucket joined to its input rows as the profile joins
/// them, a share per run key of its measured rollouts' input rows.
pub(super) struct ProfileShares;

impl BucketShares for ProfileShares {
    const COMMAND: Command = Command::Profile;

    fn shares(&self, s: &Step<'_>, plan: Option<&Plan>) -> Result<(Vec<Share>, Vec<BucketInfo>)> {
        let (t, slice) = (&s.t, s.slice);
        let Some(inp) = s.inputs.as_ref().filter(|_| !t.is_empty()) else { return Ok(Default::default()) };
        // A bucket the merge refuses (a key twice) has no share; the merge says why.
        let Ok(Joined { measured, pairs, .. }) = join_bucket(t, inp) else { return Ok(Default::default()) };
        let Some(plan) = plan else {
            let (info, s) = counting_shares(t, inp, &measured, &pairs);
            // A rollout whose input row names no agent, which the merge refuses: no share.
            return Ok((s.unwrap_or_default().into_iter().map(|(s, _, _)| s).collect(), vec![info]));
        };
        // A share per run key still passing, of its measured rollouts.
        let mut by: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &(i, r) in &pairs {
            if let Some(k) = key_of(inp, i) {
                by.entry(k).or_default().push(r);
            }
        }
        let mut shares = Vec::new();
        for (k, rows) in by {
            shares.extend(round_share(plan, &Some(k.to_string()), t, &rows, slice)?);
        }
        Ok((shares, Vec::new()))
    }
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
    let spec = TaskSpec {
        p,
        keys,
        groups,
        expected: Some(expected),
        samples: Samples::Inputs { table: inp, rows: sample_rows },
        with_agent_ref: fan_out,
        info: Arc::new(info_specs(t)),
        quoted_names: Arc::new(quoted_names(t)),
    };
    write_task_entries(&spec, None, started, w)?;
    Ok(true)
}

/// A profile step's input rows (a profile always has inputs).
fn step_inputs<'a>(s: &'a Step<'_>) -> &'a InputTable {
    s.inputs.as_ref().expect("a profile reads its steps with their input rows")
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

/// `merge profile` bucket by bucket, staging the three artifacts `paths` in `out` (the
/// run's files are named once they are committed), with the rounds its statistics took.
/// They come from rounds over the buckets run here, or from `given`, a finished plan of
/// rounds run elsewhere.
pub(super) fn merge_profile_streamed(
    c: &ProfileConfig,
    slices: &[PathBuf],
    inputs: &MergeInputs,
    out: &mut OutputSet,
    paths: &[PathBuf; 3],
    given: Option<Plan>,
    pending: &mut Vec<String>,
) -> Result<(ProfileRun, u32)> {
    let sweep = Sweep { slices, name: &c.rollouts[0], inputs: Some(inputs) };
    let t0 = std::time::Instant::now();
    let mut g = Gather::default();
    let mut plan = Plan::new(Command::Profile);
    let all_lines = sweep.each_step(true, |s| g.visit(&s.t, step_inputs(s), &mut plan))?;
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
        return Ok((ProfileRun { summary, agents, warnings, files: Vec::new(), failures: None, lake: None }, 1));
    }
    let plan = settle(plan, given, |plan| round_here(&ProfileShares, plan, sweep))?;
    // Labels, settled over the whole sweep, and each run key's.
    let labels = labels_for(plan.entries.pairs.iter().map(|(s, a)| (s.as_deref(), a.as_deref())));
    let keys: Vec<&str> = plan.runs.iter().map(|r| r.key.as_deref().unwrap_or_default()).collect();
    let label_of_key: Vec<&str> = keys.iter().map(|&k| labels.get(k).map_or(k, String::as_str)).collect();
    let t0 = std::time::Instant::now();
    let (agents, repeats) = profile_levels(&plan, &label_of_key, &g.run_tasks, cov, &mut warnings);
    trace("merge: statistics", t0);
    // The task entries, bucket by bucket, each with its own input rows as samples.
    let t0 = std::time::Instant::now();
    let label_by_key: HashMap<&str, &str> = keys.iter().copied().zip(label_of_key.iter().copied()).collect();
    let mut w = out.create(&paths[0])?;
    let what = (plan.fields.as_slice(), plan.entries.all_int, plan.entries.fan_out);
    let mut started = false;
    sweep.each_step(false, |s| -> Result<()> {
        // Without gaps every step holds rollouts.
        let (t, inp) = (&s.t, step_inputs(s));
        let Joined { measured, pairs, .. } = join_bucket(t, inp).map_err(|(_, e)| e)?;
        started |= write_bucket_entries(t, inp, (&measured, &pairs), what, &label_by_key, started, &mut w)
            .map_err(|e: StreamError| e.at(&paths[0]))?;
        Ok(())
    })?;
    if !started {
        return Err(Error::Mismatch(
            "the slices changed while the merge read them; merge slices that nothing writes to".into(),
        ));
    }
    w.finish().map_err(|e| Error::write(&paths[0], e))?;
    drop(w);
    trace("merge: task entries + write", t0);
    out.add(&paths[1], &compact_array(&agents))?;
    out.add(&paths[2], &compact_array(&repeats))?;
    Ok((ProfileRun { summary, agents, warnings, files: Vec::new(), failures: None, lake: None }, plan.round))
}

/// The agent and repeat levels of a profile from its finished plan: each label's from
/// its run's state (labels and run keys go one to one), labelled `label_of_key` (in the
/// plan's order of runs), with each run key's measured tasks and the coverage.
fn profile_levels(
    plan: &Plan,
    label_of_key: &[&str],
    run_tasks: &HashMap<String, usize>,
    cov: Vec<(String, [usize; 4])>,
    warnings: &mut Warnings,
) -> (Vec<Json>, Vec<Json>) {
    let mut names: Vec<&str> = label_of_key.to_vec();
    names.sort_unstable();
    names.dedup();
    let labels_sorted: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    let rank = |l: &str| names.binary_search(&l).expect("a label of the list") as u32;
    let keys = StatKeys::of_names(plan.fields.iter().map(String::as_str));
    let runs = &plan.runs;
    let mut by_rank: Vec<usize> = (0..runs.len()).collect();
    by_rank.sort_by_key(|&k| rank(label_of_key[k]));
    let agent_stats = by_rank.iter().map(|&k| runs[k].lean.agent_members(&keys, plan.entries.all_int)).collect();
    let entries = by_rank
        .iter()
        .flat_map(|&k| {
            let tasks = run_tasks.get(runs[k].key.as_deref().unwrap_or_default()).copied().unwrap_or(0);
            runs[k].lean.raw_repeat_entries(rank(label_of_key[k]), label_of_key[k], &plan.fields, tasks)
        })
        .collect();
    let mut repeat_warnings = Warnings::default();
    let repeats = finish_repeats(entries, &labels_sorted, &mut repeat_warnings);
    warnings.extend(repeat_warnings);
    assemble_levels(&labels_sorted, agent_stats, repeats, cov, warnings)
}
