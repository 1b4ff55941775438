//! The rollout health check: is each rollout's evidence sound enough to trust its reward?
//!
//! A reward of 0 may mean the model failed the task, or that the rollout never really
//! ran: the model server returned errors, the agent produced empty turns, the generation
//! hit its length limit with nothing to show, the captured model calls do not match the
//! calls the agent's turns claim. The health check reads the rollout records (and the
//! `ng_trajectory` evidence they carry, when they do) and judges every record with
//! fourteen checks, NeMo Gym's own (`gym eval health-check`, run by `gym eval
//! aggregate`), reproducing its two reports byte for byte:
//!
//! - `rollout_verdicts.jsonl`: one line per record, in task, rollout and stage order,
//!   with the record's verdict (`healthy`, `unhealthy`, or `unobserved` when some check
//!   had no evidence to judge), its findings and the checks it could not judge;
//! - `quality_summary.json`: per check how many records (or tasks) it judged, left
//!   unobserved or was told to ignore, the verdict counts, findings per check, call errors
//!   by status, replayed calls, token totals, and per task its repeats' verdicts and the
//!   task-level flags (every judged repeat unhealthy; no successful model call at all).
//!
//! Lines that are not JSON objects are kept as unreadable records rather than refused.
//! A record whose task, rollout or stage index is neither an integer nor a string
//! (`null`, `1.5`, a list) stops NeMo Gym's check; rollstat refuses it instead, naming
//! the file, line and key.
//!
//! The work is one parallel pass: each file is cut into pieces at line ends, each piece's
//! lines are read by the scanner (no tree is built except for trajectories) and judged,
//! and only then are line numbers and record ordinals settled across pieces.

mod checks;
mod digest;
mod python;
mod record;
mod report;
mod tasks;
mod trajectory;

#[cfg(test)]
mod tests;

use std::path::Path;

use rayon::prelude::*;

pub use checks::{Check, CheckSet, Verdict};
use digest::Totals;
use digest::{Detail, Entry, NO_DETAIL};
use record::Reader;
use tasks::Records;

use crate::error::{Error, Location};

/// One rollouts file: its name as the user gave it (reports and errors name it so) and
/// its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    pub name: &'a str,
    pub bytes: &'a [u8],
}

/// The result of a check: both reports and the counts printed after them.
#[derive(Clone, Debug)]
pub struct Health {
    /// `quality_summary.json`.
    pub summary: Vec<u8>,
    /// Every record's result in report order, rendered as `rollout_verdicts.jsonl`
    /// while it is written (a sweep's lines are hundreds of megabytes: they are never
    /// held whole).
    entries: Vec<Entry>,
    details: Vec<Detail>,
    pub records: usize,
    pub healthy: usize,
    pub unhealthy: usize,
    pub unobserved: usize,
    /// The ignored checks, sorted.
    pub ignored: Vec<String>,
}

impl Health {
    /// `rollout_verdicts.jsonl` in one buffer.
    pub fn verdicts(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_verdicts(&mut out).expect("writing to memory");
        out
    }

    /// Writes `rollout_verdicts.jsonl` to `w`, one line per record, rendered as it goes.
    pub fn write_verdicts(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        const FLUSH: usize = 1 << 20;
        let mut out = Vec::with_capacity(FLUSH + 4096);
        let mut tails = report::Tails::default();
        for e in &self.entries {
            let d = (e.detail != NO_DETAIL).then(|| &self.details[e.detail as usize]);
            report::verdict_line(&mut out, e, d, &mut tails);
            if out.len() >= FLUSH {
                w.write_all(&out)?;
                out.clear();
            }
        }
        w.write_all(&out)
    }

    /// Every record's verdict and the checks that flagged it, indexed by the record's
    /// place in reading order (for [`check_records`], the order the records were given).
    pub fn by_record(&self) -> Vec<RecordResult> {
        let mut out = vec![RecordResult::default(); self.entries.len()];
        for e in &self.entries {
            let mut flagged = CheckSet::default();
            if e.detail != NO_DETAIL {
                for f in &self.details[e.detail as usize].findings {
                    flagged.add(f.check);
                }
            }
            if e.duplicates > 0 {
                flagged.add(Check::DuplicateIdentity);
            }
            out[e.ordinal as usize] = RecordResult { verdict: e.verdict, flagged, unobserved: e.unobserved };
        }
        out
    }

