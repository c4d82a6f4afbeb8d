//! `[dpdk]` and the DPDK keys of `ports[].io`: values, defaults, and every error.

use longhaul_control::config::{Config, ConfigError, DpdkConfig, PortIo, WorkerRate};
use std::path::Path;

const SWITCH: &str = "[switch]\nname = \"t\"\n";

fn port(id: u16, io: &str) -> String {
    format!(
        "\n[[ports]]\nid = {id}\nname = \"p{id}\"\nmac = \"02:00:00:00:00:0{}\"\nrate_gbps = 100\nio = {{ {io} }}\n",
        id + 1
    )
}

fn null_port(id: u16) -> String {
    format!(
        "\n[[ports]]\nid = {id}\nname = \"p{id}\"\nmac = \"02:00:00:00:00:0{}\"\nrate_gbps = 100\n",
        id + 1
    )
}

const DPDK: &str = "\n[dpdk]\neal_args = [\"-l\", \"0-1\", \"--no-huge\", \"--no-pci\", \"--vdev=net_null0\", \"--vdev=net_null1\"]\n";

fn two_dpdk_ports(extra0: &str, dpdk: &str) -> String {
    format!(
        "{SWITCH}{}{}{dpdk}",
        port(
            0,
            &format!("kind = \"dpdk\", device = \"net_null0\"{extra0}")
        ),
        port(1, "kind = \"dpdk\", device = \"net_null1\""),
    )
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("t.toml"))
}

