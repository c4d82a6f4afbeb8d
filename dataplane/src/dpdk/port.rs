//! DPDK ethdev ports as [`Port`]s.

use super::eal::{DpdkError, Eal};
use super::mbuf::{Mbuf, MbufPool, META_PRIV_SIZE};
use crate::packet::{Meta, PacketBuf};
use crate::port::{Port, PortIoStats, BURST};
use crate::time::Nanos;
use longhaul_dpdk_sys::{self as sys, rte_mbuf, rte_mempool};
use std::ffi::{c_char, CString};
use std::mem::size_of;
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Calls to `rte_eth_tx_burst` in a row that may accept nothing before the rest of a burst is
/// dropped (counted in `tx_errors`).
const TX_RETRIES: u32 = 4;

/// How to set up a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DpdkPortConfig {
    /// Receive queues (one per worker lcore that polls this port).
    pub rx_queues: u16,
    /// Transmit queues.
    pub tx_queues: u16,
    /// Descriptors per rx queue (adjusted to the device's limits; see [`DpdkPortInfo`]).
    pub rx_desc: u16,
    /// Descriptors per tx queue (adjusted likewise).
    pub tx_desc: u16,
    /// Spread received frames over the rx queues with hardware RSS and the symmetric key
    /// ([`SYMMETRIC_RSS_KEY`](super::SYMMETRIC_RSS_KEY)), when the PMD supports RSS; whether it
    /// did is [`DpdkPortInfo::hardware_rss`] (when not, dispatch in software).
    pub rss: bool,
    /// Receive every frame whatever its destination MAC (a bump in the wire must).
    pub promiscuous: bool,
}

impl Default for DpdkPortConfig {
    fn default() -> Self {
        DpdkPortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            rss: false,
            promiscuous: true,
        }
    }
}

/// What a port turned out to be once set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpdkPortInfo {
    /// The name it was opened by.
    pub device: String,
    /// DPDK's port id.
    pub port_id: u16,
    /// The PMD (`net_null`, `net_pcap`, `net_ring`, `net_mlx5`, ...).
    pub driver: String,
    /// NUMA socket of the device (-1 unknown).
    pub socket_id: i32,
    pub rx_queues: u16,
    pub tx_queues: u16,
    /// Descriptors per rx queue, after adjustment to the device's limits.
    pub rx_desc: u16,
    /// Descriptors per tx queue, after adjustment.
    pub tx_desc: u16,
    /// RSS hash functions in use (`RTE_ETH_RSS_*`); 0 when RSS is off or unsupported.
    pub rss_hf: u64,
    /// RSS hash functions the PMD supports (0 for most vdevs).
    pub rss_supported: u64,
    /// Promiscuous mode: `Some(true)` on, `Some(false)` asked for but refused by the PMD (see
    /// `promiscuous_error`), `None` not asked for.
    pub promiscuous: Option<bool>,
    /// DPDK's text for why promiscuous mode could not be enabled.
    pub promiscuous_error: Option<String>,
}

impl DpdkPortInfo {
    /// Whether the NIC spreads frames over the rx queues itself (else: software dispatch).
    pub fn hardware_rss(&self) -> bool {
        self.rss_hf != 0
    }
}

/// Link state (`rte_eth_link_get_nowait`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkInfo {
    pub up: bool,
    /// Mbit/s (0 unknown).
    pub speed_mbps: u32,
    pub full_duplex: bool,
    pub autoneg: bool,
}

/// The ethdev's own counters (`rte_eth_stats_get`), as opposed to what longhaul saw.
pub type EthStats = sys::lh_eth_stats;

/// Port ids open in this process (a port is set up by one `DpdkPort` at a time).
static OPEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());

