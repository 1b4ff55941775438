//! `merge aggregate` one bucket at a time. Buckets are ranges of tasks and every
//! statistic is computed per run label over rows in (task, rollout) order, so the merge
//! need not hold the sweep's table: a first pass reads the slices in order, checks what
//! the whole table's run checks, and counts each run's scored rollouts into the plan of
//! the statistics' rounds; the rounds (`rounds.rs`) settle the agent and repeat
//! levels; a last pass reads each bucket once more and writes every run's task entries.
//! The bytes are those of the whole-table merge. The rounds' shares of a bucket are made
//! behind [`BucketShares`], which both merges implement.
//!
//! Runs are told apart by their run key (server stamp, else agent name), which does not
//! depend on which rows a bucket holds; labels are settled once every bucket was seen.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::buckets::{BucketRuns, MergeInputs, RunChecks, Step, Sweep, ORPHAN};
use super::rounds::{absorb_own, counting_share, round_share, settle, BucketInfo, Command, Plan, Share};
use super::{round_here, BucketShares};
use crate::error::{Error, Result};
use crate::export::atomic::OutputSet;
use crate::export::tasks::{close_array, write_aggregate_with, write_task_entries, StreamError};
use crate::ingest::fields::resolve_fields;
use crate::ingest::labels::{label_runs, named, run_key};
use crate::ingest::{LineMap, RolloutTable};
use crate::json::{Json, Members};
use crate::metrics::aggregate::{head_from_levels, label_and_key_metrics, task_spec, AggregateOptions, Shared};
use crate::metrics::levels::{Profiled, StatKeys};
use crate::metrics::perf::PerfValues;
use crate::metrics::profile::{coverage_members, duplicate_key};
use crate::metrics::tasks::{info_specs, quoted_names};
use crate::metrics::warnings::Warnings;
use crate::trace::trace;
use crate::workflow::aggregate::{AggregateConfig, AggregateRun};

/// What one run gathers over the buckets besides its statistics' state.
#[derive(Default)]
struct Run {
    /// Run key; `None` for the rollouts nothing names (they go to `--agent`).
    key: Option<String>,
    /// Whether the key is a server stamp (then the entry names it).
    key_is_server: bool,
    rows: usize,
    masked: usize,
    tasks_measured: usize,
    tasks_all: usize,
    repeats: BTreeSet<i64>,
    /// The `ng_perf` values of all its rows, for `perf_summary`.
    perf: PerfValues,
    /// The run's first repeated rollout key.
    duplicate: Option<Error>,
    /// Scored rollouts.
    scored: usize,
}

impl Run {
    fn new(key: Option<String>, key_is_server: bool) -> Run {
        Run { key, key_is_server, ..Default::default() }
    }

    /// Adds this bucket's rows of the run (table rows of `t`, in table order); its
    /// scored rollouts go to the plan as the run's counting share.
    fn add(&mut self, t: &RolloutTable, rows: &[usize], plan: &mut Plan) -> Result<()> {
        self.rows += rows.len();
        self.masked += rows.iter().filter(|&&r| t.masked[r]).count();
        self.perf.add(t, rows);
        self.repeats.extend(rows.iter().map(|&r| t.rollout[r]));
        let key = |r: usize| (t.task[r], t.rollout[r]);
        if self.duplicate.is_none() {
            if let Some(w) = rows.windows(2).find(|w| key(w[0]) == key(w[1])) {
                self.duplicate = Some(duplicate_key("result", key(w[0]), t.line[w[0]], t.line[w[1]], &t.lines));
            }
        }
        self.tasks_all += crate::metrics::levels::distinct(rows.iter().map(|&r| t.task[r]));
        let scored: Vec<usize> = rows.iter().copied().filter(|&r| !t.masked[r]).collect();
        self.tasks_measured += crate::metrics::levels::distinct(scored.iter().map(|&r| t.task[r]));
        if scored.is_empty() {
            return Ok(());
        }
        self.scored += scored.len();
        let p = Profiled::new(t, &scored, &vec![""; scored.len()]);
        absorb_own(plan, vec![counting_share(self.key.clone(), &p)], Vec::new())
    }
}

