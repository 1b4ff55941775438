//! The profile workflow, NeMo Gym's `gym eval profile`: strict alignment of rollouts with
//! their materialized inputs, then the task, agent and repeat levels, written as
//! `S_reward_profiling.jsonl`, `S_agent_metrics.json` and `S_repeat_level_metrics.json`
//! beside the rollouts file (or in an output folder).

use std::path::{Path, PathBuf};

use super::custom::{merge_into_profile, Metrics};
use super::{read_both, status_after_read};
use crate::error::{Error, Location, Opt, Result};
use crate::export::atomic::{in_out_dir, is_stream, OutputSet};
use crate::export::nemo_gym::{artifact_path, check_beside, compact_array};
use crate::export::tasks::write_tasks;
use crate::ingest::{InputTable, RolloutTable};
use crate::json::Json;
use crate::metrics::profile::CompletionSummary;
use crate::metrics::warnings::Warnings;
use crate::trace::trace;

/// What to profile and where the artifacts go.
#[derive(Debug, Clone)]
pub struct ProfileConfig {
    /// Materialized inputs JSONL: one row per expected rollout. Must be a regular file:
    /// each task's `sample` is re-read from it after the statistics.
    pub inputs: PathBuf,
    /// The run's rollouts files (one, or the shards it was written as).
    pub rollouts: Vec<PathBuf>,
    /// Profile what completed when some input rows have no rollout.
    pub allow_partial: bool,
    /// Folder for the three artifacts (created when missing); `None`: beside the rollouts.
    pub out_dir: Option<PathBuf>,
    pub metrics: Metrics,
    /// Also add the run's tables to this lake of sweeps.
    pub lake: Option<super::lake::LakeTarget>,
}

/// What a profile run wrote.
pub struct ProfileRun {
    /// The reward profile, agent metrics and repeat-level metrics files, in that order.
    pub files: Vec<PathBuf>,
    pub summary: CompletionSummary,
    /// The agent entries written to the agent metrics file.
    pub agents: Vec<Json>,
    pub warnings: Warnings,
    /// The failed attempts of the run's failures sidecar that no result replaced
    /// (`None`: no sidecar beside the rollouts).
    pub failures: Option<crate::metrics::failures::Coverage>,
    /// The sweep added to the lake, when one was given.
    pub lake: Option<super::lake::LakeRun>,
}

/// Runs the profile. An output folder that this call creates is removed again (when
/// still empty) if the run fails.
pub fn profile(c: &ProfileConfig) -> Result<ProfileRun> {
    match &c.out_dir {
        Some(dir) => in_out_dir(dir, || profile_in(c)),
        None => profile_in(c),
    }
}

fn profile_in(c: &ProfileConfig) -> Result<ProfileRun> {
    for f in std::iter::once(&c.inputs).chain(&c.rollouts) {
        if f.is_dir() {
            return Err(Error::bad(Location::file(f), "is a folder; give the JSONL file inside it"));
        }
    }
    let dir = c.out_dir.as_deref();
    if dir.is_none() {
        check_beside(&c.rollouts, Opt::value("out_dir", "DIR"))?;
    }
    let paths = profile_paths(&c.rollouts[0], dir);
    let ins: Vec<&Path> = std::iter::once(c.inputs.as_path())
        .chain(c.rollouts.iter().map(PathBuf::as_path))
        .chain(c.metrics.files.iter().map(PathBuf::as_path))
        .collect();
    let out = OutputSet::new(&ins);
    for p in &paths {
        out.check(p)?;
    }
    check_inputs(&c.inputs)?;
    // Fingerprints only for the lake's `tasks` table.
    let opts = crate::ingest::ReadOptions { fingerprints: c.lake.is_some(), evidence: false };
    let (t, inputs) = read_both(&c.rollouts, Some(&c.inputs), opts)?;
    let inputs = inputs.expect("inputs were given");
    let failures = super::aggregate::failures_beside(&c.rollouts, &t)?;
    let mut run = profile_table(c, &t, &inputs, out, &paths)?;
    run.failures = failures;
    Ok(run)
}

/// The reward profile, agent metrics and repeat-level metrics files for `rollouts`,
/// beside it or in `dir`.
pub fn profile_paths(rollouts: &Path, dir: Option<&Path>) -> [PathBuf; 3] {
    [
        artifact_path(rollouts, dir, "reward_profiling", "jsonl"),
        artifact_path(rollouts, dir, "agent_metrics", "json"),
        artifact_path(rollouts, dir, "repeat_level_metrics", "json"),
    ]
}

/// Refuses materialized inputs that cannot be read twice.
pub fn check_inputs(inputs: &Path) -> Result<()> {
    // Each task entry's `sample` is its input row, re-read from the file after the
    // statistics: a pipe cannot be read twice, so it is refused before reading anything.
    if is_stream(inputs) {
        return Err(Error::bad(
            Location::file(inputs),
            "not a regular file (a pipe or device?); profile reads the materialized inputs twice (statistics, then each task's sample row), so save them to a file first",
        ));
    }
    if crate::ingest::lines::is_compressed(inputs) {
        return Err(Error::bad(
            Location::file(inputs),
            "is compressed; profile re-reads each task's sample row from the materialized inputs, so give them decompressed (`gunzip -k` or `zstd -d`); compressed rollouts are fine",
        ));
    }
    Ok(())
}

/// The statistics and the three artifacts `paths` (staged in `out`, committed here)
/// from tables already read: `profile` after reading its files, `merge` after reading
/// slices.
pub fn profile_table(
    c: &ProfileConfig,
    t: &RolloutTable,
    inputs: &InputTable,
    mut out: OutputSet,
    paths: &[PathBuf; 3],
) -> Result<ProfileRun> {
    let status = status_after_read(t, Some(inputs));
    status.say("computing statistics");
    let t0 = std::time::Instant::now();
    let mut res = crate::metrics::profile::profile(t, inputs, c.allow_partial)?;
    trace("statistics", t0);
    // The rollouts table SQL metrics ran over, kept for the lake's tables.
    let mut frame = None;
    if !c.metrics.is_empty() {
        frame = merge_into_profile(t, Some(inputs), &c.metrics.specs, &mut res.agents, &mut res.warnings)?
            .filter(|_| c.lake.is_some());
    }
    let t0 = std::time::Instant::now();
    status.writing(&paths[0]);
    let mut w = out.create(&paths[0])?;
    if let Some(plan) = &res.tasks {
        write_tasks(plan, None, &mut w).map_err(|e| e.at(&paths[0]))?;
    }
    w.finish().map_err(|e| Error::write(&paths[0], e))?;
    drop(w);
    trace("task entries + write", t0);
    out.add(&paths[1], &compact_array(&res.agents))?;
    out.add(&paths[2], &compact_array(&res.repeats))?;
    drop(status);
    // The lake before the files: a sweep the lake refuses leaves no file behind.
    let lake = match &c.lake {
        Some(to) => {
            let failed = super::aggregate::failures_beside(&c.rollouts, t)?.map(|c| c.failures).unwrap_or_default();
            let read: Vec<&Path> =
                std::iter::once(c.inputs.as_path()).chain(c.rollouts.iter().map(PathBuf::as_path)).collect();
            Some(super::lake::add_run(t, Some(inputs), None, &failed, frame, &read, to)?)
        }
        None => None,
    };
    let files = out.commit()?;
    Ok(ProfileRun { files, summary: res.summary, agents: res.agents, warnings: res.warnings, failures: None, lake })
}
