//! longhaul configuration: the TOML schema, parsed and fully validated before anything runs.
//!
//! `Config::load(path)` reads a file; `Config::parse(text, file)` parses text. Both return either a
//! validated `Config` (every reference resolved: port names to ids, prefixes parsed) or a
//! `ConfigError` naming the file, the key path (`ports[1].rate_gbps`) and what is wrong.
//!
//! `Config::parse_all` / `Config::load_all` return every validation error instead of the first.
//!
//! Two stages: `raw` (serde structs that mirror the file, unknown keys denied, every leaf
//! `toml::Spanned` for line numbers) and `validate` (ranges, defaults, references, cross-section
//! rules) producing the validated structs below, which are what the dataplane uses. See
//! docs/config.md for the reference; keep it in step with the defaults in `validate.rs`.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

mod locate;
mod raw;
mod section;
mod sections;
mod unknown;
mod validate;

pub use locate::{at_key, key_at, key_location};
pub use raw::{PortRef, GENERIC_TABLES, S};
pub use section::{GenericSchema, Schema, Section, TypedSection, ValidateFn};
pub use sections::{SectionConfig, Sections};
/// Duration of `quanta` PFC pause quanta (512 bit times each) at `rate_bps`, in ns.
pub use validate::pause_time_ns;
pub use validate::{
    check_mac, fmt_ip, fmt_mac, parse_ip, parse_mac, parse_prefix, span, AddrError, Validator,
    MAX_RATE_GBPS, MIN_RATE_GBPS,
};

/// `switch.pipeline` when the file does not say.
pub const DEFAULT_PIPELINE: &str = "baseline";

