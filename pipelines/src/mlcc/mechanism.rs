//! MLCC's registration: the `mlcc` pipeline and its `[mlcc]` section.

use super::config::{NAME, SECTION};
use super::dci::MlccDci;
use crate::baseline::control::BaselineControl;
use crate::baseline::BaselineCommand;
use longhaul_control::config::{Config, Section};
use longhaul_runtime::{Mechanism, PipelineMechanism};

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
