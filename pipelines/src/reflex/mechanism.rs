//! Reflex's registration: the `reflex` pipeline and its `[reflex]` section, and NDT's queues on
//! the DC ports (the Controlled queue next to the data class, served WRR `N_throttle:1`).

use super::config::{ReflexConfig, NAME, SECTION};
use super::esw::ReflexEsw;
use super::host::ReflexHost;
use crate::baseline::control::BaselineControl;
use crate::baseline::BaselineCommand;
use longhaul_control::config::{Config, Section};
use longhaul_dataplane::engine::SwitchSpec;
use longhaul_dataplane::tm::TmSched;
use longhaul_runtime::{HostAgent, Mechanism, PipelineMechanism};

/// Reflex at the external switch (paper 003).
pub struct ReflexMechanism;

impl Mechanism for ReflexMechanism {
    fn name(&self) -> &'static str {
        NAME
    }
    fn docs(&self) -> &'static str {
        "docs/reflex.md, docs/config.md"
    }
    fn section(&self) -> Option<&dyn Section> {
        Some(&SECTION)
    }
    /// The RNICs' side on the emulator's hosts: timestamps in data, their echo in ACKs, RTT
    /// samples from pseudo-ACKs (inter-DC QPs take no RTT from end-to-end ACKs).
    fn host_agent(&self) -> Option<Box<dyn HostAgent>> {
        Some(Box::<ReflexHost>::default())
    }
    /// NDT's queues (section III-D 1) on every DC port: the Controlled queue takes the data
    /// class's limits and lossless setting and is paused by its PFC priority; the WRR serves the
    /// data class with weight `n_throttle` and the Controlled queue with weight 1 (validation
    /// made sure the scheduler is WRR and neither queue is strict).
    fn extend_spec(&self, cfg: &Config, spec: &mut SwitchSpec) {
        let Some(r) = cfg.section::<ReflexConfig>() else {
            return;
        };
        let Some(n) = r.ndt.as_ref() else {
            return;
        };
        let (d, c) = (n.data_class as usize, n.controlled_queue as usize);
        for port in spec.ports.iter_mut() {
            if !r.dc_ports.contains(&port.info.id) {
                continue;
            }
            let tm = &mut port.tm;
            if let (Some(&data), true) = (tm.classes.get(d), c < tm.classes.len()) {
                tm.classes[c] = data;
                tm.queue_priority[c] = n.data_class;
            }
            if let TmSched::Wrr { weights } = &mut tm.sched {
                weights[d] = n.n_throttle;
                weights[c] = 1;
            }
        }
    }
}

impl PipelineMechanism for ReflexMechanism {
    type Command = BaselineCommand;
    type Pipeline = ReflexEsw;
    type Control = BaselineControl;
    fn pipeline(&self, cfg: &Config) -> ReflexEsw {
        ReflexEsw::new(cfg)
    }
    fn control(&self, cfg: &Config) -> BaselineControl {
        BaselineControl::new(cfg)
    }
}
