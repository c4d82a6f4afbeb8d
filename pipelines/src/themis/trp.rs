//! THEMIS's Temporary Reaction Point (TRP): per-flow throttling of inter-DC data by
//! recirculation, driven by the CNPs the receivers send back over the WAN.
//!
//! Paper: `shared/papers/000_4444d6e70d68d606.txt` (THEMIS, ICNP), section V-B (flow
//! deceleration, Figure 7), Appendix B (Algorithm 1, "Throttling Algorithm"), Appendix D (rate
//! recovery without reordering) and Appendix E (direct recovery for NICs that accept
//! out-of-order delivery, e.g. IRN).
//!
//! This module is the set of reusable stages; parsing, the QP_field mapping, punting and the
//! recirculation port itself belong to the THEMIS pipeline that wires them.
//!
//! # Data structures (section V-B, Figure 7)
//!
//! - **CNP_Cache** ([`RegisterArray`] of `cnp_cache_size` cells, indexed by [`TrpKey::hash32`]
//!   mod size). The dataplane writes it *at once* on a CNP ([`Trp::on_cnp`]), so the very next
//!   data packet of the flow is throttled before the control plane has installed anything. A cell
//!   holds the full key (no false positives: another flow hashing to the same cell is never
//!   throttled by it) and the flow's Algorithm 1 state while the install is pending.
//! - **CNP_Store** ([`ExactTable`] of `cnp_store_capacity` entries, refused when full and
//!   counted). The control plane, on the punted CNP, inserts the flow's entry and then resets the
//!   CNP_Cache cell ([`Trp::install`], `TrpCommand::Install`): "When a table entry is inserted,
//!   the control plane resets the register, making expired register entries available for
//!   reuse". The entry's value is the flow's Algorithm 1 state, moved out of the cell.
//! - Data packets check CNP_Cache first, then CNP_Store; "If there is still no hit, it indicates
//!   the flow is not a target for decelerating" ([`Trp::on_data`] returns `Forward` and touches
//!   nothing).
//!
//! The flow state of a cell or an entry is [`FlowState`]: Algorithm 1's `cnp_num`,
//! `flow_status`, `cnp_time`, `loop_num` and `alpha`, plus Appendix D's register of the last PSN
//! forwarded to the correct port.
//!
//! # Key choice
//!
//! See [`KEY_DOC`] (also the documentation of [`TrpKey`]). In short: the key is the flow as its
//! *data packets* show it, `(data destination IP, data BTH.DestQP)` = (receiver IP, receiver's
//! QPN). A data packet yields it directly; a CNP needs the QP_field mapping from the sender's QPN
//! it carries to the receiver's QPN. The API takes the derived key.
//!
//! # Time
//!
//! No timers: Algorithm 1 evaluates its β test (lines 17-21) on every packet of the flow, CNP or
//! data, after the packet's own branch, and so does this module ([`Trp::on_cnp`],
//! [`Trp::on_data`]). It is deterministic on replay and needs no `tick`. A flow that receives no
//! packet at all sees its β test at its next packet, exactly as the pseudocode (and a switch
//! ASIC, which runs it per packet) does.
//!
//! # Where the paper is ambiguous, and what we do
//!
//! 1. **Line 5, `cnp_num % α == 1`, literally.** With α growing by one at each increment (line
//!    7) this fires on the 1st CNP, then on the (α₀+2)-th, and from then on on *every* CNP
//!    (once α = cnp_num, the next CNP gives `(α+1) % α == 1`). With α₀ = 5: increments at CNPs
//!    1, 7, 8, 9, 10, ... The prose of section V-B ("every α CNP triggers an increment ... the
//!    increment rate of loop_num gradually slows") describes something else; we implement the
//!    pseudocode as written and the tests pin this trace.
//! 2. **Lines 17-21 run once per quiet period.** Taken literally they run on every packet once
//!    `now - cnp_time > β`, halving α on each (down to 0, and line 5 would then divide by zero).
//!    The prose says it is a transition ("At this point, we change the flow_status to recover
//!    ... and reset cnp_num to 0. At the same time, we apply a multiplicative decrease to α"),
//!    so we apply it when the flow is `Throttled` and the test holds; a `Recover` flow is left as
//!    is until its next CNP.
//! 3. **α floor.** Line 19 is `α ← α/2` (integer division), no floor. We floor it at 1 so that
//!    line 5 never takes a modulo by zero. Note that, literally, α = 1 never fires line 5 again
//!    (`cnp_num % 1 == 0`): with α₀ = 5 a flow reaches α = 1 after three short episodes
//!    (5 → 6 → 3 → 4 → 2 → 3 → 1) and keeps its `loop_num` from then on.
//! 4. **`loop_num` is never reset** (no line of Algorithm 1 does): a flow that is throttled
//!    again after recovering starts from its old `loop_num` (plus line 6's increment). The
//!    recovery mode only changes how a `Recover` flow's packets are handled (below), not the
//!    state, so the Algorithm 1 trace is the same in both modes.
//! 5. **Line 17 after the branch.** A data packet that arrives after β is still handled as
//!    throttled (lines 10-12 run before line 17), and only then does the flow enter recovery.
//! 6. **Loop target read on every pass.** The ASIC stamps `pkt_loop_num` (line 11) into a header;
//!    our packets carry only `meta.loop_count` (loops done), so every ingress pass compares it
//!    with the flow's *current* target. `loop_num` only grows while throttled, so a packet never
//!    leaves earlier than the stamped value would let it, and recovery (which must release
//!    packets already looping, Appendix D) sees them. The target is capped at
//!    [`TrpParams::max_loop_num`] (the loop counter saturates at 255).
//! 7. **Reorder-free recovery (Appendix D).** "we allow subsequent packets to loop only once
//!    ... we use registers at the ingress to store the sequence number of data packets already
//!    redirected to the correct port. If the sequence number of the current packet in the
//!    pre-filled port loop immediately follows the stored value, then there is no need to loop
//!    that packet". For a packet of a `Recover` flow, with `L` the last PSN forwarded:
//!    - PSN == L + 1 (mod 2^24): forward, whether it is new or back from the loop;
//!    - otherwise a new packet (`loop_count == 0`) loops once;
//!    - otherwise (back from the loop) a packet *ahead* of L + 1 (its predecessor has not been
//!      forwarded yet, so it is still in the loop) loops again, to keep the order, until it has
//!      looped `max(loop_num, 1)` times, the most it would have looped throttled, after which it
//!      is forwarded anyway (counted in `recover_forced`: its predecessor was lost, or entered
//!      the loop under a larger `loop_num`). A packet behind L (a go-back-N retransmission, a
//!      duplicate) or with no L yet is forwarded.
//!
//!    Without the "ahead" rule a packet still looping from the throttled phase can overtake an
//!    earlier one (the loop returns packets in the order of their arrival time modulo the loop
//!    time, not of their PSNs), so "loop only once" alone does not keep the order; the PSN
//!    register is what does, as the paper's last sentence says. The bound is the one the
//!    authors' NS-3 code keeps (compiled out there, `if(0&&...)` in switch-node.cc's
//!    `SendToDev`): a packet is stamped `recycle_times_left = loop_num` at its first pass and
//!    never loops more, recovery only lets it out earlier. Holding a packet longer than that
//!    cannot save the order once its predecessor is lost (the sender goes back N anyway) and
//!    costs loop capacity: with 8 loops more, a 100 ns loop at 70% load (`longhaul reproduce
//!    themis`) filled up, dropped 203 062 packets and left two inter-DC flows unfinished.
//!
//!    What the paper does not say: no reorder-free release can shrink a flow's delay while its
//!    packets arrive closer together than one loop takes. A packet can only leave at its
//!    arrival time plus a whole number of loops, and after its predecessor; with arrival gap
//!    `g` < loop time `L`, that is the predecessor's number of loops again. So the delay (k
//!    loops at recovery) drains only as gaps of more than `L` appear, by about `g / L` loops per
//!    gap; a sender that has cut its rate on the CNPs drains it within a few packets, one at
//!    line rate keeps it (in order, never forced) until it pauses. The integration tests
//!    (`pipelines/tests/themis_trp.rs`) show both.
//! 8. **Direct recovery (Appendix D's naive solution, Appendix E for IRN).** Every packet of a
//!    `Recover` flow, new or looping, is forwarded at once. The paper phrases it as "set
//!    loop_num to 0"; we do not write the state (see 4).
//! 9. **Leaving recovery.** Algorithm 1 has no transition back to normal: a recovered flow whose
//!    loop has drained forwards every packet directly (its PSNs follow L), at the cost of a table
//!    entry. Entries are removed by the control plane (`TrpCommand::Remove`) or by the idle
//!    timeout [`TrpParams::store_idle_timeout`] ([`Trp::expire`]), both ours.
//! 10. **CNP_Cache collisions.** A CNP whose cell holds another pending flow does not overwrite
//!     it (that flow keeps its fast path) unless that flow's last CNP is more than β old (its
//!     install was lost: the store was full or the punt ring dropped it). The CNP is punted all
//!     the same; [`Trp::install`] then creates the flow and applies one CNP (lines 2-8) at the
//!     install time, so CNPs of a colliding flow that arrive before the install count as one.
//!
//! Nothing here allocates after [`Trp::new`] (the table and the register array are allocated
//! there), and nothing panics on packet data.

