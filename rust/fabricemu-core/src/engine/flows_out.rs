//! The rows of finished flows spilled to disk during the run (issue 19 item 2: an open-loop run
//! keeps no row per finished message). Once the output folder is known
//! ([`Simulation::open_traces`]) and the run retires flows (on threads, its view does), each
//! slice of events ends by appending the rows retired since the last slice to a spill file
//! (fixed-size records, in the order the flows retired) and freeing them
//! ([`super::FlowTable::spill_rows`]); a flow then keeps only its start and finish times. The spill file is unlinked as soon as it is made
//! (where the system allows an open file to be; elsewhere it is removed with the run), so no run,
//! however it ends, leaves it behind. The outputs write flows.arrow in flow-id order,
//! reading each spilled row back, batch by batch (never every row at once): the same file, byte
//! for byte, as one written from rows kept in memory.

use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::{FlowState, Simulation};
use crate::ids::FlowId;
use crate::output::FLOWS_FILE;
use crate::trace::atomic::{temp_path, AtomicFile};
use crate::trace::flows::{FlowLabels, FlowRow, FlowWriter};

/// Bytes of one spilled row: 13 integers of 8 bytes, 3 of 4, and `started`.
const RECORD: usize = 13 * 8 + 3 * 4 + 1;
/// Most records in one read of the spill file, and the largest gap between two wanted records
/// that one read spans ([`SpillReader::fetch`]).
const READ_RECORDS: usize = 4096;
const READ_GAP: usize = 32;
/// Flows whose spilled rows are fetched at once when flows.arrow is written.
const FETCH_FLOWS: usize = 1 << 16;

/// The spill file while the run writes it.
pub(super) struct FlowsOut {
    /// Where a system that cannot unlink an open file (Windows) keeps it until the run drops it.
    kept: Option<PathBuf>,
    file: File,
    writer: BufWriter<File>,
    /// A write failed (the disk is full, say): the rows are kept in memory from then on.
    failed: bool,
}

impl Simulation {
    /// Make the spill file in `dir` if the run retires flows (on threads, its view retires them;
    /// other runs keep every flow's record anyway).
    pub(super) fn open_flow_spill(&mut self, dir: &Path) -> io::Result<()> {
        if !self.world.retires_flows() || self.flows_out.is_some() {
            return Ok(());
        }
        let path = temp_path(&dir.join(FLOWS_FILE));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        // Opened again, not cloned: the reads (which seek) keep their own file position.
        let file = File::open(&path).inspect_err(|_| {
            let _ = std::fs::remove_file(&path);
        })?;
        // Open, it lives on until the run drops it.
        let kept = std::fs::remove_file(&path).is_err().then_some(path);
        let writer = BufWriter::with_capacity(1 << 16, written);
        self.flows_out = Some(FlowsOut {
            kept,
            file,
            writer,
            failed: false,
        });
        Ok(())
    }

    /// Spill the rows of the flows retired since the last call (at the end of each slice). They
    /// count as spilled once written to the file; a write that fails (the disk is full, say)
    /// leaves them in memory, where the rows are kept from then on, and a warning in run.json.
    pub(super) fn spill_retired_rows(&mut self) {
        let Some(out) = self.flows_out.as_mut() else {
            return;
        };
        if out.failed || self.world.flows.rows_kept() == 0 {
            return;
        }
        let mut record = [0u8; RECORD];
        let spilled = self.world.flows.spill_rows(|rows| {
            for row in rows {
                encode(row, &mut record);
                out.writer.write_all(&record)?;
            }
            out.writer.flush()
        });
        if let Err(e) = spilled {
            out.failed = true;
            self.warnings.push(format!(
                "flows.arrow: the rows of finished flows could not be set aside on disk ({e}); \
                 they are kept in memory from now on"
            ));
        }
    }

