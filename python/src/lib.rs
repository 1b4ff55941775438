//! `rollstat._rollstat`: the Python binding of rollstat, and nothing more.
//!
//! Each function here hands its arguments to the library and its result back, with the
//! GIL released while the engine works. The friendly surface (signatures, docstrings,
//! result objects) is the pure-Python package around this module.
//!
//! - [`run_cli`] is the `rollstat` command of the wheel: the same code as the binary.
//! - [`profile`], [`aggregate`], [`health`], [`export`], [`to_lake`], [`compare`],
//!   [`query`], [`select`], [`report`], [`trend`], [`eval_compare`] and [`gate`] each
//!   build the configuration their command builds from its flags and run the same
//!   workflow, so their files are the command's bytes; they return what the run
//!   produced (tables, file paths, JSON as Python values) with its warnings.
//! - [`tables`], [`read_rollouts`] and [`read_parquet`] give tables as [`Table`]s, which
//!   leave through the Arrow C stream interface (`__arrow_c_stream__`) that Polars'
//!   Arrow already speaks.
//! - [`sweep`]'s `shard`, `join`, `merge_aggregate`, `merge_profile` and `merge_combine`
//!   are the tasks of a sweep sharded over a cluster (`rollstat.ray`, `rollstat.spark`):
//!   the configurations and workflows of `rollstat shard`, `join` and `merge`.
//! - [`view`] starts the rollouts viewer on a thread of its own and hands back a
//!   [`Viewer`] (its URL, `stop`).
//! - [`batch_metrics`] takes a training batch already in memory: Arrow data, numpy
//!   arrays (read in place through `__array_interface__`, no Python object per value)
//!   or lists.
//!
//! Errors map once, in [`to_py`]: bad input becomes `rollstat.InputError` with its
//! path, line and key, its options named by their Python parameters; our own failures
//! and panics become `rollstat.RollstatError`. Warnings are returned, never printed:
//! the Python layer issues them through `warnings`.
//! Ctrl-C while the engine works raises `KeyboardInterrupt` after the run stopped and
//! committed nothing.

use std::collections::HashSet;
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use polars_arrow::array::{Array, StructArray};
use polars_arrow::datatypes::{ArrowDataType, Field as ArrowField};
use polars_arrow::ffi;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyList, PyTuple};
use rollstat::error::{Door, Error, Location};
use rollstat::ingest::batch::{samples_from_frame, GroupId, Sample, Scores};
use rollstat::json::Json;
use rollstat::metrics::eval_compare::AgentChoice;
use rollstat::metrics::failures::{Note, Policy};
use rollstat::metrics::task_identity::Pairing;
use rollstat::metrics::warnings::Warnings;
use rollstat::polars::prelude::{AnyValue, CompatLevel, DataFrame, PlSmallStr, Series};
use rollstat::workflow::aggregate::RunOptions;
use rollstat::workflow::batch_metrics::BatchMetricsConfig;
use rollstat::workflow::lake::LakeTarget;
use rollstat::workflow::select::{self as select_flow, SelectConfig, SelectFormat};
use rollstat::workflow::trend::TrendConfig;
use rollstat::workflow::{
    self, AggregateConfig, CompareConfig, EvalCompareConfig, ExportConfig, GateConfig, HealthConfig, Metrics,
    ProfileConfig, QueryConfig, ReportConfig, ReportFormat,
};

/// The wheel's `rollstat` command: the binary's code on `argv` (program name first).
/// Returns the exit status.
#[pyfunction]
fn run_cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.allow_threads(|| rollstat::cli::entry(argv))
}

/// The warnings of one call as Python issues them: each distinct message once (a
/// repeated one with its count), without the command line's `warning: ` prefix.
#[derive(Default)]
struct Said {
    seen: HashSet<String>,
    lines: Vec<String>,
}

impl Said {
    fn warnings(mut self, w: &Warnings) -> Self {
        for (m, c) in w.items() {
            if self.seen.insert(m.clone()) {
                self.lines.push(if *c == 1 { m.clone() } else { format!("{m} ({c} times)") });
            }
        }
        self
    }

    fn line(mut self, m: String) -> Self {
        if self.seen.insert(m.clone()) {
            self.lines.push(m);
        }
        self
    }
}

/// The pairing of runs' tasks, from the Python arguments.
fn pairing(allow_task_mismatch: bool, by_fingerprint: bool, task_key: Option<String>) -> Pairing {
    Pairing { allow_mismatch: allow_task_mismatch, by_fingerprint, task_key }
}

/// Paths as Python shows them.
fn shown(paths: &[PathBuf]) -> Vec<String> {
    paths.iter().map(|p| p.display().to_string()).collect()
}

/// `profile`: writes the three artifacts into `out_dir`; returns their paths and the
/// warnings.
#[pyfunction]
#[pyo3(signature = (rollouts, inputs, allow_partial, metrics, metric_dir, answer_key, subset_key, ddof, out_dir))]
#[allow(clippy::too_many_arguments)]
fn profile(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    inputs: PathBuf,
    allow_partial: bool,
    metrics: Vec<String>,
    metric_dir: Option<PathBuf>,
    answer_key: Option<String>,
    subset_key: Option<String>,
    ddof: usize,
    out_dir: PathBuf,
) -> PyResult<(Vec<String>, Vec<String>)> {
    let (r, held) = engine(py, move || {
        let metrics =
            Metrics::resolve(&metrics, metric_dir.as_deref(), answer_key.as_deref(), subset_key.as_deref(), ddof)?;
        let c = ProfileConfig { inputs, rollouts, allow_partial, out_dir: Some(out_dir), metrics, lake: None };
        workflow::profile(&c)
    })?;
    Ok((shown(&r.files), Said::default().warnings(&held).warnings(&r.warnings).lines))
}

/// What `aggregate` hands Python: the aggregate file (none when nothing was scored),
/// the health check's reports, what the score covers, and the warnings.
type AggregateOut = (Option<String>, Vec<String>, PyObject, Vec<String>);

/// `aggregate`: writes the aggregate file to `out` (and the health check's reports
/// beside it).
#[pyfunction]
#[pyo3(signature = (rollouts, inputs, agent, metrics, metric_dir, answer_key, subset_key, ddof, key_metrics,
                    failures, count_failures_as_zero, count_missing_as_zero, merge_into, health_check, ignore_checks,
                    out))]
