//! The eval-compare workflow, NeMo Gym's `gym eval compare`: each run is named by its
//! rollouts path and read from the `<stem>_aggregate_metrics.json` beside it (the
//! rollouts file itself is not read); older aggregate files get their repeat-level
//! metrics rebuilt; the baseline is compared with each candidate and
//! `compare_report.md` / `compare_report.json` are written together, atomically, into
//! the output folder (default: the last candidate's folder).
//!
//! A missing aggregate file is refused as NeMo Gym refuses it, unless
//! `compute_missing` asks for it to be computed from the rollouts first (the
//! [`super::aggregate`] workflow, writing the file where it was looked for).

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::aggregate::{aggregate, AggregateConfig};
use super::custom::Metrics;
use crate::error::{Error, Location, Msg, Opt, Result};
use crate::export::atomic::{in_out_dir_of, OutputSet};
use crate::export::eval_compare::{render_json, render_markdown, report_paths, Provenance};
use crate::export::nemo_gym::artifact_path;
use crate::json::Json;
use crate::metrics::eval_compare::{
    eval_comparison, needs_rebuild, parse_run_file, rebuild_repeat_metrics, rebuild_warning, AgentChoice,
    EvalComparison, Role, RunFile,
};
use crate::metrics::task_identity;
use crate::metrics::warnings::Warnings;

/// Which report files to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportFormat {
    Markdown,
    Json,
    Both,
}

/// What to compare and where the reports go.
#[derive(Debug, Clone)]
pub struct EvalCompareConfig {
    /// The baseline's rollouts path, as given (names the run; not read).
    pub baseline: String,
    /// Each candidate's rollouts path, as given.
    pub candidates: Vec<String>,
    /// The baseline's aggregate file, instead of the one beside its rollouts.
    pub baseline_aggregate: Option<String>,
    /// Each candidate's aggregate file, by position.
    pub candidate_aggregates: Option<Vec<String>>,
    pub agents: AgentChoice,
    /// Report folder (created when missing); `None`: the last candidate's folder.
    pub output_dir: Option<PathBuf>,
    pub format: ReportFormat,
    /// Compute a missing aggregate file from its rollouts instead of refusing.
    pub compute_missing: bool,
    /// How the runs' task entries are paired (by index, checked, by default).
    pub pairing: task_identity::Pairing,
    /// The command line, for the report.
    pub command: String,
    /// Paths are resolved against this folder (the working folder).
    pub cwd: PathBuf,
}

/// What an eval-compare run did.
pub struct EvalCompareRun {
    pub comparison: EvalComparison,
    /// The aggregate files computed first (`compute_missing`).
    pub computed: Vec<PathBuf>,
    /// The reports written.
    pub files: Vec<PathBuf>,
    pub warnings: Warnings,
}

