//! `gate`'s outputs: text for a terminal (one line per check, the verdict first), JSON,
//! Markdown for a pull request (and `$GITHUB_STEP_SUMMARY`) and JUnit XML (each check a
//! test case).

use super::compare::{columns, interval, num, pval};
use super::report::svg::esc;
use super::table::round_text;
use crate::json::{write_indented, Json};
use crate::metrics::gate::{Rule, Verdict};
use crate::workflow::gate::{GateReport, GateRow};
use crate::workflow::gate_noise::NoiseReport;

/// The level of the reported intervals, in percent (`90` at α = 0.05).
fn level(r: &GateReport) -> String {
    round_text(100.0 * (1.0 - 2.0 * r.policy.alpha), 6)
}

/// What the estimate must clear, on its own scale: `> -0.02`, `< +50`, `within ±0.01`,
/// `in [0.5, 0.9]`.
fn passes_if(row: &GateRow, r: &GateReport, d: usize) -> String {
    let c = r.check(row);
    let b = |x: f64, signed: bool| {
        let t = round_text(x, d);
        if signed && x > 0.0 {
            format!("+{t}")
        } else {
            t
        }
    };
    let side =
        |gain: f64| if c.lower_is_better { format!("< {}", b(-gain, true)) } else { format!("> {}", b(gain, true)) };
    match c.rule {
        Rule::Superiority { margin } => side(margin),
        Rule::NonInferiority { margin } => side(-margin),
        Rule::Equivalence { margin } => format!("within ±{}", b(margin, false)),
        Rule::Threshold { min: Some(lo), max: Some(hi) } => format!("in [{}, {}]", b(lo, false), b(hi, false)),
        Rule::Threshold { min: Some(lo), max: None } => format!("> {}", b(lo, false)),
        Rule::Threshold { min: None, max } => format!("< {}", max.map_or_else(|| "-".into(), |hi| b(hi, false))),
    }
}

/// The check's name as the readable outputs show it (advisory ones marked).
fn check_name(row: &GateRow, r: &GateReport) -> String {
    let c = r.check(row);
    if c.required {
        c.name.clone()
    } else {
        format!("{} (advisory)", c.name)
    }
}

/// Whether any check is broken down by a field (the outputs then show the group).
fn grouped(r: &GateReport) -> bool {
    r.rows.iter().any(|row| row.group.is_some())
}

/// One row's cells, as text and Markdown show them.
fn cells(row: &GateRow, r: &GateReport, d: usize) -> Vec<String> {
    let c = r.check(row);
    let t = &row.tested;
    let diff = !matches!(c.rule, Rule::Threshold { .. });
    let mut v = vec![row.verdict.name().to_string(), check_name(row, r), row.candidate.clone()];
    if grouped(r) {
        v.push(row.group.clone().unwrap_or_else(|| "-".into()));
    }
    v.extend([
        c.metric.text(),
        c.rule.kind().name().to_string(),
        num(t.estimate, diff, false, d),
        interval(t.ci, diff, d),
        passes_if(row, r, d),
        pval(t.p),
        pval(row.p_adjusted),
        t.tasks.to_string(),
        t.tasks_needed.map_or_else(|| "-".into(), |n| n.to_string()),
    ]);
    v
}

fn head(r: &GateReport) -> Vec<String> {
    let mut h: Vec<String> = ["verdict", "check", "run"].map(String::from).to_vec();
    if grouped(r) {
        h.push("group".into());
    }
    let ci = format!("{}% interval", level(r));
    h.extend(
        ["metric", "kind", "estimate", &ci, "passes if", "p", "Holm p", "tasks", "tasks needed"].map(String::from),
    );
    h
}

/// The closing sentence: the verdict, the baseline, the family and the interval level.
fn summary(r: &GateReport) -> String {
    let count = |v: Verdict| r.rows.iter().filter(|row| row.verdict == v).count();
    let candidates: std::collections::BTreeSet<&str> = r.rows.iter().map(|row| row.candidate.as_str()).collect();
    format!(
        "gate: {} ({} passed, {} failed, {} inconclusive, {} warned) against baseline {}; alpha {} family-wise over the {} required check(s) on {} candidate(s) (Holm); estimates are candidate - baseline (a threshold: the candidate's mean) with {}% intervals (1 - 2·alpha)",
        r.verdict.name(),
        count(Verdict::Pass),
        count(Verdict::Fail),
        count(Verdict::Inconclusive),
        count(Verdict::Warn),
        r.baseline,
        round_text(r.policy.alpha, 6),
        r.family(),
        candidates.len(),
        level(r)
    )
}

