//! The Reflex ESW pipeline end to end on virtual time (configs/reflex-esw.toml): NSF's
//! pseudo-ACKs from the state machine (section III-C), NDT's Normal / Controlled queues with WRR
//! N_throttle:1, no reordering across them, the egress timestamp, and the pause (section III-D).

use longhaul_control::config::Config;
use longhaul_dataplane::engine::{Action, Ctx, Pipeline, Switch, TableCounters};
use longhaul_dataplane::packet::{HeapBuf, HeapPool};
use longhaul_dataplane::replay::{Emitted, Harness};
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::reflex::{self, ReflexHop, FLAG_ECHO, FLAG_NSF};
use longhaul_dataplane::wire::roce::{
    build_ack_v4, build_roce_v4, opcode, AckSpec, Bth, BthRepr, RoceAddrs, Syndrome,
};
use longhaul_dataplane::wire::{icrc, int};
use longhaul_pipelines::reflex::esw::ReflexEsw;
use longhaul_pipelines::reflex::ndt::FlowState;
use longhaul_pipelines::reflex::nsf::{FlowFsm, NsfParams};
use longhaul_pipelines::reflex::FlowKey;
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::path::Path;

const DC0: usize = 0;
const WAN0: usize = 2;
const WAN1: usize = 3;
const DC0_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const WAN0_MAC: [u8; 6] = [2, 0, 0, 0, 0, 3];
const WAN1_MAC: [u8; 6] = [2, 0, 0, 0, 0, 4];
const HOST_NH: [u8; 6] = [2, 0, 0, 0, 0x10, 1];
const PEER_NH: [u8; 6] = [2, 0, 0, 0, 0x20, 1];
const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 5);
const REMOTE: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 7);
const INT_PORT: u16 = 5000;

fn config(edit: impl Fn(String) -> String) -> Config {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/reflex-esw.toml");
    let text = edit(std::fs::read_to_string(&p).unwrap());
    longhaul_pipelines::parse_config(&text, &p).expect("config")
}

fn harness(cfg: &Config) -> Harness<HeapPool, ReflexEsw> {
    Harness::new(Switch::new(
        switch_spec(cfg),
        heap_pool(cfg),
        ReflexEsw::new(cfg),
    ))
}

fn counter(h: &Harness<HeapPool, ReflexEsw>, name: &str) -> u64 {
    let mut v = None;
    <ReflexEsw as Pipeline<HeapPool>>::counters(h.sw.pipeline(), &mut |n, x| {
        if n == name {
            v = Some(x)
        }
    });
    v.unwrap_or_else(|| panic!("no counter {name}"))
}

/// A Reflex data packet (RDMA WRITE MIDDLE, `payload` bytes) with the requester's hop.
#[allow(clippy::too_many_arguments)]
fn data(
    smac: [u8; 6],
    dmac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    req_qpn: u32,
    psn: u32,
    ts: u64,
    payload: usize,
) -> Vec<u8> {
    let a = RoceAddrs {
        src_mac: MacAddr(smac),
        dst_mac: MacAddr(dmac),
        src_ip: src,
        dst_ip: dst,
        udp_sport: 49152 + req_qpn as u16,
        dscp: 26,
        ecn: 2,
    };
    let bth = BthRepr {
        opcode: opcode::RC_RDMA_WRITE_MIDDLE,
        pkey: 0xffff,
        dest_qp: 0x80_0000 | req_qpn,
        psn,
        ..BthRepr::default()
    };
    let mut b = vec![0u8; payload + 128];
    let n = build_roce_v4(&mut b, &a, &bth, &vec![0xab; payload]).unwrap();
    let mut out = vec![0u8; n + reflex::INT_LEN];
    let hop = ReflexHop { ts, qpn: req_qpn };
    let m = reflex::insert_copy(&b[..n], 14, INT_PORT, hop, 0, &mut out).unwrap();
    out.truncate(m);
    out
}

