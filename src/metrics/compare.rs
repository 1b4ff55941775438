//! `compare`: each run's mean score with a task-level standard error, and every run
//! against a baseline run, paired on the tasks both measured (see [`crate::stats::paired`]
//! for the statistics and why the task is the unit).
//!
//! A run's value for a task is the mean of the metric over that task's *measured*
//! rollouts: not masked (`mask_sample`), with a numeric, non-NaN value — or, with
//! [`TaskValue::PassAt`], the task's pass@k as NeMo Gym computes it. A run's score is
//! the mean of its task values (each task weighs the same, however many repeats it has).
//! With a cluster field, every measured rollout of a task must carry the same value of
//! it (in every run); tasks are then clustered by it. With a breakdown field (`--by`),
//! the same holds for it, and the whole comparison is repeated per group.
//!
//! Beyond the t test each comparison carries: Holm-adjusted p-values over the runs
//! compared with the baseline; an exact sign test (McNemar's, for 0/1 scores) where the
//! task differences take few values; on request the minimum detectable effect and the
//! tasks needed to detect a given difference. 0/1 task scores get Wilson intervals;
//! fewer than [`FEW_CLUSTERS`] clusters get CR2 errors with Bell–McCaffrey degrees of
//! freedom (see the kernels in [`crate::stats`]).

use std::collections::BTreeMap;

use super::pass_at_k::{task_pass_at_k, Score};
use super::warnings::Warnings;
use crate::stats::binary::{sign_test, wilson};
use crate::stats::cr2::cr2;
use crate::stats::holm::holm;
use crate::stats::paired::{mean_se, paired, MeanSe, Paired};
use crate::stats::power::{mde, tasks_needed};
use crate::stats::repeats::{repeat_share, RepeatShare};
use crate::stats::{fsum, t_interval, t_two_sided_p};

/// Fewer clusters than this get the small-sample correction (CR2 errors with
/// Bell–McCaffrey degrees of freedom) and a note: CR1 errors are too small, and their
/// intervals too narrow, with few clusters (Cameron & Miller, "A Practitioner's Guide to
/// Cluster-Robust Inference", 2015, §VI).
pub const FEW_CLUSTERS: usize = 20;

/// Task differences taking at most this many distinct values get an exact sign test
/// beside the t test (whose normal shape they are far from).
pub const FEW_VALUES: usize = 3;

/// Level and power of the sizing answers: a two-sided test at 5% with 80% power.
pub const ALPHA: f64 = 0.05;
pub const POWER: f64 = 0.8;

/// One task's measured `(rollout index, value)` pairs and its cluster value.
type TaskRollouts = (Vec<(i64, f64)>, Option<String>);

/// The measured rollouts of one run, gathered task by task.
#[derive(Debug, Default, Clone)]
pub struct RunRollouts {
    /// Task → its measured values with their rollout indexes, and its cluster value.
    tasks: BTreeMap<i64, TaskRollouts>,
    /// Rollouts left out: masked, and without a numeric value.
    pub masked: usize,
    pub no_value: usize,
    /// The same, per task (so a group's counts can be told).
    left_out: BTreeMap<i64, (usize, usize)>,
    /// Task → its value of the breakdown field, when breaking down.
    by: BTreeMap<i64, String>,
}

/// Why a rollout's cluster value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterProblem {
    /// A measured rollout without the cluster field.
    Missing,
    /// A task whose measured rollouts carry two cluster values.
    Differs { first: String, then: String },
}

