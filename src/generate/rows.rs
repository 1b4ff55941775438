//! Row content: agents ("slots"), tasks, materialized input rows and rollout rows.
//!
//! A sweep is a sequence of input rows ordered by (task, slot, repeat). Row `i`
//! of that sequence is located arithmetically, so any contiguous range of rows
//! (a chunk) can be produced independently on any thread. All randomness of a
//! row comes from `hash(seed, task, rollout_index)`, all randomness of a task
//! from `hash(seed, task)`.

use super::json::{boolean, escaped, float, hex, int, string};
use super::options::{GenerateOptions, RewardKind};
use super::rng::{hash, Rng};

/// Most input rows per chunk (the unit of parallel work).
const MAX_CHUNK_ROWS: u64 = 512;
/// Fewest input rows per chunk.
const MIN_CHUNK_ROWS: u64 = 8;
/// Target bytes of rollout text per chunk: with long lines, chunks hold fewer
/// rows, so a batch of chunks stays around 64 MB whatever `text_bytes` is.
const CHUNK_BYTES: u64 = 2 << 20;

const TAG_TASK: u64 = 0x7461_736b;
const TAG_ROW: u64 = 0x726f_7773;
const TAG_SKILL: u64 = 0x736b_696c;
const TAG_TEXT: u64 = 0x7465_7874;

/// Probability that an unmasked rollout omits `mask_sample`/`failure_*`.
const P_NO_MASK_KEYS: f64 = 0.08;
const P_REASONING: f64 = 0.35;
const P_INCOMPLETE: f64 = 0.02;
const P_ATTEMPT_INDEX: f64 = 0.03;
const P_MISSING_FIELD: f64 = 0.04;
const P_NULL_REWARD_MIXED: f64 = 0.003;
const P_UNMASKED_FAILURE: f64 = 0.01;
const P_NULL_ANSWER: f64 = 0.12;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Math,
    Code,
    Blackjack,
    SimpleQa,
    Instruct,
}

const KINDS: [Kind; 5] = [Kind::Math, Kind::Code, Kind::Blackjack, Kind::SimpleQa, Kind::Instruct];

impl Kind {
    fn agent(self) -> &'static str {
        match self {
            Kind::Math => "math_with_judge_simple_agent",
            Kind::Code => "code_gen_simple_agent",
            Kind::Blackjack => "blackjack_gymnasium_agent",
            Kind::SimpleQa => "simpleqa_simple_agent",
            Kind::Instruct => "instruction_following_simple_agent",
        }
    }

    fn server(self) -> &'static str {
        match self {
            Kind::Math => "math_with_judge_env",
            Kind::Code => "code_gen_env",
            Kind::Blackjack => "blackjack_gymnasium_env",
            Kind::SimpleQa => "simpleqa_env",
            Kind::Instruct => "instruction_following_env",
        }
    }

    fn has_difficulty(self) -> bool {
        matches!(self, Kind::Math | Kind::SimpleQa | Kind::Instruct)
    }
}

const MODELS: [&str; 5] = [
    "Qwen/Qwen3-4B-Instruct-2507",
    "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
    "meta-llama/Llama-3.1-8B-Instruct",
    "Qwen/Qwen3-30B-A3B-Thinking-2507",
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506",
];

/// How a slot writes its reward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Style {
    /// 0.0 / 1.0
    BinFloat,
    /// float in [0, 1]
    Cont,
    /// 0.0 / 0.5 / 1.0 (win / push / loss)
    Ternary,
    /// 0 / 1 as JSON ints
    BinInt,
    /// false / true
    Bool,
}

/// One agent as the sweep sees it: an agent name behind an environment server.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    pub(super) name: String,
    pub(super) server: String,
    kind: Kind,
    model: &'static str,
    skill: f64,
    style: Style,
}

fn build_slots(opts: &GenerateOptions) -> Vec<Slot> {
    let shared = opts.env_server_stamp && opts.agents >= 3;
    let mut slots: Vec<Slot> = Vec::with_capacity(opts.agents);
    for a in 0..opts.agents {
        let mut skill_rng = Rng::new(hash(&[opts.seed, a as u64, TAG_SKILL]));
        // Spread agents over a useful range of skills (logit scale).
        let skill = -0.8 + 2.2 * skill_rng.unit();
        let model = MODELS[a % MODELS.len()];
        let (kind, name, server) = if shared && a + 1 == opts.agents {
            // The last slot is the first agent again, behind a second server:
            // two servers fronting one agent, so labels fall back to servers.
            let first = &slots[0];
            (first.kind, first.name.clone(), format!("{}_b", first.server))
        } else {
            let kind = KINDS[a % KINDS.len()];
            let generation = a / KINDS.len();
            if generation == 0 {
                (kind, kind.agent().to_string(), kind.server().to_string())
            } else {
                (kind, format!("{}_{}", kind.agent(), generation + 1), format!("{}_{}", kind.server(), generation + 1))
            }
        };
        let style = match opts.reward {
            RewardKind::Binary => Style::BinFloat,
            RewardKind::Continuous => Style::Cont,
            RewardKind::Mixed => match kind {
                Kind::Math => Style::BinFloat,
                Kind::Code => Style::Cont,
                Kind::Blackjack => Style::Ternary,
                Kind::SimpleQa => Style::BinInt,
                Kind::Instruct => Style::Bool,
            },
        };
        slots.push(Slot { name, server, kind, model, skill, style });
    }
    slots
}

