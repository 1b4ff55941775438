//! JSON, the one format every layer touches: the ordered value ([`Json`]), a strict line
//! scanner that reads only what is asked and checks the rest ([`scan`], [`check`]), a
//! tree parser ([`parse()`]), the writers in NeMo Gym's two layouts ([`write`],
//! [`number`]), a streaming emitter for the big artifacts ([`stream`]) and a transcoder
//! for rows written back unchanged ([`transcode`]). It depends on nothing else in the
//! crate, so ingest, metrics and export may all use it.
//!
//! Floats are written in shortest round-trip form with a decimal point or exponent
//! (`1.0`, `0.1`, `1e-7`); NaN and infinities become `null` as orjson writes them.
//! Accepted beyond RFC 8259, because Python writes them: `NaN`, `Infinity`, `-Infinity`.

pub mod check;
pub mod number;
pub mod parse;
pub mod scalar;
pub mod scan;
pub mod stream;
pub mod transcode;
pub mod value;
pub mod write;

pub use number::{write_f64, write_i64};
pub use parse::parse;
pub use transcode::transcode_compact;
pub use value::{Json, Key, Members};
pub use write::{escape_into, write_compact, write_indented, write_str};

/// Deepest nesting the tree parser and the transcoder follow: NeMo Gym's reader (orjson)
/// reads 1,024 levels and refuses more, so every row it could write back fits.
const MAX_DEPTH: usize = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    /// `set_all` is `set` key by key: replaced keys keep their place (the first of a
    /// repeated key), new keys append in order, a key given twice keeps its last value.
    #[test]
    fn set_all_is_set_one_by_one() {
        // An object holding `a` twice (the parser keeps one; a built object may not).
        let start = || {
            let kv = |k: &str, v: i64| (std::sync::Arc::from(k), Json::Int(v));
            Json::Obj(vec![kv("a", 1), kv("b", 2), kv("a", 3), kv("c", 4)])
        };
        let kvs: Vec<(String, Json)> = [("c", 5), ("d", 6), ("a", 7), ("d", 8), ("e", 9)]
            .iter()
            .map(|&(k, v)| (k.to_string(), Json::Int(v)))
            .collect();
        let mut one = start();
        for (k, v) in kvs.clone() {
            one.set(&k, v);
        }
        let mut all = start();
        all.set_all(kvs);
        assert_eq!(all, one);
        let mut text = Vec::new();
        write_compact(&mut text, &all);
        assert_eq!(String::from_utf8(text).unwrap(), r#"{"a":7,"b":2,"a":3,"c":5,"d":8,"e":9}"#);
    }

    /// The streaming re-serializer writes what parse + write_compact write, or declines.
    /// A repeated key keeps its first position and its last value, in a small object
    /// (searched) and in a large one (indexed) alike.
    #[test]
    fn repeated_keys_keep_first_position_and_last_value_at_any_size() {
        for n in [3usize, 200] {
            let mut text = String::from("{");
            for k in 0..n {
                text.push_str(&format!("\"k{k}\": {k}, "));
            }
            text.push_str("\"k1\": \"last\"}");
            let Json::Obj(items) = parse(text.as_bytes()).unwrap() else { panic!() };
            assert_eq!(items.len(), n, "n = {n}");
            assert_eq!(&*items[1].0, "k1");
            assert_eq!(items[1].1, Json::Str("last".into()), "n = {n}");
            assert_eq!(items[n - 1].1, Json::Int(n as i64 - 1));
        }
    }

    #[test]
    fn transcode_matches_the_tree_path() {
        let cases: [&[u8]; 16] = [
            "{\"s\": \"plain text ✓\", \"_ng_rollout_index\": 2}".as_bytes(),
            // Escapes copied as they are, and ones that are rewritten, alone and together.
            br#"{"k": "say \"hi\"\n\ttab \\ back \b\f", "l": "end\\"}"#,
            br#"{"k": "a\/b", "l": "\u00e9", "m": "\\/"}"#,
            br#"{"k": "C:\\new \u00e9 \/ \u0001 \ud83d\ude00", "l": "\\\"\\n"}"#,
            b"{\"k\": \"esc \\\" and a raw\ttab\"}",
            br#"{"k": "\r\n", "l": ["\\", "\"", "x\\y"]}"#,
            br#"{"k": "\u005c\u0022 \u00"}"#,
            br#"{"k": "\u005c\u0022"}"#,
            br#"{"_ng_task_index": 3, "a": [1, 2.50, -0.0, 1e5, {"b": null}], "_ng_rollout_index": 0, "c": "\u00e9\/x\n"}"#,
            br#"{ "x" : { } , "y" : [ ] , "z" : true , "w" : false , "n" : NaN, "big": 12345678901234567890 }"#,
            br#"{"nested": {"_ng_task_index": 1}, "s": "plain text"}"#,
            br#"{"dup": 1, "dup": 2}"#,
            b"{\"ctl\": \"a\tb\"}",
            br#"{"a": 1,}"#,
            br#"{"a": [1, 2}"#,
            br#"[1, 2]"#,
        ];
        for c in cases {
            let mut got = Vec::new();
            let ok = transcode_compact(c, &["_ng_task_index", "_ng_rollout_index"], &mut got);
            match parse(c) {
                Ok(mut tree) if matches!(tree, Json::Obj(_)) && ok => {
                    tree.remove("_ng_task_index");
                    tree.remove("_ng_rollout_index");
                    let mut want = Vec::new();
                    write_compact(&mut want, &tree);
                    assert_eq!(String::from_utf8(got).unwrap(), String::from_utf8(want).unwrap());
                }
                _ => assert!(got.is_empty(), "{}", String::from_utf8_lossy(c)),
            }
        }
        // Declined only where the tree path is needed.
        let mut o = Vec::new();
        assert!(transcode_compact(br#"{"a": {"b": [1, "x"]}}"#, &[], &mut o));
        assert!(!transcode_compact(br#"{"dup": 1, "dup": 2}"#, &[], &mut o));
    }

    /// orjson's text for `v` built from ryu's digits, for reference: ryu writes the same
    /// digits and decimal/exponent choice, but positive exponents without their `+`.
    fn orjson_form(v: f64) -> String {
        let r = ryu::Buffer::new().format_finite(v).to_string();
        match r.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e}"),
            _ => r,
        }
    }

    /// Values whose text orjson 3.13 gave (NeMo Gym 0.7.0's writer).
    #[test]
    fn floats_as_orjson_wrote_them() {
        let cases = [
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (1e22, "1e+22"),
            (1.2345678901234568e20, "1.2345678901234568e+20"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (1e-5, "0.00001"),
            (0.0001, "0.0001"),
            (9_999_999_999_999_998.0, "9999999999999998.0"),
            (-0.0, "-0.0"),
            (-1e16, "-1e+16"),
            (2.5e-8, "2.5e-8"),
            (123456.789, "123456.789"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-7, "1e-7"),
            (100000.0, "100000.0"),
            (-2.5, "-2.5"),
        ];
        for (v, want) in cases {
            let mut o = Vec::new();
            write_f64(&mut o, v);
            assert_eq!(std::str::from_utf8(&o).unwrap(), want, "{v:e}");
        }
    }

    /// The whole-number shortcut prints what the float printer prints.
    #[test]
    fn whole_floats_match_the_reference() {
        let mut vals = vec![0.0, -0.0, 1.0, -1.0, 9_999_999_999_999_998.0, 1e15, -1e15, 1e16, 1e17, 2f64.powi(53)];
        let mut x = 1.0f64;
        while x < 1e18 {
            vals.extend([x, -x, x + 1.0, (x * 1.5).floor()]);
            x *= 3.0;
        }
        for v in vals {
            let mut o = Vec::new();
            write_f64(&mut o, v);
            assert_eq!(String::from_utf8(o).unwrap(), orjson_form(v), "{v}");
        }
    }

    /// Floats with fractions and exponents, also when appended after existing bytes.
    #[test]
    fn fractional_floats_match_the_reference() {
        let mut x = 1.234_567_890_123e-300f64;
        while x < 1e300 {
            for v in [x, -x, 1.0 / x, x + 0.5] {
                let mut o = b"ab".to_vec();
                write_f64(&mut o, v);
                assert_eq!(&o[..2], b"ab");
                assert_eq!(std::str::from_utf8(&o[2..]).unwrap(), orjson_form(v), "{v}");
            }
            x *= 7.77;
        }
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut o = Vec::new();
            write_f64(&mut o, v);
            assert_eq!(o, b"null");
        }
    }

    /// Random bit patterns (all magnitudes) and random values in the ranges statistics
    /// take print as the reference prints them.
    #[test]
    fn random_floats_match_the_reference() {
        let mut rng = crate::generate::rng::Rng::new(7);
        let mut o = Vec::new();
        let mut checked = 0;
        for k in 0..400_000 {
            let bits = rng.next_u64();
            let v = match k % 4 {
                0 => f64::from_bits(bits),
                1 => (bits >> 11) as f64 / (1u64 << 53) as f64,
                2 => (bits >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((bits % 40) as i32 - 20),
                _ => ((bits >> 11) % 100_000) as f64 / ((bits % 9) + 1) as f64,
            };
            if !v.is_finite() {
                continue;
            }
            o.clear();
            write_f64(&mut o, v);
            assert_eq!(std::str::from_utf8(&o).unwrap(), orjson_form(v), "{v:e}");
            checked += 1;
        }
        assert!(checked > 390_000);
    }

    #[test]
    fn round_trips_and_indents() {
        let v = parse(br#"{"a": [1, 2.0, {"b": null}], "c": "\u00e9\n", "d": {}, "e": []}"#).unwrap();
        let mut o = Vec::new();
        write_compact(&mut o, &v);
        assert_eq!(String::from_utf8(o).unwrap(), r#"{"a":[1,2.0,{"b":null}],"c":"é\n","d":{},"e":[]}"#);
        let mut o = Vec::new();
        write_indented(&mut o, &v, 0);
        assert_eq!(
            String::from_utf8(o).unwrap(),
            "{\n  \"a\": [\n    1,\n    2.0,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": \"é\\n\",\n  \"d\": {},\n  \"e\": []\n}"
        );
    }
}
