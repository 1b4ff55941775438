//! What a score covers: the failed attempts a run recorded beside its results, which of
//! them stand, and the two policies that let failures and lost rollouts count as
//! zero-reward rows instead of leaving the denominator.
//!
//! A rollout's identity is (group, task, rollout), where the group is the environment
//! server that ran it: its `_ng_environment_server` stamp, else the one server that
//! stamped rows of its agent, else its agent's name. Separate runs number their tasks
//! from 0, and the group keeps them apart across shards; within one shard, rows are
//! keyed by (task, rollout) alone.
//!
//! For each shard, the last sidecar line of a (task, rollout) stands, whatever its
//! class; a standing failure whose rollout later succeeded in the same shard is gone; a
//! later shard's failure of the same identity replaces an earlier one. A standing
//! failure whose identity has no result is either counted (its class was asked for and
//! it names an agent or a server) or dropped from the score, reported by class.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Location, Result};
use crate::ingest::labels::named;
use crate::ingest::rollouts::NONE;
use crate::ingest::sidecar::ObjectLines;
use crate::ingest::RolloutTable;
use crate::json::Json;

/// A task or rollout index as an identity part: Python's equality (`1 == 1.0 == True`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Idx {
    Null,
    Int(i64),
    Text(String),
    Other(String),
}

impl Idx {
    pub fn of(v: Option<&Json>) -> Idx {
        match v {
            None | Some(Json::Null) => Idx::Null,
            Some(Json::Int(i)) => Idx::Int(*i),
            Some(Json::Bool(b)) => Idx::Int(i64::from(*b)),
            Some(Json::Float(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Idx::Int(*f as i64),
            Some(Json::Str(s)) => Idx::Text(s.clone()),
            Some(other) => {
                let mut b = Vec::new();
                crate::json::write_compact(&mut b, other);
                Idx::Other(String::from_utf8_lossy(&b).into_owned())
            }
        }
    }
}

/// A standing failure without a result: (group, task index, class).
pub type Failed = (Option<String>, Idx, String);

/// Each failure (that names a group) with its run label: the label of the run whose key
/// is its group, or the group's own name for a run with no result at all.
pub fn labelled<'a>(failed: &'a [Failed], runs: &'a crate::ingest::labels::Runs) -> Vec<(&'a str, &'a Failed)> {
    let mut label_of: HashMap<&str, &str> = HashMap::new();
    for r in 0..runs.key.len() {
        if let (Some(k), Some(l)) = (runs.key_of(r), runs.label_of(r)) {
            label_of.entry(k).or_insert(l);
        }
    }
    failed
        .iter()
        .filter_map(|f| {
            let g = f.0.as_deref()?;
            Some((label_of.get(g).copied().unwrap_or(g), f))
        })
        .collect()
}

/// (task, rollout) of a row.
type Pair = (Idx, Idx);
/// (group, task, rollout); the group is an id into [`Servers::groups`] (`NONE`: no group).
type Identity = (u32, Idx, Idx);

fn pair_of(row: &Json) -> Pair {
    (Idx::of(row.get("_ng_task_index")), Idx::of(row.get("_ng_rollout_index")))
}

fn agent_of(row: &Json) -> Option<&str> {
    named(row.get("agent_ref").and_then(|a| a.get("name")).and_then(Json::as_str))
}

fn stamp_of(row: &Json) -> Option<&str> {
    named(row.get("_ng_environment_server").and_then(Json::as_str))
}

/// The class a failure reports under (`unknown` when it names none).
pub fn class_of(row: &Json) -> &str {
    named(row.get("_ng_failure_class").and_then(Json::as_str)).unwrap_or("unknown")
}

/// One shard with the files beside it, read.
pub struct ShardSide {
    pub path: PathBuf,
    /// Its failures sidecar, when it exists.
    pub failures: Option<(PathBuf, ObjectLines)>,
    /// Its materialized inputs: read, or the path that does not exist.
    pub materialized: std::result::Result<(PathBuf, ObjectLines), PathBuf>,
}

/// The environment servers the rows reveal: every stamp fronts the agents its rows
/// name, and rows without a stamp are routed by their agent.
pub struct Servers {
    agents: HashMap<String, BTreeSet<String>>,
    /// Group names, interned.
    pub groups: Vec<String>,
    group_ids: HashMap<String, u32>,
}

impl Servers {
    fn new() -> Servers {
        Servers { agents: HashMap::new(), groups: Vec::new(), group_ids: HashMap::new() }
    }

