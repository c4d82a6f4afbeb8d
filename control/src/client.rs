//! A minimal blocking HTTP/1.1 client for the management API (std only), and `longhaul ctl`.
//!
//! One request per connection (`Connection: close`), connect/read/write timeouts, the answer
//! bounded to [`MAX_RESPONSE`] bytes; `Content-Length`, chunked and read-to-close bodies are
//! understood.

use crate::api::{percent_encode, TOKEN_ENV};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Default API address of `longhaul ctl` (the default of `control.api_listen`).
pub const DEFAULT_ADDR: &str = "127.0.0.1:9410";
/// Environment variable with the API address for `longhaul ctl`.
pub const ADDR_ENV: &str = "LONGHAUL_API_ADDR";
/// Largest answer read, bytes.
pub const MAX_RESPONSE: usize = 256 << 20;

/// A management API client.
#[derive(Clone, Debug)]
pub struct Client {
    addr: String,
    token: Option<String>,
    connect_timeout: Duration,
    io_timeout: Duration,
}

impl Client {
    /// `addr` is `HOST:PORT` (`127.0.0.1:9410`, `localhost:9410`, `[::1]:9410`).
    pub fn new(addr: &str, token: Option<String>) -> Client {
        Client {
            addr: addr.to_owned(),
            token: token.filter(|t| !t.is_empty()),
            connect_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(60),
        }
    }

    /// Timeout of each read and write (default 60 s; a reload may take a while).
    pub fn with_timeout(mut self, io_timeout: Duration) -> Client {
        self.io_timeout = io_timeout;
        self
    }

    pub fn get(&self, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        self.request("GET", path, body)
    }

    pub fn post(&self, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        self.request("POST", path, body)
    }

    pub fn delete(&self, path: &str, body: Option<&Value>) -> Result<(u16, Value), String> {
        self.request("DELETE", path, body)
    }

    /// Sends `method path` with `body` as JSON; returns the status and the body parsed as JSON
    /// (an empty body is `null`; a body that is not JSON is returned as a JSON string).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), String> {
        let payload = match body {
            Some(v) => serde_json::to_vec(v).map_err(|e| format!("cannot encode JSON: {e}"))?,
            None => Vec::new(),
        };
        let (status, raw) = self.raw(method, path, &payload)?;
        let value = if raw.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&raw)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&raw).into_owned()))
        };
        Ok((status, value))
    }

    /// Sends a request with a raw body; returns the status and the raw answer body.
    pub fn raw(&self, method: &str, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let addrs: Vec<SocketAddr> = self
            .addr
            .to_socket_addrs()
            .map_err(|e| format!("bad address '{}': {e}", self.addr))?
            .collect();
        let mut last = format!("'{}' resolves to no address", self.addr);
        let mut stream = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, self.connect_timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = format!("cannot connect to {a}: {e}"),
            }
        }
        let mut stream = stream.ok_or(last)?;
        stream
            .set_read_timeout(Some(self.io_timeout))
            .and_then(|()| stream.set_write_timeout(Some(self.io_timeout)))
            .map_err(|e| format!("socket: {e}"))?;

        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: longhaul-ctl\r\nAccept: application/json\r\nConnection: close\r\n",
            self.addr
        );
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        if !body.is_empty() || method != "GET" {
            req.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        req.push_str("\r\n");
        let sent = stream
            .write_all(req.as_bytes())
            .and_then(|()| stream.write_all(body))
            .and_then(|()| stream.flush());
        // The server may answer (413, 401) and stop reading before the body is sent: still read
        // its answer.
        let mut resp = Vec::new();
        let read = (&mut stream)
            .take(MAX_RESPONSE as u64 + 1)
            .read_to_end(&mut resp);
        if resp.is_empty() {
            return Err(match (sent, read) {
                (Err(e), _) => format!("sending the request to {}: {e}", self.addr),
                (_, Err(e)) => format!("reading the answer from {}: {e}", self.addr),
                _ => format!("{} closed the connection without answering", self.addr),
            });
        }
        if resp.len() > MAX_RESPONSE {
            return Err(format!("answer larger than {MAX_RESPONSE} bytes"));
        }
        parse_response(&resp)
    }
}

/// Status and body of a complete HTTP/1.x response.
fn parse_response(resp: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let bad = |what: &str| format!("malformed HTTP answer: {what}");
    let end = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = std::str::from_utf8(&resp[..end]).map_err(|_| bad("head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let status = match (parts.next(), parts.next()) {
        (Some(v), Some(code)) if v.starts_with("HTTP/1.") => code
            .parse::<u16>()
            .map_err(|_| bad("status is not a number"))?,
        _ => return Err(bad("no status line")),
    };
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if k.eq_ignore_ascii_case("Content-Length") {
            length = Some(v.parse::<usize>().map_err(|_| bad("bad Content-Length"))?);
        } else if k.eq_ignore_ascii_case("Transfer-Encoding")
            && v.to_ascii_lowercase().contains("chunked")
        {
            chunked = true;
        }
    }
    let rest = &resp[end + 4..];
    let body = if chunked {
        dechunk(rest).ok_or_else(|| bad("bad chunked body"))?
    } else if let Some(n) = length {
        if rest.len() < n {
            return Err(bad("body shorter than Content-Length (connection cut?)"));
        }
        rest[..n].to_vec()
    } else {
        rest.to_vec()
    };
    Ok((status, body))
}

fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&b[..eol]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        if b.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

// ---------------------------------------------------------------------------------------------
// longhaul ctl
// ---------------------------------------------------------------------------------------------

const USAGE: &str = "\
usage: longhaul ctl [--addr HOST:PORT] [--token TOKEN] COMMAND

commands:
  health                             status, pipeline, uptime, config file
  stats                              counters snapshot
  tables                             table names
  table list NAME [--offset N] [--limit N]
                                     entries of a table (limit default 100, at most 10000)
  table insert NAME JSON             insert (or replace) an entry, e.g. '{\"prefix\":\"10.1.0.0/16\",...}'
  table delete NAME JSON             delete the entry with this key
  reload [PATH]                      validate and swap in the config at PATH (default: the file the
                                     switch was started with); a bad config is refused

options:
  --addr HOST:PORT   the management API (default $LONGHAUL_API_ADDR, else 127.0.0.1:9410)
  --token TOKEN      bearer token (default $LONGHAUL_API_TOKEN)

Prints the answer as JSON on stdout. Exit status: 0 on success, 1 when the request fails or the
API answers with an error (printed on stderr), 2 on a usage error.";

/// What `ctl_main` was asked to do.
#[derive(Debug, PartialEq)]
struct CtlCommand {
    addr: String,
    token: Option<String>,
    method: &'static str,
    path: String,
    body: Option<Value>,
}

