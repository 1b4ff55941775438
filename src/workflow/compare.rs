//! The compare workflow: read each rollouts file (JSONL or a rollouts table), name its
//! runs, and compute the paired, task-level report against a baseline.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::error::{Error, Location, Msg, Opt, Result};
use crate::export::compare::CompareView;
use crate::ingest::frame::rollouts_frame;
use crate::ingest::labels::runs;
use crate::ingest::table::Source;
use crate::ingest::{InputTable, RolloutTable};
use crate::metrics::compare::{report_with, ClusterProblem, Options, Report, RunRollouts, TaskValue};
use crate::metrics::profile::duplicate_key;
use crate::metrics::task_identity::{self, FileTasks};

/// What to compare: the runs' files and the statistic, and what the report adds.
#[derive(Debug, Clone, Default)]
pub struct CompareConfig {
    /// Rollouts JSONL files or rollouts tables (.parquet); each file's run labels are runs.
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL: none, or one per rollouts file, in order.
    pub inputs: Vec<PathBuf>,
    /// Label for rollouts that name no agent.
    pub agent: Option<String>,
    /// Numeric field to compare.
    pub metric: String,
    /// Compare each task's pass@K instead of its mean.
    pub pass_at: Option<u32>,
    /// The run the others are compared against (default: the first run).
    pub baseline: Option<String>,
    /// Field that groups tasks into clusters for the standard errors.
    pub cluster_key: Option<String>,
    /// Field whose groups each get their own comparison.
    pub by: Option<String>,
    /// Add the detectable difference and the repeat-noise share.
    pub mde: bool,
    /// Add the tasks needed to detect this difference.
    pub detect: Option<f64>,
    /// List the N tasks that changed most per run.
    pub flips: Option<u32>,
    /// How the runs' tasks are paired (by index, checked, by default).
    pub pairing: task_identity::Pairing,
}

impl CompareConfig {
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
                let msg = Msg::default().opt(Opt::number("detect", d));
                return Err(Error::refused(None, msg.text(": give a non-zero difference in the metric's units")));
            }
        }
        self.pairing.validate()?;
        if self.by.is_some() && self.by == self.cluster_key {
            let msg = Msg::default().opt(Opt::named("by")).text(" and ").opt(Opt::named("cluster_key"));
            return Err(Error::refused(None, msg.text(" name the same field; a group would be one cluster")));
        }
        Ok(())
    }

    /// Refuses inputs files that do not go one per rollouts file.
    pub fn check_inputs(&self) -> Result<()> {
        inputs_per_rollouts(&self.rollouts, &self.inputs)
    }

    /// What a run's value for one task is.
    pub fn task_value(&self) -> TaskValue {
        self.pass_at.map_or(TaskValue::Mean, |k| TaskValue::PassAt(k as usize))
    }

    /// What the renderers need to know of the configuration, with the significant digits
    /// of the readable forms.
    pub fn view(&self, digits: usize) -> CompareView {
        CompareView {
            metric: self.metric.clone(),
            pass_at: self.pass_at,
            cluster_key: self.cluster_key.clone(),
            by: self.by.clone(),
            mde: self.mde,
            detect: self.detect,
            digits,
        }
    }
}

/// The runs read from the files, and their names.
pub struct Runs {
    pub names: Vec<String>,
    pub rollouts: Vec<RunRollouts>,
    /// Per run: the index of its file and its label there.
    pub origin: Vec<(usize, String)>,
    /// What the task check found and let through (printed with the report's warnings).
    pub notes: Vec<String>,
    /// Each task's fingerprint, by the task number the runs are paired on.
    pub fingerprints: BTreeMap<i64, u64>,
    /// Per run: the tasks (by the number they are paired on) with a failed attempt that
    /// no result replaced, and how many such attempts each has.
    pub failed: Vec<BTreeMap<i64, usize>>,
}

/// The numeric columns of a rollouts frame (what `--field` may name).
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
    /// Per row: the task fingerprint (JSONL only; 0 where the row has none).
    fingerprints: Option<Vec<u64>>,
    /// Per run label: the tasks with a failed attempt no result replaced (from the
    /// failures sidecar beside a JSONL file).
    failed: BTreeMap<String, BTreeMap<i64, usize>>,
}

