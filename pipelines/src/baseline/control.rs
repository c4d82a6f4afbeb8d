//! The baseline's control plane: the master copy of its tables (`l2`, `routes`), their JSON
//! form for the management API, and config reload as table commands.
//!
//! JSON forms:
//! - `l2` entry `{"mac": "02:00:00:00:10:01", "port": "dc0"}` (port by name or id), key
//!   `{"mac": "..."}`;
//! - `routes` entry `{"prefix": "10.1.0.0/16", "port": "wan0", "next_hop_mac": "02:..."}` or
//!   `{..., "next_hop": "192.0.2.1"}` (a gateway resolved by ARP / ND), key `{"prefix": "..."}`;
//!   an ECMP group (`[[routes]] next_hops` in the config) is listed as `{"prefix": ...,
//!   "next_hops": [{"port": ..., "next_hop_mac" | "next_hop": ...}, ...]}`. Groups are edited
//!   only through the config (`POST /reload`, which rebuilds the switch when a group changes):
//!   inserting a `next_hops` entry is refused with a 400 that says so; deleting a group's prefix,
//!   or inserting a single next hop for it, works like for any route;
//! - `neighbors` (static entries; learned ones are listed too) `{"port": "wan0", "ip":
//!   "192.0.2.1", "mac": "02:..."}`, key `{"port": "wan0", "ip": "192.0.2.1"}`.
//!
//! Learning (DESIGN.md section 4b, `super::neighbor`): a punted ARP / ND packet whose sender is
//! on one of the ingress port's subnets sets that neighbour on every worker. The master copy
//! holds at most `[neighbors] capacity` learned entries (the oldest learned goes first); a
//! static entry is never replaced by a learned one.
//!
//! Reload applies the difference of `[[l2]]` and `[[routes]]` live as table commands. A change
//! to ports, QoS, PFC, parser or `[switch]` asks for a rebuild: the switch is built anew from the
//! new config and swapped in by the worker between two iterations. A change to `[control]` is
//! refused (restart needed) and the running config stays.

use super::neighbor::{learnable, PUNT_NEIGHBOR};
use super::{BaselineCommand, NextHop, Via};
use longhaul_control::api::ApiError;
use longhaul_control::config::{check_mac, fmt_ip, parse_ip, Config, IpPrefix, PortAddr};
use longhaul_control::plane::{needs_rebuild, PipelineControl, ReloadPlan};
use longhaul_dataplane::control::{Command, Punt};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Routes ordered by family, address, length (a stable listing order).
type RouteKey = (u8, u128, u8);

fn route_key(p: IpPrefix) -> RouteKey {
    match p {
        IpPrefix::V4 { addr, len } => (4, addr as u128, len),
        IpPrefix::V6 { addr, len } => (6, addr, len),
    }
}

fn key_prefix(k: RouteKey) -> IpPrefix {
    match k.0 {
        4 => IpPrefix::V4 {
            addr: k.1 as u32,
            len: k.2,
        },
        _ => IpPrefix::V6 {
            addr: k.1,
            len: k.2,
        },
    }
}

/// A neighbour in the master copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Neighbor {
    mac: [u8; 6],
    is_static: bool,
    /// Engine time of the punt it was learned from (0 for static entries).
    learned_ns: u64,
}

/// The baseline's master tables.
pub struct BaselineControl {
    /// Port name -> id, and id -> name.
    ports: Vec<(u16, String)>,
    /// Port id -> its addresses (routed ports).
    addrs: Vec<(u16, Vec<PortAddr>)>,
    /// Ports in `[[wire]]` pairs (no routes, no neighbours).
    wire_ports: Vec<u16>,
    l2: BTreeMap<[u8; 6], u16>,
    /// One next hop, or an ECMP group's members.
    routes: BTreeMap<RouteKey, Vec<NextHop>>,
    neighbors: BTreeMap<(u16, u128), Neighbor>,
    neighbor_capacity: usize,
}

/// The tables, for listings and "no such table" errors.
const TABLES: &[&str] = &["l2", "routes", "neighbors"];

/// Unreachable through the API (the control plane checks the name against `tables()` first,
/// and names every table of the pipeline in its 404).
fn no_table(table: &str) -> ApiError {
    ApiError::NotFound(format!("no table '{table}'"))
}