const WORDS: &[&str] = &[
    "the",
    "answer",
    "is",
    "let",
    "suppose",
    "thus",
    "hence",
    "therefore",
    "compute",
    "solve",
    "prove",
    "find",
    "given",
    "assume",
    "consider",
    "value",
    "equation",
    "integral",
    "derivative",
    "matrix",
    "vector",
    "probability",
    "polynomial",
    "triangle",
    "circle",
    "radius",
    "angle",
    "prime",
    "integer",
    "sum",
    "product",
    "limit",
    "graph",
    "root",
    "degree",
    "function",
    "python",
    "loop",
    "array",
    "string",
    "list",
    "parse",
    "return",
    "output",
    "input",
    "test",
    "case",
    "file",
    "step",
    "check",
    "which",
    "that",
    "this",
    "from",
    "with",
    "by",
    "for",
    "on",
    "in",
    "to",
    "of",
    "and",
    "or",
    "was",
    "are",
    "it",
    "be",
    "we",
    "so",
    "now",
    "then",
    "first",
    "next",
    "finally",
    "café",
    "naïve",
    "résumé",
    "✅",
    "❌",
    "答案",
    "数学",
    "テスト",
    "한국어",
    "العربية",
    "עברית",
    "∑",
    "∫",
    "π",
    "√2",
    "≤",
    "≥",
    "→",
    "≈",
    "∞",
    "µs",
    "¥",
    "Å",
    "ℝ",
    "𝔽₂",
    "🚀",
    "$x^2$",
    "`code`",
    "\"quoted\"",
    "C:\\tmp",
    "\\n",
    "a\tb",
    "line\nbreak",
    "x = 5",
    "f(x)",
    "[1, 2]",
    "{k: v}",
    "<tag>",
    "50%",
    "#3",
    "O(n log n)",
    "n²",
    "α",
    "β",
    "λ",
    "Δ",
    "—",
    "…",
];

const PUNCT: &[&str] = &[".", ",", ";", ":", "?", "!"];

const ANSWERS: &[&str] = &[
    "(A)",
    "(B)",
    "(C)",
    "(D)",
    "x = 5",
    "√2",
    "π/4",
    "O(n log n)",
    "1/2",
    "7",
    "-3",
    "∞",
    "n² + 1",
    "≈ 3.14",
    "True",
    "False",
    "none",
    "答案: 42",
    "\"yes\"",
];

const NUM_PHRASES: usize = 2048;

/// Everything shared by all chunks of one sweep (read-only during generation).
pub(super) struct Ctx {
    seed: u64,
    /// Seeds each task's own draws (see `GenerateOptions::task_seed`).
    task_seed: u64,
    tasks: u64,
    repeats: u64,
    agents: u64,
    fan_out: bool,
    stamp: bool,
    missing: f64,
    failed: f64,
    masked: f64,
    perf: f64,
    text_bytes: usize,
    mixed: bool,
    pub(super) slots: Vec<Slot>,
    words: Vec<Vec<u8>>,
    phrases: Vec<Vec<u8>>,
    answers: Vec<Vec<u8>>,
    rows_per_task: u64,
    chunk_rows: u64,
    pub(super) total_rows: u64,
}

/// Output of one chunk: its input rows in order, its rollout rows and the end
/// offset of each rollout row in `rollouts`.
#[derive(Default)]
pub(super) struct ChunkOut {
    pub(super) inputs: Vec<u8>,
    pub(super) rollouts: Vec<u8>,
    pub(super) ends: Vec<usize>,
    /// Failures sidecar lines of this chunk's failed rollouts.
    pub(super) failures: Vec<u8>,
}

impl ChunkOut {
    /// The rollout lines of this chunk (each ending in '\n').
    pub(super) fn rollout_lines(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let line = &self.rollouts[start..end];
            start = end;
            line
        })
    }
}

#[derive(Default)]
struct Task {
    index: u64,
    difficulty: u64,
    beta: f64,
    answer: usize,
    max_out: u64,
    temperature: f64,
    num_tests: u64,
    prompt_tokens: u64,
    system: Vec<u8>,
    user: Vec<u8>,
}

impl Task {
    fn subset(&self) -> &'static str {
        match self.difficulty {
            0..=2 => "easy",
            3..=4 => "medium",
            _ => "hard",
        }
    }
}

