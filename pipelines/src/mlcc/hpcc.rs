//! The INT-driven rate computation MLCC's hosts run on its short loops: HPCC's window update
//! (Li et al., "HPCC: High Precision Congestion Control", SIGCOMM 2019, Algorithm 1), which the
//! MLCC paper's hosts use on INT ("the sender calculates the fair rate of the flow in the
//! sender-side datacenter based on the INT information in the Switch-INT packet", section
//! 3.2.1; the receiver's "update congestion control parameters; calculate dequeue rate
//! R_credit", Algorithm 1 lines 11-12).
//!
//! Per loop (one per QP and loop), with the loop's base RTT `T`:
//! - `MeasureInflight`: for each hop, `u' = min(qlen, qlen_prev) / (B T) + txRate / B` with
//!   `txRate` from the hop's tx bytes and timestamps against the previous sample; the most
//!   loaded hop gives `u` and `tau` (its sample interval, at most `T`);
//!   `U = (1 - tau/T) U + (tau/T) u`, `U` starting at 1 (the HPCC simulator's initial value).
//! - `ComputeWind`: when `U >= eta` or after `max_stage` additive steps,
//!   `W = Wc / (U / eta) + W_AI`, else `W = Wc + W_AI`; the reference window `Wc` (and the
//!   stage) moves only on `update_wc` (once per RTT: HPCC's `seq > lastUpdateSeq`, MLCC's credit
//!   epoch).
//! - Rate `R = W / T`, within `[min_rate, line rate]`.
//!
//! The first sample of a hop only records it (no rate without a previous sample).

/// HPCC's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HpccParams {
    /// The loop's base RTT `T`, ns.
    pub base_rtt_ns: u64,
    /// The line rate (and the initial rate), bit/s.
    pub line_bps: f64,
    /// eta: target utilization (HPCC: 0.95).
    pub eta: f64,
    /// maxStage (HPCC: 5).
    pub max_stage: u32,
    /// Additive increase as a rate, bit/s (`W_AI = R_AI x T`).
    pub rate_ai_bps: f64,
    /// Floor of the rate, bit/s.
    pub min_bps: f64,
}

/// The last sample of one hop.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct HopSample {
    node: u32,
    ts: u64,
    tx_bytes: u64,
    qlen: u32,
}

/// One hop of an INT sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IntHop {
    pub node_id: u32,
    pub qlen: u32,
    pub ts: u64,
    pub tx_bytes: u64,
    pub rate_mbps: u32,
}

impl From<longhaul_dataplane::wire::mlcc::MlccHop> for IntHop {
    fn from(h: longhaul_dataplane::wire::mlcc::MlccHop) -> IntHop {
        IntHop {
            node_id: h.node_id,
            qlen: h.qlen,
            ts: h.ts,
            tx_bytes: h.tx_bytes,
            rate_mbps: h.rate_mbps,
        }
    }
}

/// Most hops a loop remembers.
pub const MAX_HOPS: usize = 8;

/// HPCC state of one loop.
#[derive(Clone, Debug)]
pub struct Hpcc {
    p: HpccParams,
    last: [Option<HopSample>; MAX_HOPS],
    u: f64,
    w: f64,
    wc: f64,
    stage: u32,
}

impl Hpcc {
    pub fn new(p: HpccParams) -> Hpcc {
        let w0 = p.line_bps / 8.0 * p.base_rtt_ns as f64 / 1e9;
        Hpcc {
            p,
            last: [None; MAX_HOPS],
            // `U` starts at 1 (the link taken as full), as in the HPCC authors' simulator (a new
            // QP's `hp.u = 1`): the HPCC paper's Algorithm 1 leaves the initial value open. A
            // flow starts at line rate (as in HPCC); starting from `U` = 0 its EWMA would
            // need about a base RTT of samples to reach eta, so on a full link the newcomer
            // kept line rate (additive steps) while the flows already there cut.
            u: 1.0,
            w: w0,
            wc: w0,
            stage: 0,
        }
    }

