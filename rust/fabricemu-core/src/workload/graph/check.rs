//! Whether a [`Graph`] can run: ranks on distinct endpoints, groups of two or more distinct
//! ranks, every reference in range, collectives the `collective` workload accepts, and no
//! dependency cycle. Loaders turn a [`GraphError`] into a located scenario error (the op's key
//! path, or the file and op); generators can assert their output passes.

use super::spec::{Graph, OpKind};
use crate::config::{CollectiveAlgorithm, CollectiveOp};
use crate::workload::collective::{algorithms, Domains};

/// What is wrong with a graph: the op (None: the graph's `ranks` or `groups`), the key inside it
/// (`deps`, `rank`, `group`, ...) and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphError {
    pub op: Option<usize>,
    /// The key (`ranks`, `groups.2`, `deps`, `rank`, `src`, `dst`, `bytes`, `group`,
    /// `algorithm`, `domain_size`).
    pub key: String,
    pub message: String,
}

impl std::fmt::Display for GraphError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.op {
            Some(i) => write!(f, "op {i}: {}: {}", self.key, self.message),
            None => write!(f, "{}: {}", self.key, self.message),
        }
    }
}

fn err(op: Option<usize>, key: &str, message: impl Into<String>) -> GraphError {
    GraphError {
        op,
        key: key.into(),
        message: message.into(),
    }
}

