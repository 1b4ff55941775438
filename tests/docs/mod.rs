//! The sample sessions of the README and docs/ run as printed. In a fenced block, a line
//! `$ COMMAND` is a shell command (a heredoc it opens takes the lines up to its end
//! marker) and the lines after it, up to the next command, are what it prints (stdout and
//! stderr as one stream): each must come out, in that order. A line that is `...` or
//! starts with `…` stands for lines left out. A page's sessions run in order in one
//! scratch folder (so a later one may use the files an earlier one made), with this
//! build's `rollstat` first on PATH and the checkout's `tests/` and `queries/` folders
//! beside, as from a checkout.

use std::path::{Path, PathBuf};

use crate::common::*;

/// One command of a session and the lines it must print.
struct Step {
    command: String,
    shows: Vec<String>,
}

/// The sessions of a Markdown page, in order: fenced blocks with at least one `$ ` line.
fn sessions(text: &str) -> Vec<Vec<Step>> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if !l.starts_with("```") {
            continue;
        }
        let mut block: Vec<Step> = Vec::new();
        let mut open_heredoc: Option<String> = None;
        for l in lines.by_ref() {
            if let Some(end) = &open_heredoc {
                let step = block.last_mut().unwrap();
                step.command.push('\n');
                step.command.push_str(l);
                if l == end {
                    open_heredoc = None;
                }
            } else if l.starts_with("```") {
                break;
            } else if let Some(c) = l.strip_prefix("$ ") {
                open_heredoc = c.split_once("<<").map(|(_, m)| m.trim().trim_matches('\'').to_string());
                block.push(Step { command: c.to_string(), shows: Vec::new() });
            } else if let Some(step) = block.last_mut() {
                step.shows.push(l.to_string());
            }
        }
        if !block.is_empty() {
            out.push(block);
        }
    }
    out
}

fn elided(line: &str) -> bool {
    let t = line.trim();
    t == "..." || t.starts_with('…')
}

/// Runs every session of `page` (relative to the checkout); returns how many lines were
/// checked, failing on the first that did not come out.
fn check_page(page: &str) -> usize {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(repo.join(page)).unwrap();
    let all = sessions(&text);
    assert!(!all.is_empty(), "{page} has no sample session");
    let d = TempDir::new("docs");
    for f in ["tests", "queries"] {
        std::os::unix::fs::symlink(repo.join(f), d.join(f)).unwrap();
    }
    let path = format!("{}:/usr/bin:/bin", bin().parent().unwrap().display());
    let mut checked = 0;
    for step in all.iter().flatten() {
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("exec 2>&1\n{}", step.command))
            .current_dir(d.path())
            .env("PATH", &path)
            .env("SOURCE_DATE_EPOCH", "0")
            .output()
            .unwrap();
        let printed = stdout(&o);
        assert!(o.status.success(), "{page}: `{}` failed:\n{printed}", step.command);
        let mut got = printed.lines().map(str::trim_end);
        for want in step.shows.iter().filter(|l| !elided(l) && !l.trim().is_empty()) {
            let want = want.trim_end();
            assert!(
                got.any(|g| g == want),
                "{page}: `{}` did not print, in this order, the line\n{want}\nIt printed:\n{printed}",
                step.command
            );
            checked += 1;
        }
    }
    checked
}

/// Every page with a sample session (a block with a `$ ` line) is checked here.
const PAGES: [&str; 5] =
    ["README.md", "docs/batch-metrics.md", "docs/commands.md", "docs/compare.md", "docs/eval-compare.md"];

#[test]
fn sample_sessions_print_what_the_pages_show() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages: Vec<PathBuf> = vec![repo.join("README.md")];
    pages.extend(std::fs::read_dir(repo.join("docs")).unwrap().map(|e| e.unwrap().path()));
    for p in pages.iter().filter(|p| p.extension().is_some_and(|x| x == "md")) {
        let rel = p.strip_prefix(repo).unwrap().to_str().unwrap();
        let has = !sessions(&std::fs::read_to_string(p).unwrap()).is_empty();
        assert_eq!(has, PAGES.contains(&rel), "{rel}: list it in PAGES exactly when it has a `$ ` session");
    }
    for page in PAGES {
        let n = check_page(page);
        assert!(n >= 3, "{page}: only {n} printed lines checked");
    }
}
