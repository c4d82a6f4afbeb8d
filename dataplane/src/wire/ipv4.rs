//! IPv4 header (RFC 791 section 3.1): bounds-checked view, checksum (RFC 1071), TTL decrement with
//! incremental checksum update (RFC 1624), and a writer for the 20-byte option-less header.

use super::checksum;
use super::{be16, put16, WireError};
use std::net::Ipv4Addr;

/// Length of the header without options.
pub const HEADER_LEN: usize = 20;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IP protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// Flags: Don't Fragment (in the flags/fragment-offset word).
pub const FLAG_DF: u16 = 0x4000;
/// Flags: More Fragments.
pub const FLAG_MF: u16 = 0x2000;

/// A view of an IPv4 header. `new_checked` guarantees version 4, IHL >= 5, and the whole header
/// (IHL x 4 bytes) in the buffer; the total length is checked separately ([`Self::check_len`]).
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap `buf` (starting at the IPv4 header). Errors: [`WireError::Truncated`] when shorter than
    /// 20 bytes or than IHL x 4; [`WireError::BadIpHeader`] when version != 4 or IHL < 5.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let b = buf.as_ref();
        let b0 = *b.first().ok_or(WireError::Truncated)?;
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        if b0 >> 4 != 4 || b0 & 0xf < 5 {
            return Err(WireError::BadIpHeader);
        }
        if b.len() < (b0 as usize & 0xf) * 4 {
            return Err(WireError::Truncated);
        }
        Ok(Ipv4Packet { buf })
    }

    /// Check the total length: `header_len <= total_len <= buffer length` (trailing bytes, e.g.
    /// Ethernet padding, are allowed). Error: [`WireError::BadLength`].
    pub fn check_len(&self) -> Result<(), WireError> {
        let t = self.total_len() as usize;
        if t < self.header_len() || t > self.b().len() {
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
    fn byte(&self, i: usize) -> u8 {
        self.b().get(i).copied().unwrap_or(0)
    }
    #[inline]
    fn word(&self, i: usize) -> u16 {
        be16(self.b(), i).unwrap_or(0)
    }
    /// Version (always 4 for a checked view).
    pub fn version(&self) -> u8 {
        self.byte(0) >> 4
    }
    /// Internet header length in 32-bit words.
    pub fn ihl(&self) -> u8 {
        self.byte(0) & 0xf
    }
    /// Header length in bytes (IHL x 4).
    pub fn header_len(&self) -> usize {
        self.ihl() as usize * 4
    }
    /// Whole ToS byte (DSCP << 2 | ECN).
    pub fn tos(&self) -> u8 {
        self.byte(1)
    }
    /// Differentiated services code point (RFC 2474), 6 bits.
    pub fn dscp(&self) -> u8 {
        self.byte(1) >> 2
    }
    /// ECN codepoint (RFC 3168), 2 bits.
    pub fn ecn(&self) -> u8 {
        self.byte(1) & 3
    }
    /// Total length (header + payload).
    pub fn total_len(&self) -> u16 {
        self.word(2)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        self.word(4)
    }
    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.word(6) & FLAG_DF != 0
    }
    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        self.word(6) & FLAG_MF != 0
    }
    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        self.word(6) & 0x1fff
    }
    /// Part of a fragmented datagram (MF set or offset != 0).
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }
    /// A fragment other than the first (offset != 0): carries no L4 header.
    pub fn is_later_fragment(&self) -> bool {
        self.frag_offset() != 0
    }
    /// IHL > 5.
    pub fn has_options(&self) -> bool {
        self.ihl() > 5
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.byte(8)
    }
    /// Protocol (6 TCP, 17 UDP).
    pub fn protocol(&self) -> u8 {
        self.byte(9)
    }
    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        self.word(10)
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.byte(12), self.byte(13), self.byte(14), self.byte(15))
    }
    /// Destination address.
    #[inline(always)]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(self.byte(16), self.byte(17), self.byte(18), self.byte(19))
    }
    /// The header bytes (IHL x 4).
    pub fn header(&self) -> &[u8] {
        let n = self.header_len();
        self.b().get(..n).unwrap_or(&[])
    }
    /// The checksum the header should carry (computed with the checksum field taken as zero).
    pub fn compute_checksum(&self) -> u16 {
        let h = self.header();
        let s = checksum::sum(h.get(..10).unwrap_or(&[]), 0);
        let s = checksum::sum(h.get(12..).unwrap_or(&[]), s);
        checksum::finish(s)
    }
    /// The header checksum verifies. Always inlined: the parser verifies every IPv4 header.
    #[inline(always)]
    pub fn verify_checksum(&self) -> bool {
        let h = self.header();
        match <&[u8; HEADER_LEN]>::try_from(h) {
            Ok(h20) => checksum::finish(checksum::sum_ipv4_header(h20)) == 0,
            Err(_) => checksum::checksum(h) == 0,
        }
    }
    /// The payload, bounded by the total length (and the buffer).
    pub fn payload(&self) -> &[u8] {
        let end = (self.total_len() as usize).min(self.b().len());
        self.b().get(self.header_len()..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    #[inline]
    fn bm(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }
    #[inline]
    fn set_byte(&mut self, i: usize, v: u8) {
        if let Some(x) = self.bm().get_mut(i) {
            *x = v;
        }
    }
    /// Set the DSCP (checksum not updated; call [`Self::fill_checksum`] or use
    /// [`Self::set_tos_update`]).
    pub fn set_dscp(&mut self, dscp: u8) {
        let t = (self.tos() & 3) | (dscp << 2);
        self.set_byte(1, t);
    }
    /// Set the ToS byte and update the checksum incrementally.
    pub fn set_tos_update(&mut self, tos: u8) {
        let old = self.word(0);
        self.set_byte(1, tos);
        let new = self.word(0);
        let ck = checksum::update(self.checksum(), old, new);
        put16(self.bm(), 10, ck);
    }
    /// Set the total length (checksum not updated).
    pub fn set_total_len(&mut self, v: u16) {
        put16(self.bm(), 2, v);
    }
    /// Set the identification (checksum not updated).
    pub fn set_ident(&mut self, v: u16) {
        put16(self.bm(), 4, v);
    }
    /// Set the TTL (checksum not updated).
    pub fn set_ttl(&mut self, v: u8) {
        self.set_byte(8, v);
    }
    /// Set the protocol (checksum not updated).
    pub fn set_protocol(&mut self, v: u8) {
        self.set_byte(9, v);
    }
    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.bm(), 10, v);
    }
    /// Set the source address (checksum not updated).
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        if let Some(s) = self.bm().get_mut(12..16) {
            s.copy_from_slice(&a.octets());
        }
    }
    /// Set the destination address (checksum not updated).
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        if let Some(s) = self.bm().get_mut(16..20) {
            s.copy_from_slice(&a.octets());
        }
    }
    /// Recompute and store the header checksum.
    pub fn fill_checksum(&mut self) {
        let c = self.compute_checksum();
        self.set_checksum(c);
    }
    /// Set the total length and update the checksum incrementally (RFC 1624).
    pub fn set_total_len_update(&mut self, v: u16) {
        let old = self.total_len();
        self.set_total_len(v);
        let ck = checksum::update(self.checksum(), old, v);
        self.set_checksum(ck);
    }
    /// Decrement the TTL by one, updating the checksum incrementally (RFC 1624; RFC 1812 section
    /// 5.3.1). Returns the new TTL, or [`WireError::TtlExpired`] (header unchanged) when the TTL is
    /// 0 or 1, i.e. the datagram must not be forwarded.
    #[inline(always)]
    pub fn decrement_ttl(&mut self) -> Result<u8, WireError> {
        // `new_checked` saw at least 20 bytes, so the fixed header is always there.
        let h = self
            .bm()
            .first_chunk_mut::<HEADER_LEN>()
            .ok_or(WireError::Truncated)?;
        decrement_ttl_fixed(h)
    }
}