    fn see(&mut self, stamp: Option<&str>, agent: Option<&str>) {
        if let Some(s) = stamp {
            let set = self.agents.entry(s.to_string()).or_default();
            if let Some(a) = agent {
                set.insert(a.to_string());
            }
        }
    }

    /// The servers whose rows name `agent`, sorted.
    fn servers_of(&self, agent: &str) -> Vec<&str> {
        let mut v: Vec<&str> = self.agents.iter().filter(|(_, a)| a.contains(agent)).map(|(s, _)| s.as_str()).collect();
        v.sort_unstable();
        v
    }

    /// The server an unstamped row of `agent` belongs to, when exactly one fronts it;
    /// several are an error, located at `at`.
    pub fn route(&self, agent: &str, at: &dyn Fn() -> String) -> Result<Option<&str>> {
        match self.servers_of(agent).as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one)),
            several => Err(Error::Mismatch(format!(
                "{}: agent '{agent}' is fronted by several environment servers: {}; a row naming the agent but no \
                 `_ng_environment_server` cannot be given to one of them (stamp the rows, or aggregate each \
                 server's shards apart)",
                at(),
                python_list(several)
            ))),
        }
    }

    fn intern(&mut self, g: &str) -> u32 {
        if let Some(&i) = self.group_ids.get(g) {
            return i;
        }
        self.groups.push(g.to_string());
        self.group_ids.insert(g.to_string(), (self.groups.len() - 1) as u32);
        (self.groups.len() - 1) as u32
    }

    /// The group of a row with this stamp and agent.
    fn group(&mut self, stamp: Option<&str>, agent: Option<&str>, at: &dyn Fn() -> String) -> Result<u32> {
        let g = match (stamp, agent) {
            (Some(s), _) => s.to_string(),
            (None, Some(a)) => self.route(a, at)?.unwrap_or(a).to_string(),
            (None, None) => return Ok(NONE),
        };
        Ok(self.intern(&g))
    }
}

/// `['a', 'b']`, as Python prints a list of names.
pub fn python_list(items: &[impl AsRef<str>]) -> String {
    let quoted: Vec<String> =
        items.iter().map(|s| format!("'{}'", s.as_ref().replace('\\', "\\\\").replace('\'', "\\'"))).collect();
    format!("[{}]", quoted.join(", "))
}

/// The two denominator policies.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Failure classes whose standing failures count as zero-reward rows.
    pub count_classes: Vec<String>,
    /// Materialized rollouts that left no row anywhere count as zero-reward rows.
    pub count_missing: bool,
}

impl Policy {
    pub fn any(&self) -> bool {
        !self.count_classes.is_empty() || self.count_missing
    }
}

/// A line for the terminal, in the order it arose.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    Say(String),
    Warn(String),
}

/// What the score covers.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    /// Rows counted as zeros: failures first, then lost rollouts, task fields filled in.
    pub counted: Vec<Json>,
    /// How many failure rows were counted (`None`: no class was asked for).
    pub counted_failures: Option<usize>,
    /// How many lost rollouts were counted (`None`: that policy was off).
    pub counted_missing: Option<usize>,
    /// Standing failures left out of the score, by class.
    pub dropped: BTreeMap<String, usize>,
    /// Result records read.
    pub records: usize,
    pub notes: Vec<Note>,
    /// Standing failures without a result (counted or dropped), for the coverage tables.
    pub failures: Vec<Failed>,
}

impl Coverage {
    pub fn dropped_total(&self) -> usize {
        self.dropped.values().sum()
    }
    /// Rows the metrics are computed from.
    pub fn scored(&self) -> usize {
        self.records + self.counted.len()
    }
    /// Rollouts the score owes: scored plus dropped.
    pub fn expected(&self) -> usize {
        self.scored() + self.dropped_total()
    }
    pub fn imputed(&self) -> usize {
        self.counted_missing.unwrap_or(0)
    }
    /// The counted rows as JSONL, compact.
    pub fn counted_jsonl(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for r in &self.counted {
            crate::json::write_compact(&mut out, r);
            out.push(b'\n');
        }
        out
    }
    /// The closing lines: what is missing from the score and what the metrics cover.
    pub fn summary_lines(&self) -> Vec<String> {
        let mut v = Vec::new();
        let (d, e) = (self.dropped_total(), self.expected());
        if d > 0 {
            let classes: Vec<String> = self.dropped.iter().map(|(c, n)| format!("{n} {c}")).collect();
            v.push(format!(
                "Rollouts missing from the score: {d} of {e} materialized ({} routed this run; see the shards' \
                 _failures.jsonl sidecars)",
                classes.join(", ")
            ));
            v.push(format!("Metrics cover: {} of {e} rollouts", self.scored()));
        }
        if self.imputed() > 0 {
            v.push(format!("Scored as zero because they left no row: {} of {e} rollouts", self.imputed()));
        }
        v
    }
}

