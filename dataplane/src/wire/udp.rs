//! UDP header (RFC 768) with checksums over the IPv4 (RFC 768) and IPv6 (RFC 8200 section 8.1)
//! pseudo-headers. Over IPv4 a zero checksum means "none"; a computed zero is sent as 0xffff.

use super::checksum;
use super::{be16, put16, WireError};
use std::net::{Ipv4Addr, Ipv6Addr};

/// UDP header length.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram; `new_checked` guarantees the 8-byte header. The UDP length is
/// checked separately ([`Self::check_len`]).
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap `buf` (starting at the UDP header); [`WireError::Truncated`] when < 8 bytes.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(UdpPacket { buf })
    }
    /// Check `8 <= length <= buffer length` ([`WireError::BadLength`] otherwise).
    pub fn check_len(&self) -> Result<(), WireError> {
        let l = self.len() as usize;
        if l < HEADER_LEN || l > self.b().len() {
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
    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.b(), 0).unwrap_or(0)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), 2).unwrap_or(0)
    }
    /// Length field (header + payload).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        be16(self.b(), 4).unwrap_or(0)
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.b(), 6).unwrap_or(0)
    }
    /// The datagram bounded by the length field (and the buffer).
    pub fn datagram(&self) -> &[u8] {
        let end = (self.len() as usize).min(self.b().len());
        self.b().get(..end).unwrap_or(&[])
    }
    /// The payload bounded by the length field.
    pub fn payload(&self) -> &[u8] {
        self.datagram().get(HEADER_LEN..).unwrap_or(&[])
    }
    /// Checksum this datagram should carry over IPv4.
    pub fn compute_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        checksum_v4(self.datagram(), src, dst)
    }
    /// Checksum this datagram should carry over IPv6.
    pub fn compute_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u16 {
        checksum_v6(self.datagram(), src, dst)
    }
    /// Over IPv4: checksum 0 (none) or a checksum that verifies.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let d = self.datagram();
        let s = checksum::pseudo_header_v4(src, dst, 17, d.len() as u16);
        checksum::finish(checksum::sum(d, s)) == 0
    }
    /// Over IPv6 (a zero checksum is invalid, RFC 8200 section 8.1).
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let d = self.datagram();
        let s = checksum::pseudo_header_v6(src, dst, 17, d.len() as u32);
        checksum::finish(checksum::sum(d, s)) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 0, v);
    }
    /// Set the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buf.as_mut(), 2, v);
    }
    /// Set the length field.
    pub fn set_len(&mut self, v: u16) {
        put16(self.buf.as_mut(), 4, v);
    }
    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buf.as_mut(), 6, v);
    }
    /// Compute and store the IPv4 checksum.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let c = self.compute_checksum_v4(src, dst);
        self.set_checksum(c);
    }
    /// Compute and store the IPv6 checksum.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let c = self.compute_checksum_v6(src, dst);
        self.set_checksum(c);
    }
}

fn nonzero(c: u16) -> u16 {
    if c == 0 {
        0xffff
    } else {
        c
    }
}

/// UDP checksum of `datagram` (header + payload, checksum field taken as zero) over IPv4; a
/// computed 0 is returned as 0xffff (RFC 768).
pub fn checksum_v4(datagram: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
    let s = checksum::pseudo_header_v4(src, dst, 17, datagram.len() as u16);
    let s = checksum::sum(datagram.get(..6).unwrap_or(datagram), s);
    let s = checksum::sum(datagram.get(8..).unwrap_or(&[]), s);
    nonzero(checksum::finish(s))
}

