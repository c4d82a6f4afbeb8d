//! A small, bounded HTTP/1.1 server over `std::net` for the management API and the Prometheus
//! endpoint.
//!
//! Why not tiny_http: tiny_http 0.12 drains an unread request body on drop with
//! `vec![0; remaining_content_length]`, so a single request with `Content-Length: 10^14` (even
//! an unauthenticated one that is refused at once) aborts the process. Everything here is
//! bounded instead:
//!
//! - one request per connection (`Connection: close`), at most [`MAX_CONNECTIONS`] at a time
//!   (more get 503 at once);
//! - request head at most [`MAX_HEAD`] bytes (431), body at most the server's `max_body` (413,
//!   decided from `Content-Length` before reading any of it), chunked bodies refused (411);
//! - every read has a timeout and the whole request a deadline ([`REQUEST_DEADLINE`]), so a slow
//!   client cannot hold a thread;
//! - `Service::check` sees the head before the body is read (the API checks its token there).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest request head (request line + headers), bytes.
pub const MAX_HEAD: usize = 16 * 1024;
/// Most headers in a request.
pub const MAX_HEADERS: usize = 64;
/// Connections served at once; more are answered 503 and closed.
pub const MAX_CONNECTIONS: usize = 32;
/// Time a client has to send its whole request.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// How often the accept loop looks at the stop flag.
const POLL: Duration = Duration::from_millis(10);
/// Timeout of one socket write.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// A request's method, target and headers (the body is read after [`Service::check`]).
#[derive(Debug, Clone)]
pub struct Head {
    pub method: String,
    /// Path and query as sent (`/tables/l3?offset=0`).
    pub target: String,
    /// Names as sent; compare them with [`Head::header`].
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// The value of the first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path (without the query) and the query (without `?`, may be empty).
    pub fn path_and_query(&self) -> (&str, &str) {
        match self.target.split_once('?') {
            Some((p, q)) => (p, q),
            None => (self.target.as_str(), ""),
        }
    }
}

/// A response. `Content-Length` and `Connection: close` are added when it is sent.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16, content_type: &'static str, body: Vec<u8>) -> Response {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body,
        }
    }

    /// `{"error": msg}` with `status`.
    pub fn json_error(status: u16, msg: &str) -> Response {
        let body = serde_json::to_vec_pretty(&serde_json::json!({ "error": msg }))
            .unwrap_or_else(|_| b"{}".to_vec());
        Response::new(status, "application/json", body)
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

/// What a server does with requests.
pub trait Service: Send + Sync + 'static {
    /// Called with the head before the body is read; `Some` answers at once (the body is not
    /// read). Default: go on.
    fn check(&self, _head: &Head) -> Option<Response> {
        None
    }
    /// Answers a request whose body (at most `max_body` bytes) has been read.
    fn call(&self, head: &Head, body: &[u8]) -> Response;
}

