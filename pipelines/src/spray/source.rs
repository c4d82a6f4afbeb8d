//! Themis-S (paper 002, sections 4.1 and 4.4; appendix B table 3): PSN-based packet spraying,
//! retransmission rerouting (lastNackPsn) and path avoidance counters, per cross-rack QP.
//!
//! Path of a data packet (equation 1): `path = (PSN mod N + P_base) mod N`, `P_base` from the
//! ECMP hash of the packet's own 5-tuple ([`p_base`]). The PathMap (owned by the pipeline) turns
//! the path into a header change: a UDP source-port XOR delta (3-tier, hashing linearity) or an
//! egress port (2-tier).
//!
//! - Retransmission rerouting (4.4): every PSN-sequence-error NAK passing back to the local sender
//!   sets `lastNackPsn` = its ePSN; a data packet whose PSN equals it takes a random other path.
//! - Path avoidance (4.4): a NAK carrying the path avoidance signal sets the counter of path
//!   `ePSN mod N` (relative to `P_base`, the index Themis-D reasons with) to AVOIDANCE_WINDOW; a
//!   packet whose relative path has a non-zero counter takes a random other path and decrements
//!   it. Our choice where the paper says "randomly selects an alternative path": a few random
//!   draws that skip paths which are being avoided too, then whatever the last draw gave.
//!
//! Counters are indexed by the relative path `PSN mod N` rather than the absolute path: `P_base`
//! is fixed per QP, so the two are the same path, and the NAK (whose 5-tuple is the receiver's)
//! names only the relative one.

use longhaul_dataplane::asic::ecmp::{self, FastMod};
use longhaul_dataplane::asic::rng::Rng;
use longhaul_dataplane::wire::ipv4::PROTO_UDP;
use longhaul_dataplane::wire::roce::PSN_MASK;

/// lastNackPsn with nothing recorded.
const NO_NACK: u32 = u32::MAX;

/// Random draws for an alternative path before giving up on skipping avoided paths.
const ALT_DRAWS: u32 = 4;

/// Why a packet takes the path it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Equation 1.
    Policy,
    /// Retransmission rerouting (PSN == lastNackPsn).
    Rerouted,
    /// Path avoidance (the policy's path has a non-zero counter).
    Avoided,
}

/// A path decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathChoice {
    /// Index into the PathMap.
    pub path: u32,
    pub route: Route,
}

/// Themis-S's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceParams {
    /// N.
    pub paths: u32,
    /// AVOIDANCE_WINDOW (packets).
    pub avoidance_window: u32,
    /// QPs (register array size).
    pub capacity: usize,
    /// RNG seed (random alternative paths).
    pub seed: u64,
}

longhaul_dataplane::counters! {
    /// Counters of Themis-S.
    #[derive(Copy)]
    pub struct SourceStats: "spray.s" {
        pub sprayed: u64,
        pub rerouted: u64,
        pub avoided: u64,
        pub nacks_seen: u64,
        pub avoidance_signals: u64,
    }
}

/// Themis-S's registers for `capacity` QPs: `recved_nack_psn` and `path_adaptive_count` (appendix
/// B, table 3).
pub struct ThemisS {
    p: SourceParams,
    /// `% N` by multiplication: a packet's path takes two remainders (equation 1).
    paths: FastMod,
    last_nack: Vec<u32>,
    avoid: Vec<u32>,
    /// Per QP: the `P_base` last computed and the (source, UDP ports) it was computed for
    /// ([`ThemisS::base_of`]).
    base_memo: Vec<BaseMemo>,
    rng: Rng,
    pub stats: SourceStats,
    /// Calls whose QP slot is beyond the registers (nothing done); not among the counters
    /// by name.
    pub bad_slot: u64,
}

/// A QP's `P_base` and the part of the 5-tuple that its QP key (destination, QPN) does not fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BaseMemo {
    src_lo: u64,
    src_hi: u64,
    ports: u32,
    /// [`NO_BASE`]: nothing computed yet.
    base: u32,
}

/// No `P_base` in a [`BaseMemo`] (a `P_base` is below N).
const NO_BASE: u32 = u32::MAX;

const EMPTY_MEMO: BaseMemo = BaseMemo {
    src_lo: 0,
    src_hi: 0,
    ports: 0,
    base: NO_BASE,
};

/// `P_base`: the flow's ECMP hash (5-tuple, seeded) modulo N: the dataplane's ECMP hash
/// ([`ecmp::hash5`], the one the baseline's ECMP routes use too), over UDP. `n` is N's
/// [`FastMod`] (made once: no division per packet).
#[inline]
pub fn p_base(src: u128, dst: u128, sport: u16, dport: u16, seed: u64, n: &FastMod) -> u32 {
    ecmp::pick_fast(ecmp::hash5(src, dst, PROTO_UDP, sport, dport, seed), n)
}

