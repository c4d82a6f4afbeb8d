//! Streaming replay (`longhaul replay`): inputs read as needed and outputs handed on as they
//! leave, so memory does not grow with the trace; a read error mid-trace fails the replay and
//! names the input; the result equals the in-memory replay's.

use longhaul_dataplane::pcap::{read_pcap, PcapRecord};
use longhaul_dataplane::replay::{FrameSource, Records};
use longhaul_dataplane::time::Nanos;
use longhaul_runtime::{ReplayInput, StreamInput};
use std::io;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The shipped trace's frames repeated `n` times, 30 ns apart, made as they are read.
struct Generated {
    frames: Vec<Vec<u8>>,
    next: u64,
    n: u64,
    fail_at: Option<u64>,
}

impl FrameSource for Generated {
    fn peek(&mut self) -> io::Result<Option<Nanos>> {
        if Some(self.next) == self.fail_at {
            self.n = self.next; // at its end after an error, as FrameSource::peek says
            self.fail_at = None;
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "truncated record",
            ));
        }
        if self.next == self.n {
            return Ok(None);
        }
        Ok(Some(1_000 + (self.next + 1) * 30))
    }
    fn take(&mut self) -> io::Result<&[u8]> {
        let f = &self.frames[(self.next % self.frames.len() as u64) as usize];
        self.next += 1;
        Ok(f)
    }
}

fn trace() -> Vec<Vec<u8>> {
    read_pcap(root().join("examples/roce-64flows.pcap"))
        .unwrap()
        .into_iter()
        .map(|r| r.data)
        .collect()
}

fn config() -> longhaul_control::config::Config {
    longhaul_pipelines::load_config(&root().join("configs/baseline.toml")).unwrap()
}

/// Peak resident memory of this process, KiB (Linux).
fn vm_hwm_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Replay `n` generated frames through the baseline, counting what comes out.
fn replay_generated(n: u64) -> (u64, u64, u64, u64) {
    let cfg = config();
    let src = Generated {
        frames: trace(),
        next: 0,
        n,
        fail_at: None,
    };
    let mut out_frames = 0u64;
    let mut out_bytes = 0u64;
    let mut sink = |_port: u16, _ts: Nanos, data: &[u8]| {
        out_frames += 1;
        out_bytes += data.len() as u64;
    };
    let mut ticks = 0;
    let mut progress = |_n: u64, _t: Nanos| ticks += 1;
    let st = longhaul_pipelines::replay_stream(
        &cfg,
        vec![StreamInput {
            port: 0,
            name: "generated".into(),
            source: Box::new(src),
        }],
        &mut sink,
        longhaul_runtime::ReplayHooks {
            progress: Some(&mut progress),
            sample: None,
        },
    )
    .unwrap();
    (st.summary.offered, out_frames, out_bytes, ticks)
}

#[test]
fn a_long_trace_streams_in_bounded_memory() {
    // The switch's own memory first (tables, queues: the same for any trace), with a short run.
    assert_eq!(replay_generated(1_000).0, 1_000);
    let before = vm_hwm_kib();
    // 400 000 frames of 314 bytes: 126 MB in and out. Held in memory they would add at least
    // that much to the peak; streamed, only the frames in flight count.
    let n = 400_000;
    let (offered, out_frames, out_bytes, ticks) = replay_generated(n);
    let grew_mib = (vm_hwm_kib() - before) / 1024;
    assert_eq!((offered, out_frames), (n, n));
    assert_eq!(out_bytes, n * 314);
    assert_eq!(ticks, n / longhaul_runtime::replay::PROGRESS_EVERY);
    assert!(
        grew_mib < 20,
        "peak memory grew by {grew_mib} MiB for a 126 MB trace"
    );
}

#[test]
fn a_read_error_mid_trace_fails_the_replay_and_names_the_input() {
    let cfg = config();
    let src = Generated {
        frames: trace(),
        next: 0,
        n: 1000,
        fail_at: Some(500),
    };
    let mut sink = |_: u16, _: Nanos, _: &[u8]| {};
    let e = longhaul_pipelines::replay_stream(
        &cfg,
        vec![StreamInput {
            port: 0,
            name: "big.pcap".into(),
            source: Box::new(src),
        }],
        &mut sink,
        Default::default(),
    )
    .err()
    .unwrap();
    assert_eq!(e.to_string(), "big.pcap: truncated record");
}

#[test]
fn streaming_and_in_memory_replays_agree() {
    let cfg = config();
    let recs: Vec<PcapRecord> = read_pcap(root().join("examples/roce-64flows.pcap")).unwrap();
    let mem = longhaul_pipelines::replay(
        &cfg,
        vec![ReplayInput {
            port: 0,
            records: recs.clone(),
        }],
    )
    .unwrap();
    let mut got: Vec<(u16, PcapRecord)> = Vec::new();
    let mut sink = |p: u16, ts: Nanos, d: &[u8]| {
        got.push((
            p,
            PcapRecord {
                ts_ns: ts,
                data: d.to_vec(),
            },
        ))
    };
    let st = longhaul_pipelines::replay_stream(
        &cfg,
        vec![StreamInput {
            port: 0,
            name: "trace".into(),
            source: Box::new(Records::new(recs)),
        }],
        &mut sink,
        Default::default(),
    )
    .unwrap();
    assert_eq!(st.counters, mem.counters);
    let wan0: Vec<PcapRecord> = got
        .into_iter()
        .filter(|(p, _)| *p == 2)
        .map(|(_, r)| r)
        .collect();
    assert_eq!(wan0, mem.outputs[&2]);
    assert_eq!(wan0.len(), 1024);
}
