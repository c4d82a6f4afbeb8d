//! A mechanism defined here, in a test crate, registered through the public path
//! (`Registry::admitting`, `pipeline`, `mechanism`): its config section is parsed and validated
//! with the same errors as the generic tables, its pipeline runs in replay and live on the
//! baseline's ingress skeleton (its stages at two insertion points), its admission stage runs in
//! the engine's chain ahead of classic PFC, its punt handler and commands work, and its counters
//! reach replay's counters and `/stats`. Nothing in the generic layers knows it.
//! docs/adding-a-mechanism.md walks through the same steps.

use longhaul_control::api::ApiError;
use longhaul_control::config::{
    span, Config, ConfigError, PortRef, Schema, Section, SectionConfig, Validator, S,
};
use longhaul_control::plane::{needs_rebuild, PipelineControl, ReloadPlan};
use longhaul_dataplane::asic::pfc::{ActionBuf, Admit, PfcGenerator};
use longhaul_dataplane::control::{Command, Punt};
use longhaul_dataplane::engine::{
    Action, Admission, Chain, Ctx, Pipeline, SwitchSnapshot, SwitchSpec,
};
use longhaul_dataplane::packet::{BufPool, PacketBuf};
use longhaul_dataplane::pcap::{read_pcap, write_pcap, PcapRecord};
use longhaul_dataplane::time::Nanos;
use longhaul_dataplane::wire::parse::Parsed;
use longhaul_pipelines::baseline::ingress::{ingress, Ingress};
use longhaul_pipelines::baseline::Forwarding;
use longhaul_runtime::{replay, Mechanism, PipelineMechanism, Registry, ReplayInput, RunOptions};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

// ---- the mechanism: "tiny", every frame out of one port, which a control frame can change ----

/// Frames of this EtherType (IEEE local experimental) are control frames: punted, not forwarded;
/// their first payload byte is the new output port id.
const ETHERTYPE_CONTROL: u16 = 0x88b5;
/// The data frames' EtherType (IEEE local experimental 2: not IP, forwarded by the parser's
/// default policy).
const ETHERTYPE_DATA: u16 = 0x88b6;
const PUNT_SET_OUT: u16 = 1;

/// `[tiny]` as in the file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTiny {
    out: Option<S<PortRef>>,
    class: Option<S<i64>>,
}

/// `[tiny]`, validated.
#[derive(Clone, Debug, PartialEq)]
struct TinyConfig {
    out: u16,
    class: u8,
}

struct TinySection;

impl Section for TinySection {
    fn name(&self) -> &'static str {
        "tiny"
    }
    fn validate(
        &self,
        v: &mut Validator<'_>,
        cfg: &Config,
    ) -> Result<Option<Arc<dyn SectionConfig>>, ConfigError> {
        let Some(raw) = v.raw::<RawTiny>("tiny")? else {
            if cfg.switch.pipeline == "tiny" {
                v.err(
                    "tiny",
                    None,
                    "switch.pipeline = \"tiny\" needs a [tiny] table",
                );
            }
            return Ok(None);
        };
        let out = v
            .need("tiny.out", &raw.out)
            .and_then(|r| v.port_ref("tiny.out", r));
        let class = v.int_or("tiny.class", &raw.class, 0, 0, 7) as u8;
        if let (Some(c), true) = (&raw.class, class == 7) {
            v.err("tiny.class", span(c), "class 7 is for network control");
        }
        Ok(out.map(|out| Arc::new(TinyConfig { out, class }) as Arc<dyn SectionConfig>))
    }
}

#[derive(Clone, Debug)]
enum TinyCommand {
    SetOut(u16),
}

longhaul_dataplane::counters! {
    /// Its counters, declared once: `tiny.forwarded` and `tiny.punted` in `/stats`, the metrics
    /// and replay's counters.
    #[derive(Copy)]
    struct TinyStats: "tiny" {
        /// Data frames sent out of the output port.
        forwarded: u64,
        /// Control frames punted.
        punted: u64,
    }
}

