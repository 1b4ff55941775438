//! Parquet tables (zstd) through Polars' own writer, for DuckDB, Spark, pandas and BI
//! tools.

use std::fs::File;
use std::path::Path;

use polars::prelude::*;

use crate::error::{Error, Result};

/// Writes `df` to `f` (a file from [`super::atomic::OutputSet::create_file`]).
pub fn write_parquet(df: &mut DataFrame, f: File) -> Result<()> {
    ParquetWriter::new(f).with_compression(ParquetCompression::Zstd(None)).finish(df)?;
    Ok(())
}

/// Reads a Parquet file into a frame.
pub fn read_parquet(path: &Path) -> Result<DataFrame> {
    let f = File::open(path).map_err(|e| Error::read(path, e))?;
    Ok(ParquetReader::new(f).finish()?)
}
