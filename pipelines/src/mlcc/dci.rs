//! The MLCC DCI switch: the baseline's forwarding with both DCI roles (paper 001, Fig. 5).
//!
//! Ingress, per packet:
//! 1. Parse, classify and look up as the baseline does.
//! 2. DC -> WAN (sender-side role):
//!    - data carrying the MLCC INT: a Switch-INT to the sender when due ([`Feedback`]), then the
//!      INT stripped (always, also with `[mlcc.feedback]` disabled: INT never crosses the WAN);
//!    - an RC ACK with an MCETH: the receiver-side role's credit loop and DQM ([`Receiver`]).
//! 3. The frame rewrite (TTL, MACs).
//! 4. WAN -> DC (receiver-side role): INT erased if present; RoCE RC data into its flow's PFQ.
//!
//! Egress: the baseline's `[int]` stage on the DC ports (required with the receiver-side role):
//! the DCI is the INT source of its DC, its own hop the first, with `C_D` in the DS Flags for a
//! packet that left a PFQ (carried in `meta.user`, `receiver::USER_C_D`); data that took the
//! shared queue gets INT without `C_D`.
//!
//! Inter-DC RoCE data without INT leaving the DC is counted in `mlcc.no_int` and forwarded.

use super::config::MlccConfig;
use super::feedback::Feedback;
use super::receiver::{c_d_of, DcPorts, Receiver};
use super::FlowKey;
use crate::baseline::ingress::{ingress, Ingress};
use crate::baseline::int::{is_rc_data, IntStage};
use crate::baseline::{BaselineCommand, Egress, Forwarding};
use crate::ports::PortSet;
use longhaul_control::config::Config;
use longhaul_dataplane::engine::{Action, Ctx, Pipeline, TableCounters};
use longhaul_dataplane::packet::{BufPool, HeapBuf, PacketBuf};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::int::strip_int;
use longhaul_dataplane::wire::mlcc;
use longhaul_dataplane::wire::parse::{ip_pair_u128, Parsed};
use longhaul_dataplane::wire::roce::{opcode, Bth, ROCE_V2_PORT};

longhaul_dataplane::counters! {
    /// The DCI's own counters (the roles have theirs).
    #[derive(Copy)]
    pub struct DciStats: "mlcc" {
        /// DC -> WAN RoCE data without INT (forwarded unchanged).
        pub no_int: u64,
        /// Frames to the INT port whose INT is malformed or not MLCC's (forwarded unchanged).
        pub bad_int: u64,
        /// INT stripped from DC -> WAN data.
        pub int_stripped: u64,
        /// INT erased from WAN -> DC data.
        pub int_erased: u64,
    }
}

/// The receiver-side role for each buffer type the build has: a pipeline is built before it
/// knows its buffer pool, so each platform has its own PFQs (only the one in use fills).
pub struct Receivers {
    heap: Option<Receiver<HeapBuf>>,
    #[cfg(feature = "dpdk")]
    mbuf: Option<Receiver<longhaul_dataplane::dpdk::Mbuf>>,
}

/// The receiver-side role for buffers of type `B`.
pub trait ReceiverFor<B: PacketBuf> {
    fn get(&mut self) -> Option<&mut Receiver<B>>;
}

impl ReceiverFor<HeapBuf> for Receivers {
    fn get(&mut self) -> Option<&mut Receiver<HeapBuf>> {
        self.heap.as_mut()
    }
}

#[cfg(feature = "dpdk")]
impl ReceiverFor<longhaul_dataplane::dpdk::Mbuf> for Receivers {
    fn get(&mut self) -> Option<&mut Receiver<longhaul_dataplane::dpdk::Mbuf>> {
        self.mbuf.as_mut()
    }
}

impl Receivers {
    fn held(&self) -> (u64, u64) {
        let mut p = 0;
        let mut b = 0;
        if let Some(r) = &self.heap {
            p += r.pfq().held_pkts();
            b += r.pfq().held_bytes();
        }
        #[cfg(feature = "dpdk")]
        if let Some(r) = &self.mbuf {
            p += r.pfq().held_pkts();
            b += r.pfq().held_bytes();
        }
        (p, b)
    }

    fn deadline(&self) -> Option<Nanos> {
        let a = self.heap.as_ref().and_then(|r| r.next_deadline());
        #[cfg(feature = "dpdk")]
        let a = match (a, self.mbuf.as_ref().and_then(|r| r.next_deadline())) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        a
    }

    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        if let Some(r) = &self.heap {
            r.counters(out);
        }
        #[cfg(feature = "dpdk")]
        if let Some(r) = &self.mbuf {
            r.counters(out);
        }
    }
}

