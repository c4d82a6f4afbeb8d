//! THEMIS PNP stages end to end (paper section IV): the TCP handshake monitor with SYN cookies
//! feeding the inter-DC pair set, daemon messages feeding QP_field, and CNP generation with
//! cnp_interval, on real frames. Generated packets are checked field by field, with the
//! dataplane's ICRC code, with independent checksum arithmetic, and (when python3 with scapy is
//! installed) by scapy re-serializing them.

use longhaul_dataplane::wire::ecn;
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::icrc;
use longhaul_dataplane::wire::parse::{parse, ParseOptions, Parsed};
use longhaul_dataplane::wire::roce::{self, Bth, BthRepr, RoceAddrs};
use longhaul_dataplane::wire::tcp::{self, TcpRepr};
use longhaul_pipelines::themis::daemon::{
    build_daemon_frame, parse_daemon, Daemon, DaemonMsg, DaemonOp, DaemonPolicy, DaemonReject,
    InterDcPairs, InterDcSource, QpField, QpKey, QpUpdate, Refusal,
};
use longhaul_pipelines::themis::pnp::{Pnp, PnpParams, PnpVerdict};
use longhaul_pipelines::themis::syncookie::{AckVerdict, SynCookies};
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

const HOST: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 5);
const REMOTE: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 9);
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x05];
const ESW_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xee];
const SQPN: u32 = 0x00_0a_bc;
const CQPN: u32 = 0x12_34_56;
const DC_PORT: u16 = 1;

fn opts() -> ParseOptions {
    ParseOptions::default()
}

fn bth(dest_qp: u32) -> BthRepr {
    BthRepr {
        opcode: roce::opcode::RC_RDMA_WRITE_MIDDLE,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qp,
        ack_req: false,
        psn: 0x0100,
    }
}

/// A RoCEv2 data packet from HOST (QP cQPN) to REMOTE's QP sQPN, optionally CE-marked.
fn data_v4(ce: bool) -> Vec<u8> {
    let mut b = [0u8; 2048];
    let a = RoceAddrs {
        src_mac: MacAddr(HOST_MAC),
        dst_mac: MacAddr(ESW_MAC),
        src_ip: HOST,
        dst_ip: REMOTE,
        udp_sport: 0xd00d,
        dscp: 26,
        ecn: ecn::ECT0,
    };
    let n = roce::build_roce_v4(&mut b, &a, &bth(SQPN), &[0xa5; 1024]).unwrap();
    let mut f = b[..n].to_vec();
    if ce {
        // Marking CE (as a congested switch does) keeps the ICRC valid.
        assert!(ecn::set(&mut f, 14, ecn::CE));
    }
    f
}

fn tcp_v4(flags: u8, seq: u32, ack: u32) -> Vec<u8> {
    let mut b = [0u8; 128];
    let r = TcpRepr {
        src_port: 41000,
        dst_port: 18515,
        seq,
        ack,
        flags,
        window: 64240,
        mss: if flags & tcp::SYN != 0 {
            Some(1460)
        } else {
            None
        },
    };
    let n = tcp::build_frame_v4(
        &mut b,
        MacAddr(ESW_MAC),
        MacAddr(HOST_MAC),
        HOST,
        REMOTE,
        &r,
    )
    .unwrap();
    b[..n].to_vec()
}

fn policy() -> DaemonPolicy {
    DaemonPolicy {
        allowed_prefixes: vec![(u32::from(Ipv4Addr::new(10, 1, 0, 0)), 16)],
        allowed_ports: vec![DC_PORT],
        inter_dc: InterDcSource::HandshakeMonitor,
    }
}

fn daemon_frame(src: Ipv4Addr, op: DaemonOp, cqpn: u32) -> (Vec<u8>, Parsed) {
    let m = DaemonMsg {
        client_ip: u32::from(src),
        dst_ip: u32::from(REMOTE),
        cqpn,
        sqpn: SQPN,
        op,
    };
    let mut b = [0u8; 128];
    let n = build_daemon_frame(
        &mut b,
        HOST_MAC,
        ESW_MAC,
        src,
        Ipv4Addr::new(255, 255, 255, 255),
        &m,
    )
    .unwrap();
    let f = b[..n].to_vec();
    let p = parse(&f, &opts());
    (f, p)
}

