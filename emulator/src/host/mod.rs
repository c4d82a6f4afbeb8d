//! A modeled RDMA host: one RNIC port at line rate with RC QPs ([`rnic`]), DCQCN at the senders
//! ([`dcqcn`]), and PFC honored on the data priority. Everything it sends and receives is a
//! real frame (RoCEv2 WRITEs with valid ICRC, RC ACK/NAK, CNP; 802.1Qbb PFC), so the switches'
//! pipelines see exactly what they would see from a real RNIC.
//!
//! The NIC sends control frames (ACK, NAK, CNP) before data, and serves its sending QPs round
//! robin, each held back by its rate limiter (DCQCN's Rc, or line rate).
//!
//! With `[emulation] connect = "tcp"` a flow's QPs do not exist at its start: the hosts first
//! set them up over TCP, as perftest and rdma_cm-style applications do (the out-of-band QP-info
//! exchange; THEMIS's handshake monitor, paper 000 section IV and Fig. 5, watches it):
//! 1. the client (the data sender, or the receiver with `connect_from = "receiver"`) sends a
//!    SYN to [`CONNECT_PORT`] from the flow's UDP source port at the flow's start;
//! 2. the server answers SYN-ACK; the client ACKs any SYN-ACK that acknowledges its SYN;
//! 3. the server, on the ACK of its SYN-ACK, has the connection: it creates its QP (the host
//!    agents hear of it: THEMIS's daemon reports it) and sends its QP info (a 16-byte segment:
//!    QPN, first PSN) to the client; the client creates its QP on receiving it;
//! 4. a RST before that (THEMIS's SYN-cookie ESW resets the first handshake it validates)
//!    makes the client try again at once with a new ISN: the application reconnects.
//!
//! Segments are real (IPv4 checksums, TCP checksums over the pseudo-header, MSS option on SYN
//! and SYN-ACK), built with `wire::tcp`. The sender's QP starts its message when it is created;
//! the flow's FCT counts from there (the first data packet), not from the SYN.

pub mod cc;
pub mod dcqcn;
pub mod rnic;
pub mod swift;
pub mod timely;

use crate::scenario::{BdpWindow, Connect, HostSpec, Params};
use cc::{AgentRate, Cc};
use dcqcn::Dcqcn;
pub use longhaul_dataplane::replay::FramePool;
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::ethernet;
use longhaul_dataplane::wire::ethernet::{MacAddr, ETHERTYPE_IPV4, ETHERTYPE_MAC_CONTROL};
use longhaul_dataplane::wire::parse::{parse, ParseOptions};
use longhaul_dataplane::wire::pfc::{self, MacControl};
use longhaul_dataplane::wire::roce::{
    build_ack_v4, build_cnp_v4, build_roce_v4_in_place, opcode, write_reth, AckSpec, Aeth, Bth,
    BthRepr, RoceAddrs, Syndrome, AETH_LEN, CNP_PAYLOAD_LEN, PKEY_DEFAULT, RETH_LEN,
    ROCE_V4_AFTER_BTH,
};
use longhaul_dataplane::wire::tcp::{self, TcpPacket, TcpRepr};
use longhaul_dataplane::wire::{ecn, icrc};
use longhaul_runtime::{HostAddr, HostAgent, QpInfo, RxAction, TxKind};
use rnic::{RecvQp, Reply, SendQp};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::Ipv4Addr;
use swift::Swift;
use timely::Timely;

/// The hosts' maps are looked up on every packet and never iterated: a fast hasher with fixed
/// seeds (std's SipHash was 3% of a run; fixed seeds keep the runs alike, like every table).
type Hasher = ahash::RandomState;

fn hasher() -> Hasher {
    ahash::RandomState::with_seeds(1, 2, 3, 4)
}

/// Bytes per frame on the wire beyond the frame itself: preamble + SFD, IFG, FCS (what the
/// switches' traffic managers count too).
pub const WIRE_OVERHEAD: u64 = longhaul_dataplane::tm::DEFAULT_FRAME_OVERHEAD as u64;
/// AETH syndrome of an ACK (credit count "invalid": no end-to-end credits).
const SYNDROME_ACK: u8 = Syndrome::ACK_NO_CREDIT;
/// AETH syndrome of a PSN-sequence-error NAK.
const SYNDROME_NAK_PSN: u8 = Syndrome::NAK_PSN_SEQ_ERR;

/// Lengths of the ACK/NAK and CNP frames the hosts build (`build_ack_v4`, `build_cnp_v4`).
const ACK_V4_LEN: usize = ROCE_V4_AFTER_BTH + AETH_LEN + icrc::ICRC_LEN;
const CNP_V4_LEN: usize = ROCE_V4_AFTER_BTH + CNP_PAYLOAD_LEN + icrc::ICRC_LEN;

/// Length of an RDMA WRITE data frame the hosts send (no FCS): Ethernet, IPv4, UDP, BTH, the
/// RETH on a message's first packet, `payload` bytes padded to 4, the ICRC.
pub fn data_frame_len(payload: usize, first: bool) -> usize {
    let reth = if first { RETH_LEN } else { 0 };
    ROCE_V4_AFTER_BTH + reth + payload + (4 - payload % 4) % 4 + icrc::ICRC_LEN
}

/// Time to put `bytes` (a frame, without FCS) on a link of `rate_bps`.
pub fn wire_time(bytes: usize, rate_bps: u64) -> Nanos {
    ((bytes as u64 + WIRE_OVERHEAD) * 8 * 1_000_000_000).div_ceil(rate_bps)
}

/// Why a flow is not done when a run ends (`flows.csv`'s `state`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FlowState {
    /// Its QP has not started (a connection being set up, or a start after the end).
    NotStarted,
    /// Data to send, held by a PFC pause of the data priority at the host's port.
    PausedByPfc,
    /// Data to send, held by the window (the TX window or Swift's): `packets` outstanding.
    WindowLimited { packets: u32 },
    /// Data to send, at a congestion-controlled rate below the line rate.
    RateLimited { bps: f64 },
    /// Data to send, at line rate.
    Sending,
    /// Everything sent, ACKs still to come.
    AwaitingAcks,
    /// Everything sent, no progress for half the retransmission timeout or more: a packet or
    /// its ACK was lost, and the timer (due at `at_ns`) will send it again.
    WaitingOnTimeout { at_ns: Nanos },
}

