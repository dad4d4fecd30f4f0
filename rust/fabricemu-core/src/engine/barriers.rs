//! Barriers: counts of arrivals that start flows and chained barriers when they release (a
//! collective's steps, a step graph's ops, a training step's dependencies).
//!
//! A training plan has a barrier per op and a flow per transfer: 343,298 barriers and 391,680
//! waiting flows in `scenarios/parallel_training.toml`. Each barrier's counters are a small
//! struct; which flows wait for it and which barriers it arrives at are kept flat, by barrier
//! ([`BarrierLinks`]), not as two small vectors per barrier: those cost two allocations per
//! barrier at the build, about 57 MB per world there, and a parallel run builds one world per
//! partition and its view.

use std::sync::Arc;

use crate::ids::FlowId;
use crate::units::Time;
use crate::workload::{FlowPlan, Start};

/// A count of arrivals (flows that finished, chained barriers, timed arrivals) that releases,
/// when it reaches zero, the flows waiting on it (each after its gap) and one arrival at each
/// chained barrier (after the edge's delay): those are its [`BarrierLinks`].
#[derive(Debug, Default)]
pub(super) struct Barrier {
    pub remaining: u32,
    /// It can never release: a flow it waits for was given up on.
    pub dead: bool,
    /// When it released (NEVER: not yet).
    pub released_at: Time,
    /// Its latest arrival so far: it releases at the time of its last (which, in a partition
    /// told of another partition's arrivals only at a window's end, may come before others).
    pub latest: Time,
}

/// Per barrier, the flows waiting for it (each with its gap) and the barriers chained after it
/// (a step graph's dependencies and compute durations, each with its delay): the plan's in two
/// flat arrays indexed by barrier, those of the barriers amendments made in two more (appended
/// to as each amendment makes its barriers), and the lists of the barriers an amendment changed
/// afterwards, apart (copied out of the flat arrays the first time one changes).
///
/// A clone shares the plan's flat arrays (a parallel run's worlds hold one copy of them, since
/// 2026-12-05) and copies only the amendments' links.
#[derive(Debug, Clone, Default)]
pub(super) struct BarrierLinks {
    planned: Arc<FlatLinks>,
    /// The links of the barriers amendments made, from the plan's last barrier on: barrier
    /// `planned_barriers() + i`'s are at `i`. Flat like the plan's, not a [`Lists`] per barrier:
    /// a 1,024-GPU elastic job's re-plans make 450,000 barriers, whose two vectors and heap
    /// blocks held 54 MB of a 254 MB run (2026-12-05).
    made: FlatLinks,
    /// Per barrier (as far as the last one an amendment changed): its index in `amended`, or
    /// [`NOT_AMENDED`]. Indexed, not hashed: once a run is amended, every release looks its
    /// barrier up (an elastic job's re-plans amend every few hundred microseconds).
    amended_at: Vec<u32>,
    /// The lists of the barriers an amendment changed (these replace the flat arrays').
    amended: Vec<Lists>,
}

/// `BarrierLinks::amended_at` of a barrier no amendment changed.
const NOT_AMENDED: u32 = u32::MAX;
/// `BarrierLinks::amended_at` of a barrier whose waiting flows an amendment all took off (it
/// cancelled them), its chained barriers still the flat arrays': it needs no lists of its own.
const WAITING_CLEARED: u32 = u32::MAX - 1;

/// Links, flat, by barrier: the plan's, or those of the barriers amendments made (they never
/// change: a later amendment's changes go to `BarrierLinks::amended`).
#[derive(Debug, Clone, Default)]
struct FlatLinks {
    /// Barrier `b`'s waiting flows are `waiting[waiting_from[b]..waiting_from[b + 1]]`.
    waiting_from: Vec<u32>,
    waiting: Vec<(FlowId, Time)>,
    /// Barrier `b`'s chained barriers are `then[then_from[b]..then_from[b + 1]]`.
    then_from: Vec<u32>,
    then: Vec<(u32, Time)>,
}

#[derive(Debug, Clone, Default)]
struct Lists {
    waiting: Vec<(FlowId, Time)>,
    then: Vec<(u32, Time)>,
}

// 24 B of counters per barrier (two vectors and their heap blocks before 2026-12-04).
const _: () = assert!(std::mem::size_of::<Barrier>() == 24);

