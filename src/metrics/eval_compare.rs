//! NeMo Gym's `gym eval compare`: a baseline run against candidate runs, read from their
//! `_aggregate_metrics.json` files alone. Per agent: every primary metric with both
//! sides' values and cross-repeat intervals, the change (absolute and relative) with a
//! 95% Welch interval over the runs' per-repeat values, and the tasks whose reward
//! moved (pass/fail flips when rewards are binary, the largest changes otherwise).
//!
//! The rules, as NeMo Gym 0.7.0 applies them:
//! - A run's metrics are its `key_metrics` overlaid with its `agent_metrics`; rows are
//!   the baseline's numeric metrics in that order, then names only candidates report,
//!   keeping primary metrics (point estimates: no other statistic's prefix or suffix,
//!   no `_across_repeats/`, no bookkeeping names).
//! - A side's displayed value (and the delta) is `mean_across_repeats/<metric>` when the
//!   run recorded it, else the metric's value; the delta in percent divides by the
//!   baseline's magnitude and is absent for a zero baseline.
//! - The delta interval needs `mean_across_repeats/<metric>` in both runs' agent metrics
//!   and two finite per-repeat values a side (from `repeat_level_metrics`).
//! - Tasks are joined on `_ng_task_index`; a task passes when its mean reward is above
//!   0.5 (exactly 0.5 on either side is a tie). Rewards are binary when every task's
//!   recorded min and max (else its mean) on both sides is 0 or 1; otherwise every task
//!   whose mean changed is listed, largest change first. Beyond 10 per direction, the
//!   per-repeat reward lists are left out.
//! - An aggregate file written before repeat-level metrics existed gets them rebuilt from
//!   the rollout summaries it stores (`rollout_infos`), through the same aggregate
//!   computation `rollstat aggregate` runs, with a warning.
//!
//! Nothing here reads or writes files: the workflow hands in each file's bytes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::aggregate::{aggregate, AggregateOptions};
use super::levels::is_primary_metric;
use super::warnings::Warnings;
use crate::error::{Error, Location, Msg, Opt, Result};
use crate::ingest::read_rollouts_bytes;
use crate::json::{parse, write_compact, Json};
use crate::stats::welch_interval;

/// The per-task field flips are computed from.
pub const FLIP_FIELD: &str = "reward";
/// A task passes when its mean reward is above this.
const PASS_THRESHOLD: f64 = 0.5;
/// Flips shown per direction in the Markdown table; beyond it the JSON drops the
/// per-repeat reward lists.
pub const MAX_FLIPS_SHOWN: usize = 10;
/// Confidence of every interval.
const CONFIDENCE: f64 = 0.95;

/// Which side a run is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Baseline,
    Candidate,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Baseline => "baseline",
            Role::Candidate => "candidate",
        }
    }
}

/// One run's parsed aggregate file, its entries indexed by agent name.
#[derive(Debug, Clone)]
pub struct RunFile {
    pub role: Role,
    /// Position among the candidates (0 for the baseline).
    pub index: usize,
    /// The rollouts path as given (for messages).
    pub given: String,
    /// The rollouts path resolved against the working folder.
    pub rollouts: PathBuf,
    /// The aggregate file read.
    pub aggregate: PathBuf,
    /// Entries in file order, by agent name.
    pub entries: Vec<(String, Json)>,
}

impl RunFile {
    /// Short display name: the folder the rollouts live in, else the file's stem.
    pub fn label(&self) -> String {
        match self.rollouts.parent().and_then(Path::file_name) {
            Some(n) if !n.is_empty() => n.to_string_lossy().into_owned(),
            _ => self.rollouts.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
        }
    }
    /// The agent names, sorted.
    pub fn agent_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.entries.iter().map(|(n, _)| n.clone()).collect();
        v.sort();
        v
    }
    fn entry(&self, agent: &str) -> Option<&Json> {
        self.entries.iter().find(|(n, _)| n == agent).map(|(_, e)| e)
    }
    /// `candidate[i]` or `baseline`.
    fn tag(&self) -> String {
        match self.role {
            Role::Baseline => "baseline".into(),
            Role::Candidate => format!("candidate[{}]", self.index),
        }
    }
    /// What the report says about the file.
    pub fn info(&self) -> RunInfo {
        RunInfo {
            role: self.role,
            index: self.index,
            rollouts: self.rollouts.clone(),
            aggregate: self.aggregate.clone(),
            label: self.label(),
            agent_names: self.agent_names(),
        }
    }
}

/// A run as the report describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    pub role: Role,
    pub index: usize,
    pub rollouts: PathBuf,
    pub aggregate: PathBuf,
    pub label: String,
    pub agent_names: Vec<String>,
}

/// Python's `repr()` of a string, as NeMo Gym's messages quote names.
pub fn py_repr(s: &str) -> String {
    let q = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(q);
    out
}

fn bad(file: &Path, key: Option<&str>, msg: String) -> Error {
    let mut loc = Location::file(file);
    if let Some(k) = key {
        loc = loc.key(k);
    }
    Error::bad(loc, msg)
}