/// Rollout outcome before it is written.
#[derive(Clone, Copy)]
enum Reward {
    Float(f64),
    Int(i64),
    Bool(bool),
    Null,
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

impl Ctx {
    /// `opts` must have been validated (counts >= 1, fractions in [0, 1]).
    pub(super) fn new(opts: &GenerateOptions, total_rows: u64) -> Ctx {
        let words: Vec<Vec<u8>> = WORDS.iter().map(|w| escaped(w)).collect();
        let answers = ANSWERS.iter().map(|w| escaped(w)).collect();
        let mut rng = Rng::new(hash(&[opts.seed, TAG_TEXT]));
        let mut phrases = Vec::with_capacity(NUM_PHRASES);
        for _ in 0..NUM_PHRASES {
            let n = rng.range(3, 11);
            let mut p = Vec::with_capacity(64);
            for k in 0..n {
                if k > 0 {
                    p.push(b' ');
                }
                p.extend_from_slice(&words[rng.below(words.len() as u64) as usize]);
            }
            if rng.chance(0.4) {
                p.extend_from_slice(rng.pick(PUNCT).as_bytes());
            }
            phrases.push(p);
        }
        let rows_per_task = if opts.fan_out { (opts.agents * opts.repeats) as u64 } else { opts.repeats as u64 };
        Ctx {
            seed: opts.seed,
            task_seed: opts.task_seed.unwrap_or(opts.seed),
            tasks: opts.tasks as u64,
            repeats: opts.repeats as u64,
            agents: opts.agents as u64,
            fan_out: opts.fan_out,
            stamp: opts.env_server_stamp,
            missing: opts.missing_frac,
            failed: opts.failure_frac,
            masked: opts.masked_frac,
            perf: opts.ng_perf_frac,
            text_bytes: opts.text_bytes,
            mixed: opts.reward == RewardKind::Mixed,
            slots: build_slots(opts),
            words,
            phrases,
            answers,
            rows_per_task,
            chunk_rows: (CHUNK_BYTES / (opts.text_bytes as u64).saturating_add(2048))
                .clamp(MIN_CHUNK_ROWS, MAX_CHUNK_ROWS),
            total_rows,
        }
    }

    pub(super) fn num_chunks(&self) -> u64 {
        self.total_rows.div_ceil(self.chunk_rows)
    }

    /// (task, slot, repeat) of input row `i`.
    fn locate(&self, i: u64) -> (u64, usize, u64) {
        let t = i / self.rows_per_task;
        let w = i % self.rows_per_task;
        if self.fan_out {
            (t, (w / self.repeats) as usize, w % self.repeats)
        } else {
            (t, self.owner(t), w)
        }
    }

    /// Without fan-out, tasks are split among agents in contiguous blocks.
    fn owner(&self, t: u64) -> usize {
        (u128::from(t) * u128::from(self.agents) / u128::from(self.tasks)) as usize
    }

    fn fill_task(&self, t: u64, task: &mut Task) {
        let mut rng = Rng::new(hash(&[self.task_seed, t, TAG_TASK]));
        task.index = t;
        task.difficulty = rng.range(1, 5);
        task.beta = (task.difficulty as f64 - 3.0) * 0.8 + 0.6 * rng.normal();
        task.answer = rng.below(self.answers.len() as u64) as usize;
        task.max_out = *rng.pick(&[1024u64, 2048, 4096, 8192]);
        task.temperature = *rng.pick(&[0.0f64, 0.6, 1.0]);
        task.num_tests = rng.range(3, 30);
        task.system.clear();
        task.user.clear();
        let n_sys = rng.range(2, 6);
        self.push_words(&mut task.system, &mut rng, n_sys as usize);
        let n_user = rng.range(6, 18);
        self.push_words(&mut task.user, &mut rng, n_user as usize);
        task.prompt_tokens = (task.system.len() + task.user.len()) as u64 / 4 + 12;
    }

    fn push_words(&self, out: &mut Vec<u8>, rng: &mut Rng, n: usize) {
        for k in 0..n {
            if k > 0 {
                out.push(b' ');
            }
            out.extend_from_slice(&self.words[rng.below(self.words.len() as u64) as usize]);
        }
    }

    /// Appends about `target` bytes of escaped free text.
    fn push_text(&self, out: &mut Vec<u8>, rng: &mut Rng, target: usize) {
        let start = out.len();
        loop {
            let written = out.len() - start;
            if written >= target {
                break;
            }
            if written > 0 {
                out.push(b' ');
            }
            if target - written > 48 {
                out.extend_from_slice(&self.phrases[rng.below(self.phrases.len() as u64) as usize]);
            } else {
                out.extend_from_slice(&self.words[rng.below(self.words.len() as u64) as usize]);
            }
        }
    }