#[allow(clippy::too_many_arguments)]
fn aggregate(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    inputs: Option<PathBuf>,
    agent: Option<String>,
    metrics: Vec<String>,
    metric_dir: Option<PathBuf>,
    answer_key: Option<String>,
    subset_key: Option<String>,
    ddof: usize,
    key_metrics: Vec<String>,
    failures: Vec<PathBuf>,
    count_failures_as_zero: Vec<String>,
    count_missing_as_zero: bool,
    merge_into: Option<PathBuf>,
    health_check: bool,
    ignore_checks: Vec<String>,
    out: PathBuf,
) -> PyResult<AggregateOut> {
    let (r, held) = engine(py, move || {
        let metrics =
            Metrics::resolve(&metrics, metric_dir.as_deref(), answer_key.as_deref(), subset_key.as_deref(), ddof)?;
        let health = if health_check { Some(rollstat::health::parse_ignored(&ignore_checks)?) } else { None };
        let c = AggregateConfig {
            rollouts,
            inputs,
            out: Some(out),
            agent,
            metrics,
            key_metrics,
            run: RunOptions {
                failures,
                policy: Policy { count_classes: count_failures_as_zero, count_missing: count_missing_as_zero },
                merge_into,
                coverage_out: None,
                health,
                lake: None,
            },
        };
        workflow::aggregate(&c)
    })?;
    let coverage = json_to_py(py, &workflow::aggregate::coverage_json(&r))?;
    let mut said = Said::default().warnings(&held);
    for n in r.coverage.iter().flat_map(|c| &c.notes) {
        if let Note::Warn(line) = n {
            said = said.line(line.clone());
        }
    }
    let said = said.warnings(&r.warnings);
    let reports = match &r.health {
        Some((_, summary)) => shown(&workflow::aggregate::health_paths(summary)),
        None => Vec::new(),
    };
    Ok((r.file.map(|f| f.display().to_string()), reports, coverage, said.lines))
}

/// The stages of a sweep sharded over a cluster (`shard`, `join`, `merge`), one call per
/// task of a driver; the same workflows as the commands.
mod sweep {
    use super::*;
    use rollstat::workflow::merge::{self, MergeAggregateConfig, MergeOutcome, MergeProfileConfig, SliceSweep};

    /// Each bucket a shard wrote, with its rows.
    type Buckets = Vec<(i64, usize)>;

    /// `shard`: one rollouts file (or, with `inputs`, the materialized inputs), or the
    /// lines starting in `range` of it, into slices by bucket of tasks in `out_dir`;
    /// returns each bucket with its rows, and the warnings.
    #[pyfunction]
    #[pyo3(signature = (rollouts, out_dir, task_width, range, inputs))]
    pub fn shard(
        py: Python<'_>,
        rollouts: PathBuf,
        out_dir: PathBuf,
        task_width: i64,
        range: Option<(u64, Option<u64>)>,
        inputs: bool,
    ) -> PyResult<(Buckets, Vec<String>)> {
        let range = range.map(|(start, end)| (start, end.unwrap_or(u64::MAX)));
        let (r, held) =
            engine(py, move || merge::shard(&merge::ShardConfig { rollouts, out_dir, task_width, range, inputs }))?;
        Ok((r.buckets, Said::default().warnings(&held).lines))
    }

    /// `join`: one bucket's slices, in file order, into the slice `out`; returns its rows.
    #[pyfunction]
    #[pyo3(signature = (slices, out))]
    pub fn join(py: Python<'_>, slices: Vec<PathBuf>, out: PathBuf) -> PyResult<(usize, Vec<String>)> {
        let (n, held) = engine(py, move || merge::join_slices(&slices, &out))?;
        Ok((n, Said::default().warnings(&held).lines))
    }

    /// `merge combine`: adds one round's shares to the plan (none for the counting
    /// round) and writes the next plan to `out`; returns whether another round is needed.
    #[pyfunction]
    #[pyo3(signature = (shares, plan, out))]
    pub fn merge_combine(
        py: Python<'_>,
        shares: Vec<PathBuf>,
        plan: Option<PathBuf>,
        out: PathBuf,
    ) -> PyResult<(bool, Vec<String>)> {
        let (plan, held) = engine(py, move || merge::combine(plan.as_deref(), &shares, &out))?;
        Ok((plan.more(), Said::default().warnings(&held).lines))
    }

    /// What a merge over slices reads: the slices (input slices among them), the name
    /// the sweep goes by, the inputs file (when not given as input slices), whether to
    /// read them as one table, the finished plan of the statistics' rounds and where
    /// to write this round's shares instead of merging.
    #[derive(FromPyObject)]
    pub struct Slices(Vec<PathBuf>, PathBuf, Option<PathBuf>, bool, Option<PathBuf>, Option<PathBuf>);

    /// The custom-metric options: metrics, metric folder, answer key, subset key, ddof.
    #[derive(FromPyObject)]
    pub struct MetricOptions(Vec<String>, Option<PathBuf>, Option<String>, Option<String>, usize);

    /// What a merge hands Python: the shares written (with `share_out`) or the files
    /// written, and the warnings.
    type MergeOut = (Option<usize>, Vec<String>, Vec<String>);

    /// Runs a merge (`run`, given the sweep, the inputs file and the metrics) on the
    /// engine and hands its outcome to Python, with `files` naming what a merge wrote
    /// and the warnings it returned.
    fn merge_out<R: Send + 'static>(
        py: Python<'_>,
        Slices(slices, name, inputs, whole_table, plan, share_out): Slices,
        MetricOptions(metrics, dir, answer_key, subset_key, ddof): MetricOptions,
        run: impl FnOnce(SliceSweep, Option<PathBuf>, Metrics) -> rollstat::Result<MergeOutcome<R>> + Send + 'static,
        files: impl FnOnce(&R) -> (Vec<String>, &Warnings),
    ) -> PyResult<MergeOut> {
        let (outcome, held) = engine(py, move || {
            let metrics =
                Metrics::resolve(&metrics, dir.as_deref(), answer_key.as_deref(), subset_key.as_deref(), ddof)?;
            run(SliceSweep { slices, name, whole_table, plan, share_out }, inputs, metrics)
        })?;
        let said = Said::default().warnings(&held);
        Ok(match outcome {
            MergeOutcome::Shares(n) => (Some(n), Vec::new(), said.lines),
            MergeOutcome::Merged(r, _) => {
                let (written, warnings) = files(&r);
                (None, written, said.warnings(warnings).lines)
            }
        })
    }

    /// `merge aggregate`: the aggregate file of the sweep to `out`, or one round's shares
    /// of its statistics.
    #[pyfunction]
    #[pyo3(signature = (slices, metrics, agent, key_metrics, out))]
    pub fn merge_aggregate(
        py: Python<'_>,
        slices: Slices,
        metrics: MetricOptions,
        agent: Option<String>,
        key_metrics: Vec<String>,
        out: Option<PathBuf>,
    ) -> PyResult<MergeOut> {
        let run = move |sweep, inputs, metrics| {
            merge::aggregate_slices(&MergeAggregateConfig { sweep, inputs, agent, out, metrics, key_metrics })
        };
        merge_out(py, slices, metrics, run, |r| (r.file.iter().map(|f| f.display().to_string()).collect(), &r.warnings))
    }

    /// `merge profile`: the three artifacts of the sweep into `out_dir`, or one round's
    /// shares of its statistics.
    #[pyfunction]
    #[pyo3(signature = (slices, metrics, allow_partial, out_dir))]
    pub fn merge_profile(
        py: Python<'_>,
        slices: Slices,
        metrics: MetricOptions,
        allow_partial: bool,
        out_dir: Option<PathBuf>,
    ) -> PyResult<MergeOut> {
        let run = move |sweep, inputs, metrics| {
            merge::profile_slices(&MergeProfileConfig { sweep, inputs, allow_partial, out_dir, metrics })
        };
        merge_out(py, slices, metrics, run, |r| (shown(&r.files), &r.warnings))
    }
}

