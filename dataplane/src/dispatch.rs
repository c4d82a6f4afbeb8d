//! Several workers over one port (DESIGN.md section 3, "Flow affinity").
//!
//! With `W` workers each running its own switch, every frame of a flow — in both directions, and
//! the CNPs and NACKs that belong to it — must reach the same worker, because the state a
//! mechanism keeps for the flow (THEMIS TRP: data one way, CNPs the other; Themis-D: data and
//! NACKs) lives in that worker's tables. The key is the **unordered IP pair**: it is the same for
//! both directions, and unlike the 4-tuple it also covers a flow's feedback packets, which carry
//! other UDP source ports (a CNP's source port is the NIC's choice, not the data's).
//!
//! - A NIC with RSS spreads frames over `W` rx queues by the Toeplitz hash of the IP pair with
//!   the symmetric key (`longhaul_dpdk_sys::SYMMETRIC_RSS_KEY`, `RTE_ETH_RSS_IP`): worker `i`
//!   polls queue `i` ([`RxRole::Queue`]).
//! - A port with one rx queue (vdevs; NICs without RSS) is polled by one worker, its **owner**,
//!   which hands every frame to the worker [`shard_of`] names through a bounded ring
//!   ([`RxRole::Dispatch`] for the owner, [`RxRole::Ring`] for the others). A full ring drops the
//!   frame and counts it (`rx_errors`, as a NIC counts `imissed`); it never blocks.
//! - A port with `W` tx queues is sent on by every worker on its own queue ([`TxRole::Queue`]); a
//!   port with one tx queue is sent on by its owner only, and the other workers hand their frames
//!   to it through a bounded ring ([`TxRole::Ring`]), which the owner drains every iteration in
//!   [`Port::service`] ([`TxRole::Owner`]). A full ring drops and counts (`tx_errors`).
//! - MAC control frames (PFC, PAUSE) are not flows: the worker that receives one hands a copy to
//!   every other worker, so each worker's traffic manager honors the pause.
//!
//! - Frames cross between workers in **bursts** ([`BurstRing`]): a ring carries vectors of up to
//!   [`BURST`] frames, so the atomic operations of a hand-off (and the cache line each one
//!   bounces between cores) are paid once per burst, not once per frame. The vectors circulate:
//!   a consumer gives each emptied one back on the ring's `free` side, so nothing is allocated
//!   after start. A ring holds [`DISPATCH_RING`] / [`BURST`] bursts; a producer that finds no
//!   free vector drops the frame and counts it (the ring is full).
//!
//! Both shard keys are direction-independent, but they are different functions: one run's ports
//! must therefore all use hardware RSS or all use software dispatch (the DPDK platform refuses a
//! mix). Frames move between workers as buffers of a pool every worker can free into (DPDK's
//! mempool is thread-safe); heap pools are per worker, so several workers need DPDK.

use crate::packet::{BufPool, PacketBuf};
use crate::port::{Port, PortIoStats, BURST};
use crate::time::Nanos;
use crate::wire::be16;
use crate::wire::ethernet::{
    is_mac_control, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_QINQ, ETHERTYPE_VLAN,
};
use crossbeam_queue::ArrayQueue;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Frames a dispatch ring holds when its bursts are full (per worker and port, each way).
pub const DISPATCH_RING: usize = 4096;

/// Most frames the owner moves from the tx fan-in ring to its queue per [`Port::service`].
const FANIN_BURST: usize = 128;

/// The worker (0..`workers`) that owns the flow of `frame`: a hash of the unordered IPv4 or IPv6
/// address pair, after up to two VLAN tags. Frames without an IP header (ARP, LLDP) go to worker
/// 0. Reads only what it has checked is there; never panics.
#[inline]
pub fn shard_of(frame: &[u8], workers: usize) -> usize {
    if workers <= 1 {
        return 0;
    }
    let h = pair_hash(frame);
    // Multiply-shift: spreads the hash over [0, workers) without a division.
    ((u64::from(h) * workers as u64) >> 32) as usize
}