struct TinyPipe {
    fwd: Forwarding,
    out: u16,
    class: u8,
    stats: TinyStats,
}

/// Tiny on the baseline's ingress skeleton: control frames punted before the parse; the rest
/// parsed, checked and classified by the baseline, then sent out of one port after classify.
impl<P: BufPool> Ingress<P> for TinyPipe {
    type State = ();

    fn fwd(&mut self) -> &mut Forwarding {
        &mut self.fwd
    }

    fn before_parse(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Result<(), Action> {
        let d = pkt.data();
        if d.len() >= 15 && u16::from_be_bytes([d[12], d[13]]) == ETHERTYPE_CONTROL {
            self.stats.punted += 1;
            ctx.punt_packet(PUNT_SET_OUT, pkt);
            return Err(Action::Consume);
        }
        Ok(())
    }

    fn after_classify(
        &mut self,
        _: &mut Ctx<'_, P>,
        pkt: &mut P::Buf,
        _: &Parsed,
        _: &mut (),
    ) -> Option<Action> {
        self.stats.forwarded += 1;
        let m = pkt.meta_mut();
        m.egress_port = self.out;
        m.class = self.class;
        Some(Action::Forward)
    }
}

impl<P: BufPool> Pipeline<P> for TinyPipe {
    type Command = TinyCommand;

    fn ingress(&mut self, ctx: &mut Ctx<'_, P>, pkt: &mut P::Buf) -> Action {
        ingress(self, ctx, pkt)
    }

