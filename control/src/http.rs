//! The HTTP server of the management API and of the Prometheus endpoint: axum on hyper
//! (HTTP/1.1), on a small tokio runtime of its own (one OS thread plus a few blocking threads), so
//! the rest of the program stays synchronous.
//!
//! Why a library server, and why these limits: the first server (tiny_http 0.12) drained an unread
//! request body on drop with `vec![0; remaining_content_length]`, so one request with
//! `Content-Length: 10^14` (even an unauthenticated one, refused at once) aborted the process. A
//! hand-written bounded server over `std::net` replaced it; this one keeps its bounds with
//! maintained parts (hyper's parser, tower's limits) instead of our own HTTP parsing:
//!
//! - at most [`MAX_CONNECTIONS`] open connections (more are answered 503 and closed at once), one
//!   request per connection (`Connection: close`: no idle keep-alive connection holds a slot);
//! - the request head: at most [`MAX_HEAD`] bytes and [`MAX_HEADERS`] headers (431, hyper), read
//!   within [`REQUEST_DEADLINE`] (else the connection is closed);
//! - the body: at most the endpoint's `max_body` bytes, refused with 413 from `Content-Length`
//!   before any of it is read (tower-http `RequestBodyLimit`); chunked bodies are refused (411);
//! - at most [`MAX_IN_FLIGHT`] requests in progress (more are answered 503 at once: tower
//!   `load_shed` + `concurrency_limit`), each finished within [`REQUEST_DEADLINE`] (408: tower
//!   `timeout`, which also bounds a client that sends its body slowly);
//! - an endpoint's gate (the API's token check) sees the head before the body is read.
//!
//! Errors decided here or by a handler are `{"error": "..."}` (any non-JSON error a layer makes is
//! rewritten to that form); malformed requests that hyper refuses itself (400, 431, 505 never
//! reaches a handler) get its empty-bodied answer. Handlers run their blocking work on the
//! runtime's blocking threads. Requests refused here are logged (`tracing`, warn) with the
//! reason and the peer; every request is logged at debug.

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{header, request::Parts, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::{BoxError, Router};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::ServiceBuilder;
use tower::ServiceExt;
use tower_http::limit::RequestBodyLimitLayer;

/// Largest request head (request line + headers), bytes.
pub const MAX_HEAD: usize = 16 * 1024;
/// Most headers in a request.
pub const MAX_HEADERS: usize = 64;
/// Connections open at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 128;
/// Requests in progress at once (head read); more are answered 503.
pub const MAX_IN_FLIGHT: usize = 32;
/// Time a client has to send its request head, and a request to be read and answered.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// Threads for handlers' blocking work (the control thread answers one request at a time anyway).
const BLOCKING_THREADS: usize = 4;
/// Time requests in progress get to finish when the server stops.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(200);
/// Time given to a connection refused for lack of slots to take its 503.
const BUSY_WRITE: Duration = Duration::from_secs(1);

/// Sees a request's head before its body is read: `Some` answers at once (the API's token check).
pub type Gate = Arc<dyn Fn(&Parts) -> Option<Response> + Send + Sync>;

/// Why a request was refused, carried by an error response to the request log.
#[derive(Clone, Debug)]
pub struct Refusal {
    pub reason: String,
    /// Decided by the backend behind the handler (the control thread logs state changes itself):
    /// logged at debug, not warn.
    pub by_backend: bool,
}

/// The peer of a connection (a request extension).
#[derive(Clone, Copy, Debug)]
struct Peer(Option<SocketAddr>);

/// A response with `body` and its content type.
pub fn reply(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// `{"error": msg}` with `status` (pretty-printed, as every JSON answer).
pub fn json_error(status: StatusCode, msg: &str) -> Response {
    let body = serde_json::to_vec_pretty(&serde_json::json!({ "error": msg }))
        .unwrap_or_else(|_| b"{}".to_vec());
    let mut r = reply(status, "application/json", body);
    r.extensions_mut().insert(Refusal {
        reason: msg.to_owned(),
        by_backend: false,
    });
    r
}

/// The status from a number (500 for a number that is not one).
pub fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// `router` (its handlers) wrapped in the limits above, the gate and the JSON errors: what
/// [`HttpServer::start`] and [`answer`] serve. `name` tags the logs.
pub fn app(router: Router, name: &'static str, max_body: usize, gate: Option<Gate>) -> Router {
    // Innermost first: body limit, chunked refusal, gate, then the request limits, then the
    // JSON errors and the log around everything.
    let mut app = router
        .layer(DefaultBodyLimit::disable())
        .layer(RequestBodyLimitLayer::new(max_body))
        .layer(middleware::from_fn(refuse_chunked));
    if let Some(gate) = gate {
        app = app.layer(middleware::from_fn(move |req: Request, next: Next| {
            let gate = gate.clone();
            async move {
                let (parts, body) = req.into_parts();
                match gate(&parts) {
                    Some(r) => r,
                    None => next.run(Request::from_parts(parts, body)).await,
                }
            }
        }));
    }
    app.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(limit_error))
            .load_shed()
            .layer(GlobalConcurrencyLimitLayer::new(MAX_IN_FLIGHT))
            .timeout(REQUEST_DEADLINE),
    )
    .layer(middleware::from_fn(move |req: Request, next: Next| {
        finish(req, next, name, max_body)
    }))
}

