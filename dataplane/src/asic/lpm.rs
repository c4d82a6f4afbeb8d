//! Longest-prefix match for IPv4 (`u32`) and IPv6 (`u128`) routes, with bounded capacity.
//!
//! # Implementation
//!
//! One exact-match hash map keyed by `(prefix, length)` (hashbrown + ahash under a fixed seed),
//! plus a bitmap of the prefix lengths that have at least one route. A lookup probes the map once
//! per populated length, longest first, and stops at the first hit: O(number of distinct prefix
//! lengths in the table) probes, at most 33 for IPv4 and 129 for IPv6, typically a handful. Memory
//! is proportional to the capacity (a DIR-24-8 array would make IPv4 lookups a single access but
//! costs 64 MiB whatever the route count; a switch's route tables are small, so we chose this).
//!
//! IPv4 adds a direct first level (DIR-16, after DPDK's DIR-24-8 but 256 times smaller): one
//! slot per /16, 65536 slots of 8 bytes (512 KiB per table), holding the longest route of length
//! <= 16 that covers the slot (its length and its index among the short routes' values) and how
//! many routes longer than /16 lie inside it. A slot is plain integers and "no route" is zero, so
//! the level comes from the allocator already zeroed (calloc: untouched pages cost nothing until a
//! route lands in them) instead of being written slot by slot at start, and a lookup touches 8
//! bytes of it whatever the value type (a baseline route is 48 bytes). A lookup whose /16 holds
//! no longer route is one array access and one read of the short routes' values; otherwise it
//! probes the populated lengths above 16 and falls back to the slot's route. Inserting or
//! removing a route of length l <= 16 rewrites the 2^(16-l) slots it covers (removing one
//! re-probes the shorter lengths for each slot it was the best of: a default route's removal is
//! about a million probes, some milliseconds, on the worker that applies it); replacing a
//! route's value rewrites no slot.
//! As in [`crate::asic::table`], the map gets room for `2 * capacity` entries so that churn never
//! makes it reallocate: nothing allocates after `new`.
//!
//! Prefixes are in host byte order, most significant bit first (`10.0.0.0/8` is
//! `(0x0a00_0000, 8)`). A prefix with bits set beyond its length (`10.0.0.1/8`) is refused with
//! [`LpmError::HostBitsSet`] rather than silently masked, as `ip route` does: such a route in a
//! config is almost always a typo. Callers that want masking use [`LpmAddr::mask`] first.

use core::fmt::Debug;
use core::hash::Hash;

use ahash::RandomState;
use hashbrown::HashMap;

use crate::asic::table::{hasher_for, DEFAULT_SEED};

/// An address type [`Lpm`] can match: an unsigned integer, most significant bit first.
pub trait LpmAddr: Copy + Eq + Hash + Debug {
    /// Address width in bits (32 or 128).
    const BITS: u8;
    /// The address with every bit after the first `len` cleared (`len >= BITS`: unchanged).
    fn mask(self, len: u8) -> Self;
    /// The hash map's key for `prefix/len`: one machine word for IPv4 (one multiply to hash,
    /// one compare), the pair for IPv6.
    type Key: Copy + Eq + Hash + Debug;
    fn key(self, len: u8) -> Self::Key;
    /// The `(prefix, len)` of a key.
    fn unkey(k: Self::Key) -> (Self, u8);
    /// Whether [`Lpm`] keeps a direct table indexed by the top 16 bits (see the module doc).
    const DIR16: bool;
    /// The top 16 bits, as a slot index.
    fn top16(self) -> usize;
    /// The first address of slot `s` (its top 16 bits `s`, the rest 0).
    fn from_top16(s: usize) -> Self;
}

impl LpmAddr for u32 {
    const BITS: u8 = 32;
    #[inline]
    fn mask(self, len: u8) -> u32 {
        match len {
            0 => 0,
            l if l >= 32 => self,
            l => self & (u32::MAX << (32 - l)),
        }
    }
    type Key = u64;
    #[inline]
    fn key(self, len: u8) -> u64 {
        (self as u64) << 8 | len as u64
    }
    #[inline]
    fn unkey(k: u64) -> (u32, u8) {
        ((k >> 8) as u32, k as u8)
    }
    const DIR16: bool = true;
    #[inline]
    fn top16(self) -> usize {
        (self >> 16) as usize
    }
    #[inline]
    fn from_top16(s: usize) -> u32 {
        (s as u32) << 16
    }
}

