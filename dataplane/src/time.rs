//! Time as every stage sees it: nanoseconds on the engine's clock.
//!
//! Live runs read the TSC; replay runs on virtual time taken from pcap timestamps. No stage reads
//! the wall clock itself (DESIGN.md section 3), so replay is deterministic.

/// Nanoseconds since the engine's epoch (for replay: the pcap's epoch).
pub type Nanos = u64;

pub const NS_PER_US: Nanos = 1_000;
pub const NS_PER_MS: Nanos = 1_000_000;
pub const NS_PER_SEC: Nanos = 1_000_000_000;

/// Time to serialize `bytes` on a link of `rate_bps`, in ns, rounded up.
///
/// `bytes` is what occupies the wire for the frame as stored (no preamble/IFG/FCS are added here;
/// the port adds its configured per-frame overhead before calling this).
#[inline]
pub fn serialization_ns(bytes: u64, rate_bps: u64) -> Nanos {
    if rate_bps == 0 {
        return 0;
    }
    // bytes * 8 * 1e9 / rate. Every frame fits u64 arithmetic (up to 2.3 GB); the u128 path
    // (a software division, __udivti3) is only for larger byte counts.
    const U64_MAX_BYTES: u64 = u64::MAX / (8 * NS_PER_SEC);
    if bytes <= U64_MAX_BYTES {
        return (bytes * 8 * NS_PER_SEC).div_ceil(rate_bps);
    }
    let num = bytes as u128 * 8 * NS_PER_SEC as u128;
    num.div_ceil(rate_bps as u128).min(Nanos::MAX as u128) as Nanos
}

/// The last frame length's [`serialization_ns`]: a port or loop sends runs of one length (a
/// flow's full-MTU data, a throttled flow's packets round the recirculation loop), and the memo
/// spares each of them the division. Keyed by the stored length; `clear` when the rate or the
/// per-frame overhead changes.
#[derive(Clone, Copy, Debug)]
pub struct SerializationMemo {
    len: u64,
    ns: Nanos,
}

impl Default for SerializationMemo {
    fn default() -> Self {
        SerializationMemo {
            len: u64::MAX,
            ns: 0,
        }
    }
}

impl SerializationMemo {
    /// `serialization_ns(len + overhead, rate_bps)`, from the memo when `len` is the last one
    /// asked (at the same rate and overhead since the last [`SerializationMemo::clear`]).
    #[inline(always)]
    pub fn ns(&mut self, len: u64, overhead: u64, rate_bps: u64) -> Nanos {
        if self.len != len {
            self.ns = serialization_ns(len + overhead, rate_bps);
            self.len = len;
        }
        self.ns
    }

    /// Forget the memo (the rate or the overhead changed).
    #[inline]
    pub fn clear(&mut self) {
        *self = SerializationMemo::default();
    }
}

/// The earlier of two optional times (`None`: neither is set).
#[inline(always)]
pub fn earlier(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Bytes a link of `rate_bps` carries in `ns` nanoseconds, rounded down.
#[inline]
pub fn bytes_in(ns: Nanos, rate_bps: u64) -> u64 {
    (ns as u128 * rate_bps as u128 / (8 * NS_PER_SEC as u128)) as u64
}

/// One 802.3x/802.1Qbb pause quantum is 512 bit times: its duration on a link of `rate_bps`, in
/// ns (fractional ns are kept by working in picoseconds where needed; see `quanta_to_ns`).
#[inline]
pub fn quanta_to_ns(quanta: u16, rate_bps: u64) -> Nanos {
    if rate_bps == 0 {
        return 0;
    }
    (quanta as u128 * 512 * NS_PER_SEC as u128).div_ceil(rate_bps as u128) as Nanos
}

/// The number of pause quanta that covers `ns` on a link of `rate_bps`, rounded up and saturated
/// at u16::MAX (a pause time never overflows its 16-bit field).
#[inline]
pub fn ns_to_quanta(ns: Nanos, rate_bps: u64) -> u16 {
    let q = (ns as u128 * rate_bps as u128).div_ceil(512 * NS_PER_SEC as u128);
    q.min(u16::MAX as u128) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialization_of_common_frames() {
        // 1500 B at 100 Gb/s = 120 ns; 64 B at 10 Gb/s = 51.2 ns -> 52.
        assert_eq!(serialization_ns(1500, 100_000_000_000), 120);
        assert_eq!(serialization_ns(64, 10_000_000_000), 52);
        assert_eq!(serialization_ns(64, 0), 0);
        assert_eq!(bytes_in(120, 100_000_000_000), 1500);
    }

    #[test]
    fn serialization_u64_path_matches_u128() {
        let wide = |b: u64, r: u64| (b as u128 * 8 * NS_PER_SEC as u128).div_ceil(r as u128);
        let limit = u64::MAX / (8 * NS_PER_SEC);
        for b in [
            0,
            1,
            64,
            1500,
            9216,
            65535,
            limit - 1,
            limit,
            limit + 1,
            u64::MAX,
        ] {
            for r in [
                1,
                7,
                1_000_000_000,
                100_000_000_000,
                400_000_000_000,
                u64::MAX,
            ] {
                assert_eq!(
                    serialization_ns(b, r) as u128,
                    wide(b, r).min(u64::MAX as u128)
                );
            }
        }
    }

    #[test]
    fn quanta_round_trip() {
        // 1 quantum at 100 Gb/s = 5.12 ns -> 6 (rounded up); 65535 quanta saturate.
        assert_eq!(quanta_to_ns(1, 100_000_000_000), 6);
        assert_eq!(quanta_to_ns(100, 100_000_000_000), 512);
        assert_eq!(ns_to_quanta(512, 100_000_000_000), 100);
        assert_eq!(ns_to_quanta(513, 100_000_000_000), 101);
        assert_eq!(ns_to_quanta(NS_PER_SEC, 400_000_000_000), u16::MAX);
    }
}
