//! Fuzz target `rollout_lines`: see [`rollstat_fuzz::rollout_lines`] for the property it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rollstat_fuzz::rollout_lines(data));
