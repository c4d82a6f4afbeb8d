//! A bounded packet FIFO: the storage of every egress queue, control queue and per-flow queue.
//!
//! The ring is allocated once at construction with room for `max_pkts` packets and never grows:
//! [`PktQueue::push`] refuses (and counts) a packet that would exceed either the packet limit or the
//! byte limit, and hands it back so the caller can count the drop by reason and free the buffer.

use super::ring::Ring;
use crate::packet::PacketBuf;

/// Counters of one [`PktQueue`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets accepted by [`PktQueue::push`].
    pub enq_pkts: u64,
    /// Bytes accepted by [`PktQueue::push`].
    pub enq_bytes: u64,
    /// Packets removed by [`PktQueue::pop`].
    pub deq_pkts: u64,
    /// Bytes removed by [`PktQueue::pop`].
    pub deq_bytes: u64,
    /// Packets refused because the queue was full (packets or bytes).
    pub drops: u64,
    /// Bytes refused because the queue was full.
    pub drop_bytes: u64,
    /// Highest occupancy in bytes ever reached (after an accepted push).
    pub max_bytes: u64,
    /// Highest occupancy in packets ever reached.
    pub max_pkts: u64,
}

/// A bounded FIFO of packets with a packet limit and a byte limit.
///
/// Invariants: `len() <= max_pkts()`, `bytes() <= max_bytes()`, `bytes()` is the sum of the frame
/// lengths of the queued packets. No method allocates after [`PktQueue::new`].
#[derive(Debug)]
pub struct PktQueue<B: PacketBuf> {
    ring: Ring<B>,
    max_pkts: usize,
    max_bytes: u64,
    bytes: u64,
    stats: QueueStats,
}

impl<B: PacketBuf> PktQueue<B> {
    /// A queue holding at most `max_pkts` packets and at most `max_bytes` bytes (frame lengths as
    /// stored). The ring for `max_pkts` packets is allocated here. `max_pkts == 0` or
    /// `max_bytes == 0` gives a queue that refuses everything.
    pub fn new(max_pkts: usize, max_bytes: u64) -> Self {
        PktQueue {
            ring: Ring::with_capacity(max_pkts),
            max_pkts,
            max_bytes,
            bytes: 0,
            stats: QueueStats::default(),
        }
    }

    /// Would a frame of `len` bytes be accepted right now?
    #[inline]
    pub fn fits(&self, len: usize) -> bool {
        self.ring.len() < self.max_pkts && self.bytes.saturating_add(len as u64) <= self.max_bytes
    }

    /// Append `pkt` at the tail.
    ///
    /// Full path: if the queue already holds `max_pkts` packets, or `bytes() + pkt.len()` would
    /// exceed `max_bytes`, the packet is not queued, `drops`/`drop_bytes` are incremented, and the
    /// packet is returned as `Err(pkt)` for the caller to free (and count by reason). A frame longer
    /// than `max_bytes` is therefore always refused.
    #[inline]
    pub fn push(&mut self, pkt: B) -> Result<(), B> {
        let len = pkt.len() as u64;
        if !self.fits(pkt.len()) {
            self.stats.drops += 1;
            self.stats.drop_bytes += len;
            return Err(pkt);
        }
        if let Err(pkt) = self.ring.push_back(pkt) {
            // Unreachable: `fits` checked the packet limit, which is the ring's capacity.
            self.stats.drops += 1;
            self.stats.drop_bytes += len;
            return Err(pkt);
        }
        self.bytes += len;
        self.stats.enq_pkts += 1;
        self.stats.enq_bytes += len;
        self.stats.max_bytes = self.stats.max_bytes.max(self.bytes);
        self.stats.max_pkts = self.stats.max_pkts.max(self.ring.len() as u64);
        Ok(())
    }

    /// Remove and return the head packet; `None` when empty.
    #[inline]
    pub fn pop(&mut self) -> Option<B> {
        let pkt = self.ring.pop_front()?;
        let len = pkt.len() as u64;
        self.bytes = self.bytes.saturating_sub(len);
        self.stats.deq_pkts += 1;
        self.stats.deq_bytes += len;
        Some(pkt)
    }

    /// The head packet, if any.
    #[inline]
    pub fn head(&self) -> Option<&B> {
        self.ring.front()
    }

