//! The viewer's index over the runs it serves: for every rollout its run, task, repeat,
//! reward and where its line sits in its file (offsets, not text), and for every task
//! the start of its user prompt and each run's solved count. Transcripts stay in the
//! mapped files and are parsed when a page asks for one. A file that grows is indexed
//! from where the last index ended.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use crate::error::{Error, Location, Result};
use crate::health::RecordResult;
use crate::ingest::labels::runs as run_labels;
use crate::ingest::lines::{map_whole, Whole};
use crate::ingest::rollouts::{read_rollouts_bytes, read_rollouts_range, ReadOptions};
use crate::ingest::table::Source;
use crate::ingest::{InputTable, RolloutTable};
use crate::json::scan::{key_is, Scanner};
use crate::json::Json;
use crate::metrics::compare::{report_with, Options, Report, RunRollouts, TaskValue};
use crate::metrics::failures::Failed;
use crate::workflow::compare::{read_runs_with, CompareConfig};

/// A task is solved by a rollout whose reward is at least this (1 of a 0/1 reward), and
/// by a run whose mean reward over the task's repeats is at least this.
pub const SOLVED: f64 = 0.5;

/// How much of each task's user prompt the index keeps for the text search.
pub const SEARCH_CHARS: usize = 16 << 10;

/// What to serve: the runs exactly as `compare` takes them.
#[derive(Debug, Clone)]
pub struct ViewRuns {
    /// Rollouts files: several files are several runs, a fan-out file one run per agent.
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs: none, or one per rollouts file, in order.
    pub inputs: Vec<PathBuf>,
    /// Label for rollouts that name no agent.
    pub agent: Option<String>,
    /// The run flips and comparisons are against (default: the first).
    pub baseline: Option<String>,
    /// Pair tasks by index even where runs hold different tasks there.
    pub allow_task_mismatch: bool,
    /// Judge every rollout with the rollout health check (its verdict and the checks that
    /// flagged it show on its card, in the overview and as a filter).
    pub health_check: bool,
    /// Serve sweeps of a lake instead of `rollouts` (each sweep a run named by its id).
    pub lake: Option<super::lake::LakeSweeps>,
}

impl Default for ViewRuns {
    fn default() -> Self {
        ViewRuns {
            rollouts: Vec::new(),
            inputs: Vec::new(),
            agent: None,
            baseline: None,
            allow_task_mismatch: false,
            health_check: true,
            lake: None,
        }
    }
}

/// One rollouts file's bytes and line starts.
pub struct FileData {
    pub path: PathBuf,
    /// The bytes (mapped, or decompressed), replaced when the file grows.
    pub bytes: Arc<Whole>,
    /// Byte offset of the start of each line (line N at `starts[N - 1]`), up to `indexed`.
    pub starts: Vec<u64>,
    /// Bytes indexed: the end of the last complete line read.
    pub indexed: u64,
    /// Whether the file can grow (a plain file; compressed ones are read whole once).
    pub plain: bool,
    /// The file's materialized inputs, when given (shared with the SQL table's build).
    pub inputs: Option<Arc<InputTable>>,
    pub inputs_bytes: Option<Arc<Whole>>,
    /// The standing failures of the file's failures sidecars, read once.
    pub failed: Arc<Vec<Failed>>,
    /// For a lake sweep whose files are gone: its rows from the lake's tables instead.
    pub gone: Option<Gone>,
}

/// A lake sweep served from the lake's tables, its recorded files being gone or changed.
pub struct Gone {
    /// Why its lines (prompts, transcripts) are not shown.
    pub why: String,
    /// The sweep's rollouts table: row N (from 1) is the rollout whose `Row::line` is N.
    pub rows: polars::prelude::DataFrame,
    /// The sweep's tasks table, the SQL filter's rows for it.
    pub tasks: PathBuf,
}

