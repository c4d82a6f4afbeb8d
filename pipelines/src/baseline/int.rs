//! `[int]`: the baseline switch as an INT source / transit hop for MLCC (paper 001, section
//! 3.2.1: "the switches between the sender and the sender-side DCI-switch insert INT
//! information into the data packet"). Off unless the config has an `[int]` table.
//!
//! At egress on a configured port (the start of transmission, so the queue occupancy and the
//! timestamp are the ones an HPCC-style sender wants):
//! - a RoCEv2 RC data packet (SEND / RDMA WRITE opcodes, UDP port 4791) without INT gets the INT
//!   shim and MD header of the MLCC domain (the switch is the INT source) and then its hop;
//! - RC data already carrying the MLCC INT on `udp_port` gets its hop pushed (transit); when
//!   RemainingHopCount is 0 the E bit is set instead. An ACK carrying INT (an MLCC receiver's
//!   echo of its data's INT) passes unchanged;
//! - anything else passes unchanged. INT is best effort: a packet INT cannot be added to (no
//!   headroom, a length that would overflow) leaves unchanged and is counted.
//!
//! The hop (`wire::mlcc::MlccHop`): switch id, egress queue and its occupancy in bytes, the
//! egress timestamp, the port's tx bytes so far and its rate in Mbit/s. Formats:
//! docs/wire-formats.md; rules: docs/mlcc.md.

use longhaul_control::config::{span, Config, PortRef, TypedSection, Validator, S};
use longhaul_dataplane::engine::Ctx;
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::wire::int::DEFAULT_INT_PORT;
use longhaul_dataplane::wire::mlcc::{self, MlccHop};
use longhaul_dataplane::wire::roce::{opcode, ROCE_V2_PORT};
use longhaul_dataplane::wire::{be16, WireError};
use serde::Deserialize;

/// The table's name.
pub const NAME: &str = "int";
/// Ours: RemainingHopCount at the source (a sender DC's ToR, aggregation and spine).
pub const DEFAULT_MAX_HOPS: i64 = 3;

/// The `[int]` section.
pub const SECTION: TypedSection<RawInt, IntStageConfig> = TypedSection::new(NAME, validate);

/// A validated `[int]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntStageConfig {
    /// Node id in every hop this switch pushes.
    pub switch_id: u32,
    /// UDP destination port of INT over UDP.
    pub udp_port: u16,
    /// RemainingHopCount when this switch is the source.
    pub max_hops: u8,
    /// Egress ports that add INT (`None` = every port).
    pub ports: Option<Vec<u16>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawInt {
    pub enabled: Option<S<bool>>,
    pub switch_id: Option<S<i64>>,
    pub udp_port: Option<S<i64>>,
    pub max_hops: Option<S<i64>>,
    pub ports: Option<S<Vec<S<PortRef>>>>,
}

fn validate(cx: &mut Validator<'_>, t: Option<&RawInt>, _cfg: &Config) -> Option<IntStageConfig> {
    let t = t?;
    if t.enabled.as_ref().is_some_and(|e| !*e.get_ref()) {
        return None;
    }
    let switch_id = match &t.switch_id {
        Some(v) => cx.int("int.switch_id", v, 0, u32::MAX as i64).unwrap_or(0) as u32,
        None => {
            cx.err(
                "int.switch_id",
                None,
                "missing (this key is required): the node id this switch writes into INT",
            );
            0
        }
    };
    let udp_port = cx.int_or(
        "int.udp_port",
        &t.udp_port,
        DEFAULT_INT_PORT as i64,
        1,
        65535,
    ) as u16;
    if udp_port == ROCE_V2_PORT {
        cx.err(
            "int.udp_port",
            t.udp_port.as_ref().and_then(span),
            "4791 is RoCEv2's own port: INT over UDP needs another",
        );
    }
    let max_hops = cx.int_or("int.max_hops", &t.max_hops, DEFAULT_MAX_HOPS, 1, 8) as u8;
    let ports = t
        .ports
        .as_ref()
        .map(|_| cx.port_refs("int.ports", &t.ports));
    Some(IntStageConfig {
        switch_id,
        udp_port,
        max_hops,
        ports,
    })
}

