//! The raw serde layer: structs that mirror the TOML file one to one.
//!
//! Every table denies unknown keys. Every leaf is optional here (defaults and "required" are
//! decided by the validation pass, so that all messages have one shape) and wrapped in
//! `toml::Spanned` so that validation errors can point at a line and column. Integers are read as
//! `i64` (all a TOML integer can be) and range-checked in validation, which gives clearer messages
//! than serde's "expected u16".

use super::{Policy, SchedulerKind, Trust};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;
use toml::Spanned;

/// A value with its place in the file (for line and column in errors).
pub type S<T> = Spanned<T>;

/// The whole file. Not derived: the top-level keys are the generic tables below plus the
/// registered mechanisms' sections ([`RawConfigSeed::sections`]), which are skipped here and read
/// by their own [`Section`](super::Section) from the same text; any other key is an unknown key.
#[derive(Default)]
pub(super) struct RawConfig {
    // Tables that are not array elements are not `Spanned`: toml 0.8 cannot deserialize a
    // `Spanned` table that exists only implicitly (`[[qos.classes]]` with no `[qos]`).
    pub switch: Option<RawSwitch>,
    pub ports: Option<S<Vec<S<RawPort>>>>,
    pub qos: Option<RawQos>,
    pub pfc: Option<RawPfc>,
    pub parser: Option<RawParser>,
    pub l2: Option<Vec<S<RawL2>>>,
    pub routes: Option<Vec<S<RawRoute>>>,
    pub wire: Option<Vec<S<RawWire>>>,
    pub neighbors: Option<RawNeighbors>,
    pub control: Option<RawControl>,
    pub dpdk: Option<RawDpdk>,
}

/// The generic top-level tables, in the order unknown-key errors list them (a mechanism may not
/// take one of these names).
pub const GENERIC_TABLES: &[&str] = &[
    "switch",
    "ports",
    "qos",
    "pfc",
    "parser",
    "l2",
    "routes",
    "wire",
    "neighbors",
    "control",
    "dpdk",
];

/// Reads a [`RawConfig`]; `sections` are the registered mechanisms' tables.
pub(super) struct RawConfigSeed<'a> {
    pub sections: &'a [&'static str],
}

impl<'de> de::DeserializeSeed<'de> for RawConfigSeed<'_> {
    type Value = RawConfig;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<RawConfig, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RawConfigSeed<'_> {
    type Value = RawConfig;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawConfig, A::Error> {
        let mut raw = RawConfig::default();
        let key = TopKey {
            sections: self.sections,
        };
        while let Some(k) = map.next_key_seed(key.clone())? {
            match k.as_str() {
                "switch" => raw.switch = Some(map.next_value()?),
                "ports" => raw.ports = Some(map.next_value()?),
                "qos" => raw.qos = Some(map.next_value()?),
                "pfc" => raw.pfc = Some(map.next_value()?),
                "parser" => raw.parser = Some(map.next_value()?),
                "l2" => raw.l2 = Some(map.next_value()?),
                "routes" => raw.routes = Some(map.next_value()?),
                "wire" => raw.wire = Some(map.next_value()?),
                "neighbors" => raw.neighbors = Some(map.next_value()?),
                "control" => raw.control = Some(map.next_value()?),
                "dpdk" => raw.dpdk = Some(map.next_value()?),
                // A registered section: its mechanism reads it.
                _ => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        Ok(raw)
    }
}

/// A top-level key: a generic table or a registered section; anything else is refused with the
/// same words serde uses for an unknown field (toml adds the key's line and column).
#[derive(Clone)]
struct TopKey<'a> {
    sections: &'a [&'static str],
}