/// Parses and checks one aggregate file: a non-empty JSON list of objects, each naming
/// its agent (`agent_ref.name`, once per file), with objects where metrics are expected
/// and lists of objects where tasks, repeats and rollout summaries are.
pub fn parse_run_file(
    role: Role,
    index: usize,
    given: &str,
    rollouts: &Path,
    aggregate_path: &Path,
    bytes: &[u8],
) -> Result<RunFile> {
    let f = aggregate_path;
    let payload = parse(bytes).map_err(|e| {
        bad(
            f,
            None,
            format!("not valid JSON ({e}); expected an aggregate-metrics file (a JSON list of per-agent entries)"),
        )
    })?;
    let items = match payload {
        Json::Arr(items) => items,
        other => {
            return Err(bad(
                f,
                None,
                format!(
                    "is {}, not a valid aggregate-metrics file (expected a JSON list of per-agent entries)",
                    other.kind()
                ),
            ))
        }
    };
    if items.is_empty() {
        return Err(bad(f, None, "contains no agent entries (expected a JSON list of per-agent entries)".into()));
    }
    let mut entries: Vec<(String, Json)> = Vec::with_capacity(items.len());
    for (pos, entry) in items.into_iter().enumerate() {
        if !matches!(entry, Json::Obj(_)) {
            return Err(bad(
                f,
                None,
                format!("entry {pos} is {}, not an object (expected a JSON list of per-agent entries)", entry.kind()),
            ));
        }
        let name = match entry.get("agent_ref").and_then(|r| r.get("name")) {
            Some(Json::Str(s)) if !s.is_empty() => s.clone(),
            _ => {
                return Err(bad(
                    f,
                    Some("agent_ref.name"),
                    format!("entry {pos} has no `agent_ref.name` (expected the agent's name as text)"),
                ))
            }
        };
        if entries.iter().any(|(n, _)| *n == name) {
            return Err(bad(f, Some("agent_ref.name"), format!("contains two entries for agent {}", py_repr(&name))));
        }
        check_entry(f, &name, &entry)?;
        entries.push((name, entry));
    }
    Ok(RunFile {
        role,
        index,
        given: given.to_string(),
        rollouts: rollouts.to_path_buf(),
        aggregate: aggregate_path.to_path_buf(),
        entries,
    })
}

/// The shape checks of one entry (see [`parse_run_file`]).
fn check_entry(f: &Path, agent: &str, e: &Json) -> Result<()> {
    let at = |k: &str| format!("agent {}: `{k}`", py_repr(agent));
    for k in ["agent_metrics", "key_metrics"] {
        match e.get(k) {
            None | Some(Json::Null | Json::Obj(_)) => {}
            Some(v) => {
                return Err(bad(f, Some(k), format!("{} is {}; expected an object of metrics", at(k), v.kind())))
            }
        }
    }
    for k in ["group_level_metrics", "repeat_level_metrics"] {
        match e.get(k) {
            None | Some(Json::Null) => {}
            Some(Json::Arr(list)) => {
                for (i, item) in list.iter().enumerate() {
                    if !matches!(item, Json::Obj(_)) {
                        return Err(bad(
                            f,
                            Some(k),
                            format!("{} item {i} is {}; expected an object", at(k), item.kind()),
                        ));
                    }
                    if k == "repeat_level_metrics" {
                        if let Some(v) = item.get("missing_count") {
                            if !matches!(v, Json::Int(_) | Json::Float(_)) {
                                return Err(bad(
                                    f,
                                    Some("missing_count"),
                                    format!("{} item {i}: `missing_count` is {}; expected a number", at(k), v.kind()),
                                ));
                            }
                        }
                    }
                    if k == "group_level_metrics" {
                        check_task(f, agent, i, item)?;
                    }
                }
            }
            Some(v) => return Err(bad(f, Some(k), format!("{} is {}; expected a list of objects", at(k), v.kind()))),
        }
    }
    Ok(())
}

fn check_task(f: &Path, agent: &str, i: usize, t: &Json) -> Result<()> {
    let here = format!("agent {}: `group_level_metrics` item {i}", py_repr(agent));
    match t.get("_ng_task_index") {
        None | Some(Json::Int(_)) => {}
        Some(v) => {
            return Err(bad(
                f,
                Some("_ng_task_index"),
                format!("{here}: `_ng_task_index` is {}; expected an integer", v.kind()),
            ))
        }
    }
    match t.get("rollout_infos") {
        None | Some(Json::Null) => {}
        Some(Json::Arr(list)) => {
            if let Some((j, v)) = list.iter().enumerate().find(|(_, v)| !matches!(v, Json::Obj(_))) {
                return Err(bad(
                    f,
                    Some("rollout_infos"),
                    format!("{here}: `rollout_infos` item {j} is {}; expected an object", v.kind()),
                ));
            }
        }
        Some(v) => {
            return Err(bad(
                f,
                Some("rollout_infos"),
                format!("{here}: `rollout_infos` is {}; expected a list of objects", v.kind()),
            ))
        }
    }
    Ok(())
}

/// Whether some entry of the file has no `repeat_level_metrics` (a file written before
/// they existed).
pub fn needs_rebuild(run: &RunFile) -> bool {
    run.entries.iter().any(|(_, e)| e.get("repeat_level_metrics").is_none())
}

/// The warning for a rebuilt file, worded as NeMo Gym words it.
pub fn rebuild_warning(aggregate_path: &Path) -> String {
    format!(
        "Repeat-level metrics are missing in '{}'; calculating them from stored rollout summaries.",
        aggregate_path.display()
    )
}

