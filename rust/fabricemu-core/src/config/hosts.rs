//! Host lists and group selectors: wherever a workload takes a list of hosts (GPUs with a
//! `[cluster]`), it takes host ids, a selector naming a group of the cluster, or a list mixing
//! both:
//!
//! - `hosts = [0, 1, 2]`: these hosts, in this order;
//! - `hosts = "server:3"`: the GPUs of server 3 (`gpus_per_server` of them, in id order);
//! - `hosts = "rack:1"`: the GPUs of rack 1 (`servers_per_rack` servers);
//! - `hosts = "rail:2"`: the GPUs on rail 2 (whose NIC is NIC 2 of their server), server by server;
//! - `hosts = ["server:0", "server:2", 40]`: the union, in the order given (a host listed twice is
//!   an error).
//!
//! Selectors need a `[cluster]` (without one there are no servers, racks or rails to name).
//! Collectives also take `groups` by layout (`"servers"`, `"racks"`, `"rails"`: one group per
//! server, rack or rail index; [`Layout`]).

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::{SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};

use super::check::{host_id, Res};
use super::{ClusterSpec, ScenarioError};

/// One entry of a host list: a host id or a selector (`"server:3"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostItem {
    Id(i64),
    Select(String),
}

/// A host list as written: one selector, or a list of ids and selectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hosts {
    Select(String),
    List(Vec<HostItem>),
}

/// What a selector names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Server,
    Rack,
    Rail,
}

impl Group {
    fn name(self) -> &'static str {
        match self {
            Group::Server => "server",
            Group::Rack => "rack",
            Group::Rail => "rail",
        }
    }
}

/// `groups = "servers" | "racks" | "rails"`: one group per server, rack or rail index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    Servers,
    Racks,
    Rails,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Servers => "servers",
            Layout::Racks => "racks",
            Layout::Rails => "rails",
        }
    }

    fn group(self) -> Group {
        match self {
            Layout::Servers => Group::Server,
            Layout::Racks => Group::Rack,
            Layout::Rails => Group::Rail,
        }
    }
}

const EXPECTED: &str = "a list of host ids or a selector like \"server:3\", \"rack:1\", \"rail:2\"";

impl Serialize for HostItem {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            HostItem::Id(v) => s.serialize_i64(*v),
            HostItem::Select(t) => s.serialize_str(t),
        }
    }
}

impl Serialize for Hosts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Hosts::Select(t) => s.serialize_str(t),
            Hosts::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
        }
    }
}

struct ItemVisitor;

