//! `batch-metrics` against VAGEN: every case of the VAGEN conformance corpus (in
//! tests/fixtures) as JSONL and, where one Parquet column can hold its group
//! ids, as Parquet with a fixed-width score array as verl pads it; VAGEN's `str(idx)`
//! grouping; float32 batches against numpy; SQL metrics from --metric-dir; bad input.

use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::common::*;
use rollstat::json::{parse, Json};

/// Runs batch-metrics; returns its JSON output and stderr, asserting exit 0.
fn batch_metrics(args: &[&str]) -> (Json, String) {
    let mut all = vec!["batch-metrics"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert!(o.status.success(), "{:?}: {}", all, stderr(&o));
    let v = parse(stdout(&o).trim().as_bytes()).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    (v, stderr(&o))
}

fn num(v: &Json, key: &str) -> f64 {
    match v.get(key) {
        Some(Json::Float(f)) => *f,
        Some(Json::Int(i)) => *i as f64,
        other => panic!("{key}: {other:?} in {v:?}"),
    }
}

/// The `(samples, groups)` of the `Read N samples in G groups` line.
fn counts(stderr: &str) -> (i64, i64) {
    let l = stderr.lines().find(|l| l.starts_with("Read ")).unwrap_or_else(|| panic!("no count line: {stderr}"));
    let w: Vec<&str> = l.split(' ').collect();
    assert_eq!((w[2], w[3], w[5]), ("samples", "in", "groups"), "{l}");
    (w[1].parse().unwrap(), w[4].parse().unwrap())
}

fn rel(got: f64, want: f64) -> f64 {
    if got == want {
        0.0
    } else {
        (got - want).abs() / want.abs().max(f64::MIN_POSITIVE)
    }
}

/// Checks one run's output against a case's expected.json; returns the largest
/// relative difference seen.
fn check(case: &str, file: &Path, expected: &Json, fails: &mut Vec<String>) -> f64 {
    let mut worst = 0.0f64;
    for (ddof, key) in [(0, "reward_variance"), (1, "reward_variance_ddof1")] {
        let f = file.to_str().unwrap();
        let (v, err) =
            batch_metrics(&[f, "--metric", "reward_variance", "--metric", "mean_reward", "--ddof", &ddof.to_string()]);
        let got = num(&v, "custom_metrics/train/reward_variance");
        let want = num(expected, key);
        worst = worst.max(rel(got, want));
        if !close(got, want) {
            fails.push(format!("{case} {}: {key} {got} != {want}", file.display()));
        }
        match expected.get("mean_reward") {
            Some(_) => {
                let (got, want) = (num(&v, "custom_metrics/train/mean_reward"), num(expected, "mean_reward"));
                worst = worst.max(rel(got, want));
                if !close(got, want) {
                    fails.push(format!("{case} {}: mean_reward {got} != {want}", file.display()));
                }
            }
            // numpy's mean of no samples is NaN, which JSON writes as null.
            None => {
                if v.get("custom_metrics/train/mean_reward") != Some(&Json::Null) {
                    fails.push(format!("{case}: mean_reward of an empty batch should be null: {v:?}"));
                }
            }
        }
        let want = (num(expected, "rows") as i64, num(expected, "groups") as i64);
        if counts(&err) != want {
            fails.push(format!("{case} {}: counts {:?} != {want:?}", file.display(), counts(&err)));
        }
    }
    worst
}

/// The batch as a Parquet file when all its group ids are of one kind (ints or text),
/// with `token_level_scores` as a fixed-width array column when its rows are equally
/// long (a list column otherwise). `None` when one column cannot hold the ids.
fn to_parquet(batch: &Path, out: &Path) -> Option<()> {
    let rows: Vec<Json> = read_jsonl(batch);
    if rows.is_empty() {
        return None;
    }
    let ids: Vec<&Json> = rows.iter().map(|r| r.get("group_idx").unwrap()).collect();
    let group = if ids.iter().all(|j| matches!(j, Json::Int(_))) {
        Column::new(
            "group_idx".into(),
            ids.iter().map(|j| if let Json::Int(i) = j { *i } else { 0 }).collect::<Vec<i64>>(),
        )
    } else if ids.iter().all(|j| matches!(j, Json::Str(_))) {
        Column::new(
            "group_idx".into(),
            ids.iter().map(|j| if let Json::Str(s) = j { s.clone() } else { String::new() }).collect::<Vec<String>>(),
        )
    } else {
        return None;
    };
    let scores: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| match r.get("token_level_scores") {
            Some(Json::Arr(xs)) => xs.iter().map(|x| x.as_f64().unwrap()).collect(),
            other => panic!("{other:?}"),
        })
        .collect();
    let mut df = DataFrame::new(rows.len(), vec![group, score_column(&scores, DataType::Float64)]).unwrap();
    ParquetWriter::new(std::fs::File::create(out).unwrap()).finish(&mut df).unwrap();
    Some(())
}

