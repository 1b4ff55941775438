//! The viewer over a lake: the sweeps it serves are read from the files the lake recorded
//! for them, each checked by size and checksum first, and each sweep is a run named by
//! its id; a sweep whose files are gone is read from the lake's tables, without its
//! transcripts. The overview lists every sweep of the lake with its labels and sizes.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::export::lake::partition;
use crate::query::lake::{files_of, sweep_sources, sweeps, SweepRow};

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
    /// Per run file: a rollouts file the sweep recorded, or (when its files are gone or
    /// changed) the sweep's `rollouts` partition in the lake.
    pub rollouts: Vec<PathBuf>,
    /// Per run file: why its transcripts are not shown (`None`: read from the file the
    /// sweep recorded).
    pub gone: Vec<Option<String>>,
    /// One inputs file per rollouts file, or none at all.
    pub inputs: Vec<PathBuf>,
    /// Per rollouts file, the sweep it belongs to.
    pub sweep_of_file: Vec<String>,
    /// Every sweep of the lake, oldest first.
    pub listing: Vec<SweepRow>,
    /// What the reading let through (inputs left out, sweeps served from the tables).
    pub notes: Vec<String>,
}

/// Resolves the sweeps to serve into their recorded files, each checked by size and
/// checksum. A sweep whose files are missing or changed since it was added (or were
/// recorded without saying which holds what) is served from the lake's own tables: its
/// numbers browse, and why its prompts and transcripts are not shown is said.
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
        gone: Vec::new(),
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
        let checked = sweep_sources(&l.dir, id)?;
        let problems: Vec<String> = checked.iter().filter_map(|s| s.problem()).collect();
        let files = if problems.is_empty() {
            files_of(&l.dir, id, checked).map_err(|e| e.to_string())
        } else {
            Err(format!("the files it was computed from are not as recorded: {}", problems.join("; ")))
        };
        match files {
            Ok(files) => {
                let (rollouts, given) = (&files.rollouts, &files.inputs);
                for r in rollouts {
                    out.rollouts.push(r.clone());
                    out.gone.push(None);
                    out.sweep_of_file.push(id.clone());
                    inputs.push((rollouts.len() == 1 && given.len() == 1).then(|| given[0].clone()));
                }
            }
            Err(why) => {
                let table = partition(&l.dir, "rollouts", id);
                if !table.is_file() {
                    return Err(Error::Mismatch(format!(
                        "sweep {id}: {why}; and the lake holds no rollouts table for it"
                    )));
                }
                out.notes.push(format!(
                    "sweep {id} is served from the lake's tables ({}): its numbers are the lake's, and its prompts, \
                     transcripts, dataset fields, health verdicts and failures are not shown: {why}",
                    table.display()
                ));
                out.rollouts.push(table);
                out.gone.push(Some(format!("sweep {id}: {why}")));
                out.sweep_of_file.push(id.clone());
                inputs.push(None);
            }
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