/// UDP checksum of `datagram` over IPv6; a computed 0 is returned as 0xffff.
pub fn checksum_v6(datagram: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> u16 {
    let s = checksum::pseudo_header_v6(src, dst, 17, datagram.len() as u32);
    let s = checksum::sum(datagram.get(..6).unwrap_or(datagram), s);
    let s = checksum::sum(datagram.get(8..).unwrap_or(&[]), s);
    nonzero(checksum::finish(s))
}

/// Write a UDP header (length = 8 + `payload_len`, checksum 0) at the start of `buf`; returns 8.
pub fn write_header(
    buf: &mut [u8],
    src_port: u16,
    dst_port: u16,
    payload_len: u16,
) -> Result<usize, WireError> {
    let h = buf.get_mut(..HEADER_LEN).ok_or(WireError::NoRoom)?;
    let len = payload_len
        .checked_add(HEADER_LEN as u16)
        .ok_or(WireError::BadLength)?;
    h[0..2].copy_from_slice(&src_port.to_be_bytes());
    h[2..4].copy_from_slice(&dst_port.to_be_bytes());
    h[4..6].copy_from_slice(&len.to_be_bytes());
    h[6..8].copy_from_slice(&[0, 0]);
    Ok(HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testutil::hex;

    #[test]
    fn v4_checksum_known_answer() {
        // python3 -c 'from scapy.all import *; print(bytes(IP(src="10.0.0.1",dst="10.0.0.2",
        //   id=7,ttl=17)/UDP(sport=1234,dport=5678)/Raw(b"hello world")).hex())'
        let p =
            hex("4500002700070000111195bd0a0000010a00000204d2162e00133ef768656c6c6f20776f726c64");
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut u = p[20..].to_vec();
        let v = UdpPacket::new_checked(&u[..]).unwrap();
        assert_eq!(
            (v.src_port(), v.dst_port(), v.len(), v.checksum()),
            (1234, 5678, 19, 0x3ef7)
        );
        assert!(v.check_len().is_ok());
        assert!(v.verify_checksum_v4(s, d));
        assert_eq!(v.compute_checksum_v4(s, d), 0x3ef7);
        assert_eq!(v.payload(), b"hello world");
        // Writer + fill reproduces it.
        let mut out = [0u8; 19];
        write_header(&mut out, 1234, 5678, 11).unwrap();
        out[8..].copy_from_slice(b"hello world");
        let mut w = UdpPacket::new_checked(&mut out[..]).unwrap();
        w.fill_checksum_v4(s, d);
        assert_eq!(&out[..], &u[..]);
        // Corruption is detected; zero means none.
        u[10] ^= 1;
        assert!(!UdpPacket::new_checked(&u[..])
            .unwrap()
            .verify_checksum_v4(s, d));
        u[6] = 0;
        u[7] = 0;
        assert!(UdpPacket::new_checked(&u[..])
            .unwrap()
            .verify_checksum_v4(s, d));
    }

    #[test]
    fn v6_checksum_known_answer() {
        // python3 -c 'from scapy.all import *; print(bytes(IPv6(src="fe80::1",dst="ff02::1",
        //   hlim=1)/UDP(sport=1234,dport=5678)/Raw(b"hello world!")).hex())'
        let p = hex("6000000000141101fe800000000000000000000000000001ff02000000000000000000000000000104d2162e0014555168656c6c6f20776f726c6421");
        let s: Ipv6Addr = "fe80::1".parse().unwrap();
        let d: Ipv6Addr = "ff02::1".parse().unwrap();
        let v = UdpPacket::new_checked(&p[40..]).unwrap();
        assert_eq!(v.checksum(), 0x5551);
        assert_eq!(v.compute_checksum_v6(s, d), 0x5551);
        assert!(v.verify_checksum_v6(s, d));
        let other: Ipv6Addr = "fe80::2".parse().unwrap();
        assert!(!v.verify_checksum_v6(other, d));
    }

    #[test]
    fn lengths() {
        assert_eq!(
            UdpPacket::new_checked(&[0u8; 7][..]).unwrap_err(),
            WireError::Truncated
        );
        let mut b = [0u8; 8];
        write_header(&mut b, 1, 2, 4).unwrap();
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap().check_len(),
            Err(WireError::BadLength)
        );
        assert_eq!(write_header(&mut b, 1, 2, 65530), Err(WireError::BadLength));
        assert_eq!(write_header(&mut b[..7], 1, 2, 0), Err(WireError::NoRoom));
    }
}
