//! `[themis]`: THEMIS at the external switch (paper 000, sections IV and V): the raw section as
//! the file has it, its validation, and the validated [`ThemisConfig`] the stages are built from.
//! Keys and defaults: docs/config.md (keep the two in step).

use longhaul_control::config::{
    parse_prefix, span, Config, IpPrefix, PortRef, TypedSection, Validator, MAX_RATE_GBPS,
    MIN_RATE_GBPS, S,
};
use serde::Deserialize;

/// The section's table and the pipeline's name.
pub const NAME: &str = "themis";

// Defaults (docs/config.md): the paper's values where it gives them (section VI: alpha 5,
// beta 500 us, tables of 1024; cnp_interval 50 us as DCQCN's), ours otherwise.
const DEFAULT_CNP_INTERVAL_NS: i64 = 50_000;
const DEFAULT_CNP_DSCP: i64 = 48;
const DEFAULT_TABLE: i64 = 1024;
const MAX_TABLE: i64 = 16 * 1024 * 1024;
const DEFAULT_SYN_COOKIE_PERIOD_MS: i64 = 64_000;
const DEFAULT_INTER_DC_CAPACITY: i64 = 4096;
const DEFAULT_ALPHA: i64 = 5;
const DEFAULT_BETA_NS: i64 = 500_000;
const DEFAULT_LOOP_DELAY_NS: i64 = 1_000;
const DEFAULT_RECIRC_CAPACITY: i64 = 4096;
const MAX_NS: i64 = 10_000_000_000;

/// The `[themis]` section.
pub const SECTION: TypedSection<RawThemis, ThemisConfig> = TypedSection::new(NAME, validate);

// ---- validated ----------------------------------------------------------------------------

