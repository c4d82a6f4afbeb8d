//! Where the box sits (DESIGN.md section 4b) on `configs/routed-arp.toml`: a wire pair passes
//! every frame unchanged; routed ports answer ARP / neighbour solicitations for their addresses,
//! resolve next hops through the control plane, age entries, and never flood.

use longhaul_control::config::Config;
use longhaul_control::plane::Inline;
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::packet::HeapPool;
use longhaul_dataplane::replay::{Emitted, Harness};
use longhaul_dataplane::wire::arp::{self, Arp};
use longhaul_dataplane::wire::ndp::{self, Nd};
use longhaul_dataplane::wire::{checksum, ethernet::MacAddr, roce};
use longhaul_pipelines::baseline::control::BaselineControl;
use longhaul_pipelines::baseline::Baseline;
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;

const DC0: usize = 0;
const WAN0: usize = 1;
const DC1: usize = 2;
const WAN1: usize = 3;
const DC0_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const WAN0_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0x10, 7];
const GW_MAC: [u8; 6] = [2, 0, 0, 0, 0x20, 2];
/// Control latency in these tests (replay runs the control plane inline after it).
const CTL_NS: u64 = 10_000;

fn config() -> Config {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/routed-arp.toml");
    longhaul_pipelines::load_config(&p).expect("configs/routed-arp.toml")
}

fn harness(cfg: &Config) -> Harness<HeapPool, Baseline> {
    let mut sw = Switch::new(switch_spec(cfg), heap_pool(cfg), Baseline::new(cfg));
    sw.set_inline_control(Box::new(Inline(BaselineControl::new(cfg))), CTL_NS);
    Harness::new(sw)
}

fn v4(a: &str) -> u32 {
    u32::from(a.parse::<Ipv4Addr>().unwrap())
}

fn arp_frame(op: u16, dst: [u8; 6], sha: [u8; 6], spa: &str, tha: [u8; 6], tpa: &str) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&sha);
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    let a = Arp {
        op,
        sha,
        spa: v4(spa),
        tha,
        tpa: v4(tpa),
    };
    a.write(&mut f[14..]).unwrap();
    f
}

/// A broadcast ARP request from the host (`spa`) for `tpa`.
fn who_has(spa: &str, tpa: &str) -> Vec<u8> {
    arp_frame(arp::OP_REQUEST, [0xff; 6], HOST_MAC, spa, [0; 6], tpa)
}

/// A UDP datagram (RoCEv2-looking is not needed here) from `src` to `dst`.
fn udp(dst_mac: [u8; 6], src: &str, dst: &str, ttl: u8) -> Vec<u8> {
    let a = roce::RoceAddrs {
        src_mac: MacAddr(HOST_MAC),
        dst_mac: MacAddr(dst_mac),
        src_ip: src.parse().unwrap(),
        dst_ip: dst.parse().unwrap(),
        udp_sport: 4000,
        dscp: 0,
        ecn: 0,
    };
    let bth = roce::BthRepr {
        opcode: roce::opcode::RC_SEND_ONLY,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: 0xffff,
        fecn: false,
        becn: false,
        dest_qp: 7,
        ack_req: false,
        psn: 1,
    };
    let mut b = [0u8; 256];
    let n = roce::build_roce_v4(&mut b, &a, &bth, &[0; 32]).unwrap();
    b[14 + 8] = ttl;
    let c = checksum::checksum(&{
        let mut h = [0u8; 20];
        h.copy_from_slice(&b[14..34]);
        h[10] = 0;
        h[11] = 0;
        h
    });
    b[24..26].copy_from_slice(&c.to_be_bytes());
    b[..n].to_vec()
}

fn on(out: &[Emitted], port: usize) -> Vec<&Emitted> {
    out.iter().filter(|e| e.port_idx == port).collect()
}

fn drops(h: &Harness<HeapPool, Baseline>, r: DropReason) -> u64 {
    h.sw.stats().drops.get(r)
}

