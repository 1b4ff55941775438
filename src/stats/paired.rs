//! Standard errors of eval means when the *task* is the unit that was sampled, and
//! paired comparisons of two runs on the same tasks.
//!
//! An eval score is a mean over tasks drawn from some population of possible tasks; its
//! noise is the task-to-task spread, not the rollout-to-rollout one. So each run is first
//! reduced to one value per task (the mean of that task's repeats, which also removes most
//! of the repeat-to-repeat noise), and the standard error is taken over those values.
//! Tasks that were written together (questions on one passage, variants of one problem)
//! are not independent; their errors are *clustered* at that group. Two runs on the same
//! tasks are compared by their per-task *differences*, which removes the task difficulty
//! both share: the paired standard error is usually far smaller than the unpaired one.
//! (The framing follows E. Miller, "Adding Error Bars to Evals", 2024, §2–§4.)
//!
//! Formulas, for per-task values `x_1..x_n` with mean `x̄` and residuals `e_i = x_i − x̄`:
//!
//! - unclustered: `se = sd(x, ddof = 1) / sqrt(n)`, with `n − 1` degrees of freedom;
//! - clustered in `G` clusters `g`:
//!   `se = sqrt(G / (G − 1) · Σ_g (Σ_{i∈g} e_i)²) / n`, with `G − 1` degrees of freedom.
//!   This is the cluster-robust (CR1) variance of an intercept-only least-squares fit,
//!   what statsmodels' `OLS(x, 1).fit(cov_type="cluster")` reports (its `(n−1)/(n−k)`
//!   factor is 1 for one regressor); with one task per cluster it equals the unclustered
//!   `se` exactly.
//! - a paired comparison is the above applied to `d_i = b_i − a_i`; its t statistic
//!   `d̄ / se` and two-sided p-value are scipy's `ttest_rel(b, a)` when unclustered.
//!
//! Sums are numpy-ordered (pairwise), so results match a numpy computation to the last
//! bits or nearly.

use super::sum::pairwise_sum;

/// The mean of per-task values with its standard error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeanSe {
    /// Number of tasks.
    pub n: usize,
    /// Number of clusters (`n` when unclustered).
    pub clusters: usize,
    pub mean: f64,
    /// Standard error of `mean`; `None` with fewer than two tasks or clusters.
    pub se: Option<f64>,
    /// Degrees of freedom of the t interval and test: `clusters − 1`.
    pub df: f64,
}

/// Mean and standard error of `x`, clustered by `cluster` (one id per value, any
/// numbering) when given. `None` for no values.
///
/// # Panics
/// When `cluster` is given with a length other than `x`'s.
pub fn mean_se(x: &[f64], cluster: Option<&[u32]>) -> Option<MeanSe> {
    if x.is_empty() {
        return None;
    }
    mean_se_at(x, cluster, pairwise_sum(x) / x.len() as f64)
}

/// [`mean_se`] about a mean the caller computed (more exactly than the values' own
/// pairwise sum can: see [`paired`]).
fn mean_se_at(x: &[f64], cluster: Option<&[u32]>, mean: f64) -> Option<MeanSe> {
    let n = x.len();
    if n == 0 {
        return None;
    }
    let resid: Vec<f64> = x.iter().map(|v| v - mean).collect();
    let (clusters, sum_sq) = match cluster {
        None => (n, pairwise_sum(&resid.iter().map(|e| e * e).collect::<Vec<_>>())),
        Some(ids) => {
            assert_eq!(ids.len(), n, "one cluster id per value");
            // Residual sums per cluster, the clusters in order of first appearance.
            let mut slot: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
            let mut members: Vec<Vec<f64>> = Vec::new();
            for (&id, &e) in ids.iter().zip(&resid) {
                let s = *slot.entry(id).or_insert_with(|| {
                    members.push(Vec::new());
                    members.len() - 1
                });
                members[s].push(e);
            }
            let sq: Vec<f64> = members
                .iter()
                .map(|m| {
                    let s = pairwise_sum(m);
                    s * s
                })
                .collect();
            (members.len(), pairwise_sum(&sq))
        }
    };
    let g = clusters as f64;
    let se = (clusters >= 2).then(|| {
        if cluster.is_none() {
            // sd(ddof=1)/sqrt(n), written as numpy's std would compute it.
            (sum_sq / (g - 1.0)).sqrt() / (n as f64).sqrt()
        } else {
            (g / (g - 1.0) * sum_sq).sqrt() / n as f64
        }
    });
    Some(MeanSe { n, clusters, mean, se, df: g - 1.0 })
}

