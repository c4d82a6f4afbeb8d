//! Valid configurations: the values they produce and the defaults.

use longhaul_control::config::{pause_time_ns, Config, IpPrefix, Policy, SchedulerKind, Trust};
use std::path::{Path, PathBuf};

fn baseline_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs/baseline.toml")
}

fn parse(text: &str) -> Config {
    Config::parse(text, Path::new("t.toml")).unwrap_or_else(|e| panic!("{e}"))
}

const MINIMAL: &str = r#"
[switch]
name = "m"

[[ports]]
id = 7
name = "p7"
mac = "02:00:00:00:00:07"
rate_gbps = 25
"#;

#[test]
fn minimal_config_gets_every_default() {
    let c = parse(MINIMAL);
    assert_eq!(c.switch.name, "m");
    assert_eq!(c.switch.pipeline, "baseline");
    assert_eq!(c.switch.pool_buffers, 65536);
    assert_eq!(c.switch.buffer_data_room, 4480);
    assert_eq!(c.switch.buffer_bytes, 32 << 20);
    assert_eq!(c.switch.seed, 1);

    assert_eq!(c.ports.len(), 1);
    let p = &c.ports[0];
    assert_eq!(
        (p.id, p.name.as_str(), p.mac),
        (7, "p7", [2, 0, 0, 0, 0, 7])
    );
    assert_eq!(p.rate_bps, 25_000_000_000);
    assert_eq!((p.mtu, p.frame_overhead), (4200, 24));

    let q = &c.qos;
    assert_eq!(q.trust, Trust::Dscp);
    assert_eq!(q.default_class, 0);
    assert_eq!(q.dscp_map, [0; 64]);
    assert_eq!(q.pcp_map, [0; 8]);
    assert_eq!(q.scheduler, SchedulerKind::Strict);
    assert_eq!(q.strict_classes, [7, 6, 5, 4, 3, 2, 1, 0]);
    assert_eq!(q.weights, [1; 8]);
    assert_eq!(q.drr_quantum_bytes, 4224);
    for class in &q.classes {
        assert_eq!(class.limit_bytes, 1 << 20);
        assert!(!class.lossless);
        assert!(class.ecn.is_none());
    }

    assert!(!c.pfc.enabled);
    assert_eq!(c.pfc.pause_quanta, 65535);
    assert_eq!(c.pfc.refresh_ns, pause_time_ns(65535, 25_000_000_000) / 2);
    assert_eq!(
        (c.pfc.xoff_bytes, c.pfc.xon_bytes, c.pfc.headroom_bytes),
        (0, 0, 0)
    );

    let pr = &c.parser;
    assert_eq!(pr.max_vlan_tags, 2);
    assert!(pr.verify_ipv4_checksum);
    assert_eq!(pr.on_bad_length, Policy::Drop);
    assert_eq!(pr.on_unknown_ethertype, Policy::Forward);
    assert_eq!(pr.on_vlan_stack, Policy::Drop);
    assert_eq!(pr.on_ipv4_options, Policy::Forward);
    assert_eq!(pr.on_ipv4_fragment, Policy::Forward);
    assert_eq!(pr.on_bad_ip_checksum, Policy::Drop);

    assert!(c.l2.is_empty());
    assert!(c.routes.is_empty());
}

