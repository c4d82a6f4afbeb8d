//! MLCC end to end on virtual time: the INT source on an intra-DC switch
//! (configs/mlcc-tor.toml) and both DCI roles (configs/mlcc-dci.toml): Switch-INT feedback and
//! the INT strip (section 3.2.1); the PFQ paced at the initial rate then at the receiver's
//! R_credit, C_D into the data, R_DQM into the ACKs (sections 3.2.2, 3.3.1); the shared queue,
//! full PFQs, idle reclaim; config errors.

use longhaul_control::config::Config;
use longhaul_dataplane::engine::{Pipeline, Switch};
use longhaul_dataplane::packet::{HeapBuf, HeapPool, PacketBuf};
use longhaul_dataplane::replay::{Emitted, Harness};
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::mlcc::{self, Mceth, MlccHop, MCETH_CREDIT, MCETH_DQM};
use longhaul_dataplane::wire::roce::{
    build_roce_v4, opcode, AckSpec, Bth, BthRepr, RoceAddrs, Syndrome,
};
use longhaul_dataplane::wire::{icrc, int};
use longhaul_pipelines::baseline::Baseline;
use longhaul_pipelines::mlcc::dci::MlccDci;
use longhaul_pipelines::mlcc::FlowKey;
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::net::Ipv4Addr;
use std::path::Path;

const DC0: usize = 0;
const WAN0: usize = 1;
const DC0_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const WAN0_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const SPINE: [u8; 6] = [2, 0, 0, 0, 0x10, 1];
const PEER: [u8; 6] = [2, 0, 0, 0, 0x20, 1];
const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
const REMOTE: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 7);
const INT_PORT: u16 = 5000;
const RESPONDER_QPN: u32 = 0x0abc;

fn config(file: &str, edit: impl Fn(String) -> String) -> Config {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(file);
    let text = edit(std::fs::read_to_string(&p).unwrap());
    longhaul_pipelines::parse_config(&text, &p).expect("config")
}

fn dci(edit: impl Fn(String) -> String) -> Harness<HeapPool, MlccDci> {
    let cfg = config("mlcc-dci.toml", edit);
    Harness::new(Switch::new(
        switch_spec(&cfg),
        heap_pool(&cfg),
        MlccDci::new(&cfg),
    ))
}

fn counter<L: Pipeline<HeapPool>>(h: &Harness<HeapPool, L>, name: &str) -> u64 {
    let mut v = None;
    h.sw.pipeline().counters(&mut |n, x| {
        if n == name {
            v = Some(x)
        }
    });
    v.unwrap_or_else(|| panic!("no counter {name}"))
}

/// RDMA WRITE MIDDLE of `payload` bytes, no INT.
fn roce(
    smac: [u8; 6],
    dmac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    psn: u32,
    payload: usize,
) -> Vec<u8> {
    let a = RoceAddrs {
        src_mac: MacAddr(smac),
        dst_mac: MacAddr(dmac),
        src_ip: src,
        dst_ip: dst,
        udp_sport: 49200,
        dscp: 26,
        ecn: 2,
    };
    let bth = BthRepr {
        opcode: opcode::RC_RDMA_WRITE_MIDDLE,
        pkey: 0xffff,
        dest_qp: RESPONDER_QPN,
        psn,
        ..BthRepr::default()
    };
    let mut b = vec![0u8; payload + 128];
    let n = build_roce_v4(&mut b, &a, &bth, &vec![0x5a; payload]).unwrap();
    b.truncate(n);
    b
}

fn hop(i: u32) -> MlccHop {
    MlccHop {
        node_id: i,
        queue_id: 3,
        qlen: 10_000 * i,
        ts: 1_000 * i as u64,
        tx_bytes: 1 << (20 + i),
        rate_mbps: 100_000,
    }
}

/// `f` with the MLCC INT and `hops` pushed (hop 1 first, so the last is newest).
fn with_int(f: &[u8], hops: u32) -> Vec<u8> {
    let mut b = HeapBuf::from_bytes(f);
    int::insert_int_md(&mut b, 14, &mlcc::int_config(INT_PORT, 3, None)).unwrap();
    for i in 1..=hops {
        mlcc::push(&mut b, 14, &hop(i)).unwrap();
    }
    b.data().to_vec()
}

fn strip(f: &[u8]) -> Vec<u8> {
    let mut b = HeapBuf::from_bytes(f);
    int::strip_int(&mut b, 14).unwrap();
    b.data().to_vec()
}

