//! PFC pause time, measured on the wire: every PFC or PAUSE frame a link delivers is read at the
//! end that receives it, and each priority of that end is counted as paused from the frame's
//! arrival until its time runs out, a later frame for the priority replaces it, or the run ends.
//! How long a pause lasts is the receiver's rule: a switch port honors the frame's time (802.1Qbb,
//! as its `PauseState` does); a host with `pfc_pause = "until-resume"` holds it until a frame with
//! time 0 (the HPCC simulator's NIC).
//!
//! THEMIS (paper 000, section VII-B, Figure 11) reports "PFC pause time" as the fraction of the
//! run during which a pause is in force; the authors' script (Themis repository,
//! NS3/simulation/mix/*/pfc.py) takes it from traffic start to the last flow's end, with a pause
//! counted from the first PAUSE event until a RESUME anywhere. Here it is the union of every
//! (receiving end, priority) interval over the same span ([`PauseLog::fraction`]), and the total
//! per end (the sum over its priorities) beside it.

use crate::scenario::End;
use longhaul_dataplane::time::{quanta_to_ns, Nanos};
use longhaul_dataplane::wire::pfc::{self, MacControl};
use std::collections::HashMap;

const PRIORITIES: usize = 8;

/// One receiving end's pause timers and what they covered.
#[derive(Clone, Debug, Default)]
struct EndPauses {
    /// Per priority: since when its current interval is counted, and until when it holds.
    since: [Nanos; PRIORITIES],
    until: [Nanos; PRIORITIES],
    /// Closed intervals `[start, end)`, every priority.
    intervals: Vec<(Nanos, Nanos)>,
}

impl EndPauses {
    fn set(&mut self, prio: usize, now: Nanos, until: Nanos) {
        self.close(prio, now);
        self.since[prio] = now;
        self.until[prio] = until;
    }

    /// Ends priority `prio`'s current interval at `now` (or where it ran out before).
    fn close(&mut self, prio: usize, now: Nanos) {
        let end = self.until[prio].min(now);
        if end > self.since[prio] {
            self.intervals.push((self.since[prio], end));
        }
        self.until[prio] = 0;
    }
}

/// The pauses every end of a network received in one run.
#[derive(Clone, Debug, Default)]
pub struct PauseMeter {
    ends: HashMap<End, EndPauses>,
}

impl PauseMeter {
    /// `frame` arrives at `to` at `now` over a link of `rate_bps`; `until_resume`: the receiver
    /// holds a pause until a resume. Frames other than MAC Control are ignored (cheaply: the
    /// EtherType is looked at first).
    #[inline]
    pub fn on_frame(
        &mut self,
        to: End,
        frame: &[u8],
        now: Nanos,
        rate_bps: u64,
        until_resume: bool,
    ) {
        if !longhaul_dataplane::wire::ethernet::is_mac_control(frame) {
            return;
        }
        let Ok(mc) = pfc::parse(frame) else {
            return;
        };
        let until = |quanta: u16| {
            if quanta == 0 {
                now
            } else if until_resume {
                Nanos::MAX
            } else {
                now.saturating_add(quanta_to_ns(quanta, rate_bps))
            }
        };
        let e = self.ends.entry(to).or_default();
        match mc {
            MacControl::Pfc { enable, times } => {
                for (i, &t) in times.iter().enumerate() {
                    if enable & (1 << i) != 0 {
                        e.set(i, now, until(t));
                    }
                }
            }
            MacControl::Pause { time } => {
                for i in 0..PRIORITIES {
                    e.set(i, now, until(time));
                }
            }
        }
    }

    /// Closes every interval still open at `end` and returns the log.
    pub fn finish(mut self, end: Nanos) -> PauseLog {
        let mut ends: Vec<(End, Vec<(Nanos, Nanos)>)> = self
            .ends
            .drain()
            .map(|(k, mut e)| {
                for p in 0..PRIORITIES {
                    e.close(p, end);
                }
                (k, e.intervals)
            })
            .collect();
        ends.sort_by_key(|(k, _)| match *k {
            End::Host(h) => (0, h, 0),
            End::Switch(i, p) => (1, i, p),
        });
        PauseLog { ends }
    }
}

/// Per receiving end, the intervals during which some priority of it was paused.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PauseLog {
    pub ends: Vec<(End, Vec<(Nanos, Nanos)>)>,
}

impl PauseLog {
    /// The paused time of one end: the sum over its priorities.
    pub fn total_ns(intervals: &[(Nanos, Nanos)]) -> Nanos {
        intervals.iter().map(|&(a, b)| b - a).sum()
    }

