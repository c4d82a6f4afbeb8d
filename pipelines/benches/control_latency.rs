//! Command latency: from a command enqueued on a worker's ring (as the control thread does for
//! an API call or a punt) to applied by that worker while it is busy forwarding.
//!
//! The worker runs the live loop (`run_worker`) over the 64-flow trace looped unpaced on dc0
//! (so every iteration has a full rx burst to forward) with a null port behind wan0. This thread
//! enqueues L2 insert/delete commands stamped with the monotonic clock, a few microseconds
//! apart; the worker records enqueue-to-applied latency in its histogram. Prints p50/p99/max.
//!
//!     cargo bench -p longhaul-pipelines --bench control_latency

use longhaul_control::config::PortIo;
use longhaul_dataplane::control::{mono_ns, Command, Envelope};
use longhaul_dataplane::engine::{Switch, SwitchSnapshot};
use longhaul_pipelines::baseline::{Baseline, BaselineCommand};
use longhaul_pipelines::switch_spec;
use longhaul_runtime::live::{run_worker, WorkerOptions};
use longhaul_runtime::platform::heap_pool;
use longhaul_runtime::platform::open_ports;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const COMMANDS: u64 = 20_000;
const GAP_NS: u64 = 5_000;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut cfg =
        longhaul_pipelines::load_config(&root.join("configs/baseline.toml")).expect("config");
    cfg.ports[0].io = PortIo::Pcap {
        rx: Some(root.join("examples/roce-64flows.pcap")),
        tx: None,
        rx_loop: true,
        pace: false,
        tx_max_bytes: None,
    };
    let ports = open_ports(&cfg).expect("ports");
    let mut sw = Switch::new(switch_spec(&cfg), heap_pool(&cfg), Baseline::new(&cfg));
    let ch = sw.channel();
    let stop = Arc::new(AtomicBool::new(false));
    let snap = Arc::new(Mutex::new(SwitchSnapshot::default()));
    let opts = WorkerOptions {
        stop: stop.clone(),
        snapshot: snap.clone(),
        stats_interval: Duration::from_millis(100),
        until_idle: false,
        idle_sleep: Duration::ZERO,
        idle_flag: None,
    };
    let worker = std::thread::spawn(move || {
        let mut ports = ports;
        let s = run_worker(&mut sw, &mut ports, &opts, None);
        (s, sw)
    });
    // Let it warm up.
    std::thread::sleep(Duration::from_millis(200));
    let mac = [2, 0, 0, 0, 0x55, 0x55];
    let mut next = mono_ns();
    for i in 0..COMMANDS {
        while mono_ns() < next {
            std::hint::spin_loop();
        }
        next += GAP_NS;
        let cmd = if i % 2 == 0 {
            BaselineCommand::L2Insert { mac, port: 1 }
        } else {
            BaselineCommand::L2Delete { mac }
        };
        let mut env = Envelope {
            seq: i,
            at: 0,
            issued_ns: mono_ns(),
            cmd: Command::Pipeline(cmd),
        };
        while let Err(e) = ch.commands.push(env) {
            env = e;
            std::hint::spin_loop();
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::SeqCst);
    let (summary, sw) = worker.join().expect("worker");
    let c = sw.control_stats();
    let h = &c.latency_hist;
    println!(
        "control_latency: {} commands applied ({} refused) while forwarding {} packets",
        c.applied, c.refused, summary.rx
    );
    println!(
        "control_latency: p50 <= {} ns, p99 <= {} ns, max {} ns, mean {} ns",
        h.quantile_upper_ns(0.5),
        h.quantile_upper_ns(0.99),
        h.max_ns,
        h.sum_ns / h.count.max(1)
    );
}
