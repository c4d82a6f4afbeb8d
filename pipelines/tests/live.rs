//! `longhaul run` in-process: the live worker over pcap ports, the control thread, the
//! management API over a real socket, Prometheus metrics, reload, and a clean stop.

use longhaul_control::client::Client;
use longhaul_dataplane::pcap::read_pcap;
use longhaul_pipelines::run;
use longhaul_runtime::RunOptions;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

#[path = "../../tests/support/tmpdir.rs"]
mod tmpdir;
use tmpdir::TmpDir;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tmpdir(name: &str) -> TmpDir {
    TmpDir::new("live", name)
}

/// configs/baseline.toml with `io` for each port (in port order) and a `[control]` section on
/// ephemeral ports.
fn config_with_io(dir: &Path, io: [&str; 4], extra: &str) -> PathBuf {
    let base = std::fs::read_to_string(root().join("configs/baseline.toml")).unwrap();
    let mut out = String::new();
    let mut k = 0;
    for line in base.lines() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with("mtu = 4200") {
            // An empty string: no `io` (a null port in a live run).
            if !io[k].is_empty() {
                out.push_str(&format!("io = {}\n", io[k]));
            }
            k += 1;
        }
    }
    assert_eq!(k, 4);
    out.push_str("\n[control]\napi_listen = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\nstats_interval_ms = 20\n");
    out.push_str(extra);
    let p = dir.join("live.toml");
    std::fs::write(&p, out).unwrap();
    p
}

/// configs/baseline.toml with the shipped trace unpaced into dc0 and wan0's frames written to
/// `d/wan0.pcap`; the whole trace arrives at once and queues, so ECN marking is kept out of the
/// comparison with replay by raising Kmin above what the trace can queue (321 kB). `edit`
/// changes the text further.
fn unpaced_trace_config(d: &Path, edit: impl FnOnce(String) -> String) -> PathBuf {
    let trace = root().join("examples/roce-64flows.pcap");
    let cfg = config_with_io(
        d,
        [
            &format!(
                "{{ kind = \"pcap\", rx = \"{}\", pace = false }}",
                trace.display()
            ),
            "",
            "{ kind = \"pcap\", tx = \"wan0.pcap\" }",
            "",
        ],
        "",
    );
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "kmin_bytes = 100000, kmax_bytes = 400000",
        "kmin_bytes = 4000000, kmax_bytes = 4194304",
    );
    std::fs::write(&cfg, edit(text)).unwrap();
    cfg
}

/// `d/wan0.pcap` holds the 1024 frames the deterministic replay of `cfg` sends out of wan0, in
/// its order and bytes (timestamps are wall-clock).
fn assert_wan0_like_replay(d: &Path, cfg: &Path) {
    let trace = root().join("examples/roce-64flows.pcap");
    let out = read_pcap(d.join("wan0.pcap")).expect("wan0.pcap written");
    let cfgv = longhaul_pipelines::load_config(cfg).unwrap();
    let res = longhaul_pipelines::replay(
        &cfgv,
        vec![longhaul_runtime::ReplayInput {
            port: 0,
            records: read_pcap(&trace).unwrap(),
        }],
    )
    .unwrap();
    let want: Vec<&Vec<u8>> = res.outputs[&2].iter().map(|r| &r.data).collect();
    let got: Vec<&Vec<u8>> = out.iter().map(|r| &r.data).collect();
    assert_eq!(got.len(), 1024);
    assert_eq!(got.len(), want.len());
    let first_diff = got.iter().zip(want.iter()).position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "first differing frame");
}

#[test]
fn pcap_run_until_idle_forwards_like_replay() {
    let d = tmpdir("idle");
    let cfg = unpaced_trace_config(&d, |t| t);
    let mut opts = RunOptions::new(Arc::new(AtomicBool::new(false)));
    opts.until_idle = true;
    let report = run(&cfg, opts).expect("run");
    assert_eq!(report.worker.rx, 1024);
    assert_eq!(report.worker.tx, 1024);
    assert_wan0_like_replay(&d, &cfg);
}

fn wait_ready(rx: &mpsc::Receiver<(SocketAddr, Option<SocketAddr>)>) -> (SocketAddr, SocketAddr) {
    let (a, m) = rx.recv_timeout(Duration::from_secs(10)).expect("ready");
    (a, m.expect("metrics on"))
}

