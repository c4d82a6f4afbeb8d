//! The management API over a real socket, with a mock backend: every route, the error statuses,
//! the token, the refusal to listen beyond loopback without one, bounded requests; and the
//! client (`Client`, `ctl_main`) against it.

use longhaul_control::api::{ApiError, ApiServer, ManagementBackend, MAX_BODY};
use longhaul_control::client::Client;
use longhaul_control::config::Config;
use longhaul_control::ctl::ctl_main;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[path = "../../tests/support/tmpdir.rs"]
mod tmpdir;
use tmpdir::TmpDir;

/// Tables are lists of `{"key": ..., ...}` objects; reload loads a real config file.
struct Mock {
    tables: Mutex<BTreeMap<String, Vec<Value>>>,
    config: Mutex<PathBuf>,
    reloads: Mutex<u32>,
}

impl Mock {
    fn new(config: PathBuf) -> Arc<Mock> {
        let mut t = BTreeMap::new();
        t.insert("l2".to_owned(), Vec::new());
        t.insert("routes v4".to_owned(), Vec::new());
        Arc::new(Mock {
            tables: Mutex::new(t),
            config: Mutex::new(config),
            reloads: Mutex::new(0),
        })
    }
}

impl ManagementBackend for Mock {
    fn health(&self) -> Value {
        json!({"status": "ok", "pipeline": "baseline", "uptime_s": 1.5,
               "config": self.config.lock().unwrap().display().to_string()})
    }

    fn stats(&self) -> Value {
        json!({"reloads": *self.reloads.lock().unwrap()})
    }

    fn tables(&self) -> Vec<String> {
        self.tables.lock().unwrap().keys().cloned().collect()
    }

    fn list_table(&self, table: &str, offset: usize, limit: usize) -> Result<Value, ApiError> {
        let t = self.tables.lock().unwrap();
        let entries = t
            .get(table)
            .ok_or_else(|| ApiError::NotFound(format!("no table '{table}'")))?;
        let page: Vec<Value> = entries.iter().skip(offset).take(limit).cloned().collect();
        Ok(json!({"table": table, "total": entries.len(), "offset": offset, "entries": page}))
    }

    fn insert(&self, table: &str, entry: &Value) -> Result<Value, ApiError> {
        let mut t = self.tables.lock().unwrap();
        let entries = t
            .get_mut(table)
            .ok_or_else(|| ApiError::NotFound(format!("no table '{table}'")))?;
        let key = entry
            .get("key")
            .ok_or_else(|| ApiError::BadRequest("entry needs a key".into()))?;
        if entries.iter().any(|e| e.get("key") == Some(key)) {
            return Err(ApiError::Conflict(format!("{key} is already in {table}")));
        }
        if entries.len() == 3 {
            return Err(ApiError::Unavailable(format!("{table} is full")));
        }
        entries.push(entry.clone());
        Ok(json!({"inserted": entry}))
    }

    fn delete(&self, table: &str, key: &Value) -> Result<Value, ApiError> {
        let mut t = self.tables.lock().unwrap();
        let entries = t
            .get_mut(table)
            .ok_or_else(|| ApiError::NotFound(format!("no table '{table}'")))?;
        let key = key
            .get("key")
            .ok_or_else(|| ApiError::BadRequest("expected {\"key\": ...}".into()))?;
        let n = entries.len();
        entries.retain(|e| e.get("key") != Some(key));
        if entries.len() == n {
            return Err(ApiError::NotFound(format!("{key} is not in {table}")));
        }
        Ok(json!({"deleted": key}))
    }

    fn reload(&self, path: Option<&Path>) -> Result<Value, ApiError> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => self.config.lock().unwrap().clone(),
        };
        match Config::load_all(&path) {
            Ok(_) => {
                *self.config.lock().unwrap() = path.clone();
                *self.reloads.lock().unwrap() += 1;
                Ok(json!({"reloaded": path.display().to_string()}))
            }
            Err(errors) => Err(ApiError::BadRequest(
                errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )),
        }
    }
}

const GOOD: &str = r#"
[switch]
name = "t"

