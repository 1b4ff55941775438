//! Numerically exact reimplementations of the statistics NeMo Gym reports.
//!
//! NeMo Gym 0.7.0 computes its summaries with pandas, numpy and scipy:
//! `Series.mean()/std()/median()/quantile()` and
//! `scipy.stats.t.interval(...)`. Textbook formulas give results that differ
//! from those in the last bits, because numpy sums pairwise in a fixed block
//! order, pandas zero-fills missing values in place before summing, numpy's
//! quantile interpolation has its own rounding, and the t quantile must be
//! accurate to a few ulps. This module repeats each of those computations
//! operation for operation (or, for the t quantile, to ~1e-14 relative), so
//! rollstat's numbers match NeMo Gym's bit for bit where possible.
//!
//! All functions are pure; none allocate except the convenience wrappers
//! that create their own scratch buffer.

/// Exact sign / McNemar tests and Wilson intervals for scores with few values.
pub mod binary;
/// Small-sample cluster-robust errors (CR2, Bell–McCaffrey degrees of freedom).
pub mod cr2;
/// Holm's adjustment of p-values for several comparisons.
pub mod holm;
mod moments;
mod nan;
/// The noncentral t distribution and the incomplete beta function.
pub mod nct;
/// Task-level standard errors: clustered, paired (comparisons between runs).
pub mod paired;
/// Power, minimum detectable effect and tasks needed for the paired t test.
pub mod power;
mod quantile;
/// Repeat noise against task spread: what more repeats or more tasks would buy.
pub mod repeats;
/// Sums and order statistics of a column read in pieces, never held whole.
pub mod stream;
mod sum;
mod t_dist;
/// VAGEN's batch metrics in numpy's order (`batch-metrics`).
pub mod vagen;
/// VAGEN's `reward_variance` as `profile`/`aggregate` apply it to rollouts grouped by
/// task (not numpy-ordered).
pub mod variance;
/// Welch's unequal-variance t interval for a difference of means (scipy's `ttest_ind`).
mod welch;

pub use moments::{
    mean, pandas_mean, pandas_mean_with_scratch, pandas_std, pandas_std_with_scratch, pandas_var,
    pandas_var_with_scratch, std, var, var_with_scratch,
};
pub use nan::{nan_mean, nan_std};
pub use quantile::{
    median_at, median_sorted, order_at, positions_for, quantile_linear_at, quantile_linear_sorted, sort_f64,
};
pub use sum::{fsum, numpy_sum, pairwise_sum};
pub use t_dist::{t_interval, t_ppf, t_two_sided_p, t_upper_p};
pub use variance::{group_variance, reward_variance};
pub use welch::{welch_interval, Welch};

#[cfg(test)]
pub(crate) mod test_data;
