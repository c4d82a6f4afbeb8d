//! The mechanisms' additions to `/stats` and to the metrics, through the registry (what the
//! control thread calls), and docs/metrics.md listing exactly the exported names: the generic
//! ones and every registered mechanism's.

use longhaul_control::mechanisms::Mechanisms;
use longhaul_control::metrics::{from_switches, Metrics, Series, METRIC_NAMES};
use longhaul_control::plane::snapshot_json;
use longhaul_dataplane::control::LatencyHist;
use longhaul_dataplane::engine::SwitchSnapshot;
use longhaul_pipelines::bifrost::generator::BifrostStats;
use longhaul_runtime::MechanismSet;
use serde_json::Value;
use std::collections::BTreeSet;

/// Slot timer lateness: 300 ns, 300 ns, 5 us.
fn lateness() -> LatencyHist {
    let mut h = LatencyHist::default();
    for ns in [300, 300, 5000] {
        h.record(ns);
    }
    h
}

fn with_bifrost(slots: u64, max_l: u64) -> SwitchSnapshot {
    let mut s = SwitchSnapshot::default();
    s.admission.insert(BifrostStats {
        updates: 3 * slots,
        frames: 9,
        slots,
        slots_missed: 1,
        lateness: lateness(),
        overflow_drops: 2,
        max_l_bytes: max_l,
        deferred: 0,
    });
    s
}

/// The `/stats` object of a worker, as the control thread builds it.
fn stats(s: &SwitchSnapshot) -> Value {
    let mut v = snapshot_json(3, s);
    if let Value::Object(m) = &mut v {
        longhaul_pipelines::registry().stats_json(s, m);
    }
    v
}

/// Every metric name longhaul exports: the generic ones and every registered mechanism's.
fn exported() -> BTreeSet<String> {
    let reg = longhaul_pipelines::registry();
    METRIC_NAMES
        .iter()
        .copied()
        .chain(
            reg.mechanisms()
                .iter()
                .flat_map(|m| m.metric_names().iter().copied()),
        )
        .map(str::to_string)
        .collect()
}

#[test]
fn docs_list_exactly_the_exported_names() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/metrics.md"),
    )
    .unwrap();
    // Names in the first column of the reference tables.
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `longhaul_"))
        .filter_map(|l| l.split('`').next())
        .map(|rest| format!("longhaul_{rest}"))
        .collect();
    let exported = exported();
    assert_eq!(documented, exported);
}

/// `/stats` carries Bifrost's counters under `bifrost`, `null` without `[bifrost]`.
#[test]
fn stats_json_has_the_bifrost_counters() {
    assert!(stats(&SwitchSnapshot::default())["bifrost"].is_null());
    let v = stats(&with_bifrost(10, 123_456));
    let b = &v["bifrost"];
    assert_eq!(v["worker"], 3);
    for (k, want) in [
        ("slots", 10),
        ("slots_missed", 1),
        ("updates", 30),
        ("frames", 9),
        ("deferred", 0),
        ("overflow_drops", 2),
        ("max_l_bytes", 123_456),
        ("slot_late_max_ns", 5000),
    ] {
        assert_eq!(b[k].as_u64(), Some(want), "bifrost.{k} in {b}");
    }
    let p99 = b["slot_late_p99_ns"].as_u64().unwrap();
    assert!((5000..=8192).contains(&p99), "p99 {p99}");
    let p50 = b["slot_late_p50_ns"].as_u64().unwrap();
    assert!((300..=512).contains(&p50), "p50 {p50}");
}

