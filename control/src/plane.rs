//! The control thread (DESIGN.md section 3): owns the configuration and the master copy of every
//! table, talks to each worker only through its bounded lock-free rings (commands down, punts
//! up), serves the management API's requests, and publishes the workers' counter snapshots.
//!
//! It is pipeline-agnostic: a pipeline supplies a [`PipelineControl`] (its tables' master copy,
//! its punt handler, how a config reload maps to table commands), and the registry
//! ([`Mechanisms`]) parses reloaded configs and adds the mechanisms' own stats and metrics.

use crate::api::{ApiError, ManagementBackend};
use crate::config::{read_config_file, Config, ReadConfigError};
use crate::mechanisms::Mechanisms;
use crate::metrics::Metrics;
use longhaul_dataplane::control::{mono_ns, Channel, Command, Envelope, Punt, PuntHandler};
use longhaul_dataplane::engine::SwitchSnapshot;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
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

/// A request as queued to the control thread: the request and its ticket, which the control
/// thread takes before acting and the API cancels when it stops waiting (never both).
pub struct Ticketed {
    ticket: Arc<AtomicU8>,
    request: Request,
}

const PENDING: u8 = 0;
const TAKEN: u8 = 1;
const CANCELLED: u8 = 2;

/// What the API reads without asking the control thread: when the control thread last ran.
#[derive(Debug)]
pub struct Liveness {
    /// `mono_ns()` of the control thread's last loop iteration.
    control_ns: AtomicU64,
    /// How long the control thread or a worker may go without progress before `/health` says
    /// so (503), ns.
    bound_ns: u64,
}

impl Liveness {
    fn beat(&self) {
        self.control_ns.store(mono_ns(), Ordering::Relaxed);
    }

    /// Nanoseconds since the control thread last ran.
    pub fn control_age_ns(&self) -> u64 {
        mono_ns().saturating_sub(self.control_ns.load(Ordering::Relaxed))
    }
}

/// How long the control thread or a worker may make no progress before `/health` answers 503:
/// three stats intervals, and at least [`MIN_HEALTH_BOUND`].
pub fn health_bound(stats_interval_ms: u64) -> Duration {
    Duration::from_millis(stats_interval_ms.saturating_mul(3)).max(MIN_HEALTH_BOUND)
}

