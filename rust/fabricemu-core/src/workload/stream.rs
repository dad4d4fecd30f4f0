//! Streamed plans (issue 19 item 2): the flows of open-loop generators (`poisson`, `synthetic`)
//! made as the run reaches them instead of all at the build.
//!
//! A plan entry is 72 bytes; a long open-loop run plans millions of messages, each kept for the
//! whole run although the engine needs it only when the message starts. A streamed workload keeps
//! instead its generator as it was before the first draw ([`StreamedFlows::source`]) and how many
//! flows it makes (counted at the build by running a copy once, which also gives its report). The
//! engine runs its own copy as the flows' start times come (`engine::flows`), and anything that
//! needs a streamed flow's entry later (its ideal FCT, its row's labels, the outputs of flows
//! never started) regenerates it from the fresh copy with a [`StreamCursor`], forward, so that a
//! pass over the flows in id order draws each once. The generators draw the same sequence
//! however they are run, so a streamed run's outputs are byte for byte those of a planned one.
//!
//! Only trailing workloads stream: the streamed flows' ids follow every planned flow's, so
//! `FlowPlan::flows` stays indexed by flow id for the flows it holds. A run that cannot stream
//! (it keeps every flow's record) materialises them at its start
//! ([`super::FlowPlan::materialise_streams`]); on threads every partition runs every stream
//! and starts its own flows (`engine::flows`, `World::take_streamed`).

use super::poisson::PoissonArrivals;
use super::synthetic::SyntheticArrivals;
use super::FlowInit;

/// An open-loop generator, in time order (flow ids follow it).
#[derive(Debug, Clone)]
pub enum ArrivalStream {
    Poisson(PoissonArrivals),
    Synthetic(SyntheticArrivals),
}

impl Iterator for ArrivalStream {
    type Item = FlowInit;

    #[inline]
    fn next(&mut self) -> Option<FlowInit> {
        match self {
            ArrivalStream::Poisson(a) => a.next(),
            ArrivalStream::Synthetic(a) => a.next(),
        }
    }
}

/// A workload whose flows are made as the run goes: flow ids `first..first + count`.
#[derive(Debug, Clone)]
pub struct StreamedFlows {
    pub first: u32,
    pub count: u32,
    /// The generator before its first draw.
    pub source: ArrivalStream,
}

impl PartialEq for StreamedFlows {
    /// The same ids from the same workload (a generator is a function of its workload and seed).
    fn eq(&self, other: &Self) -> bool {
        (self.first, self.count) == (other.first, other.count)
    }
}

impl StreamedFlows {
    /// A stream from flow id `first` on (its count is set once the build counted it).
    pub fn new(first: usize, source: ArrivalStream) -> Self {
        StreamedFlows {
            first: u32::try_from(first).expect("flow ids fit in 32 bits"),
            count: 0,
            source,
        }
    }

    pub fn end(&self) -> u32 {
        self.first + self.count
    }

    pub fn contains(&self, id: u32) -> bool {
        (self.first..self.end()).contains(&id)
    }

    /// Every flow, in id order (the plan's entries, made again).
    pub fn flows(&self) -> impl Iterator<Item = FlowInit> + '_ {
        self.source.clone().take(self.count as usize)
    }
}

/// Regenerates streamed flows' entries by id: forward from where it is, from the stream's
/// start when asked for an earlier id, so a pass in id order costs one draw per flow.
#[derive(Debug, Clone, Default)]
pub struct StreamCursor {
    /// (the stream's index, the id `state` makes next, the generator).
    at: Option<(usize, u32, ArrivalStream)>,
    /// The entry made last, and its id: a pass often asks for one flow twice in a row.
    last: Option<(u32, FlowInit)>,
}

