//! A NIC port's round robin of active flows, in one cache line per port.
//!
//! A NIC arbitrates among its active flows once per data packet it sends. Most NICs send a few
//! flows at a time (a permutation one, a collective's step one or two), so the first [`INLINE`]
//! flows are kept in the record itself, beside the flag that says the front was served last;
//! only a longer ring moves to the heap. With a `VecDeque` per port, every data packet touched
//! the deque's header and then its buffer, two lines that on a large fabric were both long
//! evicted (the port last sent a serialisation time, tens of thousands of events, ago).

use std::collections::VecDeque;

use crate::ids::FlowId;

/// Flows kept in the record (above this many, all of them are on the heap).
const INLINE: usize = 4;

#[derive(Debug, Clone, Default)]
#[repr(C, align(64))]
pub struct FlowRing {
    /// Flows in the ring.
    len: u32,
    /// Inline: the front's place in `inline` (the ring wraps around the array).
    head: u8,
    /// The front flow was served last: it moves to the back before the next choice.
    pub rotate: bool,
    inline: [FlowId; INLINE],
    /// Every flow, in order, once the ring outgrew `inline` (until it empties again).
    heap: VecDeque<FlowId>,
}

/// A port's ring stays within one cache line (the engine reads it once per data packet).
const _: () = assert!(std::mem::size_of::<FlowRing>() == 64);

impl FlowRing {
    #[inline(always)]
    fn spilled(&self) -> bool {
        !self.heap.is_empty()
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub fn front(&self) -> Option<FlowId> {
        if self.len == 0 {
            None
        } else if self.spilled() {
            self.heap.front().copied()
        } else {
            Some(self.inline[self.head as usize])
        }
    }

    #[inline]
    pub fn push_back(&mut self, fid: FlowId) {
        if !self.spilled() && (self.len as usize) < INLINE {
            self.inline[(self.head as usize + self.len as usize) % INLINE] = fid;
        } else {
            if !self.spilled() {
                // Full: the ring moves to the heap, in order.
                let head = self.head as usize;
                self.heap
                    .extend((0..INLINE).map(|i| self.inline[(head + i) % INLINE]));
                self.head = 0;
            }
            self.heap.push_back(fid);
        }
        self.len += 1;
    }

    #[inline]
    pub fn pop_front(&mut self) -> Option<FlowId> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        if self.spilled() {
            // Emptied, the ring is inline again (`head` is 0 since it spilled).
            return self.heap.pop_front();
        }
        let fid = self.inline[self.head as usize];
        self.head = ((self.head as usize + 1) % INLINE) as u8;
        Some(fid)
    }

    /// Move the front flow to the back (a ring of one stays as it is).
    #[inline(always)]
    pub fn rotate_one(&mut self) {
        if self.len <= 1 {
            return;
        }
        if self.spilled() {
            self.heap.rotate_left(1);
        } else {
            // The front moves to the place after the back (in a full ring, where it already is).
            let fid = self.inline[self.head as usize];
            self.head = ((self.head as usize + 1) % INLINE) as u8;
            self.inline[(self.head as usize + self.len as usize - 1) % INLINE] = fid;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring behaves as a `VecDeque` under every mix of pushes, pops and rotations, across
    /// the move to the heap and back.
    #[test]
    fn the_ring_is_a_fifo_with_rotation_inline_and_spilled() {
        let mut ring = FlowRing::default();
        let mut model: VecDeque<FlowId> = VecDeque::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next_id = 0;
        for step in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Pushes a little more often while small, pops more while large: the length
            // wanders across INLINE many times.
            let grow = if model.len() < 6 { 5 } else { 3 };
            match state % 10 {
                r if r < grow => {
                    let fid = FlowId::new(next_id);
                    next_id += 1;
                    ring.push_back(fid);
                    model.push_back(fid);
                }
                r if r < 8 => assert_eq!(ring.pop_front(), model.pop_front(), "step {step}"),
                _ => {
                    ring.rotate_one();
                    if model.len() > 1 {
                        model.rotate_left(1);
                    }
                }
            }
            assert_eq!(ring.len(), model.len(), "step {step}");
            assert_eq!(ring.front(), model.front().copied(), "step {step}");
        }
        while let Some(f) = model.pop_front() {
            assert_eq!(ring.pop_front(), Some(f));
        }
        assert!(ring.is_empty() && ring.pop_front().is_none());
    }
}
