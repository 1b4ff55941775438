//! pass@k, majority@k and their spread, exactly as NeMo Gym 0.7.0's
//! `compute_pass_majority_metrics` + `add_avg_sample_std_dev` compute them.
//!
//! Python's numeric semantics are reproduced where they change bits: ints stay exact
//! until a float appears, `sum()` of floats is Neumaier-compensated (CPython ≥ 3.12),
//! `int / int` is a correctly rounded division, `math.comb` is exact.

use std::collections::HashMap;

use crate::json::Json;

/// A score as Python holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Score {
    Int(i64),
    Float(f64),
}

impl Score {
    pub fn f(self) -> f64 {
        match self {
            Score::Int(i) => i as f64,
            Score::Float(f) => f,
        }
    }
    /// The value as JSON, an int staying an int.
    pub fn json(self) -> Json {
        match self {
            Score::Int(i) => Json::Int(i),
            Score::Float(f) => Json::Float(f),
        }
    }
}

/// One rollout: named scores, and the extracted answer when an answer key is used
/// (`Some(None)` = no answer).
#[derive(Debug, Clone)]
pub struct Rollout {
    pub scores: Vec<(String, Score)>,
    pub answer: Option<Option<String>>,
}

/// CPython's `sum()` over ints and floats.
pub fn py_sum(items: impl IntoIterator<Item = Score>) -> Score {
    let mut it = items.into_iter();
    let mut i_acc: i64 = 0;
    let (mut hi, mut lo);
    loop {
        match it.next() {
            None => return Score::Int(i_acc),
            Some(Score::Int(i)) => i_acc += i,
            Some(Score::Float(x)) => {
                hi = i_acc as f64 + x;
                lo = 0.0;
                break;
            }
        }
    }
    for s in it {
        match s {
            Score::Float(x) => {
                let t = hi + x;
                if hi.abs() >= x.abs() {
                    lo += (hi - t) + x;
                } else {
                    lo += (x - t) + hi;
                }
                hi = t;
            }
            Score::Int(i) => hi += i as f64,
        }
    }
    if lo != 0.0 && lo.is_finite() {
        hi += lo;
    }
    Score::Float(hi)
}

/// Python's `a / b` for a sum and a count.
fn div(s: Score, n: usize) -> f64 {
    s.f() / n as f64
}

/// 1 - C(n-c, k) / C(n, k) with exact binomials when they fit in u128.
fn unbiased_pass(n: u64, incorrect: u64, k: u64) -> f64 {
    fn comb(n: u64, k: u64) -> Option<u128> {
        let k = k.min(n - k);
        let mut r: u128 = 1;
        for i in 0..k {
            r = r.checked_mul((n - i) as u128)? / (i + 1) as u128;
        }
        Some(r)
    }
    match (comb(incorrect, k), comb(n, k)) {
        (Some(a), Some(b)) => 1.0 - (a as f64) / (b as f64),
        _ => {
            let mut ratio = 1.0;
            for i in 0..k {
                ratio *= (incorrect - i) as f64 / (n - i) as f64;
            }
            1.0 - ratio
        }
    }
}

/// One task's pass@k as NeMo Gym computes it from the task's scores in rollout order:
/// for 0/1 scores the unbiased estimator `1 - C(n-c, k) / C(n, k)` (1 when fewer than
/// `k` are incorrect), otherwise the best of the first `k` scores. `None` when the task
/// has fewer than `k` scores (NeMo Gym leaves such tasks out).
pub fn task_pass_at_k(vals: &[Score], k: usize) -> Option<Score> {
    if vals.is_empty() || k > vals.len() {
        return None;
    }
    let binary = vals.iter().all(|v| v.f() == 0.0 || v.f() == 1.0);
    if binary {
        let n = vals.len() as u64;
        let incorrect = vals.iter().filter(|v| v.f() == 0.0).count() as u64;
        if incorrect < k as u64 {
            Some(Score::Float(1.0))
        } else {
            Some(Score::Float(unbiased_pass(n, incorrect, k as u64)))
        }
    } else {
        vals[..k].iter().copied().fold(None::<Score>, |m, v| match m {
            Some(m) if m.f() >= v.f() => Some(m),
            _ => Some(v),
        })
    }
}

