//! Asking the memory system in advance for the state that upcoming events touch.
//!
//! At thousands of hosts the engine waits on memory: each event's first touches (the port, its
//! queue, the packet at the head of a link) miss every cache level. The events a few places down
//! the lane the engine just popped run soon and name their port, so their lines can be requested
//! while the current event runs. A prefetch is only a hint: it never changes what the engine
//! computes, so outputs are byte-identical with or without it.

use super::queue::Event;
use super::world::{PortHot, World};
use crate::switch::PortQueue;

/// How far down the popped lane the port records are requested; nearer, once those are likely in
/// cache, the packet at the head of an arriving link; nearer still, once that packet is, the
/// egress port a switch will route it to.
const FAR: usize = 16;
const NEAR: usize = 8;
const NEXT_HOP: usize = 4;

/// Port state (hot records and queues) above which looking ahead pays: a core's L2 here. Below it
/// the ports stay in cache and the extra work is all cost. Working out egress ports ahead: about
/// 10 % more instructions at 128 hosts (0.2 MiB of port state), while the fat tree of 1,024 hosts
/// (1.5 MiB) runs in 0.92x the time, the one of 3,456 hosts (5.3 MiB) in about 0.8x (paired runs,
/// README). Asking for the upcoming events' ports and packets at all: 0.95x the time without it
/// at 128 hosts (9 pairs), 0.98x at 432 (k=12, 5 pairs), the 1,056-host dragonfly (0.6 MiB of
/// ports) and 256 GPUs the same (2026-12-05).
const LOOK_AHEAD_ABOVE: usize = 1 << 20;

/// Whether a fabric of `ports` ports has enough port state for working out routes ahead to pay.
pub(super) fn worth_looking_ahead(ports: usize) -> bool {
    ports * (std::mem::size_of::<PortHot>() + std::mem::size_of::<PortQueue>()) > LOOK_AHEAD_ABOVE
}

/// Request the cache line holding `r`'s first byte.
#[inline(always)]
fn hint<T>(r: &T) {
    hint_at((r as *const T).cast::<u8>());
}

/// Request the cache lines holding `r`'s first and last bytes (a record that may straddle two).
#[inline(always)]
fn hint_whole<T>(r: &T) {
    let first = (r as *const T).cast::<u8>();
    hint_at(first);
    hint_at(first.wrapping_add(std::mem::size_of::<T>() - 1));
}

