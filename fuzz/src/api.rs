//! The `api` target: arbitrary request bytes through the management API's HTTP server
//! (control/src/http.rs, [`http::answer`]: hyper's parsing, the tower limits, body limits) and its
//! service (control/src/api.rs: token check, routes, paging, JSON bodies), on a backend whose
//! tables are a real pipeline's control plane (the master copies of `configs/*.toml`), so table
//! inserts and deletes run the same entry parsing as `longhaul run`.
//!
//! Input: byte 0 picks the pipeline (its control plane) and whether a token is required; the
//! rest is the request.

use longhaul_control::api::{self, ApiError, ManagementBackend};
use longhaul_control::config::Config;
use longhaul_control::http;
use longhaul_control::plane::PipelineControl;
use longhaul_pipelines::{baseline, spray, themis};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A backend over one pipeline control plane; reloads are answered without reading files (a
/// fuzzed path could name a FIFO or a device).
struct Backend<H> {
    ctl: Mutex<H>,
}

impl<H: PipelineControl + Sync> ManagementBackend for Backend<H> {
    fn health(&self) -> Value {
        json!({"status": "ok", "pipeline": "fuzz", "uptime_s": 0.0})
    }
    fn stats(&self) -> Value {
        json!({"workers": []})
    }
    fn tables(&self) -> Vec<String> {
        self.ctl.lock().map(|c| c.tables()).unwrap_or_default()
    }
    fn list_table(&self, table: &str, offset: usize, limit: usize) -> Result<Value, ApiError> {
        self.lock()?.list(table, offset, limit)
    }
    fn insert(&self, table: &str, entry: &Value) -> Result<Value, ApiError> {
        self.lock()?.insert(table, entry).map(|(v, _)| v)
    }
    fn delete(&self, table: &str, key: &Value) -> Result<Value, ApiError> {
        self.lock()?.delete(table, key).map(|(v, _)| v)
    }
    fn reload(&self, path: Option<&Path>) -> Result<Value, ApiError> {
        match path {
            None => Ok(json!({"reloaded": true})),
            Some(p) => Err(ApiError::BadRequest(format!(
                "{}: not read by the fuzz backend",
                p.display()
            ))),
        }
    }
}

impl<H> Backend<H> {
    fn lock(&self) -> Result<std::sync::MutexGuard<'_, H>, ApiError> {
        self.ctl
            .lock()
            .map_err(|_| ApiError::Unavailable("poisoned".into()))
    }
}

fn backend(kind: u8, cfg_for: impl Fn(&str) -> Config) -> Arc<dyn ManagementBackend> {
    match kind % 4 {
        0 => Arc::new(Backend {
            ctl: Mutex::new(baseline::control::BaselineControl::new(&cfg_for(
                "baseline.toml",
            ))),
        }),
        1 => Arc::new(Backend {
            ctl: Mutex::new(baseline::control::BaselineControl::new(&cfg_for(
                "routed-arp.toml",
            ))),
        }),
        2 => Arc::new(Backend {
            ctl: Mutex::new(themis::control::ThemisControl::new(&cfg_for(
                "themis-esw.toml",
            ))),
        }),
        _ => Arc::new(Backend {
            ctl: Mutex::new(spray::control::SprayControl::new(&cfg_for(
                "spray-tor.toml",
            ))),
        }),
    }
}

pub fn api(data: &[u8]) {
    let (&sel, req) = match data.split_first() {
        Some(x) => x,
        None => (&0, data),
    };
    let be = backend(sel, |name| crate::pipeline::shipped_config(name).clone());
    let token = (sel & 4 != 0).then(|| "s3cret".to_owned());
    // A small body limit too, so the 413 path and exact-limit bodies are reached.
    let max_body = if sel & 8 != 0 { 64 } else { api::MAX_BODY };
    let hosts = api::AllowedHosts::new(Vec::new());
    hosts.set_listen(std::net::SocketAddr::from(([127, 0, 0, 1], 9410)));
    let app = api::app(token, be, max_body, hosts);
    let _ = http::answer(req, &app);
}
