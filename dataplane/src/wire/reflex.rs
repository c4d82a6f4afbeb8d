//! Reflex's timestamp, its echo, and the pseudo-ACK (paper 003, section III; our encoding,
//! docs/wire-formats.md "Reflex: timestamps, their echo, and pseudo-ACKs", version 1).
//!
//! One INT v2.1 MD hop over UDP ([`super::int`]) in the Reflex INT domain:
//!
//! ```text
//! shim:    type 1, NPT 1, length 7 words, original port 4791
//! MD:      Ver 2, HopML 3, RemainingHopCount 0, instructions 0x0400 (egress timestamp),
//!          DS ID 0x5246, DS Instruction 0x8000 (requester QPN), DS Flags (NSF 0x8000, ECHO 0x4000)
//! hop:     egress timestamp (8, ns) | 0x00 | requester QPN (24 bits)
//! ```
//!
//! The RoCE packet after the INT is unchanged, so its ICRC is the one computed without INT: it
//! verifies once [`super::int::strip_int`] has removed the INT. Everything here checks lengths
//! before reading and never allocates.

use super::int::{
    self, adjust_lengths, locate_udp, open_gap, refresh_udp_checksum, MD_HEADER_LEN, NPT_UDP_PORT,
    SHIM_LEN, TYPE_INT_MD, VERSION,
};
use super::roce::{self, AckSpec, RoceAddrs, Syndrome, BTH_LEN};
use super::{be16, be32, put16, udp, WireError};
use crate::packet::PacketBuf;
use crate::wire::ethernet::MacAddr;
use std::net::{Ipv4Addr, Ipv6Addr};

/// INT Domain Specific ID of the Reflex domain ("RF").
pub const DS_ID: u16 = 0x5246;
/// DS Instruction bit 0: per hop, 4 bytes carrying the requester's QPN.
pub const DS_INS_REQUESTER_QPN: u16 = 0x8000;
/// DS Flags: a pseudo-ACK made by the source ESW's NSF.
pub const FLAG_NSF: u16 = 0x8000;
/// DS Flags: the hop is reflected (the packet is an ACK or a pseudo-ACK).
pub const FLAG_ECHO: u16 = 0x4000;
/// The hop: egress timestamp (8) + requester QPN (4).
pub const HOP_LEN: usize = 12;
/// Shim + INT-MD header + the hop.
pub const INT_LEN: usize = SHIM_LEN + MD_HEADER_LEN + HOP_LEN;

/// The hop's contents.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReflexHop {
    /// Transmission timestamp, ns (the requester's, or the destination ESW's egress time).
    pub ts: u64,
    /// The requester's QPN (24 bits).
    pub qpn: u32,
}

/// Where a Reflex packet's INT and RoCE headers are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReflexView {
    pub udp_off: usize,
    /// Offset of the 8-byte timestamp.
    pub ts_off: usize,
    /// Offset of the BTH (after the INT).
    pub bth_off: usize,
    /// DS Flags.
    pub flags: u16,
    pub hop: ReflexHop,
}

impl ReflexView {
    /// A pseudo-ACK (NSF flag).
    pub fn is_nsf(&self) -> bool {
        self.flags & FLAG_NSF != 0
    }
    /// A reflected hop (an ACK or a pseudo-ACK).
    pub fn is_echo(&self) -> bool {
        self.flags & FLAG_ECHO != 0
    }
}

/// Locate the Reflex hop of the IPv4/IPv6 UDP packet whose IP header is at `l3_off`:
/// [`WireError::Unsupported`] when the UDP destination port is not `int_port` or the INT is
/// not the Reflex encoding above (another domain, other instructions, more than one hop, an
/// original port other than 4791); [`WireError::Truncated`] / [`WireError::BadLength`] for
/// lengths that do not hold a BTH after the INT.
// Inlined into its callers: returned through memory, the view was read back with wider loads
// than the stores that wrote it, a store-forwarding stall that took half of NSF's egress
// samples (perf annotate, perf/dpdk-reflex.toml).
#[inline(always)]
pub fn locate(frame: &[u8], l3_off: usize, int_port: u16) -> Result<ReflexView, WireError> {
    // The common packet, IPv4 without options, read at fixed offsets in one bounds check: when
    // this finds the hop, the checks below all pass and find the same view (the proptest
    // `fixed_locate_matches_the_general_one`, which changes the IP header's bytes too).
    if let Some(v) = locate_v4_fixed(frame, l3_off, int_port) {
        return Ok(v);
    }
    locate_checked(frame, l3_off, int_port)
}

/// From the IPv4 header to the end of the BTH of a Reflex packet over IPv4 without options.
const V4_SPAN: usize = super::ipv4::HEADER_LEN + udp::HEADER_LEN + INT_LEN + BTH_LEN;

