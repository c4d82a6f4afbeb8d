//! The baseline pipeline end to end on virtual time: forwarding decisions, anomaly policy, and
//! a property test that random bytes and mutated RoCE frames never panic and are all accounted
//! for (forwarded or dropped by a named reason).

use longhaul_control::config::{Config, Policy};
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::engine::{Action, Ctx, Pipeline};
use longhaul_dataplane::packet::{BufPool, PacketBuf, QUEUE_OF_CLASS};
use longhaul_dataplane::packet::{HeapPool, FLAG_CONTROL};
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::replay::Harness;
use longhaul_dataplane::wire::icrc;
use longhaul_pipelines::baseline::ingress::{ingress, Ingress};
use longhaul_pipelines::baseline::{Baseline, BaselineCommand, Forwarding};
use longhaul_pipelines::switch_spec;
use longhaul_runtime::platform::heap_pool;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn config() -> Config {
    longhaul_pipelines::load_config(&root().join("configs/baseline.toml"))
        .expect("configs/baseline.toml")
}

fn harness(cfg: &Config) -> Harness<HeapPool, Baseline> {
    Harness::new(Switch::new(
        switch_spec(cfg),
        heap_pool(cfg),
        Baseline::new(cfg),
    ))
}

/// The first frames of the shipped 64-flow trace (scapy-made RoCEv2, dc0 -> 10.1.0.x).
fn roce_frames() -> Vec<Vec<u8>> {
    read_pcap(root().join("examples/roce-64flows.pcap"))
        .expect("trace")
        .into_iter()
        .take(64)
        .map(|r| r.data)
        .collect()
}

#[test]
fn routed_roce_gets_next_hop_macs_ttl_minus_one_and_keeps_its_icrc() {
    let cfg = config();
    let mut h = harness(&cfg);
    let f = roce_frames().remove(0);
    h.put(0, 1_000, &f);
    h.run_to_idle();
    let out = h.take();
    assert_eq!(out.len(), 1);
    let o = &out[0];
    assert_eq!(o.port_idx, 2, "10.1.0.0/16 -> wan0");
    assert_eq!(&o.data[0..6], &[2, 0, 0, 0, 0x20, 1], "next hop MAC");
    assert_eq!(&o.data[6..12], &[2, 0, 0, 0, 0, 3], "wan0's MAC");
    assert_eq!(o.data[14 + 8], f[14 + 8] - 1, "TTL decremented");
    assert_eq!(
        icrc::verify(&o.data, 14),
        Ok(true),
        "TTL is masked: the ICRC stays valid"
    );
    assert_eq!(o.meta.class, 3, "DSCP 26 -> class 3");
    assert_eq!(h.sw.pipeline().fwd.stats.routed, 1);
}

#[test]
fn l2_entry_bridges_unchanged() {
    let cfg = config();
    let mut h = harness(&cfg);
    let mut f = roce_frames().remove(0);
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0x10, 2]); // the neighbour behind dc1
    h.put(0, 0, &f);
    h.run_to_idle();
    let out = h.take();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port_idx, 1);
    assert_eq!(out[0].data, f, "bridged frames are not modified");
    assert_eq!(h.sw.pipeline().fwd.stats.bridged, 1);
}

/// Frames to the ingress port's own MAC skip the L2 lookup (the router-MAC shortcut) only while
/// no L2 entry holds a port MAC: an entry for dc0's MAC, added at run time, bridges them, and its
/// removal routes them again.
#[test]
fn l2_entry_for_a_port_mac_turns_the_router_mac_shortcut_off() {
    use longhaul_dataplane::control::Command;
    use longhaul_pipelines::baseline::BaselineCommand;
    let cfg = config();
    let dc0_mac = cfg.ports[0].mac;
    let mut h = harness(&cfg);
    let f = roce_frames().remove(0);
    assert_eq!(f[0..6], dc0_mac, "the trace is sent to dc0's MAC");
    for k in 0..3u64 {
        h.put(0, 1_000 + k * 1_000, &f);
    }
    let insert = BaselineCommand::L2Insert {
        mac: dc0_mac,
        port: 1,
    };
    let delete = BaselineCommand::L2Delete { mac: dc0_mac };
    assert!(h
        .sw
        .enqueue_command(1_500, Command::Pipeline(insert))
        .is_ok());
    assert!(h
        .sw
        .enqueue_command(2_500, Command::Pipeline(delete))
        .is_ok());
    h.run_to_idle();
    let out = h.take();
    let ports: Vec<usize> = out.iter().map(|e| e.port_idx).collect();
    assert_eq!(
        ports,
        vec![2, 1, 2],
        "routed, bridged by the new entry, routed again"
    );
    assert_eq!(out[1].data, f, "the bridged frame is unchanged");
    let st = &h.sw.pipeline().fwd.stats;
    assert_eq!((st.routed, st.bridged), (2, 1));
}

