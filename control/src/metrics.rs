//! Prometheus metrics: the control thread fills a [`Snapshot`] from the switch every
//! `control.stats_interval_ms` and calls [`Metrics::publish`]; [`MetricsServer`] serves
//! [`Metrics::render`] on `GET /metrics`.
//!
//! The fast path never touches this: workers keep plain per-lcore counters, and the control
//! thread sums them into a snapshot (no shared atomics per packet). Publishing goes through the
//! `metrics` facade with the `metrics-exporter-prometheus` recorder, installed once per process.
//!
//! Every name, type and label is documented in docs/metrics.md; [`METRIC_NAMES`] lists them (the
//! scrape test checks each one).
//!
//! Counters are published as absolute values. If the switch is rebuilt and its counters restart
//! from zero, [`Metrics::publish`] notices the decrease and keeps the exported counter monotonic
//! (it adds the value reached before the restart), as Prometheus expects of a counter.
//!
//! The command latency histogram is kept by the workers with four buckets per power of two
//! (`LatencyHist`), which cannot be replayed into a facade histogram; it is
//! rendered by hand as a standard Prometheus histogram in seconds,
//! `longhaul_control_command_latency_seconds{_bucket{le},_sum,_count}`, appended to the
//! exporter's output. A mechanism's own histograms ([`Series::Histogram`]) are rendered the same
//! way.
//!
//! Mechanisms add their own series ([`Series`], from `Mechanisms::metrics`): their names, help
//! texts and documentation are the mechanism's.

use crate::http::{self, HttpServer, ServeError};
use axum::extract::State as Shared;
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use longhaul_dataplane::control::LatencyHist;
use longhaul_dataplane::counters::{DropCounters, DropReason};
use longhaul_dataplane::engine::SwitchSnapshot;
use metrics::Label;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Per port counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortSnap {
    pub name: String,
    pub rx_pkts: u64,
    pub rx_bytes: u64,
    pub tx_pkts: u64,
    pub tx_bytes: u64,
    /// PFC frames sent by this port (XOFF, refresh and XON).
    pub pfc_tx: u64,
    /// Of `tx_pkts`, frames that skipped the port's empty queues (traffic manager bypass).
    pub tx_bypassed: u64,
    /// PFC frames received by this port, per priority they paused or resumed.
    pub pfc_rx: [u64; 8],
    pub link_up: bool,
    /// The port I/O's own counters (live runs): receive bursts cut short by an empty pool,
    /// frames received but unusable, frames the port could not send.
    pub rx_nobuf: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    /// The NIC's extended statistics (DPDK xstats), (name, value); empty for pcap/null ports.
    pub xstats: Vec<(String, u64)>,
}

/// One egress queue (port x class).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueSnap {
    /// Port name.
    pub port: String,
    pub class: u8,
    pub depth_bytes: u64,
    /// Peak depth since start.
    pub max_depth_bytes: u64,
    pub enq_pkts: u64,
    pub ecn_marks: u64,
    pub drops: u64,
}

/// One match-action table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableSnap {
    pub name: String,
    pub hits: u64,
    pub misses: u64,
    pub entries: u64,
    pub capacity: u64,
    /// Inserts refused (or evictions) because the table was full.
    pub full_events: u64,
}

/// The command latency histogram, with power-of-two bounds: `buckets[k]` is (2^k ns, count of
/// latencies at most 2^k ns and above 2^(k-1) ns), not cumulative; latencies beyond the last
/// bound are only in `count`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencySnap {
    pub buckets: Vec<(u64, u64)>,
    pub count: u64,
    /// Sum of the latencies, ns.
    pub sum_ns: u64,
}

