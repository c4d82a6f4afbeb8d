//! NSF: Near-Source Feedback at the source ESW's egress (paper 003, section III-C, Fig. 5).
//!
//! For each inter-DC data packet leaving through a WAN port, `T_src = now - ts` (the packet's
//! transmission timestamp) drives a per-flow state machine:
//!
//! | state | `T_src > T_src_thresh` | `T_src <= T_src_thresh` |
//! |---|---|---|
//! | Silent | Active | Silent |
//! | Active | Active | Cooling with the counter at `N_cool` (Silent at once if `N_cool` = 0) |
//! | Cooling(c) | Active (our choice) | c - 1: Silent at 0, else Cooling(c - 1) |
//!
//! A pseudo-ACK goes out for the packet when the state after the step is Active or Cooling and
//! the flow's last pseudo-ACK is at least `T_interval` old (the first on entering Active at
//! once). Silent flows take no memory: the flow table holds only Active and Cooling flows (a
//! flow back to Silent leaves it), so a full table can only stop new flows from leaving Silent
//! (counted). Flows idle for `flow_idle_timeout_ns` are aged out a few at a time on every packet.

use super::FlowKey;
use longhaul_dataplane::asic::table::{ExactTable, TableConfig, WhenFull};
use longhaul_dataplane::engine::TableCounters;
use longhaul_dataplane::time::Nanos;

/// NSF's parameters (`[reflex.nsf]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NsfParams {
    pub t_src_thresh_ns: Nanos,
    pub t_interval_ns: Nanos,
    pub n_cool: u32,
    pub flow_capacity: usize,
    pub flow_idle_timeout_ns: Nanos,
}

/// A flow's state (Fig. 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NsfState {
    Silent,
    Active,
    /// Cooling, with the counter of low-delay packets still to see before Silent.
    Cooling(u32),
}

/// The per-flow state machine and its pseudo-ACK clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowFsm {
    pub state: NsfState,
    /// When the flow's last pseudo-ACK was generated.
    pub last_ack: Option<Nanos>,
}

impl FlowFsm {
    pub const SILENT: FlowFsm = FlowFsm {
        state: NsfState::Silent,
        last_ack: None,
    };

    /// One data packet with near-source delay `t_src` at `now`: the transition of the table
    /// above, then whether a pseudo-ACK goes out for it (and its time is recorded).
    pub fn step(&mut self, t_src: Nanos, now: Nanos, p: &NsfParams) -> bool {
        let high = t_src > p.t_src_thresh_ns;
        self.state = match (self.state, high) {
            (_, true) => NsfState::Active,
            (NsfState::Silent, false) => NsfState::Silent,
            (NsfState::Active, false) if p.n_cool == 0 => NsfState::Silent,
            (NsfState::Active, false) => NsfState::Cooling(p.n_cool),
            (NsfState::Cooling(c), false) if c <= 1 => NsfState::Silent,
            (NsfState::Cooling(c), false) => NsfState::Cooling(c - 1),
        };
        if self.state == NsfState::Silent {
            self.last_ack = None;
            return false;
        }
        let due = self
            .last_ack
            .is_none_or(|t| now.saturating_sub(t) >= p.t_interval_ns);
        if due {
            self.last_ack = Some(now);
        }
        due
    }
}

longhaul_dataplane::counters! {
    /// NSF's counters (`reflex.nsf.*`).
    #[derive(Copy)]
    pub struct NsfStats: "reflex.nsf" {
        /// Data packets the state machine saw.
        pub data: u64,
        pub to_active: u64,
        pub to_cooling: u64,
        pub to_silent: u64,
        /// Pseudo-ACKs handed to the traffic manager.
        pub pseudo_acks: u64,
        /// Pseudo-ACKs dropped: no route back to the sender.
        pub pseudo_ack_no_route: u64,
        /// Packets whose timestamp was after `now` (taken as `T_src = 0`).
        pub ts_future: u64,
        /// Flows that could not leave Silent: the flow table was full.
        pub flow_table_full: u64,
        /// Pseudo-ACKs lost: no packet buffer.
        pub emit_nobuf: u64,
    }
}

/// NSF's flow table and counters.
pub struct Nsf {
    p: NsfParams,
    flows: ExactTable<FlowKey, FlowFsm>,
    pub stats: NsfStats,
}

/// Idle flows aged out per packet at most.
const EXPIRE_PER_PACKET: usize = 2;

