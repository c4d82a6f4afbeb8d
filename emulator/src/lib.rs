//! `longhaul emulate`: the closed loop. Modeled RDMA hosts ([`host`]: RC transport, DCQCN, PFC)
//! and links around switches that are the real longhaul engine and pipelines, each built from a
//! normal config through the registry, on one virtual clock ([`sim`]). A scenario file
//! ([`scenario`]) says what is connected to what and which flows run; the outputs are per-flow
//! completion times over their standalone FCT on the idle network ([`path`]: the papers'
//! normalized FCT), and against the same flow run alone through the same switches.
//!
//! Like the runtime, the emulator knows mechanisms only through the registry: a switch's
//! pipeline is whatever its config selects.

pub mod collective;
pub mod host;
pub mod output;
pub mod path;
pub mod pause;
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
    /// `--until-done`: run past the duration until every flow is done, up to this virtual time.
    pub until_done_ns: Option<Nanos>,
    /// Skip the runs alone (`Report::alone_fct_ns` all `None`): the papers' slowdown needs only
    /// the standalone FCT, and the runs alone take about as long as the run.
    pub skip_alone: bool,
}

/// A run and, per flow, its standalone FCT and its FCT alone through the same switches.
pub struct Report {
    pub outcome: Outcome,
    /// The papers' ideal FCT ([`path::Path::standalone_fct_ns`]: computed from the idle
    /// path, the same for every variant of a scenario); `None`: no path between its hosts.
    pub standalone_fct_ns: Vec<Option<Nanos>>,
    /// The flow run alone through the same switches, pipelines included (`None`: the flow did
    /// not finish in the run, so its run alone is not made, or it did not finish alone within
    /// the duration either).
    pub alone_fct_ns: Vec<Option<Nanos>>,
    /// Frame hops of the runs alone (for the emulator's speed: main + these per wall second).
    pub alone_hops: u64,
}

impl Report {
    /// Flow `i`'s normalized FCT, as the papers and the HPCC simulator's analysis script
    /// (`analysis/fct_analysis.py`: `slow<1?1:slow`) define it: FCT over standalone FCT, at
    /// least 1. `None`: not done.
    pub fn slowdown(&self, i: usize) -> Option<f64> {
        let fct = self.outcome.flows.get(i)?.fct_ns()?;
        let ideal = (*self.standalone_fct_ns.get(i)?)?;
        Some((fct as f64 / ideal.max(1) as f64).max(1.0))
    }

    /// The fraction of the flows' span (the first start to the last finish, or the run's end
    /// if a flow is unfinished) during which a PFC pause was in force somewhere (THEMIS's
    /// Figure 11 metric; [`pause`]).
    pub fn pause_fraction(&self) -> f64 {
        let (from, to) = self.span();
        self.outcome.pauses.fraction(from, to)
    }

    /// The flows' span: the first start to the last finish, or the run's end if a flow is
    /// unfinished.
    pub fn span(&self) -> (Nanos, Nanos) {
        let o = &self.outcome;
        let from = o.flows.iter().map(|f| f.start_ns).min().unwrap_or(0);
        let to = o
            .flows
            .iter()
            .map(|f| f.finish_ns.unwrap_or(o.end_ns))
            .max()
            .unwrap_or(0);
        (from, to)
    }

    /// The slowest collective's completion time (the Themis spraying paper's tail CCT);
    /// `None`: no collective, or one not done.
    pub fn tail_cct_ns(&self) -> Option<Nanos> {
        let c = &self.outcome.collectives;
        if c.is_empty() {
            return None;
        }
        c.iter()
            .map(|c| c.cct_ns())
            .collect::<Option<Vec<_>>>()?
            .into_iter()
            .max()
    }

    /// The (switch, port) indices of `SWITCH:PORT`.
    pub fn switch_port(&self, name: &str) -> Option<(usize, usize)> {
        let (sw, port) = name.split_once(':')?;
        let o = &self.outcome;
        let i = o.switches.iter().position(|(n, _)| n == sw)?;
        let p = o.port_names.get(i)?.iter().position(|n| n == port)?;
        Some((i, p))
    }

