//! Profile: align rollouts with their materialized inputs, drop masked pairs,
//! and compute the task, agent and repeat levels for every agent at once.
//!
//! Pure computation: the caller reads the files and later fills each task entry's
//! `sample` from the input row this module names.

use std::collections::BTreeMap;

/// Hash maps keyed by row numbers and names: foldhash, not SipHash (no untrusted-key
/// flooding concern here, and a million lookups per run).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::sync::Arc;

use rayon::prelude::*;

use super::levels::{across_repeats, agent_and_repeat_levels, distinct, Profiled, RepeatEntry, StatKeys};
use super::tasks::{info_specs, quoted_names, Samples, TaskSpec};
use super::warnings::Warnings;
use crate::error::{Error, Msg, Opt, Result};
use crate::ingest::labels::{labels_for, run_key};
use crate::ingest::{InputTable, LineMap, RolloutTable};
use crate::json::{Json, Key, Members};
use crate::schema::COVERAGE;

/// Counts of NeMo Gym's completion summary .
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompletionSummary {
    pub expected_rollout_rows: usize,
    pub completed_rollout_rows: usize,
    pub missing_rollout_rows: usize,
    pub extra_rollout_rows: usize,
    pub reward_profile_completion_pct: f64,
    pub total_input_rows: usize,
    pub complete_input_rows: usize,
    pub partial_input_rows: usize,
    pub missing_input_rows: usize,
    pub masked_rollout_rows: usize,
}

/// Everything `profile` produces.
pub struct ProfileOutput<'a> {
    /// The task entries, written batch by batch by `export::tasks`; `None` when no
    /// rollout was measured.
    pub tasks: Option<TaskSpec<'a>>,
    pub agents: Vec<Json>,
    pub repeats: Vec<Json>,
    pub summary: CompletionSummary,
    pub warnings: Warnings,
}

fn fmt_keys(keys: &[(i64, i64)]) -> String {
    let parts: Vec<String> = keys.iter().take(10).map(|(a, b)| format!("({a}, {b})")).collect();
    format!("[{}]", parts.join(", "))
}

/// Sorted (key, row) pairs; errors on a duplicate key naming it and both lines (line
/// numbers as `file` numbers them).
pub fn index_by_key(
    task: &[i64],
    rollout: &[i64],
    line: &[u64],
    what: &str,
    file: &LineMap,
) -> Result<Vec<((i64, i64), usize)>> {
    let mut v: Vec<((i64, i64), usize)> = (0..task.len()).map(|i| ((task[i], rollout[i]), i)).collect();
    if !v.is_sorted() {
        v.par_sort_unstable();
    }
    for w in v.windows(2) {
        if w[0].0 == w[1].0 {
            let (l1, l2) = (line[w[0].1].min(line[w[1].1]), line[w[0].1].max(line[w[1].1]));
            return Err(duplicate_key(what, w[0].0, l1, l2, file));
        }
    }
    Ok(v)
}

/// Two rows share a rollout key.
pub fn duplicate_key(what: &str, (a, b): (i64, i64), l1: u64, l2: u64, file: &LineMap) -> Error {
    Error::Mismatch(format!(
        "Duplicate {what} row for rollout key ({a}, {b}): {} have the same _ng_task_index and _ng_rollout_index",
        file.describe_two(l1, l2)
    ))
}

/// Coverage keys for a set of rows, or empty when nothing was masked.
pub fn coverage(t: &RolloutTable, rows: &[usize]) -> Vec<(Key, Json)> {
    let masked = rows.iter().filter(|&&r| t.masked[r]).count();
    if masked == 0 {
        return Vec::new();
    }
    let all = distinct(rows.iter().map(|&r| t.task[r]));
    let measured = distinct(rows.iter().filter(|&&r| !t.masked[r]).map(|&r| t.task[r]));
    coverage_members(rows.len() - masked, masked, measured, all - measured)
}

/// The coverage members from their counts: measured and masked rollouts, tasks with a
/// measured rollout and tasks without one.
pub fn coverage_members(measured: usize, masked: usize, tasks: usize, unmeasured_tasks: usize) -> Vec<(Key, Json)> {
    vec![
        (Arc::from(COVERAGE[0]), Json::Int(measured as i64)),
        (Arc::from(COVERAGE[1]), Json::Int(masked as i64)),
        (Arc::from(COVERAGE[2]), Json::Int(tasks as i64)),
        (Arc::from(COVERAGE[3]), Json::Int(unmeasured_tasks as i64)),
    ]
}