    /// The window, bytes.
    pub fn window(&self) -> f64 {
        self.w
    }

    /// The smoothed utilization `U`.
    pub fn utilization(&self) -> f64 {
        self.u
    }

    /// The rate `W / T`, bit/s, within `[min_bps, line_bps]`.
    pub fn rate_bps(&self) -> f64 {
        (self.w * 8.0 * 1e9 / self.p.base_rtt_ns as f64)
            .min(self.p.line_bps)
            .max(self.p.min_bps)
    }

    /// `MeasureInflight` over `hops` (in the order the packet carries them); returns whether any
    /// hop gave a utilization (a previous sample of the same node at the same position).
    fn measure(&mut self, hops: &[IntHop]) -> bool {
        let t = self.p.base_rtt_ns as f64;
        let mut best: Option<(f64, f64)> = None;
        for (i, h) in hops.iter().take(MAX_HOPS).enumerate() {
            let prev = self.last[i].filter(|s| s.node == h.node_id && h.ts > s.ts);
            if let Some(s) = prev {
                let b = h.rate_mbps as f64 * 1e6 / 8.0 / 1e9; // bytes per ns
                if b > 0.0 {
                    let dt = (h.ts - s.ts) as f64;
                    let tx_rate = h.tx_bytes.saturating_sub(s.tx_bytes) as f64 / dt;
                    let u = h.qlen.min(s.qlen) as f64 / (b * t) + tx_rate / b;
                    if best.is_none_or(|(bu, _)| u > bu) {
                        best = Some((u, dt.min(t)));
                    }
                }
            }
            self.last[i] = Some(HopSample {
                node: h.node_id,
                ts: h.ts,
                tx_bytes: h.tx_bytes,
                qlen: h.qlen,
            });
        }
        let Some((u, tau)) = best else {
            return false;
        };
        self.u = (1.0 - tau / t) * self.u + tau / t * u;
        true
    }

