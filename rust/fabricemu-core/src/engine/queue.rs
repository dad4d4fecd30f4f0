//! The event queue, ordered by (time, tie-break): simultaneous events run in an order that
//! depends only on the time and the event (its kind, then the entity it wakes; see
//! [`tie_break`]), not on when it was scheduled. So a run is reproducible bit for bit, and the
//! order is the same however the fabric is split into partitions with queues of their own (the
//! parallel engine): no global insertion sequence is needed. Two equal keys are the same event,
//! whose order cannot matter.
//!
//! Most events are scheduled a fixed delay ahead of the current time (a serialisation time, a
//! serialisation plus a link delay, a timeout). Events pushed with the same delay come out of a
//! FIFO already sorted by time, since time only advances. So `push_after` appends to one FIFO
//! ("lane") per frequent span of delays (delays within a few ns share one, kept in time order by
//! a short insertion from the back); events at arbitrary times or with rare delays go to a
//! general heap. A small tournament tree over the sources' heads (the general heap's minimum and
//! each lane's front time) finds the next instant. The lanes order their events by time only:
//! when an instant comes, its events are gathered from every source into a batch and sorted by
//! key once (a synchronised fabric's simultaneous events reach the lanes in no key order, and
//! keeping the lanes in key order cost insertions and heap operations: 1.29x the instructions at
//! 1,024 hosts); a large batch is sorted by buckets, so that an event's share of the sort does
//! not grow with the fabric ([`sort_batch`]). Profiling showed a single binary heap's sift loops
//! were the engine's largest cost. The parallel engine's packets from other partitions come at
//! arbitrary delays but nearly in time order: a lane per sending partition and size class
//! ([`EventQueue::push_in_stream`]).

use std::hint::select_unpredictable;

use crate::ids::{FlowId, PortId};
use crate::units::Time;

/// What happens; each names the component it wakes by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An egress port finished serialising its packet and may start the next one.
    PortFree(PortId),
    /// The head packet of the link leaving this egress port reaches the far end.
    LinkArrival(PortId),
    /// The next statically scheduled flow start (flows are sorted by start time).
    NextFlowStarts,
    /// A flow released by a dependency starts.
    FlowStart(FlowId),
    /// One arrival at a barrier without a flow: a timed start or a chained barrier (step graphs).
    BarrierArrive(u32),
    /// A flow's retransmission timer.
    Retransmit(FlowId),
    /// One of a flow's congestion-control timers (the controller numbers them; DCQCN: the
    /// rate-increase timer and the gated rate decrease).
    CcTimer(FlowId, u8),
    /// Receiver-driven credits: the pull pacer of this (receiving) host port may send a pull.
    PullPacer(PortId),
    /// Periodic samples for queues.arrow and links.arrow.
    SampleQueues,
    SampleLinks,
    /// Look for a cycle of PFC pauses.
    DeadlockCheck,
    /// A link fault begins, ends, or routing notices the link's state.
    FaultStart(u32),
    FaultEnd(u32),
    FaultDetected(u32),
    /// `[[ocs.reconfigure]]` entry i starts; reconfiguration i ends (its new circuits come up);
    /// routing follows the OCS's circuits (after `ocs.detection`).
    CircuitsChange(u32),
    CircuitsUp(u32),
    CircuitsRoute,
    /// A failure cuts off ranks of a job that reacts (`on_failure`), and its freeze ends
    /// (indices into the jobs' episodes).
    JobFailure(u32),
    JobResume(u32),
    /// An elastic job's re-formation (a rejoin) ended (payload: the job).
    JobRejoin(u32),
    /// A switch's reduction engine has a combined packet ready.
    ReductionDone(crate::ids::NodeId),
}

/// Events stay 8 bytes with typed ids (the queue moves them on every push and pop).
const _: () = assert!(std::mem::size_of::<Event>() == 8);

/// The order of simultaneous events at `time`: by kind first (in declaration order: a port that
/// frees at `t` sends before the arrivals at `t` are handled, as a FIFO of the schedule did),
/// then by the entity, through a bijection of its 40 bits chosen by the time (xor with a hash of
/// it, an odd multiply and xor-shifts, each invertible modulo 2^40). Distinct events never tie,
/// and which port or flow goes first among simultaneous events changes from one instant to the
/// next, as with no preferred order: ordering them by id would let the same port win every tie
/// of a symmetric scenario (measured: eight NSCC flows sharing a bottleneck, Jain 0.983).
/// A bijection fixed over epochs of 2^24 ps instead (so that the events a batch of
/// simultaneous events schedules would reach their lanes in order) biased fairness for as long:
/// DCQCN's fair-share queue and the control loop's algorithm choice left their tolerances. Where a
/// synchronised fabric's events tie, they reach the lanes in no key order: the queue sorts each
/// instant's events once (`EventQueue::gather`; see the README for the cost). Ordering
/// kinds by a hash too is not neutral either: a switch then sometimes handles an
/// arrival before the port that frees at the same instant, and a ring all-reduce on a GPU
/// cluster took 8 % longer.
///
/// Before the tie-break comes the event's round: 0 for an event scheduled ahead, one more than
/// its cause's for an event scheduled for the instant it was caused (a zero-delay chain), so the
/// chain's events run after all that was due at that instant, as they would in a FIFO.
#[inline(always)]
pub fn tie_break(time: Time, event: Event) -> u64 {
    const ENTITY: u64 = (1 << Event::KIND_SHIFT) - 1;
    let code = event.order();
    let mut x = (code ^ time.wrapping_mul(0x9E37_79B9_7F4A_7C15)) & ENTITY;
    x ^= x >> 17;
    x = x.wrapping_mul(0xBF58_476D_1CE5) & ENTITY;
    x ^= x >> 19;
    (code & !ENTITY) | x
}

/// The key under which `event` runs at `time` when it was scheduled before that instant (round
/// 0): events with smaller keys run before it.
pub fn key_ahead(time: Time, event: Event) -> u128 {
    ((time as u128) << 64) | tie_break(time, event) as u128
}

/// Where the round starts in a key's low word, and the most rounds told apart (a longer chain
/// of zero-delay events stays in the last).
const ROUND_SHIFT: u32 = 48;
const MAX_ROUND: u64 = (1 << (64 - ROUND_SHIFT)) - 1;

impl Event {
    /// Where the kind starts in [`Event::order`] (below it: the entity, at most 40 bits).
    pub const KIND_SHIFT: u32 = 40;