/// Adds repeat-level metrics to each entry that lacks them, computed from the rollout
/// summaries its tasks store as `rollstat aggregate` computes an agent's metrics: the
/// computed agent metrics overlaid with the stored ones (stored values win, stored names
/// not computed come after), `num_repeats` from the tasks, and the computed
/// `repeat_level_metrics`. Entries whose tasks store no summaries get none.
pub fn rebuild_repeat_metrics(run: &mut RunFile, warn: &mut Warnings) -> Result<()> {
    let path = run.aggregate.clone();
    for (name, entry) in &mut run.entries {
        if entry.get("repeat_level_metrics").is_some() {
            continue;
        }
        let mut lines = Vec::new();
        for task in arr(entry.get("group_level_metrics")) {
            for info in arr(task.get("rollout_infos")) {
                let mut row = info.clone();
                // Missing indexes count as 0, as NeMo Gym reads them.
                for k in ["_ng_task_index", "_ng_rollout_index"] {
                    if row.get(k).is_none() {
                        row.set(k, Json::Int(0));
                    }
                }
                row.remove("agent_ref");
                row.remove("_ng_environment_server");
                write_compact(&mut lines, &row);
                lines.push(b'\n');
            }
        }
        let (computed, repeats) = if lines.is_empty() {
            (Vec::new(), Vec::new())
        } else {
            let label = PathBuf::from(format!("{} (rollout_infos of agent {})", path.display(), py_repr(name)));
            let t = read_rollouts_bytes(&label, &lines, Default::default())?;
            let opts = AggregateOptions { default_agent: Some("agent".into()), ..AggregateOptions::default() };
            let (entries, w) = aggregate(&t, None, &opts)?;
            warn.extend(w);
            let e = entries.into_iter().next();
            let agent = match e.as_ref().and_then(|e| e.member("agent_metrics")) {
                Some(Json::Obj(m)) => m.clone(),
                _ => Vec::new(),
            };
            (agent, e.map(|e| e.repeats).unwrap_or_default())
        };
        let mut merged = Json::Obj(computed);
        if let Some(Json::Obj(stored)) = entry.get("agent_metrics") {
            merged.set_all(stored.iter().map(|(k, v)| (k, v.clone())));
        }
        let groups = arr(entry.get("group_level_metrics"));
        let repeats_json = Json::Arr(repeats);
        let n = derive_num_repeats(groups, arr(Some(&repeats_json)));
        merged.set("num_repeats", n.map_or(Json::Null, Json::Int));
        entry.set("agent_metrics", merged);
        entry.set("repeat_level_metrics", repeats_json);
    }
    Ok(())
}

fn arr(v: Option<&Json>) -> &[Json] {
    match v {
        Some(Json::Arr(a)) => a,
        _ => &[],
    }
}

fn obj(v: Option<&Json>) -> &[(Arc<str>, Json)] {
    match v {
        Some(Json::Obj(o)) => o,
        _ => &[],
    }
}

/// How many repeats a run collected: the most `expected_num_rollouts` of any task, else
/// the number of repeat entries, else unknown.
fn derive_num_repeats(groups: &[Json], repeats: &[Json]) -> Option<i64> {
    let most = groups
        .iter()
        .filter_map(|g| match g.get("expected_num_rollouts") {
            Some(Json::Int(i)) => Some(*i),
            _ => None,
        })
        .max();
    most.or_else(|| (!repeats.is_empty()).then_some(repeats.len() as i64))
}

/// A number that is not a boolean, as a float.
fn numeric(v: Option<&Json>) -> Option<f64> {
    match v {
        Some(Json::Int(i)) => Some(*i as f64),
        Some(Json::Float(f)) => Some(*f),
        _ => None,
    }
}

/// Which agents to compare.
#[derive(Debug, Clone, Default)]
pub struct AgentChoice {
    /// The agent on every side.
    pub agent: Option<String>,
    /// The baseline's agent (over `agent`).
    pub baseline_agent: Option<String>,
    /// Each candidate's agent, by position (over `agent`).
    pub candidate_agents: Option<Vec<String>>,
}

/// One comparison block: the baseline's agent and each candidate's.
#[derive(Debug, Clone, PartialEq)]
struct Selection {
    baseline: String,
    candidates: Vec<String>,
}

/// The agents of a file with more than one, when none was chosen.
fn sole_agent(run: &RunFile) -> Result<String> {
    if run.entries.len() == 1 {
        return Ok(run.entries[0].0.clone());
    }
    let msg = Msg::default().text(format!(
        "The {} run's metrics at '{}' contain {} agents: {}. ",
        run.role.as_str(),
        run.aggregate.display(),
        run.entries.len(),
        run.agent_names().join(", ")
    ));
    Err(Error::refused(None, choose_agents(msg, "to compare one of them on both sides", "to choose")))
}

/// `msg` followed by how to choose the agents compared: one for both sides (`both`
/// says what that does), or one per side (`per_side`: "to choose", "to pick").
fn choose_agents(msg: Msg, both: &str, per_side: &str) -> Msg {
    msg.text("Pass ")
        .opt(Opt::value("agent", "NAME"))
        .text(format!(" {both}, or "))
        .opt(Opt::named("baseline_agent"))
        .text(" / ")
        .opt(Opt::named("candidate_agents"))
        .text(format!(" {per_side} a different agent per side."))
}

fn require_agent(run: &RunFile, agent: &str) -> Result<()> {
    if run.entry(agent).is_some() {
        return Ok(());
    }
    let names = run.agent_names();
    Err(Error::Usage(format!(
        "Agent '{agent}' is not in '{}'. Available: {}.{}",
        run.aggregate.display(),
        names.join(", "),
        did_you_mean(agent, &names)
    )))
}

