//! In-band Network Telemetry: P4.org INT v2.1 (2020), INT-MD mode ("eMbed data"), carried over
//! UDP (spec section 4.6, "INT over UDP" with the shim of section 5.6.2), for MLCC's per-hop
//! queue information and Reflex's timestamps (DESIGN.md section 5).
//!
//! # Byte layout (version 1 of our use; copy into docs/wire-formats.md)
//!
//! ```text
//! Ethernet | IPv4/IPv6 | UDP (dst port = INT port, length += INT bytes) | INT shim (4)
//!          | INT-MD header (12) | hop metadata stack (newest hop first) | original UDP payload
//!
//! INT shim (4 bytes, INT v2.1 section 5.6.2):
//!   byte 0: Type (4 bits, 1 = INT-MD) | NPT (2 bits, 1 = original UDP destination port in
//!           bytes 2-3) | reserved (2 bits, 0)
//!   byte 1: Length: shim + INT-MD header + metadata stack, in 4-byte words (4 + 4 x hops x HopML)
//!   bytes 2-3: original UDP destination port (e.g. 4791)
//!
//! INT-MD metadata header (12 bytes, INT v2.1 section 5.7):
//!   bits 0-3 Ver (= 2) | bit 4 D (discard) | bit 5 E (max hop count exceeded) | bit 6 M (MTU
//!   exceeded) | bits 7-18 reserved | bits 19-23 HopML (per-hop metadata length, 4-byte words)
//!   | bits 24-31 RemainingHopCount
//!   bytes 4-5: instruction bitmap (bit 0 = MSB = 0x8000)
//!   bytes 6-7: Domain Specific ID | bytes 8-9: DS Instruction | bytes 10-11: DS Flags
//!
//! Per-hop metadata, in instruction-bit order (INT v2.1 section 5.8); supported bits:
//!   bit 0 (0x8000) node id (4) | bit 1 (0x4000) level-1 ingress if id (2) + egress if id (2)
//!   | bit 2 (0x2000) hop latency (4) | bit 3 (0x1000) queue id (1) + queue occupancy (3)
//!   | bit 4 (0x0800) ingress timestamp (8) | bit 5 (0x0400) egress timestamp (8)
//! ```
//!
//! The source ([`insert_int_md`]) adds shim + header with an empty stack; every INT hop
//! ([`push_hop_metadata`]) pushes its metadata at the top of the stack (right after the INT-MD
//! header) and decrements RemainingHopCount; the sink ([`strip_int`]) removes everything and
//! restores the UDP destination port, UDP length, IP total/payload length and the IPv4 header
//! checksum bit-exactly (RFC 1624 incremental updates, undone in reverse), so the RoCEv2 ICRC of
//! the original packet verifies again. While INT is present the ICRC does not verify (the UDP
//! port and lengths it covers changed); nothing on the path checks it. A non-zero UDP checksum is
//! recomputed after each change (RoCEv2 sends 0, which is kept).
//!
//! To insert after UDP, the L2-L4 headers are moved forward into the headroom: prepend N bytes,
//! then `copy_within` the headers to the new front (no allocation).

use super::checksum;
use super::ipv4::{self, Ipv4Packet, PROTO_UDP};
use super::ipv6::{self, Ipv6Packet};
use super::udp;
use super::{be16, be32, put16, WireError};
use crate::packet::PacketBuf;

/// Shim length.
pub const SHIM_LEN: usize = 4;
/// INT-MD header length.
pub const MD_HEADER_LEN: usize = 12;
/// Shim type INT-MD.
pub const TYPE_INT_MD: u8 = 1;
/// NPT value: the shim carries the original UDP destination port.
pub const NPT_UDP_PORT: u8 = 1;
/// INT-MD header version of INT v2.1.
pub const VERSION: u8 = 2;
/// The INT UDP port (INT over UDP, destination port) longhaul's configs and modeled hosts use
/// unless told otherwise; INT v2.1 leaves the port to the operator.
pub const DEFAULT_INT_PORT: u16 = 5000;

/// Instruction bit 0: node id.
pub const INS_NODE_ID: u16 = 0x8000;
/// Instruction bit 1: level-1 ingress + egress interface ids.
pub const INS_L1_IF_IDS: u16 = 0x4000;
/// Instruction bit 2: hop latency.
pub const INS_HOP_LATENCY: u16 = 0x2000;
/// Instruction bit 3: queue id + queue occupancy.
pub const INS_QUEUE: u16 = 0x1000;
/// Instruction bit 4: ingress timestamp (8 bytes).
pub const INS_INGRESS_TS: u16 = 0x0800;
/// Instruction bit 5: egress timestamp (8 bytes).
pub const INS_EGRESS_TS: u16 = 0x0400;
/// All supported instruction bits.
pub const INS_SUPPORTED: u16 =
    INS_NODE_ID | INS_L1_IF_IDS | INS_HOP_LATENCY | INS_QUEUE | INS_INGRESS_TS | INS_EGRESS_TS;

/// Per-hop metadata length in 4-byte words for `instructions`, or [`WireError::Unsupported`]
/// when it has bits other than [`INS_SUPPORTED`].
#[inline]
pub const fn hop_words(instructions: u16) -> Result<u8, WireError> {
    if instructions & !INS_SUPPORTED != 0 {
        return Err(WireError::Unsupported);
    }
    let mut w = 0u8;
    if instructions & INS_NODE_ID != 0 {
        w += 1;
    }
    if instructions & INS_L1_IF_IDS != 0 {
        w += 1;
    }
    if instructions & INS_HOP_LATENCY != 0 {
        w += 1;
    }
    if instructions & INS_QUEUE != 0 {
        w += 1;
    }
    if instructions & INS_INGRESS_TS != 0 {
        w += 2;
    }
    if instructions & INS_EGRESS_TS != 0 {
        w += 2;
    }
    Ok(w)
}

/// A view of the 4-byte INT shim.
#[derive(Debug, Clone)]
pub struct IntShim<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> IntShim<T> {
    /// Wrap `buf`; [`WireError::Truncated`] when < 4 bytes.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        if buf.as_ref().len() < SHIM_LEN {
            return Err(WireError::Truncated);
        }
        Ok(IntShim { buf })
    }
    fn byte(&self, i: usize) -> u8 {
        self.buf.as_ref().get(i).copied().unwrap_or(0)
    }
    /// Type (1 = INT-MD).
    pub fn int_type(&self) -> u8 {
        self.byte(0) >> 4
    }
    /// Next-protocol type (1 = original UDP port in bytes 2-3).
    pub fn npt(&self) -> u8 {
        (self.byte(0) >> 2) & 3
    }
    /// Length of shim + INT-MD header + stack, in 4-byte words.
    pub fn length_words(&self) -> u8 {
        self.byte(1)
    }
    /// Length in bytes.
    pub fn length_bytes(&self) -> usize {
        self.length_words() as usize * 4
    }
    /// Original UDP destination port (NPT = 1).
    pub fn orig_dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), 2).unwrap_or(0)
    }
}

