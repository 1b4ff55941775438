//! Rollouts as they come: gzip and zstd files read directly (recognised by their first
//! bytes), artifacts named for what they hold, and clear errors for corrupt or cut-off
//! streams and for a folder given as the rollouts file.

use std::io::Write;

use super::*;
use crate::common::*;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// `aggregate` and `export` give the same bytes from `run.jsonl`, `run.jsonl.gz` (also
/// as two gzip members one after another, as `cat a.gz b.gz` makes) and `run.jsonl.zst`;
/// the artifact beside `run.jsonl.gz` is `run_aggregate_metrics.json`.
#[test]
fn gzip_and_zstd_rollouts_read_as_the_plain_file() {
    let d = TempDir::new("compressed");
    let (r, _) = sweep(&d);
    let plain = std::fs::read(&r).unwrap();
    let want_agg = d.join("plain.json");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", want_agg.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let want = std::fs::read(&want_agg).unwrap();

    let cut = plain.len() / 2 + plain[plain.len() / 2..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let mut two_members = gzip(&plain[..cut]);
    two_members.extend(gzip(&plain[cut..]));
    let cases = [
        ("gz", "run.jsonl.gz", gzip(&plain)),
        ("gz2", "run.jsonl.gz", two_members),
        ("zst", "run.jsonl.zst", zstd::encode_all(&plain[..], 3).unwrap()),
    ];
    for (case, name, bytes) in cases {
        let dir = d.join(case);
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join(name);
        std::fs::write(&f, bytes).unwrap();
        let o = run(&["aggregate", "--rollouts", f.to_str().unwrap(), "-q"]);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        let got = std::fs::read(dir.join("run_aggregate_metrics.json")).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert!(got == want, "{case}: the aggregate differs from the plain file's");
        let o = run(&["export", "--rollouts", f.to_str().unwrap(), "--out-dir", dir.join("tables").to_str().unwrap()]);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        assert_eq!(
            read_pq(&dir.join("tables/rollouts.parquet")).height(),
            plain.iter().filter(|&&b| b == b'\n').count()
        );
    }
}

/// A damaged or cut-off compressed file is bad input naming the file (exit 2, nothing
/// written); compressed materialized inputs are refused by `profile`, which re-reads them.
#[test]
fn corrupt_and_cut_off_compressed_files_are_named() {
    let d = TempDir::new("compressed-bad");
    let (r, i) = sweep(&d);
    let plain = std::fs::read(&r).unwrap();
    let good = gzip(&plain);
    let mut corrupt = good.clone();
    let mid = corrupt.len() / 2;
    for b in &mut corrupt[mid..mid + 64] {
        *b ^= 0x5a;
    }
    for (name, bytes, says) in [
        ("corrupt.jsonl.gz", corrupt, "corrupt gzip data"),
        ("cut.jsonl.gz", good[..good.len() / 2].to_vec(), "ends early"),
    ] {
        let f = d.join(name);
        std::fs::write(&f, bytes).unwrap();
        let out = d.join(&format!("{name}.json"));
        let o = run(&["aggregate", "--rollouts", f.to_str().unwrap(), "--out", out.to_str().unwrap(), "-q"]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(f.to_str().unwrap()) && stderr(&o).contains(says), "{name}: {}", stderr(&o));
        assert!(!out.exists(), "{name}: a failed run wrote {}", out.display());
    }
    let gz_inputs = d.join("inputs.jsonl.gz");
    std::fs::write(&gz_inputs, gzip(&std::fs::read(&i).unwrap())).unwrap();
    let o = run(&[
        "profile",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        gz_inputs.to_str().unwrap(),
        "--out-dir",
        d.join("p").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is compressed; profile re-reads"), "{}", stderr(&o));
    assert!(!d.join("p").exists());
}

/// A folder given as the rollouts file says to give the file inside it, in every command
/// that reads rollouts.
#[test]
fn a_folder_as_rollouts_says_to_give_the_file_inside() {
    let d = TempDir::new("folder-rollouts");
    let dir = d.path().to_str().unwrap();
    let out = d.join("x.json");
    for args in [
        vec!["aggregate", "--rollouts", dir],
        vec!["aggregate", "--rollouts", dir, "--out", out.to_str().unwrap()],
        vec!["export", "--rollouts", dir, "--out-dir", d.join("t").to_str().unwrap()],
        vec!["compare", "--rollouts", dir],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("is a folder; give the"), "{args:?}: {}", stderr(&o));
    }
}
