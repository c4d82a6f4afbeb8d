//! Exact-match match-action tables with bounded capacity, hit/miss counters and idle timeouts.
//!
//! Used for THEMIS's QP_field, CNP_Store and setCNP tables, Reflex's Flow State Table, Themis's
//! PathMap, and any other `key -> action data` lookup.
//!
//! # Implementation
//!
//! A cache-conscious open-addressing table of our own layout (after Folly's F14 and DPDK's
//! `rte_hash`), because a switch's lookup has to be prefetchable a few packets ahead and
//! hashbrown hides where a key's bucket is.
//!
//! - **Groups.** The index is a power-of-two array of 64-byte, cache-line-aligned groups. A group
//!   holds [`GROUP_SLOTS`] (12) slots: a one-byte tag per slot (0: empty; otherwise `0x80` | the
//!   hash's top 7 bits) and a 32-bit entry index per slot, plus an overflow count. A key's home
//!   group is the hash's low bits; a lookup compares the group's 12 tags at once (SWAR on a
//!   `u128`), then the key of each entry whose tag matched (one in 128 false positives per
//!   occupied slot).
//! - **Overflow counts, no tombstones.** An insert that finds its home group full goes on to the
//!   next group, and adds one to the overflow count of every full group it passed. A lookup stops
//!   at the first group whose count is 0: it is a miss there. A remove takes the counts back
//!   down along the same path. The counts saturate at 255 and then stay (lookups through that
//!   group then probe one group further; never wrong, only slower). With the index sized at
//!   `2 * capacity` slots (at most half full) overflow is rare.
//! - **Entries.** A preallocated slab of `capacity` entries holds each key, its value, its last-hit
//!   time and two intrusive doubly-linked lists: insertion order (for [`WhenFull::EvictOldest`]
//!   and listing) and last-hit order (for idle timeouts: the least recently hit entry is at the
//!   front, so [`ExactTable::expire`] looks only at entries that are due). A hit reads the group
//!   and one entry: two cache lines, and the hit's time is written into the line already read.
//!   (Under hashbrown a hit read its control bytes, its bucket and the list node: three.)
//! - **Prefetch.** [`ExactTable::hash`] gives a key's hash once; [`ExactTable::prefetch_group`]
//!   asks for the group's line (a few packets ahead), [`ExactTable::prefetch_entry`] for the
//!   entry the group's first matching tag names (a packet or two ahead, once the group is in);
//!   [`ExactTable::lookup_hashed`] then finds both in cache.
//! - **Determinism.** Hashing is `ahash` under fixed seeds (or a seed from the config,
//!   [`ExactTable::with_seed`]); listing, eviction and expiry follow the lists, so they are the
//!   same on every run whatever the seed.
//! - **No allocation after `new`**: the groups and the slab never grow.
//!
//! Cost: `insert`, `lookup`, `lookup_mut`, `peek`, `remove` are one probe (usually one group)
//! plus O(1) list updates; `expire` is O(max); `clear` is O(capacity + groups); `iter` is O(1)
//! per entry.
//!
//! The clock is the engine's ([`Nanos`]); idle timeouts assume `now` does not go backwards. If it
//! does, entries can expire later than due, never earlier.

use core::hash::Hash;

use ahash::RandomState;

use crate::packet::prefetch;
use crate::time::Nanos;

/// Seeds used by [`ExactTable::new`]: fixed, so iteration and eviction are deterministic.
pub const DEFAULT_SEED: u64 = 0x6c6f_6e67_6861_756c; // "longhaul"

/// No entry (list ends, the free list's end).
const NIL: u32 = u32::MAX;
/// Insertion-order list.
const ORDER: usize = 0;
/// Last-hit-order list.
const IDLE: usize = 1;

