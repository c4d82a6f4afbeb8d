//! NDT: Near-Destination Throttling at the destination ESW (paper 003, section III-D).
//!
//! - **Flow state controller**: the egress stage overwrites the timestamp of inter-DC data with
//!   its egress time ([`Ndt::on_egress`] is told; the ESW writes it); returning ACKs carry it
//!   back, so `RTT_dst = now - ts` measures the destination DC alone; the Flow State Table marks
//!   a flow Congested when `RTT_dst > T_dst_thresh`, Normal otherwise, on every ACK
//!   ([`Ndt::on_ack`]).
//! - **Queue manager** ([`Ndt::on_data`]): a Congested flow's packets go to the port's Controlled
//!   queue, a Normal flow's to its class queue (Normal); the traffic manager serves the two with
//!   WRR `N_throttle:1` (weights set by the mechanism on the DC ports), work-conserving.
//! - **Out-of-order prevention** (docs/reflex.md), with tickets per port and queue: a Normal
//!   flow whose last packet has not left the Controlled queue yet stays there (section III-D 2);
//!   a Congested flow whose last packet has not left the Normal queue yet goes to the
//!   Controlled queue, which is held until that packet has left (the paper is silent on this
//!   direction; our choice).
//! - **Pause** ([`Ndt::evaluate_pause`]): per DC port, when `congested / active > alpha` the
//!   Controlled queue is held until an ACK shows relief (it measured the destination DC below
//!   `T_dst_thresh`, or the share is back at alpha or below when it arrives) or `T_maxpause`.
//!   After a timeout it re-arms only once the share has fallen to alpha or below.
//!
//! State is bounded: the Flow State Table has a capacity (a new flow when it is full goes
//! Normal, counted) and an idle timeout that defines the active flows.

use super::FlowKey;
use longhaul_dataplane::asic::table::{ExactTable, TableConfig, WhenFull};
use longhaul_dataplane::engine::{Ctx, TableCounters};
use longhaul_dataplane::packet::BufPool;
use longhaul_dataplane::time::Nanos;

/// NDT's parameters (`[reflex.ndt]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NdtParams {
    pub t_dst_thresh_ns: Nanos,
    pub alpha: f64,
    pub t_maxpause_ns: Nanos,
    pub controlled_queue: u8,
    /// The Normal queue: the class queue of NDT's data class.
    pub normal_queue: u8,
    pub flow_capacity: usize,
    pub active_timeout_ns: Nanos,
}

/// A flow's state in the Flow State Table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowState {
    Normal,
    Congested,
}

/// One Flow State Table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FstEntry {
    pub state: FlowState,
    /// The DC port its data leaves on (where it counts for alpha).
    pub port: u16,
    /// The ticket of its last packet sent to the Controlled queue, if any.
    pub last_ticket: Option<u32>,
    /// The ticket of its last packet sent to the Normal queue, while Normal (taken when it
    /// turns Congested).
    pub last_normal_ticket: Option<u32>,
}

/// Where [`Ndt::on_data`] sends a data packet, with the ticket the ESW puts in its metadata
/// (`meta.user`; [`NO_TICKET`] for a flow the table could not take).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NdtQueue {
    /// The packet's class queue.
    Normal(u32),
    /// The port's Controlled queue.
    Controlled(u32),
}

/// The ticket of a packet that has none (0 is never handed out).
pub const NO_TICKET: u32 = 0;

/// Per DC port: the alpha counts, the Controlled queue's tickets, the pause.
#[derive(Clone, Copy, Debug, Default)]
struct PortNdt {
    /// "Total active flows" (section III-D 3, which does not define them; our choice,
    /// docs/reflex.md): the port's flows in the Flow State Table, i.e. with a data packet or an
    /// ACK in the last `active_timeout_ns`.
    active: u32,
    /// "Flows mapped to the Controlled Queue" (section III-D 3): those in state Congested. A
    /// Normal flow whose older packets still wait in the Controlled queue (out-of-order
    /// prevention, III-D 2) is not counted: our choice, docs/reflex.md.
    congested: u32,
    /// The Controlled queue: the last ticket handed out, and the ticket of the last packet that
    /// left the queue.
    enq_ticket: u32,
    deq_ticket: u32,
    /// The same for the Normal queue (packets NDT placed there).
    normal_enq_ticket: u32,
    normal_deq_ticket: u32,
    /// The order barrier (a flow turned Congested while its packets waited in the Normal
    /// queue): once the `barrier_ahead` packets queued in the Controlled queue before the
    /// flow's first one there have left, the Controlled queue is held until the Normal queue's
    /// packet with this ticket has left, or until `barrier_until` at the latest.
    barrier: Option<u32>,
    barrier_ahead: u32,
    barrier_until: Nanos,
    paused_until: Option<Nanos>,
    /// When the current pause began.
    paused_at: Nanos,
    /// A pause may start (false after a T_maxpause timeout until the share falls back).
    disarmed: bool,
}

