//! DQM, the DCI-switch queue management of MLCC (paper 001, section 3.3.1, equations 1-9 and
//! Algorithm 2), per inter-DC flow at the receiver-side DCI. The reading of the paper this
//! implements, step by step, is docs/mlcc.md "DQM, exactly as implemented"; the numbers in
//! brackets below are its steps. `pcap-tests/oracle/mlcc_dqm.py` implements the same text
//! independently and `pipelines/tests/mlcc_dqm.rs` compares the two on fixed traces.
//!
//! No allocation after [`Dqm::new`]: the two histories are fixed rings.

use longhaul_dataplane::time::Nanos;

/// DQM's parameters (section 4.1 gives theta, D_t, m and alpha).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DqmParams {
    /// theta: the time DQM takes to bring the queuing delay back to D_t, ns.
    pub theta_ns: u64,
    /// D_t: the target queuing delay, ns.
    pub d_t_ns: u64,
    /// m: R_credit values averaged in eq. 4.
    pub m: usize,
    /// alpha of eq. 7.
    pub alpha: f64,
    /// RTT_C: the cross-DC base RTT, ns.
    pub rtt_c_ns: u64,
    /// RTT_D until the credit loop has been measured, ns.
    pub rtt_d_ns: u64,
    /// MTU of eq. 9, bytes.
    pub mtu_bytes: u32,
    /// H: most suggestion rates kept (the bound on n).
    pub history: usize,
    /// Floor and ceiling of the suggested rate, bit/s.
    pub min_rate_bps: f64,
    pub max_rate_bps: f64,
}

/// What one ACK did to a flow's DQM state (the oracle's output columns).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DqmStep {
    /// The ACK started an epoch.
    pub epoch: bool,
    /// The values of the last epoch: eq. 1, RTT_D, eqs. 2-5.
    pub n: usize,
    pub rtt_d_ns: u64,
    pub r_pre_eq_bps: f64,
    pub q_pre_bytes: f64,
    pub d_pre_ns: f64,
    pub r_dqm_bps: f64,
    /// After this ACK's token step (eqs. 6-8).
    pub token: f64,
    pub dw: i64,
    /// Eq. 9: the rate written into the ACK.
    pub r_bar_bps: f64,
}

/// A fixed-capacity ring of the most recent values.
#[derive(Clone, Debug)]
struct Ring {
    v: Box<[f64]>,
    head: usize,
    len: usize,
}

impl Ring {
    fn new(cap: usize) -> Ring {
        Ring {
            v: vec![0.0; cap.max(1)].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }
    fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
    fn push(&mut self, x: f64) {
        let cap = self.v.len();
        self.v[self.head] = x;
        self.head = (self.head + 1) % cap;
        self.len = (self.len + 1).min(cap);
    }
    /// Mean of the last `k` values (of those there are); `None` when empty. Summed oldest first.
    fn mean_last(&self, k: usize) -> Option<f64> {
        let k = k.min(self.len);
        if k == 0 {
            return None;
        }
        let cap = self.v.len();
        let mut sum = 0.0;
        for j in (1..=k).rev() {
            sum += self.v[(self.head + cap - j) % cap];
        }
        Some(sum / k as f64)
    }
}

/// DQM state of one flow.
#[derive(Clone, Debug)]
pub struct Dqm {
    c_d: Option<u16>,
    t_cd: Option<Nanos>,
    rtt_d_ns: u64,
    r_credit: f64,
    hist_credit: Ring,
    hist_dqm: Ring,
    last: DqmStep,
    have_epoch: bool,
    token: f64,
    dw: i64,
}

impl Dqm {
    /// A flow's state before its first ACK.
    pub fn new(p: &DqmParams) -> Dqm {
        Dqm {
            c_d: None,
            t_cd: None,
            rtt_d_ns: p.rtt_d_ns.max(1),
            r_credit: 0.0,
            hist_credit: Ring::new(p.m),
            hist_dqm: Ring::new(p.history),
            last: DqmStep::default(),
            have_epoch: false,
            token: 0.0,
            dw: 0,
        }
    }

