//! Fuzz target `sql_metric`: see [`rollstat_fuzz::engine::sql_metric`] for the property it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rollstat_fuzz::engine::sql_metric(data));
