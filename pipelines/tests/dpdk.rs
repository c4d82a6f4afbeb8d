//! `longhaul run` on DPDK ports (vdevs, no hugepages, no NIC): net_pcap in -> baseline ->
//! net_pcap out gives the bytes of `replay`; a net_null smoke run with counters and a clean stop;
//! net_ring pairs between the test and the switch; bad devices. Run with
//! `cargo test -p longhaul-pipelines --features dpdk`.
//!
//! EAL starts once per test process, from the `[dpdk] eal_args` of the first config run (every
//! config here carries the same list, with every vdev the tests use: a closed vdev is released
//! by DPDK, so each test uses its own). Runs take `RUNS`: one run at a time. EAL has two worker
//! lcores (1 and 2, on CPU 1: CI has two CPUs), for the two-worker test.
#![cfg(feature = "dpdk")]

use longhaul_control::client::Client;
use longhaul_dataplane::dpdk::{DpdkPort, DpdkPortConfig, Eal, MbufPool};
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::port::Port;
use longhaul_pipelines::run;
use longhaul_pipelines::{replay, snapshot_counters};
use longhaul_runtime::ReplayInput;
use longhaul_runtime::{RunOptions, RunReport};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn trace() -> PathBuf {
    root().join("examples/roce-64flows.pcap")
}

fn tmp() -> PathBuf {
    let d = std::env::temp_dir().join(format!("longhaul-dpdk-run-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One run at a time (the worker lcore, and DPDK's control path).
fn serial() -> MutexGuard<'static, ()> {
    static RUNS: Mutex<()> = Mutex::new(());
    RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The EAL arguments of every config here (EAL starts once per process).
fn eal_args() -> Vec<String> {
    let t = trace();
    let out = tmp().join("pcap-wan0.pcap");
    let rev = reverse_trace();
    let d = tmp();
    [
        "--lcores".to_string(),
        "0@0,1@1,2@1".into(),
        "--no-huge".into(),
        "-m".into(),
        "512".into(),
        "--no-pci".into(),
        "--no-shconf".into(),
        "--no-telemetry".into(),
        "--log-level=lib.eal:error".into(),
        format!("--file-prefix=longhaul-run-test-{}", std::process::id()),
        format!("--vdev=net_pcap0,rx_pcap={}", t.display()),
        format!("--vdev=net_pcap1,tx_pcap={}", out.display()),
        "--vdev=net_null0".into(),
        "--vdev=net_null1".into(),
        // Two workers: one rx queue each (software dispatch), one tx queue per worker.
        format!(
            "--vdev=net_pcap2,rx_pcap={},tx_pcap={},tx_pcap={}",
            t.display(),
            d.join("w-wan0-q0.pcap").display(),
            d.join("w-wan0-q1.pcap").display()
        ),
        format!(
            "--vdev=net_pcap3,rx_pcap={},tx_pcap={},tx_pcap={}",
            rev.display(),
            d.join("w-dc0-q0.pcap").display(),
            d.join("w-dc0-q1.pcap").display()
        ),
        "--vdev=net_null2".into(),
        // Two rx queues without RSS (net_pcap has none; net_null advertises RSS).
        format!(
            "--vdev=net_pcap4,rx_pcap={t},rx_pcap={t},tx_pcap={},tx_pcap={}",
            d.join("norss-q0.pcap").display(),
            d.join("norss-q1.pcap").display(),
            t = t.display()
        ),
    ]
    .to_vec()
}

/// The trace's reverse direction, as the remote DC sends it into wan0: addresses swapped, from
/// the DCI peer's MAC to wan0's MAC. Written before EAL starts (net_pcap opens it at probe).
fn reverse_trace() -> PathBuf {
    let p = tmp().join("reverse.pcap");
    let mut recs = read_pcap(trace()).unwrap();
    for r in recs.iter_mut() {
        let f = &mut r.data;
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 3]); // wan0
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0x20, 1]); // DCI peer
        let (src, dst) = (f[26..30].to_vec(), f[30..34].to_vec());
        f[26..30].copy_from_slice(&dst);
        f[30..34].copy_from_slice(&src); // the IPv4 checksum is unchanged by the swap
    }
    longhaul_dataplane::pcap::write_pcap(&p, &recs).unwrap();
    p
}

