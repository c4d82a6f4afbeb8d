//! IPv6 fixed header (RFC 8200 section 3): bounds-checked view, writer, hop-limit decrement.
//! There is no header checksum. Traffic class = DSCP << 2 | ECN (RFC 2474, RFC 3168).

use super::{be16, be32, put16, WireError};
use std::net::Ipv6Addr;

/// Fixed header length.
pub const HEADER_LEN: usize = 40;

/// A view of an IPv6 fixed header; `new_checked` guarantees 40 bytes and version 6.
#[derive(Debug, Clone)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap `buf`. Errors: [`WireError::Truncated`] (< 40 bytes), [`WireError::BadIpHeader`]
    /// (version != 6).
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b[0] >> 4 != 6 {
            return Err(WireError::BadIpHeader);
        }
        Ok(Ipv6Packet { buf })
    }
    /// Check `40 + payload_len <= buffer length` ([`WireError::BadLength`] otherwise).
    pub fn check_len(&self) -> Result<(), WireError> {
        if HEADER_LEN + self.payload_len() as usize > self.b().len() {
            return Err(WireError::BadLength);
        }
        Ok(())
    }
    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }
    #[inline]
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    #[inline]
    fn w0(&self) -> u32 {
        be32(self.b(), 0).unwrap_or(0)
    }
    /// Version (6).
    pub fn version(&self) -> u8 {
        (self.w0() >> 28) as u8
    }
    /// Traffic class (8 bits).
    pub fn traffic_class(&self) -> u8 {
        (self.w0() >> 20) as u8
    }
    /// DSCP (upper 6 bits of the traffic class).
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }
    /// ECN (lower 2 bits of the traffic class).
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 3
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.w0() & 0xf_ffff
    }
    /// Payload length (bytes after the fixed header, extension headers included).
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), 4).unwrap_or(0)
    }
    /// Next header (17 UDP, 6 TCP, or an extension header).
    pub fn next_header(&self) -> u8 {
        self.b().get(6).copied().unwrap_or(0)
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.b().get(7).copied().unwrap_or(0)
    }
    fn addr(&self, off: usize) -> [u8; 16] {
        let mut a = [0u8; 16];
        if let Some(s) = self.b().get(off..off + 16) {
            a.copy_from_slice(s);
        }
        a
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.addr(8))
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.addr(24))
    }
    /// Source address as a u128 (network order value).
    pub fn src_u128(&self) -> u128 {
        u128::from_be_bytes(self.addr(8))
    }
    /// Destination address as a u128.
    pub fn dst_u128(&self) -> u128 {
        u128::from_be_bytes(self.addr(24))
    }
    /// The payload, bounded by the payload length (and the buffer).
    pub fn payload(&self) -> &[u8] {
        let end = (HEADER_LEN + self.payload_len() as usize).min(self.b().len());
        self.b().get(HEADER_LEN..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    #[inline]
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }
    fn set_w0(&mut self, w: u32) {
        if let Some(s) = self.bm().get_mut(0..4) {
            s.copy_from_slice(&w.to_be_bytes());
        }
    }
    /// Set the traffic class.
    pub fn set_traffic_class(&mut self, tc: u8) {
        let w = (self.w0() & 0xf00f_ffff) | ((tc as u32) << 20);
        self.set_w0(w);
    }
    /// Set the DSCP (ECN kept).
    pub fn set_dscp(&mut self, dscp: u8) {
        let tc = (dscp << 2) | self.ecn();
        self.set_traffic_class(tc);
    }
    /// Set the flow label (20 bits).
    pub fn set_flow_label(&mut self, fl: u32) {
        let w = (self.w0() & 0xfff0_0000) | (fl & 0xf_ffff);
        self.set_w0(w);
    }
    /// Set the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.bm(), 4, v);
    }
    /// Set the next header.
    pub fn set_next_header(&mut self, v: u8) {
        if let Some(x) = self.bm().get_mut(6) {
            *x = v;
        }
    }
    /// Set the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        if let Some(x) = self.bm().get_mut(7) {
            *x = v;
        }
    }
    /// Set the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        if let Some(s) = self.bm().get_mut(8..24) {
            s.copy_from_slice(&a.octets());
        }
    }
    /// Set the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        if let Some(s) = self.bm().get_mut(24..40) {
            s.copy_from_slice(&a.octets());
        }
    }
    /// Decrement the hop limit (RFC 8200 section 3). Returns the new value, or
    /// [`WireError::TtlExpired`] (unchanged) when it is 0 or 1.
    pub fn decrement_hop_limit(&mut self) -> Result<u8, WireError> {
        let h = self.hop_limit();
        if h <= 1 {
            return Err(WireError::TtlExpired);
        }
        self.set_hop_limit(h - 1);
        Ok(h - 1)
    }
}

