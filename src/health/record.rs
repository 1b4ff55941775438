//! Reading one rollout line for the health check without building it: the line is
//! crossed once by the JSON scanner, which checks every byte and keeps only the members
//! the checks read (`_ng_task_index`, `_ng_rollout_index`, `_ng_rollout_id`,
//! `stage_index`, `ng_trajectory`, and the token counts under `response.usage`).
//!
//! A line is readable exactly when NeMo Gym's reader (orjson) takes it: UTF-8, strict
//! JSON (no `NaN` or `Infinity`, which rollstat's scanner otherwise accepts), and an
//! object. Surrounding bytes Python's `bytes.strip()` removes are ignored. A repeated key
//! counts with its last value, as in a Python dict.

use memchr::memmem::Finder;

use super::python;
use crate::json::scan::{decode_str, Scalar, Scanner};
use crate::json::Json;

/// One member's value: its JSON text and what the scanner read (containers skipped).
#[derive(Clone, Copy, Debug)]
pub struct Member<'a> {
    pub text: &'a [u8],
    pub scalar: Scalar<'a>,
}

impl Member<'_> {
    /// The value as a tree (only for the few members that need one).
    pub fn tree(&self) -> Option<Json> {
        crate::json::parse(self.text).ok()
    }

    /// Python truthiness, without building containers.
    pub fn truthy(&self) -> bool {
        self.scalar.truthy()
    }

    /// `str(value)` as Python spells it.
    pub fn python_str(&self) -> String {
        match self.scalar {
            Scalar::Str(raw, escaped) => decode_str(raw, escaped).unwrap_or_default(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => int_literal(self.text).map_or_else(|| crate::python_float::repr(f), |i| i.to_string()),
            _ => self.tree().map(|v| python::str_of(&v)).unwrap_or_default(),
        }
    }
}

/// An integer literal beyond `i64` that orjson still reads as an integer (up to
/// `u64::MAX`); the scanner reads such text as a float.
pub fn int_literal(text: &[u8]) -> Option<i128> {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: i128 = std::str::from_utf8(text).ok()?.parse().ok()?;
    (i128::from(i64::MIN)..=i128::from(u64::MAX)).contains(&v).then_some(v)
}

/// One token count of `response.usage`: absent, or present with its value when that is
/// a non-negative integer.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
enum Count {
    #[default]
    Absent,
    Present(Option<i128>),
}

/// The four token counts `response.usage` may hold.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    input: Count,
    prompt: Count,
    output: Count,
    completion: Count,
}

impl Usage {
    /// Prompt and completion tokens: `input_tokens` when that key is present (whatever
    /// it holds), else `prompt_tokens`; likewise `output_tokens` / `completion_tokens`.
    /// Each is kept only when it is a non-negative integer.
    pub fn tokens(&self) -> (Option<i128>, Option<i128>) {
        let pick = |a: Count, b: Count| match (a, b) {
            (Count::Present(v), _) | (Count::Absent, Count::Present(v)) => v,
            _ => None,
        };
        (pick(self.input, self.prompt), pick(self.output, self.completion))
    }
}

/// The members of one readable record that the checks read.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fields<'a> {
    pub task: Option<Member<'a>>,
    pub rollout: Option<Member<'a>>,
    pub stage: Option<Member<'a>>,
    pub rollout_id: Option<Member<'a>>,
    pub trajectory: Option<Member<'a>>,
    pub usage: Usage,
}

/// A line, read. (Moved once per line, so the large record variant stays unboxed.)
#[allow(clippy::large_enum_variant)]
pub enum Line<'a> {
    Record(Fields<'a>),
    /// Not readable: the name of the error Python raises (`JSONDecodeError` for text
    /// that is not JSON, `ValueError` for JSON that is not an object).
    Unreadable(&'static str),
}

/// Which member a top-level key names.
enum Slot {
    Task,
    Rollout,
    Stage,
    RolloutId,
    Trajectory,
    Response,
    Other,
}

fn slot(key: (&[u8], bool)) -> Slot {
    let decoded;
    let name = if key.1 {
        decoded = decode_str(key.0, true).unwrap_or_default();
        decoded.as_bytes()
    } else {
        key.0
    };
    match name {
        b"_ng_task_index" => Slot::Task,
        b"_ng_rollout_index" => Slot::Rollout,
        b"stage_index" => Slot::Stage,
        b"_ng_rollout_id" => Slot::RolloutId,
        b"ng_trajectory" => Slot::Trajectory,
        b"response" => Slot::Response,
        _ => Slot::Other,
    }
}

/// Reads lines; holds the searchers for the two words that only the strict check needs.
pub struct Reader {
    nan: Finder<'static>,
    infinity: Finder<'static>,
}

impl Default for Reader {
    fn default() -> Self {
        Reader { nan: Finder::new(b"NaN"), infinity: Finder::new(b"Infinity") }
    }
}

impl Reader {
    /// Reads one line that is not blank (already stripped).
    pub fn read<'a>(&self, line: &'a [u8]) -> Line<'a> {
        const DECODE: &str = "JSONDecodeError";
        if simdutf8::basic::from_utf8(line).is_err() {
            return Line::Unreadable(DECODE);
        }
        let mut s = Scanner::new(line);
        if s.peek() != Some(b'{') {
            let json = s.value().and_then(|_| s.end()).is_ok() && self.strict(line);
            return Line::Unreadable(if json { "ValueError" } else { DECODE });
        }
        match members(&mut s) {
            Some(fields) if self.strict(line) => Line::Record(fields),
            _ => Line::Unreadable(DECODE),
        }
    }

    /// Whether a line the scanner accepted is also JSON to orjson: nested at most 1,024
    /// levels, and without `NaN` or infinities. Nearly every line has neither word
    /// anywhere and too few brackets to be that deep; the others are read again.
    fn strict(&self, line: &[u8]) -> bool {
        if line.len() > 2 * MAX_DEPTH && openings(line) > MAX_DEPTH && too_deep(line) {
            return false;
        }
        if self.nan.find(line).is_none() && self.infinity.find(line).is_none() {
            return true;
        }
        crate::json::parse(line).is_ok_and(|v| v.all_finite())
    }
}

