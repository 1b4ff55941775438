//! Input slices: the rows of a materialized-inputs file for one bucket of tasks, saved
//! by `shard --inputs` so that a merge can join each bucket of rollouts to its input
//! rows without reading (or holding) the whole inputs file.
//!
//! A slice keeps, per row, its rollout key, agent and server, its line in the inputs
//! file and where its bytes are there; and, in a small header read before any row, the
//! inputs file's name, the bucket, and each (server, agent) pair of the bucket with its
//! first line, from which the run labels of the whole sweep are settled. Slices of the
//! same file read back, joined in line order, as the table read from the file itself.
//!
//! The format is private to rollstat: a fixed magic, the header's compressed length,
//! the zstd-compressed header (bincode), then the zstd-compressed rows (little-endian).

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::rollouts::NONE;
use super::InputTable;
use crate::codec::Enc;
use crate::error::{Error, Location, Result};

/// The format's name and version (the last byte).
const MAGIC: &[u8; 16] = b"rollstat-inputs\x04";

/// Bytes per row in the rows frame.
const ROW: usize = 8 + 8 + 8 + 4 + 4 + 8 + 4;

/// One shard run's part in a slice: the bytes of the inputs file it read (`start..end`),
/// how many input rows it found there in all, and how many of them the slice holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardPart {
    pub start: u64,
    pub end: u64,
    pub rows: u64,
    pub here: u64,
}

/// What an input slice says of itself before its rows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Head {
    /// The inputs file the rows came from (absolute, as `shard` found it), and its size
    /// then: the rows' bytes are re-read from it for profile's samples.
    pub inputs: PathBuf,
    pub size: u64,
    /// The file's read warnings (a cut-off last line), repeated by the merge.
    pub warnings: Vec<String>,
    /// The shard runs its rows came from, by byte range.
    pub parts: Vec<ShardPart>,
    pub task_width: i64,
    pub bucket: i64,
    pub rows: u64,
    pub names: Vec<String>,
    /// Each distinct (server, agent) name id pair of the slice's rows, with its first line.
    pub pairs: Vec<(u32, u32, u64)>,
}

/// Whether `path` starts as an input slice does (unreadable files say no; reading
/// them later reports why).
pub fn is_input_slice(path: &Path) -> bool {
    let mut magic = [0u8; 16];
    // Any version: one this build cannot read is refused by name when read.
    std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok() && magic[..15] == MAGIC[..15]
}

/// Writes rows `rows` of `t` (in line order, all of bucket `bucket` of width
/// `task_width`) as an input slice of the inputs file `t.path`, of `size` bytes.
pub fn write_input_slice(
    t: &InputTable,
    rows: &[usize],
    (task_width, bucket): (i64, i64),
    size: u64,
    parts: &[ShardPart],
    w: &mut impl Write,
) -> std::io::Result<()> {
    let mut pairs: Vec<(u32, u32, u64)> = Vec::new();
    let mut seen: HashMap<(u32, u32), ()> = HashMap::new();
    for &r in rows {
        if seen.insert((t.server[r], t.agent[r]), ()).is_none() {
            pairs.push((t.server[r], t.agent[r], t.line[r]));
        }
    }
    let head = Head {
        inputs: PathBuf::from(t.path.to_string_lossy().into_owned()),
        size,
        warnings: t.report.warnings.clone(),
        parts: parts.to_vec(),
        task_width,
        bucket,
        rows: rows.len() as u64,
        names: t.names.clone(),
        pairs,
    };
    let mut b = Enc(Vec::with_capacity(rows.len() * ROW));
    for &r in rows {
        b.u64(t.task[r] as u64);
        b.u64(t.rollout[r] as u64);
        b.u64(t.line[r]);
        b.u32(t.agent[r]);
        b.u32(t.server[r]);
        b.u64(t.offset[r]);
        b.u32(t.len[r]);
    }
    let head = zstd::bulk::compress(&crate::codec::encode(&head)?, 1)?;
    w.write_all(MAGIC)?;
    w.write_all(&(head.len() as u64).to_le_bytes())?;
    w.write_all(&head)?;
    w.write_all(&zstd::bulk::compress(&b.0, 1)?)
}

fn not_a_slice(path: &Path, why: &str) -> Error {
    Error::bad(
        Location::file(path),
        format!(
            "not a rollstat input slice ({why}); give the files `rollstat shard --inputs` or `rollstat join` wrote"
        ),
    )
}