/// A direction-independent 32-bit hash of the IP pair of `frame` (0 without an IP header).
#[inline]
pub fn pair_hash(frame: &[u8]) -> u32 {
    let mut off = 12;
    let mut ethertype = be16(frame, off);
    for _ in 0..2 {
        if ethertype == Some(ETHERTYPE_VLAN) || ethertype == Some(ETHERTYPE_QINQ) {
            off += 4;
            ethertype = be16(frame, off);
        }
    }
    let l3 = off + 2;
    let (a, b) = match ethertype {
        Some(ETHERTYPE_IPV4) => match (frame.get(l3 + 12..l3 + 16), frame.get(l3 + 16..l3 + 20)) {
            (Some(s), Some(d)) => (fold(s), fold(d)),
            _ => return 0,
        },
        Some(ETHERTYPE_IPV6) => match (frame.get(l3 + 8..l3 + 24), frame.get(l3 + 24..l3 + 40)) {
            (Some(s), Some(d)) => (fold(s), fold(d)),
            _ => return 0,
        },
        _ => return 0,
    };
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    // A 64-bit mix of the ordered pair (splitmix64's finalizer), high half.
    let mut x = (u64::from(lo) << 32 | u64::from(hi)) ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^= x >> 31;
    (x >> 32) as u32
}

/// An address folded to 32 bits (IPv4 as is; IPv6 by xor of its four words).
#[inline]
fn fold(addr: &[u8]) -> u32 {
    addr.chunks_exact(4).fold(0u32, |acc, w| {
        acc ^ u32::from_be_bytes([w[0], w[1], w[2], w[3]])
    })
}

/// How a worker receives from a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxRole {
    /// It polls its own queue (hardware RSS, or the only worker).
    Queue,
    /// It polls the port's only queue and hands other workers' frames to them.
    Dispatch,
    /// It takes what the owner hands it.
    Ring,
}

/// How a worker sends on a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxRole {
    /// On its own queue.
    Queue,
    /// On the port's only queue, for itself and (in [`Port::service`]) for the other workers.
    Owner,
    /// Through the owner.
    Ring,
}

/// A ring of bursts (see the module's documentation): `full` carries bursts to the consumer,
/// `free` gives the emptied vectors back. Every vector is made at start, with room for
/// [`BURST`] frames; there are as many as `full` has slots, so a push onto `full` of a vector
/// taken from `free` always finds room.
pub struct BurstRing<B> {
    full: ArrayQueue<Vec<B>>,
    free: ArrayQueue<Vec<B>>,
}

impl<B> BurstRing<B> {
    /// A ring of `bursts` bursts (at least 1).
    pub fn new(bursts: usize) -> Self {
        let bursts = bursts.max(1);
        let free = ArrayQueue::new(bursts);
        for _ in 0..bursts {
            let _ = free.push(Vec::with_capacity(BURST));
        }
        BurstRing {
            full: ArrayQueue::new(bursts),
            free,
        }
    }

    /// An empty vector to fill (`None`: every burst is in flight, the ring is full).
    #[inline]
    fn take_free(&self) -> Option<Vec<B>> {
        self.free.pop()
    }

    /// Hand a filled vector to the consumer (an empty one goes straight back to `free`).
    #[inline]
    fn send(&self, v: Vec<B>) {
        let r = if v.is_empty() {
            self.free.push(v)
        } else {
            self.full.push(v)
        };
        // Unreachable: the vectors are exactly as many as the slots of either side.
        debug_assert!(
            r.is_ok(),
            "burst ring holds more vectors than it was made with"
        );
    }

    /// The next burst sent, if any.
    #[inline]
    fn recv(&self) -> Option<Vec<B>> {
        self.full.pop()
    }

    /// Give an emptied vector back.
    #[inline]
    fn give_back(&self, mut v: Vec<B>) {
        v.clear();
        let r = self.free.push(v);
        debug_assert!(
            r.is_ok(),
            "burst ring holds more vectors than it was made with"
        );
    }

    /// No burst waiting.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.full.is_empty()
    }
}

/// The rings of one port shared by its workers.
pub struct PortRings<B> {
    /// Bursts for worker `i`, from the rx owner (dispatch) or any worker (MAC control copies).
    rx: Box<[BurstRing<B>]>,
    /// Bursts for the tx owner to send.
    tx: BurstRing<B>,
    /// The rx owner's port will never receive again (pcap without loop): lets the other workers
    /// see the end of input.
    rx_done: AtomicBool,
}

impl<B> PortRings<B> {
    fn new(workers: usize, depth: usize) -> Self {
        let bursts = depth.div_ceil(BURST);
        PortRings {
            rx: (0..workers).map(|_| BurstRing::new(bursts)).collect(),
            tx: BurstRing::new(bursts),
            rx_done: AtomicBool::new(false),
        }
    }
}

