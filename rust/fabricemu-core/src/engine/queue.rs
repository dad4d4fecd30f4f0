//! The event queue, ordered by (time, insertion sequence): simultaneous events run in the order
//! they were scheduled, so a run is reproducible bit for bit.
//!
//! Most events are scheduled a fixed delay ahead of the current time (a serialisation time, a
//! serialisation plus a link delay, a timeout). Events pushed with the same delay come out of a
//! FIFO already sorted by (time, sequence), since time only advances. So `push_after` appends to
//! one FIFO ("lane") per distinct delay, and a small heap holds only the lanes' heads; events at
//! arbitrary times go to a general heap whose minimum competes with the lanes' heads. Profiling
//! showed a single binary heap's sift loops were the engine's largest cost.

use std::collections::VecDeque;

use crate::rng::mix64;
use crate::units::Time;

/// What happens; each names the component it wakes by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// An egress port finished serialising its packet and may start the next one.
    PortFree(u32),
    /// The head packet of a link reaches the far end.
    LinkArrival(u32),
    /// The next statically scheduled flow start (flows are sorted by start time).
    NextFlowStarts,
    /// A flow released by a dependency starts.
    FlowStart(u32),
    /// A flow's retransmission timer.
    Retransmit(u32),
    /// A flow's DCQCN rate-increase timer.
    RateTimer(u32),
    /// A flow's gated DCQCN rate decrease.
    RateDecreaseCheck(u32),
    /// Periodic samples for queues.arrow and links.arrow.
    SampleQueues,
    SampleLinks,
    /// Look for a cycle of PFC pauses.
    DeadlockCheck,
    /// A link fault begins, ends, or routing notices the link's state.
    FaultStart(u32),
    FaultEnd(u32),
    FaultDetected(u32),
}

#[derive(Clone, Copy)]
struct Entry<T: Copy> {
    /// time << 64 | sequence: one comparison orders by time, then FIFO.
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

    /// Replace the minimum with `e` (one sift instead of a pop and a push).
    #[inline]
    fn replace_top(&mut self, e: Entry<T>) {
        self.sift_down_from_root(e);
    }

    /// Put `last` at the root's place and move it down to where it fits.
    #[inline]
    fn sift_down_from_root(&mut self, last: Entry<T>) {
        let n = self.v.len();
        {
            // Move the hole at the root down to where the last entry fits.
            let mut i = 0;
            loop {
                let first = ARITY * i + 1;
                if first >= n {
                    break;
                }
                let end = (first + ARITY).min(n);
                let mut c = first;
                let mut ck = self.v[first].key;
                for j in first + 1..end {
                    let k = self.v[j].key;
                    if k < ck {
                        c = j;
                        ck = k;
                    }
                }
                if ck >= last.key {
                    break;
                }
                self.v[i] = self.v[c];
                i = c;
            }
            self.v[i] = last;
        }
    }
}

/// Lane id of the general heap in the heads heap.
const GENERAL: u32 = u32::MAX;
/// Beyond this many distinct delays, `push_after` falls back to the general heap.
const MAX_LANES: usize = 1024;
/// Entries of the most-recent-delays cache in front of the table.
const RECENT: usize = 8;
/// Slots of the delay -> lane table (open addressing, power of two, at most half full).
const TABLE_SLOTS: usize = 2 * MAX_LANES;

/// The simulator's future events.
pub struct EventQueue {
    /// Time of the last event popped: nothing is ever scheduled before it.
    now: Time,
    seq: u64,
    len: usize,
    lanes: Vec<VecDeque<Entry<Event>>>,
    /// (delay, lane) pairs; lane `u32::MAX` marks an empty slot.
    lane_table: Vec<(Time, u32)>,
    /// The last few (delay, lane) lookups.
    recent: [(Time, u32); RECENT],
    recent_next: usize,
    general: Heap<Event>,
    /// Heads of non-empty lanes and of the general heap. An entry is stale (and skipped) if its
    /// source's current head has another key; keys are unique, so the check is exact.
    heads: Heap<u32>,
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
            seq: 0,
            len: 0,
            lanes: Vec::new(),
            lane_table: vec![(0, u32::MAX); TABLE_SLOTS],
            recent: [(Time::MAX, 0); RECENT],
            recent_next: 0,
            general: Heap::new(),
            heads: Heap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn next_key(&mut self, time: Time) -> u128 {
        debug_assert!(time >= self.now, "event scheduled in the past");
        let key = ((time as u128) << 64) | self.seq as u128;
        self.seq += 1;
        self.len += 1;
        key
    }

    /// Schedule `event` at an absolute `time` (not before the current time).
    #[inline]
    pub fn push(&mut self, time: Time, event: Event) {
        let key = self.next_key(time);
        self.push_general(key, event);
    }

    fn push_general(&mut self, key: u128, event: Event) {
        self.general.push(Entry { key, item: event });
        if self.general.peek_key() == Some(key) {
            self.heads.push(Entry { key, item: GENERAL });
        }
    }

