//! The scalars of a JSON line and the scanner's error type: literals (`true`, `false`,
//! `null`, and Python's `NaN`, `Infinity`, `-Infinity`) and numbers, read and checked in
//! one pass. Both the scanner ([`super::scan`]) and the checker ([`super::check`]) read
//! scalars here, so neither needs the other for them.

/// A scalar or a skipped container, as seen by the scanner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    /// Raw string content between the quotes (escapes not yet decoded) and whether it
    /// holds any backslash.
    Str(&'a [u8], bool),
    /// An object or array that was skipped; `empty` tells Python truthiness.
    Container {
        object: bool,
        empty: bool,
    },
}

impl Scalar<'_> {
    /// Python truthiness of the value (a skipped container by whether it is empty).
    pub fn truthy(&self) -> bool {
        match *self {
            Scalar::Null => false,
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::Float(f) => f != 0.0,
            Scalar::Str(s, _) => !s.is_empty(),
            Scalar::Container { empty, .. } => !empty,
        }
    }
}

/// Why a line failed to scan, with the byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanError {
    pub offset: usize,
    pub msg: &'static str,
}

pub type ScanResult<T> = Result<T, ScanError>;

#[inline]
fn fail<T>(offset: usize, msg: &'static str) -> ScanResult<T> {
    Err(ScanError { offset, msg })
}

/// Reads the literal or number starting at `b[i]` (which is not whitespace, a string or
/// a container); returns it and the offset just past it.
#[inline]
pub fn literal_or_number<'a>(b: &[u8], i: usize) -> ScanResult<(Scalar<'a>, usize)> {
    match b.get(i) {
        Some(b't') => lit(b, i, b"true", Scalar::Bool(true)),
        Some(b'f') => lit(b, i, b"false", Scalar::Bool(false)),
        Some(b'n') => lit(b, i, b"null", Scalar::Null),
        Some(b'N') => lit(b, i, b"NaN", Scalar::Float(f64::NAN)),
        Some(b'I') => lit(b, i, b"Infinity", Scalar::Float(f64::INFINITY)),
        Some(b'-') if b.get(i + 1) == Some(&b'I') => lit(b, i, b"-Infinity", Scalar::Float(f64::NEG_INFINITY)),
        Some(&c) if c == b'-' || c.is_ascii_digit() => number(b, i),
        Some(_) => fail(i, "expected a JSON value"),
        None => fail(i, "unexpected end of line, expected a JSON value"),
    }
}

/// A literal word, compared as one fixed-size value (no `memcmp` call).
#[inline]
fn lit<'a, const N: usize>(b: &[u8], i: usize, word: &[u8; N], v: Scalar<'a>) -> ScanResult<(Scalar<'a>, usize)> {
    let here: Option<&[u8; N]> = b.get(i..i + N).and_then(|s| s.try_into().ok());
    if here == Some(word) {
        Ok((v, i + N))
    } else {
        fail(i, "expected a JSON value")
    }
}

/// A number. Digits are read once: the mantissa is gathered while checking the
/// grammar, and a float whose mantissa and power of ten are both exact in an f64
/// (at most 2^53 and 10^22) is one correctly rounded multiply or divide, the same
/// value the full decimal parser gives; anything else goes to that parser.
fn number<'a>(b: &[u8], start: usize) -> ScanResult<(Scalar<'a>, usize)> {
    let mut i = start;
    let neg = b[i] == b'-';
    if neg {
        i += 1;
    }
    let int_start = i;
    let mut m: u64 = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        m = m.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
        i += 1;
    }
    let int_digits = i - int_start;
    if int_digits == 0 {
        return fail(i, "invalid number");
    }
    if b[int_start] == b'0' && int_digits > 1 {
        return fail(int_start, "invalid number (leading zero)");
    }
    let mut float = false;
    let mut frac = 0usize;
    if i < b.len() && b[i] == b'.' {
        float = true;
        i += 1;
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            m = m.wrapping_mul(10).wrapping_add(u64::from(b[i] - b'0'));
            i += 1;
        }
        frac = i - f;
        if frac == 0 {
            return fail(i, "invalid number");
        }
    }
    let mut exp: i64 = 0;
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        float = true;
        i += 1;
        let mut exp_neg = false;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            exp_neg = b[i] == b'-';
            i += 1;
        }
        let f = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if exp < 1_000_000 {
                exp = exp * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == f {
            return fail(i, "invalid number");
        }
        if exp_neg {
            exp = -exp;
        }
    }
    if !float && int_digits <= 18 {
        // At most 18 digits always fit an i64.
        let v = m as i64;
        return Ok((Scalar::Int(if neg { -v } else { v }), i));
    }
    if float && int_digits + frac <= 19 && m <= 1 << 53 {
        let e10 = exp - frac as i64;
        if (-22..=22).contains(&e10) {
            let x = m as f64;
            let v = if e10 < 0 { x / POW10[(-e10) as usize] } else { x * POW10[e10 as usize] };
            return Ok((Scalar::Float(if neg { -v } else { v }), i));
        }
    }
    // SAFETY: the slice holds only ASCII sign, digits, dot and exponent characters,
    // as checked byte by byte above.
    let text = unsafe { std::str::from_utf8_unchecked(&b[start..i]) };
    if !float {
        if let Ok(v) = text.parse::<i64>() {
            return Ok((Scalar::Int(v), i));
        }
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok((Scalar::Float(v), i)),
        // `1e400`: NeMo Gym's reader (orjson) refuses a number a double cannot hold.
        Ok(_) => fail(start, "number too large for a double"),
        Err(_) => fail(i, "invalid number"),
    }
}

/// Powers of ten that are exact in an f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];