/// One worker's view of a port: its own queue (`io`, if it polls or sends on one) plus the rings
/// it shares with the port's other workers. Implements [`Port`], so the worker loop drives it as
/// any other port.
pub struct WorkerPort<P: BufPool> {
    io: Option<Box<dyn Port<P> + Send>>,
    rx_role: RxRole,
    tx_role: TxRole,
    me: usize,
    workers: usize,
    rings: Arc<PortRings<P::Buf>>,
    /// Frames received from `io` before dispatch (capacity fixed at creation).
    scratch: Vec<P::Buf>,
    /// Per worker, the burst this view is filling for it (sent at the end of `rx_burst`).
    outbox: Vec<Option<Vec<P::Buf>>>,
    /// A burst taken off this worker's rx ring and not yet wholly handed out (`max` was reached).
    carry: Option<Vec<P::Buf>>,
    /// Dispatch and fan-in losses (full rings); frames moved through rings (not reported in
    /// [`Port::stats`], where the queue that received or sent them counts them).
    stats: PortIoStats,
    name: String,
}

impl<P> WorkerPort<P>
where
    P: BufPool,
    P::Buf: Send,
{
    /// The views of one port for `workers` workers. `queues[i]` is worker `i`'s own queue (its
    /// rx queue when `rx_shared` is false, its tx queue when `tx_shared` is false), or, for a
    /// shared side, worker `owner`'s handle of the port's only queue; a worker with neither has
    /// `None`. With `rx_shared`, `owner` polls rx and dispatches; with `tx_shared`, `owner`
    /// sends for everyone.
    pub fn split(
        name: &str,
        queues: Vec<Option<Box<dyn Port<P> + Send>>>,
        owner: usize,
        rx_shared: bool,
        tx_shared: bool,
    ) -> Vec<WorkerPort<P>> {
        let workers = queues.len().max(1);
        let rings = Arc::new(PortRings::new(workers, DISPATCH_RING));
        queues
            .into_iter()
            .enumerate()
            .map(|(me, io)| {
                let rx_role = match (rx_shared && workers > 1, me == owner) {
                    (false, _) => RxRole::Queue,
                    (true, true) => RxRole::Dispatch,
                    (true, false) => RxRole::Ring,
                };
                let tx_role = match (tx_shared && workers > 1, me == owner) {
                    (false, _) => TxRole::Queue,
                    (true, true) => TxRole::Owner,
                    (true, false) => TxRole::Ring,
                };
                WorkerPort {
                    io,
                    rx_role,
                    tx_role,
                    me,
                    workers,
                    rings: rings.clone(),
                    scratch: Vec::with_capacity(BURST),
                    outbox: (0..workers).map(|_| None).collect(),
                    carry: None,
                    stats: PortIoStats::default(),
                    name: name.to_string(),
                }
            })
            .collect()
    }

    pub fn rx_role(&self) -> RxRole {
        self.rx_role
    }

    pub fn tx_role(&self) -> TxRole {
        self.tx_role
    }

    /// Copies of a MAC control frame for every other worker (each honors the pause itself).
    fn broadcast_mac_control(&mut self, pkt: &P::Buf, pool: &mut P) {
        for w in 0..self.workers {
            if w == self.me {
                continue;
            }
            match pool.clone_pkt(pkt, usize::MAX) {
                Some(mut c) => {
                    c.meta_mut().flags &= !crate::packet::FLAG_CLONE;
                    self.post(w, c, pool);
                }
                None => self.stats.rx_nobuf += 1,
            }
        }
    }

    /// Add `pkt` to the burst for worker `to` (sent by [`WorkerPort::send_outbox`]). A full ring
    /// (no free burst) drops it, counted in `rx_errors`.
    #[inline]
    fn post(&mut self, to: usize, pkt: P::Buf, pool: &mut P) {
        let Some(slot) = self.outbox.get_mut(to) else {
            self.stats.rx_errors += 1;
            pool.free(pkt);
            return;
        };
        if slot.as_ref().is_some_and(|v| v.len() == v.capacity()) {
            if let Some(v) = slot.take() {
                self.rings.rx[to].send(v);
            }
        }
        if slot.is_none() {
            *slot = self.rings.rx[to].take_free();
        }
        match slot.as_mut() {
            Some(v) => v.push(pkt),
            None => {
                self.stats.rx_errors += 1;
                pool.free(pkt);
            }
        }
    }

    /// Send every burst filled by [`WorkerPort::post`].
    #[inline]
    fn send_outbox(&mut self) {
        for (to, slot) in self.outbox.iter_mut().enumerate() {
            if let Some(v) = slot.take() {
                self.rings.rx[to].send(v);
            }
        }
    }

    /// Frames from this worker's rx ring into `out`, up to `max` in all (`start` = `out`'s
    /// length before this call); a burst not wholly taken is kept for the next call.
    #[inline]
    fn take_ring(&mut self, out: &mut Vec<P::Buf>, start: usize, max: usize) {
        let ring = &self.rings.rx[self.me];
        while out.len() - start < max {
            let Some(mut v) = self.carry.take().or_else(|| ring.recv()) else {
                break;
            };
            let room = max - (out.len() - start);
            if v.len() <= room {
                out.append(&mut v);
                ring.give_back(v);
            } else {
                out.extend(v.drain(..room));
                self.carry = Some(v);
            }
        }
    }
}