/// The responder's ACK to `req_qpn` from LOCAL, reflecting timestamp `ts`.
fn ack(req_qpn: u32, psn: u32, ts: u64) -> Vec<u8> {
    let a = RoceAddrs {
        src_mac: MacAddr(HOST_NH),
        dst_mac: MacAddr(DC0_MAC),
        src_ip: LOCAL,
        dst_ip: REMOTE,
        udp_sport: 49152 + req_qpn as u16,
        dscp: 26,
        ecn: 0,
    };
    let spec = AckSpec {
        dest_qp: req_qpn,
        psn,
        syndrome: Syndrome::ACK_NO_CREDIT,
        msn: 0,
        pkey: 0xffff,
    };
    let mut b = [0u8; 128];
    let n = build_ack_v4(&mut b, &a, &spec).unwrap();
    let mut out = vec![0u8; 256];
    let hop = ReflexHop { ts, qpn: req_qpn };
    let m = reflex::insert_copy(&b[..n], 14, INT_PORT, hop, FLAG_ECHO, &mut out).unwrap();
    out.truncate(m);
    out
}

/// Flows `qa` and `qb` (WAN -> dc0) send their first packets at 10 and 11 us (drained), and
/// their ACKs at 40 us measure both Congested (an RTT_dst of about 30 us).
fn two_congested_flows(h: &mut Harness<HeapPool, ReflexEsw>, qa: u32, qb: u32) {
    h.put(
        WAN0,
        10_000,
        &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qa, 0, 1, 256),
    );
    h.put(
        WAN0,
        11_000,
        &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qb, 0, 1, 256),
    );
    h.run_to_idle();
    h.take();
    h.put(DC0, 40_000, &ack(qa, 0, 10_000));
    h.put(DC0, 40_000, &ack(qb, 0, 11_000));
}

fn on(out: &[Emitted], idx: usize) -> Vec<&Emitted> {
    out.iter().filter(|e| e.port_idx == idx).collect()
}

fn hop_of(f: &[u8]) -> (ReflexHop, u16, u32) {
    let v = reflex::locate(f, 14, INT_PORT).expect("a Reflex frame");
    let psn = Bth::new_checked(&f[v.bth_off..]).unwrap().psn();
    (v.hop, v.flags, psn)
}

/// Data from a local host through dc0 to wan0, 1 us apart, with near-source delays walking the
/// flow Silent -> Active -> Cooling -> Silent: pseudo-ACKs exactly where the state machine (the
/// unit-tested `FlowFsm`, docs/reflex.md's table) puts them, each a valid RoCE ACK to the
/// sender's QP, routed back through dc0, the data's timestamp reflected; the data itself goes on
/// unchanged but for the route.
#[test]
fn nsf_pseudo_acks_follow_the_state_machine() {
    let cfg = config(|t| t);
    let mut h = harness(&cfg);
    let t_src_us = [
        1u64, 3, 6, 8, 9, 12, 7, 8, 6, 9, 2, 1, 1, 7, 1, 1, 1, 1, 1, 1, 1, 1,
    ];
    let t0 = 1_000_000u64;
    for (i, d) in t_src_us.iter().enumerate() {
        let now = t0 + i as u64 * 1_000;
        let f = data(
            HOST_NH,
            DC0_MAC,
            LOCAL,
            REMOTE,
            0x123,
            i as u32,
            now - d * 1_000,
            1024,
        );
        h.put(DC0, now, &f);
    }
    // A second flow that never waits long: no pseudo-ACK.
    h.put(
        DC0,
        t0 + 500,
        &data(HOST_NH, DC0_MAC, LOCAL, REMOTE, 0x124, 0, t0, 1024),
    );
    h.run_to_idle();
    let out = h.take();
    let wan = on(&out, WAN0);
    assert_eq!(wan.len(), t_src_us.len() + 1);
    // The model: FlowFsm over T_src measured at each departure.
    let p = NsfParams {
        t_src_thresh_ns: 5_000,
        t_interval_ns: 5_000,
        n_cool: 5,
        flow_capacity: 16,
        flow_idle_timeout_ns: 10_000_000,
    };
    let mut fsm = FlowFsm::SILENT;
    let mut want = Vec::new();
    for e in &wan {
        let (hop, flags, psn) = hop_of(&e.data);
        assert_eq!(flags, 0);
        assert_eq!(&e.data[0..6], &PEER_NH, "routed to the DCI peer");
        if hop.qpn == 0x123 && fsm.step(e.ts - hop.ts, e.ts, &p) {
            want.push((psn, hop.ts));
        }
    }
    let acks = on(&out, DC0);
    let got: Vec<(u32, u64)> = acks
        .iter()
        .map(|e| {
            let (hop, flags, psn) = hop_of(&e.data);
            assert_eq!(flags, FLAG_NSF | FLAG_ECHO);
            assert_eq!(hop.qpn, 0x123);
            (psn, hop.ts)
        })
        .collect();
    assert_eq!(got, want);
    assert!(
        got.len() >= 3,
        "the trace makes several pseudo-ACKs: {got:?}"
    );
    for e in &acks {
        let f = &e.data;
        assert_eq!(&f[0..6], &HOST_NH, "routed to the sender's next hop");
        assert_eq!(&f[6..12], &DC0_MAC);
        assert_eq!(f[14 + 8], 63, "TTL 64 - 1");
        assert_eq!(f[15] >> 2, 48, "DSCP");
        assert_eq!(&f[26..30], &REMOTE.octets());
        assert_eq!(&f[30..34], &LOCAL.octets());
        let v = reflex::locate(f, 14, INT_PORT).unwrap();
        let bth = Bth::new_checked(&f[v.bth_off..]).unwrap();
        assert_eq!(
            (bth.opcode(), bth.dest_qp()),
            (opcode::RC_ACKNOWLEDGE, 0x123)
        );
        let mut s = longhaul_dataplane::packet::HeapBuf::from_bytes(f);
        int::strip_int(&mut s, 14).unwrap();
        use longhaul_dataplane::packet::PacketBuf;
        assert_eq!(
            icrc::verify(s.data(), 14),
            Ok(true),
            "ICRC once INT is stripped"
        );
    }
    assert_eq!(counter(&h, "reflex.nsf.pseudo_acks"), got.len() as u64);
    assert_eq!(counter(&h, "reflex.nsf.to_active"), 2);
}