impl Graph {
    /// Check the graph against a scenario of `endpoints` hosts (or GPUs) whose collectives
    /// default to `domain_size` endpoints per scale-up domain.
    pub fn check(&self, endpoints: u32, domain_size: Option<u32>) -> Result<(), GraphError> {
        let n = self.ranks.len();
        if n == 0 {
            return Err(err(None, "ranks", "expected at least one rank"));
        }
        let mut seen = std::collections::HashMap::new();
        for (r, &e) in self.ranks.iter().enumerate() {
            if e >= endpoints {
                return Err(err(
                    None,
                    &format!("ranks.{r}"),
                    format!(
                        "endpoint {e} is out of range: this topology has endpoints 0..={}",
                        endpoints.saturating_sub(1)
                    ),
                ));
            }
            if let Some(other) = seen.insert(e, r) {
                return Err(err(
                    None,
                    &format!("ranks.{r}"),
                    format!("endpoint {e} already runs rank {other}: one rank per endpoint"),
                ));
            }
        }
        let rank_ok = |r: u32| (r as usize) < n;
        let range = format!("0..={}", n - 1);
        for (g, group) in self.groups.iter().enumerate() {
            let key = format!("groups.{g}");
            if group.len() < 2 {
                return Err(err(
                    None,
                    &key,
                    format!(
                        "a group needs at least two ranks, found {}",
                        if group.is_empty() {
                            "an empty group".to_string()
                        } else {
                            format!("{group:?}")
                        }
                    ),
                ));
            }
            let mut sorted = group.clone();
            sorted.sort_unstable();
            if let Some(&r) = group.iter().find(|&&r| !rank_ok(r)) {
                return Err(err(
                    None,
                    &key,
                    format!("rank {r} is out of range (ranks {range})"),
                ));
            }
            if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                return Err(err(None, &key, format!("rank {} is listed twice", w[0])));
            }
        }
        for (i, op) in self.ops.iter().enumerate() {
            self.check_op(i, &op.kind, &range, endpoints, domain_size)?;
            for &d in &op.deps {
                if d as usize >= self.ops.len() {
                    return Err(err(
                        Some(i),
                        "deps",
                        format!(
                            "unknown op {d}: the graph has ops 0..={}",
                            self.ops.len().saturating_sub(1)
                        ),
                    ));
                }
                if d as usize == i {
                    return Err(err(Some(i), "deps", "an op cannot depend on itself"));
                }
            }
        }
        if self.ops.is_empty() {
            return Err(err(None, "ops", "expected at least one op"));
        }
        if let Some(cycle) = self.find_cycle() {
            let path: Vec<String> = cycle.iter().map(u32::to_string).collect();
            return Err(err(
                Some(cycle[0] as usize),
                "deps",
                format!(
                    "dependency cycle: op {} (each waits for the next)",
                    path.join(" -> op ")
                ),
            ));
        }
        Ok(())
    }

    fn check_op(
        &self,
        i: usize,
        kind: &OpKind,
        range: &str,
        _endpoints: u32,
        domain_size: Option<u32>,
    ) -> Result<(), GraphError> {
        let n = self.ranks.len() as u32;
        let rank = |key: &str, r: u32| {
            if r < n {
                Ok(())
            } else {
                Err(err(
                    Some(i),
                    key,
                    format!("rank {r} is out of range (ranks {range})"),
                ))
            }
        };
        match *kind {
            OpKind::Compute { rank: r, .. } => rank("rank", r),
            OpKind::Send { src, dst, bytes } => {
                rank("src", src)?;
                rank("dst", dst)?;
                if src == dst {
                    return Err(err(
                        Some(i),
                        "dst",
                        format!("a send needs two different ranks, found {src} to itself"),
                    ));
                }
                if bytes == 0 {
                    return Err(err(Some(i), "bytes", "expected a positive size"));
                }
                Ok(())
            }
            OpKind::Collective {
                group,
                op,
                algorithm,
                bytes,
                domain_size: own,
            } => {
                let Some(members) = self.groups.get(group as usize) else {
                    return Err(err(
                        Some(i),
                        "group",
                        format!(
                            "unknown group {group}: the graph has {} group(s)",
                            self.groups.len()
                        ),
                    ));
                };
                check_collective(i, op, algorithm, bytes, members.len())?;
                if algorithm.is_hierarchical() {
                    let Some(size) = own.or(domain_size) else {
                        return Err(err(
                            Some(i),
                            "domain_size",
                            format!(
                                "missing: algorithm = \"{}\" is built from scale-up domains: \
                                 give domain_size (endpoints per domain) or use a [cluster] with \
                                 a scale-up domain",
                                algorithm.name()
                            ),
                        ));
                    };
                    if size == 0 {
                        return Err(err(Some(i), "domain_size", "expected a positive number"));
                    }
                    let ids: Vec<u32> = members
                        .iter()
                        .map(|&r| self.ranks[r as usize] / size)
                        .collect();
                    if !Domains::of(&ids).is_regular() {
                        return Err(err(
                            Some(i),
                            "domain_size",
                            format!(
                                "group {group} has different numbers of ranks in its scale-up \
                                 domains: algorithm = \"{}\" needs as many in every domain",
                                algorithm.name()
                            ),
                        ));
                    }
                }
                Ok(())
            }
        }
    }

    /// An op on a dependency cycle and the cycle from it (each op waits for the next), if any.
    pub fn find_cycle(&self) -> Option<Vec<u32>> {
        let n = self.ops.len();
        // Kahn's algorithm on edges dep -> op; what it cannot remove contains every cycle.
        let mut indegree: Vec<u32> = self.ops.iter().map(|o| o.deps.len() as u32).collect();
        let mut users: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, o) in self.ops.iter().enumerate() {
            for &d in &o.deps {
                if (d as usize) < n {
                    users[d as usize].push(i as u32);
                }
            }
        }
        let mut ready: Vec<u32> = (0..n as u32)
            .filter(|&i| indegree[i as usize] == 0)
            .collect();
        let mut removed = 0;
        while let Some(i) = ready.pop() {
            removed += 1;
            for &u in &users[i as usize] {
                indegree[u as usize] -= 1;
                if indegree[u as usize] == 0 {
                    ready.push(u);
                }
            }
        }
        if removed == n {
            return None;
        }
        // Walk from the first op left along deps that are also left, until one repeats.
        let start = (0..n).find(|&i| indegree[i] > 0)? as u32;
        let mut order = vec![start];
        let mut at = start;
        loop {
            let next = *self.ops[at as usize]
                .deps
                .iter()
                .find(|&&d| (d as usize) < n && indegree[d as usize] > 0)?;
            if let Some(pos) = order.iter().position(|&o| o == next) {
                let mut cycle = order[pos..].to_vec();
                cycle.push(next);
                return Some(cycle);
            }
            order.push(next);
            at = next;
        }
    }
}

/// The same checks `kind = "collective"` makes of an op over `ranks` ranks.
pub fn check_collective(
    i: usize,
    op: CollectiveOp,
    algorithm: CollectiveAlgorithm,
    bytes: u64,
    ranks: usize,
) -> Result<(), GraphError> {
    let choices = algorithms(op);
    if !choices.contains(&algorithm) {
        let names: Vec<String> = choices
            .iter()
            .map(|a| format!("\"{}\"", a.name()))
            .collect();
        return Err(err(
            Some(i),
            "algorithm",
            format!(
                "expected one of {} for op = \"{}\", found \"{}\"",
                names.join(", "),
                op.name(),
                algorithm.name()
            ),
        ));
    }
    if bytes < ranks as u64 {
        return Err(err(
            Some(i),
            "bytes",
            format!("expected at least one byte per rank ({ranks} B), found {bytes} B"),
        ));
    }
    if algorithm == CollectiveAlgorithm::HalvingDoubling
        && op != CollectiveOp::AllReduce
        && !ranks.is_power_of_two()
    {
        return Err(err(
            Some(i),
            "algorithm",
            format!(
                "halving_doubling {} needs a power-of-two group, found {ranks} ranks (use ring)",
                op.name()
            ),
        ));
    }
    Ok(())
}
