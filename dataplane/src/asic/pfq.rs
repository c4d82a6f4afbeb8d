//! Per-flow queues (MLCC's PFQ at the receiver-side DCI switch, Reflex's controlled queue): a fixed
//! pool of [`PktQueue`]s handed out to flows on demand, each drained at its own rate by a
//! [`Shaper`] that the control loop changes at run time ([`PerFlowQueues::set_rate`]).
//!
//! Capacity: `max_flows` queues of `queue_pkts` packets / `queue_bytes` bytes each, all allocated
//! in [`PerFlowQueues::new`], plus a flow map (hashbrown with fixed ahash seeds, so behaviour is
//! reproducible) sized at twice `max_flows` so that inserts after deletes rehash in place instead
//! of growing. Enqueue and dequeue never allocate.
//!
//! Full paths: a packet of a new flow when every queue is in use is refused with
//! [`DropReason::QueueFull`] (counted in `flow_refused`); a packet for a full queue is refused
//! with [`DropReason::QueueFull`] (counted in `queue_full`).
//!
//! Service: [`PerFlowQueues::dequeue`] serves the queue whose head packet conforms to its shaper
//! earliest (at or before `now`; queues ready at the same nanosecond in the order they became
//! ready: round robin), and charges the shaper. A calendar (a binary heap of next-conforming
//! times, one current entry per non-empty queue, stale ones skipped by generation) makes that
//! O(log n) per packet whatever the number of queues. A queue that becomes empty
//! is released at once when `release_on_empty` is set; otherwise it keeps its flow (and its rate)
//! until [`PerFlowQueues::release`]. A released queue's next flow starts with `default_rate_bps`
//! and a full bucket.

use core::cmp::Reverse;
use core::hash::Hash;
use std::collections::{BinaryHeap, VecDeque};

use hashbrown::HashMap;

use super::queue::PktQueue;
use super::shaper::Shaper;
use crate::counters::DropReason;
use crate::packet::PacketBuf;
use crate::time::Nanos;

/// Fixed ahash seeds: the map's layout (and so its timing) is the same on every run.
const SEEDS: [u64; 4] = [
    0x243f_6a88_85a3_08d3,
    0x1319_8a2e_0370_7344,
    0xa409_3822_299f_31d0,
    0x082e_fa98_ec4e_6c89,
];

/// Calendar entries per queue before stale ones are swept (in place: no allocation).
const CALENDAR_SLACK: usize = 4;
/// Heads [`PerFlowQueues::dequeue_where`] looks past in one call.
pub const MAX_REFUSED: usize = 4;

/// Per-flow queue set configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfqConfig {
    /// Most flows with a queue at once.
    pub max_flows: usize,
    /// Packet limit of each queue.
    pub queue_pkts: usize,
    /// Byte limit of each queue.
    pub queue_bytes: u64,
    /// Dequeue rate a new flow's queue starts with (bits per second; 0 = stopped).
    pub default_rate_bps: u64,
    /// Token bucket depth of each queue's shaper, bytes.
    pub burst_bytes: u64,
    /// Release a queue as soon as it is empty (else keep it until `release`).
    pub release_on_empty: bool,
}

/// What [`PerFlowQueues::admits`] says of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Its flow's queue takes it: the flow's slot, or `None` for a new queue (pass it to
    /// [`PerFlowQueues::enqueue_admitted`]).
    Yes(Option<usize>),
    /// Its flow's queue is full (or a new queue could never hold it).
    QueueFull,
    /// A new flow and every queue is in use.
    NoQueue,
}

/// Counters of a [`PerFlowQueues`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfqStats {
    /// Packets accepted.
    pub enq_pkts: u64,
    /// Packets dequeued.
    pub deq_pkts: u64,
    /// Bytes dequeued.
    pub deq_bytes: u64,
    /// Packets of new flows refused because every queue was in use.
    pub flow_refused: u64,
    /// Packets refused because their flow's queue was full.
    pub queue_full: u64,
    /// Queues handed to a flow.
    pub allocs: u64,
    /// Queues released.
    pub releases: u64,
    /// Most queues in use at once.
    pub max_in_use: u64,
}

/// A calendar entry: slot `slot`'s head conforms at `t`; `seq` is the push order; `gen` is the
/// slot's generation when pushed. Ordered by (`t`, `seq`) taken as one 128-bit number, one
/// compare: the push order is unique, so this is the order of the tuple (time, push order,
/// slot, generation) it replaced (four compares in a chain), and entries with equal keys are the
/// same entry. The heap's sifts compare on every level. Two
/// `u64`s rather than a `u128` field: 24 bytes to move, not 32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CalEntry {
    t: Nanos,
    seq: u64,
    slot: u32,
    gen: u32,
}

impl CalEntry {
    #[inline]
    fn new(t: Nanos, seq: u64, slot: u32, gen: u32) -> Self {
        CalEntry { t, seq, slot, gen }
    }

    #[inline]
    fn key(&self) -> u128 {
        ((self.t as u128) << 64) | self.seq as u128
    }

    /// When the head conforms.
    #[inline]
    fn time(&self) -> Nanos {
        self.t
    }
}

impl Ord for CalEntry {
    #[inline]
    fn cmp(&self, o: &Self) -> core::cmp::Ordering {
        self.key().cmp(&o.key())
    }
}

