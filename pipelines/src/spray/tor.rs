//! The spraying ToR: the baseline's forwarding with Themis-S and Themis-D (paper 002, Fig. 3).
//!
//! Which QP a RoCE packet belongs to: the `spray_qps` table maps a QP end, (IP, QPN), to the QP's
//! slot in the S and D register arrays. A packet's (destination IP, DestQP) is always one end:
//! data toward the remote end and NAKs toward the local end are Themis-S's; data toward the local
//! end and ACK/NAKs toward the remote end are Themis-D's (the ToR tells the two apart by where the
//! packet comes from and goes to: `host_ports` or `fabric_ports`).
//!
//! Per packet:
//! - Ingress, from a host port toward the fabric:
//!   - RC RDMA WRITE data of a known QP (section 7: Themis sprays WRITEs only): Themis-S picks the
//!     path (equation 1, rerouting, avoidance) and applies the PathMap: XOR the UDP source port
//!     with the path's delta (ICRC recomputed, UDP checksum updated when not zero), or send it
//!     out of the path's port to its next hop. Packets not on equation 1's path (rerouted,
//!     avoided, other request opcodes) get the off-policy mark (BTH byte 4 bit 0x10).
//!   - An ACK/NAK from a local receiver: Themis-D. A PSN-sequence-error NAK is classified
//!     (Algorithm 1): invalid and undetermined ones are dropped (the latter stashed), valid ones
//!     forwarded; ACKs move the bitmap's start pointer.
//! - Ingress, from the fabric toward a host port: a PSN-sequence-error NAK for a local sender
//!   updates lastNackPsn and, with the path avoidance signal (BTH byte 4 bit 0x20), the
//!   avoidance counter; the signal bit is cleared before the RNIC sees it.
//! - Egress toward a host port (section 5: Themis-D after the queue): RC request data of a
//!   known QP sets the proxy bitmap and PathMaxPSN (on-policy packets only) and may release the
//!   stash: a NAK is then generated (wire-valid, ICRC; from the stashed NAK's fields and the data
//!   packet's addresses, routed like any packet toward the sender), with the path avoidance signal
//!   when OOO_THRESHOLD was passed. The off-policy mark is cleared before the RNIC sees it.
//!
//! Packets of QPs not in the table are forwarded untouched (fail-open) and counted.

use super::config::{SprayConfig, SprayPaths, SprayQp};
use super::dest::{DataOutcome, DestParams, NackClass, NackFields, ThemisD};
use super::source::{p_base, Route, SourceParams, ThemisS};
use crate::baseline::ingress::{ingress, Ingress};
use crate::baseline::{BaselineCommand, Egress, Forwarding, Hop};
use crate::ports::PortSet;
use crate::themis::esw::ThemisEsw;
use longhaul_control::config::Config;
use longhaul_dataplane::asic::ecmp::FastMod;
use longhaul_dataplane::asic::flat::FlatTable;
use longhaul_dataplane::engine::{Action, Ctx, Pipeline, TableCounters};
use longhaul_dataplane::packet::{BufPool, Meta, PacketBuf, FLAG_GENERATED};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::checksum;
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::parse::{parse, L3Kind, ParseOptions, Parsed};
use longhaul_dataplane::wire::roce::{
    build_ack_v4, build_ack_v6, opcode, AckSpec, RoceAddrs, Syndrome, AETH_LEN, BTH_LEN, PSN_MASK,
};
use longhaul_dataplane::wire::{icrc, udp};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// BTH byte 4 bit: the path avoidance signal on a PSN-sequence-error NAK (docs/wire-formats.md).
pub const PATH_AVOIDANCE_BIT: u8 = 0x20;
/// BTH byte 4 bit: Themis-S did not send this data packet on equation 1's path.
pub const OFF_POLICY_BIT: u8 = 0x10;

/// A QP end: (IP as u128, IPv4-mapped for IPv4; QPN).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct QpEnd {
    pub ip: u128,
    pub qpn: u32,
}

impl QpEnd {
    pub fn new(ip: IpAddr, qpn: u32) -> Self {
        let ip = match ip {
            IpAddr::V4(a) => crate::themis::daemon::v4_mapped(u32::from(a)),
            IpAddr::V6(a) => u128::from(a),
        };
        QpEnd { ip, qpn }
    }
}

