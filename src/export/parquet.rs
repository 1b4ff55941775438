//! Parquet tables (zstd) through Polars' own writer, for DuckDB, Spark, pandas and BI
//! tools. Reading Parquet is the ingest layer's (`ingest::parquet`).

use std::path::Path;

use super::direct::FileWriter;

use polars::prelude::*;

use crate::error::{Error, Result};

/// Writes `df` to `w` (from [`super::atomic::OutputSet::create`]) and finishes it;
/// errors name `path`.
///
/// The Arrow schema stored in the file (the `ARROW:schema` key Arrow readers type columns
/// by) is Polars' oldest: strings as `large_string`, not the `string_view` Polars uses in
/// memory, which pyarrow before 15 and many BI tools' Arrow readers cannot open
/// ("Unrecognized type: 24"). The data pages are the same either way (UTF-8 byte arrays).
pub fn write_parquet(df: &mut DataFrame, path: &Path, w: &mut FileWriter) -> Result<()> {
    let schema = df.schema().to_arrow(CompatLevel::oldest());
    let arrow_key = polars_parquet::arrow::write::schema_to_metadata_key(&schema);
    ParquetWriter::new(&mut *w)
        .with_compression(ParquetCompression::Zstd(None))
        .with_key_value_metadata(Some(KeyValueMetadata::Static(vec![arrow_key])))
        .finish(df)?;
    w.finish().map_err(|e| Error::write(path, e))
}
