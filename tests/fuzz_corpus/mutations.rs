//! Mutated inputs through the commands the fuzz targets cannot build (they need Polars):
//! `aggregate` and `profile` over broken rollouts and inputs, `batch-metrics` over
//! broken batches and broken SQL metrics, `compare` over broken Parquet rollouts. The
//! mutations are drawn from fixed seeds: truncations, byte flips, deleted keys, swapped
//! types, repeated keys, huge numbers and deep nesting. Each run must end with status 0
//! or 2 (never a panic or a signal) and a refused run must leave no output file.

use std::path::Path;
use std::process::Output;

use rollstat::json::{parse, write_compact, Json};

use crate::common::{generate, run, stderr, Rng, TempDir};

/// Values a swapped key gets: every JSON type, and numbers at the edges.
const SWAPS: [&str; 12] = [
    "\"text\"",
    "[]",
    "[1, 2]",
    "{}",
    "{\"a\": 1}",
    "null",
    "true",
    "1e308",
    "-9223372036854775808",
    "18446744073709551615",
    "NaN",
    "-Infinity",
];

/// Numbers a double cannot hold, or only approximately.
const HUGE: [&str; 4] = ["1e400", "123456789012345678901234567890", "-1e-400", "1.7976931348623157e309"];

/// The kinds of mutation, by name (the name goes into a failure message).
const KINDS: [&str; 8] =
    ["truncate", "flip byte", "delete key", "swap type", "repeat key", "huge number", "deep nesting", "repeat line"];

/// `base` changed once by mutation `kind` at places drawn from `rng`.
fn mutate(base: &[u8], kind: usize, rng: &mut Rng) -> Vec<u8> {
    let lines: Vec<&[u8]> = base.split(|&c| c == b'\n').filter(|l| !l.is_empty()).collect();
    let at = rng.pick(lines.len());
    let line = lines[at];
    let tree = parse(line).ok().filter(|v| matches!(v, Json::Obj(_)));
    let keys: Vec<String> = match &tree {
        Some(Json::Obj(items)) => items.iter().map(|(k, _)| k.to_string()).collect(),
        _ => Vec::new(),
    };
    let key = keys.get(rng.pick(keys.len())).cloned().unwrap_or_else(|| "reward".into());
    let quoted = format!("\"{key}\"");
    let new_line: Vec<u8> = match kind {
        0 => return base[..rng.pick(base.len())].to_vec(),
        1 => {
            let mut b = base.to_vec();
            let bytes = b"\"{}[],:\\\x00\xff\n0-e.";
            let i = rng.pick(b.len());
            b[i] = bytes[rng.pick(bytes.len())];
            return b;
        }
        2 | 3 => match tree {
            Some(mut v) => {
                let swapped = if kind == 3 { parse(SWAPS[rng.pick(SWAPS.len())].as_bytes()).ok() } else { None };
                match swapped {
                    Some(s) => v.set(&key, s),
                    None => drop(v.remove(&key)),
                }
                let mut out = Vec::new();
                write_compact(&mut out, &v);
                if kind == 3 && out.windows(4).any(|w| w == b"null") {
                    // The writer prints NaN and the infinities as null; put the token back.
                    let token = SWAPS[rng.pick(2) + 10];
                    out = String::from_utf8(out).unwrap().replacen("null", token, 1).into_bytes();
                }
                out
            }
            None => line.to_vec(),
        },
        4 => {
            let value = SWAPS[rng.pick(SWAPS.len())];
            let rest = line.strip_prefix(b"{").unwrap_or(line);
            [format!("{{{quoted}: {value}, ").as_bytes(), rest].concat()
        }
        5 => {
            let value = HUGE[rng.pick(HUGE.len())];
            let rest = line.strip_prefix(b"{").unwrap_or(line);
            [format!("{{{quoted}: {value}, ").as_bytes(), rest].concat()
        }
        6 => {
            let depth = [1_025, 5_000, 100_000][rng.pick(3)];
            let rest = line.strip_prefix(b"{").unwrap_or(line);
            [format!("{{{quoted}: {}{}, ", "[".repeat(depth), "]".repeat(depth)).as_bytes(), rest].concat()
        }
        _ => {
            let mut b = base.to_vec();
            b.extend_from_slice(line);
            b.push(b'\n');
            return b;
        }
    };
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        out.extend_from_slice(if i == at { &new_line } else { l });
        out.push(b'\n');
    }
    out
}

