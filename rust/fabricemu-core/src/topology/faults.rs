//! `[[fault]]` and `[[failure_process]]`: links, components (switches, NICs, GPUs, servers) or
//! whole tiers go down, flap, slow down, lose packets or gain latency for a while, at given times
//! or drawn from MTBF / MTTR. The entries are checked without the fabric (validation); their
//! targets are resolved against it and every random time drawn from a named stream (build): role
//! names, index ranges and adjacency, each error naming its key (`fault.N.link`,
//! `fault.N.target`, `failure_process.N.components`).

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::{Fabric, IdVec, LinkId, NodeId, Role, Tier};
use crate::config::check::Res;
use crate::config::values::{Duration, LinkRate, MAX_TIME_PS};
use crate::config::{
    FailureProcessSpec, FaultDirection, FaultKind, FaultSpec, FaultTarget, FlapSpec, Holding,
    NodeName, ProcessComponents, ScenarioError,
};
use crate::rng::RngStream;
use crate::units::Time;

/// A node named in a scenario: its id, or `"role:index"` (`"spine:0"`, `"core:3"`, `"host:12"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NodeRef {
    Id(i64),
    Name(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKindName {
    Down,
    Degrade,
    Loss,
    Delay,
    Flap,
}

/// `rate`: a link rate (`degrade`, like `"25Gbps"`) or a per-packet probability (`loss`, like
/// `1e-4`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FaultRate {
    Link(LinkRate),
    Probability(f64),
}

impl Serialize for FaultRate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FaultRate::Link(r) => r.serialize(s),
            FaultRate::Probability(p) => s.serialize_f64(*p),
        }
    }
}