fn mac_str(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// A MAC from an entry's field, checked as the config file checks it
/// ([`longhaul_control::config::check_mac`]: the same syntax; `unicast` for next hops and
/// neighbours, whose broadcast or multicast address the config refuses too).
fn parse_mac(v: Option<&Value>, what: &str, unicast: bool) -> Result<[u8; 6], ApiError> {
    let s = v.and_then(Value::as_str).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "{what}: expected a MAC string like \"02:00:00:00:00:01\""
        ))
    })?;
    check_mac(s, unicast).map_err(|m| ApiError::BadRequest(format!("{what}: {m}")))
}

/// A prefix, checked as the config file checks it ([`longhaul_control::config::parse_prefix`]:
/// the length is required, host bits must be zero).
pub fn parse_prefix(s: &str) -> Result<IpPrefix, longhaul_control::config::AddrError> {
    longhaul_control::config::parse_prefix(s)
}

fn prefix_str(p: IpPrefix) -> String {
    match p {
        IpPrefix::V4 { addr, len } => format!("{}/{len}", Ipv4Addr::from(addr)),
        IpPrefix::V6 { addr, len } => format!("{}/{len}", Ipv6Addr::from(addr)),
    }
}

impl BaselineControl {
    pub fn new(cfg: &Config) -> Self {
        BaselineControl {
            ports: cfg.ports.iter().map(|p| (p.id, p.name.clone())).collect(),
            addrs: cfg
                .ports
                .iter()
                .map(|p| (p.id, p.addresses.clone()))
                .collect(),
            wire_ports: cfg.wire.iter().flat_map(|&(a, b)| [a, b]).collect(),
            l2: cfg.l2.iter().map(|e| (e.mac, e.port)).collect(),
            routes: cfg
                .routes
                .iter()
                .map(|r| {
                    let hops = r.hops.iter().map(NextHop::from_config).collect();
                    (route_key(r.prefix), hops)
                })
                .collect(),
            neighbors: cfg
                .neighbors
                .statics
                .iter()
                .map(|s| {
                    let n = Neighbor {
                        mac: s.mac,
                        is_static: true,
                        learned_ns: 0,
                    };
                    ((s.port, s.ip), n)
                })
                .collect(),
            neighbor_capacity: cfg.neighbors.capacity,
        }
    }

    /// Whether `ip` is on one of `port`'s subnets.
    fn on_link(&self, port: u16, ip: u128) -> bool {
        self.addrs
            .iter()
            .find(|(id, _)| *id == port)
            .is_some_and(|(_, a)| a.iter().any(|a| a.contains(ip)))
    }

    /// A routed port for a route or neighbour entry.
    fn routed(&self, port: u16) -> Result<u16, ApiError> {
        if self.wire_ports.contains(&port) {
            return Err(ApiError::BadRequest(format!(
                "port: '{}' is in a wire pair: a wire port forwards only to its pair",
                self.port_name(port)
            )));
        }
        Ok(port)
    }

    fn ip(&self, v: Option<&Value>, what: &str) -> Result<u128, ApiError> {
        let s = v.and_then(Value::as_str).ok_or_else(|| {
            ApiError::BadRequest(format!("{what}: expected an address like \"192.0.2.1\""))
        })?;
        parse_ip(s).map_err(|m| ApiError::BadRequest(format!("{what}: {m}")))
    }

    fn neighbor_json(&self, (port, ip): (u16, u128), n: &Neighbor) -> Value {
        json!({
            "port": self.port_name(port),
            "ip": fmt_ip(ip),
            "mac": mac_str(&n.mac),
            "static": n.is_static,
            "learned_ns": n.learned_ns,
        })
    }

    /// Learn from a punted ARP / ND packet (see the module documentation).
    fn learn(&mut self, punt: &Punt) -> Option<BaselineCommand> {
        let (ip, mac) = learnable(punt)?;
        let port = punt.port;
        if !self.on_link(port, ip) {
            return None;
        }
        let key = (port, ip);
        if self.neighbors.get(&key).is_some_and(|n| n.is_static) {
            return None;
        }
        let learned = self.neighbors.values().filter(|n| !n.is_static).count();
        if !self.neighbors.contains_key(&key) && learned >= self.neighbor_capacity {
            let oldest = self
                .neighbors
                .iter()
                .filter(|(_, n)| !n.is_static)
                .min_by_key(|(_, n)| n.learned_ns)
                .map(|(k, _)| *k)?;
            self.neighbors.remove(&oldest);
        }
        let n = Neighbor {
            mac,
            is_static: false,
            learned_ns: punt.ts,
        };
        self.neighbors.insert(key, n);
        Some(BaselineCommand::NeighborSet {
            port,
            ip,
            mac: Some(mac),
            is_static: false,
        })
    }