/// The value `last` holds for `key` when it holds that key, else `get()`, remembered as
/// the new last: for lookups that neighbouring rows mostly repeat.
fn same_as_last<K: PartialEq + Copy, V: Copy>(last: &mut Option<(K, V)>, key: K, get: impl FnOnce() -> V) -> V {
    match *last {
        Some((k, v)) if k == key => v,
        _ => {
            let v = get();
            *last = Some((key, v));
            v
        }
    }
}

/// Input rows and results joined by rollout key (both lists sorted by key).
pub(crate) struct Matched {
    /// (input row, result row), in key order.
    pub matched: Vec<(usize, usize)>,
    /// Keys of input rows without a result, and of results without an input row.
    pub missing: Vec<(i64, i64)>,
    pub extra: Vec<(i64, i64)>,
}

pub(crate) fn match_keys(rows_idx: &[((i64, i64), usize)], res_idx: &[((i64, i64), usize)]) -> Matched {
    let mut m = Matched { matched: Vec::new(), missing: Vec::new(), extra: Vec::new() };
    let (mut i, mut j) = (0, 0);
    while i < rows_idx.len() || j < res_idx.len() {
        if j == res_idx.len() || (i < rows_idx.len() && rows_idx[i].0 < res_idx[j].0) {
            m.missing.push(rows_idx[i].0);
            i += 1;
        } else if i == rows_idx.len() || res_idx[j].0 < rows_idx[i].0 {
            m.extra.push(res_idx[j].0);
            j += 1;
        } else {
            m.matched.push((rows_idx[i].1, res_idx[j].1));
            i += 1;
            j += 1;
        }
    }
    m
}

/// The error for results without input rows (`extra`, of which the first keys are
/// given) or, unless `allow_partial`, input rows without results.
pub(crate) fn unmatched_error(
    extra: usize,
    first_extra: &[(i64, i64)],
    missing: usize,
    first_missing: &[(i64, i64)],
    allow_partial: bool,
) -> Option<Error> {
    if extra > 0 {
        return Some(Error::Mismatch(format!(
            "Rollout results contain rows with no matching materialized input rows. Found {extra} extra rollout rows. Extra rollout keys: {}",
            fmt_keys(first_extra)
        )));
    }
    if missing > 0 && !allow_partial {
        let msg = Msg::default()
            .text(format!(
                "Materialized input rows and rollout results do not have matching rollout keys. Missing rollout results for {missing} materialized input rows. Missing rollout keys: {}. Use ",
                fmt_keys(first_missing)
            ))
            .opt(Opt::on("allow_partial"))
            .text(" to profile completed rollouts from a partial collection.");
        return Some(Error::refused(None, msg));
    }
    None
}

/// The input rows whose result is not masked (masked keys leave both sides), in key order.
pub(crate) fn measured_inputs(
    t: &RolloutTable,
    inputs: usize,
    rows_idx: &[((i64, i64), usize)],
    matched: &[(usize, usize)],
) -> Vec<usize> {
    let mut masked_input = vec![false; inputs];
    for &(i, r) in matched {
        masked_input[i] |= t.masked[r];
    }
    rows_idx.iter().map(|&(_, i)| i).filter(|&i| !masked_input[i]).collect()
}

/// The error for an input row that names no agent (rollout row `r` is its result).
pub(crate) fn unnamed_input(t: &RolloutTable, inputs: &InputTable, i: usize, r: usize) -> Error {
    Error::Mismatch(format!(
        "{}, line {}: the input row for rollout key ({}, {}) (rollouts: {}) names no agent: it has neither `agent_ref.name` nor `_ng_environment_server`",
        inputs.path.display(),
        inputs.line[i],
        t.task[r],
        t.rollout[r],
        t.describe(r)
    ))
}

