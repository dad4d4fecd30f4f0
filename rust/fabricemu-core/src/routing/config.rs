//! `[routing]`: the load-balancing scheme, ECMP hashing and their checks, producing a [`RoutingSpec`].

use serde::{Deserialize, Serialize};

use crate::config::check::Res;
use crate::config::values::{Duration, Size};
use crate::config::{
    hash_field, HashFunction, LoadBalancing, NonMinimal, NonMinimalMode, Pick, RoutingSpec,
    ScenarioError, SwitchSpec, TransportSpec,
};

/// `routing.load_balancing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadBalancingName {
    Ecmp,
    Spray,
    Flowlet,
    Adaptive,
    Min,
    Valiant,
    UgalL,
    UgalG,
    Par,
}

impl LoadBalancingName {
    fn name(self) -> &'static str {
        match self {
            Self::Ecmp => "ecmp",
            Self::Spray => "spray",
            Self::Flowlet => "flowlet",
            Self::Adaptive => "adaptive",
            Self::Min => "min",
            Self::Valiant => "valiant",
            Self::UgalL => "ugal_l",
            Self::UgalG => "ugal_g",
            Self::Par => "par",
        }
    }

    /// Routes through dragonfly groups (needs a dragonfly fabric).
    fn dragonfly_only(self) -> bool {
        matches!(
            self,
            Self::Min | Self::Valiant | Self::UgalL | Self::UgalG | Self::Par
        )
    }
}

/// How spraying picks a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SprayPick {
    Random,
    RoundRobin,
    LeastLoaded,
}

/// How a flowlet picks its new port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowletPick {
    Random,
    LeastLoaded,
}

/// Decide per packet or per flowlet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Granularity {
    Packet,
    Flowlet,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HashFieldName {
    Src,
    Dst,
    Sport,
    Dport,
    FlowLabel,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HashName {
    Mix,
    Crc32,
    Xor,
}

/// `[routing]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingFile {
    /// `ecmp` (default), `spray`, `flowlet`, `adaptive`; dragonflies: `min`, `valiant`, `ugal_l`,
    /// `ugal_g`, `par`.
    #[serde(default = "RoutingFile::default_lb")]
    pub load_balancing: LoadBalancingName,
    /// Header fields ECMP hashes: `src`, `dst`, `sport`, `dport`, `flow_label`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_fields: Option<Vec<HashFieldName>>,
    /// `mix` (default), `crc32` or `xor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<HashName>,
    /// Each switch hashes with its own seed (avoids polarisation). Default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_switch_seed: Option<bool>,
    /// Spray: `random` (default), `round_robin` or `least_loaded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spray: Option<SprayPick>,
    /// Flowlet / adaptive: idle gap after which a flow may change path (default 50us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flowlet_gap: Option<Duration>,
    /// Flowlet: `random` (default) or `least_loaded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flowlet_pick: Option<FlowletPick>,
    /// Flowlet table entries per switch (default 4096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flowlet_table: Option<i64>,
    /// Adaptive and dragonfly non-minimal: decide per `packet` or per `flowlet`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<Granularity>,
    /// Adaptive: bias toward the previous port, in queued bytes (default 4KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive_bias: Option<Size>,
    /// UGAL / PAR: random intermediate groups compared with the minimal path (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ugal_candidates: Option<i64>,
    /// UGAL / PAR: bias toward the minimal path (default two packets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ugal_threshold: Option<Size>,
    /// Dragonflies under PFC: raise the priority class per global hop (default true there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_classes: Option<bool>,
}

impl RoutingFile {
    fn default_lb() -> LoadBalancingName {
        LoadBalancingName::Ecmp
    }

