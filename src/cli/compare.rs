//! `rollstat compare`: is one run better than another, beyond noise? Each run's mean
//! score over tasks with a task-level standard error (clustered with `--cluster-key`), and
//! each run against a baseline, paired on the tasks both measured: difference, its
//! standard error and 95% interval, t test p-value, wins/losses/ties, and the unpaired
//! standard error for contrast. Runs are the run labels of one rollouts file (agents
//! fanned out over the same tasks), or of several files (a checkpoint against another).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;
use polars::prelude::*;

use super::common;
use super::query::TableOut;
use crate::error::{Error, Location, Result};
use crate::export::atomic::OutputSet;
use crate::ingest::frame::rollouts_frame;
use crate::ingest::labels::runs;
use crate::metrics::compare::{report, ClusterProblem, Report, RunRollouts, TaskValue};
use crate::metrics::profile::duplicate_key;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Rollouts JSONL, or a rollouts table (.parquet) from `rollstat ingest`/`export`;
    /// repeat to compare runs from several files (tasks are matched by `_ng_task_index`,
    /// so the files must come from the same task list).
    #[arg(long, value_name = "ROLLOUTS.jsonl", required = true)]
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL for run labels: none, or one per --rollouts, in order.
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Vec<PathBuf>,
    /// Label for rollouts that name no agent.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Numeric field to compare.
    #[arg(long, value_name = "FIELD", default_value = "reward")]
    pub metric: String,
    /// Compare each task's pass@K (NeMo Gym's estimator: unbiased for 0/1 scores, best of
    /// the first K otherwise) instead of its mean; tasks with fewer than K measured
    /// rollouts are left out.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    pub pass_at: Option<u32>,
    /// The run the others are compared against (default: the first run listed).
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Field that groups tasks into clusters (questions on one passage, variants of one
    /// problem): standard errors are clustered by it. Every measured rollout of a task
    /// must carry the same value.
    #[arg(long, value_name = "FIELD")]
    pub cluster_key: Option<String>,
    #[command(flatten)]
    pub output: TableOut,
}

impl Args {
    /// What a run's value for one task is.
    pub fn task_value(&self) -> TaskValue {
        self.pass_at.map_or(TaskValue::Mean, |k| TaskValue::PassAt(k as usize))
    }

    /// The compared statistic as named in the output: the metric, or with `--pass-at` the
    /// key of `aggregate --metric pass_at_k` for it (`pass@4/accuracy`: NeMo Gym scores
    /// `reward` as `accuracy`), else `pass@4/<metric>`.
    pub fn statistic(&self) -> String {
        match self.pass_at {
            Some(k) if self.metric == "reward" => format!("pass@{k}/accuracy"),
            Some(k) => format!("pass@{k}/{}", self.metric),
            None => self.metric.clone(),
        }
    }
}

/// The runs read from the files, and their names.
pub struct Runs {
    pub names: Vec<String>,
    pub rollouts: Vec<RunRollouts>,
}

/// The numeric columns of a rollouts frame (what `--metric` may name).
fn numeric_fields(df: &DataFrame) -> Vec<String> {
    df.columns()
        .iter()
        .filter(|c| c.dtype().is_primitive_numeric() && !c.name().starts_with("_ng_"))
        .map(|c| c.name().to_string())
        .collect()
}

/// A rollouts table from JSONL (with its line numbers) or from Parquet written by
/// `rollstat ingest` (rows numbered from 1).
struct Table {
    df: DataFrame,
    /// Per row: the JSONL line it came from.
    lines: Option<Vec<u64>>,
}

impl Table {
    fn at(&self, path: &Path, r: usize) -> Location {
        match &self.lines {
            Some(l) => Location::line(path, l[r]),
            None => Location::file(path).row(r as u64 + 1),
        }
    }
}

