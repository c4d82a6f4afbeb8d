//! `longhaul emulate`: the closed loop. Modeled RDMA hosts ([`host`]: RC transport, DCQCN, PFC)
//! and links around switches that are the real longhaul engine and pipelines, each built from a
//! normal config through the registry, on one virtual clock ([`sim`]). A scenario file
//! ([`scenario`]) says what is connected to what and which flows run; the outputs are per-flow
//! completion times against the same flow alone on the empty network.
//!
//! Like the runtime, the emulator knows mechanisms only through the registry: a switch's
//! pipeline is whatever its config selects.

pub mod host;
pub mod output;
pub mod scenario;
pub mod sim;

use longhaul_dataplane::time::Nanos;
use longhaul_runtime::Registry;
use scenario::Scenario;
use sim::{Emulation, Outcome};
use std::collections::HashMap;

/// Overrides from the command line.
#[derive(Clone, Copy, Debug, Default)]
pub struct Overrides {
    pub seed: Option<u64>,
    pub duration_ns: Option<Nanos>,
}

/// A run and, per flow, its FCT alone on the empty network (`None`: it did not finish alone
/// within the duration either).
pub struct Report {
    pub outcome: Outcome,
    pub ideal_fct_ns: Vec<Option<Nanos>>,
    /// Frame hops of the runs alone (for the emulator's speed: main + these per wall second).
    pub ideal_hops: u64,
}

/// Runs scenario `s` and, for the slowdowns, every distinct (source, destination, size) alone.
pub fn emulate(s: &mut Scenario, registry: &Registry, o: Overrides) -> Result<Report, String> {
    if let Some(seed) = o.seed {
        s.params.seed = seed;
    }
    if let Some(d) = o.duration_ns {
        s.params.duration_ns = d;
    }
    let outcome = Emulation::new(s, registry)?.run();
    let (ideal_fct_ns, ideal_hops) = ideal_fcts(s, registry)?;
    Ok(Report {
        outcome,
        ideal_fct_ns,
        ideal_hops,
    })
}

/// Each flow's FCT when it runs alone (starting at 0) on the same network: the "ideal FCT" the
/// slowdown divides by. Emulated rather than computed, so it is exact for any topology and
/// pipeline (store-and-forward per hop, header bytes, ACK path); flows with the same source,
/// destination and size share one run. Also returns the frame hops those runs took.
pub fn ideal_fcts(s: &Scenario, registry: &Registry) -> Result<(Vec<Option<Nanos>>, u64), String> {
    let mut memo: HashMap<(usize, usize, u64), Option<Nanos>> = HashMap::new();
    let mut out = Vec::with_capacity(s.flows.len());
    let mut hops = 0;
    for f in &s.flows {
        let key = (f.src, f.dst, f.size_bytes);
        if let Some(v) = memo.get(&key) {
            out.push(*v);
            continue;
        }
        let alone = Scenario {
            file: s.file.clone(),
            params: s.params.clone(),
            hosts: s.hosts.clone(),
            switches: s
                .switches
                .iter()
                .map(|w| scenario::SwitchSpec {
                    name: w.name.clone(),
                    config_path: w.config_path.clone(),
                    config: w.config.clone(),
                })
                .collect(),
            links: s.links.clone(),
            flows: vec![scenario::FlowSpec {
                start_ns: 0,
                ..f.clone()
            }],
        };
        let o = Emulation::new(&alone, registry)?.run();
        hops += o.hops;
        let fct = o.flows[0].fct_ns();
        memo.insert(key, fct);
        out.push(fct);
    }
    Ok((out, hops))
}
