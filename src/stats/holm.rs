//! Holm's step-down adjustment of p-values for several comparisons with one baseline.
//!
//! With `m` p-values sorted ascending `p_(1) ≤ … ≤ p_(m)`, the adjusted values are
//! `p̃_(i) = min(1, max_{j ≤ i} (m − j + 1) p_(j))` (Holm, "A simple sequentially
//! rejective multiple test procedure", 1979): rejecting where `p̃ ≤ α` keeps the chance
//! of any false rejection at `α`, whatever the dependence between the tests. As
//! statsmodels' `multipletests(p, method="holm")[1]`, operation for operation.

/// Holm-adjusted p-values, in the order given; `None` entries (tests without a p-value)
/// are not part of the family and stay `None`.
pub fn holm(p: &[Option<f64>]) -> Vec<Option<f64>> {
    let mut idx: Vec<usize> = (0..p.len()).filter(|&i| p[i].is_some()).collect();
    idx.sort_by(|&a, &b| p[a].unwrap().total_cmp(&p[b].unwrap()).then(a.cmp(&b)));
    let m = idx.len();
    let mut out = vec![None; p.len()];
    let mut running = f64::NEG_INFINITY;
    for (j, &i) in idx.iter().enumerate() {
        let raw = p[i].unwrap() * (m - j) as f64;
        running = running.max(raw);
        out[i] = Some(running.min(1.0));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_down_with_gaps() {
        let got = holm(&[Some(0.04), None, Some(0.01), Some(0.03)]);
        // Sorted 0.01, 0.03, 0.04: 3·0.01, max(0.03, 2·0.03), max(0.06, 0.04).
        assert_eq!(got, vec![Some(0.06), None, Some(0.03), Some(0.06)]);
        assert_eq!(holm(&[Some(0.7), Some(0.9)]), vec![Some(1.0), Some(1.0)]);
        assert_eq!(holm(&[Some(0.02)]), vec![Some(0.02)]);
    }
}

#[cfg(test)]
mod reference {
    use super::super::test_data::{agree, compare_ref};
    use super::*;

    /// statsmodels' `multipletests(p, method="holm")`.
    #[test]
    fn matches_statsmodels() {
        let mut worst = 0.0f64;
        for c in compare_ref("holm") {
            let p: Vec<Option<f64>> = c.parts[0].iter().map(|&v| Some(v)).collect();
            for (g, w) in holm(&p).iter().zip(&c.expected) {
                worst = worst.max(agree(g.unwrap(), *w, 1e-12, 0.0, &c.case).1);
            }
        }
        eprintln!("holm: max rel diff {worst:e}");
    }
}
