//! `shard` → `join` → `merge`: a sweep cut into files (lines shuffled, random cut
//! points) gives the same artifact bytes as `aggregate` / `profile` on the files
//! concatenated, whatever the bucket width; bad input is refused with no output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::*;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(args: &[&str]) {
    rollstat().args(args).ok();
}

/// Shards every file with `width` and joins each bucket; the joined slices in bucket
/// order.
fn shard_and_join(d: &TempDir, files: &[PathBuf], width: usize, tag: &str) -> Vec<PathBuf> {
    let jobs: Vec<(PathBuf, Option<String>)> = files.iter().map(|f| (f.clone(), None)).collect();
    shard_ranges_and_join(d, &jobs, width, tag)
}

/// [`shard_and_join`] with one shard run per (file, `--range`).
fn shard_ranges_and_join(d: &TempDir, jobs: &[(PathBuf, Option<String>)], width: usize, tag: &str) -> Vec<PathBuf> {
    let mut buckets: BTreeMap<i64, Vec<PathBuf>> = BTreeMap::new();
    for (i, (f, range)) in jobs.iter().enumerate() {
        let dir = d.join(&format!("{tag}-shard{i}"));
        let w = width.to_string();
        let mut args = vec!["shard", s(f), "--out-dir", s(&dir), "--task-width", &w, "-q"];
        if let Some(r) = range {
            args.extend(["--range", r.as_str()]);
        }
        ok(&args);
        let manifest = read_json(&dir.join("manifest.json"));
        let Some(rollstat::json::Json::Arr(list)) = manifest.get("buckets") else { panic!("no bucket list") };
        for b in list {
            let rollstat::json::Json::Arr(pair) = b else { panic!("bucket entry {b:?}") };
            let n = pair[0].as_f64().unwrap() as i64;
            buckets.entry(n).or_default().push(dir.join(format!("b{n}.slice")));
        }
    }
    buckets
        .into_iter()
        .map(|(b, slices)| {
            let out = d.join(&format!("{tag}-part{b}.slice"));
            let mut args = vec!["join", "--out", s(&out), "-q"];
            args.extend(slices.iter().map(|p| s(p)));
            ok(&args);
            out
        })
        .collect()
}

/// Shards an inputs file in `ranges` byte ranges (cut anywhere, not at line ends) with
/// `width`; with `join`, each bucket's input slices joined by `join`, else every
/// input slice `shard` wrote.
fn shard_inputs(d: &TempDir, inputs: &Path, ranges: u64, width: usize, tag: &str, join: bool) -> Vec<PathBuf> {
    let size = std::fs::metadata(inputs).unwrap().len();
    let cuts: Vec<u64> = (0..=ranges).map(|k| size * k / ranges).collect();
    let mut buckets: BTreeMap<i64, Vec<PathBuf>> = BTreeMap::new();
    for (k, w) in cuts.windows(2).enumerate() {
        let dir = d.join(&format!("{tag}-ishard{k}"));
        let range = if k as u64 + 1 == ranges { format!("{}:", w[0]) } else { format!("{}:{}", w[0], w[1]) };
        let wd = width.to_string();
        ok(&["shard", "--inputs", s(inputs), "--out-dir", s(&dir), "--task-width", &wd, "--range", &range, "-q"]);
        let manifest = read_json(&dir.join("manifest.json"));
        assert_eq!(manifest.get("kind").and_then(|k| k.as_str()), Some("inputs"));
        let Some(rollstat::json::Json::Arr(list)) = manifest.get("buckets") else { panic!("no bucket list") };
        for b in list {
            let rollstat::json::Json::Arr(pair) = b else { panic!("bucket entry {b:?}") };
            let n = pair[0].as_f64().unwrap() as i64;
            buckets.entry(n).or_default().push(dir.join(format!("i{n}.slice")));
        }
    }
    if !join {
        return buckets.into_values().flatten().collect();
    }
    buckets
        .into_iter()
        .map(|(b, slices)| {
            let out = d.join(&format!("{tag}-ipart{b}.slice"));
            let mut args = vec!["join", "--out", s(&out), "-q"];
            args.extend(slices.iter().map(|p| s(p)));
            ok(&args);
            out
        })
        .collect()
}

/// How `merge aggregate` is asked to hold the sweep.
const MODES: [Option<&str>; 2] = [None, Some("--whole-table")];

/// Runs `merge aggregate` with `args` and `mode` (one of [`MODES`]); whether it merged
/// bucket by bucket, as its summary line says.
fn merge_aggregate(args: &[&str], mode: Option<&str>) -> bool {
    merged_by_bucket("aggregate", args, mode)
}

/// Runs `merge COMMAND` with `args` (`-q` left out, so that it prints its summary) and
/// `mode`; whether it merged bucket by bucket (else as one table), as it says.
fn merged_by_bucket(command: &str, args: &[&str], mode: Option<&str>) -> bool {
    let args: Vec<&str> = args.iter().copied().filter(|&a| a != "-q").collect();
    let o = run(&[&["merge", command], args.as_slice(), mode.as_slice()].concat());
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    let out = stdout(&o);
    let said: Vec<&str> = out.lines().filter(|l| l.starts_with("Merged ")).collect();
    assert_eq!(said.len(), 1, "{out}");
    match said[0] {
        l if l.starts_with("Merged bucket by bucket (") => true,
        "Merged as one table" => false,
        l => panic!("{l}"),
    }
}

/// Runs `args` and then `slices` in each of [`MODES`]: all refuse (exit status 2,
/// nothing at `out`) in the same words, which are returned.
fn refused_alike(args: &[&str], slices: &[PathBuf], out: &Path, name: &str) -> String {
    let mut said: Vec<String> = Vec::new();
    for mode in MODES {
        let o = rollstat().args(args).args(slices.iter().map(|p| s(p))).args(mode).fails(2);
        assert!(!out.exists(), "{name}: no output");
        said.push(stderr(&o));
    }
    assert!(said.iter().all(|x| *x == said[0]), "{name}: {said:?}");
    said.remove(0)
}

/// The three artifacts of a profile of `all.jsonl`.
const PROFILE_FILES: [&str; 3] =
    ["all_reward_profiling.jsonl", "all_agent_metrics.json", "all_repeat_level_metrics.json"];

/// Runs `merge profile` with `args` and `mode` (one of [`MODES`]); whether it merged
/// bucket by bucket, as its summary line says.
fn merge_profile(args: &[&str], mode: Option<&str>) -> bool {
    merged_by_bucket("profile", args, mode)
}

/// The statistics as a cluster runs them: rounds of `merge aggregate
/// --share-out` (each worker given one or two buckets, with `extra`: the inputs, flags)
/// and `merge combine`, until combine says `done`; the finished plan and the rounds.
fn rounds(d: &TempDir, slices: &[PathBuf], extra: &[&str], tag: &str, rng: &mut Rng) -> (PathBuf, usize) {
    rounds_of("aggregate", d, slices, extra, tag, rng)
}