/// A running server: an accept thread plus one thread per connection in progress. Stops and
/// joins them all on [`HttpServer::shutdown`] or drop.
pub struct HttpServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HttpServer {
    /// Binds `listen` (port 0: any free port) and serves `service` on a thread named `name`.
    pub fn start(
        listen: SocketAddr,
        name: &str,
        max_body: usize,
        service: Arc<dyn Service>,
    ) -> Result<HttpServer, String> {
        let listener =
            TcpListener::bind(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("cannot read the address of {listen}: {e}"))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("{listen}: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let conn_name = format!("{name}-conn");
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || accept_loop(listener, &flag, &conn_name, max_body, service))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        Ok(HttpServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, lets requests in progress finish, joins every thread. Idempotent.
    pub fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
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

fn accept_loop(
    listener: TcpListener,
    stop: &AtomicBool,
    conn_name: &str,
    max_body: usize,
    service: Arc<dyn Service>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        conns.retain(|t| !t.is_finished());
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => {
                std::thread::sleep(POLL);
                continue;
            }
            // Out of descriptors and the like: wait for connections to finish.
            Err(_) => {
                std::thread::sleep(POLL * 10);
                continue;
            }
        };
        // Accepted sockets may inherit non-blocking mode on some platforms.
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
        if active.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let r = Response::json_error(503, "too many connections; try again");
            send(&stream, &r);
            continue;
        }
        active.fetch_add(1, Ordering::SeqCst);
        let (svc, act) = (service.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name(conn_name.to_owned())
            .spawn(move || {
                serve_connection(stream, max_body, &*svc);
                act.fetch_sub(1, Ordering::SeqCst);
            });
        match spawned {
            Ok(t) => conns.push(t),
            Err(_) => {
                active.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
    for t in conns {
        let _ = t.join();
    }
}

/// Why a request could not be read.
enum ReadError {
    /// Answer with this.
    Reply(Response),
    /// The client went away or timed out: just close.
    Gone,
}

fn serve_connection(mut stream: TcpStream, max_body: usize, svc: &dyn Service) {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let resp = match read_request(&mut stream, deadline, max_body, svc) {
        Ok((head, body)) => svc.call(&head, &body),
        Err(ReadError::Reply(r)) => r,
        Err(ReadError::Gone) => return,
    };
    send(&stream, &resp);
    // Let the client read the answer even if it is still sending a body we did not read: stop
    // writing, then discard (boundedly) what it sends, so closing does not reset the connection.
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let mut sink = [0u8; 8192];
    let (mut drained, until) = (0usize, Instant::now() + Duration::from_secs(2));
    while drained < 4 * max_body.max(MAX_HEAD) && Instant::now() < until {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// What a request is read from and answered on: a socket, or bytes ([`answer`]).
trait Conn: Read + Write {
    fn set_read_timeout(&mut self, d: Option<Duration>) -> std::io::Result<()>;
}

impl Conn for TcpStream {
    fn set_read_timeout(&mut self, d: Option<Duration>) -> std::io::Result<()> {
        TcpStream::set_read_timeout(self, d)
    }
}

/// A request given as bytes; what is written to it is discarded.
struct Bytes<'a>(&'a [u8]);

impl Read for Bytes<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Bytes<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Conn for Bytes<'_> {
    fn set_read_timeout(&mut self, _d: Option<Duration>) -> std::io::Result<()> {
        Ok(())
    }
}

/// Answers one request given as bytes exactly as a connection would (the same reading, limits
/// and `svc`), and returns the bytes that would be sent; empty when the connection would just
/// close (the request ends before its head or body is complete). For tests and the fuzz targets.
pub fn answer(request: &[u8], max_body: usize, svc: &dyn Service) -> Vec<u8> {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let resp = match read_request(&mut Bytes(request), deadline, max_body, svc) {
        Ok((head, body)) => svc.call(&head, &body),
        Err(ReadError::Reply(r)) => r,
        Err(ReadError::Gone) => return Vec::new(),
    };
    let mut out = Vec::new();
    send(&mut out, &resp);
    out
}

/// Reads at most `buf.len()` more bytes before `deadline`; `Gone` on EOF, error or timeout.
fn read_some(
    stream: &mut impl Conn,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<usize, ReadError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(ReadError::Gone);
    }
    stream
        .set_read_timeout(Some(left))
        .map_err(|_| ReadError::Gone)?;
    loop {
        match stream.read(buf) {
            Ok(0) => return Err(ReadError::Gone),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Gone),
        }
    }
}

fn read_request(
    stream: &mut impl Conn,
    deadline: Instant,
    max_body: usize,
    svc: &dyn Service,
) -> Result<(Head, Vec<u8>), ReadError> {
    let bad = |msg: &str| ReadError::Reply(Response::json_error(400, msg));
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD {
            return Err(ReadError::Reply(Response::json_error(
                431,
                &format!("request head larger than {MAX_HEAD} bytes"),
            )));
        }
        let n = read_some(stream, &mut chunk, deadline)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    if head_end > MAX_HEAD {
        return Err(ReadError::Reply(Response::json_error(
            431,
            &format!("request head larger than {MAX_HEAD} bytes"),
        )));
    }
    let head_text =
        std::str::from_utf8(&buf[..head_end]).map_err(|_| bad("request head is not UTF-8"))?;
    let mut lines = head_text.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (method, target, version) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(m), Some(t), Some(v), None) if !m.is_empty() && t.starts_with('/') => (m, t, v),
        _ => return Err(bad("malformed request line")),
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(ReadError::Reply(Response::json_error(
            505,
            "only HTTP/1.0 and HTTP/1.1 are supported",
        )));
    }
    let mut headers = Vec::new();
    for line in lines {
        if headers.len() == MAX_HEADERS {
            return Err(ReadError::Reply(Response::json_error(
                431,
                &format!("more than {MAX_HEADERS} headers"),
            )));
        }
        let Some((k, v)) = line.split_once(':') else {
            return Err(bad("malformed header line"));
        };
        if k.is_empty() || k.bytes().any(|b| b.is_ascii_whitespace()) {
            return Err(bad("malformed header name"));
        }
        headers.push((k.to_owned(), v.trim().to_owned()));
    }
    let head = Head {
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
    };

