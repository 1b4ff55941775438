//! Table slices: some rows of a [`RolloutTable`] (one bucket of tasks) saved to a file
//! with everything the statistics read — indexes, names, each row's key order, every
//! scalar column bit for bit — and the file and line each row came from. Slices of
//! disjoint rows read back as one table that equals, row for row and value for value,
//! the table read from the rollouts files concatenated in the order the slices name.
//!
//! The format is private to rollstat (the `shard`, `join` and `merge` commands write
//! and read it; nothing else should): a fixed header, then little-endian lengths and
//! values, zstd-compressed as a whole.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::lines::LineMap;
use super::rollouts::{sort_order, NONE, SEP};
use super::table::{tag, Column, Interner, Source};
use super::RolloutTable;
use crate::codec::{Dec, Enc};
use crate::error::{Error, Location, Result};

/// Version 2 added each row's task fingerprint; version 3 the rows and task span,
/// uncompressed after the magic.
const MAGIC: &[u8; 16] = b"rollstat-slice\x00\x03";
/// The magic's first bytes, the same in every version.
const MAGIC_STEM: &[u8; 15] = b"rollstat-slice\x00";
/// The magic and the span: rows, first task, last task.
const HEAD: usize = 16 + 24;

/// Writes rows `rows` of `t` (in table order) as a slice.
pub fn write_slice(t: &RolloutTable, rows: &[usize], w: &mut impl Write) -> std::io::Result<()> {
    let mut e = Enc(Vec::with_capacity(rows.len() * (64 + 9 * t.columns.len())));
    let files = t.lines.files();
    e.u64(files.len() as u64);
    for f in files {
        e.str(&f.to_string_lossy());
    }
    e.u8(u8::from(t.has_response));
    e.u64(rows.len() as u64);
    let fingerprints = t.fingerprints();
    for &r in rows {
        let (file, line) = LineMap::split(t.line[r]);
        e.u64(t.task[r] as u64);
        e.u64(t.rollout[r] as u64);
        e.u64(line);
        e.u32(file as u32);
        e.u8(u8::from(t.masked[r]) | (u8::from(t.perf[r]) << 1));
        e.u32(t.agent[r]);
        e.u32(t.server[r]);
        e.u32(t.order[r]);
        e.u64(fingerprints[r]);
    }
    e.u64(t.names.len() as u64);
    for n in &t.names {
        e.str(n);
    }
    e.u64(t.orders.len() as u64);
    for seq in &t.orders {
        e.u64(seq.len() as u64);
        for &c in seq {
            e.u32(c);
        }
    }
    e.u64(t.columns.len() as u64);
    for c in &t.columns {
        e.u8(c.source as u8);
        e.str(&c.name);
        e.u8(u8::from(!c.codes.is_empty()));
        for &r in rows {
            e.u8(c.tags[r]);
            e.u64(c.nums[r].to_bits());
            if !c.codes.is_empty() {
                e.u32(c.codes[r]);
            }
        }
        e.u64(c.dict.len() as u64);
        for s in &c.dict {
            e.str(s);
        }
    }
    let span = |f: fn(i64, i64) -> i64| rows.iter().map(|&r| t.task[r]).reduce(f).unwrap_or(0);
    w.write_all(MAGIC)?;
    w.write_all(&(rows.len() as u64).to_le_bytes())?;
    w.write_all(&span(i64::min).to_le_bytes())?;
    w.write_all(&span(i64::max).to_le_bytes())?;
    w.write_all(&zstd::bulk::compress(&e.0, 1)?)
}

