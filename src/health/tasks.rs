//! What is judged across records: the report order, duplicate identities, and the two
//! task checks over each task's repeats.
//!
//! Records are ordered by task, rollout and stage index, integers first (numerically),
//! then everything else by its text (a missing stage reads `None`), ties in reading
//! order. Records sharing an identity are then adjacent, and so are the records of a
//! task and of a repeat, so each of these is one pass over the sorted entries.

use std::cmp::Ordering;

use rayon::slice::ParallelSliceMut;

use super::checks::{Check, CheckSet, Verdict};
use super::digest::{Detail, Entry, Tag};
use super::record::Index;

/// Orders indexes: integers numerically, then strings by their text.
fn cmp_index(a: &Index, b: &Index) -> Ordering {
    match (a, b) {
        (Index::Int(x), Index::Int(y)) => x.cmp(y),
        (Index::Big(x), Index::Big(y)) => x.cmp(y),
        (Index::Str(x), Index::Str(y)) => x.cmp(y),
        (Index::Int(_), _) | (Index::Big(_), Index::Str(_)) => Ordering::Less,
        _ => Ordering::Greater,
    }
}

/// The entries with the details their comparisons may need.
pub struct Records<'a> {
    pub entries: &'a [Entry],
    pub details: &'a [Detail],
}

impl Records<'_> {
    /// A part that is not an integer within `i64` (`None`: no stage).
    fn index(&self, e: &Entry, part: usize) -> Option<&Index> {
        (e.tags[part] == Tag::Other).then(|| self.details[e.detail as usize].index(part)).flatten()
    }

    /// One part of two identities, in report order.
    fn cmp_part(&self, a: &Entry, b: &Entry, part: usize) -> Ordering {
        match (a.tags[part], b.tags[part]) {
            (Tag::Int, Tag::Int) => a.values[part].cmp(&b.values[part]),
            (Tag::Missing, Tag::Missing) => Ordering::Equal,
            (Tag::Int, _) => Ordering::Less,
            (_, Tag::Int) => Ordering::Greater,
            _ => {
                let none = Index::Str("None".into());
                let (x, y) = (self.index(a, part), self.index(b, part));
                cmp_index(x.unwrap_or(&none), y.unwrap_or(&none))
            }
        }
    }

    /// Whether one part of two identities is the same value (a missing stage is not the
    /// stage `"None"`).
    fn same_part(&self, a: &Entry, b: &Entry, part: usize) -> bool {
        match (a.tags[part], b.tags[part]) {
            (Tag::Int, Tag::Int) => a.values[part] == b.values[part],
            (Tag::Missing, Tag::Missing) => true,
            (Tag::Other, Tag::Other) => self.index(a, part) == self.index(b, part),
            _ => false,
        }
    }

    fn cmp_identity(&self, a: &Entry, b: &Entry) -> Ordering {
        (0..3).map(|part| self.cmp_part(a, b, part)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
    }

    /// The task index's text, as the summary's key.
    pub fn task_text(&self, e: &Entry) -> String {
        match e.tags[0] {
            Tag::Int => e.values[0].to_string(),
            _ => self.index(e, 0).map(Index::text).unwrap_or_default(),
        }
    }
}

/// Sorts the entries into report order.
pub fn sort(entries: &mut [Entry], details: &[Detail]) {
    let r = Records { entries: &[], details };
    entries.par_sort_unstable_by(|a, b| r.cmp_identity(a, b).then(a.ordinal.cmp(&b.ordinal)));
}

/// Counts, on every record sharing its (stage, task, rollout) with another, how many do;
/// their verdicts become unhealthy.
pub fn mark_duplicates(entries: &mut [Entry], details: &[Detail], ignored: CheckSet) {
    if ignored.has(Check::DuplicateIdentity) {
        return;
    }
    let r = Records { entries: &[], details };
    for run in entries.chunk_by_mut(|a, b| r.cmp_identity(a, b).is_eq()) {
        if run.len() < 2 {
            continue;
        }
        // A missing stage and the stage "None" sort together but are not the same.
        let missing = run.iter().filter(|e| e.tags[2] == Tag::Missing).count() as u32;
        let given = run.len() as u32 - missing;
        for e in run.iter_mut() {
            let copies = if e.tags[2] == Tag::Missing { missing } else { given };
            if copies >= 2 {
                e.duplicates = copies;
                e.verdict = Verdict::Unhealthy;
            }
        }
    }
}

