//! The DPDK platform of `longhaul run` (cargo feature `dpdk`): EAL from `[dpdk] eal_args`, one
//! mbuf pool, an ethdev port per `io.kind = "dpdk"` port, and `[dpdk] workers` workers, each on
//! its own pinned worker lcore with its view of every port (`longhaul_dataplane::dispatch`). docs/dpdk.md explains the keys and running on vdevs and NICs.

use crate::platform::Placement;
use crate::platform::{Platform, Ports};
use longhaul_control::config::{Config, DpdkConfig, PortIo};
use longhaul_control::plane::PortStatus;
use longhaul_dataplane::dispatch::WorkerPort;
use longhaul_dataplane::dpdk::{
    route_logs, DpdkPort, DpdkPortConfig, DpdkPortMonitor, Eal, LogLevel, MbufPool,
};
use longhaul_dataplane::port::{NullPort, Port};
use std::sync::Mutex;
use std::time::Duration;

/// A DPDK log line as a `tracing` event of target `dpdk` (the line keeps DPDK's own prefix,
/// `EAL: ...`, `NULL: ...`).
fn eal_log(level: LogLevel, line: &str) {
    match level {
        LogLevel::Error => tracing::error!(target: "dpdk", "{line}"),
        LogLevel::Warn => tracing::warn!(target: "dpdk", "{line}"),
        LogLevel::Info => tracing::info!(target: "dpdk", "{line}"),
        LogLevel::Debug => tracing::debug!(target: "dpdk", "{line}"),
    }
}

/// How long a port's link may take to come up at startup before the run is refused.
pub const DEFAULT_LINK_TIMEOUT: Duration = Duration::from_secs(10);

/// Mbuf pools made in this process, by (mbufs, cache, data room): a pool is never freed (DPDK
/// ports and in-flight mbufs may point into it until exit), so a rebuild, or another run in the
/// same process (tests), reuses the pool of the same shape instead of making another.
static POOLS: Mutex<Vec<(PoolShape, MbufPool)>> = Mutex::new(Vec::new());

/// (mbufs, per-lcore cache, data room).
type PoolShape = (u32, u32, usize);

/// DPDK mbufs and ethdev ports.
pub struct DpdkPlatform {
    /// How long to wait for each port's link at startup (an error naming the port after it).
    pub link_timeout: Duration,
    /// The `[dpdk]` section the pool was made for (a reload may not change it).
    dpdk: Option<DpdkConfig>,
    pool: Option<MbufPool>,
    /// Ports were opened (a reload that changes port I/O needs a restart).
    opened: bool,
    /// Each DPDK port's name and monitor (link state and xstats for metrics).
    monitors: Vec<(String, DpdkPortMonitor)>,
}

impl Default for DpdkPlatform {
    fn default() -> Self {
        Self::new()
    }
}

impl DpdkPlatform {
    pub fn new() -> Self {
        DpdkPlatform {
            link_timeout: DEFAULT_LINK_TIMEOUT,
            dpdk: None,
            pool: None,
            opened: false,
            monitors: Vec::new(),
        }
    }

    /// EAL, started from `[dpdk] eal_args` (once per process; the calling thread becomes the
    /// main lcore, where the control thread then runs).
    fn eal(cfg: &Config) -> Result<(Eal, &DpdkConfig), String> {
        let d = cfg
            .dpdk
            .as_ref()
            .ok_or("DPDK ports need a [dpdk] section with eal_args")?;
        // DPDK's own log lines (EAL's at init, the PMDs' later) through longhaul's logger: the
        // same format (JSON with LONGHAUL_LOG_FORMAT=json) and filter (LONGHAUL_LOG) as ours.
        route_logs(eal_log).map_err(|e| e.to_string())?;
        let eal = Eal::init(&d.eal_args).map_err(|e| format!("[dpdk] eal_args: {e}"))?;
        Ok((eal, d))
    }

    fn ensure_pool(&mut self, cfg: &Config) -> Result<MbufPool, String> {
        let (eal, d) = Self::eal(cfg)?;
        if let (Some(old), Some(pool)) = (&self.dpdk, &self.pool) {
            if old != d {
                return Err(
                    "[dpdk] changed: EAL arguments and the mbuf pool are set at startup; \
                     restart longhaul to change them"
                        .into(),
                );
            }
            return Ok(pool.clone());
        }
        let key = (d.mbufs, d.mbuf_cache, d.mbuf_data_room);
        let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
        let pool = match pools.iter().find(|(k, _)| *k == key) {
            Some((_, p)) => p.clone(),
            None => {
                let name = format!("longhaul-mbufs-{}", pools.len());
                let p = MbufPool::new(&eal, &name, d.mbufs, d.mbuf_cache, d.mbuf_data_room)
                    .map_err(|e| format!("[dpdk] mbufs: {e}"))?;
                pools.push((key, p.clone()));
                p
            }
        };
        self.dpdk = Some(d.clone());
        self.pool = Some(pool.clone());
        Ok(pool)
    }
}

impl Platform for DpdkPlatform {
    type Pool = MbufPool;

    fn pool(&mut self, cfg: &Config) -> Result<MbufPool, String> {
        self.ensure_pool(cfg)
    }

    fn pool_note(&self, cfg: &Config) -> String {
        crate::platform::pool_note(cfg)
    }