impl FileData {
    /// Drops the mapped pages from this process (they stay in the page cache; a line
    /// asked for later is read back in), so that serving holds offsets, not text.
    pub(super) fn release(&self) {
        for bytes in std::iter::once(&self.bytes).chain(&self.inputs_bytes) {
            if let Whole::Mapped(m) = &**bytes {
                // SAFETY: a read-only shared mapping of a file: a dropped page is read
                // again from the file when touched, so every slice of it stays valid.
                let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
            }
        }
    }

    /// The bytes of line `line` (1-based), without its newline.
    pub fn line(&self, line: u64) -> &[u8] {
        let i = (line - 1) as usize;
        let start = self.starts[i] as usize;
        let end = self.starts.get(i + 1).map_or(self.indexed as usize, |&e| e as usize);
        let b = &self.bytes[start..end.min(self.bytes.len())];
        b.strip_suffix(b"\n").map_or(b, |b| b.strip_suffix(b"\r").unwrap_or(b))
    }
}

/// One rollout.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    pub file: u32,
    pub run: u32,
    pub task: i64,
    pub rollout: i64,
    pub line: u64,
    pub masked: bool,
    /// The reward, NaN when the rollout has none.
    pub reward: f64,
    /// The health check's result (`None` when the check did not run).
    pub health: Option<RecordResult>,
}

impl Row {
    /// Whether the rollout counts: not masked, with a reward.
    pub fn measured(&self) -> bool {
        !self.masked && !self.reward.is_nan()
    }
}

/// A run's standing on one task.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskRun {
    /// Measured rollouts, solved ones among them, and their rewards' sum.
    pub n: u32,
    pub k: u32,
    pub sum: f64,
    /// Every rollout of the run on the task, measured or not.
    pub rollouts: u32,
}

impl TaskRun {
    pub fn mean(&self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
    /// `never`, `sometimes` or `always` solved; `None` without a measured rollout.
    pub fn slice(&self) -> Option<Slice> {
        match (self.n, self.k) {
            (0, _) => None,
            (_, 0) => Some(Slice::Never),
            (n, k) if k == n => Some(Slice::Always),
            _ => Some(Slice::Sometimes),
        }
    }
}

/// Tasks by how often a run solved them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slice {
    Never,
    Sometimes,
    Always,
}

