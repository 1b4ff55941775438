//! Re-serializing a row compactly without building a tree: the fast path for the rows
//! `profile` writes back, falling back to [`super::parse`] for what only the tree handles.

use super::number::{write_f64, write_i64};
use super::scan::{decode_str, Scalar, Scanner};
use super::write::write_str;
use super::MAX_DEPTH;

/// Re-serializes one JSON object compactly, as [`parse`] then [`write_compact`] would,
/// without building a tree, leaving out the top-level keys in `drop`. Returns `false`
/// (with `out` restored) for what only the tree path handles exactly: duplicate keys,
/// raw control characters in strings, or text that is not valid JSON.
pub fn transcode_compact(bytes: &[u8], drop: &[&str], out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let mut s = Scanner::new(bytes);
    let ok = simdutf8::basic::from_utf8(bytes).is_ok()
        && s.peek() == Some(b'{')
        && transcode_value(&mut s, drop, 0, out).is_some()
        && s.end().is_ok();
    if !ok {
        out.truncate(start);
    }
    ok
}

fn transcode_value(s: &mut Scanner<'_>, drop: &[&str], depth: usize, out: &mut Vec<u8>) -> Option<()> {
    if depth > MAX_DEPTH {
        return None;
    }
    match s.peek()? {
        b'{' => {
            s.i += 1;
            out.push(b'{');
            let mut keys: Vec<std::borrow::Cow<'_, str>> = Vec::new();
            let mut first = true;
            let mut wrote = false;
            while let Some((raw, esc)) = s.next_key(&mut first).ok()? {
                let key = if esc {
                    std::borrow::Cow::Owned(decode_str(raw, true).ok()?)
                } else {
                    std::borrow::Cow::Borrowed(std::str::from_utf8(raw).ok()?)
                };
                if keys.contains(&key) {
                    return None;
                }
                if depth == 0 && drop.contains(&key.as_ref()) {
                    Scanner::value(s).ok()?;
                    keys.push(key);
                    continue;
                }
                if wrote {
                    out.push(b',');
                }
                wrote = true;
                write_str(out, &key);
                out.push(b':');
                keys.push(key);
                transcode_value(s, drop, depth + 1, out)?;
            }
            out.push(b'}');
        }
        b'[' => {
            s.i += 1;
            out.push(b'[');
            if s.peek()? == b']' {
                s.i += 1;
            } else {
                loop {
                    transcode_value(s, drop, depth + 1, out)?;
                    match s.peek()? {
                        b',' => {
                            s.i += 1;
                            out.push(b',');
                        }
                        b']' => {
                            s.i += 1;
                            break;
                        }
                        _ => return None,
                    }
                }
            }
            out.push(b']');
        }
        _ => match s.value().ok()? {
            Scalar::Null => out.extend_from_slice(b"null"),
            Scalar::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
            Scalar::Int(i) => write_i64(out, i),
            Scalar::Float(f) => write_f64(out, f),
            // Copied as it is when writing it back would give the same bytes: no raw
            // control characters, and only escapes that decoding and re-escaping keep.
            Scalar::Str(raw, escaped) if !has_control(raw) && (!escaped || escapes_kept(raw)) => {
                out.push(b'"');
                out.extend_from_slice(raw);
                out.push(b'"');
            }
            // Raw control characters in an unescaped string: the tree path decides.
            Scalar::Str(_, false) => return None,
            // `\/`, `\uXXXX`, or raw control characters next to escapes.
            Scalar::Str(raw, true) => write_str(out, &decode_str(raw, true).ok()?),
            Scalar::Container { .. } => return None,
        },
    }
    Some(())
}

/// Whether `raw` holds a byte below 0x20 (checked without an early exit, so the loop
/// vectorizes).
#[inline]
fn has_control(raw: &[u8]) -> bool {
    raw.iter().fold(false, |any, &c| any | (c < 0x20))
}

/// Whether every escape in the raw string body `raw` is one that [`super::write::escape_into`] writes
/// back the same (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`).
fn escapes_kept(raw: &[u8]) -> bool {
    let mut i = 0;
    while let Some(p) = memchr::memchr(b'\\', &raw[i..]) {
        let k = i + p;
        match raw.get(k + 1) {
            Some(b'"' | b'\\' | b'n' | b'r' | b't' | b'b' | b'f') => i = k + 2,
            _ => return false,
        }
    }
    true
}
