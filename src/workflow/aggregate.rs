//! The aggregate workflow: the `_aggregate_metrics.json` that `gym eval run` writes, one
//! entry per run label with agent, key, task-level and repeat-level metrics.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use polars::prelude::DataFrame;

use super::custom::{sql_metrics, Metrics};
use super::{read_both, status_after_read};
use crate::error::{Error, Msg, Opt, Result};
use crate::export::atomic::OutputSet;
use crate::export::direct::FileWriter;
use crate::export::nemo_gym::{artifact_path, check_beside};
use crate::export::tasks::write_aggregate;
use crate::health::{Given, Health, Record, Source};
use crate::ingest::rollouts::{read_rollouts_with, ReadOptions, TOKEN_COUNTS};
use crate::ingest::sidecar::{self, FAILURES, MATERIALIZED};
use crate::ingest::LineMap;
use crate::ingest::{InputTable, RolloutTable};
use crate::json::Json;
use crate::metrics::aggregate::AggregateOptions;
use crate::metrics::failures::{self, Coverage, Policy, ShardSide};
use crate::metrics::warnings::Warnings;
use crate::trace::trace;
use rayon::prelude::*;

/// What to aggregate and where the file goes.
#[derive(Debug, Clone)]
pub struct AggregateConfig {
    /// The run's rollouts files (one, or the shards it was written as).
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL: labels rollouts by their input rows' agent and server.
    pub inputs: Option<PathBuf>,
    /// Output file; `None`: `S_aggregate_metrics.json` beside `S.jsonl`.
    pub out: Option<PathBuf>,
    /// Label for rollouts that name no agent (without it such rollouts are an error).
    pub agent: Option<String>,
    pub metrics: Metrics,
    /// Key-metric selection patterns; empty means every `mean/*` plus coverage.
    pub key_metrics: Vec<String>,
    /// Failures, the denominator policies, the merged file and the health check.
    pub run: RunOptions,
}

/// What `aggregate` does around the statistics, as a run's own aggregation does.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Failures sidecars, one per shard in order (default: `S_failures.jsonl` beside each
    /// `S.jsonl`, when it exists).
    pub failures: Vec<PathBuf>,
    pub policy: Policy,
    /// Write every record of the shards, in (task, rollout) order, into this file.
    pub merge_into: Option<PathBuf>,
    /// Write what the score covers into this file (see [`coverage_json`]).
    pub coverage_out: Option<PathBuf>,
    /// Run the rollout health check (with these checks ignored) and write its reports
    /// into the output file's folder.
    pub health: Option<Vec<String>>,
    /// Also add the run's tables to this lake of sweeps.
    pub lake: Option<super::lake::LakeTarget>,
}

/// What an aggregate run wrote.
pub struct AggregateRun {
    /// The aggregate file (`None`: nothing to score, so none was written).
    pub file: Option<PathBuf>,
    /// Each run label with its key metrics.
    pub key_metrics: Vec<(String, Json)>,
    pub warnings: Warnings,
    /// The shards read, in order.
    pub shards: Vec<PathBuf>,
    /// Records read from the shards.
    pub records: usize,
    /// Failures and what the score covers (`None`: no shard had a sidecar and no policy
    /// was asked for).
    pub coverage: Option<Coverage>,
    pub merged: Option<PathBuf>,
    /// The health check's result and its summary file.
    pub health: Option<(Health, PathBuf)>,
    /// The sweep added to the lake, when one was given (and something was scored).
    pub lake: Option<super::lake::LakeRun>,
}

/// What the read computes for `run`: fingerprints for the lake's `tasks` table; the rows
/// to read again for the health check, unless it reads the merged file instead.
fn read_options(run: &RunOptions) -> ReadOptions {
    ReadOptions { fingerprints: run.lake.is_some(), evidence: run.health.is_some() && run.merge_into.is_none() }
}