/// `health`: the rollout health check alone, its two reports written into `out_dir`.
#[pyfunction]
#[pyo3(signature = (rollouts, ignore_checks, out_dir))]
fn health(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    ignore_checks: Vec<String>,
    out_dir: PathBuf,
) -> PyResult<(Vec<String>, Vec<String>)> {
    let (summary, held) = engine(py, move || {
        let c = HealthConfig {
            ignored: rollstat::health::parse_ignored(&ignore_checks)?,
            rollouts,
            out_dir: Some(out_dir),
        };
        workflow::health(&c).map(|(_, summary)| summary)
    })?;
    Ok((shown(&workflow::aggregate::health_paths(&summary)), Said::default().warnings(&held).lines))
}

/// `export`: the four tables as Parquet in `out_dir`; returns the files and warnings.
#[pyfunction]
#[pyo3(signature = (rollouts, out_dir, inputs, agent))]
fn export(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    out_dir: PathBuf,
    inputs: Option<PathBuf>,
    agent: Option<String>,
) -> PyResult<(Vec<String>, Vec<String>)> {
    let ((files, warnings), held) =
        engine(py, move || workflow::export(&ExportConfig { rollouts, inputs, agent, out_dir }))?;
    Ok((shown(&files), Said::default().warnings(&held).warnings(&warnings.across_runs()).lines))
}

/// Adds a run to a lake of sweeps (`export --lake`); returns the sweep's id, whether it
/// replaced one, and the warnings.
#[pyfunction]
#[pyo3(signature = (rollouts, lake, inputs, agent, sweep_id, labels))]
fn to_lake(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    lake: PathBuf,
    inputs: Option<PathBuf>,
    agent: Option<String>,
    sweep_id: Option<String>,
    labels: Vec<String>,
) -> PyResult<(String, bool, Vec<String>)> {
    let (r, held) = engine(py, move || {
        let to = LakeTarget::new(lake, sweep_id, &labels)?;
        workflow::export::export_to_lake(&rollouts, inputs.as_deref(), agent.as_deref(), &to)
    })?;
    Ok((r.sweep, r.replaced, Said::default().warnings(&held).warnings(&r.warnings.across_runs()).lines))
}

/// `compare`: the comparison table (the columns of `compare --format parquet`).
#[pyfunction]
#[pyo3(signature = (rollouts, inputs, agent, field, pass_at, baseline, cluster_key, by, mde, detect,
                    allow_task_mismatch, by_fingerprint, task_key))]
#[allow(clippy::too_many_arguments)]
fn compare(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    inputs: Vec<PathBuf>,
    agent: Option<String>,
    field: String,
    pass_at: Option<u32>,
    baseline: Option<String>,
    cluster_key: Option<String>,
    by: Option<String>,
    mde: bool,
    detect: Option<f64>,
    allow_task_mismatch: bool,
    by_fingerprint: bool,
    task_key: Option<String>,
) -> PyResult<(Table, Vec<String>)> {
    let ((df, warnings), held) = engine(py, move || {
        let c = CompareConfig {
            rollouts,
            inputs,
            agent,
            metric: field,
            pass_at,
            baseline,
            cluster_key,
            by,
            mde,
            detect,
            flips: None,
            pairing: pairing(allow_task_mismatch, by_fingerprint, task_key),
        };
        c.validate()?;
        let (_, r) = workflow::compare(&c)?;
        let df = rollstat::export::compare::frame(&c.view(rollstat::export::table::READ_DIGITS), &r)?;
        Ok((df, r.warnings))
    })?;
    Ok((Table { df }, Said::default().warnings(&held).warnings(&warnings).lines))
}

/// `query`: the query's result as a table.
#[pyfunction]
#[pyo3(signature = (query, rollouts, inputs, agent, parquet_dir, lake))]
fn query(
    py: Python<'_>,
    query: String,
    rollouts: Vec<PathBuf>,
    inputs: Option<PathBuf>,
    agent: Option<String>,
    parquet_dir: Option<PathBuf>,
    lake: Option<PathBuf>,
) -> PyResult<(Table, Vec<String>)> {
    let c = QueryConfig { query, rollouts, inputs, agent, parquet_dir, lake };
    let ((df, warnings), held) = engine(py, move || workflow::query(&c))?;
    Ok((Table { df }, Said::default().warnings(&held).warnings(&warnings).lines))
}

/// What `select` hands Python: the selected `tasks` rows, the files written, and the
/// warnings.
type SelectOut = (Table, Vec<String>, Vec<String>);

/// `select`: writes the selected tasks' input lines to `out` (with the manifest) and
/// returns their `tasks` rows, from one selection. With `sweep`, the files are those the
/// sweep of `lake` was computed from, in place of `rollouts` and `inputs`.
#[pyfunction]
#[pyo3(signature = (rollouts, inputs, out, run, agent, predicate, band, drop_zero_variance, per, max, sample, weight,
                    seed, strip_ng, lake, sweep))]
#[allow(clippy::too_many_arguments)]
fn select(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    inputs: Option<PathBuf>,
    out: PathBuf,
    run: Option<String>,
    agent: Option<String>,
    predicate: Option<String>,
    band: Option<(f64, f64)>,
    drop_zero_variance: bool,
    per: Option<String>,
    max: Option<usize>,
    sample: Option<String>,
    weight: Option<String>,
    seed: Option<u64>,
    strip_ng: bool,
    lake: Option<PathBuf>,
    sweep: Option<String>,
) -> PyResult<SelectOut> {
    let sample = sample
        .map(|s| {
            select_flow::Sample::parse(&s)
                .map_err(|e| input_error(format!("sample: {e}"), None, None, Some("sample".into())))
        })
        .transpose()?;
    let c = SelectConfig {
        rollouts,
        inputs: inputs.unwrap_or_default(),
        agent,
        run,
        predicate,
        band,
        drop_zero_variance,
        per,
        max,
        sample,
        weight,
        seed,
        strip_ng,
        format: SelectFormat::Jsonl,
        out,
        lake,
        sweep,
    };
    let (r, held) = engine(py, move || workflow::select(&c).map(|r| (r, c.out)))?;
    let (r, out) = r;
    let mut said = Said::default().warnings(&held).warnings(&r.warnings.across_runs());
    if r.selected == 0 {
        said = said.line(format!(
            "no task was selected ({} of {} tasks passed the filters); wrote an empty {}",
            r.candidates,
            r.tasks,
            out.display()
        ));
    }
    Ok((Table { df: r.table }, shown(&r.files), said.lines))
}