/// The run ended with 0 or 2, and when refused left nothing in `out` (a file or folder).
fn settled(o: &Output, out: &Path, what: &str) -> bool {
    let code = o.status.code();
    assert!(matches!(code, Some(0 | 2)), "{what}: status {:?}\n{}", o.status, stderr(o));
    if code == Some(2) {
        let left = match std::fs::read_dir(out) {
            Ok(d) => d.count() > 0,
            Err(_) => out.exists(),
        };
        assert!(!left, "{what}: refused but left {}", out.display());
        let err = stderr(o);
        let last = err.trim_end().lines().last().unwrap_or("");
        assert!(last.starts_with("rollstat: error: "), "{what}: the error is not one last line:\n{err}");
        assert_eq!(err.matches("rollstat: error:").count(), 1, "{what}: more than one error:\n{err}");
    }
    code == Some(0)
}

/// Runs `check` on mutations of `base` drawn from seeds `0..seeds`, each kind in turn;
/// returns how many runs were accepted and refused.
fn each_mutation(base: &[u8], seeds: u64, mut check: impl FnMut(&[u8], &str) -> bool) -> (usize, usize) {
    let (mut ok, mut refused) = (0, 0);
    for seed in 0..seeds {
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5eed);
        let kind = seed as usize % KINDS.len();
        let bytes = mutate(base, kind, &mut rng);
        if check(&bytes, &format!("seed {seed} ({})", KINDS[kind])) {
            ok += 1;
        } else {
            refused += 1;
        }
    }
    (ok, refused)
}

/// `profile --allow-partial` of `inputs` and `rollouts` into `dir`.
fn profile(inputs: &Path, rollouts: &Path, dir: &Path) -> Output {
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let (i, r, d) = (path(inputs), path(rollouts), path(dir));
    run(&["profile", "--inputs", &i, "--rollouts", &r, "--allow-partial", "--out-dir", &d])
}

fn sweep(d: &TempDir) -> (Vec<u8>, Vec<u8>) {
    generate(&d.join("sweep"), &["--tasks", "5", "--repeats", "2", "--agents", "2", "--seed", "7"]);
    let r = std::fs::read(d.join("sweep/rollouts.jsonl")).unwrap();
    let i = std::fs::read(d.join("sweep/materialized_inputs.jsonl")).unwrap();
    (r, i)
}

