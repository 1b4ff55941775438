//! The small-sample cluster-robust standard error of a mean (CR2) and its
//! Bell–McCaffrey degrees of freedom, for when there are few clusters.
//!
//! With few clusters the usual cluster-robust (CR1) error is too small and `G − 1`
//! degrees of freedom too many (Cameron & Miller, "A Practitioner's Guide to
//! Cluster-Robust Inference", 2015, §VI; Imbens & Kolesár, "Robust Standard Errors in
//! Small Samples", 2016). CR2 (Bell & McCaffrey 2002) scales each cluster's residuals by
//! `(I − H_gg)^{−1/2}`; for the mean (an intercept-only fit, `H_gg = J/n`) that is a
//! factor `1/√(1 − n_g/n)` on the cluster's residual sum, so
//!
//! `se_CR2 = √(Σ_g S_g² / (1 − n_g/n)) / n`, `S_g = Σ_{i∈g} (x_i − x̄)`.
//!
//! The degrees of freedom are Bell and McCaffrey's `(Σλ)² / Σλ²`, with `λ` the
//! eigenvalues of `GᵀG`, `G_g = (I − H)_g A_g X_g (XᵀX)⁻¹`; for the mean
//! `GᵀG_{gh} = a_g a_h (δ_{gh} n_g − n_g n_h / n) / n²` with `a_g = 1/√(1 − n_g/n)`, so
//! `Σλ = 1/n` and `Σλ² = [(Σ_g a_g² n_g²)²/n² − 2 Σ_g a_g⁴ n_g³/n + Σ_g a_g⁴ n_g²] / n⁴`.
//! Equal clusters give `G − 1` exactly. Checked against the general matrix formulas
//! computed with numpy (`compare_ref.tsv`); statsmodels has no CR2.

use super::sum::pairwise_sum;

/// CR2 standard error of the mean of `x` clustered by `ids`, with the Bell–McCaffrey
/// degrees of freedom: `(se, df)`. `None` with fewer than two clusters.
///
/// # Panics
/// When `ids` and `x` differ in length.
pub fn cr2(x: &[f64], ids: &[u32]) -> Option<(f64, f64)> {
    assert_eq!(x.len(), ids.len(), "one cluster id per value");
    let n = x.len();
    if n == 0 {
        return None;
    }
    let mean = pairwise_sum(x) / n as f64;
    let mut slot: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    let mut members: Vec<Vec<f64>> = Vec::new();
    for (&id, &v) in ids.iter().zip(x) {
        let s = *slot.entry(id).or_insert_with(|| {
            members.push(Vec::new());
            members.len() - 1
        });
        members[s].push(v - mean);
    }
    if members.len() < 2 {
        return None;
    }
    let nf = n as f64;
    let mut var_terms = Vec::with_capacity(members.len());
    let (mut s1, mut s2, mut s3) = (Vec::new(), Vec::new(), Vec::new());
    for m in &members {
        let ng = m.len() as f64;
        let a2 = 1.0 / (1.0 - ng / nf);
        let s = pairwise_sum(m);
        var_terms.push(s * s * a2);
        s1.push(a2 * ng * ng);
        s2.push(a2 * a2 * ng * ng * ng);
        s3.push(a2 * a2 * ng * ng);
    }
    let se = pairwise_sum(&var_terms).sqrt() / nf;
    let a = pairwise_sum(&s1);
    let sum_sq = (a * a / (nf * nf) - 2.0 * pairwise_sum(&s2) / nf + pairwise_sum(&s3)) / nf.powi(4);
    let df = (1.0 / (nf * nf)) / sum_sq;
    Some((se, df))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_clusters_have_g_minus_one_df() {
        let x = [0.1, 0.5, 0.9, 0.3, 0.2, 0.8, 0.4, 0.4, 0.6];
        let (se, df) = cr2(&x, &[0, 0, 0, 1, 1, 1, 2, 2, 2]).unwrap();
        assert!((df - 2.0).abs() < 1e-12, "{df}");
        // Equal clusters: CR2 = CR1 (whose factor G/(G−1) equals 1/(1 − 1/G)).
        let cr1 = super::super::paired::mean_se(&x, Some(&[0, 0, 0, 1, 1, 1, 2, 2, 2])).unwrap().se.unwrap();
        assert!((se - cr1).abs() < 1e-15, "{se} vs {cr1}");
        assert_eq!(cr2(&x, &[4; 9]), None);
    }
}

#[cfg(test)]
mod reference {
    use super::super::test_data::{agree, compare_ref};
    use super::*;

    /// The general matrix formulas, computed with numpy.
    #[test]
    fn matches_the_matrix_formulas() {
        let mut worst = 0.0f64;
        for c in compare_ref("cr2") {
            let ids: Vec<u32> = c.parts[1].iter().map(|&v| v as u32).collect();
            let (se, df) = cr2(&c.parts[0], &ids).unwrap();
            worst = worst.max(agree(se, c.expected[0], 1e-12, 0.0, &format!("{} se", c.case)).1);
            worst = worst.max(agree(df, c.expected[1], 1e-12, 0.0, &format!("{} df", c.case)).1);
        }
        eprintln!("cr2: max rel diff {worst:e}");
    }
}