/// A configuration error: file, key path, reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// Dotted key path with array indices, e.g. `routes[2].port`; empty for whole-file errors.
    pub key: String,
    pub msg: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.file.display(), self.msg)
        } else {
            write!(f, "{}: {}: {}", self.file.display(), self.key, self.msg)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Why one parse failed.
enum Failed {
    /// Deserializing stopped (syntax, type, unknown key), at this byte offset if known.
    Stop(ConfigError, Option<usize>),
    /// The validation pass's errors.
    Validation(Vec<ConfigError>),
}

impl Config {
    /// Parses and validates `text` with the generic layer alone (the default pipeline,
    /// no mechanism sections; a build with mechanisms uses [`Config::parse_with`] and its
    /// registry). `file` names the file in errors, and relative paths in the config
    /// (`ports[].io.rx`/`tx`) are resolved against its directory. Returns the first error (in
    /// file order for syntax and type errors, then in validation order: switch, ports, qos, pfc,
    /// parser, l2, routes, control, dpdk, then each section in registry order); see
    /// [`Config::parse_all`] for every error.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        Self::parse_with(text, file, &GenericSchema)
    }

    /// Reads, parses and validates the file at `path` (read errors are `ConfigError`s too).
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::load_with(path, &GenericSchema)
    }

    /// Like [`Config::parse`], but on failure returns every error found.
    pub fn parse_all(text: &str, file: &Path) -> Result<Config, Vec<ConfigError>> {
        Self::parse_all_with(text, file, &GenericSchema)
    }

    /// Like [`Config::load`], but on failure returns every error found.
    pub fn load_all(path: &Path) -> Result<Config, Vec<ConfigError>> {
        Self::load_all_with(path, &GenericSchema)
    }

    /// [`Config::parse`] with the pipelines and sections of `schema` (the registry).
    pub fn parse_with(text: &str, file: &Path, schema: &dyn Schema) -> Result<Config, ConfigError> {
        Self::parse_all_with(text, file, schema).map_err(|mut errors| errors.swap_remove(0))
    }

    /// [`Config::load`] with the pipelines and sections of `schema`.
    pub fn load_with(path: &Path, schema: &dyn Schema) -> Result<Config, ConfigError> {
        Self::load_all_with(path, schema).map_err(|mut errors| errors.swap_remove(0))
    }

    /// Like [`Config::parse_with`], but on failure returns every error found (never an empty
    /// vector). A syntax or type error stops parsing, so it comes alone; unknown keys are all
    /// reported at once (each removed from a working copy and the text parsed again,
    /// `config::unknown`), and then, once the file has none, the validation pass reports every
    /// error it finds.
    pub fn parse_all_with(
        text: &str,
        file: &Path,
        schema: &dyn Schema,
    ) -> Result<Config, Vec<ConfigError>> {
        let mut work = text.to_owned();
        let mut removed = unknown::Unknowns::default();
        let mut unknowns: Vec<ConfigError> = Vec::new();
        loop {
            let (stop, at) = match Self::parse_once(&work, file, schema) {
                Ok(c) if unknowns.is_empty() => return Ok(c),
                // Later errors' places would be in the stripped text: unknown keys first.
                Ok(_) => return Err(unknowns),
                Err(Failed::Validation(errs)) if unknowns.is_empty() => return Err(errs),
                Err(Failed::Validation(_)) => return Err(unknowns),
                Err(Failed::Stop(e, at)) => (e, at),
            };
            let relocated = |mut e: ConfigError, at: Option<usize>| {
                if let (Some(at), Some(i)) = (at, e.msg.rfind(" (line ")) {
                    e.msg.truncate(i);
                    e.msg
                        .push_str(&validate::location(text, removed.original(at)));
                }
                e
            };
            let range = at.filter(|_| unknown::is_unknown_key(&stop.msg));
            let range = range.and_then(|a| unknown::removal(&work, a));
            match range {
                Some(r) if unknowns.len() < unknown::MAX_UNKNOWN => {
                    unknowns.push(relocated(stop, at));
                    removed.remove(&mut work, r);
                }
                _ => {
                    unknowns.push(relocated(stop, at));
                    return Err(unknowns);
                }
            }
        }
    }

    /// One parse of `text`: the config, or the error that stopped deserializing (with its byte
    /// offset), or the validation pass's errors.
    fn parse_once(text: &str, file: &Path, schema: &dyn Schema) -> Result<Config, Failed> {
        let sections = schema.sections();
        let names: Vec<&'static str> = sections.iter().map(|s| s.name()).collect();
        let mut v = validate::Validator::new(file, text);
        let stop = |v: &validate::Validator<'_>, e| Failed::Stop(e, v.stop_at.get());
        let raw = match v.deserialize(raw::RawConfigSeed { sections: &names }) {
            Ok(r) => r,
            Err(e) => return Err(stop(&v, e)),
        };
        let mut config = v.config(raw, &schema.pipelines());
        for s in sections {
            match s.validate(&mut v, &config) {
                Ok(Some(c)) => config.sections.0.push((s.name(), c)),
                Ok(None) => {}
                Err(e) => return Err(stop(&v, e)),
            }
        }
        if v.errors.is_empty() {
            Ok(config)
        } else {
            Err(Failed::Validation(v.errors))
        }
    }

    /// Like [`Config::load_with`], but on failure returns every error found. The file must be a
    /// regular file of at most [`MAX_CONFIG_FILE_BYTES`] ([`read_config_file`]).
    pub fn load_all_with(path: &Path, schema: &dyn Schema) -> Result<Config, Vec<ConfigError>> {
        Self::load_bounded(path, schema, MAX_CONFIG_FILE_BYTES)
    }

    /// Like [`Config::load_all_with`] with a size limit of `max_bytes` (a reload's
    /// `control.reload_max_bytes`).
    pub fn load_bounded(
        path: &Path,
        schema: &dyn Schema,
        max_bytes: u64,
    ) -> Result<Config, Vec<ConfigError>> {
        let text = read_config_file(path, max_bytes).map_err(|e| {
            vec![ConfigError {
                file: path.to_path_buf(),
                key: String::new(),
                msg: e.to_string(),
            }]
        })?;
        Self::parse_all_with(&text, path, schema)
    }

    /// The mechanism section of type `T` (e.g. a mechanism's own config struct), if present.
    pub fn section<T: std::any::Any>(&self) -> Option<&T> {
        self.sections.get::<T>()
    }
}

