//! Hierarchical (two-tier) collectives for clusters with scale-up domains (GPUs of a server joined
//! by NVLink/NVSwitch, or hosts under one leaf when a host fabric emulates two tiers).
//!
//! A group of n ranks spread over n2 domains with n1 ranks in each (n = n1 x n2; [`Domains`]):
//! rank (d, l) is the l-th rank of the group, in rank order, in the d-th domain the group touches
//! (domains in the order of their first rank). Ranks with the same local index l form the
//! scale-out group l (one rank per domain: in a rail-optimised fabric, one rail).
//!
//! Every algorithm is a set of chains: a piece of data travels rank to rank, and each hop starts
//! when the piece has arrived where it is (the hop before it) and when the rank's own share of
//! it is ready. A hop therefore waits only for the data it carries, so the tiers overlap
//! piece by piece as NCCL's pipelined implementations do (and the engine's rule, an arrival
//! counts toward one input set, holds: each piece's arrival feeds exactly one next step).
//!
//! - `all_reduce`, `hierarchical_ring` (NCCL's hierarchical scheme): the buffer of S bytes is cut
//!   into n1 blocks and block l into n2 sub-blocks.
//!   1. Scale-up reduce-scatter (phase 0): a ring inside each domain; sub-block (l, j) ends at
//!      local rank l reduced over the domain ((n1-1)/n1 x S sent per rank).
//!   2. Scale-out all-reduce (phase 1): a ring over the n2 ranks of scale-out group l on block l
//!      (S/n1 bytes; 2(n2-1)/n2 x S/n1 sent per rank). Rank x's hop carrying sub-block j waits for
//!      x's own scale-up result of sub-block j: the inter-domain step starts when the rank's
//!      reduce-scatter chunk is complete, rank by rank.
//!   3. Scale-up all-gather (phase 2): each sub-block, as soon as it is final on a rank, is passed
//!      round that rank's domain ((n1-1)/n1 x S sent per rank).
//!
//!   Per rank: 2(n1-1)/n1 x S on the scale-up tier and 2(n2-1)/n2 x S/n1 on the scale-out tier.
//! - `all_reduce`, `hierarchical_tree`: the same with a double binary tree across domains (phase
//!   1): block l is cut into the two trees' halves and `chunk_size` chunks, each chunk a piece of
//!   its own through all three phases. Up the tree, rank x sends a chunk once its children's have
//!   arrived and its own scale-up reduce-scatter of that chunk is done; leaves pace their chunks
//!   one chunk-time apart (the flat tree's receive-slot flow control would make one arrival feed
//!   two input sets, which the engine does not support).
//! - `all_gather`, `hierarchical_ring`: scale-out first (phase 0: ring all-gather of each rank's
//!   S/n chunk over its scale-out group), then scale-up (phase 1: every chunk, as soon as it is on
//!   a rank, is passed round the domain). Scale-out bytes per rank (n2-1)/n2 x S/n1: the minimum.
//! - `reduce_scatter`, `hierarchical_ring`: scale-up first (phase 0: ring reduce-scatter inside
//!   each domain, leaving on local rank l the chunks of scale-out group l reduced over the
//!   domain), then scale-out (phase 1: ring reduce-scatter over group l, a hop waiting for the
//!   rank's own scale-up result of the chunk it forwards). Scale-out bytes per rank (n2-1)/n2 x
//!   S/n1. NCCL orders the tiers the same way for each operation.
//! - `all_to_all`, `pxn` (NCCL's PXN, rail-aligned): phase 0, rank (d, l) sends to each (d, l') of
//!   its domain everything for local index l' (for every domain, S/n1 bytes); phase 1, once all of
//!   them arrived, (d, l') sends to each (d', l') what its domain has for it (S/n2 bytes). Data
//!   crosses domains only between ranks of the same local index (the same rail).

use std::collections::HashMap;

use super::Transfer;
use crate::config::CollectiveOp;
use crate::units::Time;
use crate::workload::split_even;

/// A group's ranks by scale-up domain: `ranks[d][l]` is the rank with local index `l` in the
/// group's `d`-th domain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Domains {
    pub ranks: Vec<Vec<u32>>,
}

