//! Reading a lake of sweeps: each table is the union of its sweeps' partitions, with
//! `sweep` and the sweep's labels as columns (a column a sweep lacks is null there), over
//! the sweeps the `sweeps` table lists. Partitions are scanned lazily, so a query reads
//! only the columns and sweeps it needs.

use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::error::{Error, Location, Msg, Opt, Result};
use crate::export::lake::{partition, partitions, sweep_of, Role, Source, PART, SWEEPS, SWEEP_COLUMNS, TABLES};
use crate::ingest::parquet::scan_parquet;
use crate::json::Json;
use crate::schema;

/// One sweep of a lake, in the lake's order: its `sweeps` row.
#[derive(Debug, Clone)]
pub struct SweepRow {
    pub id: String,
    pub created_at: String,
    /// The sweep's labels, by key, as text (absent keys are not listed).
    pub labels: Vec<(String, String)>,
    pub num_rollouts: i64,
    pub num_tasks: i64,
    pub num_agents: i64,
    pub task_set_fingerprint: String,
    /// The files the sweep's tables were computed from, as recorded when it was added.
    pub sources: Vec<Source>,
    /// The same labels as the values the `sweeps` table holds (an integer label is one).
    values: Vec<(String, Scalar)>,
}

/// An opened lake: its folder and its sweeps, oldest first (by `created_at`, then id).
pub struct Lake {
    pub dir: PathBuf,
    pub sweeps: Vec<SweepRow>,
    /// Every label key of any sweep, in the order first seen.
    pub label_keys: Vec<String>,
    /// Each label's type, as `label_keys` (a lake keeps one per label).
    label_types: Vec<DataType>,
}

/// Text of a one-row frame's column, when it has one.
fn text(df: &DataFrame, name: &str) -> Result<Option<String>> {
    match df.column(name) {
        Ok(c) => Ok(c.cast(&DataType::String)?.str()?.get(0).map(str::to_string)),
        Err(_) => Ok(None),
    }
}

/// The lake `dir` has no sweep: `why`, then how to add one.
fn no_sweep(dir: &Path, why: &str) -> Msg {
    Msg::default()
        .opt(Opt::text("lake", dir.display().to_string()))
        .text(why)
        .per_door("`rollstat export --lake DIR`", "`rollstat.export(..., lake=DIR)`")
        .text(")")
}