use longhaul_dataplane::asic::register::RegisterArray;
use longhaul_dataplane::asic::table::{ExactTable, TableConfig, TableFull, TableStats, WhenFull};
use longhaul_dataplane::engine::TableCounters;
use longhaul_dataplane::time::{Nanos, NS_PER_SEC, NS_PER_US};
use longhaul_dataplane::wire::roce::{psn_add, psn_diff, PSN_MASK, QPN_MASK};

/// How TRP's key is chosen (section V-B) and why. Also in the documentation of [`TrpKey`].
pub const KEY_DOC: &str = "\
TRP key = (dst_ip, qpn) of the throttled flow's DATA packets: dst_ip = the data packets' \
destination IP (the receiver, in this DC), qpn = the BTH.DestQP they carry (the receiver's QPN, \
the paper's sQPN: 'RDMA packets only carry the server-side QPN'). A data packet gives the key \
directly. A CNP from the receiver (toward the WAN) carries IP src = the receiver, IP dst = the \
sender, and BTH.DestQP = the SENDER's QPN (the paper's cQPN), which the data packets never carry, \
so the paper's two hashes ('a hash of its srcIp and cQPN' for the CNP, 'hashed using its dstIp \
and sQPN' for data) only meet through the QP_field table: the key of a CNP is (CNP IP src, \
QP_field[client = CNP IP src, dest = CNP IP dst, sQPN = CNP DestQP].cQPN), i.e. the entry the \
receiver host's own daemon reported (from its side, its local QPN is 'cQPN' and the remote \
sender's is 'sQPN'). Since a QPN is unique per host, (receiver IP, receiver QPN) names one QP \
without the sender's IP. IPv4 addresses are IPv4-mapped (::ffff:a.b.c.d) into the u128. A CNP \
with no QP_field entry cannot be mapped and is not throttled (the caller counts it).";

/// How a recovering flow's packets are handled (Appendix D / E).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecoveryMode {
    /// Appendix D: packets loop once unless their PSN immediately follows the last one
    /// forwarded, so the flow is never reordered (RNICs without out-of-order delivery).
    #[default]
    ReorderFree,
    /// Appendix D's naive solution, which Appendix E keeps for IRN-style RNICs that accept
    /// out-of-order delivery: every packet is forwarded at once.
    Direct,
}

/// TRP's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrpParams {
    /// α at a flow's first CNP (section VI: 5).
    pub alpha_init: u32,
    /// β: a flow with no CNP for longer than this enters recovery (section VI: 500 µs).
    pub beta_ns: Nanos,
    /// How recovering flows are released (Appendix D / E).
    pub recovery: RecoveryMode,
    /// CNP_Cache cells (section VI: 1024). At least 1 ([`Trp::new`] rounds 0 up to 1).
    pub cnp_cache_size: usize,
    /// CNP_Store entries, each holding one flow's state (section VI: 1024). Inserts into a full
    /// table are refused and counted (`store_full`).
    pub cnp_store_capacity: usize,
    /// Most loops a packet is given while throttled (ours: the loop counter is a `u8` that
    /// saturates at 255, so a larger `loop_num` could never be reached).
    pub max_loop_num: u8,
    /// CNP_Store entries not hit (by a CNP or a data packet) for this long are removed by
    /// [`Trp::expire`] (ours: Algorithm 1 never ends a flow). `None`: never.
    pub store_idle_timeout: Option<Nanos>,
}