impl StreamCursor {
    /// The entry of streamed flow `id` (one of `streams`' ids).
    pub fn init(&mut self, streams: &[StreamedFlows], id: u32) -> FlowInit {
        if let Some((last, f)) = self.last {
            if last == id {
                return f;
            }
        }
        let k = streams
            .iter()
            .position(|s| s.contains(id))
            .expect("a streamed flow id");
        let s = &streams[k];
        let reuse = matches!(&self.at, Some((j, next, _)) if *j == k && *next <= id);
        if !reuse {
            self.at = Some((k, s.first, s.source.clone()));
        }
        let (_, next, state) = self.at.as_mut().expect("set above");
        loop {
            let f = state.next().expect("a stream makes its counted flows");
            *next += 1;
            if *next > id {
                self.last = Some((id, f));
                return f;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{plan_streamed, plan_with, FlowPlan};

    /// Plans of a 16-host leaf-spine with `workloads` (TOML tables), planned and streamed.
    fn plans(workloads: &str) -> (FlowPlan, FlowPlan) {
        let toml = format!(
            "seed = 5\nstop = \"200us\"\n[topology]\nkind = \"leaf_spine\"\nleaves = 4\n\
             spines = 2\nhosts_per_leaf = 4\n{workloads}"
        );
        let (_, s) = crate::scenario::parse_toml(&toml, "s.toml").unwrap_or_else(|e| panic!("{e}"));
        let planned = plan_with(&s.workloads, s.seed, None).unwrap();
        let streamed = plan_streamed(&s.workloads, s.seed, None).unwrap();
        (planned, streamed)
    }

    const PERMUTATION: &str = "[[workload]]\nkind = \"permutation\"\nsize = \"64KB\"\n";
    const POISSON: &str =
        "[[workload]]\nkind = \"poisson\"\ncdf = \"google_rpc\"\nload = 0.5\nstart = \"10us\"\n";
    const SYNTHETIC: &str = "[[workload]]\nkind = \"synthetic\"\npattern = \"uniform_random\"\n\
                             load = 0.3\nsize = \"4KiB\"\n";
    const INCAST: &str =
        "[[workload]]\nkind = \"incast\"\nreceiver = 0\nsenders = 4\nsize = \"32KB\"\n";

    #[test]
    fn a_streamed_plan_makes_the_planned_flows_at_the_same_ids() {
        let (planned, mut streamed) = plans(&format!("{PERMUTATION}{POISSON}{SYNTHETIC}"));
        // The permutation is planned; the two open-loop workloads after it stream.
        assert_eq!(streamed.flows.len(), 16);
        assert_eq!(streamed.streams.len(), 2);
        assert_eq!(streamed.streams[0].first, 16);
        assert_eq!(streamed.streams[1].first, streamed.streams[0].end());
        assert!(
            streamed.streams.iter().all(|s| s.count > 50),
            "{:?}",
            streamed.streams
        );
        assert_eq!(streamed.total_flows(), planned.flows.len());
        // What each workload generated is reported alike.
        assert_eq!(streamed.reports, planned.reports);
        // Any flow made again, in any order, is the planned one.
        let mut cursor = StreamCursor::default();
        let n = planned.flows.len() as u32;
        let mut order: Vec<u32> = (16..n).rev().step_by(7).collect();
        order.extend(16..n);
        order.extend([n - 1, 16, n / 2, n / 2, n / 2 + 1]);
        for id in order {
            assert_eq!(
                cursor.init(&streamed.streams, id),
                planned.flows[id as usize],
                "flow {id}"
            );
        }
        streamed.materialise_streams();
        assert!(streamed.streams.is_empty());
        assert_eq!(streamed, planned);
    }

    #[test]
    fn only_the_trailing_open_loop_workloads_stream() {
        // An incast after the Poisson workload: streaming it would move the incast's ids.
        let (planned, streamed) = plans(&format!("{POISSON}{INCAST}"));
        assert!(streamed.streams.is_empty());
        assert_eq!(streamed, planned);
        let (planned, streamed) = plans(&format!("{INCAST}{POISSON}"));
        assert_eq!((streamed.flows.len(), streamed.streams.len()), (4, 1));
        assert_eq!(streamed.total_flows(), planned.flows.len());
    }
}
