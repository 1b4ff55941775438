//! Workflows: what each command does, as library functions that a cluster driver or a
//! Python binding can call without the command line. Each takes a validated, typed
//! configuration, reads through [`crate::ingest`], computes through [`crate::metrics`],
//! writes through [`crate::export`] (once each, in that order) and returns what it did,
//! warnings included; printing a report is the caller's. Terminal progress notes (only
//! on a terminal, for large files) are the one thing a workflow shows by itself.

pub mod aggregate;
pub mod compare;
pub mod custom;
pub mod distributed;
pub mod eval_compare;
pub mod export;
pub mod ingest;
pub mod profile;

use std::path::Path;

use crate::error::{Error, Location, Result};
use crate::ingest::{self as read, InputTable, RolloutTable};
use crate::trace::{trace, Status};

pub use aggregate::{aggregate, AggregateConfig, AggregateRun};
pub use compare::{compare, CompareConfig, Runs};
pub use custom::Metrics;
pub use eval_compare::{eval_compare, EvalCompareConfig, EvalCompareRun, ReportFormat};
pub use export::{export, tables, ExportConfig};
pub use ingest::{ingest, IngestConfig, IngestRun};
pub use profile::{profile, ProfileConfig, ProfileRun};

/// Reads rollouts and (optionally) inputs in parallel. A cut-off last line is a warning,
/// printed to stderr as soon as the file is read.
pub fn read_both(rollouts: &Path, inputs: Option<&Path>) -> Result<(RolloutTable, Option<InputTable>)> {
    let t0 = std::time::Instant::now();
    let (r, i) = rayon::join(|| read::read_rollouts(rollouts), || inputs.map(read::read_inputs));
    // Report the input file's problem first when both fail: it is read first by NeMo Gym.
    let i = i.transpose()?;
    let r = r?;
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

/// Refuses rollouts whose input rows name another run than they do.
pub fn check_runs(r: &RolloutTable, inp: &InputTable) -> Result<()> {
    match crate::ingest::labels::contradiction(r, inp) {
        Some((row, at, own, theirs)) => Err(Error::bad(
            Location::line(r.file_of(row), r.line[row]),
            format!(
                "this rollout names {own} but its input row ({}, line {}) names {theirs}; \
                 the two files come from different runs (give the materialized inputs of the same `gym eval run`)",
                inp.path.display(),
                inp.line[at]
            ),
        )),
        None => Ok(()),
    }
}

/// Prints read warnings (cut-off last lines) to stderr.
pub(crate) fn report_read_warnings(w: &[String]) {
    for m in w {
        eprintln!("warning: {m}");
    }
}

/// The terminal note for the phases after reading `t` (and `inputs`): shown when the
/// larger file was large enough for a progress line.
pub(crate) fn status_after_read(t: &RolloutTable, inputs: Option<&InputTable>) -> Status {
    Status::new(t.report.bytes.max(inputs.map_or(0, |i| i.report.bytes)))
}
