//! An emulated long-haul link on virtual time: an upstream sender at rate Rs that honors the PFC
//! frames the downstream appliance sends (after the one-way delay), the link itself (one-way delay
//! D both ways, serialization at Rs), and the downstream appliance (a real [`Switch`] built from a
//! config) whose egress toward the DC drains at a pattern the caller controls.
//!
//! The drain pattern is applied the way a congested DC fabric would: before each slot the caller
//! gives the fraction of the slot during which the egress may send, and the harness delivers a PFC
//! frame for the governed class to the egress port pausing it for the rest of the slot at its
//! start (so the egress sends at line rate for `fraction * T` of every slot).
//!
//! Causality: the upstream's decisions up to time t depend only on frames the switch sent before
//! t - D, so the harness alternates, per slot [b - T, b): schedule the upstream's departures up to b
//! (every pause frame arriving before b was sent before b - D <= b - T, already known), put them
//! on the switch's ingress at departure + serialization + D, advance the switch to b, and collect
//! what it sent (pause frames go back up the link, data toward the DC is the drain). This needs
//! T <= D, which the `[bifrost]` validation already demands.

use longhaul_control::config::Config;
use longhaul_dataplane::asic::pfc::PauseState;
use longhaul_dataplane::engine::{Pipeline, Switch};
use longhaul_dataplane::packet::{HeapPool, NUM_CLASSES};
use longhaul_dataplane::replay::Harness;
use longhaul_dataplane::time::{ns_to_quanta, serialization_ns, Nanos};
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::pfc as wpfc;
use longhaul_dataplane::wire::roce::{build_roce_v4, opcode, BthRepr, RoceAddrs};
use longhaul_pipelines::Admission;
use std::collections::VecDeque;
use std::net::Ipv4Addr;

/// The link and the traffic on it.
#[derive(Clone, Debug)]
pub struct LinkSpec {
    /// Name of the long-haul port (the governed ingress) and of the egress toward the DC.
    pub wan_port: String,
    pub dc_port: String,
    /// One-way delay D, ns.
    pub one_way_ns: Nanos,
    /// Rs, b/s (the upstream's sending rate and the link's).
    pub rate_bps: u64,
    /// Frame length of the upstream's data (bytes, without the per-frame wire overhead).
    pub frame_len: usize,
    /// Per-frame wire overhead (preamble, IFG, FCS), bytes, as the ports' `frame_overhead`.
    pub frame_overhead: u64,
    /// Bytes the upstream has to send (`None` = always backlogged).
    pub backlog_bytes: Option<u64>,
    /// Slot length used for sampling and the drain pattern (normally the config's T), ns.
    pub slot_ns: Nanos,
    /// Class (priority) of the data: DSCP 26 -> class 3 in the shipped configs.
    pub dscp: u8,
    /// The priority the drain pattern pauses on the DC egress.
    pub class: u8,
    /// Extra delay added to every pause frame the downstream sends (emulates a pause frame held
    /// behind a packet in transmission, section IV-D); `leak_every` slots only (0 = never).
    pub leak_delay_ns: Nanos,
    pub leak_every: u64,
}

/// What one slot looked like, sampled at its end (right after the Bifrost update, if any).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotSample {
    /// End of the slot.
    pub t: Nanos,
    /// L: bytes of (wan port, class) in the buffer (Bifrost's accounting, or classic PFC's).
    pub l: u64,
    /// F after the update (Bifrost only, else 0).
    pub f: i64,
    /// Pause quanta of this slot's frame (Bifrost only).
    pub quanta: u16,
    /// Bytes the DC egress sent in this slot, and the time it was allowed to send.
    pub drained_bytes: u64,
    pub drain_wire_ns: Nanos,
    pub open_ns: Nanos,
    /// The upstream still had data to send at the end of the slot.
    pub backlogged: bool,
    /// Packets that left toward the DC in this slot: the largest ingress-to-egress delay, ns.
    pub max_delay_ns: Nanos,
}

/// Totals over a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkTotals {
    pub sent_bytes: u64,
    pub sent_pkts: u64,
    pub drained_bytes: u64,
    pub drained_pkts: u64,
    pub pause_frames: u64,
    pub delay_sum_ns: u128,
    pub max_delay_ns: Nanos,
    pub max_l: u64,
}

