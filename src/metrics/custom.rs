//! Custom metrics: named computations over one agent's measured rollouts
//! grouped by task, merged into `agent_metrics`; and key-metric selection.
//!
//! Built in: `pass_at_k` (NeMo Gym's `compute_pass_majority_metrics` +
//! `add_avg_sample_std_dev` + `compute_subset_metrics`) and `reward_variance` (VAGEN).
//! SQL metrics from `queries/metrics/*.sql` are run by the query layer and merged by
//! label; this module only names them.

use std::collections::HashMap;
use std::sync::Arc;

use super::pass_at_k::{self, Rollout, Score};
use super::warnings::Warnings;
use crate::error::{Error, Msg, Opt, Result};
use crate::ingest::{tag, RolloutTable, Source};
use crate::json::{Json, Key};
use crate::python_float;

/// A selected metric and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricSpec {
    PassAtK {
        answer_key: Option<String>,
        subset_key: Option<String>,
    },
    RewardVariance {
        ddof: usize,
    },
    /// A SQL metric (file name without `.sql`, and its text).
    Sql {
        name: String,
        sql: String,
    },
}

/// Built-in metric names.
pub const BUILTINS: [&str; 2] = ["pass_at_k", "reward_variance"];

/// Rows grouped by task (sorted by task index), each task's rows by rollout index —
/// so "the first k rollouts" of pass@k do not depend on the order rollouts finished in.
pub fn tasks_of(t: &RolloutTable, rows: &[usize]) -> Vec<Vec<usize>> {
    // The table is sorted by (task, rollout): rows given in table order split into runs.
    if rows.windows(2).all(|w| w[0] < w[1]) {
        let mut out: Vec<Vec<usize>> = Vec::new();
        for (i, &r) in rows.iter().enumerate() {
            if i == 0 || t.task[rows[i - 1]] != t.task[r] {
                out.push(Vec::new());
            }
            out.last_mut().expect("a group was opened").push(r);
        }
        if out.iter().all(|v| v.windows(2).all(|w| t.rollout[w[0]] <= t.rollout[w[1]]))
            && out.windows(2).all(|w| t.task[w[0][0]] < t.task[w[1][0]])
        {
            return out;
        }
    }
    let mut by: std::collections::BTreeMap<i64, Vec<usize>> = std::collections::BTreeMap::new();
    for &r in rows {
        by.entry(t.task[r]).or_default().push(r);
    }
    by.into_values()
        .map(|mut v| {
            v.sort_by_key(|&r| t.rollout[r]);
            v
        })
        .collect()
}

fn field_value(t: &RolloutTable, name: &str, r: usize) -> Option<Json> {
    let c = t.column(Source::Top, name)?;
    let c = &t.columns[c];
    match c.tags[r] {
        tag::INT => Some(Json::Int(c.int(r))),
        tag::FLOAT => Some(Json::Float(c.nums[r])),
        tag::BOOL => Some(Json::Bool(c.nums[r] != 0.0)),
        tag::STR => c.str_at(r).map(|s| Json::Str(s.to_string())),
        tag::LONG_STR => Some(Json::Str(format!("\u{0}long-string-row-{r}"))),
        _ => None,
    }
}

/// An answer as a comparable key. Python's `Counter` treats `1`, `1.0` and `True` as one
/// answer (equal and equally hashed), so numbers and bools compare by numeric value.
fn answer_repr(v: &Json) -> String {
    let v = match v {
        Json::Bool(b) => Json::Float(if *b { 1.0 } else { 0.0 }),
        Json::Int(i) => Json::Float(*i as f64),
        other => other.clone(),
    };
    let mut out = Vec::new();
    crate::json::write_compact(&mut out, &v);
    String::from_utf8(out).unwrap_or_default()
}

/// The key of a number in a Python dict, as text: equal numbers (`1`, `1.0`, and `True`
/// as 1) share it. It never starts with `s`, so text keys can be told apart by one.
pub fn float_key(x: f64) -> String {
    format!("n{}", (x + 0.0).to_bits())
}

/// [`float_key`] of an integer; integers a double cannot hold keep their digits.
pub fn int_key(i: i64) -> String {
    if (i as f64) as i64 == i {
        float_key(i as f64)
    } else {
        format!("i{i}")
    }
}

/// The reward of a row as a pass@k score (bools as 0/1); None when absent or null.
fn reward_score(t: &RolloutTable, r: usize) -> Option<Score> {
    let c = &t.columns[t.column(Source::Top, "reward")?];
    match c.tags[r] {
        tag::INT | tag::BOOL => Some(Score::Int(c.int(r))),
        tag::FLOAT => Some(Score::Float(c.nums[r])),
        _ => None,
    }
}