#[test]
fn baseline_config_values() {
    let c = Config::load(&baseline_path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.switch.name, "baseline");
    let names: Vec<&str> = c.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["dc0", "dc1", "wan0", "wan1"]);
    assert!(c.ports.iter().all(|p| p.rate_bps == 100_000_000_000));

    assert_eq!(c.qos.dscp_map[26], 3);
    assert_eq!(c.qos.dscp_map[48], 6);
    assert_eq!(c.qos.dscp_map[0], 0);
    assert_eq!(c.qos.scheduler, SchedulerKind::Drr);
    assert_eq!(c.qos.strict_classes, [7, 6]);
    let c3 = &c.qos.classes[3];
    assert!(c3.lossless);
    let ecn = c3.ecn.unwrap();
    assert_eq!(
        (ecn.kmin_bytes, ecn.kmax_bytes, ecn.pmax),
        (100_000, 400_000, 0.2)
    );
    assert_eq!(c.qos.classes[6].limit_bytes, 262_144);
    assert_eq!(c.qos.classes[0].limit_bytes, 1 << 20);

    assert!(c.pfc.enabled);
    assert_eq!(c.pfc.refresh_ns, 167_769);

    assert_eq!(c.l2.len(), 4);
    assert_eq!(c.l2[3].port, 3); // written as an id
    assert_eq!(c.l2[0].port, 0); // written as a name

    assert_eq!(c.routes.len(), 4);
    assert_eq!(
        c.routes[0].prefix,
        IpPrefix::V4 {
            addr: 0x0a00_0000,
            len: 24
        }
    );
    assert_eq!(
        c.routes[2].prefix,
        IpPrefix::V4 {
            addr: 0x0a01_0000,
            len: 16
        }
    );
    assert_eq!(c.routes[2].hops[0].port, 2);
    assert_eq!(c.routes[2].hops[0].next_hop_mac, [2, 0, 0, 0, 0x20, 1]);
    assert_eq!(
        c.routes[3].prefix,
        IpPrefix::V6 {
            addr: 0x2001_0db8_0001_u128 << 80,
            len: 48
        }
    );
    assert_eq!(c.routes[3].prefix.to_string(), "2001:db8:1::/48");
}

#[test]
fn rates_macs_and_ids() {
    let c = parse(
        &MINIMAL
            .replace("rate_gbps = 25", "rate_gbps = 2.5")
            .replace("02:00:00:00:00:07", "0A-1b-2C-3d-4E-5f"),
    );
    assert_eq!(c.ports[0].rate_bps, 2_500_000_000);
    assert_eq!(c.ports[0].mac, [0x0a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f]);
}

#[test]
fn pcp_trust_and_maps() {
    let c = parse(&format!(
        "{MINIMAL}\n[qos]\ntrust = \"pcp\"\ndefault_class = 1\npcp_map = {{ \"3\" = 3, \"7\" = 7 }}\ndscp_map = {{ \"46\" = 5 }}\n"
    ));
    assert_eq!(c.qos.trust, Trust::Pcp);
    assert_eq!(c.qos.pcp_map, [1, 1, 1, 3, 1, 1, 1, 7]);
    assert_eq!(c.qos.dscp_map[46], 5);
    assert_eq!(c.qos.dscp_map[45], 1); // unmapped -> default_class
}