/// Reads slices into one table: rows in (task, rollout) order, ties in the order of the
/// slices and then of their rows (the order of the rollouts files they came from).
/// `name` is the table's path in messages that name no row.
pub fn read_slices(paths: &[PathBuf], name: &Path) -> Result<RolloutTable> {
    let mut t = RolloutTable::empty(LineMap::default());
    // Slices carry every row's fingerprint.
    t.read.fingerprints = true;
    let mut names = crate::ingest::rollouts::Names::default();
    let mut orders = Interner::default();
    let mut lines = LineMap::default();
    let mut any_response = false;
    let mut col_index: std::collections::HashMap<(Source, String), usize> = Default::default();
    let mut dicts: Vec<std::collections::HashMap<String, u32>> = Vec::new();
    // Every column sized once for all the slices' rows: growing them slice by slice
    // would copy the sweep's table about once more and hold two copies at the peak.
    let total: usize = paths.iter().map(|p| span(p).map_or(0, |s| s.rows)).sum();
    t.task.reserve_exact(total);
    t.rollout.reserve_exact(total);
    t.line.reserve_exact(total);
    t.masked.reserve_exact(total);
    t.perf.reserve_exact(total);
    t.fingerprint.reserve_exact(total);
    t.agent.reserve_exact(total);
    t.server.reserve_exact(total);
    t.order.reserve_exact(total);
    for path in paths {
        let bytes = std::fs::read(path).map_err(|e| Error::read(path, e))?;
        t.report.bytes += bytes.len() as u64;
        let s = decode(path, &bytes)?;
        let base = t.task.len();
        any_response |= s.has_response;
        let file_map: Vec<usize> = s.files.iter().map(|f| lines.file(f)).collect();
        let name_map: Vec<u32> = s.names.iter().map(|n| names.get(n)).collect();
        let name_of = |v: u32| if v == NONE { NONE } else { name_map[v as usize] };
        let col_map: Vec<usize> = s
            .columns
            .iter()
            .map(|c| {
                *col_index.entry((c.source, c.name.clone())).or_insert_with(|| {
                    let mut n = Column::new(c.source, c.name.clone());
                    n.tags = Vec::with_capacity(total.max(base));
                    n.tags.resize(base, tag::ABSENT);
                    n.nums = Vec::with_capacity(total.max(base));
                    n.nums.resize(base, 0.0);
                    t.columns.push(n);
                    dicts.push(Default::default());
                    t.columns.len() - 1
                })
            })
            .collect();
        let order_map: Vec<u32> = s
            .orders
            .iter()
            .map(|seq| {
                let g: Vec<u32> =
                    seq.iter().map(|&c| if c == SEP { SEP } else { col_map[c as usize] as u32 }).collect();
                orders.intern(&g)
            })
            .collect();
        for row in &s.rows {
            t.task.push(row.task);
            t.rollout.push(row.rollout);
            t.line.push(LineMap::number(file_map[row.origin as usize], row.line));
            t.masked.push(row.masked);
            t.perf.push(row.perf);
            t.fingerprint.push(row.fingerprint);
            t.agent.push(name_of(row.agent));
            t.server.push(name_of(row.server));
            t.order.push(order_map[row.order as usize]);
        }
        append_columns(&mut t, &s.columns, &col_map, &mut dicts, (base, total.max(base)));
    }
    t.names = names.list;
    t.orders = orders.seqs;
    t.has_response |= any_response;
    t.lines = lines;
    t.path = name.to_path_buf();
    t.report.lines = t.task.len() as u64;
    // Partials in bucket order are already in (task, rollout) order: nothing to sort.
    let sorted = (1..t.task.len()).all(|i| (t.task[i - 1], t.rollout[i - 1]) <= (t.task[i], t.rollout[i]));
    if !sorted {
        let perm = sort_order(&t.task, &t.rollout);
        t.reorder(&perm);
    }
    if t.is_empty() {
        return Err(Error::bad(Location::file(name), "no rollout rows in the given slices"));
    }
    Ok(t)
}

/// Appends one slice's columns (`cols`, each going to table column `col_map[k]`, its
/// strings recoded through `dicts`) to the rows just added to `t` from row `base` on;
/// columns the slice lacks are absent in its rows. `cap`: the rows every column is
/// sized for.
fn append_columns(
    t: &mut RolloutTable,
    cols: &[Column],
    col_map: &[usize],
    dicts: &mut [std::collections::HashMap<String, u32>],
    (base, cap): (usize, usize),
) {
    let n = t.task.len();
    for (c, &g) in cols.iter().zip(col_map) {
        let out = &mut t.columns[g];
        let code_map: Vec<u32> = c
            .dict
            .iter()
            .map(|s| {
                *dicts[g].entry(s.clone()).or_insert_with(|| {
                    out.dict.push(s.clone());
                    (out.dict.len() - 1) as u32
                })
            })
            .collect();
        // Codes once any slice's rows of the column held a kept string; the first
        // slice to hold one may be the first of all (its codes then start empty).
        let coded = !out.codes.is_empty() || !c.codes.is_empty();
        if !c.codes.is_empty() && out.codes.is_empty() {
            out.codes = Vec::with_capacity(cap);
            out.codes.resize(base, u32::MAX);
        }
        out.tags.extend_from_slice(&c.tags);
        out.nums.extend_from_slice(&c.nums);
        if coded {
            match c.codes.is_empty() {
                true => out.codes.resize(n, u32::MAX),
                false => {
                    out.codes.extend(c.codes.iter().map(|&k| if k == u32::MAX { k } else { code_map[k as usize] }))
                }
            }
        }
    }
    // Columns this slice lacks: absent in its rows.
    for c in t.columns.iter_mut().filter(|c| c.tags.len() < n) {
        c.tags.resize(n, tag::ABSENT);
        c.nums.resize(n, 0.0);
        if !c.codes.is_empty() {
            c.codes.resize(n, u32::MAX);
        }
    }
}

