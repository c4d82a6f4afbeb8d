//! The control plane under the attacks of issue 42, against a live `longhaul run`: a FIFO and an
//! oversized file offered to `/reload`, a browser's cross-site POST (text/plain, foreign
//! Origin), a foreign Host (DNS rebinding), duplicate JSON keys, a broadcast next hop; then what
//! the operator relies on: `ctl reload` without a path reads the file the run started with,
//! `/health` and the live counters, a `promtool check metrics` clean scrape, and SIGTERM
//! stopping the process within a second.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// configs/baseline.toml with a looping, paced pcap rx on dc0 and a tx capture on wan0, the
/// API and metrics on ephemeral ports, reloads limited to 64 KiB.
fn live_config(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let mut out = live_config::baseline_with_pcap_io(&root(), ", rx_loop = true, pace = true");
    out.push_str(extra);
    out.push_str(
        "\n[control]\napi_listen = \"127.0.0.1:0\"\nmetrics_listen = \"127.0.0.1:0\"\n\
         reload_max_bytes = 65536\n",
    );
    let p = dir.join(name);
    std::fs::write(&p, out).unwrap();
    p
}

struct Live {
    child: Child,
    api: String,
    metrics: String,
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(cfg: &Path) -> Live {
    let mut child = bin()
        .args(["run", "--config"])
        .arg(cfg)
        .env_remove("LONGHAUL_API_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let (mut api, mut metrics) = (String::new(), String::new());
    for _ in 0..20 {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap() == 0 {
            break;
        }
        if let Some(a) = line.trim().strip_prefix("longhaul: metrics on http://") {
            metrics = a.trim_end_matches("/metrics").to_owned();
        }
        if let Some(a) = line
            .trim()
            .strip_prefix("longhaul: management API on http://")
        {
            api = a.to_owned();
        }
        if line.contains("running;") {
            break;
        }
    }
    // Keep draining stderr so that the process never blocks on it.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    assert!(
        !api.is_empty() && !metrics.is_empty(),
        "no addresses announced"
    );
    Live {
        child,
        api,
        metrics,
    }
}

/// Sends exactly `head` (request line and headers, without the blank line) and `body`;
/// returns the status and the body, and the time the answer took.
fn send(addr: &str, head: &str, body: &str) -> (u16, String, Duration) {
    let t = Instant::now();
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let req = format!(
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    c.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = c.read_to_string(&mut out);
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map_or("", |x| x.1).to_owned();
    (status, body, t.elapsed())
}

/// A request as `longhaul ctl` sends it (JSON, the listen address as Host).
fn json(addr: &str, method: &str, path: &str, body: &str) -> (u16, String, Duration) {
    send(
        addr,
        &format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json"),
        body,
    )
}

#[test]
fn attacks_on_a_live_run_are_refused_and_the_control_plane_stays_truthful() {
    let d = TmpDir::new("attacks", "live");
    let cfg = live_config(&d, "live.toml", "");
    let live = start(&cfg);
    let api = live.api.clone();

    let (st, body, _) = json(&api, "GET", "/health", "");
    assert_eq!(st, 200, "{body}");

    // A FIFO in the reload directory: refused at once, nothing blocks.
    let fifo = d.join("x.toml");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let (st, body, took) = json(&api, "POST", "/reload", r#"{"path": "x.toml"}"#);
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("FIFO") && body.contains("x.toml"), "{body}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let (st, _, took) = json(&api, "GET", "/health", "");
    assert_eq!(st, 200);
    assert!(took < Duration::from_secs(1), "{took:?}");

    // A file over control.reload_max_bytes: refused before reading, naming the limit.
    std::fs::write(d.join("big.toml"), vec![b'#'; 1 << 20]).unwrap();
    let (st, body, _) = json(&api, "POST", "/reload", r#"{"path": "big.toml"}"#);
    assert_eq!(st, 400, "{body}");
    assert!(
        body.contains("65536") && body.contains("reload_max_bytes") && body.contains("big.toml"),
        "{body}"
    );

    // The browser-style cross-site request of the issue: text/plain, foreign Origin.
    let default_route =
        r#"{"prefix": "0.0.0.0/0", "port": "wan0", "next_hop_mac": "02:00:00:00:00:99"}"#;
    let (st, body, _) = send(
        &api,
        &format!(
            "POST /tables/routes HTTP/1.1\r\nHost: {api}\r\nOrigin: http://evil.example\r\n\
             Content-Type: text/plain;charset=UTF-8"
        ),
        default_route,
    );
    assert_eq!(st, 403, "{body}");
    // text/plain from the same origin is refused too (a form post).
    let (st, body, _) = send(
        &api,
        &format!("POST /tables/routes HTTP/1.1\r\nHost: {api}\r\nContent-Type: text/plain"),
        default_route,
    );
    assert_eq!(st, 415, "{body}");
    // DNS rebinding: a foreign Host, for reads and writes.
    let port = api.rsplit_once(':').unwrap().1;
    for (method, path, body) in [
        ("GET", "/stats", ""),
        ("POST", "/tables/routes", default_route),
    ] {
        let (st, b, _) = send(
            &api,
            &format!(
                "{method} {path} HTTP/1.1\r\nHost: evil.example:{port}\r\nContent-Type: application/json"
            ),
            body,
        );
        assert_eq!(st, 421, "{method} {path}: {b}");
    }
    let (st, body, _) = json(&api, "GET", "/tables/routes?limit=1000", "");
    assert_eq!(st, 200);
    assert!(
        !body.contains("0.0.0.0/0"),
        "the route was inserted: {body}"
    );

    // Duplicate keys: refused, not "the last one wins".
    let (st, body, _) = json(
        &api,
        "POST",
        "/tables/l2",
        r#"{"mac": "02:00:00:00:99:01", "port": "dc1", "port": "wan0"}"#,
    );
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("duplicate key"), "{body}");

    // A broadcast next hop is refused as the config file refuses it; the file's MAC syntax
    // (with '-') is accepted.
    let (st, body, _) = json(
        &api,
        "POST",
        "/tables/routes",
        r#"{"prefix": "10.99.0.0/16", "port": "wan0", "next_hop_mac": "ff:ff:ff:ff:ff:ff"}"#,
    );
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("multicast/broadcast"), "{body}");
    let (st, body, _) = json(
        &api,
        "POST",
        "/tables/routes",
        r#"{"prefix": "10.99.0.0/16", "port": "wan0", "next_hop_mac": "02-00-00-00-00-99"}"#,
    );
    assert_eq!(st, 200, "{body}");

    // `ctl reload` without a path after a reload of another file: the file the run started with.
    std::fs::copy(&cfg, d.join("other.toml")).unwrap();
    let (st, body, _) = json(&api, "POST", "/reload", r#"{"path": "other.toml"}"#);
    assert_eq!(st, 200, "{body}");
    let out = bin()
        .args(["ctl", "--addr", &api, "reload"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("live.toml"), "{stdout}");

    // A relative path: `ctl reload` takes it from the shell's directory and sends it absolute;
    // `POST /reload` takes a relative one from the first reload directory. The answer names
    // the file read either way (docs/config.md, `reload_dirs`).
    let sub = d.join("sub");
    std::fs::create_dir(&sub).unwrap();
    let capture = d.join("wan0-out.pcap");
    let same_io = std::fs::read_to_string(&cfg).unwrap().replace(
        "tx = \"wan0-out.pcap\"",
        &format!("tx = \"{}\"", capture.display()),
    );
    std::fs::write(sub.join("other.toml"), &same_io).unwrap();
    let out = bin()
        .args(["ctl", "--addr", &api, "reload", "other.toml"])
        .current_dir(&sub)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |body: &str| -> PathBuf {
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        PathBuf::from(v["reloaded"].as_str().unwrap())
    };
    let sub_real = sub.canonicalize().unwrap();
    assert_eq!(read(&stdout), sub_real.join("other.toml"), "{stdout}");
    let (st, body, _) = json(&api, "POST", "/reload", r#"{"path": "other.toml"}"#);
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        read(&body),
        d.canonicalize().unwrap().join("other.toml"),
        "{body}"
    );

    // A reload that would stop a port's traffic, or reopen the ports over this run's capture:
    // refused.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let no_io: String = text
        .lines()
        .filter(|l| !l.contains("wan0-out.pcap"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(d.join("noio.toml"), no_io).unwrap();
    let (st, body, _) = json(&api, "POST", "/reload", r#"{"path": "noio.toml"}"#);
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("no io"), "{body}");
    std::fs::write(
        d.join("rx.toml"),
        text.replace("rx_loop = true", "rx_loop = false"),
    )
    .unwrap();
    let (st, body, _) = json(&api, "POST", "/reload", r#"{"path": "rx.toml"}"#);
    assert_eq!(st, 400, "{body}");
    assert!(
        body.contains("overwrite") && body.contains("wan0-out.pcap"),
        "{body}"
    );

    // The live counters: port I/O errors and link state in /stats, loops and the heartbeat in
    // /metrics, and a scrape promtool accepts.
    let (st, body, _) = json(&api, "GET", "/stats", "");
    assert_eq!(st, 200);
    for k in [
        "\"tx_errors\"",
        "\"rx_nobuf\"",
        "\"rx_errors\"",
        "\"links\"",
        "\"loops\"",
    ] {
        assert!(body.contains(k), "/stats has no {k}: {body}");
    }
    let m = &live.metrics;
    let wanted = [
        "longhaul_control_heartbeat_timestamp_seconds",
        "longhaul_worker_loops_total",
        "longhaul_port_tx_errors_total",
    ];
    // The workers' counters reach the metrics at the next stats interval (1 s).
    let until = Instant::now() + Duration::from_secs(5);
    let scrape = loop {
        let (st, scrape, _) = send(m, &format!("GET /metrics HTTP/1.1\r\nHost: {m}"), "");
        assert_eq!(st, 200);
        if wanted.iter().all(|k| scrape.contains(k)) {
            break scrape;
        }
        assert!(
            Instant::now() < until,
            "missing one of {wanted:?}: {scrape}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    promtool_check_metrics(&scrape);

    // The live capture is on disk while the run goes on (flushed every stats interval, issue
    // 42: a reader saw a truncated record for minutes): whole records, the trace's frames.
    let until = Instant::now() + Duration::from_secs(5);
    let records = loop {
        let b = std::fs::read(d.join("wan0-out.pcap")).unwrap();
        let (mut off, mut n) = (24, 0);
        while off + 16 <= b.len() {
            let incl = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
            let orig = u32::from_le_bytes(b[off + 12..off + 16].try_into().unwrap()) as usize;
            assert!(
                incl == orig && incl <= 9216,
                "record {n} at {off}: {incl}/{orig}"
            );
            if off + 16 + incl > b.len() {
                break; // the record being written between two flushes
            }
            off += 16 + incl;
            n += 1;
        }
        if n > 0 || Instant::now() > until {
            break n;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(records > 0, "nothing in wan0-out.pcap while running");

    // SIGTERM: gone within a second.
    let pid = live.child.id().to_string();
    let t = Instant::now();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let mut live = live;
    loop {
        if let Some(st) = live.child.try_wait().unwrap() {
            assert!(st.success(), "{st:?}");
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(1),
            "still running 1 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `promtool check metrics` on a scrape; skipped (with a note) without promtool unless
/// LONGHAUL_REQUIRE_ORACLES is set.
fn promtool_check_metrics(scrape: &str) {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(_) if std::env::var_os("LONGHAUL_REQUIRE_ORACLES").is_none() => {
            eprintln!("promtool not installed: the scrape's lint is skipped");
            return;
        }
        Err(e) => panic!("promtool: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(scrape.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// With LONGHAUL_LOG_FORMAT=json every line `run` writes on stderr is a JSON object: the
/// start-up lines, the logs, and the error of a run that fails.
#[test]
fn json_logs_are_json_on_every_stderr_line() {
    let d = TmpDir::new("attacks", "json");
    let cfg = live_config(&d, "live.toml", "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("rx_loop = true", "rx_loop = false")).unwrap();
    let out = bin()
        .args(["run", "--until-idle", "--config"])
        .arg(&cfg)
        .env("LONGHAUL_LOG_FORMAT", "json")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let bad = bin()
        .args(["run", "--config"])
        .arg(d.join("missing.toml"))
        .env("LONGHAUL_LOG_FORMAT", "json")
        .output()
        .unwrap();
    assert!(!bad.status.success());
    for (what, o) in [("run", &out), ("failed run", &bad)] {
        let err = String::from_utf8_lossy(&o.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert!(!lines.is_empty(), "{what}: nothing on stderr");
        for l in lines {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {l}"));
            assert!(v["fields"]["message"].is_string(), "{what}: {l}");
        }
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("management API on http://"), "{err}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing.toml"));
}

/// `check-config` refuses what `run` would refuse in this build (DPDK ports without the
/// feature, the placeholder token) and warns, with status 0, about what `run` refuses unless
/// its environment gives a token.
#[test]
fn check_config_says_what_run_would_refuse() {
    let d = TmpDir::new("attacks", "check");
    let cfg = live_config(&d, "live.toml", "");
    let check = |path: &Path, token: Option<&str>| {
        let mut c = bin();
        c.arg("check-config")
            .arg(path)
            .env_remove("LONGHAUL_API_TOKEN");
        if let Some(t) = token {
            c.env("LONGHAUL_API_TOKEN", t);
        }
        let o = c.output().unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert_eq!(check(&cfg, None), (true, String::new()));
    let (ok, err) = check(&cfg, Some("change-me"));
    assert!(!ok && err.contains("placeholder"), "{err}");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let public = d.join("public.toml");
    std::fs::write(
        &public,
        text.replace("api_listen = \"127.0.0.1:0\"", "api_listen = \"0.0.0.0:0\""),
    )
    .unwrap();
    let (ok, err) = check(&public, None);
    assert!(ok, "{err}");
    assert!(err.contains("warning: control.api_listen"), "{err}");
    assert_eq!(check(&public, Some("s3cret")), (true, String::new()));
    if !cfg!(feature = "dpdk") {
        let dpdk = d.join("dpdk.toml");
        let mut first = true;
        let only_dpdk: String = text
            .lines()
            .filter(|l| !l.contains("wan0-out.pcap"))
            .map(|l| {
                if first && l.starts_with("io = ") {
                    first = false;
                    "io = { kind = \"dpdk\", device = \"net_null0\" }\n".to_owned()
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(&dpdk, only_dpdk + "\n[dpdk]\neal_args = [\"--no-huge\"]\n").unwrap();
        let (ok, err) = check(&dpdk, None);
        assert!(!ok && err.contains("ports[0].io.kind"), "{err}");
    }
}
