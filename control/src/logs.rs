//! Operator-facing lines of `longhaul run` outside the `tracing` events (start-up addresses, the
//! memory report, capture files, the final error): `longhaul: ...` on stderr, or with
//! `LONGHAUL_LOG_FORMAT=json` a JSON log event like every other line, so that stderr is all JSON.

/// The environment variable that selects the log format (`json`, or anything else: text).
pub const FORMAT_ENV: &str = "LONGHAUL_LOG_FORMAT";

/// Whether logs are JSON (`LONGHAUL_LOG_FORMAT=json`).
pub fn json() -> bool {
    std::env::var(FORMAT_ENV).is_ok_and(|f| f == "json")
}

/// An informational line: `longhaul: {msg}`, or an `info` event.
pub fn note(msg: &str) {
    if json() {
        tracing::info!("{msg}");
    } else {
        eprintln!("longhaul: {msg}");
    }
}

/// An error line (the run failed): `longhaul: {msg}`, or an `error` event.
pub fn error(msg: &str) {
    if json() {
        tracing::error!("{msg}");
    } else {
        eprintln!("longhaul: {msg}");
    }
}
