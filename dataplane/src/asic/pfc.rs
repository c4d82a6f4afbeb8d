//! Priority flow control (802.1Qbb), both halves:
//!
//! - [`PfcGenerator`]: the ingress side. Per (ingress port, priority) it counts the bytes buffered
//!   in the switch that arrived on that port in that priority, sends XOFF when the count reaches
//!   `xoff_bytes`, refreshes the XOFF every `refresh_ns` while it holds, sends XON (pause time 0)
//!   when the count falls to `xon_bytes`, and refuses packets that would overflow the headroom
//!   (`xoff_bytes + headroom_bytes`), counting them as [`DropReason::HeadroomOverflow`].
//! - [`PauseState`]: the egress side. It honors received PFC (per priority) and 802.3x PAUSE (all
//!   priorities) frames with per-priority pause timers.
//!
//! Neither allocates after construction. Generated frames are returned as [`PfcAction`]s in a
//! fixed-capacity [`ActionBuf`]; building the wire frame is the caller's job
//! (`crate::wire::pfc`).

use crate::counters::DropReason;
use crate::packet::NUM_CLASSES;
use crate::time::{quanta_to_ns, Nanos};

/// One PFC frame to send on `port`: priorities with bit `i` set in `class_enable` get pause time
/// `times[i]` quanta (0 = XON / resume). Times of priorities whose bit is clear are 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcAction {
    /// Port the frame leaves on (the ingress port being paused/resumed).
    pub port: u16,
    /// Class-enable vector.
    pub class_enable: u8,
    /// Pause time per priority, in quanta of 512 bit times.
    pub times: [u16; NUM_CLASSES],
}

/// Capacity of an [`ActionBuf`].
pub const ACTION_BUF_CAP: usize = 16;

/// A fixed-capacity list of [`PfcAction`]s (no allocation). When full, further pushes fail and the
/// generator keeps the action pending so that a later [`PfcGenerator::poll`] emits it.
#[derive(Clone, Debug, Default)]
pub struct ActionBuf {
    items: [PfcAction; ACTION_BUF_CAP],
    len: usize,
}

impl ActionBuf {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }
    /// Append; `false` (nothing stored) when full.
    pub fn push(&mut self, a: PfcAction) -> bool {
        if self.len >= ACTION_BUF_CAP {
            return false;
        }
        self.items[self.len] = a;
        self.len += 1;
        true
    }
    /// The actions stored.
    pub fn as_slice(&self) -> &[PfcAction] {
        &self.items[..self.len]
    }
    /// Number of actions stored.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Nothing stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// No room left.
    pub fn is_full(&self) -> bool {
        self.len >= ACTION_BUF_CAP
    }
    /// Forget all actions.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

/// PFC generation parameters (from the config's `PfcConfig` and the lossless classes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcParams {
    /// Bit `i` set = priority `i` is lossless (accounted and paused). Others are ignored.
    pub enabled_classes: u8,
    /// Count (bytes) at or above which XOFF is sent.
    pub xoff_bytes: u64,
    /// Count at or below which XON is sent while paused.
    pub xon_bytes: u64,
    /// Bytes accepted above `xoff_bytes` (in flight while the pause takes effect).
    pub headroom_bytes: u64,
    /// Pause time carried by XOFF frames, in quanta.
    pub pause_quanta: u16,
    /// XOFF refresh period while paused, ns (0 = never refresh).
    pub refresh_ns: Nanos,
    /// Dynamic thresholds: XOFF at a share of the free shared buffer; `None`: static.
    pub dynamic: Option<DynamicXoff>,
}