/// A view of the 12-byte INT-MD metadata header.
#[derive(Debug, Clone)]
pub struct IntMdHeader<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> IntMdHeader<T> {
    /// Wrap `buf`; [`WireError::Truncated`] when < 12 bytes.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        if buf.as_ref().len() < MD_HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(IntMdHeader { buf })
    }
    fn w0(&self) -> u32 {
        be32(self.buf.as_ref(), 0).unwrap_or(0)
    }
    /// Version (2).
    pub fn version(&self) -> u8 {
        (self.w0() >> 28) as u8
    }
    /// D: discard.
    pub fn discard(&self) -> bool {
        self.w0() & (1 << 27) != 0
    }
    /// E: max hop count exceeded.
    pub fn hop_count_exceeded(&self) -> bool {
        self.w0() & (1 << 26) != 0
    }
    /// M: MTU exceeded.
    pub fn mtu_exceeded(&self) -> bool {
        self.w0() & (1 << 25) != 0
    }
    /// Per-hop metadata length in 4-byte words.
    pub fn hop_ml(&self) -> u8 {
        ((self.w0() >> 8) & 0x1f) as u8
    }
    /// Remaining hop count.
    pub fn remaining_hop_count(&self) -> u8 {
        self.w0() as u8
    }
    /// Instruction bitmap.
    pub fn instructions(&self) -> u16 {
        be16(self.buf.as_ref(), 4).unwrap_or(0)
    }
    /// Domain specific id.
    pub fn domain_id(&self) -> u16 {
        be16(self.buf.as_ref(), 6).unwrap_or(0)
    }
    /// Domain specific instruction.
    pub fn ds_instruction(&self) -> u16 {
        be16(self.buf.as_ref(), 8).unwrap_or(0)
    }
    /// Domain specific flags.
    pub fn ds_flags(&self) -> u16 {
        be16(self.buf.as_ref(), 10).unwrap_or(0)
    }
}

/// One hop's metadata; fields whose instruction bit is clear are not written (and read as 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HopMetadata {
    /// Node (switch) id.
    pub node_id: u32,
    /// Level-1 ingress interface id.
    pub ingress_if: u16,
    /// Level-1 egress interface id.
    pub egress_if: u16,
    /// Hop latency (ns by our convention).
    pub hop_latency: u32,
    /// Queue id.
    pub queue_id: u8,
    /// Queue occupancy (24 bits; bytes by our convention).
    pub queue_occupancy: u32,
    /// Ingress timestamp (ns).
    pub ingress_ts: u64,
    /// Egress timestamp (ns).
    pub egress_ts: u64,
}

impl HopMetadata {
    /// Encode into `out` (exactly `hop_words(ins) * 4` bytes) in instruction-bit order.
    pub fn write(&self, ins: u16, out: &mut [u8]) -> Result<usize, WireError> {
        let n = hop_words(ins)? as usize * 4;
        let out = out.get_mut(..n).ok_or(WireError::NoRoom)?;
        let mut o = 0;
        let mut put = |bytes: &[u8]| {
            out[o..o + bytes.len()].copy_from_slice(bytes);
            o += bytes.len();
        };
        if ins & INS_NODE_ID != 0 {
            put(&self.node_id.to_be_bytes());
        }
        if ins & INS_L1_IF_IDS != 0 {
            put(&self.ingress_if.to_be_bytes());
            put(&self.egress_if.to_be_bytes());
        }
        if ins & INS_HOP_LATENCY != 0 {
            put(&self.hop_latency.to_be_bytes());
        }
        if ins & INS_QUEUE != 0 {
            let q = ((self.queue_id as u32) << 24) | (self.queue_occupancy & 0x00ff_ffff);
            put(&q.to_be_bytes());
        }
        if ins & INS_INGRESS_TS != 0 {
            put(&self.ingress_ts.to_be_bytes());
        }
        if ins & INS_EGRESS_TS != 0 {
            put(&self.egress_ts.to_be_bytes());
        }
        Ok(n)
    }

    /// Decode one hop from `b` according to `ins`.
    pub fn read(ins: u16, b: &[u8]) -> Result<HopMetadata, WireError> {
        let n = hop_words(ins)? as usize * 4;
        let b = b.get(..n).ok_or(WireError::Truncated)?;
        let mut h = HopMetadata::default();
        let mut o = 0usize;
        let u32_at = |o: &mut usize| {
            let v = be32(b, *o).unwrap_or(0);
            *o += 4;
            v
        };
        if ins & INS_NODE_ID != 0 {
            h.node_id = u32_at(&mut o);
        }
        if ins & INS_L1_IF_IDS != 0 {
            let v = u32_at(&mut o);
            h.ingress_if = (v >> 16) as u16;
            h.egress_if = v as u16;
        }
        if ins & INS_HOP_LATENCY != 0 {
            h.hop_latency = u32_at(&mut o);
        }
        if ins & INS_QUEUE != 0 {
            let v = u32_at(&mut o);
            h.queue_id = (v >> 24) as u8;
            h.queue_occupancy = v & 0x00ff_ffff;
        }
        if ins & INS_INGRESS_TS != 0 {
            let hi = u32_at(&mut o) as u64;
            h.ingress_ts = (hi << 32) | u32_at(&mut o) as u64;
        }
        if ins & INS_EGRESS_TS != 0 {
            let hi = u32_at(&mut o) as u64;
            h.egress_ts = (hi << 32) | u32_at(&mut o) as u64;
        }
        Ok(h)
    }
}

/// Configuration of an INT source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntConfig {
    /// UDP destination port that announces INT (the original is kept in the shim).
    pub int_port: u16,
    /// Instruction bitmap (only [`INS_SUPPORTED`] bits).
    pub instructions: u16,
    /// Initial RemainingHopCount.
    pub max_hops: u8,
    /// Domain specific id (0 = none).
    pub domain_id: u16,
    /// DS Instruction (meaning set by `domain_id`; 0 = none).
    pub ds_instruction: u16,
    /// Per-hop domain-specific metadata, in 4-byte words, after the standard part (HopML =
    /// `hop_words(instructions) + ds_words`).
    pub ds_words: u8,
    /// DS Flags the source writes (meaning set by `domain_id`).
    pub ds_flags: u16,
}

/// Where the headers of a UDP packet are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UdpLayout {
    pub(crate) v4: bool,
    pub(crate) l3_off: usize,
    pub(crate) udp_off: usize,
}

/// The UDP header of the IPv4/IPv6 packet whose IP header is at `l3_off`, with the lengths
/// checked (IP header and total/payload length within the frame, UDP length within the IP
/// payload and at least 8). Reads the fixed IPv4 header as an array (`ipv4::fixed_header`)
/// instead of through the checked view's accessors, each of which bounds-checks again: the
/// same checks, in the same order and with the same errors as [`Ipv4Packet::new_checked`],
/// [`Ipv4Packet::check_len`] and [`udp::UdpPacket::check_len`] (the proptest
/// `locate_udp_matches_the_views` holds it to them); every INT stage and locate runs it.
#[inline]
pub(crate) fn locate_udp(frame: &[u8], l3_off: usize) -> Result<UdpLayout, WireError> {
    locate_udp_lens(frame, l3_off).map(|(lay, _)| lay)
}

/// The lengths [`locate_udp_lens`] read and checked: the IP length field (IPv4 total length,
/// IPv6 payload length) and the UDP length.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UdpLens {
    pub(crate) ip: u16,
    pub(crate) udp: u16,
}

