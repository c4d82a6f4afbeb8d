//! Where the box sits (DESIGN.md section 4b): `[[wire]]` port pairs (the transparent mode),
//! the routed ports' `addresses`, routes through a gateway (`next_hop`), and `[neighbors]`
//! (ARP / IPv6 neighbour discovery settings, static entries). docs/config.md documents them.

use super::super::raw::{PortRef, RawHop, RawNeighbors, RawRoute, RawWire, S};
use super::super::{
    map_v4, IpPrefix, NeighborConfig, PortAddr, PortConfig, RouteHop, StaticNeighbor, SwitchConfig,
    MAX_ECMP_MEMBERS,
};
use super::{fmt_mac, span, AddrError, Span, Validator};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Learned neighbour entries a worker may hold at most.
const MAX_NEIGHBORS: i64 = 1 << 20;
/// Bytes one neighbour entry takes in a worker's table (key, value, hash slot, ageing links).
const NEIGHBOR_ENTRY_BYTES: u64 = 96;

/// An IP address as written, IPv4 mapped into IPv6 (`::ffff:a.b.c.d`).
pub fn parse_ip(s: &str) -> Result<u128, AddrError> {
    match s.parse::<IpAddr>() {
        Ok(IpAddr::V4(a)) => Ok(map_v4(u32::from(a))),
        Ok(IpAddr::V6(a)) if a.to_ipv4_mapped().is_some() => Err(AddrError::MappedV4(s.to_owned())),
        Ok(IpAddr::V6(a)) => Ok(u128::from(a)),
        Err(_) => Err(AddrError::NotIp(s.to_owned())),
    }
}

/// An address (mapped) for messages.
pub fn fmt_ip(ip: u128) -> String {
    match super::super::unmap_v4(ip) {
        Some(a) => Ipv4Addr::from(a).to_string(),
        None => Ipv6Addr::from(ip).to_string(),
    }
}

fn fmt_addr(a: &PortAddr) -> String {
    match *a {
        PortAddr::V4 { len, .. } | PortAddr::V6 { len, .. } => {
            format!("{}/{len}", fmt_ip(a.mapped()))
        }
    }
}

