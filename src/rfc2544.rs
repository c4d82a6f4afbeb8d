//! `longhaul rfc2544`: the throughput test of RFC 2544 (section 26.1) against a device under test
//! (a longhaul, or anything else) connected to two DPDK ports of this process: frames of each
//! size are offered on `--tx` at a fixed rate for a trial, counted back on `--rx`, and a binary
//! search on the offered rate finds the highest rate with zero loss.
//!
//! The pieces that do not need DPDK (test frames, the search, the table, CSV and plot) are plain
//! functions with unit tests; the trial itself (`driver`, feature `dpdk`) busy-polls both ports on
//! EAL's main lcore, paced by the TSC.
//!
//! Choices where RFC 2544 leaves room (perf/README.md, "RFC 2544 over memif", has the figures):
//! - Test frames are the UDP echo frames of RFC 2544 appendix C.2.6.4 (IPv4, UDP source port
//!   0xC020 + flow, destination port 7), one flow per UDP source port (`--flows`), with a
//!   16-byte signature at the start of the payload (magic, trial number, sequence number) so a
//!   frame of an earlier trial that arrives late is not counted in the next one (section 23).
//! - With `--trace`, one more row offers a pcap's frames as they are (only the MACs rewritten: the
//!   RoCE ICRC does not cover them), round robin; a frame back is ours when its IPv4 source,
//!   destination and UDP destination port are those of a trace frame. These carry no trial
//!   number, so before every trial the receive side is drained until quiet.
//! - Loss = frames offered - ours received; a frame the transmit ring refused (the device under
//!   test did not take it: on memif or vhost-user a full ring is the peer not keeping up) is
//!   offered and lost.
//! - When the generator itself cannot reach the rate (it sent fewer frames than the rate asks
//!   for the trial's time, or ran out of buffers), the trial's rate is what it achieved, and the
//!   row says `generator` when the highest rate passed is below the one asked.

// Without DPDK only the argument checks run (and the tests): the trial's helpers are unused.
#![cfg_attr(not(feature = "dpdk"), allow(dead_code))]

use anyhow::{bail, Context, Result};
use clap::Args;
use longhaul_dataplane::wire::checksum::checksum;
use longhaul_dataplane::wire::ethernet::MacAddr;
use longhaul_dataplane::wire::parse::{ipv4_udp, Ipv4Udp};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Preamble and start-of-frame delimiter (8 bytes) and the inter-frame gap (12): what a frame
/// costs on the wire beyond its own bytes (RFC 2544 section 20's maximum frame rates).
pub const WIRE_OVERHEAD: u64 = 20;
/// The frame check sequence: part of an RFC 2544 frame size, not of a DPDK buffer.
pub const FCS: usize = 4;
/// The payload signature's magic.
pub const MAGIC: [u8; 4] = *b"LH25";
/// Ethernet + IPv4 + UDP headers of a test frame.
const HEADERS: usize = 14 + 20 + 8;
/// Magic, trial number, sequence number.
const SIGNATURE: usize = 16;
/// UDP source port of flow 0 and the destination port (RFC 2544 appendix C.2.6.4).
const UDP_SRC_BASE: u16 = 0xC020;
const UDP_DST: u16 = 7;
/// The smallest and largest frame sizes (FCS included) the tester builds.
pub const MIN_SIZE: u32 = 64;
pub const MAX_SIZE: u32 = 9216;

#[derive(Args, Debug)]
pub struct Rfc2544Args {
    /// EAL arguments, one string (split on white space), e.g. "-l 0 --no-huge -m 512 --no-pci
    /// --file-prefix gen --vdev=net_memif0,role=server,socket=/tmp/a.sock ...".
    #[arg(long, allow_hyphen_values = true)]
    pub eal: String,
    /// The ethdev that offers frames to the device under test (e.g. net_memif0).
    #[arg(long)]
    pub tx: String,
    /// The ethdev that receives what the device under test forwards.
    #[arg(long)]
    pub rx: String,
    /// Frame sizes in bytes, FCS included (RFC 2544 section 9.1).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1280,1518"
    )]
    pub sizes: Vec<u32>,
    /// Also offer this pcap's frames (MACs rewritten), as a row named after the file.
    #[arg(long, value_name = "PCAP")]
    pub trace: Option<PathBuf>,
    /// Seconds per trial (RFC 2544 section 24: at least 60 for a published figure).
    #[arg(long, default_value_t = 10.0)]
    pub trial: f64,
    /// Milliseconds to keep receiving after a trial's last frame (section 23: 2000).
    #[arg(long, default_value_t = 2000)]
    pub settle_ms: u64,
    /// The line rate the percentages refer to (a virtual link has none of its own), Gb/s.
    #[arg(long, default_value_t = 100.0)]
    pub line_rate_gbps: f64,
    /// Highest rate to offer (frames/s); default: line rate at each size.
    #[arg(long)]
    pub max_pps: Option<f64>,
    /// Stop searching when the interval is below this fraction of the first rate.
    #[arg(long, default_value_t = 0.01)]
    pub resolution: f64,
    /// Test flows (UDP source ports).
    #[arg(long, default_value_t = 16)]
    pub flows: u16,
    /// Destination MAC of the test frames (the device under test's port).
    #[arg(long, default_value = "02:00:00:00:00:01")]
    pub dst_mac: String,
    /// Source MAC of the test frames.
    #[arg(long, default_value = "02:00:00:00:10:01")]
    pub src_mac: String,
    /// Source IPv4 address of the test frames.
    #[arg(long, default_value = "10.0.0.2")]
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address of the test frames.
    #[arg(long, default_value = "10.1.0.2")]
    pub dst_ip: Ipv4Addr,
    /// Write rfc2544.csv, rfc2544.json and the plots (PNG and SVG) here.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// A label for the rows (the device's config, say) in the CSV and JSON.
    #[arg(long, default_value = "dut")]
    pub label: String,
}

