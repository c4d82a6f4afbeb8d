//! What the generic control layer knows of the mechanisms (the papers' switch-side halves): only
//! this trait, implemented by the registry (`longhaul_runtime::Registry`). It names the values
//! `switch.pipeline` may take and the mechanisms' configuration sections (for parsing and
//! reload), and lets each mechanism add to a worker's `/stats` object and to the metrics what its
//! pipeline counters and tables do not already carry.

use crate::config::Schema;
use crate::metrics::Series;
use longhaul_dataplane::engine::SwitchSnapshot;
use serde_json::{Map, Value};

/// The registered mechanisms, as the control thread sees them.
pub trait Mechanisms: Send + Sync {
    /// Registered pipeline names and sections, for parsing a reloaded config.
    fn schema(&self) -> &dyn Schema;

    /// Keys a mechanism adds to a worker's `/stats` object (e.g. engine-level counters of
    /// its own).
    fn stats_json(&self, _snap: &SwitchSnapshot, _out: &mut Map<String, Value>) {}

    /// Series the mechanisms add to the metrics, from every worker's snapshot.
    fn metrics(&self, _snaps: &[SwitchSnapshot], _out: &mut Vec<Series>) {}
}