/// Dynamic PFC thresholds, as commodity switch buffers (Broadcom's dynamic threshold, Choudhury
/// and Hahne) and the HPCC simulator's `SwitchMmu` (`GetPfcThreshold`: `(buffer - headroom -
/// shared used) >> pfc_a_shift`, 1/8 by default) set them: a (port, priority) is paused once it
/// holds `alpha` of the shared buffer still free, at most `xoff_bytes`; it resumes once it is
/// `xoff_bytes - xon_bytes` below the threshold (the simulator's `resume_offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DynamicXoff {
    /// alpha x 1024.
    pub alpha_1024: u32,
    /// The shared buffer: the switch's buffer less every (port, lossless priority)'s headroom.
    pub pool_bytes: u64,
}

/// Admission decision of [`PfcGenerator::on_enqueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Accept the packet (it has been accounted; call `on_dequeue` when it leaves the buffer).
    Accept,
    /// Drop it for this reason (not accounted).
    Drop(DropReason),
}

crate::counters! {
    /// Counters of a [`PfcGenerator`].
    #[derive(Copy)]
    pub struct PfcGenStats: "pfc" {
        /// Frames carrying XOFF (initial or refresh) per priority.
        pub xoff_sent: [u64; NUM_CLASSES],
        /// Frames carrying XON per priority.
        pub xon_sent: [u64; NUM_CLASSES],
        /// Packets refused because the headroom would overflow, per priority.
        pub headroom_drops: [u64; NUM_CLASSES],
        /// Calls with a port >= num_ports or priority >= 8 (accepted, not accounted).
        pub unaccounted: u64,
        /// `on_dequeue` of more bytes than were accounted (count clamped at 0; a caller bug).
        pub underflows: u64,
        /// Actions that did not fit the caller's [`ActionBuf`] and were left for `poll`.
        pub deferred: u64,
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Xstate {
    /// Not paused, nothing pending.
    #[default]
    Idle,
    /// XOFF holds; the next (re)send is due at the time given.
    Paused(Nanos),
    /// XON to be sent (could not be emitted when decided).
    XonPending,
}

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    bytes: u64,
    max_bytes: u64,
    state: Xstate,
}

/// 802.1Qbb XOFF/XON generation with headroom accounting, per (ingress port, priority).
#[derive(Clone, Debug)]
pub struct PfcGenerator {
    p: PfcParams,
    num_ports: usize,
    slots: Vec<Slot>,
    /// Slots not `Idle` (paused, or an XON pending): while 0, `next_deadline` and `poll` have
    /// nothing to look at (the usual case; both run once per event step).
    active: usize,
    /// Bytes accounted over every (port, priority), for dynamic thresholds.
    total: u64,
    stats: PfcGenStats,
}

impl PfcGenerator {
    /// A generator for ports `0..num_ports` (state allocated here).
    pub fn new(num_ports: usize, params: PfcParams) -> Self {
        PfcGenerator {
            p: params,
            num_ports,
            slots: vec![Slot::default(); num_ports * NUM_CLASSES],
            active: 0,
            total: 0,
            stats: PfcGenStats::default(),
        }
    }

    /// The count at which XOFF is sent now: `xoff_bytes`, or with dynamic thresholds alpha x
    /// the shared buffer still free, at most `xoff_bytes`.
    #[inline]
    fn xoff_now(&self) -> u64 {
        match self.p.dynamic {
            None => self.p.xoff_bytes,
            Some(d) => {
                let free = d.pool_bytes.saturating_sub(self.total);
                let t = (free as u128 * d.alpha_1024 as u128 / 1024) as u64;
                t.min(self.p.xoff_bytes)
            }
        }
    }

    /// The parameters.
    pub fn params(&self) -> &PfcParams {
        &self.p
    }

    #[inline]
    fn idx(&self, port: u16, prio: u8) -> Option<usize> {
        let (port, prio) = (port as usize, prio as usize);
        if port < self.num_ports && prio < NUM_CLASSES && self.p.enabled_classes & (1 << prio) != 0
        {
            Some(port * NUM_CLASSES + prio)
        } else {
            None
        }
    }

    /// A packet of `bytes` from ingress `port` in priority `prio` wants buffer space.
    ///
    /// - Priority not lossless, port >= num_ports (e.g. `PORT_NONE` for generated packets) or
    ///   prio >= 8: `Accept`, not accounted (`on_dequeue` must be called with the same values and
    ///   ignores them too); out-of-range calls are counted in `unaccounted`.
    /// - Count + bytes > xoff + headroom: `Drop(HeadroomOverflow)`, counted, not accounted.
    /// - Otherwise accounted; if the count reaches `xoff_bytes` and the priority is not already
    ///   paused, an XOFF for (port, prio) with `pause_quanta` is pushed to `out` (if `out` is
    ///   full it is left pending and `poll` emits it).
    ///
    /// Inlined into the engine's admission (its one caller per packet), as is `on_dequeue`.
    #[inline]
    pub fn on_enqueue(
        &mut self,
        port: u16,
        prio: u8,
        bytes: u64,
        now: Nanos,
        out: &mut ActionBuf,
    ) -> Admit {
        let Some(i) = self.idx(port, prio) else {
            if port as usize >= self.num_ports || prio as usize >= NUM_CLASSES {
                self.stats.unaccounted += 1;
            }
            return Admit::Accept;
        };
        let p = self.p;
        let xoff = self.xoff_now();
        let s = &mut self.slots[i];
        let new = s.bytes.saturating_add(bytes);
        if new > xoff.saturating_add(p.headroom_bytes) {
            self.stats.headroom_drops[prio as usize] += 1;
            return Admit::Drop(DropReason::HeadroomOverflow);
        }
        s.bytes = new;
        s.max_bytes = s.max_bytes.max(new);
        self.total += bytes;
        if new >= xoff && !matches!(s.state, Xstate::Paused(_)) {
            if s.state == Xstate::Idle {
                self.active += 1;
            }
            // Also cancels a pending XON: the XOFF supersedes it.
            s.state = Xstate::Paused(now);
            self.emit_port(port as usize, now, out);
        }
        Admit::Accept
    }

    /// `bytes` accounted to (port, prio) left the buffer. If the priority is paused and the count
    /// falls to `xon_bytes` or below, an XON (pause time 0) is pushed to `out` (pending for `poll`
    /// if `out` is full). Unaccounted (port, prio) are ignored; more bytes than accounted clamp the
    /// count at 0 and count an underflow.
    #[inline]
    pub fn on_dequeue(&mut self, port: u16, prio: u8, bytes: u64, now: Nanos, out: &mut ActionBuf) {
        let Some(i) = self.idx(port, prio) else {
            return;
        };
        let s = &mut self.slots[i];
        if bytes > s.bytes {
            self.stats.underflows += 1;
        }
        let left = bytes.min(s.bytes);
        s.bytes -= left;
        self.total -= left;
        if !matches!(s.state, Xstate::Paused(_)) {
            return;
        }
        let count = s.bytes;
        // Static: XON at xon_bytes; dynamic: the same distance below the threshold.
        let hysteresis = self.p.xoff_bytes - self.p.xon_bytes.min(self.p.xoff_bytes);
        if count <= self.xoff_now().saturating_sub(hysteresis) {
            self.slots[i].state = Xstate::XonPending;
            self.emit_port(port as usize, now, out);
        }
    }

    /// Emit the due actions of `port` as one frame, if any; `false` if `out` was full.
    fn emit_port(&mut self, port: usize, now: Nanos, out: &mut ActionBuf) -> bool {
        let mut a = PfcAction {
            port: port as u16,
            ..PfcAction::default()
        };
        for prio in 0..NUM_CLASSES {
            match self.slots[port * NUM_CLASSES + prio].state {
                Xstate::Paused(due) if due <= now => {
                    a.class_enable |= 1 << prio;
                    a.times[prio] = self.p.pause_quanta;
                }
                Xstate::XonPending => a.class_enable |= 1 << prio,
                _ => {}
            }
        }
        if a.class_enable == 0 {
            return true;
        }
        if !out.push(a) {
            self.stats.deferred += 1;
            return false;
        }
        for prio in 0..NUM_CLASSES {
            if a.class_enable & (1 << prio) == 0 {
                continue;
            }
            let s = &mut self.slots[port * NUM_CLASSES + prio];
            match s.state {
                Xstate::Paused(_) => {
                    self.stats.xoff_sent[prio] += 1;
                    s.state = Xstate::Paused(if self.p.refresh_ns == 0 {
                        Nanos::MAX
                    } else {
                        now.saturating_add(self.p.refresh_ns)
                    });
                }
                _ => {
                    self.stats.xon_sent[prio] += 1;
                    s.state = Xstate::Idle;
                    self.active -= 1;
                }
            }
        }
        true
    }

    /// Emit everything due at `now`: XOFF refreshes of paused priorities whose refresh time has
    /// come, and pending XOFF/XON that did not fit earlier. Due priorities of one port share one
    /// frame. Stops when `out` is full; what did not fit stays due (call again).
    pub fn poll(&mut self, now: Nanos, out: &mut ActionBuf) {
        if self.active == 0 {
            return;
        }
        for port in 0..self.num_ports {
            if out.is_full() {
                return;
            }
            self.emit_port(port, now, out);
        }
    }

    /// Earliest time `poll` has something to emit (a refresh or a pending frame), `None` if
    /// nothing is scheduled. A time in the past means "now".
    #[inline]
    pub fn next_deadline(&self) -> Option<Nanos> {
        debug_assert_eq!(
            self.active,
            self.slots
                .iter()
                .filter(|s| s.state != Xstate::Idle)
                .count()
        );
        if self.active == 0 {
            return None;
        }
        self.slots
            .iter()
            .filter_map(|s| match s.state {
                Xstate::Paused(t) if t != Nanos::MAX => Some(t),
                Xstate::XonPending => Some(0),
                _ => None,
            })
            .min()
    }

    /// Bytes currently accounted to (port, prio) (0 when not accounted).
    pub fn counter(&self, port: u16, prio: u8) -> u64 {
        self.idx(port, prio).map_or(0, |i| self.slots[i].bytes)
    }

    /// Highest count ever reached for (port, prio).
    pub fn max_counter(&self, port: u16, prio: u8) -> u64 {
        self.idx(port, prio).map_or(0, |i| self.slots[i].max_bytes)
    }

    /// Is (port, prio) currently paused by us (XOFF sent, no XON yet)?
    pub fn is_xoff(&self, port: u16, prio: u8) -> bool {
        self.idx(port, prio)
            .is_some_and(|i| matches!(self.slots[i].state, Xstate::Paused(_)))
    }

    /// Counters.
    pub fn stats(&self) -> &PfcGenStats {
        &self.stats
    }
}

/// Counters of a [`PauseState`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseStats {
    /// PFC frames received with the priority's enable bit set, per priority.
    pub pfc_rx: [u64; NUM_CLASSES],
    /// Of those, frames with pause time 0 (XON), per priority.
    pub xon_rx: [u64; NUM_CLASSES],
    /// 802.3x PAUSE frames received.
    pub pause_rx: u64,
}

