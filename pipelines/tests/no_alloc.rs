//! The steady-state per-packet path allocates nothing (DESIGN.md section 3): a counting global
//! allocator watches a warmed-up baseline switch forward, queue, ECN-mark and PFC-pause traffic
//! through the same event loop `longhaul replay` uses; and the MLCC DCI's receiver side (per-flow
//! queues, their calendar, INT reinserted and pushed).
//!
//! This file is its own test binary, so the counting allocator sees only this test.

use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::packet::HeapBuf;
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::replay::{advance, Driver, InputSource};
use longhaul_dataplane::time::Nanos;
use longhaul_pipelines::baseline::Baseline;
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
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
        if COUNTING.load(Ordering::Relaxed) {
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
    fn peek_ts(&self) -> Option<Nanos> {
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
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    advance(&mut d, &mut sw, &mut src, None, &mut sink);
    COUNTING.store(false, Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst);

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
        fn peek_ts(&self) -> Option<Nanos> {
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
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    advance(&mut d, &mut sw, &mut src, None, &mut sink);
    COUNTING.store(false, Ordering::SeqCst);
    let allocs = ALLOCS.load(Ordering::SeqCst);
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
