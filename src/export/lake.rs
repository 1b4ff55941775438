//! The lake: one folder of Hive-partitioned Parquet that a team's sweeps accumulate in.
//!
//! ```text
//! LAKE/rollouts/sweep=<id>/part-0.parquet
//! LAKE/tasks/sweep=<id>/part-0.parquet
//! LAKE/agents/sweep=<id>/part-0.parquet
//! LAKE/repeats/sweep=<id>/part-0.parquet
//! LAKE/sweeps/sweep=<id>/part-0.parquet     one row: when, from what, the labels
//! ```
//!
//! The files hold no `sweep` column: the partition folder names it, as Hive-style readers
//! (DuckDB, pyarrow datasets, Polars, Spark) expect. A sweep's files are written aside
//! and renamed into place (see [`super::atomic`]), its `sweeps` row last: a sweep is in
//! the lake once its row is, and a reader never sees half a file. The next writer removes
//! what a killed one left (see [`remove_stale`]). Adding a sweep whose
//! id is there already replaces its files. In the lake every number of the `rollouts`
//! table is a double (the `_ng_*` indexes stay integers), so a field that is whole in one
//! sweep and fractional in the next keeps one type; any other change of a column's type
//! is refused, naming both sweeps. A label keeps the type of its first sweep: an integer
//! (`step=500`), a double (`lr=0.5`) or text; a later whole value of a double label is a
//! double, a number given to a text label is text, and text (or a fraction) given to an
//! integer label is refused as a changed column type.

use std::fs;
use std::path::{Path, PathBuf};

use polars::prelude::*;

use super::atomic::OutputSet;
use super::parquet::write_parquet;
use crate::error::{Error, Msg, Opt, Result};
use crate::json::Json;

/// The tables of a sweep, in the order they are written; the `sweeps` row comes last.
pub const TABLES: [&str; 4] = ["rollouts", "tasks", "agents", "repeats"];
/// The table with one row per sweep.
pub const SWEEPS: &str = "sweeps";
/// The one file of a partition.
pub const PART: &str = "part-0.parquet";
/// The columns of the `sweeps` table besides the labels (and the partition's `sweep`).
pub const SWEEP_COLUMNS: [&str; 7] =
    ["created_at", "rollstat_version", "task_set_fingerprint", "num_rollouts", "num_tasks", "num_agents", "sources"];

/// The file of `table`'s partition for `sweep`.
pub fn partition(lake: &Path, table: &str, sweep: &str) -> PathBuf {
    lake.join(table).join(format!("sweep={sweep}")).join(PART)
}

/// The sweep a partition folder name holds (`sweep=<id>`).
pub fn sweep_of(folder_name: &str) -> Option<&str> {
    folder_name.strip_prefix("sweep=").filter(|id| valid_id(id))
}

/// Whether `id` can name a sweep: letters, digits, `.`, `_`, `-`, not starting with `.`.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Refuses a sweep id a partition folder cannot carry.
pub fn check_sweep_id(id: &str) -> Result<()> {
    if valid_id(id) {
        Ok(())
    } else {
        let msg = Msg::default().opt(Opt::quoted("sweep_id", id.to_string()));
        Err(Error::refused(
            None,
            msg.text(": use letters, digits, '.', '_' and '-' (at most 128, not starting with '.')"),
        ))
    }
}

/// The option `--label` (`labels` in Python) with `value`, quoted when `quoted`.
pub fn label_opt(value: String, quoted: bool) -> Opt {
    if quoted { Opt::quoted("labels", value) } else { Opt::text("labels", value) }.flag("label")
}

/// Parses `KEY=VALUE` of `--label`: the key becomes a column, so it is an identifier.
pub fn parse_label(s: &str) -> Result<(String, String)> {
    let bad =
        |why: &str| Error::refused(None, Msg::default().opt(label_opt(s.to_string(), true)).text(format!(": {why}")));
    let (k, v) = s.split_once('=').ok_or_else(|| bad("give KEY=VALUE"))?;
    let ok = k.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(bad("the key is a column name: a letter or '_', then letters, digits or '_'"));
    }
    if k == "sweep" || SWEEP_COLUMNS.contains(&k) || k == "sweep_order" {
        return Err(bad(&format!("`{k}` is a column of the sweeps table already")));
    }
    Ok((k.to_string(), v.to_string()))
}

