//! MLCC's INT hop record, the Switch-INT feedback packet and the credit fields of ACKs (paper
//! 001, section 3; our encoding, docs/wire-formats.md "MLCC: INT, Switch-INT feedback and the
//! credit fields", version 1).
//!
//! ```text
//! INT (INT v2.1 MD over UDP, super::int), the MLCC domain:
//!   MD header: instructions 0x9400 (node id | queue id + occupancy | egress timestamp),
//!              DS ID 0x4D4C ("ML"), DS Instruction 0xC000 (tx bytes | link rate), HopML 7,
//!              DS Flags = 0x8000 | C_D (15 bits) from the receiver-side DCI, 0 elsewhere
//!   hop (28): node id (4) | queue id (1) + occupancy in bytes (3, saturating)
//!             | egress timestamp ns (8) | tx bytes of the egress port (8) | link rate Mbit/s (4)
//!
//! Switch-INT (sender-side DCI -> sender): a CNP (BTH opcode 0x81, BECN, P_Key 0xFFFF, PSN 0)
//! whose 16 reserved bytes are a header, followed by the hop records, then the ICRC:
//!   0-1 0x4D4C | 2 version 1 | 3 hop count | 4-5 INT instructions | 6-7 DS Instruction
//!   | 8 HopML | 9 flags (0x80 stack truncated, 0x40 INT E bit) | 10-11 0 | 12-15 data PSN
//!   BTH.DestQP = the data packet's DestQP (the responder's QP; see docs: a switch cannot know
//!   the requester's QPN), IP addresses swapped, the data's UDP source port.
//!
//! ACK credit extension (MCETH, 20 bytes after the AETH of an RC ACK, covered by the ICRC):
//!   0-1 0x4D4C | 2 version 1 | 3 flags (0x80 C_R/R_credit valid, 0x40 R_DQM valid) | 4 0
//!   | 5-7 the responder's QPN (the data's DestQP: with the addresses it names the flow)
//!   | 8-9 C_R (15 bits) | 10-11 0 | 12-15 R_credit kbit/s | 16-19 R_DQM kbit/s
//! ```
//!
//! Everything checks lengths before reading and never allocates.

use super::int::{
    self, HopMetadata, IntConfig, IntLayout, INS_EGRESS_TS, INS_NODE_ID, INS_QUEUE, MD_HEADER_LEN,
    SHIM_LEN,
};
use super::roce::{self, opcode, BthRepr, RoceAddrs, AETH_LEN, BTH_LEN, CNP_ECN, PKEY_DEFAULT};
use super::{be16, be32, icrc, put16, WireError};
use crate::packet::PacketBuf;
use crate::wire::ethernet::MacAddr;
use std::net::{Ipv4Addr, Ipv6Addr};

/// INT Domain Specific ID of the MLCC domain ("ML"); also the magic of Switch-INT and MCETH.
pub const DS_ID: u16 = 0x4D4C;
/// Standard instructions of an MLCC hop.
pub const INSTRUCTIONS: u16 = INS_NODE_ID | INS_QUEUE | INS_EGRESS_TS;
/// DS Instruction bit 0: tx bytes of the egress port (8 bytes).
pub const DS_INS_TX_BYTES: u16 = 0x8000;
/// DS Instruction bit 1: link rate of the egress port, Mbit/s (4 bytes).
pub const DS_INS_LINK_RATE: u16 = 0x4000;
/// DS Instruction of an MLCC hop.
pub const DS_INSTRUCTION: u16 = DS_INS_TX_BYTES | DS_INS_LINK_RATE;
/// Domain-specific words per hop.
pub const DS_WORDS: u8 = 3;
/// One hop record.
pub const HOP_LEN: usize = 28;
/// Format version of Switch-INT and MCETH.
pub const VERSION: u8 = 1;
/// Switch-INT header (the CNP's 16 reserved bytes).
pub const FEEDBACK_HEADER_LEN: usize = 16;
/// Hop records a Switch-INT carries at most (more are cut, [`FB_FLAG_TRUNCATED`]).
pub const MAX_FEEDBACK_HOPS: usize = 8;
/// Switch-INT flag: the INT stack had more hops than [`MAX_FEEDBACK_HOPS`].
pub const FB_FLAG_TRUNCATED: u8 = 0x80;
/// Switch-INT flag: the INT's E bit (a hop found RemainingHopCount 0 and pushed nothing).
pub const FB_FLAG_E: u8 = 0x40;
/// MCETH length.
pub const MCETH_LEN: usize = 20;
/// Credits (C_R, C_D) count modulo 2^15.
pub const CREDIT_MASK: u16 = 0x7fff;
/// DS Flags bit: the INT carries a C_D.
pub const C_D_VALID: u16 = 0x8000;
/// MCETH flag: C_R and R_credit are the receiver's.
pub const MCETH_CREDIT: u8 = 0x80;
/// MCETH flag: R_DQM was written by the receiver-side DCI.
pub const MCETH_DQM: u8 = 0x40;
/// Largest queue occupancy a hop can say (24 bits).
pub const MAX_QLEN: u32 = 0x00ff_ffff;

