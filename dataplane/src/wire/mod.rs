//! Wire headers: bounds-checked zero-copy views and builders (DESIGN.md section 5).
//!
//! Conventions (smoltcp style):
//! - A header view `Foo<T: AsRef<[u8]>>` wraps a byte buffer; `Foo::new_checked(buf)` checks the
//!   length (and the fields that other accessors rely on) first and returns [`WireError`] instead
//!   of ever panicking. Accessors never index out of bounds once the view exists.
//! - Setters exist when `T: AsMut<[u8]>`.
//! - Builders write into a caller-provided `&mut [u8]` and return the number of bytes written, or
//!   [`WireError::NoRoom`] when the buffer is too small. Nothing here allocates.
//! - Multi-byte fields are big-endian (network order) unless stated otherwise (the ICRC is stored
//!   least significant byte first).
pub mod arp;
pub mod checksum;
pub mod ecn;
pub mod ethernet;
pub mod icrc;
pub mod int;
pub mod ipv4;
pub mod ipv6;
pub mod mlcc;
pub mod ndp;
pub mod parse;
pub mod pfc;
pub mod reflex;
pub mod roce;
pub mod tcp;
pub mod udp;

use crate::counters::DropReason;

/// Why a header could not be read or written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WireError {
    /// The buffer is shorter than the header (or a header the caller needs is cut off).
    Truncated,
    /// A length field disagrees with the buffer or with itself (IPv4 total length, IPv6 payload
    /// length, UDP length, TCP data offset, INT length).
    BadLength,
    /// An EtherType that is not handled.
    UnknownEtherType,
    /// More VLAN tags than allowed.
    VlanStack,
    /// IP version does not match, or IPv4 IHL < 5.
    BadIpHeader,
    /// IPv4 options present where they are not supported.
    Ipv4Options,
    /// An IPv4 fragment where a whole datagram is needed.
    Ipv4Fragment,
    /// A checksum or CRC does not verify.
    BadChecksum,
    /// TTL / hop limit is too small to forward.
    TtlExpired,
    /// A field value this code does not handle (MAC-control opcode, INT type/version, IPv6 next
    /// header other than UDP for RoCEv2, ...).
    Unsupported,
    /// The output buffer (or headroom/tailroom) is too small.
    NoRoom,
}

impl WireError {
    /// The drop counter this error is accounted to.
    pub fn drop_reason(self) -> DropReason {
        match self {
            WireError::Truncated => DropReason::Truncated,
            WireError::BadLength => DropReason::BadLength,
            WireError::UnknownEtherType => DropReason::UnknownEtherType,
            WireError::VlanStack => DropReason::VlanStack,
            WireError::BadIpHeader => DropReason::BadIpHeader,
            WireError::Ipv4Options => DropReason::Ipv4Options,
            WireError::Ipv4Fragment => DropReason::Ipv4Fragment,
            WireError::BadChecksum => DropReason::BadIpChecksum,
            WireError::TtlExpired => DropReason::TtlExpired,
            WireError::Unsupported => DropReason::Pipeline,
            WireError::NoRoom => DropReason::TooBig,
        }
    }
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            WireError::Truncated => "truncated header",
            WireError::BadLength => "length field inconsistent",
            WireError::UnknownEtherType => "unknown EtherType",
            WireError::VlanStack => "too many VLAN tags",
            WireError::BadIpHeader => "bad IP version or IHL",
            WireError::Ipv4Options => "IPv4 options not supported",
            WireError::Ipv4Fragment => "IPv4 fragment",
            WireError::BadChecksum => "bad checksum",
            WireError::TtlExpired => "TTL expired",
            WireError::Unsupported => "unsupported field value",
            WireError::NoRoom => "buffer too small",
        };
        f.write_str(s)
    }
}

impl std::error::Error for WireError {}

/// Read a big-endian u16 at `off`, `None` if out of bounds.
#[inline]
pub fn be16(b: &[u8], off: usize) -> Option<u16> {
    let s = b.get(off..off.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

/// Read a big-endian u32 at `off`, `None` if out of bounds.
#[inline]
pub fn be32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// Write a big-endian u16 at `off`; `false` if out of bounds.
#[inline]
pub(crate) fn put16(b: &mut [u8], off: usize, v: u16) -> bool {
    match off.checked_add(2).and_then(|end| b.get_mut(off..end)) {
        Some(s) => {
            s.copy_from_slice(&v.to_be_bytes());
            true
        }
        None => false,
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    /// Decode a hex string (whitespace ignored) for test vectors.
    pub fn hex(s: &str) -> Vec<u8> {
        let s: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
        assert_eq!(s.len() & 1, 0, "odd hex length");
        s.chunks(2)
            .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_mapping() {
        assert_eq!(WireError::Truncated.drop_reason(), DropReason::Truncated);
        assert_eq!(
            WireError::BadChecksum.drop_reason(),
            DropReason::BadIpChecksum
        );
        assert_eq!(WireError::VlanStack.drop_reason(), DropReason::VlanStack);
        assert_eq!(be16(&[1, 2, 3], 1), Some(0x0203));
        assert_eq!(be16(&[1, 2, 3], 2), None);
        assert_eq!(be16(&[1, 2, 3], usize::MAX), None);
        assert_eq!(be32(&[1, 2, 3, 4], 0), Some(0x01020304));
        let mut b = [0u8; 3];
        assert!(!put16(&mut b, 2, 1));
        assert!(put16(&mut b, 1, 0xabcd));
        assert_eq!(b, [0, 0xab, 0xcd]);
    }
}
