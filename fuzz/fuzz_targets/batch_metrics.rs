//! Fuzz target `batch_metrics`: see [`rollstat_fuzz::engine::batch_metrics`] for the property it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rollstat_fuzz::engine::batch_metrics(data));