    /// Forget everything (a queue slot handed to a new flow).
    pub fn reset(&mut self, p: &DqmParams) {
        self.c_d = None;
        self.t_cd = None;
        self.rtt_d_ns = p.rtt_d_ns.max(1);
        self.r_credit = 0.0;
        self.hist_credit.clear();
        self.hist_dqm.clear();
        self.last = DqmStep::default();
        self.have_epoch = false;
        self.token = 0.0;
        self.dw = 0;
    }

    /// C_D, the credit the DCI writes into the flow's data (None before the first ACK).
    pub fn c_d(&self) -> Option<u16> {
        self.c_d
    }

    /// The receiver's R_credit (bit/s) from the last epoch.
    pub fn r_credit(&self) -> f64 {
        self.r_credit
    }

    /// The measured (or initial) RTT_D.
    pub fn rtt_d_ns(&self) -> u64 {
        self.rtt_d_ns
    }

    /// A data packet carrying the current C_D leaves the PFQ at `now` (the start of the credit
    /// loop's round trip, [1]).
    #[inline]
    pub fn on_data(&mut self, now: Nanos) {
        if self.c_d.is_some() && self.t_cd.is_none() {
            self.t_cd = Some(now);
        }
    }

    /// Would an ACK with credit `c_r` start an epoch?
    #[inline]
    pub fn is_epoch(&self, c_r: u16) -> bool {
        self.c_d != Some(c_r)
    }

    fn step_bps(p: &DqmParams) -> f64 {
        p.mtu_bytes as f64 * 8e9 / p.rtt_c_ns as f64
    }

    /// Eq. 9 with the current `dw`, clamped to [min_rate, max_rate].
    fn r_bar(&self, p: &DqmParams) -> f64 {
        (self.r_credit + self.dw as f64 * Self::step_bps(p))
            .max(p.min_rate_bps)
            .min(p.max_rate_bps)
    }

    /// An ACK of the flow at `now` carrying `c_r` and `r_credit_bps`, with `q_c` bytes in the
    /// flow's PFQ: the epoch when `c_r` is new ([1]-[8]), then the token step (eqs. 6-8) and
    /// eq. 9. Returns what happened; `r_bar_bps` goes into the ACK.
    pub fn on_ack(
        &mut self,
        p: &DqmParams,
        now: Nanos,
        c_r: u16,
        r_credit_bps: f64,
        q_c: u64,
    ) -> DqmStep {
        let epoch = self.is_epoch(c_r);
        if epoch {
            self.epoch(p, now, c_r, r_credit_bps, q_c);
        }
        // Eqs. 6-8, once per ACK ("with each outgoing packet").
        let r_dqm = self.last.r_dqm_bps;
        let inc = if self.r_credit > 0.0 {
            (p.alpha * r_dqm / self.r_credit).min(1.0)
        } else if r_dqm > 0.0 {
            1.0
        } else {
            0.0
        };
        self.token += inc;
        if self.token >= 1.0 {
            self.dw += 1;
            self.token -= 1.0;
        } else {
            self.dw -= 1;
        }
        // No wind-up: keep eq. 9 inside [min_rate, max_rate].
        let step = Self::step_bps(p);
        let lo = ((p.min_rate_bps - self.r_credit) / step).ceil();
        let hi = ((p.max_rate_bps - self.r_credit) / step).floor();
        self.dw = (self.dw as f64).max(lo).min(hi) as i64;
        let mut s = self.last;
        s.epoch = epoch;
        s.token = self.token;
        s.dw = self.dw;
        s.r_bar_bps = self.r_bar(p);
        s
    }

