//! The sender's congestion control: one of the host models ([`Dcqcn`], [`Timely`]) behind one
//! interface the NIC uses (its rate, and the feedback it gets: CNPs, ACK RTTs, timers).

use super::dcqcn::Dcqcn;
use super::timely::Timely;
use longhaul_dataplane::time::Nanos;

#[derive(Clone, Debug)]
pub enum Cc {
    Dcqcn(Dcqcn),
    Timely(Timely),
}

impl Cc {
    /// The rate the QP may send at, b/s.
    pub fn rate_bps(&self) -> f64 {
        match self {
            Cc::Dcqcn(d) => d.rate_bps(),
            Cc::Timely(t) => t.rate_bps(),
        }
    }
    /// A CNP for the QP arrived (DCQCN reacts; TIMELY does not use ECN).
    pub fn on_cnp(&mut self, now: Nanos) {
        if let Cc::Dcqcn(d) = self {
            d.on_cnp(now);
        }
    }
    /// An ACK of `psn` measured `rtt`; `snd_nxt` is the next PSN to send.
    pub fn on_rtt(&mut self, psn: u32, rtt: Nanos, snd_nxt: u32) {
        if let Cc::Timely(t) = self {
            t.on_rtt(psn, rtt, snd_nxt);
        }
    }
    pub fn on_time(&mut self, now: Nanos) {
        if let Cc::Dcqcn(d) = self {
            d.on_time(now);
        }
    }
    pub fn next_timer(&self) -> Option<Nanos> {
        match self {
            Cc::Dcqcn(d) => d.next_timer(),
            Cc::Timely(_) => None,
        }
    }
}
