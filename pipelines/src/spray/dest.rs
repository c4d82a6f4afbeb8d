//! Themis-D (paper 002, sections 4.2-4.4 and 5): per-QP proxy bitmap and PathMaxPSN table, NACK
//! validation (Algorithm 1), lazy dropping with one stashed ePSN per QP, NACK regeneration, and
//! failure detection (OOO_THRESHOLD, path avoidance signal).
//!
//! State lives in register arrays indexed by a QP slot (the `spray_qps` table gives the slot),
//! preallocated for `capacity` QPs: the bitmap words, `N` PathMaxPSN cells and a small [`DQp`]
//! per QP. Nothing is allocated per packet.
//!
//! Path of a data packet (our choice, docs/wire-formats.md "Themis spraying"): the relative path
//! index `PSN mod N` (equation 3), for packets Themis-S sent on the path of equation 1. Packets
//! Themis-S sent elsewhere (retransmission rerouting, path avoidance, opcodes it does not spray)
//! carry the off-policy mark, and update the bitmap but neither PathMaxPSN nor the stash's
//! confirmation: they did not travel the path `PSN mod N` names (this removes the false positives
//! section 7 attributes to failure handling).
//!
//! PSNs compare in the 24-bit space. A PathMaxPSN cell confirms a loss only when it is ahead of
//! the NACK's ePSN by less than `2W` (a sender never has more than `W` packets in flight, so a
//! cell further "ahead" is a stale value from before a wrap).

use super::bitmap::{BitmapHead, ProxyBitmap, SetOutcome};
use longhaul_dataplane::wire::roce::{psn_diff, PSN_MASK};

/// PathMaxPSN cell with nothing recorded (the paper's -infinity).
pub const PATH_NONE: u32 = u32::MAX;

const F_INIT: u8 = 1;
/// The paper's `stashed_nack_valid`.
const F_STASH: u8 = 2;

/// What a regenerated NACK needs besides the data packet that confirms it (section 5: the paper
/// keeps the QPN and egress port; we also keep what makes the NAK byte-identical to the RNIC's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NackFields {
    /// BTH DestQP of the NAK (the sender's QPN).
    pub dest_qp: u32,
    /// AETH MSN.
    pub msn: u32,
    /// UDP source port the RNIC used.
    pub sport: u16,
    /// P_Key.
    pub pkey: u16,
    /// IP ToS / traffic class (DSCP and ECN).
    pub tos: u8,
}

/// Per-QP scalars of Themis-D.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DQp {
    /// Bitmap start pointer (`epsn_array`) and base bits (`base_first_half`, `base_second_half`).
    pub head: BitmapHead,
    flags: u8,
    /// `stashed_nack_psn`.
    pub stash_psn: u32,
    /// The stashed NAK's fields (`stash_nack_qpn` and the rest).
    pub nack: NackFields,
}

impl DQp {
    /// A NACK is stashed (the paper's Valid field).
    pub fn stashed(&self) -> Option<u32> {
        (self.flags & F_STASH != 0).then_some(self.stash_psn)
    }
}

/// Algorithm 1's classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NackClass {
    /// The ePSN packet was delivered (C1 fails): drop.
    Invalid,
    /// A later packet on the same path was delivered (C2): forward.
    Valid,
    /// Neither: stash (lazy dropping, section 4.3) and drop the NAK itself.
    Undetermined,
}

/// What a data packet toward the RNIC decided about the stash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataOutcome {
    /// Nothing to send.
    None,
    /// Send the stashed NAK for `epsn` now: confirmed by a later packet on its path (section
    /// 4.3), or, with `avoid`, the OOO degree passed OOO_THRESHOLD (section 4.4).
    Regenerate {
        epsn: u32,
        avoid: bool,
        nack: NackFields,
    },
}

/// Themis-D's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DestParams {
    /// N: paths (the same on every ToR).
    pub paths: u32,
    /// TX window W (power of two).
    pub window: u32,
    /// OOO_THRESHOLD (packets).
    pub ooo_threshold: u32,
    /// QPs (register array size).
    pub capacity: usize,
}

