//! The spraying ToR end to end on virtual time (configs/spray-tor.toml): two ToRs, rack A
//! (the file as is: sender 10.0.0.1 QPN 0x11) and rack B (the same file with the racks swapped:
//! receiver 10.1.0.1 QPN 0x22), joined by a "fabric" in the test that can lose a spine.
//!
//! - Themis-S sprays by PSN over the four spines (equation 1) and, in 3-tier mode, XORs the
//!   PathMap delta into the UDP source port with a fresh ICRC;
//! - path avoidance end to end: spine 1 drops everything; B's Themis-D stashes the RNIC's NAK
//!   (undetermined), then past OOO_THRESHOLD sends it itself with the path avoidance signal; A's
//!   Themis-S takes the signal (cleared before the RNIC), reroutes the retransmission and keeps
//!   the path's packets off it for AVOIDANCE_WINDOW packets;
//! - invalid NAKs are dropped, valid ones forwarded.

use longhaul_control::config::Config;
use longhaul_control::plane::Inline;
use longhaul_dataplane::engine::{Pipeline, Switch};
use longhaul_dataplane::packet::HeapPool;
use longhaul_dataplane::replay::{Emitted, Harness};
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::icrc;
use longhaul_dataplane::wire::ipv4::Ipv4Packet;
use longhaul_dataplane::wire::roce::{
    build_ack_v4, build_roce_v4, opcode, AckSpec, Bth, BthRepr, RoceAddrs, Syndrome,
};
use longhaul_pipelines::spray::control::SprayControl;
use longhaul_pipelines::spray::tor::{SprayTor, OFF_POLICY_BIT, PATH_AVOIDANCE_BIT};
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::net::Ipv4Addr;
use std::path::Path;

const H0: usize = 0;
const UP0: usize = 2;
const TOR_H0: [u8; 6] = [2, 0, 0, 0, 0, 1];
const NIC: [u8; 6] = [2, 0, 0, 0, 0x10, 1];
const SENDER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const RECEIVER: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const SQPN: u32 = 0x11;
const RQPN: u32 = 0x22;
const SPORT: u16 = 49152;

fn text() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/spray-tor.toml");
    std::fs::read_to_string(p).unwrap()
}

fn parse(text: &str) -> Config {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/spray-tor.toml");
    longhaul_pipelines::parse_config(text, &p).expect("config")
}

/// Rack B: the same ToR with the two racks' addresses and the QP ends swapped.
fn rack_b(t: &str) -> String {
    t.replace("10.0.", "10.X.")
        .replace("10.1.", "10.0.")
        .replace("10.X.", "10.1.")
        .replace("local_qpn", "LOCAL_QPN")
        .replace("remote_qpn", "local_qpn")
        .replace("LOCAL_QPN", "remote_qpn")
}

fn small_windows(t: &str) -> String {
    t.replace("ooo_threshold = 448", "ooo_threshold = 8")
        .replace("avoidance_window = 2000000", "avoidance_window = 3")
}

fn harness(cfg: &Config) -> Harness<HeapPool, SprayTor> {
    let mut sw = Switch::new(switch_spec(cfg), heap_pool(cfg), SprayTor::new(cfg));
    sw.set_inline_control(Box::new(Inline(SprayControl::new(cfg))), 0);
    Harness::new(sw)
}

fn counter(h: &Harness<HeapPool, SprayTor>, name: &str) -> u64 {
    let mut v = None;
    <SprayTor as Pipeline<HeapPool>>::counters(h.sw.pipeline(), &mut |n, x| {
        if n == name {
            v = Some(x)
        }
    });
    v.unwrap_or_else(|| panic!("no counter {name}"))
}

/// RDMA WRITE MIDDLE sender -> receiver, PSN `psn`.
fn data(psn: u32) -> Vec<u8> {
    let mut b = [0u8; 512];
    let a = RoceAddrs {
        src_mac: MacAddr(NIC),
        dst_mac: MacAddr(TOR_H0),
        src_ip: SENDER,
        dst_ip: RECEIVER,
        udp_sport: SPORT,
        dscp: 26,
        ecn: 2,
    };
    let bth = BthRepr {
        opcode: opcode::RC_RDMA_WRITE_MIDDLE,
        pkey: 0xffff,
        dest_qp: RQPN,
        psn,
        ..BthRepr::default()
    };
    let n = build_roce_v4(&mut b, &a, &bth, &[0x5a; 256]).unwrap();
    b[..n].to_vec()
}

