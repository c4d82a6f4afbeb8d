//! THEMIS TRP (pipelines/src/themis/trp.rs) against the paper: Algorithm 1 (Appendix B) step by
//! step against an independent, literal reference model and a hand-computed trace; β expiry;
//! reorder-free recovery (Appendix D) and direct recovery (Appendix E); CNP_Cache before the
//! install; CNP_Store full; PSN wrap-around; flow order through recovery with the recirculation
//! port modelled as a FIFO delay line.

use std::collections::VecDeque;

use longhaul_dataplane::time::{Nanos, NS_PER_US};
use longhaul_pipelines::themis::trp::{
    CnpOutcome, DataVerdict, FlowStatus, Installed, RecoveryMode, Trp, TrpCommand, TrpKey,
    TrpParams,
};
use proptest::prelude::*;

const US: Nanos = NS_PER_US;
const BETA: Nanos = 500 * US;
const PSN_MOD: u32 = 1 << 24;

fn flow(n: u8, qpn: u32) -> TrpKey {
    TrpKey::v4([10, 0, 18, n], qpn)
}

// ---------------------------------------------------------------------------------------------
// Reference model: Algorithm 1 written out literally, one statement per pseudocode line.
// The two readings documented in trp.rs are marked: lines 17-21 fire once per quiet period (only
// while throttled), and line 19's α/2 is floored at 1 (line 5 would otherwise divide by zero).
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RefStatus {
    Normal,
    Throttled,
    Recover,
}

#[derive(Clone, Copy, Debug)]
struct RefFlow {
    cnp_num: u32,
    flow_status: RefStatus,
    cnp_time: Nanos,
    loop_num: u32,
    alpha: u32,
}

impl RefFlow {
    fn new(alpha: u32) -> Self {
        RefFlow {
            cnp_num: 0,
            flow_status: RefStatus::Normal,
            cnp_time: 0,
            loop_num: 0,
            alpha,
        }
    }

    /// One packet. Returns `Some(pkt_loop_num)` for a redirected data packet, `None` otherwise.
    fn step(&mut self, pkt_is_cnp: bool, now: Nanos, beta: Nanos) -> Option<u32> {
        let mut redirected = None;
        if pkt_is_cnp {
            // 1: if pkt is cnp then
            self.cnp_num += 1; // 2
            self.flow_status = RefStatus::Throttled; // 3
            self.cnp_time = now; // 4
            if self.cnp_num % self.alpha == 1 {
                // 5
                self.loop_num += 1; // 6
                self.alpha += 1; // 7
            } // 8
        } else {
            // 9
            if self.flow_status == RefStatus::Throttled || self.flow_status == RefStatus::Recover {
                // 10
                redirected = Some(self.loop_num); // 11, 12
            } // 13-15: else send pkt
        } // 16
        if now - self.cnp_time > beta && self.flow_status == RefStatus::Throttled {
            // 17 (+ once per quiet period)
            self.flow_status = RefStatus::Recover; // 18
            self.alpha = (self.alpha / 2).max(1); // 19 (+ floor at 1)
            self.cnp_num = 0; // 20
        } // 21
        redirected
    }
}

fn same(trp: &Trp, key: &TrpKey, r: &RefFlow) -> Result<(), String> {
    let s = trp.flow(key).ok_or("flow missing")?;
    let status = match s.flow_status {
        FlowStatus::Normal => RefStatus::Normal,
        FlowStatus::Throttled => RefStatus::Throttled,
        FlowStatus::Recover => RefStatus::Recover,
    };
    let got = (s.cnp_num, status, s.cnp_time, s.loop_num, s.alpha);
    let want = (r.cnp_num, r.flow_status, r.cnp_time, r.loop_num, r.alpha);
    if got == want {
        Ok(())
    } else {
        Err(format!("trp {got:?} != reference {want:?}"))
    }
}

/// Hand-computed from Algorithm 1 with α = 5, all CNPs within β of each other:
/// CNP k -> (cnp_num, loop_num, α). Line 5 fires at cnp_num 1 (1 % 5), 7 (7 % 6), then on every
/// CNP (8 % 7, 9 % 8, 10 % 9: once α == cnp_num, the next CNP gives 1).
const HAND_TRACE: [(u32, u32, u32); 10] = [
    (1, 1, 6),
    (2, 1, 6),
    (3, 1, 6),
    (4, 1, 6),
    (5, 1, 6),
    (6, 1, 6),
    (7, 2, 7),
    (8, 3, 8),
    (9, 4, 9),
    (10, 5, 10),
];