/// Runs the profile. `allow_partial` permits input rows without results.
pub fn profile<'a>(t: &'a RolloutTable, inputs: &'a InputTable, allow_partial: bool) -> Result<ProfileOutput<'a>> {
    let rows_idx = index_by_key(
        &inputs.task,
        &inputs.rollout,
        &inputs.line,
        "materialized input",
        &LineMap::single(&inputs.path),
    )?;
    let res_idx = index_by_key(&t.task, &t.rollout, &t.line, "result", &t.lines)?;
    let m = match_keys(&rows_idx, &res_idx);
    if let Some(e) = unmatched_error(m.extra.len(), &m.extra, m.missing.len(), &m.missing, allow_partial) {
        return Err(e);
    }
    let matched = m.matched;
    let measured_inputs = measured_inputs(t, inputs.len(), &rows_idx, &matched);
    let labels =
        labels_for(measured_inputs.iter().map(|&i| (inputs.name(inputs.server[i]), inputs.name(inputs.agent[i]))));
    // Labels depend only on the (server, agent) name ids: resolved once per pair.
    let mut pair_label: HashMap<(u32, u32), Option<&str>> = HashMap::default();
    for i in 0..inputs.len() {
        pair_label.entry((inputs.server[i], inputs.agent[i])).or_insert_with(|| {
            run_key(inputs.name(inputs.server[i]), inputs.name(inputs.agent[i]))
                .and_then(|k| labels.get(k))
                .map(|s| s.as_str())
        });
    }
    let label_of = |i: usize| -> Option<&str> { pair_label[&(inputs.server[i], inputs.agent[i])] };
    let pairs: Vec<(usize, usize)> = matched.iter().copied().filter(|&(_, r)| !t.masked[r]).collect();
    let mut row_labels: Vec<&str> = Vec::with_capacity(pairs.len());
    // Neighbouring rows mostly share their (server, agent) pair.
    let mut last = None;
    for &(i, r) in &pairs {
        match same_as_last(&mut last, (inputs.server[i], inputs.agent[i]), || label_of(i)) {
            Some(l) => row_labels.push(l),
            None => return Err(unnamed_input(t, inputs, i, r)),
        }
    }
    let summary = completion_summary(t, inputs, &rows_idx, &matched);
    let mut warnings = Warnings::default();
    if pairs.is_empty() {
        let agents = with_coverage(&[], coverage_counts(t, inputs, &matched));
        return Ok(ProfileOutput { tasks: None, agents, repeats: vec![], summary, warnings });
    }
    let result_rows: Vec<usize> = pairs.iter().map(|&(_, r)| r).collect();
    let mut input_of: Vec<usize> = vec![usize::MAX; t.len()];
    for &(i, r) in &pairs {
        input_of[r] = i;
    }
    let mut p = Profiled::new(t, &result_rows, &row_labels);
    // Fan-out is a property of the measured input rows: a task whose inputs name
    // two runs is grouped per run even when only one of them has results.
    p.fan_out |= inputs_fan_out(measured_inputs.iter().filter_map(|&i| label_of(i).map(|l| (inputs.task[i], l))));
    let keys = StatKeys::new(&p.fields);
    let groups = p.task_groups();
    let expected_per = expected_per_group(&p, &groups, inputs, &measured_inputs, label_of);
    let sample_rows: Vec<usize> = groups.iter().map(|&(a, _)| input_of[p.rows[a]]).collect();
    let cov = coverage_counts(t, inputs, &matched);
    let (agents, repeats) = agents_and_repeats(&p, &keys, cov, &mut warnings);
    let with_agent_ref = p.fan_out;
    let spec = TaskSpec {
        p,
        keys,
        groups,
        expected: Some(expected_per),
        samples: Samples::Inputs { table: inputs, rows: sample_rows },
        with_agent_ref,
        info: Arc::new(info_specs(t)),
        quoted_names: Arc::new(quoted_names(t)),
    };
    Ok(ProfileOutput { tasks: Some(spec), agents, repeats, summary, warnings })
}

