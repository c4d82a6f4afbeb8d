//! The run-to-completion switch: ingress pipeline, packet replication (recirculation), traffic
//! manager per egress port, egress stage, and the port-level MAC behaviour (PFC/PAUSE honoring and
//! generation).
//!
//! One [`Switch`] is what one worker lcore owns. It never reads a clock: every call takes `now`,
//! so the same engine runs on the TSC (live) and on virtual time (replay, tests). The caller
//! drives it in this order, repeatedly:
//!
//! 1. [`Switch::receive_burst`] for each port with received packets,
//! 2. [`Switch::poll`] (recirculation returns, PFC refreshes, pipeline timers),
//! 3. [`Switch::transmit`] for each port, which hands over every packet whose transmission starts
//!    at or before `now`,
//!
//! and asks [`Switch::next_event`] when something will next happen without new input (the
//! virtual-time driver in [`crate::replay`] jumps straight there).
//!
//! Nothing here allocates after [`Switch::new`]: packets come from the pool, the generated-packet
//! list and the PFC action buffer are preallocated, and the queues are bounded.

use crate::asic::pfc::{ActionBuf, Admit, PfcAction, PfcGenerator, PfcParams};
use crate::asic::recirc::{RecircConfig, RecircPort};
use crate::counters::{DropCounters, DropReason};
use crate::packet::{
    BufPool, PacketBuf, FLAG_CONTROL, FLAG_GENERATED, FLAG_PFC_ACCOUNTED, NUM_CLASSES, PORT_NONE,
};
use crate::time::Nanos;
use crate::tm::{TmConfig, TrafficManager};
use crate::wire::pfc as wpfc;

/// What the ingress (or egress) pipeline decided for a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Enqueue it on `meta.egress_port`, class `meta.class`.
    Forward,
    /// Drop it and count the reason.
    Drop(DropReason),
    /// Send it round the recirculation port; it comes back to ingress with `loop_count + 1`.
    Recirculate,
    /// The pipeline used it up (a control message, a punted packet): free it, count nothing.
    Consume,
}

/// A pipeline: the programmable stages of the switch (PSA ingress and egress controls).
pub trait Pipeline<P: BufPool> {
    /// Ingress stages for one packet. On `Forward`, `meta.egress_port` and `meta.class` say where
    /// it goes. Generated packets (CNPs, NACKs, ...) are handed to [`Ctx::emit`].
    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action;

    /// Egress stages for one packet leaving `meta.egress_port` (after the traffic manager).
    /// `Forward` sends it; `Drop` drops it; other actions are treated as `Drop(Pipeline)`.
    #[inline]
    fn egress(&mut self, _ctx: &mut Ctx<'_, P>, _pkt: &mut P::Buf) -> Action {
        Action::Forward
    }

    /// Called from [`Switch::poll`] when `now` has reached [`Pipeline::next_deadline`].
    fn on_time(&mut self, _ctx: &mut Ctx<'_, P>) {}

    /// The next time the pipeline needs [`Pipeline::on_time`] (timers), if any.
    fn next_deadline(&self) -> Option<Nanos> {
        None
    }
}

/// What a stage sees of the switch: the clock, the buffer pool, the ports, and a way to emit
/// packets it generates.
pub struct Ctx<'a, P: BufPool> {
    /// The engine's clock (TSC or virtual), ns.
    pub now: Nanos,
    /// Where generated packets come from.
    pub pool: &'a mut P,
    ports: &'a [PortInfo],
    port_index: &'a [u16],
    emitted: &'a mut Vec<P::Buf>,
    emit_drops: &'a mut u64,
}

impl<'a, P: BufPool> Ctx<'a, P> {
    /// Hand a generated packet to the traffic manager (after the current packet's own processing).
    /// `meta.egress_port` and `meta.class` must be set. When the per-burst list is full the packet
    /// is freed and counted (`emit_drops`).
    pub fn emit(&mut self, mut pkt: P::Buf) {
        pkt.meta_mut().flags |= FLAG_GENERATED;
        if self.emitted.len() < self.emitted.capacity() {
            self.emitted.push(pkt);
        } else {
            *self.emit_drops += 1;
            self.pool.free(pkt);
        }
    }

