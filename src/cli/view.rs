//! `rollstat view`: a local web viewer over the runs — each run's score, its tasks by
//! how often they were solved, and every rollout's transcript. Prints the URL and serves
//! until interrupted.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::RunsFiles;
use crate::error::Result;
use crate::view::{LakeSweeps, ViewConfig, ViewRuns};

#[derive(ClapArgs, Debug, Clone)]
#[command(group(clap::ArgGroup::new("runs_given").required(true).multiple(true).args(["rollouts", "files", "lake"])))]
pub struct Args {
    #[command(flatten)]
    pub runs: RunsFiles,
    /// Serve sweeps of this lake (each a run named by its sweep id), read from the files
    /// the lake recorded for them, checked by size and checksum first.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["rollouts", "files", "inputs"])]
    pub lake: Option<PathBuf>,
    /// With --lake: a sweep to serve (repeat for several; the first is the baseline).
    /// Default: the lake's last two sweeps, the older the baseline.
    #[arg(long, value_name = "ID", requires = "lake")]
    pub sweep: Vec<String>,
    /// The run flips and comparisons are against (default: the first run).
    #[arg(long, value_name = "RUN")]
    pub baseline: Option<String>,
    /// Pair tasks by `_ng_task_index` even where the runs hold different tasks there,
    /// with a note, instead of refusing.
    #[arg(long)]
    pub allow_task_mismatch: bool,
    /// The address to listen on. Any address but a loopback one needs the token the
    /// printed URL carries.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// The port (0: any free one; default: the first free one from 8765).
    #[arg(long, value_name = "N")]
    pub port: Option<u16>,
    /// Open the page in the default browser.
    #[arg(long)]
    pub open: bool,
    /// Do not run the rollout health check (its verdicts then show nowhere).
    #[arg(long)]
    pub no_health_check: bool,
}

impl Args {
    pub fn config(&self) -> ViewConfig {
        ViewConfig {
            runs: ViewRuns {
                rollouts: self.runs.rollouts(),
                inputs: self.runs.inputs.clone(),
                agent: self.runs.agent.clone(),
                baseline: self.baseline.clone(),
                allow_task_mismatch: self.allow_task_mismatch,
                health_check: !self.no_health_check,
                lake: self.lake.clone().map(|dir| LakeSweeps { dir, sweeps: self.sweep.clone() }),
            },
            host: self.host,
            port: self.port,
        }
    }
}

pub fn run(a: Args) -> Result<()> {
    let c = a.config();
    let running = crate::view::start(&c)?;
    // The URL goes to stdout whatever -q says: it is the command's output.
    println!("{}", running.url);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    if a.open {
        let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
        if std::process::Command::new(opener).arg(&running.url).spawn().is_err() {
            eprintln!("rollstat: warning: could not start {opener}; open {} yourself", running.url);
        }
    }
    running.wait();
    Ok(())
}
