//! Crossing the objects and arrays no statistic needs (model input and output) while
//! checking that they are JSON as NeMo Gym's line reader (orjson) reads it: every string
//! closed, with valid escapes (surrogates in pairs) and no raw control characters;
//! numbers and literals well formed (plus Python's `NaN` and infinities, which rollstat
//! accepts everywhere); `,` and `:` where the grammar puts them; brackets matched by
//! kind. Nothing is built.
//! String bodies, which hold most of the bytes, are crossed 32 bytes at a time (AVX2)
//! or 16 (SSE2, every x86_64 CPU).

use super::scalar::{literal_or_number, ScanError};

/// Open containers: one bit per level (1 for an object), inline up to 64 levels and in
/// a vector beyond.
struct Kinds {
    depth: usize,
    bits: u64,
    deep: Vec<bool>,
}

impl Kinds {
    #[inline(always)]
    fn push(&mut self, object: bool) {
        if self.depth < 64 {
            self.bits = (self.bits << 1) | u64::from(object);
        } else {
            self.deep.push(object);
        }
        self.depth += 1;
    }
    #[inline(always)]
    fn pop(&mut self) {
        self.depth -= 1;
        if self.depth < 64 {
            self.bits >>= 1;
        } else {
            self.deep.pop();
        }
    }
    #[inline(always)]
    fn object(&self) -> bool {
        if self.depth <= 64 {
            self.bits & 1 == 1
        } else {
            self.deep.last() == Some(&true)
        }
    }
}

#[inline(always)]
fn fail<T>(offset: usize, msg: &'static str) -> Result<T, ScanError> {
    Err(ScanError { offset, msg })
}

/// The next byte at or after `i` that is not JSON whitespace (compact JSON has none, so
/// one comparison settles the common case); `i` is moved to it.
#[inline(always)]
fn next(b: &[u8], i: &mut usize) -> Option<u8> {
    loop {
        match b.get(*i) {
            Some(&c) if c > b' ' => return Some(c),
            Some(b' ' | b'\t' | b'\r' | b'\n') => *i += 1,
            Some(&c) => return Some(c),
            None => return None,
        }
    }
}

/// From the `{` or `[` at `at` (which must be inside `b`), the index just after the
/// value it opens, checking the whole value (see the module documentation). An error
/// names the first offending byte.
pub fn skip_checked(b: &[u8], at: usize) -> Result<usize, ScanError> {
    debug_assert!(matches!(b.get(at), Some(b'{' | b'[')));
    #[cfg(target_arch = "x86_64")]
    {
        if b.len() - at >= 64 && std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was just detected on this CPU.
            return unsafe { skip_avx2(b, at) };
        }
    }
    walk::<Base>(b, at)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn skip_avx2(b: &[u8], at: usize) -> Result<usize, ScanError> {
    walk::<Avx2>(b, at)
}

/// [`skip_checked`] with strings crossed by `S`. Strings and brackets, most of the
/// tokens of model payloads, are told apart by two tests before the scanner's general
/// dispatch reads the rest.
#[inline(always)]
fn walk<S: Special>(b: &[u8], at: usize) -> Result<usize, ScanError> {
    let mut i = at;
    let mut k = Kinds { depth: 0, bits: 0, deep: Vec::new() };
    'value: loop {
        let c = match next(b, &mut i) {
            Some(c) => c,
            None => return fail(i, "unexpected end of line, expected a JSON value"),
        };
        if c == b'"' {
            i = string::<S>(b, i)?;
        } else if c & 0xDF == b'[' {
            // `[` or `{` (they differ only in bit 5).
            let object = c == b'{';
            i += 1;
            k.push(object);
            let d = next(b, &mut i);
            if d == Some(c + 2) {
                // `]` or `}`: empty.
                i += 1;
                k.pop();
            } else if !object {
                continue 'value;
            } else if d == Some(b'"') {
                i = key::<S>(b, i)?;
                continue 'value;
            } else {
                return fail(i, "expected a string key or `}` in object");
            }
        } else {
            // Numbers and literals: the scanner's readers, which check their grammar.
            i = literal_or_number(b, i)?.1;
        }
        // After a value: close containers until one continues.
        while k.depth > 0 {
            let object = k.object();
            let c = next(b, &mut i);
            if c == Some(b',') {
                i += 1;
                if object {
                    if next(b, &mut i) != Some(b'"') {
                        return fail(i, "expected a string key in object");
                    }
                    i = key::<S>(b, i)?;
                }
                continue 'value;
            }
            if c == Some(if object { b'}' } else { b']' }) {
                i += 1;
                k.pop();
            } else if c.is_none() {
                return fail(i, "unexpected end of line inside an object or array");
            } else if object {
                return fail(i, "expected `,` or `}` in object");
            } else {
                return fail(i, "expected `,` or `]` in array");
            }
        }
        return Ok(i);
    }
}