/// ` Did you mean `X`?` for the closest name (Python's `difflib.get_close_matches`
/// with its default cutoff 0.6), or nothing.
fn did_you_mean(value: &str, names: &[String]) -> String {
    let a: Vec<char> = value.chars().collect();
    let mut best: Option<(f64, &String)> = None;
    for n in names {
        let b: Vec<char> = n.chars().collect();
        let total = a.len() + b.len();
        if total == 0 {
            continue;
        }
        // difflib compares each candidate (its first sequence) against the value.
        let r = 2.0 * matching_chars(&b, &a) as f64 / total as f64;
        if r >= 0.6 && best.is_none_or(|(s, x)| r > s || (r == s && n > x)) {
            best = Some((r, n));
        }
    }
    best.map(|(_, n)| format!(" Did you mean `{n}`?")).unwrap_or_default()
}

/// Characters in matching blocks, as difflib's `SequenceMatcher` finds them: the longest
/// common run (earliest in `a`, then in `b`), then recursively left and right of it.
fn matching_chars(a: &[char], b: &[char]) -> usize {
    if a.is_empty() || b.is_empty() {
        return 0;
    }
    let (mut bi, mut bj, mut size) = (0, 0, 0);
    let mut prev = vec![0usize; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![0usize; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            if ca == cb {
                cur[j + 1] = prev[j] + 1;
                if cur[j + 1] > size {
                    size = cur[j + 1];
                    bi = i + 1 - size;
                    bj = j + 1 - size;
                }
            }
        }
        prev = cur;
    }
    if size == 0 {
        return 0;
    }
    size + matching_chars(&a[..bi], &b[..bj]) + matching_chars(&a[bi + size..], &b[bj + size..])
}

/// What [`select`] chose: the comparison blocks, run-level warnings, and the agents left
/// out by run tag.
struct Selected {
    blocks: Vec<Selection>,
    warnings: Vec<String>,
    skipped: Vec<(String, Vec<String>)>,
}

/// The comparison blocks: per-side names first, then `agent` on every side, else every
/// agent all runs share (the others are left out, with a warning in the report).
fn select(base: &RunFile, cands: &[RunFile], c: &AgentChoice) -> Result<Selected> {
    if c.baseline_agent.is_some() || c.candidate_agents.is_some() {
        let b = match c
            .baseline_agent
            .as_deref()
            .filter(|s| !s.is_empty())
            .or(c.agent.as_deref().filter(|s| !s.is_empty()))
        {
            Some(a) => a.to_string(),
            None => sole_agent(base)?,
        };
        require_agent(base, &b)?;
        let mut out = Vec::new();
        for (pos, run) in cands.iter().enumerate() {
            let explicit = c.candidate_agents.as_ref().and_then(|v| v.get(pos)).filter(|s| !s.is_empty());
            let a = match explicit.or(c.agent.as_ref().filter(|s| !s.is_empty())) {
                Some(a) => a.clone(),
                None => sole_agent(run)?,
            };
            require_agent(run, &a)?;
            out.push(a);
        }
        return Ok(Selected {
            blocks: vec![Selection { baseline: b, candidates: out }],
            warnings: vec![],
            skipped: vec![],
        });
    }
    if let Some(a) = c.agent.as_ref().filter(|s| !s.is_empty()) {
        require_agent(base, a)?;
        for run in cands {
            require_agent(run, a)?;
        }
        let blocks = vec![Selection { baseline: a.clone(), candidates: vec![a.clone(); cands.len()] }];
        return Ok(Selected { blocks, warnings: vec![], skipped: vec![] });
    }
    let mut matched = base.agent_names();
    matched.retain(|n| cands.iter().all(|r| r.entry(n).is_some()));
    if matched.is_empty() {
        let listing: Vec<String> = std::iter::once(base)
            .chain(cands)
            .map(|r| format!("  {} ({}): {}", r.role.as_str(), r.aggregate.display(), r.agent_names().join(", ")))
            .collect();
        let msg = Msg::default().text(format!(
            "No agent name is present in every run, so there is nothing to compare.\n{}\n",
            listing.join("\n")
        ));
        return Err(Error::refused(None, choose_agents(msg, "to force one agent on both sides", "to pick")));
    }
    let mut warnings = Vec::new();
    let mut skipped = Vec::new();
    for run in std::iter::once(base).chain(cands) {
        let extras: Vec<String> = run.agent_names().into_iter().filter(|n| !matched.contains(n)).collect();
        if !extras.is_empty() {
            let label = run.tag();
            warnings.push(format!("Agent(s) {} are present only in {label} and were not compared.", extras.join(", ")));
            skipped.push((label, extras));
        }
    }
    let sels =
        matched.iter().map(|n| Selection { baseline: n.clone(), candidates: vec![n.clone(); cands.len()] }).collect();
    Ok(Selected { blocks: sels, warnings, skipped })
}

/// One side narrowed to one agent.
struct Loaded<'a> {
    agent: &'a str,
    agent_metrics: &'a [(Arc<str>, Json)],
    key_metrics: &'a [(Arc<str>, Json)],
    groups: &'a [Json],
    repeats: &'a [Json],
    num_repeats: Option<i64>,
    has_repeat_cis: bool,
}