pub fn aggregate(c: &AggregateConfig) -> Result<AggregateRun> {
    let shards = sidecar::shards(&c.rollouts)?;
    if c.out.is_none() {
        check_beside(&shards, Opt::value("out", "FILE"))?;
    }
    let path = c.out.clone().unwrap_or_else(|| artifact_path(&shards[0], None, "aggregate_metrics", "json"));
    let sides = read_sides(&shards, &c.run, c.inputs.as_deref())?;
    let mut read: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    read.extend(sides.iter().filter_map(|s| s.failures.as_ref().map(|f| f.0.as_path())));
    read.extend(sides.iter().filter_map(|s| s.materialized.as_ref().ok().map(|m| m.0.as_path())));
    read.extend(c.inputs.as_deref());
    read.extend(c.metrics.files.iter().map(PathBuf::as_path));
    let mut out = OutputSet::new(&read);
    out.check(&path)?;
    // Beside the aggregate file; beside the first shard when that goes to a stream.
    let reports =
        if crate::export::atomic::is_file_output(&path) { health_paths(&path) } else { health_paths(&shards[0]) };
    let health_files = c.run.health.is_some().then_some(&reports).into_iter().flatten();
    for p in c.run.merge_into.iter().chain(health_files).chain(&c.run.coverage_out) {
        out.check(p)?;
    }
    // A shard with no line is a run whose every attempt failed, when its sidecar says so.
    let blank: Vec<bool> = sides.iter().map(|s| s.failures.is_some() && sidecar::is_blank(&s.path)).collect();
    let lined: Vec<PathBuf> = shards.iter().zip(&blank).filter(|(_, b)| !**b).map(|(p, _)| p.clone()).collect();
    let (mut t, inputs) = if lined.is_empty() {
        (RolloutTable::empty(crate::ingest::LineMap::single(&shards[0])), None)
    } else {
        read_both(&lined, c.inputs.as_deref(), read_options(&c.run))?
    };
    let records = t.len();
    let mut servers = failures::servers(&t, &sides);
    failures::route_rows(&mut t, &servers)?;
    let coverage = if sides.iter().any(|s| s.failures.is_some()) || c.run.policy.any() {
        Some(failures::count(&t, &sides, &c.run.policy, &mut servers)?)
    } else {
        None
    };
    let merged = match &c.run.merge_into {
        Some(m) => Some((m.clone(), merged_rows(&t)?)),
        None => None,
    };
    // The counted rows join the records: the shards are read again with them.
    let scored = match coverage.as_ref().filter(|c| !c.counted.is_empty()) {
        Some(cov) => {
            let opts = ReadOptions { evidence: false, ..read_options(&c.run) };
            let mut s = read_rollouts_with(&lined, Some((Path::new(COUNTED), &cov.counted_jsonl())), opts)?;
            failures::route_rows(&mut s, &servers)?;
            Some(s)
        }
        None => None,
    };
    let scored = scored.as_ref().unwrap_or(&t);
    // Every output is opened first (the aggregate file before the others: a folder that
    // takes no file is named by it); then the health check (of the records alone) runs
    // and writes its reports beside the statistics.
    let agg = if scored.is_empty() { None } else { Some(out.create(&path)?) };
    if let Some((m, bytes)) = &merged {
        out.add(m, bytes)?;
    }
    let report_files = match &c.run.health {
        Some(_) => Some((out.create(&reports[0])?, out.create(&reports[1])?)),
        None => None,
    };
    let (health, run) = rayon::join(
        || -> Result<Option<Health>> {
            let (Some(ignored), Some(files)) = (&c.run.health, report_files) else {
                return Ok(None);
            };
            let t0 = std::time::Instant::now();
            let h = run_health(&t, merged.as_ref(), ignored)?;
            trace("health check", t0);
            write_reports(&h, files, &reports)?;
            trace("health reports written", t0);
            Ok(Some(h))
        },
        || match agg {
            Some(w) => stage_aggregate(c, scored, inputs.as_ref(), w, &path),
            None => Ok((AggregateRun::nothing(), None)),
        },
    );
    let (health, (mut run, frame)) = (health?, run?);
    run.shards = shards.clone();
    run.records = records;
    run.coverage = coverage;
    run.merged = c.run.merge_into.clone();
    run.health = health.map(|h| (h, reports[0].clone()));
    if let Some(path) = &c.run.coverage_out {
        let mut text = Vec::new();
        crate::json::write_indented(&mut text, &coverage_json(&run), 0);
        text.push(b'\n');
        out.add(path, &text)?;
    }
    // Every file staged, the lake before their renames: a sweep the lake refuses (a
    // column's type changed) leaves no file behind.
    if let Some(to) = c.run.lake.as_ref().filter(|_| !scored.is_empty()) {
        let failed = run.coverage.as_ref().map_or(&[][..], |c| c.failures.as_slice());
        // The files the tables come from, as `export --lake` names them: the same files
        // give the same sweep.
        let sources: Vec<&Path> = shards.iter().map(PathBuf::as_path).chain(c.inputs.as_deref()).collect();
        run.lake =
            Some(super::lake::add_run(scored, inputs.as_ref(), c.agent.as_deref(), failed, frame, &sources, to)?);
    }
    let files = out.commit()?;
    run.file = (!scored.is_empty()).then(|| files[0].clone());
    Ok(run)
}

