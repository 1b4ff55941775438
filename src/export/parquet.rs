//! Parquet tables (zstd) through Polars' own writer, for DuckDB, Spark, pandas and BI
//! tools.

use std::fs::File;
use std::path::Path;

use super::direct::FileWriter;

use polars::prelude::*;

use crate::error::{Error, Result};

/// Writes `df` to `w` (from [`super::atomic::OutputSet::create`]) and finishes it;
/// errors name `path`.
pub fn write_parquet(df: &mut DataFrame, path: &Path, w: &mut FileWriter) -> Result<()> {
    ParquetWriter::new(&mut *w).with_compression(ParquetCompression::Zstd(None)).finish(df)?;
    w.finish().map_err(|e| Error::write(path, e))
}

/// Reads a Parquet file into a frame; a file that is not Parquet is the user's input
/// at fault (exit status 2), named in the error.
pub fn read_parquet(path: &Path) -> Result<DataFrame> {
    let f = File::open(path).map_err(|e| Error::read(path, e))?;
    ParquetReader::new(f)
        .finish()
        .map_err(|e| Error::bad(crate::error::Location::file(path), format!("not a readable Parquet file: {e}")))
}
