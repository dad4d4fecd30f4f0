//! Run-time plan amendment: change the flow plan while the run is under way.
//!
//! The flow plan is built up front ([`crate::workload::FlowPlan`]); an [`Amendment`] changes it at
//! the current simulated time, between events:
//!
//! - **cancel** flows that have not started: they never start, their packets are never sent, and
//!   they are left out of flows.arrow (and of collectives.arrow's counts). A cancelled flow no
//!   longer counts toward the barrier it would have completed: that barrier waits for one arrival
//!   fewer (and releases now if that was the last one it waited for). A flow that already started
//!   cannot be cancelled (it is reported in [`AmendReport::not_cancelled`] and runs on).
//! - **append** barriers, flows and barrier edges. New barriers get the next ids (the report gives
//!   the first); new flows the next flow ids. A new flow may wait on any barrier, old or new; if
//!   that barrier already released, the flow starts its gap after the release (or now, if that is
//!   already past). A flow `Start::At(t)` starts at `max(t, now)`. A flow's `completes` may name
//!   any barrier that has not released yet (one that has would be released twice): a barrier
//!   that existed before the amendment then waits for one arrival more; a new barrier's size
//!   (given in [`Amendment::barriers`]) counts every arrival it waits for, as in a
//!   [`crate::workload::FlowPlan`]. Edges from a barrier that already released deliver their
//!   arrival `delay` after now; an edge to an existing barrier adds an arrival to it too.
//!
//! Every per-flow array of the world grows with the new flows (one allocation per amendment,
//! never per packet). The header entropy of new flows (UDP source port, flow label) comes from
//! the run's own stream (`RngStream::Amendments`), drawn in flow order, so a run with the same
//! seed and the same amendments at the same times is bit-for-bit the same. A run without
//! amendments draws nothing from it and is unchanged.
//!
//! Order inside one amendment: barriers are added, then flows (their `completes` counted), then
//! edges, then the cancellations are applied. So a collective call can be replaced by cancelling
//! its flows and appending new ones that complete the same barrier: the barrier gains the new
//! flows before it loses the old ones, and never releases in between.

use super::world::{flow_pxn, new_flow, Barrier, FlowPxn, World};
use crate::ids::{FlowId, IdVec};
use crate::rng::{Rng, RngStream};
use crate::scenario::{RoutingSpec, TransportSpec};
use crate::transport::NEVER;
use crate::units::Time;
use crate::workload::collective::in_network::InNetworkPlan;
use crate::workload::{BarrierEdge, FlowInit, Start};

/// A change of the flow plan at the current simulated time (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Amendment {
    /// Flows to cancel (they must not have started).
    pub cancel: Vec<FlowId>,
    /// Sizes of new barriers (arrivals each waits for), numbered from `AmendReport::first_barrier`.
    pub barriers: Vec<u32>,
    /// New flows, numbered from `AmendReport::first_flow`.
    pub flows: Vec<FlowInit>,
    /// New barrier-to-barrier arrivals.
    pub edges: Vec<BarrierEdge>,
}

/// What an amendment did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AmendReport {
    /// The id of the first appended flow (the others follow).
    pub first_flow: u32,
    /// The id of the first appended barrier.
    pub first_barrier: u32,
    /// Flows cancelled.
    pub cancelled: u32,
    /// Flows asked to be cancelled that had already started (or were cancelled before).
    pub not_cancelled: Vec<FlowId>,
}

/// An amendment the world cannot apply: nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmendError(pub String);

impl std::fmt::Display for AmendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AmendError {}

/// The amendment part of the World: what new flows need and which flows were cancelled.
pub(super) struct Amends {
    routing: RoutingSpec,
    transport: TransportSpec,
    pxn_cluster: bool,
    /// Header entropy of appended flows (drawn only when flows are appended).
    rng: Rng,
    /// Per flow: cancelled (empty until the first cancellation).
    cancelled: Vec<bool>,
    pub count: u64,
}

