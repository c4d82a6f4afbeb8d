//! The validation pass: raw (serde) structs in, validated `Config` out.
//!
//! Every check records a `ConfigError` with the key path of the offending value and, where the
//! value came from the file, its line and column; validation goes on after an error (using a
//! placeholder value) so that one run reports every problem. Checks that would only repeat an
//! earlier error (a reference to a port whose own entry is broken) are skipped.

use super::raw::{
    OrderedTable, PortRef, RawClass, RawConfig, RawControl, RawEcn, RawIoKind, RawPfc, RawPort,
    RawPortIo, RawQos, RawSwitch, S,
};
use super::sections::Sections;
use super::{
    ClassConfig, Config, ConfigError, ControlConfig, EcnConfig, IpPrefix, L2Entry, ParserConfig,
    PfcConfig, Policy, PortConfig, PortIo, QosConfig, Route, SchedulerKind, SwitchConfig, Trust,
    DEFAULT_PIPELINE,
};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use std::fmt;
mod dpdk;
mod forwarding;
pub use forwarding::{fmt_ip, parse_ip};

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::path::{Path, PathBuf};

// Defaults and limits (documented in docs/config.md; keep the two in step).
/// The smallest pcap tx cap: the global header and one largest frame's record.
const MIN_TX_MAX_BYTES: i64 = 24 + 16 + 9216;
pub(super) const DEFAULT_POOL_BUFFERS: i64 = 65_536;

/// `switch.memory_limit_bytes` by default: 3/4 of the machine's memory (`MemTotal` of
/// /proc/meminfo), 16 GiB where that cannot be read.
pub fn default_memory_limit() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        let line = t.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    });
    total.map_or(16 << 30, |b| b / 4 * 3).max(1 << 20)
}

fn span_of<T>(v: &Option<S<T>>) -> Span {
    v.as_ref().and_then(span)
}
pub(super) const MAX_POOL_BUFFERS: i64 = 16 * 1024 * 1024;
pub(super) const DEFAULT_BUFFER_DATA_ROOM: i64 = 4480;
pub(super) const DEFAULT_BUFFER_BYTES: i64 = 32 * 1024 * 1024;
pub(super) const MAX_BUFFER_BYTES: i64 = 1 << 40;
pub(super) const DEFAULT_SEED: i64 = 1;
pub(super) const MAX_PORT_ID: i64 = 65_534;
pub(super) const MAX_PORT_NAME_LEN: usize = 32;
/// Port and link rates accepted, Gb/s.
pub const MIN_RATE_GBPS: f64 = 0.001;
/// Port and link rates accepted, Gb/s.
pub const MAX_RATE_GBPS: f64 = 1600.0;
pub(super) const DEFAULT_MTU: i64 = 4200;
pub(super) const MIN_MTU: i64 = 64;
pub(super) const MAX_MTU: i64 = 9216;
pub(super) const DEFAULT_FRAME_OVERHEAD: i64 = 24;
pub(super) const MAX_FRAME_OVERHEAD: i64 = 128;
pub(super) const DEFAULT_QUEUE_LIMIT_BYTES: i64 = 1024 * 1024;
pub(super) const MAX_DRR_QUANTUM: i64 = 16 * 1024 * 1024;
pub(super) const DEFAULT_PAUSE_QUANTA: i64 = 65_535;
pub(super) const DEFAULT_STATS_INTERVAL_MS: i64 = 1000;
pub(super) const MIN_STATS_INTERVAL_MS: i64 = 10;
pub(super) const MAX_STATS_INTERVAL_MS: i64 = 60_000;
pub(super) const MAX_CONTROL_LATENCY_NS: i64 = 10_000_000_000;
pub(super) const DEFAULT_RING: i64 = 4096;
pub(super) const MIN_RING: i64 = 16;
pub(super) const MAX_RING: i64 = 1 << 20;
pub(super) const MAX_API_TOKEN_LEN: usize = 4096;
/// Range of `control.reload_max_bytes`: 1 KiB ..= 256 MiB.
pub(super) const MIN_RELOAD_MAX_BYTES: i64 = 1 << 10;
pub(super) const MAX_RELOAD_MAX_BYTES: i64 = 256 << 20;

/// Where a value is in the file (`None`: not from the file, or no single place).
pub type Span = Option<Range<usize>>;

/// The span of a value read from the file.
pub fn span<T>(v: &S<T>) -> Span {
    Some(v.span())
}

/// " (line L, column C)" for a byte offset into `text`; columns count characters from 1.
pub(super) fn location(text: &str, offset: usize) -> String {
    let offset = offset.min(text.len());
    let mut start = offset;
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    format!(" (line {line}, column {column})")
}

/// The validation pass's state: every error found so far, and what references need (the ports).
/// Mechanisms validate their sections through its public methods, so that their errors have the
/// same `file: key.path: what is wrong (line L, column C)` shape as every other.
pub struct Validator<'a> {
    file: &'a Path,
    text: &'a str,
    pub(super) errors: Vec<ConfigError>,
    /// The port entries, for port references (set once `[[ports]]` is validated).
    infos: Vec<PortInfo>,
    /// Byte offset of the last error that stopped deserializing (for `config::unknown`).
    pub(super) stop_at: std::cell::Cell<Option<usize>>,
}

/// What the cross-section checks need to know about one port entry.
struct PortInfo {
    /// `None` when the entry's own `id` is missing or invalid.
    id: Option<u16>,
    /// The name as written (even if invalid), so references to it do not repeat the error.
    name: Option<String>,
}

impl<'a> Validator<'a> {
    /// A validator of the TOML `text` of `file` (config files use it through `Config::parse`;
    /// other TOML inputs, such as the emulator's scenarios, directly).
    pub fn new(file: &'a Path, text: &'a str) -> Self {
        Validator {
            file,
            text,
            errors: Vec::new(),
            infos: Vec::new(),
            stop_at: std::cell::Cell::new(None),
        }
    }

    /// The top-level table `name` of the file as `T` (a serde struct mirroring the section;
    /// wrap leaves in [`S`] for line numbers and deny unknown fields), `None` when the file has
    /// no such table. A syntax, unknown-key or type error is returned as the error that stops
    /// parsing (`Section::validate` passes it on with `?`).
    pub fn raw<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, ConfigError> {
        self.raw_at(&[name])
    }

    /// Like [`Validator::raw`], for the table at a key path (`["emulation", "agents", "mlcc"]`:
    /// `[emulation.agents.mlcc]`), `None` when the file has no such table.
    pub fn raw_at<T: DeserializeOwned>(&self, path: &[&str]) -> Result<Option<T>, ConfigError> {
        self.deserialize(Pick::<T> {
            path,
            _t: std::marker::PhantomData,
        })
    }