/// A frame sent to another of the switch's port MACs (dc1's, arriving on dc0) is routed as the
/// frames to dc0's own MAC are, without an L2 lookup (no miss counted); a frame to an unknown MAC
/// is still looked up (a counted miss, then routed); and an L2 entry for dc1's MAC turns the
/// shortcut off (the frame is bridged by it, a counted hit).
#[test]
fn frames_to_another_port_mac_skip_the_l2_lookup() {
    use longhaul_dataplane::control::Command;
    use longhaul_pipelines::baseline::BaselineCommand;
    let cfg = config();
    let dc1_mac = cfg.ports[1].mac;
    let mut h = harness(&cfg);
    let mut to_dc1 = roce_frames().remove(0);
    to_dc1[0..6].copy_from_slice(&dc1_mac);
    let mut unknown = to_dc1.clone();
    unknown[0..6].copy_from_slice(&[2, 0, 0, 0x77, 0x77, 0x77]);
    let l2 = |h: &Harness<HeapPool, Baseline>| {
        let s = h.sw.pipeline().fwd.l2().stats();
        (s.hits, s.misses)
    };
    h.put(0, 1_000, &to_dc1);
    h.run_to_idle();
    assert_eq!(l2(&h), (0, 0), "another port's MAC: no lookup");
    h.put(0, 2_000, &unknown);
    h.run_to_idle();
    assert_eq!(l2(&h), (0, 1), "an unknown MAC: looked up, a miss");
    let insert = BaselineCommand::L2Insert {
        mac: dc1_mac,
        port: 1,
    };
    assert!(h
        .sw
        .enqueue_command(2_500, Command::Pipeline(insert))
        .is_ok());
    h.put(0, 3_000, &to_dc1);
    h.run_to_idle();
    assert_eq!(l2(&h), (1, 1), "dc1's MAC in the table: looked up, a hit");
    let ports: Vec<usize> = h.take().iter().map(|e| e.port_idx).collect();
    assert_eq!(
        ports,
        vec![2, 2, 1],
        "routed, routed, bridged by the new entry"
    );
    let st = &h.sw.pipeline().fwd.stats;
    assert_eq!((st.routed, st.bridged), (2, 1));
}

/// The baseline's ingress with the ports' range ends tested inline (the skeleton with
/// `PORT_MAC_ENDS`, as the MLCC DCI looks up), to hold that path to the same answers as the
/// baseline's.
struct EndsInline(Forwarding);

impl<P: BufPool> Ingress<P> for EndsInline {
    type State = ();
    const PORT_MAC_ENDS: bool = true;

    fn fwd(&mut self) -> &mut Forwarding {
        &mut self.0
    }

    fn before_parse(&mut self, _: &mut Ctx<'_, P>, _: &mut P::Buf) -> Result<(), Action> {
        Ok(())
    }
}

impl<P: BufPool> Pipeline<P> for EndsInline {
    type Command = BaselineCommand;

    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        ingress(self, ctx, pkt)
    }
}

