//! Bifrost downstream port (paper 004, "Bifrost: extending RoCE for long-distance inter-DC links",
//! section IV-B, Algorithm 1, with the pause-frame-leak handling of section IV-D).
//!
//! Two layers:
//!
//! - [`BifrostState`]: the pure `Bifrost_update(L, r, n)` of Algorithm 1 for one (port,
//!   priority). It keeps the *virtual incoming* bytes F and turns the ingress queue length L and
//!   the bytes r received in the last slot into a pause time p. It reads line by line next to the
//!   paper; everything is in bytes (a time at the link rate Rs is the bytes Rs sends in it).
//! - [`BifrostGenerator`]: the switch primitive. Per governed (ingress port, priority) it accounts
//!   the ingress queue bytes L (what the engine's shared buffer holds that arrived on that port in
//!   that priority) and the bytes r received in the current slot, runs the slot timer on the
//!   engine clock (every T, on a grid of multiples of T), calls [`BifrostState::update`] and
//!   returns the resulting 802.1Qbb frames as [`PfcAction`]s (one frame per port with the pause
//!   times of all its governed priorities whose p > 0).
//!
//! Choices where the paper is silent or ambiguous (docs/bifrost.md has the full list):
//!
//! - Units: bytes throughout. Δ (BDP) = Rs * RTT = Rs * 2D (section III-B: the headroom 2*Rs*D
//!   "is one BDP"); Rs*T is the bytes of one slot at line rate.
//! - Start (line 1): F = Δ + Rs*T, i.e. the downstream assumes the upstream may be sending at
//!   line rate; this is the only safe assumption when nothing is known.
//! - Slot number n (line 5): the index of the slot that just ended on the engine clock's grid of
//!   multiples of T (`slot_end / T`), so the leak check of line 13 runs every k slots of wall
//!   time, also across idle periods that the generator skips (an idle slot is a fixed point of
//!   the update: L = 0, r = 0, F = Δ + Rs*T gives c = Rs*T, p = 0 and F unchanged).
//! - Line 15, `ĉ = max(0, c - (L + F - H))`: taken literally, L + F < H would *add* H - L - F to
//!   the grant (up to twice the free space), which contradicts its comment "deduct over-granted
//!   bytes" and section IV-D ("check the L + F periodically to see if it exceeds H"). We deduct
//!   the excess only: `ĉ = max(0, c - max(0, L + F - H))`.
//! - c' in `p = T - c'/Rs` (line 16) is ĉ clamped to [0, Rs*T]: "the pause time in Bifrost is
//!   bounded to one time slot" (section V). c itself goes negative whenever the arrivals of a slot
//!   exceed the previous slot's plus the drain (L + F > H before the update); a pause longer than T
//!   cannot be realized, since the next frame replaces the upstream's timer (802.1Qbb).
//! - Rounding: one pause quantum is 512 bit times, i.e. 64 bytes at the link rate whatever the
//!   rate. p is rounded *up* to whole quanta (the upstream is never granted more than ĉ, so
//!   L + F <= H stays exact) and saturated at 65535 (the config refuses Rs*T/64 > 65535,
//!   section V). p = 0 sends no frame (line 7). The lower bound of Theorem 1 then holds to within
//!   one quantum (63 B) when H is exactly Δ + 2*Rs*T, exactly with 64 B more.
//! - Line 17 adds the grant the frame actually carries (Rs*T - 64 * quanta, i.e. ĉ after clamping
//!   and rounding) rather than the raw c: F then stays what the upstream can really still send,
//!   and Theorem 1 holds with the clamp (the property test `theorem1_fluid` fails with the raw c:
//!   F goes negative and L exceeds H). F is also kept >= 0: more received than granted is a leak,
//!   which then shows as L + F > H for the check of line 13.
//! - r (line 4) counts every byte that arrived on the port in the priority in the slot, admitted
//!   or not (a byte dropped for lack of buffer was still sent by the upstream).

use crate::asic::pfc::{ActionBuf, Admit, PfcAction};
use crate::control::LatencyHist;
use crate::counters::DropReason;
use crate::packet::NUM_CLASSES;
use crate::time::Nanos;

