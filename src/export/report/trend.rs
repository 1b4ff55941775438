//! The trend report: one self-contained HTML page over a lake of sweeps — each run's
//! metric across sweeps with its 95% interval, and for each pair of consecutive sweeps
//! the paired difference on the tasks both measured, marked where it is beyond noise
//! after Holm's correction over every pair shown. Numbers carry `data-key` and
//! `data-value` as on the sweep report.

use std::fmt::Write;

use super::svg::{self, colour, esc, Series};
use super::{ci_text, count, num, p_cell, p_cell_as, run_name, section, CSS};
use crate::stats::paired::Paired;

/// The level below which a Holm-adjusted p-value marks a change as beyond noise.
pub const ALPHA: f64 = 0.05;

/// One sweep as the page shows it.
#[derive(Debug, Clone)]
pub struct TrendSweep {
    pub id: String,
    pub created_at: String,
    pub labels: Vec<(String, String)>,
    /// Where it sits on the x axis: the `--by` label's value, or its position.
    pub x: f64,
}

/// A run's value in one sweep.
#[derive(Debug, Clone)]
pub struct TrendPoint {
    /// Index into the page's sweeps.
    pub sweep: usize,
    pub tasks: usize,
    pub mean: f64,
    pub ci: Option<(f64, f64)>,
}

/// A run's change from one sweep to the next one it was measured in.
#[derive(Debug, Clone)]
pub struct TrendStep {
    pub from: usize,
    pub to: usize,
    /// Tasks measured in one of the two sweeps only (left out of the pairing, shown as
    /// `unpaired`).
    pub only_from: usize,
    pub only_to: usize,
    pub paired: Option<Paired>,
    pub ci: Option<(f64, f64)>,
    /// Holm-adjusted p-value over every step of the page.
    pub p_holm: Option<f64>,
}

impl TrendStep {
    /// Whether the change is beyond noise: its Holm-adjusted p-value is below [`ALPHA`].
    pub fn beyond_noise(&self) -> bool {
        self.p_holm.is_some_and(|p| p < ALPHA)
    }
}

/// One run (agent) across the sweeps.
#[derive(Debug, Clone)]
pub struct TrendRun {
    pub name: String,
    pub points: Vec<TrendPoint>,
    pub steps: Vec<TrendStep>,
}

/// Everything the page shows.
pub struct TrendPage {
    /// The tasks table's column the page is about (`mean/reward`).
    pub metric: String,
    pub generated: String,
    pub version: String,
    pub lake: String,
    /// The label the sweeps are ordered and placed by, when given.
    pub by: Option<String>,
    /// Whether the x axis is the sweeps' positions (not a numeric label).
    pub positional: bool,
    pub sweeps: Vec<TrendSweep>,
    pub runs: Vec<TrendRun>,
    pub warnings: Vec<(String, usize)>,
}

