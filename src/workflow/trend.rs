//! The trend workflow (`report --lake`): each run's metric across the sweeps of a lake,
//! and the paired difference between consecutive sweeps on the tasks both measured,
//! paired by fingerprint, with Holm's correction over every pair shown. It reads only the
//! `tasks` table's run, task, fingerprint and metric columns.

use std::collections::BTreeMap;
use std::path::PathBuf;

use polars::prelude::*;

use crate::error::{Error, Result};
use crate::export::atomic::OutputSet;
use crate::export::report::trend::{render, TrendPage, TrendPoint, TrendRun, TrendStep, TrendSweep};
use crate::metrics::compare::{interval, run_interval};
use crate::metrics::warnings::Warnings;
use crate::query::lake::Lake;
use crate::stats::holm::holm;
use crate::stats::paired::{mean_se, paired};

/// What the trend page is about and where it goes.
#[derive(Debug, Clone)]
pub struct TrendConfig {
    pub lake: PathBuf,
    /// The label that orders the sweeps (and places them, when every value is a number);
    /// default: the order they were added in.
    pub by: Option<String>,
    /// The tasks table's column (`mean/reward`; a bare field name means its mean).
    pub metric: String,
    /// Output file; `None`: `<lake>_trend.html` beside the lake's folder.
    pub out: Option<PathBuf>,
    /// When the page says it was made, in seconds since 1970-01-01 UTC.
    pub made_at: u64,
}

/// What a trend run wrote.
pub struct TrendReport {
    pub file: PathBuf,
    pub bytes: usize,
    pub warnings: Warnings,
}

/// The metric's column in the tasks table.
fn column_of(metric: &str) -> String {
    if metric.contains('/') {
        metric.to_string()
    } else {
        format!("mean/{metric}")
    }
}

/// The sweeps to show, in order, with their x positions; whether x is positional.
fn ordered(lake: &Lake, by: Option<&str>, w: &mut Warnings) -> Result<(Vec<TrendSweep>, bool)> {
    let mut rows: Vec<(Option<String>, TrendSweep)> = lake
        .sweeps
        .iter()
        .map(|s| {
            let v = by.and_then(|b| s.labels.iter().find(|(k, _)| k == b).map(|(_, v)| v.clone()));
            (v, TrendSweep { id: s.id.clone(), created_at: s.created_at.clone(), labels: s.labels.clone(), x: 0.0 })
        })
        .collect();
    let Some(by) = by else {
        let sweeps: Vec<TrendSweep> =
            rows.into_iter().enumerate().map(|(i, (_, s))| TrendSweep { x: (i + 1) as f64, ..s }).collect();
        return Ok((sweeps, true));
    };
    let without = rows.iter().filter(|r| r.0.is_none()).count();
    if without > 0 {
        w.add(format!("{without} sweep(s) without a `{by}` label are left out"));
    }
    rows.retain(|r| r.0.is_some());
    if rows.is_empty() {
        return Err(Error::Usage(format!("--by {by}: no sweep in the lake has that label")));
    }
    let numbers: Option<Vec<f64>> = rows.iter().map(|r| r.0.as_deref().and_then(|v| v.parse::<f64>().ok())).collect();
    let numeric = numbers.as_ref().is_some_and(|n| n.iter().all(|x| x.is_finite()));
    // A stable sort: sweeps with one label value keep the order they were added in.
    if numeric {
        rows.sort_by(|a, b| {
            let x = |r: &(Option<String>, TrendSweep)| r.0.as_deref().and_then(|v| v.parse::<f64>().ok()).unwrap();
            x(a).total_cmp(&x(b))
        });
    } else {
        rows.sort_by(|a, b| a.0.cmp(&b.0));
    }
    let sweeps = rows
        .into_iter()
        .enumerate()
        .map(|(i, (v, s))| {
            let x = if numeric { v.and_then(|v| v.parse().ok()).unwrap_or(0.0) } else { (i + 1) as f64 };
            TrendSweep { x, ..s }
        })
        .collect();
    Ok((sweeps, !numeric))
}

/// Per run, per sweep (index into `sweeps`): each task's value by its pairing key (the
/// fingerprint, or the task index where a task has none; a key met twice in one sweep
/// gets its occurrence number).
type Values = BTreeMap<String, BTreeMap<usize, BTreeMap<String, f64>>>;