    /// The average rate, in bits/s, at which the switch ports `ends` (SWITCH:PORT) sent over the
    /// flows' span, each (a link's throughput per direction when they are its two ends), and
    /// the fraction of the span during which any of them was paused; `None` when one is not
    /// a switch port of the scenario.
    pub fn port_load(&self, ends: &[String]) -> Option<(f64, f64)> {
        let o = &self.outcome;
        let idx: Vec<(usize, usize)> = ends
            .iter()
            .map(|e| self.switch_port(e))
            .collect::<Option<_>>()?;
        let (from, to) = self.span();
        let secs = to.saturating_sub(from).max(1) as f64 / 1e9;
        let bytes: u64 = idx
            .iter()
            .map(|&(i, p)| o.switches[i].1.ports.get(p).map_or(0, |x| x.stats.tx_bytes))
            .sum();
        let bps = bytes as f64 * 8.0 / secs / idx.len().max(1) as f64;
        let paused = o.pauses.fraction_of(
            from,
            to,
            |e| matches!(e, scenario::End::Switch(i, p) if idx.contains(&(*i, *p))),
        );
        Some((bps, paused))
    }

    /// Flow `i`'s FCT over its FCT alone through the same switches (`None`: either missing).
    pub fn alone_slowdown(&self, i: usize) -> Option<f64> {
        let fct = self.outcome.flows.get(i)?.fct_ns()?;
        let alone = (*self.alone_fct_ns.get(i)?)?;
        Some(fct as f64 / alone.max(1) as f64)
    }
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
    let mut e = Emulation::new(s, registry)?;
    if let Some(max) = o.until_done_ns {
        e.until_done(max);
    }
    let outcome = e.run_with_progress(progress);
    let done: Vec<bool> = outcome
        .flows
        .iter()
        .map(|f| f.finish_ns.is_some())
        .collect();
    let (alone_fct_ns, alone_hops) = if o.skip_alone {
        (vec![None; done.len()], 0)
    } else {
        alone_fcts_of(s, registry, &done, o.until_done_ns)?
    };
    let paths = path::Paths::of(s);
    let standalone_fct_ns = s
        .all_flows()
        .iter()
        .map(|f| {
            Some(
                paths
                    .get(f.src, f.dst)?
                    .standalone_fct_ns(f.size_bytes, s.params.mtu),
            )
        })
        .collect();
    Ok(Report {
        outcome,
        standalone_fct_ns,
        alone_fct_ns,
        alone_hops,
    })
}

/// Each flow's FCT when it runs alone on the same network, through the same switches and
/// pipelines (the mechanism's own costs included, unlike the standalone FCT). Emulated, so
/// it is exact for any topology and pipeline: every distinct (source,
/// destination, size, UDP source port) runs alone, one after the other in one run, with the
/// flow number (so the QPs and the UDP source port) of its first flow in the scenario: the
/// same path as in the run, whatever ECMP does with the port (a flow that does not finish
/// alone within the scenario's duration has none). Also returns that run's frame hops.
pub fn alone_fcts(s: &Scenario, registry: &Registry) -> Result<(Vec<Option<Nanos>>, u64), String> {
    alone_fcts_of(s, registry, &vec![true; s.all_flows().len()], None)
}

/// [`alone_fcts`] of the flows `wanted` (by index in `s.all_flows()`; shorter: the rest not);
/// `None` for the others, which do not run alone. [`emulate`] wants those that finished in the
/// run, the only ones with a slowdown: a run cut short (a large scenario's `--duration`, or
/// flows still going at its end) would otherwise spend most of its time running alone the
/// large flows it never finished (on `two-dc-websearch.toml`, 20 M of the 28 M frame hops).
/// With `until_done_ns` (`--until-done`), each flow has until that much virtual time to finish
/// alone instead of the duration.
pub fn alone_fcts_of(
    s: &Scenario,
    registry: &Registry,
    wanted: &[bool],
    until_done_ns: Option<Nanos>,
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
                after: Vec::new(),
            };
            (f, id)
        })
        .collect();
    let mut e = Emulation::one_at_a_time(s, registry, alone)?;
    if let Some(max) = until_done_ns {
        e.until_done(max);
    }
    let o = e.run();
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
