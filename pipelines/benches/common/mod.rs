//! What the switch benchmarks (themis.rs, reflex.rs, mlcc.rs, bifrost.rs) share: a looped
//! multi-port input, the reverse of a DC -> WAN frame, and the whole-switch benchmark.

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Throughput};
use longhaul_dataplane::engine::{Admission, Pipeline, Switch};
use longhaul_dataplane::packet::{HeapBuf, HeapPool, PacketBuf};
use longhaul_dataplane::replay::{advance, Driver, InputSource};
use longhaul_dataplane::time::Nanos;

/// (port index, frame) pairs looped forever, one every `gap` ns; `end` is how many to give.
pub struct Mix<'a> {
    pub frames: &'a [(usize, Vec<u8>)],
    pub next: usize,
    pub end: usize,
    pub t: Nanos,
    pub gap: Nanos,
}

impl InputSource for Mix<'_> {
    fn peek_ts(&mut self) -> Option<Nanos> {
        (self.next < self.end).then_some(self.t)
    }
    fn next_frame(&mut self) -> Option<(usize, &[u8])> {
        if self.next >= self.end {
            return None;
        }
        let (port, f) = &self.frames[self.next % self.frames.len()];
        self.next += 1;
        self.t += self.gap;
        Some((*port, f))
    }
}

/// The reverse of an untagged IPv4 DC -> WAN frame: addresses swapped, arriving from the WAN
/// peer. Swapping keeps the one's-complement IPv4 header checksum valid; the ICRC, which covers
/// the addresses, goes stale, and nothing on the benchmarked paths checks it.
pub fn reversed(f: &[u8], peer_mac: [u8; 6], port_mac: [u8; 6]) -> Vec<u8> {
    let mut r = f.to_vec();
    r[0..6].copy_from_slice(&port_mac);
    r[6..12].copy_from_slice(&peer_mac);
    r[26..30].copy_from_slice(&f[30..34]);
    r[30..34].copy_from_slice(&f[26..30]);
    r
}

/// `group/name`: the whole switch `sw` on virtual time, `frames` looped (one every 30 ns) through
/// the replay event loop, per frame: what every `*_switch` benchmark measures.
pub fn bench_switch<L: Pipeline<HeapPool>, A: Admission>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    sw: &mut Switch<HeapPool, L, A>,
    frames: &[(usize, Vec<u8>)],
) {
    let mut d: Driver<HeapBuf> = Driver::default();
    let mut src = Mix {
        frames,
        next: 0,
        end: 0,
        t: 1_000,
        gap: 30,
    };
    let mut sink = |_: usize, _: Nanos, p: &HeapBuf| {
        std::hint::black_box(p.len());
    };
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.bench_function(name, |b| {
        b.iter(|| {
            src.end += frames.len();
            advance(&mut d, sw, &mut src, None, &mut sink);
        })
    });
}