    /// Generates chunk `c`: input rows `[c*chunk_rows, ...)` and their rollouts.
    pub(super) fn chunk(&self, c: u64) -> ChunkOut {
        let lo = c * self.chunk_rows;
        let hi = (lo + self.chunk_rows).min(self.total_rows);
        let n = (hi - lo) as usize;
        let mut out = ChunkOut {
            inputs: Vec::with_capacity(n * 420),
            rollouts: Vec::with_capacity(n * (self.text_bytes + 1900)),
            ends: Vec::with_capacity(n),
            failures: Vec::new(),
        };
        let mut task = Task::default();
        let mut current = u64::MAX;
        for i in lo..hi {
            let (t, s, r) = self.locate(i);
            if t != current {
                self.fill_task(t, &mut task);
                current = t;
            }
            let ri = if self.fan_out { s as u64 * self.repeats + r } else { r };
            self.input_row(&mut out.inputs, &task, s, ri);
            let mut rng = Rng::new(hash(&[self.seed, t, ri, TAG_ROW]));
            if rng.chance(self.missing) {
                continue;
            }
            // Drawn only when failures are asked for, so other sweeps keep their bytes.
            if self.failed > 0.0 && rng.chance(self.failed) {
                self.failure_rows(&mut out.failures, s, task.index, ri, &mut rng);
                continue;
            }
            self.rollout_row(&mut out.rollouts, &task, s, ri, &mut rng);
            out.ends.push(out.rollouts.len());
        }
        out
    }

    /// A failed rollout's sidecar lines: its failed attempt (sometimes a transient
    /// failure first, then the retry that failed for good), each with the rollout's
    /// identity after the failure record, as a run appends them.
    fn failure_rows(&self, b: &mut Vec<u8>, s: usize, task: u64, ri: u64, rng: &mut Rng) {
        const CLASSES: [(&str, &str, &str); 5] = [
            ("agent_run_error", "ClientResponseError", "500, message='Internal Server Error'"),
            ("agent_request_failed", "ServerDisconnectedError", "Server disconnected"),
            ("timeout_exceeded", "TimeoutError", "rollout exceeded its time limit"),
            ("judge_failed", "JudgeError", "judge returned no verdict"),
            ("environment_server_failed", "EpisodeError", "episode server reported a failure"),
        ];
        let retried = rng.chance(0.3);
        let last = match rng.below(100) {
            0..40 => 0,
            40..65 => 1,
            65..85 => 2,
            85..95 => 3,
            _ => 4,
        };
        let attempts: &[usize] = if retried { &[1, last] } else { &[last] };
        for (attempt, &k) in attempts.iter().enumerate() {
            let (class, kind, message) = CLASSES[k];
            b.extend_from_slice(b"{\"_ng_failure_class\":");
            string(b, class);
            b.extend_from_slice(b",\"_ng_failure_type\":");
            string(b, kind);
            b.extend_from_slice(b",\"_ng_failure_message\":");
            string(b, message);
            b.extend_from_slice(b",\"_ng_task_index\":");
            int(b, task);
            b.extend_from_slice(b",\"_ng_rollout_index\":");
            int(b, ri);
            b.push(b',');
            self.agent_ref(b, &self.slots[s]);
            if retried {
                b.extend_from_slice(b",\"_ng_attempt_index\":");
                int(b, attempt);
            }
            if self.stamp {
                b.extend_from_slice(b",\"_ng_environment_server\":");
                string(b, &self.slots[s].server);
            }
            b.extend_from_slice(b",\"_ng_result_type\":\"single_agent_turn_legacy\"}\n");
        }
    }

    fn prompt_params(&self, b: &mut Vec<u8>, task: &Task) {
        b.extend_from_slice(b"{\"input\":[{\"role\":\"system\",\"content\":\"");
        b.extend_from_slice(&task.system);
        b.extend_from_slice(b"\"},{\"role\":\"user\",\"content\":\"");
        b.extend_from_slice(&task.user);
        b.extend_from_slice(b"\"}],\"max_output_tokens\":");
        int(b, task.max_out);
        b.extend_from_slice(b",\"temperature\":");
        float(b, task.temperature);
        b.push(b'}');
    }

    fn agent_ref(&self, b: &mut Vec<u8>, slot: &Slot) {
        b.extend_from_slice(b"\"agent_ref\":{\"type\":\"responses_api_agents\",\"name\":");
        string(b, &slot.name);
        b.push(b'}');
    }

    fn input_row(&self, b: &mut Vec<u8>, task: &Task, s: usize, ri: u64) {
        let slot = &self.slots[s];
        b.extend_from_slice(b"{\"responses_create_params\":");
        self.prompt_params(b, task);
        b.extend_from_slice(b",\"question_id\":");
        int(b, 1000 + task.index);
        b.extend_from_slice(b",\"expected_answer\":\"");
        b.extend_from_slice(&self.answers[task.answer]);
        b.extend_from_slice(b"\",\"subset\":\"");
        b.extend_from_slice(task.subset().as_bytes());
        b.extend_from_slice(b"\",\"difficulty\":");
        int(b, task.difficulty);
        b.push(b',');
        self.agent_ref(b, slot);
        b.extend_from_slice(b",\"_ng_task_index\":");
        int(b, task.index);
        b.extend_from_slice(b",\"_ng_rollout_index\":");
        int(b, ri);
        if self.stamp {
            b.extend_from_slice(b",\"_ng_environment_server\":");
            string(b, &slot.server);
        }
        b.extend_from_slice(b"}\n");
    }

