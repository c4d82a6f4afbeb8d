//! longhaul runtime: what runs any pipeline, knowing mechanisms only through the
//! [`Mechanism`] trait and the [`Registry`] that lists them.
//!
//! - [`registry`], [`mechanism`], [`typed`]: the registry and the traits a mechanism implements;
//! - [`error`]: what a replay or a run fails with;
//! - [`build`]: a validated config to the dataplane's switch spec and buffer pool;
//! - [`replay`]: deterministic pcap replay on virtual time (`longhaul replay`, conformance);
//! - [`emulated`]: a switch of any pipeline on virtual time, for the closed-loop emulator;
//! - [`run`], [`live`], [`platform`], [`dpdk`]: the live appliance (`longhaul run`): control
//!   thread, management API, metrics, and the workers on the heap platform (pcap and null
//!   ports) or on DPDK lcores and ethdev ports (feature `dpdk`).
//!
//! Imports flow one way: `build`, `replay` and `run` see the mechanisms as a [`MechanismSet`]
//! (`mechanism`); `registry` holds the entries and uses `replay` and `run` only for their types;
//! `typed` (which makes registry entries) uses `registry`, `replay` and `run`; `dpdk` uses
//! `platform`.
pub mod build;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod emulated;
pub mod error;
pub mod live;
pub mod mechanism;
pub mod platform;
pub mod registry;
pub mod replay;
pub mod run;
pub mod typed;

pub use emulated::EmulatedSwitch;
pub use error::Error;
pub use mechanism::{
    HostAddr, HostAgent, HostAgentParams, Mechanism, MechanismSet, PipelineMechanism, QpInfo,
    RxAction, TxKind,
};
pub use registry::{replay, replay_stream, run, ErasedPipeline, Registry};
pub use replay::{
    snapshot_counters, FrameSink, Progress, ReplayHooks, ReplayInput, ReplayResult, ReplayStats,
    Sample, StreamInput,
};
pub use run::{RunOptions, RunReport};