/// Bytes per pause quantum at line rate: 512 bit times (802.3 clause 31B / 802.1Qbb).
pub const QUANTUM_BYTES: i64 = 64;

/// The fixed parameters of Algorithm 1, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BifrostConsts {
    /// Δ, the bandwidth-delay product of the link: Rs * RTT.
    pub bdp_bytes: u64,
    /// Rs * T: what the link carries in one slot.
    pub slot_bytes: u64,
    /// H: the queue buffer reserved for this (port, priority).
    pub h_bytes: u64,
    /// k: the leak check (lines 12-15) runs when `n % k == 0`.
    pub k: u32,
}

/// What one `Bifrost_update` computed (for tests, counters and traces).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotResult {
    /// The slot number n passed in.
    pub n: u64,
    /// L and r passed in.
    pub l: i64,
    pub r: i64,
    /// Granted bytes c (line 10), possibly negative.
    pub c: i64,
    /// ĉ after the leak check (line 11 or 15).
    pub c_hat: i64,
    /// Pause p in bytes at line rate: Rs*T - ĉ (line 16), >= 0.
    pub pause_bytes: i64,
    /// p in quanta, rounded up, saturated at 65535. 0 = no frame (line 7).
    pub quanta: u16,
    /// F before and after the update (line 17).
    pub f_before: i64,
    pub f: i64,
    /// This slot ran the leak check (n % k == 0).
    pub leak_check: bool,
}

/// Algorithm 1's state for one (port, priority): the virtual incoming bytes F.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BifrostState {
    k: BifrostConsts,
    /// F: bytes that may still arrive in the next RTT + T (an upper bound).
    f: i64,
}

impl BifrostState {
    /// Line 1: `F <- Δ + Rs*T`.
    pub fn new(k: BifrostConsts) -> Self {
        BifrostState {
            k,
            f: (k.bdp_bytes + k.slot_bytes) as i64,
        }
    }

    /// The virtual incoming bytes F.
    #[inline]
    pub fn f(&self) -> i64 {
        self.f
    }

    /// The constants.
    pub fn consts(&self) -> &BifrostConsts {
        &self.k
    }

    /// At rest: an update with L = 0, r = 0 changes nothing and sends nothing.
    #[inline]
    pub fn at_rest(&self) -> bool {
        self.f == (self.k.bdp_bytes + self.k.slot_bytes) as i64
    }

    /// `Bifrost_update(L, r, n)`, lines 9-18 of Algorithm 1 (see the module doc for the choices).
    #[inline]
    pub fn update(&mut self, l: u64, r: u64, n: u64) -> SlotResult {
        let (l, r) = (l as i64, r as i64);
        let rs_t = self.k.slot_bytes as i64;
        let h = self.k.h_bytes as i64;
        let f_before = self.f;
        // Line 10: c <- min(Rs*T, H - L - F).
        let c = rs_t.min(h - l - self.f);
        // Line 11: ĉ <- c.
        let mut c_hat = c;
        // Lines 12-15: every k slots, deduct the over-granted bytes L + F - H (only an excess).
        let leak_check = self.k.k != 0 && n.is_multiple_of(self.k.k as u64);
        if leak_check {
            c_hat = 0.max(c - 0.max(l + self.f - h));
        }
        // Line 16: p <- T - c'/Rs with c' the grant the frame can carry: ĉ clamped to
        // [0, Rs*T] (section V: "the pause time in Bifrost is bounded to one time slot"), in
        // bytes at line rate, rounded up to whole quanta.
        let grant = c_hat.clamp(0, rs_t);
        let pause_bytes = rs_t - grant;
        let quanta = (pause_bytes as u64)
            .div_ceil(QUANTUM_BYTES as u64)
            .min(u16::MAX as u64) as u16;
        let granted = (rs_t - quanta as i64 * QUANTUM_BYTES).max(0);
        // Line 17: F <- min(Δ + Rs*T, F - r + c), with c the grant actually sent (`granted`,
        // see the module doc) and F >= 0 (bytes still to come cannot be negative; more received
        // than granted is a leak, which then shows as L + F > H for the check of line 13).
        self.f = ((self.k.bdp_bytes + self.k.slot_bytes) as i64).min((self.f - r + granted).max(0));
        SlotResult {
            n,
            l,
            r,
            c,
            c_hat,
            pause_bytes,
            quanta,
            f_before,
            f: self.f,
            leak_check,
        }
    }
}

