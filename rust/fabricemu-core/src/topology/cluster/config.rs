//! `[cluster]`: GPU servers on any scale-out topology, and its checks, producing a [`ClusterSpec`].
//!
//! Defaults (see docs/gpu-clusters.md):
//! - `gpus_per_server = 8`, `nics_per_server = gpus_per_server`, `cabling = "rail"`, `planes = 1`,
//!   `cross_rail = "pxn"` (NCCL enables PXN by default: `NCCL_PXN_DISABLE=0`).
//! - `scaleup`: with more than one GPU per server, an NVSwitch domain of the server's GPUs at
//!   3600 Gbps per GPU and direction: NVIDIA H100 SXM, fourth-generation NVLink, 900 GB/s
//!   bidirectional per GPU (NVIDIA H100 Tensor Core GPU datasheet, 2022) = 450 GB/s each way.
//!   Latency 250 ns through the switch (an assumption of the order of published sub-microsecond
//!   NVSwitch port-to-port figures; set it when you know yours), links 5 ns (about 1 m of copper),
//!   buffer: the scenario's `switch.buffer`.
//! - `nic` (the GPU-NIC attachment): PCIe Gen5 x16, 32 GT/s x 16 lanes = 512 Gbps raw
//!   (PCI-SIG PCIe 5.0 base specification), latency 100 ns (an assumption), buffer: `switch.buffer`.
//! - `servers_per_rack`: the servers of one scale-up domain (1 without a domain spanning servers).
//! - `pxn_buffer`: 4 MiB, NCCL's default `NCCL_BUFFSIZE` (the buffer of one connection, through
//!   which NCCL's proxy stages what a PXN relay forwards; NCCL environment variables
//!   documentation): a relay GPU holds at most this much in transit for its NIC, then pauses its
//!   scale-up link (engine/relay.rs).

use serde::{Deserialize, Serialize};

use crate::config::check::{count, positive_size, Res};
use crate::config::values::{Duration, LinkRate, Size};
use crate::config::{
    Cabling, ClusterSpec, CrossRail, NicAttachSpec, ScaleUpSpec, ScenarioError, TopologySpec,
};

/// NVLink 4 (H100 SXM): 900 GB/s bidirectional per GPU, 450 GB/s = 3600 Gbps each direction.
pub const DEFAULT_SCALEUP_RATE: u64 = 3_600_000_000_000;
pub const DEFAULT_SCALEUP_LATENCY: u64 = 250_000;
pub const DEFAULT_SCALEUP_LINK_DELAY: u64 = 5_000;
/// PCIe Gen5 x16: 32 GT/s x 16 lanes.
pub const DEFAULT_PCIE_RATE: u64 = 512_000_000_000;
pub const DEFAULT_PCIE_LATENCY: u64 = 100_000;
/// NCCL_BUFFSIZE's default.
pub const DEFAULT_PXN_BUFFER: u64 = 4 << 20;

/// The most GPUs a cluster may have.
const MAX_GPUS: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CablingName {
    Rail,
    Tor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrossRailName {
    Spine,
    Pxn,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScaleUpKind {
    /// A non-blocking switch (NVSwitch) with its own rate, latency and buffer.
    Nvswitch,
    /// No scale-up domain: GPUs of a server reach each other through their NICs.
    None,
}

/// `[cluster]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus_per_server: Option<i64>,
    /// Divides gpus_per_server (default: one NIC per GPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nics_per_server: Option<i64>,
    /// `rail` (default) or `tor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cabling: Option<CablingName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub planes: Option<i64>,
    /// `pxn` (default) or `spine`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_rail: Option<CrossRailName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaleup: Option<ScaleUpFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicAttachFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub servers_per_rack: Option<i64>,
    /// PXN: what a relay GPU holds in transit for its NIC before it pauses its scale-up link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pxn_buffer: Option<Size>,
}

/// `cluster.scaleup`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ScaleUpFile {
    /// `nvswitch` (default) or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<ScaleUpKind>,
    /// GPUs per domain: a multiple of gpus_per_server (default: one server's GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<i64>,
    /// Per GPU, each direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<LinkRate>,
    /// Forwarding latency of the scale-up switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Duration>,
    /// Propagation delay of a GPU <-> switch link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_delay: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<Size>,
}

