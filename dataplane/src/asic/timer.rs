//! Per-lcore timer wheel on the engine's clock.
//!
//! Users: Bifrost's time slots (periodic: the user reschedules each expiry), THEMIS's beta
//! timeouts, Reflex's T_maxpause, MLCC's DQM. Timers fire exactly: every timer with
//! `deadline <= now` fires at the next poll, in deadline order, ties in scheduling order, however
//! far in the future it was scheduled, and [`TimerWheel::next_deadline`] is the exact earliest
//! deadline, so the virtual-time driver can jump straight to the next event.
//!
//! # Implementation
//!
//! A hashed wheel of `slots` (rounded up to a power of two) slots of `tick_ns` each. Timer entries
//! live in a slab of `capacity` entries allocated in `new`; each slot is an intrusive doubly-linked
//! list of its entries, kept sorted by deadline (stable for ties), and a bitmap marks non-empty
//! slots. A timer goes to slot `tick mod slots` where `tick = max(deadline / tick_ns, current
//! tick)`, so timers more than one rotation ahead share slots with nearer ones ("rounds") and
//! simply sort after them; a timer scheduled in the past goes to the current slot, ahead of
//! everything else.
//!
//! The earliest timer is the head of the first non-empty slot, scanning from the current tick,
//! whose head lies within one rotation; if none does, it is the earliest of the slot heads.
//!
//! Cost: `schedule` is O(1) plus the sorted insertion, which walks back from the slot's tail past
//! the timers due later in the same slot (O(1) when timers are scheduled in deadline order or
//! slots are short: size the wheel so `slots * tick_ns` covers the usual horizon). `cancel` is
//! O(1). Finding the earliest timer (`next_deadline`, and once per fired timer in `poll`) costs a
//! bitmap scan of at most `slots / 64` words, plus one look per non-empty slot when every pending
//! timer is more than a rotation away.

use crate::time::Nanos;

const NIL: u32 = u32::MAX;
/// Largest number of slots a wheel gets (larger requests are capped).
pub const MAX_SLOTS: usize = 1 << 24;

/// Handle of a scheduled timer. It carries the slab entry's generation, so cancelling a timer that
/// already fired or was cancelled (even if its entry was reused since) is a harmless no-op; the
/// generation is 32 bits, so only an id kept across 2^32 reuses of one entry could alias.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerId {
    index: u32,
    gen: u32,
}

/// `schedule` was refused: `capacity` timers are pending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerFull;

impl core::fmt::Display for TimerFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("timer wheel full")
    }
}

impl std::error::Error for TimerFull {}

/// Counters of a [`TimerWheel`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerStats {
    /// Timers scheduled.
    pub scheduled: u64,
    /// Timers fired (handed out by `poll`/`pop_expired`).
    pub fired: u64,
    /// Timers cancelled before firing.
    pub cancelled: u64,
    /// `schedule` calls refused because the wheel was full.
    pub full_events: u64,
    /// Most timers pending at once.
    pub max_pending: usize,
}

#[derive(Clone, Copy, Debug)]
struct Entry<T> {
    deadline: Nanos,
    /// Tick of the slot the entry is filed under: `max(deadline / tick_ns, cur at schedule)`.
    ptick: u64,
    token: T,
    prev: u32,
    next: u32,
    gen: u32,
    live: bool,
}

/// A timer wheel holding at most `capacity` pending timers, each carrying a token `T`.
#[derive(Debug)]
pub struct TimerWheel<T: Copy> {
    entries: Vec<Entry<T>>,
    capacity: usize,
    /// Free entries, threaded through `next`.
    free: u32,
    head: Box<[u32]>,
    tail: Box<[u32]>,
    occupied: Box<[u64]>,
    slots: u64,
    mask: u64,
    tick_ns: Nanos,
    /// Current tick: every pending entry has `ptick >= cur`.
    cur: u64,
    len: usize,
    stats: TimerStats,
}

