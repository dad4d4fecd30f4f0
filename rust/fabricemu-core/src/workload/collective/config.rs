//! `kind = "collective"`: its keys and checks, producing a [`CollectiveSpec`].

use serde::{Deserialize, Serialize};

use super::super::config::{start_of, Context, MAX_WORKLOAD_FLOWS};
use crate::config::check::{count, quoted_list, within_time_range, Res};
use crate::config::hosts::{Hosts, Layout};
use crate::config::values::{Duration, Size};
use crate::config::{
    CollectiveAlgorithm, CollectiveOp, CollectiveSpec, RankPlacement, ScenarioError,
};
use crate::rng::RngStream;

/// How `hosts` split into groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupLayout {
    /// Consecutive hosts form a group.
    Block,
    /// Every m-th host (rail-aligned).
    Strided,
}

/// Which host runs which rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RankOrder {
    /// Ranks in the order of `hosts`.
    Hosts,
    /// A seeded random placement.
    Shuffled,
}

/// `kind = "collective"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectiveFile {
    /// Optional label carried into flows.arrow (defaults to `kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Size>,
    /// Host ids and selectors (`"server:3"`, `"rack:1"`, `"rail:2"`); default: every host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Hosts>,
    /// `all_reduce`, `all_gather`, `reduce_scatter` or `all_to_all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<CollectiveOp>,
    /// `ring`, `tree`, `halving_doubling`, `hierarchical_ring`, `hierarchical_tree` (all-reduce
    /// family; all-gather and reduce-scatter: `ring`, `halving_doubling`, `hierarchical_ring`);
    /// `direct`, `pairwise`, `pxn` (all-to-all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<CollectiveAlgorithm>,
    /// Explicit groups in rank order (each a list of host ids and selectors, or one selector),
    /// each running the collective at the same time; or a layout of a `[cluster]`: `"servers"`,
    /// `"racks"`, `"rails"` (one group per server, rack or rail index, of `hosts` if given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups: Option<GroupsValue>,
    /// Split `hosts` into groups of this many ranks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_size: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_layout: Option<GroupLayout>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_order: Option<RankOrder>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<i64>,
    /// Compute time between the end of an iteration and the start of the next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_gap: Option<Duration>,
    /// Tree: the pipeline chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<Size>,
    /// Hosts per scale-up domain (host h is in domain h / domain_size): transfers inside a domain
    /// are on the scale-up tier, and the hierarchical algorithms are built from the domains.
    /// Default: the `[cluster]` scale-up domain's GPUs (none without one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain_size: Option<i64>,
}

/// `groups`: explicit groups, or a layout of the cluster (`"servers"`, `"racks"`, `"rails"`).
#[derive(Debug, Clone, PartialEq)]
pub enum GroupsValue {
    Layout(Layout),
    List(Vec<Hosts>),
}

impl Serialize for GroupsValue {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            GroupsValue::Layout(l) => l.serialize(s),
            GroupsValue::List(groups) => groups.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for GroupsValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<GroupsValue, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = GroupsValue;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"servers\", \"racks\", \"rails\" or a list of groups")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<GroupsValue, E> {
                match v {
                    "servers" => Ok(GroupsValue::Layout(Layout::Servers)),
                    "racks" => Ok(GroupsValue::Layout(Layout::Racks)),
                    "rails" => Ok(GroupsValue::Layout(Layout::Rails)),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<GroupsValue, A::Error> {
                let mut groups = Vec::new();
                while let Some(g) = seq.next_element::<Hosts>()? {
                    groups.push(g);
                }
                Ok(GroupsValue::List(groups))
            }
        }
        d.deserialize_any(V)
    }
}

/// The algorithms of `op` (the first is the default).
pub fn algorithms(op: CollectiveOp) -> &'static [CollectiveAlgorithm] {
    use CollectiveAlgorithm as A;
    match op {
        CollectiveOp::AllReduce => &[
            A::Ring,
            A::Tree,
            A::HalvingDoubling,
            A::HierarchicalRing,
            A::HierarchicalTree,
            A::InNetwork,
            A::Nvls,
        ],
        CollectiveOp::AllGather | CollectiveOp::ReduceScatter => &[
            A::Ring,
            A::HalvingDoubling,
            A::HierarchicalRing,
            A::InNetwork,
            A::Nvls,
        ],
        CollectiveOp::AllToAll => &[A::Direct, A::Pairwise, A::Pxn],
    }
}

