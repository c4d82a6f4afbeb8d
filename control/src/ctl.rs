//! `longhaul ctl`: the management API's command-line client, as clap subcommands (the binary
//! embeds [`CtlArgs`], so `longhaul ctl --help` and `longhaul ctl table --help` describe
//! everything). Exit status: 0 on success, 1 when the request fails or the API answers with an
//! error (printed on stderr), 2 on a usage error (clap's).

use crate::api::{percent_encode, TOKEN_ENV};
use crate::client::{Client, ADDR_ENV, DEFAULT_ADDR};
use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// `longhaul ctl`: talk to a running longhaul's management API.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct CtlArgs {
    /// The management API (default: $LONGHAUL_API_ADDR, else 127.0.0.1:9410).
    #[arg(long, value_name = "HOST:PORT", global = true)]
    pub addr: Option<String>,
    /// Bearer token (default: $LONGHAUL_API_TOKEN).
    #[arg(long, value_name = "TOKEN", global = true)]
    pub token: Option<String>,
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

/// What to ask.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum CtlCmd {
    /// Status, pipeline, uptime, config file.
    Health,
    /// Counters: a readable summary (ports, drops by reason, non-zero pipeline counters, tables,
    /// control plane), or every counter per worker as JSON with --json.
    Stats {
        /// The raw `/stats` JSON.
        #[arg(long)]
        json: bool,
    },
    /// The running pipeline's table names.
    Tables,
    /// List, insert or delete table entries.
    #[command(subcommand)]
    Table(TableCmd),
    /// Validate and swap in the config at PATH (default: the file the switch was started with,
    /// whatever was reloaded since); a bad config is refused and the running one stays. A
    /// relative PATH is taken from this shell's current directory (`POST /reload` takes it from
    /// the first of `control.reload_dirs`); the file must be in an allowed directory either way.
    Reload { path: Option<PathBuf> },
}

/// `ctl table ...`.
#[derive(Subcommand, Debug, Clone, PartialEq, Eq)]
pub enum TableCmd {
    /// Entries of a table, a page at a time.
    List {
        name: String,
        #[arg(long)]
        offset: Option<usize>,
        /// Entries per page (default 100, at most 10000).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Insert (or replace) an entry, e.g. routes '{"prefix": "10.9.0.0/16", "port": "wan0",
    /// "next_hop_mac": "02:00:00:00:20:02"}' (a gateway, "next_hop": "192.0.2.2", needs a
    /// port with an address on its subnet).
    Insert { name: String, entry: String },
    /// Delete the entry with this key, e.g. routes '{"prefix": "10.9.0.0/16"}'.
    Delete { name: String, key: String },
}

/// For [`ctl_main`]: `ctl` as a program of its own.
#[derive(Parser, Debug)]
#[command(name = "longhaul ctl")]
struct CtlProgram {
    #[command(flatten)]
    args: CtlArgs,
}

/// One HTTP request.
#[derive(Debug, PartialEq)]
pub struct Request {
    pub method: &'static str,
    pub path: String,
    pub body: Option<Value>,
}

/// Why a command makes no request.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A JSON argument that is not JSON.
    #[error("'{text}' is not valid JSON: {error}")]
    Json {
        text: String,
        error: serde_json::Error,
    },
    /// A relative reload path, and the current directory cannot be read.
    #[error("cannot read the current directory: {0}")]
    CurrentDir(std::io::Error),
    #[error("the path is not UTF-8")]
    NotUtf8,
}