/// A `token_level_scores` column of `dtype` numbers: a fixed-width array when every row
/// is equally long.
fn score_column(rows: &[Vec<f64>], dtype: DataType) -> Column {
    let cells: Vec<Series> = rows.iter().map(|r| Series::new("".into(), r).cast(&dtype).unwrap()).collect();
    let list = Series::new("token_level_scores".into(), cells);
    let width = rows[0].len();
    if rows.iter().all(|r| r.len() == width) {
        let a = list.cast(&DataType::Array(Box::new(dtype), width)).unwrap();
        assert!(matches!(a.dtype(), DataType::Array(..)));
        a.into()
    } else {
        list.into()
    }
}

#[test]
fn every_vagen_case_matches_what_vagen_returns() {
    let root = fixtures().join("conformance/vagen");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expected.json").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 7, "expected the 7 VAGEN cases, found {}", cases.len());
    let d = TempDir::new("vagen");
    let mut fails = Vec::new();
    let (mut worst, mut parquet_cases) = (0.0f64, 0);
    for c in &cases {
        let name = c.file_name().unwrap().to_string_lossy().into_owned();
        let expected = read_json(&c.join("expected.json"));
        let batch = c.join("batch.jsonl");
        worst = worst.max(check(&name, &batch, &expected, &mut fails));
        let pq = d.join(&format!("{name}.parquet"));
        if to_parquet(&batch, &pq).is_some() {
            worst = worst.max(check(&name, &pq, &expected, &mut fails));
            parquet_cases += 1;
        } else {
            println!("{name}: no Parquet variant (its group ids are of several kinds, or it has no rows)");
        }
    }
    println!("{} VAGEN cases, {parquet_cases} also as Parquet; largest relative difference {worst:e}", cases.len());
    assert!(parquet_cases >= 4, "{parquet_cases}");
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

#[test]
fn groups_by_python_str_of_the_id() {
    let d = TempDir::new("vagen-str");
    // 1 and "1" print as `1`: one group {0, 1}; 1.0 prints `1.0` and true `True`:
    // groups of one. Python dict keys would instead give {0, 5, 7} and {1}.
    let f = d.write(
        "b.jsonl",
        "{\"group_idx\": 1, \"token_level_scores\": [0.0]}\n\
         {\"group_idx\": \"1\", \"token_level_scores\": [0.5, 0.5]}\n\
         {\"group_idx\": 1.0, \"token_level_scores\": [5.0]}\n\
         {\"group_idx\": true, \"token_level_scores\": [7.0]}\n",
    );
    let (v, err) = batch_metrics(&[f.to_str().unwrap(), "--metric", "reward_variance"]);
    // np.var([0.0, 1.0]) = 0.25; the mean over three groups.
    assert_eq!(num(&v, "custom_metrics/train/reward_variance"), 0.25 / 3.0);
    assert_eq!(counts(&err), (4, 3));
    // Floats group by Python's repr: 1e-05 as a float and as text are one group;
    // null and "None" are one group.
    let f = d.write(
        "c.jsonl",
        "{\"group_idx\": 1e-5, \"reward\": 0}\n{\"group_idx\": \"1e-05\", \"reward\": 1}\n\
         {\"group_idx\": null, \"reward\": 2}\n{\"group_idx\": \"None\", \"reward\": 4}\n",
    );
    let (v, err) = batch_metrics(&[f.to_str().unwrap(), "--metric", "reward_variance"]);
    assert_eq!(num(&v, "custom_metrics/train/reward_variance"), (0.25 + 1.0) / 2.0);
    assert_eq!(counts(&err), (4, 2));
}

/// Python's `NaN` / `Infinity` tokens are read as numbers, as everywhere in rollstat.
#[test]
fn nan_and_infinity_tokens_are_numbers() {
    let d = TempDir::new("vagen-nan");
    let f = d.write(
        "b.jsonl",
        "{\"group_idx\": NaN, \"token_level_scores\": [0.0, 0.0]}\n\
         {\"group_idx\": NaN, \"token_level_scores\": [1.0, 0.0]}\n\
         {\"group_idx\": Infinity, \"token_level_scores\": [-Infinity]}\n",
    );
    let (v, err) = batch_metrics(&[f.to_str().unwrap(), "--metric", "reward_variance", "--metric", "mean_reward"]);
    // Both NaN ids print `nan`: one group {0, 1}; `inf` is a group of one (variance 0).
    assert_eq!(num(&v, "custom_metrics/train/reward_variance"), 0.125);
    assert_eq!(counts(&err), (3, 2));
    // A mean that is -inf is written as null, as VAGEN's JSON writer would.
    assert_eq!(v.get("custom_metrics/train/mean_reward"), Some(&Json::Null));
}

/// A float32 score array is summed in float32 as numpy sums it. Expected values from
/// numpy 2.4 with the seed's code:
/// `tls = np.asarray(rows, dtype=np.float32)`, `reward_variance(ddof)`,
/// `float(np.mean(tls.sum(axis=-1)))`.
#[test]
fn float32_parquet_batches_sum_as_numpy() {
    let d = TempDir::new("vagen-f32");
    let rows = vec![
        vec![0.1; 10],
        vec![0.7, 0.2, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        vec![1.0 / 3.0; 10],
        vec![0.3, 0.3, 0.3, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    ];
    let mut df =
        DataFrame::new(4, vec![Column::new("uid".into(), [0i64, 0, 1, 1]), score_column(&rows, DataType::Float32)])
            .unwrap();
    let pq = d.join("b.parquet");
    ParquetWriter::new(std::fs::File::create(&pq).unwrap()).finish(&mut df).unwrap();
    for (ddof, want) in [(0, 0.6805555091963882), (1, 1.3611110183927764)] {
        let (v, err) = batch_metrics(&[pq.to_str().unwrap(), "--ddof", &ddof.to_string()]);
        assert!(close(num(&v, "custom_metrics/train/reward_variance"), want), "{v:?}");
        // In float64 the mean would be 1.5833333693444729.
        assert_eq!(num(&v, "custom_metrics/train/mean_reward"), 1.5833332538604736);
        assert_eq!(counts(&err), (4, 2));
        assert!(v.get("custom_metrics/train/pass@1/accuracy").is_some(), "{v:?}");
    }
}

/// A VAGEN `@register_metric` function written as a SQL metric in --metric-dir, as the
/// batch-metrics documentation shows it.
#[test]
fn sql_metrics_from_metric_dir_see_the_groups() {
    let d = TempDir::new("vagen-sql");
    let m = d.join("metrics");
    std::fs::create_dir(&m).unwrap();
    std::fs::write(
        m.join("my_metric.sql"),
        "-- my_metric: mean total reward\nSELECT agent, AVG(reward) AS value FROM rollouts GROUP BY agent\n",
    )
    .unwrap();
    std::fs::write(
        m.join("group_sizes.sql"),
        "WITH g AS (SELECT agent, group_id, COUNT(*) AS n FROM rollouts GROUP BY agent, group_id)\n\
         SELECT agent, COUNT(*) AS groups, MAX(n) AS largest FROM g GROUP BY agent\n",
    )
    .unwrap();
    let f = d.write(
        "b.jsonl",
        "{\"group_idx\": 1, \"token_level_scores\": [0.25, 0.25]}\n\
         {\"group_idx\": \"1\", \"token_level_scores\": [1.0, 0.0]}\n\
         {\"group_idx\": 1.0, \"token_level_scores\": [0.0, 0.0]}\n",
    );
    let args =
        [f.to_str().unwrap(), "--metric-dir", m.to_str().unwrap(), "--metric", "my_metric", "--metric", "group_sizes"];
    let (v, _) = batch_metrics(&args);
    assert!(close(num(&v, "custom_metrics/train/my_metric/value"), (0.5 + 1.0 + 0.0) / 3.0), "{v:?}");
    assert_eq!(v.get("custom_metrics/train/group_sizes/groups"), Some(&Json::Int(2)));
    assert_eq!(v.get("custom_metrics/train/group_sizes/largest"), Some(&Json::Int(2)));
    // The built-in mean_reward agrees with the SQL one.
    let (b, _) = batch_metrics(&[f.to_str().unwrap(), "--metric", "mean_reward"]);
    assert!(close(num(&b, "custom_metrics/train/mean_reward"), num(&v, "custom_metrics/train/my_metric/value")));
    // An unknown name lists what is known, the folder's metrics included.
    let o = run(&["batch-metrics", f.to_str().unwrap(), "--metric-dir", m.to_str().unwrap(), "--metric", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("mean_reward") && stderr(&o).contains("my_metric"), "{}", stderr(&o));
}

#[test]
fn bad_batches_are_refused_naming_the_place() {
    let d = TempDir::new("vagen-bad");
    let cases = [
        (
            "{\"group_idx\": 1, \"reward\": 1}\n{\"group_idx\": [1, 2], \"reward\": 1}\n",
            "line 2, key `group_idx`: a group id that is a list",
        ),
        (
            "{\"group_idx\": 1, \"token_level_scores\": [1, \"x\"]}\n",
            "line 1, key `token_level_scores`: expected a list of numbers",
        ),
        (
            "{\"group_idx\": 1, \"token_level_scores\": 0.5}\n",
            "line 1, key `token_level_scores`: expected a list of numbers",
        ),
        ("{\"token_level_scores\": [1]}\n", "line 1, key `group_idx`: missing"),
        ("{\"group_idx\": 1, \"token_level_scores\": [1]\n", "line 1: invalid JSON"),
        ("[1, 2]\n", "line 1: expected a JSON object"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let f = d.write(&format!("b{i}.jsonl"), text);
        let o = run(&["batch-metrics", f.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{text}: {}", stderr(&o));
        assert!(stderr(&o).contains(&format!("{}, {want}", f.display())), "{text}: {}", stderr(&o));
        assert!(o.stdout.is_empty());
    }
    // A Parquet group column of lists, and a score column of text.
    let pq = d.join("b.parquet");
    let mut df = df!("group_idx" => [1.5f64, 2.5], "token_level_scores" => ["a", "b"]).unwrap();
    ParquetWriter::new(std::fs::File::create(&pq).unwrap()).finish(&mut df).unwrap();
    let o = run(&["batch-metrics", pq.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("key `token_level_scores`: the column is str; expected a list of numbers"),
        "{}",
        stderr(&o)
    );
    let list = Series::new("group_idx".into(), [Series::new("".into(), [1i64]), Series::new("".into(), [2i64])]);
    let mut df = DataFrame::new(2, vec![list.into(), Column::new("reward".into(), [1.0f64, 0.0])]).unwrap();
    ParquetWriter::new(std::fs::File::create(&pq).unwrap()).finish(&mut df).unwrap();
    let o = run(&["batch-metrics", pq.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("key `group_idx`: the group id column is list[i64]"), "{}", stderr(&o));
}
