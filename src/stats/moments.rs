//! Mean, variance and standard deviation as pandas computes them.
//!
//! pandas' `Series.mean()` / `.var()` / `.std()` on a float64 column go
//! through `pandas.core.nanops.nanmean` / `nanvar` / `nanstd`: the missing
//! entries are overwritten with `0.0` in a copy that keeps the full length,
//! numpy sums that copy pairwise, and the divisor is the number of present
//! values. Because the zeros stay in place they shift which elements share
//! a pairwise block, so skipping the missing values instead would change the
//! rounding. The functions here repeat those steps exactly. Code that
//! first drops the missing values (`series.dropna().mean()`, as NeMo Gym's
//! repeat-level metrics do) must call the dense [`mean`] / [`var`] / [`std`]
//! on the compacted values instead: the results differ in the last bits.
//!
//! Caveat: pandas routes `nanvar`/`nanstd` (not `nanmean`) through the
//! `bottleneck` package when that is installed; these functions reproduce the
//! plain-numpy path (pandas without bottleneck).

use super::sum::numpy_sum;

/// Fills `scratch` with `values` where `present`, `0.0` elsewhere
/// (pandas `_get_values(..., fill_value=0)`), returning the count present.
fn zero_filled(values: &[f64], present: &[bool], scratch: &mut Vec<f64>) -> usize {
    assert_eq!(values.len(), present.len(), "values and present must have the same length");
    scratch.clear();
    scratch.extend(values.iter().zip(present).map(|(&x, &p)| if p { x } else { 0.0 }));
    present.iter().filter(|&&p| p).count()
}

/// pandas `nanops.nanmean` of a float64 column with missing entries, using
/// `scratch` as the zero-filled copy (its previous contents are discarded).
///
/// Formula: `numpy_sum(z) / count`, where `z[i] = values[i]` if
/// `present[i]` else `0.0` (same length as `values`) and `count` is the
/// number of present entries (as f64). `None` when `count == 0` (pandas
/// gives NaN). Panics if the two slices differ in length.
pub fn pandas_mean_with_scratch(values: &[f64], present: &[bool], scratch: &mut Vec<f64>) -> Option<f64> {
    let count = zero_filled(values, present, scratch);
    if count == 0 {
        return None;
    }
    Some(numpy_sum(scratch) / count as f64)
}

/// pandas `nanops.nanmean` (what `Series.mean()` runs for float64 data):
/// `numpy_sum(z) / count` with missing entries zero-filled in place, see
/// [`pandas_mean_with_scratch`]. `None` when nothing is present.
pub fn pandas_mean(values: &[f64], present: &[bool]) -> Option<f64> {
    pandas_mean_with_scratch(values, present, &mut Vec::new())
}

/// pandas `nanops.nanvar` with `ddof`, using `scratch` for the temporaries.
///
/// Formula (pandas' two-pass algorithm, GH10242):
/// `avg = numpy_sum(z) / count` with `z` the zero-filled copy;
/// `sqr[i] = (avg - z[i])^2` for present entries (numpy's `** 2`, i.e.
/// `d * d`) and `0.0` for missing ones (`np.putmask(sqr, mask, 0)`);
/// result `numpy_sum(sqr) / (count - ddof)`. `None` when
/// `count <= ddof` (pandas gives NaN). Panics if the slices differ in length.
pub fn pandas_var_with_scratch(values: &[f64], present: &[bool], ddof: usize, scratch: &mut Vec<f64>) -> Option<f64> {
    let count = zero_filled(values, present, scratch);
    if count <= ddof {
        return None;
    }
    let avg = numpy_sum(scratch) / count as f64;
    for (z, &p) in scratch.iter_mut().zip(present) {
        *z = if p {
            let d = avg - *z;
            d * d
        } else {
            0.0
        };
    }
    Some(numpy_sum(scratch) / (count - ddof) as f64)
}