#[test]
fn algorithm1_hand_trace() {
    let mut trp = Trp::new(TrpParams::default());
    let k = flow(1, 0x11);
    let mut t = 0;
    for (i, &(cnp_num, loop_num, alpha)) in HAND_TRACE.iter().enumerate() {
        t = i as Nanos * 40 * US;
        trp.on_cnp(k, t);
        if i == 3 {
            // The control plane installs the flow in the middle: the state moves intact.
            assert_eq!(trp.install(k, t + US), Ok(Installed::FromCache));
        }
        let s = trp.flow(&k).unwrap();
        assert_eq!(
            (s.cnp_num, s.loop_num, s.alpha, s.flow_status),
            (cnp_num, loop_num, alpha, FlowStatus::Throttled),
            "after CNP {}",
            i + 1
        );
    }
    // A data packet at exactly β after the last CNP: still throttled (line 17 is strict).
    assert_eq!(trp.on_data(k, 100, 0, t + BETA), DataVerdict::Recirculate);
    assert_eq!(trp.flow(&k).unwrap().flow_status, FlowStatus::Throttled);
    // One ns later: lines 10-12 first (it loops), then lines 17-21: recover, α = 10 / 2, cnp_num 0.
    assert_eq!(
        trp.on_data(k, 101, 0, t + BETA + 1),
        DataVerdict::Recirculate
    );
    let s = trp.flow(&k).unwrap();
    assert_eq!(
        (s.cnp_num, s.loop_num, s.alpha, s.flow_status),
        (0, 5, 5, FlowStatus::Recover)
    );
    assert_eq!(trp.stats().recovered_flows, 1);
    // Congestion again: 1 % 5 == 1, loop_num continues from 5 (never reset), α 6.
    trp.on_cnp(k, t + 2 * BETA);
    let s = trp.flow(&k).unwrap();
    assert_eq!(
        (s.cnp_num, s.loop_num, s.alpha, s.flow_status),
        (1, 6, 6, FlowStatus::Throttled)
    );
    assert_eq!(trp.stats().loop_increments, 6);
}

#[test]
fn alpha_shrinks_over_short_episodes() {
    // One CNP per episode: α 5 -> 6 -> 3 -> 4 -> 2 -> 3 -> 1 -> (1 % 1 never fires) 1 -> 1.
    let mut trp = Trp::new(TrpParams::default());
    let k = flow(1, 1);
    let mut reference = RefFlow::new(5);
    let want = [(6, 3, 1), (4, 2, 2), (3, 1, 3), (1, 1, 3), (1, 1, 3)];
    for (ep, &(after_cnp, after_beta, loop_num)) in want.iter().enumerate() {
        let t0 = ep as Nanos * 10 * BETA;
        trp.on_cnp(k, t0);
        reference.step(true, t0, BETA);
        assert_eq!(trp.flow(&k).unwrap().alpha, after_cnp);
        trp.on_data(k, 0, 0, t0 + BETA + 1);
        reference.step(false, t0 + BETA + 1, BETA);
        let s = trp.flow(&k).unwrap();
        assert_eq!(
            (s.alpha, s.loop_num),
            (after_beta, loop_num),
            "episode {ep}"
        );
        same(&trp, &k, &reference).unwrap();
    }
}

#[derive(Clone, Debug)]
enum Ev {
    Cnp(Nanos),
    Data(Nanos),
    Install,
}

fn ev() -> impl Strategy<Value = Ev> {
    prop_oneof![
        5 => (0u64..300).prop_map(|d| Ev::Cnp(d * US)),
        4 => (0u64..900).prop_map(|d| Ev::Data(d * US)),
        1 => Just(Ev::Install),
    ]
}