/// Pause timers of one egress port: per priority, the time until which it must not transmit.
#[derive(Clone, Debug, Default)]
pub struct PauseState {
    paused_until: [Nanos; NUM_CLASSES],
    /// The latest of `paused_until`: at or after it nothing is paused, and `paused_mask` answers
    /// without looking at the eight timers (the traffic manager asks on every dequeue).
    latest: Nanos,
    stats: PauseStats,
}

impl PauseState {
    /// Nothing paused.
    pub fn new() -> Self {
        Self::default()
    }

    /// A PFC frame arrived at `now` on a link of `rate_bps`: each enabled priority `i` is paused
    /// until `now + quanta_to_ns(times[i], rate_bps)` (replacing its previous timer, as 802.1Qbb
    /// says); time 0 resumes it at `now`. `rate_bps == 0` gives zero-length pauses.
    pub fn on_pfc(&mut self, enable: u8, times: [u16; NUM_CLASSES], now: Nanos, rate_bps: u64) {
        for (i, &t) in times.iter().enumerate() {
            if enable & (1 << i) == 0 {
                continue;
            }
            self.stats.pfc_rx[i] += 1;
            if t == 0 {
                self.stats.xon_rx[i] += 1;
            }
            self.paused_until[i] = now.saturating_add(quanta_to_ns(t, rate_bps));
        }
        self.latest = self.paused_until.iter().copied().max().unwrap_or(0);
    }

