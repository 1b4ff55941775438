//! `rollstat profile`: NeMo Gym's `gym eval profile` — strict alignment of rollouts with
//! their materialized inputs, then task, agent and repeat levels. Writes
//! `S_reward_profiling.jsonl`, `S_agent_metrics.json` and `S_repeat_level_metrics.json`
//! beside the rollouts file (or in --out-dir) and prints the completion summary.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, MetricArgs, RolloutsFile};
use crate::error::Result;
use crate::workflow::{ProfileConfig, ProfileRun};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Materialized inputs JSONL (one row per expected rollout).
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: PathBuf,
    #[command(flatten)]
    pub rollouts: RolloutsFile,
    /// Profile what completed when some input rows have no rollout.
    #[arg(long)]
    pub allow_partial: bool,
    /// Folder for the three artifacts (default: beside the rollouts file; created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    #[command(flatten)]
    pub metrics: MetricArgs,
    #[command(flatten)]
    pub lake: common::LakeArgs,
}

impl Args {
    /// The validated configuration.
    pub fn config(&self) -> Result<ProfileConfig> {
        Ok(ProfileConfig {
            inputs: self.inputs.clone(),
            rollouts: self.rollouts.paths(),
            allow_partial: self.allow_partial,
            out_dir: self.out_dir.clone(),
            metrics: self.metrics.resolve()?,
            lake: self.lake.target()?,
        })
    }
}

pub fn run(a: Args) -> Result<()> {
    let r = crate::workflow::profile(&a.config()?)?;
    let warnings = common::print_warnings(&r.warnings);
    print_summary(&r, warnings);
    Ok(())
}

/// Prints the completion summary and where the artifacts went; `warnings`: how many
/// were printed.
pub fn print_summary(r: &ProfileRun, warnings: usize) {
    let s = &r.summary;
    if common::quiet() {
        for f in &r.files {
            say!("Wrote {}", f.display());
        }
        if let Some(l) = &r.lake {
            say!("{}", l.summary());
        }
        return;
    }
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
    if let Some(f) = r.failures.as_ref().filter(|f| f.dropped_total() > 0) {
        let classes: Vec<String> = f.dropped.iter().map(|(c, n)| format!("{n} {c}")).collect();
        say!(
            "Failed attempts without a result: {} ({}; see the _failures.jsonl sidecar)",
            f.dropped_total(),
            classes.join(", ")
        );
    }
    say!("Reward profiling outputs: {}", r.files[0].display());
    say!("Agent-level metrics: {}", r.files[1].display());
    say!("Repeat-level metrics: {}", r.files[2].display());
    if let Some(l) = &r.lake {
        say!("{}", l.summary());
    }
    if warnings > 0 {
        say!("Warnings: {warnings} (on stderr)");
    }
}
