//! The select workflow: the next training set from a reward profile. Tasks are chosen
//! from one run's `tasks` table (with the dataset's own fields beside it) by a SQL
//! predicate, a band of mean reward, the zero-variance rule, per-group quotas and
//! seeded weighted sampling; each chosen task's first line in the materialized inputs
//! is copied as bytes, in the file's order, with a manifest beside it.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use polars::prelude::*;
use rayon::prelude::*;

use super::read_both;
use crate::error::{Error, Location, Msg, Opt, Result};
use crate::export::atomic::OutputSet;
use crate::export::lake::{Role, Source};
use crate::ingest::InputTable;
use crate::json::Json;
use crate::metrics::warnings::Warnings;

/// The column that names each task's first line in the inputs (1-based).
pub const INPUT_LINE: &str = "_input_line";

/// `--sample`: how many tasks to draw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sample {
    Count(usize),
    /// A share of the candidates left after the filters and quotas, in (0, 1].
    Fraction(f64),
}

impl Sample {
    /// `N` (a whole number) or `FRAC` (a number with a point, in (0, 1]).
    pub fn parse(s: &str) -> std::result::Result<Sample, String> {
        if !s.contains(['.', 'e', 'E']) {
            return s.parse().map(Sample::Count).map_err(|_| format!("{s:?}: expected a whole number or a fraction"));
        }
        match s.parse::<f64>() {
            Ok(f) if f > 0.0 && f <= 1.0 => Ok(Sample::Fraction(f)),
            _ => Err(format!("{s:?}: expected a whole number or a fraction in (0, 1]")),
        }
    }
}

/// What is written: the input lines, or the selected `tasks` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SelectFormat {
    #[default]
    Jsonl,
    Parquet,
}

/// Which tasks to select, from which files, and where to write them.
#[derive(Debug, Clone, Default)]
pub struct SelectConfig {
    /// The run's files; with `sweep`, the sweep's sources in the lake instead.
    pub rollouts: Vec<PathBuf>,
    pub inputs: PathBuf,
    /// A lake of sweeps: its `tasks` table is `lake_tasks` in the predicate and weight.
    pub lake: Option<PathBuf>,
    /// A sweep of `lake` to select from: its source files, checked by size and checksum.
    pub sweep: Option<String>,
    /// Label for rollouts that name no agent.
    pub agent: Option<String>,
    /// The run whose tasks are selected (default: the only one).
    pub run: Option<String>,
    /// SQL predicate over the `tasks` table.
    pub predicate: Option<String>,
    /// Inclusive band of `mean/reward`.
    pub band: Option<(f64, f64)>,
    pub drop_zero_variance: bool,
    pub per: Option<String>,
    pub max: Option<usize>,
    pub sample: Option<Sample>,
    /// SQL expression: each task's sampling weight.
    pub weight: Option<String>,
    pub seed: Option<u64>,
    pub strip_ng: bool,
    pub format: SelectFormat,
    pub out: PathBuf,
}

impl SelectConfig {
    /// Whether the order tasks are taken in is random (seeded): with `--sample`,
    /// `--weight` or `--seed`; else the inputs' order.
    fn random(&self) -> bool {
        self.sample.is_some() || self.weight.is_some() || self.seed.is_some()
    }
}

/// Which columns of the `tasks` table and of the dataset's fields a selection reads:
/// all of them for a Parquet output; else `agent`, `_ng_task_index`, `_input_line`, the
/// columns of `--band`, `--drop-zero-variance` and `--per`, and every name that
/// `--where` or `--weight` spells (ignoring case: a superset of what the SQL reads).
struct Needs {
    all: bool,
    exact: Vec<String>,
    /// `--where` and `--weight`, in lower case.
    sql: String,
}

impl Needs {
    fn of(c: &SelectConfig) -> Needs {
        let mut exact = vec![INPUT_LINE.to_string()];
        if c.band.is_some() {
            exact.push("mean/reward".into());
        }
        if c.drop_zero_variance {
            exact.extend(["max/reward".into(), "min/reward".into()]);
        }
        exact.extend(c.per.clone());
        let sql = [&c.predicate, &c.weight].into_iter().flatten().map(|t| t.to_lowercase()).collect::<Vec<_>>();
        Needs { all: c.format == SelectFormat::Parquet, exact, sql: sql.join("\n") }
    }

