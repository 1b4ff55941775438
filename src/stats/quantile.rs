//! Sorting, median and linear-interpolation quantiles as numpy computes them.
//!
//! numpy's `np.median` averages the middle element(s) with `np.mean`, and
//! `np.quantile(a, q)` (method `'linear'`, also what pandas'
//! `Series.quantile` uses) interpolates between two order statistics with a
//! specific, asymmetric `_lerp`. Both are repeated operation for operation.
//! All functions take already sorted, NaN-free data (see [`sort_f64`]).

use super::sum::numpy_sum;

/// Sorts ascending with [`f64::total_cmp`] (so `-0.0` before `0.0` and NaNs
/// last, like numpy's sort puts NaNs at the end). Unstable sort: equal
/// values are indistinguishable, so the order does not matter.
pub fn sort_f64(v: &mut [f64]) {
    v.sort_unstable_by(f64::total_cmp);
}

/// Partially orders NaN-free `v` so that `v[k]` is the k-th smallest value for every
/// `k` in `at` (other positions hold the rest in no particular order). O(n) per index
/// (quickselect) instead of a full sort; small inputs are simply sorted. Callers then
/// use [`median_sorted`] / [`quantile_linear_sorted`], which read only those positions
/// (and the first and last).
pub fn order_at(v: &mut [f64], at: &[usize]) {
    if v.len() <= 64 {
        sort_f64(v);
        return;
    }
    let mut ks: Vec<usize> = at.iter().copied().filter(|&k| k < v.len()).collect();
    ks.push(0);
    ks.push(v.len() - 1);
    ks.sort_unstable();
    ks.dedup();
    let mut lo = 0;
    for k in ks {
        if k < lo {
            continue;
        }
        v[lo..].select_nth_unstable_by(k - lo, f64::total_cmp);
        lo = k + 1;
    }
}

/// The positions [`median_sorted`] and [`quantile_linear_sorted`] at `qs` read, for `n`
/// values.
pub fn positions_for(n: usize, qs: &[f64]) -> Vec<usize> {
    let mut out = Vec::new();
    if n == 0 {
        return out;
    }
    out.extend([0, n - 1, n / 2, n.saturating_sub(1) / 2, (n / 2).saturating_sub(1)]);
    for &q in qs {
        let v = (n - 1) as f64 * q;
        let f = v.floor() as usize;
        out.push(f.min(n - 1));
        out.push((f + 1).min(n - 1));
    }
    out
}

/// `np.median` of sorted, NaN-free data.
///
/// numpy (`_median` in `numpy/lib/_function_base_impl.py`) takes the middle
/// element (odd `n`) or the two middle elements `a, b` (even `n`) and calls
/// `np.mean` on them, i.e. `numpy_sum(middle) / len(middle)`; for even `n`
/// that is `(0.0 + (a + b)) / 2.0`, which equals `(a + b) / 2.0` except that
/// a `-0.0` result becomes `0.0`. Empty input gives NaN (numpy warns and
/// returns NaN); if the last element is NaN the result is NaN, as in numpy.
pub fn median_sorted(sorted: &[f64]) -> f64 {
    median_at(sorted.len(), |k| sorted[k])
}

/// [`median_sorted`] of `n` values given by rank (`at(k)` is the k-th smallest): it
/// reads only the last and the middle ranks.
pub fn median_at(n: usize, at: impl Fn(usize) -> f64) -> f64 {
    if n == 0 || at(n - 1).is_nan() {
        return f64::NAN;
    }
    let mid = n / 2;
    if n % 2 == 1 {
        numpy_sum(&[at(mid)])
    } else {
        numpy_sum(&[at(mid - 1), at(mid)]) / 2.0
    }
}