impl RankPlacement {
    /// Groups of `group_size` ranks from `hosts` in order (block) or every m-th (strided).
    pub fn groups(&self, hosts: &[u32]) -> Vec<Vec<u32>> {
        let group_size = self.group_size as usize;
        if self.strided {
            let m = hosts.len() / group_size;
            (0..m)
                .map(|j| (0..group_size).map(|r| hosts[j + r * m]).collect())
                .collect()
        } else {
            hosts.chunks(group_size).map(<[u32]>::to_vec).collect()
        }
    }

    /// The groups of collective workload `index`, ranks placed by a seeded shuffle of the hosts.
    pub fn shuffled_groups(&self, seed: u64, index: usize) -> Vec<Vec<u32>> {
        let mut hosts = self.hosts.clone();
        RngStream::CollectiveRanks(index)
            .rng(seed)
            .shuffle(&mut hosts);
        self.groups(&hosts)
    }
}

impl CollectiveFile {
    /// With every default written out (see `WorkloadFile::normalised`): op, algorithm, size,
    /// iterations, compute gap, start, a pipelined algorithm's chunk, the scale-up domain size;
    /// without explicit `groups`, the group size, layout and rank order (one group of every host
    /// by default). Hosts and explicit groups as written.
    pub fn normalised(&self, name: Option<String>, s: &CollectiveSpec) -> CollectiveFile {
        let pipelined = matches!(
            s.algorithm,
            CollectiveAlgorithm::Tree | CollectiveAlgorithm::HierarchicalTree
        );
        let split = self.groups.is_none();
        let group_size = s
            .shuffle
            .as_ref()
            .map(|p| p.group_size)
            .or_else(|| s.groups.first().map(|g| g.len() as u32));
        CollectiveFile {
            name,
            start: Some(Duration(s.start_ps)),
            size: Some(Size(s.size_bytes)),
            hosts: self.hosts.clone(),
            op: Some(s.op),
            algorithm: Some(s.algorithm),
            groups: self.groups.clone(),
            group_size: if split {
                group_size.map(|g| g as i64)
            } else {
                None
            },
            group_layout: split.then(|| self.group_layout.unwrap_or(GroupLayout::Block)),
            rank_order: split.then(|| self.rank_order.unwrap_or(RankOrder::Hosts)),
            iterations: Some(s.iterations as i64),
            compute_gap: Some(Duration(s.compute_gap_ps)),
            chunk_size: pipelined.then_some(Size(s.chunk_bytes)),
            domain_size: s.domain_size.map(|d| d as i64),
        }
    }

