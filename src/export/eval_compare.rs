//! The two reports of NeMo Gym's `gym eval compare`, rendered from a computed
//! [`EvalComparison`]: `compare_report.json` (the result as an ordered JSON value, indented
//! by two spaces, no trailing newline, as orjson writes it) and `compare_report.md` (the
//! same tables, notes and flips, with numbers formatted as Python's format specs `.4f`,
//! `.2f`, `+.1f` and `g` print them). Nothing is computed here.

use std::path::Path;
use std::sync::Arc;

use crate::json::{write_indented, Json};
use crate::metrics::eval_compare::{
    CandidateValue, EvalAgentComparison, EvalComparison, FlipMode, FlipSummary, MetricRow, MetricValue, RunInfo,
    TaskFlip, MAX_FLIPS_SHOWN,
};
use crate::python_float;

/// File names of the two reports.
pub const MARKDOWN_REPORT: &str = "compare_report.md";
pub const JSON_REPORT: &str = "compare_report.json";
/// The report schema version.
pub const SCHEMA_VERSION: &str = "1";

/// Who wrote the report, when, and how it was invoked.
#[derive(Debug, Clone)]
pub struct Provenance {
    /// ISO 8601, seconds, UTC offset (`2026-12-01T18:15:06+00:00`).
    pub generated_at: String,
    /// The writer and its version (kept under NeMo Gym's key `nemo_gym_version`).
    pub version: String,
    /// The command line, shell-quoted.
    pub command: String,
    /// The command named in the closing line (`rollstat eval-compare`).
    pub tool: String,
}

const MISSING: &str = "—";
const DELTA_HEADER: &str = "Δ (cand − base)";

const CI_FOOTNOTE: &str = "Displayed baseline/candidate values and each delta use `mean_across_repeats/<metric>` when recorded, otherwise the metric value. Delta CI = two-sided independent-sample 95% Welch t-interval for candidate minus baseline, computed from the named metric's values in each run's `repeat_level_metrics`. `—` means the required interval data was unavailable: delta intervals require at least 2 finite repeat-level values on each side. Baseline/candidate CI = 95% t-interval of the per-repeat mean across repeats, read verbatim from `ci_{low,high}_95_across_repeats/<metric>` in `*_aggregate_metrics.json`.";

fn k(s: &str) -> Arc<str> {
    Arc::from(s)
}

fn opt_f(v: Option<f64>) -> Json {
    v.map_or(Json::Null, Json::Float)
}

fn opt_i(v: Option<i64>) -> Json {
    v.map_or(Json::Null, Json::Int)
}

fn strs(v: &[String]) -> Json {
    Json::Arr(v.iter().map(|s| Json::Str(s.clone())).collect())
}

fn floats(v: &Option<Vec<f64>>) -> Json {
    match v {
        Some(v) => Json::Arr(v.iter().map(|&x| Json::Float(x)).collect()),
        None => Json::Null,
    }
}

fn run_json(r: &RunInfo) -> Json {
    Json::Obj(vec![
        (k("role"), Json::Str(r.role.as_str().into())),
        (k("index"), Json::Int(r.index as i64)),
        (k("rollouts_jsonl_fpath"), Json::Str(r.rollouts.display().to_string())),
        (k("aggregate_metrics_fpath"), Json::Str(r.aggregate.display().to_string())),
        (k("label"), Json::Str(r.label.clone())),
        (k("agent_names"), strs(&r.agent_names)),
    ])
}

fn value_members(v: &MetricValue) -> Vec<(Arc<str>, Json)> {
    vec![
        (k("value"), Json::Float(v.value)),
        (k("ci_low"), opt_f(v.ci_low)),
        (k("ci_high"), opt_f(v.ci_high)),
        (k("se_across_repeats"), opt_f(v.se_across_repeats)),
        (k("mean_across_repeats"), opt_f(v.mean_across_repeats)),
        (k("std_err_across_runs"), opt_f(v.std_err_across_runs)),
    ]
}

