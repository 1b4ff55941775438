//! One record's result, in two parts: a small fixed-size [`Entry`] for every record (its
//! identity as the report order compares it, verdict, unobserved checks and what the task
//! checks read), and a [`Detail`] only for the records whose verdict line needs more
//! (findings, a stage, a string index, a rollout id of its own, an unreadable line).
//! Nearly every record of a sweep without trajectories is an entry alone.

use std::collections::BTreeMap;

use super::checks::{self, obj, Check, CheckSet, Evidence, Finding, Verdict};
use super::record::{coerce, Coerced, Fields, Index, Line, Member};
use super::{python, trajectory};
use crate::json::scan::Scalar;
use crate::json::Json;

/// How one part of an identity (task, rollout, stage) compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    /// An integer within `i64`, held in the entry.
    Int,
    /// No stage (sorts as the text `None`).
    Missing,
    /// Anything else: read from the record's detail.
    Other,
    /// No task index: the record's ordinal stands in once it is known.
    Ordinal,
}

/// Marks an entry without a detail.
pub const NO_DETAIL: u32 = u32::MAX;

/// Every record's part of the result.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// Task, rollout and stage: how each compares, and its value when an integer.
    pub tags: [Tag; 3],
    pub values: [i64; 3],
    /// The record's position in the run (within its piece until settled).
    pub ordinal: u32,
    /// The record's detail (index into its piece's details until settled), or
    /// [`NO_DETAIL`].
    pub detail: u32,
    pub verdict: Verdict,
    pub unobserved: CheckSet,
    /// The turns' call scope and bindings are complete.
    pub policy_calls_observed: bool,
    /// Some call the turns bind succeeded.
    pub successful_call: bool,
    /// How many records share this record's identity (0 when none does).
    pub duplicates: u32,
}

/// The rollout id: given by the record or its trajectory, or `<task>-<rollout>` where
/// each part is `str()` of the raw value (kept when it differs from the index's text).
#[derive(Clone, Debug, PartialEq)]
pub enum RolloutId {
    Given(Box<str>),
    Parts { task: Option<Box<str>>, rollout: Option<Box<str>> },
}

/// The part of a record's result that only some records need.
#[derive(Clone, Debug)]
pub struct Detail {
    pub task: Index,
    pub rollout: Index,
    pub stage: Option<Index>,
    pub rollout_id: RolloutId,
    pub findings: Vec<Finding>,
    /// The line number (within its piece of the file until settled).
    pub line: u64,
    /// For an unreadable line, the error Python raises reading it.
    pub unreadable: Option<&'static str>,
}

impl Detail {
    pub fn index(&self, part: usize) -> Option<&Index> {
        match part {
            0 => Some(&self.task),
            1 => Some(&self.rollout),
            _ => self.stage.as_ref(),
        }
    }
}

/// A record NeMo Gym cannot check (its validation fails and the whole run stops): the
/// key, and what it held.
#[derive(Debug)]
pub struct Refusal {
    pub key: &'static str,
    pub found: String,
}

/// The per-record counts behind the summary's statistics.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// The trajectory has model calls.
    pub capture_observed: bool,
    pub call_errors: u64,
    /// Failed calls by status (`unknown` without one).
    pub errors_by_status: Vec<(String, u64)>,
    pub ended_on_error: bool,
    /// Calls repeating an identity already seen.
    pub duplicated_calls: u64,
    /// Prompt and completion tokens of `response.usage`, then of all captured calls.
    pub tokens: [i128; 4],
}

fn part(index: Option<&Index>) -> (Tag, i64) {
    match index {
        Some(Index::Int(i)) => (Tag::Int, *i),
        Some(_) => (Tag::Other, 0),
        None => (Tag::Missing, 0),
    }
}

