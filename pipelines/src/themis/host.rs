//! THEMIS's host-side half for the emulator: the host daemon (paper 000, section IV; the public
//! prototype's eBPF daemon), which reports every RC QP the host creates to its ESW in a UDP
//! datagram to port 12345 (docs/wire-formats.md, "THEMIS daemon messages"): the remote IP, this
//! host's QPN (cQPN), the remote QPN (sQPN), flag 1. The ESW's QP_field learns from it which
//! local QP a CNP or a data packet belongs to. Sent to the remote host's address: the ESW takes
//! it on a DC port; any other switch forwards it and the remote host ignores it.

use super::daemon::{build_daemon_frame, DaemonMsg, DaemonOp};
use longhaul_runtime::{HostAddr, HostAgent, QpInfo};

/// The daemon on one modeled host.
pub struct ThemisDaemon;

impl HostAgent for ThemisDaemon {
    fn on_qp_created(&mut self, host: &HostAddr, qp: &QpInfo, out: &mut Vec<Vec<u8>>) {
        let msg = DaemonMsg {
            client_ip: u32::from(host.ip),
            dst_ip: u32::from(qp.peer_ip),
            cqpn: qp.local_qpn,
            sqpn: qp.peer_qpn,
            op: DaemonOp::CreateOrModify,
        };
        let mut buf = vec![0u8; 128];
        if let Some(n) =
            build_daemon_frame(&mut buf, host.mac, host.gw_mac, host.ip, qp.peer_ip, &msg)
        {
            buf.truncate(n);
            out.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::themis::daemon::parse_daemon;
    use longhaul_dataplane::wire::parse::{parse, ParseOptions};
    use std::net::Ipv4Addr;

    #[test]
    fn reports_the_qp_in_the_daemon_format() {
        let host = HostAddr {
            ip: Ipv4Addr::new(10, 1, 0, 1),
            mac: [2, 0, 0, 0, 0, 1],
            gw_mac: [2, 0, 0, 0, 0, 2],
            rate_bps: 100_000_000_000,
        };
        let qp = QpInfo {
            peer_ip: Ipv4Addr::new(10, 0, 0, 1),
            local_qpn: 0x80_0001,
            peer_qpn: 0x101,
            requester: false,
            remote: true,
        };
        let mut out = Vec::new();
        ThemisDaemon.on_qp_created(&host, &qp, &mut out);
        assert_eq!(out.len(), 1);
        let p = parse(&out[0], &ParseOptions::default());
        assert!(p.anomaly.is_none());
        let m = parse_daemon(&out[0], &p).expect("a valid daemon frame");
        assert_eq!(
            (m.client_ip, m.dst_ip, m.cqpn, m.sqpn, m.op),
            (
                u32::from(host.ip),
                u32::from(qp.peer_ip),
                0x80_0001,
                0x101,
                DaemonOp::CreateOrModify
            )
        );
    }
}