impl LatencySnap {
    /// The sum of the workers' histograms.
    pub fn from_hists<'a>(hists: impl IntoIterator<Item = &'a LatencyHist>) -> LatencySnap {
        let mut s = LatencySnap::default();
        for h in hists {
            s.add(h);
        }
        s
    }

    /// Adds a worker's histogram. Each of its buckets `[lower(i), lower(i+1))` goes into the
    /// power-of-two bucket whose bound is at least `lower(i+1)` (so `le` is never an
    /// understatement); its last bucket is open-ended and goes to `count` (`+Inf`) only.
    pub fn add(&mut self, h: &LatencyHist) {
        let n = h.buckets.len();
        for (i, &c) in h.buckets.iter().enumerate().take(n.saturating_sub(1)) {
            if c == 0 {
                continue;
            }
            let bound = LatencyHist::lower(i + 1).max(1);
            let k = (64 - (bound - 1).leading_zeros()) as usize; // 2^k >= bound
            if k >= 64 {
                continue;
            }
            while self.buckets.len() <= k {
                let next = self.buckets.len();
                self.buckets.push((1u64 << next, 0));
            }
            self.buckets[k].1 += c;
        }
        // Keep a fixed set of series from the first publish on (up to 2^40 ns, ~18 min).
        while self.buckets.len() <= 40 {
            let next = self.buckets.len();
            self.buckets.push((1u64 << next, 0));
        }
        self.count += h.count;
        self.sum_ns = self.sum_ns.saturating_add(h.sum_ns);
    }
}

/// Ring occupancy of one worker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RingSnap {
    /// Worker (lcore) id.
    pub worker: u32,
    pub command_len: usize,
    pub command_cap: usize,
    pub punt_len: usize,
    pub punt_cap: usize,
}

/// A series a mechanism adds (`Mechanisms::metrics`), already summed over the workers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Series {
    /// A counter (published monotonic, like every other).
    Counter {
        name: &'static str,
        help: &'static str,
        value: u64,
    },
    /// A gauge.
    Gauge {
        name: &'static str,
        help: &'static str,
        value: u64,
    },
    /// A log2 histogram, rendered as a Prometheus histogram in seconds.
    Histogram {
        name: &'static str,
        help: &'static str,
        lat: LatencySnap,
    },
}

/// Everything published at each stats interval (plain data, filled by the control thread).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub ports: Vec<PortSnap>,
    /// Drops by reason (`no_route`, `queue_full`, ...: `DropReason::name`).
    pub drops: Vec<(String, u64)>,
    pub queues: Vec<QueueSnap>,
    pub tables: Vec<TableSnap>,
    /// Pipeline counters by name (`baseline.routed`, `baseline.anomaly.bad_length`, ...).
    pub pipeline: Vec<(String, u64)>,
    /// XOFF frames sent, per priority (all ports).
    pub pfc_xoff_sent: [u64; 8],
    /// XON frames sent, per priority (all ports).
    pub pfc_xon_sent: [u64; 8],
    pub commands_applied: u64,
    pub commands_refused: u64,
    pub punts: u64,
    pub punt_drops: u64,
    pub command_latency: LatencySnap,
    /// One per worker.
    pub rings: Vec<RingSnap>,
    /// The mechanisms' own series (none when no active mechanism has any).
    pub extra: Vec<Series>,
    /// Loop iterations of each worker (live runs).
    pub worker_loops: Vec<u64>,
}

/// One worker's switch snapshot as a [`Snapshot`] (`worker`: its lcore id, for the ring
/// labels). With several workers use [`from_switches`]: `publish` expects the whole switch.
pub fn from_switch(worker: usize, s: &SwitchSnapshot) -> Snapshot {
    from_switches_with_ids(std::iter::once((worker, s)))
}

/// The sum of every worker's snapshot (worker `i` of the slice has id `i`): counters add up
/// per port, queue, reason, table and name; table `entries`/`capacity` (each worker holds a
/// copy of every table) take the largest; rings stay per worker.
pub fn from_switches(snaps: &[SwitchSnapshot]) -> Snapshot {
    from_switches_with_ids(snaps.iter().enumerate())
}

