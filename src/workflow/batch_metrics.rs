//! The batch-metrics workflow: the custom metrics VAGEN logs to W&B for one training
//! batch, as the flat `{prefix}/{name}` values in the order asked for.

use std::path::{Path, PathBuf};

use crate::error::{Error, Msg, Opt, Result};
use crate::json::Json;
use crate::metrics::batch::{self, Grouped, BUILTINS};

/// Flat `{prefix}/{name}` metrics, in output order.
pub type Flat = Vec<(String, Json)>;

/// Which metrics to compute over a batch, and how they are named.
#[derive(Debug, Clone)]
pub struct BatchMetricsConfig {
    /// `reward_variance`, `mean_reward`, `pass_at_k` or SQL metrics by name (empty: the
    /// three built-ins).
    pub metrics: Vec<String>,
    /// Folder of extra SQL metrics (`NAME.sql` each), run over the batch as the
    /// `rollouts` table.
    pub metric_dir: Option<PathBuf>,
    /// Prefix of the logged names.
    pub prefix: String,
    /// Delta degrees of freedom of `reward_variance` (numpy's `np.var` ddof).
    pub ddof: usize,
}

impl BatchMetricsConfig {
    /// Refuses a metric folder that is not one, before any batch is read.
    pub fn validate(&self) -> Result<()> {
        if let Some(d) = &self.metric_dir {
            if !d.is_dir() {
                let msg = Msg::default().opt(Opt::text("metric_dir", d.display().to_string()));
                return Err(Error::refused(None, msg.text(": not a folder")));
            }
        }
        Ok(())
    }
}

/// The flat `{prefix}/{name}` metrics of a grouped batch, and the warnings.
pub fn batch_metrics(g: &Grouped, c: &BatchMetricsConfig) -> Result<(Flat, Vec<String>)> {
    compute(g, &c.metrics, c.metric_dir.as_deref(), &c.prefix, c.ddof)
}

/// [`batch_metrics`] with the configuration's parts given one by one.
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
                    return Err(crate::metrics::custom::no_such_metric(other, &known));
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
