//! The THEMIS external switch (ESW): the baseline's forwarding with PNP and TRP between the
//! forwarding decision and the frame rewrite (paper 000, Fig. 4: PNP on the DC-to-WAN
//! direction, TRP on the WAN-to-DC direction of data and the DC-to-WAN direction of CNPs).
//!
//! Per packet (ingress):
//! 1. A packet back from the recirculation port (`loop_count > 0`) was already forwarded and
//!    rewritten on its first pass: only TRP decides again (loop once more, or leave).
//! 2. Parse and classify as the baseline does.
//! 3. From a DC port, UDP to 12345: a THEMIS daemon message, punted to the control thread (which
//!    checks the policy, updates the master QP_field and installs the entry on the workers).
//! 4. Forwarding decision (L2, then LPM).
//! 5. DC -> WAN:
//!    - TCP handshakes of pairs not yet known to be inter-DC go through the SYN-cookie monitor
//!      (Fig. 5): a SYN is answered with a SYN-ACK carrying a cookie; an ACK with a valid cookie
//!      is answered with a RST and the pair is punted (the control thread records it as
//!      inter-DC on every worker); the client's retried handshake then passes.
//!    - A CNP from a local receiver: TRP `on_cnp` with the key derived through QP_field (see
//!      `trp::KEY_DOC`); punted when the flow must be installed in CNP_Store.
//!    - RoCE data with CE: PNP sends a CNP back out of the ingress port (rate-limited by
//!      `cnp_interval`) and clears CE.
//! 6. WAN -> DC RoCE data: TRP `on_data`; a throttled or recovering flow goes round the
//!    recirculation port.
//! 7. The frame rewrite (TTL, MACs) and forward.

use super::config::{ThemisConfig, ThemisTrpConfig};
use super::daemon::{InterDcPairs, QpField, QpKey, DAEMON_PORT};
use super::pnp::{Pnp, PnpParams, PnpVerdict};
use super::syncookie::{AckVerdict, SynCookies};
use super::trp::{DataVerdict, RecoveryMode, Trp, TrpCommand, TrpKey, TrpParams, NO_SLOT_HINT};
use crate::baseline::ingress::{ingress, Ingress};
use crate::baseline::{BaselineCommand, Egress, Forwarding};
use crate::ports::PortSet;
use longhaul_control::config::Config;
use longhaul_dataplane::control::Punt;
use longhaul_dataplane::engine::{Action, Ctx, Pipeline, TableCounters};
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::ipv4::{PROTO_TCP, PROTO_UDP};
use longhaul_dataplane::wire::parse::{L3Kind, Parsed};
use longhaul_dataplane::wire::roce::{opcode, Bth};
use longhaul_dataplane::wire::tcp;
use std::net::IpAddr;

/// Punt reasons of the THEMIS pipeline.
pub const PUNT_DAEMON: u16 = 1;
/// A validated handshake: `arg` = client IPv4 << 32 | server IPv4.
pub const PUNT_HANDSHAKE: u16 = 2;
/// A CNP whose flow is not in CNP_Store yet.
pub const PUNT_CNP: u16 = 3;

/// Commands the THEMIS control thread sends to workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThemisCommand {
    /// The baseline's L2/route tables.
    Base(BaselineCommand),
    /// QP_field[key] = cqpn (daemon create/modify).
    QpInsert { key: QpKey, cqpn: u32 },
    /// Remove QP_field[key] and reset its CNP timestamp register (daemon destroy).
    QpDelete { key: QpKey },
    /// Record an inter-DC IP pair (handshake monitor).
    InterDc { a: u32, b: u32 },
    /// TRP's CNP_Store / CNP_Cache.
    Trp(TrpCommand),
}

longhaul_dataplane::counters! {
    /// The pipeline's own counters.
    #[derive(Copy)]
    pub struct EswStats: "themis" {
        pub daemon_punts: u64,
        pub handshake_punts: u64,
        pub cnp_punts: u64,
        pub synacks_sent: u64,
        pub rsts_sent: u64,
        pub cnps_sent: u64,
        pub cnps_seen: u64,
        pub cnp_without_qp: u64,
        pub recirculated: u64,
        pub emit_nobuf: u64,
    }
}