/// The fixed part (first 20 bytes) of an IPv4 header at the start of `buf`, as an array: for a
/// stage after the parser, which has already checked the version, the IHL and the lengths
/// ([`Ipv4Packet::new_checked`], [`Ipv4Packet::check_len`]). Its fields are then read and written
/// at constant offsets without a bounds check each (an [`Ipv4Packet`] accessor checks every byte
/// it reads; re-checking the header in the lookup and again in the rewrite costs about 40
/// instructions per routed frame). `None` when `buf` is shorter than 20 bytes.
#[inline(always)]
pub fn fixed_header(buf: &[u8]) -> Option<&[u8; HEADER_LEN]> {
    buf.first_chunk::<HEADER_LEN>()
}

/// [`fixed_header`], writable.
#[inline(always)]
pub fn fixed_header_mut(buf: &mut [u8]) -> Option<&mut [u8; HEADER_LEN]> {
    buf.first_chunk_mut::<HEADER_LEN>()
}

/// The source address of a fixed header ([`fixed_header`]), as a `u32` in host order.
#[inline(always)]
pub fn src_of(h: &[u8; HEADER_LEN]) -> u32 {
    u32::from_be_bytes([h[12], h[13], h[14], h[15]])
}

/// The destination address of a fixed header ([`fixed_header`]), as a `u32` in host order.
#[inline(always)]
pub fn dst_of(h: &[u8; HEADER_LEN]) -> u32 {
    u32::from_be_bytes([h[16], h[17], h[18], h[19]])
}

