//! The Packet record and its arena: packets are `Copy` records in one `Vec`, named by `PacketId`;
//! freed slots are recycled through a free list, so the hot path allocates nothing per packet.

/// Index of a packet in the arena.
pub type PacketId = u32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PacketKind {
    Data,
    /// Cumulative acknowledgement: `seq` is the next packet the receiver expects.
    Ack,
    /// Go-back-N request: `seq` is the packet the receiver expects (a gap was seen).
    Nack,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Header fields folded into one key (src, dst, ports), which ECMP hashes with each switch's seed.
    pub header_key: u64,
    pub flow: u32,
    /// Data: packet index within the flow. Ack/Nack: the next expected index.
    pub seq: u32,
    /// Destination host (routing looks only at this and `header_key`).
    pub dst: u32,
    /// Bytes on the wire, headers included.
    pub wire_bytes: u32,
    pub kind: PacketKind,
    /// Priority class (0..8, higher is served first).
    pub priority: u8,
}

/// All live packets; ids are recycled.
#[derive(Debug, Default)]
pub struct PacketArena {
    slots: Vec<Packet>,
    free: Vec<PacketId>,
    live: u64,
    created: u64,
}

impl PacketArena {
    #[inline]
    pub fn alloc(&mut self, p: Packet) -> PacketId {
        self.live += 1;
        self.created += 1;
        match self.free.pop() {
            Some(id) => {
                self.slots[id as usize] = p;
                id
            }
            None => {
                self.slots.push(p);
                (self.slots.len() - 1) as PacketId
            }
        }
    }

    #[inline]
    pub fn release(&mut self, id: PacketId) {
        self.live -= 1;
        self.free.push(id);
    }

    #[inline]
    pub fn get(&self, id: PacketId) -> &Packet {
        &self.slots[id as usize]
    }

    /// Packets created and not yet released (in queues, on links).
    pub fn live(&self) -> u64 {
        self.live
    }

    /// Packets ever created.
    pub fn created(&self) -> u64 {
        self.created
    }

    /// Arena slots allocated (the high-water mark of live packets).
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }
}
