//! The control thread (DESIGN.md section 3): owns the configuration and the master copy of every
//! table, talks to each worker only through its bounded lock-free rings (commands down, punts
//! up), serves the management API's requests, and publishes the workers' counter snapshots.
//!
//! It is pipeline-agnostic: a pipeline supplies a [`PipelineControl`] (its tables' master copy,
//! its punt handler, how a config reload maps to table commands), and the registry
//! ([`Mechanisms`]) parses reloaded configs and adds the mechanisms' own stats and metrics.

use crate::api::{ApiError, ManagementBackend};
use crate::config::Config;
use crate::mechanisms::Mechanisms;
use crate::metrics::Metrics;
use longhaul_dataplane::control::{mono_ns, Channel, Command, Envelope, Punt, PuntHandler};
use longhaul_dataplane::engine::SwitchSnapshot;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a pipeline gives the control thread.
pub trait PipelineControl: Send + 'static {
    /// The pipeline's command type (`Pipeline::Command`).
    type Command: Clone + Send + 'static;

    /// React to a punt: issue commands (they go to every worker, in order).
    fn on_punt(&mut self, punt: &Punt, issue: &mut dyn FnMut(Command<Self::Command>));

    /// Table names (for `GET /tables`).
    fn tables(&self) -> Vec<String>;

    /// One page of a table's master copy: `{"table", "total", "offset", "entries": [...]}`.
    fn list(&self, table: &str, offset: usize, limit: usize) -> Result<Value, ApiError>;

    /// Insert (or replace) an entry given as JSON; returns the stored entry and the commands that
    /// install it on the workers. The master copy changes only when `Ok`.
    fn insert(
        &mut self,
        table: &str,
        entry: &Value,
    ) -> Result<(Value, Vec<Self::Command>), ApiError>;

    /// Delete the entry with key `key` (JSON).
    fn delete(&mut self, table: &str, key: &Value)
        -> Result<(Value, Vec<Self::Command>), ApiError>;

    /// A new, fully validated config replaces the running one: either the commands that bring
    /// the workers' tables to it, or `Rebuild` when it changes the switch's structure (ports,
    /// QoS, PFC, parser), or `Conflict` when it changes something that cannot change while
    /// running (the running config then stays). On `Rebuild` the handler has already taken the
    /// new config's tables as its master copy.
    fn reload(&mut self, old: &Config, new: &Config)
        -> Result<ReloadPlan<Self::Command>, ApiError>;
}

/// How a reload reaches the workers.
#[derive(Debug)]
pub enum ReloadPlan<C> {
    /// Table commands, applied live in order.
    Tables(Vec<C>),
    /// The switch must be rebuilt from the new config and swapped in by each worker between two
    /// loop iterations (packets still queued in the old switch are dropped and counted).
    Rebuild,
}

/// Builds new workers' switches from a config and hands them to the running workers (which swap
/// them in between iterations); returns the new workers' handles.
pub type RebuildFn<C> = Box<dyn FnMut(&Config) -> Result<Vec<WorkerHandle<C>>, String> + Send>;

/// Replay runs the same handler inline on the worker's thread (deterministic).
pub struct Inline<H>(pub H);

impl<H: PipelineControl> PuntHandler<H::Command> for Inline<H> {
    fn on_punt(&mut self, punt: &Punt, issue: &mut dyn FnMut(Command<H::Command>)) {
        self.0.on_punt(punt, issue)
    }
}

/// The control thread's view of one worker.
pub struct WorkerHandle<C> {
    pub channel: Channel<C>,
    /// The worker copies its counters here every stats interval (`try_lock`: never waits).
    pub snapshot: Arc<Mutex<SwitchSnapshot>>,
}