    /// An 802.3x PAUSE frame: pauses (or with time 0 resumes) every priority.
    pub fn on_pause(&mut self, time: u16, now: Nanos, rate_bps: u64) {
        self.stats.pause_rx += 1;
        let until = now.saturating_add(quanta_to_ns(time, rate_bps));
        self.paused_until = [until; NUM_CLASSES];
        self.latest = until;
    }

    /// Is `prio` paused at `now` (`now < paused_until`)? Priorities >= 8 are never paused.
    #[inline]
    pub fn is_paused(&self, prio: u8, now: Nanos) -> bool {
        self.paused_until
            .get(prio as usize)
            .is_some_and(|&u| now < u)
    }

    /// Bit `i` set = priority `i` paused at `now`.
    #[inline]
    pub fn paused_mask(&self, now: Nanos) -> u8 {
        if now >= self.latest {
            return 0;
        }
        let mut m = 0u8;
        for (i, &u) in self.paused_until.iter().enumerate() {
            if now < u {
                m |= 1 << i;
            }
        }
        m
    }

    /// The time priority `prio` may transmit again (<= now when not paused; 0 for prio >= 8).
    pub fn paused_until(&self, prio: u8) -> Nanos {
        self.paused_until.get(prio as usize).copied().unwrap_or(0)
    }

