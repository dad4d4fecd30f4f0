//! The parallel engine (`threads = N`): the fabric split into partitions, one thread each,
//! running conservative windows of the lookahead (the shortest link delay) in lockstep.
//!
//! Each partition is a whole [`World`] built from the same scenario that runs only the events of
//! the nodes it owns: a packet sent on a link to another partition's node leaves through the
//! outbox (`World::send_remote`) and is delivered, between two windows, into the far partition's
//! copy of that link, arriving at the very time it would have in one world. No event can reach
//! another partition sooner than one link delay, so a window of that length needs nothing from
//! the others. The order of events depends only on the events (`engine::queue`), the random
//! draws are per switch (`Router::rng`, `Switches::ecn_rng`), flows start at their sender's
//! partition and are received at the receiver's, and a run that waits for every flow looks only
//! at window ends: so the outputs are byte-identical to one world's, for any number of threads.
//!
//! Between windows the partitions' results are folded into the view world (the Simulation's
//! `world`, which never runs): every flow's record from its sender's and receiver's copies, the
//! counters summed, each port's record from its owner. The outputs are written from the view.
//!
//! PFC runs partitioned: pause frames are packets, and the deadlock check, which reads every
//! switch, runs across the partitions at its place in the order (`deadlock_check`); windows are
//! then no longer than the check period, so a check is asked for at least a window ahead. HPCC's INT
//! records travel with their packets ([`Parcel`]). Flows that wait for flows (collectives, incast
//! rounds) wait at barriers: one partition runs a barrier whose flows all finish and start in it
//! (a rank's next step), every partition counts one whose flows are spread ([`barrier_homes`]),
//! told of the others' arrivals at window ends, which is in time when what it releases starts a
//! window later at the soonest. One that releases sooner (iterations back to back) is told at
//! once: the windows in which it may release (`engine::tight`) run merged, one thread running
//! every partition's events in one world's order (`run_merged`).
//!
//! Faults run partitioned: every partition applies each fault to its copy of the fabric at its
//! place in the order (routing's tables, a link's state), and each drops the packets of a
//! failed link it holds: the near end's partition what is queued and what it sent in this
//! window (still in its outbox: `World::lose_wire_of`), the far end's what earlier windows
//! delivered onto the wire; the near end writes all their drop rows. A flow cut off for good
//! is given up on by its sender's partition, with the flows waiting for it, unless its
//! receiver's partition told it the flow finished there (`Mail::news`): a barrier that
//! other partitions count too dies there at the window's end (`Outbox::dead`).
//!
//! Windows may be longer than the shortest link where the links between partitions are longer
//! (a GPU cluster's scale-up links stay inside a partition): see `Parallel::lookahead` for
//! the rules that keep one world's order, decided on the shortest link's grid.
//!
//! Optical circuit switching runs partitioned the same way: every partition reconfigures its
//! copy of the circuits at its place in the order, a circuit going dark drops what each holds of
//! it (as a failed link), and a circuit coming up may join two partitions (`World::wire_port`
//! marks the port remote). A cable's delay does not change with its circuit, so the lookahead
//! holds.
//!
//! Between windows the view folds only the flow records some partition touched since the last
//! fold (`FlowTable::track_touches`). In a run that retires flows (`engine::flows`) the records
//! stay lazy: a partition makes one where the flow starts or a packet of it first comes in
//! (`receive_remote`), the view retires a flow whose merged record says it is done for good, as
//! one world would, and the partitions then forget theirs (`fold_into`), so each holds the flows
//! in progress it has seen. The packets of a flow alive in the fabric are counted modulo 2^32 in
//! each partition (one that delivers a packet another sent counts -1) and summed by the view.
//!
//! Step workloads run partitioned as the flows and barriers they are: an op's start and end are
//! its barriers' release times, folded into the view from where each ran.
//!
//! Live control runs partitioned: a control boundary is a window's end (`Parallel::run`'s
//! limit), the telemetry is folded from the partitions (`Parallel::port_counters`), and each
//! action is applied to the view and alike to every partition (`Simulation::live`); a
//! re-planned call is an amendment every partition applies alike (`Parallel::amend`).
//!
//! Jobs that stall or restart on failures run partitioned: every partition counts their ops'
//! barriers and runs merged the windows in which one may release (`engine::tight`), so each
//! keeps the whole job's state alike; the view takes it from the first. An elastic job's
//! re-plan at a re-formation's end reads its op flows' fates from every partition: the window
//! holding it runs merged, and each partition re-plans from one snapshot of them
//! ([`install_fates`]); the view applies the re-plans from the first partition (`fold_into`).
//!
//! In-network reduction runs partitioned: each switch's engine is its partition's, and the
//! calls' shared state (which call each tree runs, the calls waiting, the contexts held) is kept
//! alike in every partition. A change to it is told to the others at once in a window run
//! merged (`in_network::Gate`); the windows in which a call may start ([`Part::inr_pending`],
//! [`in_network_feeders`]), or end while another waits, run merged.
//!
//! The partitions' threads are a pool kept for the whole run. Where they do not pay (windows of
//! a few events each, or a meeting stretched by the machine's scheduling), the windows run on
//! one thread instead, the same steps one partition after another (`serial`): which way is
//! measured as the run goes (`engine::pace`), and changes nothing but the speed.
//!
//! Not partitioned (refused with a clear error, see [`unsupported`]): what reads state across
//! the fabric at every decision (UGAL-G).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::amend::Amendment;
use super::in_network::Gate;
use super::jobs::Fate;
use super::pace::{Pace, Watch};
use super::queue::{key_ahead, Event};
use super::sampling::WaitCandidates;
use super::tight::{tight_barriers, Tight};
use super::world::{World, DEADLOCK_CHECK_PS};
use super::RunStats;
use crate::cc::IntStack;
use crate::ids::{FlowId, IdVec, NodeId, PortId};
use crate::packet::{Packet, PacketId};
use crate::scenario::{Scenario, StopAt};
use crate::switch::pfc;
use crate::topology::Fabric;
use crate::trace::stream::Place;
use crate::transport::NEVER;
use crate::units::Time;
use crate::workload::FlowInit;

/// Events per call of [`Parallel::run`] when trace rows are held: a partition holds at most
/// the rows of that many events (a few per event, and a sample's one per port) between the
/// view's takings.
pub const TRACED_SLICE_EVENTS: u64 = 1 << 16;

/// What long windows need from the scenario (`Parallel::lookahead`): the longest a window may
/// be (with PFC, the deadlock check's period) and the MTU's payload.
#[derive(Debug, Clone, Copy)]
pub struct LongWindows {
    pub cap: Time,
    pub mtu: u64,
}

/// A parallel run's windows so far (`Simulation::parallel_windows`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Windows {
    pub count: u64,
    pub merged: u64,
    /// Windows that ended beyond the grid point after their start.
    pub long: u64,
    /// Windows whose partitions ran in turn on one thread (`engine::pace`: where that was
    /// measured to be faster; the rest ran on threads). A measure of the machine, not of the
    /// run: it varies from run to run, the outputs do not.
    pub on_one_thread: u64,
    /// The longest a window may be (`Parallel::lookahead`) ...
    pub lookahead: Time,
    /// ... and the shortest link's grid (`World::window_ps`).
    pub grid: Time,
}

/// A packet on its way to another partition: the link it is on (its egress port) and the packet
/// (whose `arrive` says when it reaches the far end), and, when one-way latency is measured
/// (`trace.latency`), when it left its source NIC. A transfer `lost` to a link fault after it
/// was sent is dropped here; there it is only its (stale) arrival event, which one world pops.
#[derive(Debug, Clone, Copy)]
pub(super) struct Transfer {
    pub port: PortId,
    pub packet: Packet,
    pub sent: Time,
    pub lost: bool,
}

/// The packets a partition sent one other partition in a window, and, when the run stamps INT
/// (HPCC), each one's records (in the same order). Handed over whole: the mailbox (emptied by
/// its last reading) and the parcel swap their lists, so no packet is copied between them.
#[derive(Debug, Default)]
pub(super) struct Parcel {
    pub packets: Vec<Transfer>,
    pub int: Vec<IntStack>,
}

/// What a partition tells the others in a window besides its packets (`Part::parcels`), kept
/// until the window's end: the arrivals at barriers all partitions count that flows finishing
/// here made (time, barrier), the barriers that died here, the credits of flows started here,
/// and the changes to in-network calls' shared state.
#[derive(Debug, Default)]
pub(super) struct Outbox {
    pub arrivals: Vec<(Time, u32)>,
    /// Barriers that other partitions count too and that died here (a flow they wait for was
    /// given up on, `World::give_up`).
    pub dead: Vec<u32>,
    /// Receiver-driven credits: flows that started here toward another partition's host, with
    /// what their receiver will owe them and their unsolicited packets (`Credits::owed`,
    /// `unsolicited_left`), which the sender decides at the start. Their first packet reaches
    /// the receiver a link delay later at the soonest: after this window's mail.
    pub credits: Vec<(FlowId, u32, u32)>,
    /// In-network calls: what changed their shared state here (`in_network::Gate`), in order.
    pub inr: Vec<Gate>,
}

/// What one partition sent another in a window: its parcel, what its outbox tells every
/// other (`told`: the credits only of flows to this one's hosts), the flows of tight barriers
/// that started there (`Tight::flow_started`), and the news of flows the receiving partition
/// sends or receives: finished there, or given up on there (`Part::tell`).
#[derive(Debug, Default)]
pub(super) struct Mail {
    pub parcel: Parcel,
    pub told: Outbox,
    pub started: Vec<u32>,
    pub news: Vec<(FlowId, FlowNews)>,
}

/// What one partition tells another of a flow (`Mail::news`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FlowNews {
    /// It finished at its receiver here: its sender's timeout gives up on it no more.
    Finished,
    /// Its sender here gave up on it: its receiver no longer counts it as missing packets.
    GivenUp,
}

/// A world's partition: which it is, and the packets it sent to others during this window.
#[derive(Debug)]
pub(super) struct Part {
    me: u16,
    /// The partition of each node.
    owner: Arc<IdVec<NodeId, u16>>,
    /// The partition that runs each barrier, or [`MIRRORED`] (see [`barrier_homes`]).
    barrier_home: Arc<Vec<u16>>,
    /// What this partition tells the others (its packets go in `parcels`; flows started for
    /// tight barriers and news of flows are kept in `tight` and `news_out`).
    pub outbox: Outbox,
    /// Per partition: the packets sent to it in this window (none to this one).
    pub parcels: Vec<Parcel>,
    /// Packets sent to and received from other partitions so far (conservation).
    pub moved_out: u64,
    pub moved_in: u64,
    /// The PFC deadlock check this partition asked for in this window (NEVER: none): one world
    /// would have scheduled it; the engine runs it across all partitions.
    pub deadlock_check_at: Time,
    /// With faults, per port toward another partition: the packets sent on it that are still
    /// on the wire (a copy; the far end's partition has them). A failing link's near end writes
    /// their drops in packets.arrow, with its queue as one world saw it, and a delay fault's end
    /// asks whether the link still carries packets.
    pub on_wire: Vec<std::collections::VecDeque<Packet>>,
    /// The barriers whose release a window may need to run merged for (`engine::tight`).
    pub tight: Tight,
    /// The barriers released here since the view last folded the partitions.
    pub released: Vec<u32>,
    /// In-network calls (`engine::in_network`): the times of this partition's pending events
    /// that may start one of their flows (its start, or an arrival at a barrier whose release
    /// may start one, [`in_network_feeders`]). A call starting changes state every partition
    /// keeps alike, so a window that holds such an event anywhere runs merged.
    pub inr_pending: BinaryHeap<Reverse<Time>>,
    /// Per barrier: whether its release may start an in-network flow ([`in_network_feeders`]).
    pub inr_feeders: Arc<Vec<bool>>,
    /// Every partition is at this point of one world's order: a window run merged, or a
    /// control boundary (where changes to the in-network calls' state may happen).
    pub merged: bool,
    /// What became of flows here, for the partition to tell (`Part::tell`).
    news_out: Vec<(FlowId, u16, FlowNews)>,
    /// Flows sent from here that finished at their receiver in another partition (a bit per
    /// flow id): a sender's timeout gives up on none of them, as one world's, whose one record
    /// says the flow finished, gives up on none (`World::give_up`).
    finished_elsewhere: Vec<u64>,
    /// Flows received here that their sender's partition gave up on (a bit per flow id).
    given_up_elsewhere: Vec<u64>,
    /// Once no fault event is left: the flows sent from here whose destination is cut off, and
    /// which a timeout may still give up on (`World::earliest_give_up`; None before).
    cut_off: Option<Vec<FlowId>>,
    /// While an elastic job's re-plan runs here (in a window run merged): the fates of the
    /// job's op flows, taken from every partition just before the first ran it
    /// ([`install_fates`]), so that every partition re-plans alike, as one world does.
    pub fates: Option<Arc<Vec<(FlowId, Fate)>>>,
    /// The windows' length while the run cannot end within one (`Parallel::lookahead`): which
    /// of an elastic re-plan's appended barriers are tight (`World::track_appended_flows`).
    lookahead: Time,
}

impl Part {
    /// Whether this is partition 0 (which counts what every partition does at once).
    #[inline]
    pub fn is_first(&self) -> bool {
        self.me == 0
    }

    /// Whether node `n` is this partition's (its ports' samples are taken here).
    #[inline]
    pub fn owns(&self, n: NodeId) -> bool {
        self.owner[n] == self.me
    }

    /// Whether a flow sent by `src` starts here (its sender's partition).
    #[inline]
    pub fn starts_flow(&self, src: NodeId) -> bool {
        self.owner[src] == self.me
    }

    /// Whether barrier `b`'s arrivals happen here: it is this partition's, or every one's.
    #[inline]
    pub fn runs_barrier(&self, b: u32) -> bool {
        let home = self.barrier_home[b as usize];
        home == self.me || home == MIRRORED
    }

    /// Whether barrier `b`'s release may start an in-network call's flow.
    #[inline]
    pub fn feeds_in_network(&self, b: u32) -> bool {
        self.inr_feeders.get(b as usize).copied().unwrap_or(false)
    }

    /// Barrier `b` died here: if another partition counts or runs it, tell the others.
    pub fn tell_dead(&mut self, b: u32) {
        if self.barrier_home[b as usize] != self.me {
            self.outbox.dead.push(b);
        }
    }

    /// A flow finishing here arrived at barrier `b` at `now`: if every partition counts `b`,
    /// tell the others.
    #[inline]
    pub fn tell_arrival(&mut self, now: Time, b: u32) {
        if self.barrier_home[b as usize] == MIRRORED {
            self.outbox.arrivals.push((now, b));
        }
    }

    /// What became of flow `fid` here: if its other end (`node`: its sender when it finished
    /// here, its receiver when it was given up on here) is another partition's, tell it (at the
    /// window's end, or at once in a window run merged). A flow whose acknowledgements are cut
    /// off finishes at its receiver while its sender still waits: a sender's partition that
    /// gave up on it at a timeout would count it twice, and end its barriers, which one world
    /// does not. A receiver's partition told of a give-up counts neither the packets the flow
    /// misses (`World::long_flows`: they never come) nor its finish.
    #[inline]
    pub fn tell(&mut self, fid: FlowId, node: NodeId, what: FlowNews) {
        let to = self.owner[node];
        if to != self.me {
            self.news_out.push((fid, to, what));
        }
    }

