//! TIMELY at the sender: Mittal et al., "TIMELY: RTT-based Congestion Control for the
//! Datacenter", SIGCOMM 2015, Algorithm 1, once per RTT as the HPCC simulator's RNIC model does
//! it (`HandleAckTimely`: an update when an ACK covers the PSN that was next to send at the
//! previous update), with its attribute defaults:
//!
//! - RTT from the ACK: now minus the send time of the PSN it acknowledges;
//! - `rtt_diff = (1 - alpha) * rtt_diff + alpha * (rtt - prev_rtt)`, alpha = 0.875;
//!   `gradient = rtt_diff / min_rtt` (min_rtt 20 us);
//! - rtt < T_low (50 us) or, between the thresholds, gradient <= 0: increase; rtt > T_high
//!   (500 us): `rate *= 1 - beta * (1 - T_high / rtt)` (beta 0.8); gradient > 0:
//!   `rate *= 1 - beta * gradient`;
//! - an increase adds `delta`, or `hai` once five increases came in a row (hyperactive
//!   increase: the paper's N = 5; the simulator counts every increase since the last decrease,
//!   `m_incStage`, and adds its `RateHAI`);
//! - delta: the paper's 10 Mb/s at its 10 Gb/s NICs, scaled with the line rate as the
//!   simulator's experiment script does (`run.py --cc timely`: `ai = 10 * bw / 10` Mb/s, 100
//!   Mb/s at 100 Gb/s), hai = 5 x delta (`hai = 50 * bw / 10`); the rate between the script's
//!   `MIN_RATE` (1 Gb/s) and line rate.
//!
//! With a base RTT above T_high (across datacenters: 1 ms and more against 500 us) every update
//! decreases, and an inter-DC flow runs at the floor once its first RTT is over: the Reflex
//! paper's Observation 2. The floor is what lets it finish.
//!
//! The RTT it uses is the host's; Reflex's pseudo-ACKs (issue 16) will feed it the RTT the
//! source ESW measures through the same `on_rtt` hook.

use longhaul_dataplane::time::Nanos;

/// TIMELY's parameters (scenario `[emulation.timely]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimelyParams {
    pub alpha: f64,
    pub beta: f64,
    pub t_low_ns: Nanos,
    pub t_high_ns: Nanos,
    pub min_rtt_ns: Nanos,
    /// The additive step; `None`: 10 Mb/s per 10 Gb/s of line rate.
    pub delta_bps: Option<u64>,
    /// The hyperactive step; `None`: 5 x delta.
    pub hai_bps: Option<u64>,
    pub min_rate_bps: u64,
}

impl Default for TimelyParams {
    fn default() -> Self {
        TimelyParams {
            alpha: 0.875,
            beta: 0.8,
            t_low_ns: 50_000,
            t_high_ns: 500_000,
            min_rtt_ns: 20_000,
            delta_bps: None,
            hai_bps: None,
            min_rate_bps: 1_000_000_000,
        }
    }
}

/// One sender QP's TIMELY state.
#[derive(Clone, Debug)]
pub struct Timely {
    p: TimelyParams,
    line_bps: f64,
    pub rate: f64,
    delta: f64,
    hai: f64,
    prev_rtt: Option<Nanos>,
    rtt_diff: f64,
    /// Increases since the last decrease (hyperactive increase from the sixth).
    inc_stage: u32,
    /// The next update waits for an ACK of this PSN or later (once per RTT).
    next_update_psn: u32,
    pub updates: u64,
}

impl Timely {
    pub fn new(p: TimelyParams, line_bps: u64) -> Self {
        let delta = p.delta_bps.map_or(line_bps as f64 / 1000.0, |d| d as f64);
        Timely {
            p,
            line_bps: line_bps as f64,
            rate: line_bps as f64,
            delta,
            hai: p.hai_bps.map_or(5.0 * delta, |h| h as f64),
            prev_rtt: None,
            rtt_diff: 0.0,
            inc_stage: 0,
            next_update_psn: 0,
            updates: 0,
        }
    }