impl<P> Port<P> for WorkerPort<P>
where
    P: BufPool,
    P::Buf: Send,
{
    fn rx_burst(&mut self, now: Nanos, pool: &mut P, out: &mut Vec<P::Buf>, max: usize) -> usize {
        let start = out.len();
        match self.rx_role {
            RxRole::Ring => {
                self.take_ring(out, start, max);
                let n = out.len() - start;
                self.stats.rx_pkts += n as u64;
                self.stats.rx_bytes += out[start..].iter().map(|p| p.len() as u64).sum::<u64>();
                return n;
            }
            RxRole::Queue | RxRole::Dispatch => {}
        }
        let Some(io) = self.io.as_mut() else {
            return 0;
        };
        if self.workers <= 1 && self.rx_role == RxRole::Queue {
            // The only worker: every frame is its own and no MAC control is copied to anyone,
            // so the burst goes straight into `out` (no pass through `scratch` testing each
            // frame, about 25 instructions per frame).
            return io.rx_burst(now, pool, out, max);
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let room = max.min(scratch.capacity());
        io.rx_burst(now, pool, &mut scratch, room);
        if self.rx_role == RxRole::Dispatch && io.rx_exhausted() {
            self.rings.rx_done.store(true, Ordering::Release);
        }
        for pkt in scratch.drain(..) {
            if self.workers > 1 && is_mac_control(pkt.data()) {
                self.broadcast_mac_control(&pkt, pool);
                out.push(pkt);
                continue;
            }
            let to = match self.rx_role {
                RxRole::Dispatch => shard_of(pkt.data(), self.workers),
                _ => self.me,
            };
            if to == self.me {
                out.push(pkt);
            } else {
                self.post(to, pkt, pool);
            }
        }
        self.scratch = scratch;
        self.send_outbox();
        // MAC control copies from the other workers (hardware RSS: they land on one queue).
        if self.workers > 1 && self.rx_role == RxRole::Queue {
            self.take_ring(out, start, max);
        }
        out.len() - start
    }

    fn tx_burst(&mut self, now: Nanos, pkts: &mut Vec<P::Buf>, pool: &mut P) -> usize {
        match (self.tx_role, self.io.as_mut()) {
            (TxRole::Ring, _) => {
                let mut handed = 0;
                while !pkts.is_empty() {
                    let Some(mut v) = self.rings.tx.take_free() else {
                        // The owner is behind: every burst is in flight.
                        for p in pkts.drain(..) {
                            self.stats.tx_errors += 1;
                            pool.free(p);
                        }
                        break;
                    };
                    let n = pkts.len().min(v.capacity().max(1));
                    for p in pkts.drain(..n) {
                        self.stats.tx_bytes += p.len() as u64;
                        v.push(p);
                    }
                    self.stats.tx_pkts += n as u64;
                    handed += n;
                    self.rings.tx.send(v);
                }
                handed
            }
            (_, Some(io)) => io.tx_burst(now, pkts, pool),
            (_, None) => {
                for p in pkts.drain(..) {
                    self.stats.tx_errors += 1;
                    pool.free(p);
                }
                0
            }
        }
    }

    fn service(&mut self, now: Nanos, pool: &mut P) -> usize {
        if self.tx_role != TxRole::Owner {
            return 0;
        }
        let Some(io) = self.io.as_mut() else {
            return 0;
        };
        let mut sent = 0;
        while sent < FANIN_BURST {
            let Some(mut v) = self.rings.tx.recv() else {
                break;
            };
            sent += v.len();
            io.tx_burst(now, &mut v, pool);
            self.rings.tx.give_back(v);
        }
        sent
    }

    fn next_rx(&self) -> Option<Nanos> {
        match self.rx_role {
            RxRole::Ring => None,
            _ => self.io.as_ref().and_then(|p| p.next_rx()),
        }
    }

    fn rx_exhausted(&self) -> bool {
        match self.rx_role {
            RxRole::Ring => {
                self.rings.rx_done.load(Ordering::Acquire)
                    && self.rings.rx[self.me].is_empty()
                    && self.carry.is_none()
            }
            _ => self.io.as_ref().is_none_or(|p| p.rx_exhausted()),
        }
    }

    fn link_up(&self) -> bool {
        self.io.as_ref().is_none_or(|p| p.link_up())
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.io.as_mut() {
            Some(p) => p.flush(),
            None => Ok(()),
        }
    }

    fn stats(&self) -> PortIoStats {
        // Frames are counted once, by the queue that received or sent them: a frame handed over
        // a ring shows in the owner's counters, not again here (summing workers stays exact).
        // Losses at the rings are this view's own.
        let mut s = self.io.as_ref().map(|p| p.stats()).unwrap_or_default();
        s.merge(&PortIoStats {
            rx_nobuf: self.stats.rx_nobuf,
            rx_errors: self.stats.rx_errors,
            tx_errors: self.stats.tx_errors,
            ..PortIoStats::default()
        });
        s
    }

    fn describe(&self) -> String {
        let io = self
            .io
            .as_ref()
            .map_or_else(|| "no queue".to_string(), |p| p.describe());
        format!(
            "{} worker {}/{}: rx {:?}, tx {:?}, {io}",
            self.name, self.me, self.workers, self.rx_role, self.tx_role
        )
    }
}

/// Drop what is still in the rings (the last view of a port to go frees them).
impl<B> Drop for PortRings<B> {
    fn drop(&mut self) {
        for r in self.rx.iter() {
            while r.recv().is_some() {}
        }
        while self.tx.recv().is_some() {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapPool;
    use crate::port::MemoryPort;

    fn v4(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8];
        f[12] = 0x08;
        f[14] = 0x45;
        f[14 + 12..14 + 16].copy_from_slice(&src);
        f[14 + 16..14 + 20].copy_from_slice(&dst);
        f
    }

    #[test]
    fn both_directions_same_worker_and_spread() {
        let mut seen = [0usize; 4];
        for i in 0..=255u8 {
            for j in [1u8, 7, 200] {
                let a = [10, 0, i, j];
                let b = [10, 1, j, i];
                let f = shard_of(&v4(a, b), 4);
                assert_eq!(f, shard_of(&v4(b, a), 4));
                seen[f] += 1;
            }
        }
        // 768 pairs over 4 workers: every worker gets a fair share.
        assert!(seen.iter().all(|&n| n > 120), "{seen:?}");
        // IPv6 after a VLAN tag.
        let mut f6 = vec![0u8; 18 + 40];
        f6[12..14].copy_from_slice(&[0x81, 0x00]);
        f6[16..18].copy_from_slice(&[0x86, 0xdd]);
        f6[18 + 8 + 15] = 1;
        f6[18 + 24 + 15] = 2;
        let mut r6 = f6.clone();
        r6[18 + 8 + 15] = 2;
        r6[18 + 24 + 15] = 1;
        assert_eq!(pair_hash(&f6), pair_hash(&r6));
        assert_ne!(pair_hash(&f6), 0);
        // Truncated and non-IP frames: worker 0, no panic.
        assert_eq!(shard_of(&v4([1; 4], [2; 4])[..20], 4), 0);
        assert_eq!(shard_of(&[], 4), 0);
        assert_eq!(shard_of(&v4([1; 4], [2; 4]), 1), 0);
    }

    #[test]
    fn dispatch_hands_frames_to_their_worker_and_fans_tx_in() {
        let mut pool = HeapPool::new(256, 256);
        let (port, host) = MemoryPort::new(256);
        let io: Box<dyn Port<HeapPool> + Send> = Box::new(port);
        let mut views = WorkerPort::split("p", vec![Some(io), None], 0, true, true);
        assert_eq!(views[0].rx_role(), RxRole::Dispatch);
        assert_eq!(views[1].rx_role(), RxRole::Ring);
        assert_eq!(views[1].tx_role(), TxRole::Ring);
        let frames: Vec<Vec<u8>> = (0..40u8)
            .flat_map(|i| {
                [
                    v4([10, 0, 0, i], [10, 1, 0, i]),
                    v4([10, 1, 0, i], [10, 0, 0, i]),
                ]
            })
            .collect();
        for f in &frames {
            assert!(host.inject(f));
        }
        let mut got: [Vec<Vec<u8>>; 2] = [Vec::new(), Vec::new()];
        let mut out = Vec::with_capacity(64);
        for _ in 0..4 {
            for (w, v) in views.iter_mut().enumerate() {
                v.rx_burst(0, &mut pool, &mut out, 32);
                for p in out.drain(..) {
                    got[w].push(p.data().to_vec());
                    pool.free(p);
                }
            }
        }
        assert_eq!(got[0].len() + got[1].len(), frames.len());
        for (w, g) in got.iter().enumerate() {
            assert!(!g.is_empty(), "worker {w} got nothing");
            for f in g {
                assert_eq!(shard_of(f, 2), w);
            }
        }
        // MAC control: every worker gets it.
        let mut pfc = vec![0u8; 60];
        pfc[12..14].copy_from_slice(&[0x88, 0x08]);
        assert!(host.inject(&pfc));
        let mut n = 0;
        for v in views.iter_mut() {
            n += v.rx_burst(0, &mut pool, &mut out, 32);
        }
        assert_eq!(n, 2);
        for p in out.drain(..) {
            pool.free(p);
        }
        // Worker 1 sends through worker 0's queue, in service().
        let mut txv = vec![pool.alloc_from(&frames[0]).unwrap()];
        assert_eq!(views[1].tx_burst(0, &mut txv, &mut pool), 1);
        assert!(host.take().is_none());
        assert_eq!(views[0].service(0, &mut pool), 1);
        assert_eq!(host.drain(), vec![frames[0].clone()]);
        assert_eq!(views[0].stats().tx_pkts, 1);
        assert_eq!(views[1].stats().tx_pkts, 0);
    }

    #[test]
    fn burst_ring_circulates_its_vectors_and_keeps_order() {
        let r: BurstRing<u32> = BurstRing::new(2);
        let mut a = r.take_free().unwrap();
        let mut b = r.take_free().unwrap();
        assert!(
            r.take_free().is_none(),
            "two bursts in flight: the ring is full"
        );
        a.extend([1, 2]);
        b.push(3);
        r.send(a);
        r.send(b);
        let got: Vec<u32> = std::iter::from_fn(|| r.recv())
            .flat_map(|v| {
                let items = v.clone();
                r.give_back(v);
                items
            })
            .collect();
        assert_eq!(got, vec![1, 2, 3]);
        assert!(r.is_empty());
        // Both vectors are back, with their room.
        let v = r.take_free().unwrap();
        assert!(v.is_empty() && v.capacity() >= BURST);
        r.send(v); // an empty burst goes straight back
        assert!(r.is_empty());
        assert!(r.take_free().is_some() && r.take_free().is_some());
    }

    #[test]
    fn dispatched_frames_arrive_in_order_over_several_bursts_and_short_reads() {
        let mut pool = HeapPool::new(512, 256);
        let (port, host) = MemoryPort::new(512);
        let io: Box<dyn Port<HeapPool> + Send> = Box::new(port);
        let mut views = WorkerPort::split("p", vec![Some(io), None], 0, true, false);
        // 150 frames of pairs that worker 1 owns, numbered in their last byte.
        let pairs: Vec<(u8, u8)> = (0..=255u8)
            .map(|i| (i, 1))
            .filter(|&(i, j)| shard_of(&v4([10, 0, 0, i], [10, 1, 0, j]), 2) == 1)
            .collect();
        assert!(!pairs.is_empty());
        let mut sent = Vec::new();
        for k in 0..150usize {
            let (i, j) = pairs[k % pairs.len()];
            let mut f = v4([10, 0, 0, i], [10, 1, 0, j]);
            f.push(k as u8);
            assert!(host.inject(&f));
            sent.push(f);
        }
        let mut out = Vec::with_capacity(64);
        // The owner dispatches everything (five bursts of 32 from its queue).
        for _ in 0..5 {
            assert_eq!(views[0].rx_burst(0, &mut pool, &mut out, 32), 0);
        }
        // Worker 1 reads 7 at a time: bursts are split and carried over, order kept.
        let mut got = Vec::new();
        loop {
            let n = views[1].rx_burst(0, &mut pool, &mut out, 7);
            assert!(n <= 7);
            if n == 0 {
                break;
            }
            for p in out.drain(..) {
                got.push(p.data().to_vec());
                pool.free(p);
            }
        }
        assert_eq!(got, sent);
        assert_eq!(views[0].stats().rx_errors, 0);
    }
}