    /// The whole document as `T` (a serde struct mirroring the file, spans kept): a syntax,
    /// unknown-key or type error is the error that stops parsing.
    pub fn document<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        self.deserialize(std::marker::PhantomData::<T>)
    }

    /// The text through `seed`, with the key path and place of a failure in the error.
    pub(super) fn deserialize<D: DeserializeSeed<'a>>(
        &self,
        seed: D,
    ) -> Result<D::Value, ConfigError> {
        let mut track = serde_path_to_error::Track::new();
        let de = toml::Deserializer::new(self.text);
        seed.deserialize(serde_path_to_error::Deserializer::new(de, &mut track))
            .map_err(|e| {
                self.stop_at.set(e.span().map(|s| s.start));
                super::serde_error(
                    self.text,
                    self.file,
                    serde_path_to_error::Error::new(track.path(), e),
                )
            })
    }

    /// Every error recorded, in order (empty: the input is valid).
    pub fn into_errors(self) -> Vec<ConfigError> {
        self.errors
    }

    /// Whether any error has been recorded.
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Records an error at `key` (a dotted path such as `section.sub.key`), with the line
    /// and column of `span` when given.
    pub fn err(&mut self, key: impl Into<String>, span: Span, msg: impl Into<String>) {
        let mut msg = msg.into();
        if let Some(s) = span {
            msg.push_str(&location(self.text, s.start));
        }
        self.errors.push(ConfigError {
            file: self.file.to_path_buf(),
            key: key.into(),
            msg,
        });
    }

    /// A required value with no enclosing table to point at.
    pub fn need<'r, T>(&mut self, key: &str, v: &'r Option<S<T>>) -> Option<&'r S<T>> {
        self.required(key, v, &None)
    }

    /// A required value: records "missing" (at the enclosing table's line) when absent.
    pub fn required<'r, T>(
        &mut self,
        key: &str,
        v: &'r Option<S<T>>,
        table: &Span,
    ) -> Option<&'r S<T>> {
        if v.is_none() {
            self.err(key, table.clone(), "missing (this key is required)");
        }
        v.as_ref()
    }

    /// An integer in `lo..=hi`; `None` (error recorded) otherwise.
    pub fn int(&mut self, key: &str, v: &S<i64>, lo: i64, hi: i64) -> Option<i64> {
        let x = *v.get_ref();
        if (lo..=hi).contains(&x) {
            Some(x)
        } else {
            let range = if hi == i64::MAX {
                format!("must be at least {lo}")
            } else {
                format!("must be {lo} to {hi}")
            };
            self.err(key, span(v), format!("{x} is out of range: {range}"));
            None
        }
    }

    /// One of `options` by name (`default` when absent); another name is an error that lists
    /// them (`'x': expected "a" or "b"`).
    pub fn choice<T: Copy>(
        &mut self,
        key: &str,
        x: &Option<S<String>>,
        options: &[(&str, T)],
        default: T,
    ) -> T {
        let Some(x) = x else {
            return default;
        };
        if let Some((_, t)) = options.iter().find(|(n, _)| *n == x.get_ref()) {
            return *t;
        }
        let names: Vec<String> = options.iter().map(|(n, _)| format!("\"{n}\"")).collect();
        self.err(
            key,
            span(x),
            format!("'{}': expected {}", x.get_ref(), names.join(" or ")),
        );
        default
    }

    /// An optional integer in `lo..=hi` with a default (also used after an error).
    pub fn int_or(&mut self, key: &str, v: &Option<S<i64>>, default: i64, lo: i64, hi: i64) -> i64 {
        match v {
            Some(v) => self.int(key, v, lo, hi).unwrap_or(default),
            None => default,
        }
    }

    /// Refuse (at `key`) what needs `bytes` of memory when that is more than the switch's
    /// `memory_limit_bytes`: a config the machine cannot hold is an error here, not an
    /// allocation failure at start.
    pub fn memory(&mut self, key: &str, at: Span, what: &str, bytes: u64, sw: &SwitchConfig) {
        if bytes > sw.memory_limit_bytes {
            self.err(
                key,
                at,
                format!(
                    "{what} needs {} MiB, more than switch.memory_limit_bytes ({} MiB; by \
                     default 3/4 of this machine's memory)",
                    bytes >> 20,
                    sw.memory_limit_bytes >> 20
                ),
            );
        }
    }

    /// A MAC address (`unicast`: multicast, broadcast and all-zero are refused), checked by
    /// [`check_mac`] as the management API checks a table entry's.
    pub fn mac(&mut self, key: &str, v: &S<String>, unicast: bool) -> [u8; 6] {
        match check_mac(v.get_ref(), unicast) {
            Ok(mac) => mac,
            Err(e) => {
                self.err(key, span(v), e.to_string());
                parse_mac(v.get_ref()).unwrap_or([0; 6])
            }
        }
    }

    // -----------------------------------------------------------------------------------------

    /// The generic config (`sections` empty: each mechanism's section is validated after).
    pub(super) fn config(&mut self, raw: RawConfig, pipelines: &[&'static str]) -> Config {
        let switch_raw = match raw.switch {
            Some(s) => s,
            None => {
                self.err(
                    "switch",
                    None,
                    "missing required table [switch] (it needs at least name = \"...\")",
                );
                RawSwitch::default()
            }
        };
        let switch = self.switch(&switch_raw, pipelines);

        let ports = match &raw.ports {
            Some(p) if !p.get_ref().is_empty() => self.ports(p.get_ref(), &switch),
            Some(p) => {
                self.err(
                    "ports",
                    span(p),
                    "the list of ports is empty: at least one [[ports]] table is needed",
                );
                Vec::new()
            }
            None => {
                self.err(
                    "ports",
                    None,
                    "no ports: at least one [[ports]] table is needed",
                );
                Vec::new()
            }
        };
        let largest_mtu = ports
            .iter()
            .map(|p| u64::from(p.mtu))
            .max()
            .unwrap_or(DEFAULT_MTU as u64);
        let largest_frame = ports
            .iter()
            .map(|p| u64::from(p.mtu) + u64::from(p.frame_overhead))
            .max()
            .unwrap_or((DEFAULT_MTU + DEFAULT_FRAME_OVERHEAD) as u64);

        let qos_raw = raw.qos.unwrap_or_default();
        let (qos, class_keys) = self.qos(&qos_raw, &switch, largest_mtu, largest_frame);

        let pfc_raw = raw.pfc.unwrap_or_default();
        let pfc = self.pfc(&pfc_raw, &switch, &ports, &qos, &class_keys, largest_frame);

        let parser = self.parser(raw.parser.as_ref());
        let wire = self.wire(raw.wire.as_ref(), &ports);

        let mut l2: Vec<L2Entry> = Vec::new();
        let mut l2_seen: HashMap<[u8; 6], usize> = HashMap::new();
        for (i, e) in raw.l2.iter().flatten().enumerate() {
            let table = span(e);
            let e = e.get_ref();
            let key = format!("l2[{i}]");
            let mac = self
                .required(&format!("{key}.mac"), &e.mac, &table)
                .map(|m| (self.mac(&format!("{key}.mac"), m, false), span(m)));
            let port = self
                .required(&format!("{key}.port"), &e.port, &table)
                .and_then(|p| {
                    self.port_ref(&format!("{key}.port"), p)
                        .map(|id| (id, span(p)))
                });
            if let Some((id, at)) = &port {
                self.routed_port(&format!("{key}.port"), at.clone(), *id, &wire);
            }
            let port = port.map(|(id, _)| id);
            if let Some((mac, mspan)) = mac {
                if let Some(j) = l2_seen.get(&mac) {
                    self.err(
                        format!("{key}.mac"),
                        mspan,
                        format!("duplicate MAC {} (already in l2[{j}])", fmt_mac(&mac)),
                    );
                } else {
                    l2_seen.insert(mac, i);
                }
                l2.push(L2Entry {
                    mac,
                    port: port.unwrap_or(0),
                });
            }
        }

        let mut routes: Vec<Route> = Vec::new();
        let mut route_seen: HashMap<(bool, u128, u8), usize> = HashMap::new();
        for (i, r) in raw.routes.iter().flatten().enumerate() {
            let table = span(r);
            let r = r.get_ref();
            let key = format!("routes[{i}]");
            let prefix = self
                .required(&format!("{key}.prefix"), &r.prefix, &table)
                .and_then(|p| match parse_prefix(p.get_ref()) {
                    Ok(prefix) => Some((prefix, span(p))),
                    Err(e) => {
                        self.err(format!("{key}.prefix"), span(p), e.to_string());
                        None
                    }
                });
            let pfx = prefix.as_ref().map(|(p, _)| *p);
            let hops = match &r.next_hops {
                None => {
                    let hop = self.route_hop(
                        &key,
                        &table,
                        &r.port,
                        &r.next_hop_mac,
                        &r.next_hop,
                        pfx,
                        &ports,
                        &wire,
                    );
                    vec![hop]
                }
                Some(group) => self.ecmp_group(&key, r, group, pfx, &ports, &wire),
            };
            if let Some((prefix, pspan)) = prefix {
                let seen_key = match prefix {
                    IpPrefix::V4 { addr, len } => (false, u128::from(addr), len),
                    IpPrefix::V6 { addr, len } => (true, addr, len),
                };
                if let Some(j) = route_seen.get(&seen_key) {
                    self.err(
                        format!("{key}.prefix"),
                        pspan,
                        format!("duplicate route for {prefix} (already in routes[{j}])"),
                    );
                } else {
                    route_seen.insert(seen_key, i);
                }
                routes.push(Route { prefix, hops });
            }
        }

        let neighbors = self.neighbors(raw.neighbors.as_ref(), &ports, &wire, &switch);
        let control = self.control(raw.control.as_ref());
        let dpdk = self.dpdk(raw.dpdk.as_ref(), &switch, &ports);

        Config {
            switch,
            ports,
            qos,
            pfc,
            parser,
            l2,
            routes,
            wire,
            neighbors,
            control,
            dpdk,
            sections: Sections::default(),
        }
    }

    fn control(&mut self, c: Option<&RawControl>) -> ControlConfig {
        let d = ControlConfig::default();
        let Some(c) = c else { return d };
        let api_listen = match &c.api_listen {
            Some(v) => self
                .socket_addr("control.api_listen", v)
                .unwrap_or(d.api_listen),
            None => d.api_listen,
        };
        let api_token = c.api_token.as_ref().and_then(|v| {
            let t = v.get_ref();
            let bad = if t.is_empty() {
                Some("must not be empty (leave the key out for no token)".to_owned())
            } else if t.len() > MAX_API_TOKEN_LEN {
                Some(format!("is too long: at most {MAX_API_TOKEN_LEN} bytes"))
            } else if !t.bytes().all(|b| b.is_ascii_graphic()) {
                Some(
                    "must be printable ASCII without spaces (it is sent in an HTTP header)"
                        .to_owned(),
                )
            } else {
                None
            };
            match bad {
                Some(msg) => {
                    self.err("control.api_token", span(v), msg);
                    None
                }
                None => Some(t.clone()),
            }
        });
        let metrics_listen = match &c.metrics_listen {
            Some(v) if v.get_ref().trim().eq_ignore_ascii_case("off") => None,
            Some(v) => {
                let a = self.socket_addr("control.metrics_listen", v);
                if let Some(a) = a {
                    if a == api_listen && a.port() != 0 {
                        self.err(
                            "control.metrics_listen",
                            span(v),
                            format!("{a} is also control.api_listen: they need different ports"),
                        );
                    }
                }
                a.or(d.metrics_listen)
            }
            None => d.metrics_listen,
        };
        let stats_interval_ms = self.int_or(
            "control.stats_interval_ms",
            &c.stats_interval_ms,
            DEFAULT_STATS_INTERVAL_MS,
            MIN_STATS_INTERVAL_MS,
            MAX_STATS_INTERVAL_MS,
        ) as u64;
        let control_latency_ns = self.int_or(
            "control.control_latency_ns",
            &c.control_latency_ns,
            0,
            0,
            MAX_CONTROL_LATENCY_NS,
        ) as u64;
        let command_ring = self.int_or(
            "control.command_ring",
            &c.command_ring,
            DEFAULT_RING,
            MIN_RING,
            MAX_RING,
        ) as usize;
        let punt_ring = self.int_or(
            "control.punt_ring",
            &c.punt_ring,
            DEFAULT_RING,
            MIN_RING,
            MAX_RING,
        ) as usize;
        let mut reload_dirs = Vec::new();
        for (i, v) in c
            .reload_dirs
            .iter()
            .flat_map(|l| l.get_ref().iter())
            .enumerate()
        {
            let p = std::path::Path::new(v.get_ref());
            if v.get_ref().is_empty() || !p.is_absolute() {
                self.err(
                    format!("control.reload_dirs[{i}]"),
                    span(v),
                    format!("'{}' is not an absolute path", v.get_ref()),
                );
            } else if p
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                self.err(
                    format!("control.reload_dirs[{i}]"),
                    span(v),
                    format!(
                        "'{}' has a '..' component: name the directory itself",
                        v.get_ref()
                    ),
                );
            } else {
                reload_dirs.push(p.to_path_buf());
            }
        }
        let reload_max_bytes = self.int_or(
            "control.reload_max_bytes",
            &c.reload_max_bytes,
            super::DEFAULT_RELOAD_MAX_BYTES as i64,
            MIN_RELOAD_MAX_BYTES,
            MAX_RELOAD_MAX_BYTES,
        ) as u64;
        let mut api_hosts = Vec::new();
        for (i, v) in c
            .api_hosts
            .iter()
            .flat_map(|l| l.get_ref().iter())
            .enumerate()
        {
            let h = v.get_ref().trim();
            let ok = !h.is_empty()
                && h.len() <= 253
                && h.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b));
            if ok {
                api_hosts.push(h.to_ascii_lowercase());
            } else {
                self.err(
                    format!("control.api_hosts[{i}]"),
                    span(v),
                    format!(
                        "'{}' is not a host name (letters, digits, '-', '.'; optionally :PORT)",
                        v.get_ref()
                    ),
                );
            }
        }
        ControlConfig {
            api_listen,
            api_token,
            metrics_listen,
            stats_interval_ms,
            control_latency_ns,
            command_ring,
            punt_ring,
            reload_dirs,
            reload_max_bytes,
            api_hosts,
        }
    }

    /// `HOST:PORT` with a literal IP address (`127.0.0.1:9410`, `[::1]:9410`).
    fn socket_addr(&mut self, key: &str, v: &S<String>) -> Option<SocketAddr> {
        match v.get_ref().trim().parse::<SocketAddr>() {
            Ok(a) => Some(a),
            Err(_) => {
                let msg = format!(
                    "'{}' is not an address:port: expected an IP address and a port, e.g. 127.0.0.1:9410 or [::1]:9410",
                    v.get_ref()
                );
                self.err(key, span(v), msg);
                None
            }
        }
    }

    /// `ports[i].io`. `table`: the port's span, where missing keys are reported.
    fn port_io(&mut self, key: &str, io: Option<&RawPortIo>, table: &Span) -> PortIo {
        let Some(io) = io else {
            return PortIo::None;
        };
        let kind_key = format!("{key}.kind");
        let Some(kind) = self.required(&kind_key, &io.kind, table) else {
            return PortIo::None;
        };
        let kind = *kind.get_ref();
        let kind_name = match kind {
            RawIoKind::Pcap => "pcap",
            RawIoKind::Memory => "memory",
            RawIoKind::Dpdk => "dpdk",
        };
        // Keys that only some kinds take.
        let only = |k: &'static str, kinds: &'static str, v: Option<Span>| (k, kinds, v);
        let pcap_keys = [
            only("rx", "pcap", io.rx.as_ref().map(span)),
            only("tx", "pcap", io.tx.as_ref().map(span)),
            only("rx_loop", "pcap", io.rx_loop.as_ref().map(span)),
            only("pace", "pcap", io.pace.as_ref().map(span)),
            only("tx_max_bytes", "pcap", io.tx_max_bytes.as_ref().map(span)),
        ];
        let dpdk_keys = [
            only("device", "dpdk", io.device.as_ref().map(span)),
            only("rx_queues", "dpdk", io.rx_queues.as_ref().map(span)),
            only("tx_queues", "dpdk", io.tx_queues.as_ref().map(span)),
            only("rx_desc", "dpdk", io.rx_desc.as_ref().map(span)),
            only("tx_desc", "dpdk", io.tx_desc.as_ref().map(span)),
        ];
        let misplaced: Vec<_> = match kind {
            RawIoKind::Pcap => dpdk_keys.to_vec(),
            RawIoKind::Memory => pcap_keys.iter().chain(&dpdk_keys).cloned().collect(),
            RawIoKind::Dpdk => pcap_keys.to_vec(),
        };
        for (k, kinds, s) in misplaced {
            if let Some(s) = s {
                self.err(
                    format!("{key}.{k}"),
                    s,
                    format!("only kind = \"{kinds}\" takes this key, not kind = \"{kind_name}\""),
                );
            }
        }
        match kind {
            RawIoKind::Memory => PortIo::Memory,
            RawIoKind::Dpdk => self.dpdk_port_io(key, io, table),
            RawIoKind::Pcap => {
                let path = |v: &mut Self, k: &str, p: &Option<S<String>>| -> Option<PathBuf> {
                    let p = p.as_ref()?;
                    if p.get_ref().is_empty() {
                        v.err(
                            format!("{key}.{k}"),
                            span(p),
                            "must not be empty: a file path",
                        );
                        return None;
                    }
                    Some(v.resolve(p.get_ref()))
                };
                let rx = path(self, "rx", &io.rx);
                let tx = path(self, "tx", &io.tx);
                if io.rx.is_none() && io.tx.is_none() {
                    self.err(
                        format!("{key}.rx"),
                        table.clone(),
                        "a pcap port needs rx (a file to read), tx (a file to write), or both",
                    );
                }
                let rx_loop = io.rx_loop.as_ref().is_some_and(|v| *v.get_ref());
                if let (true, None, Some(v)) = (rx_loop, &io.rx, &io.rx_loop) {
                    self.err(
                        format!("{key}.rx_loop"),
                        span(v),
                        "rx_loop = true needs rx (a file to read)",
                    );
                }
                if let (Some(r), Some(t)) = (&rx, &tx) {
                    if r == t {
                        let s = io.tx.as_ref().and_then(span);
                        self.err(
                            format!("{key}.tx"),
                            s,
                            format!(
                                "{} is also rx: the port would overwrite its own input",
                                t.display()
                            ),
                        );
                    }
                }
                let tx_max_bytes = io.tx_max_bytes.as_ref().and_then(|v| {
                    if io.tx.is_none() {
                        self.err(
                            format!("{key}.tx_max_bytes"),
                            span(v),
                            "tx_max_bytes needs tx (a file to write)",
                        );
                    }
                    let k = format!("{key}.tx_max_bytes");
                    self.int(&k, v, MIN_TX_MAX_BYTES, i64::MAX)
                        .map(|b| b as u64)
                });
                PortIo::Pcap {
                    rx,
                    tx,
                    rx_loop,
                    pace: io.pace.as_ref().map(|v| *v.get_ref()).unwrap_or(true),
                    tx_max_bytes,
                }
            }
        }
    }

    /// A path from the file: relative paths are relative to the config file's directory.
    fn resolve(&self, p: &str) -> PathBuf {
        let p = Path::new(p);
        if p.is_absolute() {
            return p.to_path_buf();
        }
        match self.file.parent() {
            Some(dir) => dir.join(p),
            None => p.to_path_buf(),
        }
    }

    fn switch(&mut self, sw: &RawSwitch, pipelines: &[&'static str]) -> SwitchConfig {
        let table = None;
        let name = match self.required("switch.name", &sw.name, &table) {
            Some(n) if n.get_ref().trim().is_empty() => {
                self.err("switch.name", span(n), "must not be empty");
                String::new()
            }
            Some(n) => n.get_ref().clone(),
            None => String::new(),
        };
        let pipeline = match &sw.pipeline {
            None => DEFAULT_PIPELINE.to_string(),
            Some(p) if pipelines.contains(&p.get_ref().as_str()) => p.get_ref().clone(),
            Some(p) => {
                let names: Vec<String> = pipelines.iter().map(|n| format!("`{n}`")).collect();
                self.err(
                    "switch.pipeline",
                    span(p),
                    format!(
                        "unknown variant `{}`, expected one of {}",
                        p.get_ref(),
                        names.join(", ")
                    ),
                );
                DEFAULT_PIPELINE.to_string()
            }
        };
        let pool_buffers = self.int_or(
            "switch.pool_buffers",
            &sw.pool_buffers,
            DEFAULT_POOL_BUFFERS,
            1,
            MAX_POOL_BUFFERS,
        );
        let buffer_data_room = self.int_or(
            "switch.buffer_data_room",
            &sw.buffer_data_room,
            DEFAULT_BUFFER_DATA_ROOM,
            MIN_MTU,
            65_535,
        );
        let buffer_bytes = self.int_or(
            "switch.buffer_bytes",
            &sw.buffer_bytes,
            DEFAULT_BUFFER_BYTES,
            1,
            MAX_BUFFER_BYTES,
        );
        let seed = self.int_or("switch.seed", &sw.seed, DEFAULT_SEED, 0, i64::MAX);
        let ecmp_seed = self.int_or("switch.ecmp_seed", &sw.ecmp_seed, 0, 0, i64::MAX);
        let memory_limit_bytes = self.int_or(
            "switch.memory_limit_bytes",
            &sw.memory_limit_bytes,
            default_memory_limit() as i64,
            1 << 20,
            1 << 50,
        ) as u64;
        let cfg = SwitchConfig {
            name,
            pipeline,
            pool_buffers: pool_buffers as usize,
            buffer_data_room: buffer_data_room as usize,
            buffer_bytes: buffer_bytes as u64,
            seed: seed as u64,
            ecmp_seed: ecmp_seed as u64,
            memory_limit_bytes,
        };
        let what = format!(
            "the packet pool (pool_buffers x {} B: buffer_data_room + {} B of headroom, \
             descriptor and allocator)",
            cfg.pool_buffer_bytes(),
            cfg.pool_buffer_bytes() - cfg.buffer_data_room as u64
        );
        self.memory(
            "switch.pool_buffers",
            span_of(&sw.pool_buffers),
            &what,
            cfg.pool_bytes(),
            &cfg,
        );
        cfg
    }

    fn ports(&mut self, raw: &[S<RawPort>], sw: &SwitchConfig) -> Vec<PortConfig> {
        let mut ports = Vec::new();
        let mut infos: Vec<PortInfo> = Vec::new();
        for (i, p) in raw.iter().enumerate() {
            let table = span(p);
            let p = p.get_ref();
            let key = |k: &str| format!("ports[{i}].{k}");

            let id = self.required(&key("id"), &p.id, &table).and_then(|v| {
                let id = self.int(&key("id"), v, 0, MAX_PORT_ID)? as u16;
                if let Some(j) = infos.iter().position(|o| o.id == Some(id)) {
                    self.err(
                        key("id"),
                        span(v),
                        format!("duplicate port id {id} (already used by ports[{j}])"),
                    );
                    return None;
                }
                Some(id)
            });

            let name = self.required(&key("name"), &p.name, &table).map(|v| {
                let n = v.get_ref();
                if !valid_port_name(n) {
                    self.err(
                        key("name"),
                        span(v),
                        format!("'{n}' is not a valid port name: use 1 to {MAX_PORT_NAME_LEN} characters from A-Z a-z 0-9 _ . -"),
                    );
                } else if let Some(j) = infos.iter().position(|o| o.name.as_ref() == Some(n)) {
                    let msg = format!("duplicate port name '{n}' (already used by ports[{j}])");
                    self.err(key("name"), span(v), msg);
                }
                n.clone()
            });

            let mac = self
                .required(&key("mac"), &p.mac, &table)
                .map(|v| self.mac(&key("mac"), v, true));

            let rate_bps = self.required(&key("rate_gbps"), &p.rate_gbps, &table).and_then(|v| {
                let g = *v.get_ref();
                if (MIN_RATE_GBPS..=MAX_RATE_GBPS).contains(&g) {
                    Some((g * 1e9).round() as u64)
                } else {
                    self.err(
                        key("rate_gbps"),
                        span(v),
                        format!("{g} is out of range: must be {MIN_RATE_GBPS} (1 Mb/s) to {MAX_RATE_GBPS} (Gb/s)"),
                    );
                    None
                }
            });

            let mtu = self.int_or(&key("mtu"), &p.mtu, DEFAULT_MTU, MIN_MTU, MAX_MTU);
            if mtu as usize > sw.buffer_data_room {
                let s = p.mtu.as_ref().map(|v| v.span()).or(table.clone());
                let what = if p.mtu.is_none() {
                    " (the default)"
                } else {
                    ""
                };
                self.err(
                    key("mtu"),
                    s,
                    format!(
                        "{mtu}{what} is larger than switch.buffer_data_room ({}): a frame must fit in one buffer",
                        sw.buffer_data_room
                    ),
                );
            }
            let frame_overhead = self.int_or(
                &key("frame_overhead"),
                &p.frame_overhead,
                DEFAULT_FRAME_OVERHEAD,
                0,
                MAX_FRAME_OVERHEAD,
            );

            let io = self.port_io(&key("io"), p.io.as_ref(), &table);
            let addresses = self.port_addresses(&key("addresses"), &p.addresses);
            // Two ports writing one file, or a port writing another's input, would corrupt both.
            if let (PortIo::Pcap { tx: Some(t), .. }, Some(tio)) = (&io, &p.io) {
                let clash = ports
                    .iter()
                    .enumerate()
                    .find_map(|(j, o): (usize, &PortConfig)| match &o.io {
                        PortIo::Pcap { tx: Some(ot), .. } if ot == t => Some((j, "tx")),
                        PortIo::Pcap { rx: Some(or), .. } if or == t => Some((j, "rx")),
                        _ => None,
                    });
                if let Some((j, what)) = clash {
                    let s = tio.tx.as_ref().and_then(span);
                    self.err(
                        key("io.tx"),
                        s,
                        format!("{} is already ports[{j}].io.{what}", t.display()),
                    );
                }
            }
            if let (PortIo::Pcap { rx: Some(r), .. }, Some(rio)) = (&io, &p.io) {
                let clash = ports
                    .iter()
                    .position(|o| matches!(&o.io, PortIo::Pcap { tx: Some(ot), .. } if ot == r));
                if let Some(j) = clash {
                    let s = rio.rx.as_ref().and_then(span);
                    self.err(
                        key("io.rx"),
                        s,
                        format!("{} is already ports[{j}].io.tx: that port would overwrite this port's input", r.display()),
                    );
                }
            }

            infos.push(PortInfo {
                id,
                name: name.clone(),
            });
            ports.push(PortConfig {
                id: id.unwrap_or(0),
                name: name.unwrap_or_default(),
                mac: mac.unwrap_or([0; 6]),
                rate_bps: rate_bps.unwrap_or(0),
                mtu: mtu as u16,
                frame_overhead: frame_overhead as u16,
                io,
                addresses,
            });
        }
        self.infos = infos;
        self.addresses_across_ports(&ports);
        ports
    }

    /// Resolves a port reference (name or id) to a port id; `None` (error recorded unless the
    /// port's own entry is broken) when there is no such port.
    pub fn port_ref(&mut self, key: &str, r: &S<PortRef>) -> Option<u16> {
        let infos = std::mem::take(&mut self.infos);
        let id = self.port_ref_in(key, r, &infos);
        self.infos = infos;
        id
    }

    /// The table of the section of pipeline `name` (`raw`, as read), when the config selects that
    /// pipeline; an error when the pipeline is selected without its table (`needs` says what goes
    /// in it) or the table is there without its pipeline.
    pub fn pipeline_section<'r, T>(
        &mut self,
        name: &str,
        raw: Option<&'r T>,
        cfg: &Config,
        needs: &str,
    ) -> Option<&'r T> {
        match (cfg.switch.pipeline == name, raw) {
            (true, Some(t)) => return Some(t),
            (true, None) => self.err(
                name,
                None,
                format!("switch.pipeline = \"{name}\" needs a [{name}] table ({needs})"),
            ),
            (false, Some(_)) => self.err(
                name,
                None,
                format!("[{name}] is only used with switch.pipeline = \"{name}\""),
            ),
            (false, None) => {}
        }
        None
    }

    /// Records an error at `b_key` for every port in both `a` (listed as `a_name`) and `b` (`b_name`).
    pub fn disjoint_ports(
        &mut self,
        (a_name, a): (&str, &[u16]),
        (b_name, b): (&str, &[u16]),
        b_key: &str,
        b_span: Span,
    ) {
        for id in a.iter().filter(|id| b.contains(id)) {
            self.err(
                b_key,
                b_span.clone(),
                format!("port id {id} is in both {a_name} and {b_name}"),
            );
        }
    }

    /// A required, non-empty list of distinct ports (names or ids) as port ids.
    pub fn port_refs(&mut self, key: &str, v: &Option<S<Vec<S<PortRef>>>>) -> Vec<u16> {
        let Some(list) = v else {
            self.err(key, None, "missing (this key is required)");
            return Vec::new();
        };
        if list.get_ref().is_empty() {
            self.err(key, span(list), "must name at least one port");
        }
        let mut out: Vec<u16> = Vec::new();
        for (i, r) in list.get_ref().iter().enumerate() {
            if let Some(id) = self.port_ref(&format!("{key}[{i}]"), r) {
                if out.contains(&id) {
                    self.err(format!("{key}[{i}]"), span(r), "port listed twice");
                } else {
                    out.push(id);
                }
            }
        }
        out
    }

    fn port_ref_in(&mut self, key: &str, r: &S<PortRef>, infos: &[PortInfo]) -> Option<u16> {
        match r.get_ref() {
            PortRef::Name(n) => {
                if let Some(info) = infos.iter().find(|i| i.name.as_deref() == Some(n.as_str())) {
                    return info.id; // None: the port's own entry already has an error
                }
                let mut msg = format!(
                    "no port named '{n}' (ports: {})",
                    port_list(infos, |i| i.name.clone())
                );
                if let Ok(id) = n.parse::<u16>() {
                    if infos.iter().any(|i| i.id == Some(id)) {
                        msg.push_str(&format!(
                            "; to refer to port id {id}, write it as an integer: port = {id}"
                        ));
                    }
                }
                self.err(key, span(r), msg);
                None
            }
            PortRef::Id(id) => {
                if let Some(info) = infos.iter().find(|i| i.id.map(i64::from) == Some(*id)) {
                    return info.id;
                }
                if infos.iter().any(|i| i.id.is_none()) {
                    return None; // maybe the broken entry; its own error says so
                }
                let ids = port_list(infos, |i| i.id.map(|x| x.to_string()));
                self.err(
                    key,
                    span(r),
                    format!("no port with id {id} (port ids: {ids})"),
                );
                None
            }
        }
    }

    fn qos(
        &mut self,
        q: &RawQos,
        sw: &SwitchConfig,
        largest_mtu: u64,
        largest_frame: u64,
    ) -> (QosConfig, [Option<(String, Span)>; 8]) {
        let trust: Trust = q.trust.map_or(Trust::Dscp, Into::into);
        let scheduler: SchedulerKind = q.scheduler.map_or(SchedulerKind::Strict, Into::into);
        let default_class = self.int_or("qos.default_class", &q.default_class, 0, 0, 7) as u8;

        let mut dscp_map = [default_class; 64];
        let mut dscp_mapped = [false; 8];
        if let Some(m) = &q.dscp_map {
            self.code_map(
                "qos.dscp_map",
                "DSCP",
                m.get_ref(),
                &mut dscp_map,
                &mut dscp_mapped,
            );
        }
        let mut pcp_map = [default_class; 8];
        let mut pcp_mapped = [false; 8];
        if let Some(m) = &q.pcp_map {
            self.code_map(
                "qos.pcp_map",
                "PCP",
                m.get_ref(),
                &mut pcp_map,
                &mut pcp_mapped,
            );
        }

        let strict_classes = {
            let mut given: Vec<u8> = Vec::new();
            if let Some(list) = &q.strict_classes {
                for (i, c) in list.get_ref().iter().enumerate() {
                    let key = format!("qos.strict_classes[{i}]");
                    if let Some(c) = self.int(&key, c, 0, 7).map(|c| c as u8) {
                        if given.contains(&c) {
                            self.err(
                                key,
                                span(&list.get_ref()[i]),
                                format!("class {c} is listed twice"),
                            );
                        } else {
                            given.push(c);
                        }
                    }
                }
            }
            if scheduler == SchedulerKind::Strict {
                (0..8).rev().collect()
            } else {
                given.sort_unstable_by(|a, b| b.cmp(a));
                given
            }
        };

        let mut weights = [1u32; 8];
        if let Some(w) = &q.weights {
            let list = w.get_ref();
            if list.len() != 8 {
                self.err(
                    "qos.weights",
                    span(w),
                    format!(
                        "has {} entries: exactly 8 are needed (one per class 0..7)",
                        list.len()
                    ),
                );
            }
            for (i, x) in list.iter().enumerate().take(8) {
                weights[i] = self
                    .int(&format!("qos.weights[{i}]"), x, 0, 255)
                    .unwrap_or(1) as u32;
            }
        }
        if scheduler != SchedulerKind::Strict {
            // A class that traffic reaches but no scheduler serves would be a black hole.
            for c in 0..8u8 {
                if weights[c as usize] != 0 || strict_classes.contains(&c) {
                    continue;
                }
                let source = match trust {
                    _ if c == default_class => Some("qos.default_class"),
                    Trust::Dscp if dscp_mapped[c as usize] => Some("qos.dscp_map"),
                    Trust::Pcp if pcp_mapped[c as usize] => Some("qos.pcp_map"),
                    _ => None,
                };
                if let Some(source) = source {
                    let s = q
                        .weights
                        .as_ref()
                        .and_then(|w| w.get_ref().get(c as usize))
                        .map(|x| x.span());
                    self.err(
                        format!("qos.weights[{c}]"),
                        s,
                        format!("class {c} receives traffic ({source}) but has weight 0 and is not in qos.strict_classes: it would never be sent"),
                    );
                }
            }
        }

        let drr_quantum_bytes = self.int_or(
            "qos.drr_quantum_bytes",
            &q.drr_quantum_bytes,
            largest_frame as i64,
            1,
            MAX_DRR_QUANTUM,
        ) as u32;

        let queue_limit_bytes = self.limit(
            "qos.queue_limit_bytes",
            &q.queue_limit_bytes,
            DEFAULT_QUEUE_LIMIT_BYTES as u64,
            sw,
            largest_mtu,
            &None,
        );

        let default_class_cfg = ClassConfig {
            limit_bytes: queue_limit_bytes,
            lossless: false,
            ecn: None,
        };
        let mut classes: [ClassConfig; 8] = std::array::from_fn(|_| default_class_cfg.clone());
        let mut class_keys: [Option<(String, Span)>; 8] = Default::default();
        for (i, c) in q.classes.iter().flatten().enumerate() {
            let ctable = span(c);
            let c = c.get_ref();
            let key = format!("qos.classes[{i}]");
            let Some(cls) = self.required(&format!("{key}.class"), &c.class, &ctable) else {
                continue;
            };
            let Some(n) = self.int(&format!("{key}.class"), cls, 0, 7) else {
                continue;
            };
            let n = n as usize;
            if let Some((prev, _)) = &class_keys[n] {
                let prev = prev.clone();
                self.err(
                    format!("{key}.class"),
                    span(cls),
                    format!("class {n} is already configured in {prev}"),
                );
                continue;
            }
            let cfg = self.class(&key, c, &ctable, queue_limit_bytes, sw, largest_mtu);
            class_keys[n] = Some((key, ctable));
            classes[n] = cfg;
        }

        (
            QosConfig {
                trust,
                default_class,
                dscp_map,
                pcp_map,
                scheduler,
                strict_classes,
                weights,
                drr_quantum_bytes,
                classes,
            },
            class_keys,
        )
    }

    /// `dscp_map` / `pcp_map`: string keys (code points) -> class.
    fn code_map(
        &mut self,
        key: &str,
        what: &str,
        m: &OrderedTable<S<i64>>,
        map: &mut [u8],
        mapped: &mut [bool; 8],
    ) {
        let max = map.len() - 1;
        let mut seen = vec![None::<String>; map.len()];
        for (k, v) in &m.0 {
            let ekey = format!("{key}.{k}");
            let code = if !k.is_empty() && k.len() <= 3 && k.bytes().all(|b| b.is_ascii_digit()) {
                k.parse::<usize>().ok()
            } else {
                None
            };
            let Some(code) = code else {
                self.err(
                    ekey,
                    span(v),
                    format!("'{k}' is not a {what} value: keys are {what} numbers 0 to {max} written as strings, e.g. \"3\" = 3"),
                );
                continue;
            };
            if code > max {
                self.err(
                    ekey,
                    span(v),
                    format!("{what} {code} is out of range: must be 0 to {max}"),
                );
                continue;
            }
            if let Some(prev) = &seen[code] {
                let prev = prev.clone();
                self.err(
                    ekey,
                    span(v),
                    format!("{what} {code} is already mapped by {key}.{prev}"),
                );
                continue;
            }
            seen[code] = Some(k.clone());
            if let Some(class) = self.int(&ekey, v, 0, 7) {
                map[code] = class as u8;
                mapped[class as usize] = true;
            }
        }
    }

    /// A queue limit: `1..=switch.buffer_bytes` and at least the largest mtu.
    fn limit(
        &mut self,
        key: &str,
        v: &Option<S<i64>>,
        default: u64,
        sw: &SwitchConfig,
        largest_mtu: u64,
        table: &Span,
    ) -> u64 {
        let value = match v {
            Some(v) => match self.int(key, v, 1, i64::MAX) {
                Some(x) => x as u64,
                None => return default,
            },
            None => default,
        };
        let s = v.as_ref().map(|v| v.span()).or(table.clone());
        let what = if v.is_none() { " (the default)" } else { "" };
        if value > sw.buffer_bytes {
            let msg = format!(
                "{value}{what} is larger than the whole shared buffer, switch.buffer_bytes ({})",
                sw.buffer_bytes
            );
            self.err(key, s, msg);
        } else if value < largest_mtu {
            let msg = format!(
                "{value}{what} is smaller than the largest port mtu ({largest_mtu}): \
                 such a frame could never be queued"
            );
            self.err(key, s, msg);
        }
        value
    }

    fn class(
        &mut self,
        key: &str,
        c: &RawClass,
        table: &Span,
        queue_limit: u64,
        sw: &SwitchConfig,
        largest_mtu: u64,
    ) -> ClassConfig {
        let lossless = c.lossless.as_ref().is_some_and(|l| *l.get_ref());
        let limit_bytes = match &c.limit_bytes {
            Some(_) => self.limit(
                &format!("{key}.limit_bytes"),
                &c.limit_bytes,
                queue_limit,
                sw,
                largest_mtu,
                table,
            ),
            None => queue_limit,
        };
        let ecn = c
            .ecn
            .as_ref()
            .and_then(|e| self.ecn(&format!("{key}.ecn"), e, table, limit_bytes));
        ClassConfig {
            limit_bytes,
            lossless,
            ecn,
        }
    }

    /// `table`: the span of the enclosing class, where missing keys are reported.
    fn ecn(&mut self, key: &str, e: &RawEcn, table: &Span, limit_bytes: u64) -> Option<EcnConfig> {
        let table = table.clone();
        let kmin_key = format!("{key}.kmin_bytes");
        let kmax_key = format!("{key}.kmax_bytes");
        let pmax_key = format!("{key}.pmax");
        let kmin = self
            .required(&kmin_key, &e.kmin_bytes, &table)
            .and_then(|v| self.int(&kmin_key, v, 0, i64::MAX));
        let kmax_raw = self.required(&kmax_key, &e.kmax_bytes, &table);
        let kmax = kmax_raw.and_then(|v| self.int(&kmax_key, v, 1, i64::MAX));
        let pmax = self.required(&pmax_key, &e.pmax, &table).and_then(|v| {
            let p = *v.get_ref();
            if p.is_finite() && p > 0.0 && p <= 1.0 {
                Some(p)
            } else {
                self.err(
                    &pmax_key,
                    span(v),
                    format!("{p} is out of range: must be > 0 and <= 1"),
                );
                None
            }
        });
        let (kmin, kmax, pmax) = (kmin? as u64, kmax? as u64, pmax?);
        let s = kmax_raw.and_then(span);
        if kmin >= kmax {
            self.err(
                &kmax_key,
                s,
                format!("{kmax} must be greater than kmin_bytes ({kmin})"),
            );
        } else if kmax > limit_bytes {
            let msg = format!(
                "{kmax} is above the class's queue limit ({limit_bytes} bytes): \
                 marking would never reach pmax"
            );
            self.err(&kmax_key, s, msg);
        }
        let at_dequeue = self.choice(
            &format!("{key}.at"),
            &e.at,
            &[("enqueue", false), ("dequeue", true)],
            false,
        );
        Some(EcnConfig {
            kmin_bytes: kmin,
            kmax_bytes: kmax,
            pmax,
            at_dequeue,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn pfc(
        &mut self,
        p: &RawPfc,
        sw: &SwitchConfig,
        ports: &[PortConfig],
        qos: &QosConfig,
        class_keys: &[Option<(String, Span)>; 8],
        largest_frame: u64,
    ) -> PfcConfig {
        let enabled = p.enabled.as_ref().is_some_and(|e| *e.get_ref());
        // Missing keys are reported at the line of `enabled` (the table itself has no span).
        let table = p.enabled.as_ref().and_then(span);
        let pause_quanta = self.int_or(
            "pfc.pause_quanta",
            &p.pause_quanta,
            DEFAULT_PAUSE_QUANTA,
            1,
            65_535,
        ) as u16;
        // The pause lasts quanta x 512 bit times; it is shortest on the fastest port, and the
        // refresh must come before the shortest one runs out.
        let fastest = ports.iter().filter(|p| p.rate_bps > 0).fold(
            None::<&PortConfig>,
            |best, p| match best {
                Some(b) if b.rate_bps >= p.rate_bps => Some(b),
                _ => Some(p),
            },
        );
        let pause_ns = fastest.map(|p| pause_time_ns(pause_quanta, p.rate_bps));
        let refresh_ns = match &p.refresh_ns {
            Some(v) => {
                let r = self.int("pfc.refresh_ns", v, 1, i64::MAX).unwrap_or(1) as u64;
                if let (true, Some(pause), Some(port)) = (enabled, pause_ns, fastest) {
                    if r >= pause {
                        self.err(
                            "pfc.refresh_ns",
                            span(v),
                            format!(
                                "{r} is not shorter than the pause time of {pause_quanta} quanta on port '{}' ({pause} ns at {} Gb/s): the upstream would resume between refreshes",
                                port.name,
                                port.rate_bps as f64 / 1e9
                            ),
                        );
                    }
                }
                r
            }
            None => pause_ns.map_or(1, |p| (p / 2).max(1)),
        };

        let get = |v: &mut Self, k: &str, raw: &Option<S<i64>>, lo: i64| -> Option<(u64, Span)> {
            let key = format!("pfc.{k}");
            let raw = if enabled {
                v.required(&key, raw, &table)
            } else {
                raw.as_ref()
            }?;
            v.int(&key, raw, lo, i64::MAX)
                .map(|x| (x as u64, span(raw)))
        };
        let xoff = get(self, "xoff_bytes", &p.xoff_bytes, 1);
        let xon = get(self, "xon_bytes", &p.xon_bytes, 0);
        let headroom = get(self, "headroom_bytes", &p.headroom_bytes, 0);

        let lossless: Vec<usize> = (0..8).filter(|&c| qos.classes[c].lossless).collect();
        if !enabled {
            for &c in &lossless {
                if let Some((key, s)) = &class_keys[c] {
                    let (key, s) = (format!("{key}.lossless"), s.clone());
                    let msg = format!(
                        "class {c} is lossless but pfc.enabled is false: \
                         without PFC a lossless class would drop"
                    );
                    self.err(key, s, msg);
                }
            }
        } else {
            let enabled_span = p.enabled.as_ref().and_then(span);
            if lossless.is_empty() {
                self.err(
                    "pfc.enabled",
                    enabled_span,
                    "PFC is enabled but no class is lossless: set lossless = true in a [[qos.classes]] entry",
                );
            }
            if let (Some((xoff, _)), Some((xon, xon_span))) = (&xoff, &xon) {
                if xon >= xoff {
                    self.err(
                        "pfc.xon_bytes",
                        xon_span.clone(),
                        format!("{xon} must be less than pfc.xoff_bytes ({xoff})"),
                    );
                }
            }
            if let Some((headroom, hspan)) = &headroom {
                let min = 2 * largest_frame;
                if *headroom < min {
                    self.err(
                        "pfc.headroom_bytes",
                        hspan.clone(),
                        format!(
                            "{headroom} is less than 2 x the largest frame on the wire (2 x {largest_frame} = {min} bytes): \
                             one frame can be in flight in each direction when XOFF is sent"
                        ),
                    );
                } else {
                    let reserved = ports.len() as u64 * lossless.len() as u64 * headroom;
                    if reserved > sw.buffer_bytes {
                        self.err(
                            "pfc.headroom_bytes",
                            hspan.clone(),
                            format!(
                                "{} ports x {} lossless classes x {headroom} bytes = {reserved} bytes of headroom is more than switch.buffer_bytes ({})",
                                ports.len(),
                                lossless.len(),
                                sw.buffer_bytes
                            ),
                        );
                    }
                }
                if let Some((xoff, _)) = &xoff {
                    for &c in &lossless {
                        let limit = qos.classes[c].limit_bytes;
                        if xoff + headroom > limit {
                            if let Some((key, s)) = &class_keys[c] {
                                let (key, s) = (format!("{key}.limit_bytes"), s.clone());
                                self.err(
                                    key,
                                    s,
                                    format!(
                                        "class {c} is lossless but its limit ({limit} bytes) is less than pfc.xoff_bytes + pfc.headroom_bytes ({xoff} + {headroom} = {}): it would drop before PFC pauses the sender",
                                        xoff + headroom
                                    ),
                                );
                            }
                        }
                    }
                }
            }
        }

        let dynamic_alpha = p.dynamic_alpha.as_ref().and_then(|a| {
            let x = *a.get_ref();
            if x.is_finite() && x > 0.0 && x <= 8.0 {
                Some(x)
            } else {
                self.err(
                    "pfc.dynamic_alpha",
                    span(a),
                    format!("{x} is out of range: must be > 0 and <= 8"),
                );
                None
            }
        });
        PfcConfig {
            enabled,
            xoff_bytes: xoff.map_or(0, |x| x.0),
            xon_bytes: xon.map_or(0, |x| x.0),
            headroom_bytes: headroom.map_or(0, |x| x.0),
            pause_quanta,
            refresh_ns,
            dynamic_alpha,
        }
    }

    fn parser(&mut self, p: Option<&super::raw::RawParser>) -> ParserConfig {
        let default = super::raw::RawParser::default();
        let p = p.unwrap_or(&default);
        let pol = p.policy.as_ref();
        let get = |f: fn(&super::raw::RawPolicies) -> Option<super::raw::RawPolicy>,
                   d: Policy|
         -> Policy { pol.and_then(f).map_or(d, Into::into) };
        ParserConfig {
            max_vlan_tags: self.int_or("parser.max_vlan_tags", &p.max_vlan_tags, 2, 0, 2) as u8,
            verify_ipv4_checksum: p.verify_ipv4_checksum.unwrap_or(true),
            on_bad_length: get(|p| p.bad_length, Policy::Drop),
            on_unknown_ethertype: get(|p| p.unknown_ethertype, Policy::Forward),
            on_vlan_stack: get(|p| p.vlan_stack, Policy::Drop),
            on_ipv4_options: get(|p| p.ipv4_options, Policy::Forward),
            on_ipv4_fragment: get(|p| p.ipv4_fragment, Policy::Forward),
            on_bad_ip_checksum: get(|p| p.bad_ip_checksum, Policy::Drop),
        }
    }
}

/// 1 to 32 characters from `A-Z a-z 0-9 _ . -`.
fn valid_port_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= MAX_PORT_NAME_LEN
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// "a, b, c" (at most 16, then "... and N more").
fn port_list(infos: &[PortInfo], f: impl Fn(&PortInfo) -> Option<String>) -> String {
    let items: Vec<String> = infos.iter().filter_map(f).collect();
    if items.is_empty() {
        return "none".to_owned();
    }
    if items.len() > 16 {
        format!(
            "{}, ... and {} more",
            items[..16].join(", "),
            items.len() - 16
        )
    } else {
        items.join(", ")
    }
}

/// Duration of `quanta` pause quanta (512 bit times each) at `rate_bps`, in ns.
pub fn pause_time_ns(quanta: u16, rate_bps: u64) -> u64 {
    (u128::from(quanta) * 512 * 1_000_000_000 / u128::from(rate_bps.max(1))) as u64
}

/// Why an address as written (a MAC, an IP address, a prefix) is refused: the message a user
/// sees after the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddrError {
    #[error(
        "'{0}' is not a MAC address: expected 6 hex bytes separated by ':' (e.g. 02:00:00:00:00:01)"
    )]
    NotMac(String),
    #[error("{0} is a multicast/broadcast MAC: a unicast address is needed")]
    MulticastMac(String),
    #[error("00:00:00:00:00:00 is not a usable MAC address")]
    ZeroMac,
    #[error("'{0}' is not a prefix: expected address/length, e.g. 10.1.0.0/16 or 2001:db8::/32")]
    NotPrefix(String),
    #[error("'{prefix}': prefix length '{len}' is not a number from 0 to {max}")]
    PrefixLen {
        prefix: String,
        len: String,
        max: u8,
    },
    /// `masked`: the address with its host bits cleared.
    #[error("'{prefix}' has host bits set (did you mean {masked}/{len}?)")]
    HostBits {
        prefix: String,
        masked: IpAddr,
        len: u8,
    },
    #[error("'{addr}' is not an IPv4 or IPv6 address (in prefix '{prefix}')")]
    PrefixAddr { addr: String, prefix: String },
    #[error("'{0}' is an IPv4-mapped IPv6 address: write the IPv4 address")]
    MappedV4(String),
    #[error("'{0}' is not an IPv4 or IPv6 address")]
    NotIp(String),
}