proptest! {
    /// Any sequence of CNPs and data packets (CNP_Cache before the install, CNP_Store after):
    /// TRP's Algorithm 1 state equals the literal model's after every packet, and a new data
    /// packet of a throttled flow loops iff the model redirects it with pkt_loop_num > 0.
    #[test]
    fn algorithm1_matches_reference(
        evs in proptest::collection::vec(ev(), 1..200),
        alpha in 1u32..8,
        beta_us in 1u64..800,
    ) {
        let beta = beta_us * US;
        let mut trp = Trp::new(TrpParams { alpha_init: alpha, beta_ns: beta, ..TrpParams::default() });
        let k = flow(7, 0xabcdef);
        let mut reference: Option<RefFlow> = None;
        let mut now: Nanos = 1;
        let mut psn = 0u32;
        for e in evs {
            match e {
                Ev::Cnp(dt) => {
                    now += dt;
                    trp.on_cnp(k, now);
                    reference.get_or_insert_with(|| RefFlow::new(alpha)).step(true, now, beta);
                }
                Ev::Data(dt) => {
                    now += dt;
                    psn += 1;
                    let before = reference.map(|r| r.flow_status);
                    let v = trp.on_data(k, psn, 0, now);
                    match reference.as_mut() {
                        None => prop_assert_eq!(v, DataVerdict::Forward),
                        Some(r) => {
                            let red = r.step(false, now, beta);
                            if before == Some(RefStatus::Throttled) {
                                let want = if red.unwrap_or(0) > 0 {
                                    DataVerdict::Recirculate
                                } else {
                                    DataVerdict::Forward
                                };
                                prop_assert_eq!(v, want);
                            }
                        }
                    }
                }
                Ev::Install => {
                    if reference.is_some() {
                        prop_assert!(trp.install(k, now).is_ok());
                        prop_assert!(trp.is_installed(&k));
                    }
                }
            }
            if let Some(r) = &reference {
                prop_assert_eq!(same(&trp, &k, r), Ok(()));
            }
        }
    }
}

#[test]
fn beta_expiry_starts_recovery_lazily() {
    let mut trp = Trp::new(TrpParams::default());
    let k = flow(1, 5);
    trp.on_cnp(k, 0);
    trp.install(k, 10 * US).unwrap();
    // Nothing happens without packets (no timers)...
    assert_eq!(trp.flow(&k).unwrap().flow_status, FlowStatus::Throttled);
    // ...the next packet of the flow after β runs lines 17-21.
    trp.on_data(k, 1, 0, 3 * BETA);
    assert_eq!(trp.flow(&k).unwrap().flow_status, FlowStatus::Recover);
    assert_eq!(trp.stats().recovered_flows, 1);
    // A later quiet period does not halve α again.
    let alpha = trp.flow(&k).unwrap().alpha;
    trp.on_data(k, 2, 0, 10 * BETA);
    assert_eq!(trp.flow(&k).unwrap().alpha, alpha);
    assert_eq!(trp.stats().recovered_flows, 1);
}

/// A throttled flow (loop_num 3: CNPs 1, 7 and 8 increment it) whose packets 1..=3 were
/// forwarded, now recovering.
fn recovering(mode: RecoveryMode, first_psn: u32) -> (Trp, TrpKey, Nanos) {
    let mut trp = Trp::new(TrpParams {
        recovery: mode,
        ..TrpParams::default()
    });
    let k = flow(3, 33);
    for i in 0..8 {
        trp.on_cnp(k, i);
    }
    assert_eq!(trp.flow(&k).unwrap().loop_num, 3);
    let mut psn = first_psn;
    for _ in 0..3 {
        for loops in 0..3 {
            assert_eq!(trp.on_data(k, psn, loops, US), DataVerdict::Recirculate);
        }
        assert_eq!(trp.on_data(k, psn, 3, 2 * US), DataVerdict::Forward);
        psn = (psn + 1) % PSN_MOD;
    }
    let now = BETA + 10 * US;
    // The next packet enters recovery (handled as throttled first: one loop, then forwarded).
    assert_eq!(trp.on_data(k, psn, 0, now), DataVerdict::Recirculate);
    assert_eq!(trp.flow(&k).unwrap().flow_status, FlowStatus::Recover);
    assert_eq!(trp.on_data(k, psn, 1, now), DataVerdict::Forward);
    (trp, k, now)
}

