//! The lake workflow: add one run's tables to a lake of sweeps (`export`, `aggregate`
//! and `profile` with `--lake`), with its `sweeps` row: when, from which files (sizes
//! and checksums), the task set's fingerprint and the user's labels.

use std::io::Read;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::error::{Error, Msg, Result};
use crate::export::lake::{self, Role, Source, Sweep};
use crate::ingest::{InputTable, RolloutTable};
use crate::metrics::failures::Failed;
use crate::metrics::warnings::Warnings;

/// Where a sweep goes and what it is called.
#[derive(Debug, Clone)]
pub struct LakeTarget {
    /// The lake's folder (created when missing).
    pub dir: PathBuf,
    /// The sweep's id; `None`: derived from the source files' contents, so adding the
    /// same files again replaces the sweep.
    pub sweep_id: Option<String>,
    /// `KEY=VALUE` labels, columns of the `sweeps` table and of every query over the lake.
    pub labels: Vec<(String, String)>,
    /// When the sweep is added, in microseconds since 1970-01-01 UTC (sweeps added in
    /// one second keep their order).
    pub made_at_us: u64,
}

impl LakeTarget {
    /// The lake `dir` with the sweep's id and `KEY=VALUE` labels, checked before any
    /// reading; the sweep is stamped now (`SOURCE_DATE_EPOCH` when set).
    pub fn new(dir: PathBuf, sweep_id: Option<String>, labels: &[String]) -> Result<LakeTarget> {
        if let Some(id) = &sweep_id {
            lake::check_sweep_id(id)?;
        }
        let mut parsed: Vec<(String, String)> = Vec::new();
        for l in labels {
            let (k, v) = lake::parse_label(l)?;
            if parsed.iter().any(|(o, _)| *o == k) {
                let msg = Msg::default().opt(lake::label_opt(format!("{k}=…"), false));
                return Err(Error::refused(None, msg.text(": given twice")));
            }
            parsed.push((k, v));
        }
        let made_at_us = match std::env::var_os("SOURCE_DATE_EPOCH") {
            Some(_) => super::made_at()? * 1_000_000,
            None => {
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
            }
        };
        Ok(LakeTarget { dir, sweep_id, labels: parsed, made_at_us })
    }
}

/// What adding a sweep did.
#[derive(Debug)]
pub struct LakeRun {
    pub sweep: String,
    pub lake: PathBuf,
    /// Whether the sweep was in the lake already (its files were replaced).
    pub replaced: bool,
    pub files: Vec<PathBuf>,
    pub warnings: Warnings,
}

impl LakeRun {
    /// The closing report's line: `Sweep ID added to the lake DIR`.
    pub fn summary(&self) -> String {
        let how = if self.replaced { "replaced in" } else { "added to" };
        format!("Sweep {} {how} the lake {} ({} files)", self.sweep, self.lake.display(), self.files.len())
    }
}

/// XXH3-128 of a file's bytes (the role is the caller's to set): hashed from a mapping of
/// the file, which copies nothing, else read in large blocks.
pub fn checksum(path: &Path) -> Result<Source> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::read(path, e))?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut bytes = 0u64;
    // SAFETY: a read-only mapping, as the readers map the same files.
    let map = f.metadata().is_ok_and(|m| m.is_file() && m.len() > 0).then(|| unsafe { memmap2::Mmap::map(&f) });
    if let Some(Ok(map)) = map {
        let _ = map.advise(memmap2::Advice::Sequential);
        // In blocks whose pages leave the mapping once hashed (they stay in the page
        // cache), so that hashing a large file does not hold it resident.
        const BLOCK: usize = 16 << 20;
        for at in (0..map.len()).step_by(BLOCK) {
            let len = BLOCK.min(map.len() - at);
            h.update(&map[at..at + len]);
            // SAFETY: nothing refers to these bytes once hashed; DontNeed on a read-only
            // file mapping only unmaps the pages. `at` is a multiple of the page size.
            let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at, len) };
        }
        bytes = map.len() as u64;
    } else {
        let mut buf = vec![0u8; 4 << 20];
        loop {
            let n = f.read(&mut buf).map_err(|e| Error::read(path, e))?;
            if n == 0 {
                break;
            }
            bytes += n as u64;
            h.update(&buf[..n]);
        }
    }
    let shown = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    Ok(Source { path: shown.display().to_string(), bytes, xxh3_128: format!("{:032x}", h.digest128()), role: None })
}