/// A management request, answered on its own channel.
pub enum Request {
    Health(mpsc::Sender<Value>),
    Stats(mpsc::Sender<Value>),
    Tables(mpsc::Sender<Vec<String>>),
    List {
        table: String,
        offset: usize,
        limit: usize,
        reply: mpsc::Sender<Result<Value, ApiError>>,
    },
    Insert {
        table: String,
        entry: Value,
        reply: mpsc::Sender<Result<Value, ApiError>>,
    },
    Delete {
        table: String,
        key: Value,
        reply: mpsc::Sender<Result<Value, ApiError>>,
    },
    Reload {
        path: Option<PathBuf>,
        reply: mpsc::Sender<Result<Value, ApiError>>,
    },
}

/// Link state and NIC counters of one port, read by the control thread each time it publishes
/// metrics (DPDK: `rte_eth_link_get_nowait`, `rte_eth_xstats_get`). Ports without such a source
/// (pcap, null) have none and show as up.
pub trait PortStatus: Send {
    /// The port's name in the config.
    fn name(&self) -> &str;
    /// Whether the link is up now.
    fn link_up(&self) -> bool;
    /// The NIC's extended statistics, (name, value); may allocate (control path).
    fn xstats(&self) -> Vec<(String, u64)>;
}

/// How long a full command ring may hold up the control thread before the request fails.
const COMMAND_RING_WAIT: Duration = Duration::from_millis(200);

/// The control thread's state.
pub struct ControlPlane<H: PipelineControl> {
    cfg: Config,
    cfg_path: PathBuf,
    /// Where `/reload` may read configs from: `control.reload_dirs`, or the directory of the
    /// config the process started with (canonical paths, fixed at start).
    reload_dirs: Vec<PathBuf>,
    mechanisms: Arc<dyn Mechanisms>,
    handler: H,
    workers: Vec<WorkerHandle<H::Command>>,
    requests: mpsc::Receiver<Request>,
    metrics: Option<Metrics>,
    started: Instant,
    seq: u64,
    stop: Arc<AtomicBool>,
    /// Commands the rings refused (full for longer than COMMAND_RING_WAIT).
    pub commands_lost: u64,
    pub reloads: u64,
    rebuild: Option<RebuildFn<H::Command>>,
    port_status: Vec<Box<dyn PortStatus>>,
    /// Last link state per `port_status` entry and commands refused by the workers, for the
    /// log lines of changes ([`ControlPlane::watch`]).
    links: Vec<Option<bool>>,
    refused_seen: u64,
}

impl<H: PipelineControl> ControlPlane<H> {
    /// A control plane for `workers`; `backend()` gives the management API its handle.
    pub fn new(
        cfg: Config,
        cfg_path: PathBuf,
        mechanisms: Arc<dyn Mechanisms>,
        handler: H,
        workers: Vec<WorkerHandle<H::Command>>,
        metrics: Option<Metrics>,
        stop: Arc<AtomicBool>,
    ) -> (Self, Backend) {
        let (tx, rx) = mpsc::channel();
        let reload_dirs = allowed_reload_dirs(&cfg, &cfg_path);
        (
            ControlPlane {
                cfg,
                cfg_path,
                reload_dirs,
                mechanisms,
                handler,
                workers,
                requests: rx,
                metrics,
                started: Instant::now(),
                seq: 0,
                stop,
                commands_lost: 0,
                reloads: 0,
                rebuild: None,
                port_status: Vec::new(),
                links: Vec::new(),
                refused_seen: 0,
            },
            Backend { tx },
        )
    }

    /// Allow reloads that change the switch's structure: `f` builds and swaps in new switches.
    pub fn set_rebuild(&mut self, f: RebuildFn<H::Command>) {
        self.rebuild = Some(f);
    }

    /// Where link state and NIC counters come from (metrics `longhaul_port_link_up`,
    /// `longhaul_port_xstat`).
    pub fn set_port_status(&mut self, ports: Vec<Box<dyn PortStatus>>) {
        self.port_status = ports;
    }