    /// Write `dir/flows.arrow`: every flow's row in flow-id order, the spilled ones read back,
    /// record batch by record batch.
    pub fn write_flows_file(&self, dir: &Path, metadata: &[(String, String)]) -> io::Result<()> {
        let mut writer = FlowWriter::new(
            AtomicFile::create(&dir.join(FLOWS_FILE))?,
            self.workload_names(),
            self.plan.tag_names.clone(),
            metadata,
        )?;
        let mut spill = SpillReader::new(self.flows_out.as_ref());
        let n = self.world.flows.len();
        for from in (0..n).step_by(FETCH_FLOWS) {
            let ids = (from..n.min(from + FETCH_FLOWS)).map(|i| FlowId::new(i as u32));
            spill.fetch(self.spilled_records(ids.clone()))?;
            for id in ids {
                if let Some(row) = self.flow_row_of(id, &mut spill)? {
                    writer.push(row, flow_labels(&self.plan, &self.world, id))?;
                }
            }
        }
        writer.finish()?.commit()
    }

    /// Flow `id`'s row in flows.arrow, if it has one: every flow that finished or was given up
    /// on (its destination cut off) and, if the scenario asks, every other flow.
    pub(super) fn flow_row_of(
        &self,
        id: FlowId,
        spill: &mut SpillReader<'_>,
    ) -> io::Result<Option<FlowRow>> {
        let w = &self.world;
        if w.is_cancelled(id) {
            return Ok(None);
        }
        Ok(match w.flows.state(id) {
            FlowState::Live(f) => self.keeps_row(f).then(|| w.flow_row(id, f)),
            FlowState::Retired(r) => Some(w.retired_row(id, r)),
            FlowState::Spilled { record, .. } => Some(w.retired_row(id, &spill.read(record)?)),
            FlowState::Unborn => self
                .scenario
                .trace
                .unfinished_flows
                .then(|| w.flow_row(id, &w.planned_flow(id))),
        })
    }

    /// The spill file's reader (none when the run spills nothing), with every spilled row
    /// fetched.
    pub(super) fn spill_reader(&self) -> io::Result<SpillReader<'_>> {
        let mut spill = SpillReader::new(self.flows_out.as_ref());
        spill.fetch(self.spilled_records(self.world.flows.ids()))?;
        Ok(spill)
    }

    /// The spill records of the flows `ids` whose rows were spilled.
    fn spilled_records(&self, ids: impl Iterator<Item = FlowId>) -> Vec<usize> {
        ids.filter_map(|id| match self.world.flows.state(id) {
            FlowState::Spilled { record, .. } => Some(record),
            _ => None,
        })
        .collect()
    }
}

impl Drop for FlowsOut {
    fn drop(&mut self) {
        if let Some(path) = self.kept.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `buf.len()` bytes of `file` from byte `at`.
fn read_at(mut file: &File, buf: &mut [u8], at: usize) -> io::Result<()> {
    file.seek(SeekFrom::Start(at as u64))?;
    file.read_exact(buf)
}

/// Reads spilled rows back. The rows are wanted in flow-id order but were spilled in the order
/// the flows retired, which differs by the spread of the flows' lifetimes (tens of thousands of
/// records at a thousand messages a microsecond): so the rows of a group of flows are fetched
/// first ([`SpillReader::fetch`]), in record order, neighbouring records in one read.
pub(super) struct SpillReader<'a> {
    file: Option<&'a File>,
    /// Fetched rows by record number, sorted.
    fetched: Vec<(usize, FlowRow)>,
    buf: Vec<u8>,
}

impl<'a> SpillReader<'a> {
    fn new(out: Option<&'a FlowsOut>) -> Self {
        Self {
            file: out.map(|o| &o.file),
            fetched: Vec::new(),
            buf: Vec::new(),
        }
    }

    fn file(&self) -> io::Result<&'a File> {
        self.file
            .ok_or_else(|| io::Error::other("a spilled row without a spill file"))
    }

