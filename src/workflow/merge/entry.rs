//! The commands over slices: `shard`, `join`, and `merge`'s entry points, each of which
//! applies the one rule that picks bucket by bucket or the whole table before any slice
//! is read; the slices' and input slices' names in a shard folder.

use std::path::{Path, PathBuf};

use super::aggregate::merge_aggregate_streamed;
use super::buckets::{MergeInputs, Sweep};
use super::profile::merge_profile_streamed;
use super::rounds::{write_share_file, Command, Plan};
use super::BucketShares;
use crate::error::{Error, Location, Result};
use crate::export::atomic::{in_out_dir, OutputSet};
use crate::ingest::input_slice::{is_input_slice, read_head, write_input_slice, ShardPart, SlicedInputs};
use crate::ingest::inputs::read_inputs_range;
use crate::ingest::rollouts::read_rollouts_range;
use crate::ingest::slice::{read_slices, span, write_slice};
use crate::ingest::{read_inputs, read_rollouts, InputTable, ReadOptions, RolloutTable};
use crate::trace::trace;
use crate::workflow::aggregate::{aggregate_table, AggregateConfig, AggregateRun};
use crate::workflow::profile::{check_inputs, profile_paths, profile_table, ProfileConfig, ProfileRun};
use crate::workflow::{check_runs, report_read_warnings, Metrics};

/// The list of buckets `shard` writes beside its slices.
pub const MANIFEST: &str = "manifest.json";

/// What to shard and where the slices go.
#[derive(Debug, Clone)]
pub struct ShardConfig {
    pub rollouts: PathBuf,
    /// Folder for `b<bucket>.slice` files and `manifest.json` (created when missing).
    pub out_dir: PathBuf,
    /// Tasks per bucket: task `k` goes to bucket ⌊k / width⌋.
    pub task_width: i64,
    /// Only the lines that start in these bytes (start, end) of the file.
    pub range: Option<(u64, u64)>,
    /// The file is a materialized-inputs file: its rows go to input slices
    /// (`i<bucket>.slice`).
    pub inputs: bool,
}

/// What a shard run wrote: each bucket with its number of rows.
pub struct ShardRun {
    pub buckets: Vec<(i64, usize)>,
    pub files: Vec<PathBuf>,
}

/// The slice file of bucket `b` in `dir`.
pub fn slice_path(dir: &Path, b: i64) -> PathBuf {
    dir.join(format!("b{b}.slice"))
}

/// The input slice file of bucket `b` in `dir`.
pub fn input_slice_path(dir: &Path, b: i64) -> PathBuf {
    dir.join(format!("i{b}.slice"))
}

pub fn shard(c: &ShardConfig) -> Result<ShardRun> {
    if c.task_width < 1 {
        return Err(Error::Usage("--task-width must be at least 1".into()));
    }
    if let Some((start, end)) = c.range.filter(|(start, end)| end < start) {
        return Err(Error::Usage(format!("the range {start}:{end} ends before it starts")));
    }
    if c.inputs {
        return shard_inputs(c);
    }
    let t0 = std::time::Instant::now();
    let t = match c.range {
        // Slices carry each row's fingerprint.
        Some(r) => read_rollouts_range(&c.rollouts, r, ReadOptions::FINGERPRINTS)?,
        None => read_rollouts(&c.rollouts, ReadOptions::FINGERPRINTS)?,
    };
    report_read_warnings(&t.report.warnings);
    trace("read", t0);
    in_out_dir(&c.out_dir, || {
        let mut out = OutputSet::new(&[c.rollouts.as_path()]);
        // Rows are in task order: each bucket is one run of rows.
        let mut buckets: Vec<(i64, usize)> = Vec::new();
        // Rows per (bucket, agent as the rollout names it, rollout index).
        let mut counts: Vec<String> = Vec::new();
        let mut start = 0;
        for r in 1..=t.len() {
            let b = t.task[start].div_euclid(c.task_width);
            if r == t.len() || t.task[r].div_euclid(c.task_width) != b {
                let path = slice_path(&c.out_dir, b);
                let rows: Vec<usize> = (start..r).collect();
                let mut w = out.create(&path)?;
                write_slice(&t, &rows, &mut w).and_then(|()| w.finish()).map_err(|e| Error::write(&path, e))?;
                buckets.push((b, r - start));
                let mut by: std::collections::BTreeMap<(Option<&str>, i64), usize> = Default::default();
                for row in start..r {
                    *by.entry((t.name(t.agent[row]), t.rollout[row])).or_default() += 1;
                }
                for ((agent, rollout), n) in by {
                    let agent = agent.map_or_else(
                        || "null".to_string(),
                        |a| String::from_utf8(crate::json::stream::quoted(a)).expect("quoted text is UTF-8"),
                    );
                    counts.push(format!("[{b},{agent},{rollout},{n}]"));
                }
                start = r;
            }
        }
        let list: Vec<String> = buckets.iter().map(|(b, n)| format!("[{b},{n}]")).collect();
        let manifest = format!(
            "{{\"task_width\":{},\"buckets\":[{}],\"rows\":[{}]}}\n",
            c.task_width,
            list.join(","),
            counts.join(",")
        );
        out.add(&c.out_dir.join(MANIFEST), manifest.as_bytes())?;
        Ok(ShardRun { buckets, files: out.commit()? })
    })
}