impl<'de> Deserialize<'de> for FaultRate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = FaultRate;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a rate like \"25Gbps\" (degrade) or a probability like 1e-4 (loss)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<FaultRate, E> {
                LinkRate::deserialize(de::value::StrDeserializer::<E>::new(v)).map(FaultRate::Link)
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<FaultRate, E> {
                Ok(FaultRate::Probability(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<FaultRate, E> {
                Ok(FaultRate::Probability(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<FaultRate, E> {
                Ok(FaultRate::Probability(v as f64))
            }
        }
        d.deserialize_any(V)
    }
}

/// A duration that may be random: `"100us"` (fixed; for `mtbf` / `mttr` the mean of an
/// exponential), or a table `{ distribution = "exponential", mean = "1ms" }`,
/// `{ distribution = "uniform", min = "10us", max = "50us" }`, `{ distribution = "fixed", value =
/// "20us" }`.
#[derive(Debug, Clone, PartialEq)]
pub enum HoldingFile {
    Plain(Duration),
    Table(HoldingTable),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DistributionName {
    Fixed,
    Exponential,
    Uniform,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HoldingTable {
    pub distribution: DistributionName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<Duration>,
}

impl Serialize for HoldingFile {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            HoldingFile::Plain(d) => d.serialize(s),
            HoldingFile::Table(t) => t.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for HoldingFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HoldingFile;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a duration like \"100us\" or a table like { distribution = \"exponential\", mean = \"1ms\" }",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<HoldingFile, E> {
                Duration::deserialize(de::value::StrDeserializer::<E>::new(v))
                    .map(HoldingFile::Plain)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<HoldingFile, A::Error> {
                HoldingTable::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(HoldingFile::Table)
            }
        }
        d.deserialize_any(V)
    }
}

impl HoldingFile {
    /// The distribution; a plain duration is fixed, or with `plain_is_mean` the mean of an
    /// exponential.
    pub fn validate(&self, path: &str, plain_is_mean: bool) -> Res<Holding> {
        let need = |v: Option<Duration>, key: &str| {
            v.map(|d| d.0).ok_or_else(|| {
                ScenarioError::at(
                    format!("{path}.{key}"),
                    "missing: a duration like \"100us\"",
                )
            })
        };
        let h = match self {
            HoldingFile::Plain(d) if plain_is_mean => Holding::Exponential { mean_ps: d.0 },
            HoldingFile::Plain(d) => Holding::Fixed(d.0),
            HoldingFile::Table(t) => {
                let keys: &[(&str, bool)] = &[
                    ("mean", t.mean.is_some()),
                    ("value", t.value.is_some()),
                    ("min", t.min.is_some()),
                    ("max", t.max.is_some()),
                ];
                let allowed: &[&str] = match t.distribution {
                    DistributionName::Fixed => &["value"],
                    DistributionName::Exponential => &["mean"],
                    DistributionName::Uniform => &["min", "max"],
                };
                if let Some((k, _)) = keys.iter().find(|(k, set)| *set && !allowed.contains(k)) {
                    return Err(ScenarioError::at(
                        format!("{path}.{k}"),
                        format!(
                            "not a key of distribution {:?}: it takes {}",
                            t.distribution,
                            allowed.join(" and ")
                        ),
                    ));
                }
                match t.distribution {
                    DistributionName::Fixed => Holding::Fixed(need(t.value, "value")?),
                    DistributionName::Exponential => Holding::Exponential {
                        mean_ps: need(t.mean, "mean")?,
                    },
                    DistributionName::Uniform => {
                        let (min_ps, max_ps) = (need(t.min, "min")?, need(t.max, "max")?);
                        if max_ps < min_ps {
                            return Err(ScenarioError::at(
                                format!("{path}.max"),
                                "must be at least `min`",
                            ));
                        }
                        Holding::Uniform { min_ps, max_ps }
                    }
                }
            }
        };
        if h.mean_ps() <= 0.0 {
            return Err(ScenarioError::at(path.to_string(), "must be longer than 0"));
        }
        Ok(h)
    }
}

/// One `[[fault]]`: what it covers (`link`, `target` or `tier`), what it does (`kind`), when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultFile {
    /// The two ends of the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Vec<NodeRef>>,
    /// A component: every link of a node (`"spine:3"`, `"nic:2"`, `"gpu:17"`, `"host:5"`) or of
    /// a GPU server (`"server:5"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<NodeRef>,
    /// Every link of a tier: "host", "fabric", "core", "global", "scaleup", "pcie".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// With `link`: `"both"` (default), `"a->b"` (from the first end named to the second only)
    /// or `"b->a"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// `down` (default), `degrade`, `loss`, `delay` or `flap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FaultKindName>,
    /// When the fault starts (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Duration>,
    /// `degrade`: the link's rate meanwhile; `loss`: the probability a packet is lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<FaultRate>,
    /// `loss`: bit error rate (each wire bit of a packet corrupted independently).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ber: Option<f64>,
    /// `delay`: latency added to the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<Duration>,
    /// `flap`: how long each down period lasts (a duration or a distribution table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub down: Option<HoldingFile>,
    /// `flap`: how long the link stays up between down periods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up: Option<HoldingFile>,
    /// `flap`: at most this many down periods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// How long switches keep using a failed (or restored) link before routing notices (default
    /// 10us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection: Option<Duration>,
}

/// The most latency one `delay` fault may add (1 s): delays add up on a link.
pub const MAX_ADDED_DELAY_PS: Time = 1_000_000_000_000;

/// Default detection delay of a failed or restored link.
pub const DEFAULT_DETECTION_PS: Time = 10_000_000;

/// The tier names a `tier` key takes.
pub const TIER_NAMES: [&str; 7] = ["host", "fabric", "core", "global", "scaleup", "pcie", "ocs"];

fn check_tier(path: String, tier: &str) -> Res<String> {
    if TIER_NAMES.contains(&tier) {
        Ok(tier.to_string())
    } else {
        Err(ScenarioError::at(
            path,
            format!(
                "unknown tier {tier:?}: expected one of {}",
                TIER_NAMES.join(", ")
            ),
        ))
    }
}

pub(crate) fn node_name(path: String, n: &NodeRef) -> Res<NodeName> {
    match n {
        NodeRef::Id(id) if (0..=u32::MAX as i64).contains(id) => Ok(NodeName::Id(*id as u32)),
        NodeRef::Id(id) => Err(ScenarioError::at(
            path,
            format!("expected a node id, found {id}"),
        )),
        NodeRef::Name(s) => {
            let parsed = s
                .split_once(':')
                .and_then(|(role, idx)| Some((role, idx.trim().parse::<u32>().ok()?)));
            match parsed {
                Some((role, index)) if !role.trim().is_empty() => Ok(NodeName::Role {
                    role: role.trim().to_string(),
                    index,
                }),
                _ => Err(ScenarioError::at(
                    path,
                    format!("expected a node id or \"role:index\" like \"spine:0\", found {s:?}"),
                )),
            }
        }
    }
}

impl FaultFile {
    /// Entry `i` without the fabric: its target parsed, its kind and times checked.
    pub fn validate(&self, i: usize) -> Res<FaultSpec> {
        let p = |key: &str| format!("fault.{i}.{key}");
        let given = [
            ("link", self.link.is_some()),
            ("target", self.target.is_some()),
            ("tier", self.tier.is_some()),
        ];
        let named: Vec<&str> = given.iter().filter(|g| g.1).map(|g| g.0).collect();
        if named.len() > 1 {
            return Err(ScenarioError::at(
                p(named[1]),
                format!(
                    "a fault covers one link, one target or one tier: `{}` is given too",
                    named[0]
                ),
            ));
        }
        if self.direction.is_some() && self.link.is_none() {
            return Err(ScenarioError::at(
                p("direction"),
                "a direction needs `link` (the two ends it goes between)",
            ));
        }
        let target = if let Some(link) = &self.link {
            if link.len() != 2 {
                return Err(ScenarioError::at(
                    p("link"),
                    format!(
                        "expected the two ends of a link, found {} nodes",
                        link.len()
                    ),
                ));
            }
            let direction = match self.direction.as_deref() {
                None | Some("both") => FaultDirection::Both,
                Some("a->b") => FaultDirection::Forward,
                Some("b->a") => FaultDirection::Backward,
                Some(d) => {
                    return Err(ScenarioError::at(
                        p("direction"),
                        format!("expected \"both\", \"a->b\" or \"b->a\", found {d:?}"),
                    ))
                }
            };
            FaultTarget::Link {
                ends: [
                    node_name(format!("fault.{i}.link.0"), &link[0])?,
                    node_name(format!("fault.{i}.link.1"), &link[1])?,
                ],
                direction,
            }
        } else if let Some(t) = &self.target {
            FaultTarget::Component(node_name(p("target"), t)?)
        } else if let Some(t) = &self.tier {
            FaultTarget::Tier(check_tier(p("tier"), t)?)
        } else {
            return Err(ScenarioError::at(
                p("link"),
                "missing: a fault needs `link` (its two ends), `target` (a component like \"spine:3\") or `tier`",
            ));
        };
        let kind_name = self.kind.unwrap_or(FaultKindName::Down);
        // Keys that belong to other kinds.
        let keys: [(&str, bool, &[FaultKindName]); 6] = [
            (
                "rate",
                self.rate.is_some(),
                &[FaultKindName::Degrade, FaultKindName::Loss],
            ),
            ("ber", self.ber.is_some(), &[FaultKindName::Loss]),
            ("delay", self.delay.is_some(), &[FaultKindName::Delay]),
            ("down", self.down.is_some(), &[FaultKindName::Flap]),
            ("up", self.up.is_some(), &[FaultKindName::Flap]),
            ("count", self.count.is_some(), &[FaultKindName::Flap]),
        ];
        for (key, set, kinds) in keys {
            if set && !kinds.contains(&kind_name) {
                let names: Vec<String> = kinds
                    .iter()
                    .map(|k| format!("\"{}\"", kind_str(*k)))
                    .collect();
                return Err(ScenarioError::at(
                    p(key),
                    format!("`{key}` needs kind = {}", names.join(" or ")),
                ));
            }
        }
        let mut flap = None;
        let kind = match kind_name {
            FaultKindName::Down => FaultKind::Down,
            FaultKindName::Degrade => match self.rate {
                Some(FaultRate::Link(r)) if r.0 > 0 => FaultKind::Degrade { rate_bps: r.0 },
                Some(_) => {
                    return Err(ScenarioError::at(
                        p("rate"),
                        "expected the degraded link's rate, like \"50Gbps\"",
                    ))
                }
                None => {
                    return Err(ScenarioError::at(
                        p("rate"),
                        "missing: the degraded link's rate, like \"50Gbps\"",
                    ))
                }
            },
            FaultKindName::Loss => {
                let probability = match self.rate {
                    Some(FaultRate::Probability(x)) if (0.0..1.0).contains(&x) => x,
                    Some(FaultRate::Probability(x)) => {
                        return Err(ScenarioError::at(
                            p("rate"),
                            format!("expected a probability in [0, 1), found {x}"),
                        ))
                    }
                    Some(FaultRate::Link(_)) => {
                        return Err(ScenarioError::at(
                            p("rate"),
                            "expected the probability a packet is lost, like 1e-4",
                        ))
                    }
                    None => 0.0,
                };
                let ber = match self.ber {
                    Some(b) if (0.0..1.0).contains(&b) => b,
                    Some(b) => {
                        return Err(ScenarioError::at(
                            p("ber"),
                            format!("expected a bit error rate in [0, 1), found {b}"),
                        ))
                    }
                    None => 0.0,
                };
                if self.rate.is_none() && self.ber.is_none() {
                    return Err(ScenarioError::at(
                        p("rate"),
                        "missing: a loss fault needs `rate` (per packet, like 1e-4) or `ber` (per bit, like 1e-12)",
                    ));
                }
                FaultKind::Loss { probability, ber }
            }
            FaultKindName::Delay => match self.delay {
                Some(d) if d.0 > MAX_ADDED_DELAY_PS => {
                    return Err(ScenarioError::at(
                        p("delay"),
                        "expected at most 1s of added latency",
                    ))
                }
                Some(d) if d.0 > 0 => FaultKind::Delay { added_ps: d.0 },
                Some(_) => return Err(ScenarioError::at(p("delay"), "must be longer than 0")),
                None => {
                    return Err(ScenarioError::at(
                        p("delay"),
                        "missing: the latency added to the link, like \"5us\"",
                    ))
                }
            },
            FaultKindName::Flap => {
                let down = self
                    .down
                    .as_ref()
                    .ok_or_else(|| {
                        ScenarioError::at(
                            p("down"),
                            "missing: how long each down period lasts, like \"50us\"",
                        )
                    })?
                    .validate(&p("down"), false)?;
                let up = self
                    .up
                    .as_ref()
                    .ok_or_else(|| {
                        ScenarioError::at(
                            p("up"),
                            "missing: how long the link stays up between down periods, like \"200us\"",
                        )
                    })?
                    .validate(&p("up"), false)?;
                if self.until.is_none() && self.count.is_none() {
                    return Err(ScenarioError::at(
                        p("until"),
                        "missing: a flapping link needs `until` (a time) or `count` (down periods)",
                    ));
                }
                if self.count == Some(0) {
                    return Err(ScenarioError::at(p("count"), "must be at least 1"));
                }
                flap = Some(FlapSpec {
                    down,
                    up,
                    count: self.count,
                });
                FaultKind::Down
            }
        };
        let at_ps = self.at.map(|d| d.0).unwrap_or(0);
        if let Some(u) = self.until {
            if u.0 <= at_ps {
                return Err(ScenarioError::at(p("until"), "must be after `at`"));
            }
        }
        Ok(FaultSpec {
            target,
            kind,
            at_ps,
            until_ps: self.until.map(|d| d.0),
            detection_ps: self.detection.map(|d| d.0).unwrap_or(DEFAULT_DETECTION_PS),
            flap,
        })
    }
}

fn kind_str(k: FaultKindName) -> &'static str {
    match k {
        FaultKindName::Down => "down",
        FaultKindName::Degrade => "degrade",
        FaultKindName::Loss => "loss",
        FaultKindName::Delay => "delay",
        FaultKindName::Flap => "flap",
    }
}

/// One `[[failure_process]]`: the components of a class fail and are repaired at random.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureProcessFile {
    /// `"links"` (cables; `tier` picks one tier), `"servers"` (GPU servers of a `[cluster]`), or
    /// a node role: `"spine"`, `"leaf"`, `"nic"`, `"gpu"`, `"host"`, ...
    pub components: String,
    /// With `components = "links"`: only this tier's links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Mean time between failures of one component (a duration: the mean of an exponential), or
    /// a distribution table.
    pub mtbf: HoldingFile,
    /// Mean time to repair (likewise).
    pub mttr: HoldingFile,
    /// Failures happen from `start` (default 0) until `until` (default: the stop time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Duration>,
    /// Routing's detection delay (default 10us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection: Option<Duration>,
}

impl FailureProcessFile {
    /// Entry `i` without the fabric; `stop`: the scenario's stop time, if it stops at a time.
    pub fn validate(&self, i: usize, stop: Option<Time>) -> Res<FailureProcessSpec> {
        let p = |key: &str| format!("failure_process.{i}.{key}");
        let components = match self.components.trim() {
            "" => {
                return Err(ScenarioError::at(
                    p("components"),
                    "expected \"links\", \"servers\" or a node role like \"spine\"",
                ))
            }
            "links" => ProcessComponents::Links {
                tier: match &self.tier {
                    Some(t) => Some(check_tier(p("tier"), t)?),
                    None => None,
                },
            },
            other => {
                if self.tier.is_some() {
                    return Err(ScenarioError::at(
                        p("tier"),
                        "a tier needs components = \"links\"",
                    ));
                }
                if other == "servers" || other == "server" {
                    ProcessComponents::Servers
                } else {
                    ProcessComponents::Role(other.to_string())
                }
            }
        };
        let mtbf = self.mtbf.validate(&p("mtbf"), true)?;
        let mttr = self.mttr.validate(&p("mttr"), true)?;
        let start_ps = self.start.map(|d| d.0).unwrap_or(0);
        let until_ps = match (self.until, stop) {
            (Some(u), _) => u.0,
            (None, Some(s)) => s,
            (None, None) => {
                return Err(ScenarioError::at(
                    p("until"),
                    "missing: the run stops when its flows are done, so say until when failures happen (or set a stop time)",
                ))
            }
        };
        if until_ps <= start_ps {
            return Err(ScenarioError::at(p("until"), "must be after `start`"));
        }
        Ok(FailureProcessSpec {
            components,
            mtbf,
            mttr,
            start_ps,
            until_ps,
            detection_ps: self.detection.map(|d| d.0).unwrap_or(DEFAULT_DETECTION_PS),
        })
    }
}

impl FaultFile {
    /// This entry with every default written out (see `scenario::normalise`), from its validated
    /// `spec`: the kind, start, detection delay, a link's direction, a loss fault's two rates.
    /// The target, the flap's distributions and the other kinds' keys stay as written.
    pub fn normalised(&self, spec: &FaultSpec) -> FaultFile {
        let mut out = self.clone();
        out.kind = Some(self.kind.unwrap_or(FaultKindName::Down));
        out.at = Some(Duration(spec.at_ps));
        out.until = spec.until_ps.map(Duration);
        out.detection = Some(Duration(spec.detection_ps));
        if self.link.is_some() {
            out.direction = Some(self.direction.clone().unwrap_or_else(|| "both".into()));
        }
        if let FaultKind::Loss { probability, ber } = spec.kind {
            out.rate = Some(FaultRate::Probability(probability));
            out.ber = Some(ber);
        }
        out
    }
}

impl FailureProcessFile {
    /// This entry with every default written out: start, until (the stop time by default) and the
    /// detection delay from its validated `spec`.
    pub fn normalised(&self, spec: &FailureProcessSpec) -> FailureProcessFile {
        FailureProcessFile {
            start: Some(Duration(spec.start_ps)),
            until: Some(Duration(spec.until_ps)),
            detection: Some(Duration(spec.detection_ps)),
            ..self.clone()
        }
    }
}

/// Keys of `[[fault]]` and `[[failure_process]]` whose absence from a normalised scenario is
/// itself the setting (or that belong to another kind of fault).
pub const ABSENT_MEANS: &[(&str, &str)] = &[
    ("fault.*.link", "the fault names a `target` or a `tier`"),
    ("fault.*.target", "the fault names a `link` or a `tier`"),
    ("fault.*.tier", "the fault names a `link` or a `target`"),
    (
        "fault.*.direction",
        "no `link`: every direction of what it covers",
    ),
    (
        "fault.*.until",
        "the fault lasts until the run stops (a flap: `count` periods)",
    ),
    ("fault.*.rate", "kind is not \"degrade\" or \"loss\""),
    ("fault.*.ber", "kind is not \"loss\""),
    ("fault.*.delay", "kind is not \"delay\""),
    ("fault.*.down", "kind is not \"flap\""),
    ("fault.*.up", "kind is not \"flap\""),
    ("fault.*.count", "not a flap, or a flap until `until`"),
    (
        "failure_process.*.tier",
        "every tier's links (or components other than links)",
    ),
];

/// Where a resolved fault comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultSource {
    /// `[[fault]]` entry `i`.
    Fault(u32),
    /// `[[failure_process]]` entry `i`.
    Process(u32),
    /// A live controller's action `i` (row of actions.arrow) applied it.
    Control(u32),
}