/// Expected rollouts per task group of `p` over the measured input rows (in key order).
pub(crate) fn expected_per_group<'i>(
    p: &Profiled<'_>,
    groups: &[(usize, usize)],
    inputs: &InputTable,
    measured_inputs: &[usize],
    label_of: impl Fn(usize) -> Option<&'i str>,
) -> Vec<i64> {
    if p.fan_out {
        let mut expected: HashMap<(i64, Option<&str>), usize> = HashMap::default();
        for &i in measured_inputs {
            *expected.entry((inputs.task[i], label_of(i))).or_default() += 1;
        }
        groups
            .iter()
            .map(|&(a, _)| {
                let label = p.labels[p.label[a] as usize].as_str();
                expected.get(&(p.task(a), Some(label))).copied().unwrap_or(0) as i64
            })
            .collect()
    } else {
        // One group per task: the measured inputs come in key order, so each task's count
        // is a run, and groups come in task order too.
        let mut runs: Vec<(i64, i64)> = Vec::new();
        for &i in measured_inputs {
            match runs.last_mut() {
                Some((task, n)) if *task == inputs.task[i] => *n += 1,
                _ => runs.push((inputs.task[i], 1)),
            }
        }
        let mut at = 0;
        groups
            .iter()
            .map(|&(a, _)| {
                let task = p.task(a);
                while at < runs.len() && runs[at].0 < task {
                    at += 1;
                }
                match runs.get(at) {
                    Some(&(t, n)) if t == task => n,
                    _ => 0,
                }
            })
            .collect()
    }
}

/// The agent entries (with their coverage `cov`, and coverage-only entries for agents
/// with nothing measured) and the repeat-level entries of a profiled set.
pub(crate) fn agents_and_repeats(
    p: &Profiled<'_>,
    keys: &StatKeys,
    cov: Vec<(String, [usize; 4])>,
    warnings: &mut Warnings,
) -> (Vec<Json>, Vec<Json>) {
    let (agent_stats, repeats, repeat_warnings) = agent_and_repeat_levels(p, keys);
    warnings.extend(repeat_warnings);
    assemble_levels(&p.labels, agent_stats, repeats, cov, warnings)
}

/// The agent entries (with the across-repeat intervals and coverage) and the repeat-level
/// entries, from each label's agent-level members (in label order) and the repeat level.
pub(crate) fn assemble_levels(
    labels: &[String],
    agent_stats: Vec<Members>,
    repeats: Vec<RepeatEntry>,
    cov: Vec<(String, [usize; 4])>,
    warnings: &mut Warnings,
) -> (Vec<Json>, Vec<Json>) {
    let names: Vec<&str> = labels.iter().map(|l| l.as_ref()).collect();
    let across = across_repeats(&repeats, &names, warnings);
    let mut agents: Vec<Json> = Vec::new();
    for (l, (mut items, acr)) in agent_stats.into_iter().zip(across).enumerate() {
        items.push((Arc::from("agent_ref"), Json::name_ref(&labels[l])));
        items.extend(acr);
        agents.push(Json::Obj(items));
    }
    let agents = with_coverage(&agents, cov);
    let repeats: Vec<Json> = repeats
        .into_iter()
        .map(|(l, _, e)| {
            let mut items: Vec<(Key, Json)> = vec![(Arc::from("agent_ref"), Json::name_ref(&labels[l as usize]))];
            items.extend(e);
            Json::Obj(items)
        })
        .collect();
    (agents, repeats)
}

/// Per agent name of the input rows (first-seen order over `matched`, in key order):
/// its measured and masked rollouts, its tasks with a measured rollout and without one.
pub(crate) fn coverage_counts(
    t: &RolloutTable,
    inputs: &InputTable,
    matched: &[(usize, usize)],
) -> Vec<(String, [usize; 4])> {
    let mut per_agent: BTreeMap<usize, (String, Vec<usize>)> = BTreeMap::new(); // first-seen order
    let mut order_of: HashMap<&str, usize> = HashMap::default();
    for &(i, r) in matched {
        if let Some(name) = inputs.name(inputs.agent[i]) {
            let n = order_of.len();
            let o = *order_of.entry(name).or_insert(n);
            per_agent.entry(o).or_insert_with(|| (name.to_string(), Vec::new())).1.push(r);
        }
    }
    per_agent
        .into_values()
        .map(|(n, rows)| {
            let masked = rows.iter().filter(|&&r| t.masked[r]).count();
            let all = distinct(rows.iter().map(|&r| t.task[r]));
            let measured = distinct(rows.iter().filter(|&&r| !t.masked[r]).map(|&r| t.task[r]));
            (n, [rows.len() - masked, masked, measured, all - measured])
        })
        .collect()
}

