//! The baseline's registration: the default pipeline (`switch.pipeline = "baseline"`, or no
//! `pipeline` key), with no section of its own (its tables are the generic `[[l2]]` and
//! `[[routes]]`).

use super::control::BaselineControl;
use super::{Baseline, BaselineCommand};
use longhaul_control::config::{Config, DEFAULT_PIPELINE};
use longhaul_runtime::{Mechanism, PipelineMechanism};

/// The baseline lossless RoCE switch.
pub struct BaselineMechanism;

impl Mechanism for BaselineMechanism {
    fn name(&self) -> &'static str {
        DEFAULT_PIPELINE
    }
    fn docs(&self) -> &'static str {
        "README.md#what-works-today, docs/config.md"
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