impl FaultSource {
    pub fn name(self) -> &'static str {
        match self {
            FaultSource::Fault(_) => "fault",
            FaultSource::Process(_) => "failure_process",
            FaultSource::Control(_) => "control",
        }
    }

    pub fn index(self) -> u32 {
        match self {
            FaultSource::Fault(i) | FaultSource::Process(i) | FaultSource::Control(i) => i,
        }
    }
}

/// A fault resolved against the fabric: one period of one effect on a set of directed links.
/// A flapping link becomes one of these per down period, a failure process one per failure.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkFault {
    pub source: FaultSource,
    /// `"flap"` for a flap's down periods, else the kind's name.
    pub kind_name: &'static str,
    pub kind: FaultKind,
    /// What failed, as faults.arrow names it: `"leaf:0--spine:1"` (a cable), `"leaf:0->spine:1"`
    /// (one direction), `"spine:3"`, `"server:5"`, `"tier:fabric"`.
    pub target: Arc<str>,
    /// The directed links it covers (named by their egress ports), sorted; shared by the periods
    /// of one flap or one component.
    pub links: Arc<[LinkId]>,
    pub at_ps: Time,
    pub until_ps: Option<Time>,
    pub detection_ps: Time,
}

/// The distinct roles of the fabric's nodes, in node order.
fn roles(fabric: &Fabric) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for r in &fabric.role {
        if !out.contains(&r.as_str()) {
            out.push(r.as_str());
        }
    }
    out
}

