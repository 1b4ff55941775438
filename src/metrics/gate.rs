//! `gate`: a release decision from a comparison. Each check tests one estimate that
//! `compare` computed (a paired difference, candidate − baseline, or a candidate's own
//! mean) against a margin or a bound, and says PASS, FAIL or INCONCLUSIVE; a failed
//! advisory check says WARN.
//!
//! The tests are one-sided t tests on the estimate's own standard error and degrees of
//! freedom (clustered, CR2 below 20 clusters, exactly as `compare` has them). On the
//! scale where more is better (the difference negated when lower is better):
//!
//! - superiority, margin `m ≥ 0`: H1 `gain > m`;
//! - non-inferiority, margin `m > 0`: H1 `gain > −m`;
//! - equivalence, margin `m > 0`: TOST, H1 `−m < diff < m`, p the larger of the two
//!   one-sided p-values;
//! - threshold: the candidate's mean, H1 `mean > min` and/or `mean < max` (p the larger).
//!
//! A check passes when its Holm-adjusted p-value is below α (the family: every required
//! check on every candidate and group; advisory checks are a family of their own). It
//! fails when its (1 − 2α) interval — the interval whose ends these one-sided tests at α
//! compare with the margin — lies wholly beyond the margin on the wrong side (for
//! equivalence: wholly outside ±m; for a threshold: wholly outside the bounds). Anything
//! else is inconclusive, and the tasks a decision would take are estimated with
//! `compare`'s power analysis ([`tasks_to_detect`]).

use super::compare::tasks_to_detect;
use crate::stats::holm::holm;
use crate::stats::paired::MeanSe;
use crate::stats::{t_interval, t_upper_p};

/// What a check tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Superiority,
    NonInferiority,
    Equivalence,
    Threshold,
}

impl Kind {
    /// Every kind, in the order the policy documentation lists them.
    pub const ALL: [Kind; 4] = [Kind::Superiority, Kind::NonInferiority, Kind::Equivalence, Kind::Threshold];

    /// The kind's name in a policy file and in every output.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Superiority => "superiority",
            Kind::NonInferiority => "non_inferiority",
            Kind::Equivalence => "equivalence",
            Kind::Threshold => "threshold",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// A check's test: its kind with its margin (in the metric's units, `≥ 0`) or bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rule {
    Superiority { margin: f64 },
    NonInferiority { margin: f64 },
    Equivalence { margin: f64 },
    Threshold { min: Option<f64>, max: Option<f64> },
}

impl Rule {
    pub fn kind(&self) -> Kind {
        match self {
            Rule::Superiority { .. } => Kind::Superiority,
            Rule::NonInferiority { .. } => Kind::NonInferiority,
            Rule::Equivalence { .. } => Kind::Equivalence,
            Rule::Threshold { .. } => Kind::Threshold,
        }
    }

    /// The one-sided hypotheses a PASS needs (each `(bound, above)`: the estimate is
    /// above, or below, `bound`), on the estimate's own scale.
    fn sides(&self, lower_is_better: bool) -> Vec<(f64, bool)> {
        // On the gain scale H1 is `gain > g`; on the difference's scale that is
        // `diff > g`, or `diff < −g` when lower is better.
        let gain_above = |g: f64| if lower_is_better { (-g, false) } else { (g, true) };
        match *self {
            Rule::Superiority { margin } => vec![gain_above(margin)],
            Rule::NonInferiority { margin } => vec![gain_above(-margin)],
            Rule::Equivalence { margin } => vec![(-margin, true), (margin, false)],
            Rule::Threshold { min, max } => min.map(|b| (b, true)).into_iter().chain(max.map(|b| (b, false))).collect(),
        }
    }
}

/// A verdict on one check, or on the whole gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Pass,
    /// A failed advisory check.
    Warn,
    Inconclusive,
    Fail,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Warn => "WARN",
            Verdict::Inconclusive => "INCONCLUSIVE",
            Verdict::Fail => "FAIL",
        }
    }

    /// The command's exit status for this verdict of the whole gate: 0 PASS, 3 FAIL, 4
    /// INCONCLUSIVE (1 and 2 are rollstat's own failure and bad input).
    pub fn exit_status(self) -> u8 {
        match self {
            Verdict::Pass | Verdict::Warn => 0,
            Verdict::Fail => 3,
            Verdict::Inconclusive => 4,
        }
    }
}

/// One check's test on one estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tested {
    /// The difference (candidate − baseline) or, for a threshold, the candidate's mean.
    pub estimate: Option<f64>,
    pub se: Option<f64>,
    /// The (1 − 2α) t interval around the estimate.
    pub ci: Option<(f64, f64)>,
    /// The one-sided p-value (the larger of two for equivalence and two bounds).
    pub p: Option<f64>,
    /// Whether the interval lies wholly beyond the margin on the wrong side.
    pub beyond: bool,
    /// Tasks (paired, or the candidate's) behind the estimate.
    pub tasks: usize,
    /// Tasks a one-sided test at α would need for 80% power, were the true value the
    /// estimate: how far it is from the nearest bound, sized by `compare`'s power
    /// analysis (two-sided at 2α).
    pub tasks_needed: Option<u64>,
}

