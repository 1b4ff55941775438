//! Aggregate: the `_aggregate_metrics.json` entries `gym eval run` writes, one
//! per run label, each computed as a single agent named `agent` over that run's rollouts.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use super::custom::{self, MetricSpec};
use super::levels::{across_repeats, agent_and_repeat_levels, Profiled, RepeatEntry, StatKeys};
use super::perf::perf_summary;
use super::profile::{coverage, duplicate_key, index_by_key};
use super::tasks::{info_specs, quoted_names, InfoSpec, Samples, TaskSpec};
use super::warnings::Warnings;
use crate::error::{Error, Location, Msg, Opt, Result};
use crate::ingest::labels::{runs, NONE};
use crate::ingest::{InputTable, RolloutTable};
use crate::json::{Json, Members};

/// Options of an aggregate run.
#[derive(Debug, Clone, Default)]
pub struct AggregateOptions {
    /// Label for rollouts that name no agent (no stamp, no `agent_ref`, no input row).
    pub default_agent: Option<String>,
    /// Custom metrics merged into `agent_metrics`.
    pub metrics: Vec<MetricSpec>,
    /// Key-metric selection patterns; empty means the default `mean/*` (+ coverage).
    pub key_metrics: Vec<String>,
    /// Metric values computed outside (SQL metrics), per run label, merged after the
    /// built-in custom metrics.
    pub extra: HashMap<String, Vec<(String, Json)>>,
}

/// One run's rows and how it is named.
pub struct Group {
    pub label: String,
    pub server: Option<String>,
    /// Table rows of this run, in file order.
    pub rows: Vec<usize>,
}

/// Splits rollouts into runs by run key . With inputs, a rollout that has
/// no input row is left out (as NeMo Gym leaves it out); their table rows are returned
/// second.
pub fn groups(
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    default_agent: Option<&str>,
) -> Result<(Vec<Group>, Vec<usize>)> {
    let runs = runs(t, inputs);
    // Groups by label id; rows without a label go to the default agent's group, which
    // is the labelled group of the same name when there is one.
    let default_slot = default_agent.map(|d| runs.labels.iter().position(|l| l == d).unwrap_or(runs.labels.len()));
    let mut slots: Vec<Option<Group>> = (0..=runs.labels.len()).map(|_| None).collect();
    let mut orphans = Vec::new();
    for r in 0..t.len() {
        if inputs.is_some() && !runs.has_input[r] {
            orphans.push(r);
            continue;
        }
        let slot = match (runs.label[r], default_slot) {
            (l, _) if l != NONE => l as usize,
            (_, Some(d)) => d,
            (_, None) => return Err(unnamed(t, inputs, r)),
        };
        let g = slots[slot].get_or_insert_with(|| {
            let label = runs.labels.get(slot).map_or_else(|| default_agent.unwrap_or_default(), |l| l.as_str());
            Group { label: label.to_string(), server: None, rows: Vec::new() }
        });
        if g.server.is_none() && runs.label[r] != NONE {
            let k = runs.key[r] as usize;
            g.server = runs.key_is_server[k].then(|| runs.keys[k].clone());
        }
        g.rows.push(r);
    }
    let mut by: Vec<Group> = slots.into_iter().flatten().collect();
    by.sort_by(|a, b| a.label.cmp(&b.label));
    Ok((by, orphans))
}

/// The error for rollout row `r`, which nothing names: with inputs, its input row names
/// the run (rollstat does not fall back to the rollout's own names then), so the error
/// points there.
pub(crate) fn unnamed(t: &RolloutTable, inputs: Option<&InputTable>, r: usize) -> Error {
    let fix = |m: Msg| m.text("; pass ").opt(Opt::value("agent", "NAME")).text(" to label such rollouts");
    let (task, rollout) = (t.task[r], t.rollout[r]);
    match inputs.and_then(|i| (0..i.task.len()).find(|&k| i.task[k] == task && i.rollout[k] == rollout).map(|k| (i, k))) {
        Some((i, k)) => Error::refused(
            Some(Location::line(&i.path, i.line[k])),
            fix(Msg::default()
                .text(format!(
                    "the input row of rollout key ({task}, {rollout}) ({}) names no agent (no `agent_ref.name`, no `_ng_environment_server`; with ",
                    t.describe(r),
                ))
                .opt(Opt::named("inputs"))
                .text(", runs are named by the input rows)")),
        ),
        None => Error::refused(
            Some(t.location(r)),
            fix(Msg::default()
                .text("this rollout names no agent (no `agent_ref.name`, no `_ng_environment_server`, and no ")
                .opt(Opt::named("inputs"))
                .text(")")),
        ),
    }
}