#[test]
fn recovery_loops_once_unless_next_psn() {
    let (mut trp, k, now) = recovering(RecoveryMode::ReorderFree, 1);
    // Last forwarded: 4. PSN 6 is not next: it loops once; 5 is next: forwarded at once.
    assert_eq!(trp.on_data(k, 6, 0, now), DataVerdict::Recirculate);
    assert_eq!(trp.on_data(k, 5, 0, now), DataVerdict::Forward);
    // 6 is back from its loop and now follows 5.
    assert_eq!(trp.on_data(k, 6, 1, now), DataVerdict::Forward);
    // From then on the flow runs at full rate: every packet is next.
    for psn in 7..20 {
        assert_eq!(trp.on_data(k, psn, 0, now), DataVerdict::Forward);
    }
    // A packet back from the loop whose predecessor has not been forwarded waits for it (up
    // to loop_num loops in all).
    assert_eq!(trp.on_data(k, 21, 0, now), DataVerdict::Recirculate);
    assert_eq!(trp.on_data(k, 21, 1, now), DataVerdict::Recirculate);
    assert_eq!(trp.on_data(k, 20, 0, now), DataVerdict::Forward);
    assert_eq!(trp.on_data(k, 21, 2, now), DataVerdict::Forward);
    let s = trp.stats();
    assert_eq!(s.recover_waits, 1);
    assert_eq!(s.recover_forced, 0);
    assert!(s.recover_next_psn >= 16);
}

#[test]
fn direct_recovery_forwards_everything() {
    let (mut trp, k, now) = recovering(RecoveryMode::Direct, 1);
    assert_eq!(trp.on_data(k, 6, 0, now), DataVerdict::Forward);
    assert_eq!(trp.on_data(k, 9, 3, now), DataVerdict::Forward);
    assert_eq!(trp.on_data(k, 5, 0, now), DataVerdict::Forward);
    // Algorithm 1's state is the same as in reorder-free mode (only the release differs).
    let (other, k2, _) = recovering(RecoveryMode::ReorderFree, 1);
    let (a, b) = (trp.flow(&k).unwrap(), other.flow(&k2).unwrap());
    assert_eq!(
        (a.cnp_num, a.loop_num, a.alpha, a.flow_status),
        (b.cnp_num, b.loop_num, b.alpha, b.flow_status)
    );
    // A new CNP throttles it again.
    trp.on_cnp(k, now + US);
    assert_eq!(
        trp.on_data(k, 10, 0, now + 2 * US),
        DataVerdict::Recirculate
    );
}

#[test]
fn psn_wraps_at_2_pow_24() {
    // Packets 0xfffffd, 0xfffffe, 0xffffff forwarded, 0 entered recovery and was forwarded.
    let (mut trp, k, now) = recovering(RecoveryMode::ReorderFree, PSN_MOD - 3);
    assert_eq!(trp.flow(&k).unwrap().last_fwd_psn, Some(0));
    assert_eq!(trp.on_data(k, 1, 0, now), DataVerdict::Forward);
    // Bits above 24 are ignored; 3 is ahead of 2 across nothing, 2 is next.
    assert_eq!(trp.on_data(k, 3, 0, now), DataVerdict::Recirculate);
    assert_eq!(
        trp.on_data(k, 2 | 0xff00_0000, 0, now),
        DataVerdict::Forward
    );
    assert_eq!(trp.on_data(k, 3, 1, now), DataVerdict::Forward);

    // The wrap itself: last forwarded 0xffffff, next is 0.
    let (mut trp, k, now) = recovering(RecoveryMode::ReorderFree, PSN_MOD - 4);
    assert_eq!(trp.flow(&k).unwrap().last_fwd_psn, Some(PSN_MOD - 1));
    assert_eq!(trp.on_data(k, 1, 0, now), DataVerdict::Recirculate);
    assert_eq!(trp.on_data(k, 0, 0, now), DataVerdict::Forward);
    assert_eq!(trp.on_data(k, 1, 1, now), DataVerdict::Forward);
    // A packet back from the loop just behind the wrap is not "ahead": no wait.
    assert_eq!(trp.on_data(k, PSN_MOD - 2, 1, now), DataVerdict::Forward);
}