/// MLCC at the DCI switch.
pub struct MlccDci {
    pub fwd: Forwarding,
    pub int: Option<IntStage>,
    dc: PortSet,
    wan: PortSet,
    int_port: u16,
    pub feedback: Option<Feedback>,
    pub receivers: Receivers,
    pub stats: DciStats,
}

impl MlccDci {
    pub fn new(cfg: &Config) -> Self {
        let m = cfg.section::<MlccConfig>().cloned().unwrap_or(MlccConfig {
            dc_ports: Vec::new(),
            wan_ports: Vec::new(),
            int_udp_port: longhaul_dataplane::wire::int::DEFAULT_INT_PORT,
            feedback: None,
            receiver: None,
        });
        let fwd = Forwarding::new(cfg);
        let int = IntStage::from_config(cfg);
        let dc_info: Vec<_> = cfg
            .ports
            .iter()
            .filter(|p| m.dc_ports.contains(&p.id))
            .collect();
        let ports = DcPorts {
            ids: m.dc_ports.clone(),
            max_port: cfg.ports.iter().map(|p| p.id).max().unwrap_or(0),
            mtu: dc_info.iter().map(|p| p.mtu as u32).max().unwrap_or(1500),
            min_rate_bps: dc_info.iter().map(|p| p.rate_bps).min().unwrap_or(1),
            max_rate_bps: dc_info.iter().map(|p| p.rate_bps).max().unwrap_or(1),
        };
        let dpdk = longhaul_runtime::platform::uses_dpdk(cfg);
        let build = |on: bool| m.receiver.as_ref().filter(|_| on);
        let receivers = Receivers {
            heap: build(!dpdk).map(|r| Receiver::new(r, &ports)),
            #[cfg(feature = "dpdk")]
            mbuf: build(dpdk).map(|r| Receiver::new(r, &ports)),
        };
        MlccDci {
            feedback: m.feedback.as_ref().map(|f| Feedback::new(f, &fwd)),
            fwd,
            int,
            dc: PortSet::new(&m.dc_ports),
            wan: PortSet::new(&m.wan_ports),
            int_port: m.int_udp_port,
            receivers,
            stats: DciStats::default(),
        }
    }

    /// The receiver-side role of the heap platform (replay, emulator, tests).
    pub fn receiver(&self) -> Option<&Receiver<HeapBuf>> {
        self.receivers.heap.as_ref()
    }

    /// [`MlccDci::receiver`], mutable (tests).
    #[doc(hidden)]
    pub fn receiver_mut(&mut self) -> Option<&mut Receiver<HeapBuf>> {
        self.receivers.heap.as_mut()
    }

    /// The DCI's ingress: the skeleton with its stages ([`Ingress`]). Always inlined, with
    /// [`Pipeline::ingress`] and the receiver's [`Receiver::on_data`], into the engine's
    /// one-packet-at-a-time loop (`receive_burst`): out of line it is a call per frame with six
    /// registers saved and restored, and with the ingress alone inlined `on_data` goes out of
    /// line (about 34 instructions a frame in perf/dpdk-mlcc.toml).
    #[inline(always)]
    fn ingress_impl<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action
    where
        Receivers: ReceiverFor<P::Buf>,
    {
        ingress(self, ctx, pkt)
    }

    /// The flow of RoCE RC data (UDP port 4791, BTH at `bth`), if it is that.
    fn data_key(frame: &[u8], l3: usize, bth: usize) -> Option<FlowKey> {
        if bth < 8 || frame.get(bth - 6..bth - 4) != Some(&ROCE_V2_PORT.to_be_bytes()[..]) {
            return None;
        }
        let b = Bth::new_checked(frame.get(bth..)?).ok()?;
        if !is_rc_data(b.opcode()) {
            return None;
        }
        let (src, dst) = ip_pair_u128(frame, l3)?;
        Some(FlowKey {
            src,
            dst,
            qpn: b.dest_qp(),
        })
    }
}

