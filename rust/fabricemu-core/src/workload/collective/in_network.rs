//! In-network all-reduce, reduce-scatter and all-gather (`algorithm = "in_network"`, SHARP
//! style; `"nvls"`, NVLink SHARP): the
//! reduction trees over the fabric's switches, the allocation of the switches' reduction contexts
//! to communicators, the flows of a call, and the predicted (idle-fabric) time of a call.
//!
//! A call is one flow per rank from the rank to itself, of the call's S bytes: its data packets go
//! up the rank's tree (the switches combine them, `engine::in_network`) and the result comes back
//! down to the rank as that flow's packets, which the rank acknowledges to itself like any flow's
//! (so the existing loss recovery repairs a lost operand or result).
//!
//! Reduce-scatter and all-gather use the same flows and trees; only packet sizes differ (the
//! engine, `engine::in_network`). Packet k of S's P packets belongs to rank `k * n / P` (its
//! shard, about S/n). Reduce-scatter: every rank sends S up; the result of packet k goes down
//! in full only toward its owner, and to every other rank as its header alone (the notice that
//! completes the rank's flow). All-gather: a rank sends its own shard's packets in full and the
//! others as headers (the per-sequence barrier of the tree); a switch forwards packet k up in
//! full when its owner is below it, and the root multicasts S down to every rank.
//!
//! The tree (documented in docs/in-network.md): the ranks' first switches are its leaves (for
//! `nvls`, the domain's NVSwitch is the whole tree); the root is a switch of the lowest tier that
//! reaches every leaf over down-links through switches with an engine and a free context, the one
//! with the most free contexts (then the lowest id); each switch's parent is the one it was first
//! reached from in a breadth-first search down from the root, over ports in order.
//!
//! Contexts belong to a communicator (the same hosts in the same workload) for the whole run, as
//! SHARP allocates its resources when a communicator is created; a communicator whose tree finds
//! no free context falls back to the flat ring (or fails the build, `on_exhausted = "error"`).
//! With `on_exhausted = "wait"` the build still spreads communicators over free contexts, but
//! one that finds none gets the tree it would have with every context free (`Tree::waits`), and
//! at run time every communicator takes its tree's contexts when its first call starts and
//! gives them back when its last call ends; a call that finds them taken waits
//! (`engine::in_network`). The
//! calls of one communicator take turns on its tree (a call waits for the previous one's ranks).

use std::collections::{HashMap, VecDeque};

use super::Transfer;
use crate::config::{CollectiveAlgorithm, CollectiveOp, ScenarioError};
use crate::ids::{NodeId, PortId};
use crate::switch::reduction::{OnExhausted, ReductionSpec, MAX_CHILDREN};
use crate::topology::{Fabric, Role};
use crate::units::{serialisation_ps, Time};

/// One child of a tree node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Child {
    /// The node's port toward the child (the result goes down it).
    pub down: PortId,
    /// The child's port toward the node (its operands come up it).
    pub up: PortId,
    /// The rank, when the child is a rank's host.
    pub rank: Option<u32>,
}

/// One switch of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeNode {
    pub switch: NodeId,
    /// Its port toward its parent (None at the root).
    pub parent: Option<PortId>,
    pub children: Vec<Child>,
    /// Operand bytes per second its engine combines.
    pub throughput_bps: u64,
}

/// A reduction tree: switches, root first (every parent before its children).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    pub nodes: Vec<TreeNode>,
    /// Per rank: its host.
    pub hosts: Vec<u32>,
    /// Per rank: the host's port up to its leaf.
    pub up_ports: Vec<PortId>,
    /// Packets a rank may send beyond its last result (the smallest context window on the tree).
    pub window_packets: u32,
    /// Placed on contexts other communicators hold (`on_exhausted = "wait"`): its calls wait
    /// for them at run time.
    pub waits: bool,
}

impl Tree {
    /// Levels of switches from a leaf up to the root (the deepest leaf).
    pub fn depth(&self) -> u32 {
        let mut depth = vec![1u32; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for c in &n.children {
                if c.rank.is_none() {
                    if let Some(j) = self.nodes.iter().position(|m| m.parent == Some(c.up)) {
                        depth[j] = depth[i] + 1;
                    }
                }
            }
        }
        depth.into_iter().max().unwrap_or(1)
    }
}

/// One call: the tree it runs on and its flows (one per rank, in rank order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub tree: u32,
    pub flows: Vec<u32>,
    /// All-reduce, reduce-scatter or all-gather.
    pub op: CollectiveOp,
}