    /// Whether flow `fid` (received here) was given up on by its sender's partition, as told
    /// so far.
    #[inline]
    pub fn given_up_elsewhere(&self, fid: FlowId) -> bool {
        crate::transport::window::get(&self.given_up_elsewhere, fid.index() as u32)
    }

    /// Whether flow `fid` (sent from here) finished at its receiver in another partition, as
    /// told so far.
    #[inline]
    pub fn finished_elsewhere(&self, fid: FlowId) -> bool {
        crate::transport::window::get(&self.finished_elsewhere, fid.index() as u32)
    }

    /// Whether flows starting here are checked for a destination cut off for good (once no
    /// fault event is left, `World::earliest_give_up`).
    #[inline]
    pub fn notes_cut_offs(&self) -> bool {
        self.cut_off.is_some()
    }

    /// A fault event is to come (a controller's, an optical switch's): what is cut off may
    /// change, and is found anew once none is left.
    fn forget_cut_offs(&mut self) {
        self.cut_off = None;
    }

    fn mark_finished_elsewhere(&mut self, fid: FlowId) {
        crate::transport::window::set(&mut self.finished_elsewhere, fid.index() as u32);
    }

    fn mark_given_up_elsewhere(&mut self, fid: FlowId) {
        crate::transport::window::set(&mut self.given_up_elsewhere, fid.index() as u32);
    }
}

/// Every partition counts this barrier's arrivals (and releases it alike): see [`barrier_homes`].
pub const MIRRORED: u16 = u16::MAX;