/// What the score of a run covers, as `--coverage-out` writes it (the numbers the
/// closing report prints): the shards, records read, rows counted by each policy (null
/// when it was off), the warnings of counting, expected and scored rollouts, failures
/// left out (in all and by class), lost rollouts scored as zeros, aggregate entries (null
/// when nothing was scored) and the health verdicts (null without the check).
pub fn coverage_json(r: &AggregateRun) -> Json {
    let int = |n: usize| Json::Int(n as i64);
    let none = Coverage { records: r.records, ..Coverage::default() };
    let c = r.coverage.as_ref().unwrap_or(&none);
    let warnings = c.notes.iter().filter_map(|n| match n {
        failures::Note::Warn(w) => Some(Json::Str(w.clone())),
        failures::Note::Say(_) => None,
    });
    let health = r.health.as_ref().map_or(Json::Null, |(h, _)| {
        let mut v = Json::obj();
        v.set_all([
            ("checked", int(h.records)),
            ("healthy", int(h.healthy)),
            ("unhealthy", int(h.unhealthy)),
            ("unobserved", int(h.unobserved)),
        ]);
        v
    });
    let mut j = Json::obj();
    j.set_all([
        ("shards", Json::Arr(r.shards.iter().map(|s| Json::Str(s.display().to_string())).collect())),
        ("loaded_records", int(r.records)),
        ("counted_failure_rows", c.counted_failures.map_or(Json::Null, int)),
        ("counted_missing_rollouts", c.counted_missing.map_or(Json::Null, int)),
        ("warnings", Json::Arr(warnings.collect())),
        ("expected_rollouts", int(c.expected())),
        ("scored_rollouts", int(c.scored())),
        ("missing_from_score", int(c.dropped_total())),
        ("dropped_by_class", Json::Obj(c.dropped.iter().map(|(k, n)| (k.as_str().into(), int(*n))).collect())),
        ("imputed_zeros", int(c.imputed())),
        // Null when nothing was scored (no aggregate file).
        ("aggregate_entries", if r.key_metrics.is_empty() { Json::Null } else { int(r.key_metrics.len()) }),
        ("health", health),
    ]);
    j
}

/// What the failures sidecars beside a run's rollouts files say (`None`: there is none),
/// with no failure counted.
pub fn failures_beside(rollouts: &[PathBuf], t: &RolloutTable) -> Result<Option<Coverage>> {
    let sides = read_sides(rollouts, &RunOptions::default(), None)?;
    if sides.iter().all(|s| s.failures.is_none()) {
        return Ok(None);
    }
    let mut servers = failures::servers(t, &sides);
    Ok(Some(failures::count(t, &sides, &Policy::default(), &mut servers)?))
}

/// The name counted rows are read under (their messages name no file of the user's).
const COUNTED: &str = "<rows counted as zeros>";

/// The health check's two reports, in the folder of `path`.
pub fn health_paths(path: &Path) -> [PathBuf; 2] {
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    [dir.join("quality_summary.json"), dir.join("rollout_verdicts.jsonl")]
}

/// Each shard's failures sidecar (given, or found beside it) and, when a policy needs
/// them, its materialized inputs (`S_materialized_inputs.jsonl` beside it, or `inputs`
/// for a run of one shard).
fn read_sides(shards: &[PathBuf], o: &RunOptions, inputs: Option<&Path>) -> Result<Vec<ShardSide>> {
    if !o.failures.is_empty() && o.failures.len() != shards.len() {
        let msg = Msg::default().opt(Opt::named("failures")).text(format!(
            " is given {} time(s) for {} shard(s); give one sidecar per shard, in order",
            o.failures.len(),
            shards.len()
        ));
        return Err(Error::refused(None, msg));
    }
    let mut sides = Vec::with_capacity(shards.len());
    for (i, s) in shards.iter().enumerate() {
        let f = o.failures.get(i).cloned().unwrap_or_else(|| sidecar::beside(s, FAILURES));
        let failures = if f.is_file() || !o.failures.is_empty() {
            Some((f.clone(), sidecar::read_objects(&f, "one failed attempt per line")?))
        } else {
            None
        };
        let m = match inputs {
            Some(i) if shards.len() == 1 => i.to_path_buf(),
            _ => sidecar::beside(s, MATERIALIZED),
        };
        let materialized = if o.policy.any() && m.is_file() {
            Ok((m.clone(), sidecar::read_objects(&m, "one materialized rollout per line")?))
        } else {
            Err(m)
        };
        sides.push(ShardSide { path: s.clone(), failures, materialized });
    }
    Ok(sides)
}

