//! Every class of configuration error: the key path it names and the message it gives.

use longhaul_control::config::{Config, ConfigError};
use std::path::Path;

const SWITCH: &str = "[switch]\nname = \"t\"\n";

const PORTS: &str = r#"
[[ports]]
id = 0
name = "a"
mac = "02:00:00:00:00:01"
rate_gbps = 100

[[ports]]
id = 1
name = "b"
mac = "02:00:00:00:00:02"
rate_gbps = 100
"#;

/// The switch and two ports, then `extra`.
fn with(extra: &str) -> String {
    format!("{SWITCH}{PORTS}\n{extra}")
}

fn err(text: &str) -> ConfigError {
    match Config::parse(text, Path::new("t.toml")) {
        Ok(_) => panic!("config was accepted:\n{text}"),
        Err(e) => {
            assert_eq!(e.file, Path::new("t.toml"));
            e
        }
    }
}

/// The message without its " (line L, column C)" suffix.
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

// ---- syntax, unknown keys, types -----------------------------------------------------------

#[test]
fn syntax_error_has_line_and_column() {
    let e = err("[switch]\nname = \n");
    assert_eq!(e.key, "");
    assert!(e.msg.contains("(line 2, column 8)"), "{e}");
    assert!(!e.msg.contains('\n'), "{e}");
    assert_eq!(e.to_string(), format!("t.toml: {}", e.msg));
}

#[test]
fn duplicate_table_is_a_syntax_error() {
    let e = err("[switch]\nname = \"a\"\n[switch]\nname = \"b\"\n");
    assert!(e.msg.contains("duplicate key"), "{e}");
    assert!(e.msg.contains("(line 3,"), "{e}");
}

#[test]
fn unknown_key_top_level() {
    let e = err(&with("[bogus]\nx = 1\n"));
    assert_eq!(e.key, "bogus");
    assert!(
        e.msg
            .starts_with("unknown field `bogus`, expected one of `switch`, `ports`"),
        "{e}"
    );
}

#[test]
fn unknown_key_nested() {
    assert_err_contains(
        &format!("[switch]\nname = \"t\"\nseeed = 3\n{PORTS}"),
        "switch.seeed",
        "unknown field `seeed`, expected one of `name`, `pipeline`",
    );
    let e = err(&format!("[switch]\nname = \"t\"\nseeed = 3\n{PORTS}"));
    assert!(e.msg.ends_with("(line 3, column 1)"), "{e}");
}

#[test]
fn unknown_key_in_array_element() {
    let text = format!(
        "{SWITCH}{PORTS}\n[[ports]]\nid = 2\nname = \"c\"\nmac = \"02:00:00:00:00:03\"\nrate_gpbs = 10\n"
    );
    let e = err(&text);
    assert_eq!(e.key, "ports[2].rate_gpbs");
    assert!(
        e.msg
            .starts_with("unknown field `rate_gpbs`, expected one of"),
        "{e}"
    );
    assert!(e.msg.contains("`rate_gbps`"), "{e}");
    assert!(e.msg.ends_with("(line 20, column 1)"), "{e}");
    assert_eq!(
        e.to_string(),
        format!("t.toml: ports[2].rate_gpbs: {}", e.msg)
    );
}

#[test]
fn unknown_key_in_inline_table_and_deep_tables() {
    assert_err_contains(
        &with(
            "[[qos.classes]]\nclass = 3\necn = { kmin_bytes = 1, kmax_bytes = 2, p_max = 0.1 }\n",
        ),
        "qos.classes[0].ecn.p_max",
        "unknown field `p_max`",
    );
    assert_err_contains(
        &with("[parser.policy]\nbad_len = \"drop\"\n"),
        "parser.policy.bad_len",
        "unknown field",
    );
    assert_err_contains(
        &with("[pfc]\nxof_bytes = 1\n"),
        "pfc.xof_bytes",
        "unknown field",
    );
    assert_err_contains(
        &with("[[routes]]\nprefix = \"10.0.0.0/8\"\nport = \"a\"\nnexthop = 1\n"),
        "routes[0].nexthop",
        "unknown field",
    );
    assert_err_contains(
        &with("[[l2]]\nmac = \"02:00:00:00:00:09\"\nport = \"a\"\nvlan = 1\n"),
        "l2[0].vlan",
        "unknown field",
    );
}