/// The frames of [`another_port_mac_inside_the_range_and_between`] through a pipeline `L`
/// (its forwarding `fwd`): each case's lookup-or-not checked, the frames sent returned.
fn other_port_cases<L: Pipeline<HeapPool>>(
    cfg: &Config,
    pipeline: L,
    fwd: fn(&L) -> &Forwarding,
) -> Vec<(usize, Vec<u8>)> {
    let mut h = Harness::new(Switch::new(switch_spec(cfg), heap_pool(cfg), pipeline));
    let base = roce_frames().remove(0);
    let to = |last: u8| {
        let mut f = base.clone();
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, last]);
        f
    };
    let misses = |h: &Harness<HeapPool, L>| fwd(h.sw.pipeline()).l2().stats().misses;
    let mut t = 1_000;
    let mut sent = Vec::new();
    // (ingress port, destination MAC's last byte, looked up)
    for (port, last, looked_up) in [
        (0, 2, false),
        (0, 4, false),
        (0, 9, false),
        (1, 1, false),
        (0, 3, true),
        (0, 5, true),
        (0, 8, true),
        (0, 10, true),
    ] {
        let before = misses(&h);
        h.put(port, t, &to(last));
        h.run_to_idle();
        t += 1_000;
        assert_eq!(
            misses(&h) - before,
            looked_up as u64,
            "to :{last:02x} on port {port}"
        );
        sent.extend(h.take().into_iter().map(|o| (o.port_idx, o.data)));
    }
    sent
}

/// The other-port test with a port MAC inside the ports' range and MACs between that are no
/// port's: the ends and the inner port MAC skip the lookup, the MACs between are looked up;
/// the same with the range's ends tested inline, which sends the same frames.
#[test]
fn another_port_mac_inside_the_range_and_between() {
    let mut cfg = config();
    // Ports 02:..:01, :02, :09, :04: the range is :01-:09, :03 and :05-:08 are no port's.
    cfg.ports[2].mac = [2, 0, 0, 0, 0, 9];
    let a = other_port_cases(&cfg, Baseline::new(&cfg), |b| &b.fwd);
    let b = other_port_cases(&cfg, EndsInline(Forwarding::new(&cfg)), |e| &e.0);
    assert_eq!(a.len(), 8, "every frame sent");
    assert_eq!(a, b, "the inline ends send what the out-of-line test sends");
}

#[test]
fn anomalies_follow_the_configured_policy() {
    let base = roce_frames().remove(0);
    // Bad IPv4 header checksum.
    let mut bad_ck = base.clone();
    bad_ck[14 + 10] ^= 0xff;
    // TTL 1.
    let mut ttl1 = base.clone();
    ttl1[14 + 8] = 1;
    let ck = u16::from_be_bytes([ttl1[24], ttl1[25]]);
    let ck = longhaul_dataplane::wire::ecn::checksum_update(ck, 0x4011, 0x0111);
    ttl1[24..26].copy_from_slice(&ck.to_be_bytes());
    // Unrouted destination 192.0.2.1 (checksum fixed the same way).
    let mut unrouted = base.clone();
    let old = [
        u16::from_be_bytes([unrouted[30], unrouted[31]]),
        u16::from_be_bytes([unrouted[32], unrouted[33]]),
    ];
    unrouted[30..34].copy_from_slice(&[192, 0, 2, 1]);
    let mut ck = u16::from_be_bytes([unrouted[24], unrouted[25]]);
    ck = longhaul_dataplane::wire::ecn::checksum_update(ck, old[0], 0xc000);
    ck = longhaul_dataplane::wire::ecn::checksum_update(ck, old[1], 0x0201);
    unrouted[24..26].copy_from_slice(&ck.to_be_bytes());

    for policy in [Policy::Drop, Policy::Forward] {
        let mut cfg = config();
        cfg.parser.on_bad_ip_checksum = policy;
        let mut h = harness(&cfg);
        h.put(0, 0, &bad_ck);
        h.put(0, 0, &ttl1);
        h.put(0, 0, &unrouted);
        h.put(0, 0, &base[..20]); // truncated inside IPv4
        h.run_to_idle();
        let out = h.take();
        let d = &h.sw.stats().drops;
        assert_eq!(d.get(DropReason::TtlExpired), 1);
        assert_eq!(d.get(DropReason::NoRoute), 1);
        assert_eq!(d.get(DropReason::Truncated), 1);
        let anomalies = &h.sw.pipeline().fwd.anomalies;
        assert_eq!(anomalies.get(DropReason::BadIpChecksum), 1);
        match policy {
            Policy::Drop => {
                assert_eq!(d.get(DropReason::BadIpChecksum), 1);
                assert!(out.is_empty());
            }
            Policy::Forward => {
                assert_eq!(d.get(DropReason::BadIpChecksum), 0);
                assert_eq!(out.len(), 1, "routed despite the bad checksum");
                assert_eq!(h.sw.pipeline().fwd.stats.anomalies_forwarded, 1);
            }
        }
    }
}

