//! The management API: HTTP/1.1 + JSON on its own runtime thread, independent of the control
//! thread through [`ManagementBackend`].
//!
//! | method | path | body | answer |
//! |---|---|---|---|
//! | GET | `/health` | | `backend.health()` |
//! | GET | `/stats` | | `backend.stats()` |
//! | GET | `/tables` | | `{"tables": [names]}` |
//! | GET | `/tables/{name}?offset=N&limit=N` | | `backend.list_table(...)` (limit default 100, at most 10000) |
//! | POST | `/tables/{name}` | entry (JSON) | `backend.insert(...)` |
//! | DELETE | `/tables/{name}` | key (JSON) | `backend.delete(...)` |
//! | POST | `/reload` | none, or `{"path": "..."}` | `backend.reload(...)` |
//!
//! Errors are `{"error": "..."}` with 400 (bad request, bad JSON, bad config), 401 (token), 403
//! (a reload path outside the allowed directories), 404, 405 (wrong method, with `Allow`), 409,
//! 408 (request not completed within the deadline), 411 (chunked body), 413 (body over
//! [`MAX_BODY`]), 415 and 421 (no token: a request a browser could make cross-site, see
//! [`check_browser`]), 503 (the backend is unavailable: the request was not applied; or too many
//! requests or connections: see [`crate::http`]). `GET /health` is 503 unless its `status` is
//! `ok`. When a token is set, every request needs `Authorization: Bearer <token>` (compared in
//! constant time); the token is checked before the body is read. A non-loopback listen address
//! without a token is refused. Without a token, [`check_browser`] sees the head instead. JSON
//! bodies with a key twice are refused (400).
//!
//! Nothing from the network can panic a handler: requests are bounded by the HTTP layer
//! ([`crate::http`], axum on hyper with tower limits: head size, body size, deadline, connections
//! and requests in progress), and every parse is checked. Each connection carries one request
//! (`Connection: close`). Backend calls run on the server's blocking threads.
//!
//! Logs: the HTTP layer logs refused requests (warn, with the reason and the peer: 401, 400, 404,
//! 405, 408, 411, 413, 503) and every request at debug; the outcome of a table change or a reload
//! (done or refused by the backend) is logged by the control thread ([`crate::plane`]), not here.

use crate::http::{self, Gate, Refusal, ServeError};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, request::Parts, HeaderValue, Method, Uri};
use axum::response::Response;
use axum::Router;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Largest request body accepted, bytes (more is 413).
pub const MAX_BODY: usize = 1 << 20;
/// `limit` of a table listing when the request gives none.
pub const DEFAULT_LIMIT: usize = 100;
/// Largest `limit` of a table listing (larger values are clamped to it).
pub const MAX_LIMIT: usize = 10_000;
/// The token deploy/longhaul.env ships with: refused, so that it is never used for real.
pub const PLACEHOLDER_TOKEN: &str = "change-me";
/// Environment variable that supplies the API token (it overrides `control.api_token`).
pub const TOKEN_ENV: &str = "LONGHAUL_API_TOKEN";

/// What the API serves; implemented by the control thread's owner. Every method is called from an
/// API thread, never from a worker.
pub trait ManagementBackend: Send + Sync + 'static {
    /// `{"status":"ok", "pipeline":..., "uptime_s":..., "config": path}`.
    fn health(&self) -> Value;
    /// Counters snapshot as JSON.
    fn stats(&self) -> Value;
    /// Table names.
    fn tables(&self) -> Vec<String>;
    /// `{"table":..,"total":N,"offset":..,"entries":[...]}`.
    fn list_table(&self, table: &str, offset: usize, limit: usize) -> Result<Value, ApiError>;
    fn insert(&self, table: &str, entry: &Value) -> Result<Value, ApiError>;
    fn delete(&self, table: &str, key: &Value) -> Result<Value, ApiError>;
    /// Validates the config at `path` (`None`: the file the switch was started with) and swaps
    /// it in without stopping forwarding; a bad config is `BadRequest` with the key-path errors
    /// (as `check-config` prints them), and the old config keeps running.
    fn reload(&self, path: Option<&Path>) -> Result<Value, ApiError>;
}