/// `report`: the HTML page of a sweep, written to `out`.
#[pyfunction]
#[pyo3(signature = (rollouts, inputs, agent, metric, baseline, cluster_key, allow_task_mismatch, by_fingerprint,
                    task_key, out))]
#[allow(clippy::too_many_arguments)]
fn report(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    inputs: Vec<PathBuf>,
    agent: Option<String>,
    metric: String,
    baseline: Option<String>,
    cluster_key: Option<String>,
    allow_task_mismatch: bool,
    by_fingerprint: bool,
    task_key: Option<String>,
    out: PathBuf,
) -> PyResult<Vec<String>> {
    let (r, held) = engine(py, move || {
        let c = ReportConfig {
            rollouts,
            inputs,
            agent,
            metric,
            baseline,
            cluster_key,
            out: Some(out),
            made_at: workflow::made_at()?,
            pairing: pairing(allow_task_mismatch, by_fingerprint, task_key),
        };
        workflow::report(&c)
    })?;
    Ok(Said::default().warnings(&held).warnings(&r.warnings).lines)
}

/// `report` over a lake: the trend page, written to `out`.
#[pyfunction]
#[pyo3(signature = (lake, by, metric, out))]
fn trend(py: Python<'_>, lake: PathBuf, by: Option<String>, metric: String, out: PathBuf) -> PyResult<Vec<String>> {
    let (r, held) = engine(py, move || {
        let c = TrendConfig { lake, by, metric, out: Some(out), made_at: workflow::made_at()? };
        workflow::trend::trend(&c)
    })?;
    Ok(Said::default().warnings(&held).warnings(&r.warnings).lines)
}

/// `eval_compare`: NeMo Gym's comparison report(s), written into `output_dir`; `command`
/// is the call the report records.
#[pyfunction]
#[pyo3(signature = (baseline, candidates, baseline_agg_metrics, candidates_agg_metrics, agent, baseline_agent,
                    candidate_agents, report_format, compute_missing, allow_task_mismatch, by_fingerprint, task_key,
                    output_dir, command))]
#[allow(clippy::too_many_arguments)]
fn eval_compare(
    py: Python<'_>,
    baseline: String,
    candidates: Vec<String>,
    baseline_agg_metrics: Option<String>,
    candidates_agg_metrics: Option<Vec<String>>,
    agent: Option<String>,
    baseline_agent: Option<String>,
    candidate_agents: Option<Vec<String>>,
    report_format: String,
    compute_missing: bool,
    allow_task_mismatch: bool,
    by_fingerprint: bool,
    task_key: Option<String>,
    output_dir: PathBuf,
    command: String,
) -> PyResult<(Vec<String>, Vec<String>)> {
    let format = match report_format.as_str() {
        "md" => ReportFormat::Markdown,
        "json" => ReportFormat::Json,
        "both" => ReportFormat::Both,
        other => {
            return Err(input_error(
                format!("report_format={other:?}: give \"md\", \"json\" or \"both\""),
                None,
                None,
                Some("report_format".into()),
            ))
        }
    };
    let (r, held) = engine(py, move || {
        let cwd = std::env::current_dir().map_err(|e| Error::read(std::path::Path::new("."), e))?;
        let c = EvalCompareConfig {
            baseline,
            candidates,
            baseline_aggregate: baseline_agg_metrics,
            candidate_aggregates: candidates_agg_metrics,
            agents: AgentChoice { agent, baseline_agent, candidate_agents },
            output_dir: Some(output_dir),
            format,
            compute_missing,
            pairing: pairing(allow_task_mismatch, by_fingerprint, task_key),
            command,
            cwd,
        };
        workflow::eval_compare(&c)
    })?;
    // The agents left out, which the command notes on stderr, are warnings here.
    let mut said = Said::default().warnings(&held).warnings(&r.warnings);
    for w in &r.comparison.warnings {
        said = said.line(w.clone());
    }
    Ok((shown(&r.files), said.lines))
}

/// `gate`: a policy's decision over runs, as the command's JSON, with the warnings.
/// The runs are read as `compare` reads them.
#[pyfunction]
#[pyo3(signature = (policy, rollouts, inputs, agent, baseline, cluster_key, allow_task_mismatch, by_fingerprint, task_key))]
#[allow(clippy::too_many_arguments)]
fn gate(
    py: Python<'_>,
    policy: PathBuf,
    rollouts: Vec<PathBuf>,
    inputs: Vec<PathBuf>,
    agent: Option<String>,
    baseline: Option<String>,
    cluster_key: Option<String>,
    allow_task_mismatch: bool,
    by_fingerprint: bool,
    task_key: Option<String>,
) -> PyResult<(String, Vec<String>)> {
    let (r, held) = engine(py, move || {
        let policy = rollstat::workflow::gate_policy::read(&policy)?;
        let runs = CompareConfig {
            rollouts,
            inputs,
            agent,
            metric: "reward".into(),
            baseline,
            cluster_key,
            pairing: pairing(allow_task_mismatch, by_fingerprint, task_key),
            ..Default::default()
        };
        runs.validate()?;
        workflow::gate(&GateConfig { runs, policy })
    })?;
    let json = String::from_utf8_lossy(&rollstat::export::gate::json(&r)).into_owned();
    Ok((json, Said::default().warnings(&held).warnings(&r.warnings).lines))
}

/// Tables by name, in order.
type NamedTables = Vec<(String, Table)>;

/// The rollouts, tasks, agents and repeats tables of a run, in memory, with the
/// warnings.
#[pyfunction]
#[pyo3(signature = (rollouts, inputs, agent))]
fn tables(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    inputs: Option<PathBuf>,
    agent: Option<String>,
) -> PyResult<(NamedTables, Vec<String>)> {
    let ((named, warnings), held) =
        engine(py, move || workflow::tables(&rollouts, inputs.as_deref(), agent.as_deref()))?;
    let tables = named.into_iter().map(|(n, df)| (n.to_string(), Table { df })).collect();
    Ok((tables, Said::default().warnings(&held).warnings(&warnings).lines))
}

/// The typed rollouts table of a run (what `ingest` writes), in memory, with the
/// warnings.
#[pyfunction]
#[pyo3(signature = (rollouts, inputs, agent))]
fn read_rollouts(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    inputs: Option<PathBuf>,
    agent: Option<String>,
) -> PyResult<(Table, Vec<String>)> {
    let (df, held) =
        engine(py, move || workflow::ingest::rollouts_table(&rollouts, inputs.as_deref(), agent.as_deref()))?;
    Ok((Table { df }, Said::default().warnings(&held).lines))
}

/// A Parquet file as a table (the command's own reader).
#[pyfunction]
fn read_parquet(py: Python<'_>, path: PathBuf) -> PyResult<Table> {
    let (df, _) = engine(py, move || rollstat::ingest::parquet::read_parquet(&path))?;
    Ok(Table { df })
}