impl Domains {
    /// From each rank's domain id (ranks 0..n in order).
    pub fn of(domain_ids: &[u32]) -> Domains {
        let mut index: HashMap<u32, usize> = HashMap::new();
        let mut ranks: Vec<Vec<u32>> = Vec::new();
        for (r, &id) in domain_ids.iter().enumerate() {
            let d = *index.entry(id).or_insert_with(|| {
                ranks.push(Vec::new());
                ranks.len() - 1
            });
            ranks[d].push(r as u32);
        }
        Domains { ranks }
    }

    /// Every domain holds the same number of ranks.
    pub fn is_regular(&self) -> bool {
        self.ranks.iter().all(|d| d.len() == self.ranks[0].len())
    }

    /// Ranks per domain (of the first domain when irregular).
    pub fn n1(&self) -> usize {
        self.ranks.first().map_or(0, Vec::len)
    }

    /// Domains.
    pub fn n2(&self) -> usize {
        self.ranks.len()
    }

    fn rank(&self, d: usize, l: usize) -> u32 {
        self.ranks[d % self.n2()][l % self.n1()]
    }
}

/// Transfers appended in dependency order.
struct Builder {
    out: Vec<Transfer>,
}

impl Builder {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        src: u32,
        dst: u32,
        bytes: u64,
        inputs: Vec<u32>,
        phase: u8,
        step: u32,
        delay: Time,
    ) -> u32 {
        self.out.push(Transfer {
            src,
            dst,
            bytes,
            inputs,
            step,
            delay,
            phase,
        });
        self.out.len() as u32 - 1
    }

    /// A piece of `bytes` passed along `path` (hop h from path[h] to path[h + 1]): hop 0 waits
    /// for `first`, hop h > 0 for hop h - 1, and hop h also for `own(h)` (the sender's own share).
    /// Returns the hops' indices.
    #[allow(clippy::too_many_arguments)]
    fn chain(
        &mut self,
        path: &[u32],
        bytes: u64,
        first: &[u32],
        own: &dyn Fn(usize) -> Option<u32>,
        phase: u8,
        step0: u32,
    ) -> Vec<u32> {
        let mut hops: Vec<u32> = Vec::with_capacity(path.len().saturating_sub(1));
        for h in 0..path.len().saturating_sub(1) {
            let mut inputs = match hops.last() {
                None => first.to_vec(),
                Some(&prev) => vec![prev],
            };
            inputs.extend(own(h));
            let t = self.push(
                path[h],
                path[h + 1],
                bytes,
                inputs,
                phase,
                step0 + h as u32,
                0,
            );
            hops.push(t);
        }
        hops
    }
}

/// Local ranks of domain `d` starting at local index `from`, `len` of them, going round.
fn round_domain(dom: &Domains, d: usize, from: usize, len: usize) -> Vec<u32> {
    (0..len).map(|k| dom.rank(d, from + k)).collect()
}

/// Ranks of scale-out group `l` starting at domain `from`, `len` of them, going round.
fn round_group(dom: &Domains, l: usize, from: usize, len: usize) -> Vec<u32> {
    (0..len).map(|k| dom.rank(from + k, l)).collect()
}

/// The pieces of each block: block `l`'s pieces' sizes, and per piece its tree (0 or 1) and chunk
/// index within that tree's half.
type Pieces = Vec<Vec<(u64, usize, usize)>>;

/// Ring (one piece per sub-block: n2 per block) or tree (the two halves' chunks) pieces.
fn pieces(blocks: &[u64], n2: usize, tree_chunk: Option<u64>) -> Pieces {
    blocks
        .iter()
        .map(|&b| match tree_chunk {
            None => split_even(b, n2)
                .into_iter()
                .enumerate()
                .map(|(j, s)| (s, 0, j))
                .collect(),
            Some(chunk) => {
                let halves = [b.div_ceil(2), b / 2];
                let mut out = Vec::new();
                for (t, &half) in halves.iter().enumerate() {
                    if half == 0 {
                        continue;
                    }
                    let k = half.div_ceil(chunk.max(1)) as usize;
                    for (c, s) in split_even(half, k).into_iter().enumerate() {
                        out.push((s, t, c));
                    }
                }
                out
            }
        })
        .collect()
}