    /// The earliest time after `now` at which some currently paused priority resumes.
    pub fn next_unpause(&self, now: Nanos) -> Option<Nanos> {
        self.paused_until.iter().copied().filter(|&u| u > now).min()
    }

    /// Counters.
    pub fn stats(&self) -> &PauseStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::NS_PER_US;

    fn params() -> PfcParams {
        PfcParams {
            enabled_classes: 0b0000_1000, // priority 3 lossless
            xoff_bytes: 10_000,
            xon_bytes: 5_000,
            headroom_bytes: 4_000,
            pause_quanta: 0xffff,
            refresh_ns: 100 * NS_PER_US,
            dynamic: None,
        }
    }

    /// Dynamic thresholds (alpha 1/8 of a 80 000-byte shared buffer, the cap out of reach, a
    /// 3072-byte resume offset): alone, port 0 is paused at 9000 bytes (the first count at or
    /// above (80 000 - count) / 8); with port 1 holding 40 000, at 5000 ((40 000 - 5000) / 8 =
    /// 4375); it resumes once 3072 bytes below the threshold, which grows as bytes leave.
    #[test]
    fn dynamic_thresholds_follow_the_free_buffer() {
        let p = PfcParams {
            xoff_bytes: 1_000_000,
            xon_bytes: 1_000_000 - 3072,
            headroom_bytes: 100_000,
            dynamic: Some(DynamicXoff {
                alpha_1024: 128,
                pool_bytes: 80_000,
            }),
            ..params()
        };
        let first_xoff = |g: &mut PfcGenerator| {
            let mut out = ActionBuf::new();
            (1..=20u64)
                .find(|_| {
                    g.on_enqueue(0, 3, 1000, 0, &mut out);
                    !out.is_empty()
                })
                .map(|k| k * 1000)
        };
        let mut g = PfcGenerator::new(2, p);
        assert_eq!(first_xoff(&mut g), Some(9000));
        let mut g = PfcGenerator::new(2, p);
        let mut out = ActionBuf::new();
        assert_eq!(g.on_enqueue(1, 3, 40_000, 0, &mut out), Admit::Accept);
        assert_eq!(
            out.as_slice()[0].port,
            1,
            "40 000 is above port 1's own 80 000 / 8"
        );
        assert_eq!(first_xoff(&mut g), Some(5000));
        // Port 1's bytes leave: the threshold is (80 000 - 5000) / 8 = 9375, XON at or below
        // 6303: port 0's 5000 qualify at once on its next dequeue.
        let mut out = ActionBuf::new();
        g.on_dequeue(1, 3, 40_000, 1, &mut out);
        g.on_dequeue(0, 3, 0, 2, &mut out);
        assert!(out
            .as_slice()
            .iter()
            .any(|a| a.port == 0 && a.times == [0; 8]));
        // The static generator is unchanged: XOFF at xoff_bytes.
        let mut g = PfcGenerator::new(1, params());
        assert_eq!(first_xoff(&mut g), Some(10_000));
    }

