//! Workflows: what each command does, as library functions that a cluster driver or a
//! Python binding can call without the command line. Each takes a validated, typed
//! configuration, reads through [`crate::ingest`], computes through [`crate::metrics`],
//! writes through [`crate::export`] (once each, in that order) and returns what it did,
//! warnings included; printing a report is the caller's. Terminal progress notes (only
//! on a terminal, for large files) are the one thing a workflow shows by itself.

pub mod aggregate;
pub mod batch_metrics;
pub mod compare;
pub mod custom;
pub mod eval_compare;
pub mod export;
pub mod gate;
pub mod gate_noise;
pub mod gate_policy;
pub mod health;
pub mod ingest;
pub mod lake;
pub mod merge;
pub mod profile;
pub mod query;
pub mod report;
pub mod select;
pub mod trend;

use std::path::{Path, PathBuf};

use crate::error::{Error, Location, Msg, Opt, Result};
use crate::ingest::{self as read, InputTable, LineMap, RolloutTable};
use crate::metrics::warnings::Warnings;
use crate::trace::{trace, Status};

pub use aggregate::{aggregate, AggregateConfig, AggregateRun};
pub use compare::{compare, CompareConfig, Runs};
pub use custom::Metrics;
pub use eval_compare::{eval_compare, EvalCompareConfig, EvalCompareRun, ReportFormat};
pub use export::{export, tables, ExportConfig};
pub use gate::{gate, GateConfig, GateReport};
pub use health::{health, HealthConfig};
pub use ingest::{ingest, IngestConfig, IngestRun};
pub use profile::{profile, ProfileConfig, ProfileRun};
pub use query::{query, QueryConfig};
pub use report::{report, ReportConfig, ReportRun};
pub use select::{select, SelectConfig, SelectRun};

/// Reads rollouts (one run, in one file or several, computing what `opts` asks for) and
/// (optionally) inputs in parallel. A cut-off last line is a warning, printed to stderr
/// as soon as the file is read.
pub fn read_both(
    rollouts: &[PathBuf],
    inputs: Option<&Path>,
    opts: read::ReadOptions,
) -> Result<(RolloutTable, Option<InputTable>)> {
    let t0 = std::time::Instant::now();
    let (r, i) = rayon::join(|| read::read_rollouts_files(rollouts, opts), || inputs.map(read::read_inputs));
    // Report the input file's problem first when both fail: it is read first by NeMo Gym.
    let i = i.transpose()?;
    let r = r?;
    crate::signals::check_cancelled()?;
    if let Some(inp) = &i {
        check_runs(&r, inp)?;
    }
    report_read_warnings(&r.report.warnings);
    if let Some(i) = &i {
        report_read_warnings(&i.report.warnings);
    }
    trace("read", t0);
    Ok((r, i))
}

/// Refuses rollouts that cannot belong to the inputs beside them: the inputs carry a
/// verifier's results (the two files swapped), no row has a `reward`
/// or a `response` (it holds no results: materialized inputs, say), no rollout key has an
/// input row, or a rollout names another run than its input row does.
pub fn check_runs(r: &RolloutTable, inp: &InputTable) -> Result<()> {
    if let Some(line) = inp.verified_line {
        let inputs = Opt::named("inputs");
        let msg = Msg::default()
            .text("this input row carries a verifier's `response` and `reward`, as a rollouts file does; were ")
            .opt(inputs.clone())
            .text(" and ")
            .opt(Opt::named("rollouts"))
            .text(" swapped? (")
            .opt(inputs)
            .text(" takes the materialized inputs of `gym eval run`)");
        return Err(Error::refused(Some(Location::line(&inp.path, line)), msg));
    }
    if r.is_empty() {
        return Ok(());
    }
    if !r.has_response && r.column(crate::ingest::Source::Top, "reward").is_none() {
        return Err(no_results(&r.lines, &inp.path));
    }
    if (0..r.len()).all(|k| inp.row_of(r.task[k], r.rollout[k]).is_none()) {
        let first = (0..r.len()).min_by_key(|&k| r.line[k]).unwrap_or(0);
        return Err(no_input_rows(r.location(first), (r.task[first], r.rollout[first]), &inp.path));
    }
    match contradiction_error(r, inp) {
        Some((_, e)) => Err(e),
        None => Ok(()),
    }
}