#[test]
fn wrong_types() {
    assert_err(
        &format!("{SWITCH}{PORTS}").replace("rate_gbps = 100\n\n", "rate_gbps = \"fast\"\n\n"),
        "ports[0].rate_gbps",
        "invalid type: string \"fast\", expected a number",
    );
    assert_err(
        &format!("[switch]\nname = \"t\"\npool_buffers = 1.5\n{PORTS}"),
        "switch.pool_buffers",
        "invalid type: floating point `1.5`, expected an integer",
    );
    assert_err(
        &with("[pfc]\nenabled = 1\n"),
        "pfc.enabled",
        "invalid type: integer `1`, expected true or false",
    );
    assert_err_contains(
        "[switch]\nname = \"t\"\n[ports]\nid = 0\n",
        "ports",
        "invalid type: table, expected an array (write each entry as a [[ports]] table)",
    );
    assert_err_contains(
        &format!("qos = 3\n{SWITCH}{PORTS}"),
        "qos",
        "expected a table",
    );
    assert_err_contains(
        &with("[[routes]]\nprefix = \"10.0.0.0/8\"\nport = 1.5\nnext_hop_mac = \"02:00:00:00:00:09\"\n"),
        "routes[0].port",
        "expected a port name (string) or a port id (integer)",
    );
    assert_err_contains(
        &with("[qos]\nweights = 1\n"),
        "qos.weights",
        "expected an array",
    );
    assert_err_contains(
        &with("[qos]\ndscp_map = { \"26\" = \"three\" }\n"),
        "qos.dscp_map.26",
        "expected an integer",
    );
}

#[test]
fn unknown_choice_names_the_choices() {
    assert_err_contains(
        &with("[qos]\nscheduler = \"fifo\"\n"),
        "qos.scheduler",
        "unknown variant `fifo`, expected one of `strict`, `wrr`, `drr`",
    );
    assert_err_contains(
        &with("[qos]\ntrust = \"cos\"\n"),
        "qos.trust",
        "expected one of `dscp`, `pcp`, `none`",
    );
    assert_err_contains(
        &with("[parser.policy]\nvlan_stack = \"pass\"\n"),
        "parser.policy.vlan_stack",
        "expected `drop` or `forward`",
    );
    assert_err_contains(
        &format!("[switch]\nname = \"t\"\npipeline = \"reflex\"\n{PORTS}"),
        "switch.pipeline",
        // The generic layer alone knows only the default pipeline; with the registry every
        // registered one is listed (pipelines/tests/config_sections.rs).
        "unknown variant `reflex`, expected one of `baseline`",
    );
}

// ---- switch ---------------------------------------------------------------------------------

#[test]
fn missing_switch_and_name() {
    assert_err(
        PORTS,
        "switch",
        "missing required table [switch] (it needs at least name = \"...\")",
    );
    let e = err(&format!("[switch]\nseed = 2\n{PORTS}"));
    assert_eq!(
        (e.key.as_str(), e.msg.as_str()),
        ("switch.name", "missing (this key is required)")
    );
    assert_err(
        &format!("[switch]\nname = \" \"\n{PORTS}"),
        "switch.name",
        "must not be empty",
    );
}

#[test]
fn switch_ranges() {
    let sw = |kv: &str| format!("[switch]\nname = \"t\"\n{kv}\n{PORTS}");
    assert_err(
        &sw("pool_buffers = 0"),
        "switch.pool_buffers",
        "0 is out of range: must be 1 to 16777216",
    );
    assert_err(
        &sw("pool_buffers = 16777217"),
        "switch.pool_buffers",
        "16777217 is out of range: must be 1 to 16777216",
    );
    assert_err(
        &sw("buffer_bytes = 0"),
        "switch.buffer_bytes",
        "0 is out of range: must be 1 to 1099511627776",
    );
    assert_err(
        &sw("buffer_data_room = 70000"),
        "switch.buffer_data_room",
        "70000 is out of range: must be 64 to 65535",
    );
    assert_err(
        &sw("seed = -1"),
        "switch.seed",
        "-1 is out of range: must be at least 0",
    );
}

// ---- ports ----------------------------------------------------------------------------------

fn port(fields: &str) -> String {
    format!("{SWITCH}[[ports]]\n{fields}\n")
}

#[test]
fn empty_or_missing_ports() {
    assert_err(
        &format!("ports = []\n{SWITCH}"),
        "ports",
        "the list of ports is empty: at least one [[ports]] table is needed",
    );
    assert_err(
        SWITCH,
        "ports",
        "no ports: at least one [[ports]] table is needed",
    );
}

#[test]
fn missing_port_key_points_at_the_table() {
    let e = err(&port("id = 0\nname = \"a\"\nrate_gbps = 10"));
    assert_eq!(e.key, "ports[0].mac");
    assert_eq!(e.msg, "missing (this key is required) (line 3, column 1)");
}

