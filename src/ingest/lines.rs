//! Parallel, bounded-memory reading of a JSONL file.
//!
//! The file is memory-mapped (no copy through a read buffer) and cut at line boundaries
//! into pieces of a few MB that are parsed in parallel with rayon. A piece's parser walks
//! its own lines, numbered from 1 within the piece; the numbers before each piece are
//! known only once every earlier piece is done, so results come back with their base
//! and callers add it. Pages of a parsed piece are dropped from the mapping at once, so
//! resident memory follows what the parsers keep, not the size of the file. Files that
//! cannot be mapped (pipes) are read in newline-aligned blocks of [`BLOCK`] bytes.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rayon::prelude::*;

use crate::error::{Error, Location, Result};

/// Target size of one piece.
const PIECE: usize = 8 << 20;
/// Block size when a file cannot be mapped and is read in blocks (a pipe).
const BLOCK: usize = 64 << 20;

/// One line handed to a piece parser.
pub struct Line<'a> {
    /// The bytes without the trailing newline (and without a trailing `\r`).
    pub bytes: &'a [u8],
    /// 1-based line number within the piece; add the piece's base for the file's.
    pub number: u64,
    /// Byte offset of the line's first byte in the file.
    pub offset: u64,
    /// True for the file's last line when it has no trailing newline (a cut-off write).
    pub unterminated: bool,
}

/// The non-blank lines of one piece, in order.
pub struct PieceLines<'a> {
    data: &'a [u8],
    pos: usize,
    number: u64,
    /// File offset of `data[0]`.
    offset: u64,
    /// Whether the piece ends the file.
    last: bool,
}

impl<'a> PieceLines<'a> {
    fn new(data: &'a [u8], offset: u64, last: bool) -> Self {
        PieceLines { data, pos: 0, number: 0, offset, last }
    }
    /// Lines seen so far (blank ones included).
    pub fn seen(&self) -> u64 {
        self.number
    }
    /// The lines still to come, estimated from the length of those seen so far (and at
    /// most one per 32 bytes left: a rollout line is longer than that).
    pub fn remaining_estimate(&self) -> usize {
        if self.pos == 0 {
            return 0;
        }
        let left = self.data.len() - self.pos;
        let est = (left as f64 * self.number as f64 / self.pos as f64).ceil() as usize;
        est.min(left / 32)
    }
}

impl<'a> Iterator for PieceLines<'a> {
    type Item = Line<'a>;
    #[inline]
    fn next(&mut self) -> Option<Line<'a>> {
        let d = self.data;
        while self.pos < d.len() {
            let start = self.pos;
            let (raw, terminated) = match memchr::memchr(b'\n', &d[start..]) {
                Some(p) => {
                    self.pos = start + p + 1;
                    (&d[start..start + p], true)
                }
                None => {
                    self.pos = d.len();
                    (&d[start..], false)
                }
            };
            self.number += 1;
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.iter().all(|c| matches!(c, b' ' | b'\t' | b'\r')) {
                continue;
            }
            return Some(Line {
                bytes: raw,
                number: self.number,
                offset: self.offset + start as u64,
                unterminated: !terminated && self.last,
            });
        }
        None
    }
}

/// What a reader found besides the parsed results.
#[derive(Debug, Default, Clone)]
pub struct ReadReport {
    pub lines: u64,
    pub bytes: u64,
    /// Warnings to print (already phrased, one line each).
    pub warnings: Vec<String>,
}

/// Where the lines of a table read from several files came from. A row's line number
/// holds its file's index in the high bits ([`LineMap::number`]) and its line in that
/// file in the low ones, so that rows sorted by line number are in the order of the files
/// given, then of their lines; a table read from one file keeps plain line numbers.
#[derive(Debug, Clone, Default)]
pub struct LineMap {
    files: Vec<PathBuf>,
}

/// Bits of a line number that hold the line in its file (2^40 lines per file).
const LINE_BITS: u32 = 40;

impl LineMap {
    /// Lines of one file, numbered as in it.
    pub fn single(path: &Path) -> LineMap {
        LineMap { files: vec![path.to_path_buf()] }
    }

