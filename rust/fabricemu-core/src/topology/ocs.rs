//! `[ocs]`: an optical circuit switch (OCS) layer between electrical switches. Every switch of one
//! role (by default the aggregation switches of a fat tree, the leaves of a leaf-spine) has
//! `uplinks` ports into the OCS; OCS port `i * uplinks + u` is uplink `u` of the `i`-th such
//! switch (in node order). A *circuit* joins two OCS ports, making a bidirectional link between
//! their switches (rate and delay of `[ocs]`; the OCS itself has no buffer and adds only the
//! propagation delay). An OCS port in no circuit is dark: its switch port carries nothing.
//!
//! A configuration is a set of circuits: `"uniform"` (a mesh between the pods, see
//! [`uniform`]), `"none"`, or a list of pairs, each end a switch (`"agg:3"`, or a node id: the
//! circuit takes one of its free uplinks) or an OCS port (`"ocs:12"`). `[[ocs.reconfigure]]`
//! entries change the configuration at given times; each change takes `reconfiguration_time`,
//! during which the circuits that change carry nothing (see `engine::circuits`).
//!
//! Checked without the fabric (validation: counts, times, names parsed) and then against it
//! (build: names resolved, port counts, every configuration assigned to OCS ports), each error
//! naming its key (`ocs.circuits.3.1`, `ocs.reconfigure.0.circuits.2`).

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use super::faults::{node_id, node_name, NodeRef};
use super::{Fabric, IdVec, NodeId, PortId, Role};
use crate::config::check::{count, Res};
use crate::config::values::{Duration, LinkRate};
use crate::config::{LinkSpec, NodeName, ScenarioError, TopologySpec};
use crate::units::{format_time, Time};

/// Default time a reconfiguration takes (a fast OCS; MEMS mirrors take milliseconds).
pub const DEFAULT_RECONFIGURATION_PS: Time = 10_000_000;
/// At most this many `[[ocs.reconfigure]]` entries.
pub const MAX_RECONFIGURATIONS: usize = 100_000;
/// At most this many ports on the OCS.
pub const MAX_OCS_PORTS: i64 = 1 << 16;

/// A configuration as written: a pattern name or a list of circuits.
#[derive(Debug, Clone, PartialEq)]
pub enum CircuitsFile {
    Pattern(String),
    List(Vec<Vec<NodeRef>>),
}

impl Serialize for CircuitsFile {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CircuitsFile::Pattern(p) => s.serialize_str(p),
            CircuitsFile::List(l) => l.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for CircuitsFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = CircuitsFile;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "\"uniform\", \"none\" or a list of circuits like [[\"agg:0\", \"agg:2\"], [\"ocs:1\", \"ocs:6\"]]",
                )
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<CircuitsFile, E> {
                Ok(CircuitsFile::Pattern(v.to_string()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<CircuitsFile, A::Error> {
                Vec::<Vec<NodeRef>>::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(CircuitsFile::List)
            }
        }
        d.deserialize_any(V)
    }
}

/// One `[[ocs.reconfigure]]`: from `at`, the OCS moves to configuration `circuits`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconfigureFile {
    pub at: Option<Duration>,
    pub circuits: Option<CircuitsFile>,
    /// This change's duration (default: `ocs.reconfiguration_time`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconfiguration_time: Option<Duration>,
}

/// `[ocs]` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OcsFile {
    /// The role of the switches with uplinks into the OCS: "agg" (fat tree, default), "leaf"
    /// (leaf-spine, default), "edge", "spine", "router" (dragonfly, default), ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switches: Option<String>,
    /// Uplinks of each such switch into the OCS (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uplinks: Option<i64>,
    /// Ports of the OCS (default: every uplink's; at least that many).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<i64>,
    /// The OCS replaces the tier above `switches` (a fat tree without its cores, a leaf-spine
    /// without its spines); default false: it complements it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replace: Option<bool>,
    /// Rate and propagation delay of a circuit (default: the topology's fabric links).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate: Option<LinkRate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_delay: Option<Duration>,
    /// How long a change takes (default 10us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconfiguration_time: Option<Duration>,
    /// How long after a circuit goes dark (or comes up) routing follows (default 0: the OCS
    /// controller tells routing as it changes the circuits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection: Option<Duration>,
    /// The initial configuration (default "uniform").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub circuits: Option<CircuitsFile>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reconfigure: Vec<ReconfigureFile>,
}