/// pandas `nanops.nanvar` (what `Series.var(ddof=...)` runs for float64
/// data): `numpy_sum(sqr) / (count - ddof)` with
/// `sqr[i] = (avg - x[i])^2` for present entries and `0.0` for missing ones,
/// `avg = numpy_sum(zero-filled) / count`; see [`pandas_var_with_scratch`].
/// `None` when `count <= ddof`.
pub fn pandas_var(values: &[f64], present: &[bool], ddof: usize) -> Option<f64> {
    pandas_var_with_scratch(values, present, ddof, &mut Vec::new())
}

/// pandas `nanops.nanstd` with a caller-provided scratch buffer:
/// `sqrt(pandas_var_with_scratch(..))` (pandas applies `np.sqrt` to
/// `nanvar`). `None` when `count <= ddof`.
pub fn pandas_std_with_scratch(values: &[f64], present: &[bool], ddof: usize, scratch: &mut Vec<f64>) -> Option<f64> {
    pandas_var_with_scratch(values, present, ddof, scratch).map(f64::sqrt)
}

/// pandas `nanops.nanstd` (what `Series.std(ddof=...)` runs for float64
/// data): `sqrt(pandas_var(values, present, ddof))`. `None` when
/// `count <= ddof`.
pub fn pandas_std(values: &[f64], present: &[bool], ddof: usize) -> Option<f64> {
    pandas_var(values, present, ddof).map(f64::sqrt)
}

/// Mean of a column with no missing values, as pandas (and `np.mean`)
/// compute it: `numpy_sum(xs) / n`. Identical to [`pandas_mean`] with every
/// entry present. `None` for an empty slice.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    Some(numpy_sum(xs) / xs.len() as f64)
}

/// Variance of a column with no missing values, as pandas' `nanvar`
/// computes it: `avg = numpy_sum(xs) / n`,
/// `numpy_sum((avg - x)^2 for x in xs) / (n - ddof)`. Identical to
/// [`pandas_var`] with every entry present (and to `np.var(xs, ddof=ddof)`,
/// which uses the same two passes). `scratch` holds the squared
/// deviations. `None` when `n <= ddof`.
pub fn var_with_scratch(xs: &[f64], ddof: usize, scratch: &mut Vec<f64>) -> Option<f64> {
    let n = xs.len();
    if n <= ddof {
        return None;
    }
    let avg = numpy_sum(xs) / n as f64;
    scratch.clear();
    scratch.extend(xs.iter().map(|&x| {
        let d = avg - x;
        d * d
    }));
    Some(numpy_sum(scratch) / (n - ddof) as f64)
}

/// Variance with `ddof` of a column with no missing values:
/// `numpy_sum((avg - x)^2) / (n - ddof)`, `avg = numpy_sum(xs) / n`; see
/// [`var_with_scratch`]. `None` when `n <= ddof`.
pub fn var(xs: &[f64], ddof: usize) -> Option<f64> {
    var_with_scratch(xs, ddof, &mut Vec::new())
}

