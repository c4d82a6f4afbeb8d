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

pub mod admission;

pub use admission::{Admission, Chain, Extensions, Timer};

use crate::asic::pfc::{ActionBuf, Admit, PfcAction, PfcGenerator, PfcParams};
use crate::asic::recirc::{RecircConfig, RecircPort};
use crate::asic::ring::Ring;
use crate::conservation::Ledger;
use crate::control::{Channel, Command, ControlStats, Envelope, Punt, PuntHandler};
use crate::counters::{DropCounters, DropReason};
use crate::packet::{
    BufPool, Meta, PacketBuf, FLAG_CONTROL, FLAG_GENERATED, FLAG_PFC_ACCOUNTED, NUM_CLASSES,
    PORT_NONE,
};
use crate::port::BURST;
use crate::time::Nanos;
use crate::tm::{BypassRun, TmConfig, TrafficManager};
use crate::wire::ethernet::is_mac_control;
use crate::wire::pfc as wpfc;
use std::sync::Arc;

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
    /// The pipeline keeps the packet in a queue of its own (a per-flow queue): the engine hands
    /// it over by value with [`Pipeline::hold`]; the pipeline sends it on later with
    /// [`Ctx::inject`]. Ingress only (egress treats it as a drop).
    Hold,
    /// Enqueue it on `meta.egress_port` as a packet the pipeline released from its own queue
    /// ([`Ctx::inject`]) is, right after its ingress: [`Action::Forward`] without the PFC
    /// accounting to the ingress port. For a packet the pipeline would hold and release at once
    /// (MLCC's PFQ cut-through), without the round trip through [`Pipeline::hold`] and the emit
    /// list. Ingress only (egress treats it as a drop).
    Release,
}

/// A pipeline: the programmable stages of the switch (PSA ingress and egress controls).
pub trait Pipeline<P: BufPool> {
    /// The pipeline's own control commands (table entries, registers, parameters).
    type Command: Send + 'static;

