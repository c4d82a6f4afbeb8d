//! `longhaul run`: the live appliance. Builds the switch and its ports from the config, starts
//! the worker, the control thread, the management API and the metrics endpoint, and stops
//! cleanly when the stop flag is set (SIGINT/SIGTERM in the CLI), returning the final counters.
//!
//! Each worker runs its own switch over its view of the ports: pcap and null ports run on one
//! worker; DPDK ports on `[dpdk] workers` pinned lcores, flows sharded over them by the
//! unordered IP pair (hardware RSS or software dispatch, `longhaul_dataplane::dispatch`). The
//! control thread broadcasts every table change to all of them and sums their counters.

use crate::build::worker_switch_spec;
use crate::live::{run_worker, Swap, SwapSlot, WorkerOptions, WorkerSummary};
use crate::mechanism::MechanismSet;
use crate::platform::{spawn_worker, uses_dpdk, HeapPlatform, Platform, PlatformPipeline};
use crate::Error;
use longhaul_control::api::{resolve_token, ApiServer, ManagementBackend};
use longhaul_control::config::Config;
use longhaul_control::metrics::{Metrics, MetricsServer};
use longhaul_control::plane::{ControlPlane, PipelineControl, WorkerHandle};
use longhaul_dataplane::control::mono_ns;
use longhaul_dataplane::engine::{Admission, Pipeline, Switch, SwitchSnapshot};
use longhaul_dataplane::packet::BufPool;
use longhaul_dataplane::port::PortIoStats;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// Print what the run reserved (pool, tables, resident memory) on stderr at start.
    pub report_memory: bool,
}

impl RunOptions {
    pub fn new(stop: Arc<AtomicBool>) -> Self {
        RunOptions {
            stop,
            until_idle: false,
            api_listen: None,
            metrics_listen: None,
            on_ready: None,
            report_memory: false,
        }
    }
}

/// What a live run reports when it stops.
pub struct RunReport {
    /// Every worker's summary added up (ports by index).
    pub worker: WorkerSummary,
    /// Each worker's own summary, worker 0 first.
    pub workers: Vec<WorkerSummary>,
    pub snapshot: SwitchSnapshot,
    pub api_addr: SocketAddr,
    pub metrics_addr: Option<SocketAddr>,
}

/// Run pipeline `L` (made by `make_pipeline`, controlled by `handler`) on the platform `cfg`
/// asks for: [`DpdkPlatform`](crate::dpdk::DpdkPlatform) when its ports are DPDK ports (a build
/// without the `dpdk` feature says so and stops), the heap otherwise.
pub fn run_on_platform<L, H, A, F>(
    mechanisms: Arc<dyn MechanismSet>,
    cfg: Config,
    path: PathBuf,
    make_pipeline: F,
    handler: H,
    opts: RunOptions,
) -> Result<RunReport, Error>
where
    H: PipelineControl,
    L: PlatformPipeline<H::Command>,
    A: Admission,
    F: Fn(&Config) -> L + Send + 'static,
{
    if uses_dpdk(&cfg) {
        #[cfg(feature = "dpdk")]
        {
            let platform = crate::dpdk::DpdkPlatform::new();
            return run_with::<_, L, H, A, F>(
                mechanisms,
                cfg,
                path,
                platform,
                make_pipeline,
                handler,
                opts,
            );
        }
        #[cfg(not(feature = "dpdk"))]
        {
            let p = cfg
                .ports
                .iter()
                .find(|p| matches!(p.io, longhaul_control::config::PortIo::Dpdk { .. }));
            return Err(Error::NoDpdk {
                port: p.map_or("?", |p| p.name.as_str()).to_owned(),
            });
        }
    }
    run_with::<_, L, H, A, F>(
        mechanisms,
        cfg,
        path,
        HeapPlatform,
        make_pipeline,
        handler,
        opts,
    )
}