    fn keep(&self, name: &str) -> bool {
        self.all || self.exact.iter().any(|e| e == name) || self.sql.contains(&name.to_lowercase())
    }
}

/// What a selection did.
#[derive(Debug)]
pub struct SelectRun {
    pub files: Vec<PathBuf>,
    pub run: String,
    /// Tasks of the run, tasks left after the filters, tasks selected.
    pub tasks: usize,
    pub candidates: usize,
    pub selected: usize,
    /// The selected rows of the `tasks` table (with the dataset's fields), in file order.
    pub table: DataFrame,
    pub warnings: Warnings,
}

/// The manifest's path beside the output `out`: `FILE.manifest.json`.
pub fn manifest_path(out: &Path) -> PathBuf {
    let mut s = out.as_os_str().to_owned();
    s.push(".manifest.json");
    PathBuf::from(s)
}

/// Selects tasks and writes their input lines (or `tasks` rows) and the manifest.
pub fn select(c: &SelectConfig) -> Result<SelectRun> {
    if !crate::export::atomic::is_file_output(&c.out) {
        let msg = Msg::default().opt(Opt::text("out", c.out.display().to_string()));
        return Err(Error::refused(None, msg.text(": give a file (the manifest is written beside it)")));
    }
    let compression = Compress::of(&c.out);
    if c.format == SelectFormat::Parquet && compression != Compress::None {
        let msg = Msg::default().opt(Opt::text("out", c.out.display().to_string()));
        return Err(Error::refused(
            None,
            msg.text(": Parquet is compressed inside the file; drop the .gz/.zst ending"),
        ));
    }
    let (resolved, checked) = match (&c.lake, &c.sweep) {
        (Some(lake), Some(sweep)) => {
            let (rollouts, inputs, sources) = sweep_files(lake, sweep)?;
            (SelectConfig { rollouts, inputs, ..c.clone() }, Some(sources))
        }
        (None, Some(sweep)) => {
            let msg = Msg::default().opt(Opt::text("sweep", sweep.clone())).text(": give the lake with ");
            return Err(Error::refused(None, msg.opt(Opt::value("lake", "DIR"))));
        }
        _ => (c.clone(), None),
    };
    let c = &resolved;
    let mut read: Vec<&Path> = c.rollouts.iter().map(PathBuf::as_path).collect();
    read.push(&c.inputs);
    let mut out = OutputSet::new(&read);
    let manifest = manifest_path(&c.out);
    out.check(&c.out)?;
    out.check(&manifest)?;
    let lake = lake_tasks(c)?;

    let (built, sources) = rayon::join(
        || candidates(c),
        || match &checked {
            Some(s) => Ok(s.clone()),
            None => read.iter().map(|p| super::lake::checksum(p)).collect::<Result<Vec<Source>>>(),
        },
    );
    let (all, inputs, run, warnings) = built?;
    let mut sources = sources?;
    if checked.is_none() {
        sources[..c.rollouts.len()].iter_mut().for_each(|s| s.role = Some(Role::Rollouts));
        sources[c.rollouts.len()].role = Some(Role::Inputs);
    }
    let tasks = all.height();
    let filtered = filter(c, all, lake.as_ref())?;
    let candidates = filtered.height();
    let (rows, before, after) = choose(c, &filtered, lake.as_ref())?;
    let mut table = filtered.take(&IdxCa::from_vec("".into(), rows.iter().map(|&r| r as IdxSize).collect()))?;
    let lines = line_column(&table)?;

    let t0 = std::time::Instant::now();
    let mut w = out.create(&c.out)?;
    match c.format {
        SelectFormat::Parquet => crate::export::parquet::write_parquet(&mut table, &c.out, &mut w)?,
        SelectFormat::Jsonl => {
            let map = crate::ingest::lines::map_whole(&inputs.path)?;
            let mut buf = Vec::with_capacity(1 << 20);
            let mut enc = compression.writer(&mut w).map_err(|e| Error::write(&c.out, e))?;
            for l in &lines {
                // Rows are in file order: their line numbers increase.
                let r = inputs.line.binary_search(l).expect("a selected line is an input row");
                let line = crate::ingest::inputs::row_in(&inputs, &map, r)?;
                if c.strip_ng {
                    strip_ng(line, &mut buf).map_err(|m| Error::bad(Location::line(&inputs.path, *l), m))?;
                } else {
                    buf.extend_from_slice(line);
                }
                buf.push(b'\n');
                if buf.len() >= 1 << 20 {
                    enc.write_all(&buf).map_err(|e| Error::write(&c.out, e))?;
                    buf.clear();
                }
            }
            enc.write_all(&buf).map_err(|e| Error::write(&c.out, e))?;
            enc.finish().map_err(|e| Error::write(&c.out, e))?;
            w.finish().map_err(|e| Error::write(&c.out, e))?;
        }
    }
    drop(w);
    let doc = manifest_json(c, &run, &sources, (tasks, candidates, rows.len()), &before, &after);
    let mut text = Vec::new();
    crate::json::write::write_indented(&mut text, &doc, 0);
    text.push(b'\n');
    out.add(&manifest, &text)?;
    let files = out.commit()?;
    crate::trace::trace("write", t0);
    Ok(SelectRun { files, run, tasks, candidates, selected: rows.len(), table, warnings })
}