/// [`locate_udp`], with the two length fields it read and checked, for a caller that grows the
/// packet (the INT source: its overflow test and the length update take them instead of reading
/// the fields again). Always inlined, so that [`locate_udp`]'s callers get the code they had.
#[inline(always)]
pub(crate) fn locate_udp_lens(
    frame: &[u8],
    l3_off: usize,
) -> Result<(UdpLayout, UdpLens), WireError> {
    let l3 = frame.get(l3_off..).ok_or(WireError::Truncated)?;
    let (v4, udp_off, ip_end, ip_len) = match l3.first().map(|b| b >> 4) {
        Some(4) => {
            let h = ipv4::fixed_header(l3).ok_or(WireError::Truncated)?;
            let ihl = (h[0] & 0xf) as usize;
            if ihl < 5 {
                return Err(WireError::BadIpHeader);
            }
            let hl = ihl * 4;
            if l3.len() < hl {
                return Err(WireError::Truncated);
            }
            let ip_len = u16::from_be_bytes([h[2], h[3]]);
            let total = ip_len as usize;
            if total < hl || total > l3.len() {
                return Err(WireError::BadLength);
            }
            if h[9] != PROTO_UDP {
                return Err(WireError::Unsupported);
            }
            if ipv4::is_fragment_fixed(h) {
                return Err(WireError::Ipv4Fragment);
            }
            (true, l3_off + hl, l3_off + total, ip_len)
        }
        Some(6) => {
            let ip = Ipv6Packet::new_checked(l3)?;
            ip.check_len()?;
            if ip.next_header() != PROTO_UDP {
                return Err(WireError::Unsupported);
            }
            (
                false,
                l3_off + ipv6::HEADER_LEN,
                l3_off + ipv6::HEADER_LEN + ip.payload_len() as usize,
                ip.payload_len(),
            )
        }
        Some(_) => return Err(WireError::BadIpHeader),
        None => return Err(WireError::Truncated),
    };
    // `ip_end` is within the frame (checked above); the UDP header must fit before it.
    let dgram_len = ip_end.checked_sub(udp_off).ok_or(WireError::BadLength)?;
    if dgram_len < udp::HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let u = frame
        .get(udp_off..udp_off + udp::HEADER_LEN)
        .ok_or(WireError::BadLength)?;
    let udp_len = u16::from_be_bytes([u[4], u[5]]);
    let ulen = udp_len as usize;
    if ulen < udp::HEADER_LEN || ulen > dgram_len {
        return Err(WireError::BadLength);
    }
    Ok((
        UdpLayout {
            v4,
            l3_off,
            udp_off,
        },
        UdpLens {
            ip: ip_len,
            udp: udp_len,
        },
    ))
}

/// The general form of [`locate_udp`], through the checked views: its reference in tests.
#[cfg(test)]
pub(crate) fn locate_udp_ref(frame: &[u8], l3_off: usize) -> Result<UdpLayout, WireError> {
    let l3 = frame.get(l3_off..).ok_or(WireError::Truncated)?;
    let (v4, udp_off, ip_end) = match l3.first().map(|b| b >> 4) {
        Some(4) => {
            let ip = Ipv4Packet::new_checked(l3)?;
            ip.check_len()?;
            if ip.protocol() != PROTO_UDP {
                return Err(WireError::Unsupported);
            }
            if ip.is_fragment() {
                return Err(WireError::Ipv4Fragment);
            }
            (
                true,
                l3_off + ip.header_len(),
                l3_off + ip.total_len() as usize,
            )
        }
        Some(6) => {
            let ip = Ipv6Packet::new_checked(l3)?;
            ip.check_len()?;
            if ip.next_header() != PROTO_UDP {
                return Err(WireError::Unsupported);
            }
            (
                false,
                l3_off + ipv6::HEADER_LEN,
                l3_off + ipv6::HEADER_LEN + ip.payload_len() as usize,
            )
        }
        Some(_) => return Err(WireError::BadIpHeader),
        None => return Err(WireError::Truncated),
    };
    let u = udp::UdpPacket::new_checked(frame.get(udp_off..ip_end).ok_or(WireError::BadLength)?)?;
    u.check_len()?;
    Ok(UdpLayout {
        v4,
        l3_off,
        udp_off,
    })
}

/// Add `delta` bytes to IP and UDP lengths (IPv4 checksum updated incrementally; a non-zero UDP
/// checksum recomputed). Checks for overflow before changing anything. Inlined: its callers'
/// constant `delta` and known IP version fold into it (a call of 78 instructions per INT insertion
/// otherwise). Always: with `#[inline]` alone the compiler inlines it into MLCC's INT source in
/// some builds and calls it in others.
#[inline(always)]
pub(crate) fn adjust_lengths(
    frame: &mut [u8],
    lay: &UdpLayout,
    delta: isize,
) -> Result<(), WireError> {
    let ip_len_off = lay.l3_off + if lay.v4 { 2 } else { 4 };
    let old_ip = be16(frame, ip_len_off).ok_or(WireError::Truncated)?;
    let old_udp = be16(frame, lay.udp_off + 4).ok_or(WireError::Truncated)?;
    let new_ip = u16::try_from(old_ip as isize + delta).map_err(|_| WireError::BadLength)?;
    let new_udp = u16::try_from(old_udp as isize + delta).map_err(|_| WireError::BadLength)?;
    if (new_udp as usize) < udp::HEADER_LEN {
        return Err(WireError::BadLength);
    }
    put16(frame, ip_len_off, new_ip);
    if lay.v4 {
        let ck = be16(frame, lay.l3_off + 10).unwrap_or(0);
        put16(frame, lay.l3_off + 10, checksum::update(ck, old_ip, new_ip));
    }
    put16(frame, lay.udp_off + 4, new_udp);
    Ok(())
}

/// [`adjust_lengths`] growing the packet by `delta` bytes, its old lengths `old` as
/// [`locate_udp_lens`] read them (the caller moved no header since): the same result without
/// reading the two fields again. The caller has checked that `old` plus `delta` fits in 16
/// bits (`open_int`); the sums saturate otherwise.
#[inline(always)]
fn grow_lengths(frame: &mut [u8], lay: &UdpLayout, old: UdpLens, delta: u16) {
    let ip_len_off = lay.l3_off + if lay.v4 { 2 } else { 4 };
    let new_ip = old.ip.saturating_add(delta);
    put16(frame, ip_len_off, new_ip);
    if lay.v4 {
        let ck = be16(frame, lay.l3_off + 10).unwrap_or(0);
        put16(frame, lay.l3_off + 10, checksum::update(ck, old.ip, new_ip));
    }
    put16(frame, lay.udp_off + 4, old.udp.saturating_add(delta));
}

/// Recompute a non-zero UDP checksum (RoCEv2 sends 0, which stays): the test inlined, the
/// recomputation not.
#[inline]
pub(crate) fn refresh_udp_checksum(frame: &mut [u8], lay: &UdpLayout) {
    if be16(frame, lay.udp_off + 6).unwrap_or(0) == 0 {
        return;
    }
    refresh_udp_checksum_nonzero(frame, lay);
}

#[inline(never)]
fn refresh_udp_checksum_nonzero(frame: &mut [u8], lay: &UdpLayout) {
    let ulen = be16(frame, lay.udp_off + 4).unwrap_or(0) as usize;
    if frame.len() < lay.udp_off || lay.udp_off < lay.l3_off {
        return;
    }
    let Some((ip, rest)) = frame
        .get_mut(lay.l3_off..)
        .map(|s| s.split_at_mut(lay.udp_off - lay.l3_off))
    else {
        return;
    };
    let Some(dgram) = rest.get_mut(..ulen) else {
        return;
    };
    let ck = if lay.v4 {
        let ip = Ipv4Packet::new_checked(&ip[..]);
        match ip {
            Ok(ip) => udp::checksum_v4(dgram, ip.src_addr(), ip.dst_addr()),
            Err(_) => return,
        }
    } else {
        match Ipv6Packet::new_checked(&ip[..]) {
            Ok(ip) => udp::checksum_v6(dgram, ip.src_addr(), ip.dst_addr()),
            Err(_) => return,
        }
    };
    put16(dgram, 6, ck);
}