/// Reads an input slice's header only.
pub fn read_head(path: &Path) -> Result<Head> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    let len = f.metadata().map_err(|e| Error::read(path, e))?.len();
    let (head, _) = head_of(path, &mut f, usize::try_from(len).unwrap_or(usize::MAX))?;
    Ok(head)
}

/// The header of the slice `f` is open on, read from its start, and its compressed size.
/// `limit` bounds the compressed header's stated size (the file's size).
fn head_of(path: &Path, f: &mut impl Read, limit: usize) -> Result<(Head, usize)> {
    let mut fixed = [0u8; 24];
    f.read_exact(&mut fixed).map_err(|_| not_a_slice(path, "cut short"))?;
    if fixed[..15] == MAGIC[..15] && fixed[15] != MAGIC[15] {
        return Err(not_a_slice(path, "written by another version of rollstat; shard the inputs again"));
    }
    if &fixed[..16] != MAGIC {
        return Err(not_a_slice(path, "no input slice header"));
    }
    let n = u64::from_le_bytes(fixed[16..].try_into().expect("8 bytes"));
    let n = usize::try_from(n).ok().filter(|&n| n <= limit).ok_or_else(|| not_a_slice(path, "damaged header"))?;
    let mut packed = vec![0u8; n];
    f.read_exact(&mut packed).map_err(|_| not_a_slice(path, "cut short"))?;
    // No header decompresses to more than 256 bytes a byte.
    let cap = n.saturating_mul(256).min(1 << 30);
    let data = zstd::bulk::decompress(&packed, cap).map_err(|_| not_a_slice(path, "its header does not decompress"))?;
    let head = parse_head(&data).ok_or_else(|| not_a_slice(path, "damaged header"))?;
    Ok((head, n))
}

fn parse_head(data: &[u8]) -> Option<Head> {
    let head: Head = crate::codec::decode_all(data)?;
    // Every name id a pair holds must name something of this slice.
    let ok = |v: u32| v == NONE || (v as usize) < head.names.len();
    (head.task_width >= 1 && head.pairs.iter().all(|&(s, a, _)| ok(s) && ok(a))).then_some(head)
}

/// Reads an input slice as a table of its rows (named after the inputs file).
pub fn read_input_slice(path: &Path) -> Result<(Head, InputTable)> {
    let bytes = std::fs::read(path).map_err(|e| Error::read(path, e))?;
    let mut at = bytes.as_slice();
    let (head, n) = head_of(path, &mut at, bytes.len())?;
    let body = &bytes[24 + n..];
    let stated = zstd::zstd_safe::get_frame_content_size(body).ok().flatten();
    let want = usize::try_from(head.rows).ok().and_then(|r| r.checked_mul(ROW));
    if stated.is_some_and(|s| Some(s) != want.map(|w| w as u64)) {
        return Err(not_a_slice(path, "its rows do not match its header"));
    }
    let data = want
        .filter(|&w| w <= body.len().saturating_mul(256))
        .ok_or_else(|| not_a_slice(path, "damaged header"))
        .and_then(|w| zstd::bulk::decompress(body, w).map_err(|_| not_a_slice(path, "its rows do not decompress")))?;
    if Some(data.len()) != want {
        return Err(not_a_slice(path, "its rows do not match its header"));
    }
    let rows = head.rows as usize;
    let mut t = InputTable { path: head.inputs.clone(), names: head.names.clone(), ..Default::default() };
    t.reserve_exact(rows);
    let ok = |v: u32| v == NONE || (v as usize) < head.names.len();
    for r in data.chunks_exact(ROW) {
        let u64_at = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(r[i..i + 4].try_into().expect("4 bytes"));
        let (agent, server) = (u32_at(24), u32_at(28));
        let (offset, len) = (u64_at(32), u32_at(40));
        let inside = offset.checked_add(u64::from(len)).is_some_and(|end| end <= head.size);
        if !ok(agent) || !ok(server) || !inside {
            return Err(not_a_slice(path, "damaged rows"));
        }
        t.task.push(u64_at(0) as i64);
        t.rollout.push(u64_at(8) as i64);
        t.line.push(u64_at(16));
        t.agent.push(agent);
        t.server.push(server);
        t.offset.push(offset);
        t.len.push(len);
    }
    Ok((head, t))
}