fn get(r: &Rollout, name: &str) -> Option<Score> {
    r.scores.iter().find(|(n, _)| n == name).map(|(_, s)| *s)
}

/// The pass@k family for one agent. `tasks[i]` is task i's rollouts in order.
/// Returns keys in NeMo Gym's order, including `per_sample_aggregate` (an object).
pub fn metrics(tasks: &[Vec<Rollout>], with_answers: bool, avg_sample_std_dev: bool) -> Vec<(String, Json)> {
    let mut out: Vec<(String, Json)> = Vec::new();
    if tasks.is_empty() {
        return out;
    }
    let max_k = tasks.iter().map(|t| t.len()).max().unwrap_or(0);
    // Scores per rollout, with `no_answer` injected when answers are used.
    let tasks: Vec<Vec<Rollout>> = tasks
        .iter()
        .map(|t| {
            t.iter()
                .map(|r| {
                    let mut r = r.clone();
                    if with_answers {
                        let none = matches!(r.answer, Some(None) | None);
                        r.scores.push(("no_answer".to_string(), Score::Int(i64::from(none))));
                    }
                    r
                })
                .collect()
        })
        .collect();
    let mut names: Vec<String> = tasks.iter().flatten().flat_map(|r| r.scores.iter().map(|(n, _)| n.clone())).collect();
    names.sort();
    names.dedup();
    for k in 1..=max_k {
        for name in &names {
            at_k(&tasks, name, k, with_answers, &mut out);
        }
    }
    let per_sample = per_sample(&tasks, &names, max_k);
    out.push((
        "per_sample_aggregate".to_string(),
        Json::Obj(
            per_sample
                .iter()
                .map(|(n, v)| {
                    (std::sync::Arc::from(n.as_str()), Json::Arr(v.iter().map(|&x| Json::Float(x)).collect()))
                })
                .collect(),
        ),
    ));
    if max_k > 1 {
        across_runs(&per_sample, &names, max_k, &mut out);
        if avg_sample_std_dev {
            sample_std_devs(&tasks, &names, max_k, &mut out);
        }
    }
    out
}

/// `pass@k`, `pass@1[avg-of-k]` and (with answers) `majority@k` of score `name`, each
/// over the tasks that have it, into `out`.
fn at_k(tasks: &[Vec<Rollout>], name: &str, k: usize, with_answers: bool, out: &mut Vec<(String, Json)>) {
    let mut pass: Vec<Score> = Vec::new();
    for t in tasks {
        let vals: Vec<Score> = t.iter().filter_map(|r| get(r, name)).collect();
        pass.extend(task_pass_at_k(&vals, k));
    }
    if !pass.is_empty() {
        let n = pass.len();
        out.push((format!("pass@{k}/{name}"), Json::Float(100.0 * py_sum(pass).f() / n as f64)));
    }
    let mut avg: Vec<Score> = Vec::new();
    for t in tasks {
        let vals: Vec<Score> = t.iter().take(k).filter_map(|r| get(r, name)).collect();
        if !vals.is_empty() {
            let n = vals.len();
            avg.push(Score::Float(div(py_sum(vals), n)));
        }
    }
    if !avg.is_empty() {
        let n = avg.len();
        out.push((format!("pass@1[avg-of-{k}]/{name}"), Json::Float(100.0 * py_sum(avg).f() / n as f64)));
    }
    if with_answers {
        let maj: Vec<Score> = tasks.iter().map(|t| majority(&t[..k.min(t.len())], name)).collect();
        let n = maj.len();
        out.push((format!("majority@{k}/{name}"), Json::Float(100.0 * py_sum(maj).f() / n as f64)));
    }
}