longhaul_dataplane::counters! {
    /// NDT's counters (`reflex.ndt.*`).
    #[derive(Copy)]
    pub struct NdtStats: "reflex.ndt" {
        pub data: u64,
        /// Packets sent to the Controlled queue (Congested flows and held Normal ones).
        pub to_controlled: u64,
        /// Of those, packets of Normal flows held for order.
        pub ooo_held: u64,
        /// Packets of Congested flows sent to the Controlled queue while older packets of theirs
        /// waited in the Normal queue: the Controlled queue was held behind them (the barrier).
        pub ooo_barrier: u64,
        /// Barriers that ended at their time limit (`t_maxpause_ns`) rather than when their packet
        /// left (it was refused by the traffic manager and the Normal queue never emptied).
        pub ooo_barrier_timeout: u64,
        pub acks: u64,
        pub ack_unknown_flow: u64,
        /// ACK verdicts.
        pub congested: u64,
        pub normal: u64,
        pub flow_table_full: u64,
        pub pauses: u64,
        pub pause_relief: u64,
        pub pause_timeout: u64,
        /// Total time the Controlled queues were held, in ns (every port).
        pub paused_ns: u64,
        pub ts_rewritten: u64,
    }
}

/// Idle flows aged out per packet at most.
const EXPIRE_PER_PACKET: usize = 2;

/// `a` is after `b` on the wrapping ticket counter.
#[inline]
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The ticket after `t`, never [`NO_TICKET`].
#[inline]
fn next_ticket(t: u32) -> u32 {
    match t.wrapping_add(1) {
        NO_TICKET => 1,
        n => n,
    }
}

/// Whether a flow whose last packet in queue `queue` of port `port` carries ticket `last` may
/// still have packets there: `last` is after the last ticket that left (`left`) and the queue is
/// not empty. A packet the traffic manager refused leaves its ticket behind: that only keeps the
/// flow where it is until later tickets leave or the queue empties.
#[inline]
fn waiting<P: BufPool>(
    ctx: &mut Ctx<'_, P>,
    port: u16,
    queue: u8,
    last: Option<u32>,
    left: u32,
) -> bool {
    last.is_some_and(|t| after(t, left)) && ctx.queue_depth(port, queue).is_some_and(|(_, n)| n > 0)
}

/// Hold or release the Controlled queue `cq` of `port` for what holds it at `now`: the pause
/// (until `paused_until`) and the order barrier once nothing is ahead of it (until
/// `barrier_until`), both on the traffic manager's single hold of the queue. `false`: the port
/// has no such queue.
fn sync_hold<P: BufPool>(
    ctx: &mut Ctx<'_, P>,
    pt: &PortNdt,
    port: u16,
    cq: u8,
    now: Nanos,
) -> bool {
    let pause = pt.paused_until.filter(|&u| now < u);
    let barrier = pt
        .barrier
        .filter(|_| pt.barrier_ahead == 0)
        .map(|_| pt.barrier_until)
        .filter(|&u| now < u);
    match pause.max(barrier) {
        Some(until) => ctx.hold_queue(port, cq, until),
        None => ctx.release_queue(port, cq),
    }
}

