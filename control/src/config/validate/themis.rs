//! `[themis]`: THEMIS at the external switch (paper 000, sections IV and V).

use super::super::raw::{PortRef, RawThemis, S};
use super::super::{
    IpPrefix, PipelineKind, SwitchConfig, ThemisConfig, ThemisPnpConfig, ThemisTrpConfig,
};
use super::{span, PortInfo, Validator, MAX_RATE_GBPS, MIN_RATE_GBPS};

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

impl Validator<'_> {
    /// A required, non-empty list of distinct ports (names or ids) as port ids (`[themis]`,
    /// `[spray]`).
    pub(super) fn port_refs(
        &mut self,
        key: &str,
        v: &Option<S<Vec<S<PortRef>>>>,
        infos: &[PortInfo],
    ) -> Vec<u16> {
        let Some(list) = v else {
            self.err(key, None, "missing (this key is required)");
            return Vec::new();
        };
        if list.get_ref().is_empty() {
            self.err(key, span(list), "must name at least one port");
        }
        let mut out: Vec<u16> = Vec::new();
        for (i, r) in list.get_ref().iter().enumerate() {
            if let Some(id) = self.port_ref(&format!("{key}[{i}]"), r, infos) {
                if out.contains(&id) {
                    self.err(format!("{key}[{i}]"), span(r), "port listed twice");
                } else {
                    out.push(id);
                }
            }
        }
        out
    }

    fn v4_prefixes(&mut self, key: &str, v: &Option<Vec<S<String>>>) -> Vec<(u32, u8)> {
        let mut out = Vec::new();
        for (i, p) in v.iter().flatten().enumerate() {
            match super::parse_prefix(p.get_ref()) {
                Ok(IpPrefix::V4 { addr, len }) => out.push((addr, len)),
                Ok(IpPrefix::V6 { .. }) => self.err(
                    format!("{key}[{i}]"),
                    span(p),
                    "THEMIS daemon messages carry IPv4 addresses: an IPv4 prefix is needed",
                ),
                Err(m) => self.err(format!("{key}[{i}]"), span(p), m),
            }
        }
        out
    }

    pub(super) fn themis(
        &mut self,
        t: Option<&RawThemis>,
        sw: &SwitchConfig,
        infos: &[PortInfo],
    ) -> Option<ThemisConfig> {
        let t = match (sw.pipeline, t) {
            (PipelineKind::Themis, Some(t)) => t,
            (PipelineKind::Themis, None) => {
                self.err(
                    "themis",
                    None,
                    "switch.pipeline = \"themis\" needs a [themis] table (dc_ports, wan_ports, [themis.pnp] and/or [themis.trp])",
                );
                return None;
            }
            (_, Some(_)) => {
                self.err(
                    "themis",
                    None,
                    "[themis] is only used with switch.pipeline = \"themis\"",
                );
                return None;
            }
            (_, None) => return None,
        };
        let dc_ports = self.port_refs("themis.dc_ports", &t.dc_ports, infos);
        let wan_ports = self.port_refs("themis.wan_ports", &t.wan_ports, infos);
        for id in &dc_ports {
            if wan_ports.contains(id) {
                self.err(
                    "themis.wan_ports",
                    t.wan_ports.as_ref().and_then(span),
                    format!("port id {id} is in both dc_ports and wan_ports"),
                );
            }
        }
        let pnp = t.pnp.as_ref().and_then(|p| {
            if !p.enabled.as_ref().is_none_or(|e| *e.get_ref()) {
                return None;
            }
            let k = |s: &str| format!("themis.pnp.{s}");
            let cnp_interval_ns = self.int_or(
                &k("cnp_interval_ns"),
                &p.cnp_interval_ns,
                DEFAULT_CNP_INTERVAL_NS,
                0,
                MAX_NS,
            );
            let cnp_dscp = self.int_or(&k("cnp_dscp"), &p.cnp_dscp, DEFAULT_CNP_DSCP, 0, 63);
            let qp_capacity =
                self.int_or(&k("qp_capacity"), &p.qp_capacity, DEFAULT_TABLE, 1, MAX_TABLE);
            let register_size =
                self.int_or(&k("register_size"), &p.register_size, DEFAULT_TABLE, 1, MAX_TABLE);
            let host_prefixes = self.v4_prefixes(&k("host_prefixes"), &p.host_prefixes);
            if p.host_prefixes.as_ref().is_none_or(|v| v.is_empty()) {
                self.err(
                    k("host_prefixes"),
                    None,
                    "needs at least one IPv4 prefix: daemon messages are trusted only from these sources",
                );
            }
            let inter_dc_prefixes = self.v4_prefixes(&k("inter_dc_prefixes"), &p.inter_dc_prefixes);
            let period_ms = self.int_or(
                &k("syn_cookie_period_ms"),
                &p.syn_cookie_period_ms,
                DEFAULT_SYN_COOKIE_PERIOD_MS,
                1,
                3_600_000,
            );
            let inter_dc_capacity = self.int_or(
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
            let alpha = self.int_or(&k("alpha"), &p.alpha, DEFAULT_ALPHA, 1, 1_000_000);
            let beta_ns = self.int_or(&k("beta_ns"), &p.beta_ns, DEFAULT_BETA_NS, 1, MAX_NS);
            let direct_recovery = match &p.recovery {
                None => false,
                Some(r) => match r.get_ref().as_str() {
                    "reorder_free" => false,
                    "direct" => true,
                    other => {
                        self.err(
                            k("recovery"),
                            span(r),
                            format!("'{other}': expected \"reorder_free\" or \"direct\""),
                        );
                        false
                    }
                },
            };
            let cnp_cache_size = self.int_or(
                &k("cnp_cache_size"),
                &p.cnp_cache_size,
                DEFAULT_TABLE,
                1,
                MAX_TABLE,
            );
            let cnp_store_capacity = self.int_or(
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
                        self.err(
                            k("recirc_rate_gbps"),
                            span(r),
                            format!(
                                "{g} is out of range: must be {MIN_RATE_GBPS} to {MAX_RATE_GBPS}"
                            ),
                        );
                        100.0
                    } else {
                        g
                    }
                }
            };
            let loop_delay_ns = self.int_or(
                &k("loop_delay_ns"),
                &p.loop_delay_ns,
                DEFAULT_LOOP_DELAY_NS,
                0,
                MAX_NS,
            );
            let recirc_capacity_pkts = self.int_or(
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
            self.err(
                "themis",
                None,
                "enable PNP ([themis.pnp]) and/or TRP ([themis.trp])",
            );
        }
        Some(ThemisConfig {
            dc_ports,
            wan_ports,
            pnp,
            trp,
        })
    }
}