impl ThemisS {
    /// Preallocate the registers (`None` when `paths` is 0).
    pub fn new(p: SourceParams) -> Option<Self> {
        if p.paths == 0 {
            return None;
        }
        Some(ThemisS {
            p,
            paths: FastMod::new(p.paths),
            last_nack: vec![NO_NACK; p.capacity],
            avoid: vec![0; p.capacity * p.paths as usize],
            base_memo: vec![EMPTY_MEMO; p.capacity],
            rng: Rng::new(p.seed ^ 0x0073_7072_6179),
            stats: SourceStats::default(),
            bad_slot: 0,
        })
    }

    pub fn params(&self) -> &SourceParams {
        &self.p
    }

    /// Bytes of state per QP (table 3: 4 + 4N).
    pub fn bytes_per_qp(&self) -> usize {
        4 + 4 * self.p.paths as usize
    }

    /// lastNackPsn of `slot`.
    pub fn last_nack_psn(&self, slot: usize) -> Option<u32> {
        self.last_nack.get(slot).copied().filter(|v| *v != NO_NACK)
    }

    /// The avoidance counter of relative path `rel` of `slot`.
    pub fn avoidance(&self, slot: usize, rel: u32) -> u32 {
        self.avoid
            .get(slot * self.p.paths as usize + rel as usize)
            .copied()
            .unwrap_or(0)
    }

    /// `P_base` for a packet of QP `slot` from `src` with UDP ports `sport`, `dport`: `compute`
    /// (the hash, [`p_base`]) runs only when the slot's memo was computed for another source or
    /// other ports (or never). The QP's key fixes the destination and the protocol, and a QP's
    /// packets keep their source and ports, so the hash runs once per QP instead of once per
    /// packet; the memo is exact whatever comes (a packet with another source or ports
    /// recomputes and replaces it). Inlined into the spraying ToR's ingress.
    #[inline(always)]
    pub fn base_of(
        &mut self,
        slot: usize,
        src: u128,
        sport: u16,
        dport: u16,
        compute: impl FnOnce() -> u32,
    ) -> u32 {
        let ports = (u32::from(sport) << 16) | u32::from(dport);
        let (src_lo, src_hi) = (src as u64, (src >> 64) as u64);
        let Some(m) = self.base_memo.get_mut(slot) else {
            return compute();
        };
        if m.base != NO_BASE && m.src_lo == src_lo && m.src_hi == src_hi && m.ports == ports {
            return m.base;
        }
        let base = compute();
        *m = BaseMemo {
            src_lo,
            src_hi,
            ports,
            base,
        };
        base
    }

    /// Forget QP `slot`.
    pub fn reset(&mut self, slot: usize) {
        if let Some(m) = self.base_memo.get_mut(slot) {
            *m = EMPTY_MEMO;
        }
        let n = self.p.paths as usize;
        if let Some(v) = self.last_nack.get_mut(slot) {
            *v = NO_NACK;
        }
        if let Some(c) = self.avoid.get_mut(slot * n..(slot + 1) * n) {
            c.iter_mut().for_each(|x| *x = 0);
        }
    }

    /// A random path other than `path`, preferring paths not being avoided.
    fn alternative(&mut self, slot: usize, path: u32, base: u32) -> u32 {
        let n = self.p.paths;
        if n < 2 {
            return path;
        }
        let mut c = path;
        for _ in 0..ALT_DRAWS {
            c = (path + 1 + self.rng.below(n - 1)) % n;
            let rel = (c + n - base) % n;
            if self.avoidance(slot, rel) == 0 {
                break;
            }
        }
        c
    }

    /// The path of a sprayed data packet with `psn` of QP `slot` whose `P_base` is `base`.
    /// Always inlined into the spraying ToR's ingress (every sprayed frame).
    #[inline(always)]
    pub fn choose(&mut self, slot: usize, psn: u32, base: u32) -> PathChoice {
        let n = self.p.paths;
        // Equation 1, (PSN + P_base) mod N, as (PSN mod N + P_base mod N) mod N: both terms are
        // below N, so the last reduction is one subtraction (written so that nothing overflows).
        let rel = self.paths.rem(psn & PSN_MASK);
        let base = self.paths.rem(base);
        let path = if rel >= n - base {
            rel - (n - base)
        } else {
            rel + base
        };
        if slot >= self.last_nack.len() {
            self.bad_slot += 1;
            return PathChoice {
                path,
                route: Route::Policy,
            };
        }
        self.stats.sprayed += 1;
        if self.last_nack[slot] == psn & PSN_MASK {
            self.stats.rerouted += 1;
            return PathChoice {
                path: self.alternative(slot, path, base),
                route: Route::Rerouted,
            };
        }
        let i = slot * n as usize + rel as usize;
        if let Some(c) = self.avoid.get_mut(i) {
            if *c > 0 {
                *c -= 1;
                self.stats.avoided += 1;
                return PathChoice {
                    path: self.alternative(slot, path, base),
                    route: Route::Avoided,
                };
            }
        }
        PathChoice {
            path,
            route: Route::Policy,
        }
    }

