//! The fourteen health checks, in the order they run and are reported, and the
//! evidence the rollout-level ones read: the trajectory's model calls bound to the
//! references its turns and invocations make.
//!
//! A check that cannot be judged from the evidence a record carries is *unobserved*
//! for that record rather than passed. A check that fails on malformed free-form content
//! (a response whose `choices` is a number, a tool-call `type` that is a list) is
//! reported by `check_execution_error`, with the error Python raises for it.

use std::sync::Arc;

use super::python;
use super::trajectory::{Call, Ref, Trajectory};
use crate::json::Json;

/// A health check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    ExecutionError,
    RecordUnreadable,
    DuplicateIdentity,
    MissingAgentTurns,
    EndedOnFailedCall,
    TurnHollow,
    ZeroCompletionTokens,
    MissingTokenCounts,
    CaptureMismatch,
    CallFailed,
    TokenCountMismatch,
    RunawayGeneration,
    TaskConsistentlyUnhealthy,
    TaskNoSuccessfulCalls,
}

/// What a rollout check reads, which decides when it is unobserved.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reads {
    Record,
    Turns,
    ObservedCalls,
    OwnedCalls,
    TurnCalls,
}

impl Check {
    /// Every check, in registry order.
    pub const ALL: [Check; 14] = [
        Check::ExecutionError,
        Check::RecordUnreadable,
        Check::DuplicateIdentity,
        Check::MissingAgentTurns,
        Check::EndedOnFailedCall,
        Check::TurnHollow,
        Check::ZeroCompletionTokens,
        Check::MissingTokenCounts,
        Check::CaptureMismatch,
        Check::CallFailed,
        Check::TokenCountMismatch,
        Check::RunawayGeneration,
        Check::TaskConsistentlyUnhealthy,
        Check::TaskNoSuccessfulCalls,
    ];

    /// The checks judged per record (the rest are judged per task).
    pub fn rollout() -> &'static [Check] {
        &Check::ALL[..12]
    }

    pub fn id(self) -> &'static str {
        match self {
            Check::ExecutionError => "check_execution_error",
            Check::RecordUnreadable => "record_unreadable",
            Check::DuplicateIdentity => "rollout_duplicate_identity",
            Check::MissingAgentTurns => "rollout_missing_agent_turns",
            Check::EndedOnFailedCall => "rollout_ended_on_failed_model_call",
            Check::TurnHollow => "agent_turn_hollow",
            Check::ZeroCompletionTokens => "model_call_zero_completion_tokens",
            Check::MissingTokenCounts => "model_call_missing_token_counts",
            Check::CaptureMismatch => "trajectory_capture_mismatch",
            Check::CallFailed => "model_call_failed",
            Check::TokenCountMismatch => "rollout_token_count_mismatch",
            Check::RunawayGeneration => "model_call_runaway_generation",
            Check::TaskConsistentlyUnhealthy => "task_consistently_unhealthy",
            Check::TaskNoSuccessfulCalls => "task_no_successful_model_calls",
        }
    }

    pub fn from_id(id: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.id() == id)
    }

    /// A check judged per record, by its id; `Err` lists the ids such a check has.
    pub fn rollout_from_id(id: &str) -> Result<Check, String> {
        Check::from_id(id).filter(|c| Check::rollout().contains(c)).ok_or_else(|| {
            let ids: Vec<&str> = Check::rollout().iter().map(|c| c.id()).collect();
            ids.join(", ")
        })
    }

    fn reads(self) -> Reads {
        match self {
            Check::MissingAgentTurns | Check::TurnHollow => Reads::Turns,
            Check::EndedOnFailedCall => Reads::ObservedCalls,
            Check::TokenCountMismatch => Reads::TurnCalls,
            Check::ZeroCompletionTokens
            | Check::MissingTokenCounts
            | Check::CaptureMismatch
            | Check::CallFailed
            | Check::RunawayGeneration => Reads::OwnedCalls,
            _ => Reads::Record,
        }
    }
}