[[ports]]
id = 0
name = "a"
mac = "02:00:00:00:00:01"
rate_gbps = 100
"#;

/// A fresh directory under the system temp dir, one per test thread.
fn tempdir(tag: &str) -> TmpDir {
    TmpDir::new("api", &format!("{tag}-{:?}", std::thread::current().id()))
}

fn start(token: Option<&str>, tag: &str) -> (ApiServer, Arc<Mock>, TmpDir) {
    let dir = tempdir(tag);
    let cfg = dir.join("good.toml");
    std::fs::write(&cfg, GOOD).unwrap();
    let mock = Mock::new(cfg);
    let server = ApiServer::start(
        "127.0.0.1:0".parse().unwrap(),
        token.map(str::to_owned),
        mock.clone(),
    )
    .unwrap();
    (server, mock, dir)
}

fn client(s: &ApiServer, token: Option<&str>) -> Client {
    Client::new(&s.local_addr().to_string(), token.map(str::to_owned))
}

/// Sends raw bytes as the local client would (with `Host: addr` and `Content-Type:
/// application/json` added after the request line when missing, `Host: x` made `addr`),
/// returns the raw answer.
fn raw(addr: SocketAddr, request: &[u8]) -> String {
    raw_exact(addr, &local_headers(addr, request))
}

fn local_headers(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let host = format!("Host: {addr}\r\n");
    let Some(eol) = request.windows(2).position(|w| w == b"\r\n") else {
        return request.to_vec();
    };
    let (line, rest) = request.split_at(eol + 2);
    let rest = String::from_utf8_lossy(rest).replace("Host: x\r\n", &host);
    let mut out = line.to_vec();
    if !rest.contains("Host:") {
        out.extend_from_slice(host.as_bytes());
    }
    if !rest.contains("Content-Type:") {
        out.extend_from_slice(b"Content-Type: application/json\r\n");
    }
    if rest.is_empty() {
        return request.to_vec();
    }
    // Bytes that are not UTF-8 go as they were (the request line keeps them).
    if std::str::from_utf8(&request[eol + 2..]).is_ok() {
        out.extend_from_slice(rest.as_bytes());
    } else {
        out.extend_from_slice(&request[eol + 2..]);
    }
    out
}

/// Sends exactly these bytes, returns the raw answer.
fn raw_exact(addr: SocketAddr, request: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = c.write_all(request);
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the head of `raw` has the header `name: value` (the name in any case).
fn has_header(raw: &str, name: &str, value: &str) -> bool {
    let head = raw.split("\r\n\r\n").next().unwrap_or("");
    head.split("\r\n").skip(1).any(|l| {
        l.split_once(':')
            .is_some_and(|(k, v)| k.eq_ignore_ascii_case(name) && v.trim() == value)
    })
}

fn status_of(raw: &str) -> u16 {
    raw.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn health_stats_and_tables() {
    let (s, _m, _d) = start(None, "health");
    let c = client(&s, None);
    let (st, v) = c.get("/health", None).unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["pipeline"], "baseline");
    let (st, v) = c.get("/stats", None).unwrap();
    assert_eq!((st, v["reloads"].as_u64()), (200, Some(0)));
    let (st, v) = c.get("/tables", None).unwrap();
    assert_eq!(st, 200);
    assert_eq!(v, json!({"tables": ["l2", "routes v4"]}));
    // A trailing slash is the same resource.
    assert_eq!(c.get("/health/", None).unwrap().0, 200);
}

#[test]
fn insert_list_paged_delete() {
    let (s, _m, _d) = start(None, "crud");
    let c = client(&s, None);
    for k in 0..3 {
        let (st, v) = c
            .post("/tables/l2", Some(&json!({"key": k, "port": 1})))
            .unwrap();
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["inserted"]["key"], k);
    }
    // Duplicate -> 409; full -> 503; unknown table -> 404; entry without key -> 400.
    let (st, v) = c.post("/tables/l2", Some(&json!({"key": 1}))).unwrap();
    assert_eq!(st, 409);
    assert!(v["error"].as_str().unwrap().contains("already"), "{v}");
    assert_eq!(
        c.post("/tables/l2", Some(&json!({"key": 9}))).unwrap().0,
        503
    );
    let (st, v) = c.post("/tables/nope", Some(&json!({"key": 1}))).unwrap();
    assert_eq!((st, v["error"].as_str()), (404, Some("no table 'nope'")));
    assert_eq!(c.post("/tables/l2", Some(&json!({"x": 1}))).unwrap().0, 400);

    // Paging.
    let (st, v) = c.get("/tables/l2?offset=1&limit=1", None).unwrap();
    assert_eq!(st, 200);
    assert_eq!(v["total"], 3);
    assert_eq!(v["offset"], 1);
    assert_eq!(v["entries"], json!([{"key": 1, "port": 1}]));
    let (_, v) = c.get("/tables/l2", None).unwrap();
    assert_eq!(v["entries"].as_array().unwrap().len(), 3);
    let (_, v) = c.get("/tables/l2?offset=5", None).unwrap();
    assert_eq!(v["entries"], json!([]));
    assert_eq!(c.get("/tables/l2?limit=x", None).unwrap().0, 400);
    assert_eq!(c.get("/tables/l2?offest=1", None).unwrap().0, 400);

    // Delete.
    let (st, v) = c.delete("/tables/l2", Some(&json!({"key": 1}))).unwrap();
    assert_eq!((st, v), (200, json!({"deleted": 1})));
    assert_eq!(
        c.delete("/tables/l2", Some(&json!({"key": 1}))).unwrap().0,
        404
    );
    let (_, v) = c.get("/tables/l2", None).unwrap();
    assert_eq!(v["total"], 2);

    // A table name that needs escaping.
    let (st, _) = c
        .post("/tables/routes%20v4", Some(&json!({"key": "10.0.0.0/8"})))
        .unwrap();
    assert_eq!(st, 200);
    let (_, v) = c.get("/tables/routes%20v4", None).unwrap();
    assert_eq!(v["table"], "routes v4");
}

