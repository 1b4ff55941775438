//! `select`: the written lines are exactly the input lines of the tasks a reference
//! computed here from the JSONL files selects (not the engine's tables); a shuffled
//! inputs file selects the same tasks; quotas; seeded sampling (reproducible, and
//! inclusion frequencies that follow the weights by a chi-square test); the
//! zero-variance rule against an independent count of VAGEN's zero-std groups; bad
//! predicates; empty selections; several runs; `--strip-ng` with a compressed output;
//! a sweep of a lake selects what its files select, refused when a file changed; a
//! predicate over other sweeps of the lake.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use crate::common::*;
use rollstat::json::{parse, Json};

/// A generated sweep in a fresh folder: (folder, rollouts, inputs).
fn sweep(extra: &[&str]) -> (TempDir, PathBuf, PathBuf) {
    let d = TempDir::new("select");
    let mut args = vec!["--text-bytes", "40"];
    args.extend_from_slice(extra);
    generate(d.path(), &args);
    let (r, i) = (d.join("rollouts.jsonl"), d.join("materialized_inputs.jsonl"));
    (d, r, i)
}

/// Runs `select` over `rollouts` and `inputs` with `args`, writing `out`; asserts success
/// and returns stderr.
fn select(rollouts: &Path, inputs: &Path, out: &Path, args: &[&str]) -> String {
    stderr(&select_cmd(rollouts, inputs, out, args).ok())
}

/// The `select` command line over these files, not yet run.
fn select_cmd(rollouts: &Path, inputs: &Path, out: &Path, args: &[&str]) -> TestCommand {
    rollstat().args(["select", "--rollouts"]).arg(rollouts).arg("--inputs").arg(inputs).arg("--out").arg(out).args(args)
}

fn int(v: &Json, key: &str) -> i64 {
    match v.get(key) {
        Some(Json::Int(i)) => *i,
        other => panic!("{key}: {other:?}"),
    }
}

/// Per task (of the agent `agent`, or any): its measured rewards (`mask_sample` not true,
/// `reward` not null), read from the rollouts JSONL.
fn measured(rollouts: &Path, agent: Option<&str>) -> BTreeMap<i64, Vec<f64>> {
    let mut out: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for v in read_jsonl(rollouts) {
        let name = v.get("agent_ref").and_then(|a| a.get("name")).and_then(|n| n.as_str().map(str::to_string));
        if agent.is_some_and(|a| name.as_deref() != Some(a)) {
            continue;
        }
        let task = int(&v, "_ng_task_index");
        let rewards = out.entry(task).or_default();
        if matches!(v.get("mask_sample"), Some(Json::Bool(true))) {
            continue;
        }
        if let Some(r) = v.get("reward").and_then(Json::as_f64) {
            rewards.push(r);
        }
    }
    out
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The inputs file's lines (without newlines), each with its task index and agent name.
fn input_lines(inputs: &Path) -> Vec<(String, i64, Option<String>)> {
    let text = std::fs::read_to_string(inputs).unwrap();
    text.lines()
        .map(|l| {
            let v = parse(l.as_bytes()).unwrap();
            let agent = v.get("agent_ref").and_then(|a| a.get("name")).and_then(|n| n.as_str().map(str::to_string));
            (l.to_string(), int(&v, "_ng_task_index"), agent)
        })
        .collect()
}

/// The first input line of each of `tasks` (of `agent`, or any), in file order, joined
/// with newlines: what `select` must write.
fn expected(inputs: &Path, tasks: &BTreeSet<i64>, agent: Option<&str>) -> String {
    let mut seen = BTreeSet::new();
    let mut out = String::new();
    for (line, task, name) in input_lines(inputs) {
        if agent.is_some_and(|a| name.as_deref() != Some(a)) {
            continue;
        }
        if tasks.contains(&task) && seen.insert(task) {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// The task indexes of written lines.
fn tasks_of(out: &Path) -> Vec<i64> {
    read_jsonl(out).iter().map(|v| int(v, "_ng_task_index")).collect()
}

/// The `_ng_task_index` of each line with a named top-level string field.
fn field_of(inputs: &Path, field: &str) -> HashMap<i64, String> {
    read_jsonl(inputs)
        .iter()
        .map(|v| (int(v, "_ng_task_index"), v.get(field).and_then(|s| s.as_str().map(str::to_string)).unwrap()))
        .collect()
}

#[test]
fn band_writes_exactly_the_input_lines_of_the_tasks_in_the_band() {
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "60", "--repeats", "4", "--reward", "binary", "--seed", "3"]);
    let out = d.join("next.jsonl");
    select(&r, &i, &out, &["--band", "0.25..0.75"]);
    let want: BTreeSet<i64> = measured(&r, None)
        .into_iter()
        .filter(|(_, v)| mean(v).is_some_and(|m| (0.25..=0.75).contains(&m)))
        .map(|(t, _)| t)
        .collect();
    assert!(!want.is_empty() && want.len() < 60, "a band that selects some tasks: {}", want.len());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected(&i, &want, None));
    let m = read_json(&d.join("next.jsonl.manifest.json"));
    let counts = m.get("counts").unwrap();
    assert_eq!(int(counts, "selected"), want.len() as i64);
    assert_eq!(int(counts, "tasks"), 60);
    let sources = match m.get("sources") {
        Some(Json::Arr(s)) => s.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(sources.len(), 2);
    assert_eq!(int(&sources[1], "bytes"), std::fs::metadata(&i).unwrap().len() as i64);
    let sum = sources[1].get("xxh3_128").and_then(|s| s.as_str().map(str::to_string)).unwrap();
    assert_eq!(sum.len(), 32);
    assert!(m.get("rollstat_version").is_some());
}

#[test]
fn a_shuffled_inputs_file_selects_the_same_tasks() {
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "50", "--repeats", "3", "--seed", "5"]);
    let (_, shuffled) = cut_shuffled(&d, &i, 1, "part", &mut Rng(11));
    let pred = ["--where", "\"mean/reward\" >= 0.3 AND subset <> 'easy'"];
    let (a, b) = (d.join("a.jsonl"), d.join("b.jsonl"));
    select(&r, &i, &a, &pred);
    select(&r, &shuffled, &b, &pred);
    let subset = field_of(&i, "subset");
    let want: BTreeSet<i64> = measured(&r, None)
        .into_iter()
        .filter(|(t, v)| mean(v).is_some_and(|m| m >= 0.3) && subset[t] != "easy")
        .map(|(t, _)| t)
        .collect();
    assert!(!want.is_empty());
    assert_eq!(std::fs::read_to_string(&a).unwrap(), expected(&i, &want, None));
    // The shuffled file's own first line of each task, in its order.
    assert_eq!(std::fs::read_to_string(&b).unwrap(), expected(&shuffled, &want, None));
    let got: BTreeSet<i64> = tasks_of(&b).into_iter().collect();
    assert_eq!(got, want);
}