fn key() -> QpKey {
    QpKey::v4(u32::from(HOST), u32::from(REMOTE), SQPN)
}

/// RFC 1071 checksum over the concatenation of `parts` (0 when a packet with its checksum
/// field included verifies). Written here, independent of the dataplane's code.
fn ocsum(parts: &[&[u8]]) -> u16 {
    let mut all = Vec::new();
    for p in parts {
        all.extend_from_slice(p);
    }
    if all.len() % 2 == 1 {
        all.push(0);
    }
    let mut s: u64 = all
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u64)
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Independent ICRC (DESIGN.md section 5) for an untagged IPv4 RoCEv2 frame: CRC-32 over 8 x 0xff,
/// the IPv4 header with ToS/TTL/checksum as ones, UDP with checksum as ones, BTH with byte 4 as
/// ones, the rest up to the ICRC. Bitwise CRC-32, no crc32fast.
fn icrc_v4_independent(f: &[u8]) -> u32 {
    let mut m = vec![0xffu8; 8];
    let mut ip = f[14..34].to_vec();
    ip[1] = 0xff;
    ip[8] = 0xff;
    ip[10] = 0xff;
    ip[11] = 0xff;
    m.extend_from_slice(&ip);
    let mut udp = f[34..42].to_vec();
    udp[6] = 0xff;
    udp[7] = 0xff;
    m.extend_from_slice(&udp);
    let mut b = f[42..54].to_vec();
    b[4] = 0xff;
    m.extend_from_slice(&b);
    let ulen = u16::from_be_bytes([f[38], f[39]]) as usize;
    m.extend_from_slice(&f[54..34 + ulen - 4]);
    let mut crc = 0xffff_ffffu32;
    for byte in m {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Run `script` with python3 when scapy is importable; `None` when it is not available.
fn scapy(script: &str) -> Option<String> {
    let probe = Command::new("python3")
        .args(["-c", "import scapy.all, scapy.contrib.roce"])
        .output()
        .ok()?;
    if !probe.status.success() {
        eprintln!("scapy not available: independent decode skipped");
        return None;
    }
    let out = Command::new("python3").args(["-c", script]).output().ok()?;
    assert!(
        out.status.success(),
        "scapy check failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn cnp_exact_fields() {
    let mut pnp = Pnp::new(PnpParams::default()).unwrap();
    let mut qp = QpField::new(16);
    qp.insert(key(), CQPN, 0).unwrap();
    let mut f = data_v4(true);
    let p = parse(&f, &opts());
    let mut out = [0u8; 256];
    let v = pnp.on_data(&mut f, &p, 5_000, &mut qp, &mut out);
    assert_eq!(v, PnpVerdict::Cnp { len: 74 });
    let c = &out[..74];
    // Ethernet: back where the data came from.
    assert_eq!(&c[0..6], &HOST_MAC);
    assert_eq!(&c[6..12], &ESW_MAC);
    assert_eq!(&c[12..14], &[0x08, 0x00]);
    // IPv4: ToS = DSCP 48 | ECT(0), total length 60, DF, TTL 64, UDP, addresses swapped.
    assert_eq!(c[14], 0x45);
    assert_eq!(c[15], (48 << 2) | 0b10);
    assert_eq!(u16::from_be_bytes([c[16], c[17]]), 60);
    assert_eq!(&c[20..22], &[0x40, 0x00]);
    assert_eq!((c[22], c[23]), (64, 17));
    assert_eq!(&c[26..30], &REMOTE.octets());
    assert_eq!(&c[30..34], &HOST.octets());
    assert_eq!(ocsum(&[&c[14..34]]), 0, "IPv4 header checksum");
    // UDP: source port of the data, destination 4791, length 40, checksum 0.
    assert_eq!(u16::from_be_bytes([c[34], c[35]]), 0xd00d);
    assert_eq!(u16::from_be_bytes([c[36], c[37]]), 4791);
    assert_eq!(u16::from_be_bytes([c[38], c[39]]), 40);
    assert_eq!(&c[40..42], &[0, 0]);
    // BTH: opcode 0x81, P_Key 0xffff, BECN, DestQP = cQPN, PSN 0; 16 reserved zero bytes.
    assert_eq!(c[42], 0x81);
    assert_eq!(c[43], 0);
    assert_eq!(&c[44..46], &[0xff, 0xff]);
    assert_eq!(c[46], 0x40);
    assert_eq!(&c[47..50], &CQPN.to_be_bytes()[1..]);
    assert_eq!(&c[50..54], &[0, 0, 0, 0]);
    assert_eq!(&c[54..70], &[0u8; 16]);
    // ICRC: dataplane verify and an independent bitwise CRC.
    assert_eq!(icrc::verify(c, 14), Ok(true));
    assert_eq!(
        u32::from_le_bytes([c[70], c[71], c[72], c[73]]),
        icrc_v4_independent(c)
    );
    // The forwarded data: CE cleared to ECT(0), IPv4 checksum and ICRC still valid.
    assert_eq!(ecn::get(&f, 14), Some(ecn::ECT0));
    assert_eq!(ocsum(&[&f[14..34]]), 0);
    assert_eq!(icrc::verify(&f, 14), Ok(true));
    assert_eq!(
        icrc::stored(&f, 14).unwrap(),
        icrc_v4_independent(&f),
        "ICRC of the forwarded data"
    );
    // scapy: decode the CNP and the forwarded data; re-serializing with ICRC and checksums
    // recomputed by scapy must give the same bytes.
    let script = format!(
        r#"
from scapy.all import Ether, IP, UDP
from scapy.contrib.roce import BTH
for h, cnp in (("{}", True), ("{}", False)):
    p = Ether(bytes.fromhex(h))
    b = p[BTH]
    if cnp:
        assert b.opcode == 0x81 and b.becn == 1 and b.fecn == 0 and b.pkey == 0xffff, b.show(dump=True)
        assert b.dqpn == {} and b.psn == 0
        assert p[IP].src == "{}" and p[IP].dst == "{}" and p[IP].tos == 0xc2 and p[IP].len == 60
        assert p[UDP].dport == 4791 and p[UDP].len == 40
    else:
        assert p[IP].tos & 3 == 2 and b.dqpn == {}
    q = p.copy()
    q[BTH].icrc = None
    q[IP].chksum = None
    assert bytes(q) == bytes(p), (bytes(q).hex(), h)
print("ok")
"#,
        hex(c),
        hex(&f),
        CQPN,
        REMOTE,
        HOST,
        SQPN
    );
    if let Some(o) = scapy(&script) {
        assert_eq!(o.trim(), "ok");
    }
}

#[test]
fn interval_suppression_exact_times() {
    let mut pnp = Pnp::new(PnpParams {
        cnp_interval_ns: 50_000,
        ..PnpParams::default()
    })
    .unwrap();
    let mut qp = QpField::new(16);
    qp.insert(key(), CQPN, 0).unwrap();
    let p = parse(&data_v4(true), &opts());
    let mut out = [0u8; 256];
    let mut run = |t: u64| {
        let mut f = data_v4(true);
        let v = pnp.on_data(&mut f, &p, t, &mut qp, &mut out);
        // CE always cleared when there is an entry, and the ICRC still verifies.
        assert_eq!(ecn::get(&f, 14), Some(ecn::ECT0));
        assert_eq!(icrc::verify(&f, 14), Ok(true));
        matches!(v, PnpVerdict::Cnp { .. })
    };
    // First CE at t = 0 gives a CNP even though 0 - "never" is not defined.
    let got: Vec<(u64, bool)> = [
        0, 1, 49_999, 50_000, 50_001, 99_999, 100_000, 100_000, 180_000, 229_999, 230_000,
    ]
    .iter()
    .map(|&t| (t, run(t)))
    .collect();
    assert_eq!(
        got,
        vec![
            (0, true),
            (1, false),
            (49_999, false),
            (50_000, true),
            (50_001, false),
            (99_999, false),
            (100_000, true),
            (100_000, false),
            (180_000, true),
            (229_999, false),
            (230_000, true),
        ]
    );
    let s = pnp.stats();
    assert_eq!((s.generated, s.suppressed, s.ce_cleared), (5, 6, 11));
    // A smaller interval at run time.
    pnp.set_cnp_interval(10);
    let mut f = data_v4(true);
    assert!(matches!(
        pnp.on_data(&mut f, &p, 230_010, &mut qp, &mut out),
        PnpVerdict::Cnp { .. }
    ));
}

#[test]
fn no_cnp_without_entry_and_non_roce() {
    let mut pnp = Pnp::new(PnpParams::default()).unwrap();
    let mut qp = QpField::new(16);
    let mut out = [0u8; 256];
    let mut f = data_v4(true);
    let p = parse(&f, &opts());
    assert_eq!(
        pnp.on_data(&mut f, &p, 0, &mut qp, &mut out),
        PnpVerdict::CeNoEntry
    );
    assert_eq!(
        ecn::get(&f, 14),
        Some(ecn::CE),
        "CE kept: the receiver notifies"
    );
    assert_eq!(f, data_v4(true), "frame untouched");
    // Entry for another sQPN, or another client: still no entry.
    qp.insert(
        QpKey::v4(u32::from(HOST), u32::from(REMOTE), SQPN + 1),
        CQPN,
        0,
    )
    .unwrap();
    qp.insert(QpKey::v4(u32::from(REMOTE), u32::from(HOST), SQPN), CQPN, 0)
        .unwrap();
    assert_eq!(
        pnp.on_data(&mut f, &p, 0, &mut qp, &mut out),
        PnpVerdict::CeNoEntry
    );
    assert_eq!(pnp.stats().ce_without_entry, 2);
    assert_eq!(pnp.stats().generated, 0);
    // TCP and a CNP: not RoCE data.
    let mut t = tcp_v4(tcp::SYN, 1, 0);
    let pt = parse(&t, &opts());
    assert_eq!(
        pnp.on_data(&mut t, &pt, 0, &mut qp, &mut out),
        PnpVerdict::NotRoce
    );
    let mut c = [0u8; 128];
    let n = roce::build_cnp_v4(&mut c, HOST_MAC, ESW_MAC, HOST, REMOTE, 1, SQPN, 48).unwrap();
    assert!(ecn::set(&mut c[..n], 14, ecn::CE));
    let pc = parse(&c[..n], &opts());
    assert_eq!(
        pnp.on_data(&mut c[..n], &pc, 0, &mut qp, &mut out),
        PnpVerdict::NotRoce
    );
}

#[test]
fn vlan_tagged_and_ipv6_cnps() {
    let mut pnp = Pnp::new(PnpParams::default()).unwrap();
    let mut qp = QpField::new(16);
    qp.insert(key(), CQPN, 0).unwrap();
    // Tagged: insert an 802.1Q tag (VID 100, PCP 3) after the MACs.
    let untagged = data_v4(true);
    let mut f = untagged[..12].to_vec();
    f.extend_from_slice(&[0x81, 0x00, 0x60, 0x64]);
    f.extend_from_slice(&untagged[12..]);
    let p = parse(&f, &opts());
    assert_eq!(p.l3_off, 18);
    let mut out = [0u8; 256];
    assert_eq!(
        pnp.on_data(&mut f, &p, 0, &mut qp, &mut out),
        PnpVerdict::Cnp { len: 78 }
    );
    assert_eq!(&out[0..6], &HOST_MAC);
    assert_eq!(&out[6..12], &ESW_MAC);
    assert_eq!(&out[12..18], &[0x81, 0x00, 0x60, 0x64, 0x08, 0x00]);
    assert_eq!(icrc::verify(&out[..78], 18), Ok(true));
    let pc = parse(&out[..78], &opts());
    assert_eq!((pc.tags, pc.bth_off), (1, 46));
    assert_eq!(icrc::verify(&f, 18), Ok(true));
    // IPv6: an entry inserted by the control plane (the daemon format is IPv4-only).
    let (c6, s6): (Ipv6Addr, Ipv6Addr) =
        ("fd00:1::5".parse().unwrap(), "fd00:2::9".parse().unwrap());
    qp.insert(QpKey::from_ips(c6.into(), s6.into(), SQPN), CQPN, 0)
        .unwrap();
    let mut b = [0u8; 512];
    let a = RoceAddrs {
        src_mac: MacAddr(HOST_MAC),
        dst_mac: MacAddr(ESW_MAC),
        src_ip: c6,
        dst_ip: s6,
        udp_sport: 0xbeef,
        dscp: 26,
        ecn: ecn::CE,
    };
    let n = roce::build_roce_v6(&mut b, &a, &bth(SQPN), &[1; 100]).unwrap();
    let mut f6 = b[..n].to_vec();
    let p6 = parse(&f6, &opts());
    assert_eq!(
        pnp.on_data(&mut f6, &p6, 0, &mut qp, &mut out),
        PnpVerdict::Cnp { len: 94 }
    );
    let c = &out[..94];
    assert_eq!(icrc::verify(c, 14), Ok(true));
    assert_eq!(&c[22..38], &s6.octets());
    assert_eq!(&c[38..54], &c6.octets());
    let bt = Bth::new_checked(&c[62..]).unwrap();
    assert_eq!((bt.opcode(), bt.becn(), bt.dest_qp()), (0x81, true, CQPN));
    assert_eq!(ecn::get(&f6, 14), Some(ecn::ECT0));
    assert_eq!(icrc::verify(&f6, 14), Ok(true));
    let script = format!(
        r#"
from scapy.all import Ether, IPv6
from scapy.contrib.roce import BTH
p = Ether(bytes.fromhex("{}"))
assert p[BTH].opcode == 0x81 and p[BTH].becn == 1 and p[BTH].dqpn == {}
assert p[IPv6].src == "{}" and p[IPv6].dst == "{}" and p[IPv6].plen == 40
q = p.copy()
q[BTH].icrc = None
assert bytes(q) == bytes(p)
print("ok")
"#,
        hex(c),
        CQPN,
        s6,
        c6
    );
    if let Some(o) = scapy(&script) {
        assert_eq!(o.trim(), "ok");
    }
}

/// The whole PNP control loop: handshake monitor -> inter-DC pair -> daemon create -> CNPs ->
/// daemon destroy (entry deleted, register reset) -> no more CNPs.
#[test]
fn handshake_daemon_cnp_destroy() {
    let mut sc = SynCookies::new(0x1234_5678_9abc_def0, 1_000_000_000);
    let mut pairs = InterDcPairs::new(64);
    let mut qp = PnpParams::default().new_qp_field();
    let mut daemon = Daemon::new(policy());
    let mut pnp = Pnp::new(PnpParams::default()).unwrap();
    let mut out = [0u8; 256];

    // A daemon create before the pair is known is refused (not inter-DC).
    let (cf, cp) = daemon_frame(HOST, DaemonOp::CreateOrModify, CQPN);
    assert_eq!(
        daemon.handle(&cf, &cp, DC_PORT, 0, &pairs, &mut qp),
        Err(DaemonReject::Refused(Refusal::NotInterDc))
    );

    // Handshake: SYN -> SYN-ACK(cookie) -> ACK -> RST, pair recorded.
    let syn = tcp_v4(tcp::SYN, 0x1000_0000, 0);
    let ps = parse(&syn, &opts());
    let n = sc.on_syn(&syn, &ps, 100, &mut out).unwrap();
    let synack = out[..n].to_vec();
    assert_eq!(ocsum(&[&synack[14..34]]), 0);
    let mut pseudo = synack[26..34].to_vec();
    pseudo.extend_from_slice(&[0, 6, 0, (n - 34) as u8]);
    assert_eq!(ocsum(&[&pseudo, &synack[34..n]]), 0, "SYN-ACK TCP checksum");
    let cookie = u32::from_be_bytes([synack[38], synack[39], synack[40], synack[41]]);
    let ack = tcp_v4(tcp::ACK, 0x1000_0001, cookie.wrapping_add(1));
    let pa = parse(&ack, &opts());
    let v = sc.on_ack(&ack, &pa, 30_100, &mut out);
    let AckVerdict::Valid {
        rst_len,
        client_ip,
        server_ip,
    } = v
    else {
        panic!("{v:?}");
    };
    let rst = out[..rst_len].to_vec();
    assert_eq!((client_ip, server_ip), (HOST.into(), REMOTE.into()));
    assert!(pairs.record_ip(client_ip, server_ip, 30_100));
    let mut pseudo = rst[26..34].to_vec();
    pseudo.extend_from_slice(&[0, 6, 0, 20]);
    assert_eq!(ocsum(&[&pseudo, &rst[34..54]]), 0, "RST TCP checksum");
    let script = format!(
        r#"
from scapy.all import Ether, IP, TCP
sa = Ether(bytes.fromhex("{}"))
assert sa[TCP].flags == "SA" and sa[TCP].ack == 0x10000001, sa.show(dump=True)
assert sa[IP].src == "{}" and sa[IP].dst == "{}" and sa[TCP].sport == 18515 and sa[TCP].dport == 41000
assert dict(sa[TCP].options)["MSS"] == 1460
r = Ether(bytes.fromhex("{}"))
assert r[TCP].flags == "R" and r[TCP].seq == {}
for p in (sa, r):
    q = p.copy()
    q[IP].chksum = None
    q[TCP].chksum = None
    assert bytes(q) == bytes(p)
print("ok")
"#,
        hex(&synack),
        REMOTE,
        HOST,
        hex(&rst),
        cookie.wrapping_add(1)
    );
    if let Some(o) = scapy(&script) {
        assert_eq!(o.trim(), "ok");
    }

    // Daemon create: accepted now; repeated (RTR, RTS) as modifies.
    assert_eq!(
        daemon.handle(&cf, &cp, DC_PORT, 40_000, &pairs, &mut qp),
        Ok(QpUpdate::Created {
            key: key(),
            cqpn: CQPN
        })
    );
    assert!(matches!(
        daemon.handle(&cf, &cp, DC_PORT, 40_001, &pairs, &mut qp),
        Ok(QpUpdate::Modified { .. })
    ));

    // CE data: CNP at 100_000, suppressed at 120_000.
    let pd = parse(&data_v4(true), &opts());
    let mut f = data_v4(true);
    assert!(matches!(
        pnp.on_data(&mut f, &pd, 100_000, &mut qp, &mut out),
        PnpVerdict::Cnp { .. }
    ));
    assert_eq!(Bth::new_checked(&out[42..]).unwrap().dest_qp(), CQPN);
    let mut f = data_v4(true);
    assert_eq!(
        pnp.on_data(&mut f, &pd, 120_000, &mut qp, &mut out),
        PnpVerdict::Suppressed
    );
    assert_eq!(pnp.last_cnp(&key()), Some(100_000));

    // Destroy: entry deleted, register reset.
    let (df, dp) = daemon_frame(HOST, DaemonOp::Destroy, CQPN);
    let u = daemon
        .handle(&df, &dp, DC_PORT, 130_000, &pairs, &mut qp)
        .unwrap();
    assert_eq!(
        u,
        QpUpdate::Destroyed {
            key: key(),
            cqpn: CQPN
        }
    );
    let k = u.register_reset().unwrap();
    let idx = pnp.register_index(&k);
    assert!(pnp.reset_register(idx));
    assert_eq!(pnp.last_cnp(&key()), None);
    assert!(qp.is_empty());
    let mut f = data_v4(true);
    assert_eq!(
        pnp.on_data(&mut f, &pd, 140_000, &mut qp, &mut out),
        PnpVerdict::CeNoEntry
    );
    // Re-created: the reset register lets a CNP out at once (only 40 us after the last one).
    daemon
        .handle(&cf, &cp, DC_PORT, 141_000, &pairs, &mut qp)
        .unwrap();
    let mut f = data_v4(true);
    assert!(matches!(
        pnp.on_data(&mut f, &pd, 142_000, &mut qp, &mut out),
        PnpVerdict::Cnp { .. }
    ));
    let s = daemon.stats;
    assert_eq!(
        (s.created, s.modified, s.destroyed, s.refused_not_inter_dc),
        (2, 1, 1, 1)
    );
}

#[test]
fn daemon_refused_from_wrong_prefix_or_port() {
    let mut pairs = InterDcPairs::new(8);
    let outsider = Ipv4Addr::new(192, 168, 7, 7);
    pairs.record(u32::from(HOST), u32::from(REMOTE), 0).unwrap();
    pairs
        .record(u32::from(outsider), u32::from(REMOTE), 0)
        .unwrap();
    let mut qp = QpField::new(8);
    let mut d = Daemon::new(policy());
    let (f, p) = daemon_frame(outsider, DaemonOp::CreateOrModify, CQPN);
    assert_eq!(
        parse_daemon(&f, &p).map(|m| m.client_ip),
        Ok(u32::from(outsider))
    );
    assert_eq!(
        d.handle(&f, &p, DC_PORT, 0, &pairs, &mut qp),
        Err(DaemonReject::Refused(Refusal::SourceNotAllowed))
    );
    let (f, p) = daemon_frame(HOST, DaemonOp::CreateOrModify, CQPN);
    assert_eq!(
        d.handle(&f, &p, 7, 0, &pairs, &mut qp),
        Err(DaemonReject::Refused(Refusal::PortNotAllowed))
    );
    // A destroy from a wrong port is refused too (it could delete another host's entry).
    qp.insert(key(), CQPN, 0).unwrap();
    let (f, p) = daemon_frame(HOST, DaemonOp::Destroy, CQPN);
    assert_eq!(
        d.handle(&f, &p, 7, 0, &pairs, &mut qp),
        Err(DaemonReject::Refused(Refusal::PortNotAllowed))
    );
    assert_eq!(qp.len(), 1);
    // Empty policy lists accept nothing.
    let mut closed = Daemon::new(DaemonPolicy {
        allowed_prefixes: vec![],
        allowed_ports: vec![],
        inter_dc: InterDcSource::HandshakeMonitor,
    });
    assert!(closed.handle(&f, &p, DC_PORT, 0, &pairs, &mut qp).is_err());
    assert_eq!((d.stats.refused_source, d.stats.refused_port), (1, 2));
    assert_eq!(closed.stats.refused_port, 1);
    // Not a daemon datagram at all: counted apart.
    let t = tcp_v4(tcp::SYN, 1, 0);
    let pt = parse(&t, &opts());
    assert!(d.handle(&t, &pt, DC_PORT, 0, &pairs, &mut qp).is_err());
    assert_eq!((d.stats.not_daemon, d.stats.malformed), (1, 0));
}

/// A SYN flood grows no state: the monitor is `Copy` (it cannot own heap memory), its size is a
/// constant, and after 100 000 SYNs from random sources everything but the counters is as
/// before.
#[test]
fn syn_flood_keeps_no_state() {
    fn assert_copy<T: Copy>() {}
    assert_copy::<SynCookies>();
    assert!(std::mem::size_of::<SynCookies>() <= 160);
    let mut sc = SynCookies::new(99, 1_000_000_000);
    let mut out = [0u8; 128];
    let mut syn = tcp_v4(tcp::SYN, 1, 0);
    let mut sent = 0u64;
    for i in 0..100_000u32 {
        // Vary the client address and port; fix the IPv4 and TCP checksums.
        syn[26..30].copy_from_slice(&(0x0a01_0000u32 | (i & 0xffff)).to_be_bytes());
        syn[34..36].copy_from_slice(&((i >> 16) as u16 ^ 0x8000).to_be_bytes());
        syn[24] = 0;
        syn[25] = 0;
        let c = ocsum(&[&syn[14..34]]);
        syn[24..26].copy_from_slice(&c.to_be_bytes());
        syn[50] = 0;
        syn[51] = 0;
        let mut pseudo = syn[26..34].to_vec();
        pseudo.extend_from_slice(&[0, 6, 0, 24]);
        let c = ocsum(&[&pseudo, &syn[34..58]]);
        syn[50..52].copy_from_slice(&c.to_be_bytes());
        let p = parse(&syn, &opts());
        if sc.on_syn(&syn, &p, u64::from(i), &mut out).is_some() {
            sent += 1;
        }
    }
    assert_eq!(sent, 100_000);
    assert_eq!(sc.stats().synacks, 100_000);
    // Apart from its counters, the flooded monitor equals a fresh one at the same time.
    let mut fresh = SynCookies::new(99, 1_000_000_000);
    fresh.rotate(99_999);
    sc.reset_stats();
    assert_eq!(sc, fresh);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Random bytes never panic any parser or stage.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), t in any::<u64>()) {
        let mut f = bytes.clone();
        let p = parse(&f, &opts());
        let _ = parse_daemon(&f, &p);
        let mut sc = SynCookies::new(1, 1000);
        let mut out = [0u8; 256];
        let _ = sc.on_syn(&f, &p, t, &mut out);
        let _ = sc.on_ack(&f, &p, t, &mut out);
        let mut pnp = Pnp::new(PnpParams::default()).unwrap();
        let mut qp = QpField::new(4);
        let _ = pnp.on_data(&mut f, &p, t, &mut qp, &mut out);
        let _ = pnp.on_data(&mut f, &p, t, &mut qp, &mut [0u8; 3]);
        let pairs = InterDcPairs::new(4);
        let mut d = Daemon::new(policy());
        let _ = d.handle(&f, &p, DC_PORT, t, &pairs, &mut qp);
        // A Parsed that lies about the offsets must not panic either.
        let liar = Parsed { l3_off: 14, l4_off: 34, bth_off: 42, l3_end: 500, ..p };
        let _ = parse_daemon(&f, &liar);
        let _ = sc.on_syn(&f, &liar, t, &mut out);
        let _ = pnp.on_data(&mut f, &liar, t, &mut qp, &mut out);
    }

    /// Random mutations of valid frames never panic, and a mutated CE data packet never yields a
    /// CNP with an invalid ICRC.
    #[test]
    fn mutated_frames(pos in 0usize..1100, val in any::<u8>(), which in 0u8..4) {
        let mut f = match which {
            0 => data_v4(true),
            1 => tcp_v4(tcp::SYN, 5, 0),
            2 => tcp_v4(tcp::ACK, 6, 7),
            _ => daemon_frame(HOST, DaemonOp::CreateOrModify, CQPN).0,
        };
        if pos < f.len() {
            f[pos] = val;
        }
        let p = parse(&f, &opts());
        let mut out = [0u8; 256];
        let mut qp = QpField::new(4);
        qp.insert(key(), CQPN, 0).unwrap();
        let mut pnp = Pnp::new(PnpParams::default()).unwrap();
        if let PnpVerdict::Cnp { len } = pnp.on_data(&mut f, &p, 0, &mut qp, &mut out) {
            prop_assert_eq!(icrc::verify(&out[..len], p.l3_off as usize), Ok(true));
        }
        let mut sc = SynCookies::new(3, 1000);
        if let Some(n) = sc.on_syn(&f, &p, 0, &mut out) {
            let q = parse(&out[..n], &opts());
            prop_assert_eq!(q.anomaly, None);
        }
        let _ = sc.on_ack(&f, &p, 0, &mut out);
        let _ = parse_daemon(&f, &p);
    }
}
