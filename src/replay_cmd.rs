//! `longhaul replay`: pcaps streamed through a switch on virtual time. Inputs are read as the
//! replay needs them and outputs written as frames leave, so memory stays bounded whatever the
//! traces' sizes. Prints a summary a person reads first (frames, time, per port, drops by
//! reason), then the counters (non-zero ones unless `--all`); `--json` prints one JSON object
//! instead. A progress line on a terminal.

use crate::replay_plot::Plot;
use crate::{port_arg, EMBEDDED_CONFIG, EMBEDDED_TRACE, EMBEDDED_TRACE_PORT};
use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use longhaul_dataplane::conservation::Ledger;
use longhaul_dataplane::counters::DropReason;
use longhaul_dataplane::pcap::{PcapReader, PcapWriter};
use longhaul_dataplane::readahead::{self, ReadAhead};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::writebehind::WriteBehind;
use longhaul_pipelines::{load_config, parse_config, replay_stream};
use longhaul_runtime::{ReplayHooks, ReplayStats, Sample, StreamInput};
use serde_json::{json, Map, Value};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// What `longhaul replay` was asked.
#[derive(clap::Args, Debug)]
pub struct ReplayArgs {
    /// Switch configuration (TOML). Default: the embedded configs/baseline.toml.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Input: PORT=FILE.pcap (port name or id); repeatable. Default: the embedded trace on dc0.
    #[arg(long = "in", value_name = "PORT=PCAP")]
    pub inputs: Vec<String>,
    /// Output: PORT=FILE.pcap (port name or id); repeatable.
    #[arg(long = "out", value_name = "PORT=PCAP")]
    pub outputs: Vec<String>,
    /// Write every port's output to DIR/<port>.pcap.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Print every counter, zero ones too (by default only non-zero ones).
    #[arg(long)]
    pub all: bool,
    /// Print one JSON object (summary, ports, drops, counters) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Sample the switch on virtual time and write timeseries.csv and charts (PNG, SVG) of
    /// queue depth per port and class, throughput per port, PFC frames and CNPs into DIR.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// The --plot sampling step, in virtual microseconds (at least 1).
    #[arg(long, value_name = "US", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub sample_us: u64,
    /// Only non-zero counters: what replay prints by default (kept for scripts).
    #[arg(long, hide = true)]
    pub nonzero: bool,
}

/// One output file.
struct Out {
    port: u16,
    path: PathBuf,
    w: PcapWriter<WriteBehind>,
}

fn create(port: u16, path: PathBuf) -> Result<Out> {
    let f = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    // Written on a thread of its own (dataplane/src/writebehind.rs): the copies into the page
    // cache happen beside the switch, not on its thread.
    let f = WriteBehind::new(f, "longhaul-write", readahead::BLOCK, readahead::DEPTH)
        .with_context(|| format!("starting the writer of {}", path.display()))?;
    let w = PcapWriter::new(f).with_context(|| format!("writing {}", path.display()))?;
    Ok(Out { port, path, w })
}

