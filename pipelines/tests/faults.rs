//! Fault injection (issue 20): the baseline switch between two faulty ports
//! (`longhaul_dataplane::fault::FaultyPort` over in-memory rings), driven as a live worker drives
//! it but on a virtual clock, so every schedule replays exactly. For each fault: no panic, every
//! frame accounted for (the port's fault counters, the switch's ledger by reason, the frames on
//! the wire), the pool back to full once drained (no leak), and the lossless class (RoCE data,
//! class 3) loses nothing where the fault is not itself a loss.

use longhaul_control::config::Config;
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::fault::{FaultConfig, FaultRates, FaultStats, FaultyPort};
use longhaul_dataplane::packet::{BufPool, HeapBuf, HeapPool};
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::port::BURST;
use longhaul_dataplane::port::{MemoryPeer, MemoryPort, Port};
use longhaul_dataplane::time::Nanos;
use longhaul_pipelines::baseline::Baseline;
use longhaul_pipelines::switch_spec;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn config() -> Config {
    longhaul_pipelines::load_config(&root().join("configs/baseline.toml"))
        .expect("configs/baseline.toml")
}

/// The shipped 64-flow trace: 1024 RoCEv2 frames (class 3, lossless) from dc0 to wan0.
fn trace() -> Vec<Vec<u8>> {
    read_pcap(root().join("examples/roce-64flows.pcap"))
        .expect("trace")
        .into_iter()
        .map(|r| r.data)
        .collect()
}

type Faulty = FaultyPort<MemoryPort, HeapBuf>;

/// What one run saw.
struct Outcome {
    offered: u64,
    on_wire: u64,
    faults: FaultStats,
    tx_errors: u64,
    sw: Switch<HeapPool, Baseline>,
}

/// The trace into dc0 (index 0) through `rx` faults, out of wan0 (index 2) through `tx` faults,
/// with a pool of `pool` buffers and a tx ring of `tx_ring` frames on wan0 (drained by the peer
/// every `drain_every` iterations); runs until everything is out.
fn run(cfg: FaultConfig, pool: usize, tx_ring: usize, drain_every: u64) -> Outcome {
    let c = config();
    let mut sw = Switch::new(
        switch_spec(&c),
        HeapPool::new(pool, c.switch.buffer_data_room),
        Baseline::new(&c),
    );
    // As the live driver: each iteration sends what the link could have sent since the last.
    sw.set_tx_slack(longhaul_runtime::live::LIVE_TX_SLACK_NS);
    let mut peers: Vec<MemoryPeer> = Vec::new();
    let mut ports: Vec<Faulty> = (0..4)
        .map(|i| {
            let (p, peer) = MemoryPort::new(if i == 2 { tx_ring } else { 4096 });
            peers.push(peer);
            FaultyPort::new(
                p,
                FaultConfig {
                    seed: cfg.seed + i,
                    ..cfg
                },
            )
        })
        .collect();
    let frames = trace();
    for f in &frames {
        assert!(peers[0].inject(f));
    }
    let mut burst: Vec<HeapBuf> = Vec::with_capacity(BURST);
    let mut txv: Vec<HeapBuf> = Vec::with_capacity(BURST);
    let mut on_wire = 0u64;
    let mut now: Nanos = 1_000_000;
    for iter in 0u64.. {
        assert!(iter < 2_000_000, "the run never went idle");
        now += 500;
        sw.apply_commands(now, || now);
        for (idx, port) in ports.iter_mut().enumerate() {
            if port.rx_burst(now, sw.pool(), &mut burst, BURST) > 0 {
                sw.receive_burst(idx, now, &mut burst);
            }
        }
        sw.poll(now);
        for (idx, port) in ports.iter_mut().enumerate() {
            loop {
                let n = sw.transmit(idx, now, BURST, &mut |p| txv.push(p));
                if n == 0 {
                    break;
                }
                port.tx_burst(now, &mut txv, sw.pool());
                if n < BURST {
                    break;
                }
            }
        }
        if iter % drain_every == 0 {
            on_wire += peers.iter().map(|p| p.drain().len() as u64).sum::<u64>();
        }
        let inputs_done = peers[0].rx_len() == 0 && ports.iter().all(|p| p.held() == 0);
        if inputs_done && sw.buffered_packets() == 0 && sw.next_event(now).is_none() {
            break;
        }
    }
    on_wire += peers.iter().map(|p| p.drain().len() as u64).sum::<u64>();
    let mut faults = FaultStats::default();
    let mut tx_errors = 0;
    for p in &ports {
        let f = p.fault_stats();
        faults.rx_dropped += f.rx_dropped;
        faults.rx_duplicated += f.rx_duplicated;
        faults.rx_corrupted += f.rx_corrupted;
        faults.rx_truncated += f.rx_truncated;
        faults.rx_reordered += f.rx_reordered;
        faults.rx_delayed += f.rx_delayed;
        faults.rx_empty_bursts += f.rx_empty_bursts;
        faults.tx_dropped += f.tx_dropped;
        faults.tx_duplicated += f.tx_duplicated;
        faults.tx_corrupted += f.tx_corrupted;
        faults.tx_truncated += f.tx_truncated;
        faults.tx_reordered += f.tx_reordered;
        faults.tx_ring_full += f.tx_ring_full;
        tx_errors += Port::<HeapPool>::stats(p).tx_errors;
    }
    Outcome {
        offered: frames.len() as u64,
        on_wire,
        faults,
        tx_errors,
        sw,
    }
}