    fn command(&mut self, ctx: &mut Ctx<'_, P>, cmd: TinyCommand) -> Result<(), &'static str> {
        match cmd {
            TinyCommand::SetOut(p) if ctx.port(p).is_some() => {
                self.out = p;
                Ok(())
            }
            TinyCommand::SetOut(_) => Err("no such port"),
        }
    }

    fn counters(&self, out: &mut dyn FnMut(&'static str, u64)) {
        self.stats.for_each(out);
    }
}

/// The control plane: the master copy of the output port, a table `tiny_out` of one entry.
struct TinyControl {
    out: u16,
}

impl PipelineControl for TinyControl {
    type Command = TinyCommand;

    fn on_punt(&mut self, punt: &Punt, issue: &mut dyn FnMut(Command<TinyCommand>)) {
        if punt.reason == PUNT_SET_OUT && punt.len >= 15 {
            self.out = u16::from(punt.data[14]);
            issue(Command::Pipeline(TinyCommand::SetOut(self.out)));
        }
    }
    fn tables(&self) -> Vec<String> {
        vec!["tiny_out".into()]
    }
    fn list(&self, _t: &str, _o: usize, _l: usize) -> Result<Value, ApiError> {
        Ok(json!({"table": "tiny_out", "total": 1, "offset": 0, "entries": [{"port": self.out}]}))
    }
    fn insert(&mut self, _t: &str, e: &Value) -> Result<(Value, Vec<TinyCommand>), ApiError> {
        let p = e["port"]
            .as_u64()
            .ok_or_else(|| ApiError::BadRequest("port: expected a port id".into()))?;
        self.out = p as u16;
        Ok((e.clone(), vec![TinyCommand::SetOut(self.out)]))
    }
    fn delete(&mut self, _t: &str, _k: &Value) -> Result<(Value, Vec<TinyCommand>), ApiError> {
        Err(ApiError::BadRequest(
            "tiny_out always has its one entry".into(),
        ))
    }
    fn reload(&mut self, old: &Config, new: &Config) -> Result<ReloadPlan<TinyCommand>, ApiError> {
        if needs_rebuild(old, new) {
            *self = TinyMechanism.control(new);
            return Ok(ReloadPlan::Rebuild);
        }
        Ok(ReloadPlan::Tables(Vec::new()))
    }
}

/// Its admission stage: the bytes of its class in the buffer, counted (every frame of the class
/// admitted and given back), ahead of classic PFC in the chain.
#[derive(Clone, Debug, PartialEq)]
struct CapParams {
    class: u8,
}

longhaul_dataplane::counters! {
    /// The stage's counters, in the snapshot's `admission` extensions (added up across workers).
    #[derive(Copy)]
    struct CapStats: "tiny" {
        /// Frames of its class admitted.
        cap_admitted: u64,
        /// Bytes of its class in the buffer.
        cap_bytes: u64,
    }
}

struct Cap {
    class: u8,
    stats: CapStats,
}

impl Admission for Cap {
    fn build(spec: &SwitchSpec) -> Option<Self> {
        let p = spec.admission.get::<CapParams>()?;
        Some(Cap {
            class: p.class,
            stats: CapStats::default(),
        })
    }
    fn on_enqueue(
        &mut self,
        _: u16,
        c: u8,
        len: u64,
        _: Nanos,
        _: &mut ActionBuf,
    ) -> Option<Admit> {
        (c == self.class).then(|| {
            self.stats.cap_admitted += 1;
            self.stats.cap_bytes += len;
            Admit::Accept
        })
    }
    fn on_dequeue(&mut self, _: u16, c: u8, bytes: u64, _: Nanos, _: &mut ActionBuf) -> bool {
        if c == self.class {
            self.stats.cap_bytes -= bytes;
        }
        c == self.class
    }
    fn snapshot_into(this: Option<&Self>, snap: &mut SwitchSnapshot) {
        match this {
            Some(c) => snap.admission.set_counters(&c.stats),
            None => snap.admission.remove::<CapStats>(),
        }
    }
}

/// The registry's admission chain: tiny's stage, then classic PFC.
type TinyAdmission = Chain<Cap, PfcGenerator>;

struct TinyMechanism;

impl Mechanism for TinyMechanism {
    fn name(&self) -> &'static str {
        "tiny"
    }
    fn docs(&self) -> &'static str {
        "runtime/tests/tiny_mechanism.rs"
    }
    fn section(&self) -> Option<&dyn Section> {
        Some(&TinySection)
    }
    /// Its admission stage on its class, when `[tiny]` is configured.
    fn extend_spec(&self, cfg: &Config, spec: &mut SwitchSpec) {
        if let Some(t) = cfg.section::<TinyConfig>() {
            spec.admission.insert(CapParams { class: t.class });
        }
    }
    fn counters(&self, snap: &SwitchSnapshot, out: &mut Vec<(String, u64)>) {
        if let Some(c) = snap.admission.get::<CapStats>() {
            c.for_each(&mut |n, v| out.push((n.into(), v)));
        }
    }
}

impl PipelineMechanism for TinyMechanism {
    type Command = TinyCommand;
    type Pipeline = TinyPipe;
    type Control = TinyControl;
    fn pipeline(&self, cfg: &Config) -> TinyPipe {
        let t = cfg.section::<TinyConfig>().expect("[tiny]");
        TinyPipe {
            fwd: Forwarding::new(cfg),
            out: t.out,
            class: t.class,
            stats: TinyStats::default(),
        }
    }
    fn control(&self, cfg: &Config) -> TinyControl {
        TinyControl {
            out: cfg.section::<TinyConfig>().map_or(0, |t| t.out),
        }
    }
}

/// A second mechanism that is not a pipeline: it composes with whichever runs, adds a shared
/// buffer limit to the switch and its own counters and `/stats` key.
struct Tally;

impl Mechanism for Tally {
    fn name(&self) -> &'static str {
        "tally"
    }
    fn docs(&self) -> &'static str {
        "runtime/tests/tiny_mechanism.rs"
    }
    fn extend_spec(&self, _cfg: &Config, spec: &mut SwitchSpec) {
        spec.emit_capacity = 17;
    }
    fn counters(&self, snap: &SwitchSnapshot, out: &mut Vec<(String, u64)>) {
        let rx: u64 = snap.ports.iter().map(|p| p.stats.rx_pkts).sum();
        out.push(("tally.rx_pkts".into(), rx));
    }
    fn stats_json(&self, snap: &SwitchSnapshot, out: &mut Map<String, Value>) {
        let tx: u64 = snap.ports.iter().map(|p| p.stats.tx_pkts).sum();
        out.insert("tally".into(), json!({ "tx_pkts": tx }));
    }
}