fn read_table(a: &Args, path: &Path, inputs: Option<&Path>) -> Result<Table> {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("parquet")) {
        if inputs.is_some() {
            return Err(Error::Usage(format!(
                "{}: a Parquet table already carries its run labels; --inputs goes with JSONL rollouts",
                path.display()
            )));
        }
        let mut df = crate::ingest::parquet::read_parquet(path)?;
        let bad = |col: &str, msg: &str| Error::bad(Location::file(path).key(col), msg.to_string());
        for col in ["agent", "_ng_task_index", "_ng_rollout_index", "mask_sample"] {
            let Ok(c) = df.column(col) else {
                return Err(bad(
                    col,
                    "no such column; give a rollouts table written by `rollstat ingest` or `rollstat export`",
                ));
            };
            let ok = match col {
                "agent" => c.dtype().is_string() || c.dtype().is_categorical() || c.dtype().is_integer(),
                "mask_sample" => c.dtype().is_bool() || c.dtype().is_integer(),
                _ => c.dtype().is_integer(),
            };
            if !ok {
                return Err(bad(col, &format!("the column holds {}, which a rollouts table does not", c.dtype())));
            }
        }
        // Labels as text (a categorical column from pandas or Polars included); mask flags
        // by Python truthiness.
        let agent = df.column("agent")?.cast(&DataType::String)?;
        let agent = match &a.agent {
            Some(name) => agent.str()?.apply(|v| Some(v.map_or(name.as_str().into(), |s| s.into()))).into_column(),
            None => agent,
        };
        df.with_column(agent)?;
        let masked = df.column("mask_sample")?;
        if !masked.dtype().is_bool() {
            let flags: BooleanChunked =
                masked.cast(&DataType::Int64)?.i64()?.iter().map(|v| v.map(|i| i != 0)).collect();
            df.with_column(flags.with_name("mask_sample".into()).into_column())?;
        }
        return Ok(Table { df, lines: None });
    }
    let (t, inp) = crate::workflow::read_both(path, inputs)?;
    let labels = runs(&t, inp.as_ref());
    let df = rollouts_frame(&t, &labels, a.agent.as_deref())?;
    if let Some(r) = df.column("agent")?.str()?.iter().position(|v| v.is_none()) {
        return Err(crate::metrics::aggregate::unnamed(&t, inp.as_ref(), r));
    }
    Ok(Table { df, lines: Some(t.line.clone()) })
}

