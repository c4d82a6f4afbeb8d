//! The RNIC's RC transport, as the IB spec (vol. 1, ch. 9.7 "Reliable service") and the HPCC
//! simulator's RNIC model do it: a message is cut into MTU-sized RDMA WRITE packets with
//! consecutive PSNs; the responder acknowledges in-order packets (every `ack_interval` and the
//! last one, which has AckReq set), answers a PSN gap with a PSN-sequence-error NAK (AETH
//! syndrome 0x60, BTH PSN = the expected PSN; repeated at most every `nak_interval` for the
//! same expected PSN) and a duplicate with an ACK of what it has; the requester goes back to
//! the NAK's PSN (go-back-N) or, as a selective-repeat RNIC (RNIC-SR, [`SendQp::selective`]),
//! sends the NAK's PSN and the packet it sent last again and goes on where it was; with no
//! progress for `rto`, either goes back to the oldest unacknowledged PSN. The requester's
//! congestion control hears of a NAK (Swift cuts; DCQCN, as ConnectX's and the HPCC
//! simulator's, reacts to CNPs only).
//! The responder is also DCQCN's notification point: a CE-marked packet makes a CNP to the
//! requester's QP, at most one per `cnp_interval` per QP (DCQCN section 3.1, NP).

use super::cc::Cc;
use longhaul_dataplane::time::Nanos;

/// A QP's retransmission timeout until its host sets it: the scenario's default `rto_us`.
pub const DEFAULT_RTO_NS: Nanos = 8_000_000;

/// The start time of a QP whose message waits to be started ([`SendQp::start_at`]).
pub const NOT_STARTED: Nanos = Nanos::MAX;

/// What the responder answers to a data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Nothing (an in-order packet between two ACKs).
    None,
    /// ACK of every PSN up to and including this one.
    Ack(u32),
    /// NAK: PSN sequence error, expecting this PSN.
    Nak(u32),
}

/// Packets of a message of `size_bytes` at `mtu` payload bytes each (at least one).
pub fn packets(size_bytes: u64, mtu: u32) -> u32 {
    size_bytes.div_ceil(mtu.max(1) as u64).max(1) as u32
}

/// The requester side of one QP: one message (the flow).
#[derive(Clone, Debug)]
pub struct SendQp {
    /// Packets in the message, and the payload of the last one.
    pub total: u32,
    pub last_payload: u32,
    /// Next PSN to send, oldest PSN not yet acknowledged.
    pub snd_nxt: u32,
    pub snd_una: u32,
    /// One past the highest PSN ever sent (a PSN below it is a retransmission).
    high: u32,
    /// When the message may start, and when it completed (the ACK of the last PSN arrived).
    pub start: Nanos,
    pub done: Option<Nanos>,
    /// Earliest time the rate limiter lets the next packet go.
    pub next_tx: Nanos,
    /// Last time the oldest unacknowledged PSN moved (or the QP was (re)started).
    pub last_progress: Nanos,
    pub cc: Option<Cc>,
    /// When each PSN was last sent (for the RTT an ACK measures).
    sent_at: Vec<Nanos>,
    /// Packets sent again (go-back-N after a NAK or a timeout), NAKs and timeouts seen.
    pub retransmitted: u64,
    pub naks: u64,
    pub timeouts: u64,
    pub cnps: u64,
    /// Whether its end-to-end ACKs give the congestion control RTT samples (false when a host
    /// agent feeds them instead: Reflex's pseudo-ACKs for an inter-DC QP).
    pub ack_rtt: bool,
    /// RTT samples from feedback packets ([`SendQp::on_rtt_sample`]).
    pub rtt_samples: u64,
    /// Its retransmission timeout (the host's, raised for a long path: `Host::set_path`).
    pub rto_ns: Nanos,
    /// This QP's own TX window in packets (a BDP with `bdp_window`; 0: none), and whether it
    /// scales with the rate over `line_bps` (`var_window`).
    pub path_window: u32,
    pub var_window: bool,
    pub line_bps: f64,
    /// RNIC-SR (paper 002, section 2.3): "when the sender receives the NACK, it retransmits two
    /// packets: the packet indicated by the ePSN carried in the NACK, and the previous packet
    /// it just sent", then goes on with new data; `false`: go-back-N.
    pub selective: bool,
    /// PSNs to send again before the next new one (selective).
    resend: Vec<u32>,
}