    /// Draws the reward; returns (reward, success, fraction of credit).
    fn outcome(&self, slot: &Slot, task: &Task, p: f64, rng: &mut Rng) -> (Reward, bool, f64) {
        let u = rng.unit();
        let (reward, frac) = match slot.style {
            Style::BinFloat | Style::BinInt | Style::Bool => {
                let ok = u < p;
                let r = match slot.style {
                    Style::BinInt => Reward::Int(i64::from(ok)),
                    Style::Bool => Reward::Bool(ok),
                    _ => Reward::Float(if ok { 1.0 } else { 0.0 }),
                };
                (r, if ok { 1.0 } else { 0.0 })
            }
            Style::Ternary => {
                let v = if u < p {
                    1.0
                } else if u < p + 0.1 * (1.0 - p) {
                    0.5
                } else {
                    0.0
                };
                (Reward::Float(v), v)
            }
            Style::Cont => {
                let v = if slot.kind == Kind::Code {
                    // Fraction of unit tests passed.
                    let passed = (0..task.num_tests).filter(|_| rng.chance(p)).count();
                    passed as f64 / task.num_tests as f64
                } else {
                    (p + (u + rng.unit() - 1.0) * 0.45).clamp(0.0, 1.0)
                };
                (Reward::Float(v), v)
            }
        };
        let reward = if self.mixed && rng.chance(P_NULL_REWARD_MIXED) { Reward::Null } else { reward };
        let ok = match slot.style {
            Style::Cont => frac >= 0.5,
            _ => frac >= 1.0,
        };
        (reward, ok, frac)
    }

    /// One rollout line in NeMo Gym's shape, into `b`: the request echoed, the response,
    /// the verifier's output, the kind's fields, the optional perf block, the identity.
    /// The parts draw from `rng` in this order, which fixes the bytes of a seed.
    fn rollout_row(&self, b: &mut Vec<u8>, task: &Task, s: usize, ri: u64, rng: &mut Rng) {
        let slot = &self.slots[s];
        let d = self.draw(slot, task, rng);
        self.request_echo(b, task);
        let t = self.response(b, task, s, ri, &d, rng);
        self.verifier_output(b, task, slot, &d, rng);
        self.kind_fields(b, task, slot, &d, rng);
        if rng.chance(self.perf) {
            perf_block(b, task, &d, &t, rng);
        }
        self.identity(b, task, slot, ri, rng);
    }

    /// What a rollout draws before its bytes are written: its outcome (a masked rollout
    /// and an unmasked failure score zero) and the shape of its response.
    fn draw(&self, slot: &Slot, task: &Task, rng: &mut Rng) -> Drawn {
        let masked = rng.chance(self.masked);
        let p = sigmoid(slot.skill - task.beta);
        let (mut reward, mut ok, mut frac) = self.outcome(slot, task, p, rng);
        let unmasked_failure = !masked && rng.chance(P_UNMASKED_FAILURE);
        if masked || unmasked_failure {
            reward = match reward {
                Reward::Float(_) => Reward::Float(0.0),
                Reward::Int(_) => Reward::Int(0),
                Reward::Bool(_) => Reward::Bool(false),
                Reward::Null => Reward::Null,
            };
            ok = false;
            frac = 0.0;
        }
        let reasoning = rng.chance(P_REASONING);
        let incomplete = rng.chance(P_INCOMPLETE);
        let usage_variant = rng.below(100);
        let target = (self.text_bytes as f64 * (0.75 + 0.5 * rng.unit())) as usize;
        let (sum_target, msg_target) = if reasoning {
            let s = target * 35 / 100;
            (s, target - s)
        } else {
            (0, target)
        };
        Drawn {
            p,
            reward,
            ok,
            frac,
            masked,
            unmasked_failure,
            reasoning,
            incomplete,
            usage_variant,
            sum_target,
            msg_target,
        }
    }

    /// `responses_create_params`: the full request NeMo Gym echoes back.
    fn request_echo(&self, b: &mut Vec<u8>, task: &Task) {
        b.extend_from_slice(
            b"{\"responses_create_params\":{\"background\":null,\"include\":null,\"input\":[{\"content\":\"",
        );
        b.extend_from_slice(&task.system);
        b.extend_from_slice(b"\",\"role\":\"system\",\"type\":\"message\"},{\"content\":\"");
        b.extend_from_slice(&task.user);
        b.extend_from_slice(
            b"\",\"role\":\"user\",\"type\":\"message\"}],\"instructions\":null,\"max_output_tokens\":",
        );
        int(b, task.max_out);
        b.extend_from_slice(b",\"metadata\":null,\"model\":null,\"parallel_tool_calls\":true,\"temperature\":");
        float(b, task.temperature);
        b.extend_from_slice(b",\"tool_choice\":\"auto\",\"tools\":[],\"top_p\":null},");
    }

