//! The receiver-side DCI of MLCC (paper 001, sections 3.2.2 and 3.3.1): a per-flow queue (PFQ)
//! per inter-DC flow entering the DC, dequeued at the rate the receiver asks for; the DCI's half
//! of Algorithm 1 (C_R and R_credit read from ACKs, C_D written into data); DQM ([`super::dqm`])
//! writing the smoothed end-to-end rate into the ACKs.
//!
//! - **Data** (WAN -> DC, RoCE RC data, INT erased at ingress): held by the pipeline
//!   ([`Action::Hold`]) in its flow's PFQ. A new flow gets a free PFQ (dequeued at
//!   `initial_rate`, its DQM state reset). When every PFQ is in use the packet takes the shared
//!   queue (its class's queue, as the baseline forwards it; `mlcc.pfq.shared`). A full PFQ drops
//!   (`mlcc.pfq.queue_full`): size `queue_bytes` for the long-haul BDP. A packet that finds its
//!   PFQ empty with room in its rate, when no other PFQ's head is due (a due idle scan does not
//!   matter), goes on at once (as the dequeue at that instant would send it): from the ingress
//!   (`Action::Release`, [`Receiver::on_data`]) or, when its ingress emitted something, from
//!   [`Receiver::hold`].
//! - **Dequeue** ([`Receiver::on_time`]): round robin over the PFQs whose head conforms to its
//!   rate, while the head's DC port holds less than `port_backlog_bytes` (the PFQs feed the port's
//!   queue, they do not flood it). Each packet carries its flow's `C_D` in `meta.user` to the
//!   traffic manager; at the DC port's egress `[int]` makes the DCI the INT source with `C_D` in
//!   the DS Flags and the DCI's hop (one pass).
//! - **ACK** (DC -> WAN, an RC ACK with an MCETH): a new `C_R` is an epoch: `C_D = C_R`, the
//!   PFQ's rate = `R_credit` (clamped to [min_rate, max_rate]), DQM's epoch. Every ACK steps
//!   DQM's token bucket and carries `R_bar` back (MCETH R_DQM, ICRC recomputed).
//! - **Idle PFQs** (empty, no data or ACK for `idle_timeout_ns`) go back to the pool, scanned
//!   every `idle_timeout_ns / 4`.
//!
//! Memory is fixed at construction: `max_flows` PFQs of `queue_pkts` slots, the DQM histories.

use super::config::ReceiverConfig;
use super::dqm::{Dqm, DqmParams};
use super::FlowKey;
use longhaul_dataplane::asic::pfq::{Admission, PerFlowQueues, PfqConfig};
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::engine::{Action, Ctx};
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::mlcc::{self, MCETH_CREDIT};

/// `meta.user` of a packet leaving a PFQ: this bit set, the low 15 bits are its flow's C_D
/// (read by the DCI's egress, [`c_d_of`]).
pub const USER_C_D: u32 = 0x8000_0000;

/// The C_D a PFQ packet carries in `meta.user`, if any.
#[inline]
pub fn c_d_of(user: u32) -> Option<u16> {
    (user & USER_C_D != 0).then_some((user as u16) & mlcc::CREDIT_MASK)
}

longhaul_dataplane::counters! {
    /// Counters of the receiver-side role's per-flow queues.
    #[derive(Copy)]
    pub struct ReceiverStats: "mlcc.pfq" {
        /// Data packets queued in a PFQ.
        pub enqueued: u64,
        /// Data packets sent on from a PFQ.
        pub dequeued: u64,
        /// Data packets of flows that found every PFQ in use (sent through the shared queue).
        pub shared: u64,
        /// Data packets dropped because their PFQ was full.
        pub queue_full: u64,
        /// Times the PFQs waited for a backlogged DC port.
        pub backlogged: u64,
        /// Idle PFQs reclaimed.
        pub reclaimed: u64,
    }
}

