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
//! - the target: `base_target` plus flow-based scaling (section 3.2),
//!   `max(0, min(alpha / sqrt(cwnd) + beta', fs_range))` with alpha and beta' chosen so the
//!   scaling is `fs_range` at `fs_min_cwnd` and 0 at `fs_max_cwnd`. Topology-based scaling (per
//!   hop) is left out: the emulated host does not know its hop count.
//!
//! Parameter values: the paper's (beta 0.8, max_mdf 0.5, ai 1 packet per RTT); base target
//! 25 us, fs_range 50 us, fs_min_cwnd 0.1, fs_max_cwnd 100, cwnd in [0.001, 256] starting at 64 are ours
//! (`init_cwnd` and `max_cwnd` are scenario keys: the HPCC simulator starts every window at the
//! network's largest BDP)
//! (the paper gives the form, not one value set). Reflex (issue 16) feeds the same `on_ack`
//! with the delays its pseudo-ACKs carry.

use longhaul_dataplane::time::Nanos;

/// Swift's parameters (scenario `[emulation.swift]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SwiftParams {
    pub ai: f64,
    pub beta: f64,
    pub max_mdf: f64,
    pub base_target_ns: Nanos,
    pub fs_range_ns: Nanos,
    pub fs_min_cwnd: f64,
    pub fs_max_cwnd: f64,
    pub min_cwnd: f64,
    pub max_cwnd: f64,
    /// The window a QP starts with (at most `max_cwnd`).
    pub init_cwnd: f64,
    pub retx_reset: u32,
}

impl Default for SwiftParams {
    fn default() -> Self {
        SwiftParams {
            ai: 1.0,
            beta: 0.8,
            max_mdf: 0.5,
            base_target_ns: 25_000,
            fs_range_ns: 50_000,
            fs_min_cwnd: 0.1,
            fs_max_cwnd: 100.0,
            min_cwnd: 0.001,
            max_cwnd: 256.0,
            init_cwnd: 64.0,
            retx_reset: 3,
        }
    }
}

/// One sender QP's Swift state.
#[derive(Clone, Debug)]
pub struct Swift {
    p: SwiftParams,
    pub cwnd: f64,
    /// The latest RTT sample (pacing below one packet; "once per RTT").
    pub rtt_ns: Nanos,
    last_decrease: Option<Nanos>,
    retx: u32,
    pub decreases: u64,
}

impl Swift {
    pub fn new(p: SwiftParams) -> Self {
        Swift {
            p,
            cwnd: p.max_cwnd.min(p.init_cwnd),
            rtt_ns: p.base_target_ns,
            last_decrease: None,
            retx: 0,
            decreases: 0,
        }
    }

    /// The target delay for the current window (section 3.2, flow-based scaling).
    pub fn target_ns(&self) -> f64 {
        let p = &self.p;
        let (lo, hi) = (1.0 / p.fs_min_cwnd.sqrt(), 1.0 / p.fs_max_cwnd.sqrt());
        let alpha = p.fs_range_ns as f64 / (lo - hi);
        let beta = -alpha * hi;
        let fs = (alpha / self.cwnd.sqrt() + beta).clamp(0.0, p.fs_range_ns as f64);
        p.base_target_ns as f64 + fs
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
        self.cwnd = self.cwnd.clamp(self.p.min_cwnd, self.p.max_cwnd);
    }

    /// An ACK at `now` that newly acknowledged `acked` packets, with RTT `delay`.
    pub fn on_ack(&mut self, now: Nanos, delay: Nanos, acked: u32) {
        self.retx = 0;
        let target = self.target_ns();
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