    /// Paused time per host (index) and per switch (index), summed over ports and priorities.
    pub fn per_node(&self, hosts: usize, switches: usize) -> (Vec<Nanos>, Vec<Nanos>) {
        let (mut h, mut s) = (vec![0; hosts], vec![0; switches]);
        for (end, iv) in &self.ends {
            let t = Self::total_ns(iv);
            match *end {
                End::Host(i) => {
                    if let Some(x) = h.get_mut(i) {
                        *x += t;
                    }
                }
                End::Switch(i, _) => {
                    if let Some(x) = s.get_mut(i) {
                        *x += t;
                    }
                }
            }
        }
        (h, s)
    }

    /// The fraction of `[from, to)` during which anything in the network was paused (the union
    /// of every interval); 0 for an empty span.
    pub fn fraction(&self, from: Nanos, to: Nanos) -> f64 {
        self.fraction_of(from, to, |_| true)
    }

    /// [`PauseLog::fraction`] over the ends `keep` accepts only.
    pub fn fraction_of(&self, from: Nanos, to: Nanos, keep: impl Fn(&End) -> bool) -> f64 {
        if to <= from {
            return 0.0;
        }
        let mut all: Vec<(Nanos, Nanos)> = self
            .ends
            .iter()
            .filter(|(e, _)| keep(e))
            .flat_map(|(_, iv)| iv.iter().map(|&(a, b)| (a.max(from), b.min(to))))
            .filter(|&(a, b)| b > a)
            .collect();
        all.sort_unstable();
        let (mut covered, mut cur): (Nanos, Option<(Nanos, Nanos)>) = (0, None);
        for (a, b) in all {
            cur = match cur {
                Some((s, e)) if a <= e => Some((s, e.max(b))),
                Some((s, e)) => {
                    covered += e - s;
                    Some((a, b))
                }
                None => Some((a, b)),
            };
        }
        if let Some((s, e)) = cur {
            covered += e - s;
        }
        covered as f64 / (to - from) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_dataplane::wire::ethernet::MacAddr;

    fn pfc_frame(prio: usize, quanta: u16) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        let mut times = [0u16; 8];
        times[prio] = quanta;
        let n = pfc::build_pfc(&mut f, MacAddr([2, 0, 0, 0, 0, 1]), 1 << prio, times).unwrap();
        f.truncate(n);
        f
    }

    const GBPS100: u64 = 100_000_000_000;

    #[test]
    fn a_pause_counts_until_its_time_a_refresh_or_a_resume() {
        let mut m = PauseMeter::default();
        let sw = End::Switch(0, 1);
        // 1000 quanta at 100 Gb/s = 5120 ns.
        m.on_frame(sw, &pfc_frame(3, 1000), 0, GBPS100, false);
        // A refresh at 4000 ns: the first interval ends there, a new one starts.
        m.on_frame(sw, &pfc_frame(3, 1000), 4000, GBPS100, false);
        // Runs out at 9120; a resume at 20000 closes nothing more.
        m.on_frame(sw, &pfc_frame(3, 0), 20_000, GBPS100, false);
        // A host holding until resume: paused from 1000 to the resume at 3000.
        m.on_frame(End::Host(2), &pfc_frame(3, 65535), 1000, GBPS100, true);
        m.on_frame(End::Host(2), &pfc_frame(3, 0), 3000, GBPS100, true);
        // Not MAC Control: ignored.
        m.on_frame(End::Host(0), &[0u8; 64], 0, GBPS100, true);
        let log = m.finish(50_000);
        let (h, s) = log.per_node(3, 1);
        assert_eq!(s, vec![9120]);
        assert_eq!(h, vec![0, 0, 2000]);
        // Union: [0, 9120) covers [1000, 3000).
        assert!((log.fraction(0, 50_000) - 9120.0 / 50_000.0).abs() < 1e-12);
        assert!((log.fraction(5000, 10_000) - 4120.0 / 5000.0).abs() < 1e-12);
    }

    #[test]
    fn a_pause_never_resumed_lasts_to_the_end_of_the_run() {
        let mut m = PauseMeter::default();
        m.on_frame(End::Host(0), &pfc_frame(3, 10), 100, GBPS100, true);
        let log = m.finish(1100);
        assert_eq!(log.per_node(1, 0).0, vec![1000]);
        assert_eq!(log.fraction(1100, 1100), 0.0);
    }
}
