//! DPDK backend on vdevs, without hugepages or NICs: EAL (`--no-huge --no-pci`, started once for
//! this test process), mbufs as PacketBufs, mempool exhaustion, net_null, net_pcap and a net_ring
//! pair, bad input. Run with `cargo test -p longhaul-dataplane --features dpdk`.
//!
//! Tests in one binary run on several threads: each port test takes `PORTS`, so DPDK's control
//! path (configure/start/stop/close) and each queue are used by one thread at a time.
#![cfg(feature = "dpdk")]

use longhaul_dataplane::dpdk::{
    sys, DpdkPort, DpdkPortConfig, Eal, Mbuf, MbufPool, META_PRIV_SIZE, SYMMETRIC_RSS_KEY,
};
use longhaul_dataplane::packet::{
    BufPool, Meta, PacketBuf, DEFAULT_DATA_ROOM, DEFAULT_HEADROOM, FLAG_CLONE,
};
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::port::Port;
use longhaul_dataplane::port::BURST;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Counts heap allocations per thread, to prove the rx/tx path allocates nothing.
struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only counts (a const-initialised
// thread-local Cell, which never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/roce-64flows.pcap");

fn tmp_dir() -> PathBuf {
    std::env::temp_dir().join(format!("longhaul-dpdk-test-{}", std::process::id()))
}

fn tx_pcap() -> PathBuf {
    tmp_dir().join("tx.pcap")
}

fn eal_args() -> Vec<String> {
    [
        "-l",
        "0",
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "--log-level=lib.eal:error",
        "--vdev=net_null0",
        "--vdev=net_null1",
        "--vdev=net_null2",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        // A private runtime directory: test binaries never share DPDK state.
        format!("--file-prefix=longhaul-test-{}", std::process::id()),
        format!(
            "--vdev=net_pcap0,rx_pcap={FIXTURE},tx_pcap={}",
            tx_pcap().display()
        ),
        format!("--vdev=net_pcap1,rx_pcap={FIXTURE}"),
    ])
    .collect()
}

/// EAL, started once for the whole test process, and the ports that existed right after (tests
/// close ports, and DPDK releases a closed vdev).
fn eal_and_ports() -> &'static (Eal, Vec<String>) {
    static EAL: OnceLock<(Eal, Vec<String>)> = OnceLock::new();
    EAL.get_or_init(|| {
        std::fs::create_dir_all(tmp_dir()).unwrap();
        match Eal::init(&eal_args()) {
            Ok(e) => {
                let names = e.port_names().into_iter().map(|(_, n)| n).collect();
                (e, names)
            }
            Err(e) => panic!("EAL init failed: {e}"),
        }
    })
}

fn eal() -> Eal {
    eal_and_ports().0
}

/// Serialises the tests that set up ports.
fn ports_lock() -> MutexGuard<'static, ()> {
    static PORTS: Mutex<()> = Mutex::new(());
    PORTS.lock().unwrap_or_else(|e| e.into_inner())
}

fn pool(name: &str, n: u32) -> MbufPool {
    MbufPool::new(&eal(), name, n, 0, DEFAULT_DATA_ROOM)
        .unwrap_or_else(|e| panic!("pool {name}: {e}"))
}

/// The sizes and offsets Rust relies on, against what the C compiler laid out (EAL init checks
/// this too, and the shim asserts the same numbers at compile time).
#[test]
fn layouts_agree_with_the_shim() {
    sys::check_layout().unwrap();
    let l = sys::layout();
    assert_eq!(l.mbuf_size, 128);
    assert_eq!(l.pktmbuf_headroom as usize, DEFAULT_HEADROOM);
    assert_eq!(l.off_data_len, 40);
    assert!(usize::from(META_PRIV_SIZE) >= std::mem::size_of::<Meta>());
    assert_eq!(usize::from(META_PRIV_SIZE) % l.priv_align as usize, 0);
    assert_eq!(&SYMMETRIC_RSS_KEY[..4], &[0x6d, 0x5a, 0x6d, 0x5a]);
}

#[test]
fn eal_is_started_once() {
    let e = eal();
    assert_eq!(e.args(), eal_args().as_slice());
    assert!(Eal::init(&eal_args()).is_ok(), "same arguments: same EAL");
    let err = Eal::init(&["--no-huge".to_string()]).unwrap_err();
    assert!(err.to_string().contains("already started"), "{err}");
    assert!(e.tsc_hz() > 0);
    let t0 = e.tsc();
    assert!(e.tsc() >= t0);
    let names = &eal_and_ports().1;
    for n in [
        "net_null0",
        "net_null1",
        "net_null2",
        "net_pcap0",
        "net_pcap1",
    ] {
        assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
    }
}