/// Grow the frame by `n` bytes at offset `at` (moving bytes `0..at` forward into the headroom);
/// the new bytes at `at..at + n` are zeroed.
pub(crate) fn open_gap<B: PacketBuf + ?Sized>(
    buf: &mut B,
    at: usize,
    n: usize,
) -> Result<(), WireError> {
    if at > buf.len() {
        return Err(WireError::Truncated);
    }
    buf.prepend(n).ok_or(WireError::NoRoom)?;
    let d = buf.data_mut();
    d.copy_within(n..n + at, 0);
    d[at..at + n].fill(0);
    Ok(())
}

/// As [`open_gap`] without zeroing the new bytes: for a caller that writes all of them (the INT
/// source writes the shim, the header and its whole first hop record).
#[inline]
fn open_gap_unfilled<B: PacketBuf + ?Sized>(
    buf: &mut B,
    at: usize,
    n: usize,
) -> Result<(), WireError> {
    if at > buf.len() {
        return Err(WireError::Truncated);
    }
    buf.prepend(n).ok_or(WireError::NoRoom)?;
    let d = buf.data_mut();
    if at == ETH_V4_UDP {
        // The usual frame (untagged Ethernet, IPv4 without options, UDP): the move at a constant
        // length, a few register moves where `copy_within` calls `memmove`. `at + n <= len`
        // (checked above, the frame grew by `n`), so the slices are in the frame.
        let mut h = [0u8; ETH_V4_UDP];
        h.copy_from_slice(&d[n..n + ETH_V4_UDP]);
        d[..ETH_V4_UDP].copy_from_slice(&h);
    } else {
        d.copy_within(n..n + at, 0);
    }
    Ok(())
}

/// The headers in front of the INT of the usual frame: Ethernet (14), IPv4 without options
/// (20), UDP (8).
const ETH_V4_UDP: usize = 14 + 20 + 8;

/// Remove `n` bytes at offset `at` (moving bytes `0..at` backward and trimming the front).
fn close_gap<B: PacketBuf + ?Sized>(buf: &mut B, at: usize, n: usize) -> Result<(), WireError> {
    if at + n > buf.len() {
        return Err(WireError::Truncated);
    }
    buf.data_mut().copy_within(0..at, n);
    if !buf.adj(n) {
        return Err(WireError::Truncated);
    }
    Ok(())
}

/// Open the gap for the shim, the INT-MD header and `extra` bytes of stack right after the UDP
/// header, and write the shim (original port, length) and the header (HopML `hop_ml`,
/// RemainingHopCount `rhc`, `cfg`'s instructions, domain, DS Instruction and Flags); the UDP
/// port becomes `cfg.int_port`. Lengths and checksums are left to the caller. Returns the UDP
/// layout and the shim's offset. Errors (length overflow, no headroom) leave the frame unchanged.
/// The `extra` bytes after the header are not zeroed: the caller writes them.
#[inline]
fn open_int<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    cfg: &IntConfig,
    hop_ml: u8,
    extra: usize,
    rhc: u8,
) -> Result<(UdpLayout, UdpLens, usize), WireError> {
    let (lay, lens) = locate_udp_lens(buf.data(), l3_off)?;
    let n = SHIM_LEN + MD_HEADER_LEN + extra;
    if lens.ip as usize + n > u16::MAX as usize || lens.udp as usize + n > u16::MAX as usize {
        return Err(WireError::BadLength);
    }
    if buf.headroom() < n || n / 4 > u8::MAX as usize {
        return Err(WireError::NoRoom);
    }
    let at = lay.udp_off + udp::HEADER_LEN;
    open_gap_unfilled(buf, at, n)?;
    let d = buf.data_mut();
    let orig_port = be16(d, lay.udp_off + 2).unwrap_or(0);
    put16(d, lay.udp_off + 2, cfg.int_port);
    let s = &mut d[at..at + SHIM_LEN + MD_HEADER_LEN];
    s[0] = (TYPE_INT_MD << 4) | (NPT_UDP_PORT << 2);
    s[1] = (n / 4) as u8;
    s[2..4].copy_from_slice(&orig_port.to_be_bytes());
    let w0 = ((VERSION as u32) << 28) | ((hop_ml as u32) << 8) | rhc as u32;
    s[4..8].copy_from_slice(&w0.to_be_bytes());
    s[8..10].copy_from_slice(&cfg.instructions.to_be_bytes());
    s[10..12].copy_from_slice(&cfg.domain_id.to_be_bytes());
    s[12..14].copy_from_slice(&cfg.ds_instruction.to_be_bytes());
    s[14..16].copy_from_slice(&cfg.ds_flags.to_be_bytes());
    Ok((lay, lens, at))
}

/// INT source: insert the shim and an INT-MD header (empty stack) right after the UDP header of
/// the IPv4/IPv6 packet whose IP header is at `l3_off`; sets the UDP destination port to
/// `cfg.int_port` (the original goes into the shim) and updates lengths and checksums. Needs 16
/// bytes of headroom ([`WireError::NoRoom`] otherwise, frame unchanged). Errors leave the frame
/// unchanged. The L3 offset is unchanged (headers move with the front of the frame). Returns
/// where the new INT is (for [`push_hop_at`]).
pub fn insert_int_md<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    cfg: &IntConfig,
) -> Result<IntLayout, WireError> {
    let hop_ml = hop_words(cfg.instructions)?
        .checked_add(cfg.ds_words)
        .filter(|w| *w <= 31)
        .ok_or(WireError::Unsupported)?;
    let n = SHIM_LEN + MD_HEADER_LEN;
    let (lay, lens, at) = open_int(buf, l3_off, cfg, hop_ml, 0, cfg.max_hops)?;
    let d = buf.data_mut();
    grow_lengths(d, &lay, lens, n as u16);
    refresh_udp_checksum(d, &lay);
    Ok(IntLayout {
        udp_off: lay.udp_off,
        shim_off: at,
        stack_off: at + n,
        stack_len: 0,
        int_len: n,
        instructions: cfg.instructions,
        hop_len: hop_ml as usize * 4,
    })
}

/// INT source and first hop in one pass: as [`insert_int_md`] followed by [`push_hop`] (the
/// shim, the INT-MD header with RemainingHopCount `cfg.max_hops - 1`, and `hop` with the domain's
/// metadata `ds`), with one header parse, one gap and one length update. Needs `16 + HopML x 4`
/// bytes of headroom; `cfg.max_hops` must be at least 1 ([`WireError::Unsupported`]); errors
/// leave the frame unchanged.
pub fn insert_int_md_with_hop<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    cfg: &IntConfig,
    hop: &HopMetadata,
    ds: &[u8],
) -> Result<(), WireError> {
    let std_words = hop_words(cfg.instructions)?;
    let hop_ml = std_words
        .checked_add(cfg.ds_words)
        .filter(|w| *w <= 31)
        .ok_or(WireError::Unsupported)?;
    if cfg.max_hops == 0 || std_words as usize * 4 + ds.len() > hop_ml as usize * 4 {
        return Err(WireError::Unsupported);
    }
    let hop_len = hop_ml as usize * 4;
    // The record: the standard metadata, then `ds`; bytes `ds` does not cover stay 0.
    let mut rec = [0u8; MAX_HOP_LEN];
    let std_len = hop.write(cfg.instructions, &mut rec)?;
    rec[std_len..std_len + ds.len()].copy_from_slice(ds);
    insert_int_md_with_record(buf, l3_off, cfg, &rec[..hop_len])
}

