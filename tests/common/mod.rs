//! Helpers shared by the integration tests: run the real binary in a fresh temp dir,
//! compare JSON artifacts with key order, types and a relative float tolerance.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use rollstat::json::{parse, Json};

mod shared;
pub use shared::{example_cases, skipped};

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rollstat"))
}

/// A run of the `rollstat` binary under test, set up like a `std::process::Command` and
/// ended by one of: [`output`](TestCommand::output) (whatever happened),
/// [`ok`](TestCommand::ok) (asserts success), [`fails`](TestCommand::fails) (asserts an
/// exit status) or [`spawn`](TestCommand::spawn) (a child to signal or wait for). A failed
/// assertion shows the command line, the status, stdout and stderr.
pub struct TestCommand {
    cmd: Command,
    /// Bytes written to the run's stdin through a pipe.
    input: Option<Vec<u8>>,
    /// Where stdin, stdout and stderr go, when the test says.
    stdin: Option<Stdio>,
    stdout: Option<Stdio>,
    stderr: Option<Stdio>,
}

/// A run of `rollstat`, in the test's working directory, with its environment.
pub fn rollstat() -> TestCommand {
    TestCommand { cmd: Command::new(bin()), input: None, stdin: None, stdout: None, stderr: None }
}

impl TestCommand {
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.cmd.arg(arg);
        self
    }

    pub fn args<I: IntoIterator<Item = A>, A: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.cmd.args(args);
        self
    }

    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.cmd.env(key, value);
        self
    }

    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.cmd.current_dir(dir);
        self
    }

    /// Feeds `bytes` to the run's stdin through a pipe, from a thread (so a run that
    /// writes while it reads cannot block on the test). A run that succeeds must have
    /// read them all; one that fails may stop reading early.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.input = Some(bytes.into());
        self
    }

    /// The run's stdin from a file (or any other `Stdio`), instead of a pipe of bytes.
    pub fn stdin_from(mut self, s: impl Into<Stdio>) -> Self {
        self.stdin = Some(s.into());
        self
    }

    /// The run's stdout to a file, a terminal, null or a pipe, instead of the default.
    pub fn stdout_to(mut self, s: impl Into<Stdio>) -> Self {
        self.stdout = Some(s.into());
        self
    }

    /// The run's stderr to a file, a terminal, null or a pipe, instead of the default.
    pub fn stderr_to(mut self, s: impl Into<Stdio>) -> Self {
        self.stderr = Some(s.into());
        self
    }

    /// The underlying command, for what the builder does not cover (a `pre_exec` hook).
    pub fn cmd(&mut self) -> &mut Command {
        &mut self.cmd
    }

    /// The command line (with its folder and environment), for failure messages.
    fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(d) = self.cmd.get_current_dir() {
            s += &format!("cd {} && ", d.display());
        }
        for (k, v) in self.cmd.get_envs() {
            if let Some(v) = v {
                s += &format!("{}={} ", k.to_string_lossy(), v.to_string_lossy());
            }
        }
        s += "rollstat";
        for a in self.cmd.get_args() {
            s += &format!(" {}", a.to_string_lossy());
        }
        s
    }

    /// Runs to the end; stdout and stderr are captured unless redirected, stdin is the
    /// bytes given (or the redirect, or nothing).
    pub fn output(mut self) -> Output {
        let what = self.describe();
        let input = self.input.take();
        let stdin = match (&input, self.stdin.take()) {
            (Some(_), _) => Stdio::piped(),
            (None, s) => s.unwrap_or_else(Stdio::null),
        };
        self.cmd.stdin(stdin);
        self.cmd.stdout(self.stdout.take().unwrap_or_else(Stdio::piped));
        self.cmd.stderr(self.stderr.take().unwrap_or_else(Stdio::piped));
        let mut child = self.cmd.spawn().unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        drop(self.cmd);
        let writer = input.map(|bytes| {
            let mut pipe = child.stdin.take().unwrap();
            std::thread::spawn(move || pipe.write_all(&bytes))
        });
        let o = child.wait_with_output().unwrap_or_else(|e| panic!("{what}: {e}"));
        if let Some(Err(e)) = writer.map(|w| w.join().unwrap()) {
            assert!(!o.status.success(), "{what}: succeeded without reading all of its stdin: {e}");
        }
        o
    }

    /// Runs to the end and asserts it succeeded.
    pub fn ok(self) -> Output {
        let what = self.describe();
        let o = self.output();
        assert!(o.status.success(), "{what}: {} (expected success)\n{}", o.status, streams(&o));
        o
    }

    /// Runs to the end and asserts it exited with status `code` (not 0: that is [`ok`](Self::ok)).
    pub fn fails(self, code: i32) -> Output {
        assert_ne!(code, 0, "fails(0) is ok()");
        let what = self.describe();
        let o = self.output();
        assert_eq!(o.status.code(), Some(code), "{what}: {} (expected exit status {code})\n{}", o.status, streams(&o));
        o
    }

    /// Starts the run and returns it; streams not redirected go to null (nobody reads
    /// them). Bytes for stdin need [`output`](Self::output).
    pub fn spawn(mut self) -> Child {
        assert!(self.input.is_none(), "stdin bytes are fed by output(), ok() or fails(), not spawn()");
        self.cmd.stdin(self.stdin.take().unwrap_or_else(Stdio::null));
        self.cmd.stdout(self.stdout.take().unwrap_or_else(Stdio::null));
        self.cmd.stderr(self.stderr.take().unwrap_or_else(Stdio::null));
        self.cmd.spawn().unwrap_or_else(|e| panic!("{}: cannot start: {e}", self.describe()))
    }
}

