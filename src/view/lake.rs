//! The viewer over a lake: the sweeps it serves are read from the files the lake recorded
//! for them, each checked by size and checksum first, and each sweep is a run named by
//! its id. The overview lists every sweep of the lake with its labels and sizes.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::query::lake::{sweep_files, sweeps, SweepRow};

/// Which sweeps of which lake to serve.
#[derive(Debug, Clone)]
pub struct LakeSweeps {
    pub dir: PathBuf,
    /// The sweeps to serve, the first the baseline; none: the lake's last two (or its
    /// one sweep), the older the baseline.
    pub sweeps: Vec<String>,
}

/// What serving a lake's sweeps reads, and what the overview lists.
pub struct LakeRuns {
    pub dir: PathBuf,
    pub rollouts: Vec<PathBuf>,
    /// One inputs file per rollouts file, or none at all.
    pub inputs: Vec<PathBuf>,
    /// Per rollouts file, the sweep it belongs to.
    pub sweep_of_file: Vec<String>,
    /// Every sweep of the lake, oldest first.
    pub listing: Vec<SweepRow>,
    /// What the reading let through (inputs left out).
    pub notes: Vec<String>,
}

/// Resolves the sweeps to serve into their recorded files, refusing a sweep whose files
/// are missing or changed since it was added (naming each such file and what differs),
/// as [`sweep_files`] does.
pub fn resolve(l: &LakeSweeps) -> Result<LakeRuns> {
    let listing = sweeps(&l.dir)?;
    let chosen: Vec<String> = if l.sweeps.is_empty() {
        listing.iter().rev().take(2).rev().map(|s| s.id.clone()).collect()
    } else {
        l.sweeps.clone()
    };
    let mut out = LakeRuns {
        dir: l.dir.clone(),
        rollouts: Vec::new(),
        inputs: Vec::new(),
        sweep_of_file: Vec::new(),
        listing,
        notes: Vec::new(),
    };
    let mut inputs: Vec<Option<PathBuf>> = Vec::new();
    for id in &chosen {
        if chosen.iter().filter(|c| *c == id).count() > 1 {
            return Err(Error::Usage(format!("--sweep {id} is given twice")));
        }
        let files = sweep_files(&l.dir, id)?;
        let (rollouts, given) = (&files.rollouts, &files.inputs);
        for r in rollouts {
            out.rollouts.push(r.clone());
            out.sweep_of_file.push(id.clone());
            inputs.push((rollouts.len() == 1 && given.len() == 1).then(|| given[0].clone()));
        }
    }
    if inputs.iter().all(Option::is_some) {
        out.inputs = inputs.into_iter().flatten().collect();
    } else if inputs.iter().any(Option::is_some) {
        out.notes.push(
            "the dataset's fields are not shown: not every sweep served recorded one inputs file for one rollouts file"
                .into(),
        );
    }
    Ok(out)
}

/// The run name of a sweep's run: the sweep id, and the run's label when the sweep's
/// file holds several runs.
pub fn run_name(sweep: &str, label: &str, runs_in_file: usize) -> String {
    if runs_in_file == 1 {
        sweep.to_string()
    } else {
        format!("{sweep}/{label}")
    }
}
