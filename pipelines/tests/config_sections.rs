//! Config parsing with the registry: every registered pipeline and section is known, sections
//! are validated by their mechanisms with the same `file: key: what (line L, column C)` errors
//! as the generic tables, and a table no mechanism claims is an unknown key.

use longhaul_control::config::{Config, ConfigError};
use longhaul_pipelines::parse_config;
use longhaul_pipelines::themis::config::ThemisConfig;
use std::path::Path;

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

fn err(text: &str) -> ConfigError {
    match parse_config(text, Path::new("t.toml")) {
        Ok(_) => panic!("config was accepted:\n{text}"),
        Err(e) => e,
    }
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

#[test]
fn unknown_pipeline_names_every_registered_one() {
    assert_err_contains(
        &format!("[switch]\nname = \"t\"\npipeline = \"hpcc\"\n{PORTS}"),
        "switch.pipeline",
        "unknown variant `hpcc`, expected one of `baseline`, `themis`, `spray`, `reflex`, `mlcc` (line 3, column 12)",
    );
}

#[test]
fn unknown_table_names_generic_tables_and_sections() {
    let e = err(&format!(
        "[switch]\nname = \"t\"\n{PORTS}\n[bogus]\nx = 1\n"
    ));
    assert_eq!(e.key, "bogus");
    assert!(
        e.msg.starts_with(
            "unknown field `bogus`, expected one of `switch`, `ports`, `qos`, `pfc`, `parser`, \
             `l2`, `routes`, `wire`, `neighbors`, `control`, `dpdk`, `int`, `themis`, `spray`, \
             `reflex`, `mlcc`, `bifrost`"
        ),
        "{e}"
    );
    assert!(e.msg.ends_with("(line 16, column 2)"), "{e}");
}

#[test]
fn themis_section_errors() {
    assert_err_contains(
        &format!("[switch]\nname = \"t\"\npipeline = \"themis\"\n{PORTS}"),
        "themis",
        "needs a [themis] table",
    );
    assert_err_contains(
        &format!("[switch]\nname = \"t\"\n{PORTS}\n[themis]\ndc_ports = [\"a\"]\n"),
        "themis",
        "only used with switch.pipeline = \"themis\"",
    );
}

/// A wrong type or an unknown key inside a section stops parsing with the key path and place,
/// as in a generic table.
#[test]
fn section_type_and_unknown_key_errors_have_path_and_place() {
    let base = format!("[switch]\nname = \"t\"\npipeline = \"themis\"\n{PORTS}\n[themis]\n");
    assert_err_contains(
        &format!("{base}dc_ports = [\"a\"]\nwan_ports = [\"b\"]\n[themis.pnp]\ncnp_dscp = \"x\"\n"),
        "themis.pnp.cnp_dscp",
        "expected an integer (line 21, column 12)",
    );
    assert_err_contains(
        &format!("{base}dc_ports = [\"a\"]\nwan_ports = [\"b\"]\nbogus = 1\n"),
        "themis.bogus",
        "unknown field `bogus`",
    );
    assert_err_contains(
        &format!("[switch]\nname = \"t\"\n{PORTS}\n[bifrost]\nports = [\"a\"]\npriorities = [3]\nslot_ns = 1.5\n"),
        "bifrost.slot_ns",
        "expected an integer",
    );
}

/// Validation errors of a section are reported with every other one, after the generic tables'.
#[test]
fn section_validation_errors_come_after_the_generic_ones() {
    let text = format!(
        "[switch]\nname = \"t\"\npipeline = \"themis\"\npool_buffers = 0\n{PORTS}\n[themis]\n\
         dc_ports = [\"a\"]\nwan_ports = [\"a\"]\n[themis.pnp]\ncnp_dscp = 64\n"
    );
    let errors =
        Config::parse_all_with(&text, Path::new("t.toml"), &*longhaul_pipelines::registry())
            .unwrap_err();
    let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "switch.pool_buffers",
            "themis.wan_ports",
            "themis.pnp.cnp_dscp",
            "themis.pnp.host_prefixes"
        ],
        "{errors:?}"
    );
    assert!(
        errors[2].msg.contains("(line 22, column 12)"),
        "{}",
        errors[2]
    );
}

#[test]
fn a_valid_section_is_found_by_type() {
    let text = format!(
        "[switch]\nname = \"t\"\npipeline = \"themis\"\n{PORTS}\n[themis]\n\
         dc_ports = [\"a\"]\nwan_ports = [\"b\"]\n[themis.trp]\nalpha = 7\n"
    );
    let c = parse_config(&text, Path::new("t.toml")).unwrap();
    let t = c.section::<ThemisConfig>().expect("[themis]");
    assert_eq!(t.trp.as_ref().map(|t| t.alpha), Some(7));
    assert!(t.pnp.is_none());
    assert_eq!(c.sections.names().collect::<Vec<_>>(), ["themis"]);
}