/// EAL init failure: a clear error, no crash. EAL starts once per process, so this runs in a
/// child process (this test binary, re-run with only `child_bad_eal_args`).
#[test]
fn eal_init_failure_is_an_error() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_bad_eal_args",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LONGHAUL_DPDK_CHILD", "bad-eal")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("CHILD-ERROR: EAL: rte_eal_init"),
        "{stdout}"
    );
}

#[test]
fn child_bad_eal_args() {
    if std::env::var("LONGHAUL_DPDK_CHILD").as_deref() != Ok("bad-eal") {
        return;
    }
    let args = vec![
        "--no-huge".to_string(),
        "--no-pci".to_string(),
        "--definitely-not-an-eal-option".to_string(),
    ];
    let err = Eal::init(&args).unwrap_err();
    assert!(err.errno() != 0, "{err}");
    println!("CHILD-ERROR: {err}");
    // The failure is remembered: asking again gives the same error, not a second rte_eal_init.
    assert_eq!(Eal::init(&args).unwrap_err(), err);
    assert!(Eal::get().is_none());
}

/// Issue 42: with `LONGHAUL_LOG_FORMAT=json`, EAL's own stderr lines were not JSON. DPDK's log
/// stream now goes to a sink (`longhaul run` gives it its logger): in a child process (EAL starts
/// once per process) with EAL at its default log level, every EAL line reaches the sink with its
/// level, and none is written to stderr.
#[test]
fn eal_logs_go_to_the_sink_not_stderr() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_eal_logs",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("LONGHAUL_DPDK_CHILD", "eal-logs")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stdout}\n{stderr}");
    let sunk: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("SINK "))
        .collect();
    assert!(
        sunk.iter().any(|l| l.starts_with("Info EAL: ")),
        "no EAL info line reached the sink: {stdout}"
    );
    assert!(
        !stderr.lines().any(|l| l.contains("EAL:")),
        "EAL wrote to stderr: {stderr}"
    );
}

#[test]
fn child_eal_logs() {
    if std::env::var("LONGHAUL_DPDK_CHILD").as_deref() != Ok("eal-logs") {
        return;
    }
    fn sink(level: longhaul_dataplane::dpdk::LogLevel, line: &str) {
        println!("SINK {level:?} {line}");
    }
    longhaul_dataplane::dpdk::route_logs(sink).unwrap();
    let args: Vec<String> = [
        "-l",
        "0",
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "--vdev=net_null0",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!(
        "--file-prefix=longhaul-logs-{}",
        std::process::id()
    )])
    .collect();
    Eal::init(&args).unwrap();
    // A second routing keeps the first sink.
    longhaul_dataplane::dpdk::route_logs(|_, _| panic!("replaced")).unwrap();
}