    /// The event's identity as a number: the kind (in declaration order), then its payload (the
    /// port, flow, barrier, fault, ... it names). Distinct events have distinct codes.
    #[inline(always)]
    pub fn order(self) -> u64 {
        const KIND: u32 = Event::KIND_SHIFT;
        let (kind, payload) = match self {
            Event::PortFree(p) => (0u64, p.index() as u64),
            Event::LinkArrival(p) => (1, p.index() as u64),
            Event::NextFlowStarts => (2, 0),
            Event::FlowStart(f) => (3, f.index() as u64),
            Event::BarrierArrive(b) => (4, b as u64),
            Event::Retransmit(f) => (5, f.index() as u64),
            Event::CcTimer(f, k) => (6, (f.index() as u64) << 8 | k as u64),
            Event::PullPacer(p) => (7, p.index() as u64),
            Event::SampleQueues => (8, 0),
            Event::SampleLinks => (9, 0),
            Event::DeadlockCheck => (10, 0),
            Event::FaultStart(i) => (11, i as u64),
            Event::FaultEnd(i) => (12, i as u64),
            Event::FaultDetected(i) => (13, i as u64),
            Event::CircuitsChange(i) => (14, i as u64),
            Event::CircuitsUp(i) => (15, i as u64),
            Event::CircuitsRoute => (16, 0),
            Event::JobFailure(e) => (17, e as u64),
            Event::JobResume(e) => (18, e as u64),
            Event::JobRejoin(j) => (19, j as u64),
            Event::ReductionDone(n) => (20, n.index() as u64),
        };
        kind << KIND | payload
    }
}

#[derive(Clone, Copy)]
struct Entry<T: Copy> {
    /// time << 64 | [`tie_break`]: one comparison orders by time, then by event.
    key: u128,
    item: T,
}

#[inline]
fn time_of(key: u128) -> Time {
    (key >> 64) as Time
}

/// A 4-ary min-heap on `key` (four children per node halve a binary heap's depth).
struct Heap<T: Copy> {
    v: Vec<Entry<T>>,
}

const ARITY: usize = 4;

impl<T: Copy> Heap<T> {
    fn new() -> Self {
        Self { v: Vec::new() }
    }

    #[inline]
    fn peek_key(&self) -> Option<u128> {
        self.v.first().map(|e| e.key)
    }

    #[inline]
    fn push(&mut self, e: Entry<T>) {
        let mut i = self.v.len();
        self.v.push(e);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.v[parent].key <= e.key {
                break;
            }
            self.v[i] = self.v[parent];
            i = parent;
        }
        self.v[i] = e;
    }

    #[inline]
    fn pop(&mut self) -> Option<Entry<T>> {
        let top = *self.v.first()?;
        let last = self.v.pop().expect("non-empty");
        if !self.v.is_empty() {
            self.sift_down_from_root(last);
        }
        Some(top)
    }

    /// Put `last` at the root's place and move it down to where it fits.
    #[inline(always)]
    fn sift_down_from_root(&mut self, last: Entry<T>) {
        let v = &mut self.v[..];
        let n = v.len();
        // Move the hole at the root down to where the last entry fits.
        let mut i = 0;
        loop {
            let first = ARITY * i + 1;
            let (c, ck) = if let Some(ch) = v.get(first..first + ARITY) {
                // All four children: the smaller of each pair, then of the two (equal keys are
                // the same event, so the order of the comparisons does not matter).
                let (a, ak) = if ch[1].key < ch[0].key {
                    (1, ch[1].key)
                } else {
                    (0, ch[0].key)
                };
                let (b, bk) = if ch[3].key < ch[2].key {
                    (3, ch[3].key)
                } else {
                    (2, ch[2].key)
                };
                if bk < ak {
                    (first + b, bk)
                } else {
                    (first + a, ak)
                }
            } else if first < n {
                let mut c = first;
                let mut ck = v[first].key;
                for (j, e) in v.iter().enumerate().skip(first + 1) {
                    if e.key < ck {
                        c = j;
                        ck = e.key;
                    }
                }
                (c, ck)
            } else {
                break;
            };
            if ck >= last.key {
                break;
            }
            v[i] = v[c];
            i = c;
        }
        v[i] = last;
    }
}

/// Leaf of the general heap in the tournament tree; lane `l` is leaf `l + 1`.
const GENERAL: u32 = 0;
/// Time of a source with no event in the tournament (events are never scheduled at
/// `Time::MAX`).
const NO_TIME: Time = Time::MAX;

/// A source's head in the tournament: the time of its earliest event, and the source.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Head {
    time: Time,
    leaf: u32,
}

/// A winner tree over the sources' head times: leaves at `cap..2 * cap`, each inner node the
/// earlier of its two children, the earliest at node 1. Changing one source's head costs one
/// comparison per level (log2 of the number of sources, a handful here), against the four
/// children per level a heap of heads compares. It orders by time alone: an instant's events
/// are gathered from every source whose head is at that time and sorted by key together, so
/// which of two sources at one time wins does not matter (16-byte nodes and one 64-bit
/// comparison per level, where whole keys took 32 bytes and two).
struct Tournament {
    cap: usize,
    w: Vec<Head>,
}

impl Tournament {
    fn new(cap: usize) -> Self {
        let mut w = vec![
            Head {
                time: NO_TIME,
                leaf: 0
            };
            2 * cap
        ];
        for (leaf, e) in w[cap..].iter_mut().enumerate() {
            e.leaf = leaf as u32;
        }
        Self { cap, w }
    }

    #[inline]
    fn top(&self) -> Head {
        self.w[1]
    }

    /// Set `leaf`'s head time and replay its matches up to the root.
    #[inline]
    fn update(&mut self, leaf: u32, time: Time) {
        let mut n = self.cap + leaf as usize;
        self.w[n].time = time;
        // The match winner at the current node, carried up in registers.
        let mut win = self.w[n];
        while n > 1 {
            let b = self.w[n ^ 1];
            win = select_unpredictable(b.time <= win.time, b, win);
            n >>= 1;
            if self.w[n] == win {
                break; // unchanged from here up
            }
            self.w[n] = win;
        }
    }

    /// Set the time of the leaf that is the current winner (so every node on its path holds it
    /// and changes: no early exit to test for), and return the new winner (the caller's next
    /// look at the top, from registers rather than the node just stored).
    #[inline]
    fn replace_winner(&mut self, time: Time) -> Head {
        let leaf = self.w[1].leaf;
        let mut n = self.cap + leaf as usize;
        let mut win = Head { time, leaf };
        self.w[n] = win;
        while n > 1 {
            // Which side wins is a coin toss to the branch predictor: a conditional move.
            let b = self.w[n ^ 1];
            win = select_unpredictable(b.time <= win.time, b, win);
            n >>= 1;
            self.w[n] = win;
        }
        win
    }

    /// Room for `leaves` sources, keeping every leaf's time. The tree has exactly one leaf per
    /// source (not a power of two): node `n` is the earlier of `2n` and `2n + 1` for every inner
    /// node, so node 1 is the earliest of all leaves for any count, and a leaf's path to it is
    /// log2 of the sources long, not of the next power of two.
    fn reserve(&mut self, leaves: usize) {
        if leaves <= self.cap {
            return;
        }
        let mut t = Tournament::new(leaves);
        t.w[t.cap..t.cap + self.cap].copy_from_slice(&self.w[self.cap..]);
        for n in (1..t.cap).rev() {
            let (a, b) = (t.w[2 * n], t.w[2 * n + 1]);
            t.w[n] = if a.time < b.time { a } else { b };
        }
        *self = t;
    }
}

