//! Task identity: whether two runs hold the same task under an index, before anything is
//! paired by it.
//!
//! Every comparison pairs runs task by task on `_ng_task_index`. Runs on another dataset,
//! split, `limit` or order hold other questions under the same indexes, and pairing them
//! gives confident nonsense. Each rollout carries its task's fingerprint (a hash of its
//! user messages, see [`crate::ingest::fingerprint`]); here the fingerprints of each
//! file's tasks are gathered and checked: within a file every rollout of a task (every
//! agent of a fan-out) must ask the same, and across files every shared index must hold
//! the same fingerprint. A mismatch is refused unless the caller allows it (then paired
//! by index with a warning, as NeMo Gym does); pairing by fingerprint renumbers each
//! file's tasks so that the same question gets the same number wherever it sits.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use crate::error::{Door, Error, Location, Msg, Opt, Result};

/// A file's tasks by index: each one's fingerprint and where it was first read. `None`
/// when the file carries no fingerprints (a Parquet table, rows without
/// `responses_create_params`).
pub type FileTasks = Option<BTreeMap<i64, (u64, Location)>>;

/// How tasks are to be paired (by index, checked, when nothing is set): the one
/// configuration of every comparison.
#[derive(Debug, Clone, Default)]
pub struct Pairing {
    /// Pair by index even where the tasks differ (a warning counts them).
    pub allow_mismatch: bool,
    /// Pair by fingerprint, wherever the tasks sit.
    pub by_fingerprint: bool,
    /// Pair by this field of the user's own (the files' "fingerprints" are then hashes of
    /// each task's value of it, see [`key_hash`]), wherever the tasks sit.
    pub task_key: Option<String>,
}

impl Pairing {
    /// Refuses more than one way to pair.
    pub fn validate(&self) -> Result<()> {
        let ways = [self.allow_mismatch, self.by_fingerprint, self.task_key.is_some()];
        if ways.iter().filter(|&&w| w).count() > 1 {
            let msg = Msg::default()
                .opt(Opt::on("allow_task_mismatch"))
                .text(" (by index), ")
                .opt(by_content())
                .text(" (by content) and ")
                .opt(Opt::named("task_key"))
                .text(" (by a field) are three ways to pair tasks: give one");
            return Err(Error::refused(None, msg));
        }
        Ok(())
    }
}

/// Pairing by content: `--pair-by fingerprint`.
fn by_content() -> Opt {
    Opt::text("pair_by", "fingerprint".into())
}

/// A task's value of a `--task-key` field (as text that is equal exactly when the values
/// are: see the compare workflow) hashed to stand in for its fingerprint.
pub fn key_hash(key: &str) -> u64 {
    crate::ingest::fingerprint::of_text(key)
}

/// A number as `--task-key` (and `--cluster-key`) compare it, equal exactly when Python
/// finds the values equal: an integral value as its exact integer (`1`, `1.0` and `true`
/// are one), anything else as its shortest round-trip form.
pub fn number_key(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 {
        format!("{:.0}", x + 0.0)
    } else {
        format!("{x:?}")
    }
}

/// Text as those keys compare it: quoted, so the text `"1"` is not the number 1.
pub fn text_key(s: &str) -> String {
    format!("{s:?}")
}

/// `--task-key` names a field no rollout of `path` has.
pub fn no_key_field(path: &std::path::Path, field: &str) -> Error {
    let msg = Msg::default().text("no rollout has this field (").opt(Opt::named("task_key")).text(")");
    Error::refused(Some(Location::file(path).key(field)), msg)
}

/// A rollout without a usable value of the `--task-key` field.
pub fn no_key_value(at: Location, field: &str) -> Error {
    let msg = Msg::default()
        .text("this rollout has no usable value of the ")
        .opt(Opt::named("task_key"))
        .text(" field (a number, a bool or text); every rollout needs one");
    Error::refused(Some(at.key(field)), msg)
}