    /// Adds a file (or finds it); returns its index for [`LineMap::number`].
    pub fn file(&mut self, path: &Path) -> usize {
        match self.files.iter().position(|f| f == path) {
            Some(k) => k,
            None => {
                self.files.push(path.to_path_buf());
                self.files.len() - 1
            }
        }
    }

    /// The line number of line `line` of file `file`.
    pub fn number(file: usize, line: u64) -> u64 {
        ((file as u64) << LINE_BITS) | line
    }

    /// The file index and the line in that file of line number `line`.
    pub fn split(line: u64) -> (usize, u64) {
        ((line >> LINE_BITS) as usize, line & ((1 << LINE_BITS) - 1))
    }

    /// The files, in the order their lines are numbered.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The file holding line `line` and the line's number in it.
    pub fn place(&self, line: u64) -> (&Path, u64) {
        let (k, l) = LineMap::split(line);
        (self.files.get(k).map_or(Path::new(""), PathBuf::as_path), l)
    }

    /// Line `line` as an error location.
    pub fn location(&self, line: u64) -> Location {
        let (p, l) = self.place(line);
        Location::line(p, l)
    }

    /// `file, line N`.
    pub fn describe(&self, line: u64) -> String {
        let (p, l) = self.place(line);
        format!("{}, line {l}", p.display())
    }

    /// Two lines of one key: `file, lines A and B`, or each with its file when they are
    /// in different files.
    pub fn describe_two(&self, a: u64, b: u64) -> String {
        let ((pa, la), (pb, lb)) = (self.place(a), self.place(b));
        if pa == pb {
            format!("{}, lines {la} and {lb}", pa.display())
        } else {
            format!("{}, line {la} and {}, line {lb}", pa.display(), pb.display())
        }
    }

    /// The files as one name for messages: the file, or the first and how many more.
    pub fn name(&self) -> String {
        match self.files.as_slice() {
            [] => String::new(),
            [p] => p.display().to_string(),
            [p, rest @ ..] => {
                format!("{} (and {} more file{})", p.display(), rest.len(), if rest.len() == 1 { "" } else { "s" })
            }
        }
    }
}

/// A progress line on stderr for long reads, only when stderr is a terminal. Files read
/// at the same time (`profile` reads both of its files at once) share one line and one
/// total. It is redrawn at most every [`EVERY_MS`] and once at the end, and cleared when
/// the last of them is done.
struct Progress {
    on: bool,
}

/// The reads that are showing progress now.
struct Shown {
    labels: Vec<String>,
    size: u64,
    done: u64,
    active: usize,
    start: std::time::Instant,
    /// Milliseconds after `start` of the last redraw (`u64::MAX`: none yet).
    drawn_at: u64,
}

static SHOWN: std::sync::Mutex<Option<Shown>> = std::sync::Mutex::new(None);

/// Redraws of the progress line are at least this far apart (ms).
const EVERY_MS: u64 = 100;

fn shown() -> std::sync::MutexGuard<'static, Option<Shown>> {
    SHOWN.lock().unwrap_or_else(|e| e.into_inner())
}

impl Progress {
    fn new(path: &Path, size: u64) -> Self {
        let on = crate::trace::notes_shown(size);
        if on {
            let mut g = shown();
            let s = g.get_or_insert_with(|| Shown {
                labels: Vec::new(),
                size: 0,
                done: 0,
                active: 0,
                start: std::time::Instant::now(),
                drawn_at: u64::MAX,
            });
            s.labels.push(crate::trace::file_name(path));
            s.labels.sort();
            s.size += size;
            s.active += 1;
        }
        Progress { on }
    }

    /// Called once per piece (8 MB), so the lock is taken a few hundred times a second.
    fn add(&self, bytes: u64) {
        if !self.on {
            return;
        }
        let mut g = shown();
        let Some(s) = g.as_mut() else { return };
        s.done += bytes;
        let now = s.start.elapsed().as_millis() as u64;
        if due(s.drawn_at, now, s.done >= s.size) {
            s.drawn_at = now;
            crate::trace::show_line(&progress_line(&s.labels.join(" + "), s.done, s.size, now));
        }
    }
}

