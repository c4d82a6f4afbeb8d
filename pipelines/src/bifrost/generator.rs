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
//!   the excess only: `ĉ = max(0, c - max(0, L + F - H))`. With the grant clamped to [0, Rs*T]
//!   below, an excess already makes c < 0 and the grant 0 in every slot, so the check changes
//!   nothing (kept for the reading next to the paper); k only sizes the leak headroom k * MTU.
//! - c' in `p = T - c'/Rs` (line 16) is ĉ clamped to [0, Rs*T]: "the pause time in Bifrost is
//!   bounded to one time slot" (section V). c itself goes negative whenever the arrivals of a slot
//!   exceed the previous slot's plus the drain (L + F > H before the update); a pause longer than T
//!   cannot be realized, since the next frame replaces the upstream's timer (802.1Qbb).
//! - Rounding: one pause quantum is 512 bit times, i.e. 64 bytes at the link rate whatever the
//!   rate. p is rounded *up* to whole quanta (the upstream is never granted more than ĉ, so
//!   L + F <= H stays exact) and saturated at 65535 (the config refuses Rs*T/64 > 65535,
//!   section V). p = 0 sends no frame (line 7), except right after a whole-slot pause: rounded up,
//!   that pause outlasts its slot by up to 63 B when Rs*T is not whole quanta, so the slot that
//!   grants again sends a frame with p = 0 (802.1Qbb: resume) to end it on time (with
//!   `frame_bytes` > 0, as every config has, that frame has p > 0 anyway). The lower bound of
//!   Theorem 1 then holds to within one quantum (63 B) when H is exactly Δ + 2*Rs*T, exactly with
//!   64 B more.
//! - Line 17, `F <- F - r + c`: F is kept as the *history of the grants* of the last RTT + T
//!   (a ring of RTT/T + 2 grants per pair, allocated at start): each slot F takes off the bytes the
//!   grants expected in it (the grant sent RTT + T earlier; split over two slots when RTT is not
//!   a multiple of T) instead of the bytes r measured, and adds the grant the frame carries
//!   (Rs*T - 64 * quanta, not the raw c: with the raw c the fluid property test `theorem1_fluid`
//!   fails, F goes negative and L exceeds H). Section IV-D's leak handling ("those bytes will
//!   finally lead to L larger than expected by l and cause L + F > H") needs exactly this: with
//!   the measured r, a leaked byte lowers F as much as it raises L, L + F never moves, and the
//!   leaks add up unseen as a deficit of F against the bytes still in flight until F reaches 0
//!   (issue 7: 14 808 bytes after a 24-slot standstill, one packet refused at H + k*MTU; see
//!   docs/bifrost.md). With the history a leak shows as L + F > H at once, and the grant is 0
//!   until it is worked off. F stays in [0, Δ + Rs*T] by construction. Slots without an update
//!   (timer disarmed at rest, or missed) sent no frame, so they count as whole-slot grants.
//! - Whole frames (section IV-D's first leak, a pause frame reaching the upstream while it is
//!   sending a packet): an 802.3 upstream finishes the frame in transmission, so a window of w
//!   bytes carries up to w + one frame. A frame that opens a window (any partial grant, or a whole
//!   slot right after a slot that granted nothing) grants one largest frame (`frame_bytes`, MTU +
//!   overhead) less than ĉ, and F counts the window plus that frame (at most ĉ). A whole-slot
//!   grant while the window is open sends no frame and extends the window. Without this, every
//!   window leaks up to a frame and one RTT of windows is in flight before any leak is seen.
//!   The cost is on the other side of Theorem 1: F may over-count by up to a frame per window, so
//!   no-throughput-loss in every slot needs H >= Δ + 2*Rs*T + (RTT/T + 1) frames (the loss at
//!   the bound itself is a few frames per slot at most, under 0.5 % in total in the tests).
//! - r (line 4) counts every byte that arrived on the port in the priority in the slot, admitted
//!   or not (a byte dropped for lack of buffer was still sent by the upstream).

use longhaul_dataplane::asic::pfc::{ActionBuf, Admit, PfcAction};
use longhaul_dataplane::control::LatencyHist;
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::packet::NUM_CLASSES;
use longhaul_dataplane::time::Nanos;

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
    /// The largest frame the upstream sends, on the wire (MTU + preamble, IFG, FCS), bytes: a
    /// grant is cut so that the frame the upstream may start at the end of its window still fits
    /// (see the module doc, "whole frames"). 0 = a fluid upstream (no cut).
    pub frame_bytes: u64,
}