    pub fn validate(&self, ctx: &Context) -> Res<CollectiveSpec> {
        let p = |key: &str| ctx.path(key);
        let op = self.op.ok_or_else(|| {
            ScenarioError::at(
                p("op"),
                "missing: expected one of \"all_reduce\", \"all_gather\", \"reduce_scatter\", \"all_to_all\"",
            )
        })?;
        let choices = algorithms(op);
        let algorithm = self.algorithm.unwrap_or(choices[0]);
        if !choices.contains(&algorithm) {
            let names: Vec<&str> = choices.iter().map(|a| a.name()).collect();
            return Err(ScenarioError::at(
                p("algorithm"),
                format!(
                    "expected one of {} for op = \"{}\", found {:?}",
                    quoted_list(&names),
                    op.name(),
                    algorithm.name()
                ),
            ));
        }
        let (groups, shuffle) = self.groups(ctx)?;
        let size_bytes = match self.size {
            None => {
                return Err(ScenarioError::at(
                    p("size"),
                    "missing: expected the collective's size like \"64MiB\"",
                ))
            }
            Some(s) => s.0,
        };
        let max_ranks = groups.iter().map(Vec::len).max().unwrap_or(0) as u64;
        if size_bytes < max_ranks {
            return Err(ScenarioError::at(
                p("size"),
                format!(
                    "expected at least one byte per rank ({max_ranks} B), found {size_bytes} B"
                ),
            ));
        }
        if algorithm == CollectiveAlgorithm::HalvingDoubling && op != CollectiveOp::AllReduce {
            if let Some(g) = groups.iter().position(|g| !g.len().is_power_of_two()) {
                return Err(ScenarioError::at(
                    p("algorithm"),
                    format!(
                        "halving_doubling {} needs a power-of-two group; group {g} has {} ranks (use ring)",
                        op.name(),
                        groups[g].len()
                    ),
                ));
            }
        }
        let iterations = count(
            &p("iterations"),
            Some(self.iterations.unwrap_or(1)),
            1,
            1_000_000,
            "a number of iterations",
        )?;
        let domain_size = match self.domain_size {
            // GPUs are numbered server-major: GPU g is in scale-up domain g / gpus.
            None => ctx.scaleup_gpus,
            Some(d) => Some(count(
                &p("domain_size"),
                Some(d),
                1,
                ctx.n_hosts.max(1) as i64,
                "a number of hosts per scale-up domain",
            )?),
        };
        if algorithm.is_hierarchical() {
            self.check_domains(ctx, algorithm, &groups, domain_size)?;
        }
        let pipelined = matches!(
            algorithm,
            CollectiveAlgorithm::Tree | CollectiveAlgorithm::HierarchicalTree
        );
        let chunk_bytes = match (self.chunk_size, algorithm) {
            (Some(_), _) if !pipelined => {
                return Err(ScenarioError::at(
                    p("chunk_size"),
                    "only algorithm = \"tree\" or \"hierarchical_tree\" is pipelined in chunks",
                ))
            }
            (Some(c), _) if c.0 == 0 => {
                return Err(ScenarioError::at(
                    p("chunk_size"),
                    "expected a positive size",
                ))
            }
            (Some(c), _) => c.0,
            (None, _) => super::DEFAULT_TREE_CHUNK,
        };
        let compute_gap_ps = self.compute_gap.map(|d| d.0).unwrap_or(0);
        within_time_range(
            &p("compute_gap"),
            compute_gap_ps,
            iterations - 1,
            "iterations",
        )?;
        let spec = CollectiveSpec {
            op,
            algorithm,
            groups,
            shuffle,
            size_bytes,
            iterations,
            compute_gap_ps,
            start_ps: start_of(self.start),
            chunk_bytes,
            chunk_interval_ps: super::chunk_interval(
                chunk_bytes,
                ctx.mtu_bytes,
                ctx.header_bytes,
                ctx.host_rate_bps,
            ),
            domain_size,
        };
        let flows = super::flows_per_iteration(&spec) as f64 * iterations as f64;
        if flows > MAX_WORKLOAD_FLOWS {
            return Err(ScenarioError::at(
                p(if iterations > 1 { "iterations" } else { "size" }),
                format!(
                    "this would generate {flows:.3e} flows (at most {MAX_WORKLOAD_FLOWS:.0e}): fewer \
                     iterations{}",
                    if pipelined {
                        " or a larger chunk_size"
                    } else {
                        ""
                    }
                ),
            ));
        }
        Ok(spec)
    }

