//! DCQCN at the sender (the reaction point, RP): Zhu et al., "Congestion Control for Large-Scale
//! RDMA Deployments", SIGCOMM 2015, section 3.1, in the timer-driven form of the HPCC
//! simulator's RNIC model (its "mlx" mode: `rdma-hw.cc`, `UpdateAlphaMlx`,
//! `CheckRateDecreaseMlx`, `RateIncEventTimerMlx`), with the parameters of the simulator's
//! experiment script (`simulation/run.py --cc dcqcn`), which every paper here ran:
//!
//! - alpha: every `alpha_resume` (run.py: 1 us), `alpha = (1 - g) * alpha + g` if a CNP arrived
//!   in the interval, `(1 - g) * alpha` otherwise (run.py: g = 1/256);
//! - decrease: every `rate_decrease` (4 us), if a CNP arrived since the last check:
//!   `Rt = Rc` (unless the previous event was also a decrease), `Rc = max(min_rate, Rc * (1 -
//!   alpha / 2))` (run.py: `MIN_RATE` 1 Gb/s), and the increase timer restarts at stage 0;
//! - increase: every `rp_timer` (run.py: 300 us) without a decrease, stage by stage: fast
//!   recovery `Rc = (Rc + Rt) / 2` for the first `fast_recovery_times` (run.py: 1) stages, then
//!   additive (`Rt += rate_ai`) once, then hyper (`Rt += rate_hai`), each followed by
//!   `Rc = (Rc + Rt) / 2`; `Rt` is capped at line rate. run.py scales both steps with the NIC
//!   rate: `ai = 5 * bw / 25`, `hai = 50 * bw / 25` Mb/s (20 and 200 Mb/s at 100 Gb/s); so do
//!   we when the scenario does not set them;
//! - the first CNP sets alpha to 1 and `Rc = Rt = rate_on_first_cnp * Rc` (1.0), and starts the
//!   timers; the first decrease check comes `rate_decrease` + 1 ns after it (the simulator's
//!   `ScheduleDecreaseRateMlx(q, 1)`: after the alpha update), or 1 ns after it with
//!   `first_decrease = "immediate"` (the DCQCN paper's RP cuts on the CNP).
//!
//! The simulator's `RdmaHw` attribute defaults differ from run.py's (alpha 55 us, g 1/16, 5
//! fast-recovery stages, increase timer 1.5 ms, 5 / 50 Mb/s, min 100 Mb/s): with them a cut flow
//! regains 5 Mb/s per 1.5 ms, and sub-MB flows stayed unfinished for tens of ms after the
//! traffic stopped (`two-dc-websearch`); no paper ran them.
//!
//! The simulator drops DCQCN's byte counter (B = 10 MB in the paper): increases are timer-driven
//! only. We do the same, so that results compare with the papers that used it.

use longhaul_dataplane::time::Nanos;

/// DCQCN's parameters (scenario `[emulation.dcqcn]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DcqcnParams {
    pub g: f64,
    pub alpha_resume_ns: Nanos,
    pub rate_decrease_ns: Nanos,
    pub rp_timer_ns: Nanos,
    pub fast_recovery_times: u32,
    /// The additive and hyper increase steps; `None`: scaled with the line rate as run.py
    /// does (line / 5000 and line / 500).
    pub rate_ai_bps: Option<u64>,
    pub rate_hai_bps: Option<u64>,
    pub min_rate_bps: u64,
    pub rate_on_first_cnp: f64,
    /// Whether the first CNP's decrease waits for the next decrease check (the simulator) or
    /// comes at once.
    pub first_decrease_immediate: bool,
}

impl Default for DcqcnParams {
    /// The HPCC simulator's experiment script (`run.py --cc dcqcn`).
    fn default() -> Self {
        DcqcnParams {
            g: 1.0 / 256.0,
            alpha_resume_ns: 1_000,
            rate_decrease_ns: 4_000,
            rp_timer_ns: 300_000,
            fast_recovery_times: 1,
            rate_ai_bps: None,
            rate_hai_bps: None,
            min_rate_bps: 1_000_000_000,
            rate_on_first_cnp: 1.0,
            first_decrease_immediate: false,
        }
    }
}

/// One sender QP's DCQCN state.
#[derive(Clone, Debug)]
pub struct Dcqcn {
    p: DcqcnParams,
    line_bps: f64,
    rate_ai: f64,
    rate_hai: f64,
    /// Current rate Rc and target rate Rt, b/s.
    pub rc: f64,
    pub rt: f64,
    pub alpha: f64,
    started: bool,
    cnp_for_alpha: bool,
    cnp_for_decrease: bool,
    stage: u32,
    next_alpha: Nanos,
    next_decrease: Nanos,
    next_increase: Nanos,
    /// Decreases applied (for tests and counters).
    pub decreases: u64,
}