impl SendQp {
    pub fn new(size_bytes: u64, mtu: u32, start: Nanos, cc: Option<Cc>) -> Self {
        let total = packets(size_bytes, mtu);
        let last_payload = (size_bytes - (total as u64 - 1) * mtu as u64) as u32;
        SendQp {
            total,
            last_payload,
            snd_nxt: 0,
            snd_una: 0,
            high: 0,
            start,
            done: None,
            next_tx: start,
            last_progress: start,
            sent_at: vec![0; total as usize],
            cc,
            retransmitted: 0,
            naks: 0,
            timeouts: 0,
            cnps: 0,
            ack_rtt: true,
            rtt_samples: 0,
            rto_ns: DEFAULT_RTO_NS,
            path_window: 0,
            var_window: false,
            line_bps: 0.0,
            selective: false,
            resend: Vec::new(),
        }
    }

    /// Whether it has a packet to send (ignoring the rate limiter); a QP not started yet
    /// ([`NOT_STARTED`]) has none.
    pub fn has_data(&self) -> bool {
        self.done.is_none()
            && (self.snd_nxt < self.total || !self.resend.is_empty())
            && self.start != NOT_STARTED
    }

    /// The BDP window now: `path_window`, with `var_window` scaled by the congestion control's
    /// rate over the line rate, at least one packet (the HPCC simulator's `GetWin`).
    fn bdp_window(&self) -> u32 {
        match self.cc.as_ref() {
            Some(c) if self.var_window && self.line_bps > 0.0 => {
                let r = c.rate_bps(self.line_bps, 0.0) / self.line_bps;
                ((self.path_window as f64 * r.min(1.0)) as u32).max(1)
            }
            _ => self.path_window,
        }
    }

    /// The PSN [`SendQp::take_next`] will send: one to send again, else the next new one.
    pub fn next_psn(&self) -> u32 {
        self.resend.first().copied().unwrap_or(self.snd_nxt)
    }

    /// Whether the TX window (`window` packets unacknowledged, 0 = none), the QP's own
    /// (`path_window`) and the congestion window (Swift) let another packet go.
    pub fn window_open(&self, window: u32) -> bool {
        let out = self.snd_nxt - self.snd_una;
        (window == 0 || out < window)
            && (self.path_window == 0 || out < self.bdp_window())
            && self
                .cc
                .as_ref()
                .and_then(|c| c.window())
                .is_none_or(|w| out < w)
    }

    /// Start the message at `t` (for a QP created with [`NOT_STARTED`]).
    pub fn start_at(&mut self, t: Nanos) {
        self.start = t;
        self.next_tx = t;
        self.last_progress = t;
    }

    /// Payload bytes of packet `psn`.
    pub fn payload(&self, psn: u32, mtu: u32) -> u32 {
        if psn + 1 == self.total {
            self.last_payload
        } else {
            mtu
        }
    }

    /// Take the next PSN to send at `now`, whose frame is `wire_bytes` long on the wire: the
    /// rate limiter then holds the next one for `wire_bytes * 8 / rate`.
    /// With nothing outstanding before it, the packet (re)starts the retransmission timer: the
    /// timer runs from the oldest unacknowledged packet's transmission, not from an ACK that
    /// emptied the QP long before (a paced QP may send its next packet more than `rto` later).
    pub fn take_next(&mut self, now: Nanos, wire_bytes: u64, line_bps: u64) -> u32 {
        let psn = if self.resend.is_empty() {
            let psn = self.snd_nxt;
            if self.snd_una == self.snd_nxt {
                self.last_progress = now;
            }
            self.snd_nxt += 1;
            psn
        } else {
            self.resend.remove(0)
        };
        if psn < self.high {
            self.retransmitted += 1;
        }
        self.high = self.high.max(self.snd_nxt);
        if let Some(t) = self.sent_at.get_mut(psn as usize) {
            *t = now;
        }
        let rate = self.cc.as_ref().map_or(line_bps as f64, |c| {
            c.rate_bps(line_bps as f64, (wire_bytes * 8) as f64)
        });
        let gap = (wire_bytes * 8) as f64 * 1e9 / rate;
        self.next_tx = now + gap.ceil() as Nanos;
        psn
    }

