//! A fixed-capacity FIFO ring: the slots of a packet queue (the TM's class queues, the
//! bypass hand-off). Allocated once; `push_back` on a full ring hands the value back instead of
//! growing, so the push and pop paths are a few instructions with no reallocation branch (a
//! `VecDeque` keeps its grow path in every `push_back`, which is not inlined).
//!
//! The allocation is reserved, not written: a slot is first written when the queue first gets
//! that deep (`Vec::push` within the reserved capacity, which never reallocates), and the ring
//! starts over at slot 0 whenever it empties. A queue's resident memory is therefore its
//! high-water depth, not its worst case (a class queue sized for its byte limit in 64-byte
//! frames reserves tens of thousands of slots that a queue of large frames never touches).

/// A FIFO of at most `capacity` values, allocated once in [`Ring::with_capacity`].
#[derive(Debug)]
pub struct Ring<T> {
    /// The slots written so far, within one allocation of `cap` slots. Invariant: every index
    /// in `head .. head + len` (modulo `cap`) is below `slots.len()`, and the next back index is
    /// at most `slots.len()`.
    slots: Vec<Option<T>>,
    cap: usize,
    /// Index of the front value.
    head: usize,
    len: usize,
}

impl<T> Ring<T> {
    /// An empty ring with room for exactly `capacity` values (0 is allowed: every push refused).
    pub fn with_capacity(capacity: usize) -> Self {
        Ring {
            slots: Vec::with_capacity(capacity),
            cap: capacity,
            head: 0,
            len: 0,
        }
    }

    /// `i` taken modulo the capacity, for `i < 2 * capacity`.
    #[inline]
    fn wrap(&self, i: usize) -> usize {
        if i >= self.cap {
            i - self.cap
        } else {
            i
        }
    }

    /// Add `v` at the back; `Err(v)` when the ring is full.
    #[inline(always)]
    pub fn push_back(&mut self, v: T) -> Result<(), T> {
        if self.len >= self.cap {
            return Err(v);
        }
        let i = self.wrap(self.head + self.len);
        let written = self.slots.len();
        if i < written {
            self.slots[i] = Some(v);
        } else if i == written && written < self.slots.capacity() {
            // The first time the ring is this deep: write the next reserved slot.
            self.slots.push(Some(v));
        } else {
            // Unreachable by the invariant; refuse rather than reallocate.
            return Err(v);
        }
        self.len += 1;
        Ok(())
    }

    /// Remove the front value.
    #[inline(always)]
    pub fn pop_front(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.slots.get_mut(self.head)?.take();
        self.len -= 1;
        // Empty: start over at slot 0, so the slots written stay the high-water depth.
        self.head = if self.len == 0 {
            0
        } else {
            self.wrap(self.head + 1)
        };
        v
    }

    /// The front value.
    #[inline]
    pub fn front(&self) -> Option<&T> {
        self.get(0)
    }

    /// The front value, mutably.
    #[inline]
    pub fn front_mut(&mut self) -> Option<&mut T> {
        if self.len == 0 {
            return None;
        }
        self.slots.get_mut(self.head)?.as_mut()
    }

    /// The `k`-th value from the front.
    #[inline]
    pub fn get(&self, k: usize) -> Option<&T> {
        if k >= self.len {
            return None;
        }
        self.slots.get(self.wrap(self.head + k))?.as_ref()
    }

    /// Values held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// No value held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Most values it holds (what was reserved; never changes).
    #[inline]
    pub fn capacity(&self) -> usize {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    #[test]
    fn fifo_wraps_and_refuses_when_full() {
        let mut r = Ring::with_capacity(3);
        assert_eq!(r.pop_front(), None);
        for round in 0..5 {
            for i in 0..3 {
                r.push_back(round * 10 + i).unwrap();
            }
            assert_eq!(r.push_back(99), Err(99));
            assert_eq!(r.get(2), Some(&(round * 10 + 2)));
            assert_eq!(r.get(3), None);
            for i in 0..3 {
                assert_eq!(r.pop_front(), Some(round * 10 + i));
            }
            assert!(r.is_empty());
            r.push_back(7).unwrap();
            assert_eq!(r.pop_front(), Some(7));
        }
        let mut z: Ring<u8> = Ring::with_capacity(0);
        assert_eq!(z.push_back(1), Err(1));
        assert_eq!((z.pop_front(), z.front(), z.capacity()), (None, None, 0));
    }

    proptest! {
        /// Against `VecDeque` bounded by hand: same values out, same refusals, same length.
        #[test]
        fn matches_a_bounded_vecdeque(cap in 0usize..9, ops in proptest::collection::vec(proptest::option::of(0u32..1000), 0..200)) {
            let mut r = Ring::with_capacity(cap);
            let mut m = VecDeque::new();
            for op in ops {
                match op {
                    Some(v) => {
                        let full = m.len() >= cap;
                        prop_assert_eq!(r.push_back(v).is_err(), full);
                        if !full {
                            m.push_back(v);
                        }
                    }
                    None => prop_assert_eq!(r.pop_front(), m.pop_front()),
                }
                prop_assert_eq!(r.len(), m.len());
                prop_assert_eq!(r.front(), m.front());
                if let Some(f) = r.front_mut() {
                    *f += 1;
                    *m.front_mut().unwrap() += 1;
                }
                for k in 0..=cap {
                    prop_assert_eq!(r.get(k), m.get(k));
                }
                prop_assert_eq!(r.capacity(), cap);
            }
        }
    }
}