/// A set of checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckSet(u16);

impl CheckSet {
    pub fn has(self, c: Check) -> bool {
        self.0 & (1 << c as u16) != 0
    }
    pub fn add(&mut self, c: Check) {
        self.0 |= 1 << c as u16;
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// The members, in registry order.
    pub fn iter(self) -> impl Iterator<Item = Check> {
        Check::ALL.into_iter().filter(move |c| self.has(*c))
    }
}

/// A rollout's or a task's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Healthy,
    Unhealthy,
    Unobserved,
}

impl Verdict {
    /// Unhealthy with any finding, else unobserved with any unobserved check, else healthy.
    pub fn of(findings: bool, unobserved: CheckSet) -> Verdict {
        if findings {
            Verdict::Unhealthy
        } else if !unobserved.is_empty() {
            Verdict::Unobserved
        } else {
            Verdict::Healthy
        }
    }
    pub fn id(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::Unhealthy => "unhealthy",
            Verdict::Unobserved => "unobserved",
        }
    }
}

/// What a check found: the check, where (when it names a place) and what.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub check: Check,
    pub locator: Option<Json>,
    pub detail: Json,
}

/// An object with keys in the given order.
pub fn obj<const N: usize>(members: [(&str, Json); N]) -> Json {
    Json::Obj(members.into_iter().map(|(k, v)| (Arc::from(k), v)).collect())
}

