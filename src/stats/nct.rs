//! The noncentral t distribution's CDF, which the power of a t test needs, and the
//! regularized incomplete beta function it is built from.
//!
//! A t statistic computed when the true mean difference is `Δ` (not 0) follows the
//! noncentral t with `df` degrees of freedom and noncentrality `δ = Δ / se`. Its CDF at
//! `t ≥ 0` is the series (Lenth, "Cumulative distribution function of the non-central
//! t distribution", Applied Statistics 38, 1989, algorithm AS 243)
//!
//! `F(t; ν, δ) = Φ(−δ) + ½ Σ_{j≥0} [p_j I_x(j + ½, ν/2) + q_j I_x(j + 1, ν/2)]`,
//!
//! with `x = t² / (t² + ν)`, `λ = δ²/2`, the Poisson weights `p_j = e^{−λ} λ^j / j!`
//! and `q_j = δ e^{−λ} λ^j / (√2 Γ(j + 3/2))`; for `t < 0`,
//! `F(t; ν, δ) = 1 − F(−t; ν, −δ)`. Each `I_x` is evaluated on its own (continued
//! fraction, or its complement where that converges), with the factor
//! `x^a (1 − x)^b / B(a, b)` formed as DiDonato & Morris do (ACM TOMS 18, 1992: `brcomp`)
//! so that no large logarithms cancel; the sum runs until the Poisson tail left is
//! below 1e-17. Checked against `scipy.stats.nct` (Boost) in `compare_ref.tsv`.

use std::f64::consts::PI;

use super::t_dist::{beta_cf, normal_probs, stirling_tail};

/// `ln Γ(z)` for `z > 0`: Stirling's series above 10, shifted up by the recurrence
/// `Γ(z) = Γ(z + k) / (z (z + 1) … (z + k − 1))` below.
pub fn ln_gamma(z: f64) -> f64 {
    let mut prod = 1.0;
    let mut s = z;
    while s < 10.0 {
        prod *= s;
        s += 1.0;
    }
    (s - 0.5) * s.ln() - s + 0.5 * (2.0 * PI).ln() + stirling_tail(s) - prod.ln()
}

/// `x^a y^b / B(a, b)` with `y = 1 − x`, without cancelling large logarithms:
/// for `a, b ≥ 10`
/// `√(ab / (2π(a + b))) · exp(a ln1p((xb − ya)/a) + b ln1p((ya − xb)/b)) · exp(Δ(a + b) − Δ(a) − Δ(b))`
/// (`Δ` the Stirling remainder); with one of them (`s`) below 10 and the other (`l`)
/// above, `ln Γ(l) − ln Γ(s + l)` (which `ln B` holds) is written as
/// `−(s + l − ½) ln1p(s/l) − s ln l + s + Δ(l) − Δ(s + l)`; both small: directly.
fn ibeta_prefix(a: f64, b: f64, x: f64, y: f64) -> f64 {
    if a >= 10.0 && b >= 10.0 {
        let c = a + b;
        let e = a * ((x * b - y * a) / a).ln_1p() + b * ((y * a - x * b) / b).ln_1p();
        let d = stirling_tail(c) - stirling_tail(a) - stirling_tail(b);
        return (a * b / (2.0 * PI * c)).sqrt() * (e + d).exp();
    }
    let ((s, xs), (l, xl)) = if a <= b { ((a, x), (b, y)) } else { ((b, y), (a, x)) };
    if l < 10.0 {
        let ln_b = ln_gamma(a) + ln_gamma(b) - ln_gamma(a + b);
        return (a * x.ln() + b * y.ln() - ln_b).exp();
    }
    // ln Γ(l) − ln Γ(s + l), Stirling on both (l ≥ 10); 1/B(s, l) = Γ(s + l)/(Γ(s) Γ(l)).
    let ratio = -(s + l - 0.5) * (s / l).ln_1p() - s * l.ln() + s + stirling_tail(l) - stirling_tail(s + l);
    (s * xs.ln() + l * xl.ln() - ln_gamma(s) - ratio).exp()
}

/// The regularized incomplete beta function `I_x(a, b)` for `a, b > 0`, `0 ≤ x ≤ 1`:
/// the continued fraction where it converges fast (`x < (a + 1)/(a + b + 2)`), else
/// `1 − I_{1−x}(b, a)`.
pub fn ibeta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let y = 1.0 - x;
    if x < (a + 1.0) / (a + b + 2.0) {
        ibeta_prefix(a, b, x, y) * beta_cf(a, b, x, y) / a
    } else {
        1.0 - ibeta_prefix(b, a, y, x) * beta_cf(b, a, y, x) / b
    }
}

/// The standard normal CDF `Φ(z)`.
pub fn normal_cdf(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    let (tail, _, _) = normal_probs(z.abs());
    if z <= 0.0 {
        tail
    } else {
        1.0 - tail
    }
}

/// `P(T ≤ t)` for `T` noncentral t with `df > 0` degrees of freedom and noncentrality
/// `nc` (as `scipy.stats.nct.cdf(t, df, nc)`); see the module doc for the series.
pub fn nct_cdf(t: f64, df: f64, nc: f64) -> f64 {
    if t.is_nan() || df.is_nan() || nc.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if t < 0.0 {
        return 1.0 - nct_cdf_nonneg(-t, df, -nc);
    }
    nct_cdf_nonneg(t, df, nc)
}