/// The emulated link with its upstream sender and the downstream switch.
pub struct LongLink<L: Pipeline<HeapPool>> {
    pub h: Harness<HeapPool, L, Admission>,
    spec: LinkSpec,
    wan: usize,
    dc: usize,
    wan_id: u16,
    frame: Vec<u8>,
    pause: PauseState,
    /// Pause frames on their way up: (arrival at the upstream, enable, times).
    pauses: VecDeque<(Nanos, u8, [u16; NUM_CLASSES])>,
    /// The upstream's link is busy until this time (next possible departure).
    up_free: Nanos,
    remaining: Option<u64>,
    slot_end: Nanos,
    slot_no: u64,
    pub totals: LinkTotals,
}

impl<L: Pipeline<HeapPool>> LongLink<L> {
    /// The link in front of `sw` (built from `cfg`), starting at time 0 with the upstream sending.
    pub fn new(cfg: &Config, sw: Switch<HeapPool, L, Admission>, spec: LinkSpec) -> Self {
        let idx = |name: &str| {
            cfg.ports
                .iter()
                .position(|p| p.name == name)
                .unwrap_or_else(|| panic!("no port {name}"))
        };
        let (wan, dc) = (idx(&spec.wan_port), idx(&spec.dc_port));
        let wan_cfg = &cfg.ports[wan];
        let dst_ip = cfg
            .routes
            .iter()
            .find_map(|r| match r.prefix {
                longhaul_control::config::IpPrefix::V4 { addr, .. }
                    if r.hops.iter().any(|h| h.port == cfg.ports[dc].id) =>
                {
                    Some(Ipv4Addr::from(addr | 1))
                }
                _ => None,
            })
            .expect("a route to the DC port");
        let mut frame = vec![0u8; spec.frame_len.max(128)];
        let payload = vec![0u8; spec.frame_len.saturating_sub(14 + 20 + 8 + 12 + 4)];
        let n = build_roce_v4(
            &mut frame,
            &RoceAddrs {
                src_mac: MacAddr([2, 0, 0, 0, 0x20, 1]),
                dst_mac: MacAddr(wan_cfg.mac),
                src_ip: Ipv4Addr::new(10, 1, 0, 1),
                dst_ip,
                udp_sport: 49152,
                dscp: spec.dscp,
                ecn: 0b10,
            },
            &BthRepr {
                opcode: opcode::RC_RDMA_WRITE_MIDDLE,
                pkey: 0xffff,
                dest_qp: 0x123,
                ..BthRepr::default()
            },
            &payload,
        )
        .expect("data frame");
        frame.truncate(n);
        LongLink {
            h: Harness::new(sw),
            wan,
            dc,
            wan_id: wan_cfg.id,
            frame,
            pause: PauseState::new(),
            pauses: VecDeque::new(),
            up_free: 0,
            remaining: spec.backlog_bytes,
            slot_end: 0,
            slot_no: 0,
            totals: LinkTotals::default(),
            spec,
        }
    }

    fn ser(&self, len: usize) -> Nanos {
        serialization_ns(len as u64 + self.spec.frame_overhead, self.spec.rate_bps)
    }

    /// The upstream's departures in [now, until): honors every pause frame arrived by each
    /// departure (a frame arriving during a transmission waits for its end, 802.3).
    fn schedule_upstream(&mut self, until: Nanos) {
        let class = self.spec.class;
        let ser = self.ser(self.frame.len());
        let mut x = self.up_free;
        let arrive = |x: Nanos| x + ser + self.spec.one_way_ns;
        loop {
            while self.pauses.front().is_some_and(|p| p.0 <= x) {
                let (t, en, times) = self.pauses.pop_front().unwrap_or_default();
                self.pause.on_pfc(en, times, t, self.spec.rate_bps);
            }
            if x >= until || self.remaining == Some(0) {
                break;
            }
            if self.pause.is_paused(class, x) {
                let mut nx = self.pause.paused_until(class);
                if let Some(p) = self.pauses.front() {
                    nx = nx.min(p.0);
                }
                x = nx.max(x + 1).min(until.max(x + 1));
                if x >= until && self.pause.is_paused(class, x) {
                    break;
                }
                continue;
            }
            let len = self.frame.len() as u64;
            self.h.put(self.wan, arrive(x), &self.frame);
            self.totals.sent_bytes += len;
            self.totals.sent_pkts += 1;
            if let Some(r) = self.remaining.as_mut() {
                *r = r.saturating_sub(len);
            }
            x += ser;
        }
        self.up_free = x.max(self.up_free);
    }