impl Nsf {
    pub fn new(p: NsfParams) -> Self {
        Nsf {
            p,
            flows: ExactTable::new(
                p.flow_capacity,
                TableConfig {
                    when_full: WhenFull::Refuse,
                    idle_timeout: Some(p.flow_idle_timeout_ns),
                },
            ),
            stats: NsfStats::default(),
        }
    }

    pub fn params(&self) -> &NsfParams {
        &self.p
    }

    /// A data packet of `key` leaves through a WAN port at `now` carrying timestamp `ts`:
    /// whether to answer it with a pseudo-ACK.
    pub fn on_data(&mut self, key: FlowKey, ts: Nanos, now: Nanos) -> bool {
        self.stats.data += 1;
        self.flows.expire(now, EXPIRE_PER_PACKET, |_, _| {});
        if ts > now {
            self.stats.ts_future += 1;
        }
        let t_src = now.saturating_sub(ts);
        let p = self.p;
        // A known flow is updated in place (one probe); a Silent one is inserted only when it
        // leaves Silent.
        let (before, fsm, gen) = match self.flows.lookup_mut(&key, now) {
            Some(f) => {
                let before = f.state;
                let gen = f.step(t_src, now, &p);
                (before, *f, gen)
            }
            None => {
                let mut f = FlowFsm::SILENT;
                let gen = f.step(t_src, now, &p);
                (NsfState::Silent, f, gen)
            }
        };
        match (before, fsm.state) {
            (NsfState::Active, NsfState::Active) | (NsfState::Silent, NsfState::Silent) => {}
            (_, NsfState::Active) => self.stats.to_active += 1,
            (NsfState::Active, NsfState::Cooling(_)) => self.stats.to_cooling += 1,
            (_, NsfState::Silent) => self.stats.to_silent += 1,
            _ => {}
        }
        if fsm.state == NsfState::Silent {
            if before != NsfState::Silent {
                self.flows.remove(&key);
            }
            return false;
        }
        if before == NsfState::Silent && self.flows.insert(key, fsm, now).is_err() {
            self.stats.flow_table_full += 1;
            return false;
        }
        gen
    }

    /// [`on_data`](Self::on_data) for a packet whose flow key is not needed: no flow is Active
    /// or Cooling (the table, which holds only those, is empty) and `T_src` keeps the packet's
    /// flow Silent. `true` when it answered, counting what `on_data` would count (the packet,
    /// a timestamp in the future, the table's miss), and no pseudo-ACK is due; `false` (nothing
    /// counted): call `on_data`. Silent flows are the common case, and their key (two 128-bit
    /// addresses) is then never built.
    #[inline]
    pub fn on_data_silent(&mut self, ts: Nanos, now: Nanos) -> bool {
        // `on_data` on an empty table: nothing to expire, a miss, Silent stays Silent.
        if now.saturating_sub(ts) > self.p.t_src_thresh_ns || !self.flows.miss_if_empty() {
            return false;
        }
        self.stats.data += 1;
        self.stats.ts_future += (ts > now) as u64;
        true
    }