async fn refuse_chunked(req: Request, next: Next) -> Response {
    if req.headers().contains_key(header::TRANSFER_ENCODING) {
        return json_error(
            StatusCode::LENGTH_REQUIRED,
            "chunked request bodies are not supported: send Content-Length",
        );
    }
    next.run(req).await
}

/// The answers of the load-shedding, concurrency and timeout layers.
async fn limit_error(err: BoxError) -> Response {
    if err.is::<tower::timeout::error::Elapsed>() {
        json_error(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "the request was not completed within {} s",
                REQUEST_DEADLINE.as_secs()
            ),
        )
    } else if err.is::<tower::load_shed::error::Overloaded>() {
        json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("more than {MAX_IN_FLIGHT} requests in progress; try again"),
        )
    } else {
        json_error(StatusCode::INTERNAL_SERVER_ERROR, &format!("{err}"))
    }
}

fn content_length(h: &HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// Rewrites a non-JSON error response (a layer's own, e.g. tower-http's 413) as `{"error": ..}`
/// and logs the request: refusals at warn (with the reason), the rest at debug.
async fn finish(req: Request, next: Next, name: &'static str, max_body: usize) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let peer = req.extensions().get::<Peer>().and_then(|p| p.0);
    let length = content_length(req.headers());
    let mut resp = next.run(req).await;
    let st = resp.status();
    if (st.is_client_error() || st.is_server_error())
        && resp.extensions().get::<Refusal>().is_none()
    {
        let msg = match (st, length) {
            (StatusCode::PAYLOAD_TOO_LARGE, Some(n)) => {
                format!("request body of {n} bytes is larger than the limit of {max_body} bytes")
            }
            (StatusCode::PAYLOAD_TOO_LARGE, None) => {
                format!("request body larger than the limit of {max_body} bytes")
            }
            _ => st
                .canonical_reason()
                .unwrap_or("error")
                .to_ascii_lowercase(),
        };
        let mut json = json_error(st, &msg);
        for (k, v) in resp.headers() {
            if k != header::CONTENT_TYPE && k != header::CONTENT_LENGTH {
                json.headers_mut().append(k.clone(), v.clone());
            }
        }
        resp = json;
    }
    log_request(
        name,
        &method,
        &path,
        peer,
        st,
        resp.extensions().get::<Refusal>(),
        started,
    );
    resp
}

fn log_request(
    endpoint: &'static str,
    method: &Method,
    path: &str,
    peer: Option<SocketAddr>,
    st: StatusCode,
    refusal: Option<&Refusal>,
    started: Instant,
) {
    let peer = peer.map(|p| p.to_string()).unwrap_or_default();
    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    match refusal {
        Some(r) if !r.by_backend => tracing::warn!(
            endpoint,
            %method,
            path,
            status = st.as_u16(),
            peer,
            reason = %r.reason,
            "request refused"
        ),
        _ => tracing::debug!(
            endpoint,
            %method,
            path,
            status = st.as_u16(),
            peer,
            elapsed_us,
            "request"
        ),
    }
}

/// The HTTP/1.1 settings of every connection.
fn connection_builder() -> http1::Builder {
    let mut b = http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(REQUEST_DEADLINE)
        .keep_alive(false)
        .half_close(true)
        .title_case_headers(true)
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEAD)
        .max_buf_size(MAX_HEAD);
    b
}

/// A running server: its runtime's thread. Stops it on [`HttpServer::shutdown`] or drop.
pub struct HttpServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