impl Slice {
    pub const ALL: [Slice; 3] = [Slice::Never, Slice::Sometimes, Slice::Always];
    pub fn name(self) -> &'static str {
        match self {
            Slice::Never => "never",
            Slice::Sometimes => "sometimes",
            Slice::Always => "always",
        }
    }
    pub fn parse(s: &str) -> Option<Slice> {
        Slice::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// One task: its prompt, its rollouts and each run's standing.
#[derive(Debug, Clone, Default)]
pub struct Task {
    pub index: i64,
    /// Whether `prompt` and `search` were read (from a rollout whose line is at hand).
    pub prompted: bool,
    /// The user prompt's start (for lists) and its lower-cased text (for the search).
    pub prompt: String,
    pub search: String,
    /// Rows of the task, in file and line order.
    pub rows: Vec<u32>,
    /// Per run.
    pub runs: Vec<TaskRun>,
}

/// Everything the pages are answered from.
pub struct Index {
    pub files: Vec<FileData>,
    pub runs: Vec<String>,
    /// Per run: its file and its label there.
    pub origin: Vec<(usize, String)>,
    pub baseline: usize,
    pub rows: Vec<Row>,
    /// Tasks in index order; `task_at` finds one by index.
    pub tasks: Vec<Task>,
    pub task_at: HashMap<i64, usize>,
    /// The comparison report over the runs (means, intervals, paired differences).
    pub report: Option<Report>,
    /// Failures without a result, per run and class (from the failures sidecars).
    pub failures: Vec<BTreeMap<String, usize>>,
    /// Per run: the tasks with a standing failure, by class.
    pub failed_tasks: Vec<BTreeMap<String, Vec<i64>>>,
    /// What reading found and let through (read warnings, lines not yet complete).
    pub notes: Vec<String>,
    /// Whether the rollouts were judged by the health check.
    pub health_checked: bool,
    /// The lake served from: its folder, every sweep in it, and the sweeps served.
    pub lake: Option<(PathBuf, Vec<crate::query::lake::SweepRow>, Vec<String>)>,
    /// Whether the comparison needs computing again (rows were added).
    stale: bool,
}

/// Characters of the prompt's start kept for lists.
const PROMPT_START: usize = 240;

impl Index {
    /// Reads every file and builds the index, refusing what `compare` refuses.
    /// Per run file, its rollouts as read (`None`: a lake sweep served from its tables).
    pub fn build(c: &ViewRuns) -> Result<(Index, Vec<Option<RolloutTable>>)> {
        let lake = c.lake.as_ref().map(super::lake::resolve).transpose()?;
        let wanted_baseline = c.baseline.clone();
        let resolved;
        let c = match &lake {
            Some(l) => {
                resolved = ViewRuns {
                    rollouts: l.rollouts.clone(),
                    inputs: l.inputs.clone(),
                    baseline: None,
                    lake: None,
                    ..c.clone()
                };
                &resolved
            }
            None => c,
        };
        if c.rollouts.is_empty() {
            return Err(Error::Usage("give at least one rollouts file".into()));
        }
        if !c.inputs.is_empty() && c.inputs.len() != c.rollouts.len() {
            return Err(Error::Usage(format!(
                "give --inputs once per rollouts file, in the same order, or not at all ({} rollouts files, {} inputs files)",
                c.rollouts.len(),
                c.inputs.len()
            )));
        }
        let mut files = Vec::new();
        let mut tables = Vec::new();
        let opts = read_options(c.health_check);
        for (i, path) in c.rollouts.iter().enumerate() {
            let why = lake.as_ref().and_then(|l| l.gone[i].clone());
            let (data, table) = match (why, &lake) {
                (Some(why), Some(l)) => (lake_file(path, &l.dir, &l.sweep_of_file[i], why)?, None),
                _ => {
                    let (data, table) = read_file(path, c.inputs.get(i).map(PathBuf::as_path), opts)?;
                    (data, Some(table))
                }
            };
            files.push(data);
            tables.push(table);
        }
        let config = CompareConfig {
            rollouts: c.rollouts.clone(),
            inputs: c.inputs.clone(),
            agent: c.agent.clone(),
            metric: "reward".into(),
            baseline: c.baseline.clone(),
            pairing: crate::metrics::task_identity::Pairing {
                allow_mismatch: c.allow_task_mismatch,
                ..Default::default()
            },
            ..Default::default()
        };
        let read: Vec<_> =
            tables.iter().zip(&files).map(|(t, f)| t.as_ref().map(|t| (t, f.inputs.as_deref()))).collect();
        let mut runs = read_runs_with(&config, &read)?;
        let mut baseline_name = c.baseline.clone();
        if let Some(l) = &lake {
            // Each sweep's runs named by the sweep.
            for (i, (f, label)) in runs.origin.iter().enumerate() {
                let in_file = runs.origin.iter().filter(|(g, _)| g == f).count();
                runs.names[i] = super::lake::run_name(&l.sweep_of_file[*f], label, in_file);
            }
            baseline_name = wanted_baseline;
        }
        let baseline = match &baseline_name {
            None => 0,
            Some(b) => runs.names.iter().position(|n| n == b).ok_or_else(|| {
                Error::Usage(format!("--baseline {b:?} is not a run here; runs: {}", runs.names.join(", ")))
            })?,
        };
        let mut index = Index {
            files,
            runs: runs.names.clone(),
            origin: runs.origin.clone(),
            baseline,
            rows: Vec::new(),
            tasks: Vec::new(),
            task_at: HashMap::new(),
            report: None,
            failures: vec![BTreeMap::new(); runs.names.len()],
            failed_tasks: vec![BTreeMap::new(); runs.names.len()],
            notes: runs.notes.clone(),
            health_checked: c.health_check,
            lake: None,
            stale: true,
        };
        if let Some(l) = lake {
            index.notes.extend(l.notes);
            let served = l.sweep_of_file.clone();
            index.lake = Some((l.dir, l.listing, served));
        }
        for (f, t) in tables.iter().enumerate() {
            match t {
                Some(t) => {
                    let health = index.judge(t)?;
                    index.add_rows(f, t, c.agent.as_deref(), health.as_deref());
                    index.add_failures(f, t, &c.rollouts[f])?;
                }
                None => index.add_lake_rows(f, c.agent.as_deref())?,
            }
        }
        index.refresh_report();
        for f in &index.files {
            f.release();
        }
        drop(runs);
        crate::ingest::release_free_memory();
        Ok((index, tables))
    }

    /// The health check's result for each row of `t` (each run judged apart), when the
    /// index runs the check. Lines added to a growing file are judged among themselves
    /// (a duplicate of a rollout read earlier is not seen).
    fn judge(&self, t: &RolloutTable) -> Result<Option<Vec<RecordResult>>> {
        if !self.health_checked || t.is_empty() {
            return Ok(None);
        }
        let t0 = std::time::Instant::now();
        let out = crate::workflow::aggregate::check_by_run(t)?;
        crate::trace::trace("view: health check", t0);
        Ok(Some(out))
    }

    /// Adds the rows of table `t` read from file `f`, with their health results.
    fn add_rows(&mut self, f: usize, t: &RolloutTable, agent: Option<&str>, health: Option<&[RecordResult]>) {
        let labels = run_labels(t, self.files[f].inputs.as_deref());
        let reward = t.column(Source::Top, "reward");
        let row = |r: usize| Row {
            file: f as u32,
            run: 0,
            task: t.task[r],
            rollout: t.rollout[r],
            line: t.line[r],
            masked: t.masked[r],
            reward: reward.and_then(|c| t.columns[c].num(r)).unwrap_or(f64::NAN),
            health: health.map(|h| h[r]),
        };
        self.insert_rows(f, t.len(), |r| labels.label_of(r).or(agent).unwrap_or(""), row);
    }

    /// Adds the rows of a lake sweep served from its tables (file `f`): no line, no
    /// health result.
    fn add_lake_rows(&mut self, f: usize, agent: Option<&str>) -> Result<()> {
        use polars::prelude::DataType;
        let Some(gone) = &self.files[f].gone else { return Ok(()) };
        let df = &gone.rows;
        let at = |name: &str| {
            df.column(name).cloned().map_err(|_| {
                Error::bad(Location::file(&self.files[f].path).key(name), "no such column in the lake's rollouts table")
            })
        };
        let labels = at(crate::schema::AGENT)?.cast(&DataType::String)?;
        let task = at(crate::schema::TASK_INDEX)?.cast(&DataType::Int64)?;
        let rollout = at("_ng_rollout_index")?.cast(&DataType::Int64)?;
        let masked = at("mask_sample")?.cast(&DataType::Boolean)?;
        let reward = df.column("reward").ok().map(|c| c.cast(&DataType::Float64)).transpose()?;
        let (labels, task, rollout, masked) = (labels.str()?, task.i64()?, rollout.i64()?, masked.bool()?);
        let reward = reward.as_ref().map(|c| c.f64()).transpose()?;
        let row = |r: usize| Row {
            file: f as u32,
            run: 0,
            task: task.get(r).unwrap_or(0),
            rollout: rollout.get(r).unwrap_or(0),
            line: r as u64 + 1,
            masked: masked.get(r).unwrap_or(false),
            reward: reward.and_then(|c| c.get(r)).unwrap_or(f64::NAN),
            health: None,
        };
        let n = df.height();
        self.insert_rows(f, n, |r| labels.get(r).or(agent).unwrap_or(""), row);
        Ok(())
    }

    /// Adds `n` rows of file `f` (`row(r)`, of the run labelled `label_of(r)`), the
    /// tasks they open and their runs' standings, and the prompts of tasks that now have
    /// a line at hand.
    fn insert_rows<'a>(&mut self, f: usize, n: usize, label_of: impl Fn(usize) -> &'a str, row: impl Fn(usize) -> Row) {
        let mut run_of_label: HashMap<String, u32> = HashMap::new();
        for (i, (file, label)) in self.origin.iter().enumerate() {
            if *file == f {
                run_of_label.insert(label.clone(), i as u32);
            }
        }
        let first = self.rows.len();
        for r in 0..n {
            let label = label_of(r);
            let run = match run_of_label.get(label) {
                Some(&run) => run,
                None => {
                    // A run that appeared in lines added since the start.
                    let name = if self.runs.iter().any(|n| n == label) {
                        format!("{}:{label}", self.files[f].path.display())
                    } else {
                        label.to_string()
                    };
                    self.runs.push(name);
                    self.origin.push((f, label.to_string()));
                    self.failures.push(BTreeMap::new());
                    self.failed_tasks.push(BTreeMap::new());
                    for task in &mut self.tasks {
                        task.runs.push(TaskRun::default());
                    }
                    let id = (self.runs.len() - 1) as u32;
                    run_of_label.insert(label.to_string(), id);
                    id
                }
            };
            self.rows.push(Row { run, ..row(r) });
        }
        let nruns = self.runs.len();
        // Tasks without a prompt yet that gained a row, each once.
        let mut pending = Vec::new();
        let mut is_pending = vec![false; self.tasks.len()];
        for id in first..self.rows.len() {
            let row = self.rows[id];
            let at = match self.task_at.get(&row.task) {
                Some(&at) => at,
                None => {
                    let at = self.tasks.len();
                    self.tasks.push(Task {
                        index: row.task,
                        runs: vec![TaskRun::default(); nruns],
                        ..Default::default()
                    });
                    self.task_at.insert(row.task, at);
                    is_pending.push(false);
                    at
                }
            };
            if !self.tasks[at].prompted && !is_pending[at] {
                is_pending[at] = true;
                pending.push(at);
            }
            let task = &mut self.tasks[at];
            task.rows.push(id as u32);
            let s = &mut task.runs[row.run as usize];
            s.rollouts += 1;
            if row.measured() {
                s.n += 1;
                s.sum += row.reward;
                if row.reward >= SOLVED {
                    s.k += 1;
                }
            }
        }
        // Prompts, from each task's first rollout whose line is at hand.
        let files = &self.files;
        let rows = &self.rows;
        let prompts: Vec<Option<(String, String)>> = pending
            .par_iter()
            .map(|&at| {
                let row = self.tasks[at]
                    .rows
                    .iter()
                    .map(|&id| rows[id as usize])
                    .find(|r| files[r.file as usize].gone.is_none())?;
                let text = user_text(files[row.file as usize].line(row.line));
                let start: String = text.chars().take(PROMPT_START).collect();
                let search: String = text.chars().take(SEARCH_CHARS).collect::<String>().to_lowercase();
                Some((start, search))
            })
            .collect();
        for (at, prompt) in pending.into_iter().zip(prompts) {
            if let Some((start, search)) = prompt {
                let t = &mut self.tasks[at];
                (t.prompt, t.search, t.prompted) = (start, search, true);
            }
        }
        if !self.tasks.windows(2).all(|w| w[0].index < w[1].index) {
            self.tasks.sort_by_key(|t| t.index);
            self.task_at = self.tasks.iter().enumerate().map(|(i, t)| (t.index, i)).collect();
        }
        self.stale = true;
    }

    /// Counts the standing failures of file `f`'s sidecars by run and class.
    fn add_failures(&mut self, f: usize, t: &RolloutTable, path: &Path) -> Result<()> {
        let Some(cov) = crate::workflow::aggregate::failures_beside(std::slice::from_ref(&path.to_path_buf()), t)?
        else {
            return Ok(());
        };
        let labels = run_labels(t, self.files[f].inputs.as_deref());
        for (label, (_, task, class)) in crate::metrics::failures::labelled(&cov.failures, &labels) {
            let Some(run) = self.origin.iter().position(|(file, l)| *file == f && l == label) else { continue };
            *self.failures[run].entry(class.clone()).or_default() += 1;
            if let crate::metrics::failures::Idx::Int(task) = task {
                self.failed_tasks[run].entry(class.clone()).or_default().push(*task);
            }
        }
        self.files[f].failed = Arc::new(cov.failures);
        Ok(())
    }

    /// Computes the comparison again when rows were added.
    pub fn refresh_report(&mut self) {
        if !self.stale {
            return;
        }
        let mut per_run = vec![RunRollouts::default(); self.runs.len()];
        for row in &self.rows {
            let value = (!row.reward.is_nan()).then_some(row.reward);
            // Without clusters a rollout is never refused.
            let _ = per_run[row.run as usize].add(row.task, row.rollout, value, row.masked, None);
        }
        self.report = report_with(&self.runs, &per_run, self.baseline, TaskValue::Mean, &Options::default()).ok();
        self.stale = false;
    }

    /// Indexes the complete lines added to growing files since the last look; returns
    /// whether anything was added. A malformed new line is a note, and stops that file's
    /// index before it.
    pub fn grow(&mut self, agent: Option<&str>) -> bool {
        let mut added = false;
        for f in 0..self.files.len() {
            if !self.files[f].plain {
                continue;
            }
            let path = self.files[f].path.clone();
            let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if len <= self.files[f].indexed {
                continue;
            }
            let Ok(bytes) = map_whole(&path) else { continue };
            let from = self.files[f].indexed;
            let Some(nl) = memchr::memrchr(b'\n', &bytes[from as usize..]) else { continue };
            let end = from + nl as u64 + 1;
            let read = read_rollouts_range(&path, (from, end), read_options(self.health_checked))
                .and_then(|t| self.judge(&t).map(|h| (t, h)));
            match read {
                Ok((t, health)) => {
                    let data = &mut self.files[f];
                    data.bytes = Arc::new(bytes);
                    line_starts(&data.bytes, from, end, &mut data.starts);
                    data.indexed = end;
                    if !t.is_empty() {
                        self.add_rows(f, &t, agent, health.as_deref());
                        added = true;
                    }
                    self.files[f].release();
                }
                Err(e) => {
                    let note = format!("not indexed past byte {from}: {e}");
                    if !self.notes.contains(&note) {
                        self.notes.push(note);
                    }
                }
            }
        }
        if added {
            self.refresh_report();
        }
        added
    }

    /// A run by name.
    pub fn run(&self, name: &str) -> Option<usize> {
        self.runs.iter().position(|n| n == name)
    }
}