#[test]
fn mbuf_is_a_packet_buf() {
    let mut p = pool("t_mbuf", 63);
    let mut b = p.alloc().unwrap();
    assert!(b.is_empty());
    assert_eq!(
        b.headroom(),
        DEFAULT_HEADROOM,
        "DPDK's RTE_PKTMBUF_HEADROOM"
    );
    assert_eq!(b.tailroom(), DEFAULT_DATA_ROOM);
    assert_eq!(*b.meta(), Meta::default());
    assert_eq!(b.nb_segs(), 1);

    b.append(4).unwrap().copy_from_slice(&[1, 2, 3, 4]);
    b.prepend(2).unwrap().copy_from_slice(&[9, 9]);
    assert_eq!(b.data(), &[9, 9, 1, 2, 3, 4]);
    assert_eq!(b.pkt_len(), 6);
    b.meta_mut().ingress_port = 7;
    b.meta_mut().flow_hash = 0xdead_beef;
    assert!(b.adj(2));
    assert!(b.trim(1));
    assert_eq!(b.data(), &[1, 2, 3]);
    b.data_mut()[0] = 0x55;
    assert_eq!(b.data(), &[0x55, 2, 3]);
    assert!(!b.adj(4));
    assert!(!b.trim(4));
    assert!(b.prepend(DEFAULT_HEADROOM + 100).is_none());
    assert!(b.prepend(1 << 20).is_none());
    assert!(b.append(DEFAULT_DATA_ROOM).is_none());
    assert!(b.append(1 << 20).is_none());
    assert_eq!(b.data(), &[0x55, 2, 3]);
    assert_eq!(b.meta().ingress_port, 7);
    assert_eq!(b.meta().flow_hash, 0xdead_beef);
    for (rust, dpdk) in b.views() {
        assert_eq!(
            rust, dpdk,
            "Rust's field reads agree with DPDK's inline functions"
        );
    }
    assert_eq!(b.headroom(), DEFAULT_HEADROOM);
    assert_eq!(b.tailroom(), DEFAULT_DATA_ROOM - 3);

    // Whole headroom and tailroom are usable, as DPDK's.
    assert!(b.prepend(DEFAULT_HEADROOM).is_some());
    assert_eq!(b.headroom(), 0);
    assert!(b.append(b.tailroom()).is_some());
    assert_eq!(b.tailroom(), 0);
    assert_eq!(b.len(), DEFAULT_HEADROOM + DEFAULT_DATA_ROOM);

    b.reset();
    assert!(b.is_empty());
    assert_eq!(b.headroom(), DEFAULT_HEADROOM);
    assert_eq!(*b.meta(), Meta::default());

    assert!(b.set_data(&[7; 100]));
    let c = p.clone_pkt(&b, 10).unwrap();
    assert_eq!(c.data(), &[7; 10]);
    assert_ne!(c.meta().flags & FLAG_CLONE, 0);
    assert!(p.alloc_from(&vec![0u8; DEFAULT_DATA_ROOM + 1]).is_none());

    // Mbufs move between threads with their owner.
    let h = std::thread::spawn(move || {
        assert_eq!(c.len(), 10);
        c
    });
    let c = h.join().unwrap();
    drop(c);
    drop(b);
    assert_eq!(p.available(), 63, "dropping an Mbuf frees it");
}

#[test]
fn pool_exhaustion_returns_none() {
    let mut p = pool("t_exhaust", 31);
    assert_eq!(p.size(), 31);
    let mut held: Vec<Mbuf> = (0..31).map(|_| p.alloc().expect("31 mbufs")).collect();
    assert_eq!(p.available(), 0);
    assert!(p.alloc().is_none());
    assert!(p.alloc_from(&[1, 2, 3]).is_none());
    p.free(held.pop().unwrap());
    assert_eq!(p.available(), 1);
    let again = p.alloc().unwrap();
    assert!(again.is_empty() && *again.meta() == Meta::default());
    drop(held);
    drop(again);
    assert_eq!(p.available(), 31);
}

#[test]
fn bad_pool_parameters_are_errors() {
    let e = MbufPool::new(&eal(), "t_bad_room", 63, 0, 70_000).unwrap_err();
    assert!(e.to_string().contains("t_bad_room"), "{e}");
    // A cache larger than DPDK allows: DPDK's own error text.
    let e = MbufPool::new(&eal(), "t_bad_cache", 63, 100_000, 2048).unwrap_err();
    assert!(
        e.to_string().contains("t_bad_cache") && e.errno() != 0,
        "{e}"
    );
    // Duplicate name.
    let _a = pool("t_dup", 31);
    let e = MbufPool::new(&eal(), "t_dup", 31, 0, 2048).unwrap_err();
    assert!(e.to_string().contains("t_dup") && e.errno() != 0, "{e}");
}

#[test]
fn bad_device_names_the_device() {
    let _g = ports_lock();
    let p = pool("t_baddev", 255);
    let err = DpdkPort::open(&eal(), "net_nope7", &DpdkPortConfig::default(), &p)
        .err()
        .expect("no such port");
    let s = err.to_string();
    assert!(
        s.contains("net_nope7") && s.contains("no such ethdev"),
        "{s}"
    );
    assert!(s.contains("ports: "), "lists the ports that exist: {s}");
    let err = DpdkPort::open(&eal(), "3b:00.0", &DpdkPortConfig::default(), &p)
        .err()
        .expect("no PCI with --no-pci");
    assert!(err.to_string().contains("3b:00.0"), "{err}");
}

