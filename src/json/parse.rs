//! A tree parser for the few JSON texts read whole (input rows echoed as `sample`,
//! aggregate files): Python's `NaN`/`Infinity` are accepted as everywhere in rollstat.

use std::sync::Arc;

use super::scan::{decode_str, Scalar, Scanner};
use super::{Json, Key, MAX_DEPTH};

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
        let mut s = Scanner { b: self.b, i: self.i };
        match self.b.get(self.i) {
            Some(b'{') => {
                self.i += 1;
                let mut items: Vec<(Key, Json)> = Vec::new();
                let mut index: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
                self.ws();
                if self.b.get(self.i) == Some(&b'}') {
                    self.i += 1;
                    return Ok(Json::Obj(items));
                }
                loop {
                    self.ws();
                    let mut s = Scanner { b: self.b, i: self.i };
                    let (raw, esc) = s.string().map_err(|e| e.msg.to_string())?;
                    self.i = s.i;
                    let k = decode_str(raw, esc)?;
                    self.ws();
                    if self.b.get(self.i) != Some(&b':') {
                        return Err("expected `:`".into());
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    // Python keeps the first position and the last value of a repeated key.
                    // Small objects are searched; large ones get an index, since a search
                    // per key would make an object of many keys quadratic.
                    let at = if items.len() < INDEX_FROM {
                        items.iter().position(|(kk, _): &(Key, Json)| **kk == *k)
                    } else {
                        if index.is_empty() {
                            index.extend(items.iter().enumerate().map(|(i, (kk, _))| (kk.clone(), i)));
                        }
                        index.get(k.as_str()).copied()
                    };
                    match at {
                        Some(i) => items[i].1 = v,
                        None => {
                            let key: Key = Arc::from(k.as_str());
                            if !index.is_empty() {
                                index.insert(key.clone(), items.len());
                            }
                            items.push((key, v));
                        }
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
                let v = s.value().map_err(|e| e.msg.to_string())?;
                self.i = s.i;
                Ok(match v {
                    Scalar::Null => Json::Null,
                    Scalar::Bool(b) => Json::Bool(b),
                    Scalar::Int(i) => Json::Int(i),
                    Scalar::Float(f) => Json::Float(f),
                    Scalar::Str(raw, esc) => Json::Str(decode_str(raw, esc)?),
                    Scalar::Container { .. } => unreachable!("containers handled above"),
                })
            }
        }
    }
}

/// Objects with at least this many keys find repeated keys through an index.
const INDEX_FROM: usize = 64;