    /// The running configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Run until the stop flag is set.
    pub fn run(&mut self) {
        let interval = Duration::from_millis(self.cfg.control.stats_interval_ms);
        let mut last_stats = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            self.step(Duration::from_micros(50));
            if last_stats.elapsed() >= interval {
                last_stats = Instant::now();
                self.watch();
                self.publish_metrics();
            }
        }
        self.watch();
        self.publish_metrics();
    }

    /// Log what changed since the last look: a port's link going up or down, commands the
    /// workers refused (a table full on a worker, a bad entry).
    fn watch(&mut self) {
        self.links.resize(self.port_status.len(), None);
        for (st, last) in self.port_status.iter().zip(self.links.iter_mut()) {
            let up = st.link_up();
            if *last != Some(up) {
                if up {
                    tracing::info!(port = st.name(), "link up");
                } else {
                    tracing::warn!(port = st.name(), "link down");
                }
                *last = Some(up);
            }
        }
        let refused: u64 = self.snapshots().iter().map(|s| s.control.refused).sum();
        if refused > self.refused_seen {
            tracing::warn!(
                refused = refused - self.refused_seen,
                total = refused,
                "workers refused table commands (see the worker's counters; a table full?)"
            );
        }
        self.refused_seen = refused;
    }

    /// One iteration: requests (waiting up to `wait` for the first), then punts.
    pub fn step(&mut self, wait: Duration) {
        if let Ok(r) = self.requests.recv_timeout(wait) {
            self.handle(r);
        }
        while let Ok(r) = self.requests.try_recv() {
            self.handle(r);
        }
        self.drain_punts();
    }

    fn drain_punts(&mut self) {
        let mut cmds: Vec<Command<H::Command>> = Vec::new();
        for w in 0..self.workers.len() {
            while let Some(p) = self.workers[w].channel.punts.pop() {
                self.handler.on_punt(&p, &mut |c| cmds.push(c));
            }
        }
        for c in cmds {
            self.broadcast(c);
        }
    }

    /// Send a command to every worker, in order. A full ring is waited on briefly (the
    /// control thread may wait; the dataplane never does), then counted as lost.
    fn broadcast(&mut self, cmd: Command<H::Command>) -> bool {
        let mut ok = true;
        for w in &self.workers {
            let mut env = Envelope {
                seq: self.seq,
                at: 0,
                issued_ns: mono_ns(),
                cmd: cmd.clone(),
            };
            let deadline = Instant::now() + COMMAND_RING_WAIT;
            loop {
                match w.channel.commands.push(env) {
                    Ok(()) => break,
                    Err(e) if Instant::now() < deadline => {
                        env = e;
                        std::thread::yield_now();
                    }
                    Err(_) => {
                        self.commands_lost += 1;
                        ok = false;
                        break;
                    }
                }
            }
        }
        self.seq += 1;
        ok
    }

    fn send_all(&mut self, cmds: Vec<H::Command>) -> Result<(), ApiError> {
        for c in cmds {
            if !self.broadcast(Command::Pipeline(c)) {
                return Err(ApiError::Unavailable(
                    "a worker's command ring stayed full; the change is in the master copy but not on every worker".into(),
                ));
            }
        }
        Ok(())
    }

    fn handle(&mut self, r: Request) {
        match r {
            Request::Health(reply) => {
                let _ = reply.send(json!({
                    "status": "ok",
                    "pipeline": self.cfg.switch.pipeline,
                    "switch": self.cfg.switch.name,
                    "uptime_s": self.started.elapsed().as_secs_f64(),
                    "config": self.cfg_path.display().to_string(),
                    "workers": self.workers.len(),
                    "reloads": self.reloads,
                }));
            }
            Request::Stats(reply) => {
                let _ = reply.send(self.stats_json());
            }
            Request::Tables(reply) => {
                let _ = reply.send(self.handler.tables());
            }
            Request::List {
                table,
                offset,
                limit,
                reply,
            } => {
                let r = self
                    .known_table(&table)
                    .and_then(|()| self.handler.list(&table, offset, limit));
                let _ = reply.send(r);
            }
            Request::Insert {
                table,
                entry,
                reply,
            } => {
                let r = self
                    .known_table(&table)
                    .and_then(|()| self.handler.insert(&table, &entry))
                    .and_then(|(v, cmds)| self.send_all(cmds).map(|()| v));
                match &r {
                    Ok(v) => tracing::info!(table, entry = %v, "table entry inserted"),
                    Err(e) => {
                        tracing::warn!(table, entry = %entry, error = %e, "table insert refused")
                    }
                }
                let _ = reply.send(r);
            }
            Request::Delete { table, key, reply } => {
                let r = self
                    .known_table(&table)
                    .and_then(|()| self.handler.delete(&table, &key))
                    .and_then(|(v, cmds)| self.send_all(cmds).map(|()| v));
                match &r {
                    Ok(v) => tracing::info!(table, entry = %v, "table entry deleted"),
                    Err(e) => tracing::warn!(table, key = %key, error = %e, "table delete refused"),
                }
                let _ = reply.send(r);
            }
            Request::Reload { path, reply } => {
                let r = self.reload(path.as_deref());
                match &r {
                    Ok(v) => tracing::info!(
                        config = %v["reloaded"].as_str().unwrap_or(""),
                        mode = %v["mode"].as_str().unwrap_or(""),
                        commands = v["commands"].as_u64().unwrap_or(0),
                        "config reloaded"
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "reload refused; the running config stays")
                    }
                }
                let _ = reply.send(r);
            }
        }
    }

    /// `NotFound` naming every table of the running pipeline when `table` is not one of them.
    fn known_table(&self, table: &str) -> Result<(), ApiError> {
        let tables = self.handler.tables();
        if tables.iter().any(|t| t == table) {
            return Ok(());
        }
        Err(ApiError::NotFound(format!(
            "no table '{table}' (tables: {})",
            tables.join(", ")
        )))
    }

    fn reload(&mut self, path: Option<&Path>) -> Result<Value, ApiError> {
        let path = match path {
            None => self.cfg_path.clone(),
            Some(p) => check_reload_path(p, &self.reload_dirs)?,
        };
        let new = Config::load_all_with(&path, self.mechanisms.schema()).map_err(|errs| {
            ApiError::BadRequest(
                errs.iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        })?;
        if new.switch.pipeline != self.cfg.switch.pipeline {
            return Err(ApiError::Conflict(format!(
                "switch.pipeline changes from \"{}\" to \"{}\": restart longhaul to change the pipeline (the running config is unchanged)",
                self.cfg.switch.pipeline, new.switch.pipeline
            )));
        }
        if self.rebuild.is_none() && needs_rebuild(&self.cfg, &new) {
            return Err(ApiError::Conflict(
                "the new config changes the switch's structure and this control plane cannot rebuild it; restart longhaul (the running config is unchanged)".into(),
            ));
        }
        let answer = match self.handler.reload(&self.cfg, &new)? {
            ReloadPlan::Tables(cmds) => {
                let n = cmds.len();
                self.send_all(cmds)?;
                json!({"reloaded": path.display().to_string(), "mode": "tables", "commands": n})
            }
            ReloadPlan::Rebuild => {
                let Some(rebuild) = self.rebuild.as_mut() else {
                    return Err(ApiError::Conflict("rebuild not supported here".into()));
                };
                let workers = rebuild(&new).map_err(ApiError::BadRequest)?;
                self.workers = workers;
                json!({"reloaded": path.display().to_string(), "mode": "rebuild", "commands": 0})
            }
        };
        self.cfg = new;
        self.cfg_path = path;
        self.reloads += 1;
        Ok(answer)
    }

    /// Every worker's latest snapshot (cloned under the lock, which the worker only try-locks).
    fn snapshots(&self) -> Vec<SwitchSnapshot> {
        self.workers
            .iter()
            .map(|w| match w.snapshot.lock() {
                Ok(s) => s.clone(),
                Err(p) => p.into_inner().clone(),
            })
            .collect()
    }

    fn stats_json(&self) -> Value {
        let workers: Vec<Value> = self
            .snapshots()
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut v = snapshot_json(i, s);
                if let Value::Object(m) = &mut v {
                    self.mechanisms.stats_json(s, m);
                }
                v
            })
            .collect();
        json!({
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "commands_lost": self.commands_lost,
            "workers": workers,
        })
    }

    fn publish_metrics(&mut self) {
        if self.metrics.is_none() {
            return;
        }
        let snaps = self.snapshots();
        let mut snap = crate::metrics::from_switches(&snaps);
        self.mechanisms.metrics(&snaps, &mut snap.extra);
        for st in &self.port_status {
            if let Some(p) = snap.ports.iter_mut().find(|p| p.name == st.name()) {
                p.link_up = st.link_up();
                p.xstats = st.xstats();
            }
        }
        if let Some(m) = self.metrics.as_ref() {
            m.publish(&snap);
        }
    }
}

