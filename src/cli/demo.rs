//! `rollstat demo`: generates a small sweep into `./rollstat-demo/` and runs the main
//! job on it — ingest to Parquet, profile, aggregate with pass@k, compare the agents —
//! printing where every file went, each agent's key metrics and the comparison.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::MetricArgs;
use crate::error::Result;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Folder for the demo sweep and its outputs.
    #[arg(long, value_name = "DIR", default_value = "rollstat-demo")]
    pub dir: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let gen = super::generate::Args {
        tasks: 100,
        repeats: 4,
        agents: 3,
        seed: 7,
        out_dir: a.dir.clone(),
        missing_frac: 0.0,
        masked_frac: 0.02,
        reward: super::generate::Reward::Mixed,
        fan_out: true,
        env_server_stamp: false,
        ng_perf_frac: 0.5,
        text_bytes: 1000,
    };
    let g = super::generate::execute(&gen)?;
    say!(
        "Generated sweep: {} ({} rollouts), {} ({} input rows)",
        g.rollouts_path.display(),
        g.rollouts,
        g.inputs_path.display(),
        g.expected
    );
    let ing = super::ingest::Args {
        rollouts: g.rollouts_path.clone(),
        inputs: Some(g.inputs_path.clone()),
        out: a.dir.join("rollouts.parquet"),
    };
    let r = super::ingest::execute(&ing)?;
    say!(
        "Rollouts table: {} ({} rows, {} agents, {} tasks, {} fields)",
        ing.out.display(),
        r.rows,
        r.agents.len(),
        r.tasks,
        r.fields.len()
    );
    let prof = super::profile::Args {
        inputs: g.inputs_path.clone(),
        rollouts: g.rollouts_path.clone(),
        allow_partial: false,
        out_dir: None,
        metrics: MetricArgs::default(),
    };
    let p = super::profile::execute(&prof)?;
    say!("");
    super::profile::print_summary(&p);
    let agg = super::aggregate::Args {
        rollouts: g.rollouts_path.clone(),
        inputs: Some(g.inputs_path.clone()),
        out: None,
        agent: None,
        metrics: MetricArgs {
            metric: vec!["pass_at_k".into(), "reward_variance".into(), "frac_reward_zero_std".into()],
            answer_key: Some("extracted_answer".into()),
            key_metric: vec!["mean/reward".into(), "pass@{k}".into(), "pass@1[avg-of-{k}]".into(), "coverage/*".into()],
            ..MetricArgs::default()
        },
        quiet: false,
    };
    let ar = super::aggregate::execute(&agg)?;
    say!("");
    super::aggregate::print_key_metrics(&ar.key_metrics);
    say!("Aggregate metrics: {}", ar.file.display());
    let cmp = super::compare::Args {
        rollouts: vec![g.rollouts_path.clone()],
        inputs: vec![g.inputs_path.clone()],
        agent: None,
        metric: "reward".into(),
        pass_at: None,
        baseline: None,
        cluster_key: None,
        output: super::query::TableOut { format: super::query::Format::Table, out: None },
    };
    let (_, report) = super::compare::execute(&cmp)?;
    crate::cli::common::print_warnings(&report.warnings);
    say!("");
    say!("{}", super::compare::text(&cmp, &report).trim_end());
    let ex = super::export::Args {
        rollouts: g.rollouts_path.clone(),
        inputs: Some(g.inputs_path.clone()),
        agent: None,
        out_dir: a.dir.join("tables"),
    };
    let files = super::export::execute(&ex)?;
    say!("");
    for f in files {
        say!("Parquet table: {}", f.display());
    }
    say!("\nTry: rollstat query leaderboard --parquet-dir {}", ex.out_dir.display());
    Ok(())
}