/// Every record of the table, in its (task, rollout, shard, line) order, one compact
/// JSON object per line.
fn merged_rows(t: &RolloutTable) -> Result<Vec<u8>> {
    let maps = t.lines.files().iter().map(|f| crate::ingest::lines::map_whole(f)).collect::<Result<Vec<_>>>()?;
    let starts: Vec<Vec<usize>> = maps.iter().map(|m| line_starts(m)).collect();
    let mut out = Vec::with_capacity(maps.iter().map(|m| m.len()).sum());
    for r in 0..t.len() {
        let (k, n) = crate::ingest::LineMap::split(t.line[r]);
        let (m, s) = (&maps[k][..], &starts[k]);
        let from = s[n as usize - 1];
        let to = s.get(n as usize).map_or(m.len(), |&e| e - 1);
        let line = m[from..to].trim_ascii();
        if !crate::json::transcode_compact(line, &[], &mut out) {
            let v = crate::json::parse(line).map_err(|e| Error::bad(t.location(r), e))?;
            crate::json::write_compact(&mut out, &v);
        }
        out.push(b'\n');
    }
    Ok(out)
}

/// Where each line starts (line 1 at 0).
fn line_starts(b: &[u8]) -> Vec<usize> {
    std::iter::once(0).chain(memchr::memchr_iter(b'\n', b).map(|i| i + 1)).collect()
}

/// The health check on the merged rows, or else on the shards' records in order: those
/// the table keeps every member of are judged from it, the others' lines are read again.
fn run_health(t: &RolloutTable, merged: Option<&(PathBuf, Vec<u8>)>, ignored: &[String]) -> Result<Health> {
    if let Some((path, bytes)) = merged {
        let name = path.display().to_string();
        return crate::health::check(&[Source { name: &name, bytes }], ignored);
    }
    check_table(t, None, ignored)
}

/// Each row's health result, each run (agent) judged apart, so that the same task and
/// repeat under two agents of a fan-out file are not duplicates of each other.
pub fn check_by_run(t: &RolloutTable) -> Result<Vec<crate::health::RecordResult>> {
    let mut by_agent: std::collections::BTreeMap<u32, Vec<u32>> = std::collections::BTreeMap::new();
    for r in 0..t.len() {
        by_agent.entry(t.agent[r]).or_default().push(r as u32);
    }
    let mut out = vec![crate::health::RecordResult::default(); t.len()];
    for rows in by_agent.values() {
        let h = check_table(t, Some(rows), &[])?;
        for (&r, result) in rows.iter().zip(h.by_record()) {
            out[r as usize] = result;
        }
    }
    Ok(out)
}

/// The health check of a table's records, read with the check's evidence: records
/// without a trajectory are judged from the table, the others from their lines, read
/// again. `rows` picks the records judged (in table order); all of them by default,
/// then the lines cut off mid-write as unreadable records. [`Health::by_record`] is
/// indexed as the judged records are.
pub fn check_table(t: &RolloutTable, rows: Option<&[u32]>, ignored: &[String]) -> Result<Health> {
    assert!(t.read.evidence || t.is_empty(), "rollouts read without the health check's evidence");
    let files = t.lines.files();
    let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // Only the files holding such records are mapped again; each such line must still be
    // where the reader found it.
    let mut maps = Vec::with_capacity(files.len());
    for (k, f) in files.iter().enumerate() {
        let mut lines = t.evidence.iter().filter(|e| LineMap::split(e.0).0 == k).peekable();
        if lines.peek().is_none() {
            maps.push(None);
            continue;
        }
        if crate::export::atomic::is_stream(f) {
            let msg = Msg::default()
                .text(format!(
                    "{}: the health check reads the lines that carry trajectories again, which a pipe cannot give; \
                     save the rollouts to a file, or pass ",
                    f.display()
                ))
                .opt(Opt::off("health_check"));
            return Err(Error::refused(None, msg));
        }
        let map = crate::ingest::lines::map_whole(f)?;
        if let Some(&(line, offset, len)) = lines.find(|e| e.1 + e.2 > map.len() as u64) {
            let _ = (offset, len);
            return Err(Error::bad(t.lines.location(line), "the file changed while it was being read"));
        }
        maps.push(Some(map));
    }
    // In the table's (task, rollout, line) order: the check's order, reading order among
    // records of one rollout.
    // Then the last lines the reader left out as cut off mid-write: unreadable records.
    let given = |l: u64| {
        let (source, line) = LineMap::split(l);
        Given { source, line }
    };
    let records: Vec<Given> = match rows {
        None => t.line.par_iter().chain(t.cut_off.par_iter()).map(|&l| given(l)).collect(),
        Some(rows) => rows.iter().map(|&r| given(t.line[r as usize])).collect(),
    };
    let tokens: Vec<Option<&crate::ingest::Column>> =
        TOKEN_COUNTS.iter().map(|&k| t.column(crate::ingest::Source::Usage, k).map(|c| &t.columns[c])).collect();
    let record = |i: usize| -> Record<'_> {
        let r = rows.map_or(i, |rows| rows[i] as usize);
        if r >= t.len() {
            // Text cut off mid-write is not JSON, whatever it held.
            return Record::Line(b"{");
        }
        if let Ok(at) = t.evidence.binary_search_by_key(&t.line[r], |e| e.0) {
            let (line, offset, len) = t.evidence[at];
            let map = maps[LineMap::split(line).0].as_deref().unwrap_or_default();
            return Record::Line(map.get(offset as usize..(offset + len) as usize).unwrap_or_default());
        }
        // A token count of a row the table judges holds an integer or nothing.
        let count = |c: Option<&crate::ingest::Column>| match c.map(|c| (c.tags[r], c)) {
            Some((crate::ingest::tag::INT, c)) => Some(Some(i128::from(c.int(r))).filter(|v| *v >= 0)),
            _ => None,
        };
        let pick = |a: Option<Option<i128>>, b: Option<Option<i128>>| a.or(b).flatten();
        let tokens = (pick(count(tokens[0]), count(tokens[1])), pick(count(tokens[2]), count(tokens[3])));
        Record::Plain { task: t.task[r], rollout: t.rollout[r], tokens }
    };
    crate::health::check_records(&names, &records, record, ignored)
}