/// THEMIS at the external switch (paper 000, sections IV and V).
#[derive(Clone, Debug, PartialEq)]
pub struct ThemisConfig {
    /// Ports facing the local DC (hosts, daemons, the TCP handshakes THEMIS monitors).
    pub dc_ports: Vec<u16>,
    /// Ports facing the WAN / DCI.
    pub wan_ports: Vec<u16>,
    /// PNP (CNPs generated at the DC edge); `None` = disabled.
    pub pnp: Option<ThemisPnpConfig>,
    /// TRP (throttling by recirculation); `None` = disabled.
    pub trp: Option<ThemisTrpConfig>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ThemisPnpConfig {
    /// At most one CNP per QP per interval (ns).
    pub cnp_interval_ns: u64,
    /// DSCP of generated CNPs.
    pub cnp_dscp: u8,
    /// QP_field capacity (entries).
    pub qp_capacity: usize,
    /// CNP timestamp register size (cells).
    pub register_size: usize,
    /// Daemon messages are accepted only from these IPv4 prefixes (on DC ports).
    pub host_prefixes: Vec<(u32, u8)>,
    /// Remote-DC prefixes: when non-empty, a pair is inter-DC when the daemon's destination is in
    /// one of them; when empty, the TCP handshake monitor decides.
    pub inter_dc_prefixes: Vec<(u32, u8)>,
    /// SYN-cookie secret rotation period (ns).
    pub syn_cookie_period_ns: u64,
    /// Inter-DC pairs remembered (entries; the oldest is evicted when full).
    pub inter_dc_capacity: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ThemisTrpConfig {
    /// Algorithm 1's initial alpha.
    pub alpha: u32,
    /// Algorithm 1's beta (ns without CNPs before recovery).
    pub beta_ns: u64,
    /// Appendix D's direct recovery (for RNICs that accept out-of-order packets) instead of the
    /// reorder-free recovery.
    pub direct_recovery: bool,
    pub cnp_cache_size: usize,
    pub cnp_store_capacity: usize,
    /// The recirculation port standing in for the pre-filled port: rate, per-loop delay,
    /// capacity.
    pub recirc_rate_bps: u64,
    pub loop_delay_ns: u64,
    pub recirc_capacity_pkts: usize,
}

// ---- as in the file ------------------------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawThemis {
    pub dc_ports: Option<S<Vec<S<PortRef>>>>,
    pub wan_ports: Option<S<Vec<S<PortRef>>>>,
    pub pnp: Option<RawThemisPnp>,
    pub trp: Option<RawThemisTrp>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawThemisPnp {
    pub enabled: Option<S<bool>>,
    pub cnp_interval_ns: Option<S<i64>>,
    pub cnp_dscp: Option<S<i64>>,
    pub qp_capacity: Option<S<i64>>,
    pub register_size: Option<S<i64>>,
    pub host_prefixes: Option<Vec<S<String>>>,
    pub inter_dc_prefixes: Option<Vec<S<String>>>,
    pub syn_cookie_period_ms: Option<S<i64>>,
    pub inter_dc_capacity: Option<S<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawThemisTrp {
    pub enabled: Option<S<bool>>,
    pub alpha: Option<S<i64>>,
    pub beta_ns: Option<S<i64>>,
    pub recovery: Option<S<String>>,
    pub cnp_cache_size: Option<S<i64>>,
    pub cnp_store_capacity: Option<S<i64>>,
    pub recirc_rate_gbps: Option<S<f64>>,
    pub loop_delay_ns: Option<S<i64>>,
    pub recirc_capacity_pkts: Option<S<i64>>,
}

// ---- validation ---------------------------------------------------------------------------

fn v4_prefixes(cx: &mut Validator<'_>, key: &str, v: &Option<Vec<S<String>>>) -> Vec<(u32, u8)> {
    let mut out = Vec::new();
    for (i, p) in v.iter().flatten().enumerate() {
        match parse_prefix(p.get_ref()) {
            Ok(IpPrefix::V4 { addr, len }) => out.push((addr, len)),
            Ok(IpPrefix::V6 { .. }) => cx.err(
                format!("{key}[{i}]"),
                span(p),
                "THEMIS daemon messages carry IPv4 addresses: an IPv4 prefix is needed",
            ),
            Err(e) => cx.err(format!("{key}[{i}]"), span(p), e.to_string()),
        }
    }
    out
}

/// Validates `[themis]` (`t`, as read from the file) against the generic config.
fn validate(cx: &mut Validator<'_>, t: Option<&RawThemis>, cfg: &Config) -> Option<ThemisConfig> {
    let t = cx.pipeline_section(
        NAME,
        t,
        cfg,
        "dc_ports, wan_ports, [themis.pnp] and/or [themis.trp]",
    )?;
    let dc_ports = cx.port_refs("themis.dc_ports", &t.dc_ports);
    let wan_ports = cx.port_refs("themis.wan_ports", &t.wan_ports);
    cx.disjoint_ports(
        ("dc_ports", &dc_ports),
        ("wan_ports", &wan_ports),
        "themis.wan_ports",
        t.wan_ports.as_ref().and_then(span),
    );
    let pnp = t.pnp.as_ref().and_then(|p| {
            if !p.enabled.as_ref().is_none_or(|e| *e.get_ref()) {
                return None;
            }
            let k = |s: &str| format!("themis.pnp.{s}");
            let cnp_interval_ns = cx.int_or(
                &k("cnp_interval_ns"),
                &p.cnp_interval_ns,
                DEFAULT_CNP_INTERVAL_NS,
                0,
                MAX_NS,
            );
            let cnp_dscp = cx.int_or(&k("cnp_dscp"), &p.cnp_dscp, DEFAULT_CNP_DSCP, 0, 63);
            let qp_capacity =
                cx.int_or(&k("qp_capacity"), &p.qp_capacity, DEFAULT_TABLE, 1, MAX_TABLE);
            let register_size =
                cx.int_or(&k("register_size"), &p.register_size, DEFAULT_TABLE, 1, MAX_TABLE);
            let host_prefixes = v4_prefixes(cx, &k("host_prefixes"), &p.host_prefixes);
            if p.host_prefixes.as_ref().is_none_or(|v| v.is_empty()) {
                cx.err(
                    k("host_prefixes"),
                    None,
                    "needs at least one IPv4 prefix: daemon messages are trusted only from these sources",
                );
            }
            let inter_dc_prefixes = v4_prefixes(cx, &k("inter_dc_prefixes"), &p.inter_dc_prefixes);
            let period_ms = cx.int_or(
                &k("syn_cookie_period_ms"),
                &p.syn_cookie_period_ms,
                DEFAULT_SYN_COOKIE_PERIOD_MS,
                1,
                3_600_000,
            );
            let inter_dc_capacity = cx.int_or(
                &k("inter_dc_capacity"),
                &p.inter_dc_capacity,
                DEFAULT_INTER_DC_CAPACITY,
                1,
                MAX_TABLE,
            );
            Some(ThemisPnpConfig {
                cnp_interval_ns: cnp_interval_ns as u64,
                cnp_dscp: cnp_dscp as u8,
                qp_capacity: qp_capacity as usize,
                register_size: register_size as usize,
                host_prefixes,
                inter_dc_prefixes,
                syn_cookie_period_ns: period_ms as u64 * 1_000_000,
                inter_dc_capacity: inter_dc_capacity as usize,
            })
        });
    let trp = t.trp.as_ref().and_then(|p| {
        if !p.enabled.as_ref().is_none_or(|e| *e.get_ref()) {
            return None;
        }
        let k = |s: &str| format!("themis.trp.{s}");
        let alpha = cx.int_or(&k("alpha"), &p.alpha, DEFAULT_ALPHA, 1, 1_000_000);
        let beta_ns = cx.int_or(&k("beta_ns"), &p.beta_ns, DEFAULT_BETA_NS, 1, MAX_NS);
        let direct_recovery = match &p.recovery {
            None => false,
            Some(r) => match r.get_ref().as_str() {
                "reorder_free" => false,
                "direct" => true,
                other => {
                    cx.err(
                        k("recovery"),
                        span(r),
                        format!("'{other}': expected \"reorder_free\" or \"direct\""),
                    );
                    false
                }
            },
        };
        let cnp_cache_size = cx.int_or(
            &k("cnp_cache_size"),
            &p.cnp_cache_size,
            DEFAULT_TABLE,
            1,
            MAX_TABLE,
        );
        let cnp_store_capacity = cx.int_or(
            &k("cnp_store_capacity"),
            &p.cnp_store_capacity,
            DEFAULT_TABLE,
            1,
            MAX_TABLE,
        );
        let rate = match &p.recirc_rate_gbps {
            None => 100.0,
            Some(r) => {
                let g = *r.get_ref();
                if !(MIN_RATE_GBPS..=MAX_RATE_GBPS).contains(&g) {
                    cx.err(
                        k("recirc_rate_gbps"),
                        span(r),
                        format!("{g} is out of range: must be {MIN_RATE_GBPS} to {MAX_RATE_GBPS}"),
                    );
                    100.0
                } else {
                    g
                }
            }
        };
        let loop_delay_ns = cx.int_or(
            &k("loop_delay_ns"),
            &p.loop_delay_ns,
            DEFAULT_LOOP_DELAY_NS,
            0,
            MAX_NS,
        );
        let recirc_capacity_pkts = cx.int_or(
            &k("recirc_capacity_pkts"),
            &p.recirc_capacity_pkts,
            DEFAULT_RECIRC_CAPACITY,
            1,
            MAX_TABLE,
        );
        Some(ThemisTrpConfig {
            alpha: alpha as u32,
            beta_ns: beta_ns as u64,
            direct_recovery,
            cnp_cache_size: cnp_cache_size as usize,
            cnp_store_capacity: cnp_store_capacity as usize,
            recirc_rate_bps: (rate * 1e9).round() as u64,
            loop_delay_ns: loop_delay_ns as u64,
            recirc_capacity_pkts: recirc_capacity_pkts as usize,
        })
    });
    if pnp.is_none() && trp.is_none() && t.pnp.is_none() && t.trp.is_none() {
        cx.err(
            "themis",
            None,
            "enable PNP ([themis.pnp]) and/or TRP ([themis.trp])",
        );
    }
    // Every table and register is allocated at start: refuse what the machine cannot hold.
    let entries = pnp
        .as_ref()
        .map_or(0, |p| p.qp_capacity + p.register_size + p.inter_dc_capacity)
        + trp.as_ref().map_or(0, |t| {
            t.cnp_cache_size + t.cnp_store_capacity + t.recirc_capacity_pkts
        });
    cx.memory(
        "themis",
        None,
        "the THEMIS tables, registers and recirculation ring (their capacities x 256 bytes)",
        entries as u64 * TABLE_ENTRY_BYTES,
        &cfg.switch,
    );
    Some(ThemisConfig {
        dc_ports,
        wan_ports,
        pnp,
        trp,
    })
}

/// What a table entry costs, counted generously (key, value, hash table control bytes, the
/// power-of-two rounding of its buckets, and the control thread's master copy of the tables),
/// for the memory check. Measured: qp_capacity 16777216 takes 3.9 GB (about 230 bytes each).
pub const TABLE_ENTRY_BYTES: u64 = 256;
