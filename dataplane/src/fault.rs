//! Fault injection (issue 20; smoltcp's `FaultInjector` is the model): a [`Port`] wrapper that
//! drops, duplicates, corrupts, truncates, reorders and delays frames on a seeded schedule, and
//! makes the port misbehave as a NIC does under stress: empty rx bursts, a full tx ring.
//!
//! Every fault is drawn from a seeded generator, so a test that fails replays exactly. Each frame
//! the wrapper takes out of circulation is counted in [`FaultStats`] by why:
//!
//! | fault | rx (frames coming in) | tx (frames going out) |
//! |---|---|---|
//! | drop | the frame never reaches the switch (`rx_dropped`) | never reaches the wire (`tx_dropped`) |
//! | duplicate | a copy follows it (a buffer from the pool; none when it is empty) | a copy follows it |
//! | corrupt | one byte flipped at a random offset | the same |
//! | truncate | cut to a random shorter length (possibly 0) | the same |
//! | reorder | held back until after the next burst's frames | swapped with the next frame of the burst |
//! | delay | held up to `max_delay_ns`, then delivered after the frames of that instant | (rx only) |
//! | empty rx burst | the call returns nothing; frames wait in the inner port | |
//! | tx ring full | | the burst's tail is refused: freed, counted (`tx_ring_full`), as a NIC's full ring |
//!
//! Frames held for a delay or a reorder sit in a fixed ring ([`FaultConfig::hold_capacity`]);
//! when it is full the fault is skipped. `rx_exhausted` stays false and `next_rx` reports the
//! earliest release while frames are held, so a drained run ends with every buffer back in the
//! pool. Nothing here allocates after construction.

use crate::asic::rng::Rng;
use crate::packet::{BufPool, PacketBuf};
use crate::port::{Port, PortIoStats};
use crate::time::Nanos;
use std::collections::VecDeque;
use std::io;

/// Probabilities of each per-frame fault, in parts per million.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultRates {
    pub drop_ppm: u32,
    pub duplicate_ppm: u32,
    pub corrupt_ppm: u32,
    pub truncate_ppm: u32,
    pub reorder_ppm: u32,
    /// rx only.
    pub delay_ppm: u32,
}

/// What to inject, and the seed of the schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultConfig {
    pub seed: u64,
    pub rx: FaultRates,
    pub tx: FaultRates,
    /// Probability (ppm) that an rx call returns nothing.
    pub empty_rx_ppm: u32,
    /// Probability (ppm) that a tx call finds the ring full after a random number of frames.
    pub tx_full_ppm: u32,
    /// Longest rx delay, ns.
    pub max_delay_ns: Nanos,
    /// Frames held back (delayed or reordered) at most at once.
    pub hold_capacity: usize,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            seed: 1,
            rx: FaultRates::default(),
            tx: FaultRates::default(),
            empty_rx_ppm: 0,
            tx_full_ppm: 0,
            max_delay_ns: 100_000,
            hold_capacity: 256,
        }
    }
}

/// What the wrapper did, fault by fault.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultStats {
    pub rx_dropped: u64,
    pub rx_duplicated: u64,
    pub rx_corrupted: u64,
    pub rx_truncated: u64,
    pub rx_reordered: u64,
    pub rx_delayed: u64,
    pub rx_empty_bursts: u64,
    pub tx_dropped: u64,
    pub tx_duplicated: u64,
    pub tx_corrupted: u64,
    pub tx_truncated: u64,
    pub tx_reordered: u64,
    /// Frames refused because the "ring" was full.
    pub tx_ring_full: u64,
}

impl FaultStats {
    /// Frames the faults removed (they never reached the switch or the wire).
    pub fn lost(&self) -> u64 {
        self.rx_dropped + self.tx_dropped + self.tx_ring_full
    }
}

/// A [`Port`] whose frames suffer the faults of a [`FaultConfig`].
pub struct FaultyPort<T, B> {
    inner: T,
    cfg: FaultConfig,
    rng: Rng,
    /// Held rx frames: (release time, the rx call that held it, frame), in order of holding.
    held: VecDeque<(Nanos, u64, B)>,
    /// rx calls so far.
    calls: u64,
    stats: FaultStats,
}

impl<T, B> FaultyPort<T, B> {
    pub fn new(inner: T, cfg: FaultConfig) -> Self {
        FaultyPort {
            inner,
            rng: Rng::new(cfg.seed),
            held: VecDeque::with_capacity(cfg.hold_capacity),
            calls: 0,
            cfg,
            stats: FaultStats::default(),
        }
    }

