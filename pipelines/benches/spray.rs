//! Criterion benchmarks of Themis spraying (configs/spray-tor.toml with 64 cross-rack QPs).
//! Figures: perf/README.md, "Criterion benchmarks".
//!
//! - `spray/s_choose`: Themis-S's path decision alone (P_base hash + equation 1 + lastNackPsn and
//!   avoidance checks), ns per packet.
//! - `spray/d_on_data`: Themis-D's per-data-packet work alone (proxy bitmap, PathMaxPSN, stash
//!   check; an ACK every 8 packets moves the start pointer), ns per packet, N = 128, W = 512.
//! - `spray/qp_lookup`: the `spray_qps` table alone (an `ExactTable` of 2 x 64 QP ends, no idle
//!   timeout, as the ToR builds it), one hit per packet, ns per packet; `spray/qp_lookup_aged`:
//!   the same table with an idle timeout, whose hits also reorder its last-hit list.
//! - `spray/switch_s`: the whole switch on virtual time for RDMA WRITEs from a host port, sprayed
//!   over the four spines (parse, QP lookup, Themis-S, 2-tier PathMap, forwarding, traffic
//!   manager), ns per packet.
//! - `spray/switch_d`: the whole switch for RDMA WRITEs from the spines to a host port (Themis-D
//!   at egress), ns per packet.
//! - `spray/switch_baseline`: the same WRITEs from the host port through the same switch with
//!   Themis off (QPs unknown), for the cost of S and D on top of forwarding.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use longhaul_control::config::Config;
use longhaul_dataplane::asic::ecmp::FastMod;
use longhaul_dataplane::asic::table::{ExactTable, TableConfig};
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::packet::{HeapBuf, PacketBuf};
use longhaul_dataplane::replay::{advance, Driver, InputSource};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::roce::{build_roce_v4, opcode, BthRepr, RoceAddrs};
use longhaul_pipelines::spray::dest::{DestParams, ThemisD};
use longhaul_pipelines::spray::source::{p_base, SourceParams, ThemisS};
use longhaul_pipelines::spray::tor::{QpEnd, SprayTor};
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

const QPS: u32 = 64;
const PACKETS: u32 = 1024;

fn config(with_qps: bool) -> Config {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/spray-tor.toml");
    let mut t = std::fs::read_to_string(&p).unwrap();
    if with_qps {
        for q in 0..QPS {
            t.push_str(&format!(
                "\n[[spray.qps]]\nlocal = \"10.0.0.1\"\nlocal_qpn = {}\nremote = \"10.1.0.1\"\nremote_qpn = {}\n",
                0x100 + q,
                0x200 + q
            ));
        }
    }
    longhaul_pipelines::parse_config(&t, &p).expect("config")
}

/// RDMA WRITE MIDDLE frames, 256-byte payload, PSNs sequential per QP, QPs round robin.
fn writes(src: Ipv4Addr, dst: Ipv4Addr, qpn_base: u32, dmac: [u8; 6]) -> Vec<Vec<u8>> {
    (0..PACKETS)
        .map(|i| {
            let mut b = [0u8; 512];
            let a = RoceAddrs {
                src_mac: MacAddr([2, 0, 0, 0, 0x10, 1]),
                dst_mac: MacAddr(dmac),
                src_ip: src,
                dst_ip: dst,
                udp_sport: 49152 + (i % QPS) as u16,
                dscp: 26,
                ecn: 2,
            };
            let bth = BthRepr {
                opcode: opcode::RC_RDMA_WRITE_MIDDLE,
                pkey: 0xffff,
                dest_qp: qpn_base + i % QPS,
                psn: i / QPS,
                ..BthRepr::default()
            };
            let n = build_roce_v4(&mut b, &a, &bth, &[0x5a; 256]).unwrap();
            b[..n].to_vec()
        })
        .collect()
}

/// The frames looped forever on `ports` (round robin), one every `gap` ns.
struct Loop<'a> {
    frames: &'a [Vec<u8>],
    ports: &'a [usize],
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
        let port = self.ports[self.next % self.ports.len()];
        self.next += 1;
        self.t += self.gap;
        Some((port, f))
    }
}

