//! The traffic manager of one egress port: eight class queues with tail-drop limits and DCQCN-style
//! ECN marking, a small control FIFO for PFC/PAUSE frames, a scheduler (strict classes first, then
//! strict/WRR/DRR over the rest), per-priority pause timers honoring received PFC, and a link model
//! that serializes one frame at a time at the port's rate.
//!
//! Time: the caller passes `now` (the engine's clock, DESIGN.md section 3). The link is busy until
//! `busy_until`; [`TrafficManager::dequeue`] releases at most one frame per serialization time,
//! and [`TrafficManager::next_event`] tells the virtual-time driver exactly when the next frame can
//! leave, so queues build in replay exactly as on a link of `rate_bps`.
//!
//! Memory: every queue ring is allocated in [`TrafficManager::new`]; enqueue and dequeue never
//! allocate. Every refused packet is handed back with its [`DropReason`] and counted.

use crate::asic::drr::Drr;
use crate::asic::hierarchical::{Hierarchical, Weighted};
use crate::asic::pfc::PauseState;
use crate::asic::queue::PktQueue;
use crate::asic::red::{RedEcn, RedOutcome};
use crate::asic::scheduler::{QueueView, Scheduler};
use crate::asic::wrr::Wrr;
use crate::counters::{DropCounters, DropReason};
use crate::packet::{PacketBuf, FLAG_ECN_MARKED, NUM_CLASSES};
use crate::time::{serialization_ns, Nanos, SerializationMemo};

pub use crate::asic::red::RedParams;

/// Default per-frame wire overhead added to serialization: preamble + SFD (8) + inter-frame gap
/// (12) + FCS (4).
pub const DEFAULT_FRAME_OVERHEAD: u32 = 24;

/// Per-class queue settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TmClassConfig {
    /// Queue limit in bytes (tail-drop threshold; for a lossless class, the hard cap).
    pub limit_bytes: u64,
    /// Queue limit in packets (the ring is preallocated with this many slots).
    pub limit_pkts: u32,
    /// PFC protects this class: admission is the engine's job (`PfcGenerator`); the TM only
    /// enforces the hard cap so that memory stays bounded, and counts hitting it separately.
    pub lossless: bool,
    /// ECN marking thresholds; `None` = no marking.
    pub ecn: Option<RedParams>,
    /// Mark when a packet leaves the queue, on the depth it leaves behind (the HPCC simulator's
    /// `SwitchNotifyDequeue`), instead of when it enters, on the depth it finds.
    pub ecn_at_dequeue: bool,
}

impl Default for TmClassConfig {
    fn default() -> Self {
        TmClassConfig {
            limit_bytes: 1 << 20,
            limit_pkts: 1024,
            lossless: false,
            ecn: None,
            ecn_at_dequeue: false,
        }
    }
}

/// How the classes outside `strict_mask` are scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmSched {
    /// Strict priority, highest class first.
    Strict,
    /// Weighted round robin in packets per round (0 = scavenger: served only when no class with a
    /// positive weight is eligible).
    Wrr {
        /// Packets per round, per class.
        weights: [u32; NUM_CLASSES],
    },
    /// Deficit round robin, quantum in bytes per round (0 = scavenger, as for WRR).
    Drr {
        /// Bytes per round, per class.
        quanta: [u32; NUM_CLASSES],
    },
}

/// Configuration of one egress port's traffic manager.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TmConfig {
    /// Link rate in bits per second (0 = infinitely fast: no serialization delay).
    pub rate_bps: u64,
    /// Bytes added to every frame's length for serialization (preamble, IFG, FCS).
    pub frame_overhead_bytes: u32,
    /// Per-class settings, indexed by class.
    pub classes: [TmClassConfig; NUM_CLASSES],
    /// Bit `c` set = class `c` is served by strict priority before all non-strict classes.
    pub strict_mask: u8,
    /// Scheduler of the non-strict classes.
    pub sched: TmSched,
    /// Packets the control FIFO (PFC/PAUSE frames) holds.
    pub control_queue_pkts: u32,
    /// Seed of the ECN markers' random streams (class `c` uses `seed + c`).
    pub seed: u64,
    /// Per queue: the priority whose received PFC pause stops it (Tofino's queue-to-`pfc_cos`
    /// map). Default: queue `q` is paused by priority `q`. A queue that holds packets of another
    /// class than its own (Reflex NDT's Controlled queue) is paused with that class.
    pub queue_priority: [u8; NUM_CLASSES],
}

/// The identity queue-to-priority map (queue `q` paused by priority `q`).
pub const IDENTITY_PRIORITIES: [u8; NUM_CLASSES] = [0, 1, 2, 3, 4, 5, 6, 7];

impl Default for TmConfig {
    fn default() -> Self {
        TmConfig {
            rate_bps: 100_000_000_000,
            frame_overhead_bytes: DEFAULT_FRAME_OVERHEAD,
            classes: [TmClassConfig::default(); NUM_CLASSES],
            strict_mask: 0,
            sched: TmSched::Strict,
            control_queue_pkts: 64,
            seed: 0,
            queue_priority: IDENTITY_PRIORITIES,
        }
    }
}

/// What [`TrafficManager::enqueue`] reports about an accepted packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnqInfo {
    /// The class queue it went to.
    pub class: u8,
    /// Class depth in bytes before this packet (what RED saw).
    pub depth_bytes_before: u64,
    /// Class depth in packets before this packet.
    pub depth_pkts_before: u32,
    /// The ECN marker set CE on it.
    pub marked: bool,
}

crate::counters! {
    /// Counters of one class.
    #[derive(Copy)]
    pub struct ClassStats: "class" {
        /// Packets accepted.
        pub enq_pkts: u64,
        /// Bytes accepted.
        pub enq_bytes: u64,
        /// Packets transmitted.
        pub deq_pkts: u64,
        /// Bytes transmitted.
        pub deq_bytes: u64,
        /// Packets refused (queue full).
        pub drops: u64,
        /// Of `drops`, those in a lossless class (hard cap hit: PFC misconfigured).
        pub lossless_drops: u64,
        /// Packets the marker set CE on.
        pub ecn_marks: u64,
        /// Mark decisions on Not-ECT packets (left unchanged).
        pub ecn_not_ect: u64,
        /// Current depth, bytes.
        pub depth_bytes: u64,
        /// Current depth, packets.
        pub depth_pkts: u64,
        /// Highest depth reached, bytes.
        pub max_depth_bytes: u64 => max,
    }
}

/// Counters of the port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TmPortStats {
    /// Frames transmitted (data and control).
    pub tx_pkts: u64,
    /// Bytes transmitted (frame lengths, without the wire overhead).
    pub tx_bytes: u64,
    /// Control frames transmitted.
    pub control_tx: u64,
    /// Drops by reason (QueueFull for class and control overflow, Pipeline for a bad class).
    pub drops: DropCounters,
    /// Control frames refused (control FIFO full).
    pub control_drops: u64,
    /// Packets whose class was >= 8 (refused with `DropReason::Pipeline`).
    pub bad_class: u64,
    /// Nanoseconds the link spent serializing.
    pub busy_ns: u64,
    /// Data frames that found the port idle and went out without being queued
    /// ([`TrafficManager::bypass`]); included in the class and port counters as usual.
    pub bypassed: u64,
}

struct ClassQ<B: PacketBuf> {
    q: PktQueue<B>,
    red: Option<RedEcn>,
    /// Mark at dequeue ([`TmClassConfig::ecn_at_dequeue`]).
    mark_at_dequeue: bool,
    lossless: bool,
    st: ClassStats,
}

