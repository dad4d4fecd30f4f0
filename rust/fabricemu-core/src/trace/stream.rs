//! Trace tables that grow during a run, written to disk in record batches so memory stays bounded:
//! `Stream<C>` holds the current batch's column builders (`C`) and, once the output folder is known,
//! an Arrow IPC file writer under a temporary name; `finish` renames it into place.
//!
//! Without an output folder (tests, tools) full batches are kept in memory instead.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::writer::FileWriter;
use arrow_schema::{Field, Schema, SchemaRef};

use super::atomic::AtomicFile;

/// Rows per record batch.
pub const STREAM_BATCH_ROWS: usize = 1 << 16;

/// The columns of one trace table.
pub trait Columns: Default {
    /// The table's file name in the output folder.
    const FILE: &'static str;
    fn fields() -> Vec<Field>;
    fn rows(&self) -> usize;
    /// The columns built so far, leaving the builders empty.
    fn finish_columns(&mut self) -> Vec<ArrayRef>;
}

pub struct Stream<C: Columns> {
    pub cols: C,
    schema: SchemaRef,
    sink: Option<FileWriter<AtomicFile>>,
    kept: Vec<RecordBatch>,
}

impl<C: Columns> Default for Stream<C> {
    fn default() -> Self {
        Self {
            cols: C::default(),
            schema: Arc::new(Schema::new(C::fields())),
            sink: None,
            kept: Vec::new(),
        }
    }
}

impl<C: Columns> Stream<C> {
    /// Start writing `dir/<FILE>` (under a temporary name) with schema `metadata`.
    pub fn open(&mut self, dir: &Path, metadata: &[(String, String)]) -> io::Result<()> {
        let metadata: HashMap<String, String> = metadata.iter().cloned().collect();
        self.schema = Arc::new(Schema::new_with_metadata(C::fields(), metadata));
        let file = AtomicFile::create(&dir.join(C::FILE))?;
        let mut writer = FileWriter::try_new(file, &self.schema).map_err(io::Error::other)?;
        for b in self.kept.drain(..) {
            let b = b
                .with_schema(self.schema.clone())
                .map_err(io::Error::other)?;
            writer.write(&b).map_err(io::Error::other)?;
        }
        self.sink = Some(writer);
        Ok(())
    }

    /// Call after each row: writes a batch when one is full.
    #[inline]
    pub fn row_done(&mut self) -> io::Result<()> {
        if self.cols.rows() >= STREAM_BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.cols.rows() == 0 {
            return Ok(());
        }
        let batch = RecordBatch::try_new(self.schema.clone(), self.cols.finish_columns())
            .map_err(io::Error::other)?;
        match &mut self.sink {
            Some(w) => w.write(&batch).map_err(io::Error::other),
            None => {
                self.kept.push(batch);
                Ok(())
            }
        }
    }

    /// Write what remains and rename the file into place (opening it first if needed). The table
    /// stays usable: a later `finish` writes a fresh file with everything since.
    pub fn finish(&mut self, dir: &Path, metadata: &[(String, String)]) -> io::Result<()> {
        if self.sink.is_none() {
            self.open(dir, metadata)?;
        }
        self.flush()?;
        let mut w = self.sink.take().expect("opened");
        w.finish().map_err(io::Error::other)?;
        w.into_inner().map_err(io::Error::other)?.commit()
    }

    /// Batches kept in memory (no output folder) plus the rows not yet in a batch.
    pub fn batches(&mut self) -> io::Result<Vec<RecordBatch>> {
        if self.sink.is_none() {
            self.flush()?;
        }
        Ok(self.kept.clone())
    }
}
