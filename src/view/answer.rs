//! The viewer's answers, as JSON built from the index: the overview, a filtered and
//! sorted page of tasks, one task with its rollouts, one rollout's transcript. Sizes are
//! bounded here: pages, strings and item lists are cut on the server and the rest is
//! asked for again by the page.

use std::collections::HashSet;

use rayon::prelude::*;

use super::index::{prompt_messages, FileData, Index, Slice, Task, TaskRun, SOLVED};
use crate::health::{Check, CheckSet, RecordResult, Verdict};
use crate::json::{Json, Key};

/// A request the viewer cannot answer as asked: a 400 with this message.
#[derive(Debug)]
pub struct BadRequest(pub String);

pub type Answer<T> = std::result::Result<T, BadRequest>;

fn bad<T>(msg: impl Into<String>) -> Answer<T> {
    Err(BadRequest(msg.into()))
}

/// Most tasks on one page.
pub const MAX_PAGE: usize = 200;
/// Longest string sent whole inside a transcript; longer ones are cut, with the rest on demand.
pub const STRING_CAP: usize = 32 << 10;
/// All strings of one answer together: past this, strings are cut to their start.
pub const ANSWER_BUDGET: usize = 4 << 20;
/// Output items per page of a transcript, and elements of any other array.
pub const ITEMS_PAGE: usize = 100;
pub const ARRAY_CAP: usize = 1000;
/// Largest piece of a long string or a raw line sent at once.
pub const CHUNK: usize = 1 << 20;

fn key(k: &str) -> Key {
    Key::from(k)
}

fn obj(members: Vec<(&str, Json)>) -> Json {
    Json::Obj(members.into_iter().map(|(k, v)| (key(k), v)).collect())
}

fn num(x: f64) -> Json {
    if x.is_finite() {
        Json::Float(x)
    } else {
        Json::Null
    }
}

fn opt(x: Option<f64>) -> Json {
    x.map_or(Json::Null, num)
}

fn text(s: impl Into<String>) -> Json {
    Json::Str(s.into())
}

fn task_run(s: &TaskRun) -> Json {
    obj(vec![
        ("mean", opt(s.mean())),
        ("k", Json::Int(s.k as i64)),
        ("n", Json::Int(s.n as i64)),
        ("rollouts", Json::Int(s.rollouts as i64)),
    ])
}