/// THEMIS at the external switch.
pub struct ThemisEsw {
    pub fwd: Forwarding,
    /// Port id -> role.
    dc: PortSet,
    wan: PortSet,
    pnp: Option<Pnp>,
    cookies: Option<SynCookies>,
    qp_field: QpField,
    inter_dc: InterDcPairs,
    trp: Option<Trp>,
    cnp_class: u8,
    scratch: [u8; 256],
    pub stats: EswStats,
}

/// TRP's parameters from the config.
pub fn trp_params(t: &ThemisTrpConfig) -> TrpParams {
    TrpParams {
        alpha_init: t.alpha,
        beta_ns: t.beta_ns,
        recovery: if t.direct_recovery {
            RecoveryMode::Direct
        } else {
            RecoveryMode::ReorderFree
        },
        cnp_cache_size: t.cnp_cache_size,
        cnp_store_capacity: t.cnp_store_capacity,
        ..TrpParams::default()
    }
}

/// The SYN-cookie secret of a live run, drawn once per process (see [`use_random_cookie_secret`]).
static LIVE_COOKIE_SECRET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Make every ESW built from now on in this process derive its SYN-cookie secrets from a random
/// value drawn now, instead of from `[switch] seed`. `longhaul run` calls it: a config (and its
/// seed) is not a secret, and cookies derived from it could be forged by anyone who has read it.
/// Every worker and every rebuilt switch of the process shares the value, so a handshake spans
/// a reload. Replay does not call it: its cookies stay reproducible from the seed.
pub fn use_random_cookie_secret() {
    LIVE_COOKIE_SECRET.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        // RandomState's keys come from the OS's random source (getrandom) once per process.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(mono_ns_for_secret());
        h.finish()
    });
}

/// A little extra entropy next to RandomState's keys.
fn mono_ns_for_secret() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The seed of the SYN-cookie secrets: the live run's random value, else `[switch] seed`.
fn cookie_secret_seed(cfg: &Config) -> u64 {
    LIVE_COOKIE_SECRET.get().copied().unwrap_or(cfg.switch.seed)
}

/// The `[themis]` section of a THEMIS config (validated: present iff the pipeline is THEMIS).
fn themis_cfg(cfg: &Config) -> ThemisConfig {
    cfg.section::<ThemisConfig>()
        .cloned()
        .unwrap_or(ThemisConfig {
            dc_ports: Vec::new(),
            wan_ports: Vec::new(),
            pnp: None,
            trp: None,
        })
}

impl ThemisEsw {
    pub fn new(cfg: &Config) -> Self {
        let t = themis_cfg(cfg);
        let pnp_params = t.pnp.as_ref().map(|p| PnpParams {
            cnp_interval_ns: p.cnp_interval_ns,
            qp_capacity: p.qp_capacity,
            cnp_dscp: p.cnp_dscp,
            register_size: p.register_size,
        });
        let fwd = Forwarding::new(cfg);
        let cnp_class = fwd.class_of_dscp(pnp_params.as_ref().map_or(48, |p| p.cnp_dscp));
        ThemisEsw {
            fwd,
            dc: PortSet::new(&t.dc_ports),
            wan: PortSet::new(&t.wan_ports),
            // Pnp::new refuses only a zero register size, which validation already refused.
            pnp: pnp_params.as_ref().and_then(|p| Pnp::new(*p).ok()),
            cookies: t
                .pnp
                .as_ref()
                .filter(|p| p.inter_dc_prefixes.is_empty())
                .map(|p| SynCookies::new(cookie_secret_seed(cfg), p.syn_cookie_period_ns)),
            qp_field: QpField::new(t.pnp.as_ref().map_or(1024, |p| p.qp_capacity)),
            inter_dc: InterDcPairs::new(t.pnp.as_ref().map_or(1, |p| p.inter_dc_capacity)),
            trp: t.trp.as_ref().map(|p| Trp::new(trp_params(p))),
            cnp_class,
            scratch: [0; 256],
            stats: EswStats::default(),
        }
    }

