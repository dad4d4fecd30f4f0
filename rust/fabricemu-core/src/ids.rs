//! Typed ids: nodes, ports, links, flows and packets are named by `u32` newtypes, and the arrays
//! kept per node, per port or per flow are [`IdVec`]s, which only their own id type indexes. A
//! port id cannot index a per-node array, nor a flow id a per-port one, and the compiler says so.
//!
//! The newtypes are `#[repr(transparent)]` over `u32`: they cost nothing in the packed records
//! (`Packet`, `PortHot`) nor in the generated code. Integers become ids, and ids integers, only at
//! the edges: scenario integers, Arrow columns, Python (`NodeId::new(x)`, `id.index()`,
//! `id.get()`). Absence is an `Option<Id>`; only a packed hot record may keep a named `NONE` value
//! instead (where an `Option` would grow it), behind an accessor returning an `Option`.
//!
//! ```
//! use fabricemu_core::ids::{IdVec, NodeId, PortId};
//! let mut role: IdVec<NodeId, &str> = IdVec::from_elem("host", 2);
//! let spine = role.push("spine");
//! assert_eq!((spine, role[NodeId::new(0)]), (NodeId::new(2), "host"));
//! let peer: IdVec<PortId, NodeId> = IdVec::from_vec(vec![spine]);
//! assert_eq!(role[peer[PortId::new(0)]], "spine");
//! ```
//!
//! A per-node array indexed by a port id does not compile:
//!
//! ```compile_fail
//! use fabricemu_core::ids::{IdVec, NodeId, PortId};
//! let role: IdVec<NodeId, &str> = IdVec::from_elem("host", 2);
//! let _ = role[PortId::new(0)];
//! ```
//!
//! Nor does a plain integer:
//!
//! ```compile_fail
//! use fabricemu_core::ids::{IdVec, NodeId};
//! let role: IdVec<NodeId, &str> = IdVec::from_elem("host", 2);
//! let _ = role[0];
//! ```

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// An id usable as the index of an [`IdVec`].
pub trait Idx: Copy + Eq + Ord + fmt::Debug {
    /// The id of position `i` (`i` must fit in `u32`).
    fn from_index(i: usize) -> Self;
    /// The position this id names.
    fn index(self) -> usize;
}

macro_rules! define_id {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        pub struct $name(u32);

        impl $name {
            /// The id numbered `i` (scenario integers, Arrow columns, Python).
            #[inline(always)]
            pub const fn new(i: u32) -> Self {
                Self(i)
            }

            /// The id's number (for outputs and hashing).
            #[inline(always)]
            pub const fn get(self) -> u32 {
                self.0
            }

            /// The position it names in a plain array (at the edges; inside the engine, index an
            /// `IdVec` with the id itself).
            #[inline(always)]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl Idx for $name {
            #[inline(always)]
            fn from_index(i: usize) -> Self {
                debug_assert!(i <= u32::MAX as usize, "id out of range");
                Self(i as u32)
            }

            #[inline(always)]
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", stringify!($name), self.0)
            }
        }

        /// The bare number, as outputs and error messages print it.
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

define_id!(
    /// A node: hosts are `0..num_hosts`, switches follow.
    NodeId
);
define_id!(
    /// An egress port. Each unidirectional link leaves one port, so a port also names the link
    /// leaving it: [`LinkId::of_egress`] / [`LinkId::egress`] convert explicitly.
    PortId
);
define_id!(
    /// A unidirectional link, numbered as the egress port it leaves (the `link` column of
    /// links.arrow, a fault's links, a packet's ingress link at a switch).
    LinkId
);
define_id!(
    /// A flow (its position in the flow plan; the `flow_id` column).
    FlowId
);
define_id!(
    /// A packet's slot in the packet arena (slots are recycled).
    PacketId
);
define_id!(
    /// A flow record's slot in the flow table (slots are recycled as flows retire): what the
    /// transport state kept beside the record (congestion control's) is indexed by, so that it
    /// too lives only while its flow is in progress.
    RecordSlot
);

impl PortId {
    /// No port, for packed hot records only (`Packet::ingress`), where an `Option` would grow the
    /// record; such fields are read through an accessor returning an `Option`.
    pub const NONE: PortId = PortId(u32::MAX);
}

impl FlowId {
    /// No flow, for packed hot records only (`Packet::flow` of a PFC frame), where an `Option`
    /// would grow the record; such fields are read through an accessor returning an `Option`.
    pub const NONE: FlowId = FlowId(u32::MAX);
}

impl PacketId {
    /// No packet: the end of a list (`Packet`'s `next` stays 4 bytes; lists read it through
    /// accessors returning an `Option`).
    pub const NIL: PacketId = PacketId(u32::MAX);
}

impl LinkId {
    /// The link leaving egress port `p` (links are numbered as their egress ports).
    #[inline(always)]
    pub const fn of_egress(p: PortId) -> LinkId {
        LinkId(p.0)
    }

