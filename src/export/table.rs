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

/// A cell as text: empty for null, numbers in their shortest exact form, infinities and
/// NaN as the table and Parquet show them (JSON has no word for these).
fn text_cell(c: &Column, i: usize) -> Option<String> {
    match cell(c, i) {
        Json::Null => None,
        Json::Str(s) => Some(s),
        Json::Float(f) if f.is_nan() => Some("NaN".into()),
        Json::Float(f) if f.is_infinite() => Some(if f > 0.0 { "inf" } else { "-inf" }.into()),
        v => {
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
            df.columns().iter().map(|c| text_cell(c, i).map_or_else(String::new, |s| field(&s))).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out.into_bytes()
}

/// Rows as a GitHub-flavoured Markdown table: numeric columns right-aligned, null cells
/// empty, cell text shown as written (markup characters escaped, line breaks as `<br>`).
pub fn to_markdown(df: &DataFrame) -> Vec<u8> {
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
        let cells: Vec<String> =
            df.columns().iter().map(|c| text_cell(c, i).map_or_else(String::new, |s| field(&s))).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out.into_bytes()
}
