//! Tasks or repeats? How much of the spread of task means is repeat-to-repeat noise,
//! and what more repeats would buy against more tasks.
//!
//! A task's mean over `k_i` repeats has variance `σ_b² + σ_i²/k_i` across tasks: the
//! task-to-task spread `σ_b²` plus the repeat noise left in the mean (E. Miller, "Adding
//! Error Bars to Evals", 2024, the variance-reduction section). With `s_i²` the sample
//! variance (ddof 1) of task `i`'s repeats and `V` the sample variance of the task means
//! (over the tasks with two or more repeats):
//!
//! - repeat share `= W / V`, `W = mean_i(s_i²/k_i)` (the repeat-noise part of `V`);
//! - `σ_b² = max(0, V − W)`, `σ_w² = mean_i(s_i²)`, `K = mean_i(k_i)`;
//! - the standard error with `n` tasks and `K` repeats is `√((σ_b² + σ_w²/K)/n)`, so
//!   doubling the repeats narrows the interval by `√((σ_b² + σ_w²/2K)/(σ_b² + σ_w²/K))`
//!   and doubling the tasks (the same number of new rollouts) by `1/√2`.

use super::sum::pairwise_sum;

/// What the repeats say about the noise of one run's score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RepeatShare {
    /// Tasks with two or more repeats (the ones used), and their mean repeat count.
    pub tasks: usize,
    pub repeats: f64,
    /// Share of the variance of task means that is repeat noise (`W / V`; may pass 1 by
    /// chance when tasks hardly differ).
    pub share: f64,
    /// Interval width relative to today with twice the repeats, and with twice the tasks.
    pub width_2x_repeats: f64,
    pub width_2x_tasks: f64,
}

fn var(x: &[f64]) -> f64 {
    let m = pairwise_sum(x) / x.len() as f64;
    pairwise_sum(&x.iter().map(|v| (v - m) * (v - m)).collect::<Vec<_>>()) / (x.len() as f64 - 1.0)
}

/// From each task's repeat values; `None` with fewer than two tasks of two or more
/// repeats, or when the task means do not vary.
pub fn repeat_share(tasks: &[Vec<f64>]) -> Option<RepeatShare> {
    let used: Vec<&Vec<f64>> = tasks.iter().filter(|v| v.len() >= 2).collect();
    if used.len() < 2 {
        return None;
    }
    let means: Vec<f64> = used.iter().map(|v| pairwise_sum(v) / v.len() as f64).collect();
    let within: Vec<f64> = used.iter().map(|v| var(v)).collect();
    let per_mean: Vec<f64> = used.iter().zip(&within).map(|(v, s)| s / v.len() as f64).collect();
    let n = used.len() as f64;
    let v = var(&means);
    if v <= 0.0 || !v.is_finite() {
        return None;
    }
    let w = pairwise_sum(&per_mean) / n;
    let sw = pairwise_sum(&within) / n;
    let k = used.iter().map(|v| v.len() as f64).sum::<f64>() / n;
    let sb = (v - w).max(0.0);
    let now = sb + sw / k;
    Some(RepeatShare {
        tasks: used.len(),
        repeats: k,
        share: w / v,
        width_2x_repeats: ((sb + sw / (2.0 * k)) / now).sqrt(),
        width_2x_tasks: std::f64::consts::FRAC_1_SQRT_2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pure_repeat_noise_and_none() {
        // Two tasks whose repeats differ but whose means are equal: no variance of means.
        assert_eq!(repeat_share(&[vec![0.0, 1.0], vec![1.0, 0.0]]), None);
        // Task means 0.25 and 0.75 (V = 0.125); s² = 0.25 each, W = 0.25/4: half of V.
        let r = repeat_share(&[vec![0.0, 0.0, 0.0, 1.0], vec![1.0, 1.0, 1.0, 0.0]]).unwrap();
        assert!((r.share - 0.5).abs() < 1e-15, "{r:?}");
        assert_eq!(r.repeats, 4.0);
        assert!(r.width_2x_repeats < 1.0 && r.width_2x_repeats > r.width_2x_tasks);
    }
}

#[cfg(test)]
mod reference {
    use super::super::test_data::{agree, compare_ref};
    use super::*;

    /// The decomposition written out with numpy.
    #[test]
    fn matches_numpy() {
        for c in compare_ref("repeats") {
            let r = repeat_share(&c.parts).unwrap();
            agree(r.share, c.expected[0], 1e-12, 0.0, &c.case);
            agree(r.width_2x_repeats, c.expected[1], 1e-12, 0.0, &c.case);
        }
    }
}
