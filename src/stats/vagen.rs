//! VAGEN's batch statistics, in numpy's order of operations so that rollstat reports
//! what VAGEN logs to the last bit.
//!
//! VAGEN's built-in `reward_variance` metric (`vagen/custom_metric/metric.py`) is
//!
//! ```python
//! total_rewards = np.asarray(token_level_scores).sum(axis=-1)
//! for idx, reward in zip(group_idx, total_rewards):
//!     group_rewards[str(idx)].append(float(reward))
//! per_group_vars = [0.0 if len(r) <= 1 else float(np.var(r, ddof=ddof)) for r in groups]
//! return float(np.mean(per_group_vars)) if per_group_vars else 0.0
//! ```
//!
//! and its documented example metric is `float(np.mean(total_rewards))`. Grouping by
//! `str(idx)` is the metrics layer's job; these are the sums, means and variances.

use super::sum::numpy_sum;

/// A sample's total reward, `np.asarray(scores).sum(axis=-1)` for one float64 row:
/// numpy's pairwise sum of the row ([`numpy_sum`]).
pub fn total_reward(scores: &[f64]) -> f64 {
    numpy_sum(scores)
}

/// `np.sum` of a float32 row: numpy's pairwise summation (`FLOAT_pairwise_sum`, the
/// same blocks as for doubles) with float32 accumulators, after the reduction's initial
/// `0.0`. The total stays a float32, as numpy returns it.
pub fn total_reward_f32(scores: &[f32]) -> f32 {
    0.0 + super::sum::pairwise_sum(scores)
}

/// `float(np.mean(total_rewards))` for float64 totals: `numpy_sum(xs) / n`; NaN for no
/// samples (numpy warns "Mean of empty slice" and returns `nan`).
pub fn mean_reward(totals: &[f64]) -> f64 {
    if totals.is_empty() {
        return f64::NAN;
    }
    numpy_sum(totals) / totals.len() as f64
}

/// `float(np.mean(total_rewards))` for float32 totals: numpy sums and divides in
/// float32 (only float16 is widened), then `float()` widens the result exactly.
pub fn mean_reward_f32(totals: &[f32]) -> f64 {
    if totals.is_empty() {
        return f64::NAN;
    }
    f64::from(total_reward_f32(totals) / totals.len() as f32)
}

/// `np.var(rewards, ddof=ddof)`: `avg = numpy_sum(x) / n`, then
/// `numpy_sum((x - avg)²) / max(n - ddof, 0)` — so a group with no more than `ddof`
/// members divides by zero and gives `inf` (or `nan` when its rewards are all equal),
/// as numpy does with a `RuntimeWarning`.
pub fn numpy_var(xs: &[f64], ddof: usize) -> f64 {
    let n = xs.len();
    let avg = numpy_sum(xs) / n as f64;
    let sq: Vec<f64> = xs.iter().map(|&x| (x - avg) * (x - avg)).collect();
    numpy_sum(&sq) / n.saturating_sub(ddof) as f64
}

/// VAGEN's `reward_variance`: per group (in the order the groups were first seen), 0.0
/// for a group of one and [`numpy_var`] otherwise; then `np.mean` of those (pairwise
/// sum over the count); 0.0 when there are no groups.
pub fn reward_variance(groups: &[Vec<f64>], ddof: usize) -> f64 {
    if groups.is_empty() {
        return 0.0;
    }
    let vars: Vec<f64> = groups.iter().map(|g| if g.len() <= 1 { 0.0 } else { numpy_var(g, ddof) }).collect();
    numpy_sum(&vars) / vars.len() as f64
}

/// How many groups of two or more rewards have no more than `ddof` of them (numpy
/// divides their sum of squares by zero).
pub fn groups_without_dof(groups: &[Vec<f64>], ddof: usize) -> usize {
    groups.iter().filter(|g| g.len() > 1 && g.len() <= ddof).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values numpy 2.4 gave for the same inputs (`np.var`, `np.mean`, float32 sums).
    #[test]
    fn matches_numpy() {
        assert_eq!(reward_variance(&[], 0), 0.0);
        assert_eq!(reward_variance(&[vec![3.0]], 1), 0.0);
        // {0, 1}: np.var 0.25 (ddof 1: 0.5); {2, 2, 2}: 0; mean of [0.25, 0.0, 0.0].
        let g = vec![vec![0.0, 1.0], vec![2.0, 2.0, 2.0], vec![7.0]];
        assert_eq!(reward_variance(&g, 0), 0.25 / 3.0);
        assert_eq!(reward_variance(&g, 1), 0.5 / 3.0);
        // ddof 2 leaves {0, 1} no degrees of freedom: 0.5 / 0 = inf; ddof 3 also makes
        // {2, 2, 2} 0 / 0 = nan.
        assert_eq!(reward_variance(&g, 2), f64::INFINITY);
        assert!(reward_variance(&g, 3).is_nan());
        assert_eq!(groups_without_dof(&g, 3), 2);
        assert_eq!(numpy_var(&[0.1, 0.2, 0.7], 0), 0.06888888888888887);
        assert_eq!(numpy_var(&[0.1, 0.2, 0.7, 0.3, 0.9], 1), 0.118);
        assert!(mean_reward(&[]).is_nan());
        assert_eq!(mean_reward(&[0.1, 0.2, 0.3]), 0.20000000000000004);
        // np.array([0.1] * 10, dtype=np.float32).sum() is 1.0 (eight accumulators);
        // adding left to right in float32 gives 1.0000001.
        assert_eq!(total_reward_f32(&[0.1f32; 10]), 1.0f32);
        assert_eq!(mean_reward_f32(&[0.1f32, 0.2, 0.3]), f64::from(0.2f32));
    }
}