/// `shard` of a materialized-inputs file: its rows by bucket of tasks as input slices,
/// each in line order. A file whose rows carry a verifier's result is a rollouts file
/// given as inputs, refused here as the merge would refuse it.
fn shard_inputs(c: &ShardConfig) -> Result<ShardRun> {
    let t0 = std::time::Instant::now();
    let mut t = match c.range {
        Some(r) => read_inputs_range(&c.rollouts, r)?,
        None => read_inputs(&c.rollouts)?,
    };
    check_runs(&RolloutTable::empty(Default::default()), &t)?;
    report_read_warnings(&t.report.warnings);
    if crate::ingest::lines::is_compressed(&c.rollouts) {
        crate::warn::say(format!(
            "{}: compressed inputs serve `merge aggregate`, but `merge profile` re-reads each task's input row from \
             the file and needs it decompressed",
            c.rollouts.display()
        ));
    }
    // The slices name the file absolutely, for merges run from another folder, and with
    // its size, to tell whether it changed before profile re-reads rows from it.
    let size = std::fs::metadata(&c.rollouts).map_err(|e| Error::read(&c.rollouts, e))?.len();
    let (start, end) = c.range.map_or((0, size), |(a, b)| (a.min(size), b.min(size)));
    let found = t.len() as u64;
    t.path = std::path::absolute(&c.rollouts).map_err(|e| Error::read(&c.rollouts, e))?;
    trace("read", t0);
    // Rows by bucket, each bucket's in line order.
    let mut by: std::collections::BTreeMap<i64, Vec<usize>> = Default::default();
    for r in 0..t.len() {
        by.entry(t.task[r].div_euclid(c.task_width)).or_default().push(r);
    }
    in_out_dir(&c.out_dir, || {
        let mut out = OutputSet::new(&[c.rollouts.as_path()]);
        let mut buckets = Vec::new();
        for (&b, rows) in &by {
            let path = input_slice_path(&c.out_dir, b);
            let mut w = out.create(&path)?;
            let part = ShardPart { start, end, rows: found, here: rows.len() as u64 };
            write_input_slice(&t, rows, (c.task_width, b), size, &[part], &mut w)
                .and_then(|()| w.finish())
                .map_err(|e| Error::write(&path, e))?;
            buckets.push((b, rows.len()));
        }
        let list: Vec<String> = buckets.iter().map(|(b, n)| format!("[{b},{n}]")).collect();
        let manifest =
            format!("{{\"kind\":\"inputs\",\"task_width\":{},\"buckets\":[{}]}}\n", c.task_width, list.join(","));
        out.add(&c.out_dir.join(MANIFEST), manifest.as_bytes())?;
        Ok(ShardRun { buckets, files: out.commit()? })
    })
}

/// Joins slices (one bucket's, from every rollouts file, in file order) into one.
/// Input slices (one bucket's, from byte ranges of the inputs file) are joined in line
/// order.
pub fn join_slices(slices: &[PathBuf], out_path: &Path) -> Result<usize> {
    let ins: Vec<&Path> = slices.iter().map(PathBuf::as_path).collect();
    let mut out = OutputSet::new(&ins);
    out.check(out_path)?;
    if slices.iter().any(|p| is_input_slice(p)) {
        return join_input_slices(slices, out_path, out);
    }
    let t = read_slices(slices, out_path)?;
    let rows: Vec<usize> = (0..t.len()).collect();
    let mut w = out.create(out_path)?;
    write_slice(&t, &rows, &mut w).and_then(|()| w.finish()).map_err(|e| Error::write(out_path, e))?;
    drop(w);
    out.commit()?;
    Ok(t.len())
}

