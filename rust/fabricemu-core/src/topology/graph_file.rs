//! `kind = "graph"`: a fabric read from a GraphML file, an edge-list (or CSV) file, or an edge list
//! written inline in the scenario (`edges = """..."""`, what `fabricemu.topology.from_networkx`
//! produces).
//!
//! - **Nodes** have a role: `host` (an endpoint) or a switch (`switch`, or one of the built-in
//!   roles `edge`, `agg`, `core`, `leaf`, `spine`, `router`; `tor` is read as `edge`). Optional
//!   `pod`, `group` and `rack` numbers go to nodes.arrow. Hosts get ids `0..hosts` in the order
//!   they are listed, then the switches in theirs; a node is named `"<role>:<index>"` like every
//!   other fabric's (the name `[[fault]]` takes), its name in the file is kept in messages only.
//! - **Links** are cables (both directions) with a `rate` and a `delay`; a link without one takes
//!   `host_link_rate` / `fabric_link_rate` (host links / switch links) or `link_rate` from
//!   `[topology]`, and it is an error when none is given (no silent default for a drawn graph).
//!   `tier` (`host`, `fabric`, `core`, `global`) is optional: host links are `host`, the rest
//!   `fabric`. A `global` link costs more than any path without one, as in a dragonfly.
//! - **Checks**: every host has exactly one link, to a switch (multi-homed servers are modelled
//!   with `[cluster]`); no self-loops, no second link between the same two nodes; the graph is
//!   connected; every role is known.
//! - **Port order**: a node's ports are its host links first, then its other links in file order;
//!   when every edge gives `source_port` and `target_port` (as `fabricemu topo --export` writes
//!   them), each node's ports follow those numbers instead, so an exported fabric loads back with
//!   the same port ids, hence the same routes and the same outputs.
//!
//! Edge-list format (`.edges`, `.txt`, `.csv`; one item per line, fields separated by commas or
//! spaces, `#` starts a comment):
//!
//! ```text
//! node h0 host pod=0        # a node line: name, role, then key=value attributes
//! h0 s0 100Gbps 1us         # a link: both ends, then rate and delay (optional), or key=value
//! s0 s1 rate=400Gbps delay=500ns tier=core
//! ```
//!
//! A first line `source,target,...` is a CSV header naming the columns (`rate`, `delay`, `tier`,
//! `source_port`, `target_port`). A node without a `node` line takes its role from its name:
//! `"leaf:3"`, `leaf3`, `host_12` (the name without its trailing number or `:index`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{Fabric, IdVec, NodeId, PortId, Role, Tier};
use crate::config::{LinkSpec, ScenarioError};
use crate::units::{parse_rate, parse_time};

/// Most nodes and links a graph may have (the ids are `u32`; this bounds memory too).
const MAX_NODES: usize = 1 << 21;
const MAX_LINKS: usize = 1 << 22;

/// One node of a graph topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphNode {
    /// The name in the file (for messages).
    pub name: String,
    pub role: Role,
    pub pod: Option<u32>,
    pub group: Option<u32>,
    pub rack: Option<u32>,
}

/// One cable of a graph topology: node ids (in the fabric's numbering), link, tier, and the port
/// order keys of its two ends (None: file order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphLink {
    pub a: u32,
    pub b: u32,
    pub spec: LinkSpec,
    pub tier: Tier,
    pub order: Option<(u64, u64)>,
}

/// A checked graph: nodes in id order (hosts first), links in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphSpec {
    pub num_hosts: u32,
    pub nodes: Vec<GraphNode>,
    pub links: Vec<GraphLink>,
}

/// Where the graph comes from, as `[topology]` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphFormat {
    GraphMl,
    Edges,
}

impl GraphFormat {
    /// The format a file name's extension names (None: not known).
    pub fn of_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "graphml" | "xml" => Some(Self::GraphMl),
            "edges" | "edgelist" | "txt" | "csv" | "tsv" => Some(Self::Edges),
            _ => None,
        }
    }
}

/// Default links from `[topology]`'s link keys (None: not given).
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkDefaults {
    pub host_rate: Option<u64>,
    pub host_delay: Option<u64>,
    pub fabric_rate: Option<u64>,
    pub fabric_delay: Option<u64>,
}

/// A position in the source: a line (1-based) and, where known, a column.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Pos {
    line: u32,
    col: Option<u32>,
}

/// Errors name `where_` (the file, or `topology.edges`), the line and column, and the item.
struct Src<'a> {
    name: &'a str,
}

impl Src<'_> {
    fn err(&self, pos: Pos, message: impl std::fmt::Display) -> String {
        match pos.col {
            Some(c) => format!("{}:{}:{}: {message}", self.name, pos.line, c),
            None if pos.line > 0 => format!("{}:{}: {message}", self.name, pos.line),
            None => format!("{}: {message}", self.name),
        }
    }
}