#[test]
fn a_wire_pair_passes_every_frame_unchanged_both_ways() {
    let cfg = config();
    let mut h = harness(&cfg);
    let lldp = {
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x0e]);
        f[6..12].copy_from_slice(&HOST_MAC);
        f[12..14].copy_from_slice(&0x88ccu16.to_be_bytes());
        f
    };
    let frames = [
        who_has("10.9.0.1", "10.9.0.2"),
        lldp,
        // TTL 1: a routed hop would drop it; a wire passes it, TTL untouched.
        udp([2, 0, 0, 0, 0x30, 1], "10.9.0.1", "10.8.0.1", 1),
        // Too short to be anything: a cable passes it too.
        vec![0xab; 20],
    ];
    for (i, f) in frames.iter().enumerate() {
        h.put(DC1, 1_000 + i as u64 * 1_000, f);
        h.put(WAN1, 1_500 + i as u64 * 1_000, f);
    }
    h.run_to_idle();
    let out = h.take();
    let to_wan1: Vec<&[u8]> = on(&out, WAN1).iter().map(|e| &e.data[..]).collect();
    let to_dc1: Vec<&[u8]> = on(&out, DC1).iter().map(|e| &e.data[..]).collect();
    let want: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    assert_eq!(to_wan1, want);
    assert_eq!(to_dc1, want);
    assert_eq!(out.len(), 8, "nothing anywhere else");
    assert_eq!(h.sw.pipeline().fwd.stats.wired, 8);
    assert_eq!(h.sw.stats().drops.total(), 0);
    // The anomalies are still counted.
    assert!(h.sw.pipeline().fwd.anomalies.total() >= 2);
}

#[test]
fn arp_for_a_port_address_is_answered_and_other_arp_is_consumed_not_flooded() {
    let cfg = config();
    let mut h = harness(&cfg);
    let req = who_has("10.0.0.7", "10.0.0.1");
    h.put(DC0, 1_000, &req);
    // For a neighbour's address, and for wan0's address asked on dc0: neither is answered.
    let other = who_has("10.0.0.7", "10.0.0.9");
    h.put(DC0, 2_000, &other);
    let wrong_port = who_has("10.0.0.7", "192.0.2.1");
    h.put(DC0, 3_000, &wrong_port);
    h.run_to_idle();
    let out = h.take();
    assert_eq!(out.len(), 1, "one reply, nothing flooded: {out:?}");
    let r = &out[0];
    assert_eq!(r.port_idx, DC0);
    assert_eq!(r.data.len(), 60);
    assert_eq!(&r.data[0..6], &HOST_MAC);
    assert_eq!(&r.data[6..12], &DC0_MAC);
    let a = Arp::parse(&r.data[14..]).unwrap();
    assert_eq!(a.op, arp::OP_REPLY);
    assert_eq!((a.sha, a.spa), (DC0_MAC, v4("10.0.0.1")));
    assert_eq!((a.tha, a.tpa), (HOST_MAC, v4("10.0.0.7")));
    let st = &h.sw.pipeline().fwd.neigh.stats;
    assert_eq!((st.arp_answered, st.not_for_us), (1, 2));
    // An unpadded request (42 bytes, as a virtual link delivers it) gets a 60-byte reply.
    let short = &who_has("10.0.0.8", "10.0.0.1")[..42];
    h.put(DC0, 5_000, short);
    h.run_to_idle();
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data.len(), 60);
    assert_eq!(&out[0].data[42..], &[0u8; 18][..]);
    // The request taught the control plane the host's MAC, on every worker.
    let key = (0u16, longhaul_control::config::map_v4(v4("10.0.0.7")));
    assert_eq!(h.sw.pipeline().fwd.neigh.known(&key), Some(HOST_MAC));
}

#[test]
fn a_neighbour_solicitation_for_a_port_address_gets_an_advertisement() {
    let cfg = config();
    let mut h = harness(&cfg);
    let me = u128::from("2001:db8:a::1".parse::<Ipv6Addr>().unwrap());
    let host = u128::from("2001:db8:a::7".parse::<Ipv6Addr>().unwrap());
    let mut ns = [0u8; 128];
    let n = ndp::build_solicitation(&mut ns, HOST_MAC, host, me).unwrap();
    h.put(DC0, 1_000, &ns[..n]);
    // A solicitation for someone else's address on the link: consumed.
    let mut other = [0u8; 128];
    let m = ndp::build_solicitation(&mut other, HOST_MAC, host, me + 5).unwrap();
    h.put(DC0, 2_000, &other[..m]);
    h.run_to_idle();
    let out = h.take();
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].port_idx, DC0);
    assert_eq!(&out[0].data[0..6], &HOST_MAC);
    let na = Nd::parse(&out[0].data[14..]).unwrap();
    assert_eq!(
        (na.kind, na.src, na.dst, na.target),
        (ndp::NA, me, host, me)
    );
    assert!(na.solicited && na.override_);
    assert_eq!(na.lladdr, Some(DC0_MAC));
    let key = (0u16, host);
    assert_eq!(h.sw.pipeline().fwd.neigh.known(&key), Some(HOST_MAC));
}