#[test]
fn net_null_smoke() {
    let _g = ports_lock();
    let e = eal();
    let mut p = pool("t_null", 1023);
    let cfg = DpdkPortConfig {
        rx_desc: 256,
        tx_desc: 256,
        ..DpdkPortConfig::default()
    };
    let mut rx = DpdkPort::open(&e, "net_null0", &cfg, &p).unwrap();
    let mut tx = DpdkPort::open(&e, "net_null1", &cfg, &p).unwrap();
    assert_eq!(rx.info().driver, "net_null");
    assert!(rx.link().unwrap().up);
    assert!(Port::<MbufPool>::link_up(&tx));
    assert!(rx.describe().contains("net_null0"), "{}", rx.describe());
    let dup = DpdkPort::open(&e, "net_null0", &cfg, &p).err().unwrap();
    assert!(dup.to_string().contains("already open"), "{dup}");

    let before = p.available();
    let mut burst: Vec<Mbuf> = Vec::with_capacity(BURST);
    let mut frames = 0;
    for _ in 0..10 {
        let n = rx.rx_burst(0, &mut p, &mut burst, BURST);
        assert_eq!(n, BURST, "net_null always has frames");
        assert!(burst
            .iter()
            .all(|b| b.len() == 64 && *b.meta() == Meta::default()));
        frames += n;
        assert_eq!(tx.tx_burst(0, &mut burst, &mut p), n);
        assert!(burst.is_empty());
    }
    let (rs, ts) = (rx.stats(), tx.stats());
    assert_eq!(
        (rs.rx_pkts, rs.rx_bytes),
        (frames as u64, 64 * frames as u64)
    );
    assert_eq!(
        (ts.tx_pkts, ts.tx_bytes),
        (frames as u64, 64 * frames as u64)
    );
    assert_eq!(ts.tx_errors, 0);
    let es = tx.eth_stats().unwrap();
    assert_eq!(es.opackets, frames as u64);
    assert_eq!(rx.eth_stats().unwrap().ipackets, frames as u64);
    assert_eq!(p.available(), before, "every mbuf went back to the pool");

    // Steady state: rx burst -> tx burst allocates nothing.
    let a0 = allocs();
    for _ in 0..1000 {
        let n = rx.rx_burst(0, &mut p, &mut burst, BURST);
        for b in burst.iter_mut() {
            b.meta_mut().ingress_port = 0;
            b.data_mut()[0] = 0x02;
        }
        assert_eq!(tx.tx_burst(0, &mut burst, &mut p), n);
    }
    let _ = (rx.stats(), tx.stats(), rx.link_up());
    assert_eq!(allocs() - a0, 0, "the rx/tx path allocated");
}

/// RSS with the symmetric key where the PMD has it (net_null emulates RSS), several queues.
#[test]
fn rss_and_queues() {
    let _g = ports_lock();
    let e = eal();
    let p = pool("t_rss", 1023);
    let cfg = DpdkPortConfig {
        rx_queues: 2,
        tx_queues: 2,
        rx_desc: 128,
        tx_desc: 128,
        rss: true,
        promiscuous: true,
    };
    let mut port = DpdkPort::open(&e, "net_null2", &cfg, &p).unwrap();
    let info = port.info().clone();
    assert_eq!((info.rx_queues, info.tx_queues), (2, 2));
    assert_eq!(info.hardware_rss(), info.rss_supported != 0, "{info:?}");
    let mut burst = Vec::with_capacity(BURST);
    for q in 0..2 {
        assert_eq!(port.rx_burst_queue(q, &mut burst, 8), 8);
        assert_eq!(port.tx_burst_queue(q, &mut burst), 8);
    }
    let s = Port::<MbufPool>::stats(&port);
    assert_eq!((s.rx_pkts, s.tx_pkts), (16, 16));
    println!("{}", port.describe());
}

