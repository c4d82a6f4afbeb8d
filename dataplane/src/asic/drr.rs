//! Deficit round robin in bytes (Shreedhar & Varghese, "Efficient fair queuing using deficit round
//! robin", 1995), work-conserving.
//!
//! Queues are visited in index order. At the start of its visit an eligible queue's deficit grows
//! by its quantum; it then sends head packets while the head fits in the deficit (each pick
//! subtracts the head length); when the head no longer fits the visit ends and the deficit is kept
//! for the next round. A queue found empty or ineligible at a pick has its deficit reset to 0 (S&V
//! reset on empty; a paused queue is treated the same, so it cannot bank credit while paused).
//! Because the scheduler only sees queues at pick time, a queue that empties and refills between
//! two picks keeps its deficit.
//!
//! Work conservation with small quanta: when a whole round passes without any head fitting, the
//! scheduler fast-forwards by the number of empty rounds needed for the first head to fit (adding
//! the same number of quanta to every eligible queue, exactly as those rounds would), so one `pick`
//! always finds a packet if any eligible queue has a positive quantum, in bounded time.
//!
//! Quantum 0: the queue gets no credit; it is served (round robin among quantum-0 queues) only when
//! no queue with a positive quantum is eligible ("scavenger"), which keeps the scheduler
//! work-conserving.

use super::scheduler::{QueueView, Scheduler};

/// Most queues a [`Drr`] can schedule.
pub const DRR_MAX_QUEUES: usize = 64;

/// Deficit round robin over up to [`DRR_MAX_QUEUES`] queues (fixed-size state, no allocation).
#[derive(Clone, Debug)]
pub struct Drr {
    quantum: [u32; DRR_MAX_QUEUES],
    deficit: [u64; DRR_MAX_QUEUES],
    n: usize,
    cur: usize,
    /// `cur` has received its quantum for the current visit.
    visiting: bool,
    scavenger: usize,
}

impl Drr {
    /// A scheduler over `quanta.len()` queues (at most [`DRR_MAX_QUEUES`]; extra quanta are
    /// ignored), quantum = bytes of credit per round.
    pub fn new(quanta: &[u32]) -> Self {
        let n = quanta.len().min(DRR_MAX_QUEUES);
        let mut q = [0u32; DRR_MAX_QUEUES];
        q[..n].copy_from_slice(&quanta[..n]);
        Drr {
            quantum: q,
            deficit: [0; DRR_MAX_QUEUES],
            n,
            cur: 0,
            visiting: false,
            scavenger: 0,
        }
    }

    /// Number of queues.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Quantum of queue `q` (0 when out of range).
    pub fn quantum(&self, q: usize) -> u32 {
        if q < self.n {
            self.quantum[q]
        } else {
            0
        }
    }

    /// Current deficit of queue `q` in bytes (0 when out of range).
    pub fn deficit(&self, q: usize) -> u64 {
        if q < self.n {
            self.deficit[q]
        } else {
            0
        }
    }

    /// Change the quantum of queue `q` at run time; it applies from the queue's next visit (the
    /// deficit already granted is kept). Returns `false` (nothing changed) if `q` is out of range.
    pub fn set_quantum(&mut self, q: usize, quantum: u32) -> bool {
        if q >= self.n {
            return false;
        }
        self.quantum[q] = quantum;
        true
    }

    #[inline]
    fn advance(&mut self, n: usize) {
        self.cur = if self.cur + 1 >= n { 0 } else { self.cur + 1 };
        self.visiting = false;
    }

    /// Visit `cur` once: `Some(cur)` if its head fits the deficit (charged), else end its visit.
    #[inline]
    fn visit<V: QueueView + ?Sized>(&mut self, view: &V, n: usize) -> Option<usize> {
        let q = self.cur;
        match view.head_len(q) {
            Some(len) if self.quantum[q] > 0 => {
                if !self.visiting {
                    self.deficit[q] = self.deficit[q].saturating_add(self.quantum[q] as u64);
                    self.visiting = true;
                }
                if len as u64 <= self.deficit[q] {
                    self.deficit[q] -= len as u64;
                    return Some(q);
                }
            }
            Some(_) => {}
            None => self.deficit[q] = 0,
        }
        self.advance(n);
        None
    }
}