/// [`rounds`] for `merge aggregate` or `merge profile`.
fn rounds_of(
    command: &str,
    d: &TempDir,
    slices: &[PathBuf],
    extra: &[&str],
    tag: &str,
    rng: &mut Rng,
) -> (PathBuf, usize) {
    let mut plan: Option<PathBuf> = None;
    for round in 0..8 {
        let mut shares = Vec::new();
        let mut k = 0;
        while k < slices.len() {
            let take = (1 + rng.pick(2)).min(slices.len() - k);
            let out = d.join(&format!("{tag}-r{round}-{k}.share"));
            let mut args = vec!["merge", command, "--share-out", s(&out), "-q"];
            args.extend(extra);
            if let Some(p) = &plan {
                args.extend(["--plan", s(p)]);
            }
            args.extend(slices[k..k + take].iter().map(|p| s(p)));
            ok(&args);
            shares.push(out);
            k += take;
        }
        let next = d.join(&format!("{tag}-plan{round}"));
        let mut args = vec!["merge", "combine", "--out", s(&next), "-q"];
        if let Some(p) = &plan {
            args.extend(["--plan", s(p)]);
        }
        args.extend(shares.iter().map(|p| s(p)));
        let o = run(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let said = stdout(&o);
        if said.trim() == "done" {
            return (next, round + 1);
        }
        assert_eq!(said.trim(), "more", "{args:?}");
        plan = Some(next);
    }
    panic!("{tag}: no plan finished in 8 rounds");
}

/// `merge aggregate --plan` on `slices` with `extra`: the bytes written.
fn merge_with_plan(d: &TempDir, slices: &[PathBuf], extra: &[&str], plan: &Path, tag: &str) -> Vec<u8> {
    let got = d.join(&format!("{tag}-planned.json"));
    let cmd = rollstat().args(["merge", "aggregate", "--plan", s(plan), "--out", s(&got), "-q"]).args(extra);
    let o = cmd.args(slices.iter().map(|p| s(p))).env("ROLLSTAT_TRACE", "1").ok();
    // The plan holds the statistics: no pass of the merge's own.
    assert!(!stderr(&o).contains("merge: pass 2"), "{tag}: {}", stderr(&o));
    bytes(&got)
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every width gives the single-machine bytes, for aggregate (with and without inputs)
/// and for profile.
fn check_sweep(generate_args: &[&str], files: usize, seed: u64) {
    let d = TempDir::new("dist");
    let g = d.join("gen");
    generate(&g, generate_args);
    let inputs = g.join("materialized_inputs.jsonl");
    let mut rng = Rng(seed);
    let (parts, all) = cut_shuffled(&d, &g.join("rollouts.jsonl"), files, "part", &mut rng);
    let want_agg = d.join("want-agg.json");
    ok(&["aggregate", s(&all), "--inputs", s(&inputs), "--out", s(&want_agg), "-q"]);
    let want_plain = d.join("want-plain.json");
    ok(&["aggregate", s(&all), "--out", s(&want_plain), "-q"]);
    let want_export = d.join("want-export");
    ok(&["export", s(&all), "--inputs", s(&inputs), "--out-dir", s(&want_export), "-q"]);
    let want_subset = d.join("want-subset.json");
    let subset = ["--metric", "pass_at_k", "--subset-key", "subset"];
    ok(&[&["aggregate", s(&all), "--inputs", s(&inputs), "--out", s(&want_subset), "-q"][..], &subset].concat());
    let want_prof = d.join("want-prof");
    ok(&[
        "profile",
        "--rollouts",
        s(&all),
        "--inputs",
        s(&inputs),
        "--out-dir",
        s(&want_prof),
        "--allow-partial",
        "-q",
    ]);
    for width in [1, 1 + rng.pick(9), 1000] {
        let tag = format!("w{width}");
        let slices = shard_and_join(&d, &parts, width, &tag);
        let slice_args: Vec<&str> = slices.iter().map(|p| s(p)).collect();
        // The inputs sharded too, with this width or another, joined by bucket or not.
        let iwidth = if rng.pick(2) == 0 { width } else { 1 + rng.pick(12) };
        let islices = shard_inputs(&d, &inputs, 1 + rng.pick(4) as u64, iwidth, &tag, rng.pick(2) == 0);
        let islice_args: Vec<&str> = islices.iter().map(|p| s(p)).collect();
        // Bucket by bucket (perf records included) and on the whole table: the same bytes.
        for (m, mode) in MODES.into_iter().enumerate() {
            let whole = mode == Some("--whole-table");
            let got = d.join(&format!("{tag}-{m}-agg.json"));
            let mut args = vec!["--inputs", s(&inputs), "--out", s(&got), "-q"];
            args.extend(&slice_args);
            assert_eq!(merge_aggregate(&args, mode), !whole, "path taken, width {width}");
            assert!(bytes(&got) == bytes(&want_agg), "aggregate with inputs, width {width}, {mode:?}");
            let got = d.join(&format!("{tag}-{m}-sliced.json"));
            let mut args = vec!["--out", s(&got), "-q"];
            args.extend(&islice_args);
            args.extend(&slice_args);
            assert_eq!(merge_aggregate(&args, mode), !whole, "path taken, width {width}");
            assert!(bytes(&got) == bytes(&want_agg), "aggregate with input slices, widths {width}/{iwidth}, {mode:?}");
            let got = d.join(&format!("{tag}-{m}-plain.json"));
            let mut args = vec!["--out", s(&got), "-q"];
            args.extend(&slice_args);
            assert_eq!(merge_aggregate(&args, mode), !whole, "path taken, width {width}");
            assert!(bytes(&got) == bytes(&want_plain), "aggregate, width {width}, {mode:?}");
        }
        // A custom metric reading a string field (the subset) takes the whole table, whose
        // strings must come back from every slice: the same bytes.
        let got = d.join(&format!("{tag}-subset.json"));
        let mut args = vec!["--inputs", s(&inputs), "--out", s(&got), "-q", "--metric", "pass_at_k"];
        args.extend(["--subset-key", "subset"]);
        args.extend(&slice_args);
        assert!(!merge_aggregate(&args, None), "custom metrics read the whole table");
        assert!(bytes(&got) == bytes(&want_subset), "aggregate with a subset key, width {width}");
        // export's Parquet tables (string columns included), with the inputs file or
        // input slices: the same bytes.
        for (k, extra) in [vec!["--inputs", s(&inputs)], islice_args.clone()].into_iter().enumerate() {
            let got = d.join(&format!("{tag}-export{k}"));
            let mut args = vec!["merge", "export", "--name", "all.jsonl", "--out-dir", s(&got), "-q"];
            args.extend(&extra);
            args.extend(&slice_args);
            ok(&args);
            for f in ["rollouts.parquet", "tasks.parquet", "agents.parquet", "repeats.parquet"] {
                assert!(bytes(&got.join(f)) == bytes(&want_export.join(f)), "merge export {f}, width {width}, {k}");
            }
        }
        // The statistics as rounds of shares, with the inputs file, input slices or none.
        let file_args = ["--inputs", s(&inputs)];
        for (k, (extra, want)) in
            [(&file_args[..], &want_agg), (&islice_args[..], &want_agg), (&[][..], &want_plain)].into_iter().enumerate()
        {
            let rtag = format!("{tag}-rounds{k}");
            let (plan, _) = rounds_of("aggregate", &d, &slices, extra, &rtag, &mut rng);
            assert!(merge_with_plan(&d, &slices, extra, &plan, &rtag) == bytes(want), "rounds {k}, width {width}");
        }
        for (m, mode) in MODES.into_iter().enumerate() {
            let whole = mode == Some("--whole-table");
            for sliced in [false, true] {
                let got = d.join(&format!("{tag}-prof-{m}-{sliced}"));
                let mut args = vec!["--name", "all.jsonl", "--out-dir", s(&got), "--allow-partial", "-q"];
                if sliced {
                    args.extend(&islice_args);
                } else {
                    args.extend(["--inputs", s(&inputs)]);
                }
                args.extend(&slice_args);
                assert_eq!(merge_profile(&args, mode), !whole, "path taken, width {width}");
                for f in PROFILE_FILES {
                    let (a, b) = (bytes(&got.join(f)), bytes(&want_prof.join(f)));
                    assert!(a == b, "profile {f}, width {width}, {mode:?}, input slices {sliced}");
                }
                if mode.is_some() {
                    continue;
                }
                // The statistics as rounds of shares, then the merge with the plan.
                let rtag = format!("{tag}-prof-rounds-{sliced}");
                let extra: Vec<&str> = if sliced { islice_args.clone() } else { vec!["--inputs", s(&inputs)] };
                let (plan, _) = rounds_of("profile", &d, &slices, &extra, &rtag, &mut rng);
                let got = d.join(&format!("{rtag}-out"));
                let o = rollstat()
                    .args(["merge", "profile", "--plan", s(&plan), "--out-dir", s(&got), "-q"])
                    .args(["--name", "all.jsonl", "--allow-partial"])
                    .args(&extra)
                    .args(&slice_args)
                    .env("ROLLSTAT_TRACE", "1")
                    .ok();
                assert!(!stderr(&o).contains("merge: pass 2"), "{rtag}: the plan holds the statistics");
                for f in PROFILE_FILES {
                    let same = bytes(&got.join(f)) == bytes(&want_prof.join(f));
                    assert!(same, "profile {f} from rounds, width {width}");
                }
            }
        }
    }
}

#[test]
fn sharded_sweeps_give_the_single_machine_bytes() {
    // Masked rows, missing values, perf records, several agents; the cut files hold the
    // lines shuffled.
    check_sweep(
        &[
            "--tasks",
            "90",
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
            "--ng-perf-frac",
            "0.3",
            "--text-bytes",
            "40",
        ],
        5,
        0x9E37_79B9_7F4A_7C15,
    );
}

#[test]
fn sharded_one_repeat_fan_out_sweeps_give_the_single_machine_bytes() {
    check_sweep(
        &["--tasks", "40", "--repeats", "1", "--agents", "2", "--seed", "5", "--fan-out", "--text-bytes", "20"],
        3,
        0xD1B5_4A32_D192_ED03,
    );
    check_sweep(
        &[
            "--tasks",
            "30",
            "--repeats",
            "2",
            "--agents",
            "2",
            "--seed",
            "6",
            "--env-server-stamp",
            "--reward",
            "binary",
        ],
        4,
        0x2545_F491_4F6C_DD1D,
    );
}

/// Sweeps the bucket-by-bucket merge takes on: missing and masked values, a field some
/// buckets lack, integer-only rewards, server-stamped runs, many agents.
#[test]
fn bucket_by_bucket_merges_give_the_single_machine_bytes() {
    check_sweep(
        &[
            "--tasks",
            "70",
            "--repeats",
            "4",
            "--agents",
            "4",
            "--seed",
            "12",
            "--masked-frac",
            "0.1",
            "--missing-frac",
            "0.2",
        ],
        4,
        0x6A09_E667_F3BC_C908,
    );
    check_sweep(
        &[
            "--tasks",
            "50",
            "--repeats",
            "3",
            "--agents",
            "1",
            "--seed",
            "13",
            "--reward",
            "binary",
            "--masked-frac",
            "0.3",
        ],
        3,
        0xBB67_AE85_84CA_A73B,
    );
}

/// Fields and number kinds that change from bucket to bucket: a field that first shows
/// in a late bucket (ordered after the others, missing before), integers until a late
/// float (max/min then written as floats everywhere), and an unnamed run given a label.
#[test]
fn late_fields_and_late_floats_merge_bucket_by_bucket() {
    let d = TempDir::new("dist-late");
    let mut text = String::new();
    for task in 0..24 {
        for rollout in 0..3 {
            let reward =
                if task == 21 && rollout == 1 { "0.5".to_string() } else { ((task + rollout) % 2).to_string() };
            let late = if task >= 15 { format!(", \"late\": {}", task * rollout) } else { String::new() };
            let agent = if task % 4 == 3 { String::new() } else { ", \"agent_ref\": {\"name\": \"a\"}".to_string() };
            text.push_str(&format!(
                "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}{agent}, \"reward\": {reward}, \"turns\": {}{late}}}\n",
                rollout + 1
            ));
        }
    }
    let f = d.write("r.jsonl", &text);
    let ints_only = d.write("ints.jsonl", &text.replace("\"reward\": 0.5", "\"reward\": 1"));
    for (i, (file, agent)) in [(&f, "b"), (&ints_only, "b"), (&f, "a")].into_iter().enumerate() {
        let want = d.join("want.json");
        ok(&["aggregate", s(file), "--agent", agent, "--out", s(&want), "-q"]);
        let slices = shard_and_join(&d, std::slice::from_ref(file), 5, &format!("late{i}"));
        let got = d.join("got.json");
        let mut args = vec!["--agent", agent, "--out", s(&got), "-q"];
        args.extend(slices.iter().map(|p| s(p)));
        if agent == "a" {
            // Unnamed rollouts labelled as a named run interleave with it, which only the
            // whole table orders: refused bucket by bucket, before anything is written.
            let o = run(&[&["merge", "aggregate"], args.as_slice()].concat());
            assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
            assert!(stderr(&o).contains("--whole-table") && !got.exists(), "{}", stderr(&o));
            assert!(!merge_aggregate(&args, Some("--whole-table")));
        } else {
            assert!(merge_aggregate(&args, None));
        }
        assert!(bytes(&got) == bytes(&want), "{} --agent {agent}", file.display());
        std::fs::remove_file(&got).unwrap();
        std::fs::remove_file(&want).unwrap();
    }
}

/// A file cut into byte ranges at arbitrary points (inside lines, at a line start, one
/// range inside a single line, the last open-ended) shards every line once: the merge
/// gives the bytes of `aggregate` on the file.
#[test]
fn byte_ranges_of_one_file_give_the_single_machine_bytes() {
    let d = TempDir::new("dist-range");
    let g = d.join("gen");
    generate(&g, &["--tasks", "40", "--repeats", "3", "--agents", "2", "--seed", "5", "--masked-frac", "0.1"]);
    let file = g.join("rollouts.jsonl");
    let text = bytes(&file);
    let first_newline = text.iter().position(|&c| c == b'\n').unwrap();
    let mut rng = Rng(23);
    let mut cuts = vec![0, 3, 7, first_newline + 1];
    cuts.extend((0..5).map(|_| rng.pick(text.len())));
    cuts.sort_unstable();
    cuts.dedup();
    let mut jobs: Vec<(PathBuf, Option<String>)> =
        cuts.windows(2).map(|w| (file.clone(), Some(format!("{}:{}", w[0], w[1])))).collect();
    jobs.push((file.clone(), Some(format!("{}:", cuts[cuts.len() - 1]))));
    let slices = shard_ranges_and_join(&d, &jobs, 7, "r");
    let want = d.join("want.json");
    ok(&["aggregate", s(&file), "--out", s(&want), "-q"]);
    let got = d.join("got.json");
    let mut args = vec!["merge", "aggregate", "--out", s(&got), "-q"];
    args.extend(slices.iter().map(|p| s(p)));
    ok(&args);
    assert!(bytes(&got) == bytes(&want), "byte ranges at {cuts:?}");
    // The range 3..7 lies inside the first line: it holds no line and no bucket.
    let empty = read_json(&d.join("r-shard1").join("manifest.json"));
    assert_eq!(empty.get("buckets"), Some(&rollstat::json::Json::Arr(vec![])));
}

/// `merge` also takes the shards' slices as they are, without `join`: every file's
/// buckets in file order, so rows arrive out of (task, rollout) order and are sorted on
/// reading; a file whose bucket is missing in another adds columns only some slices have.
#[test]
fn merging_shard_slices_without_partials_gives_the_single_machine_bytes() {
    let d = TempDir::new("dist-no-partial");
    let g = d.join("gen");
    generate(&g, &["--tasks", "60", "--repeats", "3", "--agents", "2", "--seed", "9", "--missing-frac", "0.1"]);
    let mut rng = Rng(41);
    let (parts, all) = cut_shuffled(&d, &g.join("rollouts.jsonl"), 3, "part", &mut rng);
    let want = d.join("want.json");
    ok(&["aggregate", s(&all), "--out", s(&want), "-q"]);
    let mut slices = Vec::new();
    for (i, f) in parts.iter().enumerate() {
        let dir = d.join(&format!("shard{i}"));
        ok(&["shard", s(f), "--out-dir", s(&dir), "--task-width", "11", "-q"]);
        let mut own: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "slice"))
            .collect();
        own.sort_by_key(|p| p.file_stem().unwrap().to_str().unwrap()[1..].parse::<i64>().unwrap());
        slices.extend(own);
    }
    assert!(slices.len() > 3, "{slices:?}");
    let got = d.join("got.json");
    let mut args = vec!["--out", s(&got)];
    args.extend(slices.iter().map(|p| s(p)));
    // Told by the slices' heads before any is read: one table, with a warning.
    assert!(!merge_aggregate(&args, None));
    assert!(bytes(&got) == bytes(&want), "merge of {} shard slices", slices.len());
    let o = run(&[&["merge", "aggregate", "--plan", s(&got)], args.as_slice()].concat());
    assert_eq!(o.status.code(), Some(2), "a plan is for the bucket-by-bucket merge: {}", stderr(&o));
    assert!(stderr(&o).contains("not in task order"), "{}", stderr(&o));
}

