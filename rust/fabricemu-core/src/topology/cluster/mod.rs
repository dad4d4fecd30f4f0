//! GPU clusters (`[cluster]`): servers of GPUs with a scale-up domain and NICs on a scale-out
//! topology of any kind.
//!
//! The topology builder lays out its switches and host *slots* (see [`super::FabricBuilder`]);
//! here the slots become NIC ports. With S = slots / nics_per_server servers of G GPUs and R NICs:
//!
//! - **Node ids**: GPUs first (`0..S*G`, server-major: server s has GPUs `s*G..(s+1)*G`; they are
//!   the engine's hosts), then the switches of each plane in turn (plane p's switches are the
//!   topology's, numbered after plane p-1's), then the shared NICs (when R < G: `S*R` of them,
//!   server-major), then one scale-up switch per domain.
//! - **Cabling**: the leaves (the slot switches, in id order, H slots each) form scalable units of
//!   R leaves. Rail: server j of unit u puts NIC i on leaf `u*R + i`, slot j (so a unit holds H
//!   servers, and NIC i of every server of a unit is on the unit's leaf i: rail i). ToR: server s
//!   takes the R consecutive slots `s*R..(s+1)*R`, all on one leaf (H a multiple of R).
//! - **Planes**: P copies of the topology; each NIC has one port per plane at the same slot, on that
//!   plane's copy of the host link.
//! - **NICs**: with R = G each GPU is its own NIC (its NIC links are its ports); an attachment
//!   (`nic`) then adds its latency to the NIC link's delay and caps its rate. With R < G GPUs
//!   `k*G/R..(k+1)*G/R` of a server share NIC k, a small switch of role `nic` with its own buffer,
//!   joined to each of its GPUs by a PCIe link (`nic.rate`, delay `nic.latency`); it forwards with
//!   no latency of its own.
//! - **Ports of a GPU**: its NIC port(s) in plane order first (or its PCIe link), the scale-up port
//!   last.
//! - **Scale-up**: domain d holds GPUs `d*D..(d+1)*D` (whole servers) and a switch of role
//!   `nvswitch` joined to each by a `scaleup` link (`scaleup.rate`, `scaleup.link_delay`); the
//!   switch forwards after `scaleup.latency` and has `scaleup.buffer`.

pub mod config;

use super::{Fabric, FabricBuilder, IdRange, IdVec, NodeId, PortId, Role, Tier};
use crate::config::{ClusterSpec, LinkSpec, TopologySpec};
use crate::units::{Bytes, Time};

/// Where every GPU of a cluster is, and its ports: what path choice and the collectives use.
/// Cold data (built once); per-GPU facts that are arithmetic are methods.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterLayout {
    pub spec: ClusterSpec,
    pub servers: u32,
    pub gpus: u32,
    /// Scale-up domains (0 without a scale-up domain) and GPUs in each.
    pub domains: u32,
    pub gpus_per_domain: u32,
    /// Host slots per leaf (servers per scalable unit with rail cabling).
    pub slots_per_leaf: u32,
    /// The first shared NIC node (`servers * nics_per_server` of them) when GPUs share NICs.
    pub first_nic: Option<NodeId>,
    /// The first scale-up switch (`domains` of them).
    pub first_scaleup_switch: Option<NodeId>,
    /// Per GPU, its ports toward its NIC(s): `nic_ports_per_gpu` each (one per plane with a NIC of
    /// its own; its PCIe link to a shared NIC otherwise).
    pub nic_ports: Vec<PortId>,
    pub nic_ports_per_gpu: u32,
    /// Per GPU, its port to its domain's scale-up switch (empty without scale-up).
    pub scaleup_ports: IdVec<NodeId, PortId>,
}

impl ClusterLayout {
    #[inline]
    pub fn server(&self, gpu: NodeId) -> u32 {
        gpu.get() / self.spec.gpus_per_server
    }

    /// The GPU's rail: the index of its NIC in its server.
    #[inline]
    pub fn rail(&self, gpu: NodeId) -> u32 {
        let per_nic = self.spec.gpus_per_server / self.spec.nics_per_server;
        (gpu.get() % self.spec.gpus_per_server) / per_nic
    }

    /// The GPU's scale-up domain (None without scale-up).
    #[inline]
    pub fn domain(&self, gpu: NodeId) -> Option<u32> {
        (self.gpus_per_domain > 0).then(|| gpu.get() / self.gpus_per_domain)
    }

    pub fn domain_gpus(&self, domain: u32) -> IdRange<NodeId> {
        let d = self.gpus_per_domain as usize;
        IdRange::from_indices(domain as usize * d, (domain as usize + 1) * d)
    }

