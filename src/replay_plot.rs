//! `longhaul replay --plot DIR`: the switch sampled on virtual time while it replays, written as
//! `timeseries.csv` and three charts (PNG and SVG): queue depth per port and class, throughput
//! per port, and PFC frames and CNPs sent per port.

use longhaul_dataplane::engine::SwitchSnapshot;
use longhaul_dataplane::packet::NUM_CLASSES;
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::parse::{parse, ParseOptions};
use longhaul_dataplane::wire::roce::opcode;
use longhaul_emulator::plot::{write_lines, Series};
use std::fmt::Write as _;
use std::path::Path;

/// Samples kept at most: past it every other one is dropped and only every other later one is
/// kept (the counters are cumulative, so rates stay right at the coarser step).
const MAX_SAMPLES: usize = 20_000;

/// One sample: per port (tx bytes, PFC frames sent, CNPs sent), per port and class queued bytes.
struct Point {
    t: Nanos,
    ports: Vec<(u64, u64, u64)>,
    depth: Vec<[u64; NUM_CLASSES]>,
}

/// What the replay is sampled into.
pub struct Plot {
    /// The sampling step: the first sample is one step after the first frame (time 0).
    step: Nanos,
    names: Vec<String>,
    /// CNPs sent so far, by port id.
    cnps: Vec<u64>,
    points: Vec<Point>,
    stride: usize,
    seen: usize,
}

impl Plot {
    pub fn new(step: Nanos) -> Self {
        Plot {
            step,
            names: Vec::new(),
            cnps: Vec::new(),
            points: Vec::new(),
            stride: 1,
            seen: 0,
        }
    }

    /// Count a transmitted frame (CNPs are RoCEv2 with BTH opcode 0x81).
    pub fn on_frame(&mut self, port: u16, data: &[u8]) {
        let p = parse(data, &ParseOptions::default());
        if p.is_roce() && data.get(p.bth_off as usize) == Some(&opcode::CNP) {
            let i = port as usize;
            if self.cnps.len() <= i {
                self.cnps.resize(i + 1, 0);
            }
            self.cnps[i] += 1;
        }
    }

    /// Record the switch's counters at `t`.
    pub fn on_sample(&mut self, t: Nanos, s: &SwitchSnapshot) {
        if self.names.is_empty() {
            self.names = s.ports.iter().map(|p| p.name.clone()).collect();
        }
        self.seen += 1;
        if !(self.seen - 1).is_multiple_of(self.stride) {
            return;
        }
        let cnps = |id: u16| self.cnps.get(id as usize).copied().unwrap_or(0);
        self.points.push(Point {
            t,
            ports: s
                .ports
                .iter()
                .map(|p| (p.stats.tx_bytes, p.stats.pfc_tx, cnps(p.id)))
                .collect(),
            depth: s
                .ports
                .iter()
                .map(|p| std::array::from_fn(|c| p.classes[c].depth_bytes))
                .collect(),
        });
        if self.points.len() >= MAX_SAMPLES {
            let mut k = 0;
            self.points.retain(|_| {
                k += 1;
                k % 2 == 1
            });
            self.stride *= 2;
        }
    }

    fn us(&self, t: Nanos) -> f64 {
        let t0 = self
            .points
            .first()
            .map_or(t, |p| p.t.saturating_sub(self.step));
        t.saturating_sub(t0) as f64 / 1e3
    }

    /// Queued KB per (port, class) that ever queued, the deepest first.
    fn queues(&self) -> Vec<Series> {
        let mut out: Vec<(u64, Series)> = Vec::new();
        for (p, name) in self.names.iter().enumerate() {
            for c in 0..NUM_CLASSES {
                let peak = self.points.iter().map(|x| x.depth[p][c]).max().unwrap_or(0);
                if peak > 0 {
                    let pts = self
                        .points
                        .iter()
                        .map(|x| (self.us(x.t), x.depth[p][c] as f64 / 1e3))
                        .collect();
                    out.push((peak, (format!("{name} class {c}"), pts)));
                }
            }
        }
        out.sort_by_key(|s| std::cmp::Reverse(s.0));
        out.into_iter().map(|(_, s)| s).collect()
    }

    /// Per-port rate of a cumulative counter between samples, times `scale`, for the ports whose
    /// counter moved; the busiest first.
    fn rates(
        &self,
        pick: impl Fn(&(u64, u64, u64)) -> u64,
        scale: f64,
        label: &str,
    ) -> Vec<Series> {
        let mut out: Vec<(u64, Series)> = Vec::new();
        for (p, name) in self.names.iter().enumerate() {
            let total = self.points.last().map_or(0, |x| pick(&x.ports[p]));
            if total == 0 {
                continue;
            }
            let pts = self
                .points
                .windows(2)
                .map(|w| {
                    let dt = w[1].t.saturating_sub(w[0].t).max(1) as f64;
                    let dv = pick(&w[1].ports[p]).saturating_sub(pick(&w[0].ports[p]));
                    (self.us(w[1].t), dv as f64 * scale / dt)
                })
                .collect();
            out.push((total, (format!("{name}{label}"), pts)));
        }
        out.sort_by_key(|s| std::cmp::Reverse(s.0));
        out.into_iter().map(|(_, s)| s).collect()
    }

    /// Write `timeseries.csv` and the charts into `dir`; the names written.
    pub fn write(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        std::fs::create_dir_all(dir)?;
        let mut csv = String::from("time_us");
        for n in &self.names {
            let _ = write!(csv, ",{n}.tx_bytes,{n}.pfc_tx,{n}.cnps");
            for c in 0..NUM_CLASSES {
                let _ = write!(csv, ",{n}.class{c}.queued_bytes");
            }
        }
        csv.push('\n');
        for x in &self.points {
            let _ = write!(csv, "{:.3}", self.us(x.t));
            for (p, d) in x.ports.iter().zip(&x.depth) {
                let _ = write!(csv, ",{},{},{}", p.0, p.1, p.2);
                for v in d {
                    let _ = write!(csv, ",{v}");
                }
            }
            csv.push('\n');
        }
        std::fs::write(dir.join("timeseries.csv"), csv)?;
        let mut names = vec!["timeseries.csv".to_string()];
        let q = self.queues();
        if !q.is_empty() {
            write_lines(
                dir,
                "queues",
                "Queue depth per port and class",
                "queued (KB)",
                q,
            )?;
            names.push("queues.{png,svg}".into());
        }
        // Bytes per ns x 8 = Gb/s.
        let tput = self.rates(|p| p.0, 8.0, "");
        if !tput.is_empty() {
            write_lines(dir, "throughput", "Throughput per port", "Gb/s", tput)?;
            names.push("throughput.{png,svg}".into());
        }
        // Frames per ns x 1e6 = per ms.
        let mut fb = self.rates(|p| p.1, 1e6, " PFC");
        fb.extend(self.rates(|p| p.2, 1e6, " CNP"));
        if !fb.is_empty() {
            write_lines(
                dir,
                "pfc_cnp",
                "PFC frames and CNPs sent",
                "frames per ms",
                fb,
            )?;
            names.push("pfc_cnp.{png,svg}".into());
        }
        Ok(names)
    }
}