/// A bad line in a later range is named by its line number in the whole file.
#[test]
fn a_range_names_bad_lines_by_their_line_in_the_file() {
    let d = TempDir::new("dist-range-bad");
    let good = "{\"_ng_task_index\": 0, \"_ng_rollout_index\": 0, \"reward\": 1}\n";
    let text = format!("{good}{good}{good}{{\"_ng_task_index\": 1, \"reward\": }}\n");
    let f = d.write("r.jsonl", &text);
    let out = d.join("shard");
    let range = format!("{}:", 2 * good.len() + 5);
    let o = run(&["shard", s(&f), "--out-dir", s(&out), "--task-width", "4", "--range", &range]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("r.jsonl") && e.contains("line 4"), "{e}");
    assert!(!out.exists(), "a refused shard leaves no folder");
    let o = run(&["shard", s(&f), "--out-dir", s(&out), "--task-width", "4", "--range", "9:2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("ends before it starts"), "{}", stderr(&o));
}

#[test]
fn shard_refuses_a_bad_line_with_no_output() {
    let d = TempDir::new("dist-bad");
    let f = d.write(
        "r.jsonl",
        "{\"_ng_task_index\": 0, \"_ng_rollout_index\": 0, \"reward\": 1}\n{\"_ng_task_index\": 1, \"reward\": }\n",
    );
    let out = d.join("shard");
    let o = run(&["shard", s(&f), "--out-dir", s(&out), "--task-width", "4"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("r.jsonl") && e.contains("line 2"), "{e}");
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(!out.exists(), "a refused shard leaves no folder");
}

#[test]
fn merge_names_both_files_of_a_duplicate_key_and_writes_nothing() {
    let d = TempDir::new("dist-dup");
    let a = d.write(
        "a.jsonl",
        "{\"_ng_task_index\": 0, \"_ng_rollout_index\": 0, \"agent_ref\": {\"name\": \"x\"}, \"reward\": 1}\n",
    );
    let b = d.write(
        "b.jsonl",
        "{\"_ng_task_index\": 1, \"_ng_rollout_index\": 0, \"agent_ref\": {\"name\": \"x\"}, \"reward\": 0}\n\
         {\"_ng_task_index\": 0, \"_ng_rollout_index\": 0, \"agent_ref\": {\"name\": \"x\"}, \"reward\": 0}\n",
    );
    let slices = shard_and_join(&d, &[a, b], 10, "dup");
    let out = d.join("agg.json");
    let mut args = vec!["merge", "aggregate", "--out", s(&out)];
    args.extend(slices.iter().map(|p| s(p)));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("a.jsonl, line 1") && e.contains("b.jsonl, line 2"), "{e}");
    assert!(!out.exists());
}

#[test]
fn merge_refuses_a_file_that_is_not_a_slice() {
    let d = TempDir::new("dist-notslice");
    let f = d.write("x.slice", "{\"_ng_task_index\": 0}\n");
    let out = d.join("agg.json");
    let o = run(&["merge", "aggregate", "--out", s(&out), s(&f)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("x.slice"), "{}", stderr(&o));
    assert!(!out.exists());
}

/// A slice states its rows and task span before its data, and the merge plans by that
/// head: a head that does not say what the rows hold is refused as damaged, whichever
/// way the merge goes, and so is a slice of another format version; nothing is written.
#[test]
fn merge_refuses_slices_whose_head_lies_or_is_of_another_version() {
    let d = TempDir::new("dist-head");
    let g = d.join("gen");
    generate(&g, &["--tasks", "30", "--repeats", "2", "--seed", "3"]);
    let slices = shard_and_join(&d, &[g.join("rollouts.jsonl")], 10, "h");
    let good = bytes(&slices[1]);
    let rows = u64::from_le_bytes(good[16..24].try_into().unwrap());
    let first = i64::from_le_bytes(good[24..32].try_into().unwrap());
    let last = i64::from_le_bytes(good[32..40].try_into().unwrap());
    assert_eq!((rows, first, last), (20, 10, 19), "bucket 1 of width 10: 10 tasks × 2 repeats");
    let out = d.join("agg.json");
    let merge = |slice: &Path, mode: Option<&str>| {
        let mut args = vec!["merge", "aggregate", "--out", s(&out), s(&slices[0]), s(slice), s(&slices[2])];
        args.extend(mode);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(!out.exists());
        stderr(&o)
    };
    // A span that moves the slice before its neighbour, and a row count off by one.
    for (at, value) in [(24, 0i64), (16, 21)] {
        let mut lied = good.clone();
        lied[at..at + 8].copy_from_slice(&value.to_le_bytes());
        let p = d.write("lied.slice", "");
        std::fs::write(&p, &lied).unwrap();
        for mode in MODES {
            let e = merge(&p, mode);
            assert!(e.contains("lied.slice") && e.contains("does not match its rows"), "{mode:?}: {e}");
        }
    }
    // The format before heads: the version byte 2, the data right after the magic.
    let mut old = good[..16].to_vec();
    old[15] = 2;
    old.extend_from_slice(&good[40..]);
    let p = d.write("old.slice", "");
    std::fs::write(&p, &old).unwrap();
    let e = merge(&p, None);
    assert!(e.contains("old.slice") && e.contains("another rollstat version"), "{e}");
}

/// The inputs are read beside the slices; a bad inputs line is still the error reported
/// (before a bad slice), named by file and line, with no output.
#[test]
fn merge_names_a_bad_inputs_line_first() {
    let d = TempDir::new("dist-badinputs");
    let g = d.join("gen");
    generate(&g, &["--tasks", "30", "--repeats", "2", "--seed", "3"]);
    let slices = shard_and_join(&d, &[g.join("rollouts.jsonl")], 10, "b");
    let text = std::fs::read_to_string(g.join("materialized_inputs.jsonl")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[4] = "{\"_ng_task_index\": 2, ";
    let inputs = d.write("inputs.jsonl", &(lines.join("\n") + "\n"));
    let not_slice = d.write("y.slice", "not a slice\n");
    for extra in [None, Some(&not_slice)] {
        let out = d.join("agg.json");
        let mut args = vec!["merge", "aggregate", "--inputs", s(&inputs), "--out", s(&out)];
        args.extend(slices.iter().map(|p| s(p)));
        args.extend(extra.map(|p| s(p)));
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("inputs.jsonl, line 5"), "{}", stderr(&o));
        assert!(!out.exists());
    }
    let out = d.join("prof");
    let mut args = vec!["merge", "profile", "--inputs", s(&inputs), "--out-dir", s(&out)];
    args.extend(slices.iter().map(|p| s(p)));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("inputs.jsonl, line 5"), "{}", stderr(&o));
    assert!(!out.exists());
}

/// Refusals the bucket-by-bucket merge finds in one bucket or across several are the
/// whole-table merge's, word for word: a rollout nothing names, a rollout whose agent
/// contradicts its input row, a duplicate key within one run.
#[test]
fn bucket_by_bucket_refusals_match_the_whole_table() {
    let d = TempDir::new("dist-refuse");
    let row = |task: i64, rollout: i64, agent: &str| {
        let a = if agent.is_empty() { String::new() } else { format!(", \"agent_ref\": {{\"name\": \"{agent}\"}}") };
        format!(
            "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}{a}, \"reward\": 1, \"response\": {{}}}}\n"
        )
    };
    let input = |task: i64, rollout: i64, agent: &str| {
        format!("{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, \"agent_ref\": {{\"name\": \"{agent}\"}}}}\n")
    };
    let mut inputs = String::new();
    for task in 0..12 {
        inputs.push_str(&input(task, 0, "a"));
    }
    let inputs = d.write("inputs.jsonl", &inputs);
    let good: String = (0..12).map(|t| row(t, 0, "a")).collect();
    let cases: Vec<(&str, String, bool)> = vec![
        ("unnamed", good.replace(&row(7, 0, "a"), &row(7, 0, "")), false),
        ("contradiction", good.replace(&row(9, 0, "a"), &row(9, 0, "z")), true),
        ("duplicate", format!("{good}{}", row(10, 0, "a")), false),
    ];
    for (name, text, with_inputs) in cases {
        let f = d.write(&format!("{name}.jsonl"), &text);
        let slices = shard_and_join(&d, &[f], 4, name);
        let out = d.join(&format!("{name}.json"));
        let mut args = vec!["merge", "aggregate", "--out", s(&out)];
        if with_inputs {
            args.extend(["--inputs", s(&inputs)]);
        }
        let said = refused_alike(&args, &slices, &out, name);
        assert!(said.contains(&format!("{name}.jsonl")), "{name}: {said}");
    }
}

/// Rollouts without an input row are left out with one warning; the bucket-by-bucket
/// merge counts them over every bucket and names the first, as the whole table does.
#[test]
fn rollouts_without_input_rows_warn_alike_bucket_by_bucket() {
    let d = TempDir::new("dist-orphans");
    let g = d.join("gen");
    generate(&g, &["--tasks", "30", "--repeats", "3", "--agents", "2", "--seed", "17", "--masked-frac", "0.1"]);
    let all_inputs = std::fs::read_to_string(g.join("materialized_inputs.jsonl")).unwrap();
    let kept: String =
        all_inputs.lines().enumerate().filter(|(i, _)| i % 7 != 3).map(|(_, l)| format!("{l}\n")).collect();
    let inputs = d.write("inputs.jsonl", &kept);
    let file = g.join("rollouts.jsonl");
    let slices = shard_and_join(&d, std::slice::from_ref(&file), 4, "orph");
    let mut warnings = Vec::new();
    for whole in [false, true] {
        let got = d.join(&format!("got-{whole}.json"));
        let mut cmd = rollstat()
            .args(["merge", "aggregate", "--inputs", s(&inputs), "--out", s(&got), "-q"])
            .args(slices.iter().map(|p| s(p)));
        if whole {
            cmd = cmd.arg("--whole-table");
        }
        let o = cmd.ok();
        let e = stderr(&o);
        assert!(e.contains("have no materialized input row"), "{e}");
        warnings.push(e);
        if whole {
            assert!(bytes(&got) == bytes(&d.join("got-false.json")), "both paths write the same bytes");
        }
    }
    assert_eq!(warnings[0], warnings[1]);
}

/// A run whose columns are longer than a sorted bin may be (65,536 values): the
/// low-memory merge narrows its medians and quartiles over more passes, and still
/// gives the single-machine bytes.
#[test]
fn low_memory_merges_of_long_columns_give_the_single_machine_bytes() {
    let d = TempDir::new("dist-long");
    let g = d.join("gen");
    generate(
        &g,
        &[
            "--tasks",
            "70000",
            "--repeats",
            "2",
            "--agents",
            "1",
            "--seed",
            "3",
            "--text-bytes",
            "8",
            "--reward",
            "continuous",
        ],
    );
    let file = g.join("rollouts.jsonl");
    let mut rng = Rng(41);
    let (parts, all) = cut_shuffled(&d, &file, 3, "part", &mut rng);
    let want = d.join("want.json");
    ok(&["aggregate", s(&all), "--out", s(&want), "-q"]);
    let slices = shard_and_join(&d, &parts, 9000, "long");
    let got = d.join("got.json");
    let mut args = vec!["--out", s(&got), "-q"];
    args.extend(slices.iter().map(|p| s(p)));
    assert!(merge_aggregate(&args, None));
    assert!(bytes(&got) == bytes(&want), "low-memory merge of 140,000 rollouts");
}

/// Values that make selection and summation hard, on columns long enough for several
/// counting rounds: signed zeros, a value repeated most of the time, values a few ulps
/// apart, magnitudes from 1e-300 to 1e300, integers beside floats, a field missing in
/// most rows (zero-filled in place for the agent's mean) and one repeat with a single
/// value. The low-memory merge gives the single-machine bytes.
#[test]
fn low_memory_merges_of_hard_columns_give_the_single_machine_bytes() {
    let d = TempDir::new("dist-hard");
    let mut rng = Rng(0x5851_F42D_4C95_7F2D);
    let mut text = String::new();
    let tasks = 36_000;
    for task in 0..tasks {
        for rollout in 0..4 {
            if rollout == 3 && task != 7 {
                continue;
            }
            let r = rng.below(1000);
            let zero = match r % 4 {
                0 => "-0.0".to_string(),
                1 => "0.0".to_string(),
                2 => "0".to_string(),
                _ => format!("{:?}", (r as f64 - 500.0) * 1e-300),
            };
            let common = if r < 900 { "0.75".to_string() } else { format!("{:?}", r as f64 / 7.0) };
            let near = format!("{:?}", 1.0 + (rng.below(40) as f64) * f64::EPSILON);
            let wide = format!("{:?}", (rng.below(2_000_001) as f64 - 1e6) * 10f64.powi(rng.below(600) as i32 - 300));
            let sparse = if r.is_multiple_of(10) { format!(", \"sparse\": {}", r as i64 - 500) } else { String::new() };
            text.push_str(&format!(
                "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, \"agent_ref\": {{\"name\": \"a\"}}, \
                 \"reward\": {common}, \"zero\": {zero}, \"near\": {near}, \"wide\": {wide}{sparse}}}\n"
            ));
        }
    }
    let file = d.write("hard.jsonl", &text);
    let want = d.join("want.json");
    ok(&["aggregate", s(&file), "--out", s(&want), "-q"]);
    let slices = shard_and_join(&d, std::slice::from_ref(&file), 5000, "hard");
    for mode in MODES {
        let got = d.join("got.json");
        let mut args = vec!["--out", s(&got), "-q"];
        args.extend(slices.iter().map(|p| s(p)));
        assert_eq!(merge_aggregate(&args, mode), mode != Some("--whole-table"));
        assert!(bytes(&got) == bytes(&want), "hard columns, {mode:?}");
        std::fs::remove_file(&got).unwrap();
    }
}

/// A shard's manifest counts its rows per (bucket, agent, rollout index), as the lines
/// name them: the counts add up to each bucket's rows and to the file's own counts.
#[test]
fn shard_manifests_count_rows_per_agent_and_repeat() {
    use rollstat::json::Json;
    let d = TempDir::new("dist-counts");
    let g = d.join("gen");
    generate(&g, &["--tasks", "60", "--repeats", "3", "--agents", "3", "--seed", "9", "--missing-frac", "0.1"]);
    let file = g.join("rollouts.jsonl");
    let dir = d.join("shard");
    ok(&["shard", s(&file), "--out-dir", s(&dir), "--task-width", "7", "-q"]);
    let manifest = read_json(&dir.join("manifest.json"));
    let width = 7.0;
    let num = |j: &Json| j.as_f64().unwrap() as i64;
    let Some(Json::Arr(buckets)) = manifest.get("buckets") else { panic!("no buckets") };
    let Some(Json::Arr(rows)) = manifest.get("rows") else { panic!("no rows") };
    let mut per_bucket: BTreeMap<i64, i64> = BTreeMap::new();
    let mut got: BTreeMap<(String, i64), i64> = BTreeMap::new();
    for r in rows {
        let Json::Arr(r) = r else { panic!("row entry {r:?}") };
        let Json::Str(agent) = &r[1] else { panic!("agent {:?}", r[1]) };
        *per_bucket.entry(num(&r[0])).or_default() += num(&r[3]);
        *got.entry((agent.clone(), num(&r[2]))).or_default() += num(&r[3]);
    }
    let listed: BTreeMap<i64, i64> = buckets
        .iter()
        .map(|b| match b {
            Json::Arr(p) => (num(&p[0]), num(&p[1])),
            _ => panic!("bucket {b:?}"),
        })
        .collect();
    assert_eq!(per_bucket, listed);
    let mut want: BTreeMap<(String, i64), i64> = BTreeMap::new();
    for line in read_jsonl(&file) {
        let Some(Json::Str(agent)) = line.get("agent_ref").and_then(|a| a.get("name")) else { panic!("agent") };
        let rollout = num(line.get("_ng_rollout_index").unwrap());
        let task = line.get("_ng_task_index").unwrap().as_f64().unwrap();
        assert!(listed.contains_key(&((task / width).floor() as i64)));
        *want.entry((agent.clone(), rollout)).or_default() += 1;
    }
    assert_eq!(got, want);
    assert_eq!(want.len(), 9, "3 agents × 3 repeats");
}

/// Inputs in any order (shuffled, one key given twice, rollouts without an input row)
/// give the bytes of the inputs file itself when sharded: the last row of a key names
/// its run, labels follow the file's first rows, as when the file is read whole.
#[test]
fn sharded_shuffled_inputs_give_the_inputs_file_bytes() {
    let d = TempDir::new("dist-ishuffle");
    let g = d.join("gen");
    generate(&g, &["--tasks", "40", "--repeats", "3", "--agents", "3", "--seed", "23", "--masked-frac", "0.05"]);
    let text = std::fs::read_to_string(g.join("materialized_inputs.jsonl")).unwrap();
    let mut lines: Vec<&str> = text.lines().filter(|l| !l.contains("\"_ng_task_index\": 17,")).collect();
    let mut rng = Rng(0x5DEE_CE66_D1CE_4E5B);
    for i in (1..lines.len()).rev() {
        lines.swap(i, rng.pick(i + 1));
    }
    let twice = lines[5].to_string();
    lines.insert(40, &twice);
    let inputs = d.write("inputs.jsonl", &lines.iter().map(|l| format!("{l}\n")).collect::<String>());
    let rollouts = g.join("rollouts.jsonl");
    let want = d.join("want.json");
    ok(&["aggregate", s(&rollouts), "--inputs", s(&inputs), "--out", s(&want), "-q"]);
    let slices = shard_and_join(&d, std::slice::from_ref(&rollouts), 7, "r");
    for (k, (width, join)) in [(7, true), (3, false), (100, true)].into_iter().enumerate() {
        let islices = shard_inputs(&d, &inputs, 3, width, &format!("i{k}"), join);
        for (m, mode) in MODES.into_iter().enumerate() {
            let got = d.join(&format!("got-{k}-{m}.json"));
            let mut args = vec!["--out", s(&got), "-q"];
            args.extend(slices.iter().chain(&islices).map(|p| s(p)));
            merge_aggregate(&args, mode);
            assert!(bytes(&got) == bytes(&want), "input width {width}, joined {join}, {mode:?}");
        }
    }
}

/// Input slices are refused, with exit status 2 and no output, when they cannot stand
/// for one inputs file: a rollouts file sharded as inputs, inputs given twice over,
/// slices of different widths, a slice given twice, kinds mixed in one `partial`, and a
/// profile whose inputs file (for the task samples) is gone.
#[test]
fn input_slices_that_do_not_make_one_inputs_file_are_refused() {
    let d = TempDir::new("dist-irefuse");
    let g = d.join("gen");
    generate(&g, &["--tasks", "20", "--repeats", "2", "--agents", "2", "--seed", "4"]);
    let inputs = g.join("materialized_inputs.jsonl");
    let rollouts = g.join("rollouts.jsonl");
    let slices = shard_and_join(&d, std::slice::from_ref(&rollouts), 5, "r");
    let refused = |args: &[&str], says: &str, out: &Path| {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(!out.exists(), "{args:?}: no output");
    };
    let swapped = d.join("swapped");
    refused(
        &["shard", "--inputs", s(&rollouts), "--out-dir", s(&swapped), "--task-width", "5"],
        "were --inputs and --rollouts swapped",
        &swapped,
    );
    let by5 = shard_inputs(&d, &inputs, 1, 5, "w5", false);
    let by3 = shard_inputs(&d, &inputs, 2, 3, "w3", true);
    let out = d.join("agg.json");
    let merge = |extra: &[&PathBuf], more: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["merge", "aggregate", "--out", s(&out)].iter().map(|x| x.to_string()).collect();
        v.extend(more.iter().map(|x| x.to_string()));
        v.extend(slices.iter().chain(extra.iter().copied()).map(|p| s(p).to_string()));
        v
    };
    let call = |v: Vec<String>, says: &str| refused(&v.iter().map(String::as_str).collect::<Vec<_>>(), says, &out);
    call(merge(&[&by5[0]], &["--inputs", s(&inputs)]), "not both");
    call(merge(&[&by5[0], &by3[0]], &[]), "sharded with one width");
    for mode in ["", "--whole-table"] {
        let more: Vec<&str> = [mode].into_iter().filter(|m| !m.is_empty()).collect();
        call(merge(&[&by5[0], &by5[0]], &more), "is in two input slices");
    }
    // A bucket's slice left out: its rollouts would lose their input rows.
    call(merge(&by5[..by5.len() - 1].iter().collect::<Vec<_>>(), &[]), "input rows that `shard --inputs` found");
    // A whole shard's slices left out (it may have found no row): a warning, and the
    // rollouts without input rows are left out as usual.
    let halves = shard_inputs(&d, &inputs, 2, 5, "halves", false);
    let first: Vec<&PathBuf> = halves.iter().filter(|p| !s(p).contains("ishard1")).collect();
    assert!(first.len() < halves.len());
    let args = merge(&first, &[]);
    let o = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("no input slice given comes from bytes"), "{}", stderr(&o));
    assert!(stderr(&o).contains("have no materialized input row"), "{}", stderr(&o));
    std::fs::remove_file(&out).unwrap();
    let part = d.join("mixed.slice");
    // `join` under its other name, `partial`.
    refused(&["partial", "--out", s(&part), s(&by5[0]), s(&slices[0])], "not an input slice", &part);
    refused(&["partial", "--out", s(&part), s(&by5[0]), s(&by5[1])], "join one bucket at a time", &part);
    // Profile quotes each task's input row from the file the slices were sharded from.
    let moved = d.join("moved.jsonl");
    std::fs::rename(&inputs, &moved).unwrap();
    let prof = d.join("prof");
    let mut args = vec!["merge", "profile", "--out-dir", s(&prof)];
    args.extend(slices.iter().chain(&by5).map(|p| s(p)));
    refused(&args, "materialized_inputs.jsonl: cannot be read", &prof);
    std::fs::rename(&moved, &inputs).unwrap();
    ok(&args);
}