fn candidate_json(c: &CandidateValue) -> Json {
    let mut m = value_members(&c.value);
    m.push((k("delta"), opt_f(c.delta)));
    m.push((k("delta_pct"), opt_f(c.delta_pct)));
    m.push((k("delta_ci_low"), opt_f(c.delta_ci_low)));
    m.push((k("delta_ci_high"), opt_f(c.delta_ci_high)));
    Json::Obj(m)
}

fn row_json(r: &MetricRow) -> Json {
    Json::Obj(vec![
        (k("metric"), Json::Str(r.metric.clone())),
        (k("is_key_metric"), Json::Bool(r.is_key_metric)),
        (k("present_in"), strs(&r.present_in)),
        (k("baseline"), r.baseline.as_ref().map_or(Json::Null, |v| Json::Obj(value_members(v)))),
        (
            k("candidates"),
            Json::Arr(r.candidates.iter().map(|c| c.as_ref().map_or(Json::Null, candidate_json)).collect()),
        ),
    ])
}

fn flip_json(f: &TaskFlip) -> Json {
    Json::Obj(vec![
        (k("task_index"), Json::Int(f.task_index)),
        (k("baseline_score"), Json::Float(f.baseline_score)),
        (k("candidate_score"), Json::Float(f.candidate_score)),
        (k("delta"), Json::Float(f.delta)),
        (k("direction"), Json::Str(f.direction.as_str().into())),
        (k("baseline_rewards"), floats(&f.baseline_rewards)),
        (k("candidate_rewards"), floats(&f.candidate_rewards)),
    ])
}

fn summary_json(s: &FlipSummary) -> Json {
    let count = |v: Option<usize>| opt_i(v.map(|x| x as i64));
    Json::Obj(vec![
        (k("candidate_index"), Json::Int(s.candidate_index as i64)),
        (k("mode"), Json::Str(s.mode.as_str().into())),
        (k("reason"), s.reason.clone().map_or(Json::Null, Json::Str)),
        (k("field"), Json::Str(crate::metrics::eval_compare::FLIP_FIELD.into())),
        (k("common_task_count"), Json::Int(s.common_task_count as i64)),
        (k("baseline_only_task_count"), Json::Int(s.baseline_only_task_count as i64)),
        (k("candidate_only_task_count"), Json::Int(s.candidate_only_task_count as i64)),
        (k("pass_to_fail_count"), count(s.pass_to_fail_count)),
        (k("fail_to_pass_count"), count(s.fail_to_pass_count)),
        (k("tied_count"), count(s.tied_count)),
        (k("unchanged_count"), count(s.unchanged_count)),
        (k("net"), opt_i(s.net)),
        (k("flips"), Json::Arr(s.flips.iter().map(flip_json).collect())),
    ])
}

fn comparison_json(c: &EvalAgentComparison) -> Json {
    Json::Obj(vec![
        (k("baseline_agent"), Json::Str(c.baseline_agent.clone())),
        (k("candidate_agents"), strs(&c.candidate_agents)),
        (k("baseline_task_count"), Json::Int(c.baseline_task_count as i64)),
        (k("candidate_task_counts"), Json::Arr(c.candidate_task_counts.iter().map(|&n| Json::Int(n as i64)).collect())),
        (k("baseline_repeat_count"), opt_i(c.baseline_repeat_count)),
        (k("candidate_repeat_counts"), Json::Arr(c.candidate_repeat_counts.iter().map(|&n| opt_i(n)).collect())),
        (k("metrics"), Json::Arr(c.metrics.iter().map(row_json).collect())),
        (k("flips"), Json::Arr(c.flips.iter().map(summary_json).collect())),
        (k("notes"), strs(&c.notes)),
    ])
}

