//! Path choice: the router part of the World. The route table holds, for every switch and
//! destination edge switch, the group of egress ports on shortest paths (ECMP group). How a switch
//! picks a member is the load-balancing scheme: `ecmp` hashes the packet's header with the switch's
//! seed (as ASICs do, so flows collide); `spray` picks per packet; `flowlet` re-picks after an idle
//! gap; `adaptive` prefers the shortest local queue; dragonflies add non-minimal routing (Valiant,
//! UGAL, PAR). [`Router`] owns the tables, hashing and per-switch state, and decides per packet in
//! [`Router::choose`] (`choose.rs`); the engine (`engine/forwarding.rs`) only dispatches to it,
//! lending the fabric, the time and the queue depths ([`PortLoad`]).

mod choose;
pub mod config;
mod crc32;
mod search;
mod table;

pub use choose::{Choice, PortLoad, RouteStats};
pub use table::{Ports, RouteBuilder, RouteTable};

use crate::config::{hash_field, HashFunction, LoadBalancing, NonMinimal, RoutingSpec};
use crate::ids::PacketId;
use crate::rng::{self, mix64, Purpose, Rng};
use crate::topology::{Fabric, IdVec, NodeId, PortId};
use crate::units::Time;

/// RoCEv2's UDP destination port; the source port carries per-flow entropy.
pub const ROCE_UDP_PORT: u16 = 4791;

/// The header fields a flow's packets carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub src: NodeId,
    pub dst: NodeId,
    pub sport: u16,
    pub dport: u16,
    pub flow_label: u32,
}

impl Header {
    /// The same flow's reverse direction (ACKs): addresses and ports swapped.
    pub fn reversed(self) -> Header {
        Header {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            flow_label: self.flow_label,
        }
    }
}

/// The selected header fields folded into one 64-bit key by the configured hash. Computed once per
/// flow direction; each switch then combines it with its own seed.
pub fn header_key(spec: &RoutingSpec, h: Header) -> u64 {
    let f = spec.hash_fields;
    let pick = |bit: u8, v: u64| if f & bit != 0 { v } else { 0 };
    let fields = [
        pick(hash_field::SRC, h.src.get() as u64),
        pick(hash_field::DST, h.dst.get() as u64),
        pick(hash_field::SPORT, h.sport as u64),
        pick(hash_field::DPORT, h.dport as u64),
        pick(hash_field::FLOW_LABEL, h.flow_label as u64),
    ];
    match spec.hash {
        HashFunction::Mix => {
            mix64((fields[0] << 32) | fields[1])
                ^ mix64((fields[2] << 48) | (fields[3] << 32) | fields[4])
                ^ 17
        }
        HashFunction::Crc32 => {
            let mut bytes = [0u8; 20];
            bytes[0..4].copy_from_slice(&(fields[0] as u32).to_be_bytes());
            bytes[4..8].copy_from_slice(&(fields[1] as u32).to_be_bytes());
            bytes[8..10].copy_from_slice(&(fields[2] as u16).to_be_bytes());
            bytes[10..12].copy_from_slice(&(fields[3] as u16).to_be_bytes());
            bytes[12..16].copy_from_slice(&(fields[4] as u32).to_be_bytes());
            crc32::checksum(&bytes[..16]) as u64
        }
        HashFunction::Xor => {
            // Fold everything into 16 bits with XOR, as the cheapest ASIC hashes do.
            let x = fields[0]
                ^ (fields[0] >> 16)
                ^ fields[1]
                ^ (fields[1] >> 16)
                ^ fields[2]
                ^ fields[3]
                ^ fields[4]
                ^ (fields[4] >> 16);
            x & 0xffff
        }
    }
}

/// What a flowlet table entry remembers: the egress port chosen (flowlet and adaptive load
/// balancing) or, for dragonfly non-minimal routing per flowlet, the intermediate group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowletChoice {
    Port(PortId),
    /// Dragonfly routing: an intermediate group, or None for the minimal path.
    Via(Option<u16>),
}

/// One flowlet table slot: when it was last used (`NEVER`: never) and what it chose then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flowlet {
    pub last: Time,
    pub choice: FlowletChoice,
}

impl Flowlet {
    /// Never used: `last` is `Time::MAX` (the accessors then return None; the choice is unread).
    const UNUSED: Flowlet = Flowlet {
        last: Time::MAX,
        choice: FlowletChoice::Via(None),
    };