impl BarrierLinks {
    /// A barrier's counters and the starts of its two lists.
    pub const BYTES_PER_BARRIER: usize = std::mem::size_of::<Barrier>() + 2 * 4;
    /// A waiting flow with its gap, or a chained barrier with its delay.
    pub const BYTES_PER_LINK: usize = 16;

    /// Links of the plan's barriers (amended lists aside).
    pub fn len(&self) -> usize {
        self.planned.waiting.len() + self.planned.then.len()
    }

    /// The links of `plan`'s barriers: its flows that start after a barrier, in id order, and
    /// its edges, in plan order (the orders the releases start them in).
    pub fn of_plan(plan: &FlowPlan) -> Self {
        let n = plan.barrier_sizes.len();
        let waits = plan
            .flows
            .iter()
            .enumerate()
            .filter_map(|(id, f)| match f.start {
                Start::After { barrier, gap } => Some((barrier, (FlowId::new(id as u32), gap))),
                Start::At(_) => None,
            });
        let (waiting_from, waiting) = by_barrier(n, waits);
        let edges = (plan.barrier_edges.iter()).map(|e| (e.from, (e.to, e.delay)));
        let (then_from, then) = by_barrier(n, edges);
        Self {
            planned: Arc::new(FlatLinks {
                waiting_from,
                waiting,
                then_from,
                then,
            }),
            made: FlatLinks::default(),
            amended_at: Vec::new(),
            amended: Vec::new(),
        }
    }

    /// The flows waiting for barrier `b`, each with its gap.
    #[inline]
    pub fn waiting(&self, b: u32) -> &[(FlowId, Time)] {
        match self.amended_lists(b) {
            Some(l) => &l.waiting,
            None if self.amended_at.get(b as usize) == Some(&WAITING_CLEARED) => &[],
            None => {
                let (flat, b) = self.flat(b);
                of_barrier(&flat.waiting_from, &flat.waiting, b)
            }
        }
    }

    /// The barriers chained after barrier `b`, each with its delay.
    #[inline]
    pub fn then(&self, b: u32) -> &[(u32, Time)] {
        match self.amended_lists(b) {
            Some(l) => &l.then,
            None => {
                let (flat, b) = self.flat(b);
                of_barrier(&flat.then_from, &flat.then, b)
            }
        }
    }

    /// How many barriers the plan has (those after are amendments').
    #[inline]
    fn planned_barriers(&self) -> u32 {
        self.planned.waiting_from.len().saturating_sub(1) as u32
    }

    /// The flat arrays that hold barrier `b`'s links, and its index in them.
    #[inline]
    fn flat(&self, b: u32) -> (&FlatLinks, u32) {
        match b.checked_sub(self.planned_barriers()) {
            Some(i) => (&self.made, i),
            None => (&self.planned, b),
        }
    }

    /// The links of the `n` barriers an amendment made, `first..first + n` (the last made so
    /// far): `waits` (barrier, a flow waiting with its gap) and `thens` (barrier, a barrier
    /// chained with its delay), each barrier's in the order they come, as pushing them one by
    /// one onto its lists would keep them.
    pub fn add_made<W, T>(&mut self, first: u32, n: u32, waits: W, thens: T)
    where
        W: Iterator<Item = (u32, (FlowId, Time))> + Clone,
        T: Iterator<Item = (u32, (u32, Time))> + Clone,
    {
        let planned = self.planned_barriers();
        let made = &mut self.made;
        if made.waiting_from.is_empty() {
            made.waiting_from.push(0);
            made.then_from.push(0);
        }
        let covered = planned + made.waiting_from.len() as u32 - 1;
        if first < covered {
            // (Not expected: each amendment makes the barriers after every one made before.)
            for (b, w) in waits {
                self.waiting_mut(b).push(w);
            }
            for (b, t) in thens {
                self.then_mut(b).push(t);
            }
            return;
        }
        // Barriers made in between with no links (none today) have none.
        let pad = (first - covered) as usize;
        extend_flat(
            &mut made.waiting_from,
            &mut made.waiting,
            pad,
            n,
            first,
            waits,
        );
        extend_flat(&mut made.then_from, &mut made.then, pad, n, first, thens);
    }

    /// Barrier `b`'s waiting flows, to change (an amendment).
    pub fn waiting_mut(&mut self, b: u32) -> &mut Vec<(FlowId, Time)> {
        &mut self.lists_mut(b).waiting
    }

    /// Barrier `b`'s chained barriers, to change (an amendment).
    pub fn then_mut(&mut self, b: u32) -> &mut Vec<(u32, Time)> {
        &mut self.lists_mut(b).then
    }

