//! The live driver: a worker loop on a real clock over [`Port`]s, as one lcore runs it.
//!
//! Each iteration: apply due control commands, rx burst from every port into the ingress
//! pipeline, time-driven work (recirculation, PFC refresh, timers), transmit what each port may
//! send now, and every stats interval copy the counters into the shared snapshot (`try_lock`:
//! the worker never waits on the control thread). An idle worker sleeps briefly (pcap and memory
//! ports are not busy-polled NICs; the DPDK driver busy-polls).

use longhaul_dataplane::control::mono_ns;
use longhaul_dataplane::engine::{Pipeline, Switch, SwitchSnapshot};
use longhaul_dataplane::packet::BufPool;
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
    /// Packets that were still queued in a replaced switch (dropped by the swap).
    pub dropped_on_swap: u64,
}

/// A switch built from a reloaded config, waiting for the worker to swap it in; `ports` is
/// `Some` when the port I/O changed too (the old ports are flushed and closed).
pub struct Swap<P: BufPool, L: Pipeline<P>> {
    pub switch: Switch<P, L>,
    pub ports: Option<Vec<Box<dyn Port<P> + Send>>>,
}

/// Where the control thread leaves a [`Swap`]; the worker `try_lock`s it once per iteration.
pub type SwapSlot<P, L> = Arc<Mutex<Option<Swap<P, L>>>>;

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
    let mut sum = WorkerSummary::default();
    let interval = opts.stats_interval.as_nanos() as Nanos;
    let mut next_stats: Nanos = 0;
    let mut scratch = SwitchSnapshot::default();
    sw.set_tx_slack(LIVE_TX_SLACK_NS);
    loop {
        if opts.stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(slot) = swap {
            if let Ok(mut pending) = slot.try_lock() {
                if let Some(new) = pending.take() {
                    sum.swaps += 1;
                    sum.dropped_on_swap += sw.buffered_packets();
                    *sw = new.switch;
                    sw.set_tx_slack(LIVE_TX_SLACK_NS);
                    if let Some(new_ports) = new.ports {
                        for p in ports.iter_mut() {
                            let _ = p.flush();
                            sum.ports.push(p.stats());
                        }
                        *ports = new_ports;
                    }
                }
            }
        }
        let now = mono_ns();
        sum.iterations += 1;
        let mut work = sw.apply_commands(now, now) > 0;
        for (idx, port) in ports.iter_mut().enumerate() {
            let n = port.rx_burst(now, sw.pool(), &mut burst, BURST);
            if n > 0 {
                work = true;
                sum.rx += n as u64;
                sw.receive_burst(idx, now, &mut burst);
            }
        }
        sw.poll(now);
        for (idx, port) in ports.iter_mut().enumerate() {
            // Another worker's frames for a port this worker sends on (dispatch::WorkerPort).
            if port.service(now, sw.pool()) > 0 {
                work = true;
            }
            loop {
                let n = sw.transmit(idx, now, BURST, &mut |p| txv.push(p));
                if n == 0 {
                    break;
                }
                work = true;
                sum.tx += n as u64;
                port.tx_burst(now, &mut txv, sw.pool());
                if n < BURST {
                    break;
                }
            }
        }
        if now >= next_stats {
            next_stats = now + interval;
            publish(sw, now, &opts.snapshot, &mut scratch);
        }
        let idle = !work
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
