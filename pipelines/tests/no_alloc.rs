//! The steady-state per-packet path allocates nothing (DESIGN.md section 3): a counting global
//! allocator watches a warmed-up baseline switch forward, queue, ECN-mark and PFC-pause traffic
//! through the same event loop `longhaul replay` uses; the MLCC DCI's receiver side (per-flow
//! queues, their calendar, INT reinserted and pushed); and every other pipeline on its shipped
//! config and trace: THEMIS at the ESW, the spraying ToR, Reflex at the ESW, Bifrost on a
//! long-haul port.
//!
//! This file is its own test binary, so the counting allocator sees only these tests; it counts
//! only on the thread that switched counting on, so a test building its config on another test
//! thread is not charged to the one measuring.

use longhaul_control::config::Config;
use longhaul_dataplane::engine::{Pipeline, Switch};
use longhaul_dataplane::packet::{HeapBuf, HeapPool};
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::replay::{advance, Driver, InputSource};
use longhaul_dataplane::time::Nanos;
use longhaul_pipelines::baseline::Baseline;
use longhaul_pipelines::bifrost::admission::BifrostOf;
use longhaul_pipelines::switch_spec;
use longhaul_pipelines::Admission;
use longhaul_runtime::platform::heap_pool;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

thread_local! {
    /// Counting is on for this thread (const-initialised, no destructor: reading it never
    /// allocates, so the allocator may read it).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCS: AtomicU64 = AtomicU64::new(0);

fn counting() -> bool {
    COUNTING.with(Cell::get)
}

/// Count this thread's allocations while `f` runs.
fn count_allocs(f: impl FnOnce()) -> u64 {
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.load(Ordering::SeqCst)
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// The trace's frames, replayed round after round on two ingress ports at a rate above the
/// egress's, so queues build, ECN marks and PFC frames happen in the measured window.
struct Loop {
    frames: Vec<Vec<u8>>,
    next: usize,
    t: Nanos,
    gap: Nanos,
    end: usize,
}

impl InputSource for Loop {
    fn peek_ts(&mut self) -> Option<Nanos> {
        (self.next < self.end).then_some(self.t)
    }
    fn next_frame(&mut self) -> Option<(usize, &[u8])> {
        if self.next >= self.end {
            return None;
        }
        let i = self.next;
        self.next += 1;
        self.t += self.gap;
        // Alternate the two DC-facing ports (indices 0 and 1).
        Some((i % 2, &self.frames[i % self.frames.len()]))
    }
}

/// The tests share the counter: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn steady_state_forwarding_allocates_nothing() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cfg =
        longhaul_pipelines::load_config(&root.join("configs/baseline.toml")).expect("config");
    // Make the lossless class congest quickly: small thresholds, slow WAN port.
    cfg.pfc.xoff_bytes = 40_000;
    cfg.pfc.xon_bytes = 20_000;
    cfg.ports[2].rate_bps = 10_000_000_000;
    if let Some(e) = cfg.qos.classes[3].ecn.as_mut() {
        e.kmin_bytes = 5_000;
        e.kmax_bytes = 30_000;
    }
    let frames: Vec<Vec<u8>> = read_pcap(root.join("examples/roce-64flows.pcap"))
        .expect("trace")
        .into_iter()
        .map(|r| r.data)
        .collect();
    let mut sw = Switch::new(switch_spec(&cfg), heap_pool(&cfg), Baseline::new(&cfg));
    let mut d: Driver<HeapBuf> = Driver::default();
    let mut src = Loop {
        frames,
        next: 0,
        t: 1_000,
        gap: 20, // 2 x 314 B every 40 ns = 125 Gb/s into a 10 Gb/s port
        end: 4_000,
    };
    let mut sink = |_: usize, _: Nanos, _: &HeapBuf| {};
    // Warm-up: tables, queues and pools touched once.
    advance(&mut d, &mut sw, &mut src, None, &mut sink);
    let warm = d.summary;
    assert!(warm.emitted > 0);

    src.end += 20_000;
    let allocs = count_allocs(|| {
        advance(&mut d, &mut sw, &mut src, None, &mut sink);
    });

    let s = d.summary;
    let marks: u64 = (0..4)
        .map(|i| sw.tm(i).unwrap().class_stats(3).ecn_marks)
        .sum();
    let pfc_tx: u64 = (0..4).map(|i| sw.port_stats(i).unwrap().pfc_tx).sum();
    assert_eq!(s.offered - warm.offered, 20_000);
    assert!(marks > 0, "the window exercised ECN marking");
    assert!(pfc_tx > 0, "the window exercised PFC");
    assert_eq!(allocs, 0, "allocations on the steady-state path");
}

/// The trace reversed into wan0 of configs/mlcc-dci.toml (every packet inter-DC data entering
/// the DC: its flow's PFQ, the calendar, the INT reinserted and the DCI's hop pushed), 64 flows.
#[test]
fn mlcc_receiver_allocates_nothing() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cfg = longhaul_pipelines::load_config(&root.join("configs/mlcc-dci.toml")).expect("config");
    let frames: Vec<Vec<u8>> = read_pcap(root.join("examples/roce-64flows.pcap"))
        .expect("trace")
        .into_iter()
        .map(|r| {
            let mut f = r.data;
            f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]); // to wan0's MAC
            let (src, dst) = (f[26..30].to_vec(), f[30..34].to_vec());
            f[26..30].copy_from_slice(&dst);
            f[30..34].copy_from_slice(&src);
            f
        })
        .collect();
    let mut sw = Switch::new(
        switch_spec(&cfg),
        heap_pool(&cfg),
        longhaul_pipelines::mlcc::dci::MlccDci::new(&cfg),
    );
    let mut d: Driver<HeapBuf> = Driver::default();
    struct Wan(Loop);
    impl InputSource for Wan {
        fn peek_ts(&mut self) -> Option<Nanos> {
            self.0.peek_ts()
        }
        fn next_frame(&mut self) -> Option<(usize, &[u8])> {
            self.0.next_frame().map(|(_, f)| (1, f)) // wan0 is index 1
        }
    }
    let mut src = Wan(Loop {
        frames,
        next: 0,
        t: 1_000,
        gap: 30,
        end: 4_000,
    });
    let mut sink = |_: usize, _: Nanos, _: &HeapBuf| {};
    advance(&mut d, &mut sw, &mut src, None, &mut sink);
    src.0.end += 20_000;
    let allocs = count_allocs(|| {
        advance(&mut d, &mut sw, &mut src, None, &mut sink);
    });
    let mut held = 0;
    longhaul_dataplane::engine::Pipeline::<longhaul_dataplane::packet::HeapPool>::counters(
        sw.pipeline(),
        &mut |k, v| {
            if k == "mlcc.pfq.enqueued" {
                held = v;
            }
        },
    );
    assert!(held >= 24_000, "every packet went through a PFQ: {held}");
    assert_eq!(allocs, 0, "allocations on the steady-state path");
}