impl<T: Copy> TimerWheel<T> {
    /// A wheel for at most `capacity` pending timers (capped at `u32::MAX - 1`), with `slots` slots
    /// (rounded up to a power of two, at least 1, at most [`MAX_SLOTS`]) of `tick_ns` ns (at least
    /// 1). All memory is allocated now.
    pub fn new(capacity: usize, tick_ns: Nanos, slots: usize) -> Self {
        let capacity = capacity.min(NIL as usize - 1);
        let slots = slots.clamp(1, MAX_SLOTS).next_power_of_two();
        TimerWheel {
            entries: Vec::with_capacity(capacity),
            capacity,
            free: NIL,
            head: vec![NIL; slots].into_boxed_slice(),
            tail: vec![NIL; slots].into_boxed_slice(),
            occupied: vec![0; slots.div_ceil(64)].into_boxed_slice(),
            slots: slots as u64,
            mask: slots as u64 - 1,
            tick_ns: tick_ns.max(1),
            cur: 0,
            len: 0,
            stats: TimerStats::default(),
        }
    }

    /// Schedule a timer to fire at `deadline` carrying `token`. A deadline in the past fires at
    /// the next poll. Refused with [`TimerFull`] (counted in `full_events`) when `capacity` timers
    /// are pending.
    pub fn schedule(&mut self, deadline: Nanos, token: T) -> Result<TimerId, TimerFull> {
        let ptick = (deadline / self.tick_ns).max(self.cur);
        let entry = Entry {
            deadline,
            ptick,
            token,
            prev: NIL,
            next: NIL,
            gen: 0,
            live: true,
        };
        let idx = if self.free != NIL {
            let i = self.free;
            let e = &mut self.entries[i as usize];
            self.free = e.next;
            *e = Entry {
                gen: e.gen,
                ..entry
            };
            i
        } else if self.entries.len() < self.capacity {
            self.entries.push(entry);
            (self.entries.len() - 1) as u32
        } else {
            self.stats.full_events += 1;
            return Err(TimerFull);
        };
        self.link_sorted(idx);
        self.len += 1;
        self.stats.scheduled += 1;
        self.stats.max_pending = self.stats.max_pending.max(self.len);
        Ok(TimerId {
            index: idx,
            gen: self.entries[idx as usize].gen,
        })
    }

    /// Cancel a pending timer. `false` (nothing happens) when it already fired or was cancelled.
    pub fn cancel(&mut self, id: TimerId) -> bool {
        if !self.is_pending(id) {
            return false;
        }
        self.release(id.index);
        self.stats.cancelled += 1;
        true
    }

    /// `true` while the timer has neither fired nor been cancelled.
    #[inline]
    pub fn is_pending(&self, id: TimerId) -> bool {
        matches!(self.entries.get(id.index as usize), Some(e) if e.live && e.gen == id.gen)
    }

    /// The deadline of a pending timer.
    #[inline]
    pub fn deadline(&self, id: TimerId) -> Option<Nanos> {
        if self.is_pending(id) {
            self.entries.get(id.index as usize).map(|e| e.deadline)
        } else {
            None
        }
    }

    /// Fire every timer with `deadline <= now`, in deadline order (ties: scheduling order),
    /// calling `f` for each; returns how many fired. `f` cannot reach the wheel; to reschedule from
    /// an expiry (periodic timers), loop on [`pop_expired`](Self::pop_expired) instead.
    pub fn poll(&mut self, now: Nanos, mut f: impl FnMut(TimerId, T)) -> usize {
        let mut n = 0;
        while let Some((id, token)) = self.pop_expired(now) {
            f(id, token);
            n += 1;
        }
        n
    }

