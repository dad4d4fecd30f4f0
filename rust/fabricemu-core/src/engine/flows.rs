//! The flows' state, by flow id, with memory bounded by the flows alive at once (issue 19).
//!
//! A flow's transport record ([`Flow`]) lives in a slot of a recycled array from when it starts
//! (or, in runs that keep every flow, from the build) until it is retired: it finished, its
//! sender saw the last acknowledgement and no packet of it is left in the fabric. Then its
//! output row ([`FlowRow`], what flows.arrow gets) is all that remains, and the slot serves the
//! next flow to start. A long open-loop run (Poisson, synthetic, replay) so holds transport state
//! for the flows in progress only, not for every message of the run; what stays per message is
//! its slot in the index and header entropy, its plan entry unless its workload streams
//! (`workload::stream`: poisson and synthetic flows are made as the run reaches them, merged
//! into the start order by `World::next_streamed`) and, once it finished, its row. A run that
//! writes its outputs to a folder spills the rows to disk at the end of each slice
//! ([`FlowTable::spill_rows`], `flows_out`): then a finished message keeps only its start,
//! finish, size and workload here. On threads, the partitions' records are made lazily too, and
//! the view retires flows as it folds them (`engine::parallel`).
//!
//! Runs whose features look at any flow at any time (a control loop, plan amendments from
//! outside, in-network reduction) keep every flow's record for the whole run:
//! [`super::World::keep_all_flows`]. Faults, optical switches, step graphs, collectives, jobs
//! that restart or stall, and PXN relays read only flows in progress (a give-up skips a flow
//! done for good, a job's resume looks at flows in flight, a report reads a flow's row), so
//! their runs retire flows too (since 2026-12-04; before, they kept every record: a training
//! run of 391,680 flows held 247 MiB instead of 143). So do elastic jobs (since 2026-12-05): a
//! re-plan reads whether each of its ops' flows started, finished or was given up, and a
//! retired flow finished; the flows it appends get their records as they start
//! (`FlowMaker::appended`, [`super::World::amend_lazily`]).

use std::ops::{Index, IndexMut};

use crate::ids::{FlowId, IdRange, IdVec, RecordSlot};
use crate::trace::flows::FlowRow;
use crate::transport::Flow;

/// `FlowTable::at` of a flow not started yet (its record is made when it starts).
const UNBORN: u32 = u32::MAX;
/// `FlowTable::at` of a retired flow: the rest is the index of its row in `rows`.
const RETIRED: u32 = 1 << 31;
/// `FlowTable::at` of a flow a partition of a parallel run forgot: the view retired it (see
/// [`FlowTable::forget`]). Its retired bit set, it has no record, as a retired flow.
const FORGOTTEN: u32 = u32::MAX - 1;
/// A retired row's ideal FCT, until the outputs fill it in ([`super::World::retired_row`]).
const IDEAL_LATER: u64 = u64::MAX;
/// Rows are kept in chunks of this many: the row store grows without copying what it holds and
/// never has more than one chunk unused (a doubling array would hold up to twice its rows).
const ROW_CHUNK: usize = 1024;