pub(crate) fn node_id(fabric: &Fabric, path: String, name: &NodeName) -> Res<NodeId> {
    match name {
        NodeName::Id(id) if *id < fabric.num_nodes => Ok(NodeId::new(*id)),
        NodeName::Id(id) => Err(ScenarioError::at(
            path,
            format!(
                "node {id} does not exist: the fabric has nodes 0..={}",
                fabric.num_nodes - 1
            ),
        )),
        NodeName::Role { role, index } => {
            let mut of_role = fabric
                .role
                .iter_enumerated()
                .filter(|(_, r)| r.as_str() == role.as_str())
                .map(|(n, _)| n);
            if let Some(n) = of_role.clone().nth(*index as usize) {
                return Ok(n);
            }
            let count = of_role.by_ref().count();
            Err(ScenarioError::at(
                path,
                if count == 0 {
                    format!(
                        "no node has role {role:?}; this fabric's roles are {}",
                        roles(fabric).join(", ")
                    )
                } else {
                    format!(
                        "{role}:{index} does not exist: there are {count} ({role}:0..={})",
                        count - 1
                    )
                },
            ))
        }
    }
}

fn shown(fabric: &Fabric, name: &NodeName, id: NodeId) -> String {
    match name {
        NodeName::Id(_) => format!("node {id} ({})", fabric.role[id]),
        NodeName::Role { role, index } => format!("{role}:{index} (node {id})"),
    }
}