/// One end of a circuit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CircuitEnd {
    /// A switch: one of its free uplinks.
    Switch(NodeName),
    /// This OCS port.
    Port(u32),
}

/// A configuration, validated (names still unresolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CircuitsSpec {
    /// Within each plane, one round of a round-robin tournament per uplink (see [`uniform`]).
    Uniform,
    /// Every OCS port dark.
    None,
    List(Vec<[CircuitEnd; 2]>),
}

/// One scheduled change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeSpec {
    pub at_ps: Time,
    pub reconfiguration_ps: Time,
    pub circuits: CircuitsSpec,
}

/// `[ocs]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcsSpec {
    pub role: String,
    pub uplinks: u32,
    pub ports: Option<u32>,
    pub replace: bool,
    pub link: LinkSpec,
    pub reconfiguration_ps: Time,
    pub detection_ps: Time,
    pub initial: CircuitsSpec,
    pub changes: Vec<ChangeSpec>,
}

/// Whether a switch role may carry uplinks into the OCS.
fn switch_role(role: &str) -> bool {
    matches!(role, "edge" | "agg" | "core" | "leaf" | "spine" | "router")
}

/// Parse a configuration (`path`: its key).
pub fn circuits_spec(path: &str, c: &CircuitsFile) -> Res<CircuitsSpec> {
    match c {
        CircuitsFile::Pattern(p) => match p.as_str() {
            "uniform" => Ok(CircuitsSpec::Uniform),
            "none" => Ok(CircuitsSpec::None),
            other => Err(ScenarioError::at(
                path,
                format!(
                    "unknown pattern {other:?}: expected \"uniform\", \"none\" or a list of circuits like [[\"agg:0\", \"agg:2\"]]"
                ),
            )),
        },
        CircuitsFile::List(list) => {
            let mut out = Vec::with_capacity(list.len());
            for (j, pair) in list.iter().enumerate() {
                if pair.len() != 2 {
                    return Err(ScenarioError::at(
                        format!("{path}.{j}"),
                        format!(
                            "expected the two ends of a circuit (switches like \"agg:0\" or OCS ports like \"ocs:3\"), found {} entries",
                            pair.len()
                        ),
                    ));
                }
                let end = |k: usize| -> Res<CircuitEnd> {
                    let path = format!("{path}.{j}.{k}");
                    if let NodeRef::Name(s) = &pair[k] {
                        if let Some(rest) = s.trim().strip_prefix("ocs:") {
                            return match rest.trim().parse::<u32>() {
                                Ok(n) => Ok(CircuitEnd::Port(n)),
                                Err(_) => Err(ScenarioError::at(
                                    path,
                                    format!("expected an OCS port like \"ocs:3\", found {s:?}"),
                                )),
                            };
                        }
                    }
                    Ok(CircuitEnd::Switch(node_name(path, &pair[k])?))
                };
                let (a, b) = (end(0)?, end(1)?);
                if a == b {
                    return Err(ScenarioError::at(
                        format!("{path}.{j}"),
                        "a circuit joins two different OCS ports (of two different switches)",
                    ));
                }
                out.push([a, b]);
            }
            Ok(CircuitsSpec::List(out))
        }
    }
}

