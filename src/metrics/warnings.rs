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
    /// The same warnings, those that differ only in the run they name said once, naming
    /// every run (for a command that writes the tables of every run, where one field
    /// constant across repeats raises the warning for each run that has it). Other
    /// warnings stay as they are, in order of first occurrence.
    pub fn across_runs(&self) -> Warnings {
        /// A merged message: its text around the runs, the runs, the count, the first message.
        type RunGroup = ((String, String), Vec<String>, usize, String);
        // Per merged message: its text around the runs, the runs, the count, and the
        // first message as it was (said as it is when one run has it).
        let mut groups: Vec<RunGroup> = Vec::new();
        let mut at: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
        for (m, c) in &self.items {
            let Some((before, run, after)) = zero_se_run(m) else {
                groups.push(((m.clone(), String::new()), Vec::new(), *c, m.clone()));
                continue;
            };
            let key = (before.to_string(), after.to_string());
            match at.get(&key) {
                Some(&i) => {
                    groups[i].1.push(run.to_string());
                    groups[i].2 += c;
                }
                None => {
                    at.insert(key.clone(), groups.len());
                    groups.push((key, vec![run.to_string()], *c, m.clone()));
                }
            }
        }
        let mut out = Warnings::default();
        for ((before, after), runs, c, first) in groups {
            let m = if runs.len() > 1 { format!("{before}runs {}{after}", runs.join(", ")) } else { first };
            out.add_n(m, c);
        }
        out
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

/// A zero-standard-error warning cut around the run it names: the text before the run,
/// the run, the text after it. Its bracket is `[`FIELD` across repeats, RUN]` or
/// `[`FIELD`, RUN, repeat N]` (see [`zero_se`]).
fn zero_se_run(msg: &str) -> Option<(&str, &str, &str)> {
    if !msg.starts_with("Standard error is 0 (") || !msg.ends_with(']') {
        return None;
    }
    let open = msg.find("being computed. [`")? + "being computed. [".len();
    let what = &msg[open..msg.len() - 1];
    let (field, run, after) = if let Some((field, run)) = what.split_once("` across repeats, ") {
        (field.len() + "` across repeats, ".len(), run, "]")
    } else {
        let (rest, repeat) = what.rsplit_once(", repeat ")?;
        if repeat.is_empty() || !repeat.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let (field, run) = rest.split_once("`, ")?;
        (field.len() + "`, ".len(), run, &msg[open + rest.len()..])
    };
    Some((&msg[..open + field], run, after))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_that_differ_only_in_their_run_are_said_once() {
        let mut w = Warnings::default();
        for run in ["a", "b, c"] {
            w.add(zero_se(4, &format!("`mean/question_id` across repeats, {run}")));
            w.add(zero_se(150, &format!("`terminated`, {run}, repeat 9")));
        }
        w.add(zero_se(4, "`mean/difficulty` across repeats, a"));
        w.add(zero_se(3, "`mean/question_id` across repeats, d"));
        w.add("another warning".into());
        w.add("another warning".into());
        let merged = w.across_runs();
        let got: Vec<(&str, usize)> = merged.items().iter().map(|(m, c)| (m.as_str(), *c)).collect();
        assert_eq!(
            got,
            [
                (zero_se(4, "`mean/question_id` across repeats, runs a, b, c").as_str(), 2),
                (zero_se(150, "`terminated`, runs a, b, c, repeat 9").as_str(), 2),
                (zero_se(4, "`mean/difficulty` across repeats, a").as_str(), 1),
                (zero_se(3, "`mean/question_id` across repeats, d").as_str(), 1),
                ("another warning", 2),
            ]
        );
        assert_eq!(merged.total(), w.total());
    }
}
