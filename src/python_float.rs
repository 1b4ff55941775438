//! Python's text of a float, in one place: `repr`/`str` (the shortest digits that read
//! back to the value, CPython 3's `float_repr_style = 'short'`, David Gay's "mode 0"),
//! which numpy's `float64` scalars share; numpy's `str` of a `float32` scalar (its own
//! shortest digits, with a narrower fixed-notation range: numpy's `Dragon4` scalar
//! formatting); and the format specs `.Nf` and `g` of an f-string. The rollout health
//! check prints values as Python does, metrics name `pass_at_k` subsets and VAGEN groups
//! by `str()`, and the eval-compare report formats its numbers with the specs.

/// A float as Python's `repr`/`str` writes it: the shortest digits that read back to it,
/// in fixed notation when the decimal point falls within 4 places before the first digit
/// and 16 after it (`0.0001`, `1000000000000000.0`), else in exponent notation with a
/// signed exponent of at least two digits (`1e-05`, `1e+16`); `nan`, `inf`, `-inf`.
pub fn repr(v: f64) -> String {
    if !v.is_finite() {
        return non_finite(v.is_nan(), v > 0.0);
    }
    // Python decides by the shortest digits: fixed while the point sits from 3 places
    // before the first digit to 16 after it.
    layout(zmij::Buffer::new().format_finite(v), |point| (-3..=16).contains(&point))
}

/// A `float32` as numpy's `str(np.float32(x))` writes it: the shortest digits that read
/// back to the same `float32`, in fixed notation for 1e-4 ≤ |x| < 1e6 (`0.0001` is not
/// in it: as a `float32` it is just below 1e-4 and prints `1e-04`) and exponent notation
/// otherwise (`1e+06`, `1.6777216e+07`); zero is `0.0`.
pub fn numpy_float32(v: f32) -> String {
    if !v.is_finite() {
        return non_finite(v.is_nan(), v > 0.0);
    }
    // numpy decides by the value itself.
    let a = f64::from(v.abs());
    let fixed = a == 0.0 || (1e-4..1e6).contains(&a);
    layout(zmij::Buffer::new().format_finite(v), |_| fixed)
}

/// Python's `f"{v:.{prec}f}"` (and `+` with `signed`): Rust prints the same digits
/// (exact value, ties to even); only NaN and the infinities are spelled differently.
pub fn fixed(v: f64, prec: usize, signed: bool) -> String {
    if v.is_nan() {
        return if signed { "+nan".into() } else { "nan".into() };
    }
    if v.is_infinite() {
        let s = if v > 0.0 {
            if signed {
                "+inf"
            } else {
                "inf"
            }
        } else {
            "-inf"
        };
        return s.into();
    }
    if signed {
        format!("{v:+.prec$}")
    } else {
        format!("{v:.prec$}")
    }
}

