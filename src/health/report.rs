//! The two reports, byte for byte as NeMo Gym writes them (orjson): one compact verdict
//! line per record, and the summary indented by two spaces. Text is UTF-8 as it is
//! (only quotes, backslashes and control characters are escaped).

use super::checks::{Check, CheckSet, Finding, Verdict};
use super::digest::{Detail, Entry, RolloutId, Totals};
use super::record::Index;
use super::tasks::Tasks;
use crate::json::{escape_into, write_compact, write_indented, write_str, Json};

fn write_index(out: &mut Vec<u8>, i: &Index) {
    match i {
        Index::Int(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
        Index::Big(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
        Index::Str(s) => write_str(out, s),
    }
}

/// The text of an index inside a JSON string: the raw value's text when it differs.
fn write_part(out: &mut Vec<u8>, raw: &Option<Box<str>>, i: &Index) {
    match (raw, i) {
        (Some(text), _) => escape_into(out, text),
        (None, Index::Str(s)) => escape_into(out, s),
        (None, index) => write_index(out, index),
    }
}

fn write_finding(out: &mut Vec<u8>, f: &Finding) {
    out.extend_from_slice(b"{\"check\":\"");
    out.extend_from_slice(f.check.id().as_bytes());
    out.push(b'"');
    if let Some(locator) = &f.locator {
        out.extend_from_slice(b",\"locator\":");
        write_compact(out, locator);
    }
    out.extend_from_slice(b",\"detail\":");
    write_compact(out, &f.detail);
    out.push(b'}');
}

/// Appends a record's verdict line: task, rollout, rollout id, verdict, findings (a
/// duplicate identity last), unobserved checks, and the stage when the record has one.
/// `tails` keeps the end of the lines of records without findings or stage, which
/// repeats from record to record.
pub fn verdict_line(out: &mut Vec<u8>, e: &Entry, d: Option<&Detail>, tails: &mut Tails) {
    let plain = [Index::Int(e.values[0]), Index::Int(e.values[1])];
    let (task, rollout) = d.map_or((&plain[0], &plain[1]), |d| (&d.task, &d.rollout));
    out.extend_from_slice(b"{\"_ng_task_index\":");
    write_index(out, task);
    out.extend_from_slice(b",\"_ng_rollout_index\":");
    write_index(out, rollout);
    out.extend_from_slice(b",\"rollout_id\":\"");
    match d.map(|d| &d.rollout_id) {
        Some(RolloutId::Given(text)) => escape_into(out, text),
        Some(RolloutId::Parts { task: t, rollout: r }) => {
            write_part(out, t, task);
            out.push(b'-');
            write_part(out, r, rollout);
        }
        None => {
            write_part(out, &None, task);
            out.push(b'-');
            write_part(out, &None, rollout);
        }
    }
    if d.is_none() && e.duplicates == 0 {
        out.extend_from_slice(tails.get(e));
    } else {
        write_tail(out, e, d);
    }
}

/// The end of a verdict line, from the verdict on.
fn write_tail(out: &mut Vec<u8>, e: &Entry, d: Option<&Detail>) {
    out.extend_from_slice(b"\",\"verdict\":\"");
    out.extend_from_slice(e.verdict.id().as_bytes());
    out.extend_from_slice(b"\",\"findings\":[");
    let findings = d.map_or(&[][..], |d| &d.findings[..]);
    for (k, f) in findings.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        write_finding(out, f);
    }
    if e.duplicates > 0 {
        if !findings.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"check\":\"rollout_duplicate_identity\",\"detail\":{\"duplicate_count\":");
        out.extend_from_slice(itoa::Buffer::new().format(e.duplicates).as_bytes());
        out.extend_from_slice(b"}}");
    }
    out.extend_from_slice(b"],\"unobserved\":[");
    for (k, c) in e.unobserved.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        out.push(b'"');
        out.extend_from_slice(c.id().as_bytes());
        out.push(b'"');
    }
    out.push(b']');
    if let Some(stage) = d.and_then(|d| d.stage.as_ref()) {
        out.extend_from_slice(b",\"stage_index\":");
        write_index(out, stage);
    }
    out.extend_from_slice(b"}\n");
}

