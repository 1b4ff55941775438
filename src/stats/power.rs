//! Power of the paired t test, the smallest difference it would detect, and the number
//! of tasks it needs: the answer to "is this eval big enough?".
//!
//! A two-sided t test at level `α` with `df` degrees of freedom rejects when
//! `|T| > c = t_{1−α/2, df}`. When the true difference is `Δ` and its standard error is
//! `se`, `T` is noncentral t with noncentrality `δ = Δ / se`, so the power is
//!
//! `power(δ, df) = P(T > c) + P(T < −c) = (1 − F(c; df, δ)) + F(−c; df, δ)`,
//!
//! statsmodels' `TTestPower().power(effect_size = δ/√n, nobs = n, alpha)` with
//! `n = df + 1`. The *minimum detectable effect* (MDE) is the `Δ > 0` at which the
//! power reaches the target: `δ*(df) · se`, where `δ*` solves `power(δ, df) = target`.
//! The *tasks needed* to detect a difference `Δ` given the per-task spread `sd` (the
//! standard deviation of the task differences) is the `n` that solves
//! `power(Δ/sd · √n, n − 1) = target`, statsmodels'
//! `TTestPower().solve_power(effect_size = Δ/sd, alpha, power)`; rounded up to whole
//! tasks. Both roots are found by bisection to the last bits (statsmodels' own solver
//! stops at its brentq tolerance, so the reference table compares with a root refined
//! from statsmodels' power function instead).

use super::nct::nct_cdf;
use super::t_ppf;

/// Power of the two-sided t test at level `alpha` with `df` degrees of freedom when the
/// noncentrality is `delta`.
pub fn power(delta: f64, df: f64, alpha: f64) -> f64 {
    let c = t_ppf(1.0 - alpha / 2.0, df);
    (1.0 - nct_cdf(c, df, delta)) + nct_cdf(-c, df, delta)
}

/// Bisection of an increasing `f` on `[lo, hi]` for `f(x) = target`, to adjacent
/// floating-point numbers.
fn bisect(mut lo: f64, mut hi: f64, target: f64, f: impl Fn(f64) -> f64) -> f64 {
    for _ in 0..2000 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if f(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The noncentrality `δ > 0` at which the test has power `target` (`alpha < target < 1`).
pub fn detectable_delta(df: f64, alpha: f64, target: f64) -> f64 {
    let f = |d: f64| power(d, df, alpha);
    let mut hi = 4.0;
    while f(hi) < target {
        hi *= 2.0;
    }
    bisect(0.0, hi, target, f)
}

/// The smallest difference (`> 0`, in the score's units) the test detects with power
/// `target`: `δ*(df) · se`. `None` without a positive standard error.
pub fn mde(se: f64, df: f64, alpha: f64, target: f64) -> Option<f64> {
    (se > 0.0 && se.is_finite() && df > 0.0).then(|| detectable_delta(df, alpha, target) * se)
}

/// How many tasks (or clusters) a test needs to detect `diff` with power `target` when
/// one task's difference has standard deviation `sd`: the real root `n ≥ 2` of
/// `power(diff/sd · √n, n − 1) = target` (2 when two already suffice). `None` for a
/// zero difference or spread, or a root beyond 1e9.
pub fn tasks_needed(diff: f64, sd: f64, alpha: f64, target: f64) -> Option<f64> {
    if !(diff != 0.0 && diff.is_finite() && sd > 0.0 && sd.is_finite()) {
        return None;
    }
    let es = diff.abs() / sd;
    let f = |n: f64| power(es * n.sqrt(), n - 1.0, alpha);
    if f(2.0) >= target {
        return Some(2.0);
    }
    let mut hi = 4.0;
    while f(hi) < target {
        hi *= 2.0;
        if hi > 1e9 {
            return None;
        }
    }
    Some(bisect(2.0, hi, target, f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_at_zero_is_alpha_and_grows() {
        for df in [3.0, 29.0, 499.0] {
            assert!((power(0.0, df, 0.05) - 0.05).abs() < 1e-14, "df {df}");
            assert!(power(1.0, df, 0.05) < power(2.0, df, 0.05));
        }
        // The normal limit: δ* ≈ z_0.975 + z_0.8 = 2.8016 for large df.
        let d = detectable_delta(1e6, 0.05, 0.8);
        assert!((d - 2.801_6).abs() < 1e-3, "{d}");
    }

    #[test]
    fn tasks_needed_reaches_the_target() {
        let n = tasks_needed(0.05, 0.25, 0.05, 0.8).unwrap();
        let p = power(0.05 / 0.25 * n.sqrt(), n - 1.0, 0.05);
        assert!((p - 0.8).abs() < 1e-13, "{n}: {p}");
        assert_eq!(tasks_needed(0.0, 0.25, 0.05, 0.8), None);
        assert_eq!(tasks_needed(5.0, 0.25, 0.05, 0.8), Some(2.0));
    }
}

#[cfg(test)]
mod reference {
    use super::super::test_data::{agree, compare_ref};
    use super::*;

    /// statsmodels' `TTestPower().power(effect_size, nobs, 0.05)`.
    #[test]
    fn power_matches_statsmodels() {
        let (mut wa, mut wr) = (0.0f64, 0.0f64);
        for c in compare_ref("power") {
            let (es, n) = (c.parts[0][0], c.parts[0][1]);
            let got = power(es * n.sqrt(), n - 1.0, 0.05);
            let (a, r) = agree(got, c.expected[0], 1e-12, 1.0, &format!("power es {es} n {n}"));
            wa = wa.max(a);
            wr = wr.max(r);
        }
        eprintln!("power: max abs diff {wa:e}, max rel diff {wr:e}");
    }

    /// The noncentrality at 80% power, against the root of statsmodels' power function
    /// refined to 4 ulps (statsmodels' `solve_power` itself is only within its solver's
    /// tolerance: the table's second value, checked here to 1e-6).
    #[test]
    fn mde_matches_the_root_of_statsmodels_power() {
        let (mut wa, mut wr, mut loose) = (0.0f64, 0.0f64, 0.0f64);
        for c in compare_ref("mde") {
            let n = c.parts[0][0];
            let got = detectable_delta(n - 1.0, 0.05, 0.8);
            let (a, r) = agree(got, c.expected[0], 1e-12, 0.0, &format!("mde n {n}"));
            wa = wa.max(a);
            wr = wr.max(r);
            loose = loose.max(agree(got, c.expected[1], 1e-5, 0.0, &format!("solve_power n {n}")).1);
        }
        eprintln!("mde: max abs diff {wa:e}, max rel diff {wr:e}; against solve_power {loose:e}");
    }

    /// Tasks needed for an effect size, against the refined root in `nobs` of
    /// statsmodels' power function (and, loosely, `solve_power`).
    #[test]
    fn tasks_needed_matches_the_root_of_statsmodels_power() {
        let (mut wa, mut wr, mut loose) = (0.0f64, 0.0f64, 0.0f64);
        for c in compare_ref("tasks") {
            let es = c.parts[0][0];
            let got = tasks_needed(es, 1.0, 0.05, 0.8).unwrap();
            let (a, r) = agree(got, c.expected[0], 1e-12, 0.0, &format!("tasks es {es}"));
            wa = wa.max(a);
            wr = wr.max(r);
            loose = loose.max(agree(got, c.expected[1], 1e-6, 0.0, &format!("solve_power es {es}")).1);
        }
        eprintln!("tasks: max abs diff {wa:e}, max rel diff {wr:e}; against solve_power {loose:e}");
    }
}