/// Joins tables of one inputs file (read from its slices) into one, in line order.
/// A line found twice means a slice was given twice, or two overlapping ranges were
/// sharded: refused, naming the line.
pub fn join_tables(inputs: &Path, parts: Vec<(PathBuf, InputTable)>) -> Result<InputTable> {
    let mut t = InputTable { path: inputs.to_path_buf(), ..Default::default() };
    let n: usize = parts.iter().map(|(_, p)| p.len()).sum();
    t.reserve_exact(n);
    // Where each line came from, to name both slices of a line given twice.
    let mut from: Vec<u32> = Vec::with_capacity(n);
    let mut ids: HashMap<String, u32> = HashMap::new();
    for (k, (_, p)) in parts.iter().enumerate() {
        let map: Vec<u32> = p
            .names
            .iter()
            .map(|s| {
                let next = t.names.len() as u32;
                *ids.entry(s.clone()).or_insert_with(|| {
                    t.names.push(s.clone());
                    next
                })
            })
            .collect();
        let re = |v: u32| if v == NONE { NONE } else { map[v as usize] };
        t.task.extend_from_slice(&p.task);
        t.rollout.extend_from_slice(&p.rollout);
        t.line.extend_from_slice(&p.line);
        t.agent.extend(p.agent.iter().map(|&v| re(v)));
        t.server.extend(p.server.iter().map(|&v| re(v)));
        t.offset.extend_from_slice(&p.offset);
        t.len.extend_from_slice(&p.len);
        from.extend(std::iter::repeat_n(k as u32, p.len()));
    }
    if t.line.windows(2).all(|w| w[0] < w[1]) {
        return Ok(t);
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| t.line[i]);
    if let Some(w) = order.windows(2).find(|w| t.line[w[0]] == t.line[w[1]]) {
        let (a, b) = (&parts[from[w[0]] as usize].0, &parts[from[w[1]] as usize].0);
        return Err(Error::bad(
            Location::line(inputs, t.line[w[0]]),
            format!(
                "this input row is in two input slices ({} and {}); give each slice once, sharded from byte ranges that do not overlap",
                a.display(),
                b.display()
            ),
        ));
    }
    Ok(t.subset(&order))
}

/// A sweep's inputs as slices: the headers of every slice, read up front, and the
/// slices of each bucket, read when a bucket of rollouts needs them.
#[derive(Debug)]
pub struct SlicedInputs {
    /// The inputs file the slices came from.
    pub path: PathBuf,
    pub task_width: i64,
    /// The inputs file's size when it was sharded.
    pub size: u64,
    buckets: BTreeMap<i64, Vec<PathBuf>>,
    /// Every (server, agent) pair of the file with its first line, in line order.
    pairs: Vec<(Option<String>, Option<String>)>,
    warnings: Vec<String>,
    /// Per shard run (byte range): the rows it found, the rows the slices given hold of
    /// them, and the buckets they hold (a bucket twice: a slice given twice).
    shards: BTreeMap<(u64, u64), (u64, u64, Vec<i64>)>,
}

impl SlicedInputs {
    /// Reads the headers of `paths`, which must come from one inputs file sharded with
    /// one task width.
    pub fn open(paths: &[PathBuf]) -> Result<SlicedInputs> {
        let mut out: Option<SlicedInputs> = None;
        let mut firsts: HashMap<(Option<String>, Option<String>), u64> = HashMap::new();
        for p in paths {
            let h = read_head(p)?;
            let s = out.get_or_insert_with(|| SlicedInputs {
                path: h.inputs.clone(),
                task_width: h.task_width,
                size: h.size,
                buckets: BTreeMap::new(),
                pairs: Vec::new(),
                warnings: Vec::new(),
                shards: BTreeMap::new(),
            });
            for part in &h.parts {
                let e = s.shards.entry((part.start, part.end)).or_insert((part.rows, 0, Vec::new()));
                e.1 += part.here;
                e.2.push(h.bucket);
            }
            for m in &h.warnings {
                if !s.warnings.contains(m) {
                    s.warnings.push(m.clone());
                }
            }
            if h.inputs != s.path || h.task_width != s.task_width || h.size != s.size {
                return Err(Error::bad(
                    Location::file(p),
                    format!(
                        "this input slice comes from {} ({} bytes) sharded with --task-width {}, another from {} \
                         ({} bytes) with --task-width {}; give the slices of one inputs file, sharded with one width",
                        h.inputs.display(),
                        h.size,
                        h.task_width,
                        s.path.display(),
                        s.size,
                        s.task_width
                    ),
                ));
            }
            s.buckets.entry(h.bucket).or_default().push(p.clone());
            let name = |v: u32| (v != NONE).then(|| h.names[v as usize].clone());
            for &(sv, ag, line) in &h.pairs {
                let e = firsts.entry((name(sv), name(ag))).or_insert(line);
                *e = (*e).min(line);
            }
        }
        let mut s = out.ok_or_else(|| Error::Usage("no input slices given".into()))?;
        let mut pairs: Vec<_> = firsts.into_iter().collect();
        pairs.sort_by_key(|(_, line)| *line);
        s.pairs = pairs.into_iter().map(|(p, _)| p).collect();
        Ok(s)
    }