fn join_input_slices(slices: &[PathBuf], out_path: &Path, mut out: OutputSet) -> Result<usize> {
    if let Some(p) = slices.iter().find(|p| !is_input_slice(p)) {
        return Err(Error::bad(
            Location::file(p),
            "not an input slice, while others are; join the rollouts' slices and the inputs' slices apart",
        ));
    }
    let s = SlicedInputs::open(slices)?;
    let heads: Vec<i64> = slices.iter().map(|p| read_head(p).map(|h| h.bucket)).collect::<Result<_>>()?;
    if let Some(k) = heads.iter().position(|&b| b != heads[0]) {
        return Err(Error::bad(
            Location::file(&slices[k]),
            format!(
                "this input slice holds bucket {}, the first given holds bucket {}; join one bucket at a time",
                heads[k], heads[0]
            ),
        ));
    }
    let t = s.whole()?;
    let rows: Vec<usize> = (0..t.len()).collect();
    let mut w = out.create(out_path)?;
    write_input_slice(&t, &rows, (s.task_width, heads[0]), s.size, &s.parts(), &mut w)
        .and_then(|()| w.finish())
        .map_err(|e| Error::write(out_path, e))?;
    drop(w);
    out.commit()?;
    Ok(t.len())
}

/// Reads slices (in bucket order) back as the sweep's table; the table is named after
/// `rollouts`, the file name the artifacts are named for.
fn read_sweep(slices: &[PathBuf], rollouts: &Path) -> Result<RolloutTable> {
    let t0 = std::time::Instant::now();
    let t = read_slices(slices, rollouts)?;
    trace("read slices", t0);
    Ok(t)
}

/// The materialized inputs a merge was given: a JSONL file (`--inputs`) or the input
/// slices `shard --inputs` wrote.
#[derive(Debug, Clone, Copy)]
pub enum InputsGiven<'a> {
    None,
    File(&'a Path),
    Slices(&'a [PathBuf]),
}

impl<'a> InputsGiven<'a> {
    /// From `--inputs` and the input slices among a merge's slices (not both).
    pub fn new(file: Option<&'a Path>, slices: &'a [PathBuf]) -> Result<InputsGiven<'a>> {
        match (file, slices.is_empty()) {
            (Some(_), false) => Err(Error::Usage(
                "give the inputs as --inputs FILE or as input slices among the slices, not both".into(),
            )),
            (Some(f), true) => Ok(InputsGiven::File(f)),
            (None, false) => Ok(InputsGiven::Slices(slices)),
            (None, true) => Ok(InputsGiven::None),
        }
    }

    /// The files the merge reads for them (never overwritten by its outputs).
    fn files(&self) -> Vec<&'a Path> {
        match *self {
            InputsGiven::None => Vec::new(),
            InputsGiven::File(f) => vec![f],
            InputsGiven::Slices(s) => s.iter().map(PathBuf::as_path).collect(),
        }
    }

    /// The whole inputs table: the file read, or every input slice joined in line order
    /// (`opened`, when they were opened already).
    fn read_whole(&self, opened: Option<&SlicedInputs>) -> Result<Option<InputTable>> {
        match (*self, opened) {
            (InputsGiven::None, _) => Ok(None),
            (InputsGiven::File(f), _) => read_inputs(f).map(Some),
            (InputsGiven::Slices(_), Some(s)) => s.whole().map(Some),
            (InputsGiven::Slices(s), None) => open_slices(s)?.whole().map(Some),
        }
    }
}

/// Opens a merge's input slices: refused when a bucket's slice of a shard is left out,
/// with a warning for bytes of the inputs file no slice given comes from.
fn open_slices(paths: &[PathBuf]) -> Result<SlicedInputs> {
    let s = SlicedInputs::open(paths)?;
    for w in s.check_complete()? {
        crate::warn::say(w);
    }
    Ok(s)
}

