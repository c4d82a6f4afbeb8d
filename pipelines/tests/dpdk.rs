//! `longhaul run` on DPDK ports (vdevs, no hugepages, no NIC): net_pcap in -> baseline ->
//! net_pcap out gives the bytes of `replay`; a net_null smoke run with counters and a clean stop;
//! net_ring pairs between the test and the switch; bad devices. Run with
//! `cargo test -p longhaul-pipelines --features dpdk`.
//!
//! EAL starts once per test process, from the `[dpdk] eal_args` of the first config run (every
//! config here carries the same list, with every vdev the tests use: a closed vdev is released
//! by DPDK, so each test uses its own). Runs take `RUNS`: one worker lcore, one run at a time.
#![cfg(feature = "dpdk")]

use longhaul_control::client::Client;
use longhaul_control::config::Config;
use longhaul_dataplane::dpdk::{DpdkPort, DpdkPortConfig, Eal, MbufPool};
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::port::Port;
use longhaul_pipelines::replay::{replay, snapshot_counters, ReplayInput};
use longhaul_pipelines::run::{run, RunOptions, RunReport};
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
    [
        "-l".to_string(),
        "0-1".into(),
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
    ]
    .to_vec()
}

/// configs/baseline.toml with `io` per port (port order; "" = no io), `[control]` on ephemeral
/// ports, metrics off, Kmin above what the unpaced trace can queue (no ECN marks: vdev input
/// arrives at once, the paced replay does not queue), and `[dpdk]`.
fn config(name: &str, io: [&str; 4]) -> PathBuf {
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
        "{out}\n[control]\napi_listen = \"127.0.0.1:0\"\nmetrics_listen = \"off\"\nstats_interval_ms = 20\n\n[dpdk]\neal_args = [{}]\nmbufs = 8191\n",
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

type RunResult = Result<RunReport, String>;

/// Wait until the switch has sent `n` packets on port index `port` (from the API's /stats).
fn wait_tx(api: SocketAddr, port: usize, n: u64) -> serde_json::Value {
    let c = Client::new(&api.to_string(), None);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, s) = c.get("/stats", None).unwrap();
        if s["workers"][0]["ports"][port]["tx_pkts"]
            .as_u64()
            .unwrap_or(0)
            >= n
        {
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
    let cfgv = Config::load(cfg).unwrap();
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
        Err(e) => e,
    };
    assert!(
        e.starts_with("port 'dc0': DPDK port 'net_nope7': no such ethdev (ports: "),
        "{e}"
    );
    assert!(e.contains("(errno 19)"), "{e}");
}
