//! `compare`: each run's mean score with a task-level standard error, and every run
//! against a baseline run, paired on the tasks both measured (see [`crate::stats::paired`]
//! for the statistics and why the task is the unit).
//!
//! A run's value for a task is the mean of the metric over that task's *measured*
//! rollouts: not masked (`mask_sample`), with a numeric, non-NaN value — or, with
//! [`TaskValue::PassAt`], the task's pass@k as NeMo Gym computes it. A run's score is
//! the mean of its task values (each task weighs the same, however many repeats it has).
//! With a cluster field, every measured rollout of a task must carry the same value of
//! it (in every run); tasks are then clustered by it.

use std::collections::BTreeMap;

use super::pass_at_k::{task_pass_at_k, Score};
use super::warnings::Warnings;
use crate::stats::paired::{mean_se, paired, MeanSe, Paired};
use crate::stats::{fsum, t_interval};

/// Fewer clusters than this get a warning: cluster-robust errors are too small, and
/// their intervals too narrow, with few clusters (Cameron & Miller, "A Practitioner's
/// Guide to Cluster-Robust Inference", 2015, §VI).
pub const FEW_CLUSTERS: usize = 20;

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
            return Ok(());
        }
        let Some(v) = value.filter(|v| !v.is_nan()) else {
            self.no_value += 1;
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

    /// The most measured rollouts any one task has.
    pub fn most_per_task(&self) -> usize {
        self.tasks.values().map(|(v, _)| v.len()).max().unwrap_or(0)
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
    /// 95% t interval around the mean.
    pub ci: Option<(f64, f64)>,
}

/// One run against the baseline.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub run: usize,
    /// Tasks both measured, and tasks only one of them measured (left out).
    pub paired_tasks: usize,
    pub only_baseline: usize,
    pub only_run: usize,
    /// `None` when the two runs share no task.
    pub stats: Option<Paired>,
    /// 95% t interval around the difference (run − baseline).
    pub ci: Option<(f64, f64)>,
}

/// What `compare` reports.
#[derive(Debug, Clone)]
pub struct Report {
    pub runs: Vec<RunSummary>,
    pub baseline: usize,
    pub comparisons: Vec<Comparison>,
    pub warnings: Warnings,
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

/// The interval around `e`'s mean, warning when its standard error is 0 (the interval
/// is then the point itself, as rollstat does for the other levels).
fn interval(e: &MeanSe, what: &str, w: &mut Warnings) -> Option<(f64, f64)> {
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
            "{what}: only {} clusters; cluster-robust standard errors understate the noise with fewer than about {FEW_CLUSTERS}, so read the interval and p-value as optimistic",
            e.clusters
        ));
    }
    if !e.mean.is_finite() {
        w.add(format!("{what}: the mean is not finite (some task values are infinite or too large)"));
    }
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
    let ids = if clustered { Some(cluster_ids(runs)?) } else { None };
    let mut warnings = Warnings::default();
    // Per run: task → its value, in task order.
    let mut means: Vec<BTreeMap<i64, f64>> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let m: BTreeMap<i64, f64> = r.tasks.iter().filter_map(|(&t, (v, _))| Some((t, value.of(v)?))).collect();
        if let (TaskValue::PassAt(k), true) = (value, m.len() < r.tasks.len()) {
            warnings.add(format!(
                "{}: {} task(s) with fewer than {k} measured rollouts are left out of pass@{k}",
                names[i],
                r.tasks.len() - m.len()
            ));
        }
        means.push(m);
    }
    let clusters_of = |tasks: &mut dyn Iterator<Item = i64>| -> Option<Vec<u32>> {
        ids.as_ref().map(|m| tasks.map(|t| m[&t]).collect())
    };
    let mut summaries = Vec::new();
    for (i, (m, r)) in means.iter().zip(runs).enumerate() {
        let x: Vec<f64> = m.values().copied().collect();
        let c = clusters_of(&mut m.keys().copied());
        let est = mean_se(&x, c.as_deref());
        let ci = est.as_ref().and_then(|e| interval(e, &names[i], &mut warnings));
        match (&est, value) {
            (Some(e), _) => check(e, &names[i], clustered, &mut warnings),
            (None, TaskValue::PassAt(k)) if !r.tasks.is_empty() => warnings.add(format!(
                "{}: no task has {k} measured rollouts (at most {}), so no pass@{k}",
                names[i],
                r.most_per_task()
            )),
            (None, _) => warnings.add(format!("{}: no measured rollout ({} masked)", names[i], r.masked)),
        }
        summaries.push(RunSummary {
            name: names[i].clone(),
            tasks: m.len(),
            // The measured rollouts of the tasks that count.
            rollouts: r.tasks.iter().filter(|(t, _)| m.contains_key(t)).map(|(_, (v, _))| v.len()).sum(),
            masked: r.masked,
            no_value: r.no_value,
            est,
            ci,
        });
        if r.no_value > 0 {
            warnings.add(format!(
                "{}: {} rollout(s) without a numeric value of the metric are left out",
                names[i], r.no_value
            ));
        }
    }
    let base = &means[baseline];
    let mut comparisons = Vec::new();
    for (i, m) in means.iter().enumerate() {
        if i == baseline {
            continue;
        }
        let shared: Vec<i64> = base.keys().filter(|t| m.contains_key(t)).copied().collect();
        let a: Vec<f64> = shared.iter().map(|t| base[t]).collect();
        let b: Vec<f64> = shared.iter().map(|t| m[t]).collect();
        let c = clusters_of(&mut shared.iter().copied());
        let stats = paired(&a, &b, c.as_deref());
        let what = format!("{} vs {}", names[i], names[baseline]);
        let ci = stats.as_ref().and_then(|p| interval(&p.diff, &what, &mut warnings));
        if let Some(p) = &stats {
            check(&p.diff, &what, clustered, &mut warnings);
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
        comparisons.push(Comparison { run: i, paired_tasks: shared.len(), only_baseline, only_run, stats, ci });
    }
    Ok(Report { runs: summaries, baseline, comparisons, warnings })
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
    fn clustered_comparison_uses_cluster_degrees_of_freedom() {
        let mut a = RunRollouts::default();
        let mut b = RunRollouts::default();
        for t in 0..12 {
            let c = format!("c{}", t % 3);
            a.add(t, 0, Some((t % 4) as f64 / 4.0), false, Some(Some(&c))).unwrap();
            b.add(t, 0, Some((t % 5) as f64 / 4.0), false, Some(Some(&c))).unwrap();
        }
        let names = ["a".to_string(), "b".to_string()];
        let r = report(&names, &[a, b], 0, true, TaskValue::Mean).unwrap();
        assert_eq!((r.runs[0].est.unwrap().clusters, r.runs[0].est.unwrap().df), (3, 2.0));
        let p = r.comparisons[0].stats.unwrap();
        assert_eq!((p.diff.clusters, p.diff.df), (3, 2.0));
        let (lo, hi) = r.comparisons[0].ci.unwrap();
        let half = crate::stats::t_ppf(0.975, 2.0) * p.diff.se.unwrap();
        assert!((lo - (p.diff.mean - half)).abs() < 1e-15 && (hi - (p.diff.mean + half)).abs() < 1e-15);
    }
}
