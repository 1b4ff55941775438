//! Task entries (`group_level_metrics` / `S_reward_profiling.jsonl`) and the aggregate
//! file, streamed: task entries are computed and serialized in parallel batches and
//! written as each batch completes, so memory stays bounded by a batch, not by the
//! artifact (hundreds of MB at a million rollouts).

use std::io::{self, Write};

use rayon::prelude::*;

use std::path::Path;

use crate::error::{Error, Location};
use crate::ingest::inputs::{map_file, read_rows, row_in};
use crate::ingest::InputTable;
use crate::json::stream::{quoted, Emitter, Snip};
use crate::json::{parse, transcode_compact, write_str, Json};
use crate::metrics::aggregate::AggEntry;
use crate::metrics::tasks::{rollout_info_each, Samples, TaskSpec, Val};

/// Why streaming task entries stopped: an input row could not be read (the user's file,
/// named with its line), or the output could not be written.
#[derive(Debug)]
pub enum StreamError {
    Input(Error),
    Output(io::Error),
}

impl From<io::Error> for StreamError {
    fn from(e: io::Error) -> Self {
        StreamError::Output(e)
    }
}

impl From<Error> for StreamError {
    fn from(e: Error) -> Self {
        StreamError::Input(e)
    }
}

impl StreamError {
    /// The crate error, naming `out` when writing it failed.
    pub fn at(self, out: &Path) -> Error {
        match self {
            StreamError::Input(e) => e,
            StreamError::Output(e) => Error::write(out, e),
        }
    }
}

/// Task entries per batch.
const BATCH: usize = 4096;
/// Task entries rendered into one buffer.
const CHUNK: usize = 64;

/// The prefixes of the members that task entries repeat, built once for the layout.
struct Prefixes {
    /// Per field, per statistic.
    stat: Vec<[Snip; 5]>,
    /// Per column of the table: its `rollout_infos` member.
    info: Vec<Snip>,
    /// `_ng_task_index` and `_ng_rollout_index` inside `rollout_infos`.
    info_task: Snip,
    info_rollout: Snip,
}

impl Prefixes {
    /// For entries whose members sit at `depth` (`None`: compact).
    fn new(spec: &TaskSpec<'_>, depth: Option<usize>) -> Prefixes {
        // Members of a rollout info: two levels (array, object) below the entry's.
        let inner = depth.map(|d| d + 2);
        Prefixes {
            stat: spec.keys.quoted.iter().map(|q| std::array::from_fn(|s| Snip::member(&q[s], depth))).collect(),
            info: spec.quoted_names.iter().map(|q| Snip::member(q, inner)).collect(),
            info_task: Snip::member(&quoted("_ng_task_index"), inner),
            info_rollout: Snip::member(&quoted("_ng_rollout_index"), inner),
        }
    }
}

/// Values that repeat across task entries, serialized once per rendering job: the fixed
/// `sample` and each label's `agent_ref` (entries of one layout sit at one depth, so the
/// text is the same every time).
#[derive(Default)]
struct Rendered {
    fixed_sample: Option<Vec<u8>>,
    agent_refs: Vec<Option<Vec<u8>>>,
}

/// Appends `text` when it is there; otherwise serializes `value()` and keeps its text.
fn cached(em: &mut Emitter, text: &mut Option<Vec<u8>>, value: impl FnOnce() -> Json) {
    match text {
        Some(t) => em.out.extend_from_slice(t),
        None => {
            let start = em.out.len();
            em.json(&value());
            *text = Some(em.out[start..].to_vec());
        }
    }
}

/// Where task entry's `sample` comes from.
enum SampleArg<'s> {
    /// The spec's fixed sample.
    Fixed,
    /// The input row's line (mapped, or read when the file cannot be mapped), its table
    /// and row (for errors).
    Line(&'s [u8], &'s InputTable, usize),
}

