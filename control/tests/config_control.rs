//! `[control]` and `ports[].io`: values, defaults, and every error.

use longhaul_control::config::{Config, ConfigError, ControlConfig, PortIo};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

const BASE: &str = r#"
[switch]
name = "t"

[[ports]]
id = 0
name = "a"
mac = "02:00:00:00:00:01"
rate_gbps = 100
"#;

const PORT_B: &str = r#"
[[ports]]
id = 1
name = "b"
mac = "02:00:00:00:00:02"
rate_gbps = 100
"#;

fn parse_at(text: &str, file: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new(file))
}

fn ok(text: &str) -> Config {
    parse_at(text, "t.toml").unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn err(text: &str) -> ConfigError {
    match parse_at(text, "t.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e,
    }
}

/// The message without " (line L, column C)".
fn bare(msg: &str) -> &str {
    match msg.rfind(" (line ") {
        Some(i) if msg.ends_with(')') => &msg[..i],
        _ => msg,
    }
}

#[track_caller]
fn assert_err(text: &str, key: &str, msg: &str) {
    let e = err(text);
    assert_eq!(
        (e.key.as_str(), bare(&e.msg)),
        (key, msg),
        "full error: {e}"
    );
}

#[track_caller]
fn assert_err_contains(text: &str, key: &str, part: &str) {
    let e = err(text);
    assert_eq!(e.key, key, "full error: {e}");
    assert!(
        e.msg.contains(part),
        "'{}' does not contain '{part}'",
        e.msg
    );
}

fn control(kv: &str) -> String {
    format!("{BASE}\n[control]\n{kv}\n")
}

/// The first port with `io` = `io` (an inline table body).
fn io(io: &str) -> String {
    BASE.replace(
        "rate_gbps = 100\n",
        &format!("rate_gbps = 100\nio = {{ {io} }}\n"),
    )
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

// ---- [control] ------------------------------------------------------------------------------

#[test]
fn control_defaults() {
    let c = ok(BASE);
    assert_eq!(c.control, ControlConfig::default());
    let d = &c.control;
    assert_eq!(d.api_listen, addr("127.0.0.1:9410"));
    assert_eq!(d.api_token, None);
    assert_eq!(d.metrics_listen, Some(addr("127.0.0.1:9411")));
    assert_eq!(d.stats_interval_ms, 1000);
    assert_eq!(d.control_latency_ns, 0);
    assert_eq!((d.command_ring, d.punt_ring), (4096, 4096));
    assert!(!d.api_needs_token());
    assert_eq!(c.ports[0].io, PortIo::None);
    // An empty [control] is the defaults too.
    assert_eq!(ok(&control("")).control, ControlConfig::default());
}

#[test]
fn control_values() {
    let c = ok(&control(
        r#"api_listen = "[::1]:8000"
api_token = "abc-123_XYZ"
metrics_listen = "0.0.0.0:9100"
stats_interval_ms = 250
control_latency_ns = 1_000_000
command_ring = 100
punt_ring = 1048576"#,
    ))
    .control;
    assert_eq!(c.api_listen, addr("[::1]:8000"));
    assert_eq!(c.api_token.as_deref(), Some("abc-123_XYZ"));
    assert_eq!(c.metrics_listen, Some(addr("0.0.0.0:9100")));
    assert_eq!(c.stats_interval_ms, 250);
    assert_eq!(c.control_latency_ns, 1_000_000);
    assert_eq!((c.command_ring, c.punt_ring), (100, 1 << 20));
    assert!(!c.api_needs_token());

    assert_eq!(
        ok(&control("metrics_listen = \"off\""))
            .control
            .metrics_listen,
        None
    );
    // Ports 0 (any free port) may repeat.
    let c = ok(&control(
        "api_listen = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"",
    ));
    assert_eq!(c.control.metrics_listen, Some(addr("127.0.0.1:0")));
}

#[test]
fn non_loopback_api_without_a_token_is_left_to_the_server() {
    // The token may come from LONGHAUL_API_TOKEN at start, so the config alone is accepted;
    // ApiServer::start refuses if neither gives one.
    let c = ok(&control("api_listen = \"0.0.0.0:9410\"")).control;
    assert!(c.api_needs_token());
    assert_eq!(c.api_token, None);
}

#[test]
fn control_errors() {
    let addr_msg = |v: &str| {
        format!(
            "'{v}' is not an address:port: expected an IP address and a port, e.g. 127.0.0.1:9410 or [::1]:9410"
        )
    };
    assert_err(
        &control("api_listen = \"localhost:9410\""),
        "control.api_listen",
        &addr_msg("localhost:9410"),
    );
    assert_err(
        &control("api_listen = \"127.0.0.1\""),
        "control.api_listen",
        &addr_msg("127.0.0.1"),
    );
    assert_err(
        &control("metrics_listen = \"on\""),
        "control.metrics_listen",
        &addr_msg("on"),
    );
    assert_err(
        &control("api_listen = \"127.0.0.1:9000\"\nmetrics_listen = \"127.0.0.1:9000\""),
        "control.metrics_listen",
        "127.0.0.1:9000 is also control.api_listen: they need different ports",
    );
    assert_err(
        &control("api_token = \"\""),
        "control.api_token",
        "must not be empty (leave the key out for no token)",
    );
    assert_err(
        &control("api_token = \"a b\""),
        "control.api_token",
        "must be printable ASCII without spaces (it is sent in an HTTP header)",
    );
    assert_err_contains(
        &control(&format!("api_token = \"{}\"", "x".repeat(5000))),
        "control.api_token",
        "too long",
    );
    assert_err(
        &control("stats_interval_ms = 5"),
        "control.stats_interval_ms",
        "5 is out of range: must be 10 to 60000",
    );
    assert_err(
        &control("stats_interval_ms = 60001"),
        "control.stats_interval_ms",
        "60001 is out of range: must be 10 to 60000",
    );
    assert_err(
        &control("control_latency_ns = -1"),
        "control.control_latency_ns",
        "-1 is out of range: must be 0 to 10000000000",
    );
    assert_err(
        &control("command_ring = 15"),
        "control.command_ring",
        "15 is out of range: must be 16 to 1048576",
    );
    assert_err(
        &control("punt_ring = 1048577"),
        "control.punt_ring",
        "1048577 is out of range: must be 16 to 1048576",
    );
    assert_err_contains(
        &control("api_port = 1"),
        "control.api_port",
        "unknown field `api_port`, expected one of `api_listen`, `api_token`",
    );
    assert_err_contains(
        &control("api_listen = 9410"),
        "control.api_listen",
        "invalid type: integer `9410`, expected a string",
    );
    // Errors carry the line.
    let e = err(&control("command_ring = 1"));
    assert!(e.msg.ends_with("(line 12, column 16)"), "{e}");
}

#[test]
fn every_control_error_is_reported() {
    let text = control("api_token = \"\"\nstats_interval_ms = 1\npunt_ring = 0");
    let errors = Config::parse_all(&text, Path::new("t.toml")).unwrap_err();
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "control.api_token",
            "control.stats_interval_ms",
            "control.punt_ring"
        ]
    );
}

