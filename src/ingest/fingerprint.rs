//! A task's fingerprint: what the task asks, so that two runs are paired only on the
//! same question.
//!
//! A row's fingerprint is FNV-1a (64-bit) over the user messages of its
//! `responses_create_params.input`, in order. For each message whose `role` is `"user"`,
//! its `content` counts: a string as its characters (UTF-8, escapes decoded), a list of
//! parts as each part's `text` when it has one and otherwise the part's JSON as written.
//! Each message ends with the byte 0xFF, which UTF-8 text never holds, so two messages
//! cannot run into one. An `input` that is a plain string is one user message. Left out
//! are system and developer messages, sampling parameters, tools and the model — how a
//! task is asked, which is often what an experiment changes — and the `_ng_*`
//! bookkeeping. The key order, spacing and escaping of the JSON do not count.
//!
//! 0 means "no fingerprint": a row without `responses_create_params`, or without a user
//! message. A computed hash of 0 is written as 1.

use crate::json::scan::{decode_escaped, decode_str, key_is, Scalar, ScanError, ScanResult, Scanner};

/// FNV-1a, 64-bit.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    /// A string token's characters. The token was checked and its line validated as
    /// UTF-8, so a token without escapes is hashed as written and one with escapes is
    /// decoded into the hash run by run, with nothing allocated or validated again.
    fn text(&mut self, raw: &[u8], escaped: bool) -> ScanResult<()> {
        if escaped {
            decode_escaped(raw, |bytes| self.update(bytes)).map_err(|msg| ScanError { offset: 0, msg })
        } else {
            self.update(raw);
            Ok(())
        }
    }
    fn end_message(&mut self) {
        self.update(&[0xFF]);
    }
    fn finish(&self) -> u64 {
        self.0.max(1)
    }
}

/// The fingerprint of a text (a `--task-key` value standing in for a fingerprint): the
/// same hash, never 0.
pub fn of_text(text: &str) -> u64 {
    let mut h = Fnv::new();
    h.update(text.as_bytes());
    h.finish()
}

/// The fingerprint of the `responses_create_params` value at the scanner's position,
/// which it crosses (checking it is JSON, as a skip does). Returns the value as a skip
/// returns it (an object as a container, anything else as itself) and the fingerprint
/// (0 without a user message).
pub fn of_params<'a>(s: &mut Scanner<'a>) -> ScanResult<(Scalar<'a>, u64)> {
    if s.peek() != Some(b'{') {
        return Ok((s.value()?, 0));
    }
    s.i += 1;
    let empty = s.peek() == Some(b'}');
    let mut h = Fnv::new();
    let mut any = false;
    let mut first = true;
    while let Some(k) = s.next_key(&mut first)? {
        if !key_is(k, b"input") {
            s.value()?;
            continue;
        }
        // A repeated `input` replaces the earlier one, as a Python dict keeps the last.
        h = Fnv::new();
        any = false;
        match s.peek() {
            Some(b'"') => {
                let (raw, e) = s.string()?;
                h.text(raw, e).map_err(|e| ScanError { offset: s.i, msg: e.msg })?;
                h.end_message();
                any = true;
            }
            Some(b'[') => {
                s.i += 1;
                any = messages(s, &mut h)?;
            }
            _ => {
                s.value()?;
            }
        }
    }
    Ok((Scalar::Container { object: true, empty }, if any { h.finish() } else { 0 }))
}

/// A message's `content` as crossed: a string token (nearly always), else where the
/// value's JSON lies in the line.
enum Content<'a> {
    Text(&'a [u8], bool),
    Json(usize, usize),
}

/// The messages of an `input` array (after its `[`), up to and over its `]`; returns
/// whether one was a user message.
fn messages(s: &mut Scanner<'_>, h: &mut Fnv) -> ScanResult<bool> {
    let mut any = false;
    let mut first = true;
    loop {
        match s.peek() {
            Some(b']') => {
                s.i += 1;
                return Ok(any);
            }
            Some(b',') if !first => s.i += 1,
            Some(_) if first => {}
            _ => return Err(ScanError { offset: s.i, msg: "expected `,` or `]` in array" }),
        }
        first = false;
        if s.peek() != Some(b'{') {
            s.value()?;
            continue;
        }
        s.i += 1;
        let mut user = false;
        let mut content = None;
        let mut f2 = true;
        while let Some(k) = s.next_key(&mut f2)? {
            if key_is(k, b"role") {
                user = match s.value()? {
                    Scalar::Str(raw, false) => raw == b"user",
                    Scalar::Str(raw, true) => decode_str(raw, true).is_ok_and(|r| r == "user"),
                    _ => false,
                };
            } else if key_is(k, b"content") {
                // The role may come after it: the text is kept to hash at the end.
                content = Some(if s.peek() == Some(b'"') {
                    let (raw, e) = s.string()?;
                    Content::Text(raw, e)
                } else {
                    let start = s.i;
                    s.value()?;
                    Content::Json(start, s.i)
                });
            } else {
                s.value()?;
            }
        }
        match content.filter(|_| user) {
            Some(Content::Text(raw, e)) => h.text(raw, e).map_err(|e| ScanError { offset: s.i, msg: e.msg })?,
            Some(Content::Json(a, b)) => {
                content_parts(&s.b[a..b], h).map_err(|e| ScanError { offset: a + e.offset, msg: e.msg })?
            }
            None => continue,
        }
        h.end_message();
        any = true;
    }
}