/// [`Ndt::on_data`]'s choice for the flow `e` at `now`, its ticket handed out and remembered.
#[inline]
fn place<P: BufPool>(
    ctx: &mut Ctx<'_, P>,
    p: &NdtParams,
    ports: &mut [PortNdt],
    stats: &mut NdtStats,
    e: &mut FstEntry,
    now: Nanos,
) -> NdtQueue {
    let port = e.port;
    let Some(pt) = ports.get_mut(port as usize) else {
        return NdtQueue::Normal(NO_TICKET);
    };
    if pt.barrier.is_some() {
        end_stale_barrier(ctx, p, pt, port, stats, now);
    }
    let controlled = match e.state {
        FlowState::Congested => {
            // Its older packets may still wait in the Normal queue, which WRR would serve after
            // this one: the Controlled queue waits for the last of them.
            if let Some(t) = e.last_normal_ticket.take() {
                if waiting(ctx, port, p.normal_queue, Some(t), pt.normal_deq_ticket) {
                    // The packets already in the Controlled queue may leave: they are ahead
                    // of this flow's. A barrier already up keeps its count (its flow's
                    // packets are ahead of these) and waits for the later ticket.
                    let ahead = ctx
                        .queue_depth(port, p.controlled_queue)
                        .map_or(0, |(_, n)| n as u32);
                    match pt.barrier {
                        Some(b) => {
                            pt.barrier = Some(if after(t, b) { t } else { b });
                            pt.barrier_ahead = pt.barrier_ahead.min(ahead);
                        }
                        None => {
                            pt.barrier = Some(t);
                            pt.barrier_ahead = ahead;
                        }
                    }
                    pt.barrier_until = now.saturating_add(p.t_maxpause_ns);
                    stats.ooo_barrier += 1;
                    if pt.barrier_ahead == 0 {
                        sync_hold(ctx, pt, port, p.controlled_queue, now);
                    }
                }
            }
            true
        }
        FlowState::Normal => {
            let held = waiting(ctx, port, p.controlled_queue, e.last_ticket, pt.deq_ticket);
            stats.ooo_held += held as u64;
            held
        }
    };
    if controlled {
        pt.enq_ticket = next_ticket(pt.enq_ticket);
        e.last_ticket = Some(pt.enq_ticket);
        stats.to_controlled += 1;
        NdtQueue::Controlled(pt.enq_ticket)
    } else {
        pt.normal_enq_ticket = next_ticket(pt.normal_enq_ticket);
        e.last_normal_ticket = Some(pt.normal_enq_ticket);
        NdtQueue::Normal(pt.normal_enq_ticket)
    }
}

/// End the barrier of `pt` when nothing is left for it to wait for: its time limit has passed
/// (counted), or the Normal queue is empty (its packet left, or was refused and nothing after
/// it leaves).
#[cold]
fn end_stale_barrier<P: BufPool>(
    ctx: &mut Ctx<'_, P>,
    p: &NdtParams,
    pt: &mut PortNdt,
    port: u16,
    stats: &mut NdtStats,
    now: Nanos,
) {
    let timed_out = now >= pt.barrier_until;
    let empty = ctx
        .queue_depth(port, p.normal_queue)
        .is_none_or(|(_, n)| n == 0);
    if timed_out || empty {
        pt.barrier = None;
        stats.ooo_barrier_timeout += timed_out as u64;
        sync_hold(ctx, pt, port, p.controlled_queue, now);
    }
}

/// The Flow State Table, the tickets and the pause state of every DC port.
pub struct Ndt {
    p: NdtParams,
    fst: ExactTable<FlowKey, FstEntry>,
    /// Indexed by port id (non-NDT ports unused).
    ports: Vec<PortNdt>,
    pub stats: NdtStats,
}

impl Ndt {
    pub fn new(p: NdtParams, max_port: u16) -> Self {
        Ndt {
            p,
            fst: ExactTable::new(
                p.flow_capacity,
                TableConfig {
                    when_full: WhenFull::Refuse,
                    idle_timeout: Some(p.active_timeout_ns),
                },
            ),
            ports: vec![PortNdt::default(); max_port as usize + 1],
            stats: NdtStats::default(),
        }
    }

    pub fn params(&self) -> &NdtParams {
        &self.p
    }

    /// Whether `e` may still have packets in its port's Controlled queue.
    fn pending<P: BufPool>(&self, ctx: &mut Ctx<'_, P>, e: &FstEntry) -> bool {
        let Some(pt) = self.ports.get(e.port as usize) else {
            return false;
        };
        waiting(
            ctx,
            e.port,
            self.p.controlled_queue,
            e.last_ticket,
            pt.deq_ticket,
        )
    }

