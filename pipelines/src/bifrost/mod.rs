//! Bifrost (paper 004) at the DCI switch: the downstream port algorithm ([`generator`],
//! Algorithm 1) runs as an admission stage of the engine ([`admission`]) on the governed
//! (ingress port, priority) pairs,
//! configured by a `[bifrost]` section next to any pipeline (`configs/bifrost-dci.toml` uses the
//! baseline). The upstream side is the traffic manager's PFC pause timers, which every port
//! already has, so two longhaul boxes back to back form a Bifrost link.
//!
//! Why a section and not a pipeline kind: Bifrost is MAC/traffic-manager behaviour (what PFC
//! generation is to the baseline), not a match-action stage; a section lets it run under the
//! baseline, THEMIS or any later pipeline without a combined kind for each.
//!
//! The emulated long link (virtual time) the tests and the perf example drive it over is test
//! support: `pipelines/tests/support/bifrost_link.rs`.
pub mod admission;
pub mod config;
pub mod generator;
pub mod mechanism;
