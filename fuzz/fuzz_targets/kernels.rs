//! Fuzz target `kernels`: see [`rollstat_fuzz::kernels`] for the property it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rollstat_fuzz::kernels(data));