/// The whole table of the sweep and its inputs, checked against each other as the
/// single-machine commands check them (with the inputs' read warnings printed). The
/// inputs (when given) are read on a thread of their own while the slices are read:
/// the inputs are JSONL as large as the sweep has rollouts, the slices are compact, and
/// reading the two one after the other left a core idle for much of the merge. An error
/// in the inputs is reported before one in the slices, as when they were read in turn.
fn read_both(
    inputs: InputsGiven<'_>,
    opened: Option<&SlicedInputs>,
    slices: &[PathBuf],
    rollouts: &Path,
) -> Result<(Option<InputTable>, RolloutTable)> {
    let (inputs, t) = std::thread::scope(|s| {
        let reading = s.spawn(move || inputs.read_whole(opened));
        let t = read_sweep(slices, rollouts);
        let inputs = reading.join().unwrap_or_else(|e| std::panic::resume_unwind(e))?;
        Ok::<_, Error>((inputs, t?))
    })?;
    if let Some(i) = &inputs {
        check_runs(&t, i)?;
        report_read_warnings(&i.report.warnings);
    }
    Ok((inputs, t))
}

/// The inputs of a merge bucket by bucket (`opened`: the input slices, when they were
/// opened already): the file, read whole, or the input slices' headers. The check on
/// the inputs alone (swapped files) is made here; the rest needs the rollouts.
fn bucket_inputs(given: InputsGiven<'_>, opened: Option<SlicedInputs>) -> Result<Option<MergeInputs>> {
    let t0 = std::time::Instant::now();
    let inputs = match (given, opened) {
        (_, Some(s)) => Some(MergeInputs::Sliced(s)),
        (InputsGiven::None, None) => None,
        (InputsGiven::File(f), None) => Some(MergeInputs::file(read_inputs(f)?)),
        (InputsGiven::Slices(s), None) => Some(MergeInputs::Sliced(open_slices(s)?)),
    };
    // Reading freed its per-piece tables; the merge holds the inputs for its whole run.
    crate::ingest::release_free_memory();
    if let Some(MergeInputs::File { t, .. }) = &inputs {
        crate::trace::trace("merge: read inputs", t0);
        check_runs(&RolloutTable::empty(Default::default()), t)?;
    }
    Ok(inputs)
}

/// How a merge held the sweep, decided before any slice is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Merged {
    /// Bucket by bucket, the statistics from `rounds` rounds of its plan, the counting
    /// round included (run here, or elsewhere when the plan was `given`).
    Buckets { buckets: usize, rounds: u32, given: bool },
    /// Every slice read into one table.
    WholeTable,
}

impl std::fmt::Display for Merged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Merged::Buckets { buckets, rounds, given } = *self else { return write!(f, "as one table") };
        let rounds = if rounds == 1 { "1 round".to_string() } else { format!("{rounds} rounds") };
        match given {
            false => write!(f, "bucket by bucket ({buckets} buckets, statistics in {rounds})"),
            true => write!(f, "bucket by bucket ({buckets} buckets, statistics from the plan's {rounds})"),
        }
    }
}

/// Whether a merge reads its slices into one table, and why: asked (`--whole-table`),
/// custom metrics (which read the whole table), or slices whose task spans are not
/// in increasing order without overlap (shard slices not joined by `join`, or
/// buckets out of order), told by the slices' heads before anything is read. A `plan`
/// of rounds is for the bucket-by-bucket merge only.
fn whole_table_for(asked: bool, custom: bool, slices: &[PathBuf], plan: Option<&Path>) -> Result<bool> {
    let why = match (asked, custom) {
        (true, _) => "--whole-table".to_string(),
        (_, true) => "custom metrics read the whole table".to_string(),
        _ => match slices_out_of_order(slices) {
            Some(why) => why,
            None => return Ok(false),
        },
    };
    match plan {
        Some(p) => Err(Error::Usage(format!(
            "--plan {} is for the bucket-by-bucket merge, and this merge reads the whole table ({why})",
            p.display()
        ))),
        None => Ok(true),
    }
}

