//! Metrics over one VAGEN / verl training batch, grouped as VAGEN groups it.
//!
//! VAGEN's metrics group samples by `str(idx)` of their `group_idx`: two samples are in
//! one group when Python prints their ids the same. So `1` and `"1"` are one group
//! (`"1"`), while `1`, `1.0` and `True` are three (`"1"`, `"1.0"`, `"True"`); `None` and
//! `"None"` are one. Groups are kept in the order they were first seen, as Python's dict
//! keeps them. This is not how NeMo Gym groups (`pass_at_k` subsets follow dict-key
//! equality, where `1 == 1.0 == True`); that grouping lives in [`super::custom`].
//!
//! Built in: `reward_variance` and `mean_reward` (VAGEN's metric and its documented
//! example, see [`crate::stats::vagen`]) and `pass_at_k` over the groups. SQL metrics
//! see the batch as a `rollouts` table (see [`batch_frame`]).

use polars::prelude::*;

use super::pass_at_k::{self, Rollout, Score};
use crate::error::Result;
use crate::ingest::batch::{GroupId, Sample, Scores};
use crate::json::Json;
use crate::python_float::{self, numpy_float32};
use crate::stats::vagen;

/// The metrics computed without SQL, in their default order.
pub const BUILTINS: [&str; 3] = ["reward_variance", "mean_reward", "pass_at_k"];

/// Python's `str()` of a group id: ints by their digits, floats as `repr` writes them
/// (`1.0`, `2.5`, `1e-05`, `inf`, `nan`), 32-bit floats as numpy prints them, `True` /
/// `False`, text as itself, `None`.
pub fn group_key(g: &GroupId) -> String {
    match g {
        GroupId::None => "None".into(),
        GroupId::Bool(true) => "True".into(),
        GroupId::Bool(false) => "False".into(),
        GroupId::Int(digits) => digits.clone(),
        GroupId::Float(f) => python_float::repr(*f),
        GroupId::Float32(f) => numpy_float32(*f),
        GroupId::Str(s) => s.clone(),
    }
}

/// A batch grouped by [`group_key`].
#[derive(Debug, Clone, PartialEq)]
pub struct Grouped {
    /// Each group's key, in first-seen order.
    pub keys: Vec<String>,
    /// Each group's total rewards, in row order.
    pub groups: Vec<Vec<f64>>,
    /// Each row's group (an index into `keys`).
    pub group_of: Vec<usize>,
    /// Each row's total reward (`float(reward)` of numpy's row sum).
    pub rewards: Vec<f64>,
    /// `float(np.mean(total_rewards))`: NaN for an empty batch.
    pub mean_reward: f64,
}

/// Totals each sample's scores as numpy does (float32 rows in float32) and groups them.
pub fn group(samples: &[Sample]) -> Grouped {
    // foldhash, not SipHash: group ids come from the user's own batch.
    let mut index: std::collections::HashMap<String, usize, foldhash::quality::RandomState> =
        std::collections::HashMap::with_capacity_and_hasher(samples.len() / 4, Default::default());
    let mut g =
        Grouped { keys: Vec::new(), groups: Vec::new(), group_of: Vec::new(), rewards: Vec::new(), mean_reward: 0.0 };
    let mut single: Vec<f32> = Vec::new();
    for s in samples {
        let reward = match &s.scores {
            Scores::Tokens(xs) => vagen::total_reward(xs),
            Scores::Tokens32(xs) => {
                let t = vagen::total_reward_f32(xs);
                single.push(t);
                f64::from(t)
            }
            Scores::Reward(r) => *r,
        };
        let key = group_key(&s.group);
        let at = match index.get(&key) {
            Some(&at) => at,
            None => {
                let at = g.keys.len();
                index.insert(key.clone(), at);
                g.keys.push(key);
                g.groups.push(Vec::new());
                at
            }
        };
        g.groups[at].push(reward);
        g.group_of.push(at);
        g.rewards.push(reward);
    }
    // The totals form one numpy array: float32 when every row was (a Parquet float
    // column), float64 otherwise.
    g.mean_reward = if !samples.is_empty() && single.len() == samples.len() {
        vagen::mean_reward_f32(&single)
    } else {
        vagen::mean_reward(&g.rewards)
    };
    g
}

/// `reward_variance` with its warning when `ddof` leaves groups no degrees of freedom.
pub fn reward_variance(g: &Grouped, ddof: usize) -> (f64, Option<String>) {
    let n = vagen::groups_without_dof(&g.groups, ddof);
    let warning = (n > 0).then(|| {
        format!(
            "reward_variance: {n} group(s) have no more than --ddof {ddof} rewards; numpy divides by zero there, so the metric is inf or NaN (written as null)"
        )
    });
    (vagen::reward_variance(&g.groups, ddof), warning)
}

