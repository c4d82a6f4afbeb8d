//! `[reflex]`: Reflex at the external switch (paper 003, section III): the raw section as the
//! file has it, its validation, and the validated [`ReflexConfig`] the stages are built from.
//! Keys and defaults: docs/config.md (keep the two in step); the rules: docs/reflex.md.

use longhaul_control::config::{span, Config, PortRef, SchedulerKind, TypedSection, Validator, S};
use longhaul_dataplane::packet::NUM_CLASSES;
use longhaul_dataplane::wire::int::DEFAULT_INT_PORT;
use longhaul_dataplane::wire::roce::ROCE_V2_PORT;
use serde::Deserialize;

/// The section's table and the pipeline's name.
pub const NAME: &str = "reflex";

// Defaults: Table I of the paper where it gives a value, ours otherwise (docs/config.md).
/// Table I: T_src_thresh 5 us.
pub const DEFAULT_T_SRC_THRESH_NS: i64 = 5_000;
/// Table I: T_interval 5 us (TIMELY senders; 3 us for Swift).
pub const DEFAULT_T_INTERVAL_NS: i64 = 5_000;
/// Table I: N_cool 5.
pub const DEFAULT_N_COOL: i64 = 5;
/// Table I: T_dst_thresh 10 us.
pub const DEFAULT_T_DST_THRESH_NS: i64 = 10_000;
/// Table I: N_throttle 8.
pub const DEFAULT_N_THROTTLE: i64 = 8;
/// Table I: alpha 0.7.
pub const DEFAULT_ALPHA: f64 = 0.7;
/// Table I: T_maxpause 500 us.
pub const DEFAULT_T_MAXPAUSE_NS: i64 = 500_000;
/// Ours: pseudo-ACKs at the DSCP hosts use for CNPs.
pub const DEFAULT_ACK_DSCP: i64 = 48;
/// Ours: the class of RoCEv2 data is the one DSCP 26 (RoCE's customary DSCP) maps to.
pub const ROCE_DATA_DSCP: usize = 26;
const DEFAULT_TABLE: i64 = 4096;
const MAX_TABLE: i64 = 16 * 1024 * 1024;
/// Ours: NSF forgets a flow idle for 10 ms.
pub const DEFAULT_NSF_IDLE_NS: i64 = 10_000_000;
/// Ours: a flow with no data or ACK for 100 us is not active (NDT's alpha).
pub const DEFAULT_ACTIVE_TIMEOUT_NS: i64 = 100_000;
const MAX_NS: i64 = 10_000_000_000;

/// The `[reflex]` section.
pub const SECTION: TypedSection<RawReflex, ReflexConfig> = TypedSection::new(NAME, validate);

// ---- validated ----------------------------------------------------------------------------

/// Reflex at the external switch.
#[derive(Clone, Debug, PartialEq)]
pub struct ReflexConfig {
    /// Ports facing the local DC.
    pub dc_ports: Vec<u16>,
    /// Ports facing the WAN.
    pub wan_ports: Vec<u16>,
    /// UDP destination port of INT over UDP (the Reflex timestamp's carrier).
    pub int_udp_port: u16,
    /// NSF at the source ESW; `None` = disabled.
    pub nsf: Option<NsfConfig>,
    /// NDT at the destination ESW; `None` = disabled.
    pub ndt: Option<NdtConfig>,
}

/// Near-Source Feedback (section III-C).
#[derive(Clone, Debug, PartialEq)]
pub struct NsfConfig {
    pub t_src_thresh_ns: u64,
    pub t_interval_ns: u64,
    pub n_cool: u32,
    /// DSCP of pseudo-ACKs.
    pub ack_dscp: u8,
    pub flow_capacity: usize,
    pub flow_idle_timeout_ns: u64,
}

/// Near-Destination Throttling (section III-D).
#[derive(Clone, Debug, PartialEq)]
pub struct NdtConfig {
    pub t_dst_thresh_ns: u64,
    pub n_throttle: u32,
    pub alpha: f64,
    pub t_maxpause_ns: u64,
    /// The class of the inter-DC data NDT manages (its Normal queue).
    pub data_class: u8,
    /// The Controlled queue on the DC ports.
    pub controlled_queue: u8,
    pub flow_capacity: usize,
    pub active_timeout_ns: u64,
}

