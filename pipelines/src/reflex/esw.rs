//! The Reflex external switch (ESW): the baseline's forwarding with NSF and NDT (paper 003,
//! Fig. 4: NSF at the egress toward the WAN, NDT at the egress toward the DC).
//!
//! Per packet, ingress:
//! 1. Parse, classify and look up as the baseline does.
//! 2. WAN -> DC data of NDT's class carrying a Reflex hop: NDT picks its queue (Normal = its
//!    class, or the Controlled queue), with its queue's next ticket in `meta.user`.
//! 3. DC -> WAN ACK carrying a reflected hop (not a pseudo-ACK): NDT's `RTT_dst = now - ts`
//!    refreshes the flow's state.
//! 4. The frame rewrite (TTL, MACs) and forward.
//!
//! Egress (`now` = the start of transmission):
//! - toward a WAN port, DC -> WAN data with a Reflex hop: NSF's `T_src = now - ts`, the state
//!   machine, and a pseudo-ACK when due, routed back to the sender;
//! - toward a DC port, WAN -> DC data with a Reflex hop: its timestamp becomes `now`; a packet
//!   leaving the Normal or the Controlled queue advances that queue's tickets.
//!
//! Inter-DC traffic without a Reflex hop passes as the baseline forwards it (counted in
//! `reflex.no_int`).

use super::config::ReflexConfig;
use super::ndt::{Ndt, NdtParams, NdtQueue};
use super::nsf::{Nsf, NsfParams};
use super::FlowKey;
use crate::baseline::ingress::{ingress, ingress_parsed, Ingress};
use crate::baseline::{BaselineCommand, Egress, Forwarding};
use crate::ports::PortSet;
use longhaul_control::config::Config;
use longhaul_dataplane::engine::{Action, Ctx, Pipeline, TableCounters};
use longhaul_dataplane::packet::{BufPool, Meta, PacketBuf};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::parse::{ip_pair_u128, Parsed};
use longhaul_dataplane::wire::reflex::{self, ReflexView};
use longhaul_dataplane::wire::roce::{opcode, Bth};
use longhaul_dataplane::wire::{udp, WireError};

longhaul_dataplane::counters! {
    /// The ESW pipeline's own counters (the modules have theirs).
    #[derive(Copy)]
    pub struct ReflexStats: "reflex" {
        /// Inter-DC RoCE packets without a Reflex hop seen by NSF or NDT (forwarded unchanged).
        pub no_int: u64,
        /// Frames to the INT port whose INT is malformed or not Reflex's (forwarded unchanged).
        pub bad_int: u64,
    }
}

/// Reflex at the external switch.
pub struct ReflexEsw {
    pub fwd: Forwarding,
    /// Port id -> role.
    dc: PortSet,
    wan: PortSet,
    int_port: u16,
    nsf: Option<Nsf>,
    ndt: Option<Ndt>,
    /// NDT's class (its Normal queue).
    data_class: u8,
    ack_dscp: u8,
    ack_class: u8,
    pub stats: ReflexStats,
}

impl ReflexEsw {
    pub fn new(cfg: &Config) -> Self {
        let r = cfg
            .section::<ReflexConfig>()
            .cloned()
            .unwrap_or(ReflexConfig {
                dc_ports: Vec::new(),
                wan_ports: Vec::new(),
                int_udp_port: longhaul_dataplane::wire::int::DEFAULT_INT_PORT,
                nsf: None,
                ndt: None,
            });
        let max_port = cfg.ports.iter().map(|p| p.id).max().unwrap_or(0);
        let fwd = Forwarding::new(cfg);
        let ack_dscp = r.nsf.as_ref().map_or(48, |n| n.ack_dscp);
        ReflexEsw {
            dc: PortSet::new(&r.dc_ports),
            wan: PortSet::new(&r.wan_ports),
            int_port: r.int_udp_port,
            nsf: r.nsf.as_ref().map(|n| {
                Nsf::new(NsfParams {
                    t_src_thresh_ns: n.t_src_thresh_ns,
                    t_interval_ns: n.t_interval_ns,
                    n_cool: n.n_cool,
                    flow_capacity: n.flow_capacity,
                    flow_idle_timeout_ns: n.flow_idle_timeout_ns,
                })
            }),
            ndt: r.ndt.as_ref().map(|n| {
                Ndt::new(
                    NdtParams {
                        t_dst_thresh_ns: n.t_dst_thresh_ns,
                        alpha: n.alpha,
                        t_maxpause_ns: n.t_maxpause_ns,
                        controlled_queue: n.controlled_queue,
                        normal_queue: n.data_class,
                        flow_capacity: n.flow_capacity,
                        active_timeout_ns: n.active_timeout_ns,
                    },
                    max_port,
                )
            }),
            data_class: r.ndt.as_ref().map_or(u8::MAX, |n| n.data_class),
            ack_class: fwd.class_of_dscp(ack_dscp),
            ack_dscp,
            fwd,
            stats: ReflexStats::default(),
        }
    }

