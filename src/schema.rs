//! The schema of rollstat's result tables, in one place: the name, order and type of
//! every fixed column of the `rollouts`, `tasks`, `agents` and `repeats` tables, the
//! statistics each level computes per numeric field (and in which order they appear),
//! and the key each one renders as in NeMo Gym's JSON files. Statistic columns are
//! named `<stat>/<field>` in the tables exactly as the keys of the JSON files, so a
//! table row and a JSON entry hold the same names and numbers.
//!
//! A leaf module: it depends on nothing else in the crate, so ingest, metrics, export
//! and query all read their names from here.

use polars::prelude::DataType;

/// A column that a table always has, also with no rows (then all null).
#[derive(Debug, Clone, Copy)]
pub struct Fixed {
    pub name: &'static str,
    pub dtype: Kind,
    /// Where the value sits in NeMo Gym's files.
    pub nemo_gym: &'static str,
}

/// A column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Text,
    Bool,
}

impl Kind {
    pub fn dtype(self) -> DataType {
        match self {
            Kind::Int => DataType::Int64,
            Kind::Float => DataType::Float64,
            Kind::Text => DataType::String,
            Kind::Bool => DataType::Boolean,
        }
    }
}

const fn col(name: &'static str, dtype: Kind, nemo_gym: &'static str) -> Fixed {
    Fixed { name, dtype, nemo_gym }
}

/// The run label column of every table (`agent_ref.name` of an entry, or its
/// `_ng_environment_server` when a server stamp names the run).
pub const AGENT: &str = "agent";
pub const TASK_INDEX: &str = "_ng_task_index";
pub const ROLLOUT_INDEX: &str = "_ng_rollout_index";
pub const TASK_FINGERPRINT: &str = "task_fingerprint";
pub const FAILURES: &str = "failures";

/// The leading columns of the `rollouts` table (one row per rollout), before the numeric
/// fields (Int64 when every present value is an int or bool, else Float64) and the short
/// text fields.
pub const ROLLOUTS: [Fixed; 5] = [
    col(TASK_INDEX, Kind::Int, "_ng_task_index of the rollout line"),
    col(ROLLOUT_INDEX, Kind::Int, "_ng_rollout_index of the rollout line"),
    col("run_key", Kind::Text, "_ng_environment_server, else agent_ref.name, of the input row (else of the rollout)"),
    col(AGENT, Kind::Text, "the run label"),
    col("mask_sample", Kind::Bool, "Python truthiness of mask_sample"),
];

/// Columns the `tasks` table (one row per agent and task) always has; with every
/// `<stat>/<field>` of [`DESCRIBE`] beside them.
pub const TASKS: [Fixed; 8] = [
    col(AGENT, Kind::Text, "the entry's run label"),
    col(TASK_INDEX, Kind::Int, "group_level_metrics[]._ng_task_index"),
    col("mean/reward", Kind::Float, "group_level_metrics[].mean/reward"),
    col("num_rollouts", Kind::Int, "group_level_metrics[].num_rollouts"),
    col("expected_num_rollouts", Kind::Int, "group_level_metrics[].expected_num_rollouts"),
    col("missing_num_rollouts", Kind::Int, "group_level_metrics[].missing_num_rollouts"),
    col(TASK_FINGERPRINT, Kind::Text, "what the task asks: a hash of its user messages, 16 hex digits"),
    col(FAILURES, Kind::Int, "failed attempts of the task in S_failures.jsonl that no result replaced"),
];

/// Columns the `agents` table (one row per agent: every numeric key of
/// `agent_metrics`) always has.
pub const AGENTS: [Fixed; 7] = [
    col(AGENT, Kind::Text, "the entry's run label"),
    col("mean/reward", Kind::Float, "agent_metrics.mean/reward"),
    col("mean_across_repeats/mean/reward", Kind::Float, "agent_metrics.mean_across_repeats/mean/reward"),
    col("ci_low_95_across_repeats/mean/reward", Kind::Float, "agent_metrics.ci_low_95_across_repeats/mean/reward"),
    col("ci_high_95_across_repeats/mean/reward", Kind::Float, "agent_metrics.ci_high_95_across_repeats/mean/reward"),
    col("num_repeats", Kind::Int, "agent_metrics.num_repeats"),
    col(FAILURES, Kind::Int, "failed attempts of the run in S_failures.jsonl that no result replaced"),
];

/// Columns the `repeats` table (one row per agent and rollout index) always has; with
/// every `<stat>/<field>` of [`REPEAT`] beside them.
pub const REPEATS: [Fixed; 4] = [
    col(AGENT, Kind::Text, "the entry's run label"),
    col(ROLLOUT_INDEX, Kind::Int, "repeat_level_metrics[]._ng_rollout_index"),
    col("sample_count", Kind::Int, "repeat_level_metrics[].sample_count"),
    col("missing_count", Kind::Int, "repeat_level_metrics[].missing_count"),
];

/// The task and agent levels' statistics per numeric field (pandas' `describe`), in the
/// order their keys are written: all `mean/…` keys first, then `max/…`, and so on.
pub const DESCRIBE: [&str; 5] = ["mean", "max", "min", "median", "std"];

/// The repeat level's statistics per field, in the order they are written, field by
/// field (fields in alphabetical order); the last two only where an interval exists.
pub const REPEAT: [&str; 10] = ["mean", "median", "std", "sem", "min", "max", "p25", "p75", "ci_low_95", "ci_high_95"];

/// The across-repeat statistics of each repeat-level metric, in the order they are
/// written, as `<stat>_across_repeats/<metric>`; the last two only where an interval exists.
pub const ACROSS_REPEATS: [&str; 8] = ["mean", "median", "std", "min", "max", "se", "ci_low_95", "ci_high_95"];

/// The coverage keys of an agent (written when some rollout was masked).
pub const COVERAGE: [&str; 4] = [
    "coverage/measured_rollouts",
    "coverage/masked_rollouts",
    "coverage/measured_tasks",
    "coverage/fully_masked_tasks",
];

/// `<stat>/<field>`: a statistic's column and key.
pub fn stat_key(stat: &str, field: &str) -> String {
    format!("{stat}/{field}")
}

/// `<stat>_across_repeats/<metric>`: an across-repeat statistic's column and key.
pub fn across_key(stat: &str, metric: &str) -> String {
    format!("{stat}_across_repeats/{metric}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every table starts with the run label, and names each fixed column once.
    #[test]
    fn tables_lead_with_the_label_and_name_columns_once() {
        for t in [&TASKS[..], &AGENTS[..], &REPEATS[..]] {
            assert_eq!(t[0].name, AGENT);
            let mut names: Vec<&str> = t.iter().map(|c| c.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), t.len());
        }
        assert_eq!(ROLLOUTS[3].name, AGENT);
    }

    #[test]
    fn keys_are_built_as_nemo_gym_writes_them() {
        assert_eq!(stat_key(DESCRIBE[0], "reward"), "mean/reward");
        assert_eq!(across_key(ACROSS_REPEATS[5], "mean/reward"), "se_across_repeats/mean/reward");
    }
}