    /// An ACK of every PSN up to `psn` at `now`.
    pub fn on_ack(&mut self, now: Nanos, psn: u32) {
        if psn >= self.total || psn < self.snd_una {
            return;
        }
        let acked = psn + 1 - self.snd_una;
        self.snd_una = psn + 1;
        self.last_progress = now;
        let rtt = now.saturating_sub(self.sent_at.get(psn as usize).copied().unwrap_or(now));
        let snd_nxt = self.snd_nxt;
        if let (Some(cc), true) = (self.cc.as_mut(), self.ack_rtt) {
            cc.on_ack(now, psn, rtt, acked, snd_nxt);
        }
        if self.snd_nxt < self.snd_una {
            self.snd_nxt = self.snd_una;
        }
        let una = self.snd_una;
        self.resend.retain(|&p| p >= una);
        if self.snd_una == self.total {
            self.done = Some(now);
        }
    }

    /// A feedback packet (a pseudo-ACK) measured `rtt` for packet `psn` at `now`: the congestion
    /// control's input, nothing for the transport (it acknowledges nothing).
    pub fn on_rtt_sample(&mut self, now: Nanos, psn: u32, rtt: Nanos) {
        self.rtt_samples += 1;
        let snd_nxt = self.snd_nxt;
        if let Some(cc) = self.cc.as_mut() {
            cc.on_feedback(now, psn, rtt, snd_nxt);
        }
    }

    /// A PSN-sequence-error NAK expecting `psn`: everything before it arrived; go back to it.
    pub fn on_nak(&mut self, now: Nanos, psn: u32) {
        self.naks += 1;
        if let Some(cc) = self.cc.as_mut() {
            cc.on_nak(now);
        }
        if psn > 0 {
            self.on_ack(now, psn - 1);
        }
        if self.done.is_none() && psn < self.snd_nxt {
            if self.selective {
                let last = self.snd_nxt - 1;
                for p in [psn, last] {
                    if !self.resend.contains(&p) {
                        self.resend.push(p);
                    }
                }
            } else {
                self.go_back(psn);
            }
        }
    }

    /// No progress for `rto` while packets are outstanding: go back to the oldest one.
    pub fn check_timeout(&mut self, now: Nanos, rto: Nanos) {
        if self.done.is_none()
            && self.snd_una < self.snd_nxt
            && now >= self.last_progress.saturating_add(rto)
        {
            self.timeouts += 1;
            self.last_progress = now;
            if let Some(cc) = self.cc.as_mut() {
                cc.on_timeout(now);
            }
            self.go_back(self.snd_una);
        }
    }

    fn go_back(&mut self, psn: u32) {
        self.snd_nxt = psn;
        self.resend.clear();
    }

    /// When the retransmission timer fires, if packets are outstanding.
    pub fn timeout_at(&self, rto: Nanos) -> Option<Nanos> {
        (self.done.is_none() && self.snd_una < self.snd_nxt)
            .then(|| self.last_progress.saturating_add(rto))
    }
}

/// The responder side of one QP.
#[derive(Clone, Debug, Default)]
pub struct RecvQp {
    /// The next PSN expected.
    pub epsn: u32,
    /// Out-of-order packets kept (a selective-receive responder, [`RecvQp::keep_ooo`]): placed
    /// at once, counted when the gap before them fills.
    ooo: std::collections::BTreeSet<u32>,
    /// Keep out-of-order packets (RNIC-SR: ConnectX out-of-order placement) instead of
    /// discarding them (classic go-back-N responder). The NAK is the same either way.
    pub keep_ooo: bool,
    /// In-order packets since the last ACK.
    since_ack: u32,
    /// The expected PSN the last NAK was for, and when it was sent.
    nak: Option<(u32, Nanos)>,
    last_cnp: Option<Nanos>,
    pub out_of_order: u64,
    pub duplicates: u64,
}

