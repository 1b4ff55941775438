//! The report workflow: one self-contained HTML page per sweep. Each rollouts file is
//! read once; its figures come from the same computations as `aggregate` (pooled and
//! per-repeat means, the across-repeat interval, token usage, coverage) and `compare`
//! (task-level means and intervals, paired differences against the baseline, pass@k
//! per k), and [`crate::export::report`] renders them.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::compare::{compare_runs, read_runs_with, ReadFile};
use crate::error::{Error, Location, Msg, Opt, Result};
use crate::export::atomic::OutputSet;
use crate::export::nemo_gym::{artifact_path, check_beside};
use crate::export::report::{render, HardTask, Page, RunFigures};
use crate::ingest::{InputTable, RolloutTable};
use crate::json::Json;
use crate::metrics::aggregate::{aggregate, AggregateOptions};
use crate::metrics::compare::TaskValue;
use crate::metrics::warnings::Warnings;
use crate::trace::trace;
use crate::workflow::CompareConfig;

/// How many of the hardest tasks the page lists, and how much of each one's input.
const HARDEST: usize = 10;
const EXCERPT_CHARS: usize = 240;

/// What to report on and where the page goes.
#[derive(Debug, Clone)]
pub struct ReportConfig {
    /// Rollouts JSONL files, or rollouts tables (.parquet) from `rollstat ingest`.
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL: none, or one per rollouts file, in order.
    pub inputs: Vec<PathBuf>,
    /// Label for rollouts that name no agent.
    pub agent: Option<String>,
    /// Numeric field the page is about.
    pub metric: String,
    /// The run the others are compared against (default: the first run).
    pub baseline: Option<String>,
    /// Field that groups tasks into clusters for the standard errors.
    pub cluster_key: Option<String>,
    /// Output file; `None`: `S_report.html` beside the first rollouts file `S.jsonl`.
    pub out: Option<PathBuf>,
    /// When the page says it was made, in seconds since 1970-01-01 UTC.
    pub made_at: u64,
    /// How the runs' tasks are paired (see `CompareConfig`).
    pub pairing: crate::metrics::task_identity::Pairing,
}

/// What a report run wrote.
pub struct ReportRun {
    pub file: PathBuf,
    /// The page's size in bytes.
    pub bytes: usize,
    /// Every warning the computations raised (the page lists them too).
    pub warnings: Warnings,
}

impl ReportConfig {
    /// The compare configuration the page's comparisons use.
    fn compare(&self, pass_at: Option<u32>) -> CompareConfig {
        CompareConfig {
            rollouts: self.rollouts.clone(),
            inputs: self.inputs.clone(),
            agent: self.agent.clone(),
            metric: self.metric.clone(),
            pass_at,
            baseline: self.baseline.clone(),
            cluster_key: self.cluster_key.clone(),
            by: None,
            mde: pass_at.is_none(),
            detect: None,
            flips: None,
            pairing: self.pairing.clone(),
        }
    }
}

/// Whether `p` names a rollouts table rather than JSONL.
fn is_parquet(p: &Path) -> bool {
    p.extension().is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
}