/// The receiver's ACK (LOCAL -> REMOTE) with the credit fields.
fn ack(psn: u32, c_r: u16, r_credit_kbps: u32) -> Vec<u8> {
    let a = RoceAddrs {
        src_mac: MacAddr(SPINE),
        dst_mac: MacAddr(DC0_MAC),
        src_ip: LOCAL,
        dst_ip: REMOTE,
        udp_sport: 49300,
        dscp: 26,
        ecn: 0,
    };
    let spec = AckSpec {
        dest_qp: 0x77, // the requester's QP
        psn,
        syndrome: Syndrome::ACK_NO_CREDIT,
        msn: 0,
        pkey: 0xffff,
    };
    let m = Mceth {
        flags: MCETH_CREDIT,
        qpn: RESPONDER_QPN,
        c_r,
        r_credit_kbps,
        r_dqm_kbps: 0,
    };
    let mut b = [0u8; 128];
    let n = mlcc::build_ack_v4(&mut b, &a, &spec, &m).unwrap();
    b[..n].to_vec()
}

fn on(out: &[Emitted], idx: usize) -> Vec<&Emitted> {
    out.iter().filter(|e| e.port_idx == idx).collect()
}

/// Section 3.2.1: data leaving the DC with two INT hops goes on to the WAN without its INT
/// (byte for byte the original but for the route: UDP 4791, ICRC valid), and a Switch-INT goes
/// back to the sender carrying both hops, newest first; with psn_stride 4 only every fourth PSN
/// makes one.
#[test]
fn sender_side_feedback_and_strip() {
    let mut h = dci(|t| t.replace("psn_stride = 1 ", "psn_stride = 4 "));
    let n = 8;
    for psn in 0..n {
        let f = with_int(&roce(SPINE, DC0_MAC, LOCAL, REMOTE, psn, 1000), 2);
        h.put(DC0, 1_000 + psn as u64 * 1_000, &f);
    }
    h.run_to_idle();
    let out = h.take();
    let wan = on(&out, WAN0);
    assert_eq!(wan.len(), n as usize);
    for (psn, e) in wan.iter().enumerate() {
        let orig = roce(SPINE, DC0_MAC, LOCAL, REMOTE, psn as u32, 1000);
        let f = &e.data;
        assert_eq!(f.len(), orig.len(), "INT stripped");
        assert_eq!(&f[0..6], &PEER);
        assert_eq!(&f[6..12], &WAN0_MAC);
        assert_eq!(&f[36..38], &4791u16.to_be_bytes());
        assert_eq!(icrc::verify(f, 14), Ok(true));
        assert_eq!(&f[34..], &orig[34..], "UDP and RoCE bytes as sent");
    }
    let fb = on(&out, DC0);
    let psns: Vec<u32> = fb
        .iter()
        .map(|e| {
            let f = &e.data;
            assert_eq!(icrc::verify(f, 14), Ok(true), "Switch-INT ICRC");
            assert_eq!(&f[0..6], &SPINE, "routed back toward the sender");
            assert_eq!(&f[26..30], &REMOTE.octets());
            assert_eq!(&f[30..34], &LOCAL.octets());
            assert_eq!(f[15] >> 2, 48);
            let s = mlcc::parse_switch_int(f, 14, 42).unwrap();
            assert_eq!(s.dest_qp, RESPONDER_QPN);
            assert_eq!(
                (s.hops(), s.hop(0), s.hop(1)),
                (2, Some(hop(2)), Some(hop(1)))
            );
            s.data_psn
        })
        .collect();
    assert_eq!(psns, vec![0, 4]);
    assert_eq!(counter(&h, "mlcc.feedback.switch_ints"), 2);
    assert_eq!(counter(&h, "mlcc.int_stripped"), n as u64);
}

/// Departure times of the WAN -> DC data on dc0, and the frames.
fn data_out(out: &[Emitted]) -> Vec<&Emitted> {
    on(out, DC0)
        .into_iter()
        .filter(|e| mlcc::locate(&e.data, 14, INT_PORT).is_ok())
        .collect()
}