/// Bifrost's series are summed over the workers (the largest L is the largest of theirs), none
/// without `[bifrost]`, and scrape with their names, types and values.
#[test]
fn bifrost_metrics_are_summed_and_exported() {
    let reg = longhaul_pipelines::registry();
    let mut none = Vec::new();
    reg.metrics(&[SwitchSnapshot::default()], &mut none);
    assert!(none.is_empty(), "{none:?}");

    let snaps = [with_bifrost(5, 500), with_bifrost(7, 700)];
    let mut snap = from_switches(&snaps);
    reg.metrics(&snaps, &mut snap.extra);
    let value = |name: &str| {
        snap.extra.iter().find_map(|s| match s {
            Series::Counter { name: n, value, .. } | Series::Gauge { name: n, value, .. }
                if *n == name =>
            {
                Some(*value)
            }
            _ => None,
        })
    };
    assert_eq!(value("longhaul_bifrost_slots_total"), Some(12));
    assert_eq!(value("longhaul_bifrost_frames_total"), Some(18));
    assert_eq!(value("longhaul_bifrost_max_queue_bytes"), Some(700));
    let lat = snap
        .extra
        .iter()
        .find_map(|s| match s {
            Series::Histogram { lat, .. } => Some(lat.clone()),
            _ => None,
        })
        .expect("the lateness histogram");
    assert_eq!(lat.count, 6);

    let m = Metrics::install().unwrap();
    m.publish(&snap);
    let text = m.render();
    for (line, want) in [
        ("longhaul_bifrost_slots_total ", "12"),
        ("longhaul_bifrost_slots_missed_total ", "2"),
        ("longhaul_bifrost_updates_total ", "36"),
        ("longhaul_bifrost_overflow_drops_total ", "4"),
        ("longhaul_bifrost_max_queue_bytes ", "700"),
        ("longhaul_bifrost_slot_lateness_seconds_count ", "6"),
        (
            "longhaul_bifrost_slot_lateness_seconds_bucket{le=\"0.000000512\"} ",
            "4",
        ),
    ] {
        let got = text
            .lines()
            .find_map(|l| l.strip_prefix(line))
            .unwrap_or_else(|| panic!("no {line} in\n{text}"));
        assert_eq!(got, want, "{line}");
    }
    for name in [
        "longhaul_bifrost_slots_total",
        "longhaul_bifrost_max_queue_bytes",
        "longhaul_bifrost_slot_lateness_seconds",
    ] {
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "no HELP for {name}"
        );
    }
    assert!(text.contains("# TYPE longhaul_bifrost_slots_total counter"));
    assert!(text.contains("# TYPE longhaul_bifrost_max_queue_bytes gauge"));
    assert!(text.contains("# TYPE longhaul_bifrost_slot_lateness_seconds histogram"));
}

/// Every `longhaul_*` metric a file uses (histogram series `_bucket`/`_sum`/`_count` named by
/// their histogram).
fn metrics_used(text: &str, exported: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("longhaul_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|b| exported.contains(*b)))
            .unwrap_or(name);
        out.insert(base.to_string());
        rest = &tail[end..];
    }
    out
}

#[test]
fn the_dashboard_and_the_alerts_use_only_exported_metrics() {
    let exported = exported();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/grafana");
    let dash = std::fs::read_to_string(dir.join("longhaul-dashboard.json")).unwrap();
    let v: Value = serde_json::from_str(&dash).expect("the dashboard is valid JSON");
    let panels = v["panels"].as_array().unwrap();
    let exprs: Vec<&str> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
        .collect();
    assert!(exprs.len() >= 20, "{} queries", exprs.len());
    let alerts = std::fs::read_to_string(dir.join("alerts.yml")).unwrap();
    assert!(alerts.matches("- alert: ").count() >= 8);
    for (what, text) in [
        ("dashboard", exprs.join("\n")),
        ("alerts.yml", alerts.clone()),
    ] {
        let used = metrics_used(&text, &exported);
        let unknown: Vec<&String> = used.difference(&exported).collect();
        assert!(
            unknown.is_empty(),
            "{what} uses metrics longhaul does not export: {unknown:?}"
        );
        assert!(used.len() >= 8, "{what} uses only {used:?}");
    }
    // The pipeline counters they name exist: the neighbour ones are the baseline's.
    let mut names = Vec::new();
    let cfg = longhaul_pipelines::load_config(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/routed-arp.toml"),
    )
    .unwrap();
    longhaul_pipelines::baseline::Forwarding::new(&cfg).counters(&mut |n, _| names.push(n));
    assert!(alerts.contains("name=\"neighbor.failed\"") && names.contains(&"neighbor.failed"));
}

/// Every alert rule has a `promtool test rules` case (docs/grafana/alerts.test.yml, run by
/// .ci/run) that sees it fire and sees it quiet.
#[test]
fn every_alert_rule_has_a_promtool_test() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/grafana");
    let alerts = std::fs::read_to_string(dir.join("alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(dir.join("alerts.test.yml")).unwrap();
    let names: Vec<&str> = alerts
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert!(names.len() >= 10, "{names:?}");
    // And a dashboard panel shows what each rule watches.
    let dash = std::fs::read_to_string(dir.join("longhaul-dashboard.json")).unwrap();
    let exported = exported();
    for expr in alerts
        .lines()
        .filter_map(|l| l.trim().strip_prefix("expr: "))
    {
        for m in metrics_used(expr, &exported) {
            assert!(
                dash.contains(&format!("{m}{{")),
                "no dashboard panel shows {m} (alert expr {expr})"
            );
        }
    }
    for n in names {
        let cases = tests
            .lines()
            .filter(|l| l.trim() == format!("alertname: {n}"))
            .count();
        assert!(
            cases >= 2,
            "{n}: {cases} promtool cases (one quiet, one firing needed)"
        );
    }
}