/// An integer (beyond `i64` only for absurd inputs, which are then clamped).
pub fn int(v: i128) -> Json {
    Json::Int(v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

fn opt_str(v: Option<&str>) -> Json {
    v.map_or(Json::Null, |s| Json::Str(s.to_string()))
}

fn reason(text: &str) -> Json {
    obj([("reason", Json::Str(text.into()))])
}

fn truthy(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// `_nonempty`: text with non-space characters, a list with such an item, an object with
/// such a text-bearing member; never a number or boolean.
fn nonempty(v: Option<&Json>) -> bool {
    const TEXT_KEYS: [&str; 9] = [
        "text",
        "content",
        "output_text",
        "answer",
        "refusal",
        "encrypted_content",
        "reasoning",
        "reasoning_content",
        "summary",
    ];
    match v {
        Some(Json::Str(s)) => !python::strip(s).is_empty(),
        Some(Json::Arr(items)) => items.iter().any(|x| nonempty(Some(x))),
        Some(o @ Json::Obj(_)) => TEXT_KEYS.iter().any(|k| nonempty(o.get(k))),
        _ => false,
    }
}

/// Whether an answer holds a tool call: an object (at any list depth) whose `type` is a
/// tool-call type or whose `tool_calls` is truthy. A `type` that is a list or an object
/// cannot be looked up (Python raises `TypeError`).
fn has_tool_call(v: Option<&Json>) -> Result<bool, &'static str> {
    const TOOL_TYPES: [&str; 13] = [
        "function_call",
        "tool_call",
        "tool_use",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "file_search_call",
        "web_search_call",
        "computer_call",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "custom_tool_call",
    ];
    match v {
        Some(Json::Arr(items)) => {
            for item in items {
                if has_tool_call(Some(item))? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Some(o @ Json::Obj(_)) => match o.get("type") {
            Some(Json::Arr(_) | Json::Obj(_)) => Err("TypeError"),
            Some(Json::Str(t)) if TOOL_TYPES.contains(&t.as_str()) => Ok(true),
            _ => Ok(o.get("tool_calls").is_some_and(python::truthy)),
        },
        _ => Ok(false),
    }
}

/// Whether a response carries content: `output_text`, `content` or `output`, or a chat
/// choice with `text` or `message.content`. Choices that are a number cannot be
/// iterated (`TypeError`); a message that is not an object has no `get`
/// (`AttributeError`).
fn has_content(response: Option<&Json>) -> Result<bool, &'static str> {
    let Some(r @ Json::Obj(_)) = response else { return Ok(false) };
    if nonempty(r.get("output_text")) || nonempty(r.get("content")) {
        return Ok(true);
    }
    let mut chat = false;
    match r.get("choices") {
        Some(Json::Arr(choices)) => {
            for choice in choices.iter().filter(|c| matches!(c, Json::Obj(_))) {
                if nonempty(choice.get("text")) {
                    chat = true;
                    break;
                }
                match choice.get("message") {
                    Some(m @ Json::Obj(_)) if nonempty(m.get("content")) => {
                        chat = true;
                        break;
                    }
                    Some(m) if !matches!(m, Json::Obj(_)) && python::truthy(m) => return Err("AttributeError"),
                    _ => {}
                }
            }
        }
        Some(c @ (Json::Int(_) | Json::Float(_) | Json::Bool(_))) if python::truthy(c) => return Err("TypeError"),
        _ => {}
    }
    Ok(nonempty(r.get("output")) || chat)
}

/// A call failed: status 400 or more, a non-empty error category, or a failed,
/// errored or cancelled response status.
pub fn failed(c: &Call) -> bool {
    c.status_code.is_some_and(|s| s >= 400)
        || truthy(c.error_category).is_some()
        || matches!(c.response_status, Some("failed" | "error" | "cancelled"))
}

/// A call succeeded: not failed, and no status or a status from 200 to 399.
pub fn successful(c: &Call) -> bool {
    !failed(c) && c.status_code.is_none_or(|s| (200..400).contains(&s))
}

/// The identity a call is replayed under: its id, else its model and response id, else
/// its response id alone.
pub fn identity(c: &Call) -> Option<String> {
    match (truthy(c.model_call_id), c.model_ref, truthy(c.response_id)) {
        (Some(id), _, _) => Some(format!("call:{id}")),
        (None, Some(model), Some(rid)) => Some(format!("response:responses_api_models:{model}:{rid}")),
        (None, None, Some(rid)) => Some(format!("response::{rid}")),
        _ => None,
    }
}

/// How a finding names a call: its id, else its response id, else `fallback`.
fn call_locator(c: &Call, fallback: usize) -> Json {
    let id = truthy(c.model_call_id).or(truthy(c.response_id)).map_or_else(|| fallback.to_string(), str::to_string);
    obj([("call_id", Json::Str(id))])
}

fn ref_key(r: &Ref) -> String {
    match (truthy(r.model_call_id), r.model_ref, truthy(r.response_id)) {
        (Some(id), _, _) => format!("call:{id}"),
        (None, Some(model), Some(rid)) => format!("response:responses_api_models:{model}:{rid}"),
        _ => unreachable!("validated references carry a call id or a model and response id"),
    }
}

/// Two references are the same when they give the same id, model and response id (an
/// empty value counting as none).
fn same_ref(a: &Ref, b: &Ref) -> bool {
    fn e(s: Option<&str>) -> &str {
        s.unwrap_or("")
    }
    (e(a.model_call_id), a.model_ref.is_some(), e(a.model_ref), e(a.response_id))
        == (e(b.model_call_id), b.model_ref.is_some(), e(b.model_ref), e(b.response_id))
}

fn dedupe<'a>(refs: impl IntoIterator<Item = Ref<'a>>) -> Vec<Ref<'a>> {
    let mut out: Vec<Ref> = Vec::new();
    for r in refs {
        if !out.iter().any(|o| same_ref(o, &r)) {
            out.push(r);
        }
    }
    out
}

/// The calls a reference resolves to: by id (and by model and response id where the
/// reference also gives them), or without an id by model and response id.
fn resolve(r: &Ref, calls: &[Call]) -> Vec<usize> {
    let fits = |c: &Call| match truthy(r.model_call_id) {
        Some(id) => {
            c.model_call_id == Some(id)
                && (r.model_ref.is_none() || c.model_ref == r.model_ref)
                && (r.response_id.is_none() || c.response_id == r.response_id)
        }
        None => c.model_ref.is_some() && c.model_ref == r.model_ref && truthy(c.response_id) == truthy(r.response_id),
    };
    calls.iter().enumerate().filter(|(_, c)| fits(c)).map(|(i, _)| i).collect()
}

/// References bound to calls.
#[derive(Default)]
pub struct Bindings {
    references: usize,
    /// Calls matched by exactly one reference, each once, in call order.
    pub matched: Vec<usize>,
    missing: Vec<String>,
    duplicated: Vec<(String, usize)>,
}

impl Bindings {
    fn new(refs: &[Ref], calls: &[Call]) -> Bindings {
        let mut b = Bindings { references: refs.len(), ..Bindings::default() };
        for r in refs {
            match resolve(r, calls).as_slice() {
                [] => b.missing.push(ref_key(r)),
                [one] => {
                    if !b.matched.contains(one) {
                        b.matched.push(*one);
                    }
                }
                many => b.duplicated.push((ref_key(r), many.len())),
            }
        }
        b.matched.sort_unstable();
        b
    }
    fn observed(&self) -> bool {
        self.references > 0
    }
    /// Observed, with nothing missing or duplicated.
    pub fn complete(&self) -> bool {
        self.observed() && self.missing.is_empty() && self.duplicated.is_empty()
    }
}

const LENGTH_LIMITS: [&str; 3] = ["length", "max_output_tokens", "max_tokens"];

/// The contradiction gaps, by the finding kind each stands for.
fn contradiction(code: &str) -> Option<&'static str> {
    match code {
        "model_call_reference_unmatched" => Some("missing_captured_call"),
        "model_call_reference_ambiguous" => Some("duplicated_captured_call"),
        "model_call_reference_conflict" => Some("conflicting_call_ownership"),
        _ => None,
    }
}

