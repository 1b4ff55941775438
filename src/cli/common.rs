//! Pieces shared by subcommands: reading inputs with warnings, labels per rollout,
//! custom-metric flags, samples for task entries.

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use crate::error::Result;
use crate::ingest::{self, InputTable, RolloutTable};
use crate::metrics::custom::{self, MetricSpec};

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

/// Prints read warnings (cut-off last lines) to stderr.
pub fn report_read_warnings(w: &[String]) {
    for m in w {
        eprintln!("warning: {m}");
    }
}

pub use crate::trace::trace;

/// The terminal note for the phases after reading `t` (and `inputs`): shown when the
/// larger file was large enough for a progress line.
pub fn status_after_read(t: &RolloutTable, inputs: Option<&InputTable>) -> crate::trace::Status {
    crate::trace::Status::new(t.report.bytes.max(inputs.map_or(0, |i| i.report.bytes)))
}

/// Reads rollouts and (optionally) inputs in parallel.
pub fn read_both(rollouts: &Path, inputs: Option<&Path>) -> Result<(RolloutTable, Option<InputTable>)> {
    let t0 = std::time::Instant::now();
    let (r, i) = rayon::join(|| ingest::read_rollouts(rollouts), || inputs.map(ingest::read_inputs));
    // Report the input file's problem first when both fail: it is read first by NeMo Gym.
    let i = i.transpose()?;
    let r = r?;
    report_read_warnings(&r.report.warnings);
    if let Some(i) = &i {
        report_read_warnings(&i.report.warnings);
    }
    trace("read", t0);
    Ok((r, i))
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
    /// Key metrics to select: exact names, `*` globs, or highest-k patterns like
    /// `pass@{k}` (repeatable; default every mean/* plus coverage).
    #[arg(long = "key-metric", value_name = "PATTERN")]
    pub key_metric: Vec<String>,
}

impl MetricArgs {
    /// The SQL files of `--metric-dir`, which outputs must not overwrite.
    pub fn files_read(&self) -> Vec<PathBuf> {
        let Some(d) = &self.metric_dir else { return Vec::new() };
        let Ok(rd) = std::fs::read_dir(d) else { return Vec::new() };
        rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "sql")).collect()
    }

    /// Resolves metric names to specs (built-ins first, then SQL files).
    pub fn specs(&self) -> Result<Vec<MetricSpec>> {
        let sql = crate::query::metric_files(self.metric_dir.as_deref())?;
        let mut out = Vec::new();
        for name in &self.metric {
            if let Some(m) = custom::builtin(name, self.answer_key.as_deref(), self.subset_key.as_deref(), self.ddof)? {
                if let (Some(d), true) = (&self.metric_dir, sql.iter().any(|(n, _)| n == name)) {
                    let file = d.join(format!("{name}.sql"));
                    if file.exists() {
                        eprintln!(
                            "warning: {}: `{name}` is a built-in metric, which --metric {name} runs; rename the file to run it",
                            file.display()
                        );
                    }
                }
                out.push(m);
            } else if let Some((_, text)) = sql.iter().find(|(n, _)| n == name) {
                out.push(MetricSpec::Sql { name: name.clone(), sql: text.clone() });
            } else {
                return Err(custom::unknown(name, &sql.iter().map(|s| s.0.clone()).collect::<Vec<_>>()));
            }
        }
        Ok(out)
    }
}

/// Prints warnings and returns how many there were.
pub fn print_warnings(w: &crate::metrics::warnings::Warnings) -> usize {
    for l in w.lines() {
        eprintln!("{l}");
    }
    w.total()
}
