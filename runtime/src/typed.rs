//! Registering a [`PipelineMechanism`]: its typed pipeline and control handler behind an
//! [`ErasedPipeline`], so that the registry can hold any pipeline while replay and the live
//! workers still run each one's own monomorphized code, with the registry's admission chain.

use crate::build::switch_spec;
use crate::emulated::EmulatedSwitch;
use crate::mechanism::{MechanismSet, PipelineMechanism};
use crate::registry::{ErasedPipeline, Registry};
use crate::replay::{replay_stream_with, FrameSink, ReplayHooks, ReplayStats, StreamInput};
use crate::run::{run_on_platform, RunOptions, RunReport};
use longhaul_control::config::Config;
use longhaul_control::plane::Inline;
use longhaul_dataplane::asic::pfc::PfcGenerator;
use longhaul_dataplane::engine::{Admission, Switch};
use longhaul_dataplane::packet::HeapPool;
use longhaul_dataplane::replay::Harness;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;

impl Registry {
    /// Adds a mechanism that is a pipeline (`switch.pipeline = m.name()`), its switches with
    /// classic PFC as their admission ([`Registry::admitting`] for another chain).
    ///
    /// # Panics
    /// When a mechanism of the same name is already registered.
    pub fn pipeline<M: PipelineMechanism>(self, m: M) -> Self {
        Admitting::<PfcGenerator>(self, PhantomData).pipeline(m).0
    }

    /// A registry whose pipelines' switches run the admission chain `A` (a mechanism's stage at
    /// its head, classic PFC last: `longhaul_pipelines::Admission`): list the mechanisms on
    /// what this returns, then take the registry with `.into()`.
    pub fn admitting<A: Admission>() -> Admitting<A> {
        Admitting(Registry::new(), PhantomData)
    }
}

/// A registry being listed whose switches run the admission chain `A` ([`Registry::admitting`]).
pub struct Admitting<A>(Registry, PhantomData<fn() -> A>);

impl<A: Admission> Admitting<A> {
    /// As [`Registry::pipeline`], its switches with the chain `A`.
    pub fn pipeline<M: PipelineMechanism>(mut self, m: M) -> Self {
        let m = Arc::new(m);
        self.0
            .push_pipeline(m.clone(), Arc::new(Typed::<M, A>(m, PhantomData)));
        self
    }

    /// As [`Registry::mechanism`].
    pub fn mechanism<M: crate::Mechanism>(self, m: M) -> Self {
        Admitting(self.0.mechanism(m), PhantomData)
    }
}

impl<A> From<Admitting<A>> for Registry {
    fn from(a: Admitting<A>) -> Registry {
        a.0
    }
}

struct Typed<M, A>(Arc<M>, PhantomData<fn() -> A>);

impl<M: PipelineMechanism, A: Admission> ErasedPipeline for Typed<M, A> {
    fn replay(
        &self,
        registry: &Registry,
        cfg: &Config,
        inputs: Vec<StreamInput<'_>>,
        sink: &mut FrameSink<'_>,
        hooks: ReplayHooks<'_>,
    ) -> Result<ReplayStats, crate::Error> {
        let m = &self.0;
        let (pipeline, control) = (m.pipeline(cfg), m.control(cfg));
        replay_stream_with::<_, _, A>(registry, cfg, pipeline, control, inputs, sink, hooks)
    }

    fn emulated(&self, mechanisms: &dyn MechanismSet, cfg: &Config) -> Box<dyn EmulatedSwitch> {
        let m = &self.0;
        // The same pool as replay's, its buffers made on first use (an emulation builds many
        // switches, for the runs alone too, and most buffers are never touched).
        let pool = HeapPool::lazy(cfg.switch.pool_buffers, cfg.switch.buffer_data_room);
        let mut sw: Switch<_, _, A> =
            Switch::with_admission(switch_spec(cfg, mechanisms), pool, m.pipeline(cfg));
        sw.set_inline_control(
            Box::new(Inline(m.control(cfg))),
            cfg.control.control_latency_ns,
        );
        Box::new(Harness::new(sw))
    }

    fn run(
        &self,
        registry: Arc<Registry>,
        cfg: Config,
        path: PathBuf,
        opts: RunOptions,
    ) -> Result<RunReport, crate::Error> {
        let handler = self.0.control(&cfg);
        let m = self.0.clone();
        run_on_platform::<_, _, A, _>(
            registry,
            cfg,
            path,
            move |c: &Config| m.pipeline(c),
            handler,
            opts,
        )
    }
}
