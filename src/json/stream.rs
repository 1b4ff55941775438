//! A streaming JSON emitter for the big artifacts (hundreds of MB of task entries at a
//! million rollouts): members are written straight into a byte buffer — no value tree —
//! in the same two layouts as [`super::write`] (compact, or indented by two spaces from
//! a base depth), byte for byte.

use super::{write_compact, write_f64, write_i64, write_indented, write_str, Json};

/// A newline and `2 * depth` spaces, copied from a constant (no memset call).
#[inline]
pub fn newline_indent(out: &mut Vec<u8>, depth: usize) {
    const NL: &[u8; 65] = b"\n                                                                ";
    if 2 * depth < NL.len() {
        out.extend_from_slice(&NL[..1 + 2 * depth]);
    } else {
        out.push(b'\n');
        out.resize(out.len() + 2 * depth, b' ');
    }
}

/// Longest [`Snip`] appended with one fixed-size copy.
const SNIP: usize = 64;

/// A short byte string appended with one fixed-size copy (no copy call, no length
/// dispatch): the members' `,` + newline + indentation + `"key": ` prefixes, thousands
/// per task batch. Longer strings fall back to an ordinary copy.
pub struct Snip {
    len: usize,
    short: [u8; SNIP],
    long: Vec<u8>,
}

impl Snip {
    pub fn new(bytes: &[u8]) -> Snip {
        let mut short = [0u8; SNIP];
        if bytes.len() <= SNIP {
            short[..bytes.len()].copy_from_slice(bytes);
            Snip { len: bytes.len(), short, long: Vec::new() }
        } else {
            Snip { len: bytes.len(), short, long: bytes.to_vec() }
        }
    }
    /// The prefix of a member that follows another one: separator, indentation for
    /// `depth` (none when compact), the quoted key and the colon.
    pub fn member(quoted_key: &[u8], depth: Option<usize>) -> Snip {
        let mut b = vec![b','];
        if let Some(d) = depth {
            newline_indent(&mut b, d);
        }
        b.extend_from_slice(quoted_key);
        b.extend_from_slice(if depth.is_some() { b": " } else { b":" });
        Snip::new(&b)
    }
    #[inline(always)]
    pub fn put(&self, out: &mut Vec<u8>) {
        if self.len <= SNIP {
            out.reserve(SNIP);
            // SAFETY: SNIP bytes of spare capacity are reserved and `short` is SNIP bytes;
            // only the first `len` (initialized from `bytes`) are covered by the length.
            unsafe {
                std::ptr::copy_nonoverlapping(self.short.as_ptr(), out.as_mut_ptr().add(out.len()), SNIP);
                out.set_len(out.len() + self.len);
            }
        } else {
            out.extend_from_slice(&self.long);
        }
    }
}

/// Writes one JSON value incrementally into its buffer `out` (drain it as you go).
pub struct Emitter {
    pub out: Vec<u8>,
    /// `None`: compact; `Some(d)`: indented, the outermost value at depth `d`.
    indent: Option<usize>,
    /// Per open container: whether it has members yet.
    stack: Vec<bool>,
}

impl Emitter {
    pub fn compact() -> Self {
        Emitter { out: Vec::new(), indent: None, stack: Vec::new() }
    }
    /// Whether the layout is compact (no newlines or indentation).
    pub fn is_compact(&self) -> bool {
        self.indent.is_none()
    }
    pub fn indented(depth: usize) -> Self {
        Emitter { out: Vec::new(), indent: Some(depth), stack: Vec::new() }
    }

    /// Depth of the value being written now (for nested writers).
    pub fn depth(&self) -> usize {
        self.indent.unwrap_or(0) + self.stack.len()
    }

    /// Separator and indentation before a member or element.
    fn item(&mut self) {
        let first = match self.stack.last_mut() {
            Some(has) => {
                let f = !*has;
                *has = true;
                f
            }
            None => return,
        };
        if !first {
            self.out.push(b',');
        }
        if self.indent.is_some() {
            let d = self.depth();
            newline_indent(&mut self.out, d);
        }
    }

    pub fn begin_obj(&mut self) {
        self.out.push(b'{');
        self.stack.push(false);
    }
    pub fn begin_arr(&mut self) {
        self.out.push(b'[');
        self.stack.push(false);
    }
    fn end(&mut self, close: u8) {
        let had = self.stack.pop().unwrap_or(false);
        if had && self.indent.is_some() {
            let d = self.depth();
            newline_indent(&mut self.out, d);
        }
        self.out.push(close);
    }
    pub fn end_obj(&mut self) {
        self.end(b'}');
    }
    pub fn end_arr(&mut self) {
        self.end(b']');
    }

    /// A member that follows another one in the open object, its whole prefix given
    /// (see [`Snip::member`], built for this emitter's layout and depth).
    #[inline(always)]
    pub fn member(&mut self, prefix: &Snip) {
        debug_assert_eq!(self.stack.last(), Some(&true));
        prefix.put(&mut self.out);
    }
    /// A member key known to need no escaping (a literal name).
    pub fn key_plain(&mut self, k: &str) {
        debug_assert!(!k.bytes().any(|c| c < 0x20 || c == b'"' || c == b'\\'));
        self.item();
        self.out.push(b'"');
        self.out.extend_from_slice(k.as_bytes());
        self.out.extend_from_slice(if self.indent.is_some() { b"\": " } else { b"\":" });
    }
    pub fn key(&mut self, k: &str) {
        self.item();
        write_str(&mut self.out, k);
        self.out.extend_from_slice(if self.indent.is_some() { b": " } else { b":" });
    }
    /// Starts an array element.
    pub fn elem(&mut self) {
        self.item();
    }

    pub fn f64(&mut self, v: f64) {
        write_f64(&mut self.out, v);
    }
    pub fn i64(&mut self, v: i64) {
        write_i64(&mut self.out, v);
    }
    pub fn bool(&mut self, v: bool) {
        self.out.extend_from_slice(if v { b"true" } else { b"false" });
    }
    pub fn null(&mut self) {
        self.out.extend_from_slice(b"null");
    }
    /// A whole value.
    pub fn json(&mut self, v: &Json) {
        match self.indent {
            None => write_compact(&mut self.out, v),
            Some(_) => {
                let d = self.depth();
                write_indented(&mut self.out, v, d);
            }
        }
    }
}

/// `"text"` escaped, for [`Snip::member`].
pub fn quoted(s: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(s.len() + 2);
    write_str(&mut v, s);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    #[test]
    fn matches_the_tree_writers() {
        let v = parse(br#"{"a": [1, 2.5, {"b": null, "c": []}], "d": {}, "e": "x"}"#).unwrap();
        for indent in [None, Some(0), Some(2)] {
            let mut e = match indent {
                None => Emitter::compact(),
                Some(d) => Emitter::indented(d),
            };
            e.begin_obj();
            e.key("a");
            e.begin_arr();
            e.elem();
            e.i64(1);
            e.elem();
            e.f64(2.5);
            e.elem();
            e.begin_obj();
            e.key("b");
            e.null();
            e.key("c");
            e.begin_arr();
            e.end_arr();
            e.end_obj();
            e.end_arr();
            e.key("d");
            e.json(&Json::obj());
            e.key("e");
            e.json(&Json::Str("x".into()));
            e.end_obj();
            let mut want = Vec::new();
            match indent {
                None => write_compact(&mut want, &v),
                Some(d) => write_indented(&mut want, &v, d),
            }
            assert_eq!(String::from_utf8(e.out).unwrap(), String::from_utf8(want).unwrap());
        }
    }
}