/// The run's `tasks` table with its first input line (`_input_line`) and the dataset's
/// own fields; the inputs table; the run's label; the tables' warnings.
fn candidates(c: &SelectConfig) -> Result<(DataFrame, InputTable, String, Warnings)> {
    let needs = Needs::of(c);
    let keep = |name: &str| needs.keep(name);
    let opts = crate::ingest::rollouts::ReadOptions {
        fingerprints: keep(crate::schema::TASK_FINGERPRINT),
        ..Default::default()
    };
    let (t, inputs) = read_both(&c.rollouts, Some(&c.inputs), opts)?;
    let inputs = inputs.expect("inputs were given");
    let t0 = std::time::Instant::now();
    let failed = super::aggregate::failures_beside(&c.rollouts, &t)?.map(|c| c.failures).unwrap_or_default();
    let ((tasks, _, _), warnings) =
        crate::metrics::tables::levels_with(&t, Some(&inputs), c.agent.as_deref(), &failed, &keep)?;
    crate::trace::trace("tasks table", t0);
    let labels: Vec<String> = {
        let mut seen = Vec::new();
        for l in tasks.column(crate::schema::AGENT)?.str()?.iter().flatten() {
            if !seen.iter().any(|s: &String| s == l) {
                seen.push(l.to_string());
            }
        }
        seen
    };
    let run = match (&c.run, labels.as_slice()) {
        (Some(r), _) if labels.contains(r) => r.clone(),
        (Some(r), _) => {
            let msg = Msg::default().opt(Opt::text("run", r.clone()));
            return Err(Error::refused(
                None,
                msg.text(format!(": no such run in the rollouts; the runs are: {}", labels.join(", "))),
            ));
        }
        (None, [one]) => one.clone(),
        (None, []) => String::new(),
        (None, many) => {
            let msg = Msg::default()
                .text(format!(
                    "the rollouts hold {} runs ({}); name the one whose tasks are selected with ",
                    many.len(),
                    many.join(", ")
                ))
                .opt(Opt::value("run", "NAME"));
            return Err(Error::refused(None, msg));
        }
    };
    let tasks = tasks.lazy().filter(col(crate::schema::AGENT).eq(lit(run.as_str()))).collect()?;
    let rows = first_rows(&t, &inputs, &run, &tasks)?;
    let mut tasks = tasks;
    let line: Int64Chunked = rows.iter().map(|&r| Some(inputs.line[r] as i64)).collect();
    tasks.with_column(line.with_name(INPUT_LINE.into()).into_column())?;
    let t0 = std::time::Instant::now();
    let fields = dataset_fields(&inputs, &rows, &tasks, &keep)?;
    let tasks = tasks.hstack(fields.columns())?;
    crate::trace::trace("dataset fields", t0);
    Ok((tasks, inputs, run, warnings))
}