/// `cluster.nic`: the GPU-NIC attachment (PCIe-like).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NicAttachFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Duration>,
    /// Packet memory of a shared NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<Size>,
}

impl ClusterFile {
    /// Check the cluster against the topology it sits on. `switch_buffer` is the default buffer of
    /// the scale-up switches and shared NICs; `packet_bytes` the largest packet.
    pub fn validate(
        &self,
        topology: &TopologySpec,
        switch_buffer: u64,
        packet_bytes: u64,
    ) -> Res<ClusterSpec> {
        let gpus = match self.gpus_per_server {
            None => 8,
            v => count(
                "cluster.gpus_per_server",
                v,
                1,
                1024,
                "an integer number of GPUs per server",
            )?,
        };
        let nics = match self.nics_per_server {
            None => gpus,
            v => count(
                "cluster.nics_per_server",
                v,
                1,
                1024,
                "an integer number of NICs per server",
            )?,
        };
        if !gpus.is_multiple_of(nics) {
            return Err(ScenarioError::at(
                "cluster.nics_per_server",
                format!(
                    "must divide gpus_per_server ({gpus}): GPUs share NICs evenly, found {nics}"
                ),
            ));
        }
        let planes = match self.planes {
            None => 1,
            v => count(
                "cluster.planes",
                v,
                1,
                16,
                "an integer number of scale-out planes",
            )?,
        };
        let cabling = match self.cabling {
            None | Some(CablingName::Rail) => Cabling::Rail,
            Some(CablingName::Tor) => Cabling::Tor,
        };
        let cross_rail = match self.cross_rail {
            None | Some(CrossRailName::Pxn) => CrossRail::Pxn,
            Some(CrossRailName::Spine) => CrossRail::Spine,
        };

        // The topology's slots: `leaves` switches of `per_leaf` host slots each.
        let (leaves, per_leaf) = topology.slot_switches();
        let slots = leaves * per_leaf;
        match cabling {
            Cabling::Rail => {
                if !leaves.is_multiple_of(nics) {
                    return Err(ScenarioError::at(
                        "cluster.cabling",
                        format!(
                            "rail cabling puts NIC i of every server of a scalable unit on leaf i \
                             of the unit, so the {leaves} leaf switches of the topology must form \
                             units of nics_per_server ({nics}) leaves; use a multiple of {nics} \
                             leaves, or cabling = \"tor\""
                        ),
                    ));
                }
            }
            Cabling::Tor => {
                if !per_leaf.is_multiple_of(nics) {
                    return Err(ScenarioError::at(
                        "cluster.cabling",
                        format!(
                            "ToR cabling puts all NICs of a server on one leaf, so the host \
                             slots per leaf ({per_leaf}) must be a multiple of nics_per_server \
                             ({nics})"
                        ),
                    ));
                }
            }
        }
        let servers = slots / nics;
        let total = servers as u64 * gpus as u64;
        if total > MAX_GPUS || total * planes as u64 > 4 * MAX_GPUS {
            return Err(ScenarioError::at(
                "cluster.gpus_per_server",
                format!("{total} GPUs on {planes} plane(s): more than 2^20 GPUs"),
            ));
        }

        let scaleup = self.scaleup(gpus, servers, switch_buffer, packet_bytes)?;
        let servers_per_rack = match self.servers_per_rack {
            None => scaleup.map_or(1, |s| s.gpus / gpus),
            v => count(
                "cluster.servers_per_rack",
                v,
                1,
                1 << 20,
                "an integer number of servers per rack",
            )?,
        };
        // Only a one-NIC-per-GPU server distinguishes a given attachment (a link of its own)
        // from none (the GPU on its NIC port); a shared NIC always has its link.
        let nic_given = self.nic.is_some() && nics == gpus;
        let n = self.nic.clone().unwrap_or_default();
        let nic = NicAttachSpec {
            rate_bps: n.rate.map_or(DEFAULT_PCIE_RATE, |r| r.0),
            latency_ps: n.latency.map_or(DEFAULT_PCIE_LATENCY, |d| d.0),
            buffer_bytes: match n.buffer {
                None => switch_buffer,
                Some(b) => fits("cluster.nic.buffer", b.0, packet_bytes)?,
            },
        };
        if n.buffer.is_some() && nics == gpus {
            return Err(ScenarioError::at(
                "cluster.nic.buffer",
                "only a NIC shared by several GPUs has a buffer of its own (nics_per_server < \
                 gpus_per_server)",
            ));
        }
        let pxn_buffer_bytes = match self.pxn_buffer {
            None => DEFAULT_PXN_BUFFER,
            Some(b) => {
                let Some(up) = scaleup.filter(|_| cross_rail == CrossRail::Pxn) else {
                    return Err(ScenarioError::at(
                        "cluster.pxn_buffer",
                        "only PXN relays hold packets in transit: cross_rail = \"pxn\" with a \
                         scale-up domain",
                    ));
                };
                // Room for what arrives while the pause is on its way, and two packets more.
                let least = relay_headroom(&up, packet_bytes) + 2 * packet_bytes;
                if b.0 < least {
                    return Err(ScenarioError::at(
                        "cluster.pxn_buffer",
                        format!(
                            "a relay's transit buffer of {} B cannot hold what arrives while its \
                             pause reaches the scale-up switch and two packets more: at least \
                             {least} B with this scale-up rate, latency and link delay",
                            b.0
                        ),
                    ));
                }
                b.0
            }
        };
        Ok(ClusterSpec {
            gpus_per_server: gpus,
            nics_per_server: nics,
            cabling,
            planes,
            cross_rail,
            scaleup,
            nic,
            nic_given,
            servers_per_rack,
            pxn_buffer_bytes,
        })
    }

