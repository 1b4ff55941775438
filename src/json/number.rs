//! Numbers as NeMo Gym's writer (orjson) prints them.

/// Writes a float the way orjson (3.11 and later) does: the shortest digits that read back
/// to the same double, in decimal form from 1e-5 up to 1e16 (`0.1`, `100000.0`) and in
/// exponent form outside it (`1e-7`, `1e+16`), which is the form zmij prints; not-finite
/// values as `null`.
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    // Whole numbers below 1e16 print as the integer and `.0`; the integer printer is
    // faster. -0.0 keeps its sign through zmij.
    if v.abs() < 1e16 && (v as i64) as f64 == v && (v != 0.0 || v.is_sign_positive()) {
        write_i64(out, v as i64);
        out.extend_from_slice(b".0");
    } else if v.is_finite() {
        out.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
    } else {
        out.extend_from_slice(b"null");
    }
}

/// Appends `v` in decimal.
#[inline]
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}
