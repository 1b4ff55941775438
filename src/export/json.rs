//! An ordered JSON value and its two byte-stable writers: compact (NeMo Gym's
//! `orjson.dumps`, used for `_reward_profiling.jsonl` and the profile `.json` files) and
//! indented by two spaces (`OPT_INDENT_2`, used for `_aggregate_metrics.json`).
//!
//! Floats are written in shortest round-trip form with a decimal point or exponent
//! (`1.0`, `0.1`, `1e-7`); NaN and infinities become `null` as orjson writes them.
//! Strings are UTF-8, escaping only `"`, `\` and control characters.

use std::sync::Arc;

/// Object keys are shared: the same field names repeat in every task entry.
pub type Key = Arc<str>;

/// The ordered members of an object.
pub type Members = Vec<(Key, Json)>;

/// An ordered JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(Key, Json)>),
}

impl Json {
    pub fn obj() -> Json {
        Json::Obj(Vec::new())
    }
    /// Appends or replaces a key (replacement keeps the key's position, like a Python dict).
    pub fn set(&mut self, k: &str, v: Json) {
        if let Json::Obj(items) = self {
            if let Some(slot) = items.iter_mut().find(|(kk, _)| &**kk == k) {
                slot.1 = v;
            } else {
                items.push((Arc::from(k), v));
            }
        }
    }
    /// Appends a key known not to be present yet.
    pub fn push(&mut self, k: Key, v: Json) {
        if let Json::Obj(items) = self {
            items.push((k, v));
        }
    }
    pub fn get(&self, k: &str) -> Option<&Json> {
        match self {
            Json::Obj(items) => items.iter().find(|(kk, _)| &**kk == k).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn remove(&mut self, k: &str) -> Option<Json> {
        match self {
            Json::Obj(items) => {
                let pos = items.iter().position(|(kk, _)| &**kk == k)?;
                Some(items.remove(pos).1)
            }
            _ => None,
        }
    }
    pub fn name_ref(name: &str) -> Json {
        Json::Obj(vec![(Arc::from("name"), Json::Str(name.to_string()))])
    }
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Json::Int(i) => Some(i as f64),
            Json::Float(f) => Some(f),
            Json::Bool(b) => Some(if b { 1.0 } else { 0.0 }),
            _ => None,
        }
    }
}

/// Deepest nesting the tree parser and the transcoder follow: NeMo Gym's reader (orjson)
/// reads 1,024 levels and refuses more, so every row it could write back fits.
const MAX_DEPTH: usize = 1024;

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

/// Two-digit groups `00`..`99`.
const DIGITS2: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Appends `v` in decimal, written in place (no intermediate buffer or copy call).
#[inline]
pub fn write_u64(out: &mut Vec<u8>, mut v: u64) {
    let n = v.checked_ilog10().unwrap_or(0) as usize + 1;
    out.reserve(n);
    // SAFETY: `n` bytes of spare capacity are reserved; every one of them is written
    // (two digits at a time from the end, then the leading one or two) before the
    // length grows over them.
    unsafe {
        let start = out.as_mut_ptr().add(out.len());
        let mut p = start.add(n);
        while v >= 100 {
            let r = (v % 100) as usize * 2;
            v /= 100;
            p = p.sub(2);
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(r), p, 2);
        }
        if v >= 10 {
            p = p.sub(2);
            std::ptr::copy_nonoverlapping(DIGITS2.as_ptr().add(v as usize * 2), p, 2);
        } else {
            p = p.sub(1);
            *p = b'0' + v as u8;
        }
        debug_assert_eq!(p, start);
        out.set_len(out.len() + n);
    }
}

#[inline]
pub fn write_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    write_u64(out, v.unsigned_abs());
}

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

/// Parses one complete JSON text (used for the few input rows we echo as `sample`).
/// Python's `NaN`/`Infinity` are accepted.
pub fn parse(bytes: &[u8]) -> Result<Json, String> {
    let mut p = Parser { b: bytes, i: 0 };
    let v = p.value(0)?;
    p.ws();
    if p.i != p.b.len() {
        return Err(format!("unexpected text at byte {}", p.i + 1));
    }
    Ok(v)
}

/// Re-serializes one JSON object compactly, as [`parse`] then [`write_compact`] would,
/// without building a tree, leaving out the top-level keys in `drop`. Returns `false`
/// (with `out` restored) for what only the tree path handles exactly: duplicate keys,
/// raw control characters in strings, or text that is not valid JSON.
pub fn transcode_compact(bytes: &[u8], drop: &[&str], out: &mut Vec<u8>) -> bool {
    let start = out.len();
    let mut s = crate::ingest::scan::Scanner::new(bytes);
    let ok = simdutf8::basic::from_utf8(bytes).is_ok()
        && s.peek() == Some(b'{')
        && transcode_value(&mut s, drop, 0, out).is_some()
        && s.end().is_ok();
    if !ok {
        out.truncate(start);
    }
    ok
}

