//! Swift at the sender: Kumar et al., "Swift: Delay is Simple and Effective for Congestion
//! Control in the Datacenter", SIGCOMM 2020, Algorithm 1 and section 3.2:
//!
//! - a congestion window `cwnd` in packets (fractional: below 1 packet the QP is paced, one
//!   packet per `rtt / cwnd`);
//! - on an ACK with `delay` (our RTT sample) below the target: additive increase,
//!   `cwnd += ai / cwnd * acked` (or `ai * acked` below one packet); otherwise, at most once
//!   per RTT, `cwnd *= max(1 - beta * (delay - target) / delay, 1 - max_mdf)`;
//! - a NAK (fast recovery) or a retransmission timeout: `cwnd *= 1 - max_mdf` once per RTT;
//!   `retx_reset` timeouts in a row: `cwnd = min_cwnd`;
//! - the target (section 3.2): `base_target`, plus topology-based scaling `hops * hop_delay`
//!   (the switches on the flow's forward path: what the paper reads from the IP TTL), plus
//!   flow-based scaling `max(0, min(alpha / sqrt(cwnd) + beta', fs_range))` with alpha and beta'
//!   chosen so that it is `fs_range` at `fs_min_cwnd` and 0 at `fs_max_cwnd`;
//! - the path's propagation (`target_propagation`, on by default): the target also holds the
//!   path's round-trip propagation delay. Swift is a datacenter protocol whose base target
//!   covers a one-hop path's fixed delays; across datacenters the propagation (1 ms and more)
//!   dwarfs any target, and a delay measured against a target without it reads as congestion
//!   on every ACK: the window halves every RTT down to `min_cwnd` (the Reflex paper's
//!   Observation 2) and a flow larger than its first window does not finish (0.001 packets per
//!   RTT). The public NS-3 ports of Swift (HPCC-simulator derivatives, `GetFabricTargetDelay`)
//!   compare the whole RTT with `base_target + hops * h + fs`, without the propagation: set
//!   `target_propagation = false` for that behaviour. The path (hops, propagation) is the
//!   idle network's ([`crate::path`]), given to each QP when it is made. A feedback packet's
//!   delay (Reflex's pseudo-ACKs, [`Swift::on_feedback`]) is measured over the segment to the
//!   switch that sent it, whose propagation the host does not know: it is held against the
//!   target without the propagation (base, hops, flow scaling), which is the near-source
//!   segment's in the Reflex paper's setting (its 1 us per hop covers its 1 us links).
//!
//! Parameter values: the paper's (beta 0.8, max_mdf 0.5, ai 1 packet per RTT); base target
//! 25 us, no per-hop scaling, fs_range 50 us, fs_min_cwnd 0.1, fs_max_cwnd 100, min_cwnd 0.001
//! are ours (the paper gives the form, not one value set); the window starts at, and never
//! exceeds, the network's largest BDP, as the HPCC simulator's senders do (`HAS_WIN`,
//! `GLOBAL_T 1`: `maxBdp`). `base_target_us`, `hop_delay_us`, `target_propagation`,
//! `init_cwnd` and `max_cwnd` are scenario keys (the Reflex paper runs base_delay 200 ns and
//! hop_delay 1 us). Reflex feeds `on_feedback` with the delays its pseudo-ACKs carry.

use longhaul_dataplane::time::Nanos;

/// Swift's parameters (scenario `[emulation.swift]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwiftParams {
    pub ai: f64,
    pub beta: f64,
    pub max_mdf: f64,
    pub base_target_ns: Nanos,
    /// Topology-based scaling: added to the target per switch on the forward path.
    pub hop_delay_ns: Nanos,
    /// Whether the target holds the path's round-trip propagation delay (see the module).
    pub target_propagation: bool,
    pub fs_range_ns: Nanos,
    pub fs_min_cwnd: f64,
    pub fs_max_cwnd: f64,
    pub min_cwnd: f64,
    /// The largest window; `None`: the network's largest BDP ([`Swift::set_path`]).
    pub max_cwnd: Option<f64>,
    /// The window a QP starts with (at most the largest); `None`: the largest.
    pub init_cwnd: Option<f64>,
    pub retx_reset: u32,
}

impl Default for SwiftParams {
    fn default() -> Self {
        SwiftParams {
            ai: 1.0,
            beta: 0.8,
            max_mdf: 0.5,
            base_target_ns: 25_000,
            hop_delay_ns: 0,
            target_propagation: true,
            fs_range_ns: 50_000,
            fs_min_cwnd: 0.1,
            fs_max_cwnd: 100.0,
            min_cwnd: 0.001,
            max_cwnd: None,
            init_cwnd: None,
            retx_reset: 3,
        }
    }
}

/// The window's bound and start before the path is known ([`Swift::set_path`]), unless set.
const UNSET_CWND: f64 = 256.0;