    /// The earliest timer with `deadline <= now`, removed from the wheel; `None` when no timer is
    /// due. Timers scheduled while draining with a deadline `<= now` are returned too (so a
    /// periodic timer with period 0 would loop forever: use a period of at least 1 ns).
    pub fn pop_expired(&mut self, now: Nanos) -> Option<(TimerId, T)> {
        let now_tick = now / self.tick_ns;
        let Some(i) = self.find_min() else {
            self.cur = self.cur.max(now_tick);
            return None;
        };
        let e = self.entries[i as usize];
        if e.deadline > now {
            // Every pending entry is filed at or after e.ptick, so the wheel may advance.
            self.cur = self.cur.max(now_tick.min(e.ptick));
            return None;
        }
        self.cur = self.cur.max(e.ptick);
        self.release(i);
        self.stats.fired += 1;
        Some((
            TimerId {
                index: i,
                gen: e.gen,
            },
            e.token,
        ))
    }

    /// The exact earliest deadline of the pending timers (possibly already past); `None` when none
    /// is pending.
    #[inline]
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.find_min().map(|i| self.entries[i as usize].deadline)
    }

    /// Pending timers.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when no timer is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most timers that can be pending.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Tick length in ns.
    #[inline]
    pub fn tick_ns(&self) -> Nanos {
        self.tick_ns
    }

    /// Number of slots (a power of two).
    #[inline]
    pub fn slots(&self) -> usize {
        self.slots as usize
    }

    /// Cancel every pending timer (counted in `cancelled`); keeps all memory. Ids issued before
    /// stay invalid.
    pub fn clear(&mut self) {
        for i in 0..self.entries.len() as u32 {
            if self.entries[i as usize].live {
                self.release(i);
                self.stats.cancelled += 1;
            }
        }
    }

    /// Counters.
    #[inline]
    pub fn stats(&self) -> TimerStats {
        self.stats
    }

    /// Insert entry `i` into its slot, after every entry with a deadline `<=` its own.
    fn link_sorted(&mut self, i: u32) {
        let (deadline, ptick) = {
            let e = &self.entries[i as usize];
            (e.deadline, e.ptick)
        };
        let s = (ptick & self.mask) as usize;
        let mut p = self.tail[s];
        while p != NIL && self.entries[p as usize].deadline > deadline {
            p = self.entries[p as usize].prev;
        }
        let n = if p == NIL {
            self.head[s]
        } else {
            self.entries[p as usize].next
        };
        self.entries[i as usize].prev = p;
        self.entries[i as usize].next = n;
        if p == NIL {
            self.head[s] = i;
        } else {
            self.entries[p as usize].next = i;
        }
        if n == NIL {
            self.tail[s] = i;
        } else {
            self.entries[n as usize].prev = i;
        }
        self.occupied[s / 64] |= 1 << (s % 64);
    }

    /// Unlink entry `i` from its slot and put it on the free list (bumping its generation).
    fn release(&mut self, i: u32) {
        let e = self.entries[i as usize];
        let s = (e.ptick & self.mask) as usize;
        if e.prev == NIL {
            self.head[s] = e.next;
        } else {
            self.entries[e.prev as usize].next = e.next;
        }
        if e.next == NIL {
            self.tail[s] = e.prev;
        } else {
            self.entries[e.next as usize].prev = e.prev;
        }
        if self.head[s] == NIL {
            self.occupied[s / 64] &= !(1 << (s % 64));
        }
        let slot = &mut self.entries[i as usize];
        slot.live = false;
        slot.gen = slot.gen.wrapping_add(1);
        slot.prev = NIL;
        slot.next = self.free;
        self.free = i;
        self.len -= 1;
    }

    /// First occupied slot in `from..to`.
    fn next_occupied(&self, from: usize, to: usize) -> Option<usize> {
        let mut i = from;
        while i < to {
            let bits = self.occupied[i / 64] >> (i % 64);
            if bits != 0 {
                let s = i + bits.trailing_zeros() as usize;
                return (s < to).then_some(s);
            }
            i = (i / 64 + 1) * 64;
        }
        None
    }

    /// The entry that fires first.
    fn find_min(&self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let slots = self.slots as usize;
        let start = (self.cur & self.mask) as usize;
        let mut best: Option<u32> = None;
        let mut pos = start;
        let mut end = slots;
        let mut wrapped = false;
        loop {
            match self.next_occupied(pos, end) {
                Some(s) => {
                    let h = self.head[s];
                    let e = &self.entries[h as usize];
                    // Within one rotation: slots are met in tick order, so this is the earliest.
                    if e.ptick - self.cur < self.slots {
                        return Some(h);
                    }
                    let better = match best {
                        Some(b) => e.deadline < self.entries[b as usize].deadline,
                        None => true,
                    };
                    if better {
                        best = Some(h);
                    }
                    pos = s + 1;
                }
                None if !wrapped => {
                    wrapped = true;
                    pos = 0;
                    end = start;
                }
                None => return best,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn drain(w: &mut TimerWheel<u32>, now: Nanos) -> Vec<u32> {
        let mut v = Vec::new();
        w.poll(now, |_, t| v.push(t));
        v
    }

    #[test]
    fn fires_in_deadline_order_with_stable_ties() {
        let mut w = TimerWheel::new(16, 10, 8);
        w.schedule(35, 1).unwrap();
        w.schedule(12, 2).unwrap();
        w.schedule(35, 3).unwrap();
        w.schedule(31, 4).unwrap();
        w.schedule(12, 5).unwrap();
        assert_eq!(w.next_deadline(), Some(12));
        assert_eq!(drain(&mut w, 11), Vec::<u32>::new());
        assert_eq!(drain(&mut w, 12), vec![2, 5]);
        assert_eq!(w.next_deadline(), Some(31));
        assert_eq!(drain(&mut w, 100), vec![4, 1, 3]);
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
        assert_eq!(w.stats().fired, 5);
    }

    #[test]
    fn far_future_and_past_deadlines() {
        // One rotation = 8 slots * 10 ns = 80 ns.
        let mut w = TimerWheel::new(16, 10, 8);
        w.schedule(1_000_005, 1).unwrap();
        w.schedule(85, 2).unwrap(); // same slot as 5, next rotation
        w.schedule(u64::MAX, 3).unwrap();
        w.schedule(5, 4).unwrap();
        assert_eq!(w.next_deadline(), Some(5));
        assert_eq!(drain(&mut w, 50), vec![4]);
        assert_eq!(w.next_deadline(), Some(85));
        assert_eq!(drain(&mut w, 84), Vec::<u32>::new());
        assert_eq!(drain(&mut w, 85), vec![2]);
        assert_eq!(w.next_deadline(), Some(1_000_005));
        // A deadline already past fires at the next poll, before later ones.
        w.schedule(3, 5).unwrap();
        assert_eq!(w.next_deadline(), Some(3));
        assert_eq!(drain(&mut w, 90), vec![5]);
        assert_eq!(drain(&mut w, 1_000_004), Vec::<u32>::new());
        assert_eq!(drain(&mut w, 2_000_000), vec![1]);
        assert_eq!(w.next_deadline(), Some(u64::MAX));
        assert_eq!(drain(&mut w, u64::MAX), vec![3]);
    }

    #[test]
    fn cancel_and_stale_ids() {
        let mut w = TimerWheel::new(2, 10, 4);
        let a = w.schedule(10, 1).unwrap();
        let b = w.schedule(20, 2).unwrap();
        assert_eq!(w.schedule(30, 3), Err(TimerFull));
        assert_eq!(w.stats().full_events, 1);
        assert_eq!(w.deadline(a), Some(10));
        assert!(w.cancel(a));
        assert!(!w.cancel(a));
        assert_eq!(w.deadline(a), None);
        // The entry is reused; the old id stays dead.
        let c = w.schedule(5, 4).unwrap();
        assert!(!w.cancel(a));
        assert!(w.is_pending(c));
        assert_eq!(drain(&mut w, 100), vec![4, 2]);
        assert!(!w.cancel(b));
        assert!(!w.cancel(c));
        assert_eq!(w.stats().cancelled, 1);
        let mut z: TimerWheel<u32> = TimerWheel::new(0, 10, 4);
        assert_eq!(z.schedule(1, 1), Err(TimerFull));
    }

    #[test]
    fn periodic_rescheduling_via_pop_expired() {
        // Bifrost-style slot timer of period 7 ns, driven by jumping to next_deadline.
        let mut w = TimerWheel::new(4, 4, 4);
        w.schedule(7, 0u32).unwrap();
        let mut fired = Vec::new();
        while let Some(t) = w.next_deadline() {
            if t > 100 {
                break;
            }
            while let Some((_, n)) = w.pop_expired(t) {
                fired.push(t);
                w.schedule(t + 7, n + 1).unwrap();
            }
        }
        assert_eq!(fired, (1..=14).map(|i| i * 7).collect::<Vec<_>>());
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn parameters_are_sanitised_and_memory_fixed() {
        let mut w: TimerWheel<u8> = TimerWheel::new(100, 0, 0);
        assert_eq!((w.tick_ns(), w.slots()), (1, 1));
        assert_eq!(TimerWheel::<u8>::new(1, 1, 1000).slots(), 1024);
        let cap = w.entries.capacity();
        for round in 0..50u64 {
            for i in 0..100u64 {
                w.schedule(round * 1000 + (i * 37) % 500, i as u8).unwrap();
            }
            assert!(w.schedule(0, 0).is_err());
            assert_eq!(w.poll(round * 1000 + 499, |_, _| {}), 100);
        }
        assert_eq!(w.entries.capacity(), cap);
        w.schedule(5, 1).unwrap();
        w.clear();
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Schedule(i64),
        Far(u64),
        Cancel(usize),
        Advance(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (-60i64..400).prop_map(Op::Schedule),
            1 => (0u64..u64::MAX).prop_map(Op::Far),
            2 => any::<usize>().prop_map(Op::Cancel),
            3 => (0u64..150).prop_map(Op::Advance),
        ]
    }

    proptest! {
        /// Against a BTreeMap keyed by (deadline, scheduling sequence): the same timers fire, in
        /// the same order, and next_deadline is exact.
        #[test]
        fn matches_btreemap_model(
            ops in proptest::collection::vec(op(), 1..300),
            tick in 1u64..20,
            slots in 1usize..10,
        ) {
            let cap = 24;
            let mut w = TimerWheel::new(cap, tick, slots);
            let mut model: BTreeMap<(Nanos, u64), (TimerId, u64)> = BTreeMap::new();
            let mut ids: Vec<(TimerId, (Nanos, u64))> = Vec::new();
            let mut now: Nanos = 1000;
            let mut seq = 0u64;
            for o in ops {
                match o {
                    Op::Schedule(_) | Op::Far(_) => {
                        let d = match o {
                            Op::Schedule(delta) => now.saturating_add_signed(delta),
                            Op::Far(x) => x,
                            _ => unreachable!(),
                        };
                        seq += 1;
                        match w.schedule(d, seq) {
                            Ok(id) => {
                                prop_assert!(model.len() < cap);
                                model.insert((d, seq), (id, seq));
                                ids.push((id, (d, seq)));
                            }
                            Err(TimerFull) => prop_assert_eq!(model.len(), cap),
                        }
                    }
                    Op::Cancel(i) => {
                        if !ids.is_empty() {
                            let (id, key) = ids[i % ids.len()];
                            let want = model.remove(&key).is_some();
                            prop_assert_eq!(w.cancel(id), want);
                        }
                    }
                    Op::Advance(dt) => {
                        now += dt;
                        let mut got = Vec::new();
                        w.poll(now, |id, t| got.push((id, t)));
                        let mut want = Vec::new();
                        while let Some(e) = model.first_entry() {
                            if e.key().0 > now {
                                break;
                            }
                            want.push(e.remove());
                        }
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(w.len(), model.len());
                prop_assert_eq!(w.next_deadline(), model.keys().next().map(|k| k.0));
                prop_assert!(w.entries.capacity() >= cap && w.entries.len() <= cap);
            }
        }
    }
}
