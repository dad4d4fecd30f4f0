//! Whether a parallel run's windows go faster on threads or on one thread, measured as they
//! run (`parallel::Parallel::run`).
//!
//! On threads a window costs its slowest partition's work plus the threads' meeting: two
//! barriers, and whatever the machine's scheduler adds (a preempted vCPU, or two threads put on
//! one core, stretches a barrier to a scheduler slice). On one thread it costs every
//! partition's work in turn. Which is cheaper depends on the windows (a few events each, or
//! thousands; the barriers' bookkeeping) and on the machine, so neither is guessed: in one
//! window of [`SAMPLE_EVERY`] the window's wall time is measured (and on threads each
//! partition's busy time, its own steps without waits), and every [`EPOCH_WINDOWS`] measured
//! windows the run keeps its way or takes the other.
//!
//! Each way is judged by what it was measured to cost, wall time per event, when it last ran:
//! a partition's work measured on threads is no guide to what it costs on one thread. In
//! windows of a few events each the threads' busy times came to 1.5x to 2.7x what the same
//! work takes in turn on one (`scenarios/incast_pfc.toml`, 16 events a window: 5.4 us of busy
//! time a window on threads, 2.5 us a window in all on one thread; until 2026-12-05 the run was
//! judged by those busy times and kept its threads, 2.5x one world's time). So each way is
//! tried now and then, ever less often while it loses: one thread after 1, 2, 4 ... 256 epochs
//! on threads, where windows are small ([`TRY_ONE_BELOW_EVENTS`]); threads after 4, 8 ... 256
//! epochs on one thread, and at once when the windows grow four times busier than when threads
//! last ran (a burst of traffic after a quiet spell).
//!
//! The choice changes the speed only: a window's partitions need nothing from each other but
//! its mail, so running them in turn gives what the threads give, byte for byte.

use std::time::{Duration, Instant};

/// The measured windows over which the costs are averaged before each choice.
pub const EPOCH_WINDOWS: u32 = 32;
/// The fewest measured windows after which one thread gives way to threads for a burst.
const EARLY_WINDOWS: u32 = 4;
/// Epochs on one thread before threads are tried again, at first; doubled each time one
/// thread stays the faster, up to [`PROBE_MAX`].
const PROBE_FIRST: u32 = 4;
const PROBE_MAX: u32 = 256;
/// Windows of fewer events than this, on average, are where one thread is tried on a run on
/// threads (after [`TRY_FIRST`] epochs, then ever less often up to [`PROBE_MAX`]). In busier
/// windows the threads' meeting is a small part of a window: trying one thread there would
/// cost an epoch at up to half speed (`scenarios/failures_mtbf.toml`, about 450 events a
/// window, runs 1.6x as fast on two threads as on one; tried below 512 events after 1, 2, 4
/// ... epochs, it took 1.07x the time of threads throughout; the k=16 permutation's windows
/// hold about 1,300 events).
const TRY_ONE_BELOW_EVENTS: u64 = 256;
const TRY_FIRST: u32 = 4;

/// What one way of running the windows was measured to cost in its last two epochs.
#[derive(Debug, Clone, Copy)]
struct Cost {
    /// Wall time per event, in ps (events of windows run merged included: they take one thread
    /// either way, and their time is left out of both): the lower of its last two epochs' if
    /// their windows were alike (`alike`), as one preempted vCPU can stretch a whole epoch on
    /// threads (5.8 ms for 32 windows of 2 us).
    ps_per_event: u64,
    /// In its last epoch: the wall time per event and the events per window.
    last_ps_per_event: u64,
    events_per_window: u64,
}

impl Cost {
    /// The cost after an epoch of `wall` ns, `events` events and `windows` windows, given the
    /// one before (None: the first epoch this way).
    fn after(before: Option<Cost>, wall: u64, events: u64, windows: u32) -> Self {
        let last = wall.saturating_mul(1000) / events.max(1);
        let events_per_window = events / u64::from(windows.max(1));
        let before = before.filter(|b| b.alike(events_per_window));
        Self {
            ps_per_event: before.map_or(last, |b| b.last_ps_per_event.min(last)),
            last_ps_per_event: last,
            events_per_window,
        }
    }

    /// Whether it was measured on windows like those of `events_per_window` events (within a
    /// factor of 2): a window's own cost (its statuses, decision and mail, and the threads'
    /// meeting) weighs less per event the more events it holds, so costs per event measured
    /// on windows unlike compare poorly.
    fn alike(&self, events_per_window: u64) -> bool {
        let (a, b) = (self.events_per_window.max(1), events_per_window.max(1));
        a <= 2 * b && b <= 2 * a
    }