/// Computes one built-in metric for one agent; SQL metrics return nothing here.
/// Rollouts without a numeric reward (null, missing, a string) are left out of pass@k
/// with a warning; NeMo Gym 0.7.0 stops with a `TypeError` / `KeyError` on them.
pub fn compute(
    m: &MetricSpec,
    t: &RolloutTable,
    tasks: &[Vec<usize>],
    warn: &mut Warnings,
) -> Result<Vec<(String, Json)>> {
    match m {
        MetricSpec::PassAtK { answer_key, subset_key } => {
            let unscored: Vec<usize> =
                tasks.iter().flatten().copied().filter(|&r| reward_score(t, r).is_none()).collect();
            if let Some(&first) = unscored.first() {
                warn.add(format!(
                    "pass_at_k: {} rollout(s) have no numeric reward (first: {}); they are left out of pass@k",
                    unscored.len(),
                    t.describe(first)
                ));
            }
            let build = |rows: &Vec<usize>| -> Vec<Rollout> {
                rows.iter()
                    .map(|&r| Rollout {
                        scores: reward_score(t, r).map(|s| vec![("accuracy".to_string(), s)]).unwrap_or_default(),
                        answer: answer_key
                            .as_ref()
                            .map(|k| field_value(t, k, r).filter(|v| *v != Json::Null).map(|v| answer_repr(&v))),
                    })
                    .collect()
            };
            let all: Vec<Vec<Rollout>> = tasks.iter().map(build).collect();
            let mut out = pass_at_k::metrics(&all, answer_key.is_some(), true);
            if let Some(sk) = subset_key {
                // Subsets are the keys of a Python dict: numbers and bools are one key when
                // equal (`1`, `1.0` and `True`), text is another kind of key, and a key is
                // named by `str()` of the value that first made it.
                let mut order: Vec<(String, String)> = Vec::new();
                let mut subsets: HashMap<String, Vec<Vec<Rollout>>> = HashMap::new();
                for (rows, built) in tasks.iter().zip(all) {
                    // The first rollout with a truthy value names the task's subset.
                    let found = rows.iter().find_map(|&r| match field_value(t, sk, r) {
                        Some(Json::Str(s)) if !s.is_empty() => Some((format!("s{s}"), s)),
                        Some(Json::Int(i)) if i != 0 => Some((int_key(i), i.to_string())),
                        Some(Json::Float(f)) if f != 0.0 => Some((float_key(f), python_float::repr(f))),
                        Some(Json::Bool(true)) => Some((float_key(1.0), "True".to_string())),
                        _ => None,
                    });
                    if let Some((key, name)) = found {
                        if !subsets.contains_key(&key) {
                            order.push((key.clone(), name));
                        }
                        subsets.entry(key).or_default().push(built);
                    }
                }
                for (key, n) in order {
                    for (k, v) in pass_at_k::metrics(&subsets[&key], answer_key.is_some(), false) {
                        if k == "per_sample_aggregate" {
                            continue;
                        }
                        out.push((format!("{n}/{k}"), v));
                    }
                }
            }
            Ok(out)
        }
        MetricSpec::RewardVariance { ddof } => {
            let groups: Vec<Vec<f64>> = tasks
                .iter()
                .map(|rows| rows.iter().filter_map(|&r| reward_score(t, r).map(|s| s.f())).collect())
                .collect();
            if let Some(m) = crate::stats::variance::ddof_warning(&groups, *ddof) {
                warn.add(m);
            }
            Ok(vec![("reward_variance".to_string(), Json::Float(crate::stats::reward_variance(&groups, *ddof)))])
        }
        MetricSpec::Sql { .. } => Ok(Vec::new()),
    }
}

/// Parses `--metric NAME` values (built-ins; SQL names are resolved by the caller).
pub fn builtin(
    name: &str,
    answer_key: Option<&str>,
    subset_key: Option<&str>,
    ddof: usize,
) -> Result<Option<MetricSpec>> {
    Ok(match name {
        "pass_at_k" => Some(MetricSpec::PassAtK {
            answer_key: answer_key.map(|s| s.to_string()),
            subset_key: subset_key.map(|s| s.to_string()),
        }),
        "reward_variance" => Some(MetricSpec::RewardVariance { ddof }),
        _ => None,
    })
}

