//! Run keys and labels (SPEC §5): what ran a rollout, and the name reports use for it.

use std::collections::{BTreeMap, HashMap};

/// A rollout's run key: its server stamp when present, else its agent name.
pub fn run_key<'a>(server: Option<&'a str>, agent: Option<&'a str>) -> Option<&'a str> {
    server.or(agent)
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
    for (s, a) in rows {
        if let Some(k) = run_key(s, a) {
            if !seen.contains_key(k) {
                seen.insert(k.to_string(), ());
                order.push((k.to_string(), a.map(|x| x.to_string())));
            }
        }
    }
    label_runs(&order)
}

#[cfg(test)]
mod tests {
    use super::*;

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