#[test]
fn weighted_scheduler_keeps_given_strict_classes_sorted() {
    let c = parse(&format!(
        "{MINIMAL}\n[qos]\nscheduler = \"wrr\"\nstrict_classes = [5, 7, 6]\nweights = [8, 7, 6, 5, 4, 3, 2, 1]\ndrr_quantum_bytes = 9000\n"
    ));
    assert_eq!(c.qos.scheduler, SchedulerKind::Wrr);
    assert_eq!(c.qos.strict_classes, [7, 6, 5]);
    assert_eq!(c.qos.weights, [8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(c.qos.drr_quantum_bytes, 9000);
}

#[test]
fn drr_quantum_default_is_largest_wire_frame() {
    let text = format!(
        "{MINIMAL}\n[[ports]]\nid = 8\nname = \"p8\"\nmac = \"02:00:00:00:00:08\"\nrate_gbps = 400\nmtu = 1500\nframe_overhead = 20\n"
    );
    let c = parse(&text);
    assert_eq!(c.qos.drr_quantum_bytes, 4224); // max(4200 + 24, 1500 + 20)
}

#[test]
fn refresh_default_uses_the_fastest_port() {
    let text = format!(
        "{MINIMAL}\n[[ports]]\nid = 8\nname = \"p8\"\nmac = \"02:00:00:00:00:08\"\nrate_gbps = 400\n[pfc]\npause_quanta = 1000\n"
    );
    let c = parse(&text);
    // 1000 x 512 bit at 400 Gb/s = 1280 ns.
    assert_eq!(pause_time_ns(1000, 400_000_000_000), 1280);
    assert_eq!(c.pfc.refresh_ns, 640);
}

#[test]
fn alternative_toml_spellings_of_the_same_tables() {
    // Dotted keys, a sub-table header for ecn, inline policy table, hex integers.
    let text = format!(
        "{MINIMAL}\n[qos]\nscheduler = \"drr\"\n\n[[qos.classes]]\nclass = 3\nlimit_bytes = 0x100000\n[qos.classes.ecn]\nkmin_bytes = 1_000\nkmax_bytes = 2_000\npmax = 1\n\n[[qos.classes]]\nclass = 2\necn.kmin_bytes = 10\necn.kmax_bytes = 20\necn.pmax = 0.5\n\n[parser]\npolicy = {{ vlan_stack = \"forward\" }}\n"
    );
    let c = parse(&text);
    let e3 = c.qos.classes[3].ecn.unwrap();
    assert_eq!((e3.kmin_bytes, e3.kmax_bytes, e3.pmax), (1000, 2000, 1.0));
    assert_eq!(c.qos.classes[3].limit_bytes, 1 << 20);
    let e2 = c.qos.classes[2].ecn.unwrap();
    assert_eq!((e2.kmin_bytes, e2.kmax_bytes, e2.pmax), (10, 20, 0.5));
    assert_eq!(c.parser.on_vlan_stack, Policy::Forward);
    assert_eq!(c.parser.on_bad_length, Policy::Drop);

    let dotted = MINIMAL.replace(
        "[switch]\nname = \"m\"\n",
        "switch.name = \"m\"\nswitch.seed = 5\n",
    );
    let c = parse(&dotted);
    assert_eq!((c.switch.name.as_str(), c.switch.seed), ("m", 5));

    let inline_ports = "ports = [{ id = 0, name = \"a\", mac = \"02:00:00:00:00:01\", rate_gbps = 10 }]\n[switch]\nname = \"i\"\n";
    assert_eq!(parse(inline_ports).ports[0].rate_bps, 10_000_000_000);
}

#[test]
fn pfc_disabled_keeps_given_thresholds() {
    let c = parse(&format!(
        "{MINIMAL}\n[pfc]\nxoff_bytes = 100\nxon_bytes = 200\n"
    ));
    assert!(!c.pfc.enabled);
    // Not cross-checked while disabled.
    assert_eq!((c.pfc.xoff_bytes, c.pfc.xon_bytes), (100, 200));
}

#[test]
fn routes_and_l2_by_name_and_id() {
    let text = format!(
        "{MINIMAL}\n[[l2]]\nmac = \"ff:ff:ff:ff:ff:ff\"\nport = 7\n[[routes]]\nprefix = \"0.0.0.0/0\"\nport = \"p7\"\nnext_hop_mac = \"02:00:00:00:00:99\"\n[[routes]]\nprefix = \"::/0\"\nport = 7\nnext_hop_mac = \"02:00:00:00:00:99\"\n[[routes]]\nprefix = \"192.0.2.1/32\"\nport = 7\nnext_hop_mac = \"02:00:00:00:00:99\"\n"
    );
    let c = parse(&text);
    assert_eq!(c.l2[0].port, 7);
    assert_eq!(c.routes[0].prefix, IpPrefix::V4 { addr: 0, len: 0 });
    assert_eq!(c.routes[1].prefix, IpPrefix::V6 { addr: 0, len: 0 });
    assert_eq!(
        c.routes[2].prefix,
        IpPrefix::V4 {
            addr: 0xc000_0201,
            len: 32
        }
    );
    assert!(c.routes.iter().all(|r| r.hops[0].port == 7));
}