impl Visitor<'_> for ItemVisitor {
    type Value = HostItem;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a host id or a selector like \"server:3\"")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<HostItem, E> {
        Ok(HostItem::Id(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<HostItem, E> {
        Ok(HostItem::Id(i64::try_from(v).unwrap_or(i64::MAX)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<HostItem, E> {
        Ok(HostItem::Select(v.to_string()))
    }
}

impl<'de> Deserialize<'de> for HostItem {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HostItem, D::Error> {
        d.deserialize_any(ItemVisitor)
    }
}

struct HostsVisitor;

impl<'de> Visitor<'de> for HostsVisitor {
    type Value = Hosts;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(EXPECTED)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Hosts, E> {
        Ok(Hosts::Select(v.to_string()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Hosts, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<HostItem>()? {
            items.push(item);
        }
        Ok(Hosts::List(items))
    }
}

impl<'de> Deserialize<'de> for Hosts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hosts, D::Error> {
        d.deserialize_any(HostsVisitor)
    }
}

impl From<Vec<i64>> for Hosts {
    fn from(ids: Vec<i64>) -> Hosts {
        Hosts::List(ids.into_iter().map(HostItem::Id).collect())
    }
}

/// The servers, racks and rails of a cluster with `n_gpus` GPUs: what selectors name.
#[derive(Debug, Clone, Copy)]
pub struct Groups {
    gpus_per_server: u32,
    /// GPUs per NIC (consecutive GPUs of a server share a NIC: one rail).
    gpus_per_rail: u32,
    rails: u32,
    servers_per_rack: u32,
    servers: u32,
}

impl Groups {
    pub fn new(c: &ClusterSpec, n_gpus: u32) -> Groups {
        Groups {
            gpus_per_server: c.gpus_per_server,
            gpus_per_rail: c.gpus_per_server / c.nics_per_server,
            rails: c.nics_per_server,
            servers_per_rack: c.servers_per_rack,
            servers: n_gpus / c.gpus_per_server,
        }
    }

    fn racks(&self) -> u32 {
        self.servers.div_ceil(self.servers_per_rack)
    }

    fn count(&self, g: Group) -> u32 {
        match g {
            Group::Server => self.servers,
            Group::Rack => self.racks(),
            Group::Rail => self.rails,
        }
    }

    /// The GPUs of group `i` of kind `g`, in id order (a rail: server by server).
    fn gpus(&self, g: Group, i: u32) -> Vec<u32> {
        let per = self.gpus_per_server;
        match g {
            Group::Server => (i * per..(i + 1) * per).collect(),
            Group::Rack => {
                let first = i * self.servers_per_rack;
                let end = ((i + 1) * self.servers_per_rack).min(self.servers);
                (first * per..end * per).collect()
            }
            Group::Rail => (0..self.servers)
                .flat_map(|s| {
                    let first = s * per + i * self.gpus_per_rail;
                    first..first + self.gpus_per_rail
                })
                .collect(),
        }
    }

    /// One group per server, rack or rail index.
    pub fn layout(&self, l: Layout) -> Vec<Vec<u32>> {
        let g = l.group();
        (0..self.count(g)).map(|i| self.gpus(g, i)).collect()
    }
}

/// A selector's group kind and index, if `text` is one.
fn parse_selector(text: &str) -> Option<(Group, u32)> {
    let (kind, index) = text.split_once(':')?;
    let g = match kind.trim() {
        "server" => Group::Server,
        "rack" => Group::Rack,
        "rail" => Group::Rail,
        _ => return None,
    };
    Some((g, index.trim().parse::<u32>().ok()?))
}

/// Whether `text` has the form of a selector (`"server:3"`, `"rack:1"`, `"rail:2"`).
pub fn is_selector(text: &str) -> bool {
    parse_selector(text).is_some()
}

/// The GPUs a selector names (`path` is its key path).
fn select(path: &str, text: &str, groups: Option<&Groups>) -> Res<Vec<u32>> {
    let Some((g, i)) = parse_selector(text) else {
        return Err(ScenarioError::at(
            path,
            format!("expected a host id or a selector like \"server:3\", \"rack:1\", \"rail:2\", found \"{text}\""),
        ));
    };
    let Some(groups) = groups else {
        return Err(ScenarioError::at(
            path,
            format!(
                "\"{text}\" needs a [cluster] section: without one there are no servers, racks \
                 or rails, only hosts (give host ids)"
            ),
        ));
    };
    let n = groups.count(g);
    if i >= n {
        return Err(ScenarioError::at(
            path,
            format!(
                "{} {i} is out of range: this cluster has {}s 0..={}",
                g.name(),
                g.name(),
                n - 1
            ),
        ));
    }
    Ok(groups.gpus(g, i))
}

/// The hosts of a host list (ids and selectors, in order; each host at most once). `path` names
/// the list, `path.j` its entry j.
pub fn resolve(path: &str, hosts: &Hosts, n_hosts: u32, groups: Option<&Groups>) -> Res<Vec<u32>> {
    let mut out = Vec::new();
    let mut seen = vec![false; n_hosts as usize];
    let mut add = |ids: Vec<u32>, at: &str| -> Res<()> {
        for id in ids {
            if std::mem::replace(&mut seen[id as usize], true) {
                return Err(ScenarioError::at(at, format!("host {id} is listed twice")));
            }
            out.push(id);
        }
        Ok(())
    };
    match hosts {
        Hosts::Select(text) => add(select(path, text, groups)?, path)?,
        Hosts::List(items) => {
            for (j, item) in items.iter().enumerate() {
                let at = format!("{path}.{j}");
                let ids = match item {
                    HostItem::Id(v) => vec![host_id(at.clone(), *v, n_hosts)?],
                    HostItem::Select(text) => select(&at, text, groups)?,
                };
                add(ids, &at)?;
            }
        }
    }
    Ok(out)
}

/// `hosts` resolved if given (at least two), else every host.
pub fn resolve_or_all(
    path: &str,
    hosts: Option<&Hosts>,
    n_hosts: u32,
    groups: Option<&Groups>,
    what: &str,
) -> Res<Vec<u32>> {
    let hosts = match hosts {
        None => (0..n_hosts).collect(),
        Some(h) => resolve(path, h, n_hosts, groups)?,
    };
    if hosts.len() < 2 {
        return Err(ScenarioError::at(
            path,
            format!("{what} needs at least two hosts"),
        ));
    }
    Ok(hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups() -> Groups {
        // 6 servers of 4 GPUs, 2 NICs each (GPUs 0-1 on rail 0, 2-3 on rail 1), 4 servers a rack.
        Groups {
            gpus_per_server: 4,
            gpus_per_rail: 2,
            rails: 2,
            servers_per_rack: 4,
            servers: 6,
        }
    }

    fn parse(text: &str) -> Hosts {
        #[derive(Deserialize, Serialize)]
        struct T {
            hosts: Hosts,
        }
        let t: T = toml::from_str(&format!("hosts = {text}")).unwrap();
        // Serialised back as written.
        assert_eq!(
            toml::to_string(&t).unwrap().trim(),
            format!("hosts = {text}")
        );
        t.hosts
    }

    #[test]
    fn selectors_name_servers_racks_and_rails() {
        let g = groups();
        let r = |text: &str| resolve("hosts", &parse(text), 24, Some(&g));
        assert_eq!(r("\"server:2\"").unwrap(), [8, 9, 10, 11]);
        assert_eq!(r("\"rack:1\"").unwrap(), (16..24).collect::<Vec<_>>());
        assert_eq!(
            r("\"rail:1\"").unwrap(),
            [2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23]
        );
        assert_eq!(
            r("[\"server:0\", 7, \"server:5\"]").unwrap(),
            [0, 1, 2, 3, 7, 20, 21, 22, 23]
        );
        assert_eq!(r("[3, 1]").unwrap(), [3, 1]);
        assert_eq!(g.layout(Layout::Racks).len(), 2);
        assert_eq!(
            g.layout(Layout::Rails)[0],
            [0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21]
        );
        assert_eq!(g.layout(Layout::Servers)[5], [20, 21, 22, 23]);
    }

    #[test]
    fn bad_selectors_name_the_entry() {
        let g = groups();
        let e = |text: &str, groups: Option<&Groups>| {
            let e = resolve("w.hosts", &parse(text), 24, groups).unwrap_err();
            (e.path.clone(), e.message.clone())
        };
        let (p, m) = e("\"server:6\"", Some(&g));
        assert_eq!(p, "w.hosts");
        assert_eq!(
            m,
            "server 6 is out of range: this cluster has servers 0..=5"
        );
        let (p, m) = e("[0, \"rail:2\"]", Some(&g));
        assert_eq!(p, "w.hosts.1");
        assert!(m.contains("rails 0..=1"), "{m}");
        let (p, m) = e("[\"server:0\", 2]", Some(&g));
        assert_eq!(
            (p.as_str(), m.as_str()),
            ("w.hosts.1", "host 2 is listed twice")
        );
        let (_, m) = e("\"servers:1\"", Some(&g));
        assert!(m.starts_with("expected a host id or a selector"), "{m}");
        let (_, m) = e("\"server:-1\"", Some(&g));
        assert!(m.contains("found \"server:-1\""), "{m}");
        let (p, m) = e("\"server:3\"", None);
        assert_eq!(p, "w.hosts");
        assert!(
            m.starts_with("\"server:3\" needs a [cluster] section"),
            "{m}"
        );
        let (p, m) = e("[1, 99]", Some(&g));
        assert_eq!(p, "w.hosts.1");
        assert!(m.contains("out of range"), "{m}");
    }
}