impl RunRollouts {
    /// The measured tasks, in order.
    pub fn task_ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.tasks.keys().copied()
    }

    /// Adds one rollout. `value` is `None` when the rollout has no numeric value of the
    /// metric; `cluster` is `Some(None)` when clustering and the rollout lacks the field.
    pub fn add(
        &mut self,
        task: i64,
        rollout: i64,
        value: Option<f64>,
        masked: bool,
        cluster: Option<Option<&str>>,
    ) -> Result<(), ClusterProblem> {
        if masked {
            self.masked += 1;
            self.left_out.entry(task).or_default().0 += 1;
            return Ok(());
        }
        let Some(v) = value.filter(|v| !v.is_nan()) else {
            self.no_value += 1;
            self.left_out.entry(task).or_default().1 += 1;
            return Ok(());
        };
        // Checked before the task gets an entry: a refused rollout leaves nothing behind.
        let cluster = match cluster {
            None => None,
            Some(None) => return Err(ClusterProblem::Missing),
            Some(Some(c)) => match self.tasks.get(&task).and_then(|(_, first)| first.as_deref()) {
                Some(first) if first != c => {
                    return Err(ClusterProblem::Differs { first: first.to_string(), then: c.to_string() })
                }
                _ => Some(c),
            },
        };
        let slot = self.tasks.entry(task).or_default();
        if slot.1.is_none() {
            slot.1 = cluster.map(str::to_string);
        }
        slot.0.push((rollout, v));
        Ok(())
    }

    /// Each task's value as the report computes it, in task order (tasks without one,
    /// too few rollouts for pass@k, left out).
    pub fn task_values(&self, value: TaskValue) -> BTreeMap<i64, f64> {
        self.tasks.iter().filter_map(|(&t, (v, _))| Some((t, value.of(v)?))).collect()
    }

    /// Whether every measured value is 0 or 1 (the metric is pass/fail).
    pub fn is_binary(&self) -> bool {
        self.tasks.values().all(|(v, _)| v.iter().all(|&(_, x)| x == 0.0 || x == 1.0))
    }

    /// The most measured rollouts any one task has.
    pub fn most_per_task(&self) -> usize {
        self.tasks.values().map(|(v, _)| v.len()).max().unwrap_or(0)
    }

    /// Records a measured rollout's value of the breakdown field; the value the task
    /// already has, when it differs (a group must hold whole tasks).
    pub fn set_group(&mut self, task: i64, group: &str) -> Result<(), String> {
        match self.by.get(&task) {
            Some(g) if g != group => Err(g.clone()),
            Some(_) => Ok(()),
            None => {
                self.by.insert(task, group.to_string());
                Ok(())
            }
        }
    }

    /// Every group value of the run's tasks.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.by.values().map(String::as_str)
    }

    /// The run with its tasks renumbered by `map` (pairing tasks by what they ask, not
    /// by index); a task the map leaves out is left out.
    pub fn renumbered(&self, map: &BTreeMap<i64, i64>) -> RunRollouts {
        let re = |t: &i64| map.get(t).copied();
        RunRollouts {
            tasks: self.tasks.iter().filter_map(|(t, v)| Some((re(t)?, v.clone()))).collect(),
            masked: self.masked,
            no_value: self.no_value,
            left_out: self.left_out.iter().filter_map(|(t, v)| Some((re(t)?, *v))).collect(),
            by: self.by.iter().filter_map(|(t, v)| Some((re(t)?, v.clone()))).collect(),
        }
    }

    /// The run's repeats split into two runs of the same tasks: each task's measured
    /// rollouts shuffled by `rng` and cut in half (the odd one out goes to the first),
    /// with the task's cluster and group. Tasks with fewer than two measured rollouts
    /// are left out. The halves are an A/A comparison: two runs from one distribution.
    pub(crate) fn split_repeats(&self, rng: &mut crate::generate::rng::Rng) -> (RunRollouts, RunRollouts) {
        let (mut a, mut b) = (RunRollouts::default(), RunRollouts::default());
        for (&t, (vals, cluster)) in &self.tasks {
            if vals.len() < 2 {
                continue;
            }
            let mut v = vals.clone();
            v.sort_by_key(|x| x.0);
            // Fisher–Yates, from the end.
            for i in (1..v.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                v.swap(i, j);
            }
            let cut = v.len().div_ceil(2);
            for (half, part) in [(&mut a, &v[..cut]), (&mut b, &v[cut..])] {
                half.tasks.insert(t, (part.to_vec(), cluster.clone()));
                if let Some(g) = self.by.get(&t) {
                    half.by.insert(t, g.clone());
                }
            }
        }
        (a, b)
    }

    /// The run's failure rate as a run of 0/1 values: per task a 0 for each rollout it
    /// has (measured, masked or without a value) and a 1 for each of its `failed`
    /// attempts that no result replaced, so that a task's mean is its failed rollouts
    /// over those expected. A task keeps its cluster and group; with `clustered`, a task
    /// with no measured rollout (so no cluster value) is left out.
    pub fn failure_rates(&self, failed: &BTreeMap<i64, usize>, clustered: bool) -> RunRollouts {
        let mut r = RunRollouts::default();
        let tasks: std::collections::BTreeSet<i64> =
            self.tasks.keys().chain(self.left_out.keys()).chain(failed.keys()).copied().collect();
        for t in tasks {
            let cluster = self.tasks.get(&t).and_then(|v| v.1.clone());
            if clustered && cluster.is_none() {
                continue;
            }
            let present = self.tasks.get(&t).map_or(0, |v| v.0.len()) + self.left_out.get(&t).map_or(0, |c| c.0 + c.1);
            let lost = failed.get(&t).copied().unwrap_or(0);
            let values = std::iter::repeat_n(0.0, present).chain(std::iter::repeat_n(1.0, lost));
            r.tasks.insert(t, (values.enumerate().map(|(i, v)| (i as i64, v)).collect(), cluster));
            if let Some(g) = self.by.get(&t) {
                r.by.insert(t, g.clone());
            }
        }
        r
    }

    /// Each task's group value, in task order.
    pub fn task_groups(&self) -> impl Iterator<Item = (i64, &str)> {
        self.by.iter().map(|(&t, g)| (t, g.as_str()))
    }

    /// The run restricted to the tasks of one group.
    fn only_group(&self, group: &str) -> RunRollouts {
        let keep = |t: &i64| self.by.get(t).is_some_and(|g| g == group);
        let left_out: BTreeMap<i64, (usize, usize)> =
            self.left_out.iter().filter(|(t, _)| keep(t)).map(|(&t, &c)| (t, c)).collect();
        RunRollouts {
            tasks: self.tasks.iter().filter(|(t, _)| keep(t)).map(|(&t, v)| (t, v.clone())).collect(),
            masked: left_out.values().map(|c| c.0).sum(),
            no_value: left_out.values().map(|c| c.1).sum(),
            left_out,
            by: BTreeMap::new(),
        }
    }

    /// A task's measured values in rollout order.
    fn scores(&self, task: i64) -> Vec<f64> {
        let mut v = self.tasks.get(&task).map(|t| t.0.clone()).unwrap_or_default();
        v.sort_by_key(|x| x.0);
        v.into_iter().map(|x| x.1).collect()
    }
}

/// What a run's value for one task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskValue {
    /// The mean of the task's measured values (an exactly rounded sum over the count, so
    /// it does not depend on the order the rollouts were written in: two runs with the
    /// same values on a task tie exactly).
    Mean,
    /// NeMo Gym's pass@k of the task's measured values in rollout-index order
    /// ([`crate::metrics::pass_at_k::task_pass_at_k`]); tasks with fewer than k values
    /// are left out.
    PassAt(usize),
}

impl TaskValue {
    fn of(self, vals: &[(i64, f64)]) -> Option<f64> {
        match self {
            TaskValue::Mean => Some(fsum(vals.iter().map(|v| v.1)) / vals.len() as f64),
            TaskValue::PassAt(k) => {
                let mut v = vals.to_vec();
                v.sort_by_key(|x| x.0);
                let scores: Vec<Score> = v.iter().map(|x| Score::Float(x.1)).collect();
                task_pass_at_k(&scores, k).map(Score::f)
            }
        }
    }
}

/// A task's value in a form that orders exactly. Pass@k of pass/fail values is the
/// fraction 1 − C(incorrect, k)/C(n, k): its float, as NeMo Gym computes it, rounds one
/// task's 1/3 to 0.33333333333333337 and another's to 0.3333333333333333, which would
/// make a tie a win. Every other value orders as the float it is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum TaskOrder {
    /// 1 − C(incorrect, k)/C(n, k), as the numerator and denominator of the ratio.
    Ratio(u128, u128),
    Value(f64),
}

impl TaskOrder {
    fn of(value: TaskValue, vals: &[(i64, f64)], float: f64) -> TaskOrder {
        let TaskValue::PassAt(k) = value else { return TaskOrder::Value(float) };
        let n = vals.len() as u64;
        let incorrect = vals.iter().filter(|v| v.1 == 0.0).count() as u64;
        let binary = vals.iter().all(|v| v.1 == 0.0 || v.1 == 1.0);
        match (binary, binomial(incorrect, k as u64), binomial(n, k as u64)) {
            (true, Some(num), Some(den)) if den > 0 => TaskOrder::Ratio(num, den),
            _ => TaskOrder::Value(float),
        }
    }

    /// How `self` orders against `other`: two fractions exactly (checked products); a
    /// fraction against a float as the float nearest the fraction (one rounding, where
    /// NeMo Gym's `1 − C/C` rounds twice); two floats as floats.
    fn cmp(self, other: TaskOrder, floats: (f64, f64)) -> Option<std::cmp::Ordering> {
        if let (TaskOrder::Ratio(a, b), TaskOrder::Ratio(c, d)) = (self, other) {
            // 1 − a/b against 1 − c/d: the larger ratio is the smaller value.
            if let (Some(x), Some(y)) = (c.checked_mul(b), a.checked_mul(d)) {
                return Some(x.cmp(&y));
            }
        }
        self.nearest(floats.0).partial_cmp(&other.nearest(floats.1))
    }