impl std::fmt::Display for FlowState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlowState::NotStarted => write!(f, "not started"),
            FlowState::PausedByPfc => write!(f, "paused by PFC"),
            FlowState::WindowLimited { packets } => {
                write!(f, "window-limited ({packets} packets outstanding)")
            }
            FlowState::RateLimited { bps } => write!(f, "sending at {:.3} Gb/s", bps / 1e9),
            FlowState::Sending => write!(f, "sending at line rate"),
            FlowState::AwaitingAcks => write!(f, "all sent, awaiting ACKs"),
            FlowState::WaitingOnTimeout { at_ns } => {
                write!(f, "waiting on a timeout (due at {at_ns} ns)")
            }
        }
    }
}

/// The requester end of a flow on its source host.
pub struct Sender {
    pub flow: usize,
    pub qp: SendQp,
    peer_ip: Ipv4Addr,
    /// The responder's QPN (BTH DestQP of data) and ours (of its ACKs and CNPs).
    peer_qpn: u32,
    sport: u16,
}

/// The responder end of a flow on its destination host.
struct Receiver {
    qp: RecvQp,
    peer_ip: Ipv4Addr,
    peer_qpn: u32,
    sport: u16,
    flow: usize,
    /// The message's packets: once `qp.epsn` reaches it, the data has all arrived.
    packets: u32,
    delivered: bool,
}

/// TCP port the server end of a flow's connection listens on (perftest's default).
pub const CONNECT_PORT: u16 = 18515;
/// MSS announced on SYN and SYN-ACK.
const CONNECT_MSS: u16 = 1460;
/// Bytes of QP info the server sends the client once connected (QPN, first PSN, 8 reserved).
const QP_INFO_LEN: usize = 16;

/// One end of a flow's TCP connection (`connect = "tcp"`).
struct Conn {
    flow: usize,
    peer: Ipv4Addr,
    /// This host opens the connection.
    client: bool,
    /// This host is the flow's data sender.
    sender: bool,
    remote: bool,
    /// Our initial sequence number (the client's changes on every attempt).
    isn: u32,
    /// The peer's, once seen.
    peer_isn: u32,
    /// This end's QP exists.
    up: bool,
}

/// Counters of one host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    pub tx_frames: u64,
    pub rx_frames: u64,
    pub pfc_rx: u64,
    pub cnps_sent: u64,
    pub naks_sent: u64,
    /// Frames it could not use (not for one of its QPs, malformed).
    pub rx_ignored: u64,
    /// Feedback packets a host agent turned into RTT samples (Reflex's pseudo-ACKs).
    pub rtt_samples: u64,
    /// Feedback packets a host agent turned into rates (MLCC's Switch-INT and R_DQM).
    pub agent_rates: u64,
    /// TCP segments sent for connection setup (`connect = "tcp"`).
    pub tcp_tx: u64,
    /// Connection attempts reset by a RST and made again.
    pub tcp_retries: u64,
    /// Connections set up (counted at the end whose QP came up last: the client).
    pub connected: u64,
}

pub struct Host {
    pub spec: HostSpec,
    /// Destination MAC of everything it sends: the MAC of the port at the other end of its link.
    pub gw_mac: [u8; 6],
    p: Params,
    ctrl: VecDeque<Vec<u8>>,
    pub senders: Vec<Sender>,
    /// The indices in `senders` of the QPs started and not done, in increasing order (may
    /// still hold some that finished since the last `on_time`, which drops them): what the
    /// per-wake scans (`on_time`, `next_wake`, the round robin of `next_data`) visit. On a
    /// large scenario most of a host's QPs are done or not started yet, and scanning them all
    /// was most of a host's cost per event. A done QP has nothing to send, no timeout and no
    /// timer to wake for, and nothing reads its congestion control again.
    live: Vec<usize>,
    /// The QPs whose start is set and still to come (or just come), by (start, index): until
    /// its start a QP has nothing outstanding and no timer running (`on_time` leaves it as
    /// it is), and it wakes the host at `max(start, NIC free, pause end)`; it joins `live`
    /// when the host reaches its start (`promote`). QPs not started (`NOT_STARTED`) are in
    /// neither until `start_flow` / `start_sender`.
    pending: BinaryHeap<Reverse<(Nanos, usize)>>,
    by_qpn: HashMap<u32, usize, Hasher>,
    receivers: HashMap<u32, Receiver, Hasher>,
    nic_free: Nanos,
    paused_until: Nanos,
    rr: usize,
    /// The mechanisms' host-side halves (`[emulation] host_agents`).
    agents: Vec<Box<dyn HostAgent>>,
    /// Frames the agents made, each sent (as control) from its time on, in time order.
    scheduled: VecDeque<(Nanos, Vec<u8>)>,
    /// Connections by the client's port (the flow's UDP source port).
    conns: HashMap<u16, Conn, Hasher>,
    pub stats: HostStats,
    /// Flows whose data has all arrived here, and when, since the driver last took them
    /// ([`Host::take_delivered`]).
    delivered: Vec<(usize, Nanos)>,
}

/// QPNs: the requester of flow i is `REQ_QPN_BASE + i`, its responder `RESP_QPN_BASE + i`.
const REQ_QPN_BASE: u32 = 0x100;
const RESP_QPN_BASE: u32 = 0x80_0000;

/// Flow `flow`'s UDP source port (both directions): what ECMP hashes besides the addresses.
pub fn sport(flow: usize) -> u16 {
    49152 + (flow % 16384) as u16
}

/// Flow `flow`'s QP at one end (`requester`: the sender's).
fn qp_info(flow: usize, peer: Ipv4Addr, requester: bool, remote: bool) -> QpInfo {
    let (req, resp) = (REQ_QPN_BASE + flow as u32, RESP_QPN_BASE + flow as u32);
    QpInfo {
        peer_ip: peer,
        local_qpn: if requester { req } else { resp },
        peer_qpn: if requester { resp } else { req },
        requester,
        remote,
    }
}