    fn port_name(&self, id: u16) -> String {
        self.ports
            .iter()
            .find(|(i, _)| *i == id)
            .map_or_else(|| id.to_string(), |(_, n)| n.clone())
    }

    fn port(&self, v: Option<&Value>) -> Result<u16, ApiError> {
        let names = || {
            self.ports
                .iter()
                .map(|(_, n)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match v {
            Some(Value::String(s)) => self
                .ports
                .iter()
                .find(|(_, n)| n == s)
                .map(|(i, _)| *i)
                .ok_or_else(|| {
                    ApiError::BadRequest(format!("port: no port named '{s}' (ports: {})", names()))
                }),
            Some(Value::Number(n)) => n
                .as_u64()
                .and_then(|id| self.ports.iter().find(|(i, _)| *i as u64 == id))
                .map(|(i, _)| *i)
                .ok_or_else(|| {
                    ApiError::BadRequest(format!("port: no port with id {n} (ports: {})", names()))
                }),
            _ => Err(ApiError::BadRequest(
                "port: expected a port name or id".into(),
            )),
        }
    }

    fn l2_json(&self, mac: &[u8; 6], port: u16) -> Value {
        json!({"mac": mac_str(mac), "port": self.port_name(port)})
    }

    fn hop_json(&self, nh: &NextHop) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("port".into(), self.port_name(nh.port).into());
        match nh.via {
            Via::Gateway(ip) => m.insert("next_hop".into(), fmt_ip(ip).into()),
            _ => m.insert("next_hop_mac".into(), mac_str(&nh.mac).into()),
        };
        m
    }

    fn route_json(&self, k: RouteKey, hops: &[NextHop]) -> Value {
        let prefix = prefix_str(key_prefix(k));
        match hops {
            [nh] => {
                let mut m = serde_json::Map::new();
                m.insert("prefix".into(), prefix.into());
                m.extend(self.hop_json(nh));
                Value::Object(m)
            }
            _ => {
                let members: Vec<Value> = hops
                    .iter()
                    .map(|h| Value::Object(self.hop_json(h)))
                    .collect();
                json!({"prefix": prefix, "next_hops": members})
            }
        }
    }

    fn only_keys(v: &Value, keys: &[&str]) -> Result<(), ApiError> {
        let obj = v
            .as_object()
            .ok_or_else(|| ApiError::BadRequest("expected a JSON object".into()))?;
        for k in obj.keys() {
            if !keys.contains(&k.as_str()) {
                return Err(ApiError::BadRequest(format!(
                    "unknown field '{k}' (expected: {})",
                    keys.join(", ")
                )));
            }
        }
        Ok(())
    }
}

fn page<T>(
    items: impl Iterator<Item = T>,
    total: usize,
    table: &str,
    offset: usize,
    limit: usize,
) -> Value
where
    T: Into<Value>,
{
    let entries: Vec<Value> = items.skip(offset).take(limit).map(Into::into).collect();
    json!({"table": table, "total": total, "offset": offset, "entries": entries})
}

impl PipelineControl for BaselineControl {
    type Command = BaselineCommand;

    /// Learns neighbours from punted ARP / ND.
    fn on_punt(&mut self, punt: &Punt, issue: &mut dyn FnMut(Command<BaselineCommand>)) {
        if punt.reason == PUNT_NEIGHBOR {
            if let Some(c) = self.learn(punt) {
                issue(Command::Pipeline(c));
            }
        }
    }

    fn tables(&self) -> Vec<String> {
        TABLES.iter().map(|t| t.to_string()).collect()
    }

    fn list(&self, table: &str, offset: usize, limit: usize) -> Result<Value, ApiError> {
        match table {
            "l2" => Ok(page(
                self.l2.iter().map(|(m, p)| self.l2_json(m, *p)),
                self.l2.len(),
                table,
                offset,
                limit,
            )),
            "routes" => Ok(page(
                self.routes.iter().map(|(k, nh)| self.route_json(*k, nh)),
                self.routes.len(),
                table,
                offset,
                limit,
            )),
            "neighbors" => Ok(page(
                self.neighbors
                    .iter()
                    .map(|(k, n)| self.neighbor_json(*k, n)),
                self.neighbors.len(),
                table,
                offset,
                limit,
            )),
            _ => Err(no_table(table)),
        }
    }