    /// Static facts about port `id`, if it exists.
    #[inline]
    pub fn port(&self, id: u16) -> Option<&PortInfo> {
        let idx = *self.port_index.get(id as usize)?;
        self.ports.get(idx as usize)
    }
}

/// Static facts about a port, visible to stages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub id: u16,
    pub name: String,
    pub mac: [u8; 6],
    pub rate_bps: u64,
    pub mtu: u16,
}

/// How to build one port of a [`Switch`].
#[derive(Clone, Debug)]
pub struct PortSpec {
    pub info: PortInfo,
    pub tm: TmConfig,
}

/// How to build a [`Switch`].
#[derive(Clone, Debug)]
pub struct SwitchSpec {
    pub ports: Vec<PortSpec>,
    /// PFC generation on ingress (lossless classes), if enabled.
    pub pfc: Option<PfcParams>,
    /// Shared buffer over all egress queues, bytes (control frames excluded).
    pub shared_buffer_bytes: u64,
    /// The recirculation port, if the pipeline uses one.
    pub recirc: Option<RecircConfig>,
    /// Most packets a stage may emit while one burst is processed.
    pub emit_capacity: usize,
}

/// Per-port counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    /// PFC frames received (honored) per priority; 802.3x PAUSE counts in every priority.
    pub pfc_rx: [u64; NUM_CLASSES],
    /// PFC frames sent on this port (XOFF, refresh and XON).
    pub pfc_tx: u64,
    /// MAC control frames with an opcode we do not handle (consumed).
    pub mac_control_other: u64,
}

struct PortState<B: PacketBuf> {
    info: PortInfo,
    tm: TrafficManager<B>,
    stats: PortStats,
}

/// Switch-wide counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchStats {
    pub drops: DropCounters,
    /// Generated packets lost because the emit list was full.
    pub emit_drops: u64,
    /// Packets generated by stages and enqueued.
    pub generated: u64,
    /// Times the recirculation port returned a packet to ingress.
    pub recirculated: u64,
    /// Shared-buffer bytes in use now, and the most ever.
    pub buffer_bytes: u64,
    pub buffer_max_bytes: u64,
}

/// One worker's switch: ports with their traffic managers, the pipeline, PFC, recirculation.
pub struct Switch<P: BufPool, L: Pipeline<P>> {
    pool: P,
    pipeline: L,
    ports: Vec<PortState<P::Buf>>,
    infos: Vec<PortInfo>,
    /// Port id -> index into `ports` (`u16::MAX` = no such port).
    port_index: Vec<u16>,
    pfc: Option<PfcGenerator>,
    pfc_actions: ActionBuf,
    recirc: Option<RecircPort<P::Buf>>,
    shared_limit: u64,
    emitted: Vec<P::Buf>,
    stats: SwitchStats,
}

const NO_INDEX: u16 = u16::MAX;

impl<P: BufPool, L: Pipeline<P>> Switch<P, L> {
    /// Build a switch. Port ids must be unique (the config validated them).
    pub fn new(spec: SwitchSpec, pool: P, pipeline: L) -> Self {
        let max_id = spec.ports.iter().map(|p| p.info.id).max().unwrap_or(0);
        let mut port_index = vec![NO_INDEX; max_id as usize + 1];
        for (i, p) in spec.ports.iter().enumerate() {
            port_index[p.info.id as usize] = i as u16;
        }
        let infos: Vec<PortInfo> = spec.ports.iter().map(|p| p.info.clone()).collect();
        let ports = spec
            .ports
            .into_iter()
            .map(|p| PortState {
                info: p.info,
                tm: TrafficManager::new(&p.tm),
                stats: PortStats::default(),
            })
            .collect::<Vec<_>>();
        let pfc = spec
            .pfc
            .map(|params| PfcGenerator::new(ports.len(), params));
        Switch {
            pool,
            pipeline,
            infos,
            port_index,
            pfc,
            pfc_actions: ActionBuf::new(),
            recirc: spec.recirc.map(RecircPort::new),
            shared_limit: spec.shared_buffer_bytes,
            emitted: Vec::with_capacity(spec.emit_capacity.max(1)),
            ports,
            stats: SwitchStats::default(),
        }
    }

    /// Index of port `id`, if it exists.
    #[inline]
    pub fn port_idx(&self, id: u16) -> Option<usize> {
        match self.port_index.get(id as usize) {
            Some(&i) if i != NO_INDEX => Some(i as usize),
            _ => None,
        }
    }