    /// The line printed after a check: `Rollout health: N checked, h healthy, u
    /// unhealthy, o unobserved`, and ` (ignored: a, b)` when checks were ignored.
    pub fn summary_line(&self) -> String {
        let ignored =
            if self.ignored.is_empty() { String::new() } else { format!(" (ignored: {})", self.ignored.join(", ")) };
        format!(
            "Rollout health: {} checked, {} healthy, {} unhealthy, {} unobserved{ignored}",
            self.records, self.healthy, self.unhealthy, self.unobserved
        )
    }

    /// Both printed lines: [`Health::summary_line`], then `Quality summary: <path>` for
    /// the summary written at `summary_path`.
    pub fn report_lines(&self, summary_path: &str) -> String {
        format!("{}\nQuality summary: {summary_path}", self.summary_line())
    }
}

/// One record's result: its verdict, the checks that found something in it and the
/// checks that had no evidence to judge it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordResult {
    pub verdict: Verdict,
    pub flagged: CheckSet,
    pub unobserved: CheckSet,
}

impl Default for RecordResult {
    fn default() -> Self {
        RecordResult { verdict: Verdict::Healthy, flagged: CheckSet::default(), unobserved: CheckSet::default() }
    }
}

/// Reads `--ignore-checks` values: each comma-separated, ids trimmed, empty ones dropped,
/// repeats removed (first kept). Every id must name a check.
pub fn parse_ignored(values: &[String]) -> crate::Result<Vec<String>> {
    let mut ids: Vec<String> = Vec::new();
    for id in values.iter().flat_map(|v| v.split(',')).map(python::strip).filter(|s| !s.is_empty()) {
        if !ids.iter().any(|known| known == id) {
            ids.push(id.to_string());
        }
    }
    let mut unknown: Vec<&str> = ids.iter().map(String::as_str).filter(|id| Check::from_id(id).is_none()).collect();
    if unknown.is_empty() {
        return Ok(ids);
    }
    unknown.sort_unstable();
    Err(Error::Usage(format!("Unknown rollout health check(s): {}", unknown.join(", "))))
}

/// Bytes per piece of a file judged as one task.
const PIECE: usize = 2 << 20;

/// Records per piece when the caller hands them one by one.
const PIECE_RECORDS: usize = 8192;

/// A piece of one file: whole lines (`start..end` bytes), or records `start..end` of a
/// caller's list.
struct Piece {
    source: usize,
    start: usize,
    end: usize,
}

fn pieces(sources: &[Source<'_>], size: usize) -> Vec<Piece> {
    let mut out = Vec::new();
    for (source, s) in sources.iter().enumerate() {
        let mut start = 0;
        while start < s.bytes.len() {
            let cut = (start + size).min(s.bytes.len());
            let end = memchr::memchr(b'\n', &s.bytes[cut..]).map_or(s.bytes.len(), |p| cut + p + 1);
            out.push(Piece { source, start, end });
            start = end;
        }
    }
    out
}

/// A piece judged: its records, how many lines it has, its counts, and the first
/// record NeMo Gym could not check (line within the piece, key, what it held).
#[derive(Default)]
struct Judged {
    entries: Vec<Entry>,
    details: Vec<Detail>,
    totals: Totals,
    lines: u64,
    refusal: Option<(u64, digest::Refusal)>,
}

impl Judged {
    fn push(&mut self, mut entry: Entry, detail: Option<Detail>) {
        if let Some(d) = detail {
            entry.detail = self.details.len() as u32;
            self.details.push(d);
        }
        self.entries.push(entry);
    }

    /// Judges one line (`line_no` as it is to be reported); `false` once a record was
    /// refused, after which the piece stops.
    fn line(&mut self, reader: &Reader, text: &[u8], line_no: u64, ignored: CheckSet) -> bool {
        let text = python::strip_bytes(text);
        if text.is_empty() {
            return true;
        }
        match digest::judge(reader.read(text), line_no, ignored, &mut self.totals) {
            Ok((entry, detail)) => {
                self.push(entry, detail);
                true
            }
            Err(refusal) => {
                self.refusal = Some((line_no, refusal));
                false
            }
        }
    }
}

fn judge(bytes: &[u8], ignored: CheckSet) -> Judged {
    let reader = Reader::default();
    let mut j = Judged { entries: Vec::with_capacity(bytes.len() / 1024 + 16), ..Judged::default() };
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |p| start + p + 1);
        let text = &bytes[start..end];
        start = end;
        j.lines += 1;
        if !j.line(&reader, text, j.lines, ignored) {
            break;
        }
    }
    j
}