impl OcsFile {
    /// `[ocs]` without the fabric.
    pub fn validate(&self, topology: &TopologySpec) -> Res<OcsSpec> {
        let (default_role, fabric_link, replaceable) = match topology {
            TopologySpec::FatTree { fabric, .. } => ("agg", *fabric, "agg"),
            TopologySpec::LeafSpine { fabric, .. } => ("leaf", *fabric, "leaf"),
            TopologySpec::Dragonfly { global, .. } => ("router", *global, ""),
            TopologySpec::DragonflyPlus { global, .. } => ("spine", *global, ""),
            // A general Clos: complemented between its aggregation switches (its cores stay).
            TopologySpec::Clos { fabric, .. } => ("agg", *fabric, ""),
            TopologySpec::Graph(_) => {
                return Err(ScenarioError::at(
                    "ocs",
                    "an OCS layer needs a built-in topology (fat_tree, leaf_spine, clos, dragonfly, dragonfly_plus); a graph topology states its links itself".to_string(),
                ))
            }
        };
        let role = match &self.switches {
            None => default_role.to_string(),
            Some(r) if switch_role(r.trim()) => r.trim().to_string(),
            Some(r) => {
                return Err(ScenarioError::at(
                    "ocs.switches",
                    format!(
                        "expected the role of the switches with uplinks into the OCS (\"edge\", \"agg\", \"core\", \"leaf\", \"spine\" or \"router\"), found {r:?}"
                    ),
                ))
            }
        };
        let replace = self.replace.unwrap_or(false);
        if replace && role != replaceable {
            return Err(ScenarioError::at(
                "ocs.replace",
                if replaceable.is_empty() {
                    "the OCS can replace the top tier of a fat tree (switches = \"agg\") or a leaf-spine (switches = \"leaf\") only".to_string()
                } else {
                    format!(
                        "the OCS replaces the tier above switches = \"{replaceable}\" of this topology; with switches = \"{role}\" it can only complement it (replace = false)"
                    )
                },
            ));
        }
        let uplinks = count(
            "ocs.uplinks",
            Some(self.uplinks.unwrap_or(1)),
            1,
            1024,
            "an integer number of uplinks per switch",
        )?;
        let ports = match self.ports {
            None => None,
            Some(_) => Some(count(
                "ocs.ports",
                self.ports,
                2,
                MAX_OCS_PORTS,
                "an integer number of OCS ports",
            )?),
        };
        let link = LinkSpec {
            rate_bps: self.link_rate.map(|r| r.0).unwrap_or(fabric_link.rate_bps),
            delay_ps: self.link_delay.map(|d| d.0).unwrap_or(fabric_link.delay_ps),
        };
        if link.rate_bps == 0 {
            return Err(ScenarioError::at("ocs.link_rate", "must be above 0"));
        }
        let reconfiguration_ps = positive(
            "ocs.reconfiguration_time",
            self.reconfiguration_time,
            DEFAULT_RECONFIGURATION_PS,
        )?;
        let detection_ps = self.detection.map(|d| d.0).unwrap_or(0);
        let initial = match &self.circuits {
            None => CircuitsSpec::Uniform,
            Some(c) => circuits_spec("ocs.circuits", c)?,
        };
        if self.reconfigure.len() > MAX_RECONFIGURATIONS {
            return Err(ScenarioError::at(
                "ocs.reconfigure",
                format!("at most {MAX_RECONFIGURATIONS} reconfigurations"),
            ));
        }
        let mut changes: Vec<ChangeSpec> = Vec::with_capacity(self.reconfigure.len());
        for (i, r) in self.reconfigure.iter().enumerate() {
            let p = |k: &str| format!("ocs.reconfigure.{i}.{k}");
            let at_ps =
                r.at.ok_or_else(|| {
                    ScenarioError::at(p("at"), "missing: when the change starts, like \"100us\"")
                })?
                .0;
            let circuits = r.circuits.as_ref().ok_or_else(|| {
                ScenarioError::at(
                    p("circuits"),
                    "missing: the configuration after the change (\"uniform\", \"none\" or a list of circuits)",
                )
            })?;
            let circuits = circuits_spec(&p("circuits"), circuits)?;
            let reconfiguration_ps = positive(
                &p("reconfiguration_time"),
                r.reconfiguration_time,
                reconfiguration_ps,
            )?;
            if let Some(prev) = changes.last() {
                let end = prev.at_ps.saturating_add(prev.reconfiguration_ps);
                if at_ps < end {
                    return Err(ScenarioError::at(
                        p("at"),
                        format!(
                            "overlaps reconfiguration {} (from {} until {}): changes must come in time order, each after the previous one has finished",
                            i - 1,
                            format_time(prev.at_ps),
                            format_time(end)
                        ),
                    ));
                }
            }
            changes.push(ChangeSpec {
                at_ps,
                reconfiguration_ps,
                circuits,
            });
        }
        Ok(OcsSpec {
            role,
            uplinks,
            ports,
            replace,
            link,
            reconfiguration_ps,
            detection_ps,
            initial,
            changes,
        })
    }
}