/// A delay gets its own lane once this many events were pushed with it; before that (and for
/// delays that stay rare, such as a port's wake-up after an arbitrary remainder of serialisation)
/// its events go to the general heap. Lanes are never removed, so rare delays would otherwise
/// pile up as one-entry lanes, each a leaf of the tournament every pop replays.
const HOT_AFTER: u32 = 1024;
/// ... and once it accounts for at least 1 / HOT_SHARE of all pushes so far: in a long run many
/// moderately rare delays reach `HOT_AFTER`, and every lane is a leaf of the tournament.
const HOT_SHARE: u64 = 64;
/// Delays in one aligned span of `LANE_WIDTH` ps share a lane (the table counts and maps the span,
/// `delay >> LANE_SHIFT`). HPCC's INT records make packet sizes, and so delays, differ by a few
/// bytes' time per hop: one lane for each would deepen the tournament every pop replays, while in
/// a shared lane a push is out of order only against the few pushed less than `LANE_WIDTH` ago.
const LANE_SHIFT: u32 = 12;
#[cfg_attr(not(test), allow(dead_code))]
const LANE_WIDTH: Time = 1 << LANE_SHIFT;
/// A push passes at most this many entries of its lane; one that would pass more goes to the
/// general heap.
const MAX_PASS: usize = 8;
/// Bits of the delay table's index (open addressing, kept at most half full).
const TABLE_BITS: u32 = 12;
const TABLE_SLOTS: usize = 1 << TABLE_BITS;
/// `DelaySlot::state`: an unused slot; else a lane (`LANE | id`) or the pushes counted so far.
const EMPTY: u32 = 0;
const LANE: u32 = 1 << 31;

#[derive(Clone, Copy)]
struct DelaySlot {
    delay: Time,
    state: u32,
}

/// A FIFO of events pushed with one delay: a ring buffer whose capacity is a power of two (it only
/// grows, so a run in its steady state allocates nothing).
struct Lane {
    buf: Vec<LaneEntry>,
    head: usize,
    len: usize,
}

/// An event in a lane: its time and, as the batch will hold it, the rest of its key and the
/// event. 24 bytes, where a `u128` key's 16-byte alignment made an entry 32, and the lanes hold
/// every packet in flight (2026-12-05: the k=8 permutation in 0.92x the time, the quickstart
/// 0.84x, k=32 0.99x; with the low word worked out again from the time and the event instead,
/// 16 bytes, k=32 0.98x but k=8 3.7 % more instructions and no faster).
#[derive(Clone, Copy)]
struct LaneEntry {
    time: Time,
    entry: BatchEntry,
}

/// A look at the events that run next ([`EventQueue::upcoming`]).
pub struct Upcoming<'a> {
    batch: &'a [BatchEntry],
    lane: Option<&'a Lane>,
}

impl Upcoming<'_> {
    /// The event `ahead` places behind the next one (None past the batch and the lane).
    #[inline(always)]
    pub fn at(&self, ahead: usize) -> Option<Event> {
        let n = self.batch.len();
        if ahead < n {
            return Some(self.batch[n - 1 - ahead].item);
        }
        let lane = self.lane?;
        let k = ahead - n;
        (k < lane.len).then(|| lane.buf[(lane.head + k) & (lane.buf.len() - 1)].entry.item)
    }
}

impl Lane {
    const FILLER: LaneEntry = LaneEntry {
        time: 0,
        entry: BatchEntry {
            low: 0,
            item: Event::NextFlowStarts,
        },
    };

    fn new() -> Self {
        Self {
            buf: vec![Self::FILLER; 16],
            head: 0,
            len: 0,
        }
    }

    /// The lane's head in the tournament: its front's time (the entries of one time are in any
    /// order; the queue sorts them when their time comes), `NO_TIME` when it is empty.
    #[inline]
    fn front_time(&self) -> Time {
        if self.len != 0 {
            self.buf[self.head].time
        } else {
            NO_TIME
        }
    }

    /// Insert in key order: `Some(true)` if `e` is now the front (the lane's head changed),
    /// `Some(false)` if not, None if it would pass more than `MAX_PASS` entries (nothing stored:
    /// the caller puts it in the general heap, so a burst of pushes out of order never costs more
    /// than a few moves each). The delays of one lane differ by less than [`LANE_WIDTH`], so `e`
    /// is nearly always the last, and otherwise passes only entries pushed less than that long
    /// ago.
    #[inline(always)]
    fn push(&mut self, e: LaneEntry) -> Option<bool> {
        if self.len == self.buf.len() {
            self.grow();
        }
        let mask = self.buf.len() - 1;
        if self.len == 0 {
            self.buf[self.head] = e;
            self.len = 1;
            return Some(true);
        }
        let tail = (self.head + self.len - 1) & mask;
        if self.buf[tail].time <= e.time {
            self.buf[(tail + 1) & mask] = e;
            self.len += 1;
            return Some(false);
        }
        self.insert(e)
    }

    /// `e` goes before the lane's last entry: move the later ones up by one (at most
    /// `MAX_PASS` of them).
    #[inline(never)]
    fn insert(&mut self, e: LaneEntry) -> Option<bool> {
        let mask = self.buf.len() - 1;
        let mut i = self.len;
        let stop = self.len.saturating_sub(MAX_PASS);
        while i > 0 {
            if self.buf[(self.head + i - 1) & mask].time <= e.time {
                break;
            }
            if i == stop {
                return None;
            }
            i -= 1;
        }
        for j in (i..self.len).rev() {
            self.buf[(self.head + j + 1) & mask] = self.buf[(self.head + j) & mask];
        }
        self.buf[(self.head + i) & mask] = e;
        self.len += 1;
        Some(i == 0)
    }

    /// Remove the front (the lane is not empty) and return it.
    #[inline]
    fn pop_front(&mut self) -> LaneEntry {
        debug_assert!(self.len > 0);
        let mask = self.buf.len() - 1;
        let e = self.buf[self.head];
        self.head = (self.head + 1) & mask;
        self.len -= 1;
        e
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.buf.len();
        let mut buf = Vec::with_capacity(2 * n);
        buf.extend_from_slice(&self.buf[self.head..]);
        buf.extend_from_slice(&self.buf[..self.head]);
        buf.resize(2 * n, Self::FILLER);
        self.buf = buf;
        self.head = 0;
    }
}