// ---- as in the file ------------------------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawReflex {
    pub dc_ports: Option<S<Vec<S<PortRef>>>>,
    pub wan_ports: Option<S<Vec<S<PortRef>>>>,
    pub int_udp_port: Option<S<i64>>,
    pub nsf: Option<RawNsf>,
    pub ndt: Option<RawNdt>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawNsf {
    pub enabled: Option<S<bool>>,
    pub t_src_thresh_ns: Option<S<i64>>,
    pub t_interval_ns: Option<S<i64>>,
    pub n_cool: Option<S<i64>>,
    pub ack_dscp: Option<S<i64>>,
    pub flow_capacity: Option<S<i64>>,
    pub flow_idle_timeout_ns: Option<S<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawNdt {
    pub enabled: Option<S<bool>>,
    pub t_dst_thresh_ns: Option<S<i64>>,
    pub n_throttle: Option<S<i64>>,
    pub alpha: Option<S<f64>>,
    pub t_maxpause_ns: Option<S<i64>>,
    pub data_class: Option<S<i64>>,
    pub controlled_queue: Option<S<i64>>,
    pub flow_capacity: Option<S<i64>>,
    pub active_timeout_ns: Option<S<i64>>,
}

// ---- validation ---------------------------------------------------------------------------

fn enabled(e: &Option<S<bool>>) -> bool {
    e.as_ref().is_none_or(|e| *e.get_ref())
}

fn validate_nsf(cx: &mut Validator<'_>, p: &RawNsf) -> NsfConfig {
    let k = |s: &str| format!("reflex.nsf.{s}");
    NsfConfig {
        t_src_thresh_ns: cx.int_or(
            &k("t_src_thresh_ns"),
            &p.t_src_thresh_ns,
            DEFAULT_T_SRC_THRESH_NS,
            0,
            MAX_NS,
        ) as u64,
        t_interval_ns: cx.int_or(
            &k("t_interval_ns"),
            &p.t_interval_ns,
            DEFAULT_T_INTERVAL_NS,
            0,
            MAX_NS,
        ) as u64,
        n_cool: cx.int_or(&k("n_cool"), &p.n_cool, DEFAULT_N_COOL, 0, 1_000_000) as u32,
        ack_dscp: cx.int_or(&k("ack_dscp"), &p.ack_dscp, DEFAULT_ACK_DSCP, 0, 63) as u8,
        flow_capacity: cx.int_or(
            &k("flow_capacity"),
            &p.flow_capacity,
            DEFAULT_TABLE,
            1,
            MAX_TABLE,
        ) as usize,
        flow_idle_timeout_ns: cx.int_or(
            &k("flow_idle_timeout_ns"),
            &p.flow_idle_timeout_ns,
            DEFAULT_NSF_IDLE_NS,
            1,
            MAX_NS,
        ) as u64,
    }
}

fn validate_ndt(cx: &mut Validator<'_>, p: &RawNdt, cfg: &Config) -> NdtConfig {
    let k = |s: &str| format!("reflex.ndt.{s}");
    let q = &cfg.qos;
    let alpha = match &p.alpha {
        None => DEFAULT_ALPHA,
        Some(a) => {
            let x = *a.get_ref();
            if x > 0.0 && x <= 1.0 {
                x
            } else {
                cx.err(
                    k("alpha"),
                    span(a),
                    format!("{x} is out of range: the controlled-flow share must be in (0, 1]"),
                );
                DEFAULT_ALPHA
            }
        }
    };
    let default_data = q.dscp_map[ROCE_DATA_DSCP] as i64;
    let data_class = cx.int_or(
        &k("data_class"),
        &p.data_class,
        default_data,
        0,
        NUM_CLASSES as i64 - 1,
    ) as u8;
    let controlled_queue = match &p.controlled_queue {
        None => {
            cx.err(
                k("controlled_queue"),
                None,
                "missing (this key is required): a queue no class maps to, for the Controlled queue",
            );
            0
        }
        Some(v) => cx
            .int(&k("controlled_queue"), v, 0, NUM_CLASSES as i64 - 1)
            .unwrap_or(0) as u8,
    };
    let cq_span = p.controlled_queue.as_ref().and_then(span);
    if q.scheduler != SchedulerKind::Wrr {
        cx.err(
            k("n_throttle"),
            p.n_throttle.as_ref().and_then(span),
            "NDT serves its queues N_throttle:1 in packets: [qos] scheduler must be \"wrr\"",
        );
    }
    if p.controlled_queue.is_some() {
        let used =
            |c: u8| c == q.default_class || q.dscp_map.contains(&c) || q.pcp_map.contains(&c);
        if controlled_queue == data_class {
            cx.err(
                k("controlled_queue"),
                cq_span.clone(),
                format!("must differ from the data class ({data_class})"),
            );
        } else if used(controlled_queue) {
            cx.err(
                k("controlled_queue"),
                cq_span.clone(),
                format!(
                    "queue {controlled_queue} is a class the QoS maps traffic to (default_class, \
                     dscp_map or pcp_map): the Controlled queue must be one no class uses"
                ),
            );
        }
        if q.strict_classes.contains(&controlled_queue) {
            cx.err(
                k("controlled_queue"),
                cq_span,
                format!(
                    "queue {controlled_queue} is in [qos] strict_classes: WRR cannot throttle it"
                ),
            );
        }
    }
    if q.strict_classes.contains(&data_class) {
        cx.err(
            k("data_class"),
            p.data_class.as_ref().and_then(span),
            format!("class {data_class} is in [qos] strict_classes: NDT needs it in the WRR"),
        );
    }
    NdtConfig {
        t_dst_thresh_ns: cx.int_or(
            &k("t_dst_thresh_ns"),
            &p.t_dst_thresh_ns,
            DEFAULT_T_DST_THRESH_NS,
            0,
            MAX_NS,
        ) as u64,
        n_throttle: cx.int_or(&k("n_throttle"), &p.n_throttle, DEFAULT_N_THROTTLE, 1, 255) as u32,
        alpha,
        t_maxpause_ns: cx.int_or(
            &k("t_maxpause_ns"),
            &p.t_maxpause_ns,
            DEFAULT_T_MAXPAUSE_NS,
            1,
            MAX_NS,
        ) as u64,
        data_class,
        controlled_queue,
        flow_capacity: cx.int_or(
            &k("flow_capacity"),
            &p.flow_capacity,
            DEFAULT_TABLE,
            1,
            MAX_TABLE,
        ) as usize,
        active_timeout_ns: cx.int_or(
            &k("active_timeout_ns"),
            &p.active_timeout_ns,
            DEFAULT_ACTIVE_TIMEOUT_NS,
            1,
            MAX_NS,
        ) as u64,
    }
}

/// Validates `[reflex]` (`t`, as read from the file) against the generic config.
fn validate(cx: &mut Validator<'_>, t: Option<&RawReflex>, cfg: &Config) -> Option<ReflexConfig> {
    let t = cx.pipeline_section(
        NAME,
        t,
        cfg,
        "dc_ports, wan_ports, [reflex.nsf] and/or [reflex.ndt]",
    )?;
    let dc_ports = cx.port_refs("reflex.dc_ports", &t.dc_ports);
    let wan_ports = cx.port_refs("reflex.wan_ports", &t.wan_ports);
    cx.disjoint_ports(
        ("dc_ports", &dc_ports),
        ("wan_ports", &wan_ports),
        "reflex.wan_ports",
        t.wan_ports.as_ref().and_then(span),
    );
    let int_udp_port = cx.int_or(
        "reflex.int_udp_port",
        &t.int_udp_port,
        DEFAULT_INT_PORT as i64,
        1,
        65535,
    ) as u16;
    if int_udp_port == ROCE_V2_PORT {
        cx.err(
            "reflex.int_udp_port",
            t.int_udp_port.as_ref().and_then(span),
            "4791 is RoCEv2's own port: INT over UDP needs another",
        );
    }
    let nsf = t
        .nsf
        .as_ref()
        .filter(|p| enabled(&p.enabled))
        .map(|p| validate_nsf(cx, p));
    let ndt = t
        .ndt
        .as_ref()
        .filter(|p| enabled(&p.enabled))
        .map(|p| validate_ndt(cx, p, cfg));
    if t.nsf.is_none() && t.ndt.is_none() {
        cx.err(
            "reflex",
            None,
            "enable NSF ([reflex.nsf]) and/or NDT ([reflex.ndt])",
        );
    }
    Some(ReflexConfig {
        dc_ports,
        wan_ports,
        int_udp_port,
        nsf,
        ndt,
    })
}
