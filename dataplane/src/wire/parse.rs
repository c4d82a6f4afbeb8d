//! The ingress parser (PSA's parser block): one pass over Ethernet, VLAN tags, IPv4/IPv6,
//! UDP/TCP and the RoCEv2 BTH, recording offsets and the fields the match-action stages key on,
//! plus the first anomaly found. It never panics and never allocates.
//!
//! Anomalies, in the order they are checked (the first one found is kept; parsing stops where
//! later headers cannot be trusted):
//! 1. `Truncated`: frame < 14 bytes or a header cut short (stop).
//! 2. `VlanStack`: more than `max_vlan_tags` tags (stop).
//! 3. `UnknownEtherType`: anything but IPv4, IPv6 and MAC Control 0x8808 (stop). MAC Control
//!    frames (PFC, PAUSE) are not anomalies: they get [`L3Kind::MacControl`].
//! 4. `BadIpHeader`: IP version differs from the EtherType's, or IPv4 IHL < 5 (stop).
//! 5. `BadLength`: IPv4 total length > bytes available or < IHL x 4, IPv6 payload length > bytes
//!    available (stop); UDP length < 8 or beyond the IP datagram, TCP data offset < 5 or beyond
//!    the datagram (L4 ports kept, no BTH).
//! 6. `BadIpChecksum` (only with `verify_ipv4_checksum`), then `Ipv4Options` (L4 still parsed,
//!    past the options), then `Ipv4Fragment` (the first fragment's L4 is parsed; a later fragment
//!    (offset != 0) is not parsed past L3).
//!
//! Ethernet padding after the IP datagram is not an anomaly: all L4 bounds use the IP length
//! fields. IPv6 extension headers are not walked: L4 is parsed only when the next header is UDP
//! or TCP.

use super::ethernet::{self, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_MAC_CONTROL};
use super::ipv4::{PROTO_TCP, PROTO_UDP};
use super::{be16, be32, checksum, icrc, ipv4, ipv6, roce, udp, WireError};
use crate::counters::DropReason;
use crate::packet::Meta;

/// Parser configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseOptions {
    /// Most VLAN tags (802.1Q / 802.1ad) accepted before `VlanStack`.
    pub max_vlan_tags: u8,
    /// Verify the IPv4 header checksum (`BadIpChecksum`).
    pub verify_ipv4_checksum: bool,
    /// UDP destination port that marks RoCEv2 (4791).
    pub roce_port: u16,
}

impl Default for ParseOptions {
    /// Two tags (Q-in-Q), checksum verified, port 4791.
    fn default() -> Self {
        ParseOptions {
            max_vlan_tags: 2,
            verify_ipv4_checksum: true,
            roce_port: roce::ROCE_V2_PORT,
        }
    }
}

/// What follows the L2 header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum L3Kind {
    /// Not reached (frame too short, too many tags).
    #[default]
    None,
    /// IPv4.
    V4,
    /// IPv6.
    V6,
    /// MAC Control (EtherType 0x8808: PFC, PAUSE).
    MacControl,
    /// Another EtherType ([`Parsed::ethertype`] says which). No payload: one byte, so the
    /// stages' reads of it are forwarded from the parser's store (a two-byte tag read back as
    /// four bytes stalls on store forwarding: a fifth of the baseline ingress's cycles).
    Other,
}

/// The parser's result. Offsets are from the start of the frame; 0 means "absent" (no header
/// can start at offset 0 except Ethernet), as in [`Meta`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Parsed {
    /// Number of VLAN tags.
    pub tags: u8,
    /// PCP of the outermost VLAN tag.
    pub outer_pcp: Option<u8>,
    /// EtherType after the tags (0 if not reached).
    pub ethertype: u16,
    /// Kind of L3 header.
    pub l3: L3Kind,
    /// Offset of the L3 header (0 = none).
    pub l3_off: u16,
    /// End of the IP datagram per its length field (0 = unknown); bytes after it are padding.
    pub l3_end: u32,
    /// IPv4 protocol / IPv6 next header.
    pub proto: u8,
    /// DSCP.
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: u8,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
    /// Offset of the UDP or TCP header (0 = none; other protocols leave it 0).
    pub l4_off: u16,
    /// L4 source port (UDP/TCP).
    pub src_port: u16,
    /// L4 destination port.
    pub dst_port: u16,
    /// TCP flags byte (CWR..FIN), 0 for UDP.
    pub tcp_flags: u8,
    /// Offset of the RoCEv2 BTH (0 = not RoCE): UDP dport == `roce_port` and the UDP datagram can
    /// hold BTH + ICRC.
    pub bth_off: u16,
    /// The first anomaly found, `None` for a clean frame.
    pub anomaly: Option<DropReason>,
}

impl Parsed {
    /// Has a RoCEv2 BTH.
    #[inline]
    pub fn is_roce(&self) -> bool {
        self.bth_off != 0
    }
    /// Is IPv4 or IPv6.
    #[inline]
    pub fn is_ip(&self) -> bool {
        matches!(self.l3, L3Kind::V4 | L3Kind::V6)
    }
    /// Copy the offsets into packet metadata (`l3_off`, `l4_off`, `bth_off`).
    pub fn apply_to_meta(&self, m: &mut Meta) {
        m.l3_off = self.l3_off;
        m.l4_off = self.l4_off;
        m.bth_off = self.bth_off;
    }
    fn flag(&mut self, e: WireError) {
        if self.anomaly.is_none() {
            self.anomaly = Some(e.drop_reason());
        }
    }
}