    pub fn domain_switch(&self, domain: u32) -> Option<NodeId> {
        self.first_scaleup_switch
            .map(|s| NodeId::new(s.get() + domain))
    }

    pub fn rack(&self, server: u32) -> u32 {
        server / self.spec.servers_per_rack
    }

    pub fn racks(&self) -> u32 {
        self.servers.div_ceil(self.spec.servers_per_rack)
    }

    pub fn server_gpus(&self, server: u32) -> IdRange<NodeId> {
        let g = self.spec.gpus_per_server as usize;
        IdRange::from_indices(server as usize * g, (server as usize + 1) * g)
    }

    /// The GPU's ports toward its NIC(s).
    pub fn nic_ports(&self, gpu: NodeId) -> &[PortId] {
        let n = self.nic_ports_per_gpu as usize;
        &self.nic_ports[gpu.index() * n..(gpu.index() + 1) * n]
    }

    pub fn scaleup_port(&self, gpu: NodeId) -> Option<PortId> {
        self.scaleup_ports.get(gpu).copied()
    }

    /// The shared NIC node of (server, rail), when GPUs share NICs.
    pub fn nic_node(&self, server: u32, rail: u32) -> Option<NodeId> {
        self.first_nic
            .map(|n| NodeId::new(n.get() + server * self.spec.nics_per_server + rail))
    }

    /// The GPU's NIC port for a transfer whose header key is `key`: with several planes, one per
    /// transfer by a hash of its header (as a multi-plane NIC spreads its queue pairs).
    #[inline]
    pub fn nic_port(&self, gpu: NodeId, key: u64) -> PortId {
        let ports = self.nic_ports(gpu);
        if ports.len() == 1 {
            ports[0]
        } else {
            ports[(crate::rng::mix64(key ^ 0x706c_616e_6573) % ports.len() as u64) as usize]
        }
    }

    /// The GPU of `src`'s server on `dst`'s rail: where a PXN transfer crosses from the scale-up
    /// domain onto the scale-out rail.
    pub fn relay(&self, src: NodeId, dst: NodeId) -> NodeId {
        let per_nic = self.spec.gpus_per_server / self.spec.nics_per_server;
        let first = self.server(src) * self.spec.gpus_per_server;
        NodeId::new(first + self.rail(dst) * per_nic)
    }

    /// Path choice at the source GPU of a transfer `src` -> `dst` (header key `key`): its egress
    /// port, and the relay GPU when it goes by PXN.
    /// - Same scale-up domain: the scale-up port (scale-up only).
    /// - Another domain on the same rail, or `cross_rail = "spine"`, or no scale-up domain: the
    ///   NIC port (through the scale-out fabric, across rails through its spine).
    /// - Another domain on another rail with `cross_rail = "pxn"`: the scale-up port; the
    ///   scale-up switch hands the packet to [`Self::relay`], which sends it on its NIC.
    pub fn first_hop(&self, src: NodeId, dst: NodeId, key: u64) -> (PortId, Option<NodeId>) {
        let (Some(up), Some(d)) = (self.scaleup_port(src), self.domain(src)) else {
            return (self.nic_port(src, key), None);
        };
        if self.domain(dst) == Some(d) {
            return (up, None);
        }
        if self.spec.cross_rail == crate::config::CrossRail::Pxn && self.rail(src) != self.rail(dst)
        {
            (up, Some(self.relay(src, dst)))
        } else {
            (self.nic_port(src, key), None)
        }
    }

    /// Whether node `n` is a scale-up switch.
    pub fn is_scaleup_switch(&self, n: NodeId) -> bool {
        self.first_scaleup_switch
            .is_some_and(|s| (s.get()..s.get() + self.domains).contains(&n.get()))
    }

    fn is_nic(&self, n: NodeId) -> bool {
        self.first_nic.is_some_and(|s| {
            (s.get()..s.get() + self.servers * self.spec.nics_per_server).contains(&n.get())
        })
    }

    pub fn switch_latency(&self, n: NodeId) -> Option<Time> {
        if self.is_scaleup_switch(n) {
            self.spec.scaleup.map(|s| s.latency_ps)
        } else if self.is_nic(n) {
            Some(0)
        } else {
            None
        }
    }

    pub fn switch_buffer(&self, n: NodeId) -> Option<Bytes> {
        if self.is_scaleup_switch(n) {
            self.spec.scaleup.map(|s| s.buffer_bytes)
        } else if self.is_nic(n) {
            Some(self.spec.nic.buffer_bytes)
        } else {
            None
        }
    }
}