/// `P(T > t)`, as `1 − F` (what statsmodels' power functions use).
pub fn nct_sf(t: f64, df: f64, nc: f64) -> f64 {
    1.0 - nct_cdf(t, df, nc)
}

/// The series for `t ≥ 0`.
fn nct_cdf_nonneg(t: f64, df: f64, nc: f64) -> f64 {
    if t.is_infinite() {
        return 1.0;
    }
    let base = normal_cdf(-nc);
    if t == 0.0 {
        return base;
    }
    let t2 = t * t;
    let x = t2 / (t2 + df);
    let b = 0.5 * df;
    if nc == 0.0 {
        return base + 0.5 * ibeta(0.5, b, x);
    }
    let lambda = 0.5 * nc * nc;
    let ln_lambda = lambda.ln();
    let ln_abs_nc = nc.abs().ln();
    let sign = nc.signum();
    let mut sum = 0.0;
    // Terms from the Poisson mode outwards, so none is summed after it stops mattering.
    let mode = lambda.floor() as i64;
    let term = |j: i64| -> f64 {
        let jf = j as f64;
        let ln_p = -lambda + jf * ln_lambda - ln_gamma(jf + 1.0);
        let ln_q = ln_abs_nc - lambda + jf * ln_lambda - 0.5 * std::f64::consts::LN_2 - ln_gamma(jf + 1.5);
        ln_p.exp() * ibeta(jf + 0.5, b, x) + sign * ln_q.exp() * ibeta(jf + 1.0, b, x)
    };
    // Poisson mass beyond j, bounded by the weight at j times a geometric factor.
    let small = |j: i64| -> bool {
        let jf = j as f64;
        let ln_p = -lambda + jf * ln_lambda - ln_gamma(jf + 1.0);
        ln_p < (1e-17f64).ln() - 2.0 * (1.0 + lambda.sqrt()).ln()
    };
    let mut up = Vec::new();
    let mut j = mode;
    loop {
        up.push(term(j));
        if j > mode + 5 && small(j) {
            break;
        }
        j += 1;
    }
    let mut down = Vec::new();
    let mut j = mode - 1;
    while j >= 0 {
        down.push(term(j));
        if j < mode - 5 && small(j) {
            break;
        }
        j -= 1;
    }
    // Smallest terms first.
    for v in up.iter().rev().chain(down.iter().rev()) {
        sum += v;
    }
    (base + 0.5 * sum).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_known_values() {
        assert!((ln_gamma(1.0)).abs() < 4e-15);
        assert!((ln_gamma(0.5) - 0.5 * PI.ln()).abs() < 4e-15);
        // ln(9!) and ln Γ(100.5) (Python's math.lgamma).
        assert!((ln_gamma(10.0) - 362_880f64.ln()).abs() < 1e-14);
        assert!((ln_gamma(100.5) / 361.435_540_467_777_6 - 1.0).abs() < 1e-15);
    }

    #[test]
    fn ibeta_closed_forms() {
        // I_x(1, b) = 1 − (1 − x)^b; I_x(a, 1) = x^a; I_½(a, a) = ½.
        for &(b, x) in &[(3.0, 0.2), (40.0, 0.01), (0.5, 0.7), (250.0, 0.003)] {
            let want = 1.0 - (1.0f64 - x).powf(b);
            assert!((ibeta(1.0, b, x) - want).abs() < 4e-15, "b {b} x {x}");
        }
        assert!((ibeta(7.5, 1.0, 0.8) - 0.8f64.powf(7.5)).abs() < 4e-15);
        for a in [0.5, 3.0, 30.0, 3000.0] {
            assert!((ibeta(a, a, 0.5) - 0.5).abs() < 1e-14, "a {a}");
        }
    }

    #[test]
    fn central_case_is_student_t() {
        for &(t, df) in &[(1.3, 4.0), (2.0, 29.0), (0.2, 300.0)] {
            let want = 1.0 - 0.5 * super::super::t_two_sided_p(t, df);
            assert!((nct_cdf(t, df, 0.0) - want).abs() < 4e-15, "{t} {df}");
            assert!((nct_cdf(-t, df, 0.0) - (1.0 - want)).abs() < 4e-15);
        }
    }
}

#[cfg(test)]
mod reference {
    use super::super::test_data::{agree, compare_ref};
    use super::*;

    /// `scipy.stats.nct.cdf` at the critical values of the two-sided 5% test and
    /// elsewhere, df 1 to 4999, noncentrality ±2.8, 0.5 and 10: within 1e-12 absolute.
    #[test]
    fn matches_scipy_nct() {
        let (mut worst_abs, mut worst_rel) = (0.0f64, 0.0f64);
        for c in compare_ref("nct_cdf") {
            let x = &c.parts[0];
            let got = nct_cdf(x[0], x[1], x[2]);
            let (a, r) = agree(got, c.expected[0], 1e-12, 1.0, &format!("nct_cdf{x:?} ({})", c.case));
            worst_abs = worst_abs.max(a);
            worst_rel = worst_rel.max(r);
        }
        eprintln!("nct_cdf: max abs diff {worst_abs:e}, max rel diff {worst_rel:e}");
    }
}