/// VAGEN's batch metrics over a batch in memory. `batch` is Arrow data (an object with
/// `__arrow_c_stream__` or `__arrow_c_array__`) when `scores` is None; otherwise
/// `batch` is the group ids and `scores` the token-level scores (`tokens=True`: a 2-D
/// array or a sequence of sequences) or the rewards (a 1-D array or sequence).
/// Returns the flat metrics in order and the warnings.
#[pyfunction]
#[pyo3(signature = (batch, scores, tokens, group_key, metrics, metric_dir, prefix, ddof))]
#[allow(clippy::too_many_arguments)]
fn batch_metrics(
    py: Python<'_>,
    batch: &Bound<'_, PyAny>,
    scores: Option<&Bound<'_, PyAny>>,
    tokens: bool,
    group_key: String,
    metrics: Vec<String>,
    metric_dir: Option<PathBuf>,
    prefix: String,
    ddof: usize,
) -> PyResult<(FlatMetrics, Vec<String>)> {
    // Python values are read here, with the GIL; Arrow data becomes samples in the
    // engine call below.
    let input = match scores {
        None => Batch::Arrow(arrow_frame(batch)?),
        Some(s) => {
            let groups = group_ids(batch)?;
            let scores = if tokens { token_scores(s)? } else { rewards(s)? };
            if groups.len() != scores.len() {
                return Err(input_error(
                    format!(
                        "<batch>: {} group ids but {} {}; expected one per sample",
                        groups.len(),
                        scores.len(),
                        if tokens { "token_level_scores rows" } else { "rewards" }
                    ),
                    None,
                    None,
                    None,
                ));
            }
            Batch::Samples(groups.into_iter().zip(scores).map(|(group, scores)| Sample { group, scores }).collect())
        }
    };
    let c = BatchMetricsConfig { metrics, metric_dir, prefix, ddof };
    c.validate().map_err(to_py)?;
    let ((flat, warnings), held) = engine(py, move || {
        let samples = match input {
            Batch::Samples(samples) => samples,
            Batch::Arrow(df) => samples_from_frame(&df, &group_key, &|| Location::file("<batch>".as_ref()))?,
        };
        let g = rollstat::metrics::batch::group(&samples);
        workflow::batch_metrics::batch_metrics(&g, &c)
    })?;
    let flat = flat.into_iter().map(|(k, v)| Ok((k, json_to_py(py, &v)?))).collect::<PyResult<Vec<_>>>()?;
    let said = warnings.into_iter().fold(Said::default().warnings(&held), Said::line);
    Ok((flat, said.lines))
}

/// Metrics by their logged name, in order.
type FlatMetrics = Vec<(String, PyObject)>;

/// A training batch as `batch_metrics` was handed it.
enum Batch {
    /// Arrow data, read into samples by the Parquet reader's rules.
    Arrow(DataFrame),
    /// Group ids and scores read from Python values.
    Samples(Vec<Sample>),
}

/// Panics inside the engine's thread: the test of the rule that a panic reaches Python
/// as `RollstatError` and nothing else.
#[pyfunction]
fn _panic_for_tests(py: Python<'_>) -> PyResult<()> {
    engine(py, || -> rollstat::Result<()> { panic!("a panic raised on purpose by _panic_for_tests") }).map(|_| ())
}

/// Starts `rollstat view` over the runs on a thread of its own; returns the running
/// viewer (its URL, and `stop`) and the warnings of reading the runs.
#[pyfunction]
#[pyo3(signature = (rollouts, inputs, agent, baseline, allow_task_mismatch, health_check, lake, sweeps, host, port))]
#[allow(clippy::too_many_arguments)]
fn view(
    py: Python<'_>,
    rollouts: Vec<PathBuf>,
    inputs: Vec<PathBuf>,
    agent: Option<String>,
    baseline: Option<String>,
    allow_task_mismatch: bool,
    health_check: bool,
    lake: Option<PathBuf>,
    sweeps: Vec<String>,
    host: String,
    port: Option<u16>,
) -> PyResult<(Viewer, Vec<String>)> {
    let host: std::net::IpAddr = host.parse().map_err(|_| {
        input_error(format!("host: {host:?} is not an IP address (127.0.0.1, ::1, 0.0.0.0)"), None, None, None)
    })?;
    let c = rollstat::view::ViewConfig {
        runs: rollstat::view::ViewRuns {
            rollouts,
            inputs,
            agent,
            baseline,
            allow_task_mismatch,
            health_check,
            lake: lake.map(|dir| rollstat::view::LakeSweeps { dir, sweeps }),
        },
        host,
        port,
    };
    let (running, held) = engine(py, move || rollstat::view::start(&c))?;
    let viewer = Viewer { url: running.url.clone(), running: std::sync::Mutex::new(Some(running)) };
    Ok((viewer, Said::default().warnings(&held).lines))
}

/// A running viewer: its URL and a way to stop it (it also stops when collected).
#[pyclass(module = "rollstat._rollstat", frozen)]
struct Viewer {
    url: String,
    running: std::sync::Mutex<Option<rollstat::view::Running>>,
}

#[pymethods]
impl Viewer {
    #[getter]
    fn url(&self) -> String {
        self.url.clone()
    }

    /// Stops the server (waiting for requests in flight); stopping twice does nothing.
    fn stop(&self, py: Python<'_>) {
        let taken = self.running.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut r) = taken {
            py.allow_threads(move || r.stop());
        }
    }

    #[getter]
    fn running(&self) -> bool {
        self.running.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }
}

/// A table of results, handed to any Arrow consumer without a copy.
#[pyclass(module = "rollstat._rollstat", frozen)]
struct Table {
    df: DataFrame,
}

#[pymethods]
impl Table {
    /// The Arrow C stream interface: a capsule holding an `ArrowArrayStream` of the
    /// table's record batches (strings as Arrow's string views, Polars' own layout, so
    /// no column is copied). `requested_schema` is not honoured: the stream has its own.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let mut df = self.df.clone();
        df.align_chunks_par();
        let fields: Vec<ArrowField> = df.columns().iter().map(|c| c.field().to_arrow(CompatLevel::newest())).collect();
        let dtype = ArrowDataType::Struct(fields);
        let batches: Vec<Box<dyn Array>> = df
            .iter_chunks(CompatLevel::newest(), false)
            .map(|rb| {
                let len = rb.height();
                StructArray::new(dtype.clone(), len, rb.into_arrays(), None).boxed()
            })
            .collect();
        let field = ArrowField::new(PlSmallStr::EMPTY, dtype, false);
        let stream = ffi::export_iterator(Box::new(batches.into_iter().map(Ok)), field);
        PyCapsule::new(py, stream, Some(CString::new("arrow_array_stream").expect("no NUL")))
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.df.height()
    }

    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.df.get_column_names().iter().map(|s| s.to_string()).collect()
    }

    /// Each column's name and type, as Polars names the type.
    #[getter]
    fn dtypes(&self) -> Vec<(String, String)> {
        self.df.columns().iter().map(|c| (c.name().to_string(), c.dtype().to_string())).collect()
    }

    /// Rows as dicts (column name to value), from row `offset` on, at most `limit` of
    /// them: for small tables and previews; Arrow consumers read large ones whole.
    #[pyo3(signature = (offset=0, limit=None))]
    fn to_pylist(&self, py: Python<'_>, offset: usize, limit: Option<usize>) -> PyResult<Vec<PyObject>> {
        let end = limit.map_or(self.df.height(), |l| (offset + l).min(self.df.height()));
        let mut out = Vec::new();
        for i in offset..end {
            let d = PyDict::new(py);
            for c in self.df.columns() {
                let v = c.get(i).map_err(|e| rollstat_error(e.to_string()))?;
                d.set_item(c.name().as_str(), any_to_py(py, &v)?)?;
            }
            out.push(d.into_any().unbind());
        }
        Ok(out)
    }

    /// The first rows as text (Polars' table layout).
    #[pyo3(signature = (rows=8))]
    fn preview(&self, rows: usize) -> String {
        format!("{}", self.df.head(Some(rows)))
    }
}

