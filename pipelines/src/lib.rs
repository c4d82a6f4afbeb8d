//! longhaul pipelines: one module per paper role, each a set of stages built from the dataplane's
//! primitives. `build` turns a validated config into the switch spec; `replay` runs pcaps through.
pub mod baseline;
pub mod bifrost;
pub mod build;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod live;
pub mod platform;
pub mod replay;
pub mod run;
pub mod spray;
pub mod themis;