pub fn cmd_replay(a: ReplayArgs) -> Result<ExitCode> {
    let cfg = match &a.config {
        Some(path) => load_config(path)?,
        None => parse_config(
            EMBEDDED_CONFIG,
            Path::new("<embedded configs/baseline.toml>"),
        )?,
    };
    let mut inputs: Vec<StreamInput<'static>> = Vec::new();
    if a.inputs.is_empty() {
        if a.config.is_some() {
            bail!("--in PORT=FILE.pcap is required with --config");
        }
        let (port, _, _) = port_arg(&cfg, &format!("{EMBEDDED_TRACE_PORT}=-"))?;
        let r = PcapReader::new(EMBEDDED_TRACE).context("embedded trace")?;
        if !a.json {
            eprintln!(
                "longhaul: replaying the embedded 64-flow RoCE trace into {EMBEDDED_TRACE_PORT} of the embedded baseline config"
            );
        }
        inputs.push(StreamInput {
            port,
            name: "embedded trace".into(),
            source: Box::new(r),
        });
    }
    for arg in &a.inputs {
        let (port, _, path) = port_arg(&cfg, arg)?;
        let f = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        // Read on a thread of its own (dataplane/src/readahead.rs): the copies out of the page
        // cache happen beside the switch, not on its thread.
        let f = ReadAhead::new(f, "longhaul-read", readahead::BLOCK, readahead::DEPTH)
            .with_context(|| format!("starting the reader of {}", path.display()))?;
        let r = PcapReader::new(f).map_err(|e| anyhow!("{}: {e}", path.display()))?;
        inputs.push(StreamInput {
            port,
            name: path.display().to_string(),
            source: Box::new(r),
        });
    }
    let mut outs = Vec::new();
    for arg in &a.outputs {
        let (port, _, path) = port_arg(&cfg, arg)?;
        outs.push(create(port, path)?);
    }
    if let Some(dir) = &a.out_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for p in &cfg.ports {
            outs.push(create(p.id, dir.join(format!("{}.pcap", p.name)))?);
        }
    }

    let step = a.sample_us.max(1) * 1_000;
    let plot = std::cell::RefCell::new(Plot::new(step));
    let plotting = a.plot.is_some();
    let mut write_err: Option<String> = None;
    let mut sink = |id: u16, ts: Nanos, data: &[u8]| {
        if plotting {
            plot.borrow_mut().on_frame(id, data);
        }
        for o in outs.iter_mut().filter(|o| o.port == id) {
            if let Err(e) = o.w.write_frame(ts, data) {
                write_err.get_or_insert_with(|| format!("{}: {e}", o.path.display()));
            }
        }
    };
    let bar = (!a.json && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template("{spinner} {human_pos} frames  {per_sec}  {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        b
    });
    let mut first: Option<Nanos> = None;
    let mut progress = |n: u64, now: Nanos| {
        if let Some(b) = &bar {
            let t0 = *first.get_or_insert(now);
            b.set_position(n);
            b.set_message(format!("virtual {:.3} ms", (now - t0) as f64 / 1e6));
        }
    };
    let mut sample = |t: Nanos, s: &longhaul_dataplane::engine::SwitchSnapshot| {
        plot.borrow_mut().on_sample(t, s);
    };
    let hooks = ReplayHooks {
        progress: Some(&mut progress),
        sample: plotting.then_some((step, &mut sample as &mut Sample)),
    };
    let started = Instant::now();
    let st = replay_stream(&cfg, inputs, &mut sink, hooks).map_err(|e| anyhow!(e));
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let st = st?;
    let wall = started.elapsed();
    if let Some(e) = write_err {
        bail!("{e}");
    }
    for o in outs {
        o.w.finish()
            .with_context(|| format!("writing {}", o.path.display()))?;
    }
    if let Some(dir) = &a.plot {
        let names = plot
            .borrow()
            .write(dir)
            .with_context(|| format!("writing plots into {}", dir.display()))?;
        if !a.json {
            eprintln!("longhaul: wrote {} in {}", names.join(", "), dir.display());
        }
    }
    // stdout is the same on every run (the wall clock goes to stderr), so two replays can be
    // compared with diff; a closed pipe (`| head`) is not an error.
    let text = if a.json {
        serde_json::to_string_pretty(&to_json(&st, wall, a.all))? + "\n"
    } else {
        eprintln!(
            "longhaul: {:.2} s wall, {:.2} M frames/s",
            wall.as_secs_f64(),
            rate(st.summary.offered, wall)
        );
        summary(&st, a.all)
    };
    match std::io::stdout().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn virtual_ns(st: &ReplayStats) -> u64 {
    st.summary
        .end_ns
        .saturating_sub(st.first_ts.unwrap_or(st.summary.end_ns))
}

fn rate(frames: u64, wall: Duration) -> f64 {
    frames as f64 / wall.as_secs_f64().max(1e-9) / 1e6
}