/// One sender QP's Swift state.
#[derive(Clone, Debug)]
pub struct Swift {
    p: SwiftParams,
    pub cwnd: f64,
    max_cwnd: f64,
    /// The latest RTT sample (pacing below one packet; "once per RTT").
    pub rtt_ns: Nanos,
    last_decrease: Option<Nanos>,
    retx: u32,
    pub decreases: u64,
    /// The parts of the target the path sets ([`Swift::set_path`]): `hops * hop_delay`, and
    /// the round-trip propagation with `target_propagation` (end-to-end ACKs only).
    hop_target_ns: Nanos,
    prop_target_ns: Nanos,
}

impl Swift {
    pub fn new(p: SwiftParams) -> Self {
        Swift {
            p,
            cwnd: p
                .init_cwnd
                .unwrap_or(UNSET_CWND)
                .min(p.max_cwnd.unwrap_or(UNSET_CWND)),
            max_cwnd: p.max_cwnd.unwrap_or(UNSET_CWND),
            rtt_ns: p.base_target_ns,
            last_decrease: None,
            retx: 0,
            decreases: 0,
            hop_target_ns: 0,
            prop_target_ns: 0,
        }
    }

    /// The flow's path: `hops` switches forward, `prop_rtt_ns` of propagation both ways; and
    /// the network's largest BDP in packets, the window's bound and start unless set.
    pub fn set_path(&mut self, hops: u32, prop_rtt_ns: Nanos, bdp_packets: f64) {
        let bdp = bdp_packets.max(1.0);
        self.max_cwnd = self.p.max_cwnd.unwrap_or(bdp);
        self.cwnd = self.p.init_cwnd.unwrap_or(self.max_cwnd).min(self.max_cwnd);
        let prop = if self.p.target_propagation {
            prop_rtt_ns
        } else {
            0
        };
        self.hop_target_ns = hops as Nanos * self.p.hop_delay_ns;
        self.prop_target_ns = prop;
    }

    /// The target delay of an end-to-end ACK for the current window and the path (section
    /// 3.2).
    pub fn target_ns(&self) -> f64 {
        self.fabric_target_ns() + self.prop_target_ns as f64
    }

    /// The target without the path's propagation: base, hops and flow-based scaling.
    fn fabric_target_ns(&self) -> f64 {
        let p = &self.p;
        let (lo, hi) = (1.0 / p.fs_min_cwnd.sqrt(), 1.0 / p.fs_max_cwnd.sqrt());
        let alpha = p.fs_range_ns as f64 / (lo - hi);
        let beta = -alpha * hi;
        let fs = (alpha / self.cwnd.sqrt() + beta).clamp(0.0, p.fs_range_ns as f64);
        (p.base_target_ns + self.hop_target_ns) as f64 + fs
    }

    fn can_decrease(&self, now: Nanos) -> bool {
        self.last_decrease
            .is_none_or(|t| now.saturating_sub(t) >= self.rtt_ns)
    }

    fn decrease(&mut self, now: Nanos, factor: f64) {
        self.cwnd *= factor;
        self.last_decrease = Some(now);
        self.decreases += 1;
        self.clamp();
    }

    fn clamp(&mut self) {
        self.cwnd = self.cwnd.clamp(self.p.min_cwnd, self.max_cwnd);
    }

    /// An ACK at `now` that newly acknowledged `acked` packets, with RTT `delay`.
    pub fn on_ack(&mut self, now: Nanos, delay: Nanos, acked: u32) {
        self.react(now, delay, acked, self.target_ns());
    }

    /// A feedback packet (a pseudo-ACK) at `now` with `delay` over the segment it covers,
    /// counted as one acknowledged packet; held against the target without the propagation.
    pub fn on_feedback(&mut self, now: Nanos, delay: Nanos) {
        self.react(now, delay, 1, self.fabric_target_ns());
    }

    fn react(&mut self, now: Nanos, delay: Nanos, acked: u32, target: f64) {
        self.retx = 0;
        let acked = acked as f64;
        if (delay as f64) < target {
            if self.cwnd >= 1.0 {
                self.cwnd += self.p.ai / self.cwnd * acked;
            } else {
                self.cwnd += self.p.ai * acked;
            }
            self.clamp();
        } else if self.can_decrease(now) {
            let f = 1.0 - self.p.beta * (delay as f64 - target) / delay as f64;
            self.decrease(now, f.max(1.0 - self.p.max_mdf));
        }
        // "Once per RTT" is judged with the RTT known before this sample.
        self.rtt_ns = delay.max(1);
    }

    /// A NAK (fast recovery) at `now`.
    pub fn on_nak(&mut self, now: Nanos) {
        self.retx = 0;
        if self.can_decrease(now) {
            self.decrease(now, 1.0 - self.p.max_mdf);
        }
    }