/// Reads one rollouts file into its runs (by label, in label order).
fn read_file(a: &Args, path: &Path, inputs: Option<&Path>) -> Result<Vec<(String, RunRollouts)>> {
    let table = read_table(a, path, inputs)?;
    let df = &table.df;
    let fields = || {
        let f = numeric_fields(df);
        if f.is_empty() {
            "there are no numeric fields".to_string()
        } else {
            format!("numeric fields: {}", f.join(", "))
        }
    };
    let Ok(metric) = df.column(&a.metric) else {
        return Err(Error::bad(
            Location::file(path).key(&a.metric),
            format!("no rollout has a numeric `{}`; {}", a.metric, fields()),
        ));
    };
    if !(metric.dtype().is_primitive_numeric() || metric.dtype().is_bool()) {
        return Err(Error::bad(
            Location::file(path).key(&a.metric),
            format!(
                "`{}` holds {}, not numbers; {}",
                a.metric,
                if metric.dtype().is_string() { "text".to_string() } else { metric.dtype().to_string() },
                fields()
            ),
        ));
    }
    let values = metric.cast(&DataType::Float64)?;
    let values = values.f64()?;
    let clusters = match &a.cluster_key {
        None => None,
        Some(k) => {
            let Ok(c) = df.column(k) else {
                return Err(Error::bad(Location::file(path).key(k), "no rollout has this field (--cluster-key)"));
            };
            Some(cluster_keys(c).map_err(|e| {
                Error::bad(Location::file(path).key(k), format!("cannot use this field as a cluster: {e}"))
            })?)
        }
    };
    let agent = df.column("agent")?.str()?;
    let masked = df.column("mask_sample")?.bool()?;
    let int = |name: &str| df.column(name).and_then(|c| c.cast(&DataType::Int64));
    let (task, rollout) = (int("_ng_task_index")?, int("_ng_rollout_index")?);
    let (task, rollout) = (task.i64()?, rollout.i64()?);
    let mut by: BTreeMap<String, RunRollouts> = BTreeMap::new();
    // (run, task, rollout, row): a rollout key may occur once per run, as in `aggregate`.
    let mut keys: Vec<(usize, i64, i64, usize)> = Vec::with_capacity(df.height());
    let mut run_ids: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for r in 0..df.height() {
        let (Some(label), Some(task), Some(rollout)) = (agent.get(r), task.get(r), rollout.get(r)) else {
            let what = if agent.get(r).is_none() {
                "names no agent (give --agent NAME)"
            } else {
                "has no usable rollout key (`_ng_task_index` and `_ng_rollout_index`, integers)"
            };
            return Err(Error::bad(table.at(path, r), format!("this rollout {what}")));
        };
        let next = run_ids.len();
        keys.push((*run_ids.entry(label).or_insert(next), task, rollout, r));
        let run = match by.get_mut(label) {
            Some(run) => run,
            None => by.entry(label.to_string()).or_default(),
        };
        let cluster = clusters.as_ref().map(|c| c[r].as_deref());
        if let Err(problem) = run.add(task, rollout, values.get(r), masked.get(r).unwrap_or(false), cluster) {
            let key = a.cluster_key.as_deref().unwrap_or_default();
            let msg = match problem {
                ClusterProblem::Missing => {
                    "this measured rollout has no usable value of the --cluster-key field (a number, \
                    a bool or text of up to 512 bytes); every measured rollout needs one"
                        .to_string()
                }
                ClusterProblem::Differs { first, then } => format!(
                    "task {task} has rollouts in cluster {first} and in cluster {then}; a cluster must hold whole tasks"
                ),
            };
            return Err(Error::bad(table.at(path, r).key(key), msg));
        }
    }
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| (w[0].0, w[0].1, w[0].2) == (w[1].0, w[1].1, w[1].2)) {
        let (a, b) = (w[0].3, w[1].3);
        return Err(match &table.lines {
            Some(l) => duplicate_key("result", (w[0].1, w[0].2), l[a].min(l[b]), l[a].max(l[b]), path),
            None => Error::bad(
                Location::file(path),
                format!("rows {} and {} have the same rollout key ({}, {}) and run", a + 1, b + 1, w[0].1, w[0].2),
            ),
        });
    }
    Ok(by.into_iter().collect())
}

/// Each row's cluster, as text that is equal exactly when Python would find the values
/// equal: numbers by value (`1`, `1.0` and `true` are one cluster, written `1`; an
/// integral float is written as its exact integer, so `2**53` and `2.0**53` meet), text
/// quoted (so `"1"` is another).
fn cluster_keys(c: &Column) -> PolarsResult<Vec<Option<String>>> {
    let dt = c.dtype();
    if dt.is_unsigned_integer() {
        return Ok(c.cast(&DataType::UInt64)?.u64()?.iter().map(|v| v.map(|i| i.to_string())).collect());
    }
    if dt.is_integer() {
        return Ok(c.cast(&DataType::Int64)?.i64()?.iter().map(|v| v.map(|i| i.to_string())).collect());
    }
    if dt.is_float() || dt.is_bool() {
        let number =
            |x: f64| if x.is_finite() && x.fract() == 0.0 { format!("{:.0}", x + 0.0) } else { format!("{x:?}") };
        return Ok(c.cast(&DataType::Float64)?.f64()?.iter().map(|v| v.map(number)).collect());
    }
    if !(dt.is_string() || dt.is_categorical()) {
        polars_bail!(InvalidOperation: "it holds {dt}, not numbers or text");
    }
    Ok(c.cast(&DataType::String)?.str()?.iter().map(|v| v.map(|s| format!("{s:?}"))).collect())
}

/// How a file is named in run names: its stem, or its path when two files share a stem.
fn file_names(paths: &[PathBuf]) -> Vec<String> {
    let stems: Vec<String> = paths
        .iter()
        .map(|p| p.file_stem().map_or_else(|| p.display().to_string(), |s| s.to_string_lossy().into_owned()))
        .collect();
    let unique = stems.iter().enumerate().all(|(i, s)| !stems[..i].contains(s));
    if unique {
        stems
    } else {
        paths.iter().map(|p| p.display().to_string()).collect()
    }
}