#[test]
fn per_max_quotas_hold() {
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "80", "--repeats", "2", "--seed", "2"]);
    let out = d.join("q.jsonl");
    select(&r, &i, &out, &["--per", "subset", "--max", "4"]);
    let subset = field_of(&i, "subset");
    let mut before: BTreeMap<&str, usize> = BTreeMap::new();
    for s in subset.values() {
        *before.entry(s).or_default() += 1;
    }
    let mut after: BTreeMap<&str, usize> = BTreeMap::new();
    for t in tasks_of(&out) {
        *after.entry(subset[&t].as_str()).or_default() += 1;
    }
    assert!(before.len() > 1, "{before:?}");
    for (g, n) in &before {
        assert_eq!(after.get(g).copied().unwrap_or(0), (*n).min(4), "group {g}");
    }
    // Without sampling the first tasks in the file's order fill each quota.
    let mut taken: BTreeMap<&str, usize> = BTreeMap::new();
    let mut want = BTreeSet::new();
    for (_, t, _) in input_lines(&i) {
        let k = taken.entry(subset[&t].as_str()).or_default();
        if *k < 4 && !want.contains(&t) {
            *k += 1;
            want.insert(t);
        }
    }
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected(&i, &want, None));
    let m = read_json(&d.join("q.jsonl.manifest.json"));
    let Some(Json::Arr(groups)) = m.get("groups") else { panic!("no groups: {m:?}") };
    for g in groups {
        let name = g.get("value").and_then(|v| v.as_str().map(str::to_string)).unwrap();
        assert_eq!(int(g, "before") as usize, before[name.as_str()]);
        assert_eq!(int(g, "after") as usize, after[name.as_str()]);
    }
    // Sampled quotas hold too.
    let s = d.join("qs.jsonl");
    select(&r, &i, &s, &["--per", "subset", "--max", "3", "--seed", "9"]);
    let mut after: BTreeMap<&str, usize> = BTreeMap::new();
    for t in tasks_of(&s) {
        *after.entry(subset[&t].as_str()).or_default() += 1;
    }
    for (g, n) in &before {
        assert_eq!(after.get(g).copied().unwrap_or(0), (*n).min(3), "group {g}");
    }
}

