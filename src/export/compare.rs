//! `compare`'s report rendered: one row per run (and group) as a frame for CSV, JSON,
//! Markdown and Parquet, the readable text report, and the flip list.

use polars::prelude::*;

use super::table::round_padded;
use crate::metrics::compare::{Comparison, Exact, Report, RunSummary, FEW_VALUES};
use crate::stats::paired::Paired;

/// What the compare renderers need to know of the configuration.
#[derive(Debug, Clone)]
pub struct CompareView {
    pub metric: String,
    pub pass_at: Option<u32>,
    pub cluster_key: Option<String>,
    pub by: Option<String>,
    pub mde: bool,
    pub detect: Option<f64>,
    /// Significant digits of the numbers in the readable report and the Markdown table.
    pub digits: usize,
}

impl CompareView {
    /// The compared statistic as named in the output: the metric, or with pass@K the key
    /// `aggregate --metric pass_at_k` writes for it (`pass@4/accuracy`: NeMo Gym scores
    /// `reward` as `accuracy`), else `pass@4/<metric>`.
    pub fn statistic(&self) -> String {
        match self.pass_at {
            Some(k) if self.metric == "reward" => format!("pass@{k}/accuracy"),
            Some(k) => format!("pass@{k}/{}", self.metric),
            None => self.metric.clone(),
        }
    }
}

/// One row of the table: a run of the whole report or of one group's.
struct Row<'r> {
    group: Option<&'r str>,
    rep: &'r Report,
    run: usize,
}

impl<'r> Row<'r> {
    fn summary(&self) -> &'r RunSummary {
        &self.rep.runs[self.run]
    }
    fn cmp(&self) -> Option<&'r Comparison> {
        self.rep.comparisons.iter().find(|c| c.run == self.run)
    }
    fn paired(&self) -> Option<&'r Paired> {
        self.cmp().and_then(|c| c.stats.as_ref())
    }
}

/// The report and its groups, in output order.
fn reports(r: &Report) -> Vec<(Option<&str>, &Report)> {
    let mut v = vec![(None, r)];
    v.extend(r.groups.iter().map(|(g, gr)| (Some(g.as_str()), gr)));
    v
}