/// The request `cmd` makes; `Err` for a JSON argument that is not JSON, or a relative reload
/// path when the current directory cannot be read.
pub fn request(cmd: &CtlCmd) -> Result<Request, RequestError> {
    let json = |text: &str| -> Result<Value, RequestError> {
        serde_json::from_str(text).map_err(|error| RequestError::Json {
            text: text.to_owned(),
            error,
        })
    };
    let table = |name: &str| format!("/tables/{}", percent_encode(name));
    let r = |method, path: String, body| Request { method, path, body };
    Ok(match cmd {
        CtlCmd::Health => r("GET", "/health".into(), None),
        CtlCmd::Stats { .. } => r("GET", "/stats".into(), None),
        CtlCmd::Tables => r("GET", "/tables".into(), None),
        CtlCmd::Table(TableCmd::List {
            name,
            offset,
            limit,
        }) => {
            let mut q = Vec::new();
            if let Some(o) = offset {
                q.push(format!("offset={o}"));
            }
            if let Some(l) = limit {
                q.push(format!("limit={l}"));
            }
            let mut path = table(name);
            if !q.is_empty() {
                path.push('?');
                path.push_str(&q.join("&"));
            }
            r("GET", path, None)
        }
        CtlCmd::Table(TableCmd::Insert { name, entry }) => {
            r("POST", table(name), Some(json(entry)?))
        }
        CtlCmd::Table(TableCmd::Delete { name, key }) => r("DELETE", table(name), Some(json(key)?)),
        CtlCmd::Reload { path: None } => r("POST", "/reload".into(), Some(json!({}))),
        CtlCmd::Reload { path: Some(p) } => {
            // The server may run in another directory: send an absolute path.
            let abs = if p.is_absolute() {
                p.clone()
            } else {
                std::env::current_dir()
                    .map_err(RequestError::CurrentDir)?
                    .join(p)
            };
            let path = abs.to_str().ok_or(RequestError::NotUtf8)?.to_owned();
            r("POST", "/reload".into(), Some(json!({ "path": path })))
        }
    })
}

/// Run `a`: print the answer (JSON, or the readable stats view) on stdout; the exit status.
pub fn run(a: &CtlArgs) -> i32 {
    let env = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
    let addr = a
        .addr
        .clone()
        .or_else(|| env(ADDR_ENV))
        .unwrap_or_else(|| DEFAULT_ADDR.to_owned());
    let token = a
        .token
        .clone()
        .filter(|t| !t.is_empty())
        .or_else(|| env(TOKEN_ENV));
    let req = match request(&a.cmd) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("longhaul ctl: {e}");
            return 2;
        }
    };
    let client = Client::new(&addr, token);
    match client.request(req.method, &req.path, req.body.as_ref()) {
        Ok((status, v)) if (200..300).contains(&status) => {
            match a.cmd {
                CtlCmd::Stats { json: false } => print!("{}", stats_view(&v)),
                _ => println!("{}", pretty(&v)),
            }
            0
        }
        Ok((status, v)) => {
            let msg = match v.get("error").and_then(Value::as_str) {
                Some(m) => m.to_owned(),
                None => pretty(&v),
            };
            eprintln!(
                "longhaul ctl: {} {}: HTTP {status}: {msg}",
                req.method, req.path
            );
            1
        }
        Err(e) => {
            eprintln!("longhaul ctl: {e}");
            1
        }
    }
}