/// The deepest nesting orjson reads (the outermost container is level 1).
const MAX_DEPTH: usize = 1024;

/// How many bytes are `[` or `{` (the two differ only in bit 5), counted in blocks the
/// compiler turns into vector code.
fn openings(text: &[u8]) -> usize {
    text.chunks(255)
        .map(|block| block.iter().map(|&c| u8::from(c | 0x20 == b'{')).fold(0u8, u8::wrapping_add) as usize)
        .sum()
}

/// Whether JSON text nests containers more than [`MAX_DEPTH`] levels deep.
fn too_deep(text: &[u8]) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &c in text {
        match c {
            _ if escaped => escaped = false,
            b'\\' if in_string => escaped = true,
            b'"' => in_string = !in_string,
            b'[' | b'{' if !in_string => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return true;
                }
            }
            b']' | b'}' if !in_string => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// The members of the object the scanner stands at (`{`), or `None` when the line is not
/// JSON.
fn members<'a>(s: &mut Scanner<'a>) -> Option<Fields<'a>> {
    let mut f = Fields::default();
    s.i += 1;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first).ok()? {
        let wanted = match slot(key) {
            Slot::Task => &mut f.task,
            Slot::Rollout => &mut f.rollout,
            Slot::Stage => &mut f.stage,
            Slot::RolloutId => &mut f.rollout_id,
            Slot::Trajectory => &mut f.trajectory,
            Slot::Response => {
                f.usage = response(s)?;
                continue;
            }
            Slot::Other => {
                s.value().ok()?;
                continue;
            }
        };
        *wanted = Some(member(s)?);
    }
    s.end().ok()?;
    Some(f)
}

/// The value at the cursor, with its text.
fn member<'a>(s: &mut Scanner<'a>) -> Option<Member<'a>> {
    s.peek();
    let start = s.i;
    let scalar = s.value().ok()?;
    Some(Member { text: &s.b[start..s.i], scalar })
}

/// `response`: only its `usage` object is read (the last one, if repeated).
fn response(s: &mut Scanner<'_>) -> Option<Usage> {
    let mut usage = Usage::default();
    if s.peek() != Some(b'{') {
        s.value().ok()?;
        return Some(usage);
    }
    s.i += 1;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first).ok()? {
        if crate::json::scan::key_is(key, b"usage") {
            usage = Usage::default();
            if s.peek() == Some(b'{') {
                usage = counts(s)?;
                continue;
            }
        }
        s.value().ok()?;
    }
    Some(usage)
}

/// The token counts of a `usage` object at the cursor.
fn counts(s: &mut Scanner<'_>) -> Option<Usage> {
    let mut u = Usage::default();
    s.i += 1;
    let mut first = true;
    while let Some(key) = s.next_key(&mut first).ok()? {
        let m = member(s)?;
        let slot = if crate::json::scan::key_is(key, b"input_tokens") {
            &mut u.input
        } else if crate::json::scan::key_is(key, b"prompt_tokens") {
            &mut u.prompt
        } else if crate::json::scan::key_is(key, b"output_tokens") {
            &mut u.output
        } else if crate::json::scan::key_is(key, b"completion_tokens") {
            &mut u.completion
        } else {
            continue;
        };
        let value = match m.scalar {
            Scalar::Int(i) => Some(i128::from(i)),
            Scalar::Float(_) => int_literal(m.text),
            _ => None,
        };
        *slot = Count::Present(value.filter(|v| *v >= 0));
    }
    Some(u)
}

/// A task, rollout or stage index as NeMo Gym keeps it: an integer or a string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Index {
    Int(i64),
    /// An integer above `i64::MAX` (orjson reads integers up to `u64::MAX`).
    Big(u64),
    Str(Box<str>),
}

