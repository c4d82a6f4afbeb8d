//! Reflex (paper ../shared/papers/003_612de2274f801add.txt, section III): delay-based RDMA
//! congestion control across datacenters, helped at the external switches (ESW).
//!
//! [`esw::ReflexEsw`] is the ESW pipeline (`switch.pipeline = "reflex"`, `[reflex]`): the
//! baseline's forwarding with
//! - [`nsf`]: Near-Source Feedback (section III-C) on inter-DC data leaving through a WAN port:
//!   the Silent / Active / Cooling flow state machine on `T_src` and pseudo-ACKs every
//!   `T_interval`;
//! - [`ndt`]: Near-Destination Throttling (section III-D) on inter-DC data entering the DC: the
//!   Flow State Table from `RTT_dst` on returning ACKs, the Normal and Controlled queues (WRR
//!   `N_throttle:1`), out-of-order prevention, and the pause of the Controlled queue.
//!
//! The timestamp, its echo and the pseudo-ACK: `longhaul_dataplane::wire::reflex`
//! (docs/wire-formats.md). The rules, the choices where the paper is silent and the counters:
//! docs/reflex.md. [`host`] is the RNICs' side for the emulator (timestamps, their echo, RTT
//! from pseudo-ACKs). The control plane is the baseline's (Reflex has no tables to manage: its
//! flow tables are data-plane state).
pub mod config;
pub mod esw;
pub mod host;
pub mod mechanism;
pub mod ndt;
pub mod nsf;

/// An inter-DC flow: (IP source, IP destination, the requester's QPN) of its data packets, IPv4
/// addresses as IPv4-mapped IPv6. A data packet gives the QPN from its Reflex hop, an ACK from
/// its BTH.DestQP (with the addresses swapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub src: u128,
    pub dst: u128,
    pub qpn: u32,
}
