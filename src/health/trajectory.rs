//! The `ng_trajectory` evidence a record carries, validated as NeMo Gym validates a
//! trajectory record, and kept as the checks read it.
//!
//! Validation is lenient about types the way model validation is: an integer field takes
//! an integer, a float without a fraction, a boolean or a numeric string (`"3"`, `"3.0"`);
//! a float field takes any number, a boolean or a numeric string (including `"inf"`); a
//! boolean field takes `0`/`1` and words such as `"yes"` and `"off"`; a string field takes
//! only a string. Unknown keys are refused everywhere except inside a model reference
//! and inside the free-form values (`request`, `response`, `question`, `answer`,
//! `reasoning_content`, a tool call's `output`). Items of an invocation's `conversation`
//! must be objects; their contents are not checked further.

use super::python;
use crate::json::{Json, Key};

/// The trajectory does not validate.
#[derive(Debug)]
pub struct Invalid;

type V<T> = Result<T, Invalid>;

/// A reference from a turn or an invocation to a model call.
#[derive(Clone, Copy, Debug)]
pub struct Ref<'a> {
    pub model_call_id: Option<&'a str>,
    /// The model's name (its type is always `responses_api_models`).
    pub model_ref: Option<&'a str>,
    pub response_id: Option<&'a str>,
}

/// One agent turn.
pub struct Turn<'a> {
    pub turn_no: i128,
    pub answer: Option<&'a Json>,
    pub reasoning_content: Option<&'a Json>,
    pub refs: Vec<Ref<'a>>,
}

/// One captured model call, flattened: its metadata and token counts beside it.
pub struct Call<'a> {
    pub model_call_id: Option<&'a str>,
    pub started_at: Option<f64>,
    pub response_id: Option<&'a str>,
    pub model_ref: Option<&'a str>,
    pub status_code: Option<i128>,
    pub response_status: Option<&'a str>,
    pub finish_reason: Option<&'a str>,
    pub error_category: Option<&'a str>,
    pub prompt_tokens: Option<i128>,
    pub completion_tokens: Option<i128>,
    pub response: Option<&'a Json>,
}

/// A gap: evidence the producer could not observe.
pub struct Gap<'a> {
    pub code: &'a str,
    pub invocation_id: Option<&'a str>,
    pub detail: Option<&'a str>,
}

/// A validated trajectory.
pub struct Trajectory<'a> {
    pub turns: Vec<Turn<'a>>,
    /// The references of every invocation, in order.
    pub invocation_refs: Vec<Ref<'a>>,
    pub calls: Vec<Call<'a>>,
    pub gaps: Vec<Gap<'a>>,
}

impl Trajectory<'_> {
    pub fn has_gap(&self, codes: &[&str]) -> bool {
        self.gaps.iter().any(|g| codes.contains(&g.code))
    }
}

/// The members of an object being validated.
#[derive(Clone, Copy)]
struct Obj<'a>(&'a [(Key, Json)]);

/// An object whose keys are all `known` (when `closed`).
fn object<'a>(v: &'a Json, known: &[&str], closed: bool) -> V<Obj<'a>> {
    match v {
        Json::Obj(m) if !closed || m.iter().all(|(k, _)| known.contains(&&**k)) => Ok(Obj(m)),
        _ => Err(Invalid),
    }
}

/// An integer field. The tree holds integers above `i64::MAX` as floats; orjson reads
/// integers up to `u64::MAX` as integers, so a whole float up to 2^64 was one.
fn int_value(v: &Json) -> V<i128> {
    match v {
        Json::Bool(b) => Ok(i128::from(*b)),
        Json::Int(i) => Ok(i128::from(*i)),
        Json::Float(f) if f.fract() == 0.0 && *f > -python::TWO_63 && *f <= 2.0 * python::TWO_63 => Ok(*f as i128),
        Json::Str(s) => python::int_from_str(s).ok_or(Invalid),
        _ => Err(Invalid),
    }
}

fn float_value(v: &Json) -> V<f64> {
    match v {
        Json::Bool(b) => Ok(f64::from(u8::from(*b))),
        Json::Int(i) => Ok(*i as f64),
        Json::Float(f) => Ok(*f),
        Json::Str(s) => python::float_from_str(s).ok_or(Invalid),
        _ => Err(Invalid),
    }
}

fn bool_value(v: &Json) -> V<bool> {
    const WORDS: [(&str, bool); 12] = [
        ("0", false),
        ("off", false),
        ("f", false),
        ("false", false),
        ("n", false),
        ("no", false),
        ("1", true),
        ("on", true),
        ("t", true),
        ("true", true),
        ("y", true),
        ("yes", true),
    ];
    match v {
        Json::Bool(b) => Ok(*b),
        Json::Int(i @ (0 | 1)) => Ok(*i == 1),
        Json::Float(f) if *f == 0.0 || *f == 1.0 => Ok(*f == 1.0),
        Json::Str(s) => WORDS.iter().find(|(w, _)| w.eq_ignore_ascii_case(s)).map(|(_, b)| *b).ok_or(Invalid),
        _ => Err(Invalid),
    }
}

