//! MLCC (paper ../shared/papers/001_faa74aeae06b485b.txt, section 3): cross-DC congestion
//! control with short control loops around the DCI switches.
//!
//! [`dci::MlccDci`] is the DCI pipeline (`switch.pipeline = "mlcc"`, `[mlcc]`), both roles in
//! one (every DCI is the sender-side DCI of the flows leaving its DC and the receiver-side DCI of
//! those entering it), on the baseline's forwarding:
//! - [`feedback`]: the near-source feedback loop (section 3.2.1): inter-DC data leaving the DC
//!   has its INT stack read and stripped, and the stack goes back to the sender in a Switch-INT;
//! - [`receiver`]: the receiver-driven loop (section 3.2.2): a PFQ per inter-DC flow entering the
//!   DC, dequeued at the receiver's `R_credit`, `C_D` in the data, `C_R` from the ACKs; and
//!   [`dqm`] (section 3.3.1), the end-to-end rate written into the ACKs.
//!
//! The INT the intra-DC switches add is the baseline's `[int]` stage
//! (`crate::baseline::int`). Formats: `longhaul_dataplane::wire::mlcc` and
//! docs/wire-formats.md; rules and the choices where the paper is silent: docs/mlcc.md.
pub mod config;
pub mod dci;
pub mod dqm;
pub mod feedback;
pub mod host;
pub mod hpcc;
pub mod mechanism;
pub mod receiver;

/// An inter-DC flow: (IP source, IP destination, the responder's QPN) of its data packets, IPv4
/// addresses as IPv4-mapped IPv6. Data gives the QPN from its BTH.DestQP; an ACK from its
/// MCETH (with the addresses swapped).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub src: u128,
    pub dst: u128,
    pub qpn: u32,
}
