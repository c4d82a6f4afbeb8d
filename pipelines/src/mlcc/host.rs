//! MLCC's host-side half for the emulator (paper 001, sections 3.2-3.3; formats:
//! docs/wire-formats.md): what the paper's XDP prototype runs on the servers.
//!
//! **Sender** (requester of an inter-DC QP; its rate is this agent's, not the scenario's
//! congestion control):
//! - a Switch-INT from the sender-side DCI (section 3.2.1) is an INT sample of the sender-side
//!   DC: [`Hpcc`] on it gives `R_NS` (the reference window moves once per near-source RTT, when
//!   the sample is about a packet sent after the last move);
//! - an ACK with `R_DQM` (MCETH, section 3.3.2) gives `R_DQM`;
//! - the QP sends at `R_MLCC = min(R_NS, R_DQM)` (equation 10), both starting at line rate.
//!
//! **Receiver** (responder of an inter-DC QP, Algorithm 1 at the receiver):
//! - data arrives with the MLCC INT the receiver-side DCI reinserted (its hop and the receiver
//!   DC's): the INT is stripped before the RNIC sees the packet; [`Hpcc`] on the hops measures
//!   the receiver-side DC;
//! - `C_R` starts at 0 and `R_credit` at line rate; a packet whose `C_D` equals `C_R` ends a
//!   credit round (one intra-DC RTT): `C_R += 1`, HPCC moves its reference window and
//!   `R_credit` = its rate (lines 9-12);
//! - every ACK of the QP carries `C_R` and `R_credit` in an MCETH (line 13).
//!
//! **Intra-DC QPs**: HPCC end to end. The responder strips the data's INT and echoes it in its
//! next ACK (the MLCC INT, RemainingHopCount 0: no switch adds to it on the way back); the
//! requester runs [`Hpcc`] on the echo and hands the RNIC the plain ACK.
//!
//! Every loop's HPCC uses one base RTT `T`, configured and never measured: [`BASE_RTT_NS`]
//! unless the scenario sets `base_rtt_us` in `[emulation.agents.mlcc]` ([`MlccHostParams`]).
//! The INT UDP port is `wire::int::DEFAULT_INT_PORT` (5000): the scenario's
//! switches must use it.

use super::hpcc::{Hpcc, HpccParams, IntHop};
use longhaul_control::config::{span, ConfigError, SectionConfig, Validator, S};
use longhaul_dataplane::packet::{HeapBuf, PacketBuf};
use longhaul_dataplane::wire::ethernet::HEADER_LEN;
use longhaul_dataplane::wire::int::DEFAULT_INT_PORT;
use longhaul_dataplane::wire::mlcc::{self, Mceth, MlccHop, MCETH_CREDIT, MCETH_DQM};
use longhaul_dataplane::wire::parse::{ipv4_udp, Ipv4Udp};
use longhaul_dataplane::wire::roce::{opcode, Bth, ROCE_V2_PORT};
use longhaul_dataplane::wire::{int, roce};
use longhaul_runtime::{HostAddr, HostAgent, HostAgentParams, QpInfo, RxAction, TxKind};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;

/// Loop ids of [`RxAction::Rate`]: the near-source loop and the end-to-end (DQM) loop.
pub const LOOP_NS: u8 = 0;
pub const LOOP_DQM: u8 = 1;
/// HPCC's eta, maxStage and additive increase on both short loops (the HPCC paper's
/// recommended eta and maxStage; 50 Mb/s of additive increase, our choice).
const ETA: f64 = 0.95;
const MAX_STAGE: u32 = 5;
const RATE_AI_BPS: f64 = 50e6;
const MIN_BPS: f64 = 100e6;
/// HPCC's base RTT `T` on every loop (near-source, credit, intra-DC end to end): one value for
/// all, configured and never measured, as the HPCC simulator gives every flow the network's
/// largest base RTT (its `GLOBAL_T` setting). HPCC's queue term `qlen / (B T)` weighs a queue
/// by `1 / T`: loops with different `T` meeting at one link do not share it fairly (an intra-DC
/// loop measuring 4.8 us against the credit loops' 12.5 us gets about 60% of their rate,
/// docs/mlcc.md "Fig. 8"). 25 us: about the longest short loop in `scenarios/mlcc*.toml`
/// (Fig. 7's near-source loop, 25.4 us from a data packet's transmission to its Switch-INT,
/// unloaded). The default of the scenario key `[emulation.agents.mlcc] base_rtt_us`.
pub const BASE_RTT_NS: u64 = 25_000;