fn from_switches_with_ids<'a>(
    snaps: impl IntoIterator<Item = (usize, &'a SwitchSnapshot)>,
) -> Snapshot {
    let mut out = Snapshot::default();
    let mut drops = DropCounters::default();
    let mut hists: Vec<&LatencyHist> = Vec::new();
    for (worker, s) in snaps {
        for (pi, p) in s.ports.iter().enumerate() {
            let i = match out.ports.iter().position(|o| o.name == p.name) {
                Some(i) => i,
                None => {
                    out.ports.push(PortSnap {
                        name: p.name.clone(),
                        link_up: true,
                        ..PortSnap::default()
                    });
                    out.ports.len() - 1
                }
            };
            let o = &mut out.ports[i];
            if let Some(io) = s.io.get(pi) {
                o.rx_nobuf += io.rx_nobuf;
                o.rx_errors += io.rx_errors;
                o.tx_errors += io.tx_errors;
            }
            o.rx_pkts += p.stats.rx_pkts;
            o.rx_bytes += p.stats.rx_bytes;
            o.tx_pkts += p.stats.tx_pkts;
            o.tx_bytes += p.stats.tx_bytes;
            o.pfc_tx += p.stats.pfc_tx;
            o.tx_bypassed += p.stats.tx_bypassed;
            for (a, b) in o.pfc_rx.iter_mut().zip(p.stats.pfc_rx.iter()) {
                *a += b;
            }
            for (class, c) in p.classes.iter().enumerate() {
                let class = class as u8;
                let q = match out
                    .queues
                    .iter()
                    .position(|q| q.port == p.name && q.class == class)
                {
                    Some(q) => &mut out.queues[q],
                    None => {
                        out.queues.push(QueueSnap {
                            port: p.name.clone(),
                            class,
                            ..QueueSnap::default()
                        });
                        let last = out.queues.len() - 1;
                        &mut out.queues[last]
                    }
                };
                q.depth_bytes += c.depth_bytes;
                q.max_depth_bytes = q.max_depth_bytes.max(c.max_depth_bytes);
                q.enq_pkts += c.enq_pkts;
                q.ecn_marks += c.ecn_marks;
                q.drops += c.drops;
            }
        }
        drops.add(&s.stats.drops);
        for (name, t) in &s.tables {
            match out.tables.iter_mut().find(|o| o.name == *name) {
                Some(o) => {
                    o.hits += t.hits;
                    o.misses += t.misses;
                    o.full_events += t.full_events;
                    o.entries = o.entries.max(t.entries);
                    o.capacity = o.capacity.max(t.capacity);
                }
                None => out.tables.push(TableSnap {
                    name: (*name).to_owned(),
                    hits: t.hits,
                    misses: t.misses,
                    entries: t.entries,
                    capacity: t.capacity,
                    full_events: t.full_events,
                }),
            }
        }
        for (name, v) in &s.pipeline {
            match out.pipeline.iter_mut().find(|o| o.0 == *name) {
                Some(o) => o.1 += v,
                None => out.pipeline.push(((*name).to_owned(), *v)),
            }
        }
        if let Some(pfc) = &s.pfc {
            for p in 0..8 {
                out.pfc_xoff_sent[p] += pfc.xoff_sent.get(p).copied().unwrap_or(0);
                out.pfc_xon_sent[p] += pfc.xon_sent.get(p).copied().unwrap_or(0);
            }
        }
        out.worker_loops.push(s.loops);
        out.commands_applied += s.control.applied;
        out.commands_refused += s.control.refused;
        out.punts += s.control.punts;
        out.punt_drops += s.control.punt_drops;
        hists.push(&s.control.latency_hist);
        out.rings.push(RingSnap {
            worker: worker as u32,
            command_len: s.command_ring.0,
            command_cap: s.command_ring.1,
            punt_len: s.punt_ring.0,
            punt_cap: s.punt_ring.1,
        });
    }
    // Every reason, zeros included, so that each series exists from the start.
    out.drops = DropReason::ALL
        .iter()
        .map(|r| (r.name().to_owned(), drops.get(*r)))
        .collect();
    out.command_latency = LatencySnap::from_hists(hists);
    out
}