impl<'a> Loaded<'a> {
    fn new(run: &'a RunFile, agent: &'a str) -> Loaded<'a> {
        let e = run.entry(agent).expect("selected agents exist");
        let agent_metrics = obj(e.get("agent_metrics"));
        let groups = arr(e.get("group_level_metrics"));
        let repeats = arr(e.get("repeat_level_metrics"));
        Loaded {
            agent,
            agent_metrics,
            key_metrics: obj(e.get("key_metrics")),
            groups,
            repeats,
            num_repeats: derive_num_repeats(groups, repeats),
            has_repeat_cis: agent_metrics.iter().any(|(k, _)| k.starts_with("ci_low_95_across_repeats/")),
        }
    }
    /// `{**key_metrics, **agent_metrics}`.
    fn merged(&self) -> Vec<(Arc<str>, Json)> {
        let mut m = Json::Obj(self.key_metrics.to_vec());
        m.set_all(self.agent_metrics.iter().map(|(k, v)| (k, v.clone())));
        match m {
            Json::Obj(v) => v,
            _ => unreachable!(),
        }
    }
    /// The finite values of `name`, one per repeat entry that has it.
    fn repeat_values(&self, name: &str) -> Vec<f64> {
        self.repeats.iter().filter_map(|r| numeric(r.get(name))).filter(|v| v.is_finite()).collect()
    }
}

/// One side's reading of a metric and the uncertainty its run recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricValue {
    pub value: f64,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    pub se_across_repeats: Option<f64>,
    pub mean_across_repeats: Option<f64>,
    pub std_err_across_runs: Option<f64>,
}

impl MetricValue {
    /// What is displayed and compared: the mean across repeats when recorded.
    pub fn point(&self) -> f64 {
        self.mean_across_repeats.unwrap_or(self.value)
    }
}

/// A candidate's reading with its change from the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateValue {
    pub value: MetricValue,
    pub delta: Option<f64>,
    pub delta_pct: Option<f64>,
    pub delta_ci_low: Option<f64>,
    pub delta_ci_high: Option<f64>,
}

/// One metric across the runs.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricRow {
    pub metric: String,
    pub is_key_metric: bool,
    /// `baseline` and/or `candidate[i]`: the sides that carry the metric.
    pub present_in: Vec<String>,
    pub baseline: Option<MetricValue>,
    pub candidates: Vec<Option<CandidateValue>>,
}

/// How a task moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    PassToFail,
    FailToPass,
    Changed,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::PassToFail => "pass_to_fail",
            Direction::FailToPass => "fail_to_pass",
            Direction::Changed => "changed",
        }
    }
}

/// One task whose reward moved.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFlip {
    pub task_index: i64,
    pub baseline_score: f64,
    pub candidate_score: f64,
    pub delta: f64,
    pub direction: Direction,
    /// Per-repeat rewards (left out beyond [`MAX_FLIPS_SHOWN`] per direction).
    pub baseline_rewards: Option<Vec<f64>>,
    pub candidate_rewards: Option<Vec<f64>>,
}

/// Whether rewards were compared as pass/fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlipMode {
    Binary,
    Continuous,
    Unavailable,
}

impl FlipMode {
    pub fn as_str(self) -> &'static str {
        match self {
            FlipMode::Binary => "binary",
            FlipMode::Continuous => "continuous",
            FlipMode::Unavailable => "unavailable",
        }
    }
}

/// Per-task movement between the baseline and one candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct FlipSummary {
    pub candidate_index: usize,
    pub mode: FlipMode,
    pub reason: Option<String>,
    pub common_task_count: usize,
    pub baseline_only_task_count: usize,
    pub candidate_only_task_count: usize,
    pub pass_to_fail_count: Option<usize>,
    pub fail_to_pass_count: Option<usize>,
    pub tied_count: Option<usize>,
    pub unchanged_count: Option<usize>,
    pub net: Option<i64>,
    pub flips: Vec<TaskFlip>,
}

/// One agent's comparison block.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalAgentComparison {
    pub baseline_agent: String,
    pub candidate_agents: Vec<String>,
    pub baseline_task_count: usize,
    pub candidate_task_counts: Vec<usize>,
    pub baseline_repeat_count: Option<i64>,
    pub candidate_repeat_counts: Vec<Option<i64>>,
    pub metrics: Vec<MetricRow>,
    pub flips: Vec<FlipSummary>,
    pub notes: Vec<String>,
}

/// The whole comparison (what `compare_report.json` holds, less its provenance).
#[derive(Debug, Clone, PartialEq)]
pub struct EvalComparison {
    pub baseline: RunInfo,
    pub candidates: Vec<RunInfo>,
    pub comparisons: Vec<EvalAgentComparison>,
    /// Agents present but not compared, by run tag (`baseline`, `candidate[i]`).
    pub skipped_agents: Vec<(String, Vec<String>)>,
    /// Run-level warnings written into the report.
    pub warnings: Vec<String>,
}

/// Compares `base` with `cands`. Observations NeMo Gym emits as Python warnings (uneven
/// repeat coverage, scipy's precision-loss notice) go to `warn`.
pub fn eval_comparison(
    base: &RunFile,
    cands: &[RunFile],
    choice: &AgentChoice,
    warn: &mut Warnings,
) -> Result<EvalComparison> {
    let Selected { blocks: selections, warnings, skipped } = select(base, cands, choice)?;
    let mut comparisons = Vec::with_capacity(selections.len());
    for s in &selections {
        let b = Loaded::new(base, &s.baseline);
        let cs: Vec<Loaded> = cands.iter().zip(&s.candidates).map(|(r, a)| Loaded::new(r, a)).collect();
        comparisons.push(agent_comparison(&b, &cs, warn)?);
    }
    Ok(EvalComparison {
        baseline: base.info(),
        candidates: cands.iter().map(RunFile::info).collect(),
        comparisons,
        skipped_agents: skipped,
        warnings,
    })
}

