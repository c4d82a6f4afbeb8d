//! The sender's congestion control: one of the host models ([`Dcqcn`], [`Timely`], [`Swift`])
//! behind one interface the NIC uses (its rate and window, and the feedback it gets: CNPs,
//! ACKs with their RTT, NAKs, timeouts, timers).

use super::dcqcn::Dcqcn;
use super::swift::Swift;
use super::timely::Timely;
use longhaul_dataplane::time::Nanos;

#[derive(Clone, Debug)]
pub enum Cc {
    Dcqcn(Dcqcn),
    Timely(Timely),
    Swift(Swift),
    /// A host agent's rates ([`AgentRate`]: MLCC's `min(R_NS, R_DQM)`).
    Agent(AgentRate),
}

/// Rates a host agent sets for a QP, one per control loop (MLCC: the near-source loop and
/// DQM's end-to-end loop); the QP sends at the least of them (MLCC equation 10). Every loop
/// starts at line rate. The agent does all the computing; this only holds the numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentRate {
    loops: [f64; 4],
}

impl AgentRate {
    pub fn new(line_bps: f64) -> Self {
        AgentRate {
            loops: [line_bps; 4],
        }
    }
    /// Loop `id`'s rate is now `bps` (ids beyond the last are ignored).
    pub fn set(&mut self, id: u8, bps: f64) {
        if let Some(l) = self.loops.get_mut(id as usize) {
            *l = bps;
        }
    }
    /// The least of the loops' rates.
    pub fn rate_bps(&self) -> f64 {
        self.loops.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

impl Cc {
    /// The rate the QP may send at, b/s (`frame_bits`: the next frame, for Swift's pacing
    /// below one packet; window-based Swift otherwise sends at line rate).
    pub fn rate_bps(&self, line_bps: f64, frame_bits: f64) -> f64 {
        match self {
            Cc::Dcqcn(d) => d.rate_bps(),
            Cc::Timely(t) => t.rate_bps(),
            Cc::Swift(s) => s.pacing_bps(frame_bits).unwrap_or(line_bps),
            Cc::Agent(a) => a.rate_bps().min(line_bps),
        }
    }
    /// Packets the QP may have unacknowledged, if the congestion control sets it.
    pub fn window(&self) -> Option<u32> {
        match self {
            Cc::Swift(s) => Some(s.window()),
            _ => None,
        }
    }
    /// A CNP for the QP arrived (DCQCN reacts; the delay-based ones do not use ECN).
    pub fn on_cnp(&mut self, now: Nanos) {
        if let Cc::Dcqcn(d) = self {
            d.on_cnp(now);
        }
    }
    /// An ACK of `psn` at `now` measured `rtt` and newly acknowledged `acked` packets;
    /// `snd_nxt` is the next PSN to send.
    pub fn on_ack(&mut self, now: Nanos, psn: u32, rtt: Nanos, acked: u32, snd_nxt: u32) {
        match self {
            Cc::Dcqcn(_) | Cc::Agent(_) => {}
            Cc::Timely(t) => t.on_rtt(psn, rtt, snd_nxt),
            Cc::Swift(s) => s.on_ack(now, rtt, acked),
        }
    }
    /// A feedback packet that acknowledges nothing (a Reflex pseudo-ACK) measured `rtt` for
    /// packet `psn`: TIMELY takes it as any RTT sample (its once-per-RTT rule keyed on PSNs);
    /// Swift as an ACK of one packet (its additive increase counts ACKed packets; our choice,
    /// docs/emulator.md) held against its target without the path's propagation; DCQCN
    /// ignores delay.
    pub fn on_feedback(&mut self, now: Nanos, psn: u32, rtt: Nanos, snd_nxt: u32) {
        match self {
            Cc::Dcqcn(_) | Cc::Agent(_) => {}
            Cc::Timely(t) => t.on_rtt(psn, rtt, snd_nxt),
            Cc::Swift(s) => s.on_feedback(now, rtt),
        }
    }
    pub fn on_nak(&mut self, now: Nanos) {
        if let Cc::Swift(s) = self {
            s.on_nak(now);
        }
    }
    pub fn on_timeout(&mut self, now: Nanos) {
        if let Cc::Swift(s) = self {
            s.on_timeout(now);
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
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_rate_is_the_least_loop() {
        let mut c = Cc::Agent(AgentRate::new(25e9));
        assert_eq!(c.rate_bps(25e9, 8000.0), 25e9);
        if let Cc::Agent(a) = &mut c {
            a.set(0, 20e9);
            a.set(1, 12e9);
            a.set(9, 1.0); // no such loop: ignored
        }
        assert_eq!(c.rate_bps(25e9, 8000.0), 12e9);
        if let Cc::Agent(a) = &mut c {
            a.set(1, 30e9);
        }
        assert_eq!(c.rate_bps(25e9, 8000.0), 20e9);
        // Never above the line.
        assert_eq!(c.rate_bps(10e9, 8000.0), 10e9);
        assert_eq!(c.window(), None);
    }
}