impl Host {
    pub fn new(spec: HostSpec, gw_mac: [u8; 6], p: Params) -> Self {
        Host {
            spec,
            gw_mac,
            p,
            ctrl: VecDeque::new(),
            senders: Vec::new(),
            live: Vec::new(),
            pending: BinaryHeap::new(),
            by_qpn: HashMap::with_hasher(hasher()),
            receivers: HashMap::with_hasher(hasher()),
            nic_free: 0,
            paused_until: 0,
            rr: 0,
            agents: Vec::new(),
            scheduled: VecDeque::new(),
            conns: HashMap::with_hasher(hasher()),
            stats: HostStats::default(),
            delivered: Vec::new(),
        }
    }

    /// Run `agent` (a mechanism's host-side half) on this host.
    pub fn add_agent(&mut self, agent: Box<dyn HostAgent>) {
        self.agents.push(agent);
    }

    /// Flow `flow`'s QP (the requester's or the responder's end) is created at `start` (a QP
    /// started later by the run is reported at 0): every agent may send something about it.
    /// Returns the QP as the agents saw it.
    fn announce(
        &mut self,
        start: Nanos,
        flow: usize,
        peer: Ipv4Addr,
        requester: bool,
        remote: bool,
    ) -> QpInfo {
        let qp = qp_info(flow, peer, requester, remote);
        let at = if start == rnic::NOT_STARTED { 0 } else { start };
        self.report(at, &qp);
        qp
    }

    /// The agents hear that `qp` is created at `at`; what they send goes out from then on.
    fn report(&mut self, at: Nanos, qp: &QpInfo) {
        let host = self.addr();
        let mut out = Vec::new();
        for a in &mut self.agents {
            a.on_qp_created(&host, qp, &mut out);
        }
        for f in out {
            self.schedule(at, f);
        }
    }

    /// Send control frame `f` from `at` on.
    fn schedule(&mut self, at: Nanos, f: Vec<u8>) {
        let pos = self.scheduled.partition_point(|(t, _)| *t <= at);
        self.scheduled.insert(pos, (at, f));
    }

    fn addr(&self) -> HostAddr {
        HostAddr {
            ip: self.spec.ip,
            mac: self.spec.mac,
            gw_mac: self.gw_mac,
            rate_bps: self.spec.rate_bps,
        }
    }

    /// RDMA payload bytes per packet.
    pub fn mtu(&self) -> u32 {
        self.p.mtu
    }

    /// Start flow `flow`'s message (created not started) at `t`.
    pub fn start_flow(&mut self, flow: usize, t: Nanos) {
        if let Some(i) = self.senders.iter().position(|s| s.flow == flow) {
            self.start_sender(i, t);
        }
    }

    /// Flow `flow` of `size` bytes from this host to `peer` (in another DC: `remote`) starts at
    /// `start`. Returns its index in [`Host::senders`].
    pub fn add_sender(
        &mut self,
        flow: usize,
        peer: Ipv4Addr,
        size: u64,
        start: Nanos,
        remote: bool,
    ) -> usize {
        let line = self.spec.rate_bps;
        let cc = match (self.p.dcqcn, self.p.timely, self.p.swift) {
            (Some(d), _, _) => Some(Cc::Dcqcn(Dcqcn::new(d, line))),
            (None, Some(t), _) => Some(Cc::Timely(Timely::new(t, line))),
            (None, None, Some(w)) => Some(Cc::Swift(Swift::new(w))),
            (None, None, None) => None,
        };
        let connect = self.connect_by(flow, peer, true, start, remote);
        let info = if connect {
            qp_info(flow, peer, true, remote)
        } else {
            self.announce(start, flow, peer, true, remote)
        };
        let start = if connect { rnic::NOT_STARTED } else { start };
        let cc = if self.agents.iter().any(|a| a.rate_control(&info)) {
            Some(Cc::Agent(AgentRate::new(line as f64)))
        } else {
            cc
        };
        let mut qp = SendQp::new(size, self.p.mtu, start, cc);
        qp.rto_ns = self.p.rto_ns;
        qp.selective = self.p.selective_repeat;
        qp.ack_rtt = self.agents.iter().all(|a| a.ack_rtt(&info));
        self.by_qpn
            .insert(REQ_QPN_BASE + flow as u32, self.senders.len());
        self.senders.push(Sender {
            flow,
            qp,
            peer_ip: peer,
            peer_qpn: RESP_QPN_BASE + flow as u32,
            sport: sport(flow),
        });
        let i = self.senders.len() - 1;
        self.track(i);
        i
    }

    /// Sender `i`'s path on the idle network: `hops` switches forward, `base_rtt_ns` (its
    /// propagation both ways, `prop_rtt_ns`, and a frame's store and forward), and the
    /// network's largest BDP in bytes. With `bdp_window` the QP's window becomes a BDP. The
    /// QP's retransmission timeout becomes at least twice the base RTT (an application picks its
    /// QP's local ACK timeout; one below the round trip fires on every packet of a long-haul
    /// flow); Swift scales its target and window with it.
    pub fn set_path(
        &mut self,
        i: usize,
        hops: u32,
        prop_rtt_ns: Nanos,
        base_rtt_ns: Nanos,
        max_bdp_bytes: u64,
    ) {
        let frame = (data_frame_len(self.p.mtu as usize, false) as u64 + WIRE_OVERHEAD) as f64;
        let Some(q) = self.senders.get_mut(i).map(|s| &mut s.qp) else {
            return;
        };
        q.rto_ns = q.rto_ns.max(2 * base_rtt_ns);
        if let Some(which) = self.p.bdp_window {
            // third.cc: pairBdp = pairRtt x bandwidth / 8 (maxBdp the largest), the window in
            // bytes; here in packets of the path MTU, at least one.
            let bdp = match which {
                BdpWindow::Pair => base_rtt_ns as f64 * self.spec.rate_bps as f64 / 8e9,
                BdpWindow::Max => max_bdp_bytes as f64,
            };
            q.path_window = (bdp / self.p.mtu.max(1) as f64).ceil().max(1.0) as u32;
            q.var_window = self.p.var_window;
            q.line_bps = self.spec.rate_bps as f64;
        }
        if let Some(Cc::Swift(w)) = q.cc.as_mut() {
            w.set_path(hops, prop_rtt_ns, max_bdp_bytes as f64 / frame);
        }
    }