/// Runs `work` on its own thread with the GIL released, polling for Ctrl-C. On Ctrl-C
/// the run is cancelled (it commits nothing and stops at its next check), waited for,
/// and `KeyboardInterrupt` is raised. A panic becomes `RollstatError`. The warnings
/// the run would print as they arise are held and returned beside its result.
fn engine<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> rollstat::Result<T> + Send + 'static,
) -> PyResult<(T, Warnings)> {
    // Worker stacks of 8 MB, as the command has: rows nested 1,024 levels deep are
    // re-serialized recursively on them. Built at the first call, not at import, so that
    // the `rollstat` command (which builds its own, with --threads) can run in this
    // module; another library may have built the pool first.
    static POOL: std::sync::Once = std::sync::Once::new();
    POOL.call_once(|| {
        let _ = rayon::ThreadPoolBuilder::new().stack_size(8 << 20).build_global();
    });
    let flag = Arc::new(AtomicBool::new(false));
    let cancel = flag.clone();
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new().name("rollstat-call".into()).spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let (r, held) = workflow::holding_warnings(|| rollstat::signals::cancellable(cancel, work));
            r.map(|v| (v, held))
        }));
        let _ = tx.send(r);
    });
    if let Err(e) = worker {
        return Err(rollstat_error(format!("could not start a worker thread: {e}")));
    }
    let mut rx = rx;
    loop {
        // The receiver moves into the GIL-free closure and back (it is Send, not Sync).
        let (got, back) = py.allow_threads(move || (rx.recv_timeout(Duration::from_millis(50)), rx));
        rx = back;
        match got {
            Ok(Ok(r)) => return r.map_err(to_py),
            Ok(Err(panic)) => return Err(rollstat_error(format!("internal error: {}", panic_text(&panic)))),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    flag.store(true, Ordering::SeqCst);
                    let _ = py.allow_threads(move || rx.recv());
                    return Err(interrupt);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(rollstat_error("internal error: the worker thread ended without a result".into()))
            }
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic".into()
    }
}

/// The one place library errors become Python exceptions: the message as Python shows
/// it (options by their parameter names), with its place when it has one.
fn to_py(e: Error) -> PyErr {
    let msg = e.render(Door::Python);
    if let Some(loc) = e.location() {
        return input_error(msg, Some(loc.file.clone()), loc.line.or(loc.row), loc.key.clone());
    }
    match &e {
        Error::Interrupted => PyKeyboardInterrupt::new_err(msg),
        Error::Io { path, input: true, .. } => input_error(msg, Some(path.clone()), None, None),
        _ if e.is_bad_input() => input_error(msg, None, None, None),
        _ => rollstat_error(msg),
    }
}

fn exception(name: &str, args: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>>) -> PyErr {
    Python::with_gil(|py| {
        let made = py.import("rollstat._errors").and_then(|m| m.getattr(name)).and_then(|cls| cls.call1(args(py)?));
        match made {
            Ok(v) => PyErr::from_value(v),
            Err(e) => e,
        }
    })
}

fn input_error(msg: String, path: Option<PathBuf>, line: Option<u64>, key: Option<String>) -> PyErr {
    exception("InputError", move |py| {
        let path = path.map(|p| p.display().to_string());
        PyTuple::new(
            py,
            [
                msg.into_pyobject(py)?.into_any(),
                path.into_pyobject(py)?,
                line.into_pyobject(py)?,
                key.into_pyobject(py)?,
            ],
        )
    })
}

fn rollstat_error(msg: String) -> PyErr {
    exception("RollstatError", move |py| PyTuple::new(py, [msg]))
}

/// A JSON value as the Python value `json.loads` gives (NaN stays a float).
fn json_to_py(py: Python<'_>, v: &Json) -> PyResult<PyObject> {
    Ok(match v {
        Json::Null => py.None(),
        Json::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        Json::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        Json::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        Json::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
        Json::Arr(items) => {
            let l = PyList::empty(py);
            for x in items {
                l.append(json_to_py(py, x)?)?;
            }
            l.into_any().unbind()
        }
        Json::Obj(items) => {
            let d = PyDict::new(py);
            for (k, x) in items {
                d.set_item(&**k, json_to_py(py, x)?)?;
            }
            d.into_any().unbind()
        }
    })
}