    /// QP_field (the worker's copy).
    pub fn qp_field(&self) -> &QpField {
        &self.qp_field
    }

    /// TRP, when enabled.
    pub fn trp(&self) -> Option<&Trp> {
        self.trp.as_ref()
    }

    fn emit<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, len: usize, port: u16, class: u8) -> bool {
        let Some(mut g) = ctx.pool().alloc_from(&self.scratch[..len]) else {
            self.stats.emit_nobuf += 1;
            return false;
        };
        let m = g.meta_mut();
        m.egress_port = port;
        m.class = class;
        ctx.emit(g);
        true
    }

    /// IPv4 source and destination of a parsed IPv4 frame.
    fn v4_pair(frame: &[u8], p: &Parsed) -> Option<(u32, u32)> {
        if p.l3 != L3Kind::V4 {
            return None;
        }
        let l3 = p.l3_off as usize;
        let b = frame.get(l3 + 12..l3 + 20)?;
        Some((
            u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        ))
    }

    /// Source and destination addresses as u128 (IPv4-mapped for IPv4). Inlined: a call
    /// returns the pair through memory (the spraying ToR's QP lookup).
    #[inline(always)]
    pub(crate) fn ip_pair(frame: &[u8], l3_off: usize) -> Option<(u128, u128)> {
        longhaul_dataplane::wire::parse::ip_pair_u128(frame, l3_off)
    }

    /// (opcode, DestQP, PSN) of the BTH at `bth_off`.
    fn bth(frame: &[u8], bth_off: usize) -> Option<(u8, u32, u32)> {
        let b = Bth::new_checked(frame.get(bth_off..)?).ok()?;
        Some((b.opcode(), b.dest_qp(), b.psn()))
    }

    /// TRP's decision for a WAN -> DC RoCE data packet (first pass or back from the loop).
    ///
    /// A packet sent round the loop carries in `meta.user` the CNP_Store slot where this pass
    /// found its flow (`Trp::on_data_at`'s hint; THEMIS uses `meta.user` for nothing else), so
    /// that its next pass finds the flow without hashing the key (THEMIS's part of a pass 247
    /// instructions on the themis scenario instead of 328); it is cleared when the packet
    /// leaves the loop. A first pass
    /// takes no hint: the word is the receive path's.
    fn trp_data<B: PacketBuf>(&mut self, pkt: &mut B, now: Nanos) -> Option<DataVerdict> {
        let trp = self.trp.as_mut()?;
        let m = pkt.meta();
        let frame = pkt.data();
        let (op, qpn, psn) = Self::bth(frame, m.bth_off as usize)?;
        if op == opcode::CNP || op == opcode::RC_ACKNOWLEDGE {
            return None;
        }
        let (_, dst) = Self::ip_pair(frame, m.l3_off as usize)?;
        let loop_count = m.loop_count;
        let hint = if loop_count > 0 { m.user } else { NO_SLOT_HINT };
        let (v, next) = trp.on_data_at(TrpKey::new(dst, qpn), psn, loop_count, now, hint);
        if v == DataVerdict::Recirculate || loop_count > 0 {
            pkt.meta_mut().user = if v == DataVerdict::Recirculate {
                next
            } else {
                NO_SLOT_HINT
            };
        }
        Some(v)
    }

    fn ingress_impl<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        ingress(self, ctx, pkt)
    }

    /// A CNP from a local receiver toward the WAN (section V-A): TRP's key is (the receiver's IP,
    /// its QPN), which QP_field gives for (client = receiver, server = remote sender, sQPN = the
    /// CNP's DestQP, here `qpn`).
    #[inline(never)]
    fn on_cnp<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &P::Buf,
        p: &Parsed,
        qpn: u32,
        now: Nanos,
    ) {
        self.stats.cnps_seen += 1;
        let Some(trp) = self.trp.as_mut() else {
            return;
        };
        let Some((src, dst)) = Self::ip_pair(pkt.data(), p.l3_off as usize) else {
            return;
        };
        let qk = QpKey {
            client_ip: src,
            server_ip: dst,
            sqpn: qpn,
        };
        let Some(local_qpn) = self.qp_field.lookup(&qk, now) else {
            self.stats.cnp_without_qp += 1;
            return;
        };
        if trp.on_cnp(TrpKey::new(src, local_qpn), now).punt() {
            ctx.punt_packet(PUNT_CNP, pkt);
            self.stats.cnp_punts += 1;
        }
    }

    /// Apply a control command.
    pub fn command(&mut self, now: Nanos, cmd: ThemisCommand) -> Result<(), &'static str> {
        match cmd {
            ThemisCommand::Base(c) => self.fwd.command(now, c),
            ThemisCommand::QpInsert { key, cqpn } => self
                .qp_field
                .insert(key, cqpn, now)
                .map(|_| ())
                .map_err(|_| "QP_field full"),
            ThemisCommand::QpDelete { key } => {
                if let Some(pnp) = self.pnp.as_mut() {
                    pnp.reset_for(&key);
                }
                self.qp_field
                    .remove(&key)
                    .map(|_| ())
                    .ok_or("no such QP_field entry")
            }
            ThemisCommand::InterDc { a, b } => self
                .inter_dc
                .record(a, b, now)
                .map_err(|_| "inter-DC pair table full"),
            ThemisCommand::Trp(c) => match self.trp.as_mut() {
                Some(t) => t.apply(c, now),
                None => Err("TRP is disabled"),
            },
        }
    }
}