#[test]
fn net_ring_pair_between_two_ports() {
    let _g = ports_lock();
    let e = eal();
    let mut p = pool("t_ring", 511);
    let (ra, rb) = e.ring_pair("lh_ring_a", "lh_ring_b", 64).unwrap();
    assert_eq!(
        (ra.as_str(), rb.as_str()),
        ("net_ring_lh_ring_a", "net_ring_lh_ring_b")
    );
    assert!(
        e.ring_pair("lh_ring_a", "lh_ring_b", 64).is_err(),
        "names taken"
    );
    let cfg = DpdkPortConfig {
        rx_desc: 64,
        tx_desc: 64,
        ..DpdkPortConfig::default()
    };
    // The ring PMD has one queue each way: asking for two is a clear error.
    let two = DpdkPortConfig {
        rx_queues: 2,
        rss: true,
        ..cfg
    };
    let err = DpdkPort::open(&e, &ra, &two, &p).err().unwrap();
    assert!(
        err.to_string().contains("net_ring_lh_ring_a") && err.to_string().contains("rx queues"),
        "{err}"
    );
    let mut a = DpdkPort::open(&e, &ra, &cfg, &p).unwrap();
    let mut b = DpdkPort::open(&e, &rb, &cfg, &p).unwrap();
    assert_eq!(a.info().driver, "net_ring");
    assert!(!a.info().hardware_rss());
    let before = p.available();

    // 100 frames into a 64-entry ring (63 usable): 63 sent, 37 refused and counted.
    let frames: Vec<Vec<u8>> = (0..100u8).map(|i| vec![i; 60 + usize::from(i)]).collect();
    let mut v: Vec<Mbuf> = frames.iter().map(|f| p.alloc_from(f).unwrap()).collect();
    let sent = a.tx_burst(0, &mut v, &mut p);
    assert_eq!(sent, 63);
    assert!(v.is_empty());
    let sa = a.stats();
    assert_eq!((sa.tx_pkts, sa.tx_errors), (63, 37));
    assert_eq!(
        sa.tx_bytes,
        frames[..63].iter().map(|f| f.len() as u64).sum::<u64>()
    );

    let mut got = Vec::new();
    let mut burst = Vec::with_capacity(BURST);
    loop {
        let n = b.rx_burst(0, &mut p, &mut burst, BURST);
        if n == 0 {
            break;
        }
        for m in burst.drain(..) {
            got.push(m.data().to_vec());
        }
    }
    assert_eq!(got, frames[..63].to_vec(), "byte-identical, in order");
    assert_eq!(b.stats().rx_pkts, 63);
    assert_eq!(p.available(), before, "nothing leaked");

    // And back the other way.
    let mut v = vec![p.alloc_from(&[0xab; 80]).unwrap()];
    assert_eq!(b.tx_burst(0, &mut v, &mut p), 1);
    assert_eq!(a.rx_burst(0, &mut p, &mut burst, BURST), 1);
    assert_eq!(burst[0].data(), &[0xab; 80]);
}

#[test]
fn net_pcap_in_and_out() {
    let _g = ports_lock();
    let e = eal();
    let mut p = pool("t_pcap", 2047);
    let want: Vec<Vec<u8>> = read_pcap(FIXTURE)
        .unwrap()
        .into_iter()
        .map(|r| r.data)
        .collect();
    assert_eq!(want.len(), 1024);
    let mut port = DpdkPort::open(&e, "net_pcap0", &DpdkPortConfig::default(), &p).unwrap();
    assert_eq!(port.info().driver, "net_pcap");

    let mut got = Vec::new();
    let mut burst = Vec::with_capacity(BURST);
    let mut idle = 0;
    while idle < 100 {
        let n = port.rx_burst(0, &mut p, &mut burst, BURST);
        if n == 0 {
            idle += 1;
            continue;
        }
        got.extend(burst.iter().map(|m| m.data().to_vec()));
        // Out again through tx_pcap, zero-copy: the same mbufs.
        assert_eq!(port.tx_burst(0, &mut burst, &mut p), n);
    }
    assert_eq!(got.len(), want.len());
    assert!(got == want, "rx frames are byte-identical to the pcap");
    let s = port.stats();
    assert_eq!((s.rx_pkts, s.tx_pkts), (1024, 1024));
    drop(port); // stop closes the tx pcap
    let out: Vec<Vec<u8>> = read_pcap(tx_pcap())
        .unwrap()
        .into_iter()
        .map(|r| r.data)
        .collect();
    assert!(out == want, "tx_pcap holds what tx sent");
    let _ = std::fs::remove_dir_all(tmp_dir());
}

/// Frames larger than one mbuf arrive chained: dropped and counted, not handed to stages.
#[test]
fn multi_segment_frames_are_dropped_and_counted() {
    let _g = ports_lock();
    let e = eal();
    // 256 bytes of room: the fixture's 314-byte frames need two segments.
    let mut small = MbufPool::new(&e, "t_small", 2047, 0, 256).unwrap();
    let mut port = DpdkPort::open(&e, "net_pcap1", &DpdkPortConfig::default(), &small).unwrap();
    let before = small.available();
    let mut burst = Vec::with_capacity(BURST);
    for _ in 0..100 {
        assert_eq!(port.rx_burst(0, &mut small, &mut burst, BURST), 0);
    }
    assert_eq!(port.rx_multiseg_drops(), 1024);
    let s = port.stats();
    assert_eq!((s.rx_pkts, s.rx_errors), (0, 1024));
    assert_eq!(small.available(), before, "chains freed");
}