impl Lake {
    /// Opens the lake in `dir`: reads its `sweeps` rows.
    pub fn open(dir: &Path) -> Result<Lake> {
        if !dir.is_dir() {
            return Err(Error::refused(None, no_sweep(dir, ": no such folder (add a sweep with ")));
        }
        let mut sweeps = Vec::new();
        let mut label_keys: Vec<String> = Vec::new();
        let mut label_types: Vec<DataType> = Vec::new();
        for (id, file) in partitions(dir, SWEEPS) {
            let df = scan_parquet(&file)?.collect()?;
            let (mut labels, mut values) = (Vec::new(), Vec::new());
            for c in df.columns() {
                let k = c.name().as_str();
                if SWEEP_COLUMNS.contains(&k) {
                    continue;
                }
                if let Some(v) = text(&df, k)? {
                    if !label_keys.iter().any(|x| x == k) {
                        label_keys.push(k.to_string());
                        label_types.push(c.dtype().clone());
                    }
                    labels.push((k.to_string(), v));
                    values.push((k.to_string(), Scalar::new(c.dtype().clone(), c.get(0)?.into_static())));
                }
            }
            let created_at = text(&df, "created_at")?.unwrap_or_default();
            let count = |name: &str| -> Result<i64> {
                Ok(match df.column(name) {
                    Ok(c) => c.cast(&DataType::Int64)?.i64()?.get(0).unwrap_or(0),
                    Err(_) => 0,
                })
            };
            let listed = text(&df, "sources")?.unwrap_or_else(|| "[]".into());
            let sources = match crate::json::parse(listed.as_bytes()) {
                Ok(Json::Arr(items)) => items.iter().map(Source::from_json).collect::<Option<Vec<Source>>>(),
                _ => None,
            }
            .ok_or_else(|| {
                Error::bad(Location::file(&file).key("sources"), "expected a JSON array of {path, bytes, xxh3_128}")
            })?;
            sweeps.push(SweepRow {
                id,
                created_at,
                labels,
                num_rollouts: count("num_rollouts")?,
                num_tasks: count("num_tasks")?,
                num_agents: count("num_agents")?,
                task_set_fingerprint: text(&df, "task_set_fingerprint")?.unwrap_or_default(),
                sources,
                values,
            });
        }
        if sweeps.is_empty() {
            return Err(Error::refused(None, no_sweep(dir, ": holds no sweep (add one with ")));
        }
        sweeps.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.id.cmp(&b.id)));
        Ok(Lake { dir: dir.to_path_buf(), sweeps, label_keys, label_types })
    }

    /// The position (from 1) of each sweep in the lake's order.
    pub fn order(&self, id: &str) -> Option<usize> {
        self.sweeps.iter().position(|s| s.id == id).map(|i| i + 1)
    }

    /// `table` across the lake's sweeps, with `sweep`, `sweep_order` and the label
    /// columns; `None` when no sweep has the table.
    pub fn table(&self, table: &str) -> Result<Option<LazyFrame>> {
        let mut parts: Vec<(usize, String, LazyFrame, Schema)> = Vec::new();
        for (id, file) in partitions(&self.dir, table) {
            // Only sweeps with their row: a sweep being added is not there yet.
            let Some(order) = self.order(&id) else { continue };
            let mut lf = scan_parquet(&file)?;
            let schema = lf.collect_schema()?.as_ref().clone();
            parts.push((order, id, lf, schema));
        }
        if parts.is_empty() {
            return Ok(None);
        }
        parts.sort_by_key(|p| p.0);
        // The union of the columns, in the order first seen from the oldest sweep.
        let mut union = Schema::default();
        for (_, _, _, s) in &parts {
            for (name, dt) in s.iter() {
                if union.get(name).is_none_or(|old| *old == DataType::Null) {
                    union.with_column(name.clone(), dt.clone());
                }
            }
        }
        let mut frames = Vec::with_capacity(parts.len());
        for (order, id, lf, schema) in parts {
            let row = &self.sweeps[order - 1];
            let mut cols: Vec<Expr> = vec![
                lit(id.as_str()).alias("sweep"),
                lit(Scalar::new(DataType::Int64, AnyValue::Int64(order as i64))).alias("sweep_order"),
            ];
            // The sweeps table holds the labels itself; a label named like a column of the
            // table (in a sweep added later) gives way to the column.
            let labels = self.label_keys.iter().zip(&self.label_types);
            for (k, dt) in labels.filter(|(k, _)| table != SWEEPS && union.get(k.as_str()).is_none()) {
                let v = row.values.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
                cols.push(match v {
                    Some(v) => lit(v).alias(k.as_str()),
                    None => lit(NULL).cast(dt.clone()).alias(k.as_str()),
                });
            }
            for (name, dt) in union.iter() {
                cols.push(match schema.get(name) {
                    Some(have) if have == dt => col(name.clone()),
                    Some(_) => col(name.clone()).cast(dt.clone()),
                    None => lit(NULL).cast(dt.clone()).alias(name.clone()),
                });
            }
            frames.push(lf.select(cols));
        }
        let all = concat(frames, UnionArgs { rechunk: false, parallel: true, ..Default::default() })?;
        // A query that needs no column of the union (`COUNT(*)`) would have Polars count
        // the inputs' rows through a 128-bit cast this build does not carry: the filter
        // (true on every row) makes the union's consumer need a column.
        Ok(Some(all.filter(col("sweep_order").gt_eq(col("sweep_order").min()))))
    }

    /// Every table of the lake by name: the four result tables and `sweeps`.
    pub fn tables(&self) -> Result<Vec<(&'static str, LazyFrame)>> {
        let mut out = Vec::new();
        for name in TABLES.iter().chain([&SWEEPS]) {
            if let Some(lf) = self.table(name)? {
                out.push((*name, lf));
            }
        }
        Ok(out)
    }
}

