//! `longhaul run`: the live appliance. Builds the switch and its ports from the config, starts
//! the worker, the control thread, the management API and the metrics endpoint, and stops
//! cleanly when the stop flag is set (SIGINT/SIGTERM in the CLI), returning the final counters.
//!
//! This slice runs one worker (one lcore's switch) over pcap, memory or null ports; DPDK ports
//! and several sharded workers come with the DPDK issue.

use crate::baseline::control::BaselineControl;
use crate::baseline::Baseline;
use crate::build::{heap_pool, switch_spec};
use crate::live::{run_worker, Swap, SwapSlot, WorkerOptions, WorkerSummary};
pub use crate::platform::run_on_platform;
use crate::spray::control::SprayControl;
use crate::spray::tor::SprayTor;
use crate::themis::control::ThemisControl;
use crate::themis::esw::ThemisEsw;
use longhaul_control::api::{resolve_token, ApiServer, ManagementBackend};
use longhaul_control::config::{Config, PipelineKind, PortIo};
use longhaul_control::metrics::{Metrics, MetricsServer};
use longhaul_control::plane::{ControlPlane, WorkerHandle};
use longhaul_dataplane::control::mono_ns;
use longhaul_dataplane::engine::{Pipeline, Switch, SwitchSnapshot};
use longhaul_dataplane::packet::{BufPool, HeapPool};
use longhaul_dataplane::port::{NullPort, PcapPort, Port};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Called with the management API's and the metrics endpoint's addresses once both listen.
pub type OnReady = Arc<dyn Fn(SocketAddr, Option<SocketAddr>) + Send + Sync>;

/// Options of a live run beyond the config.
#[derive(Clone)]
pub struct RunOptions {
    pub stop: Arc<AtomicBool>,
    /// Stop once every rx is exhausted and the switch is empty (pcap runs).
    pub until_idle: bool,
    /// Override `[control] api_listen` (tests use port 0).
    pub api_listen: Option<SocketAddr>,
    /// Override `[control] metrics_listen`; `Some(None)` turns metrics off.
    pub metrics_listen: Option<Option<SocketAddr>>,
    /// Called once the API and metrics are listening, with their addresses.
    pub on_ready: Option<OnReady>,
}

impl RunOptions {
    pub fn new(stop: Arc<AtomicBool>) -> Self {
        RunOptions {
            stop,
            until_idle: false,
            api_listen: None,
            metrics_listen: None,
            on_ready: None,
        }
    }
}

/// What a live run reports when it stops.
pub struct RunReport {
    pub worker: WorkerSummary,
    pub snapshot: SwitchSnapshot,
    pub api_addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
}

/// Where packets live and how ports open: heap buffers with pcap/null ports ([`HeapPlatform`]),
/// or DPDK mbufs with ethdev ports (the `dpdk` feature).
pub trait Platform: Send + 'static {
    type Pool: BufPool + Send + 'static;
    /// The buffer pool of a switch built from `cfg`.
    fn pool(&mut self, cfg: &Config) -> Result<Self::Pool, String>;
    /// The ports of `cfg`, in port order. Errors name the port.
    fn ports(&mut self, cfg: &Config) -> Result<Ports<Self::Pool>, String>;
    /// Where the worker runs (DPDK: a pinned worker lcore).
    fn placement(&self) -> crate::platform::Placement {
        crate::platform::Placement::Thread
    }
}

/// A worker's ports, index i = the switch's port index i.
pub type Ports<P> = Vec<Box<dyn Port<P> + Send>>;

/// Heap buffers; pcap and null ports.
pub struct HeapPlatform;

impl Platform for HeapPlatform {
    type Pool = HeapPool;
    fn pool(&mut self, cfg: &Config) -> Result<HeapPool, String> {
        Ok(heap_pool(cfg))
    }
    fn ports(&mut self, cfg: &Config) -> Result<Ports<HeapPool>, String> {
        open_ports(cfg)
    }
}

/// Open the ports of `cfg`, in port order. Errors name the port and the file.
pub fn open_ports(cfg: &Config) -> Result<Ports<HeapPool>, String> {
    let start = mono_ns();
    let mut ports: Vec<Box<dyn Port<HeapPool> + Send>> = Vec::new();
    for p in &cfg.ports {
        let port: Box<dyn Port<HeapPool> + Send> = match &p.io {
            PortIo::None => Box::new(NullPort::default()),
            PortIo::Pcap {
                rx,
                tx,
                rx_loop,
                pace,
            } => Box::new(
                PcapPort::open(rx.as_deref(), tx.as_deref(), *rx_loop, *pace, start)
                    .map_err(|e| format!("port '{}': {e}", p.name))?,
            ),
            PortIo::Memory => {
                return Err(format!(
                    "port '{}': io kind \"memory\" is for in-process tests; use \"pcap\" or \"none\" with `longhaul run`",
                    p.name
                ))
            }
            PortIo::Dpdk { device, .. } => {
                return Err(format!(
                    "port '{}': io kind \"dpdk\" (device {device}) is not a heap-platform port (run_on_platform opens it with the dpdk feature)",
                    p.name
                ))
            }
        };
        ports.push(port);
    }
    Ok(ports)
}