/// A DPDK ethdev port, configured and started; stopped and closed when the port and every
/// [`DpdkQueue`] and [`DpdkPortMonitor`] made from it are gone.
///
/// `rx_burst`/`tx_burst` of the [`Port`] trait use queue 0; [`DpdkPort::rx_burst_queue`] and
/// [`DpdkPort::tx_burst_queue`] take any queue. A queue must be polled by one thread at a time:
/// `&mut self` guarantees it while the port has a single owner; several workers each take a
/// [`DpdkQueue`] of their own queues ([`DpdkPort::queue`]).
///
/// Counters ([`Port::stats`]): `rx_pkts`/`rx_bytes`/`tx_pkts`/`tx_bytes` are what longhaul
/// received and sent; `rx_nobuf` is the PMD's `rx_nombuf` (mempool exhausted); `rx_errors` adds
/// the frames dropped here (multi-segment, or from a foreign mempool) to the PMD's `imissed` and
/// `ierrors`; `tx_errors` adds the frames the PMD would not take to its `oerrors`.
pub struct DpdkPort {
    shared: Arc<Shared>,
    io: QueueIo,
}

/// What every handle of one port shares: its description, and closing it with the last handle.
struct Shared {
    info: DpdkPortInfo,
    desc: String,
}

/// The burst state of one thread's queues of a port.
struct QueueIo {
    port_id: u16,
    stats: PortIoStats,
    /// Frames dropped on rx because they were chained (jumbo frames larger than one mbuf).
    rx_multiseg: u64,
    /// Frames dropped on rx because their mbuf's pool has no room for Meta.
    rx_foreign: u64,
    /// The last mempool whose private area was checked (see `pool_ok`).
    checked_pool: *mut rte_mempool,
}

// SAFETY: a QueueIo polls its queues from whichever thread owns it, one thread at a time, which
// `&mut self` ensures; `checked_pool` is only compared, never dereferenced through this handle.
unsafe impl Send for QueueIo {}

/// One worker's queues of a shared port ([`DpdkPort::queue`]): rx from `rxq`, tx on `txq`.
pub struct DpdkQueue {
    shared: Arc<Shared>,
    io: QueueIo,
    rxq: Option<u16>,
    txq: Option<u16>,
    /// This handle adds the port-wide PMD counters (`imissed`, `rx_nombuf`, ...) to its stats,
    /// so that summing every worker's stats counts them once.
    primary: bool,
}

/// Link state and PMD counters of a port, for the control thread (metrics) while workers poll
/// its queues. `rte_eth_link_get_nowait` and `rte_eth_xstats_get` read the device's state and
/// are what DPDK applications call from their main lcore while workers forward.
#[derive(Clone)]
pub struct DpdkPortMonitor {
    shared: Arc<Shared>,
}

