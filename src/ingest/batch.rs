//! VAGEN / verl training batches, JSONL or Parquet, read into one [`Sample`] per row:
//! the row's group id as the value it holds (the metrics group by Python's `str()` of
//! it, so an int, a float and a text id must stay told apart here) and its scores.
//!
//! A row's group id is its `--group-key` field (`group_idx` by default) or, when the
//! row has no such field, its `uid`. Its scores are `token_level_scores` (a list of
//! numbers; Parquet: a list or fixed-width array column, as verl pads them) or else a
//! plain `reward`. JSONL is read with rollstat's own JSON scanner, so Python's `NaN`,
//! `Infinity` and `-Infinity` tokens are numbers here as everywhere else.

use std::path::Path;

use polars::prelude::*;

use crate::error::{Error, Location, Result};
use crate::json::scan::{decode_str, key_is, Scalar, Scanner};
use crate::json::{self, Json};

/// A group id as the batch holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum GroupId {
    /// JSON `null`, or a null Parquet cell.
    None,
    Bool(bool),
    /// An integer, by its decimal digits (JSON integers may exceed 64 bits).
    Int(String),
    Float(f64),
    /// A value of a Parquet `float` (32-bit) column.
    Float32(f32),
    Str(String),
}

/// A row's scores.
#[derive(Debug, Clone, PartialEq)]
pub enum Scores {
    /// `token_level_scores` as float64 (JSON numbers, or a Parquet list of doubles or
    /// integers).
    Tokens(Vec<f64>),
    /// `token_level_scores` from a Parquet list of 32-bit floats.
    Tokens32(Vec<f32>),
    /// A plain `reward` (bools as 0/1), for batches without token-level scores.
    Reward(f64),
}

/// One row of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub group: GroupId,
    pub scores: Scores,
}

/// Reads a batch: Parquet when the file name ends in `.parquet`, JSONL otherwise.
pub fn read_batch(path: &Path, group_key: &str) -> Result<Vec<Sample>> {
    if path.extension().is_some_and(|e| e == "parquet") {
        read_parquet(path, group_key)
    } else {
        read_jsonl(path, group_key)
    }
}

/// Reads a JSONL batch: one object per line; blank lines are skipped.
pub fn read_jsonl(path: &Path, group_key: &str) -> Result<Vec<Sample>> {
    let text = std::fs::read(path).map_err(|e| Error::read(path, e))?;
    let mut out = Vec::new();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let sample = read_line(line, group_key).map_err(|(key, msg)| {
            let loc = Location::line(path, i as u64 + 1);
            Error::bad(if let Some(k) = key { loc.key(&k) } else { loc }, msg)
        })?;
        out.push(sample);
    }
    Ok(out)
}

/// A line's problem: the key it concerns (if any) and what was expected.
type LineError = (Option<String>, String);

fn invalid(e: crate::json::scan::ScanError) -> LineError {
    (None, format!("invalid JSON: {} (at byte {} of the line)", e.msg, e.offset + 1))
}

fn read_line(line: &[u8], group_key: &str) -> std::result::Result<Sample, LineError> {
    let mut s = Scanner::new(line);
    if s.peek() != Some(b'{') {
        s.value().map_err(invalid)?;
        s.end().map_err(invalid)?;
        return Err((None, "expected a JSON object".into()));
    }
    s.i += 1;
    let mut first = true;
    // A repeated key keeps its last value, as Python's `json` does.
    let (mut group, mut uid, mut tokens, mut reward) = (None, None, None, None);
    while let Some(k) = s.next_key(&mut first).map_err(invalid)? {
        s.peek();
        let start = s.i;
        let v = s.value().map_err(invalid)?;
        let raw = &line[start..s.i];
        if key_is(k, group_key.as_bytes()) {
            group = Some((v, raw));
        } else if key_is(k, b"uid") {
            uid = Some((v, raw));
        } else if key_is(k, b"token_level_scores") {
            tokens = Some(raw);
        } else if key_is(k, b"reward") {
            reward = Some(v);
        }
    }
    s.end().map_err(invalid)?;
    let (key, (v, raw)) = match (group, uid) {
        (Some(g), _) => (group_key, g),
        (None, Some(u)) => ("uid", u),
        (None, None) => {
            return Err((
                Some(group_key.to_string()),
                format!("missing; expected a group id (`{group_key}`, or `uid` when a row has none)"),
            ))
        }
    };
    let group = json_group(v, raw).map_err(|m| (Some(key.to_string()), m))?;
    let scores = if let Some(raw) = tokens {
        let bad =
            |what: &str| (Some("token_level_scores".to_string()), format!("expected a list of numbers, found {what}"));
        let Ok(Json::Arr(items)) = json::parse(raw) else { return Err(bad("something else")) };
        let mut xs = Vec::with_capacity(items.len());
        for x in &items {
            xs.push(match x {
                Json::Int(i) => *i as f64,
                Json::Float(f) => *f,
                Json::Bool(b) => f64::from(u8::from(*b)),
                Json::Null => return Err(bad("null in the list")),
                Json::Str(_) => return Err(bad("text in the list")),
                Json::Arr(_) | Json::Obj(_) => return Err(bad("a nested list or object")),
            });
        }
        Scores::Tokens(xs)
    } else if let Some(r) = reward {
        Scores::Reward(match r {
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
            Scalar::Bool(b) => f64::from(u8::from(b)),
            _ => return Err((Some("reward".into()), "expected a number".into())),
        })
    } else {
        return Err((None, "expected `token_level_scores` (list of numbers) or `reward`".into()));
    };
    Ok(Sample { group, scores })
}