/// A message's `content` that is not a string (already checked JSON): each part's
/// `text` (else the part as written), or anything else as written.
fn content_parts(bytes: &[u8], h: &mut Fnv) -> ScanResult<()> {
    let mut s = Scanner::new(bytes);
    match s.peek() {
        Some(b'[') => {
            s.i += 1;
            let mut first = true;
            loop {
                match s.peek() {
                    Some(b']') => return Ok(()),
                    Some(b',') if !first => s.i += 1,
                    _ => {}
                }
                first = false;
                let start = {
                    s.peek();
                    s.i
                };
                if s.peek() == Some(b'{') {
                    s.i += 1;
                    let mut text = None;
                    let mut f2 = true;
                    while let Some(k) = s.next_key(&mut f2)? {
                        match s.value()? {
                            Scalar::Str(raw, e) if key_is(k, b"text") => text = Some((raw, e)),
                            _ => {}
                        }
                    }
                    match text {
                        Some((raw, e)) => h.text(raw, e)?,
                        None => h.update(&bytes[start..s.i]),
                    }
                } else {
                    s.value()?;
                    h.update(&bytes[start..s.i]);
                }
            }
        }
        _ => {
            h.update(bytes);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(params: &str) -> u64 {
        let mut s = Scanner::new(params.as_bytes());
        let (_, f) = of_params(&mut s).unwrap();
        s.end().unwrap();
        f
    }

    #[test]
    fn what_counts_is_the_user_messages() {
        let base = fp(
            r#"{"input":[{"role":"system","content":"be brief"},{"role":"user","content":"2+2?"}],"temperature":1.0}"#,
        );
        assert_ne!(base, 0);
        // Another system message, temperature, model, key order, spacing, escapes: same task.
        assert_eq!(
            base,
            fp(
                r#"{"model": "m", "input": [{"content": "2+2?", "type": "message", "role": "user"}], "temperature": 0.0}"#
            )
        );
        assert_eq!(base, fp(r#"{"input":[{"role":"developer","content":"x"},{"role":"user","content":"2\u002b2?"}]}"#));
        assert_eq!(base, fp(r#"{"input":[{"role":"user","content":[{"type":"input_text","text":"2+2?"}]}]}"#));
        assert_eq!(base, fp(r#"{"input":"2+2?"}"#));
        // Another question, or the same words split into two messages: another task.
        assert_ne!(base, fp(r#"{"input":[{"role":"user","content":"2+3?"}]}"#));
        assert_ne!(base, fp(r#"{"input":[{"role":"user","content":"2+"},{"role":"user","content":"2?"}]}"#));
        // No user message, no input, not an object: no fingerprint.
        assert_eq!(fp(r#"{"input":[{"role":"system","content":"2+2?"}]}"#), 0);
        assert_eq!(fp(r#"{"temperature":1}"#), 0);
        assert_eq!(fp(r#"[1,2]"#), 0);
        assert_eq!(fp(r#"{}"#), 0);
        // Anything but an object is returned as a skip returns it, scalars as themselves.
        let mut s = Scanner::new(b"\"text\"");
        assert!(matches!(of_params(&mut s).unwrap(), (Scalar::Str(b"text", false), 0)));
    }

    /// Escapes decode to the characters they stand for, wherever they sit in the text,
    /// and a message's role may come after its content.
    #[test]
    fn escaped_text_hashes_as_its_characters() {
        let plain = fp("{\"input\":[{\"role\":\"user\",\"content\":\"caf\u{e9} \u{1F600} \\\"q\\\" a\\\\b\\n/\"}]}");
        for escaped in [
            r#"{"input":[{"content":"caf\u00e9 \ud83d\ude00 \"q\" a\\b\n\/","role":"user"}]}"#,
            r#"{"input":[{"role":"user","content":"\u0063af\u00E9 \ud83d\ude00 \u0022q\u0022 a\u005cb\u000a/"}]}"#,
            r#"{"input":[{"role":"user","content":[{"type":"input_text","text":"caf\u00e9 \ud83d\ude00 \"q\" a\\b\n/"}]}]}"#,
            r#"{"input":"caf\u00e9 \ud83d\ude00 \"q\" a\\b\n/"}"#,
        ] {
            assert_eq!(fp(escaped), plain, "{escaped}");
        }
        assert_eq!(plain, {
            let mut h = Fnv::new();
            h.update("café 😀 \"q\" a\\b\n/".as_bytes());
            h.end_message();
            h.finish()
        });
    }

    #[test]
    fn a_broken_value_is_refused_as_a_skip_would() {
        for bad in [
            r#"{"input":[{"role":"user","content":"x"}"#,
            r#"{"input":[{"role":"user" "content":"x"}]}"#,
            r#"{"input":[1,]}"#,
        ] {
            let mut s = Scanner::new(bad.as_bytes());
            assert!(of_params(&mut s).and_then(|_| s.end()).is_err(), "{bad}");
        }
    }
}
