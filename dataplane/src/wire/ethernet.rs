//! Ethernet II (IEEE 802.3 clause 3.2.6 Length/Type) and VLAN tags: 802.1Q C-tag (TPID 0x8100) and
//! 802.1ad S-tag (TPID 0x88a8), IEEE 802.1Q-2018 section 9.6 (TCI = PCP(3) | DEI(1) | VID(12)).
//!
//! Our buffers never carry the FCS.

use super::{be16, WireError};
use core::fmt;
use core::str::FromStr;

/// Ethernet header length (dst, src, EtherType).
pub const HEADER_LEN: usize = 14;
/// Length of one VLAN tag (TPID + TCI).
pub const VLAN_TAG_LEN: usize = 4;
/// Minimum frame length without FCS (64-byte minimum frame minus the 4-byte FCS).
pub const MIN_FRAME_LEN: usize = 60;

/// EtherType IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// EtherType IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// TPID of an 802.1Q customer VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// TPID of an 802.1ad service VLAN tag (Q-in-Q).
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
/// EtherType of MAC Control frames (802.3x PAUSE, 802.1Qbb PFC), IEEE 802.3 clause 31.
pub const ETHERTYPE_MAC_CONTROL: u16 = 0x8808;

/// Whether `frame` is an 802.3 MAC Control frame (PFC, PAUSE): EtherType
/// [`ETHERTYPE_MAC_CONTROL`] right after the addresses (MAC Control frames are never
/// VLAN-tagged).
#[inline(always)]
pub fn is_mac_control(frame: &[u8]) -> bool {
    let [hi, lo] = ETHERTYPE_MAC_CONTROL.to_be_bytes();
    frame.len() >= HEADER_LEN && frame[12] == hi && frame[13] == lo
}

/// A 48-bit MAC address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// The six octets.
    #[inline]
    pub const fn octets(&self) -> [u8; 6] {
        self.0
    }
    /// Group (multicast or broadcast) address: I/G bit set.
    #[inline]
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 1 != 0
    }
    /// ff:ff:ff:ff:ff:ff.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        self.0 == [0xff; 6]
    }
    /// Read a MAC address from the first six bytes of `b`.
    #[inline]
    pub fn from_slice(b: &[u8]) -> Option<MacAddr> {
        let s = b.get(..6)?;
        let mut m = [0u8; 6];
        m.copy_from_slice(s);
        Some(MacAddr(m))
    }
    /// Parse `aa:bb:cc:dd:ee:ff` (also `-` separated; hex digits either case).
    pub fn parse(s: &str) -> Result<MacAddr, WireError> {
        let b = s.as_bytes();
        if b.len() != 17 {
            return Err(WireError::BadLength);
        }
        let mut m = [0u8; 6];
        for (i, o) in m.iter_mut().enumerate() {
            let p = i * 3;
            if i > 0 {
                let sep = b[p - 1];
                if sep != b':' && sep != b'-' {
                    return Err(WireError::Unsupported);
                }
            }
            let hi = hex_val(b[p]).ok_or(WireError::Unsupported)?;
            let lo = hex_val(b[p + 1]).ok_or(WireError::Unsupported)?;
            *o = (hi << 4) | lo;
        }
        Ok(MacAddr(m))
    }
    /// Format as `aa:bb:cc:dd:ee:ff` into `out` without allocating.
    pub fn format<'a>(&self, out: &'a mut [u8; 17]) -> &'a str {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        for (i, o) in self.0.iter().enumerate() {
            out[i * 3] = HEX[(o >> 4) as usize];
            out[i * 3 + 1] = HEX[(o & 0xf) as usize];
            if i < 5 {
                out[i * 3 + 2] = b':';
            }
        }
        // All bytes written are ASCII.
        core::str::from_utf8(&out[..]).unwrap_or("")
    }
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

impl From<[u8; 6]> for MacAddr {
    fn from(b: [u8; 6]) -> Self {
        MacAddr(b)
    }
}

impl From<MacAddr> for [u8; 6] {
    fn from(m: MacAddr) -> Self {
        m.0
    }
}

impl FromStr for MacAddr {
    type Err = WireError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MacAddr::parse(s)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut buf = [0u8; 17];
        f.write_str(self.format(&mut buf))
    }
}