/// Judges one line (`line_no` within its piece): its entry, its detail when it needs
/// one, and its counts added to `totals`.
pub fn judge(
    line: Line<'_>,
    line_no: u64,
    ignored: CheckSet,
    totals: &mut Totals,
) -> Result<(Entry, Option<Detail>), Refusal> {
    match line {
        Line::Record(fields) => judge_record(&fields, line_no, ignored, totals),
        Line::Unreadable(error) => Ok(unreadable(error, line_no, ignored, totals)),
    }
}

fn unreadable(error: &'static str, line: u64, ignored: CheckSet, totals: &mut Totals) -> (Entry, Option<Detail>) {
    let mut unobserved = CheckSet::default();
    for &c in Check::rollout() {
        if c != Check::RecordUnreadable && !ignored.has(c) {
            unobserved.add(c);
        }
    }
    let found = !ignored.has(Check::RecordUnreadable);
    totals.add_record(unobserved, &Stats::default(), found.then_some(Check::RecordUnreadable));
    let entry = Entry {
        tags: [Tag::Other, Tag::Int, Tag::Missing],
        values: [0; 3],
        ordinal: 0,
        detail: 0,
        verdict: Verdict::of(found, unobserved),
        unobserved,
        policy_calls_observed: false,
        successful_call: false,
        duplicates: 0,
    };
    let detail = Detail {
        task: Index::Int(0),
        rollout: Index::Int(0),
        stage: None,
        rollout_id: RolloutId::Parts { task: None, rollout: None },
        findings: Vec::new(),
        line,
        unreadable: Some(error),
    };
    (entry, Some(detail))
}

fn judge_record(
    f: &Fields<'_>,
    line: u64,
    ignored: CheckSet,
    totals: &mut Totals,
) -> Result<(Entry, Option<Detail>), Refusal> {
    let index = |m: Option<Member<'_>>, key: &'static str| -> Result<Option<Coerced>, Refusal> {
        let m = m.filter(|m| key != "stage_index" || !matches!(m.scalar, Scalar::Null));
        m.map(|m| coerce(&m).map_err(|found| Refusal { key, found })).transpose()
    };
    let task = index(f.task, "_ng_task_index")?;
    let rollout = index(f.rollout, "_ng_rollout_index")?;
    let stage = index(f.stage, "stage_index")?;
    let tree = match f.trajectory.filter(|m| !matches!(m.scalar, Scalar::Null)) {
        // A member the scanner accepted but the tree reader refuses is nested deeper
        // than NeMo Gym's reader reads: the line is unreadable for it too.
        Some(m) => match m.tree() {
            Some(tree) => Some(tree),
            None => return Ok(unreadable("JSONDecodeError", line, ignored, totals)),
        },
        None => None,
    };
    let rollout_id = match (f.rollout_id.filter(Member::truthy), tree.as_ref().and_then(|t| t.get("rollout_id"))) {
        (Some(m), _) => RolloutId::Given(m.python_str().into()),
        (None, Some(v)) if python::truthy(v) => RolloutId::Given(python::str_of(v).into()),
        _ => RolloutId::Parts {
            task: task.as_ref().and_then(|t| t.raw_text.clone()),
            rollout: rollout.as_ref().and_then(|r| r.raw_text.clone()),
        },
    };
    let parts = Parts {
        task: task.map(|t| t.index),
        rollout: rollout.map_or(Index::Int(0), |r| r.index),
        stage: stage.map(|s| s.index),
        rollout_id,
    };
    Ok(judge_parts(parts, tree.as_ref(), f.usage.tokens(), line, ignored, totals))
}

/// A record read: its indexes (the task's missing when the record has none) and its
/// rollout id.
struct Parts {
    task: Option<Index>,
    rollout: Index,
    stage: Option<Index>,
    rollout_id: RolloutId,
}