impl DpdkPort {
    /// Set up and start the ethdev `device` with `cfg`, its rx queues taking mbufs from `pool`.
    ///
    /// `device` is an ethdev name: a PCI address as DPDK names it (`0000:3b:00.0`; `3b:00.0` is
    /// tried with the `0000:` domain too), a vdev given to EAL (`--vdev=net_null0` ->
    /// `net_null0`), or a ring pair's name ([`Eal::ring_pair`]). Errors name the device and the
    /// DPDK call that failed, with DPDK's error text.
    pub fn open(
        eal: &Eal,
        device: &str,
        cfg: &DpdkPortConfig,
        pool: &MbufPool,
    ) -> Result<DpdkPort, DpdkError> {
        let ctx = format!("DPDK port '{device}'");
        let port_id = lookup(eal, device, &ctx)?;
        {
            let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
            if open.contains(&port_id) {
                return Err(DpdkError::msg(ctx, "already open in this process"));
            }
            open.push(port_id);
        }
        let unregister = || {
            let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
            open.retain(|&p| p != port_id);
        };

        let mut conf = sys::lh_port_conf {
            mp: pool.as_ptr(),
            rss_hf: sys::RSS_HF_IP,
            nb_rxq: cfg.rx_queues,
            nb_txq: cfg.tx_queues,
            nb_rxd: cfg.rx_desc,
            nb_txd: cfg.tx_desc,
            rss: u8::from(cfg.rss),
            promisc: u8::from(cfg.promiscuous),
            rss_key_len: sys::SYMMETRIC_RSS_KEY.len() as u8,
            pad_: [0; 5],
            rss_key: [0; 64],
        };
        conf.rss_key[..sys::SYMMETRIC_RSS_KEY.len()].copy_from_slice(&sys::SYMMETRIC_RSS_KEY);
        let mut res = sys::lh_port_result::default();
        // SAFETY: `conf` and `res` are valid for the call (plain structs whose layout the shim
        // asserts); `conf.mp` is a live packet mempool that is never freed; the port id is
        // valid and registered in OPEN, so no other DpdkPort configures it concurrently.
        let ret = unsafe { sys::lh_port_setup(port_id, &conf, &mut res) };
        if ret != 0 {
            unregister();
            let step = c_str(&res.step);
            return Err(DpdkError::from_errno(format!("{ctx}: {step}"), -ret));
        }
        let (promiscuous, promiscuous_error) = match res.promisc {
            0 => (None, None),
            1 => (Some(true), None),
            e => (
                Some(false),
                Some(DpdkError::from_errno("rte_eth_promiscuous_enable", -e).to_string()),
            ),
        };
        let info = DpdkPortInfo {
            device: device.to_string(),
            port_id,
            driver: c_str(&res.driver),
            socket_id: res.socket_id,
            rx_queues: cfg.rx_queues,
            tx_queues: cfg.tx_queues,
            rx_desc: res.nb_rxd,
            tx_desc: res.nb_txd,
            rss_hf: res.rss_hf,
            rss_supported: res.flow_type_rss_offloads,
            promiscuous,
            promiscuous_error,
        };
        let desc = format!(
            "dpdk {} (port {}, {}, {} rxq x {} desc, {} txq x {} desc, rss {}, pool {})",
            info.device,
            info.port_id,
            info.driver,
            info.rx_queues,
            info.rx_desc,
            info.tx_queues,
            info.tx_desc,
            if info.hardware_rss() {
                "on"
            } else if cfg.rss && cfg.rx_queues > 1 {
                "unsupported (software dispatch)"
            } else {
                "off"
            },
            pool.name(),
        );
        Ok(DpdkPort {
            io: QueueIo::new(port_id, pool.as_ptr()),
            shared: Arc::new(Shared { info, desc }),
        })
    }

    /// What the port turned out to be.
    pub fn info(&self) -> &DpdkPortInfo {
        &self.shared.info
    }

    /// DPDK's port id.
    pub fn id(&self) -> u16 {
        self.shared.info.port_id
    }

    /// Frames dropped on rx because they spanned several mbufs (jumbo frames larger than a pool
    /// buffer: size the pool's data room for the MTU), included in `rx_errors`.
    pub fn rx_multiseg_drops(&self) -> u64 {
        self.io.rx_multiseg
    }

    /// Receive up to `max` (at most [`BURST`]) frames from rx queue `queue` into `out`, each with
    /// `Meta::default()`. Never allocates when `out` has room for `max` more.
    ///
    /// Chained (multi-segment) frames are dropped and counted (`rx_errors`,
    /// [`Self::rx_multiseg_drops`]): stages need a frame in one contiguous buffer.
    pub fn rx_burst_queue(&mut self, queue: u16, out: &mut Vec<Mbuf>, max: usize) -> usize {
        self.io.rx(queue, out, max)
    }

    /// Send every frame of `pkts` (drained) on tx queue `queue`. Frames the PMD takes are its
    /// own from then on (it frees them after transmission); frames it refuses after a few tries
    /// are freed and counted (`tx_errors`). Returns how many were sent. Never allocates.
    pub fn tx_burst_queue(&mut self, queue: u16, pkts: &mut Vec<Mbuf>) -> usize {
        self.io.tx(queue, pkts)
    }