    /// `response`: the model's output (a reasoning summary, then the message) and its
    /// token usage in one of three shapes; returns the token counts.
    fn response(&self, b: &mut Vec<u8>, task: &Task, s: usize, ri: u64, d: &Drawn, rng: &mut Rng) -> Tokens {
        let slot = &self.slots[s];
        b.extend_from_slice(b"\"response\":{\"id\":\"resp_");
        hex(b, rng.next_u64(), 16);
        hex(b, rng.next_u64(), 16);
        b.extend_from_slice(b"\",\"created_at\":");
        let centis = 178_218_480_000u64 + (task.index * 37 + ri * 11) % 8_640_000 + rng.below(100_000);
        float(b, centis as f64 / 100.0);
        b.extend_from_slice(b",\"error\":null,\"incomplete_details\":");
        if d.incomplete {
            b.extend_from_slice(b"{\"reason\":\"max_output_tokens\"}");
        } else {
            b.extend_from_slice(b"null");
        }
        b.extend_from_slice(b",\"instructions\":null,\"metadata\":null,\"model\":");
        string(b, slot.model);
        b.extend_from_slice(b",\"object\":\"response\",\"output\":[");
        let mut summary_len = 0;
        if d.reasoning {
            b.extend_from_slice(b"{\"id\":\"rs_");
            hex(b, rng.next_u64(), 16);
            b.extend_from_slice(b"\",\"summary\":[{\"text\":\"");
            let at = b.len();
            self.push_text(b, rng, d.sum_target);
            summary_len = b.len() - at;
            b.extend_from_slice(b"\",\"type\":\"summary_text\"}],\"type\":\"reasoning\"},");
        }
        b.extend_from_slice(b"{\"id\":\"msg_");
        hex(b, rng.next_u64(), 16);
        hex(b, rng.next_u64(), 16);
        b.extend_from_slice(b"\",\"content\":[{\"annotations\":[],\"text\":\"");
        let at = b.len();
        self.push_text(b, rng, d.msg_target);
        let msg_len = b.len() - at;
        let status: &[u8] = if d.incomplete { b"incomplete" } else { b"completed" };
        b.extend_from_slice(b"\",\"type\":\"output_text\",\"logprobs\":null}],\"role\":\"assistant\",\"status\":\"");
        b.extend_from_slice(status);
        b.extend_from_slice(b"\",\"type\":\"message\"}],\"parallel_tool_calls\":true,\"temperature\":");
        float(b, task.temperature);
        b.extend_from_slice(b",\"tool_choice\":\"auto\",\"tools\":[],\"top_p\":null,\"status\":\"");
        b.extend_from_slice(status);
        b.extend_from_slice(b"\",\"usage\":{\"input_tokens\":");
        let input_tokens = task.prompt_tokens + s as u64 * 3;
        let reasoning_tokens = (summary_len / 4) as u64;
        let output_tokens =
            if d.incomplete { task.max_out } else { ((summary_len + msg_len) / 4) as u64 + rng.range(1, 8) };
        let cached = if rng.chance(0.3) { (input_tokens / 16) * 16 } else { 0 };
        int(b, input_tokens);
        match d.usage_variant {
            0..=51 => {
                b.extend_from_slice(b",\"input_tokens_details\":{\"cached_tokens\":");
                int(b, cached);
                b.extend_from_slice(b"},\"output_tokens\":");
                int(b, output_tokens);
                b.extend_from_slice(b",\"output_tokens_details\":{\"reasoning_tokens\":");
                int(b, reasoning_tokens);
                b.extend_from_slice(b"},\"total_tokens\":");
                int(b, input_tokens + output_tokens);
            }
            52..=86 => {
                b.extend_from_slice(b",\"output_tokens\":");
                int(b, output_tokens);
                b.extend_from_slice(b",\"total_tokens\":");
                int(b, input_tokens + output_tokens);
            }
            _ => {
                b.extend_from_slice(b",\"input_tokens_details\":{\"cached_tokens\":null},\"output_tokens\":");
                int(b, output_tokens);
                b.extend_from_slice(b",\"output_tokens_details\":{\"reasoning_tokens\":null},\"total_tokens\":");
                int(b, input_tokens + output_tokens);
                b.extend_from_slice(b",\"cost\":null");
            }
        }
        b.extend_from_slice(b"}},");
        Tokens { input: input_tokens, output: output_tokens, reasoning: reasoning_tokens }
    }

