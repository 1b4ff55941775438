//! NaN-as-missing conveniences over the pandas-exact moments: a dense column where NaN
//! marks a missing value (how the metrics layer stores fields).

use super::moments::{pandas_mean, pandas_std};

/// pandas `Series.mean()` of a column whose missing values are NaN.
pub fn nan_mean(col: &[f64]) -> Option<f64> {
    let present: Vec<bool> = col.iter().map(|x| !x.is_nan()).collect();
    pandas_mean(col, &present)
}

/// pandas `Series.std(ddof)` of a column whose missing values are NaN.
pub fn nan_std(col: &[f64], ddof: usize) -> Option<f64> {
    let present: Vec<bool> = col.iter().map(|x| !x.is_nan()).collect();
    pandas_std(col, &present, ddof)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_values_are_skipped() {
        let c = [1.0, f64::NAN, 3.0];
        assert_eq!(nan_mean(&c), Some(2.0));
        assert_eq!(nan_std(&c, 1), Some(2f64.sqrt()));
        assert_eq!(nan_mean(&[f64::NAN]), None);
        assert_eq!(nan_std(&[1.0], 1), None);
    }
}
