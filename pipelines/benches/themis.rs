//! Criterion benchmarks of THEMIS at the external switch (paper 000). Figures: perf/README.md,
//! "Criterion benchmarks".
//!
//! - `themis/pnp_cnp` and `themis/pnp_suppressed`: the PNP stage on a CE-marked RoCE data packet
//!   whose QP has a QP_field entry: a CNP built every time (the clock advances by more than
//!   `cnp_interval` per packet), and suppressed by the CNP timestamp register (same instant).
//! - `themis/trp_normal` and `themis/trp_throttled`: TRP `on_data` for a flow that is not in
//!   CNP_Cache/CNP_Store (the common case), and for a throttled flow in CNP_Store.
//! - `themis/esw_switch`: the whole switch with the ThemisEsw pipeline on virtual time, per
//!   packet, on a 64-flow mix (the `examples/roce-64flows.pcap` trace into dc0 toward the WAN, a
//!   quarter CE-marked, every QP in QP_field; the reverse of each packet into wan0 toward the
//!   DC, 8 of the 64 reverse flows throttled by TRP with loop_num 1), to compare with
//!   `baseline/switch` (benches/baseline.rs). Recirculated passes are included in the cost of the
//!   packet that makes them.

mod common;

use common::{bench_switch, reversed};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use longhaul_control::config::Config;
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::ecn;
use longhaul_dataplane::wire::parse::{parse, ParseOptions};
use longhaul_pipelines::switch_spec;
use longhaul_pipelines::themis::config::ThemisConfig;
use longhaul_pipelines::themis::daemon::{v4_mapped, QpField, QpKey};
use longhaul_pipelines::themis::esw::{ThemisCommand, ThemisEsw};
use longhaul_pipelines::themis::pnp::{Pnp, PnpParams, PnpVerdict};
use longhaul_pipelines::themis::trp::{Trp, TrpCommand, TrpKey, TrpParams};
use longhaul_runtime::platform::heap_pool;
use std::hint::black_box;
use std::path::Path;

fn setup() -> (Config, Vec<Vec<u8>>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cfg =
        longhaul_pipelines::load_config(&root.join("configs/themis-esw.toml")).expect("config");
    let frames = read_pcap(root.join("examples/roce-64flows.pcap"))
        .expect("trace")
        .into_iter()
        .map(|r| r.data)
        .collect();
    (cfg, frames)
}

fn ip_pair(f: &[u8]) -> (u32, u32) {
    let s = u32::from_be_bytes([f[26], f[27], f[28], f[29]]);
    let d = u32::from_be_bytes([f[30], f[31], f[32], f[33]]);
    (s, d)
}

/// BTH DestQP of an untagged IPv4 RoCEv2 frame (no IP options).
fn dest_qp(f: &[u8]) -> u32 {
    u32::from_be_bytes([0, f[47], f[48], f[49]])
}