/// Scale-up reduce-scatter of every piece: piece p of block l ends at local rank l of each
/// domain, reduced over the domain. Returns `done[d][l][p]` (None when n1 = 1: nothing to do).
fn scaleup_reduce_scatter(
    b: &mut Builder,
    dom: &Domains,
    pieces: &Pieces,
) -> Vec<Vec<Vec<Option<u32>>>> {
    let (n1, n2) = (dom.n1(), dom.n2());
    let mut done = vec![vec![Vec::new(); n1]; n2];
    for (d, per_domain) in done.iter_mut().enumerate() {
        for (l, per_block) in per_domain.iter_mut().enumerate() {
            let path = round_domain(dom, d, l + 1, n1);
            for &(bytes, _, _) in &pieces[l] {
                let hops = b.chain(&path, bytes, &[], &|_| None, 0, 0);
                per_block.push(hops.last().copied());
            }
        }
    }
    done
}

/// Scale-up all-gather of every piece from the rank where it became final: `ready[d][l][p]` is
/// the input set that made piece p of block l final on rank (d, l).
fn scaleup_all_gather(
    b: &mut Builder,
    dom: &Domains,
    pieces: &Pieces,
    ready: &[Vec<Vec<Vec<u32>>>],
    phase: u8,
    step0: u32,
) {
    let (n1, n2) = (dom.n1(), dom.n2());
    if n1 < 2 {
        return;
    }
    for (d, per_domain) in ready.iter().enumerate().take(n2) {
        for (l, per_block) in per_domain.iter().enumerate().take(n1) {
            let path = round_domain(dom, d, l, n1);
            for (p, &(bytes, _, _)) in pieces[l].iter().enumerate() {
                b.chain(&path, bytes, &per_block[p], &|_| None, phase, step0);
            }
        }
    }
}

/// Two-tier all-reduce: ring (`tree = None`) or double binary tree (`Some((chunk, chunk
/// interval))`) across domains.
pub fn all_reduce(dom: &Domains, size: u64, tree: Option<(u64, Time)>) -> Vec<Transfer> {
    let (n1, n2) = (dom.n1(), dom.n2());
    let blocks = split_even(size, n1);
    let pieces = pieces(&blocks, n2, tree.map(|t| t.0));
    let mut b = Builder { out: Vec::new() };
    let up_rs = scaleup_reduce_scatter(&mut b, dom, &pieces);
    let rs_steps = (n1 - 1) as u32;
    // ready[d][l][p]: the input set that makes piece p of block l final on rank (d, l).
    let mut ready: Vec<Vec<Vec<Vec<u32>>>> = (0..n2)
        .map(|_| (0..n1).map(|l| vec![Vec::new(); pieces[l].len()]).collect())
        .collect();
    let mut out_steps = 0u32;
    match tree {
        None => {
            // Ring all-reduce over each scale-out group: sub-block j's reduce-scatter chain ends
            // at domain j, its all-gather chain starts there.
            if n2 > 1 {
                out_steps = 2 * (n2 as u32 - 1);
            }
            for l in 0..n1 {
                for j in 0..n2 {
                    let bytes = pieces[l][j].0;
                    let own = |d: usize| up_rs[d % n2][l][j];
                    let path = round_group(dom, l, j + 1, n2);
                    let rs = b.chain(&path, bytes, &[], &|h| own(j + 1 + h), 1, rs_steps);
                    let mut complete: Vec<u32> = rs.last().copied().into_iter().collect();
                    complete.extend(own(j));
                    let path = round_group(dom, l, j, n2);
                    let ag = b.chain(
                        &path,
                        bytes,
                        &complete,
                        &|_| None,
                        1,
                        rs_steps + n2 as u32 - 1,
                    );
                    ready[j][l][j] = complete;
                    for (h, &t) in ag.iter().enumerate() {
                        ready[(j + 1 + h) % n2][l][j] = vec![t];
                    }
                }
            }
        }
        Some((_, interval)) => {
            let trees = if n2 > 1 {
                Some(super::tree::double_tree(n2))
            } else {
                None
            };
            for l in 0..n1 {
                for (p, &(bytes, t, c)) in pieces[l].iter().enumerate() {
                    let own = |d: usize| up_rs[d][l][p];
                    let Some(trees) = &trees else {
                        ready[0][l][p] = own(0).into_iter().collect();
                        continue;
                    };
                    let tree = &trees[t];
                    let post = tree.post_order();
                    // up[x]: x's send of this piece to its parent, once made (post-order makes
                    // every child's before its parent's).
                    let mut up: Vec<Option<u32>> = vec![None; n2];
                    let mut level = vec![0u32; n2];
                    for &x in &post {
                        let x = x as usize;
                        let Some(parent) = tree.parent[x] else {
                            continue;
                        };
                        let kids = &tree.children[x];
                        let mut inputs: Vec<u32> = kids
                            .iter()
                            .map(|&k| up[k as usize].expect(CHILD_FIRST))
                            .collect();
                        inputs.extend(own(x));
                        let delay = if kids.is_empty() {
                            c as Time * interval
                        } else {
                            0
                        };
                        level[x] = kids
                            .iter()
                            .map(|&k| level[k as usize] + 1)
                            .max()
                            .unwrap_or(0);
                        up[x] = Some(b.push(
                            dom.rank(x, l),
                            dom.rank(parent as usize, l),
                            bytes,
                            inputs,
                            1,
                            rs_steps + level[x],
                            delay,
                        ));
                    }
                    let root = tree.root as usize;
                    let mut result: Vec<u32> = tree.children[root]
                        .iter()
                        .map(|&k| up[k as usize].expect(CHILD_FIRST))
                        .collect();
                    result.extend(own(root));
                    let root_step = tree.children[root]
                        .iter()
                        .map(|&k| level[k as usize] + 1)
                        .max()
                        .unwrap_or(0);
                    ready[root][l][p] = result.clone();
                    let mut down_step = vec![0u32; n2];
                    for &x in post.iter().rev() {
                        let x = x as usize;
                        let (inputs, step) = if x == root {
                            (result.clone(), root_step)
                        } else {
                            (ready[x][l][p].clone(), down_step[x] + 1)
                        };
                        for &k in &tree.children[x] {
                            let d = b.push(
                                dom.rank(x, l),
                                dom.rank(k as usize, l),
                                bytes,
                                inputs.clone(),
                                1,
                                rs_steps + step,
                                0,
                            );
                            ready[k as usize][l][p] = vec![d];
                            down_step[k as usize] = step;
                            out_steps = out_steps.max(step + 1);
                        }
                    }
                }
            }
        }
    }
    scaleup_all_gather(&mut b, dom, &pieces, &ready, 2, rs_steps + out_steps);
    b.out
}

