//! Deterministic replay of pcaps through a switch built from a config: the library behind
//! `longhaul replay` and the conformance runner.
//!
//! Inputs are read as the replay needs them ([`StreamInput`]: a pcap file of any size in bounded
//! memory) and what the switch sends goes to a sink as it leaves ([`FrameSink`]), so memory does
//! not grow with the trace. [`replay_with`] is the in-memory form (records in, records out) that
//! tests and the conformance runner use; it runs the same code.

use crate::build::switch_spec;
use crate::mechanism::MechanismSet;
use crate::Error;
use longhaul_control::config::Config;
use longhaul_control::plane::{Inline, PipelineControl};
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::engine::{Admission, Pipeline, Switch, SwitchSnapshot};
use longhaul_dataplane::packet::{HeapPool, PacketBuf, NUM_CLASSES};
use longhaul_dataplane::pcap::PcapRecord;
use longhaul_dataplane::replay::{
    advance, run_streams, Driver, FrameSource, InputSource, Records, ReplayOptions, ReplaySummary,
    Sink, Streams,
};
use longhaul_dataplane::time::Nanos;
use std::collections::BTreeMap;
use std::io;

/// Packets offered to one ingress port (by port id), in memory.
pub struct ReplayInput {
    pub port: u16,
    pub records: Vec<PcapRecord>,
}

/// Packets offered to one ingress port (by port id), read as they are needed.
pub struct StreamInput<'a> {
    pub port: u16,
    /// What to call it in an error (a file name).
    pub name: String,
    pub source: Box<dyn FrameSource + 'a>,
}

/// Where a replay's transmitted frames go: (egress port id, departure time, frame).
pub type FrameSink<'s> = dyn FnMut(u16, Nanos, &[u8]) + 's;

/// Told every [`PROGRESS_EVERY`] input frames: (frames offered so far, virtual time).
pub type Progress<'p> = dyn FnMut(u64, Nanos) + 'p;

/// Input frames between two [`Progress`] calls.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// Given the switch's counters at a virtual instant (queue depths, port counters, drops).
pub type Sample<'s> = dyn FnMut(Nanos, &SwitchSnapshot) + 's;

/// What a replay reports while it runs.
#[derive(Default)]
pub struct ReplayHooks<'h> {
    /// Told every [`PROGRESS_EVERY`] input frames how far it got.
    pub progress: Option<&'h mut Progress<'h>>,
    /// A snapshot every `.0` ns of virtual time from the first frame (and one at the end).
    pub sample: Option<(Nanos, &'h mut Sample<'h>)>,
}

/// What each egress port emitted (with virtual departure timestamps), and the switch's counters.
pub struct ReplayResult {
    /// Port id -> frames in departure order. Every configured port has an entry.
    pub outputs: BTreeMap<u16, Vec<PcapRecord>>,
    /// Counters as (name, value), in a stable order; zero counters included for ports and queues,
    /// drop reasons only when non-zero.
    pub counters: Vec<(String, u64)>,
    pub summary: ReplaySummary,
}

/// What a streaming replay reports (its frames went to the sink).
pub struct ReplayStats {
    /// As [`ReplayResult::counters`].
    pub counters: Vec<(String, u64)>,
    /// Every counter, structured (ports, drops by reason, pipeline counters).
    pub snapshot: SwitchSnapshot,
    pub summary: ReplaySummary,
    /// Timestamp of the first input frame.
    pub first_ts: Option<Nanos>,
}

/// Replay through a switch of `pipeline`, its control handler running inline
/// `control_latency_ns` after each punt, so replay stays deterministic; in memory.
pub fn replay_with<L, H, A>(
    mechanisms: &dyn MechanismSet,
    cfg: &Config,
    pipeline: L,
    handler: H,
    inputs: Vec<ReplayInput>,
) -> Result<ReplayResult, Error>
where
    L: Pipeline<HeapPool, Command = H::Command>,
    H: PipelineControl,
    A: Admission,
{
    in_memory(cfg, inputs, |streams, sink| {
        let hooks = ReplayHooks::default();
        replay_stream_with::<L, H, A>(mechanisms, cfg, pipeline, handler, streams, sink, hooks)
    })
}

/// Run `replay` (a streaming replay) on `inputs` held in memory, collecting every port's frames.
pub fn in_memory(
    cfg: &Config,
    inputs: Vec<ReplayInput>,
    replay: impl FnOnce(Vec<StreamInput<'static>>, &mut FrameSink<'_>) -> Result<ReplayStats, Error>,
) -> Result<ReplayResult, Error> {
    let streams = inputs
        .into_iter()
        .map(|i| StreamInput {
            port: i.port,
            name: format!("input on port {}", i.port),
            source: Box::new(Records::new(i.records)) as Box<dyn FrameSource>,
        })
        .collect();
    let mut outputs: BTreeMap<u16, Vec<PcapRecord>> =
        cfg.ports.iter().map(|p| (p.id, Vec::new())).collect();
    let mut sink = |id: u16, ts: Nanos, data: &[u8]| {
        if let Some(v) = outputs.get_mut(&id) {
            v.push(PcapRecord {
                ts_ns: ts,
                data: data.to_vec(),
            });
        }
    };
    let st = replay(streams, &mut sink)?;
    Ok(ReplayResult {
        outputs,
        counters: st.counters,
        summary: st.summary,
    })
}

