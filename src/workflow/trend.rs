//! The trend workflow (`report --lake`): each run's metric across the sweeps of a lake,
//! and the paired difference between consecutive sweeps on the tasks both measured,
//! paired by fingerprint, with Holm's correction over every pair shown. It reads only
//! the columns it needs: the field, run, task, rollout and mask of the `rollouts` table
//! and the fingerprints of the `tasks` table, of the sweeps it shows.

use std::collections::BTreeMap;
use std::path::PathBuf;

use polars::prelude::*;

use crate::error::{Error, Msg, Opt, Result};
use crate::export::atomic::OutputSet;
use crate::export::report::trend::{render, TrendPage, TrendPoint, TrendRun, TrendStep, TrendSweep};
use crate::metrics::compare::{interval, run_interval, RunRollouts, TaskValue};
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
    /// The field whose task means are drawn (`reward`, or `mean/reward`).
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

/// The rollouts field the page is about (`reward` or `mean/reward`: each task's value
/// is the mean of its measured rollouts, as `compare` takes it).
fn field_of(metric: &str) -> Result<String> {
    match metric.split_once('/') {
        None => Ok(metric.to_string()),
        Some(("mean", f)) if !f.is_empty() => Ok(f.to_string()),
        _ => Err(Error::refused(
            None,
            Msg::default()
                .opt(Opt::text("metric", metric.to_string()))
                .text(": the trend is of a field's task means; give the field (`reward`) or `mean/FIELD`"),
        )),
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
        let msg = Msg::default().opt(Opt::text("by", by.to_string()));
        return Err(Error::refused(None, msg.text(": no sweep in the lake has that label")));
    }
    // Numbers when every value is one (then they place the sweeps), else text.
    let numbers: Option<Vec<f64>> =
        rows.iter().map(|r| r.0.as_deref().and_then(|v| v.parse::<f64>().ok()).filter(|x| x.is_finite())).collect();
    let numeric = numbers.is_some();
    let mut rows: Vec<(f64, Option<String>, TrendSweep)> = match numbers {
        Some(n) => n.into_iter().zip(rows).map(|(x, (v, s))| (x, v, s)).collect(),
        None => rows.into_iter().enumerate().map(|(i, (v, s))| (i as f64, v, s)).collect(),
    };
    // A stable sort: sweeps with one label value keep the order they were added in.
    if numeric {
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    } else {
        rows.sort_by(|a, b| a.1.cmp(&b.1));
    }
    let sweeps = rows
        .into_iter()
        .enumerate()
        .map(|(i, (x, _, s))| TrendSweep { x: if numeric { x } else { (i + 1) as f64 }, ..s })
        .collect();
    Ok((sweeps, !numeric))
}

/// Per run, per sweep (index into `sweeps`): each task's value by its pairing key (the
/// fingerprint, or the task index where a task has none; a key met twice in one sweep
/// gets its occurrence number), with its task index there.
type Values = BTreeMap<String, BTreeMap<usize, TaskValues>>;

/// One run's tasks in one sweep: pairing key → (task index, value).
type TaskValues = BTreeMap<String, (i64, f64)>;