impl<B: PacketBuf> ClassQ<B> {
    /// The class's ECN marker on `pkt` at a queue depth of `depth_bytes` (before the packet):
    /// CE and `FLAG_ECN_MARKED` on a mark, counted; Not-ECT left unchanged and counted. Returns
    /// whether it marked. Always inlined: once per admitted packet, nearly always below K_min.
    #[inline(always)]
    fn mark(&mut self, pkt: &mut B, depth_bytes: u64) -> bool {
        let Some(red) = self.red.as_mut() else {
            return false;
        };
        let l3 = pkt.meta().l3_off;
        match red.apply(pkt.data_mut(), l3, depth_bytes) {
            RedOutcome::Marked => {
                self.st.ecn_marks += 1;
                pkt.meta_mut().flags |= FLAG_ECN_MARKED;
                true
            }
            RedOutcome::NotEct => {
                self.st.ecn_not_ect += 1;
                false
            }
            _ => false,
        }
    }
}

/// The view the scheduler sees: head lengths of non-empty, unpaused classes.
struct View<'a, B: PacketBuf> {
    classes: &'a [ClassQ<B>; NUM_CLASSES],
    /// Bit c set = class c is non-empty and not paused.
    eligible: u8,
}

impl<B: PacketBuf> QueueView for View<'_, B> {
    #[inline]
    fn n(&self) -> usize {
        NUM_CLASSES
    }
    #[inline]
    fn head_len(&self, q: usize) -> Option<u32> {
        if q >= NUM_CLASSES || self.eligible & (1 << q) == 0 {
            return None;
        }
        self.classes[q].q.head_len()
    }
    #[inline]
    fn eligible_mask(&self) -> u64 {
        self.eligible as u64
    }
}

/// A run of empty-queue bypasses open on one traffic manager ([`TrafficManager::open_run`]):
/// the queue it was opened for and what its frames add to the counters when it closes.
#[derive(Debug)]
#[must_use = "a run's frames are counted when it is closed (TrafficManager::close_run)"]
pub struct BypassRun {
    queue: u8,
    pkts: u64,
    bytes: u64,
    max_len: u64,
}

impl BypassRun {
    /// The queue the run was opened for.
    #[inline]
    pub fn queue(&self) -> u8 {
        self.queue
    }
}

/// The traffic manager of one egress port.
pub struct TrafficManager<B: PacketBuf> {
    rate_bps: u64,
    overhead: u64,
    classes: [ClassQ<B>; NUM_CLASSES],
    control: PktQueue<B>,
    sched: Hierarchical,
    pause: PauseState,
    busy_until: Nanos,
    /// How far behind `now` the link clock may run (live drivers; 0 in replay): see
    /// [`TrafficManager::set_tx_slack`].
    slack_ns: Nanos,
    /// Bit c set = class c's queue holds a packet (kept by `enqueue` and `dequeue`, the only
    /// places that push or pop a class queue): the scheduler tests one byte instead of eight
    /// queues.
    nonempty: u8,
    /// The last frame length serialized and its time: frames of one size (the common case) skip
    /// the division in `serialization_ns`. Reset by `set_rate`.
    ser_memo: SerializationMemo,
    /// The last `resize_tx` (old length, new length) and its change of wire time, +/- ns: an
    /// egress stage that grows every frame alike (INT) repeats it, and skips two divisions.
    /// Reset by `set_rate`.
    resize_memo: (u64, u64, bool, Nanos),
    /// Per received-PFC priority, the queues it pauses (from `queue_priority`); `None` for the
    /// identity map, where the priority mask is the queue mask.
    prio_queues: Option<[u8; NUM_CLASSES]>,
    queue_priority: [u8; NUM_CLASSES],
    /// Bit q set = queue q is held by the data plane ([`TrafficManager::hold`]) until
    /// `hold_until[q]`.
    held: u8,
    hold_until: [Nanos; NUM_CLASSES],
    stats: TmPortStats,
}

impl<B: PacketBuf> TrafficManager<B> {
    /// Build the port's queues (rings of `limit_pkts` per class and `control_queue_pkts`
    /// allocated here), markers and scheduler from `cfg`.
    pub fn new(cfg: &TmConfig) -> Self {
        let classes = std::array::from_fn(|c| {
            let cc = &cfg.classes[c];
            ClassQ {
                q: PktQueue::new(cc.limit_pkts as usize, cc.limit_bytes),
                red: cc
                    .ecn
                    .map(|p| RedEcn::new(p, cfg.seed.wrapping_add(c as u64))),
                mark_at_dequeue: cc.ecn_at_dequeue,
                lossless: cc.lossless,
                st: ClassStats::default(),
            }
        });
        let rest = match cfg.sched {
            TmSched::Strict => Weighted::Strict,
            TmSched::Wrr { weights } => Weighted::Wrr(Wrr::new(&weights)),
            TmSched::Drr { quanta } => Weighted::Drr(Drr::new(&quanta)),
        };
        TrafficManager {
            rate_bps: cfg.rate_bps,
            overhead: cfg.frame_overhead_bytes as u64,
            classes,
            control: PktQueue::new(cfg.control_queue_pkts as usize, u64::MAX),
            sched: Hierarchical::new(cfg.strict_mask as u64, rest),
            pause: PauseState::new(),
            busy_until: 0,
            slack_ns: 0,
            nonempty: 0,
            ser_memo: SerializationMemo::default(),
            resize_memo: (u64::MAX, u64::MAX, false, 0),
            prio_queues: (cfg.queue_priority != IDENTITY_PRIORITIES).then(|| {
                let mut m = [0u8; NUM_CLASSES];
                for (q, &p) in cfg.queue_priority.iter().enumerate() {
                    if let Some(x) = m.get_mut(p as usize) {
                        *x |= 1 << q;
                    }
                }
                m
            }),
            queue_priority: cfg.queue_priority,
            held: 0,
            hold_until: [0; NUM_CLASSES],
            stats: TmPortStats::default(),
        }
    }

    /// The queues that may not send at `now`: paused by received PFC (through the
    /// queue-to-priority map) or held by the data plane.
    #[inline(always)]
    fn stopped_mask(&self, now: Nanos) -> u8 {
        let prio = self.pause.paused_mask(now);
        let mut m = match (&self.prio_queues, prio) {
            (_, 0) => 0,
            (None, p) => p,
            (Some(map), p) => {
                let mut m = 0u8;
                for (i, &q) in map.iter().enumerate() {
                    if p & (1 << i) != 0 {
                        m |= q;
                    }
                }
                m
            }
        };
        if self.held != 0 {
            m |= self.held_mask(now);
        }
        m
    }

    #[inline]
    fn held_mask(&self, now: Nanos) -> u8 {
        let mut m = 0u8;
        for (q, &until) in self.hold_until.iter().enumerate() {
            if self.held & (1 << q) != 0 && now < until {
                m |= 1 << q;
            }
        }
        m
    }

    /// Hold queue `queue` from the data plane until `until` (or [`release`](Self::release)): it
    /// keeps its packets and accepts more but sends none, as a queue paused by PFC (Tofino2's
    /// advanced flow control, which pauses a queue from the pipeline). A new hold replaces the
    /// previous one. `false` for a queue out of range.
    pub fn hold(&mut self, queue: u8, until: Nanos) -> bool {
        let Some(u) = self.hold_until.get_mut(queue as usize) else {
            return false;
        };
        *u = until;
        self.held |= 1 << queue;
        true
    }

    /// End a hold of `queue` now. `false` for a queue out of range.
    pub fn release(&mut self, queue: u8) -> bool {
        if queue as usize >= NUM_CLASSES {
            return false;
        }
        self.held &= !(1 << queue);
        true
    }

    /// Whether `queue` is held at `now`.
    pub fn is_held(&self, queue: u8, now: Nanos) -> bool {
        self.held_mask(now) & (1u8.checked_shl(queue as u32).unwrap_or(0)) != 0
    }