/// One row per run (and, with `--by`, one per run and group after them): its summary,
/// and (except for the baseline) its comparison. Columns beyond the default are
/// appended when they apply: `p_value_holm` (two or more comparisons), `exact_test` and
/// `exact_p` (some differences take few values), `ci_method` (some run has 0/1 task
/// scores), `se_method` and `diff_se_method` (clustered), the sizing columns (`--mde`,
/// `--detect`) and `group` (`--by`).
pub fn frame(a: &CompareView, r: &Report) -> PolarsResult<DataFrame> {
    let statistic = a.statistic();
    let all = reports(r);
    let rows: Vec<Row<'_>> =
        all.iter().flat_map(|&(group, rep)| (0..rep.runs.len()).map(move |run| Row { group, rep, run })).collect();
    let n = rows.len();
    let f = |g: &dyn Fn(&Row<'_>) -> Option<f64>| -> Vec<Option<f64>> { rows.iter().map(g).collect() };
    let i = |g: &dyn Fn(&Row<'_>) -> Option<i64>| -> Vec<Option<i64>> { rows.iter().map(g).collect() };
    let t = |g: &dyn Fn(&Row<'_>) -> Option<String>| -> Vec<Option<String>> { rows.iter().map(g).collect() };
    let mut cols = vec![
        Column::new("run".into(), t(&|x| Some(x.summary().name.clone()))),
        Column::new("statistic".into(), vec![statistic.as_str(); n]),
        Column::new("tasks".into(), rows.iter().map(|x| x.summary().tasks as i64).collect::<Vec<_>>()),
        Column::new("rollouts".into(), rows.iter().map(|x| x.summary().rollouts as i64).collect::<Vec<_>>()),
        Column::new("masked".into(), rows.iter().map(|x| x.summary().masked as i64).collect::<Vec<_>>()),
        Column::new("mean".into(), f(&|x| x.summary().est.map(|e| e.mean))),
        Column::new("se".into(), f(&|x| x.summary().est.and_then(|e| e.se))),
        Column::new("ci_low_95".into(), f(&|x| x.summary().ci.map(|c| c.0))),
        Column::new("ci_high_95".into(), f(&|x| x.summary().ci.map(|c| c.1))),
        Column::new("clusters".into(), i(&|x| x.summary().est.map(|e| e.clusters as i64))),
        Column::new("baseline".into(), t(&|x| x.cmp().map(|_| x.rep.runs[x.rep.baseline].name.clone()))),
        Column::new("paired_tasks".into(), i(&|x| x.cmp().map(|c| c.paired_tasks as i64))),
        Column::new("paired_mean".into(), f(&|x| x.paired().map(|s| s.mean_b))),
        Column::new("paired_baseline_mean".into(), f(&|x| x.paired().map(|s| s.mean_a))),
        Column::new("diff".into(), f(&|x| x.paired().map(|s| s.diff.mean))),
        Column::new("diff_se".into(), f(&|x| x.paired().and_then(|s| s.diff.se))),
        Column::new("diff_ci_low_95".into(), f(&|x| x.cmp().and_then(|c| c.ci).map(|c| c.0))),
        Column::new("diff_ci_high_95".into(), f(&|x| x.cmp().and_then(|c| c.ci).map(|c| c.1))),
        Column::new("t".into(), f(&|x| x.paired().and_then(|s| s.t))),
        Column::new("df".into(), f(&|x| x.paired().and_then(|s| s.diff.se.map(|_| s.diff.df)))),
        Column::new("p_value".into(), f(&|x| x.paired().and_then(|s| s.p))),
        Column::new("wins".into(), i(&|x| x.paired().map(|s| s.wins as i64))),
        Column::new("losses".into(), i(&|x| x.paired().map(|s| s.losses as i64))),
        Column::new("ties".into(), i(&|x| x.paired().map(|s| s.ties as i64))),
        Column::new("correlation".into(), f(&|x| x.paired().and_then(|s| s.correlation))),
        Column::new("diff_se_unpaired".into(), f(&|x| x.paired().and_then(|s| s.se_unpaired))),
    ];
    let comparisons = || all.iter().flat_map(|(_, rep)| rep.comparisons.iter());
    if comparisons().any(|c| c.unpaired_failed > 0) {
        cols.push(Column::new("unpaired_failed_tasks".into(), i(&|x| x.cmp().map(|c| c.unpaired_failed as i64))));
    }
    if r.comparisons.len() >= 2 {
        cols.push(Column::new("p_value_holm".into(), f(&|x| x.cmp().and_then(|c| c.p_holm))));
    }
    if comparisons().any(|c| c.exact.is_some()) {
        cols.push(Column::new(
            "exact_test".into(),
            t(&|x| x.cmp().and_then(|c| c.exact).map(|e| exact_name(e).into())),
        ));
        cols.push(Column::new("exact_p".into(), f(&|x| x.cmp().and_then(|c| c.exact).map(|e| e.p))));
    }
    if all.iter().any(|(_, rep)| rep.runs.iter().any(|s| s.wilson)) {
        let method = |x: &Row<'_>| {
            let s = x.summary();
            s.ci.map(|_| if s.wilson { "wilson" } else { "t" }.to_string())
        };
        cols.push(Column::new("ci_method".into(), t(&method)));
    }
    if a.cluster_key.is_some() {
        let m = |cr2: bool| if cr2 { "CR2" } else { "CR1" }.to_string();
        cols.push(Column::new(
            "se_method".into(),
            t(&|x| x.summary().est.and_then(|e| e.se).map(|_| m(x.summary().cr2))),
        ));
        cols.push(Column::new(
            "diff_se_method".into(),
            t(&|x| x.cmp().filter(|c| c.stats.is_some_and(|s| s.diff.se.is_some())).map(|c| m(c.cr2))),
        ));
    }
    if a.mde {
        cols.push(Column::new("mde".into(), f(&|x| x.cmp().and_then(|c| c.mde))));
        cols.push(Column::new("repeat_share".into(), f(&|x| x.summary().repeats.map(|r| r.share))));
        cols.push(Column::new("width_2x_repeats".into(), f(&|x| x.summary().repeats.map(|r| r.width_2x_repeats))));
        cols.push(Column::new("width_2x_tasks".into(), f(&|x| x.summary().repeats.map(|r| r.width_2x_tasks))));
    }
    if let Some(d) = a.detect {
        cols.push(Column::new("detect_diff".into(), f(&|x| x.cmp().map(|_| d))));
        cols.push(Column::new("tasks_needed".into(), i(&|x| x.cmp().and_then(|c| c.tasks_needed).map(|v| v as i64))));
    }
    if a.by.is_some() {
        cols.push(Column::new("group".into(), t(&|x| x.group.map(str::to_string))));
    }
    DataFrame::new(n, cols)
}

/// The flip list as a table: per run compared and task, both values and scores.
pub fn flips_frame(r: &Report) -> PolarsResult<DataFrame> {
    let mut run = Vec::new();
    let mut task = Vec::new();
    let mut base = Vec::new();
    let mut val = Vec::new();
    let mut diff = Vec::new();
    let mut bs = Vec::new();
    let mut rs = Vec::new();
    let list = |v: &[f64]| v.iter().map(|x| score(*x)).collect::<Vec<_>>().join(" ");
    for c in &r.comparisons {
        for fl in &c.flips {
            run.push(r.runs[c.run].name.clone());
            task.push(fl.task);
            base.push(fl.baseline);
            val.push(fl.run);
            diff.push(fl.run - fl.baseline);
            bs.push(list(&fl.baseline_scores));
            rs.push(list(&fl.run_scores));
        }
    }
    let n = run.len();
    let cols = vec![
        Column::new("run".into(), run),
        Column::new("baseline".into(), vec![r.runs[r.baseline].name.clone(); n]),
        Column::new("_ng_task_index".into(), task),
        Column::new("baseline_value".into(), base),
        Column::new("run_value".into(), val),
        Column::new("diff".into(), diff),
        Column::new("baseline_scores".into(), bs),
        Column::new("run_scores".into(), rs),
    ];
    DataFrame::new(n, cols)
}

fn exact_name(e: Exact) -> &'static str {
    if e.mcnemar {
        "mcnemar"
    } else {
        "sign"
    }
}

/// Whether `x` is shown in scientific form: very small or large, not 0.
fn scientific(x: f64) -> bool {
    x != 0.0 && x.is_finite() && (x.abs() < 1e-3 || x.abs() >= 1e6)
}

/// A number for the readable report: `d` significant digits (scientific form with `sci`,
/// or when the number needs it); `-` when absent.
pub(crate) fn num(v: Option<f64>, signed: bool, sci: bool, d: usize) -> String {
    match v {
        None => "-".into(),
        Some(x) => {
            let t = if sci && x.is_finite() { format!("{x:.*e}", d.max(1) - 1) } else { round_padded(x, d) };
            if signed && x >= 0.0 && x.is_finite() {
                format!("+{t}")
            } else {
                t
            }
        }
    }
}

/// `[low, high]`, both ends in one form: scientific when either end needs it, else with
/// the decimals that give the larger end `d` significant digits.
pub(crate) fn interval(ci: Option<(f64, f64)>, signed: bool, d: usize) -> String {
    let Some((a, b)) = ci else { return "-".into() };
    if scientific(a) || scientific(b) || !a.is_finite() || !b.is_finite() {
        return format!("[{}, {}]", num(Some(a), signed, true, d), num(Some(b), signed, true, d));
    }
    let top = a.abs().max(b.abs());
    let exp = if top == 0.0 { 0 } else { top.log10().floor() as i32 };
    let decimals = (d.max(1) as i32 - 1 - exp).max(0) as usize;
    let end = |x: f64| if signed && x >= 0.0 { format!("+{x:.decimals$}") } else { format!("{x:.decimals$}") };
    format!("[{}, {}]", end(a), end(b))
}

/// Left-aligned columns (the first `left` of them), the others right-aligned, two spaces
/// apart; widths from the widest cell (in characters).
pub(crate) fn columns(rows: &[Vec<String>], left: usize) -> String {
    let ncol = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> =
        (0..ncol).map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0)).collect();
    let mut o = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(c, s)| if c < left { format!("{s:<w$}", w = width[c]) } else { format!("{s:>w$}", w = width[c]) })
            .collect();
        o.push_str(cells.join("  ").trim_end());
        o.push('\n');
    }
    o
}

