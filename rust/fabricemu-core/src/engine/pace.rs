//! Whether a parallel run's windows go faster on threads or on one thread, measured as they
//! run (`parallel::Parallel::run`).
//!
//! On threads a window costs its slowest partition's work plus the threads' meeting: two
//! barriers, and whatever the machine's scheduler adds (a preempted vCPU, or two threads put on
//! one core, stretches a barrier to a scheduler slice). On one thread it costs every
//! partition's work in turn. Which is cheaper depends on the windows (a few events each, or
//! thousands; the barriers' bookkeeping) and on the machine, so neither is guessed: in one
//! window of [`SAMPLE_EVERY`], each partition's busy time (its own steps, without waits) and
//! the window's wall time are measured, and every [`EPOCH_WINDOWS`] measured windows the run
//! keeps its way or takes the other. On one thread, threads are tried again now and then ([`Pace::switch`]), since their
//! meeting's cost is known only from when they last ran.
//!
//! The choice changes the speed only: a window's partitions need nothing from each other but
//! its mail, so running them in turn gives what the threads give, byte for byte.

use std::time::{Duration, Instant};

/// The measured windows over which the costs are averaged before each choice.
pub const EPOCH_WINDOWS: u32 = 32;
/// The fewest windows after which one thread gives way to threads that would take under 60 %
/// of its time.
const EARLY_WINDOWS: u32 = 4;
/// Epochs on one thread before threads are tried again, at first; doubled each time one
/// thread stays the faster, up to [`PROBE_MAX`].
const PROBE_FIRST: u32 = 4;
const PROBE_MAX: u32 = 256;

/// The costs measured in the current epoch and what decides the next choice; every thread
/// keeps it alike (it counts the same posted figures in the same windows).
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    windows: u32,
    /// Sums over the epoch's windows, in ns: wall time, every partition's busy time, and the
    /// busiest partition's.
    wall: u64,
    busy_sum: u64,
    busy_max: u64,
    /// Per window and in ns, what the threads' meeting cost in their last epoch: the wall time
    /// beyond the busiest partition's work.
    meeting: u64,
    /// Epochs on one thread left before threads are tried again, and the next such wait.
    probe_in: u32,
    probe_every: u32,
    /// Tests: switch every this many windows, whatever they cost (0: as measured).
    alternate: u32,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            windows: 0,
            wall: 0,
            busy_sum: 0,
            busy_max: 0,
            meeting: 0,
            probe_in: PROBE_FIRST,
            probe_every: PROBE_FIRST,
            alternate: 0,
        }
    }
}

impl Pace {
    /// For tests: a pace that switches every `every` windows, whatever they cost.
    pub fn alternating(every: u32) -> Self {
        Self {
            alternate: every.max(1),
            ..Self::default()
        }
    }

    /// One window's figures: each partition's busy time and the window's wall time (ns). A
    /// window without a wall time (the first of a stretch in either way) is not counted.
    pub fn count(&mut self, busy: impl Iterator<Item = u64>, wall: u64) {
        if self.alternate > 0 {
            self.windows += 1;
            return;
        }
        if wall == 0 {
            return;
        }
        let (sum, max) = busy.fold((0u64, 0u64), |(s, m), b| (s + b, m.max(b)));
        self.windows += 1;
        self.wall += wall;
        self.busy_sum += sum;
        self.busy_max += max;
    }

