//! DPDK backend (cargo feature `dpdk`): EAL, mbuf-backed packet buffers and ethdev ports.
//!
//! - [`Eal`]: the Environment Abstraction Layer, started once per process from the config's
//!   argument list (`--no-huge --no-pci --vdev=net_null0` works without hugepages or NICs).
//! - [`MbufPool`] / [`Mbuf`]: a DPDK mempool and its mbufs as the foundation's [`BufPool`] /
//!   [`PacketBuf`], zero-copy: the frame stays in the mbuf, longhaul's [`Meta`] lives in the
//!   mbuf's private area.
//! - [`DpdkPort`]: an ethdev (any PMD: a NIC by PCI address, or a vdev such as `net_null0`,
//!   `net_pcap0`, `net_ring0`) as a [`Port`].
//!
//! Errors from DPDK come back as [`DpdkError`], naming what failed (the port, the call) and
//! DPDK's error text (`rte_strerror`); nothing here panics on a DPDK error. All `unsafe` code of
//! the dataplane crate lives in this module and in `longhaul-dpdk-sys`.
//!
//! [`BufPool`]: crate::packet::BufPool
//! [`PacketBuf`]: crate::packet::PacketBuf
//! [`Meta`]: crate::packet::Meta
//! [`Port`]: crate::port::Port

mod eal;
mod lcore;
mod mbuf;
mod port;

pub use eal::{route_logs, DpdkError, Eal, LogLevel, LogSink};
pub use lcore::LcoreJoin;
/// The raw FFI (`longhaul-dpdk-sys`), for what this module does not wrap.
pub use longhaul_dpdk_sys as sys;
pub use longhaul_dpdk_sys::{RSS_HF_IP, SYMMETRIC_RSS_KEY};
pub use mbuf::{Mbuf, MbufPool, META_PRIV_SIZE};
pub use port::{
    DpdkPort, DpdkPortConfig, DpdkPortInfo, DpdkPortMonitor, DpdkQueue, EthStats, LinkInfo,
};