/// THEMIS at the baseline's insertion points: recirculated packets before the parse, daemon
/// messages after classify, the SYN cookies and PNP before the rewrite, TRP after it.
impl<P: BufPool> Ingress<P> for ThemisEsw {
    type State = ();

    #[inline(always)]
    fn fwd(&mut self) -> &mut Forwarding {
        &mut self.fwd
    }

    /// Back from the recirculation port: forwarded and rewritten on the first pass.
    #[inline(always)]
    fn before_parse(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Result<(), Action> {
        if pkt.meta().loop_count == 0 {
            return Ok(());
        }
        Err(match self.trp_data(pkt, ctx.now) {
            Some(DataVerdict::Recirculate) => {
                self.stats.recirculated += 1;
                Action::Recirculate
            }
            _ => Action::Forward,
        })
    }

    /// THEMIS daemon messages from the DC side go to the control thread (the port first: it
    /// alone rules out RoCE and almost everything else).
    #[inline(always)]
    fn after_classify(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        _: &mut (),
    ) -> Option<Action> {
        if p.dst_port == DAEMON_PORT
            && p.proto == PROTO_UDP
            && p.l3 == L3Kind::V4
            && self.dc.contains(pkt.meta().ingress_port)
            && self.pnp.is_some()
        {
            ctx.punt_packet(PUNT_DAEMON, pkt);
            self.stats.daemon_punts += 1;
            return Some(Action::Consume);
        }
        None
    }

    /// DC -> WAN: the TCP handshake monitor with SYN cookies (Fig. 5), then CNPs (TRP's
    /// key) and PNP on RoCE data.
    #[inline(always)]
    fn after_lookup(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        egress: Egress,
        _: &mut (),
    ) -> Result<Egress, Action> {
        let in_port = pkt.meta().ingress_port;
        if !(self.dc.contains(in_port) && self.wan.contains(egress.port())) {
            return Ok(egress);
        }
        let now = ctx.now;
        let class = pkt.meta().class;
        if let (Some(cookies), true) = (self.cookies.as_mut(), p.proto == PROTO_TCP) {
            if let Some((src, dst)) = Self::v4_pair(pkt.data(), p) {
                if !self.inter_dc.contains(src, dst) {
                    let f = p.tcp_flags;
                    if f & (tcp::SYN | tcp::ACK) == tcp::SYN {
                        if let Some(n) = cookies.on_syn(pkt.data(), p, now, &mut self.scratch) {
                            if self.emit(ctx, n, in_port, class) {
                                self.stats.synacks_sent += 1;
                            }
                            return Err(Action::Consume);
                        }
                    } else if f & (tcp::SYN | tcp::ACK | tcp::RST) == tcp::ACK {
                        if let AckVerdict::Valid {
                            rst_len,
                            client_ip: IpAddr::V4(c),
                            server_ip: IpAddr::V4(s),
                        } = cookies.on_ack(pkt.data(), p, now, &mut self.scratch)
                        {
                            if rst_len > 0 && self.emit(ctx, rst_len, in_port, class) {
                                self.stats.rsts_sent += 1;
                            }
                            let arg = (u64::from(u32::from(c)) << 32) | u64::from(u32::from(s));
                            ctx.punt(Punt::event(PUNT_HANDSHAKE, in_port, now, arg));
                            self.stats.handshake_punts += 1;
                            return Err(Action::Consume);
                        }
                    }
                }
            }
        }
        // The BTH is read once: for the CNP test, and its DestQP for PNP (a parsed BTH is in an
        // IP datagram, which `Pnp::on_roce_data` needs; no stage above wrote the frame, so the
        // parsed ECN is the frame's).
        if let Some((op, dest_qp, _)) = p
            .is_roce()
            .then(|| Self::bth(pkt.data(), p.bth_off as usize))
            .flatten()
        {
            if op == opcode::CNP {
                self.on_cnp(ctx, pkt, p, dest_qp, now);
            } else if let Some(pnp) = self.pnp.as_mut() {
                let v = pnp.on_roce_data(
                    pkt.data_mut(),
                    p,
                    dest_qp,
                    p.ecn,
                    now,
                    &mut self.qp_field,
                    &mut self.scratch,
                );
                if let PnpVerdict::Cnp { len } = v {
                    let c = self.cnp_class;
                    if self.emit(ctx, len, in_port, c) {
                        self.stats.cnps_sent += 1;
                    }
                }
            }
        }
        Ok(egress)
    }

    /// WAN -> DC RoCE data through TRP.
    #[inline(always)]
    fn after_rewrite(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        p: &Parsed,
        egress: Egress,
        _: (),
    ) -> Action {
        if p.is_roce()
            && self.wan.contains(pkt.meta().ingress_port)
            && self.dc.contains(egress.port())
        {
            if let Some(DataVerdict::Recirculate) = self.trp_data(pkt, ctx.now) {
                self.stats.recirculated += 1;
                return Action::Recirculate;
            }
        }
        Action::Forward
    }
}

impl<P: BufPool> Pipeline<P> for ThemisEsw {
    fn on_link(&mut self, port: u16, up: bool) {
        self.fwd.set_link(port, up);
    }

