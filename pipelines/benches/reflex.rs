//! Criterion benchmarks of Reflex at the external switch (paper 003). Figures: perf/README.md,
//! "Criterion benchmarks".
//!
//! - `reflex/nsf_silent` and `reflex/nsf_active`: NSF's state machine on one data packet of a
//!   flow whose near-source delay is below the threshold (Silent: no table entry), and of an
//!   Active flow between two pseudo-ACKs (a table lookup and the interval test).
//! - `reflex/locate`: finding the Reflex hop in a data packet (`wire::reflex::locate`).
//! - `reflex/esw_switch`: the whole switch with the ReflexEsw pipeline on virtual time, per
//!   packet, on a 64-flow mix: perf/reflex-64flows-active.pcap (the 64-flow trace with the timestamp
//!   hop, timestamp 0: every flow Active, a pseudo-ACK per flow every 5 us, routed back out of
//!   dc0) into dc0 toward the WAN, and the reverse of each packet into wan0 toward the DC (NDT:
//!   the Flow State Table, the queue choice, the egress timestamp), to compare with
//!   `baseline/switch` and `themis/esw_switch`.

mod common;

use common::{bench_switch, reversed};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::reflex;
use longhaul_pipelines::reflex::esw::ReflexEsw;
use longhaul_pipelines::reflex::nsf::{Nsf, NsfParams};
use longhaul_pipelines::reflex::FlowKey;
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::hint::black_box;
use std::path::Path;

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cfg =
        longhaul_pipelines::load_config(&root.join("configs/reflex-esw.toml")).expect("config");
    let frames: Vec<Vec<u8>> = read_pcap(root.join("perf/reflex-64flows-active.pcap"))
        .expect("trace (python3 perf/gen_reflex_trace.py)")
        .into_iter()
        .map(|r| r.data)
        .collect();
    let mut g = c.benchmark_group("reflex");
    g.throughput(Throughput::Elements(1));

    let p = NsfParams {
        t_src_thresh_ns: 5_000,
        t_interval_ns: 5_000,
        n_cool: 5,
        flow_capacity: 4096,
        flow_idle_timeout_ns: 10_000_000,
    };
    let mut nsf = Nsf::new(p);
    let key = FlowKey {
        src: 1,
        dst: 2,
        qpn: 3,
    };
    let mut now: Nanos = 1_000_000;
    g.bench_function("nsf_silent", |b| {
        b.iter(|| {
            now += 10;
            black_box(nsf.on_data(black_box(key), now - 1_000, now))
        })
    });
    nsf.on_data(key, 0, now);
    g.bench_function("nsf_active", |b| {
        b.iter(|| {
            now += 1; // 5000 packets between two pseudo-ACKs
            black_box(nsf.on_data(black_box(key), 0, now))
        })
    });
    let f0 = frames[0].clone();
    g.bench_function("locate", |b| {
        b.iter(|| {
            black_box(reflex::locate(
                black_box(&f0),
                14,
                longhaul_dataplane::wire::int::DEFAULT_INT_PORT,
            ))
        })
    });

    let mac = |name: &str| cfg.ports.iter().find(|p| p.name == name).expect("port").mac;
    let (wan0, peer) = (mac("wan0"), [0x02, 0, 0, 0, 0x20, 0x01]);
    let mut sw = Switch::new(switch_spec(&cfg), heap_pool(&cfg), ReflexEsw::new(&cfg));
    let mut mix = Vec::with_capacity(frames.len() * 2);
    for f in &frames {
        mix.push((0usize, f.clone()));
        mix.push((2usize, reversed(f, peer, wan0)));
    }
    // 342-byte frames every 30 ns alternating over two ingress ports (~46 Gb/s each).
    bench_switch(&mut g, "esw_switch", &mut sw, &mix);
    g.finish();
    let mut n = Vec::new();
    longhaul_dataplane::engine::Pipeline::<longhaul_dataplane::packet::HeapPool>::counters(
        sw.pipeline(),
        &mut |k, v| {
            if k == "reflex.nsf.pseudo_acks" || k == "reflex.ndt.data" || k == "reflex.no_int" {
                n.push((k, v));
            }
        },
    );
    eprintln!("esw_switch: {n:?}");
}

criterion_group!(benches, bench);
criterion_main!(benches);
