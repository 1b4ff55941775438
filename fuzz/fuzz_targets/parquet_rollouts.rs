//! Fuzz target `parquet_rollouts`: see [`rollstat_fuzz::engine::parquet_rollouts`] for the property it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rollstat_fuzz::engine::parquet_rollouts(data));