/// One MLCC hop record: what an HPCC-style sender needs of a switch port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MlccHop {
    pub node_id: u32,
    pub queue_id: u8,
    /// Egress queue occupancy, bytes (saturates at [`MAX_QLEN`]).
    pub qlen: u32,
    /// Egress timestamp, ns.
    pub ts: u64,
    /// Bytes the egress port has sent so far.
    pub tx_bytes: u64,
    /// Egress link rate, Mbit/s.
    pub rate_mbps: u32,
}

impl MlccHop {
    /// The standard part and the domain part of the record.
    pub fn split(&self) -> (HopMetadata, [u8; 12]) {
        let std = HopMetadata {
            node_id: self.node_id,
            queue_id: self.queue_id,
            queue_occupancy: self.qlen.min(MAX_QLEN),
            egress_ts: self.ts,
            ..HopMetadata::default()
        };
        let mut ds = [0u8; 12];
        ds[..8].copy_from_slice(&self.tx_bytes.to_be_bytes());
        ds[8..].copy_from_slice(&self.rate_mbps.to_be_bytes());
        (std, ds)
    }

    /// The 28-byte record at fixed offsets: the bytes [`MlccHop::split`] and
    /// `HopMetadata::write` of [`INSTRUCTIONS`] give, followed by the domain part (the proptest
    /// `record_matches_the_bitmap_writer` holds it to them). The DCI writes one per packet.
    #[inline]
    pub fn record(&self) -> [u8; HOP_LEN] {
        let mut r = [0u8; HOP_LEN];
        let q = ((self.queue_id as u32) << 24) | (self.qlen.min(MAX_QLEN) & MAX_QLEN);
        r[0..4].copy_from_slice(&self.node_id.to_be_bytes());
        r[4..8].copy_from_slice(&q.to_be_bytes());
        r[8..16].copy_from_slice(&self.ts.to_be_bytes());
        r[16..24].copy_from_slice(&self.tx_bytes.to_be_bytes());
        r[24..28].copy_from_slice(&self.rate_mbps.to_be_bytes());
        r
    }

    /// Decode a 28-byte record.
    pub fn read(b: &[u8]) -> Result<MlccHop, WireError> {
        let b = b.get(..HOP_LEN).ok_or(WireError::Truncated)?;
        let h = HopMetadata::read(INSTRUCTIONS, b)?;
        let hi = be32(b, 16).unwrap_or(0) as u64;
        let lo = be32(b, 20).unwrap_or(0) as u64;
        Ok(MlccHop {
            node_id: h.node_id,
            queue_id: h.queue_id,
            qlen: h.queue_occupancy,
            ts: h.egress_ts,
            tx_bytes: (hi << 32) | lo,
            rate_mbps: be32(b, 24).unwrap_or(0),
        })
    }
}

/// The INT source configuration of the MLCC domain, with `c_d` in the DS Flags.
pub const fn int_config(int_port: u16, max_hops: u8, c_d: Option<u16>) -> IntConfig {
    let ds_flags = match c_d {
        Some(c) => C_D_VALID | (c & CREDIT_MASK),
        None => 0,
    };
    IntConfig {
        int_port,
        instructions: INSTRUCTIONS,
        max_hops,
        domain_id: DS_ID,
        ds_instruction: DS_INSTRUCTION,
        ds_words: DS_WORDS,
        ds_flags,
    }
}

/// A located MLCC INT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlccInt {
    pub layout: IntLayout,
    /// C_D, if the DS Flags carry one.
    pub c_d: Option<u16>,
    /// Hop records in the stack.
    pub hops: usize,
    /// The E bit (a hop could not push: RemainingHopCount exhausted).
    pub e_bit: bool,
    /// Offset of the BTH after the INT.
    pub bth_off: usize,
}

