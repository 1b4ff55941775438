//! Run keys and labels: what ran a rollout, and the name reports use for it.

use std::collections::{BTreeMap, HashMap};

use super::{InputTable, RolloutTable};

/// A rollout's run key: its server stamp when present, else its agent name. An empty
/// name counts as absent, as it does in NeMo Gym (`row.get(stamp) or …` in Python).
pub fn run_key<'a>(server: Option<&'a str>, agent: Option<&'a str>) -> Option<&'a str> {
    named(server).or(named(agent))
}

/// `name` unless it is empty.
pub fn named(name: Option<&str>) -> Option<&str> {
    name.filter(|s| !s.is_empty())
}

/// Labels each run key by its agent's name when that name belongs to exactly one run
/// key, else by the key itself; labels that would still clash fall back to their key.
/// `agent_by_key` lists run keys in first-seen order with the agent of their first row.
pub fn label_runs(agent_by_key: &[(String, Option<String>)]) -> HashMap<String, String> {
    let mut keys_by_agent: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (k, a) in agent_by_key {
        if let Some(a) = a {
            let v = keys_by_agent.entry(a.as_str()).or_default();
            if !v.contains(&k.as_str()) {
                v.push(k.as_str());
            }
        }
    }
    let mut labels: HashMap<String, String> = agent_by_key
        .iter()
        .map(|(k, a)| {
            let l = match a {
                Some(a) if keys_by_agent[a.as_str()].len() == 1 => a.clone(),
                _ => k.clone(),
            };
            (k.clone(), l)
        })
        .collect();
    loop {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for l in labels.values() {
            *counts.entry(l.as_str()).or_default() += 1;
        }
        let clashing: Vec<String> =
            labels.iter().filter(|(k, l)| counts[l.as_str()] > 1 && *l != *k).map(|(k, _)| k.clone()).collect();
        if clashing.is_empty() {
            return labels;
        }
        for k in clashing {
            labels.insert(k.clone(), k);
        }
    }
}

/// Builds labels from rows given as (server, agent) pairs in file order.
pub fn labels_for<'a>(rows: impl Iterator<Item = (Option<&'a str>, Option<&'a str>)>) -> HashMap<String, String> {
    let mut order: Vec<(String, Option<String>)> = Vec::new();
    let mut seen: HashMap<String, ()> = HashMap::new();
    let mut last: Option<(Option<&str>, Option<&str>)> = None;
    for (s, a) in rows {
        // Neighbouring rows mostly share their run.
        if last == Some((s, a)) {
            continue;
        }
        last = Some((s, a));
        if let Some(k) = run_key(s, a) {
            if !seen.contains_key(k) {
                seen.insert(k.to_string(), ());
                order.push((k.to_string(), named(a).map(|x| x.to_string())));
            }
        }
    }
    label_runs(&order)
}

/// What ran each rollout, by id: run keys and labels are interned.
#[derive(Debug, Clone, Default)]
pub struct Runs {
    /// Distinct run keys; `key[row]` indexes it (`NONE` when nothing names the run).
    pub keys: Vec<String>,
    pub key: Vec<u32>,
    /// Whether each run key is a server stamp (else an agent name).
    pub key_is_server: Vec<bool>,
    /// Distinct labels; `label[row]` indexes it (`NONE` when nothing names the run).
    pub labels: Vec<String>,
    pub label: Vec<u32>,
    /// With inputs: whether the rollout has an input row.
    pub has_input: Vec<bool>,
}

/// "No run" in [`Runs`].
pub const NONE: u32 = u32::MAX;

impl Runs {
    pub fn label_of(&self, row: usize) -> Option<&str> {
        let l = self.label[row];
        (l != NONE).then(|| self.labels[l as usize].as_str())
    }
    pub fn key_of(&self, row: usize) -> Option<&str> {
        let k = self.key[row];
        (k != NONE).then(|| self.keys[k as usize].as_str())
    }
}

/// The first rollout (in file order) whose own agent name or server stamp contradicts
/// the input row of its key: (rollout row, input row, what it names, what the input row
/// names). A rollout of a `gym eval run` carries its input row's names, so a
/// contradiction means the two files come from different runs. Rows that leave a name
/// out (an empty or absent `agent_ref`) contradict nothing.
pub fn contradiction(t: &RolloutTable, inputs: &InputTable) -> Option<(usize, usize, String, String)> {
    // Rows are in key order: the first contradiction in file order is the one of least line.
    let mut first: Option<(usize, usize, &str, &str, &str)> = None;
    let mut near = 0;
    for r in 0..t.len() {
        if first.is_some_and(|f| t.line[f.0] <= t.line[r]) {
            continue;
        }
        let Some(i) = inputs.row_near(near, t.task[r], t.rollout[r]) else { continue };
        near = i;
        for (own, theirs, what) in [
            (named(t.name(t.agent[r])), named(inputs.name(inputs.agent[i])), "agent_ref.name"),
            (named(t.name(t.server[r])), named(inputs.name(inputs.server[i])), "_ng_environment_server"),
        ] {
            if let (Some(a), Some(b)) = (own, theirs) {
                if a != b {
                    first = Some((r, i, what, a, b));
                    break;
                }
            }
        }
    }
    first.map(|(r, i, what, a, b)| (r, i, format!("{what} {a:?}"), format!("{what} {b:?}")))
}

