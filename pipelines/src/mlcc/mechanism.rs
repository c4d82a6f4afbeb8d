//! MLCC's registration: the `mlcc` pipeline and its `[mlcc]` section.

use super::config::{NAME, SECTION};
use super::dci::MlccDci;
use super::host::{HostParamsTable, MlccHost, MlccHostParams};
use crate::baseline::control::BaselineControl;
use crate::baseline::BaselineCommand;
use longhaul_control::config::{Config, Section, SectionConfig};
use longhaul_runtime::{HostAgent, HostAgentParams, Mechanism, PipelineMechanism};

/// MLCC at the DCI switch (paper 001).
pub struct MlccMechanism;

impl Mechanism for MlccMechanism {
    fn name(&self) -> &'static str {
        NAME
    }
    fn docs(&self) -> &'static str {
        "docs/mlcc.md, docs/config.md"
    }
    fn section(&self) -> Option<&dyn Section> {
        Some(&SECTION)
    }
    /// The servers' side: R_NS from Switch-INT, R_DQM from ACKs, R_MLCC = min (eq. 10); the
    /// receiver's credit algorithm (Algorithm 1).
    fn host_agent(&self) -> Option<Box<dyn HostAgent>> {
        Some(Box::<MlccHost>::default())
    }
    /// `[emulation.agents.mlcc]`: `base_rtt_us`, HPCC's `T` on every loop.
    fn host_agent_params(&self) -> Option<&dyn HostAgentParams> {
        Some(&HostParamsTable)
    }
    fn host_agent_with(&self, params: Option<&dyn SectionConfig>) -> Option<Box<dyn HostAgent>> {
        let p = params
            .and_then(|p| p.as_any().downcast_ref::<MlccHostParams>())
            .copied()
            .unwrap_or_default();
        Some(Box::new(MlccHost::with_params(&p)))
    }
}

impl PipelineMechanism for MlccMechanism {
    type Command = BaselineCommand;
    type Pipeline = MlccDci;
    type Control = BaselineControl;
    fn pipeline(&self, cfg: &Config) -> MlccDci {
        MlccDci::new(cfg)
    }
    fn control(&self, cfg: &Config) -> BaselineControl {
        BaselineControl::new(cfg)
    }
}