/// Data to 10.1.0.5 goes through the gateway 192.0.2.2 on wan0.
fn to_remote(ttl: u8) -> Vec<u8> {
    udp(DC0_MAC, "10.0.0.7", "10.1.0.5", ttl)
}

#[test]
fn a_gateway_is_solicited_once_per_retrans_then_learned_then_used() {
    let cfg = config();
    let mut h = harness(&cfg);
    h.put(DC0, 1_000, &to_remote(64));
    h.put(DC0, 2_000, &to_remote(64));
    h.run_to_idle();
    let out = h.take();
    assert_eq!(out.len(), 1, "one ARP request for two packets: {out:?}");
    let q = &out[0];
    assert_eq!(q.port_idx, WAN0);
    assert_eq!(&q.data[0..6], &[0xff; 6]);
    let a = Arp::parse(&q.data[14..]).unwrap();
    assert_eq!(
        (a.op, a.sha, a.spa),
        (arp::OP_REQUEST, WAN0_MAC, v4("192.0.2.1"))
    );
    assert_eq!(a.tpa, v4("192.0.2.2"));
    assert_eq!(drops(&h, DropReason::NeighborUnresolved), 2);

    // The gateway answers; the control plane installs it after its latency.
    let reply = arp_frame(
        arp::OP_REPLY,
        WAN0_MAC,
        GW_MAC,
        "192.0.2.2",
        WAN0_MAC,
        "192.0.2.1",
    );
    h.put(WAN0, 10_000, &reply);
    h.put(DC0, 10_000 + CTL_NS + 1_000, &to_remote(64));
    h.run_to_idle();
    let out = h.take();
    assert_eq!(out.len(), 1, "{out:?}");
    let d = &out[0];
    assert_eq!(d.port_idx, WAN0);
    assert_eq!(&d.data[0..6], &GW_MAC, "the learned MAC");
    assert_eq!(&d.data[6..12], &WAN0_MAC);
    assert_eq!(d.data[14 + 8], 63, "TTL - 1");
    let st = &h.sw.pipeline().fwd.neigh.stats;
    assert_eq!((st.solicited, st.learned), (1, 1));
}

#[test]
fn a_silent_neighbour_is_probed_then_dropped_and_solicited_again() {
    let cfg = config();
    let reach = cfg.neighbors.reachable_ns;
    let retrans = cfg.neighbors.retrans_ns;
    let mut h = harness(&cfg);
    let reply = arp_frame(
        arp::OP_REPLY,
        WAN0_MAC,
        GW_MAC,
        "192.0.2.2",
        WAN0_MAC,
        "192.0.2.1",
    );
    h.put(WAN0, 1_000, &reply);
    // Reachable: used, no probe.
    let t0 = 1_000 + CTL_NS + 1;
    h.put(DC0, t0, &to_remote(64));
    // Stale: still used, and a unicast probe goes out once per retrans.
    let t1 = t0 + reach;
    h.put(DC0, t1, &to_remote(64));
    h.put(DC0, t1 + 1, &to_remote(64));
    h.run_to_idle();
    let out = h.take();
    let data: Vec<_> = out.iter().filter(|e| e.data[12..14] == [8, 0]).collect();
    let arps: Vec<_> = out.iter().filter(|e| e.data[12..14] == [8, 6]).collect();
    assert_eq!(data.len(), 3, "all three sent: {out:?}");
    assert_eq!(arps.len(), 1);
    assert_eq!(&arps[0].data[0..6], &GW_MAC, "a unicast probe");
    // Probes unanswered: after `probes` of them and one more retrans, the entry fails.
    let mut t = t1;
    for _ in 1..cfg.neighbors.probes {
        t += retrans;
        h.put(DC0, t, &to_remote(64));
    }
    t += retrans;
    h.put(DC0, t, &to_remote(64));
    h.run_to_idle();
    let out = h.take();
    let probes = out
        .iter()
        .filter(|e| e.data[12..14] == [8, 6] && e.data[0] == 2);
    assert_eq!(probes.count() as u32, cfg.neighbors.probes - 1);
    let bcast: Vec<_> = out.iter().filter(|e| e.data[0..6] == [0xff; 6]).collect();
    assert_eq!(bcast.len(), 1, "solicited by broadcast again: {out:?}");
    assert_eq!(drops(&h, DropReason::NeighborUnresolved), 1);
    assert_eq!(h.sw.pipeline().fwd.neigh.stats.failed, 1);
}