const CHILD_FIRST: &str = "post-order: every child's send is made before its parent's";

// The chains index their per-rank tables by rank (domain, local index) as they go round.
#[allow(clippy::needless_range_loop)]
/// Two-tier all-gather (scale-out, then scale-up) or reduce-scatter (scale-up, then scale-out) of
/// S bytes (the all-gather output, the reduce-scatter input): rank r's chunk is S/n.
pub fn gather_or_scatter(op: CollectiveOp, dom: &Domains, size: u64) -> Vec<Transfer> {
    let (n1, n2) = (dom.n1(), dom.n2());
    let chunks = split_even(size, n1 * n2);
    let chunk = |d: usize, l: usize| chunks[dom.rank(d, l) as usize];
    let mut b = Builder { out: Vec::new() };
    if op == CollectiveOp::AllGather {
        // ready[d][l][o]: the arrival that brought rank (o, l)'s chunk to rank (d, l).
        let mut ready = vec![vec![vec![Vec::new(); n2]; n1]; n2];
        for l in 0..n1 {
            for o in 0..n2 {
                let path = round_group(dom, l, o, n2);
                let hops = b.chain(&path, chunk(o, l), &[], &|_| None, 0, 0);
                for (h, &t) in hops.iter().enumerate() {
                    ready[(o + 1 + h) % n2][l][o] = vec![t];
                }
            }
        }
        if n1 > 1 {
            for (d, per_domain) in ready.iter().enumerate() {
                for (l, per_rank) in per_domain.iter().enumerate() {
                    let path = round_domain(dom, d, l, n1);
                    for (o, first) in per_rank.iter().enumerate() {
                        b.chain(&path, chunk(o, l), first, &|_| None, 1, n2 as u32 - 1);
                    }
                }
            }
        }
    } else {
        // done[d][l][o]: rank (o, l)'s chunk reduced over domain d, on rank (d, l).
        let mut done = vec![vec![vec![None; n2]; n1]; n2];
        if n1 > 1 {
            for (d, per_domain) in done.iter_mut().enumerate() {
                for (l, per_rank) in per_domain.iter_mut().enumerate() {
                    let path = round_domain(dom, d, l + 1, n1);
                    for (o, slot) in per_rank.iter_mut().enumerate() {
                        let hops = b.chain(&path, chunk(o, l), &[], &|_| None, 0, 0);
                        *slot = hops.last().copied();
                    }
                }
            }
        }
        let steps = n1 as u32 - 1;
        for l in 0..n1 {
            for o in 0..n2 {
                let path = round_group(dom, l, o + 1, n2);
                b.chain(
                    &path,
                    chunk(o, l),
                    &[],
                    &|h| done[(o + 1 + h) % n2][l][o],
                    1,
                    steps,
                );
            }
        }
    }
    b.out
}