    /// Run one slot, the DC egress open for `open` of it (0.0..=1.0); returns its sample.
    pub fn step(&mut self, open: f64) -> SlotSample {
        let t = self.spec.slot_ns;
        let start = self.slot_end;
        let end = start + t;
        self.slot_no += 1;
        self.schedule_upstream(end);
        // The DC fabric pauses the egress for the closed part of the slot.
        let open_ns = ((t as f64) * open.clamp(0.0, 1.0)).round() as Nanos;
        let dc_rate = self.h.sw.ports()[self.dc].rate_bps;
        let closed = t - open_ns;
        let mut times = [0u16; NUM_CLASSES];
        times[self.spec.class as usize] = ns_to_quanta(closed, dc_rate);
        let mut pfc = [0u8; wpfc::PFC_FRAME_LEN];
        wpfc::build_pfc(
            &mut pfc,
            MacAddr([2, 0, 0, 0, 0x10, 1]),
            1 << self.spec.class,
            times,
        )
        .expect("pfc");
        self.h.put(self.dc, start, &pfc);
        self.h.advance_to(end);
        let mut s = SlotSample {
            t: end,
            open_ns,
            ..SlotSample::default()
        };
        let leak = self.spec.leak_every != 0 && self.slot_no.is_multiple_of(self.spec.leak_every);
        for e in self.h.take() {
            if e.port_idx == self.wan {
                if let Ok(wpfc::MacControl::Pfc { enable, times }) = wpfc::parse(&e.data) {
                    let mut at = e.ts + self.ser(e.data.len()) + self.spec.one_way_ns;
                    if leak {
                        at += self.spec.leak_delay_ns;
                    }
                    self.pauses.push_back((at, enable, times));
                    self.totals.pause_frames += 1;
                }
            } else if e.port_idx == self.dc && e.meta.ingress_port == self.wan_id {
                let len = e.data.len() as u64;
                s.drained_bytes += len;
                s.drain_wire_ns += self.ser(e.data.len());
                let d = e.ts.saturating_sub(e.meta.rx_ts);
                s.max_delay_ns = s.max_delay_ns.max(d);
                self.totals.drained_bytes += len;
                self.totals.drained_pkts += 1;
                self.totals.delay_sum_ns += d as u128;
                self.totals.max_delay_ns = self.totals.max_delay_ns.max(d);
            }
        }
        // Pause frames can arrive out of order only with leak delays; keep arrival order.
        self.pauses.make_contiguous().sort_by_key(|p| p.0);
        let class = self.spec.class;
        let wan = self.wan as u16;
        let chain = self.h.sw.admission();
        if let Some(b) = chain.and_then(|c| c.head()) {
            s.l = b.queue_bytes(wan, class);
            if let Some(r) = b.last_slot(wan, class) {
                if r.n == end / t {
                    s.f = r.f;
                    s.quanta = r.quanta;
                } else {
                    s.f = b.virtual_incoming(wan, class).unwrap_or(0);
                }
            }
        } else if let Some(p) = chain.and_then(|c| c.tail()) {
            s.l = p.counter(wan, class);
        }
        self.totals.max_l = self.totals.max_l.max(s.l);
        s.backlogged = self.remaining != Some(0);
        self.slot_end = end;
        s
    }

    /// Peak L of the governed pair as the accountant saw it (between samples too).
    pub fn peak_l(&self) -> u64 {
        let (wan, class) = (self.wan as u16, self.spec.class);
        let chain = self.h.sw.admission();
        match (chain.and_then(|c| c.head()), chain.and_then(|c| c.tail())) {
            (Some(b), _) => b.max_queue_bytes(wan, class),
            (None, Some(p)) => p.max_counter(wan, class),
            _ => 0,
        }
    }
}