#[test]
fn port_ranges() {
    let base = "name = \"a\"\nmac = \"02:00:00:00:00:01\"\n";
    assert_err(
        &port(&format!("id = 65535\n{base}rate_gbps = 10")),
        "ports[0].id",
        "65535 is out of range: must be 0 to 65534",
    );
    assert_err(
        &port(&format!("id = -1\n{base}rate_gbps = 10")),
        "ports[0].id",
        "-1 is out of range: must be 0 to 65534",
    );
    assert_err(
        &port(&format!("id = 0\n{base}rate_gbps = 2000")),
        "ports[0].rate_gbps",
        "2000 is out of range: must be 0.001 (1 Mb/s) to 1600 (Gb/s)",
    );
    assert_err(
        &port(&format!("id = 0\n{base}rate_gbps = 0.0")),
        "ports[0].rate_gbps",
        "0 is out of range: must be 0.001 (1 Mb/s) to 1600 (Gb/s)",
    );
    assert_err(
        &port(&format!("id = 0\n{base}rate_gbps = 0.0000001")),
        "ports[0].rate_gbps",
        "0.0000001 is out of range: must be 0.001 (1 Mb/s) to 1600 (Gb/s)",
    );
    assert_err(
        &port(&format!("id = 0\n{base}rate_gbps = nan")),
        "ports[0].rate_gbps",
        "NaN is out of range: must be 0.001 (1 Mb/s) to 1600 (Gb/s)",
    );
    assert_err(
        &port(&format!("id = 0\n{base}rate_gbps = 10\nmtu = 63")),
        "ports[0].mtu",
        "63 is out of range: must be 64 to 9216",
    );
    assert_err(
        &port(&format!("id = 0\n{base}rate_gbps = 10\nmtu = 9217")),
        "ports[0].mtu",
        "9217 is out of range: must be 64 to 9216",
    );
    assert_err(
        &port(&format!(
            "id = 0\n{base}rate_gbps = 10\nframe_overhead = 200"
        )),
        "ports[0].frame_overhead",
        "200 is out of range: must be 0 to 128",
    );
}

#[test]
fn mtu_larger_than_buffer_data_room() {
    let text = "[switch]\nname = \"t\"\nbuffer_data_room = 2048\n[[ports]]\nid = 0\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\nrate_gbps = 10\nmtu = 9000\n";
    let e = err(text);
    assert_eq!(e.key, "ports[0].mtu");
    assert_eq!(e.msg, "9000 is larger than switch.buffer_data_room (2048): a frame must fit in one buffer (line 9, column 7)");
    // The default mtu (4200) is checked too.
    let text = "[switch]\nname = \"t\"\nbuffer_data_room = 2048\n[[ports]]\nid = 0\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\nrate_gbps = 10\n";
    assert_err(text, "ports[0].mtu", "4200 (the default) is larger than switch.buffer_data_room (2048): a frame must fit in one buffer");
}

#[test]
fn duplicate_port_id_and_name() {
    assert_err(
        &with("[[ports]]\nid = 1\nname = \"c\"\nmac = \"02:00:00:00:00:03\"\nrate_gbps = 1\n"),
        "ports[2].id",
        "duplicate port id 1 (already used by ports[1])",
    );
    assert_err(
        &with("[[ports]]\nid = 2\nname = \"a\"\nmac = \"02:00:00:00:00:03\"\nrate_gbps = 1\n"),
        "ports[2].name",
        "duplicate port name 'a' (already used by ports[0])",
    );
}

#[test]
fn bad_port_name() {
    let msg = "is not a valid port name: use 1 to 32 characters from A-Z a-z 0-9 _ . -";
    assert_err(
        &port("id = 0\nname = \"dc 0\"\nmac = \"02:00:00:00:00:01\"\nrate_gbps = 1"),
        "ports[0].name",
        &format!("'dc 0' {msg}"),
    );
    assert_err(
        &port("id = 0\nname = \"\"\nmac = \"02:00:00:00:00:01\"\nrate_gbps = 1"),
        "ports[0].name",
        &format!("'' {msg}"),
    );
}

#[test]
fn bad_port_mac() {
    let p = |mac: &str| {
        port(&format!(
            "id = 0\nname = \"a\"\nmac = \"{mac}\"\nrate_gbps = 1"
        ))
    };
    let msg =
        "is not a MAC address: expected 6 hex bytes separated by ':' (e.g. 02:00:00:00:00:01)";
    assert_err(
        &p("02:00:00:00:01"),
        "ports[0].mac",
        &format!("'02:00:00:00:01' {msg}"),
    );
    assert_err(
        &p("02:00:00:00:00:0g"),
        "ports[0].mac",
        &format!("'02:00:00:00:00:0g' {msg}"),
    );
    assert_err(
        &p("02:00:00:00:00:01:02"),
        "ports[0].mac",
        &format!("'02:00:00:00:00:01:02' {msg}"),
    );
    assert_err(
        &p("2:0:0:0:0:1"),
        "ports[0].mac",
        &format!("'2:0:0:0:0:1' {msg}"),
    );
    assert_err(
        &p("01:80:c2:00:00:01"),
        "ports[0].mac",
        "01:80:c2:00:00:01 is a multicast/broadcast MAC: a unicast address is needed",
    );
    assert_err(
        &p("00:00:00:00:00:00"),
        "ports[0].mac",
        "00:00:00:00:00:00 is not a usable MAC address",
    );
}

// ---- qos ------------------------------------------------------------------------------------