/// Why slices go to the whole table by their heads alone: task spans not in increasing
/// order without overlap (with a warning), or no rows at all (refused as the whole
/// table refuses it); `None` when they can be merged bucket by bucket.
fn slices_out_of_order(slices: &[PathBuf]) -> Option<String> {
    let mut last: Option<(i64, &Path)> = None;
    let mut overlap = None;
    for path in slices {
        // A slice whose head cannot be read is refused when it is read, after the
        // inputs (whose errors come first).
        let Ok(s) = span(path) else { continue };
        if s.rows == 0 {
            continue;
        }
        if let Some((l, before)) = last.filter(|&(l, _)| s.first <= l) {
            overlap.get_or_insert(format!(
                "{} starts at task {}, not after task {l} of {}",
                path.display(),
                s.first,
                before.display()
            ));
        }
        last = Some((s.last, path.as_path()));
    }
    match (overlap, last) {
        (Some(o), _) => {
            crate::warn::say(format!(
                "the slices are not in task order ({o}): merging them as one table; join each bucket's slices with \
                 `rollstat join` and give them in bucket order to merge bucket by bucket"
            ));
            Some(format!("the slices are not in task order ({o})"))
        }
        (None, None) => Some("the slices hold no rows".to_string()),
        (None, Some(_)) => None,
    }
}

/// `aggregate` over slices: `c.rollouts` only names the sweep, `c.out` is required, and
/// the inputs are `c.inputs` or `input_slices` (not both). The slices are read bucket
/// by bucket unless [`whole_table_for`] says otherwise; the statistics come from
/// rounds run here or from a finished `plan`.
pub fn merge_aggregate(
    c: &AggregateConfig,
    slices: &[PathBuf],
    input_slices: &[PathBuf],
    whole_table: bool,
    plan: Option<&Path>,
) -> Result<(AggregateRun, Merged)> {
    let path = c.out.clone().ok_or_else(|| Error::Usage("merge aggregate needs --out FILE".into()))?;
    let given = InputsGiven::new(c.inputs.as_deref(), input_slices)?;
    let mut read: Vec<&Path> = slices.iter().map(PathBuf::as_path).collect();
    read.extend(given.files());
    read.extend(c.metrics.files.iter().map(PathBuf::as_path));
    read.extend(plan);
    let whole_table = whole_table_for(whole_table, !c.metrics.is_empty(), slices, plan)?;
    let plan = plan.map(|p| Plan::read_for(p, Command::Aggregate)).transpose()?;
    let mut out = OutputSet::new(&read);
    out.check(&path)?;
    if whole_table {
        let (inputs, t) = read_both(given, None, slices, &c.rollouts[0])?;
        return Ok((aggregate_table(c, &t, inputs.as_ref(), out, &path)?, Merged::WholeTable));
    }
    // Bucket by bucket: the inputs first, then the slices one at a time, each with its
    // input rows.
    let inputs = bucket_inputs(given, None)?;
    let mut pending = inputs.as_ref().map(MergeInputs::read_warnings).unwrap_or_default();
    let given = plan.is_some();
    let (mut run, rounds) = merge_aggregate_streamed(c, slices, inputs.as_ref(), &mut out, &path, plan, &mut pending)?;
    run.file = Some(out.commit()?.remove(0));
    Ok((run, Merged::Buckets { buckets: slices.len(), rounds, given }))
}

/// One round of the statistics of `merge aggregate`, for a cluster: the shares of the
/// buckets `slices` (with their input rows: `c.inputs` or `input_slices`, which need
/// not be complete) written to `out`; `plan` is the last round's combined plan (none for
/// the counting round). Returns the shares written.
pub fn merge_shares(
    c: &AggregateConfig,
    slices: &[PathBuf],
    input_slices: &[PathBuf],
    plan: Option<&Path>,
    out: &Path,
) -> Result<usize> {
    let given = InputsGiven::new(c.inputs.as_deref(), input_slices)?;
    let cmd = super::aggregate::AggregateShares { agent: c.agent.is_some() };
    round_shares(&cmd, &c.rollouts[0], slices, given, plan, out)
}

/// One round of the statistics of `merge profile`, for a cluster: the shares of the
/// buckets `slices`, joined to their input rows (`c.inputs`, or `input_slices`, which
/// need not be complete), written to `out`; see [`merge_shares`].
pub fn merge_profile_shares(
    c: &ProfileConfig,
    slices: &[PathBuf],
    input_slices: &[PathBuf],
    plan: Option<&Path>,
    out: &Path,
) -> Result<usize> {
    let given = if input_slices.is_empty() { InputsGiven::File(&c.inputs) } else { InputsGiven::Slices(input_slices) };
    round_shares(&super::profile::ProfileShares, &c.rollouts[0], slices, given, plan, out)
}

