//! Fuzz target `json_parse`: see [`rollstat_fuzz::json_parse`] for the property it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rollstat_fuzz::json_parse(data));
