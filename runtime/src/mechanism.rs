//! The one trait through which the runtime knows a mechanism ([`Mechanism`]), and its typed
//! extension for a mechanism that is a pipeline ([`PipelineMechanism`]). A mechanism folder
//! under `pipelines/src/` implements them; the registry (`longhaul_pipelines::registry`) lists
//! them, one line each. docs/adding-a-mechanism.md walks through adding one.

use crate::platform::PlatformPipeline;
use longhaul_control::config::{Config, ConfigError, Section, SectionConfig, Validator};
use longhaul_control::mechanisms::Mechanisms;
use longhaul_control::metrics::Series;
use longhaul_control::plane::PipelineControl;
use longhaul_dataplane::engine::{SwitchSnapshot, SwitchSpec};
use serde_json::{Map, Value};
use std::sync::Arc;

/// A mechanism: a paper's switch-side half (or the baseline switch), owning its configuration
/// section, its stages, its control plane and its counters. Every method but `name` and `docs`
/// has a default that adds nothing.
pub trait Mechanism: Send + Sync + 'static {
    /// Its name: the config section's table (`[name]`) and, for a pipeline, the
    /// `switch.pipeline` value.
    fn name(&self) -> &'static str;

    /// Its documentation (a path in the repository, e.g. `docs/config.md#name`).
    fn docs(&self) -> &'static str;

    /// Its configuration section, if it has one.
    fn section(&self) -> Option<&dyn Section> {
        None
    }

    /// Switch primitives it adds to a switch built from `cfg` (a recirculation port, a PFC
    /// replacement). Called for every registered mechanism, whatever the pipeline: a mechanism
    /// that is not configured in `cfg` adds nothing.
    fn extend_spec(&self, _cfg: &Config, _spec: &mut SwitchSpec) {}

    /// Called once before a live run of `cfg` starts (e.g. to draw fresh secrets; replay keeps
    /// the config's seeds).
    fn before_live_run(&self, _cfg: &Config) {}

    /// Counters of its own in a snapshot that the pipeline's counters and tables do not carry
    /// (engine-level ones), as (name, value) in print order: replay's and run's final counters.
    fn counters(&self, _snap: &SwitchSnapshot, _out: &mut Vec<(String, u64)>) {}

    /// Keys it adds to a worker's `/stats` object.
    fn stats_json(&self, _snap: &SwitchSnapshot, _out: &mut Map<String, Value>) {}

    /// Series it adds to the Prometheus metrics, from every worker's snapshot.
    fn metrics(&self, _snaps: &[SwitchSnapshot], _out: &mut Vec<Series>) {}

    /// Every metric name it may add (documented with the mechanism; a test scrapes them).
    fn metric_names(&self) -> &'static [&'static str] {
        &[]
    }

    /// Its host-side half on the emulator's modeled hosts (a daemon reporting QPs, a congestion
    /// control hook), for a scenario that names it in `[emulation] host_agents`.
    fn host_agent(&self) -> Option<Box<dyn HostAgent>> {
        None
    }

    /// The parameters a scenario may give its host-side half (`[emulation.agents.NAME]`), if
    /// it takes any.
    fn host_agent_params(&self) -> Option<&dyn HostAgentParams> {
        None
    }

    /// Its host-side half with `params`, what [`HostAgentParams::validate`] made of the
    /// scenario's table (`None`: the scenario has none, the agent's defaults).
    fn host_agent_with(&self, _params: Option<&dyn SectionConfig>) -> Option<Box<dyn HostAgent>> {
        self.host_agent()
    }
}

/// The scenario table of a mechanism's host-side half (`[emulation.agents.NAME]`), validated
/// before anything runs, like a config section.
pub trait HostAgentParams: Send + Sync {
    /// Reads the table at `path` (`v.raw_at(path)`) and validates it, recording every problem
    /// with [`Validator::err`] at keys under `path.join(".")`, so that errors name the scenario
    /// file, the key and its line. `Ok(None)`: the table is absent, or broken (errors are then
    /// recorded). `Err` only for a syntax, unknown-key or type error, which stops parsing.
    fn validate(
        &self,
        v: &mut Validator<'_>,
        path: &[&str],
    ) -> Result<Option<Arc<dyn SectionConfig>>, ConfigError>;
}

/// A modeled host's addresses, as a host agent sees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostAddr {
    pub ip: std::net::Ipv4Addr,
    pub mac: [u8; 6],
    /// The MAC of the port at the other end of its link (where its frames go).
    pub gw_mac: [u8; 6],
    /// Its link's rate, bit/s.
    pub rate_bps: u64,
}

