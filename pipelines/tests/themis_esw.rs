//! The THEMIS ESW pipeline end to end on virtual time (configs/themis-esw.toml), with the
//! control handler running inline as in replay: daemon messages install QP_field, CE-marked
//! inter-DC data make CNPs (rate-limited, CE cleared, ICRC valid), a receiver's CNP throttles the
//! opposite direction by recirculation, the SYN-cookie handshake monitor.

use longhaul_control::config::Config;
use longhaul_control::plane::Inline;
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::packet::HeapPool;
use longhaul_dataplane::replay::{Emitted, Harness};
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::roce::{build_roce_v4, opcode, Bth, BthRepr, RoceAddrs};
use longhaul_dataplane::wire::{ecn, icrc, tcp};
use longhaul_pipelines::switch_spec;
use longhaul_pipelines::themis::control::ThemisControl;
use longhaul_pipelines::themis::daemon::{build_daemon_frame, DaemonMsg, DaemonOp};
use longhaul_pipelines::themis::esw::ThemisEsw;
use longhaul_runtime::platform::heap_pool;
use std::net::Ipv4Addr;
use std::path::Path;

const DC0: usize = 0;
const WAN0: usize = 2;
const ROUTER: [u8; 6] = [2, 0, 0, 0, 0, 1]; // dc0's MAC
const WAN_ROUTER: [u8; 6] = [2, 0, 0, 0, 0, 3]; // wan0's MAC
const HOST: [u8; 6] = [2, 0, 0, 0, 0x10, 1];
const PEER: [u8; 6] = [2, 0, 0, 0, 0x20, 1];
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const REMOTE: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const CQPN: u32 = 0x111;
const SQPN: u32 = 0x222;

fn config(edit: impl Fn(String) -> String) -> Config {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/themis-esw.toml");
    let text = edit(std::fs::read_to_string(&p).unwrap());
    longhaul_pipelines::parse_config(&text, &p).expect("config")
}

fn harness(cfg: &Config) -> Harness<HeapPool, ThemisEsw> {
    let mut sw = Switch::new(switch_spec(cfg), heap_pool(cfg), ThemisEsw::new(cfg));
    sw.set_inline_control(Box::new(Inline(ThemisControl::new(cfg))), 0);
    Harness::new(sw)
}

fn daemon(client: Ipv4Addr, op: DaemonOp) -> Vec<u8> {
    let msg = DaemonMsg {
        client_ip: u32::from(client),
        dst_ip: u32::from(REMOTE),
        cqpn: CQPN,
        sqpn: SQPN,
        op,
    };
    let mut b = [0u8; 128];
    let n = build_daemon_frame(
        &mut b,
        HOST,
        ROUTER,
        client,
        Ipv4Addr::new(10, 0, 255, 254),
        &msg,
    )
    .unwrap();
    b[..n].to_vec()
}

/// RC SEND_ONLY from `src` to `dst` with DestQP `qp`, PSN `psn`, ECN `ecn_bits`.
#[allow(clippy::too_many_arguments)]
fn roce(
    smac: [u8; 6],
    dmac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    op: u8,
    qp: u32,
    psn: u32,
    ecn_bits: u8,
) -> Vec<u8> {
    let mut b = [0u8; 512];
    let a = RoceAddrs {
        src_mac: MacAddr(smac),
        dst_mac: MacAddr(dmac),
        src_ip: src,
        dst_ip: dst,
        udp_sport: 49152,
        dscp: 26,
        ecn: ecn_bits,
    };
    let bth = BthRepr {
        opcode: op,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: 0xffff,
        fecn: false,
        becn: op == opcode::CNP,
        dest_qp: qp,
        ack_req: false,
        psn,
    };
    let payload = if op == opcode::CNP {
        vec![0u8; 16]
    } else {
        vec![0xab; 256]
    };
    let n = build_roce_v4(&mut b, &a, &bth, &payload).unwrap();
    b[..n].to_vec()
}