fn transcode_value(
    s: &mut crate::ingest::scan::Scanner<'_>,
    drop: &[&str],
    depth: usize,
    out: &mut Vec<u8>,
) -> Option<()> {
    use crate::ingest::scan::{decode_str, Scalar};
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
                    crate::ingest::scan::Scanner::value(s).ok()?;
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

/// Whether every escape in the raw string body `raw` is one that [`escape_into`] writes
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

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn value(&mut self, depth: usize) -> Result<Json, String> {
        if depth > MAX_DEPTH {
            return Err("nesting deeper than 1,024 levels (NeMo Gym's reader refuses such rows too)".into());
        }
        self.ws();
        let mut s = crate::ingest::scan::Scanner { b: self.b, i: self.i };
        match self.b.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(items));
                }
                loop {
                    self.ws();
                    let mut s = crate::ingest::scan::Scanner { b: self.b, i: self.i };
                    let (raw, esc) = s.string().map_err(|e| e.msg.to_string())?;
                    self.i = s.i;
                    let k = crate::ingest::scan::decode_str(raw, esc)?;
                    self.ws();
                    if self.b.get(self.i) != Some(&b':') {
                        return Err("expected `:`".into());
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    // Python keeps the first position and the last value of a repeated key.
                    if let Some(slot) = items.iter_mut().find(|(kk, _): &&mut (Key, Json)| **kk == *k) {
                        slot.1 = v;
                    } else {
                        items.push((Arc::from(k.as_str()), v));
                    }
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(Json::Obj(items));
                        }
                        _ => return Err("expected `,` or `}`".into()),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                self.ws();
                if self.b.get(self.i) == Some(&b']') {
                    self.i += 1;
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    self.ws();
                    match self.b.get(self.i) {
                        Some(b',') => self.i += 1,
                        Some(b']') => {
                            self.i += 1;
                            return Ok(Json::Arr(items));
                        }
                        _ => return Err("expected `,` or `]`".into()),
                    }
                }
            }
            _ => {
                use crate::ingest::scan::Scalar;
                let v = s.value().map_err(|e| e.msg.to_string())?;
                self.i = s.i;
                Ok(match v {
                    Scalar::Null => Json::Null,
                    Scalar::Bool(b) => Json::Bool(b),
                    Scalar::Int(i) => Json::Int(i),
                    Scalar::Float(f) => Json::Float(f),
                    Scalar::Str(raw, esc) => Json::Str(crate::ingest::scan::decode_str(raw, esc)?),
                    Scalar::Container { .. } => unreachable!("containers handled above"),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streaming re-serializer writes what parse + write_compact write, or declines.
    #[test]
    fn transcode_matches_the_tree_path() {
        let cases: [&[u8]; 16] = [
            "{\"s\": \"plain text ✓\", \"_ng_rollout_index\": 2}".as_bytes(),
            // Escapes copied as they are, and ones that are rewritten, alone and together.
            br#"{"k": "say \"hi\"\n\ttab \\ back \b\f", "l": "end\\"}"#,
            br#"{"k": "a\/b", "l": "\u00e9", "m": "\\/"}"#,
            br#"{"k": "C:\\new \u00e9 \/ \u0001 \ud83d\ude00", "l": "\\\"\\n"}"#,
            b"{\"k\": \"esc \\\" and a raw\ttab\"}",
            br#"{"k": "\r\n", "l": ["\\", "\"", "x\\y"]}"#,
            br#"{"k": "\u005c\u0022 \u00"}"#,
            br#"{"k": "\u005c\u0022"}"#,
            br#"{"_ng_task_index": 3, "a": [1, 2.50, -0.0, 1e5, {"b": null}], "_ng_rollout_index": 0, "c": "\u00e9\/x\n"}"#,
            br#"{ "x" : { } , "y" : [ ] , "z" : true , "w" : false , "n" : NaN, "big": 12345678901234567890 }"#,
            br#"{"nested": {"_ng_task_index": 1}, "s": "plain text"}"#,
            br#"{"dup": 1, "dup": 2}"#,
            b"{\"ctl\": \"a\tb\"}",
            br#"{"a": 1,}"#,
            br#"{"a": [1, 2}"#,
            br#"[1, 2]"#,
        ];
        for c in cases {
            let mut got = Vec::new();
            let ok = transcode_compact(c, &["_ng_task_index", "_ng_rollout_index"], &mut got);
            match parse(c) {
                Ok(mut tree) if matches!(tree, Json::Obj(_)) && ok => {
                    tree.remove("_ng_task_index");
                    tree.remove("_ng_rollout_index");
                    let mut want = Vec::new();
                    write_compact(&mut want, &tree);
                    assert_eq!(String::from_utf8(got).unwrap(), String::from_utf8(want).unwrap());
                }
                _ => assert!(got.is_empty(), "{}", String::from_utf8_lossy(c)),
            }
        }
        // Declined only where the tree path is needed.
        let mut o = Vec::new();
        assert!(transcode_compact(br#"{"a": {"b": [1, "x"]}}"#, &[], &mut o));
        assert!(!transcode_compact(br#"{"dup": 1, "dup": 2}"#, &[], &mut o));
    }

    /// orjson's text for `v` built from ryu's digits, for reference: ryu writes the same
    /// digits and decimal/exponent choice, but positive exponents without their `+`.
    fn orjson_form(v: f64) -> String {
        let r = ryu::Buffer::new().format_finite(v).to_string();
        match r.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => r,
        }
    }

    /// Values whose text orjson 3.13 gave (NeMo Gym 0.7.0's writer).
    #[test]
    fn floats_as_orjson_wrote_them() {
        let cases = [
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (1e22, "1e+22"),
            (1.2345678901234568e20, "1.2345678901234568e+20"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (1e-5, "0.00001"),
            (0.0001, "0.0001"),
            (9_999_999_999_999_998.0, "9999999999999998.0"),
            (-0.0, "-0.0"),
            (-1e16, "-1e+16"),
            (2.5e-8, "2.5e-8"),
            (123456.789, "123456.789"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-7, "1e-7"),
            (100000.0, "100000.0"),
            (-2.5, "-2.5"),
        ];
        for (v, want) in cases {
            let mut o = Vec::new();
            write_f64(&mut o, v);
            assert_eq!(std::str::from_utf8(&o).unwrap(), want, "{v:e}");
        }
    }

    /// The whole-number shortcut prints what the float printer prints.
    #[test]
    fn whole_floats_match_the_reference() {
        let mut vals = vec![0.0, -0.0, 1.0, -1.0, 9_999_999_999_999_998.0, 1e15, -1e15, 1e16, 1e17, 2f64.powi(53)];
        let mut x = 1.0f64;
        while x < 1e18 {
            vals.extend([x, -x, x + 1.0, (x * 1.5).floor()]);
            x *= 3.0;
        }
        for v in vals {
            let mut o = Vec::new();
            write_f64(&mut o, v);
            assert_eq!(String::from_utf8(o).unwrap(), orjson_form(v), "{v}");
        }
    }

    /// Floats with fractions and exponents, also when appended after existing bytes.
    #[test]
    fn fractional_floats_match_the_reference() {
        let mut x = 1.234_567_890_123e-300f64;
        while x < 1e300 {
            for v in [x, -x, 1.0 / x, x + 0.5] {
                let mut o = b"ab".to_vec();
                write_f64(&mut o, v);
                assert_eq!(&o[..2], b"ab");
                assert_eq!(std::str::from_utf8(&o[2..]).unwrap(), orjson_form(v), "{v}");
            }
            x *= 7.77;
        }
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut o = Vec::new();
            write_f64(&mut o, v);
            assert_eq!(o, b"null");
        }
    }

    /// Random bit patterns (all magnitudes) and random values in the ranges statistics
    /// take print as the reference prints them.
    #[test]
    fn random_floats_match_the_reference() {
        let mut rng = crate::generate::rng::Rng::new(7);
        let mut o = Vec::new();
        let mut checked = 0;
        for k in 0..400_000 {
            let bits = rng.next_u64();
            let v = match k % 4 {
                0 => f64::from_bits(bits),
                1 => (bits >> 11) as f64 / (1u64 << 53) as f64,
                2 => (bits >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((bits % 40) as i32 - 20),
                _ => ((bits >> 11) % 100_000) as f64 / ((bits % 9) + 1) as f64,
            };
            if !v.is_finite() {
                continue;
            }
            o.clear();
            write_f64(&mut o, v);
            assert_eq!(std::str::from_utf8(&o).unwrap(), orjson_form(v), "{v:e}");
            checked += 1;
        }
        assert!(checked > 390_000);
    }

    /// The in-place integer printer agrees with itoa at every digit-count boundary.
    #[test]
    fn integers_match_itoa() {
        let mut vals = vec![0i64, 1, -1, 9, 10, 99, 100, 101, i64::MAX, i64::MIN, i64::MIN + 1];
        let mut p = 1i64;
        while let Some(q) = p.checked_mul(10) {
            vals.extend([p - 1, p, p + 1, -(p - 1), -p, -(p + 1), q / 3]);
            p = q;
        }
        for v in vals {
            let mut o = b"x".to_vec();
            write_i64(&mut o, v);
            assert_eq!(std::str::from_utf8(&o[1..]).unwrap(), itoa::Buffer::new().format(v), "{v}");
        }
        for v in [u64::MAX, u64::MAX - 1, 1 << 63, 18_446_744_073_709_551_606] {
            let mut o = Vec::new();
            write_u64(&mut o, v);
            assert_eq!(std::str::from_utf8(&o).unwrap(), itoa::Buffer::new().format(v), "{v}");
        }
    }

    #[test]
    fn round_trips_and_indents() {
        let v = parse(br#"{"a": [1, 2.0, {"b": null}], "c": "\u00e9\n", "d": {}, "e": []}"#).unwrap();
        let mut o = Vec::new();
        write_compact(&mut o, &v);
        assert_eq!(String::from_utf8(o).unwrap(), r#"{"a":[1,2.0,{"b":null}],"c":"é\n","d":{},"e":[]}"#);
        let mut o = Vec::new();
        write_indented(&mut o, &v, 0);
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "{\n  \"a\": [\n    1,\n    2.0,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": \"é\\n\",\n  \"d\": {},\n  \"e\": []\n}"
        );
    }
}
