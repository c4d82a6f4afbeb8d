//! The `longhaul` binary as a user runs it: replay determinism (same input twice, identical
//! bytes), the embedded default, and check-config's errors.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/live_config.rs"]
mod live_config;
#[path = "support/tmpdir.rs"]
mod tmpdir;
use tmpdir::TmpDir;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_longhaul"))
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn tmpdir(name: &str) -> TmpDir {
    TmpDir::new("cli", name)
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

/// An output that cannot be written (a full disk: /dev/full) fails the replay and names the file,
/// whether the error comes back while the replay runs (more than a write-behind block) or when
/// the output is finished (less).
#[test]
fn a_full_disk_fails_the_replay_and_names_the_output() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let dir = tmpdir("full-disk");
    let big = dir.join("big.pcap");
    let recs =
        longhaul_dataplane::pcap::read_pcap(root().join("examples/roce-64flows.pcap")).unwrap();
    // 8 copies of the trace, 30 ns apart: about 2.7 MB, more than one 1 MiB block.
    let many: Vec<_> = (0..8 * recs.len())
        .map(|i| longhaul_dataplane::pcap::PcapRecord {
            ts_ns: 1_000 + 30 * i as u64,
            data: recs[i % recs.len()].data.clone(),
        })
        .collect();
    longhaul_dataplane::pcap::write_pcap(&big, &many).unwrap();
    for input in [root().join("examples/roce-64flows.pcap"), big] {
        let out = bin()
            .args(["replay", "--config"])
            .arg(root().join("configs/baseline.toml"))
            .arg("--in")
            .arg(format!("dc0={}", input.display()))
            .args(["--out", "wan0=/dev/full"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: {err}", input.display());
        assert!(err.contains("/dev/full"), "{}: {err}", input.display());
    }
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

/// configs/baseline.toml with pcap io on dc0 (rx) and wan0 (tx), control on ephemeral ports.
fn live_config(dir: &Path, rx_extra: &str) -> PathBuf {
    let mut out = live_config::baseline_with_pcap_io(&root(), rx_extra);
    out.push_str("\n[control]\napi_listen = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\n");
    let p = dir.join("live.toml");
    std::fs::write(&p, out).unwrap();
    p
}

#[test]
fn run_until_idle_forwards_the_trace_and_prints_counters() {
    let d = tmpdir("run");
    let cfg = live_config(&d, "");
    let out = bin()
        .args(["run", "--until-idle", "--nonzero", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("port.wan0.tx_pkts 1024"), "{stdout}");
    let recs = longhaul_pcap_count(&d.join("wan0-out.pcap"));
    assert_eq!(recs, 1024);

    // Issue 42: the pool's memory was `+128 B` a buffer in run's report and `+192` in
    // check-config's limit. One function computes it now: the two print the same line.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let pool_line = |text: &str| -> String {
        let l = text
            .lines()
            .find(|l| l.contains("memory: packet pool"))
            .unwrap_or_else(|| panic!("no pool line in {text}"));
        l[l.find("packet pool").unwrap()..].to_string()
    };
    let check = bin().arg("check-config").arg(&cfg).output().unwrap();
    assert!(check.status.success());
    let check_out = String::from_utf8_lossy(&check.stdout);
    // (run adds how many workers, hence pools, it started.)
    let (ran, checked) = (pool_line(&stderr), pool_line(&check_out));
    assert!(
        ran.starts_with(&checked),
        "run: {ran}\ncheck-config: {checked}"
    );
    let per = longhaul_dataplane::packet::heap_buffer_bytes(4480);
    assert!(
        pool_line(&check_out).contains(&format!("65536 buffers of {per} B")),
        "{check_out}"
    );
}

/// Issue 42: `--until-idle` with a looped pcap input never stopped and said nothing. It is
/// refused at start, naming the file, the key and its line.
#[test]
fn until_idle_refuses_a_looped_input() {
    let d = tmpdir("until-idle-loop");
    let cfg = live_config(&d, ", rx_loop = true");
    let mut child = bin()
        .args(["run", "--until-idle", "--config"])
        .arg(&cfg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > std::time::Duration::from_secs(20) {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("run --until-idle with rx_loop = true still running after 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    let line = live_config::baseline_with_pcap_io(&root(), ", rx_loop = true")
        .lines()
        .position(|l| l.contains("rx_loop = true"))
        .unwrap()
        + 1;
    assert!(
        err.contains(&format!(
            "{}: ports[0].io.rx_loop (line {line}, column",
            cfg.display()
        )) && err.contains("--until-idle"),
        "{err}"
    );
}

/// Issue 42: a missing pcap `rx` was reported by `run` with the path alone (no config file, key
/// or line) after check-config had said ok. run refuses it naming all three; check-config warns
/// (status 0: the file may be made before the run).
#[test]
fn a_missing_pcap_input_is_named_with_file_key_and_line() {
    let d = tmpdir("missing-rx");
    let text = std::fs::read_to_string(live_config(&d, ""))
        .unwrap()
        .replace(
            &root()
                .join("examples/roce-64flows.pcap")
                .display()
                .to_string(),
            "nope/missing.pcap",
        );
    let cfg = d.join("missing.toml");
    std::fs::write(&cfg, &text).unwrap();
    let line = text
        .lines()
        .position(|l| l.contains("missing.pcap"))
        .unwrap()
        + 1;
    let want = format!("ports[0].io.rx (line {line}, column");
    let out = bin().args(["run", "--config"]).arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{}: {want}", cfg.display()))
            && err.contains(&d.join("nope/missing.pcap").display().to_string()),
        "{err}"
    );
    let out = bin().arg("check-config").arg(&cfg).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("{}: warning: {want}", cfg.display())),
        "{err}"
    );
}

/// Issue 42: the `ctl table insert --help` example failed on the shipped live config. Its entry
/// is taken from the help text and inserted as the API would, into configs/baseline-live.toml's
/// tables.
#[test]
fn ctl_insert_help_example_fits_the_shipped_live_config() {
    use longhaul_control::plane::PipelineControl;
    let out = bin()
        .args(["ctl", "table", "insert", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    let example = help.split_once("e.g. ").expect("an example").1;
    let (table, rest) = example.split_once(" '").unwrap();
    let entry: serde_json::Value = serde_json::from_str(rest.split_once('\'').unwrap().0)
        .unwrap_or_else(|e| panic!("the example is not JSON ({e}): {help}"));
    let cfg = longhaul_pipelines::load_config(&root().join("configs/baseline-live.toml")).unwrap();
    let mut control = longhaul_pipelines::baseline::control::BaselineControl::new(&cfg);
    if let Err(e) = control.insert(table, &entry) {
        panic!("`{table} {entry}` refused on configs/baseline-live.toml: {e}");
    }
}

/// Records in a pcap (24-byte header, 16-byte record headers), counted without our reader.
fn longhaul_pcap_count(p: &Path) -> usize {
    let b = std::fs::read(p).unwrap();
    let mut off = 24;
    let mut n = 0;
    while off + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + incl;
        n += 1;
    }
    assert_eq!(off, b.len(), "pcap ends on a record boundary");
    n
}

#[test]
fn sigint_stops_a_live_run_cleanly_and_ctl_talks_to_it() {
    use std::io::{BufRead, BufReader};
    let d = tmpdir("sigint");
    // The trace loops forever, paced: only a signal stops this run.
    let cfg = live_config(&d, ", rx_loop = true, pace = true");
    let mut child = bin()
        .args(["run", "--config"])
        .arg(&cfg)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for "management API on http://ADDR".
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut api = String::new();
    for _ in 0..10 {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(a) = line
            .trim()
            .strip_prefix("longhaul: management API on http://")
        {
            api = a.to_string();
            break;
        }
    }
    assert!(!api.is_empty(), "no API address announced");
    let ctl = |args: &[&str]| {
        bin()
            .args(["ctl", "--addr", &api])
            .args(args)
            .output()
            .unwrap()
    };
    let h = ctl(&["health"]);
    assert!(h.status.success(), "{}", String::from_utf8_lossy(&h.stderr));
    assert!(String::from_utf8_lossy(&h.stdout).contains("\"ok\""));
    let ins = ctl(&[
        "table",
        "insert",
        "l2",
        r#"{"mac": "02:00:00:00:99:01", "port": "dc1"}"#,
    ]);
    assert!(
        ins.status.success(),
        "{}",
        String::from_utf8_lossy(&ins.stderr)
    );
    let list = ctl(&["table", "list", "l2"]);
    assert!(String::from_utf8_lossy(&list.stdout).contains("02:00:00:00:99:01"));
    let bad = ctl(&["table", "insert", "nope", "{}"]);
    assert!(!bad.status.success());

    std::thread::sleep(std::time::Duration::from_millis(200));
    let pid = child.id().to_string();
    let k = Command::new("kill").args(["-INT", &pid]).status().unwrap();
    assert!(k.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "exit {:?}: {stdout}", out.status);
    assert!(stdout.starts_with("run: "), "{stdout}");
    assert!(stdout.contains("control.commands_applied 1"), "{stdout}");
    assert!(stdout.contains("port.dc0.rx_pkts"), "{stdout}");
    // The log lines of the table change and of the refused insert.
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut err, &mut logs).unwrap();
    assert!(
        logs.contains("table entry inserted") && logs.contains("table=\"l2\""),
        "{logs}"
    );
    assert!(
        logs.contains("table insert refused") && logs.contains("no table 'nope'"),
        "{logs}"
    );
}

#[test]
fn mechanisms_lists_the_registry() {
    let out = bin().arg("mechanisms").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        ["baseline", "themis", "spray", "reflex", "mlcc", "bifrost"],
        "{text}"
    );
    assert!(
        text.contains("[bifrost]") && text.contains("docs/bifrost.md"),
        "{text}"
    );
    let mlcc = text.lines().find(|l| l.starts_with("mlcc")).unwrap();
    assert!(
        mlcc.contains("[mlcc]") && mlcc.contains("docs/mlcc.md"),
        "{mlcc}"
    );
    let baseline = text.lines().find(|l| l.starts_with("baseline")).unwrap();
    assert!(baseline.contains("[int]"), "{baseline}");
    let reflex = text.lines().find(|l| l.starts_with("reflex")).unwrap();
    assert!(
        reflex.contains("[reflex]") && reflex.contains("host agent"),
        "{reflex}"
    );
}

/// `longhaul emulate` on a shipped scenario writes its outputs, and a bad scenario is named.
#[test]
fn emulate_writes_outputs_and_names_bad_scenarios() {
    let dir = tmpdir("emulate");
    let out = bin()
        .arg("emulate")
        .arg(root().join("scenarios/incast.toml"))
        .arg("--out-dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("flows: 3 of 3 done"), "{text}");
    assert!(dir.join("flows.csv").exists() && dir.join("fct_slowdown.png").exists());
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[emulation]\nduration_us = -1\n").unwrap();
    let out = bin().arg("emulate").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("bad.toml: emulation.duration_us: -1 is out of range"),
        "{err}"
    );
}

/// `--until-done` runs a scenario cut short by `--duration` until its flows are done; the
/// summary says what a cut run left and why; a bad or lone `--max-duration` is refused.
#[test]
fn emulate_until_done() {
    let incast = root().join("scenarios/incast.toml");
    let run = |args: &[&str]| {
        let out = bin()
            .arg("emulate")
            .arg(&incast)
            .args(args)
            .env("LONGHAUL_EMULATE_THP", "0")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let (code, cut, _) = run(&["--duration", "100"]);
    assert_eq!(code, Some(0));
    assert!(
        cut.starts_with("flows: 0 of 3 done\nunfinished: 3 "),
        "{cut}"
    );
    let (code, done, err) = run(&["--duration", "100", "--until-done"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(done.starts_with("flows: 3 of 3 done\n"), "{done}");
    let (code, _, err) = run(&["--until-done", "--max-duration", "0"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--max-duration: must be more than 0"), "{err}");
    let (code, _, err) = run(&["--max-duration", "1000"]);
    assert_eq!(code, Some(2), "clap: --max-duration needs --until-done");
    assert!(err.contains("--until-done"), "{err}");
}

/// `longhaul emulate` executes itself again with glibc's huge-page tunable (src/main.rs,
/// `emulate_on_huge_pages`): the arguments survive it (`--duration` and `--seed` take effect)
/// and the outputs are byte for byte those of a run kept in its first process.
#[test]
fn emulate_on_huge_pages_keeps_the_arguments_and_the_outputs() {
    let dir = tmpdir("emulate-thp");
    let run = |name: &str, keep: bool| {
        let out_dir = dir.join(name);
        let mut c = bin();
        c.env_remove("GLIBC_TUNABLES")
            .env_remove("LONGHAUL_EMULATE_THP")
            .arg("emulate")
            .arg(root().join("scenarios/incast.toml"))
            .args(["--duration", "300", "--seed", "3", "--out-dir"])
            .arg(&out_dir);
        if keep {
            c.env("LONGHAUL_EMULATE_THP", "0");
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout)
            .unwrap()
            .replace(&out_dir.display().to_string(), "OUT");
        (out_dir, text)
    };
    let (a, text_a) = run("a", false);
    let (b, text_b) = run("b", true);
    assert_eq!(text_a, text_b);
    let virtual_ns: u64 = text_a
        .lines()
        .find_map(|l| l.strip_prefix("virtual time "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no virtual time in {text_a}"));
    assert!(virtual_ns <= 300_000, "--duration lost: {text_a}");
    let files = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(files(&a), files(&b));
    assert!(files(&a).len() >= 2, "{:?}", files(&a));
    for f in files(&a) {
        assert_eq!(
            std::fs::read(a.join(&f)).unwrap(),
            std::fs::read(b.join(&f)).unwrap(),
            "{f:?}"
        );
    }
}

/// A file that is not a pcap: one line naming the file once (issue 20).
#[test]
fn a_bad_pcap_is_named_once() {
    let dir = tmpdir("badpcap");
    let p = dir.join("x.pcap");
    std::fs::write(&p, b"garbage").unwrap();
    let out = bin()
        .args(["replay", "--in", &format!("dc0={}", p.display())])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(e.matches("x.pcap").count(), 1, "{e}");
    assert!(e.contains("not a pcap file"), "{e}");
}

#[test]
fn version_says_whether_dpdk_is_built_in() {
    let out = bin().arg("--version").output().unwrap();
    assert!(out.status.success());
    let v = String::from_utf8(out.stdout).unwrap();
    let want = if cfg!(feature = "dpdk") {
        "DPDK ports: built in"
    } else {
        "DPDK ports: not built in"
    };
    assert!(v.starts_with("longhaul ") && v.contains(want), "{v}");
}

/// The PFC conformance case's replay, with `extra` arguments; (stdout, output dir).
fn replay_pfc(name: &str, extra: &[&str]) -> (String, TmpDir) {
    let case = root().join("pcap-tests/cases/pfc_xoff_xon");
    let d = tmpdir(name);
    let out = bin()
        .args(["replay", "--config"])
        .arg(case.join("switch.toml"))
        .arg("--in")
        .arg(format!("dc0={}", case.join("in_dc0.pcap").display()))
        .arg("--in")
        .arg(format!("dc1={}", case.join("in_dc1.pcap").display()))
        .arg("--out-dir")
        .arg(d.join("out"))
        .args(extra)
        .output()
        .expect("run longhaul");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (String::from_utf8(out.stdout).unwrap(), d)
}

#[test]
fn replay_plot_samples_without_changing_the_replay() {
    let dir = tmpdir("plotdir");
    let (plain, a) = replay_pfc("plain", &[]);
    let plot = ["--plot", dir.to_str().unwrap(), "--sample-us", "1"];
    let (plotted, b) = replay_pfc("plot", &plot);
    assert_eq!(plain, plotted, "sampling must not change the replay");
    for port in ["dc0", "dc1", "wan0"] {
        let f = |d: &Path| std::fs::read(d.join("out").join(format!("{port}.pcap"))).unwrap();
        assert_eq!(f(&a), f(&b), "{port}.pcap differs with --plot");
    }
    for f in [
        "timeseries.csv",
        "queues.png",
        "queues.svg",
        "throughput.png",
        "pfc_cnp.svg",
    ] {
        assert!(dir.join(f).exists(), "{f} missing");
    }
    let csv = std::fs::read_to_string(dir.join("timeseries.csv")).unwrap();
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.len() > 10 && rows.iter().all(|r| r.len() == head.len()));
    let q = col("wan0.class3.queued_bytes");
    let peak = rows
        .iter()
        .map(|r| r[q].parse::<u64>().unwrap())
        .max()
        .unwrap();
    assert!(
        peak > 10_000,
        "two ports into one at line rate build a queue: peak {peak}"
    );
    let pfc = col("dc0.pfc_tx");
    assert!(
        rows.last().unwrap()[pfc].parse::<u64>().unwrap() > 0,
        "PFC frames counted"
    );
}

#[test]
fn replay_json_is_one_object_with_the_summary() {
    let (out, _) = replay_pfc("json", &["--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["frames_in"], 200);
    let tx: u64 = v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tx_pkts"].as_u64().unwrap())
        .sum();
    assert_eq!(v["frames_out"], tx);
    assert!(v["counters"]["port.wan0.tx_pkts"].as_u64().unwrap() > 0);
    let zeros = v["counters"]
        .as_object()
        .unwrap()
        .values()
        .filter(|c| **c == 0);
    assert_eq!(zeros.count(), 0, "zero counters only with --all");
}

#[test]
fn a_zero_sampling_step_is_refused() {
    let d = tmpdir("sample0");
    let out = bin()
        .args(["replay", "--sample-us", "0", "--plot"])
        .arg(d.join("plots"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--sample-us") && err.contains("0"), "{err}");
}

/// `reproduce`: an unknown paper is refused with the list this build has; a missing scenarios
/// folder or scenario file is named (a run from outside a checkout says what to pass).
#[test]
fn reproduce_refuses_what_it_cannot_run() {
    let run = |args: &[&str], dir: &std::path::Path| {
        let out = bin()
            .arg("reproduce")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    let (code, err) = run(&["nosuch"], &root());
    assert_eq!(code, Some(1));
    assert!(
        err.contains("no paper \"nosuch\"") && err.contains("themis"),
        "{err}"
    );
    let tmp = std::env::temp_dir();
    let (code, err) = run(&["themis", "--quick"], &tmp);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("scenarios/papers: no such folder") && err.contains("--scenarios"),
        "{err}"
    );
    let empty = tmp.join(format!("longhaul-reproduce-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let (code, err) = run(
        &["themis", "--quick", "--scenarios", empty.to_str().unwrap()],
        &tmp,
    );
    assert_eq!(code, Some(1));
    assert!(
        err.contains("quick/dcqcn-30.toml: missing") && err.contains("gen_themis.py"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&empty);
}
