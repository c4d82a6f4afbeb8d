//! A minimal blocking HTTP/1.1 client for the management API (std only); `longhaul ctl` is
//! [`crate::ctl`].
//!
//! One request per connection (`Connection: close`), connect/read/write timeouts, the answer
//! bounded to [`MAX_RESPONSE`] bytes; `Content-Length`, chunked and read-to-close bodies are
//! understood.

use serde_json::Value;
use std::io::{self, Read, Write};
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

    pub fn get(&self, path: &str, body: Option<&Value>) -> Result<(u16, Value), ClientError> {
        self.request("GET", path, body)
    }

    pub fn post(&self, path: &str, body: Option<&Value>) -> Result<(u16, Value), ClientError> {
        self.request("POST", path, body)
    }

    pub fn delete(&self, path: &str, body: Option<&Value>) -> Result<(u16, Value), ClientError> {
        self.request("DELETE", path, body)
    }

    /// Sends `method path` with `body` as JSON; returns the status and the body parsed as JSON
    /// (an empty body is `null`; a body that is not JSON is returned as a JSON string).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), ClientError> {
        let payload = match body {
            Some(v) => serde_json::to_vec(v).map_err(ClientError::Encode)?,
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
    pub fn raw(
        &self,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<(u16, Vec<u8>), ClientError> {
        let addr = || self.addr.clone();
        let addrs: Vec<SocketAddr> = self
            .addr
            .to_socket_addrs()
            .map_err(|error| ClientError::BadAddress {
                addr: addr(),
                error,
            })?
            .collect();
        let mut last = ClientError::NoAddress { addr: addr() };
        let mut stream = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, self.connect_timeout) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(error) => last = ClientError::Connect { to: *a, error },
            }
        }
        let mut stream = stream.ok_or(last)?;
        stream
            .set_read_timeout(Some(self.io_timeout))
            .and_then(|()| stream.set_write_timeout(Some(self.io_timeout)))
            .map_err(ClientError::Socket)?;

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
                (Err(error), _) => ClientError::Send {
                    addr: addr(),
                    error,
                },
                (_, Err(error)) => ClientError::Receive {
                    addr: addr(),
                    error,
                },
                _ => ClientError::Closed { addr: addr() },
            });
        }
        if resp.len() > MAX_RESPONSE {
            return Err(ClientError::TooLarge);
        }
        parse_response(&resp)
    }
}

/// Why a request got no answer. A message includes its cause's, so no variant has a `source`
/// (a chain printed with `{:#}` would repeat it).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot encode JSON: {0}")]
    Encode(serde_json::Error),
    #[error("bad address '{addr}': {error}")]
    BadAddress { addr: String, error: io::Error },
    #[error("'{addr}' resolves to no address")]
    NoAddress { addr: String },
    #[error("cannot connect to {to}: {error}")]
    Connect { to: SocketAddr, error: io::Error },
    #[error("socket: {0}")]
    Socket(io::Error),
    #[error("sending the request to {addr}: {error}")]
    Send { addr: String, error: io::Error },
    #[error("reading the answer from {addr}: {error}")]
    Receive { addr: String, error: io::Error },
    #[error("{addr} closed the connection without answering")]
    Closed { addr: String },
    #[error("answer larger than {MAX_RESPONSE} bytes")]
    TooLarge,
    /// What is wrong with the answer.
    #[error("malformed HTTP answer: {0}")]
    Malformed(&'static str),
}

/// Status and body of a complete HTTP/1.x response.
fn parse_response(resp: &[u8]) -> Result<(u16, Vec<u8>), ClientError> {
    let bad = ClientError::Malformed;
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

#[cfg(test)]
mod tests {
    use super::*;

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
