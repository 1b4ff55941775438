//! Seeded, deterministic synthetic sweep generator in NeMo Gym's file format.
//!
//! [`generate`] writes `materialized_inputs.jsonl` (one row per expected
//! rollout, ordered by task, agent, repeat) and `rollouts.jsonl` (the rollouts
//! that "ran", shuffled like an asynchronous collection) into a directory.
//!
//! Design:
//! * The sweep is the sequence of input rows ordered by (task, agent, repeat).
//!   It is cut into chunks of a fixed number of input rows (512, fewer for
//!   very long lines; a function of the options only) that are
//!   generated in parallel with rayon, straight into byte buffers (no serde;
//!   numbers via `itoa`/`ryu`, strings escaped by hand).
//! * Every random choice of a row is drawn from a splitmix64 stream seeded by
//!   `hash(seed, task, rollout index)`, every per-task choice from
//!   `hash(seed, task)`, so content never depends on scheduling.
//! * Chunks are grouped in batches of `BATCH_CHUNKS`; inside a batch all
//!   rollout lines are shuffled with a generator seeded by `hash(seed, batch)`.
//!   Batches are streamed to disk in order by a writer thread while the next
//!   batch is generated, so memory stays bounded (about two batches).
//! * Output bytes are therefore identical for any thread count.
//! * Both files are staged as one output set (see [`crate::export::atomic`]) and
//!   renamed into place only when both are complete.

mod json;
mod options;
pub(crate) mod rng;
mod rows;

use std::fs;
use std::io::{self, IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use rayon::prelude::*;

use self::rng::{hash, Rng};
use self::rows::{ChunkOut, Ctx};
use crate::export::atomic::OutputSet;
use crate::export::direct::FileWriter;
pub use options::{GenerateOptions, RewardKind};

/// Chunks per batch: the unit of shuffling and of streaming to disk.
const BATCH_CHUNKS: usize = 32;
const TAG_SHUFFLE: u64 = 0x7368_7566;
/// Largest accepted `text_bytes` (64 MiB of text per rollout line).
const MAX_TEXT_BYTES: usize = 64 << 20;

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            tasks: 100,
            repeats: 4,
            agents: 2,
            seed: 1,
            task_seed: None,
            missing_frac: 0.0,
            failure_frac: 0.0,
            masked_frac: 0.0,
            reward: RewardKind::Mixed,
            fan_out: false,
            env_server_stamp: false,
            ng_perf_frac: 0.0,
            text_bytes: 1000,
            threads: 0,
        }
    }
}

/// What [`generate`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerateSummary {
    pub rollouts_path: PathBuf,
    pub inputs_path: PathBuf,
    /// The failures sidecar, when failures were asked for.
    pub failures_path: Option<PathBuf>,
    /// Lines in rollouts.jsonl.
    pub rollouts: usize,
    /// Lines in materialized_inputs.jsonl (expected rollouts).
    pub expected: usize,
    pub bytes_rollouts: u64,
    pub bytes_inputs: u64,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Checks the options; returns the number of expected rollouts (input rows).
fn validate(opts: &GenerateOptions) -> io::Result<u64> {
    for (name, v) in [("tasks", opts.tasks), ("repeats", opts.repeats), ("agents", opts.agents)] {
        if v == 0 {
            return Err(invalid(format!("generate: {name} must be at least 1")));
        }
    }
    for (name, v) in [
        ("missing_frac", opts.missing_frac),
        ("failure_frac", opts.failure_frac),
        ("masked_frac", opts.masked_frac),
        ("ng_perf_frac", opts.ng_perf_frac),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(invalid(format!("generate: {name} must be a fraction in [0, 1], got {v}")));
        }
    }
    if opts.text_bytes > MAX_TEXT_BYTES {
        return Err(invalid(format!("generate: text_bytes must be at most {MAX_TEXT_BYTES}, got {}", opts.text_bytes)));
    }
    let per_task =
        if opts.fan_out { (opts.agents as u64).checked_mul(opts.repeats as u64) } else { Some(opts.repeats as u64) };
    per_task
        .and_then(|p| p.checked_mul(opts.tasks as u64))
        .filter(|&n| usize::try_from(n).is_ok() && n < u64::MAX / 2)
        .ok_or_else(|| {
            invalid(format!(
                "generate: sweep too large ({} tasks x {} repeats x {} agents)",
                opts.tasks, opts.repeats, opts.agents
            ))
        })
}