#[derive(Debug, Default)]
struct RawNode {
    name: String,
    role: Option<String>,
    /// GraphML's `host` boolean (the export's), used when no `role` is given.
    host: Option<bool>,
    pod: Option<u32>,
    group: Option<u32>,
    rack: Option<u32>,
    pos: Pos,
}

#[derive(Debug, Default)]
struct RawEdge {
    a: String,
    b: String,
    rate: Option<u64>,
    delay: Option<u64>,
    tier: Option<String>,
    source_port: Option<u64>,
    target_port: Option<u64>,
    pos: Pos,
}

#[derive(Debug, Default)]
struct RawGraph {
    nodes: Vec<RawNode>,
    edges: Vec<RawEdge>,
    /// GraphML: every node is declared, an edge to another is an error (edge lists add them).
    declared_only: bool,
}

/// Read and check a graph file. `key` is the scenario key that named it (for the error's path),
/// `shown` the name messages give it.
pub fn read_file(
    key: &str,
    path: &Path,
    shown: &str,
    format: Option<GraphFormat>,
    defaults: LinkDefaults,
) -> Result<GraphSpec, ScenarioError> {
    let format = match format.or_else(|| GraphFormat::of_path(path)) {
        Some(f) => f,
        None => {
            return Err(ScenarioError::at(
                key,
                format!(
                    "{shown}: cannot tell the format from the file name: name it .graphml, \
                     .edges or .csv, or set topology.format = \"graphml\" or \"edges\""
                ),
            ))
        }
    };
    let text = read_text(path).map_err(|e| ScenarioError::at(key, format!("{shown}: {e}")))?;
    parse(key, &text, shown, format, defaults)
}

/// Largest graph file read (a bound on memory; `/dev/zero` must not take the machine).
const MAX_FILE_BYTES: u64 = 256 << 20;

/// A text file, bounded; binary data is refused without echoing it.
fn read_text(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match f.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read it: {e}")),
        };
        if n == 0 {
            break;
        }
        // Binary data is refused at its first chunk (an endless /dev/zero too).
        if chunk[..n].contains(&0) {
            return Err("binary data: expected a GraphML or edge-list text file".into());
        }
        bytes.extend_from_slice(&chunk[..n]);
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!("larger than {} MiB", MAX_FILE_BYTES >> 20));
        }
    }
    String::from_utf8(bytes)
        .map_err(|_| "not UTF-8 text: expected a GraphML or edge-list file".into())
}

/// Check a graph given as text.
pub fn parse(
    key: &str,
    text: &str,
    shown: &str,
    format: GraphFormat,
    defaults: LinkDefaults,
) -> Result<GraphSpec, ScenarioError> {
    let src = Src { name: shown };
    let raw = match format {
        GraphFormat::GraphMl => read_graphml(text, &src),
        GraphFormat::Edges => read_edges(text, &src),
    }
    .map_err(|m| ScenarioError::at(key, m))?;
    assemble(raw, defaults, &src).map_err(|m| ScenarioError::at(key, m))
}

/// Resolve a graph file path: relative paths are relative to `base` (the scenario file's folder)
/// when known, else to the working directory.
pub fn resolve(file: &str, base: Option<&Path>) -> PathBuf {
    let p = Path::new(file);
    match base {
        Some(b) if p.is_relative() => b.join(p),
        _ => p.to_path_buf(),
    }
}

// -- edge lists ---------------------------------------------------------------------------------

fn fields(line: &str) -> Vec<&str> {
    line.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|f| !f.is_empty())
        .collect()
}

