//! The live driver: a worker loop on a real clock over [`Port`]s, as one lcore runs it.
//!
//! Each iteration: apply due control commands, rx burst from every port into the ingress
//! pipeline, time-driven work (recirculation, PFC refresh, timers), transmit what each port may
//! send now, and every stats interval copy the counters into the shared snapshot (`try_lock`:
//! the worker never waits on the control thread). An idle worker sleeps briefly (pcap and memory
//! ports are not busy-polled NICs; the DPDK driver busy-polls).

use longhaul_dataplane::asic::pfc::PfcGenerator;
use longhaul_dataplane::control::mono_ns;
use longhaul_dataplane::engine::{Admission, Pipeline, Switch, SwitchSnapshot};
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::port::BURST;
use longhaul_dataplane::port::{Port, PortIoStats};
use longhaul_dataplane::time::Nanos;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How far a port's link clock may lag the loop's clock (see
/// `TrafficManager::set_tx_slack`): each iteration sends what the link could have sent since the
/// previous one, up to this much after an idle spell (20 us: 250 kB at 100 Gb/s).
pub const LIVE_TX_SLACK_NS: Nanos = 20_000;

/// How a worker runs.
pub struct WorkerOptions {
    /// Set by the signal handler or the caller to stop the worker.
    pub stop: Arc<AtomicBool>,
    /// Counter snapshot shared with the control thread.
    pub snapshot: Arc<Mutex<SwitchSnapshot>>,
    /// How often the snapshot is refreshed.
    pub stats_interval: Duration,
    /// Stop by itself once every port's rx is exhausted and the switch has nothing left to
    /// send (pcap runs, tests); otherwise run until `stop`.
    pub until_idle: bool,
    /// Sleep this long when an iteration found no work (0 = spin).
    pub idle_sleep: Duration,
    /// With several workers, `until_idle` does not stop a worker by itself (another may still
    /// hand it frames): it raises this flag while it is idle and runs on until `stop`; the run
    /// stops every worker once all flags stay raised (see `run::run_with`).
    pub idle_flag: Option<Arc<AtomicBool>>,
}

/// What a worker did.
#[derive(Clone, Debug, Default)]
pub struct WorkerSummary {
    pub iterations: u64,
    pub rx: u64,
    pub tx: u64,
    pub ports: Vec<PortIoStats>,
    /// Switches swapped in by a reload that rebuilt the switch.
    pub swaps: u64,
    /// Frames a replaced switch still held and sent after the swap ([`DRAIN_DEADLINE_NS`]).
    pub drained_on_swap: u64,
    /// Frames a replaced switch still held when its drain deadline passed (dropped, counted).
    pub dropped_on_swap: u64,
}

/// How long a replaced switch may take to send what it still holds after a reload rebuilt it:
/// past this (a port paused by its peer for good), what is left is dropped and counted
/// (`dropped_on_swap`).
pub const DRAIN_DEADLINE_NS: Nanos = 1_000_000_000;

/// Frames per chunk between two checks of a slot timer ([`Switch::has_slot_timer`]) when its
/// deadline is near: at about 150 ns a frame through the pipeline, a check every 1-2 us, for
/// a slot of 10 us. That bounds the timer's lateness (a chunk's time).
pub const SLOT_CHUNK: usize = 8;

/// The most [`SlotPacer`] assumes a frame may take in one phase of the worker (its rx and
/// pipeline, or its transmit), and what it assumes before it has measured: about 100 ns on the
/// perf/ configs, with margin.
pub const SLOT_FRAME_NS: Nanos = 250;

/// The least [`SlotPacer`] assumes a frame may take, however fast the frames it measured.
pub const SLOT_FRAME_MIN_NS: Nanos = 20;

/// When a live worker looks at a slot timer between chunks of its bursts, and when that needs the
/// clock. Reading the clock is not free: `Instant::now` cost about 120 ns on the project's VM,
/// more than a frame, and a read after every chunk of [`SLOT_CHUNK`] took 30 ns per frame
/// (perf/README.md). So a chunk is as long as the time left before the deadline allows at the
/// pacer's per-frame estimate (between [`SLOT_CHUNK`] and a burst), and the clock is read after a
/// chunk only when, counting the estimate for every frame since the last read, the deadline may
/// have come. A chunk that can cross the deadline is then at most [`SLOT_CHUNK`] frames, and the
/// timer is looked at right after it: the timer is late by at most a chunk of [`SLOT_CHUNK`]
/// frames as long as a frame takes no longer than the estimate; far from the deadline, whole
/// bursts go through with no read. A timer disarmed (at rest) is looked at after the whole burst:
/// an arrival that arms it in the burst's middle has its first slot checked at the burst's end.
///
/// The estimate is measured: twice the average time of the frames between two clock reads (at
/// least [`SLOT_CHUNK`] of them; the time includes the loop's other work, so it errs long), taken
/// at once when it is longer than the estimate and by an eighth of the difference when shorter,
/// within [`SLOT_FRAME_MIN_NS`, `SLOT_FRAME_NS`]. At T = 10 us and 35 ns a frame (about the
/// full rate of the perf/ configs), the fixed [`SLOT_FRAME_NS`] read the clock 15 times a slot,
/// the measured estimate 7 (`slot_pacer_bounds_the_lateness_and_reads_less_as_frames_get_faster`).
struct SlotPacer {
    /// Nanoseconds the frames since the last clock read may have taken, at `frame_ns` each.
    spent: Nanos,
    /// What a frame is assumed to take.
    frame_ns: Nanos,
    /// The last clock read, and the frames since.
    read_at: Nanos,
    frames: u64,
}

impl Default for SlotPacer {
    fn default() -> Self {
        SlotPacer {
            spent: 0,
            frame_ns: SLOT_FRAME_NS,
            read_at: 0,
            frames: 0,
        }
    }
}

impl SlotPacer {
    /// The clock was read: `now`.
    fn read(&mut self, now: Nanos) {
        if self.frames >= SLOT_CHUNK as u64 {
            let seen = 2 * (now.saturating_sub(self.read_at) / self.frames);
            let f = if seen >= self.frame_ns {
                seen
            } else {
                self.frame_ns - (self.frame_ns - seen) / 8
            };
            self.frame_ns = f.clamp(SLOT_FRAME_MIN_NS, SLOT_FRAME_NS);
        }
        self.read_at = now;
        self.frames = 0;
        self.spent = 0;
    }

    /// Frames to take (at most `left`) before the next look at a timer due at `deadline`, the
    /// clock last read at `now`.
    fn chunk(&self, deadline: Option<Nanos>, now: Nanos, left: usize) -> usize {
        let Some(d) = deadline else { return left };
        let fit = d.saturating_sub(now + self.spent) / self.frame_ns;
        (fit.min(BURST as Nanos) as usize).max(SLOT_CHUNK).min(left)
    }

    /// `k` frames went through; whether the clock must be read now (the deadline may have come).
    fn took(&mut self, k: usize, deadline: Option<Nanos>, now: Nanos) -> bool {
        self.frames += k as u64;
        self.spent += k as Nanos * self.frame_ns;
        deadline.is_some_and(|d| now + self.spent >= d)
    }
}

/// A switch replaced by a reload, sending what it still holds (README, "Running live": Reload).
struct Draining<P: BufPool, L: Pipeline<P>, A: Admission> {
    sw: Switch<P, L, A>,
    deadline: Nanos,
    sent: u64,
}

/// A switch built from a reloaded config, waiting for the worker to swap it in; `ports` is
/// `Some` when the port I/O changed too (the old ports are flushed and closed).
pub struct Swap<P: BufPool, L: Pipeline<P>, A: Admission = PfcGenerator> {
    pub switch: Switch<P, L, A>,
    pub ports: Option<Vec<Box<dyn Port<P> + Send>>>,
}

/// Where the control thread leaves a [`Swap`]; the worker `try_lock`s it once per iteration.
/// Boxed: `take` moves the slot's content out on every iteration, and an unboxed `Swap` (a whole
/// switch with its pipeline's state) is a memcpy per iteration even when the slot is empty.
pub type SwapSlot<P, L, A = PfcGenerator> = Arc<Mutex<Option<Box<Swap<P, L, A>>>>>;

/// Run `sw` over `ports` (index i of `ports` is port index i of the switch) until stopped.
/// Time is `mono_ns()`: the same monotonic clock the control thread stamps commands with.
///
/// Each iteration, in phases: a switch a reload built is swapped in ([`swap_phase`]), due
/// commands applied, every port's rx burst through the switch ([`rx_phase`]), its time-driven
/// work ([`Switch::poll`]) and a replaced switch's drain ([`drain_phase`]), every port's
/// transmit ([`tx_phase`]), the counters published every stats interval, and the idle test.
pub fn run_worker<P, L, A>(
    sw: &mut Switch<P, L, A>,
    ports: &mut Vec<Box<dyn Port<P> + Send>>,
    opts: &WorkerOptions,
    swap: Option<&SwapSlot<P, L, A>>,
) -> WorkerSummary
where
    P: BufPool,
    L: Pipeline<P>,
    A: Admission,
{
    let mut w = Loop {
        burst: Vec::with_capacity(BURST),
        txv: Vec::with_capacity(BURST),
        chunk: Vec::with_capacity(BURST),
        pacer: SlotPacer::default(),
        sum: WorkerSummary::default(),
        draining: None,
    };
    let interval = opts.stats_interval.as_nanos() as Nanos;
    let mut next_stats: Nanos = 0;
    let mut scratch = SwitchSnapshot::default();
    sw.set_tx_slack(LIVE_TX_SLACK_NS);
    loop {
        if opts.stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(slot) = swap {
            swap_phase(&mut w, sw, ports, slot);
        }
        let mut now = mono_ns();
        w.pacer.read(now);
        w.sum.iterations += 1;
        let mut work = sw.apply_commands(now, mono_ns) > 0;
        // With a slot timer, bursts go through in chunks with the clock read and the timer
        // checked between them: its lateness is then a chunk's time, not a loop iteration's.
        let slotted = sw.has_slot_timer();
        work |= rx_phase(&mut w, sw, ports, slotted, &mut now);
        sw.poll(now);
        work |= drain_phase(&mut w, ports, now);
        work |= tx_phase(&mut w, sw, ports, slotted, &mut now);
        if now >= next_stats {
            next_stats = now + interval;
            // What a pcap capture holds reaches its file every stats interval, not only at exit
            // (a reader sees whole records); errors stay with the port, counted at its tx.
            for p in ports.iter_mut() {
                let _ = p.flush();
            }
            publish(
                sw,
                now,
                ports,
                w.sum.iterations,
                &opts.snapshot,
                &mut scratch,
            );
        }
        let idle = !work
            && w.draining.is_none()
            && opts.until_idle
            && ports.iter().all(|p| p.rx_exhausted())
            && sw.buffered_bytes() == 0
            && sw.next_event(now).is_none();
        if let Some(flag) = &opts.idle_flag {
            flag.store(idle, Ordering::Release);
        } else if idle {
            break;
        }
        if !work && !opts.idle_sleep.is_zero() {
            std::thread::sleep(opts.idle_sleep);
        }
    }
    for p in ports.iter_mut() {
        let _ = p.flush();
        w.sum.ports.push(p.stats());
    }
    publish(
        sw,
        mono_ns(),
        ports,
        w.sum.iterations,
        &opts.snapshot,
        &mut scratch,
    );
    w.sum
}

/// What a worker's loop keeps across iterations: its burst vectors, the slot pacer, its
/// summary, and a switch a reload replaced while it drains.
struct Loop<P: BufPool, L: Pipeline<P>, A: Admission> {
    burst: Vec<P::Buf>,
    txv: Vec<P::Buf>,
    chunk: Vec<P::Buf>,
    pacer: SlotPacer,
    sum: WorkerSummary,
    draining: Option<Draining<P, L, A>>,
}

/// Swap in the switch a reload left in `slot`, if any (`try_lock`: never waits on the control
/// thread). The replaced switch drains what it holds: beside the new one over the same ports,
/// or first, over the old ports, when the port I/O changed.
#[inline(always)]
fn swap_phase<P: BufPool, L: Pipeline<P>, A: Admission>(
    w: &mut Loop<P, L, A>,
    sw: &mut Switch<P, L, A>,
    ports: &mut Vec<Box<dyn Port<P> + Send>>,
    slot: &SwapSlot<P, L, A>,
) {
    let Ok(mut pending) = slot.try_lock() else {
        return;
    };
    let Some(new) = pending.take() else {
        return;
    };
    let new = *new;
    w.sum.swaps += 1;
    // A switch still draining from an earlier reload finishes first.
    if let Some(d) = w.draining.take() {
        finish_drain(d, ports, &mut w.txv, &mut w.sum);
    }
    let old = core::mem::replace(sw, new.switch);
    sw.set_tx_slack(LIVE_TX_SLACK_NS);
    match new.ports {
        // Same port I/O: the old switch sends what it holds while the new one takes the
        // traffic (a port sends the old switch's frames first).
        None if old.buffered_packets() > 0 => {
            w.draining = Some(Draining {
                sw: old,
                deadline: mono_ns() + DRAIN_DEADLINE_NS,
                sent: 0,
            })
        }
        None => {}
        // New port I/O: the old switch drains over the old ports first (rx waits), then they
        // are flushed and closed.
        Some(new_ports) => {
            let d = Draining {
                sw: old,
                deadline: mono_ns() + DRAIN_DEADLINE_NS,
                sent: 0,
            };
            finish_drain(d, ports, &mut w.txv, &mut w.sum);
            for p in ports.iter_mut() {
                let _ = p.flush();
                w.sum.ports.push(p.stats());
            }
            *ports = new_ports;
        }
    }
}

/// Every port's rx burst through the switch; with a slot timer (`slotted`), in chunks with the
/// clock read (`now` moves on) and the timer run between them. True when a frame came in.
#[inline(always)]
fn rx_phase<P: BufPool, L: Pipeline<P>, A: Admission>(
    w: &mut Loop<P, L, A>,
    sw: &mut Switch<P, L, A>,
    ports: &mut [Box<dyn Port<P> + Send>],
    slotted: bool,
    now: &mut Nanos,
) -> bool {
    let mut work = false;
    for (idx, port) in ports.iter_mut().enumerate() {
        let n = port.rx_burst(*now, sw.pool(), &mut w.burst, BURST);
        if n == 0 {
            continue;
        }
        work = true;
        w.sum.rx += n as u64;
        if let Some(d) = w.draining.as_mut() {
            // The link's PFC / PAUSE apply to the draining switch's queues too.
            for p in w.burst.iter() {
                d.sw.honor_mac_control(idx, *now, p.data());
            }
        }
        if !slotted {
            sw.receive_burst(idx, *now, &mut w.burst);
            continue;
        }
        while !w.burst.is_empty() {
            let k = w.pacer.chunk(sw.slot_deadline(), *now, w.burst.len());
            if k == w.burst.len() {
                // The rest of the burst in one chunk (far from the deadline, the whole burst):
                // no copy into `chunk`.
                sw.receive_burst(idx, *now, &mut w.burst);
            } else {
                w.chunk.extend(w.burst.drain(..k));
                sw.receive_burst(idx, *now, &mut w.chunk);
            }
            if w.pacer.took(k, sw.slot_deadline(), *now) {
                *now = mono_ns().max(*now);
                w.pacer.read(*now);
                sw.poll_slot_timer(*now);
            }
        }
    }
    work
}

/// A replaced switch's round ([`drain_step`]), and its end once empty or past its deadline.
/// True when it sent something.
#[inline(always)]
fn drain_phase<P: BufPool, L: Pipeline<P>, A: Admission>(
    w: &mut Loop<P, L, A>,
    ports: &mut [Box<dyn Port<P> + Send>],
    now: Nanos,
) -> bool {
    let Some(d) = w.draining.as_mut() else {
        return false;
    };
    let sent = drain_step(d, now, ports, &mut w.txv);
    if d.sw.buffered_packets() == 0 || now >= d.deadline {
        if let Some(d) = w.draining.take() {
            finish_drain(d, ports, &mut w.txv, &mut w.sum);
        }
    }
    sent
}

/// Every port's frames due at `now`: another worker's handed over, then the switch's in bursts
/// (in chunks with a slot timer, as [`rx_phase`]). True when a frame went out.
#[inline(always)]
fn tx_phase<P: BufPool, L: Pipeline<P>, A: Admission>(
    w: &mut Loop<P, L, A>,
    sw: &mut Switch<P, L, A>,
    ports: &mut [Box<dyn Port<P> + Send>],
    slotted: bool,
    now: &mut Nanos,
) -> bool {
    let mut work = false;
    for (idx, port) in ports.iter_mut().enumerate() {
        // Another worker's frames for a port this worker sends on (dispatch::WorkerPort).
        if port.service(*now, sw.pool()) > 0 {
            work = true;
        }
        // The replaced switch's frames go first on their port.
        if w.draining
            .as_ref()
            .is_some_and(|d| d.sw.port_has_frames(idx))
        {
            continue;
        }
        loop {
            let max = if slotted {
                w.pacer.chunk(sw.slot_deadline(), *now, BURST)
            } else {
                BURST
            };
            let txv = &mut w.txv;
            let n = sw.transmit(idx, *now, max, &mut |p| txv.push(p));
            if n == 0 {
                break;
            }
            work = true;
            w.sum.tx += n as u64;
            port.tx_burst(*now, &mut w.txv, sw.pool());
            if slotted && w.pacer.took(n, sw.slot_deadline(), *now) {
                *now = mono_ns().max(*now);
                w.pacer.read(*now);
                sw.poll_slot_timer(*now);
            }
            if n < max {
                break;
            }
        }
    }
    work
}

/// One round of a switch a reload replaced: its timers (held frames, PFC refresh), then up to a
/// burst per port. True when it sent something.
fn drain_step<P: BufPool, L: Pipeline<P>, A: Admission>(
    d: &mut Draining<P, L, A>,
    now: Nanos,
    ports: &mut [Box<dyn Port<P> + Send>],
    txv: &mut Vec<P::Buf>,
) -> bool {
    d.sw.poll(now);
    let mut sent = false;
    for (idx, port) in ports.iter_mut().enumerate() {
        let n = d.sw.transmit(idx, now, BURST, &mut |p| txv.push(p));
        if n > 0 {
            d.sent += n as u64;
            port.tx_burst(now, txv, d.sw.pool());
            sent = true;
        }
    }
    sent
}

/// Let a replaced switch send what it holds until it is empty or its deadline passes (rx waits);
/// what is left then is counted as dropped.
fn finish_drain<P: BufPool, L: Pipeline<P>, A: Admission>(
    mut d: Draining<P, L, A>,
    ports: &mut [Box<dyn Port<P> + Send>],
    txv: &mut Vec<P::Buf>,
    sum: &mut WorkerSummary,
) {
    loop {
        let now = mono_ns();
        if d.sw.buffered_packets() == 0 || now >= d.deadline {
            break;
        }
        if !drain_step(&mut d, now, ports, txv) {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    sum.drained_on_swap += d.sent;
    sum.dropped_on_swap += d.sw.buffered_packets();
}

/// Copy the counters into the shared snapshot without waiting: when the control thread holds
/// the lock, this interval's copy is skipped (the next one catches up).
fn publish<P: BufPool, L: Pipeline<P>, A: Admission>(
    sw: &Switch<P, L, A>,
    now: Nanos,
    ports: &[Box<dyn Port<P> + Send>],
    loops: u64,
    shared: &Mutex<SwitchSnapshot>,
    scratch: &mut SwitchSnapshot,
) {
    sw.snapshot_into(now, scratch);
    scratch.loops = loops;
    scratch.io.clear();
    scratch.io.extend(ports.iter().map(|p| p.stats()));
    if let Ok(mut s) = shared.try_lock() {
        s.clone_from(scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_pacer_takes_whole_bursts_far_from_the_deadline_and_small_chunks_near_it() {
        let mut p = SlotPacer::default();
        // Disarmed: the whole burst, and no clock read for it.
        assert_eq!(p.chunk(None, 0, BURST), BURST);
        assert!(!p.took(BURST, None, 0));
        // Read 8 us later: 250 ns a frame measured, twice that clamped to SLOT_FRAME_NS.
        p.read(8_000);
        assert_eq!(p.frame_ns, SLOT_FRAME_NS);
        // 20 us away: a whole burst fits (80 frames at SLOT_FRAME_NS), and after it 12 us are
        // left by the estimate: no read.
        let d = Some(28_000);
        assert_eq!(p.chunk(d, 8_000, BURST), BURST);
        assert!(!p.took(BURST, d, 8_000));
        // Now 8 us are spent by the estimate: 48 frames fit, a burst is at most BURST.
        assert_eq!(p.chunk(d, 8_000, BURST), BURST);
        // After it 16 us are spent by the estimate: 4 us left, no read yet.
        assert!(!p.took(BURST, d, 8_000));
        // 4 us left by the estimate: 16 frames, then the deadline may have come: read.
        assert_eq!(p.chunk(d, 8_000, BURST), 16);
        assert!(p.took(16, d, 8_000));
        p.read(28_000);
        assert_eq!(p.frame_ns, SLOT_FRAME_NS);
        // Near or past the deadline: SLOT_CHUNK frames between reads, never fewer.
        assert_eq!(p.chunk(d, 27_900, BURST), SLOT_CHUNK);
        assert_eq!(p.chunk(d, 33_000, BURST), SLOT_CHUNK);
        assert!(p.took(SLOT_CHUNK, d, 33_000));
        // Never more than what is left.
        p.read(33_000);
        assert_eq!(p.chunk(d, 27_900, 3), 3);
        assert_eq!(p.chunk(Some(1_000_000), 0, 5), 5);
    }

    #[test]
    fn slot_pacer_measures_the_frames() {
        let mut p = SlotPacer::default();
        // Fewer than SLOT_CHUNK frames between two reads: not measured.
        p.read(0);
        p.took(SLOT_CHUNK - 1, None, 0);
        p.read(10);
        assert_eq!(p.frame_ns, SLOT_FRAME_NS);
        // 32 frames in 1.6 us: 50 ns each, twice that is below the estimate: an eighth of the
        // way down.
        p.took(32, None, 10);
        p.read(1_610);
        assert_eq!(p.frame_ns, SLOT_FRAME_NS - (SLOT_FRAME_NS - 100) / 8);
        for _ in 0..100 {
            p.took(32, None, 0);
            let at = p.read_at + 1_600;
            p.read(at);
        }
        assert_eq!(p.frame_ns, 100 + 7, "the eighths stop short of the measure");
        // Slower frames count at once: 80 ns each.
        p.took(32, None, 0);
        p.read(p.read_at + 2_560);
        assert_eq!(p.frame_ns, 160);
        // Within [SLOT_FRAME_MIN_NS, SLOT_FRAME_NS].
        p.took(32, None, 0);
        p.read(p.read_at + 32 * 1_000);
        assert_eq!(p.frame_ns, SLOT_FRAME_NS);
        for _ in 0..200 {
            p.took(32, None, 0);
            p.read(p.read_at + 32);
        }
        assert_eq!(p.frame_ns, SLOT_FRAME_MIN_NS);
    }

    /// Slots of `slot` ns, frames of `frame(i)` ns (the i-th frame): the worker's pacing (chunks,
    /// `took`, a read when it says) from a fresh pacer; per slot from the third on, the timer's
    /// lateness (the first read at or after the deadline) and the clock reads. Returns the largest
    /// lateness and the most reads in a slot.
    fn pace(slot: Nanos, slots: u64, frame: impl Fn(u64) -> Nanos) -> (Nanos, u64) {
        let mut p = SlotPacer::default();
        let (mut now, mut i, mut d) = (0, 0u64, slot);
        let (mut late, mut most, mut reads) = (0, 0, 0);
        p.read(now);
        while d <= slots * slot {
            let k = p.chunk(Some(d), p.read_at, BURST);
            let mut t = 0;
            for _ in 0..k {
                t += frame(i);
                i += 1;
            }
            now += t;
            if p.took(k, Some(d), p.read_at) {
                p.read(now);
                reads += 1;
                if now >= d {
                    if d > 2 * slot {
                        late = late.max(now - d);
                        most = most.max(reads);
                    }
                    reads = 0;
                    d += slot;
                }
            }
        }
        (late, most)
    }

    #[test]
    fn slot_pacer_bounds_the_lateness_and_reads_less_as_frames_get_faster() {
        // Frames of the same length: late by at most a chunk of SLOT_CHUNK frames, for every
        // slot phase (the deadlines step by 130 ns against the frames).
        for t in [35, 100, 250] {
            for slot in (9_000..11_000).step_by(130) {
                let (late, _) = pace(slot, 30, |_| t);
                assert!(
                    late <= SLOT_CHUNK as u64 * t,
                    "frames of {t} ns, slot {slot}: late {late}"
                );
            }
        }
        // At full rate (35 ns a frame, T = 10 us): 7 reads per slot; with SLOT_FRAME_NS fixed
        // (the pacer before it measured), 15.
        let (_, reads) = pace(10_000, 30, |_| 35);
        assert!(reads <= 7, "{reads} reads in a slot");
        // Frames alternating between 20 and 60 ns (the rx phase and the transmit): the estimate
        // covers the slower ones, the lateness stays within a chunk of them.
        let (late, _) = pace(10_000, 30, |i| if (i / 32) % 2 == 0 { 60 } else { 20 });
        assert!(late <= SLOT_CHUNK as u64 * 60, "late {late}");
    }
}