impl<'a> Obj<'a> {
    /// The value of `k` when present and not null.
    fn opt(self, k: &str) -> Option<&'a Json> {
        self.0.iter().find(|(kk, _)| &**kk == k).map(|(_, v)| v).filter(|v| !matches!(v, Json::Null))
    }
    /// Whether `k` is present, null or not.
    fn has(self, k: &str) -> bool {
        self.0.iter().any(|(kk, _)| &**kk == k)
    }
    /// A required field: present and not null.
    fn req(self, k: &str) -> V<&'a Json> {
        self.opt(k).ok_or(Invalid)
    }
    fn opt_str(self, k: &str) -> V<Option<&'a str>> {
        self.opt(k).map(|v| v.as_str().ok_or(Invalid)).transpose()
    }
    fn req_str(self, k: &str) -> V<&'a str> {
        self.req(k)?.as_str().ok_or(Invalid)
    }
    fn opt_int(self, k: &str, min: i128) -> V<Option<i128>> {
        self.opt(k).map(|v| int_value(v).and_then(|i| if i >= min { Ok(i) } else { Err(Invalid) })).transpose()
    }
    fn req_int(self, k: &str, min: i128) -> V<i128> {
        self.opt_int(k, min)?.ok_or(Invalid)
    }
    fn opt_float(self, k: &str, non_negative: bool) -> V<Option<f64>> {
        let check = |f: f64| if !non_negative || f >= 0.0 { Ok(f) } else { Err(Invalid) };
        self.opt(k).map(|v| float_value(v).and_then(check)).transpose()
    }
    fn opt_bool(self, k: &str) -> V<()> {
        self.opt(k).map(bool_value).transpose().map(drop)
    }
    /// A field limited to `allowed` strings; absent takes the default, null is allowed
    /// only when the field is optional.
    fn literal(self, k: &str, allowed: &[&str], nullable: bool) -> V<()> {
        match self.opt(k) {
            None if nullable || !self.has(k) => Ok(()),
            Some(Json::Str(s)) if allowed.contains(&s.as_str()) => Ok(()),
            _ => Err(Invalid),
        }
    }
    /// A list field (absent is empty; null is refused).
    fn list(self, k: &str) -> V<&'a [Json]> {
        match (self.opt(k), self.has(k)) {
            (Some(Json::Arr(items)), _) => Ok(items),
            (None, false) => Ok(&[]),
            _ => Err(Invalid),
        }
    }
    /// A nested model that may not be null (absent takes its defaults).
    fn model(self, k: &str, known: &[&str]) -> V<Option<Obj<'a>>> {
        match (self.opt(k), self.has(k)) {
            (Some(v), _) => object(v, known, true).map(Some),
            (None, false) => Ok(None),
            _ => Err(Invalid),
        }
    }
}

/// A model reference (`{"type": "responses_api_models", "name": ...}`, other keys
/// ignored), or `None` when null or absent.
fn model_ref<'a>(o: Obj<'a>, k: &str) -> V<Option<&'a str>> {
    let Some(v) = o.opt(k) else { return Ok(None) };
    let r = object(v, &[], false)?;
    r.literal("type", &["responses_api_models"], false)?;
    r.req("type")?;
    r.req_str("name").map(Some)
}

/// A reference to a model call: it needs a non-empty `model_call_id`, or a model and a
/// non-empty `response_id`.
fn reference(v: &Json) -> V<Ref<'_>> {
    let o = object(v, &["model_call_id", "model_ref", "response_id"], true)?;
    let r = Ref {
        model_call_id: o.opt_str("model_call_id")?,
        model_ref: model_ref(o, "model_ref")?,
        response_id: o.opt_str("response_id")?,
    };
    let id = r.model_call_id.is_some_and(|s| !s.is_empty());
    let response = r.model_ref.is_some() && r.response_id.is_some_and(|s| !s.is_empty());
    if id || response {
        Ok(r)
    } else {
        Err(Invalid)
    }
}

fn references<'a>(o: Obj<'a>) -> V<Vec<Ref<'a>>> {
    o.list("model_calls")?.iter().map(reference).collect()
}

const TURN_KEYS: [&str; 11] = [
    "invocation_id",
    "task_id",
    "rollout_id",
    "turn_no",
    "timestamp",
    "question",
    "answer",
    "reasoning_content",
    "resolved",
    "step_count",
    "model_calls",
];