impl Table {
    fn at(&self, path: &Path, r: usize) -> Location {
        match &self.lines {
            Some(l) => Location::line(path, l[r]),
            None => Location::file(path).row(r as u64 + 1),
        }
    }
}

/// A JSONL rollouts file read already, with its inputs.
pub type ReadFile<'a> = (&'a RolloutTable, Option<&'a InputTable>);

fn read_table(a: &CompareConfig, path: &Path, inputs: Option<&Path>, read: Option<ReadFile<'_>>) -> Result<Table> {
    if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("parquet")) {
        if inputs.is_some() {
            let msg = Msg::default()
                .text(format!("{}: a Parquet table already carries its run labels; ", path.display()))
                .opt(Opt::named("inputs"))
                .text(" goes with JSONL rollouts");
            return Err(Error::refused(None, msg));
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
        // A lake's rollouts partition: its tasks' fingerprints from the sweep's tasks table.
        let fingerprints = crate::query::lake::partition_fingerprints(path)?.map(|of_task| {
            let task = df.column("_ng_task_index").and_then(|c| c.cast(&DataType::Int64));
            let task = task.as_ref().ok().and_then(|c| c.i64().ok());
            (0..df.height())
                .map(|r| task.and_then(|t| t.get(r)).and_then(|t| of_task.get(&t)).copied().unwrap_or(0))
                .collect()
        });
        return Ok(Table { df, lines: None, fingerprints, failed: BTreeMap::new() });
    }
    let owned;
    let (t, inp) = match read {
        Some(r) => r,
        None => {
            let opts = crate::ingest::ReadOptions::FINGERPRINTS;
            owned = crate::workflow::read_both(std::slice::from_ref(&path.to_path_buf()), inputs, opts)?;
            (&owned.0, owned.1.as_ref())
        }
    };
    if let Some(by) = &a.by {
        // Numbers in some rollouts and text in others: groups cannot be told apart the
        // way Python would (1 and "1" differ), and the table would keep only the numbers.
        if let Some(c) = t.columns.iter().find(|c| c.source == Source::Top && &c.name == by) {
            if c.has_numbers() && c.has_strings() {
                let first = |want_str: bool| {
                    (0..t.len()).find(|&r| if want_str { c.str_at(r).is_some() } else { c.num(r).is_some() })
                };
                let (n, s) = (first(false).unwrap_or(0), first(true).unwrap_or(0));
                let msg = Msg::default().opt(Opt::named("by")).text(format!(
                    " field holds numbers (line {}) and text (line {}); give a field whose values are all numbers or all text",
                    t.line[n], t.line[s]
                ));
                return Err(Error::refused(Some(Location::file(path).key(by)), msg));
            }
        }
    }
    let labels = runs(t, inp);
    let df = rollouts_frame(t, &labels, a.agent.as_deref())?;
    if let Some(r) = df.column("agent")?.str()?.iter().position(|v| v.is_none()) {
        return Err(crate::metrics::aggregate::unnamed(t, inp, r));
    }
    let mut failed: BTreeMap<String, BTreeMap<i64, usize>> = BTreeMap::new();
    if let Some(cov) = super::aggregate::failures_beside(std::slice::from_ref(&path.to_path_buf()), t)? {
        for (label, (_, task, _)) in crate::metrics::failures::labelled(&cov.failures, &labels) {
            if let crate::metrics::failures::Idx::Int(task) = task {
                *failed.entry(label.to_string()).or_default().entry(*task).or_default() += 1;
            }
        }
    }
    Ok(Table { df, lines: Some(t.line.clone()), fingerprints: Some(t.fingerprints().to_vec()), failed })
}

/// One file's runs (by label, in label order), whether its `--by` values are text, its
/// tasks' fingerprints, and per label the tasks with a standing failure (how many each).
type FileRuns = (Vec<(String, RunRollouts)>, Option<bool>, FileTasks, BTreeMap<String, BTreeMap<i64, usize>>);