fn streams(o: &Output) -> String {
    format!("--- stdout ---\n{}--- stderr ---\n{}", stdout(o), stderr(o))
}

/// Runs `rollstat` with args; returns the output, whatever the status.
pub fn run(args: &[&str]) -> Output {
    rollstat().args(args).output()
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

/// Says that what needs `what` is skipped, as it is absent here (see [`skipped`]).
pub fn skip_without(what: &str) {
    skipped(&format!("{what} is missing"));
}

/// A copy of the folder `case` in a scratch folder, with each `NAME.zst` file in it (at any
/// depth) unpacked to `NAME`: the repository keeps large case files compressed. Returns the
/// scratch folder and the copy's path in it.
pub fn unpacked(case: &Path) -> (TempDir, PathBuf) {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            if p.is_dir() {
                copy(&p, &to.join(&name));
            } else if let Some(plain) = name.strip_suffix(".zst") {
                let bytes = zstd::decode_all(std::fs::File::open(&p).unwrap()).unwrap();
                std::fs::write(to.join(plain), bytes).unwrap();
            } else {
                std::fs::copy(&p, to.join(&name)).unwrap();
            }
        }
    }
    let d = TempDir::new("case");
    let name = case.file_name().unwrap().to_str().unwrap();
    let copy_path = d.join(name);
    copy(case, &copy_path);
    (d, copy_path)
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs `rollstat generate --out-dir DIR` with `extra` arguments; asserts it succeeded.
pub fn generate(dir: &Path, extra: &[&str]) {
    rollstat().args(["generate", "--out-dir", dir.to_str().unwrap()]).args(extra).ok();
}

/// Adds the run `generate` wrote into `dir` (its rollouts and inputs) to the lake
/// `lake`, with `extra` flags (`--sweep-id`, `--label`).
pub fn add_to_lake(dir: &Path, lake: &Path, extra: &[&str]) {
    rollstat()
        .arg("export")
        .arg(dir.join("rollouts.jsonl"))
        .arg("--inputs")
        .arg(dir.join("materialized_inputs.jsonl"))
        .arg("--lake")
        .arg(lake)
        .args(extra)
        .args(["-q"])
        .ok();
}