/// A reload that reopens the ports is refused when it would leave a port that has I/O without
/// any (its traffic would stop, silently), or write a pcap capture over a file that exists (the
/// capture of this run, reopened: `{run}` is the same for every reload).
fn refuse_port_io_change(running: &Config, new: &Config) -> Result<(), String> {
    use longhaul_control::config::PortIo;
    for (i, p) in new.ports.iter().enumerate() {
        let had_io = running
            .ports
            .iter()
            .any(|o| o.name == p.name && o.io != PortIo::None);
        if had_io && p.io == PortIo::None {
            return Err(format!(
                "ports[{i}] ('{}'): the new config gives it no io, so its traffic would stop; \
                 keep its io (a port is taken out of service by a restart)",
                p.name
            ));
        }
        if let PortIo::Pcap { tx: Some(tx), .. } = &p.io {
            let path = crate::platform::expand_run(tx);
            if path.exists() {
                return Err(format!(
                    "ports[{i}].io.tx ('{}'): {} exists (this run's capture, or an earlier \
                     one) and reopening the ports would overwrite it; name a new file or move \
                     it away first",
                    p.name,
                    path.display()
                ));
            }
        }
    }
    Ok(())
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

/// What `run` would refuse in this build and environment, beyond what the config's validation
/// says (for `check-config`): errors (`run` refuses) and warnings (`run` may refuse, depending on
/// its environment at start), each a line naming the key.
pub fn run_refusals(cfg: &Config, path: &Path) -> (Vec<String>, Vec<String>) {
    use longhaul_control::api::{PLACEHOLDER_TOKEN, TOKEN_ENV};
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    for m in missing_inputs(cfg, path) {
        warnings.push(format!(
            "{m}: run refuses this config unless the file exists by then"
        ));
    }
    if !cfg!(feature = "dpdk") {
        for (i, p) in cfg.ports.iter().enumerate() {
            if matches!(p.io, longhaul_control::config::PortIo::Dpdk { .. }) {
                errors.push(format!(
                    "ports[{i}].io.kind ('{}'): \"dpdk\" needs a longhaul built with the dpdk \
                     feature, and this one is not (docs/dpdk.md): run refuses this config",
                    p.name
                ));
            }
        }
    }
    let token = resolve_token(cfg.control.api_token.as_deref());
    match token.as_deref() {
        Some(PLACEHOLDER_TOKEN) => errors.push(format!(
            "control.api_token / {TOKEN_ENV}: the placeholder '{PLACEHOLDER_TOKEN}' is refused: \
             set a secret"
        )),
        None if cfg.control.api_needs_token() => warnings.push(format!(
            "control.api_listen: {} is not loopback and no token is set (control.api_token, or \
             {TOKEN_ENV} in run's environment): run refuses to start the API without one",
            cfg.control.api_listen
        )),
        _ => {}
    }
    (errors, warnings)
}

/// The pcap inputs (`rx`) of `cfg` (read from `path`) that are not there: each as `KEY (line L,
/// column C): port 'NAME' reads FILE: ERROR`. `run` refuses to start with one (naming the config
/// file too); `check-config` warns.
pub fn missing_inputs(cfg: &Config, path: &Path) -> Vec<String> {
    use longhaul_control::config::{key_at, PortIo};
    let mut out = Vec::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        let PortIo::Pcap { rx: Some(rx), .. } = &p.io else {
            continue;
        };
        // metadata, not open: opening a FIFO would wait for a writer.
        let problem = match std::fs::metadata(rx) {
            Ok(m) if m.is_dir() => Some("a directory, not a pcap file".to_owned()),
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
        if let Some(e) = problem {
            out.push(format!(
                "{}: port '{}' reads {}: {e}",
                key_at(path, &format!("ports[{i}].io.rx")),
                p.name,
                rx.display()
            ));
        }
    }
    out
}

/// Why `run --until-idle` cannot stop by itself with `cfg` (read from `path`), naming the file,
/// the key and its line: a port whose input never ends, a pcap `rx` looped (`rx_loop = true`) or
/// a DPDK port (a NIC or vdev never says its input is over). Such a run used to go on forever
/// without a word (issue 42).
pub fn until_idle_refusal(cfg: &Config, path: &Path) -> Option<String> {
    use longhaul_control::config::{at_key, PortIo};
    cfg.ports.iter().enumerate().find_map(|(i, p)| match &p.io {
        PortIo::Pcap { rx_loop: true, .. } => Some(format!(
            "{}: rx_loop = true replays the input of port '{}' forever, and --until-idle \
             stops only when every input has ended: set rx_loop = false, or run without \
             --until-idle (SIGINT or SIGTERM stops it)",
            at_key(path, &format!("ports[{i}].io.rx_loop")),
            p.name
        )),
        PortIo::Dpdk { .. } => Some(format!(
            "{}: a DPDK port's input (port '{}') never ends, so --until-idle would never stop: \
             run without --until-idle (SIGINT or SIGTERM stops it)",
            at_key(path, &format!("ports[{i}].io.kind")),
            p.name
        )),
        _ => None,
    })
}

/// How long a stopping run waits for the control thread.
const CONTROL_JOIN: Duration = Duration::from_millis(300);

/// Run the switches of pipeline `L` on platform `X` with control handler `H`: one per worker.
pub fn run_with<X, L, H, A, F>(
    mechanisms: Arc<dyn MechanismSet>,
    cfg: Config,
    path: PathBuf,
    mut platform: X,
    make_pipeline: F,
    handler: H,
    opts: RunOptions,
) -> Result<RunReport, Error>
where
    X: Platform,
    <X::Pool as BufPool>::Buf: Send,
    L: Pipeline<X::Pool, Command = H::Command> + Send + 'static,
    H: PipelineControl,
    A: Admission,
    F: Fn(&Config) -> L + Send + 'static,
{
    let views = platform.ports(&cfg).map_err(Error::Start)?;
    let n = views.len().max(1);
    let mut workers = Vec::with_capacity(n);
    for (i, ports) in views.into_iter().enumerate() {
        let sw: Switch<X::Pool, L, A> = Switch::with_admission(
            worker_switch_spec(&cfg, mechanisms.as_ref(), i, n),
            platform.pool(&cfg).map_err(Error::Start)?,
            make_pipeline(&cfg),
        );
        let snapshot = Arc::new(Mutex::new(SwitchSnapshot::default()));
        let slot: SwapSlot<X::Pool, L, A> = Arc::new(Mutex::new(None));
        workers.push((sw, ports, snapshot, slot));
    }
    if opts.report_memory {
        let mut snap = SwitchSnapshot::default();
        if let Some((sw, ..)) = workers.first() {
            sw.snapshot_into(0, &mut snap);
        }
        for line in memory_report(&platform.pool_note(&cfg), n, &snap) {
            longhaul_control::logs::note(&format!("memory: {line}"));
        }
    }
    let stop = opts.stop.clone();
    let handles: Vec<WorkerHandle<H::Command>> = workers
        .iter()
        .map(|(sw, _, snapshot, _)| WorkerHandle {
            channel: sw.channel(),
            snapshot: snapshot.clone(),
        })
        .collect();

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
    let api_hosts = cfg.control.api_hosts.clone();
    let mut running = cfg.clone();
    let (mut plane, backend) = ControlPlane::new(
        cfg,
        path,
        mechanisms.clone().control(),
        handler,
        handles,
        metrics,
        stop.clone(),
    );
    plane.set_port_status(platform.port_status());
    // A reload that changes the switch's structure builds new switches (and new port I/O if
    // that changed) here, on the control thread, and leaves them for the workers to swap in.
    type Slots<P, L, A> = Vec<(SwapSlot<P, L, A>, Arc<Mutex<SwitchSnapshot>>)>;
    let rebuild_slots: Slots<X::Pool, L, A> = workers
        .iter()
        .map(|(_, _, snapshot, slot)| (slot.clone(), snapshot.clone()))
        .collect();
    let placements: Vec<_> = (0..n).map(|i| platform.placement(i)).collect();
    plane.set_rebuild(Box::new(move |new: &Config| {
        let mut ports = if same_port_io(&running, new) {
            None
        } else {
            refuse_port_io_change(&running, new)?;
            let v = platform.ports(new)?;
            if v.len() != rebuild_slots.len() {
                return Err(format!(
                    "[dpdk] workers: {} running, {} in the new config: restart longhaul to change \
                     the number of workers",
                    rebuild_slots.len(),
                    v.len()
                ));
            }
            Some(v.into_iter())
        };
        let mut swaps = Vec::with_capacity(rebuild_slots.len());
        let mut handles = Vec::with_capacity(rebuild_slots.len());
        for (i, (_, snapshot)) in rebuild_slots.iter().enumerate() {
            let sw: Switch<X::Pool, L, A> = Switch::with_admission(
                worker_switch_spec(new, mechanisms.as_ref(), i, rebuild_slots.len()),
                platform.pool(new)?,
                make_pipeline(new),
            );
            handles.push(WorkerHandle {
                channel: sw.channel(),
                snapshot: snapshot.clone(),
            });
            swaps.push(Swap {
                switch: sw,
                ports: ports.as_mut().and_then(|p| p.next()),
            });
        }
        for ((slot, _), swap) in rebuild_slots.iter().zip(swaps) {
            let mut pending = slot
                .lock()
                .map_err(|_| "a worker's swap slot is poisoned".to_string())?;
            *pending = Some(Box::new(swap));
        }
        running = new.clone();
        Ok(handles)
    }));
    let backend: Arc<dyn ManagementBackend> = Arc::new(backend);
    let api = ApiServer::start_with_hosts(api_listen, token, backend, api_hosts)?;
    let api_addr = api.local_addr();
    if let Some(f) = &opts.on_ready {
        f(api_addr, metrics_addr);
    }

    let control = std::thread::Builder::new()
        .name("longhaul-control".into())
        .spawn(move || plane.run())
        .map_err(|error| Error::Spawn {
            what: "the control thread",
            error,
        })?;

    // Several workers stop together once all are idle (`WorkerOptions::idle_flag`).
    let idle_flags: Vec<Arc<AtomicBool>> =
        (0..n).map(|_| Arc::new(AtomicBool::new(false))).collect();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let mut joins = Vec::with_capacity(n);
    let mut failed = None;
    for (i, (mut sw, mut ports, snapshot, slot)) in workers.into_iter().enumerate() {
        let wopts = WorkerOptions {
            stop: stop.clone(),
            snapshot,
            stats_interval,
            until_idle: opts.until_idle,
            idle_sleep: Duration::from_micros(20),
            idle_flag: (n > 1).then(|| idle_flags[i].clone()),
        };
        let done_tx = done_tx.clone();
        let job = Box::new(move || {
            let s = run_worker(&mut sw, &mut ports, &wopts, Some(&slot));
            drop(ports); // DPDK queues stop and close on the worker's lcore
            let _ = done_tx.send((i, s, sw));
        });
        match spawn_worker(placements[i], &format!("longhaul-worker{i}"), job) {
            Ok(j) => joins.push(j),
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    drop(done_tx);
    if failed.is_none() && n > 1 && opts.until_idle {
        watch_idle(&stop, &idle_flags, joins.len());
    }
    let mut errors: Vec<String> = failed.into_iter().collect();
    if !errors.is_empty() {
        stop.store(true, Ordering::SeqCst);
    }
    for j in joins {
        if let Err(e) = j.join() {
            stop.store(true, Ordering::SeqCst);
            errors.push(e);
        }
    }
    // The workers stopped (signal, idle or error): stop the rest.
    stop.store(true, Ordering::SeqCst);
    // The control thread sees the flag within an iteration; one stuck in a long action (a
    // rebuild opening ports) is not waited for past CONTROL_JOIN: the process exits anyway.
    let deadline = Instant::now() + CONTROL_JOIN;
    while !control.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    if control.is_finished() {
        let _ = control.join();
    } else {
        tracing::warn!(
            waited_ms = CONTROL_JOIN.as_millis() as u64,
            "the control thread did not stop in time; exiting without it"
        );
    }
    drop(api);
    drop(metrics_server);
    if let Some(e) = errors.into_iter().next() {
        return Err(Error::Worker(e));
    }
    type Done<S> = Vec<(usize, WorkerSummary, S)>;
    let mut done: Done<Switch<X::Pool, L, A>> = done_rx.iter().collect();
    if done.len() != n {
        return Err(Error::Worker("a worker stopped without a result".into()));
    }
    done.sort_by_key(|(i, _, _)| *i);
    let mut snaps = Vec::with_capacity(n);
    let mut summaries = Vec::with_capacity(n);
    for (_, s, sw) in &done {
        let mut snap = SwitchSnapshot::default();
        sw.snapshot_into(mono_ns(), &mut snap);
        snaps.push(snap);
        summaries.push(s.clone());
    }
    Ok(RunReport {
        worker: sum_summaries(&summaries),
        workers: summaries,
        snapshot: sum_snapshots(snaps),
        api_addr,
        metrics_addr,
    })
}

/// Until-idle with several workers: stop them once every idle flag has stayed raised over a
/// few checks (a worker that is handed a frame lowers its flag within one iteration).
fn watch_idle(stop: &AtomicBool, flags: &[Arc<AtomicBool>], running: usize) {
    const CHECKS: u32 = 5;
    let mut quiet = 0;
    while !stop.load(Ordering::Relaxed) && running == flags.len() {
        std::thread::sleep(Duration::from_millis(5));
        if flags.iter().all(|f| f.load(Ordering::Acquire)) {
            quiet += 1;
            if quiet >= CHECKS {
                stop.store(true, Ordering::SeqCst);
            }
        } else {
            quiet = 0;
        }
    }
}

/// Every worker's summary added up; ports by index.
fn sum_summaries(all: &[WorkerSummary]) -> WorkerSummary {
    let mut t = WorkerSummary::default();
    for s in all {
        t.iterations += s.iterations;
        t.rx += s.rx;
        t.tx += s.tx;
        t.swaps = t.swaps.max(s.swaps);
        t.dropped_on_swap += s.dropped_on_swap;
        t.drained_on_swap += s.drained_on_swap;
        for (i, p) in s.ports.iter().enumerate() {
            if t.ports.len() <= i {
                t.ports.push(PortIoStats::default());
            }
            t.ports[i].merge(p);
        }
    }
    t
}

/// One worker's snapshot as it is; several: counters added up (`SwitchSnapshot::merge`).
fn sum_snapshots(mut snaps: Vec<SwitchSnapshot>) -> SwitchSnapshot {
    let mut total = snaps.remove(0);
    for s in &snaps {
        total.merge(s);
    }
    total
}

/// What a run reserved at start and why: the buffer pool, each worker's match-action tables,
/// and the process's resident memory once the switches are built.
fn memory_report(pool: &str, workers: usize, snap: &SwitchSnapshot) -> Vec<String> {
    let mut out = vec![format!("{pool}; one pool per worker ({workers})")];
    if !snap.tables.is_empty() {
        let t: Vec<String> = snap
            .tables
            .iter()
            .map(|(name, t)| format!("{name} {}", t.capacity))
            .collect();
        out.push(format!(
            "tables (entries reserved per worker, from the config's capacities): {}",
            t.join(", ")
        ));
    }
    out.push(
        "queues and the shared buffer hold pool buffers (switch.buffer_bytes is accounting, \
         not memory)"
            .into(),
    );
    if let Some(kib) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
    {
        out.push(format!("resident after start: {} MiB", kib >> 10));
    }
    out
}