impl<'de> de::DeserializeSeed<'de> for TopKey<'_> {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl Visitor<'_> for TopKey<'_> {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<String, E> {
        if GENERIC_TABLES.contains(&v) || self.sections.contains(&v) {
            return Ok(v.to_owned());
        }
        let expected: Vec<String> = GENERIC_TABLES
            .iter()
            .chain(self.sections.iter())
            .map(|n| format!("`{n}`"))
            .collect();
        Err(E::custom(format_args!(
            "unknown field `{v}`, expected one of {}",
            expected.join(", ")
        )))
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSwitch {
    pub name: Option<S<String>>,
    pub pipeline: Option<S<String>>,
    pub pool_buffers: Option<S<i64>>,
    pub buffer_data_room: Option<S<i64>>,
    pub buffer_bytes: Option<S<i64>>,
    pub seed: Option<S<i64>>,
    pub ecmp_seed: Option<S<i64>>,
    pub memory_limit_bytes: Option<S<i64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPort {
    pub id: Option<S<i64>>,
    pub name: Option<S<String>>,
    pub mac: Option<S<String>>,
    pub rate_gbps: Option<S<f64>>,
    pub mtu: Option<S<i64>>,
    pub frame_overhead: Option<S<i64>>,
    // Not `Spanned` (see `RawClass::ecn`): `io.kind = "memory"` must work too.
    pub io: Option<RawPortIo>,
    pub addresses: Option<S<Vec<S<String>>>>,
}

/// `ports[].io`: how a live run moves the port's packets.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPortIo {
    pub kind: Option<S<RawIoKind>>,
    pub rx: Option<S<String>>,
    pub tx: Option<S<String>>,
    pub rx_loop: Option<S<bool>>,
    pub pace: Option<S<bool>>,
    pub tx_max_bytes: Option<S<i64>>,
    pub device: Option<S<String>>,
    pub rx_queues: Option<S<i64>>,
    pub tx_queues: Option<S<i64>>,
    pub rx_desc: Option<S<i64>>,
    pub tx_desc: Option<S<i64>>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawIoKind {
    Pcap,
    Memory,
    Dpdk,
}

/// `[dpdk]`: EAL arguments and the mbuf pool (for ports with `io.kind = "dpdk"`).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDpdk {
    pub eal_args: Option<S<Vec<S<String>>>>,
    pub mbufs: Option<S<i64>>,
    pub mbuf_cache: Option<S<i64>>,
    pub mbuf_data_room: Option<S<i64>>,
    pub workers: Option<S<i64>>,
    pub worker_rate: Option<S<RawWorkerRate>>,
}

/// `dpdk.worker_rate` values.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawWorkerRate {
    Split,
    Full,
}