/// What the index reads of each row: its task's fingerprint (to pair tasks across runs),
/// and the health check's evidence when the check runs.
fn read_options(health_check: bool) -> ReadOptions {
    ReadOptions { evidence: health_check, ..ReadOptions::FINGERPRINTS }
}

/// Reads one rollouts file (and its inputs) for the index.
fn read_file(path: &Path, inputs: Option<&Path>, opts: ReadOptions) -> Result<(FileData, RolloutTable)> {
    let bytes = map_whole(path)?;
    let plain = matches!(bytes, Whole::Mapped(_));
    let (inputs, inputs_bytes) = match inputs {
        Some(p) => (Some(Arc::new(crate::ingest::read_inputs(p)?)), Some(Arc::new(map_whole(p)?))),
        None => (None, None),
    };
    let table = if plain {
        read_rollouts_range(path, (0, bytes.len() as u64), opts)?
    } else {
        read_rollouts_bytes(path, &bytes, opts)?
    };
    if table.is_empty() {
        return Err(Error::bad(Location::file(path), "no rollouts; expected one JSON object per line"));
    }
    if let Some(inp) = &inputs {
        crate::workflow::check_runs(&table, inp)?;
    }
    // A last line still being written is left for later.
    let indexed = match bytes.last() {
        Some(b'\n') | None => bytes.len() as u64,
        Some(_) if !table.cut_off.is_empty() => memchr::memrchr(b'\n', &bytes).map_or(0, |p| p as u64 + 1),
        Some(_) => bytes.len() as u64,
    };
    let mut starts = Vec::new();
    line_starts(&bytes, 0, indexed, &mut starts);
    let data = FileData {
        path: path.to_path_buf(),
        bytes: Arc::new(bytes),
        starts,
        indexed,
        plain,
        inputs,
        inputs_bytes,
        failed: Arc::default(),
        gone: None,
    };
    Ok((data, table))
}