    /// Queue a data packet in its queue (`meta().egress_queue()`: its class's unless a stage
    /// chose another; "class" below means that queue).
    ///
    /// - class >= 8: refused, `DropReason::Pipeline` (counted in `bad_class`).
    /// - The class queue would exceed `limit_pkts` or `limit_bytes`: refused,
    ///   `DropReason::QueueFull` (for a lossless class this is the hard cap, also counted in
    ///   `lossless_drops`). A refused packet is neither marked nor stamped.
    /// - Otherwise, if the class has ECN marking, RED decides from the class depth in bytes before
    ///   this packet; on "mark" an ECT packet gets CE (IPv4 checksum updated) and
    ///   `FLAG_ECN_MARKED`; Not-ECT packets are left unchanged (never dropped by RED); nothing is
    ///   written when `l3_off == 0`. Then `meta().enq_ts = now` and the packet is queued.
    pub fn enqueue(&mut self, mut pkt: B, now: Nanos) -> Result<EnqInfo, (B, DropReason)> {
        let class = pkt.meta().egress_queue();
        let Some(cq) = self.classes.get_mut(class as usize) else {
            self.stats.bad_class += 1;
            self.stats.drops.inc(DropReason::Pipeline);
            return Err((pkt, DropReason::Pipeline));
        };
        if !cq.q.fits(pkt.len()) {
            cq.st.drops += 1;
            if cq.lossless {
                cq.st.lossless_drops += 1;
            }
            self.stats.drops.inc(DropReason::QueueFull);
            return Err((pkt, DropReason::QueueFull));
        }
        let depth_bytes_before = cq.q.bytes();
        let depth_pkts_before = cq.q.len() as u32;
        let marked = !cq.mark_at_dequeue && cq.mark(&mut pkt, depth_bytes_before);
        pkt.meta_mut().enq_ts = now;
        let len = pkt.len() as u64;
        if let Err(p) = cq.q.push(pkt) {
            // Unreachable after `fits`, but handled: count it like any full queue.
            cq.st.drops += 1;
            self.stats.drops.inc(DropReason::QueueFull);
            return Err((p, DropReason::QueueFull));
        }
        self.nonempty |= 1 << class;
        cq.st.enq_pkts += 1;
        cq.st.enq_bytes += len;
        cq.st.max_depth_bytes = cq.st.max_depth_bytes.max(cq.q.bytes());
        Ok(EnqInfo {
            class,
            depth_bytes_before,
            depth_pkts_before,
            marked,
        })
    }

    /// Queue a link-local control frame (PFC/PAUSE, `FLAG_CONTROL`) in the control FIFO, which is
    /// served before every class and never paused. Full FIFO: refused with
    /// `DropReason::QueueFull`, counted in `control_drops`.
    pub fn enqueue_control(&mut self, mut pkt: B, now: Nanos) -> Result<(), (B, DropReason)> {
        pkt.meta_mut().enq_ts = now;
        match self.control.push(pkt) {
            Ok(()) => Ok(()),
            Err(p) => {
                self.stats.control_drops += 1;
                self.stats.drops.inc(DropReason::QueueFull);
                Err((p, DropReason::QueueFull))
            }
        }
    }

    /// The next frame to put on the wire at `now`, or `None` if the link is still serializing the
    /// previous frame (`now < busy_until`) or nothing is eligible (all classes empty or paused).
    /// Control frames go first; then the scheduler picks among non-empty, unpaused classes. The
    /// link becomes busy until `now + serialization_ns(len + frame_overhead, rate_bps)`.
    pub fn dequeue(&mut self, now: Nanos) -> Option<B> {
        if now < self.busy_until {
            return None;
        }
        let pkt = if let Some(p) = self.control.pop() {
            self.stats.control_tx += 1;
            p
        } else {
            if self.nonempty == 0 {
                return None;
            }
            let view = View {
                classes: &self.classes,
                eligible: self.nonempty & !self.stopped_mask(now),
            };
            let c = self.sched.pick(&view)?;
            let cq = self.classes.get_mut(c)?;
            let mut p = cq.q.pop()?;
            if cq.q.is_empty() {
                self.nonempty &= !(1 << c);
            }
            if cq.mark_at_dequeue {
                let left = cq.q.bytes();
                cq.mark(&mut p, left);
            }
            cq.st.deq_pkts += 1;
            cq.st.deq_bytes += p.len() as u64;
            p
        };
        self.start_tx(pkt.len() as u64, now);
        Some(pkt)
    }

    /// Empty-queue bypass (as Linux's qdiscs bypass an empty queue, `TCQ_F_CAN_BYPASS`): when
    /// nothing is queued on this port (no class, no control frame), the link is free at `now`
    /// (`dequeue(now)` would send at once) and the packet's class is not paused, the packet goes
    /// on the wire now without entering its queue: what `enqueue` then `dequeue` at `now` would
    /// do with it alone. Its queue's limits and ECN marker see it as `enqueue` would (depth 0),
    /// it is counted as enqueued and dequeued, and the link is busy for its serialization time.
    /// The scheduler is not asked (there is nothing to choose between), so DRR deficits and the
    /// WRR turn are left as they are, as for any queue that was never backlogged.
    ///
    /// `Ok(pkt)`: the caller transmits it, ahead of anything `dequeue` returns later. `Err(pkt)`:
    /// the bypass does not apply (untouched); call [`enqueue`](Self::enqueue).
    ///
    /// What changes against always queueing: packets that reach an idle port at the same `now`
    /// leave in arrival order for the first of them, instead of the scheduler's order among all
    /// of them (a strict class arriving second no longer overtakes a frame that found the link
    /// idle: on a real link that frame is already being serialized).
    #[inline]
    pub fn bypass(&mut self, pkt: B, now: Nanos) -> Result<B, B> {
        let Some(mut run) = self.open_run(pkt.meta().egress_queue(), now) else {
            return Err(pkt);
        };
        let r = self.bypass_in_run(&mut run, pkt, now);
        self.close_run(run);
        r
    }

    /// Open a run of empty-queue bypasses at `now` for frames of queue `queue`: `Some` when the
    /// port-wide conditions of [`bypass`](Self::bypass) hold (nothing queued, no control frame,
    /// `queue` exists and is neither paused nor held). A burst's frames to one port then pass
    /// [`bypass_in_run`](Self::bypass_in_run) with only the per-frame conditions checked, and
    /// their counters are added once by [`close_run`](Self::close_run).
    ///
    /// While a run is open the caller makes no other call on this traffic manager and `now`
    /// stays the same: every call that could change what was checked (an enqueue, a control
    /// frame, a received pause, a hold) comes after `close_run`.
    #[inline]
    pub fn open_run(&self, queue: u8, now: Nanos) -> Option<BypassRun> {
        if self.nonempty != 0 || !self.control.is_empty() || queue as usize >= NUM_CLASSES {
            return None;
        }
        if self.stopped_mask(now) & (1 << queue) != 0 {
            return None;
        }
        Some(BypassRun {
            queue,
            pkts: 0,
            bytes: 0,
            max_len: 0,
        })
    }

    /// [`bypass`](Self::bypass) for a frame in an open run (same outcome, same frame, same link
    /// clock): the link must be free at `now`, the frame of the run's queue and within its
    /// limits. `Err(pkt)`: untouched; close the run and [`enqueue`](Self::enqueue) it.
    #[inline(always)]
    pub fn bypass_in_run(&mut self, run: &mut BypassRun, mut pkt: B, now: Nanos) -> Result<B, B> {
        // A frame of another queue is the caller's error; it is refused, never misfiled.
        if now < self.busy_until || pkt.meta().egress_queue() != run.queue {
            return Err(pkt);
        }
        let Some(cq) = self.classes.get_mut(run.queue as usize) else {
            return Err(pkt);
        };
        if !cq.q.fits(pkt.len()) {
            return Err(pkt);
        }
        cq.mark(&mut pkt, 0);
        pkt.meta_mut().enq_ts = now;
        let len = pkt.len() as u64;
        run.pkts += 1;
        run.bytes += len;
        run.max_len = run.max_len.max(len);
        self.start_link(len, now);
        Ok(pkt)
    }

