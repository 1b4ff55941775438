//! The properties of the fuzz targets that need the table engine (Polars): whole
//! commands on fuzzed files. Each takes any bytes, runs rollstat's own library code as
//! the command line runs it, and panics when the run ends in anything but success or a
//! refusal of the input (exit status 2) — a panic, or one of rollstat's own failures
//! (exit status 1) on input it should have refused or read — or when a refused run
//! leaves an output behind.
//!
//! Compiled by the fuzz crate with its `engine` feature, and by rollstat's integration
//! tests as a module (the corpora replay on stable). It uses only `rollstat` and `std`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rollstat::error::Error;
use rollstat::metrics::custom::MetricSpec;
use rollstat::workflow::aggregate::{aggregate, AggregateConfig};
use rollstat::workflow::compare::{compare, CompareConfig};
use rollstat::workflow::custom::Metrics;
use rollstat::workflow::profile::{profile, ProfileConfig};

/// A folder of this process for the files a property writes; each property removes
/// what it wrote before it returns.
fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("rollstat-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("a work folder");
        d
    })
}

/// Writes `data` to `name` in the work folder.
fn put(name: &str, data: &[u8]) -> PathBuf {
    let p = work_dir().join(name);
    std::fs::write(&p, data).expect("the work folder takes files");
    p
}

/// A run's error must be the input's fault (exit status 2), and say where.
fn refused_cleanly(what: &str, e: &Error, outputs: &[&Path]) {
    assert!(e.is_bad_input(), "{what}: rollstat's own failure (exit status 1) on fuzzed input: {e}");
    assert!(!e.to_string().is_empty(), "{what}: an empty error message");
    for o in outputs {
        let left = if o.is_dir() { std::fs::read_dir(o).map(|d| d.count()).unwrap_or(0) > 0 } else { o.exists() };
        assert!(!left, "{what} refused its input ({e}) but left {}", o.display());
    }
}