#[test]
fn seeded_sampling_is_reproducible() {
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "60", "--repeats", "2", "--seed", "4"]);
    let w = ["--weight", "\"mean/reward\" * (1 - \"mean/reward\") + 0.05"];
    let run = |name: &str, seed: &str| {
        let out = d.join(name);
        let mut args = vec!["--sample", "12", "--seed", seed];
        args.extend_from_slice(&w);
        select(&r, &i, &out, &args);
        std::fs::read(&out).unwrap()
    };
    let (a, b, c) = (run("a.jsonl", "7"), run("b.jsonl", "7"), run("c.jsonl", "8"));
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(tasks_of(&d.join("a.jsonl")).len(), 12);
    let fr = d.join("f.jsonl");
    select(&r, &i, &fr, &["--sample", "0.25", "--seed", "1"]);
    assert_eq!(tasks_of(&fr).len(), 15);
    let m = read_json(&d.join("a.jsonl.manifest.json"));
    assert_eq!(int(m.get("flags").unwrap(), "seed"), 7);
}

/// One draw (`--sample 1`) over five tasks weighted 1, 2, 3, 4 and 0, with seeds 0..N:
/// each task's count against N·w/Σw by Pearson's chi-square, 3 degrees of freedom,
/// significance 0.001 (critical value 16.27). The seeds are fixed, so the test is too.
#[test]
fn inclusion_frequencies_follow_the_weights() {
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "5", "--repeats", "2", "--seed", "6"]);
    let weight = "CASE WHEN _ng_task_index = 4 THEN 0 ELSE _ng_task_index + 1 END";
    const N: usize = 200;
    let counts = std::sync::Mutex::new([0usize; 5]);
    std::thread::scope(|s| {
        for k in 0..4 {
            let (d, r, i, counts) = (&d, &r, &i, &counts);
            s.spawn(move || {
                for seed in (k..N).step_by(4) {
                    let out = d.join(&format!("s{seed}.jsonl"));
                    select(r, i, &out, &["--sample", "1", "--weight", weight, "--seed", &seed.to_string()]);
                    let t = tasks_of(&out);
                    assert_eq!(t.len(), 1);
                    counts.lock().unwrap()[t[0] as usize] += 1;
                }
            });
        }
    });
    let counts = counts.into_inner().unwrap();
    assert_eq!(counts[4], 0, "a task of weight 0 is never drawn: {counts:?}");
    let chi2: f64 = (0..4)
        .map(|t| {
            let e = N as f64 * (t + 1) as f64 / 10.0;
            (counts[t] as f64 - e).powi(2) / e
        })
        .sum();
    assert!(chi2 < 16.27, "chi-square {chi2:.2} over {counts:?}");
}

#[test]
fn drop_zero_variance_agrees_with_an_independent_count_of_zero_std_groups() {
    let (d, r, i) = sweep(&[
        "--agents",
        "1",
        "--tasks",
        "80",
        "--repeats",
        "3",
        "--reward",
        "binary",
        "--masked-frac",
        "0.2",
        "--seed",
        "8",
    ]);
    let out = d.join("z.jsonl");
    select(&r, &i, &out, &["--drop-zero-variance"]);
    let per_task = measured(&r, None);
    // VAGEN's frac_reward_zero_std groups: measured rewards, max = min (one included).
    let zero: BTreeSet<i64> = per_task
        .iter()
        .filter(|(_, v)| {
            !v.is_empty() && v.iter().cloned().fold(f64::MIN, f64::max) == v.iter().cloned().fold(f64::MAX, f64::min)
        })
        .map(|(t, _)| *t)
        .collect();
    let none: BTreeSet<i64> = per_task.iter().filter(|(_, v)| v.is_empty()).map(|(t, _)| *t).collect();
    let kept: BTreeSet<i64> = per_task.keys().filter(|t| !zero.contains(t) && !none.contains(t)).copied().collect();
    assert!(!zero.is_empty() && !kept.is_empty());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected(&i, &kept, None));
}

#[test]
fn a_bad_predicate_is_exit_2_with_the_sql_message_and_writes_nothing() {
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "10"]);
    let out = d.join("bad.jsonl");
    let o = select_cmd(&r, &i, &out, &["--where", "no_such_column > 1"]).fails(2);
    let e = stderr(&o);
    assert!(e.contains("query failed") && e.contains("no_such_column"), "{e}");
    assert!(!out.exists() && !d.join("bad.jsonl.manifest.json").exists());
    let o = select_cmd(&r, &i, &out, &["--band", "0.9..0.1"]).fails(2);
    assert!(stderr(&o).contains("LO..HI"), "{}", stderr(&o));
}

