//! The `pipeline_*` targets: a whole switch of one pipeline, built from a shipped config
//! (`configs/`) through its registry mechanism exactly as replay and the emulator build it
//! (switch spec with every registered mechanism's additions, the pipeline's stages, its control
//! handler inline on virtual time), driven by the fuzz input read as a program of operations:
//!
//! | op (byte % 10) | what |
//! |---|---|
//! | 0 | a frame of arbitrary bytes arrives on a port after a delay |
//! | 1, 2 | a frame of the shipped traces for this pipeline, with a few bytes changed, cut or extended, arrives on a port |
//! | 3 | virtual time advances (timers, shapers, queue drains, PFC, punts handled inline) |
//! | 4 | frames the switch transmitted come back on other ports (loops, reflections) |
//! | 5, 6 | a table insert / delete through the pipeline's control plane (JSON entries as the management API takes them), its commands to the switch |
//! | 7 | a control `Inject` of a frame (on a port, or on the recirculation loop) |
//! | 8 | a control `SetPortRate` |
//! | 9 | table listings and a counter snapshot |
//!
//! At the end time runs 5 ms further (not to idle: timers of some mechanisms never stop).

use crate::input::Input;
use longhaul_control::config::Config;
use longhaul_control::plane::{Inline, PipelineControl};
use longhaul_dataplane::control::Command;
use longhaul_dataplane::engine::{Switch, SwitchSnapshot};
use longhaul_dataplane::packet::HeapPool;
use longhaul_dataplane::pcap::read_pcap_from;
use longhaul_dataplane::replay::Harness;
use longhaul_pipelines::{baseline, mlcc, reflex, spray, themis};
use longhaul_runtime::build::switch_spec;
use longhaul_runtime::PipelineMechanism;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

macro_rules! repo_file {
    ($p:literal) => {
        (
            $p,
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../", $p)) as &[u8],
        )
    };
}

/// The shipped configs the targets build switches from.
const CONFIGS: &[RepoFile] = &[
    repo_file!("configs/baseline.toml"),
    repo_file!("configs/routed-arp.toml"),
    repo_file!("configs/themis-esw.toml"),
    repo_file!("configs/spray-tor.toml"),
    repo_file!("configs/mlcc-dci.toml"),
    repo_file!("configs/mlcc-tor.toml"),
    repo_file!("configs/reflex-esw.toml"),
    repo_file!("configs/bifrost-dci.toml"),
];

/// A repository file: path and contents.
type RepoFile = (&'static str, &'static [u8]);

/// Shipped traces and conformance inputs, the frames op 1 starts from, per target.
const TRACES: &[(&str, &[RepoFile])] = &[
    (
        "baseline",
        &[
            repo_file!("examples/roce-64flows.pcap"),
            repo_file!("pcap-tests/cases/l3_forward_roce_tcp/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/ecn_marking/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/pfc_xoff_xon/in_dc1.pcap"),
            repo_file!("pcap-tests/cases/neighbor_arp_nd/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/neighbor_arp_nd/in_wan0.pcap"),
            repo_file!("pcap-tests/cases/wire_pair_transparent/in_dc1.pcap"),
            repo_file!("pcap-tests/cases/wire_pair_transparent/in_wan1.pcap"),
        ],
    ),
    (
        "themis",
        &[
            repo_file!("pcap-tests/cases/themis_daemon/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/themis_daemon/in_wan0.pcap"),
            repo_file!("pcap-tests/cases/themis_pnp_cnp/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/themis_syn_cookie/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/themis_trp_loops/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/themis_trp_loops/in_wan0.pcap"),
            repo_file!("pcap-tests/cases/themis_alg1_trace/in_wan0.pcap"),
        ],
    ),
    (
        "spray",
        &[
            repo_file!("perf/spray-64qps.pcap"),
            repo_file!("pcap-tests/cases/spray_fig6_nack_validation/in_h0.pcap"),
            repo_file!("pcap-tests/cases/spray_fig6_nack_validation/in_up0.pcap"),
            repo_file!("pcap-tests/cases/spray_fig7_lazy_drop/in_up1.pcap"),
        ],
    ),
    (
        "mlcc",
        &[
            repo_file!("pcap-tests/cases/mlcc_pfq_credit/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/mlcc_pfq_credit/in_wan0.pcap"),
            repo_file!("pcap-tests/cases/mlcc_switch_int_feedback/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/int_source_tor/in_host0.pcap"),
        ],
    ),
    (
        "reflex",
        &[
            repo_file!("perf/reflex-64flows.pcap"),
            repo_file!("pcap-tests/cases/reflex_ndt_queues/in_wan0.pcap"),
            repo_file!("pcap-tests/cases/reflex_ndt_queues/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/reflex_nsf_pseudo_ack/in_dc0.pcap"),
        ],
    ),
    (
        "bifrost",
        &[
            repo_file!("pcap-tests/cases/bifrost_slot_pause/in_dc0.pcap"),
            repo_file!("pcap-tests/cases/bifrost_slot_pause/in_wan0.pcap"),
            repo_file!("examples/roce-64flows.pcap"),
        ],
    ),
];