/// The readable report.
pub fn text(a: &CompareView, r: &Report) -> String {
    let unit = match &a.cluster_key {
        Some(k) => format!("tasks are the unit, standard errors clustered by `{k}`"),
        None => "tasks are the unit".into(),
    };
    let per_task = match a.pass_at {
        Some(k) => format!(
            "pass@{k} of `{}` over its measured rollouts (a fraction; `aggregate` writes pass@k in percent)",
            a.metric
        ),
        None => format!("mean of `{}` over its measured rollouts", a.metric),
    };
    let mut o = format!("{}: each run's mean over tasks of the task's {per_task}; {unit}\n\n", a.statistic());
    o.push_str(&tables(a, r));
    o.push_str(&extras(a, r));
    o.push_str(&groups_text(a, r));
    o.push_str(&flips_text(a, r));
    o
}

/// With `--by`: one compact table of every group's comparisons (csv/json hold each
/// group's run means and everything else).
fn groups_text(a: &CompareView, r: &Report) -> String {
    if r.groups.is_empty() {
        return String::new();
    }
    let holm = r.comparisons.len() >= 2;
    let exact = r.groups.iter().any(|(_, g)| g.comparisons.iter().any(|c| c.exact.is_some()));
    let mut o = format!(
        "\nby `{}` (run - baseline on each group's paired tasks{}):\n",
        a.by.as_deref().unwrap_or_default(),
        if holm { "; Holm within groups" } else { "" }
    );
    let mut head: Vec<String> = ["group", "run", "tasks", "diff", "95% interval", "p-value"].map(String::from).to_vec();
    if holm {
        head.push("Holm".into());
    }
    if exact {
        head.push("exact p".into());
    }
    if a.mde {
        head.push("detectable".into());
    }
    let mut rows = vec![head];
    for (g, gr) in &r.groups {
        for c in &gr.comparisons {
            let s = c.stats.as_ref();
            let mut row = vec![
                g.clone(),
                gr.runs[c.run].name.clone(),
                c.paired_tasks.to_string(),
                num(s.map(|s| s.diff.mean), true, false, a.digits),
                interval(c.ci, true, a.digits),
                pval(s.and_then(|s| s.p)),
            ];
            if holm {
                row.push(pval(c.p_holm));
            }
            if exact {
                row.push(c.exact.map_or_else(|| "-".into(), |e| format!("{} {}", pval(Some(e.p)), exact_name(e))));
            }
            if a.mde {
                row.push(c.mde.map_or_else(|| "-".into(), |m| format!("±{}", num(Some(m), false, false, a.digits))));
            }
            rows.push(row);
        }
    }
    o.push_str(&columns(&rows, 2));
    o
}