/// Counts frames taken and reports progress.
struct Counted<'s, 'p, 'a> {
    inner: &'s mut Streams<'a>,
    progress: &'p mut Progress<'p>,
    now: Nanos,
}

impl InputSource for Counted<'_, '_, '_> {
    #[inline]
    fn peek_ts(&mut self) -> Option<Nanos> {
        self.inner.peek_ts()
    }
    fn next_frame(&mut self) -> Option<(usize, &[u8])> {
        if let Some(t) = self.inner.peek_ts() {
            self.now = self.now.max(t);
        }
        let n = self.inner.taken_frames + 1;
        if n.is_multiple_of(PROGRESS_EVERY) {
            (self.progress)(n, self.now);
        }
        self.inner.next_frame()
    }
}

/// Run the event loop in steps of `every` ns of virtual time from the first input frame, with
/// `on_sample` told the switch's counters after each step (and at the end). The steps only stop
/// and resume the loop: the replay's frames and times are those of an unsampled one. A quiet
/// stretch (nothing arrives or leaves) is skipped to its end, not sampled step by step.
fn sampled<L, A, I, S>(
    d: &mut Driver<longhaul_dataplane::HeapBuf>,
    sw: &mut Switch<HeapPool, L, A>,
    src: &mut I,
    sink: &mut S,
    every: Nanos,
    on_sample: &mut Sample<'_>,
) where
    L: Pipeline<HeapPool>,
    A: Admission,
    I: InputSource,
    S: Sink<longhaul_dataplane::HeapBuf>,
{
    let Some(t0) = src.peek_ts() else {
        return;
    };
    let mut snap = SwitchSnapshot::default();
    let mut at = t0;
    loop {
        at += every;
        advance(d, sw, src, Some(at), sink);
        sw.snapshot_into(at, &mut snap);
        on_sample(at, &snap);
        if !d.summary.truncated {
            break;
        }
        // Work is left: resume from the step that holds the next event.
        let next = match (src.peek_ts(), sw.next_event(d.now())) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => break,
        };
        if next > at + every {
            at += (next - at) / every * every;
        }
    }
}

/// Replay `inputs` through a switch of `pipeline` (as [`replay_with`]), frames read as needed
/// and sent to `sink` as they leave; `hooks` are told how far it got and sample the switch's
/// counters on virtual time. A read error in an input fails the replay, naming the input.
pub fn replay_stream_with<L, H, A>(
    mechanisms: &dyn MechanismSet,
    cfg: &Config,
    pipeline: L,
    handler: H,
    inputs: Vec<StreamInput<'_>>,
    sink: &mut FrameSink<'_>,
    hooks: ReplayHooks<'_>,
) -> Result<ReplayStats, Error>
where
    L: Pipeline<HeapPool, Command = H::Command>,
    H: PipelineControl,
    A: Admission,
{
    // The configured pool, its buffers made on first use: a replay holds what is in flight
    // (queues, held packets), not the whole pool (hundreds of MiB for the shipped configs).
    let pool = HeapPool::lazy(cfg.switch.pool_buffers, cfg.switch.buffer_data_room);
    let mut sw: Switch<HeapPool, L, A> =
        Switch::with_admission(switch_spec(cfg, mechanisms), pool, pipeline);
    sw.set_inline_control(Box::new(Inline(handler)), cfg.control.control_latency_ns);
    let mut names = Vec::with_capacity(inputs.len());
    let mut sources = Vec::with_capacity(inputs.len());
    for i in inputs {
        let idx = sw.port_idx(i.port).ok_or_else(|| {
            let ids: Vec<String> = sw.ports().iter().map(|p| p.id.to_string()).collect();
            Error::UnknownPort {
                port: i.port,
                known: ids.join(", "),
            }
        })?;
        names.push(i.name);
        sources.push((idx, i.source));
    }
    let ids: Vec<u16> = sw.ports().iter().map(|p| p.id).collect();
    let mut out = |idx: usize, ts: Nanos, pkt: &longhaul_dataplane::HeapBuf| {
        if let Some(&id) = ids.get(idx) {
            sink(id, ts, pkt.data());
        }
    };
    let mut streams = Streams::new(sources);
    let mut noop = |_: u64, _: Nanos| {};
    let mut src = Counted {
        inner: &mut streams,
        progress: hooks.progress.unwrap_or(&mut noop),
        now: 0,
    };
    let mut d = Driver::default();
    let summary = match hooks.sample {
        None => run_streams(&mut sw, &mut src, ReplayOptions::default(), &mut out),
        Some((every, on_sample)) => {
            sampled(&mut d, &mut sw, &mut src, &mut out, every.max(1), on_sample);
            d.summary
        }
    };
    if let Some((k, e)) = streams.error() {
        return Err(Error::Input {
            name: names[k].clone(),
            error: io::Error::new(e.kind(), e.to_string()),
        });
    }
    if summary.stalled {
        return Err(Error::Stalled);
    }
    let mut snapshot = SwitchSnapshot::default();
    sw.snapshot_into(0, &mut snapshot);
    // Packet conservation (issue 20): a frame lost without a counter fails the replay.
    snapshot.ledger().check()?;
    Ok(ReplayStats {
        counters: snapshot_counters(mechanisms, &snapshot),
        snapshot,
        summary,
        first_ts: streams.first_ts,
    })
}

