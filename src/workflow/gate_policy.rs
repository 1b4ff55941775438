//! `gate`'s policy file: a TOML file of checks, read and validated whole before any
//! rollout is read. Every problem is refused naming the file, the line and the key.
//!
//! ```toml
//! alpha = 0.05                  # family-wise over the required checks (Holm)
//!
//! [[check]]
//! name = "reward does not regress"
//! metric = "reward"             # a numeric rollouts field, "pass@K", "failure_rate" or "health:CHECK"
//! kind = "non_inferiority"      # superiority | non_inferiority | equivalence | threshold
//! margin = 0.02                 # in the metric's units; threshold: min and/or max
//! direction = "higher"          # or "lower": lower is better
//! required = true               # false: advisory (WARN instead of FAIL)
//! by = "subset"                 # one check per value of this field
//! ```

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::error::{Error, Location, Msg, Result};
use crate::metrics::gate::{Kind, Rule};

/// What a check measures per task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Metric {
    /// A numeric rollouts field: a task's value is the mean over its measured rollouts.
    Field(String),
    /// The task's pass@K of `reward` (`compare --pass-at K`).
    PassAt(u32),
    /// The task's failed rollouts (standing failures in the `_failures.jsonl` sidecar
    /// beside the rollouts) over its expected ones (those plus its rows).
    FailureRate,
    /// The share of the task's rollouts that this rollout health check flagged (the
    /// check run over each run's rollouts as `aggregate` runs it).
    Health(crate::health::Check),
}

impl Metric {
    /// The metric as the policy names it.
    pub fn text(&self) -> String {
        match self {
            Metric::Field(f) => f.clone(),
            Metric::PassAt(k) => format!("pass@{k}"),
            Metric::FailureRate => "failure_rate".into(),
            Metric::Health(c) => format!("health:{}", c.id()),
        }
    }
}

/// One check of a policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: String,
    pub metric: Metric,
    pub rule: Rule,
    /// `direction = "lower"`: a smaller value is better.
    pub lower_is_better: bool,
    /// `required = false` makes the check advisory.
    pub required: bool,
    /// One test per value of this field (groups of whole tasks).
    pub by: Option<String>,
    /// The lines of the check's `metric` and `by` keys (for errors found later).
    pub metric_line: u64,
    pub by_line: Option<u64>,
}

/// A gate's policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub path: PathBuf,
    /// The family-wise level over the required checks.
    pub alpha: f64,
    pub checks: Vec<Check>,
}