#[test]
fn reload_good_and_bad_config() {
    let (s, m, dir) = start(None, "reload");
    let c = client(&s, None);
    // No body, and {}: the file it was started with.
    let (st, v) = c.post("/reload", None).unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(c.post("/reload", Some(&json!({}))).unwrap().0, 200);

    let good2 = dir.join("good2.toml");
    std::fs::write(&good2, GOOD.replace("name = \"t\"", "name = \"t2\"")).unwrap();
    let (st, v) = c
        .post("/reload", Some(&json!({"path": good2.to_str().unwrap()})))
        .unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(*m.config.lock().unwrap(), good2);

    // A bad config: 400 with check-config's key-path errors; the old config stays.
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, GOOD.replace("rate_gbps = 100", "rate_gbps = 5000")).unwrap();
    let (st, v) = c
        .post("/reload", Some(&json!({"path": bad.to_str().unwrap()})))
        .unwrap();
    assert_eq!(st, 400);
    let msg = v["error"].as_str().unwrap();
    assert!(
        msg.contains("bad.toml: ports[0].rate_gbps: 5000 is out of range"),
        "{msg}"
    );
    assert_eq!(*m.config.lock().unwrap(), good2);
    assert_eq!(c.get("/stats", None).unwrap().1["reloads"], 3);

    // Bad reload bodies.
    assert_eq!(c.post("/reload", Some(&json!({"path": 3}))).unwrap().0, 400);
    assert_eq!(
        c.post("/reload", Some(&json!({"pth": "x"}))).unwrap().0,
        400
    );
    assert_eq!(c.post("/reload", Some(&json!(["x"]))).unwrap().0, 400);
}