/// One round's shares `cmd` makes of the buckets `slices` (in bucket order) with their
/// inputs `given`, written to `out`: the counting round without a plan, later rounds
/// with the plan the last round's combine wrote. The share is checked against every
/// file read before anything is read.
fn round_shares<C: BucketShares>(
    cmd: &C,
    name: &Path,
    slices: &[PathBuf],
    given: InputsGiven<'_>,
    plan: Option<&Path>,
    out: &Path,
) -> Result<usize> {
    let mut read: Vec<&Path> = slices.iter().map(PathBuf::as_path).collect();
    read.extend(given.files());
    read.extend(plan);
    OutputSet::new(&read).check(out)?;
    let plan = plan.map(|p| Plan::read_for(p, C::COMMAND)).transpose()?;
    let inputs = match given {
        InputsGiven::None => None,
        InputsGiven::File(f) => Some(MergeInputs::file(read_inputs(f)?)),
        // One bucket's input slices: the merge checks that the whole set is complete.
        InputsGiven::Slices(s) => Some(MergeInputs::Sliced(SlicedInputs::open(s)?)),
    };
    let (mut shares, mut infos) = (Vec::new(), Vec::new());
    Sweep { slices, name, inputs: inputs.as_ref() }.each_step(false, |s| -> Result<()> {
        let (s, i) = cmd.shares(s, plan.as_ref())?;
        shares.extend(s);
        infos.extend(i);
        Ok(())
    })?;
    write_share_file(&shares, &infos, plan.as_ref(), C::COMMAND, out, &read)?;
    Ok(shares.len())
}

/// The inputs file input slices were sharded from, which `merge profile` re-reads each
/// task's `sample` row from: refused unless it is there, a regular uncompressed file of
/// the size it had then.
fn sample_file(s: &SlicedInputs) -> Result<PathBuf> {
    let why = "each task entry's `sample` is its input row, which merge profile reads from the inputs file the \
               input slices were sharded from";
    let file = s.path.clone();
    match std::fs::metadata(&file) {
        Err(e) => Err(Error::bad(
            Location::file(&file),
            format!("cannot be read ({e}); {why}: make it readable at this path"),
        )),
        Ok(m) if m.is_dir() => Err(Error::bad(Location::file(&file), format!("is a folder; {why}"))),
        Ok(m) if m.len() != s.size => Err(Error::bad(
            Location::file(&file),
            format!(
                "holds {} bytes, {} when it was sharded: it changed since; {why}, so shard it again",
                m.len(),
                s.size
            ),
        )),
        Ok(_) => {
            check_inputs(&file)?;
            Ok(file)
        }
    }
}

/// `export` over slices: the four tables of the sweep as Parquet in `c.out_dir`, as
/// `export` writes them for the files concatenated. The slices are read back as one
/// table (row for row the table of the concatenated files), with the inputs
/// (`c.inputs`, or every input slice joined in line order), and the single-machine
/// code builds the tables from it.
pub fn merge_export(
    c: &crate::workflow::ExportConfig,
    slices: &[PathBuf],
    input_slices: &[PathBuf],
) -> Result<(Vec<PathBuf>, crate::metrics::warnings::Warnings)> {
    let given = InputsGiven::new(c.inputs.as_deref(), input_slices)?;
    in_out_dir(&c.out_dir, || {
        let mut read: Vec<&Path> = slices.iter().map(PathBuf::as_path).collect();
        read.extend(given.files());
        let mut out = OutputSet::new(&read);
        let paths = crate::metrics::tables::NAMES.map(|name| c.out_dir.join(format!("{name}.parquet")));
        for path in &paths {
            out.check(path)?;
        }
        let (inputs, t) = read_both(given, None, slices, &c.rollouts[0])?;
        let (tables, warnings) = crate::metrics::tables::tables(&t, inputs.as_ref(), c.agent.as_deref(), &[], None)?;
        for ((_, mut df), path) in tables.named().into_iter().zip(&paths) {
            let mut w = out.create(path)?;
            crate::export::parquet::write_parquet(&mut df, path, &mut w)?;
        }
        Ok((out.commit()?, warnings))
    })
}