    /// Add a run's frames to the counters, as [`bypass`](Self::bypass) adds each of its.
    #[inline]
    pub fn close_run(&mut self, run: BypassRun) {
        if run.pkts == 0 {
            return;
        }
        if let Some(cq) = self.classes.get_mut(run.queue as usize) {
            cq.st.enq_pkts += run.pkts;
            cq.st.enq_bytes += run.bytes;
            cq.st.deq_pkts += run.pkts;
            cq.st.deq_bytes += run.bytes;
            cq.st.max_depth_bytes = cq.st.max_depth_bytes.max(run.max_len);
        }
        self.stats.bypassed += run.pkts;
        self.stats.tx_pkts += run.pkts;
        self.stats.tx_bytes += run.bytes;
    }

    /// A frame of `len` bytes starts on the wire: the link is busy for its serialization time.
    #[inline]
    fn start_tx(&mut self, len: u64, now: Nanos) {
        self.start_link(len, now);
        self.stats.tx_pkts += 1;
        self.stats.tx_bytes += len;
    }

    /// The link clock and busy time of [`start_tx`](Self::start_tx), without its counters.
    #[inline(always)]
    fn start_link(&mut self, len: u64, now: Nanos) {
        let ser = self.ser_memo.ns(len, self.overhead, self.rate_bps);
        // Replay dequeues exactly when the link frees (slack 0: the link clock is `now`). A live
        // driver polls every few microseconds with one `now` per loop: the link clock then runs
        // on from `busy_until` (at most `slack_ns` behind `now`), so each poll releases what the
        // link could have sent since the last one, not one frame.
        let start = if self.slack_ns == 0 {
            now
        } else {
            self.busy_until.max(now.saturating_sub(self.slack_ns))
        };
        self.busy_until = start.saturating_add(ser);
        self.stats.busy_ns += ser;
    }

    /// The frame just handed out (by [`dequeue`](Self::dequeue) or [`bypass`](Self::bypass)) is
    /// `new_len` bytes on the wire instead of `old_len` (an egress stage added or removed bytes:
    /// INT): the link's busy time and the byte counter follow.
    /// Inline: an INT source resizes every frame by the same bytes, so the memo answers.
    #[inline]
    pub fn resize_tx(&mut self, old_len: u64, new_len: u64) {
        if old_len == new_len {
            return;
        }
        let (grow, d) = match self.resize_memo {
            (o, n, grow, d) if o == old_len && n == new_len => (grow, d),
            _ => self.resize_memo_miss(old_len, new_len),
        };
        if grow {
            self.busy_until = self.busy_until.saturating_add(d);
            self.stats.busy_ns += d;
        } else {
            self.busy_until = self.busy_until.saturating_sub(d);
            self.stats.busy_ns = self.stats.busy_ns.saturating_sub(d);
        }
        self.stats.tx_bytes = (self.stats.tx_bytes + new_len).saturating_sub(old_len);
    }

    /// [`resize_tx`](Self::resize_tx)'s change of serialization time (grows, by how much),
    /// computed and remembered.
    #[inline(never)]
    fn resize_memo_miss(&mut self, old_len: u64, new_len: u64) -> (bool, u64) {
        let old = serialization_ns(old_len + self.overhead, self.rate_bps);
        let new = serialization_ns(new_len + self.overhead, self.rate_bps);
        let r = (new >= old, new.abs_diff(old));
        self.resize_memo = (old_len, new_len, r.0, r.1);
        r
    }

    /// The earliest time at or after `now` at which [`dequeue`](Self::dequeue) returns a frame,
    /// assuming no further arrivals or received pause frames: `max(now, busy_until)` if a control
    /// frame is queued or a non-empty class is unpaused at that time; otherwise the earliest
    /// unpause time of a non-empty paused class; `None` when every queue is empty.
    #[inline]
    pub fn next_event(&self, now: Nanos) -> Option<Nanos> {
        let t0 = now.max(self.busy_until);
        if !self.control.is_empty() {
            return Some(t0);
        }
        // The non-empty mask: an idle port (the usual case) answers without touching a queue.
        let mut rest = self.nonempty;
        let mut best: Option<Nanos> = None;
        while rest != 0 {
            let c = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            let mut t = t0.max(self.pause.paused_until(self.queue_priority[c]));
            if self.held & (1 << c) != 0 {
                t = t.max(self.hold_until[c]);
            }
            if t == Nanos::MAX {
                continue; // held for good: only a release (or new input) frees it
            }
            if t == t0 {
                return Some(t0);
            }
            best = Some(best.map_or(t, |b: Nanos| b.min(t)));
        }
        best
    }

    /// A PFC frame was received on this port at `now`: per-priority pause timers (see
    /// [`PauseState::on_pfc`]), quanta converted at this port's rate.
    pub fn on_pfc_received(&mut self, class_enable: u8, times: [u16; NUM_CLASSES], now: Nanos) {
        self.pause.on_pfc(class_enable, times, now, self.rate_bps);
    }

    /// An 802.3x PAUSE frame was received: pauses every class (time 0 resumes).
    pub fn on_pause_received(&mut self, time: u16, now: Nanos) {
        self.pause.on_pause(time, now, self.rate_bps);
    }

    /// The pause timers.
    pub fn pause_state(&self) -> &PauseState {
        &self.pause
    }

    /// Change the WRR weight / DRR quantum of `class` at run time. `false` when the scheduler is
    /// strict or the class is out of range.
    pub fn set_weight(&mut self, class: u8, w: u32) -> bool {
        self.sched.set_weight(class as usize, w)
    }

    /// Change the link rate (applies from the next frame; the frame in flight keeps its time).
    pub fn set_rate(&mut self, rate_bps: u64) {
        self.rate_bps = rate_bps;
        self.ser_memo.clear();
        self.resize_memo = (u64::MAX, u64::MAX, false, 0);
    }

    /// The link rate.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Let the link clock lag `now` by up to `slack_ns` (default 0, what replay uses): a live
    /// driver that polls with one `now` per loop iteration then gets, per poll, every frame the
    /// link could have serialized since the previous one (at most `slack_ns` worth after an idle
    /// spell), instead of one frame per poll.
    pub fn set_tx_slack(&mut self, slack_ns: Nanos) {
        self.slack_ns = slack_ns;
    }

    /// Time until which the link is serializing the last frame.
    pub fn busy_until(&self) -> Nanos {
        self.busy_until
    }

    /// Depth of `class` in bytes (0 for class >= 8).
    pub fn depth_bytes(&self, class: u8) -> u64 {
        self.classes.get(class as usize).map_or(0, |c| c.q.bytes())
    }

    /// Depth of `class` in packets (0 for class >= 8).
    pub fn depth_pkts(&self, class: u8) -> usize {
        self.classes.get(class as usize).map_or(0, |c| c.q.len())
    }

    /// Frames queued in all classes and the control FIFO.
    pub fn queued_pkts(&self) -> u64 {
        self.control.len() as u64 + self.classes.iter().map(|c| c.q.len() as u64).sum::<u64>()
    }

    /// Bytes queued in all classes (control FIFO excluded). Only the classes of the non-empty
    /// mask are read (an empty class holds no bytes): an idle port, the usual case for a port
    /// whose frames bypass its queues, answers 0 without touching a queue.
    #[inline]
    pub fn total_bytes(&self) -> u64 {
        let mut rest = self.nonempty;
        let mut sum = 0;
        while rest != 0 {
            let c = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            sum += self.classes.get(c).map_or(0, |cq| cq.q.bytes());
        }
        sum
    }