fn positive(path: &str, d: Option<Duration>, default: Time) -> Res<Time> {
    match d {
        None => Ok(default),
        Some(d) if d.0 > 0 => Ok(d.0),
        Some(_) => Err(ScenarioError::at(path, "must be longer than 0")),
    }
}

/// The OCS as built: which switch port each OCS port is, and its configurations (each the OCS
/// peer of every port, None: dark).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OcsLayout {
    /// The switches with uplinks into the OCS, in node order.
    pub switches: Vec<NodeId>,
    pub role: Role,
    pub uplinks: u32,
    /// Ports of the OCS (the first `switches * uplinks` are attached).
    pub radix: u32,
    /// Per attached OCS port: the switch port (an egress port; its link is the circuit).
    pub ports: Vec<PortId>,
    /// Per switch (index into `switches`): its plane (position in its pod) for `"uniform"`.
    pub plane: Vec<u32>,
    pub link: LinkSpec,
    pub reconfiguration_ps: Time,
    pub detection_ps: Time,
    /// The initial configuration: the OCS peer of each attached port.
    pub initial: Vec<Option<u32>>,
    /// The scheduled changes, each with the configuration it moves to.
    pub changes: Vec<Change>,
}

/// A scheduled change, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub at_ps: Time,
    pub reconfiguration_ps: Time,
    pub peers: Vec<Option<u32>>,
}

impl OcsLayout {
    /// The switch of OCS port `i`.
    pub fn switch_of(&self, i: u32) -> NodeId {
        self.switches[(i / self.uplinks) as usize]
    }

    /// The OCS ports of switch `s` (index into `switches`).
    fn ports_of(&self, s: usize) -> std::ops::Range<u32> {
        let u = self.uplinks;
        s as u32 * u..(s as u32 + 1) * u
    }

    /// Attached OCS ports.
    pub fn attached(&self) -> u32 {
        self.ports.len() as u32
    }

    /// The circuits of a configuration, each once (lower port first), in port order.
    pub fn circuits(peers: &[Option<u32>]) -> impl Iterator<Item = (u32, u32)> + '_ {
        peers
            .iter()
            .enumerate()
            .filter_map(|(i, &p)| p.filter(|&j| (i as u32) < j).map(|j| (i as u32, j)))
    }
}

/// The switches of role `role` among `roles` (node numbers), in order.
pub(crate) fn members(roles: &IdVec<NodeId, Role>, role: &str) -> Vec<u32> {
    roles
        .iter_enumerated()
        .filter(|(_, r)| r.as_str() == role)
        .map(|(n, _)| n.get())
        .collect()
}

/// The position of each member in its pod (fat trees: `k/2` edge or aggregation switches per
/// pod), else 0: `"uniform"` joins switches of the same plane only.
fn planes(topology: &TopologySpec, role: &str, n: usize) -> Vec<u32> {
    match (topology, role) {
        (TopologySpec::FatTree { k, .. }, "edge" | "agg") => {
            (0..n as u32).map(|i| i % (k / 2)).collect()
        }
        _ => vec![0; n],
    }
}

