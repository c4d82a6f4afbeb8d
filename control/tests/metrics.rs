//! Prometheus metrics: publish a snapshot, scrape `/metrics` over a real socket, parse the text
//! format line by line and check every documented name, type, label and value.

use longhaul_control::client::Client;
use longhaul_control::metrics::{
    from_switches, LatencySnap, Metrics, MetricsServer, PortSnap, QueueSnap, RingSnap, Series,
    Snapshot, TableSnap, METRIC_NAMES,
};
use longhaul_dataplane::control::LatencyHist;
use longhaul_dataplane::engine::{PortSnapshot, SwitchSnapshot, TableCounters};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

/// Tests share the process's one recorder; they must not publish at the same time.
static LOCK: Mutex<()> = Mutex::new(());

/// One sample: metric name, labels, value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

#[derive(Debug, Default)]
struct Scrape {
    types: BTreeMap<String, String>,
    helps: BTreeSet<String>,
    samples: Vec<Sample>,
}

impl Scrape {
    /// The value of the sample with exactly these labels.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
    }
}

/// A small parser of the Prometheus text format 0.0.4; panics on anything malformed.
fn parse(text: &str) -> Scrape {
    let mut s = Scrape::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').expect("TYPE name type");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&ty),
                "line {n}: type {ty}"
            );
            assert!(
                s.types.insert(name.to_owned(), ty.to_owned()).is_none(),
                "line {n}: second TYPE for {name}"
            );
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, _) = rest.split_once(' ').expect("HELP name text");
            s.helps.insert(name.to_owned());
            continue;
        }
        assert!(!line.starts_with('#'), "line {n}: unknown comment {line}");
        let (series, value) = line.rsplit_once(' ').expect("sample value");
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("line {n}: value {v}")),
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').expect("closing brace");
                let mut labels = BTreeMap::new();
                let mut chars = body.chars().peekable();
                while chars.peek().is_some() {
                    let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
                    assert_eq!(chars.next(), Some('"'), "line {n}: label value quote");
                    let mut val = String::new();
                    loop {
                        match chars.next().expect("unterminated label value") {
                            '\\' => match chars.next() {
                                Some('n') => val.push('\n'),
                                Some(c) => val.push(c),
                                None => panic!("line {n}: dangling escape"),
                            },
                            '"' => break,
                            c => val.push(c),
                        }
                    }
                    if chars.peek() == Some(&',') {
                        chars.next();
                    }
                    assert!(is_name(&key), "line {n}: label name {key}");
                    labels.insert(key, val);
                }
                (name, labels)
            }
            None => (series, BTreeMap::new()),
        };
        assert!(is_name(name), "line {n}: metric name {name}");
        s.samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    s
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    c.next()
        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

fn snapshot(scale: u64) -> Snapshot {
    let mut h = LatencyHist::default();
    for ns in [900, 1500, 20_000, 20_000] {
        h.record(ns);
    }
    Snapshot {
        ports: vec![
            PortSnap {
                name: "dc0".into(),
                rx_pkts: 10 * scale,
                rx_bytes: 10_000 * scale,
                tx_pkts: 7 * scale,
                tx_bytes: 7000 * scale,
                pfc_tx: 3 * scale,
                tx_bypassed: 6 * scale,
                pfc_rx: [0, 0, 0, 5 * scale, 0, 0, 0, 0],
                link_up: true,
                rx_nobuf: scale,
                rx_errors: 2 * scale,
                tx_errors: 3 * scale,
                xstats: vec![("rx_missed_errors".into(), 4 * scale)],
            },
            PortSnap {
                name: "wan0".into(),
                link_up: false,
                ..PortSnap::default()
            },
        ],
        drops: vec![("no_route".into(), 2 * scale), ("queue_full".into(), 0)],
        queues: vec![QueueSnap {
            port: "wan0".into(),
            class: 3,
            depth_bytes: 4096,
            max_depth_bytes: 65536,
            enq_pkts: 100 * scale,
            ecn_marks: 4 * scale,
            drops: scale,
        }],
        tables: vec![TableSnap {
            name: "l3_v4".into(),
            hits: 50 * scale,
            misses: scale,
            entries: 12,
            capacity: 1024,
            full_events: 0,
        }],
        pipeline: vec![
            ("baseline.routed".into(), 40 * scale),
            ("baseline.anomaly.bad_length".into(), scale),
        ],
        pfc_xoff_sent: [0, 0, 0, 2 * scale, 0, 0, 0, 0],
        pfc_xon_sent: [0, 0, 0, scale, 0, 0, 0, 0],
        commands_applied: 6 * scale,
        commands_refused: scale,
        punts: 9 * scale,
        punt_drops: 0,
        command_latency: LatencySnap::from_hists([&h]),
        rings: vec![RingSnap {
            worker: 0,
            command_len: 1,
            command_cap: 4096,
            punt_len: 2,
            punt_cap: 1024,
        }],
        worker_loops: vec![1000 * scale],
        // A mechanism's own series (Bifrost's, in pipelines/tests/bifrost_metrics.rs).
        extra: vec![
            Series::Counter {
                name: "longhaul_test_events_total",
                help: "A mechanism's counter.",
                value: 100 * scale,
            },
            Series::Gauge {
                name: "longhaul_test_depth_bytes",
                help: "A mechanism's gauge.",
                value: 25_000_000,
            },
            Series::Histogram {
                name: "longhaul_test_lateness_seconds",
                help: "A mechanism's histogram.",
                lat: LatencySnap::from_hists([&lateness()]),
            },
        ],
    }
}