impl Index {
    /// An integer from `i64::MIN` to `u64::MAX`.
    fn int(v: i128) -> Index {
        i64::try_from(v).map_or(Index::Big(v as u64), Index::Int)
    }

    /// `str(index)`.
    pub fn text(&self) -> String {
        match self {
            Index::Int(i) => i.to_string(),
            Index::Big(i) => i.to_string(),
            Index::Str(s) => s.to_string(),
        }
    }
}

/// An index read from a member, and `str()` of the raw value when that differs from the
/// index's own text (`3.0` is index 3 but reads "3.0" in a rollout id).
pub struct Coerced {
    pub index: Index,
    pub raw_text: Option<Box<str>>,
}

/// Lenient validation of an `int | str` field: integers, floats without a fraction
/// (within `i64`), booleans (as 0 and 1) and strings. Anything else is refused with a
/// description of what was found.
pub fn coerce(m: &Member<'_>) -> Result<Coerced, String> {
    let plain = |index| Ok(Coerced { index, raw_text: None });
    match m.scalar {
        Scalar::Int(i) => plain(Index::Int(i)),
        Scalar::Str(raw, escaped) => plain(Index::Str(decode_str(raw, escaped).unwrap_or_default().into())),
        Scalar::Bool(b) => Ok(Coerced { index: Index::Int(i64::from(b)), raw_text: Some(m.python_str().into()) }),
        Scalar::Float(f) => match int_literal(m.text) {
            Some(i) => plain(Index::int(i)),
            None if f.fract() == 0.0 && f.abs() < python::TWO_63 => {
                Ok(Coerced { index: Index::Int(f as i64), raw_text: Some(crate::python_float::repr(f).into()) })
            }
            None if f.fract() == 0.0 => Err(format!("{} (too large for an integer)", String::from_utf8_lossy(m.text))),
            None => Err(format!("{} (a number with a fraction)", String::from_utf8_lossy(m.text))),
        },
        Scalar::Null => Err("null".into()),
        Scalar::Container { object: true, .. } => Err("an object".into()),
        Scalar::Container { object: false, .. } => Err("a list".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str) -> Fields<'_> {
        match Reader::default().read(line.as_bytes()) {
            Line::Record(f) => f,
            Line::Unreadable(e) => panic!("{line}: {e}"),
        }
    }

    fn error(line: &[u8]) -> &'static str {
        match Reader::default().read(line) {
            Line::Record(_) => "",
            Line::Unreadable(e) => e,
        }
    }

    #[test]
    fn lines_are_refused_as_orjson_refuses_them() {
        assert_eq!(error(b"[1, 2]"), "ValueError");
        assert_eq!(error(b"\"text\""), "ValueError");
        assert_eq!(error(b"{\"a\": 1"), "JSONDecodeError");
        assert_eq!(error(b"{\"a\": NaN}"), "JSONDecodeError");
        assert_eq!(error(b"[-Infinity]"), "JSONDecodeError");
        assert_eq!(error(b"{\"a\": \"\xff\"}"), "JSONDecodeError");
        assert_eq!(error(b"{\"a\": \"NaN and Infinity\"}"), "");
        let nested = |levels: usize| format!("{{\"a\": {}{}}}", "[".repeat(levels - 1), "]".repeat(levels - 1));
        assert_eq!(error(nested(MAX_DEPTH).as_bytes()), "");
        assert_eq!(error(nested(MAX_DEPTH + 1).as_bytes()), "JSONDecodeError");
    }

    #[test]
    fn usage_prefers_the_responses_names_when_present() {
        let f =
            fields(r#"{"response": {"usage": {"prompt_tokens": 5, "input_tokens": null, "completion_tokens": 2}}}"#);
        assert_eq!(f.usage.tokens(), (None, Some(2)));
        let f = fields(r#"{"response": {"usage": {"input_tokens": 1}}, "response": {"usage": 3}}"#);
        assert_eq!(f.usage.tokens(), (None, None));
        let f = fields(r#"{"response": {"usage": {"input_tokens": 18446744073709551615, "output_tokens": 2.0}}}"#);
        assert_eq!(f.usage.tokens(), (Some(18_446_744_073_709_551_615), None));
    }

    #[test]
    fn indexes_coerce_as_lenient_validation_does() {
        let f = fields(
            r#"{"_ng_task_index": 3.0, "_ng_rollout_index": true, "stage_index": "s", "\u005fng_task_index": 4.0}"#,
        );
        let task = coerce(&f.task.unwrap()).unwrap();
        assert_eq!((task.index, task.raw_text.as_deref()), (Index::Int(4), Some("4.0")));
        let rollout = coerce(&f.rollout.unwrap()).unwrap();
        assert_eq!((rollout.index, rollout.raw_text.as_deref()), (Index::Int(1), Some("True")));
        let f = fields(r#"{"_ng_task_index": 1.5, "_ng_rollout_index": 1e20}"#);
        assert!(coerce(&f.task.unwrap()).is_err());
        assert!(coerce(&f.rollout.unwrap()).is_err());
    }
}