#[test]
fn class_numbers_out_of_range() {
    assert_err(
        &with("[qos]\ndefault_class = 8\n"),
        "qos.default_class",
        "8 is out of range: must be 0 to 7",
    );
    assert_err(
        &with("[[qos.classes]]\nclass = 8\n"),
        "qos.classes[0].class",
        "8 is out of range: must be 0 to 7",
    );
    assert_err(
        &with("[[qos.classes]]\nlossless = false\n"),
        "qos.classes[0].class",
        "missing (this key is required)",
    );
    assert_err(
        &with("[qos]\nstrict_classes = [6, 9]\nscheduler = \"wrr\"\n"),
        "qos.strict_classes[1]",
        "9 is out of range: must be 0 to 7",
    );
    assert_err(
        &with("[qos]\nstrict_classes = [6, 6]\nscheduler = \"wrr\"\n"),
        "qos.strict_classes[1]",
        "class 6 is listed twice",
    );
}

#[test]
fn duplicate_class_entry() {
    assert_err(
        &with("[[qos.classes]]\nclass = 3\n[[qos.classes]]\nclass = 3\n"),
        "qos.classes[1].class",
        "class 3 is already configured in qos.classes[0]",
    );
}

#[test]
fn dscp_and_pcp_maps() {
    assert_err(
        &with("[qos]\ndscp_map = { \"64\" = 1 }\n"),
        "qos.dscp_map.64",
        "DSCP 64 is out of range: must be 0 to 63",
    );
    assert_err(
        &with("[qos]\ndscp_map = { \"ef\" = 5 }\n"),
        "qos.dscp_map.ef",
        "'ef' is not a DSCP value: keys are DSCP numbers 0 to 63 written as strings, e.g. \"3\" = 3",
    );
    assert_err(
        &with("[qos]\ndscp_map = { \"26\" = 8 }\n"),
        "qos.dscp_map.26",
        "8 is out of range: must be 0 to 7",
    );
    assert_err(
        &with("[qos]\ndscp_map = { \"26\" = 3, \"026\" = 4 }\n"),
        "qos.dscp_map.026",
        "DSCP 26 is already mapped by qos.dscp_map.26",
    );
    assert_err(
        &with("[qos]\npcp_map = { \"8\" = 1 }\n"),
        "qos.pcp_map.8",
        "PCP 8 is out of range: must be 0 to 7",
    );
    // The first error in file order.
    assert_err(
        &with("[qos]\ndscp_map = { \"9\" = 9, \"70\" = 1 }\n"),
        "qos.dscp_map.9",
        "9 is out of range: must be 0 to 7",
    );
}

#[test]
fn weights() {
    assert_err(
        &with("[qos]\nweights = [1, 2, 3]\n"),
        "qos.weights",
        "has 3 entries: exactly 8 are needed (one per class 0..7)",
    );
    assert_err(
        &with("[qos]\nweights = [1, 1, 1, 256, 1, 1, 1, 1]\n"),
        "qos.weights[3]",
        "256 is out of range: must be 0 to 255",
    );
    assert_err(
        &with("[qos]\nscheduler = \"wrr\"\ndscp_map = { \"26\" = 3 }\nweights = [1, 1, 1, 0, 1, 1, 1, 1]\n"),
        "qos.weights[3]",
        "class 3 receives traffic (qos.dscp_map) but has weight 0 and is not in qos.strict_classes: it would never be sent",
    );
    assert_err(
        &with("[qos]\nscheduler = \"drr\"\nweights = [0, 1, 1, 1, 1, 1, 1, 1]\n"),
        "qos.weights[0]",
        "class 0 receives traffic (qos.default_class) but has weight 0 and is not in qos.strict_classes: it would never be sent",
    );
    // Weight 0 is fine for a strict class or one nothing maps to.
    let ok = with("[qos]\nscheduler = \"wrr\"\nstrict_classes = [3]\ndscp_map = { \"26\" = 3 }\nweights = [1, 1, 0, 0, 1, 1, 1, 1]\n");
    Config::parse(&ok, Path::new("t.toml")).unwrap();
}

#[test]
fn queue_limits() {
    assert_err(
        &with("[qos]\nqueue_limit_bytes = 100\n"),
        "qos.queue_limit_bytes",
        "100 is smaller than the largest port mtu (4200): such a frame could never be queued",
    );
    assert_err(
        &with("[qos]\nqueue_limit_bytes = 0\n"),
        "qos.queue_limit_bytes",
        "0 is out of range: must be at least 1",
    );
    assert_err(
        &with("[qos]\nqueue_limit_bytes = 67108864\n"),
        "qos.queue_limit_bytes",
        "67108864 is larger than the whole shared buffer, switch.buffer_bytes (33554432)",
    );
    assert_err(
        &format!("[switch]\nname = \"t\"\nbuffer_bytes = 65536\n{PORTS}"),
        "qos.queue_limit_bytes",
        "1048576 (the default) is larger than the whole shared buffer, switch.buffer_bytes (65536)",
    );
    assert_err(
        &with("[[qos.classes]]\nclass = 2\nlimit_bytes = 1000\n"),
        "qos.classes[0].limit_bytes",
        "1000 is smaller than the largest port mtu (4200): such a frame could never be queued",
    );
    assert_err(
        &with("[qos]\ndrr_quantum_bytes = 0\n"),
        "qos.drr_quantum_bytes",
        "0 is out of range: must be 1 to 16777216",
    );
}