/// The unordered IPv4 pair of an Ethernet/IPv4 frame.
fn ip_pair(f: &[u8]) -> ([u8; 4], [u8; 4]) {
    let a: [u8; 4] = f[26..30].try_into().unwrap();
    let b: [u8; 4] = f[30..34].try_into().unwrap();
    (a.min(b), a.max(b))
}

/// Sum of `tx_pkts` of port index `port` over every worker of a /stats body.
fn tx_all_workers(s: &serde_json::Value, port: usize) -> u64 {
    s["workers"]
        .as_array()
        .map(|ws| {
            ws.iter()
                .map(|w| w["ports"][port]["tx_pkts"].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

/// configs/baseline.toml with `io` per port (port order; "" = no io), `[control]` on ephemeral
/// ports, metrics off, Kmin above what the unpaced trace can queue (no ECN marks: vdev input
/// arrives at once, the paced replay does not queue), and `[dpdk]`.
fn config(name: &str, io: [&str; 4]) -> PathBuf {
    config_with(name, io, "", "off")
}

/// [`config`] with extra `[dpdk]` lines and a metrics address.
fn config_with(name: &str, io: [&str; 4], dpdk_extra: &str, metrics: &str) -> PathBuf {
    let base = std::fs::read_to_string(root().join("configs/baseline.toml")).unwrap();
    let mut out = String::new();
    let mut k = 0;
    for line in base.lines() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with("mtu = 4200") {
            if !io[k].is_empty() {
                out.push_str(&format!("io = {}\n", io[k]));
            }
            k += 1;
        }
    }
    assert_eq!(k, 4);
    let out = out.replace(
        "kmin_bytes = 100000, kmax_bytes = 400000",
        "kmin_bytes = 4000000, kmax_bytes = 4194304",
    );
    let args: Vec<String> = eal_args().iter().map(|a| format!("{a:?}")).collect();
    let text = format!(
        "{out}\n[control]\napi_listen = \"127.0.0.1:0\"\nmetrics_listen = \"{metrics}\"\nstats_interval_ms = 20\n\n[dpdk]\neal_args = [{}]\nmbufs = 8191\n{dpdk_extra}",
        args.join(", ")
    );
    let p = tmp().join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

fn dpdk(device: &str) -> String {
    format!("{{ kind = \"dpdk\", device = \"{device}\" }}")
}

/// Start `run` on a thread; returns its API address, the stop flag and the join handle.
fn start(
    cfg: PathBuf,
) -> (
    SocketAddr,
    Arc<AtomicBool>,
    std::thread::JoinHandle<RunResult>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let mut opts = RunOptions::new(stop.clone());
    opts.on_ready = Some(Arc::new(move |api, _| {
        let _ = tx.send(api);
    }));
    let h = std::thread::spawn(move || run(&cfg, opts));
    let api = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(a) => a,
        Err(_) => match h.join().unwrap() {
            Err(e) => panic!("run failed to start: {e}"),
            Ok(_) => panic!("run stopped before it was ready"),
        },
    };
    (api, stop, h)
}

type RunResult = Result<RunReport, longhaul_runtime::Error>;

/// Wait until the switch has sent `n` packets on port index `port` (from the API's /stats).
fn wait_tx(api: SocketAddr, port: usize, n: u64) -> serde_json::Value {
    let c = Client::new(&api.to_string(), None);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, s) = c.get("/stats", None).unwrap();
        if tx_all_workers(&s, port) >= n {
            return s;
        }
        assert!(Instant::now() < deadline, "no {n} packets out: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn counter(r: &RunReport, name: &str) -> u64 {
    snapshot_counters(&r.snapshot)
        .into_iter()
        .find(|(n, _)| n == name)
        .map_or(0, |(_, v)| v)
}

/// The frames `replay` sends on wan0 (port id 2) for the trace on dc0.
fn replay_wan0(cfg: &Path) -> Vec<Vec<u8>> {
    let cfgv = longhaul_pipelines::load_config(cfg).unwrap();
    let res = replay(
        &cfgv,
        vec![ReplayInput {
            port: 0,
            records: read_pcap(trace()).unwrap(),
        }],
    )
    .unwrap();
    res.outputs[&2].iter().map(|r| r.data.clone()).collect()
}

#[track_caller]
fn assert_same_frames(got: &[Vec<u8>], want: &[Vec<u8>]) {
    assert_eq!(got.len(), want.len());
    let first_diff = got.iter().zip(want.iter()).position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "first differing frame");
}

#[test]
fn net_pcap_in_baseline_net_pcap_out_matches_replay() {
    let _g = serial();
    let cfg = config("pcap", [&dpdk("net_pcap0"), "", &dpdk("net_pcap1"), ""]);
    let (api, stop, h) = start(cfg.clone());
    wait_tx(api, 2, 1024);
    stop.store(true, Ordering::SeqCst);
    let r = h.join().unwrap().expect("run");
    assert_eq!(r.worker.rx, 1024);
    assert_eq!(r.worker.tx, 1024);
    assert_eq!(r.worker.ports[2].tx_pkts, 1024);
    assert_eq!(r.worker.ports[2].tx_errors, 0);
    // net_pcap1 wrote its file when the port closed (the worker drops its ports on stop).
    let out = read_pcap(tmp().join("pcap-wan0.pcap")).expect("net_pcap1's tx_pcap");
    let got: Vec<Vec<u8>> = out.into_iter().map(|r| r.data).collect();
    assert_same_frames(&got, &replay_wan0(&cfg));
}

#[test]
fn net_null_smoke_counters_and_clean_stop() {
    let _g = serial();
    let cfg = config("null", [&dpdk("net_null0"), "", &dpdk("net_null1"), ""]);
    let (api, stop, h) = start(cfg);
    // net_null receives 64-byte frames of zeros as fast as it is polled: let it run a moment.
    let c = Client::new(&api.to_string(), None);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, s) = c.get("/stats", None).unwrap();
        if s["workers"][0]["ports"][0]["rx_pkts"].as_u64().unwrap_or(0) > 10_000 {
            break;
        }
        assert!(Instant::now() < deadline, "no traffic: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    let r = h.join().unwrap().expect("clean stop");
    assert!(r.worker.rx > 10_000, "{:?}", r.worker);
    let p0 = &r.worker.ports[0];
    assert!(
        p0.rx_pkts > 10_000 && p0.rx_bytes == p0.rx_pkts * 64,
        "{p0:?}"
    );
    // Zero frames are not Ethernet the baseline forwards: every one is counted as a drop.
    let rx = counter(&r, "port.dc0.rx_pkts") + counter(&r, "port.wan0.rx_pkts");
    assert!(rx > 10_000, "{:?}", snapshot_counters(&r.snapshot));
    let dropped: u64 = snapshot_counters(&r.snapshot)
        .iter()
        .filter(|(n, _)| n.starts_with("drop."))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(dropped, rx, "{:?}", snapshot_counters(&r.snapshot));
}

#[test]
fn net_ring_pairs_between_the_test_and_the_switch() {
    let _g = serial();
    // Make sure EAL is up (with this file's arguments) before making ring pairs.
    let eal = match Eal::get() {
        Some(e) => e,
        None => Eal::init(&eal_args()).expect("EAL"),
    };
    let (gen, sw_in) = eal.ring_pair("rgen", "rin", 4096).unwrap();
    let (sw_out, sink) = eal.ring_pair("rout", "rsink", 4096).unwrap();
    let cfg = config("ring", [&dpdk(&sw_in), "", &dpdk(&sw_out), ""]);
    let (api, stop, h) = start(cfg.clone());

    let mut pool = MbufPool::new(&eal, "ring-test", 4095, 0, 4480).unwrap();
    let pc = DpdkPortConfig::default();
    let mut gen = DpdkPort::open(&eal, &gen, &pc, &pool).unwrap();
    let mut sink = DpdkPort::open(&eal, &sink, &pc, &pool).unwrap();
    let frames = read_pcap(trace()).unwrap();
    for chunk in frames.chunks(32) {
        let mut burst = Vec::new();
        for f in chunk {
            let mut m = pool.alloc().expect("mbuf");
            m.append(f.data.len())
                .expect("room")
                .copy_from_slice(&f.data);
            burst.push(m);
        }
        assert_eq!(gen.tx_burst(0, &mut burst, &mut pool), chunk.len());
    }
    wait_tx(api, 2, 1024);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < 1024 && Instant::now() < deadline {
        let mut burst = Vec::new();
        sink.rx_burst(0, &mut pool, &mut burst, 32);
        got.extend(burst.iter().map(|m| m.data().to_vec()));
    }
    stop.store(true, Ordering::SeqCst);
    let r = h.join().unwrap().expect("run");
    assert_eq!(r.worker.rx, 1024);
    assert_same_frames(&got, &replay_wan0(&cfg));
}

#[test]
fn a_device_that_does_not_exist_is_an_error_naming_the_port() {
    let _g = serial();
    let cfg = config("nope", [&dpdk("net_nope7"), "", "", ""]);
    let opts = RunOptions::new(Arc::new(AtomicBool::new(false)));
    let e = match run(&cfg, opts) {
        Ok(_) => panic!("ran with a port that does not exist"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.starts_with("port 'dc0': DPDK port 'net_nope7': no such ethdev (ports: "),
        "{e}"
    );
    assert!(e.contains("(errno 19)"), "{e}");
}

#[test]
fn two_workers_both_directions_of_a_flow_land_on_one_worker() {
    let _g = serial();
    let io0 = "{ kind = \"dpdk\", device = \"net_pcap2\", rx_queues = 1, tx_queues = 2 }";
    let io2 = "{ kind = \"dpdk\", device = \"net_pcap3\", rx_queues = 1, tx_queues = 2 }";
    let cfg = config_with("two", [io0, "", io2, ""], "workers = 2\n", "off");
    let (api, stop, h) = start(cfg);
    // 1024 frames each way: dc0 -> wan0 (port 2) and wan0 -> dc0 (port 0).
    let s = wait_tx(api, 2, 1024);
    assert_eq!(s["workers"].as_array().map(|w| w.len()), Some(2), "{s}");
    wait_tx(api, 0, 1024);
    stop.store(true, Ordering::SeqCst);
    let r = h.join().unwrap().expect("run");
    assert_eq!(r.workers.len(), 2);
    assert_eq!(r.worker.rx, 2048);
    assert_eq!(r.worker.tx, 2048);
    assert!(
        r.workers.iter().all(|w| w.rx > 0),
        "both workers get flows: {:?}",
        r.workers.iter().map(|w| w.rx).collect::<Vec<_>>()
    );
    // Worker w sends on tx queue w of every port: the queue a frame left by names its worker.
    let mut worker_of: std::collections::HashMap<([u8; 4], [u8; 4]), usize> = Default::default();
    let mut per_queue = [0usize; 4];
    for (k, (port, q)) in [("wan0", 0), ("wan0", 1), ("dc0", 0), ("dc0", 1)]
        .into_iter()
        .enumerate()
    {
        let recs = read_pcap(tmp().join(format!("w-{port}-q{q}.pcap"))).unwrap();
        per_queue[k] = recs.len();
        for rec in recs {
            let pair = ip_pair(&rec.data);
            let w = *worker_of.entry(pair).or_insert(q);
            assert_eq!(w, q, "flow {pair:?} left by worker {w} and by worker {q}");
        }
    }
    assert_eq!(per_queue.iter().sum::<usize>(), 2048, "{per_queue:?}");
    assert_eq!(worker_of.len(), 64, "64 flows");
    assert!(per_queue.iter().all(|&n| n > 0), "{per_queue:?}");
    // Each flow's frames are there in both directions.
    assert_eq!(per_queue[0] + per_queue[1], 1024);
    assert_eq!(per_queue[2] + per_queue[3], 1024);
}

#[test]
fn link_state_and_xstats_reach_the_metrics() {
    let _g = serial();
    let eal = match Eal::get() {
        Some(e) => e,
        None => Eal::init(&eal_args()).expect("EAL"),
    };
    // net_ring can take its link down (net_null cannot: ENOTSUP).
    let (_peer, wan) = eal.ring_pair("lkpeer", "lkwan", 1024).unwrap();
    let cfg = config_with(
        "link",
        [&dpdk("net_null2"), "", &dpdk(&wan), ""],
        "",
        "127.0.0.1:0",
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let mut opts = RunOptions::new(stop.clone());
    opts.on_ready = Some(Arc::new(move |_, m| {
        let _ = tx.send(m);
    }));
    let h = std::thread::spawn(move || run(&cfg, opts));
    // Stop the run even when an assertion below fails (the next test needs the lcore).
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let _stop_guard = StopOnDrop(stop.clone());
    let metrics = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("ready")
        .expect("metrics address");
    let scrape = || -> String {
        use std::io::{Read, Write};
        let mut c = std::net::TcpStream::connect(metrics).unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut body = String::new();
        c.read_to_string(&mut body).unwrap();
        body
    };
    let wait_for = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let body = scrape();
            if body.lines().any(|l| l.starts_with(what)) {
                return body;
            }
            assert!(Instant::now() < deadline, "no '{what}' in:\n{body}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // Up at start, with the PMD's own counters.
    wait_for("longhaul_port_link_up{port=\"wan0\"} 1");
    let body = wait_for("longhaul_port_xstat{port=\"dc0\",name=\"rx_good_packets\"}");
    assert!(
        body.contains("longhaul_port_xstat{port=\"wan0\",name=\"tx_good_packets\"}"),
        "{body}"
    );
    // The link goes down while running: the gauge follows, nothing crashes.
    eal.set_link(&wan, false)
        .expect("net_ring has set_link_down");
    wait_for("longhaul_port_link_up{port=\"wan0\"} 0");
    eal.set_link(&wan, true).unwrap();
    wait_for("longhaul_port_link_up{port=\"wan0\"} 1");
    stop.store(true, Ordering::SeqCst);
    h.join().unwrap().expect("clean stop");
}

#[test]
fn a_link_that_stays_down_is_an_error_naming_the_port() {
    let _g = serial();
    let eal = match Eal::get() {
        Some(e) => e,
        None => Eal::init(&eal_args()).expect("EAL"),
    };
    let pool = MbufPool::new(&eal, "link-test", 1023, 0, 2048).unwrap();
    let (a, _b) = eal.ring_pair("ldown_a", "ldown_b", 256).unwrap();
    let port = DpdkPort::open(&eal, &a, &DpdkPortConfig::default(), &pool).unwrap();
    eal.set_link(&a, false).unwrap();
    let e = port
        .wait_link_up(Duration::from_millis(200))
        .expect_err("link is down");
    assert_eq!(
        e.to_string(),
        format!("DPDK port '{a}': link down after 200 ms (check the cable and the peer)")
    );
    eal.set_link(&a, true).unwrap();
    assert!(port.wait_link_up(Duration::from_millis(200)).is_ok());
    let e = eal.set_link("net_nope9", false).unwrap_err().to_string();
    assert!(
        e.starts_with("DPDK port 'net_nope9': no such ethdev"),
        "{e}"
    );
}

#[test]
fn rx_queues_without_rss_are_refused_naming_the_port() {
    let _g = serial();
    let io = "{ kind = \"dpdk\", device = \"net_pcap4\", rx_queues = 2, tx_queues = 2 }";
    let cfg = config_with("norss", [io, "", "", ""], "workers = 2\n", "off");
    let stop = Arc::new(AtomicBool::new(false));
    let opts = RunOptions::new(stop.clone());
    // Should it start after all, stop it so the failure is reported rather than hung.
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(10));
        stop.store(true, Ordering::SeqCst);
    });
    let e = match run(&cfg, opts) {
        Ok(_) => panic!("ran with rx queues but no RSS"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.starts_with("port 'dc0': rx_queues = 2 needs RSS, which net_pcap"),
        "{e}"
    );
}