/// The simulator's future events.
pub struct EventQueue {
    /// Time of the last event popped: nothing is ever scheduled before it.
    now: Time,
    /// The round of the last event popped among the events at its time (see [`Round`]).
    round: u64,
    /// Events pushed so far (how hot a delay is, relative to all).
    seq: u64,
    len: usize,
    lanes: Vec<Lane>,
    /// Delay -> lane (or push count while the delay is not yet hot), open addressing.
    table: Vec<DelaySlot>,
    /// Delays in `table` (at most half its slots; further new delays are not tracked).
    tracked: usize,
    general: Heap<Event>,
    /// The earliest head among the general heap and the lanes.
    heads: Tournament,
    /// The lane the last pop came from, + 1 (0: the general heap), for [`EventQueue::upcoming`].
    last_source: u32,
    /// The events of the current instant not yet run, sorted by key, the next last. The lanes
    /// keep their events in time order only; the events of one instant are sorted once, here,
    /// when the instant comes. Their time is `batch_time`: each keeps its key's low word (round
    /// and tie-break), half the bytes to move and compare in the sort.
    batch: Vec<BatchEntry>,
    batch_time: Time,
    /// A large batch's sort: the entries by bucket, and the buckets' bounds (kept: a run in its
    /// steady state allocates nothing).
    sort_scratch: Vec<BatchEntry>,
    sort_bounds: Vec<u32>,
    /// The lanes of [`EventQueue::push_in_stream`], by stream (made at a stream's first push).
    streams: Vec<u32>,
}

/// Batches of at least this many events are bucket sorted ([`sort_batch`]). A comparison sort
/// of random hashes mispredicts about every other comparison: GPT training's instants hold ~64
/// events each, and sorting them took 18 % of its time at 128 (2026-12-04: 16 gave 0.96x the
/// time, 1.8-2.8 % fewer mispredicted branches on the quickstart and the k=8 permutation).
const BUCKET_SORT_FROM: usize = 16;

/// Sort `batch` by descending key (the next event last). A synchronised fabric's instant holds
/// thousands of events (every host of a permutation sends and receives at the same instants),
/// and a comparison sort's cost per event grows with their number (log2 of it): a large batch is
/// cut instead into about half as many buckets by key (their tie-breaks are hashes, spread
/// evenly: a bucket holds one or two), in one counting pass and one scatter, and each bucket is
/// sorted on its own. Keys spread unevenly (a few events of a later round, far above the rest)
/// only make some buckets larger, each still sorted by comparison: the order is the same.
fn sort_batch(batch: &mut Vec<BatchEntry>, scratch: &mut Vec<BatchEntry>, bounds: &mut Vec<u32>) {
    let n = batch.len();
    if n < BUCKET_SORT_FROM {
        batch.sort_unstable_by_key(|e| std::cmp::Reverse(e.low));
        return;
    }
    let (lo, hi) = batch
        .iter()
        .fold((u64::MAX, 0), |(lo, hi), e| (lo.min(e.low), hi.max(e.low)));
    // Bucket b holds keys hi - (b + 1) * 2^shift < key <= hi - b * 2^shift: at most n / 2 buckets.
    let range_bits = 64 - (hi - lo).leading_zeros();
    let shift = range_bits.saturating_sub((n / 2).ilog2());
    let buckets = ((hi - lo) >> shift) as usize + 1;
    bounds.clear();
    bounds.resize(buckets + 1, 0);
    for e in batch.iter() {
        bounds[((hi - e.low) >> shift) as usize + 1] += 1;
    }
    for b in 1..=buckets {
        bounds[b] += bounds[b - 1];
    }
    if scratch.len() < n {
        scratch.resize(n, batch[0]);
    }
    // bounds[b] is bucket b's start; it advances to its end as the bucket fills.
    for e in batch.iter() {
        let b = ((hi - e.low) >> shift) as usize;
        scratch[bounds[b] as usize] = *e;
        bounds[b] += 1;
    }
    let mut start = 0;
    for &end in &bounds[..buckets] {
        let bucket = &mut scratch[start..end as usize];
        if bucket.len() <= SMALL_BUCKET {
            insertion_sort_descending(bucket);
        } else {
            bucket.sort_unstable_by_key(|e| std::cmp::Reverse(e.low));
        }
        start = end as usize;
    }
    // The sorted entries become the batch (no copy back); the old batch is the next scratch.
    scratch.truncate(n);
    std::mem::swap(batch, scratch);
}

/// Buckets up to this size are sorted in place by insertion (most hold one or two entries; the
/// general sort's set-up would cost more than the sort).
const SMALL_BUCKET: usize = 8;