fn read_edges(text: &str, src: &Src) -> Result<RawGraph, String> {
    let mut g = RawGraph::default();
    let mut header: Option<Vec<String>> = None;
    let mut first = true;
    for (i, line) in text.lines().enumerate() {
        let pos = Pos {
            line: i as u32 + 1,
            col: None,
        };
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let f = fields(line);
        if first {
            first = false;
            if f.len() >= 2
                && f[0].eq_ignore_ascii_case("source")
                && f[1].eq_ignore_ascii_case("target")
            {
                let cols: Vec<String> = f[2..].iter().map(|c| c.to_ascii_lowercase()).collect();
                for c in &cols {
                    if !EDGE_KEYS.contains(&c.as_str()) {
                        return Err(src.err(
                            pos,
                            format!("unknown column {c:?}: expected {}", EDGE_KEYS.join(", ")),
                        ));
                    }
                }
                header = Some(cols);
                continue;
            }
        }
        if f[0] == "node" {
            let (Some(name), Some(role)) = (f.get(1), f.get(2)) else {
                return Err(src.err(pos, "a node line is `node NAME ROLE [key=value ...]`"));
            };
            let mut n = RawNode {
                name: name.to_string(),
                role: Some(role.to_string()),
                pos,
                ..RawNode::default()
            };
            for kv in &f[3..] {
                let Some((k, v)) = kv.split_once('=') else {
                    return Err(src.err(
                        pos,
                        format!("expected key=value (pod, group or rack), found {kv:?}"),
                    ));
                };
                node_attr(&mut n, k, v).map_err(|m| src.err(pos, m))?;
            }
            g.nodes.push(n);
            continue;
        }
        if f.len() < 2 {
            return Err(src.err(
                pos,
                format!("expected a link `A B [rate] [delay]` or a `node` line, found {line:?}"),
            ));
        }
        let mut e = RawEdge {
            a: f[0].to_string(),
            b: f[1].to_string(),
            pos,
            ..RawEdge::default()
        };
        let mut positional = 0;
        for (j, v) in f[2..].iter().enumerate() {
            let (k, v) = match (&header, v.split_once('=')) {
                (_, Some((k, v))) => (k.to_ascii_lowercase(), v),
                (Some(cols), None) => match cols.get(j) {
                    Some(c) => (c.clone(), *v),
                    None => return Err(src.err(pos, format!("more fields than columns: {v:?}"))),
                },
                (None, None) => {
                    positional += 1;
                    match positional {
                        1 => ("rate".to_string(), *v),
                        2 => ("delay".to_string(), *v),
                        _ => {
                            return Err(src.err(
                                pos,
                                format!("unexpected field {v:?}: a link is `A B [rate] [delay] [key=value ...]`"),
                            ))
                        }
                    }
                }
            };
            edge_attr(&mut e, &k, v).map_err(|m| src.err(pos, m))?;
        }
        g.edges.push(e);
    }
    Ok(g)
}

const EDGE_KEYS: &[&str] = &[
    "rate",
    "rate_bps",
    "delay",
    "delay_ps",
    "tier",
    "source_port",
    "target_port",
];

fn number(k: &str, v: &str) -> Result<u64, String> {
    v.trim()
        .parse::<u64>()
        .map_err(|_| format!("{k}: expected a non-negative integer, found {v:?}"))
}

fn small(k: &str, v: &str) -> Result<u32, String> {
    let n = number(k, v)?;
    u32::try_from(n).map_err(|_| format!("{k}: {n} is too large"))
}

fn node_attr(n: &mut RawNode, k: &str, v: &str) -> Result<(), String> {
    match k {
        "role" => n.role = Some(v.trim().to_string()),
        "host" => {
            n.host = Some(match v.trim() {
                "true" | "1" | "True" => true,
                "false" | "0" | "False" => false,
                _ => return Err(format!("host: expected true or false, found {v:?}")),
            })
        }
        "pod" => n.pod = Some(small(k, v)?),
        "group" => n.group = Some(small(k, v)?),
        "rack" => n.rack = Some(small(k, v)?),
        _ => {
            return Err(format!(
                "unknown node attribute {k:?}: expected role, pod, group or rack"
            ))
        }
    }
    Ok(())
}

fn edge_attr(e: &mut RawEdge, k: &str, v: &str) -> Result<(), String> {
    let v = v.trim();
    match k {
        "rate" => e.rate = Some(parse_rate(v).map_err(|err| format!("rate: {err}"))?),
        "rate_bps" => {
            let r = number(k, v)?;
            if r == 0 {
                return Err("rate_bps: expected a positive rate".into());
            }
            e.rate = Some(r)
        }
        "delay" => e.delay = Some(parse_time(v).map_err(|err| format!("delay: {err}"))?),
        "delay_ps" => e.delay = Some(number(k, v)?),
        "tier" => e.tier = Some(v.to_string()),
        "source_port" => e.source_port = Some(number(k, v)?),
        "target_port" => e.target_port = Some(number(k, v)?),
        _ => {
            return Err(format!(
                "unknown link attribute {k:?}: expected {}",
                EDGE_KEYS.join(", ")
            ))
        }
    }
    Ok(())
}

// -- GraphML ------------------------------------------------------------------------------------

/// An element named `name` (in any namespace: GraphML files come with and without theirs).
fn is_tag(n: &roxmltree::Node, name: &str) -> bool {
    n.is_element() && n.tag_name().name() == name
}