/// `longhaul ctl ARGS...` (the arguments after `ctl`); returns the exit status.
pub fn ctl_main(args: &[String]) -> i32 {
    let env_addr = std::env::var(ADDR_ENV).ok().filter(|s| !s.is_empty());
    let env_token = std::env::var(TOKEN_ENV).ok().filter(|s| !s.is_empty());
    let cmd = match parse_ctl(args, env_addr, env_token) {
        Ok(Some(c)) => c,
        Ok(None) => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("longhaul ctl: {e}\n\n{USAGE}");
            return 2;
        }
    };
    let client = Client::new(&cmd.addr, cmd.token.clone());
    match client.request(cmd.method, &cmd.path, cmd.body.as_ref()) {
        Ok((status, v)) if (200..300).contains(&status) => {
            println!("{}", pretty(&v));
            0
        }
        Ok((status, v)) => {
            let msg = match v.get("error").and_then(Value::as_str) {
                Some(m) => m.to_owned(),
                None => pretty(&v),
            };
            eprintln!(
                "longhaul ctl: {} {}: HTTP {status}: {msg}",
                cmd.method, cmd.path
            );
            1
        }
        Err(e) => {
            eprintln!("longhaul ctl: {e}");
            1
        }
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// Parses `ctl` arguments; `Ok(None)` for `--help`.
fn parse_ctl(
    args: &[String],
    env_addr: Option<String>,
    env_token: Option<String>,
) -> Result<Option<CtlCommand>, String> {
    let mut addr = env_addr.unwrap_or_else(|| DEFAULT_ADDR.to_owned());
    let mut token = env_token;
    let mut offset: Option<usize> = None;
    let mut limit: Option<usize> = None;
    let mut words: Vec<&str> = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        let number = |name: &str, v: String| -> Result<usize, String> {
            v.parse::<usize>()
                .map_err(|_| format!("{name} {v}: expected a non-negative integer"))
        };
        match a.as_str() {
            "-h" | "--help" | "help" => return Ok(None),
            "--addr" => addr = value("--addr")?,
            "--token" => token = Some(value("--token")?).filter(|t| !t.is_empty()),
            "--offset" => offset = Some(number("--offset", value("--offset")?)?),
            "--limit" => limit = Some(number("--limit", value("--limit")?)?),
            s => {
                if let Some(v) = s.strip_prefix("--addr=") {
                    addr = v.to_owned();
                } else if let Some(v) = s.strip_prefix("--token=") {
                    token = Some(v.to_owned()).filter(|t| !t.is_empty());
                } else if let Some(v) = s.strip_prefix("--offset=") {
                    offset = Some(number("--offset", v.to_owned())?);
                } else if let Some(v) = s.strip_prefix("--limit=") {
                    limit = Some(number("--limit", v.to_owned())?);
                } else if s.starts_with("--") {
                    return Err(format!("unknown option {s}"));
                } else {
                    words.push(s);
                }
            }
        }
    }
    let json = |text: &str| -> Result<Value, String> {
        serde_json::from_str(text).map_err(|e| format!("'{text}' is not valid JSON: {e}"))
    };
    let paging_only = |what: &str| -> Result<(), String> {
        if offset.is_some() || limit.is_some() {
            return Err(format!(
                "--offset/--limit only go with 'table list', not '{what}'"
            ));
        }
        Ok(())
    };
    let (method, path, body) = match words.as_slice() {
        [] => return Err("no command".to_owned()),
        ["health"] => ("GET", "/health".to_owned(), None),
        ["stats"] => ("GET", "/stats".to_owned(), None),
        ["tables"] => ("GET", "/tables".to_owned(), None),
        ["table", "list", name] => {
            let mut q = Vec::new();
            if let Some(o) = offset {
                q.push(format!("offset={o}"));
            }
            if let Some(l) = limit {
                q.push(format!("limit={l}"));
            }
            let mut path = format!("/tables/{}", percent_encode(name));
            if !q.is_empty() {
                path.push('?');
                path.push_str(&q.join("&"));
            }
            ("GET", path, None)
        }
        ["table", "insert", name, entry] => {
            paging_only("table insert")?;
            let path = format!("/tables/{}", percent_encode(name));
            ("POST", path, Some(json(entry)?))
        }
        ["table", "delete", name, key] => {
            paging_only("table delete")?;
            let path = format!("/tables/{}", percent_encode(name));
            ("DELETE", path, Some(json(key)?))
        }
        ["reload"] => ("POST", "/reload".to_owned(), Some(serde_json::json!({}))),
        ["reload", p] => {
            // The server may run in another directory: send an absolute path.
            let p = std::path::Path::new(p);
            let abs = if p.is_absolute() {
                p.to_path_buf()
            } else {
                std::env::current_dir()
                    .map_err(|e| format!("cannot read the current directory: {e}"))?
                    .join(p)
            };
            let path = abs.to_str().ok_or("the path is not UTF-8")?.to_owned();
            (
                "POST",
                "/reload".to_owned(),
                Some(serde_json::json!({ "path": path })),
            )
        }
        ["table", ..] => {
            return Err(
                "expected: table list NAME | table insert NAME JSON | table delete NAME JSON"
                    .to_owned(),
            )
        }
        other => return Err(format!("unknown command '{}'", other.join(" "))),
    };
    if !matches!(words.as_slice(), ["table", "list", _]) {
        paging_only(words[0])?;
    }
    Ok(Some(CtlCommand {
        addr,
        token,
        method,
        path,
        body,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(args: &[&str]) -> Result<Option<CtlCommand>, String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse_ctl(&args, None, None)
    }

    #[test]
    fn ctl_arguments() {
        let c = parse(&["health"]).unwrap().unwrap();
        assert_eq!(
            (c.addr.as_str(), c.method, c.path.as_str(), c.token),
            (DEFAULT_ADDR, "GET", "/health", None)
        );
        let c = parse(&[
            "--addr",
            "10.0.0.1:1",
            "--token=t",
            "table",
            "list",
            "l3 v4",
            "--limit",
            "5",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.addr, "10.0.0.1:1");
        assert_eq!(c.token.as_deref(), Some("t"));
        assert_eq!(c.path, "/tables/l3%20v4?limit=5");
        let c = parse(&[
            "table",
            "insert",
            "l2",
            r#"{"mac":"02:00:00:00:00:01","port":1}"#,
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.method, "POST");
        assert_eq!(c.body, Some(json!({"mac":"02:00:00:00:00:01","port":1})));
        let c = parse(&["reload", "/etc/x.toml"]).unwrap().unwrap();
        assert_eq!(c.body, Some(json!({"path": "/etc/x.toml"})));
        let c = parse(&["reload"]).unwrap().unwrap();
        assert_eq!(c.body, Some(json!({})));
        assert_eq!(parse(&["--help"]).unwrap(), None);
        assert!(parse(&[]).is_err());
        assert!(parse(&["table", "insert", "l2", "{bad"]).is_err());
        assert!(parse(&["table", "list"]).is_err());
        assert!(parse(&["stats", "--limit", "3"]).is_err());
        assert!(parse(&["--bogus", "health"]).is_err());
        assert!(parse(&["health", "--addr"]).is_err());
        assert!(parse(&["frobnicate"]).is_err());
    }

    #[test]
    fn env_defaults_and_overrides() {
        let args = vec!["health".to_owned()];
        let c = parse_ctl(&args, Some("h:1".into()), Some("tok".into()))
            .unwrap()
            .unwrap();
        assert_eq!((c.addr.as_str(), c.token.as_deref()), ("h:1", Some("tok")));
        let args: Vec<String> = ["--addr", "h:2", "--token", "x", "health"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let c = parse_ctl(&args, Some("h:1".into()), Some("tok".into()))
            .unwrap()
            .unwrap();
        assert_eq!((c.addr.as_str(), c.token.as_deref()), ("h:2", Some("x")));
    }

    #[test]
    fn responses() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}extra";
        assert_eq!(parse_response(r).unwrap(), (200, b"{}".to_vec()));
        let r = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n1;x\r\nd\r\n0\r\n\r\n";
        assert_eq!(parse_response(r).unwrap(), (404, b"abcd".to_vec()));
        let r = b"HTTP/1.0 200 OK\r\n\r\nto the end";
        assert_eq!(parse_response(r).unwrap(), (200, b"to the end".to_vec()));
        assert!(parse_response(b"garbage").is_err());
        assert!(parse_response(b"HTTP/1.1 abc\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }
}