    /// A handle of rx queue `rxq` and tx queue `txq` (either may be `None`) for another thread.
    /// The caller gives each queue to one handle only (a queue is polled by one thread at a
    /// time); `primary` is the one handle that also reports the port-wide PMD counters. `pool`
    /// is the pool the port was opened with.
    pub fn queue(
        &self,
        rxq: Option<u16>,
        txq: Option<u16>,
        primary: bool,
        pool: &MbufPool,
    ) -> DpdkQueue {
        DpdkQueue {
            shared: self.shared.clone(),
            io: QueueIo::new(self.id(), pool.as_ptr()),
            rxq: rxq.filter(|&q| q < self.shared.info.rx_queues),
            txq: txq.filter(|&q| q < self.shared.info.tx_queues),
            primary,
        }
    }

    /// A handle for reading link state and PMD counters from another thread.
    pub fn monitor(&self) -> DpdkPortMonitor {
        DpdkPortMonitor {
            shared: self.shared.clone(),
        }
    }

    /// Link state now, without waiting.
    pub fn link(&self) -> Result<LinkInfo, DpdkError> {
        self.shared.link()
    }

    /// Wait up to `timeout` for the link to come up (startup: a NIC takes a moment after start).
    /// Err names the port when it stays down.
    pub fn wait_link_up(&self, timeout: Duration) -> Result<LinkInfo, DpdkError> {
        self.shared.wait_link_up(timeout)
    }

    /// The PMD's extended statistics (`rte_eth_xstats_get_names` + `rte_eth_xstats_get`), as
    /// (name, value) in the PMD's order. Allocates: for the control path, not per packet.
    pub fn xstats(&self) -> Result<Vec<(String, u64)>, DpdkError> {
        self.shared.xstats()
    }

    /// The ethdev's own counters.
    pub fn eth_stats(&self) -> Result<EthStats, DpdkError> {
        self.shared.eth_stats()
    }
}

impl QueueIo {
    fn new(port_id: u16, pool: *mut rte_mempool) -> Self {
        QueueIo {
            port_id,
            stats: PortIoStats::default(),
            rx_multiseg: 0,
            rx_foreign: 0,
            checked_pool: pool,
        }
    }

    fn rx(&mut self, queue: u16, out: &mut Vec<Mbuf>, max: usize) -> usize {
        let n = max.min(BURST);
        if n == 0 {
            return 0;
        }
        let mut raw: [*mut rte_mbuf; BURST] = [ptr::null_mut(); BURST];
        // SAFETY: `raw` has room for `n` <= BURST pointers; the port is started and this queue is
        // polled only through `&mut self` of the one handle given it.
        let got = unsafe { sys::lh_rx_burst(self.port_id, queue, raw.as_mut_ptr(), n as u16) };
        let got = usize::from(got).min(n);
        out.reserve(got);
        let mut added = 0;
        let mut bytes = 0u64;
        for &m in &raw[..got] {
            let Some(m) = NonNull::new(m) else { continue };
            if Mbuf::raw_nb_segs(m) != 1 {
                self.rx_multiseg += 1;
                self.stats.rx_errors += 1;
                // SAFETY: the PMD handed us this chain; freeing it frees every segment, once.
                unsafe { sys::lh_pktmbuf_free(m.as_ptr()) };
                continue;
            }
            if !self.pool_ok(Mbuf::raw_pool(m)) {
                self.rx_foreign += 1;
                self.stats.rx_errors += 1;
                // SAFETY: as above.
                unsafe { sys::lh_pktmbuf_free(m.as_ptr()) };
                continue;
            }
            // SAFETY: a single-segment mbuf the PMD handed over (we own it now), from a pool whose
            // private area holds Meta (checked just above).
            let b = unsafe { Mbuf::from_raw(m) };
            bytes += b.len() as u64;
            out.push(b);
            added += 1;
        }
        // Counted once per burst: kept in `self` inside the loop, the counters were stored back
        // around every `push` (which may grow the vector, a call).
        self.stats.rx_pkts += added as u64;
        self.stats.rx_bytes += bytes;
        added
    }