/// What the first pass of `merge aggregate` gathers: each run's counts, and the
/// sweep-wide facts the whole table's checks, labels and warnings read.
#[derive(Default)]
struct Gathered {
    lines: LineMap,
    list: Vec<Run>,
    by_key: HashMap<Option<String>, usize>,
    /// Without inputs, labels come from the rollouts: run keys in table order with the
    /// agent of their first row.
    key_agents: Vec<(String, Option<String>)>,
    key_seen: HashSet<String>,
    orphans: usize,
    first_orphan: Option<(String, i64, i64)>,
    unnamed: Option<Error>,
    checks: RunChecks,
}

impl Gathered {
    /// Takes the next bucket (whose tasks all come after the previous buckets'). Each
    /// run's scored rollouts go to `plan`'s counting round.
    fn visit(&mut self, c: &AggregateConfig, s: &Step<'_>, plan: &mut Plan) -> Result<()> {
        // Without gaps every step holds rollouts.
        let (t, bucket_inputs) = (&s.t, s.inputs.as_ref());
        match bucket_inputs {
            Some(inp) => self.checks.visit(t, inp),
            None => self.rollout_labels(t),
        }
        if self.unnamed.is_some() {
            return Ok(());
        }
        let br = BucketRuns::of(s);
        // Each local run key's index in `list`, found on its first row.
        let mut global: Vec<Option<usize>> = vec![None; br.keys.len()];
        let mut rows_by: Vec<Vec<usize>> = vec![Vec::new(); self.list.len()];
        for (r, &k) in br.row.iter().enumerate() {
            if k == ORPHAN {
                self.orphans += 1;
                if self.first_orphan.is_none() {
                    self.first_orphan = Some((t.describe(r), t.task[r], t.rollout[r]));
                }
                continue;
            }
            let i = match global[k as usize] {
                Some(i) => i,
                None => {
                    let (key, is_server) = &br.keys[k as usize];
                    if key.is_none() && c.agent.is_none() {
                        self.unnamed = Some(crate::metrics::aggregate::unnamed(t, bucket_inputs, r));
                        return Ok(());
                    }
                    let list = &mut self.list;
                    let i = *self.by_key.entry(key.clone()).or_insert_with(|| {
                        list.push(Run::new(key.clone(), *is_server));
                        list.len() - 1
                    });
                    global[k as usize] = Some(i);
                    rows_by.resize(self.list.len(), Vec::new());
                    i
                }
            };
            rows_by[i].push(r);
        }
        for (i, rows) in rows_by.iter().enumerate() {
            if !rows.is_empty() {
                self.list[i].add(t, rows, plan)?;
            }
        }
        Ok(())
    }

    /// Without inputs: the run keys of `t` in table order, each with its first agent.
    fn rollout_labels(&mut self, t: &RolloutTable) {
        let mut last = None;
        for r in 0..t.len() {
            let pair = (t.name(t.server[r]), t.name(t.agent[r]));
            if last == Some(pair) {
                continue;
            }
            last = Some(pair);
            if let Some(k) = run_key(pair.0, pair.1) {
                if self.key_seen.insert(k.to_string()) {
                    self.key_agents.push((k.to_string(), named(pair.1).map(str::to_string)));
                }
            }
        }
    }

    /// The runs in label order, each with its label; refused when unnamed rollouts join
    /// a named run of the `--agent` label (their rows would interleave with that run's,
    /// which only the whole table orders).
    fn order(&self, c: &AggregateConfig, inputs: Option<&MergeInputs>) -> Result<Vec<(String, usize)>> {
        let labels: HashMap<String, String> = match inputs {
            Some(inp) => inp.labels(),
            None => label_runs(&self.key_agents),
        };
        let label_of = |r: &Run| -> String {
            match &r.key {
                Some(k) => labels.get(k).cloned().unwrap_or_else(|| k.clone()),
                None => c.agent.clone().unwrap_or_default(),
            }
        };
        let mut order: Vec<(String, usize)> = self.list.iter().enumerate().map(|(i, r)| (label_of(r), i)).collect();
        order.sort();
        match order.windows(2).find(|w| w[0].0 == w[1].0) {
            Some(w) => Err(Error::Usage(format!(
                "rollouts that name no agent are labelled `{}` by --agent, which also labels a run: their rows \
                 interleave with that run's, which only the whole table orders; merge with --whole-table, or give \
                 --agent a label no run has",
                w[0].0
            ))),
            None => Ok(order),
        }
    }
}