#[test]
fn ecn() {
    let c = |ecn: &str| with(&format!("[[qos.classes]]\nclass = 3\necn = {{ {ecn} }}\n"));
    assert_err(
        &c("kmin_bytes = 400, kmax_bytes = 400, pmax = 0.1"),
        "qos.classes[0].ecn.kmax_bytes",
        "400 must be greater than kmin_bytes (400)",
    );
    assert_err(
        &c("kmin_bytes = 1, kmax_bytes = 2, pmax = 0.0"),
        "qos.classes[0].ecn.pmax",
        "0 is out of range: must be > 0 and <= 1",
    );
    assert_err(
        &c("kmin_bytes = 1, kmax_bytes = 2, pmax = 0.5, at = \"egress\""),
        "qos.classes[0].ecn.at",
        "'egress': expected \"enqueue\" or \"dequeue\"",
    );
    assert_err(
        &c("kmin_bytes = 1, kmax_bytes = 2, pmax = 1.5"),
        "qos.classes[0].ecn.pmax",
        "1.5 is out of range: must be > 0 and <= 1",
    );
    assert_err(
        &c("kmin_bytes = 1, pmax = 0.5"),
        "qos.classes[0].ecn.kmax_bytes",
        "missing (this key is required)",
    );
    assert_err(
        &c("kmin_bytes = 1, kmax_bytes = 2000000, pmax = 0.5"),
        "qos.classes[0].ecn.kmax_bytes",
        "2000000 is above the class's queue limit (1048576 bytes): marking would never reach pmax",
    );
}

// ---- pfc ------------------------------------------------------------------------------------

const LOSSLESS3: &str = "[[qos.classes]]\nclass = 3\nlossless = true\nlimit_bytes = 4194304\n";

fn pfc(kv: &str) -> String {
    with(&format!("{LOSSLESS3}[pfc]\nenabled = true\n{kv}\n"))
}

const PFC_OK: &str = "xoff_bytes = 262144\nxon_bytes = 200000\nheadroom_bytes = 65536";

#[test]
fn pfc_ok() {
    let c = Config::parse(&pfc(PFC_OK), Path::new("t.toml")).unwrap();
    assert!(c.pfc.enabled);
    assert_eq!(c.pfc.pause_quanta, 65535);
    assert_eq!(c.pfc.refresh_ns, 167_769); // half of 65535 x 512 bit at 100 Gb/s
}

#[test]
fn pfc_thresholds_required_when_enabled() {
    assert_err(
        &pfc("xon_bytes = 1\nheadroom_bytes = 65536"),
        "pfc.xoff_bytes",
        "missing (this key is required)",
    );
    assert_err(
        &pfc("xoff_bytes = 262144\nheadroom_bytes = 65536"),
        "pfc.xon_bytes",
        "missing (this key is required)",
    );
}

#[test]
fn pfc_dynamic_alpha_in_range() {
    assert_err(
        &pfc(
            "xoff_bytes = 262144\nxon_bytes = 259072\nheadroom_bytes = 65536\ndynamic_alpha = 0.0",
        ),
        "pfc.dynamic_alpha",
        "0 is out of range: must be > 0 and <= 8",
    );
}

#[test]
fn pfc_xon_below_xoff() {
    assert_err(
        &pfc("xoff_bytes = 1000\nxon_bytes = 1000\nheadroom_bytes = 65536"),
        "pfc.xon_bytes",
        "1000 must be less than pfc.xoff_bytes (1000)",
    );
}

#[test]
fn pfc_needs_a_lossless_class() {
    assert_err(
        &with(&format!("[pfc]\nenabled = true\n{PFC_OK}\n")),
        "pfc.enabled",
        "PFC is enabled but no class is lossless: set lossless = true in a [[qos.classes]] entry",
    );
}

#[test]
fn lossless_needs_pfc() {
    assert_err(
        &with(LOSSLESS3),
        "qos.classes[0].lossless",
        "class 3 is lossless but pfc.enabled is false: without PFC a lossless class would drop",
    );
}

#[test]
fn pfc_headroom_at_least_two_frames() {
    assert_err(
        &pfc("xoff_bytes = 262144\nxon_bytes = 1\nheadroom_bytes = 8447"),
        "pfc.headroom_bytes",
        "8447 is less than 2 x the largest frame on the wire (2 x 4224 = 8448 bytes): one frame can be in flight in each direction when XOFF is sent",
    );
    Config::parse(
        &pfc("xoff_bytes = 262144\nxon_bytes = 1\nheadroom_bytes = 8448"),
        Path::new("t.toml"),
    )
    .unwrap();
}

