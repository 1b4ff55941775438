//! `ROLLSTAT_TRACE=1`: phase timings and memory on stderr, for finding where time goes.

/// With `ROLLSTAT_TRACE` set, prints how long a phase took to stderr, with the resident
/// memory now and at its peak so far.
pub fn trace(what: &str, since: std::time::Instant) {
    if std::env::var_os("ROLLSTAT_TRACE").is_some() {
        eprintln!("trace: {what}: {:.3}s{}", since.elapsed().as_secs_f64(), memory());
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

/// A one-line note on stderr of what a long run is doing after its progress bar ends
/// (statistics, writing), shown only when stderr is a terminal and the input is large
/// enough for the reading progress line to have shown; cleared when dropped.
pub struct Status {
    on: bool,
}

impl Status {
    /// For a run whose largest input file has `input_bytes`.
    pub fn new(input_bytes: u64) -> Status {
        use std::io::IsTerminal;
        Status { on: input_bytes >= crate::ingest::lines::progress_min_bytes() && std::io::stderr().is_terminal() }
    }
    pub fn say(&self, what: &str) {
        if self.on {
            eprint!("\r{what}…\x1b[K");
        }
    }
}

impl Drop for Status {
    fn drop(&mut self) {
        if self.on {
            eprint!("\r\x1b[2K");
        }
    }
}