/// The most fault periods a scenario may expand into, all entries together (a flap of nanosecond
/// periods over seconds, or a failure process of tiny MTBF over many components, would otherwise
/// take the memory).
pub const MAX_FAULT_PERIODS: usize = 1_000_000;

/// Each node's name as faults.arrow writes it: `"role:index"` (index among its role's nodes).
pub(crate) fn labels(fabric: &Fabric) -> IdVec<NodeId, String> {
    let mut seen: Vec<(Role, u32)> = Vec::new();
    fabric
        .role
        .iter()
        .map(|&r| {
            let i = match seen.iter_mut().find(|(x, _)| *x == r) {
                Some((_, n)) => {
                    *n += 1;
                    *n - 1
                }
                None => {
                    seen.push((r, 1));
                    0
                }
            };
            format!("{}:{i}", r.as_str())
        })
        .collect()
}

fn tier_of(name: &str) -> Tier {
    [
        Tier::Host,
        Tier::Fabric,
        Tier::Core,
        Tier::Global,
        Tier::ScaleUp,
        Tier::Pcie,
        Tier::Ocs,
    ]
    .into_iter()
    .find(|&t| super::summary::tier_name(t) == name)
    .expect("tier names are checked in validation")
}

/// Every link of `nodes` (both directions), sorted and without repeats.
fn links_of_nodes(fabric: &Fabric, nodes: impl IntoIterator<Item = NodeId>) -> Vec<LinkId> {
    let mut out: Vec<LinkId> = Vec::new();
    for n in nodes {
        for p in fabric.ports_of(n) {
            out.push(LinkId::of_egress(p));
            out.push(LinkId::of_egress(fabric.peer_port[p]));
        }
    }
    out.sort_unstable_by_key(|l| l.egress());
    out.dedup();
    out
}

