//! Themis-D against a straightforward reference model (paper 002, Algorithm 1 and section 4.3)
//! on random spray / loss / reorder sequences, with PSNs crossing 2^24.
//!
//! The simulation: a sender sprays PSNs over N FIFO paths (on-policy packets on path `PSN mod N`,
//! a few off-policy packets on a random path, as Themis-S's rerouting and avoidance do), paths
//! lose packets and deliver in a random interleaving; an RNIC-SR receiver (one NAK per ePSN,
//! ACK on every in-order advance) answers. Every data packet, ACK and NAK goes through both
//! Themis-D and the reference, which keeps the set of PSNs delivered and the per-path maximum in
//! unbounded integers (no bitmap, no wrap). Their verdicts must agree, and the reference's own
//! soundness is checked: an invalid NAK's packet was delivered, a valid NAK's packet was not and a
//! later one on its path was.

use longhaul_dataplane::asic::rng::Rng;
use longhaul_pipelines::spray::dest::{DataOutcome, DestParams, NackClass, NackFields, ThemisD};
use proptest::prelude::*;
use std::collections::{HashSet, VecDeque};

const PSN_SPACE: u64 = 1 << 24;

fn psn24(x: u64) -> u32 {
    (x % PSN_SPACE) as u32
}

/// The reference: Algorithm 1 over unbounded PSNs.
struct Reference {
    n: u64,
    threshold: u64,
    delivered: HashSet<u64>,
    path_max: Vec<Option<u64>>,
    /// Highest ePSN the RNIC reported.
    start: u64,
    stash: Option<u64>,
}

impl Reference {
    fn path(&self, psn: u64) -> usize {
        (u64::from(psn24(psn)) % self.n) as usize
    }

    fn on_data(&mut self, psn: u64, on_policy: bool) -> Option<(u64, bool)> {
        self.delivered.insert(psn);
        let p = self.path(psn);
        if on_policy {
            self.path_max[p] = Some(self.path_max[p].map_or(psn, |m| m.max(psn)));
        }
        let s = self.stash?;
        if psn == s {
            self.stash = None;
            return None;
        }
        let out = if psn > s && on_policy && p == self.path(s) {
            Some((s, false))
        } else if psn > s && psn - s > self.threshold {
            Some((s, true))
        } else {
            None
        };
        if out.is_some() {
            self.stash = None;
        }
        out
    }

    fn on_nack(&mut self, e: u64) -> NackClass {
        let class = if e < self.start || self.delivered.contains(&e) {
            NackClass::Invalid
        } else if self.path_max[self.path(e)].is_some_and(|m| m > e) {
            NackClass::Valid
        } else {
            NackClass::Undetermined
        };
        match class {
            NackClass::Valid => {
                if self.stash.is_some_and(|s| e >= s) {
                    self.stash = None;
                }
            }
            NackClass::Undetermined => {
                if self.stash.is_none_or(|s| e >= s) {
                    self.stash = Some(e);
                }
            }
            NackClass::Invalid => {}
        }
        self.start = self.start.max(e);
        class
    }

    fn on_ack(&mut self, psn: u64) {
        let e = psn + 1;
        if self.stash.is_some_and(|s| s < e) {
            self.stash = None;
        }
        self.start = self.start.max(e);
    }
}

#[derive(Debug, Clone)]
struct Case {
    seed: u64,
    paths: u32,
    threshold: u32,
    loss_permille: u32,
    off_policy_permille: u32,
    start_below_wrap: u64,
    packets: u64,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        1u32..=8,
        8u32..=60,
        0u32..=80,
        0u32..=100,
        0u64..=400,
        100u64..=600,
    )
        .prop_map(
            |(seed, paths, threshold, loss_permille, off_policy_permille, below, packets)| Case {
                seed,
                paths,
                threshold,
                loss_permille,
                off_policy_permille,
                start_below_wrap: below,
                packets,
            },
        )
}

struct Totals {
    invalid: u64,
    valid: u64,
    undetermined: u64,
    regenerated: u64,
}