/// Locate the MLCC INT of the RoCEv2 packet whose IP header is at `l3_off`:
/// [`WireError::Unsupported`] when the UDP destination port is not `int_port`, the INT is of
/// another domain or other instructions, or the original port is not 4791.
pub fn locate(frame: &[u8], l3_off: usize, int_port: u16) -> Result<MlccInt, WireError> {
    let lay = int::locate_udp(frame, l3_off)?;
    if be16(frame, lay.udp_off + 2) != Some(int_port) {
        return Err(WireError::Unsupported);
    }
    let il = int::locate_int_in(frame, &lay)?;
    let md = il.shim_off + SHIM_LEN;
    if be16(frame, il.shim_off + 2) != Some(roce::ROCE_V2_PORT)
        || il.instructions != INSTRUCTIONS
        || il.hop_len != HOP_LEN
        || be16(frame, md + 6) != Some(DS_ID)
        || be16(frame, md + 8) != Some(DS_INSTRUCTION)
    {
        return Err(WireError::Unsupported);
    }
    let bth_off = il.shim_off + il.int_len;
    let ulen = be16(frame, lay.udp_off + 4).unwrap_or(0) as usize;
    if lay.udp_off + ulen < bth_off + BTH_LEN || frame.len() < bth_off + BTH_LEN {
        return Err(WireError::Truncated);
    }
    Ok(MlccInt {
        layout: il,
        c_d: be16(frame, md + 10)
            .filter(|f| f & C_D_VALID != 0)
            .map(|f| f & CREDIT_MASK),
        hops: il.stack_len / HOP_LEN,
        e_bit: frame.get(md).is_some_and(|b| b & 0x04 != 0),
        bth_off,
    })
}

/// Push `hop` onto the MLCC INT of the packet (see [`int::push_hop`]).
pub fn push<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    hop: &MlccHop,
) -> Result<bool, WireError> {
    let (std, ds) = hop.split();
    int::push_hop(buf, l3_off, &std, &ds)
}

/// Push `hop` onto the MLCC INT located as `il` (from [`locate`] or `int::insert_int_md` on
/// this frame, unchanged since): [`int::push_hop_at`].
pub fn push_at<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    il: &IntLayout,
    hop: &MlccHop,
) -> Result<bool, WireError> {
    let (std, ds) = hop.split();
    int::push_hop_at(buf, l3_off, il, &std, &ds)
}

/// Make the RoCEv2 packet (IP header at `l3_off`) an MLCC INT packet whose first hop is `hop`:
/// the INT source and its own hop in one pass, `c_d` in the DS Flags (the receiver-side DCI's
/// credit in the data, paper 001 section 3.2.2). The record is written at
/// fixed offsets ([`MlccHop::record`], [`int::insert_int_md_with_record`]): the bytes
/// [`int::insert_int_md_with_hop`] writes from [`MlccHop::split`], for about half the
/// instructions.
#[inline]
pub fn source<B: PacketBuf + ?Sized>(
    buf: &mut B,
    l3_off: usize,
    int_port: u16,
    max_hops: u8,
    c_d: Option<u16>,
    hop: &MlccHop,
) -> Result<(), WireError> {
    int::insert_int_md_with_record(
        buf,
        l3_off,
        &int_config(int_port, max_hops, c_d),
        &hop.record(),
    )
}

/// The `i`-th hop record (0 = newest) of a located INT.
pub fn hop(frame: &[u8], m: &MlccInt, i: usize) -> Option<MlccHop> {
    if i >= m.hops {
        return None;
    }
    let off = m.layout.stack_off + i * HOP_LEN;
    MlccHop::read(frame.get(off..off + HOP_LEN)?).ok()
}

