//! The platform of a live run: where packets live and how ports open (heap buffers and
//! pcap/null ports here, DPDK mbufs and ethdev ports in `dpdk`), and where a worker runs (a
//! plain thread, or a pinned DPDK worker lcore).

use longhaul_control::config::{Config, PortIo};
use longhaul_dataplane::control::mono_ns;
use longhaul_dataplane::engine::Pipeline;
use longhaul_dataplane::packet::{BufPool, HeapPool};
use longhaul_dataplane::port::{NullPort, PcapPort, Port};

/// A pipeline that runs on every platform this build has: heap buffers, and DPDK mbufs with the
/// `dpdk` feature. Implemented for every pipeline generic over its buffer pool.
#[cfg(not(feature = "dpdk"))]
pub trait PlatformPipeline<C>: Pipeline<HeapPool, Command = C> + Send + 'static {}
#[cfg(not(feature = "dpdk"))]
impl<C, T: Pipeline<HeapPool, Command = C> + Send + 'static> PlatformPipeline<C> for T {}

/// A pipeline that runs on every platform this build has: heap buffers, and DPDK mbufs with the
/// `dpdk` feature. Implemented for every pipeline generic over its buffer pool.
#[cfg(feature = "dpdk")]
pub trait PlatformPipeline<C>:
    Pipeline<HeapPool, Command = C>
    + Pipeline<longhaul_dataplane::dpdk::MbufPool, Command = C>
    + Send
    + 'static
{
}
#[cfg(feature = "dpdk")]
impl<C, T> PlatformPipeline<C> for T where
    T: Pipeline<HeapPool, Command = C>
        + Pipeline<longhaul_dataplane::dpdk::MbufPool, Command = C>
        + Send
        + 'static
{
}

/// Whether `cfg`'s ports are DPDK ports (validation refuses mixing them with pcap or memory
/// ports, so one is enough).
pub fn uses_dpdk(cfg: &Config) -> bool {
    cfg.ports
        .iter()
        .any(|p| matches!(p.io, PortIo::Dpdk { .. }))
}

/// Where a worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A std thread (heap platform; DPDK when EAL has no worker lcore).
    Thread,
    /// DPDK worker lcore `n` (EAL's thread, pinned to the lcore's CPU).
    #[cfg(feature = "dpdk")]
    Lcore(u32),
}

/// A running worker.
pub enum WorkerJoin {
    Thread(std::thread::JoinHandle<()>),
    #[cfg(feature = "dpdk")]
    Lcore(longhaul_dataplane::dpdk::LcoreJoin<()>),
}

impl WorkerJoin {
    /// Wait for the worker; Err when it panicked.
    pub fn join(self) -> Result<(), String> {
        match self {
            WorkerJoin::Thread(h) => h
                .join()
                .map_err(|_| "the worker thread panicked".to_string()),
            #[cfg(feature = "dpdk")]
            WorkerJoin::Lcore(j) => j.join().map_err(|e| format!("the worker: {e}")),
        }
    }
}

/// Start `job` as worker `name` at `placement`.
pub fn spawn_worker(
    placement: Placement,
    name: &str,
    job: Box<dyn FnOnce() + Send + 'static>,
) -> Result<WorkerJoin, String> {
    match placement {
        Placement::Thread => std::thread::Builder::new()
            .name(name.into())
            .spawn(job)
            .map(WorkerJoin::Thread)
            .map_err(|e| format!("starting {name}: {e}")),
        #[cfg(feature = "dpdk")]
        Placement::Lcore(lcore) => {
            let eal = longhaul_dataplane::dpdk::Eal::get()
                .ok_or_else(|| format!("starting {name} on lcore {lcore}: EAL is not up"))?;
            eal.launch(lcore, job)
                .map(WorkerJoin::Lcore)
                .map_err(|e| format!("starting {name}: {e}"))
        }
    }
}

/// Where packets live and how ports open: heap buffers with pcap/null ports ([`HeapPlatform`]),
/// or DPDK mbufs with ethdev ports (the `dpdk` feature).
pub trait Platform: Send + 'static {
    type Pool: BufPool + Send + 'static;
    /// The buffer pool of a switch built from `cfg` (one per worker).
    fn pool(&mut self, cfg: &Config) -> Result<Self::Pool, String>;
    /// Each worker's view of the ports of `cfg`, in port order (the number of workers is the
    /// length). Errors name the port.
    fn ports(&mut self, cfg: &Config) -> Result<Vec<Ports<Self::Pool>>, String>;
    /// Where worker `worker` runs (DPDK: a pinned worker lcore).
    fn placement(&self, _worker: usize) -> Placement {
        Placement::Thread
    }
    /// Link state and NIC counters of the ports, for metrics (DPDK ports).
    fn port_status(&self) -> Vec<Box<dyn longhaul_control::plane::PortStatus>> {
        Vec::new()
    }
    /// What the buffer pool of `cfg` reserves and why, for the start-up report.
    fn pool_note(&self, cfg: &Config) -> String;
}