fn simulate(c: &Case) -> Result<Totals, TestCaseError> {
    const W: u64 = 64;
    let mut rng = Rng::new(c.seed);
    let mut d = ThemisD::new(DestParams {
        paths: c.paths,
        window: W as u32,
        ooo_threshold: c.threshold,
        capacity: 2,
    })
    .unwrap();
    let slot = 1;
    let n = u64::from(c.paths);
    let mut r = Reference {
        n,
        threshold: u64::from(c.threshold),
        delivered: HashSet::new(),
        path_max: vec![None; c.paths as usize],
        start: 0,
        stash: None,
    };
    // Unbounded PSNs from s0; the 24-bit PSNs on the wire cross 2^24 for most cases.
    let s0 = PSN_SPACE - c.start_below_wrap + PSN_SPACE;
    let end = s0 + c.packets;
    // The ToR learns the start pointer from the QP's first ACK (see dest.rs).
    d.on_ack(slot, psn24(s0 - 1));
    r.on_ack(s0 - 1);
    let mut queues: Vec<VecDeque<(u64, bool)>> = vec![VecDeque::new(); c.paths as usize];
    let mut next_new = s0;
    let mut retrans: VecDeque<u64> = VecDeque::new();
    // RNIC-SR receiver.
    let mut epsn = s0;
    let mut got: HashSet<u64> = HashSet::new();
    let mut nacked: Option<u64> = None;
    let mut t = Totals {
        invalid: 0,
        valid: 0,
        undetermined: 0,
        regenerated: 0,
    };
    let chance = |rng: &mut Rng, permille: u32| rng.below(1000) < permille;
    // The RNIC's ACKs and NAKs on their way up to the ToR (one FIFO link): true = NAK.
    let mut up: VecDeque<(bool, u64)> = VecDeque::new();
    for _step in 0..200_000 {
        if epsn >= end && up.is_empty() {
            return Ok(t);
        }
        let in_flight = queues.iter().any(|q| !q.is_empty());
        let can_send = !retrans.is_empty() || next_new < end.min(epsn + W);
        let roll = rng.below(3);
        if !up.is_empty() && (roll == 0 || (!in_flight && !can_send)) {
            let Some((is_nak, x)) = up.pop_front() else {
                continue;
            };
            if !is_nak {
                d.on_ack(slot, psn24(x));
                r.on_ack(x);
                continue;
            }
            let cd = d.on_nack(slot, psn24(x), NackFields::default());
            let cr = r.on_nack(x);
            prop_assert_eq!(cd, cr, "NAK ePSN {} ({:#x})", x, psn24(x));
            match cr {
                NackClass::Invalid => {
                    t.invalid += 1;
                    prop_assert!(x < r.start || r.delivered.contains(&x));
                }
                NackClass::Valid => {
                    t.valid += 1;
                    prop_assert!(!r.delivered.contains(&x));
                    retrans.push_back(x);
                }
                NackClass::Undetermined => t.undetermined += 1,
            }
            continue;
        }
        if epsn >= end {
            continue;
        }
        let send = can_send && (!in_flight || roll == 1);
        if send {
            let (psn, mut on_policy) = match retrans.pop_front() {
                // Retransmissions are rerouted (section 4.4): off the PSN's path.
                Some(p) => (p, false),
                None => {
                    next_new += 1;
                    (next_new - 1, true)
                }
            };
            if on_policy && chance(&mut rng, c.off_policy_permille) {
                on_policy = false;
            }
            let path = if on_policy {
                (u64::from(psn24(psn)) % n) as usize
            } else {
                rng.below(c.paths) as usize
            };
            if !chance(&mut rng, c.loss_permille) {
                queues[path].push_back((psn, on_policy));
            }
            continue;
        }
        if !in_flight {
            if up.is_empty() {
                // Timeout: the sender retransmits the receiver's ePSN.
                retrans.push_back(epsn);
            }
            continue;
        }
        // Deliver the head of a random non-empty path (FIFO within a path).
        let k = loop {
            let k = rng.below(c.paths) as usize;
            if !queues[k].is_empty() {
                break k;
            }
        };
        let Some((psn, on_policy)) = queues[k].pop_front() else {
            continue;
        };
        // Themis-D at the ToR's egress, then the RNIC.
        let out_d = d.on_data(slot, psn24(psn), on_policy);
        let out_r = r.on_data(psn, on_policy);
        let out_d = match out_d {
            DataOutcome::None => None,
            DataOutcome::Regenerate { epsn, avoid, .. } => Some((epsn, avoid)),
        };
        prop_assert_eq!(
            out_d,
            out_r.map(|(e, a)| (psn24(e), a)),
            "data {} ({:#x})",
            psn,
            psn24(psn)
        );
        if let Some((e, _)) = out_r {
            t.regenerated += 1;
            retrans.push_back(e);
        }
        got.insert(psn);
        if psn == epsn {
            while got.contains(&epsn) {
                epsn += 1;
            }
            nacked = None;
            up.push_back((false, epsn - 1));
        } else if psn > epsn && nacked != Some(epsn) {
            nacked = Some(epsn);
            up.push_back((true, epsn));
        } else if psn < epsn {
            up.push_back((false, epsn - 1));
        }
    }
    Err(TestCaseError::fail("simulation did not finish"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn themis_d_matches_reference(c in cases()) {
        simulate(&c)?;
    }
}

/// The simulation exercises every class (so the property test above can fail).
#[test]
fn simulation_reaches_every_class() {
    let mut sum = Totals {
        invalid: 0,
        valid: 0,
        undetermined: 0,
        regenerated: 0,
    };
    for seed in 0..40 {
        let c = Case {
            seed,
            paths: 4,
            threshold: 30,
            loss_permille: 40,
            off_policy_permille: 20,
            start_below_wrap: 100,
            packets: 400,
        };
        let t = simulate(&c).unwrap();
        sum.invalid += t.invalid;
        sum.valid += t.valid;
        sum.undetermined += t.undetermined;
        sum.regenerated += t.regenerated;
    }
    assert!(sum.invalid > 0 && sum.valid > 0 && sum.undetermined > 0 && sum.regenerated > 0);
}