/// Runs the health check over `sources`, in order, with the `ignored` checks (ids as
/// [`parse_ignored`] returns them) never run.
pub fn check(sources: &[Source<'_>], ignored: &[String]) -> crate::Result<Health> {
    check_in_pieces(sources, ignored, PIECE)
}

/// [`check`] with files cut into pieces of about `piece` bytes (the result is the same
/// for any size).
fn check_in_pieces(sources: &[Source<'_>], ignored: &[String], piece: usize) -> crate::Result<Health> {
    let skip = skipped(ignored)?;
    let pieces = pieces(sources, piece);
    let mut judged: Vec<Judged> =
        pieces.par_iter().map(|p| judge(&sources[p.source].bytes[p.start..p.end], skip)).collect();
    let names: Vec<&str> = sources.iter().map(|s| s.name).collect();
    let counts = settle(&names, &pieces, &mut judged, true, skip)?;
    finish(judged, counts, skip)
}

/// A record the caller hands over: the file it is in (an index into the names) and its
/// line number there (see [`check_records`]).
#[derive(Clone, Copy, Debug)]
pub struct Given {
    pub source: usize,
    pub line: u64,
}

/// What the caller knows of a record.
pub enum Record<'a> {
    /// Its line.
    Line(&'a [u8]),
    /// A record known to hold no `ng_trajectory`, `_ng_rollout_id` or `stage_index`:
    /// its integer indexes and the prompt and completion counts its `response.usage`
    /// gives (`input_tokens`, else `prompt_tokens`; `output_tokens`, else
    /// `completion_tokens`; each only when a non-negative integer) are all the checks
    /// read of it.
    Plain { task: i64, rollout: i64, tokens: (Option<i128>, Option<i128>) },
}

/// Runs the health check over records the caller has already read, in reading order
/// (or in task, rollout order with reading order among the records of one rollout,
/// which sorts the same): `record(i)` says what it knows of record `i`. A sweep's
/// records without trajectories are judged this way without reading their lines again.
pub fn check_records<'a, F>(names: &[&str], records: &[Given], record: F, ignored: &[String]) -> crate::Result<Health>
where
    F: Fn(usize) -> Record<'a> + Sync,
{
    let t0 = std::time::Instant::now();
    let skip = skipped(ignored)?;
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < records.len() {
        let source = records[start].source;
        let end = (start + PIECE_RECORDS).min(records.len());
        let end = start + records[start..end].iter().take_while(|r| r.source == source).count();
        pieces.push(Piece { source, start, end });
        start = end;
    }
    let mut judged: Vec<Judged> = pieces
        .par_iter()
        .map(|p| {
            let reader = Reader::default();
            let mut j = Judged { entries: Vec::with_capacity(p.end - p.start), ..Judged::default() };
            for (i, given) in (p.start..p.end).zip(&records[p.start..p.end]) {
                let line = given.line;
                let going = match record(i) {
                    Record::Line(text) => j.line(&reader, text, line, skip),
                    Record::Plain { task, rollout, tokens } => {
                        let (entry, detail) = digest::judge_plain(task, rollout, tokens, line, skip, &mut j.totals);
                        j.push(entry, detail);
                        true
                    }
                };
                if !going {
                    break;
                }
            }
            j
        })
        .collect();
    crate::trace::trace("health: records judged", t0);
    let counts = settle(names, &pieces, &mut judged, false, skip)?;
    finish(judged, counts, skip)
}

fn skipped(ignored: &[String]) -> crate::Result<CheckSet> {
    let mut skip = CheckSet::default();
    for id in parse_ignored(ignored)? {
        skip.add(Check::from_id(&id).expect("parse_ignored keeps known ids"));
    }
    Ok(skip)
}

/// The reports from the judged pieces (settled; `counts` of records and details).
fn finish(judged: Vec<Judged>, counts: (u64, u64), skip: CheckSet) -> crate::Result<Health> {
    let t0 = std::time::Instant::now();
    let (records, found) = (counts.0 as usize, counts.1 as usize);
    let mut entries = Vec::with_capacity(records);
    let mut details = Vec::with_capacity(found);
    let mut totals = Totals::default();
    for j in judged {
        entries.extend(j.entries);
        details.extend(j.details);
        totals.merge(&j.totals);
    }

    tasks::sort(&mut entries, &details);
    tasks::mark_duplicates(&mut entries, &details, skip);
    totals.add_findings(Check::DuplicateIdentity, entries.iter().filter(|e| e.duplicates > 0).count() as u64);
    let records = Records { entries: &entries, details: &details };
    let tasks = tasks::tasks(&records, skip);
    crate::trace::trace("health: sorted, tasks", t0);
    let mut verdicts = [0u64; 3];
    for e in &entries {
        verdicts[e.verdict as usize] += 1;
    }
    let summary = report::summary(&totals, verdicts, &tasks, skip);
    let mut ignored: Vec<String> = skip.iter().map(|c| c.id().to_string()).collect();
    ignored.sort_unstable();
    let [healthy, unhealthy, unobserved] = verdicts.map(|n| n as usize);
    crate::trace::trace("health: reports", t0);
    let records = entries.len();
    Ok(Health { summary, entries, details, records, healthy, unhealthy, unobserved, ignored })
}

/// Settles line numbers (continuing across the pieces of a file, when `continued`; as
/// given otherwise), ordinals and detail positions (continuing across everything), or
/// refuses the first record NeMo Gym could not check. Returns the numbers of records
/// and of details.
fn settle(
    names: &[&str],
    pieces: &[Piece],
    judged: &mut [Judged],
    continued: bool,
    skip: CheckSet,
) -> crate::Result<(u64, u64)> {
    let mut offsets = Vec::with_capacity(judged.len());
    let (mut line_offset, mut ordinal, mut detail) = (0u64, 0u64, 0u64);
    for (k, (p, j)) in pieces.iter().zip(judged.iter()).enumerate() {
        if !continued || (k > 0 && pieces[k - 1].source != p.source) {
            line_offset = 0;
        }
        if let Some((line, refusal)) = &j.refusal {
            let loc = Location::line(Path::new(names[p.source]), line_offset + line).key(refusal.key);
            let msg = format!(
                "the rollout health check expected an integer or a string, found {} (NeMo Gym's check stops on such a record)",
                refusal.found
            );
            return Err(Error::BadInput { loc, msg });
        }
        offsets.push((line_offset, ordinal, detail));
        if continued {
            line_offset += j.lines;
        }
        ordinal += j.entries.len() as u64;
        detail += j.details.len() as u64;
    }
    let names: Vec<String> = names.iter().map(|s| python_path(s)).collect();
    judged.par_iter_mut().zip(pieces).zip(&offsets).for_each(|((j, p), &(lines, first, first_detail))| {
        for (k, e) in j.entries.iter_mut().enumerate() {
            let d = (e.detail != NO_DETAIL).then(|| &mut j.details[e.detail as usize]);
            digest::settle(e, d, (first + k as u64) as u32, lines, (p.source, &names[p.source]), skip);
            if e.detail != NO_DETAIL {
                e.detail += first_detail as u32;
            }
        }
    });
    Ok((ordinal, detail))
}

/// A path as Python's `pathlib` writes it: empty and `.` components dropped, a
/// trailing slash removed (`./a//b` is `a/b`).
fn python_path(name: &str) -> String {
    let root = if name.starts_with("//") && !name.starts_with("///") {
        "//"
    } else if name.starts_with('/') {
        "/"
    } else {
        ""
    };
    let parts: Vec<&str> = name.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    let joined = format!("{root}{}", parts.join("/"));
    if joined.is_empty() {
        ".".into()
    } else {
        joined
    }
}
