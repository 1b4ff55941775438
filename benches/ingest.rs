//! Side-by-side benchmark on a generated million-rollout sweep (`cargo bench`).
//!
//! Generates the sweep with `rollstat generate` (seed fixed), warms the page cache, then
//! runs, alternating, for several rounds: `cat` of the rollouts file (the floor), `cat`
//! of both files, `rollstat ingest` (rollouts → Parquet), `rollstat aggregate` (to a
//! file without and with the rollout health check, and to /dev/null: computed but not
//! stored), `rollstat profile --allow-partial` and — when Python is available — the same task,
//! agent, repeat and across-repeat statistics as a hand-written DuckDB query reading
//! the JSONL with an explicit column list (DuckDB installed into a throwaway venv by
//! pip). Prints median wall time, peak RSS, GB/s and ratios. Every run starts after the
//! previous round's artifacts are removed and a `sync` (untimed), so none pays for
//! writing back or freeing an earlier run's output.
//!
//! Environment: `ROLLSTAT_BENCH_TASKS` (default 200000; ×5 repeats = 1M rollouts),
//! `ROLLSTAT_BENCH_ROUNDS` (default 3), `ROLLSTAT_BENCH_DIR` (default
//! target/bench-sweep-<tasks>), `ROLLSTAT_BENCH_DUCKDB=0` to skip DuckDB.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs a command, returning wall time and peak RSS (VmHWM, polled from /proc).
fn measure(cmd: &mut Command) -> (Duration, u64) {
    let start = Instant::now();
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn");
    let status_path = format!("/proc/{}/status", child.id());
    let mut peak_kb = 0u64;
    loop {
        if let Ok(s) = std::fs::read_to_string(&status_path) {
            for l in s.lines() {
                if let Some(v) = l.strip_prefix("VmHWM:") {
                    let kb: u64 = v.trim().trim_end_matches(" kB").trim().parse().unwrap_or(0);
                    peak_kb = peak_kb.max(kb);
                }
            }
        }
        match child.try_wait().expect("wait") {
            Some(st) => {
                let wall = start.elapsed();
                if !st.success() {
                    let mut e = String::new();
                    use std::io::Read;
                    child.stderr.take().unwrap().read_to_string(&mut e).ok();
                    panic!("command failed: {cmd:?}: {e}");
                }
                return (wall, peak_kb * 1024);
            }
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn duckdb_python(dir: &Path) -> Option<PathBuf> {
    if std::env::var("ROLLSTAT_BENCH_DUCKDB").as_deref() == Ok("0") {
        return None;
    }
    let venv = dir.join("duckdb-venv");
    let py = venv.join("bin/python");
    if !py.exists() {
        let ok = Command::new("python3").args(["-m", "venv"]).arg(&venv).status().map(|s| s.success()).unwrap_or(false);
        if !ok {
            return None;
        }
        let ok = Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "duckdb"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("could not install duckdb; skipping it");
            return None;
        }
    }
    Some(py)
}

/// The checkout being benchmarked: cargo names it when it runs the bench; the path baked in
/// at compile time is only a fallback (a build shared with another checkout would point there).
fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

fn main() {
    // `cargo bench` passes --bench; ignore arguments.
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_rollstat"));
    let tasks: usize = std::env::var("ROLLSTAT_BENCH_TASKS").ok().and_then(|s| s.parse().ok()).unwrap_or(200_000);
    let rounds: usize = std::env::var("ROLLSTAT_BENCH_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let target = manifest_dir().join("target");
    let dir = std::env::var("ROLLSTAT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| target.join(format!("bench-sweep-{tasks}")));
    let rollouts = dir.join("rollouts.jsonl");
    let inputs = dir.join("materialized_inputs.jsonl");
    if !rollouts.exists() {
        let t = tasks.to_string();
        let (wall, _) = measure(
            Command::new(&bin)
                .args([
                    "generate",
                    "--tasks",
                    &t,
                    "--repeats",
                    "5",
                    "--agents",
                    "1",
                    "--seed",
                    "4242",
                    "--missing-frac",
                    "0.01",
                    "--masked-frac",
                    "0.01",
                    "--out-dir",
                ])
                .arg(&dir),
        );
        println!("generated {} rollouts in {:.2}s", tasks * 5, wall.as_secs_f64());
    }
    let size_r = std::fs::metadata(&rollouts).unwrap().len() as f64;
    let size_i = std::fs::metadata(&inputs).unwrap().len() as f64;
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let py = duckdb_python(&target);
    let script = manifest_dir().join("benches/duckdb_profile.py");
    // Warm the page cache.
    for _ in 0..2 {
        measure(Command::new("cat").arg(&rollouts).arg(&inputs));
    }
    type Job<'a> = (&'a str, Box<dyn Fn() -> Command + 'a>);
    let mut jobs: Vec<Job> = vec![
        (
            "cat rollouts",
            Box::new(|| {
                let mut c = Command::new("cat");
                c.arg(&rollouts);
                c
            }),
        ),
        (
            "cat both files",
            Box::new(|| {
                let mut c = Command::new("cat");
                c.arg(&rollouts).arg(&inputs);
                c
            }),
        ),
        (
            "rollstat ingest (rollouts -> Parquet)",
            Box::new(|| {
                let mut c = Command::new(&bin);
                c.arg("ingest").arg(&rollouts).arg("--out").arg(out.join("rollouts.parquet"));
                c
            }),
        ),
        (
            "rollstat aggregate --no-health-check (rollouts)",
            Box::new(|| {
                let mut c = Command::new(&bin);
                c.args(["aggregate", "-q", "--no-health-check", "--rollouts"])
                    .arg(&rollouts)
                    .arg("--out")
                    .arg(out.join("agg.json"));
                c
            }),
        ),
        (
            // The default: also the rollout health check and its two reports (414 MB).
            "rollstat aggregate (rollouts, with the health check)",
            Box::new(|| {
                let mut c = Command::new(&bin);
                c.args(["aggregate", "-q", "--rollouts"]).arg(&rollouts).arg("--out").arg(out.join("agg.json"));
                c
            }),
        ),
        (
            // The same run with the artifact rendered but not stored: separates computing
            // from what the file system charges for 882 MB of fresh page cache.
            "rollstat aggregate (rollouts -> /dev/null)",
            Box::new(|| {
                let mut c = Command::new(&bin);
                c.args(["aggregate", "-q", "--no-health-check", "--rollouts"])
                    .arg(&rollouts)
                    .arg("--out")
                    .arg("/dev/null");
                c
            }),
        ),
        (
            "rollstat profile --allow-partial (both)",
            Box::new(|| {
                let mut c = Command::new(&bin);
                c.args(["profile", "--allow-partial", "--rollouts"])
                    .arg(&rollouts)
                    .arg("--inputs")
                    .arg(&inputs)
                    .arg("--out-dir")
                    .arg(&out);
                c
            }),
        ),
    ];
    if let Some(py) = &py {
        let (script, rollouts) = (&script, &rollouts);
        jobs.push((
            "DuckDB hand-written SQL (rollouts)",
            Box::new(move || {
                let mut c = Command::new(py);
                c.arg(script).arg(rollouts);
                c
            }),
        ));
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); jobs.len()];
    let mut peaks: Vec<u64> = vec![0; jobs.len()];
    for round in 0..rounds {
        for (j, (name, make)) in jobs.iter().enumerate() {
            // Untimed: the previous round's artifacts are removed and written back first,
            // so each run writes fresh files and pays neither for another run's writeback
            // nor for freeing the artifacts it would replace.
            for f in ["agg.json", "rollouts.parquet"] {
                let _ = std::fs::remove_file(out.join(f));
            }
            for f in ["reward_profiling.jsonl", "agent_metrics.json", "repeat_level_metrics.json"] {
                let _ = std::fs::remove_file(out.join(format!("rollouts_{f}")));
            }
            let _ = Command::new("sync").status();
            let (wall, peak) = measure(&mut make());
            times[j].push(wall.as_secs_f64());
            peaks[j] = peaks[j].max(peak);
            eprintln!("round {round}: {name}: {:.3}s, peak {:.0} MB", wall.as_secs_f64(), peak as f64 / 1e6);
        }
    }
    let med: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    println!();
    println!(
        "Sweep: {} tasks x 5 repeats; rollouts {:.2} GB, materialized inputs {:.2} GB; {} rounds, medians",
        tasks,
        size_r / 1e9,
        size_i / 1e9,
        rounds
    );
    println!("| system, same sweep | wall (s) | peak RSS (MB) | GB/s read | vs cat of its input(s) |");
    println!("|---|---|---|---|---|");
    for (j, (name, _)) in jobs.iter().enumerate() {
        let both = name.contains("both");
        let bytes = if both { size_r + size_i } else { size_r };
        let floor = if both { med[1] } else { med[0] };
        println!(
            "| {name} | {:.3} | {:.0} | {:.2} | {:.2}x |",
            med[j],
            peaks[j] as f64 / 1e6,
            bytes / 1e9 / med[j],
            med[j] / floor
        );
    }
    if py.is_some() {
        let d = jobs.len() - 1;
        println!(
            "\nDuckDB time / rollstat time: aggregate {:.2}, profile {:.2} (above 1 means rollstat is faster)",
            med[d] / med[3],
            med[d] / med[6]
        );
    }
}
