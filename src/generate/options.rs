//! What a synthetic sweep looks like: its size, seed, and the kinds of rows it holds.

/// How rewards are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewardKind {
    /// Every agent writes 0.0 / 1.0 floats.
    Binary,
    /// Every agent writes floats in [0, 1].
    Continuous,
    /// Per agent kind: 0.0/1.0 floats (math), fraction of tests passed (code),
    /// 0.0/0.5/1.0 (blackjack), JSON ints 0/1 (simpleqa), JSON bools
    /// (instruction following); a few rewards are `null`.
    Mixed,
}

/// Options of a synthetic sweep.
#[derive(Clone, Debug)]
pub struct GenerateOptions {
    /// Number of tasks (distinct `_ng_task_index` values).
    pub tasks: usize,
    /// Repeats (rollouts) per task and agent.
    pub repeats: usize,
    /// Number of agents.
    pub agents: usize,
    /// Seed: same options and seed, same bytes.
    pub seed: u64,
    /// Seed of the tasks themselves (their prompts, answers and difficulty), when it is
    /// not `seed`: two sweeps with one task seed and two seeds ask the same questions
    /// with different outcomes, as two runs of one eval do.
    pub task_seed: Option<u64>,
    /// Fraction of expected rollouts absent from rollouts.jsonl (still in the
    /// materialized inputs).
    pub missing_frac: f64,
    /// Fraction of expected rollouts that failed: absent from rollouts.jsonl and
    /// recorded in rollouts_failures.jsonl (one line per attempt, some retried).
    pub failure_frac: f64,
    /// Fraction of rollouts with `"mask_sample": true`.
    pub masked_frac: f64,
    /// How rewards are written.
    pub reward: RewardKind,
    /// Every agent runs every task (agent `a`, repeat `r` gets
    /// `_ng_rollout_index = a * repeats + r`); without it the tasks are split
    /// among agents in contiguous blocks.
    pub fan_out: bool,
    /// Add `_ng_environment_server` to input rows and rollouts; with three or
    /// more agents the last agent is the first agent again behind a second
    /// server (`<server>_b`), so labels by server appear.
    pub env_server_stamp: bool,
    /// Fraction of rollouts carrying an `ng_perf` object.
    pub ng_perf_frac: f64,
    /// Approximate bytes of free model text per rollout line.
    pub text_bytes: usize,
    /// Worker threads; 0 = all cores.
    pub threads: usize,
}