/// Serializes task entry `g` with the emitter's layout.
fn entry(
    spec: &TaskSpec<'_>,
    pre: &Prefixes,
    g: usize,
    sample: SampleArg<'_>,
    em: &mut Emitter,
    scratch: &mut Vec<f64>,
    rendered: &mut Rendered,
) -> Result<(), StreamError> {
    let p = &spec.p;
    let (a, b) = spec.groups[g];
    em.begin_obj();
    em.key_plain("_ng_task_index");
    em.i64(p.task(a));
    let st = spec.stats(g, scratch);
    for s in 0..5 {
        for (f, row) in st.iter().enumerate() {
            if let Some(v) = row[s] {
                em.member(&pre.stat[f][s]);
                match spec.int_extreme(g, f, s) {
                    Some(i) => em.i64(i),
                    None => em.f64(v),
                }
            }
        }
    }
    if spec.with_agent_ref {
        em.key_plain("agent_ref");
        let l = p.label[a] as usize;
        if rendered.agent_refs.len() <= l {
            rendered.agent_refs.resize(l + 1, None);
        }
        cached(em, &mut rendered.agent_refs[l], || Json::name_ref(&p.labels[l]));
    }
    em.key_plain("sample");
    match sample {
        SampleArg::Fixed => match &spec.samples {
            Samples::Fixed(j) => cached(em, &mut rendered.fixed_sample, || j.clone()),
            Samples::Inputs { .. } => unreachable!("a fixed sample comes from a fixed spec"),
        },
        SampleArg::Line(bytes, table, r) => {
            if !(em.is_compact() && transcode_compact(bytes, &DROP, &mut em.out)) {
                em.json(&sample_value(table, bytes, r)?);
            }
        }
    }
    let n = (b - a) as i64;
    let e = spec.expected(g);
    em.key_plain("num_rollouts");
    em.i64(n);
    em.key_plain("expected_num_rollouts");
    em.i64(e);
    em.key_plain("missing_num_rollouts");
    em.i64(e - n);
    em.key_plain("reward_profile_completion_pct");
    em.f64(if e == 0 { 100.0 } else { 100.0 * n as f64 / e as f64 });
    em.key_plain("rollout_infos");
    em.begin_arr();
    let t = p.t;
    for pos in a..b {
        let row = p.rows[pos];
        em.elem();
        em.begin_obj();
        em.key_plain("rollout_id");
        em.out.push(b'"');
        em.i64(t.task[row]);
        em.out.push(b':');
        em.i64(t.rollout[row]);
        em.out.push(b'"');
        em.member(&pre.info_task);
        em.i64(t.task[row]);
        em.member(&pre.info_rollout);
        em.i64(t.rollout[row]);
        rollout_info_each(t, &spec.info[t.order[row] as usize], row, |c, v| {
            em.member(&pre.info[c]);
            match v {
                Val::Int(i) => em.i64(i),
                Val::Float(x) => em.f64(x),
                Val::Bool(x) => em.bool(x),
                Val::Null => em.null(),
                Val::Str(s) => write_str(&mut em.out, s),
            }
        });
        em.end_obj();
    }
    em.end_arr();
    em.end_obj();
    Ok(())
}

/// Top-level keys a `sample` leaves out of its input row.
const DROP: [&str; 2] = ["_ng_task_index", "_ng_rollout_index"];

/// The `sample` value of input row `r` (whose line is `bytes`): the row without [`DROP`].
fn sample_value(table: &InputTable, bytes: &[u8], r: usize) -> Result<Json, StreamError> {
    let mut v = parse(bytes).map_err(|m| {
        StreamError::Input(Error::bad(Location::line(&table.path, table.line[r]), format!("invalid JSON: {m}")))
    })?;
    for k in DROP {
        v.remove(k);
    }
    Ok(v)
}