    /// At a window's end, for a run now `serial` (on one thread) or not: whether it should
    /// take the other way from the next window on. On threads: when one thread would have run
    /// the epoch's windows in less than their wall time. A tie goes to one thread: it frees a
    /// core, and what a partition's work costs is measured on threads a little dearer than it
    /// runs on one (one partition doing all the work of `scenarios/inference_decode.toml` ran
    /// 1.14x as long on threads as in turn on one, measured as a tie). On one thread: when the
    /// threads, at the busiest partition's work plus their last measured meeting, would have
    /// taken under 80 % of it, or when it is time to try them again.
    pub fn switch(&mut self, serial: bool) -> bool {
        if self.alternate > 0 {
            let now = self.windows >= self.alternate;
            if now {
                self.windows = 0;
            }
            return now;
        }
        let (n, wall, sum, max) = (
            u64::from(self.windows),
            self.wall,
            self.busy_sum,
            self.busy_max,
        );
        // On threads: the busiest partition's work, and the meeting as last measured.
        let threads = max.saturating_add(self.meeting.saturating_mul(n));
        // Windows grown busy on one thread (a burst of traffic after a quiet spell) go back to
        // threads without waiting for the epoch's end.
        let burst = serial && self.windows >= EARLY_WINDOWS && threads < wall / 5 * 3;
        if self.windows < EPOCH_WINDOWS && !burst {
            return false;
        }
        (self.windows, self.wall, self.busy_sum, self.busy_max) = (0, 0, 0, 0);
        if serial {
            if threads < wall / 5 * 4 {
                self.probe_every = PROBE_FIRST;
                return true;
            }
            self.probe_in -= 1;
            if self.probe_in == 0 {
                self.probe_every = (self.probe_every * 2).min(PROBE_MAX);
                return true;
            }
            false
        } else {
            self.meeting = wall.saturating_sub(max) / n;
            if sum < wall {
                self.probe_in = self.probe_every;
                return true;
            }
            // Threads hold their own: should they give way later, try them again soon.
            self.probe_every = PROBE_FIRST;
            false
        }
    }
}

/// One window in this many is measured: enough for the epochs' means, and the clock is read
/// a few times a window only in those (a window of 16 events takes about 5 us).
const SAMPLE_EVERY: u32 = 4;

/// A partition's busy time and a window's wall time, as a thread runs its steps: `stop` before
/// it waits (a barrier), `go` after; `lap` at each window's start gives the last window's, if
/// it was measured. Every thread's watch measures the same windows (one in [`SAMPLE_EVERY`],
/// counted by laps from the start).
pub struct Watch {
    /// This window is measured.
    on: bool,
    laps: u32,
    since: Instant,
    running: bool,
    busy: Duration,
    lap_start: Instant,
    /// Within the lap: time that counts in neither (the windows run merged, which take one
    /// thread either way).
    skipped: Duration,
}

impl Watch {
    pub fn new() -> Self {
        let now = Instant::now();
        Self {
            on: false,
            laps: 0,
            since: now,
            running: true,
            busy: Duration::ZERO,
            lap_start: now,
            skipped: Duration::ZERO,
        }
    }

    /// Whether this window is measured.
    pub fn on(&self) -> bool {
        self.on
    }

    pub fn stop(&mut self) {
        if self.on && self.running {
            self.busy += self.since.elapsed();
            self.running = false;
        }
    }

    pub fn go(&mut self) {
        if self.on {
            self.since = Instant::now();
            self.running = true;
        }
    }

    /// Leave `d` (spent stopped) out of the lap's wall time too, if it is measured.
    pub fn skip(&mut self, d: Duration) {
        if self.on {
            self.skipped += d;
        }
    }

    /// The busy and wall time (ns) of the window just ended if it was measured (else wall 0),
    /// and the next window.
    pub fn lap(&mut self) -> (u64, u64) {
        let was_on = self.on;
        self.laps = self.laps.wrapping_add(1);
        self.on = self.laps.is_multiple_of(SAMPLE_EVERY);
        if !was_on && !self.on {
            return (0, 0);
        }
        // One read of the clock ends the lap and starts the next.
        let now = Instant::now();
        let measured = if was_on {
            if self.running {
                self.busy += now.saturating_duration_since(self.since);
            }
            let wall = now.saturating_duration_since(self.lap_start);
            // At least 1 ns: 0 says the window was not measured.
            let wall = nanos(wall.saturating_sub(self.skipped)).max(1);
            (nanos(self.busy), wall)
        } else {
            (0, 0)
        };
        (self.busy, self.skipped) = (Duration::ZERO, Duration::ZERO);
        (self.lap_start, self.since, self.running) = (now, now, true);
        measured
    }
}

