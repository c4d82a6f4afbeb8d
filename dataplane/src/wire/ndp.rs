//! IPv6 Neighbor Discovery (RFC 4861): the Neighbor Solicitation and Advertisement a routed port
//! receives, validated as section 7.1 says, and the ones it sends (a solicitation for a next hop,
//! an advertisement for its own address).

use super::checksum;
use super::ethernet::{self, MacAddr, ETHERTYPE_IPV6};
use super::ipv6::{self, Ipv6Repr};
use super::WireError;
use std::net::Ipv6Addr;

/// IPv6 next header of ICMPv6.
pub const NEXT_HEADER_ICMPV6: u8 = 58;
/// ICMPv6 type of a Neighbor Solicitation (RFC 4861 section 4.3).
pub const NS: u8 = 135;
/// ICMPv6 type of a Neighbor Advertisement (section 4.4).
pub const NA: u8 = 136;
/// Option type: Source Link-Layer Address (section 4.6.1).
const OPT_SLLA: u8 = 1;
/// Option type: Target Link-Layer Address.
const OPT_TLLA: u8 = 2;
/// NA flags (first byte after the checksum): Router, Solicited, Override.
const FLAG_R: u8 = 0x80;
const FLAG_S: u8 = 0x40;
const FLAG_O: u8 = 0x20;
/// NS/NA without options: type, code, checksum, 4 bytes, target.
const BODY_LEN: usize = 24;
/// NS/NA with one link-layer address option (8 bytes).
const MSG_LEN: usize = BODY_LEN + 8;
/// Bytes of an untagged NS or NA frame with one link-layer address option.
pub const FRAME_LEN: usize = ethernet::HEADER_LEN + ipv6::HEADER_LEN + MSG_LEN;

/// A validated NS or NA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Nd {
    /// [`NS`] or [`NA`].
    pub kind: u8,
    /// IPv6 source and destination of the packet.
    pub src: u128,
    pub dst: u128,
    /// The target address.
    pub target: u128,
    /// The source (NS) or target (NA) link-layer address option, if present.
    pub lladdr: Option<[u8; 6]>,
    /// NA: the Solicited and Override flags.
    pub solicited: bool,
    pub override_: bool,
}

/// Whether `a` is a multicast address (ff00::/8).
pub fn is_multicast(a: u128) -> bool {
    (a >> 120) == 0xff
}

/// The solicited-node multicast address of `a` (RFC 4291 section 2.7.1): ff02::1:ffXX:XXXX.
pub fn solicited_node(a: u128) -> u128 {
    0xff02_0000_0000_0000_0000_0001_ff00_0000 | (a & 0x00ff_ffff)
}

/// The Ethernet multicast address of IPv6 multicast `a` (RFC 2464 section 7): 33:33 + its low
/// 32 bits.
pub fn multicast_mac(a: u128) -> [u8; 6] {
    let l = (a as u32).to_be_bytes();
    [0x33, 0x33, l[0], l[1], l[2], l[3]]
}

fn icmp_sum(src: u128, dst: u128, msg: &[u8]) -> u16 {
    let s = checksum::pseudo_header_v6(
        Ipv6Addr::from(src),
        Ipv6Addr::from(dst),
        NEXT_HEADER_ICMPV6,
        msg.len() as u32,
    );
    checksum::finish(checksum::sum(msg, s))
}