/// Whether a redraw is due `now` (ms) when the last one was at `last` (`u64::MAX`: never).
fn due(last: u64, now: u64, finished: bool) -> bool {
    finished || last == u64::MAX || now.saturating_sub(last) >= EVERY_MS
}

/// `reading FILE:  42.0% (1.07/2.54 GB, 1.52 GB/s, 1 s left)` (MB below 1 GB).
fn progress_line(label: &str, done: u64, size: u64, elapsed_ms: u64) -> String {
    let pct = 100.0 * done as f64 / size.max(1) as f64;
    let secs = elapsed_ms as f64 / 1e3;
    let (unit, name) = if size >= 1_000_000_000 { (1e9, "GB") } else { (1e6, "MB") };
    let mut s = format!("reading {label}: {pct:5.1}% ({:.2}/{:.2} {name}", done as f64 / unit, size as f64 / unit);
    if secs > 0.0 && done > 0 {
        let rate = done as f64 / secs;
        let left = size.saturating_sub(done) as f64 / rate;
        s.push_str(&format!(", {:.2} GB/s, {:.0} s left", rate / 1e9, left.ceil()));
    }
    s.push(')');
    s
}

impl Drop for Progress {
    /// The last read to finish clears the line, also when reading stops on an error.
    fn drop(&mut self) {
        if !self.on {
            return;
        }
        let mut g = shown();
        if let Some(s) = g.as_mut() {
            s.active -= 1;
            if s.active == 0 {
                *g = None;
                crate::trace::clear_line();
            }
        }
    }
}

/// A regular file mapped into memory.
struct Mapped {
    map: memmap2::Mmap,
    page: usize,
    /// Turns a SIGBUS from this mapping into an error naming the file.
    _watch: crate::signals::MappedInput,
}

impl Mapped {
    /// Maps `file` when it is a non-empty regular file the system lets us map.
    fn new(file: &File, path: &Path) -> Option<Mapped> {
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() == 0 {
            return None;
        }
        // SAFETY: the mapping is read-only (shared, as memmap2 maps files) and covers the
        // size the file had now: lines appended later are not read, and a line being
        // written is read as a cut-off last line. A file another process truncates while
        // we read it raises SIGBUS on a page past its new end; in the binary that ends
        // the run with an error naming the file (see `crate::signals`), as no byte read
        // from such a file can be trusted.
        let map = unsafe { memmap2::Mmap::map(file) }.ok()?;
        let watch = crate::signals::MappedInput::new(map.as_ptr(), map.len(), path);
        // SAFETY: sysconf has no preconditions.
        let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
            p if p > 0 => p as usize,
            _ => 4096,
        };
        Some(Mapped { map, page, _watch: watch })
    }
    /// Asks the kernel to start reading `range` from disk now (files larger than the page
    /// cache would otherwise be read a few pages per fault).
    fn will_need(&self, range: std::ops::Range<usize>) {
        let start = range.start / self.page * self.page;
        let end = range.end.min(self.map.len());
        if end > start {
            let _ = self.map.advise_range(memmap2::Advice::WillNeed, start, end - start);
        }
    }
    /// Drops the pages wholly inside `range` from the mapping (they stay in the page
    /// cache); a later access would fault them in again.
    fn release(&self, range: std::ops::Range<usize>) {
        let start = range.start.div_ceil(self.page) * self.page;
        let end = range.end / self.page * self.page;
        if end > start {
            // SAFETY: nothing refers to these bytes after their piece is parsed (parsers
            // copy what they keep), and pages shared with a neighbouring piece are never
            // wholly inside; DontNeed on a read-only file mapping only unmaps the pages.
            let _ = unsafe { self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
        }
    }
}

/// The error for a file that holds no `what` rows; `cut` is its cut-off last line (its
/// number and what was wrong), whose warning would otherwise never be printed.
pub fn no_rows(path: &Path, what: &str, cut: Option<(u64, String)>) -> Error {
    let why = match cut {
        Some((line, m)) => format!("line {line} is cut off (no newline, {m}) and no other line holds a row"),
        None => "every line is blank".to_string(),
    };
    Error::bad(Location::file(path), format!("no {what} rows: {why}; expected one JSON object per line"))
}