/// Run the appliance described by the config at `path` until `opts.stop` (or idle).
pub fn run(path: &Path, opts: RunOptions) -> Result<RunReport, String> {
    let cfg = Config::load(path).map_err(|e| e.to_string())?;
    match cfg.switch.pipeline {
        PipelineKind::Baseline => {
            let handler = BaselineControl::new(&cfg);
            run_on_platform(cfg, path.to_path_buf(), Baseline::new, handler, opts)
        }
        PipelineKind::Themis => {
            let handler = ThemisControl::new(&cfg);
            run_on_platform(cfg, path.to_path_buf(), ThemisEsw::new, handler, opts)
        }
        PipelineKind::Spray => {
            let handler = SprayControl::new(&cfg);
            run_on_platform(cfg, path.to_path_buf(), SprayTor::new, handler, opts)
        }
    }
}

/// The port I/O of `a` and `b` is the same (same ports, same files): a rebuild keeps the open
/// ports instead of reopening them (a reopened pcap tx file would start over).
fn same_port_io(a: &Config, b: &Config) -> bool {
    a.ports.len() == b.ports.len()
        && a.ports
            .iter()
            .zip(b.ports.iter())
            .all(|(x, y)| x.id == y.id && x.name == y.name && x.io == y.io)
}

/// Run a switch of pipeline `L` on platform `X` with control handler `H`.
pub fn run_with<X, L, H>(
    cfg: Config,
    path: PathBuf,
    mut platform: X,
    make_pipeline: fn(&Config) -> L,
    handler: H,
    opts: RunOptions,
) -> Result<RunReport, String>
where
    X: Platform,
    <X::Pool as BufPool>::Buf: Send,
    L: Pipeline<X::Pool, Command = H::Command> + Send + 'static,
    H: longhaul_control::plane::PipelineControl,
{
    let mut ports = platform.ports(&cfg)?;
    let pool = platform.pool(&cfg)?;
    let mut sw = Switch::new(switch_spec(&cfg), pool, make_pipeline(&cfg));
    let snapshot = Arc::new(Mutex::new(SwitchSnapshot::default()));
    let slot: SwapSlot<X::Pool, L> = Arc::new(Mutex::new(None));
    let stop = opts.stop.clone();
    let worker_handle = WorkerHandle {
        channel: sw.channel(),
        snapshot: snapshot.clone(),
    };

    // Metrics first, then the API: a bad address fails before any packet moves.
    let metrics_listen = opts.metrics_listen.unwrap_or(cfg.control.metrics_listen);
    let (metrics, metrics_server) = match metrics_listen {
        Some(addr) => {
            let m = Metrics::install()?;
            let server = MetricsServer::start(addr, m.clone())?;
            (Some(m), Some(server))
        }
        None => (None, None),
    };
    let metrics_addr = metrics_server.as_ref().map(|s| s.local_addr());
    let stats_interval = Duration::from_millis(cfg.control.stats_interval_ms);
    let api_listen = opts.api_listen.unwrap_or(cfg.control.api_listen);
    let token = resolve_token(cfg.control.api_token.as_deref());
    let mut running = cfg.clone();
    let (mut plane, backend) = ControlPlane::new(
        cfg,
        path,
        handler,
        vec![worker_handle],
        metrics,
        stop.clone(),
    );
    // A reload that changes the switch's structure builds a new switch (and new port I/O if
    // that changed) here, on the control thread, and leaves it for the worker to swap in.
    let (rebuild_slot, rebuild_snapshot) = (slot.clone(), snapshot.clone());
    let placement = platform.placement();
    plane.set_rebuild(Box::new(move |new: &Config| {
        let ports = if same_port_io(&running, new) {
            None
        } else {
            Some(platform.ports(new)?)
        };
        let sw = Switch::new(switch_spec(new), platform.pool(new)?, make_pipeline(new));
        let handle = WorkerHandle {
            channel: sw.channel(),
            snapshot: rebuild_snapshot.clone(),
        };
        let mut pending = rebuild_slot
            .lock()
            .map_err(|_| "the worker's swap slot is poisoned".to_string())?;
        *pending = Some(Swap { switch: sw, ports });
        running = new.clone();
        Ok(vec![handle])
    }));
    let backend: Arc<dyn ManagementBackend> = Arc::new(backend);
    let api = ApiServer::start(api_listen, token, backend)?;
    let api_addr = api.local_addr();
    if let Some(f) = &opts.on_ready {
        f(api_addr, metrics_addr);
    }

    let control = std::thread::Builder::new()
        .name("longhaul-control".into())
        .spawn(move || plane.run())
        .map_err(|e| format!("starting the control thread: {e}"))?;

    let wopts = WorkerOptions {
        stop: stop.clone(),
        snapshot: snapshot.clone(),
        stats_interval,
        until_idle: opts.until_idle,
        idle_sleep: Duration::from_micros(20),
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let job = Box::new(move || {
        let s = run_worker(&mut sw, &mut ports, &wopts, Some(&slot));
        drop(ports); // DPDK ports stop and close on the worker's lcore
        let _ = done_tx.send((s, sw));
    });
    let worker = crate::platform::spawn_worker(placement, "longhaul-worker0", job);
    let (summary, sw) = match worker.and_then(|w| w.join()) {
        Ok(()) => done_rx
            .recv()
            .map_err(|_| "the worker stopped without a result".to_string())?,
        Err(e) => {
            stop.store(true, Ordering::SeqCst);
            let _ = control.join();
            return Err(e);
        }
    };
    // The worker stopped (signal or idle): stop the rest.
    stop.store(true, Ordering::SeqCst);
    let _ = control.join();
    drop(api);
    drop(metrics_server);
    let mut final_snap = SwitchSnapshot::default();
    sw.snapshot_into(mono_ns(), &mut final_snap);
    Ok(RunReport {
        worker: summary,
        snapshot: final_snap,
        api_addr,
        metrics_addr,
    })
}