/// Reads one rollouts file into its runs.
fn read_file(a: &CompareConfig, path: &Path, inputs: Option<&Path>, read: Option<ReadFile<'_>>) -> Result<FileRuns> {
    let table = read_table(a, path, inputs, read)?;
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
                let msg = Msg::default().text("no rollout has this field (").opt(Opt::named("cluster_key")).text(")");
                return Err(Error::refused(Some(Location::file(path).key(k)), msg));
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
                let msg = Msg::default().text("no rollout has this field (").opt(Opt::named("by")).text(")");
                return Err(Error::refused(Some(Location::file(path).key(k)), msg));
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
            if agent.get(r).is_none() {
                let msg = Msg::default().text("this rollout names no agent (give ").opt(Opt::value("agent", "NAME"));
                return Err(Error::refused(Some(table.at(path, r)), msg.text(")")));
            }
            return Err(Error::bad(
                table.at(path, r),
                "this rollout has no usable rollout key (`_ng_task_index` and `_ng_rollout_index`, integers)",
            ));
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
                ClusterProblem::Missing => Msg::default()
                    .text("this measured rollout has no usable value of the ")
                    .opt(Opt::named("cluster_key"))
                    .text(" field (a number, a bool or text of up to 512 bytes); every measured rollout needs one"),
                ClusterProblem::Differs { first, then } => Msg::default().text(format!(
                    "task {task} has rollouts in cluster {first} and in cluster {then}; a cluster must hold whole tasks"
                )),
            };
            return Err(Error::refused(Some(table.at(path, r).key(key)), msg));
        }
        let measured = !masked.get(r).unwrap_or(false) && values.get(r).is_some_and(|v| !v.is_nan());
        if let (Some((g, _)), true) = (&groups, measured) {
            let key = a.by.as_deref().unwrap_or_default();
            let Some(g) = g[r].as_deref() else {
                let msg = Msg::default()
                    .text("this measured rollout has no usable value of the ")
                    .opt(Opt::named("by"))
                    .text(" field (a number, a bool or text); every measured rollout needs one");
                return Err(Error::refused(Some(table.at(path, r).key(key)), msg));
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
    let tasks = file_tasks(a, path, &table, task)?;
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| (w[0].0, w[0].1, w[0].2) == (w[1].0, w[1].1, w[1].2)) {
        let (a, b) = (w[0].3, w[1].3);
        return Err(match &table.lines {
            Some(l) => duplicate_key(
                "result",
                (w[0].1, w[0].2),
                l[a].min(l[b]),
                l[a].max(l[b]),
                &crate::ingest::LineMap::single(path),
            ),
            None => Error::bad(
                Location::file(path),
                format!("rows {} and {} have the same rollout key ({}, {}) and run", a + 1, b + 1, w[0].1, w[0].2),
            ),
        });
    }
    Ok((by.into_iter().collect(), groups.map(|g| g.1), tasks, table.failed))
}

/// Each task's fingerprint in one file (see [`task_identity::tasks`]); with
/// `--task-key`, each task's value of that field instead (as `--cluster-key` compares
/// values: `1`, `1.0` and `true` are one, the text `"1"` another).
fn file_tasks(a: &CompareConfig, path: &Path, table: &Table, task: &Int64Chunked) -> Result<FileTasks> {
    if let Some(field) = &a.pairing.task_key {
        let Ok(c) = table.df.column(field) else {
            return Err(task_identity::no_key_field(path, field));
        };
        let keys = cluster_keys(c).map_err(|e| {
            Error::bad(Location::file(path).key(field), format!("cannot pair tasks by this field: {e}"))
        })?;
        if let Some(r) = keys.iter().position(Option::is_none) {
            return Err(task_identity::no_key_value(table.at(path, r), field));
        }
        let rows = keys
            .iter()
            .enumerate()
            .filter_map(|(r, k)| Some((task.get(r)?, task_identity::key_hash(k.as_deref()?), r)));
        return task_identity::tasks(rows, |r| table.at(path, r), false, Some(field));
    }
    let Some(fps) = &table.fingerprints else { return Ok(None) };
    let rows = fps.iter().enumerate().filter_map(|(r, &fp)| Some((task.get(r)?, fp, r)));
    task_identity::tasks(rows, |r| table.at(path, r), a.pairing.allow_mismatch, None)
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
        return Ok(c.cast(&DataType::Float64)?.f64()?.iter().map(|v| v.map(task_identity::number_key)).collect());
    }
    if !(dt.is_string() || dt.is_categorical()) {
        polars_bail!(InvalidOperation: "it holds {dt}, not numbers or text");
    }
    Ok(c.cast(&DataType::String)?.str()?.iter().map(|v| v.map(task_identity::text_key)).collect())
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
/// Refuses inputs files that do not go one per rollouts file, in order (none at all
/// is fine): said before any reading by every workflow that reads runs.
pub fn inputs_per_rollouts(rollouts: &[PathBuf], inputs: &[PathBuf]) -> Result<()> {
    if inputs.is_empty() || inputs.len() == rollouts.len() {
        return Ok(());
    }
    let msg = Msg::default()
        .text("give ")
        .opt(Opt::named("inputs"))
        .text(" once per ")
        .opt(Opt::named("rollouts"))
        .text(" file, in the same order, or not at all (")
        .text(format!("{} rollouts files, {} inputs files)", rollouts.len(), inputs.len()));
    Err(Error::refused(None, msg))
}