    /// The float nearest the value: `(den − num)/den` in one division when both are
    /// exact in a double, else the float given.
    fn nearest(self, float: f64) -> f64 {
        const EXACT: u128 = 1 << 53;
        match self {
            TaskOrder::Ratio(num, den) if den < EXACT => (den - num) as f64 / den as f64,
            _ => float,
        }
    }
}

/// The tasks in `clusters` clusters of the present mean size (`tasks / units` each),
/// rounded up in integers: 15 clusters of 400/3 tasks are 2000 tasks, where the float
/// product (2000.0000000000002) would round up to 2001.
fn tasks_of_clusters(clusters: u64, tasks: usize, units: usize) -> u64 {
    let (c, t, u) = (u128::from(clusters), tasks as u128, units.max(1) as u128);
    u64::try_from((c * t).div_ceil(u)).unwrap_or(u64::MAX)
}

/// C(n, k) in integers, `None` when it exceeds 128 bits.
fn binomial(n: u64, k: u64) -> Option<u128> {
    if k > n {
        return Some(0);
    }
    let k = k.min(n - k);
    let mut c: u128 = 1;
    for i in 0..k {
        // Exact at every step: C(n, i+1) = C(n, i)·(n − i)/(i + 1).
        c = c.checked_mul(u128::from(n - i))? / u128::from(i + 1);
    }
    Some(c)
}

/// A run as the report shows it.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub name: String,
    pub tasks: usize,
    /// Measured rollouts, and those left out (masked; without a numeric value).
    pub rollouts: usize,
    pub masked: usize,
    pub no_value: usize,
    /// Mean over tasks with its standard error; `None` when no task was measured.
    pub est: Option<MeanSe>,
    /// 95% interval around the mean: t, or Wilson for 0/1 task scores.
    pub ci: Option<(f64, f64)>,
    /// Whether `ci` is Wilson's (every task value is 0 or 1, unclustered).
    pub wilson: bool,
    /// Whether the standard error is CR2 with Bell–McCaffrey degrees of freedom.
    pub cr2: bool,
    /// Repeat noise against task spread (with sizing answers asked for).
    pub repeats: Option<RepeatShare>,
}

/// An exact test beside the t test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exact {
    /// McNemar's (every paired task value is 0 or 1) rather than the general sign test.
    pub mcnemar: bool,
    pub p: f64,
}

/// One of the tasks that changed most between the baseline and a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Flip {
    pub task: i64,
    /// What the task asks (its fingerprint), when the runs' rows carry one; set by the
    /// caller that read the rows.
    pub fingerprint: Option<u64>,
    /// The two task values and their per-rollout scores (rollout order).
    pub baseline: f64,
    pub run: f64,
    pub baseline_scores: Vec<f64>,
    pub run_scores: Vec<f64>,
}

/// One run against the baseline.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub run: usize,
    /// Tasks both measured, and tasks only one of them measured (left out).
    pub paired_tasks: usize,
    pub only_baseline: usize,
    pub only_run: usize,
    /// Of the unpaired tasks, those the side without them has a failed attempt for.
    pub unpaired_failed: usize,
    /// `None` when the two runs share no task.
    pub stats: Option<Paired>,
    /// 95% t interval around the difference (run − baseline).
    pub ci: Option<(f64, f64)>,
    /// Whether the difference's standard error is CR2 (few clusters).
    pub cr2: bool,
    /// Holm-adjusted p-value over the report's comparisons (with two or more).
    pub p_holm: Option<f64>,
    /// The exact sign / McNemar test, where the differences take few values.
    pub exact: Option<Exact>,
    /// Smallest difference detected with 80% power at 5% (asked for).
    pub mde: Option<f64>,
    /// Tasks needed to detect the asked-for difference with 80% power at 5%.
    pub tasks_needed: Option<u64>,
    /// The tasks that changed most (asked for).
    pub flips: Vec<Flip>,
}

/// What the report computes beyond the default.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Options {
    pub clustered: bool,
    /// Break down by the group values the runs carry.
    pub by: bool,
    /// Minimum detectable effects, and repeat noise against task spread.
    pub mde: bool,
    /// A difference to size the eval for.
    pub detect: Option<f64>,
    /// How many changed tasks to list per comparison.
    pub flips: Option<usize>,
}

/// What `compare` reports.
#[derive(Debug, Clone)]
pub struct Report {
    pub runs: Vec<RunSummary>,
    pub baseline: usize,
    pub comparisons: Vec<Comparison>,
    pub warnings: Warnings,
    /// The comparison repeated per group of the breakdown field, groups in order.
    pub groups: Vec<(String, Report)>,
}

/// A task whose runs disagree on its cluster value: `(task, run a, value a, run b, value b)`.
pub type ClusterConflict = (i64, usize, String, usize, String);

/// Each task's cluster id across all runs; the first conflict when two runs put one task
/// in different clusters.
fn cluster_ids(runs: &[RunRollouts]) -> Result<BTreeMap<i64, u32>, ClusterConflict> {
    let mut of_task: BTreeMap<i64, (usize, &str)> = BTreeMap::new();
    for (r, run) in runs.iter().enumerate() {
        for (&task, (_, c)) in &run.tasks {
            let Some(c) = c.as_deref() else { continue };
            match of_task.get(&task) {
                Some(&(r0, c0)) if c0 != c => return Err((task, r0, c0.to_string(), r, c.to_string())),
                Some(_) => {}
                None => {
                    of_task.insert(task, (r, c));
                }
            }
        }
    }
    let mut id_of: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    Ok(of_task
        .into_iter()
        .map(|(task, (_, c))| {
            let next = id_of.len() as u32;
            (task, *id_of.entry(c).or_insert(next))
        })
        .collect())
}

/// The 95% interval of a run's mean over its task values `x` (estimated as `est`), and
/// whether it is Wilson's: 0/1 task scores without clusters get Wilson's interval, which
/// stays inside [0, 1]; everything else Student's t around the (clustered) error.
pub fn run_interval(
    est: Option<&MeanSe>,
    x: &[f64],
    clustered: bool,
    what: &str,
    w: &mut Warnings,
) -> (Option<(f64, f64)>, bool) {
    let wilson_ci = (!clustered && binary(x) && est.is_some_and(|e| e.se.is_some()))
        .then(|| wilson(x.iter().filter(|&&v| v == 1.0).count() as u64, x.len() as u64))
        .flatten();
    match wilson_ci {
        Some(ci) => (Some(ci), true),
        None => (est.and_then(|e| interval(e, what, w)), false),
    }
}