    /// Read `records` (forgetting the rows fetched before): sorted, a run of records less than
    /// [`READ_GAP`] apart in one read of at most [`READ_RECORDS`].
    fn fetch(&mut self, mut records: Vec<usize>) -> io::Result<()> {
        self.fetched.clear();
        if records.is_empty() {
            return Ok(());
        }
        let file = self.file()?;
        records.sort_unstable();
        let mut i = 0;
        while i < records.len() {
            let first = records[i];
            let mut j = i + 1;
            while j < records.len()
                && records[j] - records[j - 1] < READ_GAP
                && records[j] - first < READ_RECORDS
            {
                j += 1;
            }
            let span = records[j - 1] - first + 1;
            self.buf.resize(span * RECORD, 0);
            read_at(file, &mut self.buf, first * RECORD)?;
            for &r in &records[i..j] {
                let at = (r - first) * RECORD;
                self.fetched.push((r, decode(&self.buf[at..at + RECORD])));
            }
            i = j;
        }
        Ok(())
    }

    /// Spilled row `record`: fetched, or read alone.
    fn read(&mut self, record: usize) -> io::Result<FlowRow> {
        if let Ok(k) = self.fetched.binary_search_by_key(&record, |&(r, _)| r) {
            return Ok(self.fetched[k].1.clone());
        }
        let mut one = [0u8; RECORD];
        read_at(self.file()?, &mut one, record * RECORD)?;
        Ok(decode(&one))
    }
}

/// Flow `id`'s labels in flows.arrow (see [`Simulation::flow_labels`]).
pub(super) fn flow_labels(
    plan: &crate::workload::FlowPlan,
    w: &super::World,
    id: FlowId,
) -> FlowLabels {
    // A streamed flow (`workload::stream`: poisson, synthetic) has neither collective nor tag.
    let init = plan.flows.get(id.index());
    let collective = init.and_then(|f| f.collective);
    let b = w.flow_brief(id);
    FlowLabels {
        collective: collective.map(|c| c.instance),
        iteration: collective.map(|c| c.iteration),
        step: collective.map(|c| c.step),
        tag: init.and_then(|f| f.tag),
        measured: w.synthetic_measured(b.workload, b.start),
    }
}

/// `row` as a spill record (little-endian; a finish of `u64::MAX` is none).
fn encode(row: &FlowRow, out: &mut [u8; RECORD]) {
    let wide = [
        row.flow_id,
        row.size_bytes,
        row.start_ps,
        row.finish_ps.unwrap_or(u64::MAX),
        row.ideal_fct_ps,
        row.packets_sent,
        row.retransmits,
        row.drops,
        row.ecn_marks,
        row.cnps,
        row.out_of_order_packets,
        row.max_reorder_distance,
        row.unreachable_drops,
    ];
    for (i, v) in wide.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    for (i, v) in [row.src, row.dst, row.workload].iter().enumerate() {
        out[104 + i * 4..108 + i * 4].copy_from_slice(&v.to_le_bytes());
    }
    out[116] = row.started as u8;
}