fn ok(text: &str) -> Config {
    parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// Every error, as (key, message without the location).
fn errs(text: &str) -> Vec<(String, String)> {
    match Config::parse_all(text, Path::new("t.toml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(es) => es
            .into_iter()
            .map(|e| {
                let m = match e.msg.rfind(" (line ") {
                    Some(i) if e.msg.ends_with(')') => e.msg[..i].to_string(),
                    _ => e.msg.clone(),
                };
                (e.key, m)
            })
            .collect(),
    }
}

#[track_caller]
fn assert_err_contains(text: &str, key: &str, part: &str) {
    let es = errs(text);
    assert!(
        es.iter().any(|(k, m)| k == key && m.contains(part)),
        "no error at {key} containing '{part}': {es:?}"
    );
}

#[test]
fn defaults() {
    let c = ok(&two_dpdk_ports("", DPDK));
    assert_eq!(
        c.dpdk,
        Some(DpdkConfig {
            eal_args: [
                "-l",
                "0-1",
                "--no-huge",
                "--no-pci",
                "--vdev=net_null0",
                "--vdev=net_null1"
            ]
            .map(String::from)
            .to_vec(),
            mbufs: 16_383,
            mbuf_cache: 256,
            mbuf_data_room: c.switch.buffer_data_room,
            workers: 1,
            worker_rate: WorkerRate::Split,
        })
    );
    assert_eq!(
        c.ports[0].io,
        PortIo::Dpdk {
            device: "net_null0".into(),
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024
        }
    );
    // No DPDK port, no [dpdk]: None.
    let c = ok(&format!("{SWITCH}{}", null_port(0)));
    assert_eq!(c.dpdk, None);
}

#[test]
fn every_key() {
    let c = ok(&two_dpdk_ports(
        ", rx_queues = 4, tx_queues = 1, rx_desc = 512, tx_desc = 4096",
        &format!(
            "{DPDK}mbufs = 32767\nmbuf_cache = 128\nmbuf_data_room = 9300\nworkers = 4\nworker_rate = \"full\"\n"
        ),
    ));
    let d = c.dpdk.unwrap();
    assert_eq!(
        (d.mbufs, d.mbuf_cache, d.mbuf_data_room),
        (32767, 128, 9300)
    );
    assert_eq!((d.workers, d.worker_rate), (4, WorkerRate::Full));
    assert_eq!(
        c.ports[0].io,
        PortIo::Dpdk {
            device: "net_null0".into(),
            rx_queues: 4,
            tx_queues: 1,
            rx_desc: 512,
            tx_desc: 4096
        }
    );
    // A PCI address, and a port without io (a null port) next to DPDK ports.
    let c = ok(&format!(
        "{SWITCH}{}{}{DPDK}",
        port(0, "kind = \"dpdk\", device = \"0000:3b:00.0\""),
        null_port(1)
    ));
    assert_eq!(c.ports[1].io, PortIo::None);
}

#[test]
fn dpdk_ports_need_the_dpdk_table() {
    assert_err_contains(
        &two_dpdk_ports("", ""),
        "dpdk",
        "port 'p0' (ports[0]) has io kind \"dpdk\", which needs a [dpdk] table with eal_args",
    );
    assert_err_contains(
        &two_dpdk_ports("", "\n[dpdk]\nmbufs = 8191\n"),
        "dpdk.eal_args",
        "missing (this key is required)",
    );
}

#[test]
fn mixing_dpdk_with_pcap_or_memory_is_refused() {
    let text = format!(
        "{SWITCH}{}{}{}{DPDK}",
        port(0, "kind = \"dpdk\", device = \"net_null0\""),
        port(1, "kind = \"pcap\", rx = \"in.pcap\""),
        port(2, "kind = \"memory\""),
    );
    let es = errs(&text);
    assert_eq!(es.len(), 2, "{es:?}");
    assert_eq!(es[0].0, "ports[1].io.kind");
    assert!(
        es[0]
            .1
            .contains("port 'p1' has io kind \"pcap\" but port 'p0' (ports[0]) is a DPDK port")
            && es[0].1.contains("use a net_pcap vdev instead"),
        "{es:?}"
    );
    assert_eq!(es[1].0, "ports[2].io.kind");
    assert!(es[1].1.contains("\"memory\""));
}

#[test]
fn queues_must_match_the_workers() {
    // 2 rx queues with 4 workers: two workers would poll nothing, or two queues nobody.
    assert_err_contains(
        &two_dpdk_ports(", rx_queues = 2", &format!("{DPDK}workers = 4\n")),
        "ports[0].io.rx_queues",
        "2 queues on port 'p0' with dpdk.workers = 4: use 4",
    );
    assert_err_contains(
        &two_dpdk_ports(", tx_queues = 3", &format!("{DPDK}workers = 2\n")),
        "ports[0].io.tx_queues",
        "or 1 (one worker polls the queue and dispatches",
    );
    // One worker: more queues than workers is refused too (nobody would poll them).
    assert_err_contains(
        &two_dpdk_ports(", rx_queues = 2", DPDK),
        "ports[0].io.rx_queues",
        "with dpdk.workers = 1",
    );
    assert_err_contains(
        &two_dpdk_ports("", &format!("{DPDK}workers = 0\n")),
        "dpdk.workers",
        "0 is out of range: must be 1 to 64",
    );
    assert_err_contains(
        &two_dpdk_ports("", &format!("{DPDK}worker_rate = \"half\"\n")),
        "dpdk.worker_rate",
        "unknown variant",
    );
    // Workers without DPDK ports.
    assert_err_contains(
        &format!("{SWITCH}{}{DPDK}workers = 2\n", null_port(0)),
        "dpdk.workers",
        "2 workers need DPDK ports",
    );
}

#[test]
fn bad_values() {
    for (extra, key, part) in [
        (
            ", rx_queues = 0",
            "ports[0].io.rx_queues",
            "0 is out of range: must be 1 to 64",
        ),
        (
            ", tx_queues = 65",
            "ports[0].io.tx_queues",
            "65 is out of range: must be 1 to 64",
        ),
        (
            ", rx_desc = 32",
            "ports[0].io.rx_desc",
            "32 is out of range: must be 64 to 16384",
        ),
        (
            ", tx_desc = 32768",
            "ports[0].io.tx_desc",
            "must be 64 to 16384",
        ),
    ] {
        assert_err_contains(&two_dpdk_ports(extra, DPDK), key, part);
    }
    for (extra, key, part) in [
        ("mbufs = 0", "dpdk.mbufs", "0 is out of range"),
        ("mbuf_cache = 513", "dpdk.mbuf_cache", "must be 0 to 512"),
        (
            "mbufs = 700\nmbuf_cache = 512",
            "dpdk.mbuf_cache",
            "a per-lcore cache of 512 needs at least 768 mbufs",
        ),
        (
            "mbufs = 2048",
            "dpdk.mbufs",
            "2048 mbufs cannot fill the 2048 rx descriptors",
        ),
        (
            "mbuf_data_room = 63",
            "dpdk.mbuf_data_room",
            "must be 64 to 65407",
        ),
        (
            "mbuf_data_room = 2000",
            "dpdk.mbuf_data_room",
            "2000 bytes cannot hold a frame of port 'p0' (mtu 4200)",
        ),
    ] {
        assert_err_contains(&two_dpdk_ports("", &format!("{DPDK}{extra}\n")), key, part);
    }
    assert_err_contains(
        &two_dpdk_ports("", "\n[dpdk]\neal_args = [\"-l\", \"\"]\n"),
        "dpdk.eal_args[1]",
        "must not be empty",
    );
    // The same device twice.
    let text = format!(
        "{SWITCH}{}{}{DPDK}",
        port(0, "kind = \"dpdk\", device = \"net_null0\""),
        port(1, "kind = \"dpdk\", device = \"net_null0\""),
    );
    assert_err_contains(
        &text,
        "ports[1].io.device",
        "device 'net_null0' is also port 'p0' (ports[0])",
    );
    // DPDK keys on another kind.
    let text = format!("{SWITCH}{}", port(0, "kind = \"memory\", rx_queues = 2"));
    assert_err_contains(
        &text,
        "ports[0].io.rx_queues",
        "only kind = \"dpdk\" takes this key, not kind = \"memory\"",
    );
    // Unknown keys.
    let e = parse(&two_dpdk_ports("", &format!("{DPDK}mempool = 3\n"))).unwrap_err();
    assert_eq!(e.key, "dpdk.mempool");
    assert!(e.msg.contains("unknown field `mempool`"), "{e}");
    let e = parse(&two_dpdk_ports("", "\n[dpdk]\neal_args = \"-l 0\"\n")).unwrap_err();
    assert_eq!(e.key, "dpdk.eal_args");
}
