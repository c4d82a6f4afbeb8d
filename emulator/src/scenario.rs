//! Scenario files (`scenarios/*.toml`): hosts, switches (each a longhaul config), links, flows,
//! and the host models' parameters. Parsed and fully validated before anything runs, with the
//! same `file: key: what is wrong (line L, column C)` errors as a config; each switch's config is
//! loaded with the registry, so its own errors name its file.
//!
//! ```toml
//! [emulation]
//! duration_us = 2000
//! [[hosts]]
//! name = "h0"
//! ip = "10.0.0.1"
//! mac = "02:00:00:00:10:01"
//! rate_gbps = 100
//! [[switches]]
//! name = "tor"
//! config = "tor.toml"          # relative to the scenario file
//! [[links]]
//! a = "h0"                     # a host, or SWITCH:PORT
//! b = "tor:p0"
//! rate_gbps = 100
//! delay_ns = 1000
//! [[flows]]
//! src = "h0"
//! dst = "h1"
//! size_bytes = 100000
//! ```

use crate::collective::{CollectiveKind, CollectiveSpec};
use crate::host::dcqcn::DcqcnParams;
use crate::host::swift::SwiftParams;
use crate::host::timely::TimelyParams;
use crate::traffic::{generate, Cdf, Rng};
use longhaul_control::config::{span, Config, ConfigError, SectionConfig, Validator, S};
use longhaul_dataplane::time::Nanos;
use longhaul_runtime::{MechanismSet, Registry};
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A validated scenario.
#[derive(Debug)]
pub struct Scenario {
    pub file: PathBuf,
    pub params: Params,
    pub hosts: Vec<HostSpec>,
    pub switches: Vec<SwitchSpec>,
    pub links: Vec<LinkSpec>,
    /// Explicit flows (`[[flows]]`).
    pub flows: Vec<FlowSpec>,
    /// Generated traffic (`[[traffic]]`), expanded with the seed by [`Scenario::all_flows`].
    pub traffic: Vec<TrafficSpec>,
    /// Collective operations (`[[collectives]]`), expanded by [`Scenario::all_flows`] after
    /// the rest ([`crate::collective`]).
    pub collectives: Vec<CollectiveSpec>,
    /// Links that fail for a while (`[[link_failures]]`).
    pub link_failures: Vec<LinkFailure>,
}

/// `[[link_failures]]`: link `link` (an index into [`Scenario::links`]) loses every frame put
/// on it, both ways, from `from_ns` until `until_ns` (`None`: to the end of the run). The
/// switches at its two ends see their port go down and come back (`Switch::set_link`: their
/// ECMP groups stop choosing it); no other switch is told (no routing protocol), and a
/// mechanism's own paths (Themis's spraying) must find out for themselves (paper 002 section
/// 4.4). Frames already on the link when it fails arrive.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkFailure {
    pub link: usize,
    pub from_ns: Nanos,
    pub until_ns: Option<Nanos>,
}

/// `[[traffic]]`: Poisson arrivals at a load, sizes from a CDF (see [`crate::traffic`]).
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficSpec {
    pub sources: Vec<usize>,
    pub destinations: Vec<usize>,
    /// Offered load, as a fraction of each source's NIC rate.
    pub load: f64,
    pub cdf: Cdf,
    pub start_ns: Nanos,
    pub stop_ns: Nanos,
}

impl Scenario {
    /// Every flow: the explicit ones, then the generated ones (drawn from the seed), in start
    /// order within each group.
    pub fn all_flows(&self) -> Vec<FlowSpec> {
        let mut out = self.flows.clone();
        let mut rng = Rng::new(self.params.seed ^ 0x0074_7261_6666_6963);
        for t in &self.traffic {
            let rates: Vec<u64> = t.sources.iter().map(|&h| self.hosts[h].rate_bps).collect();
            for (src, dst, size, start) in generate(
                &t.sources,
                &rates,
                &t.destinations,
                t.load,
                &t.cdf,
                (t.start_ns, t.stop_ns),
                &mut rng,
            ) {
                out.push(FlowSpec {
                    src,
                    dst,
                    size_bytes: size,
                    start_ns: start,
                    after: Vec::new(),
                });
            }
        }
        for c in &self.collectives {
            let first = out.len();
            out.extend(crate::collective::expand(c, first));
        }
        out
    }

    /// Each collective's flows: its range of indices in [`Scenario::all_flows`].
    pub fn collective_ranges(&self) -> Vec<std::ops::Range<usize>> {
        let mut end = self.all_flows().len();
        let mut out: Vec<_> = self
            .collectives
            .iter()
            .rev()
            .map(|c| {
                let r = end - c.flow_count()..end;
                end = r.start;
                r
            })
            .collect();
        out.reverse();
        out
    }
}

