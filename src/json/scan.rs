//! A small, strict JSON scanner over one line of bytes.
//!
//! Rollout lines are mostly model text that no statistic needs. The scanner reads keys
//! and scalar values where we ask for them and *skips* everything else without building
//! it: a skipped string or object or array is crossed with SIMD loads and checked to be
//! JSON on the way ([`super::check`]), so a line is refused exactly when it is not JSON.
//! Nothing is allocated except for the strings we decide to keep.
//!
//! Accepted beyond RFC 8259, because Python writes them: the tokens `NaN`, `Infinity`
//! and `-Infinity` as numbers.

use super::scalar;
pub use super::scalar::{Scalar, ScanError, ScanResult};

/// The error for text after a line's value.
const AFTER_VALUE: &str = "unexpected text after the JSON value";

/// Cursor over one line.
pub struct Scanner<'a> {
    pub b: &'a [u8],
    pub i: usize,
}

#[inline]
fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

impl<'a> Scanner<'a> {
    pub fn new(b: &'a [u8]) -> Self {
        Scanner { b, i: 0 }
    }

    #[inline]
    fn err<T>(&self, msg: &'static str) -> ScanResult<T> {
        Err(ScanError { offset: self.i, msg })
    }

    #[inline]
    pub fn ws(&mut self) {
        while self.i < self.b.len() && is_ws(self.b[self.i]) {
            self.i += 1;
        }
    }

    /// The next byte that is not whitespace. Compact JSON (what rollout files hold) has
    /// none between tokens, so one comparison settles the common case.
    #[inline(always)]
    pub fn peek(&mut self) -> Option<u8> {
        match self.b.get(self.i) {
            Some(&c) if c > b' ' => Some(c),
            _ => {
                self.ws();
                self.b.get(self.i).copied()
            }
        }
    }

    #[inline]
    pub fn expect(&mut self, c: u8, msg: &'static str) -> ScanResult<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            self.err(msg)
        }
    }

    /// After the whole value: only whitespace may follow.
    pub fn end(&mut self) -> ScanResult<()> {
        self.ws();
        if self.i == self.b.len() {
            Ok(())
        } else {
            self.err(AFTER_VALUE)
        }
    }

    /// Reads a string starting at the opening quote; returns its raw content.
    #[inline(always)]
    pub fn string(&mut self) -> ScanResult<(&'a [u8], bool)> {
        if self.peek() != Some(b'"') {
            return self.err("expected a string");
        }
        let start = self.i + 1;
        let (end, escaped) = super::check::string_checked(self.b, start)?;
        self.i = end + 1;
        Ok((&self.b[start..end], escaped))
    }

    /// Object protocol: call after `{`; returns the next key or None at `}`. Always
    /// inlined: returned through memory, its result stalls the caller's next loads.
    #[inline(always)]
    pub fn next_key(&mut self, first: &mut bool) -> ScanResult<Option<(&'a [u8], bool)>> {
        match self.peek() {
            Some(b'}') => {
                self.i += 1;
                return Ok(None);
            }
            Some(b',') if !*first => {
                self.i += 1;
            }
            Some(b'"') if *first => {}
            _ => return self.err("expected `,` or `}` in object"),
        }
        *first = false;
        let k = self.string()?;
        self.expect(b':', "expected `:` after an object key")?;
        Ok(Some(k))
    }

    /// Reads any value: scalars are returned, containers are skipped.
    #[inline(always)]
    pub fn value(&mut self) -> ScanResult<Scalar<'a>> {
        match self.peek() {
            Some(b'"') => {
                let (s, e) = self.string()?;
                Ok(Scalar::Str(s, e))
            }
            Some(b'{') | Some(b'[') => self.skip_container(),
            Some(_) => {
                // A failure leaves the cursor where the error is, as the other readers do.
                let (v, end) = scalar::literal_or_number(self.b, self.i).inspect_err(|e| self.i = e.offset)?;
                self.i = end;
                Ok(v)
            }
            None => self.err("unexpected end of line, expected a JSON value"),
        }
    }

    /// Skips an object or array starting at its opening bracket, checking that it is
    /// JSON (see [`super::check`]). Returns whether it was an object and whether empty.
    pub fn skip_container(&mut self) -> ScanResult<Scalar<'a>> {
        let at = self.i;
        let object = self.b[at] == b'{';
        self.i += 1;
        let empty = matches!(self.peek(), Some(b'}') | Some(b']'));
        self.i = super::check::skip_checked(self.b, at)?;
        Ok(Scalar::Container { object, empty })
    }
}