/// Each task's first row in the inputs among the rows of the run `run` (the rows that
/// name what its rollouts' input rows name); the task's first row at all when none of
/// its rollouts has one.
fn first_rows(
    t: &crate::ingest::RolloutTable,
    inputs: &InputTable,
    run: &str,
    tasks: &DataFrame,
) -> Result<Vec<usize>> {
    let runs = crate::ingest::labels::runs(t, Some(inputs));
    // (server, agent) of one input row of each task's rollouts in the run.
    type Fast = foldhash::fast::RandomState;
    let mut named: HashMap<i64, (u32, u32), Fast> = HashMap::default();
    let mut near = 0;
    for k in 0..t.len() {
        if runs.label_of(k) != Some(run) || named.contains_key(&t.task[k]) {
            continue;
        }
        if let Some(r) = inputs.row_near(near, t.task[k], t.rollout[k]) {
            near = r;
            named.insert(t.task[k], (inputs.server[r], inputs.agent[r]));
        }
    }
    let mut first: HashMap<(i64, u32, u32), usize, Fast> = HashMap::default();
    let mut first_any: HashMap<i64, usize, Fast> = HashMap::default();
    for r in 0..inputs.len() {
        first_any.entry(inputs.task[r]).or_insert(r);
        first.entry((inputs.task[r], inputs.server[r], inputs.agent[r])).or_insert(r);
    }
    let index = tasks.column(crate::schema::TASK_INDEX)?.cast(&DataType::Int64)?;
    index
        .i64()?
        .iter()
        .map(|task| {
            let task = task.unwrap_or(i64::MIN);
            named
                .get(&task)
                .and_then(|&(s, a)| first.get(&(task, s, a)))
                .or_else(|| first_any.get(&task))
                .copied()
                .ok_or_else(|| {
                    Error::bad(
                        Location::file(&inputs.path).key("_ng_task_index"),
                        format!("task {task} of run {run} has no row in the inputs"),
                    )
                })
        })
        .collect()
}

/// The dataset's own top-level scalar fields of each task's first line (`rows`) that
/// `keep` accepts, as columns: not the `_ng_*` keys, and not a name the tasks table has
/// already. Objects and arrays are skipped as the line is scanned, not built.
fn dataset_fields(
    inputs: &InputTable,
    rows: &[usize],
    tasks: &DataFrame,
    keep: &(dyn Fn(&str) -> bool + Sync),
) -> Result<DataFrame> {
    use crate::json::scan::{decode_str, Scalar, Scanner};
    let map = crate::ingest::lines::map_whole(&inputs.path)?;
    let have: std::collections::HashSet<&str> = tasks.get_column_names().into_iter().map(|s| s.as_str()).collect();
    let objects: Vec<Vec<(String, Json)>> = rows
        .par_iter()
        .map(|&r| {
            let line = crate::ingest::inputs::row_in(inputs, &map, r)?;
            let at = |offset: usize, msg: &str| {
                Error::bad(
                    Location::line(&inputs.path, inputs.line[r]),
                    format!("invalid JSON: {msg} (at byte {} of the line)", offset + 1),
                )
            };
            let mut s = Scanner::new(line);
            let mut out = Vec::new();
            if s.peek() != Some(b'{') {
                return Ok(out);
            }
            s.i += 1;
            let mut first = true;
            while let Some(k) = s.next_key(&mut first).map_err(|e| at(e.offset, e.msg))? {
                let key = decode_str(k.0, k.1).map_err(|m| at(s.i, m))?;
                let v = s.value().map_err(|e| at(e.offset, e.msg))?;
                if key.starts_with("_ng_") || have.contains(key.as_str()) || !keep(&key) {
                    continue;
                }
                let v = match v {
                    Scalar::Container { .. } => continue,
                    Scalar::Null => Json::Null,
                    Scalar::Bool(b) => Json::Bool(b),
                    Scalar::Int(i) => Json::Int(i),
                    Scalar::Float(x) => Json::Float(x),
                    Scalar::Str(raw, esc) => Json::Str(decode_str(raw, esc).map_err(|m| at(s.i, m))?),
                };
                out.push((key, v));
            }
            Ok(out)
        })
        .collect::<Result<_>>()?;
    let mut df = crate::metrics::tables::objects_to_frame(&objects)?;
    if df.width() == 0 {
        df = DataFrame::empty_with_height(rows.len());
    }
    Ok(df)
}