/// The longest hop record (HopML is 5 bits: 31 words).
pub const MAX_HOP_LEN: usize = 31 * 4;

/// [`insert_int_md_with_hop`] with the first hop given as its complete record `rec` (HopML x 4
/// bytes: `cfg.instructions`' standard metadata in instruction-bit order, then the domain's
/// `cfg.ds_words` words), for a domain that writes its record at fixed offsets
/// (`wire::mlcc::MlccHop::record`) instead of through the instruction-bitmap writer. The same
/// checks and output; [`WireError::Unsupported`] when `rec`'s length is not
/// `(hop_words(cfg.instructions) + cfg.ds_words) x 4` or `cfg.max_hops` is 0. Errors leave the
/// frame unchanged.
#[inline]
pub fn insert_int_md_with_record<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    cfg: &IntConfig,
    rec: &[u8],
) -> Result<(), WireError> {
    let hop_ml = hop_words(cfg.instructions)?
        .checked_add(cfg.ds_words)
        .filter(|w| *w <= 31)
        .ok_or(WireError::Unsupported)?;
    let hop_len = hop_ml as usize * 4;
    if cfg.max_hops == 0 || rec.len() != hop_len {
        return Err(WireError::Unsupported);
    }
    let n = SHIM_LEN + MD_HEADER_LEN + hop_len;
    let (lay, lens, at) = open_int(buf, l3_off, cfg, hop_ml, hop_len, cfg.max_hops - 1)?;
    let d = buf.data_mut();
    d[at + SHIM_LEN + MD_HEADER_LEN..at + n].copy_from_slice(rec);
    grow_lengths(d, &lay, lens, n as u16);
    refresh_udp_checksum(d, &lay);
    Ok(())
}

/// Where the INT headers of a packet are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntLayout {
    /// UDP header offset.
    pub udp_off: usize,
    /// Shim offset (UDP + 8).
    pub shim_off: usize,
    /// Offset of the hop stack (shim + 16).
    pub stack_off: usize,
    /// Stack length in bytes.
    pub stack_len: usize,
    /// Shim + header + stack length in bytes.
    pub int_len: usize,
    /// Instruction bitmap.
    pub instructions: u16,
    /// Per-hop metadata bytes.
    pub hop_len: usize,
}

/// Locate and validate the INT-MD headers after the UDP header of the packet at `l3_off`
/// (INT-MD type, NPT 1, version 2, lengths consistent with the UDP datagram). The UDP port is
/// not checked.
pub fn locate_int(frame: &[u8], l3_off: usize) -> Result<IntLayout, WireError> {
    let lay = locate_udp(frame, l3_off)?;
    locate_int_in(frame, &lay)
}

#[inline]
pub(crate) fn locate_int_in(frame: &[u8], lay: &UdpLayout) -> Result<IntLayout, WireError> {
    let shim_off = lay.udp_off + udp::HEADER_LEN;
    let ulen = be16(frame, lay.udp_off + 4).unwrap_or(0) as usize;
    let avail = frame
        .get(shim_off..lay.udp_off + ulen)
        .ok_or(WireError::BadLength)?;
    let shim = IntShim::new_checked(avail)?;
    if shim.int_type() != TYPE_INT_MD || shim.npt() != NPT_UDP_PORT {
        return Err(WireError::Unsupported);
    }
    let md = IntMdHeader::new_checked(avail.get(SHIM_LEN..).unwrap_or(&[]))?;
    if md.version() != VERSION {
        return Err(WireError::Unsupported);
    }
    let int_len = shim.length_bytes();
    if int_len < SHIM_LEN + MD_HEADER_LEN || int_len > avail.len() {
        return Err(WireError::BadLength);
    }
    // HopML covers the standard metadata of the instruction bitmap and, after it, the INT
    // domain's own metadata (DS Instruction, INT v2.1 section 5.7), whose meaning depends on
    // the DS ID: it may only be longer than the standard part.
    let hop_len = md.hop_ml() as usize * 4;
    if hop_words(md.instructions())? as usize * 4 > hop_len {
        return Err(WireError::BadLength);
    }
    let stack_len = int_len - SHIM_LEN - MD_HEADER_LEN;
    let whole_hops = match stack_len.checked_rem(hop_len) {
        Some(r) => r == 0,
        None => stack_len == 0,
    };
    if !whole_hops {
        return Err(WireError::BadLength);
    }
    Ok(IntLayout {
        udp_off: lay.udp_off,
        shim_off,
        stack_off: shim_off + SHIM_LEN + MD_HEADER_LEN,
        stack_len,
        int_len,
        instructions: md.instructions(),
        hop_len,
    })
}

/// INT transit hop: push `hop` at the top of the stack and decrement RemainingHopCount. Returns
/// `Ok(true)` when pushed, `Ok(false)` when RemainingHopCount was 0 (the E bit is set instead,
/// INT v2.1 section 5.7). Needs `HopML x 4` bytes of headroom; errors leave the frame unchanged.
pub fn push_hop_metadata<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    hop: &HopMetadata,
) -> Result<bool, WireError> {
    push_hop(buf, l3_off, hop, &[])
}

/// As [`push_hop_metadata`], with the domain's own metadata `ds` written after the standard
/// part (bytes of the hop record `ds` does not cover stay 0; [`WireError::BadLength`] when the
/// standard part and `ds` together exceed HopML).
pub fn push_hop<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    hop: &HopMetadata,
    ds: &[u8],
) -> Result<bool, WireError> {
    let lay = locate_udp(buf.data(), l3_off)?;
    let il = locate_int_in(buf.data(), &lay)?;
    push_hop_in(buf, &lay, &il, hop, ds)
}

/// As [`push_hop`] on an INT already located (`il`, from [`locate_int`] or [`insert_int_md`]
/// on this frame, unchanged since): no second parse of the headers.
pub fn push_hop_at<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    il: &IntLayout,
    hop: &HopMetadata,
    ds: &[u8],
) -> Result<bool, WireError> {
    let v4 = match buf.data().get(l3_off).map(|b| b >> 4) {
        Some(4) => true,
        Some(6) => false,
        _ => return Err(WireError::BadIpHeader),
    };
    if il.udp_off < l3_off || il.shim_off != il.udp_off + udp::HEADER_LEN {
        return Err(WireError::BadLength);
    }
    let lay = UdpLayout {
        v4,
        l3_off,
        udp_off: il.udp_off,
    };
    push_hop_in(buf, &lay, il, hop, ds)
}