/// A read (and, for `AsMut` buffers, write) view of an Ethernet II header.
#[derive(Debug, Clone)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap `buf`, checking it holds at least an Ethernet header.
    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(EthernetFrame { buf })
    }
    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buf
    }
    #[inline]
    fn b(&self) -> &[u8] {
        self.buf.as_ref()
    }
    /// Destination address.
    pub fn dst(&self) -> MacAddr {
        MacAddr::from_slice(self.b()).unwrap_or_default()
    }
    /// Source address.
    pub fn src(&self) -> MacAddr {
        MacAddr::from_slice(self.b().get(6..).unwrap_or(&[])).unwrap_or_default()
    }
    /// The EtherType / TPID at offset 12 (the outer one when tagged).
    pub fn ethertype(&self) -> u16 {
        be16(self.b(), 12).unwrap_or(0)
    }
    /// Bytes after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        self.b().get(HEADER_LEN..).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Set the destination address.
    pub fn set_dst(&mut self, m: MacAddr) {
        if let Some(s) = self.buf.as_mut().get_mut(0..6) {
            s.copy_from_slice(&m.0);
        }
    }
    /// Set the source address.
    pub fn set_src(&mut self, m: MacAddr) {
        if let Some(s) = self.buf.as_mut().get_mut(6..12) {
            s.copy_from_slice(&m.0);
        }
    }
    /// Set the EtherType at offset 12.
    pub fn set_ethertype(&mut self, t: u16) {
        super::put16(self.buf.as_mut(), 12, t);
    }
}

/// Write an Ethernet II header at the start of `buf`; returns 14.
pub fn write_header(
    buf: &mut [u8],
    dst: MacAddr,
    src: MacAddr,
    ethertype: u16,
) -> Result<usize, WireError> {
    let h = buf.get_mut(..HEADER_LEN).ok_or(WireError::NoRoom)?;
    h[0..6].copy_from_slice(&dst.0);
    h[6..12].copy_from_slice(&src.0);
    h[12..14].copy_from_slice(&ethertype.to_be_bytes());
    Ok(HEADER_LEN)
}

/// A VLAN tag's TCI fields (IEEE 802.1Q-2018 section 9.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VlanTci {
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN id (12 bits).
    pub vid: u16,
}

