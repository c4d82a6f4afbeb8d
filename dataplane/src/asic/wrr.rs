//! Weighted round robin in packets, work-conserving (Reflex NDT's N_throttle:1 Normal/Controlled
//! queues, weighted priority classes).
//!
//! Queues are visited in index order, round after round. On its turn a queue with weight `w > 0`
//! may send up to `w` packets back to back; the turn ends when it has sent `w` packets or when it is
//! empty/ineligible at a pick (its unused credit is forfeited, as in classic WRR). The scheduler keeps
//! its position: the next pick resumes at the queue after the one whose turn ended, never restarts
//! at queue 0.
//!
//! Weight 0: the queue gets no turns in the weighted rotation. To stay work-conserving it is served
//! (round robin among the weight-0 queues) whenever no queue with a positive weight is eligible, so
//! weight 0 means "scavenger": it takes only otherwise idle link time.

use super::scheduler::{QueueView, Scheduler};

/// Most queues a [`Wrr`] can schedule.
pub const WRR_MAX_QUEUES: usize = 64;

/// Weighted round robin over up to [`WRR_MAX_QUEUES`] queues (fixed-size state, no allocation).
#[derive(Clone, Debug)]
pub struct Wrr {
    weights: [u32; WRR_MAX_QUEUES],
    n: usize,
    /// Queue whose turn it is.
    cur: usize,
    /// Packets `cur` may still send in this turn (0 = its turn has not started / is over).
    credit: u32,
    /// Round-robin position among weight-0 queues.
    scavenger: usize,
}

impl Wrr {
    /// A scheduler over `weights.len()` queues (at most [`WRR_MAX_QUEUES`]; extra weights are
    /// ignored), weight = packets per round.
    pub fn new(weights: &[u32]) -> Self {
        let n = weights.len().min(WRR_MAX_QUEUES);
        let mut w = [0u32; WRR_MAX_QUEUES];
        w[..n].copy_from_slice(&weights[..n]);
        Wrr {
            weights: w,
            n,
            // So that the first turn goes to queue 0.
            cur: n.saturating_sub(1),
            credit: 0,
            scavenger: 0,
        }
    }

    /// Number of queues.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Weight of queue `q` (0 when out of range).
    pub fn weight(&self, q: usize) -> u32 {
        if q < self.n {
            self.weights[q]
        } else {
            0
        }
    }

    /// Change the weight of queue `q` at run time. If `q` is in its turn, its remaining credit is
    /// clamped to the new weight (so lowering a weight takes effect immediately; raising it takes
    /// effect from the queue's next turn). Returns `false` (nothing changed) if `q` is out of range.
    pub fn set_weight(&mut self, q: usize, w: u32) -> bool {
        if q >= self.n {
            return false;
        }
        self.weights[q] = w;
        if q == self.cur {
            self.credit = self.credit.min(w);
        }
        true
    }
}

