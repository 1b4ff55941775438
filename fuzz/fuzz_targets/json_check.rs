//! Fuzz target `json_check`: see [`rollstat_fuzz::json_check`] for the property it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rollstat_fuzz::json_check(data));