longhaul_dataplane::counters! {
    /// The per-flow queues' occupancy, read when the counters are.
    #[derive(Copy)]
    pub struct PfqGauges: "mlcc.pfq" {
        /// PFQs in use.
        pub in_use: u64,
        /// Most PFQs ever in use at once.
        pub max_in_use: u64 => max,
        /// Bytes the PFQs hold.
        pub held_bytes: u64,
    }
}

longhaul_dataplane::counters! {
    /// Counters of the receiver-side role's credit feedback.
    #[derive(Copy)]
    pub struct CreditStats: "mlcc.credit" {
        /// ACKs with credit fields for a flow with a PFQ.
        pub acks: u64,
        /// ACKs with credit fields for a flow without a PFQ.
        pub acks_no_flow: u64,
        /// Epochs (new C_R).
        pub epochs: u64,
    }
}

struct FlowState {
    dqm: Dqm,
    last_seen: Nanos,
}

/// The receiver-side role for buffers of type `B`.
pub struct Receiver<B: PacketBuf> {
    cfg: ReceiverConfig,
    params: DqmParams,
    pfq: PerFlowQueues<B, FlowKey>,
    flows: Vec<FlowState>,
    /// Port id -> bytes queued toward it (filled per [`Receiver::on_time`]).
    port_depth: Vec<u64>,
    dc_ports: Vec<u16>,
    /// One largest frame at the slowest DC port: how long to wait for a backlogged port.
    retry_ns: Nanos,
    deadline: Option<Nanos>,
    next_scan: Nanos,
    /// The flow (and its slot, when it has one) of the packet `on_data` answered `Hold` for
    /// (the engine hands it over next).
    /// The third field: whether [`Receiver::hold`] is still to try the pass-through (`false`
    /// when `on_data` tried it already).
    pending: Option<(FlowKey, Option<usize>, bool)>,
    /// Whether [`Receiver::on_data`] may send a packet on at once (`Release`); `false` only in
    /// tests, which compare it with the hold's pass-through ([`Receiver::pass_through`]).
    release_at_ingress: bool,
    pub stats: ReceiverStats,
    pub credit: CreditStats,
}

/// What the receiver-side role needs to know of the switch's DC ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DcPorts {
    pub ids: Vec<u16>,
    /// The largest port id of the switch.
    pub max_port: u16,
    /// The largest DC port MTU (the PFQ shapers' burst).
    pub mtu: u32,
    /// The slowest and fastest DC port rates (the backlog retry; DQM's default ceiling).
    pub min_rate_bps: u64,
    pub max_rate_bps: u64,
}

impl<B: PacketBuf> Receiver<B> {
    pub fn new(cfg: &ReceiverConfig, ports: &DcPorts) -> Self {
        let (port_mtu, min_port_rate_bps, max_port_rate_bps) =
            (ports.mtu, ports.min_rate_bps, ports.max_rate_bps);
        let params = DqmParams {
            theta_ns: cfg.theta_ns,
            d_t_ns: cfg.d_t_ns,
            m: cfg.m,
            alpha: cfg.alpha,
            rtt_c_ns: cfg.rtt_c_ns,
            rtt_d_ns: cfg.rtt_d_ns,
            mtu_bytes: cfg.mtu_bytes,
            history: cfg.history,
            min_rate_bps: cfg.min_rate_bps as f64,
            max_rate_bps: cfg.max_rate_bps.unwrap_or(max_port_rate_bps) as f64,
        };
        let pfq = PerFlowQueues::new(PfqConfig {
            max_flows: cfg.max_flows,
            queue_pkts: cfg.queue_pkts,
            queue_bytes: cfg.queue_bytes,
            default_rate_bps: cfg.initial_rate_bps,
            burst_bytes: port_mtu as u64,
            release_on_empty: false,
        });
        let flows = (0..cfg.max_flows)
            .map(|_| FlowState {
                dqm: Dqm::new(&params),
                last_seen: 0,
            })
            .collect();
        let retry_ns = (port_mtu as u64 * 8 * 1_000_000_000)
            .div_ceil(min_port_rate_bps.max(1))
            .max(1);
        Receiver {
            cfg: cfg.clone(),
            params,
            pfq,
            flows,
            port_depth: vec![0; ports.max_port as usize + 1],
            dc_ports: ports.ids.clone(),
            retry_ns,
            deadline: None,
            next_scan: 0,
            pending: None,
            release_at_ingress: true,
            stats: ReceiverStats::default(),
            credit: CreditStats::default(),
        }
    }