/// One task's majority vote over its first rollouts `rs`: the mean score of the most
/// common (answer, score) pairs (ties all count, in first-seen order); 0 without an
/// answer with score `name`.
fn majority(rs: &[Rollout], name: &str) -> Score {
    let valid: Vec<(String, Score)> = rs
        .iter()
        .filter_map(|r| match (&r.answer, get(r, name)) {
            (Some(Some(a)), Some(s)) => Some((a.clone(), s)),
            _ => None,
        })
        .collect();
    if valid.is_empty() {
        return Score::Int(0);
    }
    // Counter over (answer, score) pairs, in first-seen order.
    let mut order: Vec<(String, Score)> = Vec::new();
    let mut counts: HashMap<(String, u64), usize> = HashMap::new();
    for (a, s) in &valid {
        let key = (a.clone(), s.f().to_bits());
        let c = counts.entry(key).or_insert(0);
        if *c == 0 {
            order.push((a.clone(), *s));
        }
        *c += 1;
    }
    let max = *counts.values().max().unwrap();
    let tied: Vec<Score> =
        order.iter().filter(|(a, s)| counts[&(a.clone(), s.f().to_bits())] == max).map(|(_, s)| *s).collect();
    let n = tied.len();
    Score::Float(div(py_sum(tied), n))
}

/// Per-sample aggregates: for each score, pass@1 using only rollout i of each task, for
/// each i that some task has.
fn per_sample(tasks: &[Vec<Rollout>], names: &[String], max_k: usize) -> Vec<(String, Vec<f64>)> {
    let mut per_sample: Vec<(String, Vec<f64>)> = Vec::new();
    for name in names {
        let mut v = Vec::new();
        for run in 0..max_k {
            let scores: Vec<Score> = tasks.iter().filter_map(|t| t.get(run).and_then(|r| get(r, name))).collect();
            if !scores.is_empty() {
                let n = scores.len();
                v.push(100.0 * py_sum(scores).f() / n as f64);
            }
        }
        if !v.is_empty() {
            per_sample.push((name.clone(), v));
        }
    }
    per_sample
}

/// The standard deviation and error across runs of the first k per-sample aggregates,
/// for k from 2, into `out`.
fn across_runs(per_sample: &[(String, Vec<f64>)], names: &[String], max_k: usize, out: &mut Vec<(String, Json)>) {
    for k in 2..=max_k {
        for name in names {
            let Some((_, runs)) = per_sample.iter().find(|(n, _)| n == name) else { continue };
            let runs = &runs[..runs.len().min(k)];
            if runs.len() >= 2 {
                let n = runs.len();
                let mean = py_sum(runs.iter().map(|&x| Score::Float(x))).f() / n as f64;
                let var = py_sum(runs.iter().map(|&x| Score::Float((x - mean) * (x - mean)))).f() / (n - 1) as f64;
                let sd = var.sqrt();
                out.push((format!("pass@1[avg-of-{k}]/{name}/std_dev_across_runs"), Json::Float(sd)));
                out.push((
                    format!("pass@1[avg-of-{k}]/{name}/std_err_across_runs"),
                    Json::Float(sd / (n as f64).sqrt()),
                ));
            }
        }
    }
}

/// The mean over tasks of each task's sample standard deviation of its first k scores,
/// for k from 2, into `out`.
fn sample_std_devs(tasks: &[Vec<Rollout>], names: &[String], max_k: usize, out: &mut Vec<(String, Json)>) {
    for k in 2..=max_k {
        for name in names {
            let mut sds: Vec<Score> = Vec::new();
            for t in tasks {
                let vals: Vec<Score> = t.iter().take(k).filter_map(|r| get(r, name)).collect();
                if vals.len() >= 2 {
                    let n = vals.len();
                    let m = div(py_sum(vals.iter().copied()), n);
                    let var = py_sum(vals.iter().map(|v| Score::Float((v.f() - m) * (v.f() - m)))).f() / (n - 1) as f64;
                    sds.push(Score::Float(var.sqrt()));
                }
            }
            if !sds.is_empty() {
                let n = sds.len();
                out.push((format!("pass@1[avg-of-{k}]/{name}/avg_sample_std_dev"), Json::Float(div(py_sum(sds), n))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_sum_semantics() {
        assert_eq!(py_sum([Score::Int(1), Score::Int(2)]), Score::Int(3));
        // Neumaier: 1e16 + 1 + -1e16 is exactly 1 with compensation.
        assert_eq!(py_sum([Score::Float(1e16), Score::Float(1.0), Score::Float(-1e16)]), Score::Float(1.0));
    }

    #[test]
    fn unbiased_estimator() {
        // n=4, 2 incorrect, k=2: 1 - C(2,2)/C(4,2) = 1 - 1/6.
        assert_eq!(unbiased_pass(4, 2, 2), 1.0 - 1.0 / 6.0);
    }
}