/// `longhaul ctl ARGS...` (the arguments after `ctl`) parsed by clap and run; the exit status
/// (`--help` prints the help and is 0; a usage error 2).
pub fn ctl_main(args: &[String]) -> i32 {
    let argv = std::iter::once("ctl".to_owned()).chain(args.iter().cloned());
    match CtlProgram::try_parse_from(argv) {
        Ok(p) => run(&p.args),
        Err(e) => {
            let _ = e.print();
            e.exit_code()
        }
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

/// The `/stats` answer as a person reads it: ports (all workers added up), drops by reason,
/// non-zero pipeline counters, tables, control plane.
pub fn stats_view(v: &Value) -> String {
    let mut o = String::new();
    let workers = v["workers"].as_array().cloned().unwrap_or_default();
    let _ = writeln!(
        o,
        "uptime {:.0} s, {} worker(s), commands lost {}",
        v["uptime_s"].as_f64().unwrap_or(0.0),
        workers.len(),
        num(&v["commands_lost"])
    );
    // port name -> (rx pkts, rx bytes, tx pkts, tx bytes, queue drops, ECN marks, PFC out)
    let mut ports: Vec<(String, [u64; 7])> = Vec::new();
    let mut drops: BTreeMap<String, u64> = BTreeMap::new();
    let mut pipeline: BTreeMap<String, u64> = BTreeMap::new();
    let mut tables: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    let mut ctl = [0u64; 4];
    // port name -> (rx_nobuf, rx_errors, tx_errors): the port I/O's own counters.
    let mut io: Vec<(String, [u64; 3])> = Vec::new();
    for w in &workers {
        for p in w["ports"].as_array().into_iter().flatten() {
            let name = p["name"].as_str().unwrap_or("?").to_owned();
            let add = [
                num(&p["rx_nobuf"]),
                num(&p["rx_errors"]),
                num(&p["tx_errors"]),
            ];
            match io.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => c.iter_mut().zip(add).for_each(|(a, b)| *a += b),
                None => io.push((name, add)),
            }
        }
    }
    for w in &workers {
        for p in w["ports"].as_array().into_iter().flatten() {
            let name = p["name"].as_str().unwrap_or("?").to_owned();
            let i = match ports.iter().position(|(n, _)| *n == name) {
                Some(i) => i,
                None => {
                    ports.push((name, [0; 7]));
                    ports.len() - 1
                }
            };
            let q = |k: &str| -> u64 {
                p["queues"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| num(&c[k]))
                    .sum()
            };
            let add = [
                num(&p["rx_pkts"]),
                num(&p["rx_bytes"]),
                num(&p["tx_pkts"]),
                num(&p["tx_bytes"]),
                q("drops"),
                q("ecn_marks"),
                num(&p["pfc_tx"]),
            ];
            for (a, b) in ports[i].1.iter_mut().zip(add) {
                *a += b;
            }
        }
        for (k, n) in w["drops"].as_object().into_iter().flatten() {
            *drops.entry(k.clone()).or_default() += num(n);
        }
        for (k, n) in w["pipeline"].as_object().into_iter().flatten() {
            *pipeline.entry(k.clone()).or_default() += num(n);
        }
        for (k, t) in w["tables"].as_object().into_iter().flatten() {
            let e = tables.entry(k.clone()).or_default();
            e.0 = e.0.max(num(&t["entries"]));
            e.1 = e.1.max(num(&t["capacity"]));
            e.2 += num(&t["full_events"]);
        }
        let c = &w["control"];
        for (i, k) in ["applied", "refused", "punts", "punt_drops"]
            .iter()
            .enumerate()
        {
            ctl[i] += num(&c[*k]);
        }
    }
    let _ = writeln!(
        o,
        "\n{:<12} {:>12} {:>14} {:>12} {:>14} {:>11} {:>10} {:>8}",
        "port", "rx pkts", "rx bytes", "tx pkts", "tx bytes", "q drops", "ECN", "PFC out"
    );
    for (name, c) in &ports {
        let _ = writeln!(
            o,
            "{:<12} {:>12} {:>14} {:>12} {:>14} {:>11} {:>10} {:>8}",
            name, c[0], c[1], c[2], c[3], c[4], c[5], c[6]
        );
    }
    let _ = writeln!(
        o,
        "\n{:<12} {:>6} {:>10} {:>10} {:>10}",
        "port I/O", "link", "rx nobuf", "rx errors", "tx errors"
    );
    for (name, c) in &io {
        let link = v["links"][name.as_str()].as_str().unwrap_or("-");
        let _ = writeln!(
            o,
            "{:<12} {:>6} {:>10} {:>10} {:>10}",
            name, link, c[0], c[1], c[2]
        );
    }
    let nonzero: Vec<String> = drops
        .iter()
        .filter(|(_, n)| **n != 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    if nonzero.is_empty() {
        let _ = writeln!(o, "\ndropped: none");
    } else {
        let _ = writeln!(o, "\ndropped, by reason: {}", nonzero.join(", "));
    }
    let counters: Vec<(&String, &u64)> = pipeline.iter().filter(|(_, n)| **n != 0).collect();
    if !counters.is_empty() {
        let _ = writeln!(o, "\npipeline counters (non-zero):");
        for (k, n) in counters {
            let _ = writeln!(o, "  {k} {n}");
        }
    }
    if !tables.is_empty() {
        let _ = writeln!(o, "\ntables (entries / capacity, full events):");
        for (k, (e, c, f)) in &tables {
            let _ = writeln!(o, "  {k} {e} / {c}, {f}");
        }
    }
    let _ = writeln!(
        o,
        "\ncontrol: {} commands applied, {} refused, {} punts, {} punts dropped",
        ctl[0], ctl[1], ctl[2], ctl[3]
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<CtlArgs, clap::Error> {
        CtlProgram::try_parse_from(std::iter::once("ctl").chain(args.iter().copied()))
            .map(|p| p.args)
    }

    #[test]
    fn arguments_become_requests() {
        let a = parse(&[
            "--addr",
            "10.0.0.1:1",
            "--token=t",
            "table",
            "list",
            "l3 v4",
            "--limit",
            "5",
        ])
        .unwrap();
        assert_eq!(a.addr.as_deref(), Some("10.0.0.1:1"));
        assert_eq!(a.token.as_deref(), Some("t"));
        let r = request(&a.cmd).unwrap();
        assert_eq!(
            (r.method, r.path.as_str()),
            ("GET", "/tables/l3%20v4?limit=5")
        );
        // Global options after the subcommand too.
        let a = parse(&["health", "--addr", "h:2"]).unwrap();
        assert_eq!(a.addr.as_deref(), Some("h:2"));
        let a = parse(&[
            "table",
            "insert",
            "l2",
            r#"{"mac":"02:00:00:00:00:01","port":1}"#,
        ])
        .unwrap();
        let r = request(&a.cmd).unwrap();
        assert_eq!(r.method, "POST");
        assert_eq!(r.body, Some(json!({"mac":"02:00:00:00:00:01","port":1})));
        let r = request(&parse(&["reload", "/etc/x.toml"]).unwrap().cmd).unwrap();
        assert_eq!(r.body, Some(json!({"path": "/etc/x.toml"})));
        let r = request(&parse(&["reload"]).unwrap().cmd).unwrap();
        assert_eq!(r.body, Some(json!({})));
        assert!(request(&parse(&["table", "insert", "l2", "{bad"]).unwrap().cmd).is_err());
        for bad in [
            &[][..],
            &["table", "list"],
            &["stats", "--limit", "3"],
            &["--bogus", "health"],
            &["frobnicate"],
        ] {
            let e = parse(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{bad:?}");
        }
        assert_eq!(parse(&["--help"]).unwrap_err().exit_code(), 0);
    }

    #[test]
    fn the_stats_view_adds_up_workers() {
        let w = |rx: u64, drop: u64| {
            json!({"ports": [{"name": "dc0", "rx_pkts": rx, "rx_bytes": rx * 100, "tx_pkts": 0,
                               "tx_bytes": 0, "pfc_tx": 1,
                               "queues": [{"class": 3, "drops": drop, "ecn_marks": 2}]}],
                   "drops": {"no_route": drop, "queue_full": 0},
                   "pipeline": {"baseline.routed": rx, "baseline.bridged": 0},
                   "tables": {"l2": {"entries": 4, "capacity": 1028, "full_events": 0}},
                   "control": {"applied": 1, "refused": 0, "punts": 2, "punt_drops": 0}})
        };
        let v = json!({"uptime_s": 12.0, "commands_lost": 0, "workers": [w(10, 1), w(5, 2)]});
        let s = stats_view(&v);
        assert!(s.contains("2 worker(s)"), "{s}");
        assert!(
            s.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
                == ["dc0", "15", "1500", "0", "0", "3", "4", "2"]),
            "{s}"
        );
        assert!(s.contains("dropped, by reason: no_route 3"), "{s}");
        assert!(
            s.contains("baseline.routed 15") && !s.contains("baseline.bridged"),
            "{s}"
        );
        assert!(s.contains("l2 4 / 1028, 0"), "{s}");
        assert!(s.contains("2 commands applied, 0 refused, 4 punts"), "{s}");
    }
}