/// Run `f`, adding the time it took to `busy` (ns) if `on`.
pub fn timed<T>(on: bool, busy: &mut u64, f: impl FnOnce() -> T) -> T {
    if !on {
        return f();
    }
    let start = Instant::now();
    let r = f();
    *busy += nanos(start.elapsed());
    r
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An epoch of `windows` windows, each with these partitions' busy times and wall time.
    fn epoch(pace: &mut Pace, busy: &[u64], wall: u64) {
        for _ in 0..EPOCH_WINDOWS {
            pace.count(busy.iter().copied(), wall);
        }
    }

    #[test]
    fn threads_give_way_when_their_meeting_costs_more_than_they_share() {
        let mut pace = Pace::default();
        // Two partitions of 10 us each, windows of 40 us on threads (30 us of meeting): one
        // thread would take 20 us.
        epoch(&mut pace, &[10_000, 10_000], 40_000);
        assert!(pace.switch(false));
        // On one thread, 20 us a window; threads would take 10 + 30 us: stay.
        epoch(&mut pace, &[10_000, 10_000], 20_000);
        assert!(!pace.switch(true));
    }

    #[test]
    fn threads_give_way_when_one_partition_does_the_work() {
        // One partition busy for the whole window, the other idle: one thread would take as
        // long, with a core to spare.
        let mut pace = Pace::default();
        epoch(&mut pace, &[100_000, 500], 101_000);
        assert!(pace.switch(false));
        // On one thread threads would take as long again: stay.
        epoch(&mut pace, &[100_000, 500], 100_500);
        assert!(!pace.switch(true));
    }

    #[test]
    fn threads_stay_when_they_share_the_work() {
        let mut pace = Pace::default();
        epoch(&mut pace, &[100_000, 90_000], 105_000);
        assert!(!pace.switch(false));
        // Not before an epoch is full.
        pace.count([1, 1].into_iter(), 1_000_000);
        assert!(!pace.switch(false));
    }

    #[test]
    fn one_thread_gives_way_when_the_windows_grow_busy() {
        let mut pace = Pace::default();
        epoch(&mut pace, &[10_000, 10_000], 40_000);
        assert!(pace.switch(false));
        // Now 1 ms per partition: threads would take 1 ms + 30 us against 2 ms, known after a
        // few windows.
        for w in 1..=EARLY_WINDOWS {
            pace.count([1_000_000, 1_000_000].into_iter(), 2_000_000);
            assert_eq!(pace.switch(true), w == EARLY_WINDOWS, "window {w}");
        }
        // Not so for windows only a little busier than threads would take.
        epoch(&mut pace, &[10_000, 10_000], 40_000);
        assert!(pace.switch(false));
        for _ in 0..EARLY_WINDOWS {
            pace.count([20_000, 20_000].into_iter(), 40_000);
            assert!(!pace.switch(true));
        }
    }

    #[test]
    fn one_thread_tries_threads_again_ever_less_often() {
        let mut pace = Pace::default();
        let mut tries = Vec::new();
        let mut serial = false;
        for e in 0..200 {
            if serial {
                epoch(&mut pace, &[10_000, 10_000], 20_000);
            } else {
                epoch(&mut pace, &[10_000, 10_000], 40_000);
            }
            if pace.switch(serial) {
                serial = !serial;
                if !serial {
                    tries.push(e);
                }
            }
        }
        // Tried after 4, 8, 16, 32, 64 epochs on one thread (each try is one epoch on threads).
        let gaps: Vec<_> = tries.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(&gaps[..4], &[9, 17, 33, 65]);
    }

    #[test]
    fn a_watch_leaves_waits_and_skipped_time_out() {
        let mut w = Watch::new();
        // The windows before the first measured one give nothing, and what they skip is not
        // taken from it.
        for _ in 1..SAMPLE_EVERY {
            assert_eq!(w.lap(), (0, 0));
            assert!(!w.on());
            w.skip(Duration::from_secs(1));
        }
        let start = Instant::now();
        assert_eq!(w.lap(), (0, 0));
        assert!(w.on());
        std::thread::sleep(Duration::from_millis(2));
        w.stop();
        std::thread::sleep(Duration::from_millis(4));
        w.skip(Duration::from_millis(4));
        w.go();
        let (busy, wall) = w.lap();
        // Only what the sleeps guarantee: at least 2 ms busy, and the 4 ms stopped and skipped
        // in neither.
        let total = nanos(start.elapsed());
        assert!(busy >= 2_000_000, "busy {busy}");
        assert!(busy <= total - 4_000_000, "busy {busy} of {total}");
        assert!(
            wall >= busy && wall <= total - 4_000_000,
            "wall {wall} of {total}"
        );
        // The next window is not measured.
        assert!(!w.on());
        assert_eq!(w.lap(), (0, 0));
    }
}