/// Judges a record whose caller already knows it holds no `ng_trajectory`,
/// `_ng_rollout_id` or `stage_index`: integer indexes and its `response.usage` token
/// counts (prompt, completion) are all the checks read of it.
pub fn judge_plain(
    task: i64,
    rollout: i64,
    tokens: (Option<i128>, Option<i128>),
    line: u64,
    ignored: CheckSet,
    totals: &mut Totals,
) -> (Entry, Option<Detail>) {
    let parts = Parts {
        task: Some(Index::Int(task)),
        rollout: Index::Int(rollout),
        stage: None,
        rollout_id: RolloutId::Parts { task: None, rollout: None },
    };
    judge_parts(parts, None, tokens, line, ignored, totals)
}

/// Runs the checks on a record's trajectory (a tree, validated here) and token counts.
fn judge_parts(
    parts: Parts,
    tree: Option<&Json>,
    tokens: (Option<i128>, Option<i128>),
    line: u64,
    ignored: CheckSet,
    totals: &mut Totals,
) -> (Entry, Option<Detail>) {
    let validated = tree.map(trajectory::validate);
    let evidence = Evidence::new(validated.as_ref().and_then(|v| v.as_ref().ok()), tokens);
    let (findings, unobserved) = evidence.run(matches!(validated, Some(Err(_))), ignored);
    let stats = stats(&evidence);
    totals.add_record(unobserved, &stats, None);
    for finding in &findings {
        totals.add_findings(finding.check, 1);
    }
    let Parts { task, rollout, stage, rollout_id } = parts;
    let (task_tag, task_value) = task.as_ref().map_or((Tag::Ordinal, 0), |t| part(Some(t)));
    let (rollout_tag, rollout_value) = part(Some(&rollout));
    let (stage_tag, stage_value) = part(stage.as_ref());
    let plain = rollout_id == RolloutId::Parts { task: None, rollout: None };
    let needs_detail = !findings.is_empty()
        || !plain
        || stage_tag != Tag::Missing
        || task_tag == Tag::Other
        || rollout_tag == Tag::Other;
    let entry = Entry {
        tags: [task_tag, rollout_tag, stage_tag],
        values: [task_value, rollout_value, stage_value],
        ordinal: 0,
        detail: if needs_detail { 0 } else { NO_DETAIL },
        verdict: Verdict::of(!findings.is_empty(), unobserved),
        unobserved,
        policy_calls_observed: evidence.turn_scope_complete && evidence.turn.complete(),
        successful_call: evidence.turn.matched.iter().any(|&i| checks::successful(&evidence.calls[i])),
        duplicates: 0,
    };
    let detail = needs_detail.then(|| Detail {
        task: task.unwrap_or(Index::Int(0)),
        rollout,
        stage,
        rollout_id,
        findings,
        line,
        unreadable: None,
    });
    (entry, detail)
}

/// Settles what depends on the record's place: it is record `ordinal` of the run, and
/// `line_offset` lines of its file come before its piece; `source` is the file's
/// position and its name as reports write it.
pub fn settle(
    entry: &mut Entry,
    detail: Option<&mut Detail>,
    ordinal: u32,
    line_offset: u64,
    source: (usize, &str),
    ignored: CheckSet,
) {
    entry.ordinal = ordinal;
    if entry.tags[0] == Tag::Ordinal {
        entry.tags[0] = Tag::Int;
        entry.values[0] = i64::from(ordinal);
    }
    let Some(d) = detail else { return };
    d.line += line_offset;
    if entry.tags[0] == Tag::Int {
        d.task = Index::Int(entry.values[0]);
    }
    if let Some(error) = d.unreadable {
        d.task = Index::Str(format!("__unreadable_record__:input-{}:line-{}", source.0, d.line).into());
        if !ignored.has(Check::RecordUnreadable) {
            d.findings.push(Finding {
                check: Check::RecordUnreadable,
                locator: Some(obj([("source_file", Json::Str(source.1.into())), ("line", checks::int(d.line.into()))])),
                detail: obj([
                    ("reason", Json::Str("rollout record is unreadable".into())),
                    ("error", Json::Str(error.into())),
                ]),
            });
        }
    }
}