    type Command = ThemisCommand;
    // No ingress decision reads the traffic manager or holds packets: the engine may run the
    // whole burst through ingress before enqueueing it.
    const BURST_INGRESS: bool = true;

    #[inline]
    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        self.ingress_impl(ctx, pkt)
    }

    /// The ESW has no egress stage (PNP and TRP act at ingress; the trait's `egress` forwards):
    /// the engine skips the call, and sends bypassed frames as a burst.
    #[inline]
    fn egress_active(&self) -> bool {
        false
    }

    fn command(&mut self, ctx: &mut Ctx<'_, P>, cmd: ThemisCommand) -> Result<(), &'static str> {
        self.command(ctx.now, cmd)
    }

    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.fwd.counters(out);
        self.stats.for_each(out);
        if let Some(c) = &self.cookies {
            c.stats().for_each(out);
        }
        if let Some(p) = &self.pnp {
            p.counters(out);
        }
        if let Some(t) = &self.trp {
            t.counters(out);
        }
    }

    fn tables(&self, out: &mut dyn FnMut(&'static str, TableCounters)) {
        self.fwd.tables(out);
        let q = self.qp_field.stats();
        out(
            "qp_field",
            TableCounters {
                hits: q.hits,
                misses: q.misses,
                entries: self.qp_field.len() as u64,
                capacity: self.qp_field.table().capacity() as u64,
                full_events: q.full_events,
            },
        );
        let d = self.inter_dc.stats();
        out(
            "inter_dc",
            TableCounters {
                hits: d.hits,
                misses: d.misses,
                entries: self.inter_dc.len() as u64,
                capacity: self.inter_dc.table_ref().capacity() as u64,
                full_events: d.full_events,
            },
        );
        if let Some(t) = &self.trp {
            t.tables(out);
        }
    }
}