/// Tasks without any rollout (before the first bucket, between buckets, after the
/// last) and inputs in shuffled order: the bucket-by-bucket profile cuts the inputs by
/// task range so that every input row is counted once, and gives the single-machine
/// bytes and warnings.
#[test]
fn bucket_by_bucket_profiles_count_tasks_without_rollouts() {
    let d = TempDir::new("dist-prof-missing");
    let g = d.join("gen");
    generate(
        &g,
        &["--tasks", "60", "--repeats", "3", "--agents", "2", "--seed", "31", "--masked-frac", "0.05", "--fan-out"],
    );
    let gone = |l: &str| {
        ["0", "1", "17", "18", "19", "41", "58", "59"].iter().any(|t| l.contains(&format!("\"_ng_task_index\": {t},")))
    };
    let text = std::fs::read_to_string(g.join("rollouts.jsonl")).unwrap();
    let kept: String = text.lines().filter(|l| !gone(l)).map(|l| format!("{l}\n")).collect();
    let rollouts = d.write("all.jsonl", &kept);
    let text = std::fs::read_to_string(g.join("materialized_inputs.jsonl")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let mut rng = Rng(0xA076_1D64_78BD_642F);
    for i in (1..lines.len()).rev() {
        lines.swap(i, rng.pick(i + 1));
    }
    let inputs = d.write("inputs.jsonl", &lines.iter().map(|l| format!("{l}\n")).collect::<String>());
    let want = d.join("want");
    let o = run(&[
        "profile",
        "--rollouts",
        s(&rollouts),
        "--inputs",
        s(&inputs),
        "--out-dir",
        s(&want),
        "--allow-partial",
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = stderr(&o);
    let slices = shard_and_join(&d, std::slice::from_ref(&rollouts), 6, "r");
    let islices = shard_inputs(&d, &inputs, 2, 4, "i", true);
    for (sliced, mode) in [(false, None::<&str>), (true, None)] {
        let got = d.join(&format!("got-{sliced}-{mode:?}"));
        let mut cmd = rollstat()
            .args(["merge", "profile", "--name", "all.jsonl", "--out-dir", s(&got), "--allow-partial", "-q"])
            .args(mode);
        if sliced {
            cmd = cmd.args(islices.iter().map(|p| s(p)));
        } else {
            cmd = cmd.args(["--inputs", s(&inputs)]);
        }
        let o = cmd.args(slices.iter().map(|p| s(p))).ok();
        assert_eq!(stderr(&o), said, "warnings, input slices {sliced}, {mode:?}");
        for f in PROFILE_FILES {
            assert!(bytes(&got.join(f)) == bytes(&want.join(f)), "{f}, input slices {sliced}, {mode:?}");
        }
    }
}

/// The bucket-by-bucket profile refuses what the whole-table profile refuses, with the
/// same message: a key twice in the inputs or in the results (the inputs' reported
/// first), results without an input row, missing results without --allow-partial, an
/// input row that names no agent.
#[test]
fn bucket_by_bucket_profile_refusals_match_the_whole_table() {
    let d = TempDir::new("dist-prof-refuse");
    let row = |task: i64, rollout: i64| {
        format!("{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, \"agent_ref\": {{\"name\": \"a\"}}, \"reward\": 1, \"response\": {{}}}}\n")
    };
    let input = |task: i64, rollout: i64, agent: &str| {
        let a = if agent.is_empty() { String::new() } else { format!(", \"agent_ref\": {{\"name\": \"{agent}\"}}") };
        format!("{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}{a}}}\n")
    };
    let good_rows: String = (0..12).flat_map(|t| [row(t, 0), row(t, 1)]).collect();
    let good_inputs: String = (0..12).flat_map(|t| [input(t, 0, "a"), input(t, 1, "a")]).collect();
    let cases: Vec<(&str, String, String)> = vec![
        ("input-dup", good_rows.clone(), format!("{good_inputs}{}", input(9, 1, "a"))),
        ("both-dup", format!("{good_rows}{}", row(2, 0)), format!("{good_inputs}{}", input(9, 1, "a"))),
        ("result-dup", format!("{good_rows}{}", row(10, 1)), good_inputs.clone()),
        ("extra", format!("{good_rows}{}{}", row(5, 7), row(11, 3)), good_inputs.clone()),
        ("missing", good_rows.replace(&row(3, 1), "").replace(&row(8, 0), ""), good_inputs.clone()),
        ("unnamed", good_rows.clone(), good_inputs.replace(&input(7, 1, "a"), &input(7, 1, ""))),
    ];
    for (name, rows, inputs) in cases {
        let f = d.write(&format!("{name}.jsonl"), &rows);
        let inp = d.write(&format!("{name}-inputs.jsonl"), &inputs);
        let slices = shard_and_join(&d, &[f], 4, name);
        let out = d.join(&format!("{name}-prof"));
        let sweep = format!("{name}.jsonl");
        let args = ["merge", "profile", "--name", &sweep, "--inputs", s(&inp), "--out-dir", s(&out)];
        let said = refused_alike(&args, &slices, &out, name);
        let single = {
            let out = d.join(&format!("{name}-single"));
            let o = run(&[
                "profile",
                "--rollouts",
                s(&d.join(&format!("{name}.jsonl"))),
                "--inputs",
                s(&inp),
                "--out-dir",
                s(&out),
            ]);
            assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
            stderr(&o)
        };
        let first_line = |e: &str| e.lines().next().unwrap_or_default().to_string();
        assert_eq!(first_line(&said), first_line(&single), "{name}: as the single-machine profile says");
    }
}

/// Runs whose server stamps sort the other way round from their labels (agent names),
/// on the same tasks: within a task, entries and columns follow the labels' order.
#[test]
fn bucket_by_bucket_profiles_order_fan_out_runs_by_label() {
    let d = TempDir::new("dist-prof-labels");
    let (mut rows, mut inputs) = (String::new(), String::new());
    let mut rng = Rng(0x9E6C_63D0_676A_9A99);
    for task in 0..30 {
        for (k, (server, agent)) in [("s1", "zeta"), ("s2", "alpha"), ("s3", "mid")].iter().enumerate() {
            for rep in 0..2 {
                let rollout = 2 * k as i64 + rep;
                let names =
                    format!("\"_ng_environment_server\": \"{server}\", \"agent_ref\": {{\"name\": \"{agent}\"}}");
                inputs
                    .push_str(&format!("{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, {names}}}\n"));
                if rng.pick(9) == 0 {
                    continue;
                }
                let reward = rng.pick(5) as f64 / 4.0;
                let tokens = 100 + rng.pick(50);
                rows.push_str(&format!(
                    "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, {names}, \"reward\": {reward}, \"tokens\": {tokens}, \"response\": {{}}}}\n"
                ));
            }
        }
    }
    let f = d.write("all.jsonl", &rows);
    let inp = d.write("inputs.jsonl", &inputs);
    let want = d.join("want");
    ok(&["profile", "--rollouts", s(&f), "--inputs", s(&inp), "--out-dir", s(&want), "--allow-partial", "-q"]);
    let slices = shard_and_join(&d, &[f], 7, "r");
    let got = d.join("got");
    let mut args = vec!["--name", "all.jsonl", "--inputs", s(&inp), "--out-dir", s(&got), "--allow-partial", "-q"];
    args.extend(slices.iter().map(|p| s(p)));
    for mode in [None] {
        assert!(merge_profile(&args, mode));
        for f in PROFILE_FILES {
            assert!(bytes(&got.join(f)) == bytes(&want.join(f)), "{f}, {mode:?}");
        }
    }
}

/// Profiles whose fields come late (a field only some tasks of one agent have), belong
/// to one agent only, or turn float late (an integer-only set no longer): each mode of
/// the bucket-by-bucket profile gives the single-machine bytes.
#[test]
fn late_fields_and_late_floats_profile_bucket_by_bucket() {
    let d = TempDir::new("dist-prof-late");
    let (mut text, mut inputs) = (String::new(), String::new());
    for task in 0..24 {
        for rollout in 0..4 {
            let agent = if rollout < 2 { "a" } else { "b" };
            let reward =
                if task == 21 && rollout == 3 { "0.5".to_string() } else { ((task + rollout) % 2).to_string() };
            let late =
                if task >= 15 && agent == "b" { format!(", \"late\": {}", task * rollout) } else { String::new() };
            let own = if agent == "a" { format!(", \"only_a\": {}", task % 5) } else { String::new() };
            let names = format!("\"agent_ref\": {{\"name\": \"{agent}\"}}");
            inputs.push_str(&format!("{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, {names}}}\n"));
            text.push_str(&format!(
                "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, {names}, \"reward\": {reward}, \"turns\": {}{late}{own}, \"response\": {{}}}}\n",
                rollout + 1
            ));
        }
    }
    let inp = d.write("inputs.jsonl", &inputs);
    let f = d.write("all.jsonl", &text);
    let ints_dir = d.join("ints");
    std::fs::create_dir_all(&ints_dir).unwrap();
    let ints_only = ints_dir.join("all.jsonl");
    std::fs::write(&ints_only, text.replace("\"reward\": 0.5", "\"reward\": 1")).unwrap();
    for (i, file) in [&f, &ints_only].into_iter().enumerate() {
        let want = d.join(&format!("want{i}"));
        ok(&["profile", "--rollouts", s(file), "--inputs", s(&inp), "--out-dir", s(&want), "-q"]);
        let slices = shard_and_join(&d, std::slice::from_ref(file), 5, &format!("late{i}"));
        for mode in MODES {
            let got = d.join(&format!("got{i}-{mode:?}"));
            let mut args = vec!["--name", "all.jsonl", "--inputs", s(&inp), "--out-dir", s(&got), "-q"];
            args.extend(slices.iter().map(|p| s(p)));
            assert_eq!(merge_profile(&args, mode), mode != Some("--whole-table"));
            for name in PROFILE_FILES {
                assert!(bytes(&got.join(name)) == bytes(&want.join(name)), "{name}, file {i}, {mode:?}");
            }
        }
    }
}

/// An inputs file whose last line is cut off mid-write: the merges print its warning
/// where the single-machine commands do (before a refusal that comes after the run
/// checks), from the file or from its input slices, in every mode.
#[test]
fn a_cut_off_inputs_line_warns_as_on_one_machine() {
    let d = TempDir::new("dist-cutoff");
    let row = |task: i64, rollout: i64| {
        format!("{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, \"agent_ref\": {{\"name\": \"a\"}}, \"reward\": {}, \"response\": {{}}}}\n", (task + rollout) % 2)
    };
    let input = |task: i64, rollout: i64| {
        format!(
            "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, \"agent_ref\": {{\"name\": \"a\"}}}}\n"
        )
    };
    let mut inputs: String = (0..10).flat_map(|t| [input(t, 0), input(t, 1)]).collect();
    inputs.push_str("{\"_ng_task_index\": 10, \"_ng_rollout_in");
    let inp = d.write("inputs.jsonl", &inputs);
    let islices = shard_inputs(&d, &inp, 2, 3, "i", true);
    let complete: String = (0..10).flat_map(|t| [row(t, 0), row(t, 1)]).collect();
    for (name, rows) in [("ok", complete.clone()), ("missing", complete.replace(&row(4, 1), ""))] {
        let f = d.write(&format!("{name}.jsonl"), &rows);
        let slices = shard_and_join(&d, std::slice::from_ref(&f), 4, name);
        let single = run(&[
            "profile",
            "--rollouts",
            s(&f),
            "--inputs",
            s(&inp),
            "--out-dir",
            s(&d.join(&format!("{name}-p"))),
            "-q",
        ]);
        let single_agg =
            run(&["aggregate", s(&f), "--inputs", s(&inp), "--out", s(&d.join(&format!("{name}-a.json"))), "-q"]);
        assert!(stderr(&single).contains("cut off"), "{}", stderr(&single));
        for mode in MODES {
            for sliced in [false, true] {
                let inputs_args: Vec<&str> =
                    if sliced { islices.iter().map(|p| s(p)).collect() } else { vec!["--inputs", s(&inp)] };
                let out = d.join(&format!("{name}-{mode:?}-{sliced}"));
                let mut args = vec!["merge", "profile", "--name", "x.jsonl", "--out-dir", s(&out), "-q"];
                args.extend(&inputs_args);
                args.extend(slices.iter().map(|p| s(p)));
                args.extend(mode);
                let o = run(&args);
                assert_eq!(o.status.code(), single.status.code(), "{name} {mode:?} {sliced}: {}", stderr(&o));
                assert_eq!(stderr(&o), stderr(&single), "{name}, profile, {mode:?}, input slices {sliced}");
                let out = d.join(&format!("{name}-{mode:?}-{sliced}.json"));
                let mut args = vec!["merge", "aggregate", "--out", s(&out), "-q"];
                args.extend(&inputs_args);
                args.extend(slices.iter().map(|p| s(p)));
                args.extend(mode);
                let o = run(&args);
                assert_eq!(o.status.code(), single_agg.status.code(), "{name} {mode:?} {sliced}: {}", stderr(&o));
                assert_eq!(stderr(&o), stderr(&single_agg), "{name}, aggregate, {mode:?}, input slices {sliced}");
            }
        }
    }
    // Only input slices: nothing to merge.
    let out = d.join("only.json");
    let mut args = vec!["merge", "aggregate", "--out", s(&out)];
    args.extend(islices.iter().map(|p| s(p)));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("give the rollouts' slices too"), "{}", stderr(&o));
    // The inputs file grew since it was sharded: profile's samples would be wrong bytes.
    let f = d.join("ok.jsonl");
    let slices = shard_and_join(&d, std::slice::from_ref(&f), 4, "grown");
    std::fs::write(&inp, format!("{inputs}\n")).unwrap();
    let out = d.join("grown");
    let mut args = vec!["merge", "profile", "--out-dir", s(&out)];
    args.extend(islices.iter().chain(&slices).map(|p| s(p)));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("changed since"), "{}", stderr(&o));
    assert!(!out.exists());
}

/// Negative task indexes (buckets below zero, `⌊task / width⌋` rounding down), inputs
/// shuffled and sharded with another width than the rollouts: every mode of both merges
/// gives the single-machine bytes, bucket by bucket.
#[test]
fn negative_tasks_merge_bucket_by_bucket_with_input_slices() {
    let d = TempDir::new("dist-negative");
    let mut rng = Rng(0x7F4A_7C15_9E37_79B9);
    let (mut rows, mut inputs) = (String::new(), Vec::new());
    for task in -7..8i64 {
        for rollout in 0..3 {
            let agent = if rollout < 2 { "a" } else { "b" };
            inputs.push(format!("{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, \"agent_ref\": {{\"name\": \"{agent}\"}}}}\n"));
            if [-6, 0, 7].contains(&task) && rollout == 1 {
                continue;
            }
            let reward = rng.pick(1000) as f64 / 1000.0;
            rows.push_str(&format!(
                "{{\"_ng_task_index\": {task}, \"_ng_rollout_index\": {rollout}, \"agent_ref\": {{\"name\": \"{agent}\"}}, \"reward\": {reward}, \"response\": {{}}}}\n"
            ));
        }
    }
    for i in (1..inputs.len()).rev() {
        inputs.swap(i, rng.pick(i + 1));
    }
    let f = d.write("all.jsonl", &rows);
    let inp = d.write("inputs.jsonl", &inputs.concat());
    let want = d.join("want.json");
    ok(&["aggregate", s(&f), "--inputs", s(&inp), "--out", s(&want), "-q"]);
    let want_prof = d.join("want-prof");
    ok(&["profile", "--rollouts", s(&f), "--inputs", s(&inp), "--out-dir", s(&want_prof), "--allow-partial", "-q"]);
    let slices = shard_and_join(&d, std::slice::from_ref(&f), 4, "r");
    let islices = shard_inputs(&d, &inp, 2, 3, "i", false);
    for mode in MODES {
        let got = d.join(&format!("got-{mode:?}.json"));
        let mut args = vec!["--out", s(&got), "-q"];
        args.extend(slices.iter().chain(&islices).map(|p| s(p)));
        assert_eq!(merge_aggregate(&args, mode), mode != Some("--whole-table"));
        assert!(bytes(&got) == bytes(&want), "aggregate, {mode:?}");
        let got = d.join(&format!("got-prof-{mode:?}"));
        let mut args = vec!["--name", "all.jsonl", "--out-dir", s(&got), "--allow-partial", "-q"];
        args.extend(slices.iter().chain(&islices).map(|p| s(p)));
        assert_eq!(merge_profile(&args, mode), mode != Some("--whole-table"));
        for name in PROFILE_FILES {
            assert!(bytes(&got.join(name)) == bytes(&want_prof.join(name)), "{name}, {mode:?}");
        }
    }
}

/// Columns long enough that whole nodes of numpy's tree lie inside buckets, leaf blocks
/// straddle bucket edges, and the first selection pass counts instead of keeping:
/// the rounds of shares give the single machine's bytes, and refuse what does not fit.
#[test]
fn rounds_of_shares_give_the_single_machine_bytes_and_refuse_what_does_not_fit() {
    let d = TempDir::new("rounds");
    let g = d.join("gen");
    generate(
        &g,
        &[
            "--tasks",
            "2600",
            "--repeats",
            "3",
            "--agents",
            "2",
            "--seed",
            "21",
            "--missing-frac",
            "0.1",
            "--masked-frac",
            "0.02",
        ],
    );
    let mut rng = Rng(0x51_7CC1_B727_220A);
    let (parts, all) = cut_shuffled(&d, &g.join("rollouts.jsonl"), 3, "part", &mut rng);
    let want = d.join("want.json");
    ok(&["aggregate", s(&all), "--out", s(&want), "-q"]);
    let slices = shard_and_join(&d, &parts, 37, "w37");
    let (plan, n) = rounds(&d, &slices, &[], "long", &mut rng);
    assert!(n >= 3, "counting, sums and deviations take a round each ({n})");
    assert!(merge_with_plan(&d, &slices, &[], &plan, "long") == bytes(&want));

    let refused = |args: &[&str], out: &Path, what: &str| -> String {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{what}: {}", stderr(&o));
        assert!(!out.exists(), "{what}: no output");
        stderr(&o)
    };
    // The merge with a plan of other slices (one bucket left out of the rounds).
    let (short, _) = rounds(&d, &slices[1..], &[], "short", &mut rng);
    let out = d.join("x.json");
    let mut args = vec!["merge", "aggregate", "--plan", s(&short), "--out", s(&out)];
    args.extend(slices.iter().map(|p| s(p)));
    assert!(refused(&args, &out, "plan of other slices").contains("other rows"));
    // A plan not finished.
    let counted = d.join("long-plan0");
    args[3] = s(&counted);
    assert!(refused(&args, &out, "unfinished plan").contains("not finished"));
    // A summing round that leaves out a bucket's share.
    let mut shares = Vec::new();
    for (k, sl) in slices.iter().enumerate().skip(1) {
        let o = d.join(&format!("miss-{k}.share"));
        ok(&["merge", "aggregate", "--plan", s(&counted), "--share-out", s(&o), s(sl), "-q"]);
        shares.push(o);
    }
    let next = d.join("miss-plan");
    let mut cargs = vec!["merge", "combine", "--plan", s(&counted), "--out", s(&next)];
    cargs.extend(shares.iter().map(|p| s(p)));
    assert!(refused(&cargs, &next, "a share missing").contains("do not hold the rows"));
    // Shares out of bucket order, and a share of the wrong round.
    let first = d.join("first.share");
    ok(&["merge", "aggregate", "--plan", s(&counted), "--share-out", s(&first), s(&slices[0]), "-q"]);
    let mut cargs = vec!["merge", "combine", "--plan", s(&counted), "--out", s(&next), s(&shares[0]), s(&first)];
    assert!(refused(&cargs, &next, "out of order").contains("bucket order"));
    cargs[3] = s(&plan);
    assert!(refused(&cargs, &next, "finished plan").contains("finished"));
    let zero = d.join("zero.share");
    ok(&["merge", "aggregate", "--share-out", s(&zero), s(&slices[0]), "-q"]);
    let cargs = vec!["merge", "combine", "--plan", s(&counted), "--out", s(&next), s(&zero)];
    assert!(refused(&cargs, &next, "wrong round").contains("round 1 where the plan is at round 2"));
    // Damaged shares and plans; a plan given as a share.
    let good = std::fs::read(&first).unwrap();
    for cut in [0, 10, 16, good.len() / 2, good.len() - 1] {
        let bad = d.join("bad.share");
        let mut b = good[..cut].to_vec();
        if cut == 16 {
            b.extend_from_slice(&[0xff; 40]);
        }
        std::fs::write(&bad, &b).unwrap();
        let cargs = vec!["merge", "combine", "--plan", s(&counted), "--out", s(&next), s(&bad)];
        let said = refused(&cargs, &next, "damaged share");
        assert!(said.contains("bad.share") && said.contains("not a rollstat level state"), "{said}");
    }
    let cargs = vec!["merge", "combine", "--plan", s(&counted), "--out", s(&next), s(&counted)];
    assert!(refused(&cargs, &next, "a plan as a share").contains("a plan where a share was expected"));
    let mut older = good.clone();
    older[15] -= 1;
    let bad = d.join("older.share");
    std::fs::write(&bad, &older).unwrap();
    let cargs = vec!["merge", "combine", "--plan", s(&counted), "--out", s(&next), s(&bad)];
    assert!(refused(&cargs, &next, "an older version").contains("written by another version of rollstat"));
    // A plan of the other command, and shares of both commands together.
    let inputs = g.join("materialized_inputs.jsonl");
    let (pplan, _) = rounds_of("profile", &d, &slices, &["--inputs", s(&inputs)], "prof", &mut rng);
    let mut args = vec!["merge", "aggregate", "--plan", s(&pplan), "--out", s(&out)];
    args.extend(slices.iter().map(|p| s(p)));
    assert!(refused(&args, &out, "profile plan").contains("a plan of `merge profile` given to `merge aggregate`"));
    let pshare = d.join("p.share");
    ok(&["merge", "profile", "--inputs", s(&inputs), "--share-out", s(&pshare), s(&slices[1]), "-q"]);
    let cargs = vec!["merge", "combine", "--out", s(&next), s(&zero), s(&pshare)];
    assert!(refused(&cargs, &next, "mixed commands").contains("a share of `merge profile` among those of"));
    // A byte of a share changed on its way (its data's checksum fails): refused.
    let mut flipped = std::fs::read(&first).unwrap();
    let at = 16 + (flipped.len() - 16) / 2;
    flipped[at] ^= 0x10;
    let bad = d.join("flipped.share");
    std::fs::write(&bad, &flipped).unwrap();
    let cargs = vec!["merge", "combine", "--plan", s(&counted), "--out", s(&next), s(&bad)];
    assert!(refused(&cargs, &next, "flipped byte").contains("does not decompress"));
    // Seeded damage inside the compressed data of a share and of a plan: each is refused
    // (exit status 2) or read, never a crash.
    let mut seed = Rng(0x0DA3_A6E5);
    for (kind, good, as_share) in [("share", &first, true), ("plan", &counted, false)] {
        let raw = std::fs::read(good).unwrap();
        let data = zstd::decode_all(&raw[16..]).unwrap();
        for k in 0..150 {
            let mut v = data.clone();
            match seed.pick(3) {
                0 => v.truncate(seed.pick(v.len())),
                1 => {
                    for _ in 0..1 + seed.pick(4) {
                        let at = seed.pick(v.len());
                        v[at] ^= 1 << seed.pick(8);
                    }
                }
                _ => {
                    let at = seed.pick(v.len());
                    v[at..].iter_mut().take(8).for_each(|b| *b = 0xff);
                }
            }
            let mut bytes = raw[..16].to_vec();
            bytes.extend(zstd::encode_all(&v[..], 1).unwrap());
            let bad = d.join(&format!("dmg.{kind}"));
            std::fs::write(&bad, &bytes).unwrap();
            let _ = std::fs::remove_file(&next);
            let o = if as_share {
                run(&["merge", "combine", "--plan", s(&counted), "--out", s(&next), s(&bad), "-q"])
            } else {
                run(&["merge", "aggregate", "--plan", s(&bad), "--share-out", s(&next), s(&slices[0]), "-q"])
            };
            let code = o.status.code();
            assert!(code == Some(0) || code == Some(2), "{kind} damage {k}: {code:?} {}", stderr(&o));
            if code == Some(2) {
                assert!(!next.exists(), "{kind} damage {k}: no output");
            }
        }
    }
    // Shares are of the bucket-by-bucket merge: not with --whole-table; and a share task
    // does not merge, so it takes no --out (or --out-dir).
    let out = d.join("merged.json");
    let pout = d.join("merged");
    for extra in [vec!["merge", "aggregate", "--whole-table"], vec!["merge", "aggregate", "--out", s(&out)]]
        .into_iter()
        .chain([vec!["merge", "profile", "--inputs", s(&inputs), "--out-dir", s(&pout)]])
    {
        let o = run(&[extra.as_slice(), &["--share-out", s(&next), s(&slices[0])]].concat());
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(!next.exists() && !out.exists() && !pout.exists(), "{extra:?}");
    }
}

/// A sweep scored again (the same rollouts, rows and fields; other values): its plan,
/// and shares are refused with the first sweep's slices, since the merge
/// checks what its own counting finds against what the plan counted.
#[test]
fn plans_and_shares_of_other_values_are_refused() {
    let d = TempDir::new("rescored");
    let mut rng = Rng(0x2B99_2DDF_A232_49D6);
    let mut sweeps = Vec::new();
    for seed in ["3", "4"] {
        let g = d.join(&format!("gen{seed}"));
        generate(&g, &["--tasks", "300", "--repeats", "2", "--agents", "1", "--seed", seed, "--text-bytes", "10"]);
        let slices = shard_and_join(&d, &[g.join("rollouts.jsonl")], 40, &format!("s{seed}"));
        let (plan, _) = rounds(&d, &slices, &[], &format!("r{seed}"), &mut rng);
        sweeps.push((slices, plan));
    }
    let (a, b) = (&sweeps[0], &sweeps[1]);
    assert_eq!(a.0.len(), b.0.len(), "the same buckets");
    let out = d.join("x.json");
    let mut args = vec!["merge", "aggregate", "--plan", s(&b.1), "--out", s(&out)];
    args.extend(a.0.iter().map(|p| s(p)));
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("counts other rows or fields"), "{}", stderr(&o));
    assert!(!out.exists());
    // A share of the other sweep's summing round, given with this sweep's counting plan.
    let counted = d.join("r3-plan0");
    let other = d.join("other.share");
    let b_counted = d.join("r4-plan0");
    ok(&["merge", "aggregate", "--plan", s(&b_counted), "--share-out", s(&other), s(&b.0[0]), "-q"]);
    let next = d.join("next");
    let o = run(&["merge", "combine", "--plan", s(&counted), "--out", s(&next), s(&other)]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("written with another plan"), "{}", stderr(&o));
    assert!(!next.exists());
}