/// Cuts `data` into newline-aligned ranges of about [`PIECE`] bytes.
fn cut(data: &[u8]) -> Vec<(usize, usize)> {
    let mut bounds = Vec::with_capacity(data.len() / PIECE + 1);
    let mut s = 0;
    while s < data.len() {
        let e = if s + PIECE >= data.len() {
            data.len()
        } else {
            match memchr::memchr(b'\n', &data[s + PIECE..]) {
                Some(p) => s + PIECE + p + 1,
                None => data.len(),
            }
        };
        bounds.push((s, e));
        s = e;
    }
    bounds
}

/// Results of the pieces read so far, in file order, and the lines before the next one.
struct Collected<T> {
    out: Vec<(T, u64)>,
    base: u64,
}

/// Parses the pieces of `region` (file bytes from `offset`, ending the file when
/// `ends_file`) in parallel and appends their results. With the file's mapping, pages
/// are read ahead and released piece by piece.
fn parse_region<T, F>(
    region: &[u8],
    offset: usize,
    ends_file: bool,
    mapped: Option<&Mapped>,
    parse: &F,
    progress: &Progress,
    acc: &mut Collected<T>,
) -> Result<()>
where
    T: Send,
    F: Fn(&mut PieceLines<'_>) -> Result<T> + Sync,
{
    let bounds = cut(region);
    // Pieces after a failed one are not parsed; earlier ones are, so the error reported
    // is the first in the file.
    let failed = AtomicUsize::new(usize::MAX);
    let results: Vec<Option<Result<(T, u64)>>> = bounds
        .par_iter()
        .enumerate()
        .map(|(k, &(s, e))| {
            if k > failed.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(m) = mapped {
                // Read ahead: this piece and the next one.
                m.will_need(offset + s..offset + e + PIECE + (1 << 20));
            }
            let last = ends_file && e == region.len();
            let mut lines = PieceLines::new(&region[s..e], (offset + s) as u64, last);
            let r = parse(&mut lines).map(|t| (t, lines.seen()));
            if r.is_err() {
                failed.fetch_min(k, Ordering::Relaxed);
            }
            if let Some(m) = mapped {
                m.release(offset + s..offset + e);
            }
            progress.add((e - s) as u64);
            Some(r)
        })
        .collect();
    for r in results {
        match r {
            Some(Ok((t, n))) => {
                acc.out.push((t, acc.base));
                acc.base += n;
            }
            Some(Err(e)) => return Err(shift_line(e, acc.base)),
            None => unreachable!("a piece is skipped only after an earlier one failed"),
        }
    }
    Ok(())
}

/// Reads `path` and calls `parse` on pieces of consecutive lines in parallel. Returns each
/// piece's result in file order with the number of lines before the piece (add it to the
/// piece-local line numbers). An error is the first one in file order, with its line
/// number made file-wide. Regular files are mapped; anything else (a pipe) is read in
/// newline-aligned blocks, so memory stays bounded either way.
pub fn read_pieces<T, F>(path: &Path, parse: F) -> Result<(Vec<(T, u64)>, ReadReport)>
where
    T: Send,
    F: Fn(&mut PieceLines<'_>) -> Result<T> + Sync,
{
    read_pieces_in(path, None, parse)
}

/// [`read_pieces`] over the lines that start in bytes `range` (start, end) of the file: a
/// line belongs to the range holding its first byte, so ranges that tile a file read each
/// line once. Line numbers stay file-wide. Needs an uncompressed regular file.
pub fn read_pieces_range<T, F>(path: &Path, range: (u64, u64), parse: F) -> Result<(Vec<(T, u64)>, ReadReport)>
where
    T: Send,
    F: Fn(&mut PieceLines<'_>) -> Result<T> + Sync,
{
    read_pieces_in(path, Some(range), parse)
}

/// The first line start at or after byte `p` of `map`.
fn line_start_from(map: &[u8], p: usize) -> usize {
    if p == 0 || p >= map.len() {
        return p.min(map.len());
    }
    memchr::memchr(b'\n', &map[p - 1..]).map_or(map.len(), |i| p + i)
}

/// The number of newlines in the first `end` bytes of `file`, read in blocks with
/// `pread` rather than through the file's map: the prefix before a byte range is only
/// counted, and pages read through the map would count as the process's memory.
fn newlines_before(file: &File, end: u64) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 1 << 20];
    let (mut at, mut n) = (0u64, 0u64);
    while at < end {
        let want = usize::try_from(end - at).unwrap_or(usize::MAX).min(buf.len());
        let got = file.read_at(&mut buf[..want], at)?;
        if got == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the file shrank while it was read"));
        }
        n += memchr::memchr_iter(b'\n', &buf[..got]).count() as u64;
        at += got as u64;
    }
    Ok(n)
}