/// Why a server (the management API, the metrics endpoint) did not start. A message includes
/// its cause's, so no variant has a `source` (a chain printed with `{:#}` would repeat it).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {listen}: {error}")]
    Listen {
        listen: SocketAddr,
        error: io::Error,
    },
    #[error("cannot read the address of {listen}: {error}")]
    LocalAddr {
        listen: SocketAddr,
        error: io::Error,
    },
    #[error("{listen}: {error}")]
    Socket {
        listen: SocketAddr,
        error: io::Error,
    },
    #[error("cannot start the runtime of {name}: {error}")]
    Runtime { name: String, error: io::Error },
    #[error("cannot start a thread: {error}")]
    Thread { error: io::Error },
    /// `control.api_token` (or its environment variable) is set to "".
    #[error("the management API token is empty")]
    EmptyToken,
    /// The token is deploy/longhaul.env's placeholder.
    #[error(
        "the management API token is the placeholder '{}' of deploy/longhaul.env: set a secret \
         ({}, e.g. from `openssl rand -hex 32`)",
        crate::api::PLACEHOLDER_TOKEN,
        crate::api::TOKEN_ENV
    )]
    PlaceholderToken,
    /// A non-loopback address without a token.
    #[error(
        "refusing to start the management API on {listen}: it is not a loopback address and no \
         token is set (set control.api_token or {}, or listen on 127.0.0.1)",
        crate::api::TOKEN_ENV
    )]
    NoToken { listen: SocketAddr },
    /// The management API's server did not start.
    #[error("management API: {0}")]
    Api(Box<ServeError>),
    /// The metrics endpoint's server did not start.
    #[error("metrics endpoint: {0}")]
    Metrics(Box<ServeError>),
    /// The Prometheus recorder could not be installed (the exporter's message).
    #[error("cannot install the Prometheus recorder: {0}")]
    Recorder(String),
}

impl HttpServer {
    /// Binds `listen` (port 0: any free port) and serves `app` (from [`app`]) on a thread named
    /// `name`.
    pub fn start(listen: SocketAddr, name: &str, app: Router) -> Result<HttpServer, ServeError> {
        let listener = std::net::TcpListener::bind(listen)
            .map_err(|error| ServeError::Listen { listen, error })?;
        let addr = listener
            .local_addr()
            .map_err(|error| ServeError::LocalAddr { listen, error })?;
        listener
            .set_nonblocking(true)
            .map_err(|error| ServeError::Socket { listen, error })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .max_blocking_threads(BLOCKING_THREADS)
            .thread_name(format!("{name}-blocking"))
            .build()
            .map_err(|error| ServeError::Runtime {
                name: name.to_owned(),
                error,
            })?;
        let listener = {
            let _in_rt = rt.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(|error| ServeError::Socket { listen, error })?
        };
        let (stop, stopped) = watch::channel(false);
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                rt.block_on(serve(listener, app, stopped));
                // Blocking work still running (a backend call) is abandoned, not waited for.
                rt.shutdown_timeout(Duration::from_millis(100));
            })
            .map_err(|error| ServeError::Thread { error })?;
        Ok(HttpServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets requests in progress finish (at most [`SHUTDOWN_GRACE`]), joins the
    /// thread. Idempotent.
    pub fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn serve(listener: tokio::net::TcpListener, app: Router, mut stop: watch::Receiver<bool>) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut conns = tokio::task::JoinSet::new();
    let (mut busy_since, mut busy) = (Instant::now(), 0u64);
    loop {
        let accepted = tokio::select! {
            _ = stop.changed() => break,
            a = listener.accept() => a,
        };
        while conns.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(x) => x,
            // Out of descriptors and the like: wait for connections to finish.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                conns.spawn(connection(stream, peer, app.clone(), stop.clone(), slot));
            }
            Err(_) => {
                busy += 1;
                if busy_since.elapsed() >= Duration::from_secs(1) {
                    tracing::warn!(
                        refused = busy,
                        max = MAX_CONNECTIONS,
                        "connections refused: too many open connections"
                    );
                    (busy_since, busy) = (Instant::now(), 0);
                }
                conns.spawn(refuse_busy(stream));
            }
        }
    }
    drop(listener);
    // Requests in progress get SHUTDOWN_GRACE to finish (a stopping process exits within a
    // second); then whatever is left is dropped with the set.
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
}