/// A refused request: 404, 400, 409, 503.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    NotFound(String),
    BadRequest(String),
    Conflict(String),
    Unavailable(String),
    /// Refused whoever asks (a reload path outside the allowed directories).
    Forbidden(String),
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::NotFound(_) => 404,
            ApiError::BadRequest(_) => 400,
            ApiError::Conflict(_) => 409,
            ApiError::Unavailable(_) => 503,
            ApiError::Forbidden(_) => 403,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            ApiError::NotFound(m)
            | ApiError::BadRequest(m)
            | ApiError::Conflict(m)
            | ApiError::Unavailable(m)
            | ApiError::Forbidden(m) => m,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message(), self.status())
    }
}

impl std::error::Error for ApiError {}

/// The API token: `LONGHAUL_API_TOKEN` when set and not empty, else `cfg_token` (from
/// `control.api_token`) when not empty, else none.
pub fn resolve_token(cfg_token: Option<&str>) -> Option<String> {
    let env = std::env::var(TOKEN_ENV).ok();
    env.as_deref()
        .filter(|t| !t.is_empty())
        .or(cfg_token.filter(|t| !t.is_empty()))
        .map(str::to_owned)
}

/// Equality of two byte strings in time that depends only on their lengths.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

/// What a request without a token must show that it is not a browser's cross-site request
/// ([`check_browser`]): the names its `Host` header may give (with the listen port), besides
/// the listen address itself and `localhost`.
#[derive(Debug, Default)]
pub struct AllowedHosts {
    names: Vec<String>,
    listen: OnceLock<SocketAddr>,
}

impl AllowedHosts {
    /// `names` from `control.api_hosts` (`name` or `name:port`, lower case).
    pub fn new(names: Vec<String>) -> Arc<AllowedHosts> {
        Arc::new(AllowedHosts {
            names: names.into_iter().map(|n| n.to_ascii_lowercase()).collect(),
            listen: OnceLock::new(),
        })
    }

    /// The address the API listens on (its real port once bound).
    pub fn set_listen(&self, a: SocketAddr) {
        let _ = self.listen.set(a);
    }

    /// Whether `authority` (`host[:port]`, from `Host` or an `Origin`) names this API.
    fn allows(&self, authority: &str) -> bool {
        let Some(listen) = self.listen.get() else {
            return false;
        };
        let a = authority.trim().to_ascii_lowercase();
        let (host, port) = match a.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => (h.to_owned(), p.parse::<u16>().ok()),
            _ => (a.clone(), Some(80)),
        };
        if self.names.contains(&a) {
            return true;
        }
        if port != Some(listen.port()) {
            return false;
        }
        let ip = match listen.ip() {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        };
        host == ip || host == "localhost" || self.names.contains(&host)
    }

    fn shown(&self) -> String {
        let port = self.listen.get().map_or(0, SocketAddr::port);
        let mut v: Vec<String> = self
            .listen
            .get()
            .map(|a| a.to_string())
            .into_iter()
            .collect();
        v.push(format!("localhost:{port}"));
        v.extend(self.names.iter().cloned());
        v.join(", ")
    }
}

/// Without a token, the refusals that keep a web page from using the API (CSRF, DNS
/// rebinding): a `Host` that is not this API's address (421), an `Origin` that is not this
/// API (403), and a request that changes state (anything but GET/HEAD) whose `Content-Type` is
/// not `application/json` (415; a browser cannot send that cross-site without a CORS preflight,
/// which this API never grants). `None`: go on.
fn check_browser(head: &Parts, hosts: &AllowedHosts) -> Option<Response> {
    let refuse = |status: u16, msg: String| Some(error(status, &msg));
    let host = head
        .headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| head.uri.authority().map(|a| a.as_str().to_owned()));
    match host {
        None => return refuse(400, "the request has no Host header".into()),
        Some(h) if !hosts.allows(&h) => {
            return refuse(
                421,
                format!(
                    "Host '{h}' is not this API's address ({}; more names: control.api_hosts)",
                    hosts.shown()
                ),
            )
        }
        Some(_) => {}
    }
    if let Some(o) = head.headers.get(header::ORIGIN) {
        let o = o.to_str().unwrap_or("");
        let own = o
            .strip_prefix("http://")
            .is_some_and(|rest| !rest.contains('/') && hosts.allows(rest));
        if !own {
            return refuse(
                403,
                format!("cross-origin request refused: Origin '{o}' is not this API"),
            );
        }
    }
    if head.method != Method::GET && head.method != Method::HEAD {
        let ct = head
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let media = ct.split(';').next().unwrap_or("").trim();
        if !media.eq_ignore_ascii_case("application/json") {
            let shown = if ct.is_empty() { "none" } else { ct };
            return refuse(
                415,
                format!(
                    "{} needs Content-Type: application/json (got {shown})",
                    head.method
                ),
            );
        }
    }
    None
}

