//! What a run writes: `flows.csv` (one line per flow) and `summary.txt`, into `--out-dir`.

use crate::Report;
use std::fmt::Write as _;
use std::path::Path;

/// The per-flow CSV: completion time, the standalone FCT on the idle network and the
/// papers' slowdown over it, the same flow run alone through the same switches and the
/// slowdown over that, what the transport did, the bytes acknowledged, and, for a flow not
/// done, why (`state`). Unfinished flows have empty time and slowdown columns.
pub fn flows_csv(r: &Report) -> String {
    let mut s = String::from(
        "flow,src,dst,scope,size_bytes,start_ns,finish_ns,fct_ns,standalone_fct_ns,slowdown,alone_fct_ns,alone_slowdown,retransmitted,naks,timeouts,cnps,acked_bytes,state\n",
    );
    let opt = |x: Option<u64>| x.map_or(String::new(), |v| v.to_string());
    let ratio = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.4}"));
    for (i, f) in r.outcome.flows.iter().enumerate() {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            f.id,
            f.src,
            f.dst,
            match f.inter_dc {
                Some(true) => "inter",
                Some(false) => "intra",
                None => "",
            },
            f.size_bytes,
            f.start_ns,
            opt(f.finish_ns),
            opt(f.fct_ns()),
            opt(r.standalone_fct_ns.get(i).copied().flatten()),
            ratio(r.slowdown(i)),
            opt(r.alone_fct_ns.get(i).copied().flatten()),
            ratio(r.alone_slowdown(i)),
            f.retransmitted,
            f.naks,
            f.timeouts,
            f.cnps,
            f.acked_bytes,
            f.state.map_or("done".to_string(), |st| st.to_string()),
        );
    }
    s
}

/// Average and p99 (the HPCC analysis script's index, `int(n * 0.99)`, clamped) of `v`, sorted
/// here.
pub fn avg_p99(v: &mut [f64]) -> Option<(f64, f64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let avg = v.iter().sum::<f64>() / v.len() as f64;
    let p99 = v[((v.len() as f64 * 0.99) as usize).min(v.len() - 1)];
    Some((avg, p99))
}

