//! Welch's unequal-variance t interval for the difference of two means, as scipy's
//! `ttest_ind(a, b, equal_var=False).confidence_interval(confidence)` computes it.
//!
//! scipy (1.17) takes, per sample, `m = np.mean(x)` (numpy's pairwise sum over `n`),
//! `v = np.mean((x - m)**2) * (n / (n - 1))` (its `_var` with ddof 1), then
//! `vn = v / n`, `df = (vn_a + vn_b)^2 / (vn_a^2 / (n_a - 1) + vn_b^2 / (n_b - 1))`
//! (the Welch–Satterthwaite degrees of freedom, set to 1 when both variances are zero
//! and the ratio is undefined), `se = sqrt(vn_a + vn_b)` and `estimate = m_a - m_b`; the
//! interval is `t_ppf((1 - c) / 2, df) * se + estimate` and
//! `t_ppf(1 - (1 - c) / 2, df) * se + estimate`. Every step here is the same operation in
//! the same order, and the t quantile is [`super::t_ppf`] (fractional df), so the ends
//! agree with scipy to ~1e-14 relative.
//!
//! scipy warns ("Precision loss occurred in moment calculation…") for a sample of two or
//! more values whose largest deviation from the mean is below `10 * eps` of the mean's
//! magnitude (values that are all equal, for a non-zero mean); [`Welch::precision_loss`]
//! counts those samples so callers can say the same.

use super::sum::numpy_sum;
use super::t_dist::t_ppf;

/// The Welch interval for `mean(a) - mean(b)` and what it was computed from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Welch {
    /// `mean(a) - mean(b)`.
    pub estimate: f64,
    /// `sqrt(var(a) / n_a + var(b) / n_b)`.
    pub se: f64,
    /// Welch–Satterthwaite degrees of freedom (1 when both variances are zero).
    pub df: f64,
    pub low: f64,
    pub high: f64,
    /// How many of the two samples had scipy's catastrophic-cancellation warning (0–2).
    pub precision_loss: usize,
}

/// `np.mean(xs)`.
fn np_mean(xs: &[f64]) -> f64 {
    numpy_sum(xs) / xs.len() as f64
}

/// scipy's `_var(xs, ddof=1)`: `np.mean((xs - m)**2) * (n / (n - 1))`, and whether its
/// precision-loss warning fires (`max|xs - m| / |m| < 10 eps`, `n > 1`).
fn scipy_var_ddof1(xs: &[f64]) -> (f64, f64, bool) {
    let n = xs.len() as f64;
    let m = np_mean(xs);
    let dev: Vec<f64> = xs.iter().map(|&x| x - m).collect();
    let max_dev = dev.iter().fold(0.0f64, |acc, d| acc.max(d.abs()));
    // NaN (0 / 0) compares false, as in numpy.
    let loss = xs.len() > 1 && max_dev / m.abs() < f64::EPSILON * 10.0;
    let sq: Vec<f64> = dev.iter().map(|d| d * d).collect();
    let var = np_mean(&sq) * (n / (n - 1.0));
    (m, var, loss)
}

/// Two-sided Welch interval at `confidence` for `mean(a) - mean(b)`; `None` when a
/// sample has fewer than two values (no variance).
pub fn welch_interval(a: &[f64], b: &[f64], confidence: f64) -> Option<Welch> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let (m1, v1, loss1) = scipy_var_ddof1(a);
    let (m2, v2, loss2) = scipy_var_ddof1(b);
    let vn1 = v1 / n1;
    let vn2 = v2 / n2;
    let s = vn1 + vn2;
    let mut df = s * s / (vn1 * vn1 / (n1 - 1.0) + vn2 * vn2 / (n2 - 1.0));
    if df.is_nan() {
        df = 1.0;
    }
    let se = s.sqrt();
    let estimate = m1 - m2;
    let tail = (1.0 - confidence) / 2.0;
    let low = t_ppf(tail, df) * se + estimate;
    let high = t_ppf(1.0 - tail, df) * se + estimate;
    Some(Welch { estimate, se, df, low, high, precision_loss: usize::from(loss1) + usize::from(loss2) })
}

#[cfg(test)]
mod tests {
    use super::super::test_data::{py_float, rel_err, rows};
    use super::*;

    /// Each case of `welch_ref.tsv` (scipy 1.17.1's `ttest_ind(a, b, equal_var=False)`,
    /// written by `gen_welch_reference.py`) agrees on df, standard error, estimate and
    /// both interval ends, and on the number of precision-loss warnings.
    #[test]
    fn matches_scipy() {
        let mut seen = 0;
        let mut worst = 0.0f64;
        for row in rows(include_str!("welch_ref.tsv")) {
            let nums = |s: &str| s.split(',').map(py_float).collect::<Vec<f64>>();
            let (a, b) = (nums(row[1]), nums(row[2]));
            let w = welch_interval(&a, &b, 0.95).unwrap();
            let case = row[0];
            for (got, want, what) in [
                (w.df, row[3], "df"),
                (w.se, row[4], "se"),
                (w.estimate, row[5], "estimate"),
                (w.low, row[6], "low"),
                (w.high, row[7], "high"),
            ] {
                let want = py_float(want);
                let err = if got == want { 0.0 } else { rel_err(got, want) };
                assert!(err <= 1e-13, "{case} {what}: got {got:?}, scipy {want:?} (rel err {err:e})");
                worst = worst.max(err);
            }
            assert_eq!(w.precision_loss.to_string(), row[8], "{case} warnings");
            seen += 1;
        }
        eprintln!("welch: max rel err {worst:e} over {seen} cases");
        assert!(seen >= 20);
    }

    #[test]
    fn needs_two_values_per_sample() {
        assert!(welch_interval(&[1.0], &[1.0, 2.0], 0.95).is_none());
        assert!(welch_interval(&[1.0, 2.0], &[], 0.95).is_none());
    }

    /// Two constant samples: undefined df becomes 1, the interval is the difference.
    #[test]
    fn constant_samples_collapse_to_the_difference() {
        let w = welch_interval(&[2.5, 2.5, 2.5], &[1.0, 1.0], 0.95).unwrap();
        assert_eq!((w.df, w.se, w.low, w.high), (1.0, 0.0, 1.5, 1.5));
        assert_eq!(w.precision_loss, 2);
        // All-zero samples: 0 / 0 is NaN, which scipy does not count as a loss.
        assert_eq!(welch_interval(&[0.0, 0.0], &[0.0, 0.0], 0.95).unwrap().precision_loss, 0);
    }
}
