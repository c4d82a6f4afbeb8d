//! `[spray]` (Themis packet spraying at the ToR): what loads, and every error's key and message.

use longhaul_control::config::{Config, ConfigError};
use longhaul_pipelines::parse_config;
use longhaul_pipelines::spray::config::{SprayConfig, SprayPaths};
use std::path::Path;

const BASE: &str = r#"
[switch]
name = "t"
pipeline = "spray"

[[ports]]
id = 0
name = "h0"
mac = "02:00:00:00:00:01"
rate_gbps = 100

[[ports]]
id = 1
name = "up0"
mac = "02:00:00:00:00:02"
rate_gbps = 100

[[ports]]
id = 2
name = "up1"
mac = "02:00:00:00:00:03"
rate_gbps = 100
"#;

const SPRAY: &str = r#"
[spray]
host_ports = ["h0"]
fabric_ports = ["up0", "up1"]
mode = "sport"
sport_deltas = [0, 1]
"#;

fn parse(extra: &str) -> Result<Config, ConfigError> {
    parse_config(&format!("{BASE}{extra}"), Path::new("t.toml"))
}

#[track_caller]
fn assert_err(extra: &str, key: &str, part: &str) {
    match parse(extra) {
        Ok(_) => panic!("accepted:\n{extra}"),
        Err(e) => {
            assert_eq!(e.key, key, "full error: {e}");
            assert!(
                e.msg.contains(part),
                "'{}' does not contain '{part}'",
                e.msg
            );
        }
    }
}

#[test]
fn minimal_spray_loads_with_the_papers_defaults() {
    let c = parse(SPRAY).unwrap();
    assert_eq!(c.switch.pipeline, "spray");
    let s = c.section::<SprayConfig>().unwrap();
    assert_eq!(s.paths, SprayPaths::SportDeltas(vec![0, 1]));
    assert_eq!(
        (s.window, s.ooo_threshold, s.avoidance_window, s.qp_capacity),
        (512, 448, 2_000_000, 1024)
    );
    assert!(s.source && s.dest);
}

#[test]
fn spray_pipeline_needs_the_table_and_the_table_needs_the_pipeline() {
    assert_err("", "spray", "needs a [spray] table");
    let text = format!("{BASE}{SPRAY}").replace("pipeline = \"spray\"", "");
    let e = parse_config(&text, Path::new("t.toml")).unwrap_err();
    assert_eq!(e.key, "spray");
    assert!(
        e.msg.contains("only used with switch.pipeline = \"spray\""),
        "{e}"
    );
}

#[test]
fn window_must_be_a_power_of_two() {
    assert_err(
        &format!("{SPRAY}window = 500\n"),
        "spray.window",
        "not a power of two",
    );
    assert_err(
        &format!("{SPRAY}window = 32\n"),
        "spray.window",
        "out of range",
    );
}

#[test]
fn mode_and_path_map_agree() {
    assert_err(
        &SPRAY.replace("mode = \"sport\"", "mode = \"ecmp\""),
        "spray.mode",
        "expected \"sport\" or \"port\"",
    );
    assert_err(
        &SPRAY.replace("sport_deltas = [0, 1]", ""),
        "spray.sport_deltas",
        "missing",
    );
    assert_err(
        &SPRAY.replace("[0, 1]", "[0, 0]"),
        "spray.sport_deltas[1]",
        "duplicate delta",
    );
    assert_err(
        &SPRAY.replace("[0, 1]", "[0, 70000]"),
        "spray.sport_deltas[1]",
        "out of range",
    );
    let port_mode = SPRAY
        .replace("mode = \"sport\"", "mode = \"port\"")
        .replace("sport_deltas = [0, 1]", "");
    assert_err(&port_mode, "spray.path_ports", "missing");
    assert_err(
        &format!("{port_mode}[[spray.path_ports]]\nport = \"h0\"\nnext_hop_mac = \"02:00:00:00:20:00\"\n"),
        "spray.path_ports[0].port",
        "not one of spray.fabric_ports",
    );
    let ok = parse(&format!(
        "{port_mode}[[spray.path_ports]]\nport = \"up1\"\nnext_hop_mac = \"02:00:00:00:20:00\"\n"
    ))
    .unwrap();
    assert_eq!(ok.section::<SprayConfig>().unwrap().paths.len(), 1);
}

#[test]
fn a_spraying_tor_has_no_wire_pairs() {
    assert_err(
        &format!("{SPRAY}[[wire]]\nports = [\"h0\", \"up1\"]\n"),
        "spray.host_ports",
        "port 0 is in a [[wire]] pair: the spraying ToR routes (remove the pair)",
    );
}

#[test]
fn ports_and_qps_are_checked() {
    assert_err(
        &SPRAY.replace(
            "fabric_ports = [\"up0\", \"up1\"]",
            "fabric_ports = [\"up0\", \"h0\"]",
        ),
        "spray.fabric_ports",
        "in both host_ports and fabric_ports",
    );
    assert_err(
        &SPRAY.replace("[\"h0\"]", "[\"nope\"]"),
        "spray.host_ports[0]",
        "nope",
    );
    assert_err(
        &format!("{SPRAY}[[spray.qps]]\nlocal = \"10.0.0.300\"\nlocal_qpn = 1\nremote = \"10.1.0.1\"\nremote_qpn = 2\n"),
        "spray.qps[0].local",
        "not an IP address",
    );
    assert_err(
        &format!("{SPRAY}[[spray.qps]]\nlocal = \"10.0.0.1\"\nlocal_qpn = 0x1000000\nremote = \"10.1.0.1\"\nremote_qpn = 2\n"),
        "spray.qps[0].local_qpn",
        "out of range",
    );
    assert_err(
        &format!("{SPRAY}[[spray.qps]]\nlocal = \"10.0.0.1\"\nlocal_qpn = 1\nremote = \"2001:db8::1\"\nremote_qpn = 2\n"),
        "spray.qps[0]",
        "must both be IPv4 or both IPv6",
    );
    assert_err(
        &format!("{SPRAY}qp_capacity = 1\n[[spray.qps]]\nlocal = \"10.0.0.1\"\nlocal_qpn = 1\nremote = \"10.1.0.1\"\nremote_qpn = 2\n[[spray.qps]]\nlocal = \"10.0.0.2\"\nlocal_qpn = 1\nremote = \"10.1.0.2\"\nremote_qpn = 2\n"),
        "spray.qps",
        "qp_capacity is 1",
    );
    assert_err(
        &format!("{SPRAY}qp_capacity = 100000000\n"),
        "spray.qp_capacity",
        "out of range",
    );
    assert_err(
        &format!("{SPRAY}paths = 4\n"),
        "spray.paths",
        "unknown field",
    );
}
