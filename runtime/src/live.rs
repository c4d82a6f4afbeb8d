//! The live driver: a worker loop on a real clock over [`Port`]s, as one lcore runs it.
//!
//! Each iteration: apply due control commands, rx burst from every port into the ingress
//! pipeline, time-driven work (recirculation, PFC refresh, timers), transmit what each port may
//! send now, and every stats interval copy the counters into the shared snapshot (`try_lock`:
//! the worker never waits on the control thread). An idle worker sleeps briefly (pcap and memory
//! ports are not busy-polled NICs; the DPDK driver busy-polls).

use longhaul_dataplane::control::mono_ns;
use longhaul_dataplane::engine::{Pipeline, Switch, SwitchSnapshot};
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::port::{Port, PortIoStats};
use longhaul_dataplane::replay::BURST;
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
/// Bifrost's T of 10 us. That bounds the timer's lateness (a chunk's time).
pub const SLOT_CHUNK: usize = 8;

/// What [`SlotPacer`] assumes a frame may take at most in one phase of the worker (its rx and
/// pipeline, or its transmit): about 100 ns on the perf/ configs, with margin.
pub const SLOT_FRAME_NS: Nanos = 250;

/// When a live worker looks at a slot timer between chunks of its bursts, and when that needs the
/// clock. Reading the clock is not free: `Instant::now` cost about 120 ns on the project's VM,
/// more than a frame, and a read after every chunk of [`SLOT_CHUNK`] took 30 ns per frame
/// (perf/README.md). So a chunk is as long as the time left before the deadline allows at
/// [`SLOT_FRAME_NS`] a frame (between [`SLOT_CHUNK`] and a burst), and the clock is read after a
/// chunk only when, counting [`SLOT_FRAME_NS`] for every frame since the last read, the deadline
/// may have come. A chunk that can cross the deadline is then at most [`SLOT_CHUNK`] frames, and
/// the timer is looked at right after it: the lateness bound is the old one (a chunk of
/// [`SLOT_CHUNK`] frames) as long as a frame takes less than [`SLOT_FRAME_NS`]; far from the
/// deadline, whole bursts go through with no read. A timer disarmed (at rest) is looked at after
/// the whole burst: an arrival that arms it in the burst's middle has its first slot checked at
/// the burst's end.
#[derive(Default)]
struct SlotPacer {
    /// Nanoseconds the frames since the last clock read may have taken, at [`SLOT_FRAME_NS`].
    spent: Nanos,
}

impl SlotPacer {
    /// The clock was read.
    fn read(&mut self) {
        self.spent = 0;
    }

    /// Frames to take (at most `left`) before the next look at a timer due at `deadline`, the
    /// clock last read at `now`.
    fn chunk(&self, deadline: Option<Nanos>, now: Nanos, left: usize) -> usize {
        let Some(d) = deadline else { return left };
        let fit = d.saturating_sub(now + self.spent) / SLOT_FRAME_NS;
        (fit.min(BURST as Nanos) as usize).max(SLOT_CHUNK).min(left)
    }

    /// `k` frames went through; whether the clock must be read now (the deadline may have come).
    fn took(&mut self, k: usize, deadline: Option<Nanos>, now: Nanos) -> bool {
        self.spent += k as Nanos * SLOT_FRAME_NS;
        deadline.is_some_and(|d| now + self.spent >= d)
    }
}

/// A switch replaced by a reload, sending what it still holds (README, "Running live": Reload).
struct Draining<P: BufPool, L: Pipeline<P>> {
    sw: Switch<P, L>,
    deadline: Nanos,
    sent: u64,
}

/// A switch built from a reloaded config, waiting for the worker to swap it in; `ports` is
/// `Some` when the port I/O changed too (the old ports are flushed and closed).
pub struct Swap<P: BufPool, L: Pipeline<P>> {
    pub switch: Switch<P, L>,
    pub ports: Option<Vec<Box<dyn Port<P> + Send>>>,
}

/// Where the control thread leaves a [`Swap`]; the worker `try_lock`s it once per iteration.
/// Boxed: `take` moves the slot's content out on every iteration, and an unboxed `Swap` (a whole
/// switch with its pipeline's state) was a memcpy per iteration even when the slot was empty
/// (21 instructions per frame for the baseline, 265 for THEMIS, perf/README.md).
pub type SwapSlot<P, L> = Arc<Mutex<Option<Box<Swap<P, L>>>>>;

