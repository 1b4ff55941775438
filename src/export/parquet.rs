//! Parquet tables (zstd) through Polars' own writer, for DuckDB, Spark, pandas and BI
//! tools. Reading Parquet is the ingest layer's (`ingest::parquet`).

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
