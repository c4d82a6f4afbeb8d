//! The registry: every mechanism a build has, in order. The generic layers (config parsing, the
//! control thread, replay, live runs) go through it and name no mechanism; the list itself is
//! `longhaul_pipelines::registry()`, and a test can build its own with a mechanism of its own.

use crate::emulated::EmulatedSwitch;
use crate::mechanism::{Mechanism, MechanismSet};
use crate::replay::{
    in_memory, FrameSink, ReplayHooks, ReplayInput, ReplayResult, ReplayStats, StreamInput,
};
use crate::run::{RunOptions, RunReport};
use crate::Error;
use longhaul_control::config::{Config, Schema, Section};
use longhaul_control::mechanisms::Mechanisms;
use longhaul_control::metrics::Series;
use longhaul_dataplane::engine::SwitchSnapshot;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Run `inputs` through a switch built from `cfg` (the pipeline `switch.pipeline` names, with
/// every registered mechanism's additions), entirely on virtual time. Inputs on a port id the
/// config does not have are an error (named).
pub fn replay(
    registry: &Registry,
    cfg: &Config,
    inputs: Vec<ReplayInput>,
) -> Result<ReplayResult, Error> {
    in_memory(cfg, inputs, |streams, sink| {
        replay_stream(registry, cfg, streams, sink, ReplayHooks::default())
    })
}

/// [`replay`] with inputs read as needed and outputs sent to `sink` as they leave (bounded
/// memory whatever the traces' sizes: `longhaul replay`).
pub fn replay_stream(
    registry: &Registry,
    cfg: &Config,
    inputs: Vec<StreamInput<'_>>,
    sink: &mut FrameSink<'_>,
    hooks: ReplayHooks<'_>,
) -> Result<ReplayStats, Error> {
    registry
        .find_pipeline(&cfg.switch.pipeline)?
        .replay(registry, cfg, inputs, sink, hooks)
}

/// Run the appliance described by the config at `path` (parsed with the registry's sections)
/// until `opts.stop` (or idle): the pipeline `switch.pipeline` names, with every registered
/// mechanism's additions.
pub fn run(registry: Arc<Registry>, path: &Path, opts: RunOptions) -> Result<RunReport, Error> {
    let cfg = Config::load_with(path, registry.as_ref())?;
    if let Some(what) = crate::run::missing_inputs(&cfg, path).into_iter().next() {
        return Err(Error::MissingInput {
            path: path.to_path_buf(),
            what,
        });
    }
    if opts.until_idle {
        if let Some(e) = crate::run::until_idle_refusal(&cfg, path) {
            return Err(Error::Refused(e));
        }
    }
    for m in registry.mechanisms() {
        m.before_live_run(&cfg);
    }
    let pipeline = registry.find_pipeline(&cfg.switch.pipeline)?;
    pipeline.run(registry.clone(), cfg, path.to_path_buf(), opts)
}

/// A pipeline with its types erased: what `switch.pipeline` selects. Made by
/// [`Registry::pipeline`] for any [`PipelineMechanism`](crate::PipelineMechanism), whose
/// switch and control plane it builds and runs (monomorphized: the worker loop calls the stages
/// directly).
pub trait ErasedPipeline: Send + Sync {
    /// Replay `inputs` through a switch of this pipeline built from `cfg`, its frames to `sink`.
    fn replay(
        &self,
        registry: &Registry,
        cfg: &Config,
        inputs: Vec<StreamInput<'_>>,
        sink: &mut FrameSink<'_>,
        hooks: ReplayHooks<'_>,
    ) -> Result<ReplayStats, Error>;

    /// A switch of this pipeline built from `cfg` for the closed-loop emulator (virtual time,
    /// its control handler inline like replay's).
    fn emulated(&self, mechanisms: &dyn MechanismSet, cfg: &Config) -> Box<dyn EmulatedSwitch>;

    /// Run it live.
    fn run(
        &self,
        registry: Arc<Registry>,
        cfg: Config,
        path: PathBuf,
        opts: RunOptions,
    ) -> Result<RunReport, Error>;
}

/// Every registered mechanism, and the pipelines among them.
#[derive(Clone, Default)]
pub struct Registry {
    mechanisms: Vec<Arc<dyn Mechanism>>,
    pipelines: Vec<(&'static str, Arc<dyn ErasedPipeline>)>,
}

impl Registry {
    /// An empty registry (no pipeline at all: add at least one).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a mechanism that is not a pipeline: it composes with whichever pipeline runs
    /// (through its section, `extend_spec` and its counters).
    ///
    /// # Panics
    /// When a mechanism of the same name is already registered, or its name is a generic config
    /// table's (a programming error in the registry list, found by every test that builds it).
    pub fn mechanism<M: Mechanism>(mut self, m: M) -> Self {
        self.check_name(m.name());
        self.mechanisms.push(Arc::new(m));
        self
    }

    pub(crate) fn push_pipeline(&mut self, m: Arc<dyn Mechanism>, erased: Arc<dyn ErasedPipeline>) {
        self.check_name(m.name());
        self.pipelines.push((m.name(), erased));
        self.mechanisms.push(m);
    }

    fn check_name(&self, name: &str) {
        assert!(
            self.get(name).is_none(),
            "mechanism '{name}' registered twice"
        );
        assert!(
            !longhaul_control::config::GENERIC_TABLES.contains(&name),
            "mechanism '{name}' has the name of a generic config table"
        );
    }

    /// The mechanism named `name`.
    pub fn get(&self, name: &str) -> Option<&dyn Mechanism> {
        self.mechanisms
            .iter()
            .find(|m| m.name() == name)
            .map(|m| m.as_ref())
    }

    /// The pipeline named `name` (`switch.pipeline`).
    pub fn find_pipeline(&self, name: &str) -> Result<&dyn ErasedPipeline, Error> {
        self.pipelines
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p.as_ref())
            .ok_or_else(|| {
                let names: Vec<&str> = self.pipelines.iter().map(|(n, _)| *n).collect();
                Error::UnknownPipeline {
                    name: name.to_owned(),
                    known: names.join(", "),
                }
            })
    }
}

impl MechanismSet for Registry {
    fn mechanisms(&self) -> &[Arc<dyn Mechanism>] {
        &self.mechanisms
    }
    fn control(self: Arc<Self>) -> Arc<dyn Mechanisms> {
        self
    }
}

impl Schema for Registry {
    fn pipelines(&self) -> Vec<&'static str> {
        self.pipelines.iter().map(|(n, _)| *n).collect()
    }

    fn sections(&self) -> Vec<&dyn Section> {
        self.mechanisms.iter().filter_map(|m| m.section()).collect()
    }
}

impl Mechanisms for Registry {
    fn schema(&self) -> &dyn Schema {
        self
    }

    fn stats_json(&self, snap: &SwitchSnapshot, out: &mut Map<String, Value>) {
        for m in &self.mechanisms {
            m.stats_json(snap, out);
        }
    }

    fn metrics(&self, snaps: &[SwitchSnapshot], out: &mut Vec<Series>) {
        for m in &self.mechanisms {
            m.metrics(snaps, out);
        }
    }
}