/// The readable report: one line per check and candidate (and group), the verdict
/// first, then the summary.
pub fn text(r: &GateReport, d: usize) -> String {
    let mut rows = vec![head(r)];
    rows.extend(r.rows.iter().map(|row| cells(row, r, d)));
    let mut o = columns(&rows, if grouped(r) { 6 } else { 5 });
    o.push('\n');
    o.push_str(&summary(r));
    o.push('\n');
    o
}

fn float(x: Option<f64>) -> Json {
    x.map_or(Json::Null, Json::Float)
}

/// `{"verdict", "checks": [{"name", "metric", "kind", "verdict", "estimate", "ci_low",
/// "ci_high", "p", "p_adjusted", "tasks", "tasks_needed", …}], …}`, every number whole.
pub fn json(r: &GateReport) -> Vec<u8> {
    let checks = r
        .rows
        .iter()
        .map(|row| {
            let c = r.check(row);
            let t = &row.tested;
            let mut o = Json::obj();
            o.set("name", Json::Str(c.name.clone()));
            o.set("metric", Json::Str(c.metric.text()));
            o.set("kind", Json::Str(c.rule.kind().name().into()));
            o.set("verdict", Json::Str(row.verdict.name().into()));
            o.set("estimate", float(t.estimate));
            o.set("ci_low", float(t.ci.map(|c| c.0)));
            o.set("ci_high", float(t.ci.map(|c| c.1)));
            o.set("p", float(t.p));
            o.set("p_adjusted", float(row.p_adjusted));
            o.set("tasks", Json::Int(t.tasks as i64));
            o.set("tasks_needed", t.tasks_needed.map_or(Json::Null, |n| Json::Int(n.min(i64::MAX as u64) as i64)));
            o.set("se", float(t.se));
            o.set("candidate", Json::Str(row.candidate.clone()));
            o.set("group", row.group.clone().map_or(Json::Null, Json::Str));
            o.set("required", Json::Bool(c.required));
            o
        })
        .collect();
    let mut o = Json::obj();
    o.set("verdict", Json::Str(r.verdict.name().into()));
    o.set("checks", Json::Arr(checks));
    o.set("baseline", Json::Str(r.baseline.clone()));
    o.set("alpha", Json::Float(r.policy.alpha));
    o.set("ci_level", Json::Float(1.0 - 2.0 * r.policy.alpha));
    let mut out = Vec::new();
    write_indented(&mut out, &o, 0);
    out.push(b'\n');
    out
}

/// A Markdown table cell: pipes escaped, one line.
fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace(['\n', '\r'], " ")
}

/// The report for a pull request or a CI job summary.
pub fn markdown(r: &GateReport, d: usize) -> String {
    let mut o = format!("## rollstat gate: **{}**\n\n", r.verdict.name());
    let h = head(r);
    o.push_str(&format!("| {} |\n", h.join(" | ")));
    let numeric_from = h.len() - 7;
    let align: Vec<&str> =
        (0..h.len()).map(|i| if i >= numeric_from && i != h.len() - 5 { "---:" } else { "---" }).collect();
    o.push_str(&format!("|{}|\n", align.join("|")));
    for row in &r.rows {
        let mut v: Vec<String> = cells(row, r, d).iter().map(|s| md_cell(s)).collect();
        v[0] = format!("**{}**", v[0]);
        o.push_str(&format!("| {} |\n", v.join(" | ")));
    }
    o.push('\n');
    o.push_str(&md_cell(&summary(r)));
    o.push_str(".\n");
    o
}

/// XML text: escaped, without the control characters XML 1.0 cannot hold.
fn xml(s: &str) -> String {
    esc(&s.chars().map(|c| if c < ' ' && !matches!(c, '\t' | '\n') { ' ' } else { c }).collect::<String>())
}