impl Nd {
    /// Read and validate an NS or NA from the IPv6 packet `ip` (header first, no extension
    /// headers; bytes past the payload length are ignored). RFC 4861 section 7.1.1/7.1.2: hop
    /// limit 255, ICMPv6 checksum, code 0, at least 24 bytes, target not multicast, no option of
    /// length 0; an NS from the unspecified address goes to a solicited-node address and carries
    /// no source link-layer option; an NA to a multicast address is not solicited. Another
    /// ICMPv6 message is `Unsupported`; a message failing validation `BadChecksum`/`BadLength`/
    /// `Unsupported` as fits.
    pub fn parse(ip: &[u8]) -> Result<Nd, WireError> {
        let h = ip.get(..ipv6::HEADER_LEN).ok_or(WireError::Truncated)?;
        if h[0] >> 4 != 6 {
            return Err(WireError::BadIpHeader);
        }
        if h[6] != NEXT_HEADER_ICMPV6 {
            return Err(WireError::Unsupported);
        }
        let plen = u16::from_be_bytes([h[4], h[5]]) as usize;
        let msg = ip
            .get(ipv6::HEADER_LEN..ipv6::HEADER_LEN + plen)
            .ok_or(WireError::BadLength)?;
        let kind = *msg.first().ok_or(WireError::Truncated)?;
        if kind != NS && kind != NA {
            return Err(WireError::Unsupported);
        }
        if msg.len() < BODY_LEN {
            return Err(WireError::BadLength);
        }
        let src = u128::from_be_bytes(h[8..24].try_into().map_err(|_| WireError::Truncated)?);
        let dst = u128::from_be_bytes(h[24..40].try_into().map_err(|_| WireError::Truncated)?);
        if h[7] != 255 || msg[1] != 0 {
            return Err(WireError::Unsupported);
        }
        if icmp_sum(src, dst, msg) != 0 {
            return Err(WireError::BadChecksum);
        }
        let target = u128::from_be_bytes(msg[8..24].try_into().map_err(|_| WireError::Truncated)?);
        if is_multicast(target) {
            return Err(WireError::Unsupported);
        }
        let want = if kind == NS { OPT_SLLA } else { OPT_TLLA };
        let mut lladdr = None;
        let mut opts = &msg[BODY_LEN..];
        while !opts.is_empty() {
            let (t, l) = match opts {
                [t, l, ..] => (*t, *l as usize * 8),
                _ => return Err(WireError::BadLength),
            };
            if l == 0 || l > opts.len() {
                return Err(WireError::BadLength);
            }
            if t == want && l >= 8 && lladdr.is_none() {
                let mut m = [0u8; 6];
                m.copy_from_slice(&opts[2..8]);
                lladdr = Some(m);
            }
            opts = &opts[l..];
        }
        let flags = msg[4];
        let nd = Nd {
            kind,
            src,
            dst,
            target,
            lladdr,
            solicited: kind == NA && flags & FLAG_S != 0,
            override_: kind == NA && flags & FLAG_O != 0,
        };
        if kind == NS && src == 0 && (dst != solicited_node(target) || lladdr.is_some()) {
            return Err(WireError::Unsupported);
        }
        if kind == NA && is_multicast(dst) && nd.solicited {
            return Err(WireError::Unsupported);
        }
        Ok(nd)
    }
}