    /// Whether it is below `other`'s by a margin: under `percent` % of it.
    fn under(&self, other: &Cost, percent: u64) -> bool {
        self.ps_per_event.saturating_mul(100) < other.ps_per_event.saturating_mul(percent)
    }
}

/// The costs measured in the current epoch and what decides the next choice; every thread
/// keeps it alike (it counts the same posted figures in the same windows).
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    /// Sums over the epoch's measured windows: their count, wall time (ns), events, and every
    /// partition's busy time (ns; measured on threads only).
    windows: u32,
    wall: u64,
    events: u64,
    busy_sum: u64,
    /// The run's events at the last window counted (each window's are the difference).
    events_seen: u64,
    /// Each way's cost as last measured (None: not yet run a whole epoch).
    threads: Option<Cost>,
    one: Option<Cost>,
    /// Epochs on one thread left before threads are tried again, and the next such wait.
    probe_in: u32,
    probe_every: u32,
    /// Epochs on threads (of small windows) left before one thread is tried, and the next.
    try_in: u32,
    try_every: u32,
    /// This epoch on one thread is a try (it stays only if it costs under 90 % of threads).
    trying_one: bool,
    /// Tests: switch every this many windows, whatever they cost (0: as measured).
    alternate: u32,
}

impl Default for Pace {
    fn default() -> Self {
        Self {
            windows: 0,
            wall: 0,
            events: 0,
            busy_sum: 0,
            events_seen: 0,
            threads: None,
            one: None,
            probe_in: PROBE_FIRST,
            probe_every: PROBE_FIRST,
            try_in: TRY_FIRST,
            try_every: TRY_FIRST,
            trying_one: false,
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

    /// One window's figures: each partition's busy time (0 on one thread), the window's wall
    /// time (ns) and the run's events so far. A window without a wall time (not measured, or
    /// the first of a stretch in either way) is not counted.
    pub fn count(&mut self, busy: impl Iterator<Item = u64>, wall: u64, events: u64) {
        let window_events = events.saturating_sub(self.events_seen);
        self.events_seen = events;
        if self.alternate > 0 {
            self.windows += 1;
            return;
        }
        if wall == 0 {
            return;
        }
        self.windows += 1;
        self.wall += wall;
        self.events += window_events;
        self.busy_sum += busy.sum::<u64>();
    }

    /// At a window's end, for a run now `serial` (on one thread) or not: whether it should
    /// take the other way from the next window on. Each way's cost is compared with the other's
    /// as last measured on windows alike (`Cost::alike`), and must be clearly lower to switch:
    /// epochs' costs vary by about a fifth on this machine. On threads: one thread is taken
    /// when it costs under 90 % of them per event, or when even the partitions' busy times on
    /// threads add up to less than the wall time (one partition does the work); or it is
    /// tried, where windows are small (above). On one thread: threads are taken when they cost
    /// under 80 % of it (in between, one thread stays: it frees a core), or tried again
    /// (above).
    pub fn switch(&mut self, serial: bool) -> bool {
        if self.alternate > 0 {
            let now = self.windows >= self.alternate;
            if now {
                self.windows = 0;
            }
            return now;
        }
        let per_window = self.events / u64::from(self.windows.max(1));
        // Windows grown busy on one thread (a burst of traffic after a quiet spell) go back to
        // threads without waiting for the epoch's end.
        let burst = serial
            && self.windows >= EARLY_WINDOWS
            && (self.threads).is_some_and(|t| per_window >= 4 * t.events_per_window.max(1));
        if self.windows < EPOCH_WINDOWS && !burst {
            return false;
        }
        let before = if serial { self.one } else { self.threads };
        let cost = Cost::after(before, self.wall, self.events, self.windows);
        let (wall, busy_sum) = (self.wall, self.busy_sum);
        (self.windows, self.wall, self.events, self.busy_sum) = (0, 0, 0, 0);
        let epw = cost.events_per_window;
        if serial {
            self.one = Some(cost);
            let threads = self.threads.filter(|t| t.alike(epw));
            // A try is judged as threads judge one thread.
            let faster = if std::mem::take(&mut self.trying_one) {
                !threads.is_some_and(|t| cost.under(&t, 90))
            } else {
                threads.is_some_and(|t| t.under(&cost, 80))
            };
            if faster || burst {
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
            self.threads = Some(cost);
            let one = self.one.filter(|o| o.alike(epw));
            if busy_sum < wall || one.is_some_and(|o| o.under(&cost, 90)) {
                self.probe_in = self.probe_every;
                self.try_every = TRY_FIRST;
                return true;
            }
            if epw < TRY_ONE_BELOW_EVENTS {
                self.try_in -= 1;
                if self.try_in == 0 {
                    self.try_every = (self.try_every * 2).min(PROBE_MAX);
                    self.try_in = self.try_every;
                    self.trying_one = true;
                    self.probe_in = self.probe_every;
                    return true;
                }
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
    #[cfg(test)]
    fn on(&self) -> bool {
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

    /// Run `f`, leaving the time it takes (spent stopped) out of the lap's wall time too, if
    /// it is measured.
    pub fn skipping<T>(&mut self, f: impl FnOnce() -> T) -> T {
        if !self.on {
            return f();
        }
        let start = Instant::now();
        let r = f();
        self.skipped += start.elapsed();
        r
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

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An epoch of measured windows, each of `events` events with these partitions' busy
    /// times (none on one thread) and wall time.
    fn epoch(pace: &mut Pace, busy: &[u64], wall: u64, events: u64) {
        for _ in 0..EPOCH_WINDOWS {
            window(pace, busy, wall, events);
        }
    }

    /// Epochs on threads of 16 events a window, each partition of two busy `busy` ns and the
    /// windows `wall` ns, until one thread is tried: after [`TRY_FIRST`] of them.
    fn tried(pace: &mut Pace, busy: u64, wall: u64) {
        for e in 1..=TRY_FIRST {
            epoch(pace, &[busy, busy], wall, 16);
            assert_eq!(pace.switch(false), e == TRY_FIRST, "epoch {e}");
        }
    }

    /// Run `epochs` epochs of 16 events a window, each partition of two busy `on_threads.0`
    /// and the windows `on_threads.1` ns on threads, `on_one` ns on one thread: the epochs
    /// after which the run went to one thread (`to_one`) or to threads.
    fn switches(
        pace: &mut Pace,
        epochs: usize,
        on_threads: (u64, u64),
        on_one: u64,
        to_one: bool,
    ) -> Vec<usize> {
        let mut tries = Vec::new();
        let mut serial = false;
        for e in 0..epochs {
            if serial {
                epoch(pace, &[], on_one, 16);
            } else {
                epoch(pace, &[on_threads.0, on_threads.0], on_threads.1, 16);
            }
            if pace.switch(serial) {
                serial = !serial;
                if serial == to_one {
                    tries.push(e);
                }
            }
        }
        tries
    }

    fn window(pace: &mut Pace, busy: &[u64], wall: u64, events: u64) {
        let seen = pace.events_seen + events;
        pace.count(busy.iter().copied(), wall, seen);
    }

    #[test]
    fn threads_give_way_when_one_thread_was_measured_cheaper() {
        let mut pace = Pace::default();
        // Busy times on threads that add up to more than the wall time (they do, measured
        // there, in small windows) say nothing: threads stay until one thread is tried.
        tried(&mut pace, 3_000, 3_500);
        // On one thread, 2.5 us a window: it stays.
        epoch(&mut pace, &[], 2_500, 16);
        assert!(!pace.switch(true));
    }

    #[test]
    fn a_try_of_one_thread_that_loses_goes_back_to_threads() {
        let mut pace = Pace::default();
        tried(&mut pace, 3_000, 3_500);
        // 4 us a window on one thread against 3.5 on threads.
        epoch(&mut pace, &[], 4_000, 16);
        assert!(pace.switch(true));
        // Tried again after 8, then 16 epochs on threads.
        let tries = switches(&mut pace, 40, (3_000, 3_500), 4_000, true);
        assert_eq!(tries, [7, 24]);
    }

    #[test]
    fn threads_give_way_when_one_partition_does_the_work() {
        // One partition busy for the whole window, the other idle: one thread would take as
        // long, with a core to spare.
        let mut pace = Pace::default();
        epoch(&mut pace, &[100_000, 500], 101_000, 5_000);
        assert!(pace.switch(false));
        // On one thread as long: threads do not cost under 80 % of it.
        epoch(&mut pace, &[], 100_500, 5_000);
        assert!(!pace.switch(true));
    }

    #[test]
    fn threads_stay_when_they_share_busy_windows() {
        let mut pace = Pace::default();
        for _ in 0..10 {
            epoch(&mut pace, &[100_000, 90_000], 105_000, 2_000);
            assert!(!pace.switch(false), "busy windows: one thread is not tried");
        }
        // Not before an epoch is full.
        window(&mut pace, &[1, 1], 1_000_000, 1);
        assert!(!pace.switch(false));
    }

    #[test]
    fn one_thread_gives_way_when_the_windows_grow_busy() {
        let mut pace = Pace::default();
        tried(&mut pace, 3_000, 3_500);
        epoch(&mut pace, &[], 2_500, 16);
        assert!(!pace.switch(true));
        // Now 1,000 events a window, four times the 16 of the threads' last epoch and more,
        // known after a few windows.
        for w in 1..=EARLY_WINDOWS {
            window(&mut pace, &[], 100_000, 1_000);
            assert_eq!(pace.switch(true), w == EARLY_WINDOWS, "window {w}");
        }
        // Not so for windows only a little busier than when threads last ran.
        let mut pace = Pace::default();
        tried(&mut pace, 3_000, 3_500);
        for _ in 0..EARLY_WINDOWS {
            window(&mut pace, &[], 3_000, 30);
            assert!(!pace.switch(true));
        }
    }

    #[test]
    fn one_thread_tries_threads_again_ever_less_often() {
        let mut pace = Pace::default();
        let tries = switches(&mut pace, 200, (1_000, 4_000), 2_000, false);
        // Tried after 4, 8, 16, 32, 64 epochs on one thread (each try is one epoch on threads).
        let gaps: Vec<_> = tries.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(&gaps[..4], &[9, 17, 33, 65]);
    }

    #[test]
    fn one_stretched_epoch_on_threads_costs_one_epoch_on_one_thread() {
        let mut pace = Pace::default();
        for _ in 0..3 {
            epoch(&mut pace, &[1_800, 1_800], 2_000, 1_000);
            assert!(!pace.switch(false));
        }
        // A preempted vCPU stretches every window of an epoch: one thread is tried ...
        epoch(&mut pace, &[1_800, 1_800], 100_000, 1_000);
        assert!(pace.switch(false));
        // ... and given up after an epoch, judged against threads' better epoch of the two.
        epoch(&mut pace, &[], 3_000, 1_000);
        assert!(pace.switch(true));
    }

    #[test]
    fn a_near_tie_keeps_threads() {
        // One thread tried at 94 % of the threads' cost: not clearly cheaper, so threads again,
        // and they stay (but for the tries).
        let mut pace = Pace::default();
        tried(&mut pace, 1_800, 3_500);
        epoch(&mut pace, &[], 3_300, 16);
        assert!(pace.switch(true));
        epoch(&mut pace, &[1_800, 1_800], 3_500, 16);
        assert!(!pace.switch(false));
    }

    #[test]
    fn costs_on_windows_unlike_are_not_compared() {
        // One thread measured on windows of 16 events at 100 ns an event; threads later on
        // windows of 1,000 at 150 ns: no switch, though one thread looks cheaper.
        let mut pace = Pace::default();
        epoch(&mut pace, &[1_000, 1_000], 4_000, 16);
        assert!(pace.switch(false));
        // Threads tried again after 4 epochs, when the windows have grown.
        for e in 1..=PROBE_FIRST {
            epoch(&mut pace, &[], 1_600, 16);
            assert_eq!(pace.switch(true), e == PROBE_FIRST);
        }
        epoch(&mut pace, &[100_000, 100_000], 150_000, 1_000);
        assert!(!pace.switch(false));
    }

    #[test]
    fn each_way_is_judged_per_event() {
        // Threads measured on windows of 16 events (4 us: 250 ns an event); one thread later on
        // windows of 32 (6 us: 187.5 ns an event): one thread is cheaper, though its windows
        // take longer.
        let mut pace = Pace::default();
        epoch(&mut pace, &[1_000, 1_000], 4_000, 16);
        assert!(pace.switch(false));
        epoch(&mut pace, &[], 6_000, 32);
        assert!(!pace.switch(true));
    }

    #[test]
    fn a_watch_leaves_waits_and_skipped_time_out() {
        let mut w = Watch::new();
        // The windows before the first measured one give nothing, and what they skip is not
        // taken from it.
        for _ in 1..SAMPLE_EVERY {
            assert_eq!(w.lap(), (0, 0));
            assert!(!w.on());
            w.skipping(|| std::thread::sleep(Duration::from_millis(1)));
        }
        let start = Instant::now();
        assert_eq!(w.lap(), (0, 0));
        assert!(w.on());
        std::thread::sleep(Duration::from_millis(2));
        w.stop();
        w.skipping(|| std::thread::sleep(Duration::from_millis(4)));
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