/// An object key at the quote `at` and the `:` after it; returns the index after `:`.
#[inline(always)]
fn key<S: Special>(b: &[u8], at: usize) -> Result<usize, ScanError> {
    let mut i = string::<S>(b, at)?;
    if next(b, &mut i) != Some(b':') {
        return fail(i, "expected `:` after an object key");
    }
    Ok(i + 1)
}

/// The bytes that may follow a backslash as a one-character escape.
const ESCAPE: [bool; 256] = {
    let mut t = [false; 256];
    let ok = b"\"\\/bfnrt";
    let mut k = 0;
    while k < ok.len() {
        t[ok[k] as usize] = true;
        k += 1;
    }
    t
};

/// The closing quote of a string whose content starts at `from` (just after its opening
/// quote, so `from >= 1`), checking its escapes and that it holds no raw control
/// character, and whether it holds any escape.
pub fn string_checked(b: &[u8], from: usize) -> Result<(usize, bool), ScanError> {
    debug_assert!(from >= 1 && b.get(from - 1) == Some(&b'"'));
    let (end, escaped) = string_esc::<Base>(b, from - 1)?;
    Ok((end - 1, escaped))
}

/// A string at the quote `at`; returns the index after its closing quote.
#[inline(always)]
fn string<S: Special>(b: &[u8], at: usize) -> Result<usize, ScanError> {
    string_esc::<S>(b, at).map(|(end, _)| end)
}

/// [`string`], also telling whether the string holds an escape.
#[inline(always)]
fn string_esc<S: Special>(b: &[u8], at: usize) -> Result<(usize, bool), ScanError> {
    let mut i = at + 1;
    let mut escaped = false;
    loop {
        i = S::special(b, i);
        let c = match b.get(i) {
            Some(&c) => c,
            None => return fail(b.len(), "unterminated string"),
        };
        if c == b'"' {
            return Ok((i + 1, escaped));
        }
        if c != b'\\' {
            return fail(i, "control character in string");
        }
        escaped = true;
        let e = b.get(i + 1).copied().unwrap_or(0);
        if ESCAPE[usize::from(e)] {
            i += 2;
        } else if e == b'u' {
            i = unicode_escape(b, i)?;
        } else {
            return fail(i, "invalid escape in string");
        }
    }
}

/// The `\\uXXXX` escape at `at` (its backslash); returns the index after it, or after
/// the low half that must follow a high surrogate. A surrogate without its other half
/// is refused, as NeMo Gym's reader (orjson) refuses it.
fn unicode_escape(b: &[u8], at: usize) -> Result<usize, ScanError> {
    let code = |i: usize| -> Option<u32> {
        let h = b.get(i..i + 6)?;
        if &h[..2] != b"\\u" {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(&h[2..]).ok()?, 16)
            .ok()
            .filter(|_| h[2..].iter().all(u8::is_ascii_hexdigit))
    };
    match code(at) {
        None => fail(at, "invalid \\u escape in string"),
        Some(0xD800..=0xDBFF) if matches!(code(at + 6), Some(0xDC00..=0xDFFF)) => Ok(at + 12),
        Some(0xD800..=0xDFFF) => fail(at, "unpaired surrogate \\u escape in string"),
        Some(_) => Ok(at + 6),
    }
}

/// Finds the bytes a string scan must stop at: `"`, `\` and control characters (below
/// 0x20), [`Special::WIDTH`] bytes per load.
trait Special {
    const WIDTH: usize;
    /// Bit k set where `p[k]` is a stop byte.
    ///
    /// # Safety
    /// `p` points at `WIDTH` readable bytes, and the CPU has the instructions the
    /// implementation uses.
    unsafe fn stops(p: *const u8) -> u32;

    /// The first index at or after `i` holding a stop byte, or `b.len()`.
    #[inline(always)]
    fn special(b: &[u8], mut i: usize) -> usize {
        while i + Self::WIDTH <= b.len() {
            // SAFETY: `b[i..i + WIDTH]` is in bounds; the CPU requirement is the
            // implementation's to meet (see each one).
            let m = unsafe { Self::stops(b.as_ptr().add(i)) };
            if m != 0 {
                return i + m.trailing_zeros() as usize;
            }
            i += Self::WIDTH;
        }
        while i < b.len() && !matches!(b[i], b'"' | b'\\' | 0..=0x1f) {
            i += 1;
        }
        i
    }
}

