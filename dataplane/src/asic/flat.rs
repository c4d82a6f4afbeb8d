//! An exact-match table from (IP, 32-bit id) keys to `u32` values in one flat array, linearly
//! probed: a hit reads one 32-byte entry, key and value together, in one cache line.
//!
//! Made for per-frame lookups of a table that is only changed by the control plane: the
//! spraying ToR's `spray_qps` (a QP end, (IP, QPN), to its slot in the Themis registers).
//! [`crate::asic::table::ExactTable`] (hashbrown) reads a group of control bytes and then the
//! bucket, two dependent loads on two lines, and hashes with ahash; on the spraying ToR that
//! lookup took a fifth of the worker's time, waiting on the two loads. Tag groups matched by
//! SWAR cost more instructions than they save; here there are no tags: the key is compared in
//! place.
//!
//! - Room for `capacity` keys in `2 * capacity` entries or more (a power of two), so probe
//!   sequences stay short (at most half full) and always end at an empty entry.
//! - Deletion shifts the later entries of the probe sequence back (no tombstones), so a table
//!   under insert/remove churn never degrades and never allocates after [`FlatTable::new`].
//! - The hash is a fixed multiply-xorshift mix of the key under a seed: the same layout on
//!   every run. The layout decides only where keys sit, never what a lookup returns.
//!
//! Counters as [`crate::asic::table::TableStats`]: hits, misses, inserts, deletes, refused
//! inserts (`full_events`).

use crate::asic::table::{TableFull, TableStats};

/// One entry: the key, its value, whether it is in use. 32 bytes, aligned to 32: never across
/// two cache lines.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(32))]
struct Entry {
    ip: u128,
    id: u32,
    value: u32,
    used: bool,
}

/// An exact-match table `(u128, u32) -> u32` of at most `capacity` entries.
#[derive(Debug)]
pub struct FlatTable {
    entries: Box<[Entry]>,
    mask: usize,
    seed: u64,
    len: usize,
    capacity: usize,
    stats: TableStats,
}

impl FlatTable {
    /// A table of at most `capacity` keys, all memory allocated now. Capacity 0 is allowed:
    /// every insert is then refused.
    pub fn new(capacity: usize, seed: u64) -> Self {
        let n = capacity.saturating_mul(2).max(2).next_power_of_two();
        FlatTable {
            entries: vec![Entry::default(); n].into_boxed_slice(),
            mask: n - 1,
            seed,
            len: 0,
            capacity,
            stats: TableStats::default(),
        }
    }