/// [`locate`] for an IPv4 header without options, read as one array: version 4 and IHL 5, UDP,
/// not a fragment, the total length within the frame, the UDP length within the datagram and
/// long enough for the INT and a BTH, the destination port `int_port`, and the INT's fixed
/// header as [`fixed_int`] compares it. `None` for anything else, which the general path then
/// answers (with its precise error): `Some(v)` only where [`locate`] gives `Ok(v)`.
///
/// A caller on a fast path may take it first and keep the general case out of line: merged
/// with `locate`'s general answer, which comes back through memory, the view is spilled and
/// read back with wider loads than the stores that wrote it (a store-forwarding stall).
#[inline(always)]
pub fn locate_v4_fixed(frame: &[u8], l3_off: usize, int_port: u16) -> Option<ReflexView> {
    const U: usize = super::ipv4::HEADER_LEN;
    const S: usize = U + udp::HEADER_LEN;
    let rest = frame.get(l3_off..)?;
    let h: &[u8; V4_SPAN] = rest.first_chunk()?;
    let ip: &[u8; super::ipv4::HEADER_LEN] = h.first_chunk()?;
    let total = u16::from_be_bytes([h[2], h[3]]) as usize;
    let ulen = u16::from_be_bytes([h[U + 4], h[U + 5]]) as usize;
    let ok = h[0] == 0x45
        && h[9] == super::ipv4::PROTO_UDP
        && !super::ipv4::is_fragment_fixed(ip)
        && total <= rest.len()
        && ulen >= udp::HEADER_LEN + INT_LEN + BTH_LEN
        && ulen + U <= total
        && u16::from_be_bytes([h[U + 2], h[U + 3]]) == int_port
        && h[S] & 0xfc == (TYPE_INT_MD << 4) | (NPT_UDP_PORT << 2)
        && h[S + 1] == (INT_LEN / 4) as u8
        && h[S + 2..S + 4] == roce::ROCE_V2_PORT.to_be_bytes()
        && h[S + 4] >> 4 == VERSION
        && h[S + 6] & 0x1f == (HOP_LEN / 4) as u8
        && h[S + 8..S + 10] == int::INS_EGRESS_TS.to_be_bytes()
        && h[S + 10..S + 12] == DS_ID.to_be_bytes()
        && h[S + 12..S + 14] == DS_INS_REQUESTER_QPN.to_be_bytes();
    if !ok {
        return None;
    }
    const TS: usize = S + SHIM_LEN + MD_HEADER_LEN;
    let ts = u64::from_be_bytes(*h[TS..].first_chunk::<8>()?);
    let qpn = u32::from_be_bytes(*h[TS + 8..].first_chunk::<4>()?) & roce::QPN_MASK;
    Some(ReflexView {
        udp_off: l3_off + U,
        ts_off: l3_off + TS,
        bth_off: l3_off + S + INT_LEN,
        flags: u16::from_be_bytes([h[S + 14], h[S + 15]]),
        hop: ReflexHop { ts, qpn },
    })
}

/// [`locate`] through the checked UDP walk (IPv6, IPv4 options, anything the fixed read
/// declined).
#[inline(never)]
fn locate_checked(frame: &[u8], l3_off: usize, int_port: u16) -> Result<ReflexView, WireError> {
    let lay = locate_udp(frame, l3_off)?;
    if be16(frame, lay.udp_off + 2) != Some(int_port) {
        return Err(WireError::Unsupported);
    }
    // The encoding's fixed header, compared at once: when it is there, the general checks below
    // all pass and find what this finds (the proptest `fixed_locate_matches_the_general_one`),
    // for about half the instructions; anything else takes them, and their precise error.
    if let Some(il) = fixed_int(frame, lay.udp_off) {
        return view_of(frame, &lay, &il);
    }
    locate_general(frame, &lay)
}

/// The Reflex INT after the UDP header at `udp_off` when its 16 header bytes are the
/// encoding's (the bits the general checks ignore left free: the shim's reserved bits, the
/// MD header's flags and RemainingHopCount, the DS Flags) and the datagram holds all 28 bytes:
/// the layout `int::locate_int_in` gives for it.
#[inline(always)]
fn fixed_int(frame: &[u8], udp_off: usize) -> Option<int::IntLayout> {
    let ulen = be16(frame, udp_off + 4)? as usize;
    let shim_off = udp_off + udp::HEADER_LEN;
    let h = frame
        .get(shim_off..udp_off + ulen)?
        .first_chunk::<INT_LEN>()?;
    let ok = h[0] & 0xfc == (TYPE_INT_MD << 4) | (NPT_UDP_PORT << 2)
        && h[1] == (INT_LEN / 4) as u8
        && h[2..4] == roce::ROCE_V2_PORT.to_be_bytes()
        && h[4] >> 4 == VERSION
        && h[6] & 0x1f == (HOP_LEN / 4) as u8
        && h[8..10] == int::INS_EGRESS_TS.to_be_bytes()
        && h[10..12] == DS_ID.to_be_bytes()
        && h[12..14] == DS_INS_REQUESTER_QPN.to_be_bytes();
    ok.then_some(int::IntLayout {
        udp_off,
        shim_off,
        stack_off: shim_off + SHIM_LEN + MD_HEADER_LEN,
        stack_len: HOP_LEN,
        int_len: INT_LEN,
        instructions: int::INS_EGRESS_TS,
        hop_len: HOP_LEN,
    })
}