/// The receiver RNIC's PSN-sequence-error NAK for `epsn` (into rack B's h0).
fn nak(epsn: u32) -> Vec<u8> {
    let mut b = [0u8; 128];
    let a = RoceAddrs {
        src_mac: MacAddr(NIC),
        dst_mac: MacAddr(TOR_H0),
        src_ip: RECEIVER,
        dst_ip: SENDER,
        udp_sport: 50000,
        dscp: 48,
        ecn: 2,
    };
    let s = AckSpec {
        dest_qp: SQPN,
        psn: epsn,
        syndrome: Syndrome::NAK_PSN_SEQ_ERR,
        msn: 3,
        pkey: 0xffff,
    };
    let n = build_ack_v4(&mut b, &a, &s).unwrap();
    b[..n].to_vec()
}

fn bth(f: &[u8]) -> Bth<&[u8]> {
    Bth::new_checked(&f[42..]).unwrap()
}

fn sprayed(out: &[Emitted]) -> Vec<(u32, usize, u8)> {
    out.iter()
        .filter(|e| (UP0..UP0 + 4).contains(&e.port_idx))
        .filter(|e| bth(&e.data).opcode() == opcode::RC_RDMA_WRITE_MIDDLE)
        .map(|e| (bth(&e.data).psn(), e.port_idx - UP0, e.data[46]))
        .collect()
}

/// P_base of the test QP as the ToR applies it: from PSN 0's path.
fn p_base_of(s: &[(u32, usize, u8)]) -> usize {
    let (psn, path, _) = s[0];
    (path + 4 - psn as usize % 4) % 4
}

#[test]
fn sprays_by_psn_over_the_path_map() {
    let cfg = parse(&text());
    let mut a = harness(&cfg);
    for psn in 0..32u32 {
        a.put(H0, 1_000 + psn as u64 * 100, &data(psn));
    }
    a.run_to_idle();
    let out = a.take();
    let s = sprayed(&out);
    assert_eq!(s.len(), 32);
    let base = p_base_of(&s);
    for (psn, path, byte4) in &s {
        assert_eq!(
            *path,
            (*psn as usize % 4 + base) % 4,
            "equation 1 for PSN {psn}"
        );
        assert_eq!(byte4 & OFF_POLICY_BIT, 0);
    }
    for e in &out {
        assert_eq!(icrc::verify(&e.data, 14), Ok(true));
        let spine = (e.port_idx - UP0) as u8;
        assert_eq!(
            &e.data[0..6],
            &[2, 0, 0, 0, 0x20, spine],
            "next hop of the path"
        );
    }
    assert_eq!(counter(&a, "spray.s.sprayed"), 32);
}

#[test]
fn three_tier_rewrites_the_source_port_with_a_fresh_icrc() {
    let t = text();
    let start = t.find("# The PathMap: N = 4").unwrap();
    let end = t.find("# Cross-rack QPs").unwrap();
    let t = format!("{}{}", &t[..start], &t[end..]).replace(
        "mode = \"port\"",
        "mode = \"sport\"\nsport_deltas = [0, 0x0101, 0x0202, 0x0303]",
    );
    let cfg = parse(&t);
    let mut a = harness(&cfg);
    for psn in 0..16u32 {
        a.put(H0, 1_000 + psn as u64 * 100, &data(psn));
    }
    a.run_to_idle();
    let out = a.take();
    assert_eq!(out.len(), 16);
    let deltas = [0u16, 0x0101, 0x0202, 0x0303];
    let mut paths = std::collections::BTreeSet::new();
    for e in &out {
        assert_eq!(
            e.port_idx, UP0,
            "the route: the fabric's ECMP does the rest"
        );
        let sport = u16::from_be_bytes([e.data[34], e.data[35]]);
        let path = deltas
            .iter()
            .position(|d| SPORT ^ d == sport)
            .expect("a PathMap delta");
        paths.insert(path);
        let psn = bth(&e.data).psn() as usize;
        let base = (path + 4 - psn % 4) % 4;
        assert!(base < 4);
        assert_eq!(icrc::verify(&e.data, 14), Ok(true), "ICRC recomputed");
    }
    assert_eq!(paths.len(), 4, "all four paths used");
    assert_eq!(counter(&a, "spray.sport_rewrites"), 12);
}

