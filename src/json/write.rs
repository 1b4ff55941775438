//! The two byte-stable tree writers: compact (NeMo Gym's `orjson.dumps`, used for
//! `_reward_profiling.jsonl` and the profile `.json` files) and indented by two spaces
//! (`OPT_INDENT_2`, used for `_aggregate_metrics.json`). Strings are UTF-8, escaping only
//! `"`, `\\` and control characters.

use super::number::{write_f64, write_i64};
use super::Json;

/// Appends `s` JSON-escaped, without quotes: `"`, `\\` and control characters only
/// (UTF-8 passes through, `/` is not escaped), as orjson writes strings.
pub fn escape_into(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\') {
        out.extend_from_slice(bytes);
        return;
    }
    let mut start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            8 => b"\\b",
            12 => b"\\f",
            0..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(c >> 4)]);
                out.push(HEX[usize::from(c & 0xf)]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(esc);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
}

/// Appends `s` as a quoted JSON string.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    escape_into(out, s);
    out.push(b'"');
}

/// Compact form: `{"a":1,"b":[1,2]}`.
pub fn write_compact(out: &mut Vec<u8>, v: &Json) {
    match v {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Json::Int(i) => write_i64(out, *i),
        Json::Float(f) => write_f64(out, *f),
        Json::Str(s) => write_str(out, s),
        Json::Arr(items) => {
            out.push(b'[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_compact(out, x);
            }
            out.push(b']');
        }
        Json::Obj(items) => {
            out.push(b'{');
            for (i, (k, x)) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write_compact(out, x);
            }
            out.push(b'}');
        }
    }
}

fn newline(out: &mut Vec<u8>, depth: usize) {
    out.push(b'\n');
    out.resize(out.len() + 2 * depth, b' ');
}

/// Indented by two spaces, `": "` after keys, empty containers as `[]` / `{}`.
pub fn write_indented(out: &mut Vec<u8>, v: &Json, depth: usize) {
    match v {
        Json::Arr(items) if !items.is_empty() => {
            out.push(b'[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, depth + 1);
                write_indented(out, x, depth + 1);
            }
            newline(out, depth);
            out.push(b']');
        }
        Json::Obj(items) if !items.is_empty() => {
            out.push(b'{');
            for (i, (k, x)) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                newline(out, depth + 1);
                write_str(out, k);
                out.extend_from_slice(b": ");
                write_indented(out, x, depth + 1);
            }
            newline(out, depth);
            out.push(b'}');
        }
        other => write_compact(out, other),
    }
}
