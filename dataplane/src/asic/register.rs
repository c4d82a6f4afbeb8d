//! Register arrays: fixed-size arrays of per-index state, as P4's `Register` extern.
//!
//! Used for THEMIS's CNP_Cache and CNP timestamps, Themis's per-QP bitmaps and PathMaxPSN, MLCC's
//! credits: state indexed by a flow hash or an id, read and written per packet, reset by the
//! control plane.
//!
//! The array is allocated once in [`RegisterArray::new`] and never grows. An index out of range
//! never panics: the access is ignored (a read returns `T::default()`) and counted in
//! [`RegisterStats::out_of_range`].

/// Why a register array could not be created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegisterError {
    /// A register array must have at least one cell (hash indexing is modulo the size).
    ZeroSize,
}

impl core::fmt::Display for RegisterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            RegisterError::ZeroSize => f.write_str("register array size must be at least 1"),
        }
    }
}

impl std::error::Error for RegisterError {}

/// Counters of a [`RegisterArray`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegisterStats {
    /// Accesses (read, write, modify, reset, reset_range) with an index outside `0..len`; each
    /// was ignored. A `reset_range` that reaches past the end counts once.
    pub out_of_range: u64,
}

/// A fixed-size array of `T`, every cell starting at `T::default()`.
#[derive(Clone, Debug)]
pub struct RegisterArray<T: Copy + Default> {
    cells: Box<[T]>,
    stats: RegisterStats,
}

impl<T: Copy + Default> RegisterArray<T> {
    /// An array of `size` cells, all `T::default()`. `size == 0` is refused with
    /// [`RegisterError::ZeroSize`] (there would be nothing to index a hash into).
    pub fn new(size: usize) -> Result<Self, RegisterError> {
        if size == 0 {
            return Err(RegisterError::ZeroSize);
        }
        Ok(RegisterArray {
            cells: vec![T::default(); size].into_boxed_slice(),
            stats: RegisterStats::default(),
        })
    }

    /// Number of cells (always at least 1).
    #[inline]
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Always `false`: a register array has at least one cell. Present for API symmetry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// The cell index for a hash: `h mod len`. Always in range.
    #[inline]
    pub fn index_for_hash(&self, h: u32) -> usize {
        h as usize % self.cells.len()
    }

    /// The value of cell `i`; `T::default()` (and `out_of_range` counted) when `i >= len`.
    #[inline]
    pub fn read(&mut self, i: usize) -> T {
        match self.cells.get(i) {
            Some(v) => *v,
            None => {
                self.stats.out_of_range += 1;
                T::default()
            }
        }
    }

    /// The value of cell `i` without counting anything (`None` when out of range): for the
    /// control plane and tests.
    #[inline]
    pub fn get(&self, i: usize) -> Option<T> {
        self.cells.get(i).copied()
    }

    /// Set cell `i` to `v`. Returns `false` (nothing written, `out_of_range` counted) when
    /// `i >= len`.
    #[inline]
    pub fn write(&mut self, i: usize, v: T) -> bool {
        match self.cells.get_mut(i) {
            Some(c) => {
                *c = v;
                true
            }
            None => {
                self.stats.out_of_range += 1;
                false
            }
        }
    }

    /// Read-modify-write of cell `i` in one step (a P4 `RegisterAction`): `f` gets the cell and
    /// its result is returned. `None` (f not called, `out_of_range` counted) when `i >= len`.
    #[inline]
    pub fn modify<R>(&mut self, i: usize, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        match self.cells.get_mut(i) {
            Some(c) => Some(f(c)),
            None => {
                self.stats.out_of_range += 1;
                None
            }
        }
    }

    /// Set cell `i` back to `T::default()`. `false` (and `out_of_range` counted) when out of
    /// range.
    #[inline]
    pub fn reset(&mut self, i: usize) -> bool {
        self.write(i, T::default())
    }

    /// Reset cells `lo..hi` (half-open). The part of the range inside the array is reset; if `hi`
    /// reaches past `len`, `out_of_range` is counted once. `lo >= hi` does nothing. Returns the
    /// number of cells reset.
    pub fn reset_range(&mut self, lo: usize, hi: usize) -> usize {
        if lo >= hi {
            return 0;
        }
        let len = self.cells.len();
        if hi > len {
            self.stats.out_of_range += 1;
        }
        let (lo, hi) = (lo.min(len), hi.min(len));
        self.cells[lo..hi].fill(T::default());
        hi - lo
    }

    /// Reset every cell to `T::default()` (counters are kept).
    pub fn reset_all(&mut self) {
        self.cells.fill(T::default());
    }

    /// All cells, for a control-plane snapshot.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        &self.cells
    }

    /// Counters.
    #[inline]
    pub fn stats(&self) -> RegisterStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn zero_size_refused() {
        assert_eq!(
            RegisterArray::<u32>::new(0).unwrap_err(),
            RegisterError::ZeroSize
        );
    }

    #[test]
    fn read_write_modify_reset() {
        let mut r = RegisterArray::<u64>::new(4).unwrap();
        assert_eq!(r.len(), 4);
        assert!(!r.is_empty());
        assert_eq!(r.read(2), 0);
        assert!(r.write(2, 7));
        assert_eq!(r.read(2), 7);
        assert_eq!(
            r.modify(2, |c| {
                *c += 1;
                *c
            }),
            Some(8)
        );
        assert_eq!(r.get(2), Some(8));
        assert!(r.reset(2));
        assert_eq!(r.read(2), 0);
        assert_eq!(r.stats().out_of_range, 0);
    }

    #[test]
    fn out_of_range_counted_and_ignored() {
        let mut r = RegisterArray::<u32>::new(3).unwrap();
        r.write(0, 1);
        assert_eq!(r.read(3), 0);
        assert!(!r.write(3, 9));
        assert!(!r.write(usize::MAX, 9));
        assert_eq!(r.modify(10, |c| *c = 5), None);
        assert!(!r.reset(3));
        assert_eq!(r.get(3), None);
        assert_eq!(r.stats().out_of_range, 5);
        assert_eq!(r.as_slice(), &[1, 0, 0]);
    }

    #[test]
    fn reset_range_clamps_and_counts() {
        let mut r = RegisterArray::<u8>::new(5).unwrap();
        for i in 0..5 {
            r.write(i, 1);
        }
        assert_eq!(r.reset_range(1, 3), 2);
        assert_eq!(r.as_slice(), &[1, 0, 0, 1, 1]);
        assert_eq!(r.stats().out_of_range, 0);
        assert_eq!(r.reset_range(3, 3), 0);
        assert_eq!(r.reset_range(4, 2), 0);
        assert_eq!(r.reset_range(4, 100), 1);
        assert_eq!(r.stats().out_of_range, 1);
        assert_eq!(r.reset_range(7, 100), 0);
        assert_eq!(r.stats().out_of_range, 2);
        assert_eq!(r.as_slice(), &[1, 0, 0, 1, 0]);
        r.reset_all();
        assert_eq!(r.as_slice(), &[0; 5]);
    }

    proptest! {
        #[test]
        fn hash_index_always_in_range(size in 1usize..10_000, h in any::<u32>()) {
            let mut r = RegisterArray::<u16>::new(size).unwrap();
            let i = r.index_for_hash(h);
            prop_assert!(i < size);
            prop_assert_eq!(i, h as usize % size);
            prop_assert!(r.write(i, 3));
            prop_assert_eq!(r.read(i), 3);
            prop_assert_eq!(r.stats().out_of_range, 0);
        }
    }
}
