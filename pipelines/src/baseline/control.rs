//! The baseline's control plane: the master copy of its tables (`l2`, `routes`), their JSON
//! form for the management API, and config reload as table commands.
//!
//! JSON forms:
//! - `l2` entry `{"mac": "02:00:00:00:10:01", "port": "dc0"}` (port by name or id), key
//!   `{"mac": "..."}`;
//! - `routes` entry `{"prefix": "10.1.0.0/16", "port": "wan0", "next_hop_mac": "02:..."}`, key
//!   `{"prefix": "..."}`.
//!
//! Reload applies the difference of `[[l2]]` and `[[routes]]` live as table commands. A change
//! to ports, QoS, PFC, parser or `[switch]` asks for a rebuild: the switch is built anew from the
//! new config and swapped in by the worker between two iterations. A change to `[control]` is
//! refused (restart needed) and the running config stays.

use super::{BaselineCommand, NextHop};
use longhaul_control::api::ApiError;
use longhaul_control::config::{Config, IpPrefix};
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

/// The baseline's master tables.
pub struct BaselineControl {
    /// Port name -> id, and id -> name.
    ports: Vec<(u16, String)>,
    l2: BTreeMap<[u8; 6], u16>,
    routes: BTreeMap<RouteKey, NextHop>,
}

fn mac_str(m: &[u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

fn parse_mac(v: Option<&Value>, what: &str) -> Result<[u8; 6], ApiError> {
    let s = v.and_then(Value::as_str).ok_or_else(|| {
        ApiError::BadRequest(format!(
            "{what}: expected a MAC string like \"02:00:00:00:00:01\""
        ))
    })?;
    let parts: Vec<&str> = s.split(':').collect();
    let mut m = [0u8; 6];
    if parts.len() != 6 {
        return Err(ApiError::BadRequest(format!(
            "{what}: '{s}' is not a MAC address"
        )));
    }
    for (i, p) in parts.iter().enumerate() {
        m[i] = u8::from_str_radix(p, 16)
            .ok()
            .filter(|_| p.len() == 2)
            .ok_or_else(|| ApiError::BadRequest(format!("{what}: '{s}' is not a MAC address")))?;
    }
    Ok(m)
}

/// Parse "a.b.c.d/len" or "x::/len"; host bits set is an error (as in the config).
pub fn parse_prefix(s: &str) -> Result<IpPrefix, String> {
    let (a, l) = s
        .split_once('/')
        .ok_or_else(|| format!("'{s}': expected ADDRESS/LENGTH"))?;
    let len: u8 = l.parse().map_err(|_| format!("'{s}': bad prefix length"))?;
    if let Ok(v4) = a.parse::<Ipv4Addr>() {
        if len > 32 {
            return Err(format!("'{s}': IPv4 prefix length > 32"));
        }
        let addr = u32::from(v4);
        let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
        if addr & !mask != 0 {
            return Err(format!("'{s}': host bits set"));
        }
        return Ok(IpPrefix::V4 { addr, len });
    }
    if let Ok(v6) = a.parse::<Ipv6Addr>() {
        if len > 128 {
            return Err(format!("'{s}': IPv6 prefix length > 128"));
        }
        let addr = u128::from(v6);
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        if addr & !mask != 0 {
            return Err(format!("'{s}': host bits set"));
        }
        return Ok(IpPrefix::V6 { addr, len });
    }
    Err(format!("'{s}': not an IPv4 or IPv6 prefix"))
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
            l2: cfg.l2.iter().map(|e| (e.mac, e.port)).collect(),
            routes: cfg
                .routes
                .iter()
                .map(|r| {
                    (
                        route_key(r.prefix),
                        NextHop {
                            port: r.port,
                            mac: r.next_hop_mac,
                        },
                    )
                })
                .collect(),
        }
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

    fn route_json(&self, k: RouteKey, nh: &NextHop) -> Value {
        json!({
            "prefix": prefix_str(key_prefix(k)),
            "port": self.port_name(nh.port),
            "next_hop_mac": mac_str(&nh.mac),
        })
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

    /// The baseline punts nothing.
    fn on_punt(&mut self, _punt: &Punt, _issue: &mut dyn FnMut(Command<BaselineCommand>)) {}

    fn tables(&self) -> Vec<String> {
        vec!["l2".into(), "routes".into()]
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
            _ => Err(ApiError::NotFound(format!(
                "no table '{table}' (tables: l2, routes)"
            ))),
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
                let mac = parse_mac(e.get("mac"), "mac")?;
                let port = self.port(e.get("port"))?;
                self.l2.insert(mac, port);
                Ok((
                    self.l2_json(&mac, port),
                    vec![BaselineCommand::L2Insert { mac, port }],
                ))
            }
            "routes" => {
                Self::only_keys(e, &["prefix", "port", "next_hop_mac"])?;
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
                let port = self.port(e.get("port"))?;
                let mac = parse_mac(e.get("next_hop_mac"), "next_hop_mac")?;
                let nh = NextHop { port, mac };
                self.routes.insert(route_key(prefix), nh);
                Ok((
                    self.route_json(route_key(prefix), &nh),
                    vec![BaselineCommand::RouteInsert {
                        prefix,
                        next_hop: nh,
                    }],
                ))
            }
            _ => Err(ApiError::NotFound(format!(
                "no table '{table}' (tables: l2, routes)"
            ))),
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
                let mac = parse_mac(k.get("mac"), "mac")?;
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
            _ => Err(ApiError::NotFound(format!(
                "no table '{table}' (tables: l2, routes)"
            ))),
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
        let target = BaselineControl::new(new);
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
        for (k, nh) in &target.routes {
            if self.routes.get(k) != Some(nh) {
                cmds.push(BaselineCommand::RouteInsert {
                    prefix: key_prefix(*k),
                    next_hop: *nh,
                });
            }
        }
        *self = target;
        Ok(ReloadPlan::Tables(cmds))
    }
}
