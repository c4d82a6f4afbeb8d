//! `[mlcc]`: MLCC at a DCI switch (paper 001, section 3): the raw section as the file has it,
//! its validation, and the validated [`MlccConfig`]. Keys and defaults: docs/config.md (keep the
//! two in step); the rules: docs/mlcc.md.

use crate::baseline::int::IntStageConfig;
use longhaul_control::config::{span, Config, PortRef, TypedSection, Validator, S};
use longhaul_dataplane::wire::int::DEFAULT_INT_PORT;
use longhaul_dataplane::wire::roce::ROCE_V2_PORT;
use serde::Deserialize;

/// The section's table and the pipeline's name.
pub const NAME: &str = "mlcc";

// Section 4.1 of the paper where it gives a value, ours otherwise (docs/config.md).
/// Section 4.1: theta 18 ms.
pub const DEFAULT_THETA_NS: i64 = 18_000_000;
/// Section 4.1: D_t 1 ms.
pub const DEFAULT_D_T_NS: i64 = 1_000_000;
/// Section 4.1: m 5.
pub const DEFAULT_M: i64 = 5;
/// Section 4.1: alpha 0.5.
pub const DEFAULT_ALPHA: f64 = 0.5;
/// Ours: twice the evaluation's 3 ms long-haul delay.
pub const DEFAULT_RTT_C_NS: i64 = 6_000_000;
/// Ours: an intra-DC RTT ("20 to 100 us", section 2.2) until the credit loop is measured.
pub const DEFAULT_RTT_D_NS: i64 = 20_000;
/// Ours: the HPCC simulator's packet payload.
pub const DEFAULT_MTU_BYTES: i64 = 1000;
const DEFAULT_HISTORY: i64 = 512;
const DEFAULT_MIN_RATE_GBPS: f64 = 0.1;
/// Ours: the evaluation's server link rate (25 Gbit/s) for a new flow's PFQ.
pub const DEFAULT_INITIAL_RATE_GBPS: f64 = 25.0;
const DEFAULT_MAX_FLOWS: i64 = 64;
const DEFAULT_QUEUE_PKTS: i64 = 16_384;
const DEFAULT_QUEUE_BYTES: i64 = 16 * 1024 * 1024;
/// Ours: a PFQ with nothing queued and no data or ACK for 10 ms goes back to the pool.
pub const DEFAULT_IDLE_TIMEOUT_NS: i64 = 10_000_000;
/// Ours: the PFQs stop feeding a DC port whose queue holds this much (a few packets).
pub const DEFAULT_PORT_BACKLOG_BYTES: i64 = 65_536;
const MAX_NS: i64 = 10_000_000_000;
const MAX_RATE_GBPS: f64 = 1600.0;

/// The `[mlcc]` section.
pub const SECTION: TypedSection<RawMlcc, MlccConfig> = TypedSection::new(NAME, validate);

/// MLCC at a DCI switch.
#[derive(Clone, Debug, PartialEq)]
pub struct MlccConfig {
    pub dc_ports: Vec<u16>,
    pub wan_ports: Vec<u16>,
    /// UDP destination port of INT over UDP.
    pub int_udp_port: u16,
    /// The sender-side role; `None` = disabled.
    pub feedback: Option<FeedbackConfig>,
    /// The receiver-side role; `None` = disabled.
    pub receiver: Option<ReceiverConfig>,
}

/// Near-source feedback (section 3.2.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedbackConfig {
    /// DSCP of Switch-INT packets.
    pub dscp: u8,
    /// A Switch-INT for data packets whose PSN is a multiple of this.
    pub psn_stride: u32,
}

