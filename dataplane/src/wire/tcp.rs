//! TCP header (RFC 9293 section 3.1): bounds-checked view, option walking (MSS, RFC 9293
//! section 3.2), checksums over the IPv4/IPv6 pseudo-headers, and builders for bare segments
//! (SYN-ACK with MSS, RST) as THEMIS's SYN-cookie monitor sends them.

use super::checksum;
use super::ethernet::{self, MacAddr};
use super::{be16, be32, ipv4, ipv6, put16, WireError};
use std::net::{Ipv4Addr, Ipv6Addr};

/// Header length without options.
pub const HEADER_LEN: usize = 20;
/// FIN flag.
pub const FIN: u8 = 0x01;
/// SYN flag.
pub const SYN: u8 = 0x02;
/// RST flag.
pub const RST: u8 = 0x04;
/// PSH flag.
pub const PSH: u8 = 0x08;
/// ACK flag.
pub const ACK: u8 = 0x10;
/// URG flag.
pub const URG: u8 = 0x20;
/// ECE flag (RFC 3168).
pub const ECE: u8 = 0x40;
/// CWR flag (RFC 3168).
pub const CWR: u8 = 0x80;

/// Option kind: end of option list.
pub const OPT_END: u8 = 0;
/// Option kind: no-operation.
pub const OPT_NOP: u8 = 1;
/// Option kind: maximum segment size (length 4).
pub const OPT_MSS: u8 = 2;
/// Option kind: window scale (RFC 7323, length 3).
pub const OPT_WSCALE: u8 = 3;
/// Option kind: SACK permitted (RFC 2018, length 2).
pub const OPT_SACK_PERM: u8 = 4;
/// Option kind: timestamps (RFC 7323, length 10).
pub const OPT_TIMESTAMP: u8 = 8;

/// A view of a TCP segment; `new_checked` guarantees 20 bytes, data offset >= 5 and the whole
/// header (data offset x 4) in the buffer.
#[derive(Debug, Clone)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Wrap `buf` (starting at the TCP header, ending at the end of the segment). Errors:
    /// [`WireError::Truncated`] (< 20 bytes), [`WireError::BadLength`] (data offset < 5 or
    /// beyond the buffer).
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        let hl = (b[12] >> 4) as usize * 4;
        if hl < HEADER_LEN || hl > b.len() {
            return Err(WireError::BadLength);
        }
        Ok(TcpPacket { buf })
    }
    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }
    #[inline]
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.b(), 0).unwrap_or(0)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), 2).unwrap_or(0)
    }
    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.b(), 4).unwrap_or(0)
    }
    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        be32(self.b(), 8).unwrap_or(0)
    }
    /// Data offset in 32-bit words.
    pub fn data_offset(&self) -> u8 {
        self.b().get(12).copied().unwrap_or(0) >> 4
    }
    /// Header length in bytes.
    pub fn header_len(&self) -> usize {
        self.data_offset() as usize * 4
    }
    /// Flags byte (CWR ECE URG ACK PSH RST SYN FIN).
    pub fn flags(&self) -> u8 {
        self.b().get(13).copied().unwrap_or(0)
    }
    /// SYN set.
    pub fn syn(&self) -> bool {
        self.flags() & SYN != 0
    }
    /// ACK set.
    pub fn ack_flag(&self) -> bool {
        self.flags() & ACK != 0
    }
    /// RST set.
    pub fn rst(&self) -> bool {
        self.flags() & RST != 0
    }
    /// FIN set.
    pub fn fin(&self) -> bool {
        self.flags() & FIN != 0
    }
    /// PSH set.
    pub fn psh(&self) -> bool {
        self.flags() & PSH != 0
    }
    /// URG set.
    pub fn urg(&self) -> bool {
        self.flags() & URG != 0
    }
    /// ECE set.
    pub fn ece(&self) -> bool {
        self.flags() & ECE != 0
    }
    /// CWR set.
    pub fn cwr(&self) -> bool {
        self.flags() & CWR != 0
    }
    /// Window.
    pub fn window(&self) -> u16 {
        be16(self.b(), 14).unwrap_or(0)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 16).unwrap_or(0)
    }
    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.b(), 18).unwrap_or(0)
    }
    /// The option bytes.
    pub fn options(&self) -> &[u8] {
        self.b().get(HEADER_LEN..self.header_len()).unwrap_or(&[])
    }
    /// Iterate over the options.
    pub fn option_iter(&self) -> TcpOptions<'_> {
        TcpOptions {
            rest: self.options(),
        }
    }
    /// The MSS option value, if present and well-formed.
    pub fn mss(&self) -> Option<u16> {
        self.option_iter().find_map(|o| match o {
            TcpOption::Mss(m) => Some(m),
            _ => None,
        })
    }
    /// The payload (after the header).
    pub fn payload(&self) -> &[u8] {
        self.b().get(self.header_len()..).unwrap_or(&[])
    }
    /// Whether the checksum verifies over IPv4 (the view must span exactly the segment).
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let d = self.b();
        let s = checksum::pseudo_header_v4(src, dst, ipv4::PROTO_TCP, d.len() as u16);
        checksum::finish(checksum::sum(d, s)) == 0
    }
    /// Whether the checksum verifies over IPv6.
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let d = self.b();
        let s = checksum::pseudo_header_v6(src, dst, ipv4::PROTO_TCP, d.len() as u32);
        checksum::finish(checksum::sum(d, s)) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 16, v);
    }
    /// Compute and store the checksum over IPv4 (the view spans exactly the segment).
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let c = checksum_v4(self.b(), src, dst);
        self.set_checksum(c);
    }
    /// Compute and store the checksum over IPv6.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let c = checksum_v6(self.b(), src, dst);
        self.set_checksum(c);
    }
}