    if let Some(r) = svc.check(&head) {
        return Err(ReadError::Reply(r));
    }

    if head.header("Transfer-Encoding").is_some() {
        return Err(ReadError::Reply(Response::json_error(
            411,
            "chunked request bodies are not supported: send Content-Length",
        )));
    }
    let mut lengths = head
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case("Content-Length"))
        .map(|(_, v)| v);
    let len = match (lengths.next(), lengths.next()) {
        (None, _) => 0,
        (Some(v), None) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
            // Digits only: an overflow means "huge".
            v.parse::<usize>().unwrap_or(usize::MAX)
        }
        _ => return Err(bad("bad Content-Length")),
    };
    if len > max_body {
        return Err(ReadError::Reply(Response::json_error(
            413,
            &format!("request body of {len} bytes is larger than the limit of {max_body} bytes"),
        )));
    }
    if len > 0
        && head
            .header("Expect")
            .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    let mut body = buf.split_off(head_end + 4);
    if body.len() > len {
        // Pipelined data after the body: ignored (one request per connection).
        body.truncate(len);
    }
    while body.len() < len {
        let want = (len - body.len()).min(chunk.len());
        let n = read_some(stream, &mut chunk[..want], deadline)?;
        body.extend_from_slice(&chunk[..n]);
    }
    Ok((head, body))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

fn send(mut stream: impl Write, r: &Response) {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.status,
        reason(r.status),
        r.content_type,
        r.body.len()
    );
    for (k, v) in &r.headers {
        // Values are ours, but never let one break the framing.
        if !v.contains(['\r', '\n']) {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    head.push_str("\r\n");
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&r.body))
        .and_then(|()| stream.flush());
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;

    impl Service for Echo {
        fn call(&self, head: &Head, body: &[u8]) -> Response {
            let text = format!("{} {} {}", head.method, head.target, body.len());
            Response::new(200, "text/plain", text.into_bytes())
        }
    }

    #[test]
    fn answer_reads_a_request_from_bytes_as_a_connection_does() {
        let r = answer(
            b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcdef",
            16,
            &Echo,
        );
        let r = String::from_utf8(r).unwrap();
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        assert!(r.ends_with("\r\n\r\nPOST /x 3"), "{r}");
        // Body over the limit: 413 before reading it; a request cut short: nothing sent.
        let r = answer(b"POST /x HTTP/1.1\r\nContent-Length: 17\r\n\r\n", 16, &Echo);
        assert!(r.starts_with(b"HTTP/1.1 413 "));
        assert!(answer(b"POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\na", 16, &Echo).is_empty());
        assert!(answer(b"GET / HTTP/1.1\r\n", 16, &Echo).is_empty());
    }
}