/// A serde (syntax, unknown key, wrong type) error as a `ConfigError`: the key path without
/// toml's `Spanned` internals, toml's message in words a user knows, and the line and column.
pub(crate) fn serde_error(
    text: &str,
    file: &Path,
    e: serde_path_to_error::Error<toml::de::Error>,
) -> ConfigError {
    use serde_path_to_error::Segment;
    let mut key = String::new();
    for seg in e.path().iter() {
        match seg {
            Segment::Seq { index } => key.push_str(&format!("[{index}]")),
            Segment::Map { key: k } if k.starts_with("$__") => {}
            Segment::Map { key: k } | Segment::Enum { variant: k } => {
                if !key.is_empty() {
                    key.push('.');
                }
                key.push_str(k);
            }
            Segment::Unknown => {}
        }
    }
    let inner = e.into_inner();
    let mut msg = inner.message().trim().replace('\n', "; ");
    for (from, to) in [
        ("expected i64", "expected an integer"),
        ("expected f64", "expected a number"),
        ("expected a sequence", "expected an array"),
        ("invalid type: map", "invalid type: table"),
        ("invalid type: sequence", "invalid type: array"),
        ("expected a boolean", "expected true or false"),
    ] {
        msg = msg.replace(from, to);
    }
    // "expected struct RawPort" and the like: the user wrote a value where a table goes.
    if let Some(i) = msg.find("expected struct Raw") {
        msg.truncate(i);
        msg.push_str("expected a table");
    }
    if msg.starts_with("invalid type: table, expected an array") {
        msg.push_str(&format!(" (write each entry as a [[{key}]] table)"));
    }
    if key.is_empty() {
        msg.insert_str(0, "TOML syntax error: ");
    }
    if let Some(span) = inner.span() {
        msg.push_str(&validate::location(text, span.start));
    }
    ConfigError {
        file: file.to_path_buf(),
        key,
        msg,
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            IpPrefix::V4 { addr, len } => write!(f, "{}/{len}", std::net::Ipv4Addr::from(addr)),
            IpPrefix::V6 { addr, len } => write!(f, "{}/{len}", std::net::Ipv6Addr::from(addr)),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Validated configuration (what the dataplane is built from).
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub switch: SwitchConfig,
    /// Ports, in file order; `ports[i].id` is unique.
    pub ports: Vec<PortConfig>,
    pub qos: QosConfig,
    pub pfc: PfcConfig,
    pub parser: ParserConfig,
    pub l2: Vec<L2Entry>,
    pub routes: Vec<Route>,
    /// `[[wire]]`: port pairs in the transparent `wire` mode, each pair once (lower id first).
    /// Every other port is `routed`.
    pub wire: Vec<(u16, u16)>,
    /// `[neighbors]`: ARP / IPv6 neighbour discovery on routed ports and static entries.
    pub neighbors: NeighborConfig,
    /// `[control]`: control thread, management API, metrics.
    pub control: ControlConfig,
    /// `[dpdk]`: EAL arguments and the mbuf pool; present iff the section is (required when a
    /// port has `io.kind = "dpdk"`).
    pub dpdk: Option<DpdkConfig>,
    /// The registered mechanisms' sections present in the file (validated by each
    /// mechanism; [`Config::section`] finds one by type).
    pub sections: Sections,
}

#[derive(Clone, Debug, PartialEq)]
pub struct SwitchConfig {
    pub name: String,
    /// The pipeline (`switch.pipeline`): a registered pipeline's name.
    pub pipeline: String,
    /// Packet buffers in the pool.
    pub pool_buffers: usize,
    /// Bytes of data room per buffer (largest frame + room for encapsulation).
    pub buffer_data_room: usize,
    /// Shared packet buffer over all egress queues, bytes.
    pub buffer_bytes: u64,
    /// Seed of every dataplane RNG (RED marking), for reproducible replay.
    pub seed: u64,
    /// Seed of the ECMP hash (`[[routes]] next_hops`): the same seed, the same member per flow.
    pub ecmp_seed: u64,
    /// The most memory the config may ask for (packet pool, tables, per-flow queues): checked
    /// at validation so an oversized config is refused instead of aborting on allocation.
    pub memory_limit_bytes: u64,
}

impl SwitchConfig {
    /// The memory one heap packet buffer takes (data room, headroom, descriptor, allocator):
    /// [`longhaul_dataplane::packet::heap_buffer_bytes`].
    pub fn pool_buffer_bytes(&self) -> u64 {
        longhaul_dataplane::packet::heap_buffer_bytes(self.buffer_data_room) as u64
    }

    /// The heap packet pool at its largest: `pool_buffers` x [`SwitchConfig::pool_buffer_bytes`].
    /// `check-config` checks it against `memory_limit_bytes`; `run` reports it at start.
    pub fn pool_bytes(&self) -> u64 {
        (self.pool_buffers as u64).saturating_mul(self.pool_buffer_bytes())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct PortConfig {
    pub id: u16,
    pub name: String,
    pub mac: [u8; 6],
    /// Line rate, bits per second.
    pub rate_bps: u64,
    /// Largest frame (without FCS) the port accepts and sends.
    pub mtu: u16,
    /// Wire bytes per frame not in the buffer: preamble + SFD (8) + IFG (12) + FCS (4) = 24.
    pub frame_overhead: u16,
    /// Where a live run (`longhaul run`) takes the port's packets from and sends them to.
    pub io: PortIo,
    /// `addresses`: the port's own IP addresses with their subnets (a routed port answers ARP /
    /// neighbour solicitations for them, and reaches the subnets directly).
    pub addresses: Vec<PortAddr>,
}

/// One of a routed port's addresses (`"10.0.0.1/24"`): the address and its subnet's length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortAddr {
    V4 { addr: u32, len: u8 },
    V6 { addr: u128, len: u8 },
}

impl PortAddr {
    /// The subnet (host bits cleared).
    pub fn subnet(&self) -> IpPrefix {
        match *self {
            PortAddr::V4 { addr, len } => IpPrefix::V4 {
                addr: addr & v4_mask(len),
                len,
            },
            PortAddr::V6 { addr, len } => IpPrefix::V6 {
                addr: addr & v6_mask(len),
                len,
            },
        }
    }

    /// The address, IPv4 as an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
    pub fn mapped(&self) -> u128 {
        match *self {
            PortAddr::V4 { addr, .. } => map_v4(addr),
            PortAddr::V6 { addr, .. } => addr,
        }
    }

    /// Whether `ip` (IPv4-mapped for IPv4) is in the subnet.
    pub fn contains(&self, ip: u128) -> bool {
        self.subnet().contains_mapped(ip)
    }
}

/// `ip` as an IPv4-mapped IPv6 address.
pub const fn map_v4(ip: u32) -> u128 {
    0xffff_0000_0000 | ip as u128
}

/// The IPv4 address of an IPv4-mapped one.
pub fn unmap_v4(ip: u128) -> Option<u32> {
    (ip >> 32 == 0xffff).then_some(ip as u32)
}

pub(crate) fn v4_mask(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len.min(32))
    }
}