    /// Apply a control command. `Err` (with a reason for the log) counts as refused.
    fn command(&mut self, _ctx: &mut Ctx<'_, P>, _cmd: Self::Command) -> Result<(), &'static str> {
        Err("this pipeline takes no commands")
    }

    /// Ingress stages for one packet. On `Forward`, `meta.egress_port` and `meta.class` say where
    /// it goes. Generated packets (CNPs, NACKs, ...) are handed to [`Ctx::emit`].
    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action;

    /// Whether the engine may run [`Pipeline::ingress_burst`] over a whole burst before it
    /// enqueues any of it. Only when no ingress decision depends on what the engine did with the
    /// burst's earlier packets: their enqueue (queue depths, [`Ctx::queue_depth`]) or their hold
    /// ([`Action::Hold`]: a per-flow queue that must see a flow's packets in order). `false` (the
    /// default): one packet at a time through ingress, admission and enqueue.
    const BURST_INGRESS: bool = false;

    /// Ingress stages over a burst of packets from one port (VPP's vectors), used when
    /// [`Pipeline::BURST_INGRESS`] is set: set `actions[i]` to the fate of `pkts[i]` (both slices
    /// have the same length, at most [`BURST`]). The engine acts on the decisions in order
    /// once the whole burst is through, so a pipeline can run stage by stage across the burst,
    /// prefetching the next packets' headers and table entries. Before it works on `pkts[i]` in
    /// a way that may emit packets it calls [`Ctx::at_packet`]`(i)`: what it emits then is
    /// enqueued right after `pkts[i]`, as if the packets had gone through
    /// [`Pipeline::ingress`] one by one. The default does that. (The engine has asked for every
    /// packet's first cache line before it calls this.)
    ///
    /// Returns how many packets it decided, from the first: all of them (the default), or `k`
    /// (at least 1) when the ingress of `pkts[k]` may read or change what the engine does with
    /// the earlier packets (a queue's depth, a held queue) and must wait for their admission:
    /// the engine admits `pkts[..k]` and calls again with the rest, `pkts[k]` first. Its ingress
    /// must then not have changed anything yet that a second run would see (recording a parse
    /// in the metadata again is harmless).
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
            actions[i] = self.ingress(ctx, &mut pkts[i]);
        }
        n
    }

    /// Egress stages for one packet leaving `meta.egress_port` (after the traffic manager).
    /// `Forward` sends it; `Drop` drops it; other actions are treated as `Drop(Pipeline)`.
    #[inline]
    fn egress(&mut self, _ctx: &mut Ctx<'_, P>, _pkt: &mut P::Buf) -> Action {
        Action::Forward
    }

    /// Whether [`Pipeline::egress`] may do anything at all with the current configuration
    /// (`true`, the default, when unsure). `false` lets the engine skip the call for every
    /// packet it transmits, and building the [`Ctx`] the call takes (three stores): the baseline
    /// without INT.
    #[inline]
    fn egress_active(&self) -> bool {
        true
    }

    /// Whether [`Pipeline::egress`] may do anything with a frame leaving port `port` (its id):
    /// [`Pipeline::egress_active`] narrowed to one port. `false` lets the engine skip the call
    /// for that port's frames, and send its bypassed frames as one burst (a spraying ToR's
    /// egress stage acts toward its hosts only, not on the fabric ports most of its frames
    /// leave by). The default is [`Pipeline::egress_active`].
    #[inline]
    fn egress_active_on(&self, _port: u16) -> bool {
        self.egress_active()
    }

    /// Take the packet the ingress stage answered [`Action::Hold`] for. `Err` gives it back: the
    /// engine drops it, counted as `pipeline`.
    fn hold(&mut self, _ctx: &mut Ctx<'_, P>, pkt: P::Buf) -> Result<(), P::Buf> {
        Err(pkt)
    }

    /// Called from [`Switch::poll`] when `now` has reached [`Pipeline::next_deadline`].
    fn on_time(&mut self, _ctx: &mut Ctx<'_, P>) {}

    /// The next time the pipeline needs [`Pipeline::on_time`] (timers), if any.
    fn next_deadline(&self) -> Option<Nanos> {
        None
    }

    /// Packets the pipeline holds in its own queues ([`Action::Hold`]: per-flow queues),
    /// counted as buffered by [`Switch::buffered_packets`] (conservation, drain at the end of a
    /// replay).
    fn held_packets(&self) -> u64 {
        0
    }

    /// Bytes of [`Pipeline::held_packets`].
    fn held_bytes(&self) -> u64 {
        0
    }

    /// The pipeline's own counters, by stable name (`baseline.routed`, ...), for metrics.
    fn counters(&self, _out: &mut dyn FnMut(&'static str, u64)) {}

    /// The pipeline's match-action tables, by name, for metrics.
    fn tables(&self, _out: &mut dyn FnMut(&'static str, TableCounters)) {}
}

/// What metrics show of one match-action table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableCounters {
    pub hits: u64,
    pub misses: u64,
    pub entries: u64,
    pub capacity: u64,
    pub full_events: u64,
}

/// One port in a [`SwitchSnapshot`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSnapshot {
    pub id: u16,
    pub name: String,
    pub stats: PortStats,
    /// Per class: the traffic manager's counters (depth, marks, drops).
    pub classes: [crate::tm::ClassStats; NUM_CLASSES],
}

/// A copy of every counter of a switch, taken by its worker and read by the control thread
/// (DESIGN.md section 7: per-lcore counters published periodically). `Switch::snapshot_into`
/// reuses the snapshot's memory, so publishing does not allocate after the first time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchSnapshot {
    /// Engine time of the snapshot.
    pub taken_at: Nanos,
    pub ports: Vec<PortSnapshot>,
    pub stats: SwitchStats,
    pub control: ControlStats,
    pub pfc: Option<crate::asic::pfc::PfcGenStats>,
    /// The counters of the admission stages a mechanism adds ([`Admission::snapshot_into`]),
    /// by type; each worker's own (not merged).
    pub admission: Extensions,
    pub pipeline: Vec<(&'static str, u64)>,
    pub tables: Vec<(&'static str, TableCounters)>,
    /// (occupancy, capacity) of the command ring and the punt ring.
    pub command_ring: (usize, usize),
    pub punt_ring: (usize, usize),
    /// Bytes the pipeline holds in its own queues ([`Pipeline::held_bytes`]: MLCC's PFQs).
    pub held_bytes: u64,
    /// Frames inside the switch ([`Switch::buffered_packets`]).
    pub queued_pkts: u64,
    /// Live runs: the worker's loop iterations so far (its progress, for `/health` and
    /// `longhaul_worker_loops_total`); 0 elsewhere.
    pub loops: u64,
    /// Live runs: the port I/O's own counters, by port index (what the files, rings or NICs
    /// took: `rx_nobuf`, `rx_errors`, `tx_errors`); empty elsewhere.
    pub io: Vec<crate::port::PortIoStats>,
}

impl SwitchSnapshot {
    /// The ledger of the snapshot's switch (or of the workers merged into it).
    pub fn ledger(&self) -> Ledger {
        let (received, sent) = self.ports.iter().fold((0, 0), |(r, t), p| {
            (r + p.stats.rx_pkts, t + p.stats.tx_pkts)
        });
        self.stats.ledger(received, sent, self.queued_pkts)
    }
}

impl SwitchStats {
    /// `len` bytes entered the shared buffer (a queue or the bypass ring): its occupancy and
    /// peak.
    #[inline(always)]
    fn buffer_in(&mut self, len: u64) {
        self.buffer_bytes += len;
        self.buffer_max_bytes = self.buffer_max_bytes.max(self.buffer_bytes);
    }

    /// The ledger, given what the ports received and sent and what is inside.
    fn ledger(&self, received: u64, sent: u64, queued: u64) -> Ledger {
        Ledger {
            received,
            arrived_dropped: self.arrived_dropped,
            injected: self.injected,
            generated: self.generated,
            control_generated: self.control_generated,
            sent,
            dropped: self.drops.total() + self.emit_drops,
            consumed: self.consumed,
            queued,
        }
    }
}

impl SwitchSnapshot {
    /// Add `o` (another worker's switch, same config) into this one: counters add up by port,
    /// class, name and table; depths add (the workers' queues of one port together); peaks and
    /// table sizes take the larger (each worker holds a copy of every table); rings keep this
    /// worker's.
    pub fn merge(&mut self, o: &SwitchSnapshot) {
        self.taken_at = self.taken_at.max(o.taken_at);
        for (p, q) in self.ports.iter_mut().zip(o.ports.iter()) {
            let (a, b) = (&mut p.stats, &q.stats);
            a.rx_pkts += b.rx_pkts;
            a.rx_bytes += b.rx_bytes;
            a.tx_pkts += b.tx_pkts;
            a.tx_bytes += b.tx_bytes;
            a.pfc_tx += b.pfc_tx;
            a.mac_control_other += b.mac_control_other;
            a.tx_bypassed += b.tx_bypassed;
            for (x, y) in a.pfc_rx.iter_mut().zip(b.pfc_rx.iter()) {
                *x += y;
            }
            for (x, y) in p.classes.iter_mut().zip(q.classes.iter()) {
                x.enq_pkts += y.enq_pkts;
                x.enq_bytes += y.enq_bytes;
                x.deq_pkts += y.deq_pkts;
                x.deq_bytes += y.deq_bytes;
                x.drops += y.drops;
                x.lossless_drops += y.lossless_drops;
                x.ecn_marks += y.ecn_marks;
                x.ecn_not_ect += y.ecn_not_ect;
                x.depth_bytes += y.depth_bytes;
                x.depth_pkts += y.depth_pkts;
                x.max_depth_bytes = x.max_depth_bytes.max(y.max_depth_bytes);
            }
        }
        self.held_bytes += o.held_bytes;
        self.queued_pkts += o.queued_pkts;
        self.loops += o.loops;
        if self.io.len() < o.io.len() {
            self.io
                .resize(o.io.len(), crate::port::PortIoStats::default());
        }
        for (a, b) in self.io.iter_mut().zip(o.io.iter()) {
            a.add(b);
        }
        let (a, b) = (&mut self.stats, &o.stats);
        a.drops.add(&b.drops);
        a.emit_drops += b.emit_drops;
        a.generated += b.generated;
        a.control_generated += b.control_generated;
        a.injected += b.injected;
        a.consumed += b.consumed;
        a.arrived_dropped += b.arrived_dropped;
        a.recirculated += b.recirculated;
        a.buffer_bytes += b.buffer_bytes;
        a.buffer_max_bytes = a.buffer_max_bytes.max(b.buffer_max_bytes);
        let (a, b) = (&mut self.control, &o.control);
        a.applied += b.applied;
        a.refused += b.refused;
        a.punts += b.punts;
        a.punt_drops += b.punt_drops;
        a.latency_hist.merge(&b.latency_hist);
        if let (Some(a), Some(b)) = (self.pfc.as_mut(), o.pfc.as_ref()) {
            for i in 0..NUM_CLASSES {
                a.xoff_sent[i] += b.xoff_sent[i];
                a.xon_sent[i] += b.xon_sent[i];
                a.headroom_drops[i] += b.headroom_drops[i];
            }
            a.unaccounted += b.unaccounted;
            a.underflows += b.underflows;
            a.deferred += b.deferred;
        }
        for (name, v) in &o.pipeline {
            match self.pipeline.iter_mut().find(|(n, _)| n == name) {
                Some((_, x)) => *x += v,
                None => self.pipeline.push((name, *v)),
            }
        }
        for (name, t) in &o.tables {
            match self.tables.iter_mut().find(|(n, _)| n == name) {
                Some((_, x)) => {
                    x.hits += t.hits;
                    x.misses += t.misses;
                    x.full_events += t.full_events;
                    x.entries = x.entries.max(t.entries);
                    x.capacity = x.capacity.max(t.capacity);
                }
                None => self.tables.push((name, *t)),
            }
        }
    }
}

/// What a stage sees of the switch: the clock, the buffer pool, the ports, and a way to emit
/// packets it generates.
///
/// Built per stage call (a packet's ingress, its egress, ...): the clock, the index of the
/// burst's packet being handled, and one reference to the switch's `CtxState`, so that a
/// build is three stores (it was thirteen references, about 19 instructions a build).
pub struct Ctx<'a, P: BufPool> {
    /// The engine's clock (TSC or virtual), ns.
    pub now: Nanos,
    /// The index in the burst of the packet whose processing emits now (see
    /// [`Ctx::at_packet`]).
    current: u16,
    st: &'a mut CtxState<P>,
}

/// The part of a [`Switch`] its stages see through [`Ctx`], one field of the switch so that a
/// context borrows it whole while `Switch::pipeline` stays free to be called with it.
struct CtxState<P: BufPool> {
    /// Where generated packets come from.
    pool: P,
    ports: Vec<PortState<P::Buf>>,
    infos: Vec<PortInfo>,
    /// Port id -> index into `ports` (`u16::MAX` = no such port).
    port_index: Vec<u16>,
    emitted: Vec<P::Buf>,
    /// For each packet in `emitted`, the index in the burst of the packet whose processing
    /// emitted it (`current` at the time).
    emit_owner: Vec<u16>,
    stats: SwitchStats,
    /// The channel's punt ring (the worker's handle on it).
    punts: Arc<crossbeam_queue::ArrayQueue<Punt>>,
    ctl: ControlStats,
    /// Times a stage changed a traffic manager through its context ([`Ctx::hold_queue`],
    /// [`Ctx::release_queue`]): [`Switch::recirc_pass`] tells by it whether a pass left the
    /// ports as they were.
    tm_touches: u32,
}

impl<'a, P: BufPool> Ctx<'a, P> {
    /// Send a punt up to the control thread. A full ring (or no control thread) is a counted
    /// drop (`punt_drops`); the dataplane never waits.
    #[inline]
    pub fn punt(&mut self, p: Punt) -> bool {
        if self.st.punts.push(p).is_ok() {
            self.st.ctl.punts += 1;
            true
        } else {
            self.st.ctl.punt_drops += 1;
            false
        }
    }

    /// Where generated packets come from.
    #[inline(always)]
    pub fn pool(&mut self) -> &mut P {
        &mut self.st.pool
    }

    /// Punt a truncated copy of `pkt` with `reason`.
    #[inline]
    pub fn punt_packet(&mut self, reason: u16, pkt: &P::Buf) -> bool {
        let p = Punt::packet(reason, pkt.meta().ingress_port, self.now, pkt.data());
        self.punt(p)
    }

    /// Hand a generated packet to the traffic manager (after the current packet's own processing).
    /// `meta.egress_port` and `meta.class` must be set. When the per-burst list is full the packet
    /// is freed and counted (`emit_drops`).
    pub fn emit(&mut self, mut pkt: P::Buf) {
        pkt.meta_mut().flags |= FLAG_GENERATED;
        self.st.stats.generated += 1;
        if self.st.emitted.len() < self.st.emitted.capacity() {
            self.st.emitted.push(pkt);
            self.st.emit_owner.push(self.current);
        } else {
            self.st.stats.emit_drops += 1;
            self.st.pool.free(pkt);
        }
    }

    /// Hand a packet the pipeline held in its own queue ([`Action::Hold`]) to the traffic
    /// manager of `meta.egress_port`, as [`Ctx::emit`] does but without marking it generated.
    /// `false` (packet freed, counted in `emit_drops`) when the per-burst list is full: check
    /// [`Ctx::emit_room`] first.
    pub fn inject(&mut self, pkt: P::Buf) -> bool {
        if self.st.emitted.len() < self.st.emitted.capacity() {
            self.st.emitted.push(pkt);
            self.st.emit_owner.push(self.current);
            true
        } else {
            self.st.stats.emit_drops += 1;
            self.st.pool.free(pkt);
            false
        }
    }

    /// [`Pipeline::ingress_burst`]: what is emitted from now on belongs to the burst's packet
    /// `i`, and is enqueued right after it.
    #[inline(always)]
    pub fn at_packet(&mut self, i: usize) {
        self.current = i as u16;
    }

    /// How many more packets [`Ctx::emit`] / [`Ctx::inject`] take before the next flush.
    #[inline]
    pub fn emit_room(&self) -> usize {
        self.st.emitted.capacity() - self.st.emitted.len()
    }

    /// Bytes port `id` has sent so far (0 for no such port): INT's tx bytes.
    #[inline]
    pub fn port_tx_bytes(&self, id: u16) -> u64 {
        let Some(&idx) = self.st.port_index.get(id as usize) else {
            return 0;
        };
        self.st
            .ports
            .get(idx as usize)
            .map_or(0, |p| p.stats.tx_bytes)
    }

    /// What an INT hop says of egress port `id` (INT v2.1's egress port facts, as
    /// [`Ctx::queue_depth`], [`Ctx::port_tx_bytes`] and [`Ctx::port`] give them): the depth in
    /// bytes of its queue `queue`, the bytes it has sent so far and its rate in bit/s, each 0
    /// for no such port. One look-up of the port for the three (the INT source writes them into
    /// every packet it sends toward its DC, MLCC's receiver-side DCI).
    #[inline]
    pub fn int_port_state(&self, id: u16, queue: u8) -> (u64, u64, u64) {
        let Some(&idx) = self.st.port_index.get(id as usize) else {
            return (0, 0, 0);
        };
        let idx = idx as usize;
        let (depth, tx) = self
            .st
            .ports
            .get(idx)
            .map_or((0, 0), |p| (p.tm.depth_bytes(queue), p.stats.tx_bytes));
        let rate = self.st.infos.get(idx).map_or(0, |i| i.rate_bps);
        (depth, tx, rate)
    }

    /// Static facts about port `id`, if it exists.
    #[inline]
    pub fn port(&self, id: u16) -> Option<&PortInfo> {
        let idx = *self.st.port_index.get(id as usize)?;
        self.st.infos.get(idx as usize)
    }

    #[inline]
    fn tm_of(&mut self, port: u16) -> Option<&mut TrafficManager<P::Buf>> {
        let idx = *self.st.port_index.get(port as usize)?;
        self.st.ports.get_mut(idx as usize).map(|p| &mut p.tm)
    }

    /// Depth of egress queue `queue` of port `port` as (bytes, packets); `None` for no such
    /// port. What the stage sees is the queue before the current packet is enqueued.
    #[inline]
    pub fn queue_depth(&mut self, port: u16, queue: u8) -> Option<(u64, usize)> {
        let tm = self.tm_of(port)?;
        Some((tm.depth_bytes(queue), tm.depth_pkts(queue)))
    }

    /// Bytes queued on port `port` in all its egress queues (0 for no such port).
    #[inline]
    pub fn port_queued_bytes(&mut self, port: u16) -> u64 {
        self.tm_of(port).map_or(0, |tm| tm.total_bytes())
    }

    /// Hold egress queue `queue` of port `port` until `until` (the traffic manager's
    /// data-plane queue pause, [`TrafficManager::hold`]). `false`: no such port or queue.
    /// The port's bypass run, if one is open (a stage called with runs open,
    /// [`Switch::receive_burst`] one packet at a time), is closed first: it checked the queue
    /// was not held.
    pub fn hold_queue(&mut self, port: u16, queue: u8, until: Nanos) -> bool {
        self.port_closed(port)
            .is_some_and(|tm| tm.hold(queue, until))
    }

    /// End a hold of egress queue `queue` of port `port` now. `false`: no such port or queue.
    /// (The port's open bypass run is closed first, as for [`Ctx::hold_queue`].)
    pub fn release_queue(&mut self, port: u16, queue: u8) -> bool {
        self.port_closed(port).is_some_and(|tm| tm.release(queue))
    }

    /// The traffic manager of port `port`, its open bypass run closed.
    fn port_closed(&mut self, port: u16) -> Option<&mut TrafficManager<P::Buf>> {
        let idx = *self.st.port_index.get(port as usize)?;
        let p = self.st.ports.get_mut(idx as usize)?;
        self.st.tm_touches = self.st.tm_touches.wrapping_add(1);
        p.close_run();
        Some(&mut p.tm)
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

/// How to build a [`Switch`]. `Default` is a switch with no ports and nothing optional, to
/// fill in with struct update syntax.
#[derive(Clone, Debug, Default)]
pub struct SwitchSpec {
    pub ports: Vec<PortSpec>,
    /// PFC generation on ingress (lossless classes), if enabled.
    pub pfc: Option<PfcParams>,
    /// The parameters of the admission stages a mechanism adds (its `extend_spec`), by type:
    /// each stage of the switch's chain takes its own in [`Admission::build`].
    pub admission: Extensions,
    /// Shared buffer over all egress queues, bytes (control frames excluded).
    pub shared_buffer_bytes: u64,
    /// The recirculation port, if the pipeline uses one.
    pub recirc: Option<RecircConfig>,
    /// Most packets a stage may emit while one burst is processed.
    pub emit_capacity: usize,
    /// Capacity of the command ring (control -> worker).
    pub command_ring: usize,
    /// Capacity of the punt ring (worker -> control).
    pub punt_ring: usize,
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
    /// Of `tx_pkts`, frames that found the port idle and skipped its queues (the traffic
    /// manager's empty-queue bypass, docs/engine.md).
    pub tx_bypassed: u64,
}

struct PortState<B: PacketBuf> {
    info: PortInfo,
    tm: TrafficManager<B>,
    stats: PortStats,
    /// Frames the traffic manager let bypass its empty queues ([`TrafficManager::bypass`]):
    /// already on the wire as far as the link clock is concerned, handed out by the next
    /// [`Switch::transmit`] before anything it dequeues. Preallocated ([`BYPASS_RING`]); when it
    /// is full, frames take the queue.
    ready: Ring<B>,
    /// The bypass run open on this port while a burst is admitted
    /// ([`TrafficManager::open_run`]), and the frames it let through for the port's counters.
    run: Option<BypassRun>,
    run_bypassed: u64,
    /// Whether the port is in [`Switch::open_high`] (so that it is listed once).
    run_listed: bool,
}

impl<B: PacketBuf> PortState<B> {
    /// Add the port's open bypass run's frames to its counters, and close it (the port stays
    /// marked in `open_low` or listed in `open_high`).
    #[inline]
    fn close_run(&mut self) {
        if let Some(r) = self.run.take() {
            self.tm.close_run(r);
            self.stats.tx_bypassed += core::mem::take(&mut self.run_bypassed);
        }
    }
}

/// Frames one port holds between the bypass and the next `transmit` (one rx burst and what its
/// stages emit fit; beyond that frames are queued as usual).
pub const BYPASS_RING: usize = 64;

/// The PFC-accounted frames of one (ingress port id, class, bytes) that left in a row and are
/// not yet released ([`Switch::transmit_bypassed`]).
#[derive(Default)]
struct ReleaseRun(Option<(u16, u8, u64)>);

impl ReleaseRun {
    /// Add a leaving frame: the run it ended, if any, to be released now.
    #[inline(always)]
    fn add(&mut self, m: &Meta, len: u64) -> Option<(u16, u8, u64)> {
        if m.flags & FLAG_PFC_ACCOUNTED == 0 {
            return None;
        }
        match self.0.as_mut() {
            Some(r) if r.0 == m.ingress_port && r.1 == m.class => {
                r.2 += len;
                None
            }
            _ => self.0.replace((m.ingress_port, m.class, len)),
        }
    }
}

/// Switch-wide counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchStats {
    pub drops: DropCounters,
    /// Generated packets lost because the emit list was full.
    pub emit_drops: u64,
    /// Packets generated by stages ([`Ctx::emit`]; those the emit list lost included).
    pub generated: u64,
    /// PFC / PAUSE frames built by the admission stages (a buffer found or not).
    pub control_generated: u64,
    /// Frames the control thread injected ([`Command::Inject`]; a buffer found or not).
    pub injected: u64,
    /// Frames used up on purpose: MAC control honored, [`Action::Consume`], what a direct stage
    /// call ([`Switch::with_ctx`]) emitted.
    pub consumed: u64,
    /// Frames that arrived but never reached the ingress stage (no buffer, no such port); they
    /// are counted in `drops` too (conservation: [`crate::conservation`]).
    pub arrived_dropped: u64,
    /// Times the recirculation port returned a packet to ingress.
    pub recirculated: u64,
    /// Shared-buffer bytes in use now, and the most ever.
    pub buffer_bytes: u64,
    pub buffer_max_bytes: u64,
}

/// One worker's switch: ports with their traffic managers, the pipeline, the admission chain
/// `A` (classic PFC alone by default), recirculation.
pub struct Switch<P: BufPool, L: Pipeline<P>, A: Admission = PfcGenerator> {
    /// What the stages see ([`Ctx`]): the pool, the ports, the emit list, the counters.
    st: CtxState<P>,
    pipeline: L,
    /// `None` when the spec configures none of the chain's stages.
    admission: Option<A>,
    pfc_actions: ActionBuf,
    recirc: Option<RecircPort<P::Buf>>,
    shared_limit: u64,
    /// The ports whose bypass run was opened since the runs were last closed
    /// ([`Switch::close_runs`]): bit i for port index i below 64 (a frame alone sets and clears
    /// one bit), the others listed in `open_high`, each once (the capacity, one per port, is
    /// never exceeded).
    open_low: u64,
    open_high: Vec<usize>,
    channel: Channel<L::Command>,
    /// A command taken off the ring whose `at` is still in the future (replay).
    held: Option<Envelope<L::Command>>,
    /// Replay: the control thread's punt handler, run inline with a fixed control latency.
    inline_control: Option<InlineControl<L::Command>>,
    next_seq: u64,
}

/// The stages' view of the switch at `now`, borrowing the switch's `st` only so that
/// `self.pipeline` stays free to be called with it.
macro_rules! ctx {
    ($sw:ident, $now:expr) => {
        Ctx {
            now: $now,
            current: 0,
            st: &mut $sw.st,
        }
    };
}

/// A punt handler run inline (replay) and the control latency it simulates.
type InlineControl<C> = (Box<dyn PuntHandler<C>>, Nanos);

/// Commands applied per [`Switch::apply_commands`] call at most (bounded work per iteration).
pub const COMMANDS_PER_POLL: usize = 64;

const NO_INDEX: u16 = u16::MAX;

impl<P: BufPool, L: Pipeline<P>> Switch<P, L> {
    /// Build a switch with classic PFC as its admission ([`Switch::with_admission`]).
    pub fn new(spec: SwitchSpec, pool: P, pipeline: L) -> Self {
        Self::with_admission(spec, pool, pipeline)
    }

    /// The PFC generator, if PFC is enabled.
    pub fn pfc(&self) -> Option<&PfcGenerator> {
        self.admission()
    }
}

impl<P: BufPool, L: Pipeline<P>, A: Admission> Switch<P, L, A> {
    /// Build a switch whose admission chain is `A`. Port ids must be unique (the config
    /// validated them).
    pub fn with_admission(spec: SwitchSpec, pool: P, pipeline: L) -> Self {
        let max_id = spec.ports.iter().map(|p| p.info.id).max().unwrap_or(0);
        let mut port_index = vec![NO_INDEX; max_id as usize + 1];
        for (i, p) in spec.ports.iter().enumerate() {
            port_index[p.info.id as usize] = i as u16;
        }
        let infos: Vec<PortInfo> = spec.ports.iter().map(|p| p.info.clone()).collect();
        let admission = A::build(&spec);
        let ports = spec
            .ports
            .into_iter()
            .map(|p| PortState {
                info: p.info,
                tm: TrafficManager::new(&p.tm),
                stats: PortStats::default(),
                ready: Ring::with_capacity(BYPASS_RING),
                run: None,
                run_bypassed: 0,
                run_listed: false,
            })
            .collect::<Vec<_>>();
        let channel = Channel::new(spec.command_ring, spec.punt_ring);
        Switch {
            pipeline,
            admission,
            pfc_actions: ActionBuf::new(),
            recirc: spec.recirc.map(RecircPort::new),
            shared_limit: spec.shared_buffer_bytes,
            open_low: 0,
            open_high: Vec::with_capacity(ports.len().saturating_sub(64)),
            st: CtxState {
                pool,
                ports,
                infos,
                port_index,
                emitted: Vec::with_capacity(spec.emit_capacity.max(1)),
                emit_owner: Vec::with_capacity(spec.emit_capacity.max(1)),
                stats: SwitchStats::default(),
                punts: channel.punts.clone(),
                ctl: ControlStats::default(),
                tm_touches: 0,
            },
            channel,
            held: None,
            inline_control: None,
            next_seq: 0,
        }
    }

    /// The switch's control channel (clone it for the control thread).
    pub fn channel(&self) -> Channel<L::Command> {
        self.channel.clone()
    }

    /// Control-channel counters (commands applied/refused, punts, latency histogram).
    pub fn control_stats(&self) -> &ControlStats {
        &self.st.ctl
    }

    /// Replay: handle punts inline with `handler`, each resulting command taking effect
    /// `latency_ns` after the punt (DESIGN.md section 3: a command takes effect at punt time plus
    /// the control latency). Live runs leave this unset and run the handler on the control thread.
    pub fn set_inline_control(
        &mut self,
        handler: Box<dyn PuntHandler<L::Command>>,
        latency_ns: Nanos,
    ) {
        self.inline_control = Some((handler, latency_ns));
    }

    /// Queue a command as the control plane would (tests, replay scripts): it takes effect at
    /// `at` or on the next [`Switch::apply_commands`] after it. `Err` gives it back when the
    /// ring is full (returned by value: boxing it would allocate).
    #[allow(clippy::result_large_err)]
    pub fn enqueue_command(
        &mut self,
        at: Nanos,
        cmd: Command<L::Command>,
    ) -> Result<(), Command<L::Command>> {
        let env = Envelope {
            seq: self.next_seq,
            at,
            issued_ns: at,
            cmd,
        };
        self.next_seq += 1;
        self.channel.commands.push(env).map_err(|e| e.cmd)
    }

    /// Run the inline control handler over the punts waiting in the ring (replay only).
    fn run_inline_control(&mut self) {
        let Some((handler, latency)) = self.inline_control.as_mut() else {
            return;
        };
        // Every event step of a replay comes here: nothing to do without a punt (and no ring
        // handle to clone, an atomic add and sub).
        if self.channel.punts.is_empty() {
            return;
        }
        let latency = *latency;
        let ring = self.channel.commands.clone();
        let seq = &mut self.next_seq;
        let refused = &mut self.st.ctl.refused;
        while let Some(p) = self.channel.punts.pop() {
            let at = p.ts.saturating_add(latency);
            handler.on_punt(&p, &mut |cmd| {
                let env = Envelope {
                    seq: *seq,
                    at,
                    issued_ns: p.ts,
                    cmd,
                };
                *seq += 1;
                if ring.push(env).is_err() {
                    *refused += 1;
                }
            });
        }
    }

    /// Whether [`Switch::apply_commands`] has anything to look at: a held command, a queued
    /// one, or punts for the inline control. Without any it does nothing; the replay driver
    /// skips the call then (the emulator takes about 2.3 steps per hop, and a step's call with
    /// its two early returns was about 38 instructions).
    #[inline]
    pub fn commands_pending(&self) -> bool {
        self.held.is_some()
            || !self.channel.commands.is_empty()
            || (self.inline_control.is_some() && !self.channel.punts.is_empty())
    }

    /// Apply the commands that are due at `now` (at most [`COMMANDS_PER_POLL`]); `mono_now` is
    /// the monotonic clock for the latency histogram (live: `control::mono_ns()`; replay: `now`).
    /// Returns how many were applied or refused.
    pub fn apply_commands(&mut self, now: Nanos, mono_now: u64) -> usize {
        self.run_inline_control();
        if self.held.is_none() && self.channel.commands.is_empty() {
            return 0;
        }
        let mut n = 0;
        while n < COMMANDS_PER_POLL {
            let env = match self.held.take() {
                Some(e) => e,
                None => match self.channel.commands.pop() {
                    Some(e) => e,
                    None => break,
                },
            };
            if env.at > now {
                self.held = Some(env);
                break;
            }
            n += 1;
            self.st
                .ctl
                .latency_hist
                .record(mono_now.saturating_sub(env.issued_ns));
            let ok = self.apply_one(now, env.cmd);
            if ok {
                self.st.ctl.applied += 1;
            } else {
                self.st.ctl.refused += 1;
            }
        }
        n
    }

    fn apply_one(&mut self, now: Nanos, cmd: Command<L::Command>) -> bool {
        match cmd {
            Command::Pipeline(c) => {
                let mut ctx = ctx!(self, now);
                let r = self.pipeline.command(&mut ctx, c);
                self.flush_emitted(now);
                r.is_ok()
            }
            Command::Inject {
                port,
                recirculate,
                frame,
            } => {
                let Some(idx) = self.port_idx(port) else {
                    return false;
                };
                self.st.stats.injected += 1;
                let Some(mut pkt) = self.st.pool.alloc_from(&frame) else {
                    self.st.stats.drops.inc(DropReason::PoolEmpty);
                    return false;
                };
                let m = pkt.meta_mut();
                m.ingress_port = port;
                m.rx_ts = now;
                if recirculate {
                    self.recirculate(now, pkt);
                } else {
                    self.receive_one(idx, now, pkt);
                }
                true
            }
            Command::SetPortRate { port, rate_bps } => match self.port_idx(port) {
                Some(i) => {
                    self.st.ports[i].tm.set_rate(rate_bps);
                    self.st.ports[i].info.rate_bps = rate_bps;
                    self.st.infos[i].rate_bps = rate_bps;
                    true
                }
                None => false,
            },
            Command::Snapshot { .. } => true,
        }
    }

    /// Index of port `id`, if it exists.
    #[inline]
    pub fn port_idx(&self, id: u16) -> Option<usize> {
        match self.st.port_index.get(id as usize) {
            Some(&i) if i != NO_INDEX => Some(i as usize),
            _ => None,
        }
    }

    /// The ports, in index order.
    pub fn ports(&self) -> &[PortInfo] {
        &self.st.infos
    }

    pub fn pool(&mut self) -> &mut P {
        &mut self.st.pool
    }

    /// Run `f` with the pipeline and a stage context at engine time `now`: benchmarks and tests
    /// that drive one stage directly. What the stage emits is freed, not sent.
    pub fn with_ctx<R>(&mut self, now: Nanos, f: impl FnOnce(&mut L, &mut Ctx<'_, P>) -> R) -> R {
        let r = {
            let mut ctx = ctx!(self, now);
            f(&mut self.pipeline, &mut ctx)
        };
        while let Some(p) = self.st.emitted.pop() {
            self.st.stats.consumed += 1;
            self.st.pool.free(p);
        }
        r
    }

    pub fn pipeline(&self) -> &L {
        &self.pipeline
    }

    pub fn pipeline_mut(&mut self) -> &mut L {
        &mut self.pipeline
    }

    pub fn stats(&self) -> &SwitchStats {
        &self.st.stats
    }

    /// Count a frame that arrived but was dropped before the switch took it (e.g. the driver
    /// could not get a buffer for it): a drop by `r`, and an input of the ledger.
    pub fn note_drop(&mut self, r: DropReason) {
        self.st.stats.drops.inc(r);
        self.st.stats.arrived_dropped += 1;
    }

    /// Counters of port `idx`.
    pub fn port_stats(&self, idx: usize) -> Option<&PortStats> {
        self.st.ports.get(idx).map(|p| &p.stats)
    }

    /// Let every port's link clock lag `now` by up to `slack_ns` (live drivers; see
    /// [`TrafficManager::set_tx_slack`]). Replay keeps the default 0.
    pub fn set_tx_slack(&mut self, slack_ns: Nanos) {
        for p in &mut self.st.ports {
            p.tm.set_tx_slack(slack_ns);
        }
    }

    /// The traffic manager of port `idx` (its per-class counters).
    pub fn tm(&self, idx: usize) -> Option<&TrafficManager<P::Buf>> {
        self.st.ports.get(idx).map(|p| &p.tm)
    }

    /// The admission chain, if the spec configures any of its stages (the PFC generator, for
    /// the default chain).
    pub fn admission(&self) -> Option<&A> {
        self.admission.as_ref()
    }

    /// The recirculation port, if configured.
    pub fn recirc(&self) -> Option<&RecircPort<P::Buf>> {
        self.recirc.as_ref()
    }

    /// Process a burst of packets received on port `idx` at `now`. The burst is drained (the
    /// vector keeps its capacity).
    ///
    /// Stage by stage over the burst: the port's counters and every packet's metadata in one
    /// pass, MAC control taken out, then (for a pipeline with [`Pipeline::BURST_INGRESS`]) its
    /// [`Pipeline::ingress_burst`] over up to [`BURST`] packets at a time, then admission and
    /// enqueue of each packet in order, each followed by what the pipeline emitted while
    /// handling it; otherwise ingress, admission and enqueue one packet at a time.
    pub fn receive_burst(&mut self, idx: usize, now: Nanos, burst: &mut Vec<P::Buf>) {
        let Some(port) = self.st.ports.get_mut(idx) else {
            for p in burst.drain(..) {
                self.st.stats.drops.inc(DropReason::BadPort);
                self.st.stats.arrived_dropped += 1;
                self.st.pool.free(p);
            }
            return;
        };
        let id = port.info.id;
        let mut bytes = 0u64;
        let mut mac_control = false;
        for pkt in burst.iter_mut() {
            // Reading the EtherType brings each frame's first cache line in, ahead of ingress.
            bytes += pkt.len() as u64;
            mac_control |= is_mac_control(pkt.data());
            let m = pkt.meta_mut();
            m.ingress_port = id;
            m.rx_ts = now;
        }
        port.stats.rx_pkts += burst.len() as u64;
        port.stats.rx_bytes += bytes;
        if mac_control {
            // Rare (a link partner's PFC or PAUSE): taken out in place, order kept.
            let mut i = 0;
            while i < burst.len() {
                if self.mac_control(idx, now, burst[i].data()) {
                    let p = burst.remove(i);
                    self.st.stats.consumed += 1;
                    self.st.pool.free(p);
                } else {
                    i += 1;
                }
            }
        }
        if !L::BURST_INGRESS {
            // One packet at a time through ingress and admission, what its ingress emitted or
            // released right after it; the frames to an idle port share its bypass run over the
            // burst, as burst ingress's frames do (the port's checks made once, its counters
            // added once). A run changes its port's link clock and ready frames as each frame
            // alone does, so what a stage reads of the traffic managers (depths, queued bytes)
            // is the same; what could change what a run checked closes it: a frame queued on
            // its port, a PFC frame (every run), [`Ctx::hold_queue`] and
            // [`Ctx::release_queue`] (the port's run).
            for mut pkt in burst.drain(..) {
                let action = {
                    let mut ctx = ctx!(self, now);
                    self.pipeline.ingress(&mut ctx, &mut pkt)
                };
                match action {
                    Action::Forward => self.enqueue_in(now, pkt, true),
                    Action::Release => self.enqueue_in(now, pkt, false),
                    _ => self.act(now, pkt, action),
                }
                if !self.st.emitted.is_empty() {
                    self.flush_emitted_open(now);
                }
            }
            self.close_runs();
            return;
        }
        let mut actions = [Action::Forward; BURST];
        while !burst.is_empty() {
            let n = burst.len().min(BURST);
            // The packets decided (all but when one must wait for the admission of those before
            // it), at least one.
            let n = {
                let mut ctx = ctx!(self, now);
                self.pipeline
                    .ingress_burst(&mut ctx, &mut burst[..n], &mut actions[..n])
                    .clamp(1, n)
            };
            // Admission over the burst: the frames to one idle port share one bypass run (the
            // port's checks made once, its counters added once), one run open per port, so that
            // frames spread over several ports (a spraying ToR's) keep theirs; anything else that
            // could touch a traffic manager closes the runs first.
            for (i, (pkt, &action)) in burst.drain(..n).zip(actions.iter()).enumerate() {
                if action == Action::Forward {
                    self.enqueue_in(now, pkt, true);
                } else {
                    self.close_runs();
                    self.act(now, pkt, action);
                }
                if self.st.emit_owner.first().is_some_and(|&o| o <= i as u16) {
                    self.close_runs();
                    self.flush_emitted_upto_slow(now, i as u16);
                }
            }
            self.close_runs();
            // A pipeline that did not mark its packets leaves the rest here.
            self.flush_emitted(now);
        }
    }

    /// One received (or recirculated) packet through MAC control and the ingress pipeline.
    fn receive_one(&mut self, idx: usize, now: Nanos, pkt: P::Buf) {
        self.receive_one_kept(idx, now, pkt);
    }

    /// [`receive_one`](Self::receive_one), telling whether the packet left untouched every
    /// part of the switch that [`Switch::next_event_but_loop`] reads: it went round the loop
    /// again, or was dropped or consumed, with nothing emitted, no PFC action, no egress queue
    /// held or released by the stage. (What the stage changed of its own state shows in
    /// [`Pipeline::next_deadline`], which the caller asks again.) `receive_one` ignores the
    /// answer (the compiler leaves its computation out there).
    #[inline(always)]
    fn receive_one_kept(&mut self, idx: usize, now: Nanos, mut pkt: P::Buf) -> bool {
        if self.mac_control(idx, now, pkt.data()) {
            self.st.stats.consumed += 1;
            self.st.pool.free(pkt);
            return false;
        }
        let touches = self.st.tm_touches;
        let action = {
            let mut ctx = ctx!(self, now);
            self.pipeline.ingress(&mut ctx, &mut pkt)
        };
        let kept = matches!(
            action,
            Action::Recirculate | Action::Drop(_) | Action::Consume
        ) && self.st.emitted.is_empty()
            && self.st.tm_touches == touches
            && self.pfc_actions.is_empty();
        self.act(now, pkt, action);
        self.flush_emitted(now);
        kept
    }

    /// One packet back from the recirculation loop at `now`, if one is due: one turn of
    /// [`Switch::poll`]'s first loop (the packet through ingress as a received one). `None`:
    /// none is due. `Some(true)`: the pass changed nothing [`Switch::next_event_but_loop`]
    /// reads (see [`Switch::receive_one_kept`]), so a value of it asked before the pass still
    /// holds; `Some(false)`: it may have.
    ///
    /// For a virtual-time driver ([`crate::replay::Harness`]) that takes a step in which only
    /// the loop is due without the whole step around it; what is left of the step after such
    /// passes is [`Switch::poll`] (which takes the rest of the loop's packets due by `now`).
    #[inline]
    pub fn recirc_pass(&mut self, now: Nanos) -> Option<bool> {
        let pkt = self.recirc.as_mut()?.pop_ready(now)?;
        let Some((idx, pkt)) = self.recirc_ingress(pkt) else {
            return Some(false);
        };
        Some(self.receive_one_kept(idx, now, pkt))
    }

    /// A packet back from the recirculation loop, counted, with the index of the port it came
    /// in on (where it enters ingress again). `None` when the switch has no such port: the
    /// packet is dropped and counted as [`DropReason::BadPort`].
    #[inline]
    fn recirc_ingress(&mut self, pkt: P::Buf) -> Option<(usize, P::Buf)> {
        self.st.stats.recirculated += 1;
        match self.port_idx(pkt.meta().ingress_port) {
            Some(idx) => Some((idx, pkt)),
            None => {
                self.st.stats.drops.inc(DropReason::BadPort);
                self.st.pool.free(pkt);
                None
            }
        }
    }

    /// When the recirculation loop's next packet is back ([`Switch::next_event`]'s part for
    /// the loop); `None`: empty or no loop.
    #[inline]
    pub fn recirc_next(&self) -> Option<Nanos> {
        self.recirc.as_ref().and_then(|r| r.next_ready())
    }

    /// The pipeline's next timer ([`Pipeline::next_deadline`]).
    #[inline]
    pub fn pipeline_deadline(&self) -> Option<Nanos> {
        self.pipeline.next_deadline()
    }

    /// Carry out the ingress pipeline's decision for a packet.
    #[inline(always)]
    fn act(&mut self, now: Nanos, pkt: P::Buf, action: Action) {
        match action {
            Action::Forward => self.enqueue(now, pkt, true),
            Action::Release => self.enqueue(now, pkt, false),
            Action::Drop(r) => {
                self.st.stats.drops.inc(r);
                self.st.pool.free(pkt);
            }
            Action::Recirculate => self.recirculate(now, pkt),
            Action::Consume => {
                self.st.stats.consumed += 1;
                self.st.pool.free(pkt);
            }
            Action::Hold => {
                let mut ctx = ctx!(self, now);
                if let Err(pkt) = self.pipeline.hold(&mut ctx, pkt) {
                    self.st.stats.drops.inc(DropReason::Pipeline);
                    self.st.pool.free(pkt);
                }
            }
        }
    }

    /// 802.3 MAC control (EtherType 0x8808, untagged, as the standard requires): PFC and PAUSE
    /// are honored by this port's traffic manager and never forwarded. Returns true when the frame
    /// was MAC control (consumed).
    fn mac_control(&mut self, idx: usize, now: Nanos, d: &[u8]) -> bool {
        if !is_mac_control(d) {
            return false;
        }
        let port = &mut self.st.ports[idx];
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

    /// Honor a PFC or PAUSE frame received on port `idx` by another switch (a reload's new
    /// switch, while this one drains its queues: the link's pauses apply to both). Counts the
    /// frame in `pfc_rx` only, not as received; `false` when `frame` is not MAC control.
    pub fn honor_mac_control(&mut self, idx: usize, now: Nanos, frame: &[u8]) -> bool {
        idx < self.st.ports.len() && self.mac_control(idx, now, frame)
    }

    /// The first port index `from` or later that [`Switch::port_has_frames`], if any: one scan
    /// of the ports for a driver that visits those with frames in order (the replay driver
    /// asked port by port, a bounds check and a call's worth more per port and step).
    #[inline]
    pub fn next_port_with_frames(&self, from: usize) -> Option<usize> {
        let next = self
            .st
            .ports
            .get(from..)?
            .iter()
            .position(|p| !p.ready.is_empty() || !p.tm.is_empty())
            .map(|k| from + k);
        #[cfg(debug_assertions)]
        assert_eq!(
            next,
            (from..self.st.ports.len()).find(|&i| self.port_has_frames(i)),
            "next_port_with_frames({from})"
        );
        next
    }

    /// As [`Switch::next_port_with_frames`], leaving out the ports whose link is busy past
    /// `now` with nothing past the bypass: [`Switch::transmit`] at `now` would hand over
    /// nothing there and change nothing (the traffic manager's dequeue returns before looking
    /// at a queue while the link is busy), so a driver's transmit stage need not ask. A port
    /// whose link is free is found even if its queues cannot send (paused, held): asking its
    /// scheduler may change its state (a deficit round), as the driver always did. In the
    /// emulator a long link's port is usually busy with frames queued: a step's call for it
    /// was about 150 instructions for nothing.
    #[inline]
    pub fn next_port_to_transmit(&self, from: usize, now: Nanos) -> Option<usize> {
        let ports = self.st.ports.get(from..)?;
        for (k, p) in ports.iter().enumerate() {
            if !p.ready.is_empty() || (!p.tm.is_empty() && p.tm.busy_until() <= now) {
                return Some(from + k);
            }
            // What is left out has nothing to send by `now`.
            debug_assert!(
                p.tm.is_empty() || p.tm.next_event(now).is_none_or(|t| t > now),
                "a port left out with frames due at {now}"
            );
        }
        None
    }

    /// Whether port `idx` has frames waiting to be sent (queued, or past the empty-queue bypass).
    #[inline]
    pub fn port_has_frames(&self, idx: usize) -> bool {
        self.st
            .ports
            .get(idx)
            .is_some_and(|p| !p.ready.is_empty() || !p.tm.is_empty())
    }

    fn recirculate(&mut self, now: Nanos, pkt: P::Buf) {
        match self.recirc.as_mut() {
            Some(r) => {
                if let Err(p) = r.push(pkt, now) {
                    self.st.stats.drops.inc(DropReason::RecircFull);
                    self.st.pool.free(p);
                }
            }
            None => {
                self.st.stats.drops.inc(DropReason::Pipeline);
                self.st.pool.free(pkt);
            }
        }
    }

    #[inline(always)]
    fn flush_emitted(&mut self, now: Nanos) {
        if !self.st.emitted.is_empty() {
            self.flush_emitted_slow(now);
        }
    }

    #[inline(never)]
    fn flush_emitted_slow(&mut self, now: Nanos) {
        self.flush_emitted_open(now);
        self.close_runs();
    }

    /// [`flush_emitted_slow`](Self::flush_emitted_slow) leaving the bypass runs open.
    #[inline(never)]
    fn flush_emitted_open(&mut self, now: Nanos) {
        // In the order emitted (a pipeline's held packets of one flow must not be reordered).
        // The list is moved out and back: no allocation, and `enqueue` never emits. Consecutive
        // frames to one idle port share a bypass run, as a received burst's do (the packets a
        // pipeline releases from its own queues, `Ctx::inject`, come here a poll's worth at a
        // time): the port's checks made once, its counters added once; admission stays per
        // frame.
        let mut list = core::mem::take(&mut self.st.emitted);
        for p in list.drain(..) {
            self.enqueue_in(now, p, false);
        }
        self.st.emitted = list;
        self.st.emit_owner.clear();
    }

    /// Enqueue what was emitted while handling the burst's packets `0..=i` (in emission order).
    /// The caller tests first that something is (`emit_owner`'s first entry at most `i`).
    #[inline(never)]
    fn flush_emitted_upto_slow(&mut self, now: Nanos, i: u16) {
        let k = self.st.emit_owner.iter().take_while(|&&o| o <= i).count();
        let mut list = core::mem::take(&mut self.st.emitted);
        for p in list.drain(..k) {
            self.enqueue_in(now, p, false);
        }
        self.close_runs();
        self.st.emitted = list;
        self.st.emit_owner.drain(..k);
    }

    /// Admission (shared buffer, PFC headroom) and enqueue on the egress traffic manager.
    /// `account`: PFC-account the bytes to (ingress port, class) (received packets only).
    fn enqueue(&mut self, now: Nanos, pkt: P::Buf, account: bool) {
        self.enqueue_in(now, pkt, account);
        self.close_runs();
    }

    /// Add every open bypass run's frames to its port's counters, and close it.
    #[inline]
    fn close_runs(&mut self) {
        let mut m = core::mem::take(&mut self.open_low);
        while m != 0 {
            let e = m.trailing_zeros() as usize;
            m &= m - 1;
            if let Some(port) = self.st.ports.get_mut(e) {
                Self::close_port_run(port);
            }
        }
        if !self.open_high.is_empty() {
            self.close_high_runs();
        }
    }

    #[inline(never)]
    fn close_high_runs(&mut self) {
        for e in self.open_high.drain(..) {
            if let Some(port) = self.st.ports.get_mut(e) {
                Self::close_port_run(port);
                port.run_listed = false;
            }
        }
    }

    /// [`PortState::close_run`].
    #[inline]
    fn close_port_run(port: &mut PortState<P::Buf>) {
        port.close_run();
    }

    /// [`enqueue`](Self::enqueue) within a burst's admission: a frame that finds its port idle
    /// takes the empty-queue bypass through the port's run (opened on the frame's queue if it is
    /// not yet; the port's run of another queue is closed first), so that the frames of a burst
    /// to one idle port are checked and counted as a run, also when frames to other ports come
    /// between them (a run checks and changes its own port's traffic manager only). Every other
    /// step is the same as for a frame alone; the port's run is closed before the port's
    /// traffic manager queues a frame, and every run before anything that could change what
    /// they checked (a PFC frame queued, [`Switch::close_runs`]).
    #[inline(always)]
    fn enqueue_in(&mut self, now: Nanos, mut pkt: P::Buf, account: bool) {
        let m = *pkt.meta();
        let Some(e) = self.port_idx(m.egress_port) else {
            self.st.stats.drops.inc(DropReason::BadPort);
            self.st.pool.free(pkt);
            return;
        };
        let len = pkt.len() as u64;
        if len > self.st.ports[e].info.mtu as u64 {
            self.st.stats.drops.inc(DropReason::TooBig);
            self.st.pool.free(pkt);
            return;
        }
        if self.st.stats.buffer_bytes + len > self.shared_limit {
            self.st.stats.drops.inc(DropReason::QueueFull);
            self.st.pool.free(pkt);
            return;
        }
        let class = m.class.min(NUM_CLASSES as u8 - 1);
        pkt.meta_mut().class = class;
        let ingress = if account {
            self.port_idx(m.ingress_port)
        } else {
            None
        };
        if let (Some(a), Some(i)) = (self.admission.as_mut(), ingress) {
            match a.on_enqueue(i as u16, class, len, now, &mut self.pfc_actions) {
                None => {}
                Some(Admit::Accept) => pkt.meta_mut().flags |= FLAG_PFC_ACCOUNTED,
                Some(Admit::Drop(r)) => {
                    self.st.stats.drops.inc(r);
                    self.st.pool.free(pkt);
                    self.send_pfc_actions_in(now);
                    return;
                }
            }
        }
        let queue = pkt.meta().egress_queue();
        let port = &mut self.st.ports[e];
        if port.run.as_ref().is_some_and(|r| r.queue() != queue) {
            Self::close_port_run(port);
        }
        let pkt = if port.ready.len() < BYPASS_RING {
            if port.run.is_none() {
                port.run = port.tm.open_run(queue, now);
                if port.run.is_some() {
                    if e < 64 {
                        self.open_low |= 1 << e;
                    } else if !port.run_listed {
                        port.run_listed = true;
                        self.open_high.push(e);
                    }
                }
            }
            match port.run.as_mut() {
                Some(r) => match port.tm.bypass_in_run(r, pkt, now) {
                    Ok(p) => {
                        match port.ready.push_back(p) {
                            Ok(()) => {
                                port.run_bypassed += 1;
                                self.st.stats.buffer_in(len);
                            }
                            // Unreachable (room checked above), but never lose a frame
                            // uncounted.
                            Err(p) => {
                                self.release_pfc(now, &p);
                                self.st.stats.drops.inc(DropReason::QueueFull);
                                self.st.pool.free(p);
                            }
                        }
                        self.send_pfc_actions_in(now);
                        return;
                    }
                    Err(p) => {
                        // The link is busy or the frame does not fit: it takes the queue, and
                        // the port is no longer idle.
                        Self::close_port_run(port);
                        p
                    }
                },
                None => pkt,
            }
        } else {
            pkt
        };
        // The frame is queued: the port's run still open (its bypassed frames fill the ring)
        // ends.
        let port = &mut self.st.ports[e];
        Self::close_port_run(port);
        match port.tm.enqueue(pkt, now) {
            Ok(_) => {
                self.st.stats.buffer_in(len);
            }
            Err((p, r)) => {
                self.release_pfc(now, &p);
                self.st.stats.drops.inc(r);
                self.st.pool.free(p);
            }
        }
        self.send_pfc_actions_in(now);
    }

    /// [`send_pfc_actions`](Self::send_pfc_actions) with bypass runs open: a PFC frame goes on
    /// a port's control queue, which a run checked was empty, so the runs are closed first.
    #[inline(always)]
    fn send_pfc_actions_in(&mut self, now: Nanos) {
        if !self.pfc_actions.is_empty() {
            self.close_runs();
            self.send_pfc_actions_slow(now);
        }
    }

    /// The packet leaves the buffer: give its bytes back to PFC accounting.
    #[inline]
    fn release_pfc(&mut self, now: Nanos, pkt: &P::Buf) {
        let m = pkt.meta();
        if m.flags & FLAG_PFC_ACCOUNTED == 0 {
            return;
        }
        self.release_pfc_bytes(now, m.ingress_port, m.class, pkt.len() as u64);
    }

    /// Give `bytes` of (ingress port id, class) back to the admission stage that accounted
    /// them: what [`release_pfc`](Self::release_pfc) does for one packet, or for a run of
    /// packets of the same pair leaving together ([`transmit_bypassed`](Self::transmit_bypassed)).
    #[inline]
    fn release_pfc_bytes(&mut self, now: Nanos, ingress_port: u16, class: u8, bytes: u64) {
        let ingress = self.port_idx(ingress_port);
        if let (Some(a), Some(i)) = (self.admission.as_mut(), ingress) {
            a.on_dequeue(i as u16, class, bytes, now, &mut self.pfc_actions);
        }
    }

    /// Turn pending PFC actions into 802.1Qbb frames on the control queue of their port.
    /// Called after every packet: the usual nothing-to-do test is inlined, the work is not.
    #[inline(always)]
    fn send_pfc_actions(&mut self, now: Nanos) {
        if !self.pfc_actions.is_empty() {
            self.send_pfc_actions_slow(now);
        }
    }

    #[inline(never)]
    fn send_pfc_actions_slow(&mut self, now: Nanos) {
        // ActionBuf is Copy-sized and small; index instead of borrowing across the loop.
        for k in 0..self.pfc_actions.len() {
            let a: PfcAction = self.pfc_actions.as_slice()[k];
            self.send_pfc(now, a);
        }
        self.pfc_actions.clear();
    }

    fn send_pfc(&mut self, now: Nanos, a: PfcAction) {
        let idx = a.port as usize;
        let Some(port) = self.st.ports.get_mut(idx) else {
            return;
        };
        self.st.stats.control_generated += 1;
        let Some(mut pkt) = self.st.pool.alloc() else {
            self.st.stats.drops.inc(DropReason::PoolEmpty);
            return;
        };
        let Some(buf) = pkt.append(wpfc::PFC_FRAME_LEN) else {
            self.st.stats.drops.inc(DropReason::PoolEmpty);
            self.st.pool.free(pkt);
            return;
        };
        if wpfc::build_pfc(buf, port.info.mac, a.class_enable, a.times).is_err() {
            // Unreachable (the buffer was sized for the frame), but never lose one uncounted.
            self.st.stats.drops.inc(DropReason::Pipeline);
            self.st.pool.free(pkt);
            return;
        }
        let m = pkt.meta_mut();
        m.flags |= FLAG_CONTROL | FLAG_GENERATED;
        m.egress_port = port.info.id;
        m.class = 7;
        match port.tm.enqueue_control(pkt, now) {
            Ok(()) => port.stats.pfc_tx += 1,
            Err((p, r)) => {
                self.st.stats.drops.inc(r);
                self.st.pool.free(p);
            }
        }
    }

    /// Time-driven work at `now`: recirculated packets coming back, PFC refreshes, pipeline timers.
    pub fn poll(&mut self, now: Nanos) {
        while let Some(pkt) = self.recirc.as_mut().and_then(|r| r.pop_ready(now)) {
            if let Some((idx, pkt)) = self.recirc_ingress(pkt) {
                self.receive_one(idx, now, pkt);
            }
        }
        if let Some(a) = self.admission.as_mut() {
            a.on_time(Timer::Loop, now, &mut self.pfc_actions);
            self.send_pfc_actions(now);
        }
        self.poll_slot_timer(now);
        if self.pipeline.next_deadline().is_some_and(|t| t <= now) {
            let mut ctx = ctx!(self, now);
            self.pipeline.on_time(&mut ctx);
            self.flush_emitted(now);
        }
    }

    /// Whether the switch has a slot timer (an admission stage's, [`Timer::Slot`]): a period of
    /// a few microseconds that a live worker checks between small chunks of its bursts
    /// ([`Switch::poll_slot_timer`]), not once per loop iteration.
    pub fn has_slot_timer(&self) -> bool {
        self.admission
            .as_ref()
            .is_some_and(|a| a.has_timer(Timer::Slot))
    }

    /// When the slot timer ([`Switch::has_slot_timer`]) is next due; `None` while it is
    /// disarmed (every governed pair at rest) or there is none.
    #[inline]
    pub fn slot_deadline(&self) -> Option<Nanos> {
        self.admission
            .as_ref()
            .and_then(|a| a.next_deadline(Timer::Slot))
    }

    /// The slot timer's work if it is due at `now` (its PFC frames queued for sending); the
    /// rest of [`Switch::poll`] is left for the next call of that. `now` must not go backwards.
    #[inline]
    pub fn poll_slot_timer(&mut self, now: Nanos) {
        if let Some(a) = self.admission.as_mut() {
            a.on_time(Timer::Slot, now, &mut self.pfc_actions);
            self.send_pfc_actions(now);
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
        let mut n = self.transmit_bypassed(idx, now, max, tx);
        while n < max {
            let Some(port) = self.st.ports.get_mut(idx) else {
                return n;
            };
            let id = port.info.id;
            let Some(mut pkt) = port.ready.pop_front().or_else(|| port.tm.dequeue(now)) else {
                break;
            };
            let len = pkt.len() as u64;
            let data = pkt.meta().flags & FLAG_CONTROL == 0;
            if data {
                self.st.stats.buffer_bytes = self.st.stats.buffer_bytes.saturating_sub(len);
                self.release_pfc(now, &pkt);
            }
            if data && self.pipeline.egress_active_on(id) {
                let mut ctx = ctx!(self, now);
                let action = self.pipeline.egress(&mut ctx, &mut pkt);
                if action != Action::Forward {
                    let r = match action {
                        Action::Drop(r) => r,
                        _ => DropReason::Pipeline,
                    };
                    self.st.stats.drops.inc(r);
                    self.st.pool.free(pkt);
                    self.send_pfc_actions(now);
                    self.flush_emitted(now);
                    continue;
                }
            }
            // An egress stage may have grown or shrunk the frame (INT): the wire time and the
            // port's bytes are those of what is sent.
            let sent = pkt.len() as u64;
            let port = &mut self.st.ports[idx];
            if sent != len {
                port.tm.resize_tx(len, sent);
            }
            let st = &mut port.stats;
            st.tx_pkts += 1;
            st.tx_bytes += sent;
            tx(pkt);
            n += 1;
            self.send_pfc_actions(now);
            self.flush_emitted(now);
        }
        n
    }

    /// The bypassed frames of port `idx` (at most `max`) as one burst: what
    /// [`transmit`](Self::transmit)'s loop does with them one at a time, with the per-frame
    /// bookkeeping done once for the burst. The port's counters take the burst's sums; the
    /// admission stages get back the bytes of each run of frames of one (ingress port, class) in one
    /// call, and the PFC frames that release causes are queued when the run ends, before
    /// anything an egress stage emitted is enqueued, or after the burst. Same result as frame by
    /// frame: the counts only fall, an XON is due at the same `now` whatever the steps, a PFC
    /// frame queued on this port's control queue leaves after the bypassed frames either way
    /// (they go first, [`PortState::ready`]), and an emitted frame meets the control queues as
    /// it would. Only an accounting underflow (never expected) is counted once per run instead
    /// of once per frame. Frames the egress stage drops are not counted in the result, as in
    /// `transmit`.
    fn transmit_bypassed(
        &mut self,
        idx: usize,
        now: Nanos,
        max: usize,
        tx: &mut impl FnMut(P::Buf),
    ) -> usize {
        let Some(port) = self.st.ports.get(idx) else {
            return 0;
        };
        let k = port.ready.len().min(max);
        if k == 0 {
            return 0;
        }
        let egress = self.pipeline.egress_active_on(port.info.id);
        let mut bytes = 0u64;
        let mut run = ReleaseRun::default();
        let mut sent = 0usize;
        if !egress {
            // No egress stage: nothing is emitted and nothing dropped here, so the shared buffer
            // takes the burst's sum too.
            let mut data_bytes = 0u64;
            for _ in 0..k {
                let Some(pkt) = self.st.ports[idx].ready.pop_front() else {
                    break;
                };
                let len = pkt.len() as u64;
                let m = pkt.meta();
                bytes += len;
                if m.flags & FLAG_CONTROL == 0 {
                    data_bytes += len;
                    if let Some((i, c, b)) = run.add(m, len) {
                        self.release_pfc_bytes(now, i, c, b);
                        self.send_pfc_actions(now);
                    }
                }
                tx(pkt);
                sent += 1;
            }
            self.st.stats.buffer_bytes = self.st.stats.buffer_bytes.saturating_sub(data_bytes);
        } else {
            for _ in 0..k {
                let Some(mut pkt) = self.st.ports[idx].ready.pop_front() else {
                    break;
                };
                let len = pkt.len() as u64;
                let m = pkt.meta();
                if m.flags & FLAG_CONTROL != 0 {
                    bytes += len;
                    tx(pkt);
                    sent += 1;
                    continue;
                }
                // Before egress, as `transmit` does: what it emits meets the buffer as it is.
                self.st.stats.buffer_bytes = self.st.stats.buffer_bytes.saturating_sub(len);
                if let Some((i, c, b)) = run.add(m, len) {
                    self.release_pfc_bytes(now, i, c, b);
                    self.send_pfc_actions(now);
                }
                let action = {
                    let mut ctx = ctx!(self, now);
                    self.pipeline.egress(&mut ctx, &mut pkt)
                };
                if action == Action::Forward {
                    // An egress stage may have grown or shrunk the frame (INT): the wire time
                    // and the port's bytes are those of what is sent.
                    let out = pkt.len() as u64;
                    if out != len {
                        self.st.ports[idx].tm.resize_tx(len, out);
                    }
                    bytes += out;
                    tx(pkt);
                    sent += 1;
                } else {
                    let r = match action {
                        Action::Drop(r) => r,
                        _ => DropReason::Pipeline,
                    };
                    self.st.stats.drops.inc(r);
                    self.st.pool.free(pkt);
                }
                if !self.st.emitted.is_empty() {
                    if let Some((i, c, b)) = run.0.take() {
                        self.release_pfc_bytes(now, i, c, b);
                    }
                    self.send_pfc_actions(now);
                    self.flush_emitted_slow(now);
                }
            }
        }
        let st = &mut self.st.ports[idx].stats;
        st.tx_pkts += sent as u64;
        st.tx_bytes += bytes;
        if let Some((i, c, b)) = run.0 {
            self.release_pfc_bytes(now, i, c, b);
        }
        self.send_pfc_actions(now);
        sent
    }

    /// Copy every counter into `snap` (reusing its memory).
    pub fn snapshot_into(&self, now: Nanos, snap: &mut SwitchSnapshot) {
        snap.taken_at = now;
        if snap.ports.len() != self.st.ports.len() {
            snap.ports = self
                .st
                .ports
                .iter()
                .map(|p| PortSnapshot {
                    id: p.info.id,
                    name: p.info.name.clone(),
                    ..PortSnapshot::default()
                })
                .collect();
        }
        for (s, p) in snap.ports.iter_mut().zip(self.st.ports.iter()) {
            s.stats = p.stats;
            for (c, cs) in s.classes.iter_mut().enumerate() {
                *cs = p.tm.class_stats(c as u8);
            }
        }
        snap.stats.clone_from(&self.st.stats);
        snap.control.clone_from(&self.st.ctl);
        A::snapshot_into(self.admission.as_ref(), snap);
        snap.pipeline.clear();
        self.pipeline
            .counters(&mut |n, v| snap.pipeline.push((n, v)));
        snap.tables.clear();
        self.pipeline.tables(&mut |n, t| snap.tables.push((n, t)));
        snap.command_ring = (
            self.channel.commands.len(),
            self.channel.commands.capacity(),
        );
        snap.punt_ring = (self.channel.punts.len(), self.channel.punts.capacity());
        snap.held_bytes = self.pipeline.held_bytes();
        snap.queued_pkts = self.buffered_packets();
    }

    /// The earliest time after which `poll` or `transmit` has work without new input.
    pub fn next_event(&self, now: Nanos) -> Option<Nanos> {
        self.next_event_parts(now, true, true)
    }

    /// [`Switch::next_event`] without its parts for the recirculation loop
    /// ([`Switch::recirc_next`]) and the pipeline's timer ([`Switch::pipeline_deadline`]):
    /// the ports, the admission stages' timers and the commands. A driver keeps it across recirculation passes
    /// that leave it as it was ([`Switch::recirc_pass`]); the minimum of the three is
    /// `next_event`.
    pub fn next_event_but_loop(&self, now: Nanos) -> Option<Nanos> {
        self.next_event_parts(now, false, false)
    }

    #[inline(always)]
    fn next_event_parts(&self, now: Nanos, recirc: bool, timer: bool) -> Option<Nanos> {
        let mut t: Option<Nanos> = None;
        let mut take = |x: Option<Nanos>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        // Most ports are idle at most steps (the emulator asks at every one): an idle port
        // costs two emptiness checks, not a call into its traffic manager. A port with
        // bypassed frames is due now, the earliest its queues could be.
        for p in &self.st.ports {
            if !p.ready.is_empty() {
                take(Some(now));
            } else if !p.tm.is_empty() {
                take(p.tm.next_event(now));
            }
        }
        if recirc {
            take(self.recirc.as_ref().and_then(|r| r.next_ready()));
        }
        if let Some(a) = self.admission.as_ref() {
            take(a.next_deadline(Timer::Loop));
            take(a.next_deadline(Timer::Slot));
        }
        if timer {
            take(self.pipeline.next_deadline());
        }
        // A held command blocks the ring behind it (commands apply in order), so only its time
        // counts; otherwise queued commands (and punts for the inline control) are due now.
        match &self.held {
            Some(e) => take(Some(e.at)),
            None if !self.channel.commands.is_empty() => take(Some(now)),
            None => {}
        }
        if self.inline_control.is_some() && !self.channel.punts.is_empty() {
            take(Some(now));
        }
        t
    }

    /// Frame counts for packet conservation ([`crate::conservation`]): balanced whenever no
    /// frame was lost without a counter. Cheap (no allocation): tests check it after every step.
    pub fn ledger(&self) -> Ledger {
        let (received, sent) = self.st.ports.iter().fold((0, 0), |(r, t), p| {
            (r + p.stats.rx_pkts, t + p.stats.tx_pkts)
        });
        self.st
            .stats
            .ledger(received, sent, self.buffered_packets())
    }

    /// Packets held in egress queues (control frames included), bypassed frames not yet handed to
    /// `transmit`, the recirculation loop and the pipeline's own queues.
    pub fn buffered_packets(&self) -> u64 {
        let q: u64 = self
            .st
            .ports
            .iter()
            .map(|p| p.tm.queued_pkts() + p.ready.len() as u64)
            .sum();
        q + self.recirc.as_ref().map_or(0, |r| r.len() as u64) + self.pipeline.held_packets()
    }

    /// Packets in egress queues, the recirculation loop and the pipeline's own queues.
    pub fn buffered_bytes(&self) -> u64 {
        self.st.stats.buffer_bytes
            + self.recirc.as_ref().map_or(0, |r| r.bytes())
            + self.pipeline.held_bytes()
    }
}

/// `PORT_NONE` re-exported for pipelines that build generated packets.
pub const NO_PORT: u16 = PORT_NONE;
