//! Sweeps split over many machines: `shard` reads one rollouts file and saves its rows
//! by bucket of tasks (bucket = ⌊task / width⌋) as slices; `partial` joins one bucket's
//! slices from every file; `merge` reads the buckets back as one table and runs the
//! single-machine aggregate or profile on it. The table merge builds equals the one
//! read from the files concatenated (in the order the slices are given), so the
//! artifacts are the same bytes.

use std::path::{Path, PathBuf};

use super::aggregate::{aggregate_table, AggregateConfig, AggregateRun};
use super::merge_stream::merge_aggregate_streamed;
use super::profile::{check_inputs, profile_paths, profile_table, ProfileConfig, ProfileRun};
use super::{check_runs, report_read_warnings};
use crate::error::{Error, Location, Result};
use crate::export::atomic::{in_out_dir, OutputSet};
use crate::ingest::rollouts::read_rollouts_range;
use crate::ingest::slice::{read_slices, write_slice};
use crate::ingest::{read_inputs, read_rollouts, InputTable, RolloutTable};
use crate::trace::trace;

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

pub fn shard(c: &ShardConfig) -> Result<ShardRun> {
    if c.task_width < 1 {
        return Err(Error::Usage("--task-width must be at least 1".into()));
    }
    let t0 = std::time::Instant::now();
    let t = match c.range {
        Some(r) => read_rollouts_range(&c.rollouts, r)?,
        None => read_rollouts(&c.rollouts)?,
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

/// Joins slices (one bucket's, from every rollouts file, in file order) into one.
pub fn partial(slices: &[PathBuf], out_path: &Path) -> Result<usize> {
    let ins: Vec<&Path> = slices.iter().map(PathBuf::as_path).collect();
    let mut out = OutputSet::new(&ins);
    out.check(out_path)?;
    let t = read_slices(slices, out_path)?;
    let rows: Vec<usize> = (0..t.len()).collect();
    let mut w = out.create(out_path)?;
    write_slice(&t, &rows, &mut w).and_then(|()| w.finish()).map_err(|e| Error::write(out_path, e))?;
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

/// Reads the inputs (when given) on a thread of their own while the slices are read:
/// the inputs are JSONL as large as the sweep has rollouts, the slices are compact, and
/// reading the two one after the other left a core idle for much of the merge. An error
/// in the inputs is reported before one in the slices, as when they were read in turn.
fn read_both(inputs: Option<&Path>, slices: &[PathBuf], rollouts: &Path) -> Result<(Option<InputTable>, RolloutTable)> {
    std::thread::scope(|s| {
        let reading = inputs.map(|p| s.spawn(move || read_inputs(p)));
        let t = read_sweep(slices, rollouts);
        let inputs = reading.map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).transpose()?;
        Ok((inputs, t?))
    })
}

/// `aggregate` over slices: `c.rollouts` only names the sweep, `c.out` is required.
/// `whole_table` reads the slices into one table; otherwise they are read bucket by
/// bucket, keeping each run's value columns or, with `low_memory`, none.
pub fn merge_aggregate(
    c: &AggregateConfig,
    slices: &[PathBuf],
    whole_table: bool,
    low_memory: bool,
) -> Result<AggregateRun> {
    let path = c.out.clone().ok_or_else(|| Error::Usage("merge aggregate needs --out FILE".into()))?;
    let mut read: Vec<&Path> = slices.iter().map(PathBuf::as_path).collect();
    read.extend(c.inputs.as_deref());
    read.extend(c.metrics.files.iter().map(PathBuf::as_path));
    let mut out = OutputSet::new(&read);
    out.check(&path)?;
    if !whole_table {
        // Bucket by bucket: the inputs first, then the slices one at a time.
        let t0 = std::time::Instant::now();
        let inputs = c.inputs.as_deref().map(read_inputs).transpose()?;
        // Reading freed its per-piece tables; the merge holds the inputs for its whole run.
        crate::ingest::release_free_memory();
        if let Some(i) = &inputs {
            crate::trace::trace("merge: read inputs", t0);
            // The check on the inputs alone (swapped files); the rest needs the rollouts.
            check_runs(&RolloutTable::empty(Default::default()), i)?;
        }
        if let Some(mut run) = merge_aggregate_streamed(c, slices, inputs.as_ref(), &mut out, &path, low_memory)? {
            if let Some(i) = &inputs {
                report_read_warnings(&i.report.warnings);
            }
            run.file = out.commit()?.remove(0);
            return Ok(run);
        }
        if low_memory {
            eprintln!(
                "warning: --low-memory: this merge needs the whole table (custom metrics, slices out of task order, \
                 or rollouts without an agent merged into a named run); reading every slice into one table"
            );
        }
        let t = read_sweep(slices, &c.rollouts[0])?;
        if let Some(i) = &inputs {
            check_runs(&t, i)?;
            report_read_warnings(&i.report.warnings);
        }
        return aggregate_table(c, &t, inputs.as_ref(), out, &path);
    }
    let (inputs, t) = read_both(c.inputs.as_deref(), slices, &c.rollouts[0])?;
    if let Some(i) = &inputs {
        check_runs(&t, i)?;
        report_read_warnings(&i.report.warnings);
    }
    aggregate_table(c, &t, inputs.as_ref(), out, &path)
}

/// `profile` over slices: the artifacts go to `c.out_dir` (required), named after
/// `c.rollouts`.
pub fn merge_profile(c: &ProfileConfig, slices: &[PathBuf]) -> Result<ProfileRun> {
    let dir = c.out_dir.clone().ok_or_else(|| Error::Usage("merge profile needs --out-dir DIR".into()))?;
    if c.inputs.is_dir() {
        return Err(Error::bad(Location::file(&c.inputs), "is a folder; give the JSONL file inside it"));
    }
    in_out_dir(&dir, || {
        let paths = profile_paths(&c.rollouts[0], Some(&dir));
        let mut read: Vec<&Path> = slices.iter().map(PathBuf::as_path).collect();
        read.push(&c.inputs);
        read.extend(c.metrics.files.iter().map(PathBuf::as_path));
        let out = OutputSet::new(&read);
        for p in &paths {
            out.check(p)?;
        }
        check_inputs(&c.inputs)?;
        let (inputs, t) = read_both(Some(&c.inputs), slices, &c.rollouts[0])?;
        let inputs = inputs.expect("read_both reads the inputs it is given");
        check_runs(&t, &inputs)?;
        report_read_warnings(&inputs.report.warnings);
        profile_table(c, &t, &inputs, out, &paths)
    })
}