/// Commands of the spraying ToR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SprayCommand {
    /// The baseline's L2/route tables.
    Base(BaselineCommand),
    /// Install QP `qp` in `slot` (S and D state of the slot start fresh).
    QpInsert { qp: SprayQp, slot: u32 },
    /// Remove the QP in `slot` (both ends' keys).
    QpDelete { qp: SprayQp, slot: u32 },
}

longhaul_dataplane::counters! {
    /// The pipeline's own counters.
    #[derive(Copy)]
    pub struct TorStats: "spray" {
        pub unknown_qp: u64,
        pub sport_rewrites: u64,
        pub off_policy_marked: u64,
        pub nacks_dropped: u64,
        pub nacks_generated: u64,
        pub nack_no_route: u64,
        pub emit_nobuf: u64,
        pub signals_cleared: u64,
    }
}

enum PathMapRt {
    Sport(Vec<u16>),
    /// A path's port and next-hop MAC (static: what the rewrite needs, 8 bytes).
    Ports(Vec<Hop>),
}

/// The spraying ToR pipeline.
pub struct SprayTor {
    pub fwd: Forwarding,
    host: PortSet,
    fabric: PortSet,
    path_map: PathMapRt,
    /// N, the number of paths, as a [`FastMod`] (`P_base` is a remainder by it per packet).
    n: FastMod,
    seed: u64,
    s: Option<ThemisS>,
    d: Option<ThemisD>,
    /// `spray_qps`: a QP end (IP, QPN) to its slot, looked up on every sprayed frame.
    qps: FlatTable,
    parse_opts: ParseOptions,
    scratch: [u8; 128],
    pub stats: TorStats,
}

fn spray_cfg(cfg: &Config) -> SprayConfig {
    cfg.section::<SprayConfig>()
        .cloned()
        .unwrap_or(SprayConfig {
            host_ports: Vec::new(),
            fabric_ports: Vec::new(),
            source: false,
            dest: false,
            paths: SprayPaths::SportDeltas(vec![0]),
            window: 512,
            ooo_threshold: 448,
            avoidance_window: 0,
            qp_capacity: 1,
            qps: Vec::new(),
        })
}

/// RC request opcodes that carry a PSN of the request stream (Themis-D's bitmap).
#[inline]
fn is_request(op: u8) -> bool {
    op <= opcode::RC_RDMA_READ_REQUEST
        || matches!(
            op,
            opcode::RC_COMPARE_SWAP
                | opcode::RC_FETCH_ADD
                | opcode::RC_SEND_LAST_INV
                | opcode::RC_SEND_ONLY_INV
        )
}

/// RC RDMA WRITE opcodes (what Themis-S sprays, section 7).
#[inline]
fn is_write(op: u8) -> bool {
    (opcode::RC_RDMA_WRITE_FIRST..=opcode::RC_RDMA_WRITE_ONLY_IMM).contains(&op)
}

/// The RoCE fields a stage needs: (opcode, BTH byte 4, DestQP, PSN).
#[inline]
fn bth_fields(frame: &[u8], bth_off: usize) -> Option<(u8, u8, u32, u32)> {
    let b = frame.get(bth_off..bth_off + BTH_LEN)?;
    Some((
        b[0],
        b[4],
        u32::from_be_bytes([0, b[5], b[6], b[7]]),
        u32::from_be_bytes([0, b[9], b[10], b[11]]),
    ))
}

/// AETH (syndrome, MSN) of an ACK whose BTH is at `bth_off`.
#[inline]
fn aeth(frame: &[u8], bth_off: usize) -> Option<(u8, u32)> {
    let a = frame.get(bth_off + BTH_LEN..bth_off + BTH_LEN + AETH_LEN)?;
    Some((a[0], u32::from_be_bytes([0, a[1], a[2], a[3]])))
}