/// Fields of an IPv6 fixed header for [`write_header`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Repr {
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
    /// Next header.
    pub next_header: u8,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Payload length.
    pub payload_len: u16,
}

/// Write a 40-byte IPv6 header at the start of `buf`; returns 40.
pub fn write_header(buf: &mut [u8], r: &Ipv6Repr) -> Result<usize, WireError> {
    let h = buf.get_mut(..HEADER_LEN).ok_or(WireError::NoRoom)?;
    let tc = ((r.dscp << 2) | (r.ecn & 3)) as u32;
    let w0 = (6u32 << 28) | (tc << 20) | (r.flow_label & 0xf_ffff);
    h[0..4].copy_from_slice(&w0.to_be_bytes());
    h[4..6].copy_from_slice(&r.payload_len.to_be_bytes());
    h[6] = r.next_header;
    h[7] = r.hop_limit;
    h[8..24].copy_from_slice(&r.src.octets());
    h[24..40].copy_from_slice(&r.dst.octets());
    Ok(HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testutil::hex;

    // scapy: IPv6(src="fd00:1::10",dst="fd00:2::20",tc=0x62,fl=0x12345,hlim=63,plen=84,nh=17)
    const H: &str =
        "662123450054113ffd000001000000000000000000000010fd000002000000000000000000000020";

    #[test]
    fn view_and_writer() {
        let b = hex(H);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0x62);
        assert_eq!((p.dscp(), p.ecn()), (0x18, 2));
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 84);
        assert_eq!((p.next_header(), p.hop_limit()), (17, 63));
        assert_eq!(p.src_addr(), "fd00:1::10".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_u128(), 0xfd00_0002_0000_0000_0000_0000_0000_0020);
        assert_eq!(p.check_len(), Err(WireError::BadLength));
        let mut out = [0u8; 40];
        let r = Ipv6Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            next_header: 17,
            dscp: 0x18,
            ecn: 2,
            flow_label: 0x12345,
            hop_limit: 63,
            payload_len: 84,
        };
        assert_eq!(write_header(&mut out, &r), Ok(40));
        assert_eq!(&out[..], &b[..]);
        assert_eq!(write_header(&mut out[..39], &r), Err(WireError::NoRoom));
        let mut q = Ipv6Packet::new_checked(&mut out[..]).unwrap();
        assert_eq!(q.decrement_hop_limit(), Ok(62));
        q.set_hop_limit(1);
        assert_eq!(q.decrement_hop_limit(), Err(WireError::TtlExpired));
        q.set_dscp(46);
        assert_eq!((q.dscp(), q.ecn(), q.flow_label()), (46, 2, 0x12345));
        q.set_flow_label(0xfffff);
        assert_eq!((q.traffic_class(), q.flow_label()), (46 << 2 | 2, 0xfffff));
        assert_eq!(
            Ipv6Packet::new_checked(&b[..39]).unwrap_err(),
            WireError::Truncated
        );
        let mut v = b.clone();
        v[0] = 0x45;
        assert_eq!(
            Ipv6Packet::new_checked(&v[..]).unwrap_err(),
            WireError::BadIpHeader
        );
    }
}