/// Everything offered is either transmitted (not counting PFC frames we generate) or dropped
/// with a reason.
fn assert_accounted(h: &mut Harness<HeapPool, Baseline>, offered: usize) {
    h.run_to_idle();
    let out = h.take();
    let data_out = out
        .iter()
        .filter(|e| e.meta.flags & FLAG_CONTROL == 0)
        .count();
    let drops = h.sw.stats().drops.total() as usize;
    assert_eq!(data_out + drops, offered, "offered = forwarded + dropped");
    assert!(!h.summary().stalled);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic_and_are_accounted(
        frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..40)
    ) {
        let cfg = config();
        let mut h = harness(&cfg);
        let mut n = 0;
        for (i, f) in frames.iter().enumerate() {
            // MAC control frames are consumed by the port (PFC honoring), not forwarded.
            if f.len() >= 14 && f[12] == 0x88 && f[13] == 0x08 {
                continue;
            }
            h.put(i % 4, i as u64 * 100, f);
            n += 1;
        }
        assert_accounted(&mut h, n);
    }

    #[test]
    fn mutated_roce_never_panics_and_is_accounted(
        picks in proptest::collection::vec((0usize..64, 0usize..400, any::<u8>(), 0usize..400), 1..40)
    ) {
        let cfg = config();
        let base = roce_frames();
        let mut h = harness(&cfg);
        let mut n = 0;
        for (i, (which, pos, val, cut)) in picks.into_iter().enumerate() {
            let mut f = base[which].clone();
            let p = pos % f.len();
            f[p] = val;
            // Sometimes truncate, sometimes pad: lengths that disagree with the headers.
            if cut % 3 == 0 { f.truncate(cut % f.len()); } else if cut % 3 == 1 { f.extend_from_slice(&[0u8; 7]); }
            if f.len() >= 14 && f[12] == 0x88 && f[13] == 0x08 {
                continue;
            }
            h.put(i % 2, i as u64 * 50, &f);
            n += 1;
        }
        assert_accounted(&mut h, n);
    }
}

/// A frame of the trace re-addressed to `dst` (IPv4 checksum fixed incrementally).
fn to_addr(base: &[u8], dst: [u8; 4]) -> Vec<u8> {
    use longhaul_dataplane::wire::ecn::checksum_update;
    let mut f = base.to_vec();
    let old = [
        u16::from_be_bytes([f[30], f[31]]),
        u16::from_be_bytes([f[32], f[33]]),
    ];
    f[30..34].copy_from_slice(&dst);
    let mut ck = u16::from_be_bytes([f[24], f[25]]);
    ck = checksum_update(ck, old[0], u16::from_be_bytes([dst[0], dst[1]]));
    ck = checksum_update(ck, old[1], u16::from_be_bytes([dst[2], dst[3]]));
    f[24..26].copy_from_slice(&ck.to_be_bytes());
    f
}