/// A few lines a person reads: flows done (and why the others are not), FCT slowdown, what
/// the network did.
pub fn summary(r: &Report) -> String {
    let o = &r.outcome;
    let done = o.flows.iter().filter(|f| f.finish_ns.is_some()).count();
    let slow = |pick: &dyn Fn(&crate::sim::FlowResult) -> bool| -> Vec<f64> {
        (0..o.flows.len())
            .filter(|&i| pick(&o.flows[i]))
            .filter_map(|i| r.slowdown(i))
            .collect()
    };
    let mut s = String::new();
    let _ = writeln!(s, "flows: {done} of {} done", o.flows.len());
    // The unfinished ones, by why (`flows.csv` has each one's state).
    let mut why: std::collections::BTreeMap<String, (usize, u64, u64)> = Default::default();
    for f in o.flows.iter().filter(|f| f.finish_ns.is_none()) {
        let key = match f.state {
            Some(crate::host::FlowState::RateLimited { .. }) => "rate-limited".to_string(),
            Some(crate::host::FlowState::WindowLimited { .. }) => "window-limited".to_string(),
            Some(crate::host::FlowState::WaitingOnTimeout { .. }) => {
                "waiting on a timeout".to_string()
            }
            Some(st) => st.to_string(),
            None => "done".to_string(),
        };
        let e = why.entry(key).or_default();
        e.0 += 1;
        e.1 += f.size_bytes;
        e.2 += f.acked_bytes;
    }
    for (k, (n, size, acked)) in &why {
        let _ = writeln!(
            s,
            "unfinished: {n} {k} ({acked} of {size} bytes acknowledged)"
        );
    }
    for (scope, inter) in [("intra-DC", false), ("inter-DC", true)] {
        if let Some((avg, p99)) = avg_p99(&mut slow(&|f| f.inter_dc == Some(inter))) {
            let n = slow(&|f| f.inter_dc == Some(inter)).len();
            let _ = writeln!(
                s,
                "{scope} fct slowdown: avg {avg:.3}, p99 {p99:.3} over {n} flows"
            );
        }
    }
    let mut all = slow(&|_| true);
    if let Some((avg, p99)) = avg_p99(&mut all) {
        let _ = writeln!(
            s,
            "fct slowdown: avg {avg:.3}, p99 {p99:.3}, max {:.3}",
            all[all.len() - 1]
        );
    }
    let _ = writeln!(
        s,
        "virtual time {} ns, {} events, {} frame hops, {} lost on links",
        o.end_ns, o.events, o.hops, o.link_drops
    );
    if o.link_down_drops > 0 {
        let _ = writeln!(s, "{} frames lost on failed links", o.link_down_drops);
    }
    for c in &o.collectives {
        let cct = c.cct_ns().map_or("not done".to_string(), |ns| {
            format!("CCT {:.1} us", ns as f64 / 1e3)
        });
        let _ = writeln!(
            s,
            "collective {} ({}, {} ranks, {} bytes, {} flows): {cct}",
            c.name,
            c.kind.name(),
            c.ranks,
            c.bytes,
            c.flows.len()
        );
    }
    if let Some(ns) = r.tail_cct_ns() {
        let _ = writeln!(
            s,
            "tail CCT (the slowest collective): {:.1} us",
            ns as f64 / 1e3
        );
    }
    let (hosts, switches) = o.pauses.per_node(o.hosts.len(), o.switches.len());
    let _ = writeln!(
        s,
        "pfc pause: {:.2}% of the flows' span with a pause in force; paused time {:.1} us at switch ports, {:.1} us at hosts",
        100.0 * r.pause_fraction(),
        switches.iter().sum::<u64>() as f64 / 1e3,
        hosts.iter().sum::<u64>() as f64 / 1e3
    );
    for (name, h) in &o.hosts {
        let _ = writeln!(
            s,
            "host {name}: tx {} rx {} pfc_rx {} cnps_sent {} naks_sent {}",
            h.tx_frames, h.rx_frames, h.pfc_rx, h.cnps_sent, h.naks_sent
        );
    }
    for (name, snap) in &o.switches {
        let drops: u64 = snap.stats.drops.iter().map(|(_, v)| v).sum();
        let pfc: u64 = snap.ports.iter().map(|p| p.stats.pfc_tx).sum();
        let marks: u64 = snap
            .ports
            .iter()
            .flat_map(|p| p.classes.iter())
            .map(|c| c.ecn_marks)
            .sum();
        let reasons: Vec<String> = snap
            .stats
            .drops
            .iter()
            .filter(|(_, v)| *v != 0)
            .map(|(r, v)| format!("{r} {v}"))
            .collect();
        let _ = writeln!(
            s,
            "switch {name}: drops {drops}{}, pfc frames sent {pfc}, ecn marks {marks}, buffer peak {} bytes",
            if reasons.is_empty() { String::new() } else { format!(" ({})", reasons.join(", ")) },
            snap.stats.buffer_max_bytes
        );
        let counters: Vec<String> = snap
            .pipeline
            .iter()
            .filter(|(_, v)| *v != 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if !counters.is_empty() {
            let _ = writeln!(s, "switch {name} pipeline: {}", counters.join(", "));
        }
    }
    s
}

/// PFC pause time per receiving end (`pauses.csv`): `end,paused_ns,pauses`, the end a host's
/// name or `SWITCH:PORT`, its paused time summed over priorities, and the number of intervals.
pub fn pauses_csv(r: &Report) -> String {
    let o = &r.outcome;
    let mut s = String::from("end,paused_ns,pauses\n");
    for (end, iv) in &o.pauses.ends {
        let name = match *end {
            crate::scenario::End::Host(h) => o.hosts.get(h).map(|(n, _)| n.clone()),
            crate::scenario::End::Switch(i, p) => o
                .switches
                .get(i)
                .zip(o.port_names.get(i).and_then(|v| v.get(p)))
                .map(|((sw, _), port)| format!("{sw}:{port}")),
        };
        let _ = writeln!(
            s,
            "{},{},{}",
            name.unwrap_or_default(),
            crate::pause::PauseLog::total_ns(iv),
            iv.len()
        );
    }
    s
}

/// The time series (`[emulation] sample_us`), long format `time_ns,series,value`: per flow its
/// goodput over the last interval (`flow.ID.rate_bps`), per switch port its queued bytes and
/// PFC frames sent so far (`switch.NAME.PORT.queue_bytes`, `.pfc_tx`), per switch its drops
/// so far (`switch.NAME.drops`) and, for a pipeline with its own queues (MLCC's PFQs), the bytes
/// in them (`switch.NAME.held_bytes`, once the pipeline has held any). `None` when the scenario
/// does not sample.
pub fn timeseries_csv(r: &Report) -> Option<String> {
    let o = &r.outcome;
    if o.samples.is_empty() {
        return None;
    }
    let mut s = String::from("time_ns,series,value\n");
    // Switches whose pipeline ever held packets (their held_bytes series is written).
    let mut held = std::collections::BTreeMap::new();
    for (i, (name, _)) in o.switches.iter().enumerate() {
        let any = o
            .switch_samples
            .iter()
            .any(|v| v.get(i).is_some_and(|x| x.held_bytes > 0));
        held.insert(name, any);
    }
    let mut prev: Option<&(u64, Vec<u64>)> = None;
    for (k, sample) in o.samples.iter().enumerate() {
        let (t, acked) = sample;
        if let Some((t0, a0)) = prev {
            let dt = (t - t0).max(1) as f64;
            for (id, (a, b)) in a0.iter().zip(acked).enumerate() {
                let bps = (b - a) as f64 * 8.0 * 1e9 / dt;
                let _ = writeln!(s, "{t},flow.{id}.rate_bps,{bps:.0}");
            }
        }
        prev = Some(sample);
        for ((name, _), (ports, sw)) in o
            .switches
            .iter()
            .zip(o.port_names.iter().zip(&o.switch_samples[k]))
        {
            for (port, (q, pfc)) in ports.iter().zip(&sw.ports) {
                let _ = writeln!(s, "{t},switch.{name}.{port}.queue_bytes,{q}");
                let _ = writeln!(s, "{t},switch.{name}.{port}.pfc_tx,{pfc}");
            }
            let _ = writeln!(s, "{t},switch.{name}.drops,{}", sw.drops);
            if held.get(name).copied().unwrap_or(false) {
                let _ = writeln!(s, "{t},switch.{name}.held_bytes,{}", sw.held_bytes);
            }
        }
    }
    Some(s)
}

/// One line per collective: its kind, ranks, bytes, flows, start, finish and completion time
/// (empty when not done), in ns.
pub fn collectives_csv(r: &Report) -> String {
    let mut s = String::from("name,kind,ranks,bytes,flows,start_ns,finish_ns,cct_ns\n");
    for c in &r.outcome.collectives {
        let opt = |v: Option<u64>| v.map_or(String::new(), |x| x.to_string());
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{}",
            c.name,
            c.kind.name(),
            c.ranks,
            c.bytes,
            c.flows.len(),
            c.start_ns,
            opt(c.finish_ns),
            opt(c.cct_ns())
        );
    }
    s
}

/// Writes `flows.csv`, `summary.txt`, (when sampled) `timeseries.csv`, and the plots
/// ([`crate::plot`]) into `dir` (created); returns the names of the files written.
pub fn write(dir: &Path, r: &Report) -> std::io::Result<Vec<String>> {
    std::fs::create_dir_all(dir)?;
    let mut names = vec!["flows.csv".to_string()];
    std::fs::write(dir.join("flows.csv"), flows_csv(r))?;
    if let Some(ts) = timeseries_csv(r) {
        std::fs::write(dir.join("timeseries.csv"), ts)?;
        names.push("timeseries.csv".into());
    }
    std::fs::write(dir.join("pauses.csv"), pauses_csv(r))?;
    names.push("pauses.csv".into());
    if !r.outcome.collectives.is_empty() {
        std::fs::write(dir.join("collectives.csv"), collectives_csv(r))?;
        names.push("collectives.csv".into());
    }
    std::fs::write(dir.join("summary.txt"), summary(r))?;
    names.push("summary.txt".into());
    for p in crate::plot::write(dir, r)? {
        names.push(format!("{p}.png"));
        names.push(format!("{p}.svg"));
    }
    Ok(names)
}