    /// Take the flows `gone` says off barrier `b`'s waiting list (an amendment cancelled them).
    /// A list they all leave is marked empty rather than copied out: a parallel run's partition
    /// keeps the lists of barriers other partitions run (never released here), and at each of a
    /// 1,024-GPU elastic job's re-plans cleared 25,000 to 70,000 of them (a collective's steps,
    /// each barrier's few flows all cancelled), 41 MB of two threads' 434 MB peak (2026-12-05).
    pub fn retain_waiting(&mut self, b: u32, gone: impl Fn(FlowId) -> bool) {
        if self.amended_lists(b).is_none() && self.waiting(b).iter().all(|&(f, _)| gone(f)) {
            if self.amended_at.len() <= b as usize {
                self.amended_at.resize(b as usize + 1, NOT_AMENDED);
            }
            self.amended_at[b as usize] = WAITING_CLEARED;
            return;
        }
        self.waiting_mut(b).retain(|&(f, _)| !gone(f));
    }

    #[inline]
    fn amended_lists(&self, b: u32) -> Option<&Lists> {
        let &i = self.amended_at.get(b as usize)?;
        (i < WAITING_CLEARED).then(|| &self.amended[i as usize])
    }

    fn lists_mut(&mut self, b: u32) -> &mut Lists {
        if self.amended_lists(b).is_none() {
            let lists = Lists {
                waiting: self.waiting(b).to_vec(),
                then: self.then(b).to_vec(),
            };
            if self.amended_at.len() <= b as usize {
                self.amended_at.resize(b as usize + 1, NOT_AMENDED);
            }
            self.amended_at[b as usize] = self.amended.len() as u32;
            self.amended.push(lists);
        }
        let i = self.amended_at[b as usize];
        &mut self.amended[i as usize]
    }
}

/// Append to flat arrays (`from`, `items`) `pad` barriers with no entries, then the `n`
/// barriers from `first` on with their `entries` (barrier, entry).
fn extend_flat<T: Copy>(
    from: &mut Vec<u32>,
    items: &mut Vec<T>,
    pad: usize,
    n: u32,
    first: u32,
    entries: impl Iterator<Item = (u32, T)> + Clone,
) {
    let base = *from.last().expect("starts with a zero");
    from.extend(std::iter::repeat_n(base, pad));
    let (more_from, more) = by_barrier(n as usize, entries.map(|(b, e)| (b - first, e)));
    from.extend(more_from[1..].iter().map(|&o| base + o));
    items.extend_from_slice(&more);
}

/// Barrier `b`'s entries of `items` grouped by [`by_barrier`] (none for a barrier made since).
#[inline]
fn of_barrier<'a, T>(from: &[u32], items: &'a [T], b: u32) -> &'a [T] {
    match from.get(b as usize + 1) {
        Some(&end) => &items[from[b as usize] as usize..end as usize],
        None => &[],
    }
}