/// Parse `frame` (see the module documentation for the anomaly rules).
///
/// Always inlined: returned through memory, the `Parsed` fields the next stage reads at once
/// stall on store forwarding (a third of the ingress stage's cycles). The
/// frame nearly every frame is (untagged IPv4 without options or fragments, UDP, every length
/// right, a good checksum) takes [`parse_v4_udp`]'s fixed offsets; anything else the general
/// walk ([`parse_general`]), out of line. Both give the same [`Parsed`] for every frame (a
/// proptest holds them to it).
#[inline(always)]
pub fn parse(frame: &[u8], opts: &ParseOptions) -> Parsed {
    match parse_v4_udp(frame, opts) {
        Some(p) => p,
        None => parse_general(frame, opts),
    }
}

/// Ethernet (14) + IPv4 without options (20) + UDP (8).
const V4_UDP_HEADERS: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;

/// [`parse`] of the common frame at fixed offsets, `None` when `frame` is anything else or has
/// any anomaly: untagged, EtherType IPv4, version 4 and IHL 5, not a fragment, total length
/// within the frame and at least the IPv4 and UDP headers, a good header checksum when
/// `opts.verify_ipv4_checksum`, protocol UDP, a UDP length from 8 to the datagram's end. Every
/// bound is one compare against the frame's length, checked before the bytes are read.
#[inline(always)]
fn parse_v4_udp(frame: &[u8], opts: &ParseOptions) -> Option<Parsed> {
    const L3: usize = ethernet::HEADER_LEN;
    const L4: usize = L3 + ipv4::HEADER_LEN;
    let h: &[u8; V4_UDP_HEADERS] = frame.get(..V4_UDP_HEADERS)?.try_into().ok()?;
    let ip: &[u8; ipv4::HEADER_LEN] = h[L3..L4].try_into().ok()?;
    if u16::from_be_bytes([h[12], h[13]]) != ETHERTYPE_IPV4
        || ip[0] != 0x45
        || ip[9] != PROTO_UDP
        || ipv4::is_fragment_fixed(ip)
    {
        return None;
    }
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    let udp_len = u16::from_be_bytes([h[L4 + 4], h[L4 + 5]]) as usize;
    // total >= 28: the UDP header within the datagram (`Truncated` otherwise); the datagram
    // within the frame (`BadLength`); the UDP length from 8 to the datagram's end (`BadLength`).
    if total < ipv4::HEADER_LEN + udp::HEADER_LEN
        || L3 + total > frame.len()
        || udp_len < udp::HEADER_LEN
        || udp_len > total - ipv4::HEADER_LEN
    {
        return None;
    }
    if opts.verify_ipv4_checksum && checksum::finish(checksum::sum_ipv4_header(ip)) != 0 {
        return None;
    }
    let dst_port = u16::from_be_bytes([h[L4 + 2], h[L4 + 3]]);
    let roce =
        dst_port == opts.roce_port && udp_len >= udp::HEADER_LEN + roce::BTH_LEN + icrc::ICRC_LEN;
    Some(Parsed {
        tags: 0,
        outer_pcp: None,
        ethertype: ETHERTYPE_IPV4,
        l3: L3Kind::V4,
        l3_off: L3 as u16,
        l3_end: (L3 + total) as u32,
        proto: PROTO_UDP,
        dscp: ip[1] >> 2,
        ecn: ip[1] & 3,
        ttl: ip[8],
        l4_off: L4 as u16,
        src_port: u16::from_be_bytes([h[L4], h[L4 + 1]]),
        dst_port,
        tcp_flags: 0,
        bth_off: if roce { V4_UDP_HEADERS as u16 } else { 0 },
        anomaly: None,
    })
}

/// [`parse`] by the general walk: tags, both IP versions, options, fragments, TCP, anomalies.
/// Out of line: the fast path's callers should not carry it inlined.
#[inline(never)]
pub fn parse_general(frame: &[u8], opts: &ParseOptions) -> Parsed {
    let mut p = Parsed::default();
    let l2 = match ethernet::walk_tags(frame, opts.max_vlan_tags) {
        Ok(l2) => l2,
        Err(e) => {
            p.flag(e);
            return p;
        }
    };
    p.tags = l2.tags;
    p.outer_pcp = l2.outer_pcp;
    p.ethertype = l2.ethertype;
    p.l3_off = l2.l3_off as u16;
    let l4 = match l2.ethertype {
        ETHERTYPE_IPV4 => {
            p.l3 = L3Kind::V4;
            parse_v4(frame, l2.l3_off, opts, &mut p)
        }
        ETHERTYPE_IPV6 => {
            p.l3 = L3Kind::V6;
            parse_v6(frame, l2.l3_off, &mut p)
        }
        ETHERTYPE_MAC_CONTROL => {
            p.l3 = L3Kind::MacControl;
            None
        }
        _ => {
            p.l3 = L3Kind::Other;
            p.flag(WireError::UnknownEtherType);
            None
        }
    };
    if let Some((l4_off, ip_end)) = l4 {
        parse_l4(frame, l4_off, ip_end, opts, &mut p);
    }
    p
}

/// What [`parse`] gives for a UDP frame a builder has just written (a packet the switch
/// generates: a pseudo-ACK): untagged Ethernet, then an IPv4 header without options, with a
/// valid checksum and not a fragment (`v4`), or an IPv6 header without extension headers, then
/// UDP. IPv4 takes [`parse`], whose fixed-offset path ([`parse_v4_udp`]) reads such a frame;
/// IPv6 is read at the builder's offsets here instead of walked (the parts that depend on the
/// bytes, L4 and the BTH, are the parser's own code), and a frame whose fixed bytes are not what
/// such a builder writes (EtherType, version, next header, lengths past the frame) takes
/// [`parse`]. Debug builds check the result against [`parse`].
#[inline(always)]
pub fn parse_built_udp(frame: &[u8], v4: bool, opts: &ParseOptions) -> Parsed {
    let built = if v4 {
        None
    } else {
        built_udp_v6_fields(frame, opts)
    };
    let p = built.unwrap_or_else(|| parse(frame, opts));
    debug_assert_eq!(p, parse(frame, opts));
    p
}