/// Slots per group: 12 tags, an overflow count and 12 entry indices fill one cache line.
const GROUP_SLOTS: usize = 12;
/// The byte of [`Group::tags`] that holds the overflow count.
const OVERFLOW: usize = 15;
/// The tag bytes of a group as a `u128`: the low 12 bytes (the overflow byte and the 3 unused
/// ones never match).
const LANES: u128 = (1u128 << (8 * GROUP_SLOTS)) - 1;
/// `0x01` in every byte.
const ONES: u128 = u128::MAX / 0xff;
/// `0x7f` in every byte.
const LOW7: u128 = ONES * 0x7f;

/// The ahash state for a seed (shared with [`crate::asic::lpm`]).
pub(crate) fn hasher_for(seed: u64) -> RandomState {
    RandomState::with_seeds(
        seed,
        seed ^ 0x243f_6a88_85a3_08d3,
        seed.rotate_left(17) ^ 0x1319_8a2e_0370_7344,
        seed.rotate_left(41) ^ 0xa409_3822_299f_31d0,
    )
}

/// One cache line of the index.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Group {
    /// Bytes 0..12: the slots' tags (0 empty, else `0x80 | hash >> 57`); byte 15: the overflow
    /// count; bytes 12..15 stay 0.
    tags: [u8; 16],
    /// The entry each occupied slot names (an index into the slab).
    slots: [u32; GROUP_SLOTS],
}

const EMPTY_GROUP: Group = Group {
    tags: [0; 16],
    slots: [0; GROUP_SLOTS],
};

impl Group {
    /// Bit 7 of byte `i` set for each slot `i < 12` whose tag is `tag` (0: the empty slots).
    /// Exact (no false positives between bytes): a byte of `v` is zero iff adding `0x7f` to its
    /// low 7 bits does not set bit 7 and bit 7 was not set already.
    #[inline(always)]
    fn matching(&self, tag: u8) -> u128 {
        let v = u128::from_le_bytes(self.tags) ^ (ONES * tag as u128);
        let nonzero = ((v & LOW7).wrapping_add(LOW7) | v) | LOW7;
        !nonzero & LANES
    }

    #[inline(always)]
    fn overflow(&self) -> u8 {
        self.tags[OVERFLOW]
    }
}

/// The slot of the lowest set bit of a [`Group::matching`] mask.
#[inline(always)]
fn lowest_slot(m: u128) -> usize {
    (m.trailing_zeros() / 8) as usize
}