/// [`locate`] after the port check, through the general INT checks.
#[inline(never)]
fn locate_general(frame: &[u8], lay: &int::UdpLayout) -> Result<ReflexView, WireError> {
    let il = int::locate_int_in(frame, lay)?;
    let shim = il.shim_off;
    let md = shim + SHIM_LEN;
    if be16(frame, shim + 2) != Some(roce::ROCE_V2_PORT)
        || il.int_len != INT_LEN
        || il.hop_len != HOP_LEN
        || il.instructions != int::INS_EGRESS_TS
        || be16(frame, md + 6) != Some(DS_ID)
        || be16(frame, md + 8) != Some(DS_INS_REQUESTER_QPN)
    {
        return Err(WireError::Unsupported);
    }
    view_of(frame, lay, &il)
}

/// The view of a Reflex INT located as `il` (its header checked).
#[inline(always)]
fn view_of(
    frame: &[u8],
    lay: &int::UdpLayout,
    il: &int::IntLayout,
) -> Result<ReflexView, WireError> {
    let shim = il.shim_off;
    let md = shim + SHIM_LEN;
    let flags = be16(frame, md + 10).ok_or(WireError::Truncated)?;
    let ts_off = il.stack_off;
    let hi = be32(frame, ts_off).ok_or(WireError::Truncated)? as u64;
    let lo = be32(frame, ts_off + 4).ok_or(WireError::Truncated)? as u64;
    let qpn = be32(frame, ts_off + 8).ok_or(WireError::Truncated)? & roce::QPN_MASK;
    let bth_off = shim + INT_LEN;
    let ulen = be16(frame, lay.udp_off + 4).unwrap_or(0) as usize;
    if lay.udp_off + ulen < bth_off + BTH_LEN || frame.len() < bth_off + BTH_LEN {
        return Err(WireError::Truncated);
    }
    Ok(ReflexView {
        udp_off: lay.udp_off,
        ts_off,
        bth_off,
        flags,
        hop: ReflexHop {
            ts: (hi << 32) | lo,
            qpn,
        },
    })
}

/// The DS Flags of a Reflex INT whose UDP header is at `udp_off`, read where [`locate`] would
/// find them (the encoding's fixed layout: shim, INT-MD header, flags at its bytes 10..12),
/// without validating anything: a cheap test that lets a stage skip [`locate`] for packets it
/// would ignore anyway (an ESW's ingress looks for reflected hops, and most packets are data).
/// `None` when the frame is too short to hold them.
#[inline]
pub fn peek_flags(frame: &[u8], udp_off: usize) -> Option<u16> {
    be16(frame, udp_off + udp::HEADER_LEN + SHIM_LEN + 10)
}

/// Overwrite the hop's timestamp (NDT's egress time). The ICRC does not cover it.
pub fn set_ts(frame: &mut [u8], v: &ReflexView, ts: u64) -> Result<(), WireError> {
    put_ts(frame, v.ts_off, ts)
}

fn put_ts(frame: &mut [u8], ts_off: usize, ts: u64) -> Result<(), WireError> {
    let b = frame
        .get_mut(ts_off..ts_off + 8)
        .ok_or(WireError::Truncated)?;
    b.copy_from_slice(&ts.to_be_bytes());
    Ok(())
}

/// As [`set_ts`], for a packet [`locate`] already accepted, by its UDP header's offset (the
/// timestamp's place is fixed in the encoding: after the shim and the INT-MD header).
pub fn set_ts_at(frame: &mut [u8], udp_off: usize, ts: u64) -> Result<(), WireError> {
    put_ts(
        frame,
        udp_off + udp::HEADER_LEN + SHIM_LEN + MD_HEADER_LEN,
        ts,
    )
}