#[test]
fn a_command_takes_effect_on_the_next_packets_and_not_before() {
    use longhaul_control::config::IpPrefix;
    use longhaul_dataplane::control::Command;
    use longhaul_pipelines::baseline::{BaselineCommand, NextHop, Via};
    let cfg = config();
    let mut h = harness(&cfg);
    let f = to_addr(&roce_frames()[0], [192, 0, 2, 7]);
    // One packet every 100 ns from t = 1000; the route appears at exactly t = 1500 and is
    // withdrawn at t = 2000.
    for k in 0..15u64 {
        h.put(0, 1_000 + k * 100, &f);
    }
    let prefix = IpPrefix::V4 {
        addr: 0xc000_0200,
        len: 24,
    };
    let insert = BaselineCommand::RouteInsert {
        prefix,
        next_hop: NextHop {
            port: 3,
            mac: [2, 0, 0, 0, 0x20, 2],
            via: Via::Mac,
        },
    };
    assert!(h
        .sw
        .enqueue_command(1_500, Command::Pipeline(insert))
        .is_ok());
    let delete = BaselineCommand::RouteDelete { prefix };
    assert!(h
        .sw
        .enqueue_command(2_000, Command::Pipeline(delete))
        .is_ok());
    h.run_to_idle();
    let ts: Vec<u64> = h.take().iter().map(|e| e.ts).collect();
    assert_eq!(ts, vec![1_500, 1_600, 1_700, 1_800, 1_900]);
    assert_eq!(h.sw.stats().drops.get(DropReason::NoRoute), 10);
    let c = h.sw.control_stats();
    assert_eq!((c.applied, c.refused), (2, 0));
    // Virtual latency: issued at its own time, applied then.
    assert_eq!(c.latency_hist.max_ns, 0);
}

#[test]
fn command_ring_full_is_refused_not_blocking() {
    use longhaul_dataplane::control::Command;
    use longhaul_pipelines::baseline::BaselineCommand;
    let cfg = config();
    let ring = cfg.control.command_ring;
    let mut h = harness(&cfg);
    let cmd = || {
        Command::Pipeline(BaselineCommand::L2Delete {
            mac: [2, 0, 0, 0, 0, 0x77],
        })
    };
    for _ in 0..ring {
        assert!(h.sw.enqueue_command(0, cmd()).is_ok());
    }
    assert!(h.sw.enqueue_command(0, cmd()).is_err(), "full ring refuses");
    h.put(0, 10, &roce_frames()[0]);
    h.run_to_idle();
    // Every queued delete of an unknown MAC was applied (and refused by the table), in bounded
    // batches, and forwarding went on.
    let c = h.sw.control_stats();
    assert_eq!(c.refused, ring as u64);
    assert_eq!(h.take().len(), 1);
}

/// configs/baseline.toml with 10.1.0.0/16 as an ECMP group over wan0 and wan1.
fn ecmp_config(seed: u64) -> Config {
    let text = std::fs::read_to_string(root().join("configs/baseline.toml")).unwrap();
    let single =
        "prefix = \"10.1.0.0/16\"\nport = \"wan0\"\nnext_hop_mac = \"02:00:00:00:20:01\"\n";
    assert!(text.contains(single));
    let group = "prefix = \"10.1.0.0/16\"\nnext_hops = [\n  { port = \"wan0\", next_hop_mac = \
                 \"02:00:00:00:20:01\" },\n  { port = \"wan1\", next_hop_mac = \
                 \"02:00:00:00:20:02\" },\n]\n";
    let text = text
        .replace(single, group)
        .replace("[switch]\n", &format!("[switch]\necmp_seed = {seed}\n"));
    longhaul_pipelines::parse_config(&text, Path::new("ecmp.toml")).expect("ecmp config")
}

/// The RoCE frame `f` with UDP source port `sport` (a QP's entropy; RoCE's UDP checksum is 0).
fn with_sport(f: &[u8], sport: u16) -> Vec<u8> {
    let mut f = f.to_vec();
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f
}