/// A QP on a modeled host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpInfo {
    pub peer_ip: std::net::Ipv4Addr,
    pub local_qpn: u32,
    pub peer_qpn: u32,
    /// The requester (data sender) end, or the responder.
    pub requester: bool,
    /// The peer is in another datacenter (the emulator's hosts name their `dc`; false when
    /// either does not).
    pub remote: bool,
}

/// What a host agent says a frame the host is about to send is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxKind {
    /// A data packet of the host's requester QP `local_qpn`.
    Data { local_qpn: u32 },
    /// Anything else: ACK, NAK, CNP, a frame an agent made.
    Control,
}

/// What a host agent makes of a frame the host received, before the RNIC sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxAction {
    /// The RNIC takes the frame (the agent may have rewritten it, e.g. stripped telemetry).
    Pass,
    /// A feedback packet the agent took: an RTT sample of `rtt_ns` for the host's requester QP
    /// `local_qpn`, about its packet `psn`. It acknowledges nothing: the QP's congestion
    /// control gets the sample, its transport nothing.
    RttSample {
        local_qpn: u32,
        psn: u32,
        rtt_ns: u64,
    },
    /// The agent took the frame; nothing for the RNIC.
    Consumed,
    /// A rate for the host's requester QP `local_qpn` that the agent computed from a feedback
    /// packet (MLCC: `R_NS` from a Switch-INT, `R_DQM` from an ACK), for loop `loop_id` (0..4):
    /// a QP the agent controls ([`HostAgent::rate_control`]) sends at the least of its loops'
    /// rates. `pass`: the RNIC takes the frame as well (an ACK).
    Rate {
        local_qpn: u32,
        loop_id: u8,
        bps: u64,
        pass: bool,
    },
}

/// A mechanism's host-side half in the emulator: what a real host runs next to its RNIC for
/// the mechanism (e.g. THEMIS's daemon). One per host.
pub trait HostAgent: Send {
    /// A QP was created on `host`: frames the host sends at once (e.g. a report to its switch).
    fn on_qp_created(&mut self, _host: &HostAddr, _qp: &QpInfo, _out: &mut Vec<Vec<u8>>) {}

    /// `frame` is about to leave `host` at `now` (the start of its transmission): the agent may
    /// rewrite it (e.g. add a timestamp).
    fn on_tx(&mut self, _host: &HostAddr, _now: u64, _kind: TxKind, _frame: &mut Vec<u8>) {}

    /// `frame` arrived at `host` at `now`, before the RNIC sees it.
    fn on_rx(&mut self, _host: &HostAddr, _now: u64, _frame: &mut Vec<u8>) -> RxAction {
        RxAction::Pass
    }

    /// Whether the end-to-end ACKs of requester QP `qp` give its congestion control RTT
    /// samples (true unless an agent takes that over, as Reflex does for inter-DC QPs).
    fn ack_rtt(&self, _qp: &QpInfo) -> bool {
        true
    }

    /// Whether requester QP `qp` sends at the rates this agent gives it ([`RxAction::Rate`])
    /// instead of under the scenario's congestion control (MLCC's inter-DC QPs).
    fn rate_control(&self, _qp: &QpInfo) -> bool {
        false
    }
}

/// A mechanism that is a pipeline (`switch.pipeline = name`): the ingress/egress stages that
/// run on every worker, and the control-plane handler (tables' master copy, punt handler,
/// reload) on the control thread. Registered with [`Registry::pipeline`](crate::Registry).
pub trait PipelineMechanism: Mechanism {
    /// The pipeline's own commands (table changes, register resets).
    type Command: Clone + Send + 'static;
    /// The stages, for every buffer pool the build has (heap, and DPDK mbufs).
    type Pipeline: PlatformPipeline<Self::Command>;
    /// The control-plane handler.
    type Control: PipelineControl<Command = Self::Command>;

    /// One worker's pipeline for `cfg` (a validated config with this pipeline selected).
    fn pipeline(&self, cfg: &Config) -> Self::Pipeline;

    /// The control-plane handler for `cfg`.
    fn control(&self, cfg: &Config) -> Self::Control;
}

/// A set of registered mechanisms, as building a switch, replay and the live run see it (the
/// [`Registry`](crate::Registry) is one).
pub trait MechanismSet: Send + Sync {
    /// Every mechanism, in registration order.
    fn mechanisms(&self) -> &[Arc<dyn Mechanism>];

    /// The same mechanisms as the control thread sees them (config schema for reloads, their
    /// `/stats` keys and metrics).
    fn control(self: Arc<Self>) -> Arc<dyn Mechanisms>;
}