/// The largest `base_rtt_us` a scenario may give, us (one second).
const MAX_BASE_RTT_US: f64 = 1_000_000.0;

/// The hosts' parameters a scenario sets in `[emulation.agents.mlcc]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlccHostParams {
    /// HPCC's base RTT `T` on every loop, ns (`base_rtt_us`; default [`BASE_RTT_NS`]).
    pub base_rtt_ns: u64,
}

impl Default for MlccHostParams {
    fn default() -> Self {
        MlccHostParams {
            base_rtt_ns: BASE_RTT_NS,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHostParams {
    base_rtt_us: Option<S<f64>>,
}

/// The validation of `[emulation.agents.mlcc]` (the emulator calls it through the registry).
pub struct HostParamsTable;

impl HostAgentParams for HostParamsTable {
    fn validate(
        &self,
        v: &mut Validator<'_>,
        path: &[&str],
    ) -> Result<Option<Arc<dyn SectionConfig>>, ConfigError> {
        let Some(raw) = v.raw_at::<RawHostParams>(path)? else {
            return Ok(None);
        };
        let mut p = MlccHostParams::default();
        if let Some(t) = &raw.base_rtt_us {
            let us = *t.get_ref();
            let ns = (us * 1000.0).round();
            if !(ns >= 1.0 && us <= MAX_BASE_RTT_US) {
                v.err(
                    format!("{}.base_rtt_us", path.join(".")),
                    span(t),
                    format!(
                        "{us} is out of range: HPCC's base RTT must be 0.001 to {MAX_BASE_RTT_US} us"
                    ),
                );
                return Ok(None);
            }
            p.base_rtt_ns = ns as u64;
        }
        Ok(Some(Arc::new(p)))
    }
}

struct Requester {
    hpcc: Hpcc,
    /// Next PSN to send (one past the highest sent).
    snd_nxt: u32,
    last_update: u32,
    line_bps: f64,
}

struct Responder {
    /// The responder's own QPN (the MCETH names the flow with it).
    local_qpn: u32,
    remote: bool,
    hpcc: Hpcc,
    c_r: u16,
    r_credit_bps: f64,
    /// Intra-DC: the hop records of the latest data, oldest first, for the next ACK.
    echo: Vec<MlccHop>,
}

fn params(line_bps: f64, rtt: u64) -> HpccParams {
    HpccParams {
        base_rtt_ns: rtt,
        line_bps,
        eta: ETA,
        max_stage: MAX_STAGE,
        rate_ai_bps: RATE_AI_BPS,
        min_bps: MIN_BPS,
    }
}

/// MLCC's RNIC behaviour on one modeled host.
pub struct MlccHost {
    int_port: u16,
    /// `T` of every loop's HPCC, ns.
    base_rtt_ns: u64,
    /// Requester QPs by (peer IPv4, peer QPN): how Switch-INT packets name them.
    req: HashMap<(u32, u32), u32>,
    req_state: HashMap<u32, Requester>,
    /// Responder QPs by (peer IPv4, peer QPN) (the ACK's destination and DestQP) and by local
    /// QPN (the data's DestQP).
    resp_by_peer: HashMap<(u32, u32), u32>,
    resp: HashMap<u32, Responder>,
}

impl Default for MlccHost {
    fn default() -> Self {
        MlccHost {
            int_port: DEFAULT_INT_PORT,
            base_rtt_ns: BASE_RTT_NS,
            req: HashMap::new(),
            req_state: HashMap::new(),
            resp_by_peer: HashMap::new(),
            resp: HashMap::new(),
        }
    }
}

fn int_hops(frame: &[u8], m: &mlcc::MlccInt) -> ([IntHop; super::hpcc::MAX_HOPS], usize) {
    let mut out = [IntHop::default(); super::hpcc::MAX_HOPS];
    let n = m.hops.min(out.len());
    // The stack is newest first; HPCC wants them in path order.
    for (k, slot) in out.iter_mut().take(n).enumerate() {
        if let Some(h) = mlcc::hop(frame, m, n - 1 - k) {
            *slot = h.into();
        }
    }
    (out, n)
}

impl Requester {
    /// An INT sample about data packet `psn`: HPCC, its reference window moved once per RTT
    /// (when the sample is about a packet sent after the last move). Returns the rate.
    fn sample(&mut self, psn: u32, hops: &[IntHop]) -> f64 {
        let update = roce::psn_le(self.last_update, psn);
        if update {
            self.last_update = self.snd_nxt;
        }
        self.hpcc.on_int(hops, update).min(self.line_bps)
    }
}

impl MlccHost {
    /// A host whose loops use base RTT `ns` instead of [`BASE_RTT_NS`].
    pub fn with_base_rtt(ns: u64) -> MlccHost {
        MlccHost {
            base_rtt_ns: ns.max(1),
            ..MlccHost::default()
        }
    }

    /// A host with a scenario's parameters.
    pub fn with_params(p: &MlccHostParams) -> MlccHost {
        MlccHost::with_base_rtt(p.base_rtt_ns)
    }

    /// `T` of every loop's HPCC, ns.
    pub fn base_rtt_ns(&self) -> u64 {
        self.base_rtt_ns
    }

    /// Switch-INT for one of our requester QPs.
    fn on_switch_int(&mut self, frame: &[u8], src: u32) -> RxAction {
        let Ok(s) = mlcc::parse_switch_int(frame, HEADER_LEN, HEADER_LEN + 28) else {
            return RxAction::Pass;
        };
        let Some(&local) = self.req.get(&(src, s.dest_qp)) else {
            return RxAction::Consumed;
        };
        let Some(q) = self.req_state.get_mut(&local) else {
            return RxAction::Consumed;
        };
        let mut hops = [IntHop::default(); super::hpcc::MAX_HOPS];
        let n = s.hops().min(hops.len());
        for (k, slot) in hops.iter_mut().take(n).enumerate() {
            if let Some(h) = s.hop(n - 1 - k) {
                *slot = h.into();
            }
        }
        let r = q.sample(s.data_psn, &hops[..n]);
        RxAction::Rate {
            local_qpn: local,
            loop_id: LOOP_NS,
            bps: r as u64,
            pass: false,
        }
    }

    /// An INT packet: data for one of our responder QPs, or an intra-DC ACK echoing its data's
    /// INT (HPCC end to end: the rate of the QP it acknowledges).
    fn on_int(&mut self, frame: &mut Vec<u8>) -> RxAction {
        let Ok(m) = mlcc::locate(frame, HEADER_LEN, self.int_port) else {
            return RxAction::Pass;
        };
        let Some(bth) = frame
            .get(m.bth_off..)
            .and_then(|b| Bth::new_checked(b).ok())
        else {
            return RxAction::Pass;
        };
        if bth.opcode() != opcode::RC_ACKNOWLEDGE {
            self.on_data(frame);
            return RxAction::Pass;
        }
        let (local, psn) = (bth.dest_qp(), bth.psn());
        let (hops, n) = int_hops(frame, &m);
        let mut b = HeapBuf::from_bytes(frame);
        if int::strip_int(&mut b, HEADER_LEN).is_ok() {
            *frame = b.data().to_vec();
        }
        let Some(q) = self.req_state.get_mut(&local) else {
            return RxAction::Pass;
        };
        let r = q.sample(psn, &hops[..n]);
        RxAction::Rate {
            local_qpn: local,
            loop_id: LOOP_NS,
            bps: r as u64,
            pass: true,
        }
    }

    /// MLCC data for one of our responder QPs: strip, credit round.
    fn on_data(&mut self, frame: &mut Vec<u8>) {
        let Ok(m) = mlcc::locate(frame, HEADER_LEN, self.int_port) else {
            return;
        };
        let qpn = frame
            .get(m.bth_off..)
            .and_then(|b| Bth::new_checked(b).ok())
            .map(|b| b.dest_qp());
        if let Some(r) = qpn
            .and_then(|q| self.resp.get_mut(&q))
            .filter(|r| !r.remote)
        {
            // Intra-DC (HPCC end to end): the next ACK echoes this packet's INT.
            r.echo.clear();
            for i in (0..m.hops).rev() {
                if let Some(h) = mlcc::hop(frame, &m, i) {
                    r.echo.push(h);
                }
            }
        }
        if let Some(r) = qpn.and_then(|q| self.resp.get_mut(&q)).filter(|r| r.remote) {
            let (hops, n) = int_hops(frame, &m);
            let round = m.c_d == Some(r.c_r);
            let rate = r.hpcc.on_int(&hops[..n], round);
            if round {
                r.c_r = r.c_r.wrapping_add(1) & mlcc::CREDIT_MASK;
                r.r_credit_bps = rate;
            }
        }
        let mut b = HeapBuf::from_bytes(frame);
        if int::strip_int(&mut b, HEADER_LEN).is_ok() {
            *frame = b.data().to_vec();
        }
    }
}

impl HostAgent for MlccHost {
    fn on_qp_created(&mut self, host: &HostAddr, qp: &QpInfo, _out: &mut Vec<Vec<u8>>) {
        let line = host.rate_bps as f64;
        let peer = u32::from(qp.peer_ip);
        if qp.requester {
            {
                self.req.insert((peer, qp.peer_qpn), qp.local_qpn);
                self.req_state.insert(
                    qp.local_qpn,
                    Requester {
                        hpcc: Hpcc::new(params(line, self.base_rtt_ns)),
                        snd_nxt: 0,
                        last_update: 0,
                        line_bps: line,
                    },
                );
            }
        } else {
            self.resp_by_peer.insert((peer, qp.peer_qpn), qp.local_qpn);
            self.resp.insert(
                qp.local_qpn,
                Responder {
                    local_qpn: qp.local_qpn,
                    remote: qp.remote,
                    hpcc: Hpcc::new(params(line, self.base_rtt_ns)),
                    c_r: 0,
                    r_credit_bps: line,
                    echo: Vec::new(),
                },
            );
        }
    }

    /// Requester QPs run at the rates this agent computes (inter-DC: R_MLCC; intra-DC: HPCC on
    /// the INT their ACKs echo).
    fn rate_control(&self, qp: &QpInfo) -> bool {
        qp.requester
    }

    fn on_tx(&mut self, _host: &HostAddr, _now: u64, kind: TxKind, frame: &mut Vec<u8>) {
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
        let Some(bth) = frame.get(42..).and_then(|b| Bth::new_checked(b).ok()) else {
            return;
        };
        match kind {
            TxKind::Data { local_qpn } => {
                if let Some(q) = self.req_state.get_mut(&local_qpn) {
                    let psn = bth.psn();
                    if roce::psn_le(q.snd_nxt, psn) {
                        q.snd_nxt = roce::psn_add(psn, 1);
                    }
                }
            }
            TxKind::Control => {
                if bth.opcode() != opcode::RC_ACKNOWLEDGE {
                    return;
                }
                let Some(r) = self
                    .resp_by_peer
                    .get(&(dst, bth.dest_qp()))
                    .and_then(|q| self.resp.get(q))
                else {
                    return;
                };
                if !r.remote {
                    // Intra-DC: echo the latest data's INT (HPCC's ACK), RemainingHopCount 0
                    // so no switch on the way back adds to it.
                    if r.echo.is_empty() {
                        return;
                    }
                    let mut b = HeapBuf::from_bytes(frame);
                    let cfg = mlcc::int_config(self.int_port, r.echo.len() as u8, None);
                    if int::insert_int_md(&mut b, HEADER_LEN, &cfg).is_ok()
                        && r.echo
                            .iter()
                            .all(|h| mlcc::push(&mut b, HEADER_LEN, h).is_ok())
                    {
                        *frame = b.data().to_vec();
                    }
                    return;
                }
                let m = Mceth {
                    flags: MCETH_CREDIT,
                    qpn: r.local_qpn,
                    c_r: r.c_r,
                    r_credit_kbps: mlcc::kbps(r.r_credit_bps as u64),
                    r_dqm_kbps: 0,
                };
                let mut out = vec![0u8; frame.len() + mlcc::MCETH_LEN];
                if let Ok(n) = mlcc::append_mceth(frame, HEADER_LEN, &m, &mut out) {
                    out.truncate(n);
                    *frame = out;
                }
            }
        }
    }

    fn on_rx(&mut self, _host: &HostAddr, _now: u64, frame: &mut Vec<u8>) -> RxAction {
        let Some(Ipv4Udp {
            src,
            dst_port: dport,
            ..
        }) = ipv4_udp(frame)
        else {
            return RxAction::Pass;
        };
        if dport == self.int_port {
            return self.on_int(frame);
        }
        if dport != ROCE_V2_PORT {
            return RxAction::Pass;
        }
        let Some(bth) = frame.get(42..).and_then(|b| Bth::new_checked(b).ok()) else {
            return RxAction::Pass;
        };
        match bth.opcode() {
            opcode::CNP => self.on_switch_int(frame, src),
            opcode::RC_ACKNOWLEDGE => match mlcc::locate_mceth(frame, HEADER_LEN) {
                Ok((_, m)) if m.flags & MCETH_DQM != 0 => {
                    let local = bth.dest_qp();
                    if !self.req_state.contains_key(&local) {
                        return RxAction::Pass;
                    }
                    RxAction::Rate {
                        local_qpn: local,
                        loop_id: LOOP_DQM,
                        bps: m.r_dqm_kbps as u64 * 1000,
                        pass: true,
                    }
                }
                _ => RxAction::Pass,
            },
            _ => RxAction::Pass,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use longhaul_dataplane::wire::ethernet::MacAddr;
    use longhaul_dataplane::wire::roce::{
        build_ack_v4, build_roce_v4, AckSpec, BthRepr, RoceAddrs,
    };
    use longhaul_dataplane::wire::{icrc, mlcc::MlccHop};
    use std::net::Ipv4Addr;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
    const REQ: u32 = 0x101;
    const RESP: u32 = 0x80_0001;

    fn host(ip: Ipv4Addr) -> HostAddr {
        HostAddr {
            ip,
            mac: [2; 6],
            gw_mac: [3; 6],
            rate_bps: 25_000_000_000,
        }
    }

    fn addrs(src: Ipv4Addr, dst: Ipv4Addr) -> RoceAddrs<Ipv4Addr> {
        RoceAddrs {
            src_mac: MacAddr([2; 6]),
            dst_mac: MacAddr([3; 6]),
            src_ip: src,
            dst_ip: dst,
            udp_sport: 49153,
            dscp: 26,
            ecn: 0,
        }
    }

    fn data(psn: u32) -> Vec<u8> {
        let bth = BthRepr {
            opcode: opcode::RC_RDMA_WRITE_MIDDLE,
            pkey: 0xffff,
            dest_qp: RESP,
            psn,
            ..BthRepr::default()
        };
        let mut b = vec![0u8; 1200];
        let n = build_roce_v4(&mut b, &addrs(A, B), &bth, &[7u8; 1000]).unwrap();
        b.truncate(n);
        b
    }

    /// `f` with the MLCC INT the receiver-side DCI adds (C_D) and hops at `ts` with `tx` bytes.
    fn with_int(f: &[u8], c_d: Option<u16>, ts: u64, tx: u64, qlen: u32) -> Vec<u8> {
        let mut b = HeapBuf::from_bytes(f);
        int::insert_int_md(&mut b, 14, &mlcc::int_config(5000, 3, c_d)).unwrap();
        mlcc::push(
            &mut b,
            14,
            &MlccHop {
                node_id: 9,
                queue_id: 3,
                qlen,
                ts,
                tx_bytes: tx,
                rate_mbps: 25_000,
            },
        )
        .unwrap();
        b.data().to_vec()
    }

    fn qp(requester: bool, remote: bool) -> QpInfo {
        QpInfo {
            peer_ip: if requester { B } else { A },
            local_qpn: if requester { REQ } else { RESP },
            peer_qpn: if requester { RESP } else { REQ },
            requester,
            remote,
        }
    }

    fn ack_from_b(psn: u32) -> Vec<u8> {
        let spec = AckSpec {
            dest_qp: REQ,
            psn,
            syndrome: roce::Syndrome::ACK_NO_CREDIT,
            msn: 0,
            pkey: 0xffff,
        };
        let mut b = [0u8; 128];
        let n = build_ack_v4(&mut b, &addrs(B, A), &spec).unwrap();
        b[..n].to_vec()
    }

    /// Algorithm 1 at the receiver: C_R starts at 0 with R_credit = line rate; data whose C_D
    /// equals C_R ends a round (C_R + 1, R_credit from HPCC on the INT); every ACK carries
    /// both; the data reaches the RNIC without INT and with its ICRC.
    #[test]
    fn receiver_credit_rounds_and_mceth() {
        let mut h = MlccHost::default();
        let me = host(B);
        h.on_qp_created(&me, &qp(false, true), &mut Vec::new());
        let mceth_of = |h: &mut MlccHost| {
            let mut a = ack_from_b(0);
            h.on_tx(&me, 0, TxKind::Control, &mut a);
            assert_eq!(icrc::verify(&a, 14), Ok(true));
            mlcc::locate_mceth(&a, 14).unwrap().1
        };
        let m = mceth_of(&mut h);
        assert_eq!((m.qpn, m.c_r, m.r_credit_kbps), (RESP, 0, 25_000_000));
        // No C_D yet (the DCI has not seen an ACK): no round.
        let mut f = with_int(&data(0), None, 1_000, 0, 0);
        assert_eq!(h.on_rx(&me, 1_000, &mut f), RxAction::Pass);
        assert_eq!(f, data(0), "INT stripped, the original frame");
        assert_eq!(mceth_of(&mut h).c_r, 0);
        // C_D 0 = C_R: round 1. The hop's 25 Gb/s link (3.125 B/ns) sent 78,125 bytes in the
        // 25 us (= T) since the last sample and holds 78,125 bytes (the last sample had 0: HPCC
        // takes the smaller): u = 0 + 3.125 / 3.125 = 1 and, the interval being T, U = u >= eta,
        // so W = Wc / (1 / 0.95) + W_AI and R_credit = 0.95 x 25 Gb/s + 50 Mb/s = 23.8 Gb/s.
        let mut f = with_int(&data(1), Some(0), 26_000, 78_125, 78_125);
        h.on_rx(&me, 26_000, &mut f);
        let m = mceth_of(&mut h);
        assert_eq!(m.c_r, 1);
        assert!(m.r_credit_kbps.abs_diff(23_800_000) <= 1, "{m:?}");
        // C_D 0 again (stale): no round.
        let mut f = with_int(&data(2), Some(0), 27_000, 81_250, 78_125);
        h.on_rx(&me, 27_000, &mut f);
        assert_eq!(mceth_of(&mut h).c_r, 1);
    }

    /// The sender: a Switch-INT gives the near-source loop's rate (taken, not for the RNIC);
    /// an ACK with R_DQM gives the DQM loop's (and goes on to the RNIC); other ACKs pass.
    #[test]
    fn sender_rates_from_switch_int_and_dqm() {
        let mut h = MlccHost::default();
        let me = host(A);
        let q = qp(true, true);
        h.on_qp_created(&me, &q, &mut Vec::new());
        assert!(h.rate_control(&q));
        assert!(
            h.rate_control(&qp(true, false)),
            "intra-DC: HPCC on the echoed INT"
        );
        for psn in 0..2 {
            let mut d = data(psn);
            h.on_tx(
                &me,
                psn as u64 * 100,
                TxKind::Data { local_qpn: REQ },
                &mut d,
            );
        }
        let sw_int = |psn: u32, ts: u64, tx: u64| {
            let f = with_int(&data(psn), None, ts, tx, 50_000);
            let m = mlcc::locate(&f, 14, 5000).unwrap();
            let mut out = [0u8; 512];
            let n = mlcc::build_switch_int(&f, 14, &m, 48, [4; 6], [4; 6], &mut out).unwrap();
            out[..n].to_vec()
        };
        let mut s = sw_int(0, 1_000, 0);
        let first = h.on_rx(&me, 3_000, &mut s);
        assert_eq!(
            first,
            RxAction::Rate {
                local_qpn: REQ,
                loop_id: LOOP_NS,
                bps: 25_000_000_000,
                pass: false
            },
            "the first sample only records"
        );
        // A busy link with a queue, one T (25 us) later: the rate falls.
        let mut s = sw_int(1, 26_000, 78_125);
        match h.on_rx(&me, 26_100, &mut s) {
            RxAction::Rate { loop_id, bps, .. } => {
                assert_eq!(loop_id, LOOP_NS);
                assert!(bps < 25_000_000_000, "{bps}");
            }
            other => panic!("{other:?}"),
        }
        // An ACK with R_DQM.
        let mut a = ack_from_b(1);
        let m = Mceth {
            flags: MCETH_CREDIT | MCETH_DQM,
            qpn: RESP,
            c_r: 3,
            r_credit_kbps: 10_000_000,
            r_dqm_kbps: 9_000_000,
        };
        let mut out = vec![0u8; 200];
        let n = mlcc::append_mceth(&a, 14, &m, &mut out).unwrap();
        a = out[..n].to_vec();
        assert_eq!(
            h.on_rx(&me, 5_000, &mut a),
            RxAction::Rate {
                local_qpn: REQ,
                loop_id: LOOP_DQM,
                bps: 9_000_000_000,
                pass: true
            }
        );
        let mut plain = ack_from_b(1);
        assert_eq!(h.on_rx(&me, 5_000, &mut plain), RxAction::Pass);
    }

    /// Every loop's HPCC runs on the configured base RTT (25 us), whatever round trips it sees:
    /// a Switch-INT 5 us after its data does not make `T` 5 us (before, `T` started at a
    /// 10 us placeholder and took any shorter sample). Two samples 25 us apart of a link with
    /// no traffic and a standing queue of B x 25 us (78,125 bytes at 25 Gb/s): u = 1 >= eta, so
    /// R_NS = 0.95 x 25 Gb/s + 50 Mb/s = 23.8 Gb/s (with T = 5 us: u = 5 and 4.8 Gb/s).
    #[test]
    fn base_rtt_is_configured_not_measured() {
        let mut h = MlccHost::default();
        let me = host(A);
        h.on_qp_created(&me, &qp(true, true), &mut Vec::new());
        for psn in 0..2 {
            let mut d = data(psn);
            h.on_tx(&me, 0, TxKind::Data { local_qpn: REQ }, &mut d);
        }
        let sw_int = |psn: u32, ts: u64| {
            let f = with_int(&data(psn), None, ts, 0, 78_125);
            let m = mlcc::locate(&f, 14, 5000).unwrap();
            let mut out = [0u8; 512];
            let n = mlcc::build_switch_int(&f, 14, &m, 48, [4; 6], [4; 6], &mut out).unwrap();
            out[..n].to_vec()
        };
        let mut s = sw_int(0, 1_000);
        h.on_rx(&me, 5_000, &mut s);
        let mut s = sw_int(1, 26_000);
        match h.on_rx(&me, 5_000, &mut s) {
            RxAction::Rate { loop_id, bps, .. } => {
                assert_eq!(loop_id, LOOP_NS);
                assert!(bps.abs_diff(23_800_000_000) <= 1_000, "{bps}");
            }
            other => panic!("{other:?}"),
        }
        // The same with T configured at 5 us.
        let mut h = MlccHost::with_base_rtt(5_000);
        h.on_qp_created(&me, &qp(true, true), &mut Vec::new());
        let mut s = sw_int(0, 1_000);
        h.on_rx(&me, 5_000, &mut s);
        let mut s = sw_int(1, 26_000);
        match h.on_rx(&me, 5_000, &mut s) {
            RxAction::Rate { bps, .. } => assert!(bps.abs_diff(4_800_000_000) <= 1_000, "{bps}"),
            other => panic!("{other:?}"),
        }
    }

    /// Intra-DC QPs (HPCC end to end): the responder strips the data's INT and echoes it in
    /// its next ACK (RemainingHopCount 0, no credit fields); the requester takes the echo as an
    /// INT sample for its rate and hands the RNIC the plain ACK.
    #[test]
    fn intra_dc_acks_echo_the_int() {
        let mut h = MlccHost::default();
        let me = host(B);
        h.on_qp_created(&me, &qp(false, false), &mut Vec::new());
        let mut f = with_int(&data(0), None, 1_000, 0, 0);
        assert_eq!(h.on_rx(&me, 1_000, &mut f), RxAction::Pass);
        assert_eq!(f, data(0));
        let mut a = ack_from_b(0);
        let plain = a.clone();
        h.on_tx(&me, 0, TxKind::Control, &mut a);
        let m = mlcc::locate(&a, 14, 5000).expect("the echo");
        assert_eq!((m.hops, m.c_d), (1, None));
        assert_eq!(a[14 + 20 + 8 + 4 + 3], 0, "RemainingHopCount 0");
        assert_eq!(mlcc::hop(&a, &m, 0).unwrap().node_id, 9);
        assert!(mlcc::locate_mceth(&a, 14).is_err());
        // The requester's side.
        let mut s = MlccHost::default();
        let them = host(A);
        s.on_qp_created(&them, &qp(true, false), &mut Vec::new());
        let mut d = data(0);
        s.on_tx(&them, 0, TxKind::Data { local_qpn: REQ }, &mut d);
        match s.on_rx(&them, 5_000, &mut a) {
            RxAction::Rate {
                local_qpn,
                loop_id,
                pass,
                ..
            } => assert_eq!((local_qpn, loop_id, pass), (REQ, LOOP_NS, true)),
            other => panic!("{other:?}"),
        }
        assert_eq!(a, plain, "the RNIC gets the ACK without INT");
    }

    /// `[emulation.agents.mlcc] base_rtt_us`: validated into `T` in ns, and the mechanism
    /// builds hosts whose loops run on it. The scenario's `T` = 5 us gives the 4.8 Gb/s of
    /// `base_rtt_is_configured_not_measured` (the default 25 us: 23.8 Gb/s); out-of-range values
    /// are errors at the key.
    #[test]
    fn base_rtt_from_the_scenario_reaches_the_host() {
        use crate::mlcc::mechanism::MlccMechanism;
        use longhaul_runtime::Mechanism;
        let path = std::path::Path::new("s.toml");
        let parse = |text: &str| {
            let mut v = Validator::new(path, text);
            let p = HostParamsTable
                .validate(&mut v, &["emulation", "agents", "mlcc"])
                .unwrap();
            (p, v.into_errors())
        };
        let (p, e) = parse("[emulation.agents.mlcc]\nbase_rtt_us = 5\n");
        assert!(e.is_empty(), "{e:?}");
        let p = p.unwrap();
        let mine = p.as_any().downcast_ref::<MlccHostParams>().unwrap();
        assert_eq!(mine.base_rtt_ns, 5_000);
        assert_eq!(MlccHost::with_params(mine).base_rtt_ns(), 5_000);
        assert_eq!(MlccHost::default().base_rtt_ns(), BASE_RTT_NS);
        let (p, e) = parse("[emulation]\nseed = 1\n");
        assert!(p.is_none() && e.is_empty(), "{e:?}");
        let (p, e) = parse("[emulation.agents.mlcc]\n");
        let p = p.expect("an empty table: the defaults");
        assert_eq!(
            p.as_any().downcast_ref::<MlccHostParams>(),
            Some(&MlccHostParams::default())
        );
        assert!(e.is_empty());
        let (p, e) = parse("[emulation.agents.mlcc]\nbase_rtt_us = 0\n");
        assert!(p.is_none());
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].key, "emulation.agents.mlcc.base_rtt_us");
        // The agent the emulator builds through the registry, on the samples of
        // `base_rtt_is_configured_not_measured`.
        let rate = |params: Option<&dyn SectionConfig>| {
            let mut h = MlccMechanism.host_agent_with(params).unwrap();
            let me = host(A);
            h.on_qp_created(&me, &qp(true, true), &mut Vec::new());
            for psn in 0..2 {
                let mut d = data(psn);
                h.on_tx(&me, 0, TxKind::Data { local_qpn: REQ }, &mut d);
            }
            let mut out = 0;
            for (psn, ts) in [(0, 1_000), (1, 26_000)] {
                let f = with_int(&data(psn), None, ts, 0, 78_125);
                let m = mlcc::locate(&f, 14, 5000).unwrap();
                let mut b = [0u8; 512];
                let n = mlcc::build_switch_int(&f, 14, &m, 48, [4; 6], [4; 6], &mut b).unwrap();
                let mut s = b[..n].to_vec();
                if let RxAction::Rate { bps, .. } = h.on_rx(&me, 5_000, &mut s) {
                    out = bps;
                }
            }
            out
        };
        let five = rate(Some(p_of(5_000).as_ref()));
        assert!(five.abs_diff(4_800_000_000) <= 1_000, "{five}");
        let default = rate(None);
        assert!(default.abs_diff(23_800_000_000) <= 1_000, "{default}");
    }

    fn p_of(ns: u64) -> Arc<dyn SectionConfig> {
        Arc::new(MlccHostParams { base_rtt_ns: ns })
    }
}
