//! `rollstat health`: the rollout health check alone — fourteen deterministic checks
//! over the rollout records and their `ng_trajectory` evidence, written as
//! `quality_summary.json` and `rollout_verdicts.jsonl`.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use crate::error::{Error, Result};
use crate::export::atomic::OutputSet;
use crate::health::{check, parse_ignored, Source};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Rollouts JSONL files, read in order as one run.
    #[arg(value_name = "ROLLOUTS.jsonl", required = true)]
    pub rollouts: Vec<PathBuf>,
    /// Folder for quality_summary.json and rollout_verdicts.jsonl (default: the first
    /// file's folder).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Checks to skip, comma-separated (repeatable): they are not run and count as
    /// ignored.
    #[arg(long, value_name = "CHECKS")]
    pub ignore_checks: Vec<String>,
}

pub fn run(a: Args) -> Result<()> {
    let ignored = parse_ignored(&a.ignore_checks)?;
    let dir = match &a.out_dir {
        Some(d) => d.clone(),
        None => a.rollouts[0].parent().map(PathBuf::from).unwrap_or_default(),
    };
    if !dir.as_os_str().is_empty() && !dir.is_dir() {
        return Err(Error::Usage(format!("{}: the output folder does not exist", dir.display())));
    }
    let read: Vec<&std::path::Path> = a.rollouts.iter().map(PathBuf::as_path).collect();
    let mut out = OutputSet::new(&read);
    let paths = crate::workflow::aggregate::health_paths(&dir.join("x"));
    for p in &paths {
        out.check(p)?;
    }
    let maps = a.rollouts.iter().map(|f| crate::ingest::lines::map_whole(f)).collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = a.rollouts.iter().map(|p| p.display().to_string()).collect();
    let sources: Vec<Source> = names.iter().zip(&maps).map(|(n, m)| Source { name: n, bytes: &m[..] }).collect();
    let h = check(&sources, &ignored)?;
    out.add(&paths[0], &h.summary)?;
    out.add(&paths[1], &h.verdicts)?;
    out.commit()?;
    if !super::common::quiet() {
        say!("{}", h.summary_line());
    }
    say!("Quality summary: {}", paths[0].display());
    Ok(())
}