impl LpmAddr for u128 {
    const BITS: u8 = 128;
    #[inline]
    fn mask(self, len: u8) -> u128 {
        match len {
            0 => 0,
            l if l >= 128 => self,
            l => self & (u128::MAX << (128 - l)),
        }
    }
    type Key = (u128, u8);
    #[inline]
    fn key(self, len: u8) -> (u128, u8) {
        (self, len)
    }
    #[inline]
    fn unkey(k: (u128, u8)) -> (u128, u8) {
        k
    }
    // IPv6 tables are prefixes under a few /32s: the top 16 bits would not tell routes apart.
    const DIR16: bool = false;
    #[inline]
    fn top16(self) -> usize {
        (self >> 112) as usize
    }
    #[inline]
    fn from_top16(s: usize) -> u128 {
        (s as u128) << 112
    }
}

/// Why an insert was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpmError {
    /// The table holds `capacity` routes and the prefix is new.
    Full,
    /// Prefix length greater than the address width.
    BadLength,
    /// The prefix has bits set beyond its length.
    HostBitsSet,
}

impl core::fmt::Display for LpmError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            LpmError::Full => "route table full",
            LpmError::BadLength => "prefix length longer than the address",
            LpmError::HostBitsSet => "prefix has host bits set",
        })
    }
}

impl std::error::Error for LpmError {}

/// Counters of an [`Lpm`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LpmStats {
    /// Lookups that matched a route.
    pub hits: u64,
    /// Lookups that matched none.
    pub misses: u64,
    /// Successful inserts (new routes and replacements).
    pub inserts: u64,
    /// Routes removed by `remove` or `clear`.
    pub deletes: u64,
    /// Inserts refused with [`LpmError::Full`].
    pub full_events: u64,
    /// Inserts refused with [`LpmError::BadLength`] or [`LpmError::HostBitsSet`].
    pub bad_prefixes: u64,
    /// Routes in the table now.
    pub entries: u64,
}

/// A longest-prefix-match table of at most `capacity` routes `prefix/len -> V`.
#[derive(Debug)]
pub struct Lpm<A: LpmAddr, V: Copy> {
    map: HashMap<A::Key, Route<V>, RandomState>,
    /// The values of the routes of length <= 16 (`A::DIR16`), by the index the slots hold.
    short: Vec<V>,
    /// Indexes in `short` of removed routes, for the next short route.
    free: Vec<u32>,
    /// Routes per prefix length.
    per_len: [u32; 129],
    /// Bit `l` set iff `per_len[l] > 0`.
    populated: [u64; 3],
    /// The DIR-16 first level (`A::DIR16`; empty otherwise), [`DIR_SLOTS`] slots of
    /// `[best, longer]`: `best` is 0 or `(len + 1) << 24 | index in short` of the longest route
    /// of length <= 16 covering the slot; `longer` counts the routes longer than /16 inside it.
    dir: Vec<[u32; 2]>,
    capacity: usize,
    stats: LpmStats,
}

/// Slots of the DIR-16 first level.
const DIR_SLOTS: usize = 1 << 16;

/// Routes of length <= 16 a DIR-16 table holds at most (every prefix of every length 0..=16).
const SHORT_MAX: usize = (1 << 17) - 1;

/// A route's value and, for a route of length <= 16 in a DIR-16 table, its index in
/// `Lpm::short` ([`NO_SHORT`] otherwise).
#[derive(Clone, Copy, Debug)]
struct Route<V> {
    v: V,
    short: u32,
}

const NO_SHORT: u32 = u32::MAX;

/// A first-level slot's `best` word for the route of length `len` at index `i` of `short`.
#[inline]
fn best_word(len: u8, i: u32) -> u32 {
    (len as u32 + 1) << 24 | i
}

/// The length of a `best` word's route (`None`: no route).
#[inline]
fn best_len(w: u32) -> Option<u8> {
    (w != 0).then(|| ((w >> 24) - 1) as u8)
}

/// The value of a `best` word's route.
#[inline(always)]
fn best_value<V>(short: &[V], w: u32) -> Option<&V> {
    if w == 0 {
        None
    } else {
        short.get((w & 0x00ff_ffff) as usize)
    }
}

/// IPv4 routes.
pub type Lpm4<V> = Lpm<u32, V>;
/// IPv6 routes.
pub type Lpm6<V> = Lpm<u128, V>;

