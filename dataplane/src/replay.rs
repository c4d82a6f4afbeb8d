//! The virtual-time driver: replays captured traffic through a [`Switch`] deterministically.
//!
//! Inputs are merged by timestamp (ties: the input listed first, then file order). Time jumps
//! from event to event: the next input arrival or the switch's own next event (a queue that can
//! transmit, a recirculated packet coming back, a PFC refresh, a pipeline timer), so shapers,
//! queue drains and timers advance exactly as on links of the configured rates. Every packet
//! leaves with its virtual departure time (the start of its transmission). Nothing reads the wall
//! clock, so the same input gives the same bytes and timestamps on every run.

use crate::counters::DropReason;
use crate::engine::{Pipeline, Switch};
use crate::packet::{BufPool, PacketBuf};
use crate::pcap::PcapRecord;
use crate::time::Nanos;

/// Packets are handed to the switch in bursts of at most this many (as an rx burst would).
pub const BURST: usize = 32;

/// Where replayed output goes: `(port index, departure time, frame)`.
pub trait Sink<B: PacketBuf> {
    fn emit(&mut self, port_idx: usize, ts: Nanos, pkt: &B);
}

impl<B: PacketBuf, F: FnMut(usize, Nanos, &B)> Sink<B> for F {
    fn emit(&mut self, port_idx: usize, ts: Nanos, pkt: &B) {
        self(port_idx, ts, pkt)
    }
}

/// Replay limits.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReplayOptions {
    /// Stop at this virtual time even if the switch still has work (e.g. periodic timers).
    pub until: Option<Nanos>,
}

/// What a replay did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Input frames offered.
    pub offered: u64,
    /// Frames emitted on all ports.
    pub emitted: u64,
    /// Virtual time of the last event.
    pub end_ns: Nanos,
    /// Event steps taken.
    pub steps: u64,
    /// Stopped because `until` was reached with work left.
    pub truncated: bool,
    /// Stopped because the switch reported work at the same instant over and over without
    /// making progress (a bug in some `next_event`; never expected).
    pub stalled: bool,
}

/// Steps at one instant after which the driver declares a stall.
const MAX_STEPS_PER_INSTANT: u32 = 1_000_000;

/// Replay `inputs` (port index, its frames in capture order) through `sw`, sending every frame
/// the switch transmits to `sink`.
///
/// Input frames that do not fit a pool buffer (or arrive when the pool is empty) are counted as
/// `pool_empty` drops. Timestamps that go backwards within one input are taken as "now" (the
/// capture's order wins; a capture is never reordered).
pub fn run<P, L, S>(
    sw: &mut Switch<P, L>,
    inputs: &[(usize, &[PcapRecord])],
    opts: ReplayOptions,
    sink: &mut S,
) -> ReplaySummary
where
    P: BufPool,
    L: Pipeline<P>,
    S: Sink<P::Buf>,
{
    let nports = sw.ports().len();
    let mut cursor = vec![0usize; inputs.len()];
    let mut burst: Vec<P::Buf> = Vec::with_capacity(BURST);
    let mut out: Vec<P::Buf> = Vec::with_capacity(BURST);
    let mut sum = ReplaySummary::default();
    let mut same_instant = 0u32;
    let mut now: Nanos = inputs
        .iter()
        .filter_map(|(_, r)| r.first().map(|r| r.ts_ns))
        .min()
        .unwrap_or(0);

    // Next input (index into `inputs`) in merged order, with its timestamp.
    let next_input = |cursor: &[usize]| -> Option<(usize, Nanos)> {
        let mut best: Option<(usize, Nanos)> = None;
        for (k, (_, recs)) in inputs.iter().enumerate() {
            if let Some(r) = recs.get(cursor[k]) {
                if best.is_none_or(|(_, t)| r.ts_ns < t) {
                    best = Some((k, r.ts_ns));
                }
            }
        }
        best
    };

    loop {
        let t_in = next_input(&cursor).map(|(_, t)| t);
        let t_ev = sw.next_event(now);
        let t = match (t_in, t_ev) {
            (None, None) => break,
            (Some(a), None) | (None, Some(a)) => a,
            (Some(a), Some(b)) => a.min(b),
        };
        if let Some(u) = opts.until {
            if t > u {
                sum.truncated = true;
                break;
            }
        }
        if t <= now && sum.steps > 0 {
            same_instant += 1;
            if same_instant > MAX_STEPS_PER_INSTANT {
                sum.stalled = true;
                break;
            }
        } else {
            same_instant = 0;
        }
        now = now.max(t);
        sum.steps += 1;

        // 1. Every input frame that has arrived by `now`, in bursts per port.
        let mut burst_port = usize::MAX;
        while let Some((k, ts)) = next_input(&cursor) {
            if ts > now {
                break;
            }
            let (port, recs) = inputs[k];
            let rec = &recs[cursor[k]];
            cursor[k] += 1;
            sum.offered += 1;
            if (port != burst_port || burst.len() == BURST) && !burst.is_empty() {
                sw.receive_burst(burst_port, now, &mut burst);
            }
            burst_port = port;
            match sw.pool().alloc_from(&rec.data) {
                Some(b) => burst.push(b),
                None => sw.note_drop(DropReason::PoolEmpty),
            }
        }
        if !burst.is_empty() {
            sw.receive_burst(burst_port, now, &mut burst);
        }

        // 2. Time-driven work.
        sw.poll(now);

        // 3. Transmit what can start by now. A port's transmission may release PFC state that
        // sends a frame on a port already visited; the next step (at the same `now`) sends it.
        for idx in 0..nports {
            loop {
                let n = sw.transmit(idx, now, BURST, &mut |p| out.push(p));
                for p in out.drain(..) {
                    sink.emit(idx, now, &p);
                    sum.emitted += 1;
                    sw.pool().free(p);
                }
                if n < BURST {
                    break;
                }
            }
        }
        sum.end_ns = now;
    }
    sum
}
