//! Typed errors. Every error a user can cause names the file, the line and the key
//! involved and says what was expected; the CLI maps [`Error::is_bad_input`] to exit
//! status 2 and everything else (our own failures) to 1.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in a user's input a problem sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: PathBuf,
    /// 1-based line number, when the problem belongs to one line.
    pub line: Option<u64>,
    /// 1-based row number of a table (Parquet input), when the problem belongs to one row.
    pub row: Option<u64>,
    /// The JSON key involved, when there is one.
    pub key: Option<String>,
}

impl Location {
    pub fn file(file: &Path) -> Self {
        Location { file: file.to_path_buf(), line: None, row: None, key: None }
    }
    pub fn line(file: &Path, line: u64) -> Self {
        Location { file: file.to_path_buf(), line: Some(line), row: None, key: None }
    }
    pub fn row(mut self, row: u64) -> Self {
        self.row = Some(row);
        self
    }
    pub fn key(mut self, key: &str) -> Self {
        self.key = Some(key.to_string());
        self
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
        }
        if let Some(row) = self.row {
            write!(f, ", row {row}")?;
        }
        if let Some(key) = &self.key {
            write!(f, ", key `{key}`")?;
        }
        Ok(())
    }
}

/// All errors of the library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Malformed or inconsistent input: exit status 2.
    #[error("{loc}: {msg}")]
    BadInput { loc: Location, msg: String },
    /// Inputs that are individually well formed but do not fit together (alignment,
    /// duplicate keys, rows naming no agent): exit status 2.
    #[error("{0}")]
    Mismatch(String),
    /// A command-line value that cannot be used: exit status 2.
    #[error("{0}")]
    Usage(String),
    /// A file we could not read (missing input: exit 2) or write (exit 1).
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error, input: bool },
    /// Polars failed (export, query).
    #[error("{0}")]
    Polars(String),
    /// A SQL query the user gave us failed to plan or run: exit 2.
    #[error("query failed: {0}")]
    Query(String),
    /// The caller cancelled the run (Ctrl-C in Python); nothing was written.
    #[error("interrupted; nothing was written")]
    Interrupted,
}

impl Error {
    pub fn bad(loc: Location, msg: impl Into<String>) -> Self {
        Error::BadInput { loc, msg: msg.into() }
    }
    pub fn read(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), source, input: true }
    }
    pub fn write(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), source, input: false }
    }
    /// True when the user's input or flags are at fault (exit status 2).
    pub fn is_bad_input(&self) -> bool {
        match self {
            Error::BadInput { .. } | Error::Mismatch(_) | Error::Usage(_) | Error::Query(_) => true,
            Error::Io { input, .. } => *input,
            Error::Polars(_) | Error::Interrupted => false,
        }
    }
}

#[cfg(feature = "engine")]
impl From<polars::prelude::PolarsError> for Error {
    fn from(e: polars::prelude::PolarsError) -> Self {
        Error::Polars(e.to_string())
    }
}

pub type Result<T> = std::result::Result<T, Error>;