/// The Switch-INT the sender-side DCI returns for the MLCC data packet `data` (IP header at
/// `l3_off`, its INT located as `m`, read before stripping): a CNP to the data's source whose
/// reserved bytes and payload carry the hop stack (at most [`MAX_FEEDBACK_HOPS`]), DSCP `dscp`,
/// a valid ICRC. Ethernet addresses are the caller's (it routes the packet). Returns the length
/// written to `out`.
pub fn build_switch_int(
    data: &[u8],
    l3_off: usize,
    m: &MlccInt,
    dscp: u8,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    out: &mut [u8],
) -> Result<usize, WireError> {
    let bth = roce::Bth::new_checked(data.get(m.bth_off..).ok_or(WireError::Truncated)?)?;
    let sport = be16(data, m.layout.udp_off).ok_or(WireError::Truncated)?;
    let n = m.hops.min(MAX_FEEDBACK_HOPS);
    let mut body = [0u8; FEEDBACK_HEADER_LEN + MAX_FEEDBACK_HOPS * HOP_LEN];
    let mut flags = 0u8;
    if m.hops > MAX_FEEDBACK_HOPS {
        flags |= FB_FLAG_TRUNCATED;
    }
    if m.e_bit {
        flags |= FB_FLAG_E;
    }
    body[0..2].copy_from_slice(&DS_ID.to_be_bytes());
    body[2] = VERSION;
    body[3] = n as u8;
    body[4..6].copy_from_slice(&INSTRUCTIONS.to_be_bytes());
    body[6..8].copy_from_slice(&DS_INSTRUCTION.to_be_bytes());
    body[8] = (HOP_LEN / 4) as u8;
    body[9] = flags;
    body[12..16].copy_from_slice(&(bth.psn() & roce::PSN_MASK).to_be_bytes());
    let stack = data
        .get(m.layout.stack_off..m.layout.stack_off + n * HOP_LEN)
        .ok_or(WireError::Truncated)?;
    body[FEEDBACK_HEADER_LEN..FEEDBACK_HEADER_LEN + stack.len()].copy_from_slice(stack);
    let body = &body[..FEEDBACK_HEADER_LEN + stack.len()];
    let bth_out = BthRepr {
        opcode: opcode::CNP,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: PKEY_DEFAULT,
        fecn: false,
        becn: true,
        dest_qp: bth.dest_qp(),
        ack_req: false,
        psn: 0,
    };
    let l3 = data.get(l3_off..).ok_or(WireError::Truncated)?;
    match l3.first().map(|b| b >> 4) {
        Some(4) => {
            let ip = super::ipv4::Ipv4Packet::new_checked(l3)?;
            let a = RoceAddrs::<Ipv4Addr> {
                src_mac: MacAddr(src_mac),
                dst_mac: MacAddr(dst_mac),
                src_ip: ip.dst_addr(),
                dst_ip: ip.src_addr(),
                udp_sport: sport,
                dscp,
                ecn: CNP_ECN,
            };
            roce::build_roce_v4(out, &a, &bth_out, body)
        }
        Some(6) => {
            let ip = super::ipv6::Ipv6Packet::new_checked(l3)?;
            let a = RoceAddrs::<Ipv6Addr> {
                src_mac: MacAddr(src_mac),
                dst_mac: MacAddr(dst_mac),
                src_ip: ip.dst_addr(),
                dst_ip: ip.src_addr(),
                udp_sport: sport,
                dscp,
                ecn: CNP_ECN,
            };
            roce::build_roce_v6(out, &a, &bth_out, body)
        }
        _ => Err(WireError::BadIpHeader),
    }
}

/// A decoded Switch-INT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SwitchInt<'a> {
    /// BTH.DestQP: the data packet's DestQP (the responder's QP).
    pub dest_qp: u32,
    /// PSN of the data packet the feedback was made from.
    pub data_psn: u32,
    pub flags: u8,
    /// The hop records, newest first (`len() / HOP_LEN` of them).
    pub stack: &'a [u8],
}

impl SwitchInt<'_> {
    /// Number of hop records.
    pub fn hops(&self) -> usize {
        self.stack.len() / HOP_LEN
    }
    /// The `i`-th record (0 = the hop nearest the DCI).
    pub fn hop(&self, i: usize) -> Option<MlccHop> {
        MlccHop::read(self.stack.get(i * HOP_LEN..(i + 1) * HOP_LEN)?).ok()
    }
}