#[inline(always)]
fn insertion_sort_descending(v: &mut [BatchEntry]) {
    for i in 1..v.len() {
        let e = v[i];
        let mut j = i;
        while j > 0 && v[j - 1].low < e.low {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = e;
    }
}

/// An event of the current instant's batch: the low word of its key, and the event.
#[derive(Debug, Clone, Copy)]
struct BatchEntry {
    low: u64,
    item: Event,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl EventQueue {
    pub fn new() -> Self {
        Self {
            now: 0,
            round: 0,
            seq: 0,
            len: 0,
            lanes: Vec::new(),
            table: vec![
                DelaySlot {
                    delay: 0,
                    state: EMPTY
                };
                TABLE_SLOTS
            ],
            tracked: 0,
            general: Heap::new(),
            heads: Tournament::new(1),
            last_source: GENERAL,
            batch: Vec::new(),
            batch_time: 0,
            sort_scratch: Vec::new(),
            sort_bounds: Vec::new(),
            streams: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Every event still to run, with its time, in no particular order (a scan of the whole
    /// queue: for what is rare, such as an elastic re-plan's bookkeeping, never per event).
    pub fn for_each_pending(&self, mut f: impl FnMut(Time, Event)) {
        for e in &self.batch {
            f(self.batch_time, e.item);
        }
        for lane in &self.lanes {
            let mask = lane.buf.len() - 1;
            for k in 0..lane.len {
                let e = &lane.buf[(lane.head + k) & mask];
                f(e.time, e.entry.item);
            }
        }
        for e in &self.general.v {
            f((e.key >> 64) as Time, e.item);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn next_key(&mut self, time: Time, event: Event) -> u128 {
        debug_assert!(time >= self.now, "event scheduled in the past");
        debug_assert!(time < Time::MAX, "event scheduled at NEVER");
        // An event for the current instant runs in the next round: after every event already
        // due now, as the chain of zero-delay causes it ends (a barrier's release, a flow start).
        let round = if time == self.now {
            (self.round + 1).min(MAX_ROUND)
        } else {
            0
        };
        let key = ((time as u128) << 64) | (round << ROUND_SHIFT | tie_break(time, event)) as u128;
        self.seq += 1;
        self.len += 1;
        key
    }

    /// Schedule `event` at an absolute `time` (not before the current time).
    #[inline]
    pub fn push(&mut self, time: Time, event: Event) {
        let key = self.next_key(time, event);
        self.push_general(key, event);
    }

    fn push_general(&mut self, key: u128, event: Event) {
        self.general.push(Entry { key, item: event });
        if self.general.peek_key() == Some(key) {
            self.heads.update(GENERAL, time_of(key));
        }
    }

    /// Schedule `event` `delay` after the current time (the time of the last event popped). Use
    /// this for recurring delays: each frequent delay gets a FIFO lane.
    #[inline(always)]
    pub fn push_after(&mut self, delay: Time, event: Event) {
        let key = self.next_key(self.now + delay, event);
        let Some(lane) = self.lane_for(delay >> LANE_SHIFT) else {
            self.push_general(key, event);
            return;
        };
        self.push_lane(lane, key, event);
    }

    /// Append to `lane` (or, if its order would need a long insertion, to the general heap).
    #[inline(always)]
    fn push_lane(&mut self, lane: u32, key: u128, event: Event) {
        let entry = LaneEntry {
            time: time_of(key),
            entry: BatchEntry {
                low: key as u64,
                item: event,
            },
        };
        match self.lanes[lane as usize].push(entry) {
            Some(true) => self.heads.update(lane + 1, time_of(key)),
            Some(false) => {}
            None => self.push_general(key, event),
        }
    }

    /// The lane of delays in `span` (`delay >> LANE_SHIFT`; called `delay` below), if it has
    /// one. Multiplicative hashing: the first probe nearly always finds the slot.
    #[inline(always)]
    fn lane_for(&mut self, delay: Time) -> Option<u32> {
        let slot = (delay.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - TABLE_BITS)) as usize;
        let s = self.table[slot];
        if s.delay == delay && s.state & LANE != 0 {
            return Some(s.state & !LANE);
        }
        self.count_delay(slot, delay)
    }

    /// Count a push with a delay that has no lane yet (from its `slot`); give it a lane once it
    /// is hot.
    fn count_delay(&mut self, mut slot: usize, delay: Time) -> Option<u32> {
        let mask = TABLE_SLOTS - 1;
        loop {
            let s = &mut self.table[slot];
            if s.state == EMPTY {
                if 2 * self.tracked >= TABLE_SLOTS {
                    return None; // too many distinct delays: the rest stay in the general heap
                }
                self.tracked += 1;
                *s = DelaySlot { delay, state: 1 };
                return None;
            }
            if s.delay == delay {
                if s.state & LANE != 0 {
                    return Some(s.state & !LANE);
                }
                if s.state < LANE - 1 {
                    s.state += 1;
                }
                if s.state < HOT_AFTER || (s.state as u64) * HOT_SHARE < self.seq {
                    return None;
                }
                return Some(self.open_lane(slot));
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Give the delay of table slot `slot` a new lane.
    fn open_lane(&mut self, slot: usize) -> u32 {
        let lane = self.lanes.len() as u32;
        self.table[slot].state = LANE | lane;
        self.lanes.push(Lane::new());
        self.heads.reserve(self.lanes.len() + 1);
        lane
    }

    /// Schedule `event` `delay` after the current time, in a lane of its own from the first push:
    /// for a delay known to recur but pushed in bursts too small to make it hot (the
    /// retransmission timeout, one per flow), which would otherwise sit far in the future in the
    /// general heap and deepen every push and pop of the near events there.
    #[inline]
    pub fn push_after_recurring(&mut self, delay: Time, event: Event) {
        let key = self.next_key(self.now + delay, event);
        let span = delay >> LANE_SHIFT;
        let lane = match self.lane_for(span) {
            Some(lane) => lane,
            None => match self.make_lane(span) {
                Some(lane) => lane,
                None => {
                    self.push_general(key, event);
                    return;
                }
            },
        };
        self.push_lane(lane, key, event);
    }

    /// Schedule `event` at `time`, one of stream `stream`'s events, which come in nearly
    /// ascending time whatever their delay from now: the packets another partition hands over
    /// at each window's end (their arrival times rise from one window to the next, and within
    /// one only by their links' differing delays). A lane per stream, from its first push,
    /// rather than the general heap.
    #[inline]
    pub fn push_in_stream(&mut self, stream: usize, time: Time, event: Event) {
        let key = self.next_key(time, event);
        if stream >= self.streams.len() {
            self.streams.resize(stream + 1, u32::MAX);
        }
        if self.streams[stream] == u32::MAX {
            self.streams[stream] = self.lanes.len() as u32;
            self.lanes.push(Lane::new());
            self.heads.reserve(self.lanes.len() + 1);
        }
        self.push_lane(self.streams[stream], key, event);
    }

    /// Give span `delay` a lane now (it was just counted by `lane_for`); None if the table is full.
    #[cold]
    fn make_lane(&mut self, delay: Time) -> Option<u32> {
        let mask = TABLE_SLOTS - 1;
        let mut slot = (delay.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - TABLE_BITS)) as usize;
        loop {
            let s = &mut self.table[slot];
            if s.state == EMPTY {
                return None; // not tracked (the table is full)
            }
            if s.delay == delay {
                return Some(self.open_lane(slot));
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Whether the earliest event comes before `key` in the order (see [`key_ahead`]). It
    /// gathers an instant's batch only when that instant is `key`'s: a batch gathered ahead of
    /// the clock would run before events pushed later for earlier times (another partition's).
    pub fn next_runs_before(&mut self, key: u128) -> bool {
        if let Some(e) = self.batch.last() {
            return self.batch_key(e) < key;
        }
        let top = self.heads.top();
        if top.time == NO_TIME {
            return false;
        }
        if top.time != time_of(key) {
            return top.time < time_of(key);
        }
        self.gather().is_some() && self.batch.last().is_some_and(|e| self.batch_key(e) < key)
    }

    /// The whole key of a batch entry.
    #[inline(always)]
    fn batch_key(&self, e: &BatchEntry) -> u128 {
        ((self.batch_time as u128) << 64) | e.low as u128
    }

    /// Time of the earliest event.
    #[inline]
    pub fn peek_time(&mut self) -> Option<Time> {
        if !self.batch.is_empty() {
            return Some(self.batch_time);
        }
        let top = self.heads.top();
        (top.time != NO_TIME).then_some(top.time)
    }

    /// The events that run next: the rest of the current instant's batch, then the lane the batch
    /// was last gathered from (none after the general heap). Their state can be asked of the
    /// memory system in advance. Only a hint.
    #[inline(always)]
    pub fn upcoming(&self) -> Upcoming<'_> {
        Upcoming {
            batch: &self.batch,
            lane: (self.last_source != GENERAL).then(|| &self.lanes[self.last_source as usize - 1]),
        }
    }

    /// The key of `ev`, the event last popped (its place in the order: `now`, its round, its
    /// tie-break).
    pub fn key_of_last(&self, ev: Event) -> u128 {
        ((self.now as u128) << 64) | (self.round << ROUND_SHIFT | tie_break(self.now, ev)) as u128
    }

    /// The key of the next event if it runs before `key`, else None. The batch is gathered only
    /// for an instant before `key`'s, or at it when `key` is past its first round-0 key (an
    /// event handed over later for `key`'s instant must not find a batch gathered ahead of it;
    /// see [`EventQueue::next_runs_before`]).
    pub fn peek_key_before(&mut self, key: u128) -> Option<u128> {
        if self.batch.is_empty() {
            let top = self.heads.top();
            let at = time_of(key);
            if top.time == NO_TIME || top.time > at || (top.time == at && key as u64 == 0) {
                return None;
            }
            self.gather()?;
        }
        let e = self.batch.last().expect("gathered");
        Some(self.batch_key(e)).filter(|&k| k < key)
    }

    /// The next event, once [`EventQueue::peek_key_before`] found one (else None).
    #[inline]
    pub fn next_event(&self) -> Option<Event> {
        self.batch.last().map(|e| e.item)
    }

    /// The round of the last event popped among the events at its time.
    pub fn round(&self) -> u64 {
        self.round
    }

    /// Move this queue's clock to another queue's last event, at `time` in `round` (no later
    /// in the order than anything popped here since): what is pushed for `time` now runs in the
    /// next round, as if that event had been this queue's (a barrier released by an arrival in
    /// another partition, told at once). A batch gathered beyond that point goes back to the
    /// heap, so that what is pushed now is sorted with it.
    pub fn follow(&mut self, time: Time, round: u64) {
        debug_assert!(
            (self.now, self.round) <= (time, round),
            "followed into the past"
        );
        if let Some(e) = self.batch.last() {
            let ahead =
                self.batch_time > time || (self.batch_time == time && e.low >> ROUND_SHIFT > round);
            if ahead {
                let t = self.batch_time;
                for e in std::mem::take(&mut self.batch) {
                    self.push_general(((t as u128) << 64) | e.low as u128, e.item);
                }
            }
        }
        self.now = time;
        self.round = round;
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        let e = match self.batch.pop() {
            Some(e) => e,
            None => {
                self.gather()?;
                self.batch.pop().expect("gathered")
            }
        };
        self.len -= 1;
        self.now = self.batch_time;
        self.round = e.low >> ROUND_SHIFT;
        Some((self.now, e.item))
    }

    /// Move every event of the earliest time (the next instant, or the next round of this one)
    /// into the batch, sorted: from each source whose head is at that time, all of its events at
    /// that time. None when the queue is empty.
    fn gather(&mut self) -> Option<()> {
        let mut top = self.heads.top();
        if top.time == NO_TIME {
            return None;
        }
        let t = top.time;
        self.batch_time = t;
        while top.time == t {
            let next = if top.leaf == GENERAL {
                while let Some(k) = self.general.peek_key() {
                    if time_of(k) != t {
                        break;
                    }
                    let e = self.general.pop().expect("peeked");
                    self.batch.push(BatchEntry {
                        low: e.key as u64,
                        item: e.item,
                    });
                }
                self.general.peek_key().map_or(NO_TIME, time_of)
            } else {
                let lane = &mut self.lanes[top.leaf as usize - 1];
                while lane.len != 0 && lane.buf[lane.head].time == t {
                    self.batch.push(lane.pop_front().entry);
                }
                lane.front_time()
            };
            self.last_source = top.leaf;
            top = self.heads.replace_winner(next);
        }
        if self.batch.len() > 1 {
            // Descending: the next event is the last.
            sort_batch(
                &mut self.batch,
                &mut self.sort_scratch,
                &mut self.sort_bounds,
            );
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_batch_is_sorted_as_a_comparison_sort_sorts_it() {
        use crate::rng::mix64;
        let (mut scratch, mut bounds) = (Vec::new(), Vec::new());
        let mut x = 0u64;
        let mut draw = || {
            x += 1;
            mix64(x)
        };
        let from = BUCKET_SORT_FROM;
        for n in [2, from - 1, from, from + 1, 64, 127, 128, 1000, 4096, 9000] {
            // Keys as the queue makes them: the kind over a 40-bit hash; then a few of a later
            // round (far above the rest), duplicates, and keys in one narrow band.
            let kinds = |e: u64, k: u64| (k << Event::KIND_SHIFT) | (e & ((1 << 40) - 1));
            let mut cases: Vec<Vec<u64>> = vec![
                (0..n).map(|_| kinds(draw(), draw() % 2)).collect(),
                (0..n)
                    .map(|i| kinds(draw(), 1) | if i % 97 == 0 { 1 << 50 } else { 0 })
                    .collect(),
                (0..n).map(|_| draw() % 7).collect(),
                (0..n).map(|_| draw()).collect(),
            ];
            cases.push((0..n as u64).collect());
            for keys in cases {
                let entries: Vec<BatchEntry> = keys
                    .iter()
                    .map(|&low| BatchEntry {
                        low,
                        item: Event::LinkArrival(PortId::new(low as u32)),
                    })
                    .collect();
                let mut want = entries.clone();
                want.sort_unstable_by_key(|e| std::cmp::Reverse(e.low));
                let mut got = entries;
                sort_batch(&mut got, &mut scratch, &mut bounds);
                let key = |v: &[BatchEntry]| v.iter().map(|e| (e.low, e.item)).collect::<Vec<_>>();
                assert_eq!(key(&got), key(&want), "n = {n}");
            }
        }
    }

    #[test]
    fn asking_whether_an_event_runs_before_a_key_keeps_later_pushes_in_order() {
        // A partition asks, at a deadlock check's key, what runs before it; it must not gather a
        // later instant ahead of the clock, or an event another partition hands over afterwards
        // for an earlier time would run after that instant.
        let mut q = EventQueue::new();
        q.push(20, Event::PortFree(PortId::new(1)));
        let check = key_ahead(10, Event::DeadlockCheck);
        assert!(!q.next_runs_before(check));
        q.push(15, Event::LinkArrival(PortId::new(2)));
        q.push(10, Event::PortFree(PortId::new(3)));
        q.push(10, Event::LinkArrival(PortId::new(4)));
        assert!(
            q.next_runs_before(check),
            "a free port runs before the check"
        );
        assert_eq!(q.pop(), Some((10, Event::PortFree(PortId::new(3)))));
        assert!(q.next_runs_before(check), "an arrival too (kind 1 < 10)");
        q.pop();
        // Pushed at the check's instant: the next round, after it.
        q.push(10, Event::SampleLinks);
        assert!(
            !q.next_runs_before(check),
            "a zero-delay chain runs after it"
        );
        assert_eq!(q.pop().map(|e| e.0), Some(10));
        assert_eq!(q.pop().map(|e| e.0), Some(15));
        assert_eq!(q.pop().map(|e| e.0), Some(20));
    }

    #[test]
    fn following_another_queue_sorts_what_it_pushes_with_a_batch_gathered_ahead() {
        // One world: an event at 10 causes B and C at 10 (round 1); in another partition an
        // arrival at (10, round 0) causes D at 10 (round 1). The partition holding B and C has
        // gathered them already when it is told: B, C and D must still come out by key.
        let (b, c, d) = (
            Event::FlowStart(FlowId::new(1)),
            Event::FlowStart(FlowId::new(2)),
            Event::FlowStart(FlowId::new(3)),
        );
        let mut one = EventQueue::new();
        one.push(10, Event::LinkArrival(PortId::new(0)));
        one.push(10, Event::PortFree(PortId::new(9)));
        one.pop();
        one.pop();
        one.push(10, b);
        one.push(10, c);
        one.push(10, d);
        let reference: Vec<_> = std::iter::from_fn(|| one.pop()).collect();
        assert_eq!(reference.len(), 3);

        let mut q = EventQueue::new();
        q.push(10, Event::PortFree(PortId::new(9)));
        q.push(40, Event::SampleLinks);
        assert!(q
            .peek_key_before(key_ahead(10, Event::LinkArrival(PortId::new(0))))
            .is_some());
        q.pop();
        q.push(10, b);
        q.push(10, c);
        // Gathered ahead: the round-1 batch, as asking for the next key across partitions does.
        assert!(q.peek_key_before(u128::MAX).is_some());
        // The other partition's arrival (a round-0 event at 10) releases D here.
        q.follow(10, 0);
        q.push(10, d);
        let got: Vec<_> = std::iter::from_fn(|| q.pop()).take(3).collect();
        assert_eq!(got, reference);
        assert_eq!(q.pop(), Some((40, Event::SampleLinks)));

        // A batch of a later instant goes back too: what is pushed for now runs first.
        let mut q = EventQueue::new();
        q.push(30, Event::SampleQueues);
        assert_eq!(q.peek_key_before(u128::MAX).map(time_of), Some(30));
        q.follow(20, 0);
        q.push(20, d);
        assert_eq!(q.pop(), Some((20, d)));
        assert_eq!(q.pop(), Some((30, Event::SampleQueues)));
    }

    #[test]
    fn the_next_key_before_a_window_end_never_gathers_that_instant() {
        let mut q = EventQueue::new();
        q.push(50, Event::SampleLinks);
        assert_eq!(q.peek_key_before(50u128 << 64), None);
        // Handed over afterwards for the window's end: it still sorts with the rest.
        q.push(50, Event::PortFree(PortId::new(1)));
        assert_eq!(q.pop(), Some((50, Event::PortFree(PortId::new(1)))));
        assert_eq!(q.pop(), Some((50, Event::SampleLinks)));
    }

    #[test]
    fn ties_follow_the_event_not_the_push_order() {
        let mut q = EventQueue::new();
        // Simultaneous events pushed in reverse: they come out by kind, then by id, from the
        // general heap and from a lane alike.
        for i in (0..HOT_AFTER + 40).rev() {
            q.push_after(7, Event::LinkArrival(PortId::new(i % 50)));
            q.push(7, Event::PortFree(PortId::new(i % 50)));
        }
        q.push(7, Event::SampleQueues);
        q.push(7, Event::CcTimer(FlowId::new(3), 1));
        q.push(7, Event::CcTimer(FlowId::new(3), 0));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        let mut sorted = order.clone();
        sorted.sort_by_key(|&e| tie_break(7, e));
        assert_eq!(order, sorted);
        // Each event came out as often as it was pushed.
        let count = |e| order.iter().filter(|&&x| x == e).count();
        assert_eq!(count(Event::LinkArrival(PortId::new(0))), 22);
        assert_eq!(count(Event::CcTimer(FlowId::new(3), 0)), 1);
        assert_eq!(order.len(), 2 * (HOT_AFTER as usize + 40) + 3);
        // By kind first: every port that frees goes before every arrival.
        let last_free = order.iter().rposition(|e| matches!(e, Event::PortFree(_)));
        let first_arrival = order
            .iter()
            .position(|e| matches!(e, Event::LinkArrival(_)));
        assert!(last_free < first_arrival);
    }

    #[test]
    fn the_pending_scan_sees_every_event_not_yet_popped_at_its_time() {
        // Events in lanes (a hot delay, a stream), in the general heap and in the batch of the
        // instant being run: the scan gives each that has not run once, at its time.
        let mut q = EventQueue::new();
        let mut pushed = Vec::new();
        for i in 0..HOT_AFTER + 300 {
            q.push_after(
                100 + (i as Time % 3),
                Event::LinkArrival(PortId::new(i % 64)),
            );
            pushed.push((
                100 + (i as Time % 3),
                Event::LinkArrival(PortId::new(i % 64)),
            ));
            if i % 7 == 0 {
                let t = 50 + 13 * i as Time;
                q.push(t, Event::FlowStart(FlowId::new(i)));
                pushed.push((t, Event::FlowStart(FlowId::new(i))));
            }
        }
        q.push_in_stream(0, 90, Event::BarrierArrive(5));
        pushed.push((90, Event::BarrierArrive(5)));
        let popped: Vec<_> = (0..500).map(|_| q.pop().expect("an event")).collect();
        let mut seen = Vec::new();
        q.for_each_pending(|t, e| seen.push((t, e.order())));
        let mut left: Vec<_> = pushed.iter().map(|&(t, e)| (t, e.order())).collect();
        for &(t, e) in &popped {
            let k = left
                .iter()
                .position(|&x| x == (t, e.order()))
                .expect("popped once");
            left.swap_remove(k);
        }
        left.sort_unstable();
        seen.sort_unstable();
        assert_eq!(seen.len(), q.len());
        assert_eq!(seen, left);
    }

    #[test]
    fn the_tie_break_is_a_bijection_that_changes_with_the_time() {
        let ports = |t| {
            let mut v: Vec<_> = (0..64u32)
                .map(|i| (tie_break(t, Event::PortFree(PortId::new(i))), i))
                .collect();
            v.sort();
            v.dedup_by_key(|x| x.0);
            assert_eq!(v.len(), 64, "distinct events never tie");
            v.into_iter().map(|x| x.1).collect::<Vec<_>>()
        };
        let first: Vec<u32> = (0..100).map(|t| ports(t * 1000)[0]).collect();
        let mut winners = first.clone();
        winners.sort();
        winners.dedup();
        assert!(winners.len() > 30, "no entity wins every tie: {winners:?}");
    }

    #[test]
    fn times_ordered_and_ties_by_the_tie_break() {
        let mut q = EventQueue::new();
        let pushes = [(5, 1), (3, 2), (5, 3), (3, 4), (4, 5)];
        for (t, i) in pushes {
            q.push(t, Event::PortFree(PortId::new(i)));
        }
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        let mut expected: Vec<_> = pushes
            .iter()
            .map(|&(t, i)| (t, Event::PortFree(PortId::new(i))))
            .collect();
        expected.sort_by_key(|&(t, e)| (t, tie_break(t, e)));
        assert_eq!(order, expected);
        assert_eq!(order[4].0, 5);
    }

    #[test]
    fn matches_a_reference_ordering_on_random_input() {
        // Mix absolute pushes and relative pushes from a small and a large set of delays (the
        // latter overflowing the lanes, some for the current instant), interleaved with pops.
        // The reference orders by (time, round, tie-break): the round of an event for the
        // instant it was pushed at is one more than the last popped event's.
        let mut r = crate::rng::stream(7, crate::rng::Purpose::Workload, 0);
        let mut q = EventQueue::new();
        let mut reference = std::collections::BTreeSet::new();
        let (mut now, mut round) = (0, 0u64);
        let ev = |i| Event::LinkArrival(PortId::new(i));
        for i in 0..200_000u32 {
            let (t, relative) = match r.below(4) {
                0 => (now + r.below(100), false),
                1 => (now + [0, 5, 17, 40][r.below(4) as usize], true),
                2 => (now + r.below(5000), true),
                _ => (now + r.below(10), false),
            };
            if relative {
                q.push_after(t - now, ev(i));
            } else {
                q.push(t, ev(i));
            }
            let rnd = if t == now {
                (round + 1).min(MAX_ROUND)
            } else {
                0
            };
            reference.insert((t, rnd, tie_break(t, ev(i)), i));
            if r.below(2) == 0 {
                let (t, rnd, _, i) = reference.pop_first().unwrap();
                assert_eq!(q.peek_time(), Some(t));
                assert_eq!(q.pop(), Some((t, ev(i))));
                (now, round) = (t, rnd);
            }
            assert_eq!(q.len(), reference.len());
        }
        while let Some((t, _, _, i)) = reference.pop_first() {
            assert_eq!(q.pop(), Some((t, ev(i))));
        }
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn streams_pushed_nearly_in_order_or_not_pop_in_key_order() {
        // The parallel engine's handed-over packets (`push_in_stream`): one stream nearly in
        // time order (a window's mail a link delay ahead), one at random times (its lane passes
        // a few entries, the rest go to the general heap), beside plain pushes.
        let mut r = crate::rng::stream(9, crate::rng::Purpose::Workload, 0);
        let mut q = EventQueue::new();
        let mut reference = std::collections::BTreeSet::new();
        let ev = |i| Event::LinkArrival(PortId::new(i));
        let mut now = 0;
        for i in 0..100_000u32 {
            let t = match r.below(3) {
                0 => now + 500 + r.below(20),
                1 => now + 1 + r.below(3000),
                _ => now + 1 + r.below(100),
            };
            match r.below(3) {
                0 => q.push_in_stream(0, t, ev(i)),
                1 => q.push_in_stream(3, t, ev(i)),
                _ => q.push(t, ev(i)),
            }
            reference.insert((t, tie_break(t, ev(i)), i));
            if r.below(2) == 0 {
                let (t, _, i) = reference.pop_first().unwrap();
                assert_eq!(q.pop(), Some((t, ev(i))));
                now = t;
            }
        }
        while let Some((t, _, i)) = reference.pop_first() {
            assert_eq!(q.pop(), Some((t, ev(i))));
        }
        assert!(q.is_empty());
    }

    #[test]
    fn an_event_for_the_current_instant_runs_after_all_that_was_due_then() {
        let mut q = EventQueue::new();
        for i in 0..20 {
            q.push(10, Event::FlowStart(FlowId::new(i)));
        }
        let (_, first) = q.pop().unwrap();
        // Caused now: after the 19 still due, whatever their kinds and ids.
        q.push(10, Event::PortFree(PortId::new(0)));
        q.push_after(0, Event::PortFree(PortId::new(1)));
        let rest: Vec<_> = std::iter::from_fn(|| q.pop()).map(|(_, e)| e).collect();
        assert_eq!(rest.len(), 21);
        assert!(rest[..19].iter().all(|e| matches!(e, Event::FlowStart(_))));
        assert!(!rest[..19].contains(&first));
    }

    #[test]
    fn upcoming_names_the_events_behind_the_popped_lane_front() {
        let mut q = EventQueue::new();
        for i in 0..HOT_AFTER {
            q.push_after(100, Event::PortFree(PortId::new(i)));
        }
        // The first HOT_AFTER - 1 pushes went to the general heap; the last opened a lane.
        assert_eq!(q.lanes.len(), 1);
        while q.pop().is_some() {}
        q.push(150, Event::SampleQueues);
        let mut later: Vec<Event> = (0..5).map(|i| Event::PortFree(PortId::new(i))).collect();
        for &e in &later {
            q.push_after(100, e);
        }
        later.sort_by_key(|&e| tie_break(200, e));
        assert_eq!(q.pop(), Some((150, Event::SampleQueues)));
        assert_eq!(
            (q.upcoming().at(0), q.upcoming().at(1)),
            (None, None),
            "popped from the general heap"
        );
        assert_eq!(q.pop(), Some((200, later[0])));
        assert_eq!(q.upcoming().at(0), Some(later[1]));
        assert_eq!(q.upcoming().at(3), Some(later[4]));
        assert_eq!(q.upcoming().at(4), None);
    }

    #[test]
    fn many_lanes_match_a_reference_ordering() {
        many_delays(LANE_WIDTH + 904, |q| assert!(q.lanes.len() > 8));
    }

    #[test]
    fn delays_within_a_lane_width_share_it_in_order() {
        // Forty delays 100 ps apart: one lane, whose pushes often pass earlier ones.
        many_delays(100, |q| assert_eq!(q.lanes.len(), 1));
    }

    /// Forty recurring delays `step` apart: lanes are created one by one (the tournament grows
    /// past its initial size) while events are pending in the older ones.
    fn many_delays(step: Time, check: impl Fn(&EventQueue)) {
        let mut r = crate::rng::stream(11, crate::rng::Purpose::Workload, 0);
        let mut q = EventQueue::new();
        let mut reference = std::collections::BTreeSet::new();
        let mut now = 0;
        for i in 0..400_000u32 {
            let d = step * (1 + r.below(40));
            q.push_after(d, Event::PortFree(PortId::new(i)));
            reference.insert((
                now + d,
                tie_break(now + d, Event::PortFree(PortId::new(i))),
                i,
            ));
            if r.below(3) != 0 {
                let (t, _, i) = reference.pop_first().unwrap();
                assert_eq!(q.peek_time(), Some(t));
                assert_eq!(q.pop(), Some((t, Event::PortFree(PortId::new(i)))));
                now = t;
            }
        }
        check(&q);
        while let Some((t, _, i)) = reference.pop_first() {
            assert_eq!(q.pop(), Some((t, Event::PortFree(PortId::new(i)))));
        }
        assert_eq!(q.pop(), None);
    }
}