fn read_pieces_in<T, F>(path: &Path, range: Option<(u64, u64)>, parse: F) -> Result<(Vec<(T, u64)>, ReadReport)>
where
    T: Send,
    F: Fn(&mut PieceLines<'_>) -> Result<T> + Sync,
{
    if path.is_dir() {
        return Err(Error::bad(Location::file(path), "is a folder; give the JSONL file inside it"));
    }
    let mut file = File::open(path).map_err(|e| Error::read(path, e))?;
    let compression = Compression::sniff(&mut file, path)?;
    // A compressed file's progress would count decompressed bytes against the size on
    // disk, so none is shown for it.
    let size = if compression.is_some() { 0 } else { file.metadata().map(|m| m.len()).unwrap_or(0) };
    let progress = Progress::new(path, size);
    let mut acc = Collected { out: Vec::new(), base: 0 };
    let mapped = if compression.is_some() { None } else { Mapped::new(&file, path) };
    if range.is_some() && mapped.is_none() {
        return Err(Error::bad(
            Location::file(path),
            "a byte range needs an uncompressed regular file (not a pipe, gzip or zstd)",
        ));
    }
    let mut lines_before = 0;
    // A range may hold no line (it lies inside one): only an empty file is refused.
    let mut empty = true;
    let total = match mapped {
        Some(m) => {
            let (s, e) = match range {
                None => (0, m.map.len()),
                Some((a, b)) => {
                    let at = |x: u64| line_start_from(&m.map, usize::try_from(x).unwrap_or(usize::MAX));
                    (at(a), at(b.max(a)))
                }
            };
            if m.map.is_empty() {
                0
            } else {
                empty = false;
                lines_before = newlines_before(&file, s as u64).map_err(|e| Error::read(path, e))?;
                acc.base = lines_before;
                parse_region(&m.map[s..e], s, e == m.map.len(), Some(&m), &parse, &progress, &mut acc)?;
                e - s
            }
        }
        None => {
            // Blocks cut at the last newline; the tail is carried into the next block.
            let mut total = 0usize;
            let mut block: Vec<u8> = Vec::new();
            let mut source = Compression::reader(compression, file, path)?;
            loop {
                let want = BLOCK.max(block.len() + (1 << 20)) - block.len();
                let n = std::io::Read::by_ref(&mut source)
                    .take(want as u64)
                    .read_to_end(&mut block)
                    .map_err(|e| Compression::read_error(compression, path, e))?;
                let eof = n == 0;
                let cut_at = if eof { block.len() } else { memchr::memrchr(b'\n', &block).map_or(0, |p| p + 1) };
                if cut_at > 0 {
                    parse_region(&block[..cut_at], total, eof, None, &parse, &progress, &mut acc)?;
                    total += cut_at;
                    block.drain(..cut_at);
                }
                if eof {
                    break;
                }
            }
            total
        }
    };
    drop(progress);
    if total == 0 && (range.is_none() || empty) {
        return Err(Error::bad(Location::file(path), "the file is empty; expected one JSON object per line"));
    }
    let report = ReadReport { lines: acc.base - lines_before, bytes: total as u64, warnings: Vec::new() };
    Ok((acc.out, report))
}

/// A compression format recognised by the first bytes of a file (its name does not
/// matter: a `.jsonl` that is really gzip is read as gzip).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Compression {
    Gzip,
    Zstd,
}