/// A JSON group id. Integers too large for 64 bits keep their digits (Python reads
/// them as exact integers); a list or an object is refused: VAGEN's `str()` of one
/// depends on whether numpy stored it as a Python list or as an array (`[1, 2]` or
/// `[1 2]`), which the file does not say.
fn json_group(v: Scalar, raw: &[u8]) -> std::result::Result<GroupId, String> {
    Ok(match v {
        Scalar::Null => GroupId::None,
        Scalar::Bool(b) => GroupId::Bool(b),
        Scalar::Int(i) => GroupId::Int(i.to_string()),
        Scalar::Float(f) => {
            if raw.iter().all(|c| c.is_ascii_digit() || *c == b'-') {
                GroupId::Int(String::from_utf8_lossy(raw).into_owned())
            } else {
                GroupId::Float(f)
            }
        }
        Scalar::Str(r, esc) => GroupId::Str(decode_str(r, esc).map_err(|e| e.to_string())?),
        Scalar::Container { object, .. } => {
            return Err(format!(
                "a group id that is {} is not supported; expected a number, a bool, text or null",
                if object { "an object" } else { "a list" }
            ))
        }
    })
}

/// Reads a Parquet batch. The group column is the `--group-key` column or, when the
/// file has none, `uid`.
pub fn read_parquet(path: &Path, group_key: &str) -> Result<Vec<Sample>> {
    let df = super::parquet::read_parquet(path)?;
    samples_from_frame(&df, group_key, &|| Location::file(path))
}

/// A batch held as a table (a Parquet file read, or Arrow data handed over in memory):
/// the `group_key` column (else `uid`) and `token_level_scores` (else `reward`).
/// `loc` names where the table came from.
pub fn samples_from_frame(df: &DataFrame, group_key: &str, loc: &dyn Fn() -> Location) -> Result<Vec<Sample>> {
    let (key, g) = match (df.column(group_key), df.column("uid")) {
        (Ok(g), _) => (group_key, g),
        (Err(_), Ok(u)) => ("uid", u),
        _ => {
            return Err(Error::bad(
                loc().key(group_key),
                format!("no `{group_key}` or `uid` column; expected a group id"),
            ))
        }
    };
    let groups = parquet_groups(g.as_materialized_series(), &|| loc().key(key))?;
    let scores = if let Ok(s) = df.column("token_level_scores") {
        parquet_tokens(s.as_materialized_series(), &|| loc().key("token_level_scores"))?
    } else if let Ok(r) = df.column("reward") {
        let bad = || Error::bad(loc().key("reward"), format!("expected numbers, found {}", r.dtype()));
        if !(r.dtype().is_primitive_numeric() || *r.dtype() == DataType::Boolean) {
            return Err(bad());
        }
        let r = r.cast(&DataType::Float64)?;
        let r = r.f64()?;
        let mut out = Vec::with_capacity(r.len());
        for (i, x) in r.iter().enumerate() {
            let x = x.ok_or_else(|| Error::bad(loc().row(i as u64 + 1).key("reward"), "null; expected a number"))?;
            out.push(Scores::Reward(x));
        }
        out
    } else {
        return Err(Error::bad(loc(), "expected a `token_level_scores` or `reward` column"));
    };
    Ok(groups.into_iter().zip(scores).map(|(group, scores)| Sample { group, scores }).collect())
}

/// A Parquet group column as group ids: integers by their digits, floats and 32-bit
/// floats as such, bools, text (categoricals by their text); null cells are `None`.
fn parquet_groups(s: &Series, loc: &dyn Fn() -> Location) -> Result<Vec<GroupId>> {
    let dt = s.dtype().clone();
    let out: Vec<GroupId> = match &dt {
        DataType::Boolean => s.bool()?.iter().map(|v| v.map_or(GroupId::None, GroupId::Bool)).collect(),
        DataType::UInt64 => s.u64()?.iter().map(|v| v.map_or(GroupId::None, |i| GroupId::Int(i.to_string()))).collect(),
        d if d.is_integer() => s
            .cast(&DataType::Int64)?
            .i64()?
            .iter()
            .map(|v| v.map_or(GroupId::None, |i| GroupId::Int(i.to_string())))
            .collect(),
        DataType::Float32 => s.f32()?.iter().map(|v| v.map_or(GroupId::None, GroupId::Float32)).collect(),
        DataType::Float64 => s.f64()?.iter().map(|v| v.map_or(GroupId::None, GroupId::Float)).collect(),
        DataType::Null => vec![GroupId::None; s.len()],
        DataType::String | DataType::Categorical(..) | DataType::Enum(..) => s
            .cast(&DataType::String)?
            .str()?
            .iter()
            .map(|v| v.map_or(GroupId::None, |t| GroupId::Str(t.to_string())))
            .collect(),
        other => {
            return Err(Error::bad(
                loc(),
                format!("the group id column is {other}; expected integers, floats, bools or text"),
            ))
        }
    };
    Ok(out)
}

