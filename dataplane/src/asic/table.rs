//! Exact-match match-action tables with bounded capacity, hit/miss counters and idle timeouts.
//!
//! Used for THEMIS's QP_field, CNP_Store and setCNP tables, Reflex's Flow State Table, Themis's
//! PathMap, and any other `key -> action data` lookup.
//!
//! # Implementation
//!
//! - The entries live in a `hashbrown::HashMap<K, (V, slot)>` hashed with `ahash` under fixed seeds
//!   (or a seed from the config, [`ExactTable::with_seed`]), so lookups, listing and eviction are
//!   the same on every run.
//! - The map is created with room for `2 * capacity` entries. `len <= capacity` is enforced by the
//!   table, but that alone does not stop hashbrown from growing: under insert/remove churn its
//!   tombstones use up the growth budget and it then rehashes, *in place* only when the live
//!   entries fill at most half of the buckets' capacity, and otherwise into a bigger allocation.
//!   With twice the room it always rehashes in place, so the table never allocates after `new`.
//! - A preallocated slab of `capacity` nodes, one per entry, carries two intrusive doubly-linked
//!   lists: insertion order (for [`WhenFull::EvictOldest`] and listing) and last-hit order (for
//!   idle timeouts: the least recently hit entry is at the front, so [`ExactTable::expire`] looks
//!   only at entries that are due). A table without an idle timeout keeps neither that list
//!   nor its lookups' hit times: a lookup then reads the map's bucket and writes nothing else
//!   but its hit counter (eviction, [`WhenFull::EvictOldest`], is by insertion order either way).
//!
//! Cost: `insert`, `lookup`, `lookup_mut`, `peek`, `remove` are one hash probe plus O(1) list
//! updates; `expire` is O(max); `clear` is O(capacity); `iter` is one probe per entry.
//!
//! The clock is the engine's ([`Nanos`]); idle timeouts assume `now` does not go backwards. If it
//! does, entries can expire later than due, never earlier.

use core::hash::Hash;

use ahash::RandomState;
use hashbrown::HashMap;

use crate::time::Nanos;

/// Seeds used by [`ExactTable::new`]: fixed, so iteration and eviction are deterministic.
pub const DEFAULT_SEED: u64 = 0x6c6f_6e67_6861_756c; // "longhaul"

const NIL: usize = usize::MAX;
/// Insertion-order list.
const ORDER: usize = 0;
/// Last-hit-order list.
const IDLE: usize = 1;

/// The ahash state for a seed (shared with [`crate::asic::lpm`]).
pub(crate) fn hasher_for(seed: u64) -> RandomState {
    RandomState::with_seeds(
        seed,
        seed ^ 0x243f_6a88_85a3_08d3,
        seed.rotate_left(17) ^ 0x1319_8a2e_0370_7344,
        seed.rotate_left(41) ^ 0xa409_3822_299f_31d0,
    )
}

/// What an insert of a new key does when the table is full.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WhenFull {
    /// Refuse the insert ([`TableFull`], counted in `full_events`).
    #[default]
    Refuse,
    /// Evict the entry inserted longest ago (counted in `evictions`) and insert.
    EvictOldest,
}

/// Behaviour of an [`ExactTable`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableConfig {
    /// What happens on insert of a new key into a full table.
    pub when_full: WhenFull,
    /// Entries not hit (looked up or inserted) for this long are removed by
    /// [`ExactTable::expire`]. `None`: entries never expire.
    pub idle_timeout: Option<Nanos>,
}

/// The insert was refused: the table is full and configured to [`WhenFull::Refuse`] (or has
/// capacity 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableFull;

impl core::fmt::Display for TableFull {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("table full")
    }
}

impl std::error::Error for TableFull {}

/// What a successful [`ExactTable::insert_evict`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted<K, V> {
    /// A new entry; nothing was displaced.
    New,
    /// The key was present; this is its old value.
    Replaced(V),
    /// A new entry, for which this oldest entry was evicted.
    Evicted(K, V),
}

