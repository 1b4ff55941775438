//! Reading a rollouts JSONL file into a [`RolloutTable`].
//!
//! Per line we keep: the task and rollout indexes, the agent name and server stamp,
//! `mask_sample` (Python truthiness), every scalar top-level field, the scalar keys of
//! `response.usage` and of `ng_perf` and the line's key order (interned); when asked for
//! ([`ReadOptions`]), the task's fingerprint (a hash of its user messages, see
//! [`super::fingerprint`]) and the rows the health check must read again. Everything
//! else — model output, system prompts, nested verifier payloads — is skipped unread.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::lines::{read_pieces, read_pieces_bytes, Line, LineMap, PieceLines, ReadReport};
use super::table::{merge_columns, tag, Column, ColumnsBuilder, Interner, Source, MAX_KEPT_STR};
use crate::error::{Error, Location, Result};
use crate::json::scan::{cut_mid_write, decode_str, key_is, key_is_private, top_key_at, Scalar, ScanError, Scanner};

/// Separates top-level column ids from usage column ids in a key-order sequence.
pub const SEP: u32 = u32::MAX;
/// "No name" in the name columns.
pub const NONE: u32 = u32::MAX;

/// What a read of rollouts computes beyond the columns every command uses. Each costs
/// time on every line, so a command asks only for what it uses; the default is neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Each row's task fingerprint ([`RolloutTable::fingerprints`]): for pairing tasks
    /// across runs, the `tasks` table and whatever shows which task a row asks.
    pub fingerprints: bool,
    /// The rows whose health evidence the table does not keep
    /// ([`RolloutTable::evidence`]): for the rollout health check.
    pub evidence: bool,
}

impl ReadOptions {
    /// Task fingerprints, no health evidence.
    pub const FINGERPRINTS: ReadOptions = ReadOptions { fingerprints: true, evidence: false };
}

/// All rollouts of one file, sorted by (`_ng_task_index`, `_ng_rollout_index`, line).
#[derive(Debug, Clone, Default)]
pub struct RolloutTable {
    /// The rollouts file (the first, when the table was read from several).
    pub path: PathBuf,
    /// The file and line of each row's line number (numbered across the files).
    pub lines: LineMap,
    pub task: Vec<i64>,
    pub rollout: Vec<i64>,
    /// 1-based line number of each row.
    pub line: Vec<u64>,
    pub masked: Vec<bool>,
    /// `agent_ref.name` as an index into `names`, or [`NONE`].
    pub agent: Vec<u32>,
    /// `_ng_environment_server` as an index into `names`, or [`NONE`].
    pub server: Vec<u32>,
    pub names: Vec<String>,
    /// Whether the row has an `ng_perf` object.
    pub perf: Vec<bool>,
    /// The task fingerprint of the row's `responses_create_params` (0: none; see
    /// [`super::fingerprint`]); empty unless the read computed them (`read`).
    pub fingerprint: Vec<u64>,
    pub columns: Vec<Column>,
    /// Per row, an index into `orders`: the row's top-level column ids in file order,
    /// then [`SEP`], then its usage column ids in file order.
    pub order: Vec<u32>,
    pub orders: Vec<Vec<u32>>,
    /// Whether some row has a `response` (the model's output, which materialized inputs
    /// never carry).
    pub has_response: bool,
    /// The rows whose health evidence the table does not keep — a non-null
    /// `ng_trajectory`, an `_ng_rollout_id`, a `stage_index`, or a token count of
    /// `response.usage` that is not an integer — as (line number as in `line`, byte offset
    /// of the line in its file, its length), by line number. The health check reads these
    /// lines again and judges every other row on its indexes and token counts alone.
    /// Empty unless the read looked for them (`read`).
    pub evidence: Vec<(u64, u64, u64)>,
    /// What the read computed beyond the columns.
    pub read: ReadOptions,
    /// Line numbers of last lines left out as cut off mid-write (one per file at most):
    /// not rows, but records the health check reports as unreadable.
    pub cut_off: Vec<u64>,
    pub report: ReadReport,
}

impl RolloutTable {
    pub fn len(&self) -> usize {
        self.task.len()
    }
    pub fn is_empty(&self) -> bool {
        self.task.is_empty()
    }
    pub fn name(&self, id: u32) -> Option<&str> {
        if id == NONE {
            None
        } else {
            Some(&self.names[id as usize])
        }
    }
    /// Adds a top-level column of one number per row, as if every line ended with the
    /// key `name` holding `values[row]` (a float): every reader of fields then sees it.
    pub fn add_number_column(&mut self, name: &str, values: Vec<f64>) {
        assert_eq!(values.len(), self.len(), "one value per row");
        let mut col = Column::new(Source::Top, name.to_string());
        col.tags = vec![tag::FLOAT; values.len()];
        col.nums = values;
        self.columns.push(col);
        let id = (self.columns.len() - 1) as u32;
        for seq in &mut self.orders {
            let sep = seq.iter().position(|&c| c == SEP).unwrap_or(seq.len());
            seq.insert(sep, id);
        }
    }
    /// Index of a column by source and name.
    pub fn column(&self, source: Source, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.source == source && c.name == name)
    }
    /// Where row `r` was read, as an error location.
    pub fn location(&self, r: usize) -> Location {
        self.lines.location(self.line[r])
    }
    /// `file, line N` of row `r`.
    pub fn describe(&self, r: usize) -> String {
        self.lines.describe(self.line[r])
    }
    /// Each row's task fingerprint (0: none).
    ///
    /// # Panics
    /// When the table was read without them: a command that uses them asks for them
    /// ([`ReadOptions::fingerprints`]).
    pub fn fingerprints(&self) -> &[u64] {
        assert!(self.read.fingerprints || self.is_empty(), "rollouts read without task fingerprints");
        &self.fingerprint
    }
}

