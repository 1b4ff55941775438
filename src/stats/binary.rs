//! Exact tests and intervals for scores that take few values: the sign test (and
//! McNemar's exact test, which it is for 0/1 scores), and Wilson's interval for a mean
//! of 0/1 scores.
//!
//! **Sign test.** With `w` tasks where run b beat run a and `l` where it lost (ties
//! dropped), under "neither is better" `w ~ Binomial(w + l, ½)`; the two-sided p-value is
//! `min(1, 2 · P(X ≤ min(w, l)))`, scipy's `binomtest(w, w + l, 0.5).pvalue` (for ½ the
//! two ways of forming a two-sided p agree). Where the t test sees a constant
//! difference as infinitely significant (`se = 0`), the sign test sees three wins out
//! of three: p = 0.25. For 0/1 task scores (one rollout per task), the wins and losses
//! are the discordant pairs of the 2×2 table, and this is McNemar's exact test,
//! statsmodels' `mcnemar(table, exact=True)`. `P(X ≤ k)` is `I_½(n − k, k + 1)`.
//!
//! **Wilson.** For `k` ones among `n` 0/1 scores, with `z = Φ⁻¹(0.975)`, `p̂ = k/n`:
//! `(p̂ + z²/2n ± z √(p̂(1 − p̂)/n + z²/4n²)) / (1 + z²/n)`, as statsmodels'
//! `proportion_confint(k, n, method="wilson")`; it stays inside [0, 1] (a run at 1 on
//! all 133 tasks gets [0.9719, 1], where the t interval collapses to [1, 1]).

use super::nct::ibeta;

/// `Φ⁻¹(0.975)`, as `scipy.stats.norm.isf(0.025)` gives it.
pub const Z_975: f64 = 1.959_963_984_540_054;

/// `P(X ≤ k)` for `X ~ Binomial(n, ½)`: up to 120 trials the exact sum of binomial
/// coefficients over `2^n` (one rounding), beyond as `I_½(n − k, k + 1)`.
pub fn binom_half_cdf(k: u64, n: u64) -> f64 {
    if k >= n {
        return 1.0;
    }
    if n <= 120 {
        let (mut c, mut sum) = (1u128, 1u128);
        for i in 1..=k as u128 {
            c = c * (n as u128 + 1 - i) / i;
            sum += c;
        }
        return sum as f64 * 0.5f64.powi(n as i32);
    }
    ibeta((n - k) as f64, (k + 1) as f64, 0.5)
}

/// Two-sided exact sign test of `wins` against `losses` (ties left out): 1 when there
/// is neither.
pub fn sign_test(wins: u64, losses: u64) -> f64 {
    let n = wins + losses;
    if n == 0 {
        return 1.0;
    }
    (2.0 * binom_half_cdf(wins.min(losses), n)).min(1.0)
}

/// Wilson's 95% interval for `k` ones out of `n`, clipped to [0, 1] against rounding.
/// `None` for `n = 0`.
pub fn wilson(k: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let nf = n as f64;
    let q = k as f64 / nf;
    let z2 = Z_975 * Z_975;
    let denom = 1.0 + z2 / nf;
    let center = (q + z2 / (2.0 * nf)) / denom;
    let dist = Z_975 * (q * (1.0 - q) / nf + z2 / (4.0 * nf * nf)).sqrt() / denom;
    // At k = 0 and k = n one end is exactly 0 or 1; rounding would leave it a bit off.
    let lo = if k == 0 { 0.0 } else { (center - dist).max(0.0) };
    let hi = if k == n { 1.0 } else { (center + dist).min(1.0) };
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worked_cases() {
        // 7 wins, 1 loss: 2 · 9/256.
        assert!((sign_test(7, 1) - 18.0 / 256.0).abs() < 1e-15);
        // A constant +0.5 on 3 tasks: 2 · 1/8.
        assert!((sign_test(3, 0) - 0.25).abs() < 1e-15);
        assert_eq!(sign_test(4, 4), 1.0);
        assert_eq!(sign_test(0, 0), 1.0);
        let (lo, hi) = wilson(133, 133).unwrap();
        assert_eq!(hi, 1.0);
        assert!((lo - 133.0 / (133.0 + Z_975 * Z_975)).abs() < 1e-15, "{lo}");
        assert_eq!(wilson(0, 0), None);
        // The exact sum and the incomplete beta meet at 120 trials.
        let (a, b) = (binom_half_cdf(50, 120), ibeta(70.0, 51.0, 0.5));
        assert!((a - b).abs() <= 1e-14 * a, "{a} {b}");
    }
}

#[cfg(test)]
mod reference {
    use super::super::test_data::{agree, compare_ref};
    use super::*;

    /// statsmodels' exact `mcnemar` and scipy's `binomtest` on the same counts.
    #[test]
    fn mcnemar_and_sign_match_statsmodels_and_scipy() {
        let mut worst = 0.0f64;
        for c in compare_ref("mcnemar") {
            let x = &c.parts[0];
            let got = sign_test(x[1] as u64, x[2] as u64);
            worst = worst.max(agree(got, c.expected[0], 1e-12, 0.0, &format!("mcnemar {}", c.case)).1);
            worst = worst.max(agree(got, c.expected[1], 1e-12, 0.0, &format!("binomtest {}", c.case)).1);
        }
        eprintln!("mcnemar/sign: max rel diff {worst:e}");
    }

    /// statsmodels' `proportion_confint(method="wilson")`.
    #[test]
    fn wilson_matches_statsmodels() {
        let mut worst = 0.0f64;
        for c in compare_ref("wilson") {
            let x = &c.parts[0];
            let (lo, hi) = wilson(x[0] as u64, x[1] as u64).unwrap();
            worst = worst.max(agree(lo, c.expected[0], 1e-12, 1.0, &c.case).0);
            worst = worst.max(agree(hi, c.expected[1], 1e-12, 1.0, &c.case).0);
        }
        eprintln!("wilson: max abs diff {worst:e}");
    }
}