    fn scaleup(
        &self,
        gpus: u32,
        servers: u32,
        switch_buffer: u64,
        packet_bytes: u64,
    ) -> Res<Option<ScaleUpSpec>> {
        let s = match &self.scaleup {
            None if gpus == 1 => return Ok(None),
            None => ScaleUpFile::default(),
            Some(s) if s.kind == Some(ScaleUpKind::None) => {
                if s != &(ScaleUpFile {
                    kind: Some(ScaleUpKind::None),
                    ..ScaleUpFile::default()
                }) {
                    return Err(ScenarioError::at(
                        "cluster.scaleup.kind",
                        "\"none\" takes no other scale-up keys",
                    ));
                }
                return Ok(None);
            }
            Some(s) => s.clone(),
        };
        let per_domain = match s.gpus {
            None => gpus,
            v => count(
                "cluster.scaleup.gpus",
                v,
                1,
                1 << 16,
                "an integer number of GPUs per scale-up domain",
            )?,
        };
        if !per_domain.is_multiple_of(gpus) {
            return Err(ScenarioError::at(
                "cluster.scaleup.gpus",
                format!(
                    "a scale-up domain holds whole servers: expected a multiple of gpus_per_server \
                     ({gpus}), found {per_domain}"
                ),
            ));
        }
        let domain_servers = per_domain / gpus;
        if !servers.is_multiple_of(domain_servers) {
            return Err(ScenarioError::at(
                "cluster.scaleup.gpus",
                format!(
                    "the topology holds {servers} servers, which do not split into domains of \
                     {domain_servers} servers ({per_domain} GPUs)"
                ),
            ));
        }
        Ok(Some(ScaleUpSpec {
            gpus: per_domain,
            rate_bps: s.rate.map_or(DEFAULT_SCALEUP_RATE, |r| r.0),
            latency_ps: s.latency.map_or(DEFAULT_SCALEUP_LATENCY, |d| d.0),
            link_delay_ps: s.link_delay.map_or(DEFAULT_SCALEUP_LINK_DELAY, |d| d.0),
            buffer_bytes: match s.buffer {
                None => switch_buffer,
                Some(b) => fits("cluster.scaleup.buffer", b.0, packet_bytes)?,
            },
        }))
    }
}