/// Writes every task entry: compact, one per line (`indent: None`), or as the elements
/// of an indented array whose value sits at depth `d` (`Some(d)`; brackets included).
/// Batches are computed in parallel while a writer thread writes the previous one.
pub fn write_tasks<W: Write + Send>(spec: &TaskSpec<'_>, indent: Option<usize>, w: &mut W) -> Result<(), StreamError> {
    if indent.is_some() {
        if spec.groups.is_empty() {
            return Ok(w.write_all(b"[]")?);
        }
        w.write_all(b"[")?;
    }
    write_task_entries(spec, indent, false, w)?;
    if let Some(d) = indent {
        close_array(d, w)?;
    }
    Ok(())
}

/// Closes an indented array of task entries whose value sits at depth `d`.
pub fn close_array<W: Write>(d: usize, w: &mut W) -> io::Result<()> {
    w.write_all(b"\n")?;
    w.write_all(&vec![b' '; 2 * d])?;
    w.write_all(b"]")
}

/// Writes the task entries of `spec` without the array's brackets; `after`: entries of
/// the same array were written before these (so the first one takes a comma). This lets
/// one array be written spec by spec, one bucket of tasks at a time.
pub fn write_task_entries<W: Write + Send>(
    spec: &TaskSpec<'_>,
    indent: Option<usize>,
    after: bool,
    w: &mut W,
) -> Result<(), StreamError> {
    let n = spec.groups.len();
    // Written buffers come back for reuse, so each batch fills memory that is already
    // mapped instead of fresh pages.
    let pool: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
    // Entries are objects at depth d + 1 in an indented array, so members sit at d + 2.
    let pre = Prefixes::new(spec, indent.map(|d| d + 2));
    let pre = &pre;
    let pool = &pool;
    let render = |start: usize, end: usize| render_batch(spec, pre, pool, indent, after, start, end);
    if n <= BATCH {
        // One batch (an aggregate of many small runs has one per run): rendered and
        // written here, without a writer thread.
        let parts = render(0, n)?;
        return write_parts(w, parts, pool).map_err(StreamError::Output);
    }
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Vec<u8>>>(1);
    std::thread::scope(|scope| -> Result<(), StreamError> {
        let writer = scope.spawn(move || -> io::Result<()> {
            for parts in rx {
                write_parts(w, parts, pool)?;
            }
            Ok(())
        });
        let mut start = 0;
        let mut result = Ok(());
        while start < n {
            let end = (start + BATCH).min(n);
            let parts = match render(start, end) {
                Ok(p) => p,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            if tx.send(parts).is_err() {
                break;
            }
            start = end;
        }
        drop(tx);
        let written = writer.join().unwrap_or_else(|_| Err(io::Error::other("writer thread panicked")));
        result.and(written.map_err(StreamError::Output))
    })
}

/// Writes a batch's buffers in one vectored write (no copy into the writer's buffer,
/// and large writes, which the kernel handles best), then hands them back to `pool`.
fn write_parts<W: Write>(w: &mut W, parts: Vec<Vec<u8>>, pool: &std::sync::Mutex<Vec<Vec<u8>>>) -> io::Result<()> {
    let mut slices: Vec<io::IoSlice<'_>> = parts.iter().map(|p| io::IoSlice::new(p)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match w.write_vectored(rest) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(n) => io::IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    drop(slices);
    let mut pool = pool.lock().unwrap_or_else(|e| e.into_inner());
    for mut p in parts {
        p.clear();
        pool.push(p);
    }
    Ok(())
}

/// Renders task entries `start..end` into buffers, one per chunk of consecutive
/// entries, the chunks in parallel when there are several.
fn render_batch(
    spec: &TaskSpec<'_>,
    pre: &Prefixes,
    pool: &std::sync::Mutex<Vec<Vec<u8>>>,
    indent: Option<usize>,
    after: bool,
    start: usize,
    end: usize,
) -> Result<Vec<Vec<u8>>, StreamError> {
    // Input rows are transcoded by the rendering jobs straight from a mapping of the
    // inputs file, made for each batch so the pages it touches leave memory with it;
    // without a mapping the batch reads its rows first.
    let batch_map = match &spec.samples {
        Samples::Inputs { table, .. } => map_file(table),
        Samples::Fixed(_) => None,
    };
    let mapped = batch_map.as_deref();
    let read = match (&spec.samples, mapped) {
        (Samples::Inputs { table, rows }, None) => read_rows(table, &rows[start..end]).map_err(StreamError::Input)?,
        _ => Vec::new(),
    };
    let sample_of = |g: usize| -> Result<SampleArg<'_>, StreamError> {
        match (&spec.samples, mapped) {
            (Samples::Fixed(_), _) => Ok(SampleArg::Fixed),
            (Samples::Inputs { table, rows }, Some(map)) => {
                row_in(table, map, rows[g]).map(|b| SampleArg::Line(b, table, rows[g])).map_err(StreamError::Input)
            }
            (Samples::Inputs { table, rows }, None) => Ok(SampleArg::Line(&read[g - start], table, rows[g])),
        }
    };
    let compact = indent.is_none();
    // Consecutive entries render into one buffer per chunk.
    let chunk = |(scratch, rendered): &mut (Vec<f64>, Rendered), g0: usize| -> Result<Vec<u8>, StreamError> {
        let buf = pool.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default();
        let mut em = match indent {
            None => Emitter::compact(),
            Some(d) => Emitter::indented(d + 1),
        };
        em.out = buf;
        for g in g0..(g0 + CHUNK).min(end) {
            if let Some(d) = indent {
                if g > 0 || after {
                    em.out.push(b',');
                }
                em.out.push(b'\n');
                em.out.resize(em.out.len() + 2 * (d + 1), b' ');
            }
            entry(spec, pre, g, sample_of(g)?, &mut em, scratch, rendered)?;
            if compact {
                em.out.push(b'\n');
            }
        }
        Ok(em.out)
    };
    let starts: Vec<usize> = (start..end).step_by(CHUNK).collect();
    if starts.len() == 1 {
        return Ok(vec![chunk(&mut Default::default(), start)?]);
    }
    starts.into_par_iter().map_init(Default::default, chunk).collect()
}

