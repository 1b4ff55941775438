//! VAGEN's `reward_variance`: the mean over groups of the within-group variance of
//! total rewards (population variance by default, `ddof` configurable), where a group
//! of one contributes 0 and no groups at all give 0.0.

/// Variance of one group with `ddof` (0 = population). Groups with `len() <= ddof`
/// or a single member give 0.0, as VAGEN does for one-sample groups.
pub fn group_variance(xs: &[f64], ddof: usize) -> f64 {
    let n = xs.len();
    if n <= 1 || n <= ddof {
        return 0.0;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
    ss / (n - ddof) as f64
}

/// The warning for groups of two or more members that `ddof` leaves no degrees of
/// freedom (their variance is taken as 0.0), or `None` when there are none.
pub fn ddof_warning(groups: &[Vec<f64>], ddof: usize) -> Option<String> {
    let n = groups.iter().filter(|g| g.len() > 1 && g.len() <= ddof).count();
    (n > 0).then(|| {
        format!("reward_variance: {n} group(s) have no more than --ddof {ddof} rewards; their variance is taken as 0")
    })
}

/// Mean of the per-group variances; 0.0 when there are no groups.
pub fn reward_variance(groups: &[Vec<f64>], ddof: usize) -> f64 {
    let groups: Vec<&Vec<f64>> = groups.iter().filter(|g| !g.is_empty()).collect();
    if groups.is_empty() {
        return 0.0;
    }
    groups.iter().map(|g| group_variance(g, ddof)).sum::<f64>() / groups.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_definition() {
        assert_eq!(reward_variance(&[], 0), 0.0);
        assert_eq!(reward_variance(&[vec![1.0]], 0), 0.0);
        // {0, 1}: population variance 0.25; {2, 2, 2}: 0.
        assert_eq!(reward_variance(&[vec![0.0, 1.0], vec![2.0, 2.0, 2.0]], 0), 0.125);
        assert_eq!(group_variance(&[0.0, 1.0], 1), 0.5);
        assert_eq!(ddof_warning(&[vec![0.0, 1.0], vec![1.0]], 1), None);
        assert!(ddof_warning(&[vec![0.0, 1.0], vec![1.0], vec![2.0, 3.0, 4.0]], 2)
            .unwrap()
            .starts_with("reward_variance: 1 group(s)"));
    }
}
