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
pub mod plot;
pub mod scenario;
pub mod sim;
pub mod traffic;

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
    emulate_with_progress(s, registry, o, &mut |_, _| {})
}

/// [`emulate`], calling `progress(virtual now, duration)` now and then during the main run.
pub fn emulate_with_progress(
    s: &mut Scenario,
    registry: &Registry,
    o: Overrides,
    progress: &mut dyn FnMut(Nanos, Nanos),
) -> Result<Report, String> {
    if let Some(seed) = o.seed {
        s.params.seed = seed;
    }
    if let Some(d) = o.duration_ns {
        s.params.duration_ns = d;
    }
    let outcome = Emulation::new(s, registry)?.run_with_progress(progress);
    let (ideal_fct_ns, ideal_hops) = ideal_fcts(s, registry)?;
    Ok(Report {
        outcome,
        ideal_fct_ns,
        ideal_hops,
    })
}

/// Each flow's FCT when it runs alone on the same network: the "ideal FCT" the slowdown
/// divides by. Emulated rather than computed, so it is exact for any topology and pipeline
/// (store-and-forward per hop, header bytes, the ACK path): every distinct (source,
/// destination, size) runs alone, one after the other in one run (a flow that does not
/// finish alone within the scenario's duration has none). Also returns that run's frame hops.
pub fn ideal_fcts(s: &Scenario, registry: &Registry) -> Result<(Vec<Option<Nanos>>, u64), String> {
    let flows = s.all_flows();
    let mut keys: Vec<(usize, usize, u64)> = Vec::new();
    let mut index: HashMap<(usize, usize, u64), usize> = HashMap::new();
    for f in &flows {
        let key = (f.src, f.dst, f.size_bytes);
        index.entry(key).or_insert_with(|| {
            keys.push(key);
            keys.len() - 1
        });
    }
    let alone: Vec<scenario::FlowSpec> = keys
        .iter()
        .map(|&(src, dst, size_bytes)| scenario::FlowSpec {
            src,
            dst,
            size_bytes,
            start_ns: 0,
        })
        .collect();
    let o = Emulation::one_at_a_time(s, registry, alone)?.run();
    let fcts: Vec<Option<Nanos>> = o.flows.iter().map(|f| f.fct_ns()).collect();
    let out = flows
        .iter()
        .map(|f| fcts[index[&(f.src, f.dst, f.size_bytes)]])
        .collect();
    Ok((out, o.hops))
}