/// The sweeps of the lake in `dir`, oldest first (by `created_at`, then id), each with
/// its labels, sizes (`num_rollouts`, `num_tasks`, `num_agents`) and recorded sources.
/// A missing folder or a lake with no sweep is a usage error naming the folder.
pub fn sweeps(dir: &Path) -> Result<Vec<SweepRow>> {
    Ok(Lake::open(dir)?.sweeps)
}

/// Whether a source file is still the file a sweep was computed from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceStatus {
    /// The same size and XXH3-128 checksum as recorded.
    Ok,
    /// No file at the recorded path (or it cannot be read: `why`).
    Missing { why: String },
    /// The file is there but is not the one recorded: its size, and its checksum when
    /// the size agrees (a file of another size is not read).
    Changed { bytes: u64, xxh3_128: Option<String> },
}

/// One source of a sweep as recorded in the lake, and what is at its path now.
#[derive(Debug, Clone)]
pub struct SweepSource {
    pub recorded: Source,
    pub status: SourceStatus,
}

impl SweepSource {
    /// Why the file cannot stand for the recorded one (`None` when it can): the path and
    /// what differs.
    pub fn problem(&self) -> Option<String> {
        let r = &self.recorded;
        match &self.status {
            SourceStatus::Ok => None,
            SourceStatus::Missing { why } => Some(format!("{}: missing ({why})", r.path)),
            SourceStatus::Changed { bytes, xxh3_128: None } => Some(format!(
                "{}: changed since the sweep was added ({bytes} bytes; the lake recorded {})",
                r.path, r.bytes
            )),
            SourceStatus::Changed { xxh3_128: Some(sum), .. } => Some(format!(
                "{}: changed since the sweep was added (same size, XXH3-128 {sum}; the lake recorded {})",
                r.path, r.xxh3_128
            )),
        }
    }
}

/// The sweep `sweep` of the lake in `dir`: its row, and the lake opened.
pub fn find_sweep(dir: &Path, sweep: &str) -> Result<(Lake, SweepRow)> {
    let lake = Lake::open(dir)?;
    match lake.sweeps.iter().find(|s| s.id == sweep) {
        Some(row) => {
            let row = row.clone();
            Ok((lake, row))
        }
        None => Err(Error::refused(
            None,
            Msg::default().opt(Opt::text("sweep", sweep.to_string())).text(format!(
                ": no such sweep in the lake {}; its sweeps are: {}",
                dir.display(),
                lake.sweeps.iter().map(|s| s.id.as_str()).collect::<Vec<_>>().join(", ")
            )),
        )),
    }
}

/// The source files of sweep `sweep` in the lake `dir`, each checked against what the
/// lake recorded: first by size, then (the same size) by XXH3-128 of its bytes; files are
/// checked in parallel. An unknown sweep is a usage error listing the lake's sweeps.
pub fn sweep_sources(dir: &Path, sweep: &str) -> Result<Vec<SweepSource>> {
    use rayon::prelude::*;
    let (_, row) = find_sweep(dir, sweep)?;
    Ok(row.sources.into_par_iter().map(check_source).collect())
}