#[test]
fn an_empty_selection_writes_an_empty_file_and_a_warning() {
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "10"]);
    let out = d.join("none.jsonl");
    let e = select(&r, &i, &out, &["--band", "2..3"]);
    assert!(e.contains("warning: no task was selected"), "{e}");
    assert_eq!(std::fs::read(&out).unwrap(), b"");
    let m = read_json(&d.join("none.jsonl.manifest.json"));
    assert_eq!(int(m.get("counts").unwrap(), "selected"), 0);
}

#[test]
fn several_runs_are_told_apart_with_run() {
    let (d, r, i) = sweep(&["--agents", "2", "--tasks", "12", "--repeats", "3", "--fan-out", "--seed", "3"]);
    let out = d.join("run.jsonl");
    let o = select_cmd(&r, &i, &out, &[]).fails(2);
    assert!(stderr(&o).contains("--run"), "{}", stderr(&o));
    let agent = "code_gen_simple_agent";
    select(&r, &i, &out, &["--run", agent, "--where", "\"mean/reward\" > 0.2"]);
    let want: BTreeSet<i64> = measured(&r, Some(agent))
        .into_iter()
        .filter(|(_, v)| mean(v).is_some_and(|m| m > 0.2))
        .map(|(t, _)| t)
        .collect();
    assert!(!want.is_empty());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected(&i, &want, Some(agent)));
}

#[test]
fn strip_ng_drops_only_the_bookkeeping_keys_and_gzip_goes_by_the_name() {
    use std::io::Read;
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "20", "--repeats", "2"]);
    let out = d.join("rows.jsonl.gz");
    select(&r, &i, &out, &["--strip-ng"]);
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&out).unwrap()).read_to_string(&mut text).unwrap();
    let all: BTreeSet<i64> = (0..20).collect();
    let want: String = expected(&i, &all, None)
        .lines()
        .map(|l| {
            let cut = l.find(",\"_ng_task_index\"").expect("generated rows end with the _ng keys");
            format!("{}}}\n", &l[..cut])
        })
        .collect();
    assert_eq!(text, want);
    let pq = d.join("rows.parquet");
    select(&r, &i, &pq, &["--format", "parquet", "--band", "0..1"]);
    assert_eq!(&std::fs::read(&pq).unwrap()[..4], b"PAR1");
}

/// The `select` command line over sweep `id` of `lake`, not yet run.
fn select_sweep(lake: &Path, id: &str, out: &Path, args: &[&str]) -> TestCommand {
    rollstat().args(["select", "--lake"]).arg(lake).args(["--sweep", id, "--out"]).arg(out).args(args)
}

#[test]
fn a_sweep_in_a_lake_selects_what_its_files_select() {
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "40", "--repeats", "3", "--seed", "12"]);
    let lake = d.join("lake");
    add_to_lake(d.path(), &lake, &["--sweep-id", "w1"]);
    let args = ["--band", "0.2..0.8", "--per", "subset", "--max", "5"];
    let (a, b) = (d.join("files.jsonl"), d.join("lake.jsonl"));
    select(&r, &i, &a, &args);
    stderr(&select_sweep(&lake, "w1", &b, &args).ok());
    let got = std::fs::read(&b).unwrap();
    assert!(!got.is_empty());
    assert_eq!(got, std::fs::read(&a).unwrap());
    let (ma, mb) = (read_json(&d.join("files.jsonl.manifest.json")), read_json(&d.join("lake.jsonl.manifest.json")));
    assert_eq!(ma.get("sources"), mb.get("sources"));
    assert_eq!(ma.get("counts"), mb.get("counts"));
    let flags = mb.get("flags").unwrap();
    assert_eq!(flags.get("sweep").and_then(|s| s.as_str().map(str::to_string)).as_deref(), Some("w1"));

    // An unknown sweep is refused, naming the lake's sweeps.
    let out = d.join("none.jsonl");
    let e = stderr(&select_sweep(&lake, "w9", &out, &[]).fails(2));
    assert!(e.contains("w9") && e.contains("its sweeps are: w1"), "{e}");
    assert!(!out.exists());
}

