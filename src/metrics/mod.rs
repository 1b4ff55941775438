//! The statistics levels and custom metrics, as pure computations over the ingested
//! tables: [`profile`], [`aggregate`], the levels they share
//! ([`levels`]), `perf_summary` ([`perf`]), custom metrics ([`custom`], [`pass_at_k`])
//! and NeMo Gym's comparison of runs from their aggregate files ([`eval_compare`]).
//! Nothing here does I/O.

pub mod aggregate;
pub mod batch;
pub mod compare;
pub mod custom;
pub mod eval_compare;
pub mod failures;
pub mod gate;
pub mod levels;
pub mod pass_at_k;
pub mod perf;
pub mod profile;
pub mod tables;
pub mod task_identity;
pub mod tasks;
pub mod warnings;
