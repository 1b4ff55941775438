//! The properties rollstat's fuzz targets check, one function per target. Each takes any
//! bytes and panics when a property fails; the targets in `fuzz_targets/` call them under
//! libFuzzer, and the main crate's tests call them on every saved corpus file (so the
//! corpus is replayed by `cargo test` on the stable toolchain too).
//!
//! This file is compiled in two crates: by the fuzz crate, and by rollstat's integration
//! tests as a module. It uses only `rollstat`, `serde_json` and `std`.

#[cfg(feature = "engine")]
pub mod engine;

use std::path::{Path, PathBuf};

use rollstat::json::scan::{ScanError, Scanner};
use rollstat::json::{parse, transcode_compact, write_compact, write_indented, Json};

/// Nesting beyond which the differential oracle is not consulted: serde_json refuses
/// more than 128 levels, the checker reads any depth. The checker itself is still run.
const ORACLE_DEPTH: usize = 120;

/// One line through the checker as the readers run it: UTF-8 first, then one JSON value
/// (containers crossed by the checker, scalars read by the scanner), then only
/// whitespace.
pub fn check_line(b: &[u8]) -> Result<(), ScanError> {
    if let Err(e) = std::str::from_utf8(b) {
        return Err(ScanError { offset: e.valid_up_to(), msg: "invalid UTF-8" });
    }
    let mut s = Scanner::new(b);
    s.value()?;
    s.end()
}

/// `json_check`: the checker never panics, names an offset inside the line, and accepts
/// a line exactly when serde_json does once Python's `NaN`, `Infinity` and `-Infinity`
/// (outside strings) are read as `null`.
pub fn json_check(data: &[u8]) {
    let ours = check_line(data);
    if let Err(e) = &ours {
        assert!(e.offset <= data.len(), "offset {} past the line ({} bytes)", e.offset, data.len());
    }
    if let Some(theirs) = oracle_accepts(data) {
        assert_eq!(
            ours.is_ok(),
            theirs,
            "checker {:?}, serde_json {}: {:?}",
            ours,
            if theirs { "accepts" } else { "refuses" },
            String::from_utf8_lossy(data)
        );
    }
}

/// Whether serde_json reads `b` as one JSON value, with the Python number tokens outside
/// strings replaced by `null` (a token glued to a neighbour stays invalid: `1NaN` becomes
/// `1null`). `None` when the text nests deeper than [`ORACLE_DEPTH`].
pub fn oracle_accepts(b: &[u8]) -> Option<bool> {
    let mut text = Vec::with_capacity(b.len() + 8);
    let (mut i, mut in_str, mut depth) = (0, false, 0usize);
    'bytes: while i < b.len() {
        let c = b[i];
        if in_str {
            text.push(c);
            if c == b'\\' && i + 1 < b.len() {
                text.push(b[i + 1]);
                i += 1;
            } else if c == b'"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > ORACLE_DEPTH {
                    return None;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {
                for word in [&b"-Infinity"[..], b"Infinity", b"NaN"] {
                    if b[i..].starts_with(word) {
                        text.extend_from_slice(b"null");
                        i += word.len();
                        continue 'bytes;
                    }
                }
            }
        }
        text.push(c);
        i += 1;
    }
    Some(serde_json::from_slice::<serde_json::Value>(&text).is_ok())
}

/// Nesting depth of a text (brackets outside strings), for skipping what the tree
/// readers refuse by design.
fn depth_of(b: &[u8]) -> usize {
    let (mut depth, mut most, mut in_str, mut escaped) = (0usize, 0usize, false, false);
    for &c in b {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_str = false;
            }
            continue;
        }
        match c {
            b'"' => in_str = true,
            b'[' | b'{' => {
                depth += 1;
                most = most.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    most
}

/// A value as it reads back after being written: NaN and the infinities are written
/// as `null`.
fn as_written(v: &Json) -> Json {
    match v {
        Json::Float(f) if !f.is_finite() => Json::Null,
        Json::Arr(items) => Json::Arr(items.iter().map(as_written).collect()),
        Json::Obj(items) => Json::Obj(items.iter().map(|(k, v)| (k.clone(), as_written(v))).collect()),
        other => other.clone(),
    }
}

/// `json_parse`: the tree parser accepts what the checker accepts (up to its nesting
/// limit), and what it builds reads back unchanged from both writers; the transcoder,
/// when it does not decline, writes what parsing, dropping the index keys and writing
/// compactly writes.
pub fn json_parse(data: &[u8]) {
    let tree = parse(data);
    if depth_of(data) <= 1000 {
        assert_eq!(
            tree.is_ok(),
            check_line(data).is_ok(),
            "parser {:?}, checker disagrees: {:?}",
            tree.as_ref().err(),
            String::from_utf8_lossy(data)
        );
    }
    let mut out = Vec::new();
    let ok = transcode_compact(data, &["_ng_task_index", "_ng_rollout_index"], &mut out);
    let Ok(mut v) = tree else {
        assert!(!ok, "transcoded a text the parser refuses: {:?}", String::from_utf8_lossy(data));
        return;
    };
    let want = as_written(&v);
    for indented in [false, true] {
        let mut text = Vec::new();
        if indented {
            write_indented(&mut text, &v, 0);
        } else {
            write_compact(&mut text, &v);
        }
        let again = parse(&text)
            .unwrap_or_else(|e| panic!("written text does not parse ({e}): {:?}", String::from_utf8_lossy(&text)));
        assert_eq!(again, want, "written as {:?}", String::from_utf8_lossy(&text));
    }
    if ok {
        v.remove("_ng_task_index");
        v.remove("_ng_rollout_index");
        let mut tree_text = Vec::new();
        write_compact(&mut tree_text, &v);
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&tree_text),
            "input {:?}",
            String::from_utf8_lossy(data)
        );
    }
}