/// The least [`health_bound`].
pub const MIN_HEALTH_BOUND: Duration = Duration::from_secs(2);

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
    requests: mpsc::Receiver<Ticketed>,
    /// The file the process started with: what a reload without a path reads.
    start_path: PathBuf,
    liveness: Arc<Liveness>,
    /// `mono_ns()` when the current workers were started (a worker that has not published a
    /// snapshot yet is measured from here).
    workers_since: u64,
    metrics: Option<Metrics>,
    started: Instant,
    seq: u64,
    stop: Arc<AtomicBool>,
    /// Commands the rings refused (full for longer than COMMAND_RING_WAIT).
    pub commands_lost: u64,
    pub reloads: u64,
    /// Reloads that rebuilt the switch (its counters restarted).
    pub rebuilds: u64,
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
        let stop_flag = stop.clone();
        let reload_dirs = allowed_reload_dirs(&cfg, &cfg_path);
        let liveness = Arc::new(Liveness {
            control_ns: AtomicU64::new(mono_ns()),
            bound_ns: health_bound(cfg.control.stats_interval_ms).as_nanos() as u64,
        });
        (
            ControlPlane {
                cfg,
                start_path: cfg_path.clone(),
                cfg_path,
                liveness: liveness.clone(),
                workers_since: mono_ns(),
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
                rebuilds: 0,
                rebuild: None,
                port_status: Vec::new(),
                links: Vec::new(),
                refused_seen: 0,
            },
            Backend {
                tx,
                liveness,
                stop: stop_flag,
            },
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
        // Every series (and the heartbeat) exists from the start.
        self.publish_metrics();
        while !self.stop.load(Ordering::Relaxed) {
            self.liveness.beat();
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
            self.take(r);
        }
        while let Ok(r) = self.requests.try_recv() {
            self.take(r);
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

    /// Acts on a request unless the API stopped waiting for it (then it is dropped: a request
    /// answered 503 is never applied later).
    fn take(&mut self, t: Ticketed) {
        if t.ticket
            .compare_exchange(PENDING, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.handle(t.request);
        } else {
            tracing::debug!("a request the API stopped waiting for was dropped, not applied");
        }
    }

    /// Workers whose snapshot is older than the health bound: (worker, seconds since).
    fn stalled_workers(&self) -> Vec<(usize, f64)> {
        let now = mono_ns();
        self.snapshots()
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let age = now.saturating_sub(s.taken_at.max(self.workers_since));
                (age > self.liveness.bound_ns).then_some((i, age as f64 / 1e9))
            })
            .collect()
    }

    fn handle(&mut self, r: Request) {
        match r {
            Request::Health(reply) => {
                let stalled = self.stalled_workers();
                let status = if stalled.is_empty() { "ok" } else { "stalled" };
                let stalled: Vec<Value> = stalled
                    .iter()
                    .map(|(w, s)| json!({"worker": w, "seconds_since_progress": s}))
                    .collect();
                let _ = reply.send(json!({
                    "status": status,
                    "stalled_workers": stalled,
                    "health_bound_s": self.liveness.bound_ns as f64 / 1e9,
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
            None => self.start_path.clone(),
            Some(p) => check_reload_path(p, &self.reload_dirs)?,
        };
        // Bounded: a regular file of at most control.reload_max_bytes, opened without blocking.
        let limit = self.cfg.control.reload_max_bytes;
        let text = read_config_file(&path, limit).map_err(|e| {
            let hint = match e {
                ReadConfigError::TooLarge { .. } => " (control.reload_max_bytes)",
                _ => "",
            };
            ApiError::BadRequest(format!("{}: {e}{hint}", path.display()))
        })?;
        let new =
            Config::parse_all_with(&text, &path, self.mechanisms.schema()).map_err(|errs| {
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
                self.workers_since = mono_ns();
                self.rebuilds += 1;
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
        let links: serde_json::Map<String, Value> = self
            .port_status
            .iter()
            .map(|p| {
                (
                    p.name().to_owned(),
                    json!(if p.link_up() { "up" } else { "down" }),
                )
            })
            .collect();
        json!({
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "commands_lost": self.commands_lost,
            // A reload that rebuilt the switch restarts the workers' counters (the metrics add
            // up across it): `rebuilds` says how many times that happened.
            "reloads": self.reloads,
            "rebuilds": self.rebuilds,
            "links": links,
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
        .enumerate()
        .map(|(i, p)| {
            let io = s.io.get(i).copied().unwrap_or_default();
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
                "rx_nobuf": io.rx_nobuf,
                "rx_errors": io.rx_errors,
                "tx_errors": io.tx_errors,
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
        "loops": s.loops,
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
    tx: mpsc::Sender<Ticketed>,
    liveness: Arc<Liveness>,
    stop: Arc<AtomicBool>,
}

/// How long an API request waits for the control thread to take it; past this it is cancelled
/// (503, not applied). A request the control thread has taken is waited for until it answers
/// (what it does is bounded: reads of at most `control.reload_max_bytes` of a regular file,
/// ring waits of [`COMMAND_RING_WAIT`]), within the HTTP layer's deadline.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// `/health`'s wait for the control thread (it answers at once when it runs).
const HEALTH_TIMEOUT: Duration = Duration::from_secs(1);
/// How often a waiting request looks at the stop flag.
const POLL: Duration = Duration::from_millis(50);

impl Backend {
    fn ask<T>(
        &self,
        timeout: Duration,
        make: impl FnOnce(mpsc::Sender<T>) -> Request,
    ) -> Result<T, ApiError> {
        let (tx, rx) = mpsc::channel();
        let ticket = Arc::new(AtomicU8::new(PENDING));
        self.tx
            .send(Ticketed {
                ticket: ticket.clone(),
                request: make(tx),
            })
            .map_err(|_| ApiError::Unavailable("the control thread has stopped".into()))?;
        let since = Instant::now();
        loop {
            match rx.recv_timeout(POLL) {
                Ok(v) => return Ok(v),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ApiError::Unavailable(
                        "the control thread stopped before answering".into(),
                    ))
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let stopping = self.stop.load(Ordering::Relaxed);
            if (stopping || since.elapsed() >= timeout)
                && ticket
                    .compare_exchange(PENDING, CANCELLED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                let why = if stopping {
                    "longhaul is stopping".to_owned()
                } else {
                    format!(
                        "the control thread did not take the request within {} ms",
                        timeout.as_millis()
                    )
                };
                return Err(ApiError::Unavailable(format!(
                    "{why}; the request was cancelled and will not be applied"
                )));
            }
        }
    }
}

impl ManagementBackend for Backend {
    fn health(&self) -> Value {
        let age = self.liveness.control_age_ns();
        if age > self.liveness.bound_ns {
            return json!({
                "status": "stalled",
                "error": format!(
                    "the control thread has made no progress for {:.1} s (bound {:.1} s)",
                    age as f64 / 1e9,
                    self.liveness.bound_ns as f64 / 1e9
                ),
            });
        }
        self.ask(HEALTH_TIMEOUT, Request::Health)
            .unwrap_or_else(|e| json!({"status": "unavailable", "error": e.message()}))
    }
    fn stats(&self) -> Value {
        self.ask(REQUEST_TIMEOUT, Request::Stats)
            .unwrap_or_else(|e| json!({"error": format!("{e:?}")}))
    }
    fn tables(&self) -> Vec<String> {
        self.ask(REQUEST_TIMEOUT, Request::Tables)
            .unwrap_or_default()
    }
    fn list_table(&self, table: &str, offset: usize, limit: usize) -> Result<Value, ApiError> {
        self.ask(REQUEST_TIMEOUT, |reply| Request::List {
            table: table.to_string(),
            offset,
            limit,
            reply,
        })?
    }
    fn insert(&self, table: &str, entry: &Value) -> Result<Value, ApiError> {
        self.ask(REQUEST_TIMEOUT, |reply| Request::Insert {
            table: table.to_string(),
            entry: entry.clone(),
            reply,
        })?
    }
    fn delete(&self, table: &str, key: &Value) -> Result<Value, ApiError> {
        self.ask(REQUEST_TIMEOUT, |reply| Request::Delete {
            table: table.to_string(),
            key: key.clone(),
            reply,
        })?
    }
    fn reload(&self, path: Option<&Path>) -> Result<Value, ApiError> {
        self.ask(REQUEST_TIMEOUT, |reply| Request::Reload {
            path: path.map(Path::to_path_buf),
            reply,
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GenericSchema;

    struct Generic;
    impl Mechanisms for Generic {
        fn schema(&self) -> &dyn crate::config::Schema {
            &GenericSchema
        }
    }

    /// A pipeline without tables.
    struct NoTables;
    impl PipelineControl for NoTables {
        type Command = ();
        fn on_punt(&mut self, _: &Punt, _: &mut dyn FnMut(Command<()>)) {}
        fn tables(&self) -> Vec<String> {
            Vec::new()
        }
        fn list(&self, t: &str, _: usize, _: usize) -> Result<Value, ApiError> {
            Err(ApiError::NotFound(t.into()))
        }
        fn insert(&mut self, t: &str, _: &Value) -> Result<(Value, Vec<()>), ApiError> {
            Err(ApiError::NotFound(t.into()))
        }
        fn delete(&mut self, t: &str, _: &Value) -> Result<(Value, Vec<()>), ApiError> {
            Err(ApiError::NotFound(t.into()))
        }
        fn reload(&mut self, _: &Config, _: &Config) -> Result<ReloadPlan<()>, ApiError> {
            Ok(ReloadPlan::Tables(Vec::new()))
        }
    }

    fn plane(
        workers: usize,
    ) -> (
        ControlPlane<NoTables>,
        Backend,
        Vec<Arc<Mutex<SwitchSnapshot>>>,
    ) {
        let snaps: Vec<_> = (0..workers)
            .map(|_| Arc::new(Mutex::new(SwitchSnapshot::default())))
            .collect();
        let handles = snaps
            .iter()
            .map(|s| WorkerHandle {
                channel: Channel::new(16, 16),
                snapshot: s.clone(),
            })
            .collect();
        let (p, b) = ControlPlane::new(
            Config::parse_all_with(
                "[switch]\nname = \"t\"\n\n[[ports]]\nid = 0\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\nrate_gbps = 100\n",
                Path::new("start.toml"),
                &GenericSchema,
            )
            .unwrap(),
            PathBuf::from("start.toml"),
            Arc::new(Generic),
            NoTables,
            handles,
            None,
            Arc::new(AtomicBool::new(false)),
        );
        (p, b, snaps)
    }

    #[test]
    fn health_is_stalled_when_a_worker_or_the_control_thread_makes_no_progress() {
        let (mut p, b, snaps) = plane(2);
        // A bound of 300 ms for the test: far above a step's time on a loaded 2-core machine
        // (20 ms failed there), far below the sleeps that make something stale.
        let live = Arc::new(Liveness {
            control_ns: AtomicU64::new(mono_ns()),
            bound_ns: 300_000_000,
        });
        p.liveness = live.clone();
        let b = Backend {
            liveness: live.clone(),
            ..b
        };
        for s in &snaps {
            s.lock().unwrap().taken_at = mono_ns();
        }
        let (tx, rx) = mpsc::channel();
        p.handle(Request::Health(tx));
        assert_eq!(rx.recv().unwrap()["status"], "ok");
        // Worker 0 goes on publishing, worker 1 stops.
        std::thread::sleep(Duration::from_millis(600));
        snaps[0].lock().unwrap().taken_at = mono_ns();
        let (tx, rx) = mpsc::channel();
        p.handle(Request::Health(tx));
        let v = rx.recv().unwrap();
        assert_eq!(v["status"], "stalled", "{v}");
        assert_eq!(v["stalled_workers"].as_array().unwrap().len(), 1, "{v}");
        assert_eq!(v["stalled_workers"][0]["worker"], 1, "{v}");
        // The control thread has not run for 600 ms: the API answers without asking it (asking
        // would wait HEALTH_TIMEOUT, 1 s, for an answer nobody gives).
        let t = Instant::now();
        let v = b.health();
        assert_eq!(v["status"], "stalled", "{v}");
        assert!(t.elapsed() < HEALTH_TIMEOUT / 2);
        // Once it runs again, health asks it (and it answers here, by hand).
        live.beat();
        let asker = std::thread::spawn(move || b.health());
        std::thread::sleep(Duration::from_millis(20));
        for s in &snaps {
            s.lock().unwrap().taken_at = mono_ns();
        }
        p.step(Duration::from_millis(500));
        assert_eq!(asker.join().unwrap()["status"], "ok");
    }

    #[test]
    fn a_request_the_control_thread_does_not_take_in_time_is_cancelled_not_applied_later() {
        let (mut p, b, _) = plane(1);
        // Nobody runs the control thread: the request times out (503) ...
        let r = b.ask(Duration::from_millis(100), |reply| Request::Reload {
            path: None,
            reply,
        });
        match r {
            Err(ApiError::Unavailable(m)) => assert!(m.contains("will not be applied"), "{m}"),
            other => panic!("{other:?}"),
        }
        // ... and when the thread comes round to it, it is dropped (a reload of start.toml
        // would have failed loudly and counted; nothing happens).
        p.step(Duration::from_millis(10));
        assert_eq!(p.reloads, 0);
    }

    #[test]
    fn a_reload_without_a_path_reads_the_file_the_process_started_with() {
        let dir = std::env::temp_dir().join(format!("longhaul-plane-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let start = dir.join("start.toml");
        let other = dir.join("other.toml");
        let text = "[switch]\nname = \"t\"\n\n[[ports]]\nid = 0\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\nrate_gbps = 100\n";
        std::fs::write(&start, text).unwrap();
        std::fs::write(&other, text).unwrap();
        let (mut p, _b, _) = plane(1);
        p.start_path = start.clone();
        p.cfg_path = start.clone();
        p.reload_dirs = vec![dir.canonicalize().unwrap()];
        let v = p.reload(Some(&other)).unwrap();
        assert!(v["reloaded"].as_str().unwrap().ends_with("other.toml"));
        let v = p.reload(None).unwrap();
        assert!(
            v["reloaded"].as_str().unwrap().ends_with("start.toml"),
            "{v}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