    /// The egress port this link leaves.
    #[inline(always)]
    pub const fn egress(self) -> PortId {
        PortId(self.0)
    }
}

/// A contiguous range of ids (the ports of a node, the switches), iterable like `a..b`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdRange<I> {
    start: u32,
    end: u32,
    _id: PhantomData<fn() -> I>,
}

impl<I: Idx> IdRange<I> {
    /// Ids `start..end`.
    #[inline(always)]
    pub fn new(start: I, end: I) -> Self {
        Self::from_indices(start.index(), end.index())
    }

    /// Ids numbered `start..end`.
    #[inline(always)]
    pub fn from_indices(start: usize, end: usize) -> Self {
        debug_assert!(start <= end && end <= u32::MAX as usize);
        IdRange {
            start: start as u32,
            end: end as u32,
            _id: PhantomData,
        }
    }

    #[inline(always)]
    pub fn contains(&self, id: I) -> bool {
        (self.start as usize..self.end as usize).contains(&id.index())
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.start >= self.end
    }

    /// The `k`-th id of the range, if there is one.
    #[inline(always)]
    pub fn nth_id(&self, k: usize) -> Option<I> {
        let i = self.start as usize + k;
        (i < self.end as usize).then(|| I::from_index(i))
    }

    /// The position of `id` within the range (`id` must be in it).
    #[inline(always)]
    pub fn offset_of(&self, id: I) -> usize {
        debug_assert!(self.contains(id));
        id.index() - self.start as usize
    }
}

impl<I: Idx> fmt::Debug for IdRange<I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}..{:?}", self.start, self.end)
    }
}

impl<I: Idx> Iterator for IdRange<I> {
    type Item = I;

    #[inline(always)]
    fn next(&mut self) -> Option<I> {
        if self.start < self.end {
            let i = self.start;
            self.start += 1;
            Some(I::from_index(i as usize))
        } else {
            None
        }
    }

    #[inline(always)]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.end.saturating_sub(self.start) as usize;
        (n, Some(n))
    }
}

impl<I: Idx> DoubleEndedIterator for IdRange<I> {
    #[inline(always)]
    fn next_back(&mut self) -> Option<I> {
        if self.start < self.end {
            self.end -= 1;
            Some(I::from_index(self.end as usize))
        } else {
            None
        }
    }
}

impl<I: Idx> ExactSizeIterator for IdRange<I> {}
impl<I: Idx> std::iter::FusedIterator for IdRange<I> {}

/// A `Vec<T>` indexed only by the id type `I` (one entry per node, port, flow...).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdVec<I, T> {
    raw: Vec<T>,
    _id: PhantomData<fn(&I)>,
}

impl<I, T> Default for IdVec<I, T> {
    fn default() -> Self {
        IdVec {
            raw: Vec::new(),
            _id: PhantomData,
        }
    }
}

impl<I, T: fmt::Debug> fmt::Debug for IdVec<I, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.raw.fmt(f)
    }
}

impl<I: Idx, T> IdVec<I, T> {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Self::from_vec(Vec::with_capacity(n))
    }

    /// Entry `i` of `raw` becomes the entry of the id numbered `i`.
    pub fn from_vec(raw: Vec<T>) -> Self {
        IdVec {
            raw,
            _id: PhantomData,
        }
    }

    /// `n` copies of `value`.
    pub fn from_elem(value: T, n: usize) -> Self
    where
        T: Clone,
    {
        Self::from_vec(vec![value; n])
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.raw.len()
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Room for `additional` more entries.
    pub fn reserve(&mut self, additional: usize) {
        self.raw.reserve(additional);
    }

    /// Append an entry; returns its id.
    #[inline]
    pub fn push(&mut self, value: T) -> I {
        let id = I::from_index(self.raw.len());
        self.raw.push(value);
        id
    }

    #[inline(always)]
    pub fn get(&self, id: I) -> Option<&T> {
        self.raw.get(id.index())
    }

    #[inline(always)]
    pub fn get_mut(&mut self, id: I) -> Option<&mut T> {
        self.raw.get_mut(id.index())
    }

    /// Every id, in order.
    #[inline]
    pub fn ids(&self) -> IdRange<I> {
        IdRange::from_indices(0, self.raw.len())
    }

    /// `(id, &entry)` pairs, in id order.
    #[inline]
    pub fn iter_enumerated(&self) -> Enumerated<'_, I, T> {
        Enumerated {
            inner: self.raw.iter().enumerate(),
            _id: PhantomData,
        }
    }

    /// `(id, &mut entry)` pairs, in id order.
    #[inline]
    pub fn iter_enumerated_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (I, &mut T)> + ExactSizeIterator {
        self.raw
            .iter_mut()
            .enumerate()
            .map(|(i, v)| (I::from_index(i), v))
    }

    #[inline]
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.raw.iter()
    }

    #[inline]
    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.raw.iter_mut()
    }

    /// The entries as a plain slice (for whole-array work: sums, copies, outputs).
    #[inline(always)]
    pub fn as_slice(&self) -> &[T] {
        &self.raw
    }

    #[inline(always)]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.raw
    }

    pub fn into_vec(self) -> Vec<T> {
        self.raw
    }

    pub fn fill(&mut self, value: T)
    where
        T: Clone,
    {
        self.raw.fill(value)
    }

    pub fn contains(&self, value: &T) -> bool
    where
        T: PartialEq,
    {
        self.raw.contains(value)
    }

    pub fn clear(&mut self) {
        self.raw.clear()
    }

    pub fn resize(&mut self, n: usize, value: T)
    where
        T: Clone,
    {
        self.raw.resize(n, value)
    }
}

