//! MLCC's registration: the `mlcc` pipeline and its `[mlcc]` section.

use super::config::{NAME, SECTION};
use super::dci::MlccDci;
use super::host::MlccHost;
use crate::baseline::control::BaselineControl;
use crate::baseline::BaselineCommand;
use longhaul_control::config::{Config, Section};
use longhaul_runtime::{HostAgent, Mechanism, PipelineMechanism};

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