fn read_graphml(text: &str, src: &Src) -> Result<RawGraph, String> {
    let doc = roxmltree::Document::parse(text).map_err(|e| {
        let p = e.pos();
        src.err(
            Pos {
                line: p.row,
                col: Some(p.col),
            },
            format!("not valid XML: {e}"),
        )
    })?;
    let at = |n: roxmltree::Node| {
        let p = doc.text_pos_at(n.range().start);
        Pos {
            line: p.row,
            col: Some(p.col),
        }
    };
    let root = doc.root_element();
    if root.tag_name().name() != "graphml" {
        return Err(src.err(
            at(root),
            format!(
                "expected a <graphml> document, found <{}>",
                root.tag_name().name()
            ),
        ));
    }
    // Keys: id -> (for, attr.name, default).
    let mut keys: std::collections::BTreeMap<&str, (&str, &str, Option<&str>)> =
        std::collections::BTreeMap::new();
    for k in root.children().filter(|n| is_tag(n, "key")) {
        let Some(id) = k.attribute("id") else {
            return Err(src.err(at(k), "a <key> without an id"));
        };
        let name = k.attribute("attr.name").unwrap_or(id);
        let default = k
            .children()
            .find(|c| is_tag(c, "default"))
            .and_then(|d| d.text());
        keys.insert(id, (k.attribute("for").unwrap_or("all"), name, default));
    }
    let graphs: Vec<_> = root.children().filter(|n| is_tag(n, "graph")).collect();
    let graph = match graphs.as_slice() {
        [g] => *g,
        [] => return Err(src.err(at(root), "no <graph> element")),
        [_, second, ..] => {
            return Err(src.err(
                at(*second),
                "more than one <graph>: give one fabric per file",
            ))
        }
    };
    let mut g = RawGraph {
        declared_only: true,
        ..RawGraph::default()
    };
    // Attribute values of an element: its <data>, over the defaults of keys for its kind.
    let values = |el: roxmltree::Node, kind: &str| -> Result<Vec<(String, String)>, String> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (_, &(for_, name, default)) in keys.iter() {
            if let Some(d) = default {
                if for_ == kind || for_ == "all" {
                    out.push((name.to_string(), d.trim().to_string()));
                }
            }
        }
        for d in el.children().filter(|c| is_tag(c, "data")) {
            let Some(key) = d.attribute("key") else {
                return Err(src.err(at(d), "a <data> without a key"));
            };
            let Some(&(_, name, _)) = keys.get(key) else {
                return Err(src.err(at(d), format!("<data key={key:?}>: no <key> has that id")));
            };
            let v = d.text().unwrap_or("").trim().to_string();
            out.retain(|(n, _)| n != name);
            out.push((name.to_string(), v));
        }
        // Deterministic order (defaults came from a hash map).
        out.sort();
        Ok(out)
    };
    for el in graph.children().filter(|n| n.is_element()) {
        let tag = el.tag_name().name();
        let pos = at(el);
        match tag {
            "node" => {
                let Some(id) = el.attribute("id") else {
                    return Err(src.err(pos, "a <node> without an id"));
                };
                let mut n = RawNode {
                    name: id.to_string(),
                    pos,
                    ..RawNode::default()
                };
                for (k, v) in values(el, "node")? {
                    match k.as_str() {
                        "role" | "host" | "pod" | "group" | "rack" => node_attr(&mut n, &k, &v),
                        // The export's other attributes (id, plane, server, ...) and any other
                        // drawing attributes are not the fabric's: ignored.
                        _ => Ok(()),
                    }
                    .map_err(|m| src.err(pos, format!("<node id={id:?}>: {m}")))?;
                }
                g.nodes.push(n);
            }
            "edge" => {
                let (Some(a), Some(b)) = (el.attribute("source"), el.attribute("target")) else {
                    return Err(src.err(pos, "an <edge> needs source and target"));
                };
                let mut e = RawEdge {
                    a: a.to_string(),
                    b: b.to_string(),
                    pos,
                    ..RawEdge::default()
                };
                for (k, v) in values(el, "edge")? {
                    if EDGE_KEYS.contains(&k.as_str()) {
                        edge_attr(&mut e, &k, &v)
                            .map_err(|m| src.err(pos, format!("<edge {a} -> {b}>: {m}")))?;
                    }
                }
                g.edges.push(e);
            }
            "data" | "desc" => {}
            other => {
                return Err(src.err(
                    pos,
                    format!("<{other}> is not supported here (nodes, edges and data only)"),
                ))
            }
        }
    }
    Ok(g)
}

// -- checks and numbering -----------------------------------------------------------------------

/// The role a role name gives (None: not a known one).
fn role_named(name: &str) -> Option<Role> {
    Some(match name.to_ascii_lowercase().as_str() {
        "host" | "server" | "h" => Role::Host,
        "switch" | "s" | "sw" => Role::Switch,
        "edge" | "tor" => Role::Edge,
        "agg" | "aggregation" => Role::Agg,
        "core" => Role::Core,
        "leaf" => Role::Leaf,
        "spine" => Role::Spine,
        "router" => Role::Router,
        _ => return None,
    })
}