#[test]
fn pfc_xoff_plus_headroom_within_class_limit() {
    assert_err(
        &pfc("xoff_bytes = 4194304\nxon_bytes = 1\nheadroom_bytes = 65536"),
        "qos.classes[0].limit_bytes",
        "class 3 is lossless but its limit (4194304 bytes) is less than pfc.xoff_bytes + pfc.headroom_bytes (4194304 + 65536 = 4259840): it would drop before PFC pauses the sender",
    );
}

#[test]
fn pfc_total_headroom_within_buffer() {
    let text = format!(
        "[switch]\nname = \"t\"\nbuffer_bytes = 4194304\n{PORTS}\n{LOSSLESS3}[pfc]\nenabled = true\nxoff_bytes = 100000\nxon_bytes = 1\nheadroom_bytes = 3000000\n"
    );
    assert_err(
        &text,
        "pfc.headroom_bytes",
        "2 ports x 1 lossless classes x 3000000 bytes = 6000000 bytes of headroom is more than switch.buffer_bytes (4194304)",
    );
}

#[test]
fn pfc_ranges() {
    assert_err(
        &pfc(&format!("{PFC_OK}\npause_quanta = 0")),
        "pfc.pause_quanta",
        "0 is out of range: must be 1 to 65535",
    );
    assert_err(
        &pfc(&format!("{PFC_OK}\npause_quanta = 65536")),
        "pfc.pause_quanta",
        "65536 is out of range: must be 1 to 65535",
    );
    assert_err(
        &pfc(&format!("{PFC_OK}\nrefresh_ns = 0")),
        "pfc.refresh_ns",
        "0 is out of range: must be at least 1",
    );
    assert_err(
        &pfc("xoff_bytes = 0\nxon_bytes = 0\nheadroom_bytes = 65536"),
        "pfc.xoff_bytes",
        "0 is out of range: must be at least 1",
    );
}

#[test]
fn pfc_refresh_shorter_than_pause() {
    assert_err(
        &pfc(&format!("{PFC_OK}\npause_quanta = 1000\nrefresh_ns = 5120")),
        "pfc.refresh_ns",
        "5120 is not shorter than the pause time of 1000 quanta on port 'a' (5120 ns at 100 Gb/s): the upstream would resume between refreshes",
    );
}

// ---- parser ---------------------------------------------------------------------------------

#[test]
fn parser_ranges() {
    assert_err(
        &with("[parser]\nmax_vlan_tags = 3\n"),
        "parser.max_vlan_tags",
        "3 is out of range: must be 0 to 2",
    );
}

// ---- l2 and routes --------------------------------------------------------------------------

fn route(prefix: &str, port: &str) -> String {
    format!(
        "[[routes]]\nprefix = \"{prefix}\"\nport = {port}\nnext_hop_mac = \"02:00:00:00:00:09\"\n"
    )
}

#[test]
fn dangling_port_references() {
    assert_err(
        &with(&route("10.0.0.0/8", "\"x\"")),
        "routes[0].port",
        "no port named 'x' (ports: a, b)",
    );
    assert_err(
        &with(&route("10.0.0.0/8", "7")),
        "routes[0].port",
        "no port with id 7 (port ids: 0, 1)",
    );
    assert_err(
        &with("[[l2]]\nmac = \"02:00:00:00:00:09\"\nport = \"c\"\n"),
        "l2[0].port",
        "no port named 'c' (ports: a, b)",
    );
    assert_err(
        &with("[[l2]]\nmac = \"02:00:00:00:00:09\"\nport = 9\n"),
        "l2[0].port",
        "no port with id 9 (port ids: 0, 1)",
    );
    assert_err(
        &with(&route("10.0.0.0/8", "\"1\"")),
        "routes[0].port",
        "no port named '1' (ports: a, b); to refer to port id 1, write it as an integer: port = 1",
    );
}

#[test]
fn dangling_reference_has_location() {
    let e = err(&with(&route("10.0.0.0/8", "\"x\"")));
    assert_eq!(
        e.to_string(),
        "t.toml: routes[0].port: no port named 'x' (ports: a, b) (line 18, column 8)"
    );
}

#[test]
fn bad_prefixes() {
    assert_err(
        &with(&route("10.1.2.0/16", "\"a\"")),
        "routes[0].prefix",
        "'10.1.2.0/16' has host bits set (did you mean 10.1.0.0/16?)",
    );
    assert_err(
        &with(&route("2001:db8::1/64", "\"a\"")),
        "routes[0].prefix",
        "'2001:db8::1/64' has host bits set (did you mean 2001:db8::/64?)",
    );
    assert_err(
        &with(&route("10.1.0.0", "\"a\"")),
        "routes[0].prefix",
        "'10.1.0.0' is not a prefix: expected address/length, e.g. 10.1.0.0/16 or 2001:db8::/32",
    );
    assert_err(
        &with(&route("10.1.0.0/33", "\"a\"")),
        "routes[0].prefix",
        "'10.1.0.0/33': prefix length '33' is not a number from 0 to 32",
    );
    assert_err(
        &with(&route("2001:db8::/129", "\"a\"")),
        "routes[0].prefix",
        "'2001:db8::/129': prefix length '129' is not a number from 0 to 128",
    );
    assert_err(
        &with(&route("10.1.0/16", "\"a\"")),
        "routes[0].prefix",
        "'10.1.0' is not an IPv4 or IPv6 address (in prefix '10.1.0/16')",
    );
}