/// A p-value as the report shows it.
pub(crate) fn pval(p: Option<f64>) -> String {
    match p {
        None => "-".into(),
        Some(0.0) => "0".into(),
        Some(p) if p < 1e-4 => format!("{p:.1e}"),
        Some(p) => format!("{p:.4}"),
    }
}

/// What the report adds to the default tables, each part when it applies: Holm and
/// exact tests, interval methods, sizing.
fn extras(a: &CompareView, r: &Report) -> String {
    let mut o = String::new();
    let holm = r.comparisons.len() >= 2;
    let exact = r.comparisons.iter().any(|c| c.exact.is_some());
    if holm || exact {
        let mut what = Vec::new();
        if holm {
            // Holm adjusts the p-values there are: a run without one (no spread) is not counted.
            let with_p = r.comparisons.iter().filter(|c| c.stats.as_ref().and_then(|s| s.p).is_some()).count();
            what.push(match with_p {
                1 => format!("Holm over the 1 run of {} with a p-value", r.comparisons.len()),
                n if n < r.comparisons.len() => {
                    format!("Holm over the {n} runs of {} with a p-value", r.comparisons.len())
                }
                n => format!("Holm over the {n} runs compared"),
            });
        }
        if exact {
            what.push("exact: sign test, McNemar's for 0/1".to_string());
        }
        o.push_str(&format!("\np-values ({}):\n", what.join("; ")));
        let mut head = vec!["run".to_string(), "t test".into()];
        if holm {
            head.push("Holm".into());
        }
        if exact {
            head.extend(["exact test".into(), "exact p".into()]);
        }
        let mut rows = vec![head];
        for c in &r.comparisons {
            let p = c.stats.as_ref().and_then(|s| s.p);
            let mut row = vec![r.runs[c.run].name.clone(), pval(p)];
            if holm {
                row.push(pval(c.p_holm));
            }
            if exact {
                row.push(c.exact.map_or("-", exact_name).into());
                row.push(pval(c.exact.map(|e| e.p)));
            }
            rows.push(row);
        }
        o.push_str(&columns(&rows, 1));
    }
    if r.runs.iter().any(|s| s.wilson) {
        o.push_str("(runs whose task scores are all 0 or 1 get Wilson intervals, inside [0, 1])\n");
    }
    if r.runs.iter().any(|s| s.cr2) || r.comparisons.iter().any(|c| c.cr2) {
        o.push_str(&format!(
            "(fewer than {} clusters: CR2 standard errors, Bell-McCaffrey degrees of freedom)\n",
            crate::metrics::compare::FEW_CLUSTERS
        ));
    }
    if a.mde || a.detect.is_some() {
        o.push_str("\nis the eval big enough? (two-sided paired t test at 5%, 80% power)\n");
        let unit = if a.cluster_key.is_some() { "tasks (in clusters)" } else { "tasks" };
        let mut head = vec!["run".to_string(), "tasks".into(), "diff".into()];
        if a.mde {
            head.push("detectable diff".into());
        }
        if let Some(d) = a.detect {
            head.push(format!(
                "{unit} for {}{}",
                if d >= 0.0 { "+" } else { "" },
                super::table::round_text(d, a.digits)
            ));
        }
        let mut rows = vec![head];
        for c in &r.comparisons {
            let s = c.stats.as_ref();
            let mut row = vec![
                r.runs[c.run].name.clone(),
                c.paired_tasks.to_string(),
                num(s.map(|s| s.diff.mean), true, false, a.digits),
            ];
            if a.mde {
                row.push(c.mde.map_or_else(|| "-".into(), |m| format!("±{}", num(Some(m), false, false, a.digits))));
            }
            if a.detect.is_some() {
                row.push(c.tasks_needed.map_or_else(|| "-".into(), |n| n.to_string()));
            }
            rows.push(row);
        }
        o.push_str(&columns(&rows, 1));
    }
    if a.mde && r.runs.iter().any(|s| s.repeats.is_some()) {
        o.push_str("\ntasks or repeats? share of the task means' variance that is repeat noise,\nand the interval's width with twice the repeats or twice the tasks:\n");
        let mut rows = vec![["run", "repeats", "repeat share", "2x repeats", "2x tasks"].map(String::from).to_vec()];
        for s in &r.runs {
            let Some(x) = s.repeats else { continue };
            rows.push(vec![
                s.name.clone(),
                format!("{:.2}", x.repeats),
                format!("{:.0}%", 100.0 * x.share),
                format!("x{:.3}", x.width_2x_repeats),
                format!("x{:.3}", x.width_2x_tasks),
            ]);
        }
        o.push_str(&columns(&rows, 1));
    }
    o
}