/// `items` (barrier, entry) grouped by barrier, each barrier's in the order they come: the
/// offsets (`n + 1`) and the entries.
fn by_barrier<T: Copy>(
    n: usize,
    items: impl Iterator<Item = (u32, T)> + Clone,
) -> (Vec<u32>, Vec<T>) {
    let mut from = vec![0u32; n + 1];
    for (b, _) in items.clone() {
        from[b as usize + 1] += 1;
    }
    for b in 0..n {
        from[b + 1] += from[b];
    }
    let mut next = from.clone();
    let mut out = Vec::with_capacity(from[n] as usize);
    // Slots filled out of order: start from copies of any entry, then place each.
    if let Some((_, first)) = items.clone().next() {
        out.resize(from[n] as usize, first);
    }
    for (b, item) in items {
        let at = &mut next[b as usize];
        out[*at as usize] = item;
        *at += 1;
    }
    (from, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_grouped_by_barrier_in_the_order_they_come() {
        let items = [(2u32, 'a'), (0, 'b'), (2, 'c'), (0, 'd'), (3, 'e')];
        let (from, out) = by_barrier(4, items.iter().copied());
        assert_eq!(from, vec![0, 2, 2, 4, 5]);
        assert_eq!(out, vec!['b', 'd', 'a', 'c', 'e']);
        let (from, out) = by_barrier::<char>(2, std::iter::empty());
        assert_eq!((from, out), (vec![0, 0, 0], vec![]));
    }

    #[test]
    fn an_amended_barrier_keeps_its_lists_apart_and_new_barriers_start_empty() {
        let mut l = BarrierLinks {
            planned: Arc::new(FlatLinks {
                waiting_from: vec![0, 1, 1],
                waiting: vec![(FlowId::new(7), 5)],
                then_from: vec![0, 0, 1],
                then: vec![(0, 9)],
            }),
            made: FlatLinks::default(),
            amended_at: Vec::new(),
            amended: Vec::new(),
        };
        let shared = l.clone();
        assert_eq!(l.waiting(0), &[(FlowId::new(7), 5)]);
        assert_eq!(l.then(1), &[(0, 9)]);
        assert!(l.waiting(5).is_empty() && l.then(5).is_empty()); // made by an amendment
        l.waiting_mut(0).push((FlowId::new(8), 0));
        l.then_mut(5).push((1, 3));
        assert_eq!(l.waiting(0), &[(FlowId::new(7), 5), (FlowId::new(8), 0)]);
        assert_eq!(l.then(0), &[] as &[(u32, Time)]);
        assert_eq!(l.then(5), &[(1, 3)]);
        assert_eq!(l.then(1), &[(0, 9)]); // untouched

        // A clone made before shares the plan's lists, not the amendments.
        assert!(Arc::ptr_eq(&l.planned, &shared.planned));
        assert_eq!(shared.waiting(0), &[(FlowId::new(7), 5)]);
        assert!(shared.then(5).is_empty());
    }

    #[test]
    fn barriers_an_amendment_makes_keep_their_links_flat_in_the_order_they_came() {
        let f = FlowId::new;
        let mut l = BarrierLinks::of_plan(&FlowPlan {
            barrier_sizes: vec![1, 1],
            ..FlowPlan::default()
        });
        assert_eq!(l.planned_barriers(), 2);
        // Barriers 2..5: 2 and 4 have waiting flows (in flow order), 3 a chained barrier.
        let waits = [(4, (f(10), 0)), (2, (f(11), 7)), (4, (f(12), 1))];
        l.add_made(
            2,
            3,
            waits.iter().copied(),
            [(3u32, (4u32, 9))].iter().copied(),
        );
        assert_eq!(l.waiting(2), &[(f(11), 7)]);
        assert!(l.waiting(3).is_empty());
        assert_eq!(l.waiting(4), &[(f(10), 0), (f(12), 1)]);
        assert_eq!(l.then(3), &[(4, 9)]);
        assert!(l.waiting(5).is_empty() && l.then(5).is_empty()); // not made yet
        assert!(l.amended.is_empty(), "no list of their own");
        // The next amendment's barriers come after (one with no links at all in between).
        l.add_made(6, 1, [(6, (f(13), 0))].iter().copied(), std::iter::empty());
        assert!(l.waiting(5).is_empty());
        assert_eq!(l.waiting(6), &[(f(13), 0)]);
        assert_eq!(l.waiting(4), &[(f(10), 0), (f(12), 1)]);
        // A later change to one copies its list out, as for the plan's; one that takes off all
        // its flows does not (then a change copies out an empty list).
        l.retain_waiting(2, |w| w == f(11));
        assert!(l.waiting(2).is_empty() && l.amended.is_empty());
        assert_eq!(l.then(3), &[(4, 9)]);
        l.retain_waiting(3, |_| true);
        assert!(l.waiting(3).is_empty() && l.amended.is_empty());
        assert_eq!(l.then(3), &[(4, 9)]);
        l.then_mut(3).push((2, 1));
        assert_eq!(l.then(3), &[(4, 9), (2, 1)]);
        assert!(l.waiting(3).is_empty());
        l.retain_waiting(4, |w| w == f(10));
        assert_eq!(l.waiting(4), &[(f(12), 1)]);
        l.waiting_mut(4).push((f(10), 0));
        l.waiting_mut(4).push((f(14), 2));
        l.retain_waiting(4, |w| w == f(10));
        assert_eq!(l.waiting(4), &[(f(12), 1), (f(14), 2)]);
        // Links added again to barriers made before go to their lists (a cleared one's too).
        l.add_made(2, 1, [(2, (f(15), 3))].iter().copied(), std::iter::empty());
        assert_eq!(l.waiting(2), &[(f(15), 3)]);
        assert_eq!(l.waiting(6), &[(f(13), 0)]);
    }
}
