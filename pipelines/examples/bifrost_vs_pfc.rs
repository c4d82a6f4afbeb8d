//! Bifrost against classic PFC on the same emulated long link (issue 7's recorded result, not a
//! test): D = 3 ms one way, 400 Gb/s, T = 10 us, 4096-byte frames, an always-backlogged upstream,
//! and a congested DC egress: line rate for 5 ms, 50 % for 30 ms (the queueing delay is measured
//! over its last 10 ms), stopped for 20 ms (the worst case of Fig. 2/5: peak buffer), then line
//! rate for 20 ms (throughput after the restart).
//!
//! Bifrost: configs/bifrost-dci.toml at 400 Gb/s, D = 3 ms, H = BDP + 2*Rs*T + 1 MB.
//! Classic PFC: the same config without [bifrost], XOFF/XON set for no throughput loss (section
//! III-B: XON = BDP so the queue covers the resume's round trip, XOFF just above it, headroom =
//! BDP + 1 MB for what is in flight while the pause travels).
//!
//!     cargo run --release -p longhaul-pipelines --example bifrost_vs_pfc
//!
//! Prints, per scheme: peak downstream buffer of (wan0, priority 3), the mean and largest queueing
//! delay of the packets delivered in the last 10 ms of the 50 % phase and overall, drops, and the
//! egress time lost while the egress was open and the upstream had data (throughput loss).

#[path = "../tests/support/bifrost_link.rs"]
mod link;

use link::{LinkSpec, LongLink};
use longhaul_control::config::Config;
use longhaul_dataplane::engine::Switch;
use longhaul_pipelines::baseline::Baseline;
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::path::Path;

const RATE: u64 = 400_000_000_000;
const D_NS: u64 = 3_000_000;
const T_NS: u64 = 10_000;
const BDP: u64 = RATE / 8 * 2 * D_NS / 1_000_000_000; // 300 MB
const RST: u64 = RATE / 8 * T_NS / 1_000_000_000; // 500 kB

fn base(text: &str) -> String {
    text.replace("rate_gbps = 100.0", "rate_gbps = 400.0")
        .replace("pool_buffers = 16384", "pool_buffers = 200000")
        .replace("buffer_bytes = 67108864 ", "buffer_bytes = 800000000 ")
        .replace("limit_bytes = 27262976 ", "limit_bytes = 700000000 ")
        .replace(
            "one_way_delay_ns = 1000000",
            &format!("one_way_delay_ns = {D_NS}"),
        )
        .replace(
            "buffer_bytes = 25300000",
            &format!("buffer_bytes = {}", BDP + 2 * RST + 1_000_000),
        )
}

fn load(text: String) -> Config {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/bifrost-dci.toml");
    longhaul_pipelines::parse_config(&text, &p).unwrap_or_else(|e| panic!("{e}"))
}

fn run(name: &str, cfg: &Config) {
    let sw = Switch::with_admission(switch_spec(cfg), heap_pool(cfg), Baseline::new(cfg));
    let mut l = LongLink::new(
        cfg,
        sw,
        LinkSpec {
            wan_port: "wan0".into(),
            dc_port: "dc0".into(),
            one_way_ns: D_NS,
            rate_bps: RATE,
            frame_len: 4096,
            frame_overhead: 24,
            backlog_bytes: None,
            slot_ns: T_NS,
            dscp: 26,
            class: 3,
            leak_delay_ns: 0,
            leak_every: 0,
        },
    );
    let ms = |x: u64| (x * 1_000_000 / T_NS) as usize;
    let (half, stop, full, end) = (ms(5), ms(35), ms(55), ms(75));
    let (mut lost_ns, mut half_delay_max, mut half_sum, mut half_n) = (0u64, 0u64, 0u128, 0u64);
    let frame_ns = (4120 * 8 * 1_000_000_000u64).div_ceil(RATE);
    let mut before = l.totals;
    for n in 0..end {
        let open = if n < half {
            1.0
        } else if n < stop {
            0.5
        } else if n < full {
            0.0
        } else {
            1.0
        };
        let s = l.step(open);
        // Throughput loss: open egress time not used, beyond one frame per slot edge, once the
        // first bytes have crossed the link.
        if n > ms(7) && s.backlogged {
            lost_ns += s.open_ns.saturating_sub(s.drain_wire_ns + frame_ns);
        }
        // Queueing delay of what was delivered in the last 10 ms of the 50 % phase (steady).
        if n >= stop - ms(10) && n < stop {
            let t = l.totals;
            half_sum += t.delay_sum_ns - before.delay_sum_ns;
            half_n += t.drained_pkts - before.drained_pkts;
            half_delay_max = half_delay_max.max(s.max_delay_ns);
        }
        before = l.totals;
    }
    let t = l.totals;
    let sw = &l.h.sw;
    println!(
        "{name}: peak buffer (wan0, prio 3) {:.1} MB = {:.2} BDP; switch peak {:.1} MB; \
         queueing delay at 50% drain: mean {:.2} ms, max {:.2} ms; overall max {:.2} ms, mean {:.2} ms; \
         drops {}; egress time lost {} ns; pause frames {}; sent {:.1} MB, delivered {:.1} MB",
        l.peak_l() as f64 / 1e6,
        l.peak_l() as f64 / BDP as f64,
        sw.stats().buffer_max_bytes as f64 / 1e6,
        half_sum as f64 / half_n.max(1) as f64 / 1e6,
        half_delay_max as f64 / 1e6,
        t.max_delay_ns as f64 / 1e6,
        t.delay_sum_ns as f64 / t.drained_pkts.max(1) as f64 / 1e6,
        sw.stats().drops.total(),
        lost_ns,
        t.pause_frames,
        t.sent_bytes as f64 / 1e6,
        t.drained_bytes as f64 / 1e6,
    );
}

fn main() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/bifrost-dci.toml");
    let text = base(&std::fs::read_to_string(&p).expect("configs/bifrost-dci.toml"));
    println!(
        "link: D = 3 ms, 400 Gb/s, T = 10 us: BDP = {:.0} MB, Rs*T = {:.0} kB, BDP + 2*Rs*T = {:.1} MB",
        BDP as f64 / 1e6,
        RST as f64 / 1e3,
        (BDP + 2 * RST) as f64 / 1e6
    );
    let bifrost = load(text.clone());
    run("bifrost", &bifrost);
    // Classic PFC: drop [bifrost], XON = BDP, XOFF = BDP + 1 MB, headroom = BDP + 1 MB.
    let start = text.find("\n[bifrost]").expect("[bifrost]");
    let stop = text[start..]
        .find("[[l2]]")
        .map(|i| start + i)
        .expect("[[l2]]");
    let pfc = format!("{}{}", &text[..start], &text[stop..])
        .replace(
            "xoff_bytes = 524288",
            &format!("xoff_bytes = {}", BDP + 1_000_000),
        )
        .replace("xon_bytes = 458752", &format!("xon_bytes = {BDP}"))
        .replace(
            "headroom_bytes = 65536",
            &format!("headroom_bytes = {}", BDP + 1_000_000),
        )
        // 65535 quanta = 84 us at 400 Gb/s; refresh every 40 us while XOFF holds.
        .replace(
            "pause_quanta = 65535",
            "pause_quanta = 65535\nrefresh_ns = 40000",
        );
    run("classic PFC", &load(pfc));
}
