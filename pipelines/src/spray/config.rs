//! `[spray]`: Themis packet spraying at the ToR (paper 002): the raw section as the file has it,
//! its validation, and the validated [`SprayConfig`] the stages are built from. Keys and
//! defaults: docs/config.md (keep the two in step).

use longhaul_control::config::{span, Config, PortRef, TypedSection, Validator, S};
use serde::Deserialize;
use std::net::IpAddr;

/// The section's table and the pipeline's name.
pub const NAME: &str = "spray";

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

/// The `[spray]` section.
pub const SECTION: TypedSection<RawSpray, SprayConfig> = TypedSection::new(NAME, validate);

// ---- validated ----------------------------------------------------------------------------

/// Themis packet spraying at a ToR (paper 002): Themis-S for local senders, Themis-D for local
/// receivers.
#[derive(Clone, Debug, PartialEq)]
pub struct SprayConfig {
    /// Ports toward the local RNICs (Themis-D's egress, Themis-S's ingress).
    pub host_ports: Vec<u16>,
    /// Ports toward the fabric (spines).
    pub fabric_ports: Vec<u16>,
    /// Themis-S on.
    pub source: bool,
    /// Themis-D on.
    pub dest: bool,
    /// The PathMap: N entries.
    pub paths: SprayPaths,
    /// TX window W (packets, a power of two): sizes the proxy bitmap.
    pub window: u32,
    /// OOO_THRESHOLD (packets).
    pub ooo_threshold: u32,
    /// AVOIDANCE_WINDOW (packets).
    pub avoidance_window: u32,
    /// Cross-rack QPs (register arrays of S and D, the `spray_qps` table holds twice as many keys).
    pub qp_capacity: usize,
    /// Cross-rack QPs known at start (more through the API).
    pub qps: Vec<SprayQp>,
}

/// The PathMap of Themis-S.
#[derive(Clone, Debug, PartialEq)]
pub enum SprayPaths {
    /// 3-tier: XOR this delta into the UDP source port (hashing linearity).
    SportDeltas(Vec<u16>),
    /// 2-tier: send out of this port, to this next hop.
    Ports(Vec<NextHopConfig>),
}