/// Where a flow's state is now.
#[derive(Debug, Clone, Copy)]
pub enum FlowState<'a> {
    /// Not started yet: only its plan entry exists.
    Unborn,
    /// Started (or, when every record is kept, any flow): its transport record.
    Live(&'a Flow),
    /// Retired: its output row.
    Retired(&'a FlowRow),
    /// Retired, and its row spilled to disk ([`FlowTable::spill_rows`]): record `record` of the
    /// spill file; only its start and finish times are kept.
    Spilled {
        record: usize,
        start_ps: u64,
        finish_ps: u64,
        size_bytes: u64,
        workload: u32,
    },
}

/// A spilled row's flow: its start and finish (a retired flow finished), size and workload.
#[derive(Debug, Clone, Copy)]
pub struct SpilledBrief {
    pub start_ps: u64,
    pub finish_ps: u64,
    pub size_bytes: u64,
    pub workload: u32,
}

/// Every flow's state, indexed by flow id (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct FlowTable {
    /// Per flow id: its slot in `slots`, [`UNBORN`], or [`RETIRED`] | its row's index.
    at: IdVec<FlowId, u32>,
    slots: Vec<Flow>,
    /// Slots free for the next flow to start.
    free: Vec<u32>,
    /// Rows of the retired flows, in the order they retired, in chunks of [`ROW_CHUNK`]; the
    /// chunks of spilled rows are freed.
    rows: Vec<Vec<FlowRow>>,
    retired: usize,
    /// The first `spilled` rows (in retirement order) are on disk ([`FlowTable::spill_rows`]).
    spilled: usize,
    /// Per spilled row: what the run's reports read of it (a streamed flow has no plan entry
    /// to read them from; see `workload::stream`).
    spilled_briefs: Vec<SpilledBrief>,
    /// Slots in use at most at once.
    peak: usize,
    /// A partition's: one bit per flow id whose record may have changed since the view last
    /// took them ([`FlowTable::take_touched`]); empty when not tracked (one world).
    touched: Vec<u64>,
}