    /// The keys only some schemes use, and whether each is set.
    fn scheme_keys(&self) -> [(&'static str, bool); 8] {
        [
            ("spray", self.spray.is_some()),
            ("flowlet_gap", self.flowlet_gap.is_some()),
            ("flowlet_pick", self.flowlet_pick.is_some()),
            ("flowlet_table", self.flowlet_table.is_some()),
            ("adaptive", self.adaptive.is_some()),
            ("adaptive_bias", self.adaptive_bias.is_some()),
            ("ugal_candidates", self.ugal_candidates.is_some()),
            ("ugal_threshold", self.ugal_threshold.is_some()),
        ]
    }

    /// Whether scheme `lb` uses `key`.
    fn uses(lb: LoadBalancingName, key: &str) -> bool {
        use LoadBalancingName as L;
        let flowlet = matches!(key, "flowlet_gap" | "flowlet_table");
        match lb {
            L::Ecmp | L::Min => false,
            L::Spray => key == "spray",
            L::Flowlet => flowlet || key == "flowlet_pick",
            L::Adaptive => flowlet || key == "adaptive" || key == "adaptive_bias",
            L::Valiant => flowlet || key == "adaptive",
            L::UgalL | L::UgalG | L::Par => {
                flowlet || key == "adaptive" || key.starts_with("ugal_")
            }
        }
    }

    /// The routing of a fabric (`dragonfly`: of the dragonfly families); `packet_bytes` (MTU plus
    /// header) sizes the default UGAL threshold.
    pub fn validate(&self, dragonfly: bool, packet_bytes: u64) -> Res<RoutingSpec> {
        let lb = self.load_balancing;
        if lb.dragonfly_only() && !dragonfly {
            return Err(ScenarioError::at(
                "routing.load_balancing",
                format!("{:?} routes through dragonfly groups: it needs topology.kind = \"dragonfly\" or \"dragonfly_plus\" (Clos fabrics use \"ecmp\", \"spray\", \"flowlet\" or \"adaptive\")", lb.name()),
            ));
        }
        if self.hop_classes == Some(true) && !dragonfly {
            return Err(ScenarioError::at(
                "routing.hop_classes",
                "hop classes are for dragonfly fabrics (up/down Clos routes cannot deadlock)",
            ));
        }
        // Keys of another scheme are errors, so a typo'd scheme cannot ignore them. On dragonflies
        // the UGAL keys may stay while a sweep varies the routing (min and valiant ignore them).
        for (key, set) in self.scheme_keys() {
            let ugal_key = dragonfly && key.starts_with("ugal_");
            if set && !Self::uses(lb, key) && !ugal_key {
                return Err(ScenarioError::at(
                    format!("routing.{key}"),
                    format!("not used with load_balancing = {:?}", lb.name()),
                ));
            }
        }
        let gap = self.flowlet_gap.map(|d| d.0).unwrap_or(50_000_000);
        if gap == 0 {
            return Err(ScenarioError::at(
                "routing.flowlet_gap",
                "expected a positive duration",
            ));
        }
        let candidates = match self.ugal_candidates {
            None => 1,
            Some(n) if (1..=64).contains(&n) => n as u32,
            Some(n) => {
                return Err(ScenarioError::at(
                    "routing.ugal_candidates",
                    format!("expected 1..=64 intermediate groups, found {n}"),
                ))
            }
        };
        let non_minimal = |mode| {
            LoadBalancing::NonMinimal(NonMinimal {
                mode,
                candidates,
                threshold_bytes: self.ugal_threshold.map(|t| t.0).unwrap_or(2 * packet_bytes),
                per_flowlet: self.adaptive == Some(Granularity::Flowlet),
                gap_ps: gap,
            })
        };
        use LoadBalancingName as L;
        let load_balancing = match lb {
            L::Ecmp | L::Min => LoadBalancing::Ecmp,
            L::Valiant => non_minimal(NonMinimalMode::Valiant),
            L::UgalL => non_minimal(NonMinimalMode::UgalL),
            L::UgalG => non_minimal(NonMinimalMode::UgalG),
            L::Par => non_minimal(NonMinimalMode::Par),
            L::Spray => LoadBalancing::Spray(match self.spray {
                None | Some(SprayPick::Random) => Pick::Random,
                Some(SprayPick::RoundRobin) => Pick::RoundRobin,
                Some(SprayPick::LeastLoaded) => Pick::LeastLoaded,
            }),
            L::Flowlet => LoadBalancing::Flowlet {
                gap_ps: gap,
                pick: match self.flowlet_pick {
                    None | Some(FlowletPick::Random) => Pick::Random,
                    Some(FlowletPick::LeastLoaded) => Pick::LeastLoaded,
                },
            },
            L::Adaptive => LoadBalancing::Adaptive {
                per_packet: self.adaptive != Some(Granularity::Flowlet),
                gap_ps: gap,
                bias_bytes: self.adaptive_bias.map(|b| b.0).unwrap_or(4096),
            },
        };
        let hash_fields = match &self.hash_fields {
            None => hash_field::SRC | hash_field::DST | hash_field::SPORT | hash_field::DPORT,
            Some(list) => {
                let mask = list.iter().fold(0, |mask, f| {
                    mask | match f {
                        HashFieldName::Src => hash_field::SRC,
                        HashFieldName::Dst => hash_field::DST,
                        HashFieldName::Sport => hash_field::SPORT,
                        HashFieldName::Dport => hash_field::DPORT,
                        HashFieldName::FlowLabel => hash_field::FLOW_LABEL,
                    }
                });
                if mask == 0 {
                    return Err(ScenarioError::at(
                        "routing.hash_fields",
                        "expected at least one field",
                    ));
                }
                mask
            }
        };
        let flowlet_table = match self.flowlet_table {
            None => 4096,
            Some(n) if (1..=1 << 24).contains(&n) => n as u32,
            Some(n) => {
                return Err(ScenarioError::at(
                    "routing.flowlet_table",
                    format!("expected 1..=16777216 entries, found {n}"),
                ))
            }
        };
        Ok(RoutingSpec {
            load_balancing,
            hash_fields,
            hash: match self.hash {
                None | Some(HashName::Mix) => HashFunction::Mix,
                Some(HashName::Crc32) => HashFunction::Crc32,
                Some(HashName::Xor) => HashFunction::Xor,
            },
            per_switch_seed: self.per_switch_seed.unwrap_or(true),
            flowlet_table,
            hop_classes: self.hop_classes.unwrap_or(dragonfly),
        })
    }
}

impl RoutingFile {
    /// The table with every default written out (see `scenario::normalise`): the values of the
    /// validated `spec`, and of the scheme's keys only those the scheme uses (`hop_classes` on
    /// dragonflies only). On a dragonfly, UGAL keys given for another scheme stay as written
    /// (validation allows them there).
    pub fn normalised(&self, spec: &RoutingSpec, dragonfly: bool) -> RoutingFile {
        let lb = self.load_balancing;
        let uses = |key: &str| Self::uses(lb, key);
        let mut out = RoutingFile {
            load_balancing: lb,
            hash_fields: Some(
                [
                    (hash_field::SRC, HashFieldName::Src),
                    (hash_field::DST, HashFieldName::Dst),
                    (hash_field::SPORT, HashFieldName::Sport),
                    (hash_field::DPORT, HashFieldName::Dport),
                    (hash_field::FLOW_LABEL, HashFieldName::FlowLabel),
                ]
                .into_iter()
                .filter(|(bit, _)| spec.hash_fields & bit != 0)
                .map(|(_, name)| name)
                .collect(),
            ),
            hash: Some(match spec.hash {
                HashFunction::Mix => HashName::Mix,
                HashFunction::Crc32 => HashName::Crc32,
                HashFunction::Xor => HashName::Xor,
            }),
            per_switch_seed: Some(spec.per_switch_seed),
            flowlet_table: uses("flowlet_table").then_some(spec.flowlet_table as i64),
            hop_classes: dragonfly.then_some(spec.hop_classes),
            ugal_candidates: self.ugal_candidates,
            ugal_threshold: self.ugal_threshold,
            ..RoutingFile::default()
        };
        match spec.load_balancing {
            LoadBalancing::Ecmp => {}
            LoadBalancing::Spray(pick) => {
                out.spray = Some(match pick {
                    Pick::Random => SprayPick::Random,
                    Pick::RoundRobin => SprayPick::RoundRobin,
                    Pick::LeastLoaded => SprayPick::LeastLoaded,
                })
            }
            LoadBalancing::Flowlet { gap_ps, pick } => {
                out.flowlet_gap = Some(Duration(gap_ps));
                out.flowlet_pick = Some(match pick {
                    Pick::LeastLoaded => FlowletPick::LeastLoaded,
                    Pick::Random | Pick::RoundRobin => FlowletPick::Random,
                });
            }
            LoadBalancing::Adaptive {
                per_packet,
                gap_ps,
                bias_bytes,
            } => {
                out.flowlet_gap = Some(Duration(gap_ps));
                out.adaptive = Some(if per_packet {
                    Granularity::Packet
                } else {
                    Granularity::Flowlet
                });
                out.adaptive_bias = Some(Size(bias_bytes));
            }
            LoadBalancing::NonMinimal(n) => {
                out.flowlet_gap = Some(Duration(n.gap_ps));
                out.adaptive = Some(if n.per_flowlet {
                    Granularity::Flowlet
                } else {
                    Granularity::Packet
                });
                if uses("ugal_candidates") {
                    out.ugal_candidates = Some(n.candidates as i64);
                    out.ugal_threshold = Some(Size(n.threshold_bytes));
                }
            }
        }
        out
    }
}

/// Keys of `[routing]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    ("routing.spray", "not spraying"),
    ("routing.flowlet_gap", "a scheme without flowlets"),
    ("routing.flowlet_pick", "load_balancing is not \"flowlet\""),
    ("routing.flowlet_table", "a scheme without flowlets"),
    (
        "routing.adaptive",
        "neither adaptive nor non-minimal dragonfly routing",
    ),
    (
        "routing.adaptive_bias",
        "load_balancing is not \"adaptive\"",
    ),
    ("routing.ugal_candidates", "not UGAL or PAR"),
    ("routing.ugal_threshold", "not UGAL or PAR"),
    (
        "routing.hop_classes",
        "not a dragonfly (Clos routes cannot deadlock)",
    ),
];