fn on(out: &[Emitted], idx: usize) -> Vec<&Emitted> {
    out.iter().filter(|e| e.port_idx == idx).collect()
}

fn counter(h: &Harness<HeapPool, ThemisEsw>, name: &str) -> u64 {
    use longhaul_dataplane::engine::Pipeline;
    let mut v = 0;
    <ThemisEsw as Pipeline<HeapPool>>::counters(h.sw.pipeline(), &mut |n, x| {
        if n == name {
            v = x
        }
    });
    v
}

#[test]
fn daemon_entry_then_ce_data_makes_rate_limited_cnps_and_clears_ce() {
    let cfg = config(|t| t);
    let mut h = harness(&cfg);
    h.put(DC0, 1_000, &daemon(CLIENT, DaemonOp::CreateOrModify));
    // CE-marked data client -> remote (DestQP = the server's QPN), every 20 us.
    let data = roce(
        HOST,
        ROUTER,
        CLIENT,
        REMOTE,
        opcode::RC_SEND_ONLY,
        SQPN,
        7,
        ecn::CE,
    );
    for k in 0..6u64 {
        h.put(DC0, 10_000 + k * 20_000, &data);
    }
    // No CNP without an entry: another QP.
    let other = roce(
        HOST,
        ROUTER,
        CLIENT,
        REMOTE,
        opcode::RC_SEND_ONLY,
        0x999,
        7,
        ecn::CE,
    );
    h.put(DC0, 200_000, &other);
    h.run_to_idle();
    let out = h.take();

    let cnps: Vec<&Emitted> = on(&out, DC0);
    // Data at 10, 30, 50, 70, 90, 110 us; interval 50 us -> CNPs at 10, 70 us (30/50: < 50 us
    // after 10; 90/110: < 50 us after 70).
    let ts: Vec<u64> = cnps.iter().map(|e| e.ts).collect();
    assert_eq!(ts, vec![10_000, 70_000], "CNP times");
    for c in &cnps {
        let f = &c.data;
        assert_eq!(f.len(), 74);
        assert_eq!(&f[0..6], &HOST, "back to the sender's MAC");
        assert_eq!(
            &f[26..30],
            &REMOTE.octets(),
            "IP src = the data's destination"
        );
        assert_eq!(&f[30..34], &CLIENT.octets(), "IP dst = the data's source");
        let bth = Bth::new_checked(&f[42..]).unwrap();
        assert_eq!(bth.opcode(), opcode::CNP);
        assert_eq!(bth.dest_qp(), CQPN, "DestQP = cQPN");
        assert_eq!(f[46] & 0x40, 0x40, "BECN");
        assert_eq!(icrc::verify(f, 14), Ok(true));
        assert_eq!(c.meta.class, 6, "DSCP 48 -> class 6");
    }
    let fwd: Vec<&Emitted> = on(&out, WAN0);
    assert_eq!(fwd.len(), 7);
    for f in &fwd[..6] {
        assert_eq!(ecn::get(&f.data, 14), Some(ecn::ECT0), "CE cleared");
        assert_eq!(icrc::verify(&f.data, 14), Ok(true), "ICRC still valid");
    }
    assert_eq!(
        ecn::get(&fwd[6].data, 14),
        Some(ecn::CE),
        "no entry: CE kept"
    );
    assert_eq!(counter(&h, "themis.cnps_sent"), 2);
    assert_eq!(counter(&h, "themis.pnp.suppressed"), 4);
    assert_eq!(counter(&h, "themis.pnp.ce_without_entry"), 1);
}

