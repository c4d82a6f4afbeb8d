//! Criterion benchmarks of MLCC at the DCI (paper 001). Figures: perf/README.md, "Criterion
//! benchmarks".
//!
//! - `mlcc/dqm_ack`: DQM's per-ACK step (the token bucket and eq. 9) of a flow between epochs.
//! - `mlcc/locate`: finding the MLCC INT of a data packet (`wire::mlcc::locate`).
//! - `mlcc/dci_sender`: the whole switch (configs/mlcc-dci.toml) on virtual time, per packet:
//!   examples/roce-64flows.pcap with the MLCC INT (two hops) into dc0 toward the WAN: a
//!   Switch-INT per packet (routed back out of dc0) and the INT stripped.
//! - `mlcc/dci_receiver`: the same switch, the trace's reverse into wan0 toward the DC: every
//!   packet through its flow's PFQ (64 flows, 64 PFQs, paced at the initial 25 Gb/s each), the
//!   INT reinserted with C_D and the DCI's hop pushed at dc0's egress.

mod common;

use common::{bench_switch, reversed};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use longhaul_dataplane::engine::{Pipeline, Switch};
use longhaul_dataplane::packet::{HeapBuf, HeapPool, PacketBuf};
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::wire::{int, mlcc};
use longhaul_pipelines::mlcc::dci::MlccDci;
use longhaul_pipelines::mlcc::dqm::{Dqm, DqmParams};
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::hint::black_box;
use std::path::Path;

fn with_int(f: &[u8]) -> Vec<u8> {
    let mut b = HeapBuf::from_bytes(f);
    int::insert_int_md(&mut b, 14, &mlcc::int_config(5000, 3, None)).unwrap();
    for i in 0..2 {
        let h = mlcc::MlccHop {
            node_id: i,
            queue_id: 3,
            qlen: 1000,
            ts: 1000 + i as u64,
            tx_bytes: 1 << 20,
            rate_mbps: 100_000,
        };
        mlcc::push(&mut b, 14, &h).unwrap();
    }
    b.data().to_vec()
}

fn run(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    mix: &[(usize, Vec<u8>)],
    cfg: &longhaul_control::config::Config,
) {
    let mut sw = Switch::new(switch_spec(cfg), heap_pool(cfg), MlccDci::new(cfg));
    // 314-byte frames every 30 ns (~84 Gb/s).
    bench_switch(g, name, &mut sw, mix);
    let mut n = Vec::new();
    Pipeline::<HeapPool>::counters(sw.pipeline(), &mut |k, v| {
        if k.starts_with("mlcc.") && v > 0 {
            n.push((k, v));
        }
    });
    eprintln!("{name}: {n:?}");
}

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cfg = longhaul_pipelines::load_config(&root.join("configs/mlcc-dci.toml")).expect("config");
    let frames: Vec<Vec<u8>> = read_pcap(root.join("examples/roce-64flows.pcap"))
        .expect("trace")
        .into_iter()
        .map(|r| r.data)
        .collect();
    let mut g = c.benchmark_group("mlcc");
    g.throughput(Throughput::Elements(1));

    let p = DqmParams {
        theta_ns: 18_000_000,
        d_t_ns: 1_000_000,
        m: 5,
        alpha: 0.5,
        rtt_c_ns: 6_000_000,
        rtt_d_ns: 20_000,
        mtu_bytes: 1000,
        history: 512,
        min_rate_bps: 1e8,
        max_rate_bps: 1e11,
    };
    let mut dqm = Dqm::new(&p);
    dqm.on_ack(&p, 0, 1, 12.5e9, 2_000_000);
    let mut now = 1;
    g.bench_function("dqm_ack", |b| {
        b.iter(|| {
            now += 1;
            black_box(dqm.on_ack(&p, now, 1, 12.5e9, black_box(2_000_000)))
        })
    });
    let f0 = with_int(&frames[0]);
    g.bench_function("locate", |b| {
        b.iter(|| black_box(mlcc::locate(black_box(&f0), 14, 5000)))
    });

    // The trace is 10.0.0.1 -> 10.1.0.N (N = 1..64): DC -> WAN on this DCI.
    let sender: Vec<(usize, Vec<u8>)> = frames.iter().map(|f| (0, with_int(f))).collect();
    run(&mut g, "dci_sender", &sender, &cfg);
    let mac = |name: &str| cfg.ports.iter().find(|p| p.name == name).expect("port").mac;
    let peer = [0x02, 0, 0, 0, 0x20, 0x01];
    let receiver: Vec<(usize, Vec<u8>)> = frames
        .iter()
        .map(|f| (1, reversed(f, peer, mac("wan0"))))
        .collect();
    run(&mut g, "dci_receiver", &receiver, &cfg);
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
