//! Fault injection: signals and SIGKILL at random points while writing, a full disk, a
//! read-only folder, `/dev/full`, two runs writing one output, inputs that grow or
//! shrink while read. Each test asserts what is on disk afterwards: the previous file or
//! the complete new one at every output path, never a partial one, and no temporary file
//! visible to a listing of the output folder.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::common::{generate, rollstat, run, stderr, Rng, TempDir};

fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut c = rollstat().args(args).stderr_to(Stdio::piped());
    for (k, v) in env {
        c = c.env(k, v);
    }
    c.spawn()
}

fn send(child: &Child, sig: i32) {
    // SAFETY: kill on the pid of a child we have not waited for yet.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Waits for `child`; its status and stderr.
fn finish(child: Child) -> (ExitStatus, String) {
    let o = child.wait_with_output().unwrap();
    (o.status, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Every path under `dir` whose name marks a rollstat temporary.
fn temps(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(temps(&p));
        } else if e.file_name().to_string_lossy().contains("rollstat-tmp") {
            out.push(p);
        }
    }
    out
}

/// Whether an interrupted run reports outputs it had already completed (the signal came
/// after the last rename, before the process ended): those stay, whole.
fn kept(err: &str) -> bool {
    err.contains("already complete and kept")
}

/// Polls until `cond` holds (true) or `secs` pass (false).
fn wait_until(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    false
}

/// Whether process `pid` has `path` mapped.
fn maps(pid: u32, path: &Path) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains(path.to_str().unwrap()))
}

/// A sweep large enough that writing it takes a few hundred milliseconds.
const BIG: &[&str] = &["--tasks", "20000", "--repeats", "4"];

fn gen_args<'a>(dir: &'a str, seed: &'a str) -> Vec<&'a str> {
    let mut a = vec!["generate", "--out-dir", dir, "--seed", seed, "--force"];
    a.extend_from_slice(BIG);
    a
}

/// SIGINT and SIGTERM during `generate` into a folder that did not exist: the run ends
/// with 130 or 143 and removes its temporaries and every folder it created (or, had it
/// already finished, both files are complete). Both kinds of temporary are covered.
#[test]
fn interrupted_generate_leaves_nothing() {
    let t = TempDir::new("faults-int-gen");
    let want = t.join("want");
    generate(&want, BIG);
    let want_r = std::fs::read(want.join("rollouts.jsonl")).unwrap();
    let mut rng = Rng(11);
    let mut interrupted = 0;
    for (i, (sig, tmpfile)) in
        [(libc::SIGINT, "1"), (libc::SIGTERM, "0"), (libc::SIGINT, "0"), (libc::SIGTERM, "1")].into_iter().enumerate()
    {
        let top = t.join(&format!("new{i}"));
        let out = top.join("a/sweep");
        let out_s = out.to_str().unwrap().to_string();
        let mut args = vec!["generate", "--out-dir", &out_s];
        args.extend_from_slice(BIG);
        let child = spawn(&args, &[("ROLLSTAT_TMPFILE", tmpfile)]);
        assert!(wait_until(20, || out.exists()), "the output folder never appeared");
        std::thread::sleep(Duration::from_millis(rng.below(120)));
        send(&child, sig);
        let (status, err) = finish(child);
        if status.code() == Some(128 + sig) && !kept(&err) {
            interrupted += 1;
            assert!(!top.exists(), "run {i}: created folders left behind: {:?}", temps(&top));
            assert!(err.contains("interrupted") || err.contains("terminated"), "{err}");
        } else {
            assert!(status.success() || status.code() == Some(128 + sig), "run {i}: {status:?} {err}");
            assert_eq!(std::fs::read(out.join("rollouts.jsonl")).unwrap(), want_r);
            assert!(temps(&top).is_empty());
        }
    }
    assert!(interrupted >= 2, "too few runs were interrupted mid-way ({interrupted} of 4)");
}