/// TCP checksum of `segment` (checksum field taken as zero) over IPv4.
pub fn checksum_v4(segment: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
    let s = checksum::pseudo_header_v4(src, dst, ipv4::PROTO_TCP, segment.len() as u16);
    let s = checksum::sum(segment.get(..16).unwrap_or(segment), s);
    checksum::finish(checksum::sum(segment.get(18..).unwrap_or(&[]), s))
}

/// TCP checksum of `segment` over IPv6.
pub fn checksum_v6(segment: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> u16 {
    let s = checksum::pseudo_header_v6(src, dst, ipv4::PROTO_TCP, segment.len() as u32);
    let s = checksum::sum(segment.get(..16).unwrap_or(segment), s);
    checksum::finish(checksum::sum(segment.get(18..).unwrap_or(&[]), s))
}

/// One TCP option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// Maximum segment size.
    Mss(u16),
    /// Window scale shift.
    WindowScale(u8),
    /// SACK permitted.
    SackPermitted,
    /// Timestamps (TSval, TSecr).
    Timestamp(u32, u32),
    /// Any other option: kind and data (after kind and length).
    Other(u8, &'a [u8]),
}

/// Iterator over TCP options; NOPs are skipped; it ends at End-of-list, at the end of the
/// option bytes, or at the first malformed option (length < 2 or beyond the header).
#[derive(Clone, Debug)]
pub struct TcpOptions<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = TcpOption<'a>;
    fn next(&mut self) -> Option<TcpOption<'a>> {
        loop {
            let kind = *self.rest.first()?;
            match kind {
                OPT_END => {
                    self.rest = &[];
                    return None;
                }
                OPT_NOP => {
                    self.rest = self.rest.get(1..).unwrap_or(&[]);
                }
                _ => {
                    let len = *self.rest.get(1)? as usize;
                    let Some(opt) = self.rest.get(..len).filter(|_| len >= 2) else {
                        self.rest = &[];
                        return None;
                    };
                    self.rest = self.rest.get(len..).unwrap_or(&[]);
                    let data = &opt[2..];
                    return Some(match (kind, data.len()) {
                        (OPT_MSS, 2) => TcpOption::Mss(u16::from_be_bytes([data[0], data[1]])),
                        (OPT_WSCALE, 1) => TcpOption::WindowScale(data[0]),
                        (OPT_SACK_PERM, 0) => TcpOption::SackPermitted,
                        (OPT_TIMESTAMP, 8) => TcpOption::Timestamp(
                            u32::from_be_bytes([data[0], data[1], data[2], data[3]]),
                            u32::from_be_bytes([data[4], data[5], data[6], data[7]]),
                        ),
                        _ => TcpOption::Other(kind, data),
                    });
                }
            }
        }
    }
}