/// Counters of an [`ExactTable`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    /// `lookup`/`lookup_mut` that found the key.
    pub hits: u64,
    /// `lookup`/`lookup_mut` that did not.
    pub misses: u64,
    /// Successful inserts (new entries and replacements).
    pub inserts: u64,
    /// Entries removed by `remove` or `clear`.
    pub deletes: u64,
    /// Inserts refused because the table was full.
    pub full_events: u64,
    /// Entries evicted to make room ([`WhenFull::EvictOldest`]).
    pub evictions: u64,
    /// Entries removed by `expire`.
    pub expirations: u64,
    /// Entries in the table now.
    pub entries: u64,
}

#[derive(Debug)]
struct Slot<V> {
    value: V,
    node: usize,
}

#[derive(Clone, Copy, Debug)]
struct Node<K> {
    key: Option<K>,
    prev: [usize; 2],
    next: [usize; 2],
    last_hit: Nanos,
}

/// The slab of nodes and its two lists (and the free list, threaded through `next[ORDER]`).
#[derive(Debug)]
struct Links<K> {
    nodes: Box<[Node<K>]>,
    head: [usize; 2],
    tail: [usize; 2],
    free: usize,
}

impl<K: Copy> Links<K> {
    fn new(capacity: usize) -> Self {
        let mut l = Links {
            nodes: (0..capacity)
                .map(|_| Node {
                    key: None,
                    prev: [NIL; 2],
                    next: [NIL; 2],
                    last_hit: 0,
                })
                .collect(),
            head: [NIL; 2],
            tail: [NIL; 2],
            free: NIL,
        };
        l.reset();
        l
    }

    fn reset(&mut self) {
        let n = self.nodes.len();
        for (i, node) in self.nodes.iter_mut().enumerate() {
            node.key = None;
            node.prev = [NIL; 2];
            node.next = [if i + 1 < n { i + 1 } else { NIL }, NIL];
        }
        self.head = [NIL; 2];
        self.tail = [NIL; 2];
        self.free = if n > 0 { 0 } else { NIL };
    }

    fn push_back(&mut self, list: usize, n: usize) {
        let t = self.tail[list];
        self.nodes[n].prev[list] = t;
        self.nodes[n].next[list] = NIL;
        if t == NIL {
            self.head[list] = n;
        } else {
            self.nodes[t].next[list] = n;
        }
        self.tail[list] = n;
    }

    fn unlink(&mut self, list: usize, n: usize) {
        let (p, x) = (self.nodes[n].prev[list], self.nodes[n].next[list]);
        if p == NIL {
            self.head[list] = x;
        } else {
            self.nodes[p].next[list] = x;
        }
        if x == NIL {
            self.tail[list] = p;
        } else {
            self.nodes[x].prev[list] = p;
        }
        self.nodes[n].prev[list] = NIL;
        self.nodes[n].next[list] = NIL;
    }

    fn move_to_back(&mut self, list: usize, n: usize) {
        if self.tail[list] != n {
            self.unlink(list, n);
            self.push_back(list, n);
        }
    }

    /// A lookup's hit at `now`. The hit time and the last-hit list serve `expire` only, so a
    /// table without an idle timeout (`ordered` false) records neither: the list's four pointer
    /// writes and the time's store into the entry's node (a cache line the lookup does not
    /// otherwise touch), on the fast path of every such table (the spraying ToR's
    /// `spray_qps`). Its [`ExactTable::last_hit`] is then the time of the last insert.
    #[inline(always)]
    fn touch(&mut self, n: usize, now: Nanos, ordered: bool) {
        if ordered {
            self.nodes[n].last_hit = now;
            self.move_to_back(IDLE, n);
        }
    }

    /// An insert or replace of the entry at `now`: a hit for the idle timeout, timed or not.
    #[inline]
    fn stamp(&mut self, n: usize, now: Nanos, ordered: bool) {
        self.nodes[n].last_hit = now;
        if ordered {
            self.move_to_back(IDLE, n);
        }
    }