/// Request the cache line holding address `at` (a no-op off x86-64).
#[inline(always)]
fn hint_at(at: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that reads nothing into the program and cannot fault, whatever
    // the address; ours point into live records anyway.
    #[allow(unsafe_code)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

impl World {
    /// Prefetch for the events `FAR`, `NEAR` and `NEXT_HOP` places behind the front of the lane
    /// just popped (where the fabric's port state outgrows the caches: [`LOOK_AHEAD_ABOVE`]).
    #[inline(always)]
    pub(super) fn prefetch_upcoming(&mut self) {
        if !self.look_ahead {
            return;
        }
        let upcoming = self.events.upcoming();
        match upcoming.at(FAR) {
            Some(Event::LinkArrival(p)) => hint(&self.ports[p]),
            Some(Event::PortFree(p)) => {
                hint(&self.ports[p]);
                hint(&self.queues[p]);
            }
            _ => {}
        }
        if let Some(Event::LinkArrival(p)) = upcoming.at(NEAR) {
            if let Some(head) = self.ports[p].pipe.front() {
                // A 48-byte record may straddle two lines.
                hint_whole(self.packets.get(head));
            }
        }
        if let Some(Event::PortFree(p)) = upcoming.at(NEAR) {
            // A port about to send: the packet it takes off its queue and the last one on its
            // wire, which the sent packet is linked behind.
            let port = &self.ports[p];
            if let Some(next) = self.queues[p].peek_strict(port.paused) {
                hint_whole(self.packets.get(next));
            }
            if let Some(last) = port.pipe.back() {
                hint_whole(self.packets.get(last));
            }
        }
        if let Some(Event::LinkArrival(p)) = upcoming.at(NEXT_HOP) {
            // The egress port's first touch is a switch's costliest: where the route is a function
            // of the packet alone, work it out now (the router remembers it for the event).
            let port = &self.ports[p];
            if port.to_host || port.to_scaleup {
                return;
            }
            let Some(head) = port.pipe.front() else {
                return;
            };
            let pkt = self.packets.get(head);
            let node = port.peer_node;
            if let Some(out) = self.router.predict(head, node, pkt.dst, pkt.header_key) {
                hint(&self.ports[out]);
                hint(&self.queues[out]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Routes worked out ahead (forced on for a fabric small enough to run without) change no
    /// output: ECMP through faults that replace the route table mid-run, and spraying, which
    /// nothing is worked out ahead for but single-path hops.
    #[test]
    fn working_out_routes_ahead_changes_nothing() {
        for lb in ["ecmp", "spray"] {
            let text = format!(
                "seed = 3\n[topology]\nkind = \"fat_tree\"\nk = 4\nlink_delay = \"500ns\"\n\
                 [routing]\nload_balancing = \"{lb}\"\n[transport]\nrto = \"20us\"\n\
                 [[fault]]\ntarget = \"core:1\"\nat = \"5us\"\nuntil = \"40us\"\ndetection = \"3us\"\n\
                 [[fault]]\nlink = [\"agg:0\", \"core:0\"]\nkind = \"flap\"\nat = \"2us\"\n\
                 down = \"4us\"\nup = \"6us\"\ncount = 3\ndetection = \"2us\"\n\
                 [[workload]]\nkind = \"permutation\"\nsize = \"200KB\"\n"
            );
            let (_, s) =
                crate::scenario::parse_toml(&text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
            let run = |ahead: bool| {
                let mut sim = crate::Simulation::build(&s).unwrap_or_else(|e| panic!("{e}"));
                assert!(
                    !sim.world_mut().look_ahead,
                    "a k=4 fat tree is below the bar"
                );
                sim.world_mut().look_ahead = ahead;
                let stats = sim.run_to_end();
                let used = sim.world_mut().router.foreseen_in_use();
                (format!("{stats:?}"), format!("{:?}", sim.flow_rows()), used)
            };
            let (plain, ahead) = (run(false), run(true));
            assert_eq!(plain.0, ahead.0, "{lb}: stats");
            assert_eq!(plain.1, ahead.1, "{lb}: flow rows");
            assert_eq!(plain.2, 0);
            assert!(ahead.2 > 0, "{lb}: no route was worked out ahead");
            assert!(plain.0.contains("faults_applied: 4"), "{}", plain.0);
        }
    }

    /// A PFC frame on a link between switches is addressed to the switch it pauses, which the
    /// route table has no entry for: nothing is worked out ahead for it (looking it up indexed
    /// the hosts' table past its end: a panic in any run above the bar that paused, such as a
    /// k=16 permutation with 1 MB buffers, until 2026-12-05).
    #[test]
    fn pfc_frames_are_not_routed_ahead() {
        let text = "seed = 1\nstop = \"100us\"\n[topology]\nkind = \"fat_tree\"\nk = 4\n\
                    [switch]\nbuffer = \"200KB\"\npfc = { enabled = true }\n\
                    [[workload]]\nkind = \"incast\"\nreceiver = 0\nsenders = 15\nsize = \"200KB\"\n";
        let (_, s) = crate::scenario::parse_toml(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
        let (plain, ahead) = (run_looking_ahead(&s, false), run_looking_ahead(&s, true));
        assert!(plain.2.pfc_pause_frames > 0, "{:?}", plain.2);
        assert_eq!(plain.0, ahead.0, "stats");
        assert_eq!(plain.1, ahead.1, "flow rows");
    }

    /// Run `s` to its end with routes worked out ahead (`ahead`) or not, whatever its size: its
    /// stats (printed, and as they are) and flow rows (printed).
    fn run_looking_ahead(
        s: &crate::scenario::Scenario,
        ahead: bool,
    ) -> (String, String, crate::engine::RunStats) {
        let mut sim = crate::Simulation::build(s).unwrap_or_else(|e| panic!("{e}"));
        sim.world_mut().look_ahead = ahead;
        let stats = sim.run_to_end();
        let rows = format!("{:?}", sim.flow_rows());
        (format!("{stats:?}"), rows, stats)
    }

    /// Every coverage scenario of the golden test (tests/golden/: PFC with spraying, faults,
    /// dragonflies, replay, HPCC, ...) runs the same with routes worked out ahead forced on: the
    /// fabrics tests and the fuzzer build are below the bar, so without this the path runs only
    /// in large runs (where a PFC frame once made it panic).
    #[test]
    fn golden_coverage_scenarios_run_the_same_with_routes_worked_out_ahead() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut paths: Vec<_> = std::fs::read_dir(dir.join("tests/golden"))
            .expect("the golden scenarios")
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        paths.sort();
        assert!(paths.len() >= 10, "{paths:?}");
        for path in paths {
            let text = std::fs::read_to_string(&path).expect("a scenario");
            let source = path.display().to_string();
            let (_, mut s) = crate::scenario::parse_toml(&text, &source)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            s.threads = 1; // (the view of a parallel run routes nothing)
            let (plain, ahead) = (run_looking_ahead(&s, false), run_looking_ahead(&s, true));
            assert_eq!(plain.0, ahead.0, "{}: stats", path.display());
            assert_eq!(plain.1, ahead.1, "{}: flow rows", path.display());
        }
    }
}