    /// A hierarchical algorithm needs the scale-up domains, a placement that keeps them, and the
    /// same number of ranks in every domain a group touches.
    fn check_domains(
        &self,
        ctx: &Context,
        algorithm: CollectiveAlgorithm,
        groups: &[Vec<u32>],
        domain_size: Option<u32>,
    ) -> Res<()> {
        let p = |key: &str| ctx.path(key);
        let Some(size) = domain_size else {
            return Err(ScenarioError::at(
                p("domain_size"),
                format!(
                    "missing: algorithm = \"{}\" is built from scale-up domains: give the hosts per \
                     domain (host h is in domain h / domain_size), e.g. the hosts under one leaf, \
                     or a [cluster] with a scale-up domain",
                    algorithm.name()
                ),
            ));
        };
        if self.rank_order == Some(RankOrder::Shuffled) {
            return Err(ScenarioError::at(
                p("rank_order"),
                format!(
                    "algorithm = \"{}\" places ranks by scale-up domain; a shuffled placement \
                     would break the domains apart (leave out rank_order)",
                    algorithm.name()
                ),
            ));
        }
        for (g, hosts) in groups.iter().enumerate() {
            let dom = super::Domains::of(&hosts.iter().map(|&h| h / size).collect::<Vec<_>>());
            if !dom.is_regular() {
                let first = &dom.ranks[0];
                let other = dom
                    .ranks
                    .iter()
                    .find(|d| d.len() != first.len())
                    .expect("irregular");
                return Err(ScenarioError::at(
                    p("domain_size"),
                    format!(
                        "group {g} has {} ranks in the scale-up domain of host {} but {} in that of \
                         host {}: algorithm = \"{}\" needs as many ranks in every domain",
                        first.len(),
                        hosts[first[0] as usize],
                        other.len(),
                        hosts[other[0] as usize],
                        algorithm.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `groups = "servers" | "racks" | "rails"`: one group per server, rack or rail index (of
    /// `hosts` when given: each group keeps the hosts of `hosts` in it, in GPU order).
    fn layout_groups(&self, ctx: &Context, layout: Layout) -> Res<Vec<Vec<u32>>> {
        let p = |key: &str| ctx.path(key);
        let Some(cluster) = &ctx.groups else {
            return Err(ScenarioError::at(
                p("groups"),
                format!(
                    "groups = \"{}\" needs a [cluster] section: without one there are no \
                     servers, racks or rails (give the groups' host ids)",
                    layout.name()
                ),
            ));
        };
        for (key, set) in [
            ("group_size", self.group_size.is_some()),
            ("group_layout", self.group_layout.is_some()),
            ("rank_order", self.rank_order.is_some()),
        ] {
            if set {
                return Err(ScenarioError::at(
                    p(key),
                    format!(
                        "groups = \"{}\" gives every group and its rank order: leave out this key",
                        layout.name()
                    ),
                ));
            }
        }
        let mut keep = vec![self.hosts.is_none(); ctx.n_hosts as usize];
        if self.hosts.is_some() {
            for h in ctx.hosts_or_all("hosts", self.hosts.as_ref(), "a collective")? {
                keep[h as usize] = true;
            }
        }
        let mut groups = Vec::new();
        for all in cluster.layout(layout) {
            let g: Vec<u32> = all.into_iter().filter(|&h| keep[h as usize]).collect();
            match g.len() {
                0 => continue,
                1 => {
                    return Err(ScenarioError::at(
                        p("groups"),
                        format!(
                            "groups = \"{}\": the group of host {} has one rank (a group needs \
                             at least two)",
                            layout.name(),
                            g[0]
                        ),
                    ))
                }
                _ => groups.push(g),
            }
        }
        if groups.is_empty() {
            return Err(ScenarioError::at(
                p("groups"),
                format!("groups = \"{}\" leaves no group", layout.name()),
            ));
        }
        Ok(groups)
    }

    /// The groups in rank order (before a shuffle, which keeps their sizes), and the placement to
    /// shuffle when `rank_order = "shuffled"`.
    fn groups(&self, ctx: &Context) -> Res<(Vec<Vec<u32>>, Option<RankPlacement>)> {
        let p = |key: &str| ctx.path(key);
        if let Some(GroupsValue::Layout(layout)) = &self.groups {
            return self.layout_groups(ctx, *layout).map(|g| (g, None));
        }
        if let Some(GroupsValue::List(list)) = &self.groups {
            for (key, set) in [
                ("hosts", self.hosts.is_some()),
                ("group_size", self.group_size.is_some()),
                ("group_layout", self.group_layout.is_some()),
                ("rank_order", self.rank_order.is_some()),
            ] {
                if set {
                    return Err(ScenarioError::at(
                        p(key),
                        "explicit groups give every group's hosts in rank order: leave out this key",
                    ));
                }
            }
            if list.is_empty() {
                return Err(ScenarioError::at(
                    p("groups"),
                    "expected at least one group",
                ));
            }
            let mut groups = Vec::with_capacity(list.len());
            for (g, hosts) in list.iter().enumerate() {
                let gp = p(&format!("groups.{g}"));
                let hosts = ctx.host_set(&gp, hosts)?;
                if hosts.len() < 2 {
                    return Err(ScenarioError::at(gp, "a group needs at least two ranks"));
                }
                groups.push(hosts);
            }
            return Ok((groups, None));
        }
        let hosts = ctx.hosts_or_all("hosts", self.hosts.as_ref(), "a collective")?;
        let len = hosts.len();
        let group_size = match self.group_size {
            None => {
                if self.group_layout.is_some() {
                    return Err(ScenarioError::at(
                        p("group_layout"),
                        "a group layout needs group_size",
                    ));
                }
                len
            }
            Some(g) => {
                let g = count(
                    &p("group_size"),
                    Some(g),
                    2,
                    len as i64,
                    "a number of ranks per group",
                )? as usize;
                if len % g != 0 {
                    return Err(ScenarioError::at(
                        p("group_size"),
                        format!("{len} hosts do not split into groups of {g}"),
                    ));
                }
                g
            }
        };
        let placement = RankPlacement {
            hosts,
            group_size: group_size as u32,
            strided: self.group_layout == Some(GroupLayout::Strided),
        };
        let groups = placement.groups(&placement.hosts);
        let shuffle = (self.rank_order == Some(RankOrder::Shuffled)).then_some(placement);
        Ok((groups, shuffle))
    }
}
