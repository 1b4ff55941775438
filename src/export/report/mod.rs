//! The sweep report: one self-contained HTML page (inline CSS and SVG, nothing fetched)
//! rendered from what `aggregate` and `compare` computed. Every table cell that shows a
//! number carries it at full precision in `data-value` (and in its tooltip), with
//! `data-key` naming it, so the page can be checked by a program as well as read.

pub mod svg;
pub mod trend;

use std::collections::BTreeMap;
use std::fmt::Write;

use self::svg::{colour, esc, Interval, Series};
use crate::metrics::compare::Report;

/// One run as the page shows it: what `aggregate` computed for it (absent for a
/// rollouts table read from Parquet, which `aggregate` does not take).
#[derive(Debug, Clone, Default)]
pub struct RunFigures {
    /// Mean of the metric over the run's measured rollouts (`mean/<metric>`).
    pub pooled: Option<f64>,
    /// Mean of the per-repeat means and its 95% interval.
    pub across: Option<(f64, Option<(f64, f64)>)>,
    /// Per repeat: its rollout index, mean and 95% interval.
    pub repeats: Vec<svg::Point>,
    /// Mean output tokens per rollout, where rollouts report usage.
    pub output_tokens: Option<f64>,
    pub num_repeats: Option<i64>,
}

/// One of the hardest tasks.
#[derive(Debug, Clone)]
pub struct HardTask {
    pub task: i64,
    /// Per run: the task's mean, when the run measured it.
    pub means: Vec<Option<f64>>,
    /// The start of the task's input, when inputs were given.
    pub excerpt: Option<String>,
}

/// Everything the page shows.
pub struct Page {
    pub metric: String,
    /// When the page was made, as `YYYY-MM-DD HH:MM:SS UTC`.
    pub generated: String,
    pub version: String,
    /// The files read, as shown.
    pub files: Vec<String>,
    pub rollouts: usize,
    pub tasks: usize,
    pub repeats: usize,
    /// Input rows without a rollout (with inputs).
    pub missing: Option<usize>,
    /// Per run (in `compare.runs` order): failed attempts without a result, by class
    /// (from the failures sidecars beside the rollouts files).
    pub failures: Vec<BTreeMap<String, usize>>,
    /// `compare`'s report on the metric's task means, with sizing answers.
    pub compare: Report,
    /// Per run, in `compare.runs` order.
    pub figures: Vec<RunFigures>,
    /// `compare`'s report on each task's pass@k, for k = 1, 2, …
    pub pass_at: Vec<Report>,
    /// Whether every measured value is 0 or 1.
    pub binary: bool,
    /// Per run: each task's mean.
    pub task_means: Vec<BTreeMap<i64, f64>>,
    pub hardest: Vec<HardTask>,
    /// Every warning of the run, with its count.
    pub warnings: Vec<(String, usize)>,
}