// ---- ports[].io -----------------------------------------------------------------------------

#[test]
fn pcap_io_paths_are_relative_to_the_config_file() {
    let text =
        io(r#"kind = "pcap", rx = "in.pcap", tx = "/abs/out.pcap", rx_loop = true, pace = false"#);
    let c = parse_at(&text, "/etc/longhaul/sw.toml").unwrap();
    assert_eq!(
        c.ports[0].io,
        PortIo::Pcap {
            rx: Some(PathBuf::from("/etc/longhaul/in.pcap")),
            tx: Some(PathBuf::from("/abs/out.pcap")),
            rx_loop: true,
            pace: false,
            tx_max_bytes: None,
        }
    );
    let c = parse_at(
        &io(r#"kind = "pcap", tx = "sub/out.pcap""#),
        "configs/x.toml",
    )
    .unwrap();
    assert_eq!(
        c.ports[0].io,
        PortIo::Pcap {
            rx: None,
            tx: Some(PathBuf::from("configs/sub/out.pcap")),
            rx_loop: false,
            pace: true,
            tx_max_bytes: None,
        }
    );
    // A bare file name: relative to the current directory, as given.
    let c = ok(&io(r#"kind = "pcap", rx = "in.pcap""#));
    assert!(
        matches!(&c.ports[0].io, PortIo::Pcap { rx: Some(p), .. } if p == Path::new("in.pcap"))
    );
}

#[test]
fn a_pcap_tx_file_may_be_capped() {
    let c = ok(&io(
        r#"kind = "pcap", tx = "out-{run}.pcap", tx_max_bytes = 1048576"#,
    ));
    assert!(matches!(
        &c.ports[0].io,
        PortIo::Pcap { tx_max_bytes: Some(1048576), tx: Some(p), .. } if p == Path::new("out-{run}.pcap")
    ));
    assert_err(
        &io(r#"kind = "pcap", rx = "in.pcap", tx_max_bytes = 1048576"#),
        "ports[0].io.tx_max_bytes",
        "tx_max_bytes needs tx (a file to write)",
    );
    assert_err(
        &io(r#"kind = "pcap", tx = "o.pcap", tx_max_bytes = 100"#),
        "ports[0].io.tx_max_bytes",
        "100 is out of range: must be at least 9256",
    );
    assert_err(
        &io(r#"kind = "memory", tx_max_bytes = 1048576"#),
        "ports[0].io.tx_max_bytes",
        "only kind = \"pcap\" takes this key, not kind = \"memory\"",
    );
}

#[test]
fn memory_and_dpdk_io() {
    assert_eq!(ok(&io(r#"kind = "memory""#)).ports[0].io, PortIo::Memory);
    // DPDK ports need `[dpdk]` (tests/config_dpdk.rs has the rest).
    let eal = "\n[dpdk]\neal_args = [\"--no-pci\"]\n";
    assert_eq!(
        ok(&(io(r#"kind = "dpdk", device = "net_null0""#) + eal)).ports[0].io,
        PortIo::Dpdk {
            device: "net_null0".into(),
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
        }
    );
    assert!(matches!(
        &ok(&(io(r#"kind = "dpdk", device = "0000:3b:00.0""#) + eal)).ports[0].io,
        PortIo::Dpdk { device, .. } if device == "0000:3b:00.0"
    ));
}

#[test]
fn io_as_a_sub_table() {
    let text = format!("{BASE}[ports.io]\nkind = \"pcap\"\nrx = \"a.pcap\"\n{PORT_B}");
    let c = parse_at(&text, "/d/t.toml").unwrap();
    assert!(
        matches!(&c.ports[0].io, PortIo::Pcap { rx: Some(p), .. } if p == Path::new("/d/a.pcap"))
    );
    assert_eq!(c.ports[1].io, PortIo::None);
    // Dotted keys.
    let text = BASE.replace(
        "rate_gbps = 100\n",
        "rate_gbps = 100\nio.kind = \"memory\"\n",
    );
    assert_eq!(ok(&text).ports[0].io, PortIo::Memory);
}

#[test]
fn io_errors() {
    assert_err_contains(
        &io(r#"kind = "afxdp""#),
        "ports[0].io.kind",
        "unknown variant `afxdp`, expected one of `pcap`, `memory`, `dpdk`",
    );
    assert_err(
        &io(r#"rx = "in.pcap""#),
        "ports[0].io.kind",
        "missing (this key is required)",
    );
    assert_err_contains(
        &io(r#"kind = "pcap", rx = "in.pcap", file = "x""#),
        "ports[0].io.file",
        "unknown field `file`",
    );
    assert_err(
        &io(r#"kind = "pcap""#),
        "ports[0].io.rx",
        "a pcap port needs rx (a file to read), tx (a file to write), or both",
    );
    assert_err(
        &io(r#"kind = "pcap", rx = """#),
        "ports[0].io.rx",
        "must not be empty: a file path",
    );
    assert_err(
        &io(r#"kind = "pcap", tx = "o.pcap", rx_loop = true"#),
        "ports[0].io.rx_loop",
        "rx_loop = true needs rx (a file to read)",
    );
    assert_err(
        &io(r#"kind = "pcap", rx = "same.pcap", tx = "same.pcap""#),
        "ports[0].io.tx",
        "same.pcap is also rx: the port would overwrite its own input",
    );
    assert_err(
        &io(r#"kind = "memory", rx = "in.pcap""#),
        "ports[0].io.rx",
        "only kind = \"pcap\" takes this key, not kind = \"memory\"",
    );
    assert_err(
        &io(r#"kind = "memory", device = "net_null0""#),
        "ports[0].io.device",
        "only kind = \"dpdk\" takes this key, not kind = \"memory\"",
    );
    assert_err(
        &io(r#"kind = "pcap", rx = "a.pcap", device = "net_null0""#),
        "ports[0].io.device",
        "only kind = \"dpdk\" takes this key, not kind = \"pcap\"",
    );
    assert_err(
        &io(r#"kind = "dpdk", device = "x", pace = true"#),
        "ports[0].io.pace",
        "only kind = \"pcap\" takes this key, not kind = \"dpdk\"",
    );
    assert_err(
        &io(r#"kind = "dpdk""#),
        "ports[0].io.device",
        "missing (this key is required)",
    );
    assert_err(
        &io(r#"kind = "dpdk", device = " ""#),
        "ports[0].io.device",
        "must not be empty: a PCI address (0000:3b:00.0) or a vdev name (net_null0)",
    );
    assert_err_contains(
        &io(r#"kind = "pcap", rx_loop = "yes", rx = "a""#),
        "ports[0].io.rx_loop",
        "expected true or false",
    );
}

#[test]
fn ports_cannot_share_pcap_files() {
    let two = |a: &str, b: &str| {
        let first = BASE.replace(
            "rate_gbps = 100\n",
            &format!("rate_gbps = 100\nio = {{ {a} }}\n"),
        );
        let second = PORT_B.replace(
            "rate_gbps = 100\n",
            &format!("rate_gbps = 100\nio = {{ {b} }}\n"),
        );
        format!("{first}{second}")
    };
    assert_err(
        &two(
            r#"kind = "pcap", tx = "o.pcap""#,
            r#"kind = "pcap", tx = "o.pcap""#,
        ),
        "ports[1].io.tx",
        "o.pcap is already ports[0].io.tx",
    );
    assert_err(
        &two(
            r#"kind = "pcap", rx = "i.pcap""#,
            r#"kind = "pcap", tx = "i.pcap""#,
        ),
        "ports[1].io.tx",
        "i.pcap is already ports[0].io.rx",
    );
    assert_err(
        &two(
            r#"kind = "pcap", tx = "o.pcap""#,
            r#"kind = "pcap", rx = "o.pcap""#,
        ),
        "ports[1].io.rx",
        "o.pcap is already ports[0].io.tx: that port would overwrite this port's input",
    );
    // Two ports may read the same file.
    let c = ok(&two(
        r#"kind = "pcap", rx = "i.pcap""#,
        r#"kind = "pcap", rx = "i.pcap""#,
    ));
    assert_eq!(c.ports[0].io, c.ports[1].io);
}

#[test]
fn reload_dirs_are_absolute_without_dotdot() {
    let c = ok(&format!(
        "{BASE}\n[control]\nreload_dirs = [\"/etc/longhaul\", \"/srv/cfg\"]\n"
    ));
    assert_eq!(
        c.control.reload_dirs,
        vec![PathBuf::from("/etc/longhaul"), PathBuf::from("/srv/cfg")]
    );
    assert!(ok(BASE).control.reload_dirs.is_empty());
    assert_err_contains(
        &format!("{BASE}\n[control]\nreload_dirs = [\"configs\"]\n"),
        "control.reload_dirs[0]",
        "not an absolute path",
    );
    assert_err_contains(
        &format!("{BASE}\n[control]\nreload_dirs = [\"/etc\", \"/etc/../root\"]\n"),
        "control.reload_dirs[1]",
        "'..'",
    );
}

#[test]
fn reload_limit_and_api_hosts() {
    let c = ok(&control(""));
    assert_eq!(c.control.reload_max_bytes, 4 << 20);
    assert!(c.control.api_hosts.is_empty());
    let c = ok(&control(
        "reload_max_bytes = 65536\napi_hosts = [\"Longhaul.lab\", \"box:8080\"]",
    ));
    assert_eq!(c.control.reload_max_bytes, 65536);
    assert_eq!(c.control.api_hosts, ["longhaul.lab", "box:8080"]);
    assert_err_contains(
        &control("reload_max_bytes = 10"),
        "control.reload_max_bytes",
        "10",
    );
    assert_err_contains(
        &control("api_hosts = [\"evil.example/x\"]"),
        "control.api_hosts[0]",
        "is not a host name",
    );
}