/// Decode the Switch-INT whose BTH is at `bth_off` of a RoCEv2 packet (IP header at `l3_off`):
/// [`WireError::Unsupported`] when it is not a CNP with the MLCC header.
pub fn parse_switch_int(
    frame: &[u8],
    l3_off: usize,
    bth_off: usize,
) -> Result<SwitchInt<'_>, WireError> {
    let lay = icrc::IcrcLayout::locate(frame, l3_off)?;
    if lay.bth_off != bth_off {
        return Err(WireError::Unsupported);
    }
    let bth = roce::Bth::new_checked(frame.get(bth_off..).ok_or(WireError::Truncated)?)?;
    let h = bth_off + BTH_LEN;
    if bth.opcode() != opcode::CNP
        || lay.icrc_off < h + FEEDBACK_HEADER_LEN
        || be16(frame, h) != Some(DS_ID)
        || frame.get(h + 2) != Some(&VERSION)
    {
        return Err(WireError::Unsupported);
    }
    let n = *frame.get(h + 3).ok_or(WireError::Truncated)? as usize;
    let start = h + FEEDBACK_HEADER_LEN;
    if frame.get(h + 8) != Some(&((HOP_LEN / 4) as u8)) || start + n * HOP_LEN != lay.icrc_off {
        return Err(WireError::BadLength);
    }
    Ok(SwitchInt {
        dest_qp: bth.dest_qp(),
        data_psn: be32(frame, h + 12).unwrap_or(0) & roce::PSN_MASK,
        flags: frame.get(h + 9).copied().unwrap_or(0),
        stack: frame.get(start..start + n * HOP_LEN).unwrap_or(&[]),
    })
}

/// The credit fields of an ACK.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Mceth {
    pub flags: u8,
    /// The responder's QPN (the data packets' DestQP).
    pub qpn: u32,
    /// The receiver's credit C_R (15 bits).
    pub c_r: u16,
    /// The receiver's dequeue rate for the PFQ, kbit/s.
    pub r_credit_kbps: u32,
    /// The DCI's smoothed end-to-end rate, kbit/s.
    pub r_dqm_kbps: u32,
}

impl Mceth {
    /// The 16 bytes.
    pub fn bytes(&self) -> [u8; MCETH_LEN] {
        let mut b = [0u8; MCETH_LEN];
        b[0..2].copy_from_slice(&DS_ID.to_be_bytes());
        b[2] = VERSION;
        b[3] = self.flags;
        b[4..8].copy_from_slice(&(self.qpn & roce::QPN_MASK).to_be_bytes());
        b[8..10].copy_from_slice(&(self.c_r & CREDIT_MASK).to_be_bytes());
        b[12..16].copy_from_slice(&self.r_credit_kbps.to_be_bytes());
        b[16..20].copy_from_slice(&self.r_dqm_kbps.to_be_bytes());
        b
    }
}

/// Locate the MCETH of the RC ACK whose IP header is at `l3_off` (UDP port 4791): its offset
/// and contents. [`WireError::Unsupported`] when the packet is not an ACK with an MCETH.
pub fn locate_mceth(frame: &[u8], l3_off: usize) -> Result<(usize, Mceth), WireError> {
    let lay = icrc::IcrcLayout::locate(frame, l3_off)?;
    if be16(frame, lay.udp_off + 2) != Some(roce::ROCE_V2_PORT) {
        return Err(WireError::Unsupported);
    }
    let bth = roce::Bth::new_checked(frame.get(lay.bth_off..).ok_or(WireError::Truncated)?)?;
    let off = lay.bth_off + BTH_LEN + AETH_LEN;
    if bth.opcode() != opcode::RC_ACKNOWLEDGE
        || off + MCETH_LEN != lay.icrc_off
        || be16(frame, off) != Some(DS_ID)
        || frame.get(off + 2) != Some(&VERSION)
    {
        return Err(WireError::Unsupported);
    }
    Ok((
        off,
        Mceth {
            flags: frame[off + 3],
            qpn: be32(frame, off + 4).unwrap_or(0) & roce::QPN_MASK,
            c_r: be16(frame, off + 8).unwrap_or(0) & CREDIT_MASK,
            r_credit_kbps: be32(frame, off + 12).unwrap_or(0),
            r_dqm_kbps: be32(frame, off + 16).unwrap_or(0),
        },
    ))
}

/// Build an RC ACK over IPv4 carrying `m` after its AETH (the receiver's ACK, for modeled hosts
/// and tests). Returns the frame length (82).
pub fn build_ack_v4(
    buf: &mut [u8],
    a: &RoceAddrs<Ipv4Addr>,
    s: &roce::AckSpec,
    m: &Mceth,
) -> Result<usize, WireError> {
    roce::build_roce_v4(buf, a, &roce::ack_bth(s), &ack_tail(s, m)?)
}

/// As [`build_ack_v4`] over IPv6. Returns 102.
pub fn build_ack_v6(
    buf: &mut [u8],
    a: &RoceAddrs<Ipv6Addr>,
    s: &roce::AckSpec,
    m: &Mceth,
) -> Result<usize, WireError> {
    roce::build_roce_v6(buf, a, &roce::ack_bth(s), &ack_tail(s, m)?)
}