    /// Nothing queued anywhere (classes and control FIFO).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.nonempty == 0 && self.control.is_empty()
    }

    /// Counters of `class` (default for class >= 8), with the current depth filled in.
    pub fn class_stats(&self, class: u8) -> ClassStats {
        self.classes
            .get(class as usize)
            .map_or_else(ClassStats::default, |c| ClassStats {
                depth_bytes: c.q.bytes(),
                depth_pkts: c.q.len() as u64,
                ..c.st
            })
    }

    /// Port counters.
    pub fn port_stats(&self) -> &TmPortStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::HeapBuf;
    use crate::wire::ecn;

    const RATE: u64 = 10_000_000_000; // 10 Gb/s: 1 byte = 0.8 ns

    fn cfg() -> TmConfig {
        TmConfig {
            rate_bps: RATE,
            ..TmConfig::default()
        }
    }

    fn pkt(len: usize, class: u8) -> HeapBuf {
        let mut p = HeapBuf::from_bytes(&vec![class; len]);
        p.meta_mut().class = class;
        p
    }

    /// Ethernet + IPv4 (valid checksum) with the given ECN bits, padded to `len`.
    fn ipv4_frame(len: usize, class: u8, ecn_bits: u8) -> HeapBuf {
        let mut f = vec![0u8; len];
        f[12] = 0x08;
        f[13] = 0x00;
        let ip = &mut f[14..34];
        ip.copy_from_slice(&[
            0x45, ecn_bits, 0, 0, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        let tl = (len - 14) as u16;
        ip[2..4].copy_from_slice(&tl.to_be_bytes());
        let ck = ipv4_checksum(ip);
        ip[10..12].copy_from_slice(&ck.to_be_bytes());
        let mut p = HeapBuf::from_bytes(&f);
        p.meta_mut().class = class;
        p.meta_mut().l3_off = 14;
        p
    }

    fn ipv4_checksum(h: &[u8]) -> u16 {
        let mut s = 0u32;
        for c in h.chunks(2) {
            s += u16::from_be_bytes([c[0], c[1]]) as u32;
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn queue_builds_at_link_rate() {
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&cfg());
        assert_eq!(tm.next_event(0), None);
        tm.enqueue(pkt(1000, 0), 100).unwrap();
        let info = tm.enqueue(pkt(1000, 0), 100).unwrap();
        assert_eq!(info.depth_bytes_before, 1000);
        assert_eq!(info.depth_pkts_before, 1);
        assert_eq!(tm.next_event(100), Some(100));
        let a = tm.dequeue(100).unwrap();
        assert_eq!(a.meta().enq_ts, 100);
        // (1000 + 24) B at 10 Gb/s = 819.2 ns -> 820.
        let ser = serialization_ns(1024, RATE);
        assert_eq!(ser, 820);
        assert_eq!(tm.busy_until(), 100 + ser);
        assert_eq!(tm.next_event(101), Some(100 + ser));
        assert!(tm.dequeue(100 + ser - 1).is_none());
        assert!(tm.dequeue(100 + ser).is_some());
        assert_eq!(tm.next_event(100 + ser), None);
        assert!(tm.is_empty());
        let s = tm.class_stats(0);
        assert_eq!((s.enq_pkts, s.deq_pkts, s.deq_bytes), (2, 2, 2000));
        assert_eq!(s.max_depth_bytes, 2000);
        assert_eq!(tm.port_stats().busy_ns, 2 * ser);
    }

    #[test]
    fn strict_priority_order() {
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&TmConfig {
            rate_bps: 0,
            ..cfg()
        });
        for c in [0u8, 3, 7, 3, 0] {
            tm.enqueue(pkt(100, c), 0).unwrap();
        }
        let order: Vec<u8> = std::iter::from_fn(|| tm.dequeue(0))
            .map(|p| p.meta().class)
            .collect();
        assert_eq!(order, vec![7, 3, 3, 0, 0]);
    }

    #[test]
    fn wrr_shares_and_strict_class() {
        let mut weights = [0u32; 8];
        weights[0] = 1;
        weights[1] = 3;
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&TmConfig {
            rate_bps: 0,
            strict_mask: 1 << 7,
            sched: TmSched::Wrr { weights },
            ..cfg()
        });
        for _ in 0..400 {
            tm.enqueue(pkt(100, 0), 0).unwrap();
            tm.enqueue(pkt(100, 1), 0).unwrap();
        }
        tm.enqueue(pkt(100, 7), 0).unwrap();
        assert_eq!(tm.dequeue(0).unwrap().meta().class, 7);
        let mut n = [0u32; 2];
        for _ in 0..400 {
            n[tm.dequeue(0).unwrap().meta().class as usize] += 1;
        }
        assert_eq!(n, [100, 300]);
        // Reflex-style reweighting at run time: 1:1.
        assert!(tm.set_weight(1, 1));
        let mut n = [0u32; 2];
        for _ in 0..200 {
            n[tm.dequeue(0).unwrap().meta().class as usize] += 1;
        }
        assert!(n[0].abs_diff(n[1]) <= 3, "{n:?}");
    }

    #[test]
    fn drr_byte_shares() {
        let mut quanta = [0u32; 8];
        quanta[0] = 1500;
        quanta[1] = 1500;
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&TmConfig {
            rate_bps: 0,
            sched: TmSched::Drr { quanta },
            ..cfg()
        });
        for _ in 0..300 {
            tm.enqueue(pkt(1500, 0), 0).unwrap();
            tm.enqueue(pkt(500, 1), 0).unwrap();
            tm.enqueue(pkt(500, 1), 0).unwrap();
            tm.enqueue(pkt(500, 1), 0).unwrap();
        }
        let mut bytes = [0u64; 2];
        for _ in 0..400 {
            let p = tm.dequeue(0).unwrap();
            bytes[p.meta().class as usize] += p.len() as u64;
        }
        assert!(bytes[0].abs_diff(bytes[1]) <= 1500, "{bytes:?}");
    }

    #[test]
    fn paused_class_resumes_at_exact_time() {
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&TmConfig {
            rate_bps: 100_000_000_000,
            ..cfg()
        });
        let mut times = [0u16; 8];
        times[3] = 1000; // 1000 quanta at 100G = 5120 ns
        tm.on_pfc_received(1 << 3, times, 0);
        tm.enqueue(pkt(1000, 3), 0).unwrap();
        tm.enqueue(pkt(100, 1), 0).unwrap();
        assert_eq!(tm.next_event(0), Some(0));
        // Class 1 is served although class 3 has priority: 3 is paused.
        assert_eq!(tm.dequeue(0).unwrap().meta().class, 1);
        assert_eq!(tm.next_event(0), Some(5120));
        let busy = tm.busy_until();
        assert!(busy < 5120);
        assert!(tm.dequeue(busy).is_none());
        assert!(tm.dequeue(5119).is_none());
        assert_eq!(tm.dequeue(5120).unwrap().meta().class, 3);
        // XON resumes immediately; a PAUSE stops everything.
        tm.enqueue(pkt(100, 2), 6000).unwrap();
        tm.on_pause_received(10, 6000);
        assert_eq!(tm.next_event(6000), Some(6052));
        assert!(tm.dequeue(6000).is_none());
        tm.on_pfc_received(1 << 2, [0; 8], 6010);
        assert_eq!(tm.next_event(6010), Some(6010));
        assert!(tm.dequeue(6010).is_some());
    }

    #[test]
    fn control_first_and_never_paused() {
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&TmConfig {
            control_queue_pkts: 1,
            ..cfg()
        });
        tm.on_pause_received(0xffff, 0);
        tm.enqueue(pkt(100, 7), 0).unwrap();
        tm.enqueue_control(pkt(64, 0), 0).unwrap();
        let (_, r) = tm.enqueue_control(pkt(64, 0), 0).unwrap_err();
        assert_eq!(r, DropReason::QueueFull);
        assert_eq!(tm.port_stats().control_drops, 1);
        assert_eq!(tm.dequeue(0).unwrap().len(), 64);
        assert!(tm.dequeue(1_000_000).is_none());
        assert_eq!(tm.port_stats().control_tx, 1);
    }

    #[test]
    fn tail_drop_limits_and_bad_class() {
        let mut c = cfg();
        c.classes[0].limit_pkts = 2;
        c.classes[1].limit_bytes = 1500;
        c.classes[2].limit_bytes = 1000;
        c.classes[2].lossless = true;
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&c);
        tm.enqueue(pkt(100, 0), 0).unwrap();
        tm.enqueue(pkt(100, 0), 0).unwrap();
        assert_eq!(
            tm.enqueue(pkt(100, 0), 0).unwrap_err().1,
            DropReason::QueueFull
        );
        tm.enqueue(pkt(1000, 1), 0).unwrap();
        assert!(tm.enqueue(pkt(501, 1), 0).is_err());
        tm.enqueue(pkt(500, 1), 0).unwrap();
        tm.enqueue(pkt(1000, 2), 0).unwrap();
        assert!(tm.enqueue(pkt(1, 2), 0).is_err());
        assert_eq!(tm.class_stats(2).lossless_drops, 1);
        assert_eq!(
            tm.enqueue(pkt(100, 9), 0).unwrap_err().1,
            DropReason::Pipeline
        );
        let ps = tm.port_stats();
        assert_eq!(ps.drops.get(DropReason::QueueFull), 3);
        assert_eq!(ps.drops.get(DropReason::Pipeline), 1);
        assert_eq!(ps.bad_class, 1);
        assert_eq!(tm.class_stats(0).drops, 1);
        assert_eq!(tm.depth_bytes(1), 1500);
        assert_eq!(tm.total_bytes(), 2700);
    }

    #[test]
    fn ecn_marking_by_depth() {
        let mut c = TmConfig {
            rate_bps: 0,
            ..cfg()
        };
        c.classes[3].ecn = Some(RedParams {
            kmin_bytes: 2000,
            kmax_bytes: 4000,
            pmax: 0.2,
        });
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&c);
        // Depth before each packet: 0, 1000 (< Kmin): never marked.
        for _ in 0..2 {
            let i = tm.enqueue(ipv4_frame(1000, 3, ecn::ECT0), 0).unwrap();
            assert!(!i.marked);
        }
        while tm.dequeue(0).is_some() {}
        // Fill to 4000 unmarked-or-not, then everything at >= Kmax is marked.
        let mut fill_marks = 0;
        for _ in 0..4 {
            // Depths 0, 1000 (never), 2000 (p = 0), 3000 (p = 0.1).
            let i = tm.enqueue(ipv4_frame(1000, 3, ecn::ECT1), 0).unwrap();
            assert!(!i.marked || i.depth_bytes_before == 3000);
            fill_marks += i.marked as u64;
        }
        for k in 0..5 {
            let i = tm.enqueue(ipv4_frame(1000, 3, ecn::ECT0), 0).unwrap();
            assert!(i.marked, "packet {k} at depth {}", i.depth_bytes_before);
        }
        // Not-ECT at >= Kmax: kept, unchanged, counted.
        let i = tm.enqueue(ipv4_frame(1000, 3, ecn::NOT_ECT), 0).unwrap();
        assert!(!i.marked);
        let s = tm.class_stats(3);
        assert_eq!(s.ecn_marks, 5 + fill_marks);
        assert_eq!(s.ecn_not_ect, 1);
        // Drain: the marked ones carry CE, FLAG_ECN_MARKED and a valid IPv4 checksum.
        let mut seen_marked = 0;
        while let Some(p) = tm.dequeue(0) {
            let ip = &p.data()[14..34];
            assert_eq!(ipv4_checksum(ip), 0, "IPv4 checksum must stay valid");
            if p.meta().flags & FLAG_ECN_MARKED != 0 {
                assert_eq!(ip[1] & 3, ecn::CE);
                seen_marked += 1;
            }
        }
        assert_eq!(seen_marked, 5 + fill_marks);
    }

    #[test]
    fn next_event_is_exact() {
        // Random-ish schedule of arrivals, pauses and dequeues: whenever next_event says t,
        // dequeue(t) succeeds and dequeue(t - 1) (if >= now) does not.
        let mut rng = crate::asic::rng::Rng::new(5);
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&TmConfig {
            rate_bps: 25_000_000_000,
            sched: TmSched::Wrr { weights: [1; 8] },
            ..cfg()
        });
        let mut now = 0u64;
        for _ in 0..2000 {
            match rng.below(4) {
                0 | 1 => {
                    let _ = tm.enqueue(pkt(64 + rng.below(1400) as usize, rng.below(8) as u8), now);
                }
                2 => {
                    let mut times = [0u16; 8];
                    for t in times.iter_mut() {
                        *t = if rng.below(2) == 0 {
                            0
                        } else {
                            rng.below(500) as u16
                        };
                    }
                    tm.on_pfc_received(rng.below(256) as u8, times, now);
                }
                _ => {
                    if let Some(t) = tm.next_event(now) {
                        assert!(t >= now);
                        if t > now {
                            assert!(tm.dequeue(t - 1).is_none());
                        }
                        assert!(tm.dequeue(t).is_some(), "next_event {t} but nothing");
                        now = t;
                    } else {
                        assert!(tm.is_empty());
                    }
                }
            }
            now += rng.below(300) as u64;
        }
    }

    /// Marking at dequeue (the HPCC simulator's point): nothing is marked on the way in; on the
    /// way out each packet is judged on the depth it leaves behind (Kmin 2000, Kmax 3000,
    /// pmax 1): of five 1000-byte packets the first two leave 4000 and 3000 bytes (marked),
    /// the next three 2000 or less (never). At enqueue the same five would be judged on 0 to
    /// 4000 bytes before them: the last two marked instead.
    #[test]
    fn ecn_marking_at_dequeue() {
        let mut c = TmConfig {
            rate_bps: 0,
            ..cfg()
        };
        let red = RedParams {
            kmin_bytes: 2000,
            kmax_bytes: 3000,
            pmax: 1.0,
        };
        c.classes[3].ecn = Some(red);
        c.classes[3].ecn_at_dequeue = true;
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&c);
        for _ in 0..5 {
            let i = tm.enqueue(ipv4_frame(1000, 3, ecn::ECT0), 0).unwrap();
            assert!(!i.marked);
        }
        let mut marks = Vec::new();
        while let Some(p) = tm.dequeue(0) {
            let ip = &p.data()[14..34];
            assert_eq!(ipv4_checksum(ip), 0);
            marks.push(p.meta().flags & FLAG_ECN_MARKED != 0 && ip[1] & 3 == ecn::CE);
        }
        assert_eq!(marks, [true, true, false, false, false]);
        assert_eq!(tm.class_stats(3).ecn_marks, 2);
        c.classes[3].ecn_at_dequeue = false;
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&c);
        let at_enqueue: Vec<bool> = (0..5)
            .map(|_| {
                tm.enqueue(ipv4_frame(1000, 3, ecn::ECT0), 0)
                    .unwrap()
                    .marked
            })
            .collect();
        assert_eq!(at_enqueue, [false, false, false, true, true]);
    }

    #[test]
    fn bypass_only_on_an_idle_port() {
        let mut c = cfg();
        c.classes[1].limit_bytes = 500;
        c.classes[3].ecn = Some(RedParams {
            kmin_bytes: 0,
            kmax_bytes: 0,
            pmax: 1.0,
        });
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&c);
        // Idle: out at once, counted as enqueued and dequeued, link busy for its time.
        let p = tm.bypass(pkt(1000, 0), 100).unwrap();
        assert_eq!(p.meta().enq_ts, 100);
        assert_eq!(tm.busy_until(), 100 + serialization_ns(1024, RATE));
        let s = tm.class_stats(0);
        assert_eq!(
            (s.enq_pkts, s.deq_pkts, s.deq_bytes, s.max_depth_bytes),
            (1, 1, 1000, 1000)
        );
        assert_eq!((tm.port_stats().bypassed, tm.port_stats().tx_pkts), (1, 1));
        assert!(tm.is_empty());
        // Link busy: refused, untouched.
        let p = tm.bypass(pkt(100, 0), 101).unwrap_err();
        assert_eq!(p.meta().enq_ts, 0);
        let free = tm.busy_until();
        // Something queued (here: that packet): refused even once the link is free.
        tm.enqueue(p, 101).unwrap();
        assert!(tm.bypass(pkt(100, 2), free).is_err());
        assert!(tm.dequeue(free).is_some());
        let free = tm.busy_until();
        // A control frame waiting: refused.
        tm.enqueue_control(pkt(64, 0), free).unwrap();
        assert!(tm.bypass(pkt(100, 2), free).is_err());
        assert_eq!(tm.dequeue(free).unwrap().len(), 64);
        let free = tm.busy_until();
        // Paused class: refused; another class goes.
        let mut times = [0u16; 8];
        times[2] = 100;
        tm.on_pfc_received(1 << 2, times, free);
        assert!(tm.bypass(pkt(100, 2), free).is_err());
        let free = {
            assert!(tm.bypass(pkt(100, 4), free).is_ok());
            tm.busy_until()
        };
        // Over the class's byte limit: refused (enqueue then counts the drop).
        assert!(tm.bypass(pkt(600, 1), free).is_err());
        // Bad class: refused (enqueue counts it).
        assert!(tm.bypass(pkt(100, 9), free).is_err());
        // RED sees depth 0, as enqueue would: with Kmin = 0 an ECT frame is marked.
        let p = tm.bypass(ipv4_frame(200, 3, ecn::ECT0), free).unwrap();
        assert_eq!(p.data()[15] & 3, ecn::CE);
        assert_ne!(p.meta().flags & FLAG_ECN_MARKED, 0);
        assert_eq!(ipv4_checksum(&p.data()[14..34]), 0);
        assert_eq!(tm.class_stats(3).ecn_marks, 1);
        assert_eq!(tm.port_stats().bypassed, 3);
    }

    /// Departures `(id, time)` of `arrivals` (time, class, len, id), driven as the engine does:
    /// at each instant the arrivals, then transmission; `bypass` on or off.
    fn departures(
        c: &TmConfig,
        arrivals: &[(Nanos, u8, usize, u32)],
        bypass: bool,
    ) -> (Vec<(u32, Nanos)>, TmPortStats) {
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(c);
        let mut out = Vec::new();
        let mut ready = std::collections::VecDeque::new();
        let mut i = 0;
        let mut now: Nanos = 0;
        loop {
            let next_arrival = arrivals.get(i).map(|a| a.0);
            now = match (next_arrival, tm.next_event(now)) {
                (Some(a), Some(e)) => a.min(e),
                (Some(a), None) => a,
                (None, Some(e)) => e,
                (None, None) => break,
            };
            while let Some(&(t, class, len, id)) = arrivals.get(i) {
                if t > now {
                    break;
                }
                i += 1;
                let mut p = pkt(len, class);
                p.meta_mut().flow_hash = id;
                let p = if bypass {
                    match tm.bypass(p, now) {
                        Ok(p) => {
                            ready.push_back(p);
                            continue;
                        }
                        Err(p) => p,
                    }
                } else {
                    p
                };
                tm.enqueue(p, now).unwrap();
            }
            while let Some(p) = ready.pop_front().or_else(|| tm.dequeue(now)) {
                out.push((p.meta().flow_hash, now));
            }
        }
        (out, tm.port_stats().clone())
    }

    fn arrivals_from(steps: &[(u64, u8, usize)]) -> Vec<(Nanos, u8, usize, u32)> {
        let mut t = 0;
        steps
            .iter()
            .enumerate()
            .map(|(id, &(gap, class, len))| {
                t += gap;
                (t, class, len, id as u32)
            })
            .collect()
    }

    proptest::proptest! {
        /// One arrival per instant and a stateless scheduler (strict): the bypass changes
        /// nothing at all, departure by departure.
        #[test]
        fn bypass_is_invisible_with_one_arrival_per_instant(
            steps in proptest::collection::vec((1u64..400, 0u8..8, 64usize..1500), 1..150),
        ) {
            let c = cfg();
            let a = arrivals_from(&steps);
            let (with, s1) = departures(&c, &a, true);
            let (without, s2) = departures(&c, &a, false);
            proptest::prop_assert_eq!(with, without);
            proptest::prop_assert_eq!((s1.tx_pkts, s1.busy_ns), (s2.tx_pkts, s2.busy_ns));
            proptest::prop_assert_eq!(s2.bypassed, 0);
        }

        /// Any arrivals (several per instant allowed), any scheduler, frames of one length: the
        /// link is work-conserving either way, so the departure times are the same; every frame
        /// leaves once and each class stays FIFO.
        #[test]
        fn bypass_keeps_the_link_work_conserving(
            steps in proptest::collection::vec((0u64..200, 0u8..8), 1..150),
            len in 64usize..1500,
            kind in 0u8..3,
            strict_mask in 0u8..=255,
        ) {
            let mut c = cfg();
            c.strict_mask = strict_mask;
            c.sched = match kind {
                0 => TmSched::Strict,
                1 => TmSched::Wrr { weights: [1, 2, 3, 4, 1, 2, 3, 4] },
                _ => TmSched::Drr { quanta: [1500, 3000, 1500, 6000, 1500, 1500, 3000, 1500] },
            };
            let steps: Vec<_> = steps.iter().map(|&(g, cl)| (g, cl, len)).collect();
            let a = arrivals_from(&steps);
            let (with, _) = departures(&c, &a, true);
            let (without, _) = departures(&c, &a, false);
            let times = |v: &[(u32, Nanos)]| v.iter().map(|d| d.1).collect::<Vec<_>>();
            proptest::prop_assert_eq!(times(&with), times(&without));
            let mut ids: Vec<u32> = with.iter().map(|d| d.0).collect();
            ids.sort_unstable();
            proptest::prop_assert_eq!(ids, (0..a.len() as u32).collect::<Vec<_>>());
            for class in 0..8u8 {
                let order: Vec<u32> = with.iter().map(|d| d.0).filter(|&id| a[id as usize].1 == class).collect();
                proptest::prop_assert!(order.windows(2).all(|w| w[0] < w[1]), "class {} not FIFO: {:?}", class, order);
            }
        }

        /// A burst admitted through runs (`open_run`, `bypass_in_run`, `close_run`, a run
        /// closed when the queue changes or a frame is refused, as the engine does) leaves the
        /// traffic manager exactly as `bypass` frame by frame: the same frames bypassed, the
        /// same queued, the same link clock and every counter. Bursts at instants apart, a live
        /// slack or none, a paused class, byte limits that refuse some frames. (`bypass` is a
        /// run of one frame, so this checks what a longer run carries from frame to frame; the
        /// tests above check `bypass` itself against enqueue and dequeue.)
        #[test]
        fn a_bypass_run_is_bypass_frame_by_frame(
            bursts in proptest::collection::vec(
                (0u64..3000, proptest::collection::vec((0u8..9, 64usize..1500), 1..40)),
                1..12,
            ),
            slack in proptest::prop_oneof![proptest::strategy::Just(0u64), 1u64..20_000],
            paused in 0u8..8,
            limit in 1500u64..20_000,
        ) {
            let mut c = cfg();
            for cc in c.classes.iter_mut() {
                cc.limit_bytes = limit;
            }
            let mut one: TrafficManager<HeapBuf> = TrafficManager::new(&c);
            let mut runs: TrafficManager<HeapBuf> = TrafficManager::new(&c);
            for tm in [&mut one, &mut runs] {
                tm.set_tx_slack(slack);
                tm.on_pfc_received(1 << paused, [100; NUM_CLASSES], 0);
            }
            let (mut out1, mut out2) = (Vec::new(), Vec::new());
            let mut now = 0;
            for (gap, frames) in &bursts {
                now += gap;
                for (k, &(class, len)) in frames.iter().enumerate() {
                    let id = k as u32;
                    let mut p = pkt(len, class);
                    p.meta_mut().flow_hash = id;
                    match one.bypass(p, now) {
                        Ok(_) => out1.push((id, true)),
                        Err(p) => out1.push((id, one.enqueue(p, now).is_ok())),
                    }
                }
                let mut run: Option<BypassRun> = None;
                for (k, &(class, len)) in frames.iter().enumerate() {
                    let id = k as u32;
                    let mut p = pkt(len, class);
                    p.meta_mut().flow_hash = id;
                    let q = p.meta().egress_queue();
                    if run.as_ref().is_some_and(|r| r.queue() != q) {
                        runs.close_run(run.take().unwrap());
                    }
                    if run.is_none() {
                        run = runs.open_run(q, now);
                    }
                    let p = match run.as_mut() {
                        Some(r) => match runs.bypass_in_run(r, p, now) {
                            Ok(_) => {
                                out2.push((id, true));
                                continue;
                            }
                            Err(p) => {
                                runs.close_run(run.take().unwrap());
                                p
                            }
                        },
                        None => p,
                    };
                    out2.push((id, runs.enqueue(p, now).is_ok()));
                }
                if let Some(r) = run.take() {
                    runs.close_run(r);
                }
                proptest::prop_assert_eq!(&out1, &out2);
                proptest::prop_assert_eq!(one.busy_until(), runs.busy_until());
                proptest::prop_assert_eq!(one.port_stats(), runs.port_stats());
                for class in 0..NUM_CLASSES as u8 {
                    proptest::prop_assert_eq!(one.class_stats(class), runs.class_stats(class));
                }
                // Drain both between bursts, as a transmit would.
                let t = now.max(one.busy_until());
                while let (Some(a), Some(b)) = (one.dequeue(t), runs.dequeue(t)) {
                    proptest::prop_assert_eq!(a.meta().flow_hash, b.meta().flow_hash);
                }
                proptest::prop_assert_eq!(one.queued_pkts(), runs.queued_pkts());
            }
        }
    }

    /// A stage's queue choice (`meta.queue`) overrides the class's queue; the packet keeps its
    /// class (what PFC accounts it to).
    #[test]
    fn meta_queue_picks_the_queue() {
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&cfg());
        let mut p = pkt(100, 3);
        p.meta_mut().queue = 2;
        let info = tm.enqueue(p, 0).unwrap();
        assert_eq!(info.class, 2);
        assert_eq!((tm.depth_pkts(2), tm.depth_pkts(3)), (1, 0));
        let out = tm.dequeue(0).unwrap();
        assert_eq!((out.meta().class, out.meta().egress_queue()), (3, 2));
    }

    /// A held queue keeps its packets and sends none until the hold ends (by time or by
    /// `release`); the others go on; `next_event` knows when it ends; the bypass respects it.
    #[test]
    fn hold_stops_one_queue_until_release_or_time() {
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&TmConfig {
            sched: TmSched::Wrr { weights: [1; 8] },
            ..cfg()
        });
        assert!(tm.hold(2, 50_000));
        assert!(!tm.hold(8, 1), "queue out of range");
        let mut p = pkt(100, 3);
        p.meta_mut().queue = 2;
        let p = tm.bypass(p, 0).expect_err("a held queue is never bypassed");
        tm.enqueue(p, 0).unwrap();
        tm.enqueue(pkt(100, 3), 0).unwrap();
        let a = tm.dequeue(0).unwrap();
        assert_eq!(a.meta().egress_queue(), 3);
        let t1 = tm.busy_until();
        assert!(tm.dequeue(t1).is_none(), "queue 2 is held");
        assert_eq!(tm.next_event(t1), Some(50_000));
        assert!(tm.is_held(2, 49_999) && !tm.is_held(2, 50_000));
        assert_eq!(tm.dequeue(50_000).unwrap().meta().egress_queue(), 2);
        // A release ends a hold at once; a hold to the end of time has no next event.
        let mut p = pkt(100, 3);
        p.meta_mut().queue = 2;
        tm.hold(2, Nanos::MAX);
        tm.enqueue(p, 60_000).unwrap();
        assert_eq!(tm.next_event(60_000), None);
        assert!(tm.release(2));
        assert_eq!(tm.next_event(60_000), Some(60_000));
        assert!(tm.dequeue(60_000).is_some());
    }

    /// With queue 2 mapped to priority 3, a received PFC pause of priority 3 stops queues 2 and
    /// 3, and a pause of priority 2 stops neither.
    #[test]
    fn queue_priority_map_applies_received_pfc() {
        let mut prio = IDENTITY_PRIORITIES;
        prio[2] = 3;
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&TmConfig {
            queue_priority: prio,
            sched: TmSched::Wrr { weights: [1; 8] },
            ..cfg()
        });
        let mut p = pkt(100, 3);
        p.meta_mut().queue = 2;
        tm.enqueue(p, 0).unwrap();
        tm.enqueue(pkt(100, 3), 0).unwrap();
        tm.on_pfc_received(1 << 2, [0, 0, 1000, 0, 0, 0, 0, 0], 0);
        assert!(tm.dequeue(0).is_some(), "priority 2 pauses no queue here");
        let t = tm.busy_until();
        let mut times = [0u16; 8];
        times[3] = 1000;
        tm.on_pfc_received(1 << 3, times, t);
        assert!(tm.dequeue(t).is_none(), "priority 3 pauses queue 2 too");
        // 1000 quanta x 512 bit at 10 Gb/s = 51.2 us.
        assert_eq!(tm.next_event(t), Some(t + 51_200));
    }

    #[test]
    fn resize_tx_follows_what_egress_sent() {
        let cfg = TmConfig {
            rate_bps: 8_000_000_000, // 1 byte per ns
            frame_overhead_bytes: 0,
            ..TmConfig::default()
        };
        let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&cfg);
        let p = tm
            .bypass(HeapBuf::from_bytes(&[0u8; 1000]), 0)
            .ok()
            .unwrap();
        assert_eq!(tm.next_event(0), None);
        tm.enqueue(HeapBuf::from_bytes(&[0u8; 100]), 0)
            .ok()
            .unwrap();
        assert_eq!(tm.next_event(0), Some(1000));
        // Egress added 44 bytes of INT: the link is busy 44 ns longer.
        tm.resize_tx(p.len() as u64, 1044);
        assert_eq!(tm.next_event(0), Some(1044));
        assert_eq!(tm.stats.tx_bytes, 1044);
        tm.resize_tx(1044, 1000);
        assert_eq!(tm.next_event(0), Some(1000));
        // The same resize twice (the second from the memo), then at half the rate (not).
        tm.resize_tx(1000, 1044);
        tm.resize_tx(1000, 1044);
        assert_eq!(tm.next_event(0), Some(1088));
        tm.set_rate(4_000_000_000);
        tm.resize_tx(1000, 1044);
        assert_eq!(tm.next_event(0), Some(1176));
    }

    proptest::proptest! {
        /// `total_bytes` (read through the non-empty mask) is the sum of every class's depth,
        /// after any mix of enqueues (limits refusing some, a bad class), dequeues, bypasses and
        /// a paused class, and 0 when the port is idle.
        #[test]
        fn total_bytes_is_every_class_depth(
            ops in proptest::collection::vec((0u8..4, 0u8..9, 64usize..1500, 0u64..3000), 1..200),
        ) {
            let mut c = cfg();
            c.classes[2].limit_bytes = 4000;
            let mut tm: TrafficManager<HeapBuf> = TrafficManager::new(&c);
            tm.on_pfc_received(1 << 3, [0, 0, 0, 200, 0, 0, 0, 0], 0);
            let mut now = 0;
            for (op, class, len, dt) in ops {
                now += dt;
                match op {
                    0 | 1 => { let _ = tm.enqueue(pkt(len, class), now); }
                    2 => { let _ = tm.dequeue(now); }
                    _ => { let _ = tm.bypass(pkt(len, class), now); }
                }
                let sum: u64 = (0..NUM_CLASSES as u8).map(|q| tm.depth_bytes(q)).sum();
                proptest::prop_assert_eq!(tm.total_bytes(), sum);
                if tm.is_empty() {
                    proptest::prop_assert_eq!(tm.total_bytes(), 0);
                }
            }
        }
    }
}