/// One task's line in the summary.
pub struct TaskRow {
    /// Whether the task index is a string (those follow the integers).
    string: bool,
    pub key: String,
    pub repeats: u64,
    /// Repeats that are healthy, unhealthy, unobserved.
    pub verdicts: [u64; 3],
    pub flags: Vec<Check>,
}

/// The task-level results.
pub struct Tasks {
    /// The summary's task lines, in order.
    pub rows: Vec<TaskRow>,
    /// Per task check: tasks evaluated, unobserved, ignored.
    pub coverage: [[u64; 3]; 2],
    /// Per task check: tasks flagged (a task written under another's key included).
    pub flagged: [u64; 2],
}

/// One repeat (every record of a task with one rollout index, all stages and copies):
/// its verdict (the records' when they agree, else unobserved), whether every record has
/// its policy calls observed, and whether any has a successful call.
fn repeat(records: &[Entry]) -> (Verdict, bool, bool) {
    let first = records[0].verdict;
    let verdict = if records.iter().all(|e| e.verdict == first) { first } else { Verdict::Unobserved };
    let policy = records.iter().all(|e| e.policy_calls_observed);
    (verdict, policy, records.iter().any(|e| e.successful_call))
}

/// The tasks in summary order (integers first, by their decimal text, then strings),
/// with the task checks judged, and the task checks' coverage.
pub fn tasks(r: &Records<'_>, ignored: CheckSet) -> Tasks {
    let mut rows = Vec::new();
    let mut coverage = [[0u64; 3]; 2];
    let mut flagged = [0u64; 2];
    for task in r.entries.chunk_by(|a, b| r.same_part(a, b, 0)) {
        let repeats: Vec<(Verdict, bool, bool)> = task.chunk_by(|a, b| r.same_part(a, b, 1)).map(repeat).collect();
        let computable: Vec<Verdict> = repeats.iter().map(|x| x.0).filter(|v| *v != Verdict::Unobserved).collect();
        let judged = [
            (computable.len() >= 2, computable.iter().all(|v| *v == Verdict::Unhealthy)),
            (repeats.iter().all(|x| x.1), !repeats.iter().any(|x| x.2)),
        ];
        let mut flags = Vec::new();
        for (k, (check, (evaluable, found))) in
            [Check::TaskConsistentlyUnhealthy, Check::TaskNoSuccessfulCalls].into_iter().zip(judged).enumerate()
        {
            let column = if ignored.has(check) {
                2
            } else if evaluable {
                0
            } else {
                1
            };
            coverage[k][column] += 1;
            if column == 0 && found {
                flags.push(check);
                flagged[k] += 1;
            }
        }
        let mut verdicts = [0u64; 3];
        for (v, ..) in &repeats {
            verdicts[*v as usize] += 1;
        }
        let string = task[0].tags[0] == Tag::Other && matches!(r.index(&task[0], 0), Some(Index::Str(_)));
        rows.push(TaskRow { string, key: r.task_text(&task[0]), repeats: repeats.len() as u64, verdicts, flags });
    }
    rows.sort_by(|a, b| (a.string, &a.key).cmp(&(b.string, &b.key)));
    Tasks { rows: keyed_once(rows), coverage, flagged }
}

/// The rows as a dict keyed by text keeps them: task 10 and task "10" share the key
/// "10", which stays where the first was written and holds the last.
fn keyed_once(rows: Vec<TaskRow>) -> Vec<TaskRow> {
    if !rows.iter().any(|r| r.string) {
        return rows;
    }
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out: Vec<TaskRow> = Vec::with_capacity(rows.len());
    for row in rows {
        match at.get(&row.key) {
            Some(&k) => out[k] = row,
            None => {
                at.insert(row.key.clone(), out.len());
                out.push(row);
            }
        }
    }
    out
}