longhaul_dataplane::counters! {
    /// Counters of the INT stage.
    #[derive(Copy)]
    pub struct IntStats: "int" {
        /// Data packets this switch made INT packets (source).
        pub sourced: u64,
        /// Hops pushed (source and transit).
        pub pushed: u64,
        /// INT packets whose RemainingHopCount was 0 (E bit set, nothing pushed).
        pub hop_limit: u64,
        /// Packets INT could not be added to (headroom, length), passed unchanged.
        pub failed: u64,
    }
}

/// The INT stage (runs at egress).
pub struct IntStage {
    cfg: IntStageConfig,
    /// Port id -> adds INT.
    on_port: Vec<bool>,
    pub stats: IntStats,
}

/// Is `op` requester data (RC SEND / RDMA WRITE)?
#[inline]
pub fn is_rc_data(op: u8) -> bool {
    op <= opcode::RC_RDMA_WRITE_ONLY_IMM
}

impl IntStage {
    /// The stage of `cfg`'s `[int]`, if configured.
    pub fn from_config(cfg: &Config) -> Option<IntStage> {
        let c = cfg.section::<IntStageConfig>()?.clone();
        let max_id = cfg.ports.iter().map(|p| p.id).max().unwrap_or(0) as usize;
        let mut on_port = vec![false; max_id + 1];
        for p in &cfg.ports {
            on_port[p.id as usize] = c.ports.as_ref().is_none_or(|l| l.contains(&p.id));
        }
        Some(IntStage {
            cfg: c,
            on_port,
            stats: IntStats::default(),
        })
    }

    /// The UDP port of INT.
    pub fn udp_port(&self) -> u16 {
        self.cfg.udp_port
    }

    /// The hop this switch pushes for a packet leaving `port` from `queue` now.
    pub fn hop<P: BufPool>(&self, ctx: &mut Ctx<'_, P>, port: u16, queue: u8) -> MlccHop {
        let (qlen, tx_bytes, rate_bps) = ctx.int_port_state(port, queue);
        MlccHop {
            node_id: self.cfg.switch_id,
            queue_id: queue,
            qlen: qlen.min(mlcc::MAX_QLEN as u64) as u32,
            ts: ctx.now,
            tx_bytes,
            rate_mbps: (rate_bps / 1_000_000).min(u32::MAX as u64) as u32,
        }
    }

    /// Egress: source or push as the module doc says.
    #[inline]
    pub fn egress<P: BufPool>(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) {
        self.egress_with(ctx, pkt, None);
    }

    /// [`IntStage::egress`], with `c_d` in the DS Flags when this switch is the source (the MLCC
    /// receiver-side DCI's credit for the packet's flow).
    #[inline]
    pub fn egress_with<P: BufPool>(
        &mut self,
        ctx: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        c_d: Option<u16>,
    ) {
        let m = *pkt.meta();
        if !self
            .on_port
            .get(m.egress_port as usize)
            .copied()
            .unwrap_or(false)
            || m.l4_off == 0
        {
            return;
        }
        let dport = be16(pkt.data(), m.l4_off as usize + 2);
        let source = if dport == Some(ROCE_V2_PORT) {
            let op = pkt.data().get(m.l4_off as usize + 8).copied();
            if !op.is_some_and(is_rc_data) {
                return;
            }
            true
        } else if dport == Some(self.cfg.udp_port) {
            false
        } else {
            return;
        };
        let hop = self.hop(ctx, m.egress_port, m.egress_queue());
        let l3 = m.l3_off as usize;
        let r = if source {
            // The header and our hop in one pass.
            mlcc::source(pkt, l3, self.cfg.udp_port, self.cfg.max_hops, c_d, &hop).map(|_| true)
        } else {
            // Only our domain's INT on data takes our hop (an ACK echoing INT passes as it is).
            mlcc::locate(pkt.data(), l3, self.cfg.udp_port).and_then(|m| {
                match pkt.data().get(m.bth_off).copied() {
                    Some(op) if is_rc_data(op) => mlcc::push_at(pkt, l3, &m.layout, &hop),
                    _ => Err(WireError::Unsupported),
                }
            })
        };
        match r {
            Ok(true) => {
                self.stats.sourced += source as u64;
                self.stats.pushed += 1;
            }
            Ok(false) => self.stats.hop_limit += 1,
            Err(WireError::Unsupported) if !source => {}
            Err(_) => self.stats.failed += 1,
        }
    }

    /// Counters by name.
    pub fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }
}