/// `"uniform"`: within each plane of `n` switches, uplink `u` of every switch joins the switch
/// round `u mod (n' - 1)` of a round-robin tournament pairs it with (the circle method over
/// `n' = n` rounded up to even; with `n` odd, one switch sits out each round and that uplink
/// stays dark). With `n - 1` uplinks or more, every pair of switches of a plane gets a circuit.
pub fn uniform(layout: &OcsLayout) -> Vec<Option<u32>> {
    let mut peers = vec![None; layout.ports.len()];
    let num_planes = layout.plane.iter().copied().max().map_or(0, |m| m + 1);
    for plane in 0..num_planes {
        let members: Vec<usize> = (0..layout.switches.len())
            .filter(|&s| layout.plane[s] == plane)
            .collect();
        let n = members.len();
        if n < 2 {
            continue;
        }
        let m = n + n % 2;
        let rounds = m - 1;
        for u in 0..layout.uplinks {
            let r = u as usize % rounds;
            let mut pairs = vec![(m - 1, r)];
            for i in 1..m / 2 {
                pairs.push(((r + i) % rounds, (r + rounds - i) % rounds));
            }
            for (x, y) in pairs {
                if x >= n || y >= n {
                    continue; // the bye
                }
                let a = layout.ports_of(members[x]).start + u;
                let b = layout.ports_of(members[y]).start + u;
                peers[a as usize] = Some(b);
                peers[b as usize] = Some(a);
            }
        }
    }
    peers
}

/// Each node's name as outputs write it (`"agg:3"`).
fn label(fabric: &Fabric, n: NodeId) -> String {
    let role = fabric.role[n];
    let index = fabric.role.as_slice()[..n.index()]
        .iter()
        .filter(|&&r| r == role)
        .count();
    format!("{}:{index}", role.as_str())
}