#[test]
fn duplicate_route_prefix() {
    let text = with(&format!(
        "{}{}",
        route("10.0.0.0/8", "\"a\""),
        route("10.0.0.0/8", "\"b\"")
    ));
    assert_err(
        &text,
        "routes[1].prefix",
        "duplicate route for 10.0.0.0/8 (already in routes[0])",
    );
    // Same address, different length: two routes.
    let ok = with(&format!(
        "{}{}",
        route("10.0.0.0/8", "\"a\""),
        route("10.0.0.0/16", "\"b\"")
    ));
    Config::parse(&ok, Path::new("t.toml")).unwrap();
}

#[test]
fn duplicate_l2_mac() {
    let e = "[[l2]]\nmac = \"02:00:00:00:00:09\"\nport = \"a\"\n[[l2]]\nmac = \"02:00:00:00:00:09\"\nport = \"b\"\n";
    assert_err(
        &with(e),
        "l2[1].mac",
        "duplicate MAC 02:00:00:00:00:09 (already in l2[0])",
    );
}

#[test]
fn bad_macs_in_l2_and_routes() {
    assert_err_contains(
        &with("[[l2]]\nmac = \"zz\"\nport = \"a\"\n"),
        "l2[0].mac",
        "'zz' is not a MAC address",
    );
    assert_err(
        &with("[[routes]]\nprefix = \"10.0.0.0/8\"\nport = \"a\"\nnext_hop_mac = \"ff:ff:ff:ff:ff:ff\"\n"),
        "routes[0].next_hop_mac",
        "ff:ff:ff:ff:ff:ff is a multicast/broadcast MAC: a unicast address is needed",
    );
    assert_err(
        &with("[[routes]]\nprefix = \"10.0.0.0/8\"\nport = \"a\"\n"),
        "routes[0].next_hop_mac",
        "missing: a route needs next_hop_mac (static) or next_hop (a gateway address, resolved \
         by ARP / neighbour discovery)",
    );
}

// ---- many errors ----------------------------------------------------------------------------

#[test]
fn parse_all_reports_every_validation_error() {
    let text = format!(
        "[switch]\nname = \"t\"\npool_buffers = 0\n{PORTS}\n[qos]\ndefault_class = 9\n{}",
        route("10.0.0.1/8", "\"zz\"")
    );
    let errors = Config::parse_all(&text, Path::new("t.toml")).unwrap_err();
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "switch.pool_buffers",
            "qos.default_class",
            "routes[0].prefix",
            "routes[0].port"
        ]
    );
    // parse() gives the first.
    assert_eq!(err(&text), errors[0]);
}

#[test]
fn references_to_a_broken_port_are_not_reported_twice() {
    let text = format!(
        "{SWITCH}[[ports]]\nid = 99999\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\nrate_gbps = 1\n{}",
        route("10.0.0.0/8", "\"a\"")
    );
    let errors = Config::parse_all(&text, Path::new("t.toml")).unwrap_err();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].key, "ports[0].id");
}

#[test]
fn load_reports_read_errors() {
    let e = Config::load(Path::new("/nonexistent/longhaul.toml")).unwrap_err();
    assert_eq!(e.file, Path::new("/nonexistent/longhaul.toml"));
    assert_eq!(e.key, "");
    assert!(e.msg.starts_with("cannot read the file: "), "{e}");
    assert!(
        e.to_string()
            .starts_with("/nonexistent/longhaul.toml: cannot read the file: "),
        "{e}"
    );
}

// ---- robustness -----------------------------------------------------------------------------

/// No input makes the parser panic: every truncation and every one-line deletion of the baseline
/// config either parses or gives an error with a non-empty message.
#[test]
fn mangled_configs_never_panic() {
    let path =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs/baseline.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let check = |t: &str| {
        if let Err(errors) = Config::parse_all(t, Path::new("m.toml")) {
            assert!(!errors.is_empty());
            assert!(errors.iter().all(|e| !e.msg.is_empty()));
        }
    };
    for (i, _) in text.char_indices() {
        check(&text[..i]);
    }
    let lines: Vec<&str> = text.lines().collect();
    for i in 0..lines.len() {
        let mut l = lines.clone();
        l.remove(i);
        check(&l.join("\n"));
        let mut l = lines.clone();
        l[i] = "x = 1";
        check(&l.join("\n"));
    }
}