impl SprayTor {
    pub fn new(cfg: &Config) -> Self {
        let t = spray_cfg(cfg);
        let fwd = Forwarding::new(cfg);
        let n = t.paths.len().max(1) as u32;
        let path_map = match &t.paths {
            SprayPaths::SportDeltas(v) => PathMapRt::Sport(v.clone()),
            SprayPaths::Ports(v) => PathMapRt::Ports(
                v.iter()
                    .map(|p| Hop {
                        port: p.port,
                        mac: p.next_hop_mac,
                    })
                    .collect(),
            ),
        };
        let cap = t.qp_capacity;
        let mut qps = FlatTable::new(2 * cap, cfg.switch.seed);
        for (i, q) in t.qps.iter().enumerate() {
            let l = QpEnd::new(q.local, q.local_qpn);
            let r = QpEnd::new(q.remote, q.remote_qpn);
            let _ = qps.insert(l.ip, l.qpn, i as u32);
            let _ = qps.insert(r.ip, r.qpn, i as u32);
        }
        SprayTor {
            fwd,
            host: PortSet::new(&t.host_ports),
            fabric: PortSet::new(&t.fabric_ports),
            path_map,
            n: FastMod::new(n),
            seed: cfg.switch.seed,
            s: if t.source {
                ThemisS::new(SourceParams {
                    paths: n,
                    avoidance_window: t.avoidance_window,
                    capacity: cap,
                    seed: cfg.switch.seed,
                })
            } else {
                None
            },
            d: if t.dest {
                ThemisD::new(DestParams {
                    paths: n,
                    window: t.window,
                    ooo_threshold: t.ooo_threshold,
                    capacity: cap,
                })
            } else {
                None
            },
            qps,
            parse_opts: ParseOptions {
                max_vlan_tags: cfg.parser.max_vlan_tags,
                verify_ipv4_checksum: false,
                ..ParseOptions::default()
            },
            scratch: [0; 128],
            stats: TorStats::default(),
        }
    }

    /// Themis-S, when on.
    pub fn source(&self) -> Option<&ThemisS> {
        self.s.as_ref()
    }

    /// Themis-D, when on.
    pub fn dest(&self) -> Option<&ThemisD> {
        self.d.as_ref()
    }

    /// The `spray_qps` table (worker copy).
    pub fn qp_table(&self) -> &FlatTable {
        &self.qps
    }

    /// Slot of the QP end (destination IP, DestQP) of a RoCE frame.
    #[inline]
    fn slot(&mut self, frame: &[u8], l3_off: usize, qpn: u32) -> Option<usize> {
        let (_, dst) = ThemisEsw::ip_pair(frame, l3_off)?;
        let s = self.qps.lookup(dst, qpn);
        if s.is_none() {
            self.stats.unknown_qp += 1;
        }
        s.map(|s| s as usize)
    }

    /// Themis-S on a data packet from a local sender. Returns the 2-tier next hop when the
    /// PathMap is by port.
    ///
    /// Inlined into the ingress, and the IP pair read once for the QP lookup and `P_base`: as
    /// a call of its own with [`SprayTor::slot`] inside it, saving and restoring registers
    /// twice costs about 30 instructions per sprayed frame.
    #[inline(always)]
    fn source_data<B: PacketBuf>(
        &mut self,
        pkt: &mut B,
        p: &Parsed,
        op: u8,
        qpn: u32,
        psn: u32,
    ) -> Option<Hop> {
        let s = self.s.as_mut()?;
        let l3 = p.l3_off as usize;
        let bth = p.bth_off as usize;
        let (src, dst) = ThemisEsw::ip_pair(pkt.data(), l3)?;
        let Some(slot) = self.qps.lookup(dst, qpn) else {
            self.stats.unknown_qp += 1;
            return None;
        };
        let slot = slot as usize;
        let mut mark = true;
        let mut hop = None;
        if is_write(op) {
            let (seed, n) = (self.seed, &self.n);
            let base = s.base_of(slot, src, p.src_port, p.dst_port, || {
                p_base(src, dst, p.src_port, p.dst_port, seed, n)
            });
            let c = s.choose(slot, psn, base);
            mark = c.route != Route::Policy;
            let delta = match &self.path_map {
                PathMapRt::Ports(v) => {
                    hop = v.get(c.path as usize).copied();
                    0
                }
                PathMapRt::Sport(v) => v.get(c.path as usize).copied().unwrap_or(0),
            };
            if delta != 0 {
                self.rewrite_sport(pkt, p, p.src_port ^ delta);
            }
        }
        if mark {
            if let Some(b) = pkt.data_mut().get_mut(bth + 4) {
                *b |= OFF_POLICY_BIT;
                self.stats.off_policy_marked += 1;
            }
        }
        hop
    }

