//! The optional folder of NeMo Gym's own example files and the conformance cases built on
//! them, which the repository does not carry (they are NeMo Gym's data): a folder holding
//! `conformance/` laid out as `tests/fixtures/conformance`. Both the integration tests and
//! the library's unit tests include this file.

use std::path::{Path, PathBuf};

/// Whether this machine must have every fixture and tool CI has: `ROLLSTAT_REQUIRE_SHARED=1`
/// (set by .ci/run when the folder is there). Then a test that would skip for want of one
/// fails instead.
pub fn require_shared() -> bool {
    std::env::var_os("ROLLSTAT_REQUIRE_SHARED").is_some_and(|v| v == "1")
}

/// The folder's `conformance/`: under `ROLLSTAT_SHARED` when set (which must then hold
/// it), else under `../shared` beside the repository when present.
pub fn shared_conformance() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("ROLLSTAT_SHARED").filter(|d| !d.is_empty()) {
        let c = Path::new(&dir).join("conformance");
        assert!(c.is_dir(), "ROLLSTAT_SHARED={}: holds no conformance/ folder", Path::new(&dir).display());
        return Some(c);
    }
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance");
    c.is_dir().then_some(c)
}

/// Says what the running test left out and why (`why`), in one line on stderr that the
/// test harness does not capture (so a plain `cargo test` shows it, and .ci/run lists such
/// lines at its end); under `ROLLSTAT_REQUIRE_SHARED=1` fails instead.
pub fn skipped(why: &str) {
    use std::io::Write;
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    assert!(!require_shared(), "{why}, and ROLLSTAT_REQUIRE_SHARED=1 says this machine has everything CI has");
    // Written to the stream itself: the harness captures only `eprintln!` and friends.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// The case folders (those with `marker`) of `group` of the optional folder whose names
/// `keep` accepts, sorted; none, with the line [`skipped`] writes, when it is absent.
pub fn example_cases(group: &str, marker: &str, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Some(root) = shared_conformance() else {
        skipped(&format!(
            "no folder of NeMo Gym's example files, so its cases in conformance/{group} did not run \
             (ROLLSTAT_SHARED=DIR runs them)"
        ));
        return Vec::new();
    };
    let dir = root.join(group);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        skipped(&format!("{} is missing", dir.display()));
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.join(marker).is_file() && p.file_name().and_then(|n| n.to_str()).is_some_and(&keep))
        .collect();
    out.sort();
    out
}