impl Amends {
    pub fn new(
        routing: &RoutingSpec,
        transport: &TransportSpec,
        pxn_cluster: bool,
        seed: u64,
    ) -> Self {
        Self {
            routing: *routing,
            transport: *transport,
            pxn_cluster,
            rng: RngStream::Amendments.rng(seed),
            cancelled: Vec::new(),
            count: 0,
        }
    }

    pub fn routing(&self) -> &RoutingSpec {
        &self.routing
    }

    pub fn transport(&self) -> &TransportSpec {
        &self.transport
    }

    /// Congestion-control settings changed by a controller (for flows appended later too).
    pub fn set_cc(&mut self, cc: crate::scenario::CongestionControl) {
        self.transport.cc = cc;
    }

    /// Whether flow `fid` was cancelled.
    #[inline]
    pub fn is_cancelled(&self, fid: FlowId) -> bool {
        self.cancelled.get(fid.index()).copied().unwrap_or(false)
    }
}

impl World {
    /// Whether flow `fid` was cancelled by an amendment.
    pub fn is_cancelled(&self, fid: FlowId) -> bool {
        self.amends.is_cancelled(fid)
    }

    /// Flows cancelled so far.
    pub fn flows_cancelled(&self) -> u64 {
        self.amends.count
    }

    /// Apply `a` now (see the module docs). Checked first: on an error nothing changed.
    pub fn amend(&mut self, a: &Amendment) -> Result<AmendReport, AmendError> {
        self.amend_with(a, None)
    }

    /// [`World::amend`], where the appended flows (one per rank, src = dst) may be an in-network
    /// call on tree `.1` of the plan `.0` (see `engine::in_network`).
    pub(crate) fn amend_with(
        &mut self,
        a: &Amendment,
        in_network: Option<(&InNetworkPlan, u32, crate::config::CollectiveOp)>,
    ) -> Result<AmendReport, AmendError> {
        self.amend_records(a, in_network, true, None)
    }

    /// [`World::amend`] by a feature that names only flows it knows the state of (an elastic
    /// job's re-plan: its ops' flows, from their [`super::jobs::Fate`]s): a run that retires
    /// flows goes on retiring them, and the appended flows get their records as they start.
    pub(super) fn amend_lazily(&mut self, a: &Amendment) -> Result<AmendReport, AmendError> {
        self.amend_records(a, None, false, None)
    }

    /// [`World::amend_lazily`] in a parallel run's view, which runs no event: it records what
    /// `a` appends and cancels (for the outputs), not the starts it schedules, the barriers'
    /// links or the arrivals its cancellations make (the partitions run those, and the view
    /// folds what they did). Most of the view's share of a 1,024-GPU elastic job's re-plans,
    /// which it applies while the partitions wait (2026-12-05).
    ///
    /// `pxn`: a partition's PXN hops, amended alike (copied from there, not worked out again:
    /// a GPU cluster's appended flows, every one's first hop at both ends).
    pub(super) fn amend_view(
        &mut self,
        a: &Amendment,
        pxn: &IdVec<FlowId, FlowPxn>,
    ) -> Result<AmendReport, AmendError> {
        self.amend_records(a, None, false, Some(pxn))
    }