    /// Write a new UDP source port: UDP checksum updated incrementally when in use, ICRC
    /// recomputed (the source port is covered by it).
    fn rewrite_sport<B: PacketBuf>(&mut self, pkt: &mut B, p: &Parsed, sport: u16) {
        let l4 = p.l4_off as usize;
        let l3 = p.l3_off as usize;
        let f = pkt.data_mut();
        let Some(h) = f.get_mut(l4..l4 + udp::HEADER_LEN) else {
            return;
        };
        let old = u16::from_be_bytes([h[0], h[1]]);
        h[0..2].copy_from_slice(&sport.to_be_bytes());
        let ck = u16::from_be_bytes([h[6], h[7]]);
        if ck != 0 {
            let mut n = checksum::update32(ck, u32::from(old), u32::from(sport));
            if n == 0 {
                n = 0xffff;
            }
            h[6..8].copy_from_slice(&n.to_be_bytes());
        }
        if icrc::fill(f, l3).is_ok() {
            self.stats.sport_rewrites += 1;
        }
    }

    /// Themis-D on an ACK/NAK from a local receiver: `false` = drop it.
    fn dest_ack<B: PacketBuf>(&mut self, pkt: &B, p: &Parsed, qpn: u32, psn: u32) -> bool {
        if self.d.is_none() {
            return true;
        }
        let frame = pkt.data();
        let bth = p.bth_off as usize;
        let Some((syn, msn)) = aeth(frame, bth) else {
            return true;
        };
        let Some(slot) = self.slot(frame, p.l3_off as usize, qpn) else {
            return true;
        };
        let Some(d) = self.d.as_mut() else {
            return true;
        };
        if Syndrome::is_ack(syn) {
            d.on_ack(slot, psn);
            return true;
        }
        if syn != Syndrome::NAK_PSN_SEQ_ERR {
            return true;
        }
        let l3 = p.l3_off as usize;
        let tos = match p.l3 {
            L3Kind::V4 => frame.get(l3 + 1).copied().unwrap_or(0),
            _ => (p.dscp << 2) | p.ecn,
        };
        let pkey = frame
            .get(bth + 2..bth + 4)
            .map_or(0xffff, |b| u16::from_be_bytes([b[0], b[1]]));
        let fields = NackFields {
            dest_qp: qpn,
            msn,
            sport: p.src_port,
            pkey,
            tos,
        };
        match d.on_nack(slot, psn, fields) {
            NackClass::Valid => true,
            NackClass::Invalid | NackClass::Undetermined => {
                self.stats.nacks_dropped += 1;
                false
            }
        }
    }

    /// Themis-S on a NAK toward a local sender (lastNackPsn, path avoidance).
    fn source_nack<B: PacketBuf>(
        &mut self,
        pkt: &mut B,
        p: &Parsed,
        byte4: u8,
        qpn: u32,
        psn: u32,
    ) {
        let bth = p.bth_off as usize;
        let Some((syn, _)) = aeth(pkt.data(), bth) else {
            return;
        };
        if syn != Syndrome::NAK_PSN_SEQ_ERR {
            return;
        }
        let signal = byte4 & PATH_AVOIDANCE_BIT != 0;
        if self.s.is_some() {
            if let Some(slot) = self.slot(pkt.data(), p.l3_off as usize, qpn) {
                if let Some(s) = self.s.as_mut() {
                    s.on_nack(slot, psn, signal);
                }
            }
        }
        if signal {
            // The RNIC gets a standard NAK (byte 4 is outside the ICRC).
            if let Some(b) = pkt.data_mut().get_mut(bth + 4) {
                *b &= !PATH_AVOIDANCE_BIT;
                self.stats.signals_cleared += 1;
            }
        }
    }

