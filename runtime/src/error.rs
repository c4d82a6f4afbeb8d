//! What a replay or a run can fail with ([`Error`]). Each message names what failed: the file,
//! key and line for a config, the port or input for I/O. A message includes its cause's, so no
//! variant has a `source` (a chain printed with `{:#}` would repeat it).

use longhaul_control::config::ConfigError;
use longhaul_control::http::ServeError;
use longhaul_dataplane::conservation::Unbalanced;
use std::io;
use std::path::PathBuf;

/// Why a replay or a run of the runtime failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config does not load or validate.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A port's input the config names is missing (`what` names the key).
    #[error("{}: {what}", path.display())]
    MissingInput { path: PathBuf, what: String },
    /// The config asks for what this kind of run refuses (the message names the key and line).
    #[error("{0}")]
    Refused(String),
    /// `switch.pipeline` names no pipeline of this build.
    #[error("no pipeline '{name}' in this build (pipelines: {known})")]
    UnknownPipeline { name: String, known: String },
    /// A replay input on a port id the config does not have.
    #[error("no port with id {port} (ports: {known})")]
    UnknownPort { port: u16, known: String },
    /// A replay input could not be read.
    #[error("{name}: {error}")]
    Input { name: String, error: io::Error },
    /// The replay driver saw work reported that was never done.
    #[error("replay stalled: the switch kept reporting work it did not do (a bug)")]
    Stalled,
    /// Frames lost without a counter (packet conservation).
    #[error(transparent)]
    Unbalanced(#[from] Unbalanced),
    /// A DPDK port in a build without the `dpdk` feature.
    #[error(
        "port '{port}': io kind \"dpdk\" needs a longhaul built with the dpdk feature \
         (cargo build --release --features dpdk; docs/dpdk.md)"
    )]
    NoDpdk { port: String },
    /// The platform (buffer pool, ports) did not start: the message names what (built by the
    /// platform, which a DPDK build implements).
    #[error("{0}")]
    Start(String),
    /// The management API or the metrics endpoint did not start.
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// A thread could not be started.
    #[error("starting {what}: {error}")]
    Spawn {
        what: &'static str,
        error: io::Error,
    },
    /// A worker did not start or did not stop cleanly (the message names it).
    #[error("{0}")]
    Worker(String),
}
