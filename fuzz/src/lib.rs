//! Fuzz targets for longhaul (issue 20): one plain function per target that takes any byte
//! string and never panics by itself. A panic, an abort or a hang inside one is a bug in the
//! code under test. The AFL++ driver (`src/bin/afl.rs`, feature `afl`) and the corpus smoke test
//! (`tests/smoke.rs`) call them through [`TARGETS`]; fuzz/README.md says how to run each.

pub mod api;
pub mod input;
pub mod pipeline;
pub mod wire;

use input::Input;
use longhaul_dataplane::pcap::{PcapReader, PcapWriter};
use longhaul_dataplane::wire::parse;
use longhaul_pipelines::themis::daemon;
use std::net::Ipv4Addr;
use std::path::Path;

pub use api::api;
pub use pipeline::{
    pipeline_baseline, pipeline_bifrost, pipeline_mlcc, pipeline_reflex, pipeline_spray,
    pipeline_themis,
};
pub use wire::wire;

/// A fuzz target.
pub type Target = fn(&[u8]);

/// Every target, by the name the AFL driver, the corpus directories and the README use.
pub const TARGETS: &[(&str, Target)] = &[
    ("wire", wire),
    ("pcap", pcap),
    ("config", config),
    ("themis_daemon", themis_daemon),
    ("api", api),
    ("pipeline_baseline", pipeline_baseline),
    ("pipeline_themis", pipeline_themis),
    ("pipeline_spray", pipeline_spray),
    ("pipeline_mlcc", pipeline_mlcc),
    ("pipeline_reflex", pipeline_reflex),
    ("pipeline_bifrost", pipeline_bifrost),
];

/// The target named `name`.
pub fn target(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// The repository's root (configs are read from it by path in errors only; their text is
/// compiled in).
pub(crate) fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The pcap reader (dataplane/src/pcap.rs) on the bytes of a file: every record through
/// `next_into` (one buffer) and through `peek_record`/`take_frame` (as a replay reads them, over
/// a small buffer so frames straddle it), which must agree; then the records written back and
/// read again.
pub fn pcap(data: &[u8]) {
    let Ok(mut r) = PcapReader::new(data) else {
        return;
    };
    let _ = r.header();
    let mut buf = Vec::new();
    let mut recs = Vec::new();
    for _ in 0..4096 {
        match r.next_into(&mut buf) {
            Ok(Some(ts)) => recs.push((ts, buf.clone())),
            Ok(None) | Err(_) => break,
        }
    }
    // As a replay reads them (peek the header, take the frame from the reader's buffer): the
    // same records, and an error where the copying reader has one.
    if let Ok(mut p) = PcapReader::new(std::io::BufReader::with_capacity(64, data)) {
        for (i, want) in recs.iter().enumerate() {
            let ts = p.peek_record().expect("peek where next_into read a record");
            assert_eq!(ts, Some(want.0), "record #{i}");
            assert_eq!(
                p.take_frame().expect("take where next_into read a record"),
                &want.1[..]
            );
        }
    }
    // The iterator interface, to the end or the first error.
    let _ = PcapReader::new(data).map(|r| r.take(4096).take_while(|x| x.is_ok()).count());
    let Ok(mut w) = PcapWriter::new(Vec::new()) else {
        return;
    };
    for (ts, d) in &recs {
        let _ = w.write_frame(*ts, d);
    }
    if let Ok(out) = w.finish() {
        let _ = longhaul_dataplane::pcap::read_pcap_from(&out[..]);
    }
}

/// The config loader with every mechanism's schema, as `longhaul check-config` runs it (every
/// error), then the first-error parse; a config that validates is built into a switch of its
/// pipeline through the registry and run for a moment on virtual time.
pub fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let file = root().join("configs/fuzz.toml");
    let all = longhaul_pipelines::parse_config_all(&text, &file);
    let one = longhaul_pipelines::parse_config(&text, &file);
    if let Ok(cfg) = all {
        let _ = one;
        pipeline::smoke_config(&cfg);
    }
}