    /// Whether mbufs of `mp` have room for Meta in their private area. Frames almost always come
    /// from the pool the port was opened with (checked at open); another pool (a net_ring peer's)
    /// is checked once and remembered.
    #[inline]
    fn pool_ok(&mut self, mp: *mut rte_mempool) -> bool {
        if mp == self.checked_pool {
            return true;
        }
        let Some(nn) = NonNull::new(mp) else {
            return false;
        };
        // SAFETY: `mp` is the pool of a valid mbuf we were handed, so a live mempool.
        let priv_size = unsafe { sys::lh_pool_priv_size(nn.as_ptr()) };
        let ok = priv_size >= META_PRIV_SIZE && usize::from(priv_size) >= size_of::<Meta>();
        if ok {
            self.checked_pool = mp;
        }
        ok
    }

    fn tx(&mut self, queue: u16, pkts: &mut Vec<Mbuf>) -> usize {
        let n = pkts.len();
        if n == 0 {
            return 0;
        }
        let total: u64 = pkts.iter().map(|p| p.len() as u64).sum();
        let base = pkts.as_mut_ptr().cast::<*mut rte_mbuf>();
        let mut sent = 0usize;
        let mut idle = 0;
        while sent < n && idle < TX_RETRIES {
            let chunk = (n - sent).min(usize::from(u16::MAX)) as u16;
            // SAFETY: `Mbuf` is repr(transparent) over a mbuf pointer, so elements sent..n of the
            // Vec are `chunk` valid mbuf pointers we own; the PMD takes ownership of the first k
            // it returns, which we then forget (below) and never touch again. The port is started
            // and this queue is used only through `&mut self` of the one handle given it.
            let k = unsafe { sys::lh_tx_burst(self.port_id, queue, base.add(sent), chunk) };
            let k = usize::from(k).min(usize::from(chunk));
            sent += k;
            idle = if k == 0 { idle + 1 } else { 0 };
        }
        // The first `sent` belong to the PMD now (it may already have freed them): forget them.
        for m in pkts.drain(..sent) {
            std::mem::forget(m);
        }
        let mut unsent_bytes = 0u64;
        for m in pkts.drain(..) {
            unsent_bytes += m.len() as u64;
            self.stats.tx_errors += 1;
            drop(m); // rte_pktmbuf_free
        }
        self.stats.tx_pkts += sent as u64;
        self.stats.tx_bytes += total - unsent_bytes;
        sent
    }

    /// These counters plus the port-wide PMD ones (`with_pmd`).
    fn stats(&self, shared: &Shared, with_pmd: bool) -> PortIoStats {
        let mut s = self.stats;
        if with_pmd {
            if let Ok(e) = shared.eth_stats() {
                s.rx_nobuf += e.rx_nombuf;
                s.rx_errors += e.imissed + e.ierrors;
                s.tx_errors += e.oerrors;
            }
        }
        s
    }
}

impl Shared {
    fn ctx(&self, call: &str) -> String {
        format!("DPDK port '{}': {call}", self.info.device)
    }

    fn link(&self) -> Result<LinkInfo, DpdkError> {
        let mut l = sys::lh_link::default();
        // SAFETY: `l` is a valid out struct; the port id is valid while the port is open (this
        // handle keeps it open).
        let ret = unsafe { sys::lh_link_get_nowait(self.info.port_id, &mut l) };
        if ret != 0 {
            return Err(DpdkError::from_errno(
                self.ctx("rte_eth_link_get_nowait"),
                -ret,
            ));
        }
        Ok(LinkInfo {
            up: l.up != 0,
            speed_mbps: l.speed_mbps,
            full_duplex: l.full_duplex != 0,
            autoneg: l.autoneg != 0,
        })
    }