/// Tests the estimate `e` (with `clustered` errors) by `rule` at level `alpha`.
pub fn test(rule: &Rule, lower_is_better: bool, e: Option<&MeanSe>, clustered: bool, alpha: f64) -> Tested {
    let none = Tested {
        estimate: e.map(|e| e.mean),
        se: None,
        ci: None,
        p: None,
        beyond: false,
        tasks: e.map_or(0, |e| e.n),
        tasks_needed: None,
    };
    let Some((e, se)) = e.and_then(|e| Some((e, e.se?))) else { return none };
    let m = e.mean;
    let ci = if se > 0.0 { t_interval(1.0 - 2.0 * alpha, e.df, m, se) } else { (m, m) };
    let sides = rule.sides(lower_is_better);
    // P(estimate this far above / below the bound, were the truth at the bound).
    let one_sided = |&(b, above): &(f64, bool)| -> f64 {
        let z = if above { m - b } else { b - m };
        if se > 0.0 {
            t_upper_p(z / se, e.df)
        } else if z > 0.0 {
            0.0
        } else {
            1.0
        }
    };
    let p = sides.iter().map(one_sided).fold(0.0, f64::max);
    let beyond_one = |&(b, above): &(f64, bool)| if above { ci.1 < b } else { ci.0 > b };
    let beyond = match rule {
        // Outside ±m: past either end.
        Rule::Equivalence { margin } => ci.0 > *margin || ci.1 < -*margin,
        _ => sides.iter().any(beyond_one),
    };
    let distance = sides.iter().map(|&(b, _)| (m - b).abs()).fold(f64::INFINITY, f64::min);
    Tested {
        estimate: Some(m),
        se: Some(se),
        ci: Some(ci),
        p: Some(p),
        beyond,
        tasks: e.n,
        tasks_needed: tasks_to_detect(distance, e, clustered, 2.0 * alpha),
    }
}

/// One row's decision: its Holm-adjusted p-value and verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decided {
    pub p_adjusted: Option<f64>,
    pub verdict: Verdict,
}

/// Decides every row (`(required, test)`): Holm over the required rows' p-values and,
/// separately, over the advisory rows'; PASS below `alpha`, FAIL (WARN when advisory)
/// when the interval lies beyond the margin, else INCONCLUSIVE.
pub fn decide(rows: &[(bool, Tested)], alpha: f64) -> Vec<Decided> {
    let mut adjusted = vec![None; rows.len()];
    for required in [true, false] {
        let idx: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].0 == required).collect();
        let p: Vec<Option<f64>> = idx.iter().map(|&i| rows[i].1.p).collect();
        for (i, q) in idx.into_iter().zip(holm(&p)) {
            adjusted[i] = q;
        }
    }
    rows.iter()
        .zip(adjusted)
        .map(|((required, t), p_adjusted)| {
            let verdict = if p_adjusted.is_some_and(|q| q < alpha) {
                Verdict::Pass
            } else if t.beyond {
                if *required {
                    Verdict::Fail
                } else {
                    Verdict::Warn
                }
            } else {
                Verdict::Inconclusive
            };
            Decided { p_adjusted, verdict }
        })
        .collect()
}