/// Calls grouped by the model they went to, in first-seen order.
fn chains(calls: &[Call]) -> Vec<Vec<usize>> {
    let mut out: Vec<(Option<&str>, Vec<usize>)> = Vec::new();
    for (i, c) in calls.iter().enumerate() {
        match out.iter_mut().find(|(m, _)| *m == c.model_ref) {
            Some((_, chain)) => chain.push(i),
            None => out.push((c.model_ref, vec![i])),
        }
    }
    out.into_iter().map(|(_, chain)| chain).collect()
}

/// The last call of a chain in time (start time, missing as 0, then position).
fn last_in_time(calls: &[Call], chain: &[usize]) -> usize {
    let key = |&i: &usize| (calls[i].started_at.unwrap_or(0.0), i);
    let mut ordered = chain.to_vec();
    ordered.sort_by(|a, b| key(a).partial_cmp(&key(b)).unwrap_or(std::cmp::Ordering::Equal));
    *ordered.last().expect("chains are not empty")
}

/// Whether a model's own last call failed: it has a failure and either every call
/// failed, or every call has a start time and the last one in time failed.
fn chain_ended_on_failure(calls: &[Call], chain: &[usize]) -> bool {
    let failures = chain.iter().filter(|&&i| failed(&calls[i])).count();
    if failures == 0 {
        return false;
    }
    if failures == chain.len() {
        return true;
    }
    chain.iter().all(|&i| calls[i].started_at.is_some()) && failed(&calls[last_in_time(calls, chain)])
}

/// Whether any model's last call failed.
pub fn ended_on_failure(calls: &[Call]) -> bool {
    chains(calls).iter().any(|chain| chain_ended_on_failure(calls, chain))
}

/// What the rollout checks read from one record.
pub struct Evidence<'t> {
    /// The trajectory when it validated and is not marked as failed projection.
    pub trajectory: Option<&'t Trajectory<'t>>,
    pub turns_observed: bool,
    pub turn_scope_complete: bool,
    pub calls_observed: bool,
    pub calls: &'t [Call<'t>],
    pub turn: Bindings,
    pub owned: Bindings,
    /// Prompt and completion tokens of `response.usage`.
    pub usage: (Option<i128>, Option<i128>),
}

