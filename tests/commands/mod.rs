//! The commands end to end: generate, ingest (Parquet round trip against an independent
//! serde_json reading), thread-count invariance, demo, export, query (against the
//! DataFrame API), custom metrics and batch metrics (against direct formulas).

use std::path::Path;

use polars::prelude::*;
use rollstat::json::Json;

use crate::common::*;

fn read_pq(p: &Path) -> DataFrame {
    ParquetReader::new(std::fs::File::open(p).unwrap()).finish().unwrap()
}

#[test]
fn generate_is_deterministic_and_thread_independent() {
    let a = TempDir::new("gen-a");
    let b = TempDir::new("gen-b");
    let args = [
        "--tasks",
        "60",
        "--repeats",
        "3",
        "--agents",
        "3",
        "--seed",
        "5",
        "--missing-frac",
        "0.05",
        "--masked-frac",
        "0.05",
        "--fan-out",
    ];
    let mut a1 = vec!["--threads", "1"];
    a1.extend_from_slice(&args);
    let mut a2 = vec!["--threads", "2"];
    a2.extend_from_slice(&args);
    // --threads is global: put it before the subcommand.
    let o = run(&[&["--threads", "1", "generate", "--out-dir", a.path().to_str().unwrap()][..], &args[..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&[&["--threads", "2", "generate", "--out-dir", b.path().to_str().unwrap()][..], &args[..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["rollouts.jsonl", "materialized_inputs.jsonl"] {
        assert_eq!(std::fs::read(a.join(f)).unwrap(), std::fs::read(b.join(f)).unwrap(), "{f} differs across threads");
    }
    let inputs = std::fs::read_to_string(a.join("materialized_inputs.jsonl")).unwrap();
    assert_eq!(inputs.lines().count(), 60 * 3 * 3);
    let rollouts = std::fs::read_to_string(a.join("rollouts.jsonl")).unwrap();
    let n = rollouts.lines().count();
    assert!(n < 540 && n > 480, "missing fraction off: {n}");
    for l in rollouts.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["_ng_task_index"].is_i64() && v["_ng_rollout_index"].is_i64());
    }
}

/// An independent reading of one rollout line: numeric fields with the usage overlay.
fn overlay(v: &serde_json::Value) -> Vec<(String, Option<f64>)> {
    let mut out: Vec<(String, Option<f64>)> = Vec::new();
    let num = |x: &serde_json::Value| -> Option<f64> {
        match x {
            serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
            serde_json::Value::Number(n) => n.as_f64(),
            _ => None,
        }
    };
    let obj = v.as_object().unwrap();
    let usage = obj.get("response").and_then(|r| r.get("usage")).and_then(|u| u.as_object());
    for (k, x) in obj {
        if k.starts_with('_') || k == "mask_sample" {
            continue;
        }
        let x = usage.and_then(|u| u.get(k)).unwrap_or(x);
        out.push((k.clone(), num(x)));
    }
    if let Some(u) = usage {
        for (k, x) in u {
            if !obj.contains_key(k) {
                out.push((k.clone(), num(x)));
            }
        }
    }
    out
}

/// Checks a written Parquet table against a serde_json reading of the JSONL file.
fn check_parquet_against_serde(jsonl: &Path, pq: &Path) {
    let df = read_pq(pq);
    let text = std::fs::read_to_string(jsonl).unwrap();
    let mut rows: Vec<serde_json::Value> =
        text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect();
    // The table is sorted by (task, rollout); the sort is stable, so equal keys keep file order.
    rows.sort_by_key(|v| (v["_ng_task_index"].as_i64(), v["_ng_rollout_index"].as_i64()));
    assert_eq!(df.height(), rows.len(), "{}", jsonl.display());
    let task = df.column("_ng_task_index").unwrap().i64().unwrap().clone();
    let rollout = df.column("_ng_rollout_index").unwrap().i64().unwrap().clone();
    for (i, v) in rows.iter().enumerate() {
        assert_eq!(task.get(i), v["_ng_task_index"].as_i64());
        assert_eq!(rollout.get(i), v["_ng_rollout_index"].as_i64());
        for (k, want) in overlay(v) {
            let Ok(col) = df.column(&k) else {
                assert!(want.is_none() || k == "mask_sample", "{}: numeric field {k} has no column", jsonl.display());
                continue;
            };
            if !(col.dtype().is_integer() || col.dtype().is_float()) {
                continue;
            }
            let got = col.cast(&DataType::Float64).unwrap().f64().unwrap().get(i);
            match (got, want) {
                (Some(g), Some(w)) => assert!(close(g, w) || (g.is_nan() && w.is_nan()), "{k} row {i}: {g} != {w}"),
                (None, None) => {}
                (g, w) => panic!("{}: {k} row {i}: {g:?} != {w:?}", jsonl.display()),
            }
        }
    }
}

#[test]
fn ingest_writes_typed_parquet_equal_to_an_independent_reading() {
    let d = TempDir::new("ingest");
    generate(
        d.path(),
        &[
            "--tasks",
            "40",
            "--repeats",
            "3",
            "--agents",
            "2",
            "--seed",
            "9",
            "--masked-frac",
            "0.1",
            "--missing-frac",
            "0.05",
            "--ng-perf-frac",
            "0.5",
        ],
    );
    let pq = d.join("r.parquet");
    let o = run(&[
        "ingest",
        d.join("rollouts.jsonl").to_str().unwrap(),
        "--inputs",
        d.join("materialized_inputs.jsonl").to_str().unwrap(),
        "--out",
        pq.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let df = read_pq(&pq);
    assert_eq!(df.column("_ng_task_index").unwrap().dtype(), &DataType::Int64);
    assert_eq!(df.column("mask_sample").unwrap().dtype(), &DataType::Boolean);
    assert_eq!(df.column("agent").unwrap().dtype(), &DataType::String);
    assert_eq!(df.column("extracted_answer").unwrap().dtype(), &DataType::String);
    assert!(df.column("extracted_answer").unwrap().null_count() > 0, "null answers stay null");
    assert_eq!(df.column("output_tokens").unwrap().dtype(), &DataType::Int64);
    assert!(df.column("mask_sample").unwrap().bool().unwrap().sum().unwrap() > 0);
    check_parquet_against_serde(&d.join("rollouts.jsonl"), &pq);
}

/// Whether an independent reading would refuse the file (a line that is not JSON, or
/// without integer task/rollout indexes).
fn refused_by_serde(p: &Path) -> bool {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    if text.trim().is_empty() {
        return true;
    }
    text.lines().filter(|l| !l.trim().is_empty()).any(|l| match serde_json::from_str::<serde_json::Value>(l) {
        Ok(v) => !(v.is_object() && v["_ng_task_index"].is_i64() && v["_ng_rollout_index"].is_i64()),
        Err(_) => !(l.contains("NaN") || l.contains("Infinity")),
    })
}

#[test]
fn ingest_every_corpus_rollouts_file() {
    let mut roots = vec![fixtures().join("conformance")];
    if let Some(s) = shared() {
        roots.push(s);
    }
    let mut n = 0;
    for root in roots {
        for group in std::fs::read_dir(&root).unwrap() {
            let group = group.unwrap().path();
            if !group.is_dir() {
                continue;
            }
            for case in std::fs::read_dir(&group).unwrap() {
                let case = case.unwrap().path();
                let r = case.join("rollouts.jsonl");
                if !r.exists() {
                    continue;
                }
                n += 1;
                let d = TempDir::new("corpus");
                let pq = d.join("out.parquet");
                let o = run(&["ingest", r.to_str().unwrap(), "--out", pq.to_str().unwrap()]);
                let text = std::fs::read_to_string(&r).unwrap_or_default();
                let has_nan = text.contains("NaN") || text.contains("Infinity");
                if refused_by_serde(&r) {
                    assert_eq!(o.status.code(), Some(2), "{} should be refused: {}", r.display(), stderr(&o));
                    assert!(stderr(&o).contains("rollouts.jsonl"), "{}", stderr(&o));
                    assert!(d.files().is_empty(), "refused but wrote {:?}", d.files());
                } else {
                    assert!(o.status.success(), "{}: {}", r.display(), stderr(&o));
                    if !has_nan {
                        check_parquet_against_serde(&r, &pq);
                    }
                }
            }
        }
    }
    assert!(n >= 22);
}

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

/// A small generated sweep in `d` and its aggregate artifact written to a plain file.
fn small_aggregate(d: &TempDir) -> (std::path::PathBuf, Vec<u8>) {
    generate(d.path(), &["--tasks", "30", "--repeats", "2", "--agents", "1", "--seed", "3"]);
    let r = d.join("rollouts.jsonl");
    let file = d.join("agg.json");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", file.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    (r, std::fs::read(&file).unwrap())
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
    let mut child = std::process::Command::new(bin())
        .args(["aggregate", "--rollouts", r.to_str().unwrap(), "--out", "/dev/stdout"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
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
    let o = std::process::Command::new(bin())
        .args(["aggregate", "--rollouts", r.to_str().unwrap(), "--out", "/dev/fd/1", "-q"])
        .stdout(append)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
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
    let o = std::process::Command::new(bin())
        .args(["aggregate", "--rollouts", "/dev/stdin", "--out", piped.to_str().unwrap(), "-q"])
        .stdin(std::fs::File::open(&r).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(outs[0], outs[1]);
    // stdin is a regular file here (mapped); read the same bytes through a real pipe too.
    let mut child = std::process::Command::new(bin())
        .args(["aggregate", "--rollouts", "/dev/stdin", "--out", d.join("agg_fifo.json").to_str().unwrap(), "-q"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&std::fs::read(&r).unwrap()).unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&piped).unwrap(), outs[0]);
    assert_eq!(std::fs::read(d.join("agg_fifo.json")).unwrap(), outs[0]);
}

#[test]
fn demo_runs_the_main_job() {
    let d = TempDir::new("demo");
    let dir = d.join("demo");
    let o = run(&["demo", "--dir", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("Key metrics for"), "{out}");
    // The agents share their tasks, so the comparison pairs all 100 of them.
    assert!(out.contains("paired on the tasks both measured"), "{out}");
    let paired: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("against ")).skip(2).take(2).collect();
    assert_eq!(paired.len(), 2, "{out}");
    for l in paired {
        assert_eq!(l.split_whitespace().nth(1), Some("100"), "{l}");
    }
    for f in [
        "rollouts_reward_profiling.jsonl",
        "rollouts_agent_metrics.json",
        "rollouts_aggregate_metrics.json",
        "rollouts.parquet",
        "tables/tasks.parquet",
    ] {
        assert!(dir.join(f).exists(), "{f} missing; {out}");
    }
}

fn sweep(d: &TempDir) -> (std::path::PathBuf, std::path::PathBuf) {
    generate(
        d.path(),
        &[
            "--tasks",
            "50",
            "--repeats",
            "4",
            "--agents",
            "3",
            "--seed",
            "21",
            "--masked-frac",
            "0.05",
            "--reward",
            "mixed",
        ],
    );
    (d.join("rollouts.jsonl"), d.join("materialized_inputs.jsonl"))
}

/// `aggregate` of the sweep's rollouts with its inputs and `extra` flags into
/// `d/agg.json`; the parsed artifact.
fn aggregate_sweep(d: &TempDir, r: &Path, i: &Path, extra: &[&str]) -> Json {
    let out = d.join("agg.json");
    let mut args = vec![
        "aggregate",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-q",
    ];
    args.extend_from_slice(extra);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    read_json(&out)
}

#[test]
fn export_tables_have_documented_columns_and_query_matches_dataframe_api() {
    let d = TempDir::new("export");
    let (r, i) = sweep(&d);
    let out = d.join("tables");
    let o = run(&[
        "export",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rollouts = read_pq(&out.join("rollouts.parquet"));
    let tasks = read_pq(&out.join("tasks.parquet"));
    let agents = read_pq(&out.join("agents.parquet"));
    let repeats = read_pq(&out.join("repeats.parquet"));
    for c in ["_ng_task_index", "_ng_rollout_index", "run_key", "agent", "mask_sample", "reward"] {
        assert!(rollouts.column(c).is_ok(), "rollouts.{c}");
    }
    for c in ["agent", "_ng_task_index", "mean/reward", "num_rollouts"] {
        assert!(tasks.column(c).is_ok(), "tasks.{c}");
    }
    for c in ["agent", "mean/reward", "num_repeats"] {
        assert!(agents.column(c).is_ok(), "agents.{c}");
    }
    for c in ["agent", "_ng_rollout_index", "sample_count", "mean/reward", "ci_low_95/reward"] {
        assert!(repeats.column(c).is_ok(), "repeats.{c}");
    }
    assert_eq!(agents.height(), 3);
    // SQL against the DataFrame API.
    let sql = "SELECT agent, AVG(CAST(reward AS DOUBLE)) AS m, COUNT(*) AS n FROM rollouts WHERE NOT mask_sample AND reward IS NOT NULL GROUP BY agent ORDER BY agent";
    let o = run(&["query", sql, "--parquet-dir", out.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
    let want = rollouts
        .clone()
        .lazy()
        .filter(col("mask_sample").not().and(col("reward").is_not_null()))
        .group_by([col("agent")])
        .agg([col("reward").cast(DataType::Float64).mean().alias("m"), len().alias("n")])
        .sort(["agent"], Default::default())
        .collect()
        .unwrap();
    let Json::Arr(rows) = got else { panic!() };
    assert_eq!(rows.len(), want.height());
    let wa = want.column("agent").unwrap().str().unwrap().clone();
    let wm = want.column("m").unwrap().f64().unwrap().clone();
    let wn = want.column("n").unwrap().cast(&DataType::Int64).unwrap().i64().unwrap().clone();
    for (k, row) in rows.iter().enumerate() {
        assert_eq!(row.get("agent"), Some(&Json::Str(wa.get(k).unwrap().to_string())));
        assert!(close(row.get("m").unwrap().as_f64().unwrap(), wm.get(k).unwrap()));
        assert_eq!(row.get("n"), Some(&Json::Int(wn.get(k).unwrap())));
    }
    // The leaderboard's mean is the centre of its interval (the mean across repeats, not
    // the pooled mean, which differs here: masked rollouts leave repeats unequal).
    // A mistyped report name is named as such, with the known reports.
    let o = run(&["query", "leaderbord", "--parquet-dir", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("\"leaderbord\" is neither a bundled report (leaderboard, "), "{}", stderr(&o));
    let o = run(&["query", "leaderboard", "--parquet-dir", out.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let Json::Arr(board) = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap() else { panic!() };
    assert_eq!(board.len(), 3);
    let mut differs = false;
    for row in &board {
        let f = |k: &str| row.get(k).and_then(Json::as_f64).unwrap_or_else(|| panic!("{k} in {row:?}"));
        let (m, lo, hi, pooled) = (f("mean_reward"), f("ci_low"), f("ci_high"), f("pooled_mean_reward"));
        assert!(lo <= m && m <= hi && close((lo + hi) / 2.0, m), "{row:?}");
        differs |= !close(m, pooled);
    }
    assert!(differs, "the sweep should make the two means differ: {board:?}");
    // Bundled reports run on the exported tables.
    for report in ["leaderboard", "hardest_tasks", "token_cost"] {
        let o = run(&["query", report, "--parquet-dir", out.to_str().unwrap(), "--format", "csv"]);
        assert!(o.status.success(), "{report}: {}", stderr(&o));
        assert!(stdout(&o).lines().count() >= 2, "{report}: {}", stdout(&o));
    }
    // A table written to a file holds every row and column, text uncut.
    let txt = d.join("all.txt");
    let sql = "SELECT *, 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' AS long_text FROM rollouts";
    let o = run(&["query", sql, "--parquet-dir", out.to_str().unwrap(), "--out", txt.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&txt).unwrap();
    let rows = read_pq(&out.join("rollouts.parquet")).height();
    assert!(rows > 50 && text.lines().count() >= rows + 5, "{} lines for {rows} rows", text.lines().count());
    assert!(text.contains(&"x".repeat(60)) && !text.contains('…'), "{}", &text[..2000.min(text.len())]);
    // Markdown escapes what would break a table row (`|`, backslashes) or start inline
    // markup, but not an underscore inside a word; null is an empty cell.
    let sql = "SELECT 'a|b' AS s_1, 'c\\d *e* _f_ <b>' AS t, 1.5 AS x, NULL AS n";
    let o = run(&["query", sql, "--parquet-dir", out.to_str().unwrap(), "--format", "markdown"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "| s_1 | t | x | n |\n|---|---|---:|---|\n| a\\|b | c\\\\d \\*e\\* \\_f\\_ \\<b\\> | 1.5 |  |\n"
    );
}

/// Population variance by the two-pass formula, mean over tasks.
fn direct_reward_variance(groups: &[Vec<f64>], ddof: usize) -> f64 {
    let vars: Vec<f64> = groups
        .iter()
        .filter(|g| !g.is_empty())
        .map(|g| {
            if g.len() <= 1 {
                return 0.0;
            }
            let m = g.iter().sum::<f64>() / g.len() as f64;
            g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (g.len() - ddof) as f64
        })
        .collect();
    if vars.is_empty() {
        0.0
    } else {
        vars.iter().sum::<f64>() / vars.len() as f64
    }
}

#[test]
fn reward_variance_builtin_and_sql_equal_a_direct_formula() {
    let d = TempDir::new("rv");
    let (r, i) = sweep(&d);
    let agg = aggregate_sweep(
        &d,
        &r,
        &i,
        &[
            "--metric",
            "reward_variance",
            "--metric",
            "reward_variance_sql",
            "--metric",
            "frac_reward_zero_std",
            "--metric",
            "pass_at_1",
        ],
    );
    let Json::Arr(entries) = agg else { panic!() };
    // Independent reading of rewards per (agent, task).
    let text = std::fs::read_to_string(&r).unwrap();
    let mut by: std::collections::BTreeMap<(String, i64), Vec<f64>> = Default::default();
    let inputs_text = std::fs::read_to_string(&i).unwrap();
    let mut agent_of: std::collections::HashMap<(i64, i64), String> = Default::default();
    for l in inputs_text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        agent_of.insert(
            (v["_ng_task_index"].as_i64().unwrap(), v["_ng_rollout_index"].as_i64().unwrap()),
            v["agent_ref"]["name"].as_str().unwrap().to_string(),
        );
    }
    for l in text.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v.get("mask_sample").and_then(|m| m.as_bool()) == Some(true) {
            continue;
        }
        let key = (v["_ng_task_index"].as_i64().unwrap(), v["_ng_rollout_index"].as_i64().unwrap());
        let reward = match &v["reward"] {
            serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
            x => x.as_f64(),
        };
        let e = by.entry((agent_of[&key].clone(), key.0)).or_default();
        if let Some(x) = reward {
            e.push(x);
        }
    }
    for e in &entries {
        let Some(Json::Str(name)) = e.get("agent_ref").and_then(|a| a.get("name")).cloned() else { panic!() };
        let groups: Vec<Vec<f64>> = by.iter().filter(|((a, _), _)| *a == name).map(|(_, v)| v.clone()).collect();
        let want = direct_reward_variance(&groups, 0);
        let am = e.get("agent_metrics").unwrap();
        let builtin = am.get("reward_variance").and_then(|v| v.as_f64()).unwrap();
        let sql = am.get("reward_variance_sql/value").and_then(|v| v.as_f64()).unwrap();
        assert!(close(builtin, want) || (builtin - want).abs() < 1e-15, "{name}: builtin {builtin} vs {want}");
        assert!(
            (sql - want).abs() <= 1e-12 * want.abs().max(1e-300) || (sql - want).abs() < 1e-15,
            "{name}: sql {sql} vs {want}"
        );
        let zero_std = groups.iter().filter(|g| !g.is_empty()).filter(|g| g.iter().all(|x| *x == g[0])).count() as f64
            / groups.iter().filter(|g| !g.is_empty()).count() as f64;
        assert!(close(am.get("frac_reward_zero_std/value").and_then(|v| v.as_f64()).unwrap(), zero_std));
        assert!(am.get("pass_at_1/value").is_some());
    }
}

#[test]
fn batch_metrics_on_jsonl_and_parquet() {
    let d = TempDir::new("batch");
    let jsonl = d.write(
        "batch.jsonl",
        r#"{"group_idx": 0, "token_level_scores": [0.0, 0.5, 0.5]}
{"group_idx": 0, "token_level_scores": [0.0, 0.0, 0.0]}
{"group_idx": 1, "token_level_scores": [1.0]}
{"uid": "u7", "reward": 0.25}
{"uid": "u7", "reward": 0.75}
{"uid": "u7", "reward": 1.0}
"#,
    );
    let groups = vec![vec![1.0, 0.0], vec![1.0], vec![0.25, 0.75, 1.0]];
    for ddof in [0usize, 1] {
        let o = run(&[
            "batch-metrics",
            jsonl.to_str().unwrap(),
            "--metric",
            "reward_variance",
            "--ddof",
            &ddof.to_string(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
        let got = v.get("custom_metrics/train/reward_variance").and_then(|x| x.as_f64()).unwrap();
        let want = direct_reward_variance(&groups, ddof);
        assert!(close(got, want), "ddof {ddof}: {got} vs {want}");
    }
    // The SQL metric agrees on the same batch.
    let o = run(&["batch-metrics", jsonl.to_str().unwrap(), "--metric", "reward_variance_sql"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
    let sql = v.get("custom_metrics/train/reward_variance_sql/value").and_then(|x| x.as_f64()).unwrap();
    assert!(close(sql, direct_reward_variance(&groups, 0)), "{sql}");
    // The same batch as Parquet.
    let mut df = df!(
        "group_idx" => [0i64, 0, 1, 2, 2, 2],
        "reward" => [1.0f64, 0.0, 1.0, 0.25, 0.75, 1.0]
    )
    .unwrap();
    let pq = d.join("batch.parquet");
    ParquetWriter::new(std::fs::File::create(&pq).unwrap()).finish(&mut df).unwrap();
    let o = run(&["batch-metrics", pq.to_str().unwrap(), "--prefix", "p"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
    assert!(close(v.get("p/reward_variance").and_then(|x| x.as_f64()).unwrap(), direct_reward_variance(&groups, 0)));
    assert!(v.get("p/pass@1/accuracy").is_some());
    let o = run(&["batch-metrics", pq.to_str().unwrap(), "--metric", "reward_variance_sql", "--prefix", "p"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = rollstat::json::parse(stdout(&o).trim().as_bytes()).unwrap();
    assert!(close(
        v.get("p/reward_variance_sql/value").and_then(|x| x.as_f64()).unwrap(),
        direct_reward_variance(&groups, 0)
    ));
    // An empty batch has no groups: 0.0.
    let empty = d.write("empty.jsonl", "\n");
    let o = run(&["batch-metrics", empty.to_str().unwrap(), "--metric", "reward_variance"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("\"custom_metrics/train/reward_variance\": 0.0"), "{}", stdout(&o));
}

/// Differential findings against NeMo Gym 0.7.0 on inputs outside the corpus.
mod reference_rules {
    use super::*;

    const INPUTS: &str = "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"agent_ref\":{\"name\":\"a\"}}\n";

    fn profile(rollouts: &str) -> (TempDir, Vec<Json>, Json) {
        let d = TempDir::new("rules");
        let i = d.write("inputs.jsonl", INPUTS);
        let r = d.write("rollouts.jsonl", rollouts);
        let o = run(&["profile", "--inputs", i.to_str().unwrap(), "--rollouts", r.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let tasks = read_jsonl(&d.join("rollouts_reward_profiling.jsonl"));
        let Json::Arr(mut agents) = read_json(&d.join("rollouts_agent_metrics.json")) else { panic!() };
        (d, tasks, agents.remove(0))
    }

    #[test]
    fn underscore_usage_keys_are_not_statistics() {
        let (_d, tasks, agent) = profile(
            "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1,\"response\":{\"usage\":{\"_hidden\":1,\"output_tokens\":3}}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"reward\":0,\"response\":{\"usage\":{\"_hidden\":2,\"output_tokens\":5}}}\n",
        );
        assert!(agent.get("mean/_hidden").is_none() && tasks[0].get("max/_hidden").is_none());
        assert_eq!(agent.get("mean/output_tokens"), Some(&Json::Float(4.0)));
        // rollout_infos keeps every numeric usage key, as NeMo Gym does.
        let Some(Json::Arr(infos)) = tasks[0].get("rollout_infos") else { panic!() };
        assert_eq!(infos[0].get("_hidden"), Some(&Json::Int(1)));
    }

    #[test]
    fn integers_beyond_2_pow_53_stay_exact() {
        let (_d, tasks, agent) = profile(
            "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"ts_ns\":9007199254740993}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"ts_ns\":9007199254740995}\n",
        );
        assert_eq!(agent.get("max/ts_ns"), Some(&Json::Int(9007199254740995)));
        assert_eq!(tasks[0].get("min/ts_ns"), Some(&Json::Int(9007199254740993)));
        let Some(Json::Arr(infos)) = tasks[0].get("rollout_infos") else { panic!() };
        assert_eq!(infos[1].get("ts_ns"), Some(&Json::Int(9007199254740995)));
    }

    #[test]
    fn a_usage_reward_overrides_the_record_reward_in_place() {
        let (_d, tasks, _) = profile(
            "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1,\"response\":{\"usage\":{\"reward\":0.5}}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"reward\":0,\"response\":{\"usage\":{\"reward\":0.5}}}\n",
        );
        let Some(Json::Arr(infos)) = tasks[0].get("rollout_infos") else { panic!() };
        let Json::Obj(members) = &infos[0] else { panic!() };
        assert_eq!(&*members[3].0, "reward");
        assert_eq!(members[3].1, Json::Float(0.5));
    }

    #[test]
    fn pass_at_k_leaves_out_rollouts_without_a_numeric_reward_with_a_warning() {
        let d = TempDir::new("passk-null");
        let r = d.write(
            "rollouts.jsonl",
            "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1,\"agent_ref\":{\"name\":\"a\"}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"reward\":null,\"agent_ref\":{\"name\":\"a\"}}\n",
        );
        let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--metric", "pass_at_k", "-q"]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(stderr(&o).contains("no numeric reward"), "{}", stderr(&o));
        let Json::Arr(e) = read_json(&d.join("rollouts_aggregate_metrics.json")) else { panic!() };
        assert_eq!(e[0].get("agent_metrics").unwrap().get("pass@1/accuracy"), Some(&Json::Float(100.0)));
    }
}

#[test]
fn a_users_sql_metric_folder_adds_metrics_by_file_name() {
    let d = TempDir::new("metric-dir");
    let (r, i) = sweep(&d);
    let dir = d.join("my_metrics");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("rollouts_per_agent.sql"),
        "-- rollouts_per_agent: how many measured rollouts each agent has.\nSELECT agent, COUNT(*) AS n FROM rollouts WHERE NOT mask_sample GROUP BY agent\n",
    )
    .unwrap();
    let agg = aggregate_sweep(
        &d,
        &r,
        &i,
        &[
            "--metric-dir",
            dir.to_str().unwrap(),
            "--metric",
            "rollouts_per_agent",
            "--key-metric",
            "rollouts_per_agent/*",
        ],
    );
    let Json::Arr(entries) = agg else { panic!() };
    for e in &entries {
        let am = e.get("agent_metrics").unwrap();
        let Some(Json::Obj(cov)) = e.get("key_metrics").cloned() else { panic!() };
        let measured = match am.get("coverage/measured_rollouts") {
            Some(Json::Int(n)) => *n,
            _ => match e.get("group_level_metrics") {
                Some(Json::Arr(tasks)) => tasks
                    .iter()
                    .map(|t| match t.get("num_rollouts") {
                        Some(Json::Int(n)) => *n,
                        _ => 0,
                    })
                    .sum(),
                _ => 0,
            },
        };
        assert_eq!(am.get("rollouts_per_agent/n"), Some(&Json::Int(measured)));
        assert!(cov.iter().any(|(k, _)| &**k == "rollouts_per_agent/n"), "key metric selected by glob");
    }
    // A metric that is not one number per agent is refused, naming what is wrong.
    for (file, sql, says) in [
        (
            "per_task.sql",
            "SELECT agent, AVG(reward) AS m FROM rollouts GROUP BY agent, _ng_task_index",
            "more than one row",
        ),
        ("text.sql", "SELECT agent, MAX(agent) AS who FROM rollouts GROUP BY agent", "column `who` is"),
    ] {
        std::fs::write(dir.join(file), sql).unwrap();
        let name = file.trim_end_matches(".sql");
        let out = d.join("bad.json");
        let args = ["aggregate", "--rollouts", r.to_str().unwrap(), "--inputs", i.to_str().unwrap()];
        let o = run(&[
            &args[..],
            &["--metric-dir", dir.to_str().unwrap(), "--metric", name, "--out", out.to_str().unwrap()],
        ]
        .concat());
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(&format!("metric {name}: ")) && stderr(&o).contains(says), "{}", stderr(&o));
        assert!(!out.exists());
    }
    // An unknown metric name is a usage error that lists what exists.
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--metric", "nope", "-q"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("pass_at_k") && stderr(&o).contains("frac_reward_zero_std"), "{}", stderr(&o));
}

/// A pseudo-terminal, (master, slave), both close-on-exec so that only the child given
/// the slave as its stderr holds it; None when the system has no pseudo-terminals.
fn pty() -> Option<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two descriptors it opened into the given ints; name, termios
    // and window size may be null.
    let rc = unsafe {
        libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut())
    };
    if rc != 0 {
        return None;
    }
    for fd in [master, slave] {
        // SAFETY: fd is an open descriptor; F_SETFD takes an int flag.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    // SAFETY: both descriptors are open and owned by nothing else.
    Some(unsafe { (std::fs::File::from_raw_fd(master), std::fs::File::from_raw_fd(slave)) })
}

/// Runs rollstat with `args` and its stderr on a new pseudo-terminal (progress shown
/// from 1 byte); returns what the terminal received, or None without pseudo-terminals.
fn run_on_terminal(args: &[&str]) -> Option<String> {
    use std::io::Read;
    let (mut master, slave) = pty()?;
    let mut cmd = std::process::Command::new(bin());
    cmd.args(args).env("ROLLSTAT_PROGRESS_MIN_BYTES", "1").stdout(std::process::Stdio::null()).stderr(slave);
    let mut child = cmd.spawn().unwrap();
    // The child holds the only copy of the terminal's slave end now, so reading the
    // master ends (EIO) once the child exits.
    drop(cmd);
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
    Some(reader.join().unwrap())
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
    let Some(tty) =
        run_on_terminal(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"])
    else {
        eprintln!("SKIPPED progress_shows_on_a_terminal_only: openpty failed (no pseudo-terminals here)");
        return;
    };
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
    let tty = run_on_terminal(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", "/proc/self/fd/2", "-q"])
        .expect("a pseudo-terminal worked above");
    let text = tty.replace("\r\n", "\n");
    let want = String::from_utf8(want).unwrap();
    let at = text.find(&want).unwrap_or_else(|| panic!("artifact not on the terminal intact: {tty:?}"));
    assert!(!text.contains("writing"), "{tty:?}");
    assert!(!text[at + want.len()..].contains('\x1b'), "the artifact's end was cleared: {tty:?}");

    let o = std::process::Command::new(bin())
        .args(["aggregate", "--rollouts", r.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"])
        .env("ROLLSTAT_PROGRESS_MIN_BYTES", "1")
        .output()
        .unwrap();
    assert!(o.status.success());
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

/// Keys written with `\u` escapes, and keys given twice in one line, read as NeMo Gym's
/// reader (orjson) reads them: escapes decoded, the last value kept. Each file below
/// must give the same artifacts, byte for byte, as its plain form (what that reader
/// makes of it, written out again).
#[test]
fn escaped_and_repeated_keys_read_as_their_plain_form() {
    let d = TempDir::new("keys");
    let rollouts_odd = [
        // Escaped top-level, nested, index, mask, private and agent keys.
        r#"{"reward":1.0,"r\u0065sponse":{"\u0075sage":{"tok":3}},"mask_\u0073ample":false,"\u005fng_task_index":0,"_ng_rollout_index":0,"\u005fhidden":5,"agent_ref":{"n\u0061me":"A"}}"#,
        // A second `response` replaces the first one's usage.
        r#"{"reward":0.0,"response":{"usage":{"tok":4,"gone":1}},"response":{"usage":{"tok":5}},"mask_sample":false,"_ng_task_index":0,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
        // An object after a number of the same key, a second `ng_perf` and `agent_ref`.
        r#"{"reward":1.0,"score":2,"score":{"a":1},"ng_perf":{"x":1},"ng_perf":null,"_ng_task_index":1,"_ng_rollout_index":0,"agent_ref":{"name":"B"},"agent_ref":{"name":"A"}}"#,
        // A stamp taken back, an agent name given twice.
        r#"{"reward":0.5,"response":{"usage":{"tok":6}},"_ng_environment_server":"S","_ng_environment_server":null,"_ng_task_index":1,"_ng_rollout_index":1,"agent_ref":{"name":"B","name":"A"}}"#,
    ];
    let rollouts_odd = [
        rollouts_odd[0],
        rollouts_odd[1],
        rollouts_odd[2],
        rollouts_odd[3],
        // Repeated keys inside `usage`, and a second `usage`: the last value wins.
        r#"{"reward":1.0,"tok":3,"response":{"usage":{"tok":"n/a","tok":7,"w":1,"w":"x"}},"_ng_task_index":2,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":0.0,"response":{"usage":{"z":1},"usage":{"tok":8}},"_ng_task_index":2,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let rollouts_plain = [
        r#"{"reward":1.0,"response":{"usage":{"tok":3}},"mask_sample":false,"_ng_task_index":0,"_ng_rollout_index":0,"_hidden":5,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":0.0,"response":{"usage":{"tok":5}},"mask_sample":false,"_ng_task_index":0,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":1.0,"score":{"a":1},"ng_perf":null,"_ng_task_index":1,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":0.5,"response":{"usage":{"tok":6}},"_ng_environment_server":null,"_ng_task_index":1,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":1.0,"tok":3,"response":{"usage":{"tok":7,"w":"x"}},"_ng_task_index":2,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"reward":0.0,"response":{"usage":{"tok":8}},"_ng_task_index":2,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let inputs_odd = [
        r#"{"q":"one","\u005fng_task_index":0,"_ng_rollout_index":0,"agent_ref":{"n\u0061me":"A"}}"#,
        r#"{"q":"one","_ng_task_index":0,"_ng_rollout_index":1,"agent_ref":{"name":"A"},"_ng_environment_server":"S","_ng_environment_server":null}"#,
        r#"{"q":"two","_ng_task_index":1,"_ng_rollout_index":0,"agent_ref":{"name":"B"},"agent_ref":{"name":"A"}}"#,
        r#"{"q":"two","_ng_task_index":1,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let inputs_odd = [
        inputs_odd[0],
        inputs_odd[1],
        inputs_odd[2],
        inputs_odd[3],
        r#"{"q":"three","_ng_task_index":2,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"three","_ng_task_index":2,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let inputs_plain = [
        r#"{"q":"one","_ng_task_index":0,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"one","_ng_task_index":0,"_ng_rollout_index":1,"agent_ref":{"name":"A"},"_ng_environment_server":null}"#,
        r#"{"q":"two","_ng_task_index":1,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"two","_ng_task_index":1,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"three","_ng_task_index":2,"_ng_rollout_index":0,"agent_ref":{"name":"A"}}"#,
        r#"{"q":"three","_ng_task_index":2,"_ng_rollout_index":1,"agent_ref":{"name":"A"}}"#,
    ];
    let mut outs = Vec::new();
    for (name, r, i) in [("odd", rollouts_odd, inputs_odd), ("plain", rollouts_plain, inputs_plain)] {
        let r = d.write(&format!("{name}_rollouts.jsonl"), &(r.join("\n") + "\n"));
        let i = d.write(&format!("{name}_inputs.jsonl"), &(i.join("\n") + "\n"));
        let od = d.join(&format!("out_{name}"));
        std::fs::create_dir_all(&od).unwrap();
        let o = run(&[
            "profile",
            "--rollouts",
            r.to_str().unwrap(),
            "--inputs",
            i.to_str().unwrap(),
            "--out-dir",
            od.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let agg = od.join("agg.json");
        let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", agg.to_str().unwrap(), "-q"]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let mut files = Vec::new();
        for f in std::fs::read_dir(&od).unwrap() {
            let f = f.unwrap().path();
            files.push((f.file_name().unwrap().to_string_lossy().replace(name, ""), std::fs::read(&f).unwrap()));
        }
        files.sort();
        outs.push(files);
    }
    assert_eq!(outs[0].len(), 4);
    for (odd, plain) in outs[0].iter().zip(&outs[1]) {
        assert_eq!(odd.0, plain.0);
        assert_eq!(String::from_utf8_lossy(&odd.1), String::from_utf8_lossy(&plain.1), "{}", odd.0);
    }
    // What the plain form holds, so that the comparison is not between two failures.
    let agg = std::fs::read_to_string(d.join("out_plain/agg.json")).unwrap();
    assert!(agg.contains("\"mean/tok\": 5.8"), "{agg}");
    for absent in ["gone", "_hidden", "score", "perf_summary", "\"B\"", "/w\"", "/z\""] {
        assert!(!agg.contains(absent), "{absent} in {agg}");
    }
}

/// Two NeMo Gym rules checked against its own output (0.7.0, same inputs): fan-out is
/// decided by the input rows, also when one agent completed nothing; and a
/// `response.usage` value replaces the top-level value of the same name whatever it is,
/// so text there leaves no statistics and no float typing behind.
#[test]
fn fan_out_from_inputs_and_usage_text_as_nemo_gym_reads_them() {
    let d = TempDir::new("fanout-usage");
    let i = d.write(
        "inputs.jsonl",
        "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n{\"_ng_task_index\":0,\"_ng_rollout_index\":1,\"agent_ref\":{\"name\":\"b\"}}\n",
    );
    let r = d.write("rollouts.jsonl", "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1}\n");
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let o = run(&[
        "profile",
        "--inputs",
        i.to_str().unwrap(),
        "--rollouts",
        r.to_str().unwrap(),
        "--allow-partial",
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tasks = read_jsonl(&out.join("rollouts_reward_profiling.jsonl"));
    assert_eq!(tasks.len(), 1);
    let t = &tasks[0];
    assert_eq!(t.get("agent_ref").and_then(|a| a.get("name")), Some(&Json::Str("a".into())), "{t:?}");
    assert_eq!(t.get("expected_num_rollouts"), Some(&Json::Int(1)));
    assert_eq!(t.get("missing_num_rollouts"), Some(&Json::Int(0)));
    assert_eq!(t.get("reward_profile_completion_pct"), Some(&Json::Float(100.0)));

    let lines = [
        r#"{"response": {"usage": {"tok": "n/a", "extra": null}}, "reward": 0, "tok": 5, "extra": 1, "_ng_task_index": 0, "_ng_rollout_index": 0, "agent_ref": {"name": "a1"}}"#,
        r#"{"response": {"usage": {"tok": [1], "extra": null}}, "reward": 1, "tok": 5, "extra": 1, "_ng_task_index": 0, "_ng_rollout_index": 1, "agent_ref": {"name": "a1"}}"#,
        r#"{"response": {"usage": {"tok": {"n": 1}}}, "reward": 0, "tok": 6, "_ng_task_index": 1, "_ng_rollout_index": 0, "agent_ref": {"name": "a1"}}"#,
    ];
    let r = d.write("usage.jsonl", &(lines.join("\n") + "\n"));
    let agg = d.join("agg.json");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", agg.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&agg).unwrap();
    assert!(!text.contains("/tok\"") && !text.contains("/extra\""), "{text}");
    let Json::Arr(entries) = read_json(&agg) else { panic!() };
    let am = entries[0].get("agent_metrics").unwrap();
    assert_eq!(am.get("max/reward"), Some(&Json::Int(1)), "{am:?}");
    assert_eq!(am.get("min/reward"), Some(&Json::Int(0)), "{am:?}");
}

/// Numeric subsets of pass@k are Python dict keys, as in NeMo Gym 0.7.0: `1` and `1.0`
/// are one subset, named `1` (the first seen), and a float is named as Python's `str()`
/// writes it (`1e-05`).
#[test]
fn numeric_subsets_group_and_name_as_python_does() {
    let d = TempDir::new("subsets");
    // `agent_metrics` of pass@k per `subset` on one-rollout tasks of agent `a` with these
    // (reward, subset) pairs.
    let metrics = |name: &str, rows: &[(i32, &str)]| -> Json {
        let lines: Vec<String> = rows
            .iter()
            .enumerate()
            .map(|(t, (reward, subset))| {
                format!(r#"{{"reward": {reward}, "subset": {subset}, "_ng_task_index": {t}, "_ng_rollout_index": 0, "agent_ref": {{"name": "a"}}}}"#)
            })
            .collect();
        let r = d.write(name, &(lines.join("\n") + "\n"));
        let agg = d.join("agg.json");
        let o = run(&[
            "aggregate",
            "--rollouts",
            r.to_str().unwrap(),
            "--metric",
            "pass_at_k",
            "--subset-key",
            "subset",
            "--out",
            agg.to_str().unwrap(),
            "-q",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let Json::Arr(entries) = read_json(&agg) else { panic!() };
        entries[0].get("agent_metrics").unwrap().clone()
    };
    let am = metrics("rollouts.jsonl", &[(1, "1"), (0, "1.0"), (1, "1e-05"), (1, "\"1\"")]);
    let Json::Obj(members) = &am else { panic!() };
    let subset_keys: Vec<&str> = members
        .iter()
        .map(|(k, _)| &**k)
        .filter(|k| k.ends_with("/pass@1/accuracy") && !k.starts_with("pass@"))
        .collect();
    // The text "1" is another key with the same name; the later one's values win, in the
    // first one's place (a dict update).
    assert_eq!(subset_keys, ["1/pass@1/accuracy", "1e-05/pass@1/accuracy"], "{am:?}");
    assert_eq!(am.get("1e-05/pass@1/accuracy").and_then(Json::as_f64), Some(100.0));
    assert_eq!(am.get("1/pass@1/accuracy").and_then(Json::as_f64), Some(100.0));
    // Integers a double cannot tell apart are still two subsets.
    let am = metrics("big.jsonl", &[(1, "9007199254740993"), (0, "9007199254740992")]);
    assert_eq!(am.get("9007199254740993/pass@1/accuracy").and_then(Json::as_f64), Some(100.0), "{am:?}");
    assert_eq!(am.get("9007199254740992/pass@1/accuracy").and_then(Json::as_f64), Some(0.0), "{am:?}");
}

/// A rollout field named like a column of the rollouts table is left out of it, with a
/// warning naming it; the table's own column keeps its meaning.
#[test]
fn fields_named_like_the_tables_own_columns_are_named_in_a_warning() {
    let d = TempDir::new("clash");
    let r = d.write(
        "rollouts.jsonl",
        "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"reward\":1,\"run_key\":5,\"agent_ref\":{\"name\":\"a\"}}\n",
    );
    let o =
        run(&["query", "SELECT run_key, reward FROM rollouts", "--rollouts", r.to_str().unwrap(), "--format", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "run_key,reward\na,1\n");
    assert!(
        stderr(&o).contains("field `run_key` has the name of one of the rollouts table's own columns"),
        "{}",
        stderr(&o)
    );
}

/// A task's `sample` row nested as deep as NeMo Gym's reader reads (1,024 levels) is
/// written back whole, by every thread.
#[test]
fn deeply_nested_sample_rows_are_written_back() {
    let d = TempDir::new("deep-sample");
    let n = 1020;
    let deep = format!("{}{}", "[".repeat(n), "]".repeat(n));
    let i = d.write(
        "inputs.jsonl",
        &format!("{{\"p\":{{\"input\":{deep}}},\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{{\"name\":\"a\"}}}}\n"),
    );
    let r = d.write("rollouts.jsonl", "{\"reward\":1,\"_ng_task_index\":0,\"_ng_rollout_index\":0}\n");
    let out = d.join("out");
    std::fs::create_dir(&out).unwrap();
    let o = run(&[
        "profile",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(out.join("rollouts_reward_profiling.jsonl")).unwrap();
    assert!(
        text.contains(&format!("\"sample\":{{\"p\":{{\"input\":{deep}}},\"agent_ref\":{{\"name\":\"a\"}}}}")),
        "{}",
        &text[..200]
    );
}

/// With one repeat (no across-repeat statistics) or no rows at all, the tables keep their
/// documented key columns, so Parquet readers and the bundled reports still work.
#[test]
fn tables_keep_their_columns_with_one_repeat_or_no_rows() {
    let d = TempDir::new("one-repeat");
    generate(d.path(), &["--tasks", "20", "--repeats", "1", "--agents", "2", "--seed", "3"]);
    let (r, i) = (d.join("rollouts.jsonl"), d.join("materialized_inputs.jsonl"));
    let t = d.join("t");
    let o = run(&[
        "export",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        t.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let repeats = read_pq(&t.join("repeats.parquet"));
    for c in ["agent", "_ng_rollout_index", "sample_count", "missing_count"] {
        assert!(repeats.column(c).is_ok(), "repeats.parquet lacks {c}: {:?}", repeats.get_column_names());
    }
    let o = run(&["query", "leaderboard", "--parquet-dir", t.to_str().unwrap(), "--format", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(out.lines().skip(1).all(|l| l.split(',').nth(1).is_some_and(|m| !m.is_empty())), "{out}");
    // Every rollout masked: no task rows, same columns.
    let m = d.write(
        "masked.jsonl",
        "{\"reward\":1,\"mask_sample\":true,\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n",
    );
    let t2 = d.join("t2");
    let o = run(&["export", "--rollouts", m.to_str().unwrap(), "--out-dir", t2.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let tasks = read_pq(&t2.join("tasks.parquet"));
    assert_eq!(tasks.height(), 0);
    assert!(tasks.column("_ng_task_index").is_ok() && tasks.column("agent").is_ok());
    let o = run(&["query", "hardest_tasks", "--parquet-dir", t2.to_str().unwrap(), "--format", "csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// CSV writes infinities and NaN as the table shows them, and `export` passes on the
/// aggregate's warning about rollouts without an input row.
#[test]
fn csv_infinities_and_export_warnings() {
    let d = TempDir::new("csv-inf");
    let r = d.write(
        "rollouts.jsonl",
        "{\"reward\":0,\"output_tokens\":10,\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n{\"reward\":1,\"output_tokens\":5,\"_ng_task_index\":1,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n",
    );
    let o = run(&[
        "query",
        "SELECT agent, CAST(reward AS DOUBLE) / 0.0 AS x FROM rollouts ORDER BY _ng_task_index",
        "--rollouts",
        r.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "agent,x\na,NaN\na,inf\n");
    let i = d.write("inputs.jsonl", "{\"_ng_task_index\":0,\"_ng_rollout_index\":0,\"agent_ref\":{\"name\":\"a\"}}\n");
    let t = d.join("t");
    let o = run(&[
        "export",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        t.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 rollout(s) of") && stderr(&o).contains("have no materialized input row"),
        "{}",
        stderr(&o)
    );
}

/// `batch-metrics` groups as Python's dict keys do: `1` and `1.0` are one group, `"1"`
/// another.
#[test]
fn batch_groups_follow_python_keys() {
    let d = TempDir::new("batch-keys");
    let b = d.write(
        "batch.jsonl",
        "{\"uid\":1,\"reward\":0}\n{\"uid\":1.0,\"reward\":1}\n{\"uid\":\"1\",\"reward\":1}\n{\"uid\":\"1\",\"reward\":1}\n",
    );
    let o = run(&["batch-metrics", b.to_str().unwrap(), "--metric", "reward_variance"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Variances 0.25 ({0, 1}) and 0 ({1, 1}); their mean.
    assert!(stdout(&o).contains("\"custom_metrics/train/reward_variance\": 0.125"), "{}", stdout(&o));
}

/// `profile`'s closing count covers every warning it printed, custom metrics' included.
#[test]
fn profile_counts_every_warning_it_prints() {
    let d = TempDir::new("prof-count");
    let (r, i) = sweep(&d);
    let out = d.join("out");
    let o = run(&[
        "profile",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--metric",
        "pass_at_k",
        "--out-dir",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("pass_at_k: "), "the sweep should make pass_at_k warn: {err}");
    let printed: usize = err
        .lines()
        .filter(|l| l.starts_with("warning: "))
        .map(|l| {
            l.rsplit_once(" (").and_then(|(_, t)| t.strip_suffix(" times)")).and_then(|n| n.parse().ok()).unwrap_or(1)
        })
        .sum();
    assert!(stdout(&o).contains(&format!("Warnings: {printed} (on stderr)")), "{printed} printed; {}", stdout(&o));
}