/// The stop mask of the vector at `p`, with one instruction set's intrinsics (the same
/// steps at every width).
#[cfg(target_arch = "x86_64")]
macro_rules! stop_mask {
    ($p:ident, $vec:ty, $load:ident, $set1:ident, $eq:ident, $max:ident, $or:ident, $movemask:ident) => {{
        let v = $load($p as *const $vec);
        let ctl = $set1(0x1f);
        // A byte is at most 0x1f exactly when max(byte, 0x1f) is 0x1f.
        let low = $eq($max(v, ctl), ctl);
        let q = $eq(v, $set1(b'"' as i8));
        let bs = $eq(v, $set1(b'\\' as i8));
        $movemask($or($or(q, bs), low)) as u32
    }};
}

/// 16 bytes per load with SSE2, which every x86_64 CPU has (one at a time elsewhere).
struct Base;

impl Special for Base {
    #[cfg(target_arch = "x86_64")]
    const WIDTH: usize = 16;
    #[cfg(not(target_arch = "x86_64"))]
    const WIDTH: usize = 1;

    #[inline(always)]
    unsafe fn stops(p: *const u8) -> u32 {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            // SAFETY: SSE2 is part of the x86_64 baseline; the caller gives 16 bytes.
            unsafe {
                stop_mask!(
                    p,
                    __m128i,
                    _mm_loadu_si128,
                    _mm_set1_epi8,
                    _mm_cmpeq_epi8,
                    _mm_max_epu8,
                    _mm_or_si128,
                    _mm_movemask_epi8
                )
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: the caller gives one byte.
        u32::from(matches!(unsafe { *p }, b'"' | b'\\' | 0..=0x1f))
    }
}

/// 32 bytes per load with AVX2; only used inside [`skip_avx2`].
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Special for Avx2 {
    const WIDTH: usize = 32;

    #[inline(always)]
    unsafe fn stops(p: *const u8) -> u32 {
        use std::arch::x86_64::*;
        // SAFETY: inlined into `skip_avx2`, which runs only after AVX2 was detected; the
        // caller gives 32 bytes.
        unsafe {
            stop_mask!(
                p,
                __m256i,
                _mm256_loadu_si256,
                _mm256_set1_epi8,
                _mm256_cmpeq_epi8,
                _mm256_max_epu8,
                _mm256_or_si256,
                _mm256_movemask_epi8
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `text` is one JSON value (an object or array), by [`skip_checked`].
    fn accepts(text: &[u8]) -> bool {
        match skip_checked(text, 0) {
            Ok(end) => text[end..].iter().all(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n')),
            Err(_) => false,
        }
    }

    /// Each case as NeMo Gym's line reader (orjson) judged it, except `NaN` and the
    /// infinities, which rollstat reads as numbers (as Python's `json` does).
    #[test]
    fn accepts_what_nemo_gyms_reader_accepts() {
        let cases: &[(&str, bool)] = &[
            ("[1,,2]", false),
            ("[1,]", false),
            (r#"{"a":1,}"#, false),
            (r#"{"a" 1}"#, false),
            (r#"{"a":}"#, false),
            ("{1:2}", false),
            ("[tru]", false),
            ("[nul]", false),
            ("[truex]", false),
            ("[01]", false),
            ("[1.]", false),
            ("[.5]", false),
            ("[1e]", false),
            ("[1e+]", false),
            ("[-]", false),
            ("[--1]", false),
            ("[+1]", false),
            (r#"["a\x"]"#, false),
            (r#"["\u12G4"]"#, false),
            (r#"["\u1234"]"#, true),
            (r#"["\ud800"]"#, false),
            (r#"["\ud83d\ude00"]"#, true),
            (r#"["\ude00"]"#, false),
            (r#"["\ud83d\u0041"]"#, false),
            (r#"["\ud83dx"]"#, false),
            ("[\"a\tb\"]", false),
            ("[\"a\u{7f}b\"]", true),
            (r#"{"a":[}"#, false),
            ("[{]}", false),
            (r#"["a":1]"#, false),
            ("[1 2]", false),
            (r#"{"a":1 "b":2}"#, false),
            ("[NaN]", true),
            ("[Infinity]", true),
            ("[-Infinity]", true),
            ("[-NaN]", false),
            ("[infinity]", false),
            ("[ 1 , 2 ]", true),
            (r#"{ "a" : [ ] , "b" : { } }"#, true),
            ("[1.5e-3,-0,0.0,1E+2]", true),
            ("[[[[]]]]", true),
            ("[{}]", true),
            (r#"[""]"#, true),
            (r#"["\/\b\f\n\r\t\"\\"]"#, true),
            ("[true,false,null]", true),
            ("[1]x", false),
            ("[1e400]", false),
            ("[-1e400]", false),
            ("[1.7976931348623159e308]", false),
            ("[1.7976931348623157e308]", true),
            ("[1e-400]", true),
            ("[123456789012345678901234567890]", true),
            ("[\"unterminated]", false),
        ];
        for &(text, python) in cases {
            assert_eq!(accepts(text.as_bytes()), python, "{text}");
        }
    }

    /// The reference reading of the string at the quote `i`: the index after its
    /// closing quote, or `None`.
    fn reference_string(b: &[u8], mut i: usize) -> Option<usize> {
        i += 1;
        loop {
            match *b.get(i)? {
                b'"' => return Some(i + 1),
                b'\\' => match *b.get(i + 1)? {
                    b'u' => {
                        let unit = |j: usize| -> Option<u32> {
                            let hex = b.get(j + 2..j + 6)?;
                            if b[j + 1] != b'u' || !hex.iter().all(|c| c.is_ascii_hexdigit()) {
                                return None;
                            }
                            u32::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
                        };
                        let u = unit(i)?;
                        i += 6;
                        if (0xD800..0xDC00).contains(&u) {
                            // A high surrogate needs an escaped low one next.
                            if b.get(i) != Some(&b'\\') || !(0xDC00..0xE000).contains(&unit(i)?) {
                                return None;
                            }
                            i += 6;
                        } else if (0xDC00..0xE000).contains(&u) {
                            return None;
                        }
                    }
                    c if b"\"\\/bfnrt".contains(&c) => i += 2,
                    _ => return None,
                },
                c if c < 0x20 => return None,
                _ => i += 1,
            }
        }
    }

    /// An independent byte-by-byte reading of the same grammar: the index after the value
    /// at `i`, or `None`.
    fn reference(b: &[u8], mut i: usize) -> Option<usize> {
        fn ws(b: &[u8], mut i: usize) -> usize {
            while i < b.len() && b" \t\r\n".contains(&b[i]) {
                i += 1;
            }
            i
        }
        i = ws(b, i);
        match *b.get(i)? {
            b'{' | b'[' => {
                let close = b[i] + 2;
                i = ws(b, i + 1);
                if b.get(i) == Some(&close) {
                    return Some(i + 1);
                }
                loop {
                    if close == b'}' {
                        if b.get(i) != Some(&b'"') {
                            return None;
                        }
                        i = ws(b, reference_string(b, i)?);
                        if b.get(i) != Some(&b':') {
                            return None;
                        }
                        i += 1;
                    }
                    i = ws(b, reference(b, i)?);
                    match *b.get(i)? {
                        b',' => i = ws(b, i + 1),
                        c if c == close => return Some(i + 1),
                        _ => return None,
                    }
                }
            }
            b'"' => reference_string(b, i),
            _ => {
                for w in [&b"true"[..], b"false", b"null", b"NaN", b"Infinity", b"-Infinity"] {
                    if b[i..].starts_with(w) {
                        return Some(i + w.len());
                    }
                }
                // -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
                let digits = |mut j: usize| {
                    let s = j;
                    while j < b.len() && b[j].is_ascii_digit() {
                        j += 1;
                    }
                    (j > s).then_some(j)
                };
                let s = i + usize::from(b[i] == b'-');
                let mut j = digits(s)?;
                if b[s] == b'0' && j > s + 1 {
                    return None;
                }
                if b.get(j) == Some(&b'.') {
                    j = digits(j + 1)?;
                }
                if matches!(b.get(j), Some(b'e' | b'E')) {
                    j += 1;
                    if matches!(b.get(j), Some(b'+' | b'-')) {
                        j += 1;
                    }
                    j = digits(j)?;
                }
                // A number a double cannot hold is refused.
                let v: f64 = std::str::from_utf8(&b[i..j]).ok()?.parse().ok()?;
                v.is_finite().then_some(j)
            }
        }
    }

    /// A random JSON value: nested containers, strings with escapes, long text that
    /// crosses the 16- and 32-byte blocks, numbers, literals and some whitespace.
    fn value(rng: &mut crate::generate::rng::Rng, depth: u32, out: &mut Vec<u8>) {
        let pick = |rng: &mut crate::generate::rng::Rng, n: u64| (rng.next_u64() % n) as usize;
        let pad = |out: &mut Vec<u8>, r: usize| {
            if r == 0 {
                out.extend_from_slice(b" \t");
            }
        };
        match pick(rng, if depth > 4 { 5 } else { 8 }) {
            0 => {
                let text = ["", "a", "word \\\"q\\\" \\n", "é → 𝔽₂ ", "x\\u00e9\\ud83d\\ude00", "long text "];
                out.push(b'"');
                for _ in 0..pick(rng, 12) {
                    out.extend_from_slice(text[pick(rng, text.len() as u64)].as_bytes());
                }
                out.push(b'"');
            }
            1 => out.extend_from_slice(
                ["0", "-12", "3.25", "1e-7", "-0.5E+3", "12345678901234567890"][pick(rng, 6)].as_bytes(),
            ),
            2 => out.extend_from_slice(["true", "false", "null", "NaN", "-Infinity"][pick(rng, 5)].as_bytes()),
            3 | 4 => out.extend_from_slice(b"null"),
            5 | 6 => {
                out.push(b'{');
                for k in 0..pick(rng, 5) {
                    if k > 0 {
                        out.push(b',');
                    }
                    pad(out, pick(rng, 4));
                    out.extend_from_slice(format!("\"key{k}\"").as_bytes());
                    pad(out, pick(rng, 4));
                    out.push(b':');
                    value(rng, depth + 1, out);
                }
                out.push(b'}');
            }
            _ => {
                out.push(b'[');
                for k in 0..pick(rng, 5) {
                    if k > 0 {
                        out.push(b',');
                    }
                    value(rng, depth + 1, out);
                    pad(out, pick(rng, 4));
                }
                out.push(b']');
            }
        }
    }

    /// On random values, and on the same values damaged a byte or a few at a time, the
    /// checker and the reference agree on whether it is JSON and where it ends.
    #[test]
    fn matches_a_byte_by_byte_reading() {
        let mut rng = crate::generate::rng::Rng::new(0x5EED_0FC4_EC01);
        const DAMAGE: &[u8] = b"{}[]\":,\\ \t\n0123456789.eE-+truefalsnuNI\x00\x1f\x7f/u";
        let (mut good, mut bad) = (0, 0);
        for round in 0..20_000 {
            let mut v = vec![if round % 2 == 0 { b'[' } else { b'{' }];
            let mut inner = Vec::new();
            value(&mut rng, 0, &mut inner);
            if round % 2 == 0 {
                v.extend_from_slice(&inner);
                v.push(b']');
            } else {
                v.extend_from_slice(b"\"k\":");
                v.extend_from_slice(&inner);
                v.push(b'}');
            }
            if round % 3 != 0 {
                for _ in 0..1 + rng.next_u64() % 3 {
                    let at = 1 + (rng.next_u64() as usize) % v.len();
                    let c = DAMAGE[(rng.next_u64() as usize) % DAMAGE.len()];
                    match rng.next_u64() % 3 {
                        0 if at < v.len() => v[at] = c,
                        1 if at < v.len() => {
                            v.remove(at);
                        }
                        _ => v.insert(at, c),
                    }
                }
            }
            let want = reference(&v, 0);
            assert_eq!(skip_checked(&v, 0).ok(), want, "{}", String::from_utf8_lossy(&v));
            // The string reader the scanner uses for top-level strings agrees from every
            // quote, and says whether the string holds an escape.
            for (q, _) in v.iter().enumerate().filter(|(_, &c)| c == b'"') {
                let got = string_checked(&v, q + 1).ok();
                let want = reference_string(&v, q).map(|end| (end - 1, v[q + 1..end - 1].contains(&b'\\')));
                assert_eq!(got, want, "{}", String::from_utf8_lossy(&v[q..]));
            }
            if want.is_some() {
                good += 1;
            } else {
                bad += 1;
            }
        }
        assert!(good > 5_000 && bad > 5_000, "{good} accepted, {bad} refused");
    }

    /// Nesting deeper than the inline stack of container kinds is still matched by kind.
    #[test]
    fn deep_nesting_keeps_bracket_kinds() {
        for depth in [63, 64, 65, 200] {
            let mut v = Vec::new();
            for d in 0..depth {
                v.extend_from_slice(if d % 2 == 0 { b"[" } else { b"{\"k\":" });
            }
            v.push(b'1');
            for d in (0..depth).rev() {
                v.push(if d % 2 == 0 { b']' } else { b'}' });
            }
            assert_eq!(skip_checked(&v, 0).ok(), Some(v.len()), "depth {depth}");
            // Swapping the kinds of one matching pair deep inside is an error.
            let mut w = v.clone();
            let k = depth - 1 - usize::from(depth % 2 == 0);
            let close = v.len() - 1 - k;
            w[close] = if w[close] == b']' { b'}' } else { b']' };
            assert!(skip_checked(&w, 0).is_err(), "depth {depth}");
        }
    }
}