/// `merge aggregate` bucket by bucket into `path` (staged in `out`), with the rounds
/// its statistics took. They come from rounds over the buckets run here, or from
/// `given`, a finished plan of rounds run elsewhere.
pub(super) fn merge_aggregate_streamed(
    c: &AggregateConfig,
    slices: &[PathBuf],
    inputs: Option<&MergeInputs>,
    out: &mut OutputSet,
    path: &Path,
    given: Option<Plan>,
    pending: &mut Vec<String>,
) -> Result<(AggregateRun, u32)> {
    let sweep = Sweep { slices, name: &c.rollouts[0], inputs };
    let t0 = std::time::Instant::now();
    let mut plan = Plan::new(Command::Aggregate);
    let mut g = Gathered::default();
    g.lines = sweep.each_step(false, |s| g.visit(c, s, &mut plan))?;
    trace("merge: gather runs", t0);
    // The checks the single-machine path makes on the whole table, in its order (none
    // when the sweep has no rows).
    if let Some(inp) = inputs {
        std::mem::take(&mut g.checks).result(inp.path(), &g.lines)?;
    }
    // The inputs' read warnings, where the whole table's run prints them.
    crate::workflow::report_read_warnings(&std::mem::take(pending));
    if let Some(e) = g.unnamed.take() {
        return Err(e);
    }
    let order = g.order(c, inputs)?;
    let mut warn = Warnings::default();
    if let Some((at, task, rollout)) = &g.first_orphan {
        warn.add(format!(
            "{} rollout(s) of {} have no materialized input row (first: {at}, rollout key ({task}, {rollout})); they are left out of the aggregate",
            g.orphans,
            g.lines.name(),
        ));
    }
    if let Some(e) = order.iter().find_map(|(_, i)| g.list[*i].duplicate.take()) {
        return Err(e);
    }
    let plan = settle(plan, given, |plan| round_here(&AggregateShares { agent: true }, plan, sweep))?;
    let t0 = std::time::Instant::now();
    let entries = aggregate_entries(c, &g, &order, &plan, &mut warn)?;
    trace("merge: statistics", t0);
    let t0 = std::time::Instant::now();
    let mut w = out.create(path)?;
    let parts = entries.iter().map(|e| (e.head.as_slice(), e.repeats.as_slice(), e.perf.as_ref()));
    // Each bucket read once: the first run's entries go to the file, the others' to a
    // scratch file with no name, copied in when their turn comes.
    let mut spilled: Option<Spilled> = None;
    write_aggregate_with(parts, &mut w, |e, depth, w| {
        if e == 0 {
            spilled = Some(write_tasks_once(&entries, &g.list, sweep, depth, &scratch_dir(path), w)?);
        }
        spilled.as_ref().expect("the first entry spilled the others").copy(e, w)
    })
    .map_err(|e| e.at(path))?;
    w.finish().map_err(|e| Error::write(path, e))?;
    drop(w);
    trace("merge: task entries + write", t0);
    let key_metrics = entries.iter().map(|e| label_and_key_metrics(&e.head)).collect();
    let run = AggregateRun { file: Some(path.to_path_buf()), key_metrics, warnings: warn, ..AggregateRun::nothing() };
    Ok((run, plan.round))
}

