//! A run written as several rollouts files (its shards) is read as one: the artifacts are
//! byte-identical to those of the concatenated file, and messages name each row's own file.

use std::path::PathBuf;

use crate::common::*;

fn with_rollouts<'a>(cmd: &'a str, files: &'a [PathBuf], rest: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![cmd];
    for f in files {
        args.extend(["--rollouts", f.to_str().unwrap()]);
    }
    args.extend_from_slice(rest);
    args
}

#[test]
fn shards_of_a_run_give_the_artifacts_of_the_whole_file() {
    let d = TempDir::new("shards");
    generate(
        d.path(),
        &[
            "--tasks",
            "40",
            "--repeats",
            "3",
            "--agents",
            "3",
            "--seed",
            "8",
            "--masked-frac",
            "0.05",
            "--missing-frac",
            "0.05",
        ],
    );
    let whole = d.join("rollouts.jsonl");
    let inputs = d.join("materialized_inputs.jsonl");
    let (shards, _) = cut_shuffled(&d, &whole, 3, "shard-", &mut Rng(17));
    assert_eq!(shards.len(), 3, "three shards");
    let i = inputs.to_str().unwrap();

    let (a1, a2) = (d.join("whole.json"), d.join("shards.json"));
    let o = run(&[
        "aggregate",
        whole.to_str().unwrap(),
        "--inputs",
        i,
        "--metric",
        "pass_at_k",
        "--out",
        a1.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&with_rollouts(
        "aggregate",
        &shards,
        &["--inputs", i, "--metric", "pass_at_k", "--out", a2.to_str().unwrap(), "-q"],
    ));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&a1).unwrap(), std::fs::read(&a2).unwrap(), "aggregate differs");

    let (p1, p2) = (d.join("p-whole"), d.join("p-shards"));
    let o = run(&[
        "profile",
        whole.to_str().unwrap(),
        "--inputs",
        i,
        "--out-dir",
        p1.to_str().unwrap(),
        "--allow-partial",
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Shards as positional arguments.
    let mut args = vec!["profile"];
    args.extend(shards.iter().map(|s| s.to_str().unwrap()));
    args.extend(["--inputs", i, "--out-dir", p2.to_str().unwrap(), "--allow-partial", "-q"]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    for (a, b) in [
        ("rollouts_reward_profiling.jsonl", "shard-0_reward_profiling.jsonl"),
        ("rollouts_agent_metrics.json", "shard-0_agent_metrics.json"),
        ("rollouts_repeat_level_metrics.json", "shard-0_repeat_level_metrics.json"),
    ] {
        assert_eq!(std::fs::read(p1.join(a)).unwrap(), std::fs::read(p2.join(b)).unwrap(), "{a} differs");
    }

    let (e1, e2) = (d.join("e-whole"), d.join("e-shards"));
    let o = run(&["export", whole.to_str().unwrap(), "--inputs", i, "--out-dir", e1.to_str().unwrap(), "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(&with_rollouts("export", &shards, &["--inputs", i, "--out-dir", e2.to_str().unwrap(), "-q"]));
    assert!(o.status.success(), "{}", stderr(&o));
    for t in ["tasks.parquet", "agents.parquet", "repeats.parquet"] {
        assert_eq!(std::fs::read(e1.join(t)).unwrap(), std::fs::read(e2.join(t)).unwrap(), "{t} differs");
    }
}

#[test]
fn shards_need_a_named_output_and_errors_name_the_shard() {
    let d = TempDir::new("shards-bad");
    generate(d.path(), &["--tasks", "10", "--repeats", "2", "--agents", "1", "--seed", "4"]);
    let whole = d.join("rollouts.jsonl");
    let (shards, _) = cut_shuffled(&d, &whole, 2, "shard-", &mut Rng(5));
    // No file to name the output after.
    let o = run(&with_rollouts("aggregate", &shards, &[]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--out FILE"), "{}", stderr(&o));
    assert_eq!(d.files().iter().filter(|f| f.contains("aggregate")).count(), 0, "{:?}", d.files());
    // A rollout given in two shards: both places named, each with its own file.
    let first = std::fs::read_to_string(&shards[0]).unwrap();
    let dup = first.lines().next().unwrap();
    let text = std::fs::read_to_string(&shards[1]).unwrap();
    std::fs::write(&shards[1], format!("{text}{dup}\n")).unwrap();
    let n1 = text.lines().count() + 1;
    let out = d.join("agg.json");
    let o = run(&with_rollouts("aggregate", &shards, &["--out", out.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("{}, line 1 and {}, line {n1}", shards[0].display(), shards[1].display())), "{err}");
    assert!(!out.exists());
    // A malformed line names its shard and its line there.
    std::fs::write(&shards[1], format!("{text}{{\"reward\": \n")).unwrap();
    let o = run(&with_rollouts("aggregate", &shards, &["--out", out.to_str().unwrap()]));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("{}, line {n1}", shards[1].display())), "{}", stderr(&o));
    assert!(!out.exists());
}