/// Each (sweep, run, task)'s value, read from the lake's `rollouts` (the field, the run,
/// the task index and the mask) and `tasks` (the fingerprints) columns, a sweep's
/// partitions at a time, sweeps in parallel. A task's value is the exact mean of its
/// measured rollouts, as `compare` computes it: the tasks table's `mean/…` follows NeMo
/// Gym's summation, whose last bit depends on the rollouts' order and would turn a tie
/// between two sweeps into a win.
fn task_values(lake: &Lake, sweeps: &[TrendSweep], field: &str, w: &mut Warnings) -> Result<Values> {
    use rayon::prelude::*;
    let Some(mut rollouts) = lake.table("rollouts")? else {
        let msg = Msg::default().opt(Opt::text("lake", lake.dir.display().to_string()));
        return Err(Error::refused(None, msg.text(": no rollouts table")));
    };
    let schema = rollouts.collect_schema()?;
    // The rollouts' own fields: not the lake's columns, the labels or the indexes.
    let own = |n: &str| {
        !n.starts_with("_ng_") && !["sweep", "sweep_order"].contains(&n) && !lake.label_keys.iter().any(|k| k == n)
    };
    match schema.get(field) {
        Some(dt) if (dt.is_primitive_numeric() || dt.is_bool()) && own(field) => {}
        _ => {
            let mut have: Vec<&str> = schema
                .iter()
                .filter(|(n, dt)| dt.is_primitive_numeric() && own(n.as_str()))
                .map(|(n, _)| n.as_str())
                .collect();
            have.sort_unstable();
            let msg = Msg::default().opt(Opt::text("metric", field.to_string())).text(format!(
                ": no numeric field of that name in the lake's rollouts (numeric fields: {})",
                have.join(", ")
            ));
            return Err(Error::refused(None, msg));
        }
    }
    let per_sweep: Vec<Result<Vec<(String, TaskValues)>>> =
        sweeps.par_iter().map(|s| sweep_values(&lake.dir, &s.id, field)).collect();
    let mut out: Values = BTreeMap::new();
    for (si, runs) in per_sweep.into_iter().enumerate() {
        let runs = runs?;
        if runs.is_empty() {
            w.add(format!("sweep {}: its rollouts have no `{field}`, so it has no point", sweeps[si].id));
        }
        for (agent, m) in runs {
            out.entry(agent).or_default().insert(si, m);
        }
    }
    Ok(out)
}

/// One sweep's task values per run (see [`task_values`]); none when its rollouts lack
/// the field.
fn sweep_values(dir: &std::path::Path, id: &str, field: &str) -> Result<Vec<(String, TaskValues)>> {
    use crate::export::lake::partition;
    use crate::ingest::parquet::scan_parquet;
    let mut lf = scan_parquet(&partition(dir, "rollouts", id))?;
    if lf.collect_schema()?.get(field).is_none() {
        return Ok(Vec::new());
    }
    let r = lf
        .select([
            col("agent"),
            col("_ng_task_index").cast(DataType::Int64),
            col("_ng_rollout_index").cast(DataType::Int64),
            col("mask_sample"),
            col(field).cast(DataType::Float64),
        ])
        .collect()?;
    let t = scan_parquet(&partition(dir, "tasks", id))?
        .select([col("agent"), col("_ng_task_index").cast(DataType::Int64), col("task_fingerprint")])
        .collect()?;
    let mut prints: std::collections::HashMap<(&str, i64), &str> = std::collections::HashMap::new();
    let (ta, ti, tf) =
        (t.column("agent")?.str()?, t.column("_ng_task_index")?.i64()?, t.column("task_fingerprint")?.str()?);
    for i in 0..t.height() {
        if let (Some(a), Some(x), Some(f)) = (ta.get(i), ti.get(i), tf.get(i)) {
            prints.insert((a, x), f);
        }
    }
    let agent = r.column("agent")?.str()?;
    let (task, rollout) = (r.column("_ng_task_index")?.i64()?, r.column("_ng_rollout_index")?.i64()?);
    let (masked, value) = (r.column("mask_sample")?.bool()?, r.column(field)?.f64()?);
    // Rows come in runs of one agent: the last run found is tried first.
    let mut runs: Vec<(&str, RunRollouts)> = Vec::new();
    let mut last = usize::MAX;
    for i in 0..r.height() {
        let (Some(a), Some(x)) = (agent.get(i), task.get(i)) else { continue };
        if runs.get(last).is_none_or(|(n, _)| *n != a) {
            last = match runs.iter().position(|(n, _)| *n == a) {
                Some(k) => k,
                None => {
                    runs.push((a, RunRollouts::default()));
                    runs.len() - 1
                }
            };
        }
        // No cluster field: nothing to refuse.
        let _ = runs[last].1.add(x, rollout.get(i).unwrap_or(0), value.get(i), masked.get(i).unwrap_or(false), None);
    }
    let mut out = Vec::with_capacity(runs.len());
    for (a, run) in &runs {
        let mut m = BTreeMap::new();
        for (x, v) in run.task_values(TaskValue::Mean) {
            let base = match prints.get(&(*a, x)).filter(|p| !p.is_empty()) {
                Some(p) => p.to_string(),
                None => format!("task {x}"),
            };
            let mut key = base.clone();
            let mut n = 1;
            while m.contains_key(&key) {
                n += 1;
                key = format!("{base} #{n}");
            }
            m.insert(key, (x, v));
        }
        out.push((a.to_string(), m));
    }
    Ok(out)
}

