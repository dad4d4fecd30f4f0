//! packets.arrow: per-packet events at switch and NIC egress queues (enqueue, dequeue = start of
//! transmission, drop, ECN mark, trim, pause-blocked), filtered by flow, node, port and time
//! window and bounded in rows. Off by default; when on, rows go into column builders sized for a
//! whole batch ahead (no allocation per packet) and are written in batches like the other
//! streamed tables.
//!
//! The filter is resolved against the fabric when the scenario is built ([`resolve`]): node and
//! port names become bitmaps, so a packet event costs two table lookups before it is kept.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Int64Builder, StringBuilder, UInt32Builder, UInt8Builder,
};
use arrow_array::ArrayRef;
use arrow_schema::{DataType, Field};

use super::stream::{Columns, STREAM_BATCH_ROWS};
use super::tables::int64;
use crate::config::check::Res;
use crate::config::{PacketsTraceSpec, PortName, ScenarioError};
use crate::ids::{IdVec, NodeId, PortId};
use crate::packet::{flags, Packet, PacketKind};
use crate::topology::faults::node_id;
use crate::topology::Fabric;
use crate::units::Time;

/// Schema metadata key of packets.arrow: the fabric's node roles as runs of ids, JSON
/// `[[role, first_id, count], ...]` in id order, so that a reader can name a node as faults and
/// `trace.packets.nodes` accept it (`"leaf:3"`: the fourth node of role leaf in id order).
pub const META_NODE_ROLES: &str = "fabricemu.node_roles";

/// What happened to a packet at an egress queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketEvent {
    /// Queued at an egress port (a packet sent straight through is enqueued and dequeued at once).
    Enqueue,
    /// Its transmission starts.
    Dequeue,
    /// Dropped (no buffer, a failed link, or no path).
    Drop,
    /// Marked congestion-experienced.
    EcnMark,
    /// Its payload cut off (packet trimming); the row carries the size after trimming.
    Trim,
    /// At the head of its class while PFC pauses that class at the port.
    PauseBlocked,
}

impl PacketEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            PacketEvent::Enqueue => "enqueue",
            PacketEvent::Dequeue => "dequeue",
            PacketEvent::Drop => "drop",
            PacketEvent::EcnMark => "ecn_mark",
            PacketEvent::Trim => "trim",
            PacketEvent::PauseBlocked => "pause_blocked",
        }
    }
}

/// The packets.arrow `kind` of a packet.
pub fn kind_name(k: PacketKind) -> &'static str {
    match k {
        PacketKind::Data => "data",
        PacketKind::Ack => "ack",
        PacketKind::Nack => "nack",
        PacketKind::Cnp => "cnp",
        PacketKind::Pull => "pull",
        PacketKind::Pause | PacketKind::Resume => "pfc",
    }
}

/// The two ECN bits of the packet's IP header: 0 not ECN-capable, 2 ECT(0), 3 CE.
#[inline]
pub fn ecn_bits(f: u16) -> u8 {
    if f & flags::CE != 0 {
        3
    } else if f & flags::ECT != 0 {
        2
    } else {
        0
    }
}

/// `trace.packets` resolved against the fabric.
#[derive(Debug, Clone, PartialEq)]
pub struct PacketFilter {
    /// Sorted flow ids (None: all, PFC frames included).
    pub flows: Option<Vec<u32>>,
    pub nodes: Option<IdVec<NodeId, bool>>,
    pub ports: Option<IdVec<PortId, bool>>,
    pub start_ps: Time,
    /// Exclusive; `Time::MAX` for none.
    pub end_ps: Time,
    pub max_rows: u64,
    /// [`META_NODE_ROLES`].
    pub node_roles: String,
}

impl PacketFilter {
    /// Whether an event at `now`, node `node`, port `port` of flow `flow` (None: a PFC frame)
    /// is kept.
    #[inline]
    pub fn keeps(&self, now: Time, node: NodeId, port: PortId, flow: Option<u32>) -> bool {
        if now < self.start_ps || now >= self.end_ps {
            return false;
        }
        if let Some(n) = &self.nodes {
            if !n[node] {
                return false;
            }
        }
        if let Some(p) = &self.ports {
            if !p[port] {
                return false;
            }
        }
        match (&self.flows, flow) {
            (None, _) => true,
            (Some(only), Some(f)) => only.binary_search(&f).is_ok(),
            (Some(_), None) => false,
        }
    }
}