/// The Bifrost generator's parameters (from the config's `[bifrost]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BifrostParams {
    /// Port indices (into the switch's ports) governed.
    pub ports: Vec<u16>,
    /// Bit i = priority i governed.
    pub priorities: u8,
    /// T, ns.
    pub slot_ns: Nanos,
    /// Algorithm 1's constants (Δ, Rs*T, H, k).
    pub consts: BifrostConsts,
    /// Admission limit of one (port, priority): H plus the leak headroom (section IV-D: k * MTU).
    /// A packet that would take L above it is refused (`DropReason::HeadroomOverflow`).
    pub limit_bytes: u64,
}

/// Counters of a [`BifrostGenerator`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BifrostStats {
    /// Slot updates run (over all governed pairs).
    pub updates: u64,
    /// Pause frames sent (one per port per slot with some p > 0).
    pub frames: u64,
    /// Slot timer firings, and slots skipped because the worker was more than a slot late.
    pub slots: u64,
    pub slots_missed: u64,
    /// Slot timer lateness (engine time of the update - the slot boundary), ns.
    pub lateness: LatencyHist,
    /// Packets refused because L would exceed `limit_bytes`.
    pub overflow_drops: u64,
    /// Largest L of any governed pair.
    pub max_l_bytes: u64,
    /// Frames that did not fit the action buffer.
    pub deferred: u64,
}

#[derive(Clone, Copy, Debug)]
struct Pair {
    on: bool,
    /// L: bytes of this (port, priority) in the buffer.
    l: u64,
    /// r: bytes received in the current slot.
    rx: u64,
    max_l: u64,
    state: BifrostState,
    last: SlotResult,
}

/// Per governed (ingress port, priority): L and r accounting, the slot timer, Algorithm 1.
#[derive(Clone, Debug)]
pub struct BifrostGenerator {
    p: BifrostParams,
    num_ports: usize,
    pairs: Vec<Pair>,
    /// The next slot boundary, when the timer is armed (something not at rest).
    next_slot: Option<Nanos>,
    stats: BifrostStats,
}

impl BifrostGenerator {
    /// A generator for ports `0..num_ports` (state allocated here).
    pub fn new(num_ports: usize, params: BifrostParams) -> Self {
        let pair = Pair {
            on: false,
            l: 0,
            rx: 0,
            max_l: 0,
            state: BifrostState::new(params.consts),
            last: SlotResult::default(),
        };
        let mut pairs = vec![pair; num_ports * NUM_CLASSES];
        for &port in &params.ports {
            for prio in 0..NUM_CLASSES {
                if (port as usize) < num_ports && params.priorities & (1 << prio) != 0 {
                    pairs[port as usize * NUM_CLASSES + prio].on = true;
                }
            }
        }
        BifrostGenerator {
            p: params,
            num_ports,
            pairs,
            next_slot: None,
            stats: BifrostStats::default(),
        }
    }

    pub fn params(&self) -> &BifrostParams {
        &self.p
    }

    #[inline]
    fn idx(&self, port: u16, prio: u8) -> Option<usize> {
        let (port, prio) = (port as usize, prio as usize);
        if port < self.num_ports && prio < NUM_CLASSES {
            let i = port * NUM_CLASSES + prio;
            self.pairs[i].on.then_some(i)
        } else {
            None
        }
    }

    /// Is (ingress port index, priority) governed by Bifrost (instead of classic PFC)?
    #[inline]
    pub fn governs(&self, port: u16, prio: u8) -> bool {
        self.idx(port, prio).is_some()
    }

