//! `perf_summary`: efficiency statistics over the rollouts' `ng_perf` records,
//! as NeMo Gym's `compute_perf_summary` computes them with Python's `statistics` module
//! (exactly rounded `fmean`, `pstdev`; `median` keeps ints for odd counts).

use std::sync::Arc;

use super::pass_at_k::{py_sum, Score};
use crate::ingest::{tag, RolloutTable, Source};
use crate::json::{Json, Key};
use crate::stats;

use crate::stats::fsum;

fn median(v: &[Score]) -> Score {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.f().total_cmp(&b.f()));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        Score::Float((s[n / 2 - 1].f() + s[n / 2].f()) / 2.0)
    }
}

fn fmean(v: &[Score]) -> f64 {
    fsum(v.iter().map(|x| x.f())) / v.len() as f64
}

/// Population standard deviation, computed around an exactly rounded mean with a
/// compensated sum of squares (Python's `statistics.pstdev` is exact; this agrees to
/// well within 1e-12 relative).
fn pstdev(v: &[Score]) -> f64 {
    if v.iter().all(|x| matches!(x, Score::Int(_))) {
        // Exact in integers: var = (n*S2 - S1^2) / n^2.
        let n = v.len() as i128;
        let s1: i128 = v.iter().map(|x| x.f() as i128).sum();
        let s2: i128 = v.iter().map(|x| (x.f() as i128) * (x.f() as i128)).sum();
        let num = n * s2 - s1 * s1;
        return ((num as f64) / ((n * n) as f64)).sqrt();
    }
    let m = fmean(v);
    let ss = fsum(v.iter().map(|x| (x.f() - m) * (x.f() - m)));
    (ss / v.len() as f64).sqrt()
}

fn quantile(v: &[Score], q: f64) -> f64 {
    let mut s: Vec<f64> = v.iter().map(|x| x.f()).collect();
    stats::sort_f64(&mut s);
    stats::quantile_linear_sorted(&s, q)
}

/// The `perf_summary` block for the given rows, or None when no row has `ng_perf`.
pub fn perf_summary(t: &RolloutTable, rows: &[usize]) -> Option<Json> {
    let with: Vec<usize> = rows.iter().copied().filter(|&r| t.perf[r]).collect();
    if rows.is_empty() || with.is_empty() {
        return None;
    }
    let total_n = rows.len() as f64;
    let col = |name: &str| t.column(Source::Perf, name);
    let values = |name: &str| -> Vec<Score> {
        let Some(c) = col(name) else { return Vec::new() };
        let c = &t.columns[c];
        with.iter()
            .filter_map(|&r| match c.tags[r] {
                tag::INT | tag::BOOL => Some(Score::Int(c.int(r))),
                tag::FLOAT => Some(Score::Float(c.nums[r])),
                _ => None,
            })
            .collect()
    };
    let mut items: Vec<(Key, Json)> = Vec::new();
    let mut put = |k: String, v: Json| items.push((Arc::from(k.as_str()), v));
    put("overall_observability_coverage".into(), Json::Float(with.len() as f64 / total_n));
    let positive = match col("token_observability_coverage") {
        Some(c) => {
            let c = &t.columns[c];
            with.iter().filter(|&&r| tag::is_numeric(c.tags[r]) && c.float(r) > 0.0).count()
        }
        None => 0,
    };
    put("token_observability_coverage".into(), Json::Float(positive as f64 / total_n));
    for field in ["prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens"] {
        let v = values(field);
        if v.is_empty() {
            continue;
        }
        put(format!("mean_{field}"), Json::Float(fmean(&v)));
        put(format!("median_{field}"), median(&v).json());
        put(format!("total_{field}"), py_sum(v.iter().copied()).json());
    }
    let turns = values("num_turns");
    if !turns.is_empty() {
        put("mean_num_turns".into(), Json::Float(fmean(&turns)));
        put("median_num_turns".into(), median(&turns).json());
        put("std_num_turns".into(), Json::Float(pstdev(&turns)));
        let mn = turns.iter().copied().min_by(|a, b| a.f().total_cmp(&b.f())).unwrap();
        let mx = turns.iter().copied().max_by(|a, b| a.f().total_cmp(&b.f())).unwrap();
        put("min_num_turns".into(), mn.json());
        put("p90_num_turns".into(), Json::Float(quantile(&turns, 0.9)));
        put("max_num_turns".into(), mx.json());
    }
    // Per-rollout completion tokens per turn.
    if let (Some(cc), Some(tc)) = (col("completion_tokens"), col("num_turns")) {
        let (cc, tc) = (&t.columns[cc], &t.columns[tc]);
        let ratio: Vec<Score> = with
            .iter()
            .filter(|&&r| tag::is_numeric(cc.tags[r]) && tag::is_numeric(tc.tags[r]) && tc.float(r) > 0.0)
            .map(|&r| Score::Float(cc.float(r) / tc.float(r)))
            .collect();
        if !ratio.is_empty() {
            put("mean_tokens_per_turn".into(), Json::Float(fmean(&ratio)));
            put("median_tokens_per_turn".into(), median(&ratio).json());
        }
    }
    let lat = values("total_latency_ms");
    if !lat.is_empty() {
        put("total_latency_p50_ms".into(), Json::Float(quantile(&lat, 0.5)));
        put("total_latency_p90_ms".into(), Json::Float(quantile(&lat, 0.9)));
        put("total_latency_p99_ms".into(), Json::Float(quantile(&lat, 0.99)));
        put("total_latency_mean_ms".into(), Json::Float(fmean(&lat)));
    }
    Some(Json::Obj(items))
}
