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
//! Both shard keys are direction-independent, but they are different functions: one run's ports
//! must therefore all use hardware RSS or all use software dispatch (the DPDK platform refuses a
//! mix). Frames move between workers as buffers of a pool every worker can free into (DPDK's
//! mempool is thread-safe); heap pools are per worker, so several workers need DPDK.

use crate::packet::{BufPool, PacketBuf};
use crate::port::{Port, PortIoStats};
use crate::time::Nanos;
use crossbeam_queue::ArrayQueue;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Frames a dispatch ring holds (per worker and port, each way).
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
        if ethertype == Some(0x8100) || ethertype == Some(0x88a8) {
            off += 4;
            ethertype = be16(frame, off);
        }
    }
    let l3 = off + 2;
    let (a, b) = match ethertype {
        Some(0x0800) => match (frame.get(l3 + 12..l3 + 16), frame.get(l3 + 16..l3 + 20)) {
            (Some(s), Some(d)) => (fold(s), fold(d)),
            _ => return 0,
        },
        Some(0x86dd) => match (frame.get(l3 + 8..l3 + 24), frame.get(l3 + 24..l3 + 40)) {
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

/// Whether `frame` is a MAC control frame (EtherType 0x8808: PFC, PAUSE).
#[inline]
pub fn is_mac_control(frame: &[u8]) -> bool {
    be16(frame, 12) == Some(0x8808)
}

#[inline]
fn be16(b: &[u8], off: usize) -> Option<u16> {
    b.get(off..off + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
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

/// The rings of one port shared by its workers.
pub struct PortRings<B> {
    /// Frames for worker `i`, from the rx owner (dispatch) or any worker (MAC control copies).
    rx: Box<[ArrayQueue<B>]>,
    /// Frames for the tx owner to send.
    tx: ArrayQueue<B>,
    /// The rx owner's port will never receive again (pcap without loop): lets the other workers
    /// see the end of input.
    rx_done: AtomicBool,
}

impl<B> PortRings<B> {
    fn new(workers: usize, depth: usize) -> Self {
        PortRings {
            rx: (0..workers).map(|_| ArrayQueue::new(depth)).collect(),
            tx: ArrayQueue::new(depth),
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
                    scratch: Vec::with_capacity(crate::replay::BURST),
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
                    if let Err(c) = self.rings.rx[w].push(c) {
                        self.stats.rx_errors += 1;
                        pool.free(c);
                    }
                }
                None => self.stats.rx_nobuf += 1,
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
                while out.len() - start < max {
                    match self.rings.rx[self.me].pop() {
                        Some(p) => out.push(p),
                        None => break,
                    }
                }
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
            } else if let Err(p) = self.rings.rx[to].push(pkt) {
                self.stats.rx_errors += 1;
                pool.free(p);
            }
        }
        self.scratch = scratch;
        // MAC control copies from the other workers (hardware RSS: they land on one queue).
        if self.workers > 1 && self.rx_role == RxRole::Queue {
            while out.len() - start < max {
                match self.rings.rx[self.me].pop() {
                    Some(p) => out.push(p),
                    None => break,
                }
            }
        }
        out.len() - start
    }

    fn tx_burst(&mut self, now: Nanos, pkts: &mut Vec<P::Buf>, pool: &mut P) -> usize {
        match (self.tx_role, self.io.as_mut()) {
            (TxRole::Ring, _) => {
                let mut handed = 0;
                for p in pkts.drain(..) {
                    let len = p.len() as u64;
                    match self.rings.tx.push(p) {
                        Ok(()) => {
                            handed += 1;
                            self.stats.tx_pkts += 1;
                            self.stats.tx_bytes += len;
                        }
                        Err(p) => {
                            self.stats.tx_errors += 1;
                            pool.free(p);
                        }
                    }
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
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut sent = 0;
        while sent < FANIN_BURST {
            while scratch.len() < scratch.capacity() {
                match self.rings.tx.pop() {
                    Some(p) => scratch.push(p),
                    None => break,
                }
            }
            if scratch.is_empty() {
                break;
            }
            let n = scratch.len();
            io.tx_burst(now, &mut scratch, pool);
            sent += n;
        }
        self.scratch = scratch;
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
                self.rings.rx_done.load(Ordering::Acquire) && self.rings.rx[self.me].is_empty()
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
        s.add(&PortIoStats {
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
            while r.pop().is_some() {}
        }
        while self.tx.pop().is_some() {}
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
}