/// Standard deviation with `ddof` of a column with no missing values:
/// `sqrt(var(xs, ddof))` (pandas `nanstd`). `None` when `n <= ddof`.
pub fn std(xs: &[f64], ddof: usize) -> Option<f64> {
    var(xs, ddof).map(f64::sqrt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_ddof_edges() {
        assert_eq!(mean(&[]), None);
        assert_eq!(pandas_mean(&[f64::NAN], &[false]), None);
        assert_eq!(var(&[1.0], 1), None);
        assert_eq!(var(&[1.0], 0), Some(0.0));
        assert_eq!(pandas_var(&[1.0, 2.0], &[true, false], 1), None);
        assert_eq!(std(&[], 0), None);
    }

    #[test]
    fn small_exact_values() {
        assert_eq!(mean(&[1.0, 2.0, 4.0]), Some(7.0 / 3.0));
        // pandas docstring example: nanvar([1, nan, 2, 3]) == 1.0
        assert_eq!(pandas_var(&[1.0, f64::NAN, 2.0, 3.0], &[true, false, true, true], 1), Some(1.0));
        assert_eq!(pandas_mean(&[1.0, f64::NAN, 2.0], &[true, false, true]), Some(1.5));
        assert_eq!(std(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], 0), Some(2.0));
    }

    #[test]
    fn missing_values_keep_their_slot() {
        // The missing slot becomes a 0.0 that keeps its position, so the nine
        // slots go through the kernel as [1e16, 0, 1, 1, 1, 1, 1, 1 | 1]; the
        // eight present values alone would be [1e16, 1, 1, 1, 1, 1, 1, 1],
        // whose first pair rounds 1e16 + 1 back to 1e16. pandas' mean
        // (zero-filled) and the mean after `dropna()` therefore differ.
        let mut xs = vec![1.0; 9];
        xs[0] = 1e16;
        xs[1] = f64::NAN;
        let mut present = vec![true; 9];
        present[1] = false;
        let with_slot = pandas_mean(&xs, &present).unwrap();
        let compact: Vec<f64> = xs.iter().zip(&present).filter(|(_, &p)| p).map(|(&x, _)| x).collect();
        // zero-filled: ((1e16+0) + (1+1)) + ((1+1)+(1+1)) = 1e16+6, +1 -> 1e16+8
        assert_eq!(with_slot, 1.0000000000000008e16 / 8.0);
        // compact (8 values): ((1e16+1) + 2) + 4 = 1e16 + 6
        assert_eq!(mean(&compact).unwrap(), 1.0000000000000006e16 / 8.0);
    }

    #[test]
    fn dense_equals_all_present() {
        let xs: Vec<f64> = (0..300).map(|i| ((i * 37 % 101) as f64).sin() * 1e3).collect();
        let present = vec![true; xs.len()];
        for ddof in 0..3 {
            assert_eq!(var(&xs, ddof).unwrap().to_bits(), pandas_var(&xs, &present, ddof).unwrap().to_bits());
            assert_eq!(std(&xs, ddof).unwrap().to_bits(), pandas_std(&xs, &present, ddof).unwrap().to_bits());
            let mut scratch = vec![7.0; 3];
            assert_eq!(
                std(&xs, ddof).unwrap().to_bits(),
                pandas_std_with_scratch(&xs, &present, ddof, &mut scratch).unwrap().to_bits()
            );
        }
        assert_eq!(mean(&xs).unwrap().to_bits(), pandas_mean(&xs, &present).unwrap().to_bits());
    }

    #[test]
    fn matches_pandas_table() {
        use super::super::test_data::{numpy_groups, py_float};
        let mut checked = 0;
        let mut scratch = Vec::new();
        for (xs, rows) in numpy_groups(include_str!("numpy_ref.tsv")) {
            let present: Vec<bool> = (0..xs.len()).map(|i| i % 7 != 3).collect();
            let masked: Vec<f64> = xs.iter().zip(&present).map(|(&x, &p)| if p { x } else { f64::NAN }).collect();
            for row in rows {
                let ddof = || row[3].parse::<usize>().unwrap();
                let got = match row[2] {
                    "mean" | "np_mean" => mean(&xs),
                    "var" | "np_var" => var(&xs, ddof()),
                    "std" => std(&xs, ddof()),
                    "m_mean" => pandas_mean(&masked, &present),
                    "m_var" => pandas_var_with_scratch(&masked, &present, ddof(), &mut scratch),
                    "m_std" => pandas_std(&masked, &present, ddof()),
                    _ => continue,
                };
                let want = py_float(row[4]);
                match got {
                    Some(g) => assert_eq!(g.to_bits(), want.to_bits(), "{row:?}: got {g:?}"),
                    None => assert!(want.is_nan(), "{row:?}: got None"),
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 66 * 10);
    }
}