// ---- the tests ----------------------------------------------------------------------------------

fn registry() -> Registry {
    Registry::admitting::<TinyAdmission>()
        .pipeline(TinyMechanism)
        .mechanism(Tally)
        .into()
}

fn config(tiny: &str, io: [&str; 2]) -> String {
    format!(
        "[switch]\nname = \"t\"\npipeline = \"tiny\"\n\
         [[ports]]\nid = 0\nname = \"a\"\nmac = \"02:00:00:00:00:01\"\nrate_gbps = 10\n{}\n\
         [[ports]]\nid = 1\nname = \"b\"\nmac = \"02:00:00:00:00:02\"\nrate_gbps = 10\n{}\n\
         [control]\napi_listen = \"127.0.0.1:0\"\nmetrics_listen = \"off\"\ncontrol_latency_ns = 1000\n\
         {tiny}",
        io[0], io[1]
    )
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse_with(text, Path::new("t.toml"), &registry())
}

fn frame(ethertype: u16, first: u8) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 8]);
    f[12..14].copy_from_slice(&ethertype.to_be_bytes());
    f[14] = first;
    f
}

/// Data, data, a control frame "out = port 0", then data 10 us later: the last one leaves on a.
fn trace() -> Vec<PcapRecord> {
    [
        (0, ETHERTYPE_DATA, 0),
        (1_000, ETHERTYPE_DATA, 1),
        (2_000, ETHERTYPE_CONTROL, 0),
        (12_000, ETHERTYPE_DATA, 2),
    ]
    .iter()
    .map(|&(ts, et, b)| PcapRecord {
        ts_ns: ts,
        data: frame(et, b),
    })
    .collect()
}

#[test]
fn the_section_is_validated_with_the_generic_errors() {
    let c = parse(&config("[tiny]\nout = \"b\"\nclass = 3\n", ["", ""])).unwrap();
    assert_eq!(
        c.section::<TinyConfig>(),
        Some(&TinyConfig { out: 1, class: 3 })
    );

    let e = parse(&config("[tiny]\nout = \"z\"\n", ["", ""])).unwrap_err();
    assert_eq!(e.key, "tiny.out");
    assert!(e.msg.starts_with("no port named 'z' (ports: a, b)"), "{e}");
    assert!(e.msg.ends_with("(line 21, column 7)"), "{e}");

    let e = parse(&config("[tiny]\nout = \"b\"\nclass = 7\n", ["", ""])).unwrap_err();
    assert_eq!(
        (e.key.as_str(), e.msg.contains("network control")),
        ("tiny.class", true)
    );

    let e = parse(&config("[tiny]\nout = 1\nrate = 3\n", ["", ""])).unwrap_err();
    assert_eq!(e.key, "tiny.rate");
    assert!(e.msg.starts_with("unknown field `rate`"), "{e}");

    let e = parse(&config("", ["", ""])).unwrap_err();
    assert_eq!(
        (e.key.as_str(), e.msg.as_str()),
        ("tiny", "switch.pipeline = \"tiny\" needs a [tiny] table")
    );

    // Without the mechanism registered, `[tiny]` is an unknown table and "tiny" no pipeline.
    let e = Config::parse(&config("[tiny]\nout = 1\n", ["", ""]), Path::new("t.toml")).unwrap_err();
    assert_eq!(e.key, "tiny", "{e}");
    assert!(
        e.msg
            .starts_with("unknown field `tiny`, expected one of `switch`"),
        "{e}"
    );
    let e = Config::parse(&config("", ["", ""]), Path::new("t.toml")).unwrap_err();
    assert_eq!(e.key, "switch.pipeline", "{e}");
    assert!(
        e.msg
            .starts_with("unknown variant `tiny`, expected one of `baseline`"),
        "{e}"
    );
    let bare = Registry::new().pipeline(TinyMechanism);
    assert_eq!(bare.pipelines(), ["tiny"]);
    assert_eq!(bare.sections().len(), 1);
}