/// Rollouts (read from `lines`) that hold no result at all: no row has a `reward` or a
/// `response`.
pub(crate) fn no_results(lines: &LineMap, inputs: &Path) -> Error {
    let msg = Msg::default()
        .text(
            "no row has a `reward` or a `response`, which the rollouts `gym eval run` writes carry; \
             is this the rollouts file (with ",
        )
        .opt(Opt::text("inputs", inputs.display().to_string()))
        .text(" as its materialized inputs)?");
    Error::refused(Some(Location::file(Path::new(&lines.name())).key("reward")), msg)
}

/// Rollouts none of whose keys has an input row: the first row (`at`, its key) named.
pub(crate) fn no_input_rows(at: Location, key: (i64, i64), inputs: &Path) -> Error {
    Error::bad(
        at,
        format!(
            "no rollout key (`_ng_task_index`, `_ng_rollout_index`) of this file has an input row in {}: \
             the two files come from different runs (first key ({}, {}))",
            inputs.display(),
            key.0,
            key.1
        ),
    )
}

/// The first rollout (least line) whose agent contradicts its input row's, as an
/// error naming both files, with that rollout's line.
pub(crate) fn contradiction_error(r: &RolloutTable, inp: &InputTable) -> Option<(u64, Error)> {
    let (row, at, own, theirs) = crate::ingest::labels::contradiction(r, inp)?;
    let e = Error::bad(
        r.location(row),
        format!(
            "this rollout names {own} but its input row ({}, line {}) names {theirs}; \
             the two files come from different runs (give the materialized inputs of the same `gym eval run`)",
            inp.path.display(),
            inp.line[at]
        ),
    );
    Some((r.line[row], e))
}

/// Prints read warnings (cut-off last lines) to stderr, or holds them (see
/// [`holding_warnings`]).
pub(crate) fn report_read_warnings(w: &[String]) {
    for m in w {
        warn(m.clone());
    }
}

pub use crate::warn::say as warn;

/// Runs `f` (a workflow, on this thread) holding the warnings it would print as they
/// arise (see [`crate::warn`]), and returns them, counted, beside its result.
pub fn holding_warnings<T>(f: impl FnOnce() -> T) -> (T, Warnings) {
    let (out, said) = crate::warn::holding(f);
    let mut held = Warnings::default();
    for m in said {
        held.add(m);
    }
    (out, held)
}

/// When a page is made or a sweep added: `SOURCE_DATE_EPOCH` when set (reproducible
/// builds' convention), else now.
pub fn made_at() -> Result<u64> {
    match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| Error::Usage(format!("SOURCE_DATE_EPOCH={v:?}: give whole seconds since 1970-01-01 UTC"))),
        Err(_) => Ok(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())),
    }
}

/// The terminal note for the phases after reading `t` (and `inputs`): shown when the
/// larger file was large enough for a progress line.
pub(crate) fn status_after_read(t: &RolloutTable, inputs: Option<&InputTable>) -> Status {
    Status::new(t.report.bytes.max(inputs.map_or(0, |i| i.report.bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A warning held twice comes back once, with its count.
    #[test]
    fn held_warnings_are_counted() {
        let ((), held) = holding_warnings(|| {
            warn("a.jsonl: the last line is cut off".into());
            warn("a.jsonl: the last line is cut off".into());
            warn("another".into());
        });
        assert_eq!(held.items(), &[("a.jsonl: the last line is cut off".to_string(), 2), ("another".to_string(), 1)]);
    }
}