    /// A packet of `bytes` arrived on `port` in `prio` at `now` and wants buffer space. Counts it
    /// in r; refuses it (`Drop(HeadroomOverflow)`) if L would exceed the limit, else accounts it
    /// in L (call `on_dequeue` when it leaves). Arms the slot timer. Ungoverned pairs: `Accept`,
    /// nothing accounted.
    pub fn on_enqueue(&mut self, port: u16, prio: u8, bytes: u64, now: Nanos) -> Admit {
        let Some(i) = self.idx(port, prio) else {
            return Admit::Accept;
        };
        self.arm(now);
        let limit = self.p.limit_bytes;
        let s = &mut self.pairs[i];
        s.rx = s.rx.saturating_add(bytes);
        if s.l.saturating_add(bytes) > limit {
            self.stats.overflow_drops += 1;
            return Admit::Drop(DropReason::HeadroomOverflow);
        }
        s.l += bytes;
        s.max_l = s.max_l.max(s.l);
        self.stats.max_l_bytes = self.stats.max_l_bytes.max(s.l);
        Admit::Accept
    }

    /// `bytes` accounted to (port, prio) left the buffer.
    pub fn on_dequeue(&mut self, port: u16, prio: u8, bytes: u64) {
        if let Some(i) = self.idx(port, prio) {
            let s = &mut self.pairs[i];
            s.l = s.l.saturating_sub(bytes);
        }
    }

    fn arm(&mut self, now: Nanos) {
        if self.next_slot.is_none() {
            let t = self.p.slot_ns.max(1);
            self.next_slot = Some((now / t + 1) * t);
        }
    }