/// One source file of a sweep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub path: String,
    pub bytes: u64,
    /// XXH3-128 of the file's bytes, as 32 hex digits.
    pub xxh3_128: String,
    /// What the file holds; `None` where that was not recorded.
    pub role: Option<Role>,
}

/// What a source file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Rollouts (results), one of the files a run was written as.
    Rollouts,
    /// The run's materialized inputs.
    Inputs,
}

impl Role {
    /// The role as the `sources` JSON writes it: `rollouts` or `inputs`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Rollouts => "rollouts",
            Role::Inputs => "inputs",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        [Role::Rollouts, Role::Inputs].into_iter().find(|r| r.as_str() == s)
    }
}

impl Source {
    /// The source as a JSON object: `path`, `bytes`, `xxh3_128` and, when known, `role`.
    pub fn to_json(&self) -> Json {
        let mut o = Json::obj();
        o.set_all([
            ("path", Json::Str(self.path.clone())),
            ("bytes", Json::Int(self.bytes as i64)),
            ("xxh3_128", Json::Str(self.xxh3_128.clone())),
        ]);
        if let Some(r) = self.role {
            o.set("role", Json::Str(r.as_str().into()));
        }
        o
    }

    /// A source from its JSON object ([`Source::to_json`]); `None` when a member is
    /// missing or of another type.
    pub fn from_json(v: &Json) -> Option<Source> {
        let text = |k: &str| v.get(k).and_then(|s| s.as_str().map(str::to_string));
        Some(Source {
            path: text("path")?,
            bytes: match v.get("bytes")? {
                Json::Int(n) if *n >= 0 => *n as u64,
                _ => return None,
            },
            xxh3_128: text("xxh3_128")?,
            role: text("role").and_then(|r| Role::parse(&r)),
        })
    }
}

/// The `sweeps` row of one sweep.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub id: String,
    /// When it was added, `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`.
    pub created_at: String,
    pub task_set_fingerprint: String,
    pub num_rollouts: i64,
    pub num_tasks: i64,
    pub num_agents: i64,
    pub sources: Vec<Source>,
    /// The user's labels, in the order given.
    pub labels: Vec<(String, String)>,
}