/// The switch's counters as (name, value) pairs in a stable order.
pub fn counters<L, A>(
    mechanisms: &dyn MechanismSet,
    sw: &Switch<HeapPool, L, A>,
) -> Vec<(String, u64)>
where
    L: Pipeline<HeapPool>,
    A: Admission,
{
    let mut snap = SwitchSnapshot::default();
    sw.snapshot_into(0, &mut snap);
    snapshot_counters(mechanisms, &snap)
}

/// A counter snapshot as (name, value) pairs in a stable order: per port rx/tx/PFC, per queue
/// (classes that saw traffic), drops by reason (non-zero), pipeline counters, match-action tables
/// (`table.<name>.{entries,capacity,hits,misses,full_events}`), switch totals, PFC generation,
/// the registered mechanisms' own counters ([`Mechanism::counters`](crate::Mechanism::counters)),
/// control channel.
pub fn snapshot_counters(mechanisms: &dyn MechanismSet, s: &SwitchSnapshot) -> Vec<(String, u64)> {
    let mut c = Vec::new();
    for p in &s.ports {
        let n = &p.name;
        let st = &p.stats;
        c.push((format!("port.{n}.rx_pkts"), st.rx_pkts));
        c.push((format!("port.{n}.rx_bytes"), st.rx_bytes));
        c.push((format!("port.{n}.tx_pkts"), st.tx_pkts));
        c.push((format!("port.{n}.tx_bytes"), st.tx_bytes));
        c.push((format!("port.{n}.pfc_tx"), st.pfc_tx));
        c.push((format!("port.{n}.tx_bypassed"), st.tx_bypassed));
        for (prio, v) in st.pfc_rx.iter().enumerate() {
            if *v != 0 {
                c.push((format!("port.{n}.pfc_rx.prio{prio}"), *v));
            }
        }
        for (class, q) in p.classes.iter().enumerate() {
            if q.enq_pkts == 0 && q.drops == 0 {
                continue;
            }
            let q_ = format!("queue.{n}.{class}");
            c.push((format!("{q_}.enq_pkts"), q.enq_pkts));
            c.push((format!("{q_}.deq_pkts"), q.deq_pkts));
            c.push((format!("{q_}.drops"), q.drops));
            c.push((format!("{q_}.ecn_marks"), q.ecn_marks));
            c.push((format!("{q_}.max_depth_bytes"), q.max_depth_bytes));
        }
    }
    for r in DropReason::ALL {
        let v = s.stats.drops.get(r);
        if v != 0 {
            c.push((format!("drop.{}", r.name()), v));
        }
    }
    for (name, v) in &s.pipeline {
        c.push((name.to_string(), *v));
    }
    for (name, t) in &s.tables {
        c.push((format!("table.{name}.entries"), t.entries));
        c.push((format!("table.{name}.capacity"), t.capacity));
        c.push((format!("table.{name}.hits"), t.hits));
        c.push((format!("table.{name}.misses"), t.misses));
        c.push((format!("table.{name}.full_events"), t.full_events));
    }
    c.push(("switch.generated".into(), s.stats.generated));
    c.push(("switch.emit_drops".into(), s.stats.emit_drops));
    c.push(("switch.pfc_generated".into(), s.stats.control_generated));
    c.push(("switch.injected".into(), s.stats.injected));
    c.push(("switch.consumed".into(), s.stats.consumed));
    c.push(("switch.arrived_dropped".into(), s.stats.arrived_dropped));
    c.push(("switch.queued".into(), s.queued_pkts));
    c.push(("switch.buffer_max_bytes".into(), s.stats.buffer_max_bytes));
    if let Some(pfc) = &s.pfc {
        for prio in 0..NUM_CLASSES {
            if pfc.xoff_sent[prio] != 0 || pfc.xon_sent[prio] != 0 {
                c.push((format!("pfc.prio{prio}.xoff_sent"), pfc.xoff_sent[prio]));
                c.push((format!("pfc.prio{prio}.xon_sent"), pfc.xon_sent[prio]));
            }
            if pfc.headroom_drops[prio] != 0 {
                c.push((
                    format!("pfc.prio{prio}.headroom_drops"),
                    pfc.headroom_drops[prio],
                ));
            }
        }
    }
    for m in mechanisms.mechanisms() {
        m.counters(s, &mut c);
    }
    let ctl = &s.control;
    c.push(("control.commands_applied".into(), ctl.applied));
    c.push(("control.commands_refused".into(), ctl.refused));
    c.push(("control.punts".into(), ctl.punts));
    c.push(("control.punt_drops".into(), ctl.punt_drops));
    c
}