/// Line ends already written, by verdict and unobserved checks.
#[derive(Default)]
pub struct Tails(Vec<((Verdict, CheckSet), Vec<u8>)>);

impl Tails {
    fn get(&mut self, e: &Entry) -> &[u8] {
        let key = (e.verdict, e.unobserved);
        let at = match self.0.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                let mut tail = Vec::new();
                write_tail(&mut tail, e, None);
                self.0.push((key, tail));
                self.0.len() - 1
            }
        };
        &self.0[at].1
    }
}

fn count(n: u64) -> Json {
    Json::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn object<'k>(members: impl IntoIterator<Item = (&'k str, Json)>) -> Json {
    Json::Obj(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
}

/// `quality_summary.json` from the run's counts, its records' verdicts (healthy,
/// unhealthy, unobserved) and its tasks (written directly: a sweep has many).
pub fn summary(t: &Totals, verdicts: [u64; 3], tasks: &Tasks, ignored: CheckSet) -> Vec<u8> {
    let cell = |[evaluated, unobserved, ignored]: [u64; 3]| {
        object([("evaluated", count(evaluated)), ("unobserved", count(unobserved)), ("ignored", count(ignored))])
    };
    let coverage = Check::ALL.iter().enumerate().map(|(k, &c)| {
        let cells = match k.checked_sub(12) {
            Some(task) => tasks.coverage[task],
            None if ignored.has(c) => [0, 0, t.records],
            None => [t.records - t.unobserved[k], t.unobserved[k], 0],
        };
        (c.id(), cell(cells))
    });
    let flagged = |c: Check| (c as usize).checked_sub(12).map_or(0, |k| tasks.flagged[k]);
    let mut ignored_ids: Vec<&str> = ignored.iter().map(Check::id).collect();
    ignored_ids.sort_unstable();
    let [healthy, unhealthy, unobserved] = verdicts.map(count);
    let tokens = t.tokens.map(super::checks::int);
    let run = object([
        ("ignored_checks", Json::Arr(ignored_ids.into_iter().map(|s| Json::Str(s.into())).collect())),
        (
            "artifacts",
            object([("records", count(t.records)), ("captures", count(t.captures)), ("coverage", object(coverage))]),
        ),
        ("verdicts", object([("healthy", healthy), ("unhealthy", unhealthy), ("unobserved", unobserved)])),
        ("issues", object(Check::ALL.iter().map(|&c| (c.id(), count(t.issues[c as usize] + flagged(c)))))),
        (
            "stats",
            object([
                (
                    "model_call_errors",
                    object([
                        ("total", count(t.call_errors)),
                        ("by_status", object(t.by_status.iter().map(|(s, &n)| (s.as_str(), count(n))))),
                        ("rollouts_affected", count(t.rollouts_with_errors)),
                        ("ended_on_error", count(t.ended_on_error)),
                    ]),
                ),
                (
                    "duplicated_calls",
                    object([("replayed", count(t.replayed)), ("rollouts", count(t.rollouts_replaying))]),
                ),
                (
                    "tokens",
                    object(["prompt", "completion", "capture_prompt", "capture_completion"].into_iter().zip(tokens)),
                ),
            ]),
        ),
    ]);
    let mut out = b"{\n  \"run\": ".to_vec();
    write_indented(&mut out, &run, 1);
    out.extend_from_slice(b",\n  \"tasks\": {");
    for (k, row) in tasks.rows.iter().enumerate() {
        out.extend_from_slice(if k > 0 { b",\n    " } else { b"\n    " });
        write_str(&mut out, &row.key);
        out.extend_from_slice(b": {");
        let [h, u, o] = row.verdicts;
        for (name, n) in [("repeats", row.repeats), ("healthy", h), ("unhealthy", u), ("unobserved", o)] {
            out.extend_from_slice(b"\n      \"");
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b"\": ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.push(b',');
        }
        out.extend_from_slice(b"\n      \"flags\": ");
        let flags = Json::Arr(row.flags.iter().map(|c| Json::Str(c.id().into())).collect());
        write_indented(&mut out, &flags, 3);
        out.extend_from_slice(b"\n    }");
    }
    out.extend_from_slice(if tasks.rows.is_empty() { b"}\n}" } else { b"\n  }\n}" });
    out
}
