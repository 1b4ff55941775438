//! Ingest: NeMo Gym rollout and materialized-input JSONL files into typed columns.
//!
//! Files are memory-mapped (pipes: read in bounded blocks) and parsed in parallel pieces
//! (see [`lines`]); the JSON scanner ([`crate::json::scan`]) skips model payloads without
//! building them, checking that they are JSON ([`crate::json::check`]). The result is a
//! [`RolloutTable`] (one row per rollout, one column per scalar field) and an
//! [`InputTable`] (one row per expected rollout, with where its bytes are).

/// VAGEN / verl training batches (JSONL or Parquet) for `batch-metrics`.
#[cfg(feature = "engine")]
pub mod batch;
pub mod fields;
pub mod fingerprint;
#[cfg(feature = "engine")]
pub mod frame;
pub mod input_slice;
pub mod inputs;
pub mod labels;
pub mod lines;
#[cfg(feature = "engine")]
pub mod parquet;
pub mod rollouts;
pub mod sidecar;
pub mod slice;
pub mod table;

pub use inputs::{read_inputs, InputTable};
pub use lines::LineMap;
pub use rollouts::{read_rollouts, read_rollouts_bytes, read_rollouts_files, ReadOptions, RolloutTable};
pub use table::{tag, Column, Source};

/// Gives the heap's free memory back to the system: glibc keeps what a parallel reader
/// freed in its arenas, where it counts as resident (0.4 GB after reading 10M input
/// rows).
pub(crate) fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}
