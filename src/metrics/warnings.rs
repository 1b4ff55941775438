//! Warnings raised while computing statistics, counted once per distinct message in
//! order of first occurrence, printed to stderr as `warning: … (N times)`.

/// A counted list of warning messages.
#[derive(Debug, Default, Clone)]
pub struct Warnings {
    items: Vec<(String, usize)>,
    /// Where each message is in `items`: a run over thousands of fields can raise
    /// thousands of distinct messages, which a search per message would make quadratic.
    at: std::collections::HashMap<String, usize>,
}

impl PartialEq for Warnings {
    fn eq(&self, other: &Self) -> bool {
        self.items == other.items
    }
}

impl Eq for Warnings {}

impl Warnings {
    pub fn add(&mut self, msg: String) {
        self.add_n(msg, 1);
    }
    fn add_n(&mut self, msg: String, n: usize) {
        match self.at.get(&msg) {
            Some(&i) => self.items[i].1 += n,
            None => {
                self.at.insert(msg.clone(), self.items.len());
                self.items.push((msg, n));
            }
        }
    }
    /// The messages with their counts, in order of first occurrence.
    pub fn items(&self) -> &[(String, usize)] {
        &self.items
    }
    /// Takes every message out, leaving the list empty.
    pub fn drain(&mut self) -> Vec<(String, usize)> {
        self.at.clear();
        std::mem::take(&mut self.items)
    }
    pub fn extend(&mut self, other: Warnings) {
        for (m, c) in other.items {
            self.add_n(m, c);
        }
    }
    pub fn total(&self) -> usize {
        self.items.iter().map(|(_, c)| c).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Lines for stderr.
    pub fn lines(&self) -> Vec<String> {
        self.items
            .iter()
            .map(|(m, c)| if *c == 1 { format!("warning: {m}") } else { format!("warning: {m} ({c} times)") })
            .collect()
    }
}

/// The zero-standard-error warning, worded as NeMo Gym words it, followed by what it is
/// about (`what`: the field, agent and repeat), which NeMo Gym leaves out.
pub fn zero_se(n: usize, what: &str) -> String {
    format!(
        "Standard error is 0 (all {n} values are identical) -- confidence interval collapses to a single point rather than being computed. [{what}]"
    )
}

/// The unequal-repeats warning, worded as NeMo Gym words it.
pub fn unequal_repeats(count: usize, agent: &str, rollout: i64, missing: usize) -> String {
    format!(
        "{count} repeat(s) are missing rollouts for some tasks (e.g. agent='{agent}', _ng_rollout_index={rollout}, missing_count={missing}). \
repeat_level_metrics statistics were computed from unequal sample sizes across repeats and may not be directly comparable, \
and agent_level_metrics may be biased toward whichever tasks happened to complete. Consider obtaining the missing rollouts \
before drawing conclusions from these metrics."
    )
}