impl Default for TrpParams {
    /// The paper's values (section VI): α = 5, β = 500 µs, 1024 cache cells and store entries;
    /// reorder-free recovery; loops capped at 255; idle entries removed after 1 s.
    fn default() -> Self {
        TrpParams {
            alpha_init: 5,
            beta_ns: 500 * NS_PER_US,
            recovery: RecoveryMode::ReorderFree,
            cnp_cache_size: 1024,
            cnp_store_capacity: 1024,
            max_loop_num: u8::MAX,
            store_idle_timeout: Some(NS_PER_SEC),
        }
    }
}

/// A throttled flow, as its data packets show it: `(destination IP, BTH.DestQP)`.
///
/// See [`KEY_DOC`]: `dst_ip` is the receiver's address (a CNP's IP source), `qpn` the
/// receiver's QPN (what data packets carry; for a CNP, the QP_field mapping of the sender's QPN
/// it carries). IPv4 addresses are stored IPv4-mapped (`::ffff:a.b.c.d`); `qpn` is masked to 24
/// bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TrpKey {
    pub dst_ip: u128,
    pub qpn: u32,
}

impl TrpKey {
    /// A key from an address already in `u128` form (IPv6, or IPv4-mapped).
    #[inline]
    pub const fn new(dst_ip: u128, qpn: u32) -> Self {
        TrpKey {
            dst_ip,
            qpn: qpn & QPN_MASK,
        }
    }

    /// A key for an IPv4 destination (stored as `::ffff:a.b.c.d`).
    #[inline]
    pub const fn v4(dst_ip: [u8; 4], qpn: u32) -> Self {
        let v4 = u32::from_be_bytes(dst_ip) as u128;
        Self::new(0xffff_u128 << 32 | v4, qpn)
    }

    /// A key for an IPv6 destination.
    #[inline]
    pub const fn v6(dst_ip: [u8; 16], qpn: u32) -> Self {
        Self::new(u128::from_be_bytes(dst_ip), qpn)
    }

    /// The CNP_Cache hash (deterministic: MurmurHash3's fmix64 over the folded key).
    #[inline]
    pub const fn hash32(&self) -> u32 {
        let mut h = (self.dst_ip as u64) ^ ((self.dst_ip >> 64) as u64).rotate_left(29);
        h ^= (self.qpn as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^= h >> 33;
        (h ^ (h >> 32)) as u32
    }
}

/// Algorithm 1's `flow_status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlowStatus {
    /// Not throttled: data packets are sent (line 14). A flow's state is created by its first
    /// CNP, which makes it `Throttled` at once, so an installed flow is never `Normal`.
    #[default]
    Normal,
    /// CNPs are arriving: data packets loop `loop_num` times (lines 3, 10-12).
    Throttled,
    /// No CNP for β (line 18): packets are released without reordering (Appendix D) or at once.
    Recover,
}

/// One flow's state: Algorithm 1's variables plus Appendix D's PSN register.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowState {
    /// CNPs since the flow was (re)throttled (line 2; reset at line 20).
    pub cnp_num: u32,
    /// Lines 3 and 18.
    pub flow_status: FlowStatus,
    /// Time of the last CNP (line 4).
    pub cnp_time: Nanos,
    /// Loops a throttled packet is given (line 6; never reset by Algorithm 1).
    pub loop_num: u32,
    /// α (lines 5, 7, 19).
    pub alpha: u32,
    /// PSN of the last data packet forwarded to the correct port (Appendix D), if any.
    pub last_fwd_psn: Option<u32>,
}

impl FlowState {
    /// The state of a flow before its first CNP: `Normal`, counters 0, α = `alpha_init`
    /// (at least 1).
    #[inline]
    pub const fn fresh(alpha_init: u32) -> Self {
        FlowState {
            cnp_num: 0,
            flow_status: FlowStatus::Normal,
            cnp_time: 0,
            loop_num: 0,
            alpha: if alpha_init == 0 { 1 } else { alpha_init },
            last_fwd_psn: None,
        }
    }

    /// Algorithm 1, lines 1-8 (the CNP branch), then lines 17-21. Returns `true` when line 6
    /// incremented `loop_num`.
    #[inline]
    pub fn apply_cnp(&mut self, now: Nanos, beta_ns: Nanos) -> bool {
        // Line 2: cnp_num <- cnp_num + 1.
        self.cnp_num = self.cnp_num.saturating_add(1);
        // Line 3: flow_status <- throttled.
        self.flow_status = FlowStatus::Throttled;
        // Line 4: cnp_time <- now.
        self.cnp_time = now;
        // Line 5: if cnp_num % α == 1 (α >= 1 always: floor of line 19, `fresh`).
        let fired = self.alpha != 0 && self.cnp_num % self.alpha == 1;
        if fired {
            // Line 6: loop_num <- loop_num + 1.
            self.loop_num = self.loop_num.saturating_add(1);
            // Line 7: α <- α + 1.
            self.alpha = self.alpha.saturating_add(1);
        }
        // Lines 17-21 (never true right after line 4, kept for fidelity).
        self.beta_check(now, beta_ns);
        fired
    }

    /// Algorithm 1, lines 17-21, once per quiet period (module documentation, point 2): if the
    /// flow is throttled and `now - cnp_time > β`, it enters recovery (line 18), α is halved
    /// (line 19, floored at 1: point 3) and `cnp_num` is reset (line 20). Returns `true` on that
    /// transition.
    #[inline]
    pub fn beta_check(&mut self, now: Nanos, beta_ns: Nanos) -> bool {
        // Line 17: if now - cnp_time > β.
        if self.flow_status == FlowStatus::Throttled && now.saturating_sub(self.cnp_time) > beta_ns
        {
            // Line 18: flow_status <- recover.
            self.flow_status = FlowStatus::Recover;
            // Line 19: α <- α / 2.
            self.alpha = (self.alpha / 2).max(1);
            // Line 20: cnp_num <- 0.
            self.cnp_num = 0;
            return true;
        }
        false
    }
}

