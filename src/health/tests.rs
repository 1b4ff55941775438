//! The health check against the reports NeMo Gym itself wrote (the cases kept with
//! rollstat's fixtures, and the cases on NeMo Gym's own example files from the optional
//! folder that holds them), and the rules that have no NeMo Gym output to compare with:
//! refusals, unknown checks, ordering, piece sizes.

use std::path::{Path, PathBuf};

use super::*;
use crate::json::{parse, Json};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/conformance/gym_aggregate/health");

/// The lookup of the optional folder, shared with the integration tests.
#[path = "../../tests/common/shared.rs"]
mod shared;

/// A case folder: the files to check (as named in `case.json`), their bytes and the
/// ignored checks.
struct Case {
    files: Vec<(String, Vec<u8>)>,
    ignored: Vec<String>,
}

fn strings(v: Option<&Json>) -> Vec<String> {
    match v {
        Some(Json::Arr(items)) => items.iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
        _ => panic!("expected a list of strings"),
    }
}

fn load(dir: &Path) -> Case {
    let spec = parse(&std::fs::read(dir.join("case.json")).unwrap()).unwrap();
    let files = strings(spec.get("rollouts"))
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect();
    let ignored = strings(spec.get("flags").and_then(|f| f.get("ignore_checks")));
    Case { files, ignored }
}

/// The fixture cases, then those on NeMo Gym's example files (`real_*`).
fn cases() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(FIXTURES)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.json").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 4, "the fixture cases are missing: {dirs:?}");
    dirs.extend(shared::example_cases("gym_aggregate/health", "case.json", |n| n.starts_with("real_")));
    dirs
}

fn run(case: &Case, piece: usize) -> Health {
    let sources: Vec<Source> = case.files.iter().map(|(name, bytes)| Source { name, bytes }).collect();
    check_in_pieces(&sources, &case.ignored, piece).unwrap()
}

/// Equal as JSON: same types (an integer stays an integer), same keys in the same order,
/// floats within a relative 1e-12.
fn same(got: &Json, want: &Json, at: &str) -> Result<(), String> {
    let differ = || Err(format!("{at}: got {got:?}, want {want:?}"));
    match (got, want) {
        (Json::Float(a), Json::Float(b)) => {
            if (a - b).abs() <= 1e-12 * a.abs().max(b.abs()) {
                Ok(())
            } else {
                differ()
            }
        }
        (Json::Arr(a), Json::Arr(b)) if a.len() == b.len() => {
            a.iter().zip(b).enumerate().try_for_each(|(k, (x, y))| same(x, y, &format!("{at}[{k}]")))
        }
        (Json::Obj(a), Json::Obj(b)) if a.len() == b.len() => a.iter().zip(b).try_for_each(|((ka, x), (kb, y))| {
            if ka == kb {
                same(x, y, &format!("{at}.{ka}"))
            } else {
                Err(format!("{at}: key `{ka}` where `{kb}` was written"))
            }
        }),
        (Json::Arr(_) | Json::Obj(_) | Json::Float(_), _) => differ(),
        _ if got == want => Ok(()),
        _ => differ(),
    }
}

/// Compares one case's reports with NeMo Gym's; returns whether the bytes are identical.
fn conforms(dir: &Path) -> Result<bool, String> {
    let case = load(dir);
    let h = run(&case, PIECE);
    let expected = |name: &str| std::fs::read(dir.join("expected").join(name)).unwrap();
    let (summary, verdicts) = (expected("quality_summary.json"), expected("rollout_verdicts.jsonl"));
    same(&parse(&h.summary).map_err(|e| format!("summary: {e}"))?, &parse(&summary).unwrap(), "summary")?;
    let all = h.verdicts();
    let got: Vec<&[u8]> = all.split(|&c| c == b'\n').collect();
    let want: Vec<&[u8]> = verdicts.split(|&c| c == b'\n').collect();
    if got.len() != want.len() {
        return Err(format!("{} verdict lines, NeMo Gym wrote {}", got.len() - 1, want.len() - 1));
    }
    for (k, (g, w)) in got.iter().zip(&want).enumerate().filter(|(_, (_, w))| !w.is_empty()) {
        let g = parse(g).map_err(|e| format!("verdict line {}: {e}", k + 1))?;
        same(&g, &parse(w).unwrap(), &format!("verdict line {}", k + 1))?;
    }
    let stdout = String::from_utf8(expected("stdout.txt")).unwrap();
    let printed = stdout.lines().find(|l| l.starts_with("Rollout health:")).ok_or("no health line printed")?;
    if printed != h.summary_line() {
        return Err(format!("printed `{}`, NeMo Gym printed `{printed}`", h.summary_line()));
    }
    let checked: usize = printed["Rollout health: ".len()..].split(' ').next().unwrap().parse().unwrap();
    if checked != h.records || h.healthy + h.unhealthy + h.unobserved != h.records {
        return Err(format!("{} records counted, NeMo Gym checked {checked}", h.records));
    }
    Ok(h.summary == summary && h.verdicts() == verdicts)
}