/// The files of sweep `sweep` in the lake, each checked against what the lake recorded:
/// (rollouts, inputs, sources). A missing or changed file, or a sweep added without its
/// inputs, is refused.
fn sweep_files(lake: &Path, sweep: &str) -> Result<(Vec<PathBuf>, PathBuf, Vec<Source>)> {
    let f = crate::query::lake::sweep_files(lake, sweep)?;
    match (f.rollouts.is_empty(), f.inputs.as_slice()) {
        (false, [one]) => Ok((f.rollouts.clone(), one.clone(), f.sources)),
        _ => {
            let msg = Msg::default().text(format!(
                "sweep {sweep} of the lake {}: its sources do not name one rollouts file or more and one inputs file \
                 ({}); add the sweep again with ",
                lake.display(),
                f.sources.iter().map(|s| s.path.as_str()).collect::<Vec<_>>().join(", ")
            ));
            Err(Error::refused(None, msg.opt(Opt::named("inputs"))))
        }
    }
}

/// The lake's `tasks` table for the predicate and weight (`--lake`): every sweep's tasks
/// with `sweep`, `sweep_order`, the labels, and `sweeps_back`: 0 for the sweep selected
/// from (the newest sweep when selecting from files), 1 for the one before it, and so on.
fn lake_tasks(c: &SelectConfig) -> Result<Option<LazyFrame>> {
    let Some(dir) = &c.lake else { return Ok(None) };
    let lake = crate::query::lake::Lake::open(dir)?;
    let at = c.sweep.as_deref().and_then(|s| lake.order(s)).unwrap_or(lake.sweeps.len()) as i64;
    let Some(tasks) = lake.table("tasks")? else { return Ok(None) };
    Ok(Some(tasks.with_column((lit(at) - col("sweep_order")).alias("sweeps_back"))))
}

/// The tables SQL over the candidates sees: `tasks`, and `lake_tasks` with `--lake`.
fn sql_tables(df: &DataFrame, lake: Option<&LazyFrame>) -> Vec<(&'static str, LazyFrame)> {
    let mut t = vec![("tasks", df.clone().lazy())];
    t.extend(lake.map(|l| ("lake_tasks", l.clone())));
    t
}

/// The tasks left after `--where`, `--band` and `--drop-zero-variance`.
fn filter(c: &SelectConfig, df: DataFrame, lake: Option<&LazyFrame>) -> Result<DataFrame> {
    let mut df = df;
    if let Some(p) = &c.predicate {
        df = crate::query::run_sql(sql_tables(&df, lake), &format!("SELECT * FROM tasks WHERE {p}"))?;
    }
    let mut lf = df.lazy();
    if let Some((lo, hi)) = c.band {
        let m = col("mean/reward");
        lf = lf.filter(m.clone().gt_eq(lit(lo)).and(m.lt_eq(lit(hi))));
    }
    if c.drop_zero_variance {
        // VAGEN's frac_reward_zero_std groups: measured rewards all equal (max = min),
        // one measured repeat included; a task with none measured has no spread either.
        lf = lf.filter(col("max/reward").gt(col("min/reward")));
    }
    Ok(lf.collect()?)
}

/// Each row's `_input_line`.
fn line_column(df: &DataFrame) -> Result<Vec<u64>> {
    Ok(df.column(INPUT_LINE)?.i64()?.iter().map(|l| l.unwrap_or(0) as u64).collect())
}