    fn ingress_impl<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        ingress(self, ctx, pkt)
    }

    fn egress_impl<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        let m = *pkt.meta();
        if m.bth_off == 0 || m.flags & FLAG_GENERATED != 0 || !self.host.contains(m.egress_port) {
            return Action::Forward;
        }
        let bth = m.bth_off as usize;
        let Some((op, byte4, qpn, psn)) = bth_fields(pkt.data(), bth) else {
            return Action::Forward;
        };
        if !is_request(op) {
            return Action::Forward;
        }
        if byte4 & OFF_POLICY_BIT != 0 {
            if let Some(b) = pkt.data_mut().get_mut(bth + 4) {
                *b &= !OFF_POLICY_BIT;
            }
        }
        if self.d.is_none() {
            return Action::Forward;
        }
        let Some(slot) = self.slot(pkt.data(), m.l3_off as usize, qpn) else {
            return Action::Forward;
        };
        let Some(d) = self.d.as_mut() else {
            return Action::Forward;
        };
        if let DataOutcome::Regenerate { epsn, avoid, nack } =
            d.on_data(slot, psn, byte4 & OFF_POLICY_BIT == 0)
        {
            self.generate_nack(ctx, pkt.data(), m, epsn, avoid, &nack);
        }
        Action::Forward
    }

    /// Build the NAK for `epsn` toward the data packet's source (section 5: the data packet's
    /// addresses swapped, the stashed NAK's QPN, MSN, source port, P_Key and ToS) and route it.
    fn generate_nack<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        data: &[u8],
        m: Meta,
        epsn: u32,
        avoid: bool,
        f: &NackFields,
    ) {
        let l3 = m.l3_off as usize;
        let mut macs = [0u8; 12];
        if let Some(b) = data.get(..12) {
            macs.copy_from_slice(b);
        }
        let (dst_mac, src_mac) = (
            MacAddr([macs[6], macs[7], macs[8], macs[9], macs[10], macs[11]]),
            MacAddr([macs[0], macs[1], macs[2], macs[3], macs[4], macs[5]]),
        );
        let spec = AckSpec {
            dest_qp: f.dest_qp,
            psn: epsn & PSN_MASK,
            syndrome: Syndrome::NAK_PSN_SEQ_ERR,
            msn: f.msn,
            pkey: f.pkey,
        };
        let Some((src, dst)) = ThemisEsw::ip_pair(data, l3) else {
            return;
        };
        let v4 = (src >> 32) == 0xffff;
        let built = if v4 {
            let a = RoceAddrs {
                src_mac,
                dst_mac,
                src_ip: Ipv4Addr::from(dst as u32),
                dst_ip: Ipv4Addr::from(src as u32),
                udp_sport: f.sport,
                dscp: f.tos >> 2,
                ecn: f.tos & 3,
            };
            build_ack_v4(&mut self.scratch, &a, &spec)
        } else {
            let a = RoceAddrs {
                src_mac,
                dst_mac,
                src_ip: Ipv6Addr::from(dst),
                dst_ip: Ipv6Addr::from(src),
                udp_sport: f.sport,
                dscp: f.tos >> 2,
                ecn: f.tos & 3,
            };
            build_ack_v6(&mut self.scratch, &a, &spec)
        };
        let Ok(len) = built else {
            return;
        };
        let gp = parse(&self.scratch[..len], &self.parse_opts);
        if avoid {
            // BTH byte 4 is outside the ICRC: the NAK stays valid.
            if let Some(b) = self.scratch.get_mut(gp.bth_off as usize + 4) {
                *b |= PATH_AVOIDANCE_BIT;
            }
        }
        let Some(mut g) = ctx.pool().alloc_from(&self.scratch[..len]) else {
            self.stats.emit_nobuf += 1;
            return;
        };
        // Sent as a reply to the data, which came in on `m.ingress_port`.
        g.meta_mut().ingress_port = m.ingress_port;
        if !self.fwd.route_generated(ctx, &mut g) {
            self.stats.nack_no_route += 1;
            ctx.pool().free(g);
            return;
        }
        g.meta_mut().class = self.fwd.classify(&gp);
        self.stats.nacks_generated += 1;
        ctx.emit(g);
    }

    /// Apply a control command.
    pub fn command(&mut self, now: Nanos, cmd: SprayCommand) -> Result<(), &'static str> {
        match cmd {
            SprayCommand::Base(c) => self.fwd.command(now, c),
            SprayCommand::QpInsert { qp, slot } => {
                let s = slot as usize;
                if self.qps.capacity() < 2 * (s + 1) && self.qps.len() + 2 > self.qps.capacity() {
                    return Err("spray_qps full");
                }
                if let Some(x) = self.s.as_mut() {
                    x.reset(s);
                }
                if let Some(x) = self.d.as_mut() {
                    x.reset(s);
                }
                let (l, r) = (
                    QpEnd::new(qp.local, qp.local_qpn),
                    QpEnd::new(qp.remote, qp.remote_qpn),
                );
                self.qps
                    .insert(l.ip, l.qpn, slot)
                    .map_err(|_| "spray_qps full")?;
                self.qps
                    .insert(r.ip, r.qpn, slot)
                    .map_err(|_| "spray_qps full")?;
                Ok(())
            }
            SprayCommand::QpDelete { qp, slot } => {
                let (l, r) = (
                    QpEnd::new(qp.local, qp.local_qpn),
                    QpEnd::new(qp.remote, qp.remote_qpn),
                );
                self.qps.remove(l.ip, l.qpn);
                self.qps.remove(r.ip, r.qpn);
                if let Some(x) = self.s.as_mut() {
                    x.reset(slot as usize);
                }
                if let Some(x) = self.d.as_mut() {
                    x.reset(slot as usize);
                }
                Ok(())
            }
        }
    }
}