/// The directories `/reload` may read from (canonical): `control.reload_dirs`, or the directory
/// of `cfg_path` (the current directory for a bare file name).
fn allowed_reload_dirs(cfg: &Config, cfg_path: &Path) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> = if cfg.control.reload_dirs.is_empty() {
        let parent = cfg_path.parent().filter(|p| !p.as_os_str().is_empty());
        vec![parent.map_or_else(|| PathBuf::from("."), Path::to_path_buf)]
    } else {
        cfg.control.reload_dirs.clone()
    };
    dirs.into_iter()
        .filter_map(|d| d.canonicalize().ok())
        .collect()
}

/// A config path sent to `/reload`, checked against the allowed directories: no `..`
/// component, relative paths taken from the first allowed directory, symlinks resolved, and the
/// file must be inside one of them. Returns the resolved path (what is then read).
pub fn check_reload_path(p: &Path, allowed: &[PathBuf]) -> Result<PathBuf, ApiError> {
    use std::path::Component;
    let shown = p.display();
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(ApiError::Forbidden(format!(
            "reload path '{shown}' has a '..' component"
        )));
    }
    let Some(first) = allowed.first() else {
        return Err(ApiError::Forbidden(
            "no directory is allowed for reloads (control.reload_dirs: none exists)".into(),
        ));
    };
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        first.join(p)
    };
    let real = full
        .canonicalize()
        .map_err(|e| ApiError::BadRequest(format!("reading {shown}: {e}")))?;
    if !allowed.iter().any(|d| real.starts_with(d)) {
        let dirs: Vec<String> = allowed.iter().map(|d| d.display().to_string()).collect();
        return Err(ApiError::Forbidden(format!(
            "reload path '{shown}' (resolved: {}) is outside the directories reloads may read from ({}); see control.reload_dirs",
            real.display(),
            dirs.join(", ")
        )));
    }
    Ok(real)
}

