//! RoCEv2 invariant CRC (ICRC): IBTA Annex A17 (RoCEv2) section A17.4.3 over the IB spec's
//! section 7.8.1 ICRC, exactly as DESIGN.md section 5 states it.
//!
//! ICRC = CRC-32 (IEEE 802.3 polynomial, reflected, init and final XOR 0xffffffff: what
//! `crc32fast` computes) over
//! 1. eight bytes of 0xff (standing in for the IB LRH),
//! 2. the IP header with the variant fields set to all ones: IPv4 ToS, TTL and header checksum;
//!    IPv6 traffic class, flow label and hop limit,
//! 3. the UDP header with the checksum set to all ones,
//! 4. the BTH with byte 4 (FECN, BECN, reserved) set to all ones,
//! 5. everything after the BTH up to (not including) the ICRC.
//!
//! The ICRC is the last four bytes of the UDP datagram as bounded by the UDP length (never the
//! buffer length: a 60-byte minimum Ethernet frame may carry trailing padding), stored least
//! significant byte first. Nothing here allocates: the masked headers are streamed through a
//! `crc32fast::Hasher` from small stack arrays.

use super::ipv4::Ipv4Packet;
use super::ipv6::Ipv6Packet;
use super::udp::UdpPacket;
use super::WireError;
use crc32fast::Hasher;

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;
/// BTH length.
const BTH_LEN: usize = 12;

/// Where the covered parts of a RoCEv2 packet are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IcrcLayout {
    /// Offset of the IP header.
    pub l3_off: usize,
    /// IP version (4 or 6).
    pub version: u8,
    /// Offset of the UDP header (= end of the IP header).
    pub udp_off: usize,
    /// Offset of the BTH.
    pub bth_off: usize,
    /// Offset of the ICRC (= UDP end - 4).
    pub icrc_off: usize,
}

impl IcrcLayout {
    /// The layout of a RoCEv2 frame `total` bytes long that a builder has just written with its
    /// IP header at `l3_off` (IPv4 without options, or IPv6 without extension headers): what
    /// [`IcrcLayout::locate`] would find, without parsing the frame back.
    #[inline]
    pub fn built(l3_off: usize, v4: bool, total: usize) -> Self {
        let ip_len = if v4 {
            super::ipv4::HEADER_LEN
        } else {
            super::ipv6::HEADER_LEN
        };
        let udp_off = l3_off + ip_len;
        IcrcLayout {
            l3_off,
            version: if v4 { 4 } else { 6 },
            udp_off,
            bth_off: udp_off + super::udp::HEADER_LEN,
            icrc_off: total - ICRC_LEN,
        }
    }

    /// Locate IP, UDP, BTH and ICRC for the RoCEv2 packet whose IP header is at `l3_off`.
    /// Errors: [`WireError::Truncated`] / [`WireError::BadIpHeader`] from the IP header,
    /// [`WireError::BadLength`] when the IP/UDP lengths do not fit the buffer or the UDP datagram
    /// cannot hold BTH + ICRC, [`WireError::Unsupported`] when the IP payload is not UDP.
    pub fn locate(frame: &[u8], l3_off: usize) -> Result<IcrcLayout, WireError> {
        let l3 = frame.get(l3_off..).ok_or(WireError::Truncated)?;
        let v = l3.first().ok_or(WireError::Truncated)? >> 4;
        let (udp_off, ip_end) = match v {
            4 => {
                let ip = Ipv4Packet::new_checked(l3)?;
                ip.check_len()?;
                if ip.protocol() != super::ipv4::PROTO_UDP {
                    return Err(WireError::Unsupported);
                }
                (l3_off + ip.header_len(), l3_off + ip.total_len() as usize)
            }
            6 => {
                let ip = Ipv6Packet::new_checked(l3)?;
                ip.check_len()?;
                if ip.next_header() != super::ipv4::PROTO_UDP {
                    return Err(WireError::Unsupported);
                }
                (
                    l3_off + super::ipv6::HEADER_LEN,
                    l3_off + super::ipv6::HEADER_LEN + ip.payload_len() as usize,
                )
            }
            _ => return Err(WireError::BadIpHeader),
        };
        let udp_bytes = frame.get(udp_off..ip_end).ok_or(WireError::BadLength)?;
        let udp = UdpPacket::new_checked(udp_bytes)?;
        let ulen = udp.len() as usize;
        if ulen < super::udp::HEADER_LEN + BTH_LEN + ICRC_LEN || ulen > udp_bytes.len() {
            return Err(WireError::BadLength);
        }
        Ok(IcrcLayout {
            l3_off,
            version: v,
            udp_off,
            bth_off: udp_off + super::udp::HEADER_LEN,
            icrc_off: udp_off + ulen - ICRC_LEN,
        })
    }
}