/// Sections 3.2.2 and 3.3.1: a burst from the WAN at line rate leaves dc0 paced at the initial
/// rate (25 Gb/s), each packet with the MLCC INT (no C_D yet) and the DCI's hop; the receiver's
/// ACK (C_R 1, R_credit 10 Gb/s) goes on to the WAN with R_DQM written (ICRC valid), and from
/// then on the flow is paced at 10 Gb/s and carries C_D = 1.
#[test]
fn pfq_paced_by_initial_rate_then_r_credit() {
    let mut h = dci(|t| t);
    let frame = roce(PEER, WAN0_MAC, REMOTE, LOCAL, 0, 1000);
    let len = frame.len() as u64;
    let wire = |l: u64| (l + 24) * 8; // bits on a 100G wire incl. preamble, IFG, FCS
    for psn in 0..20u32 {
        let f = roce(PEER, WAN0_MAC, REMOTE, LOCAL, psn, 1000);
        h.put(WAN0, 10_000 + psn as u64 * wire(len) / 100, &f);
    }
    // Not run_to_idle: that would run on to the idle timeout and reclaim the PFQ.
    h.advance_to(100_000);
    let out = h.take();
    let d = data_out(&out);
    assert_eq!(d.len(), 20);
    // The PFQ's bucket starts full (one port MTU, 4200 bytes): with what it earns while the
    // burst arrives, the first 5 frames go at line rate.
    let burst = 5;
    assert!(
        d[burst].ts - d[burst - 1].ts > 300,
        "paced from frame {burst} on"
    );
    for w in d.windows(2).skip(burst) {
        let gap = w[1].ts - w[0].ts;
        let want = len * 8 * 1_000_000_000 / 25_000_000_000;
        assert!(
            gap.abs_diff(want) <= 1,
            "gap {gap} ns, want {want} (25 Gb/s)"
        );
    }
    for (i, e) in d.iter().enumerate() {
        let m = mlcc::locate(&e.data, 14, INT_PORT).unwrap();
        assert_eq!(m.c_d, None, "no C_D before the receiver's first ACK");
        assert_eq!(m.hops, 1);
        let hp = mlcc::hop(&e.data, &m, 0).unwrap();
        assert_eq!((hp.node_id, hp.rate_mbps), (100, 100_000));
        assert_eq!(hp.ts, e.ts, "egress timestamp");
        let psn = Bth::new_checked(&e.data[m.bth_off..]).unwrap().psn();
        assert_eq!(psn, i as u32, "in order");
        assert_eq!(icrc::verify(&strip(&e.data), 14), Ok(true));
    }
    // The receiver answers: C_R 1, R_credit 10 Gb/s.
    let t = h.now() + 1_000;
    h.put(DC0, t, &ack(19, 1, 10_000_000));
    h.advance_to(t + 10_000);
    let out = h.take();
    let a = on(&out, WAN0);
    assert_eq!(a.len(), 1);
    assert_eq!(
        icrc::verify(&a[0].data, 14),
        Ok(true),
        "ACK ICRC after R_DQM"
    );
    let (_, m) = mlcc::locate_mceth(&a[0].data, 14).unwrap();
    assert_eq!(counter(&h, "mlcc.credit.acks_no_flow"), 0);
    assert_eq!(counter(&h, "mlcc.credit.acks"), 1);
    assert_eq!(m.flags, MCETH_CREDIT | MCETH_DQM);
    assert_eq!((m.c_r, m.r_credit_kbps), (1, 10_000_000));
    // Empty PFQ: D_pre = 0, R_DQM = R_credit (1 + D_t/theta); one token step: dw = -1.
    let step_kbps = 1000.0 * 8e9 / 6e6 / 1000.0;
    assert_eq!(m.r_dqm_kbps, (10_000_000.0 - step_kbps) as u32);
    let key = FlowKey {
        src: u128::from(REMOTE.to_ipv6_mapped()),
        dst: u128::from(LOCAL.to_ipv6_mapped()),
        qpn: RESPONDER_QPN,
    };
    let rx = h.sw.pipeline().receiver().unwrap();
    assert_eq!(rx.pfq().rate(&key), Some(10_000_000_000));
    // More data: paced at 10 Gb/s, with C_D = 1.
    let t = h.now() + 1_000;
    for psn in 20..30u32 {
        let f = roce(PEER, WAN0_MAC, REMOTE, LOCAL, psn, 1000);
        h.put(WAN0, t + (psn as u64 - 20) * wire(len) / 100, &f);
    }
    h.run_to_idle();
    let out = h.take();
    let d = data_out(&out);
    assert_eq!(d.len(), 10);
    for w in d.windows(2).skip(burst) {
        let gap = w[1].ts - w[0].ts;
        let want = len * 8 * 1_000_000_000 / 10_000_000_000;
        assert!(
            gap.abs_diff(want) <= 1,
            "gap {gap} ns, want {want} (10 Gb/s)"
        );
    }
    for e in &d {
        assert_eq!(mlcc::locate(&e.data, 14, INT_PORT).unwrap().c_d, Some(1));
    }
    assert_eq!(counter(&h, "mlcc.credit.epochs"), 1);
    assert_eq!(counter(&h, "mlcc.pfq.enqueued"), 30);
    assert_eq!(counter(&h, "mlcc.pfq.dequeued"), 30);
}