/// Whether a fixed header ([`fixed_header`]) is of a fragment (MF set or a non-zero offset).
#[inline(always)]
pub fn is_fragment_fixed(h: &[u8; HEADER_LEN]) -> bool {
    u16::from_be_bytes([h[6], h[7]]) & (FLAG_MF | 0x1fff) != 0
}

/// [`Ipv4Packet::decrement_ttl`] on a fixed header ([`fixed_header_mut`]): the TTL decremented
/// and the checksum updated incrementally (RFC 1624; RFC 1812 section 5.3.1), or
/// [`WireError::TtlExpired`] (header unchanged) when the TTL is 0 or 1.
#[inline(always)]
pub fn decrement_ttl_fixed(h: &mut [u8; HEADER_LEN]) -> Result<u8, WireError> {
    let ttl = h[8];
    if ttl <= 1 {
        return Err(WireError::TtlExpired);
    }
    // The TTL is the high byte of word 8 (TTL, protocol). The new word is computed, not read
    // back after a byte store (a 2-byte load of a just-stored byte stalls store forwarding).
    let old = u16::from_be_bytes([h[8], h[9]]);
    let new = old - 0x0100;
    let ck = checksum::update(u16::from_be_bytes([h[10], h[11]]), old, new);
    h[8..10].copy_from_slice(&new.to_be_bytes());
    h[10..12].copy_from_slice(&ck.to_be_bytes());
    Ok(ttl - 1)
}

/// Fields of an option-less IPv4 header for [`write_header`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Repr {
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Protocol number.
    pub protocol: u8,
    /// DSCP (6 bits).
    pub dscp: u8,
    /// ECN (2 bits).
    pub ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment.
    pub dont_frag: bool,
    /// TTL.
    pub ttl: u8,
    /// Payload length (total length - 20).
    pub payload_len: u16,
}