/// Slot index (in a plane's slot list) of NIC `nic` of server `s`.
fn slot_of(c: &ClusterSpec, slots_per_leaf: u32, s: u32, nic: u32) -> u32 {
    let r = c.nics_per_server;
    match c.cabling {
        crate::config::Cabling::Rail => {
            let (unit, j) = (s / slots_per_leaf, s % slots_per_leaf);
            (unit * r + nic) * slots_per_leaf + j
        }
        crate::config::Cabling::Tor => s * r + nic,
    }
}

/// Build the fabric of `topology` with the GPU servers of `c` (validated against each other).
pub fn build(
    topology: &TopologySpec,
    c: &ClusterSpec,
    ocs: Option<&super::ocs::OcsSpec>,
) -> Fabric {
    let (_, per_leaf) = topology.slot_switches();
    let slots = topology.num_hosts();
    let (g, r) = (c.gpus_per_server, c.nics_per_server);
    let servers = c.servers(slots);
    let gpus = servers * g;
    let shared = r < g;
    let mut b = FabricBuilder::new(gpus, Role::Gpu);
    let mut planes = Vec::with_capacity(c.planes as usize);
    for _ in 0..c.planes {
        super::lay_out_topology(topology, &mut b, ocs.is_some_and(|o| o.replace));
        planes.push(b.take_slots());
    }
    super::add_ocs_ports(&mut b, ocs);
    let first_nic = shared.then(|| b.add_switches(servers * r, Role::Nic));
    let (domains, per_domain) = match c.scaleup {
        Some(s) => (gpus / s.gpus, s.gpus),
        None => (0, 0),
    };
    let first_scaleup_switch = c
        .scaleup
        .is_some()
        .then(|| b.add_switches(domains, Role::NvSwitch));

    // NIC (s, i) is GPU s*G + i, or the shared NIC node.
    let nic_end = |s: u32, i: u32| match first_nic {
        Some(n) => n + s * r + i,
        None => s * g + i,
    };
    for plane in &planes {
        for s in 0..servers {
            for i in 0..r {
                let (leaf, spec) = plane[slot_of(c, per_leaf, s, i) as usize];
                let spec = if !shared && c.nic_given {
                    LinkSpec {
                        rate_bps: spec.rate_bps.min(c.nic.rate_bps),
                        delay_ps: spec.delay_ps + c.nic.latency_ps,
                    }
                } else {
                    spec
                };
                b.attach(nic_end(s, i), leaf, spec, Tier::Host);
            }
        }
    }
    if let Some(nic0) = first_nic {
        let pcie = LinkSpec {
            rate_bps: c.nic.rate_bps,
            delay_ps: c.nic.latency_ps,
        };
        let per_nic = g / r;
        for gpu in 0..gpus {
            let (s, k) = (gpu / g, gpu % g);
            b.link(gpu, nic0 + s * r + k / per_nic, pcie, Tier::Pcie);
        }
    }
    if let (Some(sw0), Some(s)) = (first_scaleup_switch, c.scaleup) {
        let link = LinkSpec {
            rate_bps: s.rate_bps,
            delay_ps: s.link_delay_ps,
        };
        for gpu in 0..gpus {
            b.link(gpu, sw0 + gpu / per_domain, link, Tier::ScaleUp);
        }
    }
    let mut f = b.build();

    let nic_ports_per_gpu = if shared { 1 } else { c.planes };
    let mut nic_ports = Vec::with_capacity((gpus * nic_ports_per_gpu) as usize);
    let mut scaleup_ports: IdVec<NodeId, PortId> = IdVec::new();
    for gpu in f.hosts() {
        for p in f.ports_of(gpu) {
            match f.tier[p] {
                Tier::ScaleUp => {
                    let at = scaleup_ports.push(p);
                    debug_assert_eq!(at, gpu, "one scale-up port per GPU");
                }
                _ => nic_ports.push(p),
            }
        }
    }
    debug_assert_eq!(nic_ports.len() as u32, gpus * nic_ports_per_gpu);
    f.cluster = Some(Box::new(ClusterLayout {
        spec: *c,
        servers,
        gpus,
        domains,
        gpus_per_domain: per_domain,
        slots_per_leaf: per_leaf,
        first_nic: first_nic.map(NodeId::new),
        first_scaleup_switch: first_scaleup_switch.map(NodeId::new),
        nic_ports,
        nic_ports_per_gpu,
        scaleup_ports,
    }));
    f
}