struct SliceRow {
    task: i64,
    rollout: i64,
    line: u64,
    origin: u32,
    masked: bool,
    perf: bool,
    agent: u32,
    server: u32,
    order: u32,
    fingerprint: u64,
}

struct Slice {
    files: Vec<PathBuf>,
    /// Whether a row of the file had a `response`.
    has_response: bool,
    rows: Vec<SliceRow>,
    names: Vec<String>,
    orders: Vec<Vec<u32>>,
    columns: Vec<Column>,
}

/// What a slice's head says: its rows and the least and greatest task among them
/// (0 and 0 for no rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub rows: usize,
    pub first: i64,
    pub last: i64,
}

/// The refusal of a file that is not a slice (`why`: what is wrong with it).
fn not_a_slice(path: &Path, why: &str) -> Error {
    Error::bad(
        Location::file(path),
        format!("not a rollstat slice ({why}); give the files `rollstat shard` or `rollstat join` wrote"),
    )
}

/// Reads a slice's head, refused as [`read_slices`] refuses the file when it is not a
/// slice of this version.
fn head(path: &Path, bytes: &[u8]) -> Result<Span> {
    let bad = |why: &str| not_a_slice(path, why);
    match bytes.get(..16) {
        Some(m) if m == MAGIC => {}
        Some(m) if m.starts_with(MAGIC_STEM) => {
            return Err(Error::bad(
                Location::file(path),
                "a slice of another rollstat version: shard the rollouts again with this one",
            ))
        }
        _ => return Err(bad("no slice header")),
    }
    let word = |k: usize| bytes.get(16 + 8 * k..24 + 8 * k).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    match (word(0), word(1), word(2)) {
        (Some(rows), Some(first), Some(last)) => {
            let rows = usize::try_from(rows).map_err(|_| bad("cut short or damaged"))?;
            Ok(Span { rows, first: first as i64, last: last as i64 })
        }
        _ => Err(bad("cut short or damaged")),
    }
}

/// The head of the slice at `path`, read without its data: what `merge` plans by.
pub fn span(path: &Path) -> Result<Span> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(HEAD);
    let file = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    let size = file.metadata().map_err(|e| Error::read(path, e))?.len();
    file.take(HEAD as u64).read_to_end(&mut bytes).map_err(|e| Error::read(path, e))?;
    let mut s = head(path, &bytes)?;
    // Only a hint until the data is read: never more rows than the file could hold.
    s.rows = s.rows.min(usize::try_from(size).unwrap_or(usize::MAX).saturating_mul(MAX_RATIO));
    Ok(s)
}

fn decode(path: &Path, bytes: &[u8]) -> Result<Slice> {
    let bad = |why: &str| not_a_slice(path, why);
    let span = head(path, bytes)?;
    let body = &bytes[HEAD..];
    // The frame states its decompressed size: one allocation of that size, not a
    // buffer doubled (and copied) as the data arrives. A size beyond any real ratio is
    // not trusted.
    let stated = zstd::zstd_safe::get_frame_content_size(body).ok().flatten();
    let data = match stated.and_then(|n| usize::try_from(n).ok()) {
        Some(n) if n <= body.len().saturating_mul(MAX_RATIO) => zstd::bulk::decompress(body, n),
        _ => zstd::decode_all(body),
    }
    .map_err(|_| bad("its data does not decompress"))?;
    let s = parse(&data).ok_or_else(|| bad("cut short or damaged"))?;
    // The head must say what the data holds: the merge plans by it.
    let tasks = || s.rows.iter().map(|r| r.task);
    let own = Span { rows: s.rows.len(), first: tasks().min().unwrap_or(0), last: tasks().max().unwrap_or(0) };
    match own == span {
        true => Ok(s),
        false => Err(bad("its head does not match its rows")),
    }
}