/// Which partition runs each barrier of `plan`, under the node map `owner`: the one where all
/// of its flows finish (their receivers') and start (their senders'), and where all the
/// barriers it chains to run; otherwise ([`MIRRORED`]) every partition counts its arrivals and
/// releases it (each starting its own flows), told of the arrivals other partitions' flows make
/// at the ends of windows. A collective's per-rank steps (a rank sends once it has received) are
/// one partition's; an iteration's end, which every rank's last step reaches, is mirrored.
pub fn barrier_homes(plan: &crate::workload::FlowPlan, owner: &IdVec<NodeId, u16>) -> Vec<u16> {
    let mut home = vec![UNSET; plan.barrier_sizes.len()];
    let mut join = |b: u32, p: u16| join_home(&mut home[b as usize], p);
    for f in plan.flows.iter() {
        if let Some(b) = f.completes {
            join(b, owner[f.dst]);
        }
        if let crate::workload::Start::After { barrier, .. } = f.start {
            join(barrier, owner[f.src]);
        }
    }
    for &(_, b) in &plan.barrier_timers {
        home[b as usize] = MIRRORED; // (every partition has the timer's event)
    }
    // A job that reacts to failures keeps its state (progress, checkpoints, freezes) from its
    // ops' starts and ends: every partition sees them all, so each keeps the same state.
    for j in &plan.jobs {
        home[j.op_barriers()].fill(MIRRORED);
    }
    // A release that may start an in-network call changes what every partition keeps alike.
    for (h, feeds) in home.iter_mut().zip(in_network_feeders(plan)) {
        if feeds {
            *h = MIRRORED;
        }
    }
    for h in &mut home {
        if *h == UNSET {
            *h = MIRRORED; // only chained: it happens wherever its chain does
        }
    }
    // A barrier one partition runs releases its chained arrivals there only: they must be its.
    loop {
        let mut changed = false;
        for e in &plan.barrier_edges {
            let (from, to) = (home[e.from as usize], home[e.to as usize]);
            if from != MIRRORED && to != from {
                home[e.from as usize] = MIRRORED;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    home
}

/// A barrier whose home is not known yet ([`barrier_homes`]).
const UNSET: u16 = u16::MAX - 1;

/// A flow of partition `p` finishes at or starts from a barrier whose home is `h` so far.
fn join_home(h: &mut u16, p: u16) {
    *h = if *h == UNSET || *h == p { p } else { MIRRORED };
}

/// Per barrier of `plan`: whether its release may start a flow of an in-network call, itself
/// (the flow waits for it) or through the barriers it chains to. Their releases must happen at
/// their place in one world's order in every partition: they are counted everywhere
/// ([`barrier_homes`]) and run merged when they may release (`engine::tight`).
pub fn in_network_feeders(plan: &crate::workload::FlowPlan) -> Vec<bool> {
    let mut feeds = vec![false; plan.barrier_sizes.len()];
    let Some(inr) = &plan.in_network else {
        return feeds;
    };
    for c in &inr.calls {
        for &f in &c.flows {
            if let crate::workload::Start::After { barrier, .. } = plan.flows[f as usize].start {
                feeds[barrier as usize] = true;
            }
        }
    }
    loop {
        let mut changed = false;
        for e in &plan.barrier_edges {
            if feeds[e.to as usize] && !feeds[e.from as usize] {
                feeds[e.from as usize] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    feeds
}

/// The partitions of a parallel run.
pub(super) struct Parallel {
    pub parts: Vec<World>,
    /// The partition of each node.
    pub owner: Arc<IdVec<NodeId, u16>>,
    /// The partition that runs each barrier (see [`barrier_homes`]).
    pub homes: Arc<Vec<u16>>,
    /// The windows' length while the run cannot end within one (`Parallel::lookahead`; the
    /// shortest link delay without long windows).
    lookahead: Time,
    /// No window is long past this time (0: none is, `keep_the_grid`).
    long_until: Time,
    /// The windows' schedule, kept from one [`Parallel::run`] call to the next.
    clock: Clock,
    /// The windows run on one thread (faster, as measured: see `engine::pace`).
    serial: bool,
    /// The threads of all but the first partition, kept from one [`Parallel::run`] call to the
    /// next: a thread started afresh at each control boundary may start on its starter's core,
    /// and two threads on one core take turns only a scheduler slice at a time.
    pool: rayon_core::ThreadPool,
    pub finished: bool,
    /// The last [`Parallel::run`] stopped at its limit.
    pub reached_limit: bool,
}

/// Why a scenario cannot run partitioned yet (None: it can). Each reason names the feature.
pub fn unsupported(s: &Scenario) -> Option<String> {
    use crate::scenario::{LoadBalancing, NonMinimalMode};
    let mut why: Vec<&str> = Vec::new();
    if let LoadBalancing::NonMinimal(nm) = s.routing.load_balancing {
        if nm.mode == NonMinimalMode::UgalG {
            why.push("routing ugal_g (reads queues of other switches)");
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// The partition of every node: hosts in `parts` contiguous blocks (a pod, a leaf's hosts and a
/// dragonfly group are contiguous; a GPU cluster's servers or scale-up domains kept whole, dealt
/// out in turn on rail cabling),
/// then each switch with the partition most of its already placed neighbours are in (edge
/// switches follow their hosts, aggregation their edges, ...), ties to the partition with the
/// fewest switches so far. Any map gives the same outputs; this one cuts few links.
pub fn partition_nodes(fabric: &Fabric, parts: u16) -> IdVec<NodeId, u16> {
    const NONE: u16 = u16::MAX;
    let mut owner: IdVec<NodeId, u16> = IdVec::from_elem(NONE, fabric.num_nodes as usize);
    let hosts = fabric.num_hosts.max(1) as u64;
    // A server, or the scale-up domain it is in, stays whole: its links (a few ns) would
    // otherwise be cut, and every window would be that short (an NVL72 domain spans 18
    // servers). On rail cabling every rail leaf reaches every server of its unit, so blocks of
    // servers cut no fewer links than servers dealt out in turn; dealt out, each partition
    // holds a share of every pipeline stage and replica, busy when the others are (measured on
    // 2 threads: GPT training 0.67x, MoE training 0.75x the time of blocks; an all-reduce 1.0x).
    // With several units (and domains within units), whole units are dealt out in turn
    // instead: a unit's rail leaves reach its servers only, so no NIC link is cut (dealt
    // servers cut half of them). Otherwise they go in contiguous blocks. (Fewer domains than
    // partitions: servers, cut where they must be.)
    let cluster = fabric.cluster.as_deref();
    let by_domain = cluster.is_some_and(|c| c.domains >= parts as u32);
    let unit_servers = cluster.map_or(1, |c| c.slots_per_leaf.max(1));
    let by_unit = cluster.is_some_and(|c| {
        let domain_servers = (c.gpus_per_domain.div_ceil(c.spec.gpus_per_server)).max(1);
        c.spec.cabling == crate::config::Cabling::Rail
            && c.servers.div_ceil(unit_servers) >= parts as u32
            && unit_servers.is_multiple_of(domain_servers)
    });
    for n in fabric.nodes().filter(|&n| fabric.is_host(n)) {
        owner[n] = match cluster {
            Some(c) if n.get() < c.gpus => {
                let (whole, wholes) = match c.domain(n).filter(|_| by_domain) {
                    Some(d) => (d, c.domains),
                    None => (c.server(n), c.servers),
                };
                if by_unit {
                    (c.server(n) / unit_servers % parts as u32) as u16
                } else if c.spec.cabling == crate::config::Cabling::Rail {
                    (whole % parts as u32) as u16
                } else {
                    (whole as u64 * parts as u64 / wholes.max(1) as u64) as u16
                }
            }
            _ => (n.index() as u64 * parts as u64 / hosts) as u16,
        };
    }
    let mut load = vec![0u32; parts as usize];
    loop {
        let mut placed = 0;
        let mut votes = vec![0u32; parts as usize];
        for n in fabric.nodes() {
            if owner[n] != NONE {
                continue;
            }
            votes.iter_mut().for_each(|v| *v = 0);
            for p in fabric.ports_of(n) {
                let o = owner[fabric.peer_node[p]];
                if o != NONE {
                    votes[o as usize] += 1;
                }
            }
            let best = (0..parts as usize)
                .filter(|&i| votes[i] > 0)
                .max_by_key(|&i| (votes[i], std::cmp::Reverse(load[i])));
            if let Some(i) = best {
                owner[n] = i as u16;
                load[i] += 1;
                placed += 1;
            }
        }
        if placed == 0 {
            break;
        }
    }
    // Nodes with no placed neighbour at all (none in a connected fabric): round robin.
    let mut next = 0;
    for n in fabric.nodes() {
        if owner[n] == NONE {
            owner[n] = next;
            next = (next + 1) % parts;
        }
    }
    owner
}

impl World {
    /// Make this world partition `me` of `n` in `owner`'s map: links to other partitions' nodes
    /// send through the outbox, and only the flows this partition's hosts send start here.
    pub(super) fn make_partition(
        &mut self,
        (me, n): (u16, u16),
        owner: &Arc<IdVec<NodeId, u16>>,
        barrier_home: &Arc<Vec<u16>>,
        tight: &[(u32, Vec<FlowId>)],
        cut: Time,
    ) {
        if self.in_network.is_some() {
            // An in-network call's end starts the waiting call's flows from their records. (A
            // tight barrier reads its flows' records where they finish: one this partition has
            // not made yet misses all its packets, one it forgot finished.)
            self.keep_all_flows();
        }
        // Records stay lazy (made where a flow starts or a packet of it first comes in), and the
        // view retires flows as it folds the partitions, which then forget them (`fold_into`).
        self.retiring = false;
        self.flows.track_touches();
        let at = super::tight::Where {
            me,
            owner,
            flows: &self.flows,
            fabric: &self.fabric,
            mtu: self.transport.mtu as u64,
            header: self.transport.header as u64,
            in_network: self.in_network.as_ref(),
            cut,
            ports: &self.ports,
            maker: self.maker.as_ref(),
        };
        let tight = Tight::new(tight, &at);
        for p in self.fabric.ports() {
            self.ports[p].remote = owner[self.fabric.peer_node[p]] != me;
        }
        let mut static_order = std::mem::take(&mut self.static_order);
        static_order.retain(|&f| owner[self.flow_src(f)] == me);
        self.static_order = static_order;
        self.tracer.hold_rows();
        self.partition = Some(Part {
            me,
            owner: Arc::clone(owner),
            barrier_home: Arc::clone(barrier_home),
            outbox: Outbox::default(),
            parcels: (0..n).map(|_| Parcel::default()).collect(),
            moved_out: 0,
            moved_in: 0,
            deadlock_check_at: NEVER,
            on_wire: if self.faults.len() > 0 || self.circuits.is_some() {
                vec![Default::default(); self.ports.len()]
            } else {
                Vec::new()
            },
            tight,
            released: Vec::new(),
            inr_pending: BinaryHeap::new(),
            inr_feeders: Arc::new(Vec::new()),
            merged: false,
            news_out: Vec::new(),
            finished_elsewhere: Vec::new(),
            given_up_elsewhere: Vec::new(),
            cut_off: None,
            fates: None,
            lookahead: self.window_ps,
        });
    }

    /// A plan amendment (every partition alike) appended the flows from `first` on and
    /// cancelled `cancel`: the tight barriers brought up to date ([`Tight::amend`], with
    /// `tight` the tight barriers whose flows it names and `status` as it takes it).
    fn amend_tight(
        &mut self,
        tight: &[(u32, Vec<FlowId>)],
        first: FlowId,
        cancel: &[FlowId],
        status: impl Fn(FlowId) -> Option<bool>,
    ) {
        let mtu = self.transport.mtu as u64;
        let part = self.partition.as_mut().expect("a partition");
        let at = super::tight::Where {
            me: part.me,
            owner: &part.owner,
            flows: &self.flows,
            fabric: &self.fabric,
            mtu,
            header: self.transport.header as u64,
            in_network: self.in_network.as_ref(),
            cut: 0, // (no longer read: `Tight::reach` tells nothing after an amendment)
            ports: &self.ports,
            maker: self.maker.as_ref(),
        };
        part.tight.amend(tight, first, cancel, &at, status);
    }

    /// An elastic job's re-plan (run by every partition alike, `engine::jobs`) appends `a`'s
    /// barriers: each is run by the partition where all the appended flows that finish at it
    /// and start from it are, else counted by every partition, as [`barrier_homes`] places a
    /// plan's. (A re-plan appends no edges; its flows that finish at the op's barriers, which
    /// every partition counts, change no home.)
    pub(super) fn home_appended_barriers(&mut self, a: &Amendment) {
        let part = self.partition.as_mut().expect("a partition");
        let first = part.barrier_home.len();
        let mut homes: Vec<u16> = part.barrier_home.to_vec();
        homes.resize(first + a.barriers.len(), UNSET);
        for f in &a.flows {
            if let Some(b) = f.completes.filter(|&b| b as usize >= first) {
                join_home(&mut homes[b as usize], part.owner[f.dst]);
            }
            if let crate::workload::Start::After { barrier, .. } = f.start {
                if barrier as usize >= first {
                    join_home(&mut homes[barrier as usize], part.owner[f.src]);
                }
            }
        }
        for h in &mut homes[first..] {
            if *h == UNSET {
                *h = MIRRORED;
            }
        }
        part.barrier_home = Arc::new(homes);
    }

    /// After an elastic job's re-plan appended `a`'s flows (from `first` on) in this
    /// partition, as in every other: the tight barriers brought up to date, as
    /// [`tight_barriers`] would find them in the amended plan. A tight barrier (the op's done)
    /// counts the appended flows that finish at it and no longer waits for the cancelled ones;
    /// an appended barrier every partition counts, whose release starts a flow sooner than a
    /// window after it, is tracked from now. (The withdrawn flows leave as they are found:
    /// [`Tight::offset`].)
    pub(super) fn track_appended_flows(&mut self, a: &Amendment, first: FlowId) {
        let nb_old = self.barriers.len() - a.barriers.len();
        let part = self.partition.as_ref().expect("a partition");
        let mut soonest = vec![NEVER; a.barriers.len()];
        for f in &a.flows {
            if let crate::workload::Start::After { barrier, gap } = f.start {
                if let Some(s) = soonest.get_mut((barrier as usize).wrapping_sub(nb_old)) {
                    *s = (*s).min(gap);
                }
            }
        }
        let mut counted: std::collections::BTreeMap<u32, Vec<FlowId>> = Default::default();
        for (k, f) in a.flows.iter().enumerate() {
            let Some(b) = f.completes else {
                continue;
            };
            let tight = match (b as usize).checked_sub(nb_old) {
                Some(i) => part.barrier_home[b as usize] == MIRRORED && soonest[i] < part.lookahead,
                None => part.tight.tracks(b),
            };
            if tight {
                let fid = FlowId::new(first.get() + k as u32);
                counted.entry(b).or_default().push(fid);
            }
        }
        let tight: Vec<(u32, Vec<FlowId>)> = counted.into_iter().collect();
        // (Appended flows start later: none started yet.)
        self.amend_tight(&tight, first, &a.cancel, |_| Some(false));
        // Long windows: those that cannot finish within one once they start.
        self.count_unstarted_long_of(first.index(), &a.flows);
    }

    /// In-network calls on threads: remember the events already scheduled that may start a
    /// call's flow here (this partition's planned starts of such flows, the timed arrivals at
    /// barriers of `feeders`), for the windows they fall in to run merged.
    pub(super) fn watch_in_network_starts(
        &mut self,
        feeders: &Arc<Vec<bool>>,
        timers: &[(Time, u32)],
    ) {
        let Some(inr) = &self.in_network else {
            return;
        };
        let mut pending = BinaryHeap::new();
        for &f in &self.static_order {
            if inr.is_member(f) {
                pending.push(Reverse(self.start_of(f)));
            }
        }
        for &(at, b) in timers {
            if feeders[b as usize] {
                pending.push(Reverse(at));
            }
        }
        let part = self.partition.as_mut().expect("a partition");
        part.inr_pending = pending;
        part.inr_feeders = Arc::clone(feeders);
    }

    /// The soonest a timeout here may give up on a flow, once no fault event is left (before,
    /// none does): a flow is given up on only at a timeout with no progress for `rto`, which
    /// comes at its deadline or later (a deadline only moves later), and only if its destination
    /// is cut off, which stays as it is from then on. So the first call finds the flows sent
    /// from here that are cut off (`Part::cut_off`; those that start later join as they start,
    /// [`World::note_if_cut_off`]), and each call takes the soonest of their deadlines, or a
    /// timeout of a flow started from `next` on, an `rto` after it.
    pub(super) fn earliest_give_up(&mut self, next: Time) -> Time {
        let kept = self.partition.as_mut().expect("a partition").cut_off.take();
        let part = self.partition.as_ref().expect("a partition");
        let mut cut = kept.unwrap_or_else(|| {
            (self.flows.live())
                .filter(|(fid, f)| {
                    f.started && f.rto_armed && part.starts_flow(f.src) && self.is_cut_off(*fid)
                })
                .map(|(fid, _)| fid)
                .collect()
        });
        // Given up on, or finished at the receiver (no timeout gives up on it then, and its
        // timer stops): no longer one that may be.
        cut.retain(|&fid| {
            let armed = self.flows.get(fid).is_some_and(|f| f.rto_armed);
            armed && !part.finished_elsewhere(fid)
        });
        let soonest = cut.iter().map(|&f| self.flows[f].rto_deadline).min();
        self.partition.as_mut().expect("a partition").cut_off = Some(cut);
        soonest
            .unwrap_or(NEVER)
            .min(next.saturating_add(self.transport.rto))
    }

    /// Another partition tells what became of flow `fid` (`Mail::news`): it finished at its
    /// receiver there (this partition, its sender's, gives it up no more), or its sender there
    /// gave up on it (this partition, its receiver's, counts its missing packets no more and
    /// its finish for nothing).
    pub(super) fn take_news(&mut self, fid: FlowId, what: FlowNews) {
        let part = self.partition.as_mut().expect("a partition");
        match what {
            FlowNews::Finished => part.mark_finished_elsewhere(fid),
            FlowNews::GivenUp => {
                part.mark_given_up_elsewhere(fid);
                if let Some(f) = self.flows.get_mut(fid) {
                    if std::mem::take(&mut f.long_at_receiver) {
                        self.long_flows -= 1;
                    }
                }
            }
        }
    }

    /// Flow `fid` started here after the faults settled: remember it if its destination is cut
    /// off (`earliest_give_up`).
    pub(super) fn note_if_cut_off(&mut self, fid: FlowId) {
        if self.is_cut_off(fid) {
            let part = self.partition.as_mut().expect("a partition");
            part.cut_off
                .as_mut()
                .expect("after the faults settled")
                .push(fid);
        }
    }

    /// Whether flow `fid`'s packets or its acknowledgements cannot reach their destination
    /// (`World::retransmit_timer` gives up on such a flow).
    fn is_cut_off(&self, fid: FlowId) -> bool {
        !(self.reachable(fid, true) && self.reachable(fid, false))
    }

    /// Schedule flow `fid`'s start at `at` (on threads, remembered if it is an in-network
    /// call's: [`Part::inr_pending`]).
    #[inline]
    pub(super) fn push_flow_start(&mut self, at: Time, fid: FlowId) {
        self.events.push(at, Event::FlowStart(fid));
        self.latest_pending = self.latest_pending.max(at);
        if let (Some(part), Some(inr)) = (&mut self.partition, &self.in_network) {
            if inr.is_member(fid) {
                part.inr_pending.push(Reverse(at));
            }
        }
    }

    /// Schedule an arrival at barrier `b` at `at` (on threads, remembered if its release may
    /// start an in-network call's flow: [`Part::inr_pending`]).
    #[inline]
    pub(super) fn push_barrier_arrival(&mut self, at: Time, b: u32) {
        self.events.push(at, Event::BarrierArrive(b));
        self.latest_pending = self.latest_pending.max(at);
        if let Some(part) = &mut self.partition {
            if part.feeds_in_network(b) {
                part.inr_pending.push(Reverse(at));
            }
        }
    }

    /// One of the events [`Part::inr_pending`] remembers runs now: forget it (the earliest).
    #[inline]
    pub(super) fn forget_in_network_start(&mut self) {
        if let Some(part) = &mut self.partition {
            if part.inr_pending.peek().is_some_and(|r| r.0 <= self.now) {
                part.inr_pending.pop();
            }
        }
    }

    /// `pkt` left on link `p` toward another partition: it goes there whole, and is gone here.
    #[cold]
    #[inline(never)]
    pub(super) fn send_remote(&mut self, p: PortId, pkt: PacketId) {
        let packet = *self.packets.get(pkt);
        let part = self
            .partition
            .as_mut()
            .expect("remote links only in partitions");
        let parcel = &mut part.parcels[usize::from(part.owner[self.fabric.peer_node[p]])];
        if let Some(int) = &self.int {
            parcel.int.push(int.stack(pkt.index()));
        }
        let sent = self
            .tracer
            .latency
            .as_ref()
            .map_or(0, |l| l.sent_at(pkt.index()));
        self.packets.release(pkt);
        parcel.packets.push(Transfer {
            port: p,
            packet,
            sent,
            lost: false,
        });
        part.moved_out += 1;
        if let Some(wire) = part.on_wire.get_mut(p.index()) {
            let now = self.now;
            while wire.front().is_some_and(|w| w.arrive <= now) {
                wire.pop_front();
            }
            wire.push_back(packet);
        }
    }

    /// Link `p` (toward another partition) still carries packets sent before now.
    pub(super) fn remote_link_busy(&self, p: PortId) -> bool {
        let part = self
            .partition
            .as_ref()
            .expect("remote links only in partitions");
        (part.on_wire.get(p.index()))
            .and_then(|w| w.back())
            .is_some_and(|w| w.arrive > self.now)
    }

    /// Link `p` (toward another partition) went down now: every packet on its wire is lost, as
    /// one world loses it. Its drop rows are written here, in sending order. Those sent in
    /// earlier windows are in the far end's partition, which drops them (`link_down`); those
    /// sent in this one are still in the outbox (they arrive after the window): each is dropped
    /// here and goes on as its arrival event only (`Transfer::lost`). How many were dropped here.
    pub(super) fn lose_wire_of(&mut self, p: PortId) -> u64 {
        let now = self.now;
        let Some(part) = self.partition.as_mut() else {
            return 0;
        };
        let Some(wire) = part.on_wire.get_mut(p.index()) else {
            return 0;
        };
        let mut wire = std::mem::take(wire);
        wire.retain(|w| w.arrive > now);
        let to = usize::from(part.owner[self.fabric.peer_node[p]]);
        let sent: Vec<usize> = (part.parcels[to].packets.iter().enumerate())
            .filter(|(_, t)| t.port == p && !t.lost)
            .map(|(i, _)| i)
            .collect();
        // The parcel holds what was sent in this window: the wire's last packets.
        let earlier = wire.len() - sent.len();
        for (k, packet) in wire.into_iter().enumerate() {
            let pkt = self.packets.adopt(packet);
            self.trace_packet(crate::trace::packets::PacketEvent::Drop, p, pkt);
            if k < earlier {
                self.packets.release(pkt); // the far end's partition drops and counts it
                continue;
            }
            let part = self.partition.as_mut().expect("a partition");
            part.parcels[to].packets[sent[k - earlier]].lost = true;
            part.moved_out -= 1;
            self.fault_drop(pkt);
        }
        sent.len() as u64
    }

    /// Long windows: count the planned flows that start here, have not started, and cannot
    /// finish within a long window once they do: their packets cross to another partition (no
    /// sooner than the links between partitions, at least a window), or they have more packets
    /// than their host port sends in one ([`super::world::sends_long`]). A flow starts no
    /// sooner than the next event, so while one is left the run cannot end within a long
    /// window (`World::long_flows`); each is uncounted as it starts.
    fn count_unstarted_long(&mut self, plan: &crate::workload::FlowPlan) {
        self.unstarted_long = vec![0u64; plan.flows.len().div_ceil(64)];
        self.count_unstarted_long_of(0, &plan.flows);
    }

    /// [`World::count_unstarted_long`] for `flows`, numbered from `first` (the plan's, or those
    /// an elastic re-plan appended). Nothing without long windows.
    pub(super) fn count_unstarted_long_of(&mut self, first: usize, flows: &[FlowInit]) {
        if self.long_packets.is_empty() {
            return;
        }
        let part = self.partition.as_ref().expect("a partition");
        let (me, owner) = (part.me, &part.owner);
        let mtu = self.transport.mtu as u64;
        let unstarted = &mut self.unstarted_long;
        let mut counted = 0;
        for (i, f) in (first..).zip(flows) {
            if owner[f.src] != me || f.src == f.dst || f.size_bytes == 0 {
                continue;
            }
            // (Whichever of its host's ports it is sent on.)
            let long = (self.fabric.ports_of(f.src))
                .map(|p| {
                    self.long_packets
                        .get(p.index())
                        .copied()
                        .unwrap_or(u32::MAX)
                })
                .max()
                .unwrap_or(u32::MAX);
            let (packets, _) = crate::transport::segment(f.size_bytes, mtu);
            if owner[f.dst] != me || packets >= long {
                crate::transport::window::set(unstarted, i as u32);
                counted += 1;
            }
        }
        self.long_flows += counted;
    }

    /// After an elastic re-plan: the latest time of what is still scheduled here that the run
    /// waits for, counted again from the event queue (`World::latest_pending` is a high-water
    /// mark, and the re-plan cancelled flows whose starts may be scheduled: the run may now end
    /// before them). A count too low only makes a window shorter.
    pub(super) fn recount_latest_pending(&mut self) {
        let cancelled = |f: FlowId| self.amends.is_cancelled(f);
        let next_static = self.static_order.get(self.next_static).copied();
        let mut latest = 0;
        self.events.for_each_pending(|t, e| {
            let waited = match e {
                Event::FlowStart(f) => !cancelled(f),
                Event::BarrierArrive(_) => true,
                // (Unless the next flow it starts was cancelled: then a later one may be.)
                Event::NextFlowStarts => next_static.is_none_or(|f| !cancelled(f)),
                _ => false,
            };
            if waited {
                latest = latest.max(t);
            }
        });
        self.latest_pending = latest;
    }

    /// A packet another partition sent on link `t.port` toward a node of this one: it reaches the
    /// far end at its `arrive` time, behind the link's earlier packets.
    fn receive_remote(&mut self, from: usize, t: Transfer, int: Option<&IntStack>) {
        let arrival = super::queue::Event::LinkArrival(t.port);
        let stream = mail_stream(from, &t.packet);
        if t.lost {
            self.events.push_in_stream(stream, t.packet.arrive, arrival);
            return;
        }
        if self.lazy_records {
            if let Some(fid) = t.packet.flow_id() {
                self.materialise(fid);
            }
        }
        let id = self.packets.adopt(t.packet);
        if let (Some(store), Some(stack)) = (&mut self.int, int) {
            store.set_stack(id.index(), stack);
        }
        if let Some(l) = &mut self.tracer.latency {
            l.sent(id.index(), t.sent);
        }
        self.ports[t.port].pipe.push_back(&mut self.packets, id);
        self.events.push_in_stream(stream, t.packet.arrive, arrival);
        self.partition.as_mut().expect("a partition").moved_in += 1;
    }

    /// Run every event that comes before `key` in the order (`queue::key_ahead`).
    fn run_before_key(&mut self, key: u128) {
        while self.events.next_runs_before(key) {
            let (t, ev) = self.events.pop().expect("peeked");
            self.now = t;
            self.handle_in_partition(ev);
        }
    }

    /// Run every event before `end`; the clock stays at the last one run.
    pub(super) fn run_window(&mut self, end: Time) {
        while let Some(t) = self.events.peek_time() {
            if t >= end {
                break;
            }
            let (t, ev) = self.events.pop().expect("peeked");
            self.now = t;
            self.handle_in_partition(ev);
        }
    }

    /// Run `ev`, just popped; trace rows it writes are held at its place in the order.
    #[inline(always)]
    fn handle_in_partition(&mut self, ev: Event) {
        if self.tracer.holds {
            self.tracer.place = Place {
                event: self.events.key_of_last(ev),
                within: 0,
            };
        }
        match ev {
            Event::FlowStart(f) if self.in_network.as_ref().is_some_and(|i| i.is_member(f)) => {
                self.forget_in_network_start()
            }
            Event::BarrierArrive(b)
                if (self.partition.as_ref()).is_some_and(|p| p.feeds_in_network(b)) =>
            {
                self.forget_in_network_start()
            }
            _ => {}
        }
        self.handle(ev);
        if matches!(
            ev,
            Event::SampleQueues
                | Event::SampleLinks
                | Event::FaultStart(_)
                | Event::FaultEnd(_)
                | Event::FaultDetected(_)
                | Event::CircuitsChange(_)
                | Event::CircuitsUp(_)
                | Event::CircuitsRoute
                | Event::JobFailure(_)
                | Event::JobResume(_)
                | Event::JobRejoin(_)
        ) && self.partition.as_ref().is_some_and(|p| !p.is_first())
        {
            // Every partition samples its ports at once, and every one applies each fault and
            // each OCS change to its copy of the fabric, and each job's failures, resumes and
            // rejoins to its copy of the job: one world's one event, counted once.
            self.stats.events -= 1;
        }
        if let Event::BarrierArrive(b) = ev {
            // A barrier every partition counts gets each chained or timed arrival in each.
            let part = self.partition.as_ref().expect("a partition");
            if !part.is_first() && part.barrier_home[b as usize] == MIRRORED {
                self.stats.events -= 1;
            }
        }
    }

    /// The tight barriers that may release soon (`Tight::frontier`, alike in every partition).
    fn tight_frontier(&self) -> &[u32] {
        self.partition
            .as_ref()
            .expect("a partition")
            .tight
            .frontier()
    }

    /// Packets created here, delivered or dropped here, or moved in or out, against those alive.
    pub(super) fn check_partition_conservation(&self) -> Result<(), String> {
        let part = self.partition.as_ref().expect("a partition");
        let s = &self.stats;
        let created = self.packets.created() + part.moved_in;
        let gone = s.packets_delivered + s.packets_dropped + part.moved_out;
        if created != gone + self.packets.live() {
            return Err(format!(
                "partition: created {} + moved in {} != delivered {} + dropped {} + moved out {} \
                 + alive {}",
                self.packets.created(),
                part.moved_in,
                s.packets_delivered,
                s.packets_dropped,
                part.moved_out,
                self.packets.live()
            ));
        }
        // (A partition's switches are its own; the others' queues and counters stay empty.)
        self.check_buffers()
    }
}

impl Parallel {
    /// `parts` worlds of `fabric` (one thread each), each made from the same build by `make`,
    /// split by [`partition_nodes`].
    pub fn new(
        fabric: &Fabric,
        plan: &crate::workload::FlowPlan,
        parts: u16,
        long: Option<LongWindows>,
        make: impl Fn() -> World + Sync,
    ) -> Self {
        let parts_n = parts;
        let owner = Arc::new(partition_nodes(fabric, parts));
        let homes = Arc::new(barrier_homes(plan, &owner));
        let (lookahead, cut, tight) = Self::lookahead(fabric, plan, &owner, &homes, long);
        let feeders = Arc::new(in_network_feeders(plan));
        let timers = &plan.barrier_timers;
        // Built side by side, one thread each (a world of 65,536 hosts takes seconds).
        let parts: Vec<World> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..parts)
                .map(|i| {
                    let (make, owner, homes, tight) = (&make, &owner, &homes, &tight);
                    let feeders = &feeders;
                    s.spawn(move || {
                        let mut w = make();
                        w.make_partition((i, parts_n), owner, homes, tight, cut);
                        w.watch_in_network_starts(feeders, timers);
                        w
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        let mut parts = parts;
        let routes = Arc::new(super::faults::SharedRoutes::new(parts.len()));
        for w in &mut parts {
            w.partition.as_mut().expect("a partition").lookahead = lookahead;
            w.faults.share_routes(Arc::clone(&routes));
        }
        if let Some(l) = long.filter(|_| lookahead > parts[0].window_ps) {
            // A flow is sent on one host port: packets never sent go no faster than its rate.
            let long_packets: Vec<u32> = (fabric.host_ports())
                .map(|p| {
                    let packet = crate::units::serialisation_ps(l.mtu, fabric.rate_bps[p].max(1));
                    (lookahead.div_ceil(packet.max(1)) + 1).min(u32::MAX as u64 - 1) as u32
                })
                .collect();
            // A receiver missing `n` packets needs at least `n - 2` full packets' time on its
            // links (`engine::tight`): all of them, or but its scale-up link for data from
            // outside its domain.
            let long_receive: Vec<[u32; 2]> = (fabric.hosts())
                .map(|h| {
                    [false, true].map(|outside| {
                        let into = super::tight::inbound_rate_from(fabric, h, outside).max(1);
                        let packet = crate::units::serialisation_ps(l.mtu, into).max(1);
                        (lookahead.div_ceil(packet) + 2).min(u32::MAX as u64) as u32
                    })
                })
                .collect();
            for w in &mut parts {
                w.long_packets = long_packets.clone();
                w.long_receive = long_receive.clone();
                w.count_unstarted_long(plan);
            }
        }
        Self {
            lookahead,
            long_until: NEVER,
            clock: Clock {
                window_end: parts[0].window_ps,
                deadlock_check_at: NEVER,
                pace: Pace::default(),
                windows: 0,
                merged: 0,
                long: 0,
                on_one_thread: 0,
            },
            serial: false,
            pool: rayon_core::ThreadPoolBuilder::new()
                .num_threads(usize::from(parts_n).saturating_sub(1).max(1))
                .thread_name(|i| format!("fabricemu-partition-{}", i + 1))
                .build()
                .expect("threads for the partitions"),
            parts,
            owner,
            homes,
            finished: false,
            reached_limit: false,
        }
    }

    /// The windows' length while the run cannot end within one, the shortest delay of a link
    /// between two partitions (`cut`), and the tight barriers for that length. Nothing
    /// reaches another partition sooner than `cut`, so windows that long are safe, with three
    /// rules where one world's order is decided on a finer grid (`World::window_ps`, the
    /// shortest link of all):
    ///
    /// - a run that waits for every flow stops at that grid's first point after its last flow
    ///   settled: a window is long only while some flow cannot finish within it (more packets
    ///   never sent than its port sends in one, `World::long_packets`, or missing more than
    ///   its receiver's links bring in, `World::long_receive`), or something the run waits for
    ///   is scheduled at or after its end (`World::latest_pending`), else one grid step;
    /// - a tight barrier (the window's length decides which are) may release sooner than a
    ///   long window after the next event: the window then ends where its release may come
    ///   (`Shared::decide`), and one whose flows have not all started is ruled out only for
    ///   as long as its flows take to finish ([`Tight::reach`]);
    /// - with PFC, a deadlock check is asked for a period ahead: no window is longer.
    ///
    /// Runs whose plan or fabric changes as they go (circuits, a controller, in-network calls)
    /// keep the grid: `long` is None. Scheduled faults only slow flows down, and no window is
    /// long once a flow may be given up on (`World::earliest_give_up`). Jobs that stall or
    /// restart keep their plan (a freeze only delays what they start), and their ops' barriers
    /// are tight at any delay: their windows are long too (since 2026-12-05). So are an elastic
    /// job's, but for the grid step that may hold a re-plan (`Shared::decide_end`), after which
    /// the bounds count what it appended (`World::track_appended_flows`) and forget the starts
    /// it cancelled (`World::recount_latest_pending`).
    fn lookahead(
        fabric: &Fabric,
        plan: &crate::workload::FlowPlan,
        owner: &IdVec<NodeId, u16>,
        homes: &[u16],
        long: Option<LongWindows>,
    ) -> (Time, Time, Vec<(u32, Vec<FlowId>)>) {
        let shortest = fabric.shortest_delay().max(1);
        let cut = (fabric.ports())
            .filter(|&p| owner[fabric.port_node[p]] != owner[fabric.peer_node[p]])
            .map(|p| fabric.delay_ps[p])
            .min()
            .unwrap_or(NEVER);
        let window = match long {
            Some(l) => cut.min(l.cap).max(shortest.min(l.cap)),
            None => shortest,
        };
        (window, cut, tight_barriers(plan, homes, MIRRORED, window))
    }

    /// Run windows until at least `max_events` more events ran, the run ended (true), or the
    /// next event is at or after `limit` (NEVER: none; [`Parallel::reached_limit`] then says so,
    /// and every partition's clock is at `limit`: a control boundary). The stop rules are one
    /// world's (`World::run_events_until`), taken at window ends, which the limit is one of.
    ///
    /// Every partition runs on its own thread (the first on this one), and the threads meet at
    /// a barrier twice a window: once when each has posted its state (its next event, its
    /// settled flows), from which each decides the same next window, and once when each has
    /// posted the packets it sent to the others, which each then takes in. Where that is
    /// measured to be faster (windows of a few events each, a meeting stretched by the
    /// machine's scheduling: `engine::pace`), the same steps run on this thread alone, one
    /// partition after another ([`serial`]).
    pub fn run(&mut self, stop: StopAt, max_events: u64, limit: Time) -> bool {
        self.reached_limit = false;
        if self.finished {
            return true;
        }
        let n = self.parts.len();
        let events: u64 = self.parts.iter().map(|w| w.stats.events).sum();
        let plan = WindowPlan {
            stop,
            target: events.saturating_add(max_events),
            window_ps: self.parts[0].window_ps,
            lookahead: self.lookahead,
            long_until: self.long_until,
            limit,
        };
        let tight = (self.parts[0].partition.as_ref()).map_or(0, |p| p.tight.len());
        let trees = (self.parts[0].in_network.as_ref()).map_or(0, |i| i.num_trees());
        let shared = Shared::new(n, tight, trees);
        let owner: &IdVec<NodeId, u16> = &self.owner;
        // Each thread holds its own partition, but for the windows run merged, which one
        // thread runs across all of them.
        let mut cells: Vec<Mutex<&mut World>> = self.parts.iter_mut().map(Mutex::new).collect();
        let mut clock = self.clock;
        let halt = loop {
            let (next, halt) = if self.serial {
                let mut parts: Vec<&mut World> = (cells.iter_mut())
                    .map(|c| &mut **c.get_mut().unwrap_or_else(|e| e.into_inner()))
                    .collect();
                serial(&mut parts, &shared, owner, &plan, clock)
            } else {
                threads(&self.pool, &cells, &shared, owner, &plan, clock)
            };
            clock = next;
            if halt != Halt::Switch {
                break halt;
            }
            self.serial = !self.serial;
        };
        self.clock = clock;
        self.finished = halt == Halt::Ended;
        self.reached_limit = halt == Halt::Limit;
        self.finished
    }

    /// The windows run so far.
    pub fn windows(&self) -> Windows {
        Windows {
            count: self.clock.windows,
            merged: self.clock.merged,
            long: self.clock.long,
            on_one_thread: self.clock.on_one_thread,
            lookahead: self.lookahead,
            grid: self.parts[0].window_ps,
        }
    }

    /// Tests: switch between threads and one thread every `every` windows, whatever they
    /// cost, so that both ways and the switches run (`Pace::alternating`).
    pub fn alternate(&mut self, every: u32) {
        self.clock.pace = Pace::alternating(every);
    }

    /// Fold the partitions into `view`: its clock, counters, ports and flow records become the
    /// whole fabric's. Idempotent: everything is taken afresh from the partitions, but for the
    /// flow records no partition touched and the barriers none released since the last fold.
    pub fn fold_into(&mut self, view: &mut World) {
        self.replans_into(view);
        let mut touched = vec![0u64; self.parts[0].flows.len().div_ceil(64)];
        let mut released = Vec::new();
        for w in self.parts.iter_mut() {
            w.flows.take_touched(&mut touched);
            released.append(&mut w.partition.as_mut().expect("a partition").released);
        }
        let parts = &self.parts;
        view.now = parts.iter().map(|w| w.now).max().unwrap_or(0);
        let mut stats = RunStats::default();
        for w in parts {
            absorb(&mut stats, &w.stats);
        }
        stats.flows_total = parts[0].stats.flows_total;
        if self.finished {
            stats.simulated_ps = view.now;
        }
        view.stats = stats;
        view.finished = self.finished;
        view.flows_settled = parts.iter().map(|w| w.flows_settled).sum();
        let mut route = crate::routing::RouteStats::default();
        for w in parts {
            let r = &w.router.stats;
            route.packets_nonminimal += r.packets_nonminimal;
            route.data_packets_nonminimal += r.data_packets_nonminimal;
            route.control_packets_nonminimal += r.control_packets_nonminimal;
            route.max_global_hops = route.max_global_hops.max(r.max_global_hops);
        }
        view.router.stats = route;
        if let Some(m) = &mut view.synth {
            // Counted where each packet was delivered.
            m.accepted_wire_bytes = parts
                .iter()
                .filter_map(|w| w.synth.as_ref())
                .map(|m| m.accepted_wire_bytes)
                .sum();
        }
        for p in view.fabric.ports() {
            let o = self.owner[view.fabric.port_node[p]] as usize;
            view.ports[p] = parts[o].ports[p];
            view.port_rate[p] = parts[o].port_rate[p];
            view.pause_since[p] = parts[o].pause_since[p];
            view.paused_ps[p] = parts[o].paused_ps[p];
            if !view.switches.trimmed.is_empty() {
                view.switches.trimmed[p] = parts[o].switches.trimmed[p];
            }
        }
        if let Some(inr) = &mut view.in_network {
            inr.fold_counters(parts.iter().filter_map(|w| w.in_network.as_ref()));
        }
        if !view.jobs.list.is_empty() {
            // Alike in every partition (each sees every op start and end, and every failure).
            view.jobs.list.clone_from(&parts[0].jobs.list);
        }
        if let Some(relays) = &mut view.relays {
            relays.take_each_gpu(|gpu| {
                let o = self.owner[gpu] as usize;
                parts[o].relays.as_ref().expect("the same build")
            });
        }
        // A barrier released where it ran: in its home, or alike in every partition that
        // counts it (each told of every arrival by now: the mail of the last window is in).
        // Only those released since the last fold (a fold at every control boundary of a run
        // with 100,000s of barriers would otherwise read them all).
        for b in released {
            view.barriers[b as usize].released_at = (parts.iter())
                .map(|w| w.barriers[b as usize].released_at)
                .min()
                .unwrap_or(NEVER);
        }
        // The flows whose record changed in some partition since the last fold (the others'
        // view records are up to date). A flow now done for good (one world would have retired
        // it: its merged record says so) the view retires, and the partitions forget.
        let mut retired = Vec::new();
        // Partitions that keep every record (an in-network call reads them) keep them to the end.
        let retiring = view.retiring && parts.iter().all(|w| w.lazy_records);
        for (i, &word) in touched.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let fid = FlowId::new((i * 64 + bits.trailing_zeros() as usize) as u32);
                bits &= bits - 1;
                if view.flows.is_retired(fid) {
                    // A partition that never saw it made its record when every record came to
                    // be kept (an amendment): forgotten again.
                    retired.push(fid);
                    continue;
                }
                view.flows.set_record(fid, self.merged_flow(fid));
                if retiring {
                    view.maybe_retire(fid);
                    if view.flows.get(fid).is_none() {
                        retired.push(fid);
                    }
                }
            }
        }
        for w in self.parts.iter_mut() {
            for &fid in &retired {
                w.forget_flow(fid);
            }
        }
        let parts = &self.parts;
        if view.faults.len() > 0 || view.circuits.is_some() {
            // Every partition applied every fault and OCS change; each lost the packets it held.
            view.faults = parts[0].faults.clone();
            for w in &parts[1..] {
                view.faults.add_losses_of(&w.faults);
            }
            view.router
                .replace_table(Arc::clone(parts[0].router.table()));
            view.router.nominal.clone_from(&parts[0].router.nominal);
        }
        if view.circuits.is_some() {
            // The circuits (their rows and lost time) and the wiring they made, alike in all.
            view.circuits.clone_from(&parts[0].circuits);
            view.fabric.peer_port.clone_from(&parts[0].fabric.peer_port);
            view.fabric.peer_node.clone_from(&parts[0].fabric.peer_node);
        }
    }

    /// The elastic jobs' re-plans since the last fold (every partition made each alike; the
    /// first kept them): the view records each at its time (`World::amend_view`: its flows and
    /// barriers appended, its cancellations marked: the view's records of them say they did not
    /// start, as they never will; what the partitions ran of it, the view folds) and takes what
    /// they appended to the plan (`Simulation::sync_job_plan`); the partitions' appended
    /// barriers got their homes then (`World::home_appended_barriers`).
    fn replans_into(&mut self, view: &mut World) {
        let replans = std::mem::take(&mut self.parts[0].jobs.replans);
        if replans.is_empty() {
            return;
        }
        let now = view.now;
        for (at, a) in replans {
            view.now = at;
            if let Err(e) = view.amend_view(&a, &self.parts[0].pxn) {
                unreachable!("the view refused what every partition took: {e}");
            }
            view.jobs.appended.push(a);
        }
        view.now = now;
        let homes = &self.parts[0]
            .partition
            .as_ref()
            .expect("a partition")
            .barrier_home;
        self.homes = Arc::clone(homes);
    }

    /// Per partition, the most flow records it held at once.
    pub fn peak_records(&self) -> Vec<usize> {
        self.parts.iter().map(|w| w.flows.peak_live()).collect()
    }

    /// Every partition shares the plan's `flows` again, or lets go of them (None): see
    /// [`World::share_plan`].
    pub fn share_plan(&mut self, flows: Option<&crate::workload::PlanFlows>) {
        for w in self.parts.iter_mut() {
            w.share_plan(flows);
        }
    }

    /// From now on every partition keeps every flow's record (see [`World::keep_all_flows`]).
    pub fn keep_all_flows(&mut self) {
        for w in self.parts.iter_mut() {
            w.keep_all_flows();
        }
    }

    /// Move the trace rows the partitions hold into `view`'s tables, in one world's order. Every
    /// partition stopped at the same window end, so no row to come can go before them.
    pub fn merge_traces(&mut self, view: &mut World) {
        let mut tracers: Vec<&mut crate::trace::Tracer> =
            self.parts.iter_mut().map(|w| &mut w.tracer).collect();
        view.tracer.take_rows_of(&mut tracers);
        if let Some(l) = &mut view.tracer.latency {
            l.sum_of(self.parts.iter().filter_map(|w| w.tracer.latency.as_ref()));
        }
    }

    /// Flow `fid`'s record: the sender's state from its sender's partition, the receiver's
    /// (finish) from its receiver's, the counters summed over all (a switch's drops count where
    /// the switch is). A partition that has no record of it (its records are lazy, and no packet
    /// of it came there yet) adds nothing; the receiver's fields stay as they were made then.
    fn merged_flow(&self, fid: FlowId) -> crate::transport::Flow {
        let parts = &self.parts;
        let copies = || parts.iter().filter_map(|w| w.flows.get(fid));
        let first = copies()
            .next()
            .expect("a touched flow has a record somewhere");
        let (src, dst) = (
            self.owner[first.src] as usize,
            self.owner[first.dst] as usize,
        );
        // (Its sender's partition may not have made its record yet: a partition whose records
        // are lazy gave up on it, waiting at a barrier that died, before its sender's heard.)
        let mut f = parts[src].flow_record(fid).into_owned();
        if let Some(r) = parts[dst].flows.get(fid) {
            f.finish = r.finish;
            f.expected = r.expected;
        }
        f.max_reorder = copies().map(|r| r.max_reorder).max().unwrap_or(0);
        f.packets_alive = copies().fold(0, |n, r| n.wrapping_add(r.packets_alive));
        let sum = |get: fn(&crate::transport::Flow) -> u64| -> u64 { copies().map(get).sum() };
        f.packets_sent = sum(|f| f.packets_sent);
        f.retransmits = sum(|f| f.retransmits);
        f.drops = sum(|f| f.drops);
        f.ecn_marks = sum(|f| f.ecn_marks);
        f.cnps = sum(|f| f.cnps);
        f.out_of_order = sum(|f| f.out_of_order);
        f.trim_nacks = sum(|f| f.trim_nacks);
        f.unreachable_drops = sum(|f| f.unreachable_drops);
        f
    }

    /// The homes of the barriers of `plan`, amended (its barriers, flows and edges appended):
    /// Err if a barrier that existed before would change home (its arrivals so far were
    /// counted by its home alone).
    ///
    /// A barrier one partition ran that every partition counts from now on is taken over by
    /// the others at the amendment ([`Parallel::amend`] copies its count), unless arrivals
    /// chained to it may be pending (they were scheduled in its home only).
    pub fn homes_after(&self, plan: &crate::workload::FlowPlan) -> Result<Vec<u16>, String> {
        let homes = barrier_homes(plan, &self.owner);
        let chained: std::collections::HashSet<u32> =
            plan.barrier_edges.iter().map(|e| e.to).collect();
        let moves = |b: usize, old: u16, new: u16| {
            old != new && (new != MIRRORED || chained.contains(&(b as u32)))
        };
        let changed = (self.homes.iter().zip(&homes).enumerate())
            .position(|(b, (&old, &new))| moves(b, old, new));
        match changed {
            None => Ok(homes),
            Some(b) => Err(format!(
                "on {} threads this amendment would make barrier {b} wait for flows of more \
                 partitions than it did while arrivals chained to it may be pending in its \
                 partition alone: run it with threads = 1",
                self.parts.len()
            )),
        }
    }

    /// Amend every partition alike, at a window's end, after the view (folded, then amended)
    /// took `a`: the barriers' new `homes` ([`Parallel::homes_after`] of the amended `plan`),
    /// only the flows the view cancelled cancelled (a partition's copy of a flow knows whether
    /// it started only where it started), and the tight barriers brought up to date.
    ///
    /// `in_network`: the appended flows are an in-network call on this tree of the plan's, which
    /// every partition learns alike (`World::amend_with`).
    pub fn amend(
        &mut self,
        a: &super::amend::Amendment,
        not_cancelled: &[FlowId],
        plan: &crate::workload::FlowPlan,
        homes: Vec<u16>,
        view: &World,
        in_network: Option<(u32, crate::config::CollectiveOp)>,
    ) {
        let homes = Arc::new(homes);
        // (A run with amendments has a controller: its windows are the shortest link's.)
        let tight = tight_barriers(plan, &homes, MIRRORED, self.lookahead);
        let mut a = a.clone();
        a.cancel.retain(|f| !not_cancelled.contains(f));
        let first = FlowId::new(self.parts[0].flows.len() as u32);
        // A flow the view retired started (and finished).
        let status = |fid: FlowId| {
            (!view.is_cancelled(fid)).then(|| view.flows.get(fid).is_none_or(|f| f.started))
        };
        // A barrier its home ran that every partition counts from now on: each takes its count
        // so far (`homes_after` allowed it: no chained arrival can be pending elsewhere).
        for (b, (&old, &new)) in self.homes.iter().zip(homes.iter()).enumerate() {
            if old != new && old != MIRRORED {
                let h = &self.parts[old as usize].barriers[b];
                let (remaining, latest, released_at, dead) =
                    (h.remaining, h.latest, h.released_at, h.dead);
                for w in &mut self.parts {
                    let mine = &mut w.barriers[b];
                    mine.remaining = remaining;
                    mine.latest = latest;
                    mine.released_at = released_at;
                    mine.dead = dead;
                }
            }
        }
        let feeders = Arc::new(in_network_feeders(plan));
        for w in &mut self.parts {
            let part = w.partition.as_mut().expect("a partition");
            part.barrier_home = Arc::clone(&homes);
            part.inr_feeders = Arc::clone(&feeders);
            // At a control boundary every partition is at the same point of the order.
            part.merged = true;
            let inr = in_network.map(|(tree, op)| {
                let p = plan
                    .in_network
                    .as_deref()
                    .expect("an in-network call's plan");
                (p, tree, op)
            });
            let amended = w.amend_with(&a, inr);
            w.partition.as_mut().expect("a partition").merged = false;
            if let Err(e) = amended {
                // Each partition's barriers are the view's where it runs them.
                unreachable!("a partition refused what the view took: {e}");
            }
            w.amend_tight(&tight, first, &a.cancel, status);
        }
        self.homes = homes;
    }

    /// Every port's counters now (live telemetry): from the partition that owns its node, with
    /// the ECN marks and pause frames summed over the partitions (each is counted where it
    /// happened, once).
    pub fn port_counters(&self) -> Vec<super::live::PortCounters> {
        let parts = &self.parts;
        let fabric = &parts[0].fabric;
        fabric
            .ports()
            .map(|p| {
                let mut c = parts[self.owner[fabric.port_node[p]] as usize].port_counter(p);
                c.ecn_marks = parts.iter().map(|w| w.live.ecn_marks[p]).sum();
                c.pause_frames = parts.iter().map(|w| w.live.pause_frames[p]).sum();
                c
            })
            .collect()
    }

    /// No window is long from now on: a controller attached to the run may fail links and
    /// re-plan calls at its boundaries, which the long windows' bounds (worked out from the
    /// build) know nothing of. As a `[control]` section's run, which never has them.
    pub fn keep_the_grid(&mut self) {
        self.long_until = 0;
    }

    /// Keep every packet sent toward another partition until it arrived (`Part::on_wire`), as
    /// runs with faults do: a live controller may fail a link at any boundary. Before the run.
    pub fn track_wires(&mut self) {
        for w in &mut self.parts {
            let np = w.ports.len();
            let part = w.partition.as_mut().expect("a partition");
            if part.on_wire.is_empty() {
                part.on_wire = vec![Default::default(); np];
            }
        }
    }

    /// Packets created (each once, where it was made) and alive, over the partitions.
    pub fn packet_counts(&self) -> (u64, u64) {
        self.parts.iter().fold((0, 0), |(c, l), w| {
            (c + w.packets.created(), l + w.packets.live())
        })
    }

    pub fn check_conservation(&self) -> Result<(), String> {
        let (mut moved_out, mut moved_in) = (0, 0);
        for (i, w) in self.parts.iter().enumerate() {
            w.check_partition_conservation()
                .map_err(|e| format!("partition {i}: {e}"))?;
            let p = w.partition.as_ref().expect("a partition");
            moved_out += p.moved_out;
            moved_in += p.moved_in;
        }
        if moved_out != moved_in {
            return Err(format!("{moved_out} packets moved out, {moved_in} in"));
        }
        Ok(())
    }
}

/// What every partition's thread needs to decide the windows of one `Parallel::run` call.
struct WindowPlan {
    stop: StopAt,
    /// Stop (for now) once the partitions ran this many events in all.
    target: u64,
    window_ps: Time,
    /// The windows' length while the run cannot end within one (`Parallel::lookahead`) ...
    lookahead: Time,
    /// ... and none ends later than this, if it is longer than a grid step.
    long_until: Time,
    /// Stop before the first event at or after this time (NEVER: no limit).
    limit: Time,
}

/// Why the windows stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Halt {
    /// The run ended.
    Ended,
    /// The call's events ran (or a thread panicked): more to come.
    ForNow,
    /// The next event is at or after the call's limit.
    Limit,
    /// The other way of running the windows (on threads, or on one) is now the faster
    /// (`Pace::switch`).
    Switch,
}

impl Halt {
    fn ended(ended: bool) -> Self {
        if ended {
            Halt::Ended
        } else {
            Halt::ForNow
        }
    }
}

/// One partition's state at a window's end, for the others (each on its own cache line).
#[derive(Default)]
#[repr(align(128))]
struct Status {
    /// The time of its next event (`u64::MAX`: none).
    next: AtomicU64,
    events: AtomicU64,
    flows_settled: AtomicU64,
    /// The plan's flows (alike in every partition).
    flows_total: AtomicU64,
    pending_arrivals: AtomicU64,
    /// Its flows with more packets never sent than fit in a long window (`World::long_flows`).
    long_flows: AtomicU64,
    /// The latest it scheduled of what the run waits for (`World::latest_pending`).
    latest_pending: AtomicU64,
    /// The soonest a timeout here may give up on a flow (`World::earliest_give_up`; NEVER:
    /// none may).
    give_up_at: AtomicU64,
    /// How long after the next event no tight barrier waiting for a flow to start can release
    /// (`Tight::reach`).
    reach: AtomicU64,
    /// The deadlock check it asked for in the window (NEVER: none).
    deadlock_check_at: AtomicU64,
    /// A digest of its tight barriers' frontier (`Tight::digest`), which every partition must
    /// agree on.
    frontier: AtomicU64,
    /// The earliest of its pending events that may start an in-network call's flow
    /// (`Part::inr_pending`; NEVER: none).
    inr_next: AtomicU64,
    /// The end of the next elastic re-formation, whose re-plan reads every partition's flows
    /// (`Jobs::replans_due`, alike in every partition; NEVER: none).
    replan_next: AtomicU64,
    /// The least time from what may begin an elastic job's re-formation (a failure, an
    /// iteration's end with ranks out) to its end (`World::elastic_reach`, alike in every
    /// partition; NEVER: none).
    replan_reach: AtomicU64,
    /// Its busy time in the last window, and (the first partition's) the window's wall time,
    /// in ns (`engine::pace`).
    busy: AtomicU64,
    wall: AtomicU64,
}

/// What the threads of one `Parallel::run` call share.
struct Shared {
    barrier: SpinBarrier,
    status: Vec<Status>,
    /// The packets partition `from` sent to partition `to` in the last window, at
    /// `from * n + to` (written by `from` before the barrier, taken by `to` after it).
    mail: Vec<Mutex<Mail>>,
    /// What each partition's ports add to the PFC wait-for graph, at a deadlock check.
    waits: Vec<Mutex<WaitCandidates>>,
    /// Per partition and tight barrier, at `partition * tight + barrier`: the soonest its flows
    /// finishing there allow the barrier to release (`Tight::offset`), for the frontier's.
    offsets: Vec<AtomicU64>,
    tight: usize,
    /// Per partition and in-network tree, at `partition * trees + tree`: the soonest the tree's
    /// running call can end from the partition's flows (`World::inr_end_offset`), for the
    /// trees whose call's end would start a waiting one.
    inr_offsets: Vec<AtomicU64>,
    trees: usize,
    /// In a window run merged: the key of the elastic re-plan every partition runs its copy of
    /// next, each on its own thread ([`merged_phase_run`]), or None.
    replan_at: Mutex<Option<u128>>,
}

/// The windows' schedule, which every thread keeps alike (each decides it from the same
/// statuses): the current window's end and the next deadlock check, and what they cost.
#[derive(Debug, Clone, Copy)]
struct Clock {
    window_end: Time,
    deadlock_check_at: Time,
    /// What the windows cost, on threads or on one thread (which of the two runs them).
    pace: Pace,
    /// The windows decided so far, how many of them ran merged, how many were long, and how
    /// many ran on one thread.
    windows: u64,
    merged: u64,
    long: u64,
    on_one_thread: u64,
}

type Caught = Box<dyn std::any::Any + Send>;

impl Shared {
    fn new(n: usize, tight: usize, trees: usize) -> Self {
        Self {
            inr_offsets: (0..n * trees).map(|_| AtomicU64::new(0)).collect(),
            trees,
            barrier: SpinBarrier::new(n),
            status: (0..n).map(|_| Status::default()).collect(),
            mail: (0..n * n).map(|_| Mutex::default()).collect(),
            waits: (0..n).map(|_| Mutex::default()).collect(),
            offsets: (0..n * tight).map(|_| AtomicU64::new(0)).collect(),
            tight,
            replan_at: Mutex::new(None),
        }
    }

    /// Run `f`; if it panics, poison the barrier so that the other threads stop waiting.
    fn guard<T>(&self, f: impl FnOnce() -> T) -> Result<T, Caught> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).inspect_err(|_| {
            self.barrier.poisoned.store(true, Ordering::Release);
        })
    }

    /// The next window's end and whether it runs merged, or Err when the run stops here (true:
    /// it ended), decided from every partition's status: each thread decides it alike. A
    /// deadlock check asked for in the last window is scheduled (the earliest asked: one
    /// world's), and is an event like any. A window runs merged when a barrier of the tight
    /// barriers' `frontier` (the same in every partition) may release in it: when, from the
    /// next event on, the latest of the partitions' offsets for it ends before the window does.
    ///
    /// With in-network calls it also runs merged when an event that may start a call's flow
    /// falls in it anywhere, or when a call whose end starts a waiting one (`blocking`, trees
    /// alike everywhere) may end in it: its end starts that call at once.
    fn decide(
        &self,
        plan: &WindowPlan,
        clock: &mut Clock,
        frontier: &[u32],
        blocking: &[u32],
    ) -> Result<(Time, bool), Halt> {
        let (end, next) = self.decide_end(plan, clock)?;
        let n = self.status.len();
        let digest = self.status[0].frontier.load(Ordering::Relaxed);
        // (A disagreement would be a bug; every thread finds it alike and stops with an error
        // instead of taking different windows.)
        assert!(
            (self.status.iter()).all(|s| s.frontier.load(Ordering::Relaxed) == digest),
            "parallel engine: the partitions disagree on the barriers that may release"
        );
        // The soonest any of `ids` may end: by the latest of the partitions' bounds (`per` of
        // them per partition in `offsets`), counted from the next event (NEVER: none).
        let soonest = |ids: &[u32], offsets: &[AtomicU64], per: usize| {
            (ids.iter())
                .map(|&i| {
                    let offset = (0..n)
                        .map(|p| offsets[p * per + i as usize].load(Ordering::Relaxed))
                        .max()
                        .unwrap_or(0);
                    next.saturating_add(offset)
                })
                .min()
                .unwrap_or(NEVER)
        };
        let release = soonest(frontier, &self.offsets, self.tight);
        let step = (next / plan.window_ps + 1).saturating_mul(plan.window_ps);
        let mut end = end;
        let mut merged = release < end;
        if merged && plan.lookahead > plan.window_ps {
            // A long window ends where a tight barrier may first release, unless that is
            // within one grid step: that step runs merged, as without long windows.
            if release >= step {
                end = release;
                merged = false;
            } else {
                end = end.min(step);
            }
        }
        let inr_next = (self.status.iter())
            .map(|s| s.inr_next.load(Ordering::Relaxed))
            .min()
            .unwrap_or(NEVER);
        let ends = soonest(blocking, &self.inr_offsets, self.trees) < end;
        // (A window that may hold a give-up is a grid step: `decide_end`.)
        let replan_next = self.status[0].replan_next.load(Ordering::Relaxed);
        // (A grid step longer than a failure takes to end in a re-plan may hold both.)
        let replan_reach = self.status[0].replan_reach.load(Ordering::Relaxed);
        let merged = merged
            || ends
            || inr_next < end
            || replan_next < end
            || next.saturating_add(replan_reach) < end
            || self.soonest_give_up() < end;
        clock.windows += 1;
        clock.merged += merged as u64;
        clock.long += (end > step) as u64;
        Ok((end, merged))
    }

    /// The soonest any partition may give up on a flow (`Status::give_up_at`).
    fn soonest_give_up(&self) -> Time {
        (self.status.iter())
            .map(|s| s.give_up_at.load(Ordering::Relaxed))
            .min()
            .unwrap_or(NEVER)
    }

    /// The next window's end, and the time of the next event anywhere (or check).
    fn decide_end(&self, plan: &WindowPlan, clock: &mut Clock) -> Result<(Time, Time), Halt> {
        if clock.deadlock_check_at == NEVER {
            clock.deadlock_check_at = self
                .status
                .iter()
                .map(|s| s.deadlock_check_at.load(Ordering::Relaxed))
                .min()
                .unwrap_or(NEVER);
        }
        let sum = |get: fn(&Status) -> &AtomicU64| -> u64 {
            self.status
                .iter()
                .map(|s| get(s).load(Ordering::Relaxed))
                .sum()
        };
        let events = sum(|s| &s.events);
        let busy = self.status.iter().map(|s| s.busy.load(Ordering::Relaxed));
        clock
            .pace
            .count(busy, self.status[0].wall.load(Ordering::Relaxed), events);
        let window_end = &mut clock.window_end;
        if events >= plan.target {
            return Err(Halt::ForNow);
        }
        let next = self
            .status
            .iter()
            .map(|s| s.next.load(Ordering::Relaxed))
            .chain([clock.deadlock_check_at])
            .min()
            .filter(|&t| t != NEVER);
        let w = plan.window_ps;
        // A grid step from `t`, or a long window when the run cannot end within it and no
        // tight barrier waiting for a flow to start can release within it.
        let reach = (self.status.iter())
            .map(|s| s.reach.load(Ordering::Relaxed))
            .min()
            .unwrap_or(NEVER)
            .min(plan.lookahead);
        let latest = (self.status.iter())
            .map(|s| s.latest_pending.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        let waits = matches!(plan.stop, StopAt::Time(_)) || sum(|s| &s.long_flows) > 0;
        // A give-up settles a flow at once (and ends the barriers waiting for it): a window
        // that may hold one is a grid step, as one world's stop rules are checked on the grid,
        // and runs merged (`decide`).
        let give_up = self.soonest_give_up();
        // So is one that may hold an elastic re-plan (it changes the plan the bounds are made of),
        // and none is longer than a failure takes to end in one: a failure in a window schedules
        // its re-plan after the window's end, known when the next window is decided.
        let replan = self.status[0].replan_next.load(Ordering::Relaxed);
        let replan_reach = self.status[0].replan_reach.load(Ordering::Relaxed);
        let step = |t: Time| {
            let grid = (t / w + 1).saturating_mul(w);
            let end = (t.saturating_add(reach))
                .min(plan.long_until)
                .min(give_up)
                .min(replan)
                .min(t.saturating_add(replan_reach));
            // (Something still to come at or after the window's end: the run cannot end in it.)
            if reach > w && (waits || latest >= end) {
                grid.max(end)
            } else {
                grid
            }
        };
        // One world's order of the stop rules (`World::run_events_until`): all flows done, then
        // the limit (a control boundary, which windows end at), then the stop time.
        let limit = plan.limit;
        let before_stop = match plan.stop {
            StopAt::Time(stop) => limit <= stop,
            StopAt::AllFlowsDone => true,
        };
        let at_limit = |t: Time| limit != NEVER && before_stop && t >= limit;
        match plan.stop {
            StopAt::AllFlowsDone => {
                let t = next.ok_or(Halt::Ended)?;
                if t >= *window_end {
                    // (The plan's flows as of now: an elastic re-plan appends some.)
                    let total = self.status[0].flows_total.load(Ordering::Relaxed);
                    let done =
                        sum(|s| &s.flows_settled) == total && sum(|s| &s.pending_arrivals) == 0;
                    if done {
                        return Err(Halt::Ended);
                    }
                    *window_end = step(t);
                }
                if at_limit(t) {
                    return Err(Halt::Limit);
                }
                Ok(((*window_end).min(limit), t))
            }
            StopAt::Time(stop) => {
                if next.is_some_and(at_limit) {
                    return Err(Halt::Limit);
                }
                let t = next.filter(|&t| t <= stop).ok_or(Halt::Ended)?;
                let end = step(t).min(stop.saturating_add(1));
                Ok((end.min(limit), t))
            }
        }
    }
}

/// Every partition on its own thread (the first on this one) until the run stops or one
/// thread would be faster ([`Halt::Switch`]).
fn threads(
    pool: &rayon_core::ThreadPool,
    cells: &[Mutex<&mut World>],
    shared: &Shared,
    owner: &IdVec<NodeId, u16>,
    plan: &WindowPlan,
    start: Clock,
) -> (Clock, Halt) {
    let n = cells.len();
    // A worker's panic, caught (it poisoned the barrier) and raised here.
    let caught: Mutex<Option<Caught>> = Mutex::new(None);
    let mine = pool.in_place_scope(|s| {
        for i in 1..n {
            let caught = &caught;
            s.spawn(move |_| {
                if let Err(p) = shared.guard(|| work(i, cells, shared, owner, plan, start)) {
                    *caught.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
                }
            });
        }
        shared.guard(|| work(0, cells, shared, owner, plan, start))
    });
    if let Some(p) = caught.into_inner().unwrap_or_else(|e| e.into_inner()) {
        std::panic::resume_unwind(p);
    }
    mine.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Partition `me`'s thread: windows until the run stops (returns the schedule and why it
/// stopped), or until one thread would run the windows faster ([`Halt::Switch`], at a window's
/// end, alike in every thread). A poisoned barrier (another thread panicked) stops it at once.
fn work(
    me: usize,
    cells: &[Mutex<&mut World>],
    shared: &Shared,
    owner: &IdVec<NodeId, u16>,
    plan: &WindowPlan,
    mut clock: Clock,
) -> (Clock, Halt) {
    let lock = |i: usize| cells[i].lock().unwrap_or_else(|e| e.into_inner());
    // The in-network trees whose call's end would start a waiting one (alike everywhere).
    let mut blocking: Vec<u32> = Vec::new();
    // This partition's busy time, and the windows' wall time (`engine::pace`).
    let mut watch = Watch::new();
    // A barrier's wait, which is no partition's work.
    let meet = |watch: &mut Watch| {
        watch.stop();
        let passed = shared.barrier.wait();
        watch.go();
        passed
    };
    loop {
        let mut world = lock(me);
        let lap = watch.lap();
        post_status(me, &mut world, shared, owner, plan, &mut blocking, lap);
        if !meet(&mut watch) {
            return (clock, Halt::ForNow);
        }
        // Everyone reads the statuses before anyone writes them again: the next write comes
        // after the second barrier, which each thread reaches only after deciding.
        let frontier = world.tight_frontier();
        let (end, merged) = match shared.decide(plan, &mut clock, frontier, &blocking) {
            Ok(next) => next,
            Err(halt) => {
                stop_at(&mut world, halt, plan);
                return (clock, halt);
            }
        };
        world.deadlock_check_pending = clock.deadlock_check_at != NEVER;
        if clock.deadlock_check_at < end {
            let check = clock.deadlock_check_at;
            if merged {
                drop(world);
                let key = key_ahead(check, Event::DeadlockCheck);
                if !merged_phase(me, cells, shared, key, &mut watch) {
                    return (clock, Halt::ForNow);
                }
                world = lock(me);
            }
            post_waits(me, &mut world, shared, check);
            if !meet(&mut watch) {
                return (clock, Halt::ForNow);
            }
            // Read before anyone writes again: the next check is a window (two barriers) later.
            match judge_deadlock(me, &mut world, shared, check) {
                Some(at) => clock.deadlock_check_at = at,
                None => return (clock, Halt::ended(world.finished)),
            }
        }
        if merged {
            drop(world);
            if !merged_phase(me, cells, shared, (end as u128) << 64, &mut watch) {
                return (clock, Halt::ForNow);
            }
            world = lock(me);
        } else {
            world.run_window(end);
        }
        post_mail(me, &mut world, shared, owner);
        if !meet(&mut watch) {
            return (clock, Halt::ForNow);
        }
        take_mail(me, &mut world, shared);
        if clock.pace.switch(false) {
            return (clock, Halt::Switch);
        }
    }
}

/// Every partition's windows on this thread, the steps of [`work`] taken by one partition after
/// another, until the run stops or threads would be faster again ([`Halt::Switch`], at a
/// window's end). A window's partitions need nothing from each other but its mail, so running
/// them in turn gives what the threads give.
fn serial(
    parts: &mut [&mut World],
    shared: &Shared,
    owner: &IdVec<NodeId, u16>,
    plan: &WindowPlan,
    mut clock: Clock,
) -> (Clock, Halt) {
    let mut blocking: Vec<u32> = Vec::new();
    // The windows' wall time (`engine::pace`; partitions' busy times are not needed here).
    let mut watch = Watch::new();
    loop {
        let (_, wall) = watch.lap();
        for (me, w) in parts.iter_mut().enumerate() {
            post_status(me, w, shared, owner, plan, &mut blocking, (0, wall));
        }
        let frontier = parts[0].tight_frontier();
        let (end, merged) = match shared.decide(plan, &mut clock, frontier, &blocking) {
            Ok(next) => next,
            Err(halt) => {
                for w in parts.iter_mut() {
                    stop_at(w, halt, plan);
                }
                return (clock, halt);
            }
        };
        clock.on_one_thread += 1;
        for w in parts.iter_mut() {
            w.deadlock_check_pending = clock.deadlock_check_at != NEVER;
        }
        if clock.deadlock_check_at < end {
            let check = clock.deadlock_check_at;
            if merged {
                watch.skipping(|| {
                    run_merged_flagged(parts, key_ahead(check, Event::DeadlockCheck), false)
                });
            }
            for (me, w) in parts.iter_mut().enumerate() {
                post_waits(me, w, shared, check);
            }
            // One judgement for all (on threads each makes it, alike); the first partition's
            // answer is the run's.
            let (cycle, any_paused) = judge_graph(shared);
            let mut first = None;
            for (me, w) in parts.iter_mut().enumerate().rev() {
                first = settle_deadlock(me, w, cycle.clone(), any_paused, check);
            }
            match first {
                Some(at) => clock.deadlock_check_at = at,
                None => return (clock, Halt::ended(parts[0].finished)),
            }
        }
        if merged {
            watch.skipping(|| run_merged_flagged(parts, (end as u128) << 64, false));
        } else {
            for w in parts.iter_mut() {
                w.run_window(end);
            }
        }
        for (me, w) in parts.iter_mut().enumerate() {
            post_mail(me, w, shared, owner);
        }
        for (me, w) in parts.iter_mut().enumerate() {
            take_mail(me, w, shared);
        }
        if clock.pace.switch(true) {
            return (clock, Halt::Switch);
        }
    }
}

/// Partition `me`'s state at a window's end, for the next window's decision (`Shared::decide`):
/// its next event, counters, tight barriers' offsets, the in-network trees `blocking`, and its
/// busy time and the window's wall time (ns).
fn post_status(
    me: usize,
    w: &mut World,
    shared: &Shared,
    owner: &IdVec<NodeId, u16>,
    plan: &WindowPlan,
    blocking: &mut Vec<u32>,
    (busy, wall): (u64, u64),
) {
    let status = &shared.status[me];
    status.busy.store(busy, Ordering::Relaxed);
    status.wall.store(wall, Ordering::Relaxed);
    let next = w.events.peek_time().unwrap_or(NEVER);
    status.next.store(next, Ordering::Relaxed);
    status.events.store(w.stats.events, Ordering::Relaxed);
    status
        .flows_settled
        .store(w.flows_settled, Ordering::Relaxed);
    (status.flows_total).store(w.stats.flows_total, Ordering::Relaxed);
    status
        .pending_arrivals
        .store(w.pending_arrivals, Ordering::Relaxed);
    status.long_flows.store(w.long_flows, Ordering::Relaxed);
    (status.latest_pending).store(w.latest_pending, Ordering::Relaxed);
    let give_up_at = if w.faults.len() == 0 && w.circuits.is_none() {
        NEVER // nothing was ever cut off
    } else if !w.faults.settled() {
        // None is given up on until no fault event is left (and what is cut off then is
        // found anew): at the last one scheduled, at the soonest.
        w.partition.as_mut().expect("a partition").forget_cut_offs();
        w.faults.last_event_at()
    } else {
        w.earliest_give_up(next)
    };
    status.give_up_at.store(give_up_at, Ordering::Relaxed);
    status
        .replan_reach
        .store(w.elastic_reach(), Ordering::Relaxed);
    let part = w.partition.as_mut().expect("a partition");
    status.reach.store(part.tight.reach(), Ordering::Relaxed);
    part.tight.prune(&w.barriers, |b| w.jobs.is_held(b));
    for k in 0..part.tight.frontier().len() {
        let b = part.tight.frontier()[k];
        let offset = part.tight.offset(b, &w.flows, plan.lookahead);
        shared.offsets[me * shared.tight + b as usize].store(offset, Ordering::Relaxed);
    }
    status
        .frontier
        .store(part.tight.digest(), Ordering::Relaxed);
    let inr_next = part.inr_pending.peek().map_or(NEVER, |r| r.0);
    status.inr_next.store(inr_next, Ordering::Relaxed);
    let replan_next = w.jobs.replans_due.peek().map_or(NEVER, |r| r.0);
    status.replan_next.store(replan_next, Ordering::Relaxed);

    let asked = std::mem::replace(&mut part.deadlock_check_at, NEVER);
    status.deadlock_check_at.store(asked, Ordering::Relaxed);
    if let Some(inr) = &w.in_network {
        inr.blocking_trees(blocking);
        for &t in blocking.iter() {
            let offset = w.inr_end_offset(t, |n| owner[n] as usize == me, plan.window_ps);
            shared.inr_offsets[me * shared.trees + t as usize].store(offset, Ordering::Relaxed);
        }
    }
}

/// Where a partition's clock stands when the windows stop for `halt`.
fn stop_at(world: &mut World, halt: Halt, plan: &WindowPlan) {
    match (halt, plan.stop) {
        // As in one world (`World::run_events_until`): at the stop time if an event is left
        // after it, else at the last event (the view takes the latest partition's).
        (Halt::Ended, StopAt::Time(stop)) if world.events.peek_time().is_some() => world.now = stop,
        // At a control boundary the world is as at `limit`, before its events.
        (Halt::Limit, _) => world.now = world.now.max(plan.limit),
        _ => {}
    }
}

/// Post what partition `me` sent the others in the window (`shared.mail[me * n + to]`): each
/// mailbox is locked once, and only if something goes to it.
fn post_mail(me: usize, world: &mut World, shared: &Shared, owner: &IdVec<NodeId, u16>) {
    let n = shared.status.len();
    let part = world.partition.as_mut().expect("a partition");
    let told_all = !(part.outbox.arrivals.is_empty()
        && part.outbox.dead.is_empty()
        && part.tight.started.is_empty()
        && part.outbox.inr.is_empty());
    let routed = !(part.outbox.credits.is_empty() && part.news_out.is_empty());
    for to in (0..n).filter(|&to| to != me) {
        let parcel = &mut part.parcels[to];
        if parcel.packets.is_empty() && !told_all && !routed {
            continue;
        }
        let mut mail = shared.mail[me * n + to].lock().expect("not poisoned");
        // The reader emptied the mailbox, keeping its lists' room, which the next parcel
        // takes.
        debug_assert!(mail.parcel.packets.is_empty() && mail.parcel.int.is_empty());
        std::mem::swap(&mut mail.parcel, parcel);
        if told_all {
            let (told, outbox) = (&mut mail.told, &part.outbox);
            told.arrivals.extend_from_slice(&outbox.arrivals);
            told.dead.extend_from_slice(&outbox.dead);
            told.inr.extend_from_slice(&outbox.inr);
            mail.started.extend_from_slice(&part.tight.started);
        }
        if routed {
            let flows = &world.flows;
            let credits = part.outbox.credits.iter();
            let credits = credits.filter(|c| usize::from(owner[flows[c.0].dst]) == to);
            mail.told.credits.extend(credits);
            let news = part
                .news_out
                .iter()
                .filter(|&&(_, t, _)| usize::from(t) == to);
            mail.news.extend(news.map(|&(fid, _, what)| (fid, what)));
        }
    }
    part.outbox.inr.clear();
    part.outbox.arrivals.clear();
    part.outbox.dead.clear();
    part.tight.started.clear();
    part.outbox.credits.clear();
    part.news_out.clear();
}

/// The event-queue stream (`EventQueue::push_in_stream`) of a packet partition `from` handed
/// over: a lane per sending partition and size class. A window's mail comes in its order of
/// sending, and a link's arrivals are its sends plus the serialisation: an acknowledgement sent
/// just after a full packet arrives before it, so in one lane half of the k=16 permutation's
/// packets handed over on two threads passed more entries than a lane insertion allows and went
/// to the general heap. Packets of one size class keep their order of sending.
fn mail_stream(from: usize, packet: &crate::packet::Packet) -> usize {
    const SMALL: u32 = 512;
    2 * from + usize::from(packet.wire_bytes <= SMALL)
}

/// Take in what the others sent partition `me` in the window: in partition order, and each
/// partition's sending order (a link's packets keep their order).
fn take_mail(me: usize, world: &mut World, shared: &Shared) {
    let n = shared.status.len();
    // (Nothing is posted to oneself.)
    for from in (0..n).filter(|&from| from != me) {
        let mut mail = shared.mail[from * n + me].lock().expect("not poisoned");
        let Mail {
            parcel: Parcel { packets, int },
            told:
                Outbox {
                    arrivals,
                    dead,
                    credits,
                    inr,
                },
            started,
            news,
        } = &mut *mail;
        let part = world.partition.as_mut().expect("a partition");
        for b in started.drain(..) {
            part.tight.count_start(b);
        }
        for (fid, what) in news.drain(..) {
            world.take_news(fid, what);
        }
        if let Some(c) = &mut world.credits {
            for (fid, owed, unsolicited) in credits.drain(..) {
                c.owed[fid] = owed;
                c.unsolicited_left[fid] = unsolicited;
            }
        }
        for (i, t) in packets.drain(..).enumerate() {
            world.receive_remote(from, t, int.get(i));
        }
        int.clear();
        // Late, but what they release comes a window after them at the soonest: a barrier
        // that releases sooner is told at once, in a window run merged.
        for (at, b) in arrivals.drain(..) {
            world.barrier_arrive_at(b, at);
        }
        // Only counters change (the barrier never releases anywhere), and those are read at
        // window ends: in time.
        for b in dead.drain(..) {
            world.barrier_dead(b);
        }
        // Flows of in-network calls that finished there: in time, since no call waited
        // (else the window ran merged and each was told at once).
        for gate in inr.drain(..) {
            world.inr_told(gate);
        }
    }
}

/// Every thread lets go of its partition, partition 0's thread runs all of them merged up to
/// `end` (an event key), and every thread goes on. False when the run stops (a thread panicked).
fn merged_phase(
    me: usize,
    cells: &[Mutex<&mut World>],
    shared: &Shared,
    end: u128,
    watch: &mut Watch,
) -> bool {
    // One thread either way: no partition's work, and not in the windows' wall time.
    watch.stop();
    let passed = watch.skipping(|| merged_phase_run(me, cells, shared, end));
    watch.go();
    passed
}

fn merged_phase_run(me: usize, cells: &[Mutex<&mut World>], shared: &Shared, end: u128) -> bool {
    let lock = |i: usize| cells[i].lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if !shared.barrier.wait() {
            return false;
        }
        if me == 0 {
            let mut guards: Vec<_> = (0..cells.len()).map(lock).collect();
            let mut worlds: Vec<&mut World> = guards.iter_mut().map(|g| &mut ***g).collect();
            let replan = run_merged_flagged(&mut worlds, end, true);
            *shared.replan_at.lock().unwrap_or_else(|e| e.into_inner()) = replan;
        }
        if !shared.barrier.wait() {
            return false;
        }
        let replan = *shared.replan_at.lock().unwrap_or_else(|e| e.into_inner());
        let Some(key) = replan else {
            return true;
        };
        // Each partition runs its copy of the re-plan on its own thread (they exchange
        // nothing: `run_merged`), then one thread goes on with every partition's events.
        let mut w = lock(me);
        let part = w.partition.as_mut().expect("a partition");
        part.merged = true;
        if w.events.peek_key_before(key + 1) == Some(key) {
            let (t, ev) = w.events.pop().expect("peeked");
            w.now = t;
            w.handle_in_partition(ev);
        }
        let part = w.partition.as_mut().expect("a partition");
        part.fates = None;
        part.merged = false;
    }
}

/// [`run_merged`], with every partition marked merged while it runs.
fn run_merged_flagged(parts: &mut [&mut World], end: u128, replans_apart: bool) -> Option<u128> {
    let set_merged = |worlds: &mut [&mut World], on: bool| {
        for w in worlds.iter_mut() {
            w.partition.as_mut().expect("a partition").merged = on;
        }
    };
    set_merged(parts, true);
    let replan = run_merged(parts, end, replans_apart);
    set_merged(parts, false);
    replan
}

/// Run every partition's events before `end` (an event key) as one world would, in the order of
/// their keys, on this thread: the partition whose next event comes first runs until another's
/// comes first, and an arrival it makes at a barrier other partitions count too is told to them
/// at once, from that very point in the order (`EventQueue::follow`), so that the barrier
/// releases in every partition at the instant and round it does in one world. The windows whose
/// barriers may release sooner than the lookahead after their last arrival run so.
///
/// With `replans_apart`, it stops before an elastic job's re-plan, which every partition runs a
/// copy of under one key, one after the other, and returns that key, the partitions' fates of
/// the job's flows installed: each partition may then run its copy on its own thread, since a
/// re-plan tells other partitions nothing (it finishes no flow; an in-network call's gate
/// could, so not in a run with in-network reduction). Each copy was half the time of a
/// 1,024-GPU elastic job on two threads (2026-12-05).
fn run_merged(parts: &mut [&mut World], end: u128, replans_apart: bool) -> Option<u128> {
    let replans_apart = replans_apart && parts.iter().all(|w| w.in_network.is_none());
    // Messages left from copies of a re-plan run apart (none expected), told now.
    for i in 0..parts.len() {
        tell_others(parts, i);
    }
    loop {
        let mut first: Option<(u128, usize)> = None;
        let mut bound = end;
        for (i, w) in parts.iter_mut().enumerate() {
            let Some(k) = w.events.peek_key_before(end) else {
                continue;
            };
            match first {
                Some((f, _)) if f <= k => bound = bound.min(k),
                _ => {
                    if let Some((f, _)) = first {
                        bound = bound.min(f);
                    }
                    first = Some((k, i));
                }
            }
        }
        let (_, i) = first?;
        // At least its next event (another partition's copy of one event, a sample or a
        // fault, may have the same key: either order is one world's).
        loop {
            let next = parts[i].events.next_event().expect("peeked");
            let replan = parts[i].elastic_replan_job(next);
            if let Some(j) = replan {
                install_fates(parts, i, j);
                if replans_apart {
                    // (No partition's next event comes before it.)
                    return parts[i].events.peek_key_before(end);
                }
            }
            let (t, ev) = parts[i].events.pop().expect("peeked");
            debug_assert_eq!(ev, next);
            let w = &mut *parts[i];
            w.now = t;
            w.handle_in_partition(ev);
            if replan.is_some() {
                w.partition.as_mut().expect("a partition").fates = None;
            }
            let part = w.partition.as_ref().expect("a partition");
            let outbox = &part.outbox;
            let told =
                !outbox.arrivals.is_empty() || !outbox.inr.is_empty() || !part.news_out.is_empty();
            if told || w.events.peek_key_before(bound).is_none() {
                break;
            }
        }
        tell_others(parts, i);
    }
}

/// In a window run merged, after partition `i`'s last event: what it tells the others, they
/// learn now, from that very point in the order.
fn tell_others(parts: &mut [&mut World], i: usize) {
    // A flow finished or given up on here: its other end's partition learns of it now, as
    // one world's one record tells it (a finish before a give-up stops it, and after it
    // counts for nothing).
    let part = parts[i].partition.as_mut().expect("a partition");
    let news = std::mem::take(&mut part.news_out);
    for &(fid, to, what) in &news {
        parts[to as usize].take_news(fid, what);
    }
    let w = &mut *parts[i];
    let part = w.partition.as_mut().expect("a partition");
    if part.outbox.arrivals.is_empty() && part.outbox.inr.is_empty() {
        return;
    }
    let arrivals = std::mem::take(&mut part.outbox.arrivals);
    let gates = std::mem::take(&mut part.outbox.inr);
    let (now, round) = (w.now, w.events.round());
    for (j, other) in parts.iter_mut().enumerate() {
        if j == i {
            continue;
        }
        for &(at, b) in &arrivals {
            other.events.follow(at, round);
            other.barrier_arrive_at(b, at);
        }
        if !gates.is_empty() {
            // As if the change had been made in this partition, at that point: a waiting
            // call it starts starts here at this instant too.
            other.events.follow(now, round);
            other.now = now;
            for &gate in &gates {
                other.inr_told(gate);
            }
        }
    }
}

/// Before elastic job `j`'s re-plan event runs in partition `i` (in a window run merged, where
/// every partition ran every event before it): unless the first partition to run it did
/// already, every partition is given the [`Fate`] of each of the job's op flows, as one world's
/// one record would tell it (started and gone from its sender's partition, finished from its
/// receiver's). Each partition then re-plans from the same fates, though the first to run the
/// event changed its own copies before the next runs it.
fn install_fates(parts: &mut [&mut World], i: usize, j: usize) {
    if parts[i]
        .partition
        .as_ref()
        .expect("a partition")
        .fates
        .is_some()
    {
        return;
    }
    let owner = Arc::clone(&parts[i].partition.as_ref().expect("a partition").owner);
    let mut flows = parts[i].elastic_open_flows(j);
    flows.sort_unstable();
    let mut fates = Vec::with_capacity(flows.len());
    for fid in flows {
        let (src, dst) = parts[i].flow_ends(fid);
        let (src, dst) = (&parts[owner[src] as usize], &parts[owner[dst] as usize]);
        // A copy a partition forgot (the view retired the flow: it finished) has no record;
        // neither has one not started (its sender's) or whose packets have not come (its
        // receiver's).
        let fate = match (src.flows.get(fid), dst.flows.get(fid)) {
            (_, None) if dst.flows.is_retired(fid) => Fate {
                started: true,
                finished: true,
                gone: false,
            },
            (sender, receiver) => Fate {
                started: sender.map_or(src.flows.is_retired(fid), |f| f.started),
                finished: receiver.is_some_and(|f| f.finished()),
                gone: sender.is_some_and(|f| f.withdrawn || f.abandoned),
            },
        };
        fates.push((fid, fate));
    }
    let fates = Arc::new(fates);
    for w in parts.iter_mut() {
        w.partition.as_mut().expect("a partition").fates = Some(Arc::clone(&fates));
    }
}

/// The first half of the PFC deadlock check due at `at`, in partition `me`: run what comes
/// before it and post what its ports add to the fabric's wait-for graph. Once every partition
/// posted, [`judge_deadlock`] judges the whole graph as one world would at that event.
fn post_waits(me: usize, world: &mut World, shared: &Shared, at: Time) {
    world.run_before_key(key_ahead(at, Event::DeadlockCheck));
    world.now = at;
    let mut mine = WaitCandidates::default();
    world.wait_candidates(&mut mine);
    *shared.waits[me].lock().expect("not poisoned") = mine;
}

/// The second half of the deadlock check due at `at`, in partition `me` (each alike; partition
/// 0 counts it): returns the next check's time (NEVER: none), or None when a deadlock ended
/// the run.
fn judge_deadlock(me: usize, world: &mut World, shared: &Shared, at: Time) -> Option<Time> {
    let (cycle, any_paused) = judge_graph(shared);
    settle_deadlock(me, world, cycle, any_paused, at)
}

/// The whole fabric's wait-for graph, from what every partition posted: a cycle in it, if
/// any, and whether any port is paused. The same for every partition.
fn judge_graph(shared: &Shared) -> (Option<Vec<u32>>, bool) {
    let mut all = WaitCandidates::default();
    for w in &shared.waits {
        let w = w.lock().expect("not poisoned");
        all.any_paused |= w.any_paused;
        all.paused.extend_from_slice(&w.paused);
        all.waits.extend_from_slice(&w.waits);
    }
    // Each port is paused in one partition only (its own); the others' copies never are.
    all.paused.sort_unstable();
    let paused = |p: PortId| {
        all.paused
            .binary_search_by_key(&p, |&(q, _)| q)
            .map_or(0, |i| all.paused[i].1)
    };
    let edges = all.edges(paused);
    (pfc::find_cycle(&edges), all.any_paused)
}

/// Partition `me`'s outcome of the deadlock check due at `at` that found `cycle`: see
/// [`judge_deadlock`].
fn settle_deadlock(
    me: usize,
    world: &mut World,
    cycle: Option<Vec<u32>>,
    any_paused: bool,
    at: Time,
) -> Option<Time> {
    if me == 0 {
        world.stats.events += 1; // the check is one event of the run
    }
    let again = world.settle_deadlock_check(cycle, any_paused, me == 0);
    if world.finished {
        return None;
    }
    world.deadlock_check_pending = again;
    Some(if again { at + DEADLOCK_CHECK_PS } else { NEVER })
}

/// A barrier for the partitions' threads, which meet at it twice a window (thousands of times
/// a second): it spins briefly, then yields, rather than sleeping in the kernel.
struct SpinBarrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    /// A thread panicked: the others stop waiting.
    poisoned: AtomicBool,
}

impl SpinBarrier {
    fn new(n: usize) -> Self {
        Self {
            n,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    /// Wait for all `n` threads; false if the barrier was poisoned.
    fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation
                .store(generation.wrapping_add(1), Ordering::Release);
            return !self.poisoned.load(Ordering::Acquire);
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if self.poisoned.load(Ordering::Acquire) {
                return false;
            }
            if spins < 2048 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        !self.poisoned.load(Ordering::Acquire)
    }
}

/// Add one partition's counters to the whole run's: counts add up, maxima take the larger, the
/// first deadlock the earlier. Exhaustive (no `..`): a new counter must say how it merges.
fn absorb(into: &mut RunStats, s: &RunStats) {
    let RunStats {
        simulated_ps: _,
        events,
        packet_hops,
        packets_created: _,
        packets_delivered,
        packets_dropped,
        packets_in_flight: _,
        data_packets_sent,
        retransmitted_packets,
        control_packets_sent,
        timeouts,
        flows_total: _,
        flows_started,
        flows_finished,
        max_queue_bytes,
        lossless_drops,
        ecn_marks,
        cnps_sent,
        pfc_pause_frames,
        pfc_resume_frames,
        paused_ps: _,
        pfc_deadlocks,
        first_deadlock_ps,
        out_of_order_packets,
        link_fault_drops,
        unreachable_drops,
        corrupted_drops,
        faults_applied,
        link_down_ps: _,
        ocs_reconfigurations,
        ocs_circuit_ps_lost: _,
        flows_unreachable,
        packets_nonminimal: _,
        data_packets_nonminimal: _,
        control_packets_nonminimal: _,
        max_global_hops: _,
        uplink_utilisation_min: _,
        uplink_utilisation_mean: _,
        uplink_utilisation_max: _,
        uplink_utilisation_cv: _,
        trimmed_packets,
        pulls_sent,
        flows_cancelled,
        in_network_calls: _,
        in_network_fallbacks: _,
        reduction_contexts: _,
        reduction_operands: _,
        reduction_combined: _,
        reduction_duplicates: _,
        reduction_repairs: _,
        reduction_buffer_peak_bytes: _,
        in_network_waits: _,
    } = s;
    into.events += events;
    into.packet_hops += packet_hops;
    into.packets_delivered += packets_delivered;
    into.packets_dropped += packets_dropped;
    into.data_packets_sent += data_packets_sent;
    into.retransmitted_packets += retransmitted_packets;
    into.control_packets_sent += control_packets_sent;
    into.timeouts += timeouts;
    into.flows_started += flows_started;
    into.flows_finished += flows_finished;
    into.max_queue_bytes = into.max_queue_bytes.max(*max_queue_bytes);
    into.lossless_drops += lossless_drops;
    into.ecn_marks += ecn_marks;
    into.cnps_sent += cnps_sent;
    into.pfc_pause_frames += pfc_pause_frames;
    into.pfc_resume_frames += pfc_resume_frames;
    into.pfc_deadlocks += pfc_deadlocks;
    into.first_deadlock_ps = match (into.first_deadlock_ps, *first_deadlock_ps) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    into.out_of_order_packets += out_of_order_packets;
    into.link_fault_drops += link_fault_drops;
    into.unreachable_drops += unreachable_drops;
    into.corrupted_drops += corrupted_drops;
    into.faults_applied += faults_applied;
    into.ocs_reconfigurations += ocs_reconfigurations;
    into.flows_unreachable += flows_unreachable;
    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    into.trimmed_packets = add(into.trimmed_packets, *trimmed_packets);
    into.pulls_sent = add(into.pulls_sent, *pulls_sent);
    into.flows_cancelled += flows_cancelled;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A partition's switches' buffer counters are checked with its packets: a count off by one
    /// byte at one switch fails the run's check, naming the partition.
    #[test]
    fn a_partition_whose_buffer_counters_are_off_fails_the_check() {
        let (_, s) = crate::scenario::parse_toml(
            "threads = 2\nstop = \"20us\"\n\
             [topology]\nkind = \"fat_tree\"\nk = 4\nlink_rate = \"100Gbps\"\n\
             [[workload]]\nkind = \"incast\"\nreceiver = 0\nsenders = 8\nsize = \"1MB\"",
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let mut sim = crate::Simulation::build(&s).unwrap_or_else(|e| panic!("{e}"));
        sim.run_to_end();
        let par = sim.parallel.as_mut().expect("two threads");
        // (Queued at the receiver's switches when the run stopped: the counters are busy.)
        let busy = |w: &World| w.switches.buffer.used.iter().any(|&b| b > 0);
        assert!(par.parts.iter().any(busy), "packets queued at the stop");
        par.check_conservation().unwrap_or_else(|e| panic!("{e}"));
        let i = par.parts.iter().position(busy).expect("a partition");
        let w = &mut par.parts[i];
        let node = (w.switches.buffer.used.iter().position(|&b| b > 0)).expect("a switch");
        w.switches.buffer.used[NodeId::new(node as u32)] += 1;
        let e = par.check_conservation().expect_err("a miscount");
        assert!(e.starts_with(&format!("partition {i}: ")), "{e}");
    }

    /// Under a failure process the partitions take their route tables from one sequence, each
    /// table made once: as many as one world makes, every one taken by every partition (none
    /// left pending), and the run the same as one world's.
    #[test]
    fn route_tables_after_faults_are_made_once_for_all_partitions() {
        let text = |threads: u32| {
            format!(
                "threads = {threads}\nseed = 5\nstop = \"300us\"\n\
                 [topology]\nkind = \"fat_tree\"\nk = 4\nlink_rate = \"100Gbps\"\n\
                 [[failure_process]]\ncomponents = \"links\"\ntier = \"fabric\"\n\
                 mtbf = \"200us\"\nmttr = \"20us\"\nuntil = \"250us\"\ndetection = \"2us\"\n\
                 [[workload]]\nkind = \"permutation\"\nsize = \"2MB\""
            )
        };
        let run = |threads: u32| {
            let (_, s) = crate::scenario::parse_toml(&text(threads), "t.toml")
                .unwrap_or_else(|e| panic!("{e}"));
            let mut sim = crate::Simulation::build(&s).unwrap_or_else(|e| panic!("{e}"));
            if threads == 1 {
                // One world counts its changes through a sequence of its own.
                let routes = Arc::new(super::super::faults::SharedRoutes::new(1));
                sim.world_mut().faults.share_routes(routes);
            }
            let stats = sim.run_to_end();
            (sim, stats)
        };
        let (one, one_stats) = run(1);
        let (shared, changes) = one.world().faults.shared_routes().expect("its own");
        assert_eq!(shared.made_and_pending(), (changes, 0));
        assert!(changes > 10, "{changes} reroutes");
        for threads in [2, 3] {
            let (sim, stats) = run(threads);
            assert_eq!(
                format!("{stats:?}"),
                format!("{one_stats:?}"),
                "{threads} threads"
            );
            assert_eq!(sim.flow_rows(), one.flow_rows(), "{threads} threads");
            let par = sim.parallel.as_ref().expect("threads");
            let (shared, _) = par.parts[0].faults.shared_routes().expect("shared");
            assert_eq!(shared.made_and_pending(), (changes, 0), "{threads} threads");
            for w in &par.parts {
                let (_, taken) = w.faults.shared_routes().expect("still shared");
                assert_eq!(taken, changes);
            }
        }
    }

    /// A ring's per-rank steps run where the rank is; an iteration's end, which flows of every
    /// partition reach, is mirrored, and so is a barrier chained to another partition's.
    #[test]
    fn barriers_run_where_their_flows_are_or_everywhere() {
        use crate::workload::{BarrierEdge, FlowInit, FlowPlan, Start};
        let n = |i: u32| NodeId::new(i);
        // Hosts 0, 1 in partition 0; 2, 3 in partition 1.
        let owner: IdVec<NodeId, u16> = IdVec::from_vec(vec![0, 0, 1, 1]);
        let mut plan = FlowPlan::default();
        let step = plan.barrier(1);
        let end = plan.barrier(2);
        let chained = plan.barrier(1);
        let other = plan.barrier(1);
        let after = |barrier, gap| Start::After { barrier, gap };
        let flows = vec![
            // 0 -> 1 finishes at 1, which then sends 1 -> 0: partition 0's barrier.
            FlowInit {
                completes: Some(step),
                ..FlowInit::at(n(0), n(1), 100, 0, 0)
            },
            FlowInit {
                start: after(step, 0),
                completes: Some(end),
                ..FlowInit::at(n(1), n(0), 100, 0, 0)
            },
            // 2 -> 3 finishes in partition 1 toward the same end: mirrored.
            FlowInit {
                completes: Some(end),
                ..FlowInit::at(n(2), n(3), 100, 0, 0)
            },
            // Partition 1's barrier, chained to one partition 0 runs: mirrored too.
            FlowInit {
                completes: Some(chained),
                ..FlowInit::at(n(2), n(3), 100, 0, 0)
            },
            FlowInit {
                start: after(other, 7),
                ..FlowInit::at(n(0), n(1), 100, 0, 0)
            },
        ];
        plan.flows = flows.into();
        plan.barrier_edges.push(BarrierEdge {
            from: chained,
            to: other,
            delay: 5,
        });
        let home = barrier_homes(&plan, &owner);
        assert_eq!(home, vec![0, MIRRORED, MIRRORED, 0]);
        // The mirrored `end` releases nothing; `chained` chains 5 ps later: too soon for a
        // window of 6 ps (its release is told at once), not for one of 5.
        let tight =
            |window| -> Vec<(u32, Vec<FlowId>)> { tight_barriers(&plan, &home, MIRRORED, window) };
        assert_eq!(tight(6), vec![(chained, vec![FlowId::new(3)])]);
        assert_eq!(tight(5), vec![]);
    }

    /// The barrier holds every thread until all arrived, round after round: no thread sees a
    /// round's counter before all wrote it.
    #[test]
    fn the_barrier_holds_each_round_until_every_thread_arrived() {
        let n = 3;
        let barrier = SpinBarrier::new(n);
        let counts: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        std::thread::scope(|s| {
            for me in 0..n {
                let (barrier, counts) = (&barrier, &counts);
                s.spawn(move || {
                    for round in 1..=500u64 {
                        counts[me].store(round, Ordering::Relaxed);
                        assert!(barrier.wait());
                        for c in counts {
                            let seen = c.load(Ordering::Relaxed);
                            assert_eq!(seen, round);
                        }
                        assert!(barrier.wait());
                    }
                });
            }
        });
    }

    /// A thread that panics poisons the barrier: the others stop waiting instead of hanging,
    /// and the panic is there to raise.
    #[test]
    fn a_panicking_thread_releases_the_others() {
        let shared = Shared::new(2, 0, 0);
        let (waited, caught) = std::thread::scope(|s| {
            let sh = &shared;
            let other = s.spawn(move || sh.barrier.wait());
            let caught = shared.guard(|| -> () { panic!("a bug in a partition") });
            (other.join().unwrap(), caught)
        });
        assert!(!waited);
        let payload = caught.unwrap_err();
        assert_eq!(
            payload.downcast_ref::<&str>(),
            Some(&"a bug in a partition")
        );
    }
}