/// The configuration `spec` asks for, assigned to OCS ports (`path`: its key): circuits that
/// `prev` already has keep their ports; a switch end takes the switch's lowest free uplink.
pub fn assign(
    fabric: &Fabric,
    layout: &OcsLayout,
    path: &str,
    spec: &CircuitsSpec,
    prev: &[Option<u32>],
) -> Res<Vec<Option<u32>>> {
    let list = match spec {
        CircuitsSpec::Uniform => return Ok(uniform(layout)),
        CircuitsSpec::None => return Ok(vec![None; layout.ports.len()]),
        CircuitsSpec::List(list) => list,
    };
    let attached = layout.attached();
    let mut peers: Vec<Option<u32>> = vec![None; attached as usize];
    // Per entry and end: the switch index, or the OCS port.
    enum End {
        Switch(usize),
        Port(u32),
    }
    let mut ends: Vec<[End; 2]> = Vec::with_capacity(list.len());
    for (j, pair) in list.iter().enumerate() {
        let mut two = Vec::with_capacity(2);
        for (k, end) in pair.iter().enumerate() {
            let p = format!("{path}.{j}.{k}");
            two.push(match end {
                CircuitEnd::Port(i) if *i < attached => End::Port(*i),
                CircuitEnd::Port(i) if *i < layout.radix => {
                    return Err(ScenarioError::at(
                        p,
                        format!(
                            "ocs:{i} has no switch attached: ports ocs:0..={} are the uplinks of the {} switches",
                            attached - 1,
                            layout.role
                        ),
                    ))
                }
                CircuitEnd::Port(i) => {
                    return Err(ScenarioError::at(
                        p,
                        format!(
                            "ocs:{i} does not exist: the OCS has {} ports (ocs:0..={})",
                            layout.radix,
                            layout.radix - 1
                        ),
                    ))
                }
                CircuitEnd::Switch(name) => {
                    let n = node_id(fabric, p.clone(), name)?;
                    match layout.switches.iter().position(|&s| s == n) {
                        Some(s) => End::Switch(s),
                        None => {
                            return Err(ScenarioError::at(
                                p,
                                format!(
                                    "{} (node {n}) has no uplink into the OCS: its switches are the {} switches (ocs.switches)",
                                    label(fabric, n),
                                    layout.role
                                ),
                            ))
                        }
                    }
                }
            });
        }
        let b = two.pop().expect("two ends");
        let a = two.pop().expect("two ends");
        let switch = |e: &End| match *e {
            End::Switch(s) => s,
            End::Port(i) => (i / layout.uplinks) as usize,
        };
        if switch(&a) == switch(&b) {
            return Err(ScenarioError::at(
                format!("{path}.{j}"),
                format!(
                    "both ends are on {}: a circuit joins two different switches",
                    label(fabric, layout.switches[switch(&a)])
                ),
            ));
        }
        ends.push([a, b]);
    }
    let taken = |peers: &[Option<u32>], i: u32| peers[i as usize].is_some();
    let twice = |j: usize, k: usize, i: u32| {
        ScenarioError::at(
            format!("{path}.{j}.{k}"),
            format!("ocs:{i} is in two circuits of this configuration"),
        )
    };
    // 1. Both ends OCS ports.
    for (j, e) in ends.iter().enumerate() {
        if let [End::Port(a), End::Port(b)] = e {
            for (k, &i) in [*a, *b].iter().enumerate() {
                if taken(&peers, i) {
                    return Err(twice(j, k, i));
                }
            }
            peers[*a as usize] = Some(*b);
            peers[*b as usize] = Some(*a);
        }
    }
    // One OCS port fixed: reserve it.
    for (j, e) in ends.iter().enumerate() {
        for (k, end) in e.iter().enumerate() {
            if let (End::Port(i), End::Switch(_)) = (end, &e[1 - k]) {
                if taken(&peers, *i) {
                    return Err(twice(j, k, *i));
                }
                peers[*i as usize] = Some(u32::MAX);
            }
        }
    }
    let mut done = vec![false; ends.len()];
    // 2. Circuits the previous configuration has keep their ports.
    for (j, e) in ends.iter().enumerate() {
        let found = match e {
            [End::Switch(a), End::Switch(b)] => layout.ports_of(*a).find_map(|pa| {
                let pb = prev.get(pa as usize).copied().flatten()?;
                (pb / layout.uplinks == *b as u32 && !taken(&peers, pa) && !taken(&peers, pb))
                    .then_some((pa, pb))
            }),
            [End::Port(i), End::Switch(s)] | [End::Switch(s), End::Port(i)] => prev
                .get(*i as usize)
                .copied()
                .flatten()
                .filter(|&pb| pb / layout.uplinks == *s as u32 && !taken(&peers, pb))
                .map(|pb| (*i, pb)),
            _ => None,
        };
        if let Some((a, b)) = found {
            peers[a as usize] = Some(b);
            peers[b as usize] = Some(a);
            done[j] = true;
        }
    }
    // 3. The rest: the lowest free uplink of each switch end.
    for (j, e) in ends.iter().enumerate() {
        if done[j] || matches!(e, [End::Port(_), End::Port(_)]) {
            continue;
        }
        let mut got = [0u32; 2];
        for (k, end) in e.iter().enumerate() {
            got[k] = match end {
                End::Port(i) => *i,
                End::Switch(s) => {
                    let free = layout.ports_of(*s).find(|&i| !taken(&peers, i));
                    let Some(i) = free else {
                        return Err(ScenarioError::at(
                            format!("{path}.{j}.{k}"),
                            format!(
                                "{} has {} uplink{} into the OCS (ocs.uplinks): this configuration gives it more circuits",
                                label(fabric, layout.switches[*s]),
                                layout.uplinks,
                                if layout.uplinks == 1 { "" } else { "s" }
                            ),
                        ));
                    };
                    // Held while the other end is chosen.
                    peers[i as usize] = Some(u32::MAX);
                    i
                }
            };
        }
        peers[got[0] as usize] = Some(got[1]);
        peers[got[1] as usize] = Some(got[0]);
    }
    Ok(peers)
}