/// A comparison of run `b` against run `a` on the same tasks (`a[i]` and `b[i]` are one
/// task's values).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Paired {
    /// Mean of `a`, mean of `b`, over the paired tasks.
    pub mean_a: f64,
    pub mean_b: f64,
    /// `mean(b − a)` with its (clustered) standard error, clusters and degrees of freedom.
    pub diff: MeanSe,
    /// `diff.mean / se` (±inf for a constant non-zero difference, as scipy gives it);
    /// `None` without a standard error, or when the difference is 0 with no spread.
    pub t: Option<f64>,
    /// Two-sided p-value of `t` with `diff.df` degrees of freedom.
    pub p: Option<f64>,
    /// The standard error the difference would have if the runs were on independent
    /// task samples: `sqrt(se_a² + se_b²)`, for showing what pairing gained.
    pub se_unpaired: Option<f64>,
    /// Pearson correlation of `a` and `b` across tasks (`None` when either is constant).
    pub correlation: Option<f64>,
    /// Tasks where `b > a`, `b < a`, `b == a`.
    pub wins: usize,
    pub losses: usize,
    pub ties: usize,
}

/// Compares `b` against `a` task by task. `None` for no tasks.
///
/// # Panics
/// When the slices (and `cluster`, when given) differ in length.
pub fn paired(a: &[f64], b: &[f64], cluster: Option<&[u32]>) -> Option<Paired> {
    assert_eq!(a.len(), b.len(), "one value per task in each run");
    let d: Vec<f64> = b.iter().zip(a).map(|(y, x)| y - x).collect();
    if d.is_empty() {
        return None;
    }
    // The mean difference as (Σb − Σa)/n summed exactly (each d_i is rounded): runs
    // with equal means differ by exactly 0, not by the rounding of the d_i (−1.6e-17).
    let exact = super::sum::fsum(b.iter().copied().chain(a.iter().map(|x| -x))) / d.len() as f64;
    let diff = mean_se_at(&d, cluster, exact)?;
    let ea = mean_se(a, cluster)?;
    let eb = mean_se(b, cluster)?;
    let t = diff.se.filter(|&s| s > 0.0 || diff.mean != 0.0).map(|s| diff.mean / s);
    let p = t.map(|t| super::t_two_sided_p(t, diff.df));
    let se_unpaired = ea.se.zip(eb.se).map(|(x, y)| (x * x + y * y).sqrt());
    let mut wins = 0;
    let mut losses = 0;
    for (x, y) in a.iter().zip(b) {
        if y > x {
            wins += 1;
        } else if y < x {
            losses += 1;
        }
    }
    Some(Paired {
        mean_a: ea.mean,
        mean_b: eb.mean,
        diff,
        t,
        p,
        se_unpaired,
        correlation: pearson(a, b),
        wins,
        losses,
        ties: a.len() - wins - losses,
    })
}