/// MLCC's DCI at the baseline's insertion points: before the rewrite, INT located on the WAN
/// links (Switch-INT feedback toward the WAN, stripped or erased) and ACKs to the receiver; after
/// it, WAN -> DC data into the receiver's per-flow queues.
impl<P: BufPool> Ingress<P> for MlccDci
where
    Receivers: ReceiverFor<P::Buf>,
{
    /// The emit list's room before the packet: the receiver's cut-through at ingress keeps the
    /// emission order only when the packet's ingress emitted nothing (a neighbour probe, a
    /// Switch-INT).
    type State = usize;

    /// WAN -> DC frames may come to the DC port's MAC: its test inline (a call cost about 50
    /// instructions a frame in perf/dpdk-mlcc.toml).
    const PORT_MAC_ENDS: bool = true;

    #[inline(always)]
    fn fwd(&mut self) -> &mut Forwarding {
        &mut self.fwd
    }

    #[inline(always)]
    fn before_parse(&mut self, ctx: &mut Ctx<'_, P>, _: &mut P::Buf) -> Result<usize, Action> {
        Ok(ctx.emit_room())
    }

    #[inline(always)]
    fn after_lookup(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        egress: Egress,
        _: &mut usize,
    ) -> Result<Egress, Action> {
        let in_port = pkt.meta().ingress_port;
        let out_port = egress.port();
        let l3 = p.l3_off as usize;
        let to_wan = self.dc.contains(in_port) && self.wan.contains(out_port);
        let to_dc = self.wan.contains(in_port) && self.dc.contains(out_port);
        if (to_wan || to_dc) && p.l4_off != 0 && p.dst_port == self.int_port {
            match mlcc::locate(pkt.data(), l3, self.int_port) {
                Ok(mi) => {
                    if to_wan {
                        if let Some(fb) = self.feedback.as_mut() {
                            fb.on_data(ctx, &mut self.fwd, pkt.data(), l3, &mi, in_port);
                        }
                    }
                    if strip_int(pkt, l3).is_ok() {
                        if to_wan {
                            self.stats.int_stripped += 1;
                        } else {
                            self.stats.int_erased += 1;
                        }
                        pkt.meta_mut().bth_off = p.l4_off + 8;
                    }
                }
                Err(_) => self.stats.bad_int += 1,
            }
        } else if to_wan && p.is_roce() {
            let op = pkt.data().get(p.bth_off as usize).copied().unwrap_or(0xff);
            if op == opcode::RC_ACKNOWLEDGE {
                if let Some(rx) = ReceiverFor::<P::Buf>::get(&mut self.receivers) {
                    rx.on_ack(pkt.data_mut(), l3, ctx.now);
                }
            } else if is_rc_data(op) {
                self.stats.no_int += 1;
            }
        }
        Ok(egress)
    }

    #[inline(always)]
    fn after_rewrite(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        egress: Egress,
        room: usize,
    ) -> Action {
        let to_dc = self.wan.contains(pkt.meta().ingress_port) && self.dc.contains(egress.port());
        if to_dc {
            if let Some(rx) = ReceiverFor::<P::Buf>::get(&mut self.receivers) {
                let l3 = p.l3_off as usize;
                if let Some(key) = Self::data_key(pkt.data(), l3, pkt.meta().bth_off as usize) {
                    let emitted = ctx.emit_room() != room;
                    return rx.on_data(ctx, key, pkt, emitted);
                }
            }
        }
        Action::Forward
    }
}

impl<P: BufPool> Pipeline<P> for MlccDci
where
    Receivers: ReceiverFor<P::Buf>,
{
    fn on_link(&mut self, port: u16, up: bool) {
        self.fwd.set_link(port, up);
    }

    type Command = BaselineCommand;

    #[inline(always)]
    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.ingress_impl(ctx, pkt)
    }

    #[inline]
    fn egress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        if let Some(i) = self.int.as_mut() {
            i.egress_with(ctx, pkt, c_d_of(pkt.meta().user));
        }
        Action::Forward
    }

    fn command(&mut self, ctx: &mut Ctx<'_, P>, cmd: BaselineCommand) -> Result<(), &'static str> {
        self.fwd.command(ctx.now, cmd)
    }

    fn hold(&mut self, ctx: &mut Ctx<'_, P>, pkt: P::Buf) -> Result<(), P::Buf> {
        match ReceiverFor::<P::Buf>::get(&mut self.receivers) {
            Some(rx) => rx.hold(ctx, pkt),
            None => Err(pkt),
        }
    }

    fn on_time(&mut self, ctx: &mut Ctx<'_, P>) {
        if let Some(rx) = ReceiverFor::<P::Buf>::get(&mut self.receivers) {
            rx.on_time(ctx);
        }
    }

    fn next_deadline(&self) -> Option<Nanos> {
        self.receivers.deadline()
    }

    fn held_packets(&self) -> u64 {
        self.receivers.held().0
    }

    fn held_bytes(&self) -> u64 {
        self.receivers.held().1
    }

    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.fwd.counters(out);
        if let Some(i) = &self.int {
            i.counters(out);
        }
        self.stats.for_each(out);
        if let Some(f) = &self.feedback {
            f.counters(out);
        }
        self.receivers.counters(out);
    }

    fn tables(&self, out: &mut dyn FnMut(&'static str, TableCounters)) {
        self.fwd.tables(out);
    }
}