/// The whole gate's verdict from its required rows' verdicts: FAIL if any failed, else
/// INCONCLUSIVE if any is, else PASS (also for no required row).
pub fn overall<'a>(required: impl IntoIterator<Item = &'a Verdict>) -> Verdict {
    required.into_iter().copied().filter(|v| *v != Verdict::Warn).max().unwrap_or(Verdict::Pass)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::t_ppf;

    fn est(mean: f64, se: f64, n: usize) -> MeanSe {
        MeanSe { n, clusters: n, mean, se: Some(se), df: n as f64 - 1.0 }
    }

    #[test]
    fn one_sided_tests_read_the_interval_against_the_margin() {
        // 100 tasks, se 0.01: the 90% interval is mean ± 1.66·se.
        let q = t_ppf(0.95, 99.0);
        let ni = Rule::NonInferiority { margin: 0.02 };
        // Well above −0.02: passes; t = (0 + 0.02)/0.01 = 2.
        let t = test(&ni, false, Some(&est(0.0, 0.01, 100)), false, 0.05);
        assert!((t.p.unwrap() - t_upper_p(2.0, 99.0)).abs() < 1e-15);
        assert!((t.ci.unwrap().0 - (0.0 - q * 0.01)).abs() < 1e-15);
        assert!(!t.beyond);
        // Far below: the interval is wholly under −0.02.
        let t = test(&ni, false, Some(&est(-0.05, 0.01, 100)), false, 0.05);
        assert!(t.beyond && t.p.unwrap() > 0.99);
        // Lower is better: the candidate may be at most 0.02 above; +0.05 is beyond.
        let t = test(&ni, true, Some(&est(0.05, 0.01, 100)), false, 0.05);
        assert!(t.beyond);
        let t = test(&ni, true, Some(&est(-0.05, 0.01, 100)), false, 0.05);
        assert!(!t.beyond && t.p.unwrap() < 1e-8);
        // The interval's lower end at exactly the bound is the p-value at exactly α.
        let sup = Rule::Superiority { margin: 0.0 };
        let t = test(&sup, false, Some(&est(q * 0.01, 0.01, 100)), false, 0.05);
        assert!((t.p.unwrap() - 0.05).abs() < 1e-13 && t.ci.unwrap().0.abs() < 1e-15);
    }

    #[test]
    fn equivalence_is_tost_and_fails_outside_the_margin() {
        let eq = Rule::Equivalence { margin: 0.05 };
        let t = test(&eq, false, Some(&est(0.01, 0.01, 50)), false, 0.05);
        let (p1, p2) = (t_upper_p((0.01 + 0.05) / 0.01, 49.0), t_upper_p((0.05 - 0.01) / 0.01, 49.0));
        assert_eq!(t.p, Some(p1.max(p2)));
        assert!(!t.beyond);
        // Wholly outside on either side.
        assert!(test(&eq, false, Some(&est(0.2, 0.01, 50)), false, 0.05).beyond);
        assert!(test(&eq, false, Some(&est(-0.2, 0.01, 50)), false, 0.05).beyond);
        // Straddling the margin: neither.
        let t = test(&eq, false, Some(&est(0.05, 0.01, 50)), false, 0.05);
        assert!(!t.beyond && t.p.unwrap() >= 0.5);
    }

    #[test]
    fn thresholds_test_both_bounds() {
        let th = Rule::Threshold { min: Some(0.5), max: Some(0.9) };
        let t = test(&th, false, Some(&est(0.7, 0.05, 40)), false, 0.05);
        let want = t_upper_p(0.2 / 0.05, 39.0);
        assert!((t.p.unwrap() - want).abs() < 1e-15);
        assert!(test(&th, false, Some(&est(0.2, 0.05, 40)), false, 0.05).beyond);
        assert!(test(&th, false, Some(&est(1.2, 0.05, 40)), false, 0.05).beyond);
    }

    #[test]
    fn decisions_holm_and_the_whole_gate() {
        let t = |p: f64, beyond: bool| Tested {
            estimate: Some(0.0),
            se: Some(1.0),
            ci: Some((0.0, 0.0)),
            p: Some(p),
            beyond,
            tasks: 10,
            tasks_needed: None,
        };
        // Holm over the three required rows: 3·0.01, then 2·0.04, then 0.6.
        let rows = [(true, t(0.01, false)), (true, t(0.04, false)), (true, t(0.6, true)), (false, t(0.9, true))];
        let d = decide(&rows, 0.05);
        assert_eq!(d[0].p_adjusted, Some(0.03));
        assert_eq!(d[1].p_adjusted, Some(0.08));
        let v: Vec<Verdict> = d.iter().map(|d| d.verdict).collect();
        assert_eq!(v, [Verdict::Pass, Verdict::Inconclusive, Verdict::Fail, Verdict::Warn]);
        // The advisory row is its own family.
        assert_eq!(d[3].p_adjusted, Some(0.9));
        assert_eq!(overall(&v[..3]), Verdict::Fail);
        assert_eq!(overall(&v[..2]), Verdict::Inconclusive);
        assert_eq!(overall(&[Verdict::Pass, Verdict::Warn]), Verdict::Pass);
        assert_eq!(
            (Verdict::Pass.exit_status(), Verdict::Fail.exit_status(), Verdict::Inconclusive.exit_status()),
            (0, 3, 4)
        );
    }

    #[test]
    fn no_standard_error_is_inconclusive() {
        let one = MeanSe { n: 1, clusters: 1, mean: 0.3, se: None, df: 0.0 };
        let t = test(&Rule::Superiority { margin: 0.0 }, false, Some(&one), false, 0.05);
        assert_eq!((t.p, t.ci, t.beyond, t.tasks), (None, None, false, 1));
        let d = decide(&[(true, t)], 0.05);
        assert_eq!(d[0].verdict, Verdict::Inconclusive);
    }

    #[test]
    fn tasks_needed_size_the_distance_to_the_nearest_bound() {
        // Estimate 0.01 against a non-inferiority bound of −0.02: a distance of 0.03.
        let e = est(0.01, 0.02, 30);
        let t = test(&Rule::NonInferiority { margin: 0.02 }, false, Some(&e), false, 0.05);
        assert_eq!(t.tasks_needed, tasks_to_detect(0.03, &e, false, 0.1));
        assert!(t.tasks_needed.unwrap() > 30);
    }
}
