//! FFI to the system DPDK 22.11 LTS (found with pkg-config, linked dynamically) and longhaul's C
//! shim (`shim.c`) for DPDK's static inline functions.
//!
//! Everything here is behind the `link` feature (longhaul-dataplane's `dpdk` feature turns it on);
//! without it this crate is empty and needs no DPDK, so `cargo build --workspace` works anywhere.
//!
//! Declarations are hand-written, and only for what longhaul calls. Rust never lays out a DPDK
//! struct except `struct rte_mbuf`, whose size and the offsets of the fields Rust reads on the fast
//! path are the constants in [`mbuf_layout`]: `shim.c` asserts the same numbers with
//! `_Static_assert` (so a DPDK with a different layout fails to build) and exports what the
//! compiler really laid out in [`lh_layout`], which [`check_layout`] compares at run time (EAL
//! init calls it) and a test compares too. Ports are configured, and stats and link state read,
//! through plain `lh_*` structs whose sizes are asserted the same way.
#![allow(non_camel_case_types)]

#[cfg(feature = "link")]
pub use ffi::*;

/// Offsets and sizes in `struct rte_mbuf` that Rust relies on (DPDK 22.11, x86_64/aarch64 with
/// `RTE_IOVA_AS_PA`, Debian's build). `shim.c` asserts each one with `_Static_assert`.
pub mod mbuf_layout {
    /// `sizeof(struct rte_mbuf)`; the private area (longhaul's `Meta`) starts right after it.
    pub const SIZE: usize = 128;
    /// `void *buf_addr`.
    pub const BUF_ADDR: usize = 0;
    /// `uint16_t data_off`: start of the frame from `buf_addr` (= headroom).
    pub const DATA_OFF: usize = 16;
    /// `uint16_t nb_segs`.
    pub const NB_SEGS: usize = 20;
    /// `uint32_t pkt_len`.
    pub const PKT_LEN: usize = 36;
    /// `uint16_t data_len`: bytes in this segment.
    pub const DATA_LEN: usize = 40;
    /// `uint16_t buf_len`: size of the buffer at `buf_addr`.
    pub const BUF_LEN: usize = 54;
    /// `struct rte_mempool *pool`: the pool the mbuf returns to.
    pub const POOL: usize = 56;
    /// `RTE_MBUF_PRIV_ALIGN`.
    pub const PRIV_ALIGN: usize = 8;
}