#[test]
fn wrong_routes_methods_and_bodies() {
    let (s, _m, _d) = start(None, "errors");
    let c = client(&s, None);
    let (st, v) = c.get("/nope", None).unwrap();
    assert_eq!(st, 404);
    assert!(v["error"].is_string());
    assert_eq!(c.get("/tables/a/b", None).unwrap().0, 404);
    assert_eq!(c.get("/tables/%zz", None).unwrap().0, 400);

    for (method, path, allow) in [
        ("POST", "/health", "GET"),
        ("DELETE", "/stats", "GET"),
        ("PUT", "/tables", "GET"),
        ("PUT", "/tables/l2", "GET, POST, DELETE"),
        ("GET", "/reload", "POST"),
    ] {
        let r = raw(
            s.local_addr(),
            format!("{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").as_bytes(),
        );
        assert_eq!(status_of(&r), 405, "{method} {path}: {r}");
        assert!(has_header(&r, "Allow", allow), "{r}");
        assert!(r.contains("\"error\""), "{r}");
    }

    // Not JSON -> 400; no body where one is needed -> 400.
    let (st, v) = c.raw("POST", "/tables/l2", b"{not json").unwrap();
    assert_eq!(st, 400);
    let v: Value = serde_json::from_slice(&v).unwrap();
    assert!(
        v["error"].as_str().unwrap().contains("not valid JSON"),
        "{v}"
    );
    assert_eq!(c.post("/tables/l2", None).unwrap().0, 400);
    assert_eq!(c.delete("/tables/l2", None).unwrap().0, 400);

    // Over 1 MiB -> 413 (the client still reads the answer while the server discards the body).
    let big = vec![b' '; MAX_BODY + 1];
    let (st, _) = c.raw("POST", "/tables/l2", &big).unwrap();
    assert_eq!(st, 413);
    // Exactly 1 MiB is accepted (whitespace: no body -> 400, not 413).
    let (st, _) = c.raw("POST", "/tables/l2", &big[..MAX_BODY]).unwrap();
    assert_eq!(st, 400);
}