#[inline(always)]
fn built_udp_v6_fields(frame: &[u8], opts: &ParseOptions) -> Option<Parsed> {
    let l3 = ethernet::HEADER_LEN;
    let et = be16(frame, 12)?;
    let h = frame.get(l3..)?.first_chunk::<{ ipv6::HEADER_LEN }>()?;
    if et != ETHERTYPE_IPV6 || h[0] >> 4 != 6 || h[6] != PROTO_UDP {
        return None;
    }
    let tc = (h[0] << 4) | (h[1] >> 4);
    let payload = u16::from_be_bytes([h[4], h[5]]) as usize;
    let (l4, end) = (l3 + ipv6::HEADER_LEN, l3 + ipv6::HEADER_LEN + payload);
    if end > frame.len() {
        return None;
    }
    let mut p = Parsed {
        ethertype: et,
        l3: L3Kind::V6,
        l3_off: l3 as u16,
        l3_end: end as u32,
        proto: PROTO_UDP,
        dscp: tc >> 2,
        ecn: tc & 3,
        ttl: h[7],
        ..Parsed::default()
    };
    parse_l4(frame, l4, end, opts, &mut p);
    Some(p)
}

/// Returns (L4 offset, end of datagram) when L4 should be parsed.
#[inline(always)]
fn parse_v4(
    frame: &[u8],
    off: usize,
    opts: &ParseOptions,
    p: &mut Parsed,
) -> Option<(usize, usize)> {
    let l3 = frame.get(off..).unwrap_or(&[]);
    let ip = match ipv4::Ipv4Packet::new_checked(l3) {
        Ok(ip) => ip,
        Err(e) => {
            p.flag(e);
            return None;
        }
    };
    p.proto = ip.protocol();
    p.dscp = ip.dscp();
    p.ecn = ip.ecn();
    p.ttl = ip.ttl();
    if let Err(e) = ip.check_len() {
        p.flag(e);
        return None;
    }
    let end = off + ip.total_len() as usize;
    p.l3_end = end as u32;
    if opts.verify_ipv4_checksum && !ip.verify_checksum() {
        p.flag(WireError::BadChecksum);
    }
    if ip.has_options() {
        p.flag(WireError::Ipv4Options);
    }
    if ip.is_fragment() {
        p.flag(WireError::Ipv4Fragment);
        if ip.is_later_fragment() {
            return None;
        }
    }
    Some((off + ip.header_len(), end))
}

fn parse_v6(frame: &[u8], off: usize, p: &mut Parsed) -> Option<(usize, usize)> {
    let l3 = frame.get(off..).unwrap_or(&[]);
    let ip = match ipv6::Ipv6Packet::new_checked(l3) {
        Ok(ip) => ip,
        Err(e) => {
            p.flag(e);
            return None;
        }
    };
    p.proto = ip.next_header();
    p.dscp = ip.dscp();
    p.ecn = ip.ecn();
    p.ttl = ip.hop_limit();
    if let Err(e) = ip.check_len() {
        p.flag(e);
        return None;
    }
    let end = off + ipv6::HEADER_LEN + ip.payload_len() as usize;
    p.l3_end = end as u32;
    Some((off + ipv6::HEADER_LEN, end))
}

#[inline(always)]
fn parse_l4(frame: &[u8], off: usize, end: usize, opts: &ParseOptions, p: &mut Parsed) {
    let l4 = frame.get(off..end).unwrap_or(&[]);
    match p.proto {
        PROTO_UDP => {
            let (Some(sp), Some(dp), Some(len)) = (be16(l4, 0), be16(l4, 2), be16(l4, 4)) else {
                p.flag(WireError::Truncated);
                return;
            };
            if l4.len() < udp::HEADER_LEN {
                p.flag(WireError::Truncated);
                return;
            }
            p.l4_off = off as u16;
            p.src_port = sp;
            p.dst_port = dp;
            let len = len as usize;
            if len < udp::HEADER_LEN || len > l4.len() {
                p.flag(WireError::BadLength);
                return;
            }
            if dp == opts.roce_port && len >= udp::HEADER_LEN + roce::BTH_LEN + icrc::ICRC_LEN {
                p.bth_off = (off + udp::HEADER_LEN) as u16;
            }
        }
        PROTO_TCP => {
            if l4.len() < 20 {
                p.flag(WireError::Truncated);
                return;
            }
            p.l4_off = off as u16;
            p.src_port = be16(l4, 0).unwrap_or(0);
            p.dst_port = be16(l4, 2).unwrap_or(0);
            p.tcp_flags = l4.get(13).copied().unwrap_or(0);
            let doff = (l4.get(12).copied().unwrap_or(0) >> 4) as usize * 4;
            if doff < 20 || doff > l4.len() {
                p.flag(WireError::BadLength);
            }
        }
        _ => {}
    }
}

/// fmix32 from MurmurHash3: a bijective finalizer that spreads CRC bits.
#[inline]
fn fmix32(mut h: u32) -> u32 {
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^= h >> 16;
    h
}