/// Gathers one file's tasks from its rows `(task, fingerprint, row)` (rows without a
/// fingerprint, 0, are passed over). Two rows of one task with different fingerprints
/// are refused, naming both, unless `allow_mismatch`. With `field`, the "fingerprints"
/// are the rows' hashed values of that `--task-key` field.
pub fn tasks(
    rows: impl Iterator<Item = (i64, u64, usize)>,
    at: impl Fn(usize) -> Location,
    allow_mismatch: bool,
    field: Option<&str>,
) -> Result<FileTasks> {
    let mut tasks: BTreeMap<i64, (u64, Location)> = BTreeMap::new();
    for (t, fp, r) in rows {
        if fp == 0 {
            continue;
        }
        match tasks.get(&t) {
            None => {
                tasks.insert(t, (fp, at(r)));
            }
            Some((f0, first)) if *f0 != fp && !allow_mismatch => {
                if let Some(field) = field {
                    let msg = Msg::default()
                        .text(format!("task {t} has another value of "))
                        .opt(Opt::text("task_key", field.to_string()))
                        .text(format!(
                            " here than at line {}; every rollout of a task must carry one value of it",
                            first.line.unwrap_or(0)
                        ));
                    return Err(Error::refused(Some(at(r).key(field)), msg));
                }
                let msg = Msg::default()
                    .text(format!(
                        "task {t} asks another question here than at line {} (their user messages differ); every \
                         rollout of a task index, in every run of the file, must ask the same (",
                        first.line.unwrap_or(0)
                    ))
                    .opt(Opt::on("allow_task_mismatch"))
                    .text(" pairs by index regardless)");
                return Err(Error::refused(Some(at(r)), msg));
            }
            Some(_) => {}
        }
    }
    Ok((!tasks.is_empty()).then_some(tasks))
}

/// Checks that the files hold the same task under each index they share (each file
/// against the first one with fingerprints), before anything is paired. A mismatch is
/// refused (exit 2) naming the first differing index, both files and lines, and how many
/// differ; `allow_mismatch` lets it through with a note. Pairing by fingerprint returns
/// per file the renumbering of its tasks. `notes` gets what was let through.
pub fn check(
    paths: &[PathBuf],
    files: &[FileTasks],
    how: &Pairing,
    notes: &mut Vec<String>,
) -> Result<Option<Vec<BTreeMap<i64, i64>>>> {
    let unverified: Vec<String> =
        paths.iter().zip(files).filter(|(_, t)| t.is_none()).map(|(p, _)| p.display().to_string()).collect();
    if !unverified.is_empty() && files.len() > 1 {
        notes.push(format!(
            "the tasks of {} were not verified (no `responses_create_params` to fingerprint): paired by `_ng_task_index`",
            unverified.join(", ")
        ));
    }
    if let Some(field) = &how.task_key {
        return renumber(
            paths,
            files,
            Opt::text("task_key", field.clone()),
            "the same value of the field as",
            "by their value of the field",
            notes,
        )
        .map(Some);
    }
    if how.by_fingerprint {
        return renumber(paths, files, by_content(), "the same question as", "by what the tasks ask", notes).map(Some);
    }
    let Some((f0, first)) = files.iter().enumerate().find_map(|(i, t)| t.as_ref().map(|t| (i, t))) else {
        return Ok(None);
    };
    for (f, tasks) in files.iter().enumerate().skip(f0 + 1) {
        let Some(tasks) = tasks else { continue };
        let shared: Vec<i64> = tasks.keys().filter(|t| first.contains_key(t)).copied().collect();
        let differ: Vec<i64> = shared.iter().filter(|t| first[*t].0 != tasks[*t].0).copied().collect();
        let Some(&t) = differ.first() else { continue };
        let (pa, pb) = (paths[f0].display(), paths[f].display());
        if how.allow_mismatch {
            notes.push(format!(
                "{} of {} shared task indexes hold different tasks in {pa} and {pb} (first: task {t}); paired by index as asked (--allow-task-mismatch)",
                differ.len(),
                shared.len()
            ));
            continue;
        }
        // The same questions under other indexes: a shuffled or re-ordered dataset.
        let theirs: HashSet<u64> = first.values().map(|v| v.0).collect();
        let moved = differ.iter().filter(|t| theirs.contains(&tasks[*t].0)).count();
        let mut msg = Msg::default().text(format!(
            "{pa} and {pb} hold different tasks under the same index: task {t} is {} in one and {} in the other, \
             and {} of the {} shared task indexes differ (their user messages differ), so pairing them by index would \
             compare different questions.",
            first[&t].1,
            tasks[&t].1,
            differ.len(),
            shared.len()
        ));
        if moved * 2 >= differ.len() {
            msg = msg
                .text(format!(
                    " {moved} of them ask a question {pa} holds under another index (a shuffled or re-ordered \
                     dataset?): "
                ))
                .opt(by_content())
                .text(" pairs tasks by what they ask.");
        }
        let msg = msg
            .text(" If they are the same tasks asked differently, ")
            .opt(Opt::on("allow_task_mismatch"))
            .text(" pairs them by index anyway.");
        return Err(Error::refused(None, msg));
    }
    Ok(None)
}

