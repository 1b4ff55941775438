//! Parallel, bounded-memory reading of a JSONL file.
//!
//! The file is memory-mapped (no copy through a read buffer) and cut at line boundaries
//! into pieces of a few MB that are parsed in parallel with rayon. A piece's parser walks
//! its own lines, numbered from 1 within the piece; the numbers before each piece are
//! known only once every earlier piece is done, so results come back with their base
//! and callers add it. Pages of a parsed piece are dropped from the mapping at once, so
//! resident memory follows what the parsers keep, not the size of the file. Files that
//! cannot be mapped (pipes) are read into memory instead.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rayon::prelude::*;

use crate::error::{Error, Location, Result};

/// Target size of one piece.
const PIECE: usize = 8 << 20;

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
    /// Whether the whole piece is valid UTF-8 (checked once, SIMD); when false the
    /// parser checks line by line to say where.
    pub utf8_valid: bool,
}

impl<'a> PieceLines<'a> {
    fn new(data: &'a [u8], offset: u64, last: bool) -> Self {
        let utf8_valid = simdutf8::basic::from_utf8(data).is_ok();
        PieceLines { data, pos: 0, number: 0, offset, last, utf8_valid }
    }
    /// Lines seen so far (blank ones included).
    pub fn seen(&self) -> u64 {
        self.number
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

/// A progress line on stderr for long reads, only when stderr is a terminal.
struct Progress {
    label: String,
    size: u64,
    on: bool,
    done: AtomicU64,
}

impl Progress {
    fn new(path: &Path, size: u64) -> Self {
        use std::io::IsTerminal;
        let on = size >= (256 << 20) && std::io::stderr().is_terminal();
        Progress { label: path.display().to_string(), size, on, done: AtomicU64::new(0) }
    }
    fn add(&self, bytes: u64) {
        if self.on {
            let done = self.done.fetch_add(bytes, Ordering::Relaxed) + bytes;
            let pct = 100.0 * done as f64 / self.size.max(1) as f64;
            eprint!("\rreading {}: {pct:5.1}% ({:.2}/{:.2} GB)", self.label, done as f64 / 1e9, self.size as f64 / 1e9);
        }
    }
}

impl Drop for Progress {
    /// Clears the line, also when reading stops on an error.
    fn drop(&mut self) {
        if self.on {
            eprint!("\r\x1b[2K");
        }
    }
}

/// The file's bytes: mapped when possible, else read into memory.
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    fn open(path: &Path) -> Result<Bytes> {
        let mut file = File::open(path).map_err(|e| Error::read(path, e))?;
        let meta = file.metadata().map_err(|e| Error::read(path, e))?;
        if meta.is_file() && meta.len() > 0 {
            // SAFETY: the mapping is read-only and private. A file changed by another
            // process while we read it is outside what rollstat supports (as with any
            // reader of a file being rewritten); we never write through the mapping.
            if let Ok(m) = unsafe { memmap2::Mmap::map(&file) } {
                return Ok(Bytes::Mapped(m));
            }
        }
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut v).map_err(|e| Error::read(path, e))?;
        Ok(Bytes::Owned(v))
    }
    /// Asks the kernel to start reading `range` from disk now (files larger than the page
    /// cache would otherwise be read a few pages per fault).
    fn will_need(&self, range: std::ops::Range<usize>) {
        if let Bytes::Mapped(m) = self {
            const PAGE: usize = 4096;
            let start = range.start / PAGE * PAGE;
            let _ = m.advise_range(memmap2::Advice::WillNeed, start, range.end.min(m.len()) - start);
        }
    }
    fn data(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
    /// Drops the pages wholly inside `range` from the mapping (they stay in the page
    /// cache); a later access would fault them in again.
    fn release(&self, range: std::ops::Range<usize>) {
        if let Bytes::Mapped(m) = self {
            const PAGE: usize = 4096;
            let start = range.start.div_ceil(PAGE) * PAGE;
            let end = range.end / PAGE * PAGE;
            if end > start {
                // SAFETY: nothing refers to these bytes after their piece is parsed
                // (parsers copy what they keep); DontNeed on a private read-only file
                // mapping only unmaps the pages.
                let _ = unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start) };
            }
        }
    }
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

/// Reads `path` and calls `parse` on pieces of consecutive lines in parallel. Returns each
/// piece's result in file order with the number of lines before the piece (add it to the
/// piece-local line numbers). An error is the first one in file order, with its line
/// number made file-wide.
pub fn read_pieces<T, F>(path: &Path, parse: F) -> Result<(Vec<(T, u64)>, ReadReport)>
where
    T: Send,
    F: Fn(&mut PieceLines<'_>) -> Result<T> + Sync,
{
    let bytes = Bytes::open(path)?;
    let data = bytes.data();
    if data.is_empty() {
        return Err(Error::bad(Location::file(path), "the file is empty; expected one JSON object per line"));
    }
    let progress = Progress::new(path, data.len() as u64);
    let bounds = cut(data);
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
            // Read ahead: this piece and the next one.
            bytes.will_need(s..(e + PIECE + (1 << 20)).min(data.len()));
            let mut lines = PieceLines::new(&data[s..e], s as u64, e == data.len());
            let r = parse(&mut lines).map(|t| (t, lines.seen()));
            if r.is_err() {
                failed.fetch_min(k, Ordering::Relaxed);
            }
            bytes.release(s..e);
            progress.add((e - s) as u64);
            Some(r)
        })
        .collect();
    drop(progress);
    let mut out = Vec::with_capacity(results.len());
    let mut base = 0u64;
    for r in results {
        match r {
            Some(Ok((t, n))) => {
                out.push((t, base));
                base += n;
            }
            Some(Err(e)) => return Err(shift_line(e, base)),
            None => unreachable!("a piece is skipped only after an earlier one failed"),
        }
    }
    let report = ReadReport { lines: base, bytes: data.len() as u64, warnings: Vec::new() };
    Ok((out, report))
}

/// Makes a piece-local line number in an error file-wide.
fn shift_line(e: Error, base: u64) -> Error {
    match e {
        Error::BadInput { mut loc, msg } => {
            loc.line = loc.line.map(|l| l + base);
            Error::BadInput { loc, msg }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