#[test]
fn hostile_requests_are_refused_without_harm() {
    let (s, _m, _d) = start(None, "hostile");
    let a = s.local_addr();
    // A huge Content-Length is refused before reading (tiny_http 0.12 would abort the process
    // here by allocating it).
    let r = raw(
        a,
        b"POST /tables/l2 HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000000000\r\n\r\n{}",
    );
    assert_eq!(status_of(&r), 413, "{r}");
    // A length beyond u64 is not a length: hyper refuses the header (400) before any handler.
    let r = raw(
        a,
        b"POST /tables/l2 HTTP/1.1\r\nContent-Length: 99999999999999999999999999\r\n\r\n",
    );
    assert_eq!(status_of(&r), 400, "{r}");
    assert_eq!(
        status_of(&raw(a, b"POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n")),
        400
    );
    assert_eq!(
        status_of(&raw(
            a,
            b"POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
        )),
        400
    );
    assert_eq!(
        status_of(&raw(
            a,
            b"POST /tables/l2 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )),
        411
    );
    assert_eq!(status_of(&raw(a, b"garbage\r\n\r\n")), 400);
    // Not HTTP/1.x: hyper answers 400 (the hand-written server said 505).
    assert_eq!(status_of(&raw(a, b"GET /health HTTP/2.0\r\n\r\n")), 400);
    assert_eq!(
        status_of(&raw(a, b"GET /health HTTP/1.1\r\nbad\r\n\r\n")),
        400
    );
    let mut long = b"GET /health HTTP/1.1\r\nX: ".to_vec();
    long.extend(vec![b'a'; 20_000]);
    long.extend_from_slice(b"\r\n\r\n");
    assert_eq!(status_of(&raw(a, &long)), 431);
    let mut many = b"GET /health HTTP/1.1\r\n".to_vec();
    for i in 0..100 {
        many.extend_from_slice(format!("X-{i}: 1\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(status_of(&raw(a, &many)), 431);
    // Not UTF-8, and a client that connects and leaves.
    assert_eq!(status_of(&raw(a, b"GET /\xff\xfe HTTP/1.1\r\n\r\n")), 400);
    drop(TcpStream::connect(a).unwrap());
    // Expect: 100-continue gets its interim answer, then the real one.
    let r = raw(
        a,
        b"POST /tables/l2 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n{\"key\": 42}",
    );
    assert!(
        r.starts_with("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"),
        "{r}"
    );
    // Still serving.
    assert_eq!(client(&s, None).get("/health", None).unwrap().0, 200);
}

#[test]
fn token_is_required_when_set() {
    let (s, _m, _d) = start(Some("s3cret"), "token");
    let (st, v) = client(&s, None).get("/health", None).unwrap();
    assert_eq!(st, 401);
    assert!(v["error"].as_str().unwrap().contains("Bearer"), "{v}");
    assert_eq!(
        client(&s, Some("wrong")).get("/health", None).unwrap().0,
        401
    );
    assert_eq!(
        client(&s, Some("s3cre")).get("/health", None).unwrap().0,
        401
    );
    assert_eq!(
        client(&s, Some("s3cret")).get("/health", None).unwrap().0,
        200
    );
    let r = raw(
        s.local_addr(),
        b"GET /health HTTP/1.1\r\nAuthorization: Basic s3cret\r\n\r\n",
    );
    assert_eq!(status_of(&r), 401);
    assert!(has_header(&r, "WWW-Authenticate", "Bearer"), "{r}");
    let r = raw(
        s.local_addr(),
        b"GET /health HTTP/1.1\r\nauthorization: bearer s3cret\r\n\r\n",
    );
    assert_eq!(status_of(&r), 200, "{r}");
    // The token is checked before the body: an unauthenticated huge body is a 401, not a 413.
    let r = raw(
        s.local_addr(),
        b"POST /tables/l2 HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n",
    );
    assert_eq!(status_of(&r), 401);
    // Unknown routes are 401 too (nothing is revealed without the token).
    assert_eq!(client(&s, None).get("/nope", None).unwrap().0, 401);
    assert_eq!(
        client(&s, Some("s3cret")).get("/nope", None).unwrap().0,
        404
    );
}

#[test]
fn non_loopback_needs_a_token() {
    let mock = Mock::new(PathBuf::from("/nonexistent.toml"));
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.1:9410"] {
        let e = match ApiServer::start(addr.parse().unwrap(), None, mock.clone()) {
            Ok(_) => panic!("{addr} without a token was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("not a loopback address"), "{e}");
        assert!(e.contains("LONGHAUL_API_TOKEN"), "{e}");
    }
    let e = ApiServer::start(
        "127.0.0.1:0".parse().unwrap(),
        Some(String::new()),
        mock.clone(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("empty"), "{e}");
    // With a token, any address.
    let mut s =
        ApiServer::start("0.0.0.0:0".parse().unwrap(), Some("t".into()), mock.clone()).unwrap();
    let port = s.local_addr().port();
    let c = Client::new(&format!("127.0.0.1:{port}"), Some("t".into()));
    assert_eq!(c.get("/health", None).unwrap().0, 200);
    s.shutdown();
    s.shutdown();
    assert!(
        c.get("/health", None).is_err(),
        "still listening after shutdown"
    );
    // IPv6 loopback needs no token.
    if let Ok(s6) = ApiServer::start("[::1]:0".parse().unwrap(), None, mock) {
        let c = Client::new(&s6.local_addr().to_string(), None);
        assert_eq!(c.get("/health", None).unwrap().0, 200);
    }
}

#[test]
fn shutdown_on_drop_frees_the_port() {
    let (s, _m, _d) = start(None, "drop");
    let addr = s.local_addr();
    drop(s);
    assert!(TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err());
    // The same port can be bound again.
    let again = ApiServer::start(addr, None, Mock::new(PathBuf::from("/x"))).unwrap();
    assert_eq!(again.local_addr(), addr);
}

#[test]
fn concurrent_clients() {
    let (s, _m, _d) = start(None, "concurrent");
    let addr = s.local_addr().to_string();
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let c = Client::new(&addr, None);
                for j in 0..10 {
                    let (st, _) = c.get("/health", None).unwrap();
                    assert_eq!(st, 200, "client {i} request {j}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn ctl_against_the_server() {
    let (s, m, dir) = start(Some("tok"), "ctl");
    let addr = s.local_addr().to_string();
    let ctl = |args: &[&str]| -> i32 {
        let mut v = vec![
            "--addr".to_owned(),
            addr.clone(),
            "--token".to_owned(),
            "tok".to_owned(),
        ];
        v.extend(args.iter().map(|s| s.to_string()));
        ctl_main(&v)
    };
    assert_eq!(ctl(&["health"]), 0);
    assert_eq!(ctl(&["stats"]), 0);
    assert_eq!(ctl(&["tables"]), 0);
    assert_eq!(ctl(&["table", "insert", "l2", r#"{"key": "k1"}"#]), 0);
    assert_eq!(ctl(&["table", "insert", "l2", r#"{"key": "k1"}"#]), 1); // 409
    assert_eq!(
        ctl(&["table", "list", "l2", "--offset", "0", "--limit", "10"]),
        0
    );
    assert_eq!(m.tables.lock().unwrap()["l2"].len(), 1);
    assert_eq!(ctl(&["table", "delete", "l2", r#"{"key": "k1"}"#]), 0);
    assert!(m.tables.lock().unwrap()["l2"].is_empty());
    assert_eq!(ctl(&["table", "list", "routes v4"]), 0);
    assert_eq!(ctl(&["table", "list", "nope"]), 1);
    assert_eq!(ctl(&["reload"]), 0);
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[switch]\n").unwrap();
    assert_eq!(ctl(&["reload", bad.to_str().unwrap()]), 1);
    assert_eq!(ctl(&["frobnicate"]), 2);
    assert_eq!(ctl(&["table", "insert", "l2", "{not json"]), 2);
    // Without the token: 401 -> 1.
    assert_eq!(
        ctl_main(&["--addr".into(), addr.clone(), "health".into()]),
        1
    );
    // Nothing listening: 1.
    drop(s);
    assert_eq!(ctl(&["health"]), 1);
}

#[test]
fn every_route_refuses_requests_without_the_token_on_a_public_address() {
    let mock = Mock::new(PathBuf::from("/nonexistent.toml"));
    let s = ApiServer::start(
        "0.0.0.0:0".parse().unwrap(),
        Some("t0ken".into()),
        mock.clone(),
    )
    .unwrap();
    let port = s.local_addr().port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let routes: [(&str, &str, &str); 8] = [
        ("GET", "/health", ""),
        ("GET", "/stats", ""),
        ("GET", "/tables", ""),
        ("GET", "/tables/l2", ""),
        (
            "POST",
            "/tables/l2",
            r#"{"mac": "02:00:00:00:00:09", "port": "dc0"}"#,
        ),
        ("DELETE", "/tables/l2", r#"{"mac": "02:00:00:00:00:09"}"#),
        ("POST", "/reload", "{}"),
        ("GET", "/metrics", ""),
    ];
    for (method, path, body) in routes {
        for auth in [
            "",
            "Authorization: Bearer wrong\r\n",
            "Authorization: t0ken\r\n",
        ] {
            let req = format!(
                "{method} {path} HTTP/1.1\r\n{auth}Content-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let r = raw(addr, req.as_bytes());
            assert_eq!(status_of(&r), 401, "{method} {path} with '{auth}': {r}");
        }
        let req = format!(
            "{method} {path} HTTP/1.1\r\nAuthorization: Bearer t0ken\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        assert_ne!(
            status_of(&raw(addr, req.as_bytes())),
            401,
            "{method} {path}"
        );
    }
}

#[test]
fn a_huge_content_length_is_refused_with_or_without_the_token() {
    let (s, _m, _d) = start(Some("s3cret"), "huge");
    let a = s.local_addr();
    for auth in ["", "Authorization: Bearer wrong\r\n"] {
        let req = format!(
            "POST /tables/l2 HTTP/1.1\r\n{auth}Content-Length: 100000000000000\r\n\r\n{{}}"
        );
        assert_eq!(status_of(&raw(a, req.as_bytes())), 401, "{auth}");
    }
    // With the token: 413 from Content-Length, before reading; the error is JSON.
    let r = raw(
        a,
        b"POST /tables/l2 HTTP/1.1\r\nAuthorization: Bearer s3cret\r\nContent-Length: 100000000000000\r\n\r\n{}",
    );
    assert_eq!(status_of(&r), 413, "{r}");
    assert!(has_header(&r, "Content-Type", "application/json"), "{r}");
    assert!(
        r.contains(
            "request body of 100000000000000 bytes is larger than the limit of 1048576 bytes"
        ),
        "{r}"
    );
    assert_eq!(
        client(&s, Some("s3cret")).get("/health", None).unwrap().0,
        200
    );
}

/// Writes `prefix`, then one byte of `trickle` every 500 ms, reading between writes; returns the
/// answer (empty if the server closed without one) and when the server closed or answered.
fn slow_client(a: SocketAddr, prefix: &[u8], trickle: u8) -> (String, Duration) {
    let started = std::time::Instant::now();
    let mut c = TcpStream::connect(a).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    c.write_all(prefix).unwrap();
    let mut out = Vec::new();
    while started.elapsed() < Duration::from_secs(20) {
        let mut buf = [0u8; 4096];
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
        if c.write_all(&[trickle]).is_err() && out.is_empty() {
            break;
        }
    }
    (
        String::from_utf8_lossy(&out).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn slow_clients_are_cut_off_and_do_not_hold_up_others() {
    let (s, _m, _d) = start(None, "slow");
    let a = s.local_addr();
    // Slowloris: a head that never ends. The connection is closed at the deadline, unanswered.
    let head =
        std::thread::spawn(move || slow_client(a, b"GET /health HTTP/1.1\r\nX-Slow: ", b'a'));
    // A body sent a byte at a time: 408 (JSON) at the deadline.
    let body = std::thread::spawn(move || {
        slow_client(
            a,
            &local_headers(
                a,
                b"POST /tables/l2 HTTP/1.1\r\nContent-Length: 1000\r\n\r\n",
            ),
            b' ',
        )
    });
    // Meanwhile everyone else is served at once.
    for _ in 0..10 {
        let t = std::time::Instant::now();
        assert_eq!(client(&s, None).get("/health", None).unwrap().0, 200);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        std::thread::sleep(Duration::from_millis(300));
    }
    let (r, took) = head.join().unwrap();
    assert!(r.is_empty(), "{r}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(15),
        "{took:?}"
    );
    let (r, took) = body.join().unwrap();
    assert_eq!(status_of(&r), 408, "{r}");
    assert!(r.contains("not completed within 10 s"), "{r}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(15),
        "{took:?}"
    );
    assert_eq!(client(&s, None).get("/health", None).unwrap().0, 200);
}

/// `GET /health` until it is 200 (the server frees slots as connections close).
fn wait_healthy(s: &ApiServer) {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while client(s, None).get("/health", None).map(|r| r.0).ok() != Some(200) {
        assert!(std::time::Instant::now() < until, "not serving again");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn more_clients_than_slots_are_answered_503_at_once() {
    use longhaul_control::http::{MAX_CONNECTIONS, MAX_IN_FLIGHT};
    let (s, _m, _d) = start(None, "many");
    let a = s.local_addr();
    // MAX_IN_FLIGHT + 8 requests in progress (head sent, body pending): the excess is refused.
    let mut held: Vec<TcpStream> = (0..MAX_IN_FLIGHT + 8)
        .map(|_| {
            let mut c = TcpStream::connect(a).unwrap();
            c.write_all(&local_headers(
                a,
                b"POST /tables/l2 HTTP/1.1\r\nContent-Length: 10\r\n\r\n{",
            ))
            .unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let t = std::time::Instant::now();
    let (st, v) = client(&s, None).get("/health", None).unwrap();
    assert_eq!(st, 503, "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("requests in progress"),
        "{v}"
    );
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let refused = held
        .iter_mut()
        .filter_map(|c| {
            c.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let mut buf = [0u8; 64];
            let got =
                matches!(c.read(&mut buf), Ok(n) if n > 0 && buf.starts_with(b"HTTP/1.1 503 "));
            got.then_some(())
        })
        .count();
    assert_eq!(refused, 8);
    drop(held);
    wait_healthy(&s);

    // MAX_CONNECTIONS connections that send nothing hold every connection slot: one more is
    // answered 503 at once, without waiting for its request.
    let idle: Vec<TcpStream> = (0..MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(a).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let t = std::time::Instant::now();
    let r = raw(a, b"GET /health HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&r), 503, "{r}");
    assert!(r.contains("connections open"), "{r}");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    drop(idle);
    wait_healthy(&s);
}
