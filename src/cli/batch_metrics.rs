//! `rollstat batch-metrics`: the custom metrics VAGEN logs to W&B for one VAGEN / verl
//! training batch — rows with a group id (`group_idx`, falling back to `uid`) and
//! `token_level_scores` (summed per sample) or a plain `reward` — printed as the flat
//! `{prefix}/{name}` JSON object VAGEN logs, with the batch's sample and group counts
//! on stderr.

use std::path::{Path, PathBuf};

use clap::Args as ClapArgs;

use crate::error::{Error, Result};
use crate::ingest::batch::read_batch;
use crate::json::Json;
use crate::metrics::batch;
use crate::workflow::batch_metrics::{batch_metrics, BatchMetricsConfig};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// Batch file: JSONL, or Parquet (a name ending in .parquet).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Metric to compute: reward_variance, mean_reward, pass_at_k, or a SQL metric from
    /// queries/metrics/ or --metric-dir (repeatable; default: the three built-ins).
    #[arg(long = "metric", value_name = "NAME")]
    pub metric: Vec<String>,
    /// Folder of extra SQL metrics (NAME.sql each), run over the batch as the
    /// `rollouts` table.
    #[arg(long, value_name = "DIR")]
    pub metric_dir: Option<PathBuf>,
    /// Group id field; a row without it is grouped by its `uid`. Samples are grouped by
    /// the id as Python's str() prints it, as VAGEN does: 1 and "1" are one group, 1,
    /// 1.0 and true are three.
    #[arg(long, default_value = "group_idx")]
    pub group_key: String,
    /// Prefix of the logged names.
    #[arg(long, default_value = "custom_metrics/train")]
    pub prefix: String,
    /// Delta degrees of freedom of reward_variance (numpy's np.var ddof).
    #[arg(long, default_value_t = 0)]
    pub ddof: usize,
}

pub fn run(a: Args) -> Result<()> {
    let c = BatchMetricsConfig { metrics: a.metric, metric_dir: a.metric_dir, prefix: a.prefix, ddof: a.ddof };
    c.validate()?;
    let samples = read_batch(&a.file, &a.group_key)?;
    let g = batch::group(&samples);
    let (vals, warnings) = batch_metrics(&g, &c)?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    if !super::common::quiet() {
        eprintln!("Read {} samples in {} groups from {}", g.rewards.len(), g.keys.len(), a.file.display());
    }
    let obj = Json::Obj(vals.into_iter().map(|(k, v)| (std::sync::Arc::from(k.as_str()), v)).collect());
    let mut out = Vec::new();
    crate::json::write_indented(&mut out, &obj, 0);
    out.push(b'\n');
    std::io::Write::write_all(&mut std::io::stdout().lock(), &out)
        .map_err(|e| Error::write(Path::new("<stdout>"), e))?;
    Ok(())
}