/// The 28 INT bytes for `hop` with `flags`, original port 4791.
pub fn int_bytes(hop: ReflexHop, flags: u16) -> [u8; INT_LEN] {
    let mut b = [0u8; INT_LEN];
    b[0] = (TYPE_INT_MD << 4) | (NPT_UDP_PORT << 2);
    b[1] = (INT_LEN / 4) as u8;
    b[2..4].copy_from_slice(&roce::ROCE_V2_PORT.to_be_bytes());
    let w0 = ((VERSION as u32) << 28) | (((HOP_LEN / 4) as u32) << 8);
    b[4..8].copy_from_slice(&w0.to_be_bytes());
    b[8..10].copy_from_slice(&int::INS_EGRESS_TS.to_be_bytes());
    b[10..12].copy_from_slice(&DS_ID.to_be_bytes());
    b[12..14].copy_from_slice(&DS_INS_REQUESTER_QPN.to_be_bytes());
    b[14..16].copy_from_slice(&flags.to_be_bytes());
    b[16..24].copy_from_slice(&hop.ts.to_be_bytes());
    b[24..28].copy_from_slice(&(hop.qpn & roce::QPN_MASK).to_be_bytes());
    b
}

/// Fix the UDP port (to `int_port`), IP and UDP lengths (+ [`INT_LEN`]) and checksums of a frame
/// whose INT bytes were just placed after its UDP header (`lay`: its headers, located before).
fn finish_insert(frame: &mut [u8], lay: &int::UdpLayout, int_port: u16) -> Result<(), WireError> {
    put16(frame, lay.udp_off + 2, int_port);
    adjust_lengths(frame, lay, INT_LEN as isize)?;
    refresh_udp_checksum(frame, lay);
    Ok(())
}

/// Insert the Reflex INT (the source's hop) into the RoCEv2 packet in `buf` whose IP header is
/// at `l3_off`: after the UDP header, UDP destination port `int_port`, lengths and checksums
/// updated. Needs [`INT_LEN`] bytes of headroom. Errors leave the frame unchanged.
pub fn insert<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    int_port: u16,
    hop: ReflexHop,
    flags: u16,
) -> Result<(), WireError> {
    let lay = locate_udp(buf.data(), l3_off)?;
    if be16(buf.data(), lay.udp_off + 2) != Some(roce::ROCE_V2_PORT) {
        return Err(WireError::Unsupported);
    }
    check_room(buf.data(), &lay)?;
    if buf.headroom() < INT_LEN {
        return Err(WireError::NoRoom);
    }
    let at = lay.udp_off + udp::HEADER_LEN;
    open_gap(buf, at, INT_LEN)?;
    let d = buf.data_mut();
    d[at..at + INT_LEN].copy_from_slice(&int_bytes(hop, flags));
    finish_insert(d, &lay, int_port)
}

fn check_room(frame: &[u8], lay: &int::UdpLayout) -> Result<(), WireError> {
    let ipl = be16(frame, lay.l3_off + if lay.v4 { 2 } else { 4 }).unwrap_or(u16::MAX);
    let ul = be16(frame, lay.udp_off + 4).unwrap_or(u16::MAX);
    if ipl as usize + INT_LEN > u16::MAX as usize || ul as usize + INT_LEN > u16::MAX as usize {
        return Err(WireError::BadLength);
    }
    Ok(())
}

/// Copy the RoCEv2 `frame` (IP header at `l3_off`) into `out` with the Reflex INT inserted;
/// returns the new length (`frame.len() + INT_LEN`).
pub fn insert_copy(
    frame: &[u8],
    l3_off: usize,
    int_port: u16,
    hop: ReflexHop,
    flags: u16,
    out: &mut [u8],
) -> Result<usize, WireError> {
    let lay = locate_udp(frame, l3_off)?;
    if be16(frame, lay.udp_off + 2) != Some(roce::ROCE_V2_PORT) {
        return Err(WireError::Unsupported);
    }
    check_room(frame, &lay)?;
    let n = frame.len() + INT_LEN;
    let out = out.get_mut(..n).ok_or(WireError::NoRoom)?;
    let at = lay.udp_off + udp::HEADER_LEN;
    out[..at].copy_from_slice(&frame[..at]);
    out[at..at + INT_LEN].copy_from_slice(&int_bytes(hop, flags));
    out[at + INT_LEN..].copy_from_slice(&frame[at..]);
    finish_insert(out, &lay, int_port)?;
    Ok(n)
}

/// The length of a pseudo-ACK over IPv4 (`v4`) or IPv6: Ethernet, IP, UDP, the Reflex INT, BTH,
/// AETH, ICRC.
pub const fn pseudo_ack_len(v4: bool) -> usize {
    let ip = if v4 {
        super::ipv4::HEADER_LEN
    } else {
        super::ipv6::HEADER_LEN
    };
    super::ethernet::HEADER_LEN
        + ip
        + udp::HEADER_LEN
        + INT_LEN
        + BTH_LEN
        + roce::AETH_LEN
        + super::icrc::ICRC_LEN
}