    /// The state of `key` (Silent when not in the table).
    pub fn state(&self, key: &FlowKey) -> NsfState {
        self.flows.peek(key).map_or(NsfState::Silent, |f| f.state)
    }

    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }

    pub fn table(&self) -> TableCounters {
        let t = self.flows.stats();
        TableCounters {
            hits: t.hits,
            misses: t.misses,
            entries: self.flows.len() as u64,
            capacity: self.flows.capacity() as u64,
            full_events: t.full_events,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(n_cool: u32) -> NsfParams {
        NsfParams {
            t_src_thresh_ns: 5_000,
            t_interval_ns: 5_000,
            n_cool,
            flow_capacity: 4,
            flow_idle_timeout_ns: 1_000_000,
        }
    }

    /// Every cell of the transition table (docs/reflex.md), with N_cool = 2.
    #[test]
    fn transition_table() {
        let p = params(2);
        use NsfState::*;
        let cases = [
            (Silent, 6_000, Active),
            (Silent, 5_000, Silent), // T_src = thresh is not above it
            (Active, 9_000, Active),
            (Active, 100, Cooling(2)),
            (Cooling(2), 100, Cooling(1)),
            (Cooling(1), 100, Silent),
            (Cooling(2), 7_000, Active),
            (Cooling(1), 7_000, Active),
        ];
        for (from, t_src, to) in cases {
            let mut f = FlowFsm {
                state: from,
                last_ack: None,
            };
            f.step(t_src, 1_000_000, &p);
            assert_eq!(f.state, to, "{from:?} with T_src {t_src}");
        }
        // N_cool = 0: Active goes straight to Silent.
        let mut f = FlowFsm {
            state: Active,
            last_ack: None,
        };
        assert!(!f.step(100, 0, &params(0)));
        assert_eq!(f.state, Silent);
    }

    /// A hand trace with the paper's N_cool = 5 and T_interval = 5 us, packets 1 us apart:
    /// pseudo-ACKs at entry into Active and every 5 us after, through Cooling; the fifth
    /// low-delay packet after the one that turned the flow Cooling ends it without one.
    #[test]
    fn hand_trace_with_table_one_values() {
        let mut nsf = Nsf::new(params(5));
        let key = FlowKey {
            src: 1,
            dst: 2,
            qpn: 3,
        };
        // (time us, T_src us): 2 Silent, 8 Active, then low delays.
        let t_src = [1, 2, 6, 7, 8, 9, 10, 11, 12, 13, 1, 1, 1, 1, 1, 1, 1, 1];
        let mut acks = Vec::new();
        for (i, &d) in t_src.iter().enumerate() {
            let now = 100_000 + i as u64 * 1_000;
            if nsf.on_data(key, now - d * 1_000, now) {
                acks.push(i);
            }
        }
        // Active from packet 2: ACKs at 2 and 7 (5 us later); packet 10 turns it Cooling(5),
        // 11..14 count down to 1 (ACK at 12, 5 us after 7), packet 15 makes it Silent.
        assert_eq!(acks, vec![2, 7, 12]);
        assert_eq!(nsf.state(&key), NsfState::Silent);
        let s = nsf.stats;
        assert_eq!((s.to_active, s.to_cooling, s.to_silent), (1, 1, 1));
        assert_eq!(s.data, t_src.len() as u64);
        assert_eq!(nsf.table().entries, 0, "a Silent flow takes no entry");
    }

    /// The table holds only non-Silent flows; full, a new congested flow stays Silent and is
    /// counted; idle flows age out.
    #[test]
    fn bounded_table_and_idle_expiry() {
        let mut nsf = Nsf::new(params(5));
        let k = |q| FlowKey {
            src: 1,
            dst: 2,
            qpn: q,
        };
        for q in 0..4 {
            assert!(nsf.on_data(k(q), 0, 10_000));
        }
        assert!(!nsf.on_data(k(9), 0, 10_000));
        assert_eq!(nsf.stats.flow_table_full, 1);
        assert_eq!(nsf.state(&k(9)), NsfState::Silent);
        // 1 ms later, two idle flows age out per packet.
        nsf.on_data(k(20), 1_010_000, 1_010_000);
        assert_eq!(nsf.table().entries, 2);
    }

    proptest::proptest! {
        /// `on_data_silent`, then `on_data` when it declines, answers and counts as `on_data`
        /// alone: flows entering and leaving Active and Cooling (so the table fills, empties,
        /// is refused when full and ages out), timestamps in the future, every step compared.
        #[test]
        fn silent_shortcut_matches_on_data(
            steps in proptest::collection::vec(
                (0u32..6, 0u64..12_000, 0u64..3_000, 0u8..20), 1..200),
            n_cool in 0u32..4,
        ) {
            let p = NsfParams { flow_idle_timeout_ns: 20_000, ..params(n_cool) };
            let (mut a, mut b) = (Nsf::new(p), Nsf::new(p));
            let mut now = 1_000_000u64;
            for (flow, delay, gap, kind) in steps {
                // Now and then an idle gap long enough to age flows out.
                now += if kind == 0 { 50_000 } else { gap };
                // Now and then a timestamp after `now`.
                let ts = if kind == 1 { now + delay } else { now - delay };
                let key = FlowKey { src: u128::from(flow % 3), dst: 9, qpn: flow };
                let ra = a.on_data(key, ts, now);
                // `on_data_silent` answered: no pseudo-ACK.
                let rb = !b.on_data_silent(ts, now) && b.on_data(key, ts, now);
                proptest::prop_assert_eq!(ra, rb);
                proptest::prop_assert_eq!(a.stats, b.stats);
                proptest::prop_assert_eq!(a.table(), b.table());
                proptest::prop_assert_eq!(a.state(&key), b.state(&key));
            }
        }
    }
}
