//! Parallel, bounded-memory reading of a JSONL file.
//!
//! The file is read in large blocks (never the whole file); each block is cut at line
//! boundaries into pieces that are parsed in parallel with rayon. A piece's parser sees
//! raw line bytes with their 1-based line numbers and its own byte offset in the file,
//! and returns a partial result; results come back in file order. Memory therefore
//! follows what the parsers keep, not the size of the file.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use rayon::prelude::*;

use crate::error::{Error, Location, Result};

/// Size of one read block. Two blocks are alive at most (current + carried tail).
const BLOCK: usize = 32 << 20;

/// One line handed to a piece parser.
pub struct Line<'a> {
    /// The bytes without the trailing newline (and without a trailing `\r`).
    pub bytes: &'a [u8],
    /// 1-based line number in the file.
    pub number: u64,
    /// Byte offset of the line's first byte in the file.
    pub offset: u64,
    /// True for the file's last line when it has no trailing newline (a cut-off write).
    pub unterminated: bool,
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
}

impl Progress {
    fn new(path: &Path, size: u64) -> Self {
        use std::io::IsTerminal;
        let on = size >= (256 << 20) && std::io::stderr().is_terminal();
        Progress { label: path.display().to_string(), size, on }
    }
    fn update(&self, done: u64) {
        if self.on {
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

/// One newline-aligned block of the file.
struct Block {
    data: Vec<u8>,
    /// File offset of `data[0]`.
    offset: u64,
    /// Whether this block ends the file.
    eof: bool,
}

/// Reads blocks cut at the last newline (the tail is carried into the next block).
/// Consumed blocks come back on `spent` for reuse, so pages are not faulted in anew.
fn read_blocks(
    mut file: File,
    tx: std::sync::mpsc::SyncSender<std::io::Result<Block>>,
    spent: std::sync::mpsc::Receiver<Vec<u8>>,
) {
    let mut carry: Vec<u8> = Vec::new();
    let mut offset: u64 = 0;
    loop {
        let need = BLOCK.max(carry.len() + (1 << 20)) + 64;
        let mut buf = match spent.try_recv() {
            Ok(mut b) => {
                b.clear();
                b.reserve(need);
                b
            }
            Err(_) => Vec::with_capacity(need),
        };
        buf.append(&mut carry);
        let want = (buf.capacity() - buf.len()) as u64;
        let eof = match (&mut file).take(want).read_to_end(&mut buf) {
            Ok(n) => n == 0 || (n as u64) < want,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        if !eof {
            match memchr::memrchr(b'\n', &buf) {
                Some(p) => carry = buf.split_off(p + 1),
                None => {
                    // One line longer than the block: keep reading into it.
                    carry = buf;
                    continue;
                }
            }
        }
        let len = buf.len() as u64;
        if tx.send(Ok(Block { data: buf, offset, eof })).is_err() {
            return;
        }
        offset += len;
        if eof {
            return;
        }
    }
}

/// Reads `path` and calls `parse` on pieces of consecutive lines in parallel. `parse`
/// receives the lines of a piece (blank lines already removed) and returns a `T`.
/// Results are returned in file order. A reader thread fetches the next block while
/// the current one is parsed.
pub fn read_pieces<T, F>(path: &Path, parse: F) -> Result<(Vec<T>, ReadReport)>
where
    T: Send,
    F: Fn(&[Line<'_>]) -> Result<T> + Sync,
{
    let file = File::open(path).map_err(|e| Error::read(path, e))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let progress = Progress::new(path, size);
    let mut report = ReadReport::default();
    let mut out: Vec<T> = Vec::new();
    let mut line_no: u64 = 0; // lines before the current block
    let pieces_per_block = rayon::current_num_threads().max(1) * 4;
    let (tx, rx) = std::sync::mpsc::sync_channel::<std::io::Result<Block>>(1);
    let (spent_tx, spent_rx) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| -> Result<()> {
        scope.spawn(move || read_blocks(file, tx, spent_rx));
        for block in rx {
            let block = block.map_err(|e| Error::read(path, e))?;
            report.bytes += block.data.len() as u64;
            let data = &block.data[..];
            let file_offset = block.offset;
            let is_last_block = block.eof;
            if data.is_empty() {
                continue;
            }
            // Cut into pieces at newlines.
            let target = data.len().div_ceil(pieces_per_block).max(1 << 16);
            let mut bounds = Vec::new();
            let mut s = 0;
            while s < data.len() {
                let e = if s + target >= data.len() {
                    data.len()
                } else {
                    match memchr::memchr(b'\n', &data[s + target..]) {
                        Some(p) => s + target + p + 1,
                        None => data.len(),
                    }
                };
                bounds.push((s, e));
                s = e;
            }
            // Line counts per piece, to number lines.
            let counts: Vec<u64> = bounds
                .par_iter()
                .map(|&(s, e)| {
                    let d = &data[s..e];
                    let n = memchr::memchr_iter(b'\n', d).count() as u64;
                    n + u64::from(!d.is_empty() && *d.last().unwrap() != b'\n')
                })
                .collect();
            let mut firsts = Vec::with_capacity(counts.len());
            let mut acc = line_no;
            for c in &counts {
                firsts.push(acc);
                acc += c;
            }
            let results: Vec<Result<T>> = bounds
                .par_iter()
                .zip(firsts.par_iter())
                .map(|(&(s, e), &first)| {
                    let d = &data[s..e];
                    let mut lines = Vec::new();
                    let mut pos = 0;
                    let mut no = first;
                    while pos < d.len() {
                        let end = memchr::memchr(b'\n', &d[pos..]).map(|p| pos + p);
                        let (raw, next, terminated) = match end {
                            Some(p) => (&d[pos..p], p + 1, true),
                            None => (&d[pos..], d.len(), false),
                        };
                        no += 1;
                        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
                        if !raw.iter().all(|c| matches!(c, b' ' | b'\t' | b'\r')) {
                            lines.push(Line {
                                bytes: raw,
                                number: no,
                                offset: file_offset + (s + pos) as u64,
                                unterminated: !terminated && is_last_block && e == data.len(),
                            });
                        }
                        pos = next;
                    }
                    parse(&lines)
                })
                .collect();
            for r in results {
                out.push(r?);
            }
            line_no = acc;
            progress.update(report.bytes);
            let _ = spent_tx.send(block.data);
        }
        Ok(())
    })?;
    drop(progress);
    report.lines = line_no;
    if report.bytes == 0 {
        return Err(Error::bad(Location::file(path), "the file is empty; expected one JSON object per line"));
    }
    Ok((out, report))
}
