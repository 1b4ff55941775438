//! `rollstat profile`: NeMo Gym's `gym eval profile` — strict alignment of rollouts with
//! their materialized inputs, then task, agent and repeat levels (SPEC §4). Writes
//! `S_reward_profiling.jsonl`, `S_agent_metrics.json` and `S_repeat_level_metrics.json`
//! beside the rollouts file (or in --out-dir) and prints the completion summary.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, MetricArgs};

use crate::error::{Error, Location, Result};
use crate::export::atomic::{is_stream, stream_error, OutputSet};
use crate::export::json::Json;
use crate::export::nemo_gym::{artifact_path, check_beside, compact_array};
use crate::export::tasks::write_tasks;
use crate::metrics::profile::{profile, CompletionSummary};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Materialized inputs JSONL (one row per expected rollout).
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: PathBuf,
    /// Rollouts JSONL.
    #[arg(long, value_name = "ROLLOUTS.jsonl")]
    pub rollouts: PathBuf,
    /// Profile what completed when some input rows have no rollout.
    #[arg(long)]
    pub allow_partial: bool,
    /// Folder for the three artifacts (default: beside the rollouts file).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    #[command(flatten)]
    pub metrics: MetricArgs,
}

/// What a profile run wrote.
pub struct ProfileRun {
    pub files: Vec<PathBuf>,
    pub summary: CompletionSummary,
    pub agents: Vec<Json>,
    pub warnings: usize,
}

pub fn run(a: Args) -> Result<()> {
    let r = execute(&a)?;
    print_summary(&r);
    Ok(())
}

pub fn print_summary(r: &ProfileRun) {
    let s = &r.summary;
    say!("Profiling outputs:");
    say!(
        "Reward profile completion: {}/{} rollout rows ({:.2}%)",
        s.completed_rollout_rows,
        s.expected_rollout_rows,
        s.reward_profile_completion_pct
    );
    say!(
        "Input rows: {} total; {} complete; {} partial; {} without rollouts dropped from output.",
        s.total_input_rows,
        s.complete_input_rows,
        s.partial_input_rows,
        s.missing_input_rows
    );
    say!("Masked from quality metrics: {} rollout rows (kept in completion accounting above).", s.masked_rollout_rows);
    say!("Reward profiling outputs: {}", r.files[0].display());
    say!("Agent-level metrics: {}", r.files[1].display());
    say!("Repeat-level metrics: {}", r.files[2].display());
    if r.warnings > 0 {
        say!("Warnings: {} (on stderr)", r.warnings);
    }
}

/// Runs the profile; `--out-dir` is created when missing, as `export` creates its folder,
/// and removed again (when still empty) if the run fails.
pub fn execute(a: &Args) -> Result<ProfileRun> {
    match &a.out_dir {
        Some(dir) => crate::export::atomic::in_out_dir(dir, || execute_in(a)),
        None => execute_in(a),
    }
}

fn execute_in(a: &Args) -> Result<ProfileRun> {
    if !a.metrics.key_metric.is_empty() {
        return Err(Error::Usage(
            "--key-metric selects the key metrics of `aggregate`; profile artifacts have none".into(),
        ));
    }
    for f in [&a.inputs, &a.rollouts] {
        if f.is_dir() {
            return Err(Error::bad(Location::file(f), "is a folder; expected a JSONL file"));
        }
    }
    let specs = a.metrics.specs()?;
    let dir = a.out_dir.as_deref();
    if dir.is_none() {
        check_beside(&a.rollouts, "--out-dir DIR")?;
    }
    let paths = [
        artifact_path(&a.rollouts, dir, "reward_profiling", "jsonl"),
        artifact_path(&a.rollouts, dir, "agent_metrics", "json"),
        artifact_path(&a.rollouts, dir, "repeat_level_metrics", "json"),
    ];
    let sql = a.metrics.files_read();
    let ins: Vec<&std::path::Path> =
        [a.inputs.as_path(), a.rollouts.as_path()].into_iter().chain(sql.iter().map(PathBuf::as_path)).collect();
    let mut out = OutputSet::new(&ins);
    for p in &paths {
        out.check(p)?;
    }
    // Each task entry's `sample` is its input row, re-read from the file after the
    // statistics: a pipe cannot be read twice, so it is refused before reading anything.
    if is_stream(&a.inputs) {
        return Err(Error::bad(
            Location::file(&a.inputs),
            "not a regular file (a pipe or device?); profile reads the materialized inputs twice (statistics, then each task's sample row), so save them to a file first",
        ));
    }
    let (t, inputs) = common::read_both(&a.rollouts, Some(&a.inputs))?;
    let inputs = inputs.expect("inputs were given");
    let status = common::status_after_read(&t, Some(&inputs));
    status.say("computing statistics");
    let t0 = std::time::Instant::now();
    let mut res = profile(&t, &inputs, a.allow_partial)?;
    common::trace("statistics", t0);
    if !specs.is_empty() {
        super::aggregate::merge_custom_profile(&t, Some(&inputs), &specs, &mut res.agents, &mut res.warnings)?;
    }
    let t0 = std::time::Instant::now();
    status.writing(&paths[0]);
    let mut w = out.create(&paths[0])?;
    if let Some(plan) = &res.tasks {
        write_tasks(plan, None, &mut w).map_err(|e| stream_error(&paths[0], e))?;
    }
    w.finish().map_err(|e| Error::write(&paths[0], e))?;
    drop(w);
    common::trace("task entries + write", t0);
    out.add(&paths[1], &compact_array(&res.agents))?;
    out.add(&paths[2], &compact_array(&res.repeats))?;
    drop(status);
    let files = out.commit()?;
    let warnings = common::print_warnings(&res.warnings);
    Ok(ProfileRun { files, summary: res.summary, agents: res.agents, warnings })
}