#[test]
fn mutated_rollouts_through_aggregate_and_profile() {
    let d = TempDir::new("mut-rollouts");
    let (rollouts, inputs) = sweep(&d);
    let ip = d.join("inputs.jsonl");
    std::fs::write(&ip, &inputs).unwrap();
    let (ok, refused) = each_mutation(&rollouts, 48, |bytes, what| {
        let rp = d.join("r.jsonl");
        std::fs::write(&rp, bytes).unwrap();
        let (out, dir) = (d.join("agg.json"), d.join("profile"));
        let a = run(&["aggregate", "--rollouts", rp.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        let a_ok = settled(&a, &out, &format!("aggregate, {what}"));
        let _ = std::fs::remove_file(&out);
        let p = profile(&ip, &rp, &dir);
        let p_ok = settled(&p, &dir, &format!("profile, {what}"));
        let _ = std::fs::remove_dir_all(&dir);
        a_ok && p_ok
    });
    // Both outcomes occur, so the mutations reach past the first check.
    assert!(ok > 0 && refused > 0, "{ok} accepted, {refused} refused");
}

#[test]
fn mutated_inputs_through_profile() {
    let d = TempDir::new("mut-inputs");
    let (rollouts, inputs) = sweep(&d);
    let rp = d.join("rollouts.jsonl");
    std::fs::write(&rp, &rollouts).unwrap();
    let (ok, refused) = each_mutation(&inputs, 32, |bytes, what| {
        let ip = d.join("i.jsonl");
        std::fs::write(&ip, bytes).unwrap();
        let dir = d.join("profile");
        let p = profile(&ip, &rp, &dir);
        let accepted = settled(&p, &dir, &format!("profile, {what}"));
        let _ = std::fs::remove_dir_all(&dir);
        accepted
    });
    assert!(ok > 0 && refused > 0, "{ok} accepted, {refused} refused");
}

/// A VAGEN batch of three groups.
const BATCH: &str = "{\"group_idx\": 1, \"uid\": \"a\", \"token_level_scores\": [0.25, 0.25], \"reward\": 0.5}\n\
{\"group_idx\": 1, \"uid\": \"b\", \"token_level_scores\": [1.0, 0.0], \"reward\": 1.0}\n\
{\"group_idx\": 2, \"uid\": \"c\", \"token_level_scores\": [0.0], \"reward\": 0}\n\
{\"group_idx\": \"3\", \"uid\": \"d\", \"reward\": true}\n";

/// A SQL metric over the batch.
const METRIC: &str = "-- spread: reward range per agent\n\
SELECT agent, MAX(reward) - MIN(reward) AS spread, COUNT(*) AS n FROM rollouts GROUP BY agent\n";

#[test]
fn mutated_batches_and_sql_metrics_through_batch_metrics() {
    let d = TempDir::new("mut-batch");
    let m = d.join("metrics");
    std::fs::create_dir(&m).unwrap();
    std::fs::write(m.join("spread.sql"), METRIC).unwrap();
    let (ok, refused) = each_mutation(BATCH.as_bytes(), 32, |bytes, what| {
        let f = d.join("b.jsonl");
        std::fs::write(&f, bytes).unwrap();
        let o = run(&["batch-metrics", f.to_str().unwrap(), "--metric-dir", m.to_str().unwrap()]);
        settled(&o, &d.join("none"), &format!("batch-metrics, {what}"))
    });
    assert!(ok > 0 && refused > 0, "{ok} accepted, {refused} refused");
    // The SQL text itself, truncated and with bytes flipped.
    let f = d.write("b.jsonl", BATCH);
    let mut rng = Rng(11);
    for seed in 0..16 {
        let mut sql = METRIC.as_bytes().to_vec();
        if seed % 2 == 0 {
            sql.truncate(rng.pick(sql.len()));
        } else {
            let i = rng.pick(sql.len());
            sql[i] = b"(),;'\"*\x00\xff"[rng.pick(9)];
        }
        std::fs::write(m.join("spread.sql"), &sql).unwrap();
        let o = run(&["batch-metrics", f.to_str().unwrap(), "--metric-dir", m.to_str().unwrap(), "--metric", "spread"]);
        settled(&o, &d.join("none"), &format!("SQL metric, seed {seed}"));
    }
}

#[test]
fn mutated_parquet_rollouts_through_compare() {
    let d = TempDir::new("mut-parquet");
    let (rollouts, _) = sweep(&d);
    let rp = d.join("rollouts.jsonl");
    std::fs::write(&rp, &rollouts).unwrap();
    let table = d.join("t.parquet");
    let o = run(&["ingest", rp.to_str().unwrap(), "--out", table.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let base = std::fs::read(&table).unwrap();
    let mut rng = Rng(3);
    for seed in 0..24 {
        let mut bytes = base.clone();
        match seed % 3 {
            0 => bytes.truncate(rng.pick(bytes.len())),
            1 => {
                for _ in 0..1 + rng.pick(4) {
                    let i = rng.pick(bytes.len());
                    bytes[i] ^= 1 << rng.pick(8);
                }
            }
            // The footer (schema and row-group offsets) at the end.
            _ => {
                let i = bytes.len() - 1 - rng.pick(bytes.len().min(200));
                bytes[i] = rng.pick(256) as u8;
            }
        }
        let p = d.join("m.parquet");
        std::fs::write(&p, &bytes).unwrap();
        let out = d.join("cmp.json");
        let o = run(&["compare", "--rollouts", p.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        settled(&o, &out, &format!("compare over Parquet, seed {seed}"));
        let _ = std::fs::remove_file(&out);
    }
}
