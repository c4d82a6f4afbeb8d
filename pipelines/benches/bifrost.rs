//! Criterion benchmarks of Bifrost (paper 004) on configs/bifrost-dci.toml. Figures:
//! perf/README.md, "Criterion benchmarks".
//!
//! - `bifrost/account`: the generator's per-packet work on a governed (port, priority): L and r
//!   on enqueue, L on dequeue, ns per packet.
//! - `bifrost/slot`: one slot of Algorithm 1 (section IV) on a busy governed pair, the pause
//!   frame's action included, ns per slot.
//! - `bifrost/switch`: the whole switch on virtual time, per packet, RoCE data from the remote
//!   DC on wan0 (governed) at 84 Gb/s into dc0's 100 Gb/s, as `baseline/switch` sends it from
//!   dc0 to wan0: the same work plus Bifrost's accounting on every packet and Algorithm 1 every
//!   slot.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use longhaul_dataplane::asic::pfc::ActionBuf;
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::time::Nanos;
use longhaul_pipelines::baseline::Baseline;
use longhaul_pipelines::bifrost::admission::BifrostOf;
use longhaul_pipelines::bifrost::generator::BifrostGenerator;
use longhaul_pipelines::bifrost::mechanism::bifrost_params;
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::hint::black_box;
use std::path::Path;

mod common;
use common::{bench_switch, reversed};

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cfg =
        longhaul_pipelines::load_config(&root.join("configs/bifrost-dci.toml")).expect("config");
    let params = bifrost_params(&cfg).expect("[bifrost]");
    let port = params.ports[0];
    let mut g = c.benchmark_group("bifrost");

    let mut gen = BifrostGenerator::new(cfg.ports.len(), params.clone());
    let mut actions = ActionBuf::new();
    let mut now: Nanos = 1_000;
    g.throughput(Throughput::Elements(1));
    g.bench_function("account", |b| {
        b.iter(|| {
            now += 25;
            black_box(gen.on_enqueue(port, 3, 314, now));
            gen.on_dequeue(port, 3, 314);
        })
    });

    // A standing queue of 1 MB on the governed pair: every slot computes a pause.
    let mut gen = BifrostGenerator::new(cfg.ports.len(), params.clone());
    let slot = params.slot_ns;
    let mut t: Nanos = slot;
    for _ in 0..3_300 {
        let _ = gen.on_enqueue(port, 3, 314, t);
    }
    g.bench_function("slot", |b| {
        b.iter(|| {
            t += slot;
            let _ = gen.on_enqueue(port, 3, 314, t);
            gen.poll(t, &mut actions);
            black_box(actions.len());
            actions.clear();
        })
    });

    let frames: Vec<(usize, Vec<u8>)> = read_pcap(root.join("examples/roce-64flows.pcap"))
        .expect("trace")
        .into_iter()
        .map(|r| {
            (
                1,
                reversed(&r.data, [2, 0, 0, 0, 0x20, 1], [2, 0, 0, 0, 0, 3]),
            )
        })
        .collect();
    let mut sw: Switch<_, _, longhaul_pipelines::Admission> =
        Switch::with_admission(switch_spec(&cfg), heap_pool(&cfg), Baseline::new(&cfg));
    bench_switch(&mut g, "switch", &mut sw, &frames);
    g.finish();
    let st = sw.bifrost().expect("bifrost").stats();
    assert!(st.updates > 0, "the switch benchmark ran no slot: {st:?}");
}

criterion_group!(benches, bench);
criterion_main!(benches);