    /// The head packet, writable (e.g. to stamp metadata just before departure).
    #[inline]
    pub fn head_mut(&mut self) -> Option<&mut B> {
        self.ring.front_mut()
    }

    /// Frame length of the head packet (saturated at `u32::MAX`); `None` when empty.
    #[inline]
    pub fn head_len(&self) -> Option<u32> {
        self.ring
            .front()
            .map(|p| u32::try_from(p.len()).unwrap_or(u32::MAX))
    }

    /// Packets queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// No packet queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Bytes queued (sum of frame lengths).
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The packet limit (also the preallocated ring size).
    #[inline]
    pub fn max_pkts(&self) -> usize {
        self.max_pkts
    }

    /// The byte limit.
    #[inline]
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Change the byte limit at run time. Packets already queued are kept even if they exceed the
    /// new limit; only later pushes see it.
    #[inline]
    pub fn set_max_bytes(&mut self, max_bytes: u64) {
        self.max_bytes = max_bytes;
    }

    /// Counters.
    #[inline]
    pub fn stats(&self) -> &QueueStats {
        &self.stats
    }

    /// Ring capacity actually allocated (>= `max_pkts`); never changes (tests check it).
    #[inline]
    pub fn allocated(&self) -> usize {
        self.ring.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapBuf;

    fn pkt(len: usize, tag: u8) -> HeapBuf {
        HeapBuf::from_bytes(&vec![tag; len])
    }

    #[test]
    fn fifo_order_and_counters() {
        let mut q: PktQueue<HeapBuf> = PktQueue::new(4, 10_000);
        let cap = q.allocated();
        assert!(q.is_empty());
        assert_eq!(q.head_len(), None);
        for i in 0..3 {
            q.push(pkt(100 + i, i as u8)).unwrap();
        }
        assert_eq!(q.len(), 3);
        assert_eq!(q.bytes(), 303);
        assert_eq!(q.head_len(), Some(100));
        for i in 0..3 {
            let p = q.pop().unwrap();
            assert_eq!(p.data()[0], i as u8);
        }
        assert!(q.pop().is_none());
        assert_eq!(q.bytes(), 0);
        let s = q.stats();
        assert_eq!(
            (s.enq_pkts, s.deq_pkts, s.enq_bytes, s.deq_bytes),
            (3, 3, 303, 303)
        );
        assert_eq!(s.max_bytes, 303);
        assert_eq!(s.max_pkts, 3);
        assert_eq!(q.allocated(), cap);
    }

    #[test]
    fn packet_limit_overflow() {
        let mut q: PktQueue<HeapBuf> = PktQueue::new(2, 1 << 20);
        let cap = q.allocated();
        q.push(pkt(64, 1)).unwrap();
        q.push(pkt(64, 2)).unwrap();
        let back = q.push(pkt(64, 3)).unwrap_err();
        assert_eq!(back.data()[0], 3);
        assert_eq!(q.len(), 2);
        assert_eq!(q.stats().drops, 1);
        assert_eq!(q.stats().drop_bytes, 64);
        assert_eq!(q.allocated(), cap, "ring never grows");
    }

    #[test]
    fn byte_limit_overflow_and_oversize() {
        let mut q: PktQueue<HeapBuf> = PktQueue::new(100, 200);
        q.push(pkt(150, 1)).unwrap();
        assert!(q.push(pkt(51, 2)).is_err());
        q.push(pkt(50, 3)).unwrap(); // exactly at the limit
        assert_eq!(q.bytes(), 200);
        let mut e: PktQueue<HeapBuf> = PktQueue::new(100, 100);
        assert!(e.push(pkt(101, 0)).is_err());
        let mut z: PktQueue<HeapBuf> = PktQueue::new(0, 100);
        assert!(z.push(pkt(1, 0)).is_err());
        assert_eq!(z.stats().drops, 1);
    }

    #[test]
    fn lowering_limit_keeps_queued() {
        let mut q: PktQueue<HeapBuf> = PktQueue::new(10, 1000);
        q.push(pkt(500, 1)).unwrap();
        q.set_max_bytes(100);
        assert_eq!(q.len(), 1);
        assert!(q.push(pkt(10, 2)).is_err());
        q.pop().unwrap();
        q.push(pkt(100, 3)).unwrap();
    }
}
