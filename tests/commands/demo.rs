//! `rollstat demo`: the main job on a bundled sweep.

use crate::common::*;

#[test]
fn demo_runs_the_main_job() {
    let d = TempDir::new("demo");
    let dir = d.join("demo");
    let o = run(&["demo", "--dir", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("Key metrics for"), "{out}");
    // The agents share their tasks, so the comparison pairs all 100 of them.
    assert!(out.contains("paired on the tasks both measured"), "{out}");
    let paired: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("against ")).skip(2).take(2).collect();
    assert_eq!(paired.len(), 2, "{out}");
    for l in paired {
        assert_eq!(l.split_whitespace().nth(1), Some("100"), "{l}");
    }
    // The warnings on stderr are counted and explained on stdout, not left unexplained.
    let printed: usize = stderr(&o)
        .lines()
        .filter_map(|l| l.strip_prefix("warning: "))
        .map(|m| {
            m.strip_suffix(" times)").and_then(|b| b.rsplit_once(" (")).and_then(|(_, n)| n.parse().ok()).unwrap_or(1)
        })
        .sum();
    assert!(printed > 0, "the demo sweep is built to warn");
    // Its steps raise the same warnings; each is said once.
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    let distinct: std::collections::BTreeSet<&&str> = lines.iter().collect();
    assert_eq!(distinct.len(), lines.len(), "a warning said twice:\n{err}");
    assert!(out.contains(&format!("The {printed} warnings on stderr are this synthetic sweep's by design")), "{out}");
    for f in [
        "rollouts_reward_profiling.jsonl",
        "rollouts_agent_metrics.json",
        "rollouts_aggregate_metrics.json",
        "rollouts.parquet",
        "tables/tasks.parquet",
        "report.html",
    ] {
        assert!(dir.join(f).exists(), "{f} missing; {out}");
    }
}

/// The closing `Try:` line runs as printed: with `rollstat` not on PATH it names this
/// binary by its path, and that command line works.
#[test]
fn demo_try_line_runs_as_printed() {
    let d = TempDir::new("demo-try");
    let dir = d.join("demo");
    let o = rollstat().args(["demo", "--dir", dir.to_str().unwrap()]).env("PATH", "/usr/bin:/bin").ok();
    let out = stdout(&o);
    let line = out.lines().find_map(|l| l.strip_prefix("Try: ")).unwrap_or_else(|| panic!("no Try line: {out}"));
    let me = std::fs::canonicalize(bin()).unwrap();
    let cwd = std::env::current_dir().unwrap();
    let shown = me.strip_prefix(&cwd).unwrap_or(&me).to_str().unwrap().to_string();
    assert!(line.starts_with(&shown), "{line} (the binary is {})", me.display());
    let o = std::process::Command::new("sh").arg("-c").arg(line).env("PATH", "/usr/bin:/bin").output().unwrap();
    assert!(o.status.success(), "{line}: {}", stderr(&o));
    assert!(stdout(&o).contains("mean_reward"), "{}", stdout(&o));
}