fn push_hop_in<B: PacketBuf + ?Sized>(
    buf: &mut B,
    lay: &UdpLayout,
    il: &IntLayout,
    hop: &HopMetadata,
    ds: &[u8],
) -> Result<bool, WireError> {
    let l3_off = lay.l3_off;
    let md_off = il.shim_off + SHIM_LEN;
    let rhc = buf.data().get(md_off + 3).copied().unwrap_or(0);
    if rhc == 0 {
        if let Some(b) = buf.data_mut().get_mut(md_off) {
            *b |= 0x04; // E bit (bit 5 of the word)
        }
        return Ok(false);
    }
    let n = il.hop_len;
    let std_len = hop_words(il.instructions)? as usize * 4;
    if std_len + ds.len() > n {
        return Err(WireError::BadLength);
    }
    if n == 0 {
        // Nothing to push (empty instruction set): just count the hop.
        if let Some(b) = buf.data_mut().get_mut(md_off + 3) {
            *b = rhc - 1;
        }
        return Ok(true);
    }
    if (il.int_len + n) / 4 > u8::MAX as usize {
        return Err(WireError::BadLength);
    }
    {
        let d = buf.data();
        let ipl = be16(d, l3_off + if lay.v4 { 2 } else { 4 }).unwrap_or(u16::MAX);
        let ul = be16(d, lay.udp_off + 4).unwrap_or(u16::MAX);
        if ipl as usize + n > u16::MAX as usize || ul as usize + n > u16::MAX as usize {
            return Err(WireError::BadLength);
        }
    }
    if buf.headroom() < n {
        return Err(WireError::NoRoom);
    }
    open_gap(buf, il.stack_off, n)?;
    let d = buf.data_mut();
    hop.write(il.instructions, &mut d[il.stack_off..il.stack_off + n])?;
    d[il.stack_off + std_len..il.stack_off + std_len + ds.len()].copy_from_slice(ds);
    d[il.shim_off + 1] = ((il.int_len + n) / 4) as u8;
    d[md_off + 3] = rhc - 1;
    adjust_lengths(d, lay, n as isize)?;
    refresh_udp_checksum(d, lay);
    Ok(true)
}

/// INT sink: remove shim, header and stack; restore the UDP destination port from the shim,
/// the UDP and IP lengths and the IPv4 checksum, bit-exactly. Errors leave the frame unchanged.
pub fn strip_int<B: PacketBuf + ?Sized>(buf: &mut B, l3_off: usize) -> Result<(), WireError> {
    let lay = locate_udp(buf.data(), l3_off)?;
    let il = locate_int_in(buf.data(), &lay)?;
    let orig_port = be16(buf.data(), il.shim_off + 2).ok_or(WireError::Truncated)?;
    let d = buf.data_mut();
    adjust_lengths(d, &lay, -(il.int_len as isize))?;
    put16(d, lay.udp_off + 2, orig_port);
    close_gap(buf, il.shim_off, il.int_len)?;
    let d = buf.data_mut();
    refresh_udp_checksum(d, &lay);
    Ok(())
}

/// Read-only iterator over the hop stack, newest hop first.
#[derive(Clone, Debug)]
pub struct HopStack<'a> {
    rest: &'a [u8],
    instructions: u16,
    hop_len: usize,
}

impl<'a> HopStack<'a> {
    /// The stack of the INT packet at `l3_off`.
    pub fn new(frame: &'a [u8], l3_off: usize) -> Result<HopStack<'a>, WireError> {
        let il = locate_int(frame, l3_off)?;
        Ok(HopStack {
            rest: frame
                .get(il.stack_off..il.stack_off + il.stack_len)
                .unwrap_or(&[]),
            instructions: il.instructions,
            hop_len: il.hop_len,
        })
    }
}

impl Iterator for HopStack<'_> {
    type Item = HopMetadata;
    fn next(&mut self) -> Option<HopMetadata> {
        if self.hop_len == 0 || self.rest.len() < self.hop_len {
            return None;
        }
        let (h, r) = self.rest.split_at(self.hop_len);
        self.rest = r;
        HopMetadata::read(self.instructions, h).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapBuf;
    use crate::wire::icrc;
    use crate::wire::testutil::hex;

    // RC SEND ONLY over IPv4 with valid ICRC (scapy, see icrc.rs ipv4_send_with_pad_known_answer).
    const SEND_V4: &str = "02000000000202000000000108004502004c123440004011a517c0a80101c0a80102c35012b7003800000410ffff0000001180000100000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e00441dd8dc";
    // RDMA WRITE ONLY over IPv6 (scapy, see icrc.rs ipv6_known_answer).
    const WRITE_V6: &str = "02000000000202000000000186dd662123450054113ffd000001000000000000000000000010fd000002000000000000000000000020c82212b7005400000a00ffff00000abc8000a0b000000000deadbeef000012340000002c000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b33269bec";

    /// Three hop fields, a domain-specific instruction of 3 words (MLCC's record), 3 hops.
    const DS_CFG: IntConfig = IntConfig {
        instructions: INS_NODE_ID | INS_QUEUE | INS_EGRESS_TS,
        ds_instruction: 0xc000,
        ds_words: 3,
        ds_flags: 0x8005,
        domain_id: 0x4d4c,
        max_hops: 3,
        ..CFG
    };

    const CFG: IntConfig = IntConfig {
        int_port: 5000,
        instructions: INS_SUPPORTED,
        max_hops: 2,
        domain_id: 0,
        ds_instruction: 0,
        ds_words: 0,
        ds_flags: 0,
    };

    fn hop(i: u32) -> HopMetadata {
        HopMetadata {
            node_id: 0x1000 + i,
            ingress_if: i as u16,
            egress_if: 7,
            hop_latency: 1234 * i,
            queue_id: 3,
            queue_occupancy: 0x00abcdef,
            ingress_ts: 0x0102_0304_0506_0708 + i as u64,
            egress_ts: 0x1112_1314_1516_1718 + i as u64,
        }
    }

    fn roundtrip(orig: &[u8]) {
        let mut b = HeapBuf::from_bytes(orig);
        assert_eq!(icrc::verify(b.data(), 14), Ok(true));
        insert_int_md(&mut b, 14, &CFG).unwrap();
        assert_eq!(b.len(), orig.len() + 16);
        assert!(push_hop_metadata(&mut b, 14, &hop(1)).unwrap());
        assert!(push_hop_metadata(&mut b, 14, &hop(2)).unwrap());
        // Third hop: RemainingHopCount exhausted, E bit set, nothing pushed.
        assert!(!push_hop_metadata(&mut b, 14, &hop(3)).unwrap());
        let hw = hop_words(INS_SUPPORTED).unwrap() as usize * 4;
        assert_eq!(hw, 32);
        assert_eq!(b.len(), orig.len() + 16 + 2 * hw);
        let d = b.data();
        let p = crate::wire::parse::parse(d, &Default::default());
        assert_eq!(p.anomaly, None);
        assert_eq!((p.dst_port, p.bth_off), (5000, 0));
        let il = locate_int(d, 14).unwrap();
        let shim = IntShim::new_checked(&d[il.shim_off..]).unwrap();
        assert_eq!(
            (shim.int_type(), shim.npt(), shim.orig_dst_port()),
            (1, 1, 4791)
        );
        assert_eq!(shim.length_bytes(), 16 + 2 * hw);
        let md = IntMdHeader::new_checked(&d[il.shim_off + 4..]).unwrap();
        assert_eq!(
            (md.version(), md.hop_ml(), md.remaining_hop_count()),
            (2, 8, 0)
        );
        assert!(md.hop_count_exceeded() && !md.discard() && !md.mtu_exceeded());
        assert_eq!(
            (
                md.instructions(),
                md.domain_id(),
                md.ds_instruction(),
                md.ds_flags()
            ),
            (0xfc00, 0, 0, 0)
        );
        let hops: Vec<_> = HopStack::new(d, 14).unwrap().collect();
        assert_eq!(hops, vec![hop(2), hop(1)]);
        if d[14] >> 4 == 4 {
            assert!(Ipv4Packet::new_checked(&d[14..]).unwrap().verify_checksum());
        }
        strip_int(&mut b, 14).unwrap();
        assert_eq!(b.data(), orig);
        assert_eq!(icrc::verify(b.data(), 14), Ok(true));
        assert_eq!(strip_int(&mut b, 14), Err(WireError::Unsupported));
    }

    #[test]
    fn roce_v4_insert_push_strip_bit_exact() {
        roundtrip(&hex(SEND_V4));
    }

    #[test]
    fn roce_v6_insert_push_strip_bit_exact() {
        roundtrip(&hex(WRITE_V6));
    }

    #[test]
    fn padded_frame_and_udp_checksum() {
        // UDP with a non-zero checksum and Ethernet padding after the datagram.
        // python3 -c 'from scapy.all import *; print(bytes(IP(src="10.0.0.1",dst="10.0.0.2",
        //  id=7,ttl=17)/UDP(sport=1234,dport=5678)/Raw(b"hello world")).hex())'  (+ Ethernet)
        let mut f = hex("020000000002020000000001 0800");
        f.extend(hex(
            "4500002700070000111195bd0a0000010a00000204d2162e00133ef768656c6c6f20776f726c64",
        ));
        f.extend_from_slice(&[0; 7]);
        let mut b = HeapBuf::from_bytes(&f);
        let cfg = IntConfig {
            instructions: INS_NODE_ID | INS_QUEUE,
            max_hops: 4,
            ..CFG
        };
        insert_int_md(&mut b, 14, &cfg).unwrap();
        push_hop_metadata(&mut b, 14, &hop(9)).unwrap();
        let d = b.data();
        let u = udp::UdpPacket::new_checked(&d[34..]).unwrap();
        assert!(u.verify_checksum_v4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()));
        let h: Vec<_> = HopStack::new(d, 14).unwrap().collect();
        assert_eq!(
            h,
            vec![HopMetadata {
                node_id: 0x1009,
                queue_id: 3,
                queue_occupancy: 0xabcdef,
                ..Default::default()
            }]
        );
        strip_int(&mut b, 14).unwrap();
        assert_eq!(b.data(), &f[..]);
    }