/// A turn, with its identity (invocation, task, rollout).
fn turn(v: &Json) -> V<(Turn<'_>, [&str; 3])> {
    let o = object(v, &TURN_KEYS, true)?;
    let identity = [o.req_str("invocation_id")?, o.req_str("task_id")?, o.req_str("rollout_id")?];
    let turn_no = o.req_int("turn_no", 1)?;
    float_value(o.req("timestamp")?)?;
    o.opt_bool("resolved")?;
    o.req_int("step_count", 0)?;
    let t =
        Turn { turn_no, answer: o.opt("answer"), reasoning_content: o.opt("reasoning_content"), refs: references(o)? };
    Ok((t, identity))
}

const INVOCATION_KEYS: [&str; 9] = [
    "kind",
    "invocation_id",
    "parent_invocation_id",
    "spawned_by_tool_call_id",
    "status",
    "duration_ms",
    "error_type",
    "model_calls",
    "conversation",
];

/// An agent invocation: its id and its references.
fn invocation(v: &Json) -> V<(&str, Vec<Ref<'_>>)> {
    let o = object(v, &INVOCATION_KEYS, true)?;
    o.literal("kind", &["agent_invocation"], false)?;
    let id = o.req_str("invocation_id")?;
    for k in ["parent_invocation_id", "spawned_by_tool_call_id", "error_type"] {
        o.opt_str(k)?;
    }
    o.literal("status", &["completed", "failed", "incomplete", "unknown"], false)?;
    o.opt_float("duration_ms", true)?;
    if !o.list("conversation")?.iter().all(|item| matches!(item, Json::Obj(_))) {
        return Err(Invalid);
    }
    Ok((id, references(o)?))
}

const METADATA_KEYS: [&str; 13] = [
    "response_id",
    "model_ref",
    "model",
    "dialect",
    "status_code",
    "response_status",
    "finish_reason",
    "upstream_attempted",
    "response_source",
    "upstream_status_code",
    "local_response_reason",
    "error_category",
    "latency_ttft_ms",
];

const TOKEN_KEYS: [&str; 5] =
    ["prompt_tokens", "completion_tokens", "reasoning_tokens", "total_tokens", "cached_tokens"];

const CALL_KEYS: [&str; 8] = [
    "model_call_id",
    "started_at",
    "completed_at",
    "duration_ms",
    "request",
    "response",
    "response_metadata",
    "token_stats",
];

/// A captured model call.
fn call(v: &Json) -> V<Call<'_>> {
    let o = object(v, &CALL_KEYS, true)?;
    o.opt_float("completed_at", false)?;
    o.opt_float("duration_ms", true)?;
    let mut c = Call {
        model_call_id: o.opt_str("model_call_id")?,
        started_at: o.opt_float("started_at", false)?,
        response_id: None,
        model_ref: None,
        status_code: None,
        response_status: None,
        finish_reason: None,
        error_category: None,
        prompt_tokens: None,
        completion_tokens: None,
        response: o.opt("response"),
    };
    if let Some(m) = o.model("response_metadata", &METADATA_KEYS)? {
        for k in ["model", "dialect", "local_response_reason"] {
            m.opt_str(k)?;
        }
        m.opt_bool("upstream_attempted")?;
        m.literal("response_source", &["upstream", "local"], true)?;
        m.opt_int("upstream_status_code", i128::MIN)?;
        m.opt_float("latency_ttft_ms", true)?;
        c.response_id = m.opt_str("response_id")?;
        c.model_ref = model_ref(m, "model_ref")?;
        c.status_code = m.opt_int("status_code", i128::MIN)?;
        c.response_status = m.opt_str("response_status")?;
        c.finish_reason = m.opt_str("finish_reason")?;
        c.error_category = m.opt_str("error_category")?;
    }
    if let Some(t) = o.model("token_stats", &TOKEN_KEYS)? {
        for k in TOKEN_KEYS {
            t.opt_int(k, 0)?;
        }
        c.prompt_tokens = t.opt_int("prompt_tokens", 0)?;
        c.completion_tokens = t.opt_int("completion_tokens", 0)?;
    }
    Ok(c)
}

const TOOL_CALL_KEYS: [&str; 12] = [
    "kind",
    "invocation_id",
    "tool_call_id",
    "sandbox_id",
    "tool_name",
    "started_at",
    "completed_at",
    "duration_ms",
    "timing_source",
    "status",
    "error_type",
    "output",
];

/// A tool call (checked, not kept): its timing may not end before it starts.
fn tool_call(v: &Json) -> V<()> {
    let o = object(v, &TOOL_CALL_KEYS, true)?;
    o.literal("kind", &["tool_call"], false)?;
    o.req_str("invocation_id")?;
    o.req_str("tool_call_id")?;
    for k in ["sandbox_id", "tool_name", "error_type"] {
        o.opt_str(k)?;
    }
    let started = o.opt_float("started_at", false)?;
    let completed = o.opt_float("completed_at", false)?;
    o.opt_float("duration_ms", true)?;
    o.literal("timing_source", &["executor", "artifact", "harness"], true)?;
    o.literal("status", &["completed", "failed", "timeout", "cancelled", "incomplete", "unknown"], false)?;
    match (started, completed) {
        (Some(s), Some(c)) if c < s => Err(Invalid),
        _ => Ok(()),
    }
}