/// Flow A (from wan0) is Congested, flow B (from wan1) Normal; both burst into dc0 at twice
/// its rate: while both queues hold packets the port sends 8 of B for each of A (WRR
/// N_throttle:1); once B is done, A gets the whole port. No packet is reordered within a flow,
/// and every data packet leaves with its own departure time as timestamp.
#[test]
fn ndt_wrr_shares_and_egress_timestamp() {
    let cfg = config(|t| t);
    let mut h = harness(&cfg);
    let (qa, qb) = (0x2a, 0x2b);
    // One packet each, then the ACKs: A's shows 20 us in the DC, B's 3 us.
    h.put(
        WAN0,
        10_000,
        &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qa, 0, 1, 1024),
    );
    h.put(
        WAN1,
        10_000,
        &data(PEER_NH, WAN1_MAC, REMOTE, LOCAL, qb, 0, 1, 1024),
    );
    h.run_to_idle();
    let first = h.take();
    let d0 = on(&first, DC0);
    assert_eq!(d0.len(), 2);
    let ts_of = |q: u32| {
        d0.iter()
            .map(|e| hop_of(&e.data).0)
            .find(|hop| hop.qpn == q)
            .unwrap()
            .ts
    };
    h.put(DC0, ts_of(qa) + 20_000, &ack(qa, 0, ts_of(qa)));
    h.put(DC0, ts_of(qb) + 3_000, &ack(qb, 0, ts_of(qb)));
    let t1 = ts_of(qa) + 30_000;
    let n = 200;
    for k in 0..n {
        let t = t1 + k as u64 * 85; // 1082-byte frames every 85 ns on each port: ~2x of dc0
        h.put(
            WAN0,
            t,
            &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qa, 1 + k, t, 1024),
        );
        h.put(
            WAN1,
            t,
            &data(PEER_NH, WAN1_MAC, REMOTE, LOCAL, qb, 1 + k, t, 1024),
        );
    }
    h.run_to_idle();
    let out = h.take();
    let ndt = h.sw.pipeline().ndt().unwrap();
    let key = |q| FlowKey {
        src: 0xffff_0000_0000 | u32::from(REMOTE) as u128,
        dst: 0xffff_0000_0000 | u32::from(LOCAL) as u128,
        qpn: q,
    };
    assert_eq!(ndt.state(&key(qa)), Some(FlowState::Congested));
    assert_eq!(ndt.state(&key(qb)), Some(FlowState::Normal));
    let wan0 = on(&out, WAN0);
    assert_eq!(wan0.len(), 2, "the ACKs go on to the WAN");
    let seq: Vec<(u32, u32, u64, u64)> = on(&out, DC0)
        .iter()
        .map(|e| {
            let (hop, _, psn) = hop_of(&e.data);
            (hop.qpn, psn, hop.ts, e.ts)
        })
        .collect();
    assert_eq!(seq.len(), 2 * n as usize);
    for &(_, _, ts, dep) in &seq {
        assert_eq!(ts, dep, "NDT writes the egress time");
    }
    for q in [qa, qb] {
        let psns: Vec<u32> = seq.iter().filter(|x| x.0 == q).map(|x| x.1).collect();
        assert!(
            psns.windows(2).all(|w| w[0] < w[1]),
            "flow {q:#x} reordered"
        );
    }
    // While B has packets left: count A between B's. Skip the first packets (queues filling).
    let last_b = seq.iter().rposition(|x| x.0 == qb).unwrap();
    let window = &seq[20..last_b];
    let a = window.iter().filter(|x| x.0 == qa).count();
    let b = window.len() - a;
    let ratio = b as f64 / a as f64;
    assert!((7.0..=9.0).contains(&ratio), "B:A = {b}:{a}");
    // After B is done, A alone: back to back at line rate.
    let tail: Vec<u64> = seq[last_b + 1..].iter().map(|x| x.3).collect();
    assert!(tail.len() > 50, "A's backlog drains after B");
    let gaps: Vec<u64> = tail.windows(2).map(|w| w[1] - w[0]).collect();
    let wire = (1082 + 28 + 24) * 8 / 100; // ns per frame at 100 Gb/s
    assert!(
        gaps.iter().all(|&g| g <= wire as u64 + 1),
        "A gets the whole port: {gaps:?}"
    );
    assert!(counter(&h, "reflex.ndt.to_controlled") >= n as u64);
    assert_eq!(counter(&h, "reflex.ndt.ts_rewritten"), 2 * n as u64 + 2);
}