/// Compute the ICRC of the RoCEv2 packet whose IP header is at `l3_off` (the value as a `u32`;
/// on the wire it is `value.to_le_bytes()`).
pub fn compute(frame: &[u8], l3_off: usize) -> Result<u32, WireError> {
    let lay = IcrcLayout::locate(frame, l3_off)?;
    Ok(compute_with(frame, &lay))
}

/// Compute with an already located layout (from [`IcrcLayout::locate`] on this same frame).
pub fn compute_with(frame: &[u8], lay: &IcrcLayout) -> u32 {
    hash_to(frame, lay, lay.icrc_off).finalize()
}

/// The CRC of the masked headers and the bytes after the BTH up to `end` (`lay.icrc_off` for
/// the whole ICRC), not finalized.
#[inline(always)]
fn hash_to(frame: &[u8], lay: &IcrcLayout, end: usize) -> Hasher {
    if let Some(h) = hash_to_v4(frame, lay, end) {
        return h;
    }
    hash_to_general(frame, lay, end)
}

/// [`hash_to`] for IPv4 without options, the usual case (every frame the switch builds): the
/// masked headers (the same 48 bytes the general path streams) put together at fixed offsets,
/// with no variable-length copies and no zeroed staging arrays. `None` for anything else, or
/// when a header is cut short (the general path's rules apply then).
#[inline(always)]
fn hash_to_v4(frame: &[u8], lay: &IcrcLayout, end: usize) -> Option<Hasher> {
    if lay.version != 4 || lay.udp_off != lay.l3_off + super::ipv4::HEADER_LEN {
        return None;
    }
    let ip = frame.get(lay.l3_off..)?.first_chunk::<20>()?;
    let udp = frame.get(lay.udp_off..)?.first_chunk::<8>()?;
    let bth = frame.get(lay.bth_off..)?.first_chunk::<BTH_LEN>()?;
    let mut hdr = [0xffu8; 8 + 20 + 8 + BTH_LEN];
    hdr[8..28].copy_from_slice(ip);
    hdr[8 + 1] = 0xff; // ToS
    hdr[8 + 8] = 0xff; // TTL
    hdr[8 + 10] = 0xff; // header checksum
    hdr[8 + 11] = 0xff;
    hdr[28..34].copy_from_slice(&udp[..6]); // UDP checksum (28 + 6..8) stays all ones
    hdr[36..48].copy_from_slice(bth);
    hdr[36 + 4] = 0xff; // BTH byte 4
    let mut h = hasher();
    h.update(&hdr);
    h.update(frame.get(lay.bth_off + BTH_LEN..end).unwrap_or(&[]));
    Some(h)
}

/// [`hash_to`] for any layout the locate step accepts (IPv4 with options, IPv6).
#[inline]
fn hash_to_general(frame: &[u8], lay: &IcrcLayout, end: usize) -> Hasher {
    // The masked headers go to the hasher as one run: a CRC over short pieces costs a call and
    // a byte-wise tail each (four pieces were most of a small frame's ICRC, and a tenth of a
    // 1 KB one's); the CRC of the concatenation is the same value.
    let mut hdr = [0u8; 8 + 60 + 8 + BTH_LEN];
    hdr[..8].fill(0xff);
    // IP header, masked. IPv4 up to 60 bytes with options; IPv6 fixed 40.
    let mut ip = [0u8; 60];
    let ip_src = frame.get(lay.l3_off..lay.udp_off).unwrap_or(&[]);
    let n = ip_src.len().min(ip.len());
    ip[..n].copy_from_slice(&ip_src[..n]);
    if lay.version == 4 {
        ip[1] = 0xff; // ToS
        ip[8] = 0xff; // TTL
        ip[10] = 0xff; // header checksum
        ip[11] = 0xff;
    } else {
        ip[0] |= 0x0f; // traffic class (high nibble) ...
        ip[1] = 0xff; // ... traffic class (low nibble) + flow label
        ip[2] = 0xff;
        ip[3] = 0xff;
        ip[7] = 0xff; // hop limit
    }
    hdr[8..8 + n].copy_from_slice(&ip[..n]);
    let mut at = 8 + n;
    // UDP header with the checksum masked.
    let udp = &mut hdr[at..at + 8];
    if let Some(s) = frame.get(lay.udp_off..lay.udp_off + 8) {
        udp.copy_from_slice(s);
    }
    udp[6] = 0xff;
    udp[7] = 0xff;
    at += 8;
    // BTH with byte 4 (FECN/BECN/resv6) masked.
    let bth = &mut hdr[at..at + BTH_LEN];
    if let Some(s) = frame.get(lay.bth_off..lay.bth_off + BTH_LEN) {
        bth.copy_from_slice(s);
    }
    bth[4] = 0xff;
    at += BTH_LEN;
    let mut h = hasher();
    h.update(&hdr[..at]);
    h.update(frame.get(lay.bth_off + BTH_LEN..end).unwrap_or(&[]));
    h
}