/// ECMP (`[[routes]] next_hops`): each flow (here a QP: its UDP source port) stays on one
/// member, the flows spread about evenly, per-member counters add up, and the seed decides.
#[test]
fn ecmp_group_hashes_each_flow_to_one_member_and_spreads_flows() {
    let cfg = ecmp_config(0);
    let mut h = harness(&cfg);
    let base = roce_frames().remove(0);
    let flows = 2000u16;
    // Every flow twice, the second round after the first.
    for round in 0..2u64 {
        for q in 0..flows {
            let t = 1_000 + (round * u64::from(flows) + u64::from(q)) * 200;
            h.put(0, t, &with_sport(&base, 0xc000 + q));
        }
    }
    h.run_to_idle();
    let out = h.take();
    assert_eq!(out.len(), 2 * flows as usize);
    let mut port_of = std::collections::HashMap::new();
    let mut per_port = [0u32; 4];
    for o in &out {
        let sport = u16::from_be_bytes([o.data[34], o.data[35]]);
        let mac = &o.data[0..6];
        let want: &[u8] = if o.port_idx == 2 {
            &[2, 0, 0, 0, 0x20, 1]
        } else {
            &[2, 0, 0, 0, 0x20, 2]
        };
        assert_eq!(mac, want, "the member's own next hop MAC");
        let p = *port_of.entry(sport).or_insert(o.port_idx);
        assert_eq!(p, o.port_idx, "flow {sport:#x} changed member");
        per_port[o.port_idx] += 1;
    }
    assert_eq!(per_port[0] + per_port[1], 0);
    // 2000 packets a member on average (each flow twice): within 10%.
    for p in [2, 3] {
        assert!((1800..=2200).contains(&per_port[p]), "{per_port:?}");
    }
    let fwd = &h.sw.pipeline().fwd;
    assert_eq!(fwd.ecmp.ecmp_routed, 2 * u64::from(flows));
    let g = &fwd.ecmp_groups()[0];
    assert_eq!(g.packets(), &[per_port[2] as u64, per_port[3] as u64]);
    let mut counters = Vec::new();
    fwd.counters(&mut |n, v| counters.push((n, v)));
    assert!(counters.contains(&("baseline.ecmp_routed", 4000)));
    assert!(counters.contains(&("baseline.ecmp_member.1", u64::from(per_port[3]))));

    // Another seed: another member for some flows, the same for the others.
    let cfg1 = ecmp_config(1);
    let mut h1 = harness(&cfg1);
    for q in 0..flows {
        h1.put(
            0,
            1_000 + u64::from(q) * 200,
            &with_sport(&base, 0xc000 + q),
        );
    }
    h1.run_to_idle();
    let moved = h1
        .take()
        .iter()
        .filter(|o| port_of[&u16::from_be_bytes([o.data[34], o.data[35]])] != o.port_idx)
        .count();
    assert!((800..=1200).contains(&moved), "{moved} flows moved");
}

/// A member whose link goes down (`Switch::set_link`) takes no more packets: its flows hash
/// among the others, the rest keep their member; with no member up the route drops as
/// `no_route`; back up, every flow is where it was.
#[test]
fn ecmp_group_fails_over_when_a_members_link_is_down() {
    use longhaul_dataplane::counters::DropReason;
    let cfg = ecmp_config(0);
    let base = roce_frames().remove(0);
    let flows = 400u16;
    let run = |down: &[usize]| {
        let mut h = harness(&cfg);
        for &p in down {
            h.sw.set_link(p, false);
        }
        for q in 0..flows {
            h.put(
                0,
                1_000 + u64::from(q) * 200,
                &with_sport(&base, 0xc000 + q),
            );
        }
        h.run_to_idle();
        let out: Vec<(u16, usize)> = h
            .take()
            .iter()
            .map(|o| (u16::from_be_bytes([o.data[34], o.data[35]]), o.port_idx))
            .collect();
        (
            out,
            h.sw.pipeline().fwd.ecmp,
            h.sw.stats().drops.get(DropReason::NoRoute),
            h,
        )
    };
    let (all_up, st, _, _) = run(&[]);
    assert_eq!((all_up.len(), st.ecmp_failover), (flows as usize, 0));
    let on_wan0 = all_up.iter().filter(|x| x.1 == 2).count();
    assert!(on_wan0 > 100 && on_wan0 < 300, "{on_wan0}");
    // wan0 (index 2) down: every flow on wan1, those of wan1 unmoved.
    let (one_down, st, _, mut h) = run(&[2]);
    assert_eq!(one_down.len(), flows as usize);
    assert!(one_down.iter().all(|x| x.1 == 3));
    assert_eq!(st.ecmp_failover, u64::from(flows));
    let mut names = Vec::new();
    h.sw.pipeline().fwd.counters(&mut |n, v| names.push((n, v)));
    assert!(names.contains(&("baseline.ecmp_failover", u64::from(flows))));
    // Back up: the flows go where they went with every member up.
    h.sw.set_link(2, true);
    for q in 0..flows {
        h.put(
            0,
            200_000 + u64::from(q) * 200,
            &with_sport(&base, 0xc000 + q),
        );
    }
    h.run_to_idle();
    let again: Vec<(u16, usize)> = h
        .take()
        .iter()
        .map(|o| (u16::from_be_bytes([o.data[34], o.data[35]]), o.port_idx))
        .collect();
    assert_eq!(again, all_up);
    // Both down: no route.
    let (none, _, no_route, _) = run(&[2, 3]);
    assert!(none.is_empty());
    assert_eq!(no_route, u64::from(flows));
}