pub fn read_runs(a: &CompareConfig) -> Result<Runs> {
    read_runs_with(a, &[])
}

/// [`read_runs`], taking file `i` from `read[i]` where that is given (a JSONL file the
/// caller read already) instead of reading it again.
pub fn read_runs_with(a: &CompareConfig, read: &[Option<ReadFile<'_>>]) -> Result<Runs> {
    a.check_inputs()?;
    for (i, path) in a.rollouts.iter().enumerate() {
        if a.rollouts[..i].iter().any(|q| q == path || crate::export::atomic::same_file(q, path)) {
            let msg = Msg::default().text(format!("{} is given twice as ", path.display())).opt(Opt::named("rollouts"));
            return Err(Error::refused(None, msg));
        }
    }
    let mut per_file = Vec::new();
    let mut file_tasks_all: Vec<FileTasks> = Vec::new();
    let mut kinds: Vec<bool> = Vec::new();
    let mut failed_all: Vec<BTreeMap<String, BTreeMap<i64, usize>>> = Vec::new();
    for (i, path) in a.rollouts.iter().enumerate() {
        let (runs, text, tasks, failed) =
            read_file(a, path, a.inputs.get(i).map(PathBuf::as_path), read.get(i).copied().flatten())?;
        file_tasks_all.push(tasks);
        failed_all.push(failed);
        if let Some(t) = text {
            if kinds.first().is_some_and(|&k| k != t) {
                let kind = |t: bool| if t { "text" } else { "numbers" };
                let msg = Msg::default().opt(Opt::text("by", a.by.clone().unwrap_or_default())).text(format!(
                    ": the field holds {} in {} and {} in {}; give a field whose values are all numbers or all text",
                    kind(kinds[0]),
                    a.rollouts[0].display(),
                    kind(t),
                    path.display()
                ));
                return Err(Error::refused(None, msg));
            }
            kinds.push(t);
        }
        per_file.push(runs);
    }
    let mut notes = Vec::new();
    let renumber = task_identity::check(&a.rollouts, &file_tasks_all, &a.pairing, &mut notes)?;
    let mut fingerprints = BTreeMap::new();
    for (f, tasks) in file_tasks_all.iter().enumerate() {
        for (t, (fp, _)) in tasks.iter().flatten() {
            let id = renumber.as_ref().map_or(Some(*t), |maps| maps[f].get(t).copied());
            if let (Some(id), None) = (id, a.pairing.task_key.as_ref()) {
                fingerprints.entry(id).or_insert(*fp);
            }
        }
    }
    if let Some(maps) = &renumber {
        for (runs, map) in per_file.iter_mut().zip(maps) {
            for (_, r) in runs.iter_mut() {
                *r = r.renumbered(map);
            }
        }
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
    let mut origin = Vec::new();
    let mut failed = Vec::new();
    for (f, runs) in per_file.into_iter().enumerate() {
        for (label, r) in runs {
            names.push(if clash { format!("{}:{label}", files[f]) } else { label.clone() });
            rollouts.push(r);
            let tasks = failed_all[f].remove(&label).unwrap_or_default();
            failed.push(match &renumber {
                Some(maps) => tasks.iter().filter_map(|(t, n)| Some((*maps[f].get(t)?, *n))).collect(),
                None => tasks,
            });
            origin.push((f, label));
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
                        let msg = Msg::default().opt(Opt::text("by", field.to_string())).text(format!(
                            ": task {task} is in group {g0} in {} and in group {g} in {}; a task must be in one group",
                            names[i0], names[i]
                        ));
                        return Err(Error::refused(None, msg));
                    }
                    Some(_) => {}
                    None => {
                        seen.insert(task, (i, g));
                    }
                }
            }
        }
    }
    Ok(Runs { names, rollouts, origin, notes, fingerprints, failed })
}