    /// A retransmission timeout at `now`.
    pub fn on_timeout(&mut self, now: Nanos) {
        self.retx += 1;
        if self.retx >= self.p.retx_reset {
            self.cwnd = self.p.min_cwnd;
            self.last_decrease = Some(now);
        } else if self.can_decrease(now) {
            self.decrease(now, 1.0 - self.p.max_mdf);
        }
    }

    /// Packets that may be unacknowledged (at least one: below one packet, pacing holds it).
    pub fn window(&self) -> u32 {
        (self.cwnd.floor() as u32).max(1)
    }

    /// The pacing rate below one packet (`frame_bits` per `rtt / cwnd`); `None` at or above it.
    pub fn pacing_bps(&self, frame_bits: f64) -> Option<f64> {
        (self.cwnd < 1.0).then(|| frame_bits * self.cwnd * 1e9 / self.rtt_ns as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swift(cwnd: f64) -> Swift {
        let mut s = Swift::new(SwiftParams::default());
        s.cwnd = cwnd;
        s
    }

    #[test]
    fn target_scales_with_the_window() {
        let s = swift(100.0);
        assert!(
            (s.target_ns() - 25_000.0).abs() < 1e-6,
            "no scaling at fs_max_cwnd"
        );
        let s = swift(0.1);
        assert!(
            (s.target_ns() - 75_000.0).abs() < 1e-6,
            "fs_range at fs_min_cwnd"
        );
        assert!(swift(1.0).target_ns() > swift(10.0).target_ns());
    }

    /// Hand: below target, cwnd 10 grows by 1/10 per acked packet; above, at most once per RTT
    /// it shrinks by beta * (delay - target) / delay, at most by max_mdf.
    #[test]
    fn additive_increase_multiplicative_decrease() {
        let mut s = swift(10.0);
        s.on_ack(0, 10_000, 2);
        assert!((s.cwnd - 10.2).abs() < 1e-9);
        let target = s.target_ns();
        s.on_ack(100_000, 60_000, 1);
        let want = 10.2 * (1.0 - 0.8 * (60_000.0 - target) / 60_000.0);
        assert!((s.cwnd - want).abs() < 1e-9, "{} vs {want}", s.cwnd);
        let after = s.cwnd;
        s.on_ack(110_000, 60_000, 1); // within one RTT (60 us) of the decrease: no second one
        assert_eq!(s.cwnd, after);
        s.on_ack(200_000, 10_000_000, 1); // a huge delay: capped at max_mdf
        assert!((s.cwnd - after * 0.5).abs() < 1e-9);
    }

    #[test]
    fn below_one_packet_it_paces() {
        let mut s = swift(0.5);
        s.rtt_ns = 20_000;
        assert_eq!(s.window(), 1);
        // 8192 bits every 20 us / 0.5 = 40 us: 204.8 Mb/s.
        assert!((s.pacing_bps(8192.0).unwrap() - 204.8e6).abs() < 1.0);
        s.on_ack(0, 10_000, 1);
        assert!((s.cwnd - 1.5).abs() < 1e-9, "ai * acked below one packet");
        assert!(s.pacing_bps(8192.0).is_none());
    }

    /// Topology scaling adds `hops * hop_delay`, and the propagation only when asked: a 1 ms
    /// inter-DC RTT then reads as no congestion, and as congestion without it.
    #[test]
    fn the_path_scales_the_target() {
        let p = SwiftParams {
            hop_delay_ns: 1_000,
            base_target_ns: 200,
            ..SwiftParams::default()
        };
        let mut s = Swift::new(p);
        s.set_path(5, 1_000_000, 1000.0);
        s.cwnd = 100.0; // no flow-based scaling
        assert!((s.target_ns() - (200.0 + 5_000.0 + 1_000_000.0)).abs() < 1e-6);
        s.on_ack(0, 1_004_000, 1);
        assert!(s.cwnd > 100.0, "below the target: increase");
        let mut s = Swift::new(SwiftParams {
            target_propagation: false,
            ..p
        });
        s.set_path(5, 1_000_000, 1000.0);
        s.cwnd = 100.0;
        assert!((s.target_ns() - 5_200.0).abs() < 1e-6);
        s.on_ack(0, 1_004_000, 1);
        assert_eq!(s.cwnd, 50.0, "far above the target: max_mdf");
    }

    #[test]
    fn timeouts_and_naks() {
        let mut s = swift(8.0);
        s.on_nak(0);
        assert_eq!(s.cwnd, 4.0);
        s.rtt_ns = 10;
        s.on_timeout(100);
        s.on_timeout(200);
        s.on_timeout(300);
        assert_eq!(s.cwnd, SwiftParams::default().min_cwnd);
    }
}