    /// NSF, when enabled.
    pub fn nsf(&self) -> Option<&Nsf> {
        self.nsf.as_ref()
    }

    /// NDT, when enabled.
    pub fn ndt(&self) -> Option<&Ndt> {
        self.ndt.as_ref()
    }

    /// The Reflex hop of a UDP packet to the INT port (`None` for anything else; a malformed
    /// or foreign INT on the INT port is counted).
    #[inline(always)]
    fn reflex_view(&mut self, frame: &[u8], l3_off: usize, p_dst_port: u16) -> Option<ReflexView> {
        if p_dst_port != self.int_port {
            return None;
        }
        match reflex::locate(frame, l3_off, self.int_port) {
            Ok(v) => Some(v),
            Err(WireError::Unsupported) | Err(_) => {
                self.stats.bad_int += 1;
                None
            }
        }
    }

    /// BTH opcode at `off`.
    fn opcode_at(frame: &[u8], off: usize) -> Option<(u8, u32)> {
        let b = Bth::new_checked(frame.get(off..)?).ok()?;
        Some((b.opcode(), b.dest_qp()))
    }

    fn is_data_op(op: u8) -> bool {
        op != opcode::RC_ACKNOWLEDGE && op != opcode::CNP
    }

    /// The Reflex hop of a data packet (not an ACK, a CNP or a reflected hop) whose IP header
    /// is at `l3` and UDP destination port is `dport`. A RoCE packet (`roce`) without a hop is
    /// counted in `no_int`.
    // Inlined (as `reflex::locate` is): its answer, returned through memory, was read back
    // with a store-forwarding stall.
    #[inline(always)]
    fn data_view(&mut self, frame: &[u8], l3: usize, dport: u16, roce: bool) -> Option<ReflexView> {
        let Some(v) = self.reflex_view(frame, l3, dport) else {
            self.stats.no_int += roce as u64;
            return None;
        };
        // `locate` found the BTH's 12 bytes within the frame.
        let op = *frame.get(v.bth_off)?;
        if v.is_echo() || !Self::is_data_op(op) {
            return None;
        }
        Some(v)
    }

    /// The flow of the data packet whose IP header is at `l3` and hop `v` (from
    /// [`data_view`](Self::data_view), which checked the IP header: never `None` then).
    #[inline(always)]
    fn flow_of(frame: &[u8], l3: usize, v: &ReflexView) -> Option<FlowKey> {
        let (src, dst) = ip_pair_u128(frame, l3)?;
        Some(FlowKey {
            src,
            dst,
            qpn: v.hop.qpn,
        })
    }

    /// Whether ingress (`ndt_data`) located a Reflex data hop in this packet: it set `bth_off`
    /// to the BTH behind the hop, an offset the parser never gives (it sets `bth_off` only for
    /// UDP port 4791, right after the UDP header). Nothing between ingress and egress moves the
    /// headers (the route stage rewrites MACs and the TTL).
    #[inline]
    fn hop_located(m: &Meta) -> bool {
        m.l4_off != 0 && m.bth_off as usize == m.l4_off as usize + udp::HEADER_LEN + reflex::INT_LEN
    }

    /// The UDP destination port of the packet whose L4 header is at `l4` (0 if none).
    #[inline]
    fn dport_at(frame: &[u8], l4: usize) -> u16 {
        frame
            .get(l4 + 2..l4 + 4)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
    }

