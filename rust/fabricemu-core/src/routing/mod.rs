//! Path choice. The route table holds, for every switch and destination edge switch, the group of
//! egress ports on shortest paths (ECMP group); `ecmp` picks one member per packet by hashing the
//! packet's header key with the switch's seed, as switch ASICs do.

mod table;

pub use table::RouteTable;

use crate::packet::Packet;
use crate::rng::{self, mix64, Purpose};
use crate::scenario::LoadBalancing;
use crate::topology::{Fabric, NodeId, PortId};

/// Header fields of a flow, folded into one 64-bit key. The fold is a bijection-mixed combination, so
/// flows with distinct (src, dst, sport, dport) get effectively independent keys.
#[inline]
pub fn header_key(src: u32, dst: u32, sport: u16, dport: u16) -> u64 {
    const UDP: u64 = 17;
    mix64(((src as u64) << 32) | dst as u64)
        ^ mix64(((sport as u64) << 32) | ((dport as u64) << 8) | UDP)
}

/// RoCEv2's UDP destination port; the source port carries per-flow entropy.
pub const ROCE_UDP_PORT: u16 = 4791;

/// Per-packet egress choice at switches.
pub struct Router {
    pub table: RouteTable,
    /// Per-switch hash seed (indexed by node id; hosts unused).
    seeds: Vec<u64>,
    #[allow(dead_code)]
    mode: LoadBalancing,
}

impl Router {
    pub fn new(fabric: &Fabric, mode: LoadBalancing, seed: u64) -> Self {
        let mut r = rng::stream(seed, Purpose::EcmpSeed, 0);
        let seeds = (0..fabric.num_nodes).map(|_| r.next_u64()).collect();
        Self {
            table: RouteTable::build(fabric),
            seeds,
            mode,
        }
    }

    /// The egress port of switch `node` for `pkt`.
    #[inline]
    pub fn next_port(&self, node: NodeId, pkt: &Packet) -> PortId {
        let group = self.table.group(node, pkt.dst);
        match group.len() {
            1 => group[0],
            n => {
                let h = mix64(pkt.header_key ^ self.seeds[node as usize]);
                group[(((h >> 32) * n as u64) >> 32) as usize]
            }
        }
    }
}