/// The sweep id of files whose contents are `sources` (in any order), labelled with
/// `agent` where rows name none: `s` and 12 hex digits.
fn derived_id(sources: &[Source], agent: Option<&str>) -> String {
    let mut keys: Vec<String> = sources.iter().map(|s| format!("{}:{}", s.bytes, s.xxh3_128)).collect();
    keys.sort();
    if let Some(a) = agent {
        keys.push(format!("agent={a}"));
    }
    format!("s{:012x}", xxhash_rust::xxh3::xxh3_64(keys.join("\n").as_bytes()) >> 16)
}

/// The task set's fingerprint: XXH3-64 over the sorted distinct task fingerprints of the
/// `tasks` table, as 16 hex digits.
fn task_set(tasks: &DataFrame) -> Result<String> {
    let mut prints: Vec<String> = match tasks.column("task_fingerprint") {
        Ok(c) => c.str()?.iter().flatten().map(str::to_string).collect(),
        Err(_) => Vec::new(),
    };
    prints.sort();
    prints.dedup();
    Ok(format!("{:016x}", xxhash_rust::xxh3::xxh3_64(prints.join("\n").as_bytes())))
}

/// Distinct values of an integer column.
fn distinct(df: &DataFrame, column: &str) -> Result<i64> {
    Ok(df.column(column).map_or(Ok(0), |c| c.n_unique())? as i64)
}

/// Adds a run already read (by `export`, `aggregate` or `profile`) to the lake: its
/// tables are built while the source files `read` are checksummed; `rollouts` is the
/// rollouts table when the run built it already (for its SQL metrics).
pub fn add_run(
    t: &RolloutTable,
    inputs: Option<&InputTable>,
    agent: Option<&str>,
    failed: &[Failed],
    rollouts: Option<DataFrame>,
    read: &[&Path],
    to: &LakeTarget,
) -> Result<LakeRun> {
    let (tables, sources) = rayon::join(
        || crate::metrics::tables::tables(t, inputs, agent, failed, rollouts),
        || read.iter().map(|p| checksum(p)).collect::<Result<Vec<Source>>>(),
    );
    let (tables, warnings) = tables?;
    // The inputs are the file the input table was read from; the others hold rollouts.
    let role = |p: &Path| if inputs.is_some_and(|i| i.path == p) { Role::Inputs } else { Role::Rollouts };
    let sources = sources.map(|s| s.into_iter().zip(read).map(|(s, p)| Source { role: Some(role(p)), ..s }).collect());
    add_tables(tables.named(), sources?, agent, read, to, warnings)
}

/// Adds built tables (by name, in the `export` order) read from `sources`.
pub fn add_tables(
    tables: Vec<(&'static str, DataFrame)>,
    sources: Vec<Source>,
    agent: Option<&str>,
    read: &[&Path],
    to: &LakeTarget,
    warnings: Warnings,
) -> Result<LakeRun> {
    let id = to.sweep_id.clone().unwrap_or_else(|| derived_id(&sources, agent));
    let get = |name: &str| tables.iter().find(|(n, _)| *n == name).map(|(_, df)| df);
    let (rollouts, tasks, agents) = (get("rollouts"), get("tasks"), get("agents"));
    let sweep = Sweep {
        id: id.clone(),
        created_at: {
            let iso = crate::export::dates::utc_iso((to.made_at_us / 1_000_000) as i64);
            format!("{}.{:06}+00:00", &iso[..19], to.made_at_us % 1_000_000)
        },
        task_set_fingerprint: tasks.map(task_set).transpose()?.unwrap_or_default(),
        num_rollouts: rollouts.map_or(0, |d| d.height() as i64),
        num_tasks: tasks.map(|d| distinct(d, "_ng_task_index")).transpose()?.unwrap_or(0),
        num_agents: agents.map_or(0, |d| d.height() as i64),
        sources,
        labels: to.labels.clone(),
    };
    let replaced = lake::partition(&to.dir, lake::SWEEPS, &id).is_file();
    let files = lake::add(&to.dir, &sweep, tables, read)?;
    Ok(LakeRun { sweep: id, lake: to.dir.clone(), replaced, files, warnings })
}