/// Flows A (wan0) and B (wan1) send `n` 1082-byte frames each into dc0 from 100 us on, 85 ns
/// apart on each port (about twice dc0's rate), with `more(h, k, t)` after frame k; A's ACK at
/// frame n/2 measures 30 us in the destination DC (Congested). Returns that ACK's time.
fn burst_turning_a_congested(
    h: &mut Harness<HeapPool, ReflexEsw>,
    qa: u32,
    qb: u32,
    n: u32,
    mut more: impl FnMut(&mut Harness<HeapPool, ReflexEsw>, u32, u64),
) -> u64 {
    let mut t_ack = 0;
    for k in 0..n {
        let t = 100_000 + k as u64 * 85;
        h.put(
            WAN0,
            t,
            &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qa, k, t, 1024),
        );
        h.put(
            WAN1,
            t,
            &data(PEER_NH, WAN1_MAC, REMOTE, LOCAL, qb, k, t, 1024),
        );
        more(h, k, t);
        if k == n / 2 {
            h.put(DC0, t, &ack(qa, 0, t - 30_000));
            t_ack = t;
        }
    }
    t_ack
}

/// Normal -> Congested while the flow's packets still wait in the Normal queue (section III-D
/// 2 covers only the other direction; docs/reflex.md, the barrier): flows A (wan0) and B (wan1),
/// both Normal, burst into dc0 at twice its rate; halfway, an ACK turns A Congested. A's next
/// packets go to the Controlled queue at once, and that queue sends nothing until A's last
/// packet in the Normal queue has left: A leaves in PSN order, and the first of A's packets
/// from the Controlled queue leaves after the last one from the Normal queue.
#[test]
fn normal_to_congested_keeps_order() {
    let cfg = config(|t| t);
    let mut h = harness(&cfg);
    let (qa, qb) = (0x3a, 0x3b);
    let n = 120u32;
    burst_turning_a_congested(&mut h, qa, qb, n, |_, _, _| {});
    h.run_to_idle();
    let out = h.take();
    let a: Vec<u32> = on(&out, DC0)
        .iter()
        .map(|e| hop_of(&e.data))
        .filter(|(hop, _, _)| hop.qpn == qa)
        .map(|(_, _, psn)| psn)
        .collect();
    assert_eq!(a, (0..n).collect::<Vec<_>>(), "A in PSN order, none lost");
    assert_eq!(
        counter(&h, "reflex.ndt.ooo_barrier"),
        1,
        "one barrier: A's first packet after the ACK"
    );
    assert_eq!(counter(&h, "reflex.ndt.ooo_barrier_timeout"), 0);
    assert_eq!(
        counter(&h, "reflex.ndt.to_controlled"),
        (n - n / 2 - 1) as u64,
        "every packet of A after the ACK"
    );
    // The barrier held: while A's Normal packets were leaving, B's Normal packets kept the
    // port (WRR is work-conserving), and A's Controlled packets came only after A's last
    // Normal one. Without the barrier, WRR would have sent a Controlled packet of A among them.
    assert_eq!(counter(&h, "reflex.ndt.ooo_held"), 0);
}

