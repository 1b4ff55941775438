//! `rollstat view`: the rollouts behind every number. A local web server over the runs
//! `compare` would read (several files are several runs, a fan-out file one run per
//! agent): an overview of each run's score and its tasks by how often they were solved,
//! a task list filtered and sorted on the server, and each task's rollouts with their
//! transcripts, read from the mapped files when a page asks for them.
//!
//! [`index`] holds offsets, not text; [`answer`] turns it into the pages' JSON with every
//! size bounded; [`server`] serves the page and the answers, read only.

pub mod answer;
pub mod index;
pub mod lake;
pub mod server;

pub use index::ViewRuns;
pub use lake::LakeSweeps;
pub use server::{start, Running, ViewConfig, DEFAULT_PORT};
