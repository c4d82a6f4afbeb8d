//! `[[wire]]`, `ports.addresses`, `routes.next_hop` and `[neighbors]`: what is accepted and
//! every mistake's message (DESIGN.md section 4b, docs/config.md).

use longhaul_control::config::{map_v4, Config, PortAddr, StaticNeighbor};
use std::path::Path;

/// Three ports: `a` (id 0) and `b` (id 1) with addresses, `c` (id 2) and `d` (id 3) without.
fn cfg(extra: &str) -> String {
    format!(
        r#"[switch]
name = "t"

[[ports]]
id = 0
name = "a"
mac = "02:00:00:00:00:01"
rate_gbps = 100
addresses = ["10.0.0.1/24", "2001:db8:a::1/64"]

[[ports]]
id = 1
name = "b"
mac = "02:00:00:00:00:02"
rate_gbps = 100
addresses = ["192.0.2.1/30"]

[[ports]]
id = 2
name = "c"
mac = "02:00:00:00:00:03"
rate_gbps = 100

[[ports]]
id = 3
name = "d"
mac = "02:00:00:00:00:04"
rate_gbps = 100

{extra}"#
    )
}

fn ok(text: &str) -> Config {
    Config::parse(text, Path::new("t.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Every error, as "key: message" without the place.
fn errors(text: &str) -> Vec<String> {
    match Config::parse_all(text, Path::new("t.toml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(es) => es
            .iter()
            .map(|e| {
                let m = match e.msg.rfind(" (line ") {
                    Some(i) => &e.msg[..i],
                    None => &e.msg,
                };
                format!("{}: {m}", e.key)
            })
            .collect(),
    }
}

#[track_caller]
fn has(text: &str, want: &str) {
    let es = errors(text);
    assert!(es.iter().any(|e| e == want), "no '{want}' in {es:#?}");
}

#[test]
fn a_full_example_is_read_as_written() {
    let c = ok(&cfg(r#"
[[wire]]
ports = ["c", "d"]

[[routes]]
prefix = "10.1.0.0/16"
port = "b"
next_hop = "192.0.2.2"

[neighbors]
capacity = 10
reachable_ms = 5000
probes = 2
retrans_ms = 500

[[neighbors.static]]
port = "a"
ip = "10.0.0.9"
mac = "02:00:00:00:10:09"
"#));
    assert_eq!(c.wire, vec![(2, 3)]);
    assert_eq!(
        c.ports[0].addresses,
        vec![
            PortAddr::V4 {
                addr: 0x0a00_0001,
                len: 24
            },
            PortAddr::V6 {
                addr: 0x2001_0db8_000a_0000_0000_0000_0000_0001,
                len: 64
            }
        ]
    );
    assert_eq!(c.routes[0].hops[0].next_hop, Some(map_v4(0xc000_0202)));
    assert_eq!(c.neighbors.capacity, 10);
    assert_eq!(c.neighbors.reachable_ns, 5_000_000_000);
    assert_eq!(
        (c.neighbors.probes, c.neighbors.retrans_ns),
        (2, 500_000_000)
    );
    assert_eq!(
        c.neighbors.statics,
        vec![StaticNeighbor {
            port: 0,
            ip: map_v4(0x0a00_0009),
            mac: [2, 0, 0, 0, 0x10, 9]
        }]
    );
    // Defaults.
    let d = ok(&cfg(""));
    assert!(d.wire.is_empty());
    assert_eq!(d.neighbors.capacity, 4096);
    assert_eq!(d.neighbors.reachable_ns, 30_000_000_000);
}

#[test]
fn wire_pairs_are_two_distinct_unaddressed_ports_each_in_one_pair() {
    has(
        &cfg("[[wire]]\nports = [\"c\"]\n"),
        "wire[0].ports: a wire pair is two ports, e.g. [\"dc0\", \"wan0\"] (1 given)",
    );
    has(
        &cfg("[[wire]]\nports = [\"c\", \"c\"]\n"),
        "wire[0].ports: a port cannot be wired to itself",
    );
    has(
        &cfg("[[wire]]\nports = [\"c\", \"d\"]\n[[wire]]\nports = [\"d\", 1]\n"),
        "wire[1].ports: a port is already in wire[0]",
    );
    has(
        &cfg("[[wire]]\nports = [\"a\", \"c\"]\n"),
        "wire[0].ports: 'a' has addresses: a wire port is transparent and has none (remove \
         ports.addresses or the pair)",
    );
    has(
        &cfg("[[wire]]\nports = [\"c\", \"x\"]\n"),
        "wire[0].ports[1]: no port named 'x' (ports: a, b, c, d)",
    );
    has(
        &cfg("[[wire]]\n"),
        "wire[0].ports: missing (this key is required)",
    );
}

#[test]
fn wire_ports_take_no_routes_l2_entries_or_neighbours() {
    let w = "[[wire]]\nports = [\"c\", \"d\"]\n";
    has(
        &cfg(&format!(
            "{w}[[routes]]\nprefix = \"10.9.0.0/16\"\nport = \"c\"\nnext_hop_mac = \"02:00:00:00:09:01\"\n"
        )),
        "routes[0].port: port 2 is in wire[0]: a wire port forwards only to its pair",
    );
    has(
        &cfg(&format!(
            "{w}[[l2]]\nmac = \"02:00:00:00:09:01\"\nport = \"d\"\n"
        )),
        "l2[0].port: port 3 is in wire[0]: a wire port forwards only to its pair",
    );
}

#[test]
fn port_addresses_are_host_addresses_with_a_length_on_one_port() {
    let port = |addrs: &str| {
        format!(
            "[switch]\nname = \"t\"\n[[ports]]\nid = 0\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\n\
             rate_gbps = 100\naddresses = {addrs}\n[[ports]]\nid = 1\nname = \"b\"\n\
             mac = \"02:00:00:00:00:02\"\nrate_gbps = 100\naddresses = [\"10.0.0.200/25\"]\n"
        )
    };
    has(
        &port("[\"10.0.0.1\"]"),
        "ports[0].addresses[0]: '10.0.0.1' needs its subnet's length, e.g. 10.0.0.1/24 or \
         2001:db8::1/64",
    );
    has(
        &port("[\"10.0.0.1/33\"]"),
        "ports[0].addresses[0]: '10.0.0.1/33': length '33' is not 0 to 32",
    );
    has(
        &port("[\"10.0.0.0/24\"]"),
        "ports[0].addresses[0]: '10.0.0.0/24' is not a host's unicast address",
    );
    has(
        &port("[\"10.0.0.255/24\"]"),
        "ports[0].addresses[0]: '10.0.0.255/24' is not a host's unicast address",
    );
    has(
        &port("[\"224.0.0.1/4\"]"),
        "ports[0].addresses[0]: '224.0.0.1/4' is not a host's unicast address",
    );
    has(
        &port("[\"ff02::1/64\"]"),
        "ports[0].addresses[0]: 'ff02::1/64' is not a host's unicast address",
    );
    has(
        &port("[\"::ffff:10.0.0.1/24\"]"),
        "ports[0].addresses[0]: '::ffff:10.0.0.1' is an IPv4-mapped IPv6 address: write the IPv4 address",
    );
    has(
        &port("[\"10.0.0.1/24\"]"),
        "ports[1].addresses: 10.0.0.200/25 on 'b' overlaps 10.0.0.1/24 on 'a': a subnet belongs to one port",
    );
    // Point-to-point /31 and /30 are fine.
    let c = ok(&port("[\"192.0.2.0/31\"]"));
    assert_eq!(c.ports[0].addresses.len(), 1);
}

#[test]
fn a_gateway_is_on_the_route_s_port_subnet_and_of_its_family() {
    let r = |kv: &str| {
        cfg(&format!(
            "[[routes]]\nprefix = \"10.1.0.0/16\"\nport = \"b\"\n{kv}\n"
        ))
    };
    has(
        &r("next_hop = \"10.0.0.2\""),
        "routes[0].next_hop: 10.0.0.2 is on none of port 'b''s subnets (192.0.2.1/30): a \
         gateway must be on a directly attached subnet (give the port an address in \
         ports.addresses)",
    );
    has(
        &r("next_hop = \"2001:db8:a::2\""),
        "routes[0].next_hop: 2001:db8:a::2 is not of the prefix's family (10.1.0.0/16)",
    );
    has(
        &r("next_hop = \"192.0.2.2\"\nnext_hop_mac = \"02:00:00:00:09:01\""),
        "routes[0].next_hop: give next_hop (resolved by ARP / neighbour discovery) or \
         next_hop_mac (static), not both",
    );
    has(
        &r("next_hop = \"bogus\""),
        "routes[0].next_hop: 'bogus' is not an IPv4 or IPv6 address",
    );
    let c = ok(&r("next_hop = \"192.0.2.2\""));
    assert_eq!(c.routes[0].hops[0].next_hop, Some(map_v4(0xc000_0202)));
}

#[test]
fn neighbour_settings_and_static_entries_are_checked() {
    has(
        &cfg("[neighbors]\ncapacity = 0\n"),
        "neighbors.capacity: 0 is out of range: must be 1 to 1048576",
    );
    has(
        &cfg("[neighbors]\nprobes = 11\n"),
        "neighbors.probes: 11 is out of range: must be 0 to 10",
    );
    has(
        &cfg("[neighbors]\nretrans_ms = 0\n"),
        "neighbors.retrans_ms: 0 is out of range: must be 1 to 60000",
    );
    has(&cfg("[neighbors]\nbogus = 1\n"), "neighbors.bogus: unknown field `bogus`, expected one of `capacity`, `reachable_ms`, `probes`, `retrans_ms`, `static`");
    let s = |kv: &str| cfg(&format!("[[neighbors.static]]\n{kv}\n"));
    has(
        &s("port = \"b\"\nip = \"10.0.0.9\"\nmac = \"02:00:00:00:10:09\""),
        "neighbors.static[0].ip: 10.0.0.9 is on none of port 'b''s subnets: a neighbour is on a \
         directly attached subnet",
    );
    has(
        &s("port = \"a\"\nip = \"10.0.0.9\"\nmac = \"ff:ff:ff:ff:ff:ff\""),
        "neighbors.static[0].mac: ff:ff:ff:ff:ff:ff is a multicast/broadcast MAC: a unicast \
         address is needed",
    );
    has(
        &s("port = \"a\"\nmac = \"02:00:00:00:10:09\""),
        "neighbors.static[0].ip: missing (this key is required)",
    );
    let dup =
        "[[neighbors.static]]\nport = \"a\"\nip = \"10.0.0.9\"\nmac = \"02:00:00:00:10:09\"\n";
    has(
        &cfg(&format!("{dup}{dup}")),
        "neighbors.static[1].ip: 10.0.0.9 on port 0 is already neighbors.static[0] \
         (02:00:00:00:10:09)",
    );
}