longhaul_dataplane::counters! {
    /// Counters of Themis-D.
    #[derive(Copy)]
    pub struct DestStats: "spray.d" {
        pub data: u64,
        pub nacks_invalid: u64,
        pub nacks_valid: u64,
        pub nacks_undetermined: u64,
        pub nacks_regenerated: u64,
        pub nacks_avoidance: u64,
        pub stash_replaced: u64,
        pub stash_discarded: u64,
        pub stash_cleared_by_ack: u64,
        pub stale_nacks: u64,
        pub acks: u64,
        pub beyond_window: u64,
        pub halves_flipped: u64,
        pub halves_repaired: u64,
    }
}

/// Themis-D's registers for `capacity` QPs.
pub struct ThemisD {
    p: DestParams,
    bm: ProxyBitmap,
    words: Vec<u64>,
    path_max: Vec<u32>,
    qps: Vec<DQp>,
    pub stats: DestStats,
    /// Calls whose QP slot is beyond the registers (nothing done); not among the counters
    /// by name.
    pub bad_slot: u64,
}

impl ThemisD {
    /// Preallocate the registers. `None` when the window is not a power of two in 64..=2^22 or
    /// `paths` is 0.
    pub fn new(p: DestParams) -> Option<Self> {
        let bm = ProxyBitmap::new(p.window)?;
        if p.paths == 0 {
            return None;
        }
        Some(ThemisD {
            p,
            bm,
            words: vec![0; p.capacity * bm.words()],
            path_max: vec![PATH_NONE; p.capacity * p.paths as usize],
            qps: vec![DQp::default(); p.capacity],
            stats: DestStats::default(),
            bad_slot: 0,
        })
    }

    pub fn params(&self) -> &DestParams {
        &self.p
    }

    /// Bytes of state per QP: bitmap words, PathMaxPSN cells, the scalars.
    pub fn bytes_per_qp(&self) -> usize {
        self.bm.words() * 8 + self.p.paths as usize * 4 + std::mem::size_of::<DQp>()
    }

    /// The scalars of QP `slot`.
    pub fn qp(&self, slot: usize) -> Option<&DQp> {
        self.qps.get(slot)
    }

    /// PathMaxPSN[slot][path] (`None` = nothing recorded).
    pub fn path_max(&self, slot: usize, path: u32) -> Option<u32> {
        let v = *self
            .path_max
            .get(slot * self.p.paths as usize + path as usize)?;
        (v != PATH_NONE).then_some(v)
    }

    /// Whether the bitmap says `psn` reached the RNIC.
    pub fn delivered(&self, slot: usize, psn: u32) -> bool {
        let n = self.bm.words();
        match (self.qps.get(slot), self.words.get(slot * n..(slot + 1) * n)) {
            (Some(q), Some(w)) => q.flags & F_INIT != 0 && self.bm.delivered(&q.head, w, psn),
            _ => false,
        }
    }

    /// Forget QP `slot` (the control plane removed it or reused the slot).
    pub fn reset(&mut self, slot: usize) {
        let n = self.bm.words();
        let np = self.p.paths as usize;
        if let Some(q) = self.qps.get_mut(slot) {
            *q = DQp::default();
        }
        if let Some(w) = self.words.get_mut(slot * n..(slot + 1) * n) {
            w.iter_mut().for_each(|x| *x = 0);
        }
        if let Some(c) = self.path_max.get_mut(slot * np..(slot + 1) * np) {
            c.iter_mut().for_each(|x| *x = PATH_NONE);
        }
    }

    #[inline]
    fn path_of(&self, psn: u32) -> usize {
        (psn % self.p.paths) as usize
    }

    /// Initialise the QP on first sight: the start pointer is `start`.
    #[inline]
    fn ensure_init(&mut self, slot: usize, start: u32) {
        let n = self.bm.words();
        let (Some(q), Some(w)) = (
            self.qps.get_mut(slot),
            self.words.get_mut(slot * n..(slot + 1) * n),
        ) else {
            return;
        };
        if q.flags & F_INIT == 0 {
            q.head = self.bm.head(start);
            q.flags = F_INIT;
            self.bm.clear(&q.head, w);
        }
    }

