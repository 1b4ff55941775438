//! `gate --noise`: a policy's margins against one run's own noise. The run's repeats
//! are split into two halves many times (seeded), each split an A/A comparison of two
//! runs from one distribution; per check, the margin an A/A split needs to be told
//! apart from nothing says how small a margin the run's noise can resolve.

use super::compare::ReadFile;
use super::gate::{check_runs, config_for, read_tables};
use super::gate_policy::Policy;
use crate::error::{Error, Result};
use crate::generate::rng::Rng;
use crate::metrics::compare::{report_with, Options, Report};
use crate::metrics::gate::Rule;
use crate::stats::quantile_linear_sorted;
use crate::stats::t_ppf;
use crate::workflow::GateConfig;

/// Splits of the repeats by default.
pub const SPLITS: usize = 200;

/// One check's noise floor (per group with `by`).
#[derive(Debug, Clone)]
pub struct NoiseRow {
    pub check: usize,
    pub group: Option<String>,
    /// Splits that gave an estimate with a standard error.
    pub splits: usize,
    /// Tasks with two or more measured rollouts (in the split run).
    pub tasks: usize,
    /// Per split the margin it needs; their median and 95th percentile.
    pub median: Option<f64>,
    pub floor: Option<f64>,
}

/// The noise floors of a policy's checks on one run.
#[derive(Debug, Clone)]
pub struct NoiseReport {
    pub run: String,
    pub policy: Policy,
    pub splits: usize,
    pub seed: u64,
    pub rows: Vec<NoiseRow>,
}

/// What one split needs for `rule`: for a difference, the equivalence margin at which
/// the A/A split would pass, `|d̄| + t_{1−α}·se` (no margin below it is told apart from
/// the run's noise); for a threshold, how far from the run's mean a bound must be,
/// `t_{1−α}·se` of a half's mean.
fn needed(rule: &Rule, r: &Report, alpha: f64) -> Option<f64> {
    let e = match rule {
        Rule::Threshold { .. } => r.runs[1].est?,
        _ => r.comparisons.first()?.stats?.diff,
    };
    let half = t_ppf(1.0 - alpha, e.df) * e.se?;
    let v = match rule {
        Rule::Threshold { .. } => half,
        _ => e.mean.abs() + half,
    };
    v.is_finite().then_some(v)
}

/// The run split: per check, `splits` A/A splits of the baseline run's repeats (seeded
/// by `seed`), and the margin each needs.
pub fn noise(g: &GateConfig, splits: usize, seed: u64) -> Result<NoiseReport> {
    let base = &g.runs;
    base.validate()?;
    if splits < 2 {
        return Err(Error::Usage(format!("--splits {splits}: give at least 2")));
    }
    let tables = read_tables(base, &g.policy)?;
    let read: Vec<Option<ReadFile<'_>>> = tables.iter().map(|t| t.as_ref().map(|(r, i)| (r, i.as_ref()))).collect();
    let mut all = Vec::new();
    for c in &g.policy.checks {
        let cfg = config_for(base, c);
        all.push((cfg.clone(), check_runs(&g.policy, base, c, &read)?));
    }
    let alpha = g.policy.alpha;
    let mut rows = Vec::new();
    let mut run_name = String::new();
    for (ci, (c, (cfg, runs))) in g.policy.checks.iter().zip(&all).enumerate() {
        let which = match &base.baseline {
            None => 0,
            Some(b) => runs.names.iter().position(|n| n == b).ok_or_else(|| {
                Error::Usage(format!("--baseline {b:?} is not a run here; runs: {}", runs.names.join(", ")))
            })?,
        };
        let Some(run) = runs.rollouts.get(which) else {
            return Err(Error::Usage("--noise needs a run with rollouts".into()));
        };
        run_name = runs.names[which].clone();
        let names = ["A".to_string(), "B".to_string()];
        let opts = Options { clustered: base.cluster_key.is_some(), by: c.by.is_some(), ..Options::default() };
        // Per group (or the whole run): each split's needed margin, and the tasks.
        let mut per: Vec<(Option<String>, Vec<f64>, usize)> = Vec::new();
        let mut rng = Rng::new(seed);
        for _ in 0..splits {
            let (a, b) = run.split_repeats(&mut rng);
            let r = report_with(&names, &[a, b], 0, cfg.task_value(), &opts).map_err(|(task, ..)| {
                Error::Mismatch(format!("task {task} is in two clusters in the halves of one run"))
            })?;
            let parts: Vec<(Option<&str>, &Report)> = if c.by.is_some() {
                r.groups.iter().map(|(g, r)| (Some(g.as_str()), r)).collect()
            } else {
                vec![(None, &r)]
            };
            for (group, part) in parts {
                let at = match per.iter().position(|(g, _, _)| g.as_deref() == group) {
                    Some(i) => i,
                    None => {
                        per.push((group.map(str::to_string), Vec::new(), 0));
                        per.len() - 1
                    }
                };
                per[at].2 = part.comparisons.first().map_or(0, |cmp| cmp.paired_tasks);
                if let Some(v) = needed(&c.rule, part, alpha) {
                    per[at].1.push(v);
                }
            }
        }
        for (group, mut v, tasks) in per {
            crate::stats::sort_f64(&mut v);
            let q = |p: f64| (!v.is_empty()).then(|| quantile_linear_sorted(&v, p));
            rows.push(NoiseRow { check: ci, group, splits: v.len(), tasks, median: q(0.5), floor: q(0.95) });
        }
    }
    Ok(NoiseReport { run: run_name, policy: g.policy.clone(), splits, seed, rows })
}