    #[test]
    fn xoff_at_threshold_then_xon() {
        let mut g = PfcGenerator::new(2, params());
        let mut out = ActionBuf::new();
        for _ in 0..9 {
            assert_eq!(g.on_enqueue(1, 3, 1000, 0, &mut out), Admit::Accept);
        }
        assert!(out.is_empty());
        assert_eq!(g.on_enqueue(1, 3, 1000, 5, &mut out), Admit::Accept);
        assert_eq!(
            out.as_slice(),
            &[PfcAction {
                port: 1,
                class_enable: 0b1000,
                times: [0, 0, 0, 0xffff, 0, 0, 0, 0]
            }]
        );
        assert!(g.is_xoff(1, 3));
        assert_eq!(g.next_deadline(), Some(5 + 100 * NS_PER_US));
        out.clear();
        // More data: no second XOFF.
        g.on_enqueue(1, 3, 1000, 6, &mut out);
        assert!(out.is_empty());
        // Drain to 6000: still paused; to 5000: XON.
        g.on_dequeue(1, 3, 5000, 7, &mut out);
        assert!(out.is_empty());
        g.on_dequeue(1, 3, 1000, 8, &mut out);
        assert_eq!(out.as_slice()[0].class_enable, 0b1000);
        assert_eq!(out.as_slice()[0].times, [0; 8]);
        assert!(!g.is_xoff(1, 3));
        assert_eq!(g.next_deadline(), None);
        assert_eq!(g.stats().xoff_sent[3], 1);
        assert_eq!(g.stats().xon_sent[3], 1);
        assert_eq!(g.max_counter(1, 3), 11_000);
        assert_eq!(g.counter(1, 3), 5_000);
    }

    #[test]
    fn headroom_overflow_dropped_and_counted() {
        let mut g = PfcGenerator::new(1, params());
        let mut out = ActionBuf::new();
        assert_eq!(g.on_enqueue(0, 3, 14_000, 0, &mut out), Admit::Accept);
        assert_eq!(
            g.on_enqueue(0, 3, 1, 0, &mut out),
            Admit::Drop(DropReason::HeadroomOverflow)
        );
        assert_eq!(g.counter(0, 3), 14_000);
        assert_eq!(g.stats().headroom_drops[3], 1);
    }

    #[test]
    fn lossy_and_out_of_range_not_accounted() {
        let mut g = PfcGenerator::new(1, params());
        let mut out = ActionBuf::new();
        assert_eq!(g.on_enqueue(0, 0, 1 << 40, 0, &mut out), Admit::Accept);
        assert_eq!(g.on_enqueue(7, 3, 1 << 40, 0, &mut out), Admit::Accept);
        assert_eq!(g.on_enqueue(0, 9, 1 << 40, 0, &mut out), Admit::Accept);
        g.on_dequeue(7, 3, 5, 0, &mut out);
        assert!(out.is_empty());
        assert_eq!(g.counter(0, 0), 0);
        assert_eq!(g.stats().unaccounted, 2);
        g.on_dequeue(0, 3, 5, 0, &mut out);
        assert_eq!(g.stats().underflows, 1);
    }

