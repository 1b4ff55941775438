//! What every command shares: thread-count invariance, outputs to pipes, descriptors and
//! symbolic links, multi-piece reading, rollouts from a pipe, progress on a terminal.

use std::path::Path;

use super::*;
use crate::common::*;

#[test]
fn output_bytes_do_not_depend_on_threads() {
    let d = TempDir::new("threads");
    generate(
        d.path(),
        &[
            "--tasks",
            "300",
            "--repeats",
            "4",
            "--agents",
            "3",
            "--seed",
            "3",
            "--missing-frac",
            "0.02",
            "--masked-frac",
            "0.03",
            "--fan-out",
            "--env-server-stamp",
            "--ng-perf-frac",
            "0.5",
        ],
    );
    let (r, i) = (d.join("rollouts.jsonl"), d.join("materialized_inputs.jsonl"));
    let mut outs = Vec::new();
    for th in ["1", "2"] {
        let od = d.join(&format!("out{th}"));
        std::fs::create_dir_all(&od).unwrap();
        let o = run(&[
            "--threads",
            th,
            "profile",
            "--inputs",
            i.to_str().unwrap(),
            "--rollouts",
            r.to_str().unwrap(),
            "--allow-partial",
            "--out-dir",
            od.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let agg = od.join("agg.json");
        let o = run(&[
            "--threads",
            th,
            "aggregate",
            "--inputs",
            i.to_str().unwrap(),
            "--rollouts",
            r.to_str().unwrap(),
            "--out",
            agg.to_str().unwrap(),
            "--metric",
            "pass_at_k",
            "-q",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let mut files: Vec<Vec<u8>> = Vec::new();
        for f in [
            "rollouts_reward_profiling.jsonl",
            "rollouts_agent_metrics.json",
            "rollouts_repeat_level_metrics.json",
            "agg.json",
        ] {
            files.push(std::fs::read(od.join(f)).unwrap());
        }
        outs.push(files);
    }
    assert_eq!(outs[0], outs[1]);
}

/// An output naming a pipe is written into it, not replaced by a rename: the artifact
/// arrives on stdout, and a named pipe is still a pipe afterwards.
#[test]
fn outputs_to_pipes_stream_in_place() {
    use std::os::unix::fs::FileTypeExt;
    let d = TempDir::new("out-pipe");
    let (r, want) = small_aggregate(&d);
    // The process's own stdout by its /proc name (what /dev/stdout links to): a path
    // that cannot be renamed over, so a regression fails here instead of replacing a
    // system file.
    // Only the artifact goes there: the closing report (and key metrics, without `-q`)
    // moves to stderr, so the output stays readable as JSON.
    for quiet in [true, false] {
        let mut args = vec!["aggregate", "--rollouts", r.to_str().unwrap(), "--out", "/proc/self/fd/1"];
        if quiet {
            args.push("-q");
        }
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(o.stdout == want, "stdout should be the artifact alone: {}", String::from_utf8_lossy(&o.stdout));
        let err = stderr(&o);
        assert!(err.contains("Aggregate metrics: /proc/self/fd/1\n"), "{err}");
        assert_eq!(err.contains("Key metrics for "), !quiet, "{err}");
    }
    // A reader that goes away before reading (`| head -c 0`) ends the run quietly.
    let mut child = rollstat()
        .args(["aggregate", "--rollouts", r.to_str().unwrap(), "--out", "/dev/stdout"])
        .stdout_to(std::process::Stdio::piped())
        .stderr_to(std::process::Stdio::piped())
        .spawn();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));

    let fifo = d.join("agg.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", fifo.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(reader.join().unwrap(), want);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo(), "the named pipe was replaced");
}

/// Artifacts larger than one 8 MB block are written to files with direct I/O and to
/// pipes with ordinary writes: the bytes are the same, with and without a partial last
/// block, and match what `profile` writes beside them.
#[test]
fn large_artifacts_are_the_same_in_files_and_pipes() {
    let d = TempDir::new("out-large");
    generate(d.path(), &["--tasks", "3000", "--repeats", "5", "--agents", "1", "--seed", "5"]);
    let r = d.join("rollouts.jsonl");
    let file = d.join("agg.json");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", file.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let in_file = std::fs::read(&file).unwrap();
    assert!(in_file.len() > 8 << 20, "the artifact should span several blocks: {} bytes", in_file.len());
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", "/proc/self/fd/1", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout.len(), in_file.len());
    assert!(o.stdout == in_file, "file and pipe bytes differ");
    // A second run replaces the first file with the same bytes (no stale tail).
    let o =
        run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", file.to_str().unwrap(), "-q", "--threads", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(&file).unwrap() == in_file, "a rerun changed the artifact");
    // The task-level entries of the profile are the same entries, one per line.
    let i = d.join("materialized_inputs.jsonl");
    let out = d.join("profile");
    std::fs::create_dir(&out).unwrap();
    let [r, i, o] = [&r, &i, &out].map(|p| p.to_str().unwrap());
    let o = run(&["profile", "--rollouts", r, "--inputs", i, "--out-dir", o]);
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = std::fs::read_to_string(out.join("rollouts_reward_profiling.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 3000);
    assert!(lines.lines().all(|l| l.starts_with('{') && l.ends_with('}')));
}

/// An output naming the process's stdout when stdout is a file (a shell's `>> log`)
/// goes through that descriptor at its position, after what the file already holds and
/// before what rollstat prints; an output naming a symbolic link replaces the file it
/// points to and keeps the link.
#[test]
fn outputs_through_descriptors_and_symlinks() {
    let d = TempDir::new("out-fd");
    let (r, want) = small_aggregate(&d);

    let log = d.join("log.txt");
    std::fs::write(&log, "earlier line\n").unwrap();
    let append = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let o = rollstat()
        .args(["aggregate", "--rollouts", r.to_str().unwrap(), "--out", "/dev/fd/1", "-q"])
        .stdout_to(append)
        .ok();
    let got = std::fs::read(&log).unwrap();
    let expected = [&b"earlier line\n"[..], &want].concat();
    assert!(got == expected, "log holds {} bytes, expected {}", got.len(), expected.len());
    assert!(stderr(&o).contains("Aggregate metrics: /dev/fd/1\n"), "{}", stderr(&o));

    let real = d.join("real.json");
    std::fs::write(&real, "old").unwrap();
    let link = d.join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", link.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert_eq!(std::fs::read(&real).unwrap(), want);
    // A link to a file not made yet: the file is made, the link stays.
    let later = d.join("later.json");
    let dangling = d.join("dangling.json");
    std::os::unix::fs::symlink("later.json", &dangling).unwrap();
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", dangling.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink(), "the link was replaced");
    assert_eq!(std::fs::read(&later).unwrap(), want);
    assert!(d.files().iter().all(|f| !f.contains("rollstat-tmp")), "{:?}", d.files());
}

/// A file of several read pieces gives the same aggregate bytes with one thread, two
/// threads, and read from a pipe (which is streamed in blocks instead of mapped).
#[cfg(unix)]
#[test]
fn multi_piece_files_and_pipes_read_the_same() {
    let d = TempDir::new("pieces");
    generate(
        d.path(),
        &["--tasks", "2400", "--repeats", "4", "--agents", "1", "--seed", "17", "--missing-frac", "0.02"],
    );
    let r = d.join("rollouts.jsonl");
    assert!(std::fs::metadata(&r).unwrap().len() > 16 << 20, "the file should span several 8 MB pieces");
    let mut outs = Vec::new();
    for th in ["1", "2"] {
        let out = d.join(&format!("agg{th}.json"));
        let o = run(&[
            "--threads",
            th,
            "aggregate",
            "--rollouts",
            r.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        outs.push(std::fs::read(&out).unwrap());
    }
    let piped = d.join("agg_pipe.json");
    rollstat()
        .args(["aggregate", "--rollouts", "/dev/stdin", "--out", piped.to_str().unwrap(), "-q"])
        .stdin_from(std::fs::File::open(&r).unwrap())
        .ok();
    assert_eq!(outs[0], outs[1]);
    // stdin is a regular file here (mapped); read the same bytes through a real pipe too.
    rollstat()
        .args(["aggregate", "--rollouts", "/dev/stdin", "--out", d.join("agg_fifo.json").to_str().unwrap(), "-q"])
        .stdin(std::fs::read(&r).unwrap())
        .ok();
    assert_eq!(std::fs::read(&piped).unwrap(), outs[0]);
    assert_eq!(std::fs::read(d.join("agg_fifo.json")).unwrap(), outs[0]);
}

/// A pseudo-terminal, (master, slave), both close-on-exec so that only the child given
/// the slave as its stderr holds it. Linux always has pseudo-terminals (`/dev/ptmx`), so
/// failing to open one fails the test instead of skipping what it checks.
fn pty() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors it opened into the given ints; name, termios
    // and window size may be null.
    let rc = unsafe {
        libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut())
    };
    assert_eq!(rc, 0, "openpty failed: {}", std::io::Error::last_os_error());
    for fd in [master, slave] {
        // SAFETY: fd is an open descriptor; F_SETFD takes an int flag.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: both descriptors are open and owned by nothing else.
    unsafe { (std::fs::File::from_raw_fd(master), std::fs::File::from_raw_fd(slave)) }
}

/// Runs rollstat with `args` and its stderr on a new pseudo-terminal (progress shown
/// from 1 byte); returns what the terminal received.
fn run_on_terminal(args: &[&str]) -> String {
    use std::io::Read;
    let (mut master, slave) = pty();
    // spawn() drops the command: the child holds the only copy of the terminal's slave end
    // then, so reading the master ends (EIO) once the child exits.
    let mut child = rollstat().args(args).env("ROLLSTAT_PROGRESS_MIN_BYTES", "1").stderr_to(slave).spawn();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match master.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // EIO: the child, the last holder of the slave end, has exited.
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    assert!(child.wait().unwrap().success());
    reader.join().unwrap()
}

/// With stderr on a terminal, reading draws one progress line (share, speed, time left),
/// then names what the run does next, and clears the line; the artifact is the same.
/// An artifact written to that terminal gets no note mixed in. With stderr not a
/// terminal, none of it is printed.
#[test]
fn progress_shows_on_a_terminal_only() {
    let d = TempDir::new("progress");
    let (r, want) = small_aggregate(&d);
    let out = d.join("agg-tty.json");
    let tty = run_on_terminal(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"]);
    let read_line = "\rreading rollouts.jsonl: 100.0% (";
    let at_read = tty.find(read_line).unwrap_or_else(|| panic!("no finished progress line in {tty:?}"));
    // Speed and time left are left out when the read took under a millisecond.
    let line_end = tty[at_read..].find("\x1b[K").unwrap_or_else(|| panic!("{tty:?}"));
    let line = &tty[at_read..at_read + line_end];
    assert!(line.ends_with(" MB)") || line.ends_with(" s left)"), "{tty:?}");
    let at_stats = tty.find("\rcomputing statistics…").unwrap_or_else(|| panic!("{tty:?}"));
    let at_write = tty.find("\rwriting agg-tty.json…").unwrap_or_else(|| panic!("{tty:?}"));
    let cleared = tty.rfind("\r\x1b[2K").unwrap_or_else(|| panic!("{tty:?}"));
    assert!(at_read < at_stats && at_stats < at_write && at_write < cleared, "{tty:?}");
    assert_eq!(std::fs::read(&out).unwrap(), want);

    // The artifact to the terminal itself (its stderr): no note before or after it.
    let tty = run_on_terminal(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", "/proc/self/fd/2", "-q"]);
    let text = tty.replace("\r\n", "\n");
    let want = String::from_utf8(want).unwrap();
    let at = text.find(&want).unwrap_or_else(|| panic!("artifact not on the terminal intact: {tty:?}"));
    assert!(!text.contains("writing"), "{tty:?}");
    assert!(!text[at + want.len()..].contains('\x1b'), "the artifact's end was cleared: {tty:?}");

    let o = rollstat()
        .args(["aggregate", "--rollouts", r.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"])
        .env("ROLLSTAT_PROGRESS_MIN_BYTES", "1")
        .ok();
    assert!(!o.stderr.contains(&b'\r'), "progress printed to a pipe: {}", stderr(&o));
}

/// Rollouts from a pipe: with no output location there is no folder to write beside
/// them, so `aggregate` and `profile` refuse before reading (exit 2, the option to pass);
/// with `--out-dir` the artifacts are named `rollouts_*` (a pipe's name means nothing)
/// and hold what the same rollouts from a file give.
#[test]
fn rollouts_from_a_pipe() {
    let d = TempDir::new("pipe-in");
    generate(d.path(), &["--tasks", "40", "--repeats", "3", "--agents", "2", "--seed", "9"]);
    let (r, i) = (d.join("rollouts.jsonl"), d.join("materialized_inputs.jsonl"));
    // A pipe with a writer waiting on it (left blocked, never joined, when the pipe is
    // not read): a command that wrongly reads it gets rollouts and succeeds instead of
    // hanging the test.
    let waiting_pipe = |name: &str| {
        let p = d.join(name);
        assert!(std::process::Command::new("mkfifo").arg(&p).status().unwrap().success());
        let (bytes, q) = (std::fs::read(&r).unwrap(), p.clone());
        std::thread::spawn(move || std::fs::write(q, bytes));
        p
    };
    let p = waiting_pipe("piped-a.jsonl");
    let o = run(&["aggregate", "--rollouts", p.to_str().unwrap(), "-q"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("piped-a.jsonl") && stderr(&o).contains("--out FILE"), "{}", stderr(&o));
    let p = waiting_pipe("piped-b.jsonl");
    let o = run(&["profile", "--rollouts", p.to_str().unwrap(), "--inputs", i.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--out-dir DIR"), "{}", stderr(&o));

    let fifo = d.join("piped.jsonl");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());

    let feed = |bytes: Vec<u8>| {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::write(fifo, bytes).unwrap())
    };
    let (from_pipe, from_file) = (d.join("from-pipe"), d.join("from-file"));
    std::fs::create_dir_all(&from_pipe).unwrap();
    std::fs::create_dir_all(&from_file).unwrap();
    let profile_into = |rollouts: &Path, out: &Path| {
        let args = ["--rollouts", rollouts.to_str().unwrap(), "--inputs", i.to_str().unwrap()];
        let o = run(&[&["profile"][..], &args, &["--out-dir", out.to_str().unwrap()]].concat());
        assert!(o.status.success(), "{}", stderr(&o));
    };
    let writer = feed(std::fs::read(&r).unwrap());
    profile_into(&fifo, &from_pipe);
    writer.join().unwrap();
    profile_into(&r, &from_file);
    let names =
        ["rollouts_reward_profiling.jsonl", "rollouts_agent_metrics.json", "rollouts_repeat_level_metrics.json"];
    let mut listed: Vec<String> =
        std::fs::read_dir(&from_pipe).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    listed.sort();
    let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(listed, want);
    for n in names {
        assert_eq!(std::fs::read(from_pipe.join(n)).unwrap(), std::fs::read(from_file.join(n)).unwrap(), "{n}");
    }
}

/// Every command that reads one run takes its rollouts file as `--rollouts FILE` or as the
/// first argument, with the same result; giving both is a usage error.
#[test]
fn the_rollouts_file_may_be_given_without_the_flag() {
    let d = TempDir::new("positional");
    let (r, want) = small_aggregate(&d);
    let r = r.to_str().unwrap();
    let out = d.join("positional.json");
    let o = run(&["aggregate", r, "--out", out.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(&out).unwrap() == want, "positional aggregate differs");
    for args in [
        vec!["export", r, "--out-dir", d.join("tables").to_str().unwrap()],
        vec!["ingest", "--rollouts", r, "--out", d.join("flag.parquet").to_str().unwrap()],
        vec!["ingest", r, "--out", d.join("positional.parquet").to_str().unwrap()],
    ] {
        let o = run(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    assert_eq!(std::fs::read(d.join("flag.parquet")).unwrap(), std::fs::read(d.join("positional.parquet")).unwrap());
    // compare takes one or several files either way.
    let with_flag = run(&["compare", "--rollouts", r, "--rollouts", d.join("flag.parquet").to_str().unwrap()]);
    let positional = run(&["compare", r, d.join("flag.parquet").to_str().unwrap()]);
    assert!(with_flag.status.success(), "{}", stderr(&with_flag));
    assert_eq!(stdout(&with_flag), stdout(&positional));
    let o = run(&["aggregate", r, "--rollouts", r, "--out", d.join("both.json").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    assert!(!d.join("both.json").exists());
    let o = run(&["aggregate", "-q"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("ROLLOUTS.jsonl"), "{}", stderr(&o));
}

/// A run of the generated sweep, for `select`.
const RUN: &str = "math_with_judge_simple_agent";

/// `-q` means one thing on every command: print only which files were written. Warnings
/// still go to stderr.
#[test]
fn quiet_prints_only_the_files_written() {
    let d = TempDir::new("quiet");
    let (r, i) = sweep(&d);
    let (r, i) = (r.to_str().unwrap(), i.to_str().unwrap());
    let (p, a, pq, t) = (d.join("p"), d.join("a.json"), d.join("r.parquet"), d.join("t"));
    let sel = d.join("next.jsonl");
    let cases: Vec<(Vec<&str>, usize)> = vec![
        (vec!["profile", r, "--inputs", i, "--out-dir", p.to_str().unwrap(), "-q"], 3),
        (vec!["aggregate", r, "--out", a.to_str().unwrap(), "-q"], 2),
        (vec!["ingest", r, "--out", pq.to_str().unwrap(), "-q"], 1),
        (vec!["export", r, "--out-dir", t.to_str().unwrap(), "-q"], 4),
        (vec!["select", "--rollouts", r, "--inputs", i, "--run", RUN, "--out", sel.to_str().unwrap(), "-q"], 2),
    ];
    for (args, files) in cases {
        let o = run(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let out = stdout(&o);
        assert_eq!(out.lines().count(), files, "{args:?}: {out}");
        assert!(
            out.lines()
                .all(|l| ["Wrote ", "Aggregate metrics: ", "Quality summary: "].iter().any(|p| l.starts_with(p))),
            "{args:?}: {out}"
        );
        let o = run(&args[..args.len() - 1]);
        assert!(stdout(&o).lines().count() > files || args[0] == "export", "{args:?} without -q says more");
    }
}
