//! The writer behind every staged output file. Small files are written once, through
//! the page cache. A large file (the task-level artifacts are hundreds of MB at a
//! million rollouts) is written around the page cache with `O_DIRECT`, in aligned
//! blocks straight from our buffer to the disk: buffered writes of that size cost a
//! core of kernel time allocating and copying page-cache pages, which on two cores
//! competes with rendering the very entries being written, while a direct write only
//! waits for the disk. The last partial block is written normally. A file system that
//! refuses `O_DIRECT` (some network mounts, older tmpfs) gets ordinary writes, as does
//! every file when `ROLLSTAT_DIRECT_IO=0`; the bytes are the same either way.

use std::fs::File;
use std::io::{self, IoSlice, Write};

/// Bytes per block: a multiple of every logical block size (512 B or 4 KiB).
const BLOCK: usize = 8 << 20;
/// Alignment of the buffer and of the file offsets of direct writes.
const ALIGN: usize = 4096;

/// A heap buffer of [`BLOCK`] bytes aligned to [`ALIGN`].
struct Aligned {
    ptr: std::ptr::NonNull<u8>,
}

// SAFETY: the buffer is plain bytes owned by this value alone.
unsafe impl Send for Aligned {}

impl Aligned {
    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(BLOCK, ALIGN).expect("constant layout")
    }
    fn new() -> Aligned {
        // SAFETY: the layout has a non-zero size. Zeroed, so every byte is initialized
        // and `bytes` is sound for any length.
        let p = unsafe { std::alloc::alloc_zeroed(Self::layout()) };
        match std::ptr::NonNull::new(p) {
            Some(ptr) => Aligned { ptr },
            None => std::alloc::handle_alloc_error(Self::layout()),
        }
    }
    fn bytes(&self, len: usize) -> &[u8] {
        assert!(len <= BLOCK);
        // SAFETY: `len <= BLOCK` initialized bytes of the allocation (zeroed at first).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), len) }
    }
    /// Copies `src` to offset `at` (`at + src.len() <= BLOCK`).
    fn put(&mut self, at: usize, src: &[u8]) {
        assert!(at + src.len() <= BLOCK);
        // SAFETY: in bounds, checked above; `src` cannot overlap our own allocation.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(at), src.len()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout()) }
    }
}

/// How whole blocks go to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A new regular file, not yet larger than one block: direct writes are tried at the
    /// first full block.
    Untried,
    /// `O_DIRECT` is on.
    Direct,
    /// Ordinary writes (a stream, a refusal, or after an unaligned tail).
    Buffered,
}

/// The open file's status flags, or -1.
fn flags(file: &File) -> libc::c_int {
    use std::os::fd::AsRawFd;
    // SAFETY: F_GETFL on a descriptor the caller owns; no memory is passed.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) }
}

fn is_direct(file: &File) -> bool {
    let f = flags(file);
    f >= 0 && f & libc::O_DIRECT != 0
}

/// Turns `O_DIRECT` on or off for the open file (every handle of it); false when the
/// system refuses.
fn set_direct(file: &File, on: bool) -> bool {
    use std::os::fd::AsRawFd;
    let f = flags(file);
    if f < 0 {
        return false;
    }
    let want = if on { f | libc::O_DIRECT } else { f & !libc::O_DIRECT };
    // SAFETY: F_SETFL on a descriptor the caller owns; no memory is passed.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, want) == 0 }
}

