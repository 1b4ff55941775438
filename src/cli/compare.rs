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
use crate::metrics::compare::{report, ClusterProblem, Report, RunRollouts};
use crate::metrics::labels::runs;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Rollouts JSONL; repeat to compare runs from several files (tasks are matched by
    /// `_ng_task_index`, so the files must come from the same task list).
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
    /// The run the others are compared against (default: the first run listed).
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Field that groups tasks into clusters (questions on one passage, variants of one
    /// problem): standard errors are clustered by it. Every measured rollout of a task
    /// must carry the same value.
    #[arg(long, value_name = "FIELD")]
    pub cluster_key: Option<String>,
    /// `--format table` (default) is a readable report; csv, json and parquet give one row
    /// per run.
    #[command(flatten)]
    pub output: TableOut,
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

/// Reads one rollouts file into its runs (by label, in label order).
fn read_file(a: &Args, path: &Path, inputs: Option<&Path>) -> Result<Vec<(String, RunRollouts)>> {
    let (t, inp) = common::read_both(path, inputs)?;
    let labels = runs(&t, inp.as_ref());
    let df = rollouts_frame(&t, &labels, a.agent.as_deref())?;
    let Ok(metric) = df.column(&a.metric) else {
        return Err(Error::bad(
            Location::file(path).key(&a.metric),
            format!("no rollout has a numeric `{}`; numeric fields: {}", a.metric, numeric_fields(&df).join(", ")),
        ));
    };
    if !metric.dtype().is_primitive_numeric() {
        return Err(Error::bad(
            Location::file(path).key(&a.metric),
            format!(
                "`{}` holds {}, not numbers; numeric fields: {}",
                a.metric,
                if metric.dtype().is_string() { "text".to_string() } else { metric.dtype().to_string() },
                numeric_fields(&df).join(", ")
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
            Some(c.cast(&DataType::String)?)
        }
    };
    let clusters = clusters.as_ref().map(|c| c.str()).transpose()?;
    let agent = df.column("agent")?.str()?;
    let masked = df.column("mask_sample")?.bool()?;
    let mut by: BTreeMap<String, RunRollouts> = BTreeMap::new();
    for r in 0..df.height() {
        let Some(label) = agent.get(r) else {
            return Err(crate::metrics::aggregate::unnamed(&t, inp.as_ref(), r));
        };
        let run = match by.get_mut(label) {
            Some(run) => run,
            None => by.entry(label.to_string()).or_default(),
        };
        let cluster = clusters.map(|c| c.get(r));
        if let Err(problem) = run.add(t.task[r], values.get(r), masked.get(r).unwrap_or(false), cluster) {
            let key = a.cluster_key.as_deref().unwrap_or_default();
            let msg = match problem {
                ClusterProblem::Missing => {
                    "this measured rollout has no value of the --cluster-key field; every measured rollout needs one"
                        .to_string()
                }
                ClusterProblem::Differs { first, then } => format!(
                    "task {} has rollouts in cluster {first:?} and in cluster {then:?}; a cluster must hold whole tasks",
                    t.task[r]
                ),
            };
            return Err(Error::bad(Location::line(path, t.line[r]).key(key), msg));
        }
    }
    Ok(by.into_iter().collect())
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
        let same =
            |q: &PathBuf| q == path || matches!((q.canonicalize(), path.canonicalize()), (Ok(x), Ok(y)) if x == y);
        if a.rollouts[..i].iter().any(same) {
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
        return Err(Error::Usage(format!(
            "compare needs two runs; {} holds one ({}): give a second --rollouts file, or a file with several agents",
            a.rollouts[0].display(),
            runs.names.first().map_or("none", String::as_str)
        )));
    }
    let baseline = match &a.baseline {
        None => 0,
        Some(b) => runs.names.iter().position(|n| n == b).ok_or_else(|| {
            Error::Usage(format!("--baseline {b:?} is not a run here; runs: {}", runs.names.join(", ")))
        })?,
    };
    let r = report(&runs.names, &runs.rollouts, baseline, a.cluster_key.is_some()).map_err(|(task, r0, c0, r1, c1)| {
        Error::Mismatch(format!(
            "--cluster-key {}: task {task} is in cluster {c0:?} in {} and in cluster {c1:?} in {}; a task must be in one cluster",
            a.cluster_key.as_deref().unwrap_or_default(),
            runs.names[r0],
            runs.names[r1]
        ))
    })?;
    Ok((runs, r))
}

/// One row per run: its summary, and (except for the baseline) its comparison.
pub fn frame(r: &Report) -> PolarsResult<DataFrame> {
    let n = r.runs.len();
    let cmp: Vec<Option<&crate::metrics::compare::Comparison>> =
        (0..n).map(|i| r.comparisons.iter().find(|c| c.run == i)).collect();
    let est = |f: fn(&crate::stats::paired::MeanSe) -> f64| -> Vec<Option<f64>> {
        r.runs.iter().map(|s| s.est.as_ref().map(f)).collect()
    };
    let p = |f: fn(&crate::stats::paired::Paired) -> Option<f64>| -> Vec<Option<f64>> {
        cmp.iter().map(|c| c.and_then(|c| c.stats.as_ref()).and_then(f)).collect()
    };
    let count = |f: fn(&crate::stats::paired::Paired) -> usize| -> Vec<Option<u64>> {
        cmp.iter().map(|c| c.and_then(|c| c.stats.as_ref()).map(|s| f(s) as u64)).collect()
    };
    let cols = vec![
        Column::new("run".into(), r.runs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>()),
        Column::new("tasks".into(), r.runs.iter().map(|s| s.tasks as u64).collect::<Vec<_>>()),
        Column::new("rollouts".into(), r.runs.iter().map(|s| s.rollouts as u64).collect::<Vec<_>>()),
        Column::new("mean".into(), est(|e| e.mean)),
        Column::new("se".into(), r.runs.iter().map(|s| s.est.and_then(|e| e.se)).collect::<Vec<_>>()),
        Column::new("ci_low_95".into(), r.runs.iter().map(|s| s.ci.map(|c| c.0)).collect::<Vec<_>>()),
        Column::new("ci_high_95".into(), r.runs.iter().map(|s| s.ci.map(|c| c.1)).collect::<Vec<_>>()),
        Column::new("clusters".into(), r.runs.iter().map(|s| s.est.map(|e| e.clusters as u64)).collect::<Vec<_>>()),
        Column::new(
            "baseline".into(),
            cmp.iter().map(|c| c.map(|_| r.runs[r.baseline].name.as_str())).collect::<Vec<_>>(),
        ),
        Column::new("paired_tasks".into(), cmp.iter().map(|c| c.map(|c| c.paired_tasks as u64)).collect::<Vec<_>>()),
        Column::new("diff".into(), p(|s| Some(s.diff.mean))),
        Column::new("diff_se".into(), p(|s| s.diff.se)),
        Column::new("diff_ci_low_95".into(), cmp.iter().map(|c| c.and_then(|c| c.ci).map(|c| c.0)).collect::<Vec<_>>()),
        Column::new(
            "diff_ci_high_95".into(),
            cmp.iter().map(|c| c.and_then(|c| c.ci).map(|c| c.1)).collect::<Vec<_>>(),
        ),
        Column::new("t".into(), p(|s| s.t)),
        Column::new("df".into(), p(|s| Some(s.diff.df))),
        Column::new("p_value".into(), p(|s| s.p)),
        Column::new("wins".into(), count(|s| s.wins)),
        Column::new("losses".into(), count(|s| s.losses)),
        Column::new("ties".into(), count(|s| s.ties)),
        Column::new("correlation".into(), p(|s| s.correlation)),
        Column::new("diff_se_unpaired".into(), p(|s| s.se_unpaired)),
    ];
    DataFrame::new(n, cols)
}

/// A number for the readable report: 4 decimals, or 3 significant digits in scientific
/// form when very small or large.
fn num(v: Option<f64>, signed: bool) -> String {
    match v {
        None => "-".into(),
        Some(x) if x != 0.0 && x.is_finite() && (x.abs() < 1e-3 || x.abs() >= 1e6) => {
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

fn interval(ci: Option<(f64, f64)>, signed: bool) -> String {
    ci.map_or_else(|| "-".into(), |(a, b)| format!("[{}, {}]", num(Some(a), signed), num(Some(b), signed)))
}

/// The readable report.
pub fn text(a: &Args, r: &Report) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let unit = match &a.cluster_key {
        Some(k) => format!("tasks are the unit, standard errors clustered by `{k}`"),
        None => "tasks are the unit".into(),
    };
    let _ = writeln!(
        o,
        "metric `{}`: each run's mean over tasks of the task's mean over its measured rollouts; {unit}",
        a.metric
    );
    let w = r.runs.iter().map(|s| s.name.chars().count()).max().unwrap_or(3).max(3);
    let clustered = a.cluster_key.is_some();
    let _ = writeln!(o);
    let _ = write!(
        o,
        "{:<w$}  {:>7}  {:>9}  {:>10}  {:>10}  {:<24}",
        "run", "tasks", "rollouts", "mean", "se", "95% interval"
    );
    let _ = writeln!(o, "{}", if clustered { "  clusters" } else { "" });
    for (i, s) in r.runs.iter().enumerate() {
        let _ = write!(
            o,
            "{:<w$}  {:>7}  {:>9}  {:>10}  {:>10}  {:<24}",
            s.name,
            s.tasks,
            s.rollouts,
            num(s.est.map(|e| e.mean), false),
            num(s.est.and_then(|e| e.se), false),
            interval(s.ci, false)
        );
        if clustered {
            let _ = write!(o, "  {:>8}", s.est.map_or(0, |e| e.clusters));
        }
        let _ = writeln!(o, "{}", if i == r.baseline { "  (baseline)" } else { "" });
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "against {}, paired on the tasks both measured (difference = run - baseline):",
        r.runs[r.baseline].name
    );
    let _ = writeln!(
        o,
        "{:<w$}  {:>7}  {:>10}  {:>10}  {:<24}  {:>9}  {:>16}  {:>6}  {:>11}",
        "run", "tasks", "diff", "se", "95% interval", "p-value", "wins/losses/ties", "corr", "unpaired se"
    );
    for c in &r.comparisons {
        let s = c.stats.as_ref();
        let wlt = s.map_or_else(|| "-".into(), |s| format!("{}/{}/{}", s.wins, s.losses, s.ties));
        let p = match s.and_then(|s| s.p) {
            None => "-".into(),
            Some(p) if p < 1e-4 => format!("{p:.1e}"),
            Some(p) => format!("{p:.4}"),
        };
        let corr = s.and_then(|s| s.correlation).map_or_else(|| "-".into(), |r| format!("{r:.2}"));
        let _ = writeln!(
            o,
            "{:<w$}  {:>7}  {:>10}  {:>10}  {:<24}  {:>9}  {:>16}  {:>6}  {:>11}",
            r.runs[c.run].name,
            c.paired_tasks,
            num(s.map(|s| s.diff.mean), true),
            num(s.and_then(|s| s.diff.se), false),
            interval(c.ci, true),
            p,
            wlt,
            corr,
            num(s.and_then(|s| s.se_unpaired), false)
        );
    }
    let mut lines: String = o.lines().map(|l| format!("{}\n", l.trim_end())).collect();
    lines.shrink_to_fit();
    lines
}

pub fn run(a: Args) -> Result<()> {
    let mut read: Vec<&Path> = a.rollouts.iter().map(PathBuf::as_path).collect();
    read.extend(a.inputs.iter().map(PathBuf::as_path));
    let out = OutputSet::new(&read);
    // Refused before reading, not after.
    a.output.check(&out)?;
    let (_, r) = execute(&a)?;
    common::print_warnings(&r.warnings);
    a.output.write(out, frame(&r)?, |_| text(&a, &r).into_bytes(), "runs")
}