/// What one `Bifrost_update` computed (for tests, counters and traces).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotResult {
    /// The slot number n passed in.
    pub n: u64,
    /// L and r passed in.
    pub l: i64,
    pub r: i64,
    /// The bytes the grant history expected in this slot (what F takes off in line 17). r above
    /// it is a pause-frame leak (section IV-D), below it bytes the upstream did not send (yet).
    pub expected: i64,
    /// Granted bytes c (line 10), possibly negative.
    pub c: i64,
    /// ĉ after the leak check (line 11 or 15).
    pub c_hat: i64,
    /// Pause p in bytes at line rate: Rs*T - ĉ (line 16), >= 0.
    pub pause_bytes: i64,
    /// p in quanta, rounded up, saturated at 65535.
    pub quanta: u16,
    /// A pause frame goes out for this slot: p > 0, or p = 0 while the upstream is still
    /// stopped by the previous slot's whole-slot pause. Otherwise none (line 7). See the module
    /// doc, "Rounding".
    pub frame: bool,
    /// F before and after the update (line 17).
    pub f_before: i64,
    pub f: i64,
    /// This slot ran the leak check (n % k == 0).
    pub leak_check: bool,
}

/// Algorithm 1's state for one (port, priority): the virtual incoming bytes F, kept as the
/// history of the grants of the last RTT + T (see the module doc, "Line 17").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BifrostState {
    k: BifrostConsts,
    /// F: bytes that may still arrive in the next RTT + T (an upper bound, leaks aside).
    f: i64,
    /// Grants of the last `m + 2` slots (m = Δ / (Rs*T)), slot j at `j % len`: the grant sent
    /// at the end of slot j covers the arrivals of [jT + RTT, (j+1)T + RTT), i.e. the last
    /// `Rs*T - ρ` bytes of slot j + m + 1 and the first ρ of slot j + m + 2 (ρ = Δ mod Rs*T).
    grants: Box<[u32]>,
    /// The slot number of the last update (0 = none yet).
    last_n: u64,
    /// The last frame granted nothing: the upstream is stopped, and the window a grant opens
    /// next needs room for its last frame even if it is a whole slot.
    closed: bool,
}