    /// Whether the ingress of the packet `pkt`, parsed as `p`, may read or change the traffic
    /// manager (NDT: a WAN -> DC data packet's queue choice reads the Controlled queue's depth,
    /// an ACK's verdict may hold or release it), so that it must wait for the admission of the
    /// packets of its burst before it ([`Pipeline::ingress_burst`]). A superset of those
    /// packets, told from the parse alone: anything to the INT port from a WAN port, and
    /// anything to it with an ACK's echo flags from a DC port.
    #[inline(always)]
    fn reads_the_tm(&self, in_port: u16, frame: &[u8], p: &Parsed) -> bool {
        if self.ndt.is_none() || p.l4_off == 0 || p.dst_port != self.int_port {
            return false;
        }
        self.wan.contains(in_port)
            || (self.dc.contains(in_port)
                && reflex::peek_flags(frame, p.l4_off as usize)
                    .is_some_and(|f| f & reflex::FLAG_ECHO != 0 && f & reflex::FLAG_NSF == 0))
    }

    fn ingress_impl<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        ingress(self, ctx, pkt)
    }

    /// WAN -> DC data: its hop located once, here (the DC port's egress rewrites the timestamp
    /// where `meta.bth_off` says, see [`hop_located`](Self::hop_located)); NDT's queue manager
    /// for the data class (`queued`).
    fn ndt_data<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        out_port: u16,
        queued: bool,
        now: Nanos,
    ) {
        let l3 = p.l3_off as usize;
        let Some(v) = self.data_view(pkt.data(), l3, p.dst_port, p.is_roce()) else {
            return;
        };
        let Some(key) = Self::flow_of(pkt.data(), l3, &v) else {
            return;
        };
        // The BTH behind the INT: also the mark that the hop was located and checked.
        pkt.meta_mut().bth_off = v.bth_off as u16;
        if !queued {
            return;
        }
        let Some(ndt) = self.ndt.as_mut() else {
            return;
        };
        let cq = ndt.params().controlled_queue;
        let m = pkt.meta_mut();
        match ndt.on_data(ctx, key, out_port, now) {
            NdtQueue::Normal(ticket) => m.user = ticket,
            NdtQueue::Controlled(ticket) => {
                m.queue = cq;
                m.user = ticket;
            }
        }
    }

    /// DC -> WAN ACK with a reflected hop: NDT's `RTT_dst`.
    // Inlined: the test that passes over data (every frame of this direction but the ACKs)
    // is a few instructions, the call around it was as many again.
    #[inline(always)]
    fn ndt_ack<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &P::Buf, p: &Parsed, now: Nanos) {
        // Only a reflected hop (an ACK's) concerns NDT here: data, by far the most packets this
        // way, is told by its flags without locating the INT (NSF locates and checks it at the
        // WAN port's egress, and counts a malformed one there).
        if p.l4_off == 0 || p.dst_port != self.int_port {
            return;
        }
        // The flags `locate` reads, from the same place: an ACK's echo, not a pseudo-ACK.
        let echo = reflex::peek_flags(pkt.data(), p.l4_off as usize)
            .is_some_and(|f| f & reflex::FLAG_ECHO != 0 && f & reflex::FLAG_NSF == 0);
        if echo {
            self.ndt_echo(ctx, pkt, p, now);
        }
    }

    /// [`ndt_ack`](Self::ndt_ack) for a frame whose flags are an ACK's echo.
    #[inline(never)]
    fn ndt_echo<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &P::Buf, p: &Parsed, now: Nanos) {
        let frame = pkt.data();
        let l3 = p.l3_off as usize;
        let Some(v) = self.reflex_view(frame, l3, p.dst_port) else {
            return; // counted by NSF at egress when it is RoCE data
        };
        let Some((op, qpn)) = Self::opcode_at(frame, v.bth_off) else {
            return;
        };
        if op != opcode::RC_ACKNOWLEDGE {
            return;
        }
        let Some((src, dst)) = ip_pair_u128(frame, l3) else {
            return;
        };
        // The ACK goes responder -> requester: its data went dst -> src.
        let key = FlowKey {
            src: dst,
            dst: src,
            qpn,
        };
        if let Some(ndt) = self.ndt.as_mut() {
            ndt.on_ack(ctx, key, now.saturating_sub(v.hop.ts), now);
        }
    }

    fn egress_impl<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        let m = pkt.meta();
        let (in_port, out_port) = (m.ingress_port, m.egress_port);
        if m.l3_off == 0 || m.l4_off == 0 {
            return Action::Forward;
        }
        if self.nsf.is_some() && self.wan.contains(out_port) && self.dc.contains(in_port) {
            self.nsf_egress(ctx, pkt);
        } else if self.dc.contains(out_port) && self.wan.contains(in_port) {
            let m = *m;
            if let Some(ndt) = self.ndt.as_mut() {
                ndt.on_egress(ctx, out_port, m.egress_queue(), m.user);
                // Located (or counted in no_int / bad_int) at ingress, by `ndt_data`.
                if Self::hop_located(&m)
                    && reflex::set_ts_at(pkt.data_mut(), m.l4_off as usize, ctx.now).is_ok()
                {
                    ndt.stats.ts_rewritten += 1;
                }
            }
        }
        Action::Forward
    }

    /// DC -> WAN data at the WAN port's egress: NSF. The common packet (IPv4 without options,
    /// the hop located at fixed offsets) and the Silent case here, inlined into the egress
    /// stage; anything else in [`nsf_egress_checked`](Self::nsf_egress_checked), a flow's state
    /// machine and its pseudo-ACK in [`nsf_flow`](Self::nsf_flow).
    #[inline(always)]
    fn nsf_egress<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &P::Buf) {
        let m = pkt.meta();
        let frame = pkt.data();
        let l3 = m.l3_off as usize;
        // What `data_view` finds when `locate` finds the hop at fixed offsets (no counter is
        // touched then); the view stays in registers.
        let Some(v) = reflex::locate_v4_fixed(frame, l3, self.int_port) else {
            return self.nsf_egress_checked(ctx, pkt);
        };
        // `locate` found the BTH's 12 bytes within the frame.
        let Some(&op) = frame.get(v.bth_off) else {
            return;
        };
        if v.is_echo() || !Self::is_data_op(op) {
            return;
        }
        self.nsf_data(ctx, pkt, &v);
    }

    /// [`nsf_egress`](Self::nsf_egress) through [`data_view`](Self::data_view): the hop's
    /// general checks, their counters.
    #[inline(never)]
    fn nsf_egress_checked<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &P::Buf) {
        let m = pkt.meta();
        let frame = pkt.data();
        let dport = Self::dport_at(frame, m.l4_off as usize);
        if let Some(v) = self.data_view(frame, m.l3_off as usize, dport, m.bth_off != 0) {
            self.nsf_data(ctx, pkt, &v);
        }
    }

    /// NSF on a data packet with hop `v`: the Silent case, or [`nsf_flow`](Self::nsf_flow).
    #[inline(always)]
    fn nsf_data<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &P::Buf, v: &ReflexView) {
        let Some(nsf) = self.nsf.as_mut() else {
            return;
        };
        // A Silent flow while none is Active or Cooling: no key, no table probe.
        if nsf.on_data_silent(v.hop.ts, ctx.now) {
            return;
        }
        self.nsf_flow(ctx, pkt, v);
    }

    /// [`nsf_egress`](Self::nsf_egress) past the Silent case: the flow's state machine, and
    /// its pseudo-ACK when one is due. Out of line: it holds the pseudo-ACK's builder, whose
    /// registers and stack the Silent case would otherwise set up for every frame.
    #[inline(never)]
    fn nsf_flow<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &P::Buf, v: &ReflexView) {
        let m = *pkt.meta();
        let frame = pkt.data();
        let l3 = m.l3_off as usize;
        let now = ctx.now;
        let Some(nsf) = self.nsf.as_mut() else {
            return;
        };
        let Some(key) = Self::flow_of(frame, l3, v) else {
            return;
        };
        if !nsf.on_data(key, v.hop.ts, now) {
            return;
        }
        // Built as if it arrived on the data's ingress port, then sent to the sender
        // (`Forwarding::route_built_udp`: routed, or back out of a wire port).
        let Some((src, dst)) = self.fwd.reply_macs(m.ingress_port, frame) else {
            return;
        };
        let Some(mut g) = ctx.pool().alloc() else {
            nsf.stats.emit_nobuf += 1;
            return;
        };
        // Written straight into the packet buffer (no scratch frame copied in).
        let v4 = match reflex::build_pseudo_ack_in(frame, l3, v, self.ack_dscp, src, dst, &mut g) {
            Ok(v4) => v4,
            Err(e) => {
                // A buffer too small for it is a buffer lost, as when the pool is empty.
                nsf.stats.emit_nobuf += (e == WireError::NoRoom) as u64;
                ctx.pool().free(g);
                return;
            }
        };
        g.meta_mut().ingress_port = m.ingress_port;
        // Routed by the frame just built, read at the builder's offsets (not parsed back): the
        // route lookup itself stays (the way back may differ from the way the data came).
        if !self.fwd.route_built_udp(ctx, &mut g, v4) {
            nsf.stats.pseudo_ack_no_route += 1;
            ctx.pool().free(g);
            return;
        }
        g.meta_mut().class = self.ack_class;
        nsf.stats.pseudo_acks += 1;
        ctx.emit(g);
    }
}