/// Write a 20-byte IPv4 header (no options, not a fragment) with a valid checksum at the start of
/// `buf`; returns 20. [`WireError::BadLength`] when the total length would exceed 65535.
pub fn write_header(buf: &mut [u8], r: &Ipv4Repr) -> Result<usize, WireError> {
    let h = buf.get_mut(..HEADER_LEN).ok_or(WireError::NoRoom)?;
    let total = r
        .payload_len
        .checked_add(HEADER_LEN as u16)
        .ok_or(WireError::BadLength)?;
    h[0] = 0x45;
    h[1] = (r.dscp << 2) | (r.ecn & 3);
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&r.ident.to_be_bytes());
    let ff = if r.dont_frag { FLAG_DF } else { 0 };
    h[6..8].copy_from_slice(&ff.to_be_bytes());
    h[8] = r.ttl;
    h[9] = r.protocol;
    h[10] = 0;
    h[11] = 0;
    h[12..16].copy_from_slice(&r.src.octets());
    h[16..20].copy_from_slice(&r.dst.octets());
    let ck = checksum::checksum(h);
    h[10..12].copy_from_slice(&ck.to_be_bytes());
    Ok(HEADER_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testutil::hex;

    // ConnectX-4 Lx CNP IPv4 header, DESIGN.md section 5.
    const CX4: &str = "45c2003c718c400040119161 0a001101 0a001201";

    #[test]
    fn view_fields() {
        let b = hex(CX4);
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!((p.dscp(), p.ecn()), (48, 2));
        assert_eq!(p.total_len(), 60);
        assert_eq!(p.ident(), 0x718c);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment() && !p.has_options());
        assert_eq!((p.ttl(), p.protocol(), p.checksum()), (64, 17, 0x9161));
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 17, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 0, 18, 1));
        assert!(p.verify_checksum());
        assert_eq!(p.compute_checksum(), 0x9161);
        // total length 60 > 20 bytes available
        assert_eq!(p.check_len(), Err(WireError::BadLength));
    }

    #[test]
    fn checked_errors() {
        let b = hex(CX4);
        assert_eq!(
            Ipv4Packet::new_checked(&b[..19]).unwrap_err(),
            WireError::Truncated
        );
        assert!(Ipv4Packet::new_checked(&[][..]).is_err());
        let mut v = b.clone();
        v[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v[..]).unwrap_err(),
            WireError::BadIpHeader
        );
        v[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&v[..]).unwrap_err(),
            WireError::BadIpHeader
        );
        v[0] = 0x46;
        assert_eq!(
            Ipv4Packet::new_checked(&v[..]).unwrap_err(),
            WireError::Truncated
        );
        v.extend_from_slice(&[1, 1, 1, 0]);
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert!(p.has_options());
        assert_eq!(p.header_len(), 24);
        // fragments
        let mut v = b.clone();
        v[6] = 0x20; // MF
        v[7] = 0;
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert!(p.is_fragment() && !p.is_later_fragment());
        v[6] = 0x00;
        v[7] = 0x10;
        let p = Ipv4Packet::new_checked(&v[..]).unwrap();
        assert!(p.is_fragment() && p.is_later_fragment());
        assert_eq!(p.frag_offset(), 16);
    }

    #[test]
    fn ttl_and_writer() {
        let mut b = hex(CX4);
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.decrement_ttl(), Ok(63));
        assert!(p.verify_checksum());
        p.set_ttl(1);
        p.fill_checksum();
        assert_eq!(p.decrement_ttl(), Err(WireError::TtlExpired));
        assert_eq!(p.ttl(), 1);
        p.set_tos_update(0xff);
        assert!(p.verify_checksum());
        p.set_total_len_update(1000);
        assert!(p.verify_checksum());

        // Writer reproduces the CX4 header exactly.
        let mut out = [0u8; 20];
        let r = Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 17, 1),
            dst: Ipv4Addr::new(10, 0, 18, 1),
            protocol: PROTO_UDP,
            dscp: 48,
            ecn: 2,
            ident: 0x718c,
            dont_frag: true,
            ttl: 64,
            payload_len: 40,
        };
        assert_eq!(write_header(&mut out, &r), Ok(20));
        assert_eq!(&out[..], &hex(CX4)[..]);
        assert_eq!(write_header(&mut out[..19], &r), Err(WireError::NoRoom));
        let big = Ipv4Repr {
            payload_len: 65530,
            ..r
        };
        assert_eq!(write_header(&mut out, &big), Err(WireError::BadLength));
    }

    #[test]
    fn fixed_header_fields() {
        let b = hex(CX4);
        let h = fixed_header(&b).unwrap();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(src_of(h), u32::from(p.src_addr()));
        assert_eq!(dst_of(h), 0x0a00_1201);
        assert!(!is_fragment_fixed(h));
        assert!(fixed_header(&b[..19]).is_none());
        let mut short = b[..19].to_vec();
        assert!(fixed_header_mut(&mut short).is_none());
    }

    #[test]
    fn fixed_ttl_at_the_edges() {
        let mut b = hex(CX4);
        let mut v = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        v.set_ttl(2);
        v.fill_checksum();
        let h = fixed_header_mut(&mut b).unwrap();
        assert_eq!(decrement_ttl_fixed(h), Ok(1));
        assert_eq!(decrement_ttl_fixed(h), Err(WireError::TtlExpired));
        assert_eq!(h[8], 1, "an expired TTL leaves the header unchanged");
        // Still a valid header: the checksum followed the TTL.
        assert!(Ipv4Packet::new_checked(&b[..]).unwrap().verify_checksum());
    }

    proptest::proptest! {
        /// The fixed-header accessors agree with the checked view on any option-less header:
        /// TTL decrement (header bytes and result), addresses and the fragment test.
        #[test]
        fn fixed_header_matches_the_view(mut h in proptest::array::uniform20(proptest::num::u8::ANY)) {
            h[0] = 0x45;
            let view = Ipv4Packet::new_checked(h).unwrap();
            let f = fixed_header(&h).unwrap();
            proptest::prop_assert_eq!(src_of(f), u32::from(view.src_addr()));
            proptest::prop_assert_eq!(dst_of(f), u32::from(view.dst_addr()));
            proptest::prop_assert_eq!(is_fragment_fixed(f), view.is_fragment());
            let mut a = h;
            let mut view = Ipv4Packet::new_checked(&mut a[..]).unwrap();
            let ra = view.decrement_ttl();
            let mut b = h;
            let rb = decrement_ttl_fixed(&mut b);
            proptest::prop_assert_eq!(ra, rb);
            proptest::prop_assert_eq!(a, b);
            // The incremental update (RFC 1624) keeps a correct checksum correct.
            let mut c = h;
            let sum = Ipv4Packet::new_checked(&c[..]).unwrap().compute_checksum();
            c[10..12].copy_from_slice(&sum.to_be_bytes());
            if decrement_ttl_fixed(&mut c).is_ok() {
                proptest::prop_assert!(Ipv4Packet::new_checked(&c[..]).unwrap().verify_checksum());
            }
        }
    }
}