/// `[control]`: control thread, management API, metrics.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawControl {
    pub api_listen: Option<S<String>>,
    pub api_token: Option<S<String>>,
    pub metrics_listen: Option<S<String>>,
    pub stats_interval_ms: Option<S<i64>>,
    pub control_latency_ns: Option<S<i64>>,
    pub command_ring: Option<S<i64>>,
    pub punt_ring: Option<S<i64>>,
    pub reload_dirs: Option<S<Vec<S<String>>>>,
    pub reload_max_bytes: Option<S<i64>>,
    pub api_hosts: Option<S<Vec<S<String>>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawQos {
    pub trust: Option<RawTrust>,
    pub default_class: Option<S<i64>>,
    pub dscp_map: Option<S<OrderedTable<S<i64>>>>,
    pub pcp_map: Option<S<OrderedTable<S<i64>>>>,
    pub scheduler: Option<RawScheduler>,
    pub strict_classes: Option<S<Vec<S<i64>>>>,
    pub weights: Option<S<Vec<S<i64>>>>,
    pub drr_quantum_bytes: Option<S<i64>>,
    pub queue_limit_bytes: Option<S<i64>>,
    pub classes: Option<Vec<S<RawClass>>>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawTrust {
    Dscp,
    Pcp,
    None,
}

impl From<RawTrust> for Trust {
    fn from(t: RawTrust) -> Trust {
        match t {
            RawTrust::Dscp => Trust::Dscp,
            RawTrust::Pcp => Trust::Pcp,
            RawTrust::None => Trust::None,
        }
    }
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawScheduler {
    Strict,
    Wrr,
    Drr,
}

impl From<RawScheduler> for SchedulerKind {
    fn from(s: RawScheduler) -> SchedulerKind {
        match s {
            RawScheduler::Strict => SchedulerKind::Strict,
            RawScheduler::Wrr => SchedulerKind::Wrr,
            RawScheduler::Drr => SchedulerKind::Drr,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawClass {
    pub class: Option<S<i64>>,
    pub lossless: Option<S<bool>>,
    pub limit_bytes: Option<S<i64>>,
    // Not `Spanned`: toml 0.8 fails on a `Spanned` table written with dotted keys (`ecn.pmax`).
    pub ecn: Option<RawEcn>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEcn {
    pub kmin_bytes: Option<S<i64>>,
    pub kmax_bytes: Option<S<i64>>,
    pub pmax: Option<S<f64>>,
    pub at: Option<S<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPfc {
    pub enabled: Option<S<bool>>,
    pub xoff_bytes: Option<S<i64>>,
    pub xon_bytes: Option<S<i64>>,
    pub headroom_bytes: Option<S<i64>>,
    pub pause_quanta: Option<S<i64>>,
    pub refresh_ns: Option<S<i64>>,
    pub dynamic_alpha: Option<S<f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawParser {
    pub max_vlan_tags: Option<S<i64>>,
    pub verify_ipv4_checksum: Option<bool>,
    pub policy: Option<RawPolicies>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicies {
    pub bad_length: Option<RawPolicy>,
    pub unknown_ethertype: Option<RawPolicy>,
    pub vlan_stack: Option<RawPolicy>,
    pub ipv4_options: Option<RawPolicy>,
    pub ipv4_fragment: Option<RawPolicy>,
    pub bad_ip_checksum: Option<RawPolicy>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawPolicy {
    Drop,
    Forward,
}

impl From<RawPolicy> for Policy {
    fn from(p: RawPolicy) -> Policy {
        match p {
            RawPolicy::Drop => Policy::Drop,
            RawPolicy::Forward => Policy::Forward,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawL2 {
    pub mac: Option<S<String>>,
    pub port: Option<S<PortRef>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub prefix: Option<S<String>>,
    pub port: Option<S<PortRef>>,
    pub next_hop_mac: Option<S<String>>,
    pub next_hop: Option<S<String>>,
    /// An ECMP group: the members, instead of `port` and `next_hop_mac` / `next_hop`.
    pub next_hops: Option<S<Vec<S<RawHop>>>>,
}

/// One member of a route's `next_hops` (an ECMP group).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHop {
    pub port: Option<S<PortRef>>,
    pub next_hop_mac: Option<S<String>>,
    pub next_hop: Option<S<String>>,
}

/// `[[wire]]`: a port pair in the transparent mode.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWire {
    pub ports: Option<S<Vec<S<PortRef>>>>,
}

/// `[neighbors]`: ARP / neighbour discovery settings and static entries.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawNeighbors {
    pub capacity: Option<S<i64>>,
    pub reachable_ms: Option<S<i64>>,
    pub probes: Option<S<i64>>,
    pub retrans_ms: Option<S<i64>>,
    #[serde(rename = "static")]
    pub statics: Option<Vec<S<RawStaticNeighbor>>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStaticNeighbor {
    pub ip: Option<S<String>>,
    pub mac: Option<S<String>>,
    pub port: Option<S<PortRef>>,
}

/// A reference to a port: its name (a string) or its id (an integer).
#[derive(Clone, Debug)]
pub enum PortRef {
    Name(String),
    Id(i64),
}

impl<'de> Deserialize<'de> for PortRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = PortRef;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a port name (string) or a port id (integer)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PortRef, E> {
                Ok(PortRef::Name(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<PortRef, E> {
                Ok(PortRef::Id(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<PortRef, E> {
                Ok(PortRef::Id(i64::try_from(v).unwrap_or(i64::MAX)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A TOML table read in file order (for `dscp_map`/`pcp_map`, whose keys are numbers written as
/// strings), so that "the first error" is the first one in the file.
pub(super) struct OrderedTable<V>(pub Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedTable<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Vis<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Vis<V> {
            type Value = OrderedTable<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, V>()? {
                    out.push((k, v));
                }
                Ok(OrderedTable(out))
            }
        }
        d.deserialize_map(Vis(PhantomData))
    }
}