/// `[emulation]`: the run and the host models' parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// Stop at this virtual time (flows not done by then are reported unfinished).
    pub duration_ns: Nanos,
    /// Seed of every random choice (link loss).
    pub seed: u64,
    /// RDMA payload bytes per packet (the path MTU the RNICs use).
    pub mtu: u32,
    /// The receiver acknowledges every `ack_interval` in-order packets (and the last one).
    pub ack_interval: u32,
    /// The RNIC's TX window: packets a QP may have unacknowledged (0: no limit).
    pub window: u32,
    /// Each QP's TX window is also a BDP, as the HPCC simulator's `HAS_WIN 1`: the network's
    /// largest (`bdp_window = "max"`, its `GLOBAL_T 1`) or the QP's path's (`"pair"`); `None`
    /// (the default): no such window.
    pub bdp_window: Option<BdpWindow>,
    /// That window scaled by the QP's rate over the line rate, at least one packet (the HPCC
    /// simulator's `VAR_WIN 1`, `RdmaQueuePair::GetWin`); `var_window = true`.
    pub var_window: bool,
    /// The responder keeps out-of-order packets (`responder = "selective"`, RNIC-SR) instead
    /// of discarding them (`"go-back-n"`, the default).
    pub keep_ooo: bool,
    /// The requester sends the NAKed packet and the last one it sent again and goes on
    /// (`requester = "selective"`, RNIC-SR) instead of going back to the NAKed one
    /// (`"go-back-n"`, the default).
    pub selective_repeat: bool,
    /// Sender retransmission timeout (go back to the oldest unacknowledged PSN).
    pub rto_ns: Nanos,
    /// Receiver: a NAK for the same expected PSN is repeated at most this often.
    pub nak_interval_ns: Nanos,
    /// Receiver (DCQCN NP): at most one CNP per QP per interval.
    pub cnp_interval_ns: Nanos,
    /// DSCP of data packets (ECT(0)), and of ACK/NAK/CNP.
    pub data_dscp: u8,
    pub control_dscp: u8,
    /// The PFC priority of data packets: a pause frame for it stops the hosts' data.
    pub data_priority: u8,
    /// A pause holds until a resume (`pfc_pause = "until-resume"`: the HPCC simulator's
    /// `QbbNetDevice`) instead of for the time it carries (`"time"`, 802.1Qbb, the default).
    pub pause_until_resume: bool,
    /// DCQCN at the senders (`cc = "dcqcn"`, the default).
    pub dcqcn: Option<DcqcnParams>,
    /// TIMELY at the senders (`cc = "timely"`).
    pub timely: Option<TimelyParams>,
    /// Swift at the senders (`cc = "swift"`); none of the three: line rate, no reaction.
    pub swift: Option<SwiftParams>,
    /// Mechanisms whose host-side half runs on every host (e.g. a daemon reporting QPs), with
    /// their parameters.
    pub host_agents: Vec<HostAgentSpec>,
    /// `connect`: how a flow's two hosts set up its QPs before the first data packet.
    pub connect: Connect,
    /// The time series (`timeseries.csv`) are sampled this often; `None`: not recorded.
    pub sample_ns: Option<Nanos>,
}

/// A host agent the scenario runs (`[emulation] host_agents`) and its parameters
/// (`[emulation.agents.NAME]`, validated by its mechanism; `None`: the agent's defaults).
#[derive(Clone, Debug)]
pub struct HostAgentSpec {
    pub name: String,
    pub params: Option<Arc<dyn SectionConfig>>,
}

impl PartialEq for HostAgentSpec {
    fn eq(&self, o: &Self) -> bool {
        self.name == o.name
            && match (&self.params, &o.params) {
                (None, None) => true,
                (Some(a), Some(b)) => a.eq_dyn(b.as_ref()),
                _ => false,
            }
    }
}

/// Connection setup before a flow's QPs exist (`[emulation] connect`, `connect_from`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Connect {
    /// None: both QPs exist from the flow's start (what the papers' simulators do).
    #[default]
    None,
    /// A TCP three-way handshake and a QP-info exchange (the out-of-band setup of
    /// perftest / rdma_cm-style applications) from the flow's start; the QPs are created when
    /// it completes. `by_receiver`: the data receiver opens the connection (else the sender).
    Tcp { by_receiver: bool },
}

#[derive(Clone, Debug, PartialEq)]
pub struct HostSpec {
    pub name: String,
    pub ip: Ipv4Addr,
    pub mac: [u8; 6],
    pub rate_bps: u64,
    /// The datacenter it is in (`dc`), to tell intra- from inter-DC flows in the outputs.
    pub dc: Option<String>,
}

#[derive(Debug)]
pub struct SwitchSpec {
    pub name: String,
    pub config_path: PathBuf,
    pub config: Config,
}

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum End {
    Host(usize),
    /// Switch index, port index.
    Switch(usize, usize),
}