impl VlanTci {
    /// Decode a TCI.
    #[inline]
    pub const fn from_u16(tci: u16) -> Self {
        VlanTci {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
    /// Encode (extra bits of `pcp`/`vid` are masked off).
    #[inline]
    pub const fn to_u16(self) -> u16 {
        ((self.pcp as u16 & 7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }
}

/// Whether `t` is a VLAN TPID this code walks (0x8100 or 0x88a8).
#[inline]
pub const fn is_vlan_tpid(t: u16) -> bool {
    t == ETHERTYPE_VLAN || t == ETHERTYPE_QINQ
}

/// Write a 4-byte VLAN tag (TPID, TCI) at the start of `buf`; the following 2 bytes of the frame
/// are the inner EtherType, written by the caller (or use [`write_header_tagged`]).
pub fn write_vlan_tag(buf: &mut [u8], tpid: u16, tci: VlanTci) -> Result<usize, WireError> {
    let h = buf.get_mut(..VLAN_TAG_LEN).ok_or(WireError::NoRoom)?;
    h[0..2].copy_from_slice(&tpid.to_be_bytes());
    h[2..4].copy_from_slice(&tci.to_u16().to_be_bytes());
    Ok(VLAN_TAG_LEN)
}

/// Write an Ethernet header with one 802.1Q tag: dst, src, 0x8100, TCI, `ethertype`; returns 18.
pub fn write_header_tagged(
    buf: &mut [u8],
    dst: MacAddr,
    src: MacAddr,
    tci: VlanTci,
    ethertype: u16,
) -> Result<usize, WireError> {
    if buf.len() < HEADER_LEN + VLAN_TAG_LEN {
        return Err(WireError::NoRoom);
    }
    write_header(buf, dst, src, ETHERTYPE_VLAN)?;
    write_vlan_tag(&mut buf[12..], ETHERTYPE_VLAN, tci)?;
    buf[16..18].copy_from_slice(&ethertype.to_be_bytes());
    Ok(HEADER_LEN + VLAN_TAG_LEN)
}

/// Result of walking the L2 header and its VLAN tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L2Info {
    /// The EtherType after the last tag.
    pub ethertype: u16,
    /// Offset of the L3 header (14 + 4 x tags).
    pub l3_off: usize,
    /// PCP of the outermost tag, `None` when untagged.
    pub outer_pcp: Option<u8>,
    /// Number of VLAN tags.
    pub tags: u8,
}

/// Walk the Ethernet header and up to `max_tags` VLAN tags (0x8100 / 0x88a8, in any order).
/// Errors: [`WireError::Truncated`] when the frame or a tag is cut short, [`WireError::VlanStack`]
/// when there are more than `max_tags` tags.
pub fn walk_tags(frame: &[u8], max_tags: u8) -> Result<L2Info, WireError> {
    if frame.len() < HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let mut et = be16(frame, 12).ok_or(WireError::Truncated)?;
    let mut off = HEADER_LEN;
    let mut tags = 0u8;
    let mut outer_pcp = None;
    while is_vlan_tpid(et) {
        if tags >= max_tags {
            return Err(WireError::VlanStack);
        }
        // TCI at off-2..off, next EtherType at off..off+2.
        let tci = be16(frame, off).ok_or(WireError::Truncated)?;
        et = be16(frame, off + 2).ok_or(WireError::Truncated)?;
        if tags == 0 {
            outer_pcp = Some(VlanTci::from_u16(tci).pcp);
        }
        tags += 1;
        off += VLAN_TAG_LEN;
    }
    Ok(L2Info {
        ethertype: et,
        l3_off: off,
        outer_pcp,
        tags,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parse_format() {
        let m: MacAddr = "e4:1D:2d:ab:2b:c2".parse().unwrap();
        assert_eq!(m.0, [0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2]);
        assert_eq!(m.to_string(), "e4:1d:2d:ab:2b:c2");
        assert_eq!(MacAddr::parse("e4-1d-2d-ab-2b-c2"), Ok(m));
        assert!(MacAddr::parse("e4:1d:2d:ab:2b").is_err());
        assert!(MacAddr::parse("e4:1d:2d:ab:2b:cg").is_err());
        assert!(MacAddr::parse("e4:1d:2d:ab:2b;c2").is_err());
        assert!(MacAddr::parse("é4:1d:2d:ab:2b:c").is_err());
        assert!(MacAddr([1, 0, 0, 0, 0, 0]).is_multicast());
        assert!(MacAddr::BROADCAST.is_broadcast());
    }

    #[test]
    fn header_view_and_writer() {
        let mut b = [0u8; 20];
        let d = MacAddr([1, 2, 3, 4, 5, 6]);
        let s = MacAddr([7, 8, 9, 10, 11, 12]);
        assert_eq!(write_header(&mut b, d, s, ETHERTYPE_IPV6), Ok(14));
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert_eq!((f.dst(), f.src(), f.ethertype()), (d, s, ETHERTYPE_IPV6));
        assert_eq!(f.payload().len(), 6);
        assert_eq!(
            EthernetFrame::new_checked(&b[..13]).unwrap_err(),
            WireError::Truncated
        );
        assert_eq!(write_header(&mut b[..13], d, s, 0), Err(WireError::NoRoom));
        let mut f = EthernetFrame::new_checked(&mut b[..]).unwrap();
        f.set_ethertype(0x0800);
        f.set_src(d);
        f.set_dst(s);
        assert_eq!(&b[..14], &[7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6, 8, 0]);
    }

    #[test]
    fn tags() {
        // Known bytes: 802.1ad S-tag PCP 5 VID 100, then 802.1Q C-tag PCP 3 DEI VID 0xabc, IPv4.
        let mut f = vec![0u8; 14 + 8 + 20];
        f[12..14].copy_from_slice(&[0x88, 0xa8]);
        f[14..16].copy_from_slice(&[0xa0, 0x64]);
        f[16..18].copy_from_slice(&[0x81, 0x00]);
        f[18..20].copy_from_slice(&[0x7a, 0xbc]);
        f[20..22].copy_from_slice(&[0x08, 0x00]);
        let i = walk_tags(&f, 2).unwrap();
        assert_eq!(
            i,
            L2Info {
                ethertype: 0x0800,
                l3_off: 22,
                outer_pcp: Some(5),
                tags: 2
            }
        );
        assert_eq!(walk_tags(&f, 1), Err(WireError::VlanStack));
        assert_eq!(walk_tags(&f[..21], 2), Err(WireError::Truncated));
        assert_eq!(walk_tags(&f[..13], 2), Err(WireError::Truncated));
        let t = VlanTci::from_u16(0x7abc);
        assert_eq!((t.pcp, t.dei, t.vid), (3, true, 0xabc));
        assert_eq!(t.to_u16(), 0x7abc);
        let mut b = [0u8; 18];
        write_header_tagged(&mut b, MacAddr::ZERO, MacAddr::ZERO, t, 0x86dd).unwrap();
        let i = walk_tags(&b, 1).unwrap();
        assert_eq!(
            (i.ethertype, i.l3_off, i.outer_pcp, i.tags),
            (0x86dd, 18, Some(3), 1)
        );
        let i = walk_tags(&b[..14], 0);
        assert_eq!(i, Err(WireError::VlanStack));
    }
}