    /// The verifier's output every kind writes: the reward, the mask and failure keys,
    /// the task's question, answer and subset, the extracted answer, `terminated` and
    /// `verifier_score`.
    fn verifier_output(&self, b: &mut Vec<u8>, task: &Task, slot: &Slot, d: &Drawn, rng: &mut Rng) {
        b.extend_from_slice(b"\"reward\":");
        match d.reward {
            Reward::Float(v) => float(b, v),
            Reward::Int(v) => int(b, v),
            Reward::Bool(v) => boolean(b, v),
            Reward::Null => b.extend_from_slice(b"null"),
        }
        if d.masked || d.unmasked_failure || !rng.chance(P_NO_MASK_KEYS) {
            b.extend_from_slice(b",\"mask_sample\":");
            boolean(b, d.masked);
            if d.masked {
                if rng.chance(0.7) {
                    b.extend_from_slice(
                        b",\"failure_kind\":\"judge_failed\",\"failure_reason\":\"judge endpoint returned 503\"",
                    );
                } else {
                    b.extend_from_slice(b",\"failure_kind\":\"env_timeout\",\"failure_reason\":\"environment step timed out after 600 s\"");
                }
            } else if d.unmasked_failure {
                b.extend_from_slice(",\"failure_kind\":\"max_turns_exceeded\",\"failure_reason\":\"agent stopped at max_turns=32 — no final answer\"".as_bytes());
            } else {
                b.extend_from_slice(b",\"failure_kind\":null,\"failure_reason\":null");
            }
        }
        b.extend_from_slice(b",\"question_id\":");
        int(b, 1000 + task.index);
        b.extend_from_slice(b",\"expected_answer\":\"");
        b.extend_from_slice(&self.answers[task.answer]);
        b.extend_from_slice(b"\",\"subset\":\"");
        b.extend_from_slice(task.subset().as_bytes());
        b.push(b'"');
        if slot.kind.has_difficulty() {
            b.extend_from_slice(b",\"difficulty\":");
            int(b, task.difficulty);
        }
        b.extend_from_slice(b",\"extracted_answer\":");
        if d.ok {
            b.push(b'"');
            b.extend_from_slice(&self.answers[task.answer]);
            b.push(b'"');
        } else if rng.chance(P_NULL_ANSWER) || d.unmasked_failure {
            b.extend_from_slice(b"null");
        } else {
            let n = self.answers.len() as u64;
            let other = (task.answer as u64 + 1 + rng.below(n - 1)) % n;
            b.push(b'"');
            b.extend_from_slice(&self.answers[other as usize]);
            b.push(b'"');
        }
        b.extend_from_slice(b",\"terminated\":");
        boolean(b, !d.incomplete);
        if !rng.chance(P_MISSING_FIELD) {
            b.extend_from_slice(b",\"verifier_score\":");
            let v = if d.ok {
                if rng.chance(0.3) {
                    1.0
                } else {
                    0.5 + 0.5 * rng.unit()
                }
            } else {
                0.5 * rng.unit()
            };
            float(b, v);
        }
    }

    /// The fields of the slot's kind of environment (math, code, blackjack, SimpleQA,
    /// instruction following).
    fn kind_fields(&self, b: &mut Vec<u8>, task: &Task, slot: &Slot, d: &Drawn, rng: &mut Rng) {
        let has_steps = !rng.chance(P_MISSING_FIELD);
        let steps = rng.range(1, 12) + task.difficulty * 2;
        match slot.kind {
            Kind::Math => {
                if has_steps {
                    b.extend_from_slice(b",\"num_steps\":");
                    int(b, steps);
                }
                b.extend_from_slice(b",\"library_reward\":");
                let lib_ok = d.ok != rng.chance(0.05);
                float(b, if lib_ok { 1.0 } else { 0.0 });
                b.extend_from_slice(b",\"judge_evaluations\":");
                if rng.chance(0.55) {
                    b.extend_from_slice(b"null");
                } else {
                    let n = rng.range(1, 2);
                    b.push(b'[');
                    for k in 0..n {
                        if k > 0 {
                            b.push(b',');
                        }
                        let verdict: &[u8] = if d.ok { b"[[A=B]]" } else { b"[[A!=B]]" };
                        b.extend_from_slice(b"{\"verdict\":\"");
                        b.extend_from_slice(verdict);
                        b.extend_from_slice(b"\",\"judge_model\":\"judge-70b\",\"latency_s\":");
                        float(b, ((0.2 + 3.0 * rng.unit()) * 1000.0).round() / 1000.0);
                        b.push(b'}');
                    }
                    b.push(b']');
                }
            }
            Kind::Code => {
                let passed_all = d.frac >= 1.0 && d.ok;
                b.extend_from_slice(b",\"num_tests_run\":");
                int(b, task.num_tests);
                b.extend_from_slice(b",\"passed\":");
                boolean(b, passed_all);
                b.extend_from_slice(b",\"execution_time\":");
                float(b, 0.05 + 30.0 * rng.unit());
                b.extend_from_slice(b",\"status\":");
                let status = if passed_all {
                    "pass"
                } else {
                    match rng.below(20) {
                        0..=13 => "fail",
                        14..=16 => "timeout",
                        _ => "syntax_error",
                    }
                };
                string(b, status);
                b.extend_from_slice(b",\"is_correct\":");
                boolean(b, d.ok);
            }
            Kind::Blackjack => {
                if has_steps {
                    b.extend_from_slice(b",\"num_steps\":");
                    int(b, steps);
                }
                b.extend_from_slice(b",\"truncated\":");
                boolean(b, d.incomplete);
                b.extend_from_slice(b",\"info\":{\"result\":");
                let result = if d.ok {
                    "win"
                } else if d.frac > 0.0 {
                    "push"
                } else {
                    "loss"
                };
                string(b, result);
                b.extend_from_slice(b",\"value\":");
                int(b, rng.range(4, 26));
                b.extend_from_slice(b",\"dealer\":{\"shown\":");
                int(b, rng.range(2, 11));
                b.extend_from_slice(b",\"busted\":");
                boolean(b, rng.chance(0.28));
                b.extend_from_slice(b"}}");
            }
            Kind::SimpleQa => {
                if has_steps {
                    b.extend_from_slice(b",\"num_steps\":");
                    int(b, steps);
                }
                let verdict = if d.ok {
                    0
                } else if rng.chance(0.25) {
                    2
                } else {
                    1
                };
                b.extend_from_slice(b",\"verdict\":");
                string(b, ["CORRECT", "INCORRECT", "NOT_ATTEMPTED"][verdict]);
                for (key, k) in [
                    (&b",\"is_correct\":"[..], 0),
                    (&b",\"is_incorrect\":"[..], 1),
                    (&b",\"is_not_attempted\":"[..], 2),
                ] {
                    b.extend_from_slice(key);
                    float(b, if verdict == k { 1.0 } else { 0.0 });
                }
            }
            Kind::Instruct => {
                if has_steps {
                    b.extend_from_slice(b",\"num_steps\":");
                    int(b, steps);
                }
                let n = 1 + task.num_tests % 6;
                let followed = if d.ok { n } else { (0..n).filter(|_| rng.chance(d.p * 0.8)).count() as u64 };
                let followed = if !d.ok && followed == n { n - 1 } else { followed };
                b.extend_from_slice(b",\"num_instructions\":");
                int(b, n);
                b.extend_from_slice(b",\"num_followed\":");
                int(b, followed);
                b.extend_from_slice(b",\"follow_all_instructions\":");
                boolean(b, d.ok);
                b.extend_from_slice(b",\"instruction_results\":[");
                for k in 0..n {
                    if k > 0 {
                        b.push(b',');
                    }
                    boolean(b, k < followed);
                }
                b.extend_from_slice(b"],\"info\":{\"strict\":");
                boolean(b, rng.chance(0.5));
                b.extend_from_slice(b",\"loose_score\":");
                float(b, followed as f64 / n as f64);
                b.push(b'}');
            }
        }
    }

