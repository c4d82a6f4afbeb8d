//! The recirculation port: a loop with its own rate and delay that sends a packet back to ingress.
//!
//! THEMIS's TRP throttles a flow by recirculating its data packets `loop_num` times; each trip costs
//! the packet the loop's serialization time plus its delay, and the loop is shared, so packets queue
//! behind each other exactly as on a recirculation port of the configured rate.
//!
//! Model: the loop is a link of `rate_bps`. A packet pushed at `now` starts serializing at
//! `max(now, busy_until)`, finishes `serialization_ns(len, rate_bps)` later, and is back at ingress
//! `loop_delay_ns` after that. Return times are therefore non-decreasing in push order, so the
//! buffer is a FIFO. The ring is allocated in [`RecircPort::new`] and never grows.

use std::collections::VecDeque;

use crate::packet::PacketBuf;
use crate::time::{Nanos, SerializationMemo};

/// Configuration of a [`RecircPort`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecircConfig {
    /// Rate of the loop in bits per second; 0 means infinitely fast (no serialization time).
    pub rate_bps: u64,
    /// Time from the end of serialization to the packet being back at ingress.
    pub loop_delay_ns: Nanos,
    /// Most packets in the loop at once (0: every push is refused).
    pub capacity_pkts: usize,
    /// Most frame bytes in the loop at once.
    pub capacity_bytes: u64,
}

/// Counters of a [`RecircPort`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecircStats {
    /// Packets accepted by `push`.
    pub pushed: u64,
    /// Packets handed back by `pop_ready`.
    pub returned: u64,
    /// Packets refused by `push` because the packet or byte capacity would be exceeded.
    pub full_drops: u64,
    /// Largest number of packets in the loop at once.
    pub max_depth: usize,
    /// Largest number of bytes in the loop at once.
    pub max_bytes: u64,
}

/// The recirculation port: a bounded FIFO of `(return_time, packet)`.
#[derive(Debug)]
pub struct RecircPort<B: PacketBuf> {
    cfg: RecircConfig,
    ring: VecDeque<(Nanos, B)>,
    bytes: u64,
    busy_until: Nanos,
    /// The last push's serialization time: a throttled flow's packets go round the loop again
    /// and again at one length.
    ser_memo: SerializationMemo,
    stats: RecircStats,
}

impl<B: PacketBuf> RecircPort<B> {
    /// A port with its ring of `capacity_pkts` entries allocated now.
    pub fn new(cfg: RecircConfig) -> Self {
        RecircPort {
            cfg,
            ring: VecDeque::with_capacity(cfg.capacity_pkts),
            bytes: 0,
            busy_until: 0,
            ser_memo: SerializationMemo::default(),
            stats: RecircStats::default(),
        }
    }

    /// The configuration.
    #[inline]
    pub fn config(&self) -> &RecircConfig {
        &self.cfg
    }

    /// Send `pkt` round the loop at `now`. Returns the time it will be back at ingress.
    ///
    /// When the loop already holds `capacity_pkts` packets, or `pkt` would take it past
    /// `capacity_bytes`, the packet is given back in `Err` and counted in `full_drops`: the caller
    /// frees it (and counts `DropReason::RecircFull`). A refused packet does not occupy the loop.
    pub fn push(&mut self, pkt: B, now: Nanos) -> Result<Nanos, B> {
        let len = pkt.len() as u64;
        if self.ring.len() >= self.cfg.capacity_pkts
            || self.bytes.saturating_add(len) > self.cfg.capacity_bytes
        {
            self.stats.full_drops += 1;
            return Err(pkt);
        }
        let start = now.max(self.busy_until);
        let done = start.saturating_add(self.ser_memo.ns(len, 0, self.cfg.rate_bps));
        self.busy_until = done;
        let back = done.saturating_add(self.cfg.loop_delay_ns);
        self.ring.push_back((back, pkt));
        self.bytes += len;
        self.stats.pushed += 1;
        self.stats.max_depth = self.stats.max_depth.max(self.ring.len());
        self.stats.max_bytes = self.stats.max_bytes.max(self.bytes);
        Ok(back)
    }