    fn advance(&mut self, slot: usize, epsn: u32) {
        let n = self.bm.words();
        let (Some(q), Some(w)) = (
            self.qps.get_mut(slot),
            self.words.get_mut(slot * n..(slot + 1) * n),
        ) else {
            return;
        };
        let a = self.bm.advance(&mut q.head, w, epsn);
        self.stats.halves_flipped += a.flipped as u64;
        self.stats.halves_repaired += a.repaired as u64;
    }

    /// A data packet leaves toward the RNIC (egress, section 5). `on_policy`: Themis-S sent it on
    /// the path of equation 1 (no off-policy mark). Algorithm 1 `onDATA` (bitmap, PathMaxPSN),
    /// then the stash (sections 4.3 and 4.4).
    #[inline]
    pub fn on_data(&mut self, slot: usize, psn: u32, on_policy: bool) -> DataOutcome {
        if slot >= self.qps.len() {
            self.bad_slot += 1;
            return DataOutcome::None;
        }
        let psn = psn & PSN_MASK;
        self.stats.data += 1;
        // First sight: the start of this PSN's half (earlier PSNs of the half still count as
        // missing; an ACK moves the pointer to the truth).
        self.ensure_init(slot, psn & !(self.p.window - 1));
        let n = self.bm.words();
        let q = &mut self.qps[slot];
        if let Some(w) = self.words.get_mut(slot * n..(slot + 1) * n) {
            if self.bm.set(&q.head, w, psn) == SetOutcome::BeyondWindow {
                self.stats.beyond_window += 1;
            }
        }
        let path = (psn % self.p.paths) as usize;
        if on_policy {
            if let Some(c) = self.path_max.get_mut(slot * self.p.paths as usize + path) {
                if *c == PATH_NONE || psn_diff(psn, *c) > 0 {
                    *c = psn;
                }
            }
        }
        if q.flags & F_STASH == 0 {
            return DataOutcome::None;
        }
        let se = q.stash_psn;
        let d = psn_diff(psn, se);
        if d == 0 {
            // The SePSN packet itself: the stashed NAK was invalid (section 4.3).
            q.flags &= !F_STASH;
            self.stats.stash_discarded += 1;
            return DataOutcome::None;
        }
        let same_path = on_policy && path == (se % self.p.paths) as usize;
        let avoid = if d > 0 && same_path {
            false
        } else if d > self.p.ooo_threshold as i32 {
            true
        } else {
            return DataOutcome::None;
        };
        q.flags &= !F_STASH;
        self.stats.nacks_regenerated += 1;
        if avoid {
            self.stats.nacks_avoidance += 1;
        }
        DataOutcome::Regenerate {
            epsn: se,
            avoid,
            nack: q.nack,
        }
    }

    /// A PSN-sequence-error NAK from the RNIC (Algorithm 1 `onNACK`, then lazy dropping). The
    /// start pointer then moves to its ePSN (every earlier PSN reached the RNIC).
    pub fn on_nack(&mut self, slot: usize, epsn: u32, fields: NackFields) -> NackClass {
        if slot >= self.qps.len() {
            self.bad_slot += 1;
            return NackClass::Valid;
        }
        let epsn = epsn & PSN_MASK;
        self.ensure_init(slot, epsn);
        let n = self.bm.words();
        let class = {
            let q = &self.qps[slot];
            let w = self.words.get(slot * n..(slot + 1) * n).unwrap_or(&[]);
            if self.bm.delivered(&q.head, w, epsn) {
                NackClass::Invalid
            } else {
                let c = self
                    .path_max
                    .get(slot * self.p.paths as usize + self.path_of(epsn))
                    .copied()
                    .unwrap_or(PATH_NONE);
                let ahead = psn_diff(c, epsn);
                if c != PATH_NONE && ahead > 0 && (ahead as u32) < 2 * self.p.window {
                    NackClass::Valid
                } else {
                    NackClass::Undetermined
                }
            }
        };
        let q = &mut self.qps[slot];
        let stash = q.stashed();
        match class {
            NackClass::Invalid => self.stats.nacks_invalid += 1,
            NackClass::Valid => {
                self.stats.nacks_valid += 1;
                // A forwarded NAK for ePSN supersedes any stash at or before it.
                if stash.is_some_and(|s| psn_diff(epsn, s) >= 0) {
                    q.flags &= !F_STASH;
                }
            }
            NackClass::Undetermined => {
                self.stats.nacks_undetermined += 1;
                match stash {
                    // One stash per QP: a NAK with a larger ePSN replaces it (section 4.3).
                    Some(s) if psn_diff(epsn, s) < 0 => self.stats.stale_nacks += 1,
                    _ => {
                        if stash.is_some() {
                            self.stats.stash_replaced += 1;
                        }
                        q.stash_psn = epsn;
                        q.nack = fields;
                        q.flags |= F_STASH;
                    }
                }
            }
        }
        // Invalid NAKs carry a stale ePSN or one already delivered; either way the RNIC's ePSN
        // is at least this one.
        self.advance(slot, epsn);
        class
    }