#[test]
fn every_unknown_key_is_reported_at_once_at_its_line() {
    let text = format!(
        "{SWITCH}colour = \"red\"\n{PORTS}speed = 5\nio = {{ kind = \"pcap\", tx = \"x.pcap\", bogus = 1 }}\n\n[bogus_table]\nx = 1\n\n[[routes]]\nprefix = \"10.0.0.0/8\"\nport = \"a\"\nnext_hop_mac = \"02:00:00:00:00:09\"\nweight = 3\n"
    );
    let errs = Config::parse_all(&text, Path::new("t.toml")).unwrap_err();
    let got: Vec<(&str, &str)> = errs
        .iter()
        .map(|e| (e.key.as_str(), e.msg.rsplit(" (").next().unwrap()))
        .collect();
    // Lines in the file as written, although each key was removed before the next parse.
    let line = |needle: &str| text[..text.find(needle).unwrap()].matches('\n').count() + 1;
    assert_eq!(
        got,
        [
            (
                "switch.colour",
                format!("line {}, column 1)", line("colour")).as_str()
            ),
            (
                "ports[1].speed",
                format!("line {}, column 1)", line("speed")).as_str()
            ),
            (
                "ports[1].io.bogus",
                format!("line {}, column 38)", line("io = ")).as_str()
            ),
            (
                "bogus_table",
                format!("line {}, column 2)", line("[bogus_table]")).as_str()
            ),
            (
                "routes[0].weight",
                format!("line {}, column 1)", line("weight")).as_str()
            ),
        ]
    );
    assert!(errs.iter().all(|e| e.msg.starts_with("unknown field `")));
    // The first one is what `parse` returns, as before.
    assert_eq!(err(&text).key, "switch.colour");
    // Once the unknown keys are gone, the validation errors come (all of them).
    let fixed = format!("{SWITCH}{PORTS}mtu = 1\n[pfc]\nxoff_bytes = -1\n");
    let errs = Config::parse_all(&fixed, Path::new("t.toml")).unwrap_err();
    assert!(errs.len() >= 2, "{errs:?}");
}

// ---- ECMP groups (routes[].next_hops) -----------------------------------------------------

fn group(members: &[&str]) -> String {
    let m: Vec<String> = members.iter().map(|m| format!("  {m},\n")).collect();
    format!(
        "[[routes]]\nprefix = \"10.0.0.0/8\"\nnext_hops = [\n{}]\n",
        m.concat()
    )
}

const A9: &str = "{ port = \"a\", next_hop_mac = \"02:00:00:00:00:09\" }";
const B9: &str = "{ port = \"b\", next_hop_mac = \"02:00:00:00:00:09\" }";

#[test]
fn ecmp_group_is_accepted() {
    let c = Config::parse(&with(&group(&[A9, B9])), Path::new("t.toml")).unwrap();
    assert_eq!(c.routes[0].hops.len(), 2);
    assert!(c.routes[0].is_group());
    assert_eq!(c.routes[0].hops[1].port, 1);
    assert_eq!(c.switch.ecmp_seed, 0);
}

#[test]
fn bad_ecmp_groups() {
    assert_err(
        &with(&group(&[])),
        "routes[0].next_hops",
        "an ECMP group needs at least one next hop ({ port = ..., next_hop_mac = ... })",
    );
    let many: Vec<String> = (0..17)
        .map(|i| format!("{{ port = \"a\", next_hop_mac = \"02:00:00:00:01:{i:02x}\" }}"))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_err(
        &with(&group(&many)),
        "routes[0].next_hops",
        "an ECMP group holds at most 16 next hops, this one has 17",
    );
    assert_err(
        &with(&group(&[A9, B9, A9])),
        "routes[0].next_hops[2]",
        "the same next hop as routes[0].next_hops[0]: list each member once (a member listed \
         twice is not weighted, it is a mistake)",
    );
    assert_err(
        &with(&group(&[
            A9,
            "{ port = \"c\", next_hop_mac = \"02:00:00:00:00:09\" }",
        ])),
        "routes[0].next_hops[1].port",
        "no port named 'c' (ports: a, b)",
    );
    assert_err_contains(
        &with(&group(&[A9, "{ port = \"b\" }"])),
        "routes[0].next_hops[1].next_hop_mac",
        "missing: a route needs next_hop_mac",
    );
    assert_err(
        &with(&format!("{}port = \"a\"\n", group(&[A9, B9]))),
        "routes[0].port",
        "a route with next_hops (an ECMP group) gives each member's port and next_hop_mac / \
         next_hop inside next_hops, not on the route",
    );
    assert_err_contains(
        &with(&group(&[
            A9,
            "{ port = \"b\", mac = \"02:00:00:00:00:09\" }",
        ])),
        "routes[0].next_hops[1].mac",
        "unknown field `mac`",
    );
    // The error names the file, the key and the place.
    let e = err(&with(&group(&[A9, B9, A9])));
    assert!(
        e.to_string()
            .starts_with("t.toml: routes[0].next_hops[2]: the same next hop as"),
        "{e}"
    );
    assert!(e.msg.contains(" (line "), "{e}");
    assert_err_contains(
        &with(&group(&[A9, B9])).replace("[switch]\n", "[switch]\necmp_seed = -1\n"),
        "switch.ecmp_seed",
        "-1 is out of range",
    );
}