/// Every metric name exported (docs/metrics.md documents each).
pub const METRIC_NAMES: &[&str] = &[
    "longhaul_port_rx_packets_total",
    "longhaul_port_rx_bytes_total",
    "longhaul_port_tx_packets_total",
    "longhaul_port_tx_bytes_total",
    "longhaul_port_tx_bypassed_packets_total",
    "longhaul_port_link_up",
    "longhaul_port_xstat",
    "longhaul_port_rx_nobuf_total",
    "longhaul_port_rx_errors_total",
    "longhaul_port_tx_errors_total",
    "longhaul_drops_total",
    "longhaul_queue_depth_bytes",
    "longhaul_queue_max_depth_bytes",
    "longhaul_queue_enqueued_packets_total",
    "longhaul_queue_ecn_marks_total",
    "longhaul_queue_drops_total",
    "longhaul_table_hits_total",
    "longhaul_table_misses_total",
    "longhaul_table_entries",
    "longhaul_table_capacity",
    "longhaul_table_full_total",
    "longhaul_pfc_frames_sent_total",
    "longhaul_pfc_frames_received_total",
    "longhaul_pfc_xoff_total",
    "longhaul_pfc_xon_total",
    "longhaul_pipeline_events_total",
    "longhaul_control_commands_applied_total",
    "longhaul_control_commands_refused_total",
    "longhaul_control_punts_total",
    "longhaul_control_punt_drops_total",
    "longhaul_control_command_latency_seconds",
    "longhaul_ring_occupancy",
    "longhaul_ring_capacity",
    "longhaul_worker_loops_total",
    "longhaul_control_heartbeat_timestamp_seconds",
];

const LATENCY: &str = "longhaul_control_command_latency_seconds";
const LATENCY_HELP: &str =
    "Time from the control plane enqueuing a command to a worker applying it.";

struct State {
    /// Per counter series (`name{labels}`): (last value published, offset from earlier runs).
    counters: HashMap<String, (u64, u64)>,
    latency: LatencySnap,
    /// The mechanisms' histograms of the last snapshot published.
    extra_hists: Vec<(&'static str, &'static str, LatencySnap)>,
}

/// The process's Prometheus recorder and what `publish` remembers. Cheap to clone (shared).
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

static GLOBAL: OnceLock<Result<Metrics, String>> = OnceLock::new();

impl Metrics {
    /// Installs the Prometheus recorder as the global `metrics` recorder, once per process;
    /// later calls return the same instance. Fails if another recorder was installed first.
    pub fn install() -> Result<Metrics, ServeError> {
        GLOBAL
            .get_or_init(|| {
                let handle = PrometheusBuilder::new()
                    .install_recorder()
                    .map_err(|e| e.to_string())?;
                describe();
                Ok(Metrics {
                    handle,
                    state: Arc::new(Mutex::new(State {
                        counters: HashMap::new(),
                        latency: LatencySnap::default(),
                        extra_hists: Vec::new(),
                    })),
                })
            })
            .clone()
            .map_err(ServeError::Recorder)
    }

    /// The exporter's handle (to render, or to run upkeep).
    pub fn handle(&self) -> &PrometheusHandle {
        &self.handle
    }