/// Run `sw` over `ports` (index i of `ports` is port index i of the switch) until stopped.
/// Time is `mono_ns()`: the same monotonic clock the control thread stamps commands with.
pub fn run_worker<P, L>(
    sw: &mut Switch<P, L>,
    ports: &mut Vec<Box<dyn Port<P> + Send>>,
    opts: &WorkerOptions,
    swap: Option<&SwapSlot<P, L>>,
) -> WorkerSummary
where
    P: BufPool,
    L: Pipeline<P>,
{
    let mut burst: Vec<P::Buf> = Vec::with_capacity(BURST);
    let mut txv: Vec<P::Buf> = Vec::with_capacity(BURST);
    let mut chunk: Vec<P::Buf> = Vec::with_capacity(BURST);
    let mut pacer = SlotPacer::default();
    let mut sum = WorkerSummary::default();
    let interval = opts.stats_interval.as_nanos() as Nanos;
    let mut next_stats: Nanos = 0;
    let mut scratch = SwitchSnapshot::default();
    let mut draining: Option<Draining<P, L>> = None;
    sw.set_tx_slack(LIVE_TX_SLACK_NS);
    loop {
        if opts.stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(slot) = swap {
            if let Ok(mut pending) = slot.try_lock() {
                if let Some(new) = pending.take() {
                    let new = *new;
                    sum.swaps += 1;
                    // A switch still draining from an earlier reload finishes first.
                    if let Some(d) = draining.take() {
                        finish_drain(d, ports, &mut txv, &mut sum);
                    }
                    let old = core::mem::replace(sw, new.switch);
                    sw.set_tx_slack(LIVE_TX_SLACK_NS);
                    match new.ports {
                        // Same port I/O: the old switch sends what it holds while the new one
                        // takes the traffic (a port sends the old switch's frames first).
                        None if old.buffered_packets() > 0 => {
                            draining = Some(Draining {
                                sw: old,
                                deadline: mono_ns() + DRAIN_DEADLINE_NS,
                                sent: 0,
                            })
                        }
                        None => {}
                        // New port I/O: the old switch drains over the old ports first (rx
                        // waits), then they are flushed and closed.
                        Some(new_ports) => {
                            let d = Draining {
                                sw: old,
                                deadline: mono_ns() + DRAIN_DEADLINE_NS,
                                sent: 0,
                            };
                            finish_drain(d, ports, &mut txv, &mut sum);
                            for p in ports.iter_mut() {
                                let _ = p.flush();
                                sum.ports.push(p.stats());
                            }
                            *ports = new_ports;
                        }
                    }
                }
            }
        }
        let mut now = mono_ns();
        pacer.read();
        sum.iterations += 1;
        let mut work = sw.apply_commands(now, now) > 0;
        // With a slot timer, bursts go through in chunks with the clock read and the timer
        // checked between them: its lateness is then a chunk's time, not a loop iteration's.
        let slotted = sw.has_slot_timer();
        for (idx, port) in ports.iter_mut().enumerate() {
            let n = port.rx_burst(now, sw.pool(), &mut burst, BURST);
            if n > 0 {
                work = true;
                sum.rx += n as u64;
                if let Some(d) = draining.as_mut() {
                    // The link's PFC / PAUSE apply to the draining switch's queues too.
                    for p in burst.iter() {
                        d.sw.honor_mac_control(idx, now, p.data());
                    }
                }
                if slotted {
                    while !burst.is_empty() {
                        let k = pacer.chunk(sw.slot_deadline(), now, burst.len());
                        if k == burst.len() {
                            // The rest of the burst in one chunk (far from the deadline, the
                            // whole burst): no copy into `chunk`.
                            sw.receive_burst(idx, now, &mut burst);
                        } else {
                            chunk.extend(burst.drain(..k));
                            sw.receive_burst(idx, now, &mut chunk);
                        }
                        if pacer.took(k, sw.slot_deadline(), now) {
                            now = mono_ns().max(now);
                            pacer.read();
                            sw.poll_slot_timer(now);
                        }
                    }
                } else {
                    sw.receive_burst(idx, now, &mut burst);
                }
            }
        }
        sw.poll(now);
        if let Some(d) = draining.as_mut() {
            work |= drain_step(d, now, ports, &mut txv);
            if d.sw.buffered_packets() == 0 || now >= d.deadline {
                if let Some(d) = draining.take() {
                    finish_drain(d, ports, &mut txv, &mut sum);
                }
            }
        }
        for (idx, port) in ports.iter_mut().enumerate() {
            // Another worker's frames for a port this worker sends on (dispatch::WorkerPort).
            if port.service(now, sw.pool()) > 0 {
                work = true;
            }
            // The replaced switch's frames go first on their port.
            if draining.as_ref().is_some_and(|d| d.sw.port_has_frames(idx)) {
                continue;
            }
            loop {
                let max = if slotted {
                    pacer.chunk(sw.slot_deadline(), now, BURST)
                } else {
                    BURST
                };
                let n = sw.transmit(idx, now, max, &mut |p| txv.push(p));
                if n == 0 {
                    break;
                }
                work = true;
                sum.tx += n as u64;
                port.tx_burst(now, &mut txv, sw.pool());
                if slotted && pacer.took(n, sw.slot_deadline(), now) {
                    now = mono_ns().max(now);
                    pacer.read();
                    sw.poll_slot_timer(now);
                }
                if n < max {
                    break;
                }
            }
        }
        if now >= next_stats {
            next_stats = now + interval;
            publish(sw, now, &opts.snapshot, &mut scratch);
        }
        let idle = !work
            && draining.is_none()
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
        sum.ports.push(p.stats());
    }
    publish(sw, mono_ns(), &opts.snapshot, &mut scratch);
    sum
}