/// One test frame of `size` bytes (FCS included, so `size - 4` in the buffer) of flow `flow`.
pub fn udp_frame(
    size: u32,
    flow: u16,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
) -> Vec<u8> {
    let len = size as usize - FCS;
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&UDP_SRC_BASE.wrapping_add(flow).to_be_bytes());
    udp[2..4].copy_from_slice(&UDP_DST.to_be_bytes());
    udp[4..6].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    // UDP checksum 0: none (RFC 768), as the signature changes in every frame.
    f[HEADERS..HEADERS + 4].copy_from_slice(&MAGIC);
    f
}

/// Write the trial number and sequence number into a test frame's signature.
#[inline]
pub fn stamp(frame: &mut [u8], trial: u32, seq: u64) {
    if frame.len() >= HEADERS + SIGNATURE {
        frame[HEADERS + 4..HEADERS + 8].copy_from_slice(&trial.to_be_bytes());
        frame[HEADERS + 8..HEADERS + 16].copy_from_slice(&seq.to_be_bytes());
    }
}

/// What a received frame is to the current trial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// A test frame of this trial (or a trace frame, which has no trial number).
    Ours,
    /// A test frame of an earlier trial, arriving late.
    Stale,
    /// Anything else (ARP, pause frames, a frame the device made).
    Other,
}

/// The IPv4 source and destination of an untagged IPv4 frame (at least its 34 header bytes).
fn ipv4_pair(f: &[u8]) -> Option<(u32, u32)> {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] || f[14] >> 4 != 4 {
        return None;
    }
    let word = |o: usize| u32::from_be_bytes([f[o], f[o + 1], f[o + 2], f[o + 3]]);
    Some((word(26), word(30)))
}

/// The frames a row offers, and how a received frame is recognized.
#[derive(Debug)]
pub struct Offer {
    /// Row name: the size, or the trace's file name.
    pub name: String,
    /// Mean frame size on the wire minus the preamble and gap (FCS included).
    pub mean_size: f64,
    pub frames: Vec<Vec<u8>>,
    /// Trace rows: the IPv4 (source, destination) pairs of the trace's frames, sorted. Not the
    /// UDP port: a device may change it (an INT source moves RoCE to INT's port).
    trace_keys: Option<Vec<(u32, u32)>>,
}

impl Offer {
    /// `flows` test frames of `size` bytes.
    pub fn udp(size: u32, a: &Rfc2544Args, src_mac: [u8; 6], dst_mac: [u8; 6]) -> Offer {
        Offer {
            name: size.to_string(),
            mean_size: f64::from(size),
            frames: (0..a.flows.max(1))
                .map(|i| udp_frame(size, i, src_mac, dst_mac, a.src_ip, a.dst_ip))
                .collect(),
            trace_keys: None,
        }
    }

    /// A pcap's frames with the MACs rewritten (the trace's other bytes unchanged).
    pub fn trace(name: &str, frames: Vec<Vec<u8>>, src_mac: [u8; 6], dst_mac: [u8; 6]) -> Offer {
        let mut frames = frames;
        let mut keys = Vec::new();
        for f in &mut frames {
            if f.len() >= 12 {
                f[0..6].copy_from_slice(&dst_mac);
                f[6..12].copy_from_slice(&src_mac);
            }
            if let Some(k) = ipv4_pair(f) {
                keys.push(k);
            }
        }
        keys.sort_unstable();
        keys.dedup();
        let mean =
            frames.iter().map(|f| (f.len() + FCS) as f64).sum::<f64>() / frames.len().max(1) as f64;
        Offer {
            name: name.to_string(),
            mean_size: mean,
            frames,
            trace_keys: Some(keys),
        }
    }

    /// Whether this row's frames carry a trial number.
    pub fn stamped(&self) -> bool {
        self.trace_keys.is_none()
    }

    /// What `f`, received during trial `trial`, is.
    pub fn classify(&self, f: &[u8], trial: u32) -> Seen {
        match &self.trace_keys {
            Some(keys) => match ipv4_pair(f) {
                Some(k) if keys.binary_search(&k).is_ok() => Seen::Ours,
                _ => Seen::Other,
            },
            None => {
                let Some(Ipv4Udp {
                    dst_port: port,
                    payload,
                    ..
                }) = ipv4_udp(f)
                else {
                    return Seen::Other;
                };
                if port != UDP_DST
                    || f.len() < payload + SIGNATURE
                    || f[payload..payload + 4] != MAGIC
                {
                    return Seen::Other;
                }
                let t = u32::from_be_bytes([
                    f[payload + 4],
                    f[payload + 5],
                    f[payload + 6],
                    f[payload + 7],
                ]);
                if t == trial {
                    Seen::Ours
                } else {
                    Seen::Stale
                }
            }
        }
    }
}