/// Generates a sweep into `out_dir` (created if needed): `materialized_inputs.jsonl`
/// and `rollouts.jsonl`. Output bytes depend only on `opts` minus `threads`.
pub fn generate(opts: &GenerateOptions, out_dir: &Path) -> io::Result<GenerateSummary> {
    let total = validate(opts)?;
    fs::create_dir_all(out_dir)?;
    let inputs_path = out_dir.join("materialized_inputs.jsonl");
    let rollouts_path = out_dir.join("rollouts.jsonl");
    let failures_path = crate::ingest::sidecar::beside(&rollouts_path, crate::ingest::sidecar::FAILURES);
    // Both files are staged and renamed into place together, only when both are complete.
    let as_io = |e: crate::Error| match e {
        crate::Error::Io { source, .. } => source,
        other => io::Error::other(other.to_string()),
    };
    let mut out = OutputSet::new(&[]);
    let inputs = out.create(&inputs_path).map_err(as_io)?;
    let rollouts = out.create(&rollouts_path).map_err(as_io)?;
    let failures = if opts.failure_frac > 0.0 { Some(out.create(&failures_path).map_err(as_io)?) } else { None };
    let ctx = Ctx::new(opts, total);
    let (rollouts, bytes_inputs, bytes_rollouts) = write_files(&ctx, opts, inputs, rollouts, failures)?;
    out.commit().map_err(as_io)?;
    Ok(GenerateSummary {
        rollouts_path,
        inputs_path,
        failures_path: (opts.failure_frac > 0.0).then_some(failures_path),
        rollouts,
        expected: total as usize,
        bytes_rollouts,
        bytes_inputs,
    })
}

/// [`generate`] into `out_dir`, created when missing (and removed again when the run
/// fails); options out of range are a usage
/// error, anything else a failure to write there.
pub fn generate_sweep(opts: &GenerateOptions, out_dir: &Path) -> crate::Result<GenerateSummary> {
    crate::export::atomic::in_out_dir(out_dir, || {
        generate(opts, out_dir).map_err(|e| {
            if e.kind() == io::ErrorKind::InvalidInput {
                crate::Error::Usage(e.to_string())
            } else {
                crate::Error::write(out_dir, e)
            }
        })
    })
}

/// A batch of chunks handed from the generating thread to the writer.
struct Batch {
    index: u64,
    chunks: Vec<ChunkOut>,
}

/// Generates all batches and streams them to the two temporary files.
/// Returns (rollout lines, input bytes, rollout bytes).
fn write_files(
    ctx: &Ctx,
    opts: &GenerateOptions,
    inputs: FileWriter,
    rollouts: FileWriter,
    failures: Option<FileWriter>,
) -> io::Result<(usize, u64, u64)> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(opts.threads).build().map_err(io::Error::other)?;
    let n_chunks = usize::try_from(ctx.num_chunks()).map_err(io::Error::other)?;
    let n_batches = n_chunks.div_ceil(BATCH_CHUNKS);
    let seed = opts.seed;
    // Rendezvous channel: at most one batch being written while the next one
    // is generated.
    let (tx, rx) = mpsc::sync_channel::<Batch>(0);
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || write_batches(rx, inputs, rollouts, failures, seed));
        for b in 0..n_batches {
            let lo = b * BATCH_CHUNKS;
            let hi = (lo + BATCH_CHUNKS).min(n_chunks);
            let chunks: Vec<ChunkOut> =
                pool.install(|| (lo..hi).into_par_iter().map(|c| ctx.chunk(c as u64)).collect());
            let batch = Batch { index: b as u64, chunks };
            if tx.send(batch).is_err() {
                break; // the writer failed; its error is reported below
            }
        }
        drop(tx);
        writer.join().unwrap_or_else(|_| Err(io::Error::other("generate: writer thread panicked")))
    })
}

fn write_batches(
    rx: mpsc::Receiver<Batch>,
    mut inputs: FileWriter,
    mut rollouts: FileWriter,
    mut failures: Option<FileWriter>,
    seed: u64,
) -> io::Result<(usize, u64, u64)> {
    let (mut lines_total, mut bytes_i, mut bytes_r) = (0usize, 0u64, 0u64);
    for batch in rx {
        let blocks: Vec<&[u8]> = batch.chunks.iter().map(|c| &c.inputs[..]).collect();
        bytes_i += write_slices(&mut inputs, &blocks)?;
        let mut lines: Vec<&[u8]> = batch.chunks.iter().flat_map(|c| c.rollout_lines()).collect();
        let mut rng = Rng::new(hash(&[seed, batch.index, TAG_SHUFFLE]));
        for i in (1..lines.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            lines.swap(i, j);
        }
        bytes_r += write_slices(&mut rollouts, &lines)?;
        lines_total += lines.len();
        if let Some(f) = failures.as_mut() {
            let blocks: Vec<&[u8]> = batch.chunks.iter().map(|c| &c.failures[..]).collect();
            write_slices(f, &blocks)?;
        }
    }
    inputs.finish()?;
    rollouts.finish()?;
    if let Some(f) = failures.as_mut() {
        f.finish()?;
    }
    Ok((lines_total, bytes_i, bytes_r))
}

/// Writes all `parts` in order with vectored writes (no copy into a user-space
/// buffer); returns the byte count.
fn write_slices(file: &mut impl Write, parts: &[&[u8]]) -> io::Result<u64> {
    const MAX_IOV: usize = 1024;
    let mut total = 0u64;
    let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(MAX_IOV);
    for group in parts.chunks(MAX_IOV) {
        slices.clear();
        slices.extend(group.iter().filter(|p| !p.is_empty()).map(|p| IoSlice::new(p)));
        total += group.iter().map(|p| p.len() as u64).sum::<u64>();
        let mut bufs = &mut slices[..];
        while !bufs.is_empty() {
            match file.write_vectored(bufs) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "generate: failed to write output")),
                Ok(n) => IoSlice::advance_slices(&mut bufs, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests;
