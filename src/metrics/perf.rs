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
    let mut v = PerfValues::default();
    v.add(t, rows);
    v.summary()
}

/// What `perf_summary` reads of a run's rows, gathered in row order: row counts and the
/// numeric `ng_perf` values. Rows of one run may be added in parts (bucket by bucket);
/// the summary is that of all the rows added, in the order added.
#[derive(Default)]
pub struct PerfValues {
    rows: usize,
    with: usize,
    positive: usize,
    /// prompt, cached prompt, completion and reasoning tokens.
    tokens: [Vec<Score>; 4],
    turns: Vec<Score>,
    ratio: Vec<Score>,
    latency: Vec<Score>,
}

const TOKENS: [&str; 4] = ["prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens"];

impl PerfValues {
    /// Adds the rows `rows` of `t` (masked ones included: coverage counts them).
    pub fn add(&mut self, t: &RolloutTable, rows: &[usize]) {
        self.rows += rows.len();
        let with: Vec<usize> = rows.iter().copied().filter(|&r| t.perf[r]).collect();
        if with.is_empty() {
            return;
        }
        self.with += with.len();
        let col = |name: &str| t.column(Source::Perf, name);
        let values = |name: &str, out: &mut Vec<Score>| {
            let Some(c) = col(name) else { return };
            let c = &t.columns[c];
            out.extend(with.iter().filter_map(|&r| match c.tags[r] {
                tag::INT | tag::BOOL => Some(Score::Int(c.int(r))),
                tag::FLOAT => Some(Score::Float(c.nums[r])),
                _ => None,
            }));
        };
        if let Some(c) = col("token_observability_coverage") {
            let c = &t.columns[c];
            self.positive += with.iter().filter(|&&r| tag::is_numeric(c.tags[r]) && c.float(r) > 0.0).count();
        }
        for (field, out) in TOKENS.iter().zip(&mut self.tokens) {
            values(field, out);
        }
        values("num_turns", &mut self.turns);
        // Per-rollout completion tokens per turn.
        if let (Some(cc), Some(tc)) = (col("completion_tokens"), col("num_turns")) {
            let (cc, tc) = (&t.columns[cc], &t.columns[tc]);
            self.ratio.extend(
                with.iter()
                    .filter(|&&r| tag::is_numeric(cc.tags[r]) && tag::is_numeric(tc.tags[r]) && tc.float(r) > 0.0)
                    .map(|&r| Score::Float(cc.float(r) / tc.float(r))),
            );
        }
        values("total_latency_ms", &mut self.latency);
    }

    /// The `perf_summary` block, or None when no row added has `ng_perf`.
    pub fn summary(&self) -> Option<Json> {
        if self.rows == 0 || self.with == 0 {
            return None;
        }
        let total_n = self.rows as f64;
        let mut items: Vec<(Key, Json)> = Vec::new();
        let mut put = |k: String, v: Json| items.push((Arc::from(k.as_str()), v));
        put("overall_observability_coverage".into(), Json::Float(self.with as f64 / total_n));
        put("token_observability_coverage".into(), Json::Float(self.positive as f64 / total_n));
        for (field, v) in TOKENS.iter().zip(&self.tokens) {
            if v.is_empty() {
                continue;
            }
            put(format!("mean_{field}"), Json::Float(fmean(v)));
            put(format!("median_{field}"), median(v).json());
            put(format!("total_{field}"), py_sum(v.iter().copied()).json());
        }
        let turns = &self.turns;
        if !turns.is_empty() {
            put("mean_num_turns".into(), Json::Float(fmean(turns)));
            put("median_num_turns".into(), median(turns).json());
            put("std_num_turns".into(), Json::Float(pstdev(turns)));
            let mn = turns.iter().copied().min_by(|a, b| a.f().total_cmp(&b.f())).unwrap();
            let mx = turns.iter().copied().max_by(|a, b| a.f().total_cmp(&b.f())).unwrap();
            put("min_num_turns".into(), mn.json());
            put("p90_num_turns".into(), Json::Float(quantile(turns, 0.9)));
            put("max_num_turns".into(), mx.json());
        }
        if !self.ratio.is_empty() {
            put("mean_tokens_per_turn".into(), Json::Float(fmean(&self.ratio)));
            put("median_tokens_per_turn".into(), median(&self.ratio).json());
        }
        let lat = &self.latency;
        if !lat.is_empty() {
            put("total_latency_p50_ms".into(), Json::Float(quantile(lat, 0.5)));
            put("total_latency_p90_ms".into(), Json::Float(quantile(lat, 0.9)));
            put("total_latency_p99_ms".into(), Json::Float(quantile(lat, 0.99)));
            put("total_latency_mean_ms".into(), Json::Float(fmean(lat)));
        }
        Some(Json::Obj(items))
    }
}