pub(crate) fn v6_mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len.min(128))
    }
}

/// `[neighbors]`: how routed ports resolve next hops (ARP, RFC 826; IPv6 neighbour discovery,
/// RFC 4861) and the static entries.
#[derive(Clone, Debug, PartialEq)]
pub struct NeighborConfig {
    /// Learned entries a worker holds at most (static entries come on top).
    pub capacity: usize,
    /// A learned entry is used without question this long after it was confirmed (RFC 4861's
    /// REACHABLE_TIME).
    pub reachable_ns: u64,
    /// After that, unicast probes every `retrans_ns` while the entry is still used; after
    /// `probes` unanswered ones it is dropped and the next hop solicited by broadcast again.
    pub probes: u32,
    /// Between two solicitations (or probes) of one neighbour (RETRANS_TIMER).
    pub retrans_ns: u64,
    /// `[[neighbors.static]]`: entries that never age.
    pub statics: Vec<StaticNeighbor>,
}

impl Default for NeighborConfig {
    fn default() -> Self {
        NeighborConfig {
            capacity: 4096,
            reachable_ns: 30_000_000_000,
            probes: 3,
            retrans_ns: 1_000_000_000,
            statics: Vec::new(),
        }
    }
}

/// A static neighbour entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticNeighbor {
    pub port: u16,
    /// IPv4-mapped for IPv4.
    pub ip: u128,
    pub mac: [u8; 6],
}