    /// A node for `key`, at the back of both lists; `None` when the slab is exhausted.
    fn acquire(&mut self, key: K, now: Nanos) -> Option<usize> {
        let n = self.free;
        if n == NIL {
            return None;
        }
        self.free = self.nodes[n].next[ORDER];
        self.nodes[n].key = Some(key);
        self.nodes[n].last_hit = now;
        self.push_back(ORDER, n);
        self.push_back(IDLE, n);
        Some(n)
    }

    fn release(&mut self, n: usize) {
        self.unlink(ORDER, n);
        self.unlink(IDLE, n);
        self.nodes[n].key = None;
        self.nodes[n].next[ORDER] = self.free;
        self.free = n;
    }
}

/// An exact-match table `K -> V` holding at most `capacity` entries.
#[derive(Debug)]
pub struct ExactTable<K: Eq + Hash + Copy, V> {
    map: HashMap<K, Slot<V>, RandomState>,
    links: Links<K>,
    capacity: usize,
    cfg: TableConfig,
    stats: TableStats,
}

impl<K: Eq + Hash + Copy, V> ExactTable<K, V> {
    /// A table of at most `capacity` entries, all memory allocated now, hashed with
    /// [`DEFAULT_SEED`]. Capacity 0 is allowed: every insert is then refused.
    pub fn new(capacity: usize, cfg: TableConfig) -> Self {
        Self::with_seed(capacity, cfg, DEFAULT_SEED)
    }

    /// As [`new`](Self::new) with the hash seeded by `seed` (e.g. from the config, so that the
    /// hash layout is not public while each run stays deterministic).
    pub fn with_seed(capacity: usize, cfg: TableConfig, seed: u64) -> Self {
        ExactTable {
            map: HashMap::with_capacity_and_hasher(capacity.saturating_mul(2), hasher_for(seed)),
            links: Links::new(capacity),
            capacity,
            cfg,
            stats: TableStats::default(),
        }
    }

    /// The configuration.
    #[inline]
    pub fn config(&self) -> &TableConfig {
        &self.cfg
    }

    /// Insert or replace `k -> v` at `now`, which also counts as a hit for the idle timeout.
    ///
    /// Replacing an existing key always succeeds and moves the entry to the newest position of
    /// the insertion order. A new key in a full table is refused with [`TableFull`] (counted in
    /// `full_events`) under [`WhenFull::Refuse`]; under [`WhenFull::EvictOldest`] the entry
    /// inserted longest ago is evicted first (counted in `evictions`, its value dropped; use
    /// [`insert_evict`](Self::insert_evict) to get it). Returns the replaced value, if any.
    #[inline]
    pub fn insert(&mut self, k: K, v: V, now: Nanos) -> Result<Option<V>, TableFull> {
        match self.insert_evict(k, v, now)? {
            Inserted::Replaced(old) => Ok(Some(old)),
            Inserted::New | Inserted::Evicted(..) => Ok(None),
        }
    }

    /// As [`insert`](Self::insert), reporting what was displaced, including an evicted entry.
    pub fn insert_evict(&mut self, k: K, v: V, now: Nanos) -> Result<Inserted<K, V>, TableFull> {
        if let Some(slot) = self.map.get_mut(&k) {
            let old = core::mem::replace(&mut slot.value, v);
            let n = slot.node;
            self.links.move_to_back(ORDER, n);
            self.links.stamp(n, now, self.cfg.idle_timeout.is_some());
            self.stats.inserts += 1;
            return Ok(Inserted::Replaced(old));
        }
        let mut evicted = None;
        if self.map.len() >= self.capacity {
            let oldest = self.links.head[ORDER];
            if self.cfg.when_full == WhenFull::Refuse || oldest == NIL {
                self.stats.full_events += 1;
                return Err(TableFull);
            }
            if let Some(key) = self.links.nodes[oldest].key {
                if let Some(slot) = self.map.remove(&key) {
                    evicted = Some((key, slot.value));
                }
            }
            self.links.release(oldest);
            self.stats.evictions += 1;
        }
        let Some(n) = self.links.acquire(k, now) else {
            // Unreachable while len <= capacity == slab size; refuse rather than grow.
            self.stats.full_events += 1;
            return Err(TableFull);
        };
        self.map.insert(k, Slot { value: v, node: n });
        self.stats.inserts += 1;
        Ok(match evicted {
            Some((ek, ev)) => Inserted::Evicted(ek, ev),
            None => Inserted::New,
        })
    }

