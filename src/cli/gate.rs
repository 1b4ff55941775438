//! `rollstat gate`: a release decision from a policy file. The runs are read as
//! `compare` reads them; each check of the policy (superiority, non-inferiority,
//! equivalence, threshold) is tested on every candidate against the baseline, and the
//! gate says PASS (exit 0), FAIL (exit 3) or INCONCLUSIVE (exit 4).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use super::common::{self, Pairing, RunsFiles};
use crate::error::{Error, Result};
use crate::export::atomic::OutputSet;
use crate::export::gate::{json, junit, markdown, noise_json, noise_text, text};
use crate::workflow::gate::GateReport;
use crate::workflow::gate_policy;
use crate::workflow::{CompareConfig, GateConfig};

/// `gate --format`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GateFormat {
    /// One line per check, the verdict first.
    #[default]
    Text,
    Json,
    /// For a pull request comment.
    Markdown,
    /// JUnit XML: each check a test case.
    Junit,
}

#[derive(ClapArgs, Debug, Clone)]
#[command(group(clap::ArgGroup::new("runs_given").required(true).multiple(true).args(["rollouts", "files"])))]
pub struct Args {
    /// The policy: a TOML file of `[[check]]` tables (metric, kind, margin or min/max,
    /// direction, required, by) and a family-wise `alpha` (see docs/compare.md, "Gates").
    #[arg(long, value_name = "GATE.toml")]
    pub policy: PathBuf,
    #[command(flatten)]
    pub runs: RunsFiles,
    /// The run the others are gated against (default: the first run listed).
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Field that groups tasks into clusters: standard errors are clustered by it, as in
    /// `compare`.
    #[arg(long, value_name = "FIELD")]
    pub cluster_key: Option<String>,
    #[command(flatten)]
    pub pairing: Pairing,
    /// Output format. Whatever it is, the Markdown report is also appended to the file
    /// `$GITHUB_STEP_SUMMARY` names, when that is set.
    #[arg(long, value_enum, default_value_t = GateFormat::Text)]
    pub format: GateFormat,
    /// Output file (default: stdout).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Instead of gating: split the baseline run's repeats into two halves many times (an
    /// A/A test, seeded) and report, per check, the smallest margin the run's own noise
    /// can resolve (text or json).
    #[arg(long)]
    pub noise: bool,
    /// How many A/A splits --noise makes.
    #[arg(long, value_name = "N", default_value_t = crate::workflow::gate_noise::SPLITS, requires = "noise")]
    pub splits: usize,
    /// Seed of the --noise splits: the same seed, the same splits.
    #[arg(long, value_name = "SEED", default_value_t = 1, requires = "noise")]
    pub seed: u64,
    /// Significant digits of the numbers in text, Markdown and JUnit (JSON keeps every
    /// digit).
    #[arg(long, value_name = "DIGITS", default_value_t = crate::export::table::READ_DIGITS as u8,
          value_parser = clap::value_parser!(u8).range(1..=17))]
    pub precision: u8,
}

impl Args {
    /// The validated configuration: the policy read and checked first, before any
    /// rollout is read.
    pub fn config(&self) -> Result<GateConfig> {
        let policy = gate_policy::read(&self.policy)?;
        let runs = CompareConfig {
            rollouts: self.runs.rollouts(),
            inputs: self.runs.inputs.clone(),
            agent: self.runs.agent.clone(),
            metric: "reward".into(),
            baseline: self.baseline.clone(),
            cluster_key: self.cluster_key.clone(),
            pairing: self.pairing.config(),
            ..CompareConfig::default()
        };
        runs.validate()?;
        Ok(GateConfig { runs, policy })
    }
}

/// The report in `format`.
pub fn render(r: &GateReport, format: GateFormat, digits: usize) -> Vec<u8> {
    match format {
        GateFormat::Text => text(r, digits).into_bytes(),
        GateFormat::Json => json(r),
        GateFormat::Markdown => markdown(r, digits).into_bytes(),
        GateFormat::Junit => junit(r, digits).into_bytes(),
    }
}

/// Appends the Markdown report to `$GITHUB_STEP_SUMMARY` (a CI job's summary page),
/// when that names a file. A summary that cannot be written is a warning: the verdict
/// and its exit status stand.
fn step_summary(r: &GateReport, digits: usize) {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else { return };
    let path = Path::new(&path);
    let appended = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(markdown(r, digits).as_bytes()));
    if let Err(e) = appended {
        eprintln!("warning: GITHUB_STEP_SUMMARY={}: the Markdown report was not appended: {e}", path.display());
    }
}

/// Runs the gate; the exit status is the verdict's (0 PASS, 3 FAIL, 4 INCONCLUSIVE).
pub fn run(a: Args) -> Result<u8> {
    let c = a.config()?;
    let mut read: Vec<&Path> = c.runs.rollouts.iter().map(PathBuf::as_path).collect();
    read.extend(c.runs.inputs.iter().map(PathBuf::as_path));
    read.push(&a.policy);
    if a.noise && matches!(a.format, GateFormat::Markdown | GateFormat::Junit) {
        return Err(Error::Usage("--noise reports noise floors, not verdicts: give --format text or json".into()));
    }
    let out = OutputSet::new(&read);
    // Refused before reading, not after.
    if let Some(path) = &a.out {
        out.check(path)?;
        common::outputs_to_stdout(&[path]);
    }
    let digits = a.precision.into();
    if a.noise {
        let r = crate::workflow::gate_noise::noise(&c, a.splits, a.seed)?;
        let bytes = if a.format == GateFormat::Json { noise_json(&r) } else { noise_text(&r, digits).into_bytes() };
        write(out, a.out.as_deref(), &bytes, &format!("noise floors of {} check(s)", r.rows.len()))?;
        return Ok(0);
    }
    let r = crate::workflow::gate(&c)?;
    common::print_warnings(&r.warnings);
    let bytes = render(&r, a.format, digits);
    write(out, a.out.as_deref(), &bytes, &format!("gate {}, {} check(s)", r.verdict.name(), r.rows.len()))?;
    step_summary(&r, digits);
    Ok(r.verdict.exit_status())
}

/// Writes `bytes` to `--out` (atomically, saying what it holds) or to stdout.
fn write(mut out: OutputSet, to: Option<&Path>, bytes: &[u8], what: &str) -> Result<()> {
    match to {
        Some(path) => {
            out.add(path, bytes)?;
            out.commit()?;
            say!("Wrote {} ({what})", path.display());
        }
        None => std::io::stdout().write_all(bytes).map_err(|e| Error::write(Path::new("<stdout>"), e))?,
    }
    Ok(())
}