/// The fabric's node roles as runs (see [`META_NODE_ROLES`]).
pub fn node_role_runs(fabric: &Fabric) -> String {
    let mut runs: Vec<(&str, u32, u32)> = Vec::new();
    for (n, r) in fabric.role.iter_enumerated() {
        let role = r.as_str();
        match runs.last_mut() {
            Some(last) if last.0 == role => last.2 += 1,
            _ => runs.push((role, n.get(), 1)),
        }
    }
    serde_json::to_string(&runs).expect("plain data serialises")
}

/// Resolve `trace.packets` against the fabric: node names and ports to bitmaps, each error
/// naming its key.
pub fn resolve(fabric: &Fabric, spec: &PacketsTraceSpec) -> Res<PacketFilter> {
    let nn = fabric.num_nodes as usize;
    let np = fabric.num_ports() as usize;
    let nodes = match &spec.nodes {
        None => None,
        Some(list) => {
            let mut on = IdVec::from_elem(false, nn);
            for (i, name) in list.iter().enumerate() {
                on[node_id(fabric, format!("trace.packets.nodes.{i}"), name)?] = true;
            }
            Some(on)
        }
    };
    let ports = match &spec.ports {
        None => None,
        Some(list) => {
            let mut on = IdVec::from_elem(false, np);
            for (i, name) in list.iter().enumerate() {
                let path = format!("trace.packets.ports.{i}");
                let p = match name {
                    PortName::Id(id) if (*id as usize) < np => PortId::new(*id),
                    PortName::Id(id) => {
                        return Err(ScenarioError::at(
                            path,
                            format!(
                                "port {id} does not exist: the fabric has ports 0..={}",
                                np - 1
                            ),
                        ))
                    }
                    PortName::OfNode { node, index } => {
                        let n = node_id(fabric, path.clone(), node)?;
                        let of = fabric.ports_of(n);
                        match of.nth_id(*index as usize) {
                            Some(p) => p,
                            None => {
                                let count = of.into_iter().count();
                                return Err(ScenarioError::at(
                                    path,
                                    format!(
                                        "node {n} ({}) has {count} ports (0..={}), not port {index}",
                                        fabric.role[n].as_str(),
                                        count.saturating_sub(1)
                                    ),
                                ));
                            }
                        }
                    }
                };
                on[p] = true;
            }
            Some(on)
        }
    };
    Ok(PacketFilter {
        flows: spec.flows.clone(),
        nodes,
        ports,
        start_ps: spec.start_ps,
        end_ps: spec.end_ps.unwrap_or(Time::MAX),
        max_rows: spec.max_rows,
        node_roles: node_role_runs(fabric),
    })
}

/// One packets.arrow row's figures (see [`PacketRows`]).
#[derive(Debug, Clone, Copy)]
pub struct PacketRow {
    pub time_ps: Time,
    pub event: PacketEvent,
    pub node: NodeId,
    pub port: PortId,
    /// The port's index among its node's ports.
    pub port_index: u32,
    pub packet: Packet,
    /// The packet's source and destination hosts (a PFC frame: the switch sending it and the
    /// upstream node it pauses).
    pub src: NodeId,
    pub dst: NodeId,
    /// Bytes queued at the port (all classes) after the event.
    pub queue_bytes: u64,
}

/// packets.arrow: one row per packet event kept by the filter.
pub struct PacketRows {
    pub time_ps: Int64Builder,
    pub event: StringBuilder,
    pub node: UInt32Builder,
    pub port: UInt32Builder,
    pub port_index: UInt32Builder,
    pub prio: UInt8Builder,
    pub flow_id: Int64Builder,
    pub seq: UInt32Builder,
    pub size: UInt32Builder,
    pub queue_bytes: Int64Builder,
    pub ecn: UInt8Builder,
    pub kind: StringBuilder,
    pub src: UInt32Builder,
    pub dst: UInt32Builder,
    pub retx: BooleanBuilder,
    pub pfc_class: UInt8Builder,
    pub pfc_action: StringBuilder,
}