/// A switch with the registry's admission chain.
type Sw<L> = Switch<HeapPool, L, Admission>;

/// Warm `pipeline` up on `frames` (round after round into port index `port`, one every `gap`
/// ns), then count the allocations of 20 000 more; returns them and the pipeline's counters.
fn steady_allocs<L: Pipeline<HeapPool>>(
    cfg: &Config,
    pipeline: L,
    frames: Vec<Vec<u8>>,
    port: usize,
    gap: Nanos,
) -> (u64, Vec<(&'static str, u64)>, Sw<L>) {
    struct One(Loop, usize);
    impl InputSource for One {
        fn peek_ts(&mut self) -> Option<Nanos> {
            self.0.peek_ts()
        }
        fn next_frame(&mut self) -> Option<(usize, &[u8])> {
            let p = self.1;
            self.0.next_frame().map(|(_, f)| (p, f))
        }
    }
    let mut sw = Switch::with_admission(switch_spec(cfg), heap_pool(cfg), pipeline);
    let mut d: Driver<HeapBuf> = Driver::default();
    let mut src = One(
        Loop {
            frames,
            next: 0,
            t: 1_000,
            gap,
            end: 4_000,
        },
        port,
    );
    let mut sink = |_: usize, _: Nanos, _: &HeapBuf| {};
    advance(&mut d, &mut sw, &mut src, None, &mut sink);
    src.0.end += 20_000;
    let allocs = count_allocs(|| {
        advance(&mut d, &mut sw, &mut src, None, &mut sink);
    });
    assert_eq!(d.summary.offered, 24_000);
    let mut counters = Vec::new();
    sw.pipeline().counters(&mut |k, v| counters.push((k, v)));
    (allocs, counters, sw)
}

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn frames_of(trace: &str) -> Vec<Vec<u8>> {
    read_pcap(root().join(trace))
        .expect("trace")
        .into_iter()
        .map(|r| r.data)
        .collect()
}

fn config(name: &str) -> Config {
    longhaul_pipelines::load_config(&root().join(name)).expect("config")
}

/// `pipeline` on `trace` into port index 0 allocates nothing in the steady state, and the
/// window went through it (some counter starting with `prefix` moved).
fn assert_steady<L: Pipeline<HeapPool>>(cfg: &Config, pipeline: L, trace: &str, prefix: &str) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (allocs, c, _) = steady_allocs(cfg, pipeline, frames_of(trace), 0, 30);
    assert!(
        c.iter().any(|(k, v)| k.starts_with(prefix) && *v > 0),
        "{c:?}"
    );
    assert_eq!(allocs, 0, "allocations on the steady-state path");
}