    fn wait_link_up(&self, timeout: Duration) -> Result<LinkInfo, DpdkError> {
        let t0 = Instant::now();
        loop {
            let l = self.link()?;
            if l.up {
                return Ok(l);
            }
            if t0.elapsed() >= timeout {
                return Err(DpdkError::msg(
                    format!("DPDK port '{}'", self.info.device),
                    format!(
                        "link down after {} ms (check the cable and the peer)",
                        timeout.as_millis()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn xstats(&self) -> Result<Vec<(String, u64)>, DpdkError> {
        let id = self.info.port_id;
        // SAFETY: a null array with size 0 asks for the count; the port id is valid while open.
        let n = unsafe { sys::rte_eth_xstats_get_names(id, ptr::null_mut(), 0) };
        let Ok(n) = usize::try_from(n) else {
            return Err(DpdkError::from_errno(
                self.ctx("rte_eth_xstats_get_names"),
                -n,
            ));
        };
        let mut names = vec![sys::rte_eth_xstat_name { name: [0; 64] }; n];
        // SAFETY: `names` has room for `n` entries and we pass that bound.
        let got = unsafe { sys::rte_eth_xstats_get_names(id, names.as_mut_ptr(), n as u32) };
        if got < 0 {
            return Err(DpdkError::from_errno(
                self.ctx("rte_eth_xstats_get_names"),
                -got,
            ));
        }
        let mut vals = vec![sys::rte_eth_xstat::default(); n];
        // SAFETY: `vals` has room for `n` entries and we pass that bound.
        let got_v = unsafe { sys::rte_eth_xstats_get(id, vals.as_mut_ptr(), n as u32) };
        if got_v < 0 {
            return Err(DpdkError::from_errno(
                self.ctx("rte_eth_xstats_get"),
                -got_v,
            ));
        }
        let names_n = (got as usize).min(n);
        Ok(vals[..(got_v as usize).min(n)]
            .iter()
            .filter_map(|x| {
                let i = usize::try_from(x.id).ok().filter(|&i| i < names_n)?;
                Some((c_str(&names[i].name), x.value))
            })
            .collect())
    }

    fn eth_stats(&self) -> Result<EthStats, DpdkError> {
        let mut s = EthStats::default();
        // SAFETY: `s` is a valid out struct; the port id is valid while the port is open.
        let ret = unsafe { sys::lh_eth_stats(self.info.port_id, &mut s) };
        if ret != 0 {
            return Err(DpdkError::from_errno(self.ctx("rte_eth_stats_get"), -ret));
        }
        Ok(s)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let id = self.info.port_id;
        // Errors at teardown are not actionable: ignored.
        // SAFETY: the port is ours (registered in OPEN) and started or configured; this is the
        // last handle, so no queue is polled any more.
        unsafe { sys::rte_eth_dev_stop(id) };
        // SAFETY: stopped just above; nothing uses the port id afterwards (unregistered below).
        unsafe { sys::rte_eth_dev_close(id) };
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|&p| p != id);
    }
}

impl Port<MbufPool> for DpdkPort {
    #[inline]
    fn rx_burst(
        &mut self,
        _now: Nanos,
        _pool: &mut MbufPool,
        out: &mut Vec<Mbuf>,
        max: usize,
    ) -> usize {
        // The PMD refills its rx ring from the pool the port was opened with.
        self.io.rx(0, out, max)
    }

    #[inline]
    fn tx_burst(&mut self, _now: Nanos, pkts: &mut Vec<Mbuf>, _pool: &mut MbufPool) -> usize {
        self.io.tx(0, pkts)
    }

    fn link_up(&self) -> bool {
        self.link().is_ok_and(|l| l.up)
    }

    fn stats(&self) -> PortIoStats {
        self.io.stats(&self.shared, true)
    }

    fn describe(&self) -> String {
        self.shared.desc.clone()
    }
}

impl DpdkQueue {
    /// The port's id.
    pub fn port_id(&self) -> u16 {
        self.shared.info.port_id
    }
}

impl Port<MbufPool> for DpdkQueue {
    #[inline]
    fn rx_burst(
        &mut self,
        _now: Nanos,
        _pool: &mut MbufPool,
        out: &mut Vec<Mbuf>,
        max: usize,
    ) -> usize {
        match self.rxq {
            Some(q) => self.io.rx(q, out, max),
            None => 0,
        }
    }

    #[inline]
    fn tx_burst(&mut self, _now: Nanos, pkts: &mut Vec<Mbuf>, _pool: &mut MbufPool) -> usize {
        match self.txq {
            Some(q) => self.io.tx(q, pkts),
            None => {
                self.io.stats.tx_errors += pkts.len() as u64;
                pkts.clear(); // rte_pktmbuf_free each
                0
            }
        }
    }

    fn link_up(&self) -> bool {
        self.shared.link().is_ok_and(|l| l.up)
    }

    fn stats(&self) -> PortIoStats {
        self.io.stats(&self.shared, self.primary)
    }

    fn describe(&self) -> String {
        format!(
            "{}: rx queue {}, tx queue {}",
            self.shared.desc,
            self.rxq.map_or("-".to_string(), |q| q.to_string()),
            self.txq.map_or("-".to_string(), |q| q.to_string()),
        )
    }
}

impl DpdkPortMonitor {
    /// The device name the port was opened by.
    pub fn device(&self) -> &str {
        &self.shared.info.device
    }

    /// Link state now, without waiting.
    pub fn link(&self) -> Result<LinkInfo, DpdkError> {
        self.shared.link()
    }

    /// The PMD's extended statistics (allocates: control path).
    pub fn xstats(&self) -> Result<Vec<(String, u64)>, DpdkError> {
        self.shared.xstats()
    }
}

impl Eal {
    /// Take the link of ethdev `device` down or bring it back up (`rte_eth_dev_set_link_down`
    /// / `_up`), whoever has the port open: an operator's "shut", and link-down tests. Errors
    /// name the device and carry DPDK's text (a PMD without the operation: `ENOTSUP`).
    pub fn set_link(&self, device: &str, up: bool) -> Result<(), DpdkError> {
        let ctx = format!("DPDK port '{device}'");
        let id = lookup(self, device, &ctx)?;
        // SAFETY: `id` is a valid port id (just looked up); the PMD serializes link changes.
        let ret = unsafe {
            if up {
                sys::rte_eth_dev_set_link_up(id)
            } else {
                sys::rte_eth_dev_set_link_down(id)
            }
        };
        if ret != 0 {
            let call = if up {
                "rte_eth_dev_set_link_up"
            } else {
                "rte_eth_dev_set_link_down"
            };
            return Err(DpdkError::from_errno(format!("{ctx}: {call}"), -ret));
        }
        Ok(())
    }
}

/// The port id of `device`, or an error listing the ports that exist.
fn lookup(eal: &Eal, device: &str, ctx: &str) -> Result<u16, DpdkError> {
    let mut candidates = vec![device.to_string()];
    // A PCI address without its domain ("3b:00.0"): DPDK names the port "0000:3b:00.0".
    if device.len() == 7 && device.as_bytes()[2] == b':' && device.as_bytes()[5] == b'.' {
        candidates.push(format!("0000:{device}"));
    }
    for name in &candidates {
        let Ok(c) = CString::new(name.as_str()) else {
            return Err(DpdkError::msg(ctx, "name contains a NUL byte"));
        };
        let mut id = 0u16;
        // SAFETY: `c` is NUL-terminated and outlives the call; `id` is a valid out pointer.
        if unsafe { sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) } == 0 {
            return Ok(id);
        }
    }
    let names: Vec<String> = eal.port_names().into_iter().map(|(_, n)| n).collect();
    let ports = if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    };
    let text = format!(
        "no such ethdev (ports: {ports}); a vdev must be given to EAL (--vdev={device}), a NIC \
         bound to a DPDK driver (dpdk-devbind.py) and not excluded by --no-pci / -a"
    );
    Err(DpdkError::new(ctx, ENODEV, text))
}

/// ENODEV on Linux.
const ENODEV: i32 = 19;

/// A NUL-terminated C string in a fixed array, as a String.
fn c_str(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