fn glob_match(pat: &str, s: &str) -> bool {
    // `*` matches any run of characters.
    let parts: Vec<&str> = pat.split('*').collect();
    if parts.len() == 1 {
        return pat == s;
    }
    let mut rest = s;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            if !rest.starts_with(p) {
                return false;
            }
            rest = &rest[p.len()..];
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else if let Some(at) = rest.find(p) {
            rest = &rest[at + p.len()..];
        } else {
            return false;
        }
    }
    true
}

/// Selects key metrics from `agent_metrics`. Patterns: exact names, `*`
/// globs, or a highest-k pattern containing `{k}` (entries at the largest k, without
/// the `std_dev_across_runs` / `std_err_across_runs` / `avg_sample_std_dev` companions).
/// No pattern: every `mean/*` key.
pub fn key_metrics(agent: &Json, patterns: &[String]) -> Json {
    let Json::Obj(items) = agent else { return Json::obj() };
    let mut out: Vec<(Key, Json)> = Vec::new();
    // Keys already taken, for a linear pass over agents with very many metrics.
    let mut seen: foldhash::HashSet<Key> = foldhash::HashSet::default();
    let mut add = |k: &Key, v: &Json, out: &mut Vec<(Key, Json)>| {
        if seen.insert(k.clone()) {
            out.push((k.clone(), v.clone()));
        }
    };
    if patterns.is_empty() {
        for (k, v) in items {
            if k.starts_with("mean/") {
                add(k, v, &mut out);
            }
        }
        return Json::Obj(out);
    }
    for pat in patterns {
        if let Some((pre, post)) = pat.split_once("{k}") {
            let mut found: Vec<(u64, &Key, &Json)> = Vec::new();
            for (k, v) in items {
                let Some(rest) = k.strip_prefix(pre) else { continue };
                let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                if digits.is_empty() {
                    continue;
                }
                let Some(after) = rest[digits.len()..].strip_prefix(post) else { continue };
                let Some(score) = after.strip_prefix('/') else { continue };
                if score.is_empty()
                    || ["std_dev_across_runs", "std_err_across_runs", "avg_sample_std_dev"]
                        .iter()
                        .any(|s| score.ends_with(s))
                {
                    continue;
                }
                found.push((digits.parse().unwrap_or(0), k, v));
            }
            if let Some(max) = found.iter().map(|f| f.0).max() {
                for (kk, k, v) in found {
                    if kk == max {
                        add(k, v, &mut out);
                    }
                }
            }
        } else {
            for (k, v) in items {
                if glob_match(pat, k) {
                    add(k, v, &mut out);
                }
            }
        }
    }
    Json::Obj(out)
}

/// Errors for an unknown metric name.
pub fn unknown(name: &str, sql_names: &[String]) -> Error {
    let mut known: Vec<String> = BUILTINS.iter().map(|s| s.to_string()).collect();
    known.extend(sql_names.iter().cloned());
    no_such_metric(name, &known)
}

/// `--metric NAME` (`metrics=` in Python) names no metric of `known`.
pub fn no_such_metric(name: &str, known: &[impl AsRef<str>]) -> Error {
    let known: Vec<&str> = known.iter().map(AsRef::as_ref).collect();
    let msg = Msg::default().opt(Opt::text("metrics", name.to_string()).flag("metric"));
    Error::refused(None, msg.text(format!(": no such metric; known: {}", known.join(", "))))
}

#[allow(dead_code)]
fn _key(s: &str) -> Key {
    Arc::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highest_k_selection() {
        let mut a = Json::obj();
        for (k, v) in [
            ("mean/reward", 0.5),
            ("pass@1/accuracy", 10.0),
            ("pass@4/accuracy", 40.0),
            ("pass@4/no_answer", 1.0),
            ("pass@1[avg-of-4]/accuracy", 30.0),
            ("pass@1[avg-of-4]/accuracy/std_dev_across_runs", 3.0),
        ] {
            a.set(k, Json::Float(v));
        }
        let k = key_metrics(&a, &["pass@{k}".to_string()]);
        assert_eq!(k, {
            let mut e = Json::obj();
            e.set("pass@4/accuracy", Json::Float(40.0));
            e.set("pass@4/no_answer", Json::Float(1.0));
            e
        });
        let k = key_metrics(&a, &["pass@1[avg-of-{k}]".to_string(), "mean/*".to_string()]);
        assert_eq!(k.get("pass@1[avg-of-4]/accuracy"), Some(&Json::Float(30.0)));
        assert!(k.get("pass@1[avg-of-4]/accuracy/std_dev_across_runs").is_none());
        assert_eq!(k.get("mean/reward"), Some(&Json::Float(0.5)));
        assert_eq!(key_metrics(&a, &[]).get("mean/reward"), Some(&Json::Float(0.5)));
    }
}
