//! The commands end to end, one file per command (and one for what every command shares),
//! each running the real `rollstat` executable in fresh temp folders. Helpers used by
//! several files live here.

mod aggregate;
mod batch_metrics;
mod completions;
mod compressed;
mod custom_metrics;
mod demo;
mod distributed;
mod export_query;
mod generate;
mod ingest;
mod lake;
mod outputs;
mod profile;
mod report;
mod shards;

use std::path::Path;

use polars::prelude::*;
use rollstat::json::Json;

use crate::common::*;

fn read_pq(p: &Path) -> DataFrame {
    ParquetReader::new(std::fs::File::open(p).unwrap()).finish().unwrap()
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
