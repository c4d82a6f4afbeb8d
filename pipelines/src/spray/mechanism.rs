//! Themis spraying's registration: the `spray` pipeline and its `[spray]` section.

use super::config::{NAME, SECTION};
use super::control::SprayControl;
use super::tor::{SprayCommand, SprayTor};
use longhaul_control::config::{Config, Section};
use longhaul_runtime::{Mechanism, PipelineMechanism};

/// Themis packet spraying at the ToR (paper 002).
pub struct SprayMechanism;

impl Mechanism for SprayMechanism {
    fn name(&self) -> &'static str {
        NAME
    }
    fn docs(&self) -> &'static str {
        "README.md#themis-packet-spraying-at-the-tor, docs/config.md"
    }
    fn section(&self) -> Option<&dyn Section> {
        Some(&SECTION)
    }
}

impl PipelineMechanism for SprayMechanism {
    type Command = SprayCommand;
    type Pipeline = SprayTor;
    type Control = SprayControl;
    fn pipeline(&self, cfg: &Config) -> SprayTor {
        SprayTor::new(cfg)
    }
    fn control(&self, cfg: &Config) -> SprayControl {
        SprayControl::new(cfg)
    }
}