/// `compare_report.json` as an ordered value.
pub fn report_json(r: &EvalComparison, p: &Provenance) -> Json {
    Json::Obj(vec![
        (k("schema_version"), Json::Str(SCHEMA_VERSION.into())),
        (k("generated_at"), Json::Str(p.generated_at.clone())),
        (k("nemo_gym_version"), Json::Str(p.version.clone())),
        (k("command"), Json::Str(p.command.clone())),
        (k("baseline"), run_json(&r.baseline)),
        (k("candidates"), Json::Arr(r.candidates.iter().map(run_json).collect())),
        (k("comparisons"), Json::Arr(r.comparisons.iter().map(comparison_json).collect())),
        (k("skipped_agents"), Json::Obj(r.skipped_agents.iter().map(|(run, a)| (k(run), strs(a))).collect())),
        (k("warnings"), strs(&r.warnings)),
    ])
}

/// The bytes of `compare_report.json`.
pub fn render_json(r: &EvalComparison, p: &Provenance) -> Vec<u8> {
    let mut out = Vec::new();
    write_indented(&mut out, &report_json(r, p), 0);
    out
}

fn fmt(v: Option<f64>) -> String {
    match v {
        None => MISSING.into(),
        Some(v) => python_float::fixed(v, if v.abs() < 10.0 { 4 } else { 2 }, false),
    }
}

fn fmt_signed(v: Option<f64>) -> String {
    match v {
        None => MISSING.into(),
        Some(v) => python_float::fixed(v, if v.abs() < 10.0 { 4 } else { 2 }, true),
    }
}

fn fmt_point(v: Option<&MetricValue>) -> String {
    v.map_or(MISSING.into(), |v| fmt(Some(v.point())))
}

fn fmt_ci(v: Option<&MetricValue>) -> String {
    match v {
        Some(MetricValue { ci_low: Some(lo), ci_high: Some(hi), .. }) => {
            format!("[{}, {}]", fmt(Some(*lo)), fmt(Some(*hi)))
        }
        _ => MISSING.into(),
    }
}

fn fmt_delta(c: Option<&CandidateValue>) -> String {
    match c {
        Some(CandidateValue { delta: Some(d), delta_pct, .. }) => match delta_pct {
            None => format!("{} (n/a)", fmt_signed(Some(*d))),
            Some(p) => format!("{} ({}%)", fmt_signed(Some(*d)), python_float::fixed(*p, 1, true)),
        },
        _ => MISSING.into(),
    }
}

fn fmt_delta_ci(c: Option<&CandidateValue>) -> String {
    match c {
        Some(CandidateValue { delta_ci_low: Some(lo), delta_ci_high: Some(hi), .. }) => {
            format!("[{}, {}]", fmt_signed(Some(*lo)), fmt_signed(Some(*hi)))
        }
        _ => MISSING.into(),
    }
}

fn fmt_rewards(r: &Option<Vec<f64>>) -> String {
    match r {
        Some(v) if !v.is_empty() => v.iter().map(|&x| python_float::g(x)).collect::<Vec<_>>().join(", "),
        _ => MISSING.into(),
    }
}

fn table(header: &[String], align: &[&str], rows: &[Vec<String>], out: &mut Vec<String>) {
    out.push(format!("| {} |", header.join(" | ")));
    out.push(format!("|{}|", align.join("|")));
    for r in rows {
        out.push(format!("| {} |", r.join(" | ")));
    }
}

fn candidate_labels(r: &EvalComparison) -> Vec<String> {
    if r.candidates.len() == 1 {
        vec!["Candidate".into()]
    } else {
        (1..=r.candidates.len()).map(|i| format!("Candidate {i}")).collect()
    }
}

