//! rollstat — fast statistics over LLM-eval and RL rollout results.
//!
//! Data flows one way: files → [`ingest`] (typed columns) → [`metrics`] (the levels of
//! NeMo Gym's reward profile and aggregate, custom metrics, using [`stats`]) →
//! [`export`] (bytes on disk). [`query`] runs SQL over the same tables; [`cli`] only
//! wires these together.

pub mod cli;
pub mod error;
pub mod export;
pub mod generate;
pub mod ingest;
pub mod metrics;
pub mod query;
pub mod stats;
pub mod trace;

pub use error::{Error, Result};