/// The barrier holds the Controlled queue only from the barrier's flow on: flow C, Congested
/// from the start, has a backlog in the Controlled queue when A turns Congested (as in
/// `normal_to_congested_keeps_order`, with B beside it); C's packets queued before A's first
/// Controlled one keep leaving (1 for 8 of the Normal queue) while A's Normal packets drain, and
/// A still leaves in PSN order.
#[test]
fn barrier_lets_the_packets_ahead_leave() {
    let cfg = config(|t| t);
    let mut h = harness(&cfg);
    let (qa, qb, qc) = (0x3a, 0x3b, 0x3c);
    // C's first packet, then its ACK measuring 30 us: Congested.
    h.put(
        WAN0,
        50_000,
        &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qc, 0, 1, 1024),
    );
    h.put(DC0, 60_000, &ack(qc, 0, 30_000));
    let n = 120u32;
    let t_ack = burst_turning_a_congested(&mut h, qa, qb, n, |h, k, t| {
        if k % 2 == 0 {
            h.put(
                WAN1,
                t,
                &data(PEER_NH, WAN1_MAC, REMOTE, LOCAL, qc, 1 + k / 2, t, 1024),
            );
        }
    });
    h.run_to_idle();
    let out = h.take();
    let dc0: Vec<(u32, u32, u64)> = on(&out, DC0)
        .iter()
        .map(|e| {
            let (hop, _, psn) = hop_of(&e.data);
            (hop.qpn, psn, e.ts)
        })
        .collect();
    for q in [qa, qb, qc] {
        let psns: Vec<u32> = dc0.iter().filter(|x| x.0 == q).map(|x| x.1).collect();
        assert!(
            psns.windows(2).all(|w| w[1] == w[0] + 1),
            "flow {q:#x} in order"
        );
    }
    assert_eq!(counter(&h, "reflex.ndt.ooo_barrier"), 1);
    // A's last packet from the Normal queue: the last A packet before its first Controlled one.
    let first_ctl = (n / 2 + 1) as usize; // A's PSNs from here went to the Controlled queue
    let a_last_normal = dc0
        .iter()
        .find(|x| x.0 == qa && x.1 == first_ctl as u32 - 1)
        .unwrap()
        .2;
    let c_during = dc0
        .iter()
        .filter(|x| x.0 == qc && x.2 > t_ack && x.2 < a_last_normal)
        .count();
    assert!(
        c_during > 0,
        "C's queued packets left while A's Normal packets drained"
    );
}