impl RecvQp {
    /// A responder that keeps out-of-order packets (`keep_ooo`) or discards them.
    pub fn new(keep_ooo: bool) -> Self {
        RecvQp {
            keep_ooo,
            ..RecvQp::default()
        }
    }

    /// Data packet `psn` (AckReq `ack_req`) arrived at `now`.
    pub fn on_data(
        &mut self,
        now: Nanos,
        psn: u32,
        ack_req: bool,
        ack_interval: u32,
        nak_interval: Nanos,
    ) -> Reply {
        if psn == self.epsn {
            self.epsn += 1;
            self.since_ack += 1;
            let mut last = ack_req;
            while self.ooo.remove(&self.epsn) {
                self.epsn += 1;
                self.since_ack += 1;
                last = true;
            }
            if last || self.since_ack >= ack_interval {
                self.since_ack = 0;
                return Reply::Ack(self.epsn - 1);
            }
            Reply::None
        } else if psn > self.epsn {
            self.out_of_order += 1;
            if self.keep_ooo {
                self.ooo.insert(psn);
            }
            match self.nak {
                Some((e, at)) if e == self.epsn && now < at + nak_interval => Reply::None,
                _ => {
                    self.nak = Some((self.epsn, now));
                    Reply::Nak(self.epsn)
                }
            }
        } else {
            self.duplicates += 1;
            self.since_ack = 0;
            Reply::Ack(self.epsn - 1)
        }
    }