/// One aggregate entry: its members in order, with the task level kept as a spec so
/// the writer can stream it.
pub struct AggEntry<'a> {
    /// `agent_ref`, `_ng_environment_server` (when stamped), `agent_metrics`, `key_metrics`.
    pub head: Members,
    /// `group_level_metrics`; `None` writes `[]`.
    pub tasks: Option<TaskSpec<'a>>,
    /// `repeat_level_metrics` entries.
    pub repeats: Vec<Json>,
    pub perf_summary: Option<Json>,
}

impl AggEntry<'_> {
    /// The run label.
    pub fn label(&self) -> &str {
        head_label(&self.head)
    }
    pub fn member(&self, k: &str) -> Option<&Json> {
        head_member(&self.head, k)
    }
}

/// The run label an entry's `head` names.
pub fn head_label(head: &Members) -> &str {
    match head.first().map(|(_, v)| v.get("name")) {
        Some(Some(Json::Str(s))) => s,
        _ => "",
    }
}

/// The run label and `key_metrics` (an empty object when it has none) of an entry's
/// `head`, as the commands report them.
pub fn label_and_key_metrics(head: &Members) -> (String, Json) {
    (head_label(head).to_string(), head_member(head, "key_metrics").cloned().unwrap_or(Json::obj()))
}

/// Member `k` of an entry's `head`.
pub fn head_member<'a>(head: &'a Members, k: &str) -> Option<&'a Json> {
    head.iter().find(|(kk, _)| &**kk == k).map(|(_, v)| v)
}

/// What every entry's task spec shares: how each key order writes `rollout_infos`, and
/// the columns' quoted names.
pub type Shared = (Arc<Vec<InfoSpec>>, Arc<Vec<Vec<u8>>>);

/// Computes one aggregate entry.
pub fn entry<'a>(
    t: &'a RolloutTable,
    g: &Group,
    opts: &AggregateOptions,
    shared: &Shared,
    warn: &mut Warnings,
) -> Result<AggEntry<'a>> {
    if g.rows.windows(2).all(|w| w[0] < w[1]) {
        // Rows in table order, which is sorted by (task, rollout, line): a repeated key
        // sits next to itself.
        let key = |r: usize| (t.task[r], t.rollout[r]);
        if let Some(w) = g.rows.windows(2).find(|w| key(w[0]) == key(w[1])) {
            return Err(duplicate_key("result", key(w[0]), t.line[w[0]], t.line[w[1]], &t.lines));
        }
    } else {
        let task: Vec<i64> = g.rows.iter().map(|&r| t.task[r]).collect();
        let rollout: Vec<i64> = g.rows.iter().map(|&r| t.rollout[r]).collect();
        let line: Vec<u64> = g.rows.iter().map(|&r| t.line[r]).collect();
        index_by_key(&task, &rollout, &line, "result", &t.lines)?;
    }
    let mut head: Members = vec![(Arc::from("agent_ref"), Json::name_ref(&g.label))];
    if let Some(s) = &g.server {
        head.push((Arc::from("_ng_environment_server"), Json::Str(s.clone())));
    }
    let cov = coverage(t, &g.rows);
    let perf = perf_summary(t, &g.rows);
    let scored: Vec<usize> = g.rows.iter().copied().filter(|&r| !t.masked[r]).collect();
    if scored.is_empty() {
        head.push((Arc::from("agent_metrics"), Json::Obj(cov.clone())));
        head.push((Arc::from("key_metrics"), Json::Obj(cov)));
        return Ok(AggEntry { head, tasks: None, repeats: vec![], perf_summary: perf });
    }
    let labels = vec![g.label.as_str(); scored.len()];
    let p = Profiled::new(t, &scored, &labels);
    let keys = StatKeys::new(&p.fields);
    let mut reps: Vec<i64> = g.rows.iter().map(|&r| t.rollout[r]).collect();
    reps.sort_unstable();
    reps.dedup();
    // Custom metrics over the scored rollouts grouped by task.
    let custom = |agent: &mut Json, warn: &mut Warnings| -> Result<()> {
        let by_task = if opts.metrics.is_empty() { Vec::new() } else { custom::tasks_of(t, &scored) };
        for m in &opts.metrics {
            agent.set_all(custom::compute(m, t, &by_task, warn)?);
        }
        Ok(())
    };
    let repeats = levels_into_head(&mut head, &g.label, &p, &keys, cov, reps.len(), custom, opts, warn)?;
    Ok(AggEntry { head, tasks: Some(task_spec(p, keys, shared)), repeats, perf_summary: perf })
}