impl<A: LpmAddr, V: Copy> Lpm<A, V> {
    /// A table of at most `capacity` routes, all memory allocated now (capacity 0: every insert
    /// is refused with `Full`).
    pub fn new(capacity: usize) -> Self {
        Lpm {
            map: HashMap::with_capacity_and_hasher(
                capacity.saturating_mul(2),
                hasher_for(DEFAULT_SEED),
            ),
            short: Vec::with_capacity(if A::DIR16 { capacity.min(SHORT_MAX) } else { 0 }),
            free: Vec::with_capacity(if A::DIR16 { capacity.min(SHORT_MAX) } else { 0 }),
            per_len: [0; 129],
            populated: [0; 3],
            // Zeroed by the allocator (no route anywhere), not written slot by slot.
            dir: if A::DIR16 {
                vec![[0u32; 2]; DIR_SLOTS]
            } else {
                Vec::new()
            },
            capacity,
            stats: LpmStats::default(),
        }
    }

    /// Add or replace the route `prefix/len -> v`; returns the replaced value.
    ///
    /// Refused (table unchanged, counted) with [`LpmError::BadLength`] when `len > A::BITS`, with
    /// [`LpmError::HostBitsSet`] when `prefix` has bits set after the first `len`, and with
    /// [`LpmError::Full`] when the prefix is new and the table holds `capacity` routes.
    pub fn insert(&mut self, prefix: A, len: u8, v: V) -> Result<Option<V>, LpmError> {
        if len > A::BITS {
            self.stats.bad_prefixes += 1;
            return Err(LpmError::BadLength);
        }
        if prefix.mask(len) != prefix {
            self.stats.bad_prefixes += 1;
            return Err(LpmError::HostBitsSet);
        }
        if let Some(old) = self.map.get_mut(&prefix.key(len)) {
            self.stats.inserts += 1;
            // The slots name the route by its index: a new value needs no slot rewritten.
            if let Some(s) = self.short.get_mut(old.short as usize) {
                *s = v;
            }
            return Ok(Some(core::mem::replace(&mut old.v, v)));
        }
        if self.map.len() >= self.capacity {
            self.stats.full_events += 1;
            return Err(LpmError::Full);
        }
        let short = if self.dir.is_empty() || len > 16 {
            NO_SHORT
        } else if let Some(i) = self.free.pop() {
            self.short[i as usize] = v;
            i
        } else {
            // At most `capacity` (and SHORT_MAX) routes: within the capacity reserved at `new`.
            self.short.push(v);
            (self.short.len() - 1) as u32
        };
        self.map.insert(prefix.key(len), Route { v, short });
        let l = len as usize;
        self.per_len[l] += 1;
        self.populated[l / 64] |= 1 << (l % 64);
        self.dir_insert(prefix, len, short);
        self.stats.inserts += 1;
        Ok(None)
    }

    /// The slots a route of length <= 16 covers.
    #[inline]
    fn dir_range(prefix: A, len: u8) -> core::ops::Range<usize> {
        let first = prefix.top16();
        first..first + (1 << (16 - len))
    }

    /// Record the new route `prefix/len` (index `short` in `self.short`) in the first level.
    fn dir_insert(&mut self, prefix: A, len: u8, short: u32) {
        if self.dir.is_empty() {
            return;
        }
        if len > 16 {
            if let Some(s) = self.dir.get_mut(prefix.top16()) {
                s[1] += 1;
            }
            return;
        }
        let range = Self::dir_range(prefix, len);
        for s in self.dir.get_mut(range).into_iter().flatten() {
            if best_len(s[0]).is_none_or(|l| l <= len) {
                s[0] = best_word(len, short);
            }
        }
    }

    /// Forget the removed route `prefix/len` in the first level: the slots it was the best
    /// route of get the next shorter covering route.
    fn dir_remove(&mut self, prefix: A, len: u8) {
        if self.dir.is_empty() {
            return;
        }
        if len > 16 {
            if let Some(s) = self.dir.get_mut(prefix.top16()) {
                s[1] = s[1].saturating_sub(1);
            }
            return;
        }
        for i in Self::dir_range(prefix, len) {
            if self.dir.get(i).and_then(|s| best_len(s[0])) != Some(len) {
                continue;
            }
            let best = probe_in(&self.map, &self.populated, A::from_top16(i), 0, len)
                .map_or(0, |(_, l, r)| best_word(l, r.short));
            if let Some(s) = self.dir.get_mut(i) {
                s[0] = best;
            }
        }
    }