/// PFQ, credit and DQM (sections 3.2.2, 3.3.1).
#[derive(Clone, Debug, PartialEq)]
pub struct ReceiverConfig {
    pub max_flows: usize,
    pub queue_pkts: usize,
    pub queue_bytes: u64,
    pub initial_rate_bps: u64,
    pub idle_timeout_ns: u64,
    pub port_backlog_bytes: u64,
    pub theta_ns: u64,
    pub d_t_ns: u64,
    pub m: usize,
    pub alpha: f64,
    pub rtt_c_ns: u64,
    pub rtt_d_ns: u64,
    pub mtu_bytes: u32,
    pub history: usize,
    pub min_rate_bps: u64,
    /// Most DQM suggests (`None` = the DC port's rate).
    pub max_rate_bps: Option<u64>,
    /// Write DQM's rate into the ACKs (false: the credit loop only, an ablation).
    pub dqm: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawMlcc {
    pub dc_ports: Option<S<Vec<S<PortRef>>>>,
    pub wan_ports: Option<S<Vec<S<PortRef>>>>,
    pub int_udp_port: Option<S<i64>>,
    pub feedback: Option<RawFeedback>,
    pub receiver: Option<RawReceiver>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawFeedback {
    pub enabled: Option<S<bool>>,
    pub dscp: Option<S<i64>>,
    pub psn_stride: Option<S<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawReceiver {
    pub enabled: Option<S<bool>>,
    pub max_flows: Option<S<i64>>,
    pub queue_pkts: Option<S<i64>>,
    pub queue_bytes: Option<S<i64>>,
    pub initial_rate_gbps: Option<S<f64>>,
    pub idle_timeout_ns: Option<S<i64>>,
    pub port_backlog_bytes: Option<S<i64>>,
    pub theta_ns: Option<S<i64>>,
    pub d_t_ns: Option<S<i64>>,
    pub m: Option<S<i64>>,
    pub alpha: Option<S<f64>>,
    pub rtt_c_ns: Option<S<i64>>,
    pub rtt_d_ns: Option<S<i64>>,
    pub mtu_bytes: Option<S<i64>>,
    pub history: Option<S<i64>>,
    pub min_rate_gbps: Option<S<f64>>,
    pub max_rate_gbps: Option<S<f64>>,
    pub dqm: Option<S<bool>>,
}

fn enabled(e: &Option<S<bool>>) -> bool {
    e.as_ref().is_none_or(|e| *e.get_ref())
}

/// A float in `(lo, hi]` (`lo_inclusive`: `[lo, hi]`), or the default with an error.
fn float_or(
    cx: &mut Validator<'_>,
    key: &str,
    v: &Option<S<f64>>,
    default: f64,
    (lo, lo_inclusive, hi): (f64, bool, f64),
    what: &str,
) -> f64 {
    let Some(v) = v else {
        return default;
    };
    let x = *v.get_ref();
    let ok = if lo_inclusive { x >= lo } else { x > lo };
    if ok && x <= hi {
        x
    } else {
        let open = if lo_inclusive { "[" } else { "(" };
        cx.err(
            key,
            span(v),
            format!("{x} is out of range: {what} must be in {open}{lo}, {hi}]"),
        );
        default
    }
}

fn gbps(x: f64) -> u64 {
    (x * 1e9).round() as u64
}

fn validate_receiver(cx: &mut Validator<'_>, r: &RawReceiver) -> ReceiverConfig {
    let k = |s: &str| format!("mlcc.receiver.{s}");
    let rate = (0.001, true, MAX_RATE_GBPS);
    let min_rate = float_or(
        cx,
        &k("min_rate_gbps"),
        &r.min_rate_gbps,
        DEFAULT_MIN_RATE_GBPS,
        rate,
        "a rate in Gb/s",
    );
    let max_rate = r.max_rate_gbps.as_ref().map(|_| {
        float_or(
            cx,
            &k("max_rate_gbps"),
            &r.max_rate_gbps,
            MAX_RATE_GBPS,
            rate,
            "a rate in Gb/s",
        )
    });
    if let (Some(hi), Some(v)) = (max_rate, &r.max_rate_gbps) {
        if hi < min_rate {
            cx.err(
                k("max_rate_gbps"),
                span(v),
                format!("{hi} is below min_rate_gbps ({min_rate})"),
            );
        }
    }
    let theta_ns = cx.int_or(&k("theta_ns"), &r.theta_ns, DEFAULT_THETA_NS, 1, MAX_NS) as u64;
    ReceiverConfig {
        max_flows: cx.int_or(&k("max_flows"), &r.max_flows, DEFAULT_MAX_FLOWS, 1, 65_536) as usize,
        queue_pkts: cx.int_or(
            &k("queue_pkts"),
            &r.queue_pkts,
            DEFAULT_QUEUE_PKTS,
            1,
            1 << 20,
        ) as usize,
        queue_bytes: cx.int_or(
            &k("queue_bytes"),
            &r.queue_bytes,
            DEFAULT_QUEUE_BYTES,
            1,
            1 << 34,
        ) as u64,
        initial_rate_bps: gbps(float_or(
            cx,
            &k("initial_rate_gbps"),
            &r.initial_rate_gbps,
            DEFAULT_INITIAL_RATE_GBPS,
            rate,
            "a rate in Gb/s",
        )),
        idle_timeout_ns: cx.int_or(
            &k("idle_timeout_ns"),
            &r.idle_timeout_ns,
            DEFAULT_IDLE_TIMEOUT_NS,
            1,
            MAX_NS,
        ) as u64,
        port_backlog_bytes: cx.int_or(
            &k("port_backlog_bytes"),
            &r.port_backlog_bytes,
            DEFAULT_PORT_BACKLOG_BYTES,
            1,
            1 << 34,
        ) as u64,
        theta_ns,
        d_t_ns: cx.int_or(&k("d_t_ns"), &r.d_t_ns, DEFAULT_D_T_NS, 0, MAX_NS) as u64,
        m: cx.int_or(&k("m"), &r.m, DEFAULT_M, 1, 1024) as usize,
        alpha: float_or(
            cx,
            &k("alpha"),
            &r.alpha,
            DEFAULT_ALPHA,
            (0.0, false, 1.0),
            "alpha",
        ),
        rtt_c_ns: cx.int_or(&k("rtt_c_ns"), &r.rtt_c_ns, DEFAULT_RTT_C_NS, 1, MAX_NS) as u64,
        rtt_d_ns: cx.int_or(&k("rtt_d_ns"), &r.rtt_d_ns, DEFAULT_RTT_D_NS, 1, MAX_NS) as u64,
        mtu_bytes: cx.int_or(&k("mtu_bytes"), &r.mtu_bytes, DEFAULT_MTU_BYTES, 64, 65_535) as u32,
        history: cx.int_or(&k("history"), &r.history, DEFAULT_HISTORY, 1, 1 << 16) as usize,
        min_rate_bps: gbps(min_rate),
        max_rate_bps: max_rate.map(gbps),
        dqm: enabled(&r.dqm),
    }
}

/// Validates `[mlcc]` against the generic config.
fn validate(cx: &mut Validator<'_>, t: Option<&RawMlcc>, cfg: &Config) -> Option<MlccConfig> {
    let t = cx.pipeline_section(
        NAME,
        t,
        cfg,
        "dc_ports, wan_ports, [mlcc.feedback] and/or [mlcc.receiver]",
    )?;
    let dc_ports = cx.port_refs("mlcc.dc_ports", &t.dc_ports);
    let wan_ports = cx.port_refs("mlcc.wan_ports", &t.wan_ports);
    cx.disjoint_ports(
        ("dc_ports", &dc_ports),
        ("wan_ports", &wan_ports),
        "mlcc.wan_ports",
        t.wan_ports.as_ref().and_then(span),
    );
    let int_udp_port = cx.int_or(
        "mlcc.int_udp_port",
        &t.int_udp_port,
        DEFAULT_INT_PORT as i64,
        1,
        65535,
    ) as u16;
    let port_span = t.int_udp_port.as_ref().and_then(span);
    if int_udp_port == ROCE_V2_PORT {
        cx.err(
            "mlcc.int_udp_port",
            port_span.clone(),
            "4791 is RoCEv2's own port: INT over UDP needs another",
        );
    }
    // The DCI's own INT hop comes from [int] (the baseline's INT stage at egress): it must use
    // the same port, and add INT only toward the DC (toward the WAN, INT was just stripped).
    if let Some(i) = cfg.section::<IntStageConfig>() {
        if i.udp_port != int_udp_port {
            cx.err(
                "mlcc.int_udp_port",
                port_span,
                format!(
                    "{int_udp_port} differs from [int] udp_port ({}): one INT port per switch",
                    i.udp_port
                ),
            );
        }
        match &i.ports {
            None => cx.err(
                "int.ports",
                None,
                "on an MLCC DCI, [int] needs ports = the DC ports (INT must not be added \
                 toward the WAN)",
            ),
            Some(l) => {
                for p in l.iter().filter(|p| !dc_ports.contains(p)) {
                    cx.err(
                        "int.ports",
                        None,
                        format!("port id {p} is not one of mlcc.dc_ports: INT is added only toward the DC"),
                    );
                }
            }
        }
    }
    let feedback = t
        .feedback
        .as_ref()
        .filter(|f| enabled(&f.enabled))
        .map(|f| FeedbackConfig {
            dscp: cx.int_or("mlcc.feedback.dscp", &f.dscp, 48, 0, 63) as u8,
            psn_stride: cx.int_or("mlcc.feedback.psn_stride", &f.psn_stride, 1, 1, 1 << 24) as u32,
        });
    let receiver = t
        .receiver
        .as_ref()
        .filter(|r| enabled(&r.enabled))
        .map(|r| validate_receiver(cx, r));
    if t.feedback.is_none() && t.receiver.is_none() {
        cx.err(
            "mlcc",
            None,
            "enable the sender-side role ([mlcc.feedback]) and/or the receiver-side role \
             ([mlcc.receiver])",
        );
    }
    if receiver.is_some() && cfg.section::<IntStageConfig>().is_none() {
        cx.err(
            "mlcc.receiver",
            None,
            "the receiver-side DCI is the INT source of its DC (the credit C_D rides in the INT \
             it adds with its own hop): add an [int] table with switch_id and ports = the DC ports",
        );
    }
    if let Some(r) = &receiver {
        // The PFQ rings and the DQM histories are allocated at start.
        let per_flow = r.queue_pkts as u64 * 16 + (r.history + r.m) as u64 * 8 + 1024;
        cx.memory(
            "mlcc.receiver.max_flows",
            t.receiver
                .as_ref()
                .and_then(|x| x.max_flows.as_ref())
                .and_then(span),
            "the PFQs (max_flows x (queue_pkts x 16 + history x 8) bytes)",
            r.max_flows as u64 * per_flow,
            &cfg.switch,
        );
    }
    Some(MlccConfig {
        dc_ports,
        wan_ports,
        int_udp_port,
        feedback,
        receiver,
    })
}
