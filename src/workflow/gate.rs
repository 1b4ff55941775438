//! The gate workflow: read the runs as `compare` does (once per file), compute
//! `compare`'s report for each metric and breakdown the policy names, and test every
//! check on every candidate (and group) against the baseline.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::compare::{compare_runs, read_runs_with, ReadFile, Runs};
use super::gate_policy::{Check, Metric, Policy};
use crate::error::{Error, Location, Msg, Opt, Result};
use crate::ingest::{InputTable, ReadOptions, RolloutTable};
use crate::metrics::compare::Report;
use crate::metrics::gate::{decide, overall, test, Rule, Tested, Verdict};
use crate::metrics::warnings::Warnings;
use crate::workflow::CompareConfig;

/// What to gate: the runs as `compare` takes them (`metric`, `pass_at`, `by` and the
/// sizing options are the policy's, per check) and the policy.
#[derive(Debug, Clone)]
pub struct GateConfig {
    pub runs: CompareConfig,
    pub policy: Policy,
}

/// One check on one candidate (and group).
#[derive(Debug, Clone)]
pub struct GateRow {
    /// The check's index in the policy.
    pub check: usize,
    pub candidate: String,
    pub group: Option<String>,
    pub tested: Tested,
    pub p_adjusted: Option<f64>,
    pub verdict: Verdict,
}

/// The gate's decision.
#[derive(Debug, Clone)]
pub struct GateReport {
    pub verdict: Verdict,
    pub baseline: String,
    pub policy: Policy,
    pub rows: Vec<GateRow>,
    /// `compare`'s warnings about the runs, once each.
    pub warnings: Warnings,
}

impl GateReport {
    pub fn check(&self, row: &GateRow) -> &Check {
        &self.policy.checks[row.check]
    }

    /// How many required rows the Holm family holds.
    pub fn family(&self) -> usize {
        self.rows.iter().filter(|r| self.check(r).required).count()
    }
}

/// `compare`'s configuration for one check's metric and breakdown.
pub(super) fn config_for(base: &CompareConfig, c: &Check) -> CompareConfig {
    let (metric, pass_at) = match &c.metric {
        Metric::Field(f) => (f.clone(), None),
        Metric::PassAt(k) => ("reward".to_string(), Some(*k)),
        // Read as `compare` reads the reward; the rates are made from the runs read.
        Metric::FailureRate => ("reward".to_string(), None),
        // A column the read adds to each table (see `read_tables`).
        Metric::Health(_) => (c.metric.text(), None),
    };
    CompareConfig { metric, pass_at, by: c.by.clone(), mde: false, detect: None, flips: None, ..base.clone() }
}

/// An error about a field the policy names, said at the policy's line: the metric, or
/// the breakdown field, missing from a rollouts file or not usable.
fn at_policy(e: Error, policy: &Policy, c: &Check, cfg: &CompareConfig) -> Error {
    match e {
        Error::BadInput { loc, msg } if loc.line.is_none() && loc.row.is_none() => {
            let (key, line) = if loc.key.as_deref() == Some(cfg.metric.as_str()) {
                ("metric", c.metric_line)
            } else if loc.key.is_some() && loc.key == c.by {
                ("by", c.by_line.unwrap_or(c.metric_line))
            } else {
                return Error::BadInput { loc, msg };
            };
            Error::bad(Location::line(&policy.path, line).key(key), format!("check {:?}: {}: {msg}", c.name, loc))
        }
        Error::Refused { loc: Some(loc), msg } if loc.line.is_none() && loc.row.is_none() => {
            let key = if loc.key.as_deref() == Some(cfg.metric.as_str()) {
                ("metric", c.metric_line)
            } else if loc.key.is_some() && loc.key == c.by {
                ("by", c.by_line.unwrap_or(c.metric_line))
            } else {
                return Error::refused(Some(loc), msg);
            };
            let at = Location::line(&policy.path, key.1).key(key.0);
            Error::refused(Some(at), Msg::default().text(format!("check {:?}: {}: ", c.name, loc)).then(msg))
        }
        Error::Refused { loc: None, msg } if cfg.pass_at.is_some() && msg.opens_with("pass_at") => {
            let at = Location::line(&policy.path, c.metric_line).key("metric");
            Error::refused(Some(at), Msg::default().text(format!("check {:?}: ", c.name)).then(msg))
        }
        e => e,
    }
}

/// A file read already: its rollouts and inputs.
type ReadTable = (RolloutTable, Option<InputTable>);

/// Each JSONL rollouts file read once (with its inputs), whatever the number of metrics
/// the policy names; `None` for a Parquet table (read per metric, as `compare` does).
/// For each `health:CHECK` metric of the policy the table gains a column of that name:
/// 1 for a rollout the check flagged, 0 for the others.
pub(super) fn read_tables(base: &CompareConfig, policy: &Policy) -> Result<Vec<Option<ReadTable>>> {
    // Said by `read_runs` too, but before reading here.
    base.check_inputs()?;
    let health: Vec<&Check> = policy.checks.iter().filter(|c| matches!(c.metric, Metric::Health(_))).collect();
    let opts = ReadOptions { evidence: !health.is_empty(), ..ReadOptions::FINGERPRINTS };
    let mut tables = Vec::new();
    for (i, path) in base.rollouts.iter().enumerate() {
        let parquet = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("parquet"));
        if parquet {
            if let Some(c) = health.first() {
                return Err(Error::bad(
                    Location::line(&policy.path, c.metric_line).key("metric"),
                    format!(
                        "check {:?}: {} judges the rollouts' lines, which the Parquet table {} does not hold; give the JSONL file",
                        c.name,
                        c.metric.text(),
                        path.display()
                    ),
                ));
            }
            tables.push(None);
            continue;
        }
        let (mut t, inputs) =
            super::read_both(std::slice::from_ref(path), base.inputs.get(i).map(PathBuf::as_path), opts)?;
        if !health.is_empty() {
            let judged = super::aggregate::check_by_run(&t)?;
            for c in &health {
                let Metric::Health(check) = c.metric else { continue };
                let name = c.metric.text();
                if t.column(crate::ingest::Source::Top, &name).is_some() {
                    continue;
                }
                t.add_number_column(
                    &name,
                    judged.iter().map(|h| if h.flagged.has(check) { 1.0 } else { 0.0 }).collect(),
                );
            }
        }
        tables.push(Some((t, inputs)));
    }
    Ok(tables)
}