/// Where a scratch file for `path` goes: beside it, or in the temporary folder when it
/// is a pipe or device.
fn scratch_dir(path: &Path) -> PathBuf {
    match path.parent() {
        _ if crate::export::atomic::is_stream(path) => std::env::temp_dir(),
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// The agent and repeat levels of each run, in label order, from the plan.
fn aggregate_entries(
    c: &AggregateConfig,
    g: &Gathered,
    order: &[(String, usize)],
    plan: &Plan,
    warn: &mut Warnings,
) -> Result<Vec<Entry>> {
    let opts = AggregateOptions {
        default_agent: c.agent.clone(),
        metrics: Vec::new(),
        key_metrics: c.key_metrics.clone(),
        extra: HashMap::new(),
    };
    let mut entries: Vec<Entry> = Vec::new();
    for (label, i) in order {
        let run = &g.list[*i];
        let mut head: Members = vec![(Arc::from("agent_ref"), Json::name_ref(label))];
        if run.key_is_server {
            head.push((Arc::from("_ng_environment_server"), Json::Str(run.key.clone().unwrap_or_default())));
        }
        let cov = if run.masked == 0 {
            Vec::new()
        } else {
            coverage_members(run.rows - run.masked, run.masked, run.tasks_measured, run.tasks_all - run.tasks_measured)
        };
        let perf = run.perf.summary();
        let Some(state) = plan.run(&run.key).filter(|_| run.scored > 0) else {
            head.push((Arc::from("agent_metrics"), Json::Obj(cov.clone())));
            head.push((Arc::from("key_metrics"), Json::Obj(cov)));
            entries.push(Entry { head, repeats: Vec::new(), perf, fields: Vec::new(), all_int: false, run: *i });
            continue;
        };
        let l = &state.lean;
        let agent = l.agent_members(&StatKeys::of_names(state.names.iter().map(String::as_str)), state.all_int);
        let repeats = l.repeat_entries(label, &state.names, run.tasks_measured, warn);
        let repeats =
            head_from_levels(&mut head, label, agent, repeats, cov, run.repeats.len(), |_, _| Ok(()), &opts, warn)?;
        entries.push(Entry { head, repeats, perf, fields: state.names.clone(), all_int: state.all_int, run: *i });
    }
    Ok(entries)
}

/// `merge aggregate`'s shares: one per run with scored rollouts in the bucket. `agent`:
/// rollouts nothing names are counted (as `--agent`'s run); else the merge refuses them.
pub(super) struct AggregateShares {
    pub(super) agent: bool,
}

impl BucketShares for AggregateShares {
    const COMMAND: Command = Command::Aggregate;

    fn shares(&self, s: &Step<'_>, plan: Option<&Plan>) -> Result<(Vec<Share>, Vec<BucketInfo>)> {
        let (t, slice) = (&s.t, s.slice);
        let runs = BucketRuns::of(s);
        let keys: Vec<&Option<String>> = runs.keys.iter().map(|(k, _)| k).collect();
        let mut shares = Vec::new();
        for (i, rows) in runs.scored_by(t, |k| keys.iter().position(|&x| x == k)) {
            let key = keys[i].clone();
            if key.is_none() && !self.agent {
                continue;
            }
            let Some(plan) = plan else {
                shares.push(counting_share(key, &Profiled::new(t, &rows, &vec![""; rows.len()])));
                continue;
            };
            shares.extend(round_share(plan, &key, t, &rows, slice)?);
        }
        Ok((shares, Vec::new()))
    }
}

/// Writes one run's task entries of bucket `t` (its scored rows `scored`, profiled with
/// the run's `fields`) into the `group_level_metrics` array at `depth`, opening the array
/// if `started` says nothing was written to it yet.
#[allow(clippy::too_many_arguments)]
fn write_bucket_tasks<W: Write + Send>(
    t: &RolloutTable,
    scored: &[usize],
    fields: &[String],
    all_int: bool,
    shared: &Shared,
    depth: usize,
    started: &mut bool,
    w: &mut W,
) -> std::result::Result<(), StreamError> {
    let label = vec![""; scored.len()];
    let fields = resolve_fields(t, fields.iter().cloned());
    let p = Profiled::with_fields(t, scored, &label, fields, all_int);
    let keys = StatKeys::new(&p.fields);
    let spec = task_spec(p, keys, shared);
    if spec.groups.is_empty() {
        return Ok(());
    }
    if !*started {
        w.write_all(b"[")?;
    }
    write_task_entries(&spec, Some(depth), *started, w)?;
    *started = true;
    Ok(())
}

/// Closes a `group_level_metrics` array at `depth`, or writes an empty one when nothing
/// was `started`.
fn end_task_array<W: Write>(depth: usize, started: bool, w: &mut W) -> std::io::Result<()> {
    if started {
        close_array(depth, w)
    } else {
        w.write_all(b"[]")
    }
}

/// Task entries of runs after the first, written during the one pass over the buckets:
/// each run's pieces (offset and length in the scratch file), in order.
struct Spilled {
    file: Option<std::fs::File>,
    pieces: Vec<Vec<(u64, u64)>>,
}

impl Spilled {
    /// Copies entry `e`'s task entries (nothing for the first, written directly) to `w`.
    fn copy<W: Write>(&self, e: usize, w: &mut W) -> std::result::Result<(), StreamError> {
        use std::os::unix::fs::FileExt;
        let Some(file) = &self.file else { return Ok(()) };
        let mut buf = vec![0u8; 1 << 20];
        for &(at, len) in self.pieces.get(e).map(Vec::as_slice).unwrap_or_default() {
            let mut done = 0;
            while done < len {
                let n = (len - done).min(buf.len() as u64) as usize;
                file.read_exact_at(&mut buf[..n], at + done)?;
                w.write_all(&buf[..n])?;
                done += n as u64;
            }
        }
        Ok(())
    }
}

/// A writer that counts what it has written.
struct Counted<W> {
    w: W,
    at: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.w.write(b)?;
        self.at += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// Reads every bucket once and writes each entry's task entries array: the first
/// entry's to `w`, the others' to a scratch file in `dir`.
fn write_tasks_once<W: Write + Send>(
    entries: &[Entry],
    list: &[Run],
    sweep: Sweep<'_>,
    depth: usize,
    dir: &Path,
    w: &mut W,
) -> std::result::Result<Spilled, StreamError> {
    let file = match entries.len() {
        0 | 1 => None,
        _ => Some(crate::export::atomic::scratch_file(dir)?),
    };
    let spill_to: Box<dyn Write + Send> = match &file {
        Some(f) => Box::new(f.try_clone()?),
        None => Box::new(std::io::sink()),
    };
    let mut spill = Counted { w: std::io::BufWriter::with_capacity(1 << 20, spill_to), at: 0 };
    let mut pieces: Vec<Vec<(u64, u64)>> = vec![Vec::new(); entries.len()];
    let mut started = vec![false; entries.len()];
    let entry_of: HashMap<Option<String>, usize> =
        entries.iter().enumerate().map(|(e, x)| (list[x.run].key.clone(), e)).collect();
    sweep.each_step(false, |s| -> std::result::Result<(), StreamError> {
        let t = &s.t;
        let rows_by = BucketRuns::of(s).scored_by(t, |k| entry_of.get(k).copied());
        if rows_by.is_empty() {
            return Ok(());
        }
        let shared: Shared = (Arc::new(info_specs(t)), Arc::new(quoted_names(t)));
        for (e, scored) in rows_by {
            let Entry { fields, all_int, .. } = &entries[e];
            if e == 0 {
                write_bucket_tasks(t, &scored, fields, *all_int, &shared, depth, &mut started[e], w)?;
            } else {
                let at = spill.at;
                write_bucket_tasks(t, &scored, fields, *all_int, &shared, depth, &mut started[e], &mut spill)?;
                pieces[e].push((at, spill.at - at));
            }
        }
        Ok(())
    })?;
    end_task_array(depth, started[0], w)?;
    for (e, &s) in started.iter().enumerate().skip(1) {
        let at = spill.at;
        end_task_array(depth, s, &mut spill)?;
        pieces[e].push((at, spill.at - at));
    }
    spill.flush()?;
    drop(spill);
    Ok(Spilled { file, pieces })
}

/// One run's agent and repeat levels, waiting for its task entries.
struct Entry {
    head: Members,
    repeats: Vec<Json>,
    perf: Option<Json>,
    /// The run's fields in first-appearance order, to profile each bucket with.
    fields: Vec<String>,
    all_int: bool,
    /// Index of the run in the gathered list.
    run: usize,
}
