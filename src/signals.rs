//! Interrupted runs leave nothing behind.
//!
//! [`install`] (called first thing by the binary, before any other thread exists) blocks
//! SIGINT and SIGTERM in every thread and starts one thread that waits for them with
//! `sigwait`. When one arrives, that thread (ordinary code, not a signal handler) takes
//! the registry lock, removes every temporary file still registered and every folder the
//! run created that is empty again, and ends the process with `_exit(128 + signal)`:
//! 130 for SIGINT, 143 for SIGTERM. Holding the lock means a cleanup never races a
//! commit: a commit that has started finishes before the cleanup looks, and a cleanup
//! that has started keeps any commit from starting.
//!
//! Temporaries are mostly invisible already (see [`crate::export::atomic`]: `O_TMPFILE`
//! files have no name and vanish with the process, even after SIGKILL); the registry
//! holds the named ones (file systems without `O_TMPFILE`, and the instant between
//! naming a finished file and renaming it over the destination).
//!
//! A memory-mapped input that another process truncates raises SIGBUS on the next read
//! of a page past the new end. The SIGBUS handler checks that the faulting address lies in
//! a registered input mapping ([`MappedInput`]); if so it records which one and sends
//! SIGTERM to the process, which the waiting thread turns into the same cleanup, a
//! message naming the file, and exit status 2. The handler itself only reads atomics and
//! calls `kill` and `pause`, which are async-signal-safe. A SIGBUS anywhere else keeps
//! the default action (the process dies with the signal).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

/// What a cleanup removes.
#[derive(Default)]
pub struct Registry {
    temps: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    /// Outputs already renamed into place: complete, and kept by a cleanup.
    written: Vec<PathBuf>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { temps: Vec::new(), dirs: Vec::new(), written: Vec::new() });
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The registry, locked (a panic elsewhere does not stop cleanups).
pub fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

impl Registry {
    /// A named temporary file to remove if the run is interrupted.
    pub fn add_temp(&mut self, p: &Path) {
        self.temps.push(p.to_path_buf());
    }
    pub fn remove_temp(&mut self, p: &Path) {
        if let Some(i) = self.temps.iter().rposition(|t| t == p) {
            self.temps.swap_remove(i);
        }
    }
    /// A folder this run created, removed (when empty) if the run is interrupted.
    pub fn add_dir(&mut self, p: &Path) {
        self.dirs.push(p.to_path_buf());
    }
    pub fn remove_dir(&mut self, p: &Path) {
        if let Some(i) = self.dirs.iter().rposition(|t| t == p) {
            self.dirs.remove(i);
        }
    }
    /// An output now complete at its path. An interrupt after this keeps it and says so.
    /// Kept only where [`install`] owns the signals (a library caller's registry would
    /// otherwise grow with every output).
    pub fn add_written(&mut self, p: &Path) {
        if INSTALLED.load(Ordering::SeqCst) {
            self.written.push(p.to_path_buf());
        }
    }
    /// Removes every registered temporary, then the registered folders, newest first
    /// (a folder still holding a file is kept: nothing but our own temporaries is
    /// removed). Returns how many temporaries were removed.
    fn clean(&mut self) -> usize {
        let n = self.temps.iter().filter(|t| std::fs::remove_file(t).is_ok()).count();
        self.temps.clear();
        for d in self.dirs.drain(..).rev() {
            let _ = std::fs::remove_dir(d);
        }
        n
    }
}

/// Slots for input mappings watched for SIGBUS.
const SLOTS: usize = 32;
static MAP_START: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static MAP_LEN: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static MAP_PATH: Mutex<[Option<PathBuf>; SLOTS]> = Mutex::new([const { None }; SLOTS]);
/// 1 + the slot whose mapping faulted (0: none).
static FAULTED: AtomicUsize = AtomicUsize::new(0);

/// An input mapping watched for SIGBUS while this value lives.
pub struct MappedInput {
    slot: Option<usize>,
}

impl MappedInput {
    /// Watches `len` bytes at `start`, the mapping of `path`.
    pub fn new(start: *const u8, len: usize, path: &Path) -> MappedInput {
        let mut paths = MAP_PATH.lock().unwrap_or_else(|e| e.into_inner());
        for (i, p) in paths.iter_mut().enumerate() {
            if p.is_none() {
                *p = Some(path.to_path_buf());
                MAP_LEN[i].store(len, Ordering::SeqCst);
                MAP_START[i].store(start as usize, Ordering::SeqCst);
                return MappedInput { slot: Some(i) };
            }
        }
        MappedInput { slot: None }
    }
}