/// Whether going from `old` to `new` changes more than tables (and so needs a rebuild). Any
/// change to a mechanism's section does.
pub fn needs_rebuild(old: &Config, new: &Config) -> bool {
    old.switch != new.switch
        || old.ports != new.ports
        || old.qos != new.qos
        || old.pfc != new.pfc
        || old.parser != new.parser
        || old.wire != new.wire
        || old.neighbors != new.neighbors
        || old.sections != new.sections
}

/// A worker's snapshot as JSON (the `/stats` body), without the mechanisms' additions
/// ([`Mechanisms::stats_json`]).
pub fn snapshot_json(worker: usize, s: &SwitchSnapshot) -> Value {
    let ports: Vec<Value> = s
        .ports
        .iter()
        .map(|p| {
            let queues: Vec<Value> = p
                .classes
                .iter()
                .enumerate()
                .filter(|(_, c)| c.enq_pkts != 0 || c.drops != 0)
                .map(|(class, c)| {
                    json!({
                        "class": class,
                        "depth_bytes": c.depth_bytes,
                        "max_depth_bytes": c.max_depth_bytes,
                        "enq_pkts": c.enq_pkts,
                        "deq_pkts": c.deq_pkts,
                        "drops": c.drops,
                        "ecn_marks": c.ecn_marks,
                    })
                })
                .collect();
            json!({
                "id": p.id,
                "name": p.name,
                "rx_pkts": p.stats.rx_pkts,
                "rx_bytes": p.stats.rx_bytes,
                "tx_pkts": p.stats.tx_pkts,
                "tx_bytes": p.stats.tx_bytes,
                "pfc_tx": p.stats.pfc_tx,
                "tx_bypassed": p.stats.tx_bypassed,
                "pfc_rx": p.stats.pfc_rx,
                "queues": queues,
            })
        })
        .collect();
    let drops: serde_json::Map<String, Value> = s
        .stats
        .drops
        .iter()
        .map(|(n, v)| (n.to_string(), json!(v)))
        .collect();
    let pipeline: serde_json::Map<String, Value> = s
        .pipeline
        .iter()
        .map(|(n, v)| (n.to_string(), json!(v)))
        .collect();
    let tables: serde_json::Map<String, Value> = s
        .tables
        .iter()
        .map(|(n, t)| {
            (
                n.to_string(),
                json!({"hits": t.hits, "misses": t.misses, "entries": t.entries,
                       "capacity": t.capacity, "full_events": t.full_events}),
            )
        })
        .collect();
    let c = &s.control;
    json!({
        "worker": worker,
        "taken_at_ns": s.taken_at,
        "ports": ports,
        "drops": drops,
        "pipeline": pipeline,
        "tables": tables,
        "generated": s.stats.generated,
        "buffer_max_bytes": s.stats.buffer_max_bytes,
        "control": {
            "applied": c.applied,
            "refused": c.refused,
            "punts": c.punts,
            "punt_drops": c.punt_drops,
            "latency_p50_ns": c.latency_hist.quantile_upper_ns(0.5),
            "latency_p99_ns": c.latency_hist.quantile_upper_ns(0.99),
            "latency_max_ns": c.latency_hist.max_ns,
        },
        "rings": {
            "command": {"len": s.command_ring.0, "capacity": s.command_ring.1},
            "punt": {"len": s.punt_ring.0, "capacity": s.punt_ring.1},
        },
    })
}