/// The running API server (its own runtime thread, [`crate::http::HttpServer`]). Stops it on
/// [`ApiServer::shutdown`] or drop.
pub struct ApiServer {
    http: http::HttpServer,
}

impl ApiServer {
    /// Listens on `listen` (port 0: any free port, see [`ApiServer::local_addr`]) and serves
    /// `backend`. Refuses a non-loopback address without a token, and an empty token.
    pub fn start(
        listen: SocketAddr,
        token: Option<String>,
        backend: Arc<dyn ManagementBackend>,
    ) -> Result<ApiServer, ServeError> {
        ApiServer::start_with_hosts(listen, token, backend, Vec::new())
    }

    /// Like [`ApiServer::start`], with the `Host` names `control.api_hosts` adds.
    pub fn start_with_hosts(
        listen: SocketAddr,
        token: Option<String>,
        backend: Arc<dyn ManagementBackend>,
        api_hosts: Vec<String>,
    ) -> Result<ApiServer, ServeError> {
        if token.as_deref() == Some("") {
            return Err(ServeError::EmptyToken);
        }
        if token.as_deref() == Some(PLACEHOLDER_TOKEN) {
            return Err(ServeError::PlaceholderToken);
        }
        if token.is_none() && !listen.ip().is_loopback() {
            return Err(ServeError::NoToken { listen });
        }
        let hosts = AllowedHosts::new(api_hosts);
        let app = app(token, backend, MAX_BODY, hosts.clone());
        let http = http::HttpServer::start(listen, "longhaul-api", app)
            .map_err(|e| ServeError::Api(Box::new(e)))?;
        hosts.set_listen(http.local_addr());
        Ok(ApiServer { http })
    }

    /// The address it listens on (the real port when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.http.local_addr()
    }

    /// Stops serving and joins the thread (requests in progress finish first). Idempotent.
    pub fn shutdown(&mut self) {
        self.http.shutdown();
    }
}

/// The API as served: routes, the gate (the token when set, else [`check_browser`] against
/// `hosts`) and the HTTP layer's limits with a body limit of `max_body`, without a listener
/// (for [`crate::http::answer`]: tests and the fuzz targets).
pub fn app(
    token: Option<String>,
    backend: Arc<dyn ManagementBackend>,
    max_body: usize,
    hosts: Arc<AllowedHosts>,
) -> Router {
    let gate: Gate = match token {
        Some(t) => {
            let t = t.into_bytes();
            Arc::new(move |head: &Parts| check_token(head, &t))
        }
        None => Arc::new(move |head: &Parts| check_browser(head, &hosts)),
    };
    let gate = Some(gate);
    let handler = Arc::new(Handler { backend });
    let router = Router::new().fallback(handle).with_state(handler);
    http::app(router, "api", max_body, gate)
}

struct Handler {
    backend: Arc<dyn ManagementBackend>,
}

/// Which resource a path names.
enum Route {
    Health,
    Stats,
    Tables,
    Table(String),
    Reload,
}

fn json_reply(status: u16, v: &Value) -> Response {
    let body = serde_json::to_vec_pretty(v).unwrap_or_else(|_| b"{}".to_vec());
    http::reply(http::status(status), "application/json", body)
}

fn error(status: u16, msg: &str) -> Response {
    http::json_error(http::status(status), msg)
}

