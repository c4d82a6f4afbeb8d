//! longhaul pipelines: one folder per mechanism (a paper's switch-side half, or the baseline
//! switch), each owning its config section, stages, control plane and counters, and
//! [`registry`]: the list of them, one line each. The runtime (`longhaul_runtime`) and the
//! control layer (`longhaul_control`) know mechanisms only through that list and the
//! `Mechanism` trait; docs/adding-a-mechanism.md walks through adding one.
//!
//! The functions below are the registry's shortcuts for the CLI and the tests.
pub mod baseline;
pub mod bifrost;
pub mod mlcc;
pub mod ports;
pub mod reflex;
pub mod spray;
pub mod themis;

use longhaul_control::config::{Config, ConfigError};
use longhaul_dataplane::asic::pfc::PfcGenerator;
use longhaul_dataplane::engine::{Chain, SwitchSnapshot, SwitchSpec};
use longhaul_runtime::{Registry, ReplayInput, ReplayResult, RunOptions, RunReport};
use std::path::Path;
use std::sync::{Arc, LazyLock};

/// The admission chain of every switch this build makes: the first stage whose (ingress port,
/// class) pairs include a packet's accounts it. Bifrost on the pairs `[bifrost]` governs, classic
/// PFC on the rest. A mechanism with an admission stage of its own puts it at the head.
pub type Admission = Chain<bifrost::generator::BifrostGenerator, PfcGenerator>;

/// Every mechanism this build has. The order is the order sections are validated and counters
/// are printed in. Adding a mechanism: a folder, and one line here.
fn build_registry() -> Registry {
    Registry::admitting::<Admission>()
        .pipeline(baseline::mechanism::BaselineMechanism)
        .pipeline(themis::mechanism::ThemisMechanism)
        .pipeline(spray::mechanism::SprayMechanism)
        .pipeline(reflex::mechanism::ReflexMechanism)
        .pipeline(mlcc::mechanism::MlccMechanism)
        .mechanism(bifrost::mechanism::BifrostMechanism)
        .into()
}

static REGISTRY: LazyLock<Arc<Registry>> = LazyLock::new(|| Arc::new(build_registry()));

/// The registry of every mechanism this build has.
pub fn registry() -> Arc<Registry> {
    REGISTRY.clone()
}

/// Parses and validates a config with every registered mechanism's section.
pub fn parse_config(text: &str, file: &Path) -> Result<Config, ConfigError> {
    Config::parse_with(text, file, REGISTRY.as_ref())
}

/// Like [`parse_config`], every error.
pub fn parse_config_all(text: &str, file: &Path) -> Result<Config, Vec<ConfigError>> {
    Config::parse_all_with(text, file, REGISTRY.as_ref())
}

/// Reads, parses and validates a config with every registered mechanism's section.
pub fn load_config(path: &Path) -> Result<Config, ConfigError> {
    Config::load_with(path, REGISTRY.as_ref())
}

/// Like [`load_config`], every error.
pub fn load_config_all(path: &Path) -> Result<Config, Vec<ConfigError>> {
    Config::load_all_with(path, REGISTRY.as_ref())
}

/// The switch spec of `cfg` with every registered mechanism's additions.
pub fn switch_spec(cfg: &Config) -> SwitchSpec {
    longhaul_runtime::build::switch_spec(cfg, REGISTRY.as_ref())
}

/// Replays `inputs` through the switch `cfg` describes (`longhaul replay`).
pub fn replay(
    cfg: &Config,
    inputs: Vec<ReplayInput>,
) -> Result<ReplayResult, longhaul_runtime::Error> {
    longhaul_runtime::replay(&REGISTRY, cfg, inputs)
}

/// [`replay`] streaming: inputs read as needed, outputs to `sink` as they leave.
pub fn replay_stream(
    cfg: &Config,
    inputs: Vec<longhaul_runtime::StreamInput<'_>>,
    sink: &mut longhaul_runtime::FrameSink<'_>,
    hooks: longhaul_runtime::ReplayHooks<'_>,
) -> Result<longhaul_runtime::ReplayStats, longhaul_runtime::Error> {
    longhaul_runtime::replay_stream(&REGISTRY, cfg, inputs, sink, hooks)
}

/// Runs the appliance the config at `path` describes (`longhaul run`).
pub fn run(path: &Path, opts: RunOptions) -> Result<RunReport, longhaul_runtime::Error> {
    longhaul_runtime::run(registry(), path, opts)
}

/// A counter snapshot as (name, value) pairs, with every mechanism's own counters.
pub fn snapshot_counters(snap: &SwitchSnapshot) -> Vec<(String, u64)> {
    longhaul_runtime::snapshot_counters(REGISTRY.as_ref(), snap)
}
