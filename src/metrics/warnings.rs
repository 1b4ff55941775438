//! Warnings raised while computing statistics, counted once per distinct message in
//! order of first occurrence, printed to stderr as `warning: … (N times)`.

/// A counted list of warning messages.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Warnings {
    pub items: Vec<(String, usize)>,
}

impl Warnings {
    pub fn add(&mut self, msg: String) {
        if let Some(slot) = self.items.iter_mut().find(|(m, _)| *m == msg) {
            slot.1 += 1;
        } else {
            self.items.push((msg, 1));
        }
    }
    pub fn extend(&mut self, other: Warnings) {
        for (m, c) in other.items {
            if let Some(slot) = self.items.iter_mut().find(|(x, _)| *x == m) {
                slot.1 += c;
            } else {
                self.items.push((m, c));
            }
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