/// Frames per second of a `size`-byte frame at `gbps`, with the preamble and gap.
pub fn line_rate_pps(size: f64, gbps: f64) -> f64 {
    gbps * 1e9 / ((size + WIRE_OVERHEAD as f64) * 8.0)
}

/// What one trial did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Trial {
    /// The rate asked for, frames/s.
    pub target_pps: f64,
    /// Frames offered (the transmit ring's refusals included).
    pub offered: u64,
    /// Frames the transmit ring refused.
    pub refused: u64,
    /// Test frames of this trial received.
    pub received: u64,
    /// Late test frames of earlier trials, and other frames, received.
    pub stale: u64,
    pub other: u64,
    /// Seconds the trial sent for.
    pub seconds: f64,
    /// The generator ran out of buffers or time and offered less than the rate asks.
    pub generator_short: bool,
}

impl Trial {
    pub fn lost(&self) -> u64 {
        self.offered.saturating_sub(self.received)
    }
    pub fn achieved_pps(&self) -> f64 {
        self.offered as f64 / self.seconds.max(1e-9)
    }
    pub fn passed(&self) -> bool {
        self.offered > 0 && self.received >= self.offered
    }
}

/// RFC 2544 section 26.1's search: the first trial at the highest rate; then halve the interval
/// between the highest rate that passed (initially 0) and the lowest that failed until it is
/// within `resolution` of the latter (relative, so that a device far below the line rate is
/// measured as finely as one near it), or that rate is below [`MIN_PPS`].
#[derive(Clone, Debug)]
pub struct Search {
    max: f64,
    resolution: f64,
    /// Highest rate that passed (the rate the generator achieved).
    pub best: Option<Trial>,
    lo: f64,
    hi: f64,
    next: Option<f64>,
    pub trials: Vec<Trial>,
}

/// Trials per frame size at most (from 100 Gb/s line rate down to 1 Mpps at 1% takes 14).
const MAX_TRIALS: usize = 24;
/// The search gives up below this rate (frames/s).
pub const MIN_PPS: f64 = 1000.0;

impl Search {
    pub fn new(max_pps: f64, resolution: f64) -> Search {
        Search {
            max: max_pps,
            resolution: resolution.clamp(1e-4, 0.5),
            best: None,
            lo: 0.0,
            hi: max_pps,
            next: Some(max_pps),
            trials: Vec::new(),
        }
    }

    /// The rate of the next trial, or `None` when done.
    pub fn next_rate(&self) -> Option<f64> {
        self.next
    }

    /// Record the trial run at [`Self::next_rate`].
    pub fn record(&mut self, t: Trial) {
        let rate = t.target_pps;
        self.trials.push(t);
        if t.passed() {
            self.lo = rate;
            if self
                .best
                .is_none_or(|b| t.achieved_pps() > b.achieved_pps())
            {
                self.best = Some(t);
            }
        } else {
            self.hi = rate;
        }
        let done = (t.passed() && rate >= self.max)
            || self.hi - self.lo <= self.resolution * self.hi
            || self.hi < MIN_PPS
            || self.trials.len() >= MAX_TRIALS;
        self.next = (!done).then(|| (self.lo + self.hi) / 2.0);
    }
}

/// One row of the result table.
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    pub size: f64,
    pub line_pps: f64,
    pub first: Trial,
    pub best: Option<Trial>,
    pub trials: usize,
    /// The most frames per second that came through in any trial, losses or not (what the
    /// device forwards when offered more than it takes).
    pub max_forwarded_pps: f64,
    /// The zero-loss rate is what the generator could offer, not more: the device may do more.
    pub generator_limited: bool,
}

impl Row {
    pub fn from_search(name: &str, size: f64, line_pps: f64, s: &Search) -> Row {
        let first = s.trials.first().copied().unwrap_or_default();
        Row {
            name: name.to_string(),
            size,
            line_pps,
            first,
            best: s.best,
            trials: s.trials.len(),
            max_forwarded_pps: s
                .trials
                .iter()
                .map(|t| t.received as f64 / t.seconds.max(1e-9))
                .fold(0.0, f64::max),
            // The zero-loss rate found is the generator's own limit (a lower bound of the
            // device's) when the trial that set it could not offer the rate asked. A short
            // trial that lost frames says nothing about the generator: the device lost them.
            generator_limited: s.best.is_some_and(|b| b.generator_short),
        }
    }
    pub fn pps(&self) -> f64 {
        self.best.map_or(0.0, |b| b.achieved_pps())
    }
    /// Frame bits per second (FCS included, no preamble or gap).
    pub fn gbps(&self) -> f64 {
        self.pps() * self.size * 8.0 / 1e9
    }
    pub fn percent(&self) -> f64 {
        100.0 * self.pps() / self.line_pps
    }
}

/// The table a person reads.
pub fn table(rows: &[Row], line_gbps: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>18} {:>10} {:>9} {:>12} {:>12} {:>13} {:>7}  note",
        "frame",
        "zero-loss Mpps",
        "Gb/s",
        format!("% of {line_gbps}G"),
        "lost at top",
        "most fwd Mpps",
        "trials"
    );
    for r in rows {
        let note = if r.generator_limited {
            "generator-bound: the device may forward more"
        } else if r.first.passed() {
            "no loss at the highest rate"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "{:>18} {:>14.3} {:>9.3} {:>11.2}% {:>12} {:>13.3} {:>7}  {note}",
            r.name,
            r.pps() / 1e6,
            r.gbps(),
            r.percent(),
            r.first.lost(),
            r.max_forwarded_pps / 1e6,
            r.trials
        );
    }
    s
}