    /// Run labels over the whole inputs file, as [`super::labels::labels_for`] gives them
    /// from its rows: only the first row of each (server, agent) pair counts there.
    pub fn labels(&self) -> HashMap<String, String> {
        super::labels::labels_for(self.pairs.iter().map(|(s, a)| (s.as_deref(), a.as_deref())))
    }

    /// The input rows of the tasks after `after` up to `upto` (both included when
    /// given; `None`: no bound), in line order.
    pub fn for_range(&self, after: Option<i64>, upto: Option<i64>) -> Result<InputTable> {
        let Some((lo, hi)) = self.bucket_span(after, upto) else { return self.read(&[]) };
        let paths: Vec<&PathBuf> = self.buckets.range(lo..=hi).flat_map(|(_, v)| v).collect();
        let t = self.read(&paths)?;
        let inside = |task: i64| after.is_none_or(|a| task > a) && upto.is_none_or(|b| task <= b);
        if (0..t.len()).all(|r| inside(t.task[r])) {
            return Ok(t);
        }
        let rows: Vec<usize> = (0..t.len()).filter(|&r| inside(t.task[r])).collect();
        Ok(t.subset(&rows))
    }

    /// The input buckets that may hold tasks after `after` up to `upto`, as a range of
    /// bucket numbers; `None` when there are no such tasks.
    fn bucket_span(&self, after: Option<i64>, upto: Option<i64>) -> Option<(i64, i64)> {
        let w = self.task_width;
        // The range's first task is after + 1: the bucket holding `after` is not read.
        let lo = match after {
            None => i64::MIN,
            Some(a) => a.checked_add(1)?.div_euclid(w),
        };
        let hi = upto.map_or(i64::MAX, |b| b.div_euclid(w));
        (lo <= hi).then_some((lo, hi))
    }

    /// Tasks after `after` up to `upto` cut at the input buckets' bounds, one range per
    /// input bucket that has rows there: what a pass reads one at a time.
    pub fn cut(&self, after: Option<i64>, upto: Option<i64>) -> Vec<(Option<i64>, Option<i64>)> {
        let Some((lo, hi)) = self.bucket_span(after, upto) else { return Vec::new() };
        let w = i128::from(self.task_width);
        let task = |x: i128| i64::try_from(x).ok();
        self.buckets
            .range(lo..=hi)
            .map(|(&b, _)| {
                let first_before = task(i128::from(b) * w - 1).filter(|_| b != lo || after.is_some());
                let a = match (after, first_before) {
                    (Some(a), Some(f)) => Some(a.max(f)),
                    (x, y) => x.or(y),
                };
                let last = task((i128::from(b) + 1) * w - 1);
                let z = match (upto, last) {
                    (Some(u), Some(l)) => Some(u.min(l)),
                    (x, y) => x.or(y),
                };
                (a, z)
            })
            .filter(|r| !matches!(*r, (Some(a), Some(z)) if a >= z))
            .collect()
    }

