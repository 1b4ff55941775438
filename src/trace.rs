//! `ROLLSTAT_TRACE=1`: phase timings and memory on stderr, for finding where time goes.

/// With `ROLLSTAT_TRACE` set, prints how long a phase took to stderr, with the resident
/// memory now and at its peak so far.
pub fn trace(what: &str, since: std::time::Instant) {
    if std::env::var_os("ROLLSTAT_TRACE").is_some() {
        use std::io::IsTerminal;
        // On a terminal, start a clean row: a status note may be showing.
        let clear = if std::io::stderr().is_terminal() { "\r\x1b[2K" } else { "" };
        eprintln!("{clear}trace: {what}: {:.3}s{}", since.elapsed().as_secs_f64(), memory());
    }
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

/// A one-line note on stderr of what a long run is doing after reading (statistics,
/// writing), shown only when stderr is a terminal and an input file had at least
/// [`progress_min_bytes`](crate::ingest::lines::progress_min_bytes) bytes; cleared when
/// dropped.
pub struct Status {
    on: std::cell::Cell<bool>,
}

impl Status {
    /// For a run whose largest input file has `input_bytes`.
    pub fn new(input_bytes: u64) -> Status {
        use std::io::IsTerminal;
        let on = input_bytes >= crate::ingest::lines::progress_min_bytes() && std::io::stderr().is_terminal();
        Status { on: std::cell::Cell::new(on) }
    }

    pub fn say(&self, what: &str) {
        if self.on.get() {
            eprint!("\r{}\x1b[K", fit_terminal(&format!("{what}…")));
        }
    }

    /// Says that `path` is being written, unless it is a device or pipe (`--out
    /// /dev/stdout` on the same terminal): then the note is cleared and stays off, so it
    /// never mixes with the output.
    pub fn writing(&self, path: &std::path::Path) {
        let streamed = std::fs::metadata(path).map(|m| !m.is_file()).unwrap_or(false);
        if streamed {
            self.clear();
            self.on.set(false);
        } else {
            self.say(&format!("writing {}", file_name(path)));
        }
    }

    fn clear(&self) {
        if self.on.get() {
            eprint!("\r\x1b[2K");
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
pub fn fit_terminal(line: &str) -> std::borrow::Cow<'_, str> {
    let mut ws = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes a winsize into the pointer it is given, which is valid.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    let width = if ok && ws.ws_col > 1 { ws.ws_col as usize - 1 } else { return line.into() };
    match line.char_indices().nth(width) {
        Some((at, _)) => line[..at].to_string().into(),
        None => line.into(),
    }
}
