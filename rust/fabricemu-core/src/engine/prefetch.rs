//! Asking the memory system in advance for the state that upcoming events touch.
//!
//! At thousands of hosts the engine waits on memory: each event's first touches (the port, its
//! queue, the packet at the head of a link) miss every cache level. The events a few places down
//! the lane the engine just popped run soon and name their port, so their lines can be requested
//! while the current event runs. A prefetch is only a hint: it never changes what the engine
//! computes, so outputs are byte-identical with or without it.

use super::queue::Event;
use super::world::World;

/// How far down the popped lane the port records are requested, and (nearer, once those are
/// likely in cache) the packet at the head of an arriving link.
const FAR: usize = 16;
const NEAR: usize = 8;

/// Request the cache line holding `r`'s first byte.
#[inline(always)]
fn hint<T>(r: &T) {
    hint_at((r as *const T).cast::<u8>());
}

/// Request the cache lines holding `r`'s first and last bytes (a record that may straddle two).
#[inline(always)]
fn hint_whole<T>(r: &T) {
    let first = (r as *const T).cast::<u8>();
    hint_at(first);
    hint_at(first.wrapping_add(std::mem::size_of::<T>() - 1));
}

/// Request the cache line holding address `at` (a no-op off x86-64).
#[inline(always)]
fn hint_at(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that reads nothing into the program and cannot fault, whatever
    // the address; ours point into live records anyway.
    #[allow(unsafe_code)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

impl World {
    /// Prefetch for the events `FAR` and `NEAR` places behind the front of the lane just popped.
    #[inline(always)]
    pub(super) fn prefetch_upcoming(&self) {
        let (near, far) = self.events.upcoming(NEAR, FAR);
        match far {
            Some(Event::LinkArrival(p)) => hint(&self.ports[p]),
            Some(Event::PortFree(p)) => {
                hint(&self.ports[p]);
                hint(&self.queues[p]);
            }
            _ => {}
        }
        if let Some(Event::LinkArrival(p)) = near {
            if let Some(head) = self.ports[p].pipe.front() {
                // A 48-byte record may straddle two lines.
                hint_whole(self.packets.get(head));
            }
        }
    }
}