impl FlowTable {
    /// Flow ids (started or not, retired or not).
    #[inline]
    pub fn len(&self) -> usize {
        self.at.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    pub fn ids(&self) -> IdRange<FlowId> {
        self.at.ids()
    }

    /// A new flow with its record now (the next id).
    pub fn push(&mut self, f: Flow) -> FlowId {
        let slot = self.take_slot(f);
        let fid = self.at.push(slot);
        self.cover_touches();
        self.touch(fid);
        fid
    }

    /// A new flow whose record is made when it starts ([`FlowTable::materialise`]).
    pub fn push_unborn(&mut self) -> FlowId {
        let fid = self.at.push(UNBORN);
        self.cover_touches();
        fid
    }

    /// When touches are tracked, the flows appended since are tracked too.
    fn cover_touches(&mut self) {
        if !self.touched.is_empty() {
            self.touched.resize(self.len().div_ceil(64), 0);
        }
    }

    fn take_slot(&mut self, f: Flow) -> u32 {
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = f;
                s
            }
            None => {
                self.slots.push(f);
                (self.slots.len() - 1) as u32
            }
        };
        self.peak = self.peak.max(self.slots.len() - self.free.len());
        slot
    }

    /// Room for `n` more records, exactly (no slack to grow into).
    pub fn reserve_records(&mut self, n: usize) {
        let spare = self.free.len() + (self.slots.capacity() - self.slots.len());
        if n > spare {
            self.slots.reserve_exact(n - self.free.len());
        }
    }

    /// Whether flow `fid` has no record yet.
    #[inline]
    pub fn is_unborn(&self, fid: FlowId) -> bool {
        self.at[fid] == UNBORN
    }

    /// The slot of live flow `fid`'s record (what congestion control's state is indexed by).
    #[inline(always)]
    pub fn slot(&self, fid: FlowId) -> RecordSlot {
        let a = self.at[fid];
        debug_assert!(a != UNBORN && a & RETIRED == 0, "flow {fid} has no record");
        RecordSlot::new(a)
    }

    /// Whether flow `fid` was retired (its row kept, or spilled).
    #[inline]
    pub fn is_retired(&self, fid: FlowId) -> bool {
        let a = self.at[fid];
        a != UNBORN && a & RETIRED != 0
    }

    /// Give unborn flow `fid` its record `f`.
    pub fn materialise(&mut self, fid: FlowId, f: Flow) {
        debug_assert!(self.is_unborn(fid));
        self.touch(fid);
        self.at[fid] = self.take_slot(f);
    }

    /// Retire live flow `fid`: keep `row`, free its record's slot for the next flow.
    pub fn retire(&mut self, fid: FlowId, row: FlowRow) {
        let slot = self.at[fid];
        debug_assert!(slot & RETIRED == 0 && slot != UNBORN);
        self.free_slot(slot);
        self.at[fid] = RETIRED | self.retired as u32;
        if self.retired.is_multiple_of(ROW_CHUNK) {
            self.rows.push(Vec::with_capacity(ROW_CHUNK));
        }
        self.rows.last_mut().expect("a chunk with room").push(row);
        self.retired += 1;
    }

    /// Forget flow `fid`'s record, if it has one, keeping no row: a partition of a parallel run
    /// once the view retired the flow (the view keeps its row; no partition touches it again).
    pub fn forget(&mut self, fid: FlowId) {
        let slot = self.at[fid];
        if slot == UNBORN || slot & RETIRED != 0 {
            return;
        }
        self.free_slot(slot);
        self.at[fid] = FORGOTTEN;
    }

    /// Free record slot `slot` for the next flow to start: the record's heap parts go now; the
    /// slot is overwritten when reused.
    fn free_slot(&mut self, slot: u32) {
        let f = &mut self.slots[slot as usize];
        f.resend = Vec::new();
        f.received_ahead = Vec::new();
        self.free.push(slot);
    }

    /// Make `f` flow `fid`'s record (the view of a parallel run, folding the partitions' copies):
    /// its record from now on if it had none, the record's new content if it had one. A retired
    /// flow keeps its row (nothing changes a retired flow).
    pub fn set_record(&mut self, fid: FlowId, f: Flow) {
        match self.at[fid] {
            UNBORN => self.materialise(fid, f),
            a if a & RETIRED != 0 => debug_assert!(false, "flow {fid} changed after it retired"),
            a => self.slots[a as usize] = f,
        }
    }

    /// Hand the rows retired since the last call to `put`, in the order they retired (record
    /// numbers on from the last call's). Once `put` has stored them all, only each flow's start
    /// and finish are kept and every chunk of rows spilled whole is freed; if it fails, nothing
    /// changes (the rows stay here).
    pub fn spill_rows(
        &mut self,
        put: impl FnOnce(&mut dyn Iterator<Item = &FlowRow>) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let (from, to) = (self.spilled, self.retired);
        let rows = &self.rows;
        put(&mut (from..to).map(|i| &rows[i / ROW_CHUNK][i % ROW_CHUNK]))?;
        for i in from..to {
            let row = &self.rows[i / ROW_CHUNK][i % ROW_CHUNK];
            let finish = row.finish_ps.expect("a retired flow finished");
            self.spilled_briefs.push(SpilledBrief {
                start_ps: row.start_ps,
                finish_ps: finish,
                size_bytes: row.size_bytes,
                workload: row.workload,
            });
        }
        self.spilled = to;
        for c in from / ROW_CHUNK..to / ROW_CHUNK {
            self.rows[c] = Vec::new();
        }
        Ok(())
    }

    /// Rows spilled to disk so far.
    pub fn spilled_count(&self) -> usize {
        self.spilled
    }

    /// Rows kept in memory now (retired flows whose rows were not spilled).
    pub fn rows_kept(&self) -> usize {
        self.retired - self.spilled
    }

    /// Where flow `fid`'s state is.
    #[inline]
    pub fn state(&self, fid: FlowId) -> FlowState<'_> {
        match self.at[fid] {
            UNBORN => FlowState::Unborn,
            a if a & RETIRED != 0 => {
                debug_assert!(
                    a != FORGOTTEN,
                    "a partition's forgotten flow {fid} has no state"
                );
                let i = (a & !RETIRED) as usize;
                if i < self.spilled {
                    let b = self.spilled_briefs[i];
                    FlowState::Spilled {
                        record: i,
                        start_ps: b.start_ps,
                        finish_ps: b.finish_ps,
                        size_bytes: b.size_bytes,
                        workload: b.workload,
                    }
                } else {
                    FlowState::Retired(&self.rows[i / ROW_CHUNK][i % ROW_CHUNK])
                }
            }
            a => FlowState::Live(&self.slots[a as usize]),
        }
    }

    /// The record of flow `fid` if it has one (started and not retired; or any flow in a run
    /// that keeps them all).
    #[inline]
    pub fn get(&self, fid: FlowId) -> Option<&Flow> {
        match *self.at.get(fid)? {
            a if a == UNBORN || a & RETIRED != 0 => None,
            a => Some(&self.slots[a as usize]),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, fid: FlowId) -> Option<&mut Flow> {
        match *self.at.get(fid)? {
            a if a == UNBORN || a & RETIRED != 0 => None,
            a => {
                self.touch(fid);
                Some(&mut self.slots[a as usize])
            }
        }
    }

    /// Note that `fid`'s record may change (when tracked).
    #[inline(always)]
    fn touch(&mut self, fid: FlowId) {
        if let Some(w) = self.touched.get_mut(fid.index() >> 6) {
            *w |= 1 << (fid.index() & 63);
        }
    }

    /// Track from now on which records may change (every mutable access marks its flow), so
    /// that a parallel run's view folds only those: a training run's flows are mostly done or
    /// not yet started, and taking every one afresh at every step cost a third of the run.
    pub fn track_touches(&mut self) {
        self.touched = vec![0; self.len().div_ceil(64)];
    }

    /// Add the flows touched since the last call to `into` (one bit per flow id), and forget them.
    pub fn take_touched(&mut self, into: &mut [u64]) {
        for (i, w) in into.iter_mut().zip(&mut self.touched) {
            *i |= std::mem::take(w);
        }
    }

    /// The flows with a record, in id order, with their ids.
    pub fn live(&self) -> impl Iterator<Item = (FlowId, &Flow)> + '_ {
        self.at
            .iter_enumerated()
            .filter(|&(_, &a)| a != UNBORN && a & RETIRED == 0)
            .map(|(id, &a)| (id, &self.slots[a as usize]))
    }

    /// Reserve ids for `n` more flows (`records`: and records for them). The records' array
    /// grows by at least half its size: a run amended again and again (elastic re-plans, a
    /// controller's calls) copies it a few times, not at each amendment.
    pub fn reserve(&mut self, n: usize, records: bool) {
        self.at.reserve(n);
        if records {
            self.slots.reserve(n.max(self.slots.len() / 2));
        }
    }

    /// Records in use now.
    pub fn live_count(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Records in use at most at once so far (the record array's high-water mark).
    pub fn peak_live(&self) -> usize {
        self.peak
    }

    /// Record slots allocated (in use or free).
    pub fn slot_capacity(&self) -> usize {
        self.slots.len()
    }

    /// Flows retired so far (their rows kept).
    pub fn retired_count(&self) -> usize {
        self.retired
    }
}

impl Index<FlowId> for FlowTable {
    type Output = Flow;

    #[inline]
    fn index(&self, fid: FlowId) -> &Flow {
        let a = self.at[fid];
        debug_assert!(a != UNBORN && a & RETIRED == 0, "flow {fid} has no record");
        &self.slots[a as usize]
    }
}

impl IndexMut<FlowId> for FlowTable {
    #[inline]
    fn index_mut(&mut self, fid: FlowId) -> &mut Flow {
        let a = self.at[fid];
        debug_assert!(a != UNBORN && a & RETIRED == 0, "flow {fid} has no record");
        self.touch(fid);
        &mut self.slots[a as usize]
    }
}

impl super::World {
    /// Flow `fid`'s record as its plan makes it (a run that retires flows makes it when the flow
    /// starts; the header entropy is the one drawn for it at the build).
    pub(super) fn planned_flow(&self, fid: FlowId) -> Flow {
        let m = self
            .maker
            .as_ref()
            .expect("only runs that retire flows have unborn flows");
        self.flow_from_plan(fid, &m.init(fid))
    }

    /// Flow `fid`'s record made from its plan entry `init`.
    fn flow_from_plan(&self, fid: FlowId, init: &crate::workload::FlowInit) -> Flow {
        let m = self
            .maker
            .as_ref()
            .expect("a run that makes records as flows start");
        let (sport, label) = m.entropy_of(fid);
        super::world::new_flow(
            &self.fabric,
            self.amends.routing(),
            self.amends.transport(),
            init,
            sport,
            label,
        )
        .0
    }

    /// Flow `fid`'s record: its own while it has one, else (not started yet, or retired) the
    /// record its plan makes, as it was before it started (for reports: its path, its ideal FCT).
    pub fn flow_record(&self, fid: FlowId) -> std::borrow::Cow<'_, Flow> {
        match self.flows.get(fid) {
            Some(f) => std::borrow::Cow::Borrowed(f),
            None => std::borrow::Cow::Owned(self.planned_flow(fid)),
        }
    }

    /// Flow `fid`'s sender: from its record, or its plan if it has none yet.
    pub(super) fn flow_src(&self, fid: FlowId) -> crate::ids::NodeId {
        match (self.flows.get(fid), &self.maker) {
            (Some(f), _) => f.src,
            (None, Some(m)) => m.init(fid).src,
            (None, None) => unreachable!("a flow without a record has its plan"),
        }
    }

    /// Packets of flow `fid` its receiver holds in order so far (all of them once it retired).
    pub fn packets_received_in_order(&self, fid: FlowId) -> u32 {
        match self.flows.state(fid) {
            FlowState::Live(f) => f.expected,
            FlowState::Retired(_) | FlowState::Spilled { .. } => self.flow_brief(fid).num_packets,
            FlowState::Unborn => 0,
        }
    }

    /// Give flow `fid` its record if it has none yet (it starts).
    #[inline]
    pub(super) fn materialise(&mut self, fid: FlowId) {
        if self.flows.is_unborn(fid) {
            let f = self.planned_flow(fid);
            self.give_record(fid, f);
            if let Some(m) = &mut self.maker {
                if !m.foreign.is_empty() {
                    m.foreign.remove(&fid.get()); // (another partition's streamed flow)
                }
            }
        }
    }

    /// Give unborn flow `fid` record `f`, and congestion control's state with it.
    fn give_record(&mut self, fid: FlowId, f: Flow) {
        let rate = f.rate_bps;
        self.flows.materialise(fid, f);
        self.cc.fresh(self.flows.slot(fid), rate);
    }

    /// The next flow of a streamed workload to start: (when, its id, the stream), the earliest
    /// by (time, id) over the streams.
    #[inline]
    pub(super) fn next_streamed(&self) -> Option<(crate::units::Time, FlowId, usize)> {
        let m = self.maker.as_ref()?;
        (m.heads.iter().enumerate())
            .filter_map(|(k, h)| h.peek().map(|(t, f)| (t, f, k)))
            .min()
    }

    /// Take stream `k`'s next flow, giving it its record from the entry the stream made; false
    /// if it is another partition's (its entry is kept until a packet of it comes in here).
    pub(super) fn take_streamed(&mut self, k: usize) -> bool {
        let m = self.maker.as_mut().expect("a streamed run");
        let fid = FlowId::new(m.heads[k].id);
        let init = m.heads[k].pop();
        if (self.partition.as_ref()).is_some_and(|p| !p.starts_flow(init.src)) {
            if self.flows.is_unborn(fid) {
                m.foreign.insert(fid.get(), init);
            }
            return false;
        }
        if self.flows.is_unborn(fid) {
            let f = self.flow_from_plan(fid, &init);
            self.give_record(fid, f);
        }
        true
    }

    /// A partition forgets flow `fid` (the view retired it): its record, or its entry if it
    /// never had one.
    pub(super) fn forget_flow(&mut self, fid: FlowId) {
        self.flows.forget(fid);
        if let Some(m) = &mut self.maker {
            m.foreign.remove(&fid.get());
        }
    }

    /// Flow `fid`'s sender and receiver: from its record or its plan.
    pub(super) fn flow_ends(&self, fid: FlowId) -> (crate::ids::NodeId, crate::ids::NodeId) {
        match (self.flows.get(fid), &self.maker) {
            (Some(f), _) => (f.src, f.dst),
            (None, Some(m)) => {
                let init = m.init(fid);
                (init.src, init.dst)
            }
            (None, None) => unreachable!("a flow without a record has its plan"),
        }
    }

    /// Share the plan's `flows` again (a run whose records are lazy), or let go of them for a
    /// moment (None) while the plan grows: see [`super::world::FlowMaker::take_plan`].
    pub(super) fn share_plan(&mut self, flows: Option<&crate::workload::PlanFlows>) {
        if let Some(m) = &mut self.maker {
            match flows {
                Some(f) => m.take_plan(f),
                None => m.release_plan(),
            }
        }
    }

    /// Whether flow `fid` started, as this world knows: its record says so, or it retired (on
    /// threads: the view retired it and this partition forgot it).
    pub(super) fn has_started(&self, fid: FlowId) -> bool {
        match self.flows.get(fid) {
            Some(f) => f.started,
            None => !self.flows.is_unborn(fid),
        }
    }

    /// The barrier flow `fid` counts toward, if any: from its record or its plan.
    pub(super) fn completes_of(&self, fid: FlowId) -> Option<u32> {
        completes_of(&self.flows, self.maker.as_ref(), fid)
    }

    /// When flow `fid` starts (NEVER: when a barrier releases it), from its record or its plan.
    pub(super) fn start_of(&self, fid: FlowId) -> crate::units::Time {
        match (self.flows.get(fid), &self.maker) {
            (Some(f), _) => f.start,
            (None, Some(m)) => match m.init(fid).start {
                crate::workload::Start::At(t) => t,
                crate::workload::Start::After { .. } => crate::transport::NEVER,
            },
            (None, None) => crate::transport::NEVER,
        }
    }

    /// From now on every flow keeps its record (an amendment or a controller may look at any
    /// flow): the unborn get theirs now; the retired keep their rows.
    pub fn keep_all_flows(&mut self) {
        if !self.lazy_records {
            return;
        }
        let unborn = self
            .flows
            .ids()
            .filter(|&f| self.flows.is_unborn(f))
            .count();
        self.flows.reserve_records(unborn);
        for fid in self.flows.ids() {
            self.materialise(fid);
        }
        self.lazy_records = false;
        self.retiring = false;
    }

    /// Whether this run retires flows when they are done.
    pub fn retires_flows(&self) -> bool {
        self.retiring
    }

    /// Retire flow `fid` if it is done: it finished, its sender has nothing left to do (all
    /// acknowledged, not in its NIC's ring) and none of its packets is left in the fabric.
    /// Nothing can change its row any more, so the row is kept and the record's slot freed.
    #[inline]
    pub(super) fn maybe_retire(&mut self, fid: FlowId) {
        if !self.retiring {
            return;
        }
        let Some(f) = self.flows.get(fid) else {
            return;
        };
        if !f.finished() || !f.sender_stopped() || f.in_nic_ring || f.packets_alive != 0 {
            return;
        }
        // The row's ideal FCT waits for the outputs (`Simulation::flow_rows`): walking the path
        // here would put a route walk, a path allocation and its misses on every retirement.
        let row = FlowRow {
            ideal_fct_ps: IDEAL_LATER,
            ..self.flow_row_now(fid, f)
        };
        self.flows.retire(fid, row);
    }

    /// A packet of flow `fid` left the fabric (delivered or dropped).
    #[inline]
    pub(super) fn packet_gone(&mut self, fid: FlowId) {
        if let Some(f) = self.flows.get_mut(fid) {
            // Wrapping: in a parallel run a packet may leave the fabric in another partition
            // than the one that sent it; the view sums the partitions' counts.
            f.packets_alive = f.packets_alive.wrapping_sub(1);
        }
    }

    /// Flow `fid`'s row in flows.arrow from its record `f`.
    pub fn flow_row(&self, fid: FlowId, f: &Flow) -> FlowRow {
        FlowRow {
            ideal_fct_ps: self.ideal_fct_of(fid, f),
            ..self.flow_row_now(fid, f)
        }
    }

    /// A retired flow's row as the outputs give it: its ideal FCT filled in (retirement leaves
    /// it for now; the route table of a run that retires flows does not change, so the path is
    /// the one the flow had).
    pub fn retired_row(&self, fid: FlowId, r: &FlowRow) -> FlowRow {
        let mut r = r.clone();
        if r.ideal_fct_ps == IDEAL_LATER {
            let streamed = (self.maker.as_ref()).is_some_and(|m| m.is_streamed(fid));
            r.ideal_fct_ps = if streamed {
                // A streamed flow's entry is its row's ends, size and start: made again from
                // its generator it would cost a pass over the stream.
                let init = crate::workload::FlowInit::at(
                    crate::ids::NodeId::new(r.src),
                    crate::ids::NodeId::new(r.dst),
                    r.size_bytes,
                    r.start_ps,
                    r.workload,
                );
                self.ideal_fct_of(fid, &self.flow_from_plan(fid, &init))
            } else {
                self.ideal_fct(fid)
            };
        }
        r
    }

    /// [`World::flow_row`] but for the ideal FCT ([`IDEAL_LATER`]).
    fn flow_row_now(&self, fid: FlowId, f: &Flow) -> FlowRow {
        FlowRow {
            flow_id: fid.get() as u64,
            src: f.src.get(),
            dst: f.dst.get(),
            size_bytes: f.size_bytes,
            // A flow that never started keeps its scheduled start (NEVER = not scheduled).
            start_ps: if f.start == crate::transport::NEVER {
                crate::trace::flows::NOT_SCHEDULED
            } else {
                f.start
            },
            started: f.started,
            finish_ps: f.finished().then_some(f.finish),
            ideal_fct_ps: IDEAL_LATER,
            workload: f.workload,
            packets_sent: f.packets_sent,
            retransmits: f.retransmits,
            drops: f.drops,
            ecn_marks: f.ecn_marks,
            cnps: f.cnps,
            out_of_order_packets: f.out_of_order,
            max_reorder_distance: f.max_reorder,
            unreachable_drops: f.unreachable_drops,
        }
    }

    /// What the outputs need of flow `fid` in any state (started or not, retired or not).
    pub fn flow_brief(&self, fid: FlowId) -> FlowBrief {
        match self.flows.state(fid) {
            FlowState::Live(f) => FlowBrief {
                workload: f.workload,
                start: f.start,
                size_bytes: f.size_bytes,
                num_packets: f.num_packets,
                finish: f.finished().then_some(f.finish),
            },
            FlowState::Retired(r) => FlowBrief {
                workload: r.workload,
                start: r.start_ps,
                size_bytes: r.size_bytes,
                num_packets: crate::transport::segment(r.size_bytes, self.transport.mtu as u64).0,
                finish: r.finish_ps,
            },
            FlowState::Spilled {
                start_ps,
                finish_ps,
                size_bytes,
                workload,
                ..
            } => FlowBrief {
                workload,
                start: start_ps,
                size_bytes,
                num_packets: crate::transport::segment(size_bytes, self.transport.mtu as u64).0,
                finish: Some(finish_ps),
            },
            FlowState::Unborn => {
                let m = self
                    .maker
                    .as_ref()
                    .expect("only runs that retire flows have unborn flows");
                let init = m.init(fid);
                FlowBrief {
                    workload: init.workload,
                    start: self.start_of(fid),
                    size_bytes: init.size_bytes,
                    num_packets: crate::transport::segment(
                        init.size_bytes,
                        self.transport.mtu as u64,
                    )
                    .0,
                    finish: None,
                }
            }
        }
    }
}

/// See [`super::World::flow_brief`].
#[derive(Debug, Clone, Copy)]
pub struct FlowBrief {
    pub workload: u32,
    pub start: crate::units::Time,
    pub size_bytes: u64,
    pub num_packets: u32,
    pub finish: Option<crate::units::Time>,
}

/// The barrier flow `fid` counts toward, if any: from its record in `flows`, or its entry in
/// `maker`'s plan (a flow without a record here).
pub(super) fn completes_of(
    flows: &FlowTable,
    maker: Option<&super::world::FlowMaker>,
    fid: FlowId,
) -> Option<u32> {
    match (flows.get(fid), maker) {
        (Some(f), _) => f.completes,
        (None, Some(m)) => m.init(fid).completes,
        (None, None) => None,
    }
}