/// A port's live I/O (`ports[].io`). Replay ignores it (its inputs come from the command line).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PortIo {
    /// No `io` key: the port has no live I/O (it receives nothing; what it sends is counted and
    /// dropped).
    #[default]
    None,
    /// Read frames from a pcap file and/or write sent frames to one. Relative paths in the file
    /// are resolved against the directory of the config file.
    Pcap {
        rx: Option<PathBuf>,
        tx: Option<PathBuf>,
        /// Start `rx` again from the beginning at its end (otherwise the port goes quiet).
        rx_loop: bool,
        /// Send `rx` frames at their pcap timestamps' spacing (otherwise as fast as possible).
        pace: bool,
        /// `tx_max_bytes`: the most the tx file may hold; later frames are dropped and counted.
        tx_max_bytes: Option<u64>,
    },
    /// In-process rings (tests, benchmarks): frames are pushed and pulled through the API.
    Memory,
    /// A DPDK ethdev (a PCI address or a vdev name such as `net_null0`), with the `[dpdk]`
    /// section's EAL and mbuf pool. Queue and descriptor counts are what is asked of the PMD
    /// (which may adjust descriptor counts to its limits).
    Dpdk {
        device: String,
        /// Receive queues (one per worker).
        rx_queues: u16,
        /// Transmit queues (one per worker).
        tx_queues: u16,
        /// Descriptors per rx queue.
        rx_desc: u16,
        /// Descriptors per tx queue.
        tx_desc: u16,
    },
}

/// `[dpdk]`: the DPDK EAL and the mbuf pool shared by every `io.kind = "dpdk"` port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpdkConfig {
    /// EAL arguments, without the program name (e.g. `["-l", "0-1", "--no-huge", "--no-pci",
    /// "--vdev=net_null0"]`).
    pub eal_args: Vec<String>,
    /// Mbufs in the pool (a power of two minus one is best for DPDK).
    pub mbufs: u32,
    /// Per-lcore mbuf cache (0..=512, at most mbufs / 1.5).
    pub mbuf_cache: u32,
    /// Frame bytes per mbuf after DPDK's headroom (default `switch.buffer_data_room`).
    pub mbuf_data_room: usize,
    /// Worker lcores, each with its own switch (tables, traffic manager, buffer); flows are
    /// sharded over them by the unordered IP pair (docs/dpdk.md, "Several workers").
    pub workers: u16,
    /// How each worker's traffic manager paces a port.
    pub worker_rate: WorkerRate,
}

/// `dpdk.worker_rate`: how the egress rate of a port is shared by the workers that send on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WorkerRate {
    /// Each worker paces a port at `rate / workers`: the workers together never exceed the
    /// link, so queues (and ECN marks, PFC) build in longhaul's traffic manager; one flow gets
    /// at most `rate / workers`.
    #[default]
    Split,
    /// Each worker paces a port at its full rate: one flow can use the whole link, but when the
    /// workers together exceed it the NIC's tx ring backs up instead (no ECN, tx drops counted).
    Full,
}

/// Largest config file read at start (`run`, `check-config`): a reload's limit is
/// `control.reload_max_bytes`.
pub const MAX_CONFIG_FILE_BYTES: u64 = 256 << 20;

/// Why a config file was not read ([`read_config_file`]). The path is in [`ConfigError::file`].
#[derive(Debug, thiserror::Error)]
pub enum ReadConfigError {
    #[error("cannot read the file: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a regular file (a {0}): a config must be a regular file")]
    NotRegular(&'static str),
    #[error("the file is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge { size: u64, limit: u64 },
    #[error("the file is not UTF-8 text")]
    NotUtf8,
}

/// Reads a config file without ever blocking on it: it is opened non-blocking (a FIFO's open
/// does not wait for a writer), must be a regular file (no FIFO, device, socket or directory),
/// and at most `max_bytes` long (checked before reading, and again while reading, in case it
/// grows).
pub fn read_config_file(path: &Path, max_bytes: u64) -> Result<String, ReadConfigError> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = f.metadata()?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let kind = if ft.is_dir() {
            "directory"
        } else if ft.is_fifo() {
            "FIFO"
        } else if ft.is_char_device() {
            "character device"
        } else if ft.is_block_device() {
            "block device"
        } else if ft.is_socket() {
            "socket"
        } else {
            "special file"
        };
        return Err(ReadConfigError::NotRegular(kind));
    }
    if meta.len() > max_bytes {
        return Err(ReadConfigError::TooLarge {
            size: meta.len(),
            limit: max_bytes,
        });
    }
    let mut buf = Vec::with_capacity(meta.len() as usize);
    f.take(max_bytes + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max_bytes {
        return Err(ReadConfigError::TooLarge {
            size: buf.len() as u64,
            limit: max_bytes,
        });
    }
    String::from_utf8(buf).map_err(|_| ReadConfigError::NotUtf8)
}