fn ack_tail(s: &roce::AckSpec, m: &Mceth) -> Result<[u8; AETH_LEN + MCETH_LEN], WireError> {
    let mut t = [0u8; AETH_LEN + MCETH_LEN];
    roce::write_aeth(&mut t, s.syndrome, s.msn)?;
    t[AETH_LEN..].copy_from_slice(&m.bytes());
    Ok(t)
}

/// Copy the RC ACK `frame` (IP header at `l3_off`) into `out` with `m` appended after its
/// AETH (lengths, IPv4 checksum and ICRC fixed): what an MLCC receiver sends. Returns the new
/// length. [`WireError::Unsupported`] when `frame` is not an ACK without an MCETH.
pub fn append_mceth(
    frame: &[u8],
    l3_off: usize,
    m: &Mceth,
    out: &mut [u8],
) -> Result<usize, WireError> {
    let lay = icrc::IcrcLayout::locate(frame, l3_off)?;
    let bth = roce::Bth::new_checked(frame.get(lay.bth_off..).ok_or(WireError::Truncated)?)?;
    let at = lay.bth_off + BTH_LEN + AETH_LEN;
    if bth.opcode() != opcode::RC_ACKNOWLEDGE || at != lay.icrc_off {
        return Err(WireError::Unsupported);
    }
    let end = lay.icrc_off + icrc::ICRC_LEN;
    let n = end + MCETH_LEN;
    let out = out.get_mut(..n).ok_or(WireError::NoRoom)?;
    out[..at].copy_from_slice(&frame[..at]);
    out[at..at + MCETH_LEN].copy_from_slice(&m.bytes());
    let lay_u = int::locate_udp(frame, l3_off)?;
    int::adjust_lengths(out, &lay_u, MCETH_LEN as isize)?;
    icrc::fill(out, l3_off)?;
    Ok(n)
}

/// Write R_DQM (kbit/s) into the MCETH at `off` (from [`locate_mceth`]), set its flag and
/// recompute the ICRC (the MCETH is covered by it).
pub fn set_r_dqm(
    frame: &mut [u8],
    l3_off: usize,
    off: usize,
    r_dqm_kbps: u32,
) -> Result<(), WireError> {
    let b = frame
        .get_mut(off..off + MCETH_LEN)
        .ok_or(WireError::Truncated)?;
    b[3] |= MCETH_DQM;
    b[16..20].copy_from_slice(&r_dqm_kbps.to_be_bytes());
    icrc::fill(frame, l3_off)?;
    Ok(())
}

/// Write C_D into the DS Flags of a located MLCC INT. The ICRC does not cover INT.
pub fn set_c_d(frame: &mut [u8], m: &MlccInt, c_d: u16) -> Result<(), WireError> {
    let c_d = C_D_VALID | (c_d & CREDIT_MASK);
    let off = m.layout.shim_off + SHIM_LEN + 10;
    if frame.len() < off + 2 || off + 2 > m.layout.shim_off + SHIM_LEN + MD_HEADER_LEN {
        return Err(WireError::Truncated);
    }
    put16(frame, off, c_d);
    Ok(())
}