    /// Every port opened once; each worker gets its view ([`WorkerPort`]): its own rx queue
    /// when the port has one per worker (the NIC must do RSS), else the owner (`port index mod
    /// workers`) polls the one queue and dispatches by the IP pair; likewise for tx.
    fn ports(&mut self, cfg: &Config) -> Result<Vec<Ports<MbufPool>>, String> {
        if self.opened {
            return Err(
                "ports' io changed: DPDK ports are set up at startup; restart longhaul \
                        to change them"
                    .into(),
            );
        }
        let pool = self.ensure_pool(cfg)?;
        let (eal, d) = Self::eal(cfg)?;
        let workers = usize::from(d.workers.max(1));
        let lcores = eal.worker_lcores();
        if workers > 1 && lcores.len() < workers {
            return Err(format!(
                "[dpdk] workers = {workers} needs {workers} worker lcores, EAL has {} ({}): give \
                 EAL one more lcore than workers (the first is the main lcore, where the control \
                 thread runs), e.g. \"-l\", \"0-{workers}\"",
                lcores.len(),
                if lcores.is_empty() {
                    "none".to_string()
                } else {
                    format!("{lcores:?}")
                }
            ));
        }
        let mut views: Vec<Ports<MbufPool>> = (0..workers).map(|_| Vec::new()).collect();
        let mut mode: Option<(bool, String)> = None;
        self.monitors.clear();
        for (idx, p) in cfg.ports.iter().enumerate() {
            let PortIo::Dpdk {
                device,
                rx_queues,
                tx_queues,
                rx_desc,
                tx_desc,
            } = &p.io
            else {
                if let PortIo::Pcap { .. } | PortIo::Memory = p.io {
                    return Err(format!(
                        "port '{}': pcap and memory ports do not run next to DPDK ports; use a \
                         net_pcap vdev (docs/dpdk.md)",
                        p.name
                    ));
                }
                for v in views.iter_mut() {
                    v.push(Box::new(NullPort::default()));
                }
                continue;
            };
            let pc = DpdkPortConfig {
                rx_queues: *rx_queues,
                tx_queues: *tx_queues,
                rx_desc: *rx_desc,
                tx_desc: *tx_desc,
                rss: *rx_queues > 1,
                promiscuous: true,
            };
            let port = DpdkPort::open(&eal, device, &pc, &pool)
                .map_err(|e| format!("port '{}': {e}", p.name))?;
            port.wait_link_up(self.link_timeout)
                .map_err(|e| format!("port '{}': {e}", p.name))?;
            let info = port.info();
            let rx_shared = *rx_queues == 1;
            if !rx_shared && !info.hardware_rss() {
                return Err(format!(
                    "port '{}': rx_queues = {rx_queues} needs RSS, which {} ({}) does not do \
                     (supported hash functions: {:#x}); use rx_queues = 1: one worker polls the \
                     queue and dispatches to the others in software",
                    p.name, info.driver, device, info.rss_supported
                ));
            }
            // Hardware RSS and software dispatch are both symmetric but different functions: a
            // flow arriving on two ports must be sharded by the same one.
            if workers > 1 {
                match &mode {
                    Some((hw, other)) if *hw == rx_shared => {
                        return Err(format!(
                            "port '{}' shards flows by {} but port '{other}' by {}: with several \
                             workers give every DPDK port rx_queues = {workers} (RSS) or every \
                             port rx_queues = 1 (software dispatch)",
                            p.name,
                            if rx_shared {
                                "software dispatch"
                            } else {
                                "hardware RSS"
                            },
                            if rx_shared {
                                "hardware RSS"
                            } else {
                                "software dispatch"
                            },
                        ));
                    }
                    Some(_) => {}
                    None => mode = Some((!rx_shared, p.name.clone())),
                }
            }
            self.monitors.push((p.name.clone(), port.monitor()));
            let tx_shared = *tx_queues == 1;
            let owner = idx % workers;
            let queues: Vec<Option<Box<dyn Port<MbufPool> + Send>>> = (0..workers)
                .map(|w| {
                    let rxq = if rx_shared {
                        (w == owner).then_some(0)
                    } else {
                        Some(w as u16)
                    };
                    let txq = if tx_shared {
                        (w == owner).then_some(0)
                    } else {
                        Some(w as u16)
                    };
                    let q = port.queue(rxq, txq, w == owner, &pool);
                    (rxq.is_some() || txq.is_some())
                        .then(|| Box::new(q) as Box<dyn Port<MbufPool> + Send>)
                })
                .collect();
            drop(port); // the queues and the monitor keep it open
            for (w, view) in WorkerPort::split(&p.name, queues, owner, rx_shared, tx_shared)
                .into_iter()
                .enumerate()
            {
                views[w].push(Box::new(view));
            }
        }
        self.opened = true;
        Ok(views)
    }

    fn placement(&self, worker: usize) -> Placement {
        match Eal::get().map(|e| e.worker_lcores()) {
            Some(l) if worker < l.len() => Placement::Lcore(l[worker]),
            _ => Placement::Thread,
        }
    }

    fn port_status(&self) -> Vec<Box<dyn PortStatus>> {
        self.monitors
            .iter()
            .map(|(name, m)| {
                Box::new(MonitorStatus {
                    name: name.clone(),
                    monitor: m.clone(),
                }) as Box<dyn PortStatus>
            })
            .collect()
    }
}

/// A DPDK port's link state and xstats for the control thread's metrics.
struct MonitorStatus {
    name: String,
    monitor: DpdkPortMonitor,
}

impl PortStatus for MonitorStatus {
    fn name(&self) -> &str {
        &self.name
    }

    fn link_up(&self) -> bool {
        self.monitor.link().is_ok_and(|l| l.up)
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        self.monitor.xstats().unwrap_or_default()
    }
}