/// `path` resolved as NeMo Gym resolves a path it reads: absolute paths as they are,
/// relative ones under `cwd`; `.` components and repeated or trailing separators are
/// dropped as Python's `pathlib` drops them (`..` is kept).
pub fn resolve(cwd: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    let mut out = if p.is_absolute() { PathBuf::new() } else { cwd.to_path_buf() };
    for c in p.components() {
        match c {
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The current time in UTC as `YYYY-MM-DDTHH:MM:SS+00:00`.
pub fn utc_now() -> String {
    crate::export::dates::utc_iso(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64,
    )
}

/// One run to read: its role and position, the rollouts path as given and resolved, and
/// the aggregate file (with how it was named, for messages).
struct Side {
    role: Role,
    index: usize,
    given: String,
    rollouts: PathBuf,
    aggregate: PathBuf,
    overridden: bool,
}

fn sides(c: &EvalCompareConfig) -> Result<Vec<Side>> {
    if c.candidates.is_empty() {
        let msg = Msg::default().opt(Opt::named("candidates")).text(": give at least one candidate rollouts path");
        return Err(Error::refused(None, msg));
    }
    let n = c.candidates.len();
    if let Some(v) = &c.candidate_aggregates {
        if v.len() != n {
            return Err(Error::refused(None, per_candidate(Opt::named("candidates_agg_metrics"), v.len(), n)));
        }
    }
    if let Some(v) = &c.agents.candidate_agents {
        if v.len() != n {
            return Err(Error::refused(None, per_candidate(Opt::named("candidate_agents"), v.len(), n)));
        }
    }
    let side = |role, index, given: &str, over: Option<&String>| {
        let rollouts = resolve(&c.cwd, given);
        let (aggregate, overridden) = match over {
            Some(o) => (resolve(&c.cwd, o), true),
            None => (artifact_path(&rollouts, None, "aggregate_metrics", "json"), false),
        };
        Side { role, index, given: given.to_string(), rollouts, aggregate, overridden }
    };
    let mut out = vec![side(Role::Baseline, 0, &c.baseline, c.baseline_aggregate.as_ref())];
    for (i, g) in c.candidates.iter().enumerate() {
        out.push(side(Role::Candidate, i, g, c.candidate_aggregates.as_ref().map(|v| &v[i])));
    }
    Ok(out)
}

/// `opt` was given `given` entries for `n` candidates.
fn per_candidate(opt: Opt, given: usize, n: usize) -> Msg {
    Msg::default().opt(opt).text(format!(
        " has {given} entries but {n} candidate run(s) were given. Give one entry per candidate, in the same order."
    ))
}

fn missing(s: &Side) -> Error {
    let how = if s.overridden {
        format!("given as the {} aggregate metrics", s.role.as_str())
    } else {
        format!("derived from '{}'", s.given)
    };
    let msg = Msg::default()
        .text(format!(
            "Aggregate metrics not found, {how}. The run may have been collected with --disable-aggregation: run "
        ))
        .per_door(
            format!("`rollstat aggregate --rollouts {}`", s.given),
            format!("`rollstat.aggregate({:?})`", s.given),
        )
        .text(" first, pass ")
        .opt(Opt::on("compute_missing"))
        .text(" to compute it now, or point at the metrics file directly with ")
        .opt(Opt::named("baseline_agg_metrics"))
        .text(" / ")
        .opt(Opt::named("candidates_agg_metrics"))
        .text(".");
    Error::refused(Some(Location::file(&s.aggregate)), msg)
}

/// Checks, before anything is computed or written, that the runs hold the same task
/// under each shared index: each side's rollouts (beside its aggregate file) are read for
/// their task fingerprints. A side without a rollouts file cannot be checked (said once).
/// With `--pair-by fingerprint`, returns each side's renumbering of its tasks.
fn check_tasks(c: &EvalCompareConfig, sides: &[Side], warn: &mut Warnings) -> Result<Option<Vec<BTreeMap<i64, i64>>>> {
    let mut paths = Vec::new();
    let mut files = Vec::new();
    for s in sides {
        paths.push(s.rollouts.clone());
        if !s.rollouts.is_file() {
            files.push(None);
            continue;
        }
        let t = crate::ingest::read_rollouts(&s.rollouts, crate::ingest::ReadOptions::FINGERPRINTS)?;
        if let Some(field) = &c.pairing.task_key {
            files.push(task_keys(&t, &s.rollouts, field)?);
            continue;
        }
        let fingerprints = t.fingerprints();
        let rows = (0..t.len()).map(|r| (t.task[r], fingerprints[r], r));
        files.push(task_identity::tasks(rows, |r| t.location(r), c.pairing.allow_mismatch, None)?);
    }
    let mut notes = Vec::new();
    let maps = task_identity::check(&paths, &files, &c.pairing, &mut notes)?;
    for n in notes {
        warn.add(n);
    }
    Ok(maps)
}

/// Each task's value of the `--task-key` field in a rollouts file (numbers by value, so
/// `1`, `1.0` and `true` are one; text another), hashed to stand for its fingerprint.
fn task_keys(t: &crate::ingest::RolloutTable, path: &Path, field: &str) -> Result<task_identity::FileTasks> {
    let Some(ci) = t.column(crate::ingest::table::Source::Top, field) else {
        return Err(task_identity::no_key_field(path, field));
    };
    let col = &t.columns[ci];
    let mut rows = Vec::with_capacity(t.len());
    for r in 0..t.len() {
        let key = match (col.num(r), col.str_at(r)) {
            (Some(x), _) => task_identity::number_key(x),
            (None, Some(s)) => task_identity::text_key(s),
            (None, None) => return Err(task_identity::no_key_value(t.location(r), field)),
        };
        rows.push((t.task[r], task_identity::key_hash(&key), r));
    }
    task_identity::tasks(rows.into_iter(), |r| t.location(r), false, Some(field))
}

/// Renumbers a run's task entries (`group_level_metrics[]._ng_task_index`) by `map`,
/// leaving out the entries it has no number for (tasks without a partner's fingerprint).
fn renumber_tasks(run: &mut RunFile, map: &BTreeMap<i64, i64>) {
    for (_, entry) in &mut run.entries {
        let Json::Obj(items) = entry else { continue };
        let Some((_, Json::Arr(groups))) = items.iter_mut().find(|(k, _)| &**k == "group_level_metrics") else {
            continue;
        };
        groups.retain_mut(|g| {
            let Some(Json::Int(t)) = g.get("_ng_task_index").cloned() else { return true };
            match map.get(&t) {
                Some(&id) => {
                    g.set("_ng_task_index", Json::Int(id));
                    true
                }
                None => false,
            }
        });
    }
}

/// Runs the comparison and writes the reports. A report folder this call creates is
/// removed again (when still empty) if the run fails; no report is written unless all
/// are.
pub fn eval_compare(c: &EvalCompareConfig) -> Result<EvalCompareRun> {
    c.pairing.validate()?;
    let sides = sides(c)?;
    let mut computed = Vec::new();
    let mut warn = Warnings::default();
    let renumber = check_tasks(c, &sides, &mut warn)?;
    for s in &sides {
        if s.aggregate.is_dir() {
            return Err(Error::bad(
                Location::file(&s.aggregate),
                "is a folder; expected an aggregate metrics JSON file",
            ));
        }
        if s.aggregate.exists() {
            continue;
        }
        if !c.compute_missing {
            return Err(missing(s));
        }
        if !s.rollouts.is_file() {
            let msg = Msg::default().opt(Opt::on("compute_missing")).text(format!(
                ": the {} aggregate metrics '{}' are missing and so are its rollouts, to compute them from",
                s.role.as_str(),
                s.aggregate.display()
            ));
            return Err(Error::refused(Some(Location::file(&s.rollouts)), msg));
        }
        let run = aggregate(&AggregateConfig {
            rollouts: vec![s.rollouts.clone()],
            inputs: None,
            out: Some(s.aggregate.clone()),
            agent: None,
            metrics: Metrics::default(),
            key_metrics: Vec::new(),
            run: Default::default(),
        })?;
        warn.extend(run.warnings);
        computed.extend(run.file);
    }
    let mut runs: Vec<RunFile> = Vec::with_capacity(sides.len());
    for s in &sides {
        let bytes = std::fs::read(&s.aggregate).map_err(|e| Error::read(&s.aggregate, e))?;
        let mut run = parse_run_file(s.role, s.index, &s.given, &s.rollouts, &s.aggregate, &bytes)?;
        if needs_rebuild(&run) {
            warn.add(rebuild_warning(&s.aggregate));
            rebuild_repeat_metrics(&mut run, &mut warn)?;
        }
        if let Some(maps) = &renumber {
            renumber_tasks(&mut run, &maps[runs.len()]);
        }
        runs.push(run);
    }
    let base = runs.remove(0);
    let comparison = eval_comparison(&base, &runs, &c.agents, &mut warn)?;
    let dir = match &c.output_dir {
        Some(d) if d.is_absolute() => d.clone(),
        Some(d) => c.cwd.join(d),
        None => sides.last().and_then(|s| s.rollouts.parent()).map_or_else(|| c.cwd.clone(), Path::to_path_buf),
    };
    let prov = Provenance {
        generated_at: utc_now(),
        version: format!("rollstat {}", env!("CARGO_PKG_VERSION")),
        command: c.command.clone(),
        tool: "rollstat eval-compare".into(),
    };
    let (md, js) = match c.format {
        ReportFormat::Markdown => (true, false),
        ReportFormat::Json => (false, true),
        ReportFormat::Both => (true, true),
    };
    let inputs: Vec<&Path> = sides.iter().flat_map(|s| [s.aggregate.as_path(), s.rollouts.as_path()]).collect();
    let files = in_out_dir_of(&dir, Opt::named("output_dir"), || {
        let mut out = OutputSet::new(&inputs);
        let paths = report_paths(&dir, md, js);
        for p in &paths {
            out.check(p)?;
        }
        for p in &paths {
            let bytes = if md && p == &paths[0] {
                render_markdown(&comparison, &prov).into_bytes()
            } else {
                render_json(&comparison, &prov)
            };
            out.add(p, &bytes)?;
        }
        out.commit()
    })?;
    Ok(EvalCompareRun { comparison, computed, files, warnings: warn })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_as_pathlib() {
        let cwd = Path::new("/w");
        assert_eq!(resolve(cwd, "./a//b/./c.jsonl"), PathBuf::from("/w/a/b/c.jsonl"));
        assert_eq!(resolve(cwd, "/x/./y/"), PathBuf::from("/x/y"));
        assert_eq!(resolve(cwd, "../z.jsonl"), PathBuf::from("/w/../z.jsonl"));
    }

    #[test]
    fn utc_time_shape() {
        let t = utc_now();
        assert_eq!(t.len(), "2026-12-01T18:15:06+00:00".len());
        assert!(t.ends_with("+00:00") && t.as_bytes()[10] == b'T', "{t}");
    }
}