/// Appends each agent's coverage (keyed by `agent_ref.name` of the input rows, over all
/// results including masked ones; nothing when none was masked) to its entry, and
/// coverage-only entries for the rest.
pub(crate) fn with_coverage(agents: &[Json], counts: Vec<(String, [usize; 4])>) -> Vec<Json> {
    let mut cov: Vec<(String, Vec<(Key, Json)>)> = counts
        .into_iter()
        .filter(|(_, c)| c[1] > 0)
        .map(|(n, c)| (n, coverage_members(c[0], c[1], c[2], c[3])))
        .collect();
    let mut out = Vec::with_capacity(agents.len() + cov.len());
    for a in agents {
        let mut a = a.clone();
        let name = match a.get("agent_ref").and_then(|r| r.get("name")) {
            Some(Json::Str(s)) => s.clone(),
            _ => String::new(),
        };
        if let Some(pos) = cov.iter().position(|(n, _)| *n == name) {
            let (_, c) = cov.remove(pos);
            for (k, v) in c {
                a.push(k, v);
            }
        }
        out.push(a);
    }
    for (name, c) in cov {
        let mut items: Vec<(Key, Json)> = vec![(Arc::from("agent_ref"), Json::name_ref(&name))];
        items.extend(c);
        out.push(Json::Obj(items));
    }
    out
}

pub(crate) fn completion_summary(
    t: &RolloutTable,
    inputs: &InputTable,
    rows_idx: &[((i64, i64), usize)],
    matched: &[(usize, usize)],
) -> CompletionSummary {
    // Groups are (task, run key). Run keys are resolved once per (server, agent) name
    // pair and numbered; rows come in key order, so each task's rows are consecutive and
    // `matched` (a subsequence of `rows_idx`) is walked alongside.
    let mut run_ids: HashMap<Option<&str>, u32> = HashMap::default();
    let mut pair_run: HashMap<(u32, u32), u32> = HashMap::default();
    let mut run_of = |i: usize| -> u32 {
        *pair_run.entry((inputs.server[i], inputs.agent[i])).or_insert_with(|| {
            let k = run_key(inputs.name(inputs.server[i]), inputs.name(inputs.agent[i]));
            let n = run_ids.len() as u32;
            *run_ids.entry(k).or_insert(n)
        })
    };
    let mut last = None;
    let mut run_of = |i: usize| same_as_last(&mut last, (inputs.server[i], inputs.agent[i]), || run_of(i));
    let (mut groups, mut complete, mut partial, mut missing) = (0, 0, 0, 0);
    // Per run of the current task: (run id, expected, completed).
    let mut task_runs: Vec<(u32, usize, usize)> = Vec::new();
    let (mut k, mut j) = (0, 0);
    while k < rows_idx.len() {
        let task = rows_idx[k].0 .0;
        task_runs.clear();
        while k < rows_idx.len() && rows_idx[k].0 .0 == task {
            let i = rows_idx[k].1;
            let done = j < matched.len() && matched[j].0 == i;
            j += usize::from(done);
            let run = run_of(i);
            match task_runs.iter_mut().find(|(r, _, _)| *r == run) {
                Some(g) => {
                    g.1 += 1;
                    g.2 += usize::from(done);
                }
                None => task_runs.push((run, 1, usize::from(done))),
            }
            k += 1;
        }
        for &(_, e, c) in &task_runs {
            groups += 1;
            if c == e {
                complete += 1;
            } else if c > 0 {
                partial += 1;
            } else {
                missing += 1;
            }
        }
    }
    debug_assert_eq!(j, matched.len());
    let exp = rows_idx.len();
    let done = matched.len();
    CompletionSummary {
        expected_rollout_rows: exp,
        completed_rollout_rows: done,
        missing_rollout_rows: exp - done,
        extra_rollout_rows: t.len() - done,
        reward_profile_completion_pct: if exp == 0 { 100.0 } else { 100.0 * done as f64 / exp as f64 },
        total_input_rows: groups,
        complete_input_rows: complete,
        partial_input_rows: partial,
        missing_input_rows: missing,
        masked_rollout_rows: matched.iter().filter(|&&(_, r)| t.masked[r]).count(),
    }
}
/// Whether some task has rows under more than one label, given (task, label) pairs in
/// task order.
pub(crate) fn inputs_fan_out<'a>(rows: impl Iterator<Item = (i64, &'a str)>) -> bool {
    let mut prev: Option<(i64, &str)> = None;
    for (task, label) in rows {
        if prev.is_some_and(|(t, l)| t == task && l != label) {
            return true;
        }
        prev = Some((task, label));
    }
    false
}
