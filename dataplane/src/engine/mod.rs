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
//!
//! The files, by what they hold: this one the switch's state and how it is built; `pipeline`
//! the pipeline API ([`Pipeline`], [`Action`], [`Ctx`]); `admission` the admission chain
//! ([`Admission`]) and the pause frames it sends; `rx` receive, enqueue and the time-driven
//! work; `tx` transmit and the egress stage; `channel` the control channel; `snapshot` the
//! counters ([`SwitchSnapshot`]), the next event and the ledger.

pub mod admission;

pub use admission::{Admission, Chain, Extensions, Timer};
pub use pipeline::{Action, Ctx, Pipeline, TableCounters};
pub use snapshot::{PortSnapshot, SwitchSnapshot};

use pipeline::CtxState;

use crate::asic::pfc::{ActionBuf, Admit, PfcGenerator, PfcParams};
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

crate::counters! {
    /// Per-port counters.
    #[derive(Copy)]
    pub struct PortStats: "port" {
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

crate::counters! {
    /// Switch-wide counters.
    pub struct SwitchStats: "switch" {
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
        pub buffer_max_bytes: u64 => max,
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

mod channel;
mod pipeline;
mod rx;
mod snapshot;
mod tx;

/// A punt handler run inline (replay) and the control latency it simulates.
type InlineControl<C> = (Box<dyn PuntHandler<C>>, Nanos);

/// Commands applied per [`Switch::apply_commands`] call at most (bounded work per iteration).
pub const COMMANDS_PER_POLL: usize = 64;

const NO_INDEX: u16 = u16::MAX;

impl<P: BufPool, L: Pipeline<P>> Switch<P, L> {
    /// Build a switch with classic PFC as its only admission stage ([`Switch::with_admission`]).
    /// A spec that configures a mechanism's stage (`spec.admission`: Bifrost's) needs the chain
    /// that runs it (`Switch::with_admission` with the registry's chain, as `longhaul run`,
    /// replay and the emulator build theirs); debug builds refuse it here rather than drop it.
    pub fn new(spec: SwitchSpec, pool: P, pipeline: L) -> Self {
        debug_assert!(
            spec.admission.is_empty(),
            "Switch::new runs classic PFC only: build a spec with admission stages with \
             Switch::with_admission and their chain"
        );
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

    /// The link of the port at index `port_idx` went down (`up` false) or came back up: the
    /// pipeline hears of it ([`Pipeline::on_link`]). Frames still queued for the port stay.
    pub fn set_link(&mut self, port_idx: usize, up: bool) {
        if let Some(id) = self.st.infos.get(port_idx).map(|p| p.id) {
            self.pipeline.on_link(id, up);
        }
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
}

/// `PORT_NONE` re-exported for pipelines that build generated packets.
pub const NO_PORT: u16 = PORT_NONE;
