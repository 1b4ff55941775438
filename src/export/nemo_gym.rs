//! NeMo Gym's artifact names (`S_reward_profiling.jsonl`, `S_agent_metrics.json`,
//! `S_repeat_level_metrics.json`, `S_aggregate_metrics.json`) and the small compact
//! arrays. The large task-level artifacts are streamed by [`super::tasks`].

use std::path::{Path, PathBuf};

use super::atomic::is_stream;
use crate::error::{Error, Msg, Opt};
use crate::json::{write_compact, Json};

/// `S_<suffix>.<ext>` beside `rollouts` (or in `dir`), where S is the rollouts file's stem
/// (`rollouts` when they come from a pipe or device).
pub fn artifact_path(rollouts: &Path, dir: Option<&Path>, suffix: &str, ext: &str) -> PathBuf {
    // A pipe's name (`/dev/fd/63`) says nothing about its rollouts.
    // A compressed file is named for what it holds: `run.jsonl.gz` gives `run_…`.
    let plain = match rollouts.extension().and_then(|e| e.to_str()) {
        Some("gz" | "zst") => rollouts.with_extension(""),
        _ => rollouts.to_path_buf(),
    };
    let stem = match plain.file_stem() {
        Some(s) if !is_stream(rollouts) => s.to_string_lossy().into_owned(),
        _ => "rollouts".into(),
    };
    let folder = match dir {
        Some(d) => d.to_path_buf(),
        None => rollouts.parent().map(|p| p.to_path_buf()).unwrap_or_default(),
    };
    folder.join(format!("{stem}_{suffix}.{ext}"))
}

/// A compact JSON array.
pub fn compact_array(entries: &[Json]) -> Vec<u8> {
    let mut out = Vec::new();
    write_compact(&mut out, &Json::Arr(entries.to_vec()));
    out
}

/// Refuses a run that would write its artifacts beside rollouts that come from a pipe
/// or device (there is no folder to write beside): `flag` names the option to pass.
pub fn check_beside(files: &[PathBuf], flag: Opt) -> crate::error::Result<()> {
    if files.len() > 1 {
        let msg = Msg::default().text(format!(
            "{} rollouts files were given, so there is no one file to name the output after; pass ",
            files.len()
        ));
        return Err(Error::refused(None, msg.opt(flag)));
    }
    let Some(rollouts) = files.first() else { return Ok(()) };
    if rollouts.is_dir() {
        return Err(crate::error::Error::bad(
            crate::error::Location::file(rollouts),
            "is a folder; give the rollouts file inside it (the `.jsonl` that `gym eval run` wrote)",
        ));
    }
    if is_stream(rollouts) {
        let msg = Msg::default().text(
            "not a regular file (a pipe or device?), so there is no folder to write the artifacts beside it; pass ",
        );
        return Err(Error::refused(Some(crate::error::Location::file(rollouts)), msg.opt(flag)));
    }
    Ok(())
}
