//! The health workflow: the rollout health check alone, over one run's rollouts files,
//! written as `quality_summary.json` and `rollout_verdicts.jsonl`.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::export::atomic::{in_out_dir, OutputSet};
use crate::health::{check, Health, Source};

/// Which rollouts to check and where the reports go.
#[derive(Debug, Clone, Default)]
pub struct HealthConfig {
    /// The rollouts files, read in order as one run.
    pub rollouts: Vec<PathBuf>,
    /// Folder for both reports (created when missing; `None`: the first file's folder).
    pub out_dir: Option<PathBuf>,
    /// Checks to skip (validated by [`crate::health::parse_ignored`]).
    pub ignored: Vec<String>,
}

/// Checks the rollouts and writes both reports; returns the result and the summary's
/// path.
pub fn health(c: &HealthConfig) -> Result<(Health, PathBuf)> {
    match &c.out_dir {
        Some(d) => in_out_dir(d, || check_into(&c.rollouts, d, &c.ignored)),
        None => {
            let dir = c.rollouts.first().and_then(|r| r.parent()).map(PathBuf::from).unwrap_or_default();
            check_into(&c.rollouts, &dir, &c.ignored)
        }
    }
}

/// Checks `rollouts` and writes both reports into `dir`.
fn check_into(rollouts: &[PathBuf], dir: &Path, ignored: &[String]) -> Result<(Health, PathBuf)> {
    let read: Vec<&Path> = rollouts.iter().map(PathBuf::as_path).collect();
    let mut out = OutputSet::new(&read);
    let paths = super::aggregate::health_paths(&dir.join("x"));
    for p in &paths {
        out.check(p)?;
    }
    let maps = rollouts.iter().map(|f| crate::ingest::lines::map_whole(f)).collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = rollouts.iter().map(|p| p.display().to_string()).collect();
    let sources: Vec<Source> = names.iter().zip(&maps).map(|(n, m)| Source { name: n, bytes: &m[..] }).collect();
    let h = check(&sources, ignored)?;
    let files = (out.create(&paths[0])?, out.create(&paths[1])?);
    super::aggregate::write_reports(&h, files, &paths)?;
    out.commit()?;
    let [summary, _] = paths;
    Ok((h, summary))
}