/// Reads every file. A run is named by its label, or `FILE:label` when one label occurs
/// in two files.
pub fn read_runs(a: &Args) -> Result<Runs> {
    if !a.inputs.is_empty() && a.inputs.len() != a.rollouts.len() {
        return Err(Error::Usage(format!(
            "give --inputs once per --rollouts file, in the same order, or not at all ({} rollouts files, {} inputs files)",
            a.rollouts.len(),
            a.inputs.len()
        )));
    }
    for (i, path) in a.rollouts.iter().enumerate() {
        if a.rollouts[..i].iter().any(|q| q == path || crate::export::atomic::same_file(q, path)) {
            return Err(Error::Usage(format!("{} is given twice as --rollouts", path.display())));
        }
    }
    let mut per_file = Vec::new();
    for (i, path) in a.rollouts.iter().enumerate() {
        per_file.push(read_file(a, path, a.inputs.get(i).map(PathBuf::as_path))?);
    }
    let files = file_names(&a.rollouts);
    let all: Vec<&str> = per_file.iter().flatten().map(|(l, _)| l.as_str()).collect();
    let clash = all.iter().enumerate().any(|(i, l)| all[..i].contains(l));
    let mut names = Vec::new();
    let mut rollouts = Vec::new();
    for (f, runs) in per_file.into_iter().enumerate() {
        for (label, r) in runs {
            names.push(if clash { format!("{}:{label}", files[f]) } else { label });
            rollouts.push(r);
        }
    }
    Ok(Runs { names, rollouts })
}

/// Reads the runs and computes the report.
pub fn execute(a: &Args) -> Result<(Runs, Report)> {
    let runs = read_runs(a)?;
    if runs.names.len() < 2 {
        let files: Vec<String> = a.rollouts.iter().map(|p| p.display().to_string()).collect();
        let found = match runs.names.first() {
            Some(name) => format!("one run ({name})"),
            None => "no rollouts".to_string(),
        };
        return Err(Error::Usage(format!(
            "compare needs two runs; {} hold{} {found}: give another --rollouts file, or a file with several agents",
            files.join(", "),
            if files.len() == 1 { "s" } else { "" }
        )));
    }
    let baseline = match &a.baseline {
        None => 0,
        Some(b) => runs.names.iter().position(|n| n == b).ok_or_else(|| {
            Error::Usage(format!("--baseline {b:?} is not a run here; runs: {}", runs.names.join(", ")))
        })?,
    };
    if let Some(k) = a.pass_at {
        let most = runs.rollouts.iter().map(RunRollouts::most_per_task).max().unwrap_or(0);
        if most < k as usize {
            return Err(Error::Usage(format!(
                "--pass-at {k}: no task of any run has {k} measured rollouts (at most {most})"
            )));
        }
    }
    let r = report(&runs.names, &runs.rollouts, baseline, a.cluster_key.is_some(), a.task_value()).map_err(
        |(task, r0, c0, r1, c1)| {
        Error::Mismatch(format!(
            "--cluster-key {}: task {task} is in cluster {c0} in {} and in cluster {c1} in {}; a task must be in one cluster",
            a.cluster_key.as_deref().unwrap_or_default(),
            runs.names[r0],
            runs.names[r1]
        ))
        },
    )?;
    Ok((runs, r))
}

