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

/// A run and, per flow, its FCT alone on the empty network (`None`: the flow did not finish in
/// the run, so it has no slowdown and its run alone is not made; or it did not finish alone
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
///
/// Never inlined: `perf/emulate-speed.sh` counts the emulation's instructions as this
/// function's inclusive cost under callgrind (with fat LTO it was otherwise folded into the
/// command's `main`). One call per run, so it costs nothing.
#[inline(never)]
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
    let done: Vec<bool> = outcome
        .flows
        .iter()
        .map(|f| f.finish_ns.is_some())
        .collect();
    let (ideal_fct_ns, ideal_hops) = ideal_fcts_of(s, registry, &done)?;
    Ok(Report {
        outcome,
        ideal_fct_ns,
        ideal_hops,
    })
}

/// Each flow's FCT when it runs alone on the same network: the "ideal FCT" the slowdown
/// divides by. Emulated rather than computed, so it is exact for any topology and pipeline
/// (store-and-forward per hop, header bytes, the ACK path): every distinct (source,
/// destination, size, UDP source port) runs alone, one after the other in one run, with the
/// flow number (so the QPs and the UDP source port) of its first flow in the scenario: the
/// same path as in the run, whatever ECMP does with the port (a flow that does not finish
/// alone within the scenario's duration has none). Also returns that run's frame hops.
pub fn ideal_fcts(s: &Scenario, registry: &Registry) -> Result<(Vec<Option<Nanos>>, u64), String> {
    ideal_fcts_of(s, registry, &vec![true; s.all_flows().len()])
}

/// [`ideal_fcts`] of the flows `wanted` (by index in `s.all_flows()`; shorter: the rest not);
/// `None` for the others, which do not run alone. [`emulate`] wants those that finished in the
/// run, the only ones with a slowdown: a run cut short (a large scenario's `--duration`, or
/// flows still going at its end) would otherwise spend most of its time running alone the
/// large flows it never finished (on `two-dc-websearch.toml`, 20 M of the 28 M frame hops).
pub fn ideal_fcts_of(
    s: &Scenario,
    registry: &Registry,
    wanted: &[bool],
) -> Result<(Vec<Option<Nanos>>, u64), String> {
    let flows = s.all_flows();
    let mut keys: Vec<((usize, usize, u64, u16), usize)> = Vec::new();
    let mut index: HashMap<(usize, usize, u64, u16), usize> = HashMap::new();
    for (i, f) in flows.iter().enumerate() {
        if !wanted.get(i).copied().unwrap_or(false) {
            continue;
        }
        let key = (f.src, f.dst, f.size_bytes, host::sport(i));
        index.entry(key).or_insert_with(|| {
            keys.push((key, i));
            keys.len() - 1
        });
    }
    let alone: Vec<(scenario::FlowSpec, usize)> = keys
        .iter()
        .map(|&((src, dst, size_bytes, _), id)| {
            let f = scenario::FlowSpec {
                src,
                dst,
                size_bytes,
                start_ns: 0,
            };
            (f, id)
        })
        .collect();
    let o = Emulation::one_at_a_time(s, registry, alone)?.run();
    let fcts: Vec<Option<Nanos>> = o.flows.iter().map(|f| f.fct_ns()).collect();
    let out = flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let k = index.get(&(f.src, f.dst, f.size_bytes, host::sport(i)))?;
            fcts[*k]
        })
        .collect();
    Ok((out, o.hops))
}