/// The nodes of GPU server `server`: its GPUs, its shared NICs, and its scale-up switch when its
/// domain lies within the server.
fn server_nodes(c: &super::ClusterLayout, server: u32) -> Vec<NodeId> {
    let gpus = c.server_gpus(server);
    let mut nodes: Vec<NodeId> = gpus.collect();
    if c.first_nic.is_some() {
        for rail in 0..c.spec.nics_per_server {
            nodes.extend(c.nic_node(server, rail));
        }
    }
    if let Some(d) = c.domain(c.server_gpus(server).next().expect("a server has GPUs")) {
        let dg = c.domain_gpus(d);
        let within = dg.clone().all(|g| c.server(g) == server);
        if within {
            nodes.extend(c.domain_switch(d));
        }
    }
    nodes
}

fn server_index(fabric: &Fabric, path: String, index: u32) -> Res<&super::ClusterLayout> {
    let Some(c) = fabric.cluster.as_deref() else {
        return Err(ScenarioError::at(
            path,
            format!(
                "server:{index}: servers exist only on a [cluster]; this fabric's roles are {}",
                roles(fabric).join(", ")
            ),
        ));
    };
    if index >= c.servers {
        return Err(ScenarioError::at(
            path,
            format!(
                "server:{index} does not exist: the cluster has servers 0-{}",
                c.servers - 1
            ),
        ));
    }
    Ok(c)
}