    /// Publishes a snapshot: counters as absolute values (kept monotonic across restarts of
    /// the switch's counters), gauges as they are.
    pub fn publish(&self, s: &Snapshot) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut counter = |name: &'static str, labels: &[(&'static str, &str)], v: u64| {
            let key = series_key(name, labels);
            let e = st.counters.entry(key).or_insert((0, 0));
            if v < e.0 {
                e.1 = e.1.saturating_add(e.0);
            }
            e.0 = v;
            metrics::counter!(name, to_labels(labels)).absolute(e.1.saturating_add(v));
        };
        let prio: Vec<String> = (0..8).map(|p| p.to_string()).collect();

        for p in &s.ports {
            let l = [("port", p.name.as_str())];
            counter("longhaul_port_rx_packets_total", &l, p.rx_pkts);
            counter("longhaul_port_rx_bytes_total", &l, p.rx_bytes);
            counter("longhaul_port_tx_packets_total", &l, p.tx_pkts);
            counter("longhaul_port_tx_bytes_total", &l, p.tx_bytes);
            counter("longhaul_pfc_frames_sent_total", &l, p.pfc_tx);
            counter("longhaul_port_tx_bypassed_packets_total", &l, p.tx_bypassed);
            counter("longhaul_port_rx_nobuf_total", &l, p.rx_nobuf);
            counter("longhaul_port_rx_errors_total", &l, p.rx_errors);
            counter("longhaul_port_tx_errors_total", &l, p.tx_errors);
            for (i, &n) in p.pfc_rx.iter().enumerate() {
                let l = [("port", p.name.as_str()), ("priority", prio[i].as_str())];
                counter("longhaul_pfc_frames_received_total", &l, n);
            }
        }
        for (reason, n) in &s.drops {
            counter("longhaul_drops_total", &[("reason", reason)], *n);
        }
        for q in &s.queues {
            let class = q.class.to_string();
            let l = [("port", q.port.as_str()), ("class", class.as_str())];
            counter("longhaul_queue_enqueued_packets_total", &l, q.enq_pkts);
            counter("longhaul_queue_ecn_marks_total", &l, q.ecn_marks);
            counter("longhaul_queue_drops_total", &l, q.drops);
        }
        for t in &s.tables {
            let l = [("table", t.name.as_str())];
            counter("longhaul_table_hits_total", &l, t.hits);
            counter("longhaul_table_misses_total", &l, t.misses);
            counter("longhaul_table_full_total", &l, t.full_events);
        }
        for (name, n) in &s.pipeline {
            counter("longhaul_pipeline_events_total", &[("name", name)], *n);
        }
        for (p, name) in prio.iter().enumerate() {
            let l = [("priority", name.as_str())];
            counter("longhaul_pfc_xoff_total", &l, s.pfc_xoff_sent[p]);
            counter("longhaul_pfc_xon_total", &l, s.pfc_xon_sent[p]);
        }
        counter(
            "longhaul_control_commands_applied_total",
            &[],
            s.commands_applied,
        );
        counter(
            "longhaul_control_commands_refused_total",
            &[],
            s.commands_refused,
        );
        counter("longhaul_control_punts_total", &[], s.punts);
        counter("longhaul_control_punt_drops_total", &[], s.punt_drops);
        for (w, n) in s.worker_loops.iter().enumerate() {
            let w = w.to_string();
            counter("longhaul_worker_loops_total", &[("worker", w.as_str())], *n);
        }
        let mut hists = Vec::new();
        for x in &s.extra {
            match x {
                Series::Counter { name, help, value } => {
                    metrics::describe_counter!(*name, metrics::Unit::Count, *help);
                    counter(name, &[], *value);
                }
                Series::Gauge { name, help, value } => {
                    metrics::describe_gauge!(*name, *help);
                    metrics::gauge!(*name).set(*value as f64);
                }
                Series::Histogram { name, help, lat } => hists.push((*name, *help, lat.clone())),
            }
        }
        st.latency = s.command_latency.clone();
        st.extra_hists = hists;
        drop(st);

        let gauge = |name: &'static str, labels: &[(&'static str, &str)], v: f64| {
            metrics::gauge!(name, to_labels(labels)).set(v);
        };
        for p in &s.ports {
            let up = if p.link_up { 1.0 } else { 0.0 };
            gauge("longhaul_port_link_up", &[("port", &p.name)], up);
            for (name, v) in &p.xstats {
                gauge(
                    "longhaul_port_xstat",
                    &[("port", &p.name), ("name", name)],
                    *v as f64,
                );
            }
        }
        // Publishing is the control thread's heartbeat.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        gauge("longhaul_control_heartbeat_timestamp_seconds", &[], now);
        for q in &s.queues {
            let class = q.class.to_string();
            let l = [("port", q.port.as_str()), ("class", class.as_str())];
            gauge("longhaul_queue_depth_bytes", &l, q.depth_bytes as f64);
            gauge(
                "longhaul_queue_max_depth_bytes",
                &l,
                q.max_depth_bytes as f64,
            );
        }
        for t in &s.tables {
            let l = [("table", t.name.as_str())];
            gauge("longhaul_table_entries", &l, t.entries as f64);
            gauge("longhaul_table_capacity", &l, t.capacity as f64);
        }
        for r in &s.rings {
            let w = r.worker.to_string();
            for (ring, len, cap) in [
                ("command", r.command_len, r.command_cap),
                ("punt", r.punt_len, r.punt_cap),
            ] {
                let l = [("ring", ring), ("worker", w.as_str())];
                gauge("longhaul_ring_occupancy", &l, len as f64);
                gauge("longhaul_ring_capacity", &l, cap as f64);
            }
        }
    }

    /// The Prometheus text exposition (format 0.0.4) of everything published.
    pub fn render(&self) -> String {
        self.handle.run_upkeep();
        let mut out = self.handle.render();
        let (lat, extra) = {
            let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            (st.latency.clone(), st.extra_hists.clone())
        };
        render_histogram(&mut out, LATENCY, LATENCY_HELP, &lat);
        for (name, help, h) in &extra {
            render_histogram(&mut out, name, help, h);
        }
        out
    }
}