    #[test]
    fn errors_leave_frame_unchanged() {
        let f = hex(SEND_V4);
        let mut b = HeapBuf::from_bytes(&f);
        let bad = IntConfig {
            instructions: 0x0200,
            ..CFG
        };
        assert_eq!(insert_int_md(&mut b, 14, &bad), Err(WireError::Unsupported));
        assert_eq!(strip_int(&mut b, 14), Err(WireError::Unsupported));
        assert_eq!(
            push_hop_metadata(&mut b, 14, &hop(1)),
            Err(WireError::Unsupported)
        );
        assert_eq!(insert_int_md(&mut b, 0, &CFG), Err(WireError::BadIpHeader));
        assert_eq!(b.data(), &f[..]);
        // No headroom.
        let mut b = HeapBuf::from_bytes(&f);
        b.prepend(b.headroom() - 10).unwrap();
        let snapshot = b.data().to_vec();
        let off = 14 + snapshot.len() - f.len();
        assert_eq!(insert_int_md(&mut b, off, &CFG), Err(WireError::NoRoom));
        assert_eq!(b.data(), &snapshot[..]);
        // Truncated frames never panic.
        for n in 0..f.len() {
            let mut b = HeapBuf::from_bytes(&f[..n]);
            let _ = insert_int_md(&mut b, 14, &CFG);
            let _ = push_hop_metadata(&mut b, 14, &hop(1));
            let _ = strip_int(&mut b, 14);
            let _ = HopStack::new(b.data(), 14).map(|s| s.count());
        }
    }

    #[test]
    fn hop_words_and_codec() {
        assert_eq!(hop_words(0), Ok(0));
        assert_eq!(hop_words(INS_NODE_ID | INS_INGRESS_TS), Ok(3));
        assert_eq!(hop_words(0x0001), Err(WireError::Unsupported));
        let mut o = [0u8; 32];
        let n = hop(1).write(INS_SUPPORTED, &mut o).unwrap();
        assert_eq!(n, 32);
        assert_eq!(&o[..8], &hex("00001001 00010007"));
        assert_eq!(&o[12..16], &hex("03abcdef"));
        assert_eq!(HopMetadata::read(INS_SUPPORTED, &o), Ok(hop(1)));
        assert_eq!(
            HopMetadata::read(INS_SUPPORTED, &o[..31]),
            Err(WireError::Truncated)
        );
        assert_eq!(
            hop(1).write(INS_SUPPORTED, &mut o[..31]),
            Err(WireError::NoRoom)
        );
    }

    /// `frame` (Ethernet, IP header at `l3`) with `n` more bytes in its IP packet and UDP
    /// datagram: the length fields and the UDP destination port (`dport`) written, the IPv4
    /// header checksum recomputed over the whole header (not incrementally), as the reference of
    /// an INT insertion's header changes.
    fn grown_headers(frame: &[u8], l3: usize, n: usize, dport: u16) -> Vec<u8> {
        let mut f = frame.to_vec();
        let add = |f: &mut Vec<u8>, off: usize| {
            let v = u16::from_be_bytes([f[off], f[off + 1]]) as usize + n;
            f[off..off + 2].copy_from_slice(&(v as u16).to_be_bytes());
        };
        let udp = if f[l3] >> 4 == 4 {
            let hl = (f[l3] & 0xf) as usize * 4;
            add(&mut f, l3 + 2);
            f[l3 + 10..l3 + 12].fill(0);
            let ck = checksum::checksum(&f[l3..l3 + hl]);
            f[l3 + 10..l3 + 12].copy_from_slice(&ck.to_be_bytes());
            l3 + hl
        } else {
            add(&mut f, l3 + 4);
            l3 + 40
        };
        add(&mut f, udp + 4);
        f[udp + 2..udp + 4].copy_from_slice(&dport.to_be_bytes());
        f
    }

