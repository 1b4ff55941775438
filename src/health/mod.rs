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

use checks::{Check, CheckSet};
use digest::{Detail, Entry, NO_DETAIL};
use record::Reader;
use report::Totals;
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
    /// `rollout_verdicts.jsonl`.
    pub verdicts: Vec<u8>,
    pub records: usize,
    pub healthy: usize,
    pub unhealthy: usize,
    pub unobserved: usize,
    /// The ignored checks, sorted.
    pub ignored: Vec<String>,
}

impl Health {
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

/// A piece of one file: whole lines.
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

fn judge(bytes: &[u8], ignored: CheckSet) -> Judged {
    let reader = Reader::default();
    let mut j = Judged { entries: Vec::with_capacity(bytes.len() / 1024 + 16), ..Judged::default() };
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |p| start + p + 1);
        let text = python::strip_bytes(&bytes[start..end]);
        start = end;
        j.lines += 1;
        if text.is_empty() {
            continue;
        }
        match digest::judge(reader.read(text), j.lines, ignored, &mut j.totals) {
            Ok((mut entry, detail)) => {
                if let Some(d) = detail {
                    entry.detail = j.details.len() as u32;
                    j.details.push(d);
                }
                j.entries.push(entry);
            }
            Err(refusal) => {
                j.refusal = Some((j.lines, refusal));
                break;
            }
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
    let mut skip = CheckSet::default();
    for id in parse_ignored(ignored)? {
        skip.add(Check::from_id(&id).expect("parse_ignored keeps known ids"));
    }
    let pieces = pieces(sources, piece);
    let mut judged: Vec<Judged> =
        pieces.par_iter().map(|p| judge(&sources[p.source].bytes[p.start..p.end], skip)).collect();
    let offsets = settle(sources, &pieces, &mut judged, skip)?;
    let (records, found) = (offsets.0 as usize, offsets.1 as usize);
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
    let mut verdicts = [0u64; 3];
    for e in &entries {
        verdicts[e.verdict as usize] += 1;
    }
    let summary = report::summary(&totals, verdicts, &tasks, skip);
    let mut ignored: Vec<String> = skip.iter().map(|c| c.id().to_string()).collect();
    ignored.sort_unstable();
    let [healthy, unhealthy, unobserved] = verdicts.map(|n| n as usize);
    let verdicts = verdict_lines(&records);
    Ok(Health { summary, verdicts, records: entries.len(), healthy, unhealthy, unobserved, ignored })
}

/// Settles line numbers (continuing across the pieces of a file), ordinals and detail
/// positions (continuing across everything), or refuses the first record NeMo Gym
/// could not check. Returns the numbers of records and of details.
fn settle(
    sources: &[Source<'_>],
    pieces: &[Piece],
    judged: &mut [Judged],
    skip: CheckSet,
) -> crate::Result<(u64, u64)> {
    let mut offsets = Vec::with_capacity(judged.len());
    let (mut line_offset, mut ordinal, mut detail) = (0u64, 0u64, 0u64);
    for (k, (p, j)) in pieces.iter().zip(judged.iter()).enumerate() {
        if k > 0 && pieces[k - 1].source != p.source {
            line_offset = 0;
        }
        if let Some((line, refusal)) = &j.refusal {
            let loc = Location::line(Path::new(sources[p.source].name), line_offset + line).key(refusal.key);
            let msg = format!(
                "the rollout health check expected an integer or a string, found {} (NeMo Gym's check stops on such a record)",
                refusal.found
            );
            return Err(Error::BadInput { loc, msg });
        }
        offsets.push((line_offset, ordinal, detail));
        line_offset += j.lines;
        ordinal += j.entries.len() as u64;
        detail += j.details.len() as u64;
    }
    let names: Vec<String> = sources.iter().map(|s| python_path(s.name)).collect();
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

/// The verdict lines in report order, written in parallel and joined.
fn verdict_lines(r: &Records<'_>) -> Vec<u8> {
    let parts: Vec<Vec<u8>> = r
        .entries
        .par_chunks(8192)
        .map(|chunk| {
            let mut out = Vec::with_capacity(chunk.len() * 400);
            let mut tails = report::Tails::default();
            for e in chunk {
                let d = (e.detail != NO_DETAIL).then(|| &r.details[e.detail as usize]);
                report::verdict_line(&mut out, e, d, &mut tails);
            }
            out
        })
        .collect();
    join(&parts)
}

/// `parts` concatenated, copied in parallel.
fn join(parts: &[Vec<u8>]) -> Vec<u8> {
    let total = parts.iter().map(Vec::len).sum();
    let mut out = vec![0u8; total];
    let mut slots = Vec::with_capacity(parts.len());
    let mut rest = &mut out[..];
    for p in parts {
        let (slot, tail) = rest.split_at_mut(p.len());
        slots.push(slot);
        rest = tail;
    }
    slots.into_par_iter().zip(parts).for_each(|(slot, p)| slot.copy_from_slice(p));
    out
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