/// `profile` over slices: the artifacts go to `c.out_dir` (required), named after
/// `c.rollouts`. The inputs are `c.inputs`, or `input_slices` when given; then each
/// task's `sample` is still read from the inputs file they were sharded from. The
/// slices are read bucket by bucket unless [`whole_table_for`] says otherwise.
pub fn merge_profile(
    c: &ProfileConfig,
    slices: &[PathBuf],
    input_slices: &[PathBuf],
    whole_table: bool,
    plan: Option<&Path>,
) -> Result<(ProfileRun, Merged)> {
    let dir = c.out_dir.clone().ok_or_else(|| Error::Usage("merge profile needs --out-dir DIR".into()))?;
    let whole_table = whole_table_for(whole_table, !c.metrics.is_empty(), slices, plan)?;
    let plan_path = plan;
    let mut plan = plan.map(|p| Plan::read_for(p, Command::Profile)).transpose()?;
    let given = if input_slices.is_empty() { InputsGiven::File(&c.inputs) } else { InputsGiven::Slices(input_slices) };
    if let InputsGiven::File(f) = given {
        if f.is_dir() {
            return Err(Error::bad(Location::file(f), "is a folder; give the JSONL file inside it"));
        }
    }
    // With input slices, each task entry's `sample` is still read from the inputs file.
    let mut opened = match given {
        InputsGiven::Slices(s) => Some(open_slices(s)?),
        _ => None,
    };
    let sample_file = opened.as_ref().map(sample_file).transpose()?;
    in_out_dir(&dir, || {
        let paths = profile_paths(&c.rollouts[0], Some(&dir));
        let mut read: Vec<&Path> = slices.iter().map(PathBuf::as_path).collect();
        read.extend(given.files());
        read.extend(sample_file.as_deref());
        read.extend(c.metrics.files.iter().map(PathBuf::as_path));
        read.extend(plan_path);
        let mut out = OutputSet::new(&read);
        for p in &paths {
            out.check(p)?;
        }
        if let InputsGiven::File(f) = given {
            check_inputs(f)?;
        }
        if whole_table {
            let (inputs, t) = read_both(given, opened.as_ref(), slices, &c.rollouts[0])?;
            let inputs = inputs.expect("read_both reads the inputs it is given");
            return Ok((profile_table(c, &t, &inputs, out, &paths)?, Merged::WholeTable));
        }
        let inputs = bucket_inputs(given, opened.take())?.expect("a profile has inputs");
        let mut pending = inputs.read_warnings();
        let given = plan.is_some();
        let (mut run, rounds) =
            merge_profile_streamed(c, slices, &inputs, &mut out, &paths, plan.take(), &mut pending)?;
        run.files = out.commit()?;
        Ok((run, Merged::Buckets { buckets: slices.len(), rounds, given }))
    })
}

/// The slices a merge reads and what it makes of them: the part `merge aggregate` and
/// `merge profile` share.
#[derive(Debug, Clone, Default)]
pub struct SliceSweep {
    /// The slices in bucket order (`join` outputs, or `shard` outputs in file order);
    /// with them, in any order, the input slices of `shard --inputs`, told apart by
    /// their headers.
    pub slices: Vec<PathBuf>,
    /// The rollouts file name the sweep goes by (names profile's artifacts `S_…`).
    pub name: PathBuf,
    /// Read every slice into one table instead of one bucket at a time (the same bytes).
    pub whole_table: bool,
    /// The statistics from this finished plan (rounds of `share_out` and [`combine`]
    /// run on a cluster) instead of rounds over the slices here.
    ///
    /// [`combine`]: super::combine
    pub plan: Option<PathBuf>,
    /// Write these buckets' share of the next round of statistics (the counting round
    /// without a plan) to this file instead of merging.
    pub share_out: Option<PathBuf>,
}

/// `merge aggregate`: `aggregate` over the slices of a sharded sweep.
#[derive(Debug, Clone)]
pub struct MergeAggregateConfig {
    pub sweep: SliceSweep,
    /// Materialized inputs JSONL, when not given as input slices among the slices.
    pub inputs: Option<PathBuf>,
    /// Label for rollouts that name no agent (without it such rollouts are an error).
    pub agent: Option<String>,
    /// Output file; required unless `sweep.share_out` is given.
    pub out: Option<PathBuf>,
    pub metrics: Metrics,
    /// Key-metric selection patterns; empty means every `mean/*` plus coverage.
    pub key_metrics: Vec<String>,
}

