//! `rollstat health`: the rollout health check alone — fourteen deterministic checks
//! over the rollout records and their `ng_trajectory` evidence, written as
//! `quality_summary.json` and `rollout_verdicts.jsonl`.

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use crate::error::Result;
use crate::export::atomic::{in_out_dir, OutputSet};
use crate::health::{check, parse_ignored, Health, Source};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Rollouts JSONL files, read in order as one run.
    #[arg(value_name = "ROLLOUTS.jsonl", required = true)]
    pub rollouts: Vec<PathBuf>,
    /// Folder for quality_summary.json and rollout_verdicts.jsonl (created when missing;
    /// default: the first file's folder).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Checks to skip, comma-separated (repeatable): they are not run and count as
    /// ignored.
    #[arg(long, value_name = "CHECKS")]
    pub ignore_checks: Vec<String>,
}

pub fn run(a: Args) -> Result<()> {
    let ignored = parse_ignored(&a.ignore_checks)?;
    let (h, summary) = match &a.out_dir {
        Some(d) => in_out_dir(d, || check_into(&a.rollouts, d, &ignored))?,
        None => {
            let dir = a.rollouts[0].parent().map(PathBuf::from).unwrap_or_default();
            check_into(&a.rollouts, &dir, &ignored)?
        }
    };
    if !super::common::quiet() {
        say!("{}", h.summary_line());
    }
    say!("Quality summary: {}", summary.display());
    Ok(())
}

/// Checks `rollouts` and writes both reports into `dir`; returns the result and the
/// summary's path.
fn check_into(rollouts: &[PathBuf], dir: &Path, ignored: &[String]) -> Result<(Health, PathBuf)> {
    let read: Vec<&Path> = rollouts.iter().map(PathBuf::as_path).collect();
    let mut out = OutputSet::new(&read);
    let paths = crate::workflow::aggregate::health_paths(&dir.join("x"));
    for p in &paths {
        out.check(p)?;
    }
    let maps = rollouts.iter().map(|f| crate::ingest::lines::map_whole(f)).collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = rollouts.iter().map(|p| p.display().to_string()).collect();
    let sources: Vec<Source> = names.iter().zip(&maps).map(|(n, m)| Source { name: n, bytes: &m[..] }).collect();
    let h = check(&sources, ignored)?;
    let files = (out.create(&paths[0])?, out.create(&paths[1])?);
    crate::workflow::aggregate::write_reports(&h, files, &paths)?;
    out.commit()?;
    let [summary, _] = paths;
    Ok((h, summary))
}