impl ClusterFile {
    /// `[cluster]` with every default written out (see `scenario::normalise`), from the validated
    /// `spec`: `scaleup = { kind = "none" }` without a scale-up domain; `nic` on servers whose
    /// GPUs share NICs (a one-NIC-per-GPU server without it attaches each GPU directly: absent
    /// then, as written) and its `buffer` only there; `pxn_buffer` only with PXN relays.
    pub fn normalised(&self, spec: &ClusterSpec) -> ClusterFile {
        let shared = spec.nics_per_server < spec.gpus_per_server;
        let scaleup = match &spec.scaleup {
            None => ScaleUpFile {
                kind: Some(ScaleUpKind::None),
                ..ScaleUpFile::default()
            },
            Some(u) => ScaleUpFile {
                kind: Some(ScaleUpKind::Nvswitch),
                gpus: Some(u.gpus as i64),
                rate: Some(LinkRate(u.rate_bps)),
                latency: Some(Duration(u.latency_ps)),
                link_delay: Some(Duration(u.link_delay_ps)),
                buffer: Some(Size(u.buffer_bytes)),
            },
        };
        let nic = (shared || spec.nic_given).then(|| NicAttachFile {
            rate: Some(LinkRate(spec.nic.rate_bps)),
            latency: Some(Duration(spec.nic.latency_ps)),
            buffer: shared.then_some(Size(spec.nic.buffer_bytes)),
        });
        let pxn = spec.scaleup.is_some() && spec.cross_rail == CrossRail::Pxn;
        ClusterFile {
            gpus_per_server: Some(spec.gpus_per_server as i64),
            nics_per_server: Some(spec.nics_per_server as i64),
            cabling: Some(match spec.cabling {
                Cabling::Rail => CablingName::Rail,
                Cabling::Tor => CablingName::Tor,
            }),
            planes: Some(spec.planes as i64),
            cross_rail: Some(match spec.cross_rail {
                CrossRail::Pxn => CrossRailName::Pxn,
                CrossRail::Spine => CrossRailName::Spine,
            }),
            scaleup: Some(scaleup),
            nic,
            servers_per_rack: Some(spec.servers_per_rack as i64),
            pxn_buffer: pxn.then_some(Size(spec.pxn_buffer_bytes)),
        }
    }
}

/// Keys of `[cluster]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    (
        "cluster.nic",
        "one NIC per GPU, each GPU attached directly to its NIC port",
    ),
    (
        "cluster.nic.buffer",
        "one NIC per GPU: the NIC has no buffer of its own",
    ),
    (
        "cluster.pxn_buffer",
        "no PXN relays (cross_rail = \"spine\" or no scale-up domain)",
    ),
];

/// What still reaches a PXN relay after it decides to pause its scale-up link (`packet` the largest
/// packet): the packet its scale-up port is sending (the frame waits for it), then the frame's
/// serialisation, the link's delay both ways and the scale-up switch's forwarding latency (the
/// frame is received like any packet) at the scale-up rate, and the packet the switch is sending
/// when the frame arrives.
pub fn relay_headroom(up: &ScaleUpSpec, packet: u64) -> u64 {
    let frame = crate::switch::pfc::PFC_FRAME_BYTES as u64;
    let ps =
        2 * up.link_delay_ps + up.latency_ps + crate::units::serialisation_ps(frame, up.rate_bps);
    let in_flight = (ps as u128 * up.rate_bps as u128).div_ceil(8 * 1_000_000_000_000) as u64;
    2 * packet + frame + in_flight
}

/// A buffer that holds at least one packet.
fn fits(path: &str, bytes: u64, packet_bytes: u64) -> Res<u64> {
    positive_size(path, bytes)?;
    if bytes < packet_bytes {
        return Err(ScenarioError::at(
            path,
            format!(
                "a buffer of {bytes} B cannot hold one packet of {packet_bytes} B (transport.mtu \
                 + transport.header)"
            ),
        ));
    }
    Ok(bytes)
}