    /// Age out idle flows (a few), keeping those that still have packets in the Controlled
    /// queue; counts follow.
    fn expire<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, now: Nanos) {
        let mut gone: [Option<(FlowKey, FstEntry)>; EXPIRE_PER_PACKET] = [None; EXPIRE_PER_PACKET];
        let mut n = 0;
        self.fst.expire(now, EXPIRE_PER_PACKET, |k, v| {
            if let Some(slot) = gone.get_mut(n) {
                *slot = Some((k, v));
                n += 1;
            }
        });
        for (k, e) in gone.into_iter().flatten() {
            if self.pending(ctx, &e) {
                // Cannot fail: the entry was just removed.
                let _ = self.fst.insert(k, e, now);
                continue;
            }
            if let Some(pt) = self.ports.get_mut(e.port as usize) {
                pt.active = pt.active.saturating_sub(1);
                if e.state == FlowState::Congested {
                    pt.congested = pt.congested.saturating_sub(1);
                }
            }
            self.evaluate_pause(ctx, e.port, now, false);
        }
    }

    /// An inter-DC data packet of `key` to be forwarded out of DC port `port` at `now`: the
    /// queue it goes to and its ticket (the ESW puts both in the packet's metadata).
    ///
    /// Moving a flow between the queues never reorders it (section III-D 2). Both queues are
    /// FIFO. A Normal flow with packets still in the Controlled queue stays there (the paper's
    /// rule, counted `ooo_held`). A Congested flow goes to the Controlled queue at once; if
    /// packets of it still wait in the Normal queue, the Controlled queue is held until the
    /// last of them has left (the barrier, counted `ooo_barrier`): staying in the Normal queue
    /// instead would leave a flow that keeps that queue busy unthrottled for good. The packets
    /// queued in the Controlled queue before the flow's first one there still leave; the hold
    /// starts when they have.
    pub fn on_data<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        key: FlowKey,
        port: u16,
        now: Nanos,
    ) -> NdtQueue {
        self.stats.data += 1;
        self.expire(ctx, now);
        if let Some(e) = self.fst.lookup_mut(&key, now) {
            return place(ctx, &self.p, &mut self.ports, &mut self.stats, e, now);
        }
        let e = FstEntry {
            state: FlowState::Normal,
            port,
            last_ticket: None,
            last_normal_ticket: None,
        };
        if self.fst.insert(key, e, now).is_err() {
            self.stats.flow_table_full += 1;
            return NdtQueue::Normal(NO_TICKET);
        }
        if let Some(pt) = self.ports.get_mut(port as usize) {
            pt.active += 1;
        }
        self.evaluate_pause(ctx, port, now, false);
        match self.fst.peek_mut(&key) {
            Some(e) => place(ctx, &self.p, &mut self.ports, &mut self.stats, e, now),
            None => NdtQueue::Normal(NO_TICKET), // just inserted: not reached
        }
    }

    /// A packet leaves DC port `port` from queue `queue` carrying ticket `ticket` (its
    /// metadata; [`NO_TICKET`] for packets NDT did not place) at `ctx.now`: the queues'
    /// progress; the barrier ends when its packet leaves.
    #[inline]
    pub fn on_egress<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        port: u16,
        queue: u8,
        ticket: u32,
    ) {
        if ticket == NO_TICKET {
            return;
        }
        let Some(pt) = self.ports.get_mut(port as usize) else {
            return;
        };
        if queue == self.p.controlled_queue {
            pt.deq_ticket = ticket;
            if pt.barrier.is_some() && pt.barrier_ahead > 0 {
                // The last packet ahead of the barrier's flow: hold the queue before the
                // traffic manager dequeues the next one (it dequeues one packet at a time,
                // each through egress before the next).
                pt.barrier_ahead -= 1;
                if pt.barrier_ahead == 0 {
                    sync_hold(ctx, pt, port, self.p.controlled_queue, ctx.now);
                }
            }
        } else if queue == self.p.normal_queue {
            pt.normal_deq_ticket = ticket;
            if pt.barrier.is_some_and(|b| !after(b, ticket)) {
                pt.barrier = None;
                sync_hold(ctx, pt, port, self.p.controlled_queue, ctx.now);
            }
        }
    }

    /// An ACK of `key` (addresses as its data's) measured `rtt_dst` at `now`: the Flow State
    /// Table's verdict, on every ACK.
    pub fn on_ack<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        key: FlowKey,
        rtt_dst: Nanos,
        now: Nanos,
    ) {
        self.stats.acks += 1;
        self.expire(ctx, now);
        let congested = rtt_dst > self.p.t_dst_thresh_ns;
        if congested {
            self.stats.congested += 1;
        } else {
            self.stats.normal += 1;
        }
        let state = if congested {
            FlowState::Congested
        } else {
            FlowState::Normal
        };
        let Some(e) = self.fst.lookup_mut(&key, now) else {
            self.stats.ack_unknown_flow += 1;
            return;
        };
        let (old, port) = (e.state, e.port);
        e.state = state;
        if let Some(pt) = self.ports.get_mut(port as usize) {
            if old != state {
                if congested {
                    pt.congested += 1;
                } else {
                    pt.congested = pt.congested.saturating_sub(1);
                }
            }
            // Relief (section III-D 3, "congestion resolution is detected via returning ACKs"):
            // an ACK through the paused port that measured the destination DC below the
            // threshold ends the pause, whichever flow it belongs to.
            if !congested && pt.paused_until.is_some_and(|u| now < u) {
                pt.paused_until = None;
                sync_hold(ctx, pt, port, self.p.controlled_queue, now);
                self.stats.pause_relief += 1;
                self.stats.paused_ns += now.saturating_sub(pt.paused_at);
                return;
            }
        }
        // Every ACK through a paused port is a chance for relief (the share may have fallen
        // since, as flows aged out or new ones came); otherwise only a change of state matters.
        let paused = self
            .ports
            .get(port as usize)
            .is_some_and(|pt| pt.paused_until.is_some());
        if old != state || paused {
            self.evaluate_pause(ctx, port, now, true);
        }
    }

    /// The pause rule of port `port` at `now` (section III-D 3, docs/reflex.md); `ack`: the
    /// event is a returning ACK.
    ///
    /// Section III-D 3: the Controlled queue "suspends transmission entirely" while "the ratio of
    /// flows mapped to the Controlled Queue to total active flows exceeds" alpha, and "this
    /// suspension persists until either congestion resolution is detected via returning ACKs or
    /// a maximum pause timeout T_maxpause is reached". So a pause starts on any event that
    /// raises the share (an ACK turning a flow Congested, a Normal flow aging out) but ends only
    /// on an ACK (here: the share at alpha or below when it arrives; [`Ndt::on_ack`] also ends
    /// it on an ACK below `T_dst_thresh`) or at T_maxpause: a new flow or an idle one aging out
    /// does not end it by itself.
    pub fn evaluate_pause<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        port: u16,
        now: Nanos,
        ack: bool,
    ) {
        let (alpha, cq, tmax) = (self.p.alpha, self.p.controlled_queue, self.p.t_maxpause_ns);
        let Some(pt) = self.ports.get_mut(port as usize) else {
            return;
        };
        if let Some(until) = pt.paused_until.filter(|&u| now >= u) {
            // The traffic manager ended the hold at T_maxpause.
            pt.paused_until = None;
            pt.disarmed = true;
            self.stats.pause_timeout += 1;
            self.stats.paused_ns += until.saturating_sub(pt.paused_at);
        }
        let over = pt.active > 0 && pt.congested as f64 > alpha * pt.active as f64;
        if !over {
            pt.disarmed = false;
            if ack && pt.paused_until.take().is_some() {
                sync_hold(ctx, pt, port, cq, now);
                self.stats.pause_relief += 1;
                self.stats.paused_ns += now.saturating_sub(pt.paused_at);
            }
        } else if pt.paused_until.is_none() && !pt.disarmed {
            let until = now.saturating_add(tmax);
            pt.paused_until = Some(until);
            if sync_hold(ctx, pt, port, cq, now) {
                pt.paused_at = now;
                self.stats.pauses += 1;
            } else {
                pt.paused_until = None;
            }
        }
    }

    /// When a pause ends by timeout next (for the counters and the re-arm rule).
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.ports.iter().filter_map(|p| p.paused_until).min()
    }

    /// Pauses due at `now` end by timeout.
    pub fn on_time<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, now: Nanos) {
        for port in 0..self.ports.len() {
            if self.ports[port].paused_until.is_some_and(|u| now >= u) {
                self.evaluate_pause(ctx, port as u16, now, false);
            }
        }
    }

    /// The state of `key`, if in the table.
    pub fn state(&self, key: &FlowKey) -> Option<FlowState> {
        self.fst.peek(key).map(|e| e.state)
    }

    /// (active, congested, paused) of DC port `port`.
    pub fn port_view(&self, port: u16) -> (u32, u32, bool) {
        self.ports.get(port as usize).map_or((0, 0, false), |p| {
            (p.active, p.congested, p.paused_until.is_some())
        })
    }

    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }

    pub fn table(&self) -> TableCounters {
        let t = self.fst.stats();
        TableCounters {
            hits: t.hits,
            misses: t.misses,
            entries: self.fst.len() as u64,
            capacity: self.fst.capacity() as u64,
            full_events: t.full_events,
        }
    }
}