    /// Whether the slices given hold every row of the shards they come from, and those
    /// shards read the whole file: a bucket's slice left out is refused (its rollouts
    /// would lose their input rows); bytes of the file no given slice came from are a
    /// warning (a range with no input row writes no slice). A slice given twice is left
    /// to the reading, which names its rows' line.
    pub fn check_complete(&self) -> Result<Vec<String>> {
        if self.shards.values().any(|(_, _, b)| (1..b.len()).any(|i| b[..i].contains(&b[i]))) {
            return Ok(Vec::new());
        }
        for (&(start, end), &(rows, given, _)) in &self.shards {
            if given < rows {
                return Err(Error::bad(
                    Location::file(&self.path),
                    format!(
                        "the input slices given hold {given} of the {rows} input rows that `shard --inputs` found in \
                         bytes {start}..{end}: give every input slice of the shard (or every bucket's joined slices)"
                    ),
                ));
            }
        }
        let mut at = 0;
        let mut gaps = Vec::new();
        for &(start, end) in self.shards.keys() {
            if start > at {
                gaps.push(format!("{at}..{start}"));
            }
            at = at.max(end);
        }
        if at < self.size {
            gaps.push(format!("{at}..{}", self.size));
        }
        Ok(match gaps.is_empty() {
            true => Vec::new(),
            false => vec![format!(
                "{}: no input slice given comes from bytes {} of the file; unless their shards found no input row, \
                 give their input slices too",
                self.path.display(),
                gaps.join(", ")
            )],
        })
    }

    /// The shard runs the slices come from, with how many rows the slices hold of each.
    pub fn parts(&self) -> Vec<ShardPart> {
        self.shards.iter().map(|(&(start, end), &(rows, here, _))| ShardPart { start, end, rows, here }).collect()
    }

    /// The inputs file's read warnings, as the slices repeat them (each once).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Every input row, in line order, as reading the inputs file gives them (with its
    /// read warnings).
    pub fn whole(&self) -> Result<InputTable> {
        let paths: Vec<&PathBuf> = self.buckets.values().flatten().collect();
        let mut t = self.read(&paths)?;
        t.report.warnings = self.warnings.clone();
        Ok(t)
    }

