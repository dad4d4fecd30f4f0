//! The retransmission timeout against the fabric's round trips (issue 15): a timeout shorter than
//! any round trip fires before any ACK can return, for every packet, so every flow retransmits
//! its window again and again (a storm that also makes the run crawl: a fuzz case with
//! `rto = "1ns"` ran for minutes). The build refuses such a timeout, naming `transport.rto` and
//! the minimum, and warns when it is below the base round trip between distant hosts.
//!
//! Round trips are base ones (empty queues): each link's propagation delay both ways, a packet's
//! serialisation at each hop (store and forward) and each switch's forwarding latency.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::config::check::Res;
use crate::config::ScenarioError;
use crate::ids::{IdVec, NodeId, PortId};
use crate::topology::Fabric;
use crate::units::{serialisation_ps, Time};

/// The packet sizes and latencies round trips are made of.
#[derive(Debug, Clone, Copy)]
pub struct RttParts {
    /// Wire bytes of the smallest data packet (header and 1 byte of payload).
    pub min_data: u64,
    /// Wire bytes of a full data packet (MTU and header).
    pub full_data: u64,
    pub ack: u64,
    /// `[switch].latency` (switches with their own latency use it instead).
    pub switch_latency: Time,
    /// In-network reduction is on: a rank's operand goes up to a switch and its result comes
    /// back down the same host link (its ACK is local), so the shortest round trip is one host
    /// link each way.
    pub in_network: bool,
}

fn latency(f: &Fabric, n: NodeId, parts: &RttParts) -> Time {
    f.switch_latency(n).unwrap_or(parts.switch_latency)
}

/// A lower bound on every round trip of the fabric: a minimum-size data packet out over a host
/// link (or a host's only link, for hosts wired to each other) and in over another, one switch's
/// latency each way, and the ACK back. With in-network reduction: one host link out and back,
/// with the switch's latency once. None: no host has a link.
pub fn shortest_round_trip(f: &Fabric, parts: &RttParts) -> Option<Time> {
    let (mut best_src, mut best_dst, mut best_lat) = (Time::MAX, Time::MAX, Time::MAX);
    let mut best = Time::MAX;
    for p in f.host_ports() {
        let q = f.peer_port[p];
        if q == p {
            continue; // not wired
        }
        let (d, dq) = (f.delay_ps[p], f.delay_ps[q]);
        let (r, rq) = (f.rate_bps[p], f.rate_bps[q]);
        if r == 0 || rq == 0 {
            continue;
        }
        let peer = f.peer_node[p];
        if parts.in_network && !f.is_host(peer) {
            let there_and_back = d
                + dq
                + serialisation_ps(parts.min_data, r)
                + serialisation_ps(parts.min_data, rq)
                + latency(f, peer, parts);
            best = best.min(there_and_back);
        }
        // This link as a flow's first hop (data out, ACK in) and as its last (data in, ACK out).
        let first = d + dq + serialisation_ps(parts.min_data, r) + serialisation_ps(parts.ack, rq);
        let last = d + dq + serialisation_ps(parts.min_data, rq) + serialisation_ps(parts.ack, r);
        if f.is_host(peer) {
            best = best.min(first); // two hosts wired to each other
        } else {
            best_src = best_src.min(first);
            best_dst = best_dst.min(last);
            best_lat = best_lat.min(latency(f, peer, parts));
        }
    }
    if best_src != Time::MAX {
        best = best.min(best_src + best_dst + 2 * best_lat);
    }
    (best != Time::MAX).then_some(best)
}