/// Counts per `--per` group.
type Groups = BTreeMap<String, usize>;

/// The rows of `df` selected by the quotas and the sample, in file order; with the
/// counts per `--per` group before and after.
fn choose(c: &SelectConfig, df: &DataFrame, lake: Option<&LazyFrame>) -> Result<(Vec<usize>, Groups, Groups)> {
    let n = df.height();
    let lines = line_column(df)?;
    let index: Vec<i64> =
        df.column(crate::schema::TASK_INDEX)?.cast(&DataType::Int64)?.i64()?.iter().map(|t| t.unwrap_or(0)).collect();
    // The order tasks are taken in: by seeded Efraimidis–Spirakis key ln(u)/w (largest
    // first), which makes every prefix a weighted sample without replacement; or the
    // inputs' order.
    let mut order: Vec<usize> = (0..n).collect();
    if c.random() {
        let weights = weights(c, df, lake)?;
        let seed = c.seed.unwrap_or(0);
        let keys: Vec<f64> = (0..n)
            .map(|i| {
                let u = crate::generate::rng::open_unit(crate::generate::rng::hash(&[seed, index[i] as u64]));
                u.ln() / weights[i]
            })
            .collect();
        order.retain(|&i| weights[i] > 0.0);
        order.sort_by(|&a, &b| keys[b].total_cmp(&keys[a]).then(lines[a].cmp(&lines[b])));
    } else {
        order.sort_by_key(|&i| lines[i]);
    }
    let (mut before, mut after) = (Groups::new(), Groups::new());
    if let Some(per) = &c.per {
        let col = df.column(per).map_err(|_| {
            let msg = Msg::default().opt(Opt::text("per", per.clone()));
            Error::refused(None, msg.text(": no such column in the tasks table or the dataset's fields"))
        })?;
        let values = col.cast(&DataType::String)?;
        let values: Vec<String> =
            values.str()?.iter().map(|v| v.map_or_else(|| "null".to_string(), str::to_string)).collect();
        for v in &values {
            *before.entry(v.clone()).or_default() += 1;
        }
        let max = c.max.unwrap_or(usize::MAX);
        let mut taken: HashMap<&str, usize> = HashMap::new();
        order.retain(|&i| {
            let t = taken.entry(values[i].as_str()).or_default();
            *t += 1;
            *t <= max
        });
        for &i in &order {
            after.entry(values[i].clone()).or_insert(0);
        }
        if let Some(k) = sample_size(c.sample, order.len()) {
            order.truncate(k);
        }
        for v in after.values_mut() {
            *v = 0;
        }
        for &i in &order {
            *after.entry(values[i].clone()).or_default() += 1;
        }
        for g in before.keys() {
            after.entry(g.clone()).or_insert(0);
        }
    } else if let Some(k) = sample_size(c.sample, order.len()) {
        order.truncate(k);
    }
    order.sort_by_key(|&i| lines[i]);
    Ok((order, before, after))
}

/// How many of `n` tasks `--sample` keeps.
fn sample_size(s: Option<Sample>, n: usize) -> Option<usize> {
    match s? {
        Sample::Count(k) => Some(k.min(n)),
        Sample::Fraction(f) => Some(((f * n as f64).round() as usize).min(n)),
    }
}

/// Each task's weight from `--weight` (1 without it); null counts as 0 (never drawn).
fn weights(c: &SelectConfig, df: &DataFrame, lake: Option<&LazyFrame>) -> Result<Vec<f64>> {
    let Some(expr) = &c.weight else { return Ok(vec![1.0; df.height()]) };
    let w =
        crate::query::run_sql(sql_tables(df, lake), &format!("SELECT CAST(({expr}) AS DOUBLE) AS weight FROM tasks"))?;
    if w.height() != df.height() {
        let msg = Msg::default().opt(Opt::text("weight", expr.clone()));
        return Err(Error::refused(None, msg.text(format!(": gave {} values for {} tasks", w.height(), df.height()))));
    }
    let index = df.column(crate::schema::TASK_INDEX)?.cast(&DataType::Int64)?;
    let index = index.i64()?;
    w.column("weight")?
        .f64()?
        .iter()
        .zip(index.iter())
        .map(|(v, t)| match v {
            None => Ok(0.0),
            Some(v) if v.is_finite() && v >= 0.0 => Ok(v),
            Some(v) => Err(Error::refused(
                None,
                Msg::default()
                    .opt(Opt::text("weight", expr.clone()))
                    .text(format!(": task {} has weight {v}; weights must be finite and not negative", t.unwrap_or(0))),
            )),
        })
        .collect()
}