/// A fresh CRC-32 hasher. `Hasher::new` detects the CPU's features on every call (about 37
/// instructions, a tenth of a small frame's ICRC); the hasher it returns is kept once and
/// cloned (the same implementation, the same initial state).
#[inline(always)]
fn hasher() -> Hasher {
    static TEMPLATE: std::sync::OnceLock<Hasher> = std::sync::OnceLock::new();
    TEMPLATE.get_or_init(Hasher::new).clone()
}

/// The ICRC stored in the packet (read least significant byte first).
pub fn stored(frame: &[u8], l3_off: usize) -> Result<u32, WireError> {
    let lay = IcrcLayout::locate(frame, l3_off)?;
    stored_with(frame, &lay)
}

fn stored_with(frame: &[u8], lay: &IcrcLayout) -> Result<u32, WireError> {
    let s = frame
        .get(lay.icrc_off..lay.icrc_off + ICRC_LEN)
        .ok_or(WireError::Truncated)?;
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Whether the stored ICRC matches; `Err` only when the packet structure cannot be located.
pub fn verify(frame: &[u8], l3_off: usize) -> Result<bool, WireError> {
    let lay = IcrcLayout::locate(frame, l3_off)?;
    Ok(stored_with(frame, &lay)? == compute_with(frame, &lay))
}

/// Recompute the ICRC and store it (LSB first); returns the value.
pub fn fill(frame: &mut [u8], l3_off: usize) -> Result<u32, WireError> {
    let lay = IcrcLayout::locate(frame, l3_off)?;
    let c = compute_with(frame, &lay);
    let s = frame
        .get_mut(lay.icrc_off..lay.icrc_off + ICRC_LEN)
        .ok_or(WireError::Truncated)?;
    s.copy_from_slice(&c.to_le_bytes());
    Ok(c)
}

/// As [`fill`] with the layout given (a builder that just wrote the headers knows where they
/// are; [`IcrcLayout::locate`] on such a frame gives the same layout, and parsing it back cost
/// about 70 instructions per generated frame). [`WireError::Truncated`] when `lay.icrc_off`
/// leaves no room for the ICRC.
#[inline]
pub fn fill_with(frame: &mut [u8], lay: &IcrcLayout) -> Result<u32, WireError> {
    if frame.len() < lay.icrc_off + ICRC_LEN {
        return Err(WireError::Truncated);
    }
    let c = compute_with(frame, lay);
    frame[lay.icrc_off..lay.icrc_off + ICRC_LEN].copy_from_slice(&c.to_le_bytes());
    Ok(c)
}

/// As [`fill`], for a frame whose last `zeros` bytes before the ICRC are zero (a sender that
/// wrote them: the emulator's hosts, whose payloads are zeros). The CRC runs over the rest and
/// is carried across the zeros by [`ZeroRuns`] in a few table lookups instead of a pass over
/// them (about a kilobyte per data frame). Same value as [`fill`] (debug builds check it);
/// `zeros` past the bytes after the BTH is `BadLength`.
pub fn fill_zero_tail(frame: &mut [u8], l3_off: usize, zeros: usize) -> Result<u32, WireError> {
    let lay = IcrcLayout::locate(frame, l3_off)?;
    fill_zero_tail_with(frame, &lay, zeros)
}

/// As [`fill_zero_tail`] with the layout given (a builder that just wrote the headers, as for
/// [`fill_with`]: locating them again cost about 70 instructions per data frame of the
/// emulator's hosts).
#[inline]
pub fn fill_zero_tail_with(
    frame: &mut [u8],
    lay: &IcrcLayout,
    zeros: usize,
) -> Result<u32, WireError> {
    if frame.len() < lay.icrc_off + ICRC_LEN {
        return Err(WireError::Truncated);
    }
    let body = lay.bth_off + BTH_LEN;
    let end = lay
        .icrc_off
        .checked_sub(zeros)
        .filter(|&e| e >= body)
        .ok_or(WireError::BadLength)?;
    debug_assert!(frame[end..lay.icrc_off].iter().all(|&b| b == 0));
    let c = ZeroRuns::get().extend(hash_to(frame, lay, end).finalize(), zeros);
    debug_assert_eq!(c, compute_with(frame, lay));
    frame[lay.icrc_off..lay.icrc_off + ICRC_LEN].copy_from_slice(&c.to_le_bytes());
    Ok(c)
}

/// CRC-32 across runs of zero bytes. Feeding a zero byte to the CRC register `r` gives
/// `(r >> 8) ^ T[r & 0xff]`, a linear map of `r` over GF(2) (T is linear); `n` zero bytes are
/// that map's n-th power. Level `k` holds the power 2^k as four 256-entry tables (one per byte
/// of `r`), so a run of `n` zeros costs one lookup-and-xor of four entries per set bit of `n`.
pub struct ZeroRuns {
    levels: Box<[[[u32; 256]; 4]; ZERO_RUN_LEVELS]>,
}

/// Runs up to 2^16 - 1 bytes: any IPv4 datagram (and any IPv6 one of this crate's frames).
const ZERO_RUN_LEVELS: usize = 16;

impl ZeroRuns {
    /// The tables, built on first use (64 KiB, a few hundred thousand instructions, once).
    pub fn get() -> &'static ZeroRuns {
        static RUNS: std::sync::OnceLock<ZeroRuns> = std::sync::OnceLock::new();
        RUNS.get_or_init(ZeroRuns::build)
    }

    fn build() -> ZeroRuns {
        // The CRC-32 byte table (reflected 0xedb88320), as crc32fast uses.
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *e = c;
        }
        let mut levels = Box::new([[[0u32; 256]; 4]; ZERO_RUN_LEVELS]);
        // The images of the 32 unit registers under one zero byte, then under each square.
        let mut img: [u32; 32] = std::array::from_fn(|i| {
            let r = 1u32 << i;
            (r >> 8) ^ t[(r & 0xff) as usize]
        });
        for k in 0..ZERO_RUN_LEVELS {
            let lv = &mut levels[k];
            for (byte, tab) in lv.iter_mut().enumerate() {
                for (v, e) in tab.iter_mut().enumerate() {
                    *e = (0..8)
                        .filter(|b| v & (1 << b) != 0)
                        .fold(0, |acc, b| acc ^ img[8 * byte + b]);
                }
            }
            // img[i] is M^(2^k) e_i: once more M^(2^k) gives M^(2^(k+1)) e_i.
            let lv = &levels[k];
            img = img.map(|r| apply(lv, r));
        }
        ZeroRuns { levels }
    }

    /// The CRC (as `crc32fast` reports it: final XOR applied) of a message whose CRC is `crc`
    /// followed by `n` zero bytes.
    pub fn extend(&self, crc: u32, n: usize) -> u32 {
        let mut r = !crc;
        // One step per set bit (a full 1024-byte payload: one).
        let mut rest = n;
        while rest != 0 {
            let k = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            match self.levels.get(k) {
                Some(lv) => r = apply(lv, r),
                // Longer than any frame: the bytes themselves (never taken; 2^k is a multiple
                // of the chunk here).
                None => {
                    let chunk = [0u8; 1 << 12];
                    let mut h = Hasher::new_with_initial(!r);
                    for _ in 0..(1usize << k) / chunk.len() {
                        h.update(&chunk);
                    }
                    r = !h.finalize();
                }
            }
        }
        !r
    }
}