    fn read(&self, paths: &[&PathBuf]) -> Result<InputTable> {
        let mut parts = Vec::with_capacity(paths.len());
        for p in paths {
            parts.push(((*p).clone(), read_input_slice(p)?.1));
        }
        if parts.len() == 1 {
            return Ok(parts.pop().expect("one part").1);
        }
        // No part (a bucket of tasks the inputs do not hold) joins to an empty table.
        join_tables(&self.path, parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> InputTable {
        InputTable {
            path: PathBuf::from("in.jsonl"),
            task: vec![0, 0, 1, 1, 2, 2],
            rollout: vec![0, 1, 0, 1, 0, 1],
            line: vec![1, 2, 3, 4, 6, 7],
            agent: vec![0, 1, 0, 1, 0, NONE],
            server: vec![NONE, 2, NONE, 2, NONE, NONE],
            names: vec!["a".into(), "b".into(), "s".into()],
            offset: vec![0, 10, 20, 30, 45, 55],
            len: vec![9, 9, 9, 9, 9, 9],
            ..Default::default()
        }
    }

    fn same(a: &InputTable, b: &InputTable) {
        assert_eq!(a.path, b.path);
        assert_eq!((&a.task, &a.rollout, &a.line), (&b.task, &b.rollout, &b.line));
        assert_eq!((&a.offset, &a.len), (&b.offset, &b.len));
        let names = |t: &InputTable, v: &[u32]| v.iter().map(|&x| t.name(x).map(str::to_string)).collect::<Vec<_>>();
        assert_eq!(names(a, &a.agent), names(b, &b.agent));
        assert_eq!(names(a, &a.server), names(b, &b.server));
    }

    #[test]
    fn slices_read_back_and_join_in_line_order() {
        let t = table();
        let dir = std::env::temp_dir().join(format!("rollstat-islice-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut paths = Vec::new();
        // Written out of line order, one row per slice for the last bucket.
        for (k, rows) in [vec![4usize], vec![0, 1, 2, 3], vec![5]].into_iter().enumerate() {
            let p = dir.join(format!("i{k}.slice"));
            let mut f = std::fs::File::create(&p).unwrap();
            let bucket = t.task[rows[0]].div_euclid(2);
            let part = ShardPart { start: 0, end: 100, rows: 6, here: rows.len() as u64 };
            write_input_slice(&t, &rows, (2, bucket), 100, &[part], &mut f).unwrap();
            paths.push(p);
        }
        assert!(is_input_slice(&paths[0]));
        let s = SlicedInputs::open(&paths).unwrap();
        same(&s.whole().unwrap(), &t);
        assert_eq!(s.check_complete().unwrap(), Vec::<String>::new());
        // A bucket left out is refused; bytes no slice came from are a warning.
        let e = SlicedInputs::open(&paths[..2]).unwrap().check_complete().unwrap_err().to_string();
        assert!(e.contains("hold 5 of the 6 input rows"), "{e}");
        let first = s.for_range(Some(-1), Some(1)).unwrap();
        assert_eq!(first.task, vec![0, 0, 1, 1]);
        assert_eq!(s.for_range(Some(1), Some(2)).unwrap().line, vec![6, 7]);
        assert_eq!(s.for_range(Some(3), Some(9)).unwrap().len(), 0);
        // Cut at the input buckets' bounds, the ranges read every row once.
        for (after, upto) in [(None, None), (Some(0), None), (None, Some(1)), (Some(-5), Some(2)), (Some(1), Some(1))] {
            let mut got: Vec<u64> = Vec::new();
            for (a, z) in s.cut(after, upto) {
                got.extend(s.for_range(a, z).unwrap().line);
            }
            got.sort_unstable();
            assert_eq!(got, s.for_range(after, upto).unwrap().line, "{after:?}..{upto:?}");
        }
        assert_eq!(s.cut(None, None).len(), 2);
        assert_eq!(s.for_range(Some(1), None).unwrap().task, vec![2, 2]);
        assert_eq!(s.labels(), super::super::labels::input_labels(&t));
        // A slice given twice names the line and both files.
        let twice = SlicedInputs::open(&[paths[1].clone(), paths[1].clone()]).unwrap();
        let e = twice.whole().unwrap_err().to_string();
        assert!(e.contains("in.jsonl, line 1") && e.contains("two input slices"), "{e}");
        // A damaged slice is refused, not read.
        let bytes = std::fs::read(&paths[1]).unwrap();
        let cut = dir.join("cut.slice");
        std::fs::write(&cut, &bytes[..bytes.len() - 3]).unwrap();
        assert!(read_input_slice(&cut).is_err());
        std::fs::write(&cut, &bytes[..20]).unwrap();
        assert!(read_head(&cut).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Damaged slices, whether their compressed bytes or the data inside are changed
    /// (bytes flipped, cut short, grown), are read or refused, never a panic.
    #[test]
    fn damaged_slices_are_refused_or_read_never_a_panic() {
        let t = table();
        let mut good = Vec::new();
        let part = ShardPart { start: 0, end: 100, rows: 6, here: 6 };
        write_input_slice(&t, &[0, 1, 2, 3, 4, 5], (2, 0), 100, &[part], &mut good).unwrap();
        let n = u64::from_le_bytes(good[16..24].try_into().unwrap()) as usize;
        let head = zstd::decode_all(&good[24..24 + n]).unwrap();
        let rows = zstd::decode_all(&good[24 + n..]).unwrap();
        let pack = |head: &[u8], rows: &[u8]| {
            let h = zstd::bulk::compress(head, 1).unwrap();
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&(h.len() as u64).to_le_bytes());
            b.extend_from_slice(&h);
            b.extend_from_slice(&zstd::bulk::compress(rows, 1).unwrap());
            b
        };
        assert_eq!(pack(&head, &rows), good);
        let dir = std::env::temp_dir().join(format!("rollstat-islice-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("i.slice");
        let mut state = 0x243F_6A88_85A3_08D3u64;
        let mut pick = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n.max(1) as u64) as usize
        };
        let (mut read, mut refused) = (0, 0);
        for seed in 0..600 {
            let mut parts = [head.clone(), rows.clone(), good.clone()];
            let which = seed % 3;
            let b = &mut parts[which];
            match (seed / 3) % 4 {
                0 => b.truncate(pick(b.len())),
                1 => b.extend((0..1 + pick(16)).map(|_| pick(256) as u8)),
                _ => {
                    for _ in 0..1 + pick(3) {
                        let i = pick(b.len());
                        b[i] = pick(256) as u8;
                    }
                }
            }
            let bytes = if which == 2 { parts[2].clone() } else { pack(&parts[0], &parts[1]) };
            std::fs::write(&path, &bytes).unwrap();
            match read_input_slice(&path) {
                Ok((_, t)) => {
                    read += 1;
                    let s = SlicedInputs::open(std::slice::from_ref(&path)).unwrap();
                    let whole = s.whole().unwrap();
                    assert_eq!(whole.len(), t.len());
                    let _ = s.labels();
                }
                Err(e) => {
                    refused += 1;
                    assert!(e.to_string().contains("i.slice"), "{e}");
                }
            }
        }
        assert!(read > 0 && refused > 0, "{read} read, {refused} refused");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
