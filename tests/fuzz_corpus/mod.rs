//! The fuzz corpora, replayed on the stable toolchain: every saved input of each fuzz
//! target (`fuzz/corpus/<target>/`, seeds and the inputs of past crashes) goes through the
//! same property the target checks, so a regression shows up in `cargo test` without
//! nightly or libFuzzer, the whole-command targets (`commands`, `parquet_rollouts`,
//! `sql_metric`, `batch_metrics`) included. [`mutations`] adds mutated inputs from fixed
//! seeds through the binary itself.

mod mutations;

use std::path::Path;

/// The fuzz targets' properties (`fuzz/src/lib.rs`), compiled here as a module.
#[allow(dead_code)]
#[path = "../../fuzz/src/lib.rs"]
mod props;

/// Runs `check` on every file of `fuzz/corpus/<target>`; returns how many there were.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in &files {
        let data = std::fs::read(f).unwrap();
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            panic!("{}: the property of fuzz target `{target}` fails", f.display());
        }
    }
    files.len()
}

#[test]
fn json_check_corpus() {
    assert!(replay("json_check", props::json_check) > 50);
}

#[test]
fn json_parse_corpus() {
    assert!(replay("json_parse", props::json_parse) > 50);
}

#[test]
fn rollout_lines_corpus() {
    assert!(replay("rollout_lines", props::rollout_lines) > 20);
}

#[test]
fn kernels_corpus() {
    assert!(replay("kernels", props::kernels) > 5);
}

#[test]
fn commands_corpus() {
    assert!(replay("commands", props::engine::commands) > 10);
}

#[test]
fn parquet_rollouts_corpus() {
    assert!(replay("parquet_rollouts", props::engine::parquet_rollouts) > 3);
}

#[test]
fn sql_metric_corpus() {
    assert!(replay("sql_metric", props::engine::sql_metric) > 5);
}

#[test]
fn batch_metrics_corpus() {
    assert!(replay("batch_metrics", props::engine::batch_metrics) > 3);
}

/// The oracle of `json_check` tells valid from invalid text (so the corpus replay is not
/// vacuous), Python's number tokens included.
#[test]
fn oracle_reads_python_numbers_and_refuses_broken_text() {
    for ok in [&b"[NaN, -Infinity]"[..], b"{\"a\": Infinity}", b"\"NaN\"", b"1e308"] {
        assert_eq!(props::oracle_accepts(ok), Some(true), "{}", String::from_utf8_lossy(ok));
        assert!(props::check_line(ok).is_ok());
    }
    for bad in [&b"[NaN1]"[..], b"[-NaN]", b"1e400", b"{\"a\" 1}", b"\"\\ud800\"", b"[1,]"] {
        assert_eq!(props::oracle_accepts(bad), Some(false), "{}", String::from_utf8_lossy(bad));
        assert!(props::check_line(bad).is_err());
    }
}