/// Writes the health check's two reports (`paths`, in [`health_paths`] order) through
/// their opened writers; the verdict lines are rendered as they are written.
pub fn write_reports(
    h: &Health,
    (mut summary, mut verdicts): (FileWriter, FileWriter),
    paths: &[PathBuf; 2],
) -> Result<()> {
    summary.write_all(&h.summary).and_then(|()| summary.finish()).map_err(|e| Error::write(&paths[0], e))?;
    h.write_verdicts(&mut verdicts).and_then(|()| verdicts.finish()).map_err(|e| Error::write(&paths[1], e))
}

impl AggregateRun {
    pub(crate) fn nothing() -> AggregateRun {
        AggregateRun {
            file: None,
            key_metrics: Vec::new(),
            warnings: Warnings::default(),
            shards: Vec::new(),
            records: 0,
            coverage: None,
            merged: None,
            health: None,
            lake: None,
        }
    }
}

/// The statistics and the file `path` (staged in `out`, committed here) from a table
/// already read: `aggregate` after reading its files, `merge` after reading slices.
pub fn aggregate_table(
    c: &AggregateConfig,
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    mut out: OutputSet,
    path: &Path,
) -> Result<AggregateRun> {
    let w = out.create(path)?;
    let (mut run, _) = stage_aggregate(c, t, inputs, w, path)?;
    run.file = out.commit()?.into_iter().next();
    Ok(run)
}

/// The statistics, written to `w` (the file `path`, staged), and the rollouts table SQL
/// metrics ran over when the run adds its tables to a lake (which reuses it).
fn stage_aggregate(
    c: &AggregateConfig,
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    mut w: FileWriter,
    path: &Path,
) -> Result<(AggregateRun, Option<DataFrame>)> {
    let status = status_after_read(t, inputs);
    status.say("computing statistics");
    let sql = c.metrics.sql();
    let (extra, frame) = if sql.is_empty() {
        (HashMap::new(), None)
    } else {
        let (extra, frame) = sql_metrics(t, inputs, c.agent.as_deref(), &sql)?;
        (extra, Some(frame).filter(|_| c.run.lake.is_some()))
    };
    let opts = AggregateOptions {
        default_agent: c.agent.clone(),
        metrics: c.metrics.builtin(),
        key_metrics: c.key_metrics.clone(),
        extra,
    };
    let t0 = std::time::Instant::now();
    let (entries, warnings) = crate::metrics::aggregate::aggregate(t, inputs, &opts)?;
    trace("statistics", t0);
    let t0 = std::time::Instant::now();
    status.writing(path);
    write_aggregate(&entries, &mut w).map_err(|e| e.at(path))?;
    w.finish().map_err(|e| Error::write(path, e))?;
    drop(w);
    trace("task entries + write", t0);
    drop(status);
    let key_metrics = entries.iter().map(|e| crate::metrics::aggregate::label_and_key_metrics(&e.head)).collect();
    Ok((AggregateRun { key_metrics, warnings, ..AggregateRun::nothing() }, frame))
}
