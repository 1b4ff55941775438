//! `rollstat shard`: one rollouts file into slices by bucket of tasks, for `join`
//! and `merge` on other machines (see docs/distributed.md).

use std::path::PathBuf;

use clap::Args as ClapArgs;

use super::common::{self, RolloutsFile};
use crate::error::Result;
use crate::workflow::merge::ShardConfig;

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub rollouts: RolloutsFile,
    /// The file is the sweep's materialized inputs, not rollouts: its rows go to input
    /// slices (`i<bucket>.slice`), which `merge` takes instead of --inputs.
    #[arg(long)]
    pub inputs: bool,
    /// Folder for the slices (`b<bucket>.slice`) and `manifest.json`; created if missing.
    #[arg(long, value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Tasks per bucket: task k goes to bucket ⌊k / W⌋ (use the same W for every file of a sweep).
    #[arg(long, value_name = "W")]
    pub task_width: i64,
    /// Only the lines that start in bytes START..END of the file (END excluded; `START:`
    /// for the rest). Ranges that tile a file shard every line once, so one large file
    /// can be sharded by several tasks.
    #[arg(long, value_name = "START:END", value_parser = parse_range)]
    pub range: Option<(u64, u64)>,
}

fn parse_range(s: &str) -> std::result::Result<(u64, u64), String> {
    let bad = || format!("{s:?}: expected START:END in bytes, e.g. 0:1000000 or 1000000:");
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    let start = a.trim().parse::<u64>().map_err(|_| bad())?;
    let end = if b.trim().is_empty() { u64::MAX } else { b.trim().parse::<u64>().map_err(|_| bad())? };
    if end < start {
        return Err(format!("{s:?}: the range ends before it starts"));
    }
    Ok((start, end))
}

pub fn run(a: Args) -> Result<()> {
    let [rollouts] = a.rollouts.paths().try_into().map_err(|_| {
        crate::error::Error::Usage(
            "shard reads one rollouts file: run it once per file, with the same --task-width".into(),
        )
    })?;
    let c = ShardConfig { rollouts, out_dir: a.out_dir, task_width: a.task_width, range: a.range, inputs: a.inputs };
    let r = crate::workflow::merge::shard(&c)?;
    if !common::quiet() {
        let rows: usize = r.buckets.iter().map(|b| b.1).sum();
        let what = if c.inputs { "input rows" } else { "rollouts" };
        say!("Sharded {} {what} into {} buckets", rows, r.buckets.len());
    }
    say!("Wrote {}", c.out_dir.display());
    Ok(())
}