    /// The ports, in index order.
    pub fn ports(&self) -> &[PortInfo] {
        &self.infos
    }

    pub fn pool(&mut self) -> &mut P {
        &mut self.pool
    }

    pub fn pipeline(&self) -> &L {
        &self.pipeline
    }

    pub fn pipeline_mut(&mut self) -> &mut L {
        &mut self.pipeline
    }

    pub fn stats(&self) -> &SwitchStats {
        &self.stats
    }

    /// Count a drop decided outside the switch (e.g. the driver could not get a buffer).
    pub fn note_drop(&mut self, r: DropReason) {
        self.stats.drops.inc(r);
    }

    /// Counters of port `idx`.
    pub fn port_stats(&self, idx: usize) -> Option<&PortStats> {
        self.ports.get(idx).map(|p| &p.stats)
    }

    /// The traffic manager of port `idx` (its per-class counters).
    pub fn tm(&self, idx: usize) -> Option<&TrafficManager<P::Buf>> {
        self.ports.get(idx).map(|p| &p.tm)
    }

    /// The PFC generator, if PFC is enabled.
    pub fn pfc(&self) -> Option<&PfcGenerator> {
        self.pfc.as_ref()
    }

    /// The recirculation port, if configured.
    pub fn recirc(&self) -> Option<&RecircPort<P::Buf>> {
        self.recirc.as_ref()
    }

    /// Process a burst of packets received on port `idx` at `now`. The burst is drained (the
    /// vector keeps its capacity).
    pub fn receive_burst(&mut self, idx: usize, now: Nanos, burst: &mut Vec<P::Buf>) {
        let Some(port) = self.ports.get(idx) else {
            for p in burst.drain(..) {
                self.stats.drops.inc(DropReason::BadPort);
                self.pool.free(p);
            }
            return;
        };
        let id = port.info.id;
        for mut pkt in burst.drain(..) {
            let st = &mut self.ports[idx].stats;
            st.rx_pkts += 1;
            st.rx_bytes += pkt.len() as u64;
            let m = pkt.meta_mut();
            m.ingress_port = id;
            m.rx_ts = now;
            self.receive_one(idx, now, pkt);
        }
    }

    /// One received (or recirculated) packet through MAC control and the ingress pipeline.
    fn receive_one(&mut self, idx: usize, now: Nanos, mut pkt: P::Buf) {
        if self.mac_control(idx, now, &pkt) {
            self.pool.free(pkt);
            return;
        }
        let action = {
            let mut ctx = Ctx {
                now,
                pool: &mut self.pool,
                ports: &self.infos,
                port_index: &self.port_index,
                emitted: &mut self.emitted,
                emit_drops: &mut self.stats.emit_drops,
            };
            self.pipeline.ingress(&mut ctx, &mut pkt)
        };
        match action {
            Action::Forward => self.enqueue(now, pkt, true),
            Action::Drop(r) => {
                self.stats.drops.inc(r);
                self.pool.free(pkt);
            }
            Action::Recirculate => self.recirculate(now, pkt),
            Action::Consume => self.pool.free(pkt),
        }
        self.flush_emitted(now);
    }

    /// 802.3 MAC control (EtherType 0x8808, untagged, as the standard requires): PFC and PAUSE
    /// are honored by this port's traffic manager and never forwarded. Returns true when the frame
    /// was MAC control (consumed).
    fn mac_control(&mut self, idx: usize, now: Nanos, pkt: &P::Buf) -> bool {
        let d = pkt.data();
        if d.len() < 14 || d[12] != 0x88 || d[13] != 0x08 {
            return false;
        }
        let port = &mut self.ports[idx];
        match wpfc::parse(d) {
            Ok(wpfc::MacControl::Pfc { enable, times }) => {
                port.tm.on_pfc_received(enable, times, now);
                for c in 0..NUM_CLASSES {
                    if enable & (1 << c) != 0 {
                        port.stats.pfc_rx[c] += 1;
                    }
                }
            }
            Ok(wpfc::MacControl::Pause { time }) => {
                port.tm.on_pause_received(time, now);
                for c in port.stats.pfc_rx.iter_mut() {
                    *c += 1;
                }
            }
            Err(_) => port.stats.mac_control_other += 1,
        }
        true
    }

