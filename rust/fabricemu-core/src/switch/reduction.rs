//! Reduction engines: switches that combine the packets of an in-network collective
//! (`algorithm = "in_network"`, InfiniBand SHARP style; `"nvls"`, NVLink SHARP in a scale-up
//! switch). The model and its limits are in docs/in-network.md; the engine's per-packet side is
//! `engine::in_network`, the trees and the context allocation `workload::collective::in_network`.
//!
//! `[switch.reduction]` (every key optional; per-tier tables `[switch.reduction.<tier>]` with the
//! tier names of `topo`'s roles, `edge`, `agg`, `core`, `leaf`, `spine`, `nvswitch`, override the
//! top-level values for that tier's switches):
//!
//! | key | default | meaning |
//! | --- | --- | --- |
//! | `enabled` | true | switches of the tier have an engine (false in a tier table: that tier has none) |
//! | `throughput` | every port's rate summed | operand bytes per second the engine combines (SHARPv2 streaming aggregation runs at line rate: Graham et al., ISC 2020) |
//! | `contexts` | 1 | concurrent reduction trees (communicators) a switch serves (NVIDIA SHARP docs: Quantum switches support a single streaming aggregation flow by default, two on request) |
//! | `buffer` | 2 MiB | memory for partial aggregates, split evenly among the contexts (no published figure: enough for a window of one tree round trip at 400 Gb/s) |
//! | `on_exhausted` | `"ring"` | a communicator that finds no free context on its tree runs the flat ring instead (`"error"`: the build fails, naming the collective; `"wait"`: contexts are held from a communicator's first call to its last, and a call that finds none free waits until another communicator ends) |
//!
//! Flow control: each context's window is its share of the buffer in whole packets; a rank sends
//! at most that many packets beyond the last result it received, so the partial aggregates a
//! switch holds never exceed its buffer.

use serde::{Deserialize, Serialize};

use crate::config::check::{count, positive_size, Res};
use crate::config::values::{LinkRate, Size};
use crate::config::{ScenarioError, TransportSpec};
use crate::topology::Role;

/// The default buffer for partial aggregates per switch.
pub const DEFAULT_BUFFER: u64 = 2 << 20;
/// The default number of contexts per switch.
pub const DEFAULT_CONTEXTS: u32 = 1;
/// At most this many children per tree node (a bit mask per sequence slot).
pub const MAX_CHILDREN: usize = 63;

/// The tiers a table may name, with their roles.
pub const TIERS: [(&str, Role); 6] = [
    ("edge", Role::Edge),
    ("agg", Role::Agg),
    ("core", Role::Core),
    ("leaf", Role::Leaf),
    ("spine", Role::Spine),
    ("nvswitch", Role::NvSwitch),
];

/// What a communicator does when its tree finds no free context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnExhausted {
    /// Run the flat ring instead (recorded in collectives.arrow and counted in run.json).
    Ring,
    /// Fail the build, naming the collective.
    Error,
    /// Wait: in this mode a communicator holds its contexts from its first call's start to its
    /// last call's end, and a call whose tree finds no free context waits until a communicator
    /// ends and frees them (counted in run.json `in_network_waits`).
    Wait,
}

/// A tier's table: the same keys as the top level, without `on_exhausted`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct EngineFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contexts: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<Size>,
}

/// `[switch.reduction]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ReductionFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contexts: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<Size>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exhausted: Option<OnExhausted>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<EngineFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agg: Option<EngineFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<EngineFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf: Option<EngineFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spine: Option<EngineFile>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvswitch: Option<EngineFile>,
}

/// One tier's engines, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineSpec {
    /// Operand bytes per second (None: the switch's port rates summed).
    pub throughput_bps: Option<u64>,
    pub contexts: u32,
    pub buffer_bytes: u64,
    /// Packets one context may hold partial aggregates for (its window).
    pub window_packets: u32,
}

/// `[switch.reduction]`, validated: an engine per tier (None: that tier's switches have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReductionSpec {
    /// Indexed like [`TIERS`].
    pub tiers: [Option<EngineSpec>; 6],
    pub on_exhausted: OnExhausted,
}

impl ReductionSpec {
    /// The engine of a switch of role `role` (None: it cannot reduce).
    pub fn engine(&self, role: Role) -> Option<EngineSpec> {
        let i = TIERS.iter().position(|&(_, r)| r == role)?;
        self.tiers[i]
    }
}

impl ReductionFile {
    fn tier(&self, i: usize) -> Option<&EngineFile> {
        [
            &self.edge,
            &self.agg,
            &self.core,
            &self.leaf,
            &self.spine,
            &self.nvswitch,
        ][i]
            .as_ref()
    }