/// For a lake's rollouts partition (`LAKE/rollouts/sweep=ID/part-0.parquet`): each
/// task's fingerprint as the sweep's `tasks` partition records it, so that a sweep read
/// from the lake's tables pairs tasks by what they ask as its rollouts file would.
/// `None` for any other file, or when the sweep's tasks table records no fingerprint.
pub fn partition_fingerprints(path: &Path) -> Result<Option<std::collections::HashMap<i64, u64>>> {
    let folder = path.parent().filter(|_| path.file_name().is_some_and(|n| n == PART));
    let Some(sweep) = folder.and_then(|f| f.file_name()).and_then(|n| n.to_str()).and_then(sweep_of) else {
        return Ok(None);
    };
    let Some(lake) = folder.and_then(Path::parent).filter(|t| t.ends_with("rollouts")).and_then(Path::parent) else {
        return Ok(None);
    };
    let tasks = partition(lake, "tasks", sweep);
    if !tasks.is_file() {
        return Ok(None);
    }
    // Only the two columns are read.
    let mut lf = scan_parquet(&tasks)?;
    let names = lf.collect_schema()?;
    if !(names.contains(schema::TASK_INDEX) && names.contains(schema::TASK_FINGERPRINT)) {
        return Ok(None);
    }
    let df = lf.select([col(schema::TASK_INDEX), col(schema::TASK_FINGERPRINT)]).collect()?;
    let (index, fps) = (df.column(schema::TASK_INDEX)?, df.column(schema::TASK_FINGERPRINT)?);
    let (index, fps) = (index.cast(&DataType::Int64)?, fps.cast(&DataType::String)?);
    let mut out = std::collections::HashMap::new();
    for (t, fp) in index.i64()?.iter().zip(fps.str()?.iter()) {
        if let (Some(t), Some(fp)) = (t, fp.and_then(|h| u64::from_str_radix(h, 16).ok())) {
            out.entry(t).or_insert(fp);
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// A sweep's files, each the file the sweep was computed from.
pub struct SweepFiles {
    pub rollouts: Vec<PathBuf>,
    pub inputs: Vec<PathBuf>,
    /// As recorded: the rollouts files first, then the inputs.
    pub sources: Vec<Source>,
}

/// The files of sweep `sweep` in the lake `dir` by what they hold, each checked by
/// [`sweep_sources`]. A missing or changed file is refused, naming each, and so is a
/// sweep added before sources recorded their role (which file holds what).
pub fn sweep_files(dir: &Path, sweep: &str) -> Result<SweepFiles> {
    files_of(dir, sweep, sweep_sources(dir, sweep)?)
}

/// The files of sweep `sweep` by what they hold, from its sources as [`sweep_sources`]
/// checked them; refused as [`sweep_files`] says.
pub fn files_of(dir: &Path, sweep: &str, checked: Vec<SweepSource>) -> Result<SweepFiles> {
    let problems: Vec<String> = checked.iter().filter_map(|s| s.problem()).collect();
    if !problems.is_empty() {
        return Err(Error::Mismatch(format!(
            "sweep {sweep} of the lake {}: {}; the files the sweep was computed from are what is read",
            dir.display(),
            problems.join("; ")
        )));
    }
    let sources: Vec<Source> = checked.into_iter().map(|s| s.recorded).collect();
    if sources.iter().any(|s| s.role.is_none()) {
        return Err(Error::Mismatch(format!(
            "sweep {sweep} of the lake {}: its sources do not say which file holds what ({}); add the sweep again \
             (a sweep records its files' roles since this version)",
            dir.display(),
            sources.iter().map(|s| s.path.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    let of = |role: Role| -> Vec<Source> { sources.iter().filter(|s| s.role == Some(role)).cloned().collect() };
    let (rollouts, inputs) = (of(Role::Rollouts), of(Role::Inputs));
    let paths = |v: &[Source]| -> Vec<PathBuf> { v.iter().map(|s| PathBuf::from(&s.path)).collect() };
    Ok(SweepFiles { rollouts: paths(&rollouts), inputs: paths(&inputs), sources: [rollouts, inputs].concat() })
}

/// What is at a recorded source's path now.
fn check_source(recorded: Source) -> SweepSource {
    let path = Path::new(&recorded.path);
    let status = match std::fs::metadata(path) {
        Err(e) => SourceStatus::Missing { why: e.to_string() },
        Ok(m) if !m.is_file() => SourceStatus::Missing { why: "not a file".into() },
        Ok(m) if m.len() != recorded.bytes => SourceStatus::Changed { bytes: m.len(), xxh3_128: None },
        Ok(m) => match crate::workflow::lake::checksum(path) {
            Err(e) => SourceStatus::Missing { why: e.to_string() },
            Ok(now) if now.xxh3_128 == recorded.xxh3_128 => SourceStatus::Ok,
            Ok(now) => SourceStatus::Changed { bytes: m.len(), xxh3_128: Some(now.xxh3_128) },
        },
    };
    SweepSource { recorded, status }
}
