//! `rollstat generate`: a seeded, deterministic synthetic sweep in NeMo Gym's exact file
//! format (`materialized_inputs.jsonl` + `rollouts.jsonl`), for demos, tests and
//! benchmarks. 1M rollouts take seconds.

use std::path::PathBuf;

use clap::{Args as ClapArgs, ValueEnum};

use crate::error::{Error, Result};
use crate::generate::{GenerateOptions, RewardKind};

#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum Reward {
    Binary,
    Continuous,
    Mixed,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Number of tasks.
    #[arg(long, default_value_t = 100)]
    pub tasks: usize,
    /// Repeats (rollouts) per task and agent.
    #[arg(long, default_value_t = 4)]
    pub repeats: usize,
    /// Number of agents.
    #[arg(long, default_value_t = 2)]
    pub agents: usize,
    /// Random seed: same options and seed give the same bytes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seed of the tasks (prompts, answers, difficulty; default: --seed). Sweeps with
    /// one --task-seed and different --seed values ask the same questions with different
    /// outcomes: runs that `compare` pairs task by task.
    #[arg(long, value_name = "N")]
    pub task_seed: Option<u64>,
    /// Output folder (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Fraction of expected rollouts missing from rollouts.jsonl (a partial collection).
    #[arg(long, default_value_t = 0.0)]
    pub missing_frac: f64,
    /// Fraction of expected rollouts that failed: left out of rollouts.jsonl and recorded
    /// in rollouts_failures.jsonl, as a run writes its failed attempts.
    #[arg(long, default_value_t = 0.0)]
    pub failure_frac: f64,
    /// Fraction of rollouts with mask_sample: true.
    #[arg(long, default_value_t = 0.0)]
    pub masked_frac: f64,
    /// Reward kind.
    #[arg(long, value_enum, default_value_t = Reward::Mixed)]
    pub reward: Reward,
    /// Every agent runs every task (task indexes shared across agents).
    #[arg(long)]
    pub fan_out: bool,
    /// Stamp `_ng_environment_server` on rows (two servers front one agent with 3+ agents).
    #[arg(long)]
    pub env_server_stamp: bool,
    /// Fraction of rollouts with an `ng_perf` record.
    #[arg(long, default_value_t = 0.0)]
    pub ng_perf_frac: f64,
    /// Approximate bytes of model text per rollout line.
    #[arg(long, default_value_t = 1000)]
    pub text_bytes: usize,
    /// Write into a folder that already holds files (its rollouts.jsonl and
    /// materialized_inputs.jsonl are replaced; other files stay).
    #[arg(long)]
    pub force: bool,
}

impl Args {
    pub fn options(&self) -> GenerateOptions {
        GenerateOptions {
            tasks: self.tasks,
            repeats: self.repeats,
            agents: self.agents,
            seed: self.seed,
            task_seed: self.task_seed,
            missing_frac: self.missing_frac,
            failure_frac: self.failure_frac,
            masked_frac: self.masked_frac,
            reward: match self.reward {
                Reward::Binary => RewardKind::Binary,
                Reward::Continuous => RewardKind::Continuous,
                Reward::Mixed => RewardKind::Mixed,
            },
            fan_out: self.fan_out,
            env_server_stamp: self.env_server_stamp,
            ng_perf_frac: self.ng_perf_frac,
            text_bytes: self.text_bytes,
            threads: rayon::current_num_threads(),
        }
    }
}

/// Refuses an output folder that already holds files, unless `--force`: a new sweep
/// would replace the old one's data and leave its artifacts beside the new data.
fn check_out_dir(a: &Args) -> Result<()> {
    if a.force {
        return Ok(());
    }
    if let Ok(entries) = std::fs::read_dir(&a.out_dir) {
        // A temporary a killed run left is not the user's file (the run removes it).
        let mut entries = entries.flatten().filter(|e| !e.file_name().to_string_lossy().contains(".rollstat-tmp-"));
        if let Some(first) = entries.next() {
            return Err(Error::Usage(format!(
                "{}: the folder is not empty (it holds {}, among others); choose a new folder or pass --force to write the sweep there anyway",
                a.out_dir.display(),
                first.file_name().to_string_lossy()
            )));
        }
    }
    Ok(())
}

pub fn run(a: Args) -> Result<()> {
    let start = std::time::Instant::now();
    check_out_dir(&a)?;
    let s = crate::generate::generate_sweep(&a.options(), &a.out_dir)?;
    say!(
        "Wrote {} rollouts ({:.1} MB) to {} and {} input rows ({:.1} MB) to {} in {:.2}s",
        s.rollouts,
        s.bytes_rollouts as f64 / 1e6,
        s.rollouts_path.display(),
        s.expected,
        s.bytes_inputs as f64 / 1e6,
        s.inputs_path.display(),
        start.elapsed().as_secs_f64()
    );
    if let Some(f) = &s.failures_path {
        say!("Wrote the failed attempts to {}", f.display());
    }
    Ok(())
}