/// The pseudo-ACK NSF answers the Reflex data packet `data` (IP header at `l3_off`, located as
/// `v`) with (section III-C, docs/wire-formats.md): an RC ACK to the requester's QP (the hop's
/// QPN), the data packet's PSN, P_Key and UDP source port, IP addresses swapped, DSCP `dscp`,
/// Not-ECT, the hop reflected with DS Flags NSF | ECHO, a valid ICRC. Ethernet addresses are the
/// caller's (`src_mac`, `dst_mac`: it routes the packet). Returns the length written to `out`
/// (untagged Ethernet, IP header at 14: [`pseudo_ack_len`]).
pub fn build_pseudo_ack(
    data: &[u8],
    l3_off: usize,
    v: &ReflexView,
    dscp: u8,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    out: &mut [u8],
) -> Result<usize, WireError> {
    let v4 = ip_version_is_4(data, l3_off)?;
    let total = pseudo_ack_len(v4);
    let out = out.get_mut(..total).ok_or(WireError::NoRoom)?;
    write_pseudo_ack(data, l3_off, v, dscp, src_mac, dst_mac, v4, out)?;
    Ok(total)
}

/// [`build_pseudo_ack`] straight into `buf`, an empty packet buffer (the frame is appended to
/// it): no scratch copy. Returns whether it is IPv4 (else IPv6). On an error the buffer may hold
/// part of a frame: the caller frees it.
#[inline]
pub fn build_pseudo_ack_in<B: PacketBuf + ?Sized>(
    data: &[u8],
    l3_off: usize,
    v: &ReflexView,
    dscp: u8,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    buf: &mut B,
) -> Result<bool, WireError> {
    let v4 = ip_version_is_4(data, l3_off)?;
    let out = buf.append(pseudo_ack_len(v4)).ok_or(WireError::NoRoom)?;
    write_pseudo_ack(data, l3_off, v, dscp, src_mac, dst_mac, v4, out)?;
    Ok(v4)
}

/// Whether the IP header at `l3_off` is IPv4 (`Ok(false)`: IPv6).
#[inline(always)]
fn ip_version_is_4(data: &[u8], l3_off: usize) -> Result<bool, WireError> {
    match data.get(l3_off).map(|b| b >> 4) {
        Some(4) => Ok(true),
        Some(6) => Ok(false),
        Some(_) => Err(WireError::BadIpHeader),
        None => Err(WireError::Truncated),
    }
}