    /// A CE-marked packet arrived at `now`: whether to send a CNP (at most one per interval).
    pub fn on_ce(&mut self, now: Nanos, cnp_interval: Nanos) -> bool {
        if self.last_cnp.is_some_and(|t| now < t + cnp_interval) {
            return false;
        }
        self.last_cnp = Some(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_is_cut_into_mtu_packets() {
        let q = SendQp::new(2500, 1000, 0, None);
        assert_eq!((q.total, q.last_payload), (3, 500));
        assert_eq!((q.payload(0, 1000), q.payload(2, 1000)), (1000, 500));
        let q = SendQp::new(3000, 1000, 0, None);
        assert_eq!((q.total, q.last_payload), (3, 1000));
    }

    /// Hand trace: 0 1 [2 lost] 3 4 -> ACK 0, ACK 1, NAK 2, (NAK suppressed), then 2 3 4 after
    /// go-back-N -> ACKs; the sender's snd_nxt goes back to 2 and completes.
    #[test]
    fn go_back_n_trace() {
        let mut s = SendQp::new(5000, 1000, 0, None);
        let mut r = RecvQp::default();
        let line = 100_000_000_000;
        let mut sent = Vec::new();
        for _ in 0..5 {
            sent.push(s.take_next(0, 1000, line));
        }
        assert_eq!(sent, [0, 1, 2, 3, 4]);
        let mut replies = Vec::new();
        for psn in [0, 1, 3, 4] {
            replies.push(r.on_data(10, psn, psn == 4, 1, 500_000));
        }
        assert_eq!(
            replies,
            [Reply::Ack(0), Reply::Ack(1), Reply::Nak(2), Reply::None]
        );
        s.on_ack(20, 0);
        s.on_ack(20, 1);
        s.on_nak(20, 2);
        assert_eq!((s.snd_una, s.snd_nxt), (2, 2));
        for _ in 0..3 {
            let psn = s.take_next(30, 1000, line);
            match r.on_data(40, psn, psn == 4, 1, 500_000) {
                Reply::Ack(p) => s.on_ack(50, p),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(s.done, Some(50));
        assert_eq!(s.retransmitted, 3, "2 (lost), 3 and 4 were sent again");
    }

    /// A selective-receive responder keeps 2 and 3 while 1 is late, NAKs once, and ACKs all
    /// of them when 1 arrives; a go-back-N one discards them.
    #[test]
    fn selective_receive_keeps_out_of_order_packets() {
        let mut r = RecvQp {
            keep_ooo: true,
            ..RecvQp::default()
        };
        let got: Vec<Reply> = [0, 2, 3, 1]
            .iter()
            .map(|&p| r.on_data(0, p, false, 1, 500_000))
            .collect();
        assert_eq!(
            got,
            [Reply::Ack(0), Reply::Nak(1), Reply::None, Reply::Ack(3)]
        );
        assert_eq!(r.epsn, 4);
        let mut g = RecvQp::default();
        for p in [0, 2, 3, 1] {
            g.on_data(0, p, false, 1, 500_000);
        }
        assert_eq!(g.epsn, 2, "2 and 3 were discarded");
    }

    #[test]
    fn coalesced_acks_and_duplicates() {
        let mut r = RecvQp::default();
        let got: Vec<Reply> = (0..4).map(|p| r.on_data(0, p, false, 2, 0)).collect();
        assert_eq!(
            got,
            [Reply::None, Reply::Ack(1), Reply::None, Reply::Ack(3)]
        );
        assert_eq!(r.on_data(0, 1, false, 2, 0), Reply::Ack(3));
        assert_eq!(r.duplicates, 1);
    }

    #[test]
    fn timeout_goes_back_to_the_oldest_unacked() {
        let mut s = SendQp::new(3000, 1000, 0, None);
        for _ in 0..3 {
            s.take_next(0, 1000, 100_000_000_000);
        }
        s.on_ack(5, 0);
        assert_eq!(s.timeout_at(1000), Some(1005));
        s.check_timeout(1004, 1000);
        assert_eq!(s.snd_nxt, 3);
        s.check_timeout(1005, 1000);
        assert_eq!((s.snd_nxt, s.timeouts), (1, 1));
    }

    /// Hand trace: packet 0 at 0, ACKed at 1000 (nothing outstanding, no timer); a paced QP
    /// sends packet 1 at 20000, 19 us after that ACK: its timer (rto 8000) fires at 28000, not
    /// at 9000 (1000 + rto) the moment it leaves.
    #[test]
    fn the_timer_starts_with_the_first_outstanding_packet() {
        let mut s = SendQp::new(3000, 1000, 0, None);
        let line = 100_000_000_000;
        s.take_next(0, 1000, line);
        assert_eq!(s.timeout_at(8000), Some(8000));
        s.on_ack(1000, 0);
        assert_eq!(s.timeout_at(8000), None);
        s.take_next(20_000, 1000, line);
        assert_eq!(s.timeout_at(8000), Some(28_000));
        s.check_timeout(20_001, 8000);
        assert_eq!((s.snd_nxt, s.timeouts), (2, 0), "no spurious timeout");
        // A second packet while 1 is outstanding does not push the timer back.
        s.take_next(21_000, 1000, line);
        assert_eq!(s.timeout_at(8000), Some(28_000));
        s.check_timeout(28_000, 8000);
        assert_eq!((s.snd_nxt, s.timeouts), (1, 1));
    }

    #[test]
    fn cnps_at_most_one_per_interval() {
        let mut r = RecvQp::default();
        let sent: Vec<bool> = [0, 10_000, 49_999, 50_000, 60_000]
            .iter()
            .map(|&t| r.on_ce(t, 50_000))
            .collect();
        assert_eq!(sent, [true, false, false, true, false]);
    }

    /// RNIC-SR: a NAK for PSN 2 after PSNs 0..6 were sent resends 2 and 5 (the last sent),
    /// then goes on with 6; go-back-N would send 2, 3, 4, 5 again.
    #[test]
    fn selective_requester_resends_two_packets() {
        let mut s = SendQp::new(10 * 1024, 1024, 0, None);
        s.selective = true;
        for t in 0..6 {
            assert_eq!(s.take_next(t, 1100, 100_000_000_000), t as u32);
        }
        s.on_nak(10, 2);
        assert_eq!(s.snd_una, 2);
        let sent: Vec<u32> = (0..3)
            .map(|k| s.take_next(20 + k, 1100, 100_000_000_000))
            .collect();
        assert_eq!(sent, [2, 5, 6]);
        assert_eq!(s.retransmitted, 2);
        // An ACK past a queued resend drops it; a timeout goes back N.
        s.on_nak(30, 3);
        s.on_ack(31, 6);
        assert_eq!(s.next_psn(), 7);
        s.check_timeout(31 + s.rto_ns, s.rto_ns);
        assert_eq!(s.next_psn(), 7);
    }
}