/// Write an untagged NS/NA frame with one link-layer address option into `out`.
#[allow(clippy::too_many_arguments)]
fn build(
    out: &mut [u8],
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: u128,
    dst: u128,
    kind: u8,
    flags: u8,
    target: u128,
) -> Result<usize, WireError> {
    let f = out.get_mut(..FRAME_LEN).ok_or(WireError::NoRoom)?;
    let mut n = ethernet::write_header(f, MacAddr(dst_mac), MacAddr(src_mac), ETHERTYPE_IPV6)?;
    n += ipv6::write_header(
        &mut f[n..],
        &Ipv6Repr {
            src: Ipv6Addr::from(src),
            dst: Ipv6Addr::from(dst),
            next_header: NEXT_HEADER_ICMPV6,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
            hop_limit: 255,
            payload_len: MSG_LEN as u16,
        },
    )?;
    let m = &mut f[n..];
    m[0] = kind;
    m[1] = 0;
    m[2..4].fill(0);
    m[4] = flags;
    m[5..8].fill(0);
    m[8..24].copy_from_slice(&target.to_be_bytes());
    m[24] = if kind == NS { OPT_SLLA } else { OPT_TLLA };
    m[25] = 1;
    m[26..32].copy_from_slice(&src_mac);
    let c = icmp_sum(src, dst, m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    Ok(FRAME_LEN)
}

/// A multicast solicitation for `target` from `src_mac`/`src` (section 7.2.2): to the target's
/// solicited-node address, with the source link-layer address option.
pub fn build_solicitation(
    out: &mut [u8],
    src_mac: [u8; 6],
    src: u128,
    target: u128,
) -> Result<usize, WireError> {
    let dst = solicited_node(target);
    build(out, multicast_mac(dst), src_mac, src, dst, NS, 0, target)
}

/// A unicast solicitation (a probe of a cached neighbour, section 7.3.3) to `dst_mac`/`target`.
pub fn build_probe(
    out: &mut [u8],
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    src: u128,
    target: u128,
) -> Result<usize, WireError> {
    build(out, dst_mac, src_mac, src, target, NS, 0, target)
}

/// The advertisement answering solicitation `ns` for our address `ns.target` (section 7.2.4),
/// from `our_mac`, to `requester_mac`: Router and Override set; Solicited set and sent to the
/// solicitor, unless the solicitation came from the unspecified address (duplicate address
/// detection), then to all-nodes (ff02::1) with Solicited clear.
pub fn build_advertisement(
    out: &mut [u8],
    ns: &Nd,
    requester_mac: [u8; 6],
    our_mac: [u8; 6],
) -> Result<usize, WireError> {
    const ALL_NODES: u128 = 0xff02_0000_0000_0000_0000_0000_0000_0001;
    let (dst, dst_mac, flags) = if ns.src == 0 {
        (ALL_NODES, multicast_mac(ALL_NODES), FLAG_R | FLAG_O)
    } else {
        (
            ns.src,
            ns.lladdr.unwrap_or(requester_mac),
            FLAG_R | FLAG_S | FLAG_O,
        )
    };
    build(out, dst_mac, our_mac, ns.target, dst, NA, flags, ns.target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testutil::hex;

    const HOST: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0002;
    const ME: u128 = 0x2001_0db8_0000_0000_0000_0000_0000_0001;

    // scapy: Ether(dst="33:33:ff:00:00:01", src="02:00:00:00:10:01")/IPv6(src="2001:db8::2",
    //   dst="ff02::1:ff00:1", hlim=255)/ICMPv6ND_NS(tgt="2001:db8::1")/
    //   ICMPv6NDOptSrcLLAddr(lladdr="02:00:00:00:10:01"), src MAC 02:00:00:00:10:01.
    const NS_HEX: &str = "3333ff00000102000000100186dd6000000000203aff20010db8000000000000000000000002ff0200000000000000000001ff00000187000c280000000020010db80000000000000000000000010101020000001001";

    fn ns_frame() -> Vec<u8> {
        hex(NS_HEX)
    }

    #[test]
    fn parses_a_scapy_solicitation() {
        let f = ns_frame();
        let nd = Nd::parse(&f[14..]).unwrap();
        assert_eq!(nd.kind, NS);
        assert_eq!((nd.src, nd.dst, nd.target), (HOST, solicited_node(ME), ME));
        assert_eq!(nd.lladdr, Some([2, 0, 0, 0, 0x10, 1]));
    }

    #[test]
    fn our_solicitation_verifies_and_parses_back() {
        let mut b = [0u8; 128];
        let n = build_solicitation(&mut b, [2, 0, 0, 0, 0x10, 1], HOST, ME).unwrap();
        assert_eq!(&b[..n], &ns_frame()[..]);
    }

    #[test]
    fn advertisement_answers_the_solicitor() {
        let ns = Nd::parse(&ns_frame()[14..]).unwrap();
        let mut b = [0u8; 128];
        let me = [2, 0, 0, 0, 0, 1];
        let n = build_advertisement(&mut b, &ns, [9; 6], me).unwrap();
        assert_eq!(&b[0..6], &[2, 0, 0, 0, 0x10, 1]);
        let na = Nd::parse(&b[14..n]).unwrap();
        assert_eq!((na.kind, na.src, na.dst, na.target), (NA, ME, HOST, ME));
        assert!(na.solicited && na.override_);
        assert_eq!(na.lladdr, Some(me));
        assert_eq!(b[14 + 40 + 4] & FLAG_R, FLAG_R);
    }

    #[test]
    fn validation_refuses_what_section_7_1_refuses() {
        let good = ns_frame();
        let mut hop = good.clone();
        hop[14 + 7] = 64;
        assert_eq!(Nd::parse(&hop[14..]), Err(WireError::Unsupported));
        let mut sum = good.clone();
        sum[14 + 40 + 2] ^= 1;
        assert_eq!(Nd::parse(&sum[14..]), Err(WireError::BadChecksum));
        assert_eq!(Nd::parse(&good[14..14 + 60]), Err(WireError::BadLength));
        assert_eq!(Nd::parse(&good[14..40]), Err(WireError::Truncated));
        // A zero-length option.
        let mut opt = good.clone();
        opt[14 + 40 + 25] = 0;
        let c = u16::from_be_bytes([opt[14 + 42], opt[14 + 43]]);
        // Keep the checksum right so the option check is what refuses it.
        let c = checksum::update(c, 0x0101, 0x0100);
        opt[14 + 42..14 + 44].copy_from_slice(&c.to_be_bytes());
        assert_eq!(Nd::parse(&opt[14..]), Err(WireError::BadLength));
    }
}