/// A packet that finds its flow's PFQ empty, with room in the PFQ's rate, goes on at once
/// (`Receiver::pass_through`): it keeps its place in arrival order before a packet that came
/// after it in the same instant and is not held (here plain UDP), where the PFQ used to hold it
/// until the end of the burst; it is still counted through its PFQ and carries the DCI's INT.
#[test]
fn idle_pfq_lets_a_packet_through_in_arrival_order() {
    let mut h = dci(|t| t);
    // The flow's PFQ is made by its first packet, which is then sent; the PFQ stays (idle).
    h.put(WAN0, 10_000, &roce(PEER, WAN0_MAC, REMOTE, LOCAL, 0, 1000));
    h.advance_to(50_000);
    assert_eq!(data_out(&h.take()).len(), 1);
    // Same instant, same burst: the flow's next packet, then plain UDP to the same host.
    pfq_packet_then_udp(&mut h, 60_000, 100_000);
    assert_eq!(counter(&h, "mlcc.pfq.enqueued"), 2);
    assert_eq!(counter(&h, "mlcc.pfq.dequeued"), 2);
    assert_eq!(h.sw.pipeline().receiver().unwrap().pfq().held_pkts(), 0);
}

/// At `at`, in one burst, the flow's next packet (PSN 1) and then a plain UDP packet to the same
/// host; by `until` both are out of DC0, the PFQ's packet first (with INT), then the UDP one.
fn pfq_packet_then_udp(h: &mut Harness<HeapPool, MlccDci>, at: u64, until: u64) {
    let a = roce(PEER, WAN0_MAC, REMOTE, LOCAL, 1, 1000);
    let mut b = roce(PEER, WAN0_MAC, REMOTE, LOCAL, 2, 1000);
    b[36..38].copy_from_slice(&4792u16.to_be_bytes()); // UDP destination: not RoCE
    h.put(WAN0, at, &a);
    h.put(WAN0, at, &b);
    h.advance_to(until);
    let out = h.take();
    let d = on(&out, DC0);
    assert_eq!(d.len(), 2);
    let first = mlcc::locate(&d[0].data, 14, INT_PORT).expect("the PFQ's packet first, with INT");
    assert_eq!(
        Bth::new_checked(&d[0].data[first.bth_off..]).unwrap().psn(),
        1
    );
    assert_eq!(
        &d[1].data[36..38],
        &4792u16.to_be_bytes(),
        "then the UDP packet"
    );
}

/// The idle scan being due does not hold a packet that finds its PFQ empty with room in its
/// rate: at the scan's instant (the harness takes the instant's frames before the switch's
/// timers, as a live worker takes a burst before its poll) the flow's packet still goes on
/// before the plain UDP packet behind it, where a due scan used to hold it to the end of the
/// burst; the scan runs after it, and reclaims the PFQ only once it is idle again.
#[test]
fn due_idle_scan_does_not_hold_a_packet_at_its_idle_pfq() {
    // Scanned every 25 us: the first packet at 10 us makes the PFQ and the next scan 35 us.
    let mut h = dci(|t| t.replace("idle_timeout_ns = 10000000 ", "idle_timeout_ns = 100000 "));
    h.put(WAN0, 10_000, &roce(PEER, WAN0_MAC, REMOTE, LOCAL, 0, 1000));
    h.advance_to(20_000);
    assert_eq!(data_out(&h.take()).len(), 1);
    assert_eq!(h.sw.pipeline_deadline(), Some(35_000), "the scan is next");
    pfq_packet_then_udp(&mut h, 35_000, 40_000);
    // The scan ran at 35 us (the next one is 25 us on) and left the PFQ (seen at 35 us).
    assert_eq!(h.sw.pipeline_deadline(), Some(60_000));
    assert_eq!(counter(&h, "mlcc.pfq.in_use"), 1);
    assert_eq!(counter(&h, "mlcc.pfq.reclaimed"), 0);
    assert_eq!(counter(&h, "mlcc.pfq.enqueued"), 2);
    assert_eq!(counter(&h, "mlcc.pfq.dequeued"), 2);
    h.run_to_idle();
    assert_eq!(counter(&h, "mlcc.pfq.reclaimed"), 1);
    assert!(h.now() >= 135_000, "{}", h.now());
}