/// `pass_at_k` with each group as a task and its total rewards as the `accuracy` score.
pub fn pass_at_k(g: &Grouped) -> Vec<(String, Json)> {
    let tasks: Vec<Vec<Rollout>> = g
        .groups
        .iter()
        .map(|rs| {
            rs.iter().map(|&r| Rollout { scores: vec![("accuracy".into(), Score::Float(r))], answer: None }).collect()
        })
        .collect();
    pass_at_k::metrics(&tasks, false, true)
        .into_iter()
        .filter(|(_, v)| matches!(v, Json::Float(_) | Json::Int(_)))
        .collect()
}

/// The batch as the `rollouts` table SQL metrics read: one row per sample, in file
/// order, with `agent` = `batch`, `_ng_task_index` = the sample's group number (groups
/// numbered from 0 in first-seen order), `group_id` = the group's key as Python's
/// `str()` writes it, `_ng_rollout_index` = the sample's place within its group,
/// `reward` = its total reward, and `mask_sample` = false.
pub fn batch_frame(g: &Grouped) -> Result<DataFrame> {
    let n = g.rewards.len();
    let mut rollout = Vec::with_capacity(n);
    let mut seen = vec![0i64; g.keys.len()];
    for &k in &g.group_of {
        rollout.push(seen[k]);
        seen[k] += 1;
    }
    Ok(DataFrame::new(
        n,
        vec![
            Column::new("_ng_task_index".into(), g.group_of.iter().map(|&k| k as i64).collect::<Vec<i64>>()),
            Column::new("_ng_rollout_index".into(), rollout),
            Column::new("group_id".into(), g.group_of.iter().map(|&k| g.keys[k].as_str()).collect::<Vec<&str>>()),
            Column::new("agent".into(), vec!["batch"; n]),
            Column::new("mask_sample".into(), vec![false; n]),
            Column::new("reward".into(), g.rewards.clone()),
        ],
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(group: GroupId, r: f64) -> Sample {
        Sample { group, scores: Scores::Reward(r) }
    }

    #[test]
    fn groups_by_python_str() {
        let int = |s: &str| GroupId::Int(s.into());
        let rows = vec![
            sample(int("1"), 1.0),
            sample(GroupId::Str("1".into()), 0.0),
            sample(GroupId::Float(1.0), 5.0),
            sample(GroupId::Bool(true), 2.0),
            sample(GroupId::None, 3.0),
            sample(GroupId::Str("None".into()), 4.0),
            sample(GroupId::Float(1e-5), 1.0),
            sample(GroupId::Str("1e-05".into()), 1.0),
            sample(GroupId::Float32(0.1), 1.0),
            sample(GroupId::Float(0.1), 1.0),
            sample(GroupId::Float(f64::NAN), 1.0),
            sample(GroupId::Float(f64::NAN), 2.0),
        ];
        let g = group(&rows);
        assert_eq!(g.keys, ["1", "1.0", "True", "None", "1e-05", "0.1", "nan"]);
        assert_eq!(g.groups[0], [1.0, 0.0]);
        assert_eq!(g.groups[3], [3.0, 4.0]);
        // A float32 0.1 prints `0.1` as numpy does, joining the float64 0.1.
        assert_eq!(g.groups[5].len(), 2);
        // Python's nan != nan, but both print `nan`: one group.
        assert_eq!(g.groups[6], [1.0, 2.0]);
        assert_eq!(g.group_of, [0, 0, 1, 2, 3, 3, 4, 4, 5, 5, 6, 6]);
        // Variances {1,0}: 0.25, {5}: 0, {2}: 0, {3,4}: 0.25, {1,1}: 0, {1,1}: 0, {1,2}: 0.25.
        assert_eq!(reward_variance(&g, 0).0, 0.75 / 7.0);
        let f = batch_frame(&g).unwrap();
        assert_eq!(f.column("group_id").unwrap().str().unwrap().get(1), Some("1"));
        assert_eq!(f.column("_ng_rollout_index").unwrap().i64().unwrap().get(1), Some(1));
    }

    #[test]
    fn sums_rows_and_means() {
        let rows = vec![
            Sample { group: GroupId::Int("0".into()), scores: Scores::Tokens(vec![0.1, 0.2, 0.0]) },
            Sample { group: GroupId::Int("0".into()), scores: Scores::Tokens(vec![1.0, 0.0, 0.0]) },
        ];
        let g = group(&rows);
        assert_eq!(g.rewards, [0.30000000000000004, 1.0]);
        assert_eq!(g.mean_reward, 0.65);
        assert!(group(&[]).mean_reward.is_nan());
        assert_eq!(reward_variance(&group(&[]), 0).0, 0.0);
        let (v, w) = reward_variance(&g, 2);
        assert_eq!(v, f64::INFINITY);
        assert!(w.unwrap().starts_with("reward_variance: 1 group(s)"));
    }
}
