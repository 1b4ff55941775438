//! Parquet tables (zstd) through Polars' own writer, for DuckDB, Spark, pandas and BI
//! tools.

use std::fs::File;
use std::path::Path;

use polars::prelude::*;

use crate::error::{Error, Result};

/// Writes `df` to `path` (the caller passes a temporary path from an `OutputSet`).
pub fn write_parquet(df: &mut DataFrame, path: &Path) -> Result<()> {
    let f = File::create(path).map_err(|e| Error::write(path, e))?;
    ParquetWriter::new(f).with_compression(ParquetCompression::Zstd(None)).finish(df)?;
    Ok(())
}

/// Reads a Parquet file into a frame.
pub fn read_parquet(path: &Path) -> Result<DataFrame> {
    let f = File::open(path).map_err(|e| Error::read(path, e))?;
    Ok(ParquetReader::new(f).finish()?)
}