/// The pause (section III-D 3) with alpha 0.5 and two flows: both Congested holds the
/// Controlled queue; an ACK that turns one Normal (share 0.5, not above alpha) releases it; when
/// no relief comes, the hold ends at T_maxpause and is not taken again until the share falls.
#[test]
fn pause_ends_on_relief_and_on_maxpause() {
    let cfg = config(|t| {
        t.replace("alpha = 0.7", "alpha = 0.5")
            .replace("t_maxpause_ns = 500000", "t_maxpause_ns = 200000")
            .replace("active_timeout_ns = 100000", "active_timeout_ns = 10000000")
    });
    let mut h = harness(&cfg);
    let (qa, qb) = (0x2a, 0x2b);
    // Both Congested at 40 us: the share 2/2 > 0.5 pauses dc0's Controlled queue.
    two_congested_flows(&mut h, qa, qb);
    for k in 0..5u32 {
        h.put(
            WAN0,
            50_000 + k as u64 * 1_000,
            &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qa, 1 + k, 1, 256),
        );
    }
    h.advance_to(100_000);
    let held = on(&h.take(), DC0).len();
    assert_eq!(held, 0, "the Controlled queue sends nothing while paused");
    assert_eq!(counter(&h, "reflex.ndt.pauses"), 1);
    // Relief: B's ACK shows 2 us -> share 1/2, not above alpha: released at once.
    h.put(DC0, 100_000, &ack(qb, 0, 98_000));
    h.advance_to(110_000);
    assert_eq!(on(&h.take(), DC0).len(), 5, "released on relief");
    assert_eq!(counter(&h, "reflex.ndt.pause_relief"), 1);

    // B congested again: paused; no ACK brings relief; T_maxpause (200 us) ends it.
    h.put(DC0, 120_000, &ack(qb, 0, 100_000));
    assert!(h.sw.pipeline().ndt().is_some());
    for k in 0..3u32 {
        h.put(
            WAN0,
            130_000 + k as u64 * 1_000,
            &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qa, 10 + k, 1, 256),
        );
    }
    h.advance_to(319_000);
    assert_eq!(on(&h.take(), DC0).len(), 0, "still paused");
    h.advance_to(330_000);
    let out = h.take();
    let after: Vec<u64> = on(&out, DC0).iter().map(|e| e.ts).collect();
    assert_eq!(after.len(), 3);
    assert_eq!(
        after[0], 320_000,
        "released at T_maxpause after the pause began"
    );
    assert_eq!(counter(&h, "reflex.ndt.pause_timeout"), 1);
    // Held 40..100 us (relief) and 120..320 us (T_maxpause).
    assert_eq!(counter(&h, "reflex.ndt.paused_ns"), 60_000 + 200_000);
    // The share is still above alpha, but the pause is disarmed: more data flows at once.
    h.put(
        WAN0,
        340_000,
        &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qa, 20, 1, 256),
    );
    h.advance_to(345_000);
    assert_eq!(on(&h.take(), DC0).len(), 1);
    assert_eq!(counter(&h, "reflex.ndt.pauses"), 2);
    assert_eq!(h.sw.pipeline().ndt().unwrap().port_view(0), (2, 2, false));
}

/// Section III-D 3: the pause "persists until either congestion resolution is detected via
/// returning ACKs or" T_maxpause. With alpha 0.7, two Congested flows pause the Controlled
/// queue (2/2); a third flow's first packet brings the share to 2/3, but that is no ACK: the
/// queue stays held. The next ACK, though it still measures A as Congested, finds the share at
/// alpha or below and ends the pause.
#[test]
fn only_an_ack_ends_a_pause() {
    let cfg = config(|t| t.replace("active_timeout_ns = 100000", "active_timeout_ns = 10000000"));
    let mut h = harness(&cfg);
    let (qa, qb, qc) = (0x2a, 0x2b, 0x2c);
    two_congested_flows(&mut h, qa, qb);
    for k in 0..3u32 {
        h.put(
            WAN0,
            50_000 + k as u64 * 1_000,
            &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qa, 1 + k, 1, 256),
        );
    }
    h.advance_to(60_000);
    assert_eq!(on(&h.take(), DC0).len(), 0, "paused");
    assert_eq!(counter(&h, "reflex.ndt.pauses"), 1);
    // C's first packet (Normal, its own queue) goes out; the share is 2/3 now, yet no ACK came.
    h.put(
        WAN0,
        70_000,
        &data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, qc, 0, 1, 256),
    );
    h.advance_to(80_000);
    assert_eq!(on(&h.take(), DC0).len(), 1, "only C's packet");
    assert_eq!(h.sw.pipeline().ndt().unwrap().port_view(0), (3, 2, true));
    assert_eq!(counter(&h, "reflex.ndt.pause_relief"), 0);
    // An ACK of A at 90 us measuring 30 us (still Congested): the share is 2/3 <= 0.7: relief.
    h.put(DC0, 90_000, &ack(qa, 1, 60_000));
    h.advance_to(100_000);
    let out = h.take();
    let released: Vec<u64> = on(&out, DC0).iter().map(|e| e.ts).collect();
    assert_eq!(released.len(), 3, "released on the ACK");
    assert!(released[0] >= 90_000);
    assert_eq!(counter(&h, "reflex.ndt.pause_relief"), 1);
    assert_eq!(counter(&h, "reflex.ndt.paused_ns"), 50_000);
    assert_eq!(h.sw.pipeline().ndt().unwrap().port_view(0), (3, 2, false));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// No flow is ever reordered across the Normal and Controlled queues, whatever the state
    /// flips: random bursts of four flows from two WAN ports into dc0 (more than its rate),
    /// interleaved with ACKs that make random flows Congested or Normal.
    #[test]
    fn no_reordering_under_random_state_flips(
        events in proptest::collection::vec((0u8..4, 0u8..6, 0u64..3_000), 50..200)
    ) {
        let cfg = config(|t| t);
        let mut h = harness(&cfg);
        let mut psn = [0u32; 4];
        let mut t = 100_000u64;
        for (flow, kind, gap) in events {
            t += gap;
            let q = 0x30 + flow as u32;
            match kind {
                0 => h.put(DC0, t, &ack(q, 0, t - 30_000)), // Congested
                1 => h.put(DC0, t, &ack(q, 0, t - 1_000)),  // Normal
                _ => {
                    let (port, mac) = if flow % 2 == 0 { (WAN0, WAN0_MAC) } else { (WAN1, WAN1_MAC) };
                    for _ in 0..kind {
                        h.put(port, t, &data(PEER_NH, mac, REMOTE, LOCAL, q, psn[flow as usize], 1, 1024));
                        psn[flow as usize] += 1;
                    }
                }
            }
        }
        h.run_to_idle();
        let out = h.take();
        let mut last = [None::<u32>; 4];
        let mut n = 0;
        for e in on(&out, DC0) {
            let (hop, _, p) = hop_of(&e.data);
            let i = (hop.qpn - 0x30) as usize;
            prop_assert!(last[i].is_none_or(|l| p == l + 1), "flow {} PSN {} after {:?}", i, p, last[i]);
            last[i] = Some(p);
            n += 1;
        }
        prop_assert_eq!(n, psn.iter().sum::<u32>() as usize, "every data packet delivered");
    }
}