/// The role a node's name implies: `"leaf:3"`, `leaf3`, `leaf_3`, `leaf-3`; `h3` is a host and
/// `s3` a switch (Mininet's names).
fn role_from_name(name: &str) -> Option<Role> {
    let stem = match name.split_once(':') {
        Some((stem, _)) => stem,
        None => name
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .trim_end_matches(['_', '-', '.']),
    };
    role_named(stem)
}

const ROLES: &str = "host (h), switch (s), edge (tor), agg, core, leaf, spine or router";

fn tier_named(name: &str) -> Option<Tier> {
    Some(match name.to_ascii_lowercase().as_str() {
        "host" => Tier::Host,
        "fabric" | "local" => Tier::Fabric,
        "core" => Tier::Core,
        "global" => Tier::Global,
        _ => return None,
    })
}

fn assemble(raw: RawGraph, d: LinkDefaults, src: &Src) -> Result<GraphSpec, String> {
    if raw.nodes.len() > MAX_NODES || raw.edges.len() > MAX_LINKS {
        return Err(src.err(
            Pos::default(),
            format!("too large: at most {MAX_NODES} nodes and {MAX_LINKS} links"),
        ));
    }
    // Nodes in file order (edge lists: then those first named by a link), by name.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut nodes: Vec<RawNode> = Vec::new();
    for n in raw.nodes {
        if let Some(&first) = index.get(&n.name) {
            return Err(src.err(
                n.pos,
                format!(
                    "node {:?} is declared twice (first on line {})",
                    n.name, nodes[first].pos.line
                ),
            ));
        }
        index.insert(n.name.clone(), nodes.len());
        nodes.push(n);
    }
    for e in &raw.edges {
        for end in [&e.a, &e.b] {
            if index.contains_key(end) {
                continue;
            }
            if raw.declared_only {
                return Err(src.err(e.pos, format!("link to {end:?}, which is no <node>")));
            }
            if nodes.len() >= MAX_NODES {
                return Err(src.err(e.pos, format!("too large: more than {MAX_NODES} nodes")));
            }
            index.insert(end.clone(), nodes.len());
            nodes.push(RawNode {
                name: end.clone(),
                pos: e.pos,
                ..RawNode::default()
            });
        }
    }
    let mut roles = Vec::with_capacity(nodes.len());
    for n in &nodes {
        let role = match (&n.role, n.host) {
            (Some(r), _) => role_named(r).ok_or_else(|| {
                let hint = match r.as_str() {
                    "gpu" | "nvswitch" | "nic" => {
                        " (GPU servers are built by [cluster] on a built-in topology kind)"
                    }
                    _ => "",
                };
                src.err(
                    n.pos,
                    format!(
                        "node {:?}: unknown role {r:?}: expected {ROLES}{hint}",
                        n.name
                    ),
                )
            })?,
            (None, Some(true)) => Role::Host,
            (None, Some(false)) => Role::Switch,
            (None, None) => role_from_name(&n.name).ok_or_else(|| {
                src.err(
                    n.pos,
                    format!(
                        "node {:?} has no role: give it one ({ROLES}; an edge list's \
                         `node {} host` line, GraphML's `role` attribute) or name it like \
                         host3 or leaf:0",
                        n.name, n.name
                    ),
                )
            })?,
        };
        roles.push(role);
    }
    // Ids: hosts first, then switches, each in file order.
    let mut id = vec![0u32; nodes.len()];
    let mut next = 0u32;
    for host_pass in [true, false] {
        for (i, r) in roles.iter().enumerate() {
            if (*r == Role::Host) == host_pass {
                id[i] = next;
                next += 1;
            }
        }
    }
    let num_hosts = roles.iter().filter(|r| **r == Role::Host).count() as u32;
    if num_hosts < 2 {
        return Err(src.err(
            Pos::default(),
            format!("a fabric needs at least two hosts, found {num_hosts}"),
        ));
    }
    if num_hosts as usize == nodes.len() {
        return Err(src.err(Pos::default(), "no switch: hosts connect through switches"));
    }
    if num_hosts > 1 << 20 {
        return Err(src.err(Pos::default(), "more than 2^20 hosts"));
    }

    let all_ordered = !raw.edges.is_empty()
        && raw
            .edges
            .iter()
            .all(|e| e.source_port.is_some() && e.target_port.is_some());
    let mut links = Vec::with_capacity(raw.edges.len());
    let mut seen: HashMap<(u32, u32), u32> = HashMap::new();
    for e in &raw.edges {
        let (ia, ib) = (index[&e.a], index[&e.b]);
        let what = format!("link {} - {}", e.a, e.b);
        if ia == ib {
            return Err(src.err(
                e.pos,
                format!("{what}: a self-loop (a link from a node to itself)"),
            ));
        }
        let (a, b) = (id[ia], id[ib]);
        if let Some(line) = seen.insert((a.min(b), a.max(b)), e.pos.line) {
            return Err(src.err(
                e.pos,
                format!(
                    "{what}: a second link between the same two nodes (the first on line {line}); \
                     parallel links are not supported"
                ),
            ));
        }
        let host_link = roles[ia] == Role::Host || roles[ib] == Role::Host;
        if roles[ia] == Role::Host && roles[ib] == Role::Host {
            return Err(src.err(
                e.pos,
                format!("{what}: links two hosts; a host links to a switch"),
            ));
        }
        let (rate_default, delay_default, keys) = if host_link {
            (d.host_rate, d.host_delay, "host_link_rate/host_link_delay")
        } else {
            (
                d.fabric_rate,
                d.fabric_delay,
                "fabric_link_rate/fabric_link_delay",
            )
        };
        let rate = e.rate.or(rate_default).ok_or_else(|| {
            src.err(
                e.pos,
                format!("{what} has no rate: give it a rate attribute (\"100Gbps\") or set topology.{} or topology.link_rate", keys.split('/').next().unwrap_or(keys)),
            )
        })?;
        let delay = e.delay.or(delay_default).ok_or_else(|| {
            src.err(
                e.pos,
                format!("{what} has no delay: give it a delay attribute (\"1us\") or set topology.{} or topology.link_delay", keys.split('/').nth(1).unwrap_or(keys)),
            )
        })?;
        let tier = match &e.tier {
            Some(t) => {
                let tier = tier_named(t).ok_or_else(|| {
                    src.err(
                        e.pos,
                        format!(
                            "{what}: unknown tier {t:?}: expected host, fabric, core or global"
                        ),
                    )
                })?;
                if (tier == Tier::Host) != host_link {
                    return Err(src.err(
                        e.pos,
                        format!(
                            "{what}: tier {t:?} is for {} (host links are tier \"host\")",
                            if host_link {
                                "switch links"
                            } else {
                                "host links"
                            }
                        ),
                    ));
                }
                tier
            }
            None if host_link => Tier::Host,
            None => Tier::Fabric,
        };
        links.push(GraphLink {
            a,
            b,
            spec: LinkSpec {
                rate_bps: rate,
                delay_ps: delay,
            },
            tier,
            order: if all_ordered {
                Some((e.source_port.unwrap_or(0), e.target_port.unwrap_or(0)))
            } else {
                None
            },
        });
    }

    // Renumber the nodes.
    let mut out_nodes: Vec<Option<GraphNode>> = vec![None; nodes.len()];
    for (i, n) in nodes.into_iter().enumerate() {
        out_nodes[id[i] as usize] = Some(GraphNode {
            name: n.name,
            role: roles[i],
            pod: n.pod,
            group: n.group,
            rack: n.rack,
        });
    }
    let out_nodes: Vec<GraphNode> = out_nodes.into_iter().flatten().collect();

    // Every host: exactly one link.
    let mut degree = vec![0u32; out_nodes.len()];
    for l in &links {
        degree[l.a as usize] += 1;
        degree[l.b as usize] += 1;
    }
    for (h, n) in out_nodes.iter().enumerate().take(num_hosts as usize) {
        match degree[h] {
            1 => {}
            0 => return Err(src.err(Pos::default(), format!("host {:?} has no link", n.name))),
            k => {
                return Err(src.err(
                    Pos::default(),
                    format!(
                        "host {:?} has {k} links: a host attaches to one switch (multi-homed \
                         servers: use [cluster] with planes on a built-in topology)",
                        n.name
                    ),
                ))
            }
        }
    }
    // Connected: every node reached from the first switch.
    let mut adj: Vec<Vec<u32>> = vec![Vec::new(); out_nodes.len()];
    for l in &links {
        adj[l.a as usize].push(l.b);
        adj[l.b as usize].push(l.a);
    }
    let mut reached = vec![false; out_nodes.len()];
    let mut stack = vec![num_hosts];
    reached[num_hosts as usize] = true;
    while let Some(u) = stack.pop() {
        for &v in &adj[u as usize] {
            if !reached[v as usize] {
                reached[v as usize] = true;
                stack.push(v);
            }
        }
    }
    if let Some(lost) = reached.iter().position(|r| !r) {
        let count = reached.iter().filter(|r| !**r).count();
        return Err(src.err(
            Pos::default(),
            format!(
                "the graph is not connected: {:?} cannot reach {:?} ({count} of {} nodes are \
                 cut off from it)",
                out_nodes[lost].name,
                out_nodes[num_hosts as usize].name,
                out_nodes.len()
            ),
        ));
    }
    Ok(GraphSpec {
        num_hosts,
        nodes: out_nodes,
        links,
    })
}