/// One run's points and steps (before Holm's correction).
fn run_trend(name: &str, by_sweep: &BTreeMap<usize, TaskValues>, sweeps: &[TrendSweep], w: &mut Warnings) -> TrendRun {
    let mut points = Vec::new();
    for (&s, m) in by_sweep {
        // In task order, as `compare` sums them.
        let mut x: Vec<(i64, f64)> = m.values().copied().collect();
        x.sort_by_key(|v| v.0);
        let x: Vec<f64> = x.into_iter().map(|v| v.1).collect();
        let Some(est) = mean_se(&x, None) else { continue };
        let (ci, _) = run_interval(Some(&est), &x, false, &format!("{name} in {}", sweeps[s].id), w);
        points.push(TrendPoint { sweep: s, tasks: x.len(), mean: est.mean, ci });
    }
    let mut steps = Vec::new();
    for pair in points.windows(2) {
        let (from, to) = (pair[0].sweep, pair[1].sweep);
        let (a_map, b_map) = (&by_sweep[&from], &by_sweep[&to]);
        // In the earlier sweep's task order, as `compare` pairs them against its baseline.
        let mut shared: Vec<(i64, f64, f64)> =
            a_map.iter().filter_map(|(k, &(x, va))| b_map.get(k).map(|&(_, vb)| (x, va, vb))).collect();
        shared.sort_unstable_by_key(|v| v.0);
        let a: Vec<f64> = shared.iter().map(|v| v.1).collect();
        let b: Vec<f64> = shared.iter().map(|v| v.2).collect();
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
        // Beside the lake's folder, named after it (`.` and `..` resolved first).
        let dir = std::fs::canonicalize(&c.lake).unwrap_or_else(|_| c.lake.clone());
        let name = dir.file_name().map_or("lake".into(), |n| n.to_string_lossy().into_owned());
        dir.with_file_name(format!("{name}_trend.html"))
    });
    // No file of the lake may be the page.
    let files = crate::export::lake::files(&c.lake);
    let read: Vec<&std::path::Path> = files.iter().map(PathBuf::as_path).collect();
    let mut out = OutputSet::new(&read);
    out.check(&out_path)?;
    let mut warnings = Warnings::default();
    let (sweeps, positional) = ordered(&lake, c.by.as_deref(), &mut warnings)?;
    let field = field_of(&c.metric)?;
    let values = task_values(&lake, &sweeps, &field, &mut warnings)?;
    let mut runs: Vec<TrendRun> =
        values.iter().map(|(name, by_sweep)| run_trend(name, by_sweep, &sweeps, &mut warnings)).collect();
    let p: Vec<Option<f64>> = runs.iter().flat_map(|r| r.steps.iter().map(|s| s.paired.and_then(|d| d.p))).collect();
    let mut adjusted = holm(&p).into_iter();
    for s in runs.iter_mut().flat_map(|r| r.steps.iter_mut()) {
        s.p_holm = adjusted.next().flatten();
    }
    let page = TrendPage {
        metric: format!("mean/{field}"),
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
