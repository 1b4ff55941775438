//! `ROLLSTAT_TRACE=1`: phase timings and memory on stderr, for finding where time goes.

/// When the command started, for the trace's `at` times.
static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Marks the start of the command (the trace's time zero).
pub fn start() {
    START.get_or_init(std::time::Instant::now);
}

/// With `ROLLSTAT_TRACE` set, prints how long a phase took to stderr, with the time since
/// the start, the resident memory now and at its peak so far, and the CPU time so far.
pub fn trace(what: &str, since: std::time::Instant) {
    if std::env::var_os("ROLLSTAT_TRACE").is_some() {
        use std::io::IsTerminal;
        // On a terminal, start a clean row: a status note may be showing.
        if std::io::stderr().is_terminal() {
            clear_line();
        }
        let at = START.get().map_or(String::new(), |t| format!(" (at {:.3}s)", t.elapsed().as_secs_f64()));
        eprintln!("trace: {what}: {:.3}s{at}{}{}", since.elapsed().as_secs_f64(), memory(), cpu());
    }
}

/// With `ROLLSTAT_TRACE` set, prints a point in the run (no phase length) to stderr,
/// with the same time since the start, memory and CPU as [`trace`].
pub fn mark(what: &str) {
    if std::env::var_os("ROLLSTAT_TRACE").is_some() {
        let at = START.get().map_or(String::new(), |t| format!(" at {:.3}s", t.elapsed().as_secs_f64()));
        eprintln!("trace: {what}{at}{}{}", memory(), cpu());
    }
}

/// `, cpu N s` — the process's user and system time so far (empty where unknown).
fn cpu() -> String {
    // SAFETY: `rusage` is plain integers, for which all zero bytes is a valid value.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable `rusage` for the call to fill.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return String::new();
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    format!(", cpu {:.2}s user + {:.2}s sys so far", secs(u.ru_utime), secs(u.ru_stime))
}

/// `, rss N MB (peak M MB)` from /proc (empty elsewhere).
pub fn memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |k: &str| -> Option<u64> {
        let l = status.lines().find(|l| l.starts_with(k))?;
        l[k.len()..].trim().trim_end_matches(" kB").trim().parse().ok()
    };
    match (field("VmRSS:"), field("VmHWM:")) {
        (Some(now), Some(peak)) => format!(", rss {} MB (peak {} MB)", now / 1024, peak / 1024),
        _ => String::new(),
    }
}

/// Files at least this large get notes on the terminal (the reading progress line, then
/// [`Status`]): `ROLLSTAT_PROGRESS_MIN_BYTES`, else 256 MB.
pub fn progress_min_bytes() -> u64 {
    static MIN: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MIN.get_or_init(|| {
        std::env::var("ROLLSTAT_PROGRESS_MIN_BYTES").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(256 << 20)
    })
}

/// Whether a file of `bytes` gets notes: stderr is a terminal and the file is large.
pub fn notes_shown(bytes: u64) -> bool {
    use std::io::IsTerminal;
    bytes >= progress_min_bytes() && std::io::stderr().is_terminal()
}

/// Replaces the terminal's current row with `line` (cut to the terminal's width).
pub fn show_line(line: &str) {
    eprint!("\r{}\x1b[K", fit_terminal(line));
}

/// Empties the terminal's current row.
pub fn clear_line() {
    eprint!("\r\x1b[2K");
}

/// A one-line note on stderr of what a long run is doing after reading (statistics,
/// writing), shown when [`notes_shown`] for its largest input file; cleared when dropped.
pub struct Status {
    on: std::cell::Cell<bool>,
}

impl Status {
    /// For a run whose largest input file has `input_bytes`.
    pub fn new(input_bytes: u64) -> Status {
        Status { on: std::cell::Cell::new(notes_shown(input_bytes)) }
    }

    pub fn say(&self, what: &str) {
        if self.on.get() {
            show_line(&format!("{what}…"));
        }
    }

    /// Says that `path` is being written, unless it is a device or pipe (`--out
    /// /dev/stdout` on the same terminal): then the note is cleared and stays off, so it
    /// never mixes with the output.
    pub fn writing(&self, path: &std::path::Path) {
        // A device or pipe: it exists and is not a regular file.
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            self.clear();
            self.on.set(false);
        } else {
            self.say(&format!("writing {}", file_name(path)));
        }
    }

    fn clear(&self) {
        if self.on.get() {
            clear_line();
        }
    }
}

impl Drop for Status {
    fn drop(&mut self) {
        self.clear();
    }
}

/// A path's last component, for status lines (the whole path when it has none).
pub fn file_name(path: &std::path::Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Cuts a status line to the terminal's width (stderr), so it never wraps: a wrapped
/// line would leave a row behind on every redraw.
fn fit_terminal(line: &str) -> std::borrow::Cow<'_, str> {
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes a winsize into the pointer it is given, which is valid.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    let width = if ok && ws.ws_col > 1 { ws.ws_col as usize - 1 } else { return line.into() };
    match line.char_indices().nth(width) {
        Some((at, _)) => line[..at].to_string().into(),
        None => line.into(),
    }
}
