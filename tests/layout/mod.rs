//! The source tree keeps its own map: data flows one way (ingest → metrics → export), so
//! no statistics or ingest code imports a renderer, and no two source files import each
//! other, directly or around a loop. Imports are read from the `crate::`, `super::` and
//! `self::` paths of each file outside its unit tests.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, with its text up to its unit tests and without comments.
fn sources(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let code: String = code.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n");
            out.insert(p, code);
        }
    }
}

/// The module path of a file under `src/` (`src/json/scan.rs` → `["json", "scan"]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut segs: Vec<String> = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if matches!(segs.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        segs.pop();
    }
    segs
}

/// The paths following `prefix` in `code`, as segments (`a::b::c`); a group
/// (`prefix::a::{b, c::d}`) gives one path per member, up to its first segment.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(prefix) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
        let head: Vec<String> = rest[..end].split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
        if !rest[end..].starts_with('{') {
            if !head.is_empty() {
                out.push(head);
            }
            continue;
        }
        // The members of the group at its top level, cut at their first `::`.
        let mut depth = 0;
        let mut top = String::new();
        for c in rest[end + 1..].chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                _ if depth == 0 => top.push(c),
                _ => {}
            }
        }
        for member in top.split(',') {
            let name = member.trim().split("::").next().unwrap_or("").trim();
            if !name.is_empty() && name != "self" {
                let mut segs = head.clone();
                segs.push(name.to_string());
                out.push(segs);
            } else if name == "self" && !head.is_empty() {
                out.push(head.clone());
            }
        }
    }
    out
}

/// The import graph between source files.
fn graph() -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&src, &mut files);
    let by_module: BTreeMap<Vec<String>, PathBuf> = files.keys().map(|f| (module_of(&src, f), f.clone())).collect();
    let resolve = |segs: &[String]| -> Option<PathBuf> {
        (1..=segs.len()).rev().find_map(|k| by_module.get(&segs[..k]).cloned())
    };
    let mut g = BTreeMap::new();
    for (file, code) in &files {
        let me = module_of(&src, file);
        let is_mod = matches!(file.file_name().and_then(|n| n.to_str()), Some("mod.rs" | "lib.rs"));
        let parent: Vec<String> = me[..me.len().saturating_sub(1)].to_vec();
        let mut to = BTreeSet::new();
        let mut add = |base: &[String], segs: &[String]| {
            let full: Vec<String> = base.iter().chain(segs).cloned().collect();
            if let Some(q) = resolve(&full) {
                if &q != file {
                    to.insert(q);
                }
            }
        };
        for segs in paths_after(code, "crate::") {
            add(&[], &segs);
        }
        for segs in paths_after(code, "super::") {
            add(&parent, &segs);
        }
        if is_mod {
            for segs in paths_after(code, "self::") {
                add(&me, &segs);
            }
        }
        g.insert(file.clone(), to);
    }
    g
}

#[test]
fn no_two_source_files_import_each_other_around_a_loop() {
    let g = graph();
    assert!(g.len() > 50, "the source tree was not found: {} files", g.len());
    // Depth-first search for a back edge; the loop is named when one is found.
    fn visit(
        f: &PathBuf,
        g: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        state: &mut BTreeMap<PathBuf, u8>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        state.insert(f.clone(), 1);
        stack.push(f.clone());
        for n in &g[f] {
            match state.get(n).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|x| x == n).unwrap();
                    return Some(stack[at..].to_vec());
                }
                0 => {
                    if let Some(c) = visit(n, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(f.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for f in g.keys() {
        if !state.contains_key(f) {
            if let Some(cycle) = visit(f, &g, &mut state, &mut Vec::new()) {
                panic!("import loop: {cycle:?}");
            }
        }
    }
}

#[test]
fn statistics_and_ingest_never_import_a_renderer() {
    let g = graph();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    for (file, to) in &g {
        let layer = file.strip_prefix(&src).unwrap().iter().next().unwrap().to_string_lossy().into_owned();
        if matches!(layer.as_str(), "metrics" | "ingest" | "stats" | "json" | "schema.rs") {
            checked += 1;
            for t in to {
                let target = t.strip_prefix(&src).unwrap().iter().next().unwrap().to_string_lossy().into_owned();
                assert!(
                    !matches!(target.as_str(), "export" | "cli" | "workflow" | "query"),
                    "{} imports {}, a layer above it",
                    file.display(),
                    t.display()
                );
            }
        }
    }
    assert!(checked > 20, "only {checked} files checked");
}

/// The top-level name of a source file's layer (`src/ingest/table.rs` → `ingest`).
fn layer(src: &Path, file: &Path) -> String {
    file.strip_prefix(src).unwrap().iter().next().unwrap().to_string_lossy().into_owned()
}

#[test]
fn the_leaves_import_no_layer() {
    // Timings and status notes, signals, errors, the private encodings and Python's text
    // of a float are used by every layer, so they import none of them.
    let g = graph();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let leaves = ["trace.rs", "signals.rs", "error.rs", "codec.rs", "python_float.rs"];
    for leaf in leaves {
        let file = src.join(leaf);
        let to = g.get(&file).unwrap_or_else(|| panic!("{leaf} was not found"));
        for t in to {
            assert!(
                leaves.contains(&layer(&src, t).as_str()) || t.ends_with("lib.rs"),
                "{leaf} imports {}, a layer above it",
                t.display()
            );
        }
    }
}

#[test]
fn the_merge_of_slices_is_a_room_of_its_own() {
    // Only the command line enters the merge; the merge builds on the workflows and the
    // layers below them, never on the command line, the viewer or SQL.
    let g = graph();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let merge = src.join("workflow").join("merge");
    let mut inside = 0;
    for (file, to) in &g {
        if file.starts_with(&merge) {
            inside += 1;
            for t in to {
                assert!(
                    !matches!(layer(&src, t).as_str(), "cli" | "view" | "query"),
                    "{} imports {}, a layer above the merge",
                    file.display(),
                    t.display()
                );
            }
        } else if layer(&src, file) != "cli" {
            if let Some(t) = to.iter().find(|t| t.starts_with(&merge)) {
                panic!("{} imports {}: only the command line enters the merge", file.display(), t.display());
            }
        }
    }
    assert!(inside >= 5, "only {inside} files found in {}", merge.display());
}
