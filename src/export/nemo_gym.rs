//! NeMo Gym's artifact names (`S_reward_profiling.jsonl`, `S_agent_metrics.json`,
//! `S_repeat_level_metrics.json`, `S_aggregate_metrics.json`) and the small compact
//! arrays. The large task-level artifacts are streamed by [`super::tasks`].

use std::path::{Path, PathBuf};

use super::json::{write_compact, Json};

/// `S_<suffix>.<ext>` beside `rollouts` (or in `dir`), where S is the rollouts file's stem.
pub fn artifact_path(rollouts: &Path, dir: Option<&Path>, suffix: &str, ext: &str) -> PathBuf {
    let stem = rollouts.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "rollouts".into());
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