/// A worker's ports, index i = the switch's port index i.
pub type Ports<P> = Vec<Box<dyn Port<P> + Send>>;

/// Heap buffers; pcap and null ports.
pub struct HeapPlatform;

impl Platform for HeapPlatform {
    type Pool = HeapPool;
    fn pool(&mut self, cfg: &Config) -> Result<HeapPool, String> {
        Ok(live_heap_pool(cfg))
    }
    fn ports(&mut self, cfg: &Config) -> Result<Vec<Ports<HeapPool>>, String> {
        Ok(vec![open_ports(cfg)?])
    }
    fn pool_note(&self, cfg: &Config) -> String {
        pool_note(cfg)
    }
}

/// What the buffer pool of `cfg` takes, in words: `run`'s start-up memory report and
/// `check-config`'s, from the same figures ([`SwitchConfig::pool_bytes`] for the heap, the
/// `[dpdk]` mbuf pool for DPDK ports).
///
/// [`SwitchConfig::pool_bytes`]: longhaul_control::config::SwitchConfig::pool_bytes
pub fn pool_note(cfg: &Config) -> String {
    if uses_dpdk(cfg) {
        return match &cfg.dpdk {
            Some(d) => format!(
                "mbuf pool (DPDK): {} mbufs of {} B data room, cache {} per lcore, reserved up \
                 front in the EAL's memory ([dpdk] mbufs, mbuf_data_room, mbuf_cache)",
                d.mbufs, d.mbuf_data_room, d.mbuf_cache
            ),
            None => "mbuf pool (DPDK): the [dpdk] defaults".into(),
        };
    }
    let sw = &cfg.switch;
    let per = sw.pool_buffer_bytes();
    let made = LIVE_POOL_PREFILL.min(sw.pool_buffers) as u64;
    format!(
        "packet pool (heap): up to {} buffers of {per} B = {} MiB (switch.pool_buffers x \
         (buffer_data_room + {} B of headroom, descriptor and allocator)); {made} made at \
         start ({} MiB), the rest as the traffic needs them",
        sw.pool_buffers,
        sw.pool_bytes() >> 20,
        per - sw.buffer_data_room as u64,
        (made * per) >> 20
    )
}

/// This process's run id (`<unix seconds>-<pid>`), what `{run}` in a pcap `tx` path becomes so
/// that two runs never write the same file. The same for every port and every reload.
pub fn run_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        format!("{secs}-{}", std::process::id())
    })
}

/// `path` with `{run}` replaced by [`run_id`].
pub fn expand_run(path: &std::path::Path) -> std::path::PathBuf {
    let s = path.to_string_lossy();
    if s.contains("{run}") {
        std::path::PathBuf::from(s.replace("{run}", run_id()))
    } else {
        path.to_path_buf()
    }
}

/// Open the ports of `cfg`, in port order. Errors name the port and the file. A pcap port's tx
/// file (its `{run}` expanded, its directory created) is announced on stderr with its cap.
pub fn open_ports(cfg: &Config) -> Result<Ports<HeapPool>, String> {
    let start = mono_ns();
    let mut ports: Vec<Box<dyn Port<HeapPool> + Send>> = Vec::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        let port: Box<dyn Port<HeapPool> + Send> = match &p.io {
            PortIo::None => Box::new(NullPort::default()),
            PortIo::Pcap {
                rx,
                tx,
                rx_loop,
                pace,
                tx_max_bytes,
            } => {
                let tx = tx.as_deref().map(expand_run);
                let port = PcapPort::open(rx.as_deref(), tx.as_deref(), *rx_loop, *pace, start)
                    .map_err(|e| format!("ports[{i}].io ('{}'): {e}", p.name))?;
                if let Some(t) = &tx {
                    let cap = tx_max_bytes.map_or_else(
                        || "no size cap: set io.tx_max_bytes".to_owned(),
                        |b| format!("at most {b} bytes, then frames are dropped (tx_errors)"),
                    );
                    longhaul_control::logs::note(&format!(
                        "port '{}' writes {} ({cap})",
                        p.name,
                        t.display()
                    ));
                }
                Box::new(match tx_max_bytes {
                    Some(b) => port.with_tx_cap(*b),
                    None => port,
                })
            }
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

/// Buffers a live heap pool makes at start ([`live_heap_pool`]): a few bursts per port.
pub const LIVE_POOL_PREFILL: usize = 4096;

/// The packet buffer pool of a live run on the heap platform: `switch.pool_buffers` at most,
/// [`LIVE_POOL_PREFILL`] made at start, the rest as the traffic needs them.
pub fn live_heap_pool(cfg: &Config) -> HeapPool {
    HeapPool::with_prefill(
        cfg.switch.pool_buffers,
        cfg.switch.buffer_data_room,
        LIVE_POOL_PREFILL,
    )
}

/// The packet buffer pool of `cfg`, allocated up front.
pub fn heap_pool(cfg: &Config) -> HeapPool {
    HeapPool::new(cfg.switch.pool_buffers, cfg.switch.buffer_data_room)
}