    /// The entry the probe sequence of `(ip, id)` starts at.
    #[inline(always)]
    fn home(&self, ip: u128, id: u32) -> usize {
        let mut h = (ip as u64 ^ self.seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (ip >> 64) as u64 ^ (u64::from(id) << 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
        h = (h ^ u64::from(id)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (h ^ (h >> 32)) as usize & self.mask
    }

    /// The index of `(ip, id)`'s entry, or `Err` with the empty entry its probe ended at.
    #[inline(always)]
    fn find(&self, ip: u128, id: u32) -> Result<usize, usize> {
        let mut i = self.home(ip, id);
        // At most half full: the probe meets an empty entry before it wraps around. The bound
        // keeps a broken invariant from spinning forever.
        for _ in 0..self.entries.len() {
            let Some(e) = self.entries.get(i) else {
                break;
            };
            if !e.used {
                return Err(i);
            }
            if e.ip == ip && e.id == id {
                return Ok(i);
            }
            i = (i + 1) & self.mask;
        }
        Err(usize::MAX)
    }

    /// The value of `(ip, id)`, counting a hit or a miss.
    #[inline(always)]
    pub fn lookup(&mut self, ip: u128, id: u32) -> Option<u32> {
        match self.find(ip, id) {
            Ok(i) => {
                self.stats.hits += 1;
                self.entries.get(i).map(|e| e.value)
            }
            Err(_) => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// The value of `(ip, id)` without counting (control plane, tests).
    pub fn peek(&self, ip: u128, id: u32) -> Option<u32> {
        let i = self.find(ip, id).ok()?;
        self.entries.get(i).map(|e| e.value)
    }

    /// Insert or replace `(ip, id) -> value`; returns the replaced value. A new key in a full
    /// table is refused ([`TableFull`], counted in `full_events`).
    pub fn insert(&mut self, ip: u128, id: u32, value: u32) -> Result<Option<u32>, TableFull> {
        match self.find(ip, id) {
            Ok(i) => {
                let e = &mut self.entries[i];
                let old = core::mem::replace(&mut e.value, value);
                self.stats.inserts += 1;
                Ok(Some(old))
            }
            Err(i) if self.len < self.capacity && i < self.entries.len() => {
                self.entries[i] = Entry {
                    ip,
                    id,
                    value,
                    used: true,
                };
                self.len += 1;
                self.stats.inserts += 1;
                Ok(None)
            }
            Err(_) => {
                self.stats.full_events += 1;
                Err(TableFull)
            }
        }
    }

    /// Remove `(ip, id)`, returning its value (counted in `deletes`); `None` when absent.
    pub fn remove(&mut self, ip: u128, id: u32) -> Option<u32> {
        let mut hole = self.find(ip, id).ok()?;
        let value = self.entries[hole].value;
        self.entries[hole].used = false;
        self.len -= 1;
        self.stats.deletes += 1;
        // Backward shift: an entry after the hole moves into it when the hole lies on its probe
        // sequence (between its home and where it sits), so every probe still reaches its key
        // before an empty entry.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let e = self.entries[j];
            if !e.used {
                break;
            }
            let home = self.home(e.ip, e.id);
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.entries[hole] = e;
                self.entries[j].used = false;
                hole = j;
            }
        }
        Some(value)
    }

    /// Keys in the table.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most keys it holds.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Counters (`entries` = keys now; `evictions` and `expirations` stay 0).
    pub fn stats(&self) -> TableStats {
        TableStats {
            entries: self.len as u64,
            ..self.stats
        }
    }

    /// Entries of the array (`2 * capacity` or more, a power of two): its memory is 32 bytes
    /// each.
    pub fn slots(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn insert_lookup_remove_counts() {
        let mut t = FlatTable::new(2, 7);
        assert_eq!(core::mem::size_of::<Entry>(), 32);
        assert_eq!(t.slots(), 4);
        assert_eq!(t.insert(1, 10, 100), Ok(None));
        assert_eq!(t.insert(1, 11, 110), Ok(None));
        assert_eq!(t.insert(1, 10, 101), Ok(Some(100)));
        assert_eq!(t.insert(2, 10, 200), Err(TableFull));
        assert_eq!(t.lookup(1, 10), Some(101));
        assert_eq!(t.lookup(2, 10), None);
        assert_eq!(t.peek(1, 11), Some(110));
        assert_eq!(t.remove(1, 10), Some(101));
        assert_eq!(t.remove(1, 10), None);
        assert_eq!(t.len(), 1);
        let s = t.stats();
        assert_eq!(
            (
                s.hits,
                s.misses,
                s.inserts,
                s.deletes,
                s.full_events,
                s.entries
            ),
            (1, 1, 3, 1, 1, 1)
        );
        let mut z = FlatTable::new(0, 0);
        assert_eq!(z.insert(1, 1, 1), Err(TableFull));
        assert_eq!(z.lookup(1, 1), None);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u8, u32),
        Lookup(u8, u8),
        Remove(u8, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Few distinct keys, so that inserts, removes and lookups meet the same keys and their
        // probe sequences collide and wrap around the small arrays.
        prop_oneof![
            (0u8..4, 0u8..12, any::<u32>()).prop_map(|(a, b, v)| Op::Insert(a, b, v)),
            (0u8..4, 0u8..12).prop_map(|(a, b)| Op::Lookup(a, b)),
            (0u8..4, 0u8..12).prop_map(|(a, b)| Op::Remove(a, b)),
        ]
    }

    fn ip(a: u8) -> u128 {
        // IPv4-mapped addresses and one IPv6 one.
        match a {
            3 => 0x2001_0db8 << 96 | 1,
            a => 0xffff_0a00_0000 | u128::from(a),
        }
    }

    proptest! {
        /// The table against a `HashMap` model, with capacities that keep it nearly full.
        #[test]
        fn matches_a_map(
            ops in proptest::collection::vec(op(), 1..400),
            cap in 0usize..12,
            seed in any::<u64>(),
        ) {
            let mut t = FlatTable::new(cap, seed);
            let slots = t.slots();
            let mut m: HashMap<(u128, u32), u32> = HashMap::new();
            for o in ops {
                match o {
                    Op::Insert(a, b, v) => {
                        let k = (ip(a), u32::from(b) << 16 | 0x1ff);
                        let got = t.insert(k.0, k.1, v);
                        if let Some(old) = m.get_mut(&k) {
                            prop_assert_eq!(got, Ok(Some(*old)));
                            *old = v;
                        } else if m.len() < cap {
                            prop_assert_eq!(got, Ok(None));
                            m.insert(k, v);
                        } else {
                            prop_assert_eq!(got, Err(TableFull));
                        }
                    }
                    Op::Lookup(a, b) => {
                        let k = (ip(a), u32::from(b) << 16 | 0x1ff);
                        prop_assert_eq!(t.lookup(k.0, k.1), m.get(&k).copied());
                    }
                    Op::Remove(a, b) => {
                        let k = (ip(a), u32::from(b) << 16 | 0x1ff);
                        prop_assert_eq!(t.remove(k.0, k.1), m.remove(&k));
                    }
                }
                prop_assert_eq!(t.len(), m.len());
                prop_assert_eq!(t.slots(), slots);
                for (k, v) in &m {
                    prop_assert_eq!(t.peek(k.0, k.1), Some(*v));
                }
            }
        }
    }
}