/// Writes `line` (a JSON object) without its top-level `_ng_*` members; everything else
/// (key order, spelling, whitespace between members) as it is.
pub fn strip_ng(line: &[u8], out: &mut Vec<u8>) -> std::result::Result<(), String> {
    use crate::json::scan::{decode_str, Scanner};
    let inv =
        |e: crate::json::scan::ScanError| format!("invalid JSON: {} (at byte {} of the line)", e.msg, e.offset + 1);
    let mut s = Scanner::new(line);
    if s.peek() != Some(b'{') {
        return Err("expected a JSON object".into());
    }
    s.i += 1;
    let open = s.i;
    let mut first = true;
    let mut wrote_one = false;
    let mut end = open;
    out.extend_from_slice(&line[..open]);
    loop {
        let before = s.i;
        let Some(k) = s.next_key(&mut first).map_err(inv)? else { break };
        let start = k.0.as_ptr() as usize - line.as_ptr() as usize - 1;
        s.value().map_err(inv)?;
        let ng =
            if k.1 { decode_str(k.0, true).is_ok_and(|d| d.starts_with("_ng_")) } else { k.0.starts_with(b"_ng_") };
        if !ng {
            // The first member written keeps what followed `{`, without a comma.
            let sep = if wrote_one { &line[before..start] } else { &line[open..first_start(line, open)] };
            out.extend_from_slice(sep);
            out.extend_from_slice(&line[start..s.i]);
            wrote_one = true;
        }
        end = s.i;
    }
    out.extend_from_slice(&line[end..]);
    Ok(())
}

/// Where the object's first member starts: past the whitespace after `{` at `open`.
fn first_start(line: &[u8], open: usize) -> usize {
    open + line[open..].iter().take_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n')).count()
}

/// Output compression, by the output's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compress {
    None,
    Gzip,
    Zstd,
}

impl Compress {
    fn of(path: &Path) -> Compress {
        match path.extension().and_then(|e| e.to_str()) {
            Some("gz") => Compress::Gzip,
            Some("zst") => Compress::Zstd,
            _ => Compress::None,
        }
    }

    fn writer<'w, W: Write + 'w>(self, w: W) -> std::io::Result<Encoder<'w, W>> {
        Ok(match self {
            Compress::None => Encoder::Plain(w),
            Compress::Gzip => Encoder::Gzip(flate2::write::GzEncoder::new(w, flate2::Compression::default())),
            Compress::Zstd => Encoder::Zstd(zstd::stream::write::Encoder::new(w, 3)?),
        })
    }
}

/// A writer that compresses (or not) on its way to the output.
enum Encoder<'w, W: Write> {
    Plain(W),
    Gzip(flate2::write::GzEncoder<W>),
    Zstd(zstd::stream::write::Encoder<'w, W>),
}

impl<W: Write> Encoder<'_, W> {
    fn write_all(&mut self, b: &[u8]) -> std::io::Result<()> {
        match self {
            Encoder::Plain(w) => w.write_all(b),
            Encoder::Gzip(w) => w.write_all(b),
            Encoder::Zstd(w) => w.write_all(b),
        }
    }

    fn finish(self) -> std::io::Result<()> {
        match self {
            Encoder::Plain(mut w) => w.flush(),
            Encoder::Gzip(w) => w.finish().map(drop),
            Encoder::Zstd(w) => w.finish().map(drop),
        }
    }
}

