//! Themis packet spraying at the ToR (paper 002, "Enabling Packet Spraying over Commodity RNICs
//! with In-Network Support", ../shared/papers/002_99b63cd65a1bacf0.txt).
//!
//! One ToR is Themis-S for its local senders and Themis-D for its local receivers
//! (`switch.pipeline = "spray"`, `[spray]`, `configs/spray-tor.toml`).
//!
//! - [`source`]: Themis-S (section 4.1 PSN-based spraying with the PathMap, section 4.4
//!   retransmission rerouting and path avoidance counters; appendix B table 3);
//! - [`bitmap`]: the double-length, variable-base proxy bitmap (section 5, appendix A);
//! - [`dest`]: Themis-D (section 4.2 Algorithm 1, section 4.3 lazy dropping and NACK
//!   regeneration, section 4.4 failure detection; appendix B table 4);
//! - [`tor`]: the pipeline: the baseline's forwarding with S on data from host ports toward the
//!   fabric and NAKs coming back, D on data leaving toward a host (egress, section 5) and
//!   ACKs/NAKs from hosts;
//! - [`control`]: the control plane (the `spray_qps` table).
//!
//! Wire-level choices (the path avoidance signal and the off-policy mark, both reserved bits of
//! BTH byte 4, which the ICRC does not cover) are in docs/wire-formats.md.
pub mod bitmap;
pub mod config;
pub mod control;
pub mod dest;
pub mod mechanism;
pub mod source;
pub mod tor;