/// The build's view of the reduction engines: free contexts, communicators, trees and calls.
#[derive(Clone)]
pub struct InNetworkPlan {
    fabric: Fabric,
    spec: ReductionSpec,
    free: Vec<u32>,
    comms: HashMap<(u32, Vec<u32>, bool), Option<u32>>,
    pub trees: Vec<Tree>,
    pub calls: Vec<Call>,
    /// Calls that ran the flat ring because their communicator found no free context.
    pub fallbacks: u64,
    /// Switch contexts allocated (one per tree switch).
    pub contexts_used: u64,
    /// One line per communicator that fell back (run.json warnings).
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for InNetworkPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InNetworkPlan")
            .field("trees", &self.trees)
            .field("calls", &self.calls)
            .field("fallbacks", &self.fallbacks)
            .finish()
    }
}

impl PartialEq for InNetworkPlan {
    fn eq(&self, o: &Self) -> bool {
        self.trees == o.trees && self.calls == o.calls && self.fallbacks == o.fallbacks
    }
}

/// The transfers of one in-network call: every rank "sends" S bytes to itself through the tree.
pub fn transfers(n: usize, size: u64) -> Vec<Transfer> {
    (0..n as u32)
        .map(|r| Transfer {
            src: r,
            dst: r,
            bytes: size,
            inputs: Vec::new(),
            step: 0,
            delay: 0,
            phase: 0,
        })
        .collect()
}

/// The predicted time of an in-network all-reduce of `size` bytes on an idle fabric (for a
/// policy choosing among algorithms): every rank puts S bytes (in `mtu`-byte packets with a
/// `header` each) on its link at `rate_bps` while the tree pipelines them, so the call takes the
/// serialisation of S, plus one packet's store-and-forward per hop up and down the tree
/// (`2 x depth` switch hops and the two host links: `hop_ps` each, propagation plus switch
/// latency) and its serialisation on each of those links. Ring's counterpart moves
/// 2(n-1)/n x S per rank.
pub fn ideal_time(
    size: u64,
    mtu: u64,
    header: u64,
    rate_bps: u64,
    depth: u32,
    hop_ps: Time,
) -> Time {
    let packets = size.div_ceil(mtu.max(1));
    let wire = size + packets * header;
    let packet = mtu.min(size) + header;
    let hops = 2 * depth as u64;
    serialisation_ps(wire, rate_bps) + hops * (serialisation_ps(packet, rate_bps) + hop_ps)
}

impl InNetworkPlan {
    pub fn new(fabric: &Fabric, spec: &ReductionSpec) -> Self {
        let free = fabric
            .nodes()
            .map(|n| spec.engine(fabric.role[n]).map_or(0, |e| e.contexts))
            .collect();
        InNetworkPlan {
            fabric: fabric.clone(),
            spec: *spec,
            free,
            comms: HashMap::new(),
            trees: Vec::new(),
            calls: Vec::new(),
            fallbacks: 0,
            contexts_used: 0,
            warnings: Vec::new(),
        }
    }

    /// The tree a call of `workload` on `hosts` runs on (None: it falls back to the ring). The
    /// first call of a communicator allocates its contexts.
    pub fn place(
        &mut self,
        workload: u32,
        hosts: &[u32],
        algorithm: CollectiveAlgorithm,
    ) -> Result<Option<u32>, ScenarioError> {
        let nvls = algorithm == CollectiveAlgorithm::Nvls;
        let mut key_hosts = hosts.to_vec();
        key_hosts.sort_unstable();
        let key = (workload, key_hosts, nvls);
        if let Some(&t) = self.comms.get(&key) {
            if t.is_none() {
                self.fallbacks += 1;
            }
            return Ok(t);
        }
        let tree = self.build_tree(hosts, nvls)?;
        if tree.is_none() && self.spec.on_exhausted == OnExhausted::Wait {
            // The tree as if every engine's contexts were free: its calls wait at run time
            // until the switches' contexts are released.
            let full = self.capacity();
            let free = std::mem::replace(&mut self.free, full);
            let shared = self.build_tree(hosts, nvls);
            self.free = free;
            let tree = shared?.map(|mut t| {
                t.waits = true;
                t
            });
            let placed = tree.map(|t| {
                self.trees.push(t);
                self.trees.len() as u32 - 1
            });
            if placed.is_none() {
                self.fallbacks += 1;
                self.warnings.push(format!(
                    "workload {workload}: the {} communicator of hosts {hosts:?} has no tree of \
                     switches with reduction engines: its calls run algorithm \"ring\"",
                    algorithm.name()
                ));
            }
            self.comms.insert(key, placed);
            return Ok(placed);
        }
        let placed = match tree {
            Some(tree) => {
                for n in &tree.nodes {
                    self.free[n.switch.index()] -= 1;
                }
                self.contexts_used += tree.nodes.len() as u64;
                self.trees.push(tree);
                Some(self.trees.len() as u32 - 1)
            }
            None => {
                let msg = format!(
                    "workload {workload}: the {} communicator of hosts {hosts:?} found no free \
                     reduction context on its tree",
                    algorithm.name()
                );
                if self.spec.on_exhausted == OnExhausted::Error {
                    return Err(ScenarioError::at(
                        "switch.reduction.on_exhausted",
                        format!(
                            "{msg} (on_exhausted = \"error\"; raise switch.reduction.contexts or \
                             allow the ring fallback with on_exhausted = \"ring\")"
                        ),
                    ));
                }
                let msg = format!("{msg}: its calls run algorithm \"ring\"");
                self.warnings.push(msg);
                self.fallbacks += 1;
                None
            }
        };
        self.comms.insert(key, placed);
        Ok(placed)
    }