impl Default for RoutingFile {
    fn default() -> Self {
        Self {
            load_balancing: Self::default_lb(),
            hash_fields: None,
            hash: None,
            per_switch_seed: None,
            spray: None,
            flowlet_gap: None,
            flowlet_pick: None,
            flowlet_table: None,
            adaptive: None,
            adaptive_bias: None,
            ugal_candidates: None,
            ugal_threshold: None,
            hop_classes: None,
        }
    }
}

/// With hop classes on and PFC on, the classes lossless packets climb into are lossless (and ECN
/// marked) too; they must stay below 8 and clear of the control priority.
pub fn hop_classes(routing: &RoutingSpec, t: &TransportSpec, sw: &mut SwitchSpec) -> Res<()> {
    if !routing.hop_classes {
        return Ok(());
    }
    let Some(pfc) = &mut sw.pfc else {
        return Ok(());
    };
    let rise = routing.max_class_rise();
    let mut extra = 0u8;
    for c in 0..8u8 {
        if pfc.priorities & (1 << c) == 0 {
            continue;
        }
        for k in 1..=rise {
            let up = c + k;
            if up > 7 || up == t.control_priority {
                return Err(ScenarioError::at(
                    "routing.hop_classes",
                    format!(
                        "lossless priority {c} climbs {rise} classes on this route (one per \
                         global hop{}), into {}; lower transport.priority or the lossless \
                         priorities, or set hop_classes = false",
                        if rise == 3 {
                            ", one per PAR diversion"
                        } else {
                            ""
                        },
                        if up > 7 {
                            "priority 8, which does not exist".to_string()
                        } else {
                            format!("the control priority {up}")
                        }
                    ),
                ));
            }
            extra |= 1 << up;
        }
    }
    let marked = sw.ecn.as_ref().map(|e| e.priorities & pfc.priorities != 0);
    pfc.priorities |= extra;
    if let (Some(ecn), Some(true)) = (&mut sw.ecn, marked) {
        ecn.priorities |= extra;
    }
    Ok(())
}