fn from_result(r: Result<Value, ApiError>) -> Response {
    match r {
        Ok(v) => json_reply(200, &v),
        Err(e) => {
            let mut r = error(e.status(), e.message());
            r.extensions_mut().insert(Refusal {
                reason: e.message().to_owned(),
                by_backend: true,
            });
            r
        }
    }
}

/// 401 unless the request carries the token (in constant time); `None`: go on.
fn check_token(head: &Parts, token: &[u8]) -> Option<Response> {
    if authorized(head, token) {
        return None;
    }
    let mut r = error(
        401,
        "missing or wrong token: send Authorization: Bearer <token>",
    );
    r.headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    Some(r)
}

/// The one handler: routes by hand (the tested contract: JSON 404/405 with `Allow`, strict
/// `%XX` decoding of table names, trailing slashes), and calls the backend on a blocking thread.
async fn handle(State(h): State<Arc<Handler>>, method: Method, uri: Uri, body: Bytes) -> Response {
    match tokio::task::spawn_blocking(move || h.call(&method, &uri, &body)).await {
        Ok(r) => r,
        Err(_) => error(500, "the request handler failed"),
    }
}

impl Handler {
    fn call(&self, method: &Method, uri: &Uri, body: &[u8]) -> Response {
        let (path, query) = (uri.path(), uri.query().unwrap_or(""));
        let route = match route(path) {
            Ok(r) => r,
            Err((st, msg)) => return error(st, &msg),
        };
        let method = method.as_str();
        let not_allowed = |allow: &'static str| {
            let mut r = error(
                405,
                &format!("{method} is not allowed on {path}: use {allow}"),
            );
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
            r
        };
        match (&route, method) {
            (Route::Health, "GET") => {
                let v = self.backend.health();
                let st = if v["status"] == "ok" { 200 } else { 503 };
                json_reply(st, &v)
            }
            (Route::Stats, "GET") => json_reply(200, &self.backend.stats()),
            (Route::Tables, "GET") => json_reply(200, &json!({ "tables": self.backend.tables() })),
            (Route::Table(name), "GET") => match paging(query) {
                Ok((offset, limit)) => from_result(self.backend.list_table(name, offset, limit)),
                Err(msg) => error(400, &msg),
            },
            (Route::Table(name), "POST") => match json_body(body) {
                Ok(Some(entry)) => from_result(self.backend.insert(name, &entry)),
                Ok(None) => error(400, "the request needs a JSON body (the entry)"),
                Err(msg) => error(400, &msg),
            },
            (Route::Table(name), "DELETE") => match json_body(body) {
                Ok(Some(key)) => from_result(self.backend.delete(name, &key)),
                Ok(None) => error(400, "the request needs a JSON body (the key)"),
                Err(msg) => error(400, &msg),
            },
            (Route::Reload, "POST") => match json_body(body) {
                Ok(None) => from_result(self.backend.reload(None)),
                Ok(Some(v)) => match reload_path(&v) {
                    Ok(p) => from_result(self.backend.reload(p.as_deref())),
                    Err(msg) => error(400, &msg),
                },
                Err(msg) => error(400, &msg),
            },
            (Route::Health | Route::Stats | Route::Tables, _) => not_allowed("GET"),
            (Route::Table(_), _) => not_allowed("GET, POST, DELETE"),
            (Route::Reload, _) => not_allowed("POST"),
        }
    }
}

fn authorized(head: &Parts, token: &[u8]) -> bool {
    let Some(v) = head
        .headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let v = v.trim();
    let Some((scheme, given)) = v.split_once(' ') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer") && ct_eq(given.trim().as_bytes(), token)
}

/// The resource `path` names, or the status and message of the refusal.
fn route(path: &str) -> Result<Route, (u16, String)> {
    let not_found = || (404, format!("no such resource: {path}"));
    let path = path
        .strip_suffix('/')
        .filter(|p| !p.is_empty())
        .unwrap_or(path);
    Ok(match path {
        "/health" => Route::Health,
        "/stats" => Route::Stats,
        "/tables" => Route::Tables,
        "/reload" => Route::Reload,
        p => {
            let Some(name) = p.strip_prefix("/tables/") else {
                return Err(not_found());
            };
            if name.is_empty() || name.contains('/') {
                return Err(not_found());
            }
            match percent_decode(name) {
                Some(n) if !n.is_empty() => Route::Table(n),
                _ => return Err((400, format!("bad table name in {path}"))),
            }
        }
    })
}