    /// The oldest packet whose return time is `<= now`, with `meta().loop_count` incremented
    /// (saturating at 255); `None` when none is back yet. Call repeatedly to drain all that are due.
    pub fn pop_ready(&mut self, now: Nanos) -> Option<B> {
        match self.ring.front() {
            Some((t, _)) if *t <= now => {}
            _ => return None,
        }
        let (_, mut pkt) = self.ring.pop_front()?;
        // The loop is a FIFO: the next packet back is the next one here, and the one after it
        // follows. Its headers are asked for now (its descriptor was, one pop ago) and the
        // descriptor of the one after: a packet's buffer is cold after a trip round the loop
        // (unprefetched, the pop's length read and the ingress's first read of the frame are
        // the emulator's largest stalls on THEMIS).
        if let Some((_, next)) = self.ring.front() {
            next.prefetch_headers();
        }
        if let Some((_, after)) = self.ring.get(1) {
            after.prefetch_descriptor();
        }
        self.bytes = self.bytes.saturating_sub(pkt.len() as u64);
        let m = pkt.meta_mut();
        m.loop_count = m.loop_count.saturating_add(1);
        self.stats.returned += 1;
        Some(pkt)
    }

    /// When the next packet is back at ingress (`None`: the loop is empty). For the virtual-time
    /// driver.
    #[inline]
    pub fn next_ready(&self) -> Option<Nanos> {
        self.ring.front().map(|(t, _)| *t)
    }

    /// Time the loop's transmitter is busy until.
    #[inline]
    pub fn busy_until(&self) -> Nanos {
        self.busy_until
    }

    /// Packets in the loop.
    #[inline]
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// `true` when the loop holds no packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Frame bytes in the loop.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Take every packet out of the loop regardless of its return time (shutdown, reconfiguration),
    /// handing each to `f` in FIFO order without touching `loop_count`. Not counted as returned.
    pub fn drain(&mut self, mut f: impl FnMut(B)) {
        while let Some((_, pkt)) = self.ring.pop_front() {
            f(pkt);
        }
        self.bytes = 0;
    }

    /// Counters.
    #[inline]
    pub fn stats(&self) -> RecircStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapBuf;
    use proptest::prelude::*;

    fn cfg(cap: usize, bytes: u64) -> RecircConfig {
        // 8 Gb/s: 1 byte per ns.
        RecircConfig {
            rate_bps: 8_000_000_000,
            loop_delay_ns: 100,
            capacity_pkts: cap,
            capacity_bytes: bytes,
        }
    }

    fn pkt(len: usize, tag: u8) -> HeapBuf {
        HeapBuf::from_bytes(&vec![tag; len])
    }

    #[test]
    fn serialization_queueing_and_delay() {
        let mut r = RecircPort::new(cfg(8, 100_000));
        assert_eq!(r.push(pkt(1000, 1), 0).unwrap(), 1100);
        // Pushed while the first is still serializing: starts at 1000.
        assert_eq!(r.push(pkt(500, 2), 10).unwrap(), 1600);
        // Pushed after the loop went idle: starts at now.
        assert_eq!(r.push(pkt(100, 3), 5000).unwrap(), 5200);
        assert_eq!(r.len(), 3);
        assert_eq!(r.bytes(), 1600);
        assert_eq!(r.next_ready(), Some(1100));
        assert!(r.pop_ready(1099).is_none());
        let a = r.pop_ready(1100).unwrap();
        assert_eq!((a.data()[0], a.meta().loop_count), (1, 1));
        assert!(r.pop_ready(1599).is_none());
        let b = r.pop_ready(10_000).unwrap();
        assert_eq!(b.data()[0], 2);
        let c = r.pop_ready(10_000).unwrap();
        assert_eq!(c.data()[0], 3);
        assert!(r.pop_ready(u64::MAX).is_none());
        assert_eq!(r.next_ready(), None);
        assert_eq!(r.bytes(), 0);
        let s = r.stats();
        assert_eq!(
            (s.pushed, s.returned, s.full_drops, s.max_depth),
            (3, 3, 0, 3)
        );
        assert_eq!(s.max_bytes, 1600);
    }

    #[test]
    fn loop_count_increments_and_saturates() {
        let mut r = RecircPort::new(cfg(1, 10_000));
        let mut p = pkt(64, 0);
        p.meta_mut().loop_count = 254;
        r.push(p, 0).unwrap();
        let p = r.pop_ready(u64::MAX).unwrap();
        assert_eq!(p.meta().loop_count, 255);
        r.push(p, 0).unwrap();
        let p = r.pop_ready(u64::MAX).unwrap();
        assert_eq!(p.meta().loop_count, 255);
    }