    /// An ACK of `psn` measured `rtt`; `snd_nxt` is the next PSN the QP will send.
    pub fn on_rtt(&mut self, psn: u32, rtt: Nanos, snd_nxt: u32) {
        if psn < self.next_update_psn {
            return;
        }
        self.next_update_psn = snd_nxt;
        let Some(prev) = self.prev_rtt.replace(rtt) else {
            return; // the first sample only sets prev_rtt
        };
        self.updates += 1;
        let p = &self.p;
        let new_diff = rtt as f64 - prev as f64;
        self.rtt_diff = (1.0 - p.alpha) * self.rtt_diff + p.alpha * new_diff;
        let gradient = self.rtt_diff / p.min_rtt_ns as f64;
        let cut = if rtt < p.t_low_ns {
            None
        } else if rtt > p.t_high_ns {
            Some(1.0 - p.beta * (1.0 - p.t_high_ns as f64 / rtt as f64))
        } else if gradient <= 0.0 {
            None
        } else {
            Some((1.0 - p.beta * gradient).max(0.0))
        };
        match cut {
            None => {
                self.rate += if self.inc_stage < 5 {
                    self.delta
                } else {
                    self.hai
                };
                self.inc_stage += 1;
            }
            Some(c) => {
                self.rate *= c;
                self.inc_stage = 0;
            }
        }
        self.rate = self.rate.clamp(p.min_rate_bps as f64, self.line_bps);
    }

    pub fn rate_bps(&self) -> f64 {
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: u64 = 100_000_000_000;

    #[test]
    fn low_rtt_adds_delta_high_rtt_cuts() {
        let mut t = Timely::new(TimelyParams::default(), LINE);
        t.rate = 50e9;
        t.on_rtt(0, 10_000, 10); // first sample: prev_rtt only
        assert_eq!((t.rate, t.updates), (50e9, 0));
        t.on_rtt(5, 10_000, 20); // same RTT window: ignored
        assert_eq!(t.updates, 0);
        t.on_rtt(10, 10_000, 30); // < T_low: + delta, 100 Mb/s at 100 Gb/s
        assert_eq!(t.rate, 50.1e9);
        t.on_rtt(30, 1_000_000, 40); // > T_high: * (1 - 0.8 * (1 - 500/1000)) = * 0.6
        assert!((t.rate - 50.1e9 * 0.6).abs() < 1.0);
    }

    /// Hand: between the thresholds, rising RTT (+20 us, gradient = 0.875 * 20 / 20 = 0.875)
    /// cuts by 1 - 0.8 * 0.875 = 0.3; after five increases (+ delta, 100 Mb/s each) the next
    /// ones add hai (5 x delta).
    #[test]
    fn gradient_decrease_and_hyperactive_increase() {
        let mut t = Timely::new(TimelyParams::default(), LINE);
        t.rate = 10e9;
        t.on_rtt(0, 100_000, 1);
        t.on_rtt(1, 120_000, 2);
        assert!((t.rate - 10e9 * 0.3).abs() < 1.0, "{}", t.rate);
        // Falling RTTs between the thresholds (from a fresh state): rtt_diff = -17500, then
        // more negative; five updates of + delta, then two of + hai.
        let mut t = Timely::new(TimelyParams::default(), LINE);
        t.rate = 10e9;
        let mut rtt = 300_000;
        t.on_rtt(0, rtt, 1);
        for k in 1..8 {
            rtt -= 20_000;
            t.on_rtt(k, rtt, k + 1);
        }
        assert!(
            (t.rate - (10e9 + 5.0 * 100e6 + 2.0 * 500e6)).abs() < 1.0,
            "{}",
            t.rate - 10e9
        );
        // A decrease starts the count again.
        t.on_rtt(8, 400_000, 9);
        let cut = t.rate;
        t.on_rtt(9, 40_000, 10);
        assert!((t.rate - (cut + 100e6)).abs() < 1.0);
    }

    #[test]
    fn the_rate_stays_between_min_and_line() {
        let mut t = Timely::new(TimelyParams::default(), LINE);
        for k in 0..100 {
            t.on_rtt(k, 10_000_000, k + 1);
        }
        assert_eq!(t.rate, 1e9, "the floor: the HPCC script's MIN_RATE");
        let mut t = Timely::new(TimelyParams::default(), LINE);
        for k in 0..100 {
            t.on_rtt(k, 1_000, k + 1);
        }
        assert_eq!(t.rate, 100e9);
    }
}