fn run_summary(r: &EvalComparison, c: &EvalAgentComparison, out: &mut Vec<String>) {
    let q = |s: &str| format!("`{s}`");
    let row = |name: &str, b: String, cs: Vec<String>| {
        let mut v = vec![name.to_string(), b];
        v.extend(cs);
        v
    };
    let runs = &r.candidates;
    let rows = vec![
        row("Run", q(&r.baseline.label), runs.iter().map(|x| q(&x.label)).collect()),
        row(
            "Rollouts",
            q(&r.baseline.rollouts.display().to_string()),
            runs.iter().map(|x| q(&x.rollouts.display().to_string())).collect(),
        ),
        row(
            "Aggregate metrics",
            q(&r.baseline.aggregate.display().to_string()),
            runs.iter().map(|x| q(&x.aggregate.display().to_string())).collect(),
        ),
        row("Agent", q(&c.baseline_agent), c.candidate_agents.iter().map(|a| q(a)).collect()),
        row(
            "Tasks",
            c.baseline_task_count.to_string(),
            c.candidate_task_counts.iter().map(|n| n.to_string()).collect(),
        ),
        row(
            "Repeats",
            c.baseline_repeat_count.map_or("unknown".into(), |n| n.to_string()),
            c.candidate_repeat_counts.iter().map(|n| n.map_or("unknown".into(), |n| n.to_string())).collect(),
        ),
    ];
    let mut header = vec![String::new(), "Baseline".into()];
    header.extend(candidate_labels(r));
    let align = vec!["---"; header.len()];
    table(&header, &align, &rows, out);
}

fn metric_table(rows: &[&MetricRow], labels: &[String], out: &mut Vec<String>) {
    let mut header: Vec<String> = vec![
        "Metric".into(),
        DELTA_HEADER.into(),
        format!("95% CI for {DELTA_HEADER}"),
        "Baseline".into(),
        "Baseline 95% CI".into(),
    ];
    let mut align = vec!["---", "---:", "---", "---:", "---"];
    for l in labels {
        header.push(l.clone());
        header.push(format!("{l} 95% CI"));
        align.extend(["---:", "---"]);
    }
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                format!("`{}`", r.metric),
                r.candidates.iter().map(|c| fmt_delta(c.as_ref())).collect::<Vec<_>>().join(" / "),
                r.candidates.iter().map(|c| fmt_delta_ci(c.as_ref())).collect::<Vec<_>>().join(" / "),
                fmt_point(r.baseline.as_ref()),
                fmt_ci(r.baseline.as_ref()),
            ];
            for c in &r.candidates {
                let v = c.as_ref().map(|c| &c.value);
                cells.push(fmt_point(v));
                cells.push(fmt_ci(v));
            }
            cells
        })
        .collect();
    table(&header, &align, &body, out);
}

/// At most [`MAX_FLIPS_SHOWN`] per direction, in the summary's order.
fn shown_flips(s: &FlipSummary) -> Vec<&TaskFlip> {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    let mut out = Vec::new();
    for f in &s.flips {
        let d = f.direction.as_str();
        let at = match seen.iter().position(|(x, _)| *x == d) {
            Some(i) => i,
            None => {
                seen.push((d, 0));
                seen.len() - 1
            }
        };
        if seen[at].1 >= MAX_FLIPS_SHOWN {
            continue;
        }
        seen[at].1 += 1;
        out.push(f);
    }
    out
}