/// A direction-independent flow hash (DESIGN.md section 3, flow affinity): the same value for
/// A->B and B->A. Key: the unordered IP address pair, the protocol and, for TCP/UDP other than
/// RoCEv2, the unordered port pair. RoCEv2 packets hash on the address pair and protocol only
/// (a QP's data and its ACKs/CNPs use different UDP source ports). Non-IP frames hash the
/// unordered MAC pair and the EtherType. Deterministic across runs and machines (no random
/// seeds). Never 0 (0 means "not computed" in [`Meta`]).
///
/// The key is read as a few machine words and mixed by folded 64x64->128-bit multiplies (the
/// wyhash/ahash fallback construction) and MurmurHash3's fmix32: about 2 ns for IPv4, where a
/// byte-wise CRC-32 takes about 20.
pub fn flow_hash_symmetric(frame: &[u8], p: &Parsed) -> u32 {
    let l3 = p.l3_off as usize;
    let ports = if p.l4_off != 0 && p.bth_off == 0 && (p.proto == PROTO_TCP || p.proto == PROTO_UDP)
    {
        let (lo, hi) = if p.src_port <= p.dst_port {
            (p.src_port, p.dst_port)
        } else {
            (p.dst_port, p.src_port)
        };
        (lo as u64) << 16 | hi as u64
    } else {
        0
    };
    let tail = (p.proto as u64) << 32 | ports;
    let v4 = match p.l3 {
        L3Kind::V4 => be32(frame, l3 + 12).zip(be32(frame, l3 + 16)),
        _ => None,
    };
    let v6 = match p.l3 {
        L3Kind::V6 => be128(frame, l3 + 8).zip(be128(frame, l3 + 24)),
        _ => None,
    };
    let h = if let Some((a, b)) = v4 {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        fold_mul(fold_mul(HASH_SEED ^ 4, (lo as u64) << 32 | hi as u64), tail)
    } else if let Some((a, b)) = v6 {
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let mut h = HASH_SEED ^ 6;
        for w in [
            (lo >> 64) as u64,
            lo as u64,
            (hi >> 64) as u64,
            hi as u64,
            tail,
        ] {
            h = fold_mul(h, w);
        }
        h
    } else {
        let a = mac48(frame, 0);
        let b = mac48(frame, 6);
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let h = fold_mul(HASH_SEED, lo);
        fold_mul(fold_mul(h, hi), p.ethertype as u64)
    };
    match fmix32((h ^ (h >> 32)) as u32) {
        0 => 1,
        x => x,
    }
}

/// The flow hash's start value (the digits of pi, as in ahash's fallback).
const HASH_SEED: u64 = 0x243f_6a88_85a3_08d3;

/// One mixing step: multiply (state ^ word) by an odd constant into 128 bits, fold the halves.
#[inline]
fn fold_mul(h: u64, w: u64) -> u64 {
    let m = ((h ^ w) as u128).wrapping_mul(0x5851_f42d_4c95_7f2d);
    (m as u64) ^ ((m >> 64) as u64)
}

#[inline]
fn be128(b: &[u8], off: usize) -> Option<u128> {
    let s: [u8; 16] = b.get(off..off.checked_add(16)?)?.try_into().ok()?;
    Some(u128::from_be_bytes(s))
}

/// The 48-bit MAC at `off` (missing bytes read as 0: the hash of a runt frame is still defined).
#[inline]
fn mac48(b: &[u8], off: usize) -> u64 {
    let mut m = [0u8; 8];
    for (i, x) in b.iter().skip(off).take(6).enumerate() {
        m[2 + i] = *x;
    }
    u64::from_be_bytes(m)
}

/// What [`ipv4_udp`] reads of an untagged IPv4 UDP frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Udp {
    /// IPv4 source.
    pub src: u32,
    /// IPv4 destination.
    pub dst: u32,
    /// UDP destination port.
    pub dst_port: u16,
    /// Offset of the UDP payload in the frame.
    pub payload: usize,
}