    /// The longest route containing `addr` among the populated lengths in `lo..hi`, by hash
    /// probes, longest first.
    #[inline(never)]
    fn probe(&self, addr: A, lo: u8, hi: u8) -> Option<(A, u8, V)> {
        probe_in(&self.map, &self.populated, addr, lo, hi).map(|(p, l, r)| (p, l, r.v))
    }

    /// Remove the route `prefix/len` (exactly that prefix), returning its value; `None` when there
    /// is no such route (including an invalid length or prefix).
    pub fn remove(&mut self, prefix: A, len: u8) -> Option<V> {
        let r = self.map.remove(&prefix.key(len))?;
        let l = len as usize;
        self.per_len[l] = self.per_len[l].saturating_sub(1);
        if self.per_len[l] == 0 {
            self.populated[l / 64] &= !(1 << (l % 64));
        }
        self.dir_remove(prefix, len);
        if r.short != NO_SHORT {
            // No slot names it any more (dir_remove): the index is free.
            self.free.push(r.short);
        }
        self.stats.deletes += 1;
        Some(r.v)
    }

    /// The value of exactly the route `prefix/len`, without counting (control plane).
    #[inline]
    pub fn get(&self, prefix: A, len: u8) -> Option<V> {
        self.map.get(&prefix.key(len)).map(|r| r.v)
    }

    /// The value of the longest route containing `addr`, counting a hit or a miss.
    #[inline]
    pub fn lookup(&mut self, addr: A) -> Option<V> {
        self.lookup_ref(addr).copied()
    }

    /// As [`Lpm::lookup`], the value by reference: the fast path reads the route's fields where
    /// they are (the DIR-16 slot) instead of copying a `(prefix, len, value)` tuple through the
    /// stack, whose re-read stalls on store forwarding.
    #[inline(always)]
    pub fn lookup_ref(&mut self, addr: A) -> Option<&V> {
        let (map, populated, short) = (&self.map, &self.populated, &self.short);
        let found = match self.dir.get(addr.top16()) {
            Some(&[best, 0]) => best_value(short, best),
            Some(&[best, _]) => match probe_in(map, populated, addr, 17, u8::MAX) {
                Some((_, _, r)) => Some(&r.v),
                None => best_value(short, best),
            },
            None => probe_in(map, populated, addr, 0, u8::MAX).map(|(_, _, r)| &r.v),
        };
        if found.is_some() {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
        found
    }

    /// The longest route containing `addr` as `(prefix, len, value)`, counting a hit or a miss.
    #[inline]
    pub fn lookup_route(&mut self, addr: A) -> Option<(A, u8, V)> {
        let found = self.longest(addr);
        if found.is_some() {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
        }
        found
    }

    /// As [`lookup_route`](Self::lookup_route), without counting. Inlined: the usual answer is
    /// one DIR-16 slot, and a call returning the 16-byte `Option` through memory stalls its
    /// caller's read of it on store forwarding (a fifth of the baseline's ingress samples);
    /// the hash probes stay out of line.
    #[inline(always)]
    pub fn longest(&self, addr: A) -> Option<(A, u8, V)> {
        let Some(&[best, longer]) = self.dir.get(addr.top16()) else {
            return self.probe(addr, 0, u8::MAX);
        };
        if longer != 0 {
            if let Some(r) = self.probe(addr, 17, u8::MAX) {
                return Some(r);
            }
        }
        let l = best_len(best)?;
        best_value(&self.short, best).map(|&v| (addr.mask(l), l, v))
    }

    /// Routes in the table.
    #[inline]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// `true` when the table holds no route.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The most routes the table holds.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Remove every route (each counted in `deletes`); keeps all memory.
    pub fn clear(&mut self) {
        self.stats.deletes += self.map.len() as u64;
        self.map.clear();
        self.per_len = [0; 129];
        self.populated = [0; 3];
        self.short.clear();
        self.free.clear();
        self.dir.fill([0; 2]);
    }

    /// Every route as `(prefix, len, value)`, in hash order (deterministic for a given history).
    pub fn iter(&self) -> impl Iterator<Item = (A, u8, V)> + '_ {
        self.map.iter().map(|(&k, r)| {
            let (p, l) = A::unkey(k);
            (p, l, r.v)
        })
    }