/// Writes the report page.
pub fn report(c: &ReportConfig) -> Result<ReportRun> {
    let first = c.rollouts.first().ok_or_else(|| Error::Usage("give a rollouts file".into()))?;
    super::compare::inputs_per_rollouts(&c.rollouts, &c.inputs)?;
    if c.out.is_none() {
        check_beside(std::slice::from_ref(first), Opt::value("out", "FILE"))?;
    }
    let path = c.out.clone().unwrap_or_else(|| artifact_path(first, None, "report", "html"));
    let read: Vec<&Path> = c.rollouts.iter().chain(&c.inputs).map(PathBuf::as_path).collect();
    let mut out = OutputSet::new(&read);
    out.check(&path)?;
    let cmp = c.compare(None);
    cmp.validate()?;

    // Each JSONL file once, for both computations.
    let mut tables: Vec<Option<(RolloutTable, Option<InputTable>)>> = Vec::new();
    for (i, p) in c.rollouts.iter().enumerate() {
        if i > 0 && c.rollouts[..i].iter().any(|q| q == p || crate::export::atomic::same_file(q, p)) {
            let msg = Msg::default().text(format!("{} is given twice as ", p.display())).opt(Opt::named("rollouts"));
            return Err(Error::refused(None, msg));
        }
        tables.push(if is_parquet(p) {
            None
        } else {
            let opts = crate::ingest::ReadOptions::FINGERPRINTS;
            Some(super::read_both(std::slice::from_ref(p), c.inputs.get(i).map(PathBuf::as_path), opts)?)
        });
    }
    let given: Vec<Option<ReadFile<'_>>> = tables.iter().map(|t| t.as_ref().map(|(r, i)| (r, i.as_ref()))).collect();
    let t0 = std::time::Instant::now();
    let runs = read_runs_with(&cmp, &given)?;
    if runs.names.is_empty() {
        return Err(Error::bad(Location::file(first), "holds no rollouts"));
    }
    let report = compare_runs(&cmp, &runs)?;
    let mut warnings = Warnings::default();
    warnings.extend(report.warnings.clone());
    let most = runs.rollouts.iter().map(|r| r.most_per_task()).max().unwrap_or(0);
    let mut pass_at = Vec::with_capacity(most);
    for k in 1..=most {
        let r = compare_runs(&c.compare(Some(k as u32)), &runs)?;
        if k == most {
            warnings.extend(r.warnings.clone());
        }
        pass_at.push(r);
    }
    trace("compare", t0);

    let t0 = std::time::Instant::now();
    let opts = AggregateOptions { default_agent: c.agent.clone(), ..AggregateOptions::default() };
    let mut figures = vec![RunFigures::default(); runs.names.len()];
    let mut missing = None;
    let mut failures: Vec<BTreeMap<String, usize>> = vec![BTreeMap::new(); runs.names.len()];
    for (f, t) in tables.iter().enumerate() {
        let Some((t, inputs)) = t else { continue };
        let (entries, w) = aggregate(t, inputs.as_ref(), &opts)?;
        warnings.extend(w);
        for e in &entries {
            let Some(run) = runs.origin.iter().position(|(file, label)| *file == f && label == e.label()) else {
                continue;
            };
            figures[run] = run_figures(e.member("agent_metrics"), &e.repeats, &c.metric);
        }
        if let Some(i) = inputs {
            *missing.get_or_insert(0) += inputs_without_rollout(t, i);
        }
        if let Some(cov) = super::aggregate::failures_beside(std::slice::from_ref(&c.rollouts[f]), t)? {
            let run_of = crate::ingest::labels::runs(t, inputs.as_ref());
            for (label, (_, _, class)) in crate::metrics::failures::labelled(&cov.failures, &run_of) {
                if let Some(run) = runs.origin.iter().position(|(file, l)| *file == f && l == label) {
                    *failures[run].entry(class.clone()).or_default() += 1;
                }
            }
        }
    }
    trace("aggregate", t0);

    let task_means: Vec<BTreeMap<i64, f64>> = runs.rollouts.iter().map(|r| r.task_values(TaskValue::Mean)).collect();
    let all_tasks: BTreeSet<i64> = task_means.iter().flat_map(|m| m.keys().copied()).collect();
    let hardest = hardest(&task_means, &tables);
    let repeats = figures.iter().filter_map(|f| f.num_repeats).max().map_or(most, |n| n as usize);
    let rollouts = report.runs.iter().map(|r| r.rollouts + r.masked + r.no_value).sum();
    let page = Page {
        metric: c.metric.clone(),
        generated: utc(c.made_at),
        version: env!("CARGO_PKG_VERSION").to_string(),
        files: c
            .rollouts
            .iter()
            .enumerate()
            .map(|(i, p)| match c.inputs.get(i) {
                Some(inp) => format!("{} (inputs {})", p.display(), inp.display()),
                None => p.display().to_string(),
            })
            .collect(),
        rollouts,
        tasks: all_tasks.len(),
        repeats,
        missing,
        failures,
        binary: runs.rollouts.iter().all(|r| r.is_binary()),
        compare: report,
        figures,
        pass_at,
        task_means,
        hardest,
        warnings: warnings.items().to_vec(),
    };
    let html = render(&page);
    out.add(&path, html.as_bytes())?;
    let mut files = out.commit()?;
    Ok(ReportRun { file: files.remove(0), bytes: html.len(), warnings })
}