/// Python's `f"{v:g}"`: six significant digits, fixed notation for exponents -4..5,
/// scientific (`1e-05`, `1.23457e+06`) otherwise, trailing zeros removed.
pub fn g(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{v:.5e}");
    let (mant, exp) = sci.split_once('e').expect("exponent form");
    let exp: i32 = exp.parse().expect("exponent");
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if (-4..6).contains(&exp) {
        let prec = (5 - exp) as usize;
        trim(format!("{v:.prec$}"))
    } else {
        let m = trim(mant.to_string());
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

fn non_finite(nan: bool, positive: bool) -> String {
    if nan {
        "nan"
    } else if positive {
        "inf"
    } else {
        "-inf"
    }
    .into()
}

/// Lays out shortest round-trip digits (as any of `1.5`, `15e-1`, `1.5e3`) the way
/// Python prints a float: in fixed notation when `fixed_at(point)` says so, where the
/// value is `0.DIGITS × 10^point`, else as `D.DDDe±XX`.
fn layout(text: &str, fixed_at: impl Fn(i32) -> bool) -> String {
    let (neg, text) = match text.strip_prefix('-') {
        Some(t) => (true, t),
        None => (false, text),
    };
    let (mantissa, exp) = match text.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i32>().unwrap_or(0)),
        None => (text, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let all = format!("{int}{frac}");
    let lead = all.len() - all.trim_start_matches('0').len();
    let digits = all.trim_start_matches('0').trim_end_matches('0');
    let sign = if neg { "-" } else { "" };
    if digits.is_empty() {
        return format!("{sign}0.0");
    }
    // The value is 0.DIGITS × 10^point.
    let point = int.len() as i32 - lead as i32 + exp;
    let n = digits.len() as i32;
    if fixed_at(point) {
        if point <= 0 {
            format!("{sign}0.{}{digits}", "0".repeat((-point) as usize))
        } else if point >= n {
            format!("{sign}{digits}{}.0", "0".repeat((point - n) as usize))
        } else {
            format!("{sign}{}.{}", &digits[..point as usize], &digits[point as usize..])
        }
    } else {
        let e = point - 1;
        let m = if n == 1 { digits.to_string() } else { format!("{}.{}", &digits[..1], &digits[1..]) };
        format!("{sign}{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python's `repr` of floats (as `str()` names numeric subsets), as CPython 3 gave it.
    #[test]
    fn floats_as_python_names_them() {
        let cases = [
            (1.0, "1.0"),
            (1e-05, "1e-05"),
            (1.5e-07, "1.5e-07"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (100.0, "100.0"),
            (123456.789, "123456.789"),
            (-2.5, "-2.5"),
            (1e22, "1e+22"),
            (1.5e300, "1.5e+300"),
            (123.456, "123.456"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (0.1, "0.1"),
            (1234567890123456.7, "1234567890123456.8"),
            (12345678901234567.0, "1.2345678901234568e+16"),
            (-1e-05, "-1e-05"),
            (2.5625, "2.5625"),
            (9_999_999_999_999_998.0, "9999999999999998.0"),
            (-0.0, "-0.0"),
            (0.0, "0.0"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (v, want) in cases {
            assert_eq!(repr(v), want, "{v:e}");
        }
    }

    #[test]
    fn g_format_as_python() {
        let cases = [
            (1.0, "1"),
            (0.0, "0"),
            (-0.0, "-0"),
            (0.5, "0.5"),
            (0.838752, "0.838752"),
            (0.0233721, "0.0233721"),
            (0.000483376, "0.000483376"),
            (0.00001, "1e-05"),
            (0.0001, "0.0001"),
            (123456.0, "123456"),
            (1234567.0, "1.23457e+06"),
            (999999.5, "1e+06"),
            (0.1234564, "0.123456"),
            (-2.5, "-2.5"),
            (1e100, "1e+100"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (v, want) in cases {
            assert_eq!(g(v), want, "{v:e}");
        }
    }

    #[test]
    fn fixed_formats_as_python() {
        assert_eq!(fixed(0.125, 2, false), "0.12");
        assert_eq!(fixed(f64::NAN, 4, true), "+nan");
        assert_eq!(fixed(-0.0, 4, false), "-0.0000");
    }

    /// `str(np.float32(x))` as numpy 2.4 printed it.
    #[test]
    fn float32_as_numpy_prints_it() {
        let cases: [(f32, &str); 17] = [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "1e-04"),
            (0.000_100_000_005, "0.000100000005"),
            (0.00011, "0.00011"),
            (1e16, "1e+16"),
            (1e15, "1e+15"),
            (123456.79, "123456.79"),
            (999_999.0, "999999.0"),
            (999_999.94, "999999.94"),
            (1e6, "1e+06"),
            (1_234_567.0, "1.234567e+06"),
            (16_777_216.0, "1.6777216e+07"),
            (1.175_494_4e-38, "1.1754944e-38"),
            (-0.0, "-0.0"),
            (f32::NAN, "nan"),
        ];
        for (v, want) in cases {
            assert_eq!(numpy_float32(v), want, "{v:e}");
        }
    }
}