/// Pearson correlation of `x` and `y`; `None` with fewer than two values or when either
/// is constant.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len();
    if n < 2 || y.len() != n {
        return None;
    }
    let mx = pairwise_sum(x) / n as f64;
    let my = pairwise_sum(y) / n as f64;
    let dx: Vec<f64> = x.iter().map(|v| v - mx).collect();
    let dy: Vec<f64> = y.iter().map(|v| v - my).collect();
    let sxy = pairwise_sum(&dx.iter().zip(&dy).map(|(a, b)| a * b).collect::<Vec<_>>());
    let sxx = pairwise_sum(&dx.iter().map(|a| a * a).collect::<Vec<_>>());
    let syy = pairwise_sum(&dy.iter().map(|b| b * b).collect::<Vec<_>>());
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    Some((sxy / (sxx.sqrt() * syy.sqrt())).clamp(-1.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::super::test_data::py_float;
    use super::*;

    fn close(got: Option<f64>, want: &str, what: &str) {
        let want = py_float(want);
        match got {
            None => assert!(want.is_nan(), "{what}: got none, want {want}"),
            Some(g) => {
                let tol = 1e-12 * want.abs().max(1e-3);
                assert!((g - want).abs() <= tol, "{what}: got {g:e}, want {want:e}");
            }
        }
    }

    /// Each case of `paired_ref.tsv` (scipy's `sem`/`ttest_rel`/`pearsonr`, statsmodels'
    /// cluster-robust OLS) agrees with [`mean_se`] and [`paired`].
    #[test]
    fn matches_scipy_and_statsmodels() {
        let text = include_str!("paired_ref.tsv");
        let mut seen = 0;
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = line.split('\t').collect();
            let nums = |s: &str| s.split(',').map(py_float).collect::<Vec<f64>>();
            let (a, b) = (nums(f[1]), nums(f[2]));
            let ids: Option<Vec<u32>> =
                (!f[3].is_empty()).then(|| f[3].split(',').map(|s| s.parse().unwrap()).collect());
            let c = ids.as_deref();
            let p = paired(&a, &b, c).unwrap();
            let case = f[0];
            assert_eq!(p.diff.clusters.to_string(), f[4], "{case}");
            assert_eq!(p.diff.df, p.diff.clusters as f64 - 1.0, "{case}");
            close(Some(p.mean_a), f[5], &format!("{case} mean_a"));
            close(Some(p.mean_b), f[6], &format!("{case} mean_b"));
            close(Some(p.diff.mean), f[7], &format!("{case} diff"));
            close(mean_se(&a, c).unwrap().se, f[8], &format!("{case} se_a"));
            close(mean_se(&b, c).unwrap().se, f[9], &format!("{case} se_b"));
            close(p.diff.se, f[10], &format!("{case} se_diff"));
            close(p.t, f[11], &format!("{case} t"));
            let want_p = py_float(f[12]);
            let got_p = p.p.unwrap();
            assert!((got_p - want_p).abs() <= 1e-11 * want_p, "{case} p: got {got_p:e}, want {want_p:e}");
            close(p.correlation, f[13], &format!("{case} pearson"));
            seen += 1;
        }
        assert_eq!(seen, 6);
    }

    #[test]
    fn one_task_per_cluster_is_the_unclustered_error() {
        let x = [0.1, 0.9, 0.4, 0.4, 0.75, 0.0, 1.0];
        let ids: Vec<u32> = (0..7).rev().collect();
        let plain = mean_se(&x, None).unwrap();
        let clustered = mean_se(&x, Some(&ids)).unwrap();
        let (s1, s2) = (plain.se.unwrap(), clustered.se.unwrap());
        assert!((s1 - s2).abs() <= 1e-15 * s1, "{s1} vs {s2}");
        assert_eq!((plain.df, clustered.df), (6.0, 6.0));
    }

    #[test]
    fn hand_worked_clusters() {
        // Mean 0.5; residuals -0.5, 0.5 | 0.25, -0.25 | 0.0: cluster sums 0, 0, 0 → se 0.
        let x = [0.0, 1.0, 0.75, 0.25, 0.5];
        let e = mean_se(&x, Some(&[1, 1, 2, 2, 3])).unwrap();
        assert_eq!((e.mean, e.se, e.clusters), (0.5, Some(0.0), 3));
        // Mean 0.5; clusters {0, 0, 0.5} and {1, 1} have residual sums -1 and 1:
        // se = sqrt(2/1 · (1 + 1)) / 5 = 0.4.
        let y = [0.0, 0.0, 1.0, 1.0, 0.5];
        let e = mean_se(&y, Some(&[7, 7, 9, 9, 7])).unwrap();
        assert_eq!(e.clusters, 2);
        assert!((e.se.unwrap() - 0.4).abs() < 1e-15);
        // One cluster, or one task: no standard error.
        assert_eq!(mean_se(&y, Some(&[3; 5])).unwrap().se, None);
        assert_eq!(mean_se(&[0.3], None).unwrap().se, None);
        assert_eq!(mean_se(&[], None), None);
    }

    #[test]
    fn wins_losses_ties_and_degenerate_pairs() {
        let a = [0.0, 0.5, 1.0, 1.0];
        let b = [1.0, 0.5, 0.0, 1.0];
        let p = paired(&a, &b, None).unwrap();
        assert_eq!((p.wins, p.losses, p.ties), (1, 1, 2));
        // Identical runs: difference 0 with standard error 0, so no t and no p-value.
        let same = paired(&a, &a, None).unwrap();
        assert_eq!((same.diff.mean, same.diff.se, same.t, same.p), (0.0, Some(0.0), None, None));
        assert_eq!(same.correlation, Some(1.0));
        // A constant non-zero difference: t = inf and p = 0, as scipy's ttest_rel.
        let up: Vec<f64> = a.iter().map(|x| x + 0.5).collect();
        let shifted = paired(&a, &up, None).unwrap();
        assert_eq!((shifted.diff.se, shifted.t, shifted.p), (Some(0.0), Some(f64::INFINITY), Some(0.0)));
    }

    #[test]
    fn two_sided_p_values() {
        use super::super::t_two_sided_p;
        assert_eq!(t_two_sided_p(0.0, 5.0), 1.0);
        assert_eq!(t_two_sided_p(f64::INFINITY, 5.0), 0.0);
        assert!(t_two_sided_p(1.0, 0.0).is_nan());
        // df = 1 is the Cauchy distribution: P(|T| > 1) = 1/2 exactly.
        assert!((t_two_sided_p(1.0, 1.0) - 0.5).abs() < 1e-15);
        assert!((t_two_sided_p(-1.0, 1.0) - 0.5).abs() < 1e-15);
        // The normal limit: P(|Z| > 1.959963984540054) = 0.05.
        assert!((t_two_sided_p(1.959963984540054, f64::INFINITY) - 0.05).abs() < 1e-15);
        // At the 0.975 quantile the two-sided p-value is 0.05, for any df.
        for df in [2.0, 3.0, 7.5, 30.0, 1e3, 1e6] {
            let q = super::super::t_ppf(0.975, df);
            let p = t_two_sided_p(q, df);
            assert!((p - 0.05).abs() < 1e-13, "df {df}: {p}");
        }
    }
}