#[test]
fn reports_match_nemo_gyms() {
    let dirs = cases();
    let mut failures = Vec::new();
    for dir in &dirs {
        match conforms(dir) {
            Ok(true) => eprintln!("{}: reports identical byte for byte", dir.display()),
            Ok(false) => failures.push(format!("{}: equal as JSON but not byte for byte", dir.display())),
            Err(e) => failures.push(format!("{}: {e}", dir.display())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Line numbers, ordinals and duplicates do not depend on how files are cut into pieces.
#[test]
fn piece_size_does_not_change_the_reports() {
    for dir in cases() {
        let case = load(&dir);
        let whole = run(&case, PIECE);
        for piece in [1, 100, 4096] {
            let cut = run(&case, piece);
            assert_eq!(cut.summary, whole.summary, "{} in pieces of {piece}", dir.display());
            assert_eq!(cut.verdicts(), whole.verdicts(), "{} in pieces of {piece}", dir.display());
        }
    }
}

fn check_text(text: &str) -> crate::Result<Health> {
    check(&[Source { name: "./runs//rollouts.jsonl", bytes: text.as_bytes() }], &[])
}

#[test]
fn an_index_that_is_neither_integer_nor_string_is_refused() {
    let text =
        "{\"_ng_task_index\": 0, \"_ng_rollout_index\": 0}\n\n{\"_ng_task_index\": null, \"_ng_rollout_index\": 0}\n";
    let Err(Error::BadInput { loc, msg }) = check_text(text) else { panic!("a null task index was accepted") };
    assert_eq!(loc.file, Path::new("./runs//rollouts.jsonl"));
    assert_eq!((loc.line, loc.key.as_deref()), (Some(3), Some("_ng_task_index")));
    assert!(msg.contains("expected an integer or a string"), "{msg}");
    let message = Error::BadInput { loc, msg }.to_string();
    assert!(message.contains("rollouts.jsonl, line 3, key `_ng_task_index`"), "{message}");
    for (bad, key) in [
        (r#"{"_ng_task_index": 1.5}"#, "_ng_task_index"),
        (r#"{"_ng_task_index": [1]}"#, "_ng_task_index"),
        (r#"{"_ng_rollout_index": {"a": 1}}"#, "_ng_rollout_index"),
        (r#"{"_ng_rollout_index": null}"#, "_ng_rollout_index"),
        (r#"{"stage_index": 2.5}"#, "stage_index"),
    ] {
        let Err(Error::BadInput { loc, .. }) = check_text(bad) else { panic!("{bad} was accepted") };
        assert_eq!(loc.key.as_deref(), Some(key), "{bad}");
    }
    // A line that is not JSON is an unreadable record, whatever its index holds.
    assert!(check_text(r#"{"_ng_task_index": null, "x": NaN}"#).is_ok());
}

#[test]
fn unknown_checks_are_refused_and_known_ones_normalized() {
    let values = [" agent_turn_hollow ,model_call_failed".to_string(), "agent_turn_hollow,,".to_string()];
    assert_eq!(parse_ignored(&values).unwrap(), ["agent_turn_hollow", "model_call_failed"]);
    let Err(Error::Usage(msg)) = parse_ignored(&["zzz, model_call_failed, aaa".to_string()]) else { panic!() };
    assert_eq!(msg, "Unknown rollout health check(s): aaa, zzz");
    assert!(check(&[], &["nope".to_string()]).is_err());
}

#[test]
fn tasks_sort_integers_by_their_text_then_strings() {
    let text: String = [r#""b""#, "10", "2", r#""a""#, "1", "2.0"]
        .iter()
        .map(|t| format!("{{\"_ng_task_index\": {t}, \"_ng_rollout_index\": 0}}\n"))
        .collect();
    let h = check_text(&text).unwrap();
    let summary = parse(&h.summary).unwrap();
    let Some(Json::Obj(tasks)) = summary.get("tasks") else { panic!("no tasks") };
    let keys: Vec<&str> = tasks.iter().map(|(k, _)| &**k).collect();
    assert_eq!(keys, ["1", "10", "2", "a", "b"]);
    let lines: Vec<Json> =
        h.verdicts().split(|&c| c == b'\n').filter(|l| !l.is_empty()).map(|l| parse(l).unwrap()).collect();
    let order: Vec<String> = lines.iter().map(|l| python::str_of(l.get("_ng_task_index").unwrap())).collect();
    assert_eq!(order, ["1", "2", "2", "10", "a", "b"]);
    // Task 2 given twice (as 2 and 2.0) is one identity, written with each record's text.
    let ids: Vec<&str> = lines[1..3].iter().map(|l| l.get("rollout_id").unwrap().as_str().unwrap()).collect();
    assert_eq!(ids, ["2-0", "2.0-0"]);
    assert_eq!(lines[1].get("verdict").unwrap().as_str(), Some("unhealthy"));
}

#[test]
fn empty_input_gives_empty_reports() {
    let h = check_text("\n  \n").unwrap();
    assert_eq!((h.records, h.verdicts().len()), (0, 0));
    assert_eq!(h.summary_line(), "Rollout health: 0 checked, 0 healthy, 0 unhealthy, 0 unobserved");
    let summary = parse(&h.summary).unwrap();
    assert_eq!(summary.get("tasks"), Some(&Json::obj()));
}

#[test]
fn unreadable_lines_name_the_file_as_python_writes_the_path() {
    let h = check_text("{\"a\": 1\n").unwrap();
    let line = parse(h.verdicts().strip_suffix(b"\n").unwrap()).unwrap();
    let Some(Json::Arr(findings)) = line.get("findings") else { panic!() };
    let locator = findings[0].get("locator").unwrap();
    assert_eq!(locator.get("source_file").and_then(Json::as_str), Some("runs/rollouts.jsonl"));
    assert_eq!(line.get("_ng_task_index").and_then(Json::as_str), Some("__unreadable_record__:input-0:line-1"));
}