    fn epoch(&mut self, p: &DqmParams, now: Nanos, c_r: u16, r_credit_bps: f64, q_c: u64) {
        // [1] RTT_D from the credit loop, then the new C_D.
        if let Some(t) = self.t_cd {
            let rtt = now.saturating_sub(t);
            if rtt > 0 {
                self.rtt_d_ns = rtt;
            }
        }
        self.c_d = Some(c_r);
        self.t_cd = None;
        // [2]
        self.r_credit = r_credit_bps;
        self.hist_credit.push(r_credit_bps);
        // [3] eq. 1
        let ratio = p.rtt_c_ns as f64 / self.rtt_d_ns as f64;
        let n = ((ratio + 0.5).floor() as usize).clamp(1, p.history.max(1));
        // [4] eq. 2
        let r_pre_eq = self.hist_dqm.mean_last(n).unwrap_or(r_credit_bps);
        // [5] eq. 3
        let q_pre = ((r_pre_eq - r_credit_bps) * p.rtt_c_ns as f64 / 8e9 + q_c as f64).max(0.0);
        // [5b] No queue predicted: no cut left over (our choice, docs/mlcc.md).
        if q_pre == 0.0 && self.dw < 0 {
            self.dw = 0;
        }
        // [6] eq. 4
        let mean_credit = self.hist_credit.mean_last(p.m).unwrap_or(0.0);
        let d_pre = if q_pre == 0.0 {
            0.0
        } else if mean_credit == 0.0 {
            (p.theta_ns + p.d_t_ns) as f64
        } else {
            q_pre * 8e9 / mean_credit
        };
        // [7] eq. 5, on both sides of D_t (our choice, docs/mlcc.md).
        let r_dqm = (r_credit_bps * (1.0 - (d_pre - p.d_t_ns as f64) / p.theta_ns as f64)).max(0.0);
        self.have_epoch = true;
        self.last = DqmStep {
            epoch: true,
            n,
            rtt_d_ns: self.rtt_d_ns,
            r_pre_eq_bps: r_pre_eq,
            q_pre_bytes: q_pre,
            d_pre_ns: d_pre,
            r_dqm_bps: r_dqm,
            ..DqmStep::default()
        };
        // [8] the suggestion rate with the new R_credit joins the history.
        let r_bar = self.r_bar(p);
        self.hist_dqm.push(r_bar);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> DqmParams {
        DqmParams {
            theta_ns: 18_000_000,
            d_t_ns: 1_000_000,
            m: 5,
            alpha: 0.5,
            rtt_c_ns: 6_000_000,
            rtt_d_ns: 20_000,
            mtu_bytes: 1000,
            history: 512,
            min_rate_bps: 1e8,
            max_rate_bps: 1e11,
        }
    }

    #[test]
    fn empty_queue_suggests_a_little_above_credit() {
        let p = params();
        let mut d = Dqm::new(&p);
        let s = d.on_ack(&p, 0, 1, 12.5e9, 0);
        assert!(s.epoch);
        assert_eq!(s.n, 300); // 6 ms / 20 us
        assert_eq!(s.q_pre_bytes, 0.0);
        // Eq. 5 with D_pre = 0: R_credit * (1 + 1/18).
        assert!((s.r_dqm_bps - 12.5e9 * (1.0 + 1.0 / 18.0)).abs() < 1.0);
        // inc = 0.5 * 1.0556 = 0.5278 < 1: dw -1.
        assert_eq!(s.dw, -1);
        let s = d.on_ack(&p, 10, 1, 12.5e9, 0);
        assert!(!s.epoch);
        // token 1.0556 >= 1: dw back to 0.
        assert_eq!(s.dw, 0);
        assert_eq!(s.r_bar_bps, 12.5e9);
    }

    /// [5b]: once no queue is predicted, a negative dw (the cut of a drained queue) goes to 0
    /// at the next epoch instead of climbing back by D_t / theta per ACK.
    #[test]
    fn no_predicted_queue_lifts_a_negative_dw() {
        let mut p = params();
        p.rtt_d_ns = 6_000_000; // n = 1
        let mut d = Dqm::new(&p);
        d.on_ack(&p, 0, 1, 10e9, 50_000_000);
        let mut s = d.on_ack(&p, 1, 1, 10e9, 0);
        for k in 2..21 {
            s = d.on_ack(&p, k, 1, 10e9, 0);
        }
        assert_eq!(s.dw, -21);
        let s = d.on_ack(&p, 100, 2, 10e9, 0);
        assert_eq!(s.q_pre_bytes, 0.0);
        // dw 0, then this ACK's token step (0 + 0.5278 < 1): -1.
        assert_eq!(s.dw, -1);
        assert!((s.r_bar_bps - (10e9 - 8e12 / 6e6)).abs() < 1e-3, "{s:?}");
    }

    #[test]
    fn a_deep_queue_lowers_the_suggested_rate() {
        let p = params();
        let mut d = Dqm::new(&p);
        // 10 MB at 12.5 Gbit/s = 6.4 ms of delay > D_t.
        let s = d.on_ack(&p, 0, 1, 12.5e9, 10_000_000);
        assert!((s.d_pre_ns - 6.4e6).abs() < 1.0);
        assert!(s.r_dqm_bps < 12.5e9);
        let mut last = s;
        for i in 0..1000 {
            last = d.on_ack(&p, 1 + i, 1, 12.5e9, 10_000_000);
        }
        // R_DQM = 0.7 R_credit: inc = 0.35, so dw drifts by 2 * 0.35 - 1 = -0.3 per ACK.
        assert!((-305..=-295).contains(&last.dw), "{last:?}");
        assert!(last.r_bar_bps < 12.5e9 - 295.0 * 1000.0 * 8e9 / 6e6);
    }

    #[test]
    fn at_the_target_delay_dw_holds() {
        // Q_c = D_t x R_credit: D_pre = D_t exactly, R_DQM = R_credit, inc = 0.5. The token goes
        // 0.5, 1.0, 0.5, 1.0...: with eq. 8 read as `>=` dw goes -1, 0, -1, 0 (a strict `>`
        // would make it fall forever).
        let p = params();
        let mut d = Dqm::new(&p);
        let s = d.on_ack(&p, 0, 1, 8e9, 1_000_000);
        assert_eq!(
            (s.d_pre_ns, s.r_dqm_bps, s.token, s.dw),
            (1e6, 8e9, 0.5, -1)
        );
        for i in 1..=100u64 {
            let s = d.on_ack(&p, i, 1, 8e9, 1_000_000);
            assert_eq!(s.dw, if i % 2 == 1 { 0 } else { -1 }, "ack {i}");
        }
    }

    #[test]
    fn rtt_d_is_the_credit_loop() {
        let p = params();
        let mut d = Dqm::new(&p);
        d.on_ack(&p, 0, 1, 10e9, 0);
        d.on_data(1_000);
        d.on_data(2_000); // only the first data packet with the new C_D counts
        let s = d.on_ack(&p, 51_000, 2, 10e9, 0);
        assert_eq!(s.rtt_d_ns, 50_000);
        assert_eq!(s.n, 120);
        // Same credit: no epoch, RTT_D unchanged.
        let s = d.on_ack(&p, 60_000, 2, 10e9, 0);
        assert!(!s.epoch);
        assert_eq!(s.rtt_d_ns, 50_000);
    }

    #[test]
    fn r_bar_never_leaves_its_bounds() {
        let p = params();
        let mut d = Dqm::new(&p);
        for i in 0..100_000 {
            let s = d.on_ack(&p, i, (i / 10) as u16 & 0x7fff, 1e9, 100_000_000);
            assert!(s.r_bar_bps >= p.min_rate_bps && s.r_bar_bps <= p.max_rate_bps);
        }
        // Wind-up stopped at the floor: dw is where R_bar = min_rate.
        let s = d.on_ack(&p, 100_001, 9999, 1e9, 100_000_000);
        assert_eq!(s.r_bar_bps, p.min_rate_bps);
        // The queue empties: dw climbs back (no wound-up integral to unwind first).
        let mut up = s;
        for i in 0..2000 {
            up = d.on_ack(&p, 200_000 + i, 10_000 + (i / 10) as u16, 1e9, 0);
        }
        assert!(up.r_bar_bps > s.r_bar_bps, "{up:?}");
    }
}
