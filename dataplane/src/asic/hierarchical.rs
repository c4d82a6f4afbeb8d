//! The hierarchical scheduler the traffic manager uses: strict classes first, then WRR or DRR over
//! the rest.

use super::drr::Drr;
use super::scheduler::{Masked, QueueView, Scheduler};
use super::strict::StrictPriority;
use super::wrr::Wrr;

/// How the queues not in the strict set are served by a [`Hierarchical`] scheduler.
// One per port, built once: keeping the state inline avoids a pointer chase on every pick.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum Weighted {
    /// Strict priority among them too (highest index first).
    Strict,
    /// Weighted round robin in packets.
    Wrr(Wrr),
    /// Deficit round robin in bytes.
    Drr(Drr),
}

/// Two-level scheduler: the queues in `strict_mask` are served first by strict priority (highest
/// index first); only when none of them is eligible are the others served by the [`Weighted`]
/// scheduler. Queue indices >= 64 cannot be strict.
#[derive(Clone, Debug)]
pub struct Hierarchical {
    strict_mask: u64,
    rest: Weighted,
}

impl Hierarchical {
    /// A scheduler with the given strict set and weighted scheduler for the rest.
    pub fn new(strict_mask: u64, rest: Weighted) -> Self {
        Hierarchical { strict_mask, rest }
    }

    /// The strict set.
    pub fn strict_mask(&self) -> u64 {
        self.strict_mask
    }

    /// Change the strict set at run time.
    pub fn set_strict_mask(&mut self, mask: u64) {
        self.strict_mask = mask;
    }

    /// The weighted part.
    pub fn weighted(&self) -> &Weighted {
        &self.rest
    }

    /// Change queue `q`'s WRR weight (packets per round) or DRR quantum (bytes per round) at run
    /// time (Reflex's adaptive N_throttle:1). Returns `false` (nothing changed) when the weighted
    /// part is strict or `q` is out of range.
    pub fn set_weight(&mut self, q: usize, w: u32) -> bool {
        match &mut self.rest {
            Weighted::Strict => false,
            Weighted::Wrr(s) => s.set_weight(q, w),
            Weighted::Drr(s) => s.set_quantum(q, w),
        }
    }
}

impl Scheduler for Hierarchical {
    fn pick<V: QueueView + ?Sized>(&mut self, view: &V) -> Option<usize> {
        // The highest eligible strict queue (eligible_mask covers queues below min(n, 64)).
        let strict = view.eligible_mask() & self.strict_mask;
        if strict != 0 {
            return Some(63 - strict.leading_zeros() as usize);
        }
        let rest = Masked {
            view,
            exclude: self.strict_mask,
        };
        match &mut self.rest {
            Weighted::Strict => StrictPriority.pick(&rest),
            Weighted::Wrr(s) => s.pick(&rest),
            Weighted::Drr(s) => s.pick(&rest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strict_highest_first() {
        let v = [Some(64), None, Some(100), None];
        assert_eq!(StrictPriority.pick(&v[..]), Some(2));
        let v = [Some(64), None, None, None];
        assert_eq!(StrictPriority.pick(&v[..]), Some(0));
        let v: [Option<u32>; 3] = [None; 3];
        assert_eq!(StrictPriority.pick(&v[..]), None);
        let e: [Option<u32>; 0] = [];
        assert_eq!(StrictPriority.pick(&e[..]), None);
    }

    #[test]
    fn hierarchical_strict_before_weighted() {
        let mut h = Hierarchical::new(0b1000_0000, Weighted::Wrr(Wrr::new(&[1; 8])));
        let mut v = [Some(100u32); 8];
        for _ in 0..10 {
            assert_eq!(h.pick(&v[..]), Some(7));
        }
        v[7] = None;
        // Classes 0..7 by WRR with equal weights: round robin.
        let mut seen = [0u32; 8];
        for _ in 0..70 {
            let q = h.pick(&v[..]).unwrap();
            assert_ne!(q, 7);
            seen[q] += 1;
        }
        assert_eq!(&seen[..7], &[10; 7]);
        assert!(h.set_weight(0, 3));
        let mut hs = Hierarchical::new(0b1, Weighted::Strict);
        assert!(!hs.set_weight(0, 3));
        // Strict class 0 beats weighted-strict class 5.
        let v = [Some(1), None, None, None, None, Some(1)];
        assert_eq!(hs.pick(&v[..]), Some(0));
        hs.set_strict_mask(0);
        assert_eq!(hs.pick(&v[..]), Some(5));
    }

    #[test]
    fn masked_view() {
        let v = [Some(1u32), Some(2), Some(3)];
        let m = Masked {
            view: &v[..],
            exclude: 0b010,
        };
        assert_eq!(m.n(), 3);
        assert_eq!(m.head_len(1), None);
        assert_eq!(m.head_len(2), Some(3));
        assert_eq!(m.head_len(9), None);
    }

    proptest! {
        /// Work conservation of every scheduler: `pick` is `None` iff no queue is eligible, and a
        /// pick is always an eligible queue.
        #[test]
        fn work_conserving(
            steps in proptest::collection::vec(proptest::collection::vec(proptest::option::of(1u32..9000), 8), 1..200),
            weights in proptest::collection::vec(0u32..5, 8),
            mask in 0u64..256,
            kind in 0u8..3,
        ) {
            let rest = match kind {
                0 => Weighted::Strict,
                1 => Weighted::Wrr(Wrr::new(&weights)),
                _ => Weighted::Drr(Drr::new(&weights.iter().map(|w| w * 300).collect::<Vec<_>>())),
            };
            let mut h = Hierarchical::new(mask, rest);
            for v in steps {
                let any = v.iter().any(|x| x.is_some());
                match h.pick(&v[..]) {
                    None => prop_assert!(!any),
                    Some(q) => prop_assert!(v[q].is_some()),
                }
            }
        }
    }
}
