//! RED/ECN marker, DCQCN style (Zhu et al., SIGCOMM 2015): the decision is taken at enqueue from
//! the *instantaneous* queue depth in bytes (no EWMA):
//!
//! - depth < Kmin: never mark;
//! - Kmin <= depth < Kmax: mark with probability `pmax * (depth - Kmin) / (Kmax - Kmin)`;
//! - depth >= Kmax: always mark (DCQCN's p = 1 above Kmax).
//!
//! Only ECN-capable (ECT(0)/ECT(1)) packets are marked. Not-ECT packets are never dropped by the
//! marker (choice: lossless RDMA classes must not lose packets to RED; Not-ECT traffic is only
//! tail-dropped by the queue limits) and are counted in `not_ect` when the decision was "mark".
//!
//! The probability is compared in 32-bit fixed point against a seeded [`Rng`], so a replay marks
//! the same packets on every run. The random number is drawn only in the probabilistic band.

use super::rng::Rng;
use crate::wire::ecn::{self, EcnMark};

/// Marker thresholds, as in the config (`EcnConfig`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedParams {
    /// Depth (bytes) below which nothing is marked.
    pub kmin_bytes: u64,
    /// Depth (bytes) at and above which every ECN-capable packet is marked.
    pub kmax_bytes: u64,
    /// Marking probability approached just below Kmax (clamped to 0..=1; NaN counts as 0).
    pub pmax: f64,
}

/// The marker's decision for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedDecision {
    /// Set CE (if the packet is ECN-capable).
    Mark,
    /// Leave it.
    NoMark,
}

/// What [`RedEcn::apply`] did to a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedOutcome {
    /// Decision was not to mark.
    NoMark,
    /// CE was set (IPv4 checksum updated incrementally).
    Marked,
    /// Decision was mark, but the packet already carried CE.
    AlreadyCe,
    /// Decision was mark, but the packet is Not-ECT: left unchanged, not dropped.
    NotEct,
    /// Decision was mark, but there is no IP header (`l3_off == 0` or unparsable).
    NotIp,
}

/// Counters of a [`RedEcn`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RedStats {
    /// Decisions taken.
    pub decisions: u64,
    /// Decisions that were "mark".
    pub mark_decisions: u64,
    /// Packets whose CE bit this marker set.
    pub marked: u64,
    /// Mark decisions on packets already CE.
    pub already_ce: u64,
    /// Mark decisions on Not-ECT packets (left unchanged).
    pub not_ect: u64,
    /// Mark decisions on frames without an IP header.
    pub not_ip: u64,
}

/// A DCQCN-style RED/ECN marker with its own seeded random stream.
#[derive(Clone, Debug)]
pub struct RedEcn {
    kmin: u64,
    kmax: u64,
    /// pmax in units of 2^-32 (0..=2^32).
    pmax_fp: u64,
    rng: Rng,
    stats: RedStats,
}

impl RedEcn {
    /// A marker with thresholds `p` and random stream seeded by `seed`. If `kmax <= kmin` the band
    /// is empty: below Kmin nothing is marked, at or above Kmax everything is.
    pub fn new(p: RedParams, seed: u64) -> Self {
        RedEcn {
            kmin: p.kmin_bytes,
            kmax: p.kmax_bytes,
            pmax_fp: pmax_to_fp(p.pmax),
            rng: Rng::new(seed),
            stats: RedStats::default(),
        }
    }

    /// Change the thresholds at run time (the random stream continues).
    pub fn set_params(&mut self, p: RedParams) {
        self.kmin = p.kmin_bytes;
        self.kmax = p.kmax_bytes;
        self.pmax_fp = pmax_to_fp(p.pmax);
    }

    /// Marking probability at `depth_bytes`, in units of 2^-32 (2^32 = certain).
    #[inline]
    pub fn probability_fp(&self, depth_bytes: u64) -> u64 {
        if depth_bytes >= self.kmax {
            1u64 << 32
        } else if depth_bytes < self.kmin {
            0
        } else {
            // kmin <= depth < kmax, so kmax > kmin.
            let num = self.pmax_fp as u128 * (depth_bytes - self.kmin) as u128;
            (num / (self.kmax - self.kmin) as u128) as u64
        }
    }

    /// Decide for a packet arriving when the queue holds `depth_bytes` (before this packet).
    #[inline]
    pub fn decide(&mut self, depth_bytes: u64) -> RedDecision {
        self.stats.decisions += 1;
        let p = self.probability_fp(depth_bytes);
        let mark = if p >= 1u64 << 32 {
            true
        } else if p == 0 {
            false
        } else {
            (self.rng.next_u32() as u64) < p
        };
        if mark {
            self.stats.mark_decisions += 1;
            RedDecision::Mark
        } else {
            RedDecision::NoMark
        }
    }