/// Writes all of `data`. A direct write the system refuses (`EINVAL`: the file system
/// cannot do direct I/O, or a short write left the offset unaligned) turns direct I/O
/// off and the rest goes through ordinary writes; nothing is written twice.
fn write_whole(file: &File, data: &[u8]) -> io::Result<()> {
    let mut done = 0;
    while done < data.len() {
        match (&*file).write(&data[done..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) && is_direct(file) && set_direct(file, false) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether direct writes may be used: not when the environment sets
/// `ROLLSTAT_DIRECT_IO=0` (read once).
pub fn allowed() -> bool {
    static ALLOWED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALLOWED.get_or_init(|| std::env::var_os("ROLLSTAT_DIRECT_IO").is_none_or(|v| v != "0"))
}

/// A buffered writer over a file that goes direct once the file outgrows one block.
pub struct FileWriter {
    file: File,
    buf: Aligned,
    len: usize,
    mode: Mode,
    /// With direct writes: the thread that writes full blocks while the next one fills.
    io: Option<Io>,
    /// The first failure: every later call reports it again, so a failed write can
    /// never be followed by a success.
    failed: Option<(io::ErrorKind, String)>,
}

/// The block-writing thread: full buffers go to it in file order and come back empty.
struct Io {
    tx: std::sync::mpsc::SyncSender<Aligned>,
    back: std::sync::mpsc::Receiver<Aligned>,
    /// Buffers allocated so far (the one being filled included).
    buffers: usize,
    handle: std::thread::JoinHandle<io::Result<()>>,
}

/// Buffers in use with a block-writing thread: one filling, one being written, one
/// waiting.
const BUFFERS: usize = 3;

impl Io {
    /// Starts the thread on its own handle of `file` (same open file, same position: only
    /// the thread writes until it is joined).
    fn start(file: &File) -> Option<Io> {
        let out = file.try_clone().ok()?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Aligned>(1);
        let (give, back) = std::sync::mpsc::channel::<Aligned>();
        let handle = std::thread::Builder::new()
            .name("rollstat-write".into())
            .spawn(move || -> io::Result<()> {
                for buf in rx {
                    write_whole(&out, buf.bytes(BLOCK))?;
                    // The writer may have stopped (it failed, or finished early).
                    let _ = give.send(buf);
                }
                Ok(())
            })
            .ok()?;
        Some(Io { tx, back, buffers: 1, handle })
    }

    /// Waits for every block sent so far to be written; the first error if one failed.
    fn finish(self) -> io::Result<()> {
        drop(self.tx);
        self.handle.join().unwrap_or_else(|_| Err(io::Error::other("the writing thread panicked")))
    }
}

impl FileWriter {
    /// `new_file`: a regular file we just created (empty, offset 0), where direct
    /// writes may be used; anything else (a pipe, a device, a shared descriptor) is
    /// written in order with ordinary writes.
    pub fn new(file: File, new_file: bool) -> FileWriter {
        let mode = if new_file && allowed() { Mode::Untried } else { Mode::Buffered };
        FileWriter { file, buf: Aligned::new(), len: 0, mode, io: None, failed: None }
    }

    /// The recorded failure, if any, as an error to return.
    fn check(&self) -> io::Result<()> {
        match &self.failed {
            Some((kind, msg)) => Err(io::Error::new(*kind, msg.clone())),
            None => Ok(()),
        }
    }

    /// Records the first failure of `r` and passes it on.
    fn note<T>(&mut self, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            if self.failed.is_none() {
                self.failed = Some((e.kind(), e.to_string()));
            }
        }
        r
    }

    /// Writes everything still buffered and waits for it: the end of the file. The
    /// partial last block goes through ordinary writes. Call once all bytes are written
    /// (dropping the writer does the same but cannot report errors); later calls only
    /// report an earlier failure.
    pub fn finish(&mut self) -> io::Result<()> {
        self.check()?;
        let r = self.finish_inner();
        self.note(r)
    }

    fn finish_inner(&mut self) -> io::Result<()> {
        if let Some(io) = self.io.take() {
            io.finish()?;
        }
        if self.len > 0 {
            if self.mode == Mode::Direct {
                set_direct(&self.file, false);
            }
            self.mode = Mode::Buffered;
        }
        self.write_out()
    }

    /// Writes what is buffered with the file's current mode, then flushes the file.
    fn write_out(&mut self) -> io::Result<()> {
        let len = std::mem::take(&mut self.len);
        write_whole(&self.file, self.buf.bytes(len))?;
        (&self.file).flush()
    }

    /// Writes the full buffer: handed to the writing thread once direct writes are
    /// known to work, written here before that.
    fn write_block(&mut self) -> io::Result<()> {
        debug_assert_eq!(self.len, BLOCK);
        self.len = 0;
        if let Some(io) = &mut self.io {
            let next = match io.back.try_recv() {
                Ok(b) => b,
                Err(_) if io.buffers < BUFFERS => {
                    io.buffers += 1;
                    Aligned::new()
                }
                Err(_) => match io.back.recv() {
                    Ok(b) => b,
                    Err(_) => return Err(self.stopped()),
                },
            };
            let full = std::mem::replace(&mut self.buf, next);
            if io.tx.send(full).is_err() {
                return Err(self.stopped());
            }
            return Ok(());
        }
        if self.mode == Mode::Untried {
            set_direct(&self.file, true);
        }
        write_whole(&self.file, self.buf.bytes(BLOCK))?;
        self.mode = if self.mode != Mode::Buffered && is_direct(&self.file) { Mode::Direct } else { Mode::Buffered };
        if self.mode == Mode::Direct {
            // Direct writes work here: later blocks are written while the next fills
            // (without a thread, they are written here).
            self.io = Io::start(&self.file);
        }
        Ok(())
    }

    /// The error of a writing thread that stopped early (it stops only on one).
    fn stopped(&mut self) -> io::Error {
        match self.io.take().map(Io::finish) {
            Some(Err(e)) => e,
            _ => io::Error::other("the writing thread stopped"),
        }
    }

    /// Copies as much of `data` as fits, writing the block when it fills.
    fn take(&mut self, data: &[u8]) -> io::Result<usize> {
        self.check()?;
        let n = data.len().min(BLOCK - self.len);
        self.buf.put(self.len, &data[..n]);
        self.len += n;
        if self.len == BLOCK {
            let r = self.write_block();
            self.note(r)?;
        }
        Ok(n)
    }
}

impl Write for FileWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        self.take(data)
    }

    fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.take(data)?;
            data = &data[n..];
        }
        Ok(())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut total = 0;
        for b in bufs {
            let n = self.take(b)?;
            total += n;
            if n < b.len() {
                break;
            }
        }
        Ok(total)
    }

    /// Ordinary writes (streams) send what is buffered; a file that may go direct
    /// keeps a partial block until [`FileWriter::finish`], as a partial block written
    /// now would leave later blocks unaligned. Either way, reports an earlier failure.
    fn flush(&mut self) -> io::Result<()> {
        self.check()?;
        if self.mode != Mode::Buffered {
            return Ok(());
        }
        let r = self.write_out();
        self.note(r)
    }
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        // As `BufWriter`: what is buffered is written, errors are for `finish` to report.
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way of writing gives the same bytes: sizes around the block and alignment
    /// boundaries, written in odd-sized and vectored pieces, with direct writes allowed
    /// and not.
    #[test]
    fn bytes_out_equal_bytes_in() {
        let dir = std::env::temp_dir().join(format!("rollstat-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut rng = crate::generate::rng::Rng::new(7);
        for (k, &size) in
            [0, 1, ALIGN - 1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + ALIGN + 17, 5 * BLOCK + 3].iter().enumerate()
        {
            let data: Vec<u8> = (0..size).map(|_| rng.next_u64() as u8).collect();
            for new_file in [true, false] {
                let path = dir.join(format!("f{k}-{new_file}"));
                let mut w = FileWriter::new(File::create(&path).unwrap(), new_file);
                let mut at = 0;
                let mut step = 1;
                while at < data.len() {
                    let end = (at + step).min(data.len());
                    if step % 3 == 0 {
                        let mid = at + (end - at) / 2;
                        let mut parts = [IoSlice::new(&data[at..mid]), IoSlice::new(&data[mid..end])];
                        let mut rest = &mut parts[..];
                        while !rest.is_empty() {
                            let n = w.write_vectored(rest).unwrap();
                            IoSlice::advance_slices(&mut rest, n);
                        }
                    } else {
                        w.write_all(&data[at..end]).unwrap();
                    }
                    at = end;
                    step = step * 7 % 3_000_001 + 1;
                }
                // A flush in the middle changes nothing for the bytes.
                w.flush().unwrap();
                w.finish().unwrap();
                w.finish().unwrap();
                drop(w);
                assert_eq!(std::fs::read(&path).unwrap(), data, "size {size}, new file {new_file}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A failed write is reported by every later call: a second `finish` (or a drop)
    /// cannot turn it into a success.
    #[test]
    fn a_failure_stays_reported() {
        let dir = std::env::temp_dir().join(format!("rollstat-direct-fail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("read-only");
        std::fs::write(&path, b"").unwrap();
        for new_file in [true, false] {
            // Opened for reading only: every write to it fails.
            let mut w = FileWriter::new(File::open(&path).unwrap(), new_file);
            let block = vec![7u8; BLOCK];
            assert!(w.write_all(&block).is_err(), "the first full block cannot be written");
            assert!(w.write_all(b"more").is_err());
            assert!(w.flush().is_err());
            assert!(w.finish().is_err());
            assert!(w.finish().is_err());
            // A small write that never reached the file fails at the end.
            let mut w = FileWriter::new(File::open(&path).unwrap(), new_file);
            w.write_all(b"small").unwrap();
            assert!(w.finish().is_err());
            assert!(w.finish().is_err());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