    /// Puts sender `i`, just created or started, in `pending` (a start to come, with
    /// something to send) or `live` (anything else but not started: as every QP, it is looked
    /// at on each wake).
    fn track(&mut self, i: usize) {
        let q = &self.senders[i].qp;
        if q.start == rnic::NOT_STARTED {
            return;
        }
        if q.has_data() && q.window_open(self.p.window) && q.next_tx == q.start {
            self.pending.push(Reverse((q.start, i)));
        } else if let Err(at) = self.live.binary_search(&i) {
            self.live.insert(at, i);
        }
    }

    /// Moves the QPs whose start is `now` or earlier from `pending` to `live`.
    fn promote(&mut self, now: Nanos) {
        while let Some(&Reverse((t, i))) = self.pending.peek() {
            if t > now {
                break;
            }
            self.pending.pop();
            if let Err(at) = self.live.binary_search(&i) {
                self.live.insert(at, i);
            }
        }
    }

    /// Starts sender `i`'s message (created not started) at `t` ([`Host::start_flow`] by
    /// index).
    pub fn start_sender(&mut self, i: usize, t: Nanos) {
        if let Some(s) = self.senders.get_mut(i) {
            s.qp.start_at(t);
            self.track(i);
        }
    }

    /// Flow `flow` of `size` bytes from `peer` (in another DC: `remote`) to this host, whose QP
    /// is created at `start`.
    pub fn add_receiver(
        &mut self,
        flow: usize,
        peer: Ipv4Addr,
        size: u64,
        start: Nanos,
        remote: bool,
    ) {
        if !self.connect_by(flow, peer, false, start, remote) {
            self.announce(start, flow, peer, false, remote);
        }
        self.receivers.insert(
            RESP_QPN_BASE + flow as u32,
            Receiver {
                qp: RecvQp::new(self.p.keep_ooo),
                peer_ip: peer,
                peer_qpn: REQ_QPN_BASE + flow as u32,
                sport: sport(flow),
                flow,
                packets: rnic::packets(size, self.p.mtu),
                delivered: false,
            },
        );
    }

    /// Whether a flow's data has all arrived here since the last [`Host::take_delivered`].
    #[inline]
    pub fn has_delivered(&self) -> bool {
        !self.delivered.is_empty()
    }

    /// The flows whose data has all arrived here since the last call, with when (cleared).
    pub fn take_delivered(&mut self, out: &mut Vec<(usize, Nanos)>) {
        out.append(&mut self.delivered);
    }

    fn addrs(&self, peer: Ipv4Addr, sport: u16, dscp: u8, ecn: u8) -> RoceAddrs<Ipv4Addr> {
        RoceAddrs {
            src_mac: MacAddr(self.spec.mac),
            dst_mac: MacAddr(self.gw_mac),
            src_ip: self.spec.ip,
            dst_ip: peer,
            udp_sport: sport,
            dscp,
            ecn,
        }
    }

    /// Whether this host holds a PFC pause until a resume (`pfc_pause = "until-resume"`).
    pub fn pause_until_resume(&self) -> bool {
        self.p.pause_until_resume
    }

    /// A frame arrived at `now`: the host agents see it first (they may rewrite it, take it, or
    /// turn it into an RTT sample for one of the host's QPs), then the RNIC.
    /// The frame's buffer (and those of the frames it answers) comes from and goes back to `pool`.
    pub fn receive(&mut self, now: Nanos, frame: Vec<u8>, pool: &mut FramePool) {
        let mut f = frame;
        self.receive_in(now, &mut f, pool);
        pool.put(f);
    }

    fn receive_in(&mut self, now: Nanos, f: &mut Vec<u8>, pool: &mut FramePool) {
        self.stats.rx_frames += 1;
        if self.agents.is_empty() {
            self.rnic_receive(now, f, pool);
            return;
        }
        let host = self.addr();
        for a in &mut self.agents {
            match a.on_rx(&host, now, f) {
                RxAction::Pass => {}
                RxAction::Consumed => return,
                RxAction::RttSample {
                    local_qpn,
                    psn,
                    rtt_ns,
                } => {
                    self.stats.rtt_samples += 1;
                    match self.by_qpn.get(&local_qpn) {
                        Some(&i) => self.senders[i].qp.on_rtt_sample(now, psn, rtt_ns),
                        None => self.stats.rx_ignored += 1,
                    }
                    return;
                }
                RxAction::Rate {
                    local_qpn,
                    loop_id,
                    bps,
                    pass,
                } => {
                    self.stats.agent_rates += 1;
                    match self.by_qpn.get(&local_qpn) {
                        Some(&i) => {
                            if let Some(Cc::Agent(r)) = self.senders[i].qp.cc.as_mut() {
                                r.set(loop_id, bps as f64);
                            }
                        }
                        None => self.stats.rx_ignored += 1,
                    }
                    if !pass {
                        return;
                    }
                }
            }
        }
        self.rnic_receive(now, f, pool);
    }

