//! Bifrost's registration: not a pipeline but a `[bifrost]` section next to any pipeline. It
//! adds its admission stage (the generator of Algorithm 1, [`super::admission`]) to the switch,
//! and owns the generator's counters: the `bifrost.*` lines of replay's counters, the
//! `bifrost` object of `/stats`, and the `longhaul_bifrost_*` metrics (docs/metrics.md).

use super::admission::stats;
use super::config::{BifrostConfig, NAME, SECTION};
use super::generator::{BifrostConsts, BifrostParams, BifrostStats};
use longhaul_control::config::{Config, Section};
use longhaul_control::metrics::{LatencySnap, Series};
use longhaul_dataplane::engine::{SwitchSnapshot, SwitchSpec};
use longhaul_runtime::Mechanism;
use serde_json::{json, Map, Value};

/// Bifrost on long-haul ports (paper 004).
pub struct BifrostMechanism;

/// Bifrost's parameters (`[bifrost]`), governed ports as indices into the switch's ports.
pub fn bifrost_params(cfg: &Config) -> Option<BifrostParams> {
    let b = cfg.section::<BifrostConfig>()?;
    Some(BifrostParams {
        ports: cfg
            .ports
            .iter()
            .enumerate()
            .filter(|(_, p)| b.ports.contains(&p.id))
            .map(|(i, _)| i as u16)
            .collect(),
        priorities: b.priorities.iter().fold(0u8, |m, &c| m | (1 << c)),
        slot_ns: b.slot_ns,
        consts: BifrostConsts {
            bdp_bytes: b.bdp_bytes,
            slot_bytes: b.slot_bytes,
            h_bytes: b.buffer_bytes,
            k: b.k,
            frame_bytes: b.frame_bytes,
        },
        limit_bytes: b.buffer_bytes + b.leak_headroom_bytes,
    })
}

/// Every metric Bifrost adds (docs/metrics.md).
pub const METRIC_NAMES: &[&str] = &[
    "longhaul_bifrost_slots_total",
    "longhaul_bifrost_slots_missed_total",
    "longhaul_bifrost_updates_total",
    "longhaul_bifrost_frames_total",
    "longhaul_bifrost_frames_deferred_total",
    "longhaul_bifrost_overflow_drops_total",
    "longhaul_bifrost_max_queue_bytes",
    "longhaul_bifrost_slot_lateness_seconds",
];

/// Bifrost's counters as metrics: name, help, the counter.
type CounterFn = fn(&BifrostStats) -> u64;
const COUNTERS: [(&str, &str, CounterFn); 6] = [
    (
        "longhaul_bifrost_slots_total",
        "Bifrost slot timer firings (all workers).",
        |b| b.slots,
    ),
    (
        "longhaul_bifrost_slots_missed_total",
        "Bifrost slots skipped because a worker was more than a slot late.",
        |b| b.slots_missed,
    ),
    (
        "longhaul_bifrost_updates_total",
        "Bifrost Algorithm 1 updates (one per governed port and priority per slot).",
        |b| b.updates,
    ),
    (
        "longhaul_bifrost_frames_total",
        "Bifrost pause frames sent (one per port per slot with a pause).",
        |b| b.frames,
    ),
    (
        "longhaul_bifrost_frames_deferred_total",
        "Bifrost pause frames that did not fit the action buffer.",
        |b| b.deferred,
    ),
    (
        "longhaul_bifrost_overflow_drops_total",
        "Packets Bifrost refused above H plus the leak headroom.",
        |b| b.overflow_drops,
    ),
];

impl Mechanism for BifrostMechanism {
    fn name(&self) -> &'static str {
        NAME
    }
    fn docs(&self) -> &'static str {
        "docs/bifrost.md"
    }
    fn section(&self) -> Option<&dyn Section> {
        Some(&SECTION)
    }
    /// The governed (port, priority) pairs leave classic XOFF/XON to Bifrost's admission stage.
    fn extend_spec(&self, cfg: &Config, spec: &mut SwitchSpec) {
        match bifrost_params(cfg) {
            Some(p) => spec.admission.insert(p),
            None => spec.admission.remove::<BifrostParams>(),
        }
    }
    /// `bifrost.*`, after the PFC counters (slot timer lateness is 0 in replay).
    fn counters(&self, snap: &SwitchSnapshot, c: &mut Vec<(String, u64)>) {
        let Some(b) = stats(snap) else { return };
        c.push(("bifrost.slots".into(), b.slots));
        c.push(("bifrost.frames".into(), b.frames));
        c.push(("bifrost.max_l_bytes".into(), b.max_l_bytes));
        c.push(("bifrost.overflow_drops".into(), b.overflow_drops));
        c.push(("bifrost.slots_missed".into(), b.slots_missed));
        let h = &b.lateness;
        c.push(("bifrost.slot_late_p50_ns".into(), h.quantile_upper_ns(0.5)));
        c.push(("bifrost.slot_late_p99_ns".into(), h.quantile_upper_ns(0.99)));
        c.push(("bifrost.slot_late_max_ns".into(), h.max_ns));
    }
    /// `"bifrost"`: the generator's counters, `null` without `[bifrost]`.
    fn stats_json(&self, snap: &SwitchSnapshot, out: &mut Map<String, Value>) {
        let v = stats(snap).map(|b| {
            json!({
                "slots": b.slots,
                "slots_missed": b.slots_missed,
                "updates": b.updates,
                "frames": b.frames,
                "deferred": b.deferred,
                "overflow_drops": b.overflow_drops,
                "max_l_bytes": b.max_l_bytes,
                "slot_late_p50_ns": b.lateness.quantile_upper_ns(0.5),
                "slot_late_p99_ns": b.lateness.quantile_upper_ns(0.99),
                "slot_late_max_ns": b.lateness.max_ns,
            })
        });
        out.insert(NAME.into(), v.unwrap_or(Value::Null));
    }
    /// Summed over the workers (the largest L is the largest of theirs); none without
    /// `[bifrost]`.
    fn metrics(&self, snaps: &[SwitchSnapshot], out: &mut Vec<Series>) {
        let all: Vec<&BifrostStats> = snaps.iter().filter_map(stats).collect();
        if all.is_empty() {
            return;
        }
        for (name, help, f) in COUNTERS {
            let value = all.iter().map(|b| f(b)).sum();
            out.push(Series::Counter { name, help, value });
        }
        out.push(Series::Gauge {
            name: "longhaul_bifrost_max_queue_bytes",
            help: "Largest ingress queue L of any Bifrost-governed port and priority since start.",
            value: all.iter().map(|b| b.max_l_bytes).max().unwrap_or(0),
        });
        out.push(Series::Histogram {
            name: "longhaul_bifrost_slot_lateness_seconds",
            help: "Bifrost slot timer lateness: engine time of the slot update minus the slot boundary.",
            lat: LatencySnap::from_hists(all.iter().map(|b| &b.lateness)),
        });
    }
    fn metric_names(&self) -> &'static [&'static str] {
        METRIC_NAMES
    }
}
