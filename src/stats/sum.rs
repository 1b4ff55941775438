//! Floating-point summation in numpy's order.
//!
//! numpy does not add the elements of a float64 array left to right: its
//! `add.reduce` (what `ndarray.sum()`, `np.mean` and pandas' `nanops` call)
//! uses the blocked pairwise algorithm below, so the rounding of every sum,
//! mean and variance depends on that exact order. Reproducing numpy's
//! results bit for bit therefore needs the same order here.

/// numpy's block size for pairwise summation (`PW_BLOCKSIZE` in
/// `numpy/_core/src/umath/loops_utils.h.src`).
pub(crate) const PW_BLOCKSIZE: usize = 128;

/// The float widths numpy sums pairwise: `f64` (`DOUBLE_pairwise_sum`) and `f32`
/// (`FLOAT_pairwise_sum`, which keeps every partial sum in float32).
pub trait PairwiseFloat: Copy + std::ops::Add<Output = Self> + std::ops::AddAssign {
    const NEG_ZERO: Self;
}

impl PairwiseFloat for f64 {
    const NEG_ZERO: f64 = -0.0;
}

impl PairwiseFloat for f32 {
    const NEG_ZERO: f32 = -0.0;
}

/// Pairwise sum of `xs`, in exactly the order of numpy's `DOUBLE_pairwise_sum`
/// (`numpy/_core/src/umath/loops_utils.h.src`):
///
/// * `n < 8`: `res = -0.0; for x in xs { res += x }` (numpy starts from
///   `-0.0` so that a sum of negative zeros stays `-0.0`);
/// * `8 <= n <= 128`: eight accumulators `r[k] = xs[k]`, then
///   `r[k] += xs[i + k]` for `i = 8, 16, ..` while `i < n - n % 8`; then
///   `res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))` and the
///   remaining `n % 8` elements are added to `res` one by one;
/// * `n > 128`: `n2 = n / 2; n2 -= n2 % 8;` and the result is
///   `pairwise_sum(xs[..n2]) + pairwise_sum(xs[n2..])`.
///
/// This is the inner kernel only; `ndarray.sum()` also adds the reduction's
/// initial value `0.0`, see [`numpy_sum`]. numpy's `FLOAT_pairwise_sum` is the same
/// kernel in float32 arithmetic, so this is generic over both widths.
pub fn pairwise_sum<T: PairwiseFloat>(xs: &[T]) -> T {
    let n = xs.len();
    if n < 8 {
        let mut res = T::NEG_ZERO;
        for &x in xs {
            res += x;
        }
        res
    } else if n <= PW_BLOCKSIZE {
        let mut r = [T::NEG_ZERO; 8];
        r.copy_from_slice(&xs[..8]);
        let full = n - n % 8;
        for block in xs[8..full].chunks_exact(8) {
            for (acc, &x) in r.iter_mut().zip(block) {
                *acc += x;
            }
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &xs[full..] {
            res += x;
        }
        res
    } else {
        let mut n2 = n / 2;
        n2 -= n2 % 8;
        pairwise_sum(&xs[..n2]) + pairwise_sum(&xs[n2..])
    }
}

/// `np.sum(xs)` / `np.add.reduce(xs)` for a contiguous 1-D float64 array:
/// `0.0 + pairwise_sum(xs)`.
///
/// numpy seeds the reduction with the identity of `add` (`0.0`) and calls
/// the pairwise kernel once on the whole array (no buffering is needed for
/// a contiguous float64 array), so the result equals [`pairwise_sum`]
/// except that a `-0.0` total becomes `0.0` (`np.sum([-0.0]) == 0.0`).
/// An empty slice gives `0.0`. Checked against numpy 2.4 for lengths
/// 0..300 and up to 1,000,003.
pub fn numpy_sum(xs: &[f64]) -> f64 {
    0.0 + pairwise_sum(xs)
}

/// The correctly rounded sum of `xs` (Python's `math.fsum`): Shewchuk's exact partial
/// sums ("Adaptive Precision Floating-Point Arithmetic", 1997), rounded once at the end.
/// It does not depend on the order of `xs`, so equal multisets of values give equal
/// sums (and means) bit for bit; zeros are not kept as partials, so a sum of zeros is
/// `0.0` as in Python. Non-finite values give the IEEE sum of the non-finite ones; where
/// Python raises (`inf + -inf`, a finite sum beyond the double range) the result is NaN
/// or ±inf.
pub fn fsum(xs: impl IntoIterator<Item = f64>) -> f64 {
    let mut partials: Vec<f64> = Vec::new();
    let mut special = 0.0;
    for x0 in xs {
        if !x0.is_finite() {
            special += x0;
            continue;
        }
        let mut x = x0;
        let mut i = 0;
        for j in 0..partials.len() {
            let mut y = partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        partials.truncate(i);
        if x != 0.0 {
            partials.push(x);
        }
    }
    if special != 0.0 {
        return special;
    }
    // Round the exact sum (the partials, non-overlapping, increasing in magnitude) once,
    // correcting a half-way case as `math.fsum` does.
    let Some(mut hi) = partials.pop() else { return 0.0 };
    let mut lo = 0.0;
    while let Some(y) = partials.pop() {
        let x = hi;
        hi = x + y;
        let yr = hi - x;
        lo = y - yr;
        if lo != 0.0 {
            break;
        }
    }
    if let Some(&next) = partials.last() {
        if (lo < 0.0 && next < 0.0) || (lo > 0.0 && next > 0.0) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsum_is_exact_and_order_free() {
        assert_eq!(fsum([0.0; 0]), 0.0);
        assert_eq!(fsum([0.1, 0.2, 0.3]), fsum([0.3, 0.2, 0.1]));
        // Python: math.fsum([0.1] * 10) == 1.0, while sum() gives 0.9999999999999999.
        assert_eq!(fsum([0.1; 10]), 1.0);
        assert_eq!(fsum([1e100, 1.0, -1e100, 1e-100]), 1.0);
        assert_eq!(fsum([1e16, 1.0, 1.0]), 1e16 + 2.0);
        // Half-way case: 1 + 2^-53 + 2^-106 rounds up (math.fsum gives 1.0000000000000002).
        assert_eq!(fsum([1.0, 2f64.powi(-53), 2f64.powi(-106)]), 1.0000000000000002);
        assert_eq!(fsum([f64::INFINITY, 1.0]), f64::INFINITY);
        // Python: math.fsum([-0.0]) == 0.0 (positive).
        assert_eq!(fsum([-0.0]).to_bits(), 0.0f64.to_bits());
        assert_eq!(fsum([-0.0, -0.0]).to_bits(), 0.0f64.to_bits());
        assert!(fsum([f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        // Any order of a larger set gives the same bits.
        let xs: Vec<f64> = (1..200).map(|i| 1.0 / i as f64 * if i % 3 == 0 { -1.0 } else { 1.0 }).collect();
        let mut ys = xs.clone();
        ys.reverse();
        ys.swap(3, 150);
        assert_eq!(fsum(xs.iter().copied()).to_bits(), fsum(ys.iter().copied()).to_bits());
    }

    fn naive(xs: &[f64]) -> f64 {
        xs.iter().fold(0.0, |a, &x| a + x)
    }

    #[test]
    fn small_is_sequential() {
        assert_eq!(pairwise_sum::<f64>(&[]).to_bits(), (-0.0f64).to_bits());
        assert_eq!(pairwise_sum(&[-0.0f64, -0.0]).to_bits(), (-0.0f64).to_bits());
        assert_eq!(numpy_sum(&[-0.0]).to_bits(), 0.0f64.to_bits());
        assert_eq!(numpy_sum(&[]).to_bits(), 0.0f64.to_bits());
        // n < 8 is plain left-to-right: (1e16 + 1) + 1 rounds back to 1e16 twice.
        assert_eq!(pairwise_sum(&[1e16, 1.0, 1.0]), 1e16);
        assert_eq!(pairwise_sum(&[1.0, 1.0, 1e16]), 1e16 + 2.0);
    }

    #[test]
    fn eight_accumulators_then_remainder() {
        // n = 9: r = xs[0..8]; no strided pass (9 - 9 % 8 = 8);
        // ((1e16+1) + (1+1)) + ((1+1) + (1+1)) = 1e16 + 6, then + 1 -> tie,
        // rounds to even 1e16 + 8. Naive left-to-right stays at 1e16.
        let mut xs = vec![1.0; 9];
        xs[0] = 1e16;
        assert_eq!(pairwise_sum(&xs), 1.0000000000000008e16);
        assert_eq!(naive(&xs), 1e16);

        // n = 16: the strided pass adds xs[8..16] into r[0..8], so with
        // xs[0] = 1e16 and xs[8] = -1e16, r0 = 0 and the other accumulators
        // hold 2 each: the result is exactly 14 (naive: 1e16 swallows the
        // first seven ones and the -1e16 cancels it, leaving 7).
        let mut ys = vec![1.0; 16];
        ys[0] = 1e16;
        ys[8] = -1e16;
        assert_eq!(pairwise_sum(&ys), 14.0);
        assert_eq!(naive(&ys), 7.0);
    }

    #[test]
    fn recursive_split_point() {
        // n = 200 > 128: n2 = 100 - 100 % 8 = 96, halves [0, 96) and [96, 200).
        // Ones everywhere except xs[0] = 2^53 and xs[96] = -2^53.
        // Left (n = 96): r0 = 2^53 + eleven ones, each addition a tie that
        // rounds back to 2^53; r1..r7 = 12 each; left = 2^53 + 84.
        // Right (n = 104): r0 = -2^53 + twelve ones = -2^53 + 12 (exact below
        // 2^53); r1..r7 = 13 each; right = -2^53 + 103. Total 187, where
        // naive summation gives 103 (its first 95 ones are all lost).
        let two53 = 9_007_199_254_740_992.0;
        let mut xs = vec![1.0; 200];
        xs[0] = two53;
        xs[96] = -two53;
        assert_eq!(pairwise_sum(&xs[..96]), two53 + 84.0);
        assert_eq!(pairwise_sum(&xs[96..]), -two53 + 103.0);
        assert_eq!(pairwise_sum(&xs), 187.0);
        assert_eq!(naive(&xs), 103.0);
    }

    #[test]
    fn matches_numpy_sum_table() {
        use super::super::test_data::{dataset, numpy_groups, py_float};
        let mut checked = 0;
        for (xs, rows) in numpy_groups(include_str!("numpy_ref.tsv")) {
            for row in rows.iter().filter(|r| r[2] == "np_sum") {
                let want = py_float(row[4]);
                let got = numpy_sum(&xs);
                assert_eq!(got.to_bits(), want.to_bits(), "{row:?}: got {got:?}");
                checked += 1;
            }
        }
        assert_eq!(checked, 66);
        // The table distinguishes the order: naive summation misses some.
        let xs = dataset("mixed", 100_003);
        assert_ne!(naive(&xs), numpy_sum(&xs));
    }
}
