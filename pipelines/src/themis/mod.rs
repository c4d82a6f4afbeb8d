//! THEMIS (ICNP): the external switch's PNP (CNPs generated at the DC edge) and TRP (flows
//! throttled by recirculation), paper ../shared/papers/000_4444d6e70d68d606.txt, sections IV, V
//! and appendices B and D.
//!
//! [`esw::ThemisEsw`] wires the stages into the ESW pipeline (`switch.pipeline = "themis"`,
//! `[themis]`), and [`control::ThemisControl`] is its control plane.
//!
//! - [`syncookie`]: the TCP handshake monitor with SYN cookies (section IV, Fig. 5);
//! - [`daemon`]: THEMIS daemon messages and the QP_field table (section IV);
//! - [`pnp`]: CNP generation at the ESW with `cnp_interval` (section IV);
//! - [`trp`]: Algorithm 1 throttling by recirculation and reorder-free recovery (section V,
//!   appendices B and D).
pub mod config;
pub mod control;
pub mod daemon;
pub mod esw;
pub mod host;
pub mod mechanism;
pub mod pnp;
pub mod syncookie;
pub mod trp;