fn clean(paths: &[&Path]) {
    for p in paths {
        if p.is_dir() {
            let _ = std::fs::remove_dir_all(p);
        } else {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `commands`: a fuzzed sweep through `aggregate` (with pass@k and reward variance) and,
/// when the bytes hold a blank line, `profile` with the part before it as the
/// materialized inputs. The first byte picks options: bit 0 `--allow-partial`, bit 1
/// a default agent label, bit 2 inputs for `aggregate` too.
pub fn commands(data: &[u8]) {
    let Some((&opts, data)) = data.split_first() else { return };
    let (inputs, rollouts) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (Some(&data[..i + 1]), &data[i + 2..]),
        None => (None, data),
    };
    let r = put("rollouts.jsonl", rollouts);
    let i = inputs.map(|b| put("inputs.jsonl", b));
    let metrics = Metrics {
        specs: vec![
            MetricSpec::PassAtK { answer_key: None, subset_key: Some("subset".into()) },
            MetricSpec::RewardVariance { ddof: 1 },
        ],
        files: Vec::new(),
    };
    let agg = work_dir().join("agg.json");
    let c = AggregateConfig {
        rollouts: vec![r.clone()],
        inputs: i.clone().filter(|_| opts & 4 != 0),
        out: Some(agg.clone()),
        agent: (opts & 2 != 0).then(|| "fuzz".to_string()),
        metrics: metrics.clone(),
        key_metrics: Vec::new(),
        run: Default::default(),
    };
    match aggregate(&c) {
        Ok(run) => {
            let file = run.file.expect("a file with rows has something to score");
            let text = std::fs::read(&file).expect("aggregate wrote its file");
            assert!(rollstat::json::parse(&text).is_ok(), "aggregate wrote a file that is not JSON");
        }
        Err(e) => refused_cleanly("aggregate", &e, &[&agg]),
    }
    clean(&[&agg]);
    if let Some(i) = i {
        let dir = work_dir().join("profile");
        let c = ProfileConfig {
            inputs: i.clone(),
            rollouts: vec![r.clone()],
            allow_partial: opts & 1 != 0,
            out_dir: Some(dir.clone()),
            metrics,
            lake: None,
        };
        match profile(&c) {
            Ok(run) => {
                for f in &run.files {
                    assert!(f.is_file(), "profile reported {} but did not write it", f.display());
                }
            }
            Err(e) => refused_cleanly("profile", &e, &[&dir]),
        }
        clean(&[&dir, &i]);
    }
    clean(&[&r]);
}

/// `parquet_rollouts`: fuzzed bytes as a rollouts table (`.parquet`) through `compare`
/// (against itself) and through the table reader `query --parquet-dir` uses, with a
/// query over it.
pub fn parquet_rollouts(data: &[u8]) {
    let p = put("rollouts.parquet", data);
    let c = CompareConfig {
        rollouts: vec![p.clone(), p.clone()],
        metric: "reward".into(),
        mde: true,
        flips: Some(3),
        ..Default::default()
    };
    if let Err(e) = compare(&c) {
        refused_cleanly("compare", &e, &[]);
    }
    match rollstat::ingest::parquet::scan_parquet(&p) {
        Ok(lf) => {
            let q = "SELECT COUNT(*) AS n FROM rollouts";
            if let Err(e) = rollstat::query::run_sql(vec![("rollouts", lf)], q) {
                refused_cleanly("query", &e, &[]);
            }
        }
        Err(e) => refused_cleanly("query --parquet-dir", &e, &[]),
    }
    clean(&[&p]);
}

/// The rollouts frame SQL metrics run over: a small sweep with every kind of column.
fn metric_frame() -> &'static rollstat::polars::prelude::DataFrame {
    static FRAME: OnceLock<rollstat::polars::prelude::DataFrame> = OnceLock::new();
    FRAME.get_or_init(|| {
        let mut text = String::new();
        for task in 0..4 {
            for rollout in 0..3 {
                let agent = ["a", "b"][rollout % 2];
                let subset = ["easy", "hard"][task % 2];
                text.push_str(&format!(
                    "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, \"agent_ref\": {{\"name\": \"{agent}\"}}, \
                     \"subset\": \"{subset}\", \"passed\": {}, \"tokens\": {}, \"reward\": {}}}\n",
                    (task + rollout) % 2 == 0,
                    100 + task * 7 + rollout,
                    ((task * 3 + rollout) % 5) as f64 / 4.0
                ));
            }
        }
        let path = Path::new("metric-sweep.jsonl");
        let t = rollstat::ingest::read_rollouts_bytes(path, text.as_bytes(), Default::default()).expect("the metric sweep reads");
        let runs = rollstat::ingest::labels::runs(&t, None);
        rollstat::ingest::frame::rollouts_frame(&t, &runs, None).expect("the metric sweep's frame")
    })
}

/// `sql_metric`: fuzzed text as a SQL metric over a small sweep's rollouts table, as
/// `aggregate --metric` and `batch-metrics --metric` run one.
pub fn sql_metric(data: &[u8]) {
    let Ok(sql) = std::str::from_utf8(data) else { return };
    if let Err(e) = rollstat::query::run_metric(metric_frame(), "fuzzed", sql) {
        refused_cleanly("SQL metric", &e, &[]);
    }
}

/// `batch_metrics`: fuzzed bytes as a training batch (JSONL) through `batch-metrics`
/// with its built-in metrics and a SQL metric over the batch.
pub fn batch_metrics(data: &[u8]) {
    let p = put("batch.jsonl", data);
    let dir = work_dir().join("metrics");
    std::fs::create_dir_all(&dir).expect("a metrics folder");
    std::fs::write(
        dir.join("spread.sql"),
        "SELECT agent, MAX(reward) - MIN(reward) AS spread, COUNT(DISTINCT group_id) AS groups \
         FROM rollouts GROUP BY agent",
    )
    .expect("a metric file");
    let metrics: Vec<String> =
        ["mean_reward", "reward_variance", "pass_at_k", "spread"].iter().map(|s| s.to_string()).collect();
    for key in ["group_idx", "uid"] {
        let run = rollstat::ingest::batch::read_batch(&p, key).and_then(|samples| {
            let g = rollstat::metrics::batch::group(&samples);
            rollstat::workflow::batch_metrics::compute(&g, &metrics, Some(&dir), "train", 1)
        });
        if let Err(e) = run {
            refused_cleanly("batch-metrics", &e, &[]);
        }
    }
    clean(&[&p, &dir]);
}