/// A lake sweep served from its tables: its `rollouts` partition `path` read whole (the
/// rows the index and the cards show), and its `tasks` partition beside it.
fn lake_file(path: &Path, lake: &Path, sweep: &str, why: String) -> Result<FileData> {
    let rows = crate::ingest::parquet::read_parquet(path)?;
    Ok(FileData {
        path: path.to_path_buf(),
        bytes: Arc::new(Whole::Read(Vec::new())),
        starts: Vec::new(),
        indexed: 0,
        plain: false,
        inputs: None,
        inputs_bytes: None,
        failed: Arc::default(),
        gone: Some(Gone { why, rows, tasks: crate::export::lake::partition(lake, "tasks", sweep) }),
    })
}

/// Appends the start of every line in bytes `from..to` (which begin at a line start).
fn line_starts(bytes: &[u8], from: u64, to: u64, out: &mut Vec<u64>) {
    let region = &bytes[from as usize..to as usize];
    if region.is_empty() {
        return;
    }
    let chunk = (region.len() / rayon::current_num_threads().max(1) / 4).max(1 << 20);
    let parts: Vec<Vec<u64>> = region
        .par_chunks(chunk)
        .enumerate()
        .map(|(i, c)| {
            let base = from + (i * chunk) as u64;
            memchr::memchr_iter(b'\n', c).map(|p| base + p as u64 + 1).collect()
        })
        .collect();
    out.push(from);
    for p in parts {
        out.extend(p);
    }
    // The end of the last line is no line start.
    if out.last() == Some(&to) {
        out.pop();
    }
}

