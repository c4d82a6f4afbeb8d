//! Port roles shared by the mechanisms: the DC- and WAN-facing ports of an ESW, the host and
//! fabric ports of a ToR.

/// A set of port ids (one role), tested in O(1) on the fast path: a bit per id below 64 (every
/// shipped config's ports), a flag per id up to the largest one above.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSet {
    /// Bit i: id i (< 64) is in the set.
    low: u64,
    /// Flag i: id 64 + i is in the set.
    high: Vec<bool>,
}

impl PortSet {
    /// The set of `ids`.
    pub fn new(ids: &[u16]) -> Self {
        let max = ids
            .iter()
            .copied()
            .max()
            .map_or(0, |m| (m as usize + 1).saturating_sub(64));
        let mut s = PortSet {
            low: 0,
            high: vec![false; max],
        };
        for &i in ids {
            if i < 64 {
                s.low |= 1 << i;
            } else {
                s.high[i as usize - 64] = true;
            }
        }
        s
    }

    /// Whether `port` is in the set.
    #[inline]
    pub fn contains(&self, port: u16) -> bool {
        if port < 64 {
            self.low >> port & 1 != 0
        } else {
            self.high.get(port as usize - 64).copied().unwrap_or(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership() {
        let s = PortSet::new(&[0, 3]);
        assert!(s.contains(0) && s.contains(3));
        assert!(!s.contains(1) && !s.contains(4) && !s.contains(u16::MAX));
        assert!(!PortSet::new(&[]).contains(0));
        let s = PortSet::new(&[1, 63, 64, 200]);
        for p in 0..=u16::MAX {
            assert_eq!(s.contains(p), matches!(p, 1 | 63 | 64 | 200), "{p}");
        }
    }
}