/// `[reflex]`'s own checks, each on the shipped config with one edit, every error at once.
#[test]
fn reflex_section_errors() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/reflex-esw.toml");
    let text = std::fs::read_to_string(&p).unwrap();
    let errs = |edit: &[(&str, &str)]| -> Vec<String> {
        let mut t = text.clone();
        for (a, b) in edit {
            assert!(t.contains(a), "{a}");
            t = t.replacen(a, b, 1);
        }
        match longhaul_pipelines::parse_config_all(&t, Path::new("r.toml")) {
            Ok(_) => Vec::new(),
            Err(v) => v.iter().map(|e| e.to_string()).collect(),
        }
    };
    let has = |v: &[String], part: &str| {
        assert!(v.iter().any(|e| e.contains(part)), "no '{part}' in {v:#?}")
    };
    assert!(errs(&[]).is_empty());
    let v = errs(&[("scheduler = \"wrr\"", "scheduler = \"drr\"")]);
    has(&v, "r.toml: reflex.ndt.n_throttle: NDT serves its queues N_throttle:1 in packets: [qos] scheduler must be \"wrr\"");
    let v = errs(&[("controlled_queue = 2 ", "controlled_queue = 3 ")]);
    has(
        &v,
        "reflex.ndt.controlled_queue: must differ from the data class (3)",
    );
    let v = errs(&[("controlled_queue = 2 ", "controlled_queue = 0 ")]);
    has(&v, "queue 0 is a class the QoS maps traffic to");
    let v = errs(&[("controlled_queue = 2 ", "controlled_queue = 7 ")]);
    has(&v, "queue 7 is in [qos] strict_classes");
    let v = errs(&[("controlled_queue = 2 ", "")]);
    has(&v, "reflex.ndt.controlled_queue: missing");
    let v = errs(&[
        ("alpha = 0.7", "alpha = 1.5"),
        ("int_udp_port = 5000", "int_udp_port = 4791"),
        ("n_cool = 5 ", "n_cool = -1 "),
    ]);
    has(&v, "reflex.ndt.alpha: 1.5 is out of range");
    has(&v, "reflex.int_udp_port: 4791 is RoCEv2's own port");
    has(&v, "reflex.nsf.n_cool");
    assert_eq!(v.len(), 3, "every error at once: {v:#?}");
    let v = errs(&[("pipeline = \"reflex\"", "pipeline = \"baseline\"")]);
    has(&v, "reflex");
    let nothing = text[..text.find("[reflex.nsf]").unwrap()].to_string();
    let v = match longhaul_pipelines::parse_config_all(&nothing, Path::new("r.toml")) {
        Ok(_) => Vec::new(),
        Err(v) => v.iter().map(|e| e.to_string()).collect(),
    };
    has(&v, "enable NSF ([reflex.nsf]) and/or NDT ([reflex.ndt])");
}

fn shipped(name: &str, edit: impl Fn(String) -> String) -> Result<Config, Vec<ConfigError>> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(name);
    let text = edit(std::fs::read_to_string(&p).unwrap());
    longhaul_pipelines::parse_config_all(&text, &p)
}

fn errors_of(r: Result<Config, Vec<ConfigError>>) -> String {
    match r {
        Ok(_) => String::new(),
        Err(e) => e
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// Bifrost grants whole frames: a slot shorter than the largest frame of the governed ports
/// (330 ns at 100 Gb/s against 4200 + 24 bytes) would never grant one and never drain (issue
/// 20's finding); 340 ns is fine.
#[test]
fn bifrost_slot_shorter_than_a_frame_is_refused() {
    let slot = |ns: u32| move |t: String| t.replace("slot_ns = 10000", &format!("slot_ns = {ns}"));
    let e = errors_of(shipped("bifrost-dci.toml", slot(330)));
    assert!(
        e.contains("bifrost.slot_ns") && e.contains("at least one whole frame (T >= 338 ns)"),
        "{e}"
    );
    assert_eq!(errors_of(shipped("bifrost-dci.toml", slot(340))), "");
}

/// Memory a config asks for is checked against `switch.memory_limit_bytes` (default 3/4 of the
/// machine's): the packet pool, THEMIS's tables, MLCC's PFQs.
#[test]
fn memory_beyond_the_limit_is_refused() {
    let limit = |t: String| {
        t.replacen(
            "[switch]\n",
            "[switch]\nmemory_limit_bytes = 104857600   # 100 MiB\n",
            1,
        )
    };
    let e = errors_of(shipped("baseline.toml", |t| {
        limit(t).replace("pool_buffers = 65536", "pool_buffers = 1000000")
    }));
    assert!(
        e.contains("switch.pool_buffers")
            && e.contains("more than switch.memory_limit_bytes (100 MiB"),
        "{e}"
    );
    let e = errors_of(shipped("themis-esw.toml", |t| {
        limit(t).replace("qp_capacity = 1024", "qp_capacity = 16777216")
    }));
    assert!(e.contains("themis: the THEMIS tables"), "{e}");
    let e = errors_of(shipped("mlcc-dci.toml", |t| {
        limit(t).replace("max_flows = 64 ", "max_flows = 65536 ")
    }));
    assert!(e.contains("mlcc.receiver.max_flows: the PFQs"), "{e}");
    // The default limit (3/4 of this machine's memory): the documented maximum pool of 4.5 KB
    // buffers (75 GiB) is refused on any machine with less than 100 GiB. The figure is the one
    // `run` reports (`heap_buffer_bytes` a buffer: 76416 MiB on x86-64).
    let e = errors_of(shipped("baseline.toml", |t| {
        t.replace("pool_buffers = 65536", "pool_buffers = 16777216")
    }));
    let mib = (16_777_216 * longhaul_dataplane::packet::heap_buffer_bytes(4480) as u64) >> 20;
    assert!(
        e.contains("switch.pool_buffers") && e.contains(&format!("{mib} MiB")),
        "{e}"
    );
}
