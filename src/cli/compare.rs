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
use super::query::{Format, TableOut};
use crate::error::{Error, Location, Result};
use crate::export::atomic::OutputSet;
use crate::ingest::frame::rollouts_frame;
use crate::ingest::labels::runs;
use crate::ingest::table::Source;
use crate::metrics::compare::{
    report_with, ClusterProblem, Comparison, Exact, Options, Report, RunRollouts, RunSummary, TaskValue, FEW_VALUES,
};
use crate::metrics::profile::duplicate_key;
use crate::stats::paired::Paired;

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
    /// Repeat the comparison for each group of tasks by a field (`subset`, a difficulty):
    /// per-group means, differences, intervals and tests. Every measured rollout of a
    /// task must carry the same value, all numbers or all text.
    #[arg(long, value_name = "FIELD")]
    pub by: Option<String>,
    /// Is the eval big enough? The smallest difference each comparison would detect
    /// (two-sided 5% paired t test, 80% power) given the observed task-level spread, and
    /// per run the share of the task means' variance that is repeat noise, with what
    /// twice the repeats or twice the tasks would do to the interval.
    #[arg(long)]
    pub mde: bool,
    /// The number of tasks each comparison needs to detect a difference of DIFF (in the
    /// metric's units) with 80% power at 5%, given the observed spread.
    #[arg(long, value_name = "DIFF", allow_negative_numbers = true)]
    pub detect: Option<f64>,
    /// List the N tasks that changed most against the baseline per run, with their
    /// per-rollout scores (table, markdown and json).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub flips: Option<u32>,
    #[command(flatten)]
    pub output: TableOut,
}

impl Args {
    /// What the report computes beyond the default.
    pub fn options(&self) -> Options {
        Options {
            clustered: self.cluster_key.is_some(),
            by: self.by.is_some(),
            mde: self.mde,
            detect: self.detect,
            flips: self.flips.map(|n| n as usize),
        }
    }

    /// Refuses flag values and combinations that cannot be used, before any reading.
    pub fn validate(&self) -> Result<()> {
        if let Some(d) = self.detect {
            if !(d.is_finite() && d != 0.0) {
                return Err(Error::Usage(format!("--detect {d}: give a non-zero difference in the metric's units")));
            }
        }
        if self.flips.is_some() && matches!(self.output.format, Format::Csv | Format::Parquet) {
            return Err(Error::Usage(
                "--flips lists tasks beside the runs, which one CSV or Parquet table cannot hold; use --format table, markdown or json".into(),
            ));
        }
        if self.by.is_some() && self.by == self.cluster_key {
            return Err(Error::Usage(
                "--by and --cluster-key name the same field; a group would be one cluster".into(),
            ));
        }
        Ok(())
    }

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
    if let Some(by) = &a.by {
        // Numbers in some rollouts and text in others: groups cannot be told apart the
        // way Python would (1 and "1" differ), and the table would keep only the numbers.
        if let Some(c) = t.columns.iter().find(|c| c.source == Source::Top && &c.name == by) {
            if c.has_numbers() && c.has_strings() {
                let first = |want_str: bool| {
                    (0..t.len()).find(|&r| if want_str { c.str_at(r).is_some() } else { c.num(r).is_some() })
                };
                let (n, s) = (first(false).unwrap_or(0), first(true).unwrap_or(0));
                return Err(Error::bad(
                    Location::file(path).key(by),
                    format!(
                        "--by field holds numbers (line {}) and text (line {}); give a field whose values are all numbers or all text",
                        t.line[n], t.line[s]
                    ),
                ));
            }
        }
    }
    let labels = runs(&t, inp.as_ref());
    let df = rollouts_frame(&t, &labels, a.agent.as_deref())?;
    if let Some(r) = df.column("agent")?.str()?.iter().position(|v| v.is_none()) {
        return Err(crate::metrics::aggregate::unnamed(&t, inp.as_ref(), r));
    }
    Ok(Table { df, lines: Some(t.line.clone()) })
}

/// One file's runs (by label, in label order), and whether its `--by` values are text.
type FileRuns = (Vec<(String, RunRollouts)>, Option<bool>);