/// The manifest: sources, every flag, counts, the version.
fn manifest_json(
    c: &SelectConfig,
    run: &str,
    sources: &[Source],
    (tasks, candidates, selected): (usize, usize, usize),
    before: &Groups,
    after: &Groups,
) -> Json {
    let opt_str = |v: &Option<String>| v.as_ref().map_or(Json::Null, |s| Json::Str(s.clone()));
    let mut doc = Json::obj();
    doc.set("rollstat_version", Json::Str(env!("CARGO_PKG_VERSION").to_string()));
    doc.set("sources", Json::Arr(sources.iter().map(Source::to_json).collect()));
    doc.set("run", Json::Str(run.to_string()));
    let mut f = Json::obj();
    f.set("where", opt_str(&c.predicate));
    f.set("band", c.band.map_or(Json::Null, |(lo, hi)| Json::Arr(vec![Json::Float(lo), Json::Float(hi)])));
    f.set("drop_zero_variance", Json::Bool(c.drop_zero_variance));
    f.set("per", opt_str(&c.per));
    f.set("max", c.max.map_or(Json::Null, |m| Json::Int(m as i64)));
    f.set(
        "sample",
        match c.sample {
            None => Json::Null,
            Some(Sample::Count(k)) => Json::Int(k as i64),
            Some(Sample::Fraction(x)) => Json::Float(x),
        },
    );
    f.set("weight", opt_str(&c.weight));
    f.set("seed", if c.random() { Json::Int(c.seed.unwrap_or(0) as i64) } else { Json::Null });
    f.set("strip_ng", Json::Bool(c.strip_ng));
    f.set("format", Json::Str(if c.format == SelectFormat::Parquet { "parquet" } else { "jsonl" }.into()));
    f.set("agent", opt_str(&c.agent));
    f.set("lake", c.lake.as_ref().map_or(Json::Null, |l| Json::Str(l.display().to_string())));
    f.set("sweep", opt_str(&c.sweep));
    f.set("out", Json::Str(c.out.display().to_string()));
    doc.set("flags", f);
    let mut counts = Json::obj();
    counts.set("tasks", Json::Int(tasks as i64));
    counts.set("candidates", Json::Int(candidates as i64));
    counts.set("selected", Json::Int(selected as i64));
    doc.set("counts", counts);
    if c.per.is_some() {
        let groups = before
            .keys()
            .map(|g| {
                let mut o = Json::obj();
                o.set("value", Json::Str(g.clone()));
                o.set("before", Json::Int(before[g] as i64));
                o.set("after", Json::Int(after.get(g).copied().unwrap_or(0) as i64));
                o
            })
            .collect();
        doc.set("groups", Json::Arr(groups));
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stripped(s: &str) -> String {
        let mut out = Vec::new();
        strip_ng(s.as_bytes(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strip_ng_keeps_everything_else_as_written() {
        assert_eq!(stripped(r#"{"a":1.50,"_ng_task_index":3,"b":"\u00e9"}"#), r#"{"a":1.50,"b":"\u00e9"}"#);
        assert_eq!(stripped(r#"{"_ng_task_index":3, "a":1e2 ,"_ng_rollout_index":0}"#), r#"{"a":1e2}"#);
        assert_eq!(stripped(r#"{ "\u005fng_x":1, "b":[1,{"_ng_y":2}]}"#), r#"{ "b":[1,{"_ng_y":2}]}"#);
        assert_eq!(stripped(r#"{"_ng_task_index":0}"#), "{}");
        assert_eq!(stripped("{}"), "{}");
    }

    #[test]
    fn sample_sizes_parse() {
        assert_eq!(Sample::parse("10"), Ok(Sample::Count(10)));
        assert_eq!(Sample::parse("0.25"), Ok(Sample::Fraction(0.25)));
        assert!(Sample::parse("1.5").is_err());
        assert!(Sample::parse("-3").is_err());
        assert_eq!(sample_size(Some(Sample::Fraction(0.5)), 5), Some(3));
        assert_eq!(sample_size(Some(Sample::Count(9)), 5), Some(5));
    }
}