fn scrape(addr: SocketAddr) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn live_api_tables_reload_metrics_and_clean_stop() {
    let d = tmpdir("api");
    let trace = root().join("examples/roce-64flows.pcap");
    // The trace loops forever on dc0 (paced), so traffic flows during the whole test.
    let cfg = config_with_io(
        &d,
        [
            &format!(
                "{{ kind = \"pcap\", rx = \"{}\", rx_loop = true, pace = true }}",
                trace.display()
            ),
            "",
            "",
            "",
        ],
        "",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let mut opts = RunOptions::new(stop.clone());
    opts.on_ready = Some(Arc::new(move |a, m| {
        let _ = tx.send((a, m));
    }));
    let cfg2 = cfg.clone();
    let runner = std::thread::spawn(move || run(&cfg2, opts));
    let (api, metrics) = wait_ready(&rx);
    let c = Client::new(&api.to_string(), None);

    let (st, h) = c.get("/health", None).unwrap();
    assert_eq!(st, 200, "{h}");
    assert_eq!(h["status"], "ok");

    let (st, t) = c.get("/tables", None).unwrap();
    assert_eq!(st, 200);
    assert!(t.to_string().contains("routes"), "{t}");

    // Insert a route, see it listed, delete it.
    let e = json!({"prefix": "192.0.2.0/24", "port": "wan1", "next_hop_mac": "02:00:00:00:20:02"});
    let (st, v) = c.post("/tables/routes", Some(&e)).unwrap();
    assert_eq!(st, 200, "{v}");
    let (st, v) = c.get("/tables/routes?offset=0&limit=100", None).unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["total"], 5, "{v}");
    assert!(v.to_string().contains("192.0.2.0/24"));
    let (st, v) = c
        .delete("/tables/routes", Some(&json!({"prefix": "192.0.2.0/24"})))
        .unwrap();
    assert_eq!(st, 200, "{v}");
    let (st, _) = c
        .delete("/tables/routes", Some(&json!({"prefix": "192.0.2.0/24"})))
        .unwrap();
    assert_eq!(st, 404);
    let (st, v) = c
        .post("/tables/l2", Some(&json!({"mac": "zz", "port": "dc0"})))
        .unwrap();
    assert_eq!(st, 400, "{v}");
    // An unknown table: the 404 names the running pipeline's tables.
    let (st, v) = c.get("/tables/nope", None).unwrap();
    assert_eq!(st, 404, "{v}");
    assert_eq!(
        v["error"].as_str(),
        Some("no table 'nope' (tables: l2, routes, neighbors)")
    );
    // A static neighbour needs an address on the port's subnets; baseline-live has none.
    let n = json!({"port": "dc0", "ip": "10.0.0.9", "mac": "02:00:00:00:10:09"});
    let (st, v) = c.post("/tables/neighbors", Some(&n)).unwrap();
    assert_eq!(st, 400, "{v}");
    assert!(
        v.to_string().contains("on none of port 'dc0''s subnets"),
        "{v}"
    );

    // Reload: a bad file is refused with its key path and the old config keeps running.
    let bad = d.join("bad.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &bad,
        text.replace(
            "port = \"wan0\"\nnext_hop_mac",
            "port = \"wan9\"\nnext_hop_mac",
        ),
    )
    .unwrap();
    let (st, v) = c
        .post("/reload", Some(&json!({"path": bad.display().to_string()})))
        .unwrap();
    assert_eq!(st, 400, "{v}");
    assert!(v.to_string().contains("routes[2].port"), "{v}");
    // Only files in the running config's directory are read.
    for outside in ["/etc/passwd", "../live.toml"] {
        let (st, v) = c
            .post("/reload", Some(&json!({ "path": outside })))
            .unwrap();
        assert_eq!(st, 403, "{outside}: {v}");
    }
    // A good file with one more route reloads live.
    let good = d.join("good.toml");
    std::fs::write(
        &good,
        format!("{text}\n[[routes]]\nprefix = \"198.51.100.0/24\"\nport = \"wan0\"\nnext_hop_mac = \"02:00:00:00:20:01\"\n"),
    )
    .unwrap();
    let (st, v) = c
        .post(
            "/reload",
            Some(&json!({"path": good.display().to_string()})),
        )
        .unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["commands"], 1, "{v}");
    // A structural change (port rates) rebuilds the switch, swapped in without stopping the
    // worker; a [control] change is refused.
    std::fs::write(&bad, text.replace("rate_gbps = 100.0", "rate_gbps = 40.0")).unwrap();
    let (st, v) = c
        .post("/reload", Some(&json!({"path": bad.display().to_string()})))
        .unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["mode"], "rebuild", "{v}");
    let (_, v) = c.get("/tables/routes", None).unwrap();
    assert_eq!(
        v["total"], 4,
        "the rebuilt switch has the file's routes: {v}"
    );
    std::fs::write(
        &bad,
        text.replace("stats_interval_ms = 20", "stats_interval_ms = 30"),
    )
    .unwrap();
    let (st, v) = c
        .post("/reload", Some(&json!({"path": bad.display().to_string()})))
        .unwrap();
    assert_eq!(st, 409, "{v}");
    // So is a change of pipeline (a valid THEMIS config): the workers run the old pipeline's code.
    std::fs::write(
        &bad,
        format!(
            "{}\n[themis]\ndc_ports = [\"dc0\"]\nwan_ports = [\"wan0\"]\n[themis.trp]\n",
            text.replace("pipeline = \"baseline\"", "pipeline = \"themis\"")
        ),
    )
    .unwrap();
    let (st, v) = c
        .post("/reload", Some(&json!({"path": bad.display().to_string()})))
        .unwrap();
    assert_eq!(st, 409, "{v}");
    assert!(
        v.to_string()
            .contains("restart longhaul to change the pipeline"),
        "{v}"
    );
    // After the swap the new switch (new counters) forwards.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, s) = c.get("/stats", None).unwrap();
        let tx_wan0 = s["workers"][0]["ports"][2]["tx_pkts"].as_u64().unwrap_or(0);
        let rate_changed = s["workers"][0]["control"]["applied"].as_u64() == Some(0);
        if rate_changed && tx_wan0 > 100 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no traffic after the rebuild: {s}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Table changes keep working on the new switch.
    let (st, v) = c.post("/tables/routes", Some(&e)).unwrap();
    assert_eq!(st, 200, "{v}");

    // Traffic flows and the command was applied by the busy worker.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, s) = c.get("/stats", None).unwrap();
        let w = &s["workers"][0];
        let applied = w["control"]["applied"].as_u64().unwrap_or(0);
        let tx_wan0 = w["ports"][2]["tx_pkts"].as_u64().unwrap_or(0);
        if applied >= 1 && tx_wan0 > 100 {
            break;
        }
        assert!(Instant::now() < deadline, "stats never showed it: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let m = scrape(metrics);
    for name in [
        "longhaul_port_tx_packets_total",
        "longhaul_table_entries",
        "longhaul_control_commands_applied_total",
        "longhaul_control_command_latency_seconds_bucket",
        "longhaul_ring_capacity",
    ] {
        assert!(m.contains(name), "{name} missing from the scrape");
    }

    stop.store(true, Ordering::SeqCst);
    let report = runner.join().unwrap().expect("run");
    assert!(report.worker.rx > 0);
    assert_eq!(report.worker.swaps, 1);
    assert!(report.snapshot.control.applied >= 1);
    assert_eq!(report.snapshot.control.refused, 0);
    // The API is gone after the stop.
    assert!(std::net::TcpStream::connect(api).is_err());
}