/// A label's value written as a JSON number (`-3`, `500`, `0.5`, `1e3`; no sign `+`, no
/// leading zeros, nothing around it): an integer when whole and within 64 bits, else a
/// double. `None` for anything else, which stays text.
fn label_number(v: &str) -> Option<Json> {
    let b = v.as_bytes();
    let digits = |i: &mut usize| {
        let from = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i > from
    };
    let mut i = usize::from(b.first() == Some(&b'-'));
    let int_from = i;
    if !digits(&mut i) || (b[int_from] == b'0' && i - int_from > 1) {
        return None;
    }
    let mut whole = true;
    if b.get(i) == Some(&b'.') {
        i += 1;
        whole = false;
        if !digits(&mut i) {
            return None;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        whole = false;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if !digits(&mut i) {
            return None;
        }
    }
    if i != b.len() {
        return None;
    }
    match v.parse::<i64>() {
        Ok(n) if whole => Some(Json::Int(n)),
        _ => v.parse::<f64>().ok().filter(|x| x.is_finite()).map(Json::Float),
    }
}

/// The column of label `key` with value `v`, typed as the label is in the lake (`old`:
/// its type in another sweep, if any) or, for a new label, as its value reads. A value
/// the lake's type cannot hold keeps its own type, which the type check then refuses.
fn label_column(key: &str, v: &str, old: Option<&DataType>) -> Column {
    let name: PlSmallStr = key.into();
    match (label_number(v), old) {
        (_, Some(DataType::String)) | (None, _) => Column::new(name, [v]),
        (Some(Json::Int(n)), Some(DataType::Float64)) => Column::new(name, [n as f64]),
        (Some(Json::Int(n)), _) => Column::new(name, [n]),
        (Some(Json::Float(x)), _) => Column::new(name, [x]),
        (Some(_), _) => Column::new(name, [v]),
    }
}

/// Each label's type in the other sweeps of the lake (the first sweep that has it).
fn label_types(lake: &Path, sweep: &Sweep) -> Result<Vec<Option<DataType>>> {
    let mut types: Vec<Option<DataType>> = vec![None; sweep.labels.len()];
    for (id, file) in partitions(lake, SWEEPS) {
        if id == sweep.id || types.iter().all(Option::is_some) {
            continue;
        }
        let schema = crate::ingest::parquet::scan_parquet(&file)?.collect_schema()?;
        for ((k, _), t) in sweep.labels.iter().zip(types.iter_mut()) {
            if t.is_none() {
                *t = schema.get(k.as_str()).filter(|d| **d != DataType::Null).cloned();
            }
        }
    }
    Ok(types)
}

impl Sweep {
    /// The row as a one-row frame: the fixed columns, then each label, typed as
    /// [`label_column`] says (`types`: each label's type in the lake, if it has one).
    fn frame(&self, types: &[Option<DataType>]) -> Result<DataFrame> {
        let sources = Json::Arr(self.sources.iter().map(Source::to_json).collect());
        let mut text = Vec::new();
        crate::json::write_compact(&mut text, &sources);
        let mut cols = vec![
            Column::new("created_at".into(), [self.created_at.as_str()]),
            Column::new("rollstat_version".into(), [env!("CARGO_PKG_VERSION")]),
            Column::new("task_set_fingerprint".into(), [self.task_set_fingerprint.as_str()]),
            Column::new("num_rollouts".into(), [self.num_rollouts]),
            Column::new("num_tasks".into(), [self.num_tasks]),
            Column::new("num_agents".into(), [self.num_agents]),
            Column::new("sources".into(), [String::from_utf8_lossy(&text).into_owned()]),
        ];
        for ((k, v), old) in self.labels.iter().zip(types) {
            cols.push(label_column(k, v, old.as_ref()));
        }
        Ok(DataFrame::new(1, cols)?)
    }
}

/// The rollouts table as the lake keeps it: every number a double but the `_ng_*`
/// indexes.
fn lake_rollouts(df: DataFrame) -> Result<DataFrame> {
    let casts: Vec<Expr> = df
        .columns()
        .iter()
        .filter(|c| c.dtype().is_primitive_numeric() && !c.name().starts_with("_ng_"))
        .map(|c| col(c.name().clone()).cast(DataType::Float64))
        .collect();
    if casts.is_empty() {
        return Ok(df);
    }
    Ok(df.lazy().with_columns(casts).collect()?)
}

/// Every Parquet file of the lake, `sweeps` included (none of which an output may be).
pub fn files(lake: &Path) -> Vec<PathBuf> {
    TABLES.iter().chain([&SWEEPS]).flat_map(|t| partitions(lake, t).into_iter().map(|(_, f)| f)).collect()
}

/// The sweeps with a partition of `table` in the lake, each with its file.
pub fn partitions(lake: &Path, table: &str) -> Vec<(String, PathBuf)> {
    let Ok(entries) = fs::read_dir(lake.join(table)) else { return Vec::new() };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let id = sweep_of(&name)?.to_string();
            let file = e.path().join(PART);
            file.is_file().then_some((id, file))
        })
        .collect();
    out.sort();
    out
}

/// Refuses a column whose type differs from the one it has in another sweep of the lake
/// (a column missing from a frame, or all null, is no conflict). Returns the columns the
/// other sweeps' partitions of `table` have, each with a sweep that has it.
fn check_types(lake: &Path, table: &str, sweep: &str, df: &DataFrame) -> Result<Vec<(String, String)>> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for (other, file) in partitions(lake, table) {
        if other == sweep {
            continue;
        }
        let schema = crate::ingest::parquet::scan_parquet(&file)?.collect_schema()?;
        for c in df.columns() {
            let Some(old) = schema.get(c.name().as_str()) else { continue };
            let new = c.dtype();
            if old != new && *old != DataType::Null && *new != DataType::Null {
                return Err(Error::Mismatch(format!(
                    "{}: column `{}` of the {table} table is {new} in sweep {sweep} but {old} in sweep {other}; \
                     a column keeps one type across the lake (rename the field, or add the sweep to another lake)",
                    lake.display(),
                    c.name()
                )));
            }
        }
        for name in schema.iter_names() {
            if !seen.iter().any(|(n, _)| n == name.as_str()) {
                seen.push((name.to_string(), other.clone()));
            }
        }
    }
    Ok(seen)
}

