//! rollstat — fast statistics over LLM-eval and RL rollout results.
//!
//! Data flows one way: files → [`ingest`] (typed columns: the rollout and input tables,
//! run labels, numeric fields) → [`metrics`] (the task, agent, repeat and across-repeat
//! levels of NeMo Gym's reward profile and aggregate, custom metrics, comparisons and
//! the result tables, using the pure kernels of [`stats`]) → [`export`] (renderers:
//! NeMo Gym's JSON artifacts, Parquet, atomic files). [`query`] runs SQL over the result
//! tables. [`workflow`] is what each command does, as library functions; [`cli`] only
//! turns flags into a workflow's configuration and prints its report.
//!
//! Two leaves any layer may use: [`json`] (the ordered JSON value, the line scanner and
//! checker, the writers) and [`schema`] (the name, order and type of every fixed column
//! and the key it renders as). [`generate`] writes synthetic sweeps in NeMo Gym's format;
//! [`trace`] times phases and shows terminal progress notes; [`warn`] says warnings as
//! they arise (or holds them for a host); [`signals`] removes a run's unfinished outputs
//! when it is interrupted.
//!
//! The `engine` feature (on by default) brings the table engine, Polars, and with it
//! [`schema`], [`metrics`], [`query`], [`workflow`], [`cli`] and the table parts of
//! [`ingest`] and [`export`]. Without it the crate is the Polars-free core the fuzz
//! targets build: [`json`], the rollout and input readers, [`stats`] and [`generate`].

#[cfg(feature = "engine")]
pub mod cli;
pub(crate) mod codec;
pub mod error;
pub mod export;
pub mod generate;
pub mod health;
pub mod ingest;
pub mod json;
#[cfg(feature = "engine")]
pub mod metrics;
pub mod python_float;
#[cfg(feature = "engine")]
pub mod query;
#[cfg(feature = "engine")]
pub mod schema;
pub mod signals;
pub mod stats;
pub mod trace;
#[cfg(feature = "engine")]
pub mod view;
pub mod warn;
#[cfg(feature = "engine")]
pub mod workflow;

pub use error::{Error, Result};

/// The table engine rollstat's tables are built with, for library users who read them.
#[cfg(feature = "engine")]
pub use polars;