/// The WAN -> DC hop is located once, at ingress, and its timestamp rewritten at dc0's egress
/// where ingress found it, whatever the packet's class (a data packet outside NDT's class is
/// not queued by NDT but still gets the egress time); a malformed INT on the INT port is
/// counted once per packet in each direction, and forwarded unchanged.
#[test]
fn each_hop_located_once_timestamped_in_any_class() {
    let cfg = config(|t| t);
    let mut h = harness(&cfg);
    let in_class_3 = data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, 0x11, 0, 1, 256);
    let mut in_class_0 = data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, 0x12, 0, 1, 256);
    longhaul_dataplane::wire::ipv4::Ipv4Packet::new_checked(&mut in_class_0[14..])
        .unwrap()
        .set_tos_update(0);
    let mut bad = data(PEER_NH, WAN0_MAC, REMOTE, LOCAL, 0x13, 0, 1, 256);
    bad[14 + 20 + 8] = 0xf0; // the shim's type: not INT-MD
    h.put(WAN0, 10_000, &in_class_3);
    h.put(WAN0, 20_000, &in_class_0);
    h.put(WAN0, 30_000, &bad);
    h.run_to_idle();
    let out = h.take();
    let dc0 = on(&out, DC0);
    assert_eq!(dc0.len(), 3, "all three forwarded");
    for e in &dc0[..2] {
        let (hop, _, _) = hop_of(&e.data);
        assert_eq!(hop.ts, e.ts, "NDT writes the egress time");
    }
    assert_eq!(dc0[2].data[14 + 20 + 8..], bad[14 + 20 + 8..], "unchanged");
    assert_eq!(counter(&h, "reflex.ndt.ts_rewritten"), 2);
    assert_eq!(counter(&h, "reflex.ndt.data"), 1, "only class 3 is NDT's");
    assert_eq!(counter(&h, "reflex.bad_int"), 1);
    // DC -> WAN: the same malformed INT from a local host, counted once (by NSF at egress).
    let mut bad_out = data(HOST_NH, DC0_MAC, LOCAL, REMOTE, 0x14, 0, 1, 256);
    bad_out[14 + 20 + 8] = 0xf0;
    h.put(DC0, 40_000, &bad_out);
    h.run_to_idle();
    assert_eq!(on(&h.take(), WAN0).len(), 1);
    assert_eq!(counter(&h, "reflex.bad_int"), 2);
}

/// [`ReflexEsw`] with the engine's default of one packet at a time through ingress, admission
/// and enqueue ([`Pipeline::BURST_INGRESS`] off): the reference for its burst ingress.
struct OneByOne(ReflexEsw);