/// The spec of an entry's `group_level_metrics`: one task entry per task of `p`.
pub fn task_spec<'a>(p: Profiled<'a>, keys: StatKeys, shared: &Shared) -> TaskSpec<'a> {
    let groups = p.task_groups();
    TaskSpec {
        p,
        keys,
        groups,
        expected: None,
        samples: Samples::Fixed(Json::Obj(vec![(Arc::from("agent_ref"), Json::name_ref("agent"))])),
        with_agent_ref: false,
        info: shared.0.clone(),
        quoted_names: shared.1.clone(),
    }
}

/// Adds `agent_metrics` and `key_metrics` to an entry's `head` from the agent and repeat
/// levels of `p` (the run's scored rollouts), its coverage and number of repeats (over
/// all its rollouts), and `custom` (the custom metrics, set after the built-in ones);
/// returns the `repeat_level_metrics` entries.
#[allow(clippy::too_many_arguments)]
pub fn levels_into_head(
    head: &mut Members,
    label: &str,
    p: &Profiled<'_>,
    keys: &StatKeys,
    cov: Members,
    num_repeats: usize,
    custom: impl FnOnce(&mut Json, &mut Warnings) -> Result<()>,
    opts: &AggregateOptions,
    warn: &mut Warnings,
) -> Result<Vec<Json>> {
    let (agent, repeats, repeat_warnings) = agent_and_repeat_levels(p, keys);
    let agent = agent.into_iter().next_back().unwrap_or_default();
    warn.extend(repeat_warnings);
    head_from_levels(head, label, agent, repeats, cov, num_repeats, custom, opts, warn)
}

/// [`levels_into_head`] from a run's agent-level members and repeat-level entries
/// computed already.
#[allow(clippy::too_many_arguments)]
pub fn head_from_levels(
    head: &mut Members,
    label: &str,
    mut agent: Members,
    repeats: Vec<RepeatEntry>,
    cov: Members,
    num_repeats: usize,
    custom: impl FnOnce(&mut Json, &mut Warnings) -> Result<()>,
    opts: &AggregateOptions,
    warn: &mut Warnings,
) -> Result<Vec<Json>> {
    let across = across_repeats(&repeats, &[label], warn).pop().unwrap_or_default();
    agent.extend(across);
    agent.extend(cov.clone());
    let mut agent = Json::Obj(agent);
    custom(&mut agent, warn)?;
    agent.set_all(opts.extra.get(label).into_iter().flatten().map(|(k, v)| (k, v.clone())));
    agent.set("num_repeats", Json::Int(num_repeats as i64));
    for pat in &opts.key_metrics {
        if matches!(custom::key_metrics(&agent, std::slice::from_ref(pat)), Json::Obj(v) if v.is_empty()) {
            warn.add(format!(
                "--key-metric {pat:?} matches no metric of {label} (key metrics come from agent_metrics)"
            ));
        }
    }
    let mut key = custom::key_metrics(&agent, &opts.key_metrics);
    key.set_all(cov);
    head.push((Arc::from("agent_metrics"), agent));
    head.push((Arc::from("key_metrics"), key));
    Ok(repeats.into_iter().map(|(_, _, x)| Json::Obj(x)).collect())
}

/// All entries, sorted by label, with warnings.
pub fn aggregate<'a>(
    t: &'a RolloutTable,
    inputs: Option<&InputTable>,
    opts: &AggregateOptions,
) -> Result<(Vec<AggEntry<'a>>, Warnings)> {
    let (gs, orphans) = groups(t, inputs, opts.default_agent.as_deref())?;
    let mut warn = Warnings::default();
    if let Some(&first) = orphans.first() {
        warn.add(format!(
            "{} rollout(s) of {} have no materialized input row (first: {}, rollout key ({}, {})); they are left out of the aggregate",
            orphans.len(),
            t.lines.name(),
            t.describe(first),
            t.task[first],
            t.rollout[first]
        ));
    }
    // Entries in parallel (a sweep of a million one-rollout agents is a million small
    // entries); warnings and the first error are taken in label order, as one by one.
    let shared: Shared = (Arc::new(info_specs(t)), Arc::new(quoted_names(t)));
    let done: Vec<(Result<AggEntry<'a>>, Warnings)> = gs
        .par_iter()
        .map(|g| {
            let mut w = Warnings::default();
            (entry(t, g, opts, &shared, &mut w), w)
        })
        .collect();
    let mut out = Vec::with_capacity(gs.len());
    for (e, w) in done {
        warn.extend(w);
        out.push(e?);
    }
    Ok((out, warn))
}