impl Dcqcn {
    pub fn new(p: DcqcnParams, line_bps: u64) -> Self {
        Dcqcn {
            p,
            line_bps: line_bps as f64,
            rate_ai: p.rate_ai_bps.map_or(line_bps as f64 / 5000.0, |r| r as f64),
            rate_hai: p.rate_hai_bps.map_or(line_bps as f64 / 500.0, |r| r as f64),
            rc: line_bps as f64,
            rt: line_bps as f64,
            alpha: 1.0,
            started: false,
            cnp_for_alpha: false,
            cnp_for_decrease: false,
            stage: 0,
            next_alpha: Nanos::MAX,
            next_decrease: Nanos::MAX,
            next_increase: Nanos::MAX,
            decreases: 0,
        }
    }

    /// A CNP for this QP arrived at `now`.
    pub fn on_cnp(&mut self, now: Nanos) {
        self.cnp_for_alpha = true;
        self.cnp_for_decrease = true;
        if !self.started {
            self.started = true;
            self.alpha = 1.0;
            self.cnp_for_alpha = false;
            self.next_alpha = now + self.p.alpha_resume_ns;
            self.next_decrease = if self.p.first_decrease_immediate {
                now + 1
            } else {
                now + self.p.rate_decrease_ns + 1
            };
            self.rc *= self.p.rate_on_first_cnp;
            self.rt = self.rc;
        }
    }

    /// The next timer, if any.
    pub fn next_timer(&self) -> Option<Nanos> {
        self.started.then(|| {
            self.next_alpha
                .min(self.next_decrease)
                .min(self.next_increase)
        })
    }

    /// Run every timer due at or before `now`, in time order (alpha before a decrease at the
    /// same instant, as the simulator's 1 ns offset orders them).
    pub fn on_time(&mut self, now: Nanos) {
        while let Some(t) = self.next_timer().filter(|&t| t <= now) {
            if t == self.next_alpha {
                self.alpha *= 1.0 - self.p.g;
                if self.cnp_for_alpha {
                    self.alpha += self.p.g;
                }
                self.cnp_for_alpha = false;
                self.next_alpha = t + self.p.alpha_resume_ns;
            } else if t == self.next_decrease {
                self.next_decrease = t + self.p.rate_decrease_ns;
                if self.cnp_for_decrease {
                    // The simulator's ClampTargetRate = false: Rt follows Rc only when an
                    // increase happened since the last decrease.
                    if self.stage != 0 {
                        self.rt = self.rc;
                    }
                    self.rc = (self.rc * (1.0 - self.alpha / 2.0)).max(self.p.min_rate_bps as f64);
                    self.stage = 0;
                    self.cnp_for_decrease = false;
                    self.next_increase = t + self.p.rp_timer_ns;
                    self.decreases += 1;
                }
            } else {
                self.next_increase = t + self.p.rp_timer_ns;
                if self.stage > self.p.fast_recovery_times {
                    self.rt = (self.rt + self.rate_hai).min(self.line_bps);
                } else if self.stage == self.p.fast_recovery_times {
                    self.rt = (self.rt + self.rate_ai).min(self.line_bps);
                }
                self.rc = (self.rc + self.rt) / 2.0;
                self.stage += 1;
            }
        }
    }