/// Default of `control.reload_max_bytes`: 4 MiB.
pub const DEFAULT_RELOAD_MAX_BYTES: u64 = 4 << 20;

/// `[control]`: the control thread, the management API and the Prometheus exporter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlConfig {
    /// Management API (HTTP/JSON) address.
    pub api_listen: SocketAddr,
    /// Bearer token of the management API from the file (`LONGHAUL_API_TOKEN` in the
    /// environment overrides it; see `longhaul_control::api::resolve_token`). Never empty.
    pub api_token: Option<String>,
    /// Prometheus `/metrics` address; `None` when `metrics_listen = "off"`.
    pub metrics_listen: Option<SocketAddr>,
    /// How often counters are collected from the workers and published, ms.
    pub stats_interval_ms: u64,
    /// Replay only: virtual delay from a punt to its commands taking effect, ns.
    pub control_latency_ns: u64,
    /// Capacity of each worker's command ring (control -> worker), entries.
    pub command_ring: usize,
    /// Capacity of each worker's punt ring (worker -> control), entries.
    pub punt_ring: usize,
    /// Directories `POST /reload {"path": ...}` may read a config from (absolute); empty: the
    /// directory of the config the process started with.
    pub reload_dirs: Vec<std::path::PathBuf>,
    /// Largest config file a reload reads, bytes (a larger one is refused before it is read).
    pub reload_max_bytes: u64,
    /// Host names (besides the listen address and `localhost`) a request to the API may name in
    /// its `Host` header when no token is set.
    pub api_hosts: Vec<String>,
}

impl ControlConfig {
    /// True when `api_listen` is not a loopback address: the API then needs a token (from the
    /// file or the environment), and refuses to start without one.
    pub fn api_needs_token(&self) -> bool {
        !self.api_listen.ip().is_loopback()
    }
}