/// Reflex at the baseline's insertion points: NDT before the rewrite (WAN -> DC data, DC -> WAN
/// ACKs).
impl<P: BufPool> Ingress<P> for ReflexEsw {
    type State = ();

    #[inline(always)]
    fn fwd(&mut self) -> &mut Forwarding {
        &mut self.fwd
    }

    #[inline(always)]
    fn after_lookup(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        egress: Egress,
        _: &mut (),
    ) -> Result<Egress, Action> {
        if self.ndt.is_some() {
            let now = ctx.now;
            let m = pkt.meta();
            let (class, in_port, out_port) = (m.class, m.ingress_port, egress.port());
            if self.wan.contains(in_port) && self.dc.contains(out_port) {
                let queued = class == self.data_class;
                self.ndt_data(ctx, pkt, p, out_port, queued, now);
            } else if self.dc.contains(in_port) && self.wan.contains(out_port) {
                self.ndt_ack(ctx, pkt, p, now);
            }
        }
        Ok(egress)
    }
}

impl<P: BufPool> Pipeline<P> for ReflexEsw {
    fn on_link(&mut self, port: u16, up: bool) {
        self.fwd.set_link(port, up);
    }

    type Command = BaselineCommand;

    // NDT's packets wait for the admission of those before them (`reads_the_tm`); the rest
    // of a burst goes through ingress before any of it is enqueued.
    const BURST_INGRESS: bool = true;