/// Per file, each task index mapped to the index of the same key (fingerprint or
/// `--task-key` value) in the first file that has it (keys no earlier file holds get
/// fresh numbers after every file's largest index). A file without keys, or a key under
/// two indexes of one file, cannot be paired this way. `flag` names the way in messages,
/// `same` and `how` say what "the same task" means.
fn renumber(
    paths: &[PathBuf],
    files: &[FileTasks],
    flag: Opt,
    same: &str,
    how: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<BTreeMap<i64, i64>>> {
    let mut canon: HashMap<u64, i64> = HashMap::new();
    let mut next = files.iter().flatten().flat_map(|t| t.keys().copied()).max().unwrap_or(0) + 1;
    let mut maps = Vec::new();
    for (f, tasks) in files.iter().enumerate() {
        let Some(tasks) = tasks else {
            let what = if flag.name() == "task_key" {
                "values of the field"
            } else {
                "fingerprints (no `responses_create_params`)"
            };
            let msg = Msg::default()
                .opt(flag)
                .text(format!(": {} carries no task {what} to pair by; pair by index", paths[f].display()));
            return Err(Error::refused(None, msg));
        };
        let mut seen: HashMap<u64, i64> = HashMap::new();
        let mut map = BTreeMap::new();
        for (&t, (fp, at)) in tasks {
            if let Some(&t0) = seen.get(fp) {
                let msg = Msg::default().opt(flag).text(format!(
                    ": task {t} has {same} task {t0} of this file; each must be unique in a file to be paired {how}"
                ));
                return Err(Error::refused(Some(at.clone()), msg));
            }
            seen.insert(*fp, t);
            let id = *canon.entry(*fp).or_insert_with(|| {
                if f == 0 {
                    t
                } else {
                    next += 1;
                    next - 1
                }
            });
            map.insert(t, id);
        }
        maps.push(map);
    }
    let base: HashSet<u64> = files[0].iter().flat_map(|t| t.values().map(|v| v.0)).collect();
    for (f, tasks) in files.iter().enumerate().skip(1) {
        let Some(tasks) = tasks else { continue };
        let moved = tasks.iter().filter(|(t, (fp, _))| base.contains(fp) && maps[f][t] != **t).count();
        let alone = tasks.values().filter(|(fp, _)| !base.contains(fp)).count();
        // Notes are warnings, which say their options as the command line does.
        notes.push(format!(
            "{}: {} paired with {} {how}: {moved} task(s) sit under another index, {alone} have no partner",
            flag.spell(Door::Cli),
            paths[f].display(),
            paths[0].display()
        ));
    }
    Ok(maps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(tasks: &[(i64, u64)]) -> FileTasks {
        Some(tasks.iter().map(|&(t, f)| (t, (f, Location::line("x.jsonl".as_ref(), t as u64 + 1)))).collect())
    }

    #[test]
    fn shared_indexes_must_hold_the_same_task() {
        let paths = [PathBuf::from("a.jsonl"), PathBuf::from("b.jsonl")];
        let mut notes = Vec::new();
        let same = [file(&[(0, 10), (1, 11), (2, 12)]), file(&[(0, 10), (1, 11)])];
        assert_eq!(check(&paths, &same, &Pairing::default(), &mut notes).unwrap(), None);
        let other = [file(&[(0, 10), (1, 11), (2, 12)]), file(&[(0, 10), (1, 99), (2, 98)])];
        let e = check(&paths, &other, &Pairing::default(), &mut notes).unwrap_err().to_string();
        assert!(e.contains("task 1 is x.jsonl, line 2") && e.contains("2 of the 3 shared"), "{e}");
        assert!(!e.contains("--pair-by"), "no question moved: {e}");
        let allowed = Pairing { allow_mismatch: true, ..Default::default() };
        assert_eq!(check(&paths, &other, &allowed, &mut notes).unwrap(), None);
        assert!(notes.last().unwrap().starts_with("2 of 3 shared task indexes hold different tasks"), "{notes:?}");
    }

    #[test]
    fn pairing_by_fingerprint_renumbers_to_the_first_file() {
        let paths = [PathBuf::from("a.jsonl"), PathBuf::from("b.jsonl")];
        let mut notes = Vec::new();
        let shuffled = [file(&[(0, 10), (1, 11), (2, 12)]), file(&[(0, 12), (1, 10), (5, 77)])];
        let e = check(&paths, &shuffled, &Pairing::default(), &mut notes).unwrap_err().to_string();
        assert!(e.contains("--pair-by fingerprint"), "{e}");
        let how = Pairing { by_fingerprint: true, ..Default::default() };
        let maps = check(&paths, &shuffled, &how, &mut notes).unwrap().unwrap();
        assert_eq!(maps[0], BTreeMap::from([(0, 0), (1, 1), (2, 2)]));
        // 12 sits at 2 in the first file, 10 at 0; 77 gets a fresh number.
        assert_eq!(maps[1], BTreeMap::from([(0, 2), (1, 0), (5, 6)]));
        assert!(notes.last().unwrap().ends_with("2 task(s) sit under another index, 1 have no partner"), "{notes:?}");
        let twice = [file(&[(0, 10)]), file(&[(0, 10), (1, 10)])];
        assert!(check(&paths, &twice, &how, &mut notes).is_err());
        // A field of the user's own renumbers the same way, named as such.
        let key = Pairing { task_key: Some("question_id".into()), ..Default::default() };
        let maps = check(&paths, &shuffled, &key, &mut notes).unwrap().unwrap();
        assert_eq!(maps[1], BTreeMap::from([(0, 2), (1, 0), (5, 6)]));
        assert!(notes
            .last()
            .unwrap()
            .starts_with("--task-key question_id: b.jsonl paired with a.jsonl by their value"));
    }

    #[test]
    fn a_task_asks_one_question_in_a_file() {
        let at = |r: usize| Location::line("f.jsonl".as_ref(), r as u64 + 1);
        let rows = [(3, 7, 0), (3, 0, 1), (3, 7, 2), (4, 8, 3)];
        let t = tasks(rows.into_iter(), at, false, None).unwrap().unwrap();
        assert_eq!(t.len(), 2);
        let e = tasks([(3, 7, 0), (3, 9, 4)].into_iter(), at, false, None).unwrap_err().to_string();
        assert!(e.starts_with("f.jsonl, line 5: task 3 asks another question here than at line 1"), "{e}");
        assert!(tasks([(3, 7, 0), (3, 9, 4)].into_iter(), at, true, None).is_ok());
        assert_eq!(tasks([(3, 0, 0)].into_iter(), at, false, None).unwrap(), None);
        let e = tasks([(3, 7, 0), (3, 9, 4)].into_iter(), at, false, Some("qid")).unwrap_err().to_string();
        assert!(e.starts_with("f.jsonl, line 5, key `qid`: task 3 has another value of --task-key qid"), "{e}");
    }
}
