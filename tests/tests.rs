//! rollstat's integration tests: one binary, topic modules, each running the real
//! `rollstat` executable in fresh temp folders.

mod bad_input;
mod commands;
mod common;
mod compare;
mod conformance;
mod docs;
mod eval_compare;
mod faults;
mod fuzz_corpus;
mod gate;
mod gym_aggregate;
mod layout;
mod limits;
mod select;
mod task_identity;
mod vagen;
mod view;