/// The Student-t 95% interval around `e`'s mean, warning when its standard error is 0
/// (the interval is then the point itself, as rollstat does for the other levels).
pub fn interval(e: &MeanSe, what: &str, w: &mut Warnings) -> Option<(f64, f64)> {
    let se = e.se?;
    if se == 0.0 {
        let why = if e.clusters == e.n {
            format!("all {} task values are identical", e.n)
        } else {
            format!("the {} clusters have identical means", e.clusters)
        };
        w.add(format!("{what}: standard error is 0 ({why}); the 95% interval collapses to a single point"));
        return Some((e.mean, e.mean));
    }
    Some(t_interval(0.95, e.df, e.mean, se))
}

/// Warns about what makes `e`'s error unreliable or missing.
fn check(e: &MeanSe, what: &str, clustered: bool, w: &mut Warnings) {
    if e.se.is_none() {
        w.add(format!("{what}: one {} only, so no standard error", if clustered { "cluster" } else { "task" }));
    } else if clustered && e.clusters < FEW_CLUSTERS {
        w.add(format!(
            "{what}: only {} clusters; CR1 errors understate the noise with fewer than about {FEW_CLUSTERS}, so the standard error is CR2 with Bell-McCaffrey degrees of freedom ({:.1})",
            e.clusters, e.df
        ));
    }
    if !e.mean.is_finite() {
        w.add(format!("{what}: the mean is not finite (some task values are infinite or too large)"));
    }
}

