//! Tables as text: JSON rows, CSV and GitHub-flavoured Markdown, for `query` and
//! `compare` (Parquet is `export::parquet`'s).

use polars::prelude::*;

use crate::json::{write_compact, Json};

fn cell(c: &Column, i: usize) -> Json {
    match c.get(i) {
        Ok(AnyValue::Null) | Err(_) => Json::Null,
        Ok(AnyValue::Boolean(b)) => Json::Bool(b),
        Ok(AnyValue::String(s)) => Json::Str(s.to_string()),
        Ok(AnyValue::StringOwned(s)) => Json::Str(s.to_string()),
        Ok(AnyValue::Float64(f)) => Json::Float(f),
        Ok(AnyValue::Float32(f)) => Json::Float(f as f64),
        Ok(v) => match v.extract::<i64>() {
            Some(i) => Json::Int(i),
            None => Json::Str(v.to_string()),
        },
    }
}

/// Rows as JSON objects.
pub fn to_json(df: &DataFrame) -> Vec<u8> {
    let rows: Vec<Json> = (0..df.height())
        .map(|i| {
            Json::Obj(df.columns().iter().map(|c| (std::sync::Arc::from(c.name().as_str()), cell(c, i))).collect())
        })
        .collect();
    let mut out = Vec::new();
    write_compact(&mut out, &Json::Arr(rows));
    out.push(b'\n');
    out
}

/// Significant digits of the numbers people read (`--format table` and `markdown`) unless
/// `--precision` says otherwise; CSV, JSON and Parquet keep every digit.
pub const READ_DIGITS: usize = 4;

/// `x` with at most `digits` significant digits: fixed notation (without trailing zeros)
/// for magnitudes from 1e-3 up to 1e6, else scientific (`1.235e-5`); `NaN`, `inf` and
/// `-inf` as the tables show them.
pub fn round_text(x: f64, digits: usize) -> String {
    let t = round_padded(x, digits);
    // Trailing zeros say nothing the digits before them do not: `1.5`, not `1.500`.
    if t.contains('.') && !t.contains('e') {
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        t
    }
}

/// [`round_text`] keeping trailing zeros (`0.6500`), so that a column of numbers of one
/// magnitude lines up.
pub fn round_padded(x: f64, digits: usize) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    if x == 0.0 {
        return "0".into();
    }
    let d = digits.max(1);
    // The exponent after rounding (9.9996 at 4 digits is 1.000e1).
    let sci = format!("{:.*e}", d - 1, x);
    let exp: i32 = sci.rsplit('e').next().and_then(|e| e.parse().ok()).unwrap_or(0);
    if !(-3..6).contains(&exp) {
        return sci;
    }
    let decimals = (d as i32 - 1 - exp).max(0) as usize;
    // Rounded first, so that digits left of the point beyond `digits` are zeros.
    format!("{:.decimals$}", sci.parse::<f64>().unwrap_or(x))
}

/// `x` rounded to `digits` significant digits, as a number.
pub fn round_value(x: f64, digits: usize) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    format!("{:.*e}", digits.max(1) - 1, x).parse().unwrap_or(x)
}

/// The frame with every float column rounded to `digits` significant digits, for a
/// table printed to be read.
pub fn rounded(df: &DataFrame, digits: usize) -> DataFrame {
    let cols: Vec<Column> = df
        .columns()
        .iter()
        .map(|c| match c.dtype() {
            DataType::Float64 | DataType::Float32 => match c.cast(&DataType::Float64).and_then(|f| {
                let v: Float64Chunked = f.f64()?.apply_values(|x| round_value(x, digits));
                Ok(v.with_name(c.name().clone()).into_column())
            }) {
                Ok(r) => r,
                Err(_) => c.clone(),
            },
            _ => c.clone(),
        })
        .collect();
    DataFrame::new(df.height(), cols).unwrap_or_else(|_| df.clone())
}

