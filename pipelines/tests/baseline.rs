//! The baseline pipeline end to end on virtual time: forwarding decisions, anomaly policy, and
//! a property test that random bytes and mutated RoCE frames never panic and are all accounted
//! for (forwarded or dropped by a named reason).

use longhaul_control::config::{Config, Policy};
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::engine::Switch;
use longhaul_dataplane::packet::{HeapPool, FLAG_CONTROL};
use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::replay::Harness;
use longhaul_dataplane::wire::icrc;
use longhaul_pipelines::baseline::Baseline;
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
        let st = &h.sw.pipeline().fwd.stats;
        assert_eq!(st.anomalies.get(DropReason::BadIpChecksum), 1);
        match policy {
            Policy::Drop => {
                assert_eq!(d.get(DropReason::BadIpChecksum), 1);
                assert!(out.is_empty());
            }
            Policy::Forward => {
                assert_eq!(d.get(DropReason::BadIpChecksum), 0);
                assert_eq!(out.len(), 1, "routed despite the bad checksum");
                assert_eq!(st.anomalies_forwarded, 1);
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