/// The addresses, UDP destination port and payload offset of an untagged IPv4 UDP frame (what
/// the modeled hosts and the RFC 2544 tester receive). `None` for anything else: another
/// EtherType, IP version or protocol, an IHL below 5, or a frame shorter than its IPv4 header
/// and the UDP header after it. Lengths are checked before every read; the IPv4 checksum and
/// length fields are not (the full parser, [`parse`], checks them).
pub fn ipv4_udp(frame: &[u8]) -> Option<Ipv4Udp> {
    let ip = frame.get(ethernet::HEADER_LEN..)?;
    if be16(frame, 12)? != ETHERTYPE_IPV4
        || ip.len() < ipv4::HEADER_LEN
        || ip[0] >> 4 != 4
        || ip[9] != PROTO_UDP
    {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ihl < ipv4::HEADER_LEN {
        return None;
    }
    let udp_off = ethernet::HEADER_LEN + ihl;
    frame.get(udp_off..udp_off + udp::HEADER_LEN)?;
    Some(Ipv4Udp {
        src: be32(ip, 12)?,
        dst: be32(ip, 16)?,
        dst_port: be16(frame, udp_off + 2)?,
        payload: udp_off + udp::HEADER_LEN,
    })
}

/// The IP source and destination of the IPv4 or IPv6 header at `l3_off` as `u128`s (IPv4 as
/// IPv4-mapped IPv6, `::ffff:a.b.c.d`): one key type for flow tables of both families. Inlined:
/// called across crates, the pair came back through memory and was read with a
/// store-forwarding stall (a fifth of NSF's egress samples, perf/dpdk-reflex.toml).
#[inline(always)]
pub fn ip_pair_u128(frame: &[u8], l3_off: usize) -> Option<(u128, u128)> {
    match *frame.get(l3_off)? >> 4 {
        4 => {
            let b = frame.get(l3_off + 12..l3_off + 20)?;
            let s = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
            let d = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
            Some((0xffff_0000_0000 | s as u128, 0xffff_0000_0000 | d as u128))
        }
        6 => {
            let b = frame.get(l3_off + 8..l3_off + 40)?;
            let s: [u8; 16] = b[..16].try_into().ok()?;
            let d: [u8; 16] = b[16..].try_into().ok()?;
            Some((u128::from_be_bytes(s), u128::from_be_bytes(d)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ethernet::MacAddr;
    use crate::wire::roce;
    use crate::wire::testutil::hex;
    use proptest::prelude::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn opts() -> ParseOptions {
        ParseOptions::default()
    }

    #[test]
    fn clean_ipv4_udp_takes_the_fast_path() {
        let f = cnp_v4();
        assert_eq!(parse_v4_udp(&f, &opts()), Some(parse_general(&f, &opts())));
        // Padding after the datagram is not an anomaly.
        let mut padded = f.clone();
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(
            parse_v4_udp(&padded, &opts()),
            Some(parse_general(&padded, &opts()))
        );
        // Anything else is the general walk's.
        assert_eq!(parse_v4_udp(&cnp_v6(), &opts()), None);
        assert_eq!(parse_v4_udp(&hex(SYNACK), &opts()), None);
        assert_eq!(parse_v4_udp(&with_options_v4(&f), &opts()), None);
        assert_eq!(parse_v4_udp(&f[..f.len() - 1], &opts()), None);
    }

    fn cnp_v4() -> Vec<u8> {
        let mut b = [0u8; 128];
        let n = roce::build_cnp_v4(
            &mut b,
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            [10, 0, 18, 1],
            [10, 0, 17, 1],
            0x12b7,
            0x118,
            48,
        )
        .unwrap();
        b[..n].to_vec()
    }

    fn cnp_v6() -> Vec<u8> {
        let mut b = [0u8; 128];
        let s: Ipv6Addr = "fd00::1".parse().unwrap();
        let d: Ipv6Addr = "fd00::2".parse().unwrap();
        let n = roce::build_cnp_v6(
            &mut b,
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            s,
            d,
            7,
            9,
            48,
        )
        .unwrap();
        b[..n].to_vec()
    }

    // scapy SYN-ACK: Ether()/IP(src="10.1.1.1",dst="10.2.2.2",id=0,flags="DF",ttl=64)/
    // TCP(sport=80,dport=40000,seq=0x11223344,ack=0x55667788,flags="SA",window=65535,
    // options=[("MSS",1460)])
    const SYNACK: &str = "02000000000202000000000108004500002c00004000400623c70a0101010a02020200509c4011223344556677886012ffffd32b0000020405b4";

    #[test]
    fn roce_v4() {
        let f = cnp_v4();
        let p = parse(&f, &opts());
        assert_eq!(p.anomaly, None);
        assert_eq!(p.l3, L3Kind::V4);
        assert_eq!((p.l3_off, p.l4_off, p.bth_off, p.l3_end), (14, 34, 42, 74));
        assert_eq!((p.proto, p.dscp, p.ecn, p.ttl), (17, 48, 2, 64));
        assert_eq!((p.src_port, p.dst_port), (0x12b7, 4791));
        assert!(p.is_roce() && p.is_ip());
        let mut m = Meta::default();
        p.apply_to_meta(&mut m);
        assert_eq!((m.l3_off, m.l4_off, m.bth_off), (14, 34, 42));
        // Ethernet padding is not an anomaly.
        let mut g = f.clone();
        g.extend_from_slice(&[0; 10]);
        assert_eq!(parse(&g, &opts()), p);
        // Other port: not RoCE.
        let o = ParseOptions {
            roce_port: 4792,
            ..opts()
        };
        assert_eq!(parse(&f, &o).bth_off, 0);
    }

    #[test]
    fn roce_v6_tagged() {
        let f = cnp_v6();
        let mut g = f[..12].to_vec();
        g.extend_from_slice(&hex("88a8 a064 8100 6005"));
        g.extend_from_slice(&f[12..]);
        let p = parse(&g, &opts());
        assert_eq!(p.anomaly, None);
        assert_eq!((p.tags, p.outer_pcp, p.ethertype), (2, Some(5), 0x86dd));
        assert_eq!(
            (p.l3, p.l3_off, p.l4_off, p.bth_off),
            (L3Kind::V6, 22, 62, 70)
        );
        assert_eq!((p.proto, p.dscp, p.ttl, p.src_port), (17, 48, 64, 7));
        let o = ParseOptions {
            max_vlan_tags: 1,
            ..opts()
        };
        let q = parse(&g, &o);
        assert_eq!(q.anomaly, Some(DropReason::VlanStack));
        assert_eq!(q.l3, L3Kind::None);
    }

    #[test]
    fn tcp() {
        let f = hex(SYNACK);
        let p = parse(&f, &opts());
        assert_eq!(p.anomaly, None);
        assert_eq!(
            (p.proto, p.l4_off, p.src_port, p.dst_port),
            (6, 34, 80, 40000)
        );
        assert_eq!(p.tcp_flags, 0x12);
        assert_eq!(p.bth_off, 0);
        let mut g = f.clone();
        g[14 + 20 + 12] = 0x40; // data offset 4
        assert_eq!(parse(&g, &opts()).anomaly, Some(DropReason::BadLength));
        g[14 + 20 + 12] = 0x70; // data offset 7 > 24 bytes
        assert_eq!(parse(&g, &opts()).anomaly, Some(DropReason::BadLength));
    }

    #[test]
    fn anomalies() {
        let f = cnp_v4();
        let a = |g: &[u8]| parse(g, &opts()).anomaly;
        assert_eq!(a(&f[..13]), Some(DropReason::Truncated));
        assert_eq!(a(&f[..14]), Some(DropReason::Truncated));
        assert_eq!(a(&f[..33]), Some(DropReason::Truncated));
        assert_eq!(a(&f[..73]), Some(DropReason::BadLength));
        let mut g = f.clone();
        g[12] = 0x08;
        g[13] = 0x06;
        assert_eq!(a(&g), Some(DropReason::UnknownEtherType));
        assert_eq!(parse(&g, &opts()).l3, L3Kind::Other);
        assert_eq!(parse(&g, &opts()).ethertype, 0x0806);
        let mut g = f.clone();
        g[14] = 0x65;
        assert_eq!(a(&g), Some(DropReason::BadIpHeader));
        g[14] = 0x44;
        assert_eq!(a(&g), Some(DropReason::BadIpHeader));
        let mut g = f.clone();
        g[12] = 0x86;
        g[13] = 0xdd;
        assert_eq!(a(&g), Some(DropReason::BadIpHeader));
        // Total length < IHL*4.
        let mut g = f.clone();
        g[17] = 19;
        assert_eq!(a(&g), Some(DropReason::BadLength));
        // Checksum.
        let mut g = f.clone();
        g[14 + 8] = 1; // TTL without checksum update
        assert_eq!(a(&g), Some(DropReason::BadIpChecksum));
        let o = ParseOptions {
            verify_ipv4_checksum: false,
            ..opts()
        };
        assert_eq!(parse(&g, &o).anomaly, None);
        // UDP length.
        let mut g = f.clone();
        g[14 + 20 + 5] = 7;
        let p = parse(&g, &opts());
        assert_eq!(p.anomaly, Some(DropReason::BadLength));
        assert_eq!((p.l4_off, p.bth_off), (34, 0));
        g[14 + 20 + 5] = 41;
        assert_eq!(a(&g), Some(DropReason::BadLength));
        // UDP length too short for BTH + ICRC: not RoCE but no anomaly.
        let mut g = f.clone();
        g[14 + 20 + 5] = 23;
        let p = parse(&g, &opts());
        assert_eq!((p.anomaly, p.bth_off), (None, 0));
        // IPv6 payload length too long.
        let mut g = cnp_v6();
        g[14 + 5] = 41;
        assert_eq!(a(&g), Some(DropReason::BadLength));
        assert_eq!(a(&g[..14 + 39]), Some(DropReason::Truncated));
    }

    fn with_options_v4(f: &[u8]) -> Vec<u8> {
        // Insert a 4-byte NOP option into the IPv4 header and fix lengths/checksum.
        let mut g = f[..34].to_vec();
        g.extend_from_slice(&[1, 1, 1, 0]);
        g.extend_from_slice(&f[34..]);
        g[14] = 0x46;
        let tl = u16::from_be_bytes([g[16], g[17]]) + 4;
        g[16..18].copy_from_slice(&tl.to_be_bytes());
        let mut ip = ipv4::Ipv4Packet::new_checked(&mut g[14..]).unwrap();
        ip.fill_checksum();
        g
    }

    #[test]
    fn options_and_fragments() {
        let g = with_options_v4(&cnp_v4());
        let p = parse(&g, &opts());
        assert_eq!(p.anomaly, Some(DropReason::Ipv4Options));
        assert_eq!((p.l4_off, p.bth_off), (38, 46));
        // First fragment: L4 parsed.
        let mut f = cnp_v4();
        f[14 + 6] |= 0x20;
        ipv4::Ipv4Packet::new_checked(&mut f[14..])
            .unwrap()
            .fill_checksum();
        let p = parse(&f, &opts());
        assert_eq!(p.anomaly, Some(DropReason::Ipv4Fragment));
        assert_eq!(p.l4_off, 34);
        // Later fragment: not parsed past L3.
        let mut f = cnp_v4();
        f[14 + 6] = 0x00;
        f[14 + 7] = 0x03;
        ipv4::Ipv4Packet::new_checked(&mut f[14..])
            .unwrap()
            .fill_checksum();
        let p = parse(&f, &opts());
        assert_eq!(p.anomaly, Some(DropReason::Ipv4Fragment));
        assert_eq!((p.l4_off, p.bth_off, p.src_port, p.proto), (0, 0, 0, 17));
    }

    #[test]
    fn mac_control() {
        // scapy: Ether(src="02:00:00:00:00:01",dst="01:80:c2:00:00:01")/MACControlPause(pause_time=0xabcd)
        let f = hex("0180c200000102000000000188080001abcd000000000000000000000000000000000000000000000000000000000000000000000000000000000000");
        let p = parse(&f, &opts());
        assert_eq!((p.l3, p.anomaly, p.l3_off), (L3Kind::MacControl, None, 14));
    }

    #[test]
    fn flow_hash_symmetry_and_stability() {
        let f = cnp_v4();
        let p = parse(&f, &opts());
        // Reverse direction with a different UDP source port: same hash (RoCE ignores ports).
        let mut b = [0u8; 128];
        let n = roce::build_cnp_v4(
            &mut b,
            [2, 0, 0, 0, 0, 2],
            [2, 0, 0, 0, 0, 1],
            [10, 0, 17, 1],
            [10, 0, 18, 1],
            999,
            5,
            0,
        )
        .unwrap();
        let q = parse(&b[..n], &opts());
        assert_eq!(
            flow_hash_symmetric(&f, &p),
            flow_hash_symmetric(&b[..n], &q)
        );
        // A different pair differs.
        let n2 = roce::build_cnp_v4(
            &mut b,
            [2, 0, 0, 0, 0, 2],
            [2, 0, 0, 0, 0, 1],
            [10, 0, 17, 2],
            [10, 0, 18, 1],
            999,
            5,
            0,
        )
        .unwrap();
        let q2 = parse(&b[..n2], &opts());
        assert_ne!(
            flow_hash_symmetric(&f, &p),
            flow_hash_symmetric(&b[..n2], &q2)
        );
        // Deterministic across runs: pinned value.
        assert_eq!(
            flow_hash_symmetric(&f, &p),
            flow_hash_symmetric(&cnp_v4(), &p)
        );
        let pinned = flow_hash_symmetric(&f, &p);
        assert_eq!(pinned, PINNED_CNP_HASH, "flow hash changed: {pinned:#x}");
        // TCP uses ports.
        let t = hex(SYNACK);
        let tp = parse(&t, &opts());
        let mut r = t.clone();
        r[14 + 20..14 + 22].copy_from_slice(&81u16.to_be_bytes());
        let rp = parse(&r, &opts());
        assert_ne!(flow_hash_symmetric(&t, &tp), flow_hash_symmetric(&r, &rp));
        // Non-IP frames.
        let mut e = vec![0u8; 60];
        e[..6].copy_from_slice(&[1; 6]);
        e[6..12].copy_from_slice(&[2; 6]);
        e[12] = 0x88;
        e[13] = 0x08;
        let ep = parse(&e, &opts());
        let mut e2 = e.clone();
        e2[..6].copy_from_slice(&[2; 6]);
        e2[6..12].copy_from_slice(&[1; 6]);
        assert_eq!(
            flow_hash_symmetric(&e, &ep),
            flow_hash_symmetric(&e2, &parse(&e2, &opts()))
        );
        assert_ne!(flow_hash_symmetric(&[], &Parsed::default()), 0);
    }

    /// The flow hash of `cnp_v4()`; pinned so an accidental change of the hash (which would
    /// reshuffle flows across lcores between versions) is noticed.
    const PINNED_CNP_HASH: u32 = 0xaf4e_b83d;

    #[test]
    fn flow_hash_spreads_address_pairs() {
        // 4096 RoCE pairs 10.0.x.y <-> 10.1.x.y into 16 buckets (a worker or ECMP choice): every
        // bucket within 25% of the mean (256). A weak mix of the pair would pile them up.
        let mut buckets = [0u32; 16];
        let mut b = [0u8; 128];
        for i in 0..4096u32 {
            let [_, _, x, y] = i.to_be_bytes();
            let n = roce::build_cnp_v4(
                &mut b,
                [2, 0, 0, 0, 0, 2],
                [2, 0, 0, 0, 0, 1],
                [10, 0, x, y],
                [10, 1, x, y],
                1,
                5,
                0,
            )
            .unwrap();
            let h = flow_hash_symmetric(&b[..n], &parse(&b[..n], &opts()));
            buckets[(h % 16) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&c| (192..=320).contains(&c)),
            "{buckets:?}"
        );
    }

    fn swap_v4(f: &[u8]) -> Vec<u8> {
        let mut g = f.to_vec();
        g[26..30].copy_from_slice(&f[30..34]);
        g[30..34].copy_from_slice(&f[26..30]);
        g[34..36].copy_from_slice(&f[36..38]);
        g[36..38].copy_from_slice(&f[34..36]);
        g
    }

    proptest! {
        #[test]
        fn never_panics_on_random_bytes(b in proptest::collection::vec(any::<u8>(), 0..200),
                                        tags in 0u8..4, v in any::<bool>()) {
            let o = ParseOptions { max_vlan_tags: tags, verify_ipv4_checksum: v, roce_port: 4791 };
            let p = parse(&b, &o);
            let _ = flow_hash_symmetric(&b, &p);
            prop_assert!(p.l4_off as usize <= b.len());
            prop_assert!(p.bth_off as usize + 12 <= b.len() || p.bth_off == 0);
        }

        #[test]
        fn never_panics_on_mutations(which in 0usize..4, muts in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6), cut in any::<usize>()) {
            let base = match which {
                0 => cnp_v4(),
                1 => cnp_v6(),
                2 => hex(SYNACK),
                _ => with_options_v4(&cnp_v4()),
            };
            let mut f = base.clone();
            for (i, x) in muts {
                let i = i % f.len();
                f[i] = x;
            }
            let n = cut % (f.len() + 1);
            let f = &f[..n];
            let p = parse(f, &opts());
            let _ = flow_hash_symmetric(f, &p);
            if p.bth_off != 0 {
                prop_assert!(p.l3_end as usize <= f.len());
                let _ = icrc::verify(f, p.l3_off as usize);
            }
        }

        /// The fixed-offset path ([`parse_v4_udp`]) gives what the general walk gives, or
        /// declines: frames of every kind, mutated in their headers (the checksum refilled or
        /// not, so lengths, flags and ports reach the fast path with a good one), cut or padded.
        #[test]
        fn fast_path_is_the_general_walk(which in 0usize..5,
                                         muts in proptest::collection::vec((0usize..64, any::<u8>()), 0..5),
                                         refill in any::<bool>(), len_change in -40isize..40,
                                         tags in 0u8..3, verify in any::<bool>(), roce_port in prop_oneof![Just(4791u16), any::<u16>()]) {
            let mut f = match which {
                0 => cnp_v4(),
                1 => cnp_v6(),
                2 => hex(SYNACK),
                3 => with_options_v4(&cnp_v4()),
                // Plain UDP (not RoCE: port 53).
                _ => { let mut f = cnp_v4(); f[36] = 0; f[37] = 53; f }
            };
            for (i, x) in muts {
                let i = i % f.len();
                f[i] = x;
            }
            if refill && f.len() >= 34 {
                f[24] = 0;
                f[25] = 0;
                let c = checksum::checksum(&f[14..34]);
                f[24..26].copy_from_slice(&c.to_be_bytes());
            }
            let n = (f.len() as isize + len_change).max(0) as usize;
            f.resize(n, 0);
            let o = ParseOptions { max_vlan_tags: tags, verify_ipv4_checksum: verify, roce_port };
            let general = parse_general(&f, &o);
            if let Some(fast) = parse_v4_udp(&f, &o) {
                prop_assert_eq!(fast, general);
            }
            prop_assert_eq!(parse(&f, &o), general);
        }

        #[test]
        fn build_parse_roundtrip(src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), sport in any::<u16>(),
                                 qp in any::<u32>(), dscp in 0u8..64, s6 in any::<u128>(), d6 in any::<u128>()) {
            let mut b = [0u8; 128];
            let n = roce::build_cnp_v4(&mut b, MacAddr([2; 6]), MacAddr([4; 6]), src, dst, sport, qp, dscp).unwrap();
            let p = parse(&b[..n], &opts());
            prop_assert_eq!(p.anomaly, None);
            prop_assert_eq!((p.bth_off, p.src_port, p.dst_port, p.dscp, p.ttl), (42, sport, 4791, dscp, 64));
            prop_assert_eq!(roce::Bth::new_checked(&b[42..n]).unwrap().dest_qp(), qp & 0xffffff);
            prop_assert_eq!(icrc::verify(&b[..n], 14), Ok(true));
            // Symmetric hash: swap addresses (RoCE: ports not part of the key; the reverse
            // direction also goes to 4791).
            let mut r = b[..n].to_vec();
            r[26..30].copy_from_slice(&b[30..34]);
            r[30..34].copy_from_slice(&b[26..30]);
            prop_assert_eq!(flow_hash_symmetric(&b[..n], &p), flow_hash_symmetric(&r, &parse(&r, &opts())));
            let n6 = roce::build_cnp_v6(&mut b, MacAddr([2; 6]), MacAddr([4; 6]), s6, d6, sport, qp, dscp).unwrap();
            let p6 = parse(&b[..n6], &opts());
            prop_assert_eq!(p6.anomaly, None);
            prop_assert_eq!((p6.l3, p6.bth_off, p6.dscp), (L3Kind::V6, 62, dscp));
            let mut r6 = b[..n6].to_vec();
            r6[22..38].copy_from_slice(&b[38..54]);
            r6[38..54].copy_from_slice(&b[22..38]);
            prop_assert_eq!(flow_hash_symmetric(&b[..n6], &p6), flow_hash_symmetric(&r6, &parse(&r6, &opts())));
            let _ = Ipv4Addr::from(src);
        }

        #[test]
        fn tcp_hash_symmetric(src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), sp in any::<u16>(), dp in any::<u16>()) {
            let mut f = hex(SYNACK);
            f[26..30].copy_from_slice(&src);
            f[30..34].copy_from_slice(&dst);
            f[34..36].copy_from_slice(&sp.to_be_bytes());
            f[36..38].copy_from_slice(&dp.to_be_bytes());
            let r = swap_v4(&f);
            let o = ParseOptions { verify_ipv4_checksum: false, ..opts() };
            prop_assert_eq!(flow_hash_symmetric(&f, &parse(&f, &o)), flow_hash_symmetric(&r, &parse(&r, &o)));
        }
    }

    /// Every single bit of a built frame's Ethernet, IP and UDP headers flipped (IPv4's checksum
    /// recomputed), IPv4 and IPv6 frames: the fixed-offset IPv6 read answers what the parser
    /// does, or leaves the frame to it, and [`parse_built_udp`] asked as IPv4 or IPv6 answers
    /// what the parser does.
    #[test]
    fn built_udp_fields_every_header_bit() {
        for v6 in [false, true] {
            let base = if v6 { cnp_v6() } else { cnp_v4() };
            for i in 12..base.len().min(62) {
                for bit in 0..8 {
                    let mut f = base.clone();
                    f[i] ^= 1 << bit;
                    if !v6 {
                        let ihl = ((f[14] & 0x0f) as usize * 4).clamp(20, f.len() - 14);
                        f[24] = 0;
                        f[25] = 0;
                        let c = crate::wire::checksum::checksum(&f[14..14 + ihl]);
                        f[24..26].copy_from_slice(&c.to_be_bytes());
                    }
                    let want = parse(&f, &opts());
                    if let Some(p) = built_udp_v6_fields(&f, &opts()) {
                        assert_eq!(p, want, "byte {i} bit {bit}, v6 {v6}");
                    }
                    for claim_v4 in [false, true] {
                        assert_eq!(parse_built_udp(&f, claim_v4, &opts()), want);
                    }
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// [`parse_built_udp`]'s fixed-offset IPv6 read against the parser, on built UDP frames
        /// (IPv4 and IPv6 CNPs) with header bits flipped, bytes replaced and frames cut: when
        /// the fixed read answers, it answers what the parser does, and `parse_built_udp` is
        /// asked for IPv4 on IPv6 frames and the reverse too (the IPv4 checksum is recomputed
        /// after the changes: a builder's frame has a valid one).
        #[test]
        fn built_udp_fields_match_the_parser(
            v6 in any::<bool>(),
            claim_v4 in any::<bool>(),
            flips in proptest::collection::vec((0usize..62, 0u8..8), 0..3),
            edits in proptest::collection::vec((0usize..70, any::<u8>()), 0..2),
            cut in 0usize..8,
            port in prop_oneof![Just(4791u16), any::<u16>()],
            verify in any::<bool>(),
        ) {
            let mut f = if v6 { cnp_v6() } else { cnp_v4() };
            for (i, bit) in flips {
                f[i] ^= 1 << bit;
            }
            for (i, x) in edits {
                if i < f.len() {
                    f[i] = x;
                }
            }
            let n = f.len() - cut.min(f.len());
            f.truncate(n);
            if !v6 && f.len() >= 34 {
                let ihl = ((f[14] & 0x0f) as usize * 4).clamp(20, f.len() - 14);
                f[24] = 0;
                f[25] = 0;
                let c = crate::wire::checksum::checksum(&f[14..14 + ihl]);
                f[24..26].copy_from_slice(&c.to_be_bytes());
            }
            let o = ParseOptions { max_vlan_tags: 2, verify_ipv4_checksum: verify, roce_port: port };
            let want = parse(&f, &o);
            if let Some(p) = built_udp_v6_fields(&f, &o) {
                prop_assert_eq!(p, want);
            }
            prop_assert_eq!(parse_built_udp(&f, claim_v4, &o), want);
        }
    }
}
