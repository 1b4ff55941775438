//! Every malformed input gets a one-line error naming the file, the line (and
//! key) and what was expected, exit status 2, no output files, and inputs untouched.

use crate::common::*;

const GOOD_INPUT: &str = r#"{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0}
{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 1}
"#;
const GOOD_ROLLOUTS: &str = r#"{"reward": 1.0, "agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0}
{"reward": 0.0, "agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 1}
"#;

struct Run {
    dir: TempDir,
    out: std::process::Output,
}

/// Runs profile on the given file texts in a fresh folder; checks inputs are untouched.
fn profile(inputs: &[u8], rollouts: &[u8], extra: &[&str]) -> Run {
    let dir = TempDir::new("bad");
    let i = dir.join("inputs.jsonl");
    let r = dir.join("rollouts.jsonl");
    std::fs::write(&i, inputs).unwrap();
    std::fs::write(&r, rollouts).unwrap();
    let mut args = vec!["profile", "--inputs", i.to_str().unwrap(), "--rollouts", r.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert_eq!(std::fs::read(&i).unwrap(), inputs, "inputs file modified");
    assert_eq!(std::fs::read(&r).unwrap(), rollouts, "rollouts file modified");
    Run { dir, out }
}

/// Asserts a refusal: exit 2, one error line containing every `needle`, no outputs.
fn refused(run: &Run, needles: &[&str]) {
    let err = stderr(&run.out);
    assert_eq!(run.out.status.code(), Some(2), "stderr: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("rollstat: error:")).collect();
    assert_eq!(lines.len(), 1, "one error line expected: {err}");
    for n in needles {
        assert!(lines[0].contains(n), "error should contain {n:?}: {}", lines[0]);
    }
    assert_eq!(run.dir.files(), vec!["inputs.jsonl".to_string(), "rollouts.jsonl".to_string()], "no output files");
}

#[test]
fn invalid_json_on_a_line() {
    let r = profile(
        GOOD_INPUT.as_bytes(),
        b"{\"reward\": 1.0, \"_ng_task_index\": 0, \"_ng_rollout_index\": 0}\n{\"reward\": ,}\n",
        &[],
    );
    refused(&r, &["rollouts.jsonl", "line 2", "invalid JSON"]);
}

/// Text that is not JSON inside the model payload, which no statistic reads, is refused
/// as NeMo Gym's reader refuses it: a doubled comma in an array, a raw tab in a string, a
/// bad escape, an object closed by `]`, a number too large for a double. Each in the
/// inputs file too.
#[test]
fn invalid_json_inside_a_skipped_payload() {
    for payload in [r#"[1,,2]"#, "[\"a\tb\"]", r#"["a\qb"]"#, r#"{"x": [1}]"#, "[1e400]"] {
        let bad = format!(
            "{}{{\"reward\": 0.0, \"response\": {{\"output\": {payload}}}, \"agent_ref\": {{\"name\": \"a\"}}, \"_ng_task_index\": 0, \"_ng_rollout_index\": 1}}\n",
            GOOD_ROLLOUTS.lines().next().unwrap().to_string() + "\n"
        );
        let r = profile(GOOD_INPUT.as_bytes(), bad.as_bytes(), &[]);
        refused(&r, &["rollouts.jsonl", "line 2", "key `response`", "invalid JSON", "of the line"]);
        let bad_input = format!(
            "{}{{\"agent_ref\": {{\"name\": \"a\"}}, \"responses_create_params\": {{\"input\": {payload}}}, \"_ng_task_index\": 0, \"_ng_rollout_index\": 1}}\n",
            GOOD_INPUT.lines().next().unwrap().to_string() + "\n"
        );
        let r = profile(bad_input.as_bytes(), GOOD_ROLLOUTS.as_bytes(), &[]);
        refused(&r, &["inputs.jsonl", "line 2", "key `responses_create_params`", "invalid JSON", "of the line"]);
    }
}

#[test]
fn a_line_that_is_not_an_object() {
    let r = profile(b"[1, 2]\n", GOOD_ROLLOUTS.as_bytes(), &[]);
    refused(&r, &["inputs.jsonl", "line 1", "expected a JSON object"]);
}

#[test]
fn missing_task_index() {
    let r = profile(GOOD_INPUT.as_bytes(), b"{\"reward\": 1.0, \"_ng_rollout_index\": 0}\n", &[]);
    refused(&r, &["rollouts.jsonl", "line 1", "_ng_task_index", "expected an integer"]);
}

#[test]
fn non_integer_rollout_index() {
    let r = profile(
        GOOD_INPUT.as_bytes(),
        b"{\"reward\": 1.0, \"_ng_task_index\": 0, \"_ng_rollout_index\": \"1\"}\n",
        &[],
    );
    refused(&r, &["line 1", "_ng_rollout_index", "expected an integer, found a string"]);
}

#[test]
fn duplicate_keys() {
    let dup = format!("{GOOD_ROLLOUTS}{}", GOOD_ROLLOUTS.lines().next().unwrap());
    let r = profile(GOOD_INPUT.as_bytes(), format!("{dup}\n").as_bytes(), &[]);
    refused(&r, &["Duplicate result row for rollout key (0, 0)", "lines 1 and 3"]);
    // aggregate (no inputs) names the same key and lines.
    let dir = TempDir::new("bad-agg");
    dir.write("inputs.jsonl", GOOD_INPUT);
    let rp = dir.write("rollouts.jsonl", &format!("{dup}\n"));
    let out = run(&["aggregate", "--rollouts", rp.to_str().unwrap(), "--out", dir.join("agg.json").to_str().unwrap()]);
    refused(&Run { dir, out }, &["Duplicate result row for rollout key (0, 0)", "lines 1 and 3"]);
}

#[test]
fn results_without_inputs() {
    let r = profile(GOOD_INPUT.lines().next().unwrap().as_bytes(), GOOD_ROLLOUTS.as_bytes(), &["--allow-partial"]);
    refused(&r, &["no matching materialized input rows", "Found 1 extra", "(0, 1)"]);
}

#[test]
fn inputs_without_results_unless_partial() {
    let one = format!("{}\n", GOOD_ROLLOUTS.lines().next().unwrap());
    let r = profile(GOOD_INPUT.as_bytes(), one.as_bytes(), &[]);
    refused(&r, &["Missing rollout results for 1", "(0, 1)", "--allow-partial"]);
    let r = profile(GOOD_INPUT.as_bytes(), one.as_bytes(), &["--allow-partial"]);
    assert!(r.out.status.success(), "{}", stderr(&r.out));
    assert!(stdout(&r.out).contains("Reward profile completion: 1/2"));
}

#[test]
fn number_in_some_rows_string_in_others() {
    let rollouts = r#"{"reward": 1.0, "score": 2, "_ng_task_index": 0, "_ng_rollout_index": 0, "agent_ref": {"name": "a"}}
{"reward": 0.0, "score": "n/a", "_ng_task_index": 0, "_ng_rollout_index": 1, "agent_ref": {"name": "a"}}
"#;
    let r = profile(GOOD_INPUT.as_bytes(), rollouts.as_bytes(), &[]);
    assert!(r.out.status.success(), "{}", stderr(&r.out));
    let warnings: Vec<String> =
        stderr(&r.out).lines().filter(|l| l.contains("`score`")).map(|s| s.to_string()).collect();
    assert_eq!(warnings.len(), 1, "{}", stderr(&r.out));
    assert!(warnings[0].contains("string in 1 row"), "{}", warnings[0]);
    let agents = read_json(&r.dir.join("rollouts_agent_metrics.json"));
    let a = &match agents {
        rollstat::json::Json::Arr(v) => v,
        _ => panic!(),
    }[0];
    // The string row is missing: the mean of score is over one value.
    assert_eq!(a.get("mean/score"), Some(&rollstat::json::Json::Float(2.0)));
    assert_eq!(a.get("mean/reward"), Some(&rollstat::json::Json::Float(0.5)));
}

#[test]
fn empty_file() {
    let r = profile(b"", GOOD_ROLLOUTS.as_bytes(), &[]);
    refused(&r, &["inputs.jsonl", "empty"]);
}

#[test]
fn missing_file() {
    let dir = TempDir::new("missing");
    let o = run(&["aggregate", "--rollouts", dir.join("nope.jsonl").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nope.jsonl"), "{}", stderr(&o));
    assert!(dir.files().is_empty());
}

#[test]
fn cut_off_last_line_is_skipped_with_a_warning() {
    let cut = format!("{GOOD_ROLLOUTS}{{\"reward\": 1.0, \"_ng_task_index\": 1, \"_ng_ro");
    let r = profile(GOOD_INPUT.as_bytes(), cut.as_bytes(), &[]);
    assert!(r.out.status.success(), "{}", stderr(&r.out));
    assert!(stderr(&r.out).contains("line 3") && stderr(&r.out).contains("cut off"), "{}", stderr(&r.out));
    assert!(stdout(&r.out).contains("Reward profile completion: 2/2"));
}

/// A last line without a newline that is damaged, not cut short (text after its object,
/// a doubled comma), is an error like on any other line, in either file.
#[test]
fn damaged_last_line_without_newline_is_an_error() {
    let tail = r#"{"reward": 1.0, "_ng_task_index": 1, "_ng_rollout_index": 0, "agent_ref": {"name": "a"}}}"#;
    let r = profile(GOOD_INPUT.as_bytes(), format!("{GOOD_ROLLOUTS}{tail}").as_bytes(), &["--allow-partial"]);
    refused(&r, &["rollouts.jsonl", "line 3", "after the JSON value"]);
    let tail = r#"{"agent_ref": {"name": "a"},, "_ng_task_index": 0, "_ng_rollout_index": 1}"#;
    let inputs = GOOD_INPUT.lines().next().unwrap().to_string() + "\n" + tail;
    let r = profile(inputs.as_bytes(), GOOD_ROLLOUTS.as_bytes(), &[]);
    refused(&r, &["inputs.jsonl", "line 2", "invalid JSON"]);
}

/// A file whose only line is cut off holds no rows: the error says so, not "blank".
#[test]
fn a_file_whose_only_line_is_cut_off() {
    let r = profile(GOOD_INPUT.as_bytes(), br#"{"reward": 1.0, "_ng_task_index": 0, "_ng_ro"#, &["--allow-partial"]);
    refused(&r, &["rollouts.jsonl", "no rollout rows: line 1 is cut off (no newline"]);
}

/// A key that only the cut-off last line has leaves no column behind.
#[test]
fn cut_off_last_line_adds_no_field() {
    let d = TempDir::new("cut-field");
    let text = format!(
        "{GOOD_ROLLOUTS}{{\"_ng_task_index\": 5, \"_ng_rollout_index\": 0, \"only_here\": \"x\", \"reward\": 1"
    );
    let r = d.write("rollouts.jsonl", &text);
    let out = d.join("r.parquet");
    let o = run(&["ingest", r.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("cut off"), "{}", stderr(&o));
    let fields = stdout(&o).lines().find(|l| l.starts_with("Fields:")).unwrap_or_default().to_string();
    assert!(fields.contains("reward") && !fields.contains("only_here"), "{fields}");
}

#[test]
fn non_utf8_byte() {
    let text = [b"{\"name\xff\": 1, \"_ng_task_index\": 0, \"_ng_rollout_index\": 0}\n".as_slice()].concat();
    let r = profile(GOOD_INPUT.as_bytes(), &text, &[]);
    refused(&r, &["rollouts.jsonl", "line 1", "UTF-8"]);
}

#[test]
fn huge_line_is_read() {
    let big = "x".repeat(10 << 20);
    let rollouts = format!(
        "{{\"response\": {{\"output\": \"{big}\", \"usage\": {{\"output_tokens\": 7}}}}, \"reward\": 1.0, \"agent_ref\": {{\"name\": \"a\"}}, \"_ng_task_index\": 0, \"_ng_rollout_index\": 0}}\n{}\n",
        GOOD_ROLLOUTS.lines().nth(1).unwrap()
    );
    let r = profile(GOOD_INPUT.as_bytes(), rollouts.as_bytes(), &[]);
    assert!(r.out.status.success(), "{}", stderr(&r.out));
    let tasks = read_jsonl(&r.dir.join("rollouts_reward_profiling.jsonl"));
    assert_eq!(tasks[0].get("max/output_tokens"), Some(&rollstat::json::Json::Float(7.0)));
}

/// No command writes over a file it reads: rollouts, inputs, a query file, a Parquet
/// table, a SQL metric. Each attempt exits 2 naming the path and leaves every file as it was.
#[test]
fn an_output_path_that_is_an_input_is_refused() {
    let dir = TempDir::new("overwrite");
    let r = dir.write("rollouts.jsonl", GOOD_ROLLOUTS);
    let i = dir.write("inputs.jsonl", GOOD_INPUT);
    let q = dir.write("q.sql", "SELECT agent, reward FROM rollouts");
    let m = dir.join("metrics");
    std::fs::create_dir(&m).unwrap();
    let metric = m.join("best.sql");
    std::fs::write(&metric, "SELECT agent, MAX(reward) AS value FROM rollouts GROUP BY agent").unwrap();
    let t = dir.join("tables");
    let o = run(&["export", "--rollouts", r.to_str().unwrap(), "--out-dir", t.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = t.join("rollouts.parquet");
    let before: Vec<(std::path::PathBuf, Vec<u8>)> =
        [&r, &i, &q, &metric, &table].iter().map(|p| (p.to_path_buf(), std::fs::read(p).unwrap())).collect();
    let (rs, is, qs, ms, ts) =
        (r.to_str().unwrap(), i.to_str().unwrap(), q.to_str().unwrap(), m.to_str().unwrap(), table.to_str().unwrap());
    let md = metric.to_str().unwrap();
    let attempts: Vec<Vec<&str>> = vec![
        vec!["aggregate", "--rollouts", rs, "--out", rs],
        vec!["aggregate", "--rollouts", rs, "--inputs", is, "--out", is],
        vec!["aggregate", "--rollouts", rs, "--metric-dir", ms, "--metric", "best", "--out", md],
        vec!["ingest", rs, "--inputs", is, "--out", is],
        vec!["query", "SELECT * FROM rollouts", "--rollouts", rs, "--out", rs],
        vec!["query", "SELECT * FROM rollouts", "--rollouts", rs, "--inputs", is, "--format", "csv", "--out", is],
        vec!["query", qs, "--rollouts", rs, "--format", "json", "--out", qs],
        vec![
            "query",
            "SELECT agent, reward FROM rollouts",
            "--parquet-dir",
            t.to_str().unwrap(),
            "--format",
            "parquet",
            "--out",
            ts,
        ],
    ];
    for args in attempts {
        let o = run(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("refusing to overwrite an input file"), "{args:?}: {err}");
        for (p, bytes) in &before {
            assert_eq!(&std::fs::read(p).unwrap(), bytes, "{args:?} changed {}", p.display());
        }
    }
}

/// An output path that is a folder (for a file) or a file (for a folder) is a usage
/// error found before any work (exit 2), in every command that writes.
#[test]
fn output_paths_of_the_wrong_kind_are_usage_errors() {
    let dir = TempDir::new("out-kind");
    let r = dir.write("rollouts.jsonl", GOOD_ROLLOUTS);
    let i = dir.write("inputs.jsonl", GOOD_INPUT);
    let file = dir.write("afile", "keep");
    let (rs, is, d, f) =
        (r.to_str().unwrap(), i.to_str().unwrap(), dir.path().to_str().unwrap(), file.to_str().unwrap());
    let attempts: [(&[&str], &str); 6] = [
        (&["aggregate", "--rollouts", rs, "--out", d], "is a folder"),
        (&["ingest", rs, "--out", d], "is a folder"),
        (&["query", "leaderboard", "--rollouts", rs, "--out", d], "is a folder"),
        (&["export", "--rollouts", rs, "--out-dir", f], "is not a folder"),
        (&["generate", "--tasks", "2", "--out-dir", f], "is not a folder"),
        (&["profile", "--rollouts", rs, "--inputs", is, "--out-dir", f], "is not a folder"),
    ];
    for (args, says) in attempts {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert_eq!(dir.files(), vec!["afile", "inputs.jsonl", "rollouts.jsonl"], "{args:?}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    }
}

#[test]
fn rollouts_that_name_no_agent_need_agent_flag() {
    let dir = TempDir::new("noagent");
    let r = dir.write("rollouts.jsonl", "{\"reward\": 1, \"_ng_task_index\": 0, \"_ng_rollout_index\": 0}\n");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("line 1") && stderr(&o).contains("--agent"), "{}", stderr(&o));
    assert_eq!(dir.files(), vec!["rollouts.jsonl"]);
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--agent", "agent", "-q"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        dir.files(),
        vec!["quality_summary.json", "rollout_verdicts.jsonl", "rollouts.jsonl", "rollouts_aggregate_metrics.json"]
    );
    // With inputs, the input row names the run: the error points at it, not at the
    // rollout (which names an agent here).
    let dir = TempDir::new("noagent-inputs");
    let r = dir.write(
        "rollouts.jsonl",
        "{\"reward\": 1, \"agent_ref\": {\"name\": \"a\"}, \"_ng_task_index\": 0, \"_ng_rollout_index\": 0}\n",
    );
    let i = dir.write("inputs.jsonl", "\n{\"_ng_task_index\": 0, \"_ng_rollout_index\": 0}\n");
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--inputs", i.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("inputs.jsonl, line 2: the input row of rollout key (0, 0) ("), "{err}");
    assert!(err.contains("rollouts.jsonl, line 1) names no agent") && err.contains("--agent"), "{err}");
    assert_eq!(dir.files(), vec!["inputs.jsonl", "rollouts.jsonl"]);
}

/// Randomly damaged rollouts and inputs files (bytes replaced, cut out, inserted, the
/// file truncated) are read or refused as bad input, and what is read goes through the
/// aggregate and the profile: nothing panics and no error is ours (exit 1).
#[test]
fn damaged_files_are_read_or_refused_never_crash() {
    use rollstat::ingest::{read_inputs, read_rollouts, ReadOptions};
    use rollstat::metrics::aggregate::{aggregate, AggregateOptions};
    let d = TempDir::new("damaged");
    generate(d.path(), &["--tasks", "3", "--repeats", "2", "--agents", "1", "--seed", "5"]);
    let rollouts = std::fs::read(d.join("rollouts.jsonl")).unwrap();
    let inputs = std::fs::read(d.join("materialized_inputs.jsonl")).unwrap();
    // JSON punctuation, literals' letters, digits, control bytes, and bytes that are not
    // or only partly UTF-8.
    const ALPHABET: &[u8] = b"{}[]\":,\\ \n\t0123456789.eE-+truefalsnul\x00\x7f\xc3\xa9\xff\xed\xa0\x80";
    // A fixed-seed linear congruential generator: the same damage on every run.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: usize| -> usize {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((state >> 33) as usize) % n.max(1)
    };
    let (mut read_ok, mut refused) = (0, 0);
    for round in 0..400 {
        let damage_inputs = round % 4 == 3;
        let mut data = if damage_inputs { inputs.clone() } else { rollouts.clone() };
        for _ in 0..1 + next(4) {
            let at = next(data.len());
            match next(10) {
                0..=3 if !data.is_empty() => data[at] = ALPHABET[next(ALPHABET.len())],
                4 | 5 => {
                    let end = (at + 1 + next(20)).min(data.len());
                    data.drain(at..end);
                }
                6 | 7 => {
                    let bytes: Vec<u8> = (0..1 + next(5)).map(|_| ALPHABET[next(ALPHABET.len())]).collect();
                    data.splice(at..at, bytes);
                }
                _ => data.truncate(at),
            }
        }
        let (r_path, i_path) = (d.join("r.jsonl"), d.join("i.jsonl"));
        std::fs::write(&r_path, if damage_inputs { &rollouts } else { &data }).unwrap();
        std::fs::write(&i_path, if damage_inputs { &data } else { &inputs }).unwrap();
        let outcome = std::panic::catch_unwind(|| -> rollstat::Result<()> {
            let t = read_rollouts(&r_path, ReadOptions { fingerprints: true, evidence: true })?;
            let i = read_inputs(&i_path)?;
            let opts = AggregateOptions { default_agent: Some("unnamed".into()), ..Default::default() };
            aggregate(&t, Some(&i), &opts)?;
            rollstat::metrics::profile::profile(&t, &i, true)?;
            Ok(())
        });
        match outcome {
            Err(_) => panic!("round {round}: panicked on {:?}", String::from_utf8_lossy(&data)),
            Ok(Ok(())) => read_ok += 1,
            Ok(Err(e)) => {
                assert!(e.is_bad_input(), "round {round}: not reported as bad input: {e}");
                refused += 1;
            }
        }
    }
    // Both outcomes occur, so the damage is neither always fatal nor always harmless.
    assert!(read_ok > 20 && refused > 20, "read {read_ok}, refused {refused}");
}

/// Profile re-reads each task's sample row from the inputs file, which a pipe cannot
/// give twice: a named pipe is refused up front, with exit 2 and no outputs.
#[test]
fn inputs_from_a_pipe_are_refused_before_reading() {
    let dir = TempDir::new("bad-pipe");
    let i = dir.join("inputs.fifo");
    let r = dir.join("rollouts.jsonl");
    assert!(std::process::Command::new("mkfifo").arg(&i).status().unwrap().success());
    // A writer waits on the pipe (never joined): reading it wrongly would not hang.
    let q = i.clone();
    std::thread::spawn(move || std::fs::write(q, GOOD_INPUT));
    std::fs::write(&r, GOOD_ROLLOUTS).unwrap();
    let out = run(&["profile", "--inputs", i.to_str().unwrap(), "--rollouts", r.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("inputs.fifo") && err.contains("not a regular file"), "{err}");
    assert_eq!(dir.files(), vec!["inputs.fifo".to_string(), "rollouts.jsonl".to_string()], "no output files");
}

/// Flags and files that cannot do what they say are refused (exit 2) or named in a
/// warning, not silently ignored.
#[test]
fn ignored_requests_are_refused_or_warned() {
    let dir = TempDir::new("ignored");
    // Profile artifacts have no key metrics, so profile has no such flag.
    let r = profile(GOOD_INPUT.as_bytes(), GOOD_ROLLOUTS.as_bytes(), &["--key-metric", "mean/*"]);
    assert_eq!(r.out.status.code(), Some(2), "{}", stderr(&r.out));
    assert!(stderr(&r.out).contains("unexpected argument '--key-metric'"), "{}", stderr(&r.out));
    assert_eq!(r.dir.files(), vec!["inputs.jsonl".to_string(), "rollouts.jsonl".to_string()], "no output files");
    let m = dir.join("metrics");
    std::fs::create_dir(&m).unwrap();
    std::fs::write(m.join("reward_variance.sql"), "SELECT agent, 1 AS v FROM rollouts GROUP BY agent").unwrap();
    let r = dir.write("rollouts.jsonl", GOOD_ROLLOUTS);
    let out = dir.join("agg.json");
    let o = run(&[
        "aggregate",
        "--rollouts",
        r.to_str().unwrap(),
        "--metric-dir",
        m.to_str().unwrap(),
        "--metric",
        "reward_variance",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("reward_variance.sql: `reward_variance` is a built-in metric"), "{}", stderr(&o));
    // A key-metric pattern that selects nothing is named; one that selects something is not.
    let o = run(&[
        "aggregate",
        "--rollouts",
        r.to_str().unwrap(),
        "--key-metric",
        "mean/rewrad",
        "--key-metric",
        "mean/*",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("--key-metric \"mean/rewrad\" matches no metric of a"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("\"mean/*\""), "{}", stderr(&o));
}

/// A failed `export` leaves no folder it made behind; a folder given as a file is named so.
#[test]
fn failed_export_leaves_no_folder_and_folders_are_named() {
    let dir = TempDir::new("export-fail");
    let t = dir.join("tables");
    let missing = dir.join("missing.jsonl");
    let o = run(&["export", "--rollouts", missing.to_str().unwrap(), "--out-dir", t.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!t.exists(), "the failed run left {} behind", t.display());
    // So does a failed `profile`; a successful one creates its --out-dir as `export` does.
    let i = dir.write("inputs.jsonl", GOOD_INPUT);
    let p = dir.join("prof");
    let o = run(&[
        "profile",
        "--rollouts",
        missing.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        p.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(!p.exists(), "the failed profile left {} behind", p.display());
    let r = dir.write("rollouts.jsonl", GOOD_ROLLOUTS);
    let o = run(&[
        "profile",
        "--rollouts",
        r.to_str().unwrap(),
        "--inputs",
        i.to_str().unwrap(),
        "--out-dir",
        p.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(p.join("rollouts_agent_metrics.json").exists(), "{}", stdout(&o));
    let d = dir.path().to_str().unwrap();
    let o = run(&["profile", "--rollouts", d, "--inputs", i.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a folder; give the JSONL file inside it"), "{}", stderr(&o));
}

/// An output in a folder that takes no new files is a usage error naming the output.
#[test]
fn an_output_folder_that_takes_no_files_is_named() {
    if !std::path::Path::new("/sys/kernel").is_dir() {
        skip_without("sysfs (/sys/kernel)");
        return;
    }
    let dir = TempDir::new("ro-out");
    let r = dir.write("rollouts.jsonl", GOOD_ROLLOUTS);
    let o = run(&["aggregate", "--rollouts", r.to_str().unwrap(), "--out", "/sys/rollstat-test.json", "-q"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("/sys/rollstat-test.json: cannot"), "{}", stderr(&o));
}