/// Write an MSS option (kind 2, length 4) at the start of `buf`; returns 4.
pub fn write_mss_option(buf: &mut [u8], mss: u16) -> Result<usize, WireError> {
    let o = buf.get_mut(..4).ok_or(WireError::NoRoom)?;
    o[0] = OPT_MSS;
    o[1] = 4;
    o[2..4].copy_from_slice(&mss.to_be_bytes());
    Ok(4)
}

/// Fields of a bare TCP segment (no payload) for [`write_segment`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags byte (e.g. `SYN | ACK`, `RST`, `RST | ACK`).
    pub flags: u8,
    /// Window.
    pub window: u16,
    /// MSS option to include (SYN / SYN-ACK).
    pub mss: Option<u16>,
}

impl TcpRepr {
    /// Header length this repr produces (20, or 24 with MSS).
    pub fn header_len(&self) -> usize {
        HEADER_LEN + if self.mss.is_some() { 4 } else { 0 }
    }
}

/// Write a bare TCP header at the start of `buf` with checksum 0 (fill it with
/// [`TcpPacket::fill_checksum_v4`] / `_v6` once the addresses are known); returns its length.
pub fn write_segment(buf: &mut [u8], r: &TcpRepr) -> Result<usize, WireError> {
    let hl = r.header_len();
    let h = buf.get_mut(..hl).ok_or(WireError::NoRoom)?;
    h[0..2].copy_from_slice(&r.src_port.to_be_bytes());
    h[2..4].copy_from_slice(&r.dst_port.to_be_bytes());
    h[4..8].copy_from_slice(&r.seq.to_be_bytes());
    h[8..12].copy_from_slice(&r.ack.to_be_bytes());
    h[12] = ((hl / 4) as u8) << 4;
    h[13] = r.flags;
    h[14..16].copy_from_slice(&r.window.to_be_bytes());
    h[16..20].copy_from_slice(&[0; 4]);
    if let Some(m) = r.mss {
        write_mss_option(&mut h[20..], m)?;
    }
    Ok(hl)
}

/// Build a whole Ethernet | IPv4 (ID 0, DF, TTL 64, DSCP 0) | TCP frame with both checksums;
/// returns its length (58 with MSS, 54 without: short frames are padded by the NIC).
pub fn build_frame_v4(
    buf: &mut [u8],
    dst_mac: MacAddr,
    src_mac: MacAddr,
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    r: &TcpRepr,
) -> Result<usize, WireError> {
    build_frame_v4_with(buf, dst_mac, src_mac, src_ip, dst_ip, r, &[])
}

/// As [`build_frame_v4`], with `payload` after the TCP header (covered by the checksum).
pub fn build_frame_v4_with(
    buf: &mut [u8],
    dst_mac: MacAddr,
    src_mac: MacAddr,
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    r: &TcpRepr,
    payload: &[u8],
) -> Result<usize, WireError> {
    let hl = r.header_len();
    let tl = hl + payload.len();
    let total = ethernet::HEADER_LEN + ipv4::HEADER_LEN + tl;
    if buf.len() < total || tl > usize::from(u16::MAX) - ipv4::HEADER_LEN {
        return Err(WireError::NoRoom);
    }
    let mut off = ethernet::write_header(buf, dst_mac, src_mac, ethernet::ETHERTYPE_IPV4)?;
    off += ipv4::write_header(
        &mut buf[off..],
        &ipv4::Ipv4Repr {
            src: src_ip,
            dst: dst_ip,
            protocol: ipv4::PROTO_TCP,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
            ttl: 64,
            payload_len: tl as u16,
        },
    )?;
    write_segment(&mut buf[off..], r)?;
    buf[off + hl..total].copy_from_slice(payload);
    let c = checksum_v4(&buf[off..total], src_ip, dst_ip);
    put16(buf, off + 16, c);
    Ok(total)
}

