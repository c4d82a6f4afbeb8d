//! The worker's end of the control channel (DESIGN.md section 3): bounded lock-free rings
//! (crossbeam-queue `ArrayQueue`), commands down and punts up.
//!
//! - **Commands** ([`Envelope`]) are drained by the worker on every loop iteration
//!   ([`crate::engine::Switch::apply_commands`]). A command carries the time it may take effect
//!   (`at`): live, that is "now"; in replay it is the punt's virtual time plus the configured
//!   control latency, so the same input gives the same result on every run.
//! - **Punts** ([`Punt`]) carry a truncated copy of a packet (or an event with no packet) and a
//!   reason up to the control thread. A full punt ring is a counted drop, never a stall.
//!
//! Nothing here allocates on the worker: punts are fixed-size values, and commands are moved
//! through the ring (a command that owns heap memory, like an injected frame, was allocated by
//! the control thread).

use crate::time::Nanos;
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

/// Bytes of a punted packet that are kept (enough for every header a control handler parses:
/// Ethernet + VLANs + IPv6 + UDP + BTH + extension headers + a daemon message).
pub const PUNT_BYTES: usize = 192;

/// A packet (or event) sent up to the control thread.
#[derive(Clone, Copy, Debug)]
pub struct Punt {
    /// Why (pipeline-defined; see the pipeline's `PuntReason`).
    pub reason: u16,
    /// Ingress port id of the packet.
    pub port: u16,
    /// Engine time of the punt.
    pub ts: Nanos,
    /// Original frame length.
    pub frame_len: u16,
    /// Bytes kept in `data` (min(frame_len, PUNT_BYTES)).
    pub len: u16,
    /// An event's argument when there is no packet (pipeline-defined).
    pub arg: u64,
    pub data: [u8; PUNT_BYTES],
}

impl Punt {
    /// A punt of `frame` (truncated to [`PUNT_BYTES`]).
    pub fn packet(reason: u16, port: u16, ts: Nanos, frame: &[u8]) -> Self {
        let n = frame.len().min(PUNT_BYTES);
        let mut data = [0u8; PUNT_BYTES];
        data[..n].copy_from_slice(&frame[..n]);
        Punt {
            reason,
            port,
            ts,
            frame_len: frame.len().min(u16::MAX as usize) as u16,
            len: n as u16,
            arg: 0,
            data,
        }
    }

    /// An event with no packet.
    pub fn event(reason: u16, port: u16, ts: Nanos, arg: u64) -> Self {
        Punt {
            reason,
            port,
            ts,
            frame_len: 0,
            len: 0,
            arg,
            data: [0; PUNT_BYTES],
        }
    }

    /// The kept bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }
}

/// Commands every switch understands, plus the pipeline's own (`C`).
#[derive(Clone, Debug)]
pub enum Command<C> {
    /// A pipeline command (table insert/delete, register reset, parameter).
    Pipeline(C),
    /// Put a frame on ingress of `port` (as if received), or straight on the recirculation loop.
    Inject {
        port: u16,
        recirculate: bool,
        frame: Box<[u8]>,
    },
    /// Change an egress port's rate (bps).
    SetPortRate { port: u16, rate_bps: u64 },
    /// Ask the worker to publish a counter snapshot now (tagged `id`).
    Snapshot { id: u64 },
}

impl<C> Command<C> {
    /// The same command with the pipeline command mapped by `f` (a mechanism wrapping the
    /// baseline's commands in its own).
    pub fn map<D>(self, f: impl FnOnce(C) -> D) -> Command<D> {
        match self {
            Command::Pipeline(c) => Command::Pipeline(f(c)),
            Command::Inject {
                port,
                recirculate,
                frame,
            } => Command::Inject {
                port,
                recirculate,
                frame,
            },
            Command::SetPortRate { port, rate_bps } => Command::SetPortRate { port, rate_bps },
            Command::Snapshot { id } => Command::Snapshot { id },
        }
    }
}

/// A command on its way to a worker.
#[derive(Debug)]
pub struct Envelope<C> {
    /// Sequence number (per channel), for tracing.
    pub seq: u64,
    /// Earliest engine time at which it may be applied (0 = at once).
    pub at: Nanos,
    /// Monotonic ns at which the control plane enqueued it (for the latency histogram; live
    /// runs use [`mono_ns`], replay uses virtual time).
    pub issued_ns: u64,
    pub cmd: Command<C>,
}

/// Both rings of one worker. Cloning shares the rings.
pub struct Channel<C> {
    pub commands: Arc<ArrayQueue<Envelope<C>>>,
    pub punts: Arc<ArrayQueue<Punt>>,
}

impl<C> Clone for Channel<C> {
    fn clone(&self) -> Self {
        Channel {
            commands: self.commands.clone(),
            punts: self.punts.clone(),
        }
    }
}

impl<C> Channel<C> {
    /// Rings of the given capacities (each at least 1).
    pub fn new(commands: usize, punts: usize) -> Self {
        Channel {
            commands: Arc::new(ArrayQueue::new(commands.max(1))),
            punts: Arc::new(ArrayQueue::new(punts.max(1))),
        }
    }
}

crate::counters! {
    /// Counters of the control channel on the worker side.
    pub struct ControlStats: "control" {
        /// Commands applied.
        pub applied: u64,
        /// Commands the pipeline refused (bad table, bad key, table full).
        pub refused: u64,
        /// Punts sent up.
        pub punts: u64,
        /// Punts dropped because the ring was full.
        pub punt_drops: u64,
        /// Latency from enqueue to applied, ns.
        pub latency_hist: LatencyHist,
    }
}