/// The overview: each run's mean with its interval, its tasks by slice, failures by
/// class, and each run against the baseline.
pub fn overview(ix: &Index) -> Json {
    let report = ix.report.as_ref();
    let runs: Vec<Json> = ix
        .runs
        .iter()
        .enumerate()
        .map(|(r, name)| {
            let summary = report.and_then(|rep| rep.runs.get(r));
            let mut slices = [0i64; 3];
            for t in &ix.tasks {
                if let Some(s) = t.runs[r].slice() {
                    slices[Slice::ALL.iter().position(|x| *x == s).unwrap_or(0)] += 1;
                }
            }
            let rollouts = ix.tasks.iter().map(|t| t.runs[r].rollouts as i64).sum::<i64>();
            let comparison = report.and_then(|rep| rep.comparisons.iter().find(|c| c.run == r));
            obj(vec![
                ("name", text(name)),
                ("file", text(ix.files[ix.origin[r].0].path.display().to_string())),
                ("baseline", Json::Bool(r == ix.baseline)),
                ("tasks", Json::Int(summary.map_or(0, |s| s.tasks as i64))),
                ("rollouts", Json::Int(rollouts)),
                ("masked", Json::Int(summary.map_or(0, |s| s.masked as i64))),
                ("mean", opt(summary.and_then(|s| s.est.as_ref()).map(|e| e.mean))),
                ("se", opt(summary.and_then(|s| s.est.as_ref()).and_then(|e| e.se))),
                ("ci_low", opt(summary.and_then(|s| s.ci).map(|c| c.0))),
                ("ci_high", opt(summary.and_then(|s| s.ci).map(|c| c.1))),
                ("slices", obj(Slice::ALL.iter().zip(slices).map(|(s, n)| (s.name(), Json::Int(n))).collect())),
                ("failures", Json::Obj(ix.failures[r].iter().map(|(c, n)| (key(c), Json::Int(*n as i64))).collect())),
                ("health", health_of_run(ix, r)),
                (
                    "vs_baseline",
                    comparison.map_or(Json::Null, |c| {
                        obj(vec![
                            ("paired_tasks", Json::Int(c.paired_tasks as i64)),
                            ("diff", opt(c.stats.as_ref().map(|s| s.diff.mean))),
                            ("ci_low", opt(c.ci.map(|x| x.0))),
                            ("ci_high", opt(c.ci.map(|x| x.1))),
                            ("p", opt(c.stats.as_ref().and_then(|s| s.p))),
                            ("fail_pass", Json::Int(flips(ix, r, true) as i64)),
                            ("pass_fail", Json::Int(flips(ix, r, false) as i64)),
                        ])
                    }),
                ),
            ])
        })
        .collect();
    let warnings = report.map(|r| r.warnings.lines()).unwrap_or_default();
    let mut notes = ix.notes.clone();
    notes.extend(warnings);
    obj(vec![
        ("runs", Json::Arr(runs)),
        ("lake", lake_listing(ix)),
        ("tasks", Json::Int(ix.tasks.len() as i64)),
        ("rollouts", Json::Int(ix.rows.len() as i64)),
        ("solved_at", Json::Float(SOLVED)),
        ("notes", Json::Arr(notes.into_iter().map(Json::Str).collect())),
        (
            "files",
            Json::Arr(
                ix.files
                    .iter()
                    .map(|f| {
                        obj(vec![
                            ("path", text(f.path.display().to_string())),
                            ("unavailable", unavailable(f)),
                            ("lines", Json::Int(f.starts.len() as i64)),
                            ("bytes", Json::Int(f.indexed as i64)),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}

/// Run `r`'s health verdicts, and per rollout check how many of its rollouts the check
/// flagged and how many tasks hold such a rollout (`null` when the check did not run).
fn health_of_run(ix: &Index, r: usize) -> Json {
    if !ix.health_checked || ix.files[ix.origin[r].0].gone.is_some() {
        return Json::Null;
    }
    let mut verdicts = [0i64; 3];
    let mut rollouts = [0i64; Check::ALL.len()];
    let mut tasks = [0i64; Check::ALL.len()];
    for t in &ix.tasks {
        let mut in_task = CheckSet::default();
        for &id in &t.rows {
            let row = &ix.rows[id as usize];
            let Some(h) = row.health.filter(|_| row.run as usize == r) else { continue };
            verdicts[h.verdict as usize] += 1;
            for c in h.flagged.iter() {
                rollouts[c as usize] += 1;
                in_task.add(c);
            }
        }
        for c in in_task.iter() {
            tasks[c as usize] += 1;
        }
    }
    let checks = Check::rollout()
        .iter()
        .map(|&c| {
            (
                key(c.id()),
                obj(vec![("rollouts", Json::Int(rollouts[c as usize])), ("tasks", Json::Int(tasks[c as usize]))]),
            )
        })
        .collect();
    obj(vec![
        ("healthy", Json::Int(verdicts[Verdict::Healthy as usize])),
        ("unhealthy", Json::Int(verdicts[Verdict::Unhealthy as usize])),
        ("unobserved", Json::Int(verdicts[Verdict::Unobserved as usize])),
        ("checks", Json::Obj(checks)),
    ])
}

/// The lake served from, with every sweep in it (`null` when serving files).
fn lake_listing(ix: &Index) -> Json {
    let Some((dir, sweeps, served)) = &ix.lake else { return Json::Null };
    let rows = sweeps
        .iter()
        .map(|s| {
            obj(vec![
                ("sweep", text(&s.id)),
                ("created_at", text(&s.created_at)),
                ("labels", Json::Obj(s.labels.iter().map(|(k, v)| (key(k), text(v))).collect())),
                ("rollouts", Json::Int(s.num_rollouts)),
                ("tasks", Json::Int(s.num_tasks)),
                ("agents", Json::Int(s.num_agents)),
                ("served", Json::Bool(served.contains(&s.id))),
            ])
        })
        .collect();
    obj(vec![("dir", text(dir.display().to_string())), ("sweeps", Json::Arr(rows))])
}

/// A rollout's health result as its card shows it.
fn health_of_row(h: Option<RecordResult>) -> Json {
    h.map_or(Json::Null, |h| {
        let ids = |set: CheckSet| Json::Arr(set.iter().map(|c| text(c.id())).collect());
        obj(vec![("verdict", text(h.verdict.id())), ("flagged", ids(h.flagged)), ("unobserved", ids(h.unobserved))])
    })
}

/// How many tasks run `r` flipped against the baseline (see [`flipped`]).
fn flips(ix: &Index, r: usize, to_pass: bool) -> usize {
    ix.tasks.iter().filter(|t| flipped(t, ix.baseline, r, to_pass)).count()
}

/// Whether run `r` flipped task `t` against run `b`: failed there and passed here
/// (`to_pass`), or the other way. A task is passed when its mean reward is at least
/// [`SOLVED`]; only tasks both runs measured count.
fn flipped(t: &Task, b: usize, r: usize, to_pass: bool) -> bool {
    match (t.runs[b].mean(), t.runs[r].mean()) {
        (Some(x), Some(y)) => (x >= SOLVED) != (y >= SOLVED) && (y >= SOLVED) == to_pass,
        _ => false,
    }
}

/// The (run, task) pairs a SQL filter kept.
pub type SqlKeep = std::sync::Arc<HashSet<(String, i64)>>;

/// What a tasks request asks for.
#[derive(Debug, Default, Clone)]
pub struct TaskQuery {
    /// The run the slice, mean range, failure and flip filters and the sort look at.
    pub run: Option<String>,
    pub slice: Option<String>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub failure: Option<String>,
    /// A rollout health check that flagged some rollout of the task in the run.
    pub check: Option<String>,
    /// `fail-pass` or `pass-fail` against the baseline.
    pub flip: Option<String>,
    pub text: Option<String>,
    /// The (run, task) pairs a SQL filter kept, when one was given.
    pub sql: Option<SqlKeep>,
    pub sort: Option<String>,
    pub desc: bool,
    pub page: usize,
    pub size: usize,
}

/// A page of tasks matching `q`, with the count of all matches.
pub fn tasks(ix: &Index, q: &TaskQuery) -> Answer<Json> {
    let run = match &q.run {
        None => None,
        Some(name) => Some(ix.run(name).ok_or_else(|| BadRequest(format!("run: no run is named {name:?}")))?),
    };
    let focus = run.unwrap_or(ix.baseline);
    let slice = match &q.slice {
        None => None,
        Some(s) => {
            Some(Slice::parse(s).ok_or_else(|| BadRequest(format!("slice: {s:?} is not never, sometimes or always")))?)
        }
    };
    let flip = match q.flip.as_deref() {
        None => None,
        Some("fail-pass") => Some(true),
        Some("pass-fail") => Some(false),
        Some(f) => return bad(format!("flip: {f:?} is not fail-pass or pass-fail")),
    };
    let flip_run = match (flip, run) {
        (None, _) => None,
        (Some(_), Some(r)) if r == ix.baseline => {
            return bad("flip: the run is the baseline; choose another run to compare with it")
        }
        (Some(_), Some(r)) => Some(r),
        (Some(_), None) => Some(
            (0..ix.runs.len())
                .find(|&r| r != ix.baseline)
                .ok_or_else(|| BadRequest("flip: there is only one run".into()))?,
        ),
    };
    if q.size == 0 || q.size > MAX_PAGE {
        return bad(format!("size: give 1 to {MAX_PAGE} tasks per page"));
    }
    let failed: Option<HashSet<i64>> = q
        .failure
        .as_ref()
        .map(|class| ix.failed_tasks[focus].get(class).map(|v| v.iter().copied().collect()).unwrap_or_default());
    let check = match q.check.as_deref() {
        None => None,
        Some(_) if !ix.health_checked => return bad("check: the health check did not run in this viewer"),
        Some(id) => Some(
            Check::rollout_from_id(id)
                .map_err(|ids| BadRequest(format!("check: {id:?} is not a rollout health check ({ids})")))?,
        ),
    };
    let needle = q.text.as_ref().filter(|t| !t.is_empty()).map(|t| t.to_lowercase());
    let finder = needle.as_ref().map(|n| memchr::memmem::Finder::new(n.as_bytes()));
    let sql_names: Option<Vec<&str>> = q.sql.as_ref().map(|_| ix.runs.iter().map(String::as_str).collect());
    let mut hits: Vec<usize> = (0..ix.tasks.len())
        .into_par_iter()
        .filter(|&i| {
            let t = &ix.tasks[i];
            let s = &t.runs[focus];
            if slice.is_some() && s.slice() != slice {
                return false;
            }
            if q.min.is_some() || q.max.is_some() {
                let Some(m) = s.mean() else { return false };
                if q.min.is_some_and(|lo| m < lo) || q.max.is_some_and(|hi| m > hi) {
                    return false;
                }
            }
            if let Some(f) = &failed {
                if !f.contains(&t.index) {
                    return false;
                }
            }
            if let Some(c) = check {
                let flagged = |&id: &u32| {
                    let row = &ix.rows[id as usize];
                    row.run as usize == focus && row.health.is_some_and(|h| h.flagged.has(c))
                };
                if !t.rows.iter().any(flagged) {
                    return false;
                }
            }
            if let (Some(to_pass), Some(r)) = (flip, flip_run) {
                if !flipped(t, ix.baseline, r, to_pass) {
                    return false;
                }
            }
            if let Some(f) = &finder {
                if f.find(t.search.as_bytes()).is_none() {
                    return false;
                }
            }
            if let (Some(keep), Some(names)) = (&q.sql, &sql_names) {
                let runs: Vec<usize> = match run {
                    Some(r) => vec![r],
                    None => (0..names.len()).collect(),
                };
                if !runs.iter().any(|&r| keep.contains(&(names[r].to_string(), t.index))) {
                    return false;
                }
            }
            true
        })
        .collect();
    // Sorted by a key computed once per task; ties in task order; tasks without a mean
    // last either way.
    let key = |i: usize| -> f64 {
        let t = &ix.tasks[i];
        match q.sort.as_deref() {
            Some("mean") => t.runs[focus].mean().unwrap_or(f64::NAN),
            Some("solved") => t.runs[focus].k as f64,
            Some("rollouts") => t.rows.len() as f64,
            _ => i as f64,
        }
    };
    if !matches!(q.sort.as_deref(), None | Some("task" | "mean" | "solved" | "rollouts")) {
        return bad(format!("sort: {:?} is not task, mean, solved or rollouts", q.sort.as_deref().unwrap_or_default()));
    }
    if !matches!(q.sort.as_deref(), None | Some("task")) {
        let mut keyed: Vec<(f64, usize)> = hits.iter().map(|&i| (key(i), i)).collect();
        let (mut known, unknown): (Vec<_>, Vec<_>) = keyed.drain(..).partition(|(k, _)| !k.is_nan());
        known.par_sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        if q.desc {
            known.reverse();
        }
        hits = known.into_iter().chain(unknown).map(|(_, i)| i).collect();
    } else if q.desc {
        hits.reverse();
    }
    let total = hits.len();
    let from = q.page.saturating_mul(q.size).min(total);
    let rows: Vec<Json> = hits[from..(from + q.size).min(total)]
        .iter()
        .map(|&i| {
            let t = &ix.tasks[i];
            obj(vec![
                ("task", Json::Int(t.index)),
                ("prompt", text(&t.prompt)),
                ("runs", Json::Arr(t.runs.iter().map(task_run).collect())),
            ])
        })
        .collect();
    Ok(obj(vec![
        ("total", Json::Int(total as i64)),
        ("page", Json::Int(q.page as i64)),
        ("size", Json::Int(q.size as i64)),
        ("run", text(&ix.runs[focus])),
        ("runs", Json::Arr(ix.runs.iter().map(text).collect())),
        ("rows", Json::Arr(rows)),
    ]))
}

/// Keys of a rollout line shown apart from its other fields.
const SHOWN_APART: [&str; 8] = [
    "responses_create_params",
    "response",
    "ng_trajectory",
    "agent_ref",
    "_ng_task_index",
    "_ng_rollout_index",
    "reward",
    "mask_sample",
];

/// One task: its prompt, the dataset's own fields, each run's standing and its rollouts.
pub fn task(ix: &Index, index: i64) -> Answer<Json> {
    let Some(&at) = ix.task_at.get(&index) else { return bad(format!("task: no task has index {index}")) };
    let t = &ix.tasks[at];
    // The prompt and the dataset's fields from the first rollout whose line is at hand.
    let at_hand = t.rows.iter().map(|&id| id as usize).find(|&id| ix.files[ix.rows[id].file as usize].gone.is_none());
    let (first, first_line) = match at_hand {
        Some(id) => {
            let (r, line) = row(ix, id)?;
            (r, Some(line))
        }
        None => (ix.rows[t.rows[0] as usize], None),
    };
    let file = &ix.files[first.file as usize];
    let mut budget = ANSWER_BUDGET;
    let mut cut = Vec::new();
    let prompt: Vec<Json> = first_line
        .and_then(prompt_messages)
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(i, (role, body))| {
            let body = cap(Json::Str(body), &format!("/prompt/{i}"), &mut cut, &mut budget);
            obj(vec![("role", text(role)), ("text", body)])
        })
        .collect();
    // The dataset's own fields: the first input row of the task, less rollstat's and
    // NeMo Gym's bookkeeping.
    let mut fields = Vec::new();
    if let Some(Json::Obj(members)) = input_row(file, index) {
        for (k, v) in members {
            if k.starts_with("_ng_") || &*k == "responses_create_params" || &*k == "agent_ref" {
                continue;
            }
            let v = cap(v, &format!("/fields/{k}"), &mut cut, &mut budget);
            fields.push((k, v));
        }
    }
    let rollouts: Vec<Json> = t.rows.iter().map(|&id| obj(row_head(ix, id as usize))).collect();
    let failures: Vec<Json> = ix
        .failed_tasks
        .iter()
        .enumerate()
        .flat_map(|(r, by_class)| {
            by_class.iter().filter(|(_, ts)| ts.contains(&index)).map(move |(c, ts)| {
                obj(vec![
                    ("run", text(&ix.runs[r])),
                    ("class", text(c)),
                    ("count", Json::Int(ts.iter().filter(|&&x| x == index).count() as i64)),
                ])
            })
        })
        .collect();
    Ok(obj(vec![
        ("task", Json::Int(index)),
        ("runs", Json::Arr(ix.runs.iter().map(text).collect())),
        ("baseline", text(&ix.runs[ix.baseline])),
        ("standing", Json::Arr(t.runs.iter().map(task_run).collect())),
        ("prompt", Json::Arr(prompt)),
        ("prompt_unavailable", unavailable(file)),
        ("fields", Json::Obj(fields)),
        ("failures", Json::Arr(failures)),
        ("rollouts", Json::Arr(rollouts)),
        ("cut", cuts(cut)),
    ]))
}

fn cuts(cut: Vec<(String, usize)>) -> Json {
    Json::Obj(cut.into_iter().map(|(p, n)| (key(&p), Json::Int(n as i64))).collect())
}

/// A row id given in a request.
fn row_at(ix: &Index, id: usize) -> Answer<super::index::Row> {
    ix.rows.get(id).copied().ok_or_else(|| BadRequest(format!("rollout: no rollout has id {id}")))
}

/// A row id given in a request, with its line (refused when the line is not at hand).
fn row(ix: &Index, id: usize) -> Answer<(super::index::Row, &[u8])> {
    let r = row_at(ix, id)?;
    let f = &ix.files[r.file as usize];
    if let Some(g) = &f.gone {
        return bad(format!("rollout {id}: its line is not shown: {}", g.why));
    }
    // A mapped file cut shorter since it was read would fault on the missing pages.
    if f.plain && std::fs::metadata(&f.path).map_or(true, |m| m.len() < f.indexed) {
        return bad(format!(
            "rollout {id}: {} is shorter than when it was read; start the viewer again",
            f.path.display()
        ));
    }
    Ok((r, f.line(r.line)))
}

/// One rollout: its place, reward and fields, token usage, and its transcript
/// (`response.output` from item `from`, [`ITEMS_PAGE`] items) with strings cut.
pub fn rollout(ix: &Index, id: usize, from: usize) -> Answer<Json> {
    let r = row_at(ix, id)?;
    let card = match &ix.files[r.file as usize].gone {
        Some(g) => Card { fields: lake_fields(g, r.line as usize - 1), ..Card::default() },
        None => line_card(ix, id, from)?,
    };
    let mut head = row_head(ix, id);
    head.extend([
        ("bytes", Json::Int(card.bytes as i64)),
        ("status", card.status),
        ("fields", Json::Obj(card.fields)),
        ("usage", card.usage),
        ("output_total", Json::Int(card.total as i64)),
        ("output_from", Json::Int(from.min(card.total) as i64)),
        ("output", card.output),
        ("trajectory", card.trajectory),
        ("cut", cuts(card.cut)),
    ]);
    Ok(obj(head))
}

/// What a rollout's card shows beyond its head: its line's size, the response's status
/// and usage, its other fields, one page of its output items and `ng_trajectory`, and
/// where strings were cut.
struct Card {
    bytes: usize,
    status: Json,
    fields: Vec<(Key, Json)>,
    usage: Json,
    total: usize,
    output: Json,
    trajectory: Json,
    cut: Vec<(String, usize)>,
}

impl Default for Card {
    fn default() -> Self {
        Card {
            bytes: 0,
            status: Json::Null,
            fields: Vec::new(),
            usage: Json::Null,
            total: 0,
            output: Json::Null,
            trajectory: Json::Null,
            cut: Vec::new(),
        }
    }
}

/// The card of rollout `id` from its line, output items from `from`.
fn line_card(ix: &Index, id: usize, from: usize) -> Answer<Card> {
    let (_, line) = row(ix, id)?;
    let v =
        crate::json::parse(line).map_err(|e| BadRequest(format!("rollout {id}: its line no longer parses: {e}")))?;
    let Json::Obj(members) = v else { return bad(format!("rollout {id}: its line is not an object")) };
    let mut budget = ANSWER_BUDGET;
    let mut c = Card { bytes: line.len(), ..Card::default() };
    for (k, v) in members {
        match &*k {
            "response" => {
                if let Json::Obj(resp) = v {
                    for (rk, rv) in resp {
                        match &*rk {
                            "usage" => c.usage = cap(rv, "/response/usage", &mut c.cut, &mut budget),
                            "status" => c.status = rv,
                            "output" => {
                                if let Json::Arr(items) = rv {
                                    c.total = items.len();
                                    let page: Vec<Json> = items
                                        .into_iter()
                                        .enumerate()
                                        .skip(from)
                                        .take(ITEMS_PAGE)
                                        .map(|(i, item)| {
                                            cap(item, &format!("/response/output/{i}"), &mut c.cut, &mut budget)
                                        })
                                        .collect();
                                    c.output = Json::Arr(page);
                                } else {
                                    c.output = cap(rv, "/response/output", &mut c.cut, &mut budget);
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
            "ng_trajectory" => c.trajectory = cap(v, "/ng_trajectory", &mut c.cut, &mut budget),
            k if SHOWN_APART.contains(&k) => {}
            _ => {
                let p = format!("/{}", pointer_escape(&k));
                let v = cap(v, &p, &mut c.cut, &mut budget);
                c.fields.push((k, v));
            }
        }
    }
    Ok(c)
}

/// The fields of row `row` of a lake sweep's rollouts table (served from the lake's
/// tables), as a card shows a line's other fields.
fn lake_fields(g: &super::index::Gone, row: usize) -> Vec<(Key, Json)> {
    g.rows
        .columns()
        .iter()
        .filter(|c| !SHOWN_APART.contains(&c.name().as_str()) && c.name().as_str() != crate::schema::AGENT)
        .filter_map(|c| {
            let v = match c.get(row).ok()? {
                polars::prelude::AnyValue::Null => return None,
                polars::prelude::AnyValue::Boolean(b) => Json::Bool(b),
                polars::prelude::AnyValue::String(s) => text(s),
                v if v.is_integer() => Json::Int(v.extract::<i64>()?),
                v => v.extract::<f64>().map_or_else(|| text(v.to_string()), num),
            };
            Some((key(c.name().as_str()), v))
        })
        .collect()
}

/// Why a file's lines are not shown (`null` when they are).
fn unavailable(f: &FileData) -> Json {
    f.gone.as_ref().map_or(Json::Null, |g| text(&g.why))
}

/// What names a rollout: its id, run, task, repeat, reward and where its line is (for a
/// lake sweep served from its tables: its row there, and why its line is not shown).
fn row_head(ix: &Index, id: usize) -> Vec<(&'static str, Json)> {
    let r = ix.rows[id];
    vec![
        ("id", Json::Int(id as i64)),
        ("run", text(&ix.runs[r.run as usize])),
        ("task", Json::Int(r.task)),
        ("rollout", Json::Int(r.rollout)),
        ("reward", opt((!r.reward.is_nan()).then_some(r.reward))),
        ("masked", Json::Bool(r.masked)),
        ("solved", Json::Bool(r.measured() && r.reward >= SOLVED)),
        ("file", text(ix.files[r.file as usize].path.display().to_string())),
        ("line", Json::Int(r.line as i64)),
        ("health", health_of_row(r.health)),
        ("unavailable", unavailable(&ix.files[r.file as usize])),
    ]
}

/// The first input row of `task` in a file's materialized inputs, parsed.
fn input_row(file: &FileData, task: i64) -> Option<Json> {
    let (inp, bytes) = (file.inputs.as_ref()?, file.inputs_bytes.as_ref()?);
    let i = (0..inp.len()).find(|&i| inp.task[i] == task)?;
    let (o, l) = (inp.offset[i] as usize, inp.len[i] as usize);
    crate::json::parse(&bytes[o..o + l]).ok()
}

/// A piece of one string of a rollout, by its JSON pointer, from character... byte
/// `from` (moved back to a character boundary), at most [`CHUNK`] bytes.
pub fn string_piece(ix: &Index, id: usize, pointer: &str, from: usize) -> Answer<Json> {
    let (_, line) = row(ix, id)?;
    let s = if let Some(rest) = pointer.strip_prefix("/prompt/") {
        let i: usize = rest.parse().map_err(|_| BadRequest(format!("ptr: {pointer:?} names no prompt message")))?;
        prompt_messages(line).and_then(|m| m.into_iter().nth(i)).map(|m| m.1)
    } else if let Some(field) = pointer.strip_prefix("/fields/") {
        // A dataset field: from the task's input row.
        let r = ix.rows[id];
        input_row(&ix.files[r.file as usize], r.task).and_then(|v| v.get(field).cloned()).map(|v| match v {
            Json::Str(s) => s,
            other => compact(&other),
        })
    } else {
        let v = crate::json::parse(line).map_err(|e| BadRequest(format!("rollout {id}: {e}")))?;
        resolve(&v, pointer).map(|v| match v {
            Json::Str(s) => s.clone(),
            other => compact(other),
        })
    };
    let Some(s) = s else { return bad(format!("ptr: {pointer:?} names no value of rollout {id}")) };
    Ok(piece(&s, from))
}

/// A piece of a rollout's raw line, from byte `from`.
pub fn raw(ix: &Index, id: usize, from: usize) -> Answer<Json> {
    let (r, line) = row(ix, id)?;
    let f = &ix.files[r.file as usize];
    let text = String::from_utf8_lossy(line);
    let mut p = piece(&text, from);
    p.set("file", Json::Str(f.path.display().to_string()));
    p.set("line", Json::Int(r.line as i64));
    Ok(p)
}

/// `s` from byte `from` (moved back to a character boundary), at most [`CHUNK`] bytes.
fn piece(s: &str, from: usize) -> Json {
    let mut a = from.min(s.len());
    while !s.is_char_boundary(a) {
        a -= 1;
    }
    let mut b = (a + CHUNK).min(s.len());
    while !s.is_char_boundary(b) {
        b -= 1;
    }
    obj(vec![
        ("from", Json::Int(a as i64)),
        ("to", Json::Int(b as i64)),
        ("total", Json::Int(s.len() as i64)),
        ("text", text(&s[a..b])),
    ])
}

fn compact(v: &Json) -> String {
    let mut out = Vec::new();
    crate::json::write_indented(&mut out, v, 0);
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON pointer's token for a key (`~` and `/` escaped).
fn pointer_escape(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

/// The value a JSON pointer names.
fn resolve<'a>(v: &'a Json, pointer: &str) -> Option<&'a Json> {
    let mut cur = v;
    if pointer.is_empty() {
        return Some(cur);
    }
    for tok in pointer.strip_prefix('/')?.split('/') {
        let tok = tok.replace("~1", "/").replace("~0", "~");
        cur = match cur {
            Json::Obj(m) => m.iter().find(|(k, _)| **k == *tok).map(|(_, v)| v)?,
            Json::Arr(a) => a.get(tok.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// `v` with long strings and arrays cut, each cut recorded as (pointer, whole size).
fn cap(v: Json, at: &str, cut: &mut Vec<(String, usize)>, budget: &mut usize) -> Json {
    match v {
        Json::Str(s) => {
            let keep = STRING_CAP.min(*budget);
            if s.len() <= keep {
                *budget -= s.len();
                return Json::Str(s);
            }
            let mut end = keep;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            *budget -= end;
            cut.push((at.to_string(), s.len()));
            Json::Str(s[..end].to_string())
        }
        Json::Arr(items) => {
            let n = items.len();
            if n > ARRAY_CAP {
                cut.push((at.to_string(), n));
            }
            Json::Arr(
                items
                    .into_iter()
                    .take(ARRAY_CAP)
                    .enumerate()
                    .map(|(i, x)| cap(x, &format!("{at}/{i}"), cut, budget))
                    .collect(),
            )
        }
        Json::Obj(members) => Json::Obj(
            members
                .into_iter()
                .map(|(k, x)| {
                    let p = format!("{at}/{}", pointer_escape(&k));
                    (k, cap(x, &p, cut, budget))
                })
                .collect(),
        ),
        other => other,
    }
}

/// The (run, task) pairs of the `tasks` table that a SQL `WHERE` expression keeps.
pub fn sql_filter(tasks: &polars::prelude::DataFrame, expr: &str) -> Answer<HashSet<(String, i64)>> {
    use polars::prelude::*;
    let lower = expr.to_lowercase();
    // A filter over the table's columns: no subquery, no table function that would
    // read a file the request names.
    for word in ["select", "read_", "from", ";"] {
        if lower.contains(word) {
            return bad(format!(
                "sql: give a WHERE expression over the tasks table's columns, without {word:?} (no subqueries, table functions or statements)"
            ));
        }
    }
    let q = format!("SELECT run, _ng_task_index FROM tasks WHERE {expr}");
    let df = crate::query::run_sql(vec![("tasks", tasks.clone().lazy())], &q)
        .map_err(|e| BadRequest(format!("sql: {e}")))?;
    let runs = df.column("run").and_then(|c| c.cast(&DataType::String)).map_err(|e| BadRequest(format!("sql: {e}")))?;
    let idx = df
        .column("_ng_task_index")
        .and_then(|c| c.cast(&DataType::Int64))
        .map_err(|e| BadRequest(format!("sql: {e}")))?;
    let (runs, idx) =
        (runs.str().map_err(|e| BadRequest(e.to_string()))?, idx.i64().map_err(|e| BadRequest(e.to_string()))?);
    Ok(runs.iter().zip(idx.iter()).filter_map(|(r, t)| Some((r?.to_string(), t?))).collect())
}