    /// The engines for packets of transport `t` (None if the table is absent or disabled).
    pub fn validate(f: Option<&ReductionFile>, t: &TransportSpec) -> Res<Option<ReductionSpec>> {
        let Some(f) = f else {
            return Ok(None);
        };
        if f.enabled == Some(false) {
            return Ok(None);
        }
        let packet = t.mtu_bytes + t.header_bytes;
        let mut tiers = [None; 6];
        for (i, (name, _)) in TIERS.iter().enumerate() {
            let e = f.tier(i);
            let path = |key: &str| match e {
                Some(_) => format!("switch.reduction.{name}.{key}"),
                None => format!("switch.reduction.{key}"),
            };
            if e.and_then(|e| e.enabled) == Some(false) {
                continue;
            }
            let pick = |tier: Option<i64>, top: Option<i64>| tier.or(top);
            let contexts = match pick(e.and_then(|e| e.contexts), f.contexts) {
                None => DEFAULT_CONTEXTS,
                Some(c) => count(&path("contexts"), Some(c), 1, 4096, "a number of contexts")?,
            };
            let buffer = e
                .and_then(|e| e.buffer)
                .or(f.buffer)
                .map_or(DEFAULT_BUFFER, |b| b.0);
            positive_size(&path("buffer"), buffer)?;
            let window = buffer / contexts as u64 / packet;
            if window == 0 {
                return Err(ScenarioError::at(
                    path("buffer"),
                    format!(
                        "{buffer} B shared by {contexts} contexts leaves less than one packet \
                         ({packet} B: transport.mtu + transport.header) per context"
                    ),
                ));
            }
            let throughput = e.and_then(|e| e.throughput).or(f.throughput).map(|r| r.0);
            if throughput == Some(0) {
                return Err(ScenarioError::at(
                    path("throughput"),
                    "expected a positive rate like \"3.2Tbps\"",
                ));
            }
            tiers[i] = Some(EngineSpec {
                throughput_bps: throughput,
                contexts,
                buffer_bytes: buffer,
                window_packets: window.min(u32::MAX as u64 / 2) as u32,
            });
        }
        Ok(Some(ReductionSpec {
            tiers,
            on_exhausted: f.on_exhausted.unwrap_or(OnExhausted::Ring),
        }))
    }
}

impl ReductionFile {
    /// `[switch.reduction]` with every default written out (see `scenario::normalise`): absent
    /// when the scenario has none, `enabled = false` alone when it is off, otherwise a complete
    /// table per tier (the top-level values are folded into them).
    pub fn normalised(
        file: Option<&ReductionFile>,
        spec: Option<&ReductionSpec>,
    ) -> Option<ReductionFile> {
        file?;
        let Some(spec) = spec else {
            return Some(ReductionFile {
                enabled: Some(false),
                ..ReductionFile::default()
            });
        };
        let tier = |i: usize| {
            Some(match spec.tiers[i] {
                None => EngineFile {
                    enabled: Some(false),
                    ..EngineFile::default()
                },
                Some(e) => EngineFile {
                    enabled: Some(true),
                    throughput: e.throughput_bps.map(LinkRate),
                    contexts: Some(e.contexts as i64),
                    buffer: Some(Size(e.buffer_bytes)),
                },
            })
        };
        Some(ReductionFile {
            enabled: Some(true),
            throughput: None,
            contexts: None,
            buffer: None,
            on_exhausted: Some(spec.on_exhausted),
            edge: tier(0),
            agg: tier(1),
            core: tier(2),
            leaf: tier(3),
            spine: tier(4),
            nvswitch: tier(5),
        })
    }
}

/// Keys of `[switch.reduction]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    (
        "switch.reduction",
        "no reduction engines (in-network collectives fall back to the ring)",
    ),
    (
        "switch.reduction.throughput",
        "each tier's table states its own",
    ),
    (
        "switch.reduction.contexts",
        "each tier's table states its own",
    ),
    (
        "switch.reduction.buffer",
        "each tier's table states its own",
    ),
    (
        "switch.reduction.*.throughput",
        "the switch's port rates summed (line-rate streaming aggregation)",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn transport() -> TransportSpec {
        crate::transport::config::TransportFile::default()
            .validate(100_000_000_000, false)
            .expect("default transport")
    }

    #[test]
    fn defaults_and_tier_overrides() {
        let t = transport();
        let f: ReductionFile = toml::from_str(
            "contexts = 2\n[core]\ncontexts = 4\nbuffer = \"8MiB\"\n[edge]\nenabled = false",
        )
        .unwrap();
        let s = ReductionFile::validate(Some(&f), &t).unwrap().unwrap();
        assert_eq!(s.engine(Role::Edge), None);
        let agg = s.engine(Role::Agg).unwrap();
        assert_eq!((agg.contexts, agg.buffer_bytes), (2, DEFAULT_BUFFER));
        let core = s.engine(Role::Core).unwrap();
        assert_eq!((core.contexts, core.buffer_bytes), (4, 8 << 20));
        let packet = t.mtu_bytes + t.header_bytes;
        assert_eq!(core.window_packets as u64, (8 << 20) / 4 / packet);
        assert_eq!(s.on_exhausted, OnExhausted::Ring);
        assert_eq!(s.engine(Role::Host), None);
    }

    #[test]
    fn bad_values_name_their_key() {
        let t = transport();
        for (text, key) in [
            ("contexts = 0", "switch.reduction.contexts"),
            ("[spine]\ncontexts = -1", "switch.reduction.spine.contexts"),
            ("buffer = \"1KiB\"", "switch.reduction.buffer"),
        ] {
            let f: ReductionFile = toml::from_str(text).unwrap();
            let e = ReductionFile::validate(Some(&f), &t).unwrap_err();
            assert!(e.to_string().contains(key), "{text}: {e}");
        }
    }
}
