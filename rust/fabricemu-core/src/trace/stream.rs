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
    /// One row's figures.
    type Row;
    fn push_row(&mut self, row: &Self::Row);
    fn fields() -> Vec<Field>;
    fn rows(&self) -> usize;
    /// The columns built so far, leaving the builders empty.
    fn finish_columns(&mut self) -> Vec<ArrayRef>;
}

/// A row's place in one world's order of rows: the key of the event that wrote it
/// (`engine::queue`), then its place among the rows of an event every partition runs (a sample's
/// port, a flow start's flow); rows of one place keep the order they were written in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Place {
    pub event: u128,
    pub within: u32,
}

pub struct Stream<C: Columns> {
    pub cols: C,
    schema: SchemaRef,
    sink: Option<FileWriter<AtomicFile>>,
    kept: Vec<RecordBatch>,
    /// A partition of the parallel engine holds its rows with their places instead, for the
    /// view's table to take them in one world's order ([`Stream::merge`]).
    held: Option<Vec<(Place, C::Row)>>,
}

impl<C: Columns> Default for Stream<C> {
    fn default() -> Self {
        Self {
            cols: C::default(),
            schema: Arc::new(Schema::new(C::fields())),
            sink: None,
            kept: Vec::new(),
            held: None,
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

    /// Add a row at `place` (which only a partition keeps); writes a batch when one is full.
    #[inline]
    pub fn push(&mut self, place: Place, row: C::Row) -> io::Result<()> {
        match &mut self.held {
            None => {
                self.cols.push_row(&row);
                self.row_done()
            }
            Some(held) => {
                held.push((place, row));
                Ok(())
            }
        }
    }

    /// Hold rows with their places from now on (a partition's table).
    pub fn hold(&mut self) {
        self.held.get_or_insert_with(Vec::new);
    }

    /// The rows held so far, leaving none.
    pub fn take_held(&mut self) -> Vec<(Place, C::Row)> {
        self.held.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The partitions' held rows, in one world's order: by place, then partition and the order
    /// each wrote them (a place's rows all come from one partition).
    pub fn merge(parts: Vec<Vec<(Place, C::Row)>>) -> Vec<C::Row> {
        let mut all: Vec<(Place, C::Row)> = parts.into_iter().flatten().collect();
        all.sort_by_key(|(place, _)| *place); // stable
        all.into_iter().map(|(_, row)| row).collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tables::{QueueRow, QueueRows};

    #[test]
    fn held_rows_merge_by_place_keeping_each_partitions_order_within_one() {
        let row = |port: u32| QueueRow {
            time_ps: 0,
            node: crate::ids::NodeId::new(0),
            port: crate::ids::PortId::new(port),
            priority: 0,
            bytes: 0,
            packets: 0,
            max_bytes: 0,
        };
        let at = |event: u128, within: u32| Place { event, within };
        // Partition 0 ran events 1 and 5, partition 1 ran 3 and both sampled at 7 (by port).
        let a = vec![
            (at(1, 0), row(10)),
            (at(1, 0), row(11)),
            (at(5, 0), row(12)),
            (at(7, 2), row(2)),
        ];
        let b = vec![(at(3, 0), row(20)), (at(7, 1), row(1)), (at(7, 3), row(3))];
        let ports: Vec<u32> = Stream::<QueueRows>::merge(vec![a, b])
            .iter()
            .map(|r| r.port.get())
            .collect();
        assert_eq!(ports, [10, 11, 20, 12, 1, 2, 3]);
    }
}