impl Compression {
    /// Looks at the first bytes of a regular file and rewinds it; pipes are not sniffed
    /// (their bytes cannot be put back), and are read as plain JSONL.
    fn sniff(file: &mut File, path: &Path) -> Result<Option<Compression>> {
        use std::io::{Seek, SeekFrom};
        if !file.metadata().map(|m| m.is_file()).unwrap_or(false) {
            return Ok(None);
        }
        let mut head = [0u8; 4];
        let mut got = 0;
        while got < head.len() {
            match file.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::read(path, e)),
            }
        }
        file.seek(SeekFrom::Start(0)).map_err(|e| Error::read(path, e))?;
        Ok(match &head[..got] {
            [0x1f, 0x8b, ..] => Some(Compression::Gzip),
            [0x28, 0xb5, 0x2f, 0xfd] => Some(Compression::Zstd),
            _ => None,
        })
    }

    /// The bytes of `file`, decompressed as `compression` says.
    fn reader(compression: Option<Compression>, file: File, path: &Path) -> Result<Box<dyn Read>> {
        Ok(match compression {
            None => Box::new(file),
            // Several gzip members one after another (`cat a.gz b.gz`) are one stream, as
            // gunzip reads them.
            Some(Compression::Gzip) => Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file))),
            Some(Compression::Zstd) => {
                Box::new(zstd::stream::read::Decoder::new(file).map_err(|e| Error::read(path, e))?)
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// A failure while reading: corrupt compressed data is bad input, not a read error.
    fn read_error(compression: Option<Compression>, path: &Path, e: std::io::Error) -> Error {
        use std::io::ErrorKind::{InvalidData, InvalidInput, UnexpectedEof};
        match compression.map(Compression::name) {
            Some(name) if matches!(e.kind(), InvalidInput | InvalidData) => Error::bad(
                Location::file(path),
                format!("corrupt {name} data ({e}); expected a whole {name}-compressed JSONL file"),
            ),
            Some(name) if e.kind() == UnexpectedEof => {
                Error::bad(Location::file(path), format!("the {name} stream ends early (a cut-off file?)"))
            }
            _ => Error::read(path, e),
        }
    }
}

/// Whether `path` is a gzip or zstd file (read by its first bytes).
pub fn is_compressed(path: &Path) -> bool {
    File::open(path).ok().is_some_and(|mut f| matches!(Compression::sniff(&mut f, path), Ok(Some(_))))
}

/// [`read_pieces`] over bytes already in memory (rows built by the caller), named `path`
/// in messages: the same piece parsers, errors and report as for a file.
pub fn read_pieces_bytes<T, F>(path: &Path, data: &[u8], parse: F) -> Result<(Vec<(T, u64)>, ReadReport)>
where
    T: Send,
    F: Fn(&mut PieceLines<'_>) -> Result<T> + Sync,
{
    if data.is_empty() {
        return Err(Error::bad(Location::file(path), "no rows; expected one JSON object per line"));
    }
    let progress = Progress { on: false };
    let mut acc = Collected { out: Vec::new(), base: 0 };
    parse_region(data, 0, true, None, &parse, &progress, &mut acc)?;
    let report = ReadReport { lines: acc.base, bytes: data.len() as u64, warnings: Vec::new() };
    Ok((acc.out, report))
}

/// Makes a piece-local line number in an error file-wide.
fn shift_line(e: Error, base: u64) -> Error {
    match e {
        Error::BadInput { mut loc, msg } => {
            loc.line = loc.line.map(|l| l + base);
            Error::BadInput { loc, msg }
        }
        Error::Refused { loc: Some(mut loc), msg } => {
            loc.line = loc.line.map(|l| l + base);
            Error::Refused { loc: Some(loc), msg }
        }
        other => other,
    }
}

/// A whole file's bytes: mapped when it is a plain file, decompressed into memory when
/// it is gzip or zstd.
pub enum Whole {
    Mapped(memmap2::Mmap),
    Read(Vec<u8>),
}

impl std::ops::Deref for Whole {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Whole::Mapped(m) => m,
            Whole::Read(v) => v,
        }
    }
}