impl<'t> Evidence<'t> {
    /// The evidence of a trajectory (`None`: no trajectory, or one that did not
    /// validate).
    pub fn new(trajectory: Option<&'t Trajectory<'t>>, usage: (Option<i128>, Option<i128>)) -> Evidence<'t> {
        let observed = trajectory.filter(|t| !t.has_gap(&["trajectory_projection_failed"]));
        let Some(t) = observed else {
            return Evidence {
                trajectory: None,
                turns_observed: false,
                turn_scope_complete: false,
                calls_observed: false,
                calls: &[],
                turn: Bindings::default(),
                owned: Bindings::default(),
                usage,
            };
        };
        const INCOMPLETE_CALLS: [&str; 4] = [
            "model_calls_unavailable",
            "model_call_capture_incomplete",
            "model_call_capture_records_unreadable",
            "model_call_capture_unreadable",
        ];
        let turn_refs = dedupe(t.turns.iter().flat_map(|turn| turn.refs.iter().copied()));
        let owned_refs = dedupe(turn_refs.iter().copied().chain(t.invocation_refs.iter().copied()));
        Evidence {
            trajectory: Some(t),
            turns_observed: !t.has_gap(&["turns_unavailable"]),
            turn_scope_complete: !t.has_gap(&["turn_model_call_scope_incomplete"]),
            calls_observed: !t.has_gap(&INCOMPLETE_CALLS),
            calls: &t.calls,
            turn: Bindings::new(&turn_refs, &t.calls),
            owned: Bindings::new(&owned_refs, &t.calls),
            usage,
        }
    }

    fn bindings(&self, check: Check) -> &Bindings {
        if check.reads() == Reads::TurnCalls {
            &self.turn
        } else {
            &self.owned
        }
    }

    fn contradictions(&self) -> impl Iterator<Item = (&'static str, &super::trajectory::Gap<'t>)> {
        let gaps = self.trajectory.map_or(&[][..], |t| &t.gaps[..]);
        gaps.iter().filter_map(|g| contradiction(g.code).map(|kind| (kind, g)))
    }

    /// Whether `check` can be judged from this evidence.
    fn observable(&self, check: Check) -> bool {
        let b = self.bindings(check);
        match check.reads() {
            Reads::Record => true,
            Reads::Turns => self.trajectory.is_some() && self.turns_observed,
            Reads::ObservedCalls => self.trajectory.is_some() && self.calls_observed && !self.calls.is_empty(),
            _ if self.trajectory.is_none() || !self.calls_observed => false,
            _ if check == Check::CaptureMismatch => b.observed() || self.contradictions().next().is_some(),
            _ if b.matched.is_empty() => false,
            _ if check == Check::TokenCountMismatch => {
                self.turn_scope_complete
                    && b.complete()
                    && self.usage.0.is_some()
                    && self.usage.1.is_some()
                    && b.matched
                        .iter()
                        .all(|&i| self.calls[i].prompt_tokens.is_some() && self.calls[i].completion_tokens.is_some())
            }
            _ if check == Check::RunawayGeneration => !b.matched.iter().any(|&i| {
                let c = &self.calls[i];
                c.finish_reason.is_some_and(|f| LENGTH_LIMITS.contains(&f)) && c.response.is_none()
            }),
            _ => true,
        }
    }

    /// Runs the rollout checks not `ignored` on a readable record; returns the findings
    /// and the checks left unobserved.
    pub fn run(&self, trajectory_error: bool, ignored: CheckSet) -> (Vec<Finding>, CheckSet) {
        let mut findings = Vec::new();
        let mut unobserved = CheckSet::default();
        for &check in Check::rollout() {
            if ignored.has(check) {
                continue;
            }
            if trajectory_error && check == Check::RecordUnreadable {
                let detail = obj([
                    ("reason", Json::Str("canonical trajectory is unreadable".into())),
                    ("error", Json::Str("ValidationError".into())),
                ]);
                findings.push(Finding { check, locator: None, detail });
                continue;
            }
            if !self.observable(check) {
                unobserved.add(check);
                continue;
            }
            match self.judge(check) {
                Ok(found) => findings.extend(found),
                Err(error) => {
                    unobserved.add(check);
                    if !ignored.has(Check::ExecutionError) {
                        let detail = obj([
                            ("reason", Json::Str("check raised an unexpected exception".into())),
                            ("failed_check", Json::Str(check.id().into())),
                            ("error", Json::Str(error.into())),
                        ]);
                        findings.push(Finding { check: Check::ExecutionError, locator: None, detail });
                    }
                }
            }
        }
        (findings, unobserved)
    }

    /// One observable check; `Err` names the error Python raises on this content.
    fn judge(&self, check: Check) -> Result<Vec<Finding>, &'static str> {
        let owned = || self.owned.matched.iter().enumerate().map(|(pos, &i)| (pos, i, &self.calls[i]));
        let per_call = |keep: &dyn Fn(usize, &Call) -> Option<Json>| -> Vec<Finding> {
            owned()
                .filter_map(|(pos, i, c)| {
                    keep(i, c).map(|detail| Finding { check, locator: Some(call_locator(c, pos)), detail })
                })
                .collect()
        };
        Ok(match check {
            Check::MissingAgentTurns => self.missing_agent_turns()?,
            Check::TurnHollow => self.hollow_turns()?,
            Check::EndedOnFailedCall => self.ended_on_failed_call(),
            Check::ZeroCompletionTokens => {
                per_call(&|_, c| (c.completion_tokens == Some(0)).then(|| obj([("completion_tokens", Json::Int(0))])))
            }
            Check::MissingTokenCounts => per_call(&|_, c| {
                let missing: Vec<Json> =
                    [("prompt_tokens", c.prompt_tokens), ("completion_tokens", c.completion_tokens)]
                        .into_iter()
                        .filter(|(_, v)| v.is_none())
                        .map(|(k, _)| Json::Str(k.into()))
                        .collect();
                (!missing.is_empty()).then(|| obj([("missing", Json::Arr(missing))]))
            }),
            Check::CaptureMismatch => self.capture_mismatch(),
            Check::CallFailed => {
                let terminal = self.owned.matched.iter().max().copied();
                let complete = self.owned.complete();
                per_call(&|i, c| {
                    failed(c).then(|| {
                        let last = complete && terminal == Some(i);
                        obj([
                            ("status", c.status_code.map_or(Json::Null, int)),
                            ("error_category", opt_str(c.error_category)),
                            ("terminal", Json::Bool(last)),
                        ])
                    })
                })
            }
            Check::TokenCountMismatch => self.token_count_mismatch(),
            Check::RunawayGeneration => {
                let mut found = Vec::new();
                for (pos, _, c) in owned() {
                    let limited = c.finish_reason.filter(|f| LENGTH_LIMITS.contains(f));
                    if let Some(reason) = limited {
                        if !has_content(c.response)? {
                            let detail = obj([("finish_reason", Json::Str(reason.into()))]);
                            found.push(Finding { check, locator: Some(call_locator(c, pos)), detail });
                        }
                    }
                }
                found
            }
            _ => Vec::new(),
        })
    }

    /// Per turn: (turn number, has a message, has a tool call, references a call).
    fn steps(&self) -> Result<Vec<(i128, bool, bool, bool)>, &'static str> {
        let turns = self.trajectory.map_or(&[][..], |t| &t.turns[..]);
        turns
            .iter()
            .map(|t| {
                let message = nonempty(t.answer) || nonempty(t.reasoning_content);
                Ok((t.turn_no, message, has_tool_call(t.answer)?, !t.refs.is_empty()))
            })
            .collect()
    }

    fn missing_agent_turns(&self) -> Result<Vec<Finding>, &'static str> {
        if self.steps()?.iter().any(|&(_, message, tool, refs)| message || tool || refs) {
            return Ok(Vec::new());
        }
        Ok(vec![Finding {
            check: Check::MissingAgentTurns,
            locator: None,
            detail: reason("no agent turn with model activity"),
        }])
    }

    fn hollow_turns(&self) -> Result<Vec<Finding>, &'static str> {
        Ok(self
            .steps()?
            .into_iter()
            .filter(|&(_, message, tool, _)| !message && !tool)
            .map(|(turn_no, ..)| Finding {
                check: Check::TurnHollow,
                locator: Some(obj([("turn", int(turn_no))])),
                detail: reason("agent turn has no message or tool calls"),
            })
            .collect())
    }

    fn ended_on_failed_call(&self) -> Vec<Finding> {
        let calls = self.calls;
        chains(calls)
            .iter()
            .filter(|chain| chain_ended_on_failure(calls, chain))
            .map(|chain| {
                let last_index = last_in_time(calls, chain);
                let last = &calls[last_index];
                let model = last.model_ref.map_or(Json::Null, |m| Json::Str(format!("responses_api_models/{m}")));
                let successes = chain.iter().filter(|&&i| successful(&calls[i])).count();
                let detail = obj([
                    ("model_ref", model),
                    ("status", last.status_code.map_or(Json::Null, int)),
                    ("error_category", opt_str(last.error_category)),
                    ("observed_calls", Json::Int(chain.len() as i64)),
                    ("successful_calls", Json::Int(successes as i64)),
                ]);
                Finding { check: Check::EndedOnFailedCall, locator: Some(call_locator(last, last_index)), detail }
            })
            .collect()
    }

    fn capture_mismatch(&self) -> Vec<Finding> {
        let last_part = |s: &str| s.rsplit(':').next().unwrap_or_default().to_string();
        let mut seen: Vec<(&str, String)> = Vec::new();
        let mut found = Vec::new();
        let mut add = |kind: &'static str, key: &str, extra: Vec<(&str, Json)>, remember: bool| {
            let place = last_part(key);
            if seen.iter().any(|(k, p)| *k == kind && *p == place) {
                return;
            }
            if remember {
                seen.push((kind, place.clone()));
            }
            let mut detail = obj([("kind", Json::Str(kind.into()))]);
            for (k, v) in extra {
                detail.push(Arc::from(k), v);
            }
            found.push(Finding {
                check: Check::CaptureMismatch,
                locator: Some(obj([("call_id", Json::Str(place))])),
                detail,
            });
        };
        for key in &self.owned.missing {
            add("missing_captured_call", key, Vec::new(), true);
        }
        for (key, count) in &self.owned.duplicated {
            add("duplicated_captured_call", key, vec![("count", Json::Int(*count as i64))], true);
        }
        for (kind, gap) in self.contradictions() {
            let extra =
                vec![("observation_gap", Json::Str(gap.code.into())), ("invocation_id", opt_str(gap.invocation_id))];
            add(kind, truthy(gap.detail).unwrap_or("unknown"), extra, false);
        }
        found
    }

    fn token_count_mismatch(&self) -> Vec<Finding> {
        let sum = |f: fn(&Call) -> Option<i128>| -> i128 {
            self.turn.matched.iter().filter_map(|&i| f(&self.calls[i])).sum()
        };
        let (prompt, completion) = (sum(|c| c.prompt_tokens), sum(|c| c.completion_tokens));
        let (Some(transcript_prompt), Some(transcript_completion)) = self.usage else { return Vec::new() };
        if (transcript_prompt, transcript_completion) == (prompt, completion) {
            return Vec::new();
        }
        let detail = obj([
            ("transcript_prompt", int(transcript_prompt)),
            ("transcript_completion", int(transcript_completion)),
            ("capture_prompt", int(prompt)),
            ("capture_completion", int(completion)),
        ]);
        vec![Finding { check: Check::TokenCountMismatch, locator: None, detail }]
    }
}