/// A cell as text: empty for null, numbers in their shortest exact form (or with
/// `digits` significant digits), infinities and NaN as the table and Parquet show them
/// (JSON has no word for these).
fn text_cell(c: &Column, i: usize, digits: Option<usize>) -> Option<String> {
    match (cell(c, i), digits) {
        (Json::Null, _) => None,
        (Json::Str(s), _) => Some(s),
        (Json::Float(f), Some(d)) => Some(round_text(f, d)),
        (Json::Float(f), None) if !f.is_finite() => Some(round_text(f, 1)),
        (v, _) => {
            let mut b = Vec::new();
            write_compact(&mut b, &v);
            Some(String::from_utf8_lossy(&b).into_owned())
        }
    }
}

/// Rows as CSV (RFC 4180 quoting).
pub fn to_csv(df: &DataFrame) -> Vec<u8> {
    fn field(s: &str) -> String {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    }
    let mut out = String::new();
    let names: Vec<String> = df.get_column_names().iter().map(|n| field(n)).collect();
    out.push_str(&names.join(","));
    out.push('\n');
    for i in 0..df.height() {
        let cells: Vec<String> =
            df.columns().iter().map(|c| text_cell(c, i, None).map_or_else(String::new, |s| field(&s))).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out.into_bytes()
}

/// Rows as a GitHub-flavoured Markdown table: numeric columns right-aligned, null cells
/// empty, floats with `digits` significant digits, cell text shown as written (markup
/// characters escaped, line breaks as `<br>`).
pub fn to_markdown(df: &DataFrame, digits: usize) -> Vec<u8> {
    fn field(s: &str) -> String {
        let chars: Vec<char> = s.chars().collect();
        let mut o = String::with_capacity(s.len());
        for (i, &c) in chars.iter().enumerate() {
            let word = |j: Option<usize>| j.and_then(|j| chars.get(j)).is_some_and(|c| c.is_alphanumeric());
            match c {
                // An underscore inside a word (`ci_low_95`) is no markup in GFM.
                '_' if word(i.checked_sub(1)) && word(Some(i + 1)) => o.push(c),
                // What would end the cell or start inline markup is escaped (CommonMark
                // backslash escapes); line breaks become <br>.
                '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '&' | '~' => {
                    o.push('\\');
                    o.push(c);
                }
                '\r' if chars.get(i + 1) == Some(&'\n') => {}
                '\n' | '\r' => o.push_str("<br>"),
                c => o.push(c),
            }
        }
        o
    }
    let mut out = String::new();
    let names: Vec<String> = df.get_column_names().iter().map(|n| field(n)).collect();
    out.push_str(&format!("| {} |\n", names.join(" | ")));
    let rules: Vec<&str> =
        df.columns().iter().map(|c| if c.dtype().is_primitive_numeric() { "---:" } else { "---" }).collect();
    out.push_str(&format!("|{}|\n", rules.join("|")));
    for i in 0..df.height() {
        let cells: Vec<String> = df
            .columns()
            .iter()
            .map(|c| text_cell(c, i, Some(digits)).map_or_else(String::new, |s| field(&s)))
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_for_reading_keep_the_asked_significant_digits() {
        assert_eq!(round_text(0.496124031, 4), "0.4961");
        assert_eq!(round_text(12.34567, 4), "12.35");
        assert_eq!(round_text(1.5, 4), "1.5");
        assert_eq!(round_text(-0.0123456, 3), "-0.0123");
        // Rounding that carries into the next power of ten.
        assert_eq!(round_text(9.99996, 4), "10");
        assert_eq!(round_text(999999.7, 4), "1.000e6");
        assert_eq!(round_text(0.000123456, 4), "1.235e-4");
        assert_eq!(round_text(123456.0, 2), "120000");
        assert_eq!(round_text(0.0, 4), "0");
        assert_eq!(round_text(f64::NAN, 4), "NaN");
        assert_eq!(round_text(f64::NEG_INFINITY, 4), "-inf");
        assert_eq!(round_padded(0.65, 4), "0.6500");
        assert_eq!(round_padded(9.99996, 4), "10.00");
        assert_eq!(round_value(0.496124031, 4), 0.4961);
        assert_eq!(round_value(-123456.0, 2), -120000.0);
    }
}