#[test]
fn daemon_destroy_and_untrusted_source() {
    let cfg = config(|t| t);
    let mut h = harness(&cfg);
    let data = roce(
        HOST,
        ROUTER,
        CLIENT,
        REMOTE,
        opcode::RC_SEND_ONLY,
        SQPN,
        1,
        ecn::CE,
    );
    // From outside host_prefixes: refused, so no CNP.
    h.put(
        DC0,
        1_000,
        &daemon(Ipv4Addr::new(192, 168, 1, 1), DaemonOp::CreateOrModify),
    );
    h.put(DC0, 2_000, &data);
    // Create, CNP, destroy, no CNP.
    h.put(DC0, 10_000, &daemon(CLIENT, DaemonOp::CreateOrModify));
    h.put(DC0, 11_000, &data);
    h.put(DC0, 20_000, &daemon(CLIENT, DaemonOp::Destroy));
    h.put(DC0, 200_000, &data);
    h.run_to_idle();
    let out = h.take();
    let ts: Vec<u64> = on(&out, DC0).iter().map(|e| e.ts).collect();
    assert_eq!(ts, vec![11_000]);
    assert_eq!(h.sw.pipeline().qp_field().len(), 0);
    assert_eq!(counter(&h, "themis.daemon_punts"), 3);
}

#[test]
fn receiver_cnp_throttles_the_opposite_direction_by_recirculation() {
    let cfg = config(|t| t);
    let mut h = harness(&cfg);
    // The local receiver 10.0.0.1 (QPN CQPN) receives from remote 10.1.0.1 (QPN SQPN).
    h.put(DC0, 1_000, &daemon(CLIENT, DaemonOp::CreateOrModify));
    // Before any CNP: remote data to our receiver passes straight (DestQP = our QPN).
    let data = |psn| {
        roce(
            PEER,
            WAN_ROUTER,
            REMOTE,
            CLIENT,
            opcode::RC_SEND_ONLY,
            CQPN,
            psn,
            ecn::ECT0,
        )
    };
    h.put(WAN0, 5_000, &data(1));
    // The receiver's CNP toward the remote sender (DestQP = the sender's QPN).
    let cnp = roce(
        HOST,
        ROUTER,
        CLIENT,
        REMOTE,
        opcode::CNP,
        SQPN,
        0,
        ecn::ECT0,
    );
    h.put(DC0, 10_000, &cnp);
    // Data after the CNP loops once (loop_num 1): delayed by one loop.
    h.put(WAN0, 20_000, &data(2));
    // Another flow (another QPN) is untouched.
    let other = roce(
        PEER,
        WAN_ROUTER,
        REMOTE,
        CLIENT,
        opcode::RC_SEND_ONLY,
        0x777,
        5,
        ecn::ECT0,
    );
    h.put(WAN0, 20_000, &other);
    h.run_to_idle();
    let out = h.take();
    let to_dc: Vec<&Emitted> = on(&out, DC0);
    let psn_ts: Vec<(u32, u32, u64)> = to_dc
        .iter()
        .map(|e| {
            let b = Bth::new_checked(&e.data[42..]).unwrap();
            (b.dest_qp(), b.psn(), e.ts)
        })
        .collect();
    // One loop: 314 B at 100 Gb/s = 26 ns serialization (ceil) + 2000 ns loop delay.
    let loop_ns = (314u64 * 8).div_ceil(100) + 2_000;
    assert_eq!(
        psn_ts,
        vec![
            (CQPN, 1, 5_000),
            (0x777, 5, 20_000),
            (CQPN, 2, 20_000 + loop_ns)
        ]
    );
    assert_eq!(to_dc[2].meta.loop_count, 1);
    // The CNP_Store slot the looping packet carried in `meta.user` (TRP's hint) is cleared
    // when it leaves the loop.
    assert_eq!(to_dc[2].meta.user, 0);
    // The CNP itself was forwarded to the WAN.
    assert_eq!(on(&out, WAN0).len(), 1);
    assert_eq!(counter(&h, "themis.cnp_punts"), 1);
    assert!(h.sw.pipeline().trp().unwrap().stats().cnps > 0);
}

