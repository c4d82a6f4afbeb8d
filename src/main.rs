//! `longhaul`: the command line. Everything it does lives in the library crates; this file only
//! parses arguments, loads files and prints.

mod replay_cmd;
mod replay_plot;
mod reproduce;
mod rfc2544;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use longhaul_control::config::Config;
use longhaul_pipelines::load_config_all;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The configuration `replay` uses when no `--config` is given.
pub(crate) const EMBEDDED_CONFIG: &str = include_str!("../configs/baseline.toml");
/// The trace `replay` feeds to port `dc0` when no `--in` is given (perf/gen_trace.py made it).
pub(crate) const EMBEDDED_TRACE: &[u8] = include_bytes!("../examples/roce-64flows.pcap");
pub(crate) const EMBEDDED_TRACE_PORT: &str = "dc0";

/// `--version`: the crate version and whether DPDK ports are built in.
const VERSION: &str = if cfg!(feature = "dpdk") {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (DPDK ports: built in, DPDK 22.11)"
    )
} else {
    concat!(
        env!("CARGO_PKG_VERSION"),
        " (DPDK ports: not built in; cargo build --features dpdk)"
    )
};

#[derive(Parser)]
#[command(
    name = "longhaul",
    version = VERSION,
    about = "A user-space switch for cross-datacenter RDMA"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Replay pcaps through a switch on virtual time and write what each port emits.
    ///
    /// With no arguments, replays the embedded 64-flow RoCE trace into port dc0 of the embedded
    /// baseline config and prints the counters.
    Replay(replay_cmd::ReplayArgs),
    /// List the mechanisms this build has: each one's name (its config section and, for a
    /// pipeline, its `switch.pipeline` value), what it is, and where its documentation is.
    Mechanisms,
    /// Validate a configuration file and exit (0: valid; 1: errors, each naming its key).
    CheckConfig {
        /// The file.
        file: PathBuf,
    },
    /// Run the appliance live on the configured ports, with the management API and metrics,
    /// until SIGINT/SIGTERM; prints the final counters.
    Run {
        /// Switch configuration (TOML).
        #[arg(long)]
        config: PathBuf,
        /// Stop by itself once every pcap input is used up and the switch is empty (refused
        /// when an input never ends: a pcap rx with rx_loop = true, a DPDK port).
        #[arg(long)]
        until_idle: bool,
        /// Print only non-zero counters at the end.
        #[arg(long)]
        nonzero: bool,
    },
    /// Run a closed-loop emulation: modeled RDMA hosts and links around real longhaul switches
    /// (each built from its config), on virtual time; writes flows.csv and summary.txt.
    Emulate {
        /// The scenario (TOML; scenarios/).
        scenario: PathBuf,
        /// Where flows.csv and summary.txt go (default: print the summary only).
        #[arg(long, value_name = "DIR")]
        out_dir: Option<PathBuf>,
        /// Override `[emulation] seed`.
        #[arg(long)]
        seed: Option<u64>,
        /// Override `[emulation] duration_us` (microseconds of virtual time).
        #[arg(long, value_name = "US")]
        duration: Option<f64>,
        /// Run past the duration until every flow is done (bounded by --max-duration); the
        /// flows still unfinished then are listed in the summary with why.
        #[arg(long)]
        until_done: bool,
        /// With --until-done: the virtual time the run may not pass, in microseconds (default
        /// 10 s).
        #[arg(long, value_name = "US", requires = "until_done")]
        max_duration: Option<f64>,
    },
    /// Reproduce a paper's main evaluation in the emulator (its scenario family, every load
    /// point, mechanism on and off, N seeds) and write a report putting the paper's figures
    /// beside ours, with a verdict per claim (scenarios/papers/; docs/reproduce.md).
    Reproduce(reproduce::ReproduceArgs),
    /// Talk to a running longhaul's management API (health, stats, tables, table entries,
    /// reload); exit status 0 on success, 1 when the API refuses or cannot be reached, 2 on a
    /// usage error.
    Ctl(longhaul_control::ctl::CtlArgs),
    /// RFC 2544 throughput (section 26.1) of a device under test between two DPDK ports: a
    /// binary search on the offered rate for zero loss at each frame size; prints the table,
    /// writes CSV, JSON and plots with --out-dir (perf/rfc2544.sh runs it against longhaul).
    Rfc2544(rfc2544::Rfc2544Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Replay(args) => replay_cmd::cmd_replay(args),
        Cmd::CheckConfig { file } => cmd_check_config(&file),
        Cmd::Reproduce(args) => reproduce::cmd_reproduce(args),
        Cmd::Mechanisms => {
            let reg = longhaul_pipelines::registry();
            let pipelines = longhaul_control::config::Schema::pipelines(reg.as_ref());
            for m in longhaul_runtime::MechanismSet::mechanisms(reg.as_ref()) {
                let mut what = Vec::new();
                if pipelines.contains(&m.name()) {
                    what.push(format!("switch.pipeline = \"{}\"", m.name()));
                }
                if let Some(s) = m.section() {
                    what.push(format!("[{}]", s.name()));
                }
                if m.host_agent().is_some() {
                    what.push("host agent".into());
                }
                println!("{:<10} {:<48} {}", m.name(), what.join(", "), m.docs());
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run {
            config,
            until_idle,
            nonzero,
        } => cmd_run(&config, until_idle, nonzero),
        Cmd::Emulate {
            scenario,
            out_dir,
            seed,
            duration,
            until_done,
            max_duration,
        } => cmd_emulate(
            &scenario,
            out_dir.as_deref(),
            seed,
            duration,
            until_done.then_some(max_duration.unwrap_or(DEFAULT_MAX_DURATION_US)),
        ),
        Cmd::Rfc2544(args) => rfc2544::cmd_rfc2544(args),
        Cmd::Ctl(args) => Ok(ExitCode::from(
            longhaul_control::ctl::run(&args).clamp(0, 255) as u8,
        )),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            longhaul_control::logs::error(&format!("{e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// Structured logs on stderr for `run`: reloads, table changes, refused API requests and
/// commands, link changes (`LONGHAUL_LOG` filters: a level or a comma-separated list of
/// `target=level`, e.g. `warn` or `info,longhaul_control=debug`; default `info`;
/// `LONGHAUL_LOG_FORMAT=json` for one JSON object per line). The filter is tracing-subscriber's
/// `Targets` rather than `EnvFilter`: span and field directives are not needed, and EnvFilter's
/// regex engine was about 5% of the release build's CPU from nothing (perf/README.md).
fn init_logs() {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::{Layer, SubscriberExt};
    use tracing_subscriber::util::SubscriberInitExt;
    let (filter, bad) = match std::env::var("LONGHAUL_LOG") {
        Ok(v) => match v.parse::<Targets>() {
            Ok(t) => (t, None),
            Err(e) => (
                Targets::new().with_default(tracing::Level::INFO),
                Some((v, e)),
            ),
        },
        Err(_) => (Targets::new().with_default(tracing::Level::INFO), None),
    };
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let r = if longhaul_control::logs::json() {
        tracing_subscriber::registry()
            .with(fmt.json().with_filter(filter))
            .try_init()
    } else {
        tracing_subscriber::registry()
            .with(fmt.with_filter(filter))
            .try_init()
    };
    // Already set (a test harness): keep that one.
    let _ = r;
    if let Some((v, e)) = bad {
        tracing::warn!("LONGHAUL_LOG={v:?} is not a filter ({e}): logging at info");
    }
}

fn cmd_run(config: &Path, until_idle: bool, nonzero: bool) -> Result<ExitCode> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    init_logs();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .context("installing the SIGINT/SIGTERM handler")?;
    let mut opts = longhaul_runtime::RunOptions::new(stop);
    opts.until_idle = until_idle;
    opts.report_memory = true;
    opts.on_ready = Some(Arc::new(|api, metrics| {
        use longhaul_control::logs::note;
        note(&format!("management API on http://{api}"));
        if let Some(m) = metrics {
            note(&format!("metrics on http://{m}/metrics"));
        }
        note("running; Ctrl-C (SIGINT) or SIGTERM stops");
    }));
    let report = longhaul_pipelines::run(config, opts).map_err(|e| anyhow!(e))?;
    let w = &report.worker;
    println!(
        "run: {} frames in, {} out, {} loop iterations",
        w.rx, w.tx, w.iterations
    );
    if w.swaps > 0 {
        println!(
            "reloads that rebuilt the switch: {} ({} frames sent by the replaced switches, {} dropped at their drain deadline)",
            w.swaps, w.drained_on_swap, w.dropped_on_swap
        );
    }
    if w.swaps == 0 {
        // Without a rebuild the last switch saw every frame: its ledger must balance.
        if let Err(e) = report.snapshot.ledger().check() {
            longhaul_control::logs::error(&e.to_string());
        }
    }
    // The port I/O's own counters (what the files, rings or NICs took), beside the switch's.
    for (p, io) in report.snapshot.ports.iter().zip(&w.ports) {
        for (what, v) in [
            ("rx_nobuf", io.rx_nobuf),
            ("rx_errors", io.rx_errors),
            ("tx_errors", io.tx_errors),
        ] {
            if !nonzero || v != 0 {
                println!("io.{}.{what} {v}", p.name);
            }
        }
    }
    for (name, v) in longhaul_pipelines::snapshot_counters(&report.snapshot) {
        if !nonzero || v != 0 {
            println!("{name} {v}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The emulator's heap on transparent huge pages. Its frames in flight (12.5 MB a millisecond
/// of a 100 Gb/s link) are spread over far more 4 KiB pages than the TLB maps, and glibc's
/// malloc asks the kernel for huge pages (`madvise(MADV_HUGEPAGE)`, what THP's default
/// `madvise` mode needs) only when its `glibc.malloc.hugetlb` tunable is set, which it reads
/// at exec: so `longhaul emulate` executes itself once more with the tunable added (about 11%
/// less wall time on scenarios/themis.toml, perf/README.md). Not when the tunable is already
/// set (to anything: the user's choice stands), when THP is off, or when
/// `LONGHAUL_EMULATE_THP` is set to anything (the exec sets it, so it happens at most once,
/// even where glibc erases the tunable; `LONGHAUL_EMULATE_THP=0` keeps a run in its first
/// process). If the exec fails, the run goes on in this process. The outputs do not depend on
/// it.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn emulate_on_huge_pages() {
    use std::os::unix::process::CommandExt;
    const TUNABLE: &str = "glibc.malloc.hugetlb";
    const ONCE: &str = "LONGHAUL_EMULATE_THP";
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if tunables.contains(TUNABLE) || std::env::var_os(ONCE).is_some() {
        return;
    }
    match std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled") {
        Ok(mode) if !mode.contains("[never]") => {}
        _ => return,
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let tunables = if tunables.is_empty() {
        format!("{TUNABLE}=1")
    } else {
        format!("{tunables}:{TUNABLE}=1")
    };
    // Returns only when the exec failed.
    let _ = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("GLIBC_TUNABLES", tunables)
        .env(ONCE, "1")
        .exec();
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn emulate_on_huge_pages() {}

/// `--until-done`'s bound when `--max-duration` is not given: 10 s of virtual time.
const DEFAULT_MAX_DURATION_US: f64 = 10e6;

fn cmd_emulate(
    path: &Path,
    out_dir: Option<&Path>,
    seed: Option<u64>,
    duration_us: Option<f64>,
    until_done_us: Option<f64>,
) -> Result<ExitCode> {
    emulate_on_huge_pages();
    let registry = longhaul_pipelines::registry();
    let mut s = match longhaul_emulator::scenario::Scenario::load(path, registry.as_ref()) {
        Ok(s) => s,
        Err(errs) => {
            for e in &errs {
                eprintln!("{e}");
            }
            return Ok(ExitCode::FAILURE);
        }
    };
    if duration_us.is_some_and(|d| !(d > 0.0 && d <= 60e6)) {
        bail!("--duration: must be more than 0 and at most 60000000 (us)");
    }
    if until_done_us.is_some_and(|d| !(d > 0.0 && d <= 600e6)) {
        bail!("--max-duration: must be more than 0 and at most 600000000 (us)");
    }
    let o = longhaul_emulator::Overrides {
        seed,
        duration_ns: duration_us.map(|d| (d * 1000.0).round() as u64),
        until_done_ns: until_done_us.map(|d| (d * 1000.0).round() as u64),
        skip_alone: false,
    };
    let wall = std::time::Instant::now();
    // A progress line on a terminal, once the run has taken a couple of seconds.
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut last = std::time::Instant::now();
    let mut shown = false;
    let mut progress = |now: u64, duration: u64| {
        if tty && wall.elapsed().as_secs() >= 2 && last.elapsed().as_millis() >= 500 {
            last = std::time::Instant::now();
            shown = true;
            eprint!(
                "\rlonghaul: emulating: {:.3} of {:.3} ms virtual ({:.0}%)   ",
                now as f64 / 1e6,
                duration as f64 / 1e6,
                100.0 * now as f64 / duration.max(1) as f64
            );
        }
    };
    let report = longhaul_emulator::emulate_with_progress(&mut s, &registry, o, &mut progress)
        .map_err(|e| anyhow!(e))?;
    if shown {
        eprintln!();
    }
    let secs = wall.elapsed().as_secs_f64();
    let hops = report.outcome.hops + report.alone_hops;
    eprintln!(
        "longhaul: {hops} frame hops emulated in {secs:.2} s ({:.2} M hops/s, the runs alone included)",
        hops as f64 / secs.max(1e-9) / 1e6
    );
    print!("{}", longhaul_emulator::output::summary(&report));
    if let Some(dir) = out_dir {
        let names = longhaul_emulator::output::write(dir, &report)
            .with_context(|| format!("writing {}", dir.display()))?;
        println!("wrote into {}: {}", dir.display(), names.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

fn cmd_check_config(file: &Path) -> Result<ExitCode> {
    match load_config_all(file) {
        Ok(cfg) => {
            let (errors, warnings) = longhaul_runtime::run::run_refusals(&cfg, file);
            for w in &warnings {
                eprintln!("{}: warning: {w}", file.display());
            }
            if !errors.is_empty() {
                for e in &errors {
                    eprintln!("{}: {e}", file.display());
                }
                return Ok(ExitCode::FAILURE);
            }
            println!(
                "{}: ok ({} ports, {} routes, {} L2 entries, pipeline {})",
                file.display(),
                cfg.ports.len(),
                cfg.routes.len(),
                cfg.l2.len(),
                cfg.switch.pipeline
            );
            // The same line `run` logs at start (one function computes both).
            println!(
                "{}: memory: {}",
                file.display(),
                longhaul_runtime::platform::pool_note(&cfg)
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(errs) => {
            for e in &errs {
                eprintln!("{e}");
            }
            Ok(ExitCode::FAILURE)
        }
    }
}

/// `PORT=PATH` with the port resolved against the config (name or numeric id).
pub(crate) fn port_arg(cfg: &Config, arg: &str) -> Result<(u16, String, PathBuf)> {
    let (port, path) = arg
        .split_once('=')
        .ok_or_else(|| anyhow!("'{arg}': expected PORT=FILE"))?;
    let p = cfg
        .ports
        .iter()
        .find(|p| p.name == port || port.parse::<u16>().is_ok_and(|id| id == p.id))
        .ok_or_else(|| {
            let names: Vec<&str> = cfg.ports.iter().map(|p| p.name.as_str()).collect();
            anyhow!("'{arg}': no port '{port}' (ports: {})", names.join(", "))
        })?;
    Ok((p.id, p.name.clone(), PathBuf::from(path)))
}
