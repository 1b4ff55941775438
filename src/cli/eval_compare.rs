//! `rollstat eval-compare`: NeMo Gym's `gym eval compare` — a baseline run against
//! candidate runs, read from their `_aggregate_metrics.json` files, written as
//! `compare_report.md` and `compare_report.json`.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args as ClapArgs, ValueEnum};

use super::common;
use crate::error::Result;
use crate::export::eval_compare::{key_metric_lines, summary_lines};
use crate::metrics::eval_compare::AgentChoice;
use crate::workflow::{EvalCompareConfig, ReportFormat};

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Md,
    Json,
    Both,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// The baseline run's rollouts JSONL: names the run; its `<stem>_aggregate_metrics.json`
    /// beside it is read (the JSONL itself need not exist).
    #[arg(long, value_name = "PATH")]
    pub baseline: String,
    /// Candidate runs' rollouts JSONL paths, comma-separated.
    #[arg(long, value_name = "PATH[,PATH…]", value_delimiter = ',', required = true)]
    pub candidates: Vec<String>,
    /// The baseline's aggregate metrics file, instead of the one beside its rollouts.
    #[arg(long, value_name = "FILE")]
    pub baseline_agg_metrics: Option<String>,
    /// The candidates' aggregate metrics files, one per candidate, comma-separated.
    #[arg(long, value_name = "FILE[,FILE…]", value_delimiter = ',')]
    pub candidates_agg_metrics: Option<Vec<String>>,
    /// Compare this agent on every side (default: every agent all runs have).
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// The baseline's agent (over --agent).
    #[arg(long, value_name = "NAME")]
    pub baseline_agent: Option<String>,
    /// Each candidate's agent, by position, comma-separated (over --agent).
    #[arg(long, value_name = "NAME[,NAME…]", value_delimiter = ',')]
    pub candidate_agents: Option<Vec<String>>,
    /// Folder for the reports (created when missing; default: the last candidate's folder).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Which reports to write.
    #[arg(long, value_enum, default_value_t = Format::Both)]
    pub report_format: Format,
    /// Compute a missing aggregate metrics file from its rollouts first (as `rollstat
    /// aggregate` does) instead of refusing; the file is written where it was looked for.
    #[arg(long)]
    pub compute_missing: bool,
    /// How the runs' task entries are paired; each run's rollouts are read for their
    /// task fingerprints (or `--task-key` values). With `--allow-task-mismatch` the
    /// report's bytes are NeMo Gym's, with a warning counting the mismatched pairs.
    #[command(flatten)]
    pub pairing: common::Pairing,
}

/// Python's `shlex.quote`: words of safe characters as they are, anything else in single
/// quotes (an inner `'` as `'"'"'`), the empty word as `''`.
pub fn shell_quote(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    let safe = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if s.chars().all(safe) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

/// The command line `args` (the program name first, whatever path it was run by),
/// shell-quoted, as `rollstat …`.
pub fn command_line(args: &[OsString]) -> String {
    std::iter::once("rollstat".to_string())
        .chain(args.iter().skip(1).map(|a| shell_quote(&a.to_string_lossy())))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Args {
    /// The validated configuration; `command` is how the report names the invocation.
    pub fn config(&self, command: String) -> Result<EvalCompareConfig> {
        let cwd = std::env::current_dir().map_err(|e| crate::error::Error::read(std::path::Path::new("."), e))?;
        Ok(EvalCompareConfig {
            baseline: self.baseline.clone(),
            candidates: self.candidates.clone(),
            baseline_aggregate: self.baseline_agg_metrics.clone(),
            candidate_aggregates: self.candidates_agg_metrics.clone(),
            agents: AgentChoice {
                agent: self.agent.clone(),
                baseline_agent: self.baseline_agent.clone(),
                candidate_agents: self.candidate_agents.clone(),
            },
            output_dir: self.output_dir.clone(),
            format: match self.report_format {
                Format::Md => ReportFormat::Markdown,
                Format::Json => ReportFormat::Json,
                Format::Both => ReportFormat::Both,
            },
            compute_missing: self.compute_missing,
            pairing: self.pairing.config(),
            command,
            cwd,
        })
    }
}

/// Runs the comparison; `command` is what the report's `Command:` line records.
pub fn run(a: Args, command: String) -> Result<()> {
    let r = crate::workflow::eval_compare(&a.config(command)?)?;
    common::print_warnings(&r.warnings);
    // Agents left out are listed in the report; say so here too, without counting them
    // as warnings (NeMo Gym does not raise them).
    for w in &r.comparison.warnings {
        eprintln!("note: {w}");
    }
    // The reports name resolved paths, as NeMo Gym's do; the terminal recap names files
    // under the working folder relative to it, as the user would type them.
    let here = std::env::current_dir().map(|d| format!("{}/", d.display())).unwrap_or_default();
    let shown = |line: String| if here.len() > 1 { line.replace(&here, "") } else { line };
    for f in &r.computed {
        say!("{}", shown(format!("Computed missing aggregate metrics: {}", f.display())));
    }
    if !common::quiet() {
        for l in key_metric_lines(&r.comparison) {
            say!("{l}");
        }
    }
    for l in summary_lines(&r.comparison) {
        say!("{}", shown(l));
    }
    for f in &r.files {
        say!("{}", shown(format!("Wrote: {}", f.display())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python's shlex.quote on the same words.
    #[test]
    fn quotes_as_shlex() {
        assert_eq!(shell_quote("base/rollouts.jsonl"), "base/rollouts.jsonl");
        assert_eq!(shell_quote("--agent"), "--agent");
        assert_eq!(shell_quote("my run.jsonl"), "'my run.jsonl'");
        assert_eq!(shell_quote("it's"), "'it'\"'\"'s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a*b"), "'a*b'");
    }
}