fn queue_drops(p: &longhaul_dataplane::engine::PortSnapshot) -> u64 {
    p.classes.iter().map(|c| c.drops).sum()
}

/// The text summary: frames and time, a line per port, drops by reason, then the counters.
fn summary(st: &ReplayStats, all: bool) -> String {
    let s = &st.summary;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "replay: {} frames in, {} out, {} events, virtual time {} ns\n",
        s.offered,
        s.emitted,
        s.steps,
        virtual_ns(st)
    );
    let _ = writeln!(
        o,
        "{:<12} {:>12} {:>12} {:>12} {:>10}",
        "port", "in", "out", "queue drops", "PFC out"
    );
    for p in &st.snapshot.ports {
        let _ = writeln!(
            o,
            "{:<12} {:>12} {:>12} {:>12} {:>10}",
            p.name,
            p.stats.rx_pkts,
            p.stats.tx_pkts,
            queue_drops(p),
            p.stats.pfc_tx
        );
    }
    let drops: Vec<String> = DropReason::ALL
        .iter()
        .filter_map(|&r| {
            let v = st.snapshot.stats.drops.get(r);
            (v != 0).then(|| format!("{} {v}", r.name()))
        })
        .collect();
    if drops.is_empty() {
        let _ = writeln!(o, "\ndropped: none");
    } else {
        let _ = writeln!(o, "\ndropped, by reason: {}", drops.join(", "));
    }
    let _ = writeln!(
        o,
        "generated by the pipeline (CNPs, NAKs, pseudo-ACKs, ARP/ND answers, ...): {}",
        st.snapshot.stats.generated
    );
    // The replay failed before printing when the ledger did not balance.
    let _ = writeln!(o, "conservation: {}\n", st.snapshot.ledger());
    let _ = writeln!(
        o,
        "{}",
        if all {
            "counters:"
        } else {
            "counters (non-zero; --all for every one):"
        }
    );
    for (name, v) in &st.counters {
        if all || *v != 0 {
            let _ = writeln!(o, "{name} {v}");
        }
    }
    o
}

fn to_json(st: &ReplayStats, wall: Duration, all: bool) -> Value {
    let s = &st.summary;
    let ports: Vec<Value> = st
        .snapshot
        .ports
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "rx_pkts": p.stats.rx_pkts,
                "rx_bytes": p.stats.rx_bytes,
                "tx_pkts": p.stats.tx_pkts,
                "tx_bytes": p.stats.tx_bytes,
                "queue_drops": queue_drops(p),
                "pfc_tx": p.stats.pfc_tx,
            })
        })
        .collect();
    let mut drops = Map::new();
    for r in DropReason::ALL {
        let v = st.snapshot.stats.drops.get(r);
        if all || v != 0 {
            drops.insert(r.name().into(), v.into());
        }
    }
    let mut counters = Map::new();
    for (name, v) in &st.counters {
        if all || *v != 0 {
            counters.insert(name.clone(), (*v).into());
        }
    }
    json!({
        "frames_in": s.offered,
        "frames_out": s.emitted,
        "events": s.steps,
        "virtual_ns": virtual_ns(st),
        "wall_s": wall.as_secs_f64(),
        "generated": st.snapshot.stats.generated,
        "conservation": ledger_json(&st.snapshot.ledger()),
        "ports": ports,
        "drops": drops,
        "counters": counters,
    })
}

/// The packet-conservation ledger (`longhaul_dataplane::conservation`) as JSON.
fn ledger_json(l: &Ledger) -> Value {
    json!({
        "balanced": l.check().is_ok(),
        "received": l.received,
        "arrived_dropped": l.arrived_dropped,
        "injected": l.injected,
        "generated": l.generated,
        "pfc_generated": l.control_generated,
        "sent": l.sent,
        "dropped": l.dropped,
        "consumed": l.consumed,
        "queued": l.queued,
    })
}
