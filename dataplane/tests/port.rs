//! Port backends: pcap rx pacing, looping and buffer accounting, pcap tx, in-memory rings, and a
//! live-style worker loop (rx burst, receive, poll, transmit, tx burst) on a fake clock.

use longhaul_dataplane::engine::{Action, Ctx, Pipeline, PortInfo, PortSpec, Switch, SwitchSpec};
use longhaul_dataplane::packet::{BufPool, HeapBuf, HeapPool, PacketBuf};
use longhaul_dataplane::pcap::{read_pcap, write_pcap, PcapRecord};
use longhaul_dataplane::port::{MemoryPort, NullPort, PcapPort, Port, PortIoStats};
use longhaul_dataplane::time::{serialization_ns, Nanos, NS_PER_SEC};
use longhaul_dataplane::tm::TmConfig;
use std::io;
use std::path::PathBuf;

#[path = "../../tests/support/tmpdir.rs"]
mod tmpdir;
use tmpdir::TmpDir;

const GBPS: u64 = 1_000_000_000;
/// A pcap epoch far from 0, so that offsets (not absolute timestamps) are what matters.
const EPOCH: Nanos = 1_700_000_000 * NS_PER_SEC;

/// A fresh scratch directory for one test.
fn tmpdir(name: &str) -> TmpDir {
    TmpDir::new("port", name)
}

/// Byte 0 = egress port id, byte 1 = sequence number; non-MAC-control EtherType.
fn frame(port: u8, seq: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0] = port;
    f[1] = seq;
    f[12] = 0x88;
    f[13] = 0xb5;
    f
}

/// A capture with frames at `EPOCH + offs[i]`, frame i = `frame(1, i, len)`.
fn capture(dir: &std::path::Path, offs: &[Nanos], len: usize) -> PathBuf {
    let p = dir.join("in.pcap");
    let recs: Vec<PcapRecord> = offs
        .iter()
        .enumerate()
        .map(|(i, &o)| PcapRecord {
            ts_ns: EPOCH + o,
            data: frame(1, i as u8, len),
        })
        .collect();
    write_pcap(&p, &recs).unwrap();
    p
}

fn seqs(v: &[HeapBuf]) -> Vec<u8> {
    v.iter().map(|b| b.data()[1]).collect()
}

fn give_back(pool: &mut HeapPool, v: &mut Vec<HeapBuf>) {
    for b in v.drain(..) {
        pool.free(b);
    }
}

fn stats<T: Port<HeapPool>>(p: &T) -> PortIoStats {
    p.stats()
}

