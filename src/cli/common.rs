//! Pieces shared by subcommands: where the closing report goes, printing warnings, and
//! the custom-metric flags.

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use crate::error::Result;
use crate::workflow::Metrics;

/// `-q`: print only which files were written.
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_quiet(on: bool) {
    QUIET.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `-q` asked for only the files written.
pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// Whether report lines go to stderr (an output of this command is stdout).
static SAY_ON_STDERR: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sends report lines to stderr from now on when one of `outputs` is this process's
/// stdout (`--out /dev/stdout`, or the file or pipe stdout is redirected to).
pub fn outputs_to_stdout(outputs: &[&Path]) {
    if outputs.iter().any(|p| crate::export::atomic::is_stdout(p)) {
        SAY_ON_STDERR.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The body of the `say!` macro.
pub fn say_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if SAY_ON_STDERR.load(std::sync::atomic::Ordering::Relaxed) {
        let _ = writeln!(std::io::stderr().lock(), "{args}");
    } else {
        let _ = writeln!(std::io::stdout().lock(), "{args}");
    }
}

/// How runs' tasks are paired: the one argument group of every command that compares
/// runs task by task.
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct Pairing {
    /// Pair tasks by `_ng_task_index` even where the runs hold different tasks there (as
    /// NeMo Gym does), with a warning counting them, instead of refusing.
    #[arg(long)]
    pub allow_task_mismatch: bool,
    /// How tasks are paired: `index` (`_ng_task_index`, checked to hold the same task in
    /// both runs) or `fingerprint` (what the task asks — its user messages — wherever it
    /// sits, for a shuffled or re-ordered dataset; tasks without a partner are left out).
    #[arg(long, value_enum, default_value_t = PairBy::Index, value_name = "HOW")]
    pub pair_by: PairBy,
    /// Pair tasks by this identity field of your own (`question_id`), wherever they
    /// sit: every rollout of a task must carry one value of it, unique in its file.
    #[arg(long, value_name = "FIELD")]
    pub task_key: Option<String>,
}

/// `--pair-by`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PairBy {
    #[default]
    Index,
    Fingerprint,
}

impl Pairing {
    /// The pairing the workflows take (validated there).
    pub fn config(&self) -> crate::metrics::task_identity::Pairing {
        crate::metrics::task_identity::Pairing {
            allow_mismatch: self.allow_task_mismatch,
            by_fingerprint: self.pair_by == PairBy::Fingerprint,
            task_key: self.task_key.clone(),
        }
    }
}

/// `--lake DIR` with the sweep's id and labels: the one argument group of every command
/// that can add its sweep to a lake.
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct LakeArgs {
    /// Add the sweep's rollouts, tasks, agents and repeats tables to this lake (a folder
    /// of Hive-partitioned Parquet, created when missing), with a row in its `sweeps` table.
    #[arg(long, value_name = "DIR")]
    pub lake: Option<PathBuf>,
    /// The sweep's id in the lake (default: derived from the files' contents, so adding
    /// the same files again replaces the sweep rather than adding it twice).
    #[arg(long, value_name = "ID", requires = "lake")]
    pub sweep_id: Option<String>,
    /// A label of the sweep, `KEY=VALUE` (repeatable): `--label model=llama --label step=4000`.
    /// Labels are columns of the `sweeps` table and of every query over the lake.
    #[arg(long = "label", value_name = "KEY=VALUE", requires = "lake")]
    pub labels: Vec<String>,
}

impl LakeArgs {
    /// The lake to add the sweep to, when one is given, checked before any reading.
    pub fn target(&self) -> Result<Option<crate::workflow::lake::LakeTarget>> {
        let Some(dir) = &self.lake else { return Ok(None) };
        crate::workflow::lake::LakeTarget::new(dir.clone(), self.sweep_id.clone(), &self.labels).map(Some)
    }
}

/// The rollouts file of one run, as `--rollouts FILE` or as the first argument, with
/// the inputs that label it: the one argument group of every command that reads one run.
#[derive(ClapArgs, Debug, Clone)]
pub struct RunFiles {
    #[command(flatten)]
    pub rollouts: RolloutsFile,
    /// Materialized inputs JSONL: labels each rollout by its input row's agent and
    /// environment server.
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Option<PathBuf>,
    /// Label for rollouts that name no agent (without it such rollouts are an error).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
}

impl RunFiles {
    pub fn rollouts(&self) -> Vec<PathBuf> {
        self.rollouts.paths()
    }
}

/// The rollouts files of one or more runs (`compare`, `report`): positional or as
/// `--rollouts`, repeatable, with their inputs.
#[derive(ClapArgs, Debug, Clone)]
pub struct RunsFiles {
    /// Rollouts JSONL, or a rollouts table (.parquet) from `rollstat ingest`/`export`;
    /// repeat to take runs from several files (tasks are matched by `_ng_task_index`,
    /// so the files must come from the same task list).
    #[arg(long, value_name = "ROLLOUTS.jsonl")]
    pub rollouts: Vec<PathBuf>,
    /// The rollouts files, when not given as --rollouts.
    #[arg(value_name = "ROLLOUTS.jsonl", conflicts_with = "rollouts")]
    pub files: Vec<PathBuf>,
    /// Materialized inputs JSONL for run labels: none, or one per --rollouts, in order.
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Vec<PathBuf>,
    /// Label for rollouts that name no agent.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
}

impl RunsFiles {
    /// The rollouts files, however they were given.
    pub fn rollouts(&self) -> Vec<PathBuf> {
        if self.rollouts.is_empty() {
            self.files.clone()
        } else {
            self.rollouts.clone()
        }
    }
}

/// The rollouts files of one run, as `--rollouts FILE` (repeatable) or as the first
/// arguments (`profile`, whose materialized inputs are required, takes it alone).
#[derive(ClapArgs, Debug, Clone)]
pub struct RolloutsFile {
    /// Rollouts JSONL as `gym eval run` wrote it (also .jsonl.gz or .jsonl.zst); repeat
    /// it for a run written as several files, which are read as one.
    #[arg(long = "rollouts", value_name = "ROLLOUTS.jsonl", conflicts_with = "rollouts_arg")]
    rollouts_flag: Vec<PathBuf>,
    /// The rollouts file(s), when not given as --rollouts.
    #[arg(value_name = "ROLLOUTS.jsonl", required_unless_present = "rollouts_flag")]
    rollouts_arg: Vec<PathBuf>,
}

impl RolloutsFile {
    /// The rollouts files, however they were given (clap requires at least one).
    pub fn paths(&self) -> Vec<PathBuf> {
        if self.rollouts_flag.is_empty() {
            self.rollouts_arg.clone()
        } else {
            self.rollouts_flag.clone()
        }
    }
}

/// Custom-metric flags shared by `profile` and `aggregate`.
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct MetricArgs {
    /// Add a metric to agent_metrics: pass_at_k, reward_variance, or a SQL metric from
    /// queries/metrics/ or --metric-dir (repeatable).
    #[arg(long = "metric", value_name = "NAME")]
    pub metric: Vec<String>,
    /// Folder of extra SQL metrics (NAME.sql each).
    #[arg(long, value_name = "DIR")]
    pub metric_dir: Option<PathBuf>,
    /// Field holding the extracted answer (enables majority@k and no_answer in pass_at_k).
    #[arg(long, value_name = "FIELD")]
    pub answer_key: Option<String>,
    /// Field naming each task's subset (pass_at_k per subset as <subset>/<key>).
    #[arg(long, value_name = "FIELD")]
    pub subset_key: Option<String>,
    /// Delta degrees of freedom of reward_variance (0 = population variance).
    #[arg(long, default_value_t = 0)]
    pub ddof: usize,
}

impl MetricArgs {
    /// The metrics asked for, resolved, with the SQL files they were read from.
    pub fn resolve(&self) -> Result<Metrics> {
        Metrics::resolve(
            &self.metric,
            self.metric_dir.as_deref(),
            self.answer_key.as_deref(),
            self.subset_key.as_deref(),
            self.ddof,
        )
    }
}

thread_local! {
    /// The warnings the running command has printed (a command runs on one thread).
    static SAID: std::cell::RefCell<std::collections::HashSet<String>> = Default::default();
}

/// Forgets the warnings printed so far: a new command starts.
pub fn new_command() {
    SAID.with(|s| s.borrow_mut().clear());
}

/// Prints the warnings this command has not printed yet (a command whose steps each
/// raise one says it once) and returns how many it printed, counting repeats.
pub fn print_warnings(w: &crate::metrics::warnings::Warnings) -> usize {
    SAID.with(|said| {
        let mut said = said.borrow_mut();
        let mut printed = 0;
        for ((m, c), line) in w.items().iter().zip(w.lines()) {
            if said.insert(m.clone()) {
                eprintln!("{line}");
                printed += c;
            }
        }
        printed
    })
}

pub use crate::workflow::made_at;