/// Refuses a label whose key is a column of a table, in this sweep or another, and a
/// column of this sweep that another sweep has as a label: queries over the lake add
/// the labels to every table as columns. `columns`: per table, the other sweeps'
/// columns (with a sweep that has each).
fn check_labels(
    lake: &Path,
    sweep: &Sweep,
    tables: &[(&str, DataFrame)],
    columns: &[(&str, Vec<(String, String)>)],
) -> Result<()> {
    for (k, _) in &sweep.labels {
        if let Some((t, _)) = tables.iter().find(|(_, df)| df.column(k).is_ok()) {
            let msg = Msg::default().opt(label_opt(format!("{k}=…"), false));
            return Err(Error::refused(
                None,
                msg.text(format!(": `{k}` is a column of the sweep's {t} table; choose another key")),
            ));
        }
        for (t, cols) in columns {
            if let Some((_, other)) = cols.iter().find(|(n, _)| n == k) {
                let msg = Msg::default().opt(label_opt(format!("{k}=…"), false)).text(format!(
                    ": `{k}` is a column of the {t} table of sweep {other} in the lake; choose another key"
                ));
                return Err(Error::refused(None, msg));
            }
        }
    }
    for (id, file) in partitions(lake, SWEEPS) {
        if id == sweep.id {
            continue;
        }
        let schema = crate::ingest::parquet::scan_parquet(&file)?.collect_schema()?;
        let labels = schema.iter_names().filter(|n| !SWEEP_COLUMNS.contains(&n.as_str()));
        for label in labels {
            if let Some((t, _)) = tables.iter().find(|(_, df)| df.column(label.as_str()).is_ok()) {
                return Err(Error::Mismatch(format!(
                    "{}: sweep {id} has a label `{label}`, which this sweep's {t} table has as a column; \
                     rename the field, or add the sweep to another lake",
                    lake.display()
                )));
            }
        }
    }
    Ok(())
}

/// What a writer that stopped before the end left: hidden temporaries of a process that
/// is gone, and the files of a sweep whose `sweeps` row never landed (killed while
/// renaming), once they have been in place for a minute (a live writer renames all of a
/// sweep's files within milliseconds; the age is the file's status change, which the
/// rename sets). Empty partition folders stay: a live writer may be filling one for a
/// long while (its temporary has no name there yet), and readers find no file in them.
fn remove_stale(lake: &Path) {
    use std::os::unix::fs::MetadataExt;
    let landed: Vec<String> = partitions(lake, SWEEPS).into_iter().map(|(id, _)| id).collect();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    for table in TABLES {
        for (id, part) in partitions(lake, table) {
            let placed = fs::metadata(&part).map_or(now, |m| m.ctime());
            if !landed.contains(&id) && now - placed >= 60 {
                let _ = fs::remove_file(&part);
            }
        }
    }
    for table in TABLES.iter().chain([&SWEEPS]) {
        let Ok(entries) = fs::read_dir(lake.join(table)) else { continue };
        for e in entries.flatten() {
            if e.file_name().to_str().and_then(sweep_of).is_some() && e.path().is_dir() {
                super::atomic::sweep_stale(&e.path(), PART);
            }
        }
    }
}

/// Adds one sweep's tables to the lake (creating it when missing), replacing the sweep's
/// files when it is there already; returns the files written. `inputs` are the files the
/// tables were read from, which no output may be.
pub fn add(
    lake: &Path,
    sweep: &Sweep,
    tables: Vec<(&'static str, DataFrame)>,
    inputs: &[&Path],
) -> Result<Vec<PathBuf>> {
    if lake.exists() && !lake.is_dir() {
        let msg = Msg::default().opt(Opt::text("lake", lake.display().to_string()));
        return Err(Error::refused(None, msg.text(": is not a folder")));
    }
    let mut frames = Vec::with_capacity(TABLES.len() + 1);
    let mut columns = Vec::with_capacity(TABLES.len());
    for (name, df) in tables {
        let df = if name == "rollouts" { lake_rollouts(df)? } else { df };
        columns.push((name, check_types(lake, name, &sweep.id, &df)?));
        frames.push((name, df));
    }
    check_labels(lake, sweep, &frames, &columns)?;
    let row = sweep.frame(&label_types(lake, sweep)?)?;
    check_types(lake, SWEEPS, &sweep.id, &row)?;
    frames.push((SWEEPS, row));
    remove_stale(lake);
    let mut out = OutputSet::new(inputs);
    for (name, mut df) in frames {
        let path = partition(lake, name, &sweep.id);
        let folder = path.parent().expect("a partition file is in its folder");
        fs::create_dir_all(folder).map_err(|e| Error::write(folder, e))?;
        let mut w = out.create(&path)?;
        write_parquet(&mut df, &path, &mut w)?;
    }
    out.commit()
}