    fn insert(
        &mut self,
        table: &str,
        e: &Value,
    ) -> Result<(Value, Vec<BaselineCommand>), ApiError> {
        match table {
            "l2" => {
                Self::only_keys(e, &["mac", "port"])?;
                let mac = parse_mac(e.get("mac"), "mac", false)?;
                let port = self.port(e.get("port"))?;
                self.l2.insert(mac, port);
                Ok((
                    self.l2_json(&mac, port),
                    vec![BaselineCommand::L2Insert { mac, port }],
                ))
            }
            "routes" => {
                if e.get("next_hops").is_some() {
                    return Err(ApiError::BadRequest(
                        "next_hops: ECMP groups are set only in the config file ([[routes]] \
                         next_hops, docs/config.md): edit it and POST /reload (a changed group \
                         rebuilds the switch). Through the API a route has one next hop (port \
                         with next_hop_mac or next_hop), which replaces a group for its prefix"
                            .into(),
                    ));
                }
                Self::only_keys(e, &["prefix", "port", "next_hop_mac", "next_hop"])?;
                let prefix = e
                    .get("prefix")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ApiError::BadRequest(
                            "prefix: expected a string like \"10.1.0.0/16\"".into(),
                        )
                    })
                    .and_then(|s| {
                        parse_prefix(s).map_err(|m| ApiError::BadRequest(format!("prefix: {m}")))
                    })?;
                let port = self.routed(self.port(e.get("port"))?)?;
                let nh =
                    match (e.get("next_hop_mac"), e.get("next_hop")) {
                        (m @ Some(_), None) => NextHop {
                            port,
                            mac: parse_mac(m, "next_hop_mac", true)?,
                            via: Via::Mac,
                        },
                        (None, g @ Some(_)) => {
                            let ip = self.ip(g, "next_hop")?;
                            let v4 = matches!(prefix, IpPrefix::V4 { .. });
                            if longhaul_control::config::unmap_v4(ip).is_some() != v4 {
                                return Err(ApiError::BadRequest(
                                    "next_hop: not of the prefix's family".into(),
                                ));
                            }
                            if !self.on_link(port, ip) {
                                return Err(ApiError::BadRequest(format!(
                                    "next_hop: {} is on none of port '{}''s subnets",
                                    fmt_ip(ip),
                                    self.port_name(port)
                                )));
                            }
                            NextHop {
                                port,
                                mac: [0; 6],
                                via: Via::Gateway(ip),
                            }
                        }
                        _ => return Err(ApiError::BadRequest(
                            "give next_hop_mac (static) or next_hop (a gateway resolved by ARP \
                             / ND), one of them"
                                .into(),
                        )),
                    };
                self.routes.insert(route_key(prefix), vec![nh]);
                Ok((
                    self.route_json(route_key(prefix), &[nh]),
                    vec![BaselineCommand::RouteInsert {
                        prefix,
                        next_hop: nh,
                    }],
                ))
            }
            "neighbors" => {
                Self::only_keys(e, &["port", "ip", "mac"])?;
                let port = self.routed(self.port(e.get("port"))?)?;
                let ip = self.ip(e.get("ip"), "ip")?;
                if !self.on_link(port, ip) {
                    return Err(ApiError::BadRequest(format!(
                        "ip: {} is on none of port '{}''s subnets",
                        fmt_ip(ip),
                        self.port_name(port)
                    )));
                }
                let mac = parse_mac(e.get("mac"), "mac", true)?;
                let n = Neighbor {
                    mac,
                    is_static: true,
                    learned_ns: 0,
                };
                self.neighbors.insert((port, ip), n);
                Ok((
                    self.neighbor_json((port, ip), &n),
                    vec![BaselineCommand::NeighborSet {
                        port,
                        ip,
                        mac: Some(mac),
                        is_static: true,
                    }],
                ))
            }
            _ => Err(no_table(table)),
        }
    }

    fn delete(
        &mut self,
        table: &str,
        k: &Value,
    ) -> Result<(Value, Vec<BaselineCommand>), ApiError> {
        match table {
            "l2" => {
                Self::only_keys(k, &["mac"])?;
                let mac = parse_mac(k.get("mac"), "mac", false)?;
                let port = self.l2.remove(&mac).ok_or_else(|| {
                    ApiError::NotFound(format!("no l2 entry for {}", mac_str(&mac)))
                })?;
                Ok((
                    self.l2_json(&mac, port),
                    vec![BaselineCommand::L2Delete { mac }],
                ))
            }
            "routes" => {
                Self::only_keys(k, &["prefix"])?;
                let s = k
                    .get("prefix")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::BadRequest("prefix: expected a string".into()))?;
                let prefix =
                    parse_prefix(s).map_err(|m| ApiError::BadRequest(format!("prefix: {m}")))?;
                let nh = self
                    .routes
                    .remove(&route_key(prefix))
                    .ok_or_else(|| ApiError::NotFound(format!("no route for {s}")))?;
                Ok((
                    self.route_json(route_key(prefix), &nh),
                    vec![BaselineCommand::RouteDelete { prefix }],
                ))
            }
            "neighbors" => {
                Self::only_keys(k, &["port", "ip"])?;
                let port = self.port(k.get("port"))?;
                let ip = self.ip(k.get("ip"), "ip")?;
                let n = self.neighbors.remove(&(port, ip)).ok_or_else(|| {
                    ApiError::NotFound(format!(
                        "no neighbour {} on '{}'",
                        fmt_ip(ip),
                        self.port_name(port)
                    ))
                })?;
                Ok((
                    self.neighbor_json((port, ip), &n),
                    vec![BaselineCommand::NeighborSet {
                        port,
                        ip,
                        mac: None,
                        is_static: n.is_static,
                    }],
                ))
            }
            _ => Err(no_table(table)),
        }
    }

    fn reload(
        &mut self,
        old: &Config,
        new: &Config,
    ) -> Result<ReloadPlan<BaselineCommand>, ApiError> {
        if old.control != new.control {
            return Err(ApiError::Conflict(
                "the new config changes [control] (API, metrics, rings): restart longhaul for that (the running config is unchanged)".into(),
            ));
        }
        if needs_rebuild(old, new) {
            *self = BaselineControl::new(new);
            return Ok(ReloadPlan::Rebuild);
        }
        let mut target = BaselineControl::new(new);
        // ECMP groups have no table command: a reload that adds, changes or removes one builds
        // the switch anew (its group table is built from the config).
        let group_changed = |a: &Self, b: &Self| {
            a.routes
                .iter()
                .any(|(k, h)| h.len() > 1 && b.routes.get(k) != Some(h))
        };
        if group_changed(self, &target) || group_changed(&target, self) {
            *self = target;
            return Ok(ReloadPlan::Rebuild);
        }
        // Learned neighbours stay (the workers keep theirs: the tables are not rebuilt).
        let learned = self.neighbors.iter().filter(|(_, n)| !n.is_static);
        target.neighbors.extend(learned.map(|(k, n)| (*k, *n)));
        let mut cmds = Vec::new();
        // Deletions first, then inserts (a replaced entry is an insert).
        for mac in self.l2.keys() {
            if !target.l2.contains_key(mac) {
                cmds.push(BaselineCommand::L2Delete { mac: *mac });
            }
        }
        for k in self.routes.keys() {
            if !target.routes.contains_key(k) {
                cmds.push(BaselineCommand::RouteDelete {
                    prefix: key_prefix(*k),
                });
            }
        }
        for (mac, port) in &target.l2 {
            if self.l2.get(mac) != Some(port) {
                cmds.push(BaselineCommand::L2Insert {
                    mac: *mac,
                    port: *port,
                });
            }
        }
        for (k, hops) in &target.routes {
            if let (Some(nh), [_]) = (hops.first(), hops.as_slice()) {
                if self.routes.get(k) != Some(hops) {
                    cmds.push(BaselineCommand::RouteInsert {
                        prefix: key_prefix(*k),
                        next_hop: *nh,
                    });
                }
            }
        }
        // Static neighbours added through the API and absent from the file go too (the file is
        // the truth); a config change to [neighbors] itself rebuilds the switch.
        for (&(port, ip), n) in self.neighbors.iter().filter(|(_, n)| n.is_static) {
            if target.neighbors.get(&(port, ip)) != Some(n) {
                cmds.push(BaselineCommand::NeighborSet {
                    port,
                    ip,
                    mac: None,
                    is_static: true,
                });
            }
        }
        for (&(port, ip), n) in target.neighbors.iter().filter(|(_, n)| n.is_static) {
            if self.neighbors.get(&(port, ip)) != Some(n) {
                cmds.push(BaselineCommand::NeighborSet {
                    port,
                    ip,
                    mac: Some(n.mac),
                    is_static: true,
                });
            }
        }
        *self = target;
        Ok(ReloadPlan::Tables(cmds))
    }
}
