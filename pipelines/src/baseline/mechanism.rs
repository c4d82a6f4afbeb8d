//! The baseline's registration: the default pipeline (`switch.pipeline = "baseline"`, or no
//! `pipeline` key); its tables are the generic `[[l2]]` and `[[routes]]`, its own section the
//! optional `[int]` (INT source / transit for MLCC, `super::int`).

use super::control::BaselineControl;
use super::{Baseline, BaselineCommand};
use longhaul_control::config::{Config, Section, DEFAULT_PIPELINE};
use longhaul_runtime::{Mechanism, PipelineMechanism};

/// The baseline lossless RoCE switch.
pub struct BaselineMechanism;

impl Mechanism for BaselineMechanism {
    fn name(&self) -> &'static str {
        DEFAULT_PIPELINE
    }
    fn docs(&self) -> &'static str {
        "README.md#what-works-today, docs/config.md, docs/mlcc.md (INT)"
    }
    fn section(&self) -> Option<&dyn Section> {
        Some(&super::int::SECTION)
    }
}

impl PipelineMechanism for BaselineMechanism {
    type Command = BaselineCommand;
    type Pipeline = Baseline;
    type Control = BaselineControl;
    fn pipeline(&self, cfg: &Config) -> Baseline {
        Baseline::new(cfg)
    }
    fn control(&self, cfg: &Config) -> BaselineControl {
        BaselineControl::new(cfg)
    }
}
