//! Reflex's host-side half for the emulator (paper 003, section III-C "Rewrite RTT input for CCs
//! at the sender", and what the switch side needs of the RNICs; docs/wire-formats.md):
//!
//! - the requester's RNIC puts its transmission time and its QPN in every data packet (the INT
//!   hop, it is the INT source);
//! - the responder's RNIC strips it (INT sink) and reflects the latest hop of the QP in its next
//!   ACK or NAK (DS Flags ECHO);
//! - the requester takes a pseudo-ACK (NSF flag) as an RTT sample for its congestion control
//!   (`RTT_src = now - ts`) and nothing else; end-to-end ACKs go to the transport as usual
//!   (their INT stripped) but feed the congestion control of an inter-DC QP no RTT: "their
//!   arrival does not trigger any updates of RTT input". Intra-DC QPs keep their end-to-end RTT.
//!
//! The INT UDP port is [`DEFAULT_INT_PORT`]: the scenario's ESWs must use it.

use longhaul_dataplane::packet::{HeapBuf, PacketBuf};
use longhaul_dataplane::wire::ethernet::HEADER_LEN;
use longhaul_dataplane::wire::int;
use longhaul_dataplane::wire::int::DEFAULT_INT_PORT;
use longhaul_dataplane::wire::parse::{ipv4_udp, Ipv4Udp};
use longhaul_dataplane::wire::reflex::{self, ReflexHop, FLAG_ECHO};
use longhaul_dataplane::wire::roce::{opcode, Bth, ROCE_V2_PORT};
use longhaul_runtime::{HostAddr, HostAgent, QpInfo, RxAction, TxKind};
use std::collections::HashMap;

/// Reflex's RNIC behaviour on one modeled host.
pub struct ReflexHost {
    int_port: u16,
    /// Responder side: the latest hop received per (requester IPv4, requester QPN).
    last_hop: HashMap<(u32, u32), ReflexHop>,
}

impl Default for ReflexHost {
    fn default() -> Self {
        ReflexHost {
            int_port: DEFAULT_INT_PORT,
            last_hop: HashMap::new(),
        }
    }
}

fn insert(frame: &mut Vec<u8>, int_port: u16, hop: ReflexHop, flags: u16) {
    let mut out = vec![0u8; frame.len() + reflex::INT_LEN];
    if let Ok(n) = reflex::insert_copy(frame, HEADER_LEN, int_port, hop, flags, &mut out) {
        out.truncate(n);
        *frame = out;
    }
}

fn strip(frame: &mut Vec<u8>) {
    let mut b = HeapBuf::from_bytes(frame);
    if int::strip_int(&mut b, HEADER_LEN).is_ok() {
        *frame = b.data().to_vec();
    }
}

impl HostAgent for ReflexHost {
    fn on_tx(&mut self, _host: &HostAddr, now: u64, kind: TxKind, frame: &mut Vec<u8>) {
        let Some(Ipv4Udp {
            dst,
            dst_port: dport,
            ..
        }) = ipv4_udp(frame)
        else {
            return;
        };
        if dport != ROCE_V2_PORT {
            return;
        }
        match kind {
            TxKind::Data { local_qpn } => {
                let hop = ReflexHop {
                    ts: now,
                    qpn: local_qpn,
                };
                insert(frame, self.int_port, hop, 0);
            }
            TxKind::Control => {
                // An ACK or NAK (to the requester's QP) reflects that QP's latest hop.
                let Some(bth) = frame.get(42..).and_then(|b| Bth::new_checked(b).ok()) else {
                    return;
                };
                if bth.opcode() != opcode::RC_ACKNOWLEDGE {
                    return;
                }
                if let Some(&hop) = self.last_hop.get(&(dst, bth.dest_qp())) {
                    insert(frame, self.int_port, hop, FLAG_ECHO);
                }
            }
        }
    }

    fn on_rx(&mut self, _host: &HostAddr, now: u64, frame: &mut Vec<u8>) -> RxAction {
        let Some(Ipv4Udp {
            src,
            dst_port: dport,
            ..
        }) = ipv4_udp(frame)
        else {
            return RxAction::Pass;
        };
        if dport != self.int_port {
            return RxAction::Pass;
        }
        let Ok(v) = reflex::locate(frame, HEADER_LEN, self.int_port) else {
            return RxAction::Pass;
        };
        let Some(bth) = frame
            .get(v.bth_off..)
            .and_then(|b| Bth::new_checked(b).ok())
        else {
            return RxAction::Pass;
        };
        if v.is_nsf() {
            return RxAction::RttSample {
                local_qpn: bth.dest_qp(),
                psn: bth.psn(),
                rtt_ns: now.saturating_sub(v.hop.ts),
            };
        }
        if !v.is_echo() {
            self.last_hop.insert((src, v.hop.qpn), v.hop);
        }
        strip(frame);
        RxAction::Pass
    }