fn stats(e: &Evidence<'_>) -> Stats {
    let calls = e.calls;
    let mut errors_by_status: Vec<(String, u64)> = Vec::new();
    for c in calls.iter().filter(|c| checks::failed(c)) {
        let status = c.status_code.map_or_else(|| "unknown".to_string(), |s| s.to_string());
        match errors_by_status.iter_mut().find(|(s, _)| *s == status) {
            Some((_, n)) => *n += 1,
            None => errors_by_status.push((status, 1)),
        }
    }
    let mut identities: Vec<String> = calls.iter().filter_map(checks::identity).collect();
    let all = identities.len();
    identities.sort_unstable();
    identities.dedup();
    let (usage_prompt, usage_completion) = e.usage;
    let capture = |f: fn(&trajectory::Call<'_>) -> Option<i128>| calls.iter().filter_map(f).sum::<i128>();
    Stats {
        capture_observed: !calls.is_empty(),
        call_errors: errors_by_status.iter().map(|(_, n)| n).sum(),
        errors_by_status,
        ended_on_error: checks::ended_on_failure(calls),
        duplicated_calls: (all - identities.len()) as u64,
        tokens: [
            usage_prompt.unwrap_or(0),
            usage_completion.unwrap_or(0),
            capture(|c| c.prompt_tokens),
            capture(|c| c.completion_tokens),
        ],
    }
}

/// The run's counts over every record; the counts of the parts of a run add up.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    pub records: u64,
    pub(super) captures: u64,
    /// Per rollout check: records where it was unobserved.
    pub(super) unobserved: [u64; 12],
    /// Per check: findings on records.
    pub(super) issues: [u64; 14],
    pub(super) call_errors: u64,
    pub(super) by_status: BTreeMap<String, u64>,
    pub(super) rollouts_with_errors: u64,
    pub(super) ended_on_error: u64,
    pub(super) replayed: u64,
    pub(super) rollouts_replaying: u64,
    pub(super) tokens: [i128; 4],
}

impl Totals {
    /// Adds a record: its unobserved checks, its counts, and a finding it will get.
    pub fn add_record(&mut self, unobserved: CheckSet, s: &Stats, finding: Option<Check>) {
        self.records += 1;
        self.captures += u64::from(s.capture_observed);
        for (k, c) in Check::rollout().iter().enumerate() {
            self.unobserved[k] += u64::from(unobserved.has(*c));
        }
        if let Some(c) = finding {
            self.add_findings(c, 1);
        }
        self.call_errors += s.call_errors;
        for (status, n) in &s.errors_by_status {
            *self.by_status.entry(status.clone()).or_default() += n;
        }
        self.rollouts_with_errors += u64::from(s.call_errors > 0);
        self.ended_on_error += u64::from(s.ended_on_error);
        self.replayed += s.duplicated_calls;
        self.rollouts_replaying += u64::from(s.duplicated_calls > 0);
        for (t, n) in self.tokens.iter_mut().zip(s.tokens) {
            *t += n;
        }
    }

    pub fn add_findings(&mut self, c: Check, n: u64) {
        self.issues[c as usize] += n;
    }

    pub fn merge(&mut self, o: &Totals) {
        self.records += o.records;
        self.captures += o.captures;
        self.unobserved.iter_mut().zip(o.unobserved).for_each(|(a, b)| *a += b);
        self.issues.iter_mut().zip(o.issues).for_each(|(a, b)| *a += b);
        self.call_errors += o.call_errors;
        for (status, n) in &o.by_status {
            *self.by_status.entry(status.clone()).or_default() += n;
        }
        self.rollouts_with_errors += o.rollouts_with_errors;
        self.ended_on_error += o.ended_on_error;
        self.replayed += o.replayed;
        self.rollouts_replaying += o.rollouts_replaying;
        self.tokens.iter_mut().zip(o.tokens).for_each(|(a, b)| *a += b);
    }
}