/// `merge profile`: `profile` over the slices of a sharded sweep.
#[derive(Debug, Clone)]
pub struct MergeProfileConfig {
    pub sweep: SliceSweep,
    /// Materialized inputs JSONL; required unless input slices are among the slices.
    pub inputs: Option<PathBuf>,
    /// Profile what completed when some input rows have no rollout.
    pub allow_partial: bool,
    /// Folder for the three artifacts; required unless `sweep.share_out` is given.
    pub out_dir: Option<PathBuf>,
    pub metrics: Metrics,
}

/// What a merge over slices did: wrote one round's shares (their number), or merged.
pub enum MergeOutcome<R> {
    Shares(usize),
    Merged(R, Merged),
}

impl SliceSweep {
    /// The rollouts' slices and the input slices, told apart by their headers.
    pub fn split(&self) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
        let (rollouts, inputs): (Vec<PathBuf>, Vec<PathBuf>) =
            self.slices.iter().cloned().partition(|p| !is_input_slice(p));
        if rollouts.is_empty() {
            return Err(Error::Usage("every SLICE given is an input slice; give the rollouts' slices too".into()));
        }
        Ok((rollouts, inputs))
    }

    /// What both merges do once their configuration is built: write these buckets'
    /// `shares` of the next round when `share_out` asks, else `merge` (with the
    /// finished plan, if given).
    fn shares_or_merge<R>(
        &self,
        shares: impl FnOnce(Option<&Path>, &Path) -> Result<usize>,
        merge: impl FnOnce(Option<&Path>) -> Result<(R, Merged)>,
    ) -> Result<MergeOutcome<R>> {
        let plan = self.plan.as_deref();
        match &self.share_out {
            Some(_) if self.whole_table => {
                Err(Error::Usage("--share-out is for the bucket-by-bucket merge, not --whole-table".into()))
            }
            Some(share) => shares(plan, share).map(MergeOutcome::Shares),
            None => merge(plan).map(|(r, m)| MergeOutcome::Merged(r, m)),
        }
    }
}

/// `merge aggregate`: one round's shares of the statistics (with `share_out`), or the
/// aggregate file of the sweep (see [`merge_aggregate`]).
pub fn aggregate_slices(c: &MergeAggregateConfig) -> Result<MergeOutcome<AggregateRun>> {
    let config = AggregateConfig {
        rollouts: vec![c.sweep.name.clone()],
        inputs: c.inputs.clone(),
        out: c.out.clone(),
        agent: c.agent.clone(),
        metrics: c.metrics.clone(),
        key_metrics: c.key_metrics.clone(),
        run: Default::default(),
    };
    let (slices, inputs) = c.sweep.split()?;
    c.sweep.shares_or_merge(
        |plan, share| merge_shares(&config, &slices, &inputs, plan, share),
        |plan| merge_aggregate(&config, &slices, &inputs, c.sweep.whole_table, plan),
    )
}

/// `merge profile`: one round's shares of the statistics (with `share_out`), or the
/// three artifacts of the sweep (see [`merge_profile`]). The inputs are `c.inputs` or
/// the input slices among the slices (not both).
pub fn profile_slices(c: &MergeProfileConfig) -> Result<MergeOutcome<ProfileRun>> {
    let (slices, input_slices) = c.sweep.split()?;
    let inputs = match InputsGiven::new(c.inputs.as_deref(), &input_slices)? {
        InputsGiven::File(f) => f.to_path_buf(),
        // The inputs file the input slices were sharded from, as they name it.
        InputsGiven::Slices(s) => read_head(&s[0])?.inputs,
        InputsGiven::None => {
            return Err(Error::Usage(
                "merge profile needs the materialized inputs: --inputs FILE, or their input slices".into(),
            ))
        }
    };
    let config = ProfileConfig {
        inputs,
        rollouts: vec![c.sweep.name.clone()],
        allow_partial: c.allow_partial,
        out_dir: c.out_dir.clone(),
        metrics: c.metrics.clone(),
        lake: None,
    };
    c.sweep.shares_or_merge(
        |plan, share| merge_profile_shares(&config, &slices, &input_slices, plan, share),
        |plan| merge_profile(&config, &slices, &input_slices, c.sweep.whole_table, plan),
    )
}