#[test]
fn structural_reload_under_load_loses_nothing() {
    let d = tmpdir("reload-load");
    // wan0 at 5 Mb/s: the whole trace (1024 frames, 321 kB) queues there for about half a
    // second, so the reload lands while it is queued. A small pool: the rebuild makes a new
    // one, and 65536 buffers take long to make.
    let cfg = unpaced_trace_config(&d, |t| {
        t.replace(
            "name = \"wan0\"\nmac = \"02:00:00:00:00:03\"\nrate_gbps = 100.0",
            "name = \"wan0\"\nmac = \"02:00:00:00:00:03\"\nrate_gbps = 0.005",
        )
        .replace("pool_buffers = 65536", "pool_buffers = 2048")
    });
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains("rate_gbps = 0.005"));
    // The structural change: another DRR weight for class 3 (a rebuild, same port I/O).
    let new = d.join("new.toml");
    std::fs::write(
        &new,
        text.replace("weights = [1, 1, 1, 4,", "weights = [1, 1, 1, 5,"),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let mut opts = RunOptions::new(stop.clone());
    opts.until_idle = true;
    opts.on_ready = Some(Arc::new(move |a, m| {
        let _ = tx.send((a, m));
    }));
    let cfg2 = cfg.clone();
    let runner = std::thread::spawn(move || run(&cfg2, opts));
    let (api, _) = wait_ready(&rx);
    let c = Client::new(&api.to_string(), None);
    // Wait until the frames are queued on wan0, then reload.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, s) = c.get("/stats", None).unwrap();
        let rx_dc0 = s["workers"][0]["ports"][0]["rx_pkts"].as_u64().unwrap_or(0);
        if rx_dc0 == 1024 {
            break;
        }
        assert!(Instant::now() < deadline, "the trace never arrived: {s}");
        std::thread::sleep(Duration::from_millis(5));
    }
    let (st, v) = c
        .post("/reload", Some(&json!({"path": new.display().to_string()})))
        .unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["mode"], "rebuild", "{v}");
    let report = runner.join().unwrap().expect("run");
    let w = &report.worker;
    assert_eq!(w.swaps, 1, "{w:?}");
    assert!(
        w.drained_on_swap > 0,
        "the reload should have found frames queued: {w:?}"
    );
    assert_eq!(w.dropped_on_swap, 0, "{w:?}");
    // Every frame left, in the order the deterministic replay sends them.
    assert_wan0_like_replay(&d, &cfg);
}