/// Reads the runs and computes the report.
pub fn compare(a: &CompareConfig) -> Result<(Runs, Report)> {
    a.validate()?;
    let runs = read_runs(a)?;
    if runs.names.len() < 2 {
        let files: Vec<String> = a.rollouts.iter().map(|p| p.display().to_string()).collect();
        let found = match runs.names.first() {
            Some(name) => format!("one run ({name})"),
            None => "no rollouts".to_string(),
        };
        let msg = Msg::default()
            .text(format!(
                "compare needs two runs; {} hold{} {found}: give another ",
                files.join(", "),
                if files.len() == 1 { "s" } else { "" }
            ))
            .opt(Opt::named("rollouts"))
            .text(" file, or a file with several agents");
        return Err(Error::refused(None, msg));
    }
    let r = compare_runs(a, &runs)?;
    Ok((runs, r))
}

/// The report over runs read already (by [`read_runs`]): every run against the baseline
/// (one run alone gets its summary and no comparison).
pub fn compare_runs(a: &CompareConfig, runs: &Runs) -> Result<Report> {
    let baseline = match &a.baseline {
        None => 0,
        Some(b) => runs.names.iter().position(|n| n == b).ok_or_else(|| {
            let msg = Msg::default().opt(Opt::quoted("baseline", b.clone()));
            Error::refused(None, msg.text(format!(" is not a run here; runs: {}", runs.names.join(", "))))
        })?,
    };
    if let Some(k) = a.pass_at {
        let most = runs.rollouts.iter().map(RunRollouts::most_per_task).max().unwrap_or(0);
        if most < k as usize {
            let msg = Msg::default().opt(Opt::number("pass_at", k));
            let msg = msg.text(format!(": no task of any run has {k} measured rollouts (at most {most})"));
            return Err(Error::refused(None, msg));
        }
    }
    let mut report = report_with(&runs.names, &runs.rollouts, baseline, a.task_value(), &a.options()).map_err(
        |(task, r0, c0, r1, c1)| {
            let msg = Msg::default().opt(Opt::text("cluster_key", a.cluster_key.clone().unwrap_or_default()));
            Error::refused(
                None,
                msg.text(format!(
                    ": task {task} is in cluster {c0} in {} and in cluster {c1} in {}; a task must be in one cluster",
                    runs.names[r0], runs.names[r1]
                )),
            )
        },
    )?;
    for n in &runs.notes {
        report.warnings.add(n.clone());
    }
    name_flips(&mut report, &runs.fingerprints);
    count_failed_unpaired(&mut report, runs);
    Ok(report)
}

/// Per comparison, the tasks left unpaired because the side without them has a failed
/// attempt there (a rollout that failed rather than a task never asked), with a warning.
fn count_failed_unpaired(report: &mut Report, runs: &Runs) {
    let base = report.baseline;
    let tasks = |r: usize| -> BTreeSet<i64> { runs.rollouts[r].task_ids().collect() };
    let on_base = tasks(base);
    for c in &mut report.comparisons {
        let on_run = tasks(c.run);
        let lost_by_run = on_base.difference(&on_run).filter(|t| runs.failed[c.run].contains_key(t)).count();
        let lost_by_base = on_run.difference(&on_base).filter(|t| runs.failed[base].contains_key(t)).count();
        c.unpaired_failed = lost_by_run + lost_by_base;
        if c.unpaired_failed > 0 {
            report.warnings.add(format!(
                "{} vs {}: {} unpaired task(s) have no result because a rollout failed ({lost_by_run} in {}, \
                 {lost_by_base} in {}; see the _failures.jsonl sidecars)",
                runs.names[c.run], runs.names[base], c.unpaired_failed, runs.names[c.run], runs.names[base]
            ));
        }
    }
}

/// Gives each listed flip its task's fingerprint, in the report and its groups.
fn name_flips(r: &mut Report, fingerprints: &BTreeMap<i64, u64>) {
    for c in &mut r.comparisons {
        for f in &mut c.flips {
            f.fingerprint = fingerprints.get(&f.task).copied();
        }
    }
    for (_, g) in &mut r.groups {
        name_flips(g, fingerprints);
    }
}