/// The most decompressed bytes per compressed byte a slice is trusted to state before
/// its data is read (real slices hold about 10 bytes per byte).
const MAX_RATIO: usize = 256;

fn parse(data: &[u8]) -> Option<Slice> {
    let mut d = Dec { b: data, at: 0 };
    // The rollouts files its rows came from, and whether any row had a `response`.
    let files = (0..d.len(8)?).map(|_| d.str().map(PathBuf::from)).collect::<Option<Vec<_>>>()?;
    let has_response = d.u8()? == 1;
    let n = d.len(45)?;
    let mut rows = Vec::with_capacity(n);
    for _ in 0..n {
        let (task, rollout, line, origin) = (d.u64()? as i64, d.u64()? as i64, d.u64()?, d.u32()?);
        let flags = d.u8()?;
        let (agent, server, order) = (d.u32()?, d.u32()?, d.u32()?);
        let fingerprint = d.u64()?;
        if origin as usize >= files.len() {
            return None;
        }
        rows.push(SliceRow {
            task,
            rollout,
            line,
            origin,
            masked: flags & 1 != 0,
            perf: flags & 2 != 0,
            agent,
            server,
            order,
            fingerprint,
        });
    }
    let names = (0..d.len(8)?).map(|_| d.str()).collect::<Option<Vec<_>>>()?;
    let mut orders = Vec::new();
    for _ in 0..d.len(8)? {
        orders.push((0..d.len(4)?).map(|_| d.u32()).collect::<Option<Vec<_>>>()?);
    }
    let mut columns = Vec::new();
    for _ in 0..d.len(10)? {
        let source = match d.u8()? {
            0 => Source::Top,
            1 => Source::Usage,
            2 => Source::Perf,
            _ => return None,
        };
        let mut c = Column::new(source, d.str()?);
        let coded = d.u8()? != 0;
        c.tags.reserve_exact(n);
        c.nums.reserve_exact(n);
        if coded {
            c.codes.reserve_exact(n);
        }
        for _ in 0..n {
            c.tags.push(d.u8()?);
            c.nums.push(f64::from_bits(d.u64()?));
            if coded {
                c.codes.push(d.u32()?);
            }
        }
        c.dict = (0..d.len(8)?).map(|_| d.str()).collect::<Option<Vec<_>>>()?;
        if c.codes.iter().any(|&k| k != u32::MAX && k as usize >= c.dict.len()) {
            return None;
        }
        columns.push(c);
    }
    // Every id a row holds must name something of this slice.
    let ok = |v: u32| v == NONE || (v as usize) < names.len();
    let cols_ok = orders.iter().flatten().all(|&c| c == SEP || (c as usize) < columns.len());
    let rows_ok = rows.iter().all(|r| ok(r.agent) && ok(r.server) && (r.order as usize) < orders.len());
    (d.at == data.len() && cols_ok && rows_ok).then_some(Slice { files, has_response, rows, names, orders, columns })
}

impl RolloutTable {
    /// A table without rows, read from the files of `lines`.
    pub fn empty(lines: LineMap) -> RolloutTable {
        RolloutTable { path: lines.files().first().cloned().unwrap_or_default(), lines, ..Default::default() }
    }

    /// Puts row `perm[i]` at row `i`.
    fn reorder(&mut self, perm: &[u32]) {
        fn gather<T: Copy>(v: &mut Vec<T>, perm: &[u32]) {
            *v = perm.iter().map(|&i| v[i as usize]).collect();
        }
        gather(&mut self.task, perm);
        gather(&mut self.rollout, perm);
        gather(&mut self.line, perm);
        gather(&mut self.masked, perm);
        gather(&mut self.perf, perm);
        gather(&mut self.fingerprint, perm);
        gather(&mut self.agent, perm);
        gather(&mut self.server, perm);
        gather(&mut self.order, perm);
        for c in &mut self.columns {
            gather(&mut c.tags, perm);
            gather(&mut c.nums, perm);
            if !c.codes.is_empty() {
                gather(&mut c.codes, perm);
            }
        }
    }
}