/// One cell as a Python value: numbers, text, bools and None as such; lists as lists;
/// anything else (dates, structs) as Polars prints it.
fn any_to_py(py: Python<'_>, v: &AnyValue<'_>) -> PyResult<PyObject> {
    Ok(match v {
        AnyValue::Null => py.None(),
        AnyValue::Boolean(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        AnyValue::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        AnyValue::StringOwned(s) => s.as_str().into_pyobject(py)?.into_any().unbind(),
        AnyValue::Int8(x) => x.into_pyobject(py)?.into_any().unbind(),
        AnyValue::Int16(x) => x.into_pyobject(py)?.into_any().unbind(),
        AnyValue::Int32(x) => x.into_pyobject(py)?.into_any().unbind(),
        AnyValue::Int64(x) => x.into_pyobject(py)?.into_any().unbind(),
        AnyValue::UInt8(x) => x.into_pyobject(py)?.into_any().unbind(),
        AnyValue::UInt16(x) => x.into_pyobject(py)?.into_any().unbind(),
        AnyValue::UInt32(x) => x.into_pyobject(py)?.into_any().unbind(),
        AnyValue::UInt64(x) => x.into_pyobject(py)?.into_any().unbind(),
        AnyValue::Float32(x) => f64::from(*x).into_pyobject(py)?.into_any().unbind(),
        AnyValue::Float64(x) => x.into_pyobject(py)?.into_any().unbind(),
        AnyValue::List(s) => {
            let l = PyList::empty(py);
            for x in s.iter() {
                l.append(any_to_py(py, &x)?)?;
            }
            l.into_any().unbind()
        }
        other => format!("{other}").into_pyobject(py)?.into_any().unbind(),
    })
}

/// Arrow data handed over through the PyCapsule interface, as a table.
fn arrow_frame(obj: &Bound<'_, PyAny>) -> PyResult<DataFrame> {
    let bad = |what: String| input_error(format!("<batch>: {what}"), None, None, None);
    let (field, chunks): (ArrowField, Vec<Box<dyn Array>>) = if obj.hasattr("__arrow_c_stream__")? {
        let capsule = obj.call_method0("__arrow_c_stream__")?;
        let capsule = capsule.downcast::<PyCapsule>()?;
        let ptr = capsule.pointer() as *mut ffi::ArrowArrayStream;
        if ptr.is_null() {
            return Err(bad("the Arrow stream capsule is empty".into()));
        }
        // SAFETY: the capsule holds an ArrowArrayStream (the PyCapsule protocol); we
        // move it out and leave a released one behind, as consumers must.
        let stream = Box::new(unsafe { std::ptr::replace(ptr, ffi::ArrowArrayStream::empty()) });
        // SAFETY: a stream from the protocol meets the C stream interface.
        let mut reader = unsafe { ffi::ArrowArrayStreamReader::try_new(stream) }
            .map_err(|e| bad(format!("not a readable Arrow stream: {e}")))?;
        let field = reader.field().clone();
        let mut chunks = Vec::new();
        // SAFETY: as above.
        while let Some(a) = unsafe { reader.next() } {
            chunks.push(a.map_err(|e| bad(format!("reading the Arrow stream: {e}")))?);
        }
        (field, chunks)
    } else if obj.hasattr("__arrow_c_array__")? {
        let pair = obj.call_method0("__arrow_c_array__")?;
        let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) = pair.extract()?;
        let sp = schema.pointer() as *const ffi::ArrowSchema;
        let ap = array.pointer() as *mut ffi::ArrowArray;
        if sp.is_null() || ap.is_null() {
            return Err(bad("the Arrow array capsule is empty".into()));
        }
        // SAFETY: the capsules hold an ArrowSchema and an ArrowArray (the protocol);
        // the array is moved out, leaving a released one.
        let field = unsafe { ffi::import_field_from_c(&*sp) }.map_err(|e| bad(format!("Arrow schema: {e}")))?;
        let arr = unsafe { std::ptr::replace(ap, ffi::ArrowArray::empty()) };
        let a = unsafe { ffi::import_array_from_c(arr, field.dtype().clone()) }
            .map_err(|e| bad(format!("Arrow array: {e}")))?;
        (field, vec![a])
    } else {
        return Err(bad("expected Arrow data (__arrow_c_stream__ or __arrow_c_array__)".into()));
    };
    let ArrowDataType::Struct(fields) = field.dtype() else {
        return Err(bad(format!("expected a table (an Arrow struct of columns), found {:?}", field.dtype())));
    };
    let mut columns = Vec::with_capacity(fields.len());
    for (i, f) in fields.iter().enumerate() {
        let mut parts: Vec<Box<dyn Array>> = chunks
            .iter()
            .map(|c| c.as_any().downcast_ref::<StructArray>().map(|s| s.values()[i].clone()))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("an Arrow batch is not a struct of columns".into()))?;
        if parts.is_empty() {
            // A stream of no batches: the column, empty, with its type.
            parts.push(polars_arrow::array::new_empty_array(f.dtype().clone()));
        }
        let s = Series::try_from((f, parts)).map_err(|e| bad(format!("column `{}`: {e}", f.name)))?;
        columns.push(s.into());
    }
    let height = chunks.iter().map(|c| c.len()).sum();
    DataFrame::new(height, columns).map_err(|e| bad(e.to_string()))
}

/// Group ids: a numeric or bool array read in place, else any sequence (each id grouped
/// by its `str()`, as VAGEN groups).
fn group_ids(obj: &Bound<'_, PyAny>) -> PyResult<Vec<GroupId>> {
    if let Some(v) = ArrayView::of(obj)?.filter(|v| v.shape.len() == 1) {
        return Ok(v
            .cells()
            .map(|c| match c {
                Cell::I(i) => GroupId::Int(i.to_string()),
                Cell::U(u) => GroupId::Int(u.to_string()),
                Cell::F64(f) => GroupId::Float(f),
                Cell::F32(f) => GroupId::Float32(f),
                Cell::B(b) => GroupId::Bool(b),
            })
            .collect());
    }
    let mut out = Vec::new();
    for item in obj.try_iter()? {
        let item = item?;
        out.push(if item.is_none() { GroupId::None } else { GroupId::Str(item.str()?.to_string()) });
    }
    Ok(out)
}

/// Rewards, one number per sample.
fn rewards(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Scores>> {
    if let Some(v) = ArrayView::of(obj)?.filter(|v| v.shape.len() == 1) {
        return Ok(v.cells().map(|c| Scores::Reward(c.f64())).collect());
    }
    let mut out = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        let x: f64 = item?.extract().map_err(|_| {
            input_error(
                format!("<batch>, row {}, key `reward`: expected a number", i + 1),
                None,
                Some(i as u64 + 1),
                Some("reward".into()),
            )
        })?;
        out.push(Scores::Reward(x));
    }
    Ok(out)
}

/// Token-level scores: a 2-D array (one row per sample; float32 rows are summed in
/// float32, as numpy does), or a sequence of rows (arrays or lists; a number in place of
/// a row is that sample's plain reward, as a JSONL row without token scores has).
fn token_scores(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Scores>> {
    if let Some(v) = ArrayView::of(obj)?.filter(|v| v.shape.len() == 2) {
        let (n, w) = (v.shape[0], v.shape[1]);
        let cells: Vec<Cell> = v.cells().collect();
        return Ok((0..n).map(|r| row_scores(&cells[r * w..(r + 1) * w], v.is_f32())).collect());
    }
    let mut out = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        if let Some(v) = ArrayView::of(&item)?.filter(|v| v.shape.len() == 1) {
            let cells: Vec<Cell> = v.cells().collect();
            out.push(row_scores(&cells, v.is_f32()));
            continue;
        }
        // A row of a list of dicts without token scores carries a plain reward.
        if !item.hasattr("__iter__")? {
            if let Ok(r) = item.extract::<f64>() {
                out.push(Scores::Reward(r));
                continue;
            }
        }
        let bad = || {
            input_error(
                format!("<batch>, row {}, key `token_level_scores`: expected a list of numbers", i + 1),
                None,
                Some(i as u64 + 1),
                Some("token_level_scores".into()),
            )
        };
        let mut xs = Vec::new();
        for x in item.try_iter().map_err(|_| bad())? {
            xs.push(x?.extract::<f64>().map_err(|_| bad())?);
        }
        out.push(Scores::Tokens(xs));
    }
    Ok(out)
}

fn row_scores(cells: &[Cell], single: bool) -> Scores {
    if single {
        Scores::Tokens32(cells.iter().map(|c| if let Cell::F32(f) = c { *f } else { c.f64() as f32 }).collect())
    } else {
        Scores::Tokens(cells.iter().map(Cell::f64).collect())
    }
}