    #[inline]
    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.ingress_impl(ctx, pkt)
    }

    #[inline]
    fn ingress_burst(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkts: &mut [P::Buf],
        actions: &mut [Action],
    ) -> usize {
        let n = pkts.len().min(actions.len());
        for i in 0..n {
            ctx.at_packet(i);
            let pkt = &mut pkts[i];
            let p = self.fwd.parse_meta(pkt);
            if i > 0 && self.reads_the_tm(pkt.meta().ingress_port, pkt.data(), &p) {
                return i;
            }
            actions[i] = ingress_parsed(self, ctx, pkt, &p, ());
        }
        n
    }

    #[inline]
    fn egress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.egress_impl(ctx, pkt)
    }

    fn command(&mut self, ctx: &mut Ctx<'_, P>, cmd: BaselineCommand) -> Result<(), &'static str> {
        self.fwd.command(ctx.now, cmd)
    }

    fn on_time(&mut self, ctx: &mut Ctx<'_, P>) {
        let now = ctx.now;
        if let Some(ndt) = self.ndt.as_mut() {
            ndt.on_time(ctx, now);
        }
    }

    fn next_deadline(&self) -> Option<Nanos> {
        self.ndt.as_ref().and_then(|n| n.next_deadline())
    }

    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.fwd.counters(out);
        self.stats.for_each(out);
        if let Some(n) = &self.nsf {
            n.counters(out);
        }
        if let Some(n) = &self.ndt {
            n.counters(out);
        }
    }

    fn tables(&self, out: &mut dyn FnMut(&'static str, TableCounters)) {
        self.fwd.tables(out);
        if let Some(n) = &self.nsf {
            out("reflex_nsf_flows", n.table());
        }
        if let Some(n) = &self.ndt {
            out("reflex_fst", n.table());
        }
    }
}