/// The default `alpha`.
pub const ALPHA: f64 = 0.05;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTop {
    alpha: Option<Spanned<f64>>,
    #[serde(default)]
    check: Vec<Spanned<FileCheck>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCheck {
    name: Option<Spanned<String>>,
    metric: Spanned<String>,
    kind: Spanned<String>,
    margin: Option<Spanned<f64>>,
    min: Option<Spanned<f64>>,
    max: Option<Spanned<f64>>,
    direction: Option<Spanned<String>>,
    required: Option<bool>,
    by: Option<Spanned<String>>,
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> u64 {
    let end = offset.min(text.len());
    text.as_bytes()[..end].iter().filter(|&&b| b == b'\n').count() as u64 + 1
}

/// The key a TOML error is about: named in the message (an unknown or missing key), or
/// the key of the `key = value` line the error points into.
fn key_of(text: &str, span: Option<&Range<usize>>, msg: &str) -> Option<String> {
    for lead in ["unknown field `", "missing field `"] {
        if let Some(rest) = msg.split(lead).nth(1) {
            return rest.split('`').next().map(str::to_string);
        }
    }
    let start = span?.start.min(text.len());
    let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

/// Reads and validates the policy file at `path`.
pub fn read(path: &Path) -> Result<Policy> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::read(path, e))?;
    parse(path, &text)
}

/// Validates the policy `text` (read from `path`, named in errors).
pub fn parse(path: &Path, text: &str) -> Result<Policy> {
    let at = |span: &Range<usize>, key: &str| Location::line(path, line_of(text, span.start)).key(key);
    let top: FileTop = toml::from_str(text).map_err(|e| {
        let span = e.span();
        let msg = e.message().trim().replace("field", "key");
        let mut loc = Location::file(path);
        if let Some(s) = &span {
            loc.line = Some(line_of(text, s.start));
        }
        if let Some(k) = key_of(text, span.as_ref(), e.message()) {
            loc = loc.key(&k);
        }
        let msg = Msg::default()
            .text(format!("{msg} (see "))
            .per_door("`rollstat gate --help`", "`help(rollstat.gate)`")
            .text(" and docs/compare.md, \"Gates\")");
        Error::refused(Some(loc), msg)
    })?;
    let alpha = match &top.alpha {
        None => ALPHA,
        Some(a) => {
            let v = *a.get_ref();
            if !(v > 0.0 && v < 0.5) {
                return Err(Error::bad(
                    at(&a.span(), "alpha"),
                    format!("alpha {v}: give a level between 0 and 0.5 (0.05 is usual); the checks are one-sided tests at it"),
                ));
            }
            v
        }
    };
    if top.check.is_empty() {
        return Err(Error::bad(
            Location::file(path).key("check"),
            "the policy has no [[check]]; give at least one (metric, kind and margin)",
        ));
    }
    let mut checks: Vec<Check> = Vec::new();
    let mut names: Vec<(String, u64)> = Vec::new();
    for c in &top.check {
        let table_line = line_of(text, c.span().start);
        let c = c.get_ref();
        let check = check(path, text, c)?;
        let name_line = c.name.as_ref().map_or(table_line, |n| line_of(text, n.span().start));
        if let Some((_, first)) = names.iter().find(|(n, _)| *n == check.name) {
            return Err(Error::bad(
                Location::line(path, name_line).key("name"),
                format!(
                    "a check named {:?} is already on line {first}; give each check its own `name` (the outputs tell them apart by it)",
                    check.name
                ),
            ));
        }
        names.push((check.name.clone(), name_line));
        checks.push(check);
    }
    Ok(Policy { path: path.to_path_buf(), alpha, checks })
}

/// A check's `metric`: a numeric rollouts field, `pass@K`, `failure_rate` or
/// `health:CHECK` (a rollout health check's id).
fn parse_metric(c: &FileCheck, at: &dyn Fn(Range<usize>, &str) -> Location) -> Result<Metric> {
    let metric_text = c.metric.get_ref().trim();
    Ok(if let Some(k) = metric_text.strip_prefix("pass@") {
        match k.parse::<u32>() {
            Ok(k) if k >= 1 => Metric::PassAt(k),
            _ => {
                return Err(Error::bad(
                    at(c.metric.span(), "metric"),
                    format!(
                        "metric {metric_text:?}: pass@K takes a whole number K of at least 1 (\"pass@1\", \"pass@4\")"
                    ),
                ))
            }
        }
    } else if metric_text == "failure_rate" {
        Metric::FailureRate
    } else if let Some(id) = metric_text.strip_prefix("health:") {
        let check = crate::health::Check::rollout_from_id(id.trim()).map_err(|ids| {
            Error::bad(
                at(c.metric.span(), "metric"),
                format!("metric {metric_text:?}: not a rollout health check; give one of {ids}"),
            )
        })?;
        Metric::Health(check)
    } else if metric_text.is_empty() {
        return Err(Error::bad(
            at(c.metric.span(), "metric"),
            "metric is empty; give a numeric rollouts field, \"pass@K\", \"failure_rate\" or \"health:CHECK\"",
        ));
    } else {
        Metric::Field(metric_text.to_string())
    })
}

/// One `[[check]]` table, validated.
fn check(path: &Path, text: &str, c: &FileCheck) -> Result<Check> {
    let at = |span: Range<usize>, key: &str| Location::line(path, line_of(text, span.start)).key(key);
    let kind_text = c.kind.get_ref().as_str();
    let Some(kind) = Kind::parse(kind_text) else {
        let all: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
        return Err(Error::bad(
            at(c.kind.span(), "kind"),
            format!("kind {kind_text:?} is not one of {}", all.join(" | ")),
        ));
    };
    let metric = parse_metric(c, &at)?;
    let lower_is_better = match c.direction.as_ref().map(|d| (d.get_ref().as_str(), d.span())) {
        // Fewer failures and fewer flagged rollouts are better unless the policy says otherwise.
        None => matches!(metric, Metric::FailureRate | Metric::Health(_)),
        Some(("higher", _)) => false,
        Some(("lower", _)) => true,
        Some((other, span)) => {
            return Err(Error::bad(
                at(span, "direction"),
                format!("direction {other:?}: give \"higher\" (the default: higher is better) or \"lower\""),
            ))
        }
    };
    let finite = |v: &Spanned<f64>, key: &str| -> Result<f64> {
        let x = *v.get_ref();
        if x.is_finite() {
            Ok(x)
        } else {
            Err(Error::bad(at(v.span(), key), format!("{key} {x}: give a finite number in the metric's units")))
        }
    };
    let refuse = |v: &Option<Spanned<f64>>, key: &str, why: &str| -> Result<()> {
        match v {
            Some(v) => {
                Err(Error::bad(at(v.span(), key), format!("{key} does not apply to a {} check; {why}", kind.name())))
            }
            None => Ok(()),
        }
    };
    let rule = if kind == Kind::Threshold {
        refuse(&c.margin, "margin", "a threshold compares the candidate's own interval with `min` and/or `max`")?;
        if let Some(d) = &c.direction {
            return Err(Error::bad(
                at(d.span(), "direction"),
                "direction does not apply to a threshold check; `min` and `max` say which side is good",
            ));
        }
        let min = c.min.as_ref().map(|v| finite(v, "min")).transpose()?;
        let max = c.max.as_ref().map(|v| finite(v, "max")).transpose()?;
        match (min, max) {
            (None, None) => {
                return Err(Error::bad(
                    at(c.kind.span(), "kind"),
                    "a threshold check needs `min`, `max` or both (the bounds the candidate's mean must keep)",
                ))
            }
            (Some(lo), Some(hi)) if lo >= hi => {
                return Err(Error::bad(
                    at(c.max.as_ref().map_or(c.kind.span(), |v| v.span()), "max"),
                    format!("max {hi} is not above min {lo}"),
                ))
            }
            _ => {}
        }
        Rule::Threshold { min, max }
    } else {
        let why = "it tests the difference from the baseline against `margin`";
        refuse(&c.min, "min", why)?;
        refuse(&c.max, "max", why)?;
        let margin = match &c.margin {
            None if kind == Kind::Superiority => 0.0,
            None => {
                return Err(Error::bad(
                    at(c.kind.span(), "margin"),
                    format!("a {} check needs `margin` (a positive number in the metric's units)", kind.name()),
                ))
            }
            Some(v) => {
                let m = finite(v, "margin")?;
                let positive = kind != Kind::Superiority;
                if m < 0.0 || (positive && m == 0.0) {
                    let meaning = match kind {
                        Kind::NonInferiority => "how much worse than the baseline the candidate may be",
                        Kind::Equivalence => "how far from the baseline, either way, the candidate may be",
                        _ => "how much better than the baseline the candidate must be",
                    };
                    let sign = if positive { "positive" } else { "zero or positive" };
                    return Err(Error::bad(
                        at(v.span(), "margin"),
                        format!(
                            "margin {m} has the wrong sign: give it as a {sign} number, {meaning} \
                             (`direction = \"lower\"` says that lower is better)"
                        ),
                    ));
                }
                m
            }
        };
        match kind {
            Kind::Superiority => Rule::Superiority { margin },
            Kind::NonInferiority => Rule::NonInferiority { margin },
            _ => Rule::Equivalence { margin },
        }
    };
    let by = match &c.by {
        Some(b) if b.get_ref().trim().is_empty() => {
            return Err(Error::bad(at(b.span(), "by"), "by is empty; give the field whose values group the tasks"))
        }
        Some(b) => Some(b.get_ref().trim().to_string()),
        None => None,
    };
    let name = match &c.name {
        Some(n) if !n.get_ref().trim().is_empty() => n.get_ref().trim().to_string(),
        _ => format!("{} {}", metric.text(), kind.name()),
    };
    Ok(Check {
        name,
        metric,
        rule,
        lower_is_better,
        required: c.required.unwrap_or(true),
        by,
        metric_line: line_of(text, c.metric.span().start),
        by_line: c.by.as_ref().map(|b| line_of(text, b.span().start)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> (Location, String) {
        match parse(Path::new("gate.toml"), text) {
            Err(Error::BadInput { loc, msg }) => (loc, msg),
            Err(Error::Refused { loc: Some(loc), msg }) => (loc, msg.render(crate::error::Door::Cli)),
            other => panic!("expected a refusal of\n{text}\ngot {other:?}"),
        }
    }

    #[test]
    fn a_full_policy_reads() {
        let p = parse(
            Path::new("gate.toml"),
            "alpha = 0.1\n\n[[check]]\nname = \"reward\"\nmetric = \"reward\"\nkind = \"non_inferiority\"\nmargin = 0.02\n\n\
             [[check]]\nmetric = \"output_tokens\"\nkind = \"non_inferiority\"\ndirection = \"lower\"\nmargin = 50\nby = \"subset\"\nrequired = false\n\n\
             [[check]]\nmetric = \"pass@4\"\nkind = \"threshold\"\nmin = 0.5\n",
        )
        .unwrap();
        assert_eq!(p.alpha, 0.1);
        assert_eq!(p.checks.len(), 3);
        let c = &p.checks[1];
        assert_eq!((c.name.as_str(), c.lower_is_better, c.required), ("output_tokens non_inferiority", true, false));
        assert_eq!(
            (c.rule, c.by.as_deref(), c.metric_line, c.by_line),
            (Rule::NonInferiority { margin: 50.0 }, Some("subset"), 10, Some(14))
        );
        assert_eq!(p.checks[2].metric, Metric::PassAt(4));
        assert_eq!(p.checks[2].rule, Rule::Threshold { min: Some(0.5), max: None });
    }

    #[test]
    fn problems_name_the_line_and_the_key() {
        let head = "[[check]]\nmetric = \"reward\"\n";
        let cases: [(String, u64, &str, &str); 9] = [
            (format!("{head}kind = \"non_inferiority\"\nmargn = 0.02\n"), 4, "margn", "unknown key"),
            (format!("{head}kind = \"non_inferiority\"\nmargin = -0.02\n"), 4, "margin", "wrong sign"),
            (format!("{head}kind = \"equivalence\"\nmargin = 0\n"), 4, "margin", "wrong sign"),
            (format!("{head}kind = \"inferiority\"\nmargin = 0.1\n"), 3, "kind", "superiority | non_inferiority"),
            (format!("{head}kind = \"threshold\"\nmargin = 0.1\n"), 4, "margin", "does not apply"),
            (format!("{head}kind = \"non_inferiority\"\n"), 3, "margin", "needs `margin`"),
            (format!("{head}kind = \"superiority\"\ndirection = \"down\"\n"), 4, "direction", "\"lower\""),
            ("\n[[check]]\nkind = \"superiority\"\n".to_string(), 2, "metric", "missing key"),
            (format!("alpha = 0.7\n{head}kind = \"superiority\"\n"), 1, "alpha", "between 0 and 0.5"),
        ];
        for (text, line, key, says) in cases {
            let (loc, msg) = refused(&text);
            assert_eq!((loc.line, loc.key.as_deref()), (Some(line), Some(key)), "{text}: {msg}");
            assert!(msg.contains(says), "{text}: {msg}");
        }
        let (loc, msg) = refused(&format!(
            "{head}kind = \"superiority\"\n\n[[check]]\nmetric = \"reward\"\nkind = \"superiority\"\n"
        ));
        assert_eq!((loc.line, loc.key.as_deref()), (Some(5), Some("name")), "{msg}");
        let (loc, msg) = refused("alpha = 0.05\n");
        assert_eq!(loc.key.as_deref(), Some("check"), "{msg}");
    }
}
