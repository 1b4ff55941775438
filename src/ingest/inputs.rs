//! Reading a materialized-inputs JSONL file: one row per expected rollout. We keep the
//! rollout key, the agent name and server stamp, and where the row's bytes are, so a
//! task's `sample` can be re-read verbatim later without keeping every row's text.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::lines::{read_pieces, PieceLines, ReadReport};
use super::rollouts::str_value;
use super::rollouts::{describe, Names, NONE};
use crate::error::{Error, Location, Result};
use crate::json::scan::{key_is, top_key_at, Scalar, Scanner};

/// Expected rollouts, in file order.
#[derive(Debug, Clone, Default)]
pub struct InputTable {
    pub path: PathBuf,
    pub task: Vec<i64>,
    pub rollout: Vec<i64>,
    pub line: Vec<u64>,
    pub agent: Vec<u32>,
    pub server: Vec<u32>,
    pub names: Vec<String>,
    /// Byte offset and length of each row's line in the file.
    pub offset: Vec<u64>,
    pub len: Vec<u32>,
    pub report: ReadReport,
    /// The first line whose row carries a verifier's result (top-level `response` and
    /// `reward`), which materialized inputs never do: the rollouts file given as inputs.
    pub verified_line: Option<u64>,
    /// How a rollout key finds its row, settled on first use and shared by everything
    /// that joins rollouts to their input rows.
    pub(super) row_at: std::sync::OnceLock<RowIndex>,
}

/// Inputs whose keys strictly increase (the usual file) are searched in place, which
/// needs no memory; others get a map from key to row (the last, for a key given twice).
#[derive(Debug, Clone)]
pub(super) enum RowIndex {
    Sorted,
    Hashed(HashMap<(i64, i64), usize, foldhash::fast::RandomState>),
}

impl InputTable {
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
    /// Room for `rows` more rows in every column, sized once: columns grown row by row
    /// (or piece by piece) would keep up to twice the room.
    pub fn reserve_exact(&mut self, rows: usize) {
        self.task.reserve_exact(rows);
        self.rollout.reserve_exact(rows);
        self.line.reserve_exact(rows);
        self.agent.reserve_exact(rows);
        self.server.reserve_exact(rows);
        self.offset.reserve_exact(rows);
        self.len.reserve_exact(rows);
    }

    /// Rows `rows` of this table (in that order), with its names and file.
    pub fn subset(&self, rows: &[usize]) -> InputTable {
        InputTable {
            path: self.path.clone(),
            task: rows.iter().map(|&r| self.task[r]).collect(),
            rollout: rows.iter().map(|&r| self.rollout[r]).collect(),
            line: rows.iter().map(|&r| self.line[r]).collect(),
            agent: rows.iter().map(|&r| self.agent[r]).collect(),
            server: rows.iter().map(|&r| self.server[r]).collect(),
            names: self.names.clone(),
            offset: rows.iter().map(|&r| self.offset[r]).collect(),
            len: rows.iter().map(|&r| self.len[r]).collect(),
            ..Default::default()
        }
    }