/// SIGINT during `export` and `aggregate`: no new folder, no output file, no temporary
/// (or, had the run finished, complete outputs). The signal comes a random moment after
/// the run has mapped its input; most runs must be interrupted mid-way, or the test
/// checked little.
#[test]
fn interrupted_export_and_aggregate_leave_nothing() {
    let t = TempDir::new("faults-int-exp");
    let sweep = t.join("s");
    generate(&sweep, BIG);
    let rollouts = sweep.join("rollouts.jsonl");
    let r = rollouts.to_str().unwrap();
    let want = t.join("want.json");
    let o = run(&["aggregate", r, "-q", "--out", want.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let want_agg = std::fs::read(&want).unwrap();
    let mut rng = Rng(5);
    let mut interrupted = [0usize; 2];
    for (i, tmpfile) in ["1", "0", "1", "0"].into_iter().enumerate() {
        let ex = t.join(&format!("ex{i}"));
        let child = spawn(&["export", r, "--out-dir", ex.to_str().unwrap()], &[("ROLLSTAT_TMPFILE", tmpfile)]);
        assert!(wait_until(20, || maps(child.id(), &rollouts)), "export never mapped its input");
        std::thread::sleep(Duration::from_millis(rng.below(100)));
        send(&child, libc::SIGINT);
        let (status, err) = finish(child);
        assert!(status.code() == Some(130) || status.success(), "{status:?} {err}");
        if status.code() == Some(130) && !kept(&err) {
            interrupted[0] += 1;
            assert!(!ex.exists(), "export {i}: left {:?}", std::fs::read_dir(&ex).map(|d| d.count()));
        } else {
            assert_eq!(std::fs::read_dir(&ex).unwrap().count(), 4, "{err}");
        }
        let agg = t.join(&format!("agg{i}.json"));
        let child = spawn(&["aggregate", r, "-q", "--out", agg.to_str().unwrap()], &[("ROLLSTAT_TMPFILE", tmpfile)]);
        assert!(wait_until(20, || maps(child.id(), &rollouts)), "aggregate never mapped its input");
        std::thread::sleep(Duration::from_millis(rng.below(60)));
        send(&child, libc::SIGINT);
        let (status, err) = finish(child);
        assert!(status.code() == Some(130) || status.success(), "{status:?} {err}");
        if status.code() == Some(130) && !kept(&err) {
            interrupted[1] += 1;
        }
        assert_eq!(agg.exists(), status.success() || kept(&err), "{err}");
        if agg.exists() {
            assert_eq!(std::fs::read(&agg).unwrap(), want_agg, "aggregate {i}");
        }
        assert!(temps(t.path()).is_empty(), "{:?}", temps(t.path()));
    }
    assert!(
        interrupted.iter().all(|&n| n >= 2),
        "too few runs were interrupted mid-way (export, aggregate): {interrupted:?} of 4"
    );
}

/// SIGKILL at random points while `generate --force` replaces a sweep: each file is the
/// previous one or the complete new one, and no temporary is visible afterwards.
#[test]
fn sigkill_leaves_the_previous_or_the_complete_new_file() {
    let t = TempDir::new("faults-kill");
    let old = t.join("old");
    let new = t.join("new");
    generate(&old, &[BIG, &["--seed", "1"]].concat());
    generate(&new, &[BIG, &["--seed", "2"]].concat());
    let names = ["rollouts.jsonl", "materialized_inputs.jsonl"];
    let old_b: Vec<Vec<u8>> = names.iter().map(|n| std::fs::read(old.join(n)).unwrap()).collect();
    let new_b: Vec<Vec<u8>> = names.iter().map(|n| std::fs::read(new.join(n)).unwrap()).collect();
    let dir = t.join("target");
    let d = dir.to_str().unwrap();
    let mut rng = Rng(3);
    let mut outcomes = [0usize; 2];
    for i in 0..6 {
        let o = run(&gen_args(d, "1"));
        assert!(o.status.success(), "{}", stderr(&o));
        let child = spawn(&gen_args(d, "2"), &[]);
        std::thread::sleep(Duration::from_millis(rng.below(400)));
        send(&child, libc::SIGKILL);
        let _ = finish(child);
        for (k, n) in names.iter().enumerate() {
            let got = std::fs::read(dir.join(n)).unwrap();
            let is_new = got == new_b[k];
            assert!(is_new || got == old_b[k], "kill {i}: {n} is partial ({} bytes)", got.len());
            outcomes[is_new as usize] += 1;
        }
        assert!(temps(&dir).is_empty(), "kill {i}: visible temporaries {:?}", temps(&dir));
    }
    assert!(outcomes[0] > 0, "no kill landed before the commit");
}

/// Where the file system has no unnamed temporaries (forced here with
/// `ROLLSTAT_TMPFILE=0`), SIGKILL leaves a hidden temporary; the next run writing the
/// same output removes it once its process is gone and it is a minute old, and keeps
/// one whose process still runs.
#[test]
fn the_next_run_removes_temporaries_of_killed_runs() {
    let t = TempDir::new("faults-sweep");
    let dir = t.join("sweep");
    let d = dir.to_str().unwrap().to_string();
    let mut args = vec!["generate", "--out-dir", &d];
    args.extend_from_slice(BIG);
    let child = spawn(&args, &[("ROLLSTAT_TMPFILE", "0")]);
    assert!(wait_until(20, || !temps(&dir).is_empty()), "no temporary appeared");
    std::thread::sleep(Duration::from_millis(30));
    send(&child, libc::SIGKILL);
    let _ = finish(child);
    let left = temps(&dir);
    assert!(!left.is_empty(), "the run finished before the kill");
    let bytes: u64 = left.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    eprintln!("stranded by SIGKILL with named temporaries: {bytes} bytes");
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    for p in &left {
        std::fs::File::options().write(true).open(p).unwrap().set_modified(hour_ago).unwrap();
    }
    // A temporary of a process that still runs (this test) is not touched.
    let live = dir.join(format!(".rollouts.jsonl.rollstat-tmp-{}", std::process::id()));
    std::fs::write(&live, b"x").unwrap();
    std::fs::File::options().write(true).open(&live).unwrap().set_modified(hour_ago).unwrap();
    let o = run(&["generate", "--out-dir", &d, "--tasks", "20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(temps(&dir), vec![live]);
}

/// Runs rollstat with a file-size limit of `limit` bytes (SIGXFSZ ignored, so a write
/// past it fails with EFBIG as on a full disk).
fn run_limited(args: &[&str], limit: u64) -> std::process::Output {
    let mut c = rollstat().args(args);
    // SAFETY: setrlimit and signal are async-signal-safe; nothing is allocated.
    unsafe {
        c.cmd().pre_exec(move || {
            let lim = libc::rlimit { rlim_cur: limit, rlim_max: limit };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    c.output()
}

/// A full disk: the run fails with status 1 naming the cause, the previous files are
/// untouched, a folder it created is gone, no temporary is left. `/dev/full` likewise.
#[test]
fn a_full_disk_fails_cleanly() {
    let t = TempDir::new("faults-full");
    let prev = t.join("prev");
    generate(&prev, &["--tasks", "50"]);
    let before: Vec<Vec<u8>> =
        ["rollouts.jsonl", "materialized_inputs.jsonl"].iter().map(|n| std::fs::read(prev.join(n)).unwrap()).collect();
    let p = prev.to_str().unwrap();
    let o = run_limited(&["generate", "--out-dir", p, "--force", "--tasks", "2000"], 1 << 20);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("File too large"), "{}", stderr(&o));
    let after: Vec<Vec<u8>> =
        ["rollouts.jsonl", "materialized_inputs.jsonl"].iter().map(|n| std::fs::read(prev.join(n)).unwrap()).collect();
    assert!(before == after, "the previous sweep changed");
    assert!(temps(t.path()).is_empty());

    let fresh = t.join("fresh/nested");
    let o = run_limited(&["generate", "--out-dir", fresh.to_str().unwrap(), "--tasks", "2000"], 1 << 20);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!t.join("fresh").exists(), "created folders left behind");

    let rollouts = prev.join("rollouts.jsonl");
    let ex = t.join("ex");
    let o = run_limited(&["export", rollouts.to_str().unwrap(), "--out-dir", ex.to_str().unwrap()], 4096);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!ex.exists());

    let o = run(&["aggregate", rollouts.to_str().unwrap(), "-q", "--out", "/dev/full"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("No space left on device"), "{}", stderr(&o));
    assert_eq!(t.files(), vec!["prev"]);
    assert_eq!(std::fs::read_dir(&prev).unwrap().count(), 2);
}

/// A folder that refuses new files: a usage error (status 2) naming the folder, nothing
/// written. `/proc` and `/sys` refuse even root; a folder without write permission is
/// checked too when not running as root (root ignores permission bits).
#[test]
fn a_read_only_folder_is_refused() {
    let t = TempDir::new("faults-ro");
    let sweep = t.join("s");
    generate(&sweep, &["--tasks", "20"]);
    let r = sweep.join("rollouts.jsonl");
    let r = r.to_str().unwrap();
    for out in ["/proc/rollstat-test.json", "/sys/rollstat-test.json"] {
        let o = run(&["aggregate", r, "-q", "--out", out]);
        assert_eq!(o.status.code(), Some(2), "{out}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot create a file in"), "{}", stderr(&o));
        assert!(!Path::new(out).exists());
    }
    let o = run(&["export", r, "--out-dir", "/sys/rollstat-test"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        eprintln!("a_read_only_folder_is_refused: running as root, which ignores permission bits; chmod case skipped");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let ro = t.join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let o = run(&["aggregate", r, "-q", "--out", ro.join("a.json").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Two runs writing the same outputs at once: both succeed and each file is one run's
/// complete output, never a mix or a partial file; no temporary is left.
#[test]
fn two_runs_writing_one_output() {
    let t = TempDir::new("faults-two");
    let names = ["rollouts.jsonl", "materialized_inputs.jsonl"];
    let mut versions: Vec<Vec<Vec<u8>>> = Vec::new();
    for seed in ["2", "3"] {
        let d = t.join(&format!("ref{seed}"));
        generate(&d, &[BIG, &["--seed", seed]].concat());
        versions.push(names.iter().map(|n| std::fs::read(d.join(n)).unwrap()).collect());
    }
    for tmpfile in ["1", "0"] {
        let dir = t.join(&format!("both{tmpfile}"));
        let d = dir.to_str().unwrap();
        generate(&dir, &["--tasks", "10"]);
        let a = spawn(&gen_args(d, "2"), &[("ROLLSTAT_TMPFILE", tmpfile)]);
        let b = spawn(&gen_args(d, "3"), &[("ROLLSTAT_TMPFILE", tmpfile)]);
        for (status, err) in [finish(a), finish(b)] {
            assert!(status.success(), "{err}");
        }
        for (k, n) in names.iter().enumerate() {
            let got = std::fs::read(dir.join(n)).unwrap();
            assert!(versions.iter().any(|v| v[k] == got), "{n} is neither run's output ({} bytes)", got.len());
        }
        assert!(temps(&dir).is_empty(), "{:?}", temps(&dir));
    }
}

/// A rollouts file still being written (a running collection): the lines present when
/// the run opened it are read, the partial last line is a cut-off line, lines appended
/// later are not read. The output equals that of a copy of the file as it was.
#[test]
fn an_input_appended_while_read_is_read_as_it_was() {
    let t = TempDir::new("faults-append");
    let sweep = t.join("s");
    generate(&sweep, BIG);
    let all = std::fs::read(sweep.join("rollouts.jsonl")).unwrap();
    // Cut in the middle of a line: everything before it is "present at start".
    let mid = all.len() / 2;
    let cut = mid + all[mid..].iter().position(|&c| c == b'\n').unwrap() + 40;
    let frozen = t.join("frozen.jsonl");
    std::fs::write(&frozen, &all[..cut]).unwrap();
    let growing = t.join("growing.jsonl");
    std::fs::write(&growing, &all[..cut]).unwrap();

    let want = run(&["aggregate", frozen.to_str().unwrap(), "-q", "--out", t.join("want.json").to_str().unwrap()]);
    assert!(want.status.success(), "{}", stderr(&want));
    assert!(stderr(&want).contains("cut off"), "{}", stderr(&want));

    let got_path = t.join("got.json");
    let child = spawn(&["aggregate", growing.to_str().unwrap(), "-q", "--out", got_path.to_str().unwrap()], &[]);
    assert!(wait_until(20, || maps(child.id(), &growing)), "the input was never mapped");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&growing).unwrap();
        for piece in all[cut..].chunks(1 << 20) {
            f.write_all(piece).unwrap();
        }
    }
    let (status, err) = finish(child);
    assert!(status.success(), "{err}");
    assert!(err.contains("cut off"), "{err}");
    assert!(
        std::fs::read(&got_path).unwrap() == std::fs::read(t.join("want.json")).unwrap(),
        "the output differs from that of the file as it was when opened"
    );
}

/// An input truncated by another process while it is mapped: the run ends with status
/// 2 and a message naming the file (not a SIGBUS crash), and writes nothing.
#[test]
fn an_input_truncated_while_read_is_reported() {
    let t = TempDir::new("faults-trunc");
    let sweep = t.join("s");
    generate(&sweep, BIG);
    let input = sweep.join("rollouts.jsonl");
    let out = t.join("out.json");
    let child = spawn(&["aggregate", input.to_str().unwrap(), "-q", "--out", out.to_str().unwrap()], &[]);
    assert!(wait_until(20, || maps(child.id(), &input)), "the input was never mapped");
    std::fs::File::options().write(true).open(&input).unwrap().set_len(0).unwrap();
    let (status, err) = finish(child);
    assert_eq!(status.code(), Some(2), "{status:?}: {err}");
    assert!(err.contains(input.to_str().unwrap()) && err.contains("shrank"), "{err}");
    assert!(!out.exists());
    assert!(temps(t.path()).is_empty());
}