    /// Tests only: `false` sends every packet [`Receiver::on_data`] admits through the engine's
    /// hold ([`Receiver::hold`]), the general path its `Release` stands beside.
    #[doc(hidden)]
    pub fn set_release_at_ingress(&mut self, on: bool) {
        self.release_at_ingress = on;
    }

    /// DQM's parameters.
    pub fn params(&self) -> &DqmParams {
        &self.params
    }

    /// The PFQs.
    pub fn pfq(&self) -> &PerFlowQueues<B, FlowKey> {
        &self.pfq
    }

    /// The DQM state of `key`'s flow, if it has a PFQ.
    pub fn dqm(&self, key: &FlowKey) -> Option<&Dqm> {
        let i = self.pfq.slot_of(key)?;
        self.flows.get(i).map(|f| &f.dqm)
    }

    /// When [`Receiver::on_time`] has work.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.deadline
    }

    fn refresh_deadline(&mut self, now: Nanos) {
        let ready = self.pfq.next_ready(now);
        let scan = (self.pfq.in_use() > 0).then_some(self.next_scan.max(now));
        self.deadline = longhaul_dataplane::time::earlier(ready, scan);
    }

    /// WAN -> DC RoCE data of flow `key` routed to a DC port (`meta.egress_port`, class set,
    /// INT erased), `len` bytes: `Hold` when its PFQ takes it (then [`Receiver::hold`]),
    /// `Forward` through the shared queue when every PFQ is in use, `Drop` when its PFQ is full.
    ///
    /// When the packet would pass its PFQ at once ([`Receiver::pass_through`]) and its ingress
    /// emitted nothing (`emitted`: [`Ctx::emit_room`] fell since the ingress began), it goes on
    /// from here, `Release`: what [`Receiver::hold`] would do with it, without the round trip
    /// through the engine's hold and emit list (the same admission, right after the packet's
    /// ingress; with something emitted, the hold keeps the order: that first, then the packet).
    /// Always inlined into the DCI's ingress (see `MlccDci::ingress_impl`).
    #[inline(always)]
    pub fn on_data<P: BufPool<Buf = B>>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        key: FlowKey,
        pkt: &mut B,
        emitted: bool,
    ) -> Action {
        match self.pfq.admits(&key, pkt.len()) {
            Admission::Yes(Some(i)) if !emitted && self.release_at_ingress => {
                if self.cut_through(ctx, i, pkt) {
                    Action::Release
                } else {
                    self.pending = Some((key, Some(i), false));
                    Action::Hold
                }
            }
            Admission::Yes(slot) => {
                self.pending = Some((key, slot, true));
                Action::Hold
            }
            Admission::QueueFull => {
                self.stats.queue_full += 1;
                Action::Drop(DropReason::QueueFull)
            }
            Admission::NoQueue => {
                self.stats.shared += 1;
                Action::Forward
            }
        }
    }

    /// The packet [`Receiver::on_data`] said `Hold` for: into its flow's PFQ, or straight on
    /// when it would be the next packet [`Receiver::on_time`] sends at this instant (see
    /// [`Receiver::pass_through`]).
    pub fn hold<P: BufPool<Buf = B>>(&mut self, ctx: &mut Ctx<'_, P>, pkt: B) -> Result<(), B> {
        let now = ctx.now;
        let Some((key, slot, try_pass)) = self.pending.take() else {
            return Err(pkt);
        };
        let pkt = match slot {
            Some(i) if try_pass => match self.pass_through(ctx, i, pkt) {
                Ok(()) => return Ok(()),
                Err(p) => p,
            },
            _ => pkt,
        };
        match self.pfq.enqueue_admitted(key, slot, pkt, now) {
            Ok((slot, new)) => {
                if let Some(f) = self.flows.get_mut(slot) {
                    if new {
                        f.dqm.reset(&self.params);
                    }
                    f.last_seen = now;
                }
                self.stats.enqueued += 1;
                if new && self.pfq.in_use() == 1 {
                    self.next_scan = now + self.cfg.idle_timeout_ns / 4;
                }
                // Only this queue changed: its head's time joins the deadline.
                if let Some(t) = self.pfq.slot_next_ready(slot, now) {
                    self.deadline = Some(self.deadline.map_or(t, |d| d.min(t)));
                }
                if new {
                    let scan = self.next_scan.max(now);
                    self.deadline = Some(self.deadline.map_or(scan, |d| d.min(scan)));
                }
                Ok(())
            }
            // Unreachable after `admits`; the engine counts it.
            Err((p, _)) => Err(p),
        }
    }

    /// A packet of slot `i`'s flow that arrives at its empty PFQ when the PFQ's rate has room
    /// for it, no other PFQ's head is due and its DC port is not backlogged:
    /// [`Receiver::on_time`] would send it at this same instant, first, so it goes on now,
    /// whether or not the idle scan is due (the scan, at this instant, finds the packet's flow
    /// just seen either way), with the same accounting (the shaper charged,
    /// `enqueued` and `dequeued`, C_D in `meta.user`, DQM's data clock) and through the same
    /// door ([`Ctx::inject`], enqueued right after the packet being processed). Only the order
    /// within one instant differs: it is queued at the port before the frames that arrive after
    /// it in the same burst, as a shaper with tokens would send it, where the PFQ held it until
    /// the end of the burst. `Err`: hold it.
    fn pass_through<P: BufPool<Buf = B>>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        i: usize,
        mut pkt: B,
    ) -> Result<(), B> {
        if !self.cut_through(ctx, i, &mut pkt) {
            return Err(pkt);
        }
        ctx.inject(pkt);
        Ok(())
    }

    /// [`Receiver::pass_through`]'s test and accounting (`true`: the packet goes on now, C_D in
    /// `meta.user`; the caller sends it); `false`: nothing changed.
    #[inline(always)]
    fn cut_through<P: BufPool<Buf = B>>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        i: usize,
        pkt: &mut B,
    ) -> bool {
        let now = ctx.now;
        // Not `self.deadline`: what it holds beyond a due head (which `PerFlowQueues::
        // pass_through` tests) is the idle scan, which cannot reclaim this packet's PFQ once
        // the packet is on its way (its flow was seen now) and frees no slot it needs. A due
        // scan would hold every packet of a live burst until the burst's end.
        if ctx.emit_room() == 0 {
            return false;
        }
        let port = pkt.meta().egress_port;
        if ctx.port_queued_bytes(port) >= self.cfg.port_backlog_bytes {
            return false;
        }
        if !self.pfq.pass_through(i, pkt.len() as u64, now) {
            return false;
        }
        let Some(f) = self.flows.get_mut(i) else {
            return false; // unreachable: a flow state per slot
        };
        f.last_seen = now;
        pkt.meta_mut().user = f.dqm.c_d().map_or(0, |c| USER_C_D | c as u32);
        f.dqm.on_data(now);
        self.stats.enqueued += 1;
        self.stats.dequeued += 1;
        true
    }

    /// DC -> WAN RC ACK (IP header at `l3`): the credit loop and DQM as the module doc says.
    pub fn on_ack(&mut self, frame: &mut [u8], l3: usize, now: Nanos) {
        let Ok((off, m)) = mlcc::locate_mceth(frame, l3) else {
            return;
        };
        if m.flags & MCETH_CREDIT == 0 {
            return;
        }
        let Some((src, dst)) = longhaul_dataplane::wire::parse::ip_pair_u128(frame, l3) else {
            return;
        };
        // The ACK goes receiver -> sender: its data went dst -> src.
        let key = FlowKey {
            src: dst,
            dst: src,
            qpn: m.qpn,
        };
        let Some(slot) = self.pfq.slot_of(&key) else {
            self.credit.acks_no_flow += 1;
            return;
        };
        let q_c = self.pfq.slot_depth(slot).1;
        let Some(f) = self.flows.get_mut(slot) else {
            return;
        };
        f.last_seen = now;
        let epoch = f.dqm.is_epoch(m.c_r);
        let step = f.dqm.on_ack(
            &self.params,
            now,
            m.c_r,
            m.r_credit_kbps as f64 * 1000.0,
            q_c,
        );
        self.credit.acks += 1;
        if epoch {
            self.credit.epochs += 1;
            let rate = (m.r_credit_kbps as u64 * 1000)
                .max(self.cfg.min_rate_bps)
                .min(self.params.max_rate_bps as u64);
            self.pfq.set_slot_rate(slot, rate, now);
            self.refresh_deadline(now);
        }
        if self.cfg.dqm {
            let _ = mlcc::set_r_dqm(frame, l3, off, mlcc::kbps(step.r_bar_bps as u64));
        }
    }

    /// Dequeue what may go now (as many as the engine's emit list takes), C_D into `meta.user`,
    /// and reclaim idle PFQs.
    pub fn on_time<P: BufPool<Buf = B>>(&mut self, ctx: &mut Ctx<'_, P>) {
        let now = ctx.now;
        for &p in &self.dc_ports {
            let d = ctx.port_queued_bytes(p);
            if let Some(x) = self.port_depth.get_mut(p as usize) {
                *x = d;
            }
        }
        let limit = self.cfg.port_backlog_bytes;
        let all_full = |depth: &[u64], ids: &[u16]| {
            ids.iter()
                .all(|&p| depth.get(p as usize).is_none_or(|d| *d >= limit))
        };
        let mut blocked = false;
        while ctx.emit_room() > 0 {
            if all_full(&self.port_depth, &self.dc_ports) {
                // Every DC port is backlogged: no head can go (and asking the calendar would
                // only set them aside and back).
                blocked = self.pfq.held_pkts() > 0;
                break;
            }
            let depth = &self.port_depth;
            let got = self.pfq.dequeue_where(now, |b| {
                let ok = depth
                    .get(b.meta().egress_port as usize)
                    .is_some_and(|d| *d < limit);
                blocked |= !ok;
                ok
            });
            let Some((slot, mut pkt)) = got else {
                break;
            };
            let port = pkt.meta().egress_port as usize;
            if let Some(d) = self.port_depth.get_mut(port) {
                *d += pkt.len() as u64;
            }
            // C_D rides in the packet's metadata to the DC port's egress, where the INT stage
            // makes the DCI the INT source with it (and pushes the DCI's hop: one pass).
            let c_d = self.flows.get(slot).and_then(|f| f.dqm.c_d());
            pkt.meta_mut().user = c_d.map_or(0, |c| USER_C_D | c as u32);
            if let Some(f) = self.flows.get_mut(slot) {
                f.dqm.on_data(now);
            }
            self.stats.dequeued += 1;
            ctx.inject(pkt);
        }
        if blocked {
            self.stats.backlogged += 1;
        }
        if now >= self.next_scan && self.pfq.in_use() > 0 {
            for i in 0..self.pfq.slots() {
                let idle = self
                    .flows
                    .get(i)
                    .is_some_and(|f| now.saturating_sub(f.last_seen) >= self.cfg.idle_timeout_ns);
                if idle && self.pfq.release_if_empty(i) {
                    self.stats.reclaimed += 1;
                }
            }
            self.next_scan = now + (self.cfg.idle_timeout_ns / 4).max(1);
        }
        self.refresh_deadline(now);
        if blocked {
            // A head waits for its port: come back after about one frame time, not at once.
            let retry = now + self.retry_ns;
            self.deadline = self.deadline.map(|d| d.max(retry));
        }
    }

    /// Counters by name.
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
        PfqGauges {
            in_use: self.pfq.in_use() as u64,
            max_in_use: self.pfq.stats().max_in_use,
            held_bytes: self.pfq.held_bytes(),
        }
        .for_each(out);
        self.credit.for_each(out);
    }
}