/// A run's figures from its aggregate entry's agent metrics and repeat entries.
fn run_figures(agent: Option<&Json>, repeats: &[Json], metric: &str) -> RunFigures {
    let get = |j: &Json, k: String| j.get(&k).and_then(Json::as_f64);
    let interval = |j: &Json, lo: String, hi: String| Some((get(j, lo)?, get(j, hi)?));
    let Some(a) = agent else { return RunFigures::default() };
    let across = get(a, format!("mean_across_repeats/mean/{metric}")).map(|m| {
        (
            m,
            interval(
                a,
                format!("ci_low_95_across_repeats/mean/{metric}"),
                format!("ci_high_95_across_repeats/mean/{metric}"),
            ),
        )
    });
    let repeats = repeats
        .iter()
        .filter_map(|r| {
            let ci = interval(r, format!("ci_low_95/{metric}"), format!("ci_high_95/{metric}"));
            Some((r.get("_ng_rollout_index")?.as_f64()?, get(r, format!("mean/{metric}"))?, ci))
        })
        .collect();
    RunFigures {
        pooled: get(a, format!("mean/{metric}")),
        across,
        repeats,
        output_tokens: get(a, "mean/output_tokens".into()),
        num_repeats: a.get("num_repeats").and_then(Json::as_f64).map(|n| n as i64),
    }
}

/// How many input rows have no rollout of the same key.
fn inputs_without_rollout(t: &RolloutTable, i: &InputTable) -> usize {
    let have: HashSet<(i64, i64)> = t.task.iter().copied().zip(t.rollout.iter().copied()).collect();
    i.task.iter().zip(&i.rollout).filter(|(&a, &b)| !have.contains(&(a, b))).count()
}

/// The tasks with the lowest mean over the runs that measured them, with the start of
/// their input where an inputs file was read.
fn hardest(means: &[BTreeMap<i64, f64>], tables: &[Option<(RolloutTable, Option<InputTable>)>]) -> Vec<HardTask> {
    let mut sum: BTreeMap<i64, (f64, usize)> = BTreeMap::new();
    for m in means {
        for (&t, &v) in m.iter().filter(|(_, v)| v.is_finite()) {
            let e = sum.entry(t).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    let mut order: Vec<(f64, i64)> = sum.into_iter().map(|(t, (s, n))| (s / n as f64, t)).collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let inputs: Option<&InputTable> = tables.iter().flatten().find_map(|(_, i)| i.as_ref());
    order
        .into_iter()
        .take(HARDEST)
        .map(|(_, task)| HardTask {
            task,
            means: means.iter().map(|m| m.get(&task).copied()).collect(),
            excerpt: inputs.and_then(|i| excerpt(i, task)),
        })
        .collect()
}

/// The start of a task's input: the last user message of `responses_create_params.input`
/// (or the input itself when it is text), read from the task's first input row.
fn excerpt(i: &InputTable, task: i64) -> Option<String> {
    if i.path.extension().is_some_and(|e| e == "gz" || e == "zst") {
        return None;
    }
    let row = i.task.iter().position(|&t| t == task)?;
    let mut f = std::fs::File::open(&i.path).ok()?;
    f.seek(SeekFrom::Start(i.offset[row])).ok()?;
    let mut b = vec![0u8; i.len[row] as usize];
    f.read_exact(&mut b).ok()?;
    let row = crate::json::parse::parse(&b).ok()?;
    let input = row.get("responses_create_params")?.get("input")?;
    let text = match input {
        Json::Str(s) => s.clone(),
        Json::Arr(msgs) => {
            let user = msgs.iter().rev().find(|m| m.get("role").and_then(Json::as_str) == Some("user"))?;
            match user.get("content")? {
                Json::Str(s) => s.clone(),
                Json::Arr(parts) => {
                    parts.iter().filter_map(|p| p.get("text").and_then(Json::as_str)).collect::<Vec<_>>().join(" ")
                }
                _ => return None,
            }
        }
        _ => return None,
    };
    let mut s: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if s.chars().count() > EXCERPT_CHARS {
        s = s.chars().take(EXCERPT_CHARS).collect::<String>() + "…";
    }
    Some(s)
}

/// `secs` since 1970-01-01 as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(secs: u64) -> String {
    let iso = crate::export::dates::utc_iso(secs as i64);
    format!("{} {} UTC", &iso[..10], &iso[11..19])
}

#[cfg(test)]
mod tests {
    use super::utc;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        // 2000-02-29 12:34:56 UTC, a leap day in a century leap year.
        assert_eq!(utc(951_827_696), "2000-02-29 12:34:56 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }
}