/// The CSV of the rows (one line per frame size).
pub fn csv(label: &str, rows: &[Row]) -> String {
    let mut s = String::from(
        "label,frame,size_bytes,line_rate_pps,zero_loss_pps,zero_loss_gbps,percent_of_line_rate,\
         top_offered_pps,top_lost,max_forwarded_pps,trials,generator_limited\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{label},{},{:.1},{:.0},{:.0},{:.4},{:.3},{:.0},{},{:.0},{},{}",
            r.name,
            r.size,
            r.line_pps,
            r.pps(),
            r.gbps(),
            r.percent(),
            r.first.achieved_pps(),
            r.first.lost(),
            r.max_forwarded_pps,
            r.trials,
            r.generator_limited
        );
    }
    s
}

/// Every trial, for machines.
pub fn json(label: &str, rows: &[Row], searches: &[Search]) -> serde_json::Value {
    let trial = |t: &Trial| {
        serde_json::json!({
            "target_pps": t.target_pps, "offered": t.offered, "refused": t.refused,
            "received": t.received, "stale": t.stale, "other": t.other,
            "seconds": t.seconds, "achieved_pps": t.achieved_pps(), "passed": t.passed(),
            "generator_short": t.generator_short,
        })
    };
    serde_json::json!({
        "label": label,
        "rows": rows.iter().zip(searches).map(|(r, s)| serde_json::json!({
            "frame": r.name, "size_bytes": r.size, "line_rate_pps": r.line_pps,
            "zero_loss_pps": r.pps(), "zero_loss_gbps": r.gbps(),
            "percent_of_line_rate": r.percent(), "generator_limited": r.generator_limited,
            "max_forwarded_pps": r.max_forwarded_pps,
            "trials": s.trials.iter().map(trial).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// rfc2544.csv, rfc2544.json, and the plots of the fixed-size rows.
fn write_out(dir: &Path, a: &Rfc2544Args, rows: &[Row], searches: &[Search]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let w = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
    };
    w("rfc2544.csv", csv(&a.label, rows))?;
    w(
        "rfc2544.json",
        serde_json::to_string_pretty(&json(&a.label, rows, searches))? + "\n",
    )?;
    let sized: Vec<&Row> = rows
        .iter()
        .filter(|r| r.name.parse::<u32>().is_ok())
        .collect();
    let pts = |f: &dyn Fn(&Row) -> f64| sized.iter().map(|r| (r.size, f(r))).collect::<Vec<_>>();
    longhaul_emulator::plot::write_xy(
        dir,
        "rfc2544_mpps",
        "RFC 2544 zero-loss throughput",
        "frame size (bytes)",
        "Mpps",
        vec![
            (
                format!("{} zero loss", a.label),
                pts(&|r: &Row| r.pps() / 1e6),
            ),
            (
                format!("{}: most forwarded, with loss", a.label),
                pts(&|r: &Row| r.max_forwarded_pps / 1e6),
            ),
        ],
    )
    .with_context(|| format!("plotting into {}", dir.display()))?;
    longhaul_emulator::plot::write_xy(
        dir,
        "rfc2544_percent",
        "RFC 2544 zero-loss throughput, % of line rate",
        "frame size (bytes)",
        "% of line rate",
        vec![(a.label.clone(), pts(&|r: &Row| r.percent()))],
    )
    .with_context(|| format!("plotting into {}", dir.display()))?;
    Ok(())
}

/// Checks the arguments and builds the rows' frames, before EAL starts.
pub fn offers(a: &Rfc2544Args) -> Result<Vec<Offer>> {
    let mac = |what: &str, s: &str| -> Result<[u8; 6]> {
        s.parse::<MacAddr>()
            .map(|m| m.0)
            .map_err(|_| anyhow::anyhow!("--{what}: '{s}' is not a MAC address"))
    };
    let src_mac = mac("src-mac", &a.src_mac)?;
    let dst_mac = mac("dst-mac", &a.dst_mac)?;
    if a.tx == a.rx {
        bail!("--tx and --rx name the same device '{}'", a.tx);
    }
    if !(a.trial > 0.0 && a.trial <= 3600.0) {
        bail!(
            "--trial: {} s: must be more than 0 and at most 3600",
            a.trial
        );
    }
    if !(a.line_rate_gbps > 0.0 && a.line_rate_gbps <= 1600.0) {
        bail!(
            "--line-rate-gbps: {}: must be in (0, 1600]",
            a.line_rate_gbps
        );
    }
    if a.max_pps.is_some_and(|m| !(1.0..=1e9).contains(&m)) {
        bail!("--max-pps: must be at least 1 and at most 1e9");
    }
    if !(a.resolution > 0.0 && a.resolution <= 0.5) {
        bail!("--resolution: {}: must be in (0, 0.5]", a.resolution);
    }
    let mut out = Vec::new();
    for &s in &a.sizes {
        if !(MIN_SIZE..=MAX_SIZE).contains(&s) {
            bail!("--sizes: {s}: a frame size (FCS included) is {MIN_SIZE} to {MAX_SIZE} bytes");
        }
        out.push(Offer::udp(s, a, src_mac, dst_mac));
    }
    if let Some(p) = &a.trace {
        let recs =
            longhaul_dataplane::pcap::read_pcap(p).with_context(|| format!("{}", p.display()))?;
        let frames: Vec<Vec<u8>> = recs.into_iter().map(|r| r.data).collect();
        if frames.is_empty() {
            bail!("{}: no frames", p.display());
        }
        if let Some(f) = frames
            .iter()
            .find(|f| f.len() < 14 || f.len() + FCS > MAX_SIZE as usize)
        {
            bail!(
                "{}: a frame of {} bytes (the tester sends 14 to {} bytes)",
                p.display(),
                f.len(),
                MAX_SIZE as usize - FCS
            );
        }
        let name = p
            .file_name()
            .map_or_else(|| "trace".into(), |n| n.to_string_lossy().into_owned());
        out.push(Offer::trace(&name, frames, src_mac, dst_mac));
    }
    if out.is_empty() {
        bail!("nothing to offer: give --sizes or --trace");
    }
    Ok(out)
}

pub fn cmd_rfc2544(a: Rfc2544Args) -> Result<ExitCode> {
    let offers = offers(&a)?;
    run(&a, &offers)
}

#[cfg(not(feature = "dpdk"))]
fn run(_a: &Rfc2544Args, _offers: &[Offer]) -> Result<ExitCode> {
    bail!("rfc2544 sends on DPDK ports: this longhaul was built without them (cargo build --features dpdk)")
}

#[cfg(feature = "dpdk")]
fn run(a: &Rfc2544Args, offers: &[Offer]) -> Result<ExitCode> {
    let mut t = driver::Tester::open(a, offers)?;
    let mut rows = Vec::new();
    let mut searches = Vec::new();
    let mut trial_no = 0u32;
    for o in offers {
        let line = line_rate_pps(o.mean_size, a.line_rate_gbps);
        let mut s = Search::new(a.max_pps.unwrap_or(line), a.resolution);
        while let Some(rate) = s.next_rate() {
            trial_no += 1;
            let tr = t.trial(o, rate, trial_no)?;
            eprintln!(
                "rfc2544: {} bytes: {:.0} pps asked, {:.0} offered, {} lost{}",
                o.name,
                rate,
                tr.achieved_pps(),
                tr.lost(),
                if tr.generator_short {
                    " (generator short)"
                } else {
                    ""
                }
            );
            s.record(tr);
        }
        rows.push(Row::from_search(&o.name, o.mean_size, line, &s));
        searches.push(s);
    }
    print!("{}", table(&rows, a.line_rate_gbps));
    if let Some(dir) = &a.out_dir {
        write_out(dir, a, &rows, &searches)?;
        println!(
            "wrote into {}: rfc2544.csv, rfc2544.json, rfc2544_mpps.{{png,svg}}, rfc2544_percent.{{png,svg}}",
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(feature = "dpdk")]
mod driver {
    use super::{stamp, Offer, Rfc2544Args, Seen, Trial};
    use anyhow::{anyhow, Result};
    use longhaul_dataplane::dpdk::{DpdkPort, DpdkPortConfig, Eal, Mbuf, MbufPool};
    use longhaul_dataplane::packet::{BufPool, PacketBuf};
    use std::time::Duration;

    const BURST: usize = 32;
    /// How long the receive side must be quiet before a trial (trace rows carry no trial
    /// number), and the longest the drain waits for that.
    const QUIET: Duration = Duration::from_millis(100);
    const DRAIN_MAX: Duration = Duration::from_secs(5);

    pub struct Tester {
        eal: Eal,
        pool: MbufPool,
        tx: DpdkPort,
        rx: DpdkPort,
        rx_buf: Vec<Mbuf>,
        tx_buf: Vec<Mbuf>,
        trial_s: f64,
        settle: Duration,
    }

    impl Tester {
        pub fn open(a: &Rfc2544Args, offers: &[Offer]) -> Result<Tester> {
            let args: Vec<String> = a.eal.split_whitespace().map(String::from).collect();
            let eal = Eal::init(&args).map_err(|e| anyhow!("--eal: {e}"))?;
            let room = offers
                .iter()
                .flat_map(|o| o.frames.iter().map(Vec::len))
                .max()
                .unwrap_or(64)
                .max(2048);
            let pool =
                MbufPool::new(&eal, "rfc2544", 16383, 256, room).map_err(|e| anyhow!("{e}"))?;
            let cfg = DpdkPortConfig::default();
            let open = |dev: &str| {
                DpdkPort::open(&eal, dev, &cfg, &pool).map_err(|e| {
                    let names: Vec<String> = eal.port_names().into_iter().map(|(_, n)| n).collect();
                    anyhow!("{e} (ethdevs: {})", names.join(", "))
                })
            };
            // Both ports started before waiting for either link: a memif client connects once,
            // when it starts, and a server port that is not started yet turns it away, so the
            // device under test may start both its ports at once (as testpmd does).
            let up = |p: DpdkPort| -> Result<DpdkPort> {
                match p.wait_link_up(Duration::from_secs(10)) {
                    Ok(l) if l.up => Ok(p),
                    Ok(_) => Err(anyhow!(
                        "{}: link down after 10 s (is the device under test running?)",
                        p.info().device
                    )),
                    Err(e) => Err(anyhow!("{e} (is the device under test running?)")),
                }
            };
            let (tx, rx) = (open(&a.tx)?, open(&a.rx)?);
            let (tx, rx) = (up(tx)?, up(rx)?);
            Ok(Tester {
                eal,
                pool,
                tx,
                rx,
                rx_buf: Vec::with_capacity(BURST),
                tx_buf: Vec::with_capacity(BURST),
                trial_s: a.trial,
                settle: Duration::from_millis(a.settle_ms),
            })
        }

        /// Receive for `d`, classifying into `t`.
        fn receive_for(&mut self, o: &Offer, trial: u32, d: Duration, t: &mut Trial) {
            let end = self.eal.tsc() + (d.as_secs_f64() * self.eal.tsc_hz() as f64) as u64;
            while self.eal.tsc() < end {
                self.receive(o, trial, t);
            }
        }

        fn receive(&mut self, o: &Offer, trial: u32, t: &mut Trial) -> usize {
            let n = self.rx.rx_burst_queue(0, &mut self.rx_buf, BURST);
            for m in self.rx_buf.drain(..) {
                match o.classify(m.data(), trial) {
                    Seen::Ours => t.received += 1,
                    Seen::Stale => t.stale += 1,
                    Seen::Other => t.other += 1,
                }
            }
            n
        }

        /// Receive until nothing has arrived for [`QUIET`] (at most [`DRAIN_MAX`]).
        fn drain(&mut self, o: &Offer) {
            let hz = self.eal.tsc_hz() as f64;
            let start = self.eal.tsc();
            let mut last = start;
            let mut scratch = Trial::default();
            loop {
                let now = self.eal.tsc();
                if self.receive(o, 0, &mut scratch) > 0 {
                    last = now;
                }
                if (now - last) as f64 / hz >= QUIET.as_secs_f64()
                    || (now - start) as f64 / hz >= DRAIN_MAX.as_secs_f64()
                {
                    return;
                }
            }
        }

        /// Offer `o`'s frames at `rate` frames/s for the trial's time, then receive for the
        /// settle time.
        pub fn trial(&mut self, o: &Offer, rate: f64, trial: u32) -> Result<Trial> {
            self.drain(o);
            let hz = self.eal.tsc_hz();
            let ticks = (self.trial_s * hz as f64) as u64;
            // Frames due after `e` ticks: e * rate / hz, in integers (rate in milli-frames/s).
            let rate_m = (rate * 1000.0).round().max(1.0) as u128;
            let mut t = Trial {
                target_pps: rate,
                ..Trial::default()
            };
            let n_frames = o.frames.len() as u64;
            let start = self.eal.tsc();
            loop {
                let e = self.eal.tsc() - start;
                if e >= ticks {
                    break;
                }
                let due = (u128::from(e) * rate_m / (u128::from(hz) * 1000)) as u64;
                let n = (due - t.offered).min(BURST as u64);
                for i in 0..n {
                    let seq = t.offered + i;
                    let Some(mut m) = self.pool.alloc() else {
                        t.generator_short = true;
                        break;
                    };
                    let src = &o.frames[(seq % n_frames) as usize];
                    if !m.set_data(src) {
                        return Err(anyhow!("a {}-byte frame does not fit an mbuf", src.len()));
                    }
                    if o.stamped() {
                        stamp(m.data_mut(), trial, seq);
                    }
                    self.tx_buf.push(m);
                }
                let k = self.tx_buf.len() as u64;
                if k > 0 {
                    let sent = self.tx.tx_burst_queue(0, &mut self.tx_buf) as u64;
                    t.offered += k;
                    t.refused += k - sent;
                }
                // Keep up with the device: a full burst means more may be waiting (at most a
                // few bursts, so the next transmission is not late).
                for _ in 0..4 {
                    if self.receive(o, trial, &mut t) < BURST {
                        break;
                    }
                }
            }
            t.seconds = self.trial_s;
            if (t.offered as f64) < 0.995 * self.trial_s * rate {
                // More than 0.5% short of the rate: the generator's core could not keep up.
                t.generator_short = true;
            }
            let settle = self.settle;
            self.receive_for(o, trial, settle, &mut t);
            Ok(t)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> Rfc2544Args {
        Rfc2544Args {
            eal: String::new(),
            tx: "net_memif0".into(),
            rx: "net_memif1".into(),
            sizes: vec![64, 1518],
            trace: None,
            trial: 1.0,
            settle_ms: 10,
            line_rate_gbps: 100.0,
            max_pps: None,
            resolution: 0.01,
            flows: 4,
            dst_mac: "02:00:00:00:00:01".into(),
            src_mac: "02:00:00:00:10:01".into(),
            src_ip: "10.0.0.2".parse().unwrap(),
            dst_ip: "10.1.0.2".parse().unwrap(),
            out_dir: None,
            label: "t".into(),
        }
    }

    #[test]
    fn test_frame_is_a_valid_udp_echo_frame_of_the_size() {
        for size in [64u32, 65, 128, 1518, 9216] {
            let f = udp_frame(
                size,
                3,
                [2, 0, 0, 0, 0x10, 1],
                [2, 0, 0, 0, 0, 1],
                "10.0.0.2".parse().unwrap(),
                "10.1.0.2".parse().unwrap(),
            );
            assert_eq!(f.len() + FCS, size as usize);
            assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 1]);
            // IPv4 header checksum verifies, lengths add up.
            assert_eq!(checksum(&f[14..34]), 0, "size {size}");
            assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, f.len() - 14);
            assert_eq!(u16::from_be_bytes([f[38], f[39]]) as usize, f.len() - 34);
            assert_eq!(u16::from_be_bytes([f[34], f[35]]), 0xC023);
            assert_eq!(u16::from_be_bytes([f[36], f[37]]), 7);
        }
    }

    /// The test frames checked by implementations that are not ours: pcap-tests' verify.py
    /// (IPv4 checksum, lengths) and scapy (every field decoded). Skipped without python3 and
    /// scapy unless LONGHAUL_REQUIRE_ORACLES=1 (CI).
    #[test]
    fn test_frames_are_wire_valid_for_scapy_and_verify_py() {
        let dir = std::env::temp_dir().join(format!("lh-rfc2544-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pcap = dir.join("frames.pcap");
        let a = args();
        let recs: Vec<longhaul_dataplane::pcap::PcapRecord> = [64u32, 65, 128, 1518, 9216]
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                let mut f = Offer::udp(size, &a, [2, 0, 0, 0, 0x10, 1], [2, 0, 0, 0, 0, 1])
                    .frames
                    .swap_remove(i % 4);
                stamp(&mut f, 5, 1000 + i as u64);
                longhaul_dataplane::pcap::PcapRecord {
                    ts_ns: i as u64 * 1000,
                    data: f,
                }
            })
            .collect();
        longhaul_dataplane::pcap::write_pcap(&pcap, &recs).unwrap();
        let root = env!("CARGO_MANIFEST_DIR");
        let script = r#"
import sys
from scapy.all import rdpcap, Ether, IP, UDP
sizes = [64, 65, 128, 1518, 9216]
for i, p in enumerate(rdpcap(sys.argv[1])):
    assert len(p) + 4 == sizes[i], (i, len(p))
    ip, udp = p[IP], p[UDP]
    assert p[Ether].dst == "02:00:00:00:00:01" and p[Ether].src == "02:00:00:00:10:01"
    assert ip.src == "10.0.0.2" and ip.dst == "10.1.0.2" and ip.ttl == 64 and ip.flags == "DF"
    c = ip.chksum; del ip.chksum
    assert IP(bytes(ip)).chksum == c, "IPv4 checksum"
    assert ip.len == len(p) - 14 and udp.len == len(p) - 34
    assert udp.sport == 0xC020 + i % 4 and udp.dport == 7 and udp.chksum == 0
    pl = bytes(udp.payload)
    assert pl[:4] == b"LH25" and int.from_bytes(pl[4:8], "big") == 5
    assert int.from_bytes(pl[8:16], "big") == 1000 + i
print("ok")
"#;
        let py = std::env::var("LONGHAUL_PYTHON").unwrap_or_else(|_| "python3".into());
        let run = |args: &[&str]| std::process::Command::new(&py).args(args).output();
        let scapy = run(&["-c", "import scapy"]);
        if !scapy.as_ref().is_ok_and(|o| o.status.success()) {
            assert!(
                std::env::var("LONGHAUL_REQUIRE_ORACLES").is_err(),
                "python3 with scapy is required (LONGHAUL_REQUIRE_ORACLES)"
            );
            eprintln!("skipped: no python3 with scapy");
            return;
        }
        let p = pcap.to_str().unwrap();
        let o = run(&["-c", script, p]).unwrap();
        assert!(
            o.status.success(),
            "scapy: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let verify = format!("{root}/pcap-tests/oracle/verify.py");
        let o = run(&[&verify, p]).unwrap();
        assert!(
            o.status.success(),
            "verify.py: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn classify_tells_this_trial_from_a_late_frame_and_from_other_traffic() {
        let a = args();
        let o = Offer::udp(64, &a, [0; 6], [1; 6]);
        let mut f = o.frames[1].clone();
        stamp(&mut f, 7, 99);
        assert_eq!(o.classify(&f, 7), Seen::Ours);
        assert_eq!(o.classify(&f, 8), Seen::Stale);
        let mut bad = f.clone();
        bad[HEADERS] ^= 1; // magic
        assert_eq!(o.classify(&bad, 7), Seen::Other);
        assert_eq!(o.classify(&f[..40], 7), Seen::Other);
        let mut arp = f.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(o.classify(&arp, 7), Seen::Other);
        // A router's rewrite (MACs, TTL, checksum) keeps it ours.
        let mut routed = f.clone();
        routed[22] -= 1;
        routed[0..12].fill(9);
        assert_eq!(o.classify(&routed, 7), Seen::Ours);
    }

    #[test]
    fn trace_rows_rewrite_macs_only_and_recognize_their_flows() {
        let recs = longhaul_dataplane::pcap::read_pcap(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/roce-64flows.pcap"
        ))
        .unwrap();
        let frames: Vec<Vec<u8>> = recs.iter().map(|r| r.data.clone()).collect();
        let o = Offer::trace("roce", frames.clone(), [2; 6], [1; 6]);
        assert_eq!(o.frames.len(), 1024);
        for (a, b) in o.frames.iter().zip(&frames) {
            assert_eq!(&a[12..], &b[12..]);
            assert_eq!(&a[0..6], &[1; 6]);
            assert_eq!(o.classify(a, 123), Seen::Ours);
        }
        let mean = frames.iter().map(|f| f.len() + 4).sum::<usize>() as f64 / 1024.0;
        assert!((o.mean_size - mean).abs() < 1e-9);
        let mut other = args();
        other.src_ip = "192.0.2.1".parse().unwrap();
        let udp = Offer::udp(64, &other, [0; 6], [1; 6]);
        assert_eq!(o.classify(&udp.frames[0], 0), Seen::Other);
        // A device that moves RoCE to another UDP port (MLCC's INT source) keeps it ours.
        let mut moved = o.frames[0].clone();
        moved[36..38].copy_from_slice(&5000u16.to_be_bytes());
        assert_eq!(o.classify(&moved, 1), Seen::Ours);
    }

    #[test]
    fn line_rate_is_rfc2544s_maximum_frame_rate() {
        // 10 Gb/s: 14 880 952 frames/s at 64 bytes, 812 743 at 1518 (RFC 2544 section 20 /
        // the usual table).
        assert_eq!(line_rate_pps(64.0, 10.0).round(), 14_880_952.0);
        assert_eq!(line_rate_pps(1518.0, 10.0).round(), 812_744.0);
    }

    /// A device that loses frames above `cap` frames/s; the search must end within the
    /// resolution below it.
    fn run_search(cap: f64, max: f64, res: f64) -> Search {
        let mut s = Search::new(max, res);
        while let Some(r) = s.next_rate() {
            let offered = r.round() as u64;
            let received = if r <= cap { offered } else { offered - 1 };
            s.record(Trial {
                target_pps: r,
                offered,
                received,
                seconds: 1.0,
                ..Trial::default()
            });
        }
        s
    }

    #[test]
    fn search_converges_below_the_loss_point_within_the_resolution() {
        for cap in [1.0, 123_456.0, 500_000.0, 999_999.0] {
            let s = run_search(cap, 1_000_000.0, 0.01);
            let best = s.best.map_or(0.0, |b| b.target_pps);
            assert!(best <= cap, "cap {cap}: {best}");
            if cap >= MIN_PPS {
                assert!(cap - best <= 0.01 * cap + 1.0, "cap {cap}: {best}");
            } else {
                assert_eq!(best, 0.0);
            }
            assert!(s.trials.len() <= 18, "{}", s.trials.len());
            assert!(!s.trials[0].passed());
        }
    }

    #[test]
    fn search_stops_after_one_trial_when_the_top_rate_passes() {
        let s = run_search(2e6, 1e6, 0.01);
        assert_eq!(s.trials.len(), 1);
        assert_eq!(s.best.unwrap().target_pps, 1e6);
    }

    #[test]
    fn search_reports_nothing_when_every_rate_loses() {
        let s = run_search(0.0, 1e6, 0.05);
        assert!(s.best.is_none());
        let r = Row::from_search("64", 64.0, 1e6, &s);
        assert_eq!(r.pps(), 0.0);
        assert!(csv("x", std::slice::from_ref(&r))
            .lines()
            .nth(1)
            .unwrap()
            .contains(",0,"));
    }

    #[test]
    fn generator_bound_only_when_the_zero_loss_trial_was_short() {
        let t = |target_pps: f64, offered: u64, received: u64, generator_short: bool| Trial {
            target_pps,
            offered,
            received,
            seconds: 1.0,
            generator_short,
            ..Trial::default()
        };
        let mut s = Search::new(1e6, 0.01);
        // At the top the generator fell short and the device still lost frames: its limit.
        s.record(t(1e6, 600_000, 500_000, true));
        assert!(!Row::from_search("64", 64.0, 1e6, &s).generator_limited);
        // Half the rate, short again, and nothing lost: the figure is the generator's.
        s.record(t(5e5, 400_000, 400_000, true));
        let r = Row::from_search("64", 64.0, 1e6, &s);
        assert!(r.generator_limited);
        assert_eq!(r.pps(), 400_000.0);
        assert!(table(&[r], 100.0).contains("generator-bound"));
    }

    #[test]
    fn rows_table_and_csv_carry_the_figures() {
        let s = run_search(400_000.0, 1_000_000.0, 0.01);
        let r = Row::from_search("1518", 1518.0, 8_127_438.0, &s);
        let pps = r.pps();
        assert!(pps > 390_000.0 && pps <= 400_000.0, "{pps}");
        assert!((r.gbps() - pps * 1518.0 * 8.0 / 1e9).abs() < 1e-9);
        let t = table(std::slice::from_ref(&r), 100.0);
        assert!(t.contains("1518"), "{t}");
        let c = csv("baseline", &[r]);
        let line = c.lines().nth(1).unwrap();
        assert!(line.starts_with("baseline,1518,1518.0,8127438,"), "{line}");
        assert_eq!(
            line.split(',').count(),
            c.lines().next().unwrap().split(',').count()
        );
    }

    #[test]
    fn bad_arguments_are_refused_before_anything_starts() {
        let mut a = args();
        a.sizes = vec![63];
        assert!(offers(&a).unwrap_err().to_string().contains("--sizes: 63"));
        let mut a = args();
        a.rx = a.tx.clone();
        assert!(offers(&a).unwrap_err().to_string().contains("same device"));
        let mut a = args();
        a.dst_mac = "nope".into();
        assert!(offers(&a).unwrap_err().to_string().contains("--dst-mac"));
        let mut a = args();
        a.trial = 0.0;
        assert!(offers(&a).unwrap_err().to_string().contains("--trial"));
        let mut a = args();
        a.trace = Some("/nonexistent.pcap".into());
        assert!(offers(&a)
            .unwrap_err()
            .to_string()
            .contains("/nonexistent.pcap"));
        assert_eq!(offers(&args()).unwrap().len(), 2);
    }
}