/// With one PFQ, a second flow takes the shared queue (counted) and is not paced; a full PFQ
/// drops and counts; every packet is accounted for.
#[test]
fn shared_queue_and_full_pfq() {
    let mut h = dci(|t| {
        t.replace("max_flows = 64 ", "max_flows = 1 ")
            .replace("queue_pkts = 4096 ", "queue_pkts = 4 ")
    });
    let other = Ipv4Addr::new(10, 1, 0, 8);
    for psn in 0..12u32 {
        let t = 10_000 + psn as u64 * 100;
        h.put(WAN0, t, &roce(PEER, WAN0_MAC, REMOTE, LOCAL, psn, 1000));
        h.put(WAN0, t + 50, &roce(PEER, WAN0_MAC, other, LOCAL, psn, 1000));
    }
    h.run_to_idle();
    let out = h.take();
    let d = on(&out, DC0);
    let from = |ip: Ipv4Addr| d.iter().filter(|e| e.data[26..30] == ip.octets()).count() as u64;
    assert_eq!(from(other), 12, "the shared queue loses nothing here");
    assert_eq!(counter(&h, "mlcc.pfq.shared"), 12);
    let full = counter(&h, "mlcc.pfq.queue_full");
    assert!(
        full > 0,
        "a 4-packet PFQ at 25 Gb/s overflows under 100 Gb/s input"
    );
    assert_eq!(from(REMOTE) + full, 12);
    assert_eq!(
        h.sw.stats()
            .drops
            .get(longhaul_dataplane::counters::DropReason::QueueFull),
        full
    );
    assert_eq!(h.sw.buffered_packets(), 0);
}

/// An empty PFQ with no traffic for idle_timeout_ns goes back to the pool.
#[test]
fn idle_pfq_is_reclaimed() {
    let mut h = dci(|t| t.replace("idle_timeout_ns = 10000000 ", "idle_timeout_ns = 100000 "));
    h.put(WAN0, 1_000, &roce(PEER, WAN0_MAC, REMOTE, LOCAL, 0, 1000));
    h.advance_to(50_000);
    assert_eq!(counter(&h, "mlcc.pfq.in_use"), 1);
    h.run_to_idle();
    assert_eq!(counter(&h, "mlcc.pfq.in_use"), 0);
    assert_eq!(counter(&h, "mlcc.pfq.reclaimed"), 1);
    assert!(
        h.now() >= 101_000 && h.now() <= 1_000 + 100_000 + 25_000 + 2_000,
        "{}",
        h.now()
    );
}

/// Section 3.2.1 on an intra-DC switch (configs/mlcc-tor.toml): inter-DC RoCE data leaving up0
/// becomes an INT packet with this switch's hop; host-to-host traffic and non-data are left
/// alone; stripping restores the original ICRC.
#[test]
fn tor_is_the_int_source() {
    let cfg = config("mlcc-tor.toml", |t| t);
    let mut h = Harness::new(Switch::new(
        switch_spec(&cfg),
        heap_pool(&cfg),
        Baseline::new(&cfg),
    ));
    let tor_mac = [2, 0, 0, 0, 0x30, 1];
    let host = [2, 0, 0, 0, 0x40, 1];
    let f = roce(host, tor_mac, LOCAL, REMOTE, 3, 1000);
    let local2 = Ipv4Addr::new(10, 0, 1, 9);
    let g = roce(host, tor_mac, LOCAL, local2, 4, 1000);
    h.put(0, 1_000, &f);
    h.put(0, 1_100, &g);
    h.run_to_idle();
    let out = h.take();
    let up = on(&out, 2);
    assert_eq!(up.len(), 1);
    let e = up[0];
    let m = mlcc::locate(&e.data, 14, INT_PORT).unwrap();
    assert_eq!((m.hops, m.c_d), (1, None));
    let hp = mlcc::hop(&e.data, &m, 0).unwrap();
    assert_eq!((hp.node_id, hp.rate_mbps, hp.ts), (1, 100_000, e.ts));
    assert_eq!(hp.tx_bytes, 0, "the first frame up0 sends");
    let s = strip(&e.data);
    assert_eq!(icrc::verify(&s, 14), Ok(true));
    assert_eq!(&s[34..], &f[34..]);
    let h1 = on(&out, 1);
    assert_eq!(h1.len(), 1);
    assert_eq!(&h1[0].data[34..], &g[34..], "host to host: no INT");
    assert_eq!(counter(&h, "int.sourced"), 1);
}