#[test]
fn syn_cookie_handshake_monitor_marks_the_pair_inter_dc() {
    // Handshake mode: no remote prefixes.
    let cfg = config(|t| {
        t.replace(
            "inter_dc_prefixes = [\"10.1.0.0/16\"]",
            "inter_dc_prefixes = []",
        )
    });
    let mut h = harness(&cfg);
    let seg = |flags: u8, seq: u32, ack: u32| {
        let mut b = [0u8; 128];
        let r = tcp::TcpRepr {
            src_port: 40000,
            dst_port: 4791,
            seq,
            ack,
            flags,
            window: 1000,
            mss: if flags & tcp::SYN != 0 {
                Some(1460)
            } else {
                None
            },
        };
        let n = tcp::build_frame_v4(&mut b, MacAddr(ROUTER), MacAddr(HOST), CLIENT, REMOTE, &r)
            .unwrap();
        b[..n].to_vec()
    };
    h.put(DC0, 1_000, &seg(tcp::SYN, 5000, 0));
    h.run_to_idle();
    let out = h.take();
    assert_eq!(on(&out, WAN0).len(), 0, "the SYN does not leave the DC");
    let synack = &on(&out, DC0)[0].data;
    let sa = tcp::TcpPacket::new_checked(&synack[34..]).unwrap();
    assert_eq!(sa.flags() & (tcp::SYN | tcp::ACK), tcp::SYN | tcp::ACK);
    assert_eq!(sa.ack(), 5001);
    let cookie = sa.seq();
    // The client's ACK with the cookie: answered with a RST, the pair becomes inter-DC.
    h.put(DC0, 2_000, &seg(tcp::ACK, 5001, cookie.wrapping_add(1)));
    // The retried handshake passes to the WAN.
    h.put(DC0, 3_000, &seg(tcp::SYN, 9000, 0));
    h.run_to_idle();
    let out = h.take();
    let rst = &on(&out, DC0)[0].data;
    let r = tcp::TcpPacket::new_checked(&rst[34..]).unwrap();
    assert_ne!(r.flags() & tcp::RST, 0);
    assert_eq!(on(&out, WAN0).len(), 1, "the retried SYN is forwarded");
    assert_eq!(counter(&h, "themis.handshake_punts"), 1);
    // Then a daemon message for that pair is accepted (handshake mode).
    h.put(DC0, 4_000, &daemon(CLIENT, DaemonOp::CreateOrModify));
    h.run_to_idle();
    assert_eq!(h.sw.pipeline().qp_field().len(), 1);
}

#[test]
fn a_live_run_draws_its_own_cookie_secret() {
    let cfg = config(|t| {
        t.replace(
            "inter_dc_prefixes = [\"10.1.0.0/16\"]",
            "inter_dc_prefixes = []",
        )
    });
    let syn = {
        let mut b = [0u8; 128];
        let r = tcp::TcpRepr {
            src_port: 40001,
            dst_port: 80,
            seq: 77,
            ack: 0,
            flags: tcp::SYN,
            window: 1000,
            mss: Some(1460),
        };
        let n = tcp::build_frame_v4(&mut b, MacAddr(ROUTER), MacAddr(HOST), CLIENT, REMOTE, &r)
            .unwrap();
        b[..n].to_vec()
    };
    let cookie = |cfg: &Config| {
        let mut h = harness(cfg);
        h.put(DC0, 1_000, &syn);
        h.run_to_idle();
        let out = h.take();
        let sa = &on(&out, DC0)[0].data;
        tcp::TcpPacket::new_checked(&sa[34..]).unwrap().seq()
    };
    // Replay: the secret comes from [switch] seed, so the cookie is reproducible.
    let from_seed = cookie(&cfg);
    assert_eq!(cookie(&cfg), from_seed);
    // `longhaul run` draws a random secret: the config's seed no longer predicts the cookie, and
    // every switch of the process (workers, rebuilds) shares the new secret.
    longhaul_pipelines::themis::esw::use_random_cookie_secret();
    let live = cookie(&cfg);
    assert_ne!(live, from_seed);
    assert_eq!(cookie(&cfg), live);
}
