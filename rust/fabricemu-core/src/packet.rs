//! The Packet record and its arena.