    fn recirculate(&mut self, now: Nanos, pkt: P::Buf) {
        match self.recirc.as_mut() {
            Some(r) => {
                if let Err(p) = r.push(pkt, now) {
                    self.stats.drops.inc(DropReason::RecircFull);
                    self.pool.free(p);
                }
            }
            None => {
                self.stats.drops.inc(DropReason::Pipeline);
                self.pool.free(pkt);
            }
        }
    }

    fn flush_emitted(&mut self, now: Nanos) {
        while let Some(p) = self.emitted.pop() {
            self.stats.generated += 1;
            self.enqueue(now, p, false);
        }
    }

    /// Admission (shared buffer, PFC headroom) and enqueue on the egress traffic manager.
    /// `account`: PFC-account the bytes to (ingress port, class) (received packets only).
    fn enqueue(&mut self, now: Nanos, mut pkt: P::Buf, account: bool) {
        let m = *pkt.meta();
        let Some(e) = self.port_idx(m.egress_port) else {
            self.stats.drops.inc(DropReason::BadPort);
            self.pool.free(pkt);
            return;
        };
        let len = pkt.len() as u64;
        if len > self.ports[e].info.mtu as u64 {
            self.stats.drops.inc(DropReason::TooBig);
            self.pool.free(pkt);
            return;
        }
        if self.stats.buffer_bytes + len > self.shared_limit {
            self.stats.drops.inc(DropReason::QueueFull);
            self.pool.free(pkt);
            return;
        }
        let class = m.class.min(NUM_CLASSES as u8 - 1);
        pkt.meta_mut().class = class;
        let ingress = if account {
            self.port_idx(m.ingress_port)
        } else {
            None
        };
        if let (Some(pfc), Some(i)) = (self.pfc.as_mut(), ingress) {
            match pfc.on_enqueue(i as u16, class, len, now, &mut self.pfc_actions) {
                Admit::Accept => pkt.meta_mut().flags |= FLAG_PFC_ACCOUNTED,
                Admit::Drop(r) => {
                    self.stats.drops.inc(r);
                    self.pool.free(pkt);
                    self.send_pfc_actions(now);
                    return;
                }
            }
        }
        match self.ports[e].tm.enqueue(pkt, now) {
            Ok(_) => {
                self.stats.buffer_bytes += len;
                self.stats.buffer_max_bytes =
                    self.stats.buffer_max_bytes.max(self.stats.buffer_bytes);
            }
            Err((p, r)) => {
                self.release_pfc(now, &p);
                self.stats.drops.inc(r);
                self.pool.free(p);
            }
        }
        self.send_pfc_actions(now);
    }

    /// The packet leaves the buffer: give its bytes back to PFC accounting.
    fn release_pfc(&mut self, now: Nanos, pkt: &P::Buf) {
        let m = pkt.meta();
        if m.flags & FLAG_PFC_ACCOUNTED == 0 {
            return;
        }
        let ingress = self.port_idx(m.ingress_port);
        if let (Some(pfc), Some(i)) = (self.pfc.as_mut(), ingress) {
            pfc.on_dequeue(
                i as u16,
                m.class,
                pkt.len() as u64,
                now,
                &mut self.pfc_actions,
            );
        }
    }

    /// Turn pending PFC actions into 802.1Qbb frames on the control queue of their port.
    fn send_pfc_actions(&mut self, now: Nanos) {
        if self.pfc_actions.is_empty() {
            return;
        }
        // ActionBuf is Copy-sized and small; index instead of borrowing across the loop.
        for k in 0..self.pfc_actions.len() {
            let a: PfcAction = self.pfc_actions.as_slice()[k];
            self.send_pfc(now, a);
        }
        self.pfc_actions.clear();
    }