    /// The value for `k`, counting a hit or a miss; with an idle timeout, a hit refreshes the
    /// entry's last-hit time to `now`. Entries past their idle timeout still match until
    /// `expire` removes them (as on an ASIC, where ageing is a background sweep).
    #[inline]
    pub fn lookup(&mut self, k: &K, now: Nanos) -> Option<&V> {
        let ordered = self.cfg.idle_timeout.is_some();
        match self.map.get(k) {
            Some(slot) => {
                self.stats.hits += 1;
                self.links.touch(slot.node, now, ordered);
                Some(&slot.value)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// As [`lookup`](Self::lookup), with the value writable.
    #[inline]
    pub fn lookup_mut(&mut self, k: &K, now: Nanos) -> Option<&mut V> {
        let ordered = self.cfg.idle_timeout.is_some();
        match self.map.get_mut(k) {
            Some(slot) => {
                self.stats.hits += 1;
                self.links.touch(slot.node, now, ordered);
                Some(&mut slot.value)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// As [`lookup`](Self::lookup) (the same counting and refresh), giving the entry's slot
    /// instead of its value: the index of its node, `0..capacity`, which stays the entry's
    /// while it lives and is reused after it is removed. For a caller that keeps values of its
    /// own by slot and looks the same key up again soon ([`hit_slot`](Self::hit_slot)):
    /// THEMIS's CNP_Store, once per recirculation pass of a throttled packet.
    #[inline]
    pub fn lookup_slot(&mut self, k: &K, now: Nanos) -> Option<usize> {
        let ordered = self.cfg.idle_timeout.is_some();
        match self.map.get(k) {
            Some(slot) => {
                self.stats.hits += 1;
                let n = slot.node;
                self.links.touch(n, now, ordered);
                Some(n)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// A lookup of `k` through a slot an earlier [`lookup_slot`](Self::lookup_slot) gave,
    /// without hashing. When `slot` holds `k` it is the entry a lookup by key finds (a key has
    /// one node, and a node freed by `remove`, `expire`, eviction or `clear` holds no key), so
    /// the hit is counted and refreshed as [`lookup`](Self::lookup) counts it, and `true` is
    /// returned. Otherwise (the entry was removed since, its slot reused, or `slot` is out of
    /// range) `false`, nothing counted: the caller looks `k` up by key, which counts the hit or
    /// the miss.
    #[inline]
    pub fn hit_slot(&mut self, slot: usize, k: &K, now: Nanos) -> bool {
        if self.links.nodes.get(slot).and_then(|n| n.key.as_ref()) != Some(k) {
            return false;
        }
        self.stats.hits += 1;
        self.links.touch(slot, now, self.cfg.idle_timeout.is_some());
        true
    }

    /// The slot of `k` (as [`lookup_slot`](Self::lookup_slot) gives it) without counting or
    /// refreshing anything (control plane, tests).
    #[inline]
    pub fn peek_slot(&self, k: &K) -> Option<usize> {
        self.map.get(k).map(|s| s.node)
    }

    /// A lookup answered without probing when the table is empty: `true` (a miss, counted as
    /// [`lookup`](Self::lookup) counts it) when it holds no entry, `false` (nothing counted)
    /// otherwise. For a caller that can skip building the key when every lookup must miss.
    #[inline]
    pub fn miss_if_empty(&mut self) -> bool {
        if !self.map.is_empty() {
            return false;
        }
        self.stats.misses += 1;
        true
    }

    /// The value for `k` without counting or refreshing anything (control plane, tests).
    #[inline]
    pub fn peek(&self, k: &K) -> Option<&V> {
        self.map.get(k).map(|s| &s.value)
    }

    /// As [`peek`](Self::peek), writable; does not count or refresh.
    #[inline]
    pub fn peek_mut(&mut self, k: &K) -> Option<&mut V> {
        self.map.get_mut(k).map(|s| &mut s.value)
    }

    /// When `k` was last hit: inserted, replaced or (with an idle timeout) looked up. A table
    /// without an idle timeout does not record its lookups' hits (nothing reads them): there
    /// this is the time of the last insert or replace.
    #[inline]
    pub fn last_hit(&self, k: &K) -> Option<Nanos> {
        self.map.get(k).map(|s| self.links.nodes[s.node].last_hit)
    }

    /// Remove `k`, returning its value (counted in `deletes`); `None` when absent.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        let slot = self.map.remove(k)?;
        self.links.release(slot.node);
        self.stats.deletes += 1;
        Some(slot.value)
    }

    /// Remove up to `max` entries that have not been hit for at least the idle timeout
    /// (`now - last_hit >= idle_timeout`), least recently hit first, handing each to
    /// `on_expired`. Returns how many were removed (counted in `expirations`). Work is O(max):
    /// call it every loop iteration with a small `max` to age a large table gradually. Without an
    /// idle timeout it does nothing.
    pub fn expire(&mut self, now: Nanos, max: usize, mut on_expired: impl FnMut(K, V)) -> usize {
        let Some(timeout) = self.cfg.idle_timeout else {
            return 0;
        };
        let mut done = 0;
        while done < max {
            let n = self.links.head[IDLE];
            if n == NIL {
                break;
            }
            let node = self.links.nodes[n];
            if now.saturating_sub(node.last_hit) < timeout {
                break;
            }
            let value = node
                .key
                .and_then(|k| self.map.remove(&k).map(|s| (k, s.value)));
            self.links.release(n);
            if let Some((k, v)) = value {
                self.stats.expirations += 1;
                done += 1;
                on_expired(k, v);
            }
        }
        done
    }

    /// Entries in the table.
    #[inline]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// `true` when the table holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The most entries the table holds.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Remove every entry (each counted in `deletes`); keeps all memory.
    pub fn clear(&mut self) {
        self.stats.deletes += self.map.len() as u64;
        self.map.clear();
        self.links.reset();
    }

    /// The entries in insertion order, oldest first (for the control plane's listing).
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> + '_ {
        let mut cur = self.links.head[ORDER];
        core::iter::from_fn(move || {
            while cur != NIL {
                let node = &self.links.nodes[cur];
                cur = node.next[ORDER];
                if let Some(k) = node.key {
                    if let Some(s) = self.map.get(&k) {
                        return Some((k, &s.value));
                    }
                }
            }
            None
        })
    }

    /// Counters, with `entries` the current length.
    pub fn stats(&self) -> TableStats {
        TableStats {
            entries: self.map.len() as u64,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn table(cap: usize, when_full: WhenFull, idle: Option<Nanos>) -> ExactTable<u32, u64> {
        ExactTable::new(
            cap,
            TableConfig {
                when_full,
                idle_timeout: idle,
            },
        )
    }

    #[test]
    fn insert_lookup_remove_counts() {
        let mut t = table(4, WhenFull::Refuse, None);
        assert_eq!(t.insert(1, 10, 0), Ok(None));
        assert_eq!(t.insert(2, 20, 0), Ok(None));
        assert_eq!(t.insert(1, 11, 0), Ok(Some(10)));
        assert_eq!(t.lookup(&1, 5), Some(&11));
        assert_eq!(t.lookup(&3, 5), None);
        *t.lookup_mut(&2, 6).unwrap() += 1;
        assert_eq!(t.peek(&2), Some(&21));
        assert_eq!(t.lookup_mut(&9, 6), None);
        // No idle timeout: lookups do not record their hit time, inserts do.
        assert_eq!(t.last_hit(&2), Some(0));
        assert_eq!(t.last_hit(&1), Some(0));
        assert_eq!(t.remove(&2), Some(21));
        assert_eq!(t.remove(&2), None);
        assert_eq!(t.len(), 1);
        let s = t.stats();
        assert_eq!(
            (s.hits, s.misses, s.inserts, s.deletes, s.entries),
            (2, 2, 3, 1, 1)
        );
        // A replace records its time.
        t.insert(1, 12, 7).unwrap();
        assert_eq!(t.last_hit(&1), Some(7));
    }

    #[test]
    fn refuse_when_full() {
        let mut t = table(2, WhenFull::Refuse, None);
        t.insert(1, 1, 0).unwrap();
        t.insert(2, 2, 0).unwrap();
        assert_eq!(t.insert(3, 3, 0), Err(TableFull));
        assert_eq!(t.insert(3, 3, 0), Err(TableFull));
        // Replacing an existing key in a full table works.
        assert_eq!(t.insert(2, 22, 0), Ok(Some(2)));
        assert_eq!(t.stats().full_events, 2);
        assert_eq!(t.peek(&3), None);
        t.remove(&1);
        assert_eq!(t.insert(3, 3, 0), Ok(None));

        let mut z = table(0, WhenFull::EvictOldest, None);
        assert_eq!(z.insert(1, 1, 0), Err(TableFull));
        assert_eq!(z.stats().full_events, 1);
        assert_eq!(z.iter().count(), 0);
    }

    #[test]
    fn evict_oldest_by_insertion_order() {
        let mut t = table(3, WhenFull::EvictOldest, None);
        for k in 1..=3 {
            t.insert(k, k as u64, 0).unwrap();
        }
        // Lookups do not change insertion order; a replace does.
        t.lookup(&1, 1);
        t.insert(2, 20, 1).unwrap();
        assert_eq!(t.insert_evict(4, 4, 2), Ok(Inserted::Evicted(1, 1)));
        assert_eq!(t.insert_evict(5, 5, 2), Ok(Inserted::Evicted(3, 3)));
        assert_eq!(t.insert(6, 6, 2), Ok(None));
        assert_eq!(
            t.iter().map(|(k, v)| (k, *v)).collect::<Vec<_>>(),
            vec![(4, 4), (5, 5), (6, 6)]
        );
        assert_eq!(t.stats().evictions, 3);
        assert_eq!(t.stats().full_events, 0);
        assert_eq!(t.insert_evict(6, 60, 3), Ok(Inserted::Replaced(6)));
        t.remove(&5);
        assert_eq!(t.insert_evict(7, 7, 3), Ok(Inserted::New));
    }

    #[test]
    fn idle_timeout_expiry_bounded_and_refreshed_by_hits() {
        let mut t = table(8, WhenFull::Refuse, Some(100));
        for k in 0..5 {
            t.insert(k, k as u64, k as u64 * 10).unwrap();
        }
        // Entry 0 is refreshed at 50.
        t.lookup(&0, 50);
        assert_eq!(t.peek(&0), Some(&0));
        let mut out = Vec::new();
        // At 125: idle >= 100 are 1 (10), 2 (20); bounded to 1 per call.
        assert_eq!(t.expire(125, 1, |k, v| out.push((k, v))), 1);
        assert_eq!(t.expire(125, 10, |k, v| out.push((k, v))), 1);
        assert_eq!(t.expire(125, 10, |k, v| out.push((k, v))), 0);
        assert_eq!(out, vec![(1, 1), (2, 2)]);
        // peek does not refresh: 3 (30) and 4 (40) expire at 140, 0 (50) at 150.
        t.peek(&3);
        assert_eq!(t.expire(149, 10, |k, _| out.push((k, 0))), 2);
        assert_eq!(t.expire(150, 10, |k, _| out.push((k, 0))), 1);
        assert!(t.is_empty());
        assert_eq!(t.stats().expirations, 5);
        assert_eq!(t.stats().deletes, 0);
        // Time going backwards never expires early.
        t.insert(9, 9, 1000).unwrap();
        assert_eq!(t.expire(500, 10, |_, _| {}), 0);

        let mut never = table(2, WhenFull::Refuse, None);
        never.insert(1, 1, 0).unwrap();
        assert_eq!(never.expire(u64::MAX, 10, |_, _| {}), 0);
    }

    #[test]
    fn clear_keeps_memory_and_counts() {
        let mut t = table(3, WhenFull::Refuse, Some(5));
        let cap = t.map.allocation_size();
        for k in 0..3 {
            t.insert(k, 0, 0).unwrap();
        }
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.stats().deletes, 3);
        assert_eq!(t.map.allocation_size(), cap);
        for k in 10..13 {
            t.insert(k, 0, 0).unwrap();
        }
        assert_eq!(t.insert(20, 0, 0), Err(TableFull));
        assert_eq!(t.expire(5, 10, |_, _| {}), 3);
    }

    #[test]
    fn churn_at_full_capacity_never_grows_the_map() {
        for cap in [1usize, 3, 7, 8, 28, 100, 1000] {
            let mut t = table(cap, WhenFull::EvictOldest, Some(10));
            let map_cap = t.map.allocation_size();
            let mut k = 0u32;
            for round in 0..20 * cap as u64 + 50 {
                t.insert(k, round, round).unwrap();
                k = k.wrapping_mul(2_654_435_761).wrapping_add(1);
                if round % 3 == 0 {
                    let victim = t.iter().next().map(|(k, _)| k);
                    if let Some(v) = victim {
                        t.remove(&v);
                    }
                }
                if round % 7 == 0 {
                    t.expire(round, 2, |_, _| {});
                }
                assert!(t.len() <= cap);
                assert_eq!(t.map.allocation_size(), map_cap, "cap {cap} round {round}");
            }
        }
    }

    /// Why the map gets twice the room: sized for exactly `capacity`, hashbrown reallocates under
    /// churn at full occupancy even though the length never exceeds `capacity`.
    #[test]
    fn exact_sized_hashbrown_would_grow_under_churn() {
        let cap = 100;
        let mut m: HashMap<u32, u32, RandomState> =
            HashMap::with_capacity_and_hasher(cap, hasher_for(DEFAULT_SEED));
        let size = m.allocation_size();
        let mut grew = false;
        for k in 0..cap as u32 {
            m.insert(k, k);
        }
        for k in cap as u32..100_000 {
            m.remove(&(k - cap as u32));
            m.insert(k, k);
            grew |= m.allocation_size() != size;
        }
        assert!(m.len() <= cap);
        assert!(grew);
    }

    #[test]
    fn deterministic_listing_across_instances() {
        let build = || {
            let mut t = ExactTable::<(u32, u16), u8>::with_seed(64, TableConfig::default(), 7);
            for i in 0..50u32 {
                t.insert((i * 7919, i as u16), i as u8, 0).unwrap();
            }
            t.iter().map(|(k, v)| (k, *v)).collect::<Vec<_>>()
        };
        assert_eq!(build(), build());
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u16),
        Lookup(u8),
        /// A lookup through a slot (`hit_slot`), by key when the slot does not hold the key.
        SlotLookup(u8, u8),
        Remove(u8),
        Expire(u8),
        Advance(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..24, any::<u16>()).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => (0u8..24).prop_map(Op::Lookup),
            3 => (0u8..24, 0u8..12).prop_map(|(k, s)| Op::SlotLookup(k, s)),
            1 => (0u8..24).prop_map(Op::Remove),
            1 => (0u8..4).prop_map(Op::Expire),
            2 => (0u8..40).prop_map(Op::Advance),
        ]
    }

    /// Reference model: (key, value, insert_seq, touch_seq, last_hit).
    type Model = Vec<(u8, u16, u64, u64, Nanos)>;

    proptest! {
        #[test]
        fn matches_reference_model(
            ops in proptest::collection::vec(op(), 1..300),
            cap in 0usize..10,
            evict in any::<bool>(),
            timed in any::<bool>(),
        ) {
            let when_full = if evict { WhenFull::EvictOldest } else { WhenFull::Refuse };
            let timeout = 50;
            // Untimed: hits neither record `last_hit` nor reorder the (unused) last-hit list.
            let mut t: ExactTable<u8, u16> = ExactTable::new(
                cap,
                TableConfig { when_full, idle_timeout: timed.then_some(timeout) },
            );
            let map_cap = t.map.allocation_size();
            let mut m: Model = Vec::new();
            let mut seq = 0u64;
            let mut now: Nanos = 0;
            for o in ops {
                seq += 1;
                match o {
                    Op::Insert(k, v) => {
                        let got = t.insert_evict(k, v, now);
                        if let Some(e) = m.iter_mut().find(|e| e.0 == k) {
                            let old = e.1;
                            *e = (k, v, seq, seq, now);
                            prop_assert_eq!(got, Ok(Inserted::Replaced(old)));
                        } else if m.len() < cap {
                            m.push((k, v, seq, seq, now));
                            prop_assert_eq!(got, Ok(Inserted::New));
                        } else if evict && cap > 0 {
                            let (i, _) = m.iter().enumerate().min_by_key(|(_, e)| e.2).unwrap();
                            let old = m.remove(i);
                            m.push((k, v, seq, seq, now));
                            prop_assert_eq!(got, Ok(Inserted::Evicted(old.0, old.1)));
                        } else {
                            prop_assert_eq!(got, Err(TableFull));
                        }
                    }
                    Op::Lookup(k) => {
                        let got = t.lookup(&k, now).copied();
                        // Untimed: the hit time is not recorded (last_hit stays the insert's).
                        let want = m.iter_mut().find(|e| e.0 == k).map(|e| {
                            e.3 = seq;
                            if timed {
                                e.4 = now;
                            }
                            e.1
                        });
                        prop_assert_eq!(got, want);
                    }
                    Op::SlotLookup(k, s) => {
                        let s = s as usize;
                        // The slot of a key is the one `lookup_slot` gives, and only that slot
                        // answers for it.
                        let holds = t.peek_slot(&k) == Some(s);
                        let before = t.stats();
                        let hit = t.hit_slot(s, &k, now);
                        prop_assert_eq!(hit, holds);
                        let got = if hit {
                            t.peek(&k).copied()
                        } else {
                            let n = t.lookup_slot(&k, now);
                            prop_assert_eq!(n, t.peek_slot(&k));
                            n.and_then(|_| t.peek(&k).copied())
                        };
                        // Counted once, as one lookup.
                        let after = t.stats();
                        prop_assert_eq!(after.hits + after.misses, before.hits + before.misses + 1);
                        prop_assert_eq!(after.hits - before.hits, u64::from(got.is_some()));
                        let want = m.iter_mut().find(|e| e.0 == k).map(|e| {
                            e.3 = seq;
                            if timed {
                                e.4 = now;
                            }
                            e.1
                        });
                        prop_assert_eq!(got, want);
                    }
                    Op::Remove(k) => {
                        let want = m.iter().position(|e| e.0 == k).map(|i| m.remove(i).1);
                        prop_assert_eq!(t.remove(&k), want);
                    }
                    Op::Expire(max) => {
                        let mut got = Vec::new();
                        let n = t.expire(now, max as usize, |k, v| got.push((k, v)));
                        let mut by_touch = m.clone();
                        by_touch.sort_by_key(|e| e.3);
                        let want: Vec<(u8, u16)> = by_touch
                            .iter()
                            .take_while(|e| timed && now - e.4 >= timeout)
                            .take(max as usize)
                            .map(|e| (e.0, e.1))
                            .collect();
                        m.retain(|e| !want.iter().any(|w| w.0 == e.0));
                        prop_assert_eq!(n, want.len());
                        prop_assert_eq!(got, want);
                    }
                    Op::Advance(dt) => now += dt as Nanos,
                }
                prop_assert_eq!(t.len(), m.len());
                prop_assert!(t.len() <= cap);
                prop_assert_eq!(t.map.allocation_size(), map_cap);
                let mut by_insert = m.clone();
                by_insert.sort_by_key(|e| e.2);
                let listed: Vec<(u8, u16)> = t.iter().map(|(k, v)| (k, *v)).collect();
                let want: Vec<(u8, u16)> = by_insert.iter().map(|e| (e.0, e.1)).collect();
                prop_assert_eq!(listed, want);
                for e in &m {
                    prop_assert_eq!(t.last_hit(&e.0), Some(e.4));
                }
            }
        }
    }
}