#[derive(Default)]
struct Piece {
    /// What to compute beyond the columns.
    read: ReadOptions,
    task: Vec<i64>,
    rollout: Vec<i64>,
    line: Vec<u64>,
    masked: Vec<bool>,
    agent: Vec<u32>,
    server: Vec<u32>,
    names: Names,
    perf: Vec<bool>,
    fingerprint: Vec<u64>,
    has_response: bool,
    /// Rows with health evidence (see `RolloutTable::evidence`), piece-local line numbers.
    evidence: Vec<(u64, u64, u64)>,
    cols: ColumnsBuilder,
    order: Vec<u32>,
    orders: Interner,
    /// Per top-level column (by id + 1; slot 0 is a line's start): the column whose key
    /// followed it last time, the guess for the next key. A key missing from one line
    /// costs one failed guess, not one per key after it.
    next_top: Vec<u32>,
    /// The same for the keys of `response.usage`.
    next_usage: Vec<u32>,
    /// The `ng_perf` columns set in the current line (a second `ng_perf` takes them back).
    perf_ids: Vec<u32>,
    /// The file's last line when it was cut off mid-write: its piece-local number and
    /// what was wrong with it.
    cut_off: Option<(u64, String)>,
}

/// Interned names (agents, servers) of one piece.
#[derive(Default)]
pub(crate) struct Names {
    pub(crate) list: Vec<String>,
    index: HashMap<String, u32, foldhash::fast::RandomState>,
    /// The last two ids looked up: rows mostly repeat their neighbour's agent and
    /// server, which are looked up in turn.
    recent: [Option<u32>; 2],
}

impl Names {
    pub(crate) fn get(&mut self, s: &str) -> u32 {
        for i in self.recent.into_iter().flatten() {
            if self.list[i as usize] == s {
                return i;
            }
        }
        let i = match self.index.get(s) {
            Some(&i) => i,
            None => {
                let i = self.list.len() as u32;
                self.list.push(s.to_string());
                self.index.insert(s.to_string(), i);
                i
            }
        };
        self.recent = [Some(i), self.recent[0]];
        i
    }
}

fn scalar_tag(v: &Scalar<'_>) -> Option<(u8, f64)> {
    Some(match *v {
        Scalar::Null => (tag::NULL, 0.0),
        Scalar::Bool(b) => (tag::BOOL, if b { 1.0 } else { 0.0 }),
        Scalar::Int(i) => (tag::INT, f64::from_bits(i as u64)),
        Scalar::Float(f) => (tag::FLOAT, f),
        Scalar::Str(s, _) if s.len() > MAX_KEPT_STR => (tag::LONG_STR, 0.0),
        Scalar::Str(..) => return None,
        Scalar::Container { .. } => return None,
    })
}

struct LineErr {
    offset: Option<usize>,
    key: Option<String>,
    msg: String,
}

impl From<ScanError> for LineErr {
    fn from(e: ScanError) -> Self {
        LineErr { offset: Some(e.offset), key: None, msg: format!("invalid JSON: {}", e.msg) }
    }
}

fn key_string(k: (&[u8], bool)) -> std::borrow::Cow<'_, [u8]> {
    if k.1 {
        std::borrow::Cow::Owned(decode_str(k.0, true).map(|s| s.into_bytes()).unwrap_or_else(|_| k.0.to_vec()))
    } else {
        std::borrow::Cow::Borrowed(k.0)
    }
}

/// A string value's text without allocating when it has no escapes.
///
/// # Safety
/// `raw` is the inside of a string token of a line already validated as UTF-8: it starts
/// and ends next to ASCII quotes, so it is valid UTF-8 itself.
pub(crate) unsafe fn str_value(
    raw: &[u8],
    escaped: bool,
) -> std::result::Result<std::borrow::Cow<'_, str>, &'static str> {
    if escaped {
        decode_str(raw, true).map(std::borrow::Cow::Owned)
    } else {
        debug_assert!(std::str::from_utf8(raw).is_ok());
        // SAFETY: the caller's contract (a validated line, cut at ASCII bytes).
        Ok(std::borrow::Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) }))
    }
}

fn index_value(v: Scalar<'_>, key: &str) -> std::result::Result<i64, LineErr> {
    match v {
        Scalar::Int(i) => Ok(i),
        other => Err(LineErr {
            offset: None,
            key: Some(key.to_string()),
            msg: format!("expected an integer, found {}", describe(&other)),
        }),
    }
}

/// The token counts of `response.usage` the health check reads.
pub const TOKEN_COUNTS: [&str; 4] = ["input_tokens", "prompt_tokens", "output_tokens", "completion_tokens"];

/// Whether `key` is one of [`TOKEN_COUNTS`].
fn is_token_count(key: &[u8]) -> bool {
    TOKEN_COUNTS.iter().any(|k| k.as_bytes() == key)
}