impl Validator<'_> {
    /// `ports[i].addresses`: `"address/length"`, unicast, not the subnet's own address.
    pub(super) fn port_addresses(
        &mut self,
        key: &str,
        v: &Option<S<Vec<S<String>>>>,
    ) -> Vec<PortAddr> {
        let mut out: Vec<PortAddr> = Vec::new();
        for (i, a) in v.iter().flat_map(|l| l.get_ref().iter()).enumerate() {
            let k = format!("{key}[{i}]");
            let text = a.get_ref();
            let parsed = text
                .split_once('/')
                .ok_or_else(|| {
                    format!(
                        "'{text}' needs its subnet's length, e.g. 10.0.0.1/24 or 2001:db8::1/64"
                    )
                })
                .and_then(|(ip, len)| {
                    let ip = parse_ip(ip).map_err(|e| e.to_string())?;
                    let max = if super::super::unmap_v4(ip).is_some() {
                        32
                    } else {
                        128
                    };
                    let len: u8 = len
                        .parse()
                        .ok()
                        .filter(|l| *l <= max && len.bytes().all(|b| b.is_ascii_digit()))
                        .ok_or_else(|| format!("'{text}': length '{len}' is not 0 to {max}"))?;
                    Ok(match super::super::unmap_v4(ip) {
                        Some(a) => PortAddr::V4 { addr: a, len },
                        None => PortAddr::V6 { addr: ip, len },
                    })
                });
            let addr = match parsed {
                Ok(a) => a,
                Err(m) => {
                    self.err(k, span(a), m);
                    continue;
                }
            };
            let ip = addr.mapped();
            let unicast = match addr {
                PortAddr::V4 { addr: a, len } => {
                    // Not multicast or limited broadcast; with more than two hosts, not the
                    // subnet's own or broadcast address either.
                    let host = !super::super::v4_mask(len);
                    !Ipv4Addr::from(a).is_multicast()
                        && a != 0
                        && a != u32::MAX
                        && (len >= 31 || (a & host != 0 && a & host != host))
                }
                PortAddr::V6 { addr: a, .. } => (a >> 120) != 0xff && a != 0,
            };
            if !unicast {
                self.err(
                    k,
                    span(a),
                    format!("'{text}' is not a host's unicast address"),
                );
            } else if let Some(j) = out.iter().position(|o| o.mapped() == ip) {
                self.err(k, span(a), format!("'{text}' is already {key}[{j}]"));
            } else {
                out.push(addr);
            }
        }
        out
    }

    /// Across ports: an address belongs to one port, and two ports' subnets do not overlap (a
    /// destination in both would have two connected routes).
    pub(super) fn addresses_across_ports(&mut self, ports: &[PortConfig]) {
        for (i, p) in ports.iter().enumerate() {
            for q in &ports[..i] {
                for a in &p.addresses {
                    for b in &q.addresses {
                        let (sa, sb) = (a.subnet(), b.subnet());
                        if sa.contains_mapped(b.mapped()) || sb.contains_mapped(a.mapped()) {
                            self.err(
                                format!("ports[{i}].addresses"),
                                None,
                                format!(
                                    "{} on '{}' overlaps {} on '{}': a subnet belongs to one port",
                                    fmt_addr(a),
                                    p.name,
                                    fmt_addr(b),
                                    q.name
                                ),
                            );
                        }
                    }
                }
            }
        }
    }

    /// `[[wire]]`: each pair two distinct ports, a port in one pair at most, and no addresses on
    /// a wire port (it is transparent: it has no address of its own).
    pub(super) fn wire(
        &mut self,
        raw: Option<&Vec<S<RawWire>>>,
        ports: &[PortConfig],
    ) -> Vec<(u16, u16)> {
        let mut pairs: Vec<(u16, u16)> = Vec::new();
        for (i, w) in raw.into_iter().flatten().enumerate() {
            let key = format!("wire[{i}].ports");
            let table = span(w);
            let Some(list) = self.required(&key, &w.get_ref().ports, &table) else {
                continue;
            };
            let lspan = span(list);
            if list.get_ref().len() != 2 {
                self.err(
                    &key,
                    lspan,
                    format!(
                        "a wire pair is two ports, e.g. [\"dc0\", \"wan0\"] ({} given)",
                        list.get_ref().len()
                    ),
                );
                continue;
            }
            let ids: Vec<Option<u16>> = list
                .get_ref()
                .iter()
                .enumerate()
                .map(|(j, r)| self.port_ref(&format!("{key}[{j}]"), r))
                .collect();
            let (Some(a), Some(b)) = (ids[0], ids[1]) else {
                continue;
            };
            if a == b {
                self.err(&key, lspan, "a port cannot be wired to itself");
                continue;
            }
            if let Some(j) = pairs
                .iter()
                .position(|&(x, y)| [x, y].contains(&a) || [x, y].contains(&b))
            {
                self.err(&key, lspan, format!("a port is already in wire[{j}]"));
                continue;
            }
            for id in [a, b] {
                if let Some(p) = ports.iter().find(|p| p.id == id && !p.addresses.is_empty()) {
                    self.err(
                        &key,
                        lspan.clone(),
                        format!(
                            "'{}' has addresses: a wire port is transparent and has none (remove \
                             ports.addresses or the pair)",
                            p.name
                        ),
                    );
                }
            }
            pairs.push((a.min(b), a.max(b)));
        }
        pairs
    }

    /// A route's or static entry's port must be routed, not in a wire pair.
    pub(super) fn routed_port(&mut self, key: &str, at: Span, port: u16, wire: &[(u16, u16)]) {
        if let Some(j) = wire.iter().position(|&(a, b)| a == port || b == port) {
            self.err(
                key,
                at,
                format!("port {port} is in wire[{j}]: a wire port forwards only to its pair"),
            );
        }
    }

    /// One next hop of a route at `key` (`routes[i]` or `routes[i].next_hops[j]`): `port`
    /// (routed) and exactly one of `next_hop_mac` / `next_hop`. On an error the hop holds
    /// placeholders (the error is recorded; no config comes out of this validation).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn route_hop(
        &mut self,
        key: &str,
        table: &Span,
        port: &Option<S<PortRef>>,
        mac: &Option<S<String>>,
        gw: &Option<S<String>>,
        prefix: Option<IpPrefix>,
        ports: &[PortConfig],
        wire: &[(u16, u16)],
    ) -> RouteHop {
        let port = self
            .required(&format!("{key}.port"), port, table)
            .and_then(|p| {
                self.port_ref(&format!("{key}.port"), p)
                    .map(|id| (id, span(p)))
            });
        if let Some((id, at)) = &port {
            self.routed_port(&format!("{key}.port"), at.clone(), *id, wire);
        }
        let port = port.map(|(id, _)| id);
        let (nh, via) = match (mac, gw) {
            (Some(m), None) => (self.mac(&format!("{key}.next_hop_mac"), m, true), None),
            (None, Some(ip)) => {
                let pc = port.and_then(|id| ports.iter().find(|p| p.id == id));
                let via = self.next_hop(&format!("{key}.next_hop"), ip, prefix, pc);
                ([0; 6], via)
            }
            (Some(_), Some(ip)) => {
                self.err(
                    format!("{key}.next_hop"),
                    span(ip),
                    "give next_hop (resolved by ARP / neighbour discovery) or next_hop_mac \
                     (static), not both",
                );
                ([0; 6], None)
            }
            (None, None) => {
                self.err(
                    format!("{key}.next_hop_mac"),
                    table.clone(),
                    "missing: a route needs next_hop_mac (static) or next_hop (a gateway \
                     address, resolved by ARP / neighbour discovery)",
                );
                ([0; 6], None)
            }
        };
        RouteHop {
            port: port.unwrap_or(0),
            next_hop_mac: nh,
            next_hop: via,
        }
    }

    /// `routes[i].next_hops`: an ECMP group of 1 ..= [`MAX_ECMP_MEMBERS`] distinct members,
    /// each a next hop as [`Validator::route_hop`] checks it; the route itself then has no
    /// `port`, `next_hop_mac` or `next_hop`.
    pub(super) fn ecmp_group(
        &mut self,
        key: &str,
        r: &RawRoute,
        group: &S<Vec<S<RawHop>>>,
        prefix: Option<IpPrefix>,
        ports: &[PortConfig],
        wire: &[(u16, u16)],
    ) -> Vec<RouteHop> {
        let gkey = format!("{key}.next_hops");
        for (name, at) in [
            ("port", r.port.as_ref().map(span)),
            ("next_hop_mac", r.next_hop_mac.as_ref().map(span)),
            ("next_hop", r.next_hop.as_ref().map(span)),
        ] {
            if let Some(at) = at {
                self.err(
                    format!("{key}.{name}"),
                    at,
                    "a route with next_hops (an ECMP group) gives each member's port and \
                     next_hop_mac / next_hop inside next_hops, not on the route",
                );
            }
        }
        let members = group.get_ref();
        if members.is_empty() {
            self.err(
                &gkey,
                span(group),
                "an ECMP group needs at least one next hop ({ port = ..., next_hop_mac = ... })",
            );
            return Vec::new();
        }
        if members.len() > MAX_ECMP_MEMBERS {
            self.err(
                &gkey,
                span(group),
                format!(
                    "an ECMP group holds at most {MAX_ECMP_MEMBERS} next hops, this one has {}",
                    members.len()
                ),
            );
        }
        let mut hops: Vec<RouteHop> = Vec::with_capacity(members.len());
        for (j, m) in members.iter().enumerate() {
            let mkey = format!("{gkey}[{j}]");
            let at = span(m);
            let m = m.get_ref();
            let hop = self.route_hop(
                &mkey,
                &at,
                &m.port,
                &m.next_hop_mac,
                &m.next_hop,
                prefix,
                ports,
                wire,
            );
            if let Some(k) = hops.iter().position(|h| *h == hop) {
                self.err(
                    &mkey,
                    at,
                    format!(
                        "the same next hop as {gkey}[{k}]: list each member once (a member \
                         listed twice is not weighted, it is a mistake)"
                    ),
                );
            }
            hops.push(hop);
        }
        hops
    }

    /// `routes[i].next_hop`: a gateway of the prefix's family on one of the port's subnets.
    pub(super) fn next_hop(
        &mut self,
        key: &str,
        v: &S<String>,
        prefix: Option<IpPrefix>,
        port: Option<&PortConfig>,
    ) -> Option<u128> {
        let ip = match parse_ip(v.get_ref()) {
            Ok(ip) => ip,
            Err(e) => {
                self.err(key, span(v), e.to_string());
                return None;
            }
        };
        let v4 = super::super::unmap_v4(ip).is_some();
        if let Some(p) = prefix {
            if matches!(p, IpPrefix::V4 { .. }) != v4 {
                self.err(
                    key,
                    span(v),
                    format!("{} is not of the prefix's family ({p})", v.get_ref()),
                );
                return None;
            }
        }
        let port = port?;
        if !port.addresses.iter().any(|a| a.contains(ip)) {
            let subnets: Vec<String> = port.addresses.iter().map(fmt_addr).collect();
            self.err(
                key,
                span(v),
                format!(
                    "{} is on none of port '{}''s subnets ({}): a gateway must be on a directly \
                     attached subnet (give the port an address in ports.addresses)",
                    v.get_ref(),
                    port.name,
                    if subnets.is_empty() {
                        "it has no addresses".to_owned()
                    } else {
                        subnets.join(", ")
                    }
                ),
            );
        }
        Some(ip)
    }

    /// `[neighbors]`.
    pub(super) fn neighbors(
        &mut self,
        raw: Option<&RawNeighbors>,
        ports: &[PortConfig],
        wire: &[(u16, u16)],
        sw: &SwitchConfig,
    ) -> NeighborConfig {
        let d = NeighborConfig::default();
        let Some(n) = raw else {
            return d;
        };
        let capacity = self.int_or(
            "neighbors.capacity",
            &n.capacity,
            d.capacity as i64,
            1,
            MAX_NEIGHBORS,
        ) as usize;
        if let Some(c) = &n.capacity {
            let bytes = capacity as u64 * NEIGHBOR_ENTRY_BYTES;
            self.memory(
                "neighbors.capacity",
                span(c),
                "the neighbour table",
                bytes,
                sw,
            );
        }
        let reachable_ms = self.int_or(
            "neighbors.reachable_ms",
            &n.reachable_ms,
            (d.reachable_ns / 1_000_000) as i64,
            1,
            3_600_000,
        );
        let probes = self.int_or("neighbors.probes", &n.probes, d.probes as i64, 0, 10);
        let retrans_ms = self.int_or(
            "neighbors.retrans_ms",
            &n.retrans_ms,
            (d.retrans_ns / 1_000_000) as i64,
            1,
            60_000,
        );
        let mut statics: Vec<StaticNeighbor> = Vec::new();
        for (i, e) in n.statics.iter().flatten().enumerate() {
            let key = |k: &str| format!("neighbors.static[{i}].{k}");
            let table = span(e);
            let e = e.get_ref();
            let port = self
                .required(&key("port"), &e.port, &table)
                .and_then(|p| self.port_ref(&key("port"), p).map(|id| (id, span(p))));
            let mac = self
                .required(&key("mac"), &e.mac, &table)
                .map(|m| self.mac(&key("mac"), m, true));
            let ip = self.required(&key("ip"), &e.ip, &table).and_then(|v| {
                match parse_ip(v.get_ref()) {
                    Ok(ip) => Some((ip, span(v))),
                    Err(e) => {
                        self.err(key("ip"), span(v), e.to_string());
                        None
                    }
                }
            });
            let (Some((port, pspan)), Some(mac), Some((ip, ispan))) = (port, mac, ip) else {
                continue;
            };
            self.routed_port(&key("port"), pspan, port, wire);
            if let Some(p) = ports.iter().find(|p| p.id == port) {
                if !p.addresses.iter().any(|a| a.contains(ip)) {
                    self.err(
                        key("ip"),
                        ispan.clone(),
                        format!(
                            "{} is on none of port '{}''s subnets: a neighbour is on a directly \
                             attached subnet",
                            fmt_ip(ip),
                            p.name
                        ),
                    );
                }
            }
            if let Some(j) = statics.iter().position(|s| s.port == port && s.ip == ip) {
                self.err(
                    key("ip"),
                    ispan,
                    format!(
                        "{} on port {port} is already neighbors.static[{j}] ({})",
                        fmt_ip(ip),
                        fmt_mac(&statics[j].mac)
                    ),
                );
                continue;
            }
            statics.push(StaticNeighbor { port, ip, mac });
        }
        NeighborConfig {
            capacity,
            reachable_ns: reachable_ms as u64 * 1_000_000,
            probes: probes as u32,
            retrans_ns: retrans_ms as u64 * 1_000_000,
            statics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ips_map_v4_into_v6() {
        assert_eq!(parse_ip("10.0.0.1"), Ok(0xffff_0a00_0001));
        assert_eq!(parse_ip("2001:db8::1"), Ok(0x2001_0db8 << 96 | 1));
        assert!(parse_ip("::ffff:10.0.0.1").is_err());
        assert!(parse_ip("10.0.0").is_err());
        assert_eq!(fmt_ip(0xffff_0a00_0001), "10.0.0.1");
    }
}