/// What [`Trp::on_data`] decided for a data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataVerdict {
    /// Send it to its correct port (Algorithm 1 line 14, or the end of its loops; the pipeline
    /// clears its loop count).
    Forward,
    /// Send it (again) round the recirculation port (line 12, Appendix D).
    Recirculate,
}

/// What [`Trp::on_cnp`] did with a CNP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CnpOutcome {
    /// The flow has a CNP_Store entry, updated in place. Nothing to punt.
    Stored,
    /// Written to CNP_Cache cell `index` (new or pending flow). Punt the CNP so the control
    /// plane installs the flow ([`TrpCommand::Install`]).
    Cached { index: usize },
    /// CNP_Cache cell `index` holds another pending flow; nothing was written. Punt the CNP: the
    /// install creates the flow (module documentation, point 10).
    Collision { index: usize },
}

impl CnpOutcome {
    /// Whether the pipeline must punt the CNP to the control plane.
    #[inline]
    pub const fn punt(&self) -> bool {
        !matches!(self, CnpOutcome::Stored)
    }
}

/// What [`Trp::install`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Installed {
    /// The CNP_Cache state was moved into a new CNP_Store entry and the cell reset.
    FromCache,
    /// The cell held another flow: a new entry was created with one CNP applied at `now`.
    Fresh,
    /// The flow was already installed (a second punt of the same flow): nothing done.
    Already,
}

/// TRP's control-plane commands (for the pipeline's command ring).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrpCommand {
    /// Insert the flow's CNP_Store entry, then reset its CNP_Cache cell (section V-B).
    Install { key: TrpKey },
    /// Remove the flow's CNP_Store entry (and its CNP_Cache cell, if pending).
    Remove { key: TrpKey },
    /// Reset CNP_Cache cell `index`.
    ResetCache { index: usize },
}

longhaul_dataplane::counters! {
    /// TRP's counters.
    #[derive(Copy)]
    pub struct TrpStats: "themis.trp" {
        /// CNPs seen ([`Trp::on_cnp`]).
        pub cnps: u64,
        /// CNPs applied to an installed flow (CNP_Store hit).
        pub cnp_store_hits: u64,
        /// CNPs written to CNP_Cache (new or pending flows).
        pub cnp_cached: u64,
        /// CNPs whose cell held another pending flow (not cached).
        pub cache_collisions: u64,
        /// Stale pending flows overwritten by a colliding CNP (point 10).
        pub cache_stale_overwrites: u64,
        /// CNPs the pipeline was asked to punt.
        pub cnp_punts: u64,
        /// `loop_num` increments (Algorithm 1 line 6).
        pub loop_increments: u64,
        /// Flows that entered recovery (line 18).
        pub recovered_flows: u64,
        /// Flows installed into CNP_Store.
        pub installs: u64,
        /// Installs of a flow already installed (no-ops).
        pub install_dups: u64,
        /// Installs refused because CNP_Store was full.
        pub store_full: u64,
        /// CNP_Store entries removed by command.
        pub removes: u64,
        /// CNP_Store entries removed by the idle timeout.
        pub expired: u64,
        /// CNP_Cache cells reset (by install, remove or command).
        pub cache_resets: u64,
        /// Data packet passes that hit CNP_Cache.
        pub data_cache_hits: u64,
        /// Data packet passes that hit CNP_Store.
        pub data_store_hits: u64,
        /// New data packets (`loop_count == 0`) of throttled flows.
        pub throttled_pkts: u64,
        /// New data packets of recovering flows.
        pub recovering_pkts: u64,
        /// `Recirculate` decisions.
        pub recirculated: u64,
        /// Packets of tracked flows forwarded after at least one loop.
        pub released: u64,
        /// Recovering packets forwarded because their PSN follows the last one forwarded.
        pub recover_next_psn: u64,
        /// Recovering packets looped again to wait for their predecessor.
        pub recover_waits: u64,
        /// Recovering packets forwarded at the hold limit with their predecessor missing.
        pub recover_forced: u64,
    }
}

/// A CNP_Cache cell: a pending flow's key and state (`key == None`: free).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct CacheCell {
    key: Option<TrpKey>,
    state: FlowState,
}

/// TRP: CNP_Cache, CNP_Store and Algorithm 1 with recovery.
///
/// CNP_Store's entries are the table's keys; each flow's state is in `flows`, at the entry's
/// slot ([`ExactTable::lookup_slot`]), so that a packet back from the recirculation loop finds
/// its flow again through the slot its last pass found (`meta.user`, [`Trp::on_data_at`])
/// without hashing the key.
#[derive(Debug)]
pub struct Trp {
    params: TrpParams,
    cache: RegisterArray<CacheCell>,
    store: ExactTable<TrpKey, ()>,
    /// The state of CNP_Store's entry at each slot (a free slot's is stale, never read).
    flows: Box<[FlowState]>,
    stats: TrpStats,
}

/// A packet's hint for [`Trp::on_data_at`]: 0 = none, `slot + 1` = the CNP_Store slot where its
/// last pass found its flow (what THEMIS carries in `meta.user` round the loop).
pub const NO_SLOT_HINT: u32 = 0;

impl Trp {
    /// A TRP with its CNP_Cache and CNP_Store allocated now. A `cnp_cache_size` of 0 is taken as
    /// 1 and an `alpha_init` of 0 as 1 (both are validated by the config).
    pub fn new(params: TrpParams) -> Self {
        let mut params = params;
        params.cnp_cache_size = params.cnp_cache_size.max(1);
        params.alpha_init = params.alpha_init.max(1);
        // `RegisterArray::new` refuses only size 0, ruled out just above.
        let cache = RegisterArray::new(params.cnp_cache_size)
            .unwrap_or_else(|_| unreachable!("CNP_Cache size is at least 1"));
        let store = ExactTable::new(
            params.cnp_store_capacity,
            TableConfig {
                when_full: WhenFull::Refuse,
                idle_timeout: params.store_idle_timeout,
            },
        );
        Trp {
            params,
            cache,
            store,
            flows: vec![FlowState::default(); params.cnp_store_capacity].into_boxed_slice(),
            stats: TrpStats::default(),
        }
    }

    /// The parameters in force.
    #[inline]
    pub fn params(&self) -> &TrpParams {
        &self.params
    }

