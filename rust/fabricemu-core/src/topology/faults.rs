//! `[[fault]]`: a link (both directions) goes down or runs slower for a while. The entries are
//! checked without the fabric (validation) and their links resolved against it (build): role
//! names, index ranges and adjacency, each error naming `fault.N.link`.

use serde::{Deserialize, Serialize};

use super::{Fabric, LinkId, NodeId};
use crate::config::check::Res;
use crate::config::values::{Duration, LinkRate};
use crate::config::{FaultKind, FaultSpec, NodeName, ScenarioError};

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
}

/// One `[[fault]]`: a link (both directions) goes down or runs slower, from `at` until `until`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultFile {
    /// The two ends of the link.
    pub link: Vec<NodeRef>,
    /// `down` (default) or `degrade`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<FaultKindName>,
    pub at: Duration,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Duration>,
    /// `degrade`: the link's rate meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<LinkRate>,
    /// How long switches keep using a failed (or restored) link before routing notices (default
    /// 10us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection: Option<Duration>,
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
    /// Entry `i` without the fabric: its ends parsed, its kind and times checked.
    pub fn validate(&self, i: usize) -> Res<FaultSpec> {
        let p = |key: &str| format!("fault.{i}.{key}");
        if self.link.len() != 2 {
            return Err(ScenarioError::at(
                p("link"),
                format!(
                    "expected the two ends of a link, found {} nodes",
                    self.link.len()
                ),
            ));
        }
        let ends = [
            node_name(format!("fault.{i}.link.0"), &self.link[0])?,
            node_name(format!("fault.{i}.link.1"), &self.link[1])?,
        ];
        let kind = match self.kind.unwrap_or(FaultKindName::Down) {
            FaultKindName::Down => {
                if self.rate.is_some() {
                    return Err(ScenarioError::at(
                        p("rate"),
                        "a rate needs kind = \"degrade\"",
                    ));
                }
                FaultKind::Down
            }
            FaultKindName::Degrade => match self.rate {
                Some(r) => FaultKind::Degrade { rate_bps: r.0 },
                None => {
                    return Err(ScenarioError::at(
                        p("rate"),
                        "missing: the degraded link's rate, like \"50Gbps\"",
                    ))
                }
            },
        };
        if let Some(u) = self.until {
            if u.0 <= self.at.0 {
                return Err(ScenarioError::at(p("until"), "must be after `at`"));
            }
        }
        Ok(FaultSpec {
            ends,
            kind,
            at_ps: self.at.0,
            until_ps: self.until.map(|d| d.0),
            detection_ps: self.detection.map(|d| d.0).unwrap_or(10_000_000),
        })
    }
}

/// A fault resolved against the fabric: the two directed links (one per direction) of the link
/// it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkFault {
    pub spec: FaultSpec,
    pub links: [LinkId; 2],
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

/// Resolve `[[fault]]` entries: node names to ids, ends to a link.
pub fn resolve(fabric: &Fabric, specs: &[FaultSpec]) -> Res<Vec<LinkFault>> {
    let mut out = Vec::with_capacity(specs.len());
    for (i, f) in specs.iter().enumerate() {
        let a = node_id(fabric, format!("fault.{i}.link.0"), &f.ends[0])?;
        let b = node_id(fabric, format!("fault.{i}.link.1"), &f.ends[1])?;
        let port = fabric.ports_of(a).find(|&p| fabric.peer_node[p] == b);
        let Some(p) = port else {
            return Err(ScenarioError::at(
                format!("fault.{i}.link"),
                format!(
                    "{} and {} are not linked: a fault names the two ends of one link",
                    shown(fabric, &f.ends[0], a),
                    shown(fabric, &f.ends[1], b)
                ),
            ));
        };
        out.push(LinkFault {
            spec: f.clone(),
            links: [LinkId::of_egress(p), LinkId::of_egress(fabric.peer_port[p])],
        });
    }
    Ok(out)
}
