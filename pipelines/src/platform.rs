//! Choosing the platform of a live run (heap buffers and pcap/null ports, or DPDK mbufs and
//! ethdev ports) and where its worker runs (a plain thread, or a pinned DPDK worker lcore).

use crate::run::{run_with, HeapPlatform, RunOptions, RunReport};
use longhaul_control::config::{Config, PortIo};
use longhaul_control::plane::PipelineControl;
use longhaul_dataplane::engine::Pipeline;
use longhaul_dataplane::packet::HeapPool;
use std::path::PathBuf;

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

/// Run pipeline `L` (made by `make_pipeline`, controlled by `handler`) on the platform `cfg`
/// asks for: [`DpdkPlatform`](crate::dpdk::DpdkPlatform) when its ports are DPDK ports (a build
/// without the `dpdk` feature says so and stops), the heap otherwise.
pub fn run_on_platform<L, H>(
    cfg: Config,
    path: PathBuf,
    make_pipeline: fn(&Config) -> L,
    handler: H,
    opts: RunOptions,
) -> Result<RunReport, String>
where
    H: PipelineControl,
    L: PlatformPipeline<H::Command>,
{
    if uses_dpdk(&cfg) {
        #[cfg(feature = "dpdk")]
        {
            let platform = crate::dpdk::DpdkPlatform::new();
            return run_with(cfg, path, platform, make_pipeline, handler, opts);
        }
        #[cfg(not(feature = "dpdk"))]
        {
            let p = cfg
                .ports
                .iter()
                .find(|p| matches!(p.io, PortIo::Dpdk { .. }));
            return Err(format!(
                "port '{}': io kind \"dpdk\" needs a longhaul built with the dpdk feature \
                 (cargo build --release --features dpdk; docs/dpdk.md)",
                p.map_or("?", |p| p.name.as_str())
            ));
        }
    }
    run_with(cfg, path, HeapPlatform, make_pipeline, handler, opts)
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
