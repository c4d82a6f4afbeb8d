//! `[spray]`: Themis packet spraying at the ToR (paper 002).

use super::super::raw::{RawSpray, S};
use super::super::{NextHopConfig, PipelineKind, SprayConfig, SprayPaths, SprayQp, SwitchConfig};
use super::{span, PortInfo, Validator};
use std::net::IpAddr;

// Defaults (docs/config.md): the paper's values (section 6: TX window 512, OOO_THRESHOLD 448,
// AVOIDANCE_WINDOW 2e6).
const DEFAULT_WINDOW: i64 = 512;
const DEFAULT_OOO_THRESHOLD: i64 = 448;
const DEFAULT_AVOIDANCE_WINDOW: i64 = 2_000_000;
const DEFAULT_QP_CAPACITY: i64 = 1024;
/// 8 Mi QPs: the registers are preallocated (about 1.2 KB per QP at 128 paths).
const MAX_QP_CAPACITY: i64 = 8 * 1024 * 1024;
const MAX_PATHS: usize = 1024;
const MAX_WINDOW: i64 = 1 << 22;
const QPN_MAX: i64 = 0xff_ffff;

impl Validator<'_> {
    fn ip_addr(&mut self, key: &str, v: &Option<S<String>>) -> Option<IpAddr> {
        let Some(v) = v else {
            self.err(key, None, "missing (this key is required)");
            return None;
        };
        match v.get_ref().parse::<IpAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                self.err(
                    key,
                    span(v),
                    format!(
                        "'{}' is not an IP address (e.g. 10.0.0.1 or 2001:db8::1)",
                        v.get_ref()
                    ),
                );
                None
            }
        }
    }

    pub(super) fn spray(
        &mut self,
        t: Option<&RawSpray>,
        sw: &SwitchConfig,
        infos: &[PortInfo],
    ) -> Option<SprayConfig> {
        let t = match (sw.pipeline, t) {
            (PipelineKind::Spray, Some(t)) => t,
            (PipelineKind::Spray, None) => {
                self.err(
                    "spray",
                    None,
                    "switch.pipeline = \"spray\" needs a [spray] table (host_ports, fabric_ports, mode and the PathMap)",
                );
                return None;
            }
            (_, Some(_)) => {
                self.err(
                    "spray",
                    None,
                    "[spray] is only used with switch.pipeline = \"spray\"",
                );
                return None;
            }
            (_, None) => return None,
        };
        let host_ports = self.port_refs("spray.host_ports", &t.host_ports, infos);
        let fabric_ports = self.port_refs("spray.fabric_ports", &t.fabric_ports, infos);
        for id in &host_ports {
            if fabric_ports.contains(id) {
                self.err(
                    "spray.fabric_ports",
                    t.fabric_ports.as_ref().and_then(span),
                    format!("port id {id} is in both host_ports and fabric_ports"),
                );
            }
        }
        let source = t.source.as_ref().is_none_or(|v| *v.get_ref());
        let dest = t.dest.as_ref().is_none_or(|v| *v.get_ref());
        if !source && !dest {
            self.err(
                "spray",
                None,
                "enable Themis-S (source = true) and/or Themis-D (dest = true)",
            );
        }
        let mode = match &t.mode {
            None => {
                self.err(
                    "spray.mode",
                    None,
                    "missing (this key is required): \"sport\" (3-tier, sport_deltas) or \"port\" (2-tier, [[spray.path_ports]])",
                );
                None
            }
            Some(m) => match m.get_ref().as_str() {
                "sport" => Some(true),
                "port" => Some(false),
                other => {
                    self.err(
                        "spray.mode",
                        span(m),
                        format!("'{other}': expected \"sport\" or \"port\""),
                    );
                    None
                }
            },
        };
        let paths = match mode {
            Some(true) => {
                if let Some(p) = &t.path_ports {
                    self.err(
                        "spray.path_ports",
                        span(p),
                        "only used with mode = \"port\" (mode \"sport\" takes sport_deltas)",
                    );
                }
                let mut v = Vec::new();
                match &t.sport_deltas {
                    None => self.err(
                        "spray.sport_deltas",
                        None,
                        "missing: mode = \"sport\" needs the PathMap as UDP source-port deltas, one per path",
                    ),
                    Some(list) => {
                        for (i, d) in list.get_ref().iter().enumerate() {
                            if let Some(x) =
                                self.int(&format!("spray.sport_deltas[{i}]"), d, 0, 0xffff)
                            {
                                if v.contains(&(x as u16)) {
                                    self.err(
                                        format!("spray.sport_deltas[{i}]"),
                                        span(d),
                                        "duplicate delta: two paths would be the same path",
                                    );
                                }
                                v.push(x as u16);
                            }
                        }
                    }
                }
                SprayPaths::SportDeltas(v)
            }
            Some(false) => {
                if let Some(d) = &t.sport_deltas {
                    self.err(
                        "spray.sport_deltas",
                        span(d),
                        "only used with mode = \"sport\" (mode \"port\" takes [[spray.path_ports]])",
                    );
                }
                let mut v: Vec<NextHopConfig> = Vec::new();
                match &t.path_ports {
                    None => self.err(
                        "spray.path_ports",
                        None,
                        "missing: mode = \"port\" needs the PathMap as [[spray.path_ports]] (port, next_hop_mac), one per path",
                    ),
                    Some(list) => {
                        for (i, e) in list.get_ref().iter().enumerate() {
                            let k = format!("spray.path_ports[{i}]");
                            let e_ref = e.get_ref();
                            let port = match &e_ref.port {
                                None => {
                                    self.err(
                                        format!("{k}.port"),
                                        span(e),
                                        "missing (this key is required)",
                                    );
                                    None
                                }
                                Some(p) => self.port_ref(&format!("{k}.port"), p, infos),
                            };
                            if let Some(p) = port {
                                if !fabric_ports.contains(&p) {
                                    self.err(
                                        format!("{k}.port"),
                                        e_ref.port.as_ref().and_then(span),
                                        format!("port id {p} is not one of spray.fabric_ports"),
                                    );
                                }
                                if v.iter().any(|x| x.port == p) {
                                    self.err(
                                        format!("{k}.port"),
                                        e_ref.port.as_ref().and_then(span),
                                        "port used by two paths",
                                    );
                                }
                            }
                            let mac = match &e_ref.next_hop_mac {
                                None => {
                                    self.err(
                                        format!("{k}.next_hop_mac"),
                                        span(e),
                                        "missing (this key is required)",
                                    );
                                    [0; 6]
                                }
                                Some(m) => self.mac(&format!("{k}.next_hop_mac"), m, true),
                            };
                            v.push(NextHopConfig {
                                port: port.unwrap_or(0),
                                next_hop_mac: mac,
                            });
                        }
                    }
                }
                SprayPaths::Ports(v)
            }
            None => SprayPaths::SportDeltas(Vec::new()),
        };
        if mode.is_some() && paths.is_empty() {
            self.err(
                "spray",
                None,
                "the PathMap has no paths (N must be at least 1)",
            );
        }
        if paths.len() > MAX_PATHS {
            self.err(
                "spray",
                None,
                format!("the PathMap has {} paths: at most {MAX_PATHS}", paths.len()),
            );
        }
        let window = self.int_or("spray.window", &t.window, DEFAULT_WINDOW, 64, MAX_WINDOW);
        if !(window as u64).is_power_of_two() {
            self.err(
                "spray.window",
                t.window.as_ref().and_then(span),
                format!("{window} is not a power of two: the double-length bitmap (appendix A) maps PSN mod 2W, which must divide 2^24"),
            );
        }
        let ooo_threshold = self.int_or(
            "spray.ooo_threshold",
            &t.ooo_threshold,
            DEFAULT_OOO_THRESHOLD,
            1,
            (1 << 23) - 1,
        );
        let avoidance_window = self.int_or(
            "spray.avoidance_window",
            &t.avoidance_window,
            DEFAULT_AVOIDANCE_WINDOW,
            0,
            u32::MAX as i64,
        );
        let qp_capacity = self.int_or(
            "spray.qp_capacity",
            &t.qp_capacity,
            DEFAULT_QP_CAPACITY,
            1,
            MAX_QP_CAPACITY,
        );
        let mut qps: Vec<SprayQp> = Vec::new();
        for (i, q) in t.qps.iter().flatten().enumerate() {
            let k = format!("spray.qps[{i}]");
            let r = q.get_ref();
            let local = self.ip_addr(&format!("{k}.local"), &r.local);
            let remote = self.ip_addr(&format!("{k}.remote"), &r.remote);
            let lq = self
                .required(&format!("{k}.local_qpn"), &r.local_qpn, &span(q))
                .and_then(|v| self.int(&format!("{k}.local_qpn"), v, 0, QPN_MAX));
            let rq = self
                .required(&format!("{k}.remote_qpn"), &r.remote_qpn, &span(q))
                .and_then(|v| self.int(&format!("{k}.remote_qpn"), v, 0, QPN_MAX));
            if let (Some(l), Some(r)) = (local, remote) {
                if l.is_ipv4() != r.is_ipv4() {
                    self.err(
                        k.clone(),
                        span(q),
                        "local and remote must both be IPv4 or both IPv6",
                    );
                }
            }
            if let (Some(local), Some(lq), Some(remote), Some(rq)) = (local, lq, remote, rq) {
                let e = SprayQp {
                    local,
                    local_qpn: lq as u32,
                    remote,
                    remote_qpn: rq as u32,
                };
                if qps.iter().any(|x| {
                    (x.local, x.local_qpn) == (e.local, e.local_qpn)
                        || (x.remote, x.remote_qpn) == (e.remote, e.remote_qpn)
                }) {
                    self.err(k.clone(), span(q), "a QP end already listed in spray.qps");
                }
                qps.push(e);
            }
        }
        if qps.len() as i64 > qp_capacity {
            self.err(
                "spray.qps",
                None,
                format!("{} QPs listed but qp_capacity is {qp_capacity}", qps.len()),
            );
        }
        Some(SprayConfig {
            host_ports,
            fabric_ports,
            source,
            dest,
            paths,
            window: window as u32,
            ooo_threshold: ooo_threshold as u32,
            avoidance_window: avoidance_window as u32,
            qp_capacity: qp_capacity as usize,
            qps,
        })
    }
}