impl Pipeline<HeapPool> for OneByOne {
    type Command = <ReflexEsw as Pipeline<HeapPool>>::Command;

    fn ingress(&mut self, ctx: &mut Ctx<'_, HeapPool>, pkt: &mut HeapBuf) -> Action {
        self.0.ingress(ctx, pkt)
    }
    fn egress(&mut self, ctx: &mut Ctx<'_, HeapPool>, pkt: &mut HeapBuf) -> Action {
        self.0.egress(ctx, pkt)
    }
    fn on_time(&mut self, ctx: &mut Ctx<'_, HeapPool>) {
        self.0.on_time(ctx)
    }
    fn next_deadline(&self) -> Option<u64> {
        Pipeline::<HeapPool>::next_deadline(&self.0)
    }
    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        Pipeline::<HeapPool>::counters(&self.0, out)
    }
    fn tables(&self, out: &mut dyn FnMut(&'static str, TableCounters)) {
        Pipeline::<HeapPool>::tables(&self.0, out)
    }
}

type Run = (Vec<(usize, u64, Vec<u8>)>, Vec<(&'static str, u64)>);

/// Feed `events` to a Reflex ESW built by `make` and collect every frame sent and every counter.
fn run_events<L: Pipeline<HeapPool>>(make: impl Fn(&Config) -> L, events: &[(u8, u8, u64)]) -> Run {
    let cfg = config(|t| t);
    let mut h = Harness::new(Switch::new(switch_spec(&cfg), heap_pool(&cfg), make(&cfg)));
    let mut psn = [0u32; 4];
    let mut t = 100_000u64;
    for &(flow, kind, gap) in events {
        // A third of the events at the instant of the one before (bursts that mix kinds), a
        // few after long enough for flows to age out of the Flow State Table.
        t += match gap {
            0..1_000 => 0,
            2_950.. => 150_000,
            g => g,
        };
        let q = 0x30 + flow as u32;
        let f = flow as usize;
        match kind {
            0 => h.put(DC0, t, &ack(q, 0, t - 30_000)), // Congested
            1 => h.put(DC0, t, &ack(q, 0, t - 1_000)),  // Normal
            2..=5 => {
                let (port, mac) = if flow % 2 == 0 {
                    (WAN0, WAN0_MAC)
                } else {
                    (WAN1, WAN1_MAC)
                };
                for _ in 0..kind {
                    h.put(
                        port,
                        t,
                        &data(PEER_NH, mac, REMOTE, LOCAL, q, psn[f], 1, 1024),
                    );
                    psn[f] += 1;
                }
            }
            _ => {
                // DC -> WAN data, near-source delay high for odd flows (NSF Active).
                let ts = t - if flow % 2 == 1 { 8_000 } else { 1_000 };
                for _ in 0..kind - 5 {
                    h.put(
                        DC0,
                        t,
                        &data(HOST_NH, DC0_MAC, LOCAL, REMOTE, q, psn[f], ts, 256),
                    );
                    psn[f] += 1;
                }
            }
        }
    }
    h.run_to_idle();
    let out = h
        .take()
        .into_iter()
        .map(|e| (e.port_idx, e.ts, e.data))
        .collect();
    let mut counters = Vec::new();
    h.sw.pipeline().counters(&mut |n, v| counters.push((n, v)));
    h.sw.pipeline().tables(&mut |n, t| {
        counters.push((n, t.hits));
        counters.push((n, t.misses));
        counters.push((n, t.entries));
    });
    (out, counters)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// The ESW's burst ingress (NDT's packets cut the burst, `ReflexEsw::ingress_burst`) sends
    /// what one packet at a time sends, counters included: bursts into dc0 mixing ACKs that
    /// flip flows Congested or Normal (and so hold and release the Controlled queue) with data
    /// toward the WAN, Silent and Active, and bursts of data from two WAN ports into dc0 (more
    /// than its rate, so depths and held queues matter).
    #[test]
    fn burst_ingress_sends_what_one_at_a_time_sends(
        events in proptest::collection::vec((0u8..4, 0u8..9, 0u64..3_000), 20..200)
    ) {
        let burst = run_events(ReflexEsw::new, &events);
        let one = run_events(|c| OneByOne(ReflexEsw::new(c)), &events);
        prop_assert_eq!(&burst.1, &one.1);
        prop_assert!(burst.0 == one.0, "frames differ");
    }
}