/// Two-tier all-to-all (PXN): each rank's send buffer of S bytes holds S/n for every rank.
pub fn pxn(dom: &Domains, size: u64) -> Vec<Transfer> {
    let (n1, n2) = (dom.n1(), dom.n2());
    let blocks = split_even(size, n1 * n2);
    let block = |d: usize, l: usize| blocks[dom.rank(d, l) as usize];
    let mut b = Builder { out: Vec::new() };
    // into[d][l]: the scale-up transfers into rank (d, l).
    let mut into = vec![vec![Vec::new(); n1]; n2];
    for k in 1..n1 {
        for (d, per_domain) in into.iter_mut().enumerate() {
            for l in 0..n1 {
                let to = (l + k) % n1;
                let bytes = (0..n2).map(|o| block(o, to)).sum();
                let t = b.push(dom.rank(d, l), dom.rank(d, to), bytes, Vec::new(), 0, 0, 0);
                per_domain[to].push(t);
            }
        }
    }
    let step = u32::from(n1 > 1);
    for k in 1..n2 {
        for (d, per_domain) in into.iter().enumerate() {
            for (l, inputs) in per_domain.iter().enumerate() {
                let to = (d + k) % n2;
                b.push(
                    dom.rank(d, l),
                    dom.rank(to, l),
                    n1 as u64 * block(to, l),
                    inputs.clone(),
                    1,
                    step,
                    0,
                );
            }
        }
    }
    b.out
}