    proptest::proptest! {
        /// The INT source's one pass (`insert_int_md_with_record`: the header move at a constant
        /// length for the usual frame, the lengths from `locate_udp_lens` without reading them
        /// again) against the frame built independently: the bytes in front of the UDP payload
        /// with the lengths, the port and a recomputed IPv4 checksum, then the shim, the header
        /// and the record, then the rest; for the usual frame (untagged, IPv4 without options)
        /// and the others (a VLAN tag, IPv4 options, IPv6), Ethernet padding after the packet,
        /// any TOS, identification and TTL.
        #[test]
        fn source_in_one_pass_is_the_frame_built_apart(
            kind in 0usize..4,
            rec in proptest::collection::vec(proptest::prelude::any::<u8>(), 28),
            pad in 0usize..6,
            tos in proptest::prelude::any::<u8>(),
            ident in proptest::prelude::any::<u16>(),
            ttl in proptest::prelude::any::<u8>(),
        ) {
            let cfg = DS_CFG;
            let mut f = if kind == 3 { hex(WRITE_V6) } else { hex(SEND_V4) };
            let mut l3 = 14;
            if kind != 3 {
                f[15] = tos;
                f[18..20].copy_from_slice(&ident.to_be_bytes());
                f[22] = ttl;
            }
            if kind == 2 {
                // Four bytes of options (NOP NOP NOP EOL): IHL 6.
                f.splice(34..34, [1u8, 1, 1, 0]);
                f[14] = 0x46;
                let t = u16::from_be_bytes([f[16], f[17]]) + 4;
                f[16..18].copy_from_slice(&t.to_be_bytes());
            }
            if kind != 3 {
                let hl = (f[14] & 0xf) as usize * 4;
                f[24..26].fill(0);
                let ck = checksum::checksum(&f[14..14 + hl]);
                f[24..26].copy_from_slice(&ck.to_be_bytes());
            }
            if kind == 1 {
                f.splice(12..12, [0x81u8, 0x00, 0x00, 0x05]);
                l3 = 18;
            }
            f.extend(std::iter::repeat_n(0u8, pad));
            let udp = if kind == 3 { l3 + 40 } else { l3 + (f[l3] & 0xf) as usize * 4 };
            let at = udp + 8;
            proptest::prop_assert_eq!(at == ETH_V4_UDP, kind == 0);
            let n = SHIM_LEN + MD_HEADER_LEN + rec.len();

            let mut b = HeapBuf::from_bytes(&f);
            insert_int_md_with_record(&mut b, l3, &cfg, &rec).unwrap();
            let out = b.data();
            proptest::prop_assert_eq!(out.len(), f.len() + n);
            let front = grown_headers(&f[..at], l3, n, cfg.int_port);
            // Every byte but the IPv4 checksum, which must verify (an incremental update may
            // write 0xffff where the recomputation writes 0).
            let ck = if kind == 3 { 0..0 } else { l3 + 10..l3 + 12 };
            proptest::prop_assert_eq!(&out[..ck.start], &front[..ck.start]);
            proptest::prop_assert_eq!(&out[ck.end..at], &front[ck.end..]);
            if kind != 3 {
                let hl = (out[l3] & 0xf) as usize * 4;
                proptest::prop_assert_eq!(checksum::checksum(&out[l3..l3 + hl]), 0);
            }
            // The shim keeps the original port (RoCEv2's), the record follows the header.
            proptest::prop_assert_eq!(&out[at + 2..at + 4], &f[udp + 2..udp + 4]);
            proptest::prop_assert_eq!(&out[at + SHIM_LEN + MD_HEADER_LEN..at + n], &rec[..]);
            proptest::prop_assert_eq!(&out[at + n..], &f[at..]);
        }
    }

    #[test]
    fn source_lengths_at_the_limit() {
        // An IPv4 packet whose total length leaves exactly the INT's room, and one byte less:
        // the first grows to 65 535, the second is refused and left unchanged.
        let cfg = IntConfig {
            ds_flags: 0,
            ..DS_CFG
        };
        let rec = [7u8; 28];
        let n = SHIM_LEN + MD_HEADER_LEN + rec.len();
        for (total, ok) in [(65_535 - n, true), (65_536 - n, false)] {
            let mut f = hex(SEND_V4)[..42].to_vec();
            f.resize(14 + total, 0);
            f[16..18].copy_from_slice(&(total as u16).to_be_bytes());
            f[38..40].copy_from_slice(&((total - 20) as u16).to_be_bytes());
            f[24..26].fill(0);
            let ck = checksum::checksum(&f[14..34]);
            f[24..26].copy_from_slice(&ck.to_be_bytes());
            let mut b = HeapBuf::from_bytes(&f);
            let r = insert_int_md_with_record(&mut b, 14, &cfg, &rec);
            if ok {
                assert_eq!(r, Ok(()));
                assert_eq!(be16(b.data(), 16), Some(65_535));
                assert_eq!(be16(b.data(), 38), Some(65_535 - 20));
                assert_eq!(checksum::checksum(&b.data()[14..34]), 0);
            } else {
                assert_eq!(r, Err(WireError::BadLength));
                assert_eq!(b.data(), &f[..]);
            }
        }
    }

    #[test]
    fn source_and_first_hop_in_one_pass_is_the_two_step_result() {
        let cfg = DS_CFG;
        let ds = [9u8; 12];
        for orig in [hex(SEND_V4), hex(WRITE_V6)] {
            let mut a = HeapBuf::from_bytes(&orig);
            insert_int_md(&mut a, 14, &cfg).unwrap();
            push_hop(&mut a, 14, &hop(1), &ds).unwrap();
            let mut b = HeapBuf::from_bytes(&orig);
            insert_int_md_with_hop(&mut b, 14, &cfg, &hop(1), &ds).unwrap();
            assert_eq!(a.data(), b.data());
            strip_int(&mut b, 14).unwrap();
            assert_eq!(b.data(), &orig[..]);
        }
        let mut c = HeapBuf::from_bytes(&hex(SEND_V4));
        let none = IntConfig { max_hops: 0, ..cfg };
        assert_eq!(
            insert_int_md_with_hop(&mut c, 14, &none, &hop(1), &ds),
            Err(WireError::Unsupported)
        );
        assert_eq!(c.data(), &hex(SEND_V4)[..]);
    }

    fn layout_tuple(r: Result<UdpLayout, WireError>) -> Result<(bool, usize, usize), WireError> {
        r.map(|l| (l.v4, l.l3_off, l.udp_off))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// The fixed-header `locate_udp` against the checked views it replaced: the same layout
        /// or the same error for packets with any header byte changed (version, IHL, lengths,
        /// protocol, fragment bits, UDP length), cut at any length, at any L3 offset.
        #[test]
        fn locate_udp_matches_the_views(
            v6 in proptest::prelude::any::<bool>(),
            edits in proptest::collection::vec((0usize..64, proptest::prelude::any::<u8>()), 0..4),
            cut in 0usize..200,
            l3 in 10usize..18,
        ) {
            let frame = if v6 { hex(WRITE_V6) } else { hex(SEND_V4) };
            let mut f = frame.clone();
            for (i, b) in &edits {
                if let Some(x) = f.get_mut(14 + i) {
                    *x = *b;
                }
            }
            let n = f.len().saturating_sub(cut % (f.len() + 1));
            let f = &f[..n];
            proptest::prop_assert_eq!(
                layout_tuple(locate_udp(f, l3)),
                layout_tuple(locate_udp_ref(f, l3))
            );
            proptest::prop_assert_eq!(
                layout_tuple(locate_udp(f, 14)),
                layout_tuple(locate_udp_ref(f, 14))
            );
        }
    }

    #[test]
    fn locate_udp_edges_match_the_views() {
        for orig in [hex(SEND_V4), hex(WRITE_V6)] {
            for cut in 0..=orig.len() {
                for l3 in [0, 13, 14, 15, 60] {
                    let f = &orig[..cut];
                    assert_eq!(
                        layout_tuple(locate_udp(f, l3)),
                        layout_tuple(locate_udp_ref(f, l3))
                    );
                }
            }
        }
        // Every value of the IPv4 bytes that matter: version/IHL, total length, protocol, flags,
        // and the UDP length.
        let orig = hex(SEND_V4);
        for (i, j) in [
            (14, 15),
            (16, 17),
            (17, 18),
            (23, 24),
            (20, 21),
            (38, 39),
            (39, 40),
        ] {
            for v in 0..=255u8 {
                let mut f = orig.clone();
                f[i] = v;
                assert_eq!(
                    layout_tuple(locate_udp(&f, 14)),
                    layout_tuple(locate_udp_ref(&f, 14)),
                    "byte {i} = {v}"
                );
                let mut f = orig.clone();
                f[j] = v;
                assert_eq!(
                    layout_tuple(locate_udp(&f, 14)),
                    layout_tuple(locate_udp_ref(&f, 14)),
                    "byte {j} = {v}"
                );
            }
        }
    }
}