    /// The CNP_Cache cell of `key`.
    #[inline]
    pub fn cache_index(&self, key: &TrpKey) -> usize {
        self.cache.index_for_hash(key.hash32())
    }

    /// The dataplane half of a CNP from a receiver (section V-B): the flow's state is updated by
    /// Algorithm 1 (lines 1-8, 17-21) in CNP_Store if installed, else in CNP_Cache at once, so
    /// the next data packet is throttled before the control plane acts. `key` is the flow's key
    /// as derived by the caller through QP_field ([`KEY_DOC`]). Punt when
    /// [`CnpOutcome::punt`].
    pub fn on_cnp(&mut self, key: TrpKey, now: Nanos) -> CnpOutcome {
        self.stats.cnps += 1;
        let beta = self.params.beta_ns;
        if let Some(st) = self
            .store
            .lookup_slot(&key, now)
            .and_then(|s| self.flows.get_mut(s))
        {
            self.stats.cnp_store_hits += 1;
            if st.apply_cnp(now, beta) {
                self.stats.loop_increments += 1;
            }
            return CnpOutcome::Stored;
        }
        let index = self.cache_index(&key);
        let alpha_init = self.params.alpha_init;
        let stats = &mut self.stats;
        stats.cnp_punts += 1;
        let outcome = self.cache.modify(index, |cell| {
            match cell.key {
                Some(k) if k == key => {}
                None => {
                    *cell = CacheCell {
                        key: Some(key),
                        state: FlowState::fresh(alpha_init),
                    };
                }
                Some(_) if now.saturating_sub(cell.state.cnp_time) > beta => {
                    stats.cache_stale_overwrites += 1;
                    *cell = CacheCell {
                        key: Some(key),
                        state: FlowState::fresh(alpha_init),
                    };
                }
                Some(_) => {
                    stats.cache_collisions += 1;
                    return CnpOutcome::Collision { index };
                }
            }
            stats.cnp_cached += 1;
            if cell.state.apply_cnp(now, beta) {
                stats.loop_increments += 1;
            }
            CnpOutcome::Cached { index }
        });
        // `index` is always in range; a miss would be a bug, reported as a collision.
        outcome.unwrap_or(CnpOutcome::Collision { index })
    }

    /// The per-packet decision for a data packet of the flow `key` (data destination IP and
    /// BTH.DestQP) with BTH PSN `psn`, that has done `loop_count` loops (`meta.loop_count`).
    ///
    /// A flow in neither CNP_Cache nor CNP_Store is forwarded untouched (section V-B). Otherwise
    /// Algorithm 1 lines 10-15 decide (throttled: loop until `loop_num` loops are done), with
    /// Appendix D / E for a recovering flow, then lines 17-21 run (module documentation).
    pub fn on_data(&mut self, key: TrpKey, psn: u32, loop_count: u8, now: Nanos) -> DataVerdict {
        self.on_data_at(key, psn, loop_count, now, NO_SLOT_HINT).0
    }

    /// As [`on_data`](Self::on_data), given the packet's hint (`slot + 1` of the CNP_Store
    /// entry where its last pass found its flow, or [`NO_SLOT_HINT`]), and returning the hint
    /// for its next pass with the verdict. The same decision, counters and table refresh as
    /// `on_data`: the hint only spares the work when the slot still holds the flow's key
    /// ([`ExactTable::hit_slot`]: no hash, no CNP_Cache check); a stale hint (the entry removed
    /// or expired since, its slot reused by another flow) falls back to the lookup by key.
    #[inline]
    pub fn on_data_at(
        &mut self,
        key: TrpKey,
        psn: u32,
        loop_count: u8,
        now: Nanos,
        hint: u32,
    ) -> (DataVerdict, u32) {
        let psn = psn & PSN_MASK;
        // A hint whose slot still holds the flow's key: the flow is in CNP_Store, so it is not
        // in CNP_Cache (a cell takes a flow only when CNP_Store has no entry for it, `on_cnp`,
        // and the install empties the flow's cell), and the cache check, which would find
        // nothing and count nothing, is skipped with the hash.
        if let Some(s) = hint.checked_sub(1).map(|s| s as usize) {
            if self.store.hit_slot(s, &key, now) {
                debug_assert!(!self.is_cached(&key), "a flow in CNP_Store and CNP_Cache");
                if let Some(st) = self.flows.get_mut(s) {
                    self.stats.data_store_hits += 1;
                    let v = step_data(st, &self.params, &mut self.stats, psn, loop_count, now);
                    return (v, hint);
                }
            }
        }
        let params = self.params;
        let index = self.cache_index(&key);
        let stats = &mut self.stats;
        let cached = self.cache.modify(index, |cell| {
            if cell.key == Some(key) {
                stats.data_cache_hits += 1;
                Some(step_data(
                    &mut cell.state,
                    &params,
                    stats,
                    psn,
                    loop_count,
                    now,
                ))
            } else {
                None
            }
        });
        if let Some(Some(v)) = cached {
            return (v, NO_SLOT_HINT);
        }
        match self
            .store
            .lookup_slot(&key, now)
            .and_then(|s| Some((s, self.flows.get_mut(s)?)))
        {
            Some((s, st)) => {
                stats.data_store_hits += 1;
                let v = step_data(st, &params, stats, psn, loop_count, now);
                (v, s as u32 + 1)
            }
            None => (DataVerdict::Forward, NO_SLOT_HINT),
        }
    }