    /// Counters, with `entries` the current number of routes.
    pub fn stats(&self) -> LpmStats {
        LpmStats {
            entries: self.map.len() as u64,
            ..self.stats
        }
    }
}

/// The longest route containing `addr` among the populated lengths in `lo..hi`, by hash probes,
/// longest first (a free function so that a caller can hold the result and count in the stats).
#[inline(never)]
fn probe_in<'a, A: LpmAddr, V>(
    map: &'a HashMap<A::Key, V, RandomState>,
    populated: &[u64; 3],
    addr: A,
    lo: u8,
    hi: u8,
) -> Option<(A, u8, &'a V)> {
    for w in (0..populated.len()).rev() {
        let mut bits = populated[w];
        while bits != 0 {
            let top = 63 - bits.leading_zeros();
            bits &= !(1u64 << top);
            let len = (w * 64) as u8 + top as u8;
            if len >= hi {
                continue;
            }
            if len < lo {
                return None;
            }
            let p = addr.mask(len);
            if let Some(v) = map.get(&p.key(len)) {
                return Some((p, len, v));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> u32 {
        u32::from_be_bytes([a, b, c, d])
    }

    #[test]
    fn longest_match_wins_and_default_route() {
        let mut t = Lpm4::<u16>::new(8);
        t.insert(v4(10, 0, 0, 0), 8, 1).unwrap();
        t.insert(v4(10, 1, 0, 0), 16, 2).unwrap();
        t.insert(v4(10, 1, 2, 3), 32, 3).unwrap();
        assert_eq!(t.lookup(v4(10, 9, 9, 9)), Some(1));
        assert_eq!(t.lookup(v4(10, 1, 9, 9)), Some(2));
        assert_eq!(t.lookup(v4(10, 1, 2, 3)), Some(3));
        assert_eq!(t.lookup(v4(11, 0, 0, 0)), None);
        t.insert(0, 0, 99).unwrap();
        assert_eq!(t.lookup(v4(11, 0, 0, 0)), Some(99));
        assert_eq!(
            t.lookup_route(v4(10, 1, 200, 1)),
            Some((v4(10, 1, 0, 0), 16, 2))
        );
        assert_eq!(t.insert(v4(10, 1, 0, 0), 16, 20), Ok(Some(2)));
        assert_eq!(t.remove(v4(10, 1, 0, 0), 16), Some(20));
        assert_eq!(t.remove(v4(10, 1, 0, 0), 16), None);
        assert_eq!(t.lookup(v4(10, 1, 9, 9)), Some(1));
        assert_eq!(t.get(v4(10, 0, 0, 0), 8), Some(1));
        let s = t.stats();
        assert_eq!((s.hits, s.misses, s.inserts, s.deletes), (6, 1, 5, 1));
        assert_eq!(s.entries, 3);
        let mut all: Vec<_> = t.iter().collect();
        all.sort();
        assert_eq!(
            all,
            vec![
                (0, 0, 99),
                (v4(10, 0, 0, 0), 8, 1),
                (v4(10, 1, 2, 3), 32, 3)
            ]
        );
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.lookup(v4(10, 1, 2, 3)), None);
        assert_eq!(t.stats().deletes, 4);
    }

    #[test]
    fn refusals_counted() {
        let mut t = Lpm4::<u8>::new(1);
        assert_eq!(t.insert(0, 33, 1), Err(LpmError::BadLength));
        assert_eq!(t.insert(v4(10, 0, 0, 1), 8, 1), Err(LpmError::HostBitsSet));
        t.insert(v4(10, 0, 0, 0), 8, 1).unwrap();
        assert_eq!(t.insert(v4(11, 0, 0, 0), 8, 1), Err(LpmError::Full));
        // Replacing an existing route in a full table works.
        assert_eq!(t.insert(v4(10, 0, 0, 0), 8, 2), Ok(Some(1)));
        assert_eq!(t.remove(0, 200), None);
        let s = t.stats();
        assert_eq!((s.bad_prefixes, s.full_events, s.inserts), (2, 1, 2));
        let mut z = Lpm6::<u8>::new(0);
        assert_eq!(z.insert(0, 0, 1), Err(LpmError::Full));
        assert_eq!(z.lookup(1), None);
    }

    #[test]
    fn ipv6_full_width() {
        let mut t = Lpm6::<u8>::new(4);
        let p: u128 = 0x2001_0db8 << 96;
        t.insert(p, 32, 1).unwrap();
        t.insert(p | 1, 128, 2).unwrap();
        t.insert(p | (1 << 64), 64, 3).unwrap();
        assert_eq!(t.insert(p | 1, 127, 0), Err(LpmError::HostBitsSet));
        assert_eq!(t.insert(p, 129, 0), Err(LpmError::BadLength));
        assert_eq!(t.lookup(p | 1), Some(2));
        assert_eq!(t.lookup(p | 2), Some(1));
        assert_eq!(t.lookup(p | (1 << 64) | 5), Some(3));
        assert_eq!(t.lookup(0), None);
        assert_eq!(u128::MAX.mask(1), 1 << 127);
        assert_eq!(u32::MAX.mask(31), u32::MAX - 1);
        assert_eq!(u32::MAX.mask(40), u32::MAX);
    }

    fn check_against_model<A: LpmAddr + Ord>(
        ops: Vec<(u8, u8, A, u8)>,
        addrs: Vec<A>,
        cap: usize,
    ) -> Result<(), TestCaseError> {
        let mut t = Lpm::<A, u8>::new(cap);
        let size = t.map.allocation_size();
        let short = (t.short.capacity(), t.free.capacity());
        let mut model: Vec<(A, u8, u8)> = Vec::new();
        for (kind, len, addr, v) in ops {
            let len = len % (A::BITS + 1);
            let p = addr.mask(len);
            if kind % 4 == 0 {
                let want = model
                    .iter()
                    .position(|e| e.0 == p && e.1 == len)
                    .map(|i| model.remove(i).2);
                prop_assert_eq!(t.remove(p, len), want);
            } else {
                let got = t.insert(p, len, v);
                if let Some(e) = model.iter_mut().find(|e| e.0 == p && e.1 == len) {
                    prop_assert_eq!(got, Ok(Some(e.2)));
                    e.2 = v;
                } else if model.len() < cap {
                    prop_assert_eq!(got, Ok(None));
                    model.push((p, len, v));
                } else {
                    prop_assert_eq!(got, Err(LpmError::Full));
                }
            }
            prop_assert_eq!(t.len(), model.len());
            prop_assert_eq!(t.map.allocation_size(), size);
            prop_assert_eq!((t.short.capacity(), t.free.capacity()), short);
            for &a in addrs.iter().chain(core::iter::once(&addr)) {
                let want = model
                    .iter()
                    .filter(|e| a.mask(e.1) == e.0)
                    .max_by_key(|e| e.1)
                    .map(|e| (e.0, e.1, e.2));
                prop_assert_eq!(t.lookup_route(a), want);
                prop_assert_eq!(t.lookup(a), want.map(|w| w.2));
            }
        }
        Ok(())
    }

    /// Addresses clustered around a few bases so that prefixes overlap.
    fn v4_addr() -> impl Strategy<Value = u32> {
        (0usize..3, any::<u32>(), 0u32..32).prop_map(|(b, r, k)| {
            let base = [0x0a00_0000u32, 0x0a01_0000, 0xc0a8_0100][b];
            base ^ (r >> k)
        })
    }

    fn v6_addr() -> impl Strategy<Value = u128> {
        (0usize..3, any::<u128>(), 0u32..128).prop_map(|(b, r, k)| {
            let base = [0x2001_0db8u128 << 96, 0x2001_0db9 << 96, 0xfe80 << 112][b];
            base ^ (r >> k)
        })
    }

    proptest! {
        #[test]
        fn ipv4_matches_linear_scan(
            ops in proptest::collection::vec((any::<u8>(), any::<u8>(), v4_addr(), any::<u8>()), 1..120),
            addrs in proptest::collection::vec(v4_addr(), 1..10),
            cap in 0usize..40,
        ) {
            check_against_model(ops, addrs, cap)?;
        }

        #[test]
        fn ipv6_matches_linear_scan(
            ops in proptest::collection::vec((any::<u8>(), any::<u8>(), v6_addr(), any::<u8>()), 1..120),
            addrs in proptest::collection::vec(v6_addr(), 1..10),
            cap in 0usize..40,
        ) {
            check_against_model(ops, addrs, cap)?;
        }
    }
}