/// `offset` and `limit` from a query string (unknown parameters are refused, to catch typos).
fn paging(query: &str) -> Result<(usize, usize), String> {
    let (mut offset, mut limit) = (0usize, DEFAULT_LIMIT);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let num = || {
            v.parse::<usize>()
                .map_err(|_| format!("{k}={v}: expected a non-negative integer"))
        };
        match k {
            "offset" => offset = num()?,
            "limit" => limit = num()?.min(MAX_LIMIT),
            _ => {
                return Err(format!(
                    "unknown query parameter '{k}': expected offset and/or limit"
                ))
            }
        }
    }
    Ok((offset, limit))
}

/// The request body as JSON: `Ok(None)` when empty, 400 when not JSON (the size was bounded by
/// the HTTP layer).
fn json_body(body: &[u8]) -> Result<Option<Value>, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice::<Strict>(body)
        .map(|s| Some(s.0))
        .map_err(|e| format!("the request body is not valid JSON: {e}"))
}

/// A JSON value whose objects have no key twice (a duplicate key is an error, not "the last
/// one wins").
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::new();
        while let Some(Strict(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = serde_json::Map::new();
        while let Some(k) = map.next_key::<String>()? {
            if m.contains_key(&k) {
                return Err(serde::de::Error::custom(format!("duplicate key \"{k}\"")));
            }
            let Strict(v) = map.next_value()?;
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

/// `{"path": "..."}` (or `{}`) of `POST /reload`.
fn reload_path(v: &Value) -> Result<Option<PathBuf>, String> {
    let Some(obj) = v.as_object() else {
        return Err("expected a JSON object: {} or {\"path\": \"...\"}".to_owned());
    };
    if let Some(k) = obj.keys().find(|k| k.as_str() != "path") {
        return Err(format!("unknown field '{k}': expected only \"path\""));
    }
    match obj.get("path") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if !s.is_empty() => Ok(Some(PathBuf::from(s))),
        Some(_) => Err("\"path\" must be a non-empty string".to_owned()),
    }
}

/// `%XX` decoding (and nothing else: `+` stays `+`); `None` on a bad escape or non-UTF-8.
pub(crate) fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Escapes everything but `A-Z a-z 0-9 - . _ ~` as `%XX` (for a table name in a path).
pub(crate) fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_compare() {
        assert!(ct_eq(b"abc", b"abc"));
        assert!(!ct_eq(b"abc", b"abd"));
        assert!(!ct_eq(b"abc", b"abcd"));
        assert!(!ct_eq(b"", b"a"));
        assert!(ct_eq(b"", b""));
    }

    #[test]
    fn percent_round_trip() {
        for s in ["l3_routes", "a b/c%d", "é"] {
            assert_eq!(percent_decode(&percent_encode(s)).as_deref(), Some(s));
        }
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%ff"), None);
    }

    #[test]
    fn paging_parses_and_clamps() {
        assert_eq!(paging(""), Ok((0, DEFAULT_LIMIT)));
        assert_eq!(paging("offset=5&limit=7"), Ok((5, 7)));
        assert_eq!(paging("limit=99999999"), Ok((0, MAX_LIMIT)));
        assert!(paging("limit=-1").is_err());
        assert!(paging("offest=1").is_err());
    }

    #[test]
    fn reload_body() {
        assert_eq!(reload_path(&json!({})), Ok(None));
        assert_eq!(
            reload_path(&json!({"path": "/x.toml"})),
            Ok(Some(PathBuf::from("/x.toml")))
        );
        assert!(reload_path(&json!({"path": 3})).is_err());
        assert!(reload_path(&json!({"paht": "x"})).is_err());
        assert!(reload_path(&json!([1])).is_err());
    }
}