/// The iterator of [`IdVec::iter_enumerated`].
#[derive(Clone)]
pub struct Enumerated<'a, I, T> {
    inner: std::iter::Enumerate<std::slice::Iter<'a, T>>,
    _id: PhantomData<fn() -> I>,
}

impl<'a, I: Idx, T> Iterator for Enumerated<'a, I, T> {
    type Item = (I, &'a T);

    #[inline(always)]
    fn next(&mut self) -> Option<(I, &'a T)> {
        self.inner.next().map(|(i, v)| (I::from_index(i), v))
    }

    #[inline(always)]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<I: Idx, T> DoubleEndedIterator for Enumerated<'_, I, T> {
    #[inline(always)]
    fn next_back(&mut self) -> Option<Self::Item> {
        self.inner.next_back().map(|(i, v)| (I::from_index(i), v))
    }
}

impl<I: Idx, T> ExactSizeIterator for Enumerated<'_, I, T> {}

impl<I: Idx, T> Index<I> for IdVec<I, T> {
    type Output = T;

    #[inline(always)]
    fn index(&self, id: I) -> &T {
        &self.raw[id.index()]
    }
}

impl<I: Idx, T> IndexMut<I> for IdVec<I, T> {
    #[inline(always)]
    fn index_mut(&mut self, id: I) -> &mut T {
        &mut self.raw[id.index()]
    }
}

impl<I: Idx, T> FromIterator<T> for IdVec<I, T> {
    fn from_iter<It: IntoIterator<Item = T>>(iter: It) -> Self {
        Self::from_vec(iter.into_iter().collect())
    }
}

impl<I: Idx, T> Extend<T> for IdVec<I, T> {
    fn extend<It: IntoIterator<Item = T>>(&mut self, iter: It) {
        self.raw.extend(iter)
    }
}

impl<'a, I: Idx, T> IntoIterator for &'a IdVec<I, T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.raw.iter()
    }
}

impl<'a, I: Idx, T> IntoIterator for &'a mut IdVec<I, T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.raw.iter_mut()
    }
}

impl<I: Idx, T> IntoIterator for IdVec<I, T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.raw.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const _: () = assert!(std::mem::size_of::<NodeId>() == 4);
    const _: () = assert!(std::mem::size_of::<Option<NodeId>>() == 8);

    #[test]
    fn ids_print_as_their_number_and_debug_as_their_type() {
        assert_eq!(NodeId::new(7).to_string(), "7");
        assert_eq!(format!("{:?}", PortId::new(3)), "PortId(3)");
        assert_eq!(FlowId::new(5).index(), 5);
        assert_eq!(LinkId::of_egress(PortId::new(9)).egress(), PortId::new(9));
    }

    #[test]
    fn id_vectors_push_index_and_enumerate_by_their_id() {
        let mut v: IdVec<FlowId, &str> = IdVec::new();
        let a = v.push("a");
        let b = v.push("b");
        assert_eq!((a, b), (FlowId::new(0), FlowId::new(1)));
        v[b] = "c";
        assert_eq!(v[a], "a");
        let pairs: Vec<_> = v.iter_enumerated().map(|(i, s)| (i.get(), *s)).collect();
        assert_eq!(pairs, vec![(0, "a"), (1, "c")]);
        assert_eq!(v.ids().collect::<Vec<_>>(), vec![a, b]);
        assert_eq!(v.len(), 2);
        assert_eq!(v.get(FlowId::new(2)), None);
    }

    #[test]
    fn id_ranges_iterate_both_ways() {
        let r: IdRange<PortId> = IdRange::new(PortId::new(4), PortId::new(7));
        assert_eq!(r.len(), 3);
        assert!(r.contains(PortId::new(6)) && !r.contains(PortId::new(7)));
        assert_eq!(r.nth_id(1), Some(PortId::new(5)));
        assert_eq!(r.nth_id(3), None);
        assert_eq!(r.offset_of(PortId::new(6)), 2);
        assert_eq!(r.rev().map(PortId::get).collect::<Vec<_>>(), vec![6, 5, 4]);
    }
}