    fn send_pfc(&mut self, now: Nanos, a: PfcAction) {
        let idx = a.port as usize;
        let Some(port) = self.ports.get_mut(idx) else {
            return;
        };
        let Some(mut pkt) = self.pool.alloc() else {
            self.stats.drops.inc(DropReason::PoolEmpty);
            return;
        };
        let Some(buf) = pkt.append(wpfc::PFC_FRAME_LEN) else {
            self.stats.drops.inc(DropReason::PoolEmpty);
            self.pool.free(pkt);
            return;
        };
        if wpfc::build_pfc(buf, port.info.mac, a.class_enable, a.times).is_err() {
            self.pool.free(pkt);
            return;
        }
        let m = pkt.meta_mut();
        m.flags |= FLAG_CONTROL | FLAG_GENERATED;
        m.egress_port = port.info.id;
        m.class = 7;
        match port.tm.enqueue_control(pkt, now) {
            Ok(()) => port.stats.pfc_tx += 1,
            Err((p, r)) => {
                self.stats.drops.inc(r);
                self.pool.free(p);
            }
        }
    }

    /// Time-driven work at `now`: recirculated packets coming back, PFC refreshes, pipeline timers.
    pub fn poll(&mut self, now: Nanos) {
        while let Some(pkt) = self.recirc.as_mut().and_then(|r| r.pop_ready(now)) {
            self.stats.recirculated += 1;
            let idx = self.port_idx(pkt.meta().ingress_port).unwrap_or(0);
            self.receive_one(idx, now, pkt);
        }
        if let Some(pfc) = self.pfc.as_mut() {
            if pfc.next_deadline().is_some_and(|t| t <= now) {
                pfc.poll(now, &mut self.pfc_actions);
                self.send_pfc_actions(now);
            }
        }
        if self.pipeline.next_deadline().is_some_and(|t| t <= now) {
            let mut ctx = Ctx {
                now,
                pool: &mut self.pool,
                ports: &self.infos,
                port_index: &self.port_index,
                emitted: &mut self.emitted,
                emit_drops: &mut self.stats.emit_drops,
            };
            self.pipeline.on_time(&mut ctx);
            self.flush_emitted(now);
        }
    }

    /// Hand every packet of port `idx` whose transmission starts at or before `now` to `tx`
    /// (at most `max` packets). Returns how many were handed over.
    pub fn transmit(
        &mut self,
        idx: usize,
        now: Nanos,
        max: usize,
        tx: &mut impl FnMut(P::Buf),
    ) -> usize {
        let mut n = 0;
        while n < max {
            let Some(port) = self.ports.get_mut(idx) else {
                return n;
            };
            let Some(mut pkt) = port.tm.dequeue(now) else {
                break;
            };
            let len = pkt.len() as u64;
            if pkt.meta().flags & FLAG_CONTROL == 0 {
                self.stats.buffer_bytes = self.stats.buffer_bytes.saturating_sub(len);
                self.release_pfc(now, &pkt);
                let mut ctx = Ctx {
                    now,
                    pool: &mut self.pool,
                    ports: &self.infos,
                    port_index: &self.port_index,
                    emitted: &mut self.emitted,
                    emit_drops: &mut self.stats.emit_drops,
                };
                let action = self.pipeline.egress(&mut ctx, &mut pkt);
                if action != Action::Forward {
                    let r = match action {
                        Action::Drop(r) => r,
                        _ => DropReason::Pipeline,
                    };
                    self.stats.drops.inc(r);
                    self.pool.free(pkt);
                    self.send_pfc_actions(now);
                    self.flush_emitted(now);
                    continue;
                }
            }
            let st = &mut self.ports[idx].stats;
            st.tx_pkts += 1;
            st.tx_bytes += len;
            tx(pkt);
            n += 1;
            self.send_pfc_actions(now);
            self.flush_emitted(now);
        }
        n
    }

    /// The earliest time after which `poll` or `transmit` has work without new input.
    pub fn next_event(&self, now: Nanos) -> Option<Nanos> {
        let mut t: Option<Nanos> = None;
        let mut take = |x: Option<Nanos>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        for p in &self.ports {
            take(p.tm.next_event(now));
        }
        take(self.recirc.as_ref().and_then(|r| r.next_ready()));
        take(self.pfc.as_ref().and_then(|p| p.next_deadline()));
        take(self.pipeline.next_deadline());
        t
    }

    /// Packets in egress queues and the recirculation loop.
    pub fn buffered_bytes(&self) -> u64 {
        self.stats.buffer_bytes + self.recirc.as_ref().map_or(0, |r| r.bytes())
    }
}

/// `PORT_NONE` re-exported for pipelines that build generated packets.
pub const NO_PORT: u16 = PORT_NONE;