/// Frames taken from each trace (the first ones, then every k-th).
const FRAMES_PER_TRACE: usize = 24;

/// The shipped config `name` (e.g. `baseline.toml`), parsed once, with at most
/// [`POOL_BUFFERS`] buffers.
pub fn shipped_config(name: &str) -> &'static Config {
    static C: OnceLock<HashMap<&'static str, Config>> = OnceLock::new();
    let all = C.get_or_init(|| {
        CONFIGS
            .iter()
            .map(|(path, text)| {
                let text = std::str::from_utf8(text).expect("config is UTF-8");
                let mut cfg = longhaul_pipelines::parse_config(text, &crate::root().join(path))
                    .unwrap_or_else(|e| panic!("{path}: {e}"));
                cfg.switch.pool_buffers = cfg.switch.pool_buffers.min(POOL_BUFFERS);
                (path.trim_start_matches("configs/"), cfg)
            })
            .collect()
    });
    &all[name]
}

/// The template frames of target `name`.
pub fn templates(name: &str) -> &'static [Vec<u8>] {
    static T: OnceLock<HashMap<&'static str, Vec<Vec<u8>>>> = OnceLock::new();
    let all = T.get_or_init(|| {
        TRACES
            .iter()
            .map(|(n, files)| {
                let mut frames = Vec::new();
                for (path, bytes) in files.iter() {
                    let recs = read_pcap_from(*bytes).unwrap_or_else(|e| panic!("{path}: {e}"));
                    let step = (recs.len() / FRAMES_PER_TRACE).max(1);
                    frames.extend(
                        recs.into_iter()
                            .step_by(step)
                            .take(FRAMES_PER_TRACE)
                            .map(|r| r.data),
                    );
                }
                (*n, frames)
            })
            .collect()
    });
    &all[name]
}

pub fn pipeline_baseline(data: &[u8]) {
    let (&sel, rest) = data.split_first().unwrap_or((&0, data));
    let cfg = shipped_config(if sel & 1 == 0 {
        "baseline.toml"
    } else {
        "routed-arp.toml"
    });
    drive(
        &baseline::mechanism::BaselineMechanism,
        cfg,
        "baseline",
        rest,
    );
}

pub fn pipeline_themis(data: &[u8]) {
    let cfg = shipped_config("themis-esw.toml");
    drive(&themis::mechanism::ThemisMechanism, cfg, "themis", data);
}

pub fn pipeline_spray(data: &[u8]) {
    let cfg = shipped_config("spray-tor.toml");
    drive(&spray::mechanism::SprayMechanism, cfg, "spray", data);
}

/// The MLCC DCI (`mlcc-dci.toml`), or the baseline with MLCC's INT source (`mlcc-tor.toml`).
pub fn pipeline_mlcc(data: &[u8]) {
    let (&sel, rest) = data.split_first().unwrap_or((&0, data));
    if sel & 1 == 0 {
        let cfg = shipped_config("mlcc-dci.toml");
        drive(&mlcc::mechanism::MlccMechanism, cfg, "mlcc", rest);
    } else {
        let cfg = shipped_config("mlcc-tor.toml");
        drive(&baseline::mechanism::BaselineMechanism, cfg, "mlcc", rest);
    }
}

pub fn pipeline_reflex(data: &[u8]) {
    let cfg = shipped_config("reflex-esw.toml");
    drive(&reflex::mechanism::ReflexMechanism, cfg, "reflex", data);
}

/// Bifrost's section on the baseline pipeline (`bifrost-dci.toml`).
pub fn pipeline_bifrost(data: &[u8]) {
    let cfg = shipped_config("bifrost-dci.toml");
    drive(
        &baseline::mechanism::BaselineMechanism,
        cfg,
        "bifrost",
        data,
    );
}