/// A table cell for a number: rounded to `digits` decimals for reading, at full
/// precision in `data-value` and the tooltip; a dash when there is none.
fn num(key: &str, v: Option<f64>, digits: usize) -> String {
    match v {
        Some(v) if v.is_finite() => {
            format!(r#"<td class="n" data-key="{key}" data-value="{v:?}" title="{v:?}">{v:.digits$}</td>"#)
        }
        Some(v) => format!(r#"<td class="n" data-key="{key}" data-value="{v:?}">{v}</td>"#),
        None => format!(r#"<td class="n" data-key="{key}">–</td>"#),
    }
}

/// A table cell for a count.
fn count(key: &str, v: usize) -> String {
    format!(r#"<td class="n" data-key="{key}" data-value="{v}">{v}</td>"#)
}

/// A 95% interval as text.
fn ci_text(ci: Option<(f64, f64)>, digits: usize) -> String {
    ci.map_or_else(|| "–".into(), |(a, b)| format!("[{a:.digits$}, {b:.digits$}]"))
}

/// A table cell for a p-value (tiny ones shown as `<0.0001`).
fn p_cell(p: Option<f64>) -> String {
    p_cell_as("p_value", p)
}

/// [`p_cell`] under another key (an adjusted p-value).
fn p_cell_as(key: &str, p: Option<f64>) -> String {
    match p {
        Some(v) if v < 1e-4 => {
            format!(r#"<td class="n" data-key="{key}" data-value="{v:?}" title="{v:?}">&lt;0.0001</td>"#)
        }
        v => num(key, v, 4),
    }
}

const CSS: &str = "
body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',Arial,sans-serif;color:#1d2330;background:#f5f6f8;margin:0}
main{max-width:1180px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:0 0 10px;border-bottom:2px solid #0072B2;padding-bottom:4px}
section{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:18px 22px;margin:18px 0}
.meta{color:#4a5365;margin:0}.meta b{color:#1d2330}
dl.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:8px 16px;margin:14px 0 0}
dl.facts div{background:#f0f4f9;border-radius:6px;padding:8px 12px}dl.facts dt{font-size:12px;color:#4a5365;text-transform:uppercase;letter-spacing:.04em}dl.facts dd{margin:0;font-size:20px;font-weight:600}
table{border-collapse:collapse;width:100%;margin:10px 0;font-size:14px}
th,td{padding:5px 9px;white-space:nowrap;border-bottom:1px solid #e4e7ec;text-align:left;vertical-align:top}
th{background:#f0f4f9;font-weight:600}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.swatch{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px}
.note{color:#4a5365;font-size:14px}.warn li{margin:3px 0;font-size:13.5px}
.excerpt{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px;color:#333;white-space:pre-wrap;word-break:break-word}
svg.chart{display:block;max-width:1100px;margin:6px 0}
svg .ct{font-size:16px;font-weight:600;fill:#1d2330}svg .lg,svg .tk{font-size:12.5px;fill:#333}
svg .al{font-size:13.5px;fill:#1d2330}svg .rl{font-size:13.5px;fill:#1d2330}svg .hc{font-size:11px}
svg .grid{stroke:#e6e9ee}svg .ax{stroke:#555}svg .ref{stroke:#555;stroke-dasharray:5 4}
@media print{body{background:#fff}main{max-width:none;padding:0}section{break-inside:avoid;border:none;padding:6px 0}}
";

/// The page as HTML.
pub fn render(p: &Page) -> String {
    let mut h = String::with_capacity(64 << 10);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>rollstat report: {}</title><style>{CSS}</style></head><body><main>",
        esc(&p.metric)
    );
    header(&mut h, p);
    leaderboard(&mut h, p);
    baseline(&mut h, p);
    pass_at_k(&mut h, p);
    difficulty(&mut h, p);
    repeat_noise(&mut h, p);
    cost(&mut h, p);
    coverage(&mut h, p);
    h.push_str("</main></body></html>\n");
    h
}

/// Opens a section with its id and heading.
fn section(h: &mut String, id: &str, title: &str) {
    let _ = write!(h, r#"<section id="{id}"><h2>{}</h2>"#, esc(title));
}

/// A run's name with its colour.
fn run_name(i: usize, name: &str) -> String {
    format!(r#"<span class="swatch" style="background:{}"></span>{}"#, colour(i), esc(name))
}

fn header(h: &mut String, p: &Page) {
    let masked: usize = p.compare.runs.iter().map(|r| r.masked).sum();
    let no_value: usize = p.compare.runs.iter().map(|r| r.no_value).sum();
    let _ = write!(
        h,
        r#"<section id="header"><h1>Sweep report: <code>{}</code></h1><p class="meta">Made by rollstat {} on <b>{}</b> from {}.</p><dl class="facts">"#,
        esc(&p.metric),
        esc(&p.version),
        esc(&p.generated),
        p.files.iter().map(|f| format!("<code>{}</code>", esc(f))).collect::<Vec<_>>().join(", ")
    );
    let mut fact = |key: &str, label: &str, v: usize| {
        let _ = write!(h, r#"<div><dt>{label}</dt><dd data-key="{key}" data-value="{v}">{v}</dd></div>"#);
    };
    fact("rollouts", "rollouts", p.rollouts);
    fact("agents", "runs", p.compare.runs.len());
    fact("tasks", "tasks", p.tasks);
    fact("repeats", "repeats", p.repeats);
    fact("masked", "masked", masked);
    fact("no_value", "without a value", no_value);
    if let Some(m) = p.missing {
        fact("missing", "missing", m);
    }
    h.push_str("</dl></section>");
}

fn leaderboard(h: &mut String, p: &Page) {
    section(h, "leaderboard", "Leaderboard");
    let mut order: Vec<usize> = (0..p.compare.runs.len()).collect();
    let mean = |i: usize| p.compare.runs[i].est.map_or(f64::NEG_INFINITY, |e| e.mean);
    order.sort_by(|&a, &b| mean(b).total_cmp(&mean(a)));
    let rows: Vec<Interval> = order
        .iter()
        .filter_map(|&i| {
            let r = &p.compare.runs[i];
            Some(Interval { label: r.name.clone(), est: r.est?.mean, ci: r.ci, colour: colour(i) })
        })
        .collect();
    h.push_str(&svg::forest(
        &format!("Mean {} over tasks, with 95% intervals", p.metric),
        &format!("mean {} per task (each task weighs the same)", p.metric),
        &rows,
        None,
    ));
    let k = p.pass_at.len();
    let _ = write!(
        h,
        r#"<table><thead><tr><th>run</th><th class="n">tasks</th><th class="n">mean over tasks</th><th class="n">95% interval</th><th class="n">pooled mean</th><th class="n">across repeats</th><th class="n">95% interval</th><th class="n">pass@1</th><th class="n">pass@{k}</th></tr></thead><tbody>"#
    );
    for &i in &order {
        let r = &p.compare.runs[i];
        let f = &p.figures[i];
        let pass = |k: usize| p.pass_at.get(k.wrapping_sub(1)).and_then(|rep| rep.runs[i].est).map(|e| e.mean);
        let _ = write!(
            h,
            r#"<tr data-run="{}"><td>{}</td>{}{}<td class="n">{}</td>{}{}<td class="n">{}</td>{}{}</tr>"#,
            esc(&r.name),
            run_name(i, &r.name),
            count("tasks", r.tasks),
            num("mean", r.est.map(|e| e.mean), 4),
            ci_text(r.ci, 4),
            num("pooled_mean", f.pooled, 4),
            num("across_repeats_mean", f.across.map(|a| a.0), 4),
            ci_text(f.across.and_then(|a| a.1), 4),
            num("pass_at_1", pass(1), 4),
            num("pass_at_k", pass(k), 4),
        );
    }
    let _ = write!(
        h,
        "</tbody></table><p class=\"note\">Mean over tasks: each task's mean {m} over its measured rollouts, averaged over tasks, \
with a task-level 95% interval (Wilson's for pass/fail task scores). Pooled: the mean over all measured rollouts. Across repeats: \
the mean of the per-repeat means, with its t interval over repeats. pass@k: NeMo Gym's estimator per task, averaged over the tasks \
with at least k measured rollouts.</p></section>",
        m = esc(&p.metric)
    );
}

fn baseline(h: &mut String, p: &Page) {
    let c = &p.compare;
    section(h, "baseline", "Against the baseline");
    if c.comparisons.is_empty() {
        h.push_str(r#"<p class="note">One run only: nothing to compare against.</p></section>"#);
        return;
    }
    let base = &c.runs[c.baseline].name;
    let rows: Vec<Interval> = c
        .comparisons
        .iter()
        .filter_map(|x| {
            Some(Interval {
                label: c.runs[x.run].name.clone(),
                est: x.stats.as_ref()?.diff.mean,
                ci: x.ci,
                colour: colour(x.run),
            })
        })
        .collect();
    h.push_str(&svg::forest(
        &format!("Paired difference in mean {} against {base}, with 95% intervals", p.metric),
        &format!("difference in mean {} per task (run − {base})", p.metric),
        &rows,
        Some(0.0),
    ));
    h.push_str(
        r#"<table><thead><tr><th>run</th><th class="n">paired tasks</th><th class="n">difference</th><th class="n">95% interval</th><th class="n">p-value</th><th class="n">wins</th><th class="n">losses</th><th class="n">ties</th><th class="n">detectable difference</th></tr></thead><tbody>"#,
    );
    for x in &c.comparisons {
        let s = x.stats.as_ref();
        let name = &c.runs[x.run].name;
        let _ = write!(
            h,
            r#"<tr data-run="{}"><td>{}</td>{}{}<td class="n">{}</td>{}{}{}{}{}</tr>"#,
            esc(name),
            run_name(x.run, name),
            count("paired_tasks", x.paired_tasks),
            num("diff", s.map(|s| s.diff.mean), 4),
            ci_text(x.ci, 4),
            p_cell(s.and_then(|s| s.p)),
            num("wins", s.map(|s| s.wins as f64), 0),
            num("losses", s.map(|s| s.losses as f64), 0),
            num("ties", s.map(|s| s.ties as f64), 0),
            num("mde", x.mde, 4),
        );
    }
    let _ = write!(
        h,
        "</tbody></table><p class=\"note\">Paired on the tasks both runs measured: the mean of the per-task differences with its \
t interval and two-sided p-value; wins, losses and ties count tasks. The detectable difference is the smallest the eval would find \
with 80% power in a two-sided 5% test, given the observed spread.</p>"
    );
    for x in &c.comparisons {
        let (a, b) = (&p.task_means[c.baseline], &p.task_means[x.run]);
        let pts: Vec<(f64, f64)> = a.iter().filter_map(|(t, &va)| Some((va, *b.get(t)?))).collect();
        let name = &c.runs[x.run].name;
        h.push_str(&svg::heat(
            &format!("Task means: {name} against {base} ({} tasks)", pts.len()),
            &format!("{base}: mean {} per task", p.metric),
            &format!("{name}: mean {} per task", p.metric),
            &pts,
            if pts.len() > 400 { 25 } else { 12 },
        ));
    }
    h.push_str(r#"<p class="note">Each cell counts the tasks whose two means fall in it; above the dashed diagonal the run beats the baseline on the task.</p></section>"#);
}

fn pass_at_k(h: &mut String, p: &Page) {
    section(h, "pass-at-k", "pass@k");
    let series: Vec<Series> = p
        .compare
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| Series {
            name: r.name.clone(),
            colour: colour(i),
            points: p
                .pass_at
                .iter()
                .enumerate()
                .filter_map(|(k, rep)| Some(((k + 1) as f64, rep.runs[i].est?.mean, rep.runs[i].ci)))
                .collect(),
        })
        .collect();
    if p.pass_at.len() < 2 {
        h.push_str(r#"<p class="note">One measured rollout per task at most: pass@k needs k rollouts of a task, so there is no curve to draw.</p></section>"#);
        return;
    }
    h.push_str(&svg::lines(
        "pass@k by k, with 95% intervals over tasks",
        "k (rollouts per task)",
        "pass@k",
        &series,
        true,
    ));
    if p.binary {
        h.push_str(r#"<p class="note">pass@k: the chance that at least one of k rollouts of a task passes (NeMo Gym's unbiased estimator), averaged over tasks.</p>"#);
    } else {
        let _ = write!(
            h,
            r#"<p class="note">{} is not a pass/fail score (values other than 0 and 1 occur), so pass@k here is the best of a task's first k rollouts, as NeMo Gym computes it for such scores, averaged over tasks.</p>"#,
            esc(&p.metric)
        );
    }
    h.push_str("</section>");
}

/// Where a task mean falls: never, sometimes or always solved.
fn solved_class(v: f64) -> usize {
    if v <= 0.0 {
        0
    } else if v >= 1.0 {
        2
    } else {
        1
    }
}

fn difficulty(h: &mut String, p: &Page) {
    section(h, "difficulty", "Task difficulty");
    let runs = &p.compare.runs;
    let (lo, hi) = p
        .task_means
        .iter()
        .flat_map(|m| m.values().copied())
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if lo.is_finite() {
        let unit = lo >= 0.0 && hi <= 1.0;
        let bins = 10;
        let (lo, hi) = if unit { (0.0, 1.0) } else { (lo, hi.max(lo + 1e-9)) };
        let cats: Vec<String> = (0..bins)
            .map(|b| {
                let a = lo + (hi - lo) * b as f64 / bins as f64;
                format!("{a:.2}–{:.2}", a + (hi - lo) / bins as f64)
            })
            .collect();
        let series: Vec<(String, &'static str, Vec<f64>)> = p
            .task_means
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut c = vec![0.0; bins];
                for &v in m.values().filter(|v| v.is_finite()) {
                    c[(((v - lo) / (hi - lo) * bins as f64) as usize).min(bins - 1)] += 1.0;
                }
                (runs[i].name.clone(), colour(i), c)
            })
            .collect();
        h.push_str(&svg::bars(
            &format!("Tasks by their mean {}", p.metric),
            &format!("mean {} per task", p.metric),
            "tasks",
            &cats,
            &series,
        ));
        if unit {
            h.push_str(r#"<table><thead><tr><th>run</th><th class="n">never solved (0)</th><th class="n">sometimes</th><th class="n">always solved (1)</th></tr></thead><tbody>"#);
            for (i, m) in p.task_means.iter().enumerate() {
                let mut c = [0usize; 3];
                for &v in m.values() {
                    c[solved_class(v)] += 1;
                }
                let _ = write!(
                    h,
                    r#"<tr data-run="{}"><td>{}</td>{}{}{}</tr>"#,
                    esc(&runs[i].name),
                    run_name(i, &runs[i].name),
                    count("never", c[0]),
                    count("sometimes", c[1]),
                    count("always", c[2])
                );
            }
            h.push_str("</tbody></table>");
        }
    }
    if !p.hardest.is_empty() {
        h.push_str(r#"<h3>Hardest tasks</h3><table><thead><tr><th class="n">task</th>"#);
        for (i, r) in runs.iter().enumerate() {
            let _ = write!(h, r#"<th class="n">{}</th>"#, run_name(i, &r.name));
        }
        h.push_str("<th>input (start)</th></tr></thead><tbody>");
        for t in &p.hardest {
            let _ = write!(h, r#"<tr data-task="{}"><td class="n">{}</td>"#, t.task, t.task);
            for (i, m) in t.means.iter().enumerate() {
                h.push_str(&num(&format!("mean_{i}"), *m, 2));
            }
            let _ =
                write!(h, r#"<td class="excerpt">{}</td></tr>"#, t.excerpt.as_deref().map_or_else(|| "–".into(), esc));
        }
        h.push_str("</tbody></table><p class=\"note\">The tasks with the lowest mean over runs; inputs are shown when materialized inputs were given.</p>");
    }
    h.push_str("</section>");
}

fn repeat_noise(h: &mut String, p: &Page) {
    section(h, "repeats", "Repeat noise");
    let series: Vec<Series> = p
        .figures
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.repeats.is_empty())
        .map(|(i, f)| Series { name: p.compare.runs[i].name.clone(), colour: colour(i), points: f.repeats.clone() })
        .collect();
    if series.is_empty() {
        h.push_str(
            r#"<p class="note">Per-repeat means come from the rollouts JSONL; none was read here.</p></section>"#,
        );
        return;
    }
    h.push_str(&svg::lines(
        &format!("Mean {} per repeat, with 95% intervals", p.metric),
        "repeat (_ng_rollout_index)",
        &format!("mean {}", p.metric),
        &series,
        true,
    ));
    h.push_str(r#"<table><thead><tr><th>run</th><th class="n">repeats</th><th class="n">mean across repeats</th><th class="n">95% interval</th><th class="n">lowest repeat</th><th class="n">highest repeat</th></tr></thead><tbody>"#);
    for (i, f) in p.figures.iter().enumerate() {
        let (lo, hi) = f.repeats.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), r| (a.min(r.1), b.max(r.1)));
        let _ = write!(
            h,
            r#"<tr data-run="{}"><td>{}</td>{}{}<td class="n">{}</td>{}{}</tr>"#,
            esc(&p.compare.runs[i].name),
            run_name(i, &p.compare.runs[i].name),
            count("repeats", f.repeats.len()),
            num("across_repeats_mean", f.across.map(|a| a.0), 4),
            ci_text(f.across.and_then(|a| a.1), 4),
            num("repeat_min", lo.is_finite().then_some(lo), 4),
            num("repeat_max", hi.is_finite().then_some(hi), 4),
        );
    }
    h.push_str("</tbody></table><p class=\"note\">How much the score moves from one repeat of the whole eval to the next: the interval across repeats is a t interval over the per-repeat means.</p></section>");
}

fn cost(h: &mut String, p: &Page) {
    section(h, "cost", "Cost");
    let rows: Vec<(usize, f64, Option<f64>)> =
        p.figures.iter().enumerate().filter_map(|(i, f)| Some((i, f.output_tokens?, f.pooled))).collect();
    if rows.is_empty() {
        h.push_str(r#"<p class="note">No rollout reports token usage (<code>usage.output_tokens</code>), so there is no cost to show.</p></section>"#);
        return;
    }
    let pts: Vec<(String, &'static str, f64, f64)> =
        rows.iter().filter_map(|&(i, t, m)| Some((p.compare.runs[i].name.clone(), colour(i), t, m?))).collect();
    h.push_str(&svg::scatter(
        &format!("Mean {} against output tokens per rollout", p.metric),
        "mean output tokens per rollout",
        &format!("mean {}", p.metric),
        &pts,
    ));
    let _ = write!(
        h,
        r#"<table><thead><tr><th>run</th><th class="n">output tokens per rollout</th><th class="n">pooled mean {}</th><th class="n">output tokens per correct answer</th></tr></thead><tbody>"#,
        esc(&p.metric)
    );
    for (i, t, m) in rows {
        let per = m.filter(|&m| m > 0.0).map(|m| t / m);
        let _ = write!(
            h,
            r#"<tr data-run="{}"><td>{}</td>{}{}{}</tr>"#,
            esc(&p.compare.runs[i].name),
            run_name(i, &p.compare.runs[i].name),
            num("output_tokens", Some(t), 1),
            num("pooled_mean", m, 4),
            num("tokens_per_correct", per, 1),
        );
    }
    let _ = write!(
        h,
        "</tbody></table><p class=\"note\">Per correct answer: mean output tokens per rollout divided by the pooled mean {} (for a pass/fail score, the output tokens spent per passing rollout).</p></section>",
        esc(&p.metric)
    );
}

fn coverage(h: &mut String, p: &Page) {
    section(h, "coverage", "Coverage and warnings");
    let failed = |i: usize| p.failures.get(i).map_or(0, |f| f.values().sum::<usize>());
    let any_failed = (0..p.compare.runs.len()).any(|i| failed(i) > 0);
    h.push_str(r#"<table><thead><tr><th>run</th><th class="n">tasks measured</th><th class="n">rollouts measured</th><th class="n">masked</th><th class="n">without a value</th>"#);
    if any_failed {
        h.push_str(r#"<th class="n">failed</th>"#);
    }
    h.push_str(r#"<th class="n">completion</th></tr></thead><tbody>"#);
    for (i, r) in p.compare.runs.iter().enumerate() {
        let all = r.rollouts + r.masked + r.no_value;
        let pct = (all > 0).then(|| 100.0 * r.rollouts as f64 / all as f64);
        let _ = write!(
            h,
            r#"<tr data-run="{}"><td>{}</td>{}{}{}{}{}{}</tr>"#,
            esc(&r.name),
            run_name(i, &r.name),
            count("tasks", r.tasks),
            count("rollouts", r.rollouts),
            count("masked", r.masked),
            count("no_value", r.no_value),
            if any_failed { count("failed", failed(i)) } else { String::new() },
            num("completion_pct", pct, 1),
        );
    }
    h.push_str("</tbody></table>");
    if any_failed {
        h.push_str(r#"<p class="note">Failed attempts no result replaced, by class (from the runs' <code>_failures.jsonl</code> sidecars; they are not in the scores above):</p><ul class="failures">"#);
        for (i, r) in p.compare.runs.iter().enumerate() {
            let Some(by) = p.failures.get(i).filter(|f| !f.is_empty()) else { continue };
            let classes: Vec<String> = by.iter().map(|(c, n)| format!("{n} {}", esc(c))).collect();
            let _ = write!(h, r#"<li data-run="{}">{}: {}</li>"#, esc(&r.name), esc(&r.name), classes.join(", "));
        }
        h.push_str("</ul>");
    }
    if let Some(m) = p.missing {
        let _ = write!(h, r#"<p class="note">{m} materialized input row(s) have no rollout.</p>"#);
    }
    if p.warnings.is_empty() {
        h.push_str(r#"<p class="note">No warnings.</p>"#);
    } else {
        let n: usize = p.warnings.iter().map(|w| w.1).sum();
        let _ = write!(h, r#"<p class="note">{n} warning(s), as printed to stderr:</p><ul class="warn">"#);
        for (m, c) in &p.warnings {
            let times = if *c > 1 { format!(" ({c} times)") } else { String::new() };
            let _ = write!(h, "<li>{}{times}</li>", esc(m));
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>");
}