#[test]
fn a_connected_host_is_resolved_and_the_switch_own_address_is_not_routed() {
    let cfg = config();
    let mut h = harness(&cfg);
    h.put(WAN0, 1_000, &udp(WAN0_MAC, "10.1.0.5", "10.0.0.42", 64));
    h.put(WAN0, 2_000, &udp(WAN0_MAC, "10.1.0.5", "10.0.0.1", 64));
    // The static neighbour needs no resolution.
    h.put(WAN0, 3_000, &udp(WAN0_MAC, "10.1.0.5", "10.0.0.254", 64));
    h.run_to_idle();
    let out = h.take();
    let arp_out: Vec<_> = out.iter().filter(|e| e.data[12..14] == [8, 6]).collect();
    assert_eq!(arp_out.len(), 1);
    assert_eq!(arp_out[0].port_idx, DC0);
    let a = Arp::parse(&arp_out[0].data[14..]).unwrap();
    assert_eq!((a.spa, a.tpa), (v4("10.0.0.1"), v4("10.0.0.42")));
    let data: Vec<_> = out.iter().filter(|e| e.data[12..14] == [8, 0]).collect();
    assert_eq!(data.len(), 1);
    assert_eq!(&data[0].data[0..6], &[2, 0, 0, 0, 0x10, 0xfe]);
    assert_eq!(h.sw.pipeline().fwd.stats.to_local, 1);
    assert_eq!(drops(&h, DropReason::NoRoute), 1);
}

#[test]
fn learning_is_only_from_the_port_s_own_subnets_and_the_table_is_bounded() {
    let mut cfg = config();
    cfg.neighbors.capacity = 2;
    let mut h = harness(&cfg);
    // A reply from an address that is not on wan0's subnet teaches nothing.
    let stray = arp_frame(
        arp::OP_REPLY,
        WAN0_MAC,
        GW_MAC,
        "10.66.0.1",
        WAN0_MAC,
        "192.0.2.1",
    );
    h.put(WAN0, 1_000, &stray);
    h.run_to_idle();
    let key = (1u16, longhaul_control::config::map_v4(v4("10.66.0.1")));
    assert_eq!(h.sw.pipeline().fwd.neigh.known(&key), None);
    // Three misses on dc0's subnet with room for two: the third is counted, not solicited.
    for (i, d) in ["10.0.0.21", "10.0.0.22", "10.0.0.23"].iter().enumerate() {
        h.put(WAN0, 10_000 + i as u64, &udp(WAN0_MAC, "10.1.0.5", d, 64));
    }
    h.run_to_idle();
    let out = h.take();
    assert_eq!(out.len(), 2, "{out:?}");
    let st = &h.sw.pipeline().fwd.neigh.stats;
    assert_eq!((st.solicited, st.table_full), (2, 1));
    assert_eq!(h.sw.pipeline().fwd.neigh.learned_len(), 2);
    // Counters are exported by name.
    let mut names = Vec::new();
    h.sw.pipeline().fwd.counters(&mut |n, _| names.push(n));
    assert!(names.contains(&"neighbor.table_full"));
}