impl Drop for MappedInput {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            MAP_START[i].store(0, Ordering::SeqCst);
            MAP_LEN[i].store(0, Ordering::SeqCst);
            MAP_PATH.lock().unwrap_or_else(|e| e.into_inner())[i] = None;
        }
    }
}

extern "C" fn on_sigbus(_sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for an SA_SIGINFO handler.
    let addr = unsafe { (*info).si_addr() } as usize;
    for i in 0..SLOTS {
        let start = MAP_START[i].load(Ordering::SeqCst);
        let len = MAP_LEN[i].load(Ordering::SeqCst);
        if start != 0 && addr >= start && addr - start < len {
            FAULTED.store(i + 1, Ordering::SeqCst);
            // SAFETY: kill and pause are async-signal-safe. The waiting thread cleans up
            // and ends the process; this thread must not return to the faulting read.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGTERM);
                loop {
                    libc::pause();
                }
            }
        }
    }
    // Not one of our input mappings: the default action, as if no handler were set.
    // SAFETY: signal and raise are async-signal-safe.
    unsafe {
        libc::signal(libc::SIGBUS, libc::SIG_DFL);
        libc::raise(libc::SIGBUS);
    }
}

thread_local! {
    /// The cancel flag of the call running on this thread, if any (see [`cancellable`]).
    static CANCEL: std::cell::RefCell<Option<std::sync::Arc<AtomicBool>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `work` on this thread with `flag` as its cancel flag: once the flag is set, no
/// output of the run is committed ([`cancelled`] is checked under the registry lock
/// before any rename) and the run stops at its next check with
/// [`crate::Error::Interrupted`]. For callers that own the process's signals (a Python
/// interpreter, which turns Ctrl-C into `KeyboardInterrupt`) rather than [`install`].
pub fn cancellable<T>(flag: std::sync::Arc<AtomicBool>, work: impl FnOnce() -> T) -> T {
    CANCEL.with(|c| *c.borrow_mut() = Some(flag));
    let out = work();
    CANCEL.with(|c| *c.borrow_mut() = None);
    out
}

/// Whether the call running on this thread was cancelled.
pub fn cancelled() -> bool {
    CANCEL.with(|c| c.borrow().as_ref().is_some_and(|f| f.load(Ordering::SeqCst)))
}

/// Stops a cancelled run here: `Err(Interrupted)` once its cancel flag is set.
pub fn check_cancelled() -> crate::Result<()> {
    if cancelled() {
        Err(crate::Error::Interrupted)
    } else {
        Ok(())
    }
}

/// Installs the cleanup on SIGINT and SIGTERM and the SIGBUS check. Call while the
/// process has one thread: the signal mask set here is inherited by every thread
/// started later. Does nothing the second time.
pub fn install() {
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: sigset and sigaction calls on local, initialized values.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        let waiter = std::thread::Builder::new().name("rollstat-signals".into()).spawn(move || wait(set));
        if waiter.is_err() {
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            return;
        }
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

/// Names the outputs an interrupted run had already completed (a signal can arrive
/// between the last rename and the end of the process).
fn written_note(written: &[PathBuf]) -> String {
    let shown: Vec<String> = written.iter().take(3).map(|p| p.display().to_string()).collect();
    let more = written.len().saturating_sub(shown.len());
    let tail = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("already complete and kept: {}{tail}", shown.join(", "))
}

fn wait(set: libc::sigset_t) {
    let mut sig: libc::c_int = 0;
    loop {
        // SAFETY: `set` and `sig` are valid for the call.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
            break;
        }
    }
    let mut reg = registry();
    let removed = reg.clean();
    let faulted = FAULTED.load(Ordering::SeqCst);
    let code = if faulted > 0 {
        let paths = MAP_PATH.lock().unwrap_or_else(|e| e.into_inner());
        let name = paths[faulted - 1].as_deref().map_or("an input file".into(), |p| p.display().to_string());
        eprintln!(
            "rollstat: error: {name}: the file shrank while it was being read (truncated by another \
             process?); nothing was written"
        );
        2
    } else {
        let what = if sig == libc::SIGINT { "interrupted" } else { "terminated" };
        let mut parts = Vec::new();
        if removed > 0 {
            parts.push(format!("removed {removed} unfinished output file(s)"));
        }
        if !reg.written.is_empty() {
            parts.push(written_note(&reg.written));
        }
        if parts.is_empty() {
            eprintln!("\nrollstat: {what}");
        } else {
            eprintln!("\nrollstat: {what}; {}", parts.join("; "));
        }
        128 + sig
    };
    // SAFETY: _exit ends the process without running destructors or atexit handlers,
    // none of which may run while other threads are mid-write.
    unsafe { libc::_exit(code) }
}