/// A Parquet `token_level_scores` column (a list or fixed-width array of numbers per
/// row) as scores; 32-bit floats stay 32-bit, as numpy sums them in that type.
fn parquet_tokens(s: &Series, loc: &dyn Fn() -> Location) -> Result<Vec<Scores>> {
    let inner = match s.dtype() {
        DataType::List(inner) | DataType::Array(inner, _) => (**inner).clone(),
        other => {
            return Err(Error::bad(loc(), format!("the column is {other}; expected a list of numbers per row")));
        }
    };
    if !(inner.is_primitive_numeric() || inner == DataType::Boolean) {
        return Err(Error::bad(loc(), format!("the column holds {inner}; expected a list of numbers per row")));
    }
    let single = inner == DataType::Float32;
    let target = if single { DataType::Float32 } else { DataType::Float64 };
    let list = s.cast(&DataType::List(Box::new(target)))?;
    let list = list.list()?;
    let mut out = Vec::with_capacity(list.len());
    for i in 0..list.len() {
        let row = || loc().row(i as u64 + 1);
        let Some(cell) = list.get_as_series(i) else {
            return Err(Error::bad(row(), "null; expected a list of numbers"));
        };
        if cell.null_count() > 0 {
            return Err(Error::bad(row(), "a null in the list; expected numbers"));
        }
        out.push(if single {
            Scores::Tokens32(cell.f32()?.into_no_null_iter().collect())
        } else {
            Scores::Tokens(cell.f64()?.into_no_null_iter().collect())
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group_of(line: &str) -> std::result::Result<GroupId, LineError> {
        read_line(line.as_bytes(), "group_idx").map(|s| s.group)
    }

    #[test]
    fn group_ids_keep_their_kind() {
        let g = |v: &str| group_of(&format!("{{\"group_idx\": {v}, \"reward\": 1}}")).unwrap();
        assert_eq!(g("1"), GroupId::Int("1".into()));
        assert_eq!(g("1.0"), GroupId::Float(1.0));
        assert_eq!(g("1e2"), GroupId::Float(100.0));
        assert_eq!(g("true"), GroupId::Bool(true));
        assert_eq!(g("\"1\""), GroupId::Str("1".into()));
        assert_eq!(g("null"), GroupId::None);
        assert_eq!(g("-Infinity"), GroupId::Float(f64::NEG_INFINITY));
        assert!(matches!(g("NaN"), GroupId::Float(f) if f.is_nan()));
        // Beyond 64 bits an integer keeps its digits.
        assert_eq!(g("123456789012345678901234567890"), GroupId::Int("123456789012345678901234567890".into()));
        assert_eq!(g("-18446744073709551617"), GroupId::Int("-18446744073709551617".into()));
        let e = group_of("{\"group_idx\": [1, 2], \"reward\": 1}").unwrap_err();
        assert_eq!(e.0.as_deref(), Some("group_idx"));
        assert!(e.1.contains("a list"), "{}", e.1);
    }

    #[test]
    fn scores_and_fallbacks() {
        let s = read_line(br#"{"uid": "u", "token_level_scores": [1, 0.5, NaN, true]}"#, "group_idx").unwrap();
        assert_eq!(s.group, GroupId::Str("u".into()));
        let Scores::Tokens(xs) = s.scores else { panic!() };
        assert_eq!((xs[0], xs[1], xs[3]), (1.0, 0.5, 1.0));
        assert!(xs[2].is_nan());
        // The last of a repeated key counts, as in Python.
        let s = read_line(br#"{"group_idx": 1, "group_idx": "a", "reward": Infinity}"#, "group_idx").unwrap();
        assert_eq!((s.group, s.scores), (GroupId::Str("a".into()), Scores::Reward(f64::INFINITY)));
        let e = read_line(br#"{"group_idx": 1, "token_level_scores": [1, null]}"#, "group_idx").unwrap_err();
        assert_eq!(e.0.as_deref(), Some("token_level_scores"));
        let e = read_line(br#"{"group_idx": 1}"#, "group_idx").unwrap_err();
        assert!(e.1.contains("token_level_scores"), "{}", e.1);
        let e = read_line(br#"[1]"#, "group_idx").unwrap_err();
        assert_eq!(e.1, "expected a JSON object");
        let e = read_line(br#"{"group_idx": 1, "reward": 1"#, "group_idx").unwrap_err();
        assert!(e.1.starts_with("invalid JSON"), "{}", e.1);
    }
}