#[test]
fn other_flows_untouched() {
    let mut trp = Trp::new(TrpParams::default());
    let target = flow(1, 100);
    let same_ip = flow(1, 101);
    let same_qpn = flow(2, 100);
    let v6 = TrpKey::v6(
        [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        100,
    );
    for i in 0..30 {
        trp.on_cnp(target, i * 20 * US);
        if i == 2 {
            trp.install(target, i * 20 * US + 5 * US).unwrap();
        }
        for (n, other) in [same_ip, same_qpn, v6].into_iter().enumerate() {
            assert_eq!(
                trp.on_data(other, i as u32, 0, i * 20 * US + n as Nanos),
                DataVerdict::Forward
            );
            assert_eq!(trp.flow(&other), None);
        }
        assert_eq!(
            trp.on_data(target, i as u32, 0, i * 20 * US + 9),
            DataVerdict::Recirculate
        );
    }
    let s = trp.stats();
    assert_eq!(s.throttled_pkts, 30);
    assert_eq!(s.data_cache_hits + s.data_store_hits, 30);
}

#[test]
fn cnp_cache_throttles_before_install() {
    let mut trp = Trp::new(TrpParams::default());
    let k = flow(4, 44);
    let out = trp.on_cnp(k, 1_000);
    assert!(out.punt());
    assert_eq!(
        out,
        CnpOutcome::Cached {
            index: trp.cache_index(&k)
        }
    );
    assert!(trp.is_cached(&k) && !trp.is_installed(&k));
    // The very next data packet, long before the control plane acts (~1 ms on a Tofino).
    assert_eq!(trp.on_data(k, 1, 0, 1_001), DataVerdict::Recirculate);
    assert_eq!(trp.stats().data_cache_hits, 1);
    // A second CNP before the install is cached (and punted again).
    assert!(trp.on_cnp(k, 2_000).punt());
    // Control: insert CNP_Store entry, then reset the cell.
    assert_eq!(trp.apply(TrpCommand::Install { key: k }, 3_000), Ok(()));
    assert_eq!(trp.apply(TrpCommand::Install { key: k }, 3_001), Ok(()));
    assert!(!trp.is_cached(&k) && trp.is_installed(&k));
    assert_eq!(trp.flow(&k).unwrap().cnp_num, 2);
    assert_eq!(trp.on_data(k, 2, 0, 3_002), DataVerdict::Recirculate);
    assert_eq!(trp.on_cnp(k, 4_000), CnpOutcome::Stored);
    let s = trp.stats();
    assert_eq!((s.cnp_punts, s.installs, s.install_dups), (2, 1, 1));
    assert_eq!((s.data_cache_hits, s.data_store_hits), (1, 1));
}

#[test]
fn store_full_is_counted_and_cache_keeps_throttling() {
    let mut trp = Trp::new(TrpParams {
        cnp_store_capacity: 2,
        ..TrpParams::default()
    });
    let keys = [flow(1, 1), flow(2, 2), flow(3, 3)];
    let idx: Vec<usize> = keys.iter().map(|k| trp.cache_index(k)).collect();
    assert!(idx[0] != idx[1] && idx[1] != idx[2] && idx[0] != idx[2]);
    for (i, k) in keys.iter().enumerate() {
        trp.on_cnp(*k, i as Nanos);
    }
    assert!(trp.install(keys[0], 10).is_ok());
    assert!(trp.install(keys[1], 10).is_ok());
    assert!(trp.install(keys[2], 10).is_err());
    assert_eq!(
        trp.apply(TrpCommand::Install { key: keys[2] }, 11),
        Err("CNP_Store full")
    );
    assert_eq!(trp.stats().store_full, 2);
    assert_eq!(trp.store_stats().full_events, 2);
    let mut full = 0;
    trp.tables(&mut |_, c| full = c.full_events);
    assert_eq!(full, 2);
    assert!(trp.is_cached(&keys[2]));
    assert_eq!(trp.on_data(keys[2], 1, 0, 20), DataVerdict::Recirculate);
    // Room again after a remove.
    assert_eq!(trp.apply(TrpCommand::Remove { key: keys[0] }, 30), Ok(()));
    assert_eq!(trp.install(keys[2], 31), Ok(Installed::FromCache));
}

// ---------------------------------------------------------------------------------------------
// Order through throttling and recovery: the recirculation port as a FIFO delay line.
// ---------------------------------------------------------------------------------------------

struct Sim {
    /// Data packets: one every `gap`, PSNs from `first_psn`; from packet `slow_from` on, one
    /// every `slow_gap` (the sender has cut its rate after the CNPs).
    pkts: u32,
    gap: Nanos,
    slow_from: u32,
    slow_gap: Nanos,
    first_psn: u32,
    /// CNPs: one every `cnp_gap` from time 0, `cnps` of them.
    cnps: u32,
    cnp_gap: Nanos,
    /// The loop: serialization per packet and fixed delay.
    loop_ser: Nanos,
    loop_delay: Nanos,
    /// Control-plane latency between a punt and its install.
    install_latency: Nanos,
    mode: RecoveryMode,
    /// Every this-many-th packet sent into the loop is dropped there (a full loop); 0: none.
    loop_drop_every: u32,
}

struct SimOut {
    /// (PSN, loops done) in forwarding order.
    forwarded: Vec<(u32, u8)>,
    trp: Trp,
}

fn run(sim: &Sim) -> SimOut {
    let mut trp = Trp::new(TrpParams {
        recovery: sim.mode,
        ..TrpParams::default()
    });
    let k = flow(9, 0x99);
    // Loop FIFO of (return time, psn, loops done).
    let mut lp: VecDeque<(Nanos, u32, u8)> = VecDeque::new();
    let mut busy: Nanos = 0;
    let mut installs: VecDeque<Nanos> = VecDeque::new();
    let mut forwarded = Vec::new();
    let mut looped = 0u32;
    let (mut next_pkt, mut next_cnp) = (0u32, 0u32);
    let mut t_next_pkt: Nanos = 1;
    loop {
        let t_pkt = (next_pkt < sim.pkts).then_some(t_next_pkt);
        let t_cnp = (next_cnp < sim.cnps).then(|| next_cnp as Nanos * sim.cnp_gap);
        let t_ret = lp.front().map(|e| e.0);
        let t_ins = installs.front().copied();
        let Some(now) = [t_ins, t_cnp, t_ret, t_pkt].into_iter().flatten().min() else {
            break;
        };
        // Ties: control, CNPs, loop returns, then new arrivals.
        let (psn, loops) = if t_ins == Some(now) {
            installs.pop_front();
            trp.install(k, now).unwrap();
            continue;
        } else if t_cnp == Some(now) {
            next_cnp += 1;
            if trp.on_cnp(k, now).punt() {
                installs.push_back(now + sim.install_latency);
            }
            continue;
        } else if t_ret == Some(now) {
            let (_, psn, loops) = lp.pop_front().unwrap();
            (psn, loops + 1)
        } else {
            next_pkt += 1;
            t_next_pkt += if next_pkt >= sim.slow_from {
                sim.slow_gap
            } else {
                sim.gap
            };
            ((sim.first_psn + next_pkt - 1) % PSN_MOD, 0)
        };
        match trp.on_data(k, psn, loops, now) {
            DataVerdict::Forward => forwarded.push((psn, loops)),
            DataVerdict::Recirculate => {
                looped += 1;
                if sim.loop_drop_every > 0 && looped.is_multiple_of(sim.loop_drop_every) {
                    continue;
                }
                let start = now.max(busy);
                busy = start + sim.loop_ser;
                lp.push_back((busy + sim.loop_delay, psn, loops));
            }
        }
    }
    SimOut { forwarded, trp }
}

fn in_order(sim: &Sim, out: &SimOut) -> bool {
    out.forwarded.len() == sim.pkts as usize
        && out
            .forwarded
            .iter()
            .enumerate()
            .all(|(i, &(psn, _))| psn == (sim.first_psn + i as u32) % PSN_MOD)
}

fn base_sim(mode: RecoveryMode) -> Sim {
    Sim {
        pkts: 3_000,
        gap: US,
        slow_from: u32::MAX,
        slow_gap: US,
        first_psn: PSN_MOD - 1_000,
        cnps: 12,
        cnp_gap: 50 * US,
        loop_ser: 100,
        loop_delay: 3 * US,
        install_latency: 20 * US,
        mode,
        loop_drop_every: 0,
    }
}

#[test]
fn reorder_free_recovery_keeps_order() {
    let sim = base_sim(RecoveryMode::ReorderFree);
    let out = run(&sim);
    assert!(in_order(&sim, &out), "forwarded out of order");
    let s = out.trp.stats();
    assert!(s.recovered_flows == 1 && s.recover_forced == 0);
    let st = out.trp.flow(&flow(9, 0x99)).unwrap();
    assert_eq!(st.flow_status, FlowStatus::Recover);
    assert!(st.loop_num >= 5, "loop_num {}", st.loop_num);
    // Throttled packets looped loop_num times. The sender keeps sending faster (1 us) than a
    // loop takes (3.1 us), so order can only be kept by keeping each packet's delay: no packet
    // loops more than loop_num times, none is forced out (trp.rs, point 7).
    assert!(out.forwarded.iter().any(|&(_, l)| l as u32 == st.loop_num));
    assert!(out.forwarded.iter().all(|&(_, l)| l as u32 <= st.loop_num));
    assert_eq!(
        st.last_fwd_psn,
        Some((sim.first_psn + sim.pkts - 1) % PSN_MOD)
    );
}

#[test]
fn reorder_free_recovery_drains_once_the_sender_slows() {
    // The sender has cut its rate (DCQCN, on the receiver's CNPs) by the time TRP recovers:
    // packets 1300.. arrive every 4 us, more than a loop takes, so each one waits less than its
    // predecessor until packets are forwarded directly again, in order.
    let sim = Sim {
        slow_from: 1_300,
        slow_gap: 4 * US,
        ..base_sim(RecoveryMode::ReorderFree)
    };
    let out = run(&sim);
    assert!(in_order(&sim, &out));
    assert_eq!(out.trp.stats().recover_forced, 0);
    assert!(out.forwarded[1_400..].iter().all(|&(_, l)| l == 0));
    assert!(out.trp.stats().recover_next_psn > 1_500);
}

#[test]
fn recovery_never_holds_a_packet_longer_than_throttling_would() {
    // The loop drops one packet in 50 (full): the packets behind each hole wait for it, but no
    // packet loops more than loop_num times (the authors' bound, trp.rs point 7), so a lossy
    // loop does not fill up with packets waiting for predecessors that will never come.
    let sim = Sim {
        loop_drop_every: 50,
        ..base_sim(RecoveryMode::ReorderFree)
    };
    let out = run(&sim);
    let st = out.trp.flow(&flow(9, 0x99)).unwrap();
    assert_eq!(st.flow_status, FlowStatus::Recover);
    let most = out.forwarded.iter().map(|&(_, l)| l as u32).max().unwrap();
    assert!(
        most <= st.loop_num,
        "{most} loops > loop_num {}",
        st.loop_num
    );
    assert!(out.trp.stats().recover_forced > 0, "holes were waited for");
    assert!(out.forwarded.len() < sim.pkts as usize);
}

#[test]
fn direct_recovery_reorders_where_reorder_free_does_not() {
    let sim = base_sim(RecoveryMode::Direct);
    let out = run(&sim);
    assert_eq!(out.forwarded.len(), sim.pkts as usize);
    assert!(
        !in_order(&sim, &out),
        "direct recovery is expected to reorder here"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Reorder-free recovery never reorders a lossless flow, whatever the rates, delays, CNP
    /// pattern and PSN start (including across the 2^24 wrap).
    #[test]
    fn reorder_free_never_reorders(
        gap in 200u64..3_000,
        slow_gap in 200u64..30_000,
        cnps in 1u32..40,
        cnp_gap_us in 5u64..200,
        loop_ser in 0u64..1_500,
        loop_delay in 500u64..20_000,
        install_latency_us in 0u64..2_000,
        first_psn in prop_oneof![Just(PSN_MOD - 500), 0u32..PSN_MOD],
    ) {
        let sim = Sim {
            pkts: 2_000,
            gap,
            slow_from: 1_000,
            slow_gap,
            first_psn,
            cnps,
            cnp_gap: cnp_gap_us * US,
            loop_ser,
            loop_delay,
            install_latency: install_latency_us * US,
            mode: RecoveryMode::ReorderFree,
            loop_drop_every: 0,
        };
        let out = run(&sim);
        prop_assert!(in_order(&sim, &out));
        prop_assert_eq!(out.trp.stats().recover_forced, 0);
    }
}