/// The whole of `path`, for readers that go over a file's lines again (the merged file,
/// the health check).
pub fn map_whole(path: &Path) -> Result<Whole> {
    let mut f = File::open(path).map_err(|e| Error::read(path, e))?;
    let compression = Compression::sniff(&mut f, path)?;
    let plain = compression.is_none() && f.metadata().is_ok_and(|m| m.is_file() && m.len() > 0);
    if plain {
        // SAFETY: a read-only mapping of a regular file; see `Mapped::new` for files
        // changed while rollstat reads them.
        if let Ok(m) = unsafe { memmap2::Mmap::map(&f) } {
            return Ok(Whole::Mapped(m));
        }
    }
    let f = File::open(path).map_err(|e| Error::read(path, e))?;
    let mut out = Vec::new();
    Compression::reader(compression, f, path)?
        .read_to_end(&mut out)
        .map_err(|e| Compression::read_error(compression, path, e))?;
    Ok(Whole::Read(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_redraws_at_most_every_100_ms_and_at_the_end() {
        assert!(due(u64::MAX, 0, false), "first redraw");
        assert!(!due(500, 550, false));
        assert!(!due(500, 599, false));
        assert!(due(500, 600, false));
        assert!(due(500, 501, true), "the end is always drawn");
        // A clock read before a concurrent redraw does not underflow.
        assert!(!due(500, 400, false));
    }

    #[test]
    fn progress_line_shows_share_rate_and_time_left() {
        assert_eq!(
            progress_line("r.jsonl", 1_000_000_000, 4_000_000_000, 500),
            "reading r.jsonl:  25.0% (1.00/4.00 GB, 2.00 GB/s, 2 s left)"
        );
        assert_eq!(progress_line("r.jsonl", 0, 4_000_000_000, 0), "reading r.jsonl:   0.0% (0.00/4.00 GB)");
        assert_eq!(
            progress_line("i.jsonl", 300_000_000, 400_000_000, 1000),
            "reading i.jsonl:  75.0% (300.00/400.00 MB, 0.30 GB/s, 1 s left)"
        );
        assert_eq!(
            progress_line("r.jsonl", 4_000_000_000, 4_000_000_000, 2000),
            "reading r.jsonl: 100.0% (4.00/4.00 GB, 2.00 GB/s, 0 s left)"
        );
    }

    #[test]
    fn pieces_cover_the_data_at_line_ends() {
        let mut data = Vec::new();
        for i in 0..1_000_000u32 {
            data.extend_from_slice(format!("{{\"i\":{i}}}\n").as_bytes());
        }
        data.extend_from_slice(b"{\"tail\":1}");
        let b = cut(&data);
        assert!(b.len() > 1);
        assert_eq!(b[0].0, 0);
        assert_eq!(b.last().unwrap().1, data.len());
        for w in b.windows(2) {
            assert_eq!(w[0].1, w[1].0);
            assert_eq!(data[w[0].1 - 1], b'\n');
        }
    }

    #[test]
    fn piece_lines_skip_blanks_and_mark_the_unterminated_tail() {
        let data = b"a\n\n  \r\nb\r\nc";
        let lines: Vec<(Vec<u8>, u64, u64, bool)> =
            PieceLines::new(data, 100, true).map(|l| (l.bytes.to_vec(), l.number, l.offset, l.unterminated)).collect();
        assert_eq!(
            lines,
            vec![(b"a".to_vec(), 1, 100, false), (b"b".to_vec(), 4, 107, false), (b"c".to_vec(), 5, 110, true)]
        );
        let not_last: Vec<bool> = PieceLines::new(data, 0, false).map(|l| l.unterminated).collect();
        assert_eq!(not_last, vec![false, false, false]);
    }

    /// The prefix before a byte range is counted in 1 MB reads: across block ends, at
    /// a block end exactly, and up to the file's end, the count equals the newlines there.
    #[test]
    fn newlines_before_a_range_are_counted_across_read_blocks() {
        let dir = std::env::temp_dir().join(format!("rollstat-newlines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("prefix.jsonl");
        let mut data = Vec::new();
        let mut k = 0u64;
        while data.len() < (5 << 20) / 2 {
            // Lines of varying length, some blank, so newlines fall anywhere in a block.
            data.extend_from_slice(&vec![b'x'; (k * 7919 % 301) as usize]);
            data.push(b'\n');
            k += 1;
        }
        std::fs::write(&path, &data).unwrap();
        let file = File::open(&path).unwrap();
        let len = data.len() as u64;
        for end in [0, 1, 4095, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 2 << 20, len - 1, len] {
            let want = data[..end as usize].iter().filter(|&&b| b == b'\n').count() as u64;
            assert_eq!(newlines_before(&file, end).unwrap(), want, "end {end}");
        }
        // Past the end the file "shrank": an error, not a short count.
        assert!(newlines_before(&file, len + 1).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Line numbers stay file-wide across pieces, in results and in errors.
    #[test]
    fn numbers_lines_across_pieces() {
        let dir = std::env::temp_dir().join(format!("rollstat-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("many.jsonl");
        let mut data = Vec::new();
        let n = 2_500_000u64; // about 3 pieces
        for i in 1..=n {
            if i % 1000 == 0 {
                data.push(b'\n'); // a blank line still counts
            } else {
                data.extend_from_slice(format!("{i:07}\n").as_bytes());
            }
        }
        std::fs::write(&path, &data).unwrap();
        let parse = |bad: u64| {
            move |lines: &mut PieceLines<'_>| -> Result<Vec<(u64, u64)>> {
                let mut seen = Vec::new();
                for l in lines {
                    let want: u64 = std::str::from_utf8(l.bytes).unwrap().parse().unwrap();
                    if want == bad {
                        return Err(Error::bad(Location::line(Path::new("x"), l.number), "bad"));
                    }
                    seen.push((l.number, want));
                }
                Ok(seen)
            }
        };
        let (pieces, report) = read_pieces(&path, parse(0)).unwrap();
        assert!(pieces.len() >= 3);
        assert_eq!(report.lines, n);
        let mut count = 0;
        for (seen, base) in &pieces {
            for &(local, want) in seen {
                assert_eq!(local + base, want);
                count += 1;
            }
        }
        assert_eq!(count, n - n / 1000);
        let late = n - 7;
        match read_pieces(&path, parse(late)) {
            Err(Error::BadInput { loc, .. }) => assert_eq!(loc.line, Some(late)),
            other => panic!("expected a bad-input error, got {:?}", other.map(|_| ())),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A pipe cannot be mapped: it is read in blocks, with the same lines, numbers and
    /// cut-off tail as a mapped file.
    #[cfg(unix)]
    #[test]
    fn reads_a_pipe_in_blocks() {
        let dir = std::env::temp_dir().join(format!("rollstat-pipe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("lines.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let n = 9_000_000u64; // about 72 MB: more than one block
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                use std::io::Write;
                let mut f = std::io::BufWriter::new(std::fs::OpenOptions::new().write(true).open(&fifo).unwrap());
                for i in 1..n {
                    writeln!(f, "{i:07}").unwrap();
                }
                write!(f, "{n:07}").unwrap(); // no trailing newline
            })
        };
        let (pieces, report) = read_pieces(&fifo, |lines: &mut PieceLines<'_>| -> Result<Vec<(u64, u64, bool)>> {
            Ok(lines
                .map(|l| (l.number, std::str::from_utf8(l.bytes).unwrap().parse().unwrap(), l.unterminated))
                .collect())
        })
        .unwrap();
        writer.join().unwrap();
        assert_eq!(report.lines, n);
        let mut count = 0;
        for (seen, base) in &pieces {
            for &(local, want, unterminated) in seen {
                assert_eq!(local + base, want);
                assert_eq!(unterminated, want == n);
                count += 1;
            }
        }
        assert_eq!(count, n);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