/// numpy's `_lerp(a, b, t)`: `a + (b - a) * t`, except where `t >= 0.5`,
/// where it is `b - (b - a) * (1 - t)`.
fn numpy_lerp(a: f64, b: f64, t: f64) -> f64 {
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// `np.quantile(sorted, q)` with the default `method='linear'` (type 7 of
/// Hyndman & Fan), for sorted, NaN-free data; pandas' `Series.quantile(q)`
/// calls the same numpy code.
///
/// Steps as in numpy's `_quantile` (`numpy/lib/_function_base_impl.py`):
/// * virtual index `v = (n - 1) * q` (numpy's `'linear'` entry computes
///   exactly this product; the generic `n*q + alpha + q*(1-alpha-beta) - 1`
///   form is used only by the other continuous methods and can round
///   differently);
/// * `prev = floor(v)`, `next = prev + 1`; when `v >= n - 1` both become
///   the last index (numpy's `-1`) and when `v < 0` both become `0`;
/// * `gamma = v - prev` with numpy's clamped `prev` (so `gamma = v + 1` at
///   the top, which is harmless because both neighbours are equal);
/// * result `_lerp(sorted[prev], sorted[next], gamma)` with
///   `_lerp(a, b, t) = a + (b - a) * t`, or `b - (b - a) * (1 - t)` when
///   `t >= 0.5`.
///
/// Consequently `n == 1` returns the single value (for a finite value), and
/// infinities behave as in numpy (`np.quantile([inf], 0.5)` is NaN).
/// Empty input, a NaN `q` or a NaN last element give NaN; `q` outside
/// `[0, 1]` (numpy raises) also gives NaN.
pub fn quantile_linear_sorted(sorted: &[f64], q: f64) -> f64 {
    quantile_linear_at(sorted.len(), q, |k| sorted[k])
}

/// [`quantile_linear_sorted`] of `n` values given by rank (`at(k)` is the k-th
/// smallest): it reads the last rank and the two around `(n - 1) * q`.
pub fn quantile_linear_at(n: usize, q: f64, at: impl Fn(usize) -> f64) -> f64 {
    if n == 0 || !(0.0..=1.0).contains(&q) || at(n - 1).is_nan() {
        return f64::NAN;
    }
    let last = n - 1;
    let v = last as f64 * q;
    let (prev_index, next_index, prev_value) = if v >= last as f64 {
        (last, last, -1.0)
    } else if v < 0.0 {
        (0, 0, 0.0)
    } else {
        let f = v.floor();
        let i = f as usize;
        (i, i + 1, f)
    };
    let gamma = v - prev_value;
    numpy_lerp(at(prev_index), at(next_index), gamma)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_order_agrees_with_sorting() {
        let mut x: Vec<f64> = (0..1001u64).map(|i| ((i * 7919) % 1009) as f64 * 0.37 - 50.0).collect();
        let mut sorted = x.clone();
        sort_f64(&mut sorted);
        let qs = [0.25, 0.75, 0.9, 0.99];
        let at = positions_for(x.len(), &qs);
        order_at(&mut x, &at);
        assert_eq!(median_sorted(&x).to_bits(), median_sorted(&sorted).to_bits());
        for q in qs {
            assert_eq!(quantile_linear_sorted(&x, q).to_bits(), quantile_linear_sorted(&sorted, q).to_bits());
        }
        assert_eq!(x[0], sorted[0]);
        assert_eq!(x[1000], sorted[1000]);
        let mut even = sorted[..1000].to_vec();
        even.reverse();
        order_at(&mut even, &positions_for(1000, &[]));
        assert_eq!(median_sorted(&even), median_sorted(&sorted[..1000]));
    }

    #[test]
    fn sorting() {
        let mut v = [3.0, -0.0, 0.0, f64::NAN, -1.0, f64::INFINITY];
        sort_f64(&mut v);
        assert_eq!(&v[..3], &[-1.0, -0.0, 0.0]);
        assert_eq!(v[1].to_bits(), (-0.0f64).to_bits());
        assert_eq!(v[4], f64::INFINITY);
        assert!(v[5].is_nan());
    }

    #[test]
    fn median_small() {
        assert!(median_sorted(&[]).is_nan());
        assert_eq!(median_sorted(&[5.0]), 5.0);
        assert_eq!(median_sorted(&[1.0, 2.0]), 1.5);
        assert_eq!(median_sorted(&[1.0, 2.0, 10.0]), 2.0);
        assert_eq!(median_sorted(&[0.0, 1.0, f64::INFINITY]), 1.0);
        // np.median([-0.0]) and np.median([-0.0, -0.0]) are 0.0
        assert_eq!(median_sorted(&[-0.0]).to_bits(), 0.0f64.to_bits());
        assert_eq!(median_sorted(&[-0.0, -0.0]).to_bits(), 0.0f64.to_bits());
        // (a + b) / 2 overflows like numpy's mean does
        assert_eq!(median_sorted(&[f64::MAX, f64::MAX]), f64::INFINITY);
        assert!(median_sorted(&[1.0, f64::NAN]).is_nan());
    }

    #[test]
    fn quantile_small() {
        assert!(quantile_linear_sorted(&[], 0.5).is_nan());
        assert!(quantile_linear_sorted(&[1.0], f64::NAN).is_nan());
        assert!(quantile_linear_sorted(&[1.0], 1.5).is_nan());
        assert_eq!(quantile_linear_sorted(&[7.0], 0.3), 7.0);
        assert_eq!(quantile_linear_sorted(&[7.0], 1.0), 7.0);
        let xs = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile_linear_sorted(&xs, 0.0), 1.0);
        assert_eq!(quantile_linear_sorted(&xs, 1.0), 4.0);
        assert_eq!(quantile_linear_sorted(&xs, 0.5), 2.5);
        assert_eq!(quantile_linear_sorted(&xs, 0.25), 1.75);
        assert_eq!(quantile_linear_sorted(&xs, 0.75), 3.25);
        // numpy: np.quantile([inf], 0.5) and np.quantile([0, 1, inf], 0.5) are nan
        assert!(quantile_linear_sorted(&[f64::INFINITY], 0.5).is_nan());
        assert!(quantile_linear_sorted(&[0.0, 1.0, f64::INFINITY], 0.5).is_nan());
    }

    #[test]
    fn lerp_switches_form_at_half() {
        // a + (b - a) * t and b - (b - a) * (1 - t) round differently; numpy
        // uses the second one from t = 0.5 on.
        let (a, b) = (0.1, 0.7);
        let t = 0.7;
        assert_eq!(numpy_lerp(a, b, t), b - (b - a) * (1.0 - t));
        assert_ne!(b - (b - a) * (1.0 - t), a + (b - a) * t);
        assert_eq!(numpy_lerp(a, b, 0.3), a + (b - a) * 0.3);
    }

    #[test]
    fn matches_numpy_table() {
        use super::super::test_data::{numpy_groups, py_float};
        let mut checked = 0;
        for (xs, rows) in numpy_groups(include_str!("numpy_ref.tsv")) {
            let mut all = xs.clone();
            sort_f64(&mut all);
            let mut present: Vec<f64> = xs.iter().enumerate().filter(|(i, _)| i % 7 != 3).map(|(_, &x)| x).collect();
            sort_f64(&mut present);
            for row in rows {
                let q = || py_float(row[3]);
                let got = match row[2] {
                    "median" | "np_median" => median_sorted(&all),
                    "m_median" => median_sorted(&present),
                    "quantile" => quantile_linear_sorted(&all, q()),
                    "m_quantile" => quantile_linear_sorted(&present, q()),
                    _ => continue,
                };
                let want = py_float(row[4]);
                assert_eq!(got.to_bits(), want.to_bits(), "{row:?}: got {got:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 66 * (3 + 2 * 13));
    }
}
