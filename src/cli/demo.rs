//! `rollstat demo`: generates a small sweep into `./rollstat-demo/` and runs the main
//! job on it — ingest to Parquet, profile, aggregate with pass@k, compare the agents,
//! write the HTML report —
//! printing where every file went, each agent's key metrics and the comparison.

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{print_warnings, MetricArgs};
use crate::error::Result;
use crate::generate::{GenerateOptions, RewardKind};
use crate::workflow::{
    self, AggregateConfig, CompareConfig, ExportConfig, IngestConfig, Metrics, ProfileConfig, ReportConfig,
};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Folder for the demo sweep and its outputs.
    #[arg(long, value_name = "DIR", default_value = "rollstat-demo")]
    pub dir: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let gen = GenerateOptions {
        tasks: 100,
        repeats: 4,
        agents: 3,
        seed: 7,
        task_seed: None,
        missing_frac: 0.0,
        failure_frac: 0.0,
        masked_frac: 0.02,
        reward: RewardKind::Mixed,
        fan_out: true,
        env_server_stamp: false,
        ng_perf_frac: 0.5,
        text_bytes: 1000,
        threads: rayon::current_num_threads(),
    };
    let g = crate::generate::generate_sweep(&gen, &a.dir)?;
    say!(
        "Generated sweep: {} ({} rollouts), {} ({} input rows)",
        g.rollouts_path.display(),
        g.rollouts,
        g.inputs_path.display(),
        g.expected
    );
    let ing = IngestConfig {
        rollouts: vec![g.rollouts_path.clone()],
        inputs: Some(g.inputs_path.clone()),
        agent: None,
        out: a.dir.join("rollouts.parquet"),
    };
    let r = workflow::ingest(&ing)?;
    say!(
        "Rollouts table: {} ({} rows, {} agents, {} tasks, {} fields)",
        ing.out.display(),
        r.rows,
        r.agents.len(),
        r.tasks,
        r.fields.len()
    );
    let prof = ProfileConfig {
        inputs: g.inputs_path.clone(),
        rollouts: vec![g.rollouts_path.clone()],
        allow_partial: false,
        out_dir: None,
        metrics: Metrics::default(),
        lake: None,
    };
    let p = workflow::profile(&prof)?;
    let warnings = print_warnings(&p.warnings);
    say!("");
    super::profile::print_summary(&p, warnings);
    let metrics = MetricArgs {
        metric: vec!["pass_at_k".into(), "reward_variance".into(), "frac_reward_zero_std".into()],
        answer_key: Some("extracted_answer".into()),
        ..MetricArgs::default()
    };
    let agg = AggregateConfig {
        rollouts: vec![g.rollouts_path.clone()],
        inputs: Some(g.inputs_path.clone()),
        out: None,
        agent: None,
        metrics: metrics.resolve()?,
        key_metrics: vec!["mean/reward".into(), "pass@{k}".into(), "pass@1[avg-of-{k}]".into(), "coverage/*".into()],
        run: Default::default(),
    };
    let ar = workflow::aggregate(&agg)?;
    let mut warned = warnings + print_warnings(&ar.warnings);
    say!("");
    super::aggregate::print_key_metrics(&ar.key_metrics);
    if let Some(f) = &ar.file {
        say!("Aggregate metrics: {}", f.display());
    }
    let cmp = CompareConfig {
        rollouts: vec![g.rollouts_path.clone()],
        inputs: vec![g.inputs_path.clone()],
        agent: None,
        metric: "reward".into(),
        pass_at: None,
        baseline: None,
        cluster_key: None,
        by: None,
        mde: false,
        detect: None,
        flips: None,
        pairing: Default::default(),
    };
    let (_, report) = workflow::compare(&cmp)?;
    warned += print_warnings(&report.warnings);
    say!("");
    say!("{}", crate::export::compare::text(&cmp.view(crate::export::table::READ_DIGITS), &report).trim_end());
    let rep = ReportConfig {
        rollouts: vec![g.rollouts_path.clone()],
        inputs: vec![g.inputs_path.clone()],
        agent: None,
        metric: "reward".into(),
        baseline: None,
        cluster_key: None,
        out: Some(a.dir.join("report.html")),
        made_at: super::common::made_at()?,
        pairing: Default::default(),
    };
    // Its warnings are those of aggregate and compare, printed above.
    let page = workflow::report(&rep)?;
    say!("");
    say!("Report: {}", page.file.display());
    let ex = ExportConfig {
        rollouts: vec![g.rollouts_path.clone()],
        inputs: Some(g.inputs_path.clone()),
        agent: None,
        out_dir: a.dir.join("tables"),
    };
    let (files, warnings) = workflow::export(&ex)?;
    warned += print_warnings(&warnings);
    say!("");
    for f in files {
        say!("Parquet table: {}", f.display());
    }
    if warned > 0 {
        say!(
            "\nThe {warned} warnings on stderr are this synthetic sweep's by design: it masks 2% of the rollouts and \
             leaves some rewards null, so some repeats miss tasks, and some fields are the same in every repeat."
        );
    }
    say!("\nTry: {} query leaderboard --parquet-dir {}", invocation(), ex.out_dir.display());
    say!("Read the rollouts behind the numbers: {} view {}", invocation(), g.rollouts_path.display());
    Ok(())
}

/// How to run this binary again from the same shell: `rollstat` when that name on PATH is
/// this very file, else this file's path (as after `cargo run`, before `cargo install`).
fn invocation() -> String {
    let Ok(me) = std::env::current_exe().and_then(std::fs::canonicalize) else { return "rollstat".into() };
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths)
            .find_map(|dir| {
                let candidate = dir.join("rollstat");
                candidate.is_file().then_some(candidate)
            })
            .and_then(|first| std::fs::canonicalize(first).ok())
            .is_some_and(|first| first == me)
    });
    if on_path {
        return "rollstat".into();
    }
    // Under the working folder (`cargo run` from the checkout), the shorter relative path.
    let shown = std::env::current_dir()
        .ok()
        .and_then(|cwd| me.strip_prefix(cwd).ok().map(|rel| rel.display().to_string()))
        .filter(|rel| rel.contains('/'))
        .unwrap_or_else(|| me.display().to_string());
    if shown.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b)) {
        shown
    } else {
        format!("'{}'", shown.replace('\'', "'\\''"))
    }
}