/// The base round trip of a full data packet and its ACK from host 0 to the host farthest from
/// it along shortest paths (Dijkstra over the fabric; hosts do not forward). In the regular
/// fabrics every host sees the same, so it stands for the longest base round trip of minimal
/// routing. None: host 0 reaches no other host.
pub fn farthest_round_trip(f: &Fabric, parts: &RttParts) -> Option<Time> {
    if f.num_hosts < 2 {
        return None;
    }
    let mut dist: IdVec<NodeId, Time> = IdVec::from_elem(Time::MAX, f.num_nodes as usize);
    let start = NodeId::new(0);
    dist[start] = 0;
    let mut heap = BinaryHeap::new();
    heap.push(Reverse((0, start)));
    let mut farthest = None;
    while let Some(Reverse((t, n))) = heap.pop() {
        if t > dist[n] {
            continue;
        }
        if n != start && f.is_host(n) {
            farthest = Some(t); // hosts come out in order of distance: the last is the farthest
            continue; // hosts do not forward
        }
        for p in f.ports_of(n) {
            let q: PortId = f.peer_port[p];
            let v = f.peer_node[p];
            if q == p || f.rate_bps[p] == 0 || f.rate_bps[q] == 0 {
                continue;
            }
            let hop = f.delay_ps[p]
                + f.delay_ps[q]
                + serialisation_ps(parts.full_data, f.rate_bps[p])
                + serialisation_ps(parts.ack, f.rate_bps[q])
                + if f.is_host(v) {
                    0
                } else {
                    2 * latency(f, v, parts)
                };
            let tv = t.saturating_add(hop);
            if tv < dist[v] {
                dist[v] = tv;
                heap.push(Reverse((tv, v)));
            }
        }
    }
    farthest
}

fn us(t: Time) -> String {
    format!("{:.3}us", t as f64 / 1e6)
}

/// Refuse `rto` below the fabric's shortest round trip; a warning (`"transport.rto: ..."`) if it
/// is below the base round trip to the host farthest from host 0.
pub fn check(rto: Time, f: &Fabric, parts: &RttParts) -> Res<Option<String>> {
    if let Some(min) = shortest_round_trip(f, parts) {
        if rto < min {
            return Err(ScenarioError::at(
                "transport.rto",
                format!(
                    "{} is below the shortest round trip this fabric allows, {} (a minimum-size \
                     data packet over two host links and a switch, and its ACK back): every \
                     packet would time out before its ACK could return, and the flows would \
                     retransmit without end; use at least {} (better several base round trips)",
                    us(rto),
                    us(min),
                    us(min)
                ),
            ));
        }
    }
    Ok(match farthest_round_trip(f, parts) {
        Some(far) if rto < far => Some(format!(
            "transport.rto: {} is below the base round trip from host 0 to the host farthest from \
             it, {} (full packets, empty queues): flows that far apart time out on every window \
             and retransmit it again and again; use several times that",
            us(rto),
            us(far)
        )),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::parse_toml;

    fn fabric(topology: &str) -> (Fabric, RttParts) {
        let (_, s) = parse_toml(
            &format!("{topology}\n[[workload]]\nkind = \"permutation\"\nsize = \"4KB\""),
            "t.toml",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let f = crate::topology::build_scenario(&s).unwrap_or_else(|e| panic!("{e}"));
        let t = &s.transport;
        let parts = RttParts {
            min_data: t.header_bytes + 1,
            full_data: t.mtu_bytes + t.header_bytes,
            ack: t.ack_bytes,
            switch_latency: s.switch.latency_ps,
            in_network: false,
        };
        (f, parts)
    }

    /// A k=4 fat tree at 100G with 1us links: by hand, two hosts on one edge switch are 4 link
    /// traversals apart per round trip (4us), a 63 B packet twice (5.04ns each) and a 66 B ACK
    /// twice (5.28ns each), plus the switch latency both ways; the farthest host (another pod)
    /// 12 traversals, a 4158 B packet and an ACK on 6 links, 5 switches both ways.
    #[test]
    fn round_trips_of_a_fat_tree_by_hand() {
        let (f, parts) = fabric(
            "[topology]\nkind = \"fat_tree\"\nk = 4\nlink_rate = \"100Gbps\"\nlink_delay = \"1us\"",
        );
        let lat = parts.switch_latency;
        let ser = |b: u64| serialisation_ps(b, 100_000_000_000);
        assert_eq!(
            shortest_round_trip(&f, &parts),
            Some(4_000_000 + 2 * ser(63) + 2 * ser(66) + 2 * lat)
        );
        assert_eq!(
            farthest_round_trip(&f, &parts),
            Some(12_000_000 + 6 * ser(4158) + 6 * ser(66) + 10 * lat)
        );
        assert!(check(4_000_000, &f, &parts).is_err());
        let e = check(1000, &f, &parts).unwrap_err().to_string();
        assert!(e.contains("transport.rto") && e.contains("4.0"), "{e}");
        assert!(check(5_000_000, &f, &parts).unwrap().is_some());
        assert_eq!(check(100_000_000, &f, &parts).unwrap(), None);
    }
}