fn switch_bench(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    cfg: &Config,
    frames: &[Vec<u8>],
    ports: &[usize],
    gap: Nanos,
) {
    let mut sw = Switch::new(switch_spec(cfg), heap_pool(cfg), SprayTor::new(cfg));
    let mut d: Driver<HeapBuf> = Driver::default();
    let mut src = Loop {
        frames,
        ports,
        next: 0,
        end: 0,
        t: 1_000,
        gap,
    };
    let mut sink = |_: usize, _: Nanos, p: &HeapBuf| {
        black_box(p.len());
    };
    c.bench_function(name, |b| {
        b.iter(|| {
            src.end += frames.len();
            advance(&mut d, &mut sw, &mut src, None, &mut sink);
        })
    });
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("spray");
    g.throughput(Throughput::Elements(u64::from(PACKETS)));

    let mut s = ThemisS::new(SourceParams {
        paths: 128,
        avoidance_window: 2_000_000,
        capacity: 1024,
        seed: 1,
    })
    .unwrap();
    s.on_nack(3, 77, true);
    let n128 = FastMod::new(128);
    g.bench_function("s_choose", |b| {
        b.iter(|| {
            for i in 0..PACKETS {
                let q = (i % QPS) as usize;
                let base = p_base(
                    0xffff_0a00_0001,
                    0xffff_0a01_0001,
                    49152 + q as u16,
                    4791,
                    1,
                    &n128,
                );
                black_box(s.choose(q, i / QPS, base));
            }
        })
    });

    let mut d = ThemisD::new(DestParams {
        paths: 128,
        window: 512,
        ooo_threshold: 448,
        capacity: 1024,
    })
    .unwrap();
    let mut psn = 0u32;
    g.bench_function("d_on_data", |b| {
        b.iter(|| {
            for i in 0..PACKETS {
                let q = (i % QPS) as usize;
                let p = psn + i / QPS;
                black_box(d.on_data(q, p, true));
                if i % 8 == 7 {
                    d.on_ack(q, p);
                }
            }
            psn = (psn + PACKETS / QPS) & 0xff_ffff;
        })
    });

    for (name, idle_timeout) in [("qp_lookup", None), ("qp_lookup_aged", Some(1_000_000_000))] {
        let mut t: ExactTable<QpEnd, u32> = ExactTable::new(
            2 * 1024,
            TableConfig {
                idle_timeout,
                ..TableConfig::default()
            },
        );
        let end = |a: u8, q: u32| QpEnd::new(IpAddr::V4(Ipv4Addr::new(10, a, 0, 1)), 0x100 + q);
        for q in 0..QPS {
            t.insert(end(0, q), q, 0).unwrap();
            t.insert(end(1, q), q, 0).unwrap();
        }
        let keys: Vec<QpEnd> = (0..PACKETS).map(|i| end(1, i % QPS)).collect();
        let mut now = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                for k in &keys {
                    now += 30;
                    black_box(t.lookup(k, now));
                }
            })
        });
    }

    let cfg = config(true);
    let from_host = writes(
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 1, 0, 1),
        0x200,
        [2, 0, 0, 0, 0, 1],
    );
    // 314-byte frames every 30 ns into 4 x 100 Gb/s uplinks: queues stay short.
    switch_bench(&mut g, "switch_s", &cfg, &from_host, &[0], 30);
    let to_host = writes(
        Ipv4Addr::new(10, 1, 0, 1),
        Ipv4Addr::new(10, 0, 0, 1),
        0x100,
        [2, 0, 0, 0, 0, 3],
    );
    // From the four spines to one 100 Gb/s host port: one frame every 30 ns (~84 Gb/s).
    switch_bench(&mut g, "switch_d", &cfg, &to_host, &[2, 3, 4, 5], 30);
    let plain = config(false);
    switch_bench(&mut g, "switch_baseline", &plain, &from_host, &[0], 30);
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