/// One level's linear map applied to register `r`.
#[inline]
fn apply(lv: &[[u32; 256]; 4], r: u32) -> u32 {
    lv[0][(r & 0xff) as usize]
        ^ lv[1][((r >> 8) & 0xff) as usize]
        ^ lv[2][((r >> 16) & 0xff) as usize]
        ^ lv[3][(r >> 24) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testutil::hex;
    use crate::wire::{ecn, ipv4};

    /// The real ConnectX-4 Lx CNP from DESIGN.md section 5 (with its ICRC 82fd002a).
    fn cx4_cnp() -> Vec<u8> {
        let mut f = hex(
            "e41d2dab2bc27cfe90643b32 0800 45c2003c718c400040119161 0a001101 0a001201
             000012b700280000 8100ffff40000118 00000000",
        );
        f.extend_from_slice(&[0u8; 16]);
        f.extend_from_slice(&hex("82fd002a"));
        f
    }

    #[test]
    fn connectx4_cnp_known_answer() {
        let f = cx4_cnp();
        assert_eq!(f.len(), 14 + 60);
        assert_eq!(compute(&f, 14), Ok(0x2a00fd82));
        assert_eq!(stored(&f, 14), Ok(0x2a00fd82));
        assert_eq!(verify(&f, 14), Ok(true));
        let mut g = f.clone();
        g[70..74].copy_from_slice(&[0; 4]);
        assert_eq!(verify(&g, 14), Ok(false));
        assert_eq!(fill(&mut g, 14), Ok(0x2a00fd82));
        assert_eq!(g, f);
    }

    #[test]
    fn trailing_padding_ignored() {
        // Same CNP padded with 6 extra bytes (a frame padded past the IP datagram).
        let mut f = cx4_cnp();
        f.extend_from_slice(&[0xaa; 6]);
        assert_eq!(verify(&f, 14), Ok(true));
        let lay = IcrcLayout::locate(&f, 14).unwrap();
        assert_eq!(lay.icrc_off, 70);
    }

    #[test]
    fn variant_fields_keep_icrc_valid() {
        let mut f = cx4_cnp();
        assert_eq!(ecn::mark_ce(&mut f, 14), ecn::EcnMark::Marked);
        let mut ip = ipv4::Ipv4Packet::new_checked(&mut f[14..]).unwrap();
        ip.decrement_ttl().unwrap();
        ip.set_tos_update(0x2b);
        assert!(ip.verify_checksum());
        f[14 + 20 + 6] = 0x12; // UDP checksum
        f[14 + 28 + 4] = 0xc0; // FECN + BECN
        assert_eq!(verify(&f, 14), Ok(true));
        // PSN change breaks it.
        f[14 + 28 + 11] ^= 1;
        assert_eq!(verify(&f, 14), Ok(false));
        let mut g = cx4_cnp();
        g[14 + 28 + 7] ^= 0x10; // DestQP
        assert_eq!(verify(&g, 14), Ok(false));
        let mut g = cx4_cnp();
        g[14 + 28 + 20] = 1; // payload
        assert_eq!(verify(&g, 14), Ok(false));
        let mut g = cx4_cnp();
        g[14 + 12] ^= 1; // source address
        assert_eq!(verify(&g, 14), Ok(false));
    }

    #[test]
    fn ipv6_known_answer() {
        // RC RDMA WRITE ONLY over IPv6 with non-zero traffic class and flow label.
        // python3 -c 'from scapy.all import *; from scapy.contrib.roce import *;
        //  print(bytes(Ether(src="02:00:00:00:00:01",dst="02:00:00:00:00:02")/IPv6(
        //  src="fd00:1::10",dst="fd00:2::20",tc=0x62,fl=0x12345,hlim=63)/UDP(sport=51234,
        //  dport=4791,chksum=0)/BTH(opcode=0x0a,pkey=0xffff,dqpn=0x000abc,ackreq=1,psn=0x00a0b0)/
        //  Raw(bytes.fromhex("00000000deadbeef000012340000002c")+bytes(range(44)))).hex())'
        let f = hex("02000000000202000000000186dd662123450054113ffd000001000000000000000000000010fd000002000000000000000000000020c82212b7005400000a00ffff00000abc8000a0b000000000deadbeef000012340000002c000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b33269bec");
        assert_eq!(verify(&f, 14), Ok(true));
        assert_eq!(
            compute(&f, 14),
            Ok(u32::from_le_bytes([0x33, 0x26, 0x9b, 0xec]))
        );
        let mut g = f.clone();
        ecn::set(&mut g, 14, ecn::CE);
        g[14 + 1] |= 0x0f; // flow label bits
        g[14 + 7] = 1; // hop limit
        assert_eq!(verify(&g, 14), Ok(true));
        g[14 + 48 + 11] ^= 0x80; // PSN
        assert_eq!(verify(&g, 14), Ok(false));
    }

    #[test]
    fn ipv4_send_with_pad_known_answer() {
        // python3 -c '... Ether(...)/IP(src="192.168.1.1",dst="192.168.1.2",tos=0x02,id=0x1234,
        //  flags="DF",ttl=64)/UDP(sport=50000,dport=4791,chksum=0)/BTH(opcode=0x04,pkey=0xffff,
        //  dqpn=0x000011,ackreq=1,psn=0x000100,padcount=1)/Raw(bytes(range(31))+b"\x00")'
        let f = hex("02000000000202000000000108004502004c123440004011a517c0a80101c0a80102c35012b7003800000410ffff0000001180000100000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e00441dd8dc");
        assert_eq!(verify(&f, 14), Ok(true));
    }

    #[test]
    fn structural_errors() {
        let f = cx4_cnp();
        assert_eq!(compute(&f[..40], 14), Err(WireError::BadLength));
        assert_eq!(compute(&f, 100), Err(WireError::Truncated));
        assert_eq!(compute(&f, 0), Err(WireError::BadIpHeader));
        let mut g = f.clone();
        g[14 + 9] = 6;
        assert_eq!(compute(&g, 14), Err(WireError::Unsupported));
        let mut g = f.clone();
        g[14 + 24] = 0;
        g[14 + 25] = 20; // UDP length 20: no room for ICRC
        assert_eq!(compute(&g, 14), Err(WireError::BadLength));
        let mut g = f.clone();
        g[14 + 25] = 41; // UDP length beyond IP total length
        assert_eq!(compute(&g, 14), Err(WireError::BadLength));
    }

    proptest::proptest! {
        /// The IPv4 fixed-offset ICRC against the general path, on frames of any bytes and
        /// lengths (cut headers included) at several IP offsets: the same CRC, or the general
        /// path taken.
        #[test]
        fn v4_fixed_hash_matches_the_general_one(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..160),
            l3_off in proptest::prop_oneof![proptest::strategy::Just(14usize), 0usize..40],
            end in 0usize..200,
        ) {
            let lay = IcrcLayout {
                l3_off,
                version: 4,
                udp_off: l3_off + 20,
                bth_off: l3_off + 28,
                icrc_off: 0,
            };
            let want = hash_to_general(&bytes, &lay, end).finalize();
            if let Some(h) = hash_to_v4(&bytes, &lay, end) {
                proptest::prop_assert_eq!(h.finalize(), want);
            }
            proptest::prop_assert_eq!(hash_to(&bytes, &lay, end).finalize(), want);
        }
    }

    #[test]
    fn zero_runs_match_the_bytes() {
        let z = ZeroRuns::get();
        for prefix in [
            &b""[..],
            b"\xff\xff\xff\xff\xff\xff\xff\xff",
            b"longhaul icrc",
        ] {
            let mut h = Hasher::new();
            h.update(prefix);
            let c = h.finalize();
            for n in [0, 1, 2, 3, 7, 64, 255, 1024, 1027, 4096 + 13, 65535] {
                let mut h = Hasher::new();
                h.update(prefix);
                h.update(&vec![0u8; n]);
                assert_eq!(z.extend(c, n), h.finalize(), "prefix {prefix:?}, {n} zeros");
            }
        }
        // Past the tables (not a frame size): still the CRC of the bytes.
        let mut h = Hasher::new();
        h.update(&vec![0u8; 70_000]);
        assert_eq!(z.extend(0, 70_000), h.finalize());
    }

    #[test]
    fn fill_zero_tail_matches_fill() {
        let mut f = cx4_cnp(); // a CNP's 16 bytes after the BTH are zeros
        let want = f.clone();
        let n = f.len();
        f[n - 4..].fill(0);
        for zeros in [0, 1, 16] {
            let mut g = f.clone();
            assert_eq!(fill_zero_tail(&mut g, 14, zeros), fill(&mut f.clone(), 14));
            assert_eq!(g, want);
        }
        assert_eq!(fill_zero_tail(&mut f, 14, 17), Err(WireError::BadLength));
    }
}
