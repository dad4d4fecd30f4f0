//! The event queue: a binary min-heap ordered by (time, insertion sequence), so simultaneous events
//! run in the order they were scheduled and a run is reproducible bit for bit.

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
}

#[derive(Clone, Copy)]
struct Entry {
    /// time << 64 | sequence: one comparison orders by time, then FIFO.
    key: u128,
    event: Event,
}

/// Min-heap of events.
#[derive(Default)]
pub struct EventQueue {
    heap: Vec<Entry>,
    seq: u64,
}

impl EventQueue {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Time of the earliest event.
    #[inline]
    pub fn peek_time(&self) -> Option<Time> {
        self.heap.first().map(|e| (e.key >> 64) as Time)
    }

    #[inline]
    pub fn push(&mut self, time: Time, event: Event) {
        let key = ((time as u128) << 64) | self.seq as u128;
        self.seq += 1;
        let mut i = self.heap.len();
        self.heap.push(Entry { key, event });
        // Sift up.
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].key <= key {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = Entry { key, event };
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Time, Event)> {
        let top = *self.heap.first()?;
        let last = self.heap.pop().expect("non-empty");
        let n = self.heap.len();
        if n > 0 {
            // Sift the last entry down from the root (bottom-up variant: fewer comparisons).
            let mut i = 0;
            loop {
                let l = 2 * i + 1;
                if l >= n {
                    break;
                }
                let r = l + 1;
                let c = if r < n && self.heap[r].key < self.heap[l].key {
                    r
                } else {
                    l
                };
                if self.heap[c].key >= last.key {
                    break;
                }
                self.heap[i] = self.heap[c];
                i = c;
            }
            self.heap[i] = last;
        }
        Some(((top.key >> 64) as Time, top.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_are_fifo_and_times_ordered() {
        let mut q = EventQueue::new();
        q.push(5, Event::PortFree(1));
        q.push(3, Event::PortFree(2));
        q.push(5, Event::PortFree(3));
        q.push(3, Event::PortFree(4));
        q.push(4, Event::PortFree(5));
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
        let mut r = crate::rng::stream(7, crate::rng::Purpose::Workload, 0);
        let mut q = EventQueue::new();
        let mut reference = std::collections::BTreeSet::new();
        for i in 0..20_000u32 {
            let t = r.below(100);
            q.push(t, Event::LinkArrival(i));
            reference.insert((t, i)); // i increases with insertion order, as the queue's sequence
            if r.below(3) == 0 {
                let (t, i) = reference.pop_first().unwrap();
                assert_eq!(q.pop(), Some((t, Event::LinkArrival(i))));
            }
        }
        while let Some((t, i)) = reference.pop_first() {
            assert_eq!(q.pop(), Some((t, Event::LinkArrival(i))));
        }
        assert!(q.is_empty());
    }
}