#[test]
fn the_neighbors_table_lists_static_and_learned_entries_and_takes_static_ones() {
    use longhaul_control::plane::PipelineControl;
    use longhaul_dataplane::control::{Command, Punt};
    use longhaul_pipelines::baseline::neighbor::PUNT_NEIGHBOR;
    use longhaul_pipelines::baseline::BaselineCommand;
    use serde_json::json;
    let cfg = config();
    let mut c = BaselineControl::new(&cfg);
    assert!(c.tables().contains(&"neighbors".to_string()));
    // Learned from a punted ARP reply on wan0.
    let reply = arp_frame(
        arp::OP_REPLY,
        WAN0_MAC,
        GW_MAC,
        "192.0.2.2",
        WAN0_MAC,
        "192.0.2.1",
    );
    let mut cmds = Vec::new();
    c.on_punt(&Punt::packet(PUNT_NEIGHBOR, 1, 77, &reply), &mut |c| {
        cmds.push(c)
    });
    assert!(matches!(
        cmds.as_slice(),
        [Command::Pipeline(BaselineCommand::NeighborSet {
            port: 1,
            mac: Some(GW_MAC),
            is_static: false,
            ..
        })]
    ));
    let e = json!({"port": "dc0", "ip": "10.0.0.77", "mac": "02:00:00:00:10:77"});
    let (v, cmds) = c.insert("neighbors", &e).unwrap();
    assert_eq!(v["static"], true);
    assert!(matches!(
        cmds.as_slice(),
        [BaselineCommand::NeighborSet {
            port: 0,
            is_static: true,
            ..
        }]
    ));
    let l = c.list("neighbors", 0, 10).unwrap();
    assert_eq!(l["total"], 3, "{l}");
    let ips: Vec<&str> = l["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["ip"].as_str().unwrap())
        .collect();
    assert_eq!(ips, ["10.0.0.77", "10.0.0.254", "192.0.2.2"]);
    // Off-subnet and wire-port entries are refused.
    let bad = json!({"port": "dc0", "ip": "10.9.0.1", "mac": "02:00:00:00:10:77"});
    assert!(c.insert("neighbors", &bad).is_err());
    let wire = json!({"port": "dc1", "ip": "10.0.0.5", "mac": "02:00:00:00:10:77"});
    assert!(c.insert("neighbors", &wire).is_err());
    let (_, cmds) = c
        .delete("neighbors", &json!({"port": "dc0", "ip": "10.0.0.77"}))
        .unwrap();
    assert!(matches!(
        cmds.as_slice(),
        [BaselineCommand::NeighborSet {
            mac: None,
            is_static: true,
            ..
        }]
    ));
    // A reload of the unchanged file takes API-added static entries away (the file is the
    // truth) and puts a replaced configured one back; learned entries stay.
    let mine = json!({"port": "dc0", "ip": "10.0.0.78", "mac": "02:00:00:00:10:78"});
    c.insert("neighbors", &mine).unwrap();
    let over = json!({"port": "dc0", "ip": "10.0.0.254", "mac": "02:00:00:00:10:99"});
    c.insert("neighbors", &over).unwrap();
    let plan = c.reload(&cfg, &cfg).unwrap();
    let longhaul_control::plane::ReloadPlan::Tables(cmds) = plan else {
        panic!("a table reload expected");
    };
    let sets: Vec<(u128, Option<[u8; 6]>)> = cmds
        .iter()
        .filter_map(|c| match c {
            BaselineCommand::NeighborSet { ip, mac, .. } => Some((*ip, *mac)),
            _ => None,
        })
        .collect();
    let m = |a: &str| longhaul_control::config::map_v4(v4(a));
    assert_eq!(
        sets,
        [
            (m("10.0.0.78"), None),
            (m("10.0.0.254"), None),
            (m("10.0.0.254"), Some([2, 0, 0, 0, 0x10, 0xfe]))
        ]
    );
    assert_eq!(
        c.list("neighbors", 0, 10).unwrap()["total"],
        2,
        "the static and the learned"
    );
    // A gateway route through the API.
    let r = json!({"prefix": "10.7.0.0/16", "port": "wan0", "next_hop": "192.0.2.2"});
    let (v, _) = c.insert("routes", &r).unwrap();
    assert_eq!(v["next_hop"], "192.0.2.2");
    let off = json!({"prefix": "10.7.0.0/16", "port": "wan0", "next_hop": "10.0.0.2"});
    assert!(c.insert("routes", &off).is_err());
}
