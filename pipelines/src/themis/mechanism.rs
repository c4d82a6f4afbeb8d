//! THEMIS's registration: the `themis` pipeline and its `[themis]` section, the recirculation
//! port TRP loops packets through, and a fresh SYN-cookie secret per live run.

use super::config::{ThemisConfig, NAME, SECTION};
use super::control::ThemisControl;
use super::esw::{use_random_cookie_secret, ThemisCommand, ThemisEsw};
use super::host::ThemisDaemon;
use longhaul_control::config::{Config, Section};
use longhaul_dataplane::asic::recirc::RecircConfig;
use longhaul_dataplane::engine::SwitchSpec;
use longhaul_runtime::{HostAgent, Mechanism, PipelineMechanism};

/// THEMIS at the external switch (paper 000).
pub struct ThemisMechanism;

impl Mechanism for ThemisMechanism {
    fn name(&self) -> &'static str {
        NAME
    }
    fn docs(&self) -> &'static str {
        "README.md#themis-at-the-external-switch, docs/config.md"
    }
    fn section(&self) -> Option<&dyn Section> {
        Some(&SECTION)
    }
    /// TRP's stand-in for the pre-filled port (section V): a recirculation port of the
    /// configured rate, per-loop delay and capacity.
    fn extend_spec(&self, cfg: &Config, spec: &mut SwitchSpec) {
        let Some(t) = cfg.section::<ThemisConfig>().and_then(|t| t.trp.as_ref()) else {
            return;
        };
        spec.recirc = Some(RecircConfig {
            rate_bps: t.recirc_rate_bps,
            loop_delay_ns: t.loop_delay_ns,
            capacity_pkts: t.recirc_capacity_pkts,
            capacity_bytes: t.recirc_capacity_pkts as u64 * cfg.switch.buffer_data_room as u64,
        });
    }
    /// The host daemon that reports QPs to the ESW, on the emulator's hosts.
    fn host_agent(&self) -> Option<Box<dyn HostAgent>> {
        Some(Box::new(ThemisDaemon))
    }
    /// A live run draws a random SYN-cookie secret (replay keeps `[switch] seed`).
    fn before_live_run(&self, cfg: &Config) {
        if cfg.switch.pipeline == NAME {
            use_random_cookie_secret();
        }
    }
}

impl PipelineMechanism for ThemisMechanism {
    type Command = ThemisCommand;
    type Pipeline = ThemisEsw;
    type Control = ThemisControl;
    fn pipeline(&self, cfg: &Config) -> ThemisEsw {
        ThemisEsw::new(cfg)
    }
    fn control(&self, cfg: &Config) -> ThemisControl {
        ThemisControl::new(cfg)
    }
}