/// Flows of one iteration (as built above), from the layout alone (counted without building
/// anything: a tiny chunk must be refused by the flow guard, not allocated).
pub fn flows(op: CollectiveOp, tree_chunk: Option<u64>, dom: &Domains, size: u64) -> u64 {
    let (n1, n2) = (dom.n1() as u64, dom.n2() as u64);
    let n = n1 * n2;
    match op {
        CollectiveOp::AllReduce => {
            // Pieces per block: n2 sub-blocks (ring) or the chunks of the two halves (tree).
            let per_block = |b: u64| match tree_chunk {
                None => n2,
                Some(chunk) => [b.div_ceil(2), b / 2]
                    .iter()
                    .map(|h| h.div_ceil(chunk.max(1)))
                    .sum(),
            };
            let (q, r) = (size / n1, size % n1);
            let p = per_block(q + 1)
                .saturating_mul(r)
                .saturating_add(per_block(q).saturating_mul(n1 - r));
            // Per piece: n1 - 1 hops in each domain twice (scale-up), and 2(n2 - 1) across.
            p.saturating_mul(2 * (n2 * (n1 - 1) + n2 - 1))
        }
        CollectiveOp::AllGather | CollectiveOp::ReduceScatter => n * (n - 1),
        CollectiveOp::AllToAll => n * (n1 - 1) + n * (n2 - 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Domains of `n1` consecutive ranks.
    fn blocks_of(n1: usize, n2: usize) -> Domains {
        let ids: Vec<u32> = (0..n1 * n2).map(|r| (r / n1) as u32).collect();
        Domains::of(&ids)
    }

    /// Ranks whose input data can have reached each transfer's sender when it starts: its own
    /// and, through its inputs, everything its inputs' senders knew.
    fn knowledge(ts: &[Transfer]) -> Vec<BTreeSet<u32>> {
        let mut know: Vec<BTreeSet<u32>> = Vec::with_capacity(ts.len());
        for (k, t) in ts.iter().enumerate() {
            let mut s = BTreeSet::from([t.src]);
            for &i in &t.inputs {
                assert!((i as usize) < k, "inputs come first (the graph is acyclic)");
                let input = &ts[i as usize];
                assert_eq!(
                    input.dst, t.src,
                    "an input arrived where the transfer starts"
                );
                s.extend(know[i as usize].iter().copied());
            }
            know.push(s);
        }
        know
    }

    /// What each rank knows at the end: every rank's input has reached it.
    fn everyone_knows_everything(ts: &[Transfer], n: usize) {
        let know = knowledge(ts);
        for x in 0..n as u32 {
            let mut s = BTreeSet::from([x]);
            for (t, k) in ts.iter().zip(&know) {
                if t.dst == x {
                    s.extend(k.iter().copied());
                }
            }
            assert_eq!(s.len(), n, "rank {x} misses {:?}", s);
        }
    }

    /// A scale-out transfer carries data reduced over the sender's domain: the scale-up
    /// reduce-scatter of the sender's whole domain is among its (transitive) inputs.
    fn scaleout_waits_for_the_domain(ts: &[Transfer], dom: &Domains) {
        let know = knowledge(ts);
        let domain_of = |r: u32| dom.ranks.iter().position(|d| d.contains(&r)).unwrap();
        for (t, k) in ts.iter().zip(&know) {
            if t.phase == 1 {
                let d = domain_of(t.src);
                for &r in &dom.ranks[d] {
                    assert!(
                        k.contains(&r),
                        "{t:?} starts before rank {r}'s share arrived"
                    );
                }
            }
        }
    }

    fn sent(ts: &[Transfer], n: usize, phase: u8) -> Vec<u64> {
        let mut s = vec![0u64; n];
        for t in ts.iter().filter(|t| t.phase == phase) {
            s[t.src as usize] += t.bytes;
        }
        s
    }

    fn tier_ok(ts: &[Transfer], dom: &Domains, scaleup_phases: &[u8]) {
        let domain_of = |r: u32| dom.ranks.iter().position(|d| d.contains(&r)).unwrap();
        for t in ts {
            assert_ne!(t.src, t.dst);
            assert!(t.bytes > 0);
            let same = domain_of(t.src) == domain_of(t.dst);
            assert_eq!(same, scaleup_phases.contains(&t.phase), "{t:?}");
        }
    }

    #[test]
    fn hierarchical_ring_all_reduce_sends_the_analytic_bytes_per_rank_and_tier() {
        for (n1, n2) in [(4, 3), (2, 2), (8, 4), (1, 5), (6, 1), (3, 7)] {
            let n = n1 * n2;
            let size = (n * 1000) as u64;
            let dom = blocks_of(n1, n2);
            let ts = all_reduce(&dom, size, None);
            assert_eq!(
                ts.len() as u64,
                flows(CollectiveOp::AllReduce, None, &dom, size)
            );
            assert_eq!(ts.len(), 2 * n * (n - 1), "as many flows as a flat ring");
            let (s, n1u, n2u) = (size, n1 as u64, n2 as u64);
            for r in 0..n {
                // 2(n1-1)/n1 S inside the domain (reduce-scatter then all-gather) and
                // 2(n2-1)/n2 S/n1 across.
                assert_eq!(sent(&ts, n, 0)[r], (n1u - 1) * s / n1u, "n1={n1} n2={n2}");
                assert_eq!(sent(&ts, n, 2)[r], (n1u - 1) * s / n1u);
                assert_eq!(sent(&ts, n, 1)[r], 2 * (n2u - 1) * s / n1u / n2u);
            }
            tier_ok(&ts, &dom, &[0, 2]);
            everyone_knows_everything(&ts, n);
            scaleout_waits_for_the_domain(&ts, &dom);
            super::super::graph(&ts);
        }
    }

    #[test]
    fn hierarchical_tree_all_reduce_pipelines_chunks_through_both_tiers() {
        for (n1, n2, chunk) in [
            (4, 4, 250),
            (2, 6, 100),
            (4, 1, 300),
            (1, 4, 64),
            (3, 5, 1 << 20),
        ] {
            let n = n1 * n2;
            let size = (n * 1000) as u64;
            let dom = blocks_of(n1, n2);
            let ts = all_reduce(&dom, size, Some((chunk, 9)));
            assert_eq!(
                ts.len() as u64,
                flows(CollectiveOp::AllReduce, Some(chunk), &dom, size)
            );
            let (s, n1u) = (size, n1 as u64);
            for r in 0..n {
                assert_eq!(sent(&ts, n, 0)[r], (n1u - 1) * s / n1u);
                assert_eq!(sent(&ts, n, 2)[r], (n1u - 1) * s / n1u);
            }
            // Across: each half of each block goes up n2 - 1 edges and down n2 - 1 edges.
            let across: u64 = sent(&ts, n, 1).iter().sum();
            assert_eq!(across, 2 * (n2 as u64 - 1) * s);
            tier_ok(&ts, &dom, &[0, 2]);
            everyone_knows_everything(&ts, n);
            scaleout_waits_for_the_domain(&ts, &dom);
            super::super::graph(&ts);
            // Leaves pace their chunks one chunk-time apart.
            assert!(ts.iter().all(|t| t.delay % 9 == 0));
        }
    }

    #[test]
    fn hierarchical_all_gather_and_reduce_scatter_move_the_minimum_across() {
        for (n1, n2) in [(4, 3), (2, 2), (1, 4), (5, 1), (8, 2)] {
            let n = n1 * n2;
            let size = (n * 720) as u64;
            let dom = blocks_of(n1, n2);
            let chunk = size / n as u64;
            for (op, up, out) in [
                (CollectiveOp::AllGather, 1u8, 0u8),
                (CollectiveOp::ReduceScatter, 0, 1),
            ] {
                let ts = gather_or_scatter(op, &dom, size);
                assert_eq!(ts.len() as u64, flows(op, None, &dom, size));
                for r in 0..n {
                    // (n1-1)/n1 S inside, (n2-1)/n2 S/n1 across: (n-1)/n S in all, as flat.
                    assert_eq!(sent(&ts, n, up)[r], (n1 as u64 - 1) * n2 as u64 * chunk);
                    assert_eq!(sent(&ts, n, out)[r], (n2 as u64 - 1) * chunk);
                }
                tier_ok(&ts, &dom, &[up]);
                everyone_knows_everything(&ts, n);
                if op == CollectiveOp::ReduceScatter {
                    scaleout_waits_for_the_domain(&ts, &dom);
                }
                super::super::graph(&ts);
            }
        }
    }

    #[test]
    fn pxn_crosses_domains_only_within_a_rail() {
        for (n1, n2) in [(4, 3), (2, 2), (8, 4), (1, 3), (3, 1)] {
            let n = n1 * n2;
            let size = (n * 100) as u64;
            let dom = blocks_of(n1, n2);
            let ts = pxn(&dom, size);
            assert_eq!(
                ts.len() as u64,
                flows(CollectiveOp::AllToAll, None, &dom, size)
            );
            for t in ts.iter().filter(|t| t.phase == 1) {
                assert_eq!(t.src as usize % n1, t.dst as usize % n1, "same local index");
            }
            for r in 0..n {
                assert_eq!(sent(&ts, n, 0)[r], (n1 as u64 - 1) * n2 as u64 * 100);
                assert_eq!(sent(&ts, n, 1)[r], (n2 as u64 - 1) * n1 as u64 * 100);
            }
            tier_ok(&ts, &dom, &[0]);
            everyone_knows_everything(&ts, n);
            scaleout_waits_for_the_domain(&ts, &dom);
            super::super::graph(&ts);
        }
    }

    #[test]
    fn domains_follow_rank_order_and_any_placement() {
        // Strided ranks (rank r on host 4r mod 15-ish): domains by first appearance.
        let dom = Domains::of(&[2, 0, 2, 0, 1, 1]);
        assert_eq!(dom.ranks, vec![vec![0, 2], vec![1, 3], vec![4, 5]]);
        assert!(dom.is_regular());
        assert!(!Domains::of(&[0, 0, 1]).is_regular());
        // An interleaved layout works as well as a blocked one.
        let ts = all_reduce(&dom, 6000, None);
        everyone_knows_everything(&ts, 6);
        scaleout_waits_for_the_domain(&ts, &dom);
        tier_ok(&ts, &dom, &[0, 2]);
    }

    #[test]
    fn a_tiny_chunk_is_counted_not_built() {
        let dom = blocks_of(4, 2);
        let huge = flows(CollectiveOp::AllReduce, Some(1), &dom, u64::MAX / 2);
        assert_eq!(huge, u64::MAX, "saturates: the flow guard refuses it");
        // Uneven blocks (size not a multiple of n1) are counted exactly.
        for size in [8u64 * 1000 + 3, 8 * 1000 + 5, 9, 13] {
            let ts = all_reduce(&dom, size, Some((3, 0)));
            assert_eq!(
                ts.len() as u64,
                flows(CollectiveOp::AllReduce, Some(3), &dom, size)
            );
        }
    }
}
