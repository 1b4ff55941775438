//! NeMo Gym's JSON artifacts, byte for byte in shape: the profile's
//! `S_reward_profiling.jsonl` (one compact task entry per line), `S_agent_metrics.json`
//! and `S_repeat_level_metrics.json` (compact arrays), and the aggregate's
//! `S_aggregate_metrics.json` (indented by two spaces).

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::json::{write_compact, write_indented, Json};

/// `S_<suffix>.<ext>` beside `rollouts` (or in `dir`), where S is the rollouts file's stem.
pub fn artifact_path(rollouts: &Path, dir: Option<&Path>, suffix: &str, ext: &str) -> PathBuf {
    let stem = rollouts.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "rollouts".into());
    let folder = match dir {
        Some(d) => d.to_path_buf(),
        None => rollouts.parent().map(|p| p.to_path_buf()).unwrap_or_default(),
    };
    folder.join(format!("{stem}_{suffix}.{ext}"))
}

/// One compact JSON document per line, serialized in parallel.
pub fn jsonl(entries: &[Json]) -> Vec<u8> {
    let parts: Vec<Vec<u8>> = entries
        .par_chunks(256)
        .map(|chunk| {
            let mut out = Vec::new();
            for e in chunk {
                write_compact(&mut out, e);
                out.push(b'\n');
            }
            out
        })
        .collect();
    parts.concat()
}

/// A compact JSON array.
pub fn compact_array(entries: &[Json]) -> Vec<u8> {
    let mut out = Vec::new();
    write_compact(&mut out, &Json::Arr(entries.to_vec()));
    out
}

/// An array indented by two spaces (entries serialized in parallel).
pub fn indented_array(entries: &[Json]) -> Vec<u8> {
    if entries.is_empty() {
        return b"[]".to_vec();
    }
    let parts: Vec<Vec<u8>> = entries
        .par_iter()
        .map(|e| {
            let mut out = b"\n  ".to_vec();
            write_indented(&mut out, e, 1);
            out
        })
        .collect();
    let mut out = b"[".to_vec();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(p);
    }
    out.extend_from_slice(b"\n]");
    out
}