    /// Schedule `event` `delay` after the current time (the time of the last event popped). Use
    /// this for recurring delays: each distinct delay gets a FIFO lane.
    #[inline(always)]
    pub fn push_after(&mut self, delay: Time, event: Event) {
        let key = self.next_key(self.now + delay);
        let Some(lane) = self.lane_for(delay) else {
            self.push_general(key, event);
            return;
        };
        let q = &mut self.lanes[lane as usize];
        q.push_back(Entry { key, item: event });
        if q.len() == 1 {
            self.heads.push(Entry { key, item: lane });
        }
    }

    #[inline(always)]
    fn lane_for(&mut self, delay: Time) -> Option<u32> {
        // A handful of delays make up nearly every push: check the most recent ones first.
        for &(d, lane) in &self.recent {
            if d == delay {
                return Some(lane);
            }
        }
        let lane = self.lane_lookup(delay)?;
        self.recent[self.recent_next] = (delay, lane);
        self.recent_next = (self.recent_next + 1) % RECENT;
        Some(lane)
    }

    fn lane_lookup(&mut self, delay: Time) -> Option<u32> {
        let mask = TABLE_SLOTS - 1;
        let mut slot = mix64(delay) as usize & mask;
        loop {
            let (d, lane) = self.lane_table[slot];
            if lane == u32::MAX {
                if self.lanes.len() >= MAX_LANES {
                    return None;
                }
                let lane = self.lanes.len() as u32;
                self.lanes.push(VecDeque::new());
                self.lane_table[slot] = (delay, lane);
                return Some(lane);
            }
            if d == delay {
                return Some(lane);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// Time of the earliest event.
    #[inline]
    pub fn peek_time(&mut self) -> Option<Time> {
        loop {
            let e = *self.heads.v.first()?;
            if self.head_key(e.item) == Some(e.key) {
                return Some(time_of(e.key));
            }
            self.heads.pop();
        }
    }

    #[inline]
    fn head_key(&self, source: u32) -> Option<u128> {
        if source == GENERAL {
            self.general.peek_key()
        } else {
            self.lanes[source as usize].front().map(|e| e.key)
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        loop {
            let h = *self.heads.v.first()?;
            if self.head_key(h.item) != Some(h.key) {
                self.heads.pop(); // stale
                continue;
            }
            // The source's next head replaces this one in place (one sift), or leaves the heap.
            let (e, next) = if h.item == GENERAL {
                let e = self.general.pop().expect("valid head");
                (e, self.general.peek_key())
            } else {
                let q = &mut self.lanes[h.item as usize];
                let e = q.pop_front().expect("valid head");
                (e, q.front().map(|n| n.key))
            };
            match next {
                Some(key) => self.heads.replace_top(Entry { key, item: h.item }),
                None => {
                    self.heads.pop();
                }
            }
            self.len -= 1;
            self.now = time_of(e.key);
            return Some((self.now, e.item));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_are_fifo_and_times_ordered() {
        let mut q = EventQueue::new();
        q.push(5, Event::PortFree(1));
        q.push_after(3, Event::PortFree(2));
        q.push(5, Event::PortFree(3));
        q.push(3, Event::PortFree(4));
        q.push_after(4, Event::PortFree(5));
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (3, Event::PortFree(2)),
                (3, Event::PortFree(4)),
                (4, Event::PortFree(5)),
                (5, Event::PortFree(1)),
                (5, Event::PortFree(3)),
            ]
        );
    }

    #[test]
    fn matches_a_reference_ordering_on_random_input() {
        // Mix absolute pushes and relative pushes from a small and a large set of delays (the
        // latter overflowing the lanes), interleaved with pops.
        let mut r = crate::rng::stream(7, crate::rng::Purpose::Workload, 0);
        let mut q = EventQueue::new();
        let mut reference = std::collections::BTreeSet::new();
        let mut now = 0;
        for i in 0..200_000u32 {
            let t = match r.below(4) {
                0 => now + r.below(100),
                1 => {
                    let d = [0, 5, 17, 40][r.below(4) as usize];
                    q.push_after(d, Event::LinkArrival(i));
                    reference.insert((now + d, i));
                    continue;
                }
                2 => {
                    let d = r.below(5000);
                    q.push_after(d, Event::LinkArrival(i));
                    reference.insert((now + d, i));
                    continue;
                }
                _ => now + r.below(10),
            };
            q.push(t, Event::LinkArrival(i));
            reference.insert((t, i)); // i increases with insertion order, as the queue's sequence
            if r.below(2) == 0 {
                let (t, i) = reference.pop_first().unwrap();
                assert_eq!(q.peek_time(), Some(t));
                assert_eq!(q.pop(), Some((t, Event::LinkArrival(i))));
                now = t;
            }
            assert_eq!(q.len(), reference.len());
        }
        while let Some((t, i)) = reference.pop_first() {
            assert_eq!(q.pop(), Some((t, Event::LinkArrival(i))));
        }
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }
}