impl Scheduler for Wrr {
    fn pick<V: QueueView + ?Sized>(&mut self, view: &V) -> Option<usize> {
        let n = self.n.min(view.n());
        if n == 0 {
            return None;
        }
        if self.cur >= n {
            self.cur = 0;
            self.credit = 0;
        }
        // Continue the current turn.
        if self.credit > 0 && view.head_len(self.cur).is_some() {
            self.credit -= 1;
            return Some(self.cur);
        }
        // Turn over: next queues in order, wrapping round to `cur` itself last.
        let mut q = self.cur;
        for _ in 0..n {
            q = if q + 1 >= n { 0 } else { q + 1 };
            let w = self.weights[q];
            if w > 0 && view.head_len(q).is_some() {
                self.cur = q;
                self.credit = w - 1;
                return Some(q);
            }
        }
        self.credit = 0;
        // Scavenger: weight-0 queues, round robin.
        let mut s = self.scavenger.min(n - 1);
        for _ in 0..n {
            s = if s + 1 >= n { 0 } else { s + 1 };
            if self.weights[s] == 0 && view.head_len(s).is_some() {
                self.scavenger = s;
                return Some(s);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(w: &mut Wrr, v: &[Option<u32>], picks: usize) -> Vec<usize> {
        (0..picks).map(|_| w.pick(v).unwrap()).collect()
    }

    #[test]
    fn shares_and_order_when_backlogged() {
        let mut w = Wrr::new(&[3, 1]);
        let v = [Some(100), Some(100)];
        let seq = run(&mut w, &v, 8);
        assert_eq!(seq, vec![0, 0, 0, 1, 0, 0, 0, 1]);
    }

    #[test]
    fn skips_empty_without_losing_position() {
        let mut w = Wrr::new(&[1, 1, 1]);
        let all = [Some(1), Some(1), Some(1)];
        assert_eq!(w.pick(&all[..]), Some(0));
        // Queue 1 empty: the rotation goes on to 2, then wraps to 0 (not back to 1 first).
        let no1 = [Some(1), None, Some(1)];
        assert_eq!(w.pick(&no1[..]), Some(2));
        assert_eq!(w.pick(&all[..]), Some(0));
        assert_eq!(w.pick(&all[..]), Some(1));
    }

    #[test]
    fn empty_mid_turn_forfeits_credit() {
        let mut w = Wrr::new(&[4, 1]);
        let v = [Some(1), Some(1)];
        assert_eq!(w.pick(&v[..]), Some(0));
        let only1 = [None, Some(1)];
        assert_eq!(w.pick(&only1[..]), Some(1));
        // Queue 0 gets a fresh turn of 4.
        assert_eq!(run(&mut w, &v, 5), vec![0, 0, 0, 0, 1]);
    }

    #[test]
    fn weight_zero_is_scavenger() {
        let mut w = Wrr::new(&[0, 2, 0]);
        let v = [Some(1), Some(1), Some(1)];
        for _ in 0..10 {
            assert_eq!(w.pick(&v[..]), Some(1));
        }
        let v = [Some(1), None, Some(1)];
        let seq = run(&mut w, &v, 4);
        assert_eq!(seq, vec![2, 0, 2, 0]);
        let v: [Option<u32>; 3] = [None; 3];
        assert_eq!(w.pick(&v[..]), None);
    }

    #[test]
    fn set_weight_at_run_time() {
        // Reflex N_throttle:1 with queue 0 = Normal, 1 = Controlled.
        let mut w = Wrr::new(&[1, 1]);
        let v = [Some(1), Some(1)];
        assert_eq!(run(&mut w, &v, 4), vec![0, 1, 0, 1]);
        assert!(w.set_weight(0, 3));
        assert_eq!(w.weight(0), 3);
        assert_eq!(run(&mut w, &v, 8), vec![0, 0, 0, 1, 0, 0, 0, 1]);
        // Lowering the weight of the queue in its turn clamps its remaining credit now.
        assert_eq!(w.pick(&v[..]), Some(0)); // 2 left at weight 3
        assert!(w.set_weight(0, 1)); // 1 left
        assert_eq!(w.pick(&v[..]), Some(0));
        assert_eq!(w.pick(&v[..]), Some(1));
        assert!(!w.set_weight(5, 1));
        assert_eq!(w.weight(5), 0);
    }

    #[test]
    fn view_smaller_or_larger_than_weights() {
        let mut w = Wrr::new(&[1, 1, 1, 1]);
        let v = [Some(1), Some(1)];
        for _ in 0..6 {
            assert!(w.pick(&v[..]).unwrap() < 2);
        }
        let mut w = Wrr::new(&[]);
        assert_eq!(w.pick(&v[..]), None);
    }

    proptest! {
        /// With every queue backlogged, after N picks queue i has been served
        /// N*w_i/W packets, within one turn (w_i).
        #[test]
        fn shares_within_one_turn(weights in proptest::collection::vec(1u32..20, 1..8), n in 1usize..5000) {
            let mut w = Wrr::new(&weights);
            let v: Vec<Option<u32>> = weights.iter().map(|_| Some(100)).collect();
            let mut count = vec![0u64; weights.len()];
            let total_w: u64 = weights.iter().map(|&x| x as u64).sum();
            for _ in 0..n {
                count[w.pick(&v[..]).unwrap()] += 1;
            }
            for (i, &c) in count.iter().enumerate() {
                let wi = weights[i] as u64;
                let diff = (c * total_w).abs_diff(n as u64 * wi);
                prop_assert!(diff <= wi * total_w, "q{i}: {c} of {n}, weights {weights:?}");
            }
        }

        /// Work conservation under arbitrary eligibility changes and weights (including 0).
        #[test]
        fn never_idle_when_eligible(
            weights in proptest::collection::vec(0u32..4, 1..10),
            steps in proptest::collection::vec((any::<u16>(), 0usize..10, 0u32..4), 1..300),
        ) {
            let mut w = Wrr::new(&weights);
            let n = weights.len();
            for (bits, q, nw) in steps {
                w.set_weight(q % n, nw);
                let v: Vec<Option<u32>> = (0..n).map(|i| if bits & (1 << i) != 0 { Some(64) } else { None }).collect();
                let any = v.iter().any(|x| x.is_some());
                match w.pick(&v[..]) {
                    None => prop_assert!(!any),
                    Some(q) => prop_assert!(v[q].is_some()),
                }
            }
        }
    }
}