    /// The current sending rate, b/s.
    pub fn rate_bps(&self) -> f64 {
        self.rc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: u64 = 100_000_000_000;

    /// The simulator's attribute defaults, which the hand computations below use.
    fn attr() -> DcqcnParams {
        DcqcnParams {
            g: 1.0 / 16.0,
            alpha_resume_ns: 55_000,
            rp_timer_ns: 1_500_000,
            fast_recovery_times: 5,
            rate_ai_bps: Some(5_000_000),
            rate_hai_bps: Some(50_000_000),
            min_rate_bps: 100_000_000,
            first_decrease_immediate: true,
            ..DcqcnParams::default()
        }
    }

    /// Hand-computed: the first CNP at t = 0 halves the rate at t = 1 ns (alpha = 1); a second
    /// CNP within the alpha interval raises alpha only at t = 55 us.
    #[test]
    fn first_cnp_halves_the_rate_then_alpha_decays() {
        let p = attr();
        let mut d = Dcqcn::new(p, LINE);
        d.on_cnp(0);
        assert_eq!(d.next_timer(), Some(1));
        d.on_time(1);
        assert_eq!(d.rc, 50e9);
        assert_eq!(d.rt, 100e9, "Rt keeps the rate before the first decrease");
        assert_eq!(d.decreases, 1);
        // No CNP for 55 us: alpha = (1 - 1/16) * 1.
        d.on_time(55_000);
        assert!((d.alpha - 15.0 / 16.0).abs() < 1e-12);
        // A CNP at 60 us: decrease at the next 4 us check (t = 60 001): Rc *= 1 - alpha / 2;
        // consecutive decrease (stage 0): Rt unchanged.
        d.on_cnp(60_000);
        d.on_time(60_001);
        assert!((d.rc - 50e9 * (1.0 - 15.0 / 32.0)).abs() < 1.0);
        assert_eq!(d.rt, 100e9);
        // The alpha update at 110 us counts that CNP.
        d.on_time(110_000);
        let a = (15.0 / 16.0) * (15.0 / 16.0) + 1.0 / 16.0;
        assert!((d.alpha - a).abs() < 1e-12, "{}", d.alpha);
    }

    /// Increase: five fast-recovery stages toward Rt, then additive, then hyper.
    #[test]
    fn increase_stages() {
        let p = DcqcnParams {
            rp_timer_ns: 100,
            alpha_resume_ns: 1_000_000_000,
            ..attr()
        };
        let mut d = Dcqcn::new(p, LINE);
        d.on_cnp(0);
        d.on_time(1); // Rc = 50 G, Rt = 100 G, increase timer at 101
        let mut rc = 50e9;
        for stage in 0..5 {
            d.on_time(101 + 100 * stage);
            rc = (rc + 100e9) / 2.0;
            assert!((d.rc - rc).abs() < 1.0, "stage {stage}");
        }
        assert_eq!(d.rt, 100e9);
        // Stage 5 (additive) and 6 (hyper): Rt is capped at line rate.
        d.on_time(601);
        d.on_time(701);
        assert_eq!(d.rt, 100e9);
        // Below line rate, additive then hyper move Rt by 5 and 50 Mb/s.
        let mut d = Dcqcn::new(p, LINE);
        d.on_cnp(0);
        d.on_time(1);
        d.rt = 60e9;
        d.on_time(501); // five fast-recovery stages
        d.on_time(601);
        assert!((d.rt - 60.005e9).abs() < 1.0);
        d.on_time(701);
        assert!((d.rt - 60.055e9).abs() < 1.0);
    }

    #[test]
    fn the_rate_never_goes_below_min_rate() {
        let mut d = Dcqcn::new(attr(), LINE);
        for i in 0..200 {
            d.on_cnp(i * 4_000);
            d.on_time(i * 4_000 + 1);
        }
        assert_eq!(d.rc, 100e6);
    }

    /// run.py's parameters: the first decrease waits for the check 4 us + 1 ns after the CNP;
    /// alpha decays every 1 us by 1/256; one fast-recovery stage, then + 20 Mb/s (additive) and
    /// + 200 Mb/s (hyper) at 100 Gb/s, every 300 us; the floor is 1 Gb/s.
    #[test]
    fn run_py_parameters() {
        let mut d = Dcqcn::new(DcqcnParams::default(), LINE);
        d.on_cnp(0);
        assert_eq!(d.next_timer(), Some(1_000), "the alpha update comes first");
        d.on_time(4_000);
        assert_eq!(d.rc, 100e9, "no decrease before 4 us + 1 ns");
        d.on_time(4_001);
        // alpha: 1, then four updates without a CNP (at 1, 2, 3, 4 us).
        let a = (255.0f64 / 256.0).powi(4);
        assert!((d.rc - 100e9 * (1.0 - a / 2.0)).abs() < 1.0, "{}", d.rc);
        let rc = d.rc;
        d.on_time(304_001); // fast recovery
        assert!((d.rc - (rc + 100e9) / 2.0).abs() < 1.0);
        d.rt = 60e9;
        d.on_time(604_001); // additive
        assert!((d.rt - 60.02e9).abs() < 1.0);
        d.on_time(904_001); // hyper
        assert!((d.rt - 60.22e9).abs() < 1.0);
        let mut d = Dcqcn::new(DcqcnParams::default(), LINE);
        for i in 0..400 {
            d.on_cnp(i * 4_000);
            d.on_time(i * 4_000 + 4_001);
        }
        assert_eq!(d.rc, 1e9);
    }
}