impl SprayPaths {
    /// N.
    pub fn len(&self) -> usize {
        match self {
            SprayPaths::SportDeltas(v) => v.len(),
            SprayPaths::Ports(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An egress port and the next hop's MAC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextHopConfig {
    pub port: u16,
    pub next_hop_mac: [u8; 6],
}

/// A cross-rack RC QP pair: the local end (behind a host port) and the remote end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SprayQp {
    pub local: std::net::IpAddr,
    pub local_qpn: u32,
    pub remote: std::net::IpAddr,
    pub remote_qpn: u32,
}

// ---- as in the file ------------------------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSpray {
    pub host_ports: Option<S<Vec<S<PortRef>>>>,
    pub fabric_ports: Option<S<Vec<S<PortRef>>>>,
    pub source: Option<S<bool>>,
    pub dest: Option<S<bool>>,
    pub mode: Option<S<String>>,
    pub sport_deltas: Option<S<Vec<S<i64>>>>,
    pub path_ports: Option<S<Vec<S<RawSprayPathPort>>>>,
    pub window: Option<S<i64>>,
    pub ooo_threshold: Option<S<i64>>,
    pub avoidance_window: Option<S<i64>>,
    pub qp_capacity: Option<S<i64>>,
    pub qps: Option<Vec<S<RawSprayQp>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSprayPathPort {
    pub port: Option<S<PortRef>>,
    pub next_hop_mac: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSprayQp {
    pub local: Option<S<String>>,
    pub local_qpn: Option<S<i64>>,
    pub remote: Option<S<String>>,
    pub remote_qpn: Option<S<i64>>,
}

// ---- validation ---------------------------------------------------------------------------

fn ip_addr(cx: &mut Validator<'_>, key: &str, v: &Option<S<String>>) -> Option<IpAddr> {
    let Some(v) = v else {
        cx.err(key, None, "missing (this key is required)");
        return None;
    };
    match v.get_ref().parse::<IpAddr>() {
        Ok(a) => Some(a),
        Err(_) => {
            cx.err(
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

/// Validates `[spray]` (`t`, as read from the file) against the generic config.
fn validate(cx: &mut Validator<'_>, t: Option<&RawSpray>, cfg: &Config) -> Option<SprayConfig> {
    let t = cx.pipeline_section(
        NAME,
        t,
        cfg,
        "host_ports, fabric_ports, mode and the PathMap",
    )?;
    let host_ports = cx.port_refs("spray.host_ports", &t.host_ports);
    let fabric_ports = cx.port_refs("spray.fabric_ports", &t.fabric_ports);
    cx.disjoint_ports(
        ("host_ports", &host_ports),
        ("fabric_ports", &fabric_ports),
        "spray.fabric_ports",
        t.fabric_ports.as_ref().and_then(span),
    );
    // Spraying picks among fabric paths per packet: the ToR is a routed hop, never a wire.
    for (key, ids, raw) in [
        ("spray.host_ports", &host_ports, &t.host_ports),
        ("spray.fabric_ports", &fabric_ports, &t.fabric_ports),
    ] {
        for id in ids
            .iter()
            .filter(|id| cfg.wire.iter().any(|&(a, b)| a == **id || b == **id))
        {
            cx.err(
                key,
                raw.as_ref().and_then(span),
                format!(
                    "port {id} is in a [[wire]] pair: the spraying ToR routes (remove the pair)"
                ),
            );
        }
    }
    let source = t.source.as_ref().is_none_or(|v| *v.get_ref());
    let dest = t.dest.as_ref().is_none_or(|v| *v.get_ref());
    if !source && !dest {
        cx.err(
            "spray",
            None,
            "enable Themis-S (source = true) and/or Themis-D (dest = true)",
        );
    }
    let mode = match &t.mode {
        None => {
            cx.err(
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
                cx.err(
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
                cx.err(
                    "spray.path_ports",
                    span(p),
                    "only used with mode = \"port\" (mode \"sport\" takes sport_deltas)",
                );
            }
            let mut v = Vec::new();
            match &t.sport_deltas {
                    None => cx.err(
                        "spray.sport_deltas",
                        None,
                        "missing: mode = \"sport\" needs the PathMap as UDP source-port deltas, one per path",
                    ),
                    Some(list) => {
                        for (i, d) in list.get_ref().iter().enumerate() {
                            if let Some(x) =
                                cx.int(&format!("spray.sport_deltas[{i}]"), d, 0, 0xffff)
                            {
                                if v.contains(&(x as u16)) {
                                    cx.err(
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
                cx.err(
                    "spray.sport_deltas",
                    span(d),
                    "only used with mode = \"sport\" (mode \"port\" takes [[spray.path_ports]])",
                );
            }
            let mut v: Vec<NextHopConfig> = Vec::new();
            match &t.path_ports {
                    None => cx.err(
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
                                    cx.err(
                                        format!("{k}.port"),
                                        span(e),
                                        "missing (this key is required)",
                                    );
                                    None
                                }
                                Some(p) => cx.port_ref(&format!("{k}.port"), p),
                            };
                            if let Some(p) = port {
                                if !fabric_ports.contains(&p) {
                                    cx.err(
                                        format!("{k}.port"),
                                        e_ref.port.as_ref().and_then(span),
                                        format!("port id {p} is not one of spray.fabric_ports"),
                                    );
                                }
                                if v.iter().any(|x| x.port == p) {
                                    cx.err(
                                        format!("{k}.port"),
                                        e_ref.port.as_ref().and_then(span),
                                        "port used by two paths",
                                    );
                                }
                            }
                            let mac = match &e_ref.next_hop_mac {
                                None => {
                                    cx.err(
                                        format!("{k}.next_hop_mac"),
                                        span(e),
                                        "missing (this key is required)",
                                    );
                                    [0; 6]
                                }
                                Some(m) => cx.mac(&format!("{k}.next_hop_mac"), m, true),
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
        cx.err(
            "spray",
            None,
            "the PathMap has no paths (N must be at least 1)",
        );
    }
    if paths.len() > MAX_PATHS {
        cx.err(
            "spray",
            None,
            format!("the PathMap has {} paths: at most {MAX_PATHS}", paths.len()),
        );
    }
    let window = cx.int_or("spray.window", &t.window, DEFAULT_WINDOW, 64, MAX_WINDOW);
    if !(window as u64).is_power_of_two() {
        cx.err(
                "spray.window",
                t.window.as_ref().and_then(span),
                format!("{window} is not a power of two: the double-length bitmap (appendix A) maps PSN mod 2W, which must divide 2^24"),
            );
    }
    let ooo_threshold = cx.int_or(
        "spray.ooo_threshold",
        &t.ooo_threshold,
        DEFAULT_OOO_THRESHOLD,
        1,
        (1 << 23) - 1,
    );
    let avoidance_window = cx.int_or(
        "spray.avoidance_window",
        &t.avoidance_window,
        DEFAULT_AVOIDANCE_WINDOW,
        0,
        u32::MAX as i64,
    );
    let qp_capacity = cx.int_or(
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
        let local = ip_addr(cx, &format!("{k}.local"), &r.local);
        let remote = ip_addr(cx, &format!("{k}.remote"), &r.remote);
        let lq = cx
            .required(&format!("{k}.local_qpn"), &r.local_qpn, &span(q))
            .and_then(|v| cx.int(&format!("{k}.local_qpn"), v, 0, QPN_MAX));
        let rq = cx
            .required(&format!("{k}.remote_qpn"), &r.remote_qpn, &span(q))
            .and_then(|v| cx.int(&format!("{k}.remote_qpn"), v, 0, QPN_MAX));
        if let (Some(l), Some(r)) = (local, remote) {
            if l.is_ipv4() != r.is_ipv4() {
                cx.err(
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
                cx.err(k.clone(), span(q), "a QP end already listed in spray.qps");
            }
            qps.push(e);
        }
    }
    if qps.len() as i64 > qp_capacity {
        cx.err(
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