    /// The control-plane half of a CNP (section V-B): insert the flow's CNP_Store entry, then
    /// reset its CNP_Cache cell. The entry takes the state accumulated in the cell; if the cell
    /// holds another flow (a collision), a new state with one CNP applied at `now`. A flow
    /// already installed is left alone. `Err` when CNP_Store is full (counted in `store_full`;
    /// the cell is kept, so the flow stays throttled from the cache).
    pub fn install(&mut self, key: TrpKey, now: Nanos) -> Result<Installed, TableFull> {
        let index = self.cache_index(&key);
        let cell = self.cache.get(index).unwrap_or_default();
        let in_cell = cell.key == Some(key);
        if self.store.peek(&key).is_some() {
            self.stats.install_dups += 1;
            if in_cell && self.cache.reset(index) {
                self.stats.cache_resets += 1;
            }
            return Ok(Installed::Already);
        }
        let state = if in_cell {
            cell.state
        } else {
            let mut st = FlowState::fresh(self.params.alpha_init);
            if st.apply_cnp(now, self.params.beta_ns) {
                self.stats.loop_increments += 1;
            }
            st
        };
        if let Err(e) = self.store.insert(key, (), now) {
            self.stats.store_full += 1;
            return Err(e);
        }
        // The slot the insert gave the entry (a slot is below the capacity, the length of
        // `flows`).
        if let Some(st) = self
            .store
            .peek_slot(&key)
            .and_then(|s| self.flows.get_mut(s))
        {
            *st = state;
        }
        self.stats.installs += 1;
        if in_cell {
            if self.cache.reset(index) {
                self.stats.cache_resets += 1;
            }
            Ok(Installed::FromCache)
        } else {
            Ok(Installed::Fresh)
        }
    }

    /// Remove the flow: its CNP_Store entry and, if pending, its CNP_Cache cell. Returns whether
    /// anything was removed.
    pub fn remove(&mut self, key: TrpKey) -> bool {
        let mut done = false;
        if self.store.remove(&key).is_some() {
            self.stats.removes += 1;
            done = true;
        }
        let index = self.cache_index(&key);
        if self.cache.get(index).and_then(|c| c.key) == Some(key) && self.cache.reset(index) {
            self.stats.cache_resets += 1;
            done = true;
        }
        done
    }

    /// Reset CNP_Cache cell `index`. `false` when out of range.
    pub fn reset_cache(&mut self, index: usize) -> bool {
        if index < self.cache.len() && self.cache.reset(index) {
            self.stats.cache_resets += 1;
            return true;
        }
        false
    }

    /// Apply a control command at `now` (for `Pipeline::command`).
    pub fn apply(&mut self, cmd: TrpCommand, now: Nanos) -> Result<(), &'static str> {
        match cmd {
            TrpCommand::Install { key } => self
                .install(key, now)
                .map(|_| ())
                .map_err(|_| "CNP_Store full"),
            TrpCommand::Remove { key } => {
                self.remove(key);
                Ok(())
            }
            TrpCommand::ResetCache { index } => {
                if self.reset_cache(index) {
                    Ok(())
                } else {
                    Err("CNP_Cache index out of range")
                }
            }
        }
    }

    /// Remove up to `max` CNP_Store entries idle for [`TrpParams::store_idle_timeout`]; returns
    /// how many. O(max): call it from the worker loop with a small `max`.
    pub fn expire(&mut self, now: Nanos, max: usize) -> usize {
        let n = self.store.expire(now, max, |_, _| {});
        self.stats.expired += n as u64;
        n
    }

    /// The flow's state, from CNP_Cache if pending, else from CNP_Store (control plane, tests).
    pub fn flow(&self, key: &TrpKey) -> Option<FlowState> {
        let index = self.cache_index(key);
        match self.cache.get(index) {
            Some(c) if c.key == Some(*key) => Some(c.state),
            _ => self.stored(key),
        }
    }

    /// The flow's CNP_Store state, without counting or refreshing.
    fn stored(&self, key: &TrpKey) -> Option<FlowState> {
        self.store
            .peek_slot(key)
            .and_then(|s| self.flows.get(s))
            .copied()
    }

    /// Whether the flow is pending in CNP_Cache.
    pub fn is_cached(&self, key: &TrpKey) -> bool {
        self.cache.get(self.cache_index(key)).and_then(|c| c.key) == Some(*key)
    }

    /// Whether the flow has a CNP_Store entry.
    pub fn is_installed(&self, key: &TrpKey) -> bool {
        self.store.peek(key).is_some()
    }

    /// Counters.
    #[inline]
    pub fn stats(&self) -> &TrpStats {
        &self.stats
    }

    /// CNP_Store's counters.
    #[inline]
    pub fn store_stats(&self) -> TableStats {
        self.store.stats()
    }

    /// Every counter by stable name (`themis.trp.*`), for `Pipeline::counters`.
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }

    /// CNP_Store's counters by name, for `Pipeline::tables`.
    pub fn tables(&self, out: &mut dyn FnMut(&'static str, TableCounters)) {
        let s = self.store.stats();
        out(
            "cnp_store",
            TableCounters {
                hits: s.hits,
                misses: s.misses,
                entries: s.entries,
                capacity: self.store.capacity() as u64,
                full_events: s.full_events,
            },
        );
    }
}

/// One data-packet pass of a tracked flow: Algorithm 1 lines 10-15 with Appendix D / E for
/// `Recover`, Appendix D's PSN register on `Forward`, then lines 17-21.
#[inline]
fn step_data(
    st: &mut FlowState,
    p: &TrpParams,
    stats: &mut TrpStats,
    psn: u32,
    loop_count: u8,
    now: Nanos,
) -> DataVerdict {
    let fresh = loop_count == 0;
    let verdict = match st.flow_status {
        // Line 14: send pkt.
        FlowStatus::Normal => DataVerdict::Forward,
        // Lines 10-12: pkt_loop_num <- loop_num; redirect pkt (until it has looped that often).
        FlowStatus::Throttled => {
            if fresh {
                stats.throttled_pkts += 1;
            }
            let target = st.loop_num.min(p.max_loop_num as u32);
            if (loop_count as u32) < target {
                DataVerdict::Recirculate
            } else {
                DataVerdict::Forward
            }
        }
        FlowStatus::Recover => {
            if fresh {
                stats.recovering_pkts += 1;
            }
            match p.recovery {
                // Appendix D's naive solution / Appendix E: forward at once.
                RecoveryMode::Direct => DataVerdict::Forward,
                RecoveryMode::ReorderFree => recover_reorder_free(st, p, stats, psn, loop_count),
            }
        }
    };
    match verdict {
        DataVerdict::Recirculate => stats.recirculated += 1,
        DataVerdict::Forward => {
            if !fresh {
                stats.released += 1;
            }
            // Appendix D: "store the sequence number of data packets already redirected to the
            // correct port".
            st.last_fwd_psn = Some(psn);
        }
    }
    // Lines 17-21.
    if st.beta_check(now, p.beta_ns) {
        stats.recovered_flows += 1;
    }
    verdict
}

