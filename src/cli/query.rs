//! `rollstat query`: Polars SQL over the `rollouts`, `tasks`, `agents` and `repeats`
//! tables, built from JSONL files or read from a folder of exported Parquet tables.
//! The query is SQL text, a `.sql` file, or the name of a bundled report
//! (`leaderboard`, `hardest_tasks`, `token_cost`, `task_slices`).

use std::path::PathBuf;

use clap::{Args as ClapArgs, ValueEnum};
use polars::prelude::*;

use crate::error::{Error, Result};
use crate::export::atomic::OutputSet;
use crate::export::table::{to_csv, to_json, to_markdown};
use crate::workflow::QueryConfig;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Csv,
    Json,
    Parquet,
    /// A GitHub-flavoured Markdown table (for pull requests, issues, notebooks).
    Markdown,
}

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// SQL text, a .sql file, or a bundled report name.
    #[arg(value_name = "SQL_OR_FILE")]
    pub query: String,
    /// Rollouts JSONL to build the tables from (repeat it for a run written as several
    /// files).
    #[arg(long, value_name = "ROLLOUTS.jsonl", conflicts_with_all = ["parquet_dir", "lake"])]
    pub rollouts: Vec<PathBuf>,
    /// Materialized inputs JSONL (for run labels).
    #[arg(long, value_name = "MATERIALIZED.jsonl")]
    pub inputs: Option<PathBuf>,
    /// Label for rollouts that name no agent.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Folder with rollouts/tasks/agents/repeats.parquet from `rollstat export`.
    #[arg(long, value_name = "DIR", conflicts_with = "lake")]
    pub parquet_dir: Option<PathBuf>,
    /// A lake of sweeps (`rollstat export --lake DIR`): the tables hold every sweep, with
    /// `sweep`, `sweep_order` and the sweeps' labels as columns, beside a `sweeps` table.
    #[arg(long, value_name = "DIR")]
    pub lake: Option<PathBuf>,
    #[command(flatten)]
    pub output: TableOut,
}

/// `--format` and `--out` of the commands whose result is a table (`query`, `compare`).
#[derive(ClapArgs, Debug, Clone)]
pub struct TableOut {
    /// Output format: table is for reading (`compare`: its report); the others hold every
    /// row.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Output file (default: stdout; required for parquet).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Significant digits of the numbers in `table` and `markdown` (csv, json and parquet
    /// keep every digit).
    #[arg(long, value_name = "DIGITS", default_value_t = crate::export::table::READ_DIGITS as u8,
          value_parser = clap::value_parser!(u8).range(1..=17))]
    pub precision: u8,
}

impl TableOut {
    /// Refuses an output that is one of `out`'s inputs, or that cannot be written, before
    /// any work; sends the closing report to stderr when the output is stdout.
    pub fn check(&self, out: &OutputSet) -> Result<()> {
        if let Some(path) = &self.out {
            out.check(path)?;
            super::common::outputs_to_stdout(&[path]);
        }
        if self.format == Format::Parquet && self.out.is_none() {
            return Err(Error::Usage("--format parquet needs --out FILE".into()));
        }
        Ok(())
    }

    /// Writes `df` in the chosen format to `--out` (atomically) or stdout; `table` renders
    /// the readable form. `rows` names what a row is, for the closing report.
    pub fn write(
        &self,
        mut out: OutputSet,
        mut df: DataFrame,
        table: impl FnOnce(&DataFrame) -> Vec<u8>,
        rows: &str,
    ) -> Result<()> {
        let bytes = match self.format {
            Format::Table => table(&df),
            Format::Csv => to_csv(&df),
            Format::Json => to_json(&df),
            Format::Markdown => to_markdown(&df, self.precision.into()),
            Format::Parquet => {
                let Some(path) = &self.out else {
                    return Err(Error::Usage("--format parquet needs --out FILE".into()));
                };
                let mut w = out.create(path)?;
                crate::export::parquet::write_parquet(&mut df, path, &mut w)?;
                out.commit()?;
                say!("Wrote {} ({} {rows})", path.display(), df.height());
                return Ok(());
            }
        };
        match &self.out {
            Some(path) => {
                out.add(path, &bytes)?;
                out.commit()?;
                say!("Wrote {} ({} {rows})", path.display(), df.height());
            }
            None => {
                use std::io::Write;
                std::io::stdout().write_all(&bytes).map_err(|e| Error::write(std::path::Path::new("<stdout>"), e))?;
            }
        }
        Ok(())
    }
}

impl Args {
    /// The query's configuration.
    pub fn config(&self) -> QueryConfig {
        QueryConfig {
            query: self.query.clone(),
            rollouts: self.rollouts.clone(),
            inputs: self.inputs.clone(),
            agent: self.agent.clone(),
            parquet_dir: self.parquet_dir.clone(),
            lake: self.lake.clone(),
        }
    }
}

/// Sets how Polars prints the table: on a terminal, the first and last rows and columns,
/// text cut to 40 characters; in a file, everything. Polars reads these settings from the
/// environment, which may only change while the process has one thread: the command line
/// calls this before any worker starts.
pub fn set_table_layout(a: &Args) {
    let file = a.output.out.is_some();
    let layout = [
        ("POLARS_FMT_MAX_ROWS", if file { "-1" } else { "50" }),
        ("POLARS_FMT_MAX_COLS", if file { "-1" } else { "12" }),
        ("POLARS_FMT_STR_LEN", if file { "1000000" } else { "40" }),
    ];
    for (k, v) in layout {
        std::env::set_var(k, v);
    }
    if file {
        std::env::set_var("POLARS_TABLE_WIDTH", "-1");
    }
}

pub fn run(a: Args) -> Result<()> {
    let c = a.config();
    let read = c.files_read();
    let ins: Vec<&std::path::Path> = read.iter().map(PathBuf::as_path).collect();
    let out = OutputSet::new(&ins);
    // Refused before the query runs, not after.
    a.output.check(&out)?;
    let (df, warnings) = crate::workflow::query(&c)?;
    super::common::print_warnings(&warnings);
    let digits = a.output.precision.into();
    a.output.write(out, df, |df| format!("{}\n", crate::export::table::rounded(df, digits)).into_bytes(), "rows")
}