    /// The tree a call of `workload` on `hosts` chosen live would run on, without placing it:
    /// the communicator's tree if it has one, else the tree its switches' free contexts allow
    /// now (None: no free context on a tree, or the hosts cannot form one).
    pub fn live_tree(
        &self,
        workload: u32,
        hosts: &[u32],
        algorithm: CollectiveAlgorithm,
    ) -> Option<std::borrow::Cow<'_, Tree>> {
        if let Some(t) = self.comm_tree(workload, hosts, algorithm) {
            return Some(std::borrow::Cow::Borrowed(&self.trees[t as usize]));
        }
        let nvls = algorithm == CollectiveAlgorithm::Nvls;
        self.build_tree(hosts, nvls)
            .ok()
            .flatten()
            .map(std::borrow::Cow::Owned)
    }

    fn comm_tree(
        &self,
        workload: u32,
        hosts: &[u32],
        algorithm: CollectiveAlgorithm,
    ) -> Option<u32> {
        let mut key_hosts = hosts.to_vec();
        key_hosts.sort_unstable();
        let key = (workload, key_hosts, algorithm == CollectiveAlgorithm::Nvls);
        self.comms.get(&key).copied().flatten()
    }

    /// Place a call of `workload` on `hosts` chosen live (a controller's `set_algorithm`): the
    /// communicator's tree, or a new one whose contexts it holds from now on. Ok(None): no free
    /// context on a tree now (nothing changed, no fallback counted); Err: the hosts cannot form
    /// a tree (the message says why).
    pub fn place_live(
        &mut self,
        workload: u32,
        hosts: &[u32],
        algorithm: CollectiveAlgorithm,
    ) -> Result<Option<u32>, String> {
        if let Some(t) = self.comm_tree(workload, hosts, algorithm) {
            return Ok(Some(t));
        }
        let nvls = algorithm == CollectiveAlgorithm::Nvls;
        let Some(tree) = self.build_tree(hosts, nvls).map_err(|e| e.message)? else {
            return Ok(None);
        };
        for n in &tree.nodes {
            self.free[n.switch.index()] -= 1;
        }
        self.contexts_used += tree.nodes.len() as u64;
        self.trees.push(tree);
        let t = self.trees.len() as u32 - 1;
        let mut key_hosts = hosts.to_vec();
        key_hosts.sort_unstable();
        self.comms.insert((workload, key_hosts, nvls), Some(t));
        Ok(Some(t))
    }

    /// Record a call of `op` on `tree` whose flows (one per rank, rank order) are `flows`.
    pub fn add_call(&mut self, tree: u32, flows: Vec<u32>, op: CollectiveOp) {
        self.calls.push(Call { tree, flows, op });
    }

    /// Take back the call recorded last.
    pub fn pop_call(&mut self) {
        self.calls.pop();
    }

    fn engine_bps(&self, n: NodeId) -> Option<u64> {
        let e = self.spec.engine(self.fabric.role[n])?;
        Some(e.throughput_bps.unwrap_or_else(|| {
            self.fabric
                .ports_of(n)
                .map(|p| self.fabric.rate_bps[p])
                .sum()
        }))
    }

    /// Every switch's contexts (none without an engine).
    fn capacity(&self) -> Vec<u32> {
        self.fabric
            .nodes()
            .map(|n| {
                self.spec
                    .engine(self.fabric.role[n])
                    .map_or(0, |e| e.contexts)
            })
            .collect()
    }

    /// Whether calls wait for free contexts at run time (`on_exhausted = "wait"`).
    pub fn waits(&self) -> bool {
        self.spec.on_exhausted == OnExhausted::Wait
    }

    /// Every switch's contexts (the run-time pool of `on_exhausted = "wait"`).
    pub fn contexts(&self) -> Vec<u32> {
        self.capacity()
    }

    fn has_context(&self, n: NodeId) -> bool {
        self.free[n.index()] > 0
    }

    /// A rank's port to its first switch (in a cluster: its NIC's leaf, or for NVLS its
    /// NVSwitch).
    fn up_port(&self, host: u32, nvls: bool) -> Result<PortId, ScenarioError> {
        let f = &self.fabric;
        let h = NodeId::new(host);
        for p in f.ports_of(h) {
            let role = f.role[f.peer_node[p]];
            match (nvls, role) {
                (true, Role::NvSwitch) => return Ok(p),
                (false, Role::NvSwitch) => {}
                (false, Role::Nic) => {
                    return Err(ScenarioError::at(
                        "switch.reduction",
                        format!(
                            "host {host} reaches the fabric through a shared NIC: algorithm \
                             \"in_network\" is modelled for GPUs with NICs of their own"
                        ),
                    ))
                }
                (false, _) => return Ok(p),
                (true, _) => {}
            }
        }
        Err(ScenarioError::at(
            "switch.reduction",
            if nvls {
                format!("host {host} is in no scale-up domain: algorithm \"nvls\" needs one")
            } else {
                format!("host {host} has no port to a scale-out switch")
            },
        ))
    }

    fn build_tree(&self, hosts: &[u32], nvls: bool) -> Result<Option<Tree>, ScenarioError> {
        let f = &self.fabric;
        let up_ports: Vec<PortId> = hosts
            .iter()
            .map(|&h| self.up_port(h, nvls))
            .collect::<Result<_, _>>()?;
        let mut leaves: Vec<NodeId> = up_ports.iter().map(|&p| f.peer_node[p]).collect();
        leaves.sort_unstable();
        leaves.dedup();
        if nvls && leaves.len() > 1 {
            return Err(ScenarioError::at(
                "switch.reduction",
                format!(
                    "algorithm \"nvls\" reduces in one scale-up domain's NVSwitch: hosts {hosts:?} \
                     span {} domains (use \"in_network\" or \"hierarchical_ring\")",
                    leaves.len()
                ),
            ));
        }
        if leaves
            .iter()
            .any(|&l| self.engine_bps(l).is_none() || !self.has_context(l))
        {
            return Ok(None);
        }
        // The root: the lowest tier that reaches every leaf; most free contexts, then lowest id.
        let leaf_tier = leaves
            .iter()
            .map(|&l| f.role[l].tier_rank())
            .max()
            .unwrap_or(1);
        let mut parent_of: Option<HashMap<NodeId, PortId>> = None;
        let mut root = leaves[0];
        if leaves.len() > 1 {
            'tiers: for tier in leaf_tier + 1..=3 {
                let mut candidates: Vec<NodeId> = f
                    .switches()
                    .filter(|&n| {
                        f.role[n].tier_rank() == tier
                            && self.engine_bps(n).is_some()
                            && self.has_context(n)
                    })
                    .collect();
                candidates.sort_by_key(|&n| (std::cmp::Reverse(self.free[n.index()]), n));
                for r in candidates {
                    let parents = self.down_search(r);
                    if leaves.iter().all(|l| parents.contains_key(l)) {
                        root = r;
                        parent_of = Some(parents);
                        break 'tiers;
                    }
                }
            }
            if parent_of.is_none() {
                return Ok(None);
            }
        }
        let parents = parent_of.unwrap_or_default();
        // The switches on the leaves' paths to the root, parents before children.
        let mut order: Vec<NodeId> = vec![root];
        let mut index: HashMap<NodeId, usize> = HashMap::from([(root, 0)]);
        let mut paths: Vec<Vec<NodeId>> = Vec::new();
        for &l in &leaves {
            let mut path = vec![l];
            let mut n = l;
            while n != root {
                let up = parents[&n];
                n = f.peer_node[up];
                path.push(n);
            }
            paths.push(path);
        }
        // Breadth first from the root: sort the tree's switches by distance to the root.
        let mut all: Vec<(usize, NodeId)> = paths
            .iter()
            .flat_map(|p| {
                let len = p.len();
                p.iter().enumerate().map(move |(i, &n)| (len - 1 - i, n))
            })
            .collect();
        all.sort_unstable();
        all.dedup();
        for (_, n) in all {
            if let std::collections::hash_map::Entry::Vacant(e) = index.entry(n) {
                e.insert(order.len());
                order.push(n);
            }
        }
        let mut nodes: Vec<TreeNode> = order
            .iter()
            .map(|&n| TreeNode {
                switch: n,
                parent: (n != root).then(|| parents[&n]),
                children: Vec::new(),
                throughput_bps: self.engine_bps(n).expect("checked"),
            })
            .collect();
        for i in 1..nodes.len() {
            let up = nodes[i].parent.expect("not the root");
            let parent = index[&f.peer_node[up]];
            nodes[parent].children.push(Child {
                down: f.peer_port[up],
                up,
                rank: None,
            });
        }
        for (r, &p) in up_ports.iter().enumerate() {
            let leaf = index[&f.peer_node[p]];
            nodes[leaf].children.push(Child {
                down: f.peer_port[p],
                up: p,
                rank: Some(r as u32),
            });
        }
        if let Some(n) = nodes.iter().find(|n| n.children.len() > MAX_CHILDREN) {
            return Err(ScenarioError::at(
                "switch.reduction",
                format!(
                    "switch {} would combine {} children in one reduction tree (at most \
                     {MAX_CHILDREN})",
                    n.switch,
                    n.children.len()
                ),
            ));
        }
        let window_packets = nodes
            .iter()
            .map(|n| {
                self.spec
                    .engine(f.role[n.switch])
                    .expect("checked")
                    .window_packets
            })
            .min()
            .unwrap_or(1);
        Ok(Some(Tree {
            nodes,
            hosts: hosts.to_vec(),
            up_ports,
            window_packets,
            waits: false,
        }))
    }

    /// Breadth first down from `root` through switches with an engine and a free context: each
    /// switch reached, with its port up to the switch it was first reached from.
    fn down_search(&self, root: NodeId) -> HashMap<NodeId, PortId> {
        let f = &self.fabric;
        let mut parents = HashMap::new();
        let mut queue = VecDeque::from([root]);
        while let Some(u) = queue.pop_front() {
            let tier = f.role[u].tier_rank();
            for p in f.ports_of(u) {
                let v = f.peer_node[p];
                if f.is_host(v)
                    || v == root
                    || parents.contains_key(&v)
                    || f.role[v].tier_rank() >= tier
                    || self.engine_bps(v).is_none()
                    || !self.has_context(v)
                {
                    continue;
                }
                parents.insert(v, f.peer_port[p]);
                queue.push_back(v);
            }
        }
        parents
    }
}