fn get<'a>(m: &'a [(Arc<str>, Json)], k: &str) -> Option<&'a Json> {
    m.iter().find(|(x, _)| &**x == k).map(|(_, v)| v)
}

fn metric_value(m: &[(Arc<str>, Json)], name: &str) -> Option<MetricValue> {
    let value = numeric(get(m, name))?;
    let across = |stat: &str| numeric(get(m, &format!("{stat}_across_repeats/{name}")));
    Some(MetricValue {
        value,
        ci_low: across("ci_low_95"),
        ci_high: across("ci_high_95"),
        se_across_repeats: across("se"),
        mean_across_repeats: across("mean"),
        std_err_across_runs: numeric(get(m, &format!("{name}/std_err_across_runs"))),
    })
}

fn warn_if_repeat_samples_differ(run: &Loaded, label: &str, warn: &mut Warnings) {
    let mut counts: Vec<Option<&Json>> = Vec::new();
    for r in run.repeats {
        let c = r.get("sample_count");
        if !counts.contains(&c) {
            counts.push(c);
        }
    }
    let missing = run.repeats.iter().any(|r| numeric(r.get("missing_count")).is_some_and(|m| m > 0.0));
    if missing || counts.len() > 1 {
        warn.add(format!(
            "{label} agent {} has incomplete or unequal task coverage across repeats; delta confidence intervals may mix task-difficulty differences with repeat variance.",
            py_repr(run.agent)
        ));
    }
}

/// scipy's notice for nearly identical values, raised once per such sample.
pub const PRECISION_LOSS: &str = "Precision loss occurred in moment calculation due to catastrophic cancellation. This occurs when the data are nearly identical. Results may be unreliable.";

fn welch(base: &Loaded, cand: &Loaded, name: &str, warn: &mut Warnings) -> (Option<f64>, Option<f64>) {
    let key = format!("mean_across_repeats/{name}");
    if numeric(get(base.agent_metrics, &key)).is_none() || numeric(get(cand.agent_metrics, &key)).is_none() {
        return (None, None);
    }
    match welch_interval(&cand.repeat_values(name), &base.repeat_values(name), CONFIDENCE) {
        Some(w) => {
            for _ in 0..w.precision_loss {
                warn.add(PRECISION_LOSS.to_string());
            }
            (Some(w.low), Some(w.high))
        }
        None => (None, None),
    }
}

fn metric_rows(base: &Loaded, cands: &[Loaded], warn: &mut Warnings) -> Vec<MetricRow> {
    warn_if_repeat_samples_differ(base, "Baseline", warn);
    for (i, c) in cands.iter().enumerate() {
        warn_if_repeat_samples_differ(c, &format!("Candidate[{i}]"), warn);
    }
    let bm = base.merged();
    let cms: Vec<Vec<(Arc<str>, Json)>> = cands.iter().map(Loaded::merged).collect();
    let is_key = |n: &str| {
        base.key_metrics.iter().any(|(k, _)| &**k == n)
            || cands.iter().any(|c| c.key_metrics.iter().any(|(k, _)| &**k == n))
    };
    let mut names: Vec<&str> = Vec::new();
    for m in std::iter::once(&bm).chain(&cms) {
        for (k, v) in m {
            if numeric(Some(v)).is_some() && !names.contains(&&**k) {
                names.push(k);
            }
        }
    }
    let mut rows = Vec::new();
    for name in names {
        if !is_primary_metric(name) {
            continue;
        }
        let b = metric_value(&bm, name);
        let b_point = b.as_ref().map(MetricValue::point);
        let mut candidates = Vec::with_capacity(cands.len());
        for (c, cm) in cands.iter().zip(&cms) {
            let ci = if b.is_some() { welch(base, c, name, warn) } else { (None, None) };
            candidates.push(metric_value(cm, name).map(|v| {
                let point = v.point();
                let delta = b_point.map(|bp| point - bp);
                let delta_pct = match (delta, b_point) {
                    (Some(d), Some(bp)) if bp != 0.0 => Some(d / bp.abs() * 100.0),
                    _ => None,
                };
                CandidateValue { value: v, delta, delta_pct, delta_ci_low: ci.0, delta_ci_high: ci.1 }
            }));
        }
        let mut present_in: Vec<String> = if b.is_some() { vec!["baseline".into()] } else { vec![] };
        present_in
            .extend(candidates.iter().enumerate().filter(|(_, v)| v.is_some()).map(|(i, _)| format!("candidate[{i}]")));
        rows.push(MetricRow {
            metric: name.to_string(),
            is_key_metric: is_key(name),
            present_in,
            baseline: b,
            candidates,
        });
    }
    rows
}