/// JUnit XML: one test case per check and candidate (and group). A FAIL is a failure, a
/// required INCONCLUSIVE an error (the gate does not pass), an advisory one skipped; a
/// WARN passes with its reason in `system-out`.
pub fn junit(r: &GateReport, d: usize) -> String {
    let h = head(r);
    let count = |f: &dyn Fn(&GateRow) -> bool| r.rows.iter().filter(|row| f(row)).count();
    let failures = count(&|row| row.verdict == Verdict::Fail);
    let errors = count(&|row| row.verdict == Verdict::Inconclusive && r.check(row).required);
    let skipped = count(&|row| row.verdict == Verdict::Inconclusive && !r.check(row).required);
    let n = r.rows.len();
    let totals = format!(r#"tests="{n}" failures="{failures}" errors="{errors}" skipped="{skipped}""#);
    let mut o = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    o.push_str(&format!("<testsuites name=\"rollstat gate\" {totals}>\n"));
    o.push_str(&format!("  <testsuite name=\"rollstat gate: {}\" {totals}>\n", xml(&r.baseline)));
    for row in &r.rows {
        let c = r.check(row);
        let name = match &row.group {
            Some(g) => format!("{} [{}={g}]", c.name, c.by.as_deref().unwrap_or_default()),
            None => c.name.clone(),
        };
        let details: Vec<String> = h.iter().zip(cells(row, r, d)).skip(1).map(|(k, v)| format!("{k}: {v}")).collect();
        let details = xml(&details.join("; "));
        o.push_str(&format!(
            "    <testcase classname=\"{}\" name=\"{}\">\n",
            xml(&format!("rollstat.gate.{}", row.candidate)),
            xml(&name)
        ));
        let say = |tag: &str| format!("      <{tag} type=\"{}\" message=\"{details}\"/>\n", row.verdict.name());
        match row.verdict {
            Verdict::Fail => o.push_str(&say("failure")),
            Verdict::Inconclusive if c.required => o.push_str(&say("error")),
            Verdict::Inconclusive => o.push_str(&format!("      <skipped message=\"{details}\"/>\n")),
            Verdict::Pass | Verdict::Warn => {
                o.push_str(&format!("      <system-out>{}: {details}</system-out>\n", row.verdict.name()))
            }
        }
        o.push_str("    </testcase>\n");
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}

/// The margin a noise row compares with: the check's margin, or for a threshold the
/// distance of its nearest bound from the run's mean is not known here (`None`).
fn margin_of(rule: &Rule) -> Option<f64> {
    match *rule {
        Rule::Superiority { margin } | Rule::NonInferiority { margin } | Rule::Equivalence { margin } => Some(margin),
        Rule::Threshold { .. } => None,
    }
}

/// `gate --noise` for reading: per check (and group), the margin the run's own A/A
/// splits need, against the check's margin.
pub fn noise_text(r: &NoiseReport, d: usize) -> String {
    let mut rows = vec![["check", "group", "metric", "kind", "margin", "noise floor", "median", "tasks", "splits", ""]
        .map(String::from)
        .to_vec()];
    for row in &r.rows {
        let c = &r.policy.checks[row.check];
        let margin = margin_of(&c.rule);
        let below = matches!((margin, row.floor), (Some(m), Some(f)) if m < f);
        rows.push(vec![
            c.name.clone(),
            row.group.clone().unwrap_or_else(|| "-".into()),
            c.metric.text(),
            c.rule.kind().name().to_string(),
            margin.map_or_else(|| "-".into(), |m| round_text(m, d)),
            num(row.floor, false, false, d),
            num(row.median, false, false, d),
            row.tasks.to_string(),
            row.splits.to_string(),
            if below { "below the noise floor".into() } else { String::new() },
        ]);
    }
    let mut o = format!(
        "noise floor of {}: {} A/A splits of its repeats into halves (seed {}); per split the margin within which the halves would be shown equivalent, |diff| + t(1 - alpha)·se at alpha {} (a threshold: t(1 - alpha)·se of a half's mean), its 95th percentile the floor\n\n",
        r.run,
        r.splits,
        r.seed,
        round_text(r.policy.alpha, 6)
    );
    o.push_str(&columns(&rows, 4));
    o
}

/// `gate --noise --format json`: `{"run", "splits", "seed", "alpha", "checks": [{"name",
/// "metric", "kind", "group", "margin", "floor", "median", "tasks", "splits"}]}`.
pub fn noise_json(r: &NoiseReport) -> Vec<u8> {
    let checks = r
        .rows
        .iter()
        .map(|row| {
            let c = &r.policy.checks[row.check];
            let mut o = Json::obj();
            o.set("name", Json::Str(c.name.clone()));
            o.set("metric", Json::Str(c.metric.text()));
            o.set("kind", Json::Str(c.rule.kind().name().into()));
            o.set("group", row.group.clone().map_or(Json::Null, Json::Str));
            o.set("margin", float(margin_of(&c.rule)));
            o.set("floor", float(row.floor));
            o.set("median", float(row.median));
            o.set("tasks", Json::Int(row.tasks as i64));
            o.set("splits", Json::Int(row.splits as i64));
            o
        })
        .collect();
    let mut o = Json::obj();
    o.set("run", Json::Str(r.run.clone()));
    o.set("splits", Json::Int(r.splits as i64));
    o.set("seed", Json::Int(r.seed.min(i64::MAX as u64) as i64));
    o.set("alpha", Json::Float(r.policy.alpha));
    o.set("checks", Json::Arr(checks));
    let mut out = Vec::new();
    write_indented(&mut out, &o, 0);
    out.push(b'\n');
    out
}