    /// An ACK from the RNIC acknowledging `psn`: the start pointer moves to `psn + 1`; a stash at
    /// or before `psn` is obsolete (the RNIC has that packet).
    pub fn on_ack(&mut self, slot: usize, psn: u32) {
        if slot >= self.qps.len() {
            self.bad_slot += 1;
            return;
        }
        self.stats.acks += 1;
        let epsn = psn.wrapping_add(1) & PSN_MASK;
        self.ensure_init(slot, epsn);
        let q = &mut self.qps[slot];
        if q.stashed().is_some_and(|s| psn_diff(s, epsn) < 0) {
            q.flags &= !F_STASH;
            self.stats.stash_cleared_by_ack += 1;
        }
        self.advance(slot, epsn);
    }

    /// Counters by name.
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(paths: u32) -> ThemisD {
        ThemisD::new(DestParams {
            paths,
            window: 64,
            ooo_threshold: 20,
            capacity: 4,
        })
        .unwrap()
    }

    /// Figure 6: two paths, even PSNs on path 0, odd on path 1. 0, 1, 3 reach the RNIC; the NAK
    /// for ePSN 2 is invalid (2 was sent to the RNIC). 6 arrives: NAK ePSN 4 is valid (PathMaxPSN
    /// of path 0 is 6 > 4).
    #[test]
    fn figure_6() {
        let mut t = d(2);
        // The paper's figure delivers 2 before the NAK for 2 arrives.
        for psn in [0, 1, 3, 2] {
            assert_eq!(t.on_data(0, psn, true), DataOutcome::None);
        }
        assert_eq!(t.on_nack(0, 2, NackFields::default()), NackClass::Invalid);
        t.on_data(0, 6, true);
        assert_eq!(t.path_max(0, 0), Some(6));
        assert_eq!(t.on_nack(0, 4, NackFields::default()), NackClass::Valid);
        assert_eq!((t.stats.nacks_invalid, t.stats.nacks_valid), (1, 1));
    }

    /// Figure 7: 1 reaches the RNIC, the NAK for 0 is undetermined (PathMaxPSN[0] = -inf) and
    /// stashed; 2 (path 0, 2 > 0) confirms it: the NAK for 0 is regenerated.
    #[test]
    fn figure_7() {
        let mut t = d(2);
        t.on_data(0, 1, true);
        let f = NackFields {
            dest_qp: 0x77,
            msn: 5,
            sport: 0xc000,
            pkey: 0xffff,
            tos: 0x68,
        };
        assert_eq!(t.on_nack(0, 0, f), NackClass::Undetermined);
        assert_eq!(t.qp(0).unwrap().stashed(), Some(0));
        assert_eq!(t.on_data(0, 3, true), DataOutcome::None); // other path
        assert_eq!(
            t.on_data(0, 2, true),
            DataOutcome::Regenerate {
                epsn: 0,
                avoid: false,
                nack: f
            }
        );
        assert_eq!(t.qp(0).unwrap().stashed(), None);
        assert_eq!(t.on_data(0, 4, true), DataOutcome::None); // only once
    }

    #[test]
    fn stash_discarded_by_the_packet_itself() {
        let mut t = d(2);
        t.on_data(0, 1, true);
        assert_eq!(
            t.on_nack(0, 0, NackFields::default()),
            NackClass::Undetermined
        );
        assert_eq!(t.on_data(0, 0, false), DataOutcome::None);
        assert_eq!(t.stats.stash_discarded, 1);
        assert_eq!(t.on_data(0, 2, true), DataOutcome::None);
    }