    /// The identity NeMo Gym appends last: the rollout key, the agent, the server stamp
    /// and (sometimes) the attempt, then the end of the line.
    fn identity(&self, b: &mut Vec<u8>, task: &Task, slot: &Slot, ri: u64, rng: &mut Rng) {
        b.extend_from_slice(b",\"_ng_task_index\":");
        int(b, task.index);
        b.extend_from_slice(b",\"_ng_rollout_index\":");
        int(b, ri);
        b.push(b',');
        self.agent_ref(b, slot);
        if self.stamp {
            b.extend_from_slice(b",\"_ng_environment_server\":");
            string(b, &slot.server);
        }
        if rng.chance(P_ATTEMPT_INDEX) {
            b.extend_from_slice(b",\"_ng_attempt_index\":");
            int(b, rng.range(1, 2));
        }
        b.extend_from_slice(b"}\n");
    }
}

/// What one rollout drew before its bytes are written (see `Ctx::draw`).
struct Drawn {
    p: f64,
    reward: Reward,
    ok: bool,
    frac: f64,
    masked: bool,
    unmasked_failure: bool,
    reasoning: bool,
    incomplete: bool,
    usage_variant: u64,
    sum_target: usize,
    msg_target: usize,
}

/// A response's token counts, which the perf block repeats.
struct Tokens {
    input: u64,
    output: u64,
    reasoning: u64,
}

/// The optional `ng_perf` block: turns, tool calls, token coverage and latency.
fn perf_block(b: &mut Vec<u8>, task: &Task, d: &Drawn, t: &Tokens, rng: &mut Rng) {
    let turns = rng.range(1, 3 + task.difficulty * 2);
    b.extend_from_slice(b",\"ng_perf\":{\"num_turns\":");
    int(b, turns);
    b.extend_from_slice(b",\"num_tool_calls\":");
    int(b, rng.below(turns * 2 + 1));
    let coverage = match rng.below(10) {
        0..=1 => 0.0,
        2 => 0.5,
        _ => 1.0,
    };
    b.extend_from_slice(b",\"token_observability_coverage\":");
    float(b, coverage);
    if coverage > 0.0 {
        let prompt = t.input * turns + rng.below(50 * turns);
        b.extend_from_slice(b",\"prompt_tokens\":");
        int(b, prompt);
        if rng.chance(0.5) {
            b.extend_from_slice(b",\"cached_prompt_tokens\":");
            int(b, prompt / 2 / 16 * 16);
        }
        b.extend_from_slice(b",\"completion_tokens\":");
        int(b, t.output);
        if d.reasoning {
            b.extend_from_slice(b",\"reasoning_tokens\":");
            int(b, t.reasoning);
        }
    }
    b.extend_from_slice(b",\"total_latency_ms\":");
    let latency = (9.9 + 0.8 * rng.normal() + 0.15 * turns as f64).exp();
    float(b, latency);
    b.push(b'}');
}