/// Resolve `[ocs]` against `fabric` (whose OCS ports the builder added): the layout, its initial
/// configuration and every scheduled change's.
pub fn resolve(fabric: &Fabric, topology: &TopologySpec, spec: &OcsSpec) -> Res<OcsLayout> {
    let switches: Vec<NodeId> = members(&fabric.role, &spec.role)
        .into_iter()
        .map(NodeId::new)
        .collect();
    if switches.is_empty() {
        return Err(ScenarioError::at(
            "ocs.switches",
            format!("this fabric has no {} switches", spec.role),
        ));
    }
    let attached = switches.len() as u32 * spec.uplinks;
    let radix = spec.ports.unwrap_or(attached);
    if radix < attached {
        return Err(ScenarioError::at(
            "ocs.ports",
            format!(
                "the OCS needs at least {attached} ports: {} {} switches x {} uplinks, found {radix}",
                switches.len(),
                spec.role,
                spec.uplinks
            ),
        ));
    }
    let mut ports = Vec::with_capacity(attached as usize);
    for &s in &switches {
        // The builder added each switch's OCS ports last, in uplink order.
        let end = fabric.port_start.as_slice()[s.index() + 1].get();
        for u in 0..spec.uplinks {
            ports.push(PortId::new(end - spec.uplinks + u));
        }
    }
    let mut layout = OcsLayout {
        plane: planes(topology, &spec.role, switches.len()),
        role: fabric.role[switches[0]],
        switches,
        uplinks: spec.uplinks,
        radix,
        ports,
        link: spec.link,
        reconfiguration_ps: spec.reconfiguration_ps,
        detection_ps: spec.detection_ps,
        initial: Vec::new(),
        changes: Vec::new(),
    };
    let none = vec![None; attached as usize];
    let initial = assign(fabric, &layout, "ocs.circuits", &spec.initial, &none)?;
    let mut prev = initial.clone();
    let mut changes = Vec::with_capacity(spec.changes.len());
    for (i, c) in spec.changes.iter().enumerate() {
        let peers = assign(
            fabric,
            &layout,
            &format!("ocs.reconfigure.{i}.circuits"),
            &c.circuits,
            &prev,
        )?;
        prev = peers.clone();
        changes.push(Change {
            at_ps: c.at_ps,
            reconfiguration_ps: c.reconfiguration_ps,
            peers,
        });
    }
    layout.initial = initial;
    layout.changes = changes;
    Ok(layout)
}

/// Join (or, with `None`, darken) OCS port `i`'s switch port as configuration `peers` says: its
/// link's far end becomes the peer's switch port (a dark port is its own peer).
pub fn wire(fabric: &mut Fabric, ports: &[PortId], i: u32, peer: Option<u32>) {
    let p = ports[i as usize];
    let (far_port, far_node) = match peer {
        Some(j) => {
            let q = ports[j as usize];
            (q, fabric.port_node[q])
        }
        None => (p, fabric.port_node[p]),
    };
    fabric.peer_port[p] = far_port;
    fabric.peer_node[p] = far_node;
}

/// Attach `[ocs]` to a fabric whose builder added the OCS ports: resolve it and wire the initial
/// configuration.
pub fn attach(fabric: &mut Fabric, topology: &TopologySpec, spec: &OcsSpec) -> Res<()> {
    let layout = resolve(fabric, topology, spec)?;
    for (i, &peer) in layout.initial.iter().enumerate() {
        wire(fabric, &layout.ports, i as u32, peer);
    }
    fabric.ocs = Some(Box::new(layout));
    Ok(())
}

impl OcsFile {
    /// `[ocs]` with every default written out (see `scenario::normalise`), from its validated
    /// `spec`; configurations as written (switch names stay names).
    pub fn normalised(&self, spec: &OcsSpec) -> OcsFile {
        OcsFile {
            switches: Some(spec.role.clone()),
            uplinks: Some(spec.uplinks as i64),
            ports: spec.ports.map(i64::from),
            replace: Some(spec.replace),
            link_rate: Some(LinkRate(spec.link.rate_bps)),
            link_delay: Some(Duration(spec.link.delay_ps)),
            reconfiguration_time: Some(Duration(spec.reconfiguration_ps)),
            detection: Some(Duration(spec.detection_ps)),
            circuits: Some(
                self.circuits
                    .clone()
                    .unwrap_or_else(|| CircuitsFile::Pattern("uniform".to_string())),
            ),
            reconfigure: self
                .reconfigure
                .iter()
                .zip(&spec.changes)
                .map(|(f, c)| ReconfigureFile {
                    at: Some(Duration(c.at_ps)),
                    circuits: f.circuits.clone(),
                    reconfiguration_time: Some(Duration(c.reconfiguration_ps)),
                })
                .collect(),
        }
    }
}

/// Keys of `[ocs]` whose absence from a normalised scenario is itself the setting.
pub const ABSENT_MEANS: &[(&str, &str)] = &[(
    "ocs.ports",
    "as many OCS ports as the switches have uplinks into it",
)];