/// Appendix D for one packet of a recovering flow (module documentation, point 7).
#[inline]
fn recover_reorder_free(
    st: &FlowState,
    p: &TrpParams,
    stats: &mut TrpStats,
    psn: u32,
    loop_count: u8,
) -> DataVerdict {
    // "If the sequence number of the current packet ... immediately follows the stored value,
    // then there is no need to loop that packet".
    if let Some(last) = st.last_fwd_psn {
        if psn == psn_add(last, 1) {
            stats.recover_next_psn += 1;
            return DataVerdict::Forward;
        }
    }
    // "we allow subsequent packets ... to loop only once".
    if loop_count == 0 {
        return DataVerdict::Recirculate;
    }
    // Back from the loop and not next: wait for the predecessor if it is still to come.
    let ahead = matches!(st.last_fwd_psn, Some(last) if psn_diff(psn, last) > 1);
    if !ahead {
        return DataVerdict::Forward;
    }
    let limit = st.loop_num.min(p.max_loop_num as u32).max(1);
    if (loop_count as u32) < limit {
        stats.recover_waits += 1;
        DataVerdict::Recirculate
    } else {
        stats.recover_forced += 1;
        DataVerdict::Forward
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BETA: Nanos = 500 * NS_PER_US;

    fn key(n: u8, qpn: u32) -> TrpKey {
        TrpKey::v4([10, 0, 18, n], qpn)
    }

    #[test]
    fn key_forms() {
        let k = TrpKey::v4([10, 0, 17, 1], 0x0100_0118);
        assert_eq!(k.qpn, 0x118);
        assert_eq!(k.dst_ip, 0x0000_0000_0000_0000_0000_ffff_0a00_1101);
        let mut v6 = [0u8; 16];
        v6[10] = 0xff;
        v6[11] = 0xff;
        v6[12..].copy_from_slice(&[10, 0, 17, 1]);
        assert_eq!(TrpKey::v6(v6, 0x118), k);
        assert_ne!(TrpKey::v4([10, 0, 17, 1], 1).hash32(), k.hash32());
        assert_eq!(k.hash32(), TrpKey::v4([10, 0, 17, 1], 0x118).hash32());
    }

    #[test]
    fn first_cnp_throttles_with_one_loop() {
        let mut st = FlowState::fresh(5);
        assert!(st.apply_cnp(10, BETA));
        assert_eq!(
            st,
            FlowState {
                cnp_num: 1,
                flow_status: FlowStatus::Throttled,
                cnp_time: 10,
                loop_num: 1,
                alpha: 6,
                last_fwd_psn: None,
            }
        );
    }

    #[test]
    fn beta_is_strict_and_once_per_quiet_period() {
        let mut st = FlowState::fresh(5);
        st.apply_cnp(0, BETA);
        assert!(!st.beta_check(BETA, BETA)); // line 17: strictly greater
        assert!(st.beta_check(BETA + 1, BETA));
        assert_eq!(
            (st.flow_status, st.alpha, st.cnp_num, st.loop_num),
            (FlowStatus::Recover, 3, 0, 1)
        );
        assert!(!st.beta_check(10 * BETA, BETA));
        assert_eq!(st.alpha, 3);
    }

    #[test]
    fn alpha_floor_is_one() {
        let mut st = FlowState::fresh(1);
        for i in 0..4 {
            st.apply_cnp(i * 10 * BETA, BETA);
            assert_eq!(st.loop_num, 0, "cnp_num % 1 is never 1");
            st.beta_check(i * 10 * BETA + BETA + 1, BETA);
            assert_eq!(st.alpha, 1);
        }
    }

    #[test]
    fn throttled_loops_then_forwards() {
        let mut t = Trp::new(TrpParams::default());
        let k = key(1, 7);
        assert_eq!(t.on_data(k, 1, 0, 0), DataVerdict::Forward);
        assert!(t.on_cnp(k, 100).punt());
        assert_eq!(t.on_data(k, 2, 0, 110), DataVerdict::Recirculate);
        assert_eq!(t.on_data(k, 2, 1, 120), DataVerdict::Forward);
        assert_eq!(t.flow(&k).unwrap().last_fwd_psn, Some(2));
        assert_eq!(t.stats().data_cache_hits, 2);
        assert_eq!(t.stats().throttled_pkts, 1);
        assert_eq!(t.stats().released, 1);
    }

    #[test]
    fn install_moves_state_and_resets_cell() {
        let mut t = Trp::new(TrpParams::default());
        let k = key(2, 9);
        t.on_cnp(k, 0);
        t.on_cnp(k, 10);
        let before = t.flow(&k).unwrap();
        assert_eq!(t.install(k, 20), Ok(Installed::FromCache));
        assert!(!t.is_cached(&k));
        assert!(t.is_installed(&k));
        assert_eq!(t.flow(&k), Some(before));
        assert_eq!(t.install(k, 30), Ok(Installed::Already));
        assert_eq!(t.on_cnp(k, 40), CnpOutcome::Stored);
        assert_eq!(t.flow(&k).unwrap().cnp_num, 3);
        assert!(t.remove(k));
        assert!(!t.remove(k));
        assert_eq!(t.flow(&k), None);
    }

    #[test]
    fn collision_does_not_overwrite_fresh_pending_flow() {
        let mut t = Trp::new(TrpParams {
            cnp_cache_size: 1,
            ..TrpParams::default()
        });
        let (a, b) = (key(1, 1), key(2, 2));
        assert_eq!(t.on_cnp(a, 0), CnpOutcome::Cached { index: 0 });
        assert_eq!(t.on_cnp(b, 10), CnpOutcome::Collision { index: 0 });
        assert!(t.is_cached(&a));
        assert_eq!(t.on_data(b, 1, 0, 20), DataVerdict::Forward);
        assert_eq!(t.install(b, 30), Ok(Installed::Fresh));
        let sb = t.flow(&b).unwrap();
        assert_eq!((sb.cnp_num, sb.loop_num, sb.cnp_time), (1, 1, 30));
        assert!(t.is_cached(&a));
        // A stale pending flow is overwritten.
        assert_eq!(
            t.on_cnp(key(3, 3), BETA + 1),
            CnpOutcome::Cached { index: 0 }
        );
        assert_eq!(t.stats().cache_stale_overwrites, 1);
        assert!(!t.is_cached(&a));
    }

    #[test]
    fn commands() {
        let mut t = Trp::new(TrpParams {
            cnp_store_capacity: 1,
            ..TrpParams::default()
        });
        let (a, b) = (key(1, 1), key(2, 2));
        t.on_cnp(a, 0);
        assert_eq!(t.apply(TrpCommand::Install { key: a }, 5), Ok(()));
        t.on_cnp(b, 6);
        assert_eq!(
            t.apply(TrpCommand::Install { key: b }, 7),
            Err("CNP_Store full")
        );
        assert!(t.is_cached(&b));
        let idx = t.cache_index(&b);
        assert_eq!(t.apply(TrpCommand::ResetCache { index: idx }, 8), Ok(()));
        assert!(!t.is_cached(&b));
        assert!(t.apply(TrpCommand::ResetCache { index: 5000 }, 8).is_err());
        assert_eq!(t.apply(TrpCommand::Remove { key: a }, 9), Ok(()));
        assert_eq!(t.store_stats().entries, 0);
        let mut names = 0;
        t.counters(&mut |_, _| names += 1);
        assert_eq!(names, 23);
        let mut full = 0;
        t.tables(&mut |n, c| {
            assert_eq!(n, "cnp_store");
            full = c.full_events;
        });
        assert_eq!(full, 1);
    }

    #[test]
    fn idle_entries_expire() {
        let mut t = Trp::new(TrpParams {
            store_idle_timeout: Some(1_000),
            ..TrpParams::default()
        });
        let k = key(1, 1);
        t.on_cnp(k, 0);
        t.install(k, 0).unwrap();
        t.on_data(k, 1, 0, 500);
        assert_eq!(t.expire(1_499, 8), 0);
        assert_eq!(t.expire(1_500, 8), 1);
        assert_eq!(t.stats().expired, 1);
        assert_eq!(t.on_data(k, 2, 0, 1_600), DataVerdict::Forward);
    }

    #[test]
    fn recover_hold_is_bounded_by_loop_num() {
        let mut t = Trp::new(TrpParams::default());
        let k = key(1, 1);
        // CNPs 1, 7 and 8 increment loop_num (point 1): three loops.
        for i in 0..8 {
            t.on_cnp(k, i);
        }
        assert_eq!(t.flow(&k).unwrap().loop_num, 3);
        assert_eq!(t.on_data(k, 10, 3, 10), DataVerdict::Forward);
        // Enter recovery; PSN 11 is lost, 12 waits for it, at most as long as it would have
        // looped throttled.
        t.on_data(k, 30, 5, BETA + 10);
        assert_eq!(t.flow(&k).unwrap().flow_status, FlowStatus::Recover);
        let now = BETA + 11;
        t.on_data(k, 10, 5, now); // last forwarded = 10 again (behind)
        assert_eq!(t.on_data(k, 12, 0, now), DataVerdict::Recirculate);
        assert_eq!(t.on_data(k, 12, 1, now), DataVerdict::Recirculate);
        assert_eq!(t.on_data(k, 12, 2, now), DataVerdict::Recirculate);
        assert_eq!(t.stats().recover_forced, 0);
        assert_eq!(t.on_data(k, 12, 3, now), DataVerdict::Forward);
        assert_eq!(t.stats().recover_forced, 1);
        assert_eq!(t.on_data(k, 13, 0, now), DataVerdict::Forward);
    }

    /// A packet's slot hint ([`Trp::on_data_at`]) changes the cost, not the result: two TRPs
    /// given the same CNPs, installs, removals, expiries and data packets, one passing each
    /// looping packet the hint of its last pass and one looking every pass up by key, decide
    /// the same and count the same, also when a hint is stale (its flow removed or expired
    /// while the packet loops, the slot given to another flow).
    #[test]
    fn slot_hints_decide_as_lookups_by_key() {
        let params = TrpParams {
            cnp_store_capacity: 4,
            store_idle_timeout: Some(40_000),
            ..TrpParams::default()
        };
        let (mut a, mut b) = (Trp::new(params), Trp::new(params));
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        // The packets in the loop: (key, PSN, loops done, hint).
        let mut looping: Vec<(TrpKey, u32, u8, u32)> = Vec::new();
        let (mut now, mut psn) = (0, 0u32);
        let (mut fresh, mut stale) = (0, 0);
        for _ in 0..30_000 {
            now += rand(3_000);
            let k = key(rand(6) as u8, 0x100);
            let (k, lc, hint) = match rand(10) {
                0 => {
                    assert_eq!(a.on_cnp(k, now), b.on_cnp(k, now));
                    continue;
                }
                1 => {
                    assert_eq!(a.install(k, now), b.install(k, now));
                    continue;
                }
                2 if rand(4) == 0 => {
                    assert_eq!(a.remove(k), b.remove(k));
                    continue;
                }
                3 => {
                    assert_eq!(a.expire(now, 2), b.expire(now, 2));
                    continue;
                }
                4 | 5 => {
                    psn += 1;
                    (k, 0, NO_SLOT_HINT)
                }
                _ if !looping.is_empty() => {
                    let (k, p, lc, hint) = looping.swap_remove(rand(looping.len() as u64) as usize);
                    psn = p;
                    let holds = b.store.peek_slot(&k).map(|s| s as u32 + 1) == Some(hint);
                    if hint != NO_SLOT_HINT {
                        if holds {
                            fresh += 1;
                        } else {
                            stale += 1;
                        }
                    }
                    (k, lc, hint)
                }
                _ => continue,
            };
            let va = a.on_data(k, psn, lc, now);
            let (vb, next) = b.on_data_at(k, psn, lc, now, hint);
            assert_eq!(va, vb);
            if vb == DataVerdict::Recirculate {
                looping.push((k, psn, lc.saturating_add(1), next));
            }
            assert_eq!(a.stats(), b.stats());
            assert_eq!(a.store_stats(), b.store_stats());
            for n in 0..6 {
                assert_eq!(a.flow(&key(n, 0x100)), b.flow(&key(n, 0x100)));
            }
        }
        assert!(fresh > 1_000 && stale > 10, "fresh {fresh}, stale {stale}");
    }
}