/// The pseudo-ACK into `out`, exactly [`pseudo_ack_len`]`(v4)` bytes: the ACK written at the
/// front, its BTH, AETH and ICRC moved behind the INT's place, the INT written there (the ICRC
/// is the one of the ACK without INT, as for any packet carrying the Reflex INT).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn write_pseudo_ack(
    data: &[u8],
    l3_off: usize,
    v: &ReflexView,
    dscp: u8,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    v4: bool,
    out: &mut [u8],
) -> Result<(), WireError> {
    let bth = roce::Bth::new_checked(data.get(v.bth_off..).ok_or(WireError::Truncated)?)?;
    let sport = be16(data, v.udp_off).ok_or(WireError::Truncated)?;
    let int_port = be16(data, v.udp_off + 2).ok_or(WireError::Truncated)?;
    let spec = AckSpec {
        dest_qp: v.hop.qpn,
        psn: bth.psn(),
        syndrome: Syndrome::ACK_NO_CREDIT,
        msn: 0,
        pkey: bth.pkey(),
    };
    let l3 = data.get(l3_off..).ok_or(WireError::Truncated)?;
    let n = if v4 {
        let ip = super::ipv4::Ipv4Packet::new_checked(l3)?;
        let a = RoceAddrs::<Ipv4Addr> {
            src_mac: MacAddr(src_mac),
            dst_mac: MacAddr(dst_mac),
            src_ip: ip.dst_addr(),
            dst_ip: ip.src_addr(),
            udp_sport: sport,
            dscp,
            ecn: 0,
        };
        roce::build_ack_v4(out, &a, &spec)?
    } else {
        let ip = super::ipv6::Ipv6Packet::new_checked(l3)?;
        let a = RoceAddrs::<Ipv6Addr> {
            src_mac: MacAddr(src_mac),
            dst_mac: MacAddr(dst_mac),
            src_ip: ip.dst_addr(),
            dst_ip: ip.src_addr(),
            udp_sport: sport,
            dscp,
            ecn: 0,
        };
        roce::build_ack_v6(out, &a, &spec)?
    };
    // The ACK's IP header is at 14 (build_ack_* writes an untagged frame, no IPv4 options):
    // the INT goes in at the offsets just written, what `insert_copy` would do after locating
    // them again (the proptest `pseudo_ack_matches_the_general_insert` holds it to that).
    let l3_off = super::ethernet::HEADER_LEN;
    let lay = int::UdpLayout {
        v4,
        l3_off,
        udp_off: l3_off
            + if v4 {
                super::ipv4::HEADER_LEN
            } else {
                super::ipv6::HEADER_LEN
            },
    };
    let at = lay.udp_off + udp::HEADER_LEN;
    if at > n || n + INT_LEN != out.len() {
        return Err(WireError::Truncated);
    }
    out.copy_within(at..n, at + INT_LEN);
    out[at..at + INT_LEN].copy_from_slice(&int_bytes(v.hop, FLAG_NSF | FLAG_ECHO));
    finish_insert(out, &lay, int_port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapBuf;
    use crate::wire::icrc;
    use crate::wire::roce::{build_roce_v4, build_roce_v6, opcode, BthRepr, PKEY_DEFAULT};

    fn data_v4() -> Vec<u8> {
        let a = RoceAddrs {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(10, 0, 0, 5),
            dst_ip: Ipv4Addr::new(10, 1, 0, 7),
            udp_sport: 49200,
            dscp: 26,
            ecn: 2,
        };
        let bth = BthRepr {
            opcode: opcode::RC_RDMA_WRITE_MIDDLE,
            pkey: PKEY_DEFAULT,
            dest_qp: 0x80_0456,
            psn: 77,
            ..BthRepr::default()
        };
        let mut buf = vec![0u8; 2048];
        let n = build_roce_v4(&mut buf, &a, &bth, &[0xab; 1024]).unwrap();
        buf.truncate(n);
        buf
    }

    const HOP: ReflexHop = ReflexHop {
        ts: 0x0102_0304_0506_0708,
        qpn: 0x123,
    };

    #[test]
    fn insert_locate_set_ts_strip_round_trip() {
        let orig = data_v4();
        let mut b = HeapBuf::from_bytes(&orig);
        insert(&mut b, 14, 5000, HOP, 0).unwrap();
        assert_eq!(b.len(), orig.len() + INT_LEN);
        let v = locate(b.data(), 14, 5000).unwrap();
        assert_eq!((v.hop, v.flags, v.bth_off), (HOP, 0, 14 + 20 + 8 + 28));
        assert_eq!(locate(b.data(), 14, 5001), Err(WireError::Unsupported));
        // The IPv4 header checksum is still valid.
        let ip = crate::wire::ipv4::Ipv4Packet::new_checked(&b.data()[14..]).unwrap();
        assert!(ip.verify_checksum());
        set_ts(b.data_mut(), &v, 42).unwrap();
        assert_eq!(locate(b.data(), 14, 5000).unwrap().hop.ts, 42);
        // insert_copy gives the same bytes as insert.
        let mut out = vec![0u8; 4096];
        let n = insert_copy(&orig, 14, 5000, ReflexHop { ts: 42, ..HOP }, 0, &mut out).unwrap();
        assert_eq!(&out[..n], b.data());
        int::strip_int(&mut b, 14).unwrap();
        assert_eq!(
            b.data(),
            &orig[..],
            "stripping restores the original bit for bit"
        );
        assert_eq!(icrc::verify(b.data(), 14), Ok(true));
    }

    #[test]
    fn pseudo_ack_v4_and_v6() {
        let mut b = HeapBuf::from_bytes(&data_v4());
        insert(&mut b, 14, 5000, HOP, 0).unwrap();
        let v = locate(b.data(), 14, 5000).unwrap();
        let mut out = [0u8; 256];
        let n = build_pseudo_ack(b.data(), 14, &v, 48, [2; 6], [3; 6], &mut out).unwrap();
        assert_eq!(n, 62 + INT_LEN);
        let f = &out[..n];
        let pv = locate(f, 14, 5000).unwrap();
        assert_eq!((pv.hop, pv.flags), (HOP, FLAG_NSF | FLAG_ECHO));
        let bth = roce::Bth::new_checked(&f[pv.bth_off..]).unwrap();
        assert_eq!((bth.opcode(), bth.dest_qp(), bth.psn()), (0x11, 0x123, 77));
        let ip = crate::wire::ipv4::Ipv4Packet::new_checked(&f[14..]).unwrap();
        assert_eq!(ip.src_addr(), Ipv4Addr::new(10, 1, 0, 7));
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(10, 0, 0, 5));
        assert_eq!(be16(f, 34), Some(49200), "the data's UDP source port");
        let mut s = HeapBuf::from_bytes(f);
        int::strip_int(&mut s, 14).unwrap();
        assert_eq!(icrc::verify(s.data(), 14), Ok(true));

        // IPv6.
        let a = RoceAddrs {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: "2001:db8::5".parse::<Ipv6Addr>().unwrap(),
            dst_ip: "2001:db8:1::7".parse::<Ipv6Addr>().unwrap(),
            udp_sport: 49201,
            dscp: 26,
            ecn: 2,
        };
        let bth = BthRepr {
            opcode: opcode::RC_RDMA_WRITE_MIDDLE,
            pkey: PKEY_DEFAULT,
            dest_qp: 9,
            psn: 5,
            ..BthRepr::default()
        };
        let mut buf = vec![0u8; 512];
        let n6 = build_roce_v6(&mut buf, &a, &bth, &[1; 64]).unwrap();
        let mut b6 = HeapBuf::from_bytes(&buf[..n6]);
        insert(&mut b6, 14, 5000, HOP, 0).unwrap();
        let v6 = locate(b6.data(), 14, 5000).unwrap();
        let n = build_pseudo_ack(b6.data(), 14, &v6, 48, [2; 6], [3; 6], &mut out).unwrap();
        let mut s = HeapBuf::from_bytes(&out[..n]);
        assert_eq!(locate(s.data(), 14, 5000).unwrap().hop, HOP);
        int::strip_int(&mut s, 14).unwrap();
        assert_eq!(icrc::verify(s.data(), 14), Ok(true));
    }

    /// The general form of [`build_pseudo_ack`]'s INT insertion: the ACK built, then
    /// [`insert_copy`] (which locates its headers again).
    fn pseudo_ack_ref(data: &[u8], v: &ReflexView, dscp: u8, out: &mut [u8]) -> usize {
        let bth = roce::Bth::new_checked(&data[v.bth_off..]).unwrap();
        let spec = AckSpec {
            dest_qp: v.hop.qpn,
            psn: bth.psn(),
            syndrome: Syndrome::ACK_NO_CREDIT,
            msn: 0,
            pkey: bth.pkey(),
        };
        let sport = be16(data, v.udp_off).unwrap();
        let mut ack = [0u8; 128];
        let n = if data[14] >> 4 == 4 {
            let ip = crate::wire::ipv4::Ipv4Packet::new_checked(&data[14..]).unwrap();
            let a = RoceAddrs::<Ipv4Addr> {
                src_mac: MacAddr([2; 6]),
                dst_mac: MacAddr([3; 6]),
                src_ip: ip.dst_addr(),
                dst_ip: ip.src_addr(),
                udp_sport: sport,
                dscp,
                ecn: 0,
            };
            roce::build_ack_v4(&mut ack, &a, &spec).unwrap()
        } else {
            let ip = crate::wire::ipv6::Ipv6Packet::new_checked(&data[14..]).unwrap();
            let a = RoceAddrs::<Ipv6Addr> {
                src_mac: MacAddr([2; 6]),
                dst_mac: MacAddr([3; 6]),
                src_ip: ip.dst_addr(),
                dst_ip: ip.src_addr(),
                udp_sport: sport,
                dscp,
                ecn: 0,
            };
            roce::build_ack_v6(&mut ack, &a, &spec).unwrap()
        };
        let port = be16(data, v.udp_off + 2).unwrap();
        insert_copy(&ack[..n], 14, port, v.hop, FLAG_NSF | FLAG_ECHO, out).unwrap()
    }

    proptest::proptest! {
        /// The pseudo-ACK with its INT placed at the offsets the ACK builder wrote is the one
        /// the general insertion gives, over IPv4 and IPv6, any hop, PSN, QPN, port and DSCP.
        #[test]
        fn pseudo_ack_matches_the_general_insert(
            ts in proptest::prelude::any::<u64>(),
            qpn in proptest::prelude::any::<u32>(),
            psn in 0u32..0x100_0000,
            sport in proptest::prelude::any::<u16>(),
            port in 1u16..,
            dscp in 0u8..64,
            v6 in proptest::prelude::any::<bool>(),
        ) {
            let bth = BthRepr {
                opcode: opcode::RC_RDMA_WRITE_MIDDLE,
                pkey: PKEY_DEFAULT,
                dest_qp: 9,
                psn,
                ..BthRepr::default()
            };
            let mut buf = vec![0u8; 2048];
            let n = if v6 {
                let a = RoceAddrs {
                    src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                    dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                    src_ip: "2001:db8::5".parse::<Ipv6Addr>().unwrap(),
                    dst_ip: "2001:db8:1::7".parse::<Ipv6Addr>().unwrap(),
                    udp_sport: sport,
                    dscp: 26,
                    ecn: 2,
                };
                build_roce_v6(&mut buf, &a, &bth, &[1; 64]).unwrap()
            } else {
                let a = RoceAddrs {
                    src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                    dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                    src_ip: Ipv4Addr::new(10, 0, 0, 5),
                    dst_ip: Ipv4Addr::new(10, 1, 0, 7),
                    udp_sport: sport,
                    dscp: 26,
                    ecn: 2,
                };
                build_roce_v4(&mut buf, &a, &bth, &[1; 64]).unwrap()
            };
            let mut b = HeapBuf::from_bytes(&buf[..n]);
            insert(&mut b, 14, port.max(1), ReflexHop { ts, qpn: qpn & roce::QPN_MASK }, 0).unwrap();
            let port = port.max(1);
            if port == roce::ROCE_V2_PORT {
                return Ok(());
            }
            let v = locate(b.data(), 14, port).unwrap();
            let mut got = [0u8; 256];
            let mut want = [0u8; 256];
            let n1 = build_pseudo_ack(b.data(), 14, &v, dscp, [2; 6], [3; 6], &mut got).unwrap();
            let n2 = pseudo_ack_ref(b.data(), &v, dscp, &mut want);
            proptest::prop_assert_eq!(&got[..n1], &want[..n2]);
            // Straight into a packet buffer: the same bytes, and the parse result read at the
            // builder's offsets is the parser's.
            let mut pb = HeapBuf::with_capacity(512);
            let v4 = build_pseudo_ack_in(b.data(), 14, &v, dscp, [2; 6], [3; 6], &mut pb).unwrap();
            proptest::prop_assert_eq!(v4, !v6);
            proptest::prop_assert_eq!(pb.data(), &want[..n2]);
            let o = crate::wire::parse::ParseOptions::default();
            proptest::prop_assert_eq!(
                crate::wire::parse::parse_built_udp(pb.data(), v4, &o),
                crate::wire::parse::parse(pb.data(), &o)
            );
        }
    }

    /// [`locate`] through the general INT checks only (what it was before the fixed header).
    fn locate_ref(frame: &[u8], l3_off: usize, port: u16) -> Result<ReflexView, WireError> {
        let lay = locate_udp(frame, l3_off)?;
        if be16(frame, lay.udp_off + 2) != Some(port) {
            return Err(WireError::Unsupported);
        }
        locate_general(frame, &lay)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// The fixed-offset shortcuts (the IPv4 headers and the INT's, and the INT's alone) find
        /// what the general checks find, and refuse what they refuse with the same error:
        /// Reflex frames (IPv4, IPv6) with up to four bytes of the IP header, the UDP header, the
        /// INT or the BTH changed (biased to the bits that matter), cut anywhere in the headers
        /// or by a few bytes at the end.
        #[test]
        fn fixed_locate_matches_the_general_one(
            v6 in proptest::prelude::any::<bool>(),
            flags in proptest::prelude::any::<u16>(),
            edits in proptest::collection::vec((0usize..92, proptest::prelude::any::<u8>(), 0u8..4), 0..5),
            cut in 0usize..120,
        ) {
            let mut buf = vec![0u8; 2048];
            let n = if v6 {
                let a = RoceAddrs {
                    src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                    dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                    src_ip: "2001:db8::5".parse::<Ipv6Addr>().unwrap(),
                    dst_ip: "2001:db8:1::7".parse::<Ipv6Addr>().unwrap(),
                    udp_sport: 1,
                    dscp: 26,
                    ecn: 2,
                };
                let bth = BthRepr { opcode: opcode::RC_RDMA_WRITE_MIDDLE, ..BthRepr::default() };
                build_roce_v6(&mut buf, &a, &bth, &[1; 16]).unwrap()
            } else {
                let d = data_v4();
                buf[..d.len()].copy_from_slice(&d);
                d.len()
            };
            let mut b = HeapBuf::from_bytes(&buf[..n]);
            insert(&mut b, 14, 5000, HOP, flags).unwrap();
            let mut f = b.data().to_vec();
            let udp_off = if v6 { 54 } else { 34 };
            for (i, v, mode) in edits {
                let at = 14 + i;
                if let Some(x) = f.get_mut(at) {
                    *x = match mode {
                        0 => v,
                        1 => *x ^ (1 << (v % 8)),
                        2 => x.wrapping_add(1),
                        _ => x.wrapping_sub(1),
                    };
                }
            }
            // Cut inside the headers now and then (most cuts keep the frame whole).
            let keep = if cut < 90 {
                (udp_off + cut).min(f.len())
            } else if cut < 100 {
                f.len() - (cut - 90)
            } else {
                f.len()
            };
            let f = &f[..keep];
            proptest::prop_assert_eq!(locate(f, 14, 5000), locate_ref(f, 14, 5000));
        }
    }

    /// Every prefix of a Reflex frame, and frames with a changed INT byte, are refused or
    /// located without panicking.
    #[test]
    fn malformed_never_panics() {
        let mut b = HeapBuf::from_bytes(&data_v4());
        insert(&mut b, 14, 5000, HOP, 0).unwrap();
        let f = b.data().to_vec();
        for n in 0..f.len() {
            let _ = locate(&f[..n], 14, 5000);
        }
        for i in 42..42 + INT_LEN {
            for x in [0u8, 0xff, f[i] ^ 1] {
                let mut g = f.clone();
                g[i] = x;
                let _ = locate(&g, 14, 5000);
            }
        }
        let mut g = f.clone();
        g[42 + 10] = 0; // another DS ID
        assert_eq!(locate(&g, 14, 5000), Err(WireError::Unsupported));
    }
}