    /// The input row of rollout key (`task`, `rollout`).
    pub fn row_of(&self, task: i64, rollout: i64) -> Option<usize> {
        let key = |i: usize| (self.task[i], self.rollout[i]);
        let at = self.row_at.get_or_init(|| {
            if (1..self.len()).all(|i| key(i - 1) < key(i)) {
                RowIndex::Sorted
            } else {
                RowIndex::Hashed((0..self.len()).map(|i| (key(i), i)).collect())
            }
        });
        match at {
            RowIndex::Sorted => {
                let (mut lo, mut hi) = (0, self.len());
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if key(mid) < (task, rollout) {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                (lo < self.len() && key(lo) == (task, rollout)).then_some(lo)
            }
            RowIndex::Hashed(map) => map.get(&(task, rollout)).copied(),
        }
    }

    /// [`InputTable::row_of`], looking first at row `near` and the one after it: rollouts
    /// taken in key order find their rows one after another when the inputs are in key
    /// order too (their keys are then distinct, so the row found is the same).
    pub fn row_near(&self, near: usize, task: i64, rollout: i64) -> Option<usize> {
        if matches!(self.row_at.get(), Some(RowIndex::Sorted)) {
            for i in [near, near + 1] {
                if i < self.len() && self.task[i] == task && self.rollout[i] == rollout {
                    return Some(i);
                }
            }
        }
        self.row_of(task, rollout)
    }
}

#[derive(Default)]
struct Piece {
    t: InputTable,
    names: Names,
    /// The file's last line when it was cut off mid-write: piece-local number, reason.
    cut_off: Option<(u64, String)>,
}

impl Piece {
    fn name(&mut self, s: &str) -> u32 {
        self.names.get(s)
    }
}

/// Task, rollout, agent and server of one input row, and whether it carries a verifier's
/// `response` and `reward`.
type RowKeys = (i64, i64, u32, u32, bool);
/// The key involved (if any) and what was wrong.
type LineProblem = (Option<String>, String);

/// Reads a materialized-inputs file.
pub fn read_inputs(path: &Path) -> Result<InputTable> {
    let (pieces, report) = read_pieces(path, |lines: &mut PieceLines<'_>| parse_piece(path, lines))?;
    let (t, cut) = join_pieces(path, pieces, report);
    if t.is_empty() {
        return Err(super::lines::no_rows(path, "input", cut));
    }
    Ok(t)
}

/// Reads the rows of a materialized-inputs file that start in bytes `range` (start,
/// end) of it, numbered by their line in the whole file. A range may hold no row.
pub fn read_inputs_range(path: &Path, range: (u64, u64)) -> Result<InputTable> {
    let (pieces, report) =
        super::lines::read_pieces_range(path, range, |lines: &mut PieceLines<'_>| parse_piece(path, lines))?;
    Ok(join_pieces(path, pieces, report).0)
}

/// Reads the rows of one piece of an inputs file.
fn parse_piece(path: &Path, lines: &mut PieceLines<'_>) -> Result<Piece> {
    let mut p = Piece::default();
    for l in lines {
        let r: std::result::Result<RowKeys, LineProblem> = (|| {
            // Checked per line, while the line is in cache from finding its end.
            if simdutf8::basic::from_utf8(l.bytes).is_err() {
                let e = std::str::from_utf8(l.bytes).unwrap_err();
                return Err((
                    None,
                    format!("invalid UTF-8 byte at byte {} of the line; expected UTF-8 text", e.valid_up_to() + 1),
                ));
            }
            let mut s = Scanner::new(l.bytes);
            let inv = |e: crate::json::scan::ScanError| {
                (
                    top_key_at(l.bytes, e.offset),
                    format!("invalid JSON: {} (at byte {} of the line)", e.msg, e.offset + 1),
                )
            };
            if s.peek() != Some(b'{') {
                let what = s.value().map(|v| describe(&v)).unwrap_or("invalid JSON");
                return Err((None, format!("expected a JSON object, found {what}")));
            }
            s.i += 1;
            let (mut task, mut rollout, mut agent, mut server) = (None, None, NONE, NONE);
            let mut first = true;
            let (mut response, mut reward) = (false, false);
            while let Some(k) = s.next_key(&mut first).map_err(inv)? {
                response |= key_is(k, b"response");
                reward |= key_is(k, b"reward");
                if key_is(k, b"_ng_task_index") || key_is(k, b"_ng_rollout_index") {
                    let name = if key_is(k, b"_ng_task_index") { "_ng_task_index" } else { "_ng_rollout_index" };
                    match s.value().map_err(inv)? {
                        Scalar::Int(i) => {
                            if name == "_ng_task_index" {
                                task = Some(i)
                            } else {
                                rollout = Some(i)
                            }
                        }
                        v => {
                            return Err((
                                Some(name.to_string()),
                                format!("expected an integer, found {}", describe(&v)),
                            ))
                        }
                    }
                } else if key_is(k, b"_ng_environment_server") {
                    // A key given twice keeps its last value, as Python's dict does.
                    server = NONE;
                    if let Scalar::Str(raw, e) = s.value().map_err(inv)? {
                        // SAFETY: `raw` is a string token of this line, validated as UTF-8 on entry.
                        let n = unsafe { str_value(raw, e) }
                            .map_err(|m| (Some("_ng_environment_server".to_string()), m.to_string()))?;
                        server = p.name(&n);
                    }
                } else if key_is(k, b"agent_ref") {
                    agent = NONE;
                    if s.peek() == Some(b'{') {
                        s.i += 1;
                        let mut f2 = true;
                        while let Some(ak) = s.next_key(&mut f2).map_err(inv)? {
                            let v = s.value().map_err(inv)?;
                            if key_is(ak, b"name") {
                                agent = NONE;
                                if let Scalar::Str(raw, e) = v {
                                    // SAFETY: `raw` is a string token of this line, validated as UTF-8 on entry.
                                    let n = unsafe { str_value(raw, e) }
                                        .map_err(|m| (Some("agent_ref.name".to_string()), m.to_string()))?;
                                    agent = p.name(&n);
                                }
                            }
                        }
                    } else {
                        s.value().map_err(inv)?;
                    }
                } else {
                    s.value().map_err(inv)?;
                }
            }
            s.end().map_err(inv)?;
            let task = task
                .ok_or((Some("_ng_task_index".to_string()), "missing; expected an integer task index".to_string()))?;
            let rollout = rollout.ok_or((
                Some("_ng_rollout_index".to_string()),
                "missing; expected an integer rollout index".to_string(),
            ))?;
            Ok((task, rollout, agent, server, response && reward))
        })();
        match r {
            Ok((task, rollout, agent, server, verified)) => {
                if verified && p.t.verified_line.is_none() {
                    p.t.verified_line = Some(l.number);
                }
                p.t.task.push(task);
                p.t.rollout.push(rollout);
                p.t.agent.push(agent);
                p.t.server.push(server);
                p.t.line.push(l.number);
                p.t.offset.push(l.offset);
                p.t.len.push(l.bytes.len() as u32);
            }
            Err((key, msg)) => {
                if l.unterminated && crate::json::scan::cut_mid_write(l.bytes) {
                    p.cut_off = Some((l.number, msg));
                    continue;
                }
                let mut loc = Location::line(path, l.number);
                if let Some(k) = key {
                    loc = loc.key(&k);
                }
                return Err(Error::bad(loc, msg));
            }
        }
    }
    Ok(p)
}

/// Joins the pieces of an inputs file into one table, in file order, with their
/// warnings; also the file's cut-off last line, if any.
fn join_pieces(path: &Path, pieces: Vec<(Piece, u64)>, mut report: ReadReport) -> (InputTable, Option<(u64, String)>) {
    let mut t = InputTable { path: path.to_path_buf(), ..Default::default() };
    t.reserve_exact(pieces.iter().map(|(p, _)| p.t.task.len()).sum());
    let mut names: HashMap<String, u32> = HashMap::new();
    let mut cut: Option<(u64, String)> = None;
    for (k, (p, base)) in pieces.into_iter().enumerate() {
        // The pieces' columns freed so far go back to the system as the table grows,
        // so reading holds about one copy of the table, not two.
        if k % 64 == 63 {
            super::release_free_memory();
        }
        if let Some((line, msg)) = p.cut_off {
            cut = Some((line + base, msg.clone()));
            report.warnings.push(format!(
                "{}, line {}: the last line is cut off (no newline, {msg}); skipped it",
                path.display(),
                line + base
            ));
        }
        let map: Vec<u32> = p
            .names
            .list
            .into_iter()
            .map(|n| {
                let next = t.names.len() as u32;
                *names.entry(n.clone()).or_insert_with(|| {
                    t.names.push(n);
                    next
                })
            })
            .collect();
        let re = |v: u32| if v == NONE { NONE } else { map[v as usize] };
        t.agent.extend(p.t.agent.iter().map(|&v| re(v)));
        t.server.extend(p.t.server.iter().map(|&v| re(v)));
        t.task.extend(p.t.task);
        t.rollout.extend(p.t.rollout);
        t.line.extend(p.t.line.iter().map(|l| l + base));
        t.verified_line = t.verified_line.or(p.t.verified_line.map(|l| l + base));
        t.offset.extend(p.t.offset);
        t.len.extend(p.t.len);
    }
    t.report = report;
    (t, cut)
}

/// The inputs file mapped for re-reading rows with [`row_in`] (`None` when it cannot be
/// opened or mapped). Unmapped when dropped, so the pages read leave memory with it.
pub fn map_file(t: &InputTable) -> Option<memmap2::Mmap> {
    let f = std::fs::File::open(&t.path).ok()?;
    // SAFETY: a read-only mapping of the inputs file; see `lines` for files changed
    // while rollstat reads them.
    unsafe { memmap2::Mmap::map(&f) }.ok()
}

/// Row `r`'s raw line in `map` (from [`map_file`]).
pub fn row_in<'m>(t: &InputTable, map: &'m [u8], r: usize) -> Result<&'m [u8]> {
    let (a, n) = (t.offset[r] as usize, t.len[r] as usize);
    map.get(a..a + n)
        .ok_or_else(|| Error::bad(Location::line(&t.path, t.line[r]), "the file changed while it was being read"))
}

/// Re-reads the given rows' raw lines (by offset) from the inputs file.
pub fn read_rows(t: &InputTable, rows: &[usize]) -> Result<Vec<Vec<u8>>> {
    use std::io::{Read, Seek, SeekFrom};
    // Mapped: one slice per row instead of a seek and a read each.
    if let Some(map) = map_file(t) {
        return rows.iter().map(|&r| row_in(t, &map, r).map(<[u8]>::to_vec)).collect();
    }
    let mut f = std::fs::File::open(&t.path).map_err(|e| Error::read(&t.path, e))?;
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by_key(|&i| t.offset[rows[i]]);
    let mut out = vec![Vec::new(); rows.len()];
    for i in order {
        let r = rows[i];
        let mut buf = vec![0u8; t.len[r] as usize];
        f.seek(SeekFrom::Start(t.offset[r])).map_err(|e| Error::read(&t.path, e))?;
        f.read_exact(&mut buf).map_err(|e| Error::read(&t.path, e))?;
        out[i] = buf;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::InputTable;

    fn table(keys: &[(i64, i64)]) -> InputTable {
        InputTable {
            task: keys.iter().map(|k| k.0).collect(),
            rollout: keys.iter().map(|k| k.1).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn rows_are_found_in_sorted_and_unsorted_inputs() {
        let sorted = table(&[(0, 0), (0, 1), (1, 0), (3, 2), (3, 5), (7, 0)]);
        let shuffled = table(&[(3, 5), (0, 1), (7, 0), (0, 0), (3, 2), (1, 0)]);
        for t in [&sorted, &shuffled] {
            for i in 0..t.len() {
                assert_eq!(t.row_of(t.task[i], t.rollout[i]), Some(i));
            }
            for (task, rollout) in [(0, 2), (2, 0), (-1, 0), (8, 0), (3, 3), (7, 1)] {
                assert_eq!(t.row_of(task, rollout), None, "({task}, {rollout})");
            }
        }
        assert_eq!(table(&[]).row_of(0, 0), None);
        // A key given twice: its last row, wherever it is.
        let twice = table(&[(0, 0), (1, 0), (1, 0), (2, 0)]);
        assert_eq!(twice.row_of(1, 0), Some(2));
    }

    #[test]
    fn a_row_near_the_last_is_the_row_a_search_finds() {
        let sorted = table(&[(0, 0), (0, 1), (1, 0), (3, 2), (3, 5), (7, 0)]);
        let shuffled = table(&[(3, 5), (0, 1), (7, 0), (0, 0), (3, 2), (1, 0)]);
        let twice = table(&[(0, 0), (1, 0), (1, 0), (2, 0)]);
        for t in [&sorted, &shuffled, &twice] {
            for near in 0..t.len() + 1 {
                for (task, rollout) in [(0, 0), (0, 1), (1, 0), (3, 2), (3, 5), (7, 0), (2, 0), (3, 3), (8, 0)] {
                    assert_eq!(
                        t.row_near(near, task, rollout),
                        t.row_of(task, rollout),
                        "near {near}: ({task}, {rollout})"
                    );
                }
            }
        }
    }
}