/// The symmetric RSS key (0x6d5a repeated): a flow and its reverse hash to the same queue with
/// Toeplitz, so both directions of a flow land on one lcore (DESIGN.md section 3).
pub const SYMMETRIC_RSS_KEY: [u8; 40] = {
    let mut k = [0u8; 40];
    let mut i = 0;
    while i < 40 {
        k[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    k
};

/// `RTE_ETH_RSS_IP` (rte_ethdev.h): hash IPv4/IPv6 frames, whatever their L4, on the address
/// pair only. With the symmetric key, a flow's data, its reverse direction and its CNPs and NACKs
/// (which carry other UDP source ports) land on one queue (docs/dpdk.md, "Several workers").
pub const RSS_HF_IP: u64 = {
    const IPV4: u64 = 1 << 2;
    const FRAG_IPV4: u64 = 1 << 3;
    const NONFRAG_IPV4_OTHER: u64 = 1 << 7;
    const IPV6: u64 = 1 << 8;
    const FRAG_IPV6: u64 = 1 << 9;
    const NONFRAG_IPV6_OTHER: u64 = 1 << 13;
    const IPV6_EX: u64 = 1 << 15;
    IPV4 | FRAG_IPV4 | NONFRAG_IPV4_OTHER | IPV6 | FRAG_IPV6 | NONFRAG_IPV6_OTHER | IPV6_EX
};

/// `SOCKET_ID_ANY`.
pub const SOCKET_ID_ANY: i32 = -1;
/// `RTE_ETH_NAME_MAX_LEN`.
pub const ETH_NAME_MAX_LEN: usize = 64;

#[cfg(feature = "link")]
mod ffi {
    use core::ffi::{c_char, c_int, c_uint, c_void};

    /// `struct rte_mempool` (opaque).
    #[repr(C)]
    pub struct rte_mempool {
        _opaque: [u8; 0],
    }

    /// `struct rte_mbuf` (opaque: Rust reads its fields only at the offsets in
    /// [`crate::mbuf_layout`]).
    #[repr(C)]
    pub struct rte_mbuf {
        _opaque: [u8; 0],
    }

    /// Configuration for [`lh_port_setup`] (shim.c `struct lh_port_conf`).
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct lh_port_conf {
        pub mp: *mut rte_mempool,
        pub rss_hf: u64,
        pub nb_rxq: u16,
        pub nb_txq: u16,
        pub nb_rxd: u16,
        pub nb_txd: u16,
        pub rss: u8,
        pub promisc: u8,
        pub rss_key_len: u8,
        pub pad_: [u8; 5],
        pub rss_key: [u8; 64],
    }

    /// What [`lh_port_setup`] did (shim.c `struct lh_port_result`).
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct lh_port_result {
        pub rss_hf: u64,
        pub flow_type_rss_offloads: u64,
        pub nb_rxd: u16,
        pub nb_txd: u16,
        pub max_rx_queues: u16,
        pub max_tx_queues: u16,
        pub socket_id: i32,
        pub promisc: i32,
        pub driver: [c_char; 32],
        pub step: [c_char; 64],
    }

    impl Default for lh_port_result {
        fn default() -> Self {
            lh_port_result {
                rss_hf: 0,
                flow_type_rss_offloads: 0,
                nb_rxd: 0,
                nb_txd: 0,
                max_rx_queues: 0,
                max_tx_queues: 0,
                socket_id: 0,
                promisc: 0,
                driver: [0; 32],
                step: [0; 64],
            }
        }
    }

    /// The part of `struct rte_eth_stats` longhaul reports (shim.c `struct lh_eth_stats`).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct lh_eth_stats {
        pub ipackets: u64,
        pub opackets: u64,
        pub ibytes: u64,
        pub obytes: u64,
        pub imissed: u64,
        pub ierrors: u64,
        pub oerrors: u64,
        pub rx_nombuf: u64,
    }

    /// `struct rte_eth_link` without its bitfields (shim.c `struct lh_link`).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct lh_link {
        pub speed_mbps: u32,
        pub up: u8,
        pub full_duplex: u8,
        pub autoneg: u8,
        pub pad_: u8,
    }

    /// `struct rte_eth_xstat` (shim.c asserts its size).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct rte_eth_xstat {
        pub id: u64,
        pub value: u64,
    }

    /// `struct rte_eth_xstat_name`: a NUL-terminated name of `RTE_ETH_XSTATS_NAME_SIZE` (64)
    /// bytes (shim.c asserts it).
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct rte_eth_xstat_name {
        pub name: [c_char; 64],
    }

    /// `lcore_function_t`: what `rte_eal_remote_launch` runs on a worker lcore.
    pub type lcore_function_t = unsafe extern "C" fn(arg: *mut c_void) -> c_int;

    /// What `lh_log_to_callback` calls: the message's level, the bytes written (not
    /// NUL-terminated), their length.
    pub type lh_log_cb_t = unsafe extern "C" fn(level: u32, buf: *const c_char, len: usize);

    /// Sizes and offsets as the C compiler laid them out (shim.c `struct lh_layout`).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct lh_layout_t {
        pub mbuf_size: u32,
        pub off_buf_addr: u32,
        pub off_data_off: u32,
        pub off_nb_segs: u32,
        pub off_pkt_len: u32,
        pub off_data_len: u32,
        pub off_buf_len: u32,
        pub off_pool: u32,
        pub pktmbuf_headroom: u32,
        pub priv_align: u32,
        pub port_conf_size: u32,
        pub port_result_size: u32,
        pub eth_stats_size: u32,
        pub link_size: u32,
        pub max_ethports: u32,
    }

    extern "C" {
        /// Exported by shim.c.
        pub static lh_layout: lh_layout_t;
        /// Exported by shim.c: `RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP`.
        pub static lh_rss_hf_ip: u64;

        // ---- DPDK (exported functions) ----
        pub fn rte_eal_init(argc: c_int, argv: *mut *mut c_char) -> c_int;
        pub fn rte_eal_cleanup() -> c_int;
        pub fn rte_strerror(errnum: c_int) -> *const c_char;
        pub fn rte_socket_id() -> c_uint;
        pub fn rte_pktmbuf_pool_create(
            name: *const c_char,
            n: c_uint,
            cache_size: c_uint,
            priv_size: u16,
            data_room_size: u16,
            socket_id: c_int,
        ) -> *mut rte_mempool;
        pub fn rte_mempool_free(mp: *mut rte_mempool);
        pub fn rte_eth_dev_count_avail() -> u16;
        pub fn rte_eth_dev_get_port_by_name(name: *const c_char, port_id: *mut u16) -> c_int;
        pub fn rte_eth_dev_get_name_by_port(port_id: u16, name: *mut c_char) -> c_int;
        pub fn rte_eth_dev_socket_id(port_id: u16) -> c_int;
        pub fn rte_eth_dev_stop(port_id: u16) -> c_int;
        pub fn rte_eth_dev_set_link_up(port_id: u16) -> c_int;
        pub fn rte_eth_dev_set_link_down(port_id: u16) -> c_int;
        pub fn rte_eth_dev_close(port_id: u16) -> c_int;
        pub fn rte_eth_promiscuous_enable(port_id: u16) -> c_int;
        pub fn rte_eth_xstats_get_names(
            port_id: u16,
            names: *mut rte_eth_xstat_name,
            size: c_uint,
        ) -> c_int;
        pub fn rte_eth_xstats_get(port_id: u16, xstats: *mut rte_eth_xstat, n: c_uint) -> c_int;
        pub fn rte_eal_remote_launch(
            f: lcore_function_t,
            arg: *mut c_void,
            worker_id: c_uint,
        ) -> c_int;
        pub fn rte_eal_wait_lcore(worker_id: c_uint) -> c_int;
        pub fn rte_get_main_lcore() -> c_uint;
        pub fn rte_get_next_lcore(i: c_uint, skip_main: c_int, wrap: c_int) -> c_uint;
        pub fn rte_lcore_to_cpu_id(lcore_id: c_int) -> c_int;
        pub fn rte_lcore_count() -> c_uint;

        // ---- shim.c: static inlines ----
        pub fn lh_errno() -> c_int;
        pub fn lh_lcore_id() -> c_uint;
        pub fn lh_rdtsc() -> u64;
        pub fn lh_tsc_hz() -> u64;
        pub fn lh_mempool_avail_count(mp: *const rte_mempool) -> c_uint;
        pub fn lh_mempool_size(mp: *const rte_mempool) -> c_uint;
        pub fn lh_pool_priv_size(mp: *mut rte_mempool) -> u16;
        pub fn lh_pool_data_room(mp: *mut rte_mempool) -> u16;
        pub fn lh_pktmbuf_alloc(mp: *mut rte_mempool) -> *mut rte_mbuf;
        pub fn lh_pktmbuf_free(m: *mut rte_mbuf);
        pub fn lh_pktmbuf_reset(m: *mut rte_mbuf);
        pub fn lh_pktmbuf_append(m: *mut rte_mbuf, len: u16) -> *mut c_char;
        pub fn lh_pktmbuf_prepend(m: *mut rte_mbuf, len: u16) -> *mut c_char;
        pub fn lh_pktmbuf_adj(m: *mut rte_mbuf, len: u16) -> c_int;
        pub fn lh_pktmbuf_trim(m: *mut rte_mbuf, len: u16) -> c_int;
        pub fn lh_mtod(m: *mut rte_mbuf) -> *mut c_void;
        pub fn lh_data_len(m: *const rte_mbuf) -> u16;
        pub fn lh_headroom(m: *const rte_mbuf) -> u16;
        pub fn lh_tailroom(m: *const rte_mbuf) -> u16;
        pub fn lh_mbuf_priv(m: *mut rte_mbuf) -> *mut c_void;
        pub fn lh_rx_burst(port: u16, queue: u16, pkts: *mut *mut rte_mbuf, n: u16) -> u16;
        pub fn lh_tx_burst(port: u16, queue: u16, pkts: *mut *mut rte_mbuf, n: u16) -> u16;

        // ---- shim.c: plain-struct wrappers ----
        pub fn lh_port_list(ids: *mut u16, max: c_int) -> c_int;
        pub fn lh_port_setup(
            port: u16,
            conf: *const lh_port_conf,
            result: *mut lh_port_result,
        ) -> c_int;
        pub fn lh_eth_stats(port: u16, stats: *mut lh_eth_stats) -> c_int;
        pub fn lh_link_get_nowait(port: u16, link: *mut lh_link) -> c_int;
        /// Routes DPDK's log stream (rte_openlog_stream, a fopencookie stream) to `cb`: each
        /// flushed write with the level of the message (`RTE_LOG_EMERG` 1 ..= `RTE_LOG_DEBUG`
        /// 8). 0, or -errno.
        pub fn lh_log_to_callback(cb: lh_log_cb_t) -> c_int;
        pub fn lh_ring_pair(
            a: *const c_char,
            b: *const c_char,
            depth: c_uint,
            socket: c_int,
            port_a: *mut u16,
            port_b: *mut u16,
        ) -> c_int;
    }

    /// The layout Rust expects, in the shape of [`lh_layout_t`].
    pub const EXPECTED_LAYOUT: lh_layout_t = {
        use crate::mbuf_layout as m;
        lh_layout_t {
            mbuf_size: m::SIZE as u32,
            off_buf_addr: m::BUF_ADDR as u32,
            off_data_off: m::DATA_OFF as u32,
            off_nb_segs: m::NB_SEGS as u32,
            off_pkt_len: m::PKT_LEN as u32,
            off_data_len: m::DATA_LEN as u32,
            off_buf_len: m::BUF_LEN as u32,
            off_pool: m::POOL as u32,
            // Not a layout fact Rust relies on: copied from what the shim reports.
            pktmbuf_headroom: 0,
            priv_align: m::PRIV_ALIGN as u32,
            port_conf_size: core::mem::size_of::<lh_port_conf>() as u32,
            port_result_size: core::mem::size_of::<lh_port_result>() as u32,
            eth_stats_size: core::mem::size_of::<lh_eth_stats>() as u32,
            link_size: core::mem::size_of::<lh_link>() as u32,
            max_ethports: 0,
        }
    };

    /// The layout the shim was compiled with.
    pub fn layout() -> lh_layout_t {
        // SAFETY: `lh_layout` is a `const` initialised struct in shim.c, never written, whose C
        // definition `lh_layout_t` mirrors field for field (all `uint32_t`).
        unsafe { lh_layout }
    }

    /// Compare the shim's layout with what Rust assumes; `Err` names the first difference.
    pub fn check_layout() -> Result<(), String> {
        let got = layout();
        let want = lh_layout_t {
            pktmbuf_headroom: got.pktmbuf_headroom,
            max_ethports: got.max_ethports,
            ..EXPECTED_LAYOUT
        };
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "DPDK struct layout differs from what longhaul was written for: shim reports \
                 {got:?}, Rust expects {want:?}"
            ))
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn layout_matches() {
            check_layout().unwrap();
            assert_eq!(layout().pktmbuf_headroom, 128);
            assert_eq!(core::mem::offset_of!(lh_port_conf, rss_key), 32);
        }

        #[test]
        fn rss_hf_matches_rte_ethdev_h() {
            // SAFETY: a `const uint64_t` in shim.c, never written.
            assert_eq!(unsafe { lh_rss_hf_ip }, crate::RSS_HF_IP);
        }

        #[test]
        fn symmetric_key() {
            assert_eq!(&crate::SYMMETRIC_RSS_KEY[..4], &[0x6d, 0x5a, 0x6d, 0x5a]);
        }
    }
}
