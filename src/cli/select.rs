//! `rollstat select`: the next training set from the reward profile. Tasks are chosen
//! from one run's `tasks` table by a SQL predicate and shortcuts (band of mean reward,
//! zero variance, quotas per group, seeded weighted sampling); each chosen task's first
//! line in the materialized inputs is written byte for byte, with a manifest beside it.
//! With `--lake DIR --sweep ID` the files are those a sweep of a lake was computed from.
//! Flags are described in the command reference (docs/commands.md).

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common;
use crate::error::{Error, Result};
use crate::workflow::select::{Sample, SelectConfig, SelectFormat};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Rollouts JSONL as `gym eval run` wrote it; repeat it for a run written as several
    /// files, which are read as one.
    #[arg(long, value_name = "ROLLOUTS.jsonl", required_unless_present = "sweep", conflicts_with = "sweep")]
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL: the lines that are written.
    #[arg(long, value_name = "MATERIALIZED.jsonl", required_unless_present = "sweep", conflicts_with = "sweep")]
    pub inputs: Option<PathBuf>,
    /// A lake of sweeps: its `tasks` table is `lake_tasks` in --where and --weight (with
    /// `sweep`, `sweep_order`, the labels and `sweeps_back`).
    #[arg(long, value_name = "DIR")]
    pub lake: Option<PathBuf>,
    /// Select from this sweep of the --lake: its rollouts and inputs are the files its
    /// `sweeps` row names, refused when one is missing or changed.
    #[arg(long, value_name = "ID", requires = "lake")]
    pub sweep: Option<String>,
    /// Label for rollouts that name no agent.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// The run (the `tasks` table's `agent`) whose rows the predicate, band and sample
    /// look at; required when the rollouts hold several runs (a fan-out file).
    #[arg(long, value_name = "NAME")]
    pub run: Option<String>,
    /// SQL predicate over the `tasks` table and the dataset's own fields:
    /// `"subset = 'hard' AND \"mean/reward\" < 0.5"`.
    #[arg(long = "where", value_name = "SQL")]
    pub predicate: Option<String>,
    /// Keep tasks whose `mean/reward` is inside LO..HI (both ends included).
    #[arg(long, value_name = "LO..HI", value_parser = parse_band)]
    pub band: Option<(f64, f64)>,
    /// Drop tasks whose measured repeats all scored the same (one measured repeat included).
    #[arg(long)]
    pub drop_zero_variance: bool,
    /// A quota per value of this column (with --max): `subset`, a domain field.
    #[arg(long, value_name = "FIELD", requires = "max")]
    pub per: Option<String>,
    /// At most N tasks per --per value.
    #[arg(long, value_name = "N", requires = "per")]
    pub max: Option<usize>,
    /// Draw N tasks, or a fraction FRAC (0 < FRAC <= 1) of them, without replacement.
    #[arg(long, value_name = "N|FRAC", value_parser = Sample::parse)]
    pub sample: Option<Sample>,
    /// SQL expression over the `tasks` table: each task's sampling weight (null or 0:
    /// never drawn), e.g. `"mean/reward" * (1 - "mean/reward")`.
    #[arg(long, value_name = "EXPR")]
    pub weight: Option<String>,
    /// Seed of the sampling (default 0): the same files and flags select the same tasks.
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Drop the `_ng_*` keys from the written lines (everything else as written).
    #[arg(long)]
    pub strip_ng: bool,
    /// What is written: the input lines (jsonl) or the selected `tasks` rows (parquet).
    #[arg(long, value_enum, default_value_t = SelectFormat::Jsonl, value_name = "FORMAT")]
    pub format: SelectFormat,
    /// Output file (.gz or .zst compresses the lines); FILE.manifest.json goes beside it.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// `LO..HI` with LO <= HI.
fn parse_band(s: &str) -> std::result::Result<(f64, f64), String> {
    let bad = || format!("{s:?}: expected LO..HI, two numbers with LO <= HI (0.1..0.9)");
    let (lo, hi) = s.split_once("..").ok_or_else(bad)?;
    let (lo, hi): (f64, f64) = (lo.trim().parse().map_err(|_| bad())?, hi.trim().parse().map_err(|_| bad())?);
    if lo.is_nan() || hi.is_nan() || lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

pub fn run(a: Args) -> Result<()> {
    if a.sample == Some(Sample::Count(0)) {
        return Err(Error::Usage("--sample 0 selects nothing; give at least 1".into()));
    }
    let c = SelectConfig {
        rollouts: a.rollouts,
        inputs: a.inputs.unwrap_or_default(),
        lake: a.lake,
        sweep: a.sweep,
        agent: a.agent,
        run: a.run,
        predicate: a.predicate,
        band: a.band,
        drop_zero_variance: a.drop_zero_variance,
        per: a.per,
        max: a.max,
        sample: a.sample,
        weight: a.weight,
        seed: a.seed,
        strip_ng: a.strip_ng,
        format: a.format,
        out: a.out,
    };
    let r = crate::workflow::select(&c)?;
    common::print_warnings(&r.warnings.across_runs());
    if r.selected == 0 {
        eprintln!(
            "warning: no task was selected ({} of {} tasks passed the filters); wrote an empty {}",
            r.candidates,
            r.tasks,
            c.out.display()
        );
    }
    if !common::quiet() {
        say!("Selected {} of {} tasks of run {} ({} passed the filters)", r.selected, r.tasks, r.run, r.candidates);
    }
    for f in r.files {
        say!("Wrote {}", f.display());
    }
    Ok(())
}
