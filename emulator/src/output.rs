//! What a run writes: `flows.csv` (one line per flow) and `summary.txt`, into `--out-dir`.

use crate::Report;
use std::fmt::Write as _;
use std::path::Path;

/// The per-flow CSV: completion time, the same flow alone on the empty network, slowdown
/// (FCT / ideal), and what the transport did. Unfinished flows have empty time columns.
pub fn flows_csv(r: &Report) -> String {
    let mut s = String::from(
        "flow,src,dst,size_bytes,start_ns,finish_ns,fct_ns,ideal_fct_ns,slowdown,retransmitted,naks,timeouts,cnps\n",
    );
    for (f, ideal) in r.outcome.flows.iter().zip(&r.ideal_fct_ns) {
        let opt = |x: Option<u64>| x.map_or(String::new(), |v| v.to_string());
        let slowdown = match (f.fct_ns(), ideal) {
            (Some(a), Some(b)) if *b > 0 => format!("{:.4}", a as f64 / *b as f64),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            f.id,
            f.src,
            f.dst,
            f.size_bytes,
            f.start_ns,
            opt(f.finish_ns),
            opt(f.fct_ns()),
            opt(*ideal),
            slowdown,
            f.retransmitted,
            f.naks,
            f.timeouts,
            f.cnps
        );
    }
    s
}

/// A few lines a person reads: flows done, FCT slowdown, what the network did.
pub fn summary(r: &Report) -> String {
    let o = &r.outcome;
    let done = o.flows.iter().filter(|f| f.finish_ns.is_some()).count();
    let slow: Vec<f64> = o
        .flows
        .iter()
        .zip(&r.ideal_fct_ns)
        .filter_map(|(f, i)| Some(f.fct_ns()? as f64 / (*i)?.max(1) as f64))
        .collect();
    let mut s = String::new();
    let _ = writeln!(s, "flows: {done} of {} done", o.flows.len());
    if !slow.is_empty() {
        let mut v = slow.clone();
        v.sort_by(f64::total_cmp);
        let avg = v.iter().sum::<f64>() / v.len() as f64;
        let p99 = v[((v.len() as f64 * 0.99).ceil() as usize).clamp(1, v.len()) - 1];
        let _ = writeln!(
            s,
            "fct slowdown: avg {avg:.3}, p99 {p99:.3}, max {:.3}",
            v[v.len() - 1]
        );
    }
    let _ = writeln!(
        s,
        "virtual time {} ns, {} events, {} frame hops, {} lost on links",
        o.end_ns, o.events, o.hops, o.link_drops
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

/// Writes `flows.csv` and `summary.txt` into `dir` (created).
pub fn write(dir: &Path, r: &Report) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("flows.csv"), flows_csv(r))?;
    std::fs::write(dir.join("summary.txt"), summary(r))
}