/// One round of a switch a reload replaced: its timers (held frames, PFC refresh), then up to a
/// burst per port. True when it sent something.
fn drain_step<P: BufPool, L: Pipeline<P>>(
    d: &mut Draining<P, L>,
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
fn finish_drain<P: BufPool, L: Pipeline<P>>(
    mut d: Draining<P, L>,
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
fn publish<P: BufPool, L: Pipeline<P>>(
    sw: &Switch<P, L>,
    now: Nanos,
    shared: &Mutex<SwitchSnapshot>,
    scratch: &mut SwitchSnapshot,
) {
    sw.snapshot_into(now, scratch);
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
        p.read();
        // 20 us away: a whole burst fits (80 frames at SLOT_FRAME_NS), and after it 12 us are
        // left by the estimate: no read.
        assert_eq!(p.chunk(Some(20_000), 0, BURST), BURST);
        assert!(!p.took(BURST, Some(20_000), 0));
        // Now 8 us are spent by the estimate: 48 frames fit, a burst is at most BURST.
        assert_eq!(p.chunk(Some(20_000), 0, BURST), BURST);
        // After it 16 us are spent by the estimate: 4 us left, no read yet.
        assert!(!p.took(BURST, Some(20_000), 0));
        // 4 us left by the estimate: 16 frames, then the deadline may have come: read.
        assert_eq!(p.chunk(Some(20_000), 0, BURST), 16);
        assert!(p.took(16, Some(20_000), 0));
        p.read();
        // Near or past the deadline: SLOT_CHUNK frames between reads, never fewer.
        assert_eq!(p.chunk(Some(20_000), 19_900, BURST), SLOT_CHUNK);
        assert_eq!(p.chunk(Some(20_000), 25_000, BURST), SLOT_CHUNK);
        assert!(p.took(SLOT_CHUNK, Some(20_000), 25_000));
        // Never more than what is left.
        p.read();
        assert_eq!(p.chunk(Some(20_000), 19_900, 3), 3);
        assert_eq!(p.chunk(Some(1_000_000), 0, 5), 5);
    }

    #[test]
    fn slot_pacer_bounds_the_frames_between_reads_near_the_deadline() {
        // Frames of SLOT_FRAME_NS each, from the read at `now` toward a deadline `d`: the last
        // read before the deadline is at most SLOT_CHUNK frames before it, so a timer is never
        // looked at later than SLOT_CHUNK frames after it is due.
        for d in (0..30_000).step_by(130) {
            let mut p = SlotPacer::default();
            let (mut now, mut frames) = (0u64, 0u64);
            while now <= d {
                assert!(
                    frames < 1_000,
                    "deadline {d}: no clock read after {frames} frames"
                );
                let k = p.chunk(Some(d), now, BURST) as u64;
                frames += k;
                if p.took(k as usize, Some(d), now) {
                    now = frames * SLOT_FRAME_NS;
                    p.read();
                }
            }
            let late = now - d;
            assert!(
                late <= SLOT_CHUNK as u64 * SLOT_FRAME_NS,
                "deadline {d}: late {late}"
            );
        }
    }
}