/// The THEMIS daemon message parser (pipelines/src/themis/daemon.rs) and the handling behind it
/// (trust policy, inter-DC pairs, QP_field). Byte 0 bit 0: the rest is a whole frame (parsed by
/// the ingress parser first, as the pipeline does); otherwise the rest is a sequence of
/// 17-byte records (a port byte and a 16-byte payload) each wrapped in a valid Ethernet | IPv4 |
/// UDP to 12345 datagram from a source taken from the payload, so the checks past the checksum
/// are reached.
pub fn themis_daemon(data: &[u8]) {
    let mut inp = Input::new(data);
    let mode = inp.u8();
    let policy = daemon::DaemonPolicy {
        allowed_prefixes: vec![(0x0a00_0000, 16), (0xc0a8_0000, 24 + (mode >> 5) % 9)],
        allowed_ports: vec![0, 1],
        inter_dc: if mode & 2 != 0 {
            daemon::InterDcSource::HandshakeMonitor
        } else {
            daemon::InterDcSource::RemotePrefixes(vec![(0x0a01_0000, 16), (0, (mode >> 2) & 7)])
        },
    };
    let mut d = daemon::Daemon::new(policy);
    let mut pairs = daemon::InterDcPairs::new(16);
    let mut qp = daemon::QpField::new(8);
    let opts = parse::ParseOptions::default();
    let mut now = 0u64;
    let mut handle = |frame: &[u8], port: u16, now: u64| {
        let p = parse::parse(frame, &opts);
        let _ = daemon::parse_daemon(frame, &p);
        if let Ok(u) = d.handle(frame, &p, port, now, &pairs, &mut qp) {
            let _ = u.register_reset();
            if let (Some(a), Some(b)) = (u.register_reset(), Some(port)) {
                let _ = (a.client_v4(), b);
            }
        }
        if let Some(parse::Ipv4Udp { src: a, dst: b, .. }) = parse::ipv4_udp(frame) {
            let _ = pairs.record(a, b, now);
            if now.is_multiple_of(3) {
                pairs.remove(b, a);
            }
        }
    };
    if mode & 1 == 1 {
        handle(inp.rest(), 0, 0);
        return;
    }
    let mut buf = [0u8; 128];
    while !inp.is_empty() {
        let port = inp.u8() as u16 % 3;
        let p = inp.bytes(16);
        let mut payload = [0u8; 16];
        payload[..p.len()].copy_from_slice(p);
        let word = |i: usize| {
            u32::from_be_bytes([payload[i], payload[i + 1], payload[i + 2], payload[i + 3]])
        };
        // The client is a host of 10.0.0.0/16 or 192.168.0.0/24 picked by the low bits of cQPN.
        let client = if word(4) & 1 == 0 {
            Ipv4Addr::from(0x0a00_0000 | (word(4) >> 8 & 0xffff))
        } else {
            Ipv4Addr::from(0xc0a8_0000 | (word(4) >> 8 & 0xff))
        };
        let msg = daemon::DaemonMsg {
            client_ip: u32::from(client),
            dst_ip: word(0),
            cqpn: word(4),
            sqpn: word(8),
            op: daemon::DaemonOp::Destroy,
        };
        let Some(n) = daemon::build_daemon_frame(
            &mut buf,
            [2, 0, 0, 0, 0, 1],
            [2, 0, 0, 0, 0, 2],
            client,
            Ipv4Addr::from(word(0)),
            &msg,
        ) else {
            return;
        };
        // The real payload (flag and QPNs as given), checksum fixed.
        let f = &mut buf[..n];
        f[42..58].copy_from_slice(&payload);
        f[40..42].copy_from_slice(&[0, 0]);
        let c =
            longhaul_dataplane::wire::udp::checksum_v4(&f[34..58], client, Ipv4Addr::from(word(0)));
        f[40..42].copy_from_slice(&c.to_be_bytes());
        now += 1_000;
        handle(f, port, now);
    }
    let _ = (qp.len(), qp.is_empty(), pairs.len(), d.stats);
}