#[test]
fn a_changed_or_missing_source_of_a_sweep_is_refused() {
    let (d, r, i) = sweep(&["--agents", "1", "--tasks", "20", "--repeats", "2", "--seed", "13"]);
    let lake = d.join("lake");
    add_to_lake(d.path(), &lake, &["--sweep-id", "w1"]);
    let out = d.join("next.jsonl");
    let refused = |why: &str, file: &Path| {
        let e = stderr(&select_sweep(&lake, "w1", &out, &[]).fails(2));
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(e.contains(name) && e.contains(why), "{e}");
        assert!(!out.exists() && !d.join("next.jsonl.manifest.json").exists());
    };
    // The same size, one byte changed: found by the checksum.
    let text = std::fs::read(&i).unwrap();
    let mut changed = text.clone();
    let at = changed.iter().position(|&b| b == b'1').unwrap();
    changed[at] = b'2';
    std::fs::write(&i, &changed).unwrap();
    refused("same size, XXH3-128", &i);
    // Longer: found by the size.
    let mut longer = text.clone();
    longer.extend_from_slice(&text[..text.iter().position(|&b| b == b'\n').unwrap() + 1]);
    std::fs::write(&i, &longer).unwrap();
    refused(&format!("{} bytes; the lake recorded {}", longer.len(), text.len()), &i);
    std::fs::write(&i, &text).unwrap();
    select_sweep(&lake, "w1", &out, &[]).ok();
    std::fs::remove_file(&out).unwrap();
    std::fs::remove_file(d.join("next.jsonl.manifest.json")).unwrap();
    std::fs::remove_file(&r).unwrap();
    refused("missing", &r);
}

#[test]
fn a_predicate_over_other_sweeps_selects_tasks_unsolved_in_each_of_the_last_three() {
    let d = TempDir::new("select-lake");
    let lake = d.join("lake");
    let mut runs = Vec::new();
    for k in 1..=4 {
        let dir = d.join(&format!("run{k}"));
        let seed = (20 + k).to_string();
        let args = ["--agents", "1", "--tasks", "60", "--repeats", "2", "--reward", "binary", "--text-bytes", "40"];
        generate(&dir, &[&args[..], &["--seed", &seed, "--task-seed", "5"]].concat());
        add_to_lake(&dir, &lake, &["--sweep-id", &format!("w{k}")]);
        runs.push(dir);
    }
    let pred = "task_fingerprint IN (SELECT task_fingerprint FROM lake_tasks WHERE sweeps_back BETWEEN 0 AND 2 \
                GROUP BY task_fingerprint HAVING MAX(\"mean/reward\") < 0.5 AND COUNT(*) = 3)";
    // Unsolved (mean reward below 0.5) in each of runs 2, 3 and 4, from the JSONL files;
    // one task seed: task i asks the same question in every run.
    let means: Vec<BTreeMap<i64, Vec<f64>>> = runs.iter().map(|r| measured(&r.join("rollouts.jsonl"), None)).collect();
    let want: BTreeSet<i64> = means[3]
        .keys()
        .filter(|t| means[1..].iter().all(|m| m.get(t).and_then(|v| mean(v)).is_some_and(|x| x < 0.5)))
        .copied()
        .collect();
    let with_first: BTreeSet<i64> =
        want.iter().filter(|t| mean(&means[0][t]).is_some_and(|x| x < 0.5)).copied().collect();
    assert!(!want.is_empty() && want.len() < 60 && with_first != want, "{want:?}");
    let inputs = runs[3].join("materialized_inputs.jsonl");
    let out = d.join("hard.jsonl");
    stderr(&select_sweep(&lake, "w4", &out, &["--where", pred]).ok());
    assert_eq!(std::fs::read_to_string(&out).unwrap(), expected(&inputs, &want, None));
    // From the files with the lake beside them: the last three sweeps are the newest three.
    let files = d.join("files.jsonl");
    rollstat()
        .args(["select", "--rollouts"])
        .arg(runs[3].join("rollouts.jsonl"))
        .arg("--inputs")
        .arg(&inputs)
        .arg("--lake")
        .arg(&lake)
        .args(["--where", pred, "--out"])
        .arg(&files)
        .ok();
    assert_eq!(std::fs::read(&files).unwrap(), std::fs::read(&out).unwrap());
    // Selecting from sweep 3, the last three are sweeps 1 to 3.
    let want3: BTreeSet<i64> = means[2]
        .keys()
        .filter(|t| means[..3].iter().all(|m| m.get(t).and_then(|v| mean(v)).is_some_and(|x| x < 0.5)))
        .copied()
        .collect();
    let out3 = d.join("hard3.jsonl");
    stderr(&select_sweep(&lake, "w3", &out3, &["--where", pred]).ok());
    assert_eq!(
        std::fs::read_to_string(&out3).unwrap(),
        expected(&runs[2].join("materialized_inputs.jsonl"), &want3, None)
    );
}