/// One value of a numeric array.
#[derive(Clone, Copy)]
enum Cell {
    I(i64),
    U(u64),
    F32(f32),
    F64(f64),
    B(bool),
}

impl Cell {
    fn f64(&self) -> f64 {
        match *self {
            Cell::I(i) => i as f64,
            Cell::U(u) => u as f64,
            Cell::F32(f) => f64::from(f),
            Cell::F64(f) => f,
            Cell::B(b) => f64::from(u8::from(b)),
        }
    }
}

/// A numpy array (anything with `__array_interface__`: numpy, and libraries that mimic
/// it) read in place: its memory is read while the array is held, one value at a time,
/// with no Python object per value. The buffer protocol would do the same but is not in
/// the stable ABI before Python 3.11, and the wheel serves 3.9 on.
struct ArrayView<'py> {
    _owner: Bound<'py, PyAny>,
    ptr: usize,
    kind: u8,
    size: usize,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

impl<'py> ArrayView<'py> {
    /// The array's view, or None when it has no array interface or holds values other
    /// than little-endian numbers and bools (objects, text: read as a sequence).
    fn of(obj: &Bound<'py, PyAny>) -> PyResult<Option<Self>> {
        let Ok(ai) = obj.getattr("__array_interface__") else { return Ok(None) };
        let Ok(ai) = ai.downcast::<PyDict>() else { return Ok(None) };
        let Some(typestr) = ai.get_item("typestr")? else { return Ok(None) };
        let typestr: String = typestr.extract()?;
        let b = typestr.as_bytes();
        if b.len() < 3 || b[0] == b'>' || !matches!(b[1], b'i' | b'u' | b'f' | b'b') {
            return Ok(None);
        }
        let Ok(size) = typestr[2..].parse::<usize>() else { return Ok(None) };
        let ok = match b[1] {
            b'i' | b'u' => matches!(size, 1 | 2 | 4 | 8),
            b'f' => matches!(size, 4 | 8),
            _ => size == 1,
        };
        if !ok {
            return Ok(None);
        }
        let Some(data) = ai.get_item("data")? else { return Ok(None) };
        let Ok((ptr, _readonly)) = data.extract::<(usize, bool)>() else { return Ok(None) };
        let shape: Vec<usize> = ai.get_item("shape")?.map(|s| s.extract()).transpose()?.unwrap_or_default();
        let strides = match ai.get_item("strides")? {
            Some(s) if !s.is_none() => s.extract::<Vec<isize>>()?,
            _ => {
                // C order: the last axis moves by one item.
                let mut st = vec![size as isize; shape.len()];
                for i in (0..shape.len().saturating_sub(1)).rev() {
                    st[i] = st[i + 1] * shape[i + 1] as isize;
                }
                st
            }
        };
        if strides.len() != shape.len() || (ptr == 0 && shape.iter().product::<usize>() > 0) {
            return Ok(None);
        }
        Ok(Some(ArrayView { _owner: obj.clone(), ptr, kind: b[1], size, shape, strides }))
    }

    fn is_f32(&self) -> bool {
        self.kind == b'f' && self.size == 4
    }

    /// Every value in C order (rows, then columns).
    fn cells(&self) -> Box<dyn Iterator<Item = Cell> + '_> {
        let n: usize = self.shape.iter().product();
        if self.contiguous() {
            // One pass down the memory, no index arithmetic per value.
            return Box::new((0..n).map(move |i| {
                // SAFETY: as below; a C-contiguous array holds n items from ptr.
                unsafe { self.read((self.ptr + i * self.size) as *const u8) }
            }));
        }
        Box::new((0..n).map(move |flat| {
            let mut rest = flat;
            let mut offset = 0isize;
            for d in (0..self.shape.len()).rev() {
                let i = rest % self.shape[d];
                rest /= self.shape[d];
                offset += i as isize * self.strides[d];
            }
            // SAFETY: the array is held (`_owner`) while we read, and every offset lies
            // within its shape and strides as the array interface declares them.
            unsafe { self.read((self.ptr as isize + offset) as *const u8) }
        }))
    }

    /// Whether the items lie one after another in C order.
    fn contiguous(&self) -> bool {
        let mut step = self.size as isize;
        for d in (0..self.shape.len()).rev() {
            if self.shape[d] > 1 && self.strides[d] != step {
                return false;
            }
            step *= self.shape[d] as isize;
        }
        true
    }

    unsafe fn read(&self, p: *const u8) -> Cell {
        use std::ptr::read_unaligned as rd;
        match (self.kind, self.size) {
            (b'i', 1) => Cell::I(i64::from(rd(p as *const i8))),
            (b'i', 2) => Cell::I(i64::from(rd(p as *const i16))),
            (b'i', 4) => Cell::I(i64::from(rd(p as *const i32))),
            (b'i', _) => Cell::I(rd(p as *const i64)),
            (b'u', 1) => Cell::U(u64::from(rd(p))),
            (b'u', 2) => Cell::U(u64::from(rd(p as *const u16))),
            (b'u', 4) => Cell::U(u64::from(rd(p as *const u32))),
            (b'u', _) => Cell::U(rd(p as *const u64)),
            (b'f', 4) => Cell::F32(rd(p as *const f32)),
            (b'f', _) => Cell::F64(rd(p as *const f64)),
            _ => Cell::B(rd(p) != 0),
        }
    }
}

#[pymodule]
fn _rollstat(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_cli, m)?)?;
    m.add_function(wrap_pyfunction!(profile, m)?)?;
    m.add_function(wrap_pyfunction!(aggregate, m)?)?;
    m.add_function(wrap_pyfunction!(health, m)?)?;
    m.add_function(wrap_pyfunction!(export, m)?)?;
    m.add_function(wrap_pyfunction!(compare, m)?)?;
    m.add_function(wrap_pyfunction!(query, m)?)?;
    m.add_function(wrap_pyfunction!(select, m)?)?;
    m.add_function(wrap_pyfunction!(report, m)?)?;
    m.add_function(wrap_pyfunction!(trend, m)?)?;
    m.add_function(wrap_pyfunction!(eval_compare, m)?)?;
    m.add_function(wrap_pyfunction!(tables, m)?)?;
    m.add_function(wrap_pyfunction!(to_lake, m)?)?;
    m.add_function(wrap_pyfunction!(gate, m)?)?;
    m.add_function(wrap_pyfunction!(read_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(read_rollouts, m)?)?;
    m.add_function(wrap_pyfunction!(batch_metrics, m)?)?;
    m.add_function(wrap_pyfunction!(view, m)?)?;
    m.add_function(wrap_pyfunction!(sweep::shard, m)?)?;
    m.add_function(wrap_pyfunction!(sweep::join, m)?)?;
    m.add_function(wrap_pyfunction!(sweep::merge_aggregate, m)?)?;
    m.add_function(wrap_pyfunction!(sweep::merge_profile, m)?)?;
    m.add_function(wrap_pyfunction!(sweep::merge_combine, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add_class::<Table>()?;
    m.add_class::<Viewer>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