/// Reads one rollouts file into its runs.
fn read_file(a: &Args, path: &Path, inputs: Option<&Path>) -> Result<FileRuns> {
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
    let groups = match &a.by {
        None => None,
        Some(k) => {
            let Ok(c) = df.column(k) else {
                return Err(Error::bad(Location::file(path).key(k), "no rollout has this field (--by)"));
            };
            let text = c.dtype().is_string() || c.dtype().is_categorical();
            let keys: Vec<Option<String>> = if text {
                c.cast(&DataType::String)?.str()?.iter().map(|v| v.map(str::to_string)).collect()
            } else {
                cluster_keys(c).map_err(|e| {
                    Error::bad(Location::file(path).key(k), format!("cannot break down by this field: {e}"))
                })?
            };
            Some((keys, text))
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
        let measured = !masked.get(r).unwrap_or(false) && values.get(r).is_some_and(|v| !v.is_nan());
        if let (Some((g, _)), true) = (&groups, measured) {
            let key = a.by.as_deref().unwrap_or_default();
            let Some(g) = g[r].as_deref() else {
                return Err(Error::bad(
                    table.at(path, r).key(key),
                    "this measured rollout has no usable value of the --by field (a number, a bool or text); every measured rollout needs one",
                ));
            };
            if let Err(first) = run.set_group(task, g) {
                return Err(Error::bad(
                    table.at(path, r).key(key),
                    format!(
                        "task {task} has rollouts in group {first} and in group {g}; a group must hold whole tasks"
                    ),
                ));
            }
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
    Ok((by.into_iter().collect(), groups.map(|g| g.1)))
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
    let mut kinds: Vec<bool> = Vec::new();
    for (i, path) in a.rollouts.iter().enumerate() {
        let (runs, text) = read_file(a, path, a.inputs.get(i).map(PathBuf::as_path))?;
        if let Some(t) = text {
            if kinds.first().is_some_and(|&k| k != t) {
                let kind = |t: bool| if t { "text" } else { "numbers" };
                return Err(Error::Mismatch(format!(
                    "--by {}: the field holds {} in {} and {} in {}; give a field whose values are all numbers or all text",
                    a.by.as_deref().unwrap_or_default(),
                    kind(kinds[0]),
                    a.rollouts[0].display(),
                    kind(t),
                    path.display()
                )));
            }
            kinds.push(t);
        }
        per_file.push(runs);
    }
    let files = file_names(&a.rollouts);
    let all: Vec<&str> = per_file.iter().flatten().map(|(l, _)| l.as_str()).collect();
    let clash = all.iter().enumerate().any(|(i, l)| all[..i].contains(l));
    if clash {
        // Files that share agent names hold versions of the same agents: each must hold
        // every one of them, or an agent would be compared on one side only.
        for (f, runs) in per_file.iter().enumerate() {
            for other in all.iter() {
                if !runs.iter().any(|(l, _)| l == other) {
                    let holder = per_file.iter().position(|r| r.iter().any(|(l, _)| l == other)).unwrap_or(0);
                    return Err(Error::Mismatch(format!(
                        "agent {other} is in {} but not in {}: files that share agent names must hold the same agents",
                        a.rollouts[holder].display(),
                        a.rollouts[f].display()
                    )));
                }
            }
        }
    }
    let mut names = Vec::new();
    let mut rollouts = Vec::new();
    for (f, runs) in per_file.into_iter().enumerate() {
        for (label, r) in runs {
            names.push(if clash { format!("{}:{label}", files[f]) } else { label });
            rollouts.push(r);
        }
    }
    if let Some(field) = &a.by {
        // A task is in one group in every run, or its groups' comparisons would pair it
        // on one side only.
        let mut seen: BTreeMap<i64, (usize, &str)> = BTreeMap::new();
        for (i, r) in rollouts.iter().enumerate() {
            for (task, g) in r.task_groups() {
                match seen.get(&task) {
                    Some(&(i0, g0)) if g0 != g => {
                        return Err(Error::Mismatch(format!(
                            "--by {field}: task {task} is in group {g0} in {} and in group {g} in {}; a task must be in one group",
                            names[i0], names[i]
                        )))
                    }
                    Some(_) => {}
                    None => {
                        seen.insert(task, (i, g));
                    }
                }
            }
        }
    }
    Ok(Runs { names, rollouts })
}

/// Reads the runs and computes the report.
pub fn execute(a: &Args) -> Result<(Runs, Report)> {
    a.validate()?;
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
    let r = report_with(&runs.names, &runs.rollouts, baseline, a.task_value(), &a.options()).map_err(
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

/// One row of the table: a run of the whole report or of one group's.
struct Row<'r> {
    group: Option<&'r str>,
    rep: &'r Report,
    run: usize,
}

impl<'r> Row<'r> {
    fn summary(&self) -> &'r RunSummary {
        &self.rep.runs[self.run]
    }
    fn cmp(&self) -> Option<&'r Comparison> {
        self.rep.comparisons.iter().find(|c| c.run == self.run)
    }
    fn paired(&self) -> Option<&'r Paired> {
        self.cmp().and_then(|c| c.stats.as_ref())
    }
}

/// The report and its groups, in output order.
fn reports(r: &Report) -> Vec<(Option<&str>, &Report)> {
    let mut v = vec![(None, r)];
    v.extend(r.groups.iter().map(|(g, gr)| (Some(g.as_str()), gr)));
    v
}

/// One row per run (and, with `--by`, one per run and group after them): its summary,
/// and (except for the baseline) its comparison. Columns beyond the default are
/// appended when they apply: `p_value_holm` (two or more comparisons), `exact_test` and
/// `exact_p` (some differences take few values), `ci_method` (some run has 0/1 task
/// scores), `se_method` and `diff_se_method` (clustered), the sizing columns (`--mde`,
/// `--detect`) and `group` (`--by`).
pub fn frame(a: &Args, r: &Report) -> PolarsResult<DataFrame> {
    let statistic = a.statistic();
    let all = reports(r);
    let rows: Vec<Row<'_>> =
        all.iter().flat_map(|&(group, rep)| (0..rep.runs.len()).map(move |run| Row { group, rep, run })).collect();
    let n = rows.len();
    let f = |g: &dyn Fn(&Row<'_>) -> Option<f64>| -> Vec<Option<f64>> { rows.iter().map(g).collect() };
    let i = |g: &dyn Fn(&Row<'_>) -> Option<i64>| -> Vec<Option<i64>> { rows.iter().map(g).collect() };
    let t = |g: &dyn Fn(&Row<'_>) -> Option<String>| -> Vec<Option<String>> { rows.iter().map(g).collect() };
    let mut cols = vec![
        Column::new("run".into(), t(&|x| Some(x.summary().name.clone()))),
        Column::new("statistic".into(), vec![statistic.as_str(); n]),
        Column::new("tasks".into(), rows.iter().map(|x| x.summary().tasks as i64).collect::<Vec<_>>()),
        Column::new("rollouts".into(), rows.iter().map(|x| x.summary().rollouts as i64).collect::<Vec<_>>()),
        Column::new("masked".into(), rows.iter().map(|x| x.summary().masked as i64).collect::<Vec<_>>()),
        Column::new("mean".into(), f(&|x| x.summary().est.map(|e| e.mean))),
        Column::new("se".into(), f(&|x| x.summary().est.and_then(|e| e.se))),
        Column::new("ci_low_95".into(), f(&|x| x.summary().ci.map(|c| c.0))),
        Column::new("ci_high_95".into(), f(&|x| x.summary().ci.map(|c| c.1))),
        Column::new("clusters".into(), i(&|x| x.summary().est.map(|e| e.clusters as i64))),
        Column::new("baseline".into(), t(&|x| x.cmp().map(|_| x.rep.runs[x.rep.baseline].name.clone()))),
        Column::new("paired_tasks".into(), i(&|x| x.cmp().map(|c| c.paired_tasks as i64))),
        Column::new("paired_mean".into(), f(&|x| x.paired().map(|s| s.mean_b))),
        Column::new("paired_baseline_mean".into(), f(&|x| x.paired().map(|s| s.mean_a))),
        Column::new("diff".into(), f(&|x| x.paired().map(|s| s.diff.mean))),
        Column::new("diff_se".into(), f(&|x| x.paired().and_then(|s| s.diff.se))),
        Column::new("diff_ci_low_95".into(), f(&|x| x.cmp().and_then(|c| c.ci).map(|c| c.0))),
        Column::new("diff_ci_high_95".into(), f(&|x| x.cmp().and_then(|c| c.ci).map(|c| c.1))),
        Column::new("t".into(), f(&|x| x.paired().and_then(|s| s.t))),
        Column::new("df".into(), f(&|x| x.paired().and_then(|s| s.diff.se.map(|_| s.diff.df)))),
        Column::new("p_value".into(), f(&|x| x.paired().and_then(|s| s.p))),
        Column::new("wins".into(), i(&|x| x.paired().map(|s| s.wins as i64))),
        Column::new("losses".into(), i(&|x| x.paired().map(|s| s.losses as i64))),
        Column::new("ties".into(), i(&|x| x.paired().map(|s| s.ties as i64))),
        Column::new("correlation".into(), f(&|x| x.paired().and_then(|s| s.correlation))),
        Column::new("diff_se_unpaired".into(), f(&|x| x.paired().and_then(|s| s.se_unpaired))),
    ];
    let comparisons = || all.iter().flat_map(|(_, rep)| rep.comparisons.iter());
    if r.comparisons.len() >= 2 {
        cols.push(Column::new("p_value_holm".into(), f(&|x| x.cmp().and_then(|c| c.p_holm))));
    }
    if comparisons().any(|c| c.exact.is_some()) {
        cols.push(Column::new(
            "exact_test".into(),
            t(&|x| x.cmp().and_then(|c| c.exact).map(|e| exact_name(e).into())),
        ));
        cols.push(Column::new("exact_p".into(), f(&|x| x.cmp().and_then(|c| c.exact).map(|e| e.p))));
    }
    if all.iter().any(|(_, rep)| rep.runs.iter().any(|s| s.wilson)) {
        let method = |x: &Row<'_>| {
            let s = x.summary();
            s.ci.map(|_| if s.wilson { "wilson" } else { "t" }.to_string())
        };
        cols.push(Column::new("ci_method".into(), t(&method)));
    }
    if a.cluster_key.is_some() {
        let m = |cr2: bool| if cr2 { "CR2" } else { "CR1" }.to_string();
        cols.push(Column::new(
            "se_method".into(),
            t(&|x| x.summary().est.and_then(|e| e.se).map(|_| m(x.summary().cr2))),
        ));
        cols.push(Column::new(
            "diff_se_method".into(),
            t(&|x| x.cmp().filter(|c| c.stats.is_some_and(|s| s.diff.se.is_some())).map(|c| m(c.cr2))),
        ));
    }
    if a.mde {
        cols.push(Column::new("mde".into(), f(&|x| x.cmp().and_then(|c| c.mde))));
        cols.push(Column::new("repeat_share".into(), f(&|x| x.summary().repeats.map(|r| r.share))));
        cols.push(Column::new("width_2x_repeats".into(), f(&|x| x.summary().repeats.map(|r| r.width_2x_repeats))));
        cols.push(Column::new("width_2x_tasks".into(), f(&|x| x.summary().repeats.map(|r| r.width_2x_tasks))));
    }
    if let Some(d) = a.detect {
        cols.push(Column::new("detect_diff".into(), f(&|x| x.cmp().map(|_| d))));
        cols.push(Column::new("tasks_needed".into(), i(&|x| x.cmp().and_then(|c| c.tasks_needed).map(|v| v as i64))));
    }
    if a.by.is_some() {
        cols.push(Column::new("group".into(), t(&|x| x.group.map(str::to_string))));
    }
    DataFrame::new(n, cols)
}

/// The flip list as a table: per run compared and task, both values and scores.
pub fn flips_frame(r: &Report) -> PolarsResult<DataFrame> {
    let mut run = Vec::new();
    let mut task = Vec::new();
    let mut base = Vec::new();
    let mut val = Vec::new();
    let mut diff = Vec::new();
    let mut bs = Vec::new();
    let mut rs = Vec::new();
    let list = |v: &[f64]| v.iter().map(|x| score(*x)).collect::<Vec<_>>().join(" ");
    for c in &r.comparisons {
        for fl in &c.flips {
            run.push(r.runs[c.run].name.clone());
            task.push(fl.task);
            base.push(fl.baseline);
            val.push(fl.run);
            diff.push(fl.run - fl.baseline);
            bs.push(list(&fl.baseline_scores));
            rs.push(list(&fl.run_scores));
        }
    }
    let n = run.len();
    let cols = vec![
        Column::new("run".into(), run),
        Column::new("baseline".into(), vec![r.runs[r.baseline].name.clone(); n]),
        Column::new("_ng_task_index".into(), task),
        Column::new("baseline_value".into(), base),
        Column::new("run_value".into(), val),
        Column::new("diff".into(), diff),
        Column::new("baseline_scores".into(), bs),
        Column::new("run_scores".into(), rs),
    ];
    DataFrame::new(n, cols)
}

fn exact_name(e: Exact) -> &'static str {
    if e.mcnemar {
        "mcnemar"
    } else {
        "sign"
    }
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
    o.push_str(&tables(a, r));
    o.push_str(&extras(a, r));
    o.push_str(&groups_text(a, r));
    o.push_str(&flips_text(r));
    o
}

/// With `--by`: one compact table of every group's comparisons (csv/json hold each
/// group's run means and everything else).
fn groups_text(a: &Args, r: &Report) -> String {
    if r.groups.is_empty() {
        return String::new();
    }
    let holm = r.comparisons.len() >= 2;
    let exact = r.groups.iter().any(|(_, g)| g.comparisons.iter().any(|c| c.exact.is_some()));
    let mut o = format!(
        "\nby `{}` (run - baseline on each group's paired tasks{}):\n",
        a.by.as_deref().unwrap_or_default(),
        if holm { "; Holm within groups" } else { "" }
    );
    let mut head: Vec<String> = ["group", "run", "tasks", "diff", "95% interval", "p-value"].map(String::from).to_vec();
    if holm {
        head.push("Holm".into());
    }
    if exact {
        head.push("exact p".into());
    }
    if a.mde {
        head.push("detectable".into());
    }
    let mut rows = vec![head];
    for (g, gr) in &r.groups {
        for c in &gr.comparisons {
            let s = c.stats.as_ref();
            let mut row = vec![
                g.clone(),
                gr.runs[c.run].name.clone(),
                c.paired_tasks.to_string(),
                num(s.map(|s| s.diff.mean), true, false),
                interval(c.ci, true),
                pval(s.and_then(|s| s.p)),
            ];
            if holm {
                row.push(pval(c.p_holm));
            }
            if exact {
                row.push(c.exact.map_or_else(|| "-".into(), |e| format!("{} {}", pval(Some(e.p)), exact_name(e))));
            }
            if a.mde {
                row.push(c.mde.map_or_else(|| "-".into(), |m| format!("±{}", num(Some(m), false, false))));
            }
            rows.push(row);
        }
    }
    o.push_str(&columns(&rows, 2));
    o
}

/// A p-value as the report shows it.
fn pval(p: Option<f64>) -> String {
    match p {
        None => "-".into(),
        Some(0.0) => "0".into(),
        Some(p) if p < 1e-4 => format!("{p:.1e}"),
        Some(p) => format!("{p:.4}"),
    }
}

/// What the report adds to the default tables, each part when it applies: Holm and
/// exact tests, interval methods, sizing.
fn extras(a: &Args, r: &Report) -> String {
    let mut o = String::new();
    let holm = r.comparisons.len() >= 2;
    let exact = r.comparisons.iter().any(|c| c.exact.is_some());
    if holm || exact {
        let mut what = Vec::new();
        if holm {
            what.push(format!("Holm over the {} runs compared", r.comparisons.len()));
        }
        if exact {
            what.push("exact: sign test, McNemar's for 0/1".to_string());
        }
        o.push_str(&format!("\np-values ({}):\n", what.join("; ")));
        let mut head = vec!["run".to_string(), "t test".into()];
        if holm {
            head.push("Holm".into());
        }
        if exact {
            head.extend(["exact test".into(), "exact p".into()]);
        }
        let mut rows = vec![head];
        for c in &r.comparisons {
            let p = c.stats.as_ref().and_then(|s| s.p);
            let mut row = vec![r.runs[c.run].name.clone(), pval(p)];
            if holm {
                row.push(pval(c.p_holm));
            }
            if exact {
                row.push(c.exact.map_or("-", exact_name).into());
                row.push(pval(c.exact.map(|e| e.p)));
            }
            rows.push(row);
        }
        o.push_str(&columns(&rows, 1));
    }
    if r.runs.iter().any(|s| s.wilson) {
        o.push_str("(runs whose task scores are all 0 or 1 get Wilson intervals, inside [0, 1])\n");
    }
    if r.runs.iter().any(|s| s.cr2) || r.comparisons.iter().any(|c| c.cr2) {
        o.push_str(&format!(
            "(fewer than {} clusters: CR2 standard errors, Bell-McCaffrey degrees of freedom)\n",
            crate::metrics::compare::FEW_CLUSTERS
        ));
    }
    if a.mde || a.detect.is_some() {
        o.push_str("\nis the eval big enough? (two-sided paired t test at 5%, 80% power)\n");
        let unit = if a.cluster_key.is_some() { "tasks (in clusters)" } else { "tasks" };
        let mut head = vec!["run".to_string(), "tasks".into(), "diff".into()];
        if a.mde {
            head.push("detectable diff".into());
        }
        if let Some(d) = a.detect {
            head.push(format!("{unit} for {}", num(Some(d), true, false)));
        }
        let mut rows = vec![head];
        for c in &r.comparisons {
            let s = c.stats.as_ref();
            let mut row =
                vec![r.runs[c.run].name.clone(), c.paired_tasks.to_string(), num(s.map(|s| s.diff.mean), true, false)];
            if a.mde {
                row.push(c.mde.map_or_else(|| "-".into(), |m| format!("±{}", num(Some(m), false, false))));
            }
            if a.detect.is_some() {
                row.push(c.tasks_needed.map_or_else(|| "-".into(), |n| n.to_string()));
            }
            rows.push(row);
        }
        o.push_str(&columns(&rows, 1));
    }
    if a.mde && r.runs.iter().any(|s| s.repeats.is_some()) {
        o.push_str("\ntasks or repeats? share of the task means' variance that is repeat noise,\nand the interval's width with twice the repeats or twice the tasks:\n");
        let mut rows = vec![["run", "repeats", "repeat share", "2x repeats", "2x tasks"].map(String::from).to_vec()];
        for s in &r.runs {
            let Some(x) = s.repeats else { continue };
            rows.push(vec![
                s.name.clone(),
                format!("{:.2}", x.repeats),
                format!("{:.0}%", 100.0 * x.share),
                format!("x{:.3}", x.width_2x_repeats),
                format!("x{:.3}", x.width_2x_tasks),
            ]);
        }
        o.push_str(&columns(&rows, 1));
    }
    o
}

/// Shortest round-trip form of a score (`1`, `0.25`).
fn score(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// The flip list: per run compared, the tasks that changed most.
fn flips_text(r: &Report) -> String {
    if r.comparisons.iter().all(|c| c.flips.is_empty()) {
        return String::new();
    }
    let mut o = format!(
        "\ntasks that changed most against {} (per-rollout scores in rollout order):\n",
        r.runs[r.baseline].name
    );
    let mut rows =
        vec![["run", "task", "baseline", "run", "diff", "baseline scores", "run scores"].map(String::from).to_vec()];
    for c in &r.comparisons {
        for f in &c.flips {
            let join = |v: &[f64]| v.iter().map(|x| score(*x)).collect::<Vec<_>>().join(" ");
            rows.push(vec![
                r.runs[c.run].name.clone(),
                f.task.to_string(),
                num(Some(f.baseline), false, false),
                num(Some(f.run), false, false),
                num(Some(f.run - f.baseline), true, false),
                join(&f.baseline_scores),
                join(&f.run_scores),
            ]);
        }
    }
    o.push_str(&columns(&rows, 1));
    o
}

/// The runs table and the comparison table.
fn tables(a: &Args, r: &Report) -> String {
    let mut o = String::new();
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
        let p = pval(s.and_then(|s| s.p));
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
    let df = frame(&a, &r)?;
    let bytes = match a.output.format {
        Format::Json if a.flips.is_some() => Some(json_with_flips(&df, &r)),
        Format::Markdown => Some(markdown(&a, &r, &df)?),
        _ => None,
    };
    match bytes {
        // Written as the readable form is: the rows count stays the runs'.
        Some(b) => TableOut { format: Format::Table, out: a.output.out.clone() }.write(out, df, |_| b, "runs"),
        None => a.output.write(out, df, |_| text(&a, &r).into_bytes(), "runs"),
    }
}

/// `{"runs": [rows], "flips": [...]}`: the rows as without `--flips`, and per task that
/// changed most its run, task index, values and per-rollout score arrays.
fn json_with_flips(df: &DataFrame, r: &Report) -> Vec<u8> {
    use crate::json::Json;
    use std::sync::Arc;
    let rows = crate::json::parse(&super::query::to_json(df)).expect("rows render as JSON");
    let mut flips = Vec::new();
    for c in &r.comparisons {
        for f in &c.flips {
            let arr = |v: &[f64]| Json::Arr(v.iter().map(|x| Json::Float(*x)).collect());
            flips.push(Json::Obj(vec![
                (Arc::from("run"), Json::Str(r.runs[c.run].name.clone())),
                (Arc::from("baseline"), Json::Str(r.runs[r.baseline].name.clone())),
                (Arc::from("_ng_task_index"), Json::Int(f.task)),
                (Arc::from("baseline_value"), Json::Float(f.baseline)),
                (Arc::from("run_value"), Json::Float(f.run)),
                (Arc::from("diff"), Json::Float(f.run - f.baseline)),
                (Arc::from("baseline_scores"), arr(&f.baseline_scores)),
                (Arc::from("run_scores"), arr(&f.run_scores)),
            ]));
        }
    }
    let doc = Json::Obj(vec![(Arc::from("runs"), rows), (Arc::from("flips"), Json::Arr(flips))]);
    let mut out = Vec::new();
    crate::json::write_compact(&mut out, &doc);
    out.push(b'\n');
    out
}

/// The table as Markdown, then what the columns alone do not say (Holm's family, the
/// interval methods), then the flip list as a second table.
fn markdown(a: &Args, r: &Report, df: &DataFrame) -> Result<Vec<u8>> {
    let mut o = super::query::to_markdown(df);
    let mut notes = Vec::new();
    if r.comparisons.len() >= 2 {
        notes.push(format!(
            "p_value_holm: Holm-adjusted over the {} runs compared with {}{}.",
            r.comparisons.len(),
            r.runs[r.baseline].name,
            if r.groups.is_empty() { "" } else { " (within each group)" }
        ));
    }
    let all = reports(r);
    if all.iter().any(|(_, x)| x.comparisons.iter().any(|c| c.exact.is_some())) {
        notes.push(format!(
            "exact_p: exact sign test (McNemar's for 0/1 scores) where the differences take at most {FEW_VALUES} values."
        ));
    }
    if all.iter().any(|(_, x)| x.runs.iter().any(|s| s.wilson)) {
        notes.push("ci_method wilson: Wilson interval for runs whose task scores are all 0 or 1.".into());
    }
    if all.iter().any(|(_, x)| x.runs.iter().any(|s| s.cr2) || x.comparisons.iter().any(|c| c.cr2)) {
        notes.push("CR2: fewer than 20 clusters, so CR2 errors with Bell-McCaffrey degrees of freedom (df).".into());
    }
    if a.mde || a.detect.is_some() {
        notes
            .push("mde, tasks_needed: two-sided paired t test at 5% with 80% power, given the observed spread.".into());
    }
    if let Some(b) = &a.by {
        notes.push(format!("group: the value of `{b}`; rows without one are over all tasks."));
    }
    if !notes.is_empty() {
        o.extend_from_slice(b"\n");
        for n in notes {
            o.extend_from_slice(format!("{n}<br>\n").as_bytes());
        }
    }
    if a.flips.is_some() {
        let f = flips_frame(r)?;
        o.extend_from_slice(b"\n");
        o.extend_from_slice(&super::query::to_markdown(&f));
    }
    Ok(o)
}