/// Spraying at the baseline's insertion points: before the rewrite, host -> fabric data takes
/// the sprayed path and ACKs go through the destination's check; fabric -> host ACKs through the
/// source's NACK handling.
impl<P: BufPool> Ingress<P> for SprayTor {
    type State = ();

    #[inline(always)]
    fn fwd(&mut self) -> &mut Forwarding {
        &mut self.fwd
    }

    #[inline(always)]
    fn after_lookup(
        &mut self,
        _ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        mut egress: Egress,
        _: &mut (),
    ) -> Result<Egress, Action> {
        if !p.is_roce() {
            return Ok(egress);
        }
        let Some((op, byte4, qpn, psn)) = bth_fields(pkt.data(), p.bth_off as usize) else {
            return Ok(egress);
        };
        let in_port = pkt.meta().ingress_port;
        let out_port = egress.port();
        if self.host.contains(in_port) && self.fabric.contains(out_port) {
            if op == opcode::RC_ACKNOWLEDGE {
                if !self.dest_ack(pkt, p, qpn, psn) {
                    return Err(Action::Consume);
                }
            } else if is_request(op) {
                if let Some(hop) = self.source_data(pkt, p, op, qpn, psn) {
                    egress = Egress::Route(hop);
                }
            }
        } else if self.fabric.contains(in_port)
            && self.host.contains(out_port)
            && op == opcode::RC_ACKNOWLEDGE
        {
            self.source_nack(pkt, p, byte4, qpn, psn);
        }
        Ok(egress)
    }
}

impl<P: BufPool> Pipeline<P> for SprayTor {
    fn on_link(&mut self, port: u16, up: bool) {
        self.fwd.set_link(port, up);
    }

    type Command = SprayCommand;
    // No ingress decision reads the traffic manager or holds packets: the engine may run the
    // whole burst through ingress before enqueueing it.
    const BURST_INGRESS: bool = true;

    #[inline]
    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.ingress_impl(ctx, pkt)
    }

    #[inline]
    fn egress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.egress_impl(ctx, pkt)
    }

    /// The egress stage (Themis-D, clearing the off-policy mark) acts on frames toward the
    /// hosts only: the engine skips it on the fabric ports, where sprayed frames leave, and
    /// sends their bypassed frames as one burst.
    #[inline]
    fn egress_active_on(&self, port: u16) -> bool {
        self.host.contains(port)
    }

    fn command(&mut self, ctx: &mut Ctx<'_, P>, cmd: SprayCommand) -> Result<(), &'static str> {
        self.command(ctx.now, cmd)
    }

    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.fwd.counters(out);
        self.stats.for_each(out);
        if let Some(x) = &self.s {
            x.counters(out);
        }
        if let Some(x) = &self.d {
            x.counters(out);
        }
    }

    fn tables(&self, out: &mut dyn FnMut(&'static str, TableCounters)) {
        self.fwd.tables(out);
        let q = self.qps.stats();
        out(
            "spray_qps",
            TableCounters {
                hits: q.hits,
                misses: q.misses,
                entries: self.qps.len() as u64,
                capacity: self.qps.capacity() as u64,
                full_events: q.full_events,
            },
        );
    }
}
