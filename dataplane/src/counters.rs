//! Why packets were dropped or specially handled: every reason has a counter.
//!
//! Counters are plain `u64`s owned by one worker (no atomics per packet, DESIGN.md section 7); the
//! control plane reads snapshots.

/// Reasons a frame is dropped, or handled by the malformed-input policy. Each has a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than an Ethernet header, or a header the parser needed is cut off.
    Truncated = 0,
    /// A length field disagrees with the buffer (IPv4 total length, IPv6 payload, UDP length).
    BadLength,
    /// EtherType the pipeline does not handle.
    UnknownEtherType,
    /// More VLAN tags than the parser accepts.
    VlanStack,
    /// IPv4 header with options (IHL > 5).
    Ipv4Options,
    /// IPv4 fragment.
    Ipv4Fragment,
    /// IPv4 header checksum wrong.
    BadIpChecksum,
    /// IP version field wrong for the EtherType, or IHL < 5.
    BadIpHeader,
    /// TTL / hop limit would reach zero.
    TtlExpired,
    /// No route / no L2 entry.
    NoRoute,
    /// The egress queue (or shared buffer) was full.
    QueueFull,
    /// Lossless class exceeded its PFC headroom (a misconfiguration: should never happen).
    HeadroomOverflow,
    /// Buffer pool exhausted.
    PoolEmpty,
    /// The recirculation port's buffer was full.
    RecircFull,
    /// A stage decided to drop (e.g. a filtered NACK); the stage counts its own detail.
    Pipeline,
    /// A port the packet names does not exist: its egress port, or the ingress port of a
    /// packet back from the recirculation loop.
    BadPort,
    /// The frame is larger than the egress port's MTU.
    TooBig,
    /// Routed toward a next hop whose MAC is not known yet (being resolved by ARP / neighbour
    /// discovery, or not answering).
    NeighborUnresolved,
}

impl DropReason {
    pub const ALL: [DropReason; 18] = [
        DropReason::Truncated,
        DropReason::BadLength,
        DropReason::UnknownEtherType,
        DropReason::VlanStack,
        DropReason::Ipv4Options,
        DropReason::Ipv4Fragment,
        DropReason::BadIpChecksum,
        DropReason::BadIpHeader,
        DropReason::TtlExpired,
        DropReason::NoRoute,
        DropReason::QueueFull,
        DropReason::HeadroomOverflow,
        DropReason::PoolEmpty,
        DropReason::RecircFull,
        DropReason::Pipeline,
        DropReason::BadPort,
        DropReason::TooBig,
        DropReason::NeighborUnresolved,
    ];
    pub const COUNT: usize = Self::ALL.len();

    /// The name used in counters and metrics (snake_case).
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::BadLength => "bad_length",
            DropReason::UnknownEtherType => "unknown_ethertype",
            DropReason::VlanStack => "vlan_stack",
            DropReason::Ipv4Options => "ipv4_options",
            DropReason::Ipv4Fragment => "ipv4_fragment",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::BadIpHeader => "bad_ip_header",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::NoRoute => "no_route",
            DropReason::QueueFull => "queue_full",
            DropReason::HeadroomOverflow => "headroom_overflow",
            DropReason::PoolEmpty => "pool_empty",
            DropReason::RecircFull => "recirc_full",
            DropReason::Pipeline => "pipeline",
            DropReason::BadPort => "bad_port",
            DropReason::TooBig => "too_big",
            DropReason::NeighborUnresolved => "neighbor_unresolved",
        }
    }
}

/// One counter per [`DropReason`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropCounters {
    counts: [u64; DropReason::COUNT],
}

impl DropCounters {
    #[inline]
    pub fn inc(&mut self, r: DropReason) {
        self.counts[r as usize] += 1;
    }
    #[inline]
    pub fn get(&self, r: DropReason) -> u64 {
        self.counts[r as usize]
    }
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
    /// Non-zero counters, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|r| (r.name(), self.counts[*r as usize]))
            .filter(|(_, c)| *c != 0)
    }
    pub fn add(&mut self, other: &DropCounters) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_unique_and_counted() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        let mut c = DropCounters::default();
        c.inc(DropReason::NoRoute);
        c.inc(DropReason::NoRoute);
        assert_eq!(c.get(DropReason::NoRoute), 2);
        assert_eq!(c.total(), 2);
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![("no_route", 2)]);
    }
}