fn task_values(lake: &Lake, sweeps: &[TrendSweep], column: &str) -> Result<Values> {
    let Some(tasks) = lake.table("tasks")? else {
        return Err(Error::Usage(format!("--lake {}: no tasks table", lake.dir.display())));
    };
    let mut tasks = tasks;
    let schema = tasks.collect_schema()?;
    if schema.get(column).is_none() {
        let mut have: Vec<&str> = schema.iter_names().map(|n| n.as_str()).filter(|n| n.starts_with("mean/")).collect();
        have.sort_unstable();
        return Err(Error::Usage(format!(
            "--metric {column}: the lake's tasks table has no such column (it has {})",
            have.join(", ")
        )));
    }
    let df = tasks
        .select([
            col("sweep"),
            col("agent"),
            col("_ng_task_index"),
            col("task_fingerprint"),
            col(column).cast(DataType::Float64).alias("value"),
        ])
        .collect()?;
    let at: BTreeMap<&str, usize> = sweeps.iter().enumerate().map(|(i, s)| (s.id.as_str(), i)).collect();
    let (sweep, agent) = (df.column("sweep")?.str()?, df.column("agent")?.str()?);
    let task = df.column("_ng_task_index")?.cast(&DataType::Int64)?;
    let task = task.i64()?;
    let print = df.column("task_fingerprint")?.cast(&DataType::String)?;
    let print = print.str()?;
    let value = df.column("value")?.f64()?;
    let mut out: Values = BTreeMap::new();
    for i in 0..df.height() {
        let (Some(s), Some(a), Some(v)) = (sweep.get(i), agent.get(i), value.get(i)) else { continue };
        let Some(&si) = at.get(s) else { continue };
        if v.is_nan() {
            continue;
        }
        let base = match print.get(i).filter(|p| !p.is_empty()) {
            Some(p) => p.to_string(),
            None => format!("task {}", task.get(i).unwrap_or(-1)),
        };
        let m = out.entry(a.to_string()).or_default().entry(si).or_default();
        let mut key = base.clone();
        let mut n = 1;
        while m.contains_key(&key) {
            n += 1;
            key = format!("{base} #{n}");
        }
        m.insert(key, v);
    }
    Ok(out)
}

/// One run's points and steps (before Holm's correction).
fn run_trend(
    name: &str,
    by_sweep: &BTreeMap<usize, BTreeMap<String, f64>>,
    sweeps: &[TrendSweep],
    w: &mut Warnings,
) -> TrendRun {
    let mut points = Vec::new();
    for (&s, m) in by_sweep {
        let x: Vec<f64> = m.values().copied().collect();
        let Some(est) = mean_se(&x, None) else { continue };
        let (ci, _) = run_interval(Some(&est), &x, false, &format!("{name} in {}", sweeps[s].id), w);
        points.push(TrendPoint { sweep: s, tasks: x.len(), mean: est.mean, ci });
    }
    let mut steps = Vec::new();
    for pair in points.windows(2) {
        let (from, to) = (pair[0].sweep, pair[1].sweep);
        let (a_map, b_map) = (&by_sweep[&from], &by_sweep[&to]);
        let shared: Vec<&String> = a_map.keys().filter(|k| b_map.contains_key(*k)).collect();
        let a: Vec<f64> = shared.iter().map(|k| a_map[*k]).collect();
        let b: Vec<f64> = shared.iter().map(|k| b_map[*k]).collect();
        let what = format!("{name}: {} vs {}", sweeps[to].id, sweeps[from].id);
        let d = paired(&a, &b, None);
        let ci = d.as_ref().and_then(|p| interval(&p.diff, &what, w));
        if d.is_none() {
            w.add(format!("{what}: no task measured in both, so nothing to pair"));
        }
        steps.push(TrendStep {
            from,
            to,
            only_from: a_map.len() - shared.len(),
            only_to: b_map.len() - shared.len(),
            paired: d,
            ci,
            p_holm: None,
        });
    }
    TrendRun { name: name.to_string(), points, steps }
}

/// Draws the trend page of the lake.
pub fn trend(c: &TrendConfig) -> Result<TrendReport> {
    let lake = Lake::open(&c.lake)?;
    let out_path = c.out.clone().unwrap_or_else(|| {
        let name = c.lake.file_name().map_or("lake".into(), |n| n.to_string_lossy().into_owned());
        c.lake.with_file_name(format!("{name}_trend.html"))
    });
    let mut out = OutputSet::new(&[]);
    out.check(&out_path)?;
    let mut warnings = Warnings::default();
    let (sweeps, positional) = ordered(&lake, c.by.as_deref(), &mut warnings)?;
    let column = column_of(&c.metric);
    let values = task_values(&lake, &sweeps, &column)?;
    let mut runs: Vec<TrendRun> =
        values.iter().map(|(name, by_sweep)| run_trend(name, by_sweep, &sweeps, &mut warnings)).collect();
    let p: Vec<Option<f64>> = runs.iter().flat_map(|r| r.steps.iter().map(|s| s.paired.and_then(|d| d.p))).collect();
    let mut adjusted = holm(&p).into_iter();
    for s in runs.iter_mut().flat_map(|r| r.steps.iter_mut()) {
        s.p_holm = adjusted.next().flatten();
    }
    let page = TrendPage {
        metric: column,
        generated: super::report::utc(c.made_at),
        version: env!("CARGO_PKG_VERSION").to_string(),
        lake: c.lake.display().to_string(),
        by: c.by.clone(),
        positional,
        sweeps,
        runs,
        warnings: warnings.items().to_vec(),
    };
    let html = render(&page);
    out.add(&out_path, html.as_bytes())?;
    out.commit()?;
    Ok(TrendReport { file: out_path, bytes: html.len(), warnings })
}