/// A scratch file of this process, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str, bytes: &[u8]) -> Scratch {
        let path = std::env::temp_dir().join(format!("rollstat-fuzz-{}-{tag}.jsonl", std::process::id()));
        std::fs::write(&path, bytes).expect("write scratch file");
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `rollout_lines`: the rollout reader (from memory and from a file) and the inputs
/// reader give a table or a typed error naming the file, never a panic; the two rollout
/// paths agree. The input is rollouts, then optionally a `0xFF` byte (never in UTF-8)
/// and the inputs file; without it the same bytes are read as both.
pub fn rollout_lines(data: &[u8]) {
    let (rollouts, inputs) = match data.iter().position(|&c| c == 0xFF) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, data),
    };
    let name = Path::new("fuzz.jsonl");
    // Everything a read can compute, so that every path of the reader is crossed.
    let all = rollstat::ingest::ReadOptions { fingerprints: true, evidence: true };
    let from_bytes = rollstat::ingest::read_rollouts_bytes(name, rollouts, all);
    let file = Scratch::new("rollouts", rollouts);
    let from_file = rollstat::ingest::read_rollouts(&file.0, all);
    match (&from_bytes, &from_file) {
        (Ok(a), Ok(b)) => assert_eq!(a.len(), b.len()),
        (Err(a), Err(b)) => {
            assert!(a.to_string().starts_with("fuzz.jsonl"), "{a}");
            assert!(a.is_bad_input() && b.is_bad_input(), "{a} / {b}");
            // An empty file is named as such; empty bytes are "no rows".
            if !rollouts.is_empty() {
                assert_eq!(
                    a.to_string().replace("fuzz.jsonl", ""),
                    b.to_string().replace(&file.0.display().to_string(), "")
                );
            }
        }
        _ => panic!("memory {:?} vs file {:?}", from_bytes.as_ref().err(), from_file.as_ref().err()),
    }
    let inputs_file = Scratch::new("inputs", inputs);
    let read = rollstat::ingest::read_inputs(&inputs_file.0);
    if let Err(e) = &read {
        assert!(e.is_bad_input(), "{e}");
    }
    if let Ok(t) = &from_bytes {
        let rows: Vec<usize> = (0..t.len()).collect();
        let fields = rollstat::ingest::fields::discover_fields(t, &rows);
        for f in &fields {
            for r in 0..t.len() {
                let _ = f.at(t, r);
            }
        }
        let _ = rollstat::ingest::labels::runs(t, read.as_ref().ok());
        if let Ok(inp) = &read {
            let _ = rollstat::ingest::labels::contradiction(t, inp);
        }
    }
}

/// The values of a kernel input: eight bytes each, any bit pattern.
fn floats(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect()
}