    fn ack_rtt(&self, qp: &QpInfo) -> bool {
        !qp.remote
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_dataplane::wire::ethernet::MacAddr;
    use longhaul_dataplane::wire::icrc;
    use longhaul_dataplane::wire::roce::{
        build_ack_v4, build_roce_v4, AckSpec, BthRepr, RoceAddrs,
    };
    use std::net::Ipv4Addr;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);

    fn host(ip: Ipv4Addr) -> HostAddr {
        HostAddr {
            ip,
            mac: [2; 6],
            gw_mac: [3; 6],
            rate_bps: 100_000_000_000,
        }
    }

    fn addrs(src: Ipv4Addr, dst: Ipv4Addr) -> RoceAddrs<Ipv4Addr> {
        RoceAddrs {
            src_mac: MacAddr([2; 6]),
            dst_mac: MacAddr([3; 6]),
            src_ip: src,
            dst_ip: dst,
            udp_sport: 49152,
            dscp: 26,
            ecn: 2,
        }
    }

    /// Data gets the requester's hop; the responder strips it (the RNIC then sees the original,
    /// ICRC valid) and reflects it in its ACK; back at the requester the e2e ACK is stripped and
    /// passed, a pseudo-ACK becomes an RTT sample.
    #[test]
    fn timestamp_echo_and_pseudo_ack() {
        let (mut ha, mut hb) = (ReflexHost::default(), ReflexHost::default());
        let bth = BthRepr {
            opcode: opcode::RC_RDMA_WRITE_ONLY,
            pkey: 0xffff,
            dest_qp: 0x80_0001,
            psn: 4,
            ..BthRepr::default()
        };
        let mut b = vec![0u8; 512];
        let n = build_roce_v4(&mut b, &addrs(A, B), &bth, &[7; 64]).unwrap();
        let orig = b[..n].to_vec();
        let mut f = orig.clone();
        ha.on_tx(&host(A), 1_000, TxKind::Data { local_qpn: 0x101 }, &mut f);
        let v = reflex::locate(&f, 14, DEFAULT_INT_PORT).unwrap();
        assert_eq!((v.hop.ts, v.hop.qpn, v.flags), (1_000, 0x101, 0));
        assert_eq!(hb.on_rx(&host(B), 9_000, &mut f), RxAction::Pass);
        assert_eq!(f, orig, "the responder's RNIC sees the original packet");
        assert_eq!(icrc::verify(&f, 14), Ok(true));
        // Its ACK to QP 0x101 reflects the hop.
        let spec = AckSpec {
            dest_qp: 0x101,
            psn: 4,
            syndrome: longhaul_dataplane::wire::roce::Syndrome::ACK_NO_CREDIT,
            msn: 0,
            pkey: 0xffff,
        };
        let mut a = vec![0u8; 128];
        let n = build_ack_v4(&mut a, &addrs(B, A), &spec).unwrap();
        let plain_ack = a[..n].to_vec();
        let mut ack = plain_ack.clone();
        hb.on_tx(&host(B), 9_500, TxKind::Control, &mut ack);
        let v = reflex::locate(&ack, 14, DEFAULT_INT_PORT).unwrap();
        assert_eq!((v.hop.ts, v.flags), (1_000, FLAG_ECHO));
        assert_eq!(ha.on_rx(&host(A), 20_000, &mut ack), RxAction::Pass);
        assert_eq!(ack, plain_ack);
        // A pseudo-ACK for the same data: an RTT sample, nothing else.
        let data = {
            let mut g = orig.clone();
            insert(
                &mut g,
                DEFAULT_INT_PORT,
                ReflexHop {
                    ts: 1_000,
                    qpn: 0x101,
                },
                0,
            );
            g
        };
        let dv = reflex::locate(&data, 14, DEFAULT_INT_PORT).unwrap();
        let mut out = [0u8; 256];
        let n = reflex::build_pseudo_ack(&data, 14, &dv, 48, [4; 6], [5; 6], &mut out).unwrap();
        let mut p = out[..n].to_vec();
        assert_eq!(
            ha.on_rx(&host(A), 8_000, &mut p),
            RxAction::RttSample {
                local_qpn: 0x101,
                psn: 4,
                rtt_ns: 7_000
            }
        );
        let qp = QpInfo {
            peer_ip: B,
            local_qpn: 0x101,
            peer_qpn: 0x80_0001,
            requester: true,
            remote: true,
        };
        assert!(!ha.ack_rtt(&qp));
        assert!(ha.ack_rtt(&QpInfo {
            remote: false,
            ..qp
        }));
    }
}
