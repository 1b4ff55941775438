//! Parquet read back: rollouts tables from `ingest`/`export` or other tools, batches, and
//! the tables `query` runs over. A file that is not Parquet is the user's input at fault.

use std::fs::File;
use std::path::Path;

use polars::prelude::*;

use crate::error::{Error, Result};

/// Opens a Parquet file lazily: only the columns and rows a query uses are read. The
/// file's schema is read now, so a file that is not Parquet is refused here (exit
/// status 2, named in the error) rather than midway through a query.
pub fn scan_parquet(path: &Path) -> Result<LazyFrame> {
    guarded(path, || scan(path))
}

fn scan(path: &Path) -> Result<LazyFrame> {
    let bad =
        |e: PolarsError| Error::bad(crate::error::Location::file(path), format!("not a readable Parquet file: {e}"));
    File::open(path).map_err(|e| Error::read(path, e))?;
    let at = PlRefPath::try_from_path(path).map_err(bad)?;
    // One file, read as it is: a `key=value` folder above it (a lake's partition) adds
    // no column.
    let mut args = ScanArgsParquet::default();
    args.hive_options.enabled = Some(false);
    let mut lf = LazyFrame::scan_parquet(at, args).map_err(bad)?;
    lf.collect_schema().map_err(bad)?;
    Ok(lf)
}

/// Reads a Parquet file into a frame; a file that is not Parquet is the user's input
/// at fault (exit status 2), named in the error.
pub fn read_parquet(path: &Path) -> Result<DataFrame> {
    guarded(path, || read(path))
}

fn read(path: &Path) -> Result<DataFrame> {
    let f = File::open(path).map_err(|e| Error::read(path, e))?;
    ParquetReader::new(f)
        .finish()
        .map_err(|e| Error::bad(crate::error::Location::file(path), format!("not a readable Parquet file: {e}")))
}

/// Runs a Parquet read that may panic: Polars' decoder panics on some damaged footers
/// ("thrift bool field"). Such a file is the user's input at fault (exit status 2), named
/// in a one-line error; the panic message is kept off the terminal.
fn guarded<T>(path: &Path, read: impl FnOnce() -> Result<T>) -> Result<T> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read));
    std::panic::set_hook(hook);
    r.unwrap_or_else(|_| {
        Err(Error::bad(crate::error::Location::file(path), "not a readable Parquet file: its metadata is damaged"))
    })
}