/// A config that validated (the `config` target): a switch of its pipeline through the
/// registry, one frame on each port, 1 ms of virtual time.
pub fn smoke_config(cfg: &Config) {
    let mut cfg = cfg.clone();
    cfg.switch.pool_buffers = cfg.switch.pool_buffers.min(POOL_BUFFERS);
    let cfg = &cfg;
    let reg = longhaul_pipelines::registry();
    let Ok(p) = reg.find_pipeline(&cfg.switch.pipeline) else {
        return;
    };
    let mut sw = p.emulated(reg.as_ref(), cfg);
    let n = sw.ports().len();
    let t = templates("baseline");
    for i in 0..n {
        sw.put(i, 1_000 + i as u64, t[i % t.len()].clone());
    }
    sw.advance_to(1_000_000, &mut Default::default());
    let mut out = Vec::new();
    sw.take_into(&mut out);
    let _ = (out, sw.snapshot(), sw.next_event());
}

/// Most operations per input (keeps an execution short).
const MAX_OPS: usize = 256;

/// Most packet buffers of a fuzzed switch (`switch.pool_buffers`, which also bounds every
/// queue's ring). The shipped configs have 65536, and a switch that large takes 60 MB and 30 ms
/// to build and drop: 30 executions a second. With 2048 a program still fills queues and runs
/// the pool dry (drops counted as `pool_empty`), many times faster.
pub const POOL_BUFFERS: usize = 2048;

fn drive<M: PipelineMechanism>(m: &M, cfg: &Config, traces: &str, data: &[u8]) {
    let reg = longhaul_pipelines::registry();
    let pool = HeapPool::lazy(cfg.switch.pool_buffers, cfg.switch.buffer_data_room);
    // The registry's admission chain: a fuzzed `[bifrost]` runs its slots as in `longhaul run`.
    let mut sw = Switch::<_, _, longhaul_pipelines::Admission>::with_admission(
        switch_spec(cfg, reg.as_ref()),
        pool,
        m.pipeline(cfg),
    );
    sw.set_inline_control(
        Box::new(Inline(m.control(cfg))),
        cfg.control.control_latency_ns,
    );
    // The API's view of the tables: its commands go to the switch as the control thread's do.
    let mut ctl = m.control(cfg);
    let mut h = Harness::new(sw);
    let ports: Vec<(u16, String)> =
        h.sw.ports()
            .iter()
            .map(|p| (p.id, p.name.clone()))
            .collect();
    let n = ports.len();
    let tables = ctl.tables();
    let tpl = templates(traces);
    let mut inp = Input::new(data);
    let mut t: u64 = 1_000;
    let mut snap = SwitchSnapshot::default();
    for _ in 0..MAX_OPS {
        if inp.is_empty() {
            break;
        }
        match inp.u8() % 10 {
            0 => {
                let port = inp.below(n);
                t += inp.u16() as u64;
                let f = inp.blob(2048);
                h.put(port, t, f);
            }
            1 | 2 => {
                let port = inp.below(n);
                t += inp.u16() as u64;
                let f = mutated(&mut inp, tpl);
                h.put(port, t, &f);
            }
            3 => {
                t += inp.u32() as u64 % 20_000_000;
                h.advance_to(t);
            }
            4 => {
                let out = h.take();
                for e in out.iter().take(16) {
                    let port = (e.port_idx + 1 + inp.below(n)) % n;
                    t += inp.u8() as u64;
                    h.put(port, t, &e.data);
                }
            }
            5 | 6 => {
                let table = tables[inp.below(tables.len())].as_str();
                let v = entry(&mut inp, &ports);
                let r = if inp.bool() {
                    ctl.insert(table, &v)
                } else {
                    ctl.delete(table, &v)
                };
                if let Ok((_, cmds)) = r {
                    let at = t.max(h.now());
                    for c in cmds {
                        let _ = h.sw.enqueue_command(at, Command::Pipeline(c));
                    }
                }
            }
            7 => {
                let port = if inp.bool() {
                    ports[inp.below(n)].0
                } else {
                    inp.u8() as u16
                };
                let recirculate = inp.bool();
                let frame = if inp.bool() {
                    mutated(&mut inp, tpl)
                } else {
                    inp.blob(2048).to_vec()
                };
                let cmd = Command::Inject {
                    port,
                    recirculate,
                    frame: frame.into_boxed_slice(),
                };
                let _ = h.sw.enqueue_command(t.max(h.now()), cmd);
            }
            8 => {
                let port = if inp.bool() {
                    ports[inp.below(n)].0
                } else {
                    inp.u8() as u16
                };
                // The rates a config or `longhaul ctl` can set: 1 Mb/s to 400 Gb/s.
                let rate_bps = 1_000_000 + inp.u64() % 400_000_000_000;
                let _ =
                    h.sw.enqueue_command(t.max(h.now()), Command::SetPortRate { port, rate_bps });
            }
            _ => {
                for table in &tables {
                    let _ = ctl.list(table, inp.u8() as usize, 1 + inp.u8() as usize);
                }
                h.sw.snapshot_into(h.now(), &mut snap);
                let _ = h.next_event();
            }
        }
    }
    h.advance_to(t + 5_000_000);
    let _ = h.take();
    let _ = h.summary();
}