/// `e` with the small-sample correction when its clusters are few: CR2 error and
/// Bell–McCaffrey degrees of freedom. Whether it was applied.
fn small_sample(e: &mut MeanSe, x: &[f64], ids: Option<&[u32]>) -> bool {
    match ids {
        Some(ids) if e.clusters >= 2 && e.clusters < FEW_CLUSTERS => match cr2(x, ids) {
            Some((se, df)) => {
                e.se = Some(se);
                e.df = df;
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// Whether every value is 0 or 1.
fn binary(x: &[f64]) -> bool {
    x.iter().all(|&v| v == 0.0 || v == 1.0)
}

/// The tasks an estimate like `e` (a mean or a paired difference over tasks, clustered
/// when `clustered`) needs for a two-sided t test at level `alpha` to detect `diff` with
/// 80% power, given its spread: the spread of one task's (or cluster's) value is
/// `se·√units`, the units needed are rounded up, and with clusters they are that many
/// clusters of the present mean size, `n/units` tasks each, rounded up in integers (15 ×
/// 400/3 is 2000, which the float product 2000.0000000000002 would round up to 2001).
/// `None` without a positive standard error or for a zero difference.
pub fn tasks_to_detect(diff: f64, e: &MeanSe, clustered: bool, alpha: f64) -> Option<u64> {
    let units = e.clusters;
    let n = tasks_needed(diff, e.se? * (units as f64).sqrt(), alpha, POWER)?;
    let units_needed = n.ceil();
    Some(if clustered { tasks_of_clusters(units_needed as u64, e.n, units) } else { units_needed as u64 })
}

/// Builds the report: every run summarized, every other run compared with `baseline`.
/// `clustered` says whether the runs were gathered with cluster values.
pub fn report(
    names: &[String],
    runs: &[RunRollouts],
    baseline: usize,
    clustered: bool,
    value: TaskValue,
) -> Result<Report, ClusterConflict> {
    report_with(names, runs, baseline, value, &Options { clustered, ..Options::default() })
}

/// [`report`] with the extras `opts` asks for; with `opts.by`, the comparison is
/// repeated for each group of tasks (the groups' warnings named by group).
pub fn report_with(
    names: &[String],
    runs: &[RunRollouts],
    baseline: usize,
    value: TaskValue,
    opts: &Options,
) -> Result<Report, ClusterConflict> {
    let mut r = one_report(names, runs, baseline, value, opts)?;
    if opts.by {
        let mut groups: Vec<&str> = runs.iter().flat_map(RunRollouts::groups).collect();
        let numeric = groups.iter().all(|g| g.parse::<f64>().is_ok());
        groups.sort_by(|a, b| {
            if numeric {
                a.parse::<f64>().unwrap().total_cmp(&b.parse::<f64>().unwrap())
            } else {
                a.cmp(b)
            }
        });
        groups.dedup();
        for g in groups {
            let sub: Vec<RunRollouts> = runs.iter().map(|run| run.only_group(g)).collect();
            let mut gr = one_report(names, &sub, baseline, value, opts)?;
            for (m, _) in gr.warnings.drain() {
                r.warnings.add(format!("group {g}: {m}"));
            }
            r.groups.push((g.to_string(), gr));
        }
    }
    Ok(r)
}

/// One comparison of `runs` (no groups): each run's summary, then each run paired with
/// the baseline, with Holm's correction over the comparisons.
fn one_report(
    names: &[String],
    runs: &[RunRollouts],
    baseline: usize,
    value: TaskValue,
    opts: &Options,
) -> Result<Report, ClusterConflict> {
    let ids = if opts.clustered { Some(cluster_ids(runs)?) } else { None };
    let setup = Setup { names, runs, baseline, value, opts, ids };
    let mut warnings = Warnings::default();
    // Per run: task → its value, in task order.
    let mut means: Vec<BTreeMap<i64, f64>> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let m = r.task_values(value);
        if let (TaskValue::PassAt(k), true) = (value, m.len() < r.tasks.len()) {
            warnings.add(format!(
                "{}: {} task(s) with fewer than {k} measured rollouts are left out of pass@{k}",
                names[i],
                r.tasks.len() - m.len()
            ));
        }
        means.push(m);
    }
    let summaries: Vec<RunSummary> =
        means.iter().enumerate().map(|(i, m)| setup.summary(i, m, &mut warnings)).collect();
    let mut comparisons: Vec<Comparison> = (0..means.len())
        .filter(|&i| i != baseline)
        .map(|i| setup.comparison(i, &means[baseline], &means[i], &mut warnings))
        .collect();
    if comparisons.len() >= 2 {
        let p: Vec<Option<f64>> = comparisons.iter().map(|c| c.stats.as_ref().and_then(|s| s.p)).collect();
        for (c, h) in comparisons.iter_mut().zip(holm(&p)) {
            c.p_holm = h;
        }
    }
    Ok(Report { runs: summaries, baseline, comparisons, warnings, groups: Vec::new() })
}

/// What every part of one report reads: the runs and their names, the baseline, the
/// value compared, the options and (clustered) each task's cluster.
struct Setup<'a> {
    names: &'a [String],
    runs: &'a [RunRollouts],
    baseline: usize,
    value: TaskValue,
    opts: &'a Options,
    ids: Option<BTreeMap<i64, u32>>,
}

impl Setup<'_> {
    /// The clusters of `tasks`, when clustered.
    fn clusters_of(&self, tasks: impl Iterator<Item = i64>) -> Option<Vec<u32>> {
        self.ids.as_ref().map(|m| tasks.map(|t| m[&t]).collect())
    }

    /// Run `i` alone, over its task values `m`: the mean, its standard error and
    /// interval, and what was left out.
    fn summary(&self, i: usize, m: &BTreeMap<i64, f64>, warnings: &mut Warnings) -> RunSummary {
        let (names, r, clustered) = (self.names, &self.runs[i], self.opts.clustered);
        let x: Vec<f64> = m.values().copied().collect();
        let c = self.clusters_of(m.keys().copied());
        let mut est = mean_se(&x, c.as_deref());
        let cr2_used = est.as_mut().is_some_and(|e| small_sample(e, &x, c.as_deref()));
        let (ci, wilson_used) = run_interval(est.as_ref(), &x, clustered, &names[i], warnings);
        match (&est, self.value) {
            (Some(e), _) => check(e, &names[i], clustered, warnings),
            (None, TaskValue::PassAt(k)) if !r.tasks.is_empty() => warnings.add(format!(
                "{}: no task has {k} measured rollouts (at most {}), so no pass@{k}",
                names[i],
                r.most_per_task()
            )),
            (None, _) => warnings.add(format!("{}: no measured rollout ({} masked)", names[i], r.masked)),
        }
        let repeats = (self.opts.mde && self.value == TaskValue::Mean)
            .then(|| {
                let per_task: Vec<Vec<f64>> = m.keys().map(|t| r.tasks[t].0.iter().map(|v| v.1).collect()).collect();
                repeat_share(&per_task)
            })
            .flatten();
        let summary = RunSummary {
            name: names[i].clone(),
            tasks: m.len(),
            // The measured rollouts of the tasks that count.
            rollouts: r.tasks.iter().filter(|(t, _)| m.contains_key(t)).map(|(_, (v, _))| v.len()).sum(),
            masked: r.masked,
            no_value: r.no_value,
            est,
            ci,
            wilson: wilson_used,
            cr2: cr2_used,
            repeats,
        };
        if r.no_value > 0 {
            warnings.add(format!(
                "{}: {} rollout(s) without a numeric value of the metric are left out",
                names[i], r.no_value
            ));
        }
        summary
    }

    /// Run `i` (task values `m`) paired with the baseline (`base`) over the tasks both
    /// measured: the paired statistics, wins and losses decided exactly, the interval,
    /// the exact tests, the power figures and the largest flips.
    fn comparison(
        &self,
        i: usize,
        base: &BTreeMap<i64, f64>,
        m: &BTreeMap<i64, f64>,
        warnings: &mut Warnings,
    ) -> Comparison {
        let (names, baseline, opts, clustered) = (self.names, self.baseline, self.opts, self.opts.clustered);
        let shared: Vec<i64> = base.keys().filter(|t| m.contains_key(t)).copied().collect();
        let a: Vec<f64> = shared.iter().map(|t| base[t]).collect();
        let b: Vec<f64> = shared.iter().map(|t| m[t]).collect();
        let c = self.clusters_of(shared.iter().copied());
        let mut stats = paired(&a, &b, c.as_deref());
        let d: Vec<f64> = b.iter().zip(&a).map(|(y, x)| y - x).collect();
        // Wins, losses and ties decided exactly (the values stay NeMo Gym's floats).
        let outcome: Vec<Option<std::cmp::Ordering>> = shared
            .iter()
            .zip(a.iter().zip(&b))
            .map(|(t, (&x, &y))| {
                let ex = TaskOrder::of(self.value, &self.runs[baseline].tasks[t].0, x);
                let ey = TaskOrder::of(self.value, &self.runs[i].tasks[t].0, y);
                ey.cmp(ex, (y, x))
            })
            .collect();
        if let Some(p) = stats.as_mut() {
            use std::cmp::Ordering::{Greater, Less};
            p.wins = outcome.iter().filter(|o| **o == Some(Greater)).count();
            p.losses = outcome.iter().filter(|o| **o == Some(Less)).count();
            p.ties = outcome.len() - p.wins - p.losses;
        }
        let mut cr2_used = false;
        if let Some(p) = stats.as_mut() {
            if small_sample(&mut p.diff, &d, c.as_deref()) {
                cr2_used = true;
                p.t = p.diff.se.filter(|&s| s > 0.0 || p.diff.mean != 0.0).map(|s| p.diff.mean / s);
                p.p = p.t.map(|t| t_two_sided_p(t, p.diff.df));
                let ses = |x: &[f64]| c.as_deref().and_then(|ids| cr2(x, ids)).map(|v| v.0);
                p.se_unpaired = ses(&a).zip(ses(&b)).map(|(x, y)| (x * x + y * y).sqrt());
            }
        }
        let what = format!("{} vs {}", names[i], names[baseline]);
        let ci = stats.as_ref().and_then(|p| interval(&p.diff, &what, warnings));
        if let Some(p) = &stats {
            check(&p.diff, &what, clustered, warnings);
        }
        let (only_baseline, only_run) = (base.len() - shared.len(), m.len() - shared.len());
        if stats.is_none() {
            warnings.add(format!(
                "{what}: no task measured by both ({} has {}, {} has {}), so nothing to pair",
                names[baseline],
                base.len(),
                names[i],
                m.len()
            ));
        } else if only_baseline + only_run > 0 {
            warnings.add(format!(
                "{what}: {only_baseline} task(s) measured only by {} and {only_run} only by {} are left out of the paired comparison",
                names[baseline], names[i]
            ));
        }
        let mut distinct: Vec<f64> = d.clone();
        distinct.sort_by(f64::total_cmp);
        distinct.dedup();
        let exact = stats
            .as_ref()
            .filter(|_| distinct.len() <= FEW_VALUES)
            .map(|p| Exact { mcnemar: binary(&a) && binary(&b), p: sign_test(p.wins as u64, p.losses as u64) });
        let mde_v = stats.as_ref().filter(|_| opts.mde).and_then(|p| mde(p.diff.se?, p.diff.df, ALPHA, POWER));
        let needed = match (opts.detect, &stats) {
            (Some(diff), Some(p)) => tasks_to_detect(diff, &p.diff, clustered, ALPHA),
            _ => None,
        };
        let flips = match opts.flips {
            None => Vec::new(),
            Some(k) => self.flips(i, k, &shared, &outcome, (&a, &b), &d),
        };
        Comparison {
            run: i,
            paired_tasks: shared.len(),
            only_baseline,
            only_run,
            unpaired_failed: 0,
            stats,
            ci,
            cr2: cr2_used,
            p_holm: None,
            exact,
            mde: mde_v,
            tasks_needed: needed,
            flips,
        }
    }

    /// The `k` tasks of `shared` whose values (baseline `a`, run `i`'s `b`, the change
    /// `d`) changed the most, among those that won or lost (`outcome`), largest first.
    fn flips(
        &self,
        i: usize,
        k: usize,
        shared: &[i64],
        outcome: &[Option<std::cmp::Ordering>],
        (a, b): (&[f64], &[f64]),
        d: &[f64],
    ) -> Vec<Flip> {
        let mut order: Vec<usize> = (0..shared.len()).filter(|&j| outcome[j].is_some_and(|o| o.is_ne())).collect();
        order.sort_by(|&x, &y| d[y].abs().total_cmp(&d[x].abs()).then(shared[x].cmp(&shared[y])));
        order
            .into_iter()
            .take(k)
            .map(|j| Flip {
                task: shared[j],
                fingerprint: None,
                baseline: a[j],
                run: b[j],
                baseline_scores: self.runs[self.baseline].scores(shared[j]),
                run_scores: self.runs[i].scores(shared[j]),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rows: &[(i64, f64)]) -> RunRollouts {
        let mut r = RunRollouts::default();
        for (ri, &(t, v)) in rows.iter().enumerate() {
            r.add(t, ri as i64, Some(v), false, None).unwrap();
        }
        r
    }

    #[test]
    fn tasks_are_the_unit_and_only_shared_tasks_pair() {
        // Baseline: task 1 twice (mean 0.5), task 2 once (1.0), task 3 (0.0).
        let a = run(&[(1, 0.0), (1, 1.0), (2, 1.0), (3, 0.0)]);
        // Candidate: tasks 1, 2 and 4; a masked and a valueless rollout are not counted.
        let mut b = run(&[(1, 1.0), (2, 1.0), (4, 1.0)]);
        b.add(3, 0, Some(0.0), true, None).unwrap();
        b.add(3, 0, None, false, None).unwrap();
        b.add(3, 0, Some(f64::NAN), false, None).unwrap();
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &[a, b], 0, false, TaskValue::Mean).unwrap();
        assert_eq!((r.runs[0].tasks, r.runs[0].rollouts), (3, 4));
        assert_eq!((r.runs[1].tasks, r.runs[1].rollouts, r.runs[1].masked, r.runs[1].no_value), (3, 3, 1, 2));
        // Mean of task means, not of rollouts: (0.5 + 1 + 0) / 3.
        assert_eq!(r.runs[0].est.unwrap().mean, 0.5);
        let c = &r.comparisons[0];
        assert_eq!((c.run, c.paired_tasks, c.only_baseline, c.only_run), (1, 2, 1, 1));
        let p = c.stats.unwrap();
        // Tasks 1 and 2: differences 0.5 and 0.
        assert_eq!((p.mean_a, p.mean_b, p.diff.mean), (0.75, 1.0, 0.25));
        assert_eq!((p.wins, p.losses, p.ties), (1, 0, 1));
        let lines = r.warnings.lines().join("\n");
        assert!(lines.contains("b vs a: 1 task(s) measured only by a and 1 only by b"), "{lines}");
        assert!(lines.contains("b: 2 rollout(s) without a numeric value"), "{lines}");
    }

    #[test]
    fn repeats_split_into_two_halves_of_every_task() {
        let mut r = run(&[(1, 0.1), (1, 0.2), (1, 0.3), (1, 0.4), (1, 0.5), (2, 0.6), (2, 0.7), (3, 0.8)]);
        r.set_group(1, "x").unwrap();
        let mut rng = crate::generate::rng::Rng::new(7);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..20 {
            let (a, b) = r.split_repeats(&mut rng);
            // Task 3 has one rollout: in neither half.
            assert_eq!(a.task_ids().collect::<Vec<_>>(), vec![1, 2]);
            assert_eq!(b.task_ids().collect::<Vec<_>>(), vec![1, 2]);
            let (x, y) = (&a.tasks[&1].0, &b.tasks[&1].0);
            assert_eq!((x.len(), y.len()), (3, 2));
            let mut all: Vec<i64> = x.iter().chain(y).map(|v| v.0).collect();
            all.sort_unstable();
            assert_eq!(all, vec![0, 1, 2, 3, 4], "every rollout once");
            assert_eq!((a.by.get(&1).map(String::as_str), b.by.get(&1).map(String::as_str)), (Some("x"), Some("x")));
            seen.insert(x.iter().map(|v| v.0).collect::<Vec<_>>());
        }
        assert!(seen.len() > 3, "the splits vary: {seen:?}");
    }

    #[test]
    fn failure_rates_count_failed_over_expected_rollouts() {
        let mut r = run(&[(1, 0.5), (1, 1.0), (2, 0.0)]);
        r.add(2, 9, Some(0.3), true, None).unwrap();
        r.add(3, 9, None, false, None).unwrap();
        let failed: BTreeMap<i64, usize> = [(1, 2), (4, 1)].into_iter().collect();
        let f = r.failure_rates(&failed, false).task_values(TaskValue::Mean);
        // Task 1: 2 rows, 2 failed; 2: a measured and a masked row; 3: a row without a
        // value; 4: only a failure.
        let want: BTreeMap<i64, f64> = [(1, 0.5), (2, 0.0), (3, 0.0), (4, 1.0)].into_iter().collect();
        assert_eq!(f, want);
    }

    #[test]
    fn clustered_tasks_needed_round_up_in_integers() {
        assert_eq!(tasks_of_clusters(15, 400, 3), 2000);
        assert!((15.0 * (400.0_f64 / 3.0)).ceil() > 2000.0, "the float product this replaces");
        assert_eq!(tasks_of_clusters(16, 400, 3), 2134);
        assert_eq!(tasks_of_clusters(7, 70, 7), 70);
    }

    #[test]
    fn equal_means_differ_by_exactly_zero() {
        // The same values on other tasks: the task differences sum to 5.6e-17 when added
        // up, but the runs' totals are equal.
        let a = run(&[(1, 0.7), (2, 0.15), (3, 0.1), (4, 0.6)]);
        let b = run(&[(1, 0.7), (2, 0.1), (3, 0.6), (4, 0.15)]);
        let d = [0.0, 0.1 - 0.15, 0.6 - 0.1, 0.15 - 0.6];
        assert_ne!(crate::stats::pairwise_sum(&d), 0.0, "the rounding this guards against");
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &[a, b], 0, false, TaskValue::Mean).unwrap();
        let p = r.comparisons[0].stats.unwrap();
        assert_eq!((p.diff.mean, p.t, p.p), (0.0, Some(0.0), Some(1.0)));
    }

    #[test]
    fn equal_pass_at_k_values_tie_exactly() {
        // pass@1 of 1, 0, 0 is 1/3, which NeMo Gym's 1 − 2/3 gives as 0.33333333333333337;
        // a task scored 1/3 (not 0/1, so its first value) holds 0.3333333333333333.
        let scored = run(&[(1, 1.0 / 3.0)]);
        let binary = run(&[(1, 1.0), (1, 0.0), (1, 0.0)]);
        let names = ["a".to_string(), "b".to_string()];
        let f = |r: &RunRollouts| r.task_values(TaskValue::PassAt(1))[&1];
        assert_ne!(f(&scored), f(&binary), "the rounding this guards against");
        let r = report(&names, &[scored.clone(), binary.clone()], 0, false, TaskValue::PassAt(1)).unwrap();
        let p = r.comparisons[0].stats.unwrap();
        assert_eq!((p.wins, p.losses, p.ties), (0, 0, 1));
        // Two binary tasks with the same fraction over other counts tie: pass@2 with 3 of
        // 4 rollouts failed and with 15 of 21 failed are both 1 − 1/2. A real difference
        // still counts.
        let tries =
            |n: usize, failed: usize| run(&(0..n).map(|i| (1, if i < failed { 0.0 } else { 1.0 })).collect::<Vec<_>>());
        let r = report(&names, &[tries(4, 3), tries(21, 15)], 0, false, TaskValue::PassAt(2)).unwrap();
        let p = r.comparisons[0].stats.unwrap();
        assert_eq!((p.wins, p.losses, p.ties), (0, 0, 1));
        let r = report(&names, &[tries(4, 2), binary], 0, false, TaskValue::PassAt(2)).unwrap();
        let p = r.comparisons[0].stats.unwrap();
        assert_eq!((p.wins, p.losses, p.ties), (0, 1, 0));
    }

    #[test]
    fn a_task_mean_does_not_depend_on_rollout_order() {
        // The same values in two orders; a left-to-right or pairwise sum rounds them
        // differently, which would turn equal tasks into wins and losses.
        let a = run(&[(1, 0.1), (1, 0.2), (1, 0.3), (2, 0.7), (2, 0.1), (2, 0.2)]);
        let b = run(&[(1, 0.3), (1, 0.2), (1, 0.1), (2, 0.2), (2, 0.1), (2, 0.7)]);
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &[a, b], 0, false, TaskValue::Mean).unwrap();
        let p = r.comparisons[0].stats.unwrap();
        assert_eq!((p.wins, p.losses, p.ties, p.diff.mean, p.t), (0, 0, 2, 0.0, None));
        assert!(r.warnings.lines().join("\n").contains("all 2 task values are identical"), "{:?}", r.warnings);
    }

    #[test]
    fn pass_at_k_reads_values_in_rollout_order() {
        // Non-binary scores: the best of the first k by rollout index, whatever the
        // order of the lines. Binary: the unbiased estimator; too few values: left out.
        let mut a = RunRollouts::default();
        for (ri, v) in [(2, 0.9), (0, 0.1), (1, 0.5)] {
            a.add(1, ri, Some(v), false, None).unwrap();
        }
        for (ri, v) in [(0, 1.0), (1, 0.0), (2, 0.0), (3, 1.0)] {
            a.add(2, ri, Some(v), false, None).unwrap();
        }
        a.add(3, 0, Some(1.0), false, None).unwrap();
        let b = a.clone();
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &[a, b.clone()], 0, false, TaskValue::PassAt(2)).unwrap();
        // Task 1: max(0.1, 0.5); task 2: 1 - C(2,2)/C(4,2) = 5/6; task 3 has one value.
        assert_eq!(r.runs[0].tasks, 2);
        assert_eq!(r.runs[0].est.unwrap().mean, (0.5 + 5.0 / 6.0) / 2.0);
        assert!(r
            .warnings
            .lines()
            .join("\n")
            .contains("a: 1 task(s) with fewer than 2 measured rollouts are left out of pass@2"));
        // A run none of whose tasks has k rollouts is named as such.
        let short = run(&[(1, 1.0), (2, 0.0)]);
        let r = report(&names, &[short, b], 0, false, TaskValue::PassAt(2)).unwrap();
        assert!(r.runs[0].est.is_none());
        let text = r.warnings.lines().join("\n");
        assert!(text.contains("a: no task has 2 measured rollouts (at most 1), so no pass@2"), "{text}");
    }

    #[test]
    fn few_clusters_and_zero_spread_are_named() {
        let mut a = RunRollouts::default();
        let mut b = RunRollouts::default();
        for t in 0..8 {
            let c = if t < 4 { "x" } else { "y" };
            a.add(t, 0, Some((t % 2) as f64), false, Some(Some(c))).unwrap();
            b.add(t, 0, Some(((t + 1) % 2) as f64), false, Some(Some(c))).unwrap();
        }
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &[a, b], 0, true, TaskValue::Mean).unwrap();
        let text = r.warnings.lines().join("\n");
        assert!(text.contains("b vs a: standard error is 0 (the 2 clusters have identical means)"), "{text}");
        assert!(text.contains("a: only 2 clusters"), "{text}");
    }

    #[test]
    fn clusters_must_hold_whole_tasks() {
        let mut r = RunRollouts::default();
        r.add(1, 0, Some(1.0), false, Some(Some("x"))).unwrap();
        assert_eq!(r.add(2, 0, Some(1.0), false, Some(None)), Err(ClusterProblem::Missing));
        assert_eq!(
            r.add(1, 1, Some(0.0), false, Some(Some("y"))),
            Err(ClusterProblem::Differs { first: "x".into(), then: "y".into() })
        );
        // A masked rollout is not measured, so its cluster value is not looked at.
        r.add(1, 0, Some(0.0), true, Some(None)).unwrap();
        // Two runs that put task 1 in different clusters.
        let mut other = RunRollouts::default();
        other.add(1, 0, Some(0.0), false, Some(Some("z"))).unwrap();
        let names = ["a".to_string(), "b".to_string()];
        let e = report(&names, &[r, other], 0, true, TaskValue::Mean).unwrap_err();
        assert_eq!(e, (1, 0, "x".into(), 1, "z".into()));
    }

    #[test]
    fn few_clusters_use_cr2_with_bell_mccaffrey_df() {
        let mut a = RunRollouts::default();
        let mut b = RunRollouts::default();
        for t in 0..12 {
            let c = format!("c{}", t % 3);
            a.add(t, 0, Some((t % 4) as f64 / 4.0), false, Some(Some(&c))).unwrap();
            b.add(t, 0, Some((t % 5) as f64 / 4.0), false, Some(Some(&c))).unwrap();
        }
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &[a, b], 0, true, TaskValue::Mean).unwrap();
        let c = &r.comparisons[0];
        let p = c.stats.unwrap();
        // Three equal clusters: Bell-McCaffrey df is G - 1 (up to rounding), CR2 = CR1.
        assert!(c.cr2 && r.runs[0].cr2);
        assert!((p.diff.df - 2.0).abs() < 1e-12, "{}", p.diff.df);
        let (lo, hi) = c.ci.unwrap();
        let half = crate::stats::t_ppf(0.975, p.diff.df) * p.diff.se.unwrap();
        assert!((lo - (p.diff.mean - half)).abs() < 1e-15 && (hi - (p.diff.mean + half)).abs() < 1e-15);
        assert!(r.warnings.lines().join("\n").contains("so the standard error is CR2"));
    }

    fn binary_pair(wins: usize, losses: usize, ties: usize) -> [RunRollouts; 2] {
        let mut a = RunRollouts::default();
        let mut b = RunRollouts::default();
        for t in 0..(wins + losses + ties) as i64 {
            let (x, y) = if (t as usize) < wins {
                (0.0, 1.0)
            } else if (t as usize) < wins + losses {
                (1.0, 0.0)
            } else {
                ((t % 2) as f64, (t % 2) as f64)
            };
            a.add(t, 0, Some(x), false, None).unwrap();
            b.add(t, 0, Some(y), false, None).unwrap();
        }
        [a, b]
    }

    #[test]
    fn binary_scores_get_mcnemar_beside_the_t_test() {
        // 7 wins and 1 loss out of 30 tasks: t test 0.031, exact McNemar 0.070.
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &binary_pair(7, 1, 22), 0, false, TaskValue::Mean).unwrap();
        let c = &r.comparisons[0];
        assert!((c.stats.unwrap().p.unwrap() - 0.031).abs() < 5e-4, "{:?}", c.stats);
        assert_eq!(c.exact, Some(Exact { mcnemar: true, p: 18.0 / 256.0 }));
    }

    #[test]
    fn a_constant_difference_gets_a_sign_test() {
        let mut a = RunRollouts::default();
        let mut b = RunRollouts::default();
        for t in 0..3 {
            a.add(t, 0, Some(0.25), false, None).unwrap();
            b.add(t, 0, Some(0.75), false, None).unwrap();
        }
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &[a, b], 0, false, TaskValue::Mean).unwrap();
        let c = &r.comparisons[0];
        assert_eq!(c.stats.unwrap().p, Some(0.0));
        assert_eq!(c.exact, Some(Exact { mcnemar: false, p: 0.25 }));
    }

    #[test]
    fn zero_one_runs_get_wilson_intervals() {
        let mut a = RunRollouts::default();
        let mut b = RunRollouts::default();
        for t in 0..133 {
            a.add(t, 0, Some(1.0), false, None).unwrap();
            b.add(t, 0, Some(0.5), false, None).unwrap();
        }
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &[a, b], 0, false, TaskValue::Mean).unwrap();
        let (lo, hi) = r.runs[0].ci.unwrap();
        assert!(r.runs[0].wilson && !r.runs[1].wilson);
        assert_eq!(((lo * 1000.0).round() / 1000.0, hi), (0.972, 1.0));
        // Not a collapsed interval, so no warning about one.
        assert!(
            !r.warnings.lines().iter().any(|l| l.starts_with("warning: a: standard error is 0")),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn holm_adjusts_over_the_candidates() {
        let [a, b] = binary_pair(7, 1, 22);
        let [_, c] = binary_pair(2, 6, 22);
        let names = ["a".to_string(), "b".to_string(), "c".to_string()];
        let r = report(&names, &[a, b, c], 0, false, TaskValue::Mean).unwrap();
        let p: Vec<Option<f64>> = r.comparisons.iter().map(|c| c.stats.unwrap().p).collect();
        let want = crate::stats::holm::holm(&p);
        assert_eq!(r.comparisons.iter().map(|c| c.p_holm).collect::<Vec<_>>(), want);
        // With one candidate there is no family.
        let r = report(&names[..2], &binary_pair(7, 1, 22), 0, false, TaskValue::Mean).unwrap();
        assert_eq!(r.comparisons[0].p_holm, None);
    }

    #[test]
    fn flips_are_the_largest_changes_with_scores_in_rollout_order() {
        let mut a = RunRollouts::default();
        let mut b = RunRollouts::default();
        for (t, x, y) in [(1, [0.0, 0.0], [1.0, 1.0]), (2, [1.0, 0.0], [1.0, 1.0]), (3, [1.0, 1.0], [1.0, 1.0])] {
            for (ri, (&u, &v)) in x.iter().zip(&y).enumerate().rev() {
                a.add(t, ri as i64, Some(u), false, None).unwrap();
                b.add(t, ri as i64 + 10, Some(v), false, None).unwrap();
            }
        }
        let names = ["a".to_string(), "b".to_string()];
        let opts = Options { flips: Some(5), ..Options::default() };
        let r = report_with(&names, &[a, b], 0, TaskValue::Mean, &opts).unwrap();
        let f = &r.comparisons[0].flips;
        // Task 3 did not change; task 1 changed most.
        assert_eq!(f.iter().map(|f| f.task).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!((f[1].baseline_scores.clone(), f[1].run_scores.clone()), (vec![1.0, 0.0], vec![1.0, 1.0]));
    }

    /// The per-group comparisons of `--by` against scipy's `ttest_rel` on each group's
    /// tasks (`compare_ref.tsv`, `by` rows).
    #[test]
    fn groups_match_scipy_per_group() {
        use crate::stats::test_data::{agree, compare_ref};
        let names = ["a".to_string(), "b".to_string()];
        let cases = compare_ref("by");
        let mut worst = 0.0f64;
        for c in &cases {
            let (x, y, g, want_g) = (&c.parts[0], &c.parts[1], &c.parts[2], c.parts[3][0]);
            let mut a = RunRollouts::default();
            let mut b = RunRollouts::default();
            for t in 0..x.len() {
                let label = format!("{}", g[t]);
                a.add(t as i64, 0, Some(x[t]), false, None).unwrap();
                b.add(t as i64, 0, Some(y[t]), false, None).unwrap();
                a.set_group(t as i64, &label).unwrap();
                b.set_group(t as i64, &label).unwrap();
            }
            let opts = Options { by: true, ..Options::default() };
            let r = report_with(&names, &[a, b], 0, TaskValue::Mean, &opts).unwrap();
            assert_eq!(r.groups.len(), 3);
            let (_, gr) = r.groups.iter().find(|(name, _)| *name == format!("{want_g}")).unwrap();
            let cmp = &gr.comparisons[0];
            let p = cmp.stats.unwrap();
            let got =
                [p.diff.mean, p.diff.se.unwrap(), p.t.unwrap(), p.p.unwrap(), cmp.ci.unwrap().0, cmp.ci.unwrap().1];
            for (k, (g, w)) in got.iter().zip(&c.expected).enumerate() {
                worst = worst.max(agree(*g, *w, 1e-12, 1e-3, &format!("{} value {k}", c.case)).1);
            }
        }
        eprintln!("by: max rel diff {worst:e}");
    }
}