/// The periods of a flap from `at`: down, up, down, ... until `until` or `count` down periods.
fn flap_periods(
    path: String,
    flap: &FlapSpec,
    at: Time,
    until: Option<Time>,
    before: usize,
    rng: &mut crate::rng::Rng,
) -> Res<Vec<(Time, Time)>> {
    let mut out = Vec::new();
    let mut t = at;
    loop {
        // A period past the time range never happens (and times stay far from overflowing).
        if until.is_some_and(|u| t >= u)
            || flap.count.is_some_and(|c| out.len() >= c as usize)
            || t >= MAX_TIME_PS
        {
            break;
        }
        if before + out.len() >= MAX_FAULT_PERIODS {
            return Err(ScenarioError::at(
                path,
                format!(
                    "this flap has more than {MAX_FAULT_PERIODS} down periods: lengthen `down` / `up` or bring `until` closer"
                ),
            ));
        }
        let mut end = t.saturating_add(flap.down.draw(rng)).min(MAX_TIME_PS);
        if let Some(u) = until {
            end = end.min(u);
        }
        out.push((t, end));
        t = end.saturating_add(flap.up.draw(rng));
    }
    Ok(out)
}

/// Resolve `[[fault]]` and `[[failure_process]]` entries against the fabric: names to links,
/// flaps to their down periods, processes to their failures (each drawn from its own stream under
/// `seed`). Faults come in entry order (a flap's periods in time order), then each process's
/// failures by component, then time.
pub fn resolve(
    fabric: &Fabric,
    specs: &[FaultSpec],
    processes: &[FailureProcessSpec],
    seed: u64,
) -> Res<Vec<LinkFault>> {
    let mut out = Vec::with_capacity(specs.len());
    let label = if specs.is_empty() && processes.is_empty() {
        IdVec::new()
    } else {
        labels(fabric)
    };
    for (i, f) in specs.iter().enumerate() {
        let (links, target) = match &f.target {
            FaultTarget::Link { ends, direction } => {
                let a = node_id(fabric, format!("fault.{i}.link.0"), &ends[0])?;
                let b = node_id(fabric, format!("fault.{i}.link.1"), &ends[1])?;
                let port = fabric.ports_of(a).find(|&p| fabric.peer_node[p] == b);
                let Some(p) = port else {
                    return Err(ScenarioError::at(
                        format!("fault.{i}.link"),
                        format!(
                            "{} and {} are not linked: a fault names the two ends of one link",
                            shown(fabric, &ends[0], a),
                            shown(fabric, &ends[1], b)
                        ),
                    ));
                };
                let (fwd, back) = (LinkId::of_egress(p), LinkId::of_egress(fabric.peer_port[p]));
                let (la, lb) = (&label[a], &label[b]);
                match direction {
                    FaultDirection::Both => (vec![fwd, back], format!("{la}--{lb}")),
                    FaultDirection::Forward => (vec![fwd], format!("{la}->{lb}")),
                    FaultDirection::Backward => (vec![back], format!("{lb}->{la}")),
                }
            }
            FaultTarget::Component(NodeName::Role { role, index }) if role == "server" => {
                let path = format!("fault.{i}.target");
                let c = server_index(fabric, path, *index)?;
                (
                    links_of_nodes(fabric, server_nodes(c, *index)),
                    format!("server:{index}"),
                )
            }
            FaultTarget::Component(name) => {
                let n = node_id(fabric, format!("fault.{i}.target"), name)?;
                (links_of_nodes(fabric, [n]), label[n].clone())
            }
            FaultTarget::Tier(t) => {
                let tier = tier_of(t);
                let links: Vec<LinkId> = fabric
                    .ports()
                    .filter(|&p| fabric.tier[p] == tier)
                    .map(LinkId::of_egress)
                    .collect();
                if links.is_empty() {
                    let mut present: Vec<&str> = Vec::new();
                    for p in fabric.ports() {
                        let n = super::summary::tier_name(fabric.tier[p]);
                        if !present.contains(&n) {
                            present.push(n);
                        }
                    }
                    return Err(ScenarioError::at(
                        format!("fault.{i}.tier"),
                        format!(
                            "this fabric has no {t} links; its tiers are {}",
                            present.join(", ")
                        ),
                    ));
                }
                (links, format!("tier:{t}"))
            }
        };
        let (links, target): (Arc<[LinkId]>, Arc<str>) = (links.into(), target.into());
        let one = |at_ps: Time, until_ps: Option<Time>, kind_name: &'static str| LinkFault {
            source: FaultSource::Fault(i as u32),
            kind_name,
            kind: f.kind,
            target: target.clone(),
            links: links.clone(),
            at_ps,
            until_ps,
            detection_ps: f.detection_ps,
        };
        match &f.flap {
            Some(flap) => {
                let mut rng = RngStream::Flap(i).rng(seed);
                let periods = flap_periods(
                    format!("fault.{i}"),
                    flap,
                    f.at_ps,
                    f.until_ps,
                    out.len(),
                    &mut rng,
                )?;
                for (a, b) in periods {
                    out.push(one(a, Some(b), "flap"));
                }
            }
            None => out.push(one(f.at_ps, f.until_ps, f.kind.name())),
        }
    }
    for (i, pr) in processes.iter().enumerate() {
        let path = format!("failure_process.{i}.components");
        let members: Vec<(String, Vec<LinkId>)> = match &pr.components {
            ProcessComponents::Links { tier } => {
                let tier = tier.as_deref().map(tier_of);
                let cables: Vec<(String, Vec<LinkId>)> = fabric
                    .ports()
                    .filter(|&p| {
                        p < fabric.peer_port[p] && tier.is_none_or(|t| fabric.tier[p] == t)
                    })
                    .map(|p| {
                        let (a, b) = (fabric.port_node[p], fabric.peer_node[p]);
                        (
                            format!("{}--{}", label[a], label[b]),
                            vec![LinkId::of_egress(p), LinkId::of_egress(fabric.peer_port[p])],
                        )
                    })
                    .collect();
                if cables.is_empty() {
                    return Err(ScenarioError::at(
                        format!("failure_process.{i}.tier"),
                        "this fabric has no links of this tier",
                    ));
                }
                cables
            }
            ProcessComponents::Servers => {
                let c = server_index(fabric, path, 0)?;
                (0..c.servers)
                    .map(|s| {
                        (
                            format!("server:{s}"),
                            links_of_nodes(fabric, server_nodes(c, s)),
                        )
                    })
                    .collect()
            }
            ProcessComponents::Role(role) => {
                let nodes: Vec<(String, Vec<LinkId>)> = fabric
                    .nodes()
                    .filter(|&n| fabric.role[n].as_str() == role.as_str())
                    .map(|n| (label[n].clone(), links_of_nodes(fabric, [n])))
                    .collect();
                if nodes.is_empty() {
                    return Err(ScenarioError::at(
                        path,
                        format!(
                            "no node has role {role:?}: expected \"links\", \"servers\" or one of this fabric's roles: {}",
                            roles(fabric).join(", ")
                        ),
                    ));
                }
                nodes
            }
        };
        for (c, (name, links)) in members.into_iter().enumerate() {
            let (name, links): (Arc<str>, Arc<[LinkId]>) = (name.into(), links.into());
            let mut rng = RngStream::FailureProcess(i, c as u32).rng(seed);
            let mut t = pr.start_ps;
            loop {
                t = t.saturating_add(pr.mtbf.draw(&mut rng));
                if t >= pr.until_ps {
                    break;
                }
                if out.len() >= MAX_FAULT_PERIODS {
                    return Err(ScenarioError::at(
                        format!("failure_process.{i}.mtbf"),
                        format!(
                            "this process draws more than {MAX_FAULT_PERIODS} failures: lengthen `mtbf` or shorten the window"
                        ),
                    ));
                }
                let repair = pr.mttr.draw(&mut rng);
                out.push(LinkFault {
                    source: FaultSource::Process(i as u32),
                    kind_name: "down",
                    kind: FaultKind::Down,
                    target: name.clone(),
                    links: links.clone(),
                    at_ps: t,
                    until_ps: Some(t.saturating_add(repair)),
                    detection_ps: pr.detection_ps,
                });
                t = t.saturating_add(repair);
            }
        }
    }
    Ok(out)
}