impl Default for ControlConfig {
    /// The defaults documented in docs/config.md (what a config without `[control]` gets).
    fn default() -> Self {
        ControlConfig {
            api_listen: SocketAddr::from(([127, 0, 0, 1], 9410)),
            api_token: None,
            metrics_listen: Some(SocketAddr::from(([127, 0, 0, 1], 9411))),
            stats_interval_ms: 1000,
            control_latency_ns: 0,
            command_ring: 4096,
            punt_ring: 4096,
            reload_dirs: Vec::new(),
            reload_max_bytes: DEFAULT_RELOAD_MAX_BYTES,
            api_hosts: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// Class from the IP DSCP (through `dscp_map`).
    Dscp,
    /// Class from the 802.1Q PCP (through `pcp_map`).
    Pcp,
    /// Everything in `default_class`.
    None,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerKind {
    /// Highest class first.
    Strict,
    /// Weighted round robin over classes, in packets (`weights`).
    Wrr,
    /// Deficit round robin over classes, in bytes (`weights` x `drr_quantum_bytes`).
    Drr,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EcnConfig {
    /// Queue depth (bytes) below which nothing is marked.
    pub kmin_bytes: u64,
    /// Queue depth (bytes) at and above which everything ECN-capable is marked.
    pub kmax_bytes: u64,
    /// Marking probability reached at Kmax (linear from 0 at Kmin).
    pub pmax: f64,
    /// Where packets are marked (`at = "dequeue"`: on the depth a packet leaves behind, as the
    /// HPCC simulator; `"enqueue"`, the default: on the depth it finds).
    pub at_dequeue: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClassConfig {
    /// Tail-drop limit of this class's queue on each egress port, bytes.
    pub limit_bytes: u64,
    /// PFC protects this class: never tail-dropped while headroom lasts.
    pub lossless: bool,
    pub ecn: Option<EcnConfig>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct QosConfig {
    pub trust: Trust,
    pub default_class: u8,
    /// DSCP (index) -> class.
    pub dscp_map: [u8; 64],
    /// PCP (index) -> class.
    pub pcp_map: [u8; 8],
    pub scheduler: SchedulerKind,
    /// Classes served with strict priority above the weighted ones (highest class first); with
    /// `scheduler = "strict"` every class is strict.
    pub strict_classes: Vec<u8>,
    /// WRR/DRR weight per class (1..=255; 0 = class not served by the weighted scheduler).
    pub weights: [u32; 8],
    /// DRR quantum per unit of weight, bytes.
    pub drr_quantum_bytes: u32,
    /// Per-class settings, indexed by class 0..8.
    pub classes: [ClassConfig; 8],
}

#[derive(Clone, Debug, PartialEq)]
pub struct PfcConfig {
    pub enabled: bool,
    /// Bytes buffered from one ingress port in one lossless class at which XOFF is sent.
    pub xoff_bytes: u64,
    /// ... at or below which XON (pause time 0) is sent.
    pub xon_bytes: u64,
    /// Bytes accepted above XOFF (in flight on the link while the pause takes effect).
    pub headroom_bytes: u64,
    /// Pause time carried by XOFF frames, in quanta (512 bit times).
    pub pause_quanta: u16,
    /// While XOFF holds, the frame is re-sent this often (ns) so the upstream stays paused.
    pub refresh_ns: u64,
    /// Dynamic thresholds (`dynamic_alpha`): XOFF once a (port, class) holds this share of the
    /// free shared buffer (capped at `xoff_bytes`), XON once it is `xoff_bytes - xon_bytes`
    /// below that; `None`: the static `xoff_bytes` / `xon_bytes`.
    pub dynamic_alpha: Option<f64>,
}

/// What to do with an input anomaly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Count and drop.
    Drop,
    /// Count and keep processing: route it if its L3 header is usable, else switch it at L2 by
    /// destination MAC.
    Forward,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ParserConfig {
    /// Most VLAN tags accepted (0..=2); more is the `vlan_stack` anomaly.
    pub max_vlan_tags: u8,
    pub verify_ipv4_checksum: bool,
    pub on_bad_length: Policy,
    pub on_unknown_ethertype: Policy,
    pub on_vlan_stack: Policy,
    pub on_ipv4_options: Policy,
    pub on_ipv4_fragment: Policy,
    pub on_bad_ip_checksum: Policy,
}

#[derive(Clone, Debug, PartialEq)]
pub struct L2Entry {
    pub mac: [u8; 6],
    pub port: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpPrefix {
    /// `addr` is the address as a host-order integer (`u32::from(Ipv4Addr)`); host bits are 0.
    V4 { addr: u32, len: u8 },
    /// `addr` is `u128::from(Ipv6Addr)`; host bits are 0.
    V6 { addr: u128, len: u8 },
}

/// The most members an ECMP group (`[[routes]] next_hops`) may have.
pub const MAX_ECMP_MEMBERS: usize = 16;

#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    pub prefix: IpPrefix,
    /// The next hops, in file order: one (`port` with `next_hop_mac` / `next_hop`), or the
    /// members of an ECMP group (`next_hops`, 1 ..= [`MAX_ECMP_MEMBERS`], distinct). A packet
    /// takes the member its 5-tuple's hash selects (`longhaul_dataplane::asic::ecmp`).
    pub hops: Vec<RouteHop>,
}

impl Route {
    /// More than one next hop: an ECMP group (a `next_hops` of one member is a plain route).
    pub fn is_group(&self) -> bool {
        self.hops.len() > 1
    }
}

/// One next hop of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouteHop {
    /// Egress port id.
    pub port: u16,
    /// Destination MAC written into forwarded frames (the next hop's), when given.
    pub next_hop_mac: [u8; 6],
    /// `next_hop`: the gateway's address (IPv4-mapped for IPv4), whose MAC the port resolves
    /// by ARP / neighbour discovery; `None` with `next_hop_mac`.
    pub next_hop: Option<u128>,
}

impl IpPrefix {
    /// Whether `ip` (IPv4-mapped for IPv4) is in the prefix.
    pub fn contains_mapped(&self, ip: u128) -> bool {
        match *self {
            IpPrefix::V4 { addr, len } => unmap_v4(ip).is_some_and(|a| a & v4_mask(len) == addr),
            IpPrefix::V6 { addr, len } => unmap_v4(ip).is_none() && ip & v6_mask(len) == addr,
        }
    }
}