#[test]
fn path_avoidance_end_to_end() {
    let ta = small_windows(&text());
    let cfg_a = parse(&ta);
    let cfg_b = parse(&rack_b(&ta));
    let mut a = harness(&cfg_a);
    let mut b = harness(&cfg_b);

    // Rack A sprays PSNs 0..24.
    for psn in 0..24u32 {
        a.put(H0, 1_000 + psn as u64 * 100, &data(psn));
    }
    a.run_to_idle();
    let out_a = a.take();
    let s = sprayed(&out_a);
    let base = p_base_of(&s);
    let dead = (1 + base) % 4; // the spine carrying PSNs 1, 5, 9, ... (relative path 1) fails
                               // The fabric: spine `dead` loses everything; the others deliver in order into rack B.
    let mut t = 100_000u64;
    let mut fed = Vec::new();
    for e in out_a.iter().filter(|e| e.port_idx != UP0 + dead) {
        fed.push(bth(&e.data).psn());
        b.put(e.port_idx, t, &e.data);
        t += 1_000;
        b.run_to_idle();
        // The receiver RNIC: PSN 0 is in order, PSN 2 finds ePSN 1 missing: one NAK for 1.
        if bth(&e.data).psn() == 2 {
            b.put(H0, t, &nak(1));
            t += 1_000;
            b.run_to_idle();
        }
    }
    let out_b = b.take();
    assert!(fed.iter().all(|p| p % 4 != 1));
    // B dropped the RNIC's NAK (undetermined: nothing later on path 1 ever arrived) ...
    assert_eq!(counter(&b, "spray.d.nacks_undetermined"), 1);
    // ... and sent its own once PSN - SePSN > 8, with the path avoidance signal.
    let naks: Vec<&Emitted> = out_b
        .iter()
        .filter(|e| e.port_idx != H0 && bth(&e.data).opcode() == opcode::RC_ACKNOWLEDGE)
        .collect();
    assert_eq!(naks.len(), 1, "one regenerated NAK");
    let n = &naks[0].data;
    assert_eq!(naks[0].port_idx, UP0, "routed toward rack A");
    assert_eq!(n.len(), 62);
    assert_eq!(bth(n).psn(), 1);
    assert_eq!(bth(n).dest_qp(), SQPN);
    assert_eq!(n[46] & PATH_AVOIDANCE_BIT, PATH_AVOIDANCE_BIT);
    assert_eq!(n[54], Syndrome::NAK_PSN_SEQ_ERR);
    assert_eq!(&n[26..30], &RECEIVER.octets());
    assert_eq!(&n[30..34], &SENDER.octets());
    assert_eq!(
        u16::from_be_bytes([n[34], n[35]]),
        50000,
        "the RNIC's source port"
    );
    assert_eq!(icrc::verify(n, 14), Ok(true));
    assert!(Ipv4Packet::new_checked(&n[14..]).unwrap().verify_checksum());
    assert_eq!(counter(&b, "spray.d.nacks_avoidance"), 1);
    // B delivered the data to the RNIC without the off-policy mark (none was set here).
    let delivered: Vec<u32> = out_b
        .iter()
        .filter(|e| e.port_idx == H0)
        .map(|e| bth(&e.data).psn())
        .collect();
    assert_eq!(delivered, fed);

    // The NAK reaches rack A: the signal is taken and cleared, the sender gets a standard NAK.
    a.put(UP0, 500_000, n);
    a.run_to_idle();
    let back = a.take();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].port_idx, H0);
    assert_eq!(back[0].data[46] & PATH_AVOIDANCE_BIT, 0, "signal cleared");
    assert_eq!(icrc::verify(&back[0].data, 14), Ok(true));
    let s_state = a.sw.pipeline().source().unwrap();
    assert_eq!(s_state.last_nack_psn(0), Some(1));
    assert_eq!(s_state.avoidance(0, 1), 3, "AVOIDANCE_WINDOW");

    // The sender retransmits 1 (rerouted off its path), then goes on with 24..48.
    a.put(H0, 600_000, &data(1));
    for psn in 24..48u32 {
        a.put(H0, 601_000 + psn as u64 * 100, &data(psn));
    }
    a.run_to_idle();
    let s2 = sprayed(&a.take());
    let (_, p1, b1) = s2[0];
    assert_ne!(p1, dead, "retransmission rerouted");
    assert_eq!(b1 & OFF_POLICY_BIT, OFF_POLICY_BIT);
    let on_dead: Vec<u32> = s2[1..]
        .iter()
        .filter(|(psn, _, _)| psn % 4 == 1)
        .map(|x| x.0)
        .collect();
    assert_eq!(on_dead, vec![25, 29, 33, 37, 41, 45]);
    for (psn, path, byte4) in &s2[1..] {
        let avoided = [25, 29, 33].contains(psn);
        if avoided {
            assert_ne!(*path, dead, "PSN {psn} avoids the path");
            assert_eq!(byte4 & OFF_POLICY_BIT, OFF_POLICY_BIT);
        } else {
            assert_eq!(
                *path,
                (*psn as usize % 4 + base) % 4,
                "PSN {psn} on its path"
            );
            assert_eq!(byte4 & OFF_POLICY_BIT, 0);
        }
    }
    assert_eq!(a.sw.pipeline().source().unwrap().avoidance(0, 1), 0);
    assert_eq!(counter(&a, "spray.s.avoided"), 3);
    assert_eq!(counter(&a, "spray.s.rerouted"), 1);
}

