//! The DPDK platform of `longhaul run` (cargo feature `dpdk`): EAL from `[dpdk] eal_args`, one
//! mbuf pool, an ethdev port per `io.kind = "dpdk"` port, and the worker on a pinned worker
//! lcore. docs/dpdk.md explains the keys and running on vdevs and NICs.

use crate::platform::Placement;
use crate::run::{Platform, Ports};
use longhaul_control::config::{Config, DpdkConfig, PortIo};
use longhaul_dataplane::dpdk::{DpdkPort, DpdkPortConfig, Eal, MbufPool};
use longhaul_dataplane::port::{NullPort, Port};
use std::sync::Mutex;
use std::time::Duration;

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
        }
    }

    /// EAL, started from `[dpdk] eal_args` (once per process; the calling thread becomes the
    /// main lcore, where the control thread then runs).
    fn eal(cfg: &Config) -> Result<(Eal, &DpdkConfig), String> {
        let d = cfg
            .dpdk
            .as_ref()
            .ok_or("DPDK ports need a [dpdk] section with eal_args")?;
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

    fn ports(&mut self, cfg: &Config) -> Result<Ports<MbufPool>, String> {
        if self.opened {
            return Err(
                "ports' io changed: DPDK ports are set up at startup; restart longhaul \
                        to change them"
                    .into(),
            );
        }
        let pool = self.ensure_pool(cfg)?;
        let (eal, _) = Self::eal(cfg)?;
        let mut ports: Ports<MbufPool> = Vec::new();
        for p in &cfg.ports {
            let port: Box<dyn Port<MbufPool> + Send> = match &p.io {
                PortIo::None => Box::new(NullPort::default()),
                PortIo::Dpdk {
                    device,
                    rx_queues,
                    tx_queues,
                    rx_desc,
                    tx_desc,
                } => {
                    if *rx_queues > 1 || *tx_queues > 1 {
                        return Err(format!(
                            "port '{}': rx_queues = {rx_queues}, tx_queues = {tx_queues}: \
                             this version runs one worker, which polls one queue per port; \
                             use 1 and 1",
                            p.name
                        ));
                    }
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
                    Box::new(port)
                }
                PortIo::Pcap { .. } | PortIo::Memory => {
                    return Err(format!(
                        "port '{}': pcap and memory ports do not run next to DPDK ports; use a \
                         net_pcap vdev (docs/dpdk.md)",
                        p.name
                    ))
                }
            };
            ports.push(port);
        }
        self.opened = true;
        Ok(ports)
    }

    fn placement(&self) -> Placement {
        match Eal::get().map(|e| e.worker_lcores()) {
            Some(l) if !l.is_empty() => Placement::Lcore(l[0]),
            _ => Placement::Thread,
        }
    }
}
