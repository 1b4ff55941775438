//! The command line: one file per subcommand, each with its `Args` and a `run()`.
//! Flags are validated here and turned into library calls; nothing below this layer
//! sees the argument parser.

use clap::{Parser, Subcommand};

use crate::error::{Error, Result};

/// Prints one line of a command's closing report (what it wrote, key metrics): on stdout,
/// or on stderr once [`common::outputs_to_stdout`] saw an output go to stdout, so that the
/// output stays clean there. A reader that went away (`| head`) is not an error here.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::common::say_line(format_args!($($arg)*))
    };
}

pub mod aggregate;
pub mod batch_metrics;
pub mod common;
pub mod compare;
pub mod completions;
pub mod demo;
pub mod eval_compare;
pub mod export;
pub mod gate;
pub mod generate;
pub mod health;
pub mod ingest;
pub mod join;
pub mod merge;
pub mod profile;
pub mod query;
pub mod report;
pub mod select;
pub mod shard;
pub mod view;

/// Fast statistics over LLM-eval and RL rollout results (NeMo Gym, VAGEN/verl).
#[derive(Parser, Debug)]
#[command(name = "rollstat", version, about, long_about = None)]
pub struct Cli {
    /// Worker threads (default: all cores). Output bytes do not depend on it.
    #[arg(long, global = true, value_name = "N")]
    pub threads: Option<usize>,
    /// Print only which files were written: no key metrics, summaries or counts.
    /// Warnings and errors still go to stderr; a command's data output is unchanged.
    #[arg(long, short, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Generate a small sweep into ./rollstat-demo/ and run profile and aggregate on it.
    Demo(demo::Args),
    /// Read a rollouts file (and optionally its materialized inputs) into a typed Parquet table.
    Ingest(ingest::Args),
    /// Generate a seeded synthetic sweep in NeMo Gym's exact file format.
    Generate(generate::Args),
    /// NeMo Gym's `gym eval profile`: task, agent and repeat levels from inputs + rollouts.
    Profile(profile::Args),
    /// NeMo Gym's `gym eval aggregate`: `_aggregate_metrics.json` per run label, failures
    /// and what the score covers, and the rollout health check.
    Aggregate(aggregate::Args),
    /// The rollout health check alone: quality_summary.json and rollout_verdicts.jsonl.
    Health(health::Args),
    /// Write the rollouts, tasks, agents and repeats tables as Parquet.
    Export(export::Args),
    /// Run SQL over the rollouts, tasks, agents and repeats tables.
    Query(query::Args),
    /// Metrics over VAGEN/verl training batches, as the flat JSON VAGEN logs.
    BatchMetrics(batch_metrics::Args),
    /// Runs against a baseline: paired differences per task, clustered standard errors.
    Compare(compare::Args),
    /// A release decision from a policy file of checks: PASS (exit 0), FAIL (3) or
    /// INCONCLUSIVE (4), with the statistics behind each check.
    Gate(gate::Args),
    /// One self-contained HTML page per sweep: leaderboard, comparisons, pass@k, difficulty, noise, cost.
    Report(report::Args),
    /// The next training set: tasks chosen from the reward profile (band, zero variance,
    /// quotas, weighted sampling), written as their exact input lines, with a manifest.
    Select(select::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::Args),
    /// NeMo Gym's `gym eval compare`: a baseline run against candidates, from their aggregate metrics files.
    EvalCompare(eval_compare::Args),
    /// Split one rollouts file into slices by bucket of tasks (for runs over many machines).
    Shard(shard::Args),
    /// Join one bucket's slices from every rollouts file of a sweep (also `partial`).
    #[command(alias = "partial")]
    Join(join::Args),
    /// aggregate or profile over a sharded sweep's slices: the same bytes as on one machine.
    Merge(merge::Args),
    /// A local web viewer over the runs: scores, tasks by how often they were solved,
    /// every rollout's transcript.
    View(view::Args),
}

/// The binary's whole life on `args` (the program name first): parses them, runs the
/// command, prints an error as `rollstat: error: …`, and returns the exit status (0
/// success, 1 our own failure, 2 bad input or usage, and `gate`'s 3 FAIL and 4
/// INCONCLUSIVE; a reader that went away is success). The `rollstat` binary and the
/// Python package's `rollstat` command both run this.
pub fn entry<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match main_from(args) {
        Ok(status) => {
            crate::trace::mark("done");
            status
        }
        Err(e) => {
            if let Error::Io { source, .. } = &e {
                if source.kind() == std::io::ErrorKind::BrokenPipe {
                    return 0;
                }
            }
            eprintln!("rollstat: error: {e}");
            if e.is_bad_input() {
                2
            } else {
                1
            }
        }
    }
}

/// Parses `args` (the program name first) and runs the command, owning the process:
/// it installs the signal cleanup and the worker pool. Returns the exit status of a
/// command that ran (0, or `gate`'s verdict).
pub fn main_from<I, T>(args: I) -> Result<u8>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    // First, while this is the only thread: every thread started later inherits the
    // signal mask that routes SIGINT and SIGTERM to the cleanup.
    crate::signals::install();
    crate::trace::start();
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let shown = eval_compare::command_line(&args);
    let cli = Cli::parse_from(args);
    common::set_quiet(cli.quiet);
    // Environment settings are made while this is the only thread.
    if let Command::Query(a) = &cli.command {
        query::set_table_layout(a);
    }
    // Worker stacks of 8 MB (address space, committed only as used): rows nested 1,024
    // levels deep are re-serialized recursively on them.
    let mut pool = rayon::ThreadPoolBuilder::new().stack_size(8 << 20);
    if let Some(n) = cli.threads {
        if n == 0 {
            return Err(Error::Usage("--threads must be at least 1".into()));
        }
        pool = pool.num_threads(n);
        // No other thread exists yet: the pools are built below.
        std::env::set_var("POLARS_MAX_THREADS", n.to_string());
    }
    pool.build_global().map_err(|e| Error::Usage(format!("--threads: {e}")))?;
    dispatch(cli.command, shown)
}

/// Runs `command` and gives its exit status (0 but for `gate`'s verdicts); `shown`
/// names the invocation in reports that record it.
fn dispatch(command: Command, shown: String) -> Result<u8> {
    common::new_command();
    let done = match command {
        Command::Demo(a) => demo::run(a),
        Command::Ingest(a) => ingest::run(a),
        Command::Generate(a) => generate::run(a),
        Command::Profile(a) => profile::run(a),
        Command::Aggregate(a) => aggregate::run(a),
        Command::Health(a) => health::run(a),
        Command::Export(a) => export::run(a),
        Command::Query(a) => query::run(a),
        Command::BatchMetrics(a) => batch_metrics::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Report(a) => report::run(a),
        Command::Select(a) => select::run(a),
        Command::Completions(a) => completions::run(a),
        Command::EvalCompare(a) => eval_compare::run(a, shown),
        Command::Shard(a) => shard::run(a),
        Command::Join(a) => join::run(a),
        Command::Merge(a) => merge::run(a),
        Command::View(a) => view::run(a),
        Command::Gate(a) => return gate::run(a),
    };
    done.map(|()| 0)
}