/// A hash's tag: never 0 (the empty tag).
#[inline(always)]
fn tag_of(h: u64) -> u8 {
    0x80 | (h >> 57) as u8
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

/// One entry of the slab; `kv` is `None` while it is free.
#[derive(Debug)]
struct Entry<K, V> {
    kv: Option<(K, V)>,
    last_hit: Nanos,
    prev: [u32; 2],
    next: [u32; 2],
}

/// Where a key was found: its group, its slot there, its entry.
#[derive(Clone, Copy)]
struct Found {
    group: usize,
    slot: usize,
    entry: usize,
}

/// An exact-match table `K -> V` holding at most `capacity` entries.
#[derive(Debug)]
pub struct ExactTable<K: Eq + Hash + Copy, V> {
    groups: Box<[Group]>,
    /// `groups.len() - 1` (a power of two minus one).
    mask: usize,
    entries: Box<[Entry<K, V>]>,
    head: [u32; 2],
    tail: [u32; 2],
    /// The free entries, threaded through `next[ORDER]`.
    free: u32,
    len: usize,
    hasher: RandomState,
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
    /// hash layout is not public while each run stays deterministic). A capacity beyond
    /// `u32::MAX - 1` entries is clamped to it.
    pub fn with_seed(capacity: usize, cfg: TableConfig, seed: u64) -> Self {
        let capacity = capacity.min(NIL as usize - 1);
        // At most half of the slots in use: room for an insert in the home group or the next.
        let groups = capacity
            .saturating_mul(2)
            .div_ceil(GROUP_SLOTS)
            .max(1)
            .next_power_of_two();
        let mut t = ExactTable {
            groups: vec![EMPTY_GROUP; groups].into_boxed_slice(),
            mask: groups - 1,
            entries: (0..capacity)
                .map(|_| Entry {
                    kv: None,
                    last_hit: 0,
                    prev: [NIL; 2],
                    next: [NIL; 2],
                })
                .collect(),
            head: [NIL; 2],
            tail: [NIL; 2],
            free: NIL,
            len: 0,
            hasher: hasher_for(seed),
            capacity,
            cfg,
            stats: TableStats::default(),
        };
        t.reset_entries();
        t
    }

    /// The configuration.
    #[inline]
    pub fn config(&self) -> &TableConfig {
        &self.cfg
    }

    /// The hash of `k`, for [`prefetch_group`](Self::prefetch_group),
    /// [`prefetch_entry`](Self::prefetch_entry) and the `*_hashed` lookups (hash once per
    /// packet, use it three times).
    #[inline(always)]
    pub fn hash(&self, k: &K) -> u64 {
        self.hasher.hash_one(k)
    }

    /// Ask the CPU for the cache line of the group a key with hash `h` lives in (no effect on
    /// the table; issue it a few packets before the lookup).
    #[inline(always)]
    pub fn prefetch_group(&self, h: u64) {
        if let Some(g) = self.groups.get(h as usize & self.mask) {
            prefetch(g);
        }
    }

    /// Ask for the entry a key with hash `h` most likely lives in: the one named by the first
    /// slot of its home group whose tag matches. Reads the group, so issue it after
    /// [`prefetch_group`](Self::prefetch_group) has had time to bring it in.
    #[inline(always)]
    pub fn prefetch_entry(&self, h: u64) {
        let Some(g) = self.groups.get(h as usize & self.mask) else {
            return;
        };
        let m = g.matching(tag_of(h));
        if m != 0 {
            if let Some(e) = self.entries.get(g.slots[lowest_slot(m)] as usize) {
                prefetch(e);
            }
        }
    }

    /// Probe for `k` (hash `h`).
    #[inline(always)]
    fn find(&self, k: &K, h: u64) -> Option<Found> {
        debug_assert_eq!(h, self.hash(k), "a hash from another key or table");
        let tag = tag_of(h);
        let mut g = h as usize & self.mask;
        for _ in 0..self.groups.len() {
            let group = &self.groups[g];
            let mut m = group.matching(tag);
            while m != 0 {
                let slot = lowest_slot(m);
                m &= m - 1;
                let entry = group.slots[slot] as usize;
                if let Some(Entry {
                    kv: Some((key, _)), ..
                }) = self.entries.get(entry)
                {
                    if key == k {
                        return Some(Found {
                            group: g,
                            slot,
                            entry,
                        });
                    }
                }
            }
            if group.overflow() == 0 {
                return None;
            }
            g = (g + 1) & self.mask;
        }
        None
    }

    /// Put entry `entry` into the index for hash `h`: the first empty slot from its home group
    /// on, counting an overflow in every full group passed. `false` only if every group is full,
    /// which the sizing rules out (the index has twice the slab's entries).
    fn index_insert(&mut self, h: u64, entry: u32) -> bool {
        let mut g = h as usize & self.mask;
        for _ in 0..self.groups.len() {
            let group = &mut self.groups[g];
            let empty = group.matching(0);
            if empty != 0 {
                let slot = lowest_slot(empty);
                group.tags[slot] = tag_of(h);
                group.slots[slot] = entry;
                return true;
            }
            group.tags[OVERFLOW] = group.tags[OVERFLOW].saturating_add(1);
            g = (g + 1) & self.mask;
        }
        false
    }

    /// Take a found key out of the index: empty its slot, and take back the overflow counts its
    /// insert added between its home group (hash `h`) and where it sits.
    fn index_remove(&mut self, h: u64, at: Found) {
        self.groups[at.group].tags[at.slot] = 0;
        let mut g = h as usize & self.mask;
        while g != at.group {
            let o = &mut self.groups[g].tags[OVERFLOW];
            // A saturated count no longer knows how many passed: it stays.
            if *o != u8::MAX {
                *o = o.saturating_sub(1);
            }
            g = (g + 1) & self.mask;
        }
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
        let h = self.hash(&k);
        if let Some(at) = self.find(&k, h) {
            let old = match &mut self.entries[at.entry].kv {
                Some((_, value)) => core::mem::replace(value, v),
                None => return Err(TableFull), // unreachable: `find` saw the key
            };
            let n = at.entry as u32;
            self.move_to_back(ORDER, n);
            self.touch(n, now);
            self.stats.inserts += 1;
            return Ok(Inserted::Replaced(old));
        }
        let mut evicted = None;
        if self.len >= self.capacity {
            let oldest = self.head[ORDER];
            if self.cfg.when_full == WhenFull::Refuse || oldest == NIL {
                self.stats.full_events += 1;
                return Err(TableFull);
            }
            evicted = self.remove_entry(oldest as usize);
            self.stats.evictions += 1;
        }
        let n = self.free;
        if n == NIL || !self.index_insert(h, n) {
            // Unreachable while len <= capacity == slab size; refuse rather than grow.
            self.stats.full_events += 1;
            return Err(TableFull);
        }
        let e = &mut self.entries[n as usize];
        self.free = e.next[ORDER];
        e.kv = Some((k, v));
        e.last_hit = now;
        self.push_back(ORDER, n);
        self.push_back(IDLE, n);
        self.len += 1;
        self.stats.inserts += 1;
        Ok(match evicted {
            Some((ek, ev)) => Inserted::Evicted(ek, ev),
            None => Inserted::New,
        })
    }

    /// The value for `k`, counting a hit or a miss; a hit refreshes the entry's last-hit time to
    /// `now` (idle timeout). Entries past their idle timeout still match until `expire` removes
    /// them (as on an ASIC, where ageing is a background sweep).
    #[inline]
    pub fn lookup(&mut self, k: &K, now: Nanos) -> Option<&V> {
        let h = self.hash(k);
        self.lookup_hashed(k, h, now)
    }

    /// As [`lookup`](Self::lookup), with `h` = [`hash`](Self::hash)`(k)` already computed.
    #[inline]
    pub fn lookup_hashed(&mut self, k: &K, h: u64, now: Nanos) -> Option<&V> {
        self.lookup_mut_hashed(k, h, now).map(|v| &*v)
    }

    /// As [`lookup`](Self::lookup), with the value writable.
    #[inline]
    pub fn lookup_mut(&mut self, k: &K, now: Nanos) -> Option<&mut V> {
        let h = self.hash(k);
        self.lookup_mut_hashed(k, h, now)
    }

    /// As [`lookup_mut`](Self::lookup_mut), with `h` = [`hash`](Self::hash)`(k)`.
    #[inline]
    pub fn lookup_mut_hashed(&mut self, k: &K, h: u64, now: Nanos) -> Option<&mut V> {
        match self.find(k, h) {
            Some(at) => {
                self.stats.hits += 1;
                self.touch(at.entry as u32, now);
                self.entries[at.entry].kv.as_mut().map(|(_, v)| v)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// The value for `k` without counting or refreshing anything (control plane, tests).
    #[inline]
    pub fn peek(&self, k: &K) -> Option<&V> {
        let at = self.find(k, self.hash(k))?;
        self.entries[at.entry].kv.as_ref().map(|(_, v)| v)
    }

    /// As [`peek`](Self::peek), writable; does not count or refresh.
    #[inline]
    pub fn peek_mut(&mut self, k: &K) -> Option<&mut V> {
        let at = self.find(k, self.hash(k))?;
        self.entries[at.entry].kv.as_mut().map(|(_, v)| v)
    }

    /// When `k` was last hit (inserted or looked up).
    #[inline]
    pub fn last_hit(&self, k: &K) -> Option<Nanos> {
        let at = self.find(k, self.hash(k))?;
        Some(self.entries[at.entry].last_hit)
    }

    /// Remove `k`, returning its value (counted in `deletes`); `None` when absent.
    pub fn remove(&mut self, k: &K) -> Option<V> {
        let at = self.find(k, self.hash(k))?;
        let (_, v) = self.remove_entry(at.entry)?;
        self.stats.deletes += 1;
        Some(v)
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
            let n = self.head[IDLE];
            if n == NIL || now.saturating_sub(self.entries[n as usize].last_hit) < timeout {
                break;
            }
            match self.remove_entry(n as usize) {
                Some((k, v)) => {
                    self.stats.expirations += 1;
                    done += 1;
                    on_expired(k, v);
                }
                None => break, // unreachable: listed entries hold a key
            }
        }
        done
    }

    /// Entries in the table.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when the table holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most entries the table holds.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes the table reserved at `new` (index and slab); constant for its life.
    pub fn memory_bytes(&self) -> usize {
        core::mem::size_of_val(&*self.groups) + core::mem::size_of_val(&*self.entries)
    }

    /// Remove every entry (each counted in `deletes`); keeps all memory.
    pub fn clear(&mut self) {
        self.stats.deletes += self.len as u64;
        self.groups.fill(EMPTY_GROUP);
        for e in self.entries.iter_mut() {
            e.kv = None;
        }
        self.reset_entries();
    }

    /// The entries in insertion order, oldest first (for the control plane's listing).
    pub fn iter(&self) -> impl Iterator<Item = (K, &V)> + '_ {
        let mut cur = self.head[ORDER];
        core::iter::from_fn(move || {
            while cur != NIL {
                let e = self.entries.get(cur as usize)?;
                cur = e.next[ORDER];
                if let Some((k, v)) = &e.kv {
                    return Some((*k, v));
                }
            }
            None
        })
    }

    /// Counters, with `entries` the current length.
    pub fn stats(&self) -> TableStats {
        TableStats {
            entries: self.len as u64,
            ..self.stats
        }
    }

    /// Every entry free and unlisted, the free list in slab order.
    fn reset_entries(&mut self) {
        let n = self.entries.len();
        for (i, e) in self.entries.iter_mut().enumerate() {
            e.prev = [NIL; 2];
            e.next = [if i + 1 < n { i as u32 + 1 } else { NIL }, NIL];
        }
        self.head = [NIL; 2];
        self.tail = [NIL; 2];
        self.free = if n > 0 { 0 } else { NIL };
        self.len = 0;
    }

    /// Take entry `n` out of the index and both lists and free it, returning its key and value.
    fn remove_entry(&mut self, n: usize) -> Option<(K, V)> {
        let k = self.entries.get(n)?.kv.as_ref()?.0;
        let h = self.hash(&k);
        if let Some(at) = self.find(&k, h) {
            self.index_remove(h, at);
        }
        self.unlink(ORDER, n as u32);
        self.unlink(IDLE, n as u32);
        let e = &mut self.entries[n];
        let kv = e.kv.take();
        e.next[ORDER] = self.free;
        self.free = n as u32;
        self.len -= 1;
        kv
    }

    /// A hit at `now`. The last-hit list orders entries for `expire` only, so a table without
    /// an idle timeout keeps the time (`last_hit`) and skips the list's pointer writes: four
    /// scattered stores per lookup, on the fast path of every such table.
    #[inline(always)]
    fn touch(&mut self, n: u32, now: Nanos) {
        self.entries[n as usize].last_hit = now;
        if self.cfg.idle_timeout.is_some() {
            self.move_to_back(IDLE, n);
        }
    }

    fn push_back(&mut self, list: usize, n: u32) {
        let t = self.tail[list];
        self.entries[n as usize].prev[list] = t;
        self.entries[n as usize].next[list] = NIL;
        if t == NIL {
            self.head[list] = n;
        } else {
            self.entries[t as usize].next[list] = n;
        }
        self.tail[list] = n;
    }

    fn unlink(&mut self, list: usize, n: u32) {
        let e = &self.entries[n as usize];
        let (p, x) = (e.prev[list], e.next[list]);
        if p == NIL {
            self.head[list] = x;
        } else {
            self.entries[p as usize].next[list] = x;
        }
        if x == NIL {
            self.tail[list] = p;
        } else {
            self.entries[x as usize].prev[list] = p;
        }
        let e = &mut self.entries[n as usize];
        e.prev[list] = NIL;
        e.next[list] = NIL;
    }

    fn move_to_back(&mut self, list: usize, n: u32) {
        if self.tail[list] != n {
            self.unlink(list, n);
            self.push_back(list, n);
        }
    }

    /// Test support: the index agrees with the slab (every listed entry found at a slot that
    /// names it, no other occupied slot), and every overflow count equals the number of
    /// entries whose probe passed its group (or is saturated).
    #[cfg(test)]
    fn check_index(&self) {
        let mut occupied = 0;
        let mut want = vec![0usize; self.groups.len()];
        for (k, _) in self.iter() {
            let h = self.hash(&k);
            let at = self.find(&k, h).expect("a listed key is in the index");
            let mut g = h as usize & self.mask;
            while g != at.group {
                want[g] += 1;
                g = (g + 1) & self.mask;
            }
            occupied += 1;
        }
        let slots: usize = self
            .groups
            .iter()
            .map(|g| g.matching(0).count_ones() as usize)
            .sum();
        assert_eq!(self.groups.len() * GROUP_SLOTS - slots, occupied);
        for (g, w) in self.groups.iter().zip(want) {
            assert!(
                g.overflow() as usize == w || g.overflow() == u8::MAX,
                "overflow {} want {w}",
                g.overflow()
            );
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
        assert_eq!(t.last_hit(&2), Some(6));
        assert_eq!(t.remove(&2), Some(21));
        assert_eq!(t.remove(&2), None);
        assert_eq!(t.len(), 1);
        let s = t.stats();
        assert_eq!(
            (s.hits, s.misses, s.inserts, s.deletes, s.entries),
            (2, 2, 3, 1, 1)
        );
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
        let cap = t.memory_bytes();
        for k in 0..3 {
            t.insert(k, 0, 0).unwrap();
        }
        t.clear();
        assert!(t.is_empty());
        assert_eq!(t.stats().deletes, 3);
        assert_eq!(t.memory_bytes(), cap);
        t.check_index();
        for k in 10..13 {
            t.insert(k, 0, 0).unwrap();
        }
        assert_eq!(t.insert(20, 0, 0), Err(TableFull));
        assert_eq!(t.expire(5, 10, |_, _| {}), 3);
    }

    #[test]
    fn churn_at_full_capacity_keeps_the_index_exact() {
        for cap in [1usize, 3, 7, 8, 28, 100, 1000] {
            let mut t = table(cap, WhenFull::EvictOldest, Some(10));
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
            }
            t.check_index();
            let keys: Vec<u32> = t.iter().map(|(k, _)| k).collect();
            for k in keys {
                t.remove(&k);
            }
            t.check_index();
            assert!(t.groups.iter().all(|g| g.overflow() == 0), "cap {cap}");
        }
    }

    /// A key whose hash ignores its value: every key has the same home group and tag, so the
    /// table's probe chains, overflow counts and tag false positives all get exercised.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Collide(u16);

    impl Hash for Collide {
        fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
            state.write_u8(0);
        }
    }

    #[test]
    fn group_matching_is_exact() {
        let mut g = EMPTY_GROUP;
        g.tags[..12].copy_from_slice(&[0x81, 0, 0x81, 0x80, 0xff, 0, 0x01, 0x81, 0, 0, 0, 0x81]);
        g.tags[OVERFLOW] = 0x81;
        let lanes = |m: u128| {
            (0..16)
                .filter(|i| m >> (8 * i + 7) & 1 == 1)
                .collect::<Vec<_>>()
        };
        assert_eq!(lanes(g.matching(0x81)), vec![0, 2, 7, 11]);
        assert_eq!(lanes(g.matching(0)), vec![1, 5, 8, 9, 10]);
        assert_eq!(lanes(g.matching(0xff)), vec![4]);
        assert_eq!(lanes(g.matching(0x80)), vec![3]);
        assert_eq!(lowest_slot(g.matching(0x81)), 0);
    }

    #[test]
    fn colliding_keys_chain_across_groups_and_saturate() {
        // 300 keys through one home group: its overflow count saturates at 255.
        let mut t: ExactTable<Collide, u32> = ExactTable::new(300, TableConfig::default());
        for i in 0..300u16 {
            t.insert(Collide(i), i as u32, 0).unwrap();
        }
        t.check_index();
        assert_eq!(t.groups.iter().map(|g| g.overflow()).max(), Some(u8::MAX));
        for i in (0..300u16).step_by(2) {
            assert_eq!(t.remove(&Collide(i)), Some(i as u32));
        }
        t.check_index();
        for i in 0..300u16 {
            let want = (i % 2 == 1).then_some(i as u32);
            assert_eq!(t.lookup(&Collide(i), 1).copied(), want, "key {i}");
        }
        for i in 0..300u16 {
            t.insert(Collide(1000 + i), 0, 2).unwrap_or_default();
        }
        t.check_index();
        assert_eq!(t.len(), 300);
    }

    #[test]
    fn prefetch_then_hashed_lookup_finds_the_same() {
        let mut t = table(64, WhenFull::Refuse, Some(10));
        for k in 0..64 {
            t.insert(k, k as u64 * 3, 0).unwrap();
        }
        for k in 0..80u32 {
            let h = t.hash(&k);
            t.prefetch_group(h);
            t.prefetch_entry(h);
            let want = t.peek(&k).copied();
            assert_eq!(t.lookup_hashed(&k, h, 5).copied(), want);
            assert_eq!(t.lookup_mut_hashed(&k, h, 6).map(|v| *v), want);
        }
        assert_eq!((t.stats().hits, t.stats().misses), (128, 32));
        assert_eq!(t.last_hit(&3), Some(6));
    }

    proptest! {
        #[test]
        fn colliding_keys_match_a_map(
            ops in proptest::collection::vec((0u8..3, 0u16..60, any::<u16>()), 1..400),
            cap in 0usize..50,
            evict in any::<bool>(),
        ) {
            let when_full = if evict { WhenFull::EvictOldest } else { WhenFull::Refuse };
            let mut t: ExactTable<Collide, u16> =
                ExactTable::new(cap, TableConfig { when_full, idle_timeout: None });
            let mut m: Vec<(u16, u16)> = Vec::new();
            for (op, k, v) in ops {
                match op {
                    0 => {
                        let got = t.insert(Collide(k), v, 0);
                        if let Some(i) = m.iter().position(|e| e.0 == k) {
                            // A replace makes the entry the newest in insertion order.
                            prop_assert_eq!(got, Ok(Some(m.remove(i).1)));
                            m.push((k, v));
                        } else if m.len() < cap {
                            prop_assert_eq!(got, Ok(None));
                            m.push((k, v));
                        } else if evict && cap > 0 {
                            prop_assert_eq!(got, Ok(None));
                            m.remove(0);
                            m.push((k, v));
                        } else {
                            prop_assert_eq!(got, Err(TableFull));
                        }
                    }
                    1 => {
                        let want = m.iter().find(|e| e.0 == k).map(|e| e.1);
                        prop_assert_eq!(t.lookup(&Collide(k), 0).copied(), want);
                    }
                    _ => {
                        let want = m.iter().position(|e| e.0 == k).map(|i| m.remove(i).1);
                        prop_assert_eq!(t.remove(&Collide(k)), want);
                    }
                }
                prop_assert_eq!(t.len(), m.len());
                t.check_index();
            }
        }
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
        Remove(u8),
        Expire(u8),
        Advance(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..24, any::<u16>()).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => (0u8..24).prop_map(Op::Lookup),
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
            // Untimed: hits keep `last_hit` but do not reorder the (unused) last-hit list.
            let mut t: ExactTable<u8, u16> = ExactTable::new(
                cap,
                TableConfig { when_full, idle_timeout: timed.then_some(timeout) },
            );
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
                        let want = m.iter_mut().find(|e| e.0 == k).map(|e| {
                            e.3 = seq;
                            e.4 = now;
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