/// Shortest round-trip form of a score (`1`, `0.25`).
fn score(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// The flip list: per run compared, the tasks that changed most.
fn flips_text(a: &CompareView, r: &Report) -> String {
    if r.comparisons.iter().all(|c| c.flips.is_empty()) {
        return String::new();
    }
    let mut o = format!(
        "\ntasks that changed most against {} (per-rollout scores in rollout order):\n",
        r.runs[r.baseline].name
    );
    let mut rows =
        vec![["run", "task", "baseline", "run", "diff", "baseline scores", "run scores"].map(String::from).to_vec()];
    for c in &r.comparisons {
        for f in &c.flips {
            let join = |v: &[f64]| v.iter().map(|x| score(*x)).collect::<Vec<_>>().join(" ");
            rows.push(vec![
                r.runs[c.run].name.clone(),
                f.task.to_string(),
                num(Some(f.baseline), false, false, a.digits),
                num(Some(f.run), false, false, a.digits),
                num(Some(f.run - f.baseline), true, false, a.digits),
                join(&f.baseline_scores),
                join(&f.run_scores),
            ]);
        }
    }
    o.push_str(&columns(&rows, 1));
    o
}

/// The runs table and the comparison table.
fn tables(a: &CompareView, r: &Report) -> String {
    let mut o = String::new();
    let clustered = a.cluster_key.is_some();
    let mut rows =
        vec![["run", "tasks", "rollouts", "masked", "mean", "se", "95% interval"].map(String::from).to_vec()];
    if clustered {
        rows[0].push("clusters".into());
    }
    rows[0].push(String::new());
    for (i, s) in r.runs.iter().enumerate() {
        let mut row = vec![
            s.name.clone(),
            s.tasks.to_string(),
            s.rollouts.to_string(),
            s.masked.to_string(),
            num(s.est.map(|e| e.mean), false, false, a.digits),
            num(s.est.and_then(|e| e.se), false, false, a.digits),
            interval(s.ci, false, a.digits),
        ];
        if clustered {
            row.push(s.est.map_or(0, |e| e.clusters).to_string());
        }
        row.push(if i == r.baseline { "(baseline)".into() } else { String::new() });
        rows.push(row);
    }
    o.push_str(&columns(&rows, 1));
    o.push_str(&format!(
        "\nagainst {}, paired on the tasks both measured (difference = run - baseline):\n",
        r.runs[r.baseline].name
    ));
    let mut rows =
        vec![["run", "tasks", "diff", "se", "95% interval", "p-value", "wins/losses/ties", "corr", "unpaired se"]
            .map(String::from)
            .to_vec()];
    for c in &r.comparisons {
        let s = c.stats.as_ref();
        let p = pval(s.and_then(|s| s.p));
        rows.push(vec![
            r.runs[c.run].name.clone(),
            c.paired_tasks.to_string(),
            num(s.map(|s| s.diff.mean), true, false, a.digits),
            num(s.and_then(|s| s.diff.se), false, false, a.digits),
            interval(c.ci, true, a.digits),
            p,
            s.map_or_else(|| "-".into(), |s| format!("{}/{}/{}", s.wins, s.losses, s.ties)),
            s.and_then(|s| s.correlation).map_or_else(|| "-".into(), |r| format!("{r:.2}")),
            num(s.and_then(|s| s.se_unpaired), false, false, a.digits),
        ]);
    }
    o.push_str(&columns(&rows, 1));
    if r.comparisons.iter().any(|c| c.only_baseline + c.only_run > 0) {
        o.push_str(
            "(runs measured different tasks: a difference is over the paired tasks only, not the means above; \
             csv/json give paired_mean and paired_baseline_mean)\n",
        );
    }
    o
}

/// `{"runs": [rows], "flips": [...]}`: the rows as without `--flips`, and per task that
/// changed most its run, task index, values and per-rollout score arrays.
pub fn json_with_flips(df: &DataFrame, r: &Report) -> Vec<u8> {
    use crate::json::Json;
    use std::sync::Arc;
    let rows = crate::json::parse(&super::table::to_json(df)).expect("rows render as JSON");
    let mut flips = Vec::new();
    for c in &r.comparisons {
        for f in &c.flips {
            let arr = |v: &[f64]| Json::Arr(v.iter().map(|x| Json::Float(*x)).collect());
            flips.push(Json::Obj(vec![
                (Arc::from("run"), Json::Str(r.runs[c.run].name.clone())),
                (Arc::from("baseline"), Json::Str(r.runs[r.baseline].name.clone())),
                (Arc::from("_ng_task_index"), Json::Int(f.task)),
                (Arc::from("task_fingerprint"), f.fingerprint.map_or(Json::Null, |fp| Json::Str(format!("{fp:016x}")))),
                (Arc::from("baseline_value"), Json::Float(f.baseline)),
                (Arc::from("run_value"), Json::Float(f.run)),
                (Arc::from("diff"), Json::Float(f.run - f.baseline)),
                (Arc::from("baseline_scores"), arr(&f.baseline_scores)),
                (Arc::from("run_scores"), arr(&f.run_scores)),
            ]));
        }
    }
    let doc = Json::Obj(vec![(Arc::from("runs"), rows), (Arc::from("flips"), Json::Arr(flips))]);
    let mut out = Vec::new();
    crate::json::write_compact(&mut out, &doc);
    out.push(b'\n');
    out
}

/// The table as Markdown, then what the columns alone do not say (Holm's family, the
/// interval methods), then the flip list as a second table.
pub fn markdown(a: &CompareView, r: &Report, df: &DataFrame, flips: bool) -> PolarsResult<Vec<u8>> {
    let mut o = super::table::to_markdown(df, a.digits);
    let mut notes = Vec::new();
    if r.comparisons.len() >= 2 {
        notes.push(format!(
            "p_value_holm: Holm-adjusted over the {} runs compared with {}{}.",
            r.comparisons.len(),
            r.runs[r.baseline].name,
            if r.groups.is_empty() { "" } else { " (within each group)" }
        ));
    }
    let all = reports(r);
    if all.iter().any(|(_, x)| x.comparisons.iter().any(|c| c.exact.is_some())) {
        notes.push(format!(
            "exact_p: exact sign test (McNemar's for 0/1 scores) where the differences take at most {FEW_VALUES} values."
        ));
    }
    if all.iter().any(|(_, x)| x.runs.iter().any(|s| s.wilson)) {
        notes.push("ci_method wilson: Wilson interval for runs whose task scores are all 0 or 1.".into());
    }
    if all.iter().any(|(_, x)| x.runs.iter().any(|s| s.cr2) || x.comparisons.iter().any(|c| c.cr2)) {
        notes.push("CR2: fewer than 20 clusters, so CR2 errors with Bell-McCaffrey degrees of freedom (df).".into());
    }
    if a.mde || a.detect.is_some() {
        notes
            .push("mde, tasks_needed: two-sided paired t test at 5% with 80% power, given the observed spread.".into());
    }
    if let Some(b) = &a.by {
        notes.push(format!("group: the value of `{b}`; rows without one are over all tasks."));
    }
    if !notes.is_empty() {
        o.extend_from_slice(b"\n");
        for n in notes {
            o.extend_from_slice(format!("{n}<br>\n").as_bytes());
        }
    }
    if flips {
        let f = flips_frame(r)?;
        o.extend_from_slice(b"\n");
        o.extend_from_slice(&super::table::to_markdown(&f, a.digits));
    }
    Ok(o)
}