fn errors(file: &str, edit: impl Fn(String) -> String) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(file);
    let text = edit(std::fs::read_to_string(&p).unwrap());
    match longhaul_pipelines::parse_config_all(&text, &p) {
        Ok(_) => String::new(),
        Err(e) => e
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

#[test]
fn config_errors_name_the_key() {
    let e = errors("mlcc-dci.toml", |t| {
        t.replace(
            "ports = [\"dc0\"]                #",
            "ports = [\"dc0\", \"wan0\"] #",
        )
    });
    assert!(
        e.contains("int.ports") && e.contains("not one of mlcc.dc_ports"),
        "{e}"
    );
    let e = errors("mlcc-dci.toml", |t| {
        t.replace("int_udp_port = 5000", "int_udp_port = 5001")
    });
    assert!(
        e.contains("mlcc.int_udp_port") && e.contains("differs from [int]"),
        "{e}"
    );
    let e = errors("mlcc-dci.toml", |t| {
        t.replace("alpha = 0.5 ", "alpha = 1.5 ")
    });
    assert!(e.contains("mlcc.receiver.alpha"), "{e}");
    let e = errors("mlcc-dci.toml", |t| {
        t.replace("theta_ns = 18000000 ", "theta_ns = 0 ")
    });
    assert!(e.contains("mlcc.receiver.theta_ns"), "{e}");
    let e = errors("mlcc-tor.toml", |t| t.replace("switch_id = 1\n", ""));
    assert!(e.contains("int.switch_id") && e.contains("required"), "{e}");
    let e = errors("mlcc-tor.toml", |t| {
        t.replace("udp_port = 5000", "udp_port = 4791")
    });
    assert!(e.contains("int.udp_port"), "{e}");
    let e = errors("mlcc-dci.toml", |t| {
        let (a, b) = (t.find("\n[int]\n").unwrap(), t.find("\n[mlcc]\n").unwrap());
        format!("{}{}", &t[..a], &t[b..])
    });
    assert!(
        e.contains("mlcc.receiver") && e.contains("add an [int] table"),
        "{e}"
    );
    let e = errors("mlcc-dci.toml", |t| {
        let cut = t.find("[mlcc.feedback]").unwrap();
        t[..cut].to_string()
    });
    assert!(
        e.contains("[mlcc.feedback]") && e.contains("[mlcc.receiver]"),
        "{e}"
    );
}

/// The receiver's ACK to `remote` (LOCAL -> remote) with the credit fields.
fn ack_to(remote: Ipv4Addr, psn: u32, c_r: u16, r_credit_kbps: u32) -> Vec<u8> {
    let mut f = ack(psn, c_r, r_credit_kbps);
    // Only the destination differs from `ack`'s: the IPv4 checksum and the ICRC follow.
    f[30..34].copy_from_slice(&remote.octets());
    f[24..26].copy_from_slice(&[0, 0]);
    let sum = longhaul_dataplane::wire::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    icrc::fill(&mut f, 14).unwrap();
    f
}

/// What a run sent (port, time, bytes) and every counter, as text.
type MlccRun = (Vec<(usize, u64, Vec<u8>)>, Vec<String>);

/// One run of [`release_at_ingress_sends_what_the_hold_sends`]: the frames on the wire and every
/// counter (the pipeline's, the switch's, each port's and traffic manager's, PFC's).
fn mlcc_run(events: &[(u8, u8, u8, u16)], release: bool) -> MlccRun {
    // dc0 at 10 Gb/s under PFQs paced at 25 Gb/s: the DC port backlogs, so packets are held as
    // well as passed through; a small XOFF: PFC to the WAN port from what is accounted to it.
    let mut h = dci(|t| {
        t.replacen("rate_gbps = 100.0", "rate_gbps = 10.0", 1)
            .replace("max_flows = 64 ", "max_flows = 3 ")
            .replace("queue_pkts = 4096 ", "queue_pkts = 6 ")
            .replace("xoff_bytes = 524288", "xoff_bytes = 3000")
            .replace("xon_bytes = 458752", "xon_bytes = 1500")
            .replace("port_backlog_bytes = 65536 ", "port_backlog_bytes = 6000 ")
            .replace("psn_stride = 1 ", "psn_stride = 2 ")
    });
    h.sw.pipeline_mut()
        .receiver_mut()
        .unwrap()
        .set_release_at_ingress(release);
    let mut t = 10_000u64;
    let mut psn = 0u32;
    for &(kind, flow, gap, len) in events {
        t += gap as u64 * 40;
        psn += 1;
        let remote = Ipv4Addr::new(10, 1, 0, 7 + flow % 4);
        let payload = 64 + len as usize % 1200;
        match kind % 10 {
            0..=5 => h.put(WAN0, t, &roce(PEER, WAN0_MAC, remote, LOCAL, psn, payload)),
            6 => {
                let mut f = roce(PEER, WAN0_MAC, remote, LOCAL, psn, payload);
                f[36..38].copy_from_slice(&4792u16.to_be_bytes()); // not RoCE
                h.put(WAN0, t, &f);
            }
            7 => h.put(
                DC0,
                t,
                &ack_to(
                    remote,
                    psn,
                    1 + (len % 3),
                    2_000_000 + (len as u32 % 30) * 1_000_000,
                ),
            ),
            _ => h.put(
                DC0,
                t,
                &with_int(&roce(SPINE, DC0_MAC, LOCAL, remote, psn, payload), 2),
            ),
        }
    }
    h.run_to_idle();
    let out = h
        .take()
        .into_iter()
        .map(|e| (e.port_idx, e.ts, e.data))
        .collect();
    let sw = &h.sw;
    let mut c = Vec::new();
    Pipeline::<HeapPool>::counters(sw.pipeline(), &mut |n, v| c.push(format!("{n} {v}")));
    c.push(format!("{:?}", sw.stats()));
    for idx in 0..2 {
        c.push(format!("{:?}", sw.port_stats(idx).unwrap()));
        let tm = sw.tm(idx).unwrap();
        c.push(format!("{:?}", tm.port_stats()));
        for k in 0..8 {
            c.push(format!("{:?}", tm.class_stats(k)));
        }
    }
    c.push(format!("{:?}", sw.pfc().map(|p| p.stats())));
    (out, c)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// A packet that passes its idle PFQ goes on from the ingress (`Action::Release`) instead of
    /// through the engine's hold and emit list (`Receiver::pass_through`, the general path): the
    /// same frames at the same times, every counter the same, over random WAN -> DC data of a
    /// few flows (more flows than PFQs, small PFQs that fill), instants with several packets,
    /// non-RoCE packets among them, the receiver's ACKs changing the PFQs' rates, and DC -> WAN
    /// data whose Switch-INT goes to the DC port between them.
    #[test]
    fn release_at_ingress_sends_what_the_hold_sends(
        events in proptest::collection::vec(
            (0u8..10, 0u8..5, proptest::prop_oneof![proptest::strategy::Just(0u8), 0u8..60], 0u16..4000),
            1..160,
        )
    ) {
        let held = mlcc_run(&events, false);
        let released = mlcc_run(&events, true);
        proptest::prop_assert!(held.0 == released.0, "the frames differ");
        proptest::prop_assert_eq!(held.1, released.1);
    }
}

/// The comparison above sees the paths it compares: in a run of it, packets pass through, are
/// held, and PFC pauses the WAN port.
#[test]
fn release_at_ingress_comparison_exercises_both_paths() {
    let events: Vec<(u8, u8, u8, u16)> = (0..300u32)
        .map(|i| {
            (
                (i % 10) as u8,
                (i % 5) as u8,
                [0u8, 0, 3, 0, 40][(i % 5) as usize],
                (i * 37 % 4000) as u16,
            )
        })
        .collect();
    let (out, c) = mlcc_run(&events, true);
    assert!(!out.is_empty());
    let get = |name: &str| {
        c.iter()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap()
    };
    assert!(get("mlcc.pfq.enqueued") > 0);
    assert!(get("mlcc.pfq.backlogged") > 0, "{c:?}");
    assert!(get("mlcc.pfq.shared") > 0, "{c:?}");
}