/// One row per run: its summary, and (except for the baseline) its comparison.
pub fn frame(r: &Report, statistic: &str) -> PolarsResult<DataFrame> {
    use crate::metrics::compare::Comparison;
    use crate::stats::paired::Paired;
    let n = r.runs.len();
    let cmp: Vec<Option<&Comparison>> = (0..n).map(|i| r.comparisons.iter().find(|c| c.run == i)).collect();
    let runs = |f: &dyn Fn(&crate::metrics::compare::RunSummary) -> Option<f64>| -> Vec<Option<f64>> {
        r.runs.iter().map(f).collect()
    };
    let count = |f: &dyn Fn(&crate::metrics::compare::RunSummary) -> usize| -> Vec<i64> {
        r.runs.iter().map(|s| f(s) as i64).collect()
    };
    let p = |f: &dyn Fn(&Paired) -> Option<f64>| -> Vec<Option<f64>> {
        cmp.iter().map(|c| c.and_then(|c| c.stats.as_ref()).and_then(f)).collect()
    };
    let pn = |f: &dyn Fn(&Paired) -> usize| -> Vec<Option<i64>> {
        cmp.iter().map(|c| c.and_then(|c| c.stats.as_ref()).map(|s| f(s) as i64)).collect()
    };
    let ci = |end: fn((f64, f64)) -> f64| -> Vec<Option<f64>> {
        cmp.iter().map(|c| c.and_then(|c| c.ci).map(end)).collect()
    };
    let cols = vec![
        Column::new("run".into(), r.runs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()),
        Column::new("statistic".into(), vec![statistic; n]),
        Column::new("tasks".into(), count(&|s| s.tasks)),
        Column::new("rollouts".into(), count(&|s| s.rollouts)),
        Column::new("masked".into(), count(&|s| s.masked)),
        Column::new("mean".into(), runs(&|s| s.est.map(|e| e.mean))),
        Column::new("se".into(), runs(&|s| s.est.and_then(|e| e.se))),
        Column::new("ci_low_95".into(), runs(&|s| s.ci.map(|c| c.0))),
        Column::new("ci_high_95".into(), runs(&|s| s.ci.map(|c| c.1))),
        Column::new("clusters".into(), r.runs.iter().map(|s| s.est.map(|e| e.clusters as i64)).collect::<Vec<_>>()),
        Column::new(
            "baseline".into(),
            cmp.iter().map(|c| c.map(|_| r.runs[r.baseline].name.as_str())).collect::<Vec<_>>(),
        ),
        Column::new("paired_tasks".into(), cmp.iter().map(|c| c.map(|c| c.paired_tasks as i64)).collect::<Vec<_>>()),
        Column::new("paired_mean".into(), p(&|s| Some(s.mean_b))),
        Column::new("paired_baseline_mean".into(), p(&|s| Some(s.mean_a))),
        Column::new("diff".into(), p(&|s| Some(s.diff.mean))),
        Column::new("diff_se".into(), p(&|s| s.diff.se)),
        Column::new("diff_ci_low_95".into(), ci(|c| c.0)),
        Column::new("diff_ci_high_95".into(), ci(|c| c.1)),
        Column::new("t".into(), p(&|s| s.t)),
        Column::new("df".into(), p(&|s| s.diff.se.map(|_| s.diff.df))),
        Column::new("p_value".into(), p(&|s| s.p)),
        Column::new("wins".into(), pn(&|s| s.wins)),
        Column::new("losses".into(), pn(&|s| s.losses)),
        Column::new("ties".into(), pn(&|s| s.ties)),
        Column::new("correlation".into(), p(&|s| s.correlation)),
        Column::new("diff_se_unpaired".into(), p(&|s| s.se_unpaired)),
    ];
    DataFrame::new(n, cols)
}

/// Whether `x` is shown in scientific form: very small or large, not 0.
fn scientific(x: f64) -> bool {
    x != 0.0 && x.is_finite() && (x.abs() < 1e-3 || x.abs() >= 1e6)
}

/// A number for the readable report: 4 decimals, or 3 significant digits in scientific
/// form (`sci`, or when the number needs it); `-` when absent.
fn num(v: Option<f64>, signed: bool, sci: bool) -> String {
    match v {
        None => "-".into(),
        Some(x) if sci || scientific(x) => {
            if signed {
                format!("{x:+.3e}")
            } else {
                format!("{x:.3e}")
            }
        }
        Some(x) if signed => format!("{x:+.4}"),
        Some(x) => format!("{x:.4}"),
    }
}

/// `[low, high]`, both ends in one form.
fn interval(ci: Option<(f64, f64)>, signed: bool) -> String {
    ci.map_or_else(
        || "-".into(),
        |(a, b)| {
            let sci = scientific(a) || scientific(b);
            format!("[{}, {}]", num(Some(a), signed, sci), num(Some(b), signed, sci))
        },
    )
}