/// The top-level key of the JSON object `line` whose value holds byte `offset`, for
/// naming where a line is broken (`None` when the byte is not inside a member's value).
pub fn top_key_at(line: &[u8], offset: usize) -> Option<String> {
    let mut s = Scanner::new(line);
    if s.peek() != Some(b'{') {
        return None;
    }
    s.i += 1;
    let mut first = true;
    while let Ok(Some(k)) = s.next_key(&mut first) {
        let start = s.i;
        let value = s.value();
        if start <= offset && (value.is_err() || offset < s.i) {
            return decode_str(k.0, k.1).ok();
        }
        value.ok()?;
    }
    None
}

/// Decodes a raw JSON string body (as returned by [`Scanner::string`]).
pub fn decode_str(raw: &[u8], escaped: bool) -> Result<String, &'static str> {
    if !escaped {
        return std::str::from_utf8(raw).map(|s| s.to_string()).map_err(|_| "invalid UTF-8 in string");
    }
    let mut out: Vec<u8> = Vec::with_capacity(raw.len());
    decode_escaped(raw, |bytes| out.extend_from_slice(bytes))?;
    String::from_utf8(out).map_err(|_| "invalid UTF-8 in string")
}

/// The characters of a raw JSON string body with escapes, handed to `out` in order: the
/// runs between escapes as written, each escape as the bytes of what it stands for (an
/// unpaired surrogate as U+FFFD). Nothing is validated beyond the escapes: the body of a
/// string the checker passed on a line validated as UTF-8 gives UTF-8.
#[inline]
pub fn decode_escaped(raw: &[u8], mut out: impl FnMut(&[u8])) -> Result<(), &'static str> {
    let mut i = 0;
    while let Some(k) = memchr::memchr(b'\\', &raw[i..]) {
        if k > 0 {
            out(&raw[i..i + k]);
        }
        i += k;
        let e = *raw.get(i + 1).ok_or("bad escape")?;
        i += 2;
        match e {
            b'"' => out(b"\""),
            b'\\' => out(b"\\"),
            b'/' => out(b"/"),
            b'b' => out(&[8]),
            b'f' => out(&[12]),
            b'n' => out(b"\n"),
            b'r' => out(b"\r"),
            b't' => out(b"\t"),
            b'u' => {
                let hex = |s: &[u8]| -> Result<u32, &'static str> {
                    let s = std::str::from_utf8(s).map_err(|_| "bad \\u escape")?;
                    u32::from_str_radix(s, 16).map_err(|_| "bad \\u escape")
                };
                let cp = hex(raw.get(i..i + 4).ok_or("bad \\u escape")?)?;
                i += 4;
                let ch = if (0xD800..0xDC00).contains(&cp) && raw.get(i..i + 2) == Some(b"\\u") {
                    let lo = hex(raw.get(i + 2..i + 6).ok_or("bad \\u escape")?)?;
                    if (0xDC00..0xE000).contains(&lo) {
                        i += 6;
                        char::from_u32(0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00))
                    } else {
                        None
                    }
                } else {
                    char::from_u32(cp)
                };
                let ch = ch.unwrap_or('\u{FFFD}');
                let mut buf = [0u8; 4];
                out(ch.encode_utf8(&mut buf).as_bytes());
            }
            _ => return Err("bad escape"),
        }
    }
    if i < raw.len() {
        out(&raw[i..]);
    }
    Ok(())
}

/// Whether `bytes`, a file's last line without its newline, that failed to read, reads as
/// a write that stopped mid-line: not UTF-8 or not JSON only within its last few bytes
/// (a token cut short), and not because of text after a complete value. Anything else is
/// damage to report, not a cut to skip.
pub fn cut_mid_write(bytes: &[u8]) -> bool {
    /// The longest token a cut can leave unfinished: `\ud83d\ude0` is 11 bytes.
    const LAST_TOKEN: usize = 12;
    let near_end = |at: usize| at + LAST_TOKEN >= bytes.len();
    if let Err(e) = std::str::from_utf8(bytes) {
        if !near_end(e.valid_up_to()) {
            return false;
        }
    }
    let mut s = Scanner::new(bytes);
    match s.value().and_then(|_| s.end()) {
        Ok(()) => false,
        Err(e) => near_end(e.offset) && e.msg != AFTER_VALUE,
    }
}

/// Whether a raw key (as [`Scanner::next_key`] returns it) is `name` once its escapes are
/// decoded: NeMo Gym's reader takes `"\u005fng_task_index"` for `_ng_task_index`. Keys
/// without escapes, nearly all, are compared as they are.
#[inline]
pub fn key_is(raw: (&[u8], bool), name: &[u8]) -> bool {
    if raw.1 {
        escaped_key_is(raw.0, name)
    } else {
        bytes_eq(raw.0, name)
    }
}