/// The row of spill record `b`.
fn decode(b: &[u8]) -> FlowRow {
    let wide = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let narrow =
        |i: usize| u32::from_le_bytes(b[104 + i * 4..108 + i * 4].try_into().expect("4 bytes"));
    FlowRow {
        flow_id: wide(0),
        size_bytes: wide(1),
        start_ps: wide(2),
        finish_ps: Some(wide(3)).filter(|&f| f != u64::MAX),
        ideal_fct_ps: wide(4),
        packets_sent: wide(5),
        retransmits: wide(6),
        drops: wide(7),
        ecn_marks: wide(8),
        cnps: wide(9),
        out_of_order_packets: wide(10),
        max_reorder_distance: wide(11),
        unreachable_drops: wide(12),
        src: narrow(0),
        dst: narrow(1),
        workload: narrow(2),
        started: b[116] != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse_toml;

    /// Open-loop messages on a small fat tree (they retire as they finish), for 40 us.
    const SYNTHETIC: &str = r#"
name = "spill"
seed = 3
stop = "40us"
warmup = "10us"
[topology]
kind = "fat_tree"
k = 4
[[workload]]
kind = "synthetic"
pattern = "uniform_random"
load = 0.5
size = "4KiB"
"#;

    /// How a test run treats its finished flows' rows.
    #[derive(Clone, Copy, PartialEq)]
    enum How {
        /// In memory (no output folder until the end).
        Kept,
        /// Spilled from the start.
        Spilled,
        /// Spilled for `n` slices of 1,000 events, then onto a full disk (/dev/full).
        FullAfter(u32),
        /// Spilled, and every row read back after each slice of 2,000 events.
        ReadEachSlice,
    }

    /// Run SYNTHETIC with its outputs in a fresh `name` folder.
    fn run(name: &str, how: How) -> (std::path::PathBuf, Simulation) {
        let dir = std::env::temp_dir().join(format!("fabricemu-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (file, spec) = parse_toml(SYNTHETIC, "t.toml").unwrap();
        let json = crate::scenario::to_json(&file);
        let mut sim = Simulation::build(&spec).unwrap();
        if how != How::Kept {
            sim.open_traces(&dir, &crate::output::metadata(&json, spec.seed))
                .unwrap();
        }
        match how {
            How::FullAfter(slices) => {
                for _ in 0..slices {
                    sim.step(1_000);
                }
                let full = std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/full")
                    .unwrap();
                sim.flows_out.as_mut().unwrap().writer = BufWriter::new(full);
            }
            How::ReadEachSlice => {
                let mut seen = 0;
                while sim.step(2_000) == super::super::StepOutcome::Running {
                    let rows = sim.flow_rows();
                    assert!(rows.len() >= seen);
                    seen = rows.len();
                }
            }
            How::Kept | How::Spilled => {}
        }
        sim.run_to_end();
        crate::output::write_outputs(&dir, &mut sim, &json, spec.seed, false, 0.0).unwrap();
        (dir, sim)
    }

    fn flows(dir: &Path) -> Vec<u8> {
        std::fs::read(dir.join(FLOWS_FILE)).unwrap()
    }

    #[test]
    fn reading_the_rows_midway_leaves_the_spill_file_whole() {
        let (kept, _) = run("spill-kept-2", How::Kept);
        let (read, sim) = run("spill-read", How::ReadEachSlice);
        assert!(sim.world.flows.spilled_count() > 100);
        assert_eq!(flows(&read), flows(&kept));
        for d in [kept, read] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn a_spill_that_fails_keeps_the_rows_in_memory_and_the_same_outputs() {
        let (kept, _) = run("spill-kept", How::Kept);
        let (spilled, s) = run("spill-all", How::Spilled);
        let (full, f) = run("spill-full", How::FullAfter(3));
        assert_eq!(flows(&spilled), flows(&kept));
        assert_eq!(flows(&full), flows(&kept));
        let retired = s.world.flows.retired_count();
        assert!(s.world.flows.spilled_count() > retired / 2, "{retired}");
        assert!(s.warnings.is_empty());
        // Some rows went to the file before the disk was full; the rest stayed in memory.
        let (on_disk, in_memory) = (f.world.flows.spilled_count(), f.world.flows.rows_kept());
        assert!(on_disk > 0 && in_memory > 0, "{on_disk} {in_memory}");
        assert_eq!(on_disk + in_memory, f.world.flows.retired_count());
        assert!(
            f.warnings.iter().any(|w| w.contains("kept in memory")),
            "{:?}",
            f.warnings
        );
        for d in [kept, spilled, full] {
            let _ = std::fs::remove_dir_all(d);
        }
    }

    #[test]
    fn a_row_spills_and_reads_back_whole() {
        let row = FlowRow {
            flow_id: 1 << 40,
            src: 7,
            dst: u32::MAX - 1,
            size_bytes: 123_456_789,
            start_ps: 5,
            started: true,
            finish_ps: Some(u64::MAX - 2),
            ideal_fct_ps: 42,
            workload: 3,
            packets_sent: 9,
            retransmits: 10,
            drops: 11,
            ecn_marks: 12,
            cnps: 13,
            out_of_order_packets: 14,
            max_reorder_distance: 15,
            unreachable_drops: 16,
        };
        let mut b = [0u8; RECORD];
        encode(&row, &mut b);
        assert_eq!(decode(&b), row);
        let unfinished = FlowRow {
            finish_ps: None,
            started: false,
            ..row
        };
        encode(&unfinished, &mut b);
        assert_eq!(decode(&b), unfinished);
    }
}