    /// The port chosen, if the slot holds one and was used at all.
    #[inline]
    pub fn port(&self) -> Option<PortId> {
        match self.choice {
            FlowletChoice::Port(p) if self.last != Time::MAX => Some(p),
            _ => None,
        }
    }

    /// The dragonfly route chosen, if the slot holds one: via a group, or (`Some(None)`)
    /// minimally.
    #[inline]
    pub fn via(&self) -> Option<Option<u16>> {
        match self.choice {
            FlowletChoice::Via(v) if self.last != Time::MAX => Some(v),
            _ => None,
        }
    }
}

/// Per-switch egress choice: the route tables and everything load balancing remembers.
pub struct Router {
    /// Shared, not copied, by the partitions of a parallel run (`Fabric::routes`). Replaced
    /// only through [`Router::replace_table`], which forgets what `foreseen` remembers of it.
    table: std::sync::Arc<RouteTable>,
    /// The fault-free table, kept once faults changed `table` (flows' nominal paths use it).
    pub nominal: Option<std::sync::Arc<RouteTable>>,
    pub mode: LoadBalancing,
    hash: HashFunction,
    /// Per-switch hash seed (indexed by node id; hosts unused; all equal without per-switch seeds).
    seeds: IdVec<NodeId, u64>,
    /// Spray, least-loaded start and Valiant draws, one stream per switch (indexed by node id):
    /// a switch's draws never depend on when another switch drew, so they are the same however
    /// the fabric is partitioned among threads.
    pub rng: IdVec<NodeId, Rng>,
    /// Round-robin position per group.
    pub rr: Vec<u32>,
    /// Flowlet / adaptive state: per switch, `table_size` entries of (last packet time, port).
    flowlets: Vec<Flowlet>,
    table_size: u32,
    /// The fabric has dragonfly groups (global links).
    pub dragonfly: bool,
    /// Lossless packets climb a class per global hop (see `RoutingSpec::hop_classes`).
    pub hop_classes: bool,
    /// Candidate ports of a decision (reused: no allocation per packet).
    scratch: Vec<PortId>,
    /// What routing counted (non-minimal packets, global hops).
    pub stats: RouteStats,
    /// Egress ports worked out ahead for packets about to reach a switch (`predict`).
    foreseen: Box<[Foreseen; FORESEEN]>,
}

/// How many predictions `Router::foreseen` keeps (by packet id): more than the events between a
/// prediction and its packet's arrival.
const FORESEEN: usize = 64;

/// A port `Router::predict` worked out for packet `pkt` reaching switch `node`, with the fields
/// it was worked out from: a memo of a function of (switch, destination, header) and the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Foreseen {
    pkt: PacketId,
    node: NodeId,
    dst: NodeId,
    port: PortId,
    key: u64,
}

impl Foreseen {
    const NONE: Foreseen = Foreseen {
        pkt: PacketId::NIL,
        node: NodeId::new(0),
        dst: NodeId::new(0),
        port: PortId::NONE,
        key: 0,
    };
}

impl Router {
    pub fn new(fabric: &Fabric, spec: &RoutingSpec, seed: u64) -> Self {
        let mut r = rng::stream(seed, Purpose::EcmpSeed, 0);
        let seeds = if spec.per_switch_seed {
            (0..fabric.num_nodes).map(|_| r.next_u64()).collect()
        } else {
            let one = r.next_u64();
            IdVec::from_elem(one, fabric.num_nodes as usize)
        };
        // The table built once for every partition of a parallel run, else built here.
        let table = match &fabric.routes {
            Some(t) => std::sync::Arc::clone(t),
            None => std::sync::Arc::new(RouteTable::build(fabric)),
        };
        let uses_flowlets = matches!(
            spec.load_balancing,
            LoadBalancing::Flowlet { .. }
                | LoadBalancing::Adaptive { .. }
                | LoadBalancing::NonMinimal(NonMinimal {
                    per_flowlet: true,
                    ..
                })
        );
        let switches = (fabric.num_nodes - fabric.num_hosts) as usize;
        let dragonfly = table.num_df_groups() > 0;
        Self {
            rr: vec![0; table.num_groups()],
            table,
            nominal: None,
            mode: spec.load_balancing,
            hash: spec.hash,
            seeds,
            rng: (0..fabric.num_nodes as u64)
                .map(|n| rng::stream(seed, Purpose::Spray, n))
                .collect(),
            flowlets: if uses_flowlets {
                vec![Flowlet::UNUSED; switches * spec.flowlet_table as usize]
            } else {
                Vec::new()
            },
            table_size: spec.flowlet_table,
            dragonfly,
            hop_classes: spec.hop_classes,
            scratch: Vec::with_capacity(64),
            stats: RouteStats::default(),
            foreseen: Box::new([Foreseen::NONE; FORESEEN]),
        }
    }