#[cold]
fn escaped_key_is(raw: &[u8], name: &[u8]) -> bool {
    decode_str(raw, true).is_ok_and(|k| k.as_bytes() == name)
}

/// Whether a raw key starts with `_` once its escapes are decoded (a private field).
#[inline]
pub fn key_is_private(raw: (&[u8], bool)) -> bool {
    match raw.0.first() {
        Some(b'_') => true,
        Some(b'\\') => decode_str(raw.0, true).is_ok_and(|k| k.starts_with('_')),
        _ => false,
    }
}

/// `a == b` for short byte strings such as keys, compared with two overlapping loads per
/// side instead of a `memcmp` call (up to 16 bytes); longer ones fall back to it.
#[inline(always)]
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if (8..=16).contains(&n) {
        let w = |s: &[u8], i: usize| u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"));
        return w(a, 0) == w(b, 0) && w(a, n - 8) == w(b, n - 8);
    }
    if (4..8).contains(&n) {
        let w = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().expect("4 bytes"));
        return w(a, 0) == w(b, 0) && w(a, n - 4) == w(b, n - 4);
    }
    if n < 4 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    a == b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A last line cut short by a crash is told apart from a damaged one.
    #[test]
    fn cut_lines_are_told_from_damaged_ones() {
        let long = "x".repeat(100);
        let cut: Vec<Vec<u8>> = vec![
            br#"{"a": 1, "b": tr"#.to_vec(),
            format!(r#"{{"a": "{long}"#).into_bytes(),
            br#"{"a": "\u12"#.to_vec(),
            br#"{"a": "\ud83d\ude0"#.to_vec(),
            br#"{"a": "x\"#.to_vec(),
            br#"{"a": 1."#.to_vec(),
            br#"{"a": -"#.to_vec(),
            br#"{"a""#.to_vec(),
            br#"{"a":"#.to_vec(),
            br#"{"a": [1, {"b": nul"#.to_vec(),
            br#"{"a": -Infin"#.to_vec(),
            [&br#"{"a": "caf"#[..], &[0xC3]].concat(),
        ];
        for c in &cut {
            assert!(cut_mid_write(c), "{}", String::from_utf8_lossy(c));
        }
        let damaged: Vec<Vec<u8>> = vec![
            br#"{"a": 1}}"#.to_vec(),
            br#"{"a": 1} x"#.to_vec(),
            format!(r#"{{"a": 1,, "b": "{long}"#).into_bytes(),
            br#"{"a": 1}"#.to_vec(),
            br#"123"#.to_vec(),
            format!("{{\"a\": \"\u{1}{long}").into_bytes(),
            [&br#"{"a": ""#[..], &[0xFF], long.as_bytes()].concat(),
            format!(r#"{{"a": [1}}, "b": "{long}"#).into_bytes(),
        ];
        for d in &damaged {
            assert!(!cut_mid_write(d), "{}", String::from_utf8_lossy(d));
        }
    }

    #[test]
    fn scans_scalars_and_skips_containers() {
        let line = br#"{"a": 1, "b": -2.5e3, "c": {"x": [1, {"y": "}]\""}]}, "d": "q\"z", "e": NaN, "f": -Infinity, "g": null, "h": true, "i": []}"#;
        let mut s = Scanner::new(line);
        s.expect(b'{', "obj").unwrap();
        let mut first = true;
        let mut got = Vec::new();
        while let Some(k) = s.next_key(&mut first).unwrap() {
            got.push((decode_str(k.0, k.1).unwrap(), s.value().unwrap()));
        }
        s.end().unwrap();
        assert_eq!(got[0].1, Scalar::Int(1));
        assert_eq!(got[1].1, Scalar::Float(-2500.0));
        assert_eq!(got[2].1, Scalar::Container { object: true, empty: false });
        assert_eq!(got[3].1, Scalar::Str(br#"q\"z"#, true));
        assert!(matches!(got[4].1, Scalar::Float(v) if v.is_nan()));
        assert_eq!(got[5].1, Scalar::Float(f64::NEG_INFINITY));
        assert_eq!(got[6].1, Scalar::Null);
        assert_eq!(got[7].1, Scalar::Bool(true));
        assert_eq!(got[8].1, Scalar::Container { object: false, empty: true });
    }

    #[test]
    fn rejects_malformed() {
        for bad in
            [&br#"{"a": }"#[..], br#"{"a": [1, 2}"#, br#"{"a": "x"#, br#"{"a" 1}"#, br#"{"a": 01}"#, br#"{"a": 1,}"#]
        {
            let mut s = Scanner::new(bad);
            s.expect(b'{', "obj").unwrap();
            let mut first = true;
            let mut failed = false;
            loop {
                match s.next_key(&mut first) {
                    Ok(Some(_)) => {
                        if s.value().is_err() {
                            failed = true;
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            assert!(failed, "{}", String::from_utf8_lossy(bad));
        }
    }

    /// A broken byte is named by the top-level member whose value holds it.
    #[test]
    fn top_key_at_names_the_member_holding_a_byte() {
        let line = br#"{"a": 1, "b\u0041": {"x": [1,,2]}, "c": "z"}"#;
        let comma = line.windows(2).position(|w| w == b",,").unwrap() + 1;
        assert_eq!(top_key_at(line, comma).as_deref(), Some("bA"));
        assert_eq!(top_key_at(line, 6).as_deref(), Some("a"));
        // Inside a key, or on the line's own punctuation: no member.
        assert_eq!(top_key_at(line, 2), None);
        assert_eq!(top_key_at(line, 0), None);
    }

    /// The short-string comparison agrees with `==` for every length up to 40, equal
    /// and differing at each position.
    #[test]
    fn bytes_eq_matches_slice_equality() {
        for n in 0..40usize {
            let a: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(bytes_eq(&a, &a.clone()));
            for k in 0..n {
                let mut b = a.clone();
                b[k] ^= 0x20;
                assert!(!bytes_eq(&a, &b), "length {n}, differing at {k}");
            }
            assert!(!bytes_eq(&a, &a[..n.saturating_sub(1)]) || n == 0);
        }
    }

    /// Numbers read through the exact fast path equal the full decimal parser's, bit
    /// for bit, over digit counts, fraction lengths and exponents on both sides of
    /// the fast path's limits.
    #[test]
    fn numbers_match_the_decimal_parser() {
        let mut rng = crate::generate::rng::Rng::new(0x5DEE_CE66_D1CE_5EED);
        let mut texts: Vec<String> = vec![
            "0.0".into(),
            "-0.0".into(),
            "1.0".into(),
            "0.1".into(),
            "0.950597765692109".into(),
            "1782185780.79".into(),
            "9007199254740993.0".into(),
            "9007199254740992.5".into(),
            "1e22".into(),
            "1e23".into(),
            "1.5e-22".into(),
            "123456789012345678.9".into(),
            "0.30000000000000004".into(),
            "-2.5e3".into(),
            "4E+2".into(),
            "1e-400".into(),
        ];
        for _ in 0..200_000 {
            let int_len = 1 + (rng.next_u64() % 12) as usize;
            let frac_len = (rng.next_u64() % 14) as usize;
            let mut t = String::new();
            if rng.next_u64().is_multiple_of(3) {
                t.push('-');
            }
            for k in 0..int_len {
                let d = (rng.next_u64() % 10) as u8;
                t.push(char::from(if k == 0 && int_len > 1 { b'1' + d % 9 } else { b'0' + d }));
            }
            if frac_len > 0 {
                t.push('.');
                for _ in 0..frac_len {
                    t.push(char::from(b'0' + (rng.next_u64() % 10) as u8));
                }
            }
            match rng.next_u64() % 4 {
                0 => t.push_str(&format!("e{}", rng.next_u64() % 30)),
                1 => t.push_str(&format!("e-{}", rng.next_u64() % 30)),
                _ if frac_len == 0 => t.push_str(".5"),
                _ => {}
            }
            texts.push(t);
        }
        for t in &texts {
            let mut s = Scanner::new(t.as_bytes());
            match s.value().unwrap() {
                Scalar::Float(v) => {
                    let want: f64 = t.parse().unwrap();
                    assert_eq!(v.to_bits(), want.to_bits(), "{t}");
                }
                other => panic!("{t}: {other:?}"),
            }
            assert_eq!(s.i, t.len());
        }
        for (t, v) in
            [("0", 0i64), ("-0", 0), ("123456789012345678", 123456789012345678), ("-9223372036854775808", i64::MIN)]
        {
            assert_eq!(Scanner::new(t.as_bytes()).value().unwrap(), Scalar::Int(v), "{t}");
        }
        assert_eq!(Scanner::new(b"18446744073709551616").value().unwrap(), Scalar::Float(18446744073709551616.0));
        // Beyond a double's range is refused (NeMo Gym's reader refuses it too).
        for t in ["1e400", "-1e400", "1.7976931348623159e308"] {
            assert_eq!(Scanner::new(t.as_bytes()).value().unwrap_err().msg, "number too large for a double", "{t}");
        }
    }

    #[test]
    fn decodes_escapes() {
        assert_eq!(decode_str(br#"a\n\u00e9\ud83d\ude00\/"#, true).unwrap(), "a\né😀/");
    }
}