/// The records' side of the count: identities, per-shard pairs, keys per group.
struct Records {
    results: HashSet<Identity>,
    shard_pairs: Vec<HashSet<Pair>>,
    keys: HashMap<u32, HashSet<Arc<str>>>,
}

/// Reads the servers every row reveals (records, sidecars, materialized inputs).
pub fn servers(t: &RolloutTable, shards: &[ShardSide]) -> Servers {
    let mut s = Servers::new();
    // Rows of one (server, agent) pair come in runs: hash a pair only when it changes.
    let mut seen: HashSet<(u32, u32)> = HashSet::new();
    let mut last = None;
    for r in 0..t.len() {
        let pair = (t.server[r], t.agent[r]);
        if last != Some(pair) && seen.insert(pair) {
            s.see(named(t.name(pair.0)), named(t.name(pair.1)));
        }
        last = Some(pair);
    }
    for sh in shards {
        let side = sh.failures.iter().map(|f| &f.1).chain(sh.materialized.as_ref().ok().map(|m| &m.1));
        for (_, row) in side.flatten() {
            s.see(stamp_of(row), agent_of(row));
        }
    }
    s
}

/// Gives every row without a stamp the one server that fronts its agent (a run's rows
/// are scored per server); refuses an agent that several servers front.
pub fn route_rows(t: &mut RolloutTable, s: &Servers) -> Result<()> {
    // Per name id (names are few; rows are many): whether it names a server, and the
    // server each agent's unstamped rows go to once decided.
    let is_named: Vec<bool> = (0..t.names.len()).map(|i| named(t.name(i as u32)).is_some()).collect();
    let named_id = |id: u32| (id as usize) < is_named.len() && is_named[id as usize];
    let mut routed: Vec<Option<u32>> = vec![None; t.names.len()];
    for r in 0..t.len() {
        let a = t.agent[r];
        if named_id(t.server[r]) || !named_id(a) {
            continue;
        }
        let id = match routed[a as usize] {
            Some(id) => id,
            None => {
                let agent = t.name(a).unwrap_or_default();
                let at = || t.describe(r);
                let id = match s.route(agent, &at)? {
                    Some(server) => match t.names.iter().position(|n| n == server) {
                        Some(i) => i as u32,
                        None => {
                            t.names.push(server.to_string());
                            (t.names.len() - 1) as u32
                        }
                    },
                    None => t.server[r],
                };
                routed[a as usize] = Some(id);
                id
            }
        };
        t.server[r] = id;
    }
    Ok(())
}

fn records(t: &RolloutTable, shards: &[ShardSide], s: &mut Servers) -> Result<Records> {
    let shard_of_file: Vec<Option<usize>> =
        t.lines.files().iter().map(|f| shards.iter().position(|sh| sh.path == *f)).collect();
    let mut rec = Records {
        results: HashSet::with_capacity(t.len()),
        shard_pairs: vec![HashSet::new(); shards.len()],
        keys: HashMap::new(),
    };
    let mut group_of: HashMap<(u32, u32), u32> = HashMap::new();
    let mut orders_seen: HashSet<(u32, u32)> = HashSet::new();
    for r in 0..t.len() {
        let g = match group_of.get(&(t.server[r], t.agent[r])) {
            Some(&g) => g,
            None => {
                let at = || t.describe(r);
                let g = s.group(named(t.name(t.server[r])), named(t.name(t.agent[r])), &at)?;
                group_of.insert((t.server[r], t.agent[r]), g);
                g
            }
        };
        let pair = (Idx::Int(t.task[r]), Idx::Int(t.rollout[r]));
        if let Some(k) = shard_of_file[crate::ingest::LineMap::split(t.line[r]).0] {
            rec.shard_pairs[k].insert(pair.clone());
        }
        rec.results.insert((g, pair.0, pair.1));
        if orders_seen.insert((g, t.order[r])) {
            let keys = rec.keys.entry(g).or_default();
            for &c in &t.orders[t.order[r] as usize] {
                if c == crate::ingest::rollouts::SEP {
                    break;
                }
                keys.insert(Arc::from(t.columns[c as usize].name.as_str()));
            }
        }
    }
    Ok(rec)
}

