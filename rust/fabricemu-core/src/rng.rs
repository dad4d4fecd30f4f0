//! Seeded random streams, one per purpose, so that turning one feature on never perturbs another's
//! draws. Pcg64Mcg is a named algorithm whose stream does not change between releases.

use rand_core::{RngCore, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// SplitMix64 finaliser: a fast, well-mixed bijection on u64 (used for seeds and header hashes).
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What a random stream is for; each has its own seed derived from the scenario seed.
#[derive(Debug, Clone, Copy)]
pub enum Purpose {
    EcmpSeed = 1,
    Workload = 2,
    SourcePort = 3,
    Ecn = 4,
    Spray = 5,
    FlowLabel = 6,
    /// Random packet loss on a link (`[[fault]] kind = "loss"`), one stream per link.
    LinkLoss = 7,
    /// Flap periods drawn from a distribution, one stream per `[[fault]]`.
    Flap = 8,
    /// `[[failure_process]]` failures, one stream per process and component.
    FailureProcess = 9,
    /// Header entropy of flows appended during the run (plan amendments).
    Amendments = 10,
    /// Synthetic workloads: arrivals, destinations, permutation (numbered apart from the others).
    Synthetic = 16,
}

/// The named random streams of a scenario's build and run: each random choice draws from its own.
/// Their seeds are fixed (a stream is `stream(seed, purpose, index)` for the pair below): renaming
/// a stream must never move its draws, or every output would change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RngStream {
    /// `incast` workload `i` drawing `senders = <count>` hosts.
    IncastSenders(usize),
    /// Workload `i` expanding into flows (permutation derangement, Poisson arrivals and sizes).
    WorkloadPlan(usize),
    /// `collective` workload `i` with `rank_order = "shuffled"`: the placement of its ranks.
    CollectiveRanks(usize),
    /// `synthetic` workload `i`: message arrivals.
    SyntheticArrivals(usize),
    /// `synthetic` workload `i`: message destinations.
    SyntheticDestinations(usize),
    /// `synthetic` workload `i`: the fixed permutation of pattern `permutation`.
    SyntheticPermutation(usize),
    /// Step workload `i` (graph, training, inference): compute noise (jitter).
    GraphNoise(usize),
    /// Per flow: the UDP source port (RoCEv2 queue-pair entropy).
    SourcePorts,
    /// Per flow: the IPv6 flow label.
    FlowLabels,
    /// RED/ECN marking decisions of switch `n` (one stream per switch).
    EcnMarking(u32),
    /// Loss draws of the link leaving this port (one stream per link, so a loss fault on one
    /// link never shifts another's draws).
    LinkLoss(u32),
    /// `[[fault]]` `i` with `kind = "flap"`: its down and up periods.
    Flap(usize),
    /// `[[failure_process]]` `i`, component `c` (its position in the process's class): the
    /// component's times to failure and to repair.
    FailureProcess(usize, u32),
    /// Flows appended during the run (`engine::amend`): their UDP source port and flow label.
    Amendments,
}

impl RngStream {
    /// The (purpose, index) this stream has always been seeded with.
    fn key(self) -> (Purpose, u64) {
        match self {
            RngStream::IncastSenders(i) => (Purpose::Workload, i as u64),
            RngStream::WorkloadPlan(i) => (Purpose::Workload, 1_000_000 + i as u64),
            RngStream::CollectiveRanks(i) => (Purpose::Workload, 2_000_000 + i as u64),
            RngStream::SyntheticArrivals(i) => (Purpose::Synthetic, 4 * i as u64),
            RngStream::SyntheticDestinations(i) => (Purpose::Synthetic, 4 * i as u64 + 1),
            RngStream::SyntheticPermutation(i) => (Purpose::Synthetic, 4 * i as u64 + 2),
            RngStream::GraphNoise(i) => (Purpose::Workload, 3_000_000 + i as u64),
            RngStream::SourcePorts => (Purpose::SourcePort, 0),
            RngStream::FlowLabels => (Purpose::FlowLabel, 0),
            RngStream::EcnMarking(n) => (Purpose::Ecn, n as u64),
            RngStream::LinkLoss(p) => (Purpose::LinkLoss, p as u64),
            RngStream::Flap(i) => (Purpose::Flap, i as u64),
            RngStream::FailureProcess(i, c) => {
                (Purpose::FailureProcess, (i as u64) << 32 | c as u64)
            }
            RngStream::Amendments => (Purpose::Amendments, 0),
        }
    }

    /// The stream under scenario `seed`.
    pub fn rng(self, seed: u64) -> Rng {
        let (purpose, index) = self.key();
        stream(seed, purpose, index)
    }
}

/// A random stream for `purpose` (and `index`, e.g. the workload number) under scenario `seed`.
pub fn stream(seed: u64, purpose: Purpose, index: u64) -> Rng {
    let s = mix64(mix64(seed ^ mix64(purpose as u64)) ^ index);
    let s2 = mix64(s);
    Rng(Pcg64Mcg::from_seed(
        ((s as u128) << 64 | s2 as u128).to_le_bytes(),
    ))
}

/// A seeded generator with the few draws the simulator needs.
#[derive(Clone)]
pub struct Rng(Pcg64Mcg);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// Uniform in `0..n` (n > 0), without modulo bias (Lemire's method).
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        loop {
            let x = self.0.next_u64();
            let m = x as u128 * n as u128;
            let low = m as u64;
            if low >= n || low >= n.wrapping_neg() % n {
                return (m >> 64) as u64;
            }
        }
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
    }
}