/// As [`build_frame_v4`] over IPv6 (flow label 0, hop limit 64, traffic class 0).
pub fn build_frame_v6(
    buf: &mut [u8],
    dst_mac: MacAddr,
    src_mac: MacAddr,
    src_ip: Ipv6Addr,
    dst_ip: Ipv6Addr,
    r: &TcpRepr,
) -> Result<usize, WireError> {
    let tl = r.header_len();
    let total = ethernet::HEADER_LEN + ipv6::HEADER_LEN + tl;
    if buf.len() < total {
        return Err(WireError::NoRoom);
    }
    let mut off = ethernet::write_header(buf, dst_mac, src_mac, ethernet::ETHERTYPE_IPV6)?;
    off += ipv6::write_header(
        &mut buf[off..],
        &ipv6::Ipv6Repr {
            src: src_ip,
            dst: dst_ip,
            next_header: ipv4::PROTO_TCP,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
            hop_limit: 64,
            payload_len: tl as u16,
        },
    )?;
    write_segment(&mut buf[off..], r)?;
    let c = checksum_v6(&buf[off..total], src_ip, dst_ip);
    put16(buf, off + 16, c);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testutil::hex;

    const M1: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const M2: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    #[test]
    fn synack_v4_matches_scapy() {
        // python3 -c 'from scapy.all import *; print(bytes(Ether(src="02:00:00:00:00:01",
        //  dst="02:00:00:00:00:02")/IP(src="10.1.1.1",dst="10.2.2.2",id=0,flags="DF",ttl=64)/
        //  TCP(sport=80,dport=40000,seq=0x11223344,ack=0x55667788,flags="SA",window=65535,
        //  options=[("MSS",1460)])).hex())'
        let want = hex("02000000000202000000000108004500002c00004000400623c70a0101010a02020200509c4011223344556677886012ffffd32b0000020405b4");
        let r = TcpRepr {
            src_port: 80,
            dst_port: 40000,
            seq: 0x11223344,
            ack: 0x55667788,
            flags: SYN | ACK,
            window: 65535,
            mss: Some(1460),
        };
        let (s, d) = (Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 2, 2, 2));
        let mut b = [0u8; 100];
        let n = build_frame_v4(&mut b, M2, M1, s, d, &r).unwrap();
        assert_eq!(&b[..n], &want[..]);
        let t = TcpPacket::new_checked(&b[34..n]).unwrap();
        assert_eq!(
            (t.src_port(), t.dst_port(), t.seq(), t.ack()),
            (80, 40000, 0x11223344, 0x55667788)
        );
        assert!(
            t.syn()
                && t.ack_flag()
                && !t.rst()
                && !t.fin()
                && !t.psh()
                && !t.urg()
                && !t.ece()
                && !t.cwr()
        );
        assert_eq!(
            (t.window(), t.checksum(), t.mss(), t.header_len()),
            (65535, 0xd32b, Some(1460), 24)
        );
        assert!(t.verify_checksum_v4(s, d));
        assert!(!t.verify_checksum_v4(s, Ipv4Addr::new(10, 2, 2, 3)));
        assert_eq!(
            build_frame_v4(&mut b[..57], M2, M1, s, d, &r),
            Err(WireError::NoRoom)
        );
    }

    #[test]
    fn segment_with_payload_matches_scapy() {
        // python3 -c 'from scapy.all import *; print(bytes(Ether(src="02:00:00:00:00:01",
        //  dst="02:00:00:00:00:02")/IP(src="10.1.1.1",dst="10.2.2.2",id=0,flags="DF",ttl=64)/
        //  TCP(sport=18515,dport=40000,seq=0x11223344,ack=0x55667788,flags="PA",window=65535)/
        //  Raw(b"0123456789abcdef")).hex())'
        let want = hex("02000000000202000000000108004500003800004000400623bb0a0101010a02020248539c4011223344556677885018ffff7397000030313233343536373839616263646566");
        let r = TcpRepr {
            src_port: 18515,
            dst_port: 40000,
            seq: 0x11223344,
            ack: 0x55667788,
            flags: PSH | ACK,
            window: 65535,
            mss: None,
        };
        let (s, d) = (Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 2, 2, 2));
        let mut b = [0u8; 100];
        let n = build_frame_v4_with(&mut b, M2, M1, s, d, &r, b"0123456789abcdef").unwrap();
        assert_eq!(&b[..n], &want[..]);
        assert_eq!(
            build_frame_v4_with(&mut b[..69], M2, M1, s, d, &r, b"0123456789abcdef"),
            Err(WireError::NoRoom)
        );
    }

    #[test]
    fn rst_and_v6_match_scapy() {
        // ... IP(src="10.1.1.1",dst="10.2.2.2",id=0,flags="DF",ttl=64)/TCP(sport=80,dport=40000,
        //  seq=0xdeadbeef,ack=0,flags="R",window=0)
        let want = hex("02000000000202000000000108004500002800004000400623cb0a0101010a02020200509c40deadbeef00000000500400005ead0000");
        let r = TcpRepr {
            src_port: 80,
            dst_port: 40000,
            seq: 0xdeadbeef,
            flags: RST,
            ..TcpRepr::default()
        };
        let mut b = [0u8; 100];
        let n = build_frame_v4(
            &mut b,
            M2,
            M1,
            Ipv4Addr::new(10, 1, 1, 1),
            Ipv4Addr::new(10, 2, 2, 2),
            &r,
        )
        .unwrap();
        assert_eq!(&b[..n], &want[..]);
        // ... IPv6(src="2001:db8::1",dst="2001:db8::2",hlim=64)/TCP(sport=443,dport=40001,seq=1,
        //  ack=2,flags="SA",window=29200,options=[("MSS",1440)])
        let want6 = hex("02000000000202000000000186dd600000000018064020010db800000000000000000000000120010db800000000000000000000000201bb9c410000000100000002601272102ca60000020405a0");
        let r6 = TcpRepr {
            src_port: 443,
            dst_port: 40001,
            seq: 1,
            ack: 2,
            flags: SYN | ACK,
            window: 29200,
            mss: Some(1440),
        };
        let (s, d): (Ipv6Addr, Ipv6Addr) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        );
        let n = build_frame_v6(&mut b, M2, M1, s, d, &r6).unwrap();
        assert_eq!(&b[..n], &want6[..]);
        assert!(TcpPacket::new_checked(&b[54..n])
            .unwrap()
            .verify_checksum_v6(s, d));
    }

    #[test]
    fn options_walk() {
        // python3 -c 'from scapy.all import *; print(bytes(IP(src="10.1.1.1",dst="10.2.2.2")/
        //  TCP(sport=1,dport=2,flags="S",options=[("NOP",None),("WScale",7),("SAckOK",b""),
        //  ("Timestamp",(1,2)),("MSS",9000)])).hex())'
        let p = hex("4500003c00010000400663b60a0101010a020202000100020000000000000000a0022000f3800000010303070402080a000000010000000202042328");
        let t = TcpPacket::new_checked(&p[20..]).unwrap();
        let opts: Vec<_> = t.option_iter().collect();
        assert_eq!(
            opts,
            vec![
                TcpOption::WindowScale(7),
                TcpOption::SackPermitted,
                TcpOption::Timestamp(1, 2),
                TcpOption::Mss(9000)
            ]
        );
        assert_eq!(t.mss(), Some(9000));
        assert!(t.verify_checksum_v4(Ipv4Addr::new(10, 1, 1, 1), Ipv4Addr::new(10, 2, 2, 2)));
        // Malformed options end the walk safely.
        for bad in [
            &[2u8, 4, 5][..],
            &[2, 0, 1, 1],
            &[2, 1],
            &[3, 9, 0, 0],
            &[2],
            &[0, 2, 4, 1, 1],
        ] {
            let v: Vec<_> = TcpOptions { rest: bad }.collect();
            assert!(v.iter().all(|o| !matches!(o, TcpOption::Mss(_))), "{bad:?}");
        }
        assert_eq!(
            TcpOptions {
                rest: &[1, 1, 2, 4, 5, 0xb4]
            }
            .next(),
            Some(TcpOption::Mss(1460))
        );
        assert_eq!(
            TcpOptions {
                rest: &[254, 2, 2, 4, 0, 1]
            }
            .nth(1),
            Some(TcpOption::Mss(1))
        );
        assert_eq!(
            TcpOptions { rest: &[30, 3, 9] }.next(),
            Some(TcpOption::Other(30, &[9]))
        );
    }

    #[test]
    fn checked_errors() {
        assert_eq!(
            TcpPacket::new_checked(&[0u8; 19][..]).unwrap_err(),
            WireError::Truncated
        );
        let mut h = [0u8; 20];
        h[12] = 0x40;
        assert_eq!(
            TcpPacket::new_checked(&h[..]).unwrap_err(),
            WireError::BadLength
        );
        h[12] = 0x60;
        assert_eq!(
            TcpPacket::new_checked(&h[..]).unwrap_err(),
            WireError::BadLength
        );
        h[12] = 0x50;
        assert!(TcpPacket::new_checked(&h[..]).is_ok());
        assert_eq!(
            write_segment(
                &mut [0u8; 23],
                &TcpRepr {
                    mss: Some(1),
                    ..TcpRepr::default()
                }
            ),
            Err(WireError::NoRoom)
        );
    }
}