    #[test]
    fn refresh_and_grouping() {
        let mut p = params();
        p.enabled_classes = 0b11;
        let mut g = PfcGenerator::new(1, p);
        let mut out = ActionBuf::new();
        g.on_enqueue(0, 0, 10_000, 0, &mut out);
        g.on_enqueue(0, 1, 10_000, 50 * NS_PER_US, &mut out);
        assert_eq!(out.len(), 2);
        out.clear();
        g.poll(99 * NS_PER_US, &mut out);
        assert!(out.is_empty());
        g.poll(100 * NS_PER_US, &mut out);
        assert_eq!(out.as_slice()[0].class_enable, 0b01);
        out.clear();
        // Both due at 150 us: one frame with both priorities.
        g.poll(200 * NS_PER_US, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out.as_slice()[0].class_enable, 0b11);
        assert_eq!(out.as_slice()[0].times[..2], [0xffff, 0xffff]);
        assert_eq!(g.next_deadline(), Some(300 * NS_PER_US));
        assert_eq!(g.stats().xoff_sent[0], 3);
    }

    #[test]
    fn full_action_buf_defers_to_poll() {
        let mut g = PfcGenerator::new(ACTION_BUF_CAP + 2, params());
        let mut out = ActionBuf::new();
        for port in 0..(ACTION_BUF_CAP + 2) as u16 {
            g.on_enqueue(port, 3, 10_000, 0, &mut out);
        }
        assert_eq!(out.len(), ACTION_BUF_CAP);
        assert_eq!(g.stats().deferred, 2);
        assert_eq!(g.next_deadline(), Some(0));
        out.clear();
        g.poll(1, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(g.stats().xoff_sent[3], ACTION_BUF_CAP as u64 + 2);
        // XON deferred too.
        let mut full = ActionBuf::new();
        while full.push(PfcAction::default()) {}
        g.on_dequeue(0, 3, 10_000, 2, &mut full);
        assert!(!g.is_xoff(0, 3));
        assert_eq!(g.next_deadline(), Some(0));
        out.clear();
        g.poll(3, &mut out);
        assert_eq!(out.as_slice()[0].times, [0; 8]);
        assert_eq!(g.stats().xon_sent[3], 1);
    }

    #[test]
    fn pause_state_timers() {
        let rate = 100_000_000_000; // 1 quantum = 5.12 ns
        let mut s = PauseState::new();
        let mut t = [0u16; 8];
        t[3] = 100;
        t[5] = 200; // bit 5 not enabled: ignored
        s.on_pfc(0b1000, t, 1000, rate);
        assert!(s.is_paused(3, 1000));
        assert!(s.is_paused(3, 1511));
        assert!(!s.is_paused(3, 1512));
        assert!(!s.is_paused(5, 1000));
        assert!(!s.is_paused(42, 1000));
        assert_eq!(s.paused_mask(1000), 0b1000);
        assert_eq!(s.next_unpause(1000), Some(1512));
        assert_eq!(s.next_unpause(1512), None);
        // XON resumes now.
        s.on_pfc(0b1000, [0; 8], 1100, rate);
        assert!(!s.is_paused(3, 1100));
        assert_eq!(s.stats().pfc_rx[3], 2);
        assert_eq!(s.stats().xon_rx[3], 1);
        s.on_pause(10, 2000, rate);
        assert_eq!(s.paused_mask(2000), 0xff);
        assert_eq!(s.paused_until(0), 2052);
        assert_eq!(s.stats().pause_rx, 1);
    }
}