/// Writes `_aggregate_metrics.json`: a JSON array indented by two spaces.
pub fn write_aggregate<W: Write + Send>(entries: &[AggEntry<'_>], w: &mut W) -> Result<(), StreamError> {
    let parts = entries.iter().map(|e| (e.head.as_slice(), e.repeats.as_slice(), e.perf_summary.as_ref()));
    write_aggregate_with(parts, w, |i, depth, w| match &entries[i].tasks {
        Some(spec) => write_tasks(spec, Some(depth), w),
        None => Ok(w.write_all(b"[]")?),
    })
}

/// Writes `_aggregate_metrics.json` from each entry's head, repeat entries and perf
/// summary; `tasks(i, depth, w)` writes entry `i`'s `group_level_metrics` array (its
/// value at `depth`).
pub fn write_aggregate_with<'e, W: Write + Send>(
    entries: impl Iterator<Item = (&'e [(crate::json::Key, Json)], &'e [Json], Option<&'e Json>)>,
    w: &mut W,
    mut tasks: impl FnMut(usize, usize, &mut W) -> Result<(), StreamError>,
) -> Result<(), StreamError> {
    let mut em = Emitter::indented(0);
    em.begin_arr();
    for (i, (head, repeats, perf_summary)) in entries.enumerate() {
        em.elem();
        em.begin_obj();
        for (k, v) in head {
            em.key(k);
            em.json(v);
        }
        em.key("group_level_metrics");
        w.write_all(&em.out)?;
        em.out.clear();
        tasks(i, em.depth(), w)?;
        em.key("repeat_level_metrics");
        em.json(&Json::Arr(repeats.to_vec()));
        if let Some(p) = perf_summary {
            em.key("perf_summary");
            em.json(p);
        }
        em.end_obj();
    }
    em.end_arr();
    Ok(w.write_all(&em.out)?)
}
