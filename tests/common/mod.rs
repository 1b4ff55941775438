//! Helpers shared by the integration tests: run the real binary in a fresh temp dir,
//! compare JSON artifacts with key order, types and a relative float tolerance.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rollstat::json::{parse, Json};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rollstat"))
}

/// Runs `rollstat` with args; returns the output.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("run rollstat")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A fresh temporary folder, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "rollstat-test-{}-{}-{}",
            tag,
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    pub fn join(&self, s: &str) -> PathBuf {
        self.0.join(s)
    }
    /// Files in the folder (names), sorted.
    pub fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A small seeded generator (splitmix64) for tests that draw kill times or mutations.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
    /// An index into a collection of `n` items.
    pub fn pick(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

/// The lines of `src` shuffled and cut at `files - 1` random points (each part holds a
/// line at least) into `{stem}{k}.jsonl` in `d`, and their concatenation `all.jsonl`.
pub fn cut_shuffled(d: &TempDir, src: &Path, files: usize, stem: &str, rng: &mut Rng) -> (Vec<PathBuf>, PathBuf) {
    let text = std::fs::read_to_string(src).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    for i in (1..lines.len()).rev() {
        lines.swap(i, rng.pick(i + 1));
    }
    let mut points: Vec<usize> = (0..files - 1).map(|_| 1 + rng.pick(lines.len() - 1)).collect();
    points.push(0);
    points.push(lines.len());
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    for (k, w) in points.windows(2).enumerate() {
        let body: String = lines[w[0]..w[1]].iter().map(|l| format!("{l}\n")).collect();
        out.push(d.write(&format!("{stem}{k}.jsonl"), &body));
    }
    let all: String = lines.iter().map(|l| format!("{l}\n")).collect();
    (out, d.write("all.jsonl", &all))
}

pub fn read_json(p: &Path) -> Json {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    parse(&b).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub fn read_jsonl(p: &Path) -> Vec<Json> {
    let b = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    b.split(|&c| c == b'\n').filter(|l| !l.is_empty()).map(|l| parse(l).unwrap()).collect()
}

pub fn close(a: f64, b: f64) -> bool {
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    let scale = a.abs().max(b.abs());
    (a - b).abs() <= 1e-12 * scale
}

/// Compares `got` with `want`: same keys in the same order, same int/float typing,
/// floats within 1e-12 relative. Returns the first difference as a path and message.
pub fn diff(got: &Json, want: &Json, path: &str) -> Option<String> {
    match (got, want) {
        (Json::Obj(g), Json::Obj(w)) => {
            let gk: Vec<&str> = g.iter().map(|(k, _)| &**k).collect();
            let wk: Vec<&str> = w.iter().map(|(k, _)| &**k).collect();
            if gk != wk {
                let missing: Vec<&&str> = wk.iter().filter(|k| !gk.contains(k)).collect();
                let extra: Vec<&&str> = gk.iter().filter(|k| !wk.contains(k)).collect();
                return Some(format!(
                    "{path}: keys differ; missing {missing:?}, extra {extra:?}; got order {gk:?} want {wk:?}"
                ));
            }
            for ((k, gv), (_, wv)) in g.iter().zip(w) {
                if let Some(d) = diff(gv, wv, &format!("{path}.{k}")) {
                    return Some(d);
                }
            }
            None
        }
        (Json::Arr(g), Json::Arr(w)) => {
            if g.len() != w.len() {
                return Some(format!("{path}: array length {} != {}", g.len(), w.len()));
            }
            for (i, (gv, wv)) in g.iter().zip(w).enumerate() {
                if let Some(d) = diff(gv, wv, &format!("{path}[{i}]")) {
                    return Some(d);
                }
            }
            None
        }
        (Json::Float(a), Json::Float(b)) => (!close(*a, *b)).then(|| format!("{path}: {a} != {b}")),
        (Json::Int(a), Json::Int(b)) => (a != b).then(|| format!("{path}: {a} != {b}")),
        (a, b) => (a != b).then(|| format!("{path}: {a:?} != {b:?}")),
    }
}

/// The repository's shared folder, when present (CI has it beside the clone).
pub fn shared() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance");
    p.is_dir().then_some(p)
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs `rollstat generate --out-dir DIR` with `extra` arguments; asserts it succeeded.
pub fn generate(dir: &Path, extra: &[&str]) {
    let mut args = vec!["generate", "--out-dir", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
}