/// Where a sidecar or materialized row was read, for messages.
fn at_line(path: &Path, line: u64) -> impl Fn() -> String + '_ {
    move || Location::line(path, line).to_string()
}

/// The standing failures, in order: (identity, class-bearing row, task index).
fn standing<'a>(shards: &'a [ShardSide], rec: &Records, s: &mut Servers) -> Result<Vec<(Identity, &'a Json)>> {
    let mut out: Vec<(Identity, &Json)> = Vec::new();
    let mut at: HashMap<Identity, usize> = HashMap::new();
    for (k, sh) in shards.iter().enumerate() {
        let Some((path, lines)) = &sh.failures else { continue };
        // The last line of each (task, rollout) stands, in the place of its first.
        let mut last: Vec<(Pair, u64, &Json)> = Vec::new();
        let mut pos: HashMap<Pair, usize> = HashMap::new();
        for (n, row) in lines {
            let p = pair_of(row);
            match pos.get(&p) {
                Some(&i) => last[i] = (p, *n, row),
                None => {
                    pos.insert(p.clone(), last.len());
                    last.push((p, *n, row));
                }
            }
        }
        for (p, n, row) in last {
            if rec.shard_pairs[k].contains(&p) {
                continue;
            }
            let g = s.group(stamp_of(row), agent_of(row), &at_line(path, n))?;
            let id = (g, p.0, p.1);
            match at.get(&id) {
                Some(&i) => out[i].1 = row,
                None => {
                    at.insert(id.clone(), out.len());
                    out.push((id, row));
                }
            }
        }
    }
    Ok(out)
}

/// A counted failure: the sidecar row without its failure diagnostics, unmasked, with a
/// zero reward unless it carries one.
fn counted_failure(row: &Json) -> Json {
    let Json::Obj(items) = row else { return row.clone() };
    let mut c = Json::Obj(
        items
            .iter()
            .filter(|(k, _)| !k.starts_with("_ng_failure_") && &**k != "failure_kind" && &**k != "failure_reason")
            .cloned()
            .collect(),
    );
    c.set("mask_sample", Json::Bool(false));
    if c.get("reward").is_none() {
        c.push(Arc::from("reward"), Json::Float(0.0));
    }
    c
}

/// A lost rollout's zero: its identity, its agent reference and a zero reward.
fn zero_of(row: &Json) -> Json {
    let mut z = Json::obj();
    for k in ["_ng_task_index", "_ng_rollout_index"] {
        z.push(Arc::from(k), row.get(k).cloned().unwrap_or(Json::Null));
    }
    z.push(Arc::from("agent_ref"), row.get("agent_ref").cloned().unwrap_or(Json::Null));
    z.push(Arc::from("reward"), Json::Float(0.0));
    if let Some(v) = row.get("_ng_environment_server") {
        z.push(Arc::from("_ng_environment_server"), v.clone());
    }
    z
}