impl Scheduler for Drr {
    fn pick<V: QueueView + ?Sized>(&mut self, view: &V) -> Option<usize> {
        let n = self.n.min(view.n());
        if n == 0 {
            return None;
        }
        if self.cur >= n {
            self.cur = 0;
            self.visiting = false;
        }
        // The current visit (possibly continuing), then one full round of fresh visits.
        for _ in 0..=n {
            if let Some(q) = self.visit(view, n) {
                return Some(q);
            }
        }
        // No head fit during a whole round: fast-forward the empty rounds the first head needs.
        let mut rounds = u64::MAX;
        for q in 0..n {
            if let (Some(len), qu) = (view.head_len(q), self.quantum[q] as u64) {
                if qu > 0 {
                    let need = (len as u64).saturating_sub(self.deficit[q]);
                    rounds = rounds.min(need.div_ceil(qu));
                }
            }
        }
        if rounds != u64::MAX {
            let extra = rounds.saturating_sub(1);
            for q in 0..n {
                if view.head_len(q).is_some() {
                    let add = extra.saturating_mul(self.quantum[q] as u64);
                    self.deficit[q] = self.deficit[q].saturating_add(add);
                }
            }
            for _ in 0..n {
                if let Some(q) = self.visit(view, n) {
                    return Some(q);
                }
            }
        }
        // Scavenger: quantum-0 queues, round robin.
        let mut s = self.scavenger.min(n - 1);
        for _ in 0..n {
            s = if s + 1 >= n { 0 } else { s + 1 };
            if self.quantum[s] == 0 && view.head_len(s).is_some() {
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

    #[test]
    fn byte_fair_with_different_packet_sizes() {
        // Equal quanta, queue 0 sends 1500 B packets, queue 1 sends 500 B packets: equal bytes.
        let mut d = Drr::new(&[1500, 1500]);
        let v = [Some(1500), Some(500)];
        let mut bytes = [0u64; 2];
        for _ in 0..4000 {
            let q = d.pick(&v[..]).unwrap();
            bytes[q] += v[q].unwrap() as u64;
        }
        assert!(bytes[0].abs_diff(bytes[1]) <= 1500, "{bytes:?}");
    }

    #[test]
    fn quanta_ratio() {
        let mut d = Drr::new(&[3000, 1000]);
        let v = [Some(1000), Some(1000)];
        let seq: Vec<usize> = (0..8).map(|_| d.pick(&v[..]).unwrap()).collect();
        assert_eq!(seq, vec![0, 0, 0, 1, 0, 0, 0, 1]);
    }

    #[test]
    fn small_quantum_fast_forwards() {
        // Quantum 100 B, 9000 B jumbo heads: still one pick per call, alternating.
        let mut d = Drr::new(&[100, 100]);
        let v = [Some(9000), Some(9000)];
        let seq: Vec<usize> = (0..4).map(|_| d.pick(&v[..]).unwrap()).collect();
        assert_eq!(seq, vec![0, 1, 0, 1]);
        assert!(d.deficit(0) < 9000 && d.deficit(1) < 9000);
    }

    #[test]
    fn empty_resets_deficit() {
        let mut d = Drr::new(&[1000, 1000]);
        assert_eq!(d.pick(&[Some(600), Some(600)][..]), Some(0));
        assert_eq!(d.deficit(0), 400);
        // Head 600 does not fit 400: visit ends, queue 1 served.
        assert_eq!(d.pick(&[Some(600), Some(600)][..]), Some(1));
        // Queue 0 now empty when visited: deficit reset.
        assert_eq!(d.pick(&[None, Some(600)][..]), Some(1));
        assert_eq!(d.deficit(0), 0);
    }

    #[test]
    fn quantum_zero_scavenger_and_set_quantum() {
        let mut d = Drr::new(&[0, 500]);
        for _ in 0..5 {
            assert_eq!(d.pick(&[Some(100), Some(100)][..]), Some(1));
        }
        assert_eq!(d.pick(&[Some(100), None][..]), Some(0));
        assert_eq!(d.pick(&[None, None][..]), None);
        assert!(d.set_quantum(0, 500));
        assert_eq!(d.quantum(0), 500);
        assert!(!d.set_quantum(2, 1));
        let mut seen = [0u32; 2];
        for _ in 0..100 {
            seen[d.pick(&[Some(100), Some(100)][..]).unwrap()] += 1;
        }
        assert!(seen[0].abs_diff(seen[1]) <= 5, "{seen:?}");
    }

    proptest! {
        /// Backlogged queues with random fixed packet sizes get bytes in proportion to their quanta,
        /// within a few packets.
        #[test]
        fn byte_shares_within_bounds(
            cfg in proptest::collection::vec((1u32..4000, 64u32..9000), 1..6),
            picks in 1000usize..6000,
        ) {
            let quanta: Vec<u32> = cfg.iter().map(|c| c.0).collect();
            let v: Vec<Option<u32>> = cfg.iter().map(|c| Some(c.1)).collect();
            let mut d = Drr::new(&quanta);
            let mut bytes = vec![0u64; cfg.len()];
            for _ in 0..picks {
                let q = d.pick(&v[..]).unwrap();
                bytes[q] += v[q].unwrap() as u64;
            }
            let total: u64 = bytes.iter().sum();
            let qsum: u64 = quanta.iter().map(|&x| x as u64).sum();
            let maxpkt = cfg.iter().map(|c| c.1 as u64).max().unwrap();
            let n = cfg.len() as u64;
            for i in 0..cfg.len() {
                // bytes_i ~ R*q_i (+/- a quantum and a packet); total ~ R*Q (+/- n packets);
                // plus the fast-forward slack of one round of the smallest quantum.
                let qi = quanta[i] as u64;
                let diff = (bytes[i] * qsum).abs_diff(total * qi);
                let bound = (2 * (qi + maxpkt)) * qsum + (n + 1) * maxpkt * qi;
                prop_assert!(diff <= bound, "q{i} {bytes:?} {quanta:?} {v:?}");
            }
        }

        #[test]
        fn never_idle_when_eligible(
            quanta in proptest::collection::vec(0u32..3000, 1..10),
            steps in proptest::collection::vec((any::<u16>(), 64u32..9001, 0usize..10, 0u32..3000), 1..300),
        ) {
            let mut d = Drr::new(&quanta);
            let n = quanta.len();
            for (bits, len, q, nq) in steps {
                d.set_quantum(q % n, nq);
                let v: Vec<Option<u32>> = (0..n).map(|i| if bits & (1 << i) != 0 { Some(len) } else { None }).collect();
                let any = v.iter().any(|x| x.is_some());
                match d.pick(&v[..]) {
                    None => prop_assert!(!any),
                    Some(q) => prop_assert!(v[q].is_some()),
                }
            }
        }
    }
}