/// A template frame with a few bytes changed, and sometimes cut or extended.
fn mutated(inp: &mut Input<'_>, tpl: &[Vec<u8>]) -> Vec<u8> {
    let mut f = tpl[inp.below(tpl.len())].clone();
    let k = inp.u8() % 5;
    for _ in 0..k {
        let pos = inp.u16() as usize;
        let val = inp.u8();
        if !f.is_empty() {
            let i = pos % f.len();
            f[i] = val;
        }
    }
    match inp.u8() % 8 {
        0 => f.truncate(inp.u16() as usize % (f.len() + 1)),
        1 => f.extend_from_slice(inp.blob(64)),
        _ => {}
    }
    f
}

/// Keys of the tables' JSON entries (every pipeline's).
const KEYS: &[&str] = &[
    "mac",
    "port",
    "prefix",
    "next_hop_mac",
    "next_hop",
    "ip",
    "local",
    "local_qpn",
    "remote",
    "remote_qpn",
    "slot",
];

/// A JSON table entry or key: a subset of the keys, with plausible or arbitrary values.
fn entry(inp: &mut Input<'_>, ports: &[(u16, String)]) -> Value {
    let mask = inp.u16();
    let mut m = Map::new();
    for (i, k) in KEYS.iter().enumerate() {
        if mask >> i & 1 == 1 {
            m.insert((*k).to_owned(), value(inp, k, ports));
        }
    }
    if mask & 0x8000 != 0 {
        // An unknown key.
        let k = String::from_utf8_lossy(inp.blob(8)).into_owned();
        m.insert(k, Value::from(1));
    }
    Value::Object(m)
}

fn value(inp: &mut Input<'_>, key: &str, ports: &[(u16, String)]) -> Value {
    match inp.u8() % 8 {
        0..=3 => plausible(inp, key, ports),
        4 => Value::from(inp.u64()),
        5 => Value::from(String::from_utf8_lossy(inp.blob(32)).into_owned()),
        6 => match inp.u8() % 4 {
            0 => Value::Null,
            1 => Value::from(inp.bool()),
            2 => Value::from(inp.u32() as f64 / 7.0),
            _ => Value::Array(vec![Value::from(inp.u8())]),
        },
        _ => Value::from(inp.u32() as i64 - (1 << 31)),
    }
}

fn plausible(inp: &mut Input<'_>, key: &str, ports: &[(u16, String)]) -> Value {
    match key {
        "mac" | "next_hop_mac" => Value::from(format!(
            "02:00:00:{:02x}:{:02x}:{:02x}",
            inp.u8() % 4,
            inp.u8() % 4,
            inp.u8()
        )),
        "port" => {
            let (id, name) = &ports[inp.below(ports.len())];
            if inp.bool() {
                Value::from(name.clone())
            } else {
                Value::from(*id)
            }
        }
        "prefix" => {
            if inp.bool() {
                Value::from(format!(
                    "{}.{}.{}.{}/{}",
                    [10, 192, 172, 0][inp.below(4)],
                    inp.u8() % 4,
                    inp.u8(),
                    inp.u8() % 4,
                    inp.u8() % 40
                ))
            } else {
                Value::from(format!("2001:db8:{:x}::/{}", inp.u8(), inp.u8() % 140))
            }
        }
        "local_qpn" | "remote_qpn" | "slot" => Value::from(inp.u32() >> (inp.u8() % 32)),
        _ => {
            if inp.u8().is_multiple_of(4) {
                Value::from(format!("2001:db8::{:x}", inp.u16()))
            } else {
                Value::from(format!(
                    "{}.{}.{}.{}",
                    [10, 192, 10, 172][inp.below(4)],
                    inp.u8() % 4,
                    inp.u8() % 4,
                    inp.u8()
                ))
            }
        }
    }
}