#[test]
fn it_runs_in_replay_with_its_punt_handler_commands_and_counters() {
    let reg = registry();
    let cfg = parse(&config("[tiny]\nout = \"b\"\n", ["", ""])).unwrap();
    let res = replay(
        &reg,
        &cfg,
        vec![ReplayInput {
            port: 0,
            records: trace(),
        }],
    )
    .unwrap();
    let firsts = |port: u16| -> Vec<u8> { res.outputs[&port].iter().map(|r| r.data[14]).collect() };
    assert_eq!(firsts(1), [0, 1], "before the control frame: out b");
    assert_eq!(firsts(0), [2], "after it (and the control latency): out a");
    let c: std::collections::BTreeMap<&str, u64> =
        res.counters.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(c["tiny.forwarded"], 3);
    assert_eq!(c["tiny.punted"], 1);
    assert_eq!(c["control.commands_applied"], 1);
    assert_eq!(c["tally.rx_pkts"], 4);
    // Its admission stage accounted every data frame and got their bytes back.
    assert_eq!((c["tiny.cap_admitted"], c["tiny.cap_bytes"]), (3, 0));
    // Its counters come after the switch's own and before the control channel's.
    let pos = |n: &str| res.counters.iter().position(|(k, _)| k == n).unwrap();
    assert!(pos("tiny.punted") < pos("switch.generated"));
    assert!(pos("switch.buffer_max_bytes") < pos("tally.rx_pkts"));
    assert!(pos("tally.rx_pkts") < pos("control.commands_applied"));
    // `extend_spec` reached the switch.
    assert_eq!(
        longhaul_runtime::build::switch_spec(&cfg, &reg).emit_capacity,
        17
    );
    // An unknown pipeline is a clear error, not a panic.
    let mut other = cfg.clone();
    other.switch.pipeline = "nope".into();
    let e = replay(&reg, &other, Vec::new()).err().unwrap();
    assert_eq!(
        e.to_string(),
        "no pipeline 'nope' in this build (pipelines: tiny)"
    );
}

#[test]
fn it_runs_live_with_the_control_thread() {
    let dir = std::env::temp_dir().join(format!("longhaul-tiny-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    write_pcap(dir.join("in.pcap"), &trace()).unwrap();
    let text = config(
        "[tiny]\nout = \"b\"\n",
        [
            "io = { kind = \"pcap\", rx = \"in.pcap\", tx = \"a.pcap\", pace = true }",
            "io = { kind = \"pcap\", tx = \"b.pcap\" }",
        ],
    );
    let path = dir.join("tiny.toml");
    std::fs::write(&path, text).unwrap();
    let mut opts = RunOptions::new(Arc::new(AtomicBool::new(false)));
    opts.until_idle = true;
    let report = longhaul_runtime::run(Arc::new(registry()), &path, opts).expect("run");
    assert_eq!(report.worker.rx, 4);
    let counters = longhaul_runtime::snapshot_counters(&registry(), &report.snapshot);
    let get = |n: &str| counters.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    assert_eq!(get("tiny.forwarded"), Some(3));
    assert_eq!(get("tiny.punted"), Some(1));
    assert_eq!(get("tally.rx_pkts"), Some(4));
    assert_eq!(get("tiny.cap_admitted"), Some(3));
    // Every data frame left on a port (which one depends on how fast the control thread
    // answered the punt, on a real clock).
    let out =
        read_pcap(dir.join("a.pcap")).unwrap().len() + read_pcap(dir.join("b.pcap")).unwrap().len();
    assert_eq!(out, 3);
    let _ = std::fs::remove_dir_all(&dir);
}
