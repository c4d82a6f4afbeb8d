//! longhaul dataplane: the switch ASIC in software.
//!
//! Layout (DESIGN.md section 2): `packet` (buffers and per-packet metadata), `wire` (bounds-checked
//! header views and builders, RoCEv2 ICRC), `asic` (one switch primitive per file), `tm` (the
//! traffic manager of an egress port), `engine` (the run-to-completion worker and its virtual-time
//! driver), `port` and `pcap` (port backends), `time` (the clock every stage reads).
#![forbid(unsafe_op_in_unsafe_fn)]

pub mod asic;
pub mod conservation;
pub mod control;
pub mod counters;
pub mod dispatch;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod engine;
pub mod fault;
pub mod packet;
pub mod pcap;
pub mod port;
pub mod readahead;
pub mod replay;
pub mod time;
pub mod tm;
pub mod wire;
pub mod writebehind;

pub use packet::{BufPool, HeapBuf, HeapPool, Meta, PacketBuf};
pub use time::Nanos;