    /// An INT sample: `MeasureInflight`, then `ComputeWind` (moving the reference window when
    /// `update_wc`). Returns the new rate, bit/s.
    pub fn on_int(&mut self, hops: &[IntHop], update_wc: bool) -> f64 {
        if self.measure(hops) {
            let w_ai = self.p.rate_ai_bps / 8.0 * self.p.base_rtt_ns as f64 / 1e9;
            let w = if self.u >= self.p.eta || self.stage >= self.p.max_stage {
                let w = self.wc / (self.u / self.p.eta) + w_ai;
                if update_wc {
                    self.stage = 0;
                }
                w
            } else {
                let w = self.wc + w_ai;
                if update_wc {
                    self.stage += 1;
                }
                w
            };
            let w_max = self.p.line_bps / 8.0 * self.p.base_rtt_ns as f64 / 1e9;
            let w_min = self.p.min_bps / 8.0 * self.p.base_rtt_ns as f64 / 1e9;
            self.w = w.clamp(w_min, w_max);
            if update_wc {
                self.wc = self.w;
            }
        }
        self.rate_bps()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> HpccParams {
        HpccParams {
            base_rtt_ns: 10_000,
            line_bps: 100e9,
            eta: 0.95,
            max_stage: 5,
            rate_ai_bps: 50e6,
            min_bps: 100e6,
        }
    }

    fn hop(ts: u64, tx: u64, qlen: u32) -> IntHop {
        IntHop {
            node_id: 7,
            qlen,
            ts,
            tx_bytes: tx,
            rate_mbps: 100_000,
        }
    }

    #[test]
    fn starts_at_line_rate_and_the_first_sample_only_records() {
        let mut h = Hpcc::new(p());
        assert_eq!(h.window(), 125_000.0); // 100 Gb/s x 10 us
        assert_eq!(h.on_int(&[hop(1_000, 0, 0)], true), 100e9);
    }

    #[test]
    fn a_new_flow_on_a_full_link_cuts_at_its_first_rate() {
        // HPCC simulator: a new QP's U starts at 1. The first sample only records; the second,
        // one packet time later (80 ns at 100 Gb/s, tau/T = 0.008), sees the link full with a
        // 62500-byte queue: u = 0.5 + 1 = 1.5 and U = 0.992 x 1 + 0.008 x 1.5 = 1.004 >= eta,
        // so the window is cut (multiplicatively) right away. With U starting at 0 it was
        // 0.012: below eta, an additive step, the newcomer at line rate on a full link.
        let mut h = Hpcc::new(p());
        h.on_int(&[hop(0, 0, 62_500)], true);
        h.on_int(&[hop(80, 1_000, 62_500)], true);
        let u = 0.992 + 0.008 * 1.5;
        assert!((h.utilization() - u).abs() < 1e-9, "{}", h.utilization());
        let w = 125_000.0 / (u / 0.95) + 62.5;
        assert!((h.window() - w).abs() < 1e-6, "{}", h.window());
        assert!(h.rate_bps() < 95e9);
    }

    #[test]
    fn a_full_link_with_a_queue_cuts_the_window() {
        let mut h = Hpcc::new(p());
        h.on_int(&[hop(0, 0, 62_500)], true);
        // Link busy at 100% (12.5 bytes/ns over 10 us) with a 62500-byte standing queue (HPCC
        // takes the smaller of this and the previous sample's):
        // u = 62500/125000 + 1 = 1.5; tau = T, so U = 1.5.
        let r = h.on_int(&[hop(10_000, 125_000, 62_500)], true);
        assert!((h.utilization() - 1.5).abs() < 1e-12);
        // W = Wc / (U / eta) + W_AI = 125000 / (1.5 / 0.95) + 62.5 bytes.
        let w = 125_000.0 / (1.5 / 0.95) + 62.5;
        assert!((h.window() - w).abs() < 1e-6);
        assert!((r - w * 8.0 * 1e5).abs() < 1.0, "{r}");
    }

    #[test]
    fn an_underused_link_grows_additively_then_multiplicatively() {
        let mut h = Hpcc::new(p());
        h.on_int(&[hop(0, 0, 62_500)], true);
        h.on_int(&[hop(10_000, 125_000, 62_500)], true); // cut to ~79,229 bytes
        let mut w = h.window();
        let (mut ts, mut tx) = (10_000, 125_000);
        // Half-loaded link, no queue: U = 0.5 < eta, so max_stage (5) additive steps of W_AI.
        for _ in 0..5 {
            ts += 10_000;
            tx += 62_500;
            h.on_int(&[hop(ts, tx, 0)], true);
            assert!((h.window() - (w + 62.5)).abs() < 1e-6);
            w = h.window();
        }
        // Then a multiplicative step: W = Wc / (0.5 / 0.95) + W_AI.
        ts += 10_000;
        tx += 62_500;
        h.on_int(&[hop(ts, tx, 0)], true);
        assert!((h.window() - (w / (0.5 / 0.95) + 62.5).min(125_000.0)).abs() < 1e-6);
    }

    #[test]
    fn only_update_wc_moves_the_reference() {
        let mut h = Hpcc::new(p());
        h.on_int(&[hop(0, 0, 62_500)], true);
        h.on_int(&[hop(10_000, 125_000, 62_500)], false);
        let w1 = h.window();
        // Same load again without updating Wc: same window (computed from the old Wc).
        h.on_int(&[hop(20_000, 250_000, 62_500)], false);
        assert!((h.window() - w1).abs() < 1e-6);
    }

    #[test]
    fn a_changed_path_restarts_the_sample() {
        let mut h = Hpcc::new(p());
        h.on_int(&[hop(0, 0, 0)], true);
        let mut other = hop(10_000, 125_000, 62_500);
        other.node_id = 8;
        assert_eq!(
            h.on_int(&[other], true),
            100e9,
            "no previous sample of node 8"
        );
    }
}
