//! Fuzz target `commands`: see [`rollstat_fuzz::engine::commands`] for the property it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rollstat_fuzz::engine::commands(data));
