//! Port roles shared by the mechanisms: the DC- and WAN-facing ports of an ESW, the host and
//! fabric ports of a ToR.

/// A set of port ids (one role), tested in O(1) on the fast path: a flag per id up to the
/// largest one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSet(Vec<bool>);

impl PortSet {
    /// The set of `ids`.
    pub fn new(ids: &[u16]) -> Self {
        let max = ids.iter().copied().max().map_or(0, |m| m as usize + 1);
        let mut v = vec![false; max];
        for &i in ids {
            v[i as usize] = true;
        }
        PortSet(v)
    }

    /// Whether `port` is in the set.
    #[inline]
    pub fn contains(&self, port: u16) -> bool {
        self.0.get(port as usize).copied().unwrap_or(false)
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
    }
}
