//! The ECMP hash: a seeded hash of a packet's 5-tuple and the choice of one of `n` members from
//! it, as a commodity switch picks an ECMP group member (and as Themis-S computes `P_base`,
//! paper 002 section 4.1, equation 1: the spraying ToR's ECMP hash of the QP's own 5-tuple).
//!
//! One function for both, so the baseline's ECMP routes and Themis-S's `P_base` agree on what
//! "the ECMP hash of a flow" is. For RoCEv2 the UDP source port carries the QP's entropy (the
//! RNIC picks it per QP), so two QPs between the same hosts usually hash apart.
//!
//! The hash is not symmetric: the two directions of a flow (data and its ACKs) are hashed
//! independently, as commodity switches do by default. Allocation-free, branch-free, no panics.

/// The seeded hash of a 5-tuple. Addresses are `u128`s (IPv4 as IPv4-mapped IPv6, the
/// convention of `wire::parse::ip_pair_u128`); ports are 0 for protocols without them.
///
/// A splitmix64-style mix of the words, then splitmix64's finaliser. Its outputs (through
/// [`pick`]) are exactly Themis-S's `P_base` of `spray/source.rs`'s reference (a test below
/// keeps it). Inlined: its
/// seven arguments (two `u128`s) do not fit the argument registers, and Themis-S hashes every
/// sprayed frame.
#[inline(always)]
pub fn hash5(src: u128, dst: u128, proto: u8, sport: u16, dport: u16, seed: u64) -> u64 {
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    for w in [
        src as u64,
        (src >> 64) as u64,
        dst as u64,
        (dst >> 64) as u64,
        (u64::from(sport) << 16) | u64::from(dport) | (u64::from(proto) << 32),
    ] {
        h = (h ^ w).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 29;
    }
    // splitmix64's finaliser.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The member (0..n) a hash selects: its upper 32 bits modulo `n` (`n` = 0 counts as 1, so
/// this never divides by zero).
#[inline]
pub fn pick(hash: u64, n: u32) -> u32 {
    ((hash >> 32) % u64::from(n.max(1))) as u32
}

/// `a % n` for a divisor `n` fixed at configuration time, by multiplication instead of a
/// division (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019): exact for
/// every `u32` dividend and every divisor `n >= 1`. A data path that takes a remainder by the
/// same `n` per packet (Themis-S's path of a PSN, equation 1) pays 10 to 30 cycles for a `div`,
/// depending on the CPU; this is two multiplications.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FastMod {
    n: u32,
    /// `ceil(2^64 / n)`, wrapped to 0 for `n` = 1 (every remainder is then 0, as it must be).
    m: u64,
}

impl FastMod {
    /// The remainder by `n`; `n` = 0 counts as 1 (as [`pick`] does), so nothing divides by zero.
    pub fn new(n: u32) -> Self {
        let n = n.max(1);
        FastMod {
            n,
            m: (u64::MAX / u64::from(n)).wrapping_add(1),
        }
    }

    /// `a % n`.
    #[inline(always)]
    pub fn rem(&self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.n)) >> 64) as u32
    }
}

/// As [`pick`], with the member count's [`FastMod`] made once.
#[inline(always)]
pub fn pick_fast(hash: u64, n: &FastMod) -> u32 {
    n.rem((hash >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ipv4::PROTO_UDP;
    use proptest::prelude::*;

    #[test]
    fn fast_mod_edges() {
        for n in [0u32, 1, 2, 3, 4, 7, 8, 100, 65_537, u32::MAX - 1, u32::MAX] {
            let f = FastMod::new(n);
            for a in [
                0u32,
                1,
                2,
                n.wrapping_sub(1),
                n,
                n.wrapping_add(1),
                u32::MAX - 1,
                u32::MAX,
            ] {
                assert_eq!(f.rem(a), a % n.max(1), "{a} % {n}");
            }
        }
    }

    proptest! {
        #[test]
        fn fast_mod_is_the_remainder(a in any::<u32>(), n in any::<u32>(), h in any::<u64>()) {
            let f = FastMod::new(n);
            prop_assert_eq!(f.rem(a), a % n.max(1));
            prop_assert_eq!(pick_fast(h, &f), pick(h, n));
        }
    }

    /// Themis-S's `P_base` as it was written before the hash moved here (UDP only).
    fn p_base_reference(src: u128, dst: u128, sport: u16, dport: u16, seed: u64, n: u32) -> u32 {
        let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
        for w in [
            src as u64,
            (src >> 64) as u64,
            dst as u64,
            (dst >> 64) as u64,
            (u64::from(sport) << 16) | u64::from(dport) | (17 << 32),
        ] {
            h = (h ^ w).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            h ^= h >> 29;
        }
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
        ((h >> 32) % u64::from(n.max(1))) as u32
    }

    #[test]
    fn same_as_themis_s_p_base() {
        let mut r = crate::asic::rng::Rng::new(3);
        for i in 0..10_000u64 {
            let src = (u128::from(r.next_u64()) << 64) | u128::from(r.next_u64());
            let dst = 0xffff_0000_0000 | u128::from(r.next_u64() as u32);
            let (sp, dp) = (r.next_u64() as u16, r.next_u64() as u16);
            let seed = r.next_u64();
            let n = (i % 200) as u32;
            assert_eq!(
                pick(hash5(src, dst, PROTO_UDP, sp, dp, seed), n),
                p_base_reference(src, dst, sp, dp, seed, n)
            );
        }
    }

    #[test]
    fn spreads_flows_evenly_and_keeps_a_flow_on_one_member() {
        for n in [2u32, 4, 16] {
            let mut seen = vec![0u32; n as usize];
            let flows = 1000 * n;
            for q in 0..flows {
                let sport = 49152 + (q % 16384) as u16;
                let src = 0xffff_0a00_0000 | u128::from(q / 16384);
                let h = hash5(src, 0xffff_0a01_0001, PROTO_UDP, sport, 4791, 0);
                let m = pick(h, n);
                assert_eq!(
                    m,
                    pick(hash5(src, 0xffff_0a01_0001, PROTO_UDP, sport, 4791, 0), n)
                );
                seen[m as usize] += 1;
            }
            // 1000 flows a member on average: each within 15%.
            assert!(seen.iter().all(|&c| (850..=1150).contains(&c)), "{seen:?}");
        }
    }

    #[test]
    fn the_seed_and_the_protocol_matter() {
        let a = hash5(1, 2, PROTO_UDP, 3, 4, 0);
        assert_ne!(a, hash5(1, 2, PROTO_UDP, 3, 4, 1));
        assert_ne!(a, hash5(1, 2, 6, 3, 4, 0));
        assert_eq!(pick(a, 0), 0);
        assert_eq!(pick(a, 1), 0);
    }
}
