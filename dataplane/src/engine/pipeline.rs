//! The pipeline API: what a pipeline implements ([`Pipeline`]), what it decides for a packet
//! ([`Action`]), and what its stages see of the switch ([`Ctx`]).

use super::*;

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
    /// (a per-flow queue's cut-through), without the round trip through [`Pipeline::hold`] and the emit
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
    /// for that port's frames, and send its bypassed frames as one burst (a ToR whose
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

    /// The link of port `port` (its id) went down (`up` false) or came back up
    /// ([`Switch::set_link`]): a forwarding stage stops choosing the port where it has a choice
    /// (an ECMP group's members). Not per packet.
    fn on_link(&mut self, _port: u16, _up: bool) {}

    /// The pipeline's own counters, by stable name (`baseline.routed`, ...), for metrics.
    fn counters(&self, _out: &mut dyn FnMut(&'static str, u64)) {}

    /// The pipeline's match-action tables, by name, for metrics.
    fn tables(&self, _out: &mut dyn FnMut(&'static str, TableCounters)) {}
}

crate::counters! {
    /// What metrics show of one match-action table.
    #[derive(Copy)]
    pub struct TableCounters: "table" {
        pub hits: u64,
        pub misses: u64,
        pub entries: u64 => max,
        pub capacity: u64 => max,
        pub full_events: u64,
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
    pub(super) current: u16,
    pub(super) st: &'a mut CtxState<P>,
}

/// The part of a [`Switch`] its stages see through [`Ctx`], one field of the switch so that a
/// context borrows it whole while `Switch::pipeline` stays free to be called with it.
pub(super) struct CtxState<P: BufPool> {
    /// Where generated packets come from.
    pub(super) pool: P,
    pub(super) ports: Vec<PortState<P::Buf>>,
    pub(super) infos: Vec<PortInfo>,
    /// Port id -> index into `ports` (`u16::MAX` = no such port).
    pub(super) port_index: Vec<u16>,
    pub(super) emitted: Vec<P::Buf>,
    /// For each packet in `emitted`, the index in the burst of the packet whose processing
    /// emitted it (`current` at the time).
    pub(super) emit_owner: Vec<u16>,
    pub(super) stats: SwitchStats,
    /// The channel's punt ring (the worker's handle on it).
    pub(super) punts: Arc<crossbeam_queue::ArrayQueue<Punt>>,
    pub(super) ctl: ControlStats,
    /// Times a stage changed a traffic manager through its context ([`Ctx::hold_queue`],
    /// [`Ctx::release_queue`]): [`Switch::recirc_pass`] tells by it whether a pass left the
    /// ports as they were.
    pub(super) tm_touches: u32,
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
    /// every packet it sends toward its DC).
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
