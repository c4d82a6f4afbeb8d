//! ARP for IPv4 over Ethernet (RFC 826): the 28-byte packet after the EtherType 0x0806, its
//! view and the two frames a routed port sends (a request for a next hop, a reply for its own
//! address).

use super::ethernet::{self, MacAddr, ETHERTYPE_ARP, ETHERTYPE_IPV4, MIN_FRAME_LEN};
use super::WireError;

/// Bytes of an Ethernet/IPv4 ARP packet.
pub const LEN: usize = 28;
/// `oper` of a request.
pub const OP_REQUEST: u16 = 1;
/// `oper` of a reply.
pub const OP_REPLY: u16 = 2;
/// Hardware type Ethernet.
const HTYPE_ETHERNET: u16 = 1;

/// An Ethernet/IPv4 ARP packet's fields (addresses as host-order `u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arp {
    pub op: u16,
    /// Sender hardware address.
    pub sha: [u8; 6],
    /// Sender protocol address.
    pub spa: u32,
    /// Target hardware address.
    pub tha: [u8; 6],
    /// Target protocol address.
    pub tpa: u32,
}

fn mac_at(b: &[u8], off: usize) -> [u8; 6] {
    let mut m = [0u8; 6];
    m.copy_from_slice(&b[off..off + 6]);
    m
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

impl Arp {
    /// Read the ARP packet at the start of `b` (what follows the EtherType). Anything but
    /// Ethernet/IPv4 (htype 1, ptype 0x0800, hlen 6, plen 4) is `Unsupported`.
    pub fn parse(b: &[u8]) -> Result<Arp, WireError> {
        let b = b.get(..LEN).ok_or(WireError::Truncated)?;
        let htype = u16::from_be_bytes([b[0], b[1]]);
        let ptype = u16::from_be_bytes([b[2], b[3]]);
        if htype != HTYPE_ETHERNET || ptype != ETHERTYPE_IPV4 || b[4] != 6 || b[5] != 4 {
            return Err(WireError::Unsupported);
        }
        Ok(Arp {
            op: u16::from_be_bytes([b[6], b[7]]),
            sha: mac_at(b, 8),
            spa: u32_at(b, 14),
            tha: mac_at(b, 18),
            tpa: u32_at(b, 24),
        })
    }

    /// Write the packet at the start of `b`; returns [`LEN`].
    pub fn write(&self, b: &mut [u8]) -> Result<usize, WireError> {
        let b = b.get_mut(..LEN).ok_or(WireError::NoRoom)?;
        b[0..2].copy_from_slice(&HTYPE_ETHERNET.to_be_bytes());
        b[2..4].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        b[4] = 6;
        b[5] = 4;
        b[6..8].copy_from_slice(&self.op.to_be_bytes());
        b[8..14].copy_from_slice(&self.sha);
        b[14..18].copy_from_slice(&self.spa.to_be_bytes());
        b[18..24].copy_from_slice(&self.tha);
        b[24..28].copy_from_slice(&self.tpa.to_be_bytes());
        Ok(LEN)
    }
}

/// A broadcast who-has frame from `src_mac`/`sender_ip` for `target_ip`, zero-padded to the
/// Ethernet minimum (60 bytes without FCS); returns its length.
pub fn build_request(
    out: &mut [u8],
    src_mac: [u8; 6],
    sender_ip: u32,
    target_ip: u32,
) -> Result<usize, WireError> {
    build(
        out,
        MacAddr::BROADCAST.0,
        src_mac,
        OP_REQUEST,
        sender_ip,
        [0; 6],
        target_ip,
    )
}

/// A unicast who-has (a probe of a neighbour whose MAC is known but stale, RFC 1122 2.3.2.1).
pub fn build_probe(
    out: &mut [u8],
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    sender_ip: u32,
    target_ip: u32,
) -> Result<usize, WireError> {
    build(
        out, dst_mac, src_mac, OP_REQUEST, sender_ip, [0; 6], target_ip,
    )
}

fn build(
    out: &mut [u8],
    dst: [u8; 6],
    src: [u8; 6],
    op: u16,
    spa: u32,
    tha: [u8; 6],
    tpa: u32,
) -> Result<usize, WireError> {
    let f = out.get_mut(..MIN_FRAME_LEN).ok_or(WireError::NoRoom)?;
    let n = ethernet::write_header(f, MacAddr(dst), MacAddr(src), ETHERTYPE_ARP)?;
    let a = Arp {
        op,
        sha: src,
        spa,
        tha,
        tpa,
    };
    let n = n + a.write(&mut f[n..])?;
    f[n..].fill(0);
    Ok(MIN_FRAME_LEN)
}

/// Turn the request at `arp_off` in `frame` into the reply from `our_mac` (RFC 826 "swap"):
/// the sender becomes the target, `our_mac` the sender hardware address, the Ethernet
/// destination the requester and the source `our_mac`. VLAN tags and padding stay.
pub fn reply_in_place(frame: &mut [u8], arp_off: usize, our_mac: [u8; 6]) -> Result<(), WireError> {
    let req = Arp::parse(frame.get(arp_off..).ok_or(WireError::Truncated)?)?;
    if frame.len() < ethernet::HEADER_LEN {
        return Err(WireError::Truncated);
    }
    let rep = Arp {
        op: OP_REPLY,
        sha: our_mac,
        spa: req.tpa,
        tha: req.sha,
        tpa: req.spa,
    };
    rep.write(&mut frame[arp_off..])?;
    let requester = mac_at(frame, 6);
    frame[0..6].copy_from_slice(&requester);
    frame[6..12].copy_from_slice(&our_mac);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testutil::hex;

    // scapy: Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:00:10:01")/ARP(op=1,
    //   hwsrc="02:00:00:00:10:01", psrc="10.0.0.2", hwdst="00:00:00:00:00:00", pdst="10.0.0.1")
    //   padded to 60 bytes.
    const REQ: &str = "ffffffffffff020000001001080600010800060400010200000010010a0000020000000000000a000001000000000000000000000000000000000000";

    #[test]
    fn request_matches_scapy() {
        let mut b = [0u8; 64];
        let n = build_request(&mut b, [2, 0, 0, 0, 0x10, 1], 0x0a00_0002, 0x0a00_0001).unwrap();
        assert_eq!(&b[..n], &hex(REQ)[..]);
        let a = Arp::parse(&b[14..n]).unwrap();
        assert_eq!((a.op, a.spa, a.tpa), (OP_REQUEST, 0x0a00_0002, 0x0a00_0001));
    }

    #[test]
    fn reply_swaps_and_keeps_the_frame_length() {
        let mut f = hex(REQ);
        let me = [2, 0, 0, 0, 0, 1];
        reply_in_place(&mut f, 14, me).unwrap();
        assert_eq!(f.len(), 60);
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0x10, 1]);
        assert_eq!(&f[6..12], &me);
        let a = Arp::parse(&f[14..]).unwrap();
        assert_eq!(a.op, OP_REPLY);
        assert_eq!((a.sha, a.spa), (me, 0x0a00_0001));
        assert_eq!((a.tha, a.tpa), ([2, 0, 0, 0, 0x10, 1], 0x0a00_0002));
    }

    #[test]
    fn refuses_short_and_foreign_packets() {
        let f = hex(REQ);
        assert_eq!(Arp::parse(&f[14..14 + 27]), Err(WireError::Truncated));
        let mut g = f.clone();
        g[14 + 5] = 16; // plen 16: not IPv4
        assert_eq!(Arp::parse(&g[14..]), Err(WireError::Unsupported));
        let mut short = [0u8; 30];
        assert!(build_request(&mut short, [0; 6], 0, 0).is_err());
        assert!(reply_in_place(&mut short[..20], 14, [0; 6]).is_err());
    }
}