/// Run key and label of every rollout: from its input row when inputs are given and the
/// row exists, else from the rollout's own `_ng_environment_server` / `agent_ref.name`.
/// Labels are computed from the input rows when given, else from the rollouts.
pub fn runs(t: &RolloutTable, inputs: Option<&InputTable>) -> Runs {
    let labels = match inputs {
        Some(inp) => input_labels(inp),
        None => labels_for((0..t.len()).map(|r| (t.name(t.server[r]), t.name(t.agent[r])))),
    };
    runs_labelled(t, inputs, &labels)
}

/// Run labels over every row of the inputs `inp`.
pub fn input_labels(inp: &InputTable) -> HashMap<String, String> {
    labels_for((0..inp.len()).map(|i| (inp.name(inp.server[i]), inp.name(inp.agent[i]))))
}

/// [`runs`] without the labels (each run's label is its key): for a part of a sweep,
/// whose labels are settled over the whole of it, so the inputs are not read through
/// for every part.
pub fn run_keys(t: &RolloutTable, inputs: Option<&InputTable>) -> Runs {
    runs_labelled(t, inputs, &HashMap::new())
}

fn runs_labelled(t: &RolloutTable, inputs: Option<&InputTable>, labels: &HashMap<String, String>) -> Runs {
    type Fast = foldhash::fast::RandomState;
    let mut out = Runs::default();
    let mut key_ids: HashMap<String, u32> = HashMap::new();
    let mut label_ids: HashMap<String, u32> = HashMap::new();
    out.key.reserve(t.len());
    out.label.reserve(t.len());
    // (from inputs, server id, agent id) -> (key, label): names are interned per table,
    // so each distinct pair is resolved once.
    type Names = (bool, u32, u32);
    type Resolved = (u32, u32);
    let mut resolved: HashMap<Names, Resolved, Fast> = HashMap::default();
    let mut last: Option<(Names, Resolved)> = None;
    let mut near = 0;
    for r in 0..t.len() {
        let row = inputs.and_then(|inp| inp.row_near(near, t.task[r], t.rollout[r]));
        near = row.unwrap_or(near);
        out.has_input.push(row.is_some());
        let ids = match (inputs, row) {
            (Some(inp), Some(i)) => (true, inp.server[i], inp.agent[i]),
            _ => (false, t.server[r], t.agent[r]),
        };
        // Neighbouring rows mostly share their names: the last pair is checked first.
        let hit = match last {
            Some((prev, kl)) if prev == ids => Some(kl),
            _ => resolved.get(&ids).copied(),
        };
        if let Some((k, l)) = hit {
            last = Some((ids, (k, l)));
            out.key.push(k);
            out.label.push(l);
            continue;
        }
        let (server, agent) = match (inputs, ids.0) {
            (Some(inp), true) => (inp.name(ids.1), inp.name(ids.2)),
            _ => (t.name(ids.1), t.name(ids.2)),
        };
        match run_key(server, agent) {
            None => {
                out.key.push(NONE);
                out.label.push(NONE);
            }
            Some(k) => {
                let kid = match key_ids.get(k) {
                    Some(&id) => id,
                    None => {
                        let id = out.keys.len() as u32;
                        out.keys.push(k.to_string());
                        out.key_is_server.push(named(server).is_some());
                        key_ids.insert(k.to_string(), id);
                        id
                    }
                };
                let l = labels.get(k).map(|s| s.as_str()).unwrap_or(k);
                let lid = match label_ids.get(l) {
                    Some(&id) => id,
                    None => {
                        let id = out.labels.len() as u32;
                        out.labels.push(l.to_string());
                        label_ids.insert(l.to_string(), id);
                        id
                    }
                };
                out.key.push(kid);
                out.label.push(lid);
            }
        }
        resolved.insert(ids, (*out.key.last().unwrap(), *out.label.last().unwrap()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty stamp or agent name names nothing (Python's `or` skips it).
    #[test]
    fn empty_names_count_as_absent() {
        assert_eq!(run_key(Some("S"), Some("A")), Some("S"));
        assert_eq!(run_key(Some(""), Some("A")), Some("A"));
        assert_eq!(run_key(None, Some("")), None);
        assert_eq!(run_key(Some(""), Some("")), None);
        // A server-keyed run whose agent name is empty is labelled by its server.
        let l = labels_for([(Some("S1"), Some("")), (Some(""), Some("B"))].into_iter());
        assert_eq!(l.get("S1").map(String::as_str), Some("S1"));
        assert_eq!(l.get("B").map(String::as_str), Some("B"));
        assert_eq!(l.len(), 2);
    }

    #[test]
    fn two_servers_one_agent_stay_apart() {
        let l = label_runs(&[
            ("env_a".into(), Some("agent".into())),
            ("env_b".into(), Some("agent".into())),
            ("solo_env".into(), Some("solo".into())),
            ("bare".into(), None),
        ]);
        assert_eq!(l["env_a"], "env_a");
        assert_eq!(l["env_b"], "env_b");
        assert_eq!(l["solo_env"], "solo");
        assert_eq!(l["bare"], "bare");
    }

    #[test]
    fn clashing_label_falls_back_to_key() {
        // server "x" whose agent is "y", and a run keyed "y" by agent name "z"... and a
        // run whose key equals another run's agent name.
        let l = label_runs(&[("s1".into(), Some("s2".into())), ("s2".into(), None)]);
        assert_eq!(l["s1"], "s1");
        assert_eq!(l["s2"], "s2");
    }
}