    #[test]
    fn full_by_packets_and_bytes_gives_packet_back() {
        let mut r = RecircPort::new(cfg(2, 1000));
        let cap = r.ring.capacity();
        r.push(pkt(400, 1), 0).unwrap();
        let back = r.push(pkt(700, 2), 0).unwrap_err();
        assert_eq!(back.data()[0], 2);
        assert_eq!(r.stats().full_drops, 1);
        r.push(pkt(600, 3), 0).unwrap();
        assert_eq!(r.bytes(), 1000);
        assert!(r.push(pkt(1, 4), 0).is_err());
        assert_eq!(r.stats().full_drops, 2);
        // The refused packets did not occupy the loop: the second accepted one finished at 1000.
        assert_eq!(r.busy_until(), 1000);
        assert_eq!(r.ring.capacity(), cap);

        let mut zero = RecircPort::new(cfg(0, 1000));
        assert!(zero.push(pkt(64, 0), 0).is_err());
        assert_eq!(zero.stats().full_drops, 1);

        let mut drained = Vec::new();
        r.drain(|p| drained.push(p.data()[0]));
        assert_eq!(drained, vec![1, 3]);
        assert!(r.is_empty());
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn zero_rate_and_saturating_time() {
        let mut r = RecircPort::new(RecircConfig {
            rate_bps: 0,
            loop_delay_ns: Nanos::MAX,
            capacity_pkts: 4,
            capacity_bytes: u64::MAX,
        });
        assert_eq!(r.push(pkt(1500, 0), 10).unwrap(), Nanos::MAX);
        assert_eq!(r.busy_until(), 10);
        assert!(r.pop_ready(Nanos::MAX).is_some());
    }

    proptest! {
        /// Every accepted packet is back at max(push time, end of the previous one's
        /// serialization) + its own serialization at the loop's rate + the loop's delay, however
        /// the lengths alternate (an independent model of the loop; the push's memo of the last
        /// length's serialization time must not leak into another length's).
        #[test]
        fn return_times_follow_the_model(ops in proptest::collection::vec((0u64..3000, prop::sample::select(vec![64usize, 1000, 1001, 1500])), 1..100)) {
            // 3 Gb/s: 8 bits per byte over 3 bits per ns, not a whole number of ns per byte.
            let mut r: RecircPort<HeapBuf> = RecircPort::new(RecircConfig {
                rate_bps: 3_000_000_000,
                loop_delay_ns: 250,
                capacity_pkts: 1000,
                capacity_bytes: u64::MAX,
            });
            let (mut now, mut busy) = (0u64, 0u64);
            for (dt, len) in ops {
                now += dt;
                let done = now.max(busy) + (len as u64 * 8).div_ceil(3);
                busy = done;
                prop_assert_eq!(r.push(pkt(len, 0), now).unwrap(), done + 250);
            }
        }

        /// FIFO order, return times non-decreasing and >= push time + delay, bounded depth, and
        /// the ring never reallocates.
        #[test]
        fn fifo_bounded_no_growth(ops in proptest::collection::vec((0u64..2000, 1usize..1500, any::<bool>()), 1..200)) {
            let mut r: RecircPort<HeapBuf> = RecircPort::new(cfg(5, 4000));
            let cap = r.ring.capacity();
            let mut now = 0;
            let mut next_tag = 0u8;
            let mut expect = std::collections::VecDeque::new();
            for (dt, len, pop) in ops {
                now += dt;
                if pop {
                    while let Some(p) = r.pop_ready(now) {
                        let (tag, back) = expect.pop_front().unwrap();
                        prop_assert_eq!(p.data()[0], tag);
                        prop_assert!(back <= now);
                    }
                    if let Some(t) = r.next_ready() {
                        prop_assert!(t > now);
                    }
                } else {
                    match r.push(pkt(len, next_tag), now) {
                        Ok(back) => {
                            prop_assert!(back >= now + 100);
                            if let Some((_, last)) = expect.back() {
                                prop_assert!(back >= *last);
                            }
                            expect.push_back((next_tag, back));
                        }
                        Err(p) => prop_assert_eq!(p.data()[0], next_tag),
                    }
                    next_tag = next_tag.wrapping_add(1);
                }
                prop_assert!(r.len() <= 5);
                prop_assert!(r.bytes() <= 4000);
                prop_assert_eq!(r.len(), expect.len());
                prop_assert_eq!(r.ring.capacity(), cap);
            }
        }
    }
}