#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub a: End,
    pub b: End,
    pub rate_bps: u64,
    pub delay_ns: Nanos,
    /// Probability each frame is lost, each direction.
    pub loss: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src: usize,
    pub dst: usize,
    pub size_bytes: u64,
    pub start_ns: Nanos,
    /// Flows (indices in [`Scenario::all_flows`]) whose data must all have arrived before
    /// this one starts (a collective's step; empty: it starts at `start_ns`).
    pub after: Vec<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    emulation: Option<RawEmulation>,
    hosts: Option<Vec<S<RawHost>>>,
    switches: Option<Vec<S<RawSwitch>>>,
    links: Option<Vec<S<RawLink>>>,
    flows: Option<Vec<S<RawFlow>>>,
    traffic: Option<Vec<S<RawTraffic>>>,
    collectives: Option<Vec<S<RawCollective>>>,
    link_failures: Option<Vec<S<RawLinkFailure>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCollective {
    name: Option<S<String>>,
    kind: Option<S<String>>,
    ranks: Option<S<Vec<S<String>>>>,
    bytes: Option<S<i64>>,
    start_us: Option<S<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLinkFailure {
    link: Option<S<String>>,
    at_us: Option<S<f64>>,
    until_us: Option<S<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTraffic {
    sources: Option<S<Vec<S<String>>>>,
    destinations: Option<S<Vec<S<String>>>>,
    load: Option<S<f64>>,
    cdf: Option<S<String>>,
    start_us: Option<S<f64>>,
    stop_us: Option<S<f64>>,
}

/// Which BDP a QP's window is (`[emulation] bdp_window`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BdpWindow {
    /// The network's largest BDP, for every QP.
    Max,
    /// The QP's own path's BDP.
    Pair,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawEmulation {
    duration_us: Option<S<f64>>,
    seed: Option<S<i64>>,
    mtu: Option<S<i64>>,
    ack_interval: Option<S<i64>>,
    window: Option<S<i64>>,
    bdp_window: Option<S<String>>,
    var_window: Option<S<bool>>,
    responder: Option<S<String>>,
    requester: Option<S<String>>,
    pfc_pause: Option<S<String>>,
    rto_us: Option<S<f64>>,
    nak_interval_us: Option<S<f64>>,
    cnp_interval_us: Option<S<f64>>,
    data_dscp: Option<S<i64>>,
    control_dscp: Option<S<i64>>,
    data_priority: Option<S<i64>>,
    host_agents: Option<S<Vec<S<String>>>>,
    /// `[emulation.agents.NAME]`: each agent's parameters (read and validated by its mechanism).
    agents: Option<BTreeMap<String, IgnoredAny>>,
    sample_us: Option<S<f64>>,
    connect: Option<S<String>>,
    connect_from: Option<S<String>>,
    cc: Option<S<String>>,
    dcqcn: Option<RawDcqcn>,
    timely: Option<RawTimely>,
    swift: Option<RawSwift>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSwift {
    ai: Option<S<f64>>,
    beta: Option<S<f64>>,
    max_mdf: Option<S<f64>>,
    base_target_us: Option<S<f64>>,
    hop_delay_us: Option<S<f64>>,
    target_propagation: Option<S<bool>>,
    fs_range_us: Option<S<f64>>,
    max_cwnd: Option<S<f64>>,
    init_cwnd: Option<S<f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTimely {
    alpha: Option<S<f64>>,
    beta: Option<S<f64>>,
    t_low_us: Option<S<f64>>,
    t_high_us: Option<S<f64>>,
    min_rtt_us: Option<S<f64>>,
    delta_mbps: Option<S<f64>>,
    hai_mbps: Option<S<f64>>,
    min_rate_mbps: Option<S<f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDcqcn {
    enabled: Option<S<bool>>,
    g: Option<S<f64>>,
    alpha_resume_interval_us: Option<S<f64>>,
    rate_decrease_interval_us: Option<S<f64>>,
    rp_timer_us: Option<S<f64>>,
    fast_recovery_times: Option<S<i64>>,
    rate_ai_mbps: Option<S<f64>>,
    rate_hai_mbps: Option<S<f64>>,
    min_rate_mbps: Option<S<f64>>,
    rate_on_first_cnp: Option<S<f64>>,
    first_decrease: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: Option<S<String>>,
    ip: Option<S<String>>,
    mac: Option<S<String>>,
    rate_gbps: Option<S<f64>>,
    dc: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    name: Option<S<String>>,
    config: Option<S<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    a: Option<S<String>>,
    b: Option<S<String>>,
    rate_gbps: Option<S<f64>>,
    delay_ns: Option<S<i64>>,
    loss: Option<S<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    src: Option<S<String>>,
    dst: Option<S<String>>,
    size_bytes: Option<S<i64>>,
    start_us: Option<S<f64>>,
}

const MAX_US: f64 = 60_000_000.0;

impl Scenario {
    /// Reads and validates the scenario at `path`; switch configs are parsed with the registry's
    /// sections, host agents looked up in it. Returns every error found (a syntax or type error
    /// alone).
    pub fn load(path: &Path, registry: &Registry) -> Result<Scenario, Vec<ConfigError>> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            vec![ConfigError {
                file: path.to_path_buf(),
                key: String::new(),
                msg: format!("cannot read the file: {e}"),
            }]
        })?;
        Self::parse(&text, path, registry)
    }

    /// Like [`Scenario::load`], from text (`path` names the file and is where relative switch
    /// config paths start).
    pub fn parse(
        text: &str,
        path: &Path,
        registry: &Registry,
    ) -> Result<Scenario, Vec<ConfigError>> {
        let mut v = Validator::new(path, text);
        let raw: RawScenario = v.document().map_err(|e| vec![e])?;
        let emulation = raw.emulation.unwrap_or_default();
        let mut host_agents: Vec<HostAgentSpec> = Vec::new();
        let with_agents = || {
            let have: Vec<&str> = registry
                .mechanisms()
                .iter()
                .filter(|m| m.host_agent().is_some())
                .map(|m| m.name())
                .collect();
            have.join(", ")
        };
        for (i, a) in emulation
            .host_agents
            .iter()
            .flat_map(|l| l.get_ref())
            .enumerate()
        {
            let name = a.get_ref();
            if registry.get(name).and_then(|m| m.host_agent()).is_some() {
                host_agents.push(HostAgentSpec {
                    name: name.clone(),
                    params: None,
                });
            } else {
                v.err(
                    format!("emulation.host_agents[{i}]"),
                    span(a),
                    format!(
                        "no mechanism '{name}' with a host-side agent (these have one: {})",
                        with_agents()
                    ),
                );
            }
        }
        for name in emulation.agents.iter().flat_map(|t| t.keys()) {
            let key = format!("emulation.agents.{name}");
            let Some(m) = registry.get(name).filter(|m| m.host_agent().is_some()) else {
                v.err(
                    key,
                    None,
                    format!(
                        "no mechanism '{name}' with a host-side agent (these have one: {})",
                        with_agents()
                    ),
                );
                continue;
            };
            let Some(table) = m.host_agent_params() else {
                v.err(
                    key,
                    None,
                    format!("the '{name}' host agent takes no parameters"),
                );
                continue;
            };
            let Some(spec) = host_agents.iter_mut().find(|a| &a.name == name) else {
                v.err(
                    key,
                    None,
                    format!("'{name}' is not in emulation.host_agents: its agent does not run"),
                );
                continue;
            };
            spec.params = table
                .validate(&mut v, &["emulation", "agents", name])
                .map_err(|e| vec![e])?;
        }
        let mut params = params(&mut v, emulation);
        params.host_agents = host_agents;
        let mut hosts: Vec<HostSpec> = Vec::new();
        for (i, h) in raw.hosts.iter().flatten().enumerate() {
            let t = span(h);
            let h = h.get_ref();
            let k = |s: &str| format!("hosts[{i}].{s}");
            let name = v
                .required(&k("name"), &h.name, &t)
                .map(|n| n.get_ref().clone());
            let ip = v.required(&k("ip"), &h.ip, &t).and_then(|s| {
                s.get_ref()
                    .parse::<Ipv4Addr>()
                    .map_err(|_| {
                        v.err(
                            k("ip"),
                            span(s),
                            format!("'{}' is not an IPv4 address", s.get_ref()),
                        )
                    })
                    .ok()
            });
            let mac = v
                .required(&k("mac"), &h.mac, &t)
                .map(|m| v.mac(&k("mac"), m, true));
            let rate = rate(&mut v, &k("rate_gbps"), &h.rate_gbps, &t);
            if let Some(n) = &name {
                if hosts.iter().any(|o| &o.name == n) {
                    v.err(
                        k("name"),
                        h.name.as_ref().and_then(span),
                        format!("host '{n}' defined twice"),
                    );
                }
            }
            if let (Some(name), Some(ip), Some(mac)) = (name, ip, mac) {
                hosts.push(HostSpec {
                    name,
                    ip,
                    mac,
                    rate_bps: rate,
                    dc: h.dc.as_ref().map(|d| d.get_ref().clone()),
                });
            }
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut switches: Vec<SwitchSpec> = Vec::new();
        let mut sub_errors = Vec::new();
        for (i, s) in raw.switches.iter().flatten().enumerate() {
            let t = span(s);
            let s = s.get_ref();
            let k = |x: &str| format!("switches[{i}].{x}");
            let name = v
                .required(&k("name"), &s.name, &t)
                .map(|n| n.get_ref().clone());
            if let Some(n) = &name {
                if hosts.iter().any(|h| &h.name == n) || switches.iter().any(|o| &o.name == n) {
                    v.err(
                        k("name"),
                        s.name.as_ref().and_then(span),
                        format!("'{n}' names another host or switch"),
                    );
                }
            }
            let Some(c) = v.required(&k("config"), &s.config, &t) else {
                continue;
            };
            let cpath = dir.join(c.get_ref());
            match Config::load_all_with(&cpath, registry) {
                Ok(config) => {
                    if let Some(name) = name {
                        switches.push(SwitchSpec {
                            name,
                            config_path: cpath,
                            config,
                        });
                    }
                }
                Err(errs) => {
                    if errs.iter().all(|e| e.key.is_empty()) {
                        v.err(k("config"), span(c), errs[0].msg.clone());
                    } else {
                        sub_errors.extend(errs);
                    }
                }
            }
        }
        let mut links: Vec<LinkSpec> = Vec::new();
        let mut used: Vec<End> = Vec::new();
        for (i, l) in raw.links.iter().flatten().enumerate() {
            let t = span(l);
            let l = l.get_ref();
            let k = |x: &str| format!("links[{i}].{x}");
            let mut end = |v: &mut Validator, key: String, e: &Option<S<String>>| {
                let e = v.required(&key, e, &t)?;
                let r = resolve_end(e.get_ref(), &hosts, &switches);
                match r {
                    Ok(end) if used.contains(&end) => {
                        v.err(
                            key,
                            span(e),
                            format!("'{}' is already connected by another link", e.get_ref()),
                        );
                        None
                    }
                    Ok(end) => {
                        used.push(end);
                        Some(end)
                    }
                    Err(m) => {
                        v.err(key, span(e), m);
                        None
                    }
                }
            };
            let a = end(&mut v, k("a"), &l.a);
            let b = end(&mut v, k("b"), &l.b);
            let rate_bps = rate(&mut v, &k("rate_gbps"), &l.rate_gbps, &t);
            let delay_ns = v.int_or(&k("delay_ns"), &l.delay_ns, 1000, 0, 10_000_000_000) as Nanos;
            let loss = match &l.loss {
                None => 0.0,
                Some(p) if (0.0..1.0).contains(p.get_ref()) => *p.get_ref(),
                Some(p) => {
                    v.err(
                        k("loss"),
                        span(p),
                        format!("{} is out of range: must be 0 to less than 1", p.get_ref()),
                    );
                    0.0
                }
            };
            if let (Some(a), Some(b)) = (a, b) {
                links.push(LinkSpec {
                    a,
                    b,
                    rate_bps,
                    delay_ns,
                    loss,
                });
            }
        }
        for (i, h) in hosts.iter().enumerate() {
            if !used.contains(&End::Host(i)) {
                v.err(
                    "hosts",
                    None,
                    format!(
                        "host '{}' is not connected: add a [[links]] entry with a = \"{}\"",
                        h.name, h.name
                    ),
                );
            }
        }
        let mut flows: Vec<FlowSpec> = Vec::new();
        for (i, f) in raw.flows.iter().flatten().enumerate() {
            let t = span(f);
            let f = f.get_ref();
            let k = |x: &str| format!("flows[{i}].{x}");
            let host = |v: &mut Validator, key: String, h: &Option<S<String>>| {
                let h = v.required(&key, h, &t)?;
                let found = hosts.iter().position(|x| &x.name == h.get_ref());
                if found.is_none() {
                    let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
                    v.err(
                        key,
                        span(h),
                        format!("no host '{}' (hosts: {})", h.get_ref(), names.join(", ")),
                    );
                }
                found
            };
            let src = host(&mut v, k("src"), &f.src);
            let dst = host(&mut v, k("dst"), &f.dst);
            if src.is_some() && src == dst {
                v.err(
                    k("dst"),
                    f.dst.as_ref().and_then(span),
                    "a flow needs two different hosts",
                );
            }
            let size = v
                .required(&k("size_bytes"), &f.size_bytes, &t)
                .and_then(|s| v.int(&k("size_bytes"), s, 1, (params.mtu as i64) << 22));
            let start_ns = us(&mut v, &k("start_us"), &f.start_us, 0.0);
            if let (Some(src), Some(dst), Some(size)) = (src, dst, size) {
                flows.push(FlowSpec {
                    src,
                    dst,
                    size_bytes: size as u64,
                    start_ns,
                    after: Vec::new(),
                });
            }
        }
        let mut traffic = Vec::new();
        for (i, t) in raw.traffic.iter().flatten().enumerate() {
            let table = span(t);
            let t = t.get_ref();
            let k = |x: &str| format!("traffic[{i}].{x}");
            let names = |v: &mut Validator, key: String, l: &Option<S<Vec<S<String>>>>| {
                let mut out = Vec::new();
                let Some(l) = v.required(&key, l, &table) else {
                    return out;
                };
                if l.get_ref().is_empty() {
                    v.err(&key, span(l), "must name at least one host");
                }
                for (j, h) in l.get_ref().iter().enumerate() {
                    match hosts.iter().position(|x| &x.name == h.get_ref()) {
                        Some(x) if !out.contains(&x) => out.push(x),
                        Some(_) => v.err(format!("{key}[{j}]"), span(h), "host listed twice"),
                        None => v.err(
                            format!("{key}[{j}]"),
                            span(h),
                            format!("no host '{}'", h.get_ref()),
                        ),
                    }
                }
                out
            };
            let sources = names(&mut v, k("sources"), &t.sources);
            let destinations = names(&mut v, k("destinations"), &t.destinations);
            let load = match v.required(&k("load"), &t.load, &table) {
                Some(l) if *l.get_ref() > 0.0 && *l.get_ref() <= 1.0 => *l.get_ref(),
                Some(l) => {
                    v.err(
                        k("load"),
                        span(l),
                        format!("{} is out of range: more than 0, at most 1", l.get_ref()),
                    );
                    0.5
                }
                None => 0.5,
            };
            let cdf = v.required(&k("cdf"), &t.cdf, &table).and_then(|c| {
                let name = c.get_ref();
                let r = match Cdf::builtin(name) {
                    Some(cdf) => Ok(cdf),
                    None => std::fs::read_to_string(dir.join(name))
                        .map_err(|e| format!("'{name}' is neither a shipped CDF (websearch, hadoop) nor a readable file: {e}"))
                        .and_then(|text| Cdf::parse(&text).map_err(|e| format!("{name}: {e}"))),
                };
                r.map_err(|m| v.err(k("cdf"), span(c), m)).ok()
            });
            let start_ns = us(&mut v, &k("start_us"), &t.start_us, 0.0);
            let stop_ns = match &t.stop_us {
                None => params.duration_ns,
                Some(_) => us(&mut v, &k("stop_us"), &t.stop_us, 0.0),
            };
            if stop_ns <= start_ns {
                v.err(
                    k("stop_us"),
                    t.stop_us.as_ref().and_then(span),
                    "must be after start_us",
                );
            }
            if sources.len() == 1 && destinations == sources {
                v.err(
                    k("destinations"),
                    None,
                    "a source needs another host to send to",
                );
            }
            if let Some(cdf) = cdf {
                if cdf.sample(1.0) > (params.mtu as f64) * (1u64 << 22) as f64 {
                    v.err(
                        k("cdf"),
                        None,
                        "its largest flow is too large for 24-bit PSNs at this mtu",
                    );
                }
                traffic.push(TrafficSpec {
                    sources,
                    destinations,
                    load,
                    cdf,
                    start_ns,
                    stop_ns,
                });
            }
        }
        let mut collectives: Vec<CollectiveSpec> = Vec::new();
        for (i, c) in raw.collectives.iter().flatten().enumerate() {
            let table = span(c);
            let c = c.get_ref();
            let k = |x: &str| format!("collectives[{i}].{x}");
            let kind = v.required(&k("kind"), &c.kind, &table).and_then(|x| {
                let kind = CollectiveKind::parse(x.get_ref());
                if kind.is_none() {
                    v.err(
                        k("kind"),
                        span(x),
                        format!(
                            "'{}': must be \"allreduce\" (ring) or \"alltoall\"",
                            x.get_ref()
                        ),
                    );
                }
                kind
            });
            let mut ranks = Vec::new();
            if let Some(l) = v.required(&k("ranks"), &c.ranks, &table) {
                if l.get_ref().len() < 2 {
                    v.err(k("ranks"), span(l), "a collective needs at least two ranks");
                }
                for (j, h) in l.get_ref().iter().enumerate() {
                    match hosts.iter().position(|x| &x.name == h.get_ref()) {
                        Some(x) if !ranks.contains(&x) => ranks.push(x),
                        Some(_) => {
                            v.err(format!("{}[{j}]", k("ranks")), span(h), "host listed twice")
                        }
                        None => v.err(
                            format!("{}[{j}]", k("ranks")),
                            span(h),
                            format!("no host '{}'", h.get_ref()),
                        ),
                    }
                }
            }
            let n = ranks.len().max(1) as i64;
            let bytes = v
                .required(&k("bytes"), &c.bytes, &table)
                .and_then(|b| v.int(&k("bytes"), b, n, ((params.mtu as i64) << 22) * n));
            let start_ns = us(&mut v, &k("start_us"), &c.start_us, 0.0);
            let name = c
                .name
                .as_ref()
                .map_or_else(|| format!("collective{i}"), |x| x.get_ref().clone());
            if collectives.iter().any(|x| x.name == name) {
                v.err(
                    k("name"),
                    c.name.as_ref().and_then(span),
                    format!("'{name}' is already a collective's name"),
                );
            }
            if let (Some(kind), Some(bytes)) = (kind, bytes) {
                collectives.push(CollectiveSpec {
                    name,
                    kind,
                    ranks,
                    bytes: bytes as u64,
                    start_ns,
                });
            }
        }
        if !collectives.is_empty() && params.connect != Connect::None {
            v.err(
                "emulation.connect",
                None,
                "collectives start their steps when data arrives: use connect = \"none\" with [[collectives]]",
            );
        }
        let mut link_failures = Vec::new();
        for (i, f) in raw.link_failures.iter().flatten().enumerate() {
            let table = span(f);
            let f = f.get_ref();
            let k = |x: &str| format!("link_failures[{i}].{x}");
            let link = v.required(&k("link"), &f.link, &table).and_then(|e| {
                let found = resolve_end(e.get_ref(), &hosts, &switches).and_then(|end| {
                    links
                        .iter()
                        .position(|l| l.a == end || l.b == end)
                        .ok_or_else(|| format!("'{}' is not an end of any link", e.get_ref()))
                });
                found.map_err(|m| v.err(k("link"), span(e), m)).ok()
            });
            let from_ns = us(&mut v, &k("at_us"), &f.at_us, 0.0);
            let until_ns = f
                .until_us
                .as_ref()
                .map(|_| us(&mut v, &k("until_us"), &f.until_us, 0.0));
            if until_ns.is_some_and(|u| u <= from_ns) {
                v.err(
                    k("until_us"),
                    f.until_us.as_ref().and_then(span),
                    "must be after at_us",
                );
            }
            if let Some(link) = link {
                link_failures.push(LinkFailure {
                    link,
                    from_ns,
                    until_ns,
                });
            }
        }
        let mut errors = v.into_errors();
        errors.extend(sub_errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Scenario {
            file: path.to_path_buf(),
            params,
            hosts,
            switches,
            links,
            flows,
            traffic,
            collectives,
            link_failures,
        })
    }
}

fn resolve_end(s: &str, hosts: &[HostSpec], switches: &[SwitchSpec]) -> Result<End, String> {
    if let Some((sw, port)) = s.split_once(':') {
        let Some(i) = switches.iter().position(|x| x.name == sw) else {
            let names: Vec<&str> = switches.iter().map(|s| s.name.as_str()).collect();
            return Err(format!("no switch '{sw}' (switches: {})", names.join(", ")));
        };
        let ports = &switches[i].config.ports;
        return match ports.iter().position(|p| p.name == port) {
            Some(p) => Ok(End::Switch(i, p)),
            None => {
                let names: Vec<&str> = ports.iter().map(|p| p.name.as_str()).collect();
                Err(format!(
                    "switch '{sw}' has no port '{port}' (ports: {})",
                    names.join(", ")
                ))
            }
        };
    }
    match hosts.iter().position(|h| h.name == s) {
        Some(h) => Ok(End::Host(h)),
        None => Err(format!(
            "no host '{s}' (a link end is a host name or SWITCH:PORT)"
        )),
    }
}

fn rate(
    v: &mut Validator,
    key: &str,
    r: &Option<S<f64>>,
    table: &Option<std::ops::Range<usize>>,
) -> u64 {
    match v.required(key, r, table) {
        Some(g) if *g.get_ref() > 0.0 && *g.get_ref() <= 1600.0 => {
            (*g.get_ref() * 1e9).round() as u64
        }
        Some(g) => {
            v.err(
                key,
                span(g),
                format!(
                    "{} is out of range: must be more than 0 and at most 1600",
                    g.get_ref()
                ),
            );
            1
        }
        None => 1,
    }
}

/// The responder's and the requester's loss recovery: `"selective"` (RNIC-SR) or not.
const RECOVERY: [(&str, bool); 2] = [("go-back-n", false), ("selective", true)];

fn us(v: &mut Validator, key: &str, x: &Option<S<f64>>, default: f64) -> Nanos {
    match x {
        None => (default * 1000.0) as Nanos,
        Some(t) if (0.0..=MAX_US).contains(t.get_ref()) => (*t.get_ref() * 1000.0).round() as Nanos,
        Some(t) => {
            v.err(
                key,
                span(t),
                format!("{} is out of range: must be 0 to {MAX_US} us", t.get_ref()),
            );
            (default * 1000.0) as Nanos
        }
    }
}

fn params(v: &mut Validator, e: RawEmulation) -> Params {
    let k = |s: &str| format!("emulation.{s}");
    let dcqcn = e.dcqcn.unwrap_or_default();
    let cc = match &e.cc {
        None => "dcqcn".to_string(),
        Some(c) if ["dcqcn", "timely", "swift", "none"].contains(&c.get_ref().as_str()) => {
            c.get_ref().clone()
        }
        Some(c) => {
            v.err(
                k("cc"),
                span(c),
                format!(
                    "'{}': expected \"dcqcn\", \"timely\", \"swift\" or \"none\"",
                    c.get_ref()
                ),
            );
            "dcqcn".to_string()
        }
    };
    let t = e.timely.unwrap_or_default();
    let td = TimelyParams::default();
    let frac = |v: &mut Validator, key: &str, x: &Option<S<f64>>, default: f64| match x {
        None => default,
        Some(f) if *f.get_ref() > 0.0 && *f.get_ref() <= 1.0 => *f.get_ref(),
        Some(f) => {
            v.err(
                key,
                span(f),
                format!("{} is out of range: more than 0, at most 1", f.get_ref()),
            );
            default
        }
    };
    let tp = TimelyParams {
        alpha: frac(v, &k("timely.alpha"), &t.alpha, td.alpha),
        beta: frac(v, &k("timely.beta"), &t.beta, td.beta),
        t_low_ns: us(
            v,
            &k("timely.t_low_us"),
            &t.t_low_us,
            td.t_low_ns as f64 / 1e3,
        ),
        t_high_ns: us(
            v,
            &k("timely.t_high_us"),
            &t.t_high_us,
            td.t_high_ns as f64 / 1e3,
        )
        .max(1),
        min_rtt_ns: us(
            v,
            &k("timely.min_rtt_us"),
            &t.min_rtt_us,
            td.min_rtt_ns as f64 / 1e3,
        )
        .max(1),
        delta_bps: None,
        hai_bps: None,
        min_rate_bps: 0,
    };
    let d = DcqcnParams::default();
    let mbps = |v: &mut Validator, key: &str, x: &Option<S<f64>>, default: u64| match x {
        None => default,
        Some(m) if *m.get_ref() > 0.0 && *m.get_ref() <= 1_600_000.0 => {
            (*m.get_ref() * 1e6).round() as u64
        }
        Some(m) => {
            v.err(
                key,
                span(m),
                format!("{} is out of range: must be more than 0 Mb/s", m.get_ref()),
            );
            default
        }
    };
    let dc = DcqcnParams {
        g: match &dcqcn.g {
            Some(g) if *g.get_ref() > 0.0 && *g.get_ref() < 1.0 => *g.get_ref(),
            Some(g) => {
                v.err(k("dcqcn.g"), span(g), "must be between 0 and 1 (exclusive)");
                d.g
            }
            None => d.g,
        },
        alpha_resume_ns: us(
            v,
            &k("dcqcn.alpha_resume_interval_us"),
            &dcqcn.alpha_resume_interval_us,
            d.alpha_resume_ns as f64 / 1e3,
        )
        .max(1),
        rate_decrease_ns: us(
            v,
            &k("dcqcn.rate_decrease_interval_us"),
            &dcqcn.rate_decrease_interval_us,
            d.rate_decrease_ns as f64 / 1e3,
        )
        .max(1),
        rp_timer_ns: us(
            v,
            &k("dcqcn.rp_timer_us"),
            &dcqcn.rp_timer_us,
            d.rp_timer_ns as f64 / 1e3,
        )
        .max(1),
        fast_recovery_times: v.int_or(
            &k("dcqcn.fast_recovery_times"),
            &dcqcn.fast_recovery_times,
            d.fast_recovery_times as i64,
            0,
            1000,
        ) as u32,
        rate_ai_bps: dcqcn
            .rate_ai_mbps
            .as_ref()
            .map(|_| mbps(v, &k("dcqcn.rate_ai_mbps"), &dcqcn.rate_ai_mbps, 0)),
        rate_hai_bps: dcqcn
            .rate_hai_mbps
            .as_ref()
            .map(|_| mbps(v, &k("dcqcn.rate_hai_mbps"), &dcqcn.rate_hai_mbps, 0)),
        first_decrease_immediate: v.choice(
            &k("dcqcn.first_decrease"),
            &dcqcn.first_decrease,
            &[("next-check", false), ("immediate", true)],
            d.first_decrease_immediate,
        ),
        min_rate_bps: mbps(
            v,
            &k("dcqcn.min_rate_mbps"),
            &dcqcn.min_rate_mbps,
            d.min_rate_bps,
        ),
        rate_on_first_cnp: match &dcqcn.rate_on_first_cnp {
            Some(r) if *r.get_ref() > 0.0 && *r.get_ref() <= 1.0 => *r.get_ref(),
            Some(r) => {
                v.err(
                    k("dcqcn.rate_on_first_cnp"),
                    span(r),
                    "must be more than 0 and at most 1",
                );
                d.rate_on_first_cnp
            }
            None => d.rate_on_first_cnp,
        },
    };
    let w = e.swift.unwrap_or_default();
    let wd = SwiftParams::default();
    let positive = |v: &mut Validator, key: &str, x: &Option<S<f64>>, default: f64| match x {
        None => default,
        Some(f) if *f.get_ref() > 0.0 && *f.get_ref() <= 1e6 => *f.get_ref(),
        Some(f) => {
            v.err(
                key,
                span(f),
                format!("{} is out of range: must be more than 0", f.get_ref()),
            );
            default
        }
    };
    let sp = SwiftParams {
        ai: positive(v, &k("swift.ai"), &w.ai, wd.ai),
        beta: frac(v, &k("swift.beta"), &w.beta, wd.beta),
        max_mdf: frac(v, &k("swift.max_mdf"), &w.max_mdf, wd.max_mdf),
        base_target_ns: us(
            v,
            &k("swift.base_target_us"),
            &w.base_target_us,
            wd.base_target_ns as f64 / 1e3,
        )
        .max(1),
        hop_delay_ns: us(
            v,
            &k("swift.hop_delay_us"),
            &w.hop_delay_us,
            wd.hop_delay_ns as f64 / 1e3,
        ),
        target_propagation: w
            .target_propagation
            .as_ref()
            .map_or(wd.target_propagation, |b| *b.get_ref()),
        fs_range_ns: us(
            v,
            &k("swift.fs_range_us"),
            &w.fs_range_us,
            wd.fs_range_ns as f64 / 1e3,
        ),
        max_cwnd: w
            .max_cwnd
            .as_ref()
            .map(|_| positive(v, &k("swift.max_cwnd"), &w.max_cwnd, 1.0).max(1.0)),
        init_cwnd: w
            .init_cwnd
            .as_ref()
            .map(|_| positive(v, &k("swift.init_cwnd"), &w.init_cwnd, 1.0).max(1.0)),
        ..wd
    };
    let tp = TimelyParams {
        delta_bps: t
            .delta_mbps
            .as_ref()
            .map(|_| mbps(v, &k("timely.delta_mbps"), &t.delta_mbps, 0)),
        hai_bps: t
            .hai_mbps
            .as_ref()
            .map(|_| mbps(v, &k("timely.hai_mbps"), &t.hai_mbps, 0)),
        min_rate_bps: mbps(
            v,
            &k("timely.min_rate_mbps"),
            &t.min_rate_mbps,
            td.min_rate_bps,
        ),
        ..tp
    };
    Params {
        duration_ns: us(v, &k("duration_us"), &e.duration_us, 10_000.0),
        seed: v.int_or(&k("seed"), &e.seed, 1, 0, i64::MAX) as u64,
        mtu: v.int_or(&k("mtu"), &e.mtu, 1024, 64, 8192) as u32,
        ack_interval: v.int_or(&k("ack_interval"), &e.ack_interval, 1, 1, 1024) as u32,
        window: v.int_or(&k("window"), &e.window, 0, 0, 1 << 22) as u32,
        bdp_window: v.choice(
            &k("bdp_window"),
            &e.bdp_window,
            &[
                ("max", Some(BdpWindow::Max)),
                ("pair", Some(BdpWindow::Pair)),
            ],
            None,
        ),
        var_window: e.var_window.as_ref().is_some_and(|b| *b.get_ref()),
        keep_ooo: v.choice(&k("responder"), &e.responder, &RECOVERY, false),
        selective_repeat: v.choice(&k("requester"), &e.requester, &RECOVERY, false),
        pause_until_resume: v.choice(
            &k("pfc_pause"),
            &e.pfc_pause,
            &[("time", false), ("until-resume", true)],
            false,
        ),
        rto_ns: us(
            v,
            &k("rto_us"),
            &e.rto_us,
            crate::host::rnic::DEFAULT_RTO_NS as f64 / 1e3,
        )
        .max(1),
        nak_interval_ns: us(v, &k("nak_interval_us"), &e.nak_interval_us, 500.0),
        cnp_interval_ns: us(v, &k("cnp_interval_us"), &e.cnp_interval_us, 0.0),
        data_dscp: v.int_or(&k("data_dscp"), &e.data_dscp, 26, 0, 63) as u8,
        control_dscp: v.int_or(&k("control_dscp"), &e.control_dscp, 48, 0, 63) as u8,
        data_priority: v.int_or(&k("data_priority"), &e.data_priority, 3, 0, 7) as u8,
        dcqcn: (cc == "dcqcn" && dcqcn.enabled.as_ref().is_none_or(|e| *e.get_ref())).then_some(dc),
        timely: (cc == "timely").then_some(tp),
        swift: (cc == "swift").then_some(sp),
        host_agents: Vec::new(),
        connect: connect(v, &k, e.connect.as_ref(), e.connect_from.as_ref()),
        sample_ns: e
            .sample_us
            .is_some()
            .then(|| us(v, &k("sample_us"), &e.sample_us, 10.0).max(100)),
    }
}

/// `connect` ("none", "tcp") and `connect_from` ("sender", "receiver").
fn connect(
    v: &mut Validator<'_>,
    k: &dyn Fn(&str) -> String,
    connect: Option<&S<String>>,
    from: Option<&S<String>>,
) -> Connect {
    let by_receiver = match from {
        None => false,
        Some(r) if r.get_ref() == "sender" => false,
        Some(r) if r.get_ref() == "receiver" => true,
        Some(r) => {
            v.err(
                k("connect_from"),
                span(r),
                format!("'{}': expected \"sender\" or \"receiver\"", r.get_ref()),
            );
            false
        }
    };
    match connect {
        None => Connect::None,
        Some(c) if c.get_ref() == "none" => Connect::None,
        Some(c) if c.get_ref() == "tcp" => Connect::Tcp { by_receiver },
        Some(c) => {
            v.err(
                k("connect"),
                span(c),
                format!("'{}': expected \"none\" or \"tcp\"", c.get_ref()),
            );
            Connect::None
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The defaults of an empty `[emulation]`.
    pub(crate) fn params() -> Params {
        let text = "";
        let mut v = Validator::new(Path::new("t.toml"), text);
        super::params(&mut v, RawEmulation::default())
    }

    #[test]
    fn defaults() {
        let p = params();
        assert_eq!((p.mtu, p.ack_interval, p.data_priority), (1024, 1, 3));
        assert_eq!(
            p.cnp_interval_ns, 0,
            "a CNP for every CE-marked packet, as the HPCC simulator flags every ACK"
        );
        assert_eq!(p.dcqcn, Some(DcqcnParams::default()));
    }
}
