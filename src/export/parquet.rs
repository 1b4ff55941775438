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

/// Opens a Parquet file lazily: only the columns and rows a query uses are read. The
/// file's schema is read now, so a file that is not Parquet is refused here (exit
/// status 2, named in the error) rather than midway through a query.
pub fn scan_parquet(path: &Path) -> Result<LazyFrame> {
    let bad =
        |e: PolarsError| Error::bad(crate::error::Location::file(path), format!("not a readable Parquet file: {e}"));
    File::open(path).map_err(|e| Error::read(path, e))?;
    let at = PlRefPath::try_from_path(path).map_err(bad)?;
    let mut lf = LazyFrame::scan_parquet(at, ScanArgsParquet::default()).map_err(bad)?;
    lf.collect_schema().map_err(bad)?;
    Ok(lf)
}

/// Reads a Parquet file into a frame; a file that is not Parquet is the user's input
/// at fault (exit status 2), named in the error.
pub fn read_parquet(path: &Path) -> Result<DataFrame> {
    let f = File::open(path).map_err(|e| Error::read(path, e))?;
    ParquetReader::new(f)
        .finish()
        .map_err(|e| Error::bad(crate::error::Location::file(path), format!("not a readable Parquet file: {e}")))
}