/// The text of a rollout's user messages (`responses_create_params.input`), joined by
/// blank lines; empty when the line has none.
pub fn user_text(line: &[u8]) -> String {
    match prompt_messages(line) {
        Some(msgs) => {
            msgs.iter().filter(|(role, _)| role == "user").map(|(_, t)| t.as_str()).collect::<Vec<_>>().join("\n\n")
        }
        None => String::new(),
    }
}

/// The messages of `responses_create_params.input` as (role, text): a plain string
/// input is one user message; content parts are joined.
pub fn prompt_messages(line: &[u8]) -> Option<Vec<(String, String)>> {
    let params = top_value(line, b"responses_create_params")?;
    let v = crate::json::parse(params).ok()?;
    match v.get("input")? {
        Json::Str(s) => Some(vec![("user".into(), s.clone())]),
        Json::Arr(items) => Some(
            items
                .iter()
                .filter_map(|m| {
                    let role = m.get("role").and_then(Json::as_str).unwrap_or("user").to_string();
                    let text = content_text(m.get("content")?);
                    Some((role, text))
                })
                .collect(),
        ),
        _ => None,
    }
}

/// The text of a message's content: a string, or the text of its parts.
pub fn content_text(c: &Json) -> String {
    match c {
        Json::Str(s) => s.clone(),
        Json::Arr(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Json::Str(s) => Some(s.as_str()),
                _ => p.get("text").and_then(Json::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The bytes of the value of top-level key `key` of a JSON object line.
pub fn top_value<'a>(line: &'a [u8], key: &[u8]) -> Option<&'a [u8]> {
    let mut s = Scanner::new(line);
    s.expect(b'{', "").ok()?;
    let mut first = true;
    while let Some(k) = s.next_key(&mut first).ok()? {
        s.peek();
        let at = s.i;
        s.value().ok()?;
        if key_is(k, key) {
            return Some(&line[at..s.i]);
        }
    }
    None
}