impl PartialOrd for CalEntry {
    #[inline]
    fn partial_cmp(&self, o: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

struct Slot<B: PacketBuf, K> {
    flow: Option<K>,
    q: PktQueue<B>,
    shaper: Shaper,
    /// `release` was asked while non-empty: release when it empties.
    release_pending: bool,
}

/// A bounded set of per-flow queues, each with its own dequeue rate.
pub struct PerFlowQueues<B: PacketBuf, K: Hash + Eq + Copy = u64> {
    cfg: PfqConfig,
    map: HashMap<K, u32, ahash::RandomState>,
    slots: Vec<Slot<B, K>>,
    free: Vec<u32>,
    /// The calendar: (time the head of slot `i` conforms, push order, slot, its generation) of
    /// every non-empty queue, earliest first. An entry whose generation is not the slot's is
    /// stale (the queue emptied, changed rate or changed flow since) and is skipped.
    calendar: BinaryHeap<Reverse<CalEntry>>,
    /// The calendar's sorted run (MLCC's PFQ dequeue, paper 001 section 3.2.2: which packet
    /// goes when does not change): entries pushed in key order (each at least the last one's
    /// key) wait here in a FIFO instead of the heap; the calendar is the union of the two, its
    /// earliest entry the smaller of the heap's top and the run's front. A queue whose head
    /// conforms at once is scheduled at `now`, and `now` only grows, so in steady state nearly
    /// every entry takes the run: O(1) in and out where the heap's pop sifted through every
    /// level (147 instructions per frame in perf/dpdk-mlcc.toml). Same order as the heap alone
    /// (the proptest `run_and_heap_dequeue_as_the_heap`).
    run: VecDeque<CalEntry>,
    /// Tests: schedule on the heap only (the reference the run is checked against).
    #[cfg(test)]
    heap_only: bool,
    /// A lower bound of every calendar entry's time, stale entries included (`Nanos::MAX`: the
    /// calendar is empty): lowered by every push ([`schedule`](Self::schedule); entries
    /// `dequeue_where` sets aside go back unchanged), still a bound after pops and sweeps (they
    /// only remove entries), and set to the earliest current entry's time whenever
    /// [`next_ready`](Self::next_ready) finds it. So when it is after `now` no head is due, and
    /// [`pass_through`](Self::pass_through)'s "no other head due" test is one compare instead of
    /// a look at the heap's top and the run's front (paper 001 section 3.2.2's PFQ dequeue:
    /// which packet goes when does not change).
    earliest: Nanos,
    /// Per slot: bumped whenever its calendar entry stops being valid.
    gen: Vec<u32>,
    /// Pushes so far (FIFO among queues ready at the same nanosecond: round robin).
    seq: u64,
    /// Entries set aside by `dequeue_where` (head refused by `ready`), pushed back after.
    blocked: Vec<CalEntry>,
    held_pkts: u64,
    held_bytes: u64,
    stats: PfqStats,
}

impl<B: PacketBuf, K: Hash + Eq + Copy> PerFlowQueues<B, K> {
    /// Allocate every queue, shaper and the flow map.
    pub fn new(cfg: PfqConfig) -> Self {
        let hasher = ahash::RandomState::with_seeds(SEEDS[0], SEEDS[1], SEEDS[2], SEEDS[3]);
        let mut slots = Vec::with_capacity(cfg.max_flows);
        for _ in 0..cfg.max_flows {
            slots.push(Slot {
                flow: None,
                q: PktQueue::new(cfg.queue_pkts, cfg.queue_bytes),
                shaper: Shaper::new(cfg.default_rate_bps, cfg.burst_bytes, 0),
                release_pending: false,
            });
        }
        // Lowest slot handed out first.
        let free = (0..cfg.max_flows as u32).rev().collect();
        PerFlowQueues {
            cfg,
            map: HashMap::with_capacity_and_hasher(cfg.max_flows.saturating_mul(2) + 1, hasher),
            slots,
            free,
            calendar: BinaryHeap::with_capacity(CALENDAR_SLACK * cfg.max_flows + 1),
            run: VecDeque::with_capacity(CALENDAR_SLACK * cfg.max_flows + 1),
            #[cfg(test)]
            heap_only: false,
            earliest: Nanos::MAX,
            gen: vec![0; cfg.max_flows],
            seq: 0,
            blocked: Vec::with_capacity(MAX_REFUSED),
            held_pkts: 0,
            held_bytes: 0,
            stats: PfqStats::default(),
        }
    }

    /// Queue `pkt` for `flow` at `now`, allocating a queue for a new flow (rate
    /// `default_rate_bps`, full bucket). Refused with `DropReason::QueueFull` when no queue is
    /// free (`flow_refused`) or the flow's queue is full (`queue_full`); the packet is handed
    /// back.
    pub fn enqueue(&mut self, flow: K, pkt: B, now: Nanos) -> Result<(), (B, DropReason)> {
        self.enqueue_slot(flow, pkt, now).map(|_| ())
    }

    /// As [`enqueue`](Self::enqueue), returning the flow's queue slot (stable while the flow
    /// holds it, for per-flow state kept beside the queues) and whether it was allocated now.
    pub fn enqueue_slot(
        &mut self,
        flow: K,
        pkt: B,
        now: Nanos,
    ) -> Result<(usize, bool), (B, DropReason)> {
        let slot = self.map.get(&flow).map(|&i| i as usize);
        self.enqueue_admitted(flow, slot, pkt, now)
    }

    /// As [`enqueue_slot`](Self::enqueue_slot) with the flow's slot as [`admits`](Self::admits)
    /// just found it (`Admission::Yes(slot)`, the queues unchanged since): no second lookup.
    pub fn enqueue_admitted(
        &mut self,
        flow: K,
        slot: Option<usize>,
        pkt: B,
        now: Nanos,
    ) -> Result<(usize, bool), (B, DropReason)> {
        let mut new = false;
        let idx = match slot.filter(|&i| i < self.slots.len()) {
            Some(i) => i,
            None => {
                let Some(i) = self.free.pop() else {
                    self.stats.flow_refused += 1;
                    return Err((pkt, DropReason::QueueFull));
                };
                self.map.insert(flow, i);
                let s = &mut self.slots[i as usize];
                s.flow = Some(flow);
                s.release_pending = false;
                s.shaper = Shaper::new(self.cfg.default_rate_bps, self.cfg.burst_bytes, now);
                self.stats.allocs += 1;
                new = true;
                let in_use = (self.slots.len() - self.free.len()) as u64;
                self.stats.max_in_use = self.stats.max_in_use.max(in_use);
                i as usize
            }
        };
        let s = &mut self.slots[idx];
        s.release_pending = false;
        let len = pkt.len() as u64;
        let was_empty = s.q.is_empty();
        match s.q.push(pkt) {
            Ok(()) => {
                if was_empty {
                    self.schedule(idx, now);
                }
                self.stats.enq_pkts += 1;
                self.held_pkts += 1;
                self.held_bytes += len;
                Ok((idx, new))
            }
            Err(p) => {
                self.stats.queue_full += 1;
                if s.q.is_empty() && self.cfg.release_on_empty {
                    // A queue that cannot hold even this packet: do not keep it allocated.
                    self.release_slot(idx);
                }
                Err((p, DropReason::QueueFull))
            }
        }
    }

    /// A packet of `len` bytes for slot `i` (its flow's queue, as [`admits`](Self::admits) found
    /// it) that leaves at `now` without being queued, when it would be the very next packet out
    /// at `now`: its queue is empty, its shaper conforms now, no other queue's head is ready at
    /// `now` (the calendar serves those first) and the queue is not to be released on emptying.
    /// Then the shaper is charged and the packet counted in and out, exactly as
    /// [`enqueue_admitted`](Self::enqueue_admitted) followed by a
    /// [`dequeue_where`](Self::dequeue_where) at `now` would (a shaper's cut-through: a packet
    /// arriving at an empty queue with tokens departs at once). `false`: nothing changed, queue
    /// it.
    ///
    /// Inline: called once per packet that finds its PFQ (MLCC's cut-through), where a call of
    /// its own saved and restored registers for about 18 instructions of its 98 (`#[inline]`
    /// alone left it out of line).
    #[inline(always)]
    pub fn pass_through(&mut self, i: usize, len: u64, now: Nanos) -> bool {
        let Some(s) = self.slots.get(i) else {
            return false;
        };
        if s.flow.is_none() || !s.q.is_empty() || self.cfg.release_on_empty || s.release_pending {
            return false;
        }
        // The shaper's refill computed once for the test and the charge.
        let Some(c) = s.shaper.conforming(len, now) else {
            return false;
        };
        if self.head_due(now) {
            return false;
        }
        self.slots[i].shaper.consume_conforming(c, len, now);
        self.stats.enq_pkts += 1;
        self.stats.deq_pkts += 1;
        self.stats.deq_bytes += len;
        true
    }

    fn release_slot(&mut self, idx: usize) {
        let Some(s) = self.slots.get_mut(idx) else {
            return;
        };
        if let Some(f) = s.flow.take() {
            self.map.remove(&f);
            s.release_pending = false;
            self.free.push(idx as u32);
            self.stats.releases += 1;
            if let Some(g) = self.gen.get_mut(idx) {
                *g = g.wrapping_add(1);
            }
        }
    }

    /// Put slot `i`'s head on the calendar (a new generation: any older entry goes stale).
    fn schedule(&mut self, i: usize, now: Nanos) {
        let Some(g) = self.gen.get_mut(i) else {
            return;
        };
        *g = g.wrapping_add(1);
        let g = *g;
        let s = &self.slots[i];
        let Some(len) = s.q.head_len() else {
            return;
        };
        let t = s.shaper.next_conforming(len as u64, now);
        if t == Nanos::MAX {
            return; // stopped (rate 0): a rate change schedules it again
        }
        // Both hold at most the heap's capacity together (so neither grows): after a sweep
        // each slot has at most one entry.
        if self.calendar.len() + self.run.len() + 1 >= self.calendar.capacity() {
            self.sweep();
        }
        self.seq += 1;
        let e = CalEntry::new(t, self.seq, i as u32, g);
        self.earliest = self.earliest.min(t);
        #[cfg(test)]
        if self.heap_only {
            self.calendar.push(Reverse(e));
            return;
        }
        // The run stays sorted: `seq` grows, so a time no earlier than the last one's keeps it.
        if self.run.back().is_none_or(|b| b.t <= t) && self.run.len() < self.run.capacity() {
            self.run.push_back(e);
        } else {
            self.calendar.push(Reverse(e));
        }
    }

    /// The calendar's earliest entry, and whether it is the run's (else the heap's).
    #[inline]
    fn first(&self) -> Option<(CalEntry, bool)> {
        match (self.calendar.peek(), self.run.front()) {
            (Some(&Reverse(h)), Some(&r)) => Some(if r < h { (r, true) } else { (h, false) }),
            (Some(&Reverse(h)), None) => Some((h, false)),
            (None, Some(&r)) => Some((r, true)),
            (None, None) => None,
        }
    }

    /// Remove the entry [`first`](Self::first) gave.
    #[inline]
    fn pop_first(&mut self, from_run: bool) {
        if from_run {
            self.run.pop_front();
        } else {
            self.calendar.pop();
        }
    }

    /// Drop the stale entries (in place: the heap keeps its memory).
    fn sweep(&mut self) {
        let gen = &self.gen;
        self.calendar
            .retain(|Reverse(e)| gen.get(e.slot as usize) == Some(&e.gen));
        self.run
            .retain(|e| gen.get(e.slot as usize) == Some(&e.gen));
    }

    #[inline]
    fn is_current(&self, e: &CalEntry) -> bool {
        self.gen.get(e.slot as usize) == Some(&e.gen)
    }

    /// The next packet at `now`: round robin over the queues whose head conforms to their
    /// shaper; `None` when no head conforms (see [`next_ready`](Self::next_ready)). The shaper of
    /// the served queue is charged the packet's length. Only non-empty queues are visited (a
    /// bitmap of them), so a call costs O(non-empty queues) at worst.
    pub fn dequeue(&mut self, now: Nanos) -> Option<B> {
        self.dequeue_where(now, |_| true).map(|(_, p)| p)
    }

    /// As [`dequeue`](Self::dequeue), skipping queues whose head packet `ready` refuses (e.g.
    /// its egress port is backlogged); returns the packet with its queue slot. O(log n) per
    /// packet (the calendar). After [`MAX_REFUSED`] refused heads in one call it gives up
    /// (`None`): a backlogged port refuses every head bound to it, and looking past all of
    /// them on every call would cost O(n log n).
    pub fn dequeue_where(
        &mut self,
        now: Nanos,
        mut ready: impl FnMut(&B) -> bool,
    ) -> Option<(usize, B)> {
        let mut found = None;
        while let Some((e, from_run)) = self.first() {
            if !self.is_current(&e) {
                self.pop_first(from_run);
                continue;
            }
            if e.time() > now {
                break;
            }
            self.pop_first(from_run);
            let i = e.slot as usize;
            if self.slots[i].q.head().is_some_and(&mut ready) {
                found = Some(i);
                break;
            }
            self.blocked.push(e);
            if self.blocked.len() >= MAX_REFUSED {
                break;
            }
        }
        while let Some(e) = self.blocked.pop() {
            self.calendar.push(Reverse(e));
        }
        let i = found?;
        let s = &mut self.slots[i];
        let len = s.q.head_len()? as u64;
        let pkt = s.q.pop()?;
        s.shaper.consume(len, now);
        let empty = s.q.is_empty();
        let release = empty && (self.cfg.release_on_empty || s.release_pending);
        self.stats.deq_pkts += 1;
        self.stats.deq_bytes += len;
        self.held_pkts -= 1;
        self.held_bytes -= len;
        if empty {
            if let Some(g) = self.gen.get_mut(i) {
                *g = g.wrapping_add(1);
            }
        } else {
            self.schedule(i, now);
        }
        if release {
            self.release_slot(i);
        }
        Some((i, pkt))
    }

    /// The earliest time at or after `now` at which some queue's head conforms (exact, per
    /// [`Shaper::next_conforming`]); `None` if every queue is empty or stopped (rate 0). Sweeps
    /// stale calendar entries off the top, hence `&mut`.
    pub fn next_ready(&mut self, now: Nanos) -> Option<Nanos> {
        while let Some((e, from_run)) = self.first() {
            if self.is_current(&e) {
                // The earliest entry of all (the calendar's order is by time first).
                self.earliest = e.time();
                return Some(e.time().max(now));
            }
            self.pop_first(from_run);
        }
        self.earliest = Nanos::MAX;
        None
    }

    /// Is some queue's head due at `now` (`next_ready(now)` at or before `now`)? One compare
    /// when the calendar's bound is after `now` (the usual case for a packet arriving at its
    /// empty PFQ: every queue empty or waiting), else [`next_ready`](Self::next_ready).
    #[inline]
    fn head_due(&mut self, now: Nanos) -> bool {
        self.earliest <= now && self.next_ready(now).is_some_and(|t| t <= now)
    }

    /// When slot `i`'s head packet conforms (see [`next_ready`](Self::next_ready)); `None` when
    /// the slot is empty or stopped.
    pub fn slot_next_ready(&self, i: usize, now: Nanos) -> Option<Nanos> {
        let s = self.slots.get(i)?;
        let len = s.q.head_len()?;
        let t = s.shaper.next_conforming(len as u64, now);
        (t != Nanos::MAX).then_some(t)
    }

    /// Set `flow`'s dequeue rate at `now` (tokens earned so far count at the old rate). `false`
    /// if the flow has no queue.
    pub fn set_rate(&mut self, flow: &K, rate_bps: u64, now: Nanos) -> bool {
        match self.map.get(flow) {
            Some(&i) => {
                self.set_slot_rate(i as usize, rate_bps, now);
                true
            }
            None => false,
        }
    }

    /// `flow`'s dequeue rate, if it has a queue.
    pub fn rate(&self, flow: &K) -> Option<u64> {
        self.map
            .get(flow)
            .map(|&i| self.slots[i as usize].shaper.rate_bps())
    }

    /// Give `flow`'s queue back. Returns `true` if released now (the queue was empty); if it still
    /// holds packets it is released when it empties and `false` is returned (a later enqueue for
    /// the flow cancels that). `false` as well if the flow has no queue.
    pub fn release(&mut self, flow: &K) -> bool {
        let Some(&i) = self.map.get(flow) else {
            return false;
        };
        let i = i as usize;
        if self.slots[i].q.is_empty() {
            self.release_slot(i);
            true
        } else {
            self.slots[i].release_pending = true;
            false
        }
    }

    /// (packets, bytes) queued for `flow`, if it has a queue.
    pub fn depth(&self, flow: &K) -> Option<(usize, u64)> {
        self.map.get(flow).map(|&i| {
            let q = &self.slots[i as usize].q;
            (q.len(), q.bytes())
        })
    }

    /// Does `flow` have a queue?
    pub fn contains(&self, flow: &K) -> bool {
        self.map.contains_key(flow)
    }

    /// Queues in use.
    pub fn in_use(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Queues free.
    pub fn free_queues(&self) -> usize {
        self.free.len()
    }

    /// No packet queued in any queue.
    pub fn is_empty(&self) -> bool {
        self.held_pkts == 0
    }

    /// Would [`enqueue`](Self::enqueue) take a `len`-byte packet of `flow` now?
    pub fn admits(&self, flow: &K, len: usize) -> Admission {
        match self.map.get(flow) {
            Some(&i) => {
                if self.slots[i as usize].q.fits(len) {
                    Admission::Yes(Some(i as usize))
                } else {
                    Admission::QueueFull
                }
            }
            None if self.free.is_empty() => Admission::NoQueue,
            None if self.cfg.queue_pkts == 0 || (len as u64) > self.cfg.queue_bytes => {
                Admission::QueueFull
            }
            None => Admission::Yes(None),
        }
    }

    /// The queue slot of `flow`, if it has one.
    pub fn slot_of(&self, flow: &K) -> Option<usize> {
        self.map.get(flow).map(|&i| i as usize)
    }

    /// The flow holding slot `i`, if any.
    pub fn slot_flow(&self, i: usize) -> Option<K> {
        self.slots.get(i).and_then(|s| s.flow)
    }

    /// (packets, bytes) queued in slot `i`.
    pub fn slot_depth(&self, i: usize) -> (usize, u64) {
        self.slots
            .get(i)
            .map_or((0, 0), |s| (s.q.len(), s.q.bytes()))
    }

    /// Set slot `i`'s dequeue rate at `now` (see [`set_rate`](Self::set_rate)).
    pub fn set_slot_rate(&mut self, i: usize, rate_bps: u64, now: Nanos) {
        if let Some(s) = self.slots.get_mut(i) {
            s.shaper.set_rate(rate_bps, now);
            self.schedule(i, now);
        }
    }

    /// Slot `i`'s dequeue rate.
    pub fn slot_rate(&self, i: usize) -> u64 {
        self.slots.get(i).map_or(0, |s| s.shaper.rate_bps())
    }

    /// Release slot `i` now if it is empty (`true`); a non-empty or free slot is left alone.
    pub fn release_if_empty(&mut self, i: usize) -> bool {
        if self
            .slots
            .get(i)
            .is_some_and(|s| s.flow.is_some() && s.q.is_empty())
        {
            self.release_slot(i);
            true
        } else {
            false
        }
    }

    /// Number of queue slots (`max_flows`).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Packets queued in all queues.
    pub fn held_pkts(&self) -> u64 {
        self.held_pkts
    }

    /// Bytes queued in all queues.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// Counters.
    pub fn stats(&self) -> &PfqStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapBuf;
    use proptest::prelude::*;

    proptest! {
        /// The calendar's packed entries sort as the (time, push order, slot, generation)
        /// tuples they replaced, push orders unique as `schedule` makes them.
        #[test]
        fn calendar_entries_sort_as_the_tuples(
            v in proptest::collection::vec((0u64..40, any::<u32>(), any::<u32>()), 0..60),
            big in any::<bool>(),
        ) {
            let mut tuples: Vec<(Nanos, u64, u32, u32)> = v
                .iter()
                .enumerate()
                .map(|(seq, &(t, slot, gen))| {
                    let t = if big { u64::MAX - t } else { t };
                    (t, seq as u64 + 1, slot, gen)
                })
                .collect();
            let mut entries: Vec<CalEntry> =
                tuples.iter().map(|&(t, q, s, g)| CalEntry::new(t, q, s, g)).collect();
            tuples.reverse();
            entries.reverse();
            tuples.sort();
            entries.sort();
            let back: Vec<_> = entries.iter().map(|e| (e.time(), e.seq, e.slot, e.gen)).collect();
            prop_assert_eq!(back, tuples);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The calendar with its sorted run serves the same packets, from the same slots, at
        /// the same times, as the heap alone (the calendar before the run): enqueues, rate
        /// changes (new entries, the old ones stale, sweeps), releases, refusals by
        /// `dequeue_where`, and time that now and then goes backwards.
        #[test]
        fn run_and_heap_dequeue_as_the_heap(
            ops in proptest::collection::vec(
                (0u8..6, 0u64..4, 64usize..1500, 0u64..4000, 0u8..8),
                1..400,
            ),
            release_on_empty in any::<bool>(),
        ) {
            let mut a: PerFlowQueues<HeapBuf> = PerFlowQueues::new(small(release_on_empty));
            let mut b: PerFlowQueues<HeapBuf> = PerFlowQueues::new(small(release_on_empty));
            b.heap_only = true;
            let mut now = 0u64;
            let mut tag = 0u8;
            for (op, flow, len, gap, x) in ops {
                now = if x == 7 { now.saturating_sub(gap / 4) } else { now + gap };
                match op {
                    0 | 1 => {
                        tag = tag.wrapping_add(1);
                        let ra = a.enqueue(flow, pkt(len, tag), now).map_err(|(_, r)| r);
                        let rb = b.enqueue(flow, pkt(len, tag), now).map_err(|(_, r)| r);
                        prop_assert_eq!(ra, rb);
                    }
                    2 => {
                        let rate = [0, 1_000_000_000, 10_000_000_000, 100_000_000_000][x as usize % 4];
                        prop_assert_eq!(a.set_rate(&flow, rate, now), b.set_rate(&flow, rate, now));
                    }
                    3 => prop_assert_eq!(a.release(&flow), b.release(&flow)),
                    _ => dequeue_refusing(&mut a, &mut b, now, x)?,
                }
                a.check_bound(now)?;
                b.check_bound(now)?;
                prop_assert_eq!(a.next_ready(now), b.next_ready(now));
                prop_assert_eq!(a.held_pkts(), b.held_pkts());
            }
            drain_both(&mut a, &mut b, now)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// A packet `pass_through` lets go is the packet an enqueue followed by a dequeue at the
        /// same instant would send: `a` tries `pass_through` before every enqueue of a known
        /// flow, `b` only queues and, where `a` passed a packet, dequeues at once; both send the
        /// same packets at the same times, and their counters, held packets and next times
        /// agree throughout (rate changes, releases, refused heads, idle gaps included).
        #[test]
        fn pass_through_is_an_enqueue_and_an_immediate_dequeue(
            ops in proptest::collection::vec(
                (0u8..6, 0u64..4, 64usize..1500, 0u64..3000, 0u8..8),
                1..300,
            ),
            release_on_empty in any::<bool>(),
        ) {
            let mut a: PerFlowQueues<HeapBuf> = PerFlowQueues::new(small(release_on_empty));
            let mut b: PerFlowQueues<HeapBuf> = PerFlowQueues::new(small(release_on_empty));
            let (mut now, mut tag) = (0u64, 0u8);
            for (op, flow, len, gap, x) in ops {
                now += gap;
                match op {
                    0..=2 => {
                        tag = tag.wrapping_add(1);
                        prop_assert_eq!(a.admits(&flow, len), b.admits(&flow, len));
                        let through = match a.admits(&flow, len) {
                            Admission::Yes(Some(i)) => a.pass_through(i, len as u64, now),
                            _ => false,
                        };
                        if !through {
                            let ra = a.enqueue(flow, pkt(len, tag), now).map_err(|(_, r)| r);
                            prop_assert_eq!(ra, b.enqueue(flow, pkt(len, tag), now).map_err(|(_, r)| r));
                        } else {
                            prop_assert!(b.enqueue(flow, pkt(len, tag), now).is_ok());
                            let gb = b.dequeue(now).map(|p| (p.data()[0], p.len()));
                            prop_assert_eq!(gb, Some((tag, len)));
                        }
                    }
                    3 => {
                        let rate = [0, 1_000_000_000, 10_000_000_000, 100_000_000_000][x as usize % 4];
                        prop_assert_eq!(a.set_rate(&flow, rate, now), b.set_rate(&flow, rate, now));
                    }
                    4 => prop_assert_eq!(a.release(&flow), b.release(&flow)),
                    _ => dequeue_refusing(&mut a, &mut b, now, x)?,
                }
                prop_assert_eq!(a.stats(), b.stats());
                prop_assert_eq!(a.held_pkts(), b.held_pkts());
                prop_assert_eq!(a.held_bytes(), b.held_bytes());
                prop_assert_eq!(a.in_use(), b.in_use());
                a.check_bound(now)?;
                prop_assert_eq!(a.next_ready(now), b.next_ready(now));
            }
            drain_both(&mut a, &mut b, now)?;
        }
    }

    #[test]
    fn pass_through_happens_only_for_an_empty_conforming_queue() {
        let mut p: PerFlowQueues<HeapBuf> = PerFlowQueues::new(cfg(false));
        // A new flow has no slot yet: it is queued.
        p.enqueue(7, pkt(100, 1), 0).unwrap();
        let i = p.slot_of(&7).unwrap();
        // Its queue is not empty: no.
        assert!(!p.pass_through(i, 100, 0));
        assert_eq!(p.dequeue(0).map(|b| b.len()), Some(100));
        // Empty, but the shaper (1 B/ns, no burst) has no room before 100 ns.
        assert!(!p.pass_through(i, 100, 50));
        assert!(p.pass_through(i, 100, 100));
        assert_eq!(p.stats().enq_pkts, 2);
        assert_eq!(p.stats().deq_pkts, 2);
        // Charged: the next 100 bytes conform at 200.
        assert!(!p.pass_through(i, 100, 150));
        assert!(p.pass_through(i, 100, 200));
        // Another flow's head due now goes first.
        p.enqueue(8, pkt(100, 2), 300).unwrap();
        assert!(!p.pass_through(i, 100, 300));
        assert_eq!(p.dequeue(300).map(|b| b.data()[0]), Some(2));
        assert!(p.pass_through(i, 100, 300));
        assert_eq!(p.held_pkts(), 0);
    }

    impl<B: PacketBuf, K: Hash + Eq + Copy> PerFlowQueues<B, K> {
        /// `next_ready` without the bound: the earliest current entry of the whole heap and
        /// run, looked at one by one.
        fn next_ready_by_scan(&self, now: Nanos) -> Option<Nanos> {
            let all = self
                .calendar
                .iter()
                .map(|r| r.0)
                .chain(self.run.iter().copied());
            let t = all.filter(|e| self.is_current(e)).map(|e| e.time()).min();
            t.map(|t| t.max(now))
        }

        /// The bound's invariant (no entry, stale or not, before it), then `head_due` and
        /// `next_ready` against the scan.
        fn check_bound(&mut self, now: Nanos) -> Result<(), TestCaseError> {
            let all = self
                .calendar
                .iter()
                .map(|r| r.0)
                .chain(self.run.iter().copied());
            let first = all.map(|e| e.time()).min().unwrap_or(Nanos::MAX);
            prop_assert!(
                self.earliest <= first,
                "bound {} after an entry at {}",
                self.earliest,
                first
            );
            let scan = self.next_ready_by_scan(now);
            prop_assert_eq!(self.head_due(now), scan.is_some_and(|t| t <= now));
            prop_assert_eq!(self.next_ready(now), scan);
            Ok(())
        }
    }

    /// The two property tests' queues: three flows of four packets or 4000 bytes, 10 Gb/s.
    fn small(release_on_empty: bool) -> PfqConfig {
        PfqConfig {
            max_flows: 3,
            queue_pkts: 4,
            queue_bytes: 4000,
            default_rate_bps: 10_000_000_000,
            burst_bytes: 1500,
            release_on_empty,
        }
    }

    /// Three dequeues from both at `now`, refusing heads whose tag is a multiple of `x` (x > 1:
    /// a backlogged port): the same packets from the same slots.
    fn dequeue_refusing(
        a: &mut PerFlowQueues<HeapBuf>,
        b: &mut PerFlowQueues<HeapBuf>,
        now: Nanos,
        x: u8,
    ) -> Result<(), TestCaseError> {
        let refuse = |p: &HeapBuf| x > 1 && p.data()[0].is_multiple_of(x);
        for _ in 0..3 {
            let ga = a.dequeue_where(now, |p| !refuse(p));
            let gb = b.dequeue_where(now, |p| !refuse(p));
            let key = |g: Option<(usize, HeapBuf)>| g.map(|(i, p)| (i, p.data()[0], p.len()));
            prop_assert_eq!(key(ga), key(gb));
        }
        Ok(())
    }

    /// Both drained from `now` on, each packet at the time it conforms: the same packets at the
    /// same times.
    fn drain_both(
        a: &mut PerFlowQueues<HeapBuf>,
        b: &mut PerFlowQueues<HeapBuf>,
        mut now: Nanos,
    ) -> Result<(), TestCaseError> {
        for _ in 0..100 {
            let (ta, tb) = (a.next_ready(now), b.next_ready(now));
            prop_assert_eq!(ta, tb);
            let Some(t) = ta else { break };
            now = t;
            let ga = a.dequeue(now).map(|p| (p.data()[0], p.len()));
            prop_assert_eq!(ga, b.dequeue(now).map(|p| (p.data()[0], p.len())));
        }
        Ok(())
    }

    fn cfg(release_on_empty: bool) -> PfqConfig {
        PfqConfig {
            max_flows: 2,
            queue_pkts: 3,
            queue_bytes: 1 << 20,
            default_rate_bps: 8_000_000_000, // 1 B/ns
            burst_bytes: 0,
            release_on_empty,
        }
    }

    fn pkt(len: usize, tag: u8) -> HeapBuf {
        HeapBuf::from_bytes(&vec![tag; len])
    }

    #[test]
    fn per_flow_rates_and_round_robin() {
        let mut p: PerFlowQueues<HeapBuf> = PerFlowQueues::new(cfg(false));
        for _ in 0..3 {
            p.enqueue(10, pkt(1000, 1), 0).unwrap();
            p.enqueue(20, pkt(1000, 2), 0).unwrap();
        }
        assert!(p.set_rate(&20, 4_000_000_000, 0)); // 0.5 B/ns
        assert_eq!(p.rate(&20), Some(4_000_000_000));
        // Both conform at 0 (empty bucket, no debt): round robin.
        assert_eq!(p.dequeue(0).unwrap().data()[0], 1);
        assert_eq!(p.dequeue(0).unwrap().data()[0], 2);
        assert!(p.dequeue(0).is_none());
        // Flow 10 is back after 1000 ns, flow 20 after 2000 ns.
        assert_eq!(p.next_ready(0), Some(1000));
        assert!(p.dequeue(999).is_none());
        assert_eq!(p.dequeue(1000).unwrap().data()[0], 1);
        assert_eq!(p.next_ready(1000), Some(2000));
        // Both ready: round robin resumes after flow 10's slot.
        assert_eq!(p.dequeue(2000).unwrap().data()[0], 2);
        assert_eq!(p.dequeue(2000).unwrap().data()[0], 1);
        // Flow 10 empty but kept (release_on_empty = false).
        assert!(p.contains(&10));
        assert_eq!(p.depth(&10), Some((0, 0)));
        assert!(p.release(&10));
        assert!(!p.contains(&10));
        assert!(!p.release(&20)); // non-empty: pending
        assert_eq!(p.dequeue(4000).unwrap().data()[0], 2);
        assert!(!p.contains(&20));
        assert_eq!(p.free_queues(), 2);
        assert!(p.is_empty());
        assert_eq!(p.next_ready(5000), None);
    }

    #[test]
    fn refusals_counted() {
        let mut p: PerFlowQueues<HeapBuf> = PerFlowQueues::new(cfg(true));
        p.enqueue(1, pkt(64, 1), 0).unwrap();
        p.enqueue(2, pkt(64, 2), 0).unwrap();
        let (_, r) = p.enqueue(3, pkt(64, 3), 0).unwrap_err();
        assert_eq!(r, DropReason::QueueFull);
        assert_eq!(p.stats().flow_refused, 1);
        p.enqueue(1, pkt(64, 1), 0).unwrap();
        p.enqueue(1, pkt(64, 1), 0).unwrap();
        assert!(p.enqueue(1, pkt(64, 1), 0).is_err());
        assert_eq!(p.stats().queue_full, 1);
        // Release on empty frees flow 2's queue for flow 3.
        let mut t = 0;
        while p.contains(&2) {
            t = p.next_ready(t).unwrap();
            p.dequeue(t).unwrap();
        }
        p.enqueue(3, pkt(64, 3), t).unwrap();
        assert_eq!(p.in_use(), 2);
        assert!(!p.set_rate(&99, 1, 0));
        assert_eq!(p.rate(&99), None);
    }

    #[test]
    fn stopped_flow() {
        let mut c = cfg(true);
        c.default_rate_bps = 0;
        c.burst_bytes = 100;
        let mut p: PerFlowQueues<HeapBuf> = PerFlowQueues::new(c);
        p.enqueue(1, pkt(100, 1), 0).unwrap();
        p.enqueue(1, pkt(100, 1), 0).unwrap();
        assert!(p.dequeue(0).is_some()); // the burst
        assert_eq!(p.next_ready(0), None);
        assert!(p.dequeue(1 << 40).is_none());
        p.set_rate(&1, 8_000_000_000, 10);
        assert_eq!(p.next_ready(10), Some(110));
    }

    proptest! {
        /// Many flows over a small pool: no packet lost or duplicated, every refusal counted, and
        /// next_ready is exact.
        #[test]
        fn conservation(ops in proptest::collection::vec((0u64..6, 64usize..1500, 0u64..3000), 1..300)) {
            let mut p: PerFlowQueues<HeapBuf> = PerFlowQueues::new(PfqConfig {
                max_flows: 3,
                queue_pkts: 4,
                queue_bytes: 4000,
                default_rate_bps: 10_000_000_000,
                burst_bytes: 1500,
                release_on_empty: true,
            });
            let mut now = 0;
            let (mut acc, mut out, mut refused) = (0u64, 0u64, 0u64);
            for (flow, len, gap) in ops {
                now += gap;
                match p.enqueue(flow, pkt(len, flow as u8), now) {
                    Ok(()) => acc += 1,
                    Err(_) => refused += 1,
                }
                if let Some(t) = p.next_ready(now) {
                    prop_assert!(t >= now);
                    if t > now {
                        prop_assert!(p.dequeue(t - 1).is_none());
                    }
                    prop_assert!(p.dequeue(t).is_some());
                    out += 1;
                    now = t;
                }
            }
            while let Some(t) = p.next_ready(now) {
                prop_assert!(p.dequeue(t).is_some());
                out += 1;
                now = t;
            }
            prop_assert_eq!(acc, out);
            prop_assert_eq!(refused, p.stats().flow_refused + p.stats().queue_full);
            prop_assert_eq!(p.in_use(), 0);
        }
    }
}
