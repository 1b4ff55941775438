//! The ordered JSON value every layer hands around: objects keep their members in
//! insertion order (as a Python dict does), so written files have NeMo Gym's key order.

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
    /// [`Json::set`] for many keys in order, in time linear in the object and the keys
    /// (a key set twice keeps its first position and its last value).
    pub fn set_all<K: AsRef<str>>(&mut self, kvs: impl IntoIterator<Item = (K, Json)>) {
        let Json::Obj(items) = self else { return };
        let mut at: std::collections::HashMap<Key, usize> =
            items.iter().enumerate().rev().map(|(i, (k, _))| (k.clone(), i)).collect();
        for (k, v) in kvs {
            match at.get(k.as_ref()) {
                Some(&i) => items[i].1 = v,
                None => {
                    let k: Key = Arc::from(k.as_ref());
                    at.insert(k.clone(), items.len());
                    items.push((k, v));
                }
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
    /// Whether every number in the value is finite (strict JSON has no `NaN` or
    /// `Infinity`).
    pub fn all_finite(&self) -> bool {
        match self {
            Json::Float(f) => f.is_finite(),
            Json::Arr(items) => items.iter().all(Json::all_finite),
            Json::Obj(items) => items.iter().all(|(_, x)| x.all_finite()),
            _ => true,
        }
    }
    /// What the value is, for messages: `null`, `a boolean`, `a number`, `a string`,
    /// `a list`, `an object`.
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Int(_) | Json::Float(_) => "a number",
            Json::Str(_) => "a string",
            Json::Arr(_) => "a list",
            Json::Obj(_) => "an object",
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }
}