#[test]
fn themis_esw_allocates_nothing() {
    let cfg = config("configs/themis-esw.toml");
    // DC -> WAN RoCE data through PNP's flow table and TRP's tracking.
    let p = longhaul_pipelines::themis::esw::ThemisEsw::new(&cfg);
    assert_steady(&cfg, p, "examples/roce-64flows.pcap", "themis.");
}

#[test]
fn spray_tor_allocates_nothing() {
    let cfg = config("configs/spray-tor.toml");
    // Host -> other rack: every packet sprayed over the uplinks (Themis-S), its QP in the LRU.
    let p = longhaul_pipelines::spray::tor::SprayTor::new(&cfg);
    assert_steady(&cfg, p, "perf/spray-64qps.pcap", "spray.");
}

#[test]
fn reflex_esw_allocates_nothing() {
    let cfg = config("configs/reflex-esw.toml");
    // DC -> WAN data: NSF's pseudo-ACKs generated, NDT's flow state kept.
    let p = longhaul_pipelines::reflex::esw::ReflexEsw::new(&cfg);
    assert_steady(&cfg, p, "perf/reflex-64flows-active.pcap", "reflex.");
}

#[test]
fn bifrost_slots_allocate_nothing() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cfg = config("configs/bifrost-dci.toml");
    let p = longhaul_pipelines::baseline::Baseline::new(&cfg);
    // RoCE data from the remote DC on wan0 (index 1, Bifrost-governed class 3) at 125 Gb/s into
    // dc0's 100 Gb/s: the queue builds, the slots run Algorithm 1 and send pause frames.
    let frames: Vec<Vec<u8>> = frames_of("examples/roce-64flows.pcap")
        .into_iter()
        .map(|mut f| {
            f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 3]); // to wan0's MAC
            let (src, dst) = (f[26..30].to_vec(), f[30..34].to_vec());
            f[26..30].copy_from_slice(&dst); // 10.1.0.x -> 10.0.0.x: to a host behind dc0
            f[30..34].copy_from_slice(&src);
            f
        })
        .collect();
    let (allocs, _, sw) = steady_allocs(&cfg, p, frames, 1, 20);
    let b = sw.bifrost().expect("bifrost").stats();
    assert!(
        b.updates > 0 && b.frames > 0,
        "the window ran slots and paused: {b:?}"
    );
    assert_eq!(allocs, 0, "allocations on the steady-state path");
}