impl BifrostState {
    /// Line 1: `F <- Δ + Rs*T`: every grant of the history is a full slot (allocates the history).
    pub fn new(k: BifrostConsts) -> Self {
        let m = k.bdp_bytes / k.slot_bytes.max(1);
        BifrostState {
            k,
            f: (k.bdp_bytes + k.slot_bytes) as i64,
            grants: vec![k.slot_bytes.min(u32::MAX as u64) as u32; m as usize + 2].into(),
            last_n: 0,
            closed: false,
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

    /// Bytes of grant `g` (for arrivals [jT + RTT, (j+1)T + RTT)) that fall in the later of the
    /// two slots it overlaps: ρ / (Rs*T) of it, rounded down (the earlier gets the rest, so the
    /// two parts add up to g exactly).
    #[inline]
    fn late_part(&self, g: u32) -> i64 {
        let rho = self.k.bdp_bytes % self.k.slot_bytes.max(1);
        (g as u64 * rho / self.k.slot_bytes.max(1)) as i64
    }

    /// Slot `n` ended: what the history expects to have arrived in it, and `g` recorded as the
    /// grant sent at its end. Returns the expected bytes.
    #[inline]
    fn shift(&mut self, n: u64, g: u32) -> i64 {
        let w = self.grants.len() as u64;
        // Grants n - m - 1 (its earlier part) and n - m - 2 (its later part) cover slot n.
        let a = self.grants[((n + 1) % w) as usize];
        let b = self.grants[(n % w) as usize];
        self.grants[(n % w) as usize] = g;
        (a as i64 - self.late_part(a)) + self.late_part(b)
    }

    /// Slots after the last update and before `n` that ran no update (the generator was at rest
    /// and disarmed, or the worker was late): no frame was sent for them, so the upstream was free
    /// to send a whole slot each: record full grants. At rest (F = Δ + Rs*T: every grant that
    /// still counts is a whole slot) that changes nothing, so an idle period costs O(1); a late
    /// worker costs at most one history's worth of work.
    #[inline]
    fn catch_up(&mut self, n: u64) {
        if self.last_n == 0 || n <= self.last_n + 1 {
            return;
        }
        if self.at_rest() {
            // F = Δ + Rs*T: every grant still counted is a whole slot; the only other entry, the
            // one slot `last_n` took off in full (ρ = 0), becomes one too.
            let w = self.grants.len() as u64;
            self.grants[((self.last_n + 1) % w) as usize] =
                self.k.slot_bytes.min(u32::MAX as u64) as u32;
            self.closed = false;
            return;
        }
        let rs_t = self.k.slot_bytes.min(u32::MAX as u64) as u32;
        let w = self.grants.len() as u64;
        if n - self.last_n > w {
            // A whole history of full slots: back at line 1.
            self.grants.fill(rs_t);
            self.f = (self.k.bdp_bytes + self.k.slot_bytes) as i64;
        } else {
            for j in self.last_n + 1..n {
                let e = self.shift(j, rs_t);
                self.f = self.f - e + rs_t as i64;
            }
        }
        self.closed = false;
    }

    /// `Bifrost_update(L, r, n)`, lines 9-18 of Algorithm 1 (see the module doc for the choices).
    #[inline]
    pub fn update(&mut self, l: u64, r: u64, n: u64) -> SlotResult {
        self.catch_up(n);
        self.last_n = n;
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
        // Whole frames (section IV-D): the upstream starts a frame whenever it is not paused and
        // finishes it even if the next pause frame arrives meanwhile, so a window of w bytes can
        // carry w + one frame. A frame that opens a window (any partial grant, or a whole slot
        // after the upstream was stopped) therefore grants one frame less than ĉ; a whole slot
        // while the window is open sends no frame (line 7) and extends the window, whose last
        // frame its opener already left room for.
        let opens = grant > 0 && (grant < rs_t || self.closed);
        let cut = if opens {
            (self.k.frame_bytes as i64).min(grant)
        } else {
            0
        };
        let pause_bytes = rs_t - (grant - cut);
        let quanta = (pause_bytes as u64)
            .div_ceil(QUANTUM_BYTES as u64)
            .min(u16::MAX as u64) as u16;
        let window = (rs_t - quanta as i64 * QUANTUM_BYTES).max(0);
        // A whole-slot pause rounded up to quanta outlasts the slot (by up to 63 B when Rs*T is
        // not whole quanta); a grant after it is realized only by a frame that replaces the
        // timer, even one with p = 0 (802.1Qbb: a zero time resumes the priority). With
        // `frame_bytes` > 0 the opening frame already has p > 0.
        let frame = quanta > 0 || (self.closed && grant > 0);
        self.closed = quanta > 0 && window == 0;
        // What the upstream can send in answer to this slot: the window, plus its last frame if
        // the window is open (at most ĉ).
        let granted = if window > 0 { window + cut } else { 0 };
        // Line 17: F <- F - r + c, with r the bytes the grant history expected in this slot
        // rather than the bytes measured (section IV-D's leak analysis needs a leaked byte to
        // raise L without lowering F; see the module doc), and c the grant the frame carries.
        // F stays within [0, Δ + Rs*T] by construction (a sum of grants of one RTT + T).
        let expected = self.shift(n, granted as u32);
        self.f = self.f - expected + granted;
        SlotResult {
            n,
            l,
            r,
            expected,
            c,
            c_hat,
            pause_bytes,
            quanta,
            frame,
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

longhaul_dataplane::counters! {
    /// Counters of a [`BifrostGenerator`].
    pub struct BifrostStats: "bifrost" {
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
        pub max_l_bytes: u64 => max,
        /// Frames that did not fit the action buffer.
        pub deferred: u64,
    }
}

#[derive(Clone, Debug)]
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
                if res.frame {
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
        frame_bytes: 0,
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
        // ĉ = max(0, -288 - 288) = 0 -> p = T (16 quanta). F takes off what the grant history
        // expected in slot 4 (the initial full grant, 1000), not the 500 measured:
        // F = 8488 - 1000 + 0 = 7488.
        let r = s.update(3_800, 500, 4);
        assert!(r.leak_check);
        assert_eq!(
            (r.c, r.c_hat, r.pause_bytes, r.quanta, r.expected, r.f),
            (-288, 0, 1000, 16, 1000, 7_488)
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
    fn a_leak_raises_l_plus_f() {
        // Line rate, then 300 B more arrive than the history expected (a leak) and stay queued.
        // c = min(1000, 12000 - 300 - 11000) = 700 -> 5 quanta (320 B), the frame grants 680 B.
        // F takes off the 1000 B expected, not the 1300 B measured: F = 11000 - 1000 + 680, and
        // L + F = 10 980 is 300 B above where it would be without the leak (10 680).
        let mut s = BifrostState::new(K);
        let r = s.update(300, 1_300, 1);
        assert_eq!((r.c, r.quanta, r.expected, r.f), (700, 5, 1_000, 10_680));
        assert_eq!(r.l + r.f, 10_980);
        // Algorithm 1's line 17 as written (F - r + c) gives F = 11000 - 1300 + 680 = 10 380 and
        // L + F = 10 680, exactly as without the leak: the check of line 13 cannot see it.
    }

    #[test]
    fn grants_split_over_two_slots_when_rtt_is_not_a_multiple_of_t() {
        // Δ = 10.5 slots: the grant of slot j covers half of slot j + 11 and half of j + 12.
        let k = BifrostConsts {
            bdp_bytes: 10_500,
            slot_bytes: 1_000,
            h_bytes: 12_500,
            k: 0,
            frame_bytes: 0,
        };
        let mut s = BifrostState::new(k);
        assert_eq!(s.f(), 11_500);
        // Slot 1 grants nothing (L = 1000 fills H - F exactly).
        let r = s.update(1_000, 1_000, 1);
        assert_eq!((r.c, r.quanta, r.f), (0, 16, 10_500));
        for n in 2..12 {
            assert_eq!(s.update(0, 1_000, n).f, 10_500, "slot {n}");
        }
        // Slots 12 and 13 each miss half of slot 1's grant.
        let r = s.update(0, 500, 12);
        assert_eq!((r.expected, r.f), (500, 11_000));
        let r = s.update(0, 500, 13);
        assert_eq!((r.expected, r.f), (500, 11_500));
        assert!(s.at_rest());
    }

    #[test]
    fn slots_without_an_update_are_whole_slots() {
        let mut s = BifrostState::new(K);
        s.update(1_000, 1_000, 1); // grants 0: F = 10 000
                                   // The timer did not run for slots 2..4 (no frame sent): three full grants recorded.
        let r = s.update(0, 0, 5);
        assert_eq!((r.f_before, r.f), (10_000, 10_000));
        // Slot 12 expects slot 1's grant (0), then the full ones: F climbs back.
        for n in 6..12 {
            s.update(0, 0, n);
        }
        assert_eq!(s.update(0, 0, 12).expected, 0);
        assert!(s.at_rest());
        // A gap longer than the history: back at line 1.
        s.update(5_000, 0, 13);
        assert!(!s.at_rest());
        let r = s.update(0, 0, 100);
        assert_eq!(r.f_before, 11_000);
    }

    #[test]
    fn an_idle_gap_after_rest_is_a_fixed_point() {
        // Slot 1 grants nothing; by slot 12 that grant is taken off and F is back at rest, with
        // the zero grant still in the ring (its later part weighs nothing, ρ = 0).
        let mut s = BifrostState::new(K);
        s.update(1_000, 1_000, 1);
        for n in 2..=12 {
            s.update(0, 0, n);
        }
        assert!(s.at_rest());
        // An idle gap of any length, then activity: F never exceeds Δ + Rs*T.
        for gap in [2u64, 3, 11, 12, 13, 24, 25] {
            let mut t = s.clone();
            let r = t.update(0, 0, 12 + gap);
            assert_eq!((r.expected, r.f), (1_000, 11_000), "gap {gap}");
        }
    }

    #[test]
    fn whole_frame_grants_leave_room_for_the_last_frame() {
        let k = BifrostConsts {
            frame_bytes: 300,
            ..K
        };
        let mut s = BifrostState::new(k);
        // c = 500: the window is 500 - 300 = 200 B (pause 800 B -> 13 quanta = 832 B, window
        // 168 B); F counts the window plus its last frame: 468 B <= ĉ.
        let r = s.update(500, 1_000, 1);
        assert_eq!((r.c, r.quanta), (500, 13));
        assert_eq!(r.f, 11_000 - 1_000 + 468);
        // A grant below one frame opens no window: the whole slot is paused.
        let mut s = BifrostState::new(k);
        let r = s.update(800, 1_000, 1);
        assert_eq!((r.c, r.quanta, r.f), (200, 16, 10_000));
        // After that stop, a whole-slot grant still opens a window and leaves room for its last
        // frame: a short pause (300 B -> 5 quanta), F adds 680 + 300.
        let r = s.update(0, 0, 2);
        assert_eq!((r.c, r.quanta, r.f), (1_000, 5, 10_000 - 1_000 + 980));
        // The window is open now: a whole slot sends no frame (line 7).
        let r = s.update(0, 0, 3);
        assert_eq!((r.c, r.quanta), (1_000, 0));
    }

    #[test]
    fn pause_never_overflows_u16() {
        let k = BifrostConsts {
            bdp_bytes: 1 << 40,
            slot_bytes: 1 << 30,
            h_bytes: (1 << 40) + (1 << 31),
            k: 1,
            frame_bytes: 0,
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
            frame_bytes: 0,
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
            if res.frame {
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
            let k = BifrostConsts { bdp_bytes: bdp, slot_bytes, h_bytes: bdp + 2 * slot_bytes + extra, k: kk, frame_bytes: 0 };
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
