//! Python's rules that leak into the health reports: which values are "truthy", what
//! counts as whitespace, how `str()` spells a value (a rollout id built from a record's
//! fields is that text), and how lenient model validation turns strings into numbers.

use crate::json::Json;

/// Python's `str.isspace()` for one character: Unicode white space plus the four ASCII
/// separators (U+001C to U+001F) that Python also counts.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `s.strip()` with no arguments.
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// `bytes.strip()`: ASCII space, tab, newline, carriage return, vertical tab, form feed.
pub fn strip_bytes(b: &[u8]) -> &[u8] {
    let space = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = b.iter().position(|c| !space(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !space(c)).map_or(start, |i| i + 1);
    &b[start..end]
}

/// Python truthiness of a JSON value.
pub fn truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Int(i) => *i != 0,
        Json::Float(f) => *f != 0.0,
        Json::Str(s) => !s.is_empty(),
        Json::Arr(a) => !a.is_empty(),
        Json::Obj(o) => !o.is_empty(),
    }
}

/// `str(v)`: a string is itself, everything else its `repr`.
pub fn str_of(v: &Json) -> String {
    match v {
        Json::Str(s) => s.clone(),
        other => {
            let mut out = String::new();
            repr_into(&mut out, other);
            out
        }
    }
}

/// `repr(v)` for the value Python's JSON reader builds (`None`, `True`, dicts and lists
/// with `, ` and `: ` separators).
pub fn repr_into(out: &mut String, v: &Json) {
    match v {
        Json::Null => out.push_str("None"),
        Json::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Json::Int(i) => out.push_str(itoa::Buffer::new().format(*i)),
        Json::Float(f) => out.push_str(&crate::python_float::repr(*f)),
        Json::Str(s) => str_repr_into(out, s),
        Json::Arr(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr_into(out, x);
            }
            out.push(']');
        }
        Json::Obj(items) => {
            out.push('{');
            for (i, (k, x)) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                str_repr_into(out, k);
                out.push_str(": ");
                repr_into(out, x);
            }
            out.push('}');
        }
    }
}

/// `repr(s)`: single quotes unless the text holds a single quote and no double quote;
/// backslash escapes for the quote, `\\`, `\t`, `\n`, `\r` and characters Python does not
/// print.
fn str_repr_into(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if printable(c) => out.push(c),
            c => {
                let n = c as u32;
                let text = if n < 0x100 {
                    format!("\\x{n:02x}")
                } else if n < 0x10000 {
                    format!("\\u{n:04x}")
                } else {
                    format!("\\U{n:08x}")
                };
                out.push_str(&text);
            }
        }
    }
    out.push(quote);
}

/// `str.isprintable()` for one character: false for control, format, private-use and
/// separator characters other than the ASCII space. Unassigned code points, which Python
/// also refuses, are printed as they are (only the non-characters are known here).
fn printable(c: char) -> bool {
    let n = c as u32;
    if n < 0x7f {
        return n >= 0x20;
    }
    !matches!(n,
        0x7f..=0xa0 | 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x890..=0x891 | 0x8e2 | 0x1680 | 0x180e
        | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064 | 0x2066..=0x206f | 0x3000 | 0xd800..=0xf8ff
        | 0xfdd0..=0xfdef | 0xfeff | 0xfff9..=0xfffb | 0xfffe..=0xffff | 0x110bd | 0x110cd | 0x13430..=0x1343f
        | 0x1bca0..=0x1bca3 | 0x1d173..=0x1d17a | 0xe0001 | 0xe0020..=0xe007f | 0xf0000..)
}

/// 2^63: floats whose magnitude reaches it are too large for lenient validation's
/// integers.
pub const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// Underscores as lenient number parsing allows them: not first or last, never two in a
/// row; `digits_around` also requires a digit on both sides (integers). Returns the text
/// without them, or `None` when they are misplaced.
fn without_underscores(s: &str, digits_around: bool) -> Option<String> {
    if !s.contains('_') {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    if b[0] == b'_' || b[b.len() - 1] == b'_' || s.contains("__") {
        return None;
    }
    if digits_around {
        let around = |i: usize| b[i - 1].is_ascii_digit() && b[i + 1].is_ascii_digit();
        if (1..b.len() - 1).any(|i| b[i] == b'_' && !around(i)) {
            return None;
        }
    }
    Some(s.replace('_', ""))
}

/// A string read as an integer by lenient validation: surrounding white space ignored,
/// an optional sign, digits with single underscores between them, and an optional
/// fraction made only of zeros (`"3.00"` is 3).
pub fn int_from_str(s: &str) -> Option<i128> {
    let t = without_underscores(s.trim(), true)?;
    let t = match t.split_once('.') {
        Some((whole, frac)) if !frac.is_empty() && frac.bytes().all(|c| c == b'0') => whole.to_string(),
        Some(_) => return None,
        None => t,
    };
    let digits = t.strip_prefix(['+', '-']).unwrap_or(&t);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    t.parse().ok()
}

/// A string read as a float by lenient validation: surrounding white space ignored,
/// underscores as [`int_from_str`] allows them (anywhere inside), and Rust's reading of
/// decimal text, which like Python's takes `inf`, `infinity` and `nan` in any case.
pub fn float_from_str(s: &str) -> Option<f64> {
    let t = without_underscores(s.trim(), false)?;
    t.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn containers_print_as_python_prints_them() {
        let v = crate::json::parse(br#"{"a": [1.5, "it's", null, true, 1e-7, 1e16], "b": "x\ny\u00a0"}"#).unwrap();
        assert_eq!(str_of(&v), r#"{'a': [1.5, "it's", None, True, 1e-07, 1e+16], 'b': 'x\ny\xa0'}"#);
    }

    #[test]
    fn lenient_numbers_read_as_validation_reads_them() {
        for (s, want) in [("3", Some(3)), (" +3 ", Some(3)), ("3.00", Some(3)), ("1_000", Some(1000)), ("+_1", None)] {
            assert_eq!(int_from_str(s), want, "{s}");
        }
        for s in ["3.5", "1e3", "1__0", "_1", "1.", "", "0x10"] {
            assert_eq!(int_from_str(s), None, "{s}");
        }
        assert_eq!(float_from_str("1_.5"), Some(1.5));
        assert_eq!(float_from_str(" INF "), Some(f64::INFINITY));
        assert_eq!(float_from_str("1__0"), None);
        assert_eq!(strip_bytes(b"\x0b {} \r\n"), b"{}");
    }
}