    pub fn fault_stats(&self) -> FaultStats {
        self.stats
    }

    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// Frames held back (delayed or reordered) right now.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    #[inline]
    fn hit(&mut self, ppm: u32) -> bool {
        ppm != 0 && (self.rng.next_u64() % 1_000_000) < ppm as u64
    }

    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.rng.next_u64() % n
        }
    }

    /// Corrupt and truncate `p` in place as the rates say; true for each that happened.
    fn mangle(&mut self, p: &mut B, rates: FaultRates) -> (bool, bool)
    where
        B: PacketBuf,
    {
        let mut corrupted = false;
        if self.hit(rates.corrupt_ppm) && !p.is_empty() {
            let at = self.below(p.len() as u64) as usize;
            let bit = 1u8 << self.below(8);
            if let Some(b) = p.data_mut().get_mut(at) {
                *b ^= bit;
                corrupted = true;
            }
        }
        let mut truncated = false;
        if self.hit(rates.truncate_ppm) && !p.is_empty() {
            let cut = 1 + self.below(p.len() as u64) as usize;
            truncated = p.trim(cut);
        }
        (corrupted, truncated)
    }
}

impl<P, T> Port<P> for FaultyPort<T, P::Buf>
where
    P: BufPool,
    T: Port<P>,
{
    fn rx_burst(&mut self, now: Nanos, pool: &mut P, out: &mut Vec<P::Buf>, max: usize) -> usize {
        self.calls += 1;
        if self.hit(self.cfg.empty_rx_ppm) {
            self.stats.rx_empty_bursts += 1;
            return 0;
        }
        let start = out.len();
        self.inner.rx_burst(now, pool, out, max);
        let rates = self.cfg.rx;
        let mut i = start;
        while i < out.len() {
            if self.hit(rates.drop_ppm) {
                let p = out.remove(i);
                pool.free(p);
                self.stats.rx_dropped += 1;
                continue;
            }
            let (c, t) = self.mangle(&mut out[i], rates);
            self.stats.rx_corrupted += c as u64;
            self.stats.rx_truncated += t as u64;
            let room = self.held.len() < self.cfg.hold_capacity;
            if room && self.hit(rates.delay_ppm) {
                let p = out.remove(i);
                let until = now + 1 + self.below(self.cfg.max_delay_ns.max(1));
                self.held.push_back((until, self.calls, p));
                self.stats.rx_delayed += 1;
                continue;
            }
            if room && self.hit(rates.reorder_ppm) {
                // Released by the next call, after that call's fresh frames.
                let p = out.remove(i);
                self.held.push_back((now, self.calls, p));
                self.stats.rx_reordered += 1;
                continue;
            }
            if out.len() < out.capacity() && self.hit(rates.duplicate_ppm) {
                if let Some(copy) = pool.clone_pkt(&out[i], usize::MAX) {
                    out.insert(i + 1, copy);
                    self.stats.rx_duplicated += 1;
                    i += 1;
                }
            }
            i += 1;
        }
        // Held frames due by now and held by an earlier call, after the fresh ones, within the
        // burst's room.
        let mut k = 0;
        while k < self.held.len() && out.len() < start + max && out.len() < out.capacity() {
            let (until, call, _) = &self.held[k];
            if *until <= now && *call < self.calls {
                if let Some((_, _, p)) = self.held.remove(k) {
                    out.push(p);
                }
            } else {
                k += 1;
            }
        }
        out.len() - start
    }

    fn tx_burst(&mut self, now: Nanos, pkts: &mut Vec<P::Buf>, pool: &mut P) -> usize {
        let rates = self.cfg.tx;
        let mut i = 0;
        while i < pkts.len() {
            if self.hit(rates.drop_ppm) {
                let p = pkts.remove(i);
                pool.free(p);
                self.stats.tx_dropped += 1;
                continue;
            }
            let (c, t) = self.mangle(&mut pkts[i], rates);
            self.stats.tx_corrupted += c as u64;
            self.stats.tx_truncated += t as u64;
            if i + 1 < pkts.len() && self.hit(rates.reorder_ppm) {
                pkts.swap(i, i + 1);
                self.stats.tx_reordered += 1;
            }
            if pkts.len() < pkts.capacity() && self.hit(rates.duplicate_ppm) {
                if let Some(copy) = pool.clone_pkt(&pkts[i], usize::MAX) {
                    pkts.insert(i + 1, copy);
                    self.stats.tx_duplicated += 1;
                    i += 1;
                }
            }
            i += 1;
        }
        if !pkts.is_empty() && self.hit(self.cfg.tx_full_ppm) {
            let keep = self.below(pkts.len() as u64) as usize;
            for p in pkts.drain(keep..) {
                pool.free(p);
                self.stats.tx_ring_full += 1;
            }
        }
        self.inner.tx_burst(now, pkts, pool)
    }

    fn next_rx(&self) -> Option<Nanos> {
        let held = self.held.iter().map(|(t, _, _)| *t).min();
        crate::time::earlier(held, self.inner.next_rx())
    }

    fn rx_exhausted(&self) -> bool {
        self.held.is_empty() && self.inner.rx_exhausted()
    }

    fn link_up(&self) -> bool {
        self.inner.link_up()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn service(&mut self, now: Nanos, pool: &mut P) -> usize {
        self.inner.service(now, pool)
    }

    fn stats(&self) -> PortIoStats {
        self.inner.stats()
    }

    fn describe(&self) -> String {
        format!("faulty({})", self.inner.describe())
    }
}