fn agent_comparison(base: &Loaded, cands: &[Loaded], warn: &mut Warnings) -> Result<EvalAgentComparison> {
    let rows = metric_rows(base, cands, warn);
    if !rows.iter().any(|r| r.baseline.is_some() && r.candidates.iter().any(Option::is_some)) {
        let first5 = |base_side: bool| {
            let mut v: Vec<&str> =
                rows.iter().filter(|r| r.baseline.is_some() == base_side).map(|r| r.metric.as_str()).collect();
            v.sort_unstable();
            v.truncate(5);
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        return Err(Error::Mismatch(format!(
            "Baseline and candidate share no metric keys, so there is nothing to compare.\n  baseline-only (first 5): {}\n  candidate-only (first 5): {}\nRuns collected with different --num-repeats produce different pass@k metric names.",
            first5(true),
            first5(false)
        )));
    }
    let mut notes = Vec::new();
    let counts: Vec<Option<i64>> = cands.iter().map(|c| c.num_repeats).collect();
    if let Some(bn) = base.num_repeats {
        if counts.iter().any(|c| c.is_some_and(|c| c != bn)) {
            let list: Vec<String> = counts.iter().map(|c| c.map_or("None".to_string(), |c| c.to_string())).collect();
            notes.push(format!(
                "Repeat counts differ (baseline {bn}, candidate {}). Metric names that embed k (e.g. pass@1[avg-of-k]) will not line up across the runs.",
                list.join(", ")
            ));
        }
    }
    if !base.has_repeat_cis && !cands.iter().any(|c| c.has_repeat_cis) {
        notes.push("Neither run recorded per-run cross-repeat confidence intervals, so every baseline/candidate CI cell is empty. They are written for repeat-aggregated metrics when a run has 2 or more repeats.".into());
    }
    let one_sided = rows.iter().filter(|r| r.present_in.len() < 1 + cands.len()).count();
    if one_sided > 0 {
        notes.push(format!("{one_sided} metric(s) were reported by only one of the runs."));
    }
    Ok(EvalAgentComparison {
        baseline_agent: base.agent.to_string(),
        candidate_agents: cands.iter().map(|c| c.agent.to_string()).collect(),
        baseline_task_count: base.groups.len(),
        candidate_task_counts: cands.iter().map(|c| c.groups.len()).collect(),
        baseline_repeat_count: base.num_repeats,
        candidate_repeat_counts: counts,
        metrics: rows,
        flips: cands.iter().enumerate().map(|(i, c)| flip_summary(base, c, i)).collect(),
        notes,
    })
}

/// Tasks by index (a later task of the same index replaces an earlier one).
fn by_task<'a>(run: &Loaded<'a>) -> Vec<(i64, &'a Json)> {
    let mut out: Vec<(i64, &Json)> = Vec::new();
    for g in run.groups {
        if let Some(Json::Int(t)) = g.get("_ng_task_index") {
            match out.iter_mut().find(|(x, _)| x == t) {
                Some(slot) => slot.1 = g,
                None => out.push((*t, g)),
            }
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out
}

fn find<'a>(groups: &[(i64, &'a Json)], t: i64) -> Option<&'a Json> {
    groups.binary_search_by_key(&t, |(x, _)| *x).ok().map(|i| groups[i].1)
}

/// A task's rewards in repeat order, when every rollout summary has a numeric one.
fn per_repeat_rewards(g: &Json) -> Option<Vec<f64>> {
    let infos = arr(g.get("rollout_infos"));
    if infos.is_empty() {
        return None;
    }
    let mut ordered: Vec<&Json> = infos.iter().collect();
    let idx = |j: &Json| numeric(j.get("_ng_rollout_index")).unwrap_or(0.0);
    ordered.sort_by(|a, b| idx(a).partial_cmp(&idx(b)).unwrap_or(std::cmp::Ordering::Equal));
    ordered.iter().map(|i| numeric(i.get(FLIP_FIELD))).collect()
}

fn looks_binary(tasks: &[i64], b: &[(i64, &Json)], c: &[(i64, &Json)]) -> bool {
    let mean_key = format!("mean/{FLIP_FIELD}");
    let min_key = format!("min/{FLIP_FIELD}");
    let max_key = format!("max/{FLIP_FIELD}");
    for &t in tasks {
        for groups in [b, c] {
            let g = find(groups, t).expect("common task");
            let mut observed: Vec<Option<&Json>> = [g.get(&min_key), g.get(&max_key)]
                .into_iter()
                .filter(|v| !matches!(v, None | Some(Json::Null)))
                .collect();
            if observed.is_empty() {
                observed.push(g.get(&mean_key));
            }
            for v in observed {
                match numeric(v) {
                    Some(x) if x == 0.0 || x == 1.0 => {}
                    _ => return false,
                }
            }
        }
    }
    true
}

fn direction(b: f64, c: f64) -> Option<Direction> {
    if b == PASS_THRESHOLD || c == PASS_THRESHOLD {
        return None;
    }
    match (b > PASS_THRESHOLD, c > PASS_THRESHOLD) {
        (true, false) => Some(Direction::PassToFail),
        (false, true) => Some(Direction::FailToPass),
        _ => None,
    }
}

/// Drops the reward lists of flips beyond [`MAX_FLIPS_SHOWN`] per direction.
fn cap_reward_lists(flips: &mut [TaskFlip]) {
    let mut seen: Vec<(Direction, usize)> = Vec::new();
    for f in flips {
        let n = match seen.iter_mut().find(|(d, _)| *d == f.direction) {
            Some(slot) => {
                slot.1 += 1;
                slot.1
            }
            None => {
                seen.push((f.direction, 1));
                1
            }
        };
        if n > MAX_FLIPS_SHOWN {
            f.baseline_rewards = None;
            f.candidate_rewards = None;
        }
    }
}

