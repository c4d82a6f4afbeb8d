//! Criterion benchmarks of the baseline pipeline on the 64-flow RoCE trace
//! (examples/roce-64flows.pcap, made by perf/gen_trace.py). Figures: perf/README.md,
//! "Criterion benchmarks".
//!
//! - `baseline/ingress`: the ingress stages alone (parse, classify, L2/LPM, TTL and MAC rewrite)
//!   on one packet, ns per packet.
//! - `baseline/switch`: the whole switch on virtual time, per packet: buffer from the pool and
//!   copy-in (what an rx burst costs), ingress, traffic manager enqueue/dequeue with DRR and ECN,
//!   egress, free, and the event loop that drives it.
//! - `replay/stream`: `longhaul replay` end to end but for the file system: a pcap of 200 000
//!   frames (the trace repeated, 30 ns apart) read from memory as a file is read (record headers
//!   peeked, frames taken from the reader's buffer), the switch built, every frame through it,
//!   and every departure written as a pcap record (to `io::sink`, as the CLI's `--out
//!   wan0=/dev/null`); frames per second. perf/replay-stream.sh measures the same with files.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use longhaul_control::config::Config;
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::packet::{HeapBuf, PacketBuf};
use longhaul_dataplane::pcap::{read_pcap, PcapReader, PcapWriter};
use longhaul_dataplane::replay::{advance, Driver, InputSource};
use longhaul_dataplane::time::Nanos;
use longhaul_pipelines::baseline::Baseline;
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::hint::black_box;
use std::path::Path;

fn setup() -> (Config, Vec<Vec<u8>>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cfg = longhaul_pipelines::load_config(&root.join("configs/baseline.toml")).expect("config");
    let frames = read_pcap(root.join("examples/roce-64flows.pcap"))
        .expect("trace")
        .into_iter()
        .map(|r| r.data)
        .collect();
    (cfg, frames)
}

/// The trace looped forever on port dc0, one frame every `gap` ns.
struct Loop<'a> {
    frames: &'a [Vec<u8>],
    next: usize,
    end: usize,
    t: Nanos,
    gap: Nanos,
}

impl InputSource for Loop<'_> {
    fn peek_ts(&mut self) -> Option<Nanos> {
        (self.next < self.end).then_some(self.t)
    }
    fn next_frame(&mut self) -> Option<(usize, &[u8])> {
        if self.next >= self.end {
            return None;
        }
        let f = &self.frames[self.next % self.frames.len()];
        self.next += 1;
        self.t += self.gap;
        Some((0, f))
    }
}

fn bench(c: &mut Criterion) {
    let (cfg, frames) = setup();
    let mut g = c.benchmark_group("baseline");

    g.throughput(Throughput::Elements(frames.len() as u64));
    let mut stage = Switch::new(switch_spec(&cfg), heap_pool(&cfg), Baseline::new(&cfg));
    let bufs: Vec<HeapBuf> = frames.iter().map(|f| HeapBuf::from_bytes(f)).collect();
    g.bench_function("ingress", |b| {
        b.iter_batched_ref(
            || {
                bufs.iter()
                    .map(|p| HeapBuf::from_bytes(p.data()))
                    .collect::<Vec<_>>()
            },
            |pkts| {
                stage.with_ctx(0, |b, ctx| {
                    for p in pkts.iter_mut() {
                        black_box(b.fwd.ingress(ctx, p));
                    }
                })
            },
            BatchSize::LargeInput,
        )
    });

    let mut sw = Switch::new(switch_spec(&cfg), heap_pool(&cfg), Baseline::new(&cfg));
    let mut d: Driver<HeapBuf> = Driver::default();
    // 314-byte frames every 30 ns: ~84 Gb/s into a 100 Gb/s port, so queues stay short.
    let mut src = Loop {
        frames: &frames,
        next: 0,
        end: 0,
        t: 1_000,
        gap: 30,
    };
    let mut sink = |_: usize, _: Nanos, p: &HeapBuf| {
        black_box(p.len());
    };
    g.bench_function("switch", |b| {
        b.iter(|| {
            src.end += frames.len();
            advance(&mut d, &mut sw, &mut src, None, &mut sink);
        })
    });
    g.finish();

    // `longhaul replay --config configs/baseline.toml --in dc0=T --out wan0=/dev/null`.
    const STREAM_FRAMES: usize = 200_000;
    let mut w = PcapWriter::new(Vec::new()).expect("pcap writer");
    for i in 0..STREAM_FRAMES {
        w.write_frame(1_000 + 30 * i as u64, &frames[i % frames.len()])
            .expect("frame");
    }
    let trace = w.finish().expect("pcap");
    let dc0 = cfg.ports.iter().find(|p| p.name == "dc0").expect("dc0").id;
    let mut g = c.benchmark_group("replay");
    g.sample_size(10);
    g.throughput(Throughput::Elements(STREAM_FRAMES as u64));
    g.bench_function("stream", |b| {
        b.iter(|| {
            let mut out = PcapWriter::new(std::io::sink()).expect("pcap writer");
            let mut sink = |_: u16, ts: Nanos, f: &[u8]| {
                out.write_frame(ts, f).expect("written");
            };
            let src = PcapReader::new(&trace[..]).expect("pcap");
            let st = longhaul_pipelines::replay_stream(
                &cfg,
                vec![longhaul_runtime::StreamInput {
                    port: dc0,
                    name: "trace".into(),
                    source: Box::new(src),
                }],
                &mut sink,
                Default::default(),
            )
            .expect("replay");
            assert_eq!(st.summary.emitted, STREAM_FRAMES as u64);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