    fn rnic_receive(&mut self, now: Nanos, frame: &[u8], pool: &mut FramePool) {
        if !self.conns.is_empty()
            && frame.get(12..14) == Some(&[0x08, 0x00])
            && frame.get(23) == Some(&6)
        {
            self.on_tcp(now, frame);
            return;
        }
        let et = frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]]));
        if et == Some(ETHERTYPE_MAC_CONTROL) {
            self.on_mac_control(now, frame);
            return;
        }
        if et != Some(ETHERTYPE_IPV4) {
            self.stats.rx_ignored += 1;
            return;
        }
        let parsed = parse(frame, &ParseOptions::default());
        let off = parsed.bth_off as usize;
        if parsed.anomaly.is_some() || off == 0 {
            self.stats.rx_ignored += 1;
            return;
        }
        let Ok(bth) = Bth::new_checked(&frame[off..]) else {
            self.stats.rx_ignored += 1;
            return;
        };
        let (op, qpn, psn) = (bth.opcode(), bth.dest_qp(), bth.psn());
        match op {
            opcode::CNP => match self.by_qpn.get(&qpn) {
                Some(&i) => {
                    let s = &mut self.senders[i].qp;
                    s.cnps += 1;
                    if let Some(cc) = s.cc.as_mut() {
                        cc.on_cnp(now);
                    }
                }
                None => self.stats.rx_ignored += 1,
            },
            opcode::RC_ACKNOWLEDGE => {
                let syndrome = Aeth::new_checked(&frame[off + 12..]).map(|a| a.syndrome());
                match (self.by_qpn.get(&qpn), syndrome) {
                    (Some(&i), Ok(s)) if s >> 5 == 0 => self.senders[i].qp.on_ack(now, psn),
                    (Some(&i), Ok(SYNDROME_NAK_PSN)) => self.senders[i].qp.on_nak(now, psn),
                    _ => self.stats.rx_ignored += 1,
                }
            }
            opcode::RC_RDMA_WRITE_FIRST
            | opcode::RC_RDMA_WRITE_MIDDLE
            | opcode::RC_RDMA_WRITE_LAST
            | opcode::RC_RDMA_WRITE_ONLY => {
                let ack_req = bth.ack_req();
                let ce = parsed.ecn == ecn::CE;
                self.on_data(now, qpn, psn, ack_req, ce, pool);
            }
            _ => self.stats.rx_ignored += 1,
        }
    }

    fn on_data(
        &mut self,
        now: Nanos,
        qpn: u32,
        psn: u32,
        ack_req: bool,
        ce: bool,
        pool: &mut FramePool,
    ) {
        let (ack_interval, nak_interval, cnp_interval) = (
            self.p.ack_interval,
            self.p.nak_interval_ns,
            self.p.cnp_interval_ns,
        );
        let Some(r) = self.receivers.get_mut(&qpn) else {
            self.stats.rx_ignored += 1;
            return;
        };
        let reply = r.qp.on_data(now, psn, ack_req, ack_interval, nak_interval);
        if !r.delivered && r.qp.epsn >= r.packets {
            r.delivered = true;
            self.delivered.push((r.flow, now));
        }
        let cnp = ce && r.qp.on_ce(now, cnp_interval);
        let (peer, peer_qpn, sport) = (r.peer_ip, r.peer_qpn, r.sport);
        let a = self.addrs(peer, sport, self.p.control_dscp, ecn::NOT_ECT);
        if cnp {
            let mut buf = pool.get();
            // The frame's exact length: the builder writes every byte (no zeroing beyond it).
            buf.resize(CNP_V4_LEN, 0);
            if let Ok(n) = build_cnp_v4(
                &mut buf,
                a.src_mac,
                a.dst_mac,
                a.src_ip,
                a.dst_ip,
                sport,
                peer_qpn,
                self.p.control_dscp,
            ) {
                buf.truncate(n);
                self.ctrl.push_back(buf);
                self.stats.cnps_sent += 1;
            }
        }
        let (psn, syndrome) = match reply {
            Reply::None => return,
            Reply::Ack(p) => (p, SYNDROME_ACK),
            Reply::Nak(p) => {
                self.stats.naks_sent += 1;
                (p, SYNDROME_NAK_PSN)
            }
        };
        let spec = AckSpec {
            dest_qp: peer_qpn,
            psn,
            syndrome,
            msn: 0,
            pkey: PKEY_DEFAULT,
        };
        let mut buf = pool.get();
        buf.resize(ACK_V4_LEN, 0);
        if let Ok(n) = build_ack_v4(&mut buf, &a, &spec) {
            buf.truncate(n);
            self.ctrl.push_back(buf);
        } else {
            pool.put(buf);
        }
    }

    fn on_mac_control(&mut self, now: Nanos, frame: &[u8]) {
        self.stats.pfc_rx += 1;
        let quanta = match pfc::parse(frame) {
            Ok(MacControl::Pfc { enable, times }) if enable & (1 << self.p.data_priority) != 0 => {
                times[self.p.data_priority as usize]
            }
            Ok(MacControl::Pause { time }) => time,
            _ => return,
        };
        // A pause quantum is 512 bit times at the port's rate; 0 resumes. Held until a
        // resume (`pfc_pause = "until-resume"`), any pause stops data until a frame with 0.
        self.paused_until = if quanta == 0 {
            now
        } else if self.p.pause_until_resume {
            Nanos::MAX
        } else {
            now + longhaul_control::config::pause_time_ns(quanta, self.spec.rate_bps)
        };
    }

    /// With `connect = "tcp"`: register this end of flow `flow`'s connection (the client sends
    /// its SYN at `start`) and return true; otherwise false (the QP exists from the start).
    fn connect_by(
        &mut self,
        flow: usize,
        peer: Ipv4Addr,
        sender: bool,
        start: Nanos,
        remote: bool,
    ) -> bool {
        let Connect::Tcp { by_receiver } = self.p.connect else {
            return false;
        };
        let client = sender != by_receiver;
        let isn = (flow as u32).wrapping_mul(0x9e37_79b9) ^ if client { 0x1000 } else { 0x2000 };
        let c = Conn {
            flow,
            peer,
            client,
            sender,
            remote,
            isn,
            peer_isn: 0,
            up: false,
        };
        let port = sport(flow);
        self.conns.insert(port, c);
        if client && start != rnic::NOT_STARTED {
            if let Some(f) = self.syn(port) {
                self.schedule(start, f);
                self.stats.tcp_tx += 1;
            }
        }
        true
    }

    /// A TCP segment of this host's connection `port` (the client's port) with `flags`.
    fn segment(&self, port: u16, flags: u8, seq: u32, ack: u32, payload: &[u8]) -> Option<Vec<u8>> {
        let c = self.conns.get(&port)?;
        let (sp, dp) = if c.client {
            (port, CONNECT_PORT)
        } else {
            (CONNECT_PORT, port)
        };
        let r = TcpRepr {
            src_port: sp,
            dst_port: dp,
            seq,
            ack,
            flags,
            window: 65535,
            mss: (flags & tcp::SYN != 0).then_some(CONNECT_MSS),
        };
        let mut buf = vec![0u8; 64 + payload.len()];
        let n = tcp::build_frame_v4_with(
            &mut buf,
            MacAddr(self.gw_mac),
            MacAddr(self.spec.mac),
            self.spec.ip,
            c.peer,
            &r,
            payload,
        )
        .ok()?;
        buf.truncate(n);
        Some(buf)
    }

    /// The client's SYN of connection `port`.
    fn syn(&self, port: u16) -> Option<Vec<u8>> {
        let isn = self.conns.get(&port)?.isn;
        self.segment(port, tcp::SYN, isn, 0, &[])
    }

    /// Queue a setup segment now (control frames go before data).
    fn send_ctrl(&mut self, f: Option<Vec<u8>>) {
        if let Some(f) = f {
            self.ctrl.push_back(f);
            self.stats.tcp_tx += 1;
        }
    }

    /// A TCP segment arrived: the connection setup (module documentation).
    fn on_tcp(&mut self, now: Nanos, frame: &[u8]) {
        let ihl = (frame.get(14).copied().unwrap_or(0) & 0x0f) as usize * 4;
        let Some(seg) = frame.get(ethernet::HEADER_LEN + ihl..) else {
            self.stats.rx_ignored += 1;
            return;
        };
        let Ok(t) = TcpPacket::new_checked(seg) else {
            self.stats.rx_ignored += 1;
            return;
        };
        let (from_server, port) = if t.src_port() == CONNECT_PORT {
            (true, t.dst_port())
        } else {
            (false, t.src_port())
        };
        let (flags, seq, ack, has_data) = (t.flags(), t.seq(), t.ack(), !t.payload().is_empty());
        let Some(c) = self
            .conns
            .get_mut(&port)
            .filter(|c| c.client == from_server)
        else {
            self.stats.rx_ignored += 1;
            return;
        };
        if c.up {
            return;
        }
        let isn = c.isn;
        if c.client {
            if flags & tcp::RST != 0 {
                // Reset (THEMIS's ESW after validating its cookie): connect again.
                c.isn = c.isn.wrapping_add(0x0100_0000);
                self.stats.tcp_retries += 1;
                let f = self.syn(port);
                self.send_ctrl(f);
            } else if flags & (tcp::SYN | tcp::ACK) == tcp::SYN | tcp::ACK
                && ack == isn.wrapping_add(1)
            {
                c.peer_isn = seq;
                let f = self.segment(
                    port,
                    tcp::ACK,
                    isn.wrapping_add(1),
                    seq.wrapping_add(1),
                    &[],
                );
                self.send_ctrl(f);
            } else if has_data && flags & tcp::ACK != 0 && ack == isn.wrapping_add(1) {
                // The server's QP info: the connection is real, create our QP.
                self.stats.connected += 1;
                self.qp_up(now, port);
            }
        } else if flags & (tcp::SYN | tcp::ACK | tcp::RST) == tcp::SYN {
            c.peer_isn = seq;
            let f = self.segment(port, tcp::SYN | tcp::ACK, isn, seq.wrapping_add(1), &[]);
            self.send_ctrl(f);
        } else if flags & (tcp::SYN | tcp::ACK | tcp::RST) == tcp::ACK && ack == isn.wrapping_add(1)
        {
            let peer_isn = c.peer_isn;
            let flow = c.flow;
            let qpn = if c.sender {
                REQ_QPN_BASE
            } else {
                RESP_QPN_BASE
            } + flow as u32;
            let mut info = [0u8; QP_INFO_LEN];
            info[0..4].copy_from_slice(&qpn.to_be_bytes());
            let f = self.segment(
                port,
                tcp::PSH | tcp::ACK,
                isn.wrapping_add(1),
                peer_isn.wrapping_add(1),
                &info,
            );
            self.send_ctrl(f);
            self.qp_up(now, port);
        }
    }

    /// Connection `port` is set up at this end: create its QP (the agents hear of it) and, at
    /// the sender, start the message.
    fn qp_up(&mut self, now: Nanos, port: u16) {
        let Some(c) = self.conns.get_mut(&port) else {
            return;
        };
        c.up = true;
        let (flow, peer, sender, remote) = (c.flow, c.peer, c.sender, c.remote);
        self.report(now, &qp_info(flow, peer, sender, remote));
        if sender {
            self.start_flow(flow, now);
        }
    }

    /// Timers due by `now`: retransmission timeouts, DCQCN.
    pub fn on_time(&mut self, now: Nanos) {
        self.promote(now);
        let senders = &mut self.senders;
        self.live.retain(|&i| {
            let q = &mut senders[i].qp;
            if q.done.is_some() {
                return false;
            }
            q.check_timeout(now, q.rto_ns);
            if let Some(cc) = q.cc.as_mut() {
                cc.on_time(now);
            }
            true
        });
    }

    /// The next frame the NIC starts sending at `now`, if it is free and has one.
    /// A data frame is built in a buffer from `pool`.
    pub fn transmit(&mut self, now: Nanos, pool: &mut FramePool) -> Option<Vec<u8>> {
        if self.nic_free > now {
            return None;
        }
        while self.scheduled.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, f)) = self.scheduled.pop_front() {
                self.ctrl.push_back(f);
            }
        }
        let frame = match self.ctrl.pop_front() {
            Some(mut f) => {
                let host = self.addr();
                for a in &mut self.agents {
                    a.on_tx(&host, now, TxKind::Control, &mut f);
                }
                f
            }
            None => self.next_data(now, pool)?,
        };
        self.nic_free = now + wire_time(frame.len(), self.spec.rate_bps);
        self.stats.tx_frames += 1;
        Some(frame)
    }

    fn next_data(&mut self, now: Nanos, pool: &mut FramePool) -> Option<Vec<u8>> {
        if now < self.paused_until {
            return None;
        }
        self.promote(now);
        let n = self.senders.len();
        // Round robin over the QPs from `rr` on: the live ones from the first at or after
        // `rr`, then from the start (a done QP has no data, so they are the same QPs in the
        // same order as all of them from `rr` on would be).
        let from = self.live.partition_point(|&i| i < self.rr);
        let (after, before) = (&self.live[from..], &self.live[..from]);
        let i = after.iter().chain(before).copied().find(|&i| {
            let q = &self.senders[i].qp;
            q.has_data() && q.start <= now && q.next_tx <= now && q.window_open(self.p.window)
        })?;
        self.rr = (i + 1) % n;
        let mtu = self.p.mtu;
        let s = &self.senders[i];
        let psn = s.qp.next_psn();
        let payload = s.qp.payload(psn, mtu) as usize;
        let pad = (4 - payload % 4) % 4;
        let (first, last) = (psn == 0, psn + 1 == s.qp.total);
        let op = match (first, last) {
            (true, true) => opcode::RC_RDMA_WRITE_ONLY,
            (true, false) => opcode::RC_RDMA_WRITE_FIRST,
            (false, true) => opcode::RC_RDMA_WRITE_LAST,
            (false, false) => opcode::RC_RDMA_WRITE_MIDDLE,
        };
        let reth = if first { RETH_LEN } else { 0 };
        let bth = BthRepr {
            opcode: op,
            pad_count: pad as u8,
            pkey: PKEY_DEFAULT,
            dest_qp: s.peer_qpn,
            ack_req: last,
            psn,
            ..BthRepr::default()
        };
        let a = self.addrs(s.peer_ip, s.sport, self.p.data_dscp, ecn::ECT0);
        // Ethernet, IPv4, UDP, BTH, then the RETH (first packet), the payload (zeros), the pad
        // and the ICRC: the frame's exact length. The bytes after the BTH are written in the
        // frame itself (zeroed by the resize, the RETH over them), not built aside and copied;
        // the ICRC is carried across the zeros without reading them.
        let after_bth = reth + payload + pad;
        let n = data_frame_len(payload, first);
        let mut buf = pool.get();
        buf.resize(n, 0);
        if first {
            let len = (s.qp.total as u64 - 1) * mtu as u64 + s.qp.last_payload as u64;
            let _ = write_reth(
                &mut buf[ROCE_V4_AFTER_BTH..],
                0x1000_0000,
                0x1234,
                len as u32,
            );
        }
        let Ok(len) = build_roce_v4_in_place(&mut buf, &a, &bth, after_bth, payload + pad) else {
            pool.put(buf);
            return None;
        };
        buf.truncate(len);
        let host = self.addr();
        let kind = TxKind::Data {
            local_qpn: REQ_QPN_BASE + self.senders[i].flow as u32,
        };
        for a in &mut self.agents {
            a.on_tx(&host, now, kind, &mut buf);
        }
        let len = buf.len();
        let rate = self.spec.rate_bps;
        self.senders[i]
            .qp
            .take_next(now, len as u64 + WIRE_OVERHEAD, rate);
        Some(buf)
    }

    /// Why sender `i`'s flow is not done at `now` (`None`: it is done).
    pub fn flow_state(&self, i: usize, now: Nanos) -> Option<FlowState> {
        let q = &self.senders.get(i)?.qp;
        if q.done.is_some() {
            return None;
        }
        let line = self.spec.rate_bps as f64;
        let frame_bits =
            ((data_frame_len(self.p.mtu as usize, false) as u64 + WIRE_OVERHEAD) * 8) as f64;
        let rate = q.cc.as_ref().map_or(line, |c| c.rate_bps(line, frame_bits));
        Some(if q.start == rnic::NOT_STARTED || q.start > now {
            FlowState::NotStarted
        } else if q.snd_nxt >= q.total {
            // Everything sent, not everything acknowledged: the ACKs are on their way, or a
            // packet was lost and the retransmission timer will send it again.
            match q.timeout_at(q.rto_ns) {
                Some(t) if now.saturating_sub(q.last_progress) >= q.rto_ns / 2 => {
                    FlowState::WaitingOnTimeout { at_ns: t }
                }
                _ => FlowState::AwaitingAcks,
            }
        } else if now < self.paused_until {
            FlowState::PausedByPfc
        } else if !q.window_open(self.p.window) {
            FlowState::WindowLimited {
                packets: q.snd_nxt - q.snd_una,
            }
        } else if rate < line {
            FlowState::RateLimited { bps: rate }
        } else {
            FlowState::Sending
        })
    }

    /// When it next needs to run (send, a timer), if ever.
    pub fn next_wake(&self) -> Option<Nanos> {
        let mut t: Option<Nanos> = None;
        let mut take = |x: Nanos| t = Some(t.map_or(x, |t| t.min(x)));
        if !self.ctrl.is_empty() {
            take(self.nic_free);
        }
        if let Some((at, _)) = self.scheduled.front() {
            take((*at).max(self.nic_free));
        }
        // The pending QPs' earliest wake is their earliest start's (each wakes at
        // `max(start, NIC free, pause end)`, as a live one with nothing outstanding would).
        if let Some(&Reverse((start, _))) = self.pending.peek() {
            take(start.max(self.nic_free).max(self.paused_until));
        }
        for &i in &self.live {
            let q = &self.senders[i].qp;
            if q.has_data() && q.window_open(self.p.window) {
                take(
                    q.start
                        .max(q.next_tx)
                        .max(self.nic_free)
                        .max(self.paused_until),
                );
            }
            if let Some(x) = q.timeout_at(q.rto_ns) {
                take(x);
            }
            if q.done.is_none() {
                if let Some(x) = q.cc.as_ref().and_then(|c| c.next_timer()) {
                    take(x);
                }
            }
        }
        // A pause held until a resume has no end to wake at.
        t.filter(|&x| x != Nanos::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_dataplane::wire::icrc;

    fn params() -> Params {
        crate::scenario::tests::params()
    }

    fn host(name: &str, ip: [u8; 4], mac: u8) -> Host {
        Host::new(
            HostSpec {
                name: name.into(),
                ip: Ipv4Addr::from(ip),
                mac: [2, 0, 0, 0, 0, mac],
                rate_bps: 100_000_000_000,
                dc: None,
            },
            [2, 0, 0, 0, 0, 0xee],
            params(),
        )
    }

    /// Two hosts back to back (by hand): data is valid RoCE (ICRC), the receiver ACKs it, and a
    /// CE mark turns into a CNP to the sender's QP, which DCQCN reacts to.
    #[test]
    fn data_ack_and_cnp_between_two_hosts() {
        let mut a = host("a", [10, 0, 0, 1], 1);
        let mut b = host("b", [10, 0, 0, 2], 2);
        a.add_sender(0, b.spec.ip, 1500, 0, false);
        b.add_receiver(0, a.spec.ip, 3000, 0, false);
        let pool = &mut FramePool::default();
        let f0 = a.transmit(0, pool).expect("first packet");
        assert_eq!(icrc::verify(&f0, 14), Ok(true));
        assert!(a.transmit(0, pool).is_none(), "the NIC is busy serializing");
        let t1 = wire_time(f0.len(), 100_000_000_000);
        let mut f1 = a.transmit(t1, pool).expect("second packet");
        // Mark the second packet CE as a switch would (the ICRC masks ECN).
        ecn::mark_ce(&mut f1, 14);
        b.receive(t1 + 1000, f0, pool);
        b.receive(t1 + 2000, f1, pool);
        let ack0 = b.transmit(t1 + 1000, pool).unwrap();
        assert_eq!(icrc::verify(&ack0, 14), Ok(true));
        let cnp = b.transmit(t1 + 3000, pool).unwrap();
        let ack1 = b.transmit(t1 + 4000, pool).unwrap();
        assert_eq!(b.stats.cnps_sent, 1);
        for f in [ack0, cnp, ack1] {
            a.receive(t1 + 5000, f, pool);
        }
        assert_eq!(a.senders[0].qp.done, Some(t1 + 5000));
        assert_eq!(a.senders[0].qp.cnps, 1);
        assert_eq!(a.stats.rx_ignored, 0);
        assert_eq!(b.stats.rx_ignored, 0);
    }

    #[test]
    fn pfc_pauses_data_not_control() {
        let mut a = host("a", [10, 0, 0, 1], 1);
        a.add_sender(0, Ipv4Addr::new(10, 0, 0, 2), 100_000, 0, false);
        let mut pfc = vec![0u8; 64];
        let n = pfc::build_pfc(
            &mut pfc,
            MacAddr([2, 0, 0, 0, 0, 0xee]),
            1 << 3,
            [0, 0, 0, 100, 0, 0, 0, 0],
        )
        .unwrap();
        let pool = &mut FramePool::default();
        pfc.truncate(n);
        a.receive(0, pfc, pool);
        assert!(a.transmit(0, pool).is_none());
        // 100 quanta * 512 bits at 100 Gb/s = 512 ns.
        assert_eq!(a.next_wake(), Some(512));
        assert!(a.transmit(512, pool).is_some());
        // Held until a resume (the HPCC simulator's): the same pause stops data past its time,
        // until a frame with time 0.
        let mut b = host("b", [10, 0, 0, 1], 1);
        b.p.pause_until_resume = true;
        b.add_sender(0, Ipv4Addr::new(10, 0, 0, 2), 100_000, 0, false);
        let frame = |t: u16| {
            let mut f = vec![0u8; 64];
            let n = pfc::build_pfc(&mut f, MacAddr([2, 0, 0, 0, 0, 0xee]), 1 << 3, {
                let mut times = [0u16; 8];
                times[3] = t;
                times
            })
            .unwrap();
            f.truncate(n);
            f
        };
        b.receive(0, frame(100), pool);
        assert!(b.transmit(10_000, pool).is_none());
        assert_eq!(b.next_wake(), None);
        b.receive(20_000, frame(0), pool);
        assert!(b.transmit(20_000, pool).is_some());
    }

    /// QPs whose start is to come wake the host at their start and are served then, in the
    /// round robin's order (by index from the last served); one created not started waits for
    /// `start_sender`.
    #[test]
    fn senders_wake_the_host_at_their_start_and_take_turns() {
        let peer = Ipv4Addr::new(10, 0, 0, 2);
        let mut a = host("a", [10, 0, 0, 1], 1);
        let pool = &mut FramePool::default();
        let late = a.add_sender(0, peer, 3000, 5_000, false);
        let early = a.add_sender(1, peer, 3000, 2_000, false);
        let idle = a.add_sender(2, peer, 3000, rnic::NOT_STARTED, false);
        assert_eq!(a.next_wake(), Some(2_000));
        assert!(a.transmit(1_000, pool).is_none());
        assert!(a.transmit(2_000, pool).is_some());
        assert_eq!(a.senders[early].qp.snd_nxt, 1);
        a.start_sender(idle, 3_000);
        let mut order = Vec::new();
        let mut t = 5_000;
        while let Some(_f) = a.transmit(t, pool) {
            let sent: Vec<u32> = a.senders.iter().map(|s| s.qp.snd_nxt).collect();
            order.push(sent);
            t += 1_000;
        }
        // From 5 us all three have data: the round robin goes on after `early` (index 1).
        assert_eq!(order[0], [0, 1, 1]);
        assert_eq!(order[1], [1, 1, 1]);
        assert_eq!(order[2], [1, 2, 1]);
        assert_eq!(a.senders[late].qp.snd_nxt, 3);
        // A QP not started does not wake its host.
        let mut b = host("b", [10, 0, 0, 3], 3);
        let idle = b.add_sender(0, peer, 3000, rnic::NOT_STARTED, false);
        assert_eq!(b.next_wake(), None);
        b.start_sender(idle, 7_000);
        assert_eq!(b.next_wake(), Some(7_000));
    }
}