    /// [`World::amend_with`]; `keep_all`: every flow keeps its record from now on (an amended
    /// plan from outside may name any flow, at any time); `view_pxn`: this world runs no events
    /// (a parallel run's view, [`World::amend_view`]), and its PXN hops are those.
    fn amend_records(
        &mut self,
        a: &Amendment,
        in_network: Option<(&InNetworkPlan, u32, crate::config::CollectiveOp)>,
        keep_all: bool,
        view_pxn: Option<&IdVec<FlowId, FlowPxn>>,
    ) -> Result<AmendReport, AmendError> {
        let runs_events = view_pxn.is_none();
        let nb_old = self.barriers.len();
        let nb = nb_old + a.barriers.len();
        let nf_old = self.flows.len();
        for (i, f) in a.flows.iter().enumerate() {
            if let Start::After { barrier, .. } = f.start {
                if barrier as usize >= nb {
                    return Err(AmendError(format!(
                        "flows[{i}]: waits on barrier {barrier}, which does not exist"
                    )));
                }
            }
            if let Some(b) = f.completes {
                let released = self
                    .barriers
                    .get(b as usize)
                    .is_some_and(|b| b.released_at != NEVER);
                if b as usize >= nb || released {
                    return Err(AmendError(format!(
                        "flows[{i}]: completes barrier {b}, which {}",
                        if released {
                            "already released"
                        } else {
                            "does not exist"
                        }
                    )));
                }
            }
            let n = self.fabric.num_nodes;
            for (what, node) in [("src", f.src), ("dst", f.dst)] {
                if node.get() >= n || !self.fabric.is_host(node) {
                    return Err(AmendError(format!(
                        "flows[{i}].{what}: {node} is not an endpoint"
                    )));
                }
            }
            if (f.src == f.dst && in_network.is_none()) || f.size_bytes == 0 {
                return Err(AmendError(format!(
                    "flows[{i}]: a flow needs two distinct endpoints and at least one byte"
                )));
            }
        }
        for (i, e) in a.edges.iter().enumerate() {
            if e.from as usize >= nb || e.to as usize >= nb {
                return Err(AmendError(format!("edges[{i}]: barrier out of range")));
            }
            if self
                .barriers
                .get(e.to as usize)
                .is_some_and(|b| b.released_at != NEVER)
            {
                return Err(AmendError(format!(
                    "edges[{i}]: barrier {} already released",
                    e.to
                )));
            }
        }
        for &fid in &a.cancel {
            if fid.index() >= nf_old {
                return Err(AmendError(format!("cancel: flow {fid} does not exist")));
            }
        }

        if keep_all {
            self.keep_all_flows();
        }
        // Appended flows get their records when they start (from `FlowMaker::appended`).
        let lazy = self.lazy_records;
        let now = self.now;
        // A partition of a parallel run (amended alike with every other, `Parallel::amend`)
        // starts only its senders' flows and delivers only its barriers' arrivals; cancellations
        // are counted once, in the first.
        let part = self.partition.as_ref();
        let counts = part.is_none_or(|p| p.is_first());
        let starts: Vec<bool> = (a.flows.iter())
            .map(|f| part.is_none_or(|p| p.starts_flow(f.src)))
            .collect();
        let runs = |b: u32| part.is_none_or(|p| p.runs_barrier(b));
        let edges_run: Vec<bool> = a.edges.iter().map(|e| runs(e.to)).collect();
        let cancel_runs: Vec<bool> = (a.cancel.iter())
            .map(|&fid| self.completes_of(fid).is_some_and(runs))
            .collect();
        // Barriers.
        self.barriers.extend(a.barriers.iter().map(|&n| Barrier {
            remaining: n,
            dead: false,
            released_at: NEVER,
            latest: 0,
        }));
        // Flows: every per-flow array grows once.
        let added = a.flows.len();
        self.flows.reserve(added, !lazy);
        if lazy {
            let m = self.maker.as_mut().expect("a run whose records are lazy");
            m.appended.reserve(added);
            m.appended_entropy.reserve(added);
        }
        // (A view's too: the ideal completion times in the outputs take the relayed path.)
        let pxn_hops = self.amends.pxn_cluster;
        if pxn_hops {
            // (Its own copy from now on, if another world shares it.)
            let pxn = std::sync::Arc::make_mut(&mut self.pxn);
            // Streamed flows, whose ids come between the plan's and these, have no PXN hops
            // (`PlanDerived`): their entries are empty, so that these flows' are at their ids.
            // (Until 2026-12-05 they were not there: an amended flow read another's hops, and
            // a GPU cluster's switch counted its shared buffer below zero.)
            if pxn.len() < nf_old {
                pxn.resize(nf_old, [None; 2]);
            }
            pxn.reserve(added);
        }
        // Starts are scheduled once the flows are all known (an in-network call's included).
        let mut starting: Vec<(Time, FlowId)> = Vec::new();
        for (k, f) in a.flows.iter().enumerate() {
            let fid = FlowId::new((nf_old + k) as u32);
            let sport = 49152 + self.amends.rng.below(16384) as u16;
            let label = self.amends.rng.below(1 << 20) as u32;
            // (A run that makes records as flows start makes this one's then, from its entry:
            // here only its PXN hops, if the cluster relays, and the view copies those.)
            let (routing, transport) = (&self.amends.routing, &self.amends.transport);
            let made = (!lazy).then(|| new_flow(&self.fabric, routing, transport, f, sport, label));
            if pxn_hops {
                let copied = view_pxn.and_then(|p| p.get(fid).copied());
                let pxn = match (&made, copied) {
                    (Some((_, pxn)), _) => *pxn,
                    (None, Some(pxn)) => pxn,
                    (None, None) => flow_pxn(&self.fabric, routing, f, sport, label),
                };
                std::sync::Arc::make_mut(&mut self.pxn).push(pxn);
            }
            match made {
                Some((flow, _)) => {
                    self.flows.push(flow);
                }
                None => {
                    let m = self.maker.as_mut().expect("a run whose records are lazy");
                    m.append(fid, *f, (sport, label));
                    self.flows.push_unborn();
                }
            }
            // A barrier that existed before gains the flow's arrival; a new one has its size.
            if let Some(b) = f.completes.filter(|&b| (b as usize) < nb_old) {
                self.barriers[b as usize].remaining += 1;
            }
            match f.start {
                _ if !runs_events => {}
                Start::At(t) if starts[k] => starting.push((t.max(now), fid)),
                Start::At(_) => {}
                // (The barriers this amendment makes get their waiting flows below.)
                Start::After { barrier, .. } if barrier as usize >= nb_old => {}
                Start::After { barrier, gap } => {
                    let released_at = self.barriers[barrier as usize].released_at;
                    if released_at == NEVER {
                        self.links.waiting_mut(barrier).push((fid, gap));
                    } else if starts[k] {
                        let at = released_at.saturating_add(gap).max(now);
                        starting.push((at, fid));
                    }
                }
            }
        }
        // The links of the barriers made here, flat (in flow and edge order, as pushed one by
        // one): a new barrier has not released.
        let made_waits = (a.flows.iter().enumerate()).filter_map(|(k, f)| match f.start {
            Start::After { barrier, gap } if barrier as usize >= nb_old => {
                Some((barrier, (FlowId::new((nf_old + k) as u32), gap)))
            }
            _ => None,
        });
        let made_thens = (a.edges.iter())
            .filter(|e| e.from as usize >= nb_old)
            .map(|e| (e.from, (e.to, e.delay)));
        if runs_events {
            let made = a.barriers.len() as u32;
            (self.links).add_made(nb_old as u32, made, made_waits, made_thens);
        }
        if let Some((plan, tree, op)) = in_network {
            let new: Vec<FlowId> = (nf_old..self.flows.len())
                .map(|i| FlowId::new(i as u32))
                .collect();
            self.inr_add_live_call(plan, tree, &new, op);
        } else if let Some(inr) = &mut self.in_network {
            inr.grow_flows(self.flows.len());
        }
        for (at, fid) in starting {
            self.push_flow_start(at, fid);
        }
        for i in nf_old..self.flows.len() {
            let fid = FlowId::new(i as u32);
            if let Some(rate) = self.flows.get(fid).map(|f| f.rate_bps) {
                self.cc.fresh(self.flows.slot(fid), rate);
            }
        }
        if let Some(c) = &mut self.credits {
            c.grow(self.flows.len());
        }
        self.tracer.grow_flows(self.flows.len());
        self.stats.flows_total += added as u64;
        // Edges.
        for (e, &runs) in a.edges.iter().zip(&edges_run) {
            if (e.to as usize) < nb_old {
                self.barriers[e.to as usize].remaining += 1;
            }
            if e.from as usize >= nb_old || !runs_events {
                // (Linked above, or not here.)
            } else if self.barriers[e.from as usize].released_at == NEVER {
                self.links.then_mut(e.from).push((e.to, e.delay));
            } else if runs {
                self.pending_arrivals += 1;
                self.push_barrier_arrival(now.saturating_add(e.delay), e.to);
            }
        }
        // Cancellations.
        let mut report = AmendReport {
            first_flow: nf_old as u32,
            first_barrier: nb_old as u32,
            ..AmendReport::default()
        };
        if !a.cancel.is_empty() && self.amends.cancelled.len() < self.flows.len() {
            self.amends.cancelled.resize(self.flows.len(), false);
        }
        // Every flow is marked first, then their barriers get the arrivals: a barrier that
        // releases then schedules no start for a flow cancelled with it (`World::never_starts`:
        // one at a time, a 1,024-GPU elastic job's re-plans scheduled 470,000 starts that came
        // to nothing, most of its merged windows' events on threads, until 2026-12-05).
        let mut arrive: Vec<FlowId> = Vec::new();
        for (&fid, &runs) in a.cancel.iter().zip(&cancel_runs) {
            let started = self.has_started(fid);
            if started || self.amends.cancelled[fid.index()] {
                report.not_cancelled.push(fid);
                continue;
            }
            self.amends.cancelled[fid.index()] = true;
            self.inr_flow_cancelled(fid);
            if crate::transport::window::clear(&mut self.unstarted_long, fid.index() as u32) {
                self.long_flows -= 1; // counted as one that cannot finish within a window
            }
            report.cancelled += 1;
            if counts {
                self.amends.count += 1;
                self.flows_settled += 1;
            }
            if runs && runs_events {
                arrive.push(fid);
            }
        }
        for fid in arrive {
            if let Some(b) = self.completes_of(fid) {
                let b = b as usize;
                if self.barriers[b].released_at == NEVER && !self.barriers[b].dead {
                    if self.barriers[b].remaining == 1 {
                        self.barrier_arrive(b as u32);
                    } else {
                        self.barriers[b].remaining -= 1;
                    }
                }
            }
        }
        if report.cancelled > 0 && runs_events {
            let cancelled = &self.amends.cancelled;
            // The barriers the cancelled flows wait on: from their plan entries where this world
            // keeps them (a run that makes records as flows start), else every barrier. (A scan
            // of every barrier's list at each of an elastic job's re-plans was 2 % of a
            // 1,024-GPU run.)
            let waited_on: Vec<u32> = match self.maker.as_ref().filter(|_| lazy) {
                Some(m) => {
                    let mut v: Vec<u32> = (a.cancel.iter())
                        .filter(|f| cancelled[f.index()])
                        .filter_map(|&f| match m.init(f).start {
                            Start::After { barrier, .. } => Some(barrier),
                            Start::At(_) => None,
                        })
                        .collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                }
                None => (0..self.barriers.len() as u32).collect(),
            };
            for b in waited_on {
                let waits = |l: &[(FlowId, Time)]| l.iter().any(|&(f, _)| cancelled[f.index()]);
                if self.barriers[b as usize].released_at == NEVER && waits(self.links.waiting(b)) {
                    (self.links).retain_waiting(b, |f| cancelled[f.index()]);
                }
            }
        }
        self.stats.flows_cancelled = self.amends.count;
        Ok(report)
    }
}