/// numpy's pairwise summation (`DOUBLE_pairwise_sum` in `loops_utils.h.src`), written
/// after numpy's C loop, for reference: unrolled accumulators over blocks of 128, halves
/// cut at a multiple of eight.
fn numpy_pairwise<T: Copy + std::ops::Add<Output = T>>(a: &[T], neg_zero: T) -> T {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(neg_zero, |res, &x| res + x);
    }
    if n <= 128 {
        let mut r: [T; 8] = std::array::from_fn(|k| a[k]);
        let mut i = 8;
        while i < n - n % 8 {
            for (k, acc) in r.iter_mut().enumerate() {
                *acc = *acc + a[i + k];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        while i < n {
            res = res + a[i];
            i += 1;
        }
        return res;
    }
    let half = n / 2 - (n / 2) % 8;
    numpy_pairwise(&a[..half], neg_zero) + numpy_pairwise(&a[half..], neg_zero)
}

/// Bitwise equality, with every NaN equal to every other.
fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

/// `kernels`: on one input, the pairwise sums (float64 and float32) equal numpy's
/// algorithm bit for bit; quantiles and medians from the partial order equal those of a
/// full sort; `fsum` equals the exactly rounded sum, computed in 128-bit fixed point on
/// values `m · 2^e` (`|m| < 2^31`, `-30 ≤ e ≤ 30`, five bytes each).
pub fn kernels(data: &[u8]) {
    use rollstat::stats as sum;
    use rollstat::stats as quantile;
    let xs = floats(data);
    let got = sum::pairwise_sum(&xs);
    assert!(same(got, numpy_pairwise(&xs, -0.0)), "pairwise {got:e} of {xs:?}");
    assert!(same(sum::numpy_sum(&xs), 0.0 + numpy_pairwise(&xs, -0.0)));
    let small: Vec<f32> = data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    let (a, b) = (sum::pairwise_sum(&small), numpy_pairwise(&small, -0.0f32));
    assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "f32 pairwise {a:e} vs {b:e}");

    // Quantiles at levels taken from the first bytes, over the NaN-free values.
    let qs: Vec<f64> = data.iter().take(4).map(|&c| f64::from(c) / 255.0).collect();
    let finite: Vec<f64> = xs.iter().copied().filter(|x| !x.is_nan()).collect();
    let mut sorted = finite.clone();
    sorted.sort_by(f64::total_cmp);
    let mut partial = finite;
    let at = quantile::positions_for(partial.len(), &qs);
    quantile::order_at(&mut partial, &at);
    let close = |a: f64, b: f64| a == b || (a.is_nan() && b.is_nan());
    let (m1, m2) = (quantile::median_sorted(&partial), quantile::median_sorted(&sorted));
    assert!(close(m1, m2), "median {m1:e} vs {m2:e}");
    for &q in &qs {
        let (a, b) = (quantile::quantile_linear_sorted(&partial, q), quantile::quantile_linear_sorted(&sorted, q));
        assert!(close(a, b), "quantile {q}: {a:e} vs {b:e}");
        if let (Some(lo), Some(hi)) = (sorted.first(), sorted.last()) {
            if lo.is_finite() && hi.is_finite() && hi - lo < f64::MAX / 2.0 {
                assert!(*lo <= a && a <= *hi, "quantile {q} = {a:e} outside [{lo:e}, {hi:e}]");
            }
        }
    }

    // The streamed sum is the pairwise sum; streamed selection finds the sorted values,
    // also on a column long enough to be counted (the values cycled past 4,096).
    let mut stream = rollstat::stats::stream::PairwiseStream::new(xs.len() as u64);
    for &x in &xs {
        stream.push(x);
    }
    assert!(stream.numpy_sum().is_some_and(|s| same(s, sum::numpy_sum(&xs))), "streamed sum of {xs:?}");
    if !sorted.is_empty() {
        let long: Vec<f64> = sorted.iter().copied().cycle().take(sorted.len() + 5000).collect();
        for col in [&sorted, &long] {
            let mut want = col.clone();
            want.sort_by(f64::total_cmp);
            let n = col.len();
            let ranks: Vec<u64> = quantile::positions_for(n, &qs).into_iter().map(|k| k as u64).collect();
            let mut select = rollstat::stats::stream::Select::new();
            let mut passes = 0;
            while select.wants_pass() {
                for &x in col.iter() {
                    select.push(x);
                }
                select.end_pass(if passes == 0 { &ranks } else { &[] });
                passes += 1;
                assert!(passes <= 7, "selection within the key's bits");
            }
            assert!(!select.changed());
            for &k in &ranks {
                assert_eq!(select.at(k).to_bits(), want[k as usize].to_bits(), "rank {k} of {n}");
            }
        }
    }

    // fsum against an exact sum: every value is a multiple of 2^-30 below 2^61, so the
    // sum of up to 2^36 of them is exact in i128 and `as f64` rounds it once, to nearest.
    let mut exact: i128 = 0;
    let mut vals = Vec::new();
    for c in data.chunks_exact(5) {
        let m = i32::from_le_bytes(c[..4].try_into().unwrap());
        let e = i32::from(c[4] % 61) - 30;
        vals.push(f64::from(m) * 2f64.powi(e));
        exact += i128::from(m) << (e + 30);
    }
    let want = exact as f64 * 2f64.powi(-30);
    let got = sum::fsum(vals.iter().copied());
    assert!(
        got == want && got.is_sign_negative() == want.is_sign_negative(),
        "fsum {got:e}, exact {want:e} of {vals:?}"
    );
}
