//! Warnings said as they arise, before a run returns its own (a file's cut-off last
//! line, a field left out of a table): printed to stderr as `warning: …`, or held for a
//! host that issues warnings its own way (the Python package).

use std::cell::RefCell;

thread_local! {
    /// The warnings held on this thread instead of printed (see [`holding`]).
    static HELD: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Says a warning: printed to stderr, or held when the caller runs inside [`holding`].
pub fn say(msg: String) {
    let held = HELD.with(|h| match h.borrow_mut().as_mut() {
        Some(w) => {
            w.push(msg.clone());
            true
        }
        None => false,
    });
    if !held {
        eprintln!("warning: {msg}");
    }
}

/// Runs `f` (on this thread) holding the warnings [`say`] would print, and returns them,
/// in the order said, beside its result.
pub fn holding<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let before = HELD.with(|h| h.borrow_mut().replace(Vec::new()));
    let out = f();
    let held = HELD.with(|h| std::mem::replace(&mut *h.borrow_mut(), before)).unwrap_or_default();
    (out, held)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held warnings come back in order, a nested holding keeps its own, and the
    /// holding ends with the call.
    #[test]
    fn warnings_said_as_they_arise_can_be_held() {
        let (n, held) = holding(|| {
            say("a.jsonl: the last line is cut off".into());
            let ((), nested) = holding(|| say("nested".into()));
            assert_eq!(nested, ["nested"]);
            say("another".into());
            7
        });
        assert_eq!(n, 7);
        assert_eq!(held, ["a.jsonl: the last line is cut off", "another"]);
        assert!(HELD.with(|h| h.borrow().is_none()));
    }
}