/// The tree a call of `workload` on `hosts` runs on (None: the flat ring); an error without
/// `[switch.reduction]`.
pub fn place(
    plan: &mut crate::workload::FlowPlan,
    workload: u32,
    hosts: &[u32],
    algorithm: CollectiveAlgorithm,
) -> Result<Option<u32>, ScenarioError> {
    let Some(inr) = plan.in_network.as_deref_mut() else {
        return Err(ScenarioError::at(
            "switch.reduction",
            format!(
                "missing: algorithm = \"{}\" (workload {workload}) needs switches with reduction \
                 engines: add a [switch.reduction] table",
                algorithm.name()
            ),
        ));
    };
    inr.place(workload, hosts, algorithm)
}

/// Record a call of `op` on `tree` whose flows (one per rank of `hosts`, in that order) start
/// at `first_flow`; the call's flows are kept in the tree's rank order (a communicator's calls
/// may list its hosts in another order).
pub fn add_call(
    plan: &mut crate::workload::FlowPlan,
    tree: u32,
    first_flow: u32,
    hosts: &[u32],
    op: CollectiveOp,
) {
    let inr = plan.in_network.as_deref_mut().expect("placed");
    let flows = inr.trees[tree as usize]
        .hosts
        .iter()
        .map(|h| {
            let k = hosts.iter().position(|x| x == h).expect("the same hosts");
            first_flow + k as u32
        })
        .collect();
    inr.add_call(tree, flows, op);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ideal_time_is_one_buffer_plus_the_tree_round_trip() {
        // 1 MiB in 4 KiB packets with 62 B headers at 100 Gb/s, a 2-level tree, 1 us per hop.
        let t = ideal_time(1 << 20, 4096, 62, 100_000_000_000, 2, 1_000_000);
        let wire = (1u64 << 20) + 256 * 62;
        let ser = wire * 80; // 80 ps per byte at 100 Gb/s
        assert_eq!(t, ser + 4 * (4158 * 80 + 1_000_000));
    }
}