/// Left-aligned columns (the first `left` of them), the others right-aligned, two spaces
/// apart; widths from the widest cell (in characters).
fn columns(rows: &[Vec<String>], left: usize) -> String {
    let ncol = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> =
        (0..ncol).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut o = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| if c < left { format!("{s:<w$}", w = width[c]) } else { format!("{s:>w$}", w = width[c]) })
            .collect();
        o.push_str(cells.join("  ").trim_end());
        o.push('\n');
    }
    o
}

/// The readable report.
pub fn text(a: &Args, r: &Report) -> String {
    let unit = match &a.cluster_key {
        Some(k) => format!("tasks are the unit, standard errors clustered by `{k}`"),
        None => "tasks are the unit".into(),
    };
    let per_task = match a.pass_at {
        Some(k) => format!(
            "pass@{k} of `{}` over its measured rollouts (a fraction; `aggregate` writes pass@k in percent)",
            a.metric
        ),
        None => format!("mean of `{}` over its measured rollouts", a.metric),
    };
    let mut o = format!("{}: each run's mean over tasks of the task's {per_task}; {unit}\n\n", a.statistic());
    let clustered = a.cluster_key.is_some();
    let mut rows =
        vec![["run", "tasks", "rollouts", "masked", "mean", "se", "95% interval"].map(String::from).to_vec()];
    if clustered {
        rows[0].push("clusters".into());
    }
    rows[0].push(String::new());
    for (i, s) in r.runs.iter().enumerate() {
        let mut row = vec![
            s.name.clone(),
            s.tasks.to_string(),
            s.rollouts.to_string(),
            s.masked.to_string(),
            num(s.est.map(|e| e.mean), false, false),
            num(s.est.and_then(|e| e.se), false, false),
            interval(s.ci, false),
        ];
        if clustered {
            row.push(s.est.map_or(0, |e| e.clusters).to_string());
        }
        row.push(if i == r.baseline { "(baseline)".into() } else { String::new() });
        rows.push(row);
    }
    o.push_str(&columns(&rows, 1));
    o.push_str(&format!(
        "\nagainst {}, paired on the tasks both measured (difference = run - baseline):\n",
        r.runs[r.baseline].name
    ));
    let mut rows =
        vec![["run", "tasks", "diff", "se", "95% interval", "p-value", "wins/losses/ties", "corr", "unpaired se"]
            .map(String::from)
            .to_vec()];
    for c in &r.comparisons {
        let s = c.stats.as_ref();
        let p = match s.and_then(|s| s.p) {
            None => "-".into(),
            Some(0.0) => "0".into(),
            Some(p) if p < 1e-4 => format!("{p:.1e}"),
            Some(p) => format!("{p:.4}"),
        };
        rows.push(vec![
            r.runs[c.run].name.clone(),
            c.paired_tasks.to_string(),
            num(s.map(|s| s.diff.mean), true, false),
            num(s.and_then(|s| s.diff.se), false, false),
            interval(c.ci, true),
            p,
            s.map_or_else(|| "-".into(), |s| format!("{}/{}/{}", s.wins, s.losses, s.ties)),
            s.and_then(|s| s.correlation).map_or_else(|| "-".into(), |r| format!("{r:.2}")),
            num(s.and_then(|s| s.se_unpaired), false, false),
        ]);
    }
    o.push_str(&columns(&rows, 1));
    if r.comparisons.iter().any(|c| c.only_baseline + c.only_run > 0) {
        o.push_str(
            "(runs measured different tasks: a difference is over the paired tasks only, not the means above; \
             csv/json give paired_mean and paired_baseline_mean)\n",
        );
    }
    o
}

pub fn run(a: Args) -> Result<()> {
    let mut read: Vec<&Path> = a.rollouts.iter().map(PathBuf::as_path).collect();
    read.extend(a.inputs.iter().map(PathBuf::as_path));
    let out = OutputSet::new(&read);
    // Refused before reading, not after.
    a.output.check(&out)?;
    let (_, r) = execute(&a)?;
    common::print_warnings(&r.warnings);
    a.output.write(out, frame(&r, &a.statistic())?, |_| text(&a, &r).into_bytes(), "runs")
}