    /// The next slot boundary, if the timer is armed.
    #[inline]
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.next_slot
    }

    /// Run the slot that ended at the boundary due by `now`: Algorithm 1 for every governed pair,
    /// one frame per port into `out` for the priorities with p > 0. If the caller is more than a
    /// slot late, the missed slots are counted and skipped (the update runs once, with r the
    /// bytes of the whole late period, as a longer slot). Disarms the timer when every pair is at
    /// rest.
    pub fn poll(&mut self, now: Nanos, out: &mut ActionBuf) {
        let Some(due) = self.next_slot else { return };
        if now < due {
            return;
        }
        let t = self.p.slot_ns.max(1);
        let late = now - due;
        self.stats.slots += 1;
        self.stats.lateness.record(late);
        let missed = late / t;
        self.stats.slots_missed += missed;
        let boundary = due + missed * t;
        let n = boundary / t;
        let mut busy = false;
        for port in 0..self.num_ports {
            let mut a = PfcAction {
                port: port as u16,
                ..PfcAction::default()
            };
            for prio in 0..NUM_CLASSES {
                let s = &mut self.pairs[port * NUM_CLASSES + prio];
                if !s.on {
                    continue;
                }
                let res = s.state.update(s.l, s.rx, n);
                s.rx = 0;
                s.last = res;
                self.stats.updates += 1;
                if res.quanta > 0 {
                    a.class_enable |= 1 << prio;
                    a.times[prio] = res.quanta;
                }
                busy |= s.l > 0 || !s.state.at_rest();
            }
            if a.class_enable != 0 {
                if out.push(a) {
                    self.stats.frames += 1;
                } else {
                    self.stats.deferred += 1;
                }
            }
        }
        self.next_slot = busy.then_some(boundary + t);
    }

    /// L of (port, prio) (0 when not governed).
    pub fn queue_bytes(&self, port: u16, prio: u8) -> u64 {
        self.idx(port, prio).map_or(0, |i| self.pairs[i].l)
    }

    /// Highest L of (port, prio).
    pub fn max_queue_bytes(&self, port: u16, prio: u8) -> u64 {
        self.idx(port, prio).map_or(0, |i| self.pairs[i].max_l)
    }

    /// F of (port, prio).
    pub fn virtual_incoming(&self, port: u16, prio: u8) -> Option<i64> {
        self.idx(port, prio).map(|i| self.pairs[i].state.f())
    }

    /// The last update of (port, prio).
    pub fn last_slot(&self, port: u16, prio: u8) -> Option<SlotResult> {
        self.idx(port, prio).map(|i| self.pairs[i].last)
    }

    pub fn stats(&self) -> &BifrostStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A small link for hand computation: Rs*T = 1000 B, Δ = 10 000 B (RTT = 10 slots),
    // H = Δ + 2*Rs*T = 12 000 B.
    const K: BifrostConsts = BifrostConsts {
        bdp_bytes: 10_000,
        slot_bytes: 1_000,
        h_bytes: 12_000,
        k: 4,
    };

    #[test]
    fn starts_at_bdp_plus_one_slot_and_rests() {
        let mut s = BifrostState::new(K);
        assert_eq!(s.f(), 11_000);
        assert!(s.at_rest());
        // Line rate, queue empty: c = min(1000, 12000 - 0 - 11000) = 1000, p = 0, F stays.
        let r = s.update(0, 1_000, 1);
        assert_eq!(
            (r.c, r.c_hat, r.pause_bytes, r.quanta, r.f),
            (1000, 1000, 0, 0, 11_000)
        );
        // Idle: fixed point.
        let r = s.update(0, 0, 2);
        assert_eq!((r.quanta, r.f), (0, 11_000));
    }

    #[test]
    fn congestion_onset_hand_computed() {
        // Fig. 5: line rate, then the drain stops. Slot 1: 1000 B arrived and stayed (L = 1000).
        let mut s = BifrostState::new(K);
        let r = s.update(1_000, 1_000, 1);
        // c = min(1000, 12000 - 1000 - 11000) = 0 -> p = T (1000 B = 15.625 -> 16 quanta).
        assert_eq!((r.c, r.pause_bytes, r.quanta), (0, 1000, 16));
        // F = min(11000, 11000 - 1000 + 0) = 10000.
        assert_eq!(r.f, 10_000);
        // Slot 2: L = 2000, r = 1000: c = min(1000, 12000 - 2000 - 10000) = 0; F = 9000.
        let r = s.update(2_000, 1_000, 2);
        assert_eq!((r.c, r.quanta, r.f), (0, 16, 9_000));
        // Drain resumes partly: L = 2500, r = 1000: c = min(1000, 12000 - 2500 - 9000) = 500 ->
        // p = 500 B = 7.8 -> 8 quanta (512 B, rounded up), so the frame grants 488 B and
        // F = 9000 - 1000 + 488 = 8488.
        let r = s.update(2_500, 1_000, 3);
        assert_eq!(
            (r.c, r.c_hat, r.pause_bytes, r.quanta, r.f),
            (500, 500, 500, 8, 8_488)
        );
    }

    #[test]
    fn leak_check_every_k_slots_deducts_the_excess_only() {
        let mut s = BifrostState::new(K);
        // Put the state at F = 8488 as above.
        s.update(1_000, 1_000, 1);
        s.update(2_000, 1_000, 2);
        s.update(2_500, 1_000, 3);
        // A leak: more than expected sits in the queue, L + F = 3800 + 8488 = 12288 > H.
        // Slot 4 is a check slot (4 % 4 == 0): c = min(1000, 12000 - 12288) = -288;
        // ĉ = max(0, -288 - 288) = 0 -> p = T (16 quanta); F = 8488 - 500 + 0 = 7988.
        let r = s.update(3_800, 500, 4);
        assert!(r.leak_check);
        assert_eq!(
            (r.c, r.c_hat, r.pause_bytes, r.quanta, r.f),
            (-288, 0, 1000, 16, 7_988)
        );
        // Not a check slot: a negative c is clamped, p = T (never more than one slot).
        let mut s2 = BifrostState::new(K);
        s2.update(1_000, 1_000, 1);
        let r = s2.update(2_300, 1_000, 2);
        assert!(!r.leak_check);
        assert_eq!(
            (r.c, r.c_hat, r.pause_bytes, r.quanta),
            (-300, -300, 1000, 16)
        );
        // A check slot with L + F < H does not add to the grant (line 15 deducts excess only).
        let mut s3 = BifrostState::new(K);
        let r = s3.update(500, 1_000, 4);
        // c = min(1000, 12000 - 500 - 11000) = 500; ĉ = 500 (not 1000).
        assert_eq!((r.c, r.c_hat, r.quanta), (500, 500, 8));
    }

    #[test]
    fn pause_never_overflows_u16() {
        let k = BifrostConsts {
            bdp_bytes: 1 << 40,
            slot_bytes: 1 << 30,
            h_bytes: (1 << 40) + (1 << 31),
            k: 1,
        };
        let mut s = BifrostState::new(k);
        let r = s.update(1 << 31, 0, 3);
        assert_eq!(r.quanta, u16::MAX);
        // 400 Gb/s, T = 10 us: Rs*T = 500 000 B = 7812.5 -> 7813 quanta (section V).
        let k = BifrostConsts {
            bdp_bytes: 300_000_000,
            slot_bytes: 500_000,
            h_bytes: 301_000_000,
            k: 8,
        };
        let mut s = BifrostState::new(k);
        let r = s.update(500_000, 0, 1);
        assert_eq!(r.quanta, 7813);
    }

    fn params() -> BifrostParams {
        BifrostParams {
            ports: vec![1],
            priorities: 1 << 3,
            slot_ns: 1_000,
            consts: K,
            limit_bytes: 12_000 + 4 * 1500,
        }
    }

    #[test]
    fn generator_accounts_and_emits_per_slot() {
        let mut g = BifrostGenerator::new(2, params());
        assert!(g.governs(1, 3) && !g.governs(1, 2) && !g.governs(0, 3));
        assert_eq!(g.on_enqueue(0, 3, 100, 0), Admit::Accept);
        assert_eq!(
            g.next_deadline(),
            None,
            "ungoverned traffic does not arm the timer"
        );
        assert_eq!(g.on_enqueue(1, 3, 1_000, 500), Admit::Accept);
        assert_eq!(g.next_deadline(), Some(1_000));
        let mut out = ActionBuf::new();
        g.poll(999, &mut out);
        assert!(out.is_empty());
        g.poll(1_000, &mut out);
        // Slot n = 1: L = 1000, r = 1000 -> c = 0, p = 16 quanta for priority 3 on port 1.
        assert_eq!(out.len(), 1);
        let a = out.as_slice()[0];
        assert_eq!((a.port, a.class_enable, a.times[3]), (1, 1 << 3, 16));
        assert_eq!(g.last_slot(1, 3).unwrap().n, 1);
        assert_eq!(g.next_deadline(), Some(2_000));
        // Drain everything; the pair goes back to rest once F refills to the cap.
        g.on_dequeue(1, 3, 1_000);
        out.clear();
        let mut t = 2_000;
        while let Some(d) = g.next_deadline() {
            t = d;
            g.poll(t, &mut out);
            out.clear();
            assert!(t < 100_000);
        }
        assert!(t >= 2_000);
        assert_eq!(g.virtual_incoming(1, 3), Some(11_000));
        // Late by 2.5 slots: the update runs once, on the grid, the missed slots counted.
        g.on_enqueue(1, 3, 10, t + 10);
        let due = g.next_deadline().unwrap();
        g.poll(due + 2_500, &mut out);
        assert_eq!(g.stats().slots_missed, 2);
        assert_eq!(g.last_slot(1, 3).unwrap().n, (due + 2_000) / 1_000);
        assert_eq!(g.next_deadline(), Some(due + 3_000));
    }

    #[test]
    fn generator_refuses_above_limit_but_counts_r() {
        let mut g = BifrostGenerator::new(2, params());
        let limit = g.params().limit_bytes;
        assert_eq!(g.on_enqueue(1, 3, limit, 0), Admit::Accept);
        assert_eq!(
            g.on_enqueue(1, 3, 1, 0),
            Admit::Drop(DropReason::HeadroomOverflow)
        );
        assert_eq!(g.stats().overflow_drops, 1);
        assert_eq!(g.queue_bytes(1, 3), limit);
        let mut out = ActionBuf::new();
        g.poll(1_000, &mut out);
        assert_eq!(g.last_slot(1, 3).unwrap().r, limit as i64 + 1);
    }

    /// A fluid model of the Bifrost link, slot by slot: the upstream is always backlogged and
    /// honors each frame (802.1Qbb: a frame replaces the timer) one-way delay D = `d_slots` slots
    /// later; what it sends in a slot arrives D later; the downstream drains `drain[j]` bytes
    /// (at most Rs*T) in slot j. Returns per slot (L, F, wanted drain, drained).
    fn fluid(k: BifrostConsts, d_slots: usize, drain: &[u64]) -> Vec<(i64, i64, u64, u64)> {
        let rs_t = k.slot_bytes as i64;
        let rtt = 2 * d_slots;
        let n_slots = drain.len();
        // arrivals[j] = bytes received in slot j (1-based). Slots 1..=rtt+1 are at line rate.
        let mut arrivals = vec![0i64; n_slots + rtt + 3];
        for a in arrivals.iter_mut().take(rtt + 2).skip(1) {
            *a = rs_t;
        }
        let mut s = BifrostState::new(k);
        let mut l: i64 = 0;
        // The upstream's pause timer, in bytes of line-rate time relative to the arrival of the
        // frame of the current slot.
        let mut paused_left: i64 = 0;
        let mut out = Vec::new();
        for j in 1..=n_slots {
            let r = arrivals[j];
            let want = drain[j - 1] as i64;
            let drained = want.min(l + r);
            l += r - drained;
            let res = s.update(l as u64, r as u64, j as u64);
            // The frame (if any) reaches the upstream D later, at the start of its interval.
            if res.quanta > 0 {
                paused_left = res.quanta as i64 * QUANTUM_BYTES;
            }
            let sent = (rs_t - paused_left.clamp(0, rs_t)).max(0);
            paused_left = (paused_left - rs_t).max(0);
            // Sent in [jT + D, (j+1)T + D): received in slot j + rtt + 1.
            arrivals[j + rtt + 1] = sent;
            out.push((l, s.f(), want as u64, drained as u64));
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Theorem 1 on the fluid model: Δ + Rs*T <= L + F <= H in every slot, L never above
        /// H, and no throughput loss (the drain always got what it wanted).
        #[test]
        fn theorem1_fluid(
            d_slots in 1usize..12,
            quanta_per_slot in 4u64..40,
            odd in 0u64..64,
            extra in 0u64..2000,
            kk in 1u32..9,
            drain in proptest::collection::vec(0u8..=10, 50..400),
        ) {
            let slot_bytes = quanta_per_slot * 64 + odd;
            let bdp = 2 * d_slots as u64 * slot_bytes;
            let k = BifrostConsts { bdp_bytes: bdp, slot_bytes, h_bytes: bdp + 2 * slot_bytes + extra, k: kk };
            let drain: Vec<u64> = drain.iter().map(|&x| slot_bytes * x as u64 / 10).collect();
            // Pauses are whole quanta rounded up (never more than ĉ granted), so the lower
            // bound and the drain hold to within one quantum (63 B) when H is at the bound, and
            // exactly with one quantum of margin (H >= Δ + 2*Rs*T + 64).
            let tol = if extra >= 64 { 0 } else { QUANTUM_BYTES - 1 };
            for (j, (l, f, want, got)) in fluid(k, d_slots, &drain).into_iter().enumerate() {
                let (lo, hi) = ((bdp + slot_bytes) as i64, k.h_bytes as i64);
                proptest::prop_assert!(l + f <= hi, "slot {}: L + F = {} > H = {}", j + 1, l + f, hi);
                proptest::prop_assert!(l + f >= lo - tol, "slot {}: L + F = {} < {}", j + 1, l + f, lo);
                proptest::prop_assert!(l <= hi);
                proptest::prop_assert!(got as i64 >= want as i64 - tol, "throughput loss in slot {}: {} of {}", j + 1, got, want);
            }
        }
    }
}