    /// Decide, and on "mark" set CE in the IP header at `l3_off` of `frame` (`l3_off == 0` means
    /// not parsed: nothing is written). Not-ECT packets are left unchanged (not dropped).
    /// Inlined: every packet admitted to a RED class comes here, nearly always below K_min.
    #[inline]
    pub fn apply(&mut self, frame: &mut [u8], l3_off: u16, depth_bytes: u64) -> RedOutcome {
        if self.decide(depth_bytes) == RedDecision::NoMark {
            return RedOutcome::NoMark;
        }
        if l3_off == 0 {
            self.stats.not_ip += 1;
            return RedOutcome::NotIp;
        }
        match ecn::mark_ce(frame, l3_off as usize) {
            EcnMark::Marked => {
                self.stats.marked += 1;
                RedOutcome::Marked
            }
            EcnMark::AlreadyCe => {
                self.stats.already_ce += 1;
                RedOutcome::AlreadyCe
            }
            EcnMark::NotEct => {
                self.stats.not_ect += 1;
                RedOutcome::NotEct
            }
            EcnMark::NotIp => {
                self.stats.not_ip += 1;
                RedOutcome::NotIp
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> &RedStats {
        &self.stats
    }
}

fn pmax_to_fp(pmax: f64) -> u64 {
    let p = if pmax.is_nan() {
        0.0
    } else {
        pmax.clamp(0.0, 1.0)
    };
    (p * (1u64 << 32) as f64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red(kmin: u64, kmax: u64, pmax: f64) -> RedEcn {
        RedEcn::new(
            RedParams {
                kmin_bytes: kmin,
                kmax_bytes: kmax,
                pmax,
            },
            1,
        )
    }

    #[test]
    fn thresholds() {
        let mut r = red(1000, 2000, 0.5);
        for _ in 0..1000 {
            assert_eq!(r.decide(999), RedDecision::NoMark);
            assert_eq!(r.decide(2000), RedDecision::Mark);
            assert_eq!(r.decide(u64::MAX), RedDecision::Mark);
        }
        assert_eq!(r.probability_fp(1000), 0);
        assert_eq!(r.probability_fp(1500), 1u64 << 30); // 0.5 * 0.5
        assert_eq!(r.probability_fp(2000), 1u64 << 32);
    }

    #[test]
    fn linear_band_frequency() {
        let mut r = red(0, 1000, 0.8);
        let n = 100_000;
        let marks = (0..n)
            .filter(|_| r.decide(500) == RedDecision::Mark)
            .count();
        // Expected 0.4.
        assert!((38_000..42_000).contains(&marks), "{marks}");
        assert_eq!(r.stats().decisions, n as u64);
        assert_eq!(r.stats().mark_decisions, marks as u64);
    }

    #[test]
    fn degenerate_params() {
        let mut r = red(500, 500, 0.3);
        assert_eq!(r.decide(499), RedDecision::NoMark);
        assert_eq!(r.decide(500), RedDecision::Mark);
        let mut r = red(0, 100, f64::NAN);
        assert_eq!(r.probability_fp(50), 0);
        r.set_params(RedParams {
            kmin_bytes: 0,
            kmax_bytes: 100,
            pmax: 7.0,
        });
        assert_eq!(r.probability_fp(50), 1u64 << 31);
    }

    #[test]
    fn apply_marks_only_ect() {
        let mut r = red(0, 1, 1.0);
        // 14 B Ethernet + IPv4 header with ToS ECT(0).
        let mut f = [0u8; 34];
        f[14] = 0x45;
        f[15] = 0x02;
        assert_eq!(r.apply(&mut f, 14, 10), RedOutcome::Marked);
        assert_eq!(f[15] & 3, 3);
        assert_eq!(r.apply(&mut f, 14, 10), RedOutcome::AlreadyCe);
        f[15] = 0;
        assert_eq!(r.apply(&mut f, 14, 10), RedOutcome::NotEct);
        assert_eq!(f[15], 0);
        assert_eq!(r.apply(&mut f, 0, 10), RedOutcome::NotIp);
        assert_eq!(r.apply(&mut f, 14, 0), RedOutcome::NoMark);
        let s = r.stats();
        assert_eq!((s.marked, s.already_ce, s.not_ect, s.not_ip), (1, 1, 1, 1));
    }

    #[test]
    fn same_seed_same_marks() {
        let mut a = red(0, 1000, 1.0);
        let mut b = red(0, 1000, 1.0);
        for d in 0..1000 {
            assert_eq!(a.decide(d), b.decide(d));
        }
    }
}