#[test]
fn invalid_naks_dropped_valid_forwarded_unknown_qp_untouched() {
    let cfg_b = parse(&rack_b(&text()));
    let mut b = harness(&cfg_b);
    // Figure 6 with N = 4: 0, 1, 3, 2 reach the RNIC (all on-policy from rack A's spines).
    let mut t = 1_000;
    for psn in [0u32, 1, 3, 2, 4] {
        b.put(UP0, t, &data(psn));
        t += 1_000;
    }
    b.run_to_idle();
    b.put(H0, t, &nak(2)); // 2 went to the RNIC: invalid
    t += 1_000;
    b.put(UP0, t, &data(9)); // path 1
    b.put(UP0, t + 500, &data(6));
    b.run_to_idle();
    b.put(H0, t + 1_000, &nak(5)); // path 1 has 9 > 5: valid
    b.run_to_idle();
    let out = b.take();
    let fwd: Vec<u32> = out
        .iter()
        .filter(|e| e.port_idx == UP0)
        .map(|e| bth(&e.data).psn())
        .collect();
    assert_eq!(fwd, vec![5], "only the valid NAK goes to the sender");
    assert_eq!(counter(&b, "spray.d.nacks_invalid"), 1);
    assert_eq!(counter(&b, "spray.d.nacks_valid"), 1);
    // A QP the ToR does not know passes untouched.
    let mut other = nak(7);
    other[49] = 0x99; // DestQP
    icrc::fill(&mut other, 14).unwrap();
    b.put(H0, t + 5_000, &other);
    b.run_to_idle();
    assert_eq!(b.take().len(), 1);
    assert!(counter(&b, "spray.unknown_qp") >= 1);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// No frame panics the spraying ToR: random bytes and mutated WRITEs and NAKs (of known
        /// QPs, so Themis-S and Themis-D run on them) on every port.
        #[test]
        fn random_and_mutated_frames_do_not_panic(
            muts in proptest::collection::vec((0usize..6, 0u8..3, 0u32..64, any::<u16>(), any::<u8>(), 0usize..200), 1..60)
        ) {
            let ta = small_windows(&text());
            let mut a = harness(&parse(&ta));
            let mut b = harness(&parse(&rack_b(&ta)));
            let mut t = 1_000;
            for (port, kind, psn, at, val, cut) in muts {
                let mut f = match kind {
                    0 => data(psn),
                    1 => nak(psn),
                    _ => vec![val; cut],
                };
                let i = at as usize % f.len().max(1);
                if let Some(x) = f.get_mut(i) {
                    *x ^= val;
                }
                if kind != 2 && cut < f.len() && cut % 3 == 0 {
                    f.truncate(cut);
                }
                a.put(port, t, &f);
                b.put(port, t, &f);
                t += 500;
            }
            a.run_to_idle();
            b.run_to_idle();
            a.take();
            b.take();
        }
    }
}