/// A route with one next hop has no ECMP counters and takes no hash.
#[test]
fn single_next_hop_routes_do_not_count_as_ecmp() {
    let cfg = config();
    let mut h = harness(&cfg);
    h.put(0, 1_000, &roce_frames()[0]);
    h.run_to_idle();
    assert_eq!(h.take().len(), 1);
    let fwd = &h.sw.pipeline().fwd;
    assert_eq!(fwd.ecmp.ecmp_routed, 0);
    let mut names = Vec::new();
    fwd.counters(&mut |n, _| names.push(n));
    assert!(!names.iter().any(|n| n.starts_with("baseline.ecmp")));
}

/// The management API lists a group with its members and refuses to insert one (groups come
/// from the config); a single next hop inserted for the group's prefix replaces it.
#[test]
fn api_lists_ecmp_groups_and_refuses_to_insert_one() {
    use longhaul_control::api::ApiError;
    use longhaul_control::plane::PipelineControl;
    use longhaul_pipelines::baseline::control::BaselineControl;
    let cfg = ecmp_config(0);
    let mut c = BaselineControl::new(&cfg);
    let list = c.list("routes", 0, 100).unwrap();
    let group = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["prefix"] == "10.1.0.0/16")
        .unwrap()
        .clone();
    assert_eq!(
        group,
        serde_json::json!({"prefix": "10.1.0.0/16", "next_hops": [
            {"port": "wan0", "next_hop_mac": "02:00:00:00:20:01"},
            {"port": "wan1", "next_hop_mac": "02:00:00:00:20:02"},
        ]})
    );
    let e = serde_json::json!({"prefix": "10.2.0.0/16", "next_hops": [
        {"port": "wan0", "next_hop_mac": "02:00:00:00:20:01"}]});
    match c.insert("routes", &e) {
        Err(ApiError::BadRequest(m)) => assert!(m.contains("POST /reload"), "{m}"),
        other => panic!("{other:?}"),
    }
    let one = serde_json::json!({"prefix": "10.1.0.0/16", "port": "wan1",
        "next_hop_mac": "02:00:00:00:20:02"});
    assert!(c.insert("routes", &one).is_ok());
    // A reload to the file (which has the group) rebuilds the switch.
    let plan = c.reload(&cfg, &cfg).unwrap();
    assert!(matches!(plan, longhaul_control::plane::ReloadPlan::Rebuild));
}

/// Classify gives a packet its class's queue, whatever queue its metadata held (the skeleton's
/// classify stage, in every pipeline built on it), and the baseline forwards it there.
#[test]
fn classify_sets_the_class_and_its_queue() {
    let cfg = config();
    let mut sw = Switch::new(switch_spec(&cfg), heap_pool(&cfg), Baseline::new(&cfg));
    let frame = roce_frames().remove(0);
    let (action, class, queue) = sw.with_ctx(1_000, |pl, ctx| {
        let mut pkt = ctx.pool().alloc_from(&frame).expect("a buffer");
        let m = pkt.meta_mut();
        m.ingress_port = 0;
        m.queue = 5;
        let a = Pipeline::<HeapPool>::ingress(pl, ctx, &mut pkt);
        let m = *pkt.meta();
        ctx.pool().free(pkt);
        (a, m.class, m.queue)
    });
    assert_eq!(action, Action::Forward);
    assert_eq!(queue, QUEUE_OF_CLASS, "class {class}");
}