/// Every frame accounted for, end to end, and no buffer leaked.
fn check_accounting(o: &mut Outcome, pool: usize) {
    let l = o.sw.ledger();
    assert_eq!(l.check(), Ok(()), "switch ledger: {l}");
    let f = &o.faults;
    // What the switch took = what was offered, less rx drops, plus rx copies.
    assert_eq!(
        l.received,
        o.offered - f.rx_dropped + f.rx_duplicated,
        "{f:?} {l}"
    );
    // What reached the wire = what the switch sent, less tx faults and ring overflows, plus copies.
    assert_eq!(
        o.on_wire,
        l.sent - f.tx_dropped - f.tx_ring_full - o.tx_errors + f.tx_duplicated,
        "{f:?} tx_errors {} {l}",
        o.tx_errors
    );
    assert_eq!(l.queued, 0, "{l}");
    assert_eq!(o.sw.pool().available(), pool, "buffers leaked");
}

fn rates(f: impl FnOnce(&mut FaultRates)) -> FaultRates {
    let mut r = FaultRates::default();
    f(&mut r);
    r
}

const POOL: usize = 4096;

#[test]
fn frames_dropped_on_the_wire_are_counted_as_the_faults_and_nothing_else_is_lost() {
    let cfg = FaultConfig {
        rx: rates(|r| r.drop_ppm = 50_000),
        tx: rates(|r| r.drop_ppm = 50_000),
        ..FaultConfig::default()
    };
    let mut o = run(cfg, POOL, 4096, 1);
    check_accounting(&mut o, POOL);
    assert!(o.faults.rx_dropped > 20 && o.faults.tx_dropped > 20);
    // The losses are the faults', not the switch's.
    assert_eq!(o.sw.ledger().dropped, 0);
    assert_eq!(
        o.on_wire,
        o.offered - o.faults.rx_dropped - o.faults.tx_dropped
    );
}

#[test]
fn duplicated_reordered_and_delayed_frames_all_reach_the_wire() {
    let cfg = FaultConfig {
        rx: rates(|r| {
            r.duplicate_ppm = 30_000;
            r.reorder_ppm = 30_000;
            r.delay_ppm = 30_000;
        }),
        tx: rates(|r| {
            r.duplicate_ppm = 30_000;
            r.reorder_ppm = 30_000;
        }),
        ..FaultConfig::default()
    };
    let mut o = run(cfg, POOL, 4096, 1);
    check_accounting(&mut o, POOL);
    let f = o.faults;
    assert!(
        f.rx_duplicated > 0 && f.rx_reordered > 0 && f.rx_delayed > 0,
        "{f:?}"
    );
    assert!(f.tx_duplicated > 0 && f.tx_reordered > 0, "{f:?}");
    // Not a loss: the lossless class loses nothing.
    assert_eq!(o.sw.ledger().dropped, 0, "{}", o.sw.ledger());
    assert_eq!(o.on_wire, o.offered + f.rx_duplicated + f.tx_duplicated);
}

#[test]
fn corrupted_and_truncated_frames_are_dropped_by_reason_or_forwarded_never_lost() {
    let cfg = FaultConfig {
        rx: rates(|r| {
            r.corrupt_ppm = 100_000;
            r.truncate_ppm = 100_000;
        }),
        tx: rates(|r| {
            r.corrupt_ppm = 50_000;
            r.truncate_ppm = 50_000;
        }),
        ..FaultConfig::default()
    };
    let mut o = run(cfg, POOL, 4096, 1);
    check_accounting(&mut o, POOL);
    let f = o.faults;
    assert!(f.rx_corrupted > 50 && f.rx_truncated > 50, "{f:?}");
    let l = o.sw.ledger();
    // Truncated frames fail the parser (counted by reason); the rest went out.
    assert!(l.dropped > 0, "{l}");
    assert!(l.dropped <= f.rx_corrupted + f.rx_truncated, "{l}");
    assert_eq!(l.sent + l.dropped + l.consumed, o.offered, "{l}");
}