/// The management API's handle on the control thread.
#[derive(Clone)]
pub struct Backend {
    tx: mpsc::Sender<Request>,
}

/// How long an API request waits for the control thread.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

impl Backend {
    fn ask<T>(&self, make: impl FnOnce(mpsc::Sender<T>) -> Request) -> Result<T, ApiError> {
        let (tx, rx) = mpsc::channel();
        self.tx
            .send(make(tx))
            .map_err(|_| ApiError::Unavailable("the control thread has stopped".into()))?;
        rx.recv_timeout(REQUEST_TIMEOUT)
            .map_err(|_| ApiError::Unavailable("the control thread did not answer".into()))
    }
}

impl ManagementBackend for Backend {
    fn health(&self) -> Value {
        self.ask(Request::Health)
            .unwrap_or_else(|e| json!({"status": "unavailable", "error": format!("{e:?}")}))
    }
    fn stats(&self) -> Value {
        self.ask(Request::Stats)
            .unwrap_or_else(|e| json!({"error": format!("{e:?}")}))
    }
    fn tables(&self) -> Vec<String> {
        self.ask(Request::Tables).unwrap_or_default()
    }
    fn list_table(&self, table: &str, offset: usize, limit: usize) -> Result<Value, ApiError> {
        self.ask(|reply| Request::List {
            table: table.to_string(),
            offset,
            limit,
            reply,
        })?
    }
    fn insert(&self, table: &str, entry: &Value) -> Result<Value, ApiError> {
        self.ask(|reply| Request::Insert {
            table: table.to_string(),
            entry: entry.clone(),
            reply,
        })?
    }
    fn delete(&self, table: &str, key: &Value) -> Result<Value, ApiError> {
        self.ask(|reply| Request::Delete {
            table: table.to_string(),
            key: key.clone(),
            reply,
        })?
    }
    fn reload(&self, path: Option<&Path>) -> Result<Value, ApiError> {
        self.ask(|reply| Request::Reload {
            path: path.map(Path::to_path_buf),
            reply,
        })?
    }
}