fn bench(c: &mut Criterion) {
    let (mut cfg, frames) = setup();
    let mut g = c.benchmark_group("themis");
    g.throughput(Throughput::Elements(1));
    let t0: Nanos = 1_000_000;

    // (i) PNP on a CE-marked data packet with a QP_field entry.
    let mut frame = frames[0].clone();
    frame[15] |= 3;
    let parsed = parse(&frame, &ParseOptions::default());
    let (src, dst) = ip_pair(&frame);
    let params = PnpParams::default();
    let interval = params.cnp_interval_ns;
    let mut pnp = Pnp::new(params).expect("pnp");
    let mut qp = QpField::new(1024);
    let key = QpKey {
        client_ip: v4_mapped(src),
        server_ip: v4_mapped(dst),
        sqpn: dest_qp(&frame),
    };
    qp.insert(key, 0x00_1234, 0).expect("qp insert");
    let mut scratch = [0u8; 256];
    let mut now = t0;
    g.bench_function("pnp_cnp", |b| {
        b.iter(|| {
            frame[15] |= 3; // CE again (PNP clears it)
            now += interval + 1;
            let v = pnp.on_data(&mut frame, &parsed, now, &mut qp, &mut scratch);
            debug_assert!(matches!(v, PnpVerdict::Cnp { .. }));
            black_box(v)
        })
    });
    g.bench_function("pnp_suppressed", |b| {
        b.iter(|| {
            frame[15] |= 3;
            black_box(pnp.on_data(&mut frame, &parsed, now, &mut qp, &mut scratch))
        })
    });

    // (ii) TRP on_data: a flow TRP does not know, and a throttled one in CNP_Store.
    let mut trp = Trp::new(TrpParams {
        beta_ns: 10_000_000_000,
        ..TrpParams::default()
    });
    let throttled = TrpKey::new(v4_mapped(src), 0x111);
    trp.on_cnp(throttled, t0);
    trp.install(throttled, t0).expect("install");
    let normal = TrpKey::new(v4_mapped(src), 0x222);
    let mut psn = 0u32;
    g.bench_function("trp_normal", |b| {
        b.iter(|| {
            psn = psn.wrapping_add(1);
            black_box(trp.on_data(black_box(normal), psn, 0, t0 + 10))
        })
    });
    g.bench_function("trp_throttled", |b| {
        b.iter(|| {
            psn = psn.wrapping_add(1);
            black_box(trp.on_data(black_box(throttled), psn, 0, t0 + 10))
        })
    });

    // (iii) The whole switch on a 64-flow mix.
    cfg.sections.update(|t: &mut ThemisConfig| {
        if let Some(trp) = t.trp.as_mut() {
            trp.beta_ns = 10_000_000_000; // stay throttled for the whole run (virtual time)
        }
    });
    let port_mac = |name: &str| {
        cfg.ports
            .iter()
            .find(|p| p.name == name)
            .map(|p| p.mac)
            .expect("port")
    };
    let wan0 = port_mac("wan0");
    let peer = [0x02, 0, 0, 0, 0x20, 0x01];
    let mut sw = Switch::new(switch_spec(&cfg), heap_pool(&cfg), ThemisEsw::new(&cfg));
    let mut mix = Vec::with_capacity(frames.len() * 2);
    let mut throttled_flows = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let mut out = f.clone();
        // CE on a quarter (IPv4 checksum updated; the ICRC does not cover ECN).
        if i % 4 == 0 && !ecn::set(&mut out, 14, ecn::CE) {
            panic!("trace frame {i} is not IPv4");
        }
        let (s, d) = ip_pair(f);
        let qpn = dest_qp(f);
        let k = QpKey {
            client_ip: v4_mapped(s),
            server_ip: v4_mapped(d),
            sqpn: qpn,
        };
        let _ = sw.pipeline_mut().command(
            0,
            ThemisCommand::QpInsert {
                key: k,
                cqpn: qpn ^ 0x80_0000,
            },
        );
        mix.push((0usize, out));
        let rev = reversed(f, peer, wan0);
        // Reverse flow key: (its destination = s, its DestQP = qpn); throttle 8 of 64 QPs.
        if (s & 0xff) % 8 == 0 && !throttled_flows.contains(&(s, qpn)) {
            throttled_flows.push((s, qpn));
            let key = TrpKey::new(v4_mapped(s), qpn);
            let _ = sw
                .pipeline_mut()
                .command(0, ThemisCommand::Trp(TrpCommand::Install { key }));
        }
        mix.push((2usize, rev));
    }
    // 314-byte frames every 30 ns alternating over two ingress ports (~42 Gb/s each).
    bench_switch(&mut g, "esw_switch", &mut sw, &mix);
    g.finish();
    let p = sw.pipeline();
    let mut n = Vec::new();
    longhaul_dataplane::engine::Pipeline::<longhaul_dataplane::packet::HeapPool>::counters(
        p,
        &mut |k, v| {
            if k == "themis.cnps_sent" || k == "themis.recirculated" {
                n.push((k, v));
            }
        },
    );
    eprintln!(
        "esw_switch: {} throttled reverse flows; {:?}",
        throttled_flows.len(),
        n
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
