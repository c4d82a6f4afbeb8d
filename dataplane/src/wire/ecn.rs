//! ECN codepoints in the IP header (RFC 3168): the low two bits of the IPv4 ToS / IPv6 traffic
//! class. Changing them keeps the RoCEv2 ICRC valid (those bits are masked), but the IPv4 header
//! checksum must be updated (incrementally, RFC 1624).

pub const NOT_ECT: u8 = 0b00;
pub const ECT1: u8 = 0b01;
pub const ECT0: u8 = 0b10;
pub const CE: u8 = 0b11;

/// Result of an attempt to mark a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnMark {
    /// CE is now set (it was ECT(0) or ECT(1)).
    Marked,
    /// It was already CE.
    AlreadyCe,
    /// Not-ECT: the sender is not ECN-capable, so it must not be marked (RED drops or keeps it).
    NotEct,
    /// No IP header at `l3_off` (or too short).
    NotIp,
}

/// Read the ECN codepoint of the IP header at `l3_off` (IPv4 or IPv6, by version nibble).
#[inline]
pub fn get(frame: &[u8], l3_off: usize) -> Option<u8> {
    let b0 = *frame.get(l3_off)?;
    match b0 >> 4 {
        4 => Some(frame.get(l3_off + 1)? & 0b11),
        6 => Some((frame.get(l3_off + 1)? >> 4) & 0b11),
        _ => None,
    }
}

/// Set the ECN codepoint to `ecn` (two bits), updating the IPv4 checksum incrementally.
/// Returns `false` when there is no IPv4/IPv6 header at `l3_off`.
pub fn set(frame: &mut [u8], l3_off: usize, ecn: u8) -> bool {
    let ecn = ecn & 0b11;
    let Some(&b0) = frame.get(l3_off) else {
        return false;
    };
    match b0 >> 4 {
        4 => {
            if frame.len() < l3_off + 20 {
                return false;
            }
            let old_word = u16::from_be_bytes([frame[l3_off], frame[l3_off + 1]]);
            // Computed, not read back after the byte store (store forwarding).
            let new_word = (old_word & !0b11) | ecn as u16;
            frame[l3_off + 1] = new_word as u8;
            let old_ck = u16::from_be_bytes([frame[l3_off + 10], frame[l3_off + 11]]);
            let ck = checksum_update(old_ck, old_word, new_word);
            frame[l3_off + 10..l3_off + 12].copy_from_slice(&ck.to_be_bytes());
            true
        }
        6 => {
            if frame.len() < l3_off + 40 {
                return false;
            }
            // Traffic class spans the low nibble of byte 0 and the high nibble of byte 1; ECN is
            // bits 5..4 of byte 1.
            frame[l3_off + 1] = (frame[l3_off + 1] & !0b0011_0000) | (ecn << 4);
            true
        }
        _ => false,
    }
}

/// Mark CE if the packet is ECN-capable.
pub fn mark_ce(frame: &mut [u8], l3_off: usize) -> EcnMark {
    match get(frame, l3_off) {
        None => EcnMark::NotIp,
        Some(NOT_ECT) => EcnMark::NotEct,
        Some(CE) => EcnMark::AlreadyCe,
        Some(_) => {
            set(frame, l3_off, CE);
            EcnMark::Marked
        }
    }
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), for one 16-bit word changing from `old` to `new`.
#[inline]
pub fn checksum_update(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = (!hc as u32) + (!old as u32) + new as u32;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ipv4_checksum(h: &[u8]) -> u16 {
        let mut s = 0u32;
        for c in h.chunks(2) {
            s += u16::from_be_bytes([c[0], c[1]]) as u32;
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn ipv4_mark_keeps_checksum_valid() {
        // 20-byte IPv4 header, ToS 0x02 (ECT(0)), valid checksum.
        let mut h = [
            0x45, 0x02, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0, 0, 10, 0, 17, 1, 10, 0,
            18, 1,
        ];
        let ck = ipv4_checksum(&h);
        h[10..12].copy_from_slice(&ck.to_be_bytes());
        assert_eq!(mark_ce(&mut h, 0), EcnMark::Marked);
        assert_eq!(h[1], 0x03);
        assert_eq!(ipv4_checksum(&h), 0, "checksum must verify after marking");
        assert_eq!(mark_ce(&mut h, 0), EcnMark::AlreadyCe);
        assert!(set(&mut h, 0, ECT0));
        assert_eq!(ipv4_checksum(&h), 0);
        h[1] = 0;
        let ck = {
            h[10] = 0;
            h[11] = 0;
            ipv4_checksum(&h)
        };
        h[10..12].copy_from_slice(&ck.to_be_bytes());
        assert_eq!(mark_ce(&mut h, 0), EcnMark::NotEct);
        assert_eq!(mark_ce(&mut h[..10], 0), EcnMark::NotEct); // version nibble readable
        assert!(!set(&mut h[..10], 0, CE));
    }

    #[test]
    fn ipv6_mark() {
        let mut h = [0u8; 40];
        h[0] = 0x60;
        h[1] = 0x20; // traffic class low nibble 0x2 -> ECN ECT(0)
        assert_eq!(get(&h, 0), Some(ECT0));
        assert_eq!(mark_ce(&mut h, 0), EcnMark::Marked);
        assert_eq!(h[1], 0x30);
        assert_eq!(get(&h, 0), Some(CE));
        assert_eq!(mark_ce(&mut [0u8; 40], 0), EcnMark::NotIp);
    }
}