/// A rate in bit/s as MCETH's kbit/s (saturating).
pub fn kbps(bps: u64) -> u32 {
    (bps / 1000).min(u32::MAX as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapBuf;
    use crate::wire::roce::{AckSpec, Syndrome};
    use crate::wire::testutil::hex;

    // RC SEND ONLY over IPv4 with valid ICRC (the same scapy frame as int.rs's tests).
    // RDMA WRITE ONLY over IPv6 (scapy, as in int.rs).
    const WRITE_V6: &str = "02000000000202000000000186dd662123450054113ffd000001000000000000000000000010fd000002000000000000000000000020c82212b7005400000a00ffff00000abc8000a0b000000000deadbeef000012340000002c000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b33269bec";
    const SEND_V4: &str = "02000000000202000000000108004502004c123440004011a517c0a80101c0a80102c35012b7003800000410ffff0000001180000100000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e00441dd8dc";

    fn mk(i: u32) -> MlccHop {
        MlccHop {
            node_id: 100 + i,
            queue_id: 3,
            qlen: 1500 * i,
            ts: 1_000_000 + i as u64,
            tx_bytes: 0x1_0000_0000 + i as u64,
            rate_mbps: 100_000,
        }
    }

    #[test]
    fn source_push_locate_strip() {
        let orig = hex(SEND_V4);
        let mut b = HeapBuf::from_bytes(&orig);
        int::insert_int_md(&mut b, 14, &int_config(5000, 3, Some(7))).unwrap();
        assert!(push(&mut b, 14, &mk(1)).unwrap());
        assert!(push(&mut b, 14, &mk(2)).unwrap());
        assert_eq!(b.len(), orig.len() + 16 + 2 * HOP_LEN);
        let m = locate(b.data(), 14, 5000).unwrap();
        assert_eq!((m.hops, m.c_d, m.e_bit), (2, Some(7), false));
        assert_eq!(hop_at(&b, &m, 0), Some(mk(2)));
        assert_eq!(hop_at(&b, &m, 1), Some(mk(1)));
        assert_eq!(locate(b.data(), 14, 5001), Err(WireError::Unsupported));
        let mut d = b.data().to_vec();
        set_c_d(&mut d, &m, 0x3eef).unwrap();
        assert_eq!(locate(&d, 14, 5000).unwrap().c_d, Some(0x3eef));
        int::strip_int(&mut b, 14).unwrap();
        assert_eq!(b.data(), &orig[..]);
        assert_eq!(icrc::verify(b.data(), 14), Ok(true));
    }

    fn hop_at(b: &HeapBuf, m: &MlccInt, i: usize) -> Option<MlccHop> {
        super::hop(b.data(), m, i)
    }

    #[test]
    fn qlen_saturates() {
        let h = MlccHop {
            qlen: 40_000_000,
            ..mk(0)
        };
        let (s, _) = h.split();
        assert_eq!(s.queue_occupancy, MAX_QLEN);
    }

    #[test]
    fn switch_int_roundtrip_and_icrc() {
        let orig = hex(SEND_V4);
        let mut b = HeapBuf::from_bytes(&orig);
        int::insert_int_md(&mut b, 14, &int_config(5000, 3, None)).unwrap();
        push(&mut b, 14, &mk(1)).unwrap();
        push(&mut b, 14, &mk(2)).unwrap();
        let m = locate(b.data(), 14, 5000).unwrap();
        let mut out = [0u8; 512];
        let n = build_switch_int(b.data(), 14, &m, 48, [2; 6], [4; 6], &mut out).unwrap();
        let f = &out[..n];
        assert_eq!(n, 14 + 20 + 8 + 12 + 16 + 2 * HOP_LEN + 4);
        assert_eq!(icrc::verify(f, 14), Ok(true));
        let s = parse_switch_int(f, 14, 42).unwrap();
        assert_eq!(s.hops(), 2);
        assert_eq!(s.hop(0), Some(mk(2)));
        assert_eq!(s.hop(1), Some(mk(1)));
        assert_eq!(s.dest_qp, 0x11);
        assert_eq!(s.data_psn, 0x000100);
        // Addresses swapped, BECN, DSCP 48.
        assert_eq!(&f[26..30], &orig[30..34]);
        assert_eq!(&f[30..34], &orig[26..30]);
        assert_eq!(f[15] >> 2, 48);
        assert_eq!(f[42], opcode::CNP);
        assert_eq!(f[46], roce::BECN);
    }

    #[test]
    fn mceth_locate_and_write_keeps_icrc_valid() {
        let m = Mceth {
            flags: MCETH_CREDIT,
            qpn: 0x34,
            c_r: 9,
            r_credit_kbps: 12_500_000,
            r_dqm_kbps: 0,
        };
        let a = RoceAddrs::<Ipv4Addr> {
            src_mac: MacAddr([2; 6]),
            dst_mac: MacAddr([4; 6]),
            src_ip: Ipv4Addr::new(10, 1, 0, 2),
            dst_ip: Ipv4Addr::new(10, 0, 0, 1),
            udp_sport: 49152,
            dscp: 48,
            ecn: 0,
        };
        let spec = AckSpec {
            dest_qp: 0x12,
            psn: 77,
            syndrome: Syndrome::ACK_NO_CREDIT,
            msn: 5,
            pkey: PKEY_DEFAULT,
        };
        let mut f = [0u8; 128];
        let n = build_ack_v4(&mut f, &a, &spec, &m).unwrap();
        assert_eq!(n, 82);
        let f = &mut f[..n];
        let (off, got) = locate_mceth(f, 14).unwrap();
        assert_eq!(got, m);
        set_r_dqm(f, 14, off, 11_000_000).unwrap();
        assert_eq!(icrc::verify(f, 14), Ok(true));
        let (_, got) = locate_mceth(f, 14).unwrap();
        assert_eq!(got.r_dqm_kbps, 11_000_000);
        assert_eq!(got.flags, MCETH_CREDIT | MCETH_DQM);
        // A plain ACK has none; appending one gives the frame build_ack_v4 makes.
        let mut g = [0u8; 128];
        let n = roce::build_ack_v4(&mut g, &a, &spec).unwrap();
        assert_eq!(locate_mceth(&g[..n], 14), Err(WireError::Unsupported));
        let mut h = [0u8; 128];
        let k = append_mceth(&g[..n], 14, &m, &mut h).unwrap();
        let mut want = [0u8; 128];
        let w = build_ack_v4(&mut want, &a, &spec, &m).unwrap();
        assert_eq!(&h[..k], &want[..w]);
        assert_eq!(
            append_mceth(&h[..k], 14, &m, &mut g),
            Err(WireError::Unsupported)
        );
    }

    #[test]
    fn truncated_inputs_are_errors_not_panics() {
        let orig = hex(SEND_V4);
        let mut b = HeapBuf::from_bytes(&orig);
        int::insert_int_md(&mut b, 14, &int_config(5000, 3, None)).unwrap();
        push(&mut b, 14, &mk(1)).unwrap();
        let full = b.data().to_vec();
        for cut in 0..full.len() {
            let _ = locate(&full[..cut], 14, 5000);
            let _ = locate_mceth(&full[..cut], 14);
            let _ = parse_switch_int(&full[..cut], 14, 42);
        }
    }

    proptest::proptest! {
        /// The fixed-offset record is what the instruction-bitmap writer and the domain bytes
        /// give, and `source` (the record path) writes the frame `insert_int_md_with_hop`
        /// (the general path) and `insert_int_md` + `push` (two steps) write.
        #[test]
        fn record_matches_the_bitmap_writer(
            node_id in proptest::prelude::any::<u32>(),
            queue_id in proptest::prelude::any::<u8>(),
            qlen in proptest::prelude::any::<u32>(),
            ts in proptest::prelude::any::<u64>(),
            tx_bytes in proptest::prelude::any::<u64>(),
            rate_mbps in proptest::prelude::any::<u32>(),
            c_d in proptest::option::of(proptest::prelude::any::<u16>()),
            max_hops in 1u8..9,
            v6 in proptest::prelude::any::<bool>(),
        ) {
            let h = MlccHop { node_id, queue_id, qlen, ts, tx_bytes, rate_mbps };
            let (std, ds) = h.split();
            let mut want = [0u8; HOP_LEN];
            let n = std.write(INSTRUCTIONS, &mut want).unwrap();
            want[n..].copy_from_slice(&ds);
            proptest::prop_assert_eq!(h.record(), want);

            let orig = if v6 { hex(WRITE_V6) } else { hex(SEND_V4) };
            let cfg = int_config(5000, max_hops, c_d);
            let mut a = HeapBuf::from_bytes(&orig);
            source(&mut a, 14, 5000, max_hops, c_d, &h).unwrap();
            let mut b = HeapBuf::from_bytes(&orig);
            int::insert_int_md_with_hop(&mut b, 14, &cfg, &std, &ds).unwrap();
            proptest::prop_assert_eq!(a.data(), b.data());
            let mut c = HeapBuf::from_bytes(&orig);
            int::insert_int_md(&mut c, 14, &cfg).unwrap();
            proptest::prop_assert!(push(&mut c, 14, &h).unwrap());
            proptest::prop_assert_eq!(a.data(), c.data());
            int::strip_int(&mut a, 14).unwrap();
            proptest::prop_assert_eq!(a.data(), &orig[..]);
        }
    }

    #[test]
    fn source_errors_leave_the_frame() {
        let orig = hex(SEND_V4);
        let mut b = HeapBuf::from_bytes(&orig);
        assert_eq!(
            source(&mut b, 14, 5000, 0, None, &mk(1)),
            Err(WireError::Unsupported)
        );
        assert_eq!(b.data(), &orig[..]);
        assert!(source(&mut b, 13, 5000, 3, None, &mk(1)).is_err());
        assert_eq!(b.data(), &orig[..]);
        assert!(source(&mut b, 14, 5000, 3, None, &mk(1)).is_ok());
        assert_eq!(b.len(), orig.len() + 16 + HOP_LEN);
    }
}