async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    app: Router,
    mut stop: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let svc = app.map_request(move |mut req: Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(Peer(Some(peer)));
        req
    });
    let conn =
        connection_builder().serve_connection(TokioIo::new(stream), TowerToHyperService::new(svc));
    tokio::pin!(conn);
    let done = tokio::select! {
        r = conn.as_mut() => Some(r),
        _ = stop.changed() => None,
    };
    let result = match done {
        Some(r) => r,
        None => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection closed on an error");
    }
}

/// Answers 503 to a connection over [`MAX_CONNECTIONS`] without reading its request.
async fn refuse_busy(mut stream: tokio::net::TcpStream) {
    let body = serde_json::to_vec_pretty(&serde_json::json!({
        "error": format!("more than {MAX_CONNECTIONS} connections open; try again")
    }))
    .unwrap_or_default();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = tokio::time::timeout(BUSY_WRITE, async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&body).await?;
        stream.shutdown().await
    })
    .await;
}

/// Answers one request given as bytes exactly as a connection would (hyper's parsing, the same
/// layers and handlers), and returns the bytes that would be sent; empty when the connection
/// would just close. For tests and the fuzz targets.
pub fn answer(request: &[u8], app: &Router) -> Vec<u8> {
    thread_local! {
        static RT: Option<tokio::runtime::Runtime> = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .max_blocking_threads(BLOCKING_THREADS)
            .build()
            .ok();
    }
    RT.with(|rt| {
        let Some(rt) = rt else {
            return Vec::new();
        };
        rt.block_on(async {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let svc = app
                .clone()
                .map_request(|mut req: Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(Peer(None));
                    req
                });
            let conn = connection_builder()
                .serve_connection(TokioIo::new(server), TowerToHyperService::new(svc));
            let talk = async {
                // The server may stop reading (an early answer): a failed write is not an error.
                let _ = client.write_all(request).await;
                let _ = client.shutdown().await;
                let mut out = Vec::new();
                let _ = client.read_to_end(&mut out).await;
                out
            };
            let both = async { tokio::join!(conn, talk).1 };
            tokio::time::timeout(REQUEST_DEADLINE + Duration::from_secs(1), both)
                .await
                .unwrap_or_default()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;

    #[test]
    fn start_error_messages() {
        let listen: SocketAddr = "192.0.2.1:9410".parse().unwrap();
        assert_eq!(
            ServeError::PlaceholderToken.to_string(),
            "the management API token is the placeholder 'change-me' of deploy/longhaul.env: \
             set a secret (LONGHAUL_API_TOKEN, e.g. from `openssl rand -hex 32`)"
        );
        assert_eq!(
            ServeError::NoToken { listen }.to_string(),
            "refusing to start the management API on 192.0.2.1:9410: it is not a loopback \
             address and no token is set (set control.api_token or LONGHAUL_API_TOKEN, or \
             listen on 127.0.0.1)"
        );
        let e = ServeError::Listen {
            listen,
            error: io::Error::new(io::ErrorKind::AddrInUse, "in use"),
        };
        assert_eq!(
            ServeError::Metrics(Box::new(e)).to_string(),
            "metrics endpoint: cannot listen on 192.0.2.1:9410: in use"
        );
    }

    fn echo() -> Router {
        Router::new().fallback(
            |method: Method, uri: axum::http::Uri, body: Bytes| async move {
                let text = format!("{method} {uri} {}", body.len());
                reply(StatusCode::OK, "text/plain", text.into_bytes())
            },
        )
    }

    #[test]
    fn answer_reads_a_request_from_bytes_as_a_connection_does() {
        let app = app(echo(), "test", 16, None);
        let r = answer(b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcdef", &app);
        let r = String::from_utf8(r).unwrap();
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\nPOST /x 3"), "{r}");
        // Body over the limit: 413 (JSON) before reading it.
        let r = answer(b"POST /x HTTP/1.1\r\nContent-Length: 17\r\n\r\n", &app);
        let r = String::from_utf8(r).unwrap();
        assert!(r.starts_with("HTTP/1.1 413 "), "{r}");
        assert!(r.contains("larger than the limit of 16 bytes"), "{r}");
        // A head cut short: nothing sent.
        assert!(answer(b"GET / HTTP/1.1\r\n", &app).is_empty());
        // Chunked: 411.
        let r = answer(
            b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            &app,
        );
        assert!(r.starts_with(b"HTTP/1.1 411 "));
    }
}
