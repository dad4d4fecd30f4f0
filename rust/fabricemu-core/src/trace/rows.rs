//! Tables written once at the end of a run from a slice of row structs (faults, circuits,
//! actions): the Arrow IPC file in batches, and its atomic placement.

use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_ipc::writer::FileWriter;
use arrow_schema::{Schema, SchemaRef};

use super::atomic::AtomicFile;

/// Write `rows` to `out` as an Arrow IPC file of `schema`, `batch` turning each chunk of
/// [`super::flows::BATCH_ROWS`] rows into a record batch.
pub fn write_rows_to<W: Write, R>(
    out: W,
    schema: Schema,
    rows: &[R],
    batch: impl Fn(&SchemaRef, &[R]) -> io::Result<RecordBatch>,
) -> io::Result<W> {
    let schema: SchemaRef = Arc::new(schema);
    let mut writer = FileWriter::try_new(out, &schema).map_err(io::Error::other)?;
    for chunk in rows.chunks(super::flows::BATCH_ROWS) {
        writer
            .write(&batch(&schema, chunk)?)
            .map_err(io::Error::other)?;
    }
    writer.finish().map_err(io::Error::other)?;
    writer.into_inner().map_err(io::Error::other)
}

/// [`write_rows_to`] a file at `path`, placed atomically (an older file stays whole until the
/// new one is complete).
pub fn write_rows<R>(
    path: &Path,
    schema: Schema,
    rows: &[R],
    batch: impl Fn(&SchemaRef, &[R]) -> io::Result<RecordBatch>,
) -> io::Result<()> {
    let file = write_rows_to(AtomicFile::create(path)?, schema, rows, batch)?;
    file.commit()
}