fn flip_section(s: &FlipSummary, label: &str, out: &mut Vec<String>) {
    out.push(format!("### Sample flips{label}"));
    out.push(String::new());
    let field = crate::metrics::eval_compare::FLIP_FIELD;
    let n = |v: Option<usize>| v.map_or("None".to_string(), |x| x.to_string());
    match s.mode {
        FlipMode::Unavailable => {
            out.push(format!("Not available: {}", s.reason.as_deref().unwrap_or("None")));
            out.push(String::new());
            return;
        }
        FlipMode::Binary => {
            out.push(format!(
                "Field: `{field}` (task mean over its repeats). A task passes when its mean is above 0.5."
            ));
            out.push(String::new());
            out.push(format!(
                "**{} common tasks · {} pass→fail · {} fail→pass · net {:+} · {} unchanged · {} tied**",
                s.common_task_count,
                n(s.pass_to_fail_count),
                n(s.fail_to_pass_count),
                s.net.unwrap_or(0),
                n(s.unchanged_count),
                n(s.tied_count)
            ));
            out.push(String::new());
        }
        FlipMode::Continuous => {
            out.push(format!(
                "Rewards are not binary, so this lists the largest per-task changes in `{field}` rather than pass/fail flips."
            ));
            out.push(String::new());
            out.push(format!(
                "**{} common tasks · {} changed · {} unchanged**",
                s.common_task_count,
                s.flips.len(),
                n(s.unchanged_count)
            ));
            out.push(String::new());
        }
    }
    let shown = shown_flips(s);
    if !shown.is_empty() {
        let header: Vec<String> =
            ["Task", "Direction", "Baseline", "Candidate", "Δ", "Baseline per-repeat", "Candidate per-repeat"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        let rows: Vec<Vec<String>> = shown
            .iter()
            .map(|f| {
                vec![
                    f.task_index.to_string(),
                    f.direction.as_str().replace("_to_", "→"),
                    fmt(Some(f.baseline_score)),
                    fmt(Some(f.candidate_score)),
                    fmt_signed(Some(f.delta)),
                    fmt_rewards(&f.baseline_rewards),
                    fmt_rewards(&f.candidate_rewards),
                ]
            })
            .collect();
        table(&header, &["---:", "---", "---:", "---:", "---:", "---", "---"], &rows, out);
        let remaining = s.flips.len() - shown.len();
        if remaining > 0 {
            out.push(String::new());
            out.push(format!("… and {remaining} more (full list in `{JSON_REPORT}`)."));
        }
        out.push(String::new());
    }
    out.push("Tasks are joined on `_ng_task_index`. `*_aggregate_metrics.json` carries no task identity, so flips are reported by index only — this assumes both runs used the same dataset, split, `--limit` and ordering.".into());
    out.push(String::new());
}

/// `compare_report.md`.
pub fn render_markdown(r: &EvalComparison, p: &Provenance) -> String {
    let labels = candidate_labels(r);
    let mut out: Vec<String> = vec!["# gym eval compare".into(), String::new()];
    for c in &r.comparisons {
        if r.comparisons.len() > 1 {
            out.push(format!("## Agent: `{}`", c.baseline_agent));
            out.push(String::new());
        }
        run_summary(r, c, &mut out);
        out.push(String::new());
        out.push(format!("Generated {} by {}.", p.generated_at, p.version));
        out.push(String::new());
        out.push(format!("Command: `{}`", p.command));
        out.push(String::new());
        let key: Vec<&MetricRow> = c.metrics.iter().filter(|m| m.is_key_metric).collect();
        let other: Vec<&MetricRow> = c.metrics.iter().filter(|m| !m.is_key_metric).collect();
        out.push("### Key metrics".into());
        out.push(String::new());
        if key.is_empty() {
            out.push("No key metrics were recorded for this agent.".into());
        } else {
            metric_table(&key, &labels, &mut out);
        }
        out.push(String::new());
        out.push(CI_FOOTNOTE.into());
        out.push(String::new());
        if !other.is_empty() {
            out.push("<details>".into());
            out.push(format!("<summary>All other metrics ({} rows)</summary>", other.len()));
            out.push(String::new());
            metric_table(&other, &labels, &mut out);
            out.push(String::new());
            out.push("</details>".into());
            out.push(String::new());
        }
        for (i, s) in c.flips.iter().enumerate() {
            let label = if c.flips.len() > 1 { format!(" — {}", labels[i]) } else { String::new() };
            flip_section(s, &label, &mut out);
        }
        let one_sided: Vec<&MetricRow> =
            c.metrics.iter().filter(|m| m.present_in.len() < 1 + r.candidates.len()).collect();
        if !one_sided.is_empty() {
            out.push("### Metrics present in only one run".into());
            out.push(String::new());
            out.push("Metric names embed the repeat count (`pass@1[avg-of-3]` vs `pass@1[avg-of-5]`), so runs collected with different `--num-repeats` will not line these up.".into());
            out.push(String::new());
            for m in one_sided {
                let where_ = if m.present_in.is_empty() {
                    "no numeric value on either side".into()
                } else {
                    m.present_in.join(", ")
                };
                out.push(format!("- `{}` — {where_}", m.metric));
            }
            out.push(String::new());
        }
        if !c.notes.is_empty() {
            out.push("### Notes".into());
            out.push(String::new());
            out.extend(c.notes.iter().map(|n| format!("- {n}")));
            out.push(String::new());
        }
    }
    if !r.warnings.is_empty() {
        out.push("## Warnings".into());
        out.push(String::new());
        out.extend(r.warnings.iter().map(|w| format!("- {w}")));
        out.push(String::new());
    }
    out.push("---".into());
    out.push(format!(
        "Generated by `{}` ({}). Machine-readable output: `{JSON_REPORT}` (schema_version {SCHEMA_VERSION}).",
        p.tool, p.version
    ));
    out.push(String::new());
    out.join("\n")
}

/// The short recap printed after the files are written: each side's aggregate file, the
/// agents compared, the flips per candidate.
pub fn summary_lines(r: &EvalComparison) -> Vec<String> {
    let mut lines = vec![format!("Baseline:  {}", r.baseline.aggregate.display())];
    lines.extend(r.candidates.iter().map(|c| format!("Candidate: {}", c.aggregate.display())));
    let mut agents: Vec<&str> = r.comparisons.iter().map(|c| c.baseline_agent.as_str()).collect();
    agents.sort_unstable();
    agents.dedup();
    lines.push(format!("Agents compared: {}", agents.join(", ")));
    for c in &r.comparisons {
        for s in &c.flips {
            lines.push(match s.mode {
                FlipMode::Binary => format!(
                    "Sample flips: {} fail→pass, {} pass→fail over {} common tasks",
                    s.fail_to_pass_count.unwrap_or(0),
                    s.pass_to_fail_count.unwrap_or(0),
                    s.common_task_count
                ),
                FlipMode::Continuous => {
                    format!("Per-task changes: {} of {} common tasks moved", s.flips.len(), s.common_task_count)
                }
                FlipMode::Unavailable => {
                    format!("Sample flips unavailable: {}", s.reason.as_deref().unwrap_or(""))
                }
            });
        }
    }
    lines
}

/// The key-metric rows of each comparison as plain text lines (metric, delta, its
/// interval, baseline and candidate values), for the terminal.
pub fn key_metric_lines(r: &EvalComparison) -> Vec<String> {
    let mut lines = Vec::new();
    for c in &r.comparisons {
        lines.push(format!("Key metrics — {}", c.baseline_agent));
        for m in c.metrics.iter().filter(|m| m.is_key_metric) {
            let cand = m.candidates.first().and_then(Option::as_ref);
            lines.push(format!(
                "  {}  Δ {}  CI {}  baseline {}  candidate {}",
                m.metric,
                fmt_delta(cand),
                fmt_delta_ci(cand),
                fmt_point(m.baseline.as_ref()),
                fmt_point(cand.map(|c| &c.value))
            ));
        }
    }
    lines
}

/// Where the two reports go in `dir`, for the requested format (`md`, `json`, `both`).
pub fn report_paths(dir: &Path, markdown: bool, json: bool) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    if markdown {
        v.push(dir.join(MARKDOWN_REPORT));
    }
    if json {
        v.push(dir.join(JSON_REPORT));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python 3's f"{v:g}" for these values.
    #[test]
    fn fixed_formats_as_python() {
        assert_eq!(fmt(Some(9.99995)), "10.0000");
        assert_eq!(fmt(Some(10.0)), "10.00");
        assert_eq!(fmt(Some(-0.0)), "-0.0000");
        assert_eq!(fmt_signed(Some(0.0)), "+0.0000");
        assert_eq!(fmt_signed(Some(-273.37)), "-273.37");
    }
}