#[test]
fn empty_rx_bursts_and_a_full_tx_ring_lose_only_what_the_ring_refused() {
    let cfg = FaultConfig {
        empty_rx_ppm: 300_000,
        tx_full_ppm: 100_000,
        ..FaultConfig::default()
    };
    // wan0's ring holds 64 frames and its peer drains it every 4th iteration.
    let mut o = run(cfg, POOL, 64, 4);
    check_accounting(&mut o, POOL);
    let f = o.faults;
    assert!(f.rx_empty_bursts > 0 && f.tx_ring_full > 0, "{f:?}");
    assert_eq!(o.sw.ledger().dropped, 0);
    assert_eq!(
        o.on_wire,
        o.offered - f.tx_ring_full - o.tx_errors,
        "{f:?} tx_errors {}",
        o.tx_errors
    );
}

#[test]
fn an_exhausted_pool_delays_frames_and_loses_none() {
    // 16 buffers for a 1024-frame burst: rx stops when the pool is empty and retries.
    let mut o = run(FaultConfig::default(), 16, 4096, 1);
    check_accounting(&mut o, 16);
    assert_eq!(o.on_wire, o.offered);
    assert_eq!(o.sw.ledger().dropped, 0);
}

#[test]
fn everything_at_once_balances() {
    let all = rates(|r| {
        r.drop_ppm = 20_000;
        r.duplicate_ppm = 20_000;
        r.corrupt_ppm = 20_000;
        r.truncate_ppm = 20_000;
        r.reorder_ppm = 20_000;
        r.delay_ppm = 20_000;
    });
    for seed in 1..=5 {
        let cfg = FaultConfig {
            seed,
            rx: all,
            tx: all,
            empty_rx_ppm: 100_000,
            tx_full_ppm: 50_000,
            ..FaultConfig::default()
        };
        let mut o = run(cfg, 64, 128, 3);
        check_accounting(&mut o, 64);
    }
}

#[test]
fn a_full_command_ring_is_refused_and_counted_and_the_switch_goes_on() {
    use longhaul_control::api::{ApiError, ManagementBackend};
    use longhaul_control::plane::{ControlPlane, WorkerHandle};
    use longhaul_runtime::MechanismSet;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    let mut c = config();
    c.control.command_ring = 2;
    // A worker that does not poll its ring (stalled): the ring fills after two commands.
    let mut sw = Switch::new(
        switch_spec(&c),
        HeapPool::new(64, c.switch.buffer_data_room),
        Baseline::new(&c),
    );
    let handle = WorkerHandle {
        channel: sw.channel(),
        snapshot: Arc::new(Mutex::new(Default::default())),
    };
    let (mut plane, backend) = ControlPlane::new(
        c.clone(),
        PathBuf::from("configs/baseline.toml"),
        MechanismSet::control(longhaul_pipelines::registry()),
        longhaul_pipelines::baseline::control::BaselineControl::new(&c),
        vec![handle],
        None,
        Arc::new(AtomicBool::new(false)),
    );
    let plane = std::thread::spawn(move || {
        for _ in 0..200 {
            plane.step(Duration::from_millis(10));
        }
        plane
    });
    let route = |i: u8| serde_json::json!({"prefix": format!("192.0.{i}.0/24"), "port": "wan1", "next_hop_mac": "02:00:00:00:20:02"});
    assert!(backend.insert("routes", &route(1)).is_ok());
    assert!(backend.insert("routes", &route(2)).is_ok());
    match backend.insert("routes", &route(3)) {
        Err(ApiError::Unavailable(m)) => assert!(m.contains("command ring stayed full"), "{m}"),
        other => panic!("a full ring must be refused: {other:?}"),
    }
    let stats = backend.stats();
    assert_eq!(stats["commands_lost"], 1, "{stats}");
    let _ = plane.join();
    // The worker catches up: the two commands in its ring apply, the switch forwards.
    let now = 1_000_000;
    assert_eq!(sw.apply_commands(now, || now), 2);
    let mut h = longhaul_dataplane::replay::Harness::new(sw);
    for f in trace().iter().take(8) {
        h.put(0, now, f);
    }
    h.run_to_idle();
    assert_eq!(h.take().len(), 8);
}
