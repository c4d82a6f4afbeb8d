//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624), with the IPv4/IPv6
//! pseudo-headers used by UDP (RFC 768, RFC 8200 section 8.1) and TCP (RFC 9293 section 3.1).
//!
//! A running sum is a `u32` holding an unfolded ones'-complement sum; [`fold`] reduces it to 16
//! bits and [`finish`] complements it. Only the last slice summed may have an odd length.

use std::net::{Ipv4Addr, Ipv6Addr};

pub use super::ecn::checksum_update as update;

/// Add the 16-bit big-endian words of `data` to the running sum `initial` (RFC 1071 section 4.1).
/// An odd trailing byte is padded with a zero byte. The result is partly folded, so sums over any
/// number of slices never overflow.
///
/// Eight bytes at a time: the ones'-complement sum of 16-bit words equals that of 32-bit words
/// folded to 16 bits (RFC 1071 section 2(B), "deferred carries"), so each `u64` read adds its two
/// 32-bit halves into a 64-bit accumulator (no carry is lost before 2^32 additions, i.e. 32 GB).
#[inline]
pub fn sum(data: &[u8], initial: u32) -> u32 {
    let mut acc: u64 = initial as u64;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w >> 32) + (w & 0xffff_ffff);
    }
    let mut rest = chunks.remainder();
    if let Some((c, tail)) = rest.split_first_chunk::<4>() {
        acc += u32::from_be_bytes(*c) as u64;
        rest = tail;
    }
    if let Some((c, tail)) = rest.split_first_chunk::<2>() {
        acc += u16::from_be_bytes(*c) as u64;
        rest = tail;
    }
    if let [last] = rest {
        acc += (*last as u64) << 8;
    }
    // Fold to at most 17 bits so a u32 never overflows on the next call.
    while acc > 0xffff_ffff {
        acc = (acc & 0xffff_ffff) + (acc >> 32);
    }
    let mut s = acc as u32;
    s = (s & 0xffff) + (s >> 16);
    s
}

/// Fold a running sum to 16 bits (end-around carry). Two folds always suffice for a `u32`: the
/// first leaves at most `0xffff + 0xffff = 0x1fffe`, the second at most `0xfffe + 1`. (A loop
/// "while above 0xffff" cost a branch per fold on every header the fast path checks.)
#[inline(always)]
pub fn fold(s: u32) -> u16 {
    let s = (s & 0xffff) + (s >> 16);
    let s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// The running sum of an option-less 20-byte IPv4 header: its five 32-bit words added in a
/// `u64` (as [`sum`] does eight bytes at a time), without [`sum`]'s loop and tail handling:
/// the header the fast path verifies on every IPv4 packet.
#[inline(always)]
pub fn sum_ipv4_header(h: &[u8; 20]) -> u32 {
    let w = |i: usize| u64::from(u32::from_be_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let acc = w(0) + w(4) + w(8) + w(12) + w(16);
    // At most 5 * (2^32 - 1) < 2^35: one fold to 32 bits cannot overflow.
    ((acc & 0xffff_ffff) + (acc >> 32)) as u32
}

/// The checksum field value for a running sum: the ones' complement of the folded sum.
#[inline]
pub fn finish(s: u32) -> u16 {
    !fold(s)
}

/// The Internet checksum of `data` (RFC 1071): what goes into a header checksum field computed
/// with that field zeroed. Verifying: `checksum(header_with_field) == 0`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum(data, 0))
}

/// Running sum of the IPv4 pseudo-header (RFC 768 / RFC 9293 section 3.1): source, destination,
/// zero, protocol, L4 length.
#[inline]
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, l4_len: u16) -> u32 {
    let s = sum(&src.octets(), 0);
    let s = sum(&dst.octets(), s);
    s + proto as u32 + l4_len as u32
}

/// Running sum of the IPv6 pseudo-header (RFC 8200 section 8.1): source, destination, 32-bit
/// upper-layer length, three zero bytes, next header.
#[inline]
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, l4_len: u32) -> u32 {
    let s = sum(&src.octets(), 0);
    let s = sum(&dst.octets(), s);
    s + (l4_len >> 16) + (l4_len & 0xffff) + next_header as u32
}

/// RFC 1624 update of checksum `hc` when a 32-bit field (two words) changes from `old` to `new`.
#[inline]
pub fn update32(hc: u16, old: u32, new: u32) -> u16 {
    let hc = update(hc, (old >> 16) as u16, (new >> 16) as u16);
    update(hc, old as u16, new as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3 example: words 0001 f203 f4f5 f6f7 sum to ddf2 (folded).
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&d, 0)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
        // Split at an even boundary gives the same sum.
        assert_eq!(fold(sum(&d[4..], sum(&d[..4], 0))), 0xddf2);
        // Odd length pads with zero.
        assert_eq!(fold(sum(&[0xab], 0)), 0xab00);
    }

    #[test]
    fn ipv4_header_known_answer() {
        // The ConnectX-4 Lx CNP header from DESIGN.md section 5 (checksum 0x9161).
        let mut h = [
            0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 10, 0, 17, 1,
            10, 0, 18, 1,
        ];
        assert_eq!(checksum(&h), 0);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0x9161);
    }

    #[test]
    fn incremental_matches_full() {
        let mut h = [
            0x45u8, 0x00, 0x00, 0x3c, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0, 0, 10, 0, 0, 1, 10, 0,
            0, 2,
        ];
        let ck = checksum(&h);
        h[10..12].copy_from_slice(&ck.to_be_bytes());
        let old = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        let new = 0xc0a8_0101u32;
        h[12..16].copy_from_slice(&new.to_be_bytes());
        let ck2 = update32(ck, old, new);
        h[10..12].copy_from_slice(&ck2.to_be_bytes());
        assert_eq!(checksum(&h), 0);
    }

    proptest::proptest! {
        /// The word-at-a-time sum against the 16-bit definition, any length and any start.
        #[test]
        fn sum_matches_rfc1071_words(d in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
                                     init in 0u32..0x2_0000) {
            let mut acc = init as u64;
            for c in d.chunks(2) {
                acc += (c[0] as u64) << 8 | c.get(1).map_or(0, |&b| b as u64);
            }
            let want = fold(((acc & 0xffff_ffff) + (acc >> 32)) as u32);
            proptest::prop_assert_eq!(fold(sum(&d, init)), want);
        }
    }

    proptest::proptest! {
        #[test]
        fn ipv4_header_sum_is_sum(h in proptest::prelude::any::<[u8; 20]>(), s in 0u32..=u32::MAX) {
            proptest::prop_assert_eq!(fold(sum_ipv4_header(&h)), fold(sum(&h, 0)));
            // And the two folds are the loop's.
            let mut x = s;
            while x > 0xffff {
                x = (x & 0xffff) + (x >> 16);
            }
            proptest::prop_assert_eq!(fold(s), x as u16);
        }
    }

    #[test]
    fn huge_input_no_overflow() {
        let d = vec![0xffu8; 1 << 20];
        assert_eq!(fold(sum(&d, 0xffff_ffff)), 0xffff);
    }
}