/// A mechanism's histogram: 300 ns, 300 ns, 5 us.
fn lateness() -> LatencyHist {
    let mut h = LatencyHist::default();
    for ns in [300, 300, 5000] {
        h.record(ns);
    }
    h
}

fn scrape(server: &MetricsServer) -> Scrape {
    let c = Client::new(&server.local_addr().to_string(), None);
    let (status, body) = c.raw("GET", "/metrics", b"").unwrap();
    assert_eq!(status, 200);
    parse(std::str::from_utf8(&body).unwrap())
}

#[test]
fn scrape_has_every_documented_metric() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = Metrics::install().unwrap();
    // Idempotent: a second install is the same recorder.
    let m2 = Metrics::install().unwrap();
    m.publish(&snapshot(1));
    let server = MetricsServer::start("127.0.0.1:0".parse().unwrap(), m2).unwrap();
    let s = scrape(&server);

    for name in METRIC_NAMES {
        let ty = s
            .types
            .get(*name)
            .unwrap_or_else(|| panic!("no TYPE line for {name}"));
        assert!(s.helps.contains(*name), "no HELP for {name}");
        let expected = if name.ends_with("_seconds") && !name.ends_with("_timestamp_seconds") {
            "histogram"
        } else if name.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        assert_eq!(ty, expected, "{name}");
        let has_sample = s.samples.iter().any(|x| {
            x.name == *name
                || (ty == "histogram"
                    && [
                        format!("{name}_bucket"),
                        format!("{name}_sum"),
                        format!("{name}_count"),
                    ]
                    .contains(&x.name))
        });
        assert!(has_sample, "no sample of {name}");
    }

    // Values and labels.
    let dc0 = [("port", "dc0")];
    assert_eq!(s.value("longhaul_port_rx_packets_total", &dc0), 10.0);
    assert_eq!(s.value("longhaul_port_rx_bytes_total", &dc0), 10_000.0);
    assert_eq!(s.value("longhaul_port_tx_packets_total", &dc0), 7.0);
    assert_eq!(s.value("longhaul_port_tx_bytes_total", &dc0), 7000.0);
    assert_eq!(s.value("longhaul_port_link_up", &dc0), 1.0);
    assert_eq!(s.value("longhaul_port_link_up", &[("port", "wan0")]), 0.0);
    assert_eq!(
        s.value(
            "longhaul_port_xstat",
            &[("port", "dc0"), ("name", "rx_missed_errors")]
        ),
        4.0
    );
    assert_eq!(s.value("longhaul_pfc_frames_sent_total", &dc0), 3.0);
    assert_eq!(
        s.value("longhaul_port_tx_bypassed_packets_total", &dc0),
        6.0
    );
    assert_eq!(
        s.value(
            "longhaul_pfc_frames_received_total",
            &[("port", "dc0"), ("priority", "3")]
        ),
        5.0
    );
    assert_eq!(
        s.value(
            "longhaul_pfc_frames_received_total",
            &[("port", "dc0"), ("priority", "0")]
        ),
        0.0
    );
    assert_eq!(
        s.value("longhaul_drops_total", &[("reason", "no_route")]),
        2.0
    );
    let q = [("port", "wan0"), ("class", "3")];
    assert_eq!(s.value("longhaul_queue_depth_bytes", &q), 4096.0);
    assert_eq!(s.value("longhaul_queue_max_depth_bytes", &q), 65536.0);
    assert_eq!(s.value("longhaul_queue_enqueued_packets_total", &q), 100.0);
    assert_eq!(s.value("longhaul_queue_ecn_marks_total", &q), 4.0);
    assert_eq!(s.value("longhaul_queue_drops_total", &q), 1.0);
    let t = [("table", "l3_v4")];
    assert_eq!(s.value("longhaul_table_hits_total", &t), 50.0);
    assert_eq!(s.value("longhaul_table_misses_total", &t), 1.0);
    assert_eq!(s.value("longhaul_table_entries", &t), 12.0);
    assert_eq!(s.value("longhaul_table_capacity", &t), 1024.0);
    assert_eq!(s.value("longhaul_table_full_total", &t), 0.0);
    assert_eq!(
        s.value("longhaul_pfc_xoff_total", &[("priority", "3")]),
        2.0
    );
    assert_eq!(s.value("longhaul_pfc_xon_total", &[("priority", "3")]), 1.0);
    assert_eq!(
        s.value(
            "longhaul_pipeline_events_total",
            &[("name", "baseline.routed")]
        ),
        40.0
    );
    assert_eq!(s.value("longhaul_control_commands_applied_total", &[]), 6.0);
    assert_eq!(s.value("longhaul_control_commands_refused_total", &[]), 1.0);
    assert_eq!(s.value("longhaul_control_punts_total", &[]), 9.0);
    assert_eq!(s.value("longhaul_control_punt_drops_total", &[]), 0.0);
    let cmd = [("ring", "command"), ("worker", "0")];
    let punt = [("ring", "punt"), ("worker", "0")];
    assert_eq!(s.value("longhaul_ring_occupancy", &cmd), 1.0);
    assert_eq!(s.value("longhaul_ring_capacity", &cmd), 4096.0);
    assert_eq!(s.value("longhaul_ring_occupancy", &punt), 2.0);
    assert_eq!(s.value("longhaul_ring_capacity", &punt), 1024.0);

    // A mechanism's own series (`Snapshot::extra`), with their HELP and TYPE.
    assert_eq!(s.value("longhaul_test_events_total", &[]), 100.0);
    assert_eq!(s.types["longhaul_test_events_total"], "counter");
    assert!(s.helps.contains("longhaul_test_events_total"));
    assert_eq!(s.value("longhaul_test_depth_bytes", &[]), 25e6);
    assert_eq!(s.types["longhaul_test_depth_bytes"], "gauge");
    let late = "longhaul_test_lateness_seconds";
    assert_eq!(s.types[late], "histogram");
    assert!(s.helps.contains(late));
    assert_eq!(s.value(&format!("{late}_count"), &[]), 3.0);
    assert_eq!(s.value(&format!("{late}_bucket"), &[("le", "+Inf")]), 3.0);
    assert_eq!(
        s.value(&format!("{late}_bucket"), &[("le", "0.000000512")]),
        2.0
    );
    assert!((s.value(&format!("{late}_sum"), &[]) - 5600e-9).abs() < 1e-12);

    // The histogram: cumulative buckets, le in seconds, +Inf = count, exact sum.
    let lat = "longhaul_control_command_latency_seconds";
    let buckets: Vec<(f64, f64)> = s
        .samples
        .iter()
        .filter(|x| x.name == format!("{lat}_bucket"))
        .map(|x| {
            let le = &x.labels["le"];
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            (le, x.value)
        })
        .collect();
    assert!(buckets
        .windows(2)
        .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    assert_eq!(buckets.last().unwrap(), &(f64::INFINITY, 4.0));
    let at = |le: f64| buckets.iter().find(|b| (b.0 - le).abs() < 1e-15).unwrap().1;
    assert_eq!(at(512e-9), 0.0);
    assert_eq!(at(1024e-9), 1.0); // 900 ns
    assert_eq!(at(2048e-9), 2.0); // 1500 ns
    assert_eq!(at(32768e-9), 4.0); // 2 x 20 us
    assert_eq!(s.value(&format!("{lat}_count"), &[]), 4.0);
    assert!((s.value(&format!("{lat}_sum"), &[]) - 42_400e-9).abs() < 1e-12);

    // The endpoint itself.
    let c = Client::new(&server.local_addr().to_string(), None);
    assert_eq!(c.raw("GET", "/", b"").unwrap().0, 404);
    assert_eq!(c.raw("POST", "/metrics", b"").unwrap().0, 405);
    let mut stream = std::net::TcpStream::connect(server.local_addr()).unwrap();
    use std::io::{Read, Write};
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut head = String::new();
    stream.read_to_string(&mut head).unwrap();
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{}",
        &head[..200.min(head.len())]
    );
}