// -- the fabric ---------------------------------------------------------------------------------

/// The fabric of a graph: node ids as numbered, each node's ports in link order with host links
/// first, or in the links' port order keys when they have them.
pub fn build(g: &GraphSpec) -> Fabric {
    let n = g.nodes.len();
    // Per node, its link ends: (order key, link index, which end).
    let mut ends: Vec<Vec<(u64, u32, bool)>> = vec![Vec::new(); n];
    for (i, l) in g.links.iter().enumerate() {
        // Without keys: a switch's host links first, by host id (as the built-in builders
        // attach hosts), then its switch links in file order.
        let key = if l.tier == Tier::Host {
            u64::from(l.a.min(l.b))
        } else {
            (1 << 62) | i as u64
        };
        let (ka, kb) = l.order.unwrap_or((key, key));
        ends[l.a as usize].push((ka, i as u32, false));
        ends[l.b as usize].push((kb, i as u32, true));
    }
    let mut port_start: IdVec<NodeId, PortId> = IdVec::with_capacity(n + 1);
    let mut total = 0u32;
    for e in &mut ends {
        e.sort_unstable();
        port_start.push(PortId::new(total));
        total += e.len() as u32;
    }
    port_start.push(PortId::new(total));
    // Port of each link end.
    let mut port_of = vec![[PortId::new(0); 2]; g.links.len()];
    for (node, e) in ends.iter().enumerate() {
        let start = port_start[NodeId::new(node as u32)].get();
        for (j, &(_, li, is_b)) in e.iter().enumerate() {
            port_of[li as usize][is_b as usize] = PortId::new(start + j as u32);
        }
    }
    let mut f = Fabric::unwired(
        g.num_hosts,
        port_start,
        g.nodes.iter().map(|x| x.role).collect(),
    );
    for (l, [pa, pb]) in g.links.iter().zip(&port_of) {
        let (a, b) = (NodeId::new(l.a), NodeId::new(l.b));
        for (p, from, to, peer) in [(*pa, a, b, *pb), (*pb, b, a, *pa)] {
            f.port_node[p] = from;
            f.peer_node[p] = to;
            f.peer_port[p] = peer;
            f.rate_bps[p] = l.spec.rate_bps;
            f.delay_ps[p] = l.spec.delay_ps;
            f.tier[p] = l.tier;
        }
    }
    f
}