    /// The route table in use.
    #[inline(always)]
    pub fn table(&self) -> &std::sync::Arc<RouteTable> {
        &self.table
    }

    /// How many routes worked out ahead are remembered (for tests).
    #[cfg(test)]
    pub fn foreseen_in_use(&self) -> usize {
        self.foreseen
            .iter()
            .filter(|f| f.pkt != PacketId::NIL)
            .count()
    }

    /// Route by `table` from now on (the one replaced is returned).
    pub fn replace_table(
        &mut self,
        table: std::sync::Arc<RouteTable>,
    ) -> std::sync::Arc<RouteTable> {
        self.foreseen.fill(Foreseen::NONE);
        std::mem::replace(&mut self.table, table)
    }

    /// ECMP: the member of `group` that switch `node` hashes `key` to.
    #[inline]
    pub fn ecmp_index(&self, node: NodeId, key: u64, n: usize) -> usize {
        let seed = self.seeds[node];
        match self.hash {
            HashFunction::Mix => (((mix64(key ^ seed) >> 32) * n as u64) >> 32) as usize,
            HashFunction::Crc32 => {
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&key.to_be_bytes());
                bytes[8..].copy_from_slice(&seed.to_be_bytes());
                crc32::checksum(&bytes) as usize % n
            }
            HashFunction::Xor => ((key ^ (seed & 0xffff)) % n as u64) as usize,
        }
    }

    /// The flowlet-table entry of `key` at switch `node`.
    #[inline]
    pub fn flowlet_slot(&self, node: NodeId, num_hosts: u32, key: u64) -> usize {
        let i = (mix64(key ^ self.seeds[node].rotate_left(17)) % self.table_size as u64) as usize;
        (node.get() - num_hosts) as usize * self.table_size as usize + i
    }

    #[inline]
    pub fn flowlet(&mut self, slot: usize) -> &mut Flowlet {
        &mut self.flowlets[slot]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(hash: HashFunction, fields: u8) -> RoutingSpec {
        RoutingSpec {
            load_balancing: LoadBalancing::Ecmp,
            hash_fields: fields,
            hash,
            per_switch_seed: true,
            flowlet_table: 16,
            hop_classes: false,
        }
    }

    #[test]
    fn hash_fields_select_what_matters() {
        let h = Header {
            src: NodeId::new(1),
            dst: NodeId::new(2),
            sport: 50000,
            dport: ROCE_UDP_PORT,
            flow_label: 7,
        };
        let other_port = Header { sport: 50001, ..h };
        for f in [HashFunction::Mix, HashFunction::Crc32, HashFunction::Xor] {
            let all = spec(
                f,
                hash_field::SRC | hash_field::DST | hash_field::SPORT | hash_field::DPORT,
            );
            assert_ne!(header_key(&all, h), header_key(&all, other_port), "{f:?}");
            let addresses = spec(f, hash_field::SRC | hash_field::DST);
            assert_eq!(
                header_key(&addresses, h),
                header_key(&addresses, other_port),
                "{f:?}"
            );
        }
    }

    #[test]
    fn ecmp_spreads_keys_evenly() {
        // 4-way group, 40k random keys: each member within 3 % of a quarter.
        let (_, scenario) = crate::scenario::parse_toml(
            "[topology]\nkind = \"leaf_spine\"\nleaves = 2\nspines = 4\nhosts_per_leaf = 2\n[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"",
            "",
        )
        .unwrap();
        let fabric = crate::topology::build(&scenario.topology, &scenario.switch);
        for f in [HashFunction::Mix, HashFunction::Crc32] {
            let router = Router::new(&fabric, &spec(f, 31), 1);
            let mut counts = [0u32; 4];
            let mut r = rng::stream(5, Purpose::Workload, 0);
            for _ in 0..40_000 {
                let key = header_key(
                    &spec(f, 31),
                    Header {
                        src: NodeId::new(r.below(1000) as u32),
                        dst: NodeId::new(r.below(1000) as u32),
                        sport: r.below(65536) as u16,
                        dport: 4791,
                        flow_label: 0,
                    },
                );
                counts[router.ecmp_index(NodeId::new(fabric.num_hosts), key, 4)] += 1;
            }
            for c in counts {
                assert!((c as f64 - 10_000.0).abs() < 300.0, "{f:?}: {counts:?}");
            }
        }
    }
}