/// With Bifrost's slot timer the worker takes its bursts in chunks paced by the timer's deadline
/// (runtime/src/live.rs, `SlotPacer`), checking the timer between them: the trace still leaves
/// as replay sends it,
/// nothing lost or reordered, and the slot timer ran during the run.
#[test]
fn slot_timer_chunks_forward_like_replay() {
    let d = tmpdir("slotted");
    let cfg = unpaced_trace_config(&d, |t| {
        t + "\n[bifrost]\nports = [\"dc0\"]\npriorities = [3]\nslot_ns = 10000\n\
             one_way_delay_ns = 100000\nbuffer_bytes = 4000000\n"
    });
    let mut opts = RunOptions::new(Arc::new(AtomicBool::new(false)));
    opts.until_idle = true;
    let report = run(&cfg, opts).expect("run");
    assert_eq!(report.worker.rx, 1024);
    assert_eq!(report.worker.tx, 1024);
    let bf =
        longhaul_pipelines::bifrost::admission::stats(&report.snapshot).expect("bifrost counters");
    assert!(bf.slots > 0, "the slot timer ran: {bf:?}");
    assert_wan0_like_replay(&d, &cfg);
}

/// Issue 42: command latencies recorded as 0 ns. The worker read its loop's clock, then applied
/// the commands it found; one enqueued between the two was stamped after that clock and its
/// latency saturated to 0 (about one in ten on an idle worker, whose loop is short). Latency is
/// now read when each command has been applied: no sample is 0.
#[test]
fn command_latency_is_never_zero() {
    use longhaul_dataplane::control::{mono_ns, Command, Envelope};
    use longhaul_dataplane::engine::{Switch, SwitchSnapshot};
    use longhaul_dataplane::port::{MemoryPort, Port};
    use longhaul_pipelines::baseline::{Baseline, BaselineCommand};
    use longhaul_runtime::live::{run_worker, WorkerOptions};
    use std::sync::Mutex;

    let cfg = longhaul_pipelines::load_config(&root().join("configs/baseline.toml")).unwrap();
    let mut sw = Switch::new(
        longhaul_pipelines::switch_spec(&cfg),
        longhaul_runtime::platform::heap_pool(&cfg),
        Baseline::new(&cfg),
    );
    let ch = sw.channel();
    let mut ports: Vec<Box<dyn Port<_> + Send>> = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..cfg.ports.len() {
        let (p, peer) = MemoryPort::new(64);
        ports.push(Box::new(p));
        peers.push(peer);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let opts = WorkerOptions {
        stop: stop.clone(),
        snapshot: Arc::new(Mutex::new(SwitchSnapshot::default())),
        stats_interval: Duration::from_millis(50),
        until_idle: false,
        idle_sleep: Duration::ZERO,
        idle_flag: None,
    };
    let worker = std::thread::spawn(move || {
        run_worker(&mut sw, &mut ports, &opts, None);
        sw
    });
    const N: u64 = 3000;
    let mac = [2, 0, 0, 0, 0x55, 0x55];
    for i in 0..N {
        let cmd = if i % 2 == 0 {
            BaselineCommand::L2Insert { mac, port: 1 }
        } else {
            BaselineCommand::L2Delete { mac }
        };
        let mut env = Envelope {
            seq: i,
            at: 0,
            issued_ns: mono_ns(),
            cmd: Command::Pipeline(cmd),
        };
        while let Err(e) = ch.commands.push(env) {
            env = e;
            std::hint::spin_loop();
        }
        // Let the worker take it before the next one (a few of its idle loops).
        let t = Instant::now();
        while t.elapsed() < Duration::from_micros(3) {
            std::hint::spin_loop();
        }
    }
    let t = Instant::now();
    let sw = loop {
        if ch.commands.is_empty() || t.elapsed() > Duration::from_secs(10) {
            stop.store(true, Ordering::SeqCst);
            break worker.join().unwrap();
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let h = &sw.control_stats().latency_hist;
    assert_eq!(h.count, N, "every command applied");
    assert_eq!(
        h.buckets[0], 0,
        "{} of {N} command latencies recorded as 0 ns",
        h.buckets[0]
    );
}