/// A MAC address as the config file and the management API both take it ([`parse_mac`]'s
/// syntax); `unicast`: multicast, broadcast and all-zero addresses are refused (a next hop, a
/// neighbour, a port's own address).
pub fn check_mac(s: &str, unicast: bool) -> Result<[u8; 6], AddrError> {
    let Some(mac) = parse_mac(s) else {
        return Err(AddrError::NotMac(s.to_owned()));
    };
    if unicast && mac[0] & 1 != 0 {
        return Err(AddrError::MulticastMac(s.to_owned()));
    }
    if unicast && mac == [0; 6] {
        return Err(AddrError::ZeroMac);
    }
    Ok(mac)
}

/// "02:00:00:00:00:01" (also accepts '-' as the separator, and upper case).
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let sep = if s.contains('-') { '-' } else { ':' };
    let mut mac = [0u8; 6];
    let mut n = 0;
    for part in s.split(sep) {
        if n == 6 || part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        mac[n] = u8::from_str_radix(part, 16).ok()?;
        n += 1;
    }
    (n == 6).then_some(mac)
}

/// Bytes as `02:00:00:00:00:01`.
pub fn fmt_mac(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// "10.1.0.0/16" or "2001:db8::/32"; the length is required and host bits must be zero.
pub fn parse_prefix(s: &str) -> Result<IpPrefix, AddrError> {
    let Some((addr, len)) = s.split_once('/') else {
        return Err(AddrError::NotPrefix(s.to_owned()));
    };
    let bad_len = |max: u8| AddrError::PrefixLen {
        prefix: s.to_owned(),
        len: len.to_owned(),
        max,
    };
    if let Ok(a) = addr.parse::<Ipv4Addr>() {
        let len: u8 = len
            .parse()
            .ok()
            .filter(|l| *l <= 32 && len.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad_len(32))?;
        let a = u32::from(a);
        let mask = super::v4_mask(len);
        if a & !mask != 0 {
            return Err(AddrError::HostBits {
                prefix: s.to_owned(),
                masked: Ipv4Addr::from(a & mask).into(),
                len,
            });
        }
        Ok(IpPrefix::V4 { addr: a, len })
    } else if let Ok(a) = addr.parse::<Ipv6Addr>() {
        let len: u8 = len
            .parse()
            .ok()
            .filter(|l| *l <= 128 && len.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad_len(128))?;
        let a = u128::from(a);
        let mask = super::v6_mask(len);
        if a & !mask != 0 {
            return Err(AddrError::HostBits {
                prefix: s.to_owned(),
                masked: Ipv6Addr::from(a & mask).into(),
                len,
            });
        }
        Ok(IpPrefix::V6 { addr: a, len })
    } else {
        Err(AddrError::PrefixAddr {
            addr: addr.to_owned(),
            prefix: s.to_owned(),
        })
    }
}

/// Deserializes the value at key path `path` of a TOML document as `T` (spans kept), skipping
/// every other key (`None`: no such key; an empty path is the document itself).
struct Pick<'a, T> {
    path: &'a [&'a str],
    _t: std::marker::PhantomData<T>,
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for Pick<'_, T> {
    type Value = Option<T>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        if self.path.is_empty() {
            return T::deserialize(d).map(Some);
        }
        d.deserialize_map(self)
    }
}

impl<'de, T: DeserializeOwned> Visitor<'de> for Pick<'_, T> {
    type Value = Option<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut out = None;
        while let Some(k) = map.next_key::<String>()? {
            if k == self.path[0] {
                out = map.next_value_seed(Pick::<T> {
                    path: &self.path[1..],
                    _t: std::marker::PhantomData,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(out)
    }
}