fn gap(v: &Json) -> V<Gap<'_>> {
    let o = object(v, &["code", "invocation_id", "detail"], true)?;
    Ok(Gap { code: o.req_str("code")?, invocation_id: o.opt_str("invocation_id")?, detail: o.opt_str("detail")? })
}

const TOP_KEYS: [&str; 8] =
    ["schema_version", "task_id", "rollout_id", "invocations", "turns", "model_calls", "tool_calls", "gaps"];

/// Validates a trajectory (a value that is not null), including the record-wide rules:
/// invocation ids and non-empty model call ids unique, every turn naming the trajectory's
/// task and rollout, and each (invocation, turn number) once.
pub fn validate(v: &Json) -> V<Trajectory<'_>> {
    let o = object(v, &TOP_KEYS, true)?;
    o.literal("schema_version", &["1.0"], false)?;
    let task_id = o.req_str("task_id")?;
    let rollout_id = o.req_str("rollout_id")?;
    let mut invocation_ids = Vec::new();
    let mut invocation_refs = Vec::new();
    for item in o.list("invocations")? {
        let (id, refs) = invocation(item)?;
        invocation_ids.push(id);
        invocation_refs.extend(refs);
    }
    let mut turns = Vec::new();
    let mut turn_keys = Vec::new();
    for item in o.list("turns")? {
        let (t, [invocation_id, turn_task, turn_rollout]) = turn(item)?;
        if turn_task != task_id || turn_rollout != rollout_id {
            return Err(Invalid);
        }
        turn_keys.push((invocation_id, t.turn_no));
        turns.push(t);
    }
    let calls = o.list("model_calls")?.iter().map(call).collect::<V<Vec<_>>>()?;
    o.list("tool_calls")?.iter().try_for_each(tool_call)?;
    let gaps = o.list("gaps")?.iter().map(gap).collect::<V<Vec<_>>>()?;
    let call_ids: Vec<&str> = calls.iter().filter_map(|c| c.model_call_id).filter(|s| !s.is_empty()).collect();
    if !unique(invocation_ids) || !unique(call_ids) || !unique(turn_keys) {
        return Err(Invalid);
    }
    Ok(Trajectory { turns, invocation_refs, calls, gaps })
}

fn unique<T: Ord>(mut items: Vec<T>) -> bool {
    let n = items.len();
    items.sort_unstable();
    items.dedup();
    items.len() == n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(text: &str) -> bool {
        validate(&crate::json::parse(text.as_bytes()).unwrap()).is_ok()
    }

    #[test]
    fn lenient_types_and_closed_objects() {
        let turn = |extra: &str| {
            format!(
                r#"{{"task_id": "t", "rollout_id": "r", "turns": [{{"invocation_id": "i", "task_id": "t",
                "rollout_id": "r", "turn_no": "2", "timestamp": "1.5", "step_count": 0.0{extra}}}]}}"#
            )
        };
        assert!(valid(&turn("")));
        assert!(valid(&turn(r#", "resolved": "yes""#)));
        assert!(!valid(&turn(r#", "resolved": 2"#)));
        assert!(!valid(&turn(r#", "unknown": 1"#)));
        assert!(!valid(&turn(r#", "model_calls": [{"response_id": "x"}]"#)));
        assert!(valid(&turn(
            r#", "model_calls": [{"response_id": "x", "model_ref": {"type": "responses_api_models", "name": "m", "more": 1}}]"#
        )));
        assert!(!valid(r#"{"task_id": "t", "rollout_id": "r", "turns": null}"#));
        assert!(!valid(
            r#"{"task_id": "t", "rollout_id": "r", "model_calls": [{"model_call_id": "a"}, {"model_call_id": "a"}]}"#
        ));
        assert!(valid(
            r#"{"task_id": "t", "rollout_id": "r", "model_calls": [{"model_call_id": ""}, {"model_call_id": ""}]}"#
        ));
        assert!(!valid(
            r#"{"task_id": "t", "rollout_id": "r", "tool_calls": [{"invocation_id": "i", "tool_call_id": "c", "started_at": 2, "completed_at": 1}]}"#
        ));
        assert!(!valid(
            r#"{"task_id": "t", "rollout_id": "r", "model_calls": [{"token_stats": {"prompt_tokens": -1}}]}"#
        ));
        assert!(!valid(r#"{"task_id": 1, "rollout_id": "r"}"#));
    }
}
