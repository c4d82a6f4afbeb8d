//! Deterministic replay of pcaps through a switch built from a config: the library behind
//! `longhaul replay` and the conformance runner.

use crate::baseline::Baseline;
use crate::build::{heap_pool, switch_spec};
use longhaul_control::config::{Config, PipelineKind};
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::engine::Switch;
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

/// Run `inputs` through a switch built from `cfg`, entirely on virtual time. Inputs on a port id
/// the config does not have are an error (named).
pub fn replay(cfg: &Config, inputs: Vec<ReplayInput>) -> Result<ReplayResult, String> {
    match cfg.switch.pipeline {
        PipelineKind::Baseline => {
            let mut sw = Switch::new(switch_spec(cfg), heap_pool(cfg), Baseline::new(cfg));
            let res = drive(&mut sw, &inputs)?;
            let mut counters = res.1;
            let b = &sw.pipeline().fwd.stats;
            counters.push(("baseline.routed".into(), b.routed));
            counters.push(("baseline.bridged".into(), b.bridged));
            counters.push(("baseline.anomalies_forwarded".into(), b.anomalies_forwarded));
            for (name, v) in b.anomalies.iter() {
                counters.push((format!("baseline.anomaly.{name}"), v));
            }
            Ok(ReplayResult {
                outputs: res.0,
                counters,
                summary: res.2,
            })
        }
    }
}

type Drive = (
    BTreeMap<u16, Vec<PcapRecord>>,
    Vec<(String, u64)>,
    ReplaySummary,
);

fn drive<L>(sw: &mut Switch<HeapPool, L>, inputs: &[ReplayInput]) -> Result<Drive, String>
where
    L: longhaul_dataplane::engine::Pipeline<HeapPool>,
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
    Ok((outputs, counters(sw), summary))
}

/// The switch's counters as (name, value) pairs in a stable order.
pub fn counters<L>(sw: &Switch<HeapPool, L>) -> Vec<(String, u64)>
where
    L: longhaul_dataplane::engine::Pipeline<HeapPool>,
{
    let mut c = Vec::new();
    for (idx, p) in sw.ports().iter().enumerate() {
        let n = &p.name;
        if let Some(s) = sw.port_stats(idx) {
            c.push((format!("port.{n}.rx_pkts"), s.rx_pkts));
            c.push((format!("port.{n}.rx_bytes"), s.rx_bytes));
            c.push((format!("port.{n}.tx_pkts"), s.tx_pkts));
            c.push((format!("port.{n}.tx_bytes"), s.tx_bytes));
            c.push((format!("port.{n}.pfc_tx"), s.pfc_tx));
            for (prio, v) in s.pfc_rx.iter().enumerate() {
                if *v != 0 {
                    c.push((format!("port.{n}.pfc_rx.prio{prio}"), *v));
                }
            }
        }
        if let Some(tm) = sw.tm(idx) {
            for class in 0..NUM_CLASSES as u8 {
                let s = tm.class_stats(class);
                if s.enq_pkts == 0 && s.drops == 0 {
                    continue;
                }
                let q = format!("queue.{n}.{class}");
                c.push((format!("{q}.enq_pkts"), s.enq_pkts));
                c.push((format!("{q}.deq_pkts"), s.deq_pkts));
                c.push((format!("{q}.drops"), s.drops));
                c.push((format!("{q}.ecn_marks"), s.ecn_marks));
                c.push((format!("{q}.max_depth_bytes"), s.max_depth_bytes));
            }
        }
    }
    let st = sw.stats();
    for r in DropReason::ALL {
        let v = st.drops.get(r);
        if v != 0 {
            c.push((format!("drop.{}", r.name()), v));
        }
    }
    c.push(("switch.generated".into(), st.generated));
    c.push(("switch.emit_drops".into(), st.emit_drops));
    c.push(("switch.buffer_max_bytes".into(), st.buffer_max_bytes));
    if let Some(pfc) = sw.pfc() {
        let s = pfc.stats();
        for prio in 0..NUM_CLASSES {
            if s.xoff_sent[prio] != 0 || s.xon_sent[prio] != 0 {
                c.push((format!("pfc.prio{prio}.xoff_sent"), s.xoff_sent[prio]));
                c.push((format!("pfc.prio{prio}.xon_sent"), s.xon_sent[prio]));
            }
            if s.headroom_drops[prio] != 0 {
                c.push((
                    format!("pfc.prio{prio}.headroom_drops"),
                    s.headroom_drops[prio],
                ));
            }
        }
    }
    c
}
