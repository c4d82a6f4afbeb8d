//! Deterministic replay of pcaps through a switch built from a config: the library behind
//! `longhaul replay` and the conformance runner.

use crate::build::switch_spec;
use crate::mechanism::MechanismSet;
use crate::platform::heap_pool;
use longhaul_control::config::Config;
use longhaul_control::plane::{Inline, PipelineControl};
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::engine::{Pipeline, Switch, SwitchSnapshot};
use longhaul_dataplane::packet::{HeapPool, PacketBuf, NUM_CLASSES};
use longhaul_dataplane::pcap::PcapRecord;
use longhaul_dataplane::replay::{run, ReplayOptions, ReplaySummary};
use std::collections::BTreeMap;

/// Packets offered to one ingress port (by port id).
pub struct ReplayInput {
    pub port: u16,
    pub records: Vec<PcapRecord>,
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

/// Replay through a switch of `pipeline`, its control handler running inline
/// `control_latency_ns` after each punt, so replay stays deterministic.
pub fn replay_with<L, H>(
    mechanisms: &dyn MechanismSet,
    cfg: &Config,
    pipeline: L,
    handler: H,
    inputs: &[ReplayInput],
) -> Result<ReplayResult, String>
where
    L: Pipeline<HeapPool, Command = H::Command>,
    H: PipelineControl,
{
    let mut sw = Switch::new(switch_spec(cfg, mechanisms), heap_pool(cfg), pipeline);
    sw.set_inline_control(Box::new(Inline(handler)), cfg.control.control_latency_ns);
    let (outputs, summary) = drive(&mut sw, inputs)?;
    Ok(ReplayResult {
        outputs,
        counters: counters(mechanisms, &sw),
        summary,
    })
}

type Drive = (BTreeMap<u16, Vec<PcapRecord>>, ReplaySummary);

fn drive<L>(sw: &mut Switch<HeapPool, L>, inputs: &[ReplayInput]) -> Result<Drive, String>
where
    L: Pipeline<HeapPool>,
{
    let mut ins = Vec::with_capacity(inputs.len());
    for i in inputs {
        let idx = sw.port_idx(i.port).ok_or_else(|| {
            let ids: Vec<String> = sw.ports().iter().map(|p| p.id.to_string()).collect();
            format!("no port with id {} (ports: {})", i.port, ids.join(", "))
        })?;
        ins.push((idx, i.records.as_slice()));
    }
    let ids: Vec<u16> = sw.ports().iter().map(|p| p.id).collect();
    let mut outputs: BTreeMap<u16, Vec<PcapRecord>> = ids.iter().map(|&id| (id, vec![])).collect();
    let mut sink = |idx: usize, ts: u64, pkt: &longhaul_dataplane::HeapBuf| {
        if let Some(v) = outputs.get_mut(&ids[idx]) {
            v.push(PcapRecord {
                ts_ns: ts,
                data: pkt.data().to_vec(),
            });
        }
    };
    let summary = run(sw, &ins, ReplayOptions::default(), &mut sink);
    if summary.stalled {
        return Err("replay stalled: the switch kept reporting work it did not do (a bug)".into());
    }
    Ok((outputs, summary))
}

/// The switch's counters as (name, value) pairs in a stable order.
pub fn counters<L>(mechanisms: &dyn MechanismSet, sw: &Switch<HeapPool, L>) -> Vec<(String, u64)>
where
    L: Pipeline<HeapPool>,
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