/// Counts what the score covers, and the rows the policies add.
pub fn count(t: &RolloutTable, shards: &[ShardSide], policy: &Policy, s: &mut Servers) -> Result<Coverage> {
    let rec = records(t, shards, s)?;
    let standing = standing(shards, &rec, s)?;
    let mut cov = Coverage { records: t.len(), ..Coverage::default() };
    let mut counted_ids: Vec<Identity> = Vec::new();
    for (id, row) in &standing {
        if rec.results.contains(id) {
            continue;
        }
        let group = (id.0 != NONE).then(|| s.groups[id.0 as usize].clone());
        cov.failures.push((group, id.1.clone(), class_of(row).to_string()));
        let raw_class = named(row.get("_ng_failure_class").and_then(Json::as_str));
        let asked = raw_class.is_some_and(|c| policy.count_classes.iter().any(|x| x == c));
        if asked && (agent_of(row).is_some() || stamp_of(row).is_some()) {
            cov.counted.push(counted_failure(row));
            counted_ids.push(id.clone());
        } else {
            *cov.dropped.entry(class_of(row).to_string()).or_default() += 1;
        }
    }
    if !policy.count_classes.is_empty() {
        cov.counted_failures = Some(cov.counted.len());
        cov.notes.push(Note::Say(format!(
            "Counting {} failure row(s) as scored zeros: {}",
            cov.counted.len(),
            python_list(&policy.count_classes)
        )));
    }
    if policy.count_missing {
        // Accounted for: the results (`rec.results`) and these.
        let mut accounted: HashSet<Identity> = standing.iter().map(|(id, _)| id.clone()).collect();
        let before = cov.counted.len();
        for (k, sh) in shards.iter().enumerate() {
            count_missing(sh, &rec.shard_pairs[k], &rec.results, &mut accounted, s, &mut cov, &mut counted_ids)?;
        }
        let n = cov.counted.len() - before;
        cov.counted_missing = Some(n);
        cov.notes.push(Note::Say(format!("Counting {n} materialized rollout(s) with no row as scored zeros")));
    }
    if !cov.counted.is_empty() {
        fill_task_fields(&mut cov.counted, &counted_ids, shards, &rec, s)?;
    }
    Ok(cov)
}

/// The zeros one shard owes: its materialized rollouts with no row, no failure line and
/// no identity accounted for anywhere (among the `results`, or in `accounted`).
fn count_missing(
    sh: &ShardSide,
    own: &HashSet<Pair>,
    results: &HashSet<Identity>,
    accounted: &mut HashSet<Identity>,
    s: &mut Servers,
    cov: &mut Coverage,
    ids: &mut Vec<Identity>,
) -> Result<()> {
    let (path, rows) = match &sh.materialized {
        Ok(m) => m,
        Err(missing) => {
            cov.notes.push(Note::Warn(format!(
                "{} is missing; rollouts owed by that shard cannot be counted",
                missing.display()
            )));
            return Ok(());
        }
    };
    let failed: HashSet<Pair> = sh.failures.iter().flat_map(|f| f.1.iter().map(|(_, r)| pair_of(r))).collect();
    let mut zeroed: HashSet<Pair> = HashSet::new();
    let mut unnamed = 0usize;
    for (n, row) in rows {
        let p = pair_of(row);
        if own.contains(&p) || failed.contains(&p) || zeroed.contains(&p) {
            continue;
        }
        if agent_of(row).is_none() && stamp_of(row).is_none() {
            unnamed += 1;
            continue;
        }
        let g = s.group(stamp_of(row), agent_of(row), &at_line(path, *n))?;
        let id = (g, p.0.clone(), p.1.clone());
        if !results.contains(&id) && accounted.insert(id.clone()) {
            zeroed.insert(p);
            cov.counted.push(zero_of(row));
            ids.push(id);
        }
    }
    if unnamed > 0 {
        cov.notes.push(Note::Warn(format!(
            "{unnamed} materialized rollout(s) name no agent or environment server and are not counted"
        )));
    }
    Ok(())
}

/// Gives each counted row its task's dataset fields from the materialized rows of the
/// same identity: the fields some record of its group has, that are not private
/// (`_`-prefixed) or model payloads, and that the row lacks.
fn fill_task_fields(
    counted: &mut [Json],
    ids: &[Identity],
    shards: &[ShardSide],
    rec: &Records,
    s: &mut Servers,
) -> Result<()> {
    let want: HashSet<&Identity> = ids.iter().collect();
    let mut by_id: HashMap<Identity, Vec<&Json>> = HashMap::new();
    for sh in shards {
        let Ok((path, rows)) = &sh.materialized else { continue };
        for (n, row) in rows {
            let p = pair_of(row);
            let g = s.group(stamp_of(row), agent_of(row), &at_line(path, *n))?;
            let id = (g, p.0, p.1);
            if want.contains(&id) {
                by_id.entry(id).or_default().push(row);
            }
        }
    }
    let empty = HashSet::new();
    for (row, id) in counted.iter_mut().zip(ids) {
        let keys = rec.keys.get(&id.0).unwrap_or(&empty);
        for m in by_id.get(id).into_iter().flatten() {
            let Json::Obj(items) = m else { continue };
            for (k, v) in items {
                let skip = k.starts_with('_') || &**k == "responses_create_params" || &**k == "response";
                if !skip && keys.contains(k) && row.get(k).is_none() {
                    row.push(k.clone(), v.clone());
                }
            }
        }
    }
    Ok(())
}