    /// A PSN-sequence-error NAK for QP `slot` passes back toward the local sender.
    pub fn on_nack(&mut self, slot: usize, epsn: u32, avoidance_signal: bool) {
        if slot >= self.last_nack.len() {
            self.bad_slot += 1;
            return;
        }
        self.stats.nacks_seen += 1;
        self.last_nack[slot] = epsn & PSN_MASK;
        if avoidance_signal {
            self.stats.avoidance_signals += 1;
            let n = self.p.paths as usize;
            let rel = self.paths.rem(epsn & PSN_MASK) as usize;
            if let Some(c) = self.avoid.get_mut(slot * n + rel) {
                *c = self.p.avoidance_window;
            }
        }
    }

    /// Counters by name.
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u32, window: u32) -> ThemisS {
        ThemisS::new(SourceParams {
            paths: n,
            avoidance_window: window,
            capacity: 2,
            seed: 1,
        })
        .unwrap()
    }

    #[test]
    fn equation_1() {
        let mut t = s(4, 10);
        for psn in 0..16 {
            let c = t.choose(0, psn, 3);
            assert_eq!(
                c,
                PathChoice {
                    path: (psn % 4 + 3) % 4,
                    route: Route::Policy
                }
            );
        }
        // PSN wrap: 2^24 - 1 mod 4 = 3, then 0.
        assert_eq!(t.choose(0, PSN_MASK, 0).path, 3);
        assert_eq!(t.choose(0, 0, 0).path, 0);
    }

    #[test]
    fn retransmission_rerouting() {
        let mut t = s(4, 10);
        t.on_nack(0, 6, false);
        assert_eq!(t.last_nack_psn(0), Some(6));
        for _ in 0..50 {
            let c = t.choose(0, 6, 1);
            assert_eq!(c.route, Route::Rerouted);
            assert_ne!(c.path, 3, "PSN 6 with P_base 1 is path 3");
            assert!(c.path < 4);
        }
        assert_eq!(t.choose(0, 7, 1).route, Route::Policy);
        assert_eq!(t.choose(1, 6, 1).route, Route::Policy); // other QP
    }

    #[test]
    fn path_avoidance_window() {
        let mut t = s(4, 3);
        t.on_nack(0, 9, true); // relative path 1
        assert_eq!(t.avoidance(0, 1), 3);
        let mut avoided = 0;
        for psn in 100..140u32 {
            let c = t.choose(0, psn, 2);
            if psn % 4 == 1 && avoided < 3 {
                assert_eq!(c.route, Route::Avoided);
                assert_ne!(c.path, 3, "relative path 1 with P_base 2 is path 3");
                avoided += 1;
            } else {
                assert_eq!(c.route, Route::Policy, "{psn}");
            }
        }
        assert_eq!(t.avoidance(0, 1), 0);
        assert_eq!(t.stats.avoided, 3);
    }

    #[test]
    fn single_path_has_no_alternative() {
        let mut t = s(1, 3);
        t.on_nack(0, 5, true);
        assert_eq!(t.choose(0, 5, 0).path, 0);
        assert_eq!(t.choose(0, 6, 0).path, 0);
    }

    #[test]
    fn memory_per_qp_is_table_3() {
        let t = ThemisS::new(SourceParams {
            paths: 128,
            avoidance_window: 2_000_000,
            capacity: 1,
            seed: 0,
        })
        .unwrap();
        assert_eq!(t.bytes_per_qp(), 516);
    }

    proptest::proptest! {
        /// The memo of `P_base` per QP is exact: for any sequence of packets (QP slot, source,
        /// ports; slots out of range included, sources differing only in their upper half, a
        /// reset between), `base_of` gives what the hash gives, and hashes only when the slot's
        /// last packet had another source or other ports, or after a reset.
        #[test]
        fn base_memo_is_the_hash(
            pkts in proptest::collection::vec(
                (0usize..3, 0u8..3, 0u16..3, proptest::bool::ANY, 0u8..8),
                1..200,
            )
        ) {
            let mut t = s(5, 10);
            let n = FastMod::new(5);
            let mut last: [Option<(u128, u16, u16)>; 2] = [None; 2];
            for (slot, src, sport, roce, op) in pkts {
                // Sources that share their lower 64 bits: both halves are compared.
                let src = (u128::from(src) << 64) | 0xffff_0a00_0001;
                let (sport, dport) = (0xc000 + sport, if roce { 4791 } else { 4792 });
                if op == 0 {
                    t.reset(slot.min(1));
                    last[slot.min(1)] = None;
                    continue;
                }
                let want = p_base(src, 7, sport, dport, 3, &n);
                let mut hashed = false;
                let got = t.base_of(slot, src, sport, dport, || {
                    hashed = true;
                    p_base(src, 7, sport, dport, 3, &n)
                });
                proptest::prop_assert_eq!(got, want);
                let fresh = last.get(slot).is_none_or(|l| *l != Some((src, sport, dport)));
                proptest::prop_assert_eq!(hashed, fresh);
                if let Some(l) = last.get_mut(slot) {
                    *l = Some((src, sport, dport));
                }
            }
        }
    }

    #[test]
    fn p_base_is_in_range_and_spreads() {
        let mut seen = [0u32; 8];
        for q in 0..800u16 {
            seen[p_base(1, 2, 0xc000 + q, 4791, 7, &FastMod::new(8)) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 50), "{seen:?}");
    }
}
