//! The files a run writes beside each rollouts shard, and which given files are shards.
//!
//! A run writes its successes to `S.jsonl`, every failed attempt to `S_failures.jsonl`
//! (one JSON object per attempt, the failure's class in `_ng_failure_class`) and the
//! rollouts it owed to `S_materialized_inputs.jsonl`. Those two are never shards
//! themselves, so a pattern like `rollouts-*.jsonl` may name them freely.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::error::{Error, Location, Result};
use crate::json::Json;

/// The suffix of a shard's failures sidecar (after the shard's stem).
pub const FAILURES: &str = "_failures";
/// The suffix of a shard's materialized inputs.
pub const MATERIALIZED: &str = "_materialized_inputs";

/// The shards among `given`: files whose stem (the name without its last suffix) ends in
/// [`FAILURES`] or [`MATERIALIZED`] are left out, and a file named twice is read once.
pub fn shards(given: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in given {
        let stem = p.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default();
        if stem.ends_with(FAILURES) || stem.ends_with(MATERIALIZED) {
            continue;
        }

        let real = |f: &Path| std::fs::canonicalize(f).ok();
        if out.iter().any(|q| q == p || real(q).is_some_and(|q| Some(q) == real(p))) {
            continue;
        }
        out.push(p.clone());
    }
    if out.is_empty() {
        let names: Vec<String> = given.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::Usage(format!(
            "no rollouts shard among {}: files ending in {FAILURES}.jsonl or {MATERIALIZED}.jsonl are what a run \
             writes beside its shards, not shards",
            names.join(", ")
        )));
    }
    Ok(out)
}

/// The file a run writes beside shard `dir/S.jsonl`: `dir/S<suffix>.jsonl`.
pub fn beside(shard: &Path, suffix: &str) -> PathBuf {
    let stem = shard.file_stem().map(|s| s.to_string_lossy()).unwrap_or_default();
    shard.with_file_name(format!("{stem}{suffix}.jsonl"))
}

/// One JSON object per line, with its 1-based line number.
pub type ObjectLines = Vec<(u64, Json)>;

/// Reads a file of JSON objects, one per line (blank lines are skipped but counted).
/// Every other line must be one strict JSON object: a malformed line (`NaN` included),
/// or one holding another JSON value, is refused with its file and line.
pub fn read_objects(path: &Path, what: &str) -> Result<ObjectLines> {
    let bytes = std::fs::read(path).map_err(|e| Error::read(path, e))?;
    let mut lines: Vec<(u64, &[u8])> = Vec::new();
    for (i, l) in bytes.split(|&c| c == b'\n').enumerate() {
        if !l.iter().all(u8::is_ascii_whitespace) {
            lines.push((i as u64 + 1, l));
        }
    }
    lines
        .into_par_iter()
        .map(|(n, l)| {
            let v = crate::json::parse(l)
                .map_err(|e| Error::bad(Location::line(path, n), format!("malformed JSON: {e}")))?;
            if !v.all_finite() {
                return Err(Error::bad(
                    Location::line(path, n),
                    "malformed JSON: NaN and Infinity are not JSON numbers",
                ));
            }
            match v {
                Json::Obj(_) => Ok((n, v)),
                other => Err(Error::bad(
                    Location::line(path, n),
                    format!("expected a JSON object ({what}), found {}", other.kind()),
                )),
            }
        })
        .collect()
}

/// Whether a shard holds no rollout line at all (a run whose every attempt failed).
/// Reads only up to the first byte that is not whitespace.
pub fn is_blank(path: &Path) -> bool {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(path) else { return false };
    let mut buf = [0u8; 8192];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) if buf[..n].iter().all(u8::is_ascii_whitespace) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_and_repeats_are_not_shards() {
        let given: Vec<PathBuf> = ["a.jsonl", "a_failures.jsonl", "a_materialized_inputs.jsonl", "b.jsonl", "a.jsonl"]
            .map(PathBuf::from)
            .into();
        assert_eq!(shards(&given).unwrap(), vec![PathBuf::from("a.jsonl"), PathBuf::from("b.jsonl")]);
        assert!(shards(&given[1..3]).is_err());
        assert_eq!(beside(Path::new("d/run.jsonl"), FAILURES), PathBuf::from("d/run_failures.jsonl"));
    }
}
