//! The `longhaul` binary as a user runs it: replay determinism (same input twice, identical
//! bytes), the embedded default, and check-config's errors.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_longhaul"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("longhaul-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn replay_to(dir: &Path) -> String {
    let out = bin()
        .args(["replay", "--config"])
        .arg(root().join("configs/baseline.toml"))
        .arg("--in")
        .arg(format!(
            "dc0={}",
            root().join("examples/roce-64flows.pcap").display()
        ))
        .arg("--out-dir")
        .arg(dir)
        .output()
        .expect("run longhaul");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn replay_is_byte_identical_across_runs() {
    let (a, b) = (tmpdir("a"), tmpdir("b"));
    let sa = replay_to(&a);
    let sb = replay_to(&b);
    assert_eq!(sa, sb, "same counters");
    assert!(sa.contains("port.wan0.tx_pkts 1024"), "{sa}");
    for port in ["dc0", "dc1", "wan0", "wan1"] {
        let fa = std::fs::read(a.join(format!("{port}.pcap"))).unwrap();
        let fb = std::fs::read(b.join(format!("{port}.pcap"))).unwrap();
        assert_eq!(fa, fb, "{port}.pcap differs between runs");
    }
    let wan0 = std::fs::read(a.join("wan0.pcap")).unwrap();
    assert!(wan0.len() > 1024 * 314, "wan0 carries the trace");
}

#[test]
fn embedded_default_runs() {
    let out = bin().args(["replay", "--nonzero"]).output().unwrap();
    assert!(out.status.success());
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("replay: 1024 frames in, 1024 out"), "{s}");
    assert!(s.contains("baseline.routed 1024"), "{s}");
}

#[test]
fn check_config_accepts_good_and_names_the_key_of_bad() {
    let ok = bin()
        .arg("check-config")
        .arg(root().join("configs/baseline.toml"))
        .output()
        .unwrap();
    assert!(ok.status.success());

    let d = tmpdir("cfg");
    let bad = d.join("bad.toml");
    let text = std::fs::read_to_string(root().join("configs/baseline.toml"))
        .unwrap()
        .replace(
            "port = \"wan0\"\nnext_hop_mac",
            "port = \"wan9\"\nnext_hop_mac",
        );
    std::fs::write(&bad, text).unwrap();
    let out = bin().arg("check-config").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.toml"), "{err}");
    assert!(err.contains("routes[2].port"), "{err}");
    assert!(err.contains("wan9"), "{err}");
}

#[test]
fn unknown_port_in_args_is_a_clear_error() {
    let out = bin()
        .args(["replay", "--config"])
        .arg(root().join("configs/baseline.toml"))
        .args(["--in", "nope=x.pcap"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("no port 'nope'"), "{err}");
}