/// `name{k="v",...}` (a map key only; values are not escaped).
fn series_key(name: &str, labels: &[(&str, &str)]) -> String {
    let mut k = String::from(name);
    for (a, b) in labels {
        k.push('\u{1}');
        k.push_str(a);
        k.push('\u{2}');
        k.push_str(b);
    }
    k
}

fn to_labels(labels: &[(&'static str, &str)]) -> Vec<Label> {
    labels
        .iter()
        .map(|(k, v)| Label::new(*k, v.to_string()))
        .collect()
}

/// A [`LatencySnap`] as a standard Prometheus histogram `name` in seconds.
fn render_histogram(out: &mut String, name: &str, help: &str, lat: &LatencySnap) {
    if !out.is_empty() && !out.ends_with("\n\n") {
        out.push('\n');
    }
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    let mut cumulative = 0u64;
    for &(le_ns, n) in &lat.buckets {
        cumulative = cumulative.saturating_add(n);
        let le = le_ns as f64 / 1e9;
        let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {cumulative}");
    }
    let total = lat.count.max(cumulative);
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {total}");
    let _ = writeln!(out, "{name}_sum {}", lat.sum_ns as f64 / 1e9);
    let _ = writeln!(out, "{name}_count {total}");
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, Unit};
    describe_counter!(
        "longhaul_port_rx_packets_total",
        Unit::Count,
        "Frames received by a port."
    );
    describe_counter!(
        "longhaul_port_rx_bytes_total",
        Unit::Bytes,
        "Bytes received by a port (frames without FCS)."
    );
    describe_counter!(
        "longhaul_port_tx_packets_total",
        Unit::Count,
        "Frames sent by a port."
    );
    describe_counter!(
        "longhaul_port_tx_bytes_total",
        Unit::Bytes,
        "Bytes sent by a port (frames without FCS)."
    );
    describe_counter!(
        "longhaul_port_tx_bypassed_packets_total",
        Unit::Count,
        "Of the frames sent by a port, those that found it idle and skipped its queues."
    );
    describe_gauge!("longhaul_port_link_up", "1 when the port's link is up.");
    describe_counter!(
        "longhaul_port_rx_nobuf_total",
        Unit::Count,
        "Receive bursts a port cut short because the buffer pool was empty."
    );
    describe_counter!(
        "longhaul_port_rx_errors_total",
        Unit::Count,
        "Frames a port received but could not use (larger than a buffer, missed by the NIC)."
    );
    describe_counter!(
        "longhaul_port_tx_errors_total",
        Unit::Count,
        "Frames a port was handed but could not send (refused by the PMD, a full ring)."
    );
    describe_counter!(
        "longhaul_worker_loops_total",
        Unit::Count,
        "Loop iterations of a worker (its progress; flat means the worker is stuck)."
    );
    describe_gauge!(
        "longhaul_control_heartbeat_timestamp_seconds",
        "Unix time of the control thread's last publication (stale means the control thread is stuck)."
    );
    describe_gauge!(
        "longhaul_port_xstat",
        "The NIC's extended statistics (DPDK xstats), by port and xstat name."
    );
    describe_counter!(
        "longhaul_drops_total",
        Unit::Count,
        "Packets dropped, by reason."
    );
    describe_gauge!(
        "longhaul_queue_depth_bytes",
        Unit::Bytes,
        "Bytes queued in an egress queue."
    );
    describe_gauge!(
        "longhaul_queue_max_depth_bytes",
        Unit::Bytes,
        "Peak bytes queued in an egress queue since start."
    );
    describe_counter!(
        "longhaul_queue_enqueued_packets_total",
        Unit::Count,
        "Packets enqueued in an egress queue."
    );
    describe_counter!(
        "longhaul_queue_ecn_marks_total",
        Unit::Count,
        "Packets ECN-marked (CE) by an egress queue's RED/ECN."
    );
    describe_counter!(
        "longhaul_queue_drops_total",
        Unit::Count,
        "Packets dropped by an egress queue (tail drop)."
    );
    describe_counter!(
        "longhaul_table_hits_total",
        Unit::Count,
        "Lookups that matched an entry."
    );
    describe_counter!(
        "longhaul_table_misses_total",
        Unit::Count,
        "Lookups that matched nothing."
    );
    describe_gauge!("longhaul_table_entries", "Entries in a table.");
    describe_gauge!("longhaul_table_capacity", "Most entries a table holds.");
    describe_counter!(
        "longhaul_table_full_total",
        Unit::Count,
        "Inserts refused or entries evicted because a table was full."
    );
    describe_counter!(
        "longhaul_pfc_frames_sent_total",
        Unit::Count,
        "PFC frames sent by a port (XOFF, refreshes, XON)."
    );
    describe_counter!(
        "longhaul_pfc_frames_received_total",
        Unit::Count,
        "PFC frames received by a port, per priority they name."
    );
    describe_counter!(
        "longhaul_pfc_xoff_total",
        Unit::Count,
        "PFC XOFF frames sent (all ports), per priority."
    );
    describe_counter!(
        "longhaul_pfc_xon_total",
        Unit::Count,
        "PFC XON frames sent (all ports), per priority."
    );
    describe_counter!(
        "longhaul_pipeline_events_total",
        Unit::Count,
        "A pipeline's own counters, by name (e.g. baseline.routed)."
    );
    describe_counter!(
        "longhaul_control_commands_applied_total",
        Unit::Count,
        "Control commands applied by the workers."
    );
    describe_counter!(
        "longhaul_control_commands_refused_total",
        Unit::Count,
        "Control commands the pipeline refused (bad table, bad key, table full)."
    );
    describe_counter!(
        "longhaul_control_punts_total",
        Unit::Count,
        "Packets and events punted to the control thread."
    );
    describe_counter!(
        "longhaul_control_punt_drops_total",
        Unit::Count,
        "Punts dropped because the punt ring was full."
    );
    describe_gauge!(
        "longhaul_ring_occupancy",
        "Entries waiting in a worker's command or punt ring."
    );
    describe_gauge!(
        "longhaul_ring_capacity",
        "Capacity of a worker's command or punt ring."
    );
}

/// Serves `GET /metrics` (Prometheus text format 0.0.4) on its own thread ([`HttpServer`]: axum
/// on hyper, with the same limits as the API). Read-only and unauthenticated, like every
/// Prometheus exporter: keep it on loopback or a management network.
pub struct MetricsServer {
    http: HttpServer,
}

/// Largest request body the metrics endpoint accepts (it reads none).
const METRICS_MAX_BODY: usize = 64 * 1024;

async fn serve_metrics(Shared(metrics): Shared<Metrics>, method: Method, uri: Uri) -> Response {
    let path = uri.path().to_owned();
    match (path.as_str(), method) {
        ("/metrics", Method::GET) => {
            // Rendering takes a lock and formats every series: off the runtime's thread.
            match tokio::task::spawn_blocking(move || metrics.render()).await {
                Ok(text) => http::reply(
                    StatusCode::OK,
                    "text/plain; version=0.0.4; charset=utf-8",
                    text.into_bytes(),
                ),
                Err(_) => http::json_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "rendering the metrics failed",
                ),
            }
        }
        ("/metrics", m) => {
            let mut r = http::json_error(
                StatusCode::METHOD_NOT_ALLOWED,
                &format!("{m} is not allowed on /metrics: use GET"),
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET"));
            r
        }
        _ => http::json_error(
            StatusCode::NOT_FOUND,
            &format!("no such resource: {path} (try /metrics)"),
        ),
    }
}

impl MetricsServer {
    /// Listens on `listen` (port 0: any free port).
    pub fn start(listen: SocketAddr, metrics: Metrics) -> Result<MetricsServer, ServeError> {
        let router = Router::new().fallback(serve_metrics).with_state(metrics);
        let app = http::app(router, "metrics", METRICS_MAX_BODY, None);
        let http = HttpServer::start(listen, "longhaul-metrics", app)
            .map_err(|e| ServeError::Metrics(Box::new(e)))?;
        Ok(MetricsServer { http })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }

    /// Stops serving and joins the thread. Idempotent (also on drop).
    pub fn shutdown(&mut self) {
        self.http.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_from_worker_histograms() {
        let mut h = LatencyHist::default();
        h.record(100); // [96, 112): le 128
        h.record(3000); // [2560, 3072): le 4096
        h.record(u64::MAX); // the open-ended last bucket: only +Inf
        let s = LatencySnap::from_hists([&h, &h]);
        assert_eq!(s.count, 6);
        assert_eq!(s.buckets.len(), 41);
        assert_eq!(s.buckets[7], (128, 2));
        assert_eq!(s.buckets[12], (4096, 2));
        assert_eq!(s.buckets.iter().map(|b| b.1).sum::<u64>(), 4);
        let mut out = String::new();
        render_histogram(&mut out, LATENCY, LATENCY_HELP, &s);
        assert!(out.contains(&format!("{LATENCY}_bucket{{le=\"0.000000128\"}} 2\n")));
        assert!(out.contains(&format!("{LATENCY}_bucket{{le=\"0.000004096\"}} 4\n")));
        assert!(out.contains(&format!("{LATENCY}_bucket{{le=\"+Inf\"}} 6\n")));
        assert!(out.contains(&format!("{LATENCY}_count 6\n")));
    }

    #[test]
    fn every_bucket_bound_covers_its_values() {
        for ns in (0..3000u64).chain([1 << 20, (1 << 20) + 12345, 1 << 39]) {
            let mut h = LatencyHist::default();
            h.record(ns);
            let s = LatencySnap::from_hists([&h]);
            let (le, _) = s.buckets.iter().find(|b| b.1 == 1).copied().unwrap();
            assert!(
                ns <= le && (ns == 0 || le / 2 < ns.max(1) * 2),
                "{ns} in le={le}"
            );
        }
    }
}