pub(crate) fn describe(v: &Scalar<'_>) -> &'static str {
    match v {
        Scalar::Null => "null",
        Scalar::Bool(_) => "a bool",
        Scalar::Int(_) => "an integer",
        Scalar::Float(_) => "a float",
        Scalar::Str(..) => "a string",
        Scalar::Container { object: true, .. } => "an object",
        Scalar::Container { object: false, .. } => "an array",
    }
}

/// The column guessed for the key after slot `after` (see `Piece::next_top`).
#[inline]
fn guess(next: &[u32], after: usize) -> Option<u32> {
    next.get(after).copied().filter(|&c| c != NONE)
}

/// Records in `next` that column `id` came after the key in slot `after` (see
/// `Piece::next_top`), and moves `after` to it.
#[inline]
fn follows(next: &mut Vec<u32>, after: &mut usize, id: u32) {
    if next.len() <= *after {
        next.resize(*after + 1, NONE);
    }
    next[*after] = id;
    *after = id as usize + 1;
}

/// A few raw keys of one line, held without allocating.
struct PendingKeys<'a> {
    keys: [(&'a [u8], bool); 8],
    len: usize,
}

impl<'a> PendingKeys<'a> {
    fn new() -> Self {
        PendingKeys { keys: [(&[], false); 8], len: 0 }
    }
    fn capacity(&self) -> usize {
        self.keys.len()
    }
    fn len(&self) -> usize {
        self.len
    }
    fn push(&mut self, k: (&'a [u8], bool)) {
        self.keys[self.len] = k;
        self.len += 1;
    }
    fn clear(&mut self) {
        self.len = 0;
    }
    fn as_slice(&self) -> &[(&'a [u8], bool)] {
        &self.keys[..self.len]
    }
    fn retain(&mut self, keep: impl Fn((&'a [u8], bool)) -> bool) {
        let mut n = 0;
        for i in 0..self.len {
            if keep(self.keys[i]) {
                self.keys[n] = self.keys[i];
                n += 1;
            }
        }
        self.len = n;
    }
}

/// Takes back the values a line set for `ids` (a repeated key keeps only its last value).
fn take_back(cols: &mut ColumnsBuilder, ids: &mut Vec<u32>) {
    for id in ids.drain(..) {
        cols.set(id, tag::ABSENT, 0.0);
    }
}

impl Piece {
    /// Room for `more` rows.
    fn reserve(&mut self, more: usize) {
        self.task.reserve(more);
        self.rollout.reserve(more);
        self.line.reserve(more);
        self.masked.reserve(more);
        self.agent.reserve(more);
        self.server.reserve(more);
        self.perf.reserve(more);
        if self.read.fingerprints {
            self.fingerprint.reserve(more);
        }
        self.order.reserve(more);
        self.cols.reserve(more);
    }

    /// One line into a row: the key dispatch, with a reader for each nested object
    /// (`response.usage`, `agent_ref`, `ng_perf`) and for the top-level fields. This is
    /// the hot path of every read, so the readers are forced inline: left to the
    /// compiler, two stay calls and a line costs some 0.5% more instructions.
    fn parse_line(
        &mut self,
        l: &Line<'_>,
        top_ids: &mut Vec<u32>,
        usage_ids: &mut Vec<u32>,
    ) -> std::result::Result<(), LineErr> {
        let mut s = open_object(l.bytes)?;
        top_ids.clear();
        usage_ids.clear();
        self.perf_ids.clear();
        // Keys of `response.usage` values that are not numbers (see `read_usage`); more
        // than this many are recorded at once instead.
        let mut pending = PendingKeys::new();
        let mut task: Option<i64> = None;
        let mut rollout: Option<i64> = None;
        let mut agent = NONE;
        let mut server = NONE;
        let mut masked = false;
        let mut perf = false;
        let mut fingerprint = 0u64;
        let mut evidence = false;
        let mut first = true;
        // Slot in `next_top` of the last kept top-level key.
        let mut after = 0usize;
        while let Some(k) = s.next_key(&mut first)? {
            if key_is(k, b"_ng_task_index") {
                task = Some(index_value(s.value()?, "_ng_task_index")?);
            } else if key_is(k, b"_ng_rollout_index") {
                rollout = Some(index_value(s.value()?, "_ng_rollout_index")?);
            } else if key_is(k, b"_ng_environment_server") {
                // A key given twice keeps its last value, as Python's dict does.
                server = self.name_of(s.value()?, "_ng_environment_server")?;
            } else if key_is_private(k) {
                s.value()?;
                evidence |= self.read.evidence && key_is(k, b"_ng_rollout_id");
            } else if key_is(k, b"response") {
                self.has_response = true;
                evidence |= self.read_response(&mut s, usage_ids, &mut pending)?;
            } else if key_is(k, b"agent_ref") {
                agent = self.read_agent_ref(&mut s)?;
            } else if key_is(k, b"mask_sample") {
                masked = s.value()?.truthy();
            } else if key_is(k, b"ng_perf") {
                perf = self.read_perf(&mut s)?;
            } else {
                self.read_top(&mut s, k, top_ids, &mut after, &mut fingerprint, &mut evidence)?;
            }
        }
        s.end()?;
        // A usage value that is not a number replaces a top-level field of its name: kept
        // (as "not a number") only where the line has one.
        for &uk in pending.as_slice() {
            let key = key_string(uk);
            if self.cols.find(Source::Top, &key).is_some_and(|top| top_ids.contains(&top)) {
                let id = self.cols.id(Source::Usage, &key);
                self.cols.set(id, tag::LONG_STR, 0.0);
                usage_ids.push(id);
            }
        }
        let task = task.ok_or_else(|| LineErr {
            offset: None,
            key: Some("_ng_task_index".into()),
            msg: "missing; expected an integer task index (rows without task indexes would all collide at rollout key (0, 0))".into(),
        })?;
        let rollout = rollout.ok_or_else(|| LineErr {
            offset: None,
            key: Some("_ng_rollout_index".into()),
            msg: "missing; expected an integer rollout index (rows without rollout indexes collide at one rollout key)"
                .into(),
        })?;
        top_ids.push(SEP);
        top_ids.extend_from_slice(usage_ids);
        let o = self.orders.intern(top_ids);
        self.task.push(task);
        self.rollout.push(rollout);
        self.line.push(l.number);
        self.masked.push(masked);
        self.agent.push(agent);
        self.server.push(server);
        self.perf.push(perf);
        if self.read.fingerprints {
            self.fingerprint.push(fingerprint);
        }
        if evidence {
            self.evidence.push((l.number, l.offset, l.bytes.len() as u64));
        }
        self.order.push(o);
        self.cols.end_row();
        Ok(())
    }

    /// The name a string value gives (`key` names it in an error), interned; [`NONE`]
    /// for any other value.
    #[inline(always)]
    fn name_of(&mut self, v: Scalar<'_>, key: &str) -> std::result::Result<u32, LineErr> {
        let Scalar::Str(raw, e) = v else { return Ok(NONE) };
        // SAFETY: `raw` is a string token of this line, validated as UTF-8 on entry.
        let name =
            unsafe { str_value(raw, e) }.map_err(|m| LineErr { offset: None, key: Some(key.into()), msg: m.into() })?;
        Ok(self.names.get(&name))
    }

    /// `response`: only its `usage` is read ([`Piece::read_usage`]). A second `response`
    /// or `usage` replaces the first: its usage values go. Returns whether a usage
    /// value is evidence for the health check.
    #[inline(always)]
    fn read_response<'a>(
        &mut self,
        s: &mut Scanner<'a>,
        usage_ids: &mut Vec<u32>,
        pending: &mut PendingKeys<'a>,
    ) -> std::result::Result<bool, LineErr> {
        take_back(&mut self.cols, usage_ids);
        pending.clear();
        if s.peek() != Some(b'{') {
            s.value()?;
            return Ok(false);
        }
        s.i += 1;
        let mut evidence = false;
        let mut first = true;
        while let Some(rk) = s.next_key(&mut first)? {
            if !key_is(rk, b"usage") {
                s.value()?;
                continue;
            }
            take_back(&mut self.cols, usage_ids);
            pending.clear();
            if s.peek() != Some(b'{') {
                s.value()?;
                continue;
            }
            s.i += 1;
            evidence |= self.read_usage(s, usage_ids, pending)?;
        }
        Ok(evidence)
    }

    /// The members of `response.usage`, after its `{`: numbers are kept; text, objects
    /// and arrays matter only where they replace a top-level field of the same name
    /// (`result | usage` in NeMo Gym), settled at the end of the line from `pending`.
    #[inline(always)]
    fn read_usage<'a>(
        &mut self,
        s: &mut Scanner<'a>,
        usage_ids: &mut Vec<u32>,
        pending: &mut PendingKeys<'a>,
    ) -> std::result::Result<bool, LineErr> {
        let mut evidence = false;
        let mut first = true;
        let mut after_usage = 0usize;
        while let Some(uk) = s.next_key(&mut first)? {
            let v = s.value()?;
            let key = key_string(uk);
            evidence |= self.read.evidence && !matches!(v, Scalar::Int(_)) && is_token_count(&key);
            let Some((t, x)) = scalar_tag(&v) else {
                // An earlier number of the same key is taken back (the last value wins).
                if let Some(p) = usage_ids.iter().position(|&id| self.cols.is(id, Source::Usage, &key)) {
                    let id = usage_ids[p];
                    usage_ids.retain(|&x| x != id);
                    self.cols.set(id, tag::ABSENT, 0.0);
                }
                if pending.len() < pending.capacity() {
                    pending.push(uk);
                } else {
                    let id = self.cols.id(Source::Usage, &key);
                    self.cols.set(id, tag::LONG_STR, 0.0);
                    usage_ids.push(id);
                }
                continue;
            };
            if pending.len() > 0 {
                // A number after a non-number of the same key replaces it.
                pending.retain(|k| key_string(k) != key);
            }
            let id = self.cols.id_guess(Source::Usage, &key, guess(&self.next_usage, after_usage));
            self.cols.set(id, t, x);
            usage_ids.push(id);
            follows(&mut self.next_usage, &mut after_usage, id);
        }
        Ok(evidence)
    }

    /// `agent_ref`: the agent its `name` gives (the last one), or [`NONE`].
    #[inline(always)]
    fn read_agent_ref(&mut self, s: &mut Scanner<'_>) -> std::result::Result<u32, LineErr> {
        let mut agent = NONE;
        if s.peek() != Some(b'{') {
            s.value()?;
            return Ok(agent);
        }
        s.i += 1;
        let mut first = true;
        while let Some(ak) = s.next_key(&mut first)? {
            let v = s.value()?;
            if key_is(ak, b"name") {
                agent = self.name_of(v, "agent_ref.name")?;
            }
        }
        Ok(agent)
    }

    /// `ng_perf`: its scalar members, replacing an earlier `ng_perf`'s; whether it is an
    /// object.
    #[inline(always)]
    fn read_perf(&mut self, s: &mut Scanner<'_>) -> std::result::Result<bool, LineErr> {
        take_back(&mut self.cols, &mut self.perf_ids);
        if s.peek() != Some(b'{') {
            s.value()?;
            return Ok(false);
        }
        s.i += 1;
        let mut first = true;
        while let Some(pk) = s.next_key(&mut first)? {
            let v = s.value()?;
            if let Some((t, x)) = scalar_tag(&v) {
                let key = key_string(pk);
                let id = self.cols.id(Source::Perf, &key);
                self.cols.set(id, t, x);
                self.perf_ids.push(id);
            }
        }
        Ok(true)
    }

    /// Any other top-level key `k`: a scalar is kept in its column (`after` is the slot
    /// of the last kept key, for guessing the next); an object or array only takes back
    /// an earlier scalar of the same key. `responses_create_params` gives the task's
    /// `fingerprint` when asked for; `evidence` notes what the health check reads again.
    #[inline(always)]
    fn read_top(
        &mut self,
        s: &mut Scanner<'_>,
        k: (&[u8], bool),
        top_ids: &mut Vec<u32>,
        after: &mut usize,
        fingerprint: &mut u64,
        evidence: &mut bool,
    ) -> std::result::Result<(), LineErr> {
        let v = if self.read.fingerprints && key_is(k, b"responses_create_params") {
            // Crossed as a skip would, hashing the user messages on the way.
            let (v, f) = super::fingerprint::of_params(s)?;
            *fingerprint = f;
            v
        } else {
            s.value()?
        };
        *evidence |= self.read.evidence
            && ((key_is(k, b"ng_trajectory") && !matches!(v, Scalar::Null)) || key_is(k, b"stage_index"));
        let guess = guess(&self.next_top, *after);
        match v {
            Scalar::Container { .. } => {
                // An object or array after a scalar of the same key replaces it.
                let key = key_string(k);
                if let Some(at) = top_ids.iter().position(|&id| self.cols.is(id, Source::Top, &key)) {
                    let id = top_ids.remove(at);
                    self.cols.set(id, tag::ABSENT, 0.0);
                }
            }
            Scalar::Str(raw, e) if raw.len() <= MAX_KEPT_STR => {
                let key = key_string(k);
                let id = self.cols.id_guess(Source::Top, &key, guess);
                // SAFETY: `raw` is a string token of this line, validated as UTF-8 on entry.
                let text = unsafe { str_value(raw, e) }.map_err(|m| LineErr {
                    offset: None,
                    key: Some(String::from_utf8_lossy(&key).into()),
                    msg: m.into(),
                })?;
                self.cols.set_str(id, &text);
                top_ids.push(id);
                follows(&mut self.next_top, after, id);
            }
            other => {
                if let Some((t, x)) = scalar_tag(&other) {
                    let key = key_string(k);
                    let id = self.cols.id_guess(Source::Top, &key, guess);
                    self.cols.set(id, t, x);
                    top_ids.push(id);
                    follows(&mut self.next_top, after, id);
                }
            }
        }
        Ok(())
    }
}

/// A scanner past the `{` of a line that is UTF-8 text and a JSON object (checked per
/// line, while the line is in cache from finding its end).
#[inline(always)]
fn open_object(bytes: &[u8]) -> std::result::Result<Scanner<'_>, LineErr> {
    if simdutf8::basic::from_utf8(bytes).is_err() {
        let bad = std::str::from_utf8(bytes).unwrap_err().valid_up_to();
        return Err(LineErr { offset: Some(bad), key: None, msg: "invalid UTF-8 byte; expected UTF-8 text".into() });
    }
    let mut s = Scanner::new(bytes);
    if s.peek() != Some(b'{') {
        let what = match s.value() {
            Ok(v) => describe(&v),
            Err(_) => "invalid JSON",
        };
        return Err(LineErr { offset: Some(0), key: None, msg: format!("expected a JSON object, found {what}") });
    }
    s.i += 1;
    Ok(s)
}

/// Row order by (task, rollout, line), given rows in line order. Keys are packed into
/// one integer with the row as the tiebreak when the indexes' ranges allow (always, in
/// practice), so the sort compares plain integers instead of chasing three columns.
pub(crate) fn sort_order(task: &[i64], rollout: &[i64]) -> Vec<u32> {
    let range = |v: &[i64]| -> Option<(i64, u64)> {
        let lo = *v.iter().min()?;
        let hi = *v.iter().max()?;
        Some((lo, hi.checked_sub(lo)? as u64))
    };
    let bits = |span: u64| 64 - span.leading_zeros();
    if let (Some((tlo, tspan)), Some((rlo, rspan))) = (range(task), range(rollout)) {
        let (tb, rb, ib) = (bits(tspan), bits(rspan), bits(task.len() as u64));
        if tb + rb + ib <= 128 && task.len() < u32::MAX as usize {
            let key = |i: usize| -> u128 {
                let tk = (task[i] - tlo) as u64 as u128;
                let rk = (rollout[i] - rlo) as u64 as u128;
                tk.checked_shl(rb + ib).unwrap_or(0) | rk.checked_shl(ib).unwrap_or(0) | i as u128
            };
            if tb + rb + ib <= 64 {
                let mut small: Vec<u64> = (0..task.len()).map(|i| key(i) as u64).collect();
                small.par_sort_unstable();
                let mask = (1u64 << ib) - 1;
                return small.into_iter().map(|k| (k & mask) as u32).collect();
            }
            let mut keys: Vec<u128> = (0..task.len()).map(key).collect();
            keys.par_sort_unstable();
            let mask = (1u128 << ib) - 1;
            return keys.into_iter().map(|k| (k & mask) as u32).collect();
        }
    }
    let mut perm: Vec<u32> = (0..task.len() as u32).collect();
    perm.par_sort_by_key(|&i| (task[i as usize], rollout[i as usize]));
    perm
}

/// Reads a rollouts file, computing what `opts` asks for. A last line cut off mid-write
/// is dropped with a warning.
pub fn read_rollouts(path: &Path, opts: ReadOptions) -> Result<RolloutTable> {
    let parse_start = std::time::Instant::now();
    let (pieces, report) = read_pieces(path, |lines: &mut PieceLines<'_>| parse_piece(path, lines, opts))?;
    crate::trace::trace("pieces parsed", parse_start);
    build_table(LineMap::single(path), pieces, report, opts)
}

/// Reads the rollout lines that start in bytes `range` (start, end) of `path`, numbered
/// as in the whole file: ranges that tile a file read every line once.
pub fn read_rollouts_range(path: &Path, range: (u64, u64), opts: ReadOptions) -> Result<RolloutTable> {
    let (pieces, report) =
        super::lines::read_pieces_range(path, range, |lines: &mut PieceLines<'_>| parse_piece(path, lines, opts))?;
    // A range may hold no row (it lies inside one line, or holds blank lines only).
    if pieces.iter().all(|(p, _)| p.task.is_empty() && p.cut_off.is_none()) {
        let mut t = RolloutTable::empty(LineMap::single(path));
        t.report = report;
        t.read = opts;
        return Ok(t);
    }
    build_table(LineMap::single(path), pieces, report, opts)
}

/// Reads the rollouts files of one run (the shards a run was written as) into one table,
/// as if they were one file; messages name each row's own file and line.
pub fn read_rollouts_files(paths: &[PathBuf], opts: ReadOptions) -> Result<RolloutTable> {
    if let [one] = paths {
        return read_rollouts(one, opts);
    }
    read_rollouts_with(paths, None, opts)
}

/// [`read_rollouts_files`] with rows already in memory (`extra`: their name in messages
/// and their JSONL text) read after the files, as one more file.
pub fn read_rollouts_with(paths: &[PathBuf], extra: Option<(&Path, &[u8])>, opts: ReadOptions) -> Result<RolloutTable> {
    for (i, p) in paths.iter().enumerate() {
        let real = |f: &Path| std::fs::canonicalize(f).ok();
        if paths[..i].iter().any(|q| q == p || real(q).is_some_and(|q| Some(q) == real(p))) {
            return Err(Error::Usage(format!("{} is given twice as a rollouts file", p.display())));
        }
    }
    let parse_start = std::time::Instant::now();
    let mut map = LineMap::default();
    let mut all = Vec::new();
    let mut report = ReadReport::default();
    for path in paths {
        let (pieces, r) = read_pieces(path, |lines: &mut PieceLines<'_>| parse_piece(path, lines, opts))?;
        let k = map.file(path);
        all.extend(pieces.into_iter().map(|(p, base)| (p, LineMap::number(k, base))));
        report.lines += r.lines;
        report.bytes += r.bytes;
        report.warnings.extend(r.warnings);
    }
    if let Some((path, data)) = extra {
        let (pieces, r) = read_pieces_bytes(path, data, |lines: &mut PieceLines<'_>| parse_piece(path, lines, opts))?;
        let k = map.file(path);
        all.extend(pieces.into_iter().map(|(p, base)| (p, LineMap::number(k, base))));
        report.lines += r.lines;
    }
    crate::trace::trace("pieces parsed", parse_start);
    build_table(map, all, report, opts)
}

/// Reads rollout rows that are already in memory (JSONL text the caller built, such as
/// the rollout summaries an aggregate file stores), named `path` in messages.
pub fn read_rollouts_bytes(path: &Path, data: &[u8], opts: ReadOptions) -> Result<RolloutTable> {
    let (pieces, report) = read_pieces_bytes(path, data, |lines: &mut PieceLines<'_>| parse_piece(path, lines, opts))?;
    build_table(LineMap::single(path), pieces, report, opts)
}

/// Parses the lines of one piece into a [`Piece`].
fn parse_piece(path: &Path, lines: &mut PieceLines<'_>, read: ReadOptions) -> Result<Piece> {
    let mut p = Piece { read, ..Piece::default() };
    let mut top = Vec::new();
    let mut usage = Vec::new();
    let mut sized = false;
    while let Some(l) = lines.next() {
        if !sized && l.number >= 64 {
            // Sized once from the first lines, instead of grown by doubling.
            p.reserve(lines.remaining_estimate() + 64);
            sized = true;
        }
        let r = p.parse_line(&l, &mut top, &mut usage);
        if let Err(e) = r {
            // Undo a half-written row: columns may hold a value for it.
            p.cols.undo_row();
            if l.unterminated && cut_mid_write(l.bytes) {
                p.cut_off = Some((l.number, e.msg));
                continue;
            }
            let mut loc = Location::line(path, l.number);
            if let Some(k) = e.key.clone().or_else(|| e.offset.and_then(|o| top_key_at(l.bytes, o))) {
                loc = loc.key(&k);
            }
            let msg = match e.offset {
                Some(off) if e.key.is_none() => format!("{} (at byte {} of the line)", e.msg, off + 1),
                _ => e.msg,
            };
            return Err(Error::bad(loc, msg));
        }
    }
    Ok(p)
}

/// Merges parsed pieces (in file order, with their line bases) into the sorted table.
fn build_table(
    map: LineMap,
    pieces: Vec<(Piece, u64)>,
    mut report: ReadReport,
    read: ReadOptions,
) -> Result<RolloutTable> {
    let merge_start = std::time::Instant::now();
    let mut t = RolloutTable::empty(map);
    t.read = read;
    let mut names = Names::default();
    let mut orders = Interner::default();
    let mut col_pieces = Vec::with_capacity(pieces.len());
    let mut piece_meta = Vec::with_capacity(pieces.len());
    let mut cut: Option<(u64, String)> = None;
    for (mut p, base) in pieces {
        let rows = p.task.len();
        if let Some((line, why)) = p.cut_off {
            cut = Some((line + base, why.clone()));
            t.cut_off.push(line + base);
            report.warnings.push(format!(
                "{}: the last line is cut off (no newline, {why}); skipped it, as from a run that crashed mid-write",
                t.lines.describe(line + base)
            ));
        }
        for l in &mut p.line {
            *l += base;
        }
        let name_map: Vec<u32> = p.names.list.iter().map(|n| names.get(n)).collect();
        let remap_name = |v: u32| if v == NONE { NONE } else { name_map[v as usize] };
        t.agent.extend(p.agent.iter().map(|&v| remap_name(v)));
        t.server.extend(p.server.iter().map(|&v| remap_name(v)));
        t.task.extend(p.task);
        t.rollout.extend(p.rollout);
        t.line.extend(p.line);
        t.masked.extend(p.masked);
        t.perf.extend(p.perf);
        t.fingerprint.extend(p.fingerprint);
        t.has_response |= p.has_response;
        t.evidence.extend(p.evidence.iter().map(|&(l, o, n)| (l + base, o, n)));
        piece_meta.push((p.order, p.orders));
        debug_assert_eq!(p.cols.rows(), rows);
        col_pieces.push(p.cols);
    }
    // Rows sorted by (task, rollout, line): statistics then read the columns sequentially
    // instead of jumping across the file's completion order.
    let perm = sort_order(&t.task, &t.rollout);
    let mut piece_of: Vec<(u32, u32)> = Vec::with_capacity(t.task.len());
    for (p, cols) in col_pieces.iter().enumerate() {
        piece_of.extend((0..cols.rows() as u32).map(|l| (p as u32, l)));
    }
    let src: Vec<(u32, u32)> = perm.iter().map(|&i| piece_of[i as usize]).collect();
    drop(piece_of);
    let (columns, maps) = merge_columns(col_pieces, &src);
    drop(src);
    for ((order, local), map) in piece_meta.into_iter().zip(&maps) {
        let remapped: Vec<u32> = local
            .seqs
            .iter()
            .map(|seq| {
                let g: Vec<u32> = seq.iter().map(|&c| if c == SEP { SEP } else { map[c as usize] }).collect();
                orders.intern(&g)
            })
            .collect();
        t.order.extend(order.into_iter().map(|o| remapped[o as usize]));
    }
    for c in &columns {
        if c.source != Source::Top {
            continue;
        }
        let nums = c.tags.iter().filter(|&&x| tag::is_numeric(x)).count();
        let strs = c.tags.iter().filter(|&&x| x == tag::STR || x == tag::LONG_STR).count();
        if nums > 0 && strs > 0 {
            report.warnings.push(format!(
                "{}: field `{}` is a number in {nums} row{} and a string in {strs} row{}; the string rows count as missing for it",
                t.lines.name(),
                c.name,
                if nums == 1 { "" } else { "s" },
                if strs == 1 { "" } else { "s" }
            ));
        }
    }
    fn gather<T: Copy + Send + Sync>(v: &mut Vec<T>, perm: &[u32]) {
        *v = perm.iter().map(|&i| v[i as usize]).collect();
    }
    rayon::scope(|s| {
        let perm = &perm;
        s.spawn(|_| gather(&mut t.task, perm));
        s.spawn(|_| gather(&mut t.rollout, perm));
        s.spawn(|_| gather(&mut t.line, perm));
        s.spawn(|_| gather(&mut t.masked, perm));
        s.spawn(|_| gather(&mut t.agent, perm));
        s.spawn(|_| gather(&mut t.server, perm));
        s.spawn(|_| gather(&mut t.perf, perm));
        if read.fingerprints {
            s.spawn(|_| gather(&mut t.fingerprint, perm));
        }
        s.spawn(|_| gather(&mut t.order, perm));
    });
    t.columns = columns;
    t.orders = orders.seqs;
    crate::trace::trace("merge pieces", merge_start);
    t.names = names.list;
    t.report = report;
    if t.is_empty() {
        let (path, cut) = match cut {
            Some((line, why)) => {
                let (p, l) = t.lines.place(line);
                (p.to_path_buf(), Some((l, why)))
            }
            None => (t.path.clone(), None),
        };
        return Err(super::lines::no_rows(&path, "rollout", cut));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packed-key sorting gives the (task, rollout, row) order for narrow, wide (u128)
    /// and unpackable index ranges alike.
    #[test]
    fn sort_order_matches_a_plain_sort() {
        let mut rng = crate::generate::rng::Rng::new(0x2545_F491_4F6C_DD1Du64);
        let mut next = move || rng.next_u64();
        for (tspan, rspan) in [(1u64, 1u64), (200, 5), (1 << 40, 1 << 20), (u64::MAX, 3), (u64::MAX, u64::MAX)] {
            let n = 5000;
            let task: Vec<i64> = (0..n).map(|_| ((next() % tspan) as i64).wrapping_sub((tspan / 2) as i64)).collect();
            let rollout: Vec<i64> = (0..n).map(|_| (next() % rspan) as i64).collect();
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by_key(|&i| (task[i as usize], rollout[i as usize], i));
            assert_eq!(sort_order(&task, &rollout), want, "spans {tspan} {rspan}");
        }
    }

    /// Lines whose keys come and go, change order and repeat: every value lands in its
    /// own column (the last one wins for a repeated key), and each row keeps its key order.
    /// Column guesses from the neighbouring lines must never put a value in the wrong one.
    #[test]
    fn values_land_in_their_columns_whatever_the_key_order() {
        let mut rng = crate::generate::rng::Rng::new(0x9E37_79B9_7F4A_7C15u64);
        let mut next = move |n: u64| rng.next_u64() % n;
        // `input_tokens` is both a top-level and a usage key: two columns.
        const TOP: [&str; 7] = ["reward", "b", "input_tokens", "d", "e", "f", "g"];
        const USAGE: [&str; 4] = ["input_tokens", "output_tokens", "total_tokens", "x"];
        // A value's JSON text and what the column should hold: (tag, number bits, text).
        let value = |k: u64| -> (String, Option<(u8, u64, Option<String>)>) {
            match k % 7 {
                0 => (format!("{}", k as i64 - 3), Some((tag::INT, (k as i64 - 3) as u64, None))),
                1 => (format!("{}.5", k), Some((tag::FLOAT, (k as f64 + 0.5).to_bits(), None))),
                2 => (format!("\"s{}\"", k % 5), Some((tag::STR, 0, Some(format!("s{}", k % 5))))),
                3 => ("null".into(), Some((tag::NULL, 0, None))),
                4 => ("true".into(), Some((tag::BOOL, 1f64.to_bits(), None))),
                5 => ("[1, {\"reward\": 2}]".into(), None),
                _ => ("{\"b\": 1}".into(), None),
            }
        };
        let mut text = String::new();
        type Kept = (u8, u64, Option<String>);
        type Want = (Vec<(&'static str, Source)>, HashMap<(Source, &'static str), (u8, u64, Option<String>)>);
        let mut want: Vec<Want> = Vec::new();
        let mut order: Vec<usize> = (0..TOP.len()).collect();
        for row in 0..4000u64 {
            // Mostly the previous line's order; sometimes a new one.
            if next(10) == 0 {
                for i in (1..order.len()).rev() {
                    order.swap(i, next(i as u64 + 1) as usize);
                }
            }
            let mut keys: Vec<&str> = order.iter().map(|&i| TOP[i]).filter(|_| next(6) != 0).collect();
            if next(20) == 0 && !keys.is_empty() {
                let again = keys[next(keys.len() as u64) as usize];
                keys.push(again);
            }
            let mut members = vec![format!("\"_ng_task_index\": {row}"), "\"_ng_rollout_index\": 0".to_string()];
            let (mut seq, mut vals) = (Vec::new(), HashMap::new());
            for k in keys {
                let (json, kept) = value(next(1000));
                members.push(format!("\"{k}\": {json}"));
                if let Some(v) = kept {
                    seq.push((k, Source::Top));
                    vals.insert((Source::Top, k), v);
                } else if vals.remove(&(Source::Top, k)).is_some() {
                    // An object or array after a kept value of the same key replaces it
                    // (the last value wins, as in Python).
                    let at = seq.iter().position(|s| *s == (k, Source::Top)).unwrap();
                    seq.remove(at);
                }
            }
            let present: Vec<&'static str> = USAGE.iter().copied().filter(|_| next(5) != 0).collect();
            let mut entries: Vec<(&str, String, Option<Kept>)> = Vec::new();
            for k in present {
                let (json, kept) = value(next(1000));
                entries.push((k, json, kept));
            }
            if next(3) == 0 {
                entries.reverse();
            }
            let usage: Vec<String> = entries.iter().map(|(k, json, _)| format!("\"{k}\": {json}")).collect();
            // Numbers, bools and nulls are kept from `usage`, in order; text, objects and
            // arrays only as "not a number", after them, and only where a kept top-level
            // value of the same name is there to be replaced.
            let mut useq = Vec::new();
            let mut later = Vec::new();
            for (k, _, kept) in entries {
                match kept.filter(|v| v.0 != tag::STR) {
                    Some(v) => {
                        useq.push((k, Source::Usage));
                        vals.insert((Source::Usage, k), v);
                    }
                    None if seq.contains(&(k, Source::Top)) => later.push(k),
                    None => {}
                }
            }
            for k in later {
                useq.push((k, Source::Usage));
                vals.insert((Source::Usage, k), (tag::LONG_STR, 0, None));
            }
            members.insert(
                next(members.len() as u64) as usize,
                format!("\"response\": {{\"usage\": {{{}}}}}", usage.join(", ")),
            );
            // Model text in a skipped array makes the file span several read pieces.
            members.push(format!("\"output\": [\"{}\"]", "x".repeat(2500)));
            text.push_str(&format!("{{{}}}\n", members.join(", ")));
            seq.push(("", Source::Top));
            seq.extend(useq);
            want.push((seq, vals));
        }
        let dir = std::env::temp_dir().join(format!("rollstat-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rollouts.jsonl");
        std::fs::write(&path, &text).unwrap();
        assert!(text.len() > 8 << 20, "the file spans more than one piece");
        let t = read_rollouts(&path, ReadOptions::default()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(t.len(), want.len());
        for (row, (seq, vals)) in want.iter().enumerate() {
            assert_eq!(t.task[row], row as i64);
            let got: Vec<(&str, Source)> = t.orders[t.order[row] as usize]
                .iter()
                .map(|&c| {
                    if c == SEP {
                        ("", Source::Top)
                    } else {
                        (t.columns[c as usize].name.as_str(), t.columns[c as usize].source)
                    }
                })
                .collect();
            assert_eq!(&got, seq, "key order of row {row}");
            for c in &t.columns {
                let have = match c.tags[row] {
                    tag::ABSENT => None,
                    tag::STR => Some((tag::STR, 0, c.str_at(row).map(str::to_string))),
                    tg => Some((tg, c.nums[row].to_bits(), None)),
                };
                let key = (c.source, c.name.as_str());
                let expected = vals.iter().find(|(k, _)| **k == key).map(|(_, v)| v.clone());
                assert_eq!(have, expected, "row {row}, column {} ({:?})", c.name, c.source);
            }
        }
    }

    /// What a read is asked for changes only what it adds: the fingerprints and the
    /// rows with health evidence, nothing of the columns.
    #[test]
    fn a_read_computes_what_it_is_asked_for() {
        let text = concat!(
            r#"{"_ng_task_index":0,"_ng_rollout_index":0,"responses_create_params":{"input":[{"role":"user","content":"2+2?"}]},"reward":1.0}"#,
            "\n",
            r#"{"_ng_task_index":1,"_ng_rollout_index":0,"_ng_rollout_id":"r1","ng_trajectory":[1],"reward":0.0}"#,
            "\n",
        );
        let read = |opts| read_rollouts_bytes(Path::new("r.jsonl"), text.as_bytes(), opts).unwrap();
        let all = read(ReadOptions { fingerprints: true, evidence: true });
        let none = read(ReadOptions::default());
        assert_ne!(all.fingerprints()[0], 0);
        assert_eq!(all.fingerprints()[1], 0);
        assert_eq!(all.evidence.len(), 1);
        assert!(none.fingerprint.is_empty() && none.evidence.is_empty());
        assert!(std::panic::catch_unwind(|| none.fingerprints().len()).is_err());
        let fp = read(ReadOptions::FINGERPRINTS);
        assert_eq!(fp.fingerprints(), all.fingerprints());
        assert!(fp.evidence.is_empty());
        for t in [&none, &fp] {
            assert_eq!(
                (&t.task, &t.rollout, &t.line, &t.order, &t.orders),
                (&all.task, &all.rollout, &all.line, &all.order, &all.orders)
            );
            assert_eq!(t.columns.len(), all.columns.len());
            for (a, b) in t.columns.iter().zip(&all.columns) {
                assert_eq!((&a.name, &a.tags), (&b.name, &b.tags));
            }
        }
    }

    /// A key missing from a line costs at most two failed column guesses (on that line
    /// and on the next), not one per key after it.
    #[test]
    fn a_missing_key_costs_at_most_two_guesses() {
        let mut p = Piece::default();
        let (mut top, mut usage) = (Vec::new(), Vec::new());
        let mut changed = 0;
        for i in 0..1000u64 {
            let b = if i % 10 == 3 { String::new() } else { format!("\"b\": {i}, ") };
            let input = if i % 7 == 5 { String::new() } else { "\"input_tokens\": 3, ".to_string() };
            changed += usize::from(b.is_empty()) + usize::from(input.is_empty());
            let line = format!(
                "{{\"_ng_task_index\": {i}, \"_ng_rollout_index\": 0, \"a\": 1, {b}\"c\": 2.5, \"d\": null, \"e\": \"x\", \
                 \"response\": {{\"usage\": {{{input}\"output_tokens\": 4}}}}}}"
            );
            let l = Line { bytes: line.as_bytes(), number: i + 1, offset: 0, unterminated: false };
            assert!(p.parse_line(&l, &mut top, &mut usage).is_ok(), "{line}");
        }
        // The first line finds its 5 top-level and 2 usage keys without a guess.
        let bound = 7 + 2 * changed as u64;
        assert!(p.cols.guess_misses <= bound, "{} failed guesses, expected at most {bound}", p.cols.guess_misses);
        assert!(p.cols.guess_misses >= 7);
    }
}