#[test]
fn counters_stay_monotonic_when_the_switch_restarts() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let m = Metrics::install().unwrap();
    let name = "longhaul_port_rx_packets_total";
    let port = [("port", "restart0")];
    let mut snap = Snapshot {
        ports: vec![PortSnap {
            name: "restart0".into(),
            rx_pkts: 100,
            ..PortSnap::default()
        }],
        ..Snapshot::default()
    };
    m.publish(&snap);
    assert_eq!(parse(&m.render()).value(name, &port), 100.0);
    snap.ports[0].rx_pkts = 150;
    m.publish(&snap);
    assert_eq!(parse(&m.render()).value(name, &port), 150.0);
    // The switch was rebuilt: its counter starts again from 0.
    snap.ports[0].rx_pkts = 30;
    m.publish(&snap);
    assert_eq!(parse(&m.render()).value(name, &port), 180.0);
    snap.ports[0].rx_pkts = 40;
    m.publish(&snap);
    assert_eq!(parse(&m.render()).value(name, &port), 190.0);
}

#[test]
fn worker_snapshots_are_summed() {
    let mk = |rx: u64, hits: u64, entries: u64, ring: usize| {
        let mut s = SwitchSnapshot::default();
        let mut p = PortSnapshot {
            id: 0,
            name: "dc0".into(),
            ..PortSnapshot::default()
        };
        p.stats.rx_pkts = rx;
        p.stats.pfc_rx[3] = 1;
        p.classes[3].enq_pkts = rx;
        p.classes[3].max_depth_bytes = rx * 10;
        s.ports.push(p);
        s.tables.push((
            "l2",
            TableCounters {
                hits,
                misses: 1,
                entries,
                capacity: 64,
                full_events: 0,
            },
        ));
        s.pipeline.push(("baseline.routed", rx));
        s.control.applied = 2;
        s.control.latency_hist.record(1000);
        s.command_ring = (ring, 16);
        s.punt_ring = (0, 32);
        s
    };
    let snap = from_switches(&[mk(5, 3, 10, 1), mk(7, 4, 11, 2)]);
    assert_eq!(snap.ports.len(), 1);
    assert_eq!(snap.ports[0].rx_pkts, 12);
    assert_eq!(snap.ports[0].pfc_rx[3], 2);
    let q = snap
        .queues
        .iter()
        .find(|q| q.port == "dc0" && q.class == 3)
        .unwrap();
    assert_eq!((q.enq_pkts, q.max_depth_bytes), (12, 70));
    assert_eq!(snap.queues.len(), 8);
    assert_eq!(snap.tables[0].hits, 7);
    assert_eq!(snap.tables[0].entries, 11);
    assert_eq!(snap.pipeline, vec![("baseline.routed".to_owned(), 12)]);
    assert_eq!(snap.commands_applied, 4);
    assert_eq!(snap.command_latency.count, 2);
    assert_eq!(snap.command_latency.sum_ns, 2000);
    assert_eq!(
        snap.rings
            .iter()
            .map(|r| (r.worker, r.command_len))
            .collect::<Vec<_>>(),
        vec![(0, 1), (1, 2)]
    );
    // The mechanisms add their own series (the control thread asks the registry).
    assert!(snap.extra.is_empty());
    // Every drop reason is there, zeros included.
    assert!(snap.drops.iter().any(|(r, n)| r == "no_route" && *n == 0));
    assert!(snap.drops.len() > 10);
}

/// Every generic name is documented (pipelines/tests/metrics_docs.rs checks the documented set
/// is exactly these plus every registered mechanism's names).
#[test]
fn docs_list_every_generic_name() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/metrics.md"),
    )
    .unwrap();
    for name in METRIC_NAMES {
        assert!(
            doc.contains(&format!("| `{name}`")),
            "{name} is not in docs/metrics.md"
        );
    }
}