/// A check's metric and breakdown: checks that share them share `compare`'s report.
type Key = (String, Option<String>);

fn key(c: &Check) -> Key {
    (c.metric.text(), c.by.clone())
}

/// The runs as check `c` measures them: `compare`'s reading for its metric and
/// breakdown (problems said at the policy's line), and for `failure_rate` each run's
/// failure rate made from them.
pub(super) fn check_runs(
    policy: &Policy,
    base: &CompareConfig,
    c: &Check,
    read: &[Option<ReadFile<'_>>],
) -> Result<Runs> {
    let cfg = config_for(base, c);
    let mut runs = read_runs_with(&cfg, read).map_err(|e| at_policy(e, policy, c, &cfg))?;
    if c.metric == Metric::FailureRate {
        let clustered = base.cluster_key.is_some();
        runs.rollouts = runs.rollouts.iter().zip(&runs.failed).map(|(r, f)| r.failure_rates(f, clustered)).collect();
    }
    Ok(runs)
}

/// Reads the runs, computes `compare`'s report for each of the policy's metrics and
/// breakdowns, and decides every check.
pub fn gate(g: &GateConfig) -> Result<GateReport> {
    let base = &g.runs;
    base.validate()?;
    let tables = read_tables(base, &g.policy)?;
    let read: Vec<Option<ReadFile<'_>>> = tables.iter().map(|t| t.as_ref().map(|(r, i)| (r, i.as_ref()))).collect();
    // Every metric and breakdown read (and so checked) before any is computed.
    let mut read_runs: Vec<(Key, usize, Runs)> = Vec::new();
    for (ci, c) in g.policy.checks.iter().enumerate() {
        let key = key(c);
        if read_runs.iter().any(|(k, _, _)| *k == key) {
            continue;
        }
        let runs = check_runs(&g.policy, base, c, &read)?;
        if runs.names.len() < 2 {
            let files: Vec<String> = base.rollouts.iter().map(|p| p.display().to_string()).collect();
            let msg = Msg::default()
                .text(format!(
                    "gate needs a baseline and at least one candidate; {} hold{} {}: give another ",
                    files.join(", "),
                    if files.len() == 1 { "s" } else { "" },
                    runs.names.first().map_or("no rollouts".to_string(), |n| format!("one run ({n})"))
                ))
                .opt(Opt::named("rollouts"))
                .text(" file, or a file with several agents");
            return Err(Error::refused(None, msg));
        }
        read_runs.push((key, ci, runs));
    }
    let mut reports: BTreeMap<Key, Report> = BTreeMap::new();
    let mut names: Vec<String> = Vec::new();
    for (key, ci, runs) in read_runs {
        let c = &g.policy.checks[ci];
        let cfg = config_for(base, c);
        let report = compare_runs(&cfg, &runs).map_err(|e| at_policy(e, &g.policy, c, &cfg))?;
        names = runs.names;
        reports.insert(key, report);
    }
    let mut warnings = Warnings::default();
    for r in reports.values() {
        for (m, _) in r.warnings.items() {
            if !warnings.items().iter().any(|(w, _)| w == m) {
                warnings.add(m.clone());
            }
        }
    }
    let alpha = g.policy.alpha;
    let clustered = base.cluster_key.is_some();
    let mut rows: Vec<GateRow> = Vec::new();
    let mut baseline = String::new();
    for (ci, c) in g.policy.checks.iter().enumerate() {
        let report = &reports[&key(c)];
        baseline = names[report.baseline].clone();
        let parts: Vec<(Option<&str>, &Report)> = if c.by.is_some() {
            report.groups.iter().map(|(g, r)| (Some(g.as_str()), r)).collect()
        } else {
            vec![(None, report)]
        };
        for (group, r) in parts {
            for cmp in &r.comparisons {
                let e = match c.rule {
                    Rule::Threshold { .. } => r.runs[cmp.run].est,
                    _ => cmp.stats.map(|p| p.diff),
                };
                rows.push(GateRow {
                    check: ci,
                    candidate: names[cmp.run].clone(),
                    group: group.map(str::to_string),
                    tested: test(&c.rule, c.lower_is_better, e.as_ref(), clustered, alpha),
                    p_adjusted: None,
                    verdict: Verdict::Inconclusive,
                });
            }
        }
    }
    let tested: Vec<(bool, Tested)> = rows.iter().map(|r| (g.policy.checks[r.check].required, r.tested)).collect();
    for (row, d) in rows.iter_mut().zip(decide(&tested, alpha)) {
        row.p_adjusted = d.p_adjusted;
        row.verdict = d.verdict;
        if d.verdict != Verdict::Inconclusive {
            // How many tasks a decision takes is asked only when there is none.
            row.tested.tasks_needed = None;
        }
    }
    let verdict =
        overall(rows.iter().filter(|r| g.policy.checks[r.check].required).map(|r| &r.verdict).collect::<Vec<_>>());
    Ok(GateReport { verdict, baseline, policy: g.policy.clone(), rows, warnings })
}