#[test]
fn paced_rx_delivers_frames_at_their_relative_time() {
    let dir = tmpdir("paced");
    // The fourth timestamp goes backwards: it counts as the third's.
    let rx = capture(&dir, &[0, 100, 300, 250], 64);
    let mut port = PcapPort::open(Some(&rx), None, false, true, 1000).unwrap();
    let mut pool = HeapPool::new(16, 2048);
    let mut out = Vec::with_capacity(32);
    let p: &mut dyn Port<HeapPool> = &mut port;
    assert_eq!(p.next_rx(), Some(1000));
    assert_eq!(p.rx_burst(999, &mut pool, &mut out, 32), 0);
    assert_eq!(p.rx_burst(1000, &mut pool, &mut out, 32), 1);
    assert_eq!(p.next_rx(), Some(1100));
    assert_eq!(p.rx_burst(1099, &mut pool, &mut out, 32), 0);
    assert_eq!(p.rx_burst(1100, &mut pool, &mut out, 32), 1);
    assert!(!p.rx_exhausted());
    assert_eq!(p.rx_burst(1299, &mut pool, &mut out, 32), 0);
    assert_eq!(p.rx_burst(1300, &mut pool, &mut out, 32), 2);
    assert_eq!(seqs(&out), vec![0, 1, 2, 3]);
    assert_eq!(out[3].data(), &frame(1, 3, 64)[..]);
    assert!(p.rx_exhausted());
    assert_eq!(p.next_rx(), None);
    assert_eq!(p.rx_burst(u64::MAX, &mut pool, &mut out, 32), 0);
    let s = p.stats();
    assert_eq!((s.rx_pkts, s.rx_bytes, s.rx_errors), (4, 256, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unpaced_rx_delivers_bursts_of_max() {
    let dir = tmpdir("unpaced");
    let offs: Vec<Nanos> = (0..10).map(|i| i * NS_PER_SEC).collect();
    let rx = capture(&dir, &offs, 60);
    let mut port = PcapPort::open(Some(&rx), None, false, false, 5_000).unwrap();
    assert_eq!(port.rx_frames(), 10);
    let mut pool = HeapPool::new(16, 2048);
    let mut out = Vec::with_capacity(32);
    let mut sizes = Vec::new();
    // Not paced: time does not matter, not even before `start`.
    for _ in 0..4 {
        sizes.push(port.rx_burst(0, &mut pool, &mut out, 4));
        give_back(&mut pool, &mut out);
    }
    assert_eq!(sizes, vec![4, 4, 2, 0]);
    assert!(Port::<HeapPool>::rx_exhausted(&port));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn rx_loop_wraps_and_keeps_relative_spacing() {
    let dir = tmpdir("loop");
    // Span 200, mean gap 100: each lap is shifted by 300.
    let rx = capture(&dir, &[0, 100, 200], 60);
    let mut port = PcapPort::open(Some(&rx), None, true, true, 50).unwrap();
    let mut pool = HeapPool::new(4, 2048);
    let mut out = Vec::with_capacity(32);
    let mut got = Vec::new();
    for _ in 0..9 {
        let t = Port::<HeapPool>::next_rx(&port).unwrap();
        assert_eq!(port.rx_burst(t - 1, &mut pool, &mut out, 32), 0);
        assert_eq!(port.rx_burst(t, &mut pool, &mut out, 32), 1);
        got.push((t, out[0].data()[1]));
        give_back(&mut pool, &mut out);
        assert!(!Port::<HeapPool>::rx_exhausted(&port));
    }
    let want: Vec<(Nanos, u8)> = (0..9).map(|k| (50 + 100 * k, (k % 3) as u8)).collect();
    assert_eq!(got, want);

    // Unpaced and looping: full bursts forever, cycling through the capture.
    let mut port = PcapPort::open(Some(&rx), None, true, false, 0).unwrap();
    let mut pool = HeapPool::new(16, 2048);
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 8), 8);
    assert_eq!(seqs(&out), vec![0, 1, 2, 0, 1, 2, 0, 1]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pool_exhaustion_counts_rx_nobuf_and_retries_the_frame() {
    let dir = tmpdir("nobuf");
    let rx = capture(&dir, &[0, 1, 2], 60);
    let mut port = PcapPort::open(Some(&rx), None, false, false, 0).unwrap();
    let mut pool = HeapPool::new(2, 2048);
    let mut out = Vec::with_capacity(32);
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 32), 2);
    assert_eq!(stats(&port).rx_nobuf, 1);
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 32), 0);
    assert_eq!(stats(&port).rx_nobuf, 2);
    assert!(!Port::<HeapPool>::rx_exhausted(&port));
    give_back(&mut pool, &mut out);
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 32), 1);
    assert_eq!(seqs(&out), vec![2]);
    let s = stats(&port);
    assert_eq!((s.rx_pkts, s.rx_nobuf, s.rx_errors), (3, 2, 0));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn oversize_frame_is_counted_and_skipped() {
    let dir = tmpdir("oversize");
    let p = dir.join("in.pcap");
    let recs: Vec<PcapRecord> = [60usize, 200, 60]
        .iter()
        .enumerate()
        .map(|(i, &len)| PcapRecord {
            ts_ns: i as u64,
            data: frame(1, i as u8, len),
        })
        .collect();
    write_pcap(&p, &recs).unwrap();
    let mut port = PcapPort::open(Some(&p), None, false, false, 0).unwrap();
    let mut pool = HeapPool::new(8, 100);
    let mut out = Vec::with_capacity(32);
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 32), 2);
    assert_eq!(seqs(&out), vec![0, 2]);
    let s = stats(&port);
    assert_eq!(
        (s.rx_pkts, s.rx_bytes, s.rx_errors, s.rx_nobuf),
        (2, 120, 1, 0)
    );
    assert_eq!(pool.available(), 6);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tx_writes_a_readable_pcap_with_tx_timestamps() {
    let dir = tmpdir("tx");
    let path = dir.join("out.pcap");
    let mut port = PcapPort::open(None, Some(&path), false, false, 0).unwrap();
    let mut pool = HeapPool::new(4, 2048);
    let a = frame(0, 1, 64);
    let b = frame(0, 2, 1500);
    let c = frame(0, 3, 60);
    let mut v = vec![pool.alloc_from(&a).unwrap(), pool.alloc_from(&b).unwrap()];
    assert_eq!(port.tx_burst(7 * NS_PER_SEC + 5, &mut v, &mut pool), 2);
    assert!(v.is_empty());
    v.push(pool.alloc_from(&c).unwrap());
    assert_eq!(port.tx_burst(8 * NS_PER_SEC, &mut v, &mut pool), 1);
    assert_eq!(pool.available(), 4);
    Port::<HeapPool>::flush(&mut port).unwrap();
    let recs = read_pcap(&path).unwrap();
    let want = vec![
        PcapRecord {
            ts_ns: 7 * NS_PER_SEC + 5,
            data: a,
        },
        PcapRecord {
            ts_ns: 7 * NS_PER_SEC + 5,
            data: b,
        },
        PcapRecord {
            ts_ns: 8 * NS_PER_SEC,
            data: c,
        },
    ];
    assert_eq!(recs, want);
    let s = stats(&port);
    assert_eq!((s.tx_pkts, s.tx_bytes, s.tx_errors), (3, 1624, 0));
    assert!(port.tx_error().is_none());
    // rx-only side: nothing to receive.
    assert!(Port::<HeapPool>::rx_exhausted(&port));
    assert_eq!(Port::<HeapPool>::next_rx(&port), None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_capped_tx_file_in_a_new_directory_stays_a_valid_pcap_under_its_cap() {
    let dir = tmpdir("txcap");
    let path = dir.join("new/sub/out.pcap");
    // Header 24 + 2 x (16 + 500) = 1056: a cap of 1100 holds two 500-byte frames.
    let mut port = PcapPort::open(None, Some(&path), false, false, 0)
        .unwrap()
        .with_tx_cap(1100);
    let mut pool = HeapPool::new(8, 2048);
    let mut v: Vec<_> = (0..5)
        .map(|i| pool.alloc_from(&frame(0, i, 500)).unwrap())
        .collect();
    assert_eq!(port.tx_burst(NS_PER_SEC, &mut v, &mut pool), 2);
    assert_eq!(pool.available(), 8, "dropped frames are freed");
    Port::<HeapPool>::flush(&mut port).unwrap();
    assert_eq!(read_pcap(&path).unwrap().len(), 2);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 1056);
    assert_eq!((stats(&port).tx_errors, port.tx_capped()), (3, 3));
    assert!(port.tx_error().is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tx_of_an_unrepresentable_time_is_counted_not_fatal() {
    let dir = tmpdir("txtime");
    let path = dir.join("out.pcap");
    let mut port = PcapPort::open(None, Some(&path), false, false, 0).unwrap();
    let mut pool = HeapPool::new(4, 2048);
    let mut v = vec![pool.alloc_from(&frame(0, 1, 60)).unwrap()];
    assert_eq!(port.tx_burst(u64::MAX, &mut v, &mut pool), 0);
    v.push(pool.alloc_from(&frame(0, 2, 60)).unwrap());
    assert_eq!(port.tx_burst(1, &mut v, &mut pool), 1);
    Port::<HeapPool>::flush(&mut port).unwrap();
    assert_eq!(read_pcap(&path).unwrap().len(), 1);
    assert_eq!(stats(&port).tx_errors, 1);
    assert_eq!(pool.available(), 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn open_errors_name_the_file() {
    let dir = tmpdir("errors");
    // A missing directory is created; one that cannot be (a file is in the way) is an error.
    std::fs::write(dir.join("a-file"), b"x").unwrap();
    let bad_tx = dir.join("a-file").join("out.pcap");
    let e = PcapPort::open(None, Some(&bad_tx), false, false, 0)
        .err()
        .unwrap();
    assert!(e.to_string().contains("a-file"), "{e}");
    let missing = dir.join("missing.pcap");
    let e = PcapPort::open(Some(&missing), None, false, false, 0)
        .err()
        .unwrap();
    assert!(e.to_string().contains("missing.pcap"), "{e}");
    let not_pcap = dir.join("garbage.pcap");
    std::fs::write(&not_pcap, b"definitely not a capture").unwrap();
    let e = PcapPort::open(Some(&not_pcap), None, false, false, 0)
        .err()
        .unwrap();
    assert!(e.to_string().contains("garbage.pcap"), "{e}");
    let e = PcapPort::open(None, None, false, false, 0).err().unwrap();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    let full = std::path::Path::new("/dev/full");
    if full.exists() {
        let e = PcapPort::open(None, Some(full), false, false, 0)
            .err()
            .unwrap();
        assert!(e.to_string().contains("/dev/full"), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn describe_names_the_files() {
    let dir = tmpdir("describe");
    let rx = capture(&dir, &[0], 60);
    let tx = dir.join("out.pcap");
    let port = PcapPort::open(Some(&rx), Some(&tx), true, true, 0).unwrap();
    let d = Port::<HeapPool>::describe(&port);
    assert!(d.starts_with("pcap rx=") && d.contains("in.pcap") && d.contains("tx="));
    assert!(
        d.contains("out.pcap") && d.contains("loop") && d.contains("paced"),
        "{d}"
    );
    assert_eq!(Port::<HeapPool>::describe(&NullPort::new()), "null");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn memory_port_inject_take_and_full_rings() {
    let (mut port, peer) = MemoryPort::new(2);
    let mut pool = HeapPool::new(8, 2048);
    let mut out = Vec::with_capacity(32);
    assert!(peer.inject(&frame(0, 1, 60)));
    assert!(peer.inject(&frame(0, 2, 60)));
    assert!(!peer.inject(&frame(0, 3, 60)));
    assert_eq!(peer.dropped(), 1);
    assert_eq!(Port::<HeapPool>::next_rx(&port), Some(0));
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 32), 2);
    assert_eq!(seqs(&out), vec![1, 2]);
    assert_eq!(Port::<HeapPool>::next_rx(&port), None);
    // Transmit three into a ring of two: the third is dropped and counted.
    out.push(pool.alloc_from(&frame(0, 3, 70)).unwrap());
    assert_eq!(port.tx_burst(0, &mut out, &mut pool), 2);
    assert!(out.is_empty());
    assert_eq!(pool.available(), 8);
    assert_eq!(peer.take().unwrap(), frame(0, 1, 60));
    assert_eq!(peer.drain(), vec![frame(0, 2, 60)]);
    assert_eq!(peer.take(), None);
    let s = stats(&port);
    assert_eq!(
        (s.rx_pkts, s.rx_errors, s.tx_pkts, s.tx_bytes, s.tx_errors),
        (2, 1, 2, 120, 1)
    );

    // A peer on another thread; the port is exhausted once every peer is gone and it is drained.
    let p2 = peer.clone();
    std::thread::spawn(move || assert!(p2.inject(&frame(0, 9, 60))))
        .join()
        .unwrap();
    drop(peer);
    assert!(!Port::<HeapPool>::rx_exhausted(&port));
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 32), 1);
    assert!(Port::<HeapPool>::rx_exhausted(&port));
}

#[test]
fn memory_port_nobuf_retries_and_oversize_is_dropped() {
    let (mut port, peer) = MemoryPort::new(8);
    let mut pool = HeapPool::new(1, 100);
    let mut out = Vec::with_capacity(32);
    for (i, len) in [60usize, 500, 61, 62].into_iter().enumerate() {
        assert!(peer.inject(&frame(0, i as u8, len)));
    }
    // One buffer: frame 0 delivered, then the pool is empty; frame 1 is retried next time.
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 32), 1);
    assert_eq!(stats(&port).rx_nobuf, 1);
    assert_eq!(port.rx_pending(), 3);
    give_back(&mut pool, &mut out);
    // Frame 1 does not fit (rx_errors); frame 2 takes the buffer; frame 3 waits.
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 32), 1);
    assert_eq!(seqs(&out), vec![2]);
    give_back(&mut pool, &mut out);
    assert_eq!(port.rx_burst(0, &mut pool, &mut out, 32), 1);
    assert_eq!(seqs(&out), vec![3]);
    let s = stats(&port);
    assert_eq!((s.rx_pkts, s.rx_errors, s.rx_nobuf), (3, 1, 2));
}

#[test]
fn memory_pair_is_a_cable() {
    let (mut a, mut b) = MemoryPort::pair(4);
    let mut pool = HeapPool::new(8, 2048);
    let mut v = vec![pool.alloc_from(&frame(1, 7, 60)).unwrap()];
    assert_eq!(a.tx_burst(0, &mut v, &mut pool), 1);
    assert_eq!(b.rx_burst(0, &mut pool, &mut v, 32), 1);
    assert_eq!(seqs(&v), vec![7]);
    assert_eq!(b.tx_burst(0, &mut v, &mut pool), 1);
    assert_eq!(a.rx_burst(0, &mut pool, &mut v, 32), 1);
    assert_eq!(seqs(&v), vec![7]);
    give_back(&mut pool, &mut v);
    assert!(!Port::<HeapPool>::rx_exhausted(&a));
    drop(b);
    assert!(Port::<HeapPool>::rx_exhausted(&a));
}

/// Forwards every frame to the port named by its first byte.
struct Fwd;

impl<P: BufPool> Pipeline<P> for Fwd {
    type Command = ();

    fn ingress(&mut self, _ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        let Some(&port) = pkt.data().first() else {
            return Action::Drop(longhaul_dataplane::counters::DropReason::Truncated);
        };
        pkt.meta_mut().egress_port = port as u16;
        Action::Forward
    }
}

fn spec_port(id: u16, rate_bps: u64) -> PortSpec {
    PortSpec {
        info: PortInfo {
            id,
            name: format!("p{id}"),
            mac: [2, 0, 0, 0, 0, id as u8],
            rate_bps,
            mtu: 9000,
        },
        tm: TmConfig {
            rate_bps,
            ..TmConfig::default()
        },
    }
}

/// The live driver's loop, on a fake clock: port 0 replays a paced capture (and records what it
/// transmits to a pcap), port 1 is a memory port whose peer injects frames for port 0.
#[test]
fn live_loop_from_pcap_to_memory_and_back() {
    let dir = tmpdir("live");
    const N: usize = 20;
    const GAP: Nanos = 1_000;
    const START: Nanos = 10_000;
    const STEP: Nanos = 250;
    let offs: Vec<Nanos> = (0..N as u64).map(|i| i * GAP).collect();
    let rx = capture(&dir, &offs, 100);
    let tx = dir.join("out.pcap");
    let pcap = PcapPort::open(Some(&rx), Some(&tx), false, true, START).unwrap();
    let (mem, peer) = MemoryPort::new(64);
    let mut ports: Vec<Box<dyn Port<HeapPool>>> = vec![Box::new(pcap), Box::new(mem)];
    let spec = SwitchSpec {
        ports: vec![spec_port(0, 10 * GBPS), spec_port(1, 10 * GBPS)],
        pfc: None,
        admission: Default::default(),
        shared_buffer_bytes: 1 << 20,
        recirc: None,
        emit_capacity: 16,
        command_ring: 4,
        punt_ring: 4,
    };
    let mut sw = Switch::new(spec, HeapPool::new(64, 2048), Fwd);
    let back: Vec<Vec<u8>> = (0..5).map(|i| frame(0, 100 + i, 80)).collect();

    let mut burst: Vec<HeapBuf> = Vec::with_capacity(32);
    let mut txv: Vec<HeapBuf> = Vec::with_capacity(32);
    let mut arrived: Vec<(Nanos, Vec<u8>)> = Vec::new();
    let mut now: Nanos = 0;
    let mut injected = false;
    for _ in 0..10_000 {
        if !injected && now >= 12_000 {
            for f in &back {
                assert!(peer.inject(f));
            }
            injected = true;
        }
        for (idx, port) in ports.iter_mut().enumerate() {
            port.rx_burst(now, sw.pool(), &mut burst, 32);
            sw.receive_burst(idx, now, &mut burst);
        }
        sw.poll(now);
        for (idx, port) in ports.iter_mut().enumerate() {
            sw.transmit(idx, now, 32, &mut |p| txv.push(p));
            port.tx_burst(now, &mut txv, sw.pool());
        }
        while let Some(f) = peer.take() {
            arrived.push((now, f));
        }
        let idle = injected
            && peer.rx_len() == 0
            && ports[0].rx_exhausted()
            && sw.next_event(now).is_none();
        if idle {
            break;
        }
        now += STEP;
    }
    for p in ports.iter_mut() {
        p.flush().unwrap();
    }

    // Every captured frame reached port 1, in order, no earlier than its paced time and within
    // one clock step plus one serialization time of it.
    assert_eq!(arrived.len(), N);
    let ser = serialization_ns(100 + 24, 10 * GBPS);
    for (i, (t, f)) in arrived.iter().enumerate() {
        assert_eq!(f, &frame(1, i as u8, 100));
        let due = START + i as Nanos * GAP;
        assert!(
            *t >= due && *t < due + STEP + ser,
            "frame {i} at {t}, due {due}"
        );
    }
    // What the peer injected left port 0 into the tx pcap, timestamped by the fake clock.
    let recs = read_pcap(&tx).unwrap();
    assert_eq!(
        recs.iter().map(|r| r.data.clone()).collect::<Vec<_>>(),
        back
    );
    assert!(recs.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
    assert!(recs[0].ts_ns >= 12_000);

    let s0 = ports[0].stats();
    assert_eq!((s0.rx_pkts, s0.tx_pkts, s0.tx_errors), (N as u64, 5, 0));
    let s1 = ports[1].stats();
    assert_eq!((s1.rx_pkts, s1.tx_pkts), (5, N as u64));
    assert_eq!(sw.port_stats(1).unwrap().tx_pkts, N as u64);
    assert_eq!(
        sw.pool().available(),
        64,
        "every buffer went back to the pool"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