/// The page as HTML.
pub fn render(p: &TrendPage) -> String {
    let mut h = String::with_capacity(32 << 10);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>rollstat trend: {}</title><style>{CSS}.beyond{{font-weight:600;color:#b5179e}}</style></head><body><main>",
        esc(&p.metric)
    );
    header(&mut h, p);
    chart(&mut h, p);
    changes(&mut h, p);
    sweeps(&mut h, p);
    if !p.warnings.is_empty() {
        section(&mut h, "warnings", "Warnings");
        h.push_str(r#"<ul class="warn">"#);
        for (w, n) in &p.warnings {
            let times = if *n > 1 { format!(" (×{n})") } else { String::new() };
            let _ = write!(h, "<li>{}{times}</li>", esc(w));
        }
        h.push_str("</ul></section>");
    }
    h.push_str("</main></body></html>\n");
    h
}

fn header(h: &mut String, p: &TrendPage) {
    let _ = write!(
        h,
        r#"<section id="header"><h1>Trend: <code>{}</code></h1><p class="meta">Made by rollstat {} on <b>{}</b> from the lake <code>{}</code>{}.</p><dl class="facts">"#,
        esc(&p.metric),
        esc(&p.version),
        esc(&p.generated),
        esc(&p.lake),
        p.by.as_ref().map_or(String::new(), |b| format!(", sweeps ordered by <code>{}</code>", esc(b)))
    );
    let steps: usize = p.runs.iter().map(|r| r.steps.len()).sum();
    let beyond: usize = p.runs.iter().flat_map(|r| &r.steps).filter(|s| s.beyond_noise()).count();
    for (key, label, v) in [
        ("sweeps", "sweeps", p.sweeps.len()),
        ("runs", "runs", p.runs.len()),
        ("changes", "changes", steps),
        ("beyond_noise", "beyond noise", beyond),
    ] {
        let _ = write!(h, r#"<div><dt>{label}</dt><dd data-key="{key}" data-value="{v}">{v}</dd></div>"#);
    }
    h.push_str("</dl></section>");
}

fn chart(h: &mut String, p: &TrendPage) {
    section(h, "trend", &format!("{} across sweeps", p.metric));
    let series: Vec<Series> = p
        .runs
        .iter()
        .enumerate()
        .map(|(i, r)| Series {
            name: r.name.clone(),
            colour: colour(i),
            points: r.points.iter().map(|pt| (p.sweeps[pt.sweep].x, pt.mean, pt.ci)).collect(),
        })
        .collect();
    let x_label = match (&p.by, p.positional) {
        (Some(b), false) => b.clone(),
        (Some(b), true) => format!("sweep (in order of {b})"),
        (None, _) => "sweep (oldest first)".to_string(),
    };
    h.push_str(&svg::lines(
        &format!("{} over tasks, per sweep, with 95% intervals", p.metric),
        &x_label,
        &p.metric,
        &series,
        p.positional,
    ));
    h.push_str(r#"<p class="note">Each point is a run's mean over its tasks' values in one sweep (each task weighs the same), with the interval <code>rollstat compare</code> gives it.</p></section>"#);
}

fn changes(h: &mut String, p: &TrendPage) {
    section(h, "changes", "Changes between consecutive sweeps");
    let _ = write!(
        h,
        r#"<p class="note">For each run, each sweep against the one before it: the mean paired difference over the tasks both measured (paired by what the task asks, its fingerprint), as <code>rollstat compare --pair-by fingerprint</code> computes it. <span class="beyond">Marked</span> where the Holm-adjusted p-value over all {} changes shown is below {ALPHA}.</p>"#,
        p.runs.iter().map(|r| r.steps.len()).sum::<usize>()
    );
    h.push_str(r#"<div style="overflow-x:auto"><table><thead><tr><th>run</th><th>from</th><th>to</th><th class="n">paired tasks</th><th class="n">difference</th><th>95% interval</th><th class="n">p</th><th class="n">Holm p</th><th class="n">wins</th><th class="n">losses</th><th class="n">unpaired</th><th>verdict</th></tr></thead><tbody>"#);
    for (i, r) in p.runs.iter().enumerate() {
        for s in &r.steps {
            let d = s.paired.as_ref();
            let verdict = match (d, s.beyond_noise()) {
                (None, _) => "no task in both",
                (_, true) if d.is_some_and(|d| d.diff.mean > 0.0) => "up, beyond noise",
                (_, true) => "down, beyond noise",
                _ => "within noise",
            };
            let _ = write!(
                h,
                r#"<tr data-run="{}" data-from="{}" data-to="{}"{}><td>{}</td><td><code>{}</code></td><td><code>{}</code></td>{}{}<td>{}</td>{}{}{}{}{}<td data-key="verdict">{verdict}</td></tr>"#,
                esc(&r.name),
                esc(&p.sweeps[s.from].id),
                esc(&p.sweeps[s.to].id),
                if s.beyond_noise() { r#" class="beyond""# } else { "" },
                run_name(i, &r.name),
                esc(&p.sweeps[s.from].id),
                esc(&p.sweeps[s.to].id),
                count("paired_tasks", d.map_or(0, |d| d.diff.n)),
                num("diff", d.map(|d| d.diff.mean), 4),
                ci_text(s.ci, 4),
                p_cell(d.and_then(|d| d.p)),
                p_cell_as("p_value_holm", s.p_holm),
                count("wins", d.map_or(0, |d| d.wins)),
                count("losses", d.map_or(0, |d| d.losses)),
                count("unpaired", s.only_from + s.only_to),
            );
        }
    }
    h.push_str("</tbody></table></div></section>");
}

fn sweeps(h: &mut String, p: &TrendPage) {
    section(h, "sweeps", "Sweeps");
    let keys: Vec<&str> = {
        let mut k: Vec<&str> = Vec::new();
        for s in &p.sweeps {
            for (key, _) in &s.labels {
                if !k.contains(&key.as_str()) {
                    k.push(key);
                }
            }
        }
        k
    };
    h.push_str("<table><thead><tr><th>sweep</th><th>added</th>");
    for k in &keys {
        let _ = write!(h, "<th>{}</th>", esc(k));
    }
    h.push_str("</tr></thead><tbody>");
    for s in &p.sweeps {
        let _ = write!(h, "<tr><td><code>{}</code></td><td>{}</td>", esc(&s.id), esc(&s.created_at));
        for k in &keys {
            let v = s.labels.iter().find(|(x, _)| x == k).map_or("–", |(_, v)| v.as_str());
            let _ = write!(h, "<td>{}</td>", esc(v));
        }
        h.push_str("</tr>");
    }
    h.push_str("</tbody></table></section>");
}