fn flip_summary(base: &Loaded, cand: &Loaded, index: usize) -> FlipSummary {
    let bg = by_task(base);
    let cg = by_task(cand);
    let common: Vec<i64> = bg.iter().map(|(t, _)| *t).filter(|&t| find(&cg, t).is_some()).collect();
    let mut s = FlipSummary {
        candidate_index: index,
        mode: FlipMode::Unavailable,
        reason: None,
        common_task_count: common.len(),
        baseline_only_task_count: bg.len() - common.len(),
        candidate_only_task_count: cg.len() - common.len(),
        pass_to_fail_count: None,
        fail_to_pass_count: None,
        tied_count: None,
        unchanged_count: None,
        net: None,
        flips: Vec::new(),
    };
    if bg.is_empty() || cg.is_empty() {
        s.reason = Some("one or both runs recorded no per-task metrics.".into());
        return s;
    }
    if common.is_empty() {
        s.reason =
            Some(format!("no overlapping task indices (baseline has {}, candidate has {}).", bg.len(), cg.len()));
        return s;
    }
    let mean_key = format!("mean/{FLIP_FIELD}");
    let scored: Vec<(i64, f64, f64)> = common
        .iter()
        .filter_map(|&t| {
            let b = numeric(find(&bg, t)?.get(&mean_key))?;
            let c = numeric(find(&cg, t)?.get(&mean_key))?;
            Some((t, b, c))
        })
        .collect();
    if scored.is_empty() {
        s.reason = Some(format!("no `{mean_key}` recorded for the overlapping tasks."));
        return s;
    }
    let flip = |t: i64, b: f64, c: f64, d: Direction| TaskFlip {
        task_index: t,
        baseline_score: b,
        candidate_score: c,
        delta: c - b,
        direction: d,
        baseline_rewards: find(&bg, t).and_then(per_repeat_rewards),
        candidate_rewards: find(&cg, t).and_then(per_repeat_rewards),
    };
    let tasks: Vec<i64> = scored.iter().map(|x| x.0).collect();
    let by_change = |a: &TaskFlip, b: &TaskFlip| {
        b.delta
            .abs()
            .partial_cmp(&a.delta.abs())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(a.task_index.cmp(&b.task_index))
    };
    if !looks_binary(&tasks, &bg, &cg) {
        let mut movers: Vec<TaskFlip> =
            scored.iter().filter(|(_, b, c)| c != b).map(|&(t, b, c)| flip(t, b, c, Direction::Changed)).collect();
        movers.sort_by(by_change);
        cap_reward_lists(&mut movers);
        s.mode = FlipMode::Continuous;
        s.unchanged_count = Some(scored.len() - movers.len());
        s.flips = movers;
        return s;
    }
    let (mut tied, mut unchanged) = (0, 0);
    let mut flips = Vec::new();
    for &(t, b, c) in &scored {
        match direction(b, c) {
            Some(d) => flips.push(flip(t, b, c, d)),
            None if b == PASS_THRESHOLD || c == PASS_THRESHOLD => tied += 1,
            None => unchanged += 1,
        }
    }
    // Regressions first, then by how far the task moved.
    flips.sort_by(|a, b| {
        (a.direction != Direction::PassToFail)
            .cmp(&(b.direction != Direction::PassToFail))
            .then_with(|| by_change(a, b))
    });
    cap_reward_lists(&mut flips);
    let p2f = flips.iter().filter(|f| f.direction == Direction::PassToFail).count();
    let f2p = flips.len() - p2f;
    s.mode = FlipMode::Binary;
    s.pass_to_fail_count = Some(p2f);
    s.fail_to_pass_count = Some(f2p);
    s.tied_count = Some(tied);
    s.unchanged_count = Some(unchanged);
    s.net = Some(f2p as i64 - p2f as i64);
    s.flips = flips;
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primary_metrics() {
        for n in ["mean/reward", "pass@1[avg-of-4]/accuracy", "coverage/measured_rollouts", "reward"] {
            assert!(is_primary_metric(n), "{n}");
        }
        for n in [
            "max/reward",
            "histogram/reward",
            "mean_across_repeats/mean/reward",
            "pass@1[avg-of-4]/accuracy/std_err_across_runs",
            "num_repeats",
            "x_ci95_upper",
        ] {
            assert!(!is_primary_metric(n), "{n}");
        }
    }

    #[test]
    fn repr_quotes_as_python() {
        assert_eq!(py_repr("agent"), "'agent'");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(py_repr("tab\there"), "'tab\\there'");
    }

    /// difflib.get_close_matches(value, names, n=1) with cutoff 0.6, as Python gives it.
    #[test]
    fn close_match_as_difflib() {
        let names = vec!["code_gen_simple_agent".to_string(), "math_with_judge_simple_agent".to_string()];
        assert_eq!(did_you_mean("code_gen_agent", &names), " Did you mean `code_gen_simple_agent`?");
        assert_eq!(did_you_mean("no_such_agent", &names), "");
        // ratio("abcd", "bcde") = 2 * 3 / 8 = 0.75
        assert_eq!(matching_chars(&['a', 'b', 'c', 'd'], &['b', 'c', 'd', 'e']), 3);
    }

    #[test]
    fn flip_directions() {
        assert_eq!(direction(1.0, 0.0), Some(Direction::PassToFail));
        assert_eq!(direction(0.25, 0.75), Some(Direction::FailToPass));
        assert_eq!(direction(0.5, 1.0), None);
        assert_eq!(direction(0.75, 1.0), None);
    }
}