/// Buckets of a [`LatencyHist`]: 4 per power of two up to 2^40 ns (about 18 minutes).
pub const LATENCY_BUCKETS: usize = 160;

/// A fixed histogram of latencies in ns with four sub-buckets per power of two (relative error
/// under 25%), allocation-free: bucket `i` holds `[lower(i), lower(i+1))`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LatencyHist {
    pub buckets: [u64; LATENCY_BUCKETS],
    pub count: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
}

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist {
            buckets: [0; LATENCY_BUCKETS],
            count: 0,
            sum_ns: 0,
            max_ns: 0,
        }
    }
}

impl LatencyHist {
    /// The bucket of `ns`.
    #[inline]
    pub fn index(ns: u64) -> usize {
        if ns < 4 {
            return ns as usize;
        }
        let e = 63 - ns.leading_zeros() as usize;
        let sub = ((ns >> (e - 2)) & 3) as usize;
        (4 + (e - 2) * 4 + sub).min(LATENCY_BUCKETS - 1)
    }

    /// The smallest latency in bucket `i`.
    pub fn lower(i: usize) -> u64 {
        if i < 4 {
            return i as u64;
        }
        let e = (i - 4) / 4 + 2;
        let sub = ((i - 4) % 4) as u64;
        (4 + sub) << (e - 2)
    }

    #[inline]
    /// Add every sample of `o`.
    pub fn merge(&mut self, o: &LatencyHist) {
        for (a, b) in self.buckets.iter_mut().zip(o.buckets.iter()) {
            *a += b;
        }
        self.count += o.count;
        self.sum_ns += o.sum_ns;
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    pub fn record(&mut self, ns: u64) {
        self.buckets[Self::index(ns)] += 1;
        self.count += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// An upper bound (ns) of quantile `q` (0..=1): the end of the bucket holding it, capped at
    /// the largest latency seen; 0 when empty.
    pub fn quantile_upper_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let target = ((self.count as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= target {
                return Self::lower(i + 1).saturating_sub(1).min(self.max_ns);
            }
        }
        self.max_ns
    }

    /// Non-empty buckets as (exclusive upper bound ns, count).
    pub fn nonempty(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.buckets
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != 0)
            .map(|(i, c)| (Self::lower(i + 1), *c))
    }
}

impl crate::counters::Counter for LatencyHist {
    fn add(&mut self, o: &Self) {
        self.merge(o);
    }
    /// The number of samples.
    fn emit(&self, name: &'static str, out: &mut dyn FnMut(&'static str, u64)) {
        out(name, self.count);
    }
    fn splat(v: u64) -> Self {
        LatencyHist {
            buckets: [v; LATENCY_BUCKETS],
            count: v,
            sum_ns: v,
            max_ns: v,
        }
    }
}

/// The control thread's reaction to punts, shared by live runs (called on the control thread) and
/// replay (called inline by the switch, with the configured control latency, so replay stays
/// deterministic).
pub trait PuntHandler<C>: Send {
    /// Handle one punt; issue commands through `issue` (they take effect in order).
    fn on_punt(&mut self, punt: &Punt, issue: &mut dyn FnMut(Command<C>));
}

/// Monotonic nanoseconds since the first call in this process (live command latency).
pub fn mono_ns() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn punt_truncates_and_keeps_length() {
        let f = [7u8; 500];
        let p = Punt::packet(3, 1, 99, &f);
        assert_eq!(p.frame_len, 500);
        assert_eq!(p.bytes().len(), PUNT_BYTES);
        let e = Punt::event(4, 2, 5, 42);
        assert!(e.bytes().is_empty());
        assert_eq!(e.arg, 42);
    }

    #[test]
    fn histogram_quantiles() {
        let mut h = LatencyHist::default();
        for ns in [100u64, 200, 300, 400, 5000] {
            h.record(ns);
        }
        assert_eq!(h.count, 5);
        // 300 lies in [256, 320): the median's bound is 319.
        assert_eq!(h.quantile_upper_ns(0.5), 319);
        assert_eq!(h.quantile_upper_ns(1.0), 5000);
        h.record(0);
        assert_eq!(h.buckets[0], 1);
        // Buckets tile the line: every value falls in [lower(i), lower(i+1)).
        for ns in (0..5000u64).chain([1 << 20, (1 << 20) + 12345, u64::MAX / 4]) {
            let i = LatencyHist::index(ns);
            if i + 1 < LATENCY_BUCKETS {
                assert!(
                    LatencyHist::lower(i) <= ns && ns < LatencyHist::lower(i + 1),
                    "{ns}"
                );
            }
        }
    }

    #[test]
    fn full_rings_refuse() {
        let ch: Channel<u8> = Channel::new(1, 1);
        assert!(ch.punts.push(Punt::event(0, 0, 0, 0)).is_ok());
        assert!(ch.punts.push(Punt::event(0, 0, 0, 0)).is_err());
        let env = |seq| Envelope {
            seq,
            at: 0,
            issued_ns: 0,
            cmd: Command::Pipeline(1u8),
        };
        assert!(ch.commands.push(env(0)).is_ok());
        assert!(ch.commands.push(env(1)).is_err());
    }
}