/// Lay the graph out through a [`super::FabricBuilder`] (host links as slots, in host order):
/// the same fabric as [`build`] when the links have no port order keys.
pub(super) fn lay_out(b: &mut super::FabricBuilder, g: &GraphSpec) {
    let first = g.num_hosts;
    let mut host_link: Vec<Option<(u32, LinkSpec)>> = vec![None; g.num_hosts as usize];
    for n in &g.nodes[first as usize..] {
        b.add_switches(1, n.role);
    }
    for l in &g.links {
        if l.a < first {
            host_link[l.a as usize] = Some((l.b, l.spec));
        } else if l.b < first {
            host_link[l.b as usize] = Some((l.a, l.spec));
        } else {
            b.link(l.a, l.b, l.spec, l.tier);
        }
    }
    for (sw, spec) in host_link.into_iter().flatten() {
        b.slot(sw, spec);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> LinkDefaults {
        LinkDefaults {
            host_rate: Some(100_000_000_000),
            host_delay: Some(1_000_000),
            fabric_rate: Some(400_000_000_000),
            fabric_delay: Some(1_000_000),
        }
    }

    fn edges(text: &str) -> Result<GraphSpec, String> {
        parse(
            "topology.edges",
            text,
            "t.edges",
            GraphFormat::Edges,
            defaults(),
        )
        .map_err(|e| e.message)
    }

    #[test]
    fn edge_list_roles_order_and_defaults() {
        let g = edges(
            "# a two-switch line\nnode s0 switch\nnode a host pod=1\ns0 s1 rate=200Gbps\n\
             a s0\nhost1 s1 50Gbps 2us\n",
        )
        .unwrap();
        assert_eq!(g.num_hosts, 2);
        let names: Vec<_> = g.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "host1", "s0", "s1"]);
        assert_eq!(g.nodes[0].pod, Some(1));
        assert_eq!(g.nodes[3].role, Role::Switch);
        assert_eq!(g.links[0].spec.rate_bps, 200_000_000_000);
        assert_eq!(g.links[0].spec.delay_ps, 1_000_000, "the fabric default");
        assert_eq!(
            g.links[1].spec.rate_bps, 100_000_000_000,
            "the host default"
        );
        assert_eq!(g.links[2].spec.delay_ps, 2_000_000);
        let f = build(&g);
        // s0's host link comes first though the file lists s0 - s1 first.
        let s0 = NodeId::new(2);
        assert_eq!(f.peer_node[f.ports_of(s0).next().unwrap()], NodeId::new(0));
        for p in f.ports() {
            assert_eq!(f.peer_port[f.peer_port[p]], p);
        }
    }

    #[test]
    fn csv_header_names_columns() {
        let g = edges("source,target,delay,rate\nhost0,leaf0,1us,25Gbps\nhost1,leaf0,1us,25Gbps\n")
            .unwrap();
        assert_eq!(g.links[1].spec.rate_bps, 25_000_000_000);
        assert_eq!(g.nodes[2].role, Role::Leaf);
    }

    #[test]
    fn bad_graphs_say_where_and_what() {
        let cases = [
            (
                "h0 s0\nh1 s0\ns0 s0\n",
                "t.edges:3: link s0 - s0: a self-loop",
            ),
            (
                "h0 s0\nh1 s0\ns1 s0\ns0 s1\n",
                "t.edges:4: link s0 - s1: a second link",
            ),
            ("h0 s0\nh1 s1\n", "not connected"),
            ("h0 s0\nh0 s1\nh1 s1\ns0 s1\n", "host \"h0\" has 2 links"),
            (
                "node x blob\nx s0\n",
                "t.edges:1: node \"x\": unknown role \"blob\"",
            ),
            (
                "h0 s0\nh1 s0\nfoo s0\n",
                "t.edges:3: node \"foo\" has no role",
            ),
            ("h0 h1\nh1 s0\n", "t.edges:1: link h0 - h1: links two hosts"),
            ("h0 s0 100Gbps 1us 7\n", "t.edges:1: unexpected field \"7\""),
            ("h0 s0 fast\n", "t.edges:1: rate: expected a rate"),
            (
                "h0 s0\nh1 s0 tier=core\n",
                "tier \"core\" is for switch links",
            ),
        ];
        for (text, want) in cases {
            let e = edges(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let e = parse(
            "topology.edges",
            "h0 s0\nh1 s0\n",
            "t.edges",
            GraphFormat::Edges,
            LinkDefaults::default(),
        )
        .unwrap_err();
        assert!(
            e.message.contains("t.edges:1: link h0 - s0 has no rate"),
            "{e}"
        );
    }

    #[test]
    fn endless_and_binary_files_are_refused_unread() {
        for path in ["/dev/zero", "/proc/self/environ"] {
            if !Path::new(path).exists() {
                continue;
            }
            let e = read_file(
                "topology.file",
                Path::new(path),
                path,
                Some(GraphFormat::Edges),
                defaults(),
            )
            .unwrap_err();
            assert_eq!(
                e.message,
                format!("{path}: binary data: expected a GraphML or edge-list text file")
            );
        }
    }

    #[test]
    fn graphml_with_keys_defaults_and_errors() {
        let text = r#"<?xml version="1.0"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns">
  <key id="d0" for="node" attr.name="role" attr.type="string"><default>switch</default></key>
  <key id="d1" for="edge" attr.name="rate" attr.type="string"/>
  <key id="d2" for="edge" attr.name="delay_ps" attr.type="long"><default>1000</default></key>
  <graph edgedefault="undirected">
    <node id="s"/>
    <node id="a"><data key="d0">host</data></node>
    <node id="b"><data key="d0">host</data></node>
    <edge source="a" target="s"><data key="d1">10Gbps</data></edge>
    <edge source="s" target="b"/>
  </graph>
</graphml>"#;
        let g = parse(
            "topology.file",
            text,
            "f.graphml",
            GraphFormat::GraphMl,
            defaults(),
        )
        .unwrap();
        assert_eq!(g.num_hosts, 2);
        assert_eq!(g.nodes[2].role, Role::Switch);
        assert_eq!(g.links[0].spec.rate_bps, 10_000_000_000);
        assert_eq!(g.links[1].spec.delay_ps, 1000);
        let bad = text.replace(r#"target="b"/>"#, r#"target="c"/>"#);
        let e = parse(
            "topology.file",
            &bad,
            "f.graphml",
            GraphFormat::GraphMl,
            defaults(),
        )
        .unwrap_err();
        assert!(
            e.message.starts_with("f.graphml:11:5: link to \"c\""),
            "{e}"
        );
        let e = parse(
            "topology.file",
            "<graphml><graph>",
            "f.graphml",
            GraphFormat::GraphMl,
            defaults(),
        )
        .unwrap_err();
        assert!(e.message.starts_with("f.graphml:1:"), "{e}");
        assert!(e.message.contains("not valid XML"), "{e}");
    }
}