    #[test]
    fn larger_nack_replaces_stash() {
        let mut t = d(4);
        t.on_data(0, 1, true);
        t.on_data(0, 3, true);
        assert_eq!(
            t.on_nack(0, 0, NackFields::default()),
            NackClass::Undetermined
        );
        assert_eq!(t.qp(0).unwrap().stashed(), Some(0));
        // The RNIC got 0 (not through us in this test) and now waits for 2.
        assert_eq!(
            t.on_nack(0, 2, NackFields::default()),
            NackClass::Undetermined
        );
        assert_eq!(t.qp(0).unwrap().stashed(), Some(2));
        assert_eq!(t.stats.stash_replaced, 1);
        // An older NAK is before the start pointer: invalid, the stash stays.
        assert_eq!(t.on_nack(0, 0, NackFields::default()), NackClass::Invalid);
        assert_eq!(t.qp(0).unwrap().stashed(), Some(2));
    }

    #[test]
    fn off_policy_packets_do_not_confirm() {
        let mut t = d(2);
        t.on_data(0, 1, true);
        t.on_nack(0, 0, NackFields::default());
        assert_eq!(t.on_data(0, 2, false), DataOutcome::None);
        assert_eq!(t.path_max(0, 0), None);
        assert_eq!(
            t.on_nack(0, 0, NackFields::default()),
            NackClass::Undetermined
        );
    }

    #[test]
    fn failure_detection_sends_avoidance() {
        let mut t = d(4);
        t.on_data(0, 1, true);
        t.on_nack(0, 0, NackFields::default()); // path 0 is dead: 4, 8, ... never come
        for psn in [2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19] {
            assert_eq!(t.on_data(0, psn, true), DataOutcome::None);
        }
        assert_eq!(t.on_data(0, 20, false), DataOutcome::None); // 20 - 0 = 20: not above
        assert_eq!(
            t.on_data(0, 21, true),
            DataOutcome::Regenerate {
                epsn: 0,
                avoid: true,
                nack: NackFields::default()
            }
        );
        assert_eq!(t.stats.nacks_avoidance, 1);
    }

    #[test]
    fn ack_moves_start_and_clears_stash() {
        let mut t = d(2);
        t.on_data(0, 1, true);
        t.on_nack(0, 0, NackFields::default());
        t.on_ack(0, 1);
        assert_eq!(t.qp(0).unwrap().stashed(), None);
        assert_eq!(t.stats.stash_cleared_by_ack, 1);
        assert!(t.delivered(0, 1));
        assert_eq!(t.qp(0).unwrap().head.start, 2);
    }

    #[test]
    fn stale_path_max_does_not_confirm_across_wrap() {
        let mut t = d(2);
        t.on_data(0, 10, true);
        // The start pointer walks 2^23 PSNs on while path 0 sees nothing (an avoided path).
        let mut a = 10u32;
        while a < 0x80_0014 {
            t.on_ack(0, a);
            a += 40;
        }
        t.on_ack(0, 0x80_0013);
        // 10 now looks "ahead" of 0x800014 in 24-bit arithmetic, but by more than 2W.
        assert!(psn_diff(10, 0x80_0014) > 0);
        assert_eq!(
            t.on_nack(0, 0x80_0014, NackFields::default()),
            NackClass::Undetermined
        );
    }

    #[test]
    fn bad_slot_is_counted_not_panicking() {
        let mut t = d(2);
        assert_eq!(t.on_data(9, 1, true), DataOutcome::None);
        t.on_ack(9, 1);
        assert_eq!(t.on_nack(9, 1, NackFields::default()), NackClass::Valid);
        assert_eq!(t.bad_slot, 3);
    }

    #[test]
    fn memory_per_qp_near_paper() {
        let t = ThemisD::new(DestParams {
            paths: 128,
            window: 512,
            ooo_threshold: 448,
            capacity: 1,
        })
        .unwrap();
        // 128 (bitmap) + 512 (PathMaxPSN) + scalars; the paper's table 4 has 661.
        assert!(t.bytes_per_qp() <= 672, "{}", t.bytes_per_qp());
    }
}
