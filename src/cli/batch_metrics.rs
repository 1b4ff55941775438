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
use crate::metrics::batch::{self, Grouped, BUILTINS};

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

/// Flat `{prefix}/{name}` metrics, in output order.
pub type Flat = Vec<(String, Json)>;

/// The flat `{prefix}/{name}` metrics of a grouped batch, and the warnings to print.
pub fn compute(
    g: &Grouped,
    metrics: &[String],
    metric_dir: Option<&Path>,
    prefix: &str,
    ddof: usize,
) -> Result<(Flat, Vec<String>)> {
    let names: Vec<String> =
        if metrics.is_empty() { BUILTINS.iter().map(|s| s.to_string()).collect() } else { metrics.to_vec() };
    let sql = crate::query::metric_files(metric_dir)?;
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    for m in &names {
        if BUILTINS.contains(&m.as_str()) {
            if let Some(file) = metric_dir.map(|d| d.join(format!("{m}.sql"))).filter(|f| f.exists()) {
                warnings.push(format!(
                    "{}: `{m}` is a built-in metric, which --metric {m} runs; rename the file to run it",
                    file.display()
                ));
            }
        }
        match m.as_str() {
            "reward_variance" => {
                let (v, w) = batch::reward_variance(g, ddof);
                warnings.extend(w);
                out.push((format!("{prefix}/reward_variance"), Json::Float(v)));
            }
            "mean_reward" => {
                if g.rewards.is_empty() {
                    warnings
                        .push("mean_reward: the batch has no samples; numpy's mean is NaN (written as null)".into());
                }
                out.push((format!("{prefix}/mean_reward"), Json::Float(g.mean_reward)));
            }
            "pass_at_k" => out.extend(batch::pass_at_k(g).into_iter().map(|(k, v)| (format!("{prefix}/{k}"), v))),
            other => {
                let Some((_, text)) = sql.iter().find(|(n, _)| n == other) else {
                    let known: Vec<&str> =
                        BUILTINS.iter().copied().chain(sql.iter().map(|(n, _)| n.as_str())).collect();
                    return Err(Error::Usage(format!("--metric {other}: no such metric; known: {}", known.join(", "))));
                };
                let frame = batch::batch_frame(g)?;
                for (_, vals) in crate::query::run_metric(&frame, other, text)? {
                    out.extend(vals.into_iter().map(|(k, v)| (format!("{prefix}/{k}"), v)));
                }
            }
        }
    }
    Ok((out, warnings))
}

pub fn run(a: Args) -> Result<()> {
    if let Some(d) = &a.metric_dir {
        if !d.is_dir() {
            return Err(Error::Usage(format!("--metric-dir {}: not a folder", d.display())));
        }
    }
    let samples = read_batch(&a.file, &a.group_key)?;
    let g = batch::group(&samples);
    let (vals, warnings) = compute(&g, &a.metric, a.metric_dir.as_deref(), &a.prefix, a.ddof)?;
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
