//! Minimal JSON emission into byte buffers (no serde on the hot path).

use crate::json::escape_into;

/// Returns `s` JSON-escaped (without quotes).
pub(super) fn escaped(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 2);
    escape_into(&mut v, s);
    v
}

/// Appends a quoted JSON string.
pub(super) fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    escape_into(out, s);
    out.push(b'"');
}

/// Appends an integer.
pub(super) fn int<I: itoa::Integer>(out: &mut Vec<u8>, v: I) {
    let mut buf = itoa::Buffer::new();
    out.extend_from_slice(buf.format(v).as_bytes());
}

/// Appends a finite float in shortest round-trip form (`1.0`, `0.25`, `1e-7`).
pub(super) fn float(out: &mut Vec<u8>, v: f64) {
    debug_assert!(v.is_finite(), "generator produced a non-finite float");
    let v = if v.is_finite() { v } else { 0.0 };
    let mut buf = ryu::Buffer::new();
    out.extend_from_slice(buf.format_finite(v).as_bytes());
}

/// Appends `true` or `false`.
pub(super) fn boolean(out: &mut Vec<u8>, v: bool) {
    out.extend_from_slice(if v { b"true" } else { b"false" });
}

/// Appends `n` lowercase hex digits of `v` (low nibbles, n <= 16).
pub(super) fn hex(out: &mut Vec<u8>, v: u64, n: u32) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for i in (0..n).rev() {
        out.push(HEX[((v >> (4 * i)) & 0xf) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_specials_and_controls() {
        let mut v = Vec::new();
        string(&mut v, "a\"b\\c\nd\te\u{1}f é ✅ 答案");
        assert_eq!(String::from_utf8(v).unwrap(), "\"a\\\"b\\\\c\\nd\\te\\u0001f é ✅ 答案\"");
    }

    #[test]
    fn numbers() {
        let mut v = Vec::new();
        float(&mut v, 1.0);
        v.push(b' ');
        float(&mut v, 1e-7);
        v.push(b' ');
        int(&mut v, -42i64);
        v.push(b' ');
        hex(&mut v, 0xab, 4);
        assert_eq!(String::from_utf8(v).unwrap(), "1.0 1e-7 -42 00ab");
    }
}