impl Default for PacketRows {
    /// Builders sized for a whole batch: appending a row allocates nothing.
    fn default() -> Self {
        let n = STREAM_BATCH_ROWS;
        Self {
            time_ps: Int64Builder::with_capacity(n),
            event: StringBuilder::with_capacity(n, n * 13),
            node: UInt32Builder::with_capacity(n),
            port: UInt32Builder::with_capacity(n),
            port_index: UInt32Builder::with_capacity(n),
            prio: UInt8Builder::with_capacity(n),
            flow_id: Int64Builder::with_capacity(n),
            seq: UInt32Builder::with_capacity(n),
            size: UInt32Builder::with_capacity(n),
            queue_bytes: Int64Builder::with_capacity(n),
            ecn: UInt8Builder::with_capacity(n),
            kind: StringBuilder::with_capacity(n, n * 4),
            src: UInt32Builder::with_capacity(n),
            dst: UInt32Builder::with_capacity(n),
            retx: BooleanBuilder::with_capacity(n),
            pfc_class: UInt8Builder::with_capacity(n),
            pfc_action: StringBuilder::with_capacity(n, n),
        }
    }
}

impl Columns for PacketRows {
    const FILE: &'static str = "packets.arrow";
    type Row = PacketRow;
    #[inline]
    fn push_row(&mut self, r: &PacketRow) {
        let p = &r.packet;
        self.time_ps.append_value(int64(r.time_ps));
        self.event.append_value(r.event.as_str());
        self.node.append_value(r.node.get());
        self.port.append_value(r.port.get());
        self.port_index.append_value(r.port_index);
        self.prio.append_value(p.priority);
        self.size.append_value(p.wire_bytes);
        self.queue_bytes.append_value(int64(r.queue_bytes));
        self.ecn.append_value(ecn_bits(p.flags));
        self.kind.append_value(kind_name(p.kind));
        self.src.append_value(r.src.get());
        self.dst.append_value(r.dst.get());
        match p.flow_id() {
            Some(f) => {
                self.flow_id.append_value(f.get() as i64);
                self.seq.append_value(p.seq);
                self.retx.append_value(p.flags & flags::RETX != 0);
                self.pfc_class.append_null();
                self.pfc_action.append_null();
            }
            None => {
                self.flow_id.append_null();
                self.seq.append_null();
                self.retx.append_null();
                self.pfc_class.append_value(p.pfc_class);
                self.pfc_action
                    .append_value(if p.kind == PacketKind::Pause {
                        "pause"
                    } else {
                        "resume"
                    });
            }
        }
    }
    fn fields() -> Vec<Field> {
        vec![
            Field::new("time_ps", DataType::Int64, false),
            Field::new("event", DataType::Utf8, false),
            Field::new("node", DataType::UInt32, false),
            Field::new("port", DataType::UInt32, false),
            Field::new("port_index", DataType::UInt32, false),
            Field::new("prio", DataType::UInt8, false),
            Field::new("flow_id", DataType::Int64, true),
            Field::new("seq", DataType::UInt32, true),
            Field::new("size", DataType::UInt32, false),
            Field::new("queue_bytes", DataType::Int64, false),
            Field::new("ecn", DataType::UInt8, false),
            Field::new("kind", DataType::Utf8, false),
            Field::new("src", DataType::UInt32, false),
            Field::new("dst", DataType::UInt32, false),
            Field::new("retx", DataType::Boolean, true),
            Field::new("pfc_class", DataType::UInt8, true),
            Field::new("pfc_action", DataType::Utf8, true),
        ]
    }
    fn rows(&self) -> usize {
        self.time_ps.len()
    }
    fn finish_columns(&mut self) -> Vec<ArrayRef> {
        // Fresh builders sized for the next batch (one allocation per column and batch).
        let mut done = std::mem::take(self);
        vec![
            Arc::new(done.time_ps.finish()),
            Arc::new(done.event.finish()),
            Arc::new(done.node.finish()),
            Arc::new(done.port.finish()),
            Arc::new(done.port_index.finish()),
            Arc::new(done.prio.finish()),
            Arc::new(done.flow_id.finish()),
            Arc::new(done.seq.finish()),
            Arc::new(done.size.finish()),
            Arc::new(done.queue_bytes.finish()),
            Arc::new(done.ecn.finish()),
            Arc::new(done.kind.finish()),
            Arc::new(done.src.finish()),
            Arc::new(done.dst.finish()),
            Arc::new(done.retx.finish()),
            Arc::new(done.pfc_class.finish()),
            Arc::new(done.pfc_action.finish()),
        ]
    }
}
