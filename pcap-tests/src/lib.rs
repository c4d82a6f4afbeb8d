//! Conformance runner: replay a case's input pcaps through a config, compare the outputs with the
//! expected pcaps, and run the independent oracles on every output.
//!
//! A case is a directory `cases/<name>/` holding `case.toml` (format in `pcap-tests/README.md`).
//! [`run_case`] loads it, loads the config with [`load_config`] (every registered mechanism), reads the inputs, calls
//! [`replay`], writes every port's output to `pcap-tests/out/<name>/out_<port>.pcap` (next to
//! copies of the inputs and a `counters.txt`), then:
//! 1. compares each `[[expect]]` pcap with the port's output, packet by packet (bytes, and
//!    nanosecond timestamps when `timestamps = true`), reporting the first differing packet and
//!    byte offset;
//! 2. runs the wire-format oracle `oracle/verify.py` (Python, no longhaul code: ICRC, IPv4/UDP/TCP
//!    checksums, PFC frame fields) over every output pcap;
//! 3. decodes every output with tshark and fails on malformed packets or RoCE/MAC-control frames
//!    that tshark does not decode as such;
//! 4. runs each `[[check]]` script as `python3 <script> <outdir>` from the case directory.
//!
//! The oracles need `python3` (with scapy for the check scripts) and `tshark`. When
//! `LONGHAUL_REQUIRE_ORACLES=1` (CI) a missing tool is an error; otherwise the oracle is skipped
//! with a printed note. `LONGHAUL_PYTHON` and `LONGHAUL_TSHARK` override the executables.
//!
//! Every failure of a case is collected, so one run reports all of them.

use longhaul_control::config::Config;
use longhaul_dataplane::pcap::{read_pcap, write_pcap, PcapRecord};
use longhaul_pipelines::{load_config, replay};
use longhaul_runtime::ReplayInput;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// `pcap-tests/` (this crate's directory).
pub fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `pcap-tests/cases/`.
pub fn cases_dir() -> PathBuf {
    suite_dir().join("cases")
}

/// `pcap-tests/oracle/`.
pub fn oracle_dir() -> PathBuf {
    suite_dir().join("oracle")
}

/// `pcap-tests/out/` (gitignored): `out/<case>/` holds a case's outputs after a run.
pub fn out_root() -> PathBuf {
    suite_dir().join("out")
}

/// Names of every case directory (those holding a `case.toml`), sorted.
pub fn list_cases() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(cases_dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().join("case.toml").is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------------
// case.toml
// ---------------------------------------------------------------------------------------------

/// A port named in a case: by name (string) or id (integer).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum PortRef {
    Id(u16),
    Name(String),
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Id(i) => write!(f, "{i}"),
            PortRef::Name(n) => write!(f, "{n:?}"),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputSpec {
    pub port: PortRef,
    /// Relative to the case directory.
    pub pcap: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectSpec {
    pub port: PortRef,
    /// Relative to the case directory.
    pub pcap: String,
    /// Also compare nanosecond timestamps (departure times).
    #[serde(default)]
    pub timestamps: bool,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// Python script, relative to the case directory; run as `python3 <script> <outdir>`.
    pub script: String,
}

/// A parsed `case.toml`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub description: String,
    /// Switch config, relative to the case directory.
    pub config: String,
    #[serde(default)]
    pub input: Vec<InputSpec>,
    #[serde(default)]
    pub expect: Vec<ExpectSpec>,
    #[serde(default)]
    pub check: Vec<CheckSpec>,
}

impl CaseSpec {
    /// Parse `case.toml` text; errors name `file`.
    pub fn parse(text: &str, file: &Path) -> Result<CaseSpec, String> {
        let spec: CaseSpec =
            toml::from_str(text).map_err(|e| format!("{}: {}", file.display(), e))?;
        if spec.input.is_empty() {
            return Err(format!("{}: no [[input]]", file.display()));
        }
        if spec.expect.is_empty() && spec.check.is_empty() {
            return Err(format!(
                "{}: a case needs at least one [[expect]] or [[check]]",
                file.display()
            ));
        }
        Ok(spec)
    }

    pub fn load(dir: &Path) -> Result<CaseSpec, String> {
        let file = dir.join("case.toml");
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {}", file.display(), e))?;
        CaseSpec::parse(&text, &file)
    }
}

// ---------------------------------------------------------------------------------------------
// Reports
// ---------------------------------------------------------------------------------------------

/// What happened to one oracle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OracleOutcome {
    Passed { name: String, output: String },
    Skipped { name: String, reason: String },
}

/// A passed case.
#[derive(Clone, Debug)]
pub struct CaseReport {
    pub name: String,
    pub description: String,
    pub out_dir: PathBuf,
    /// Input packets offered, over all ports.
    pub packets_in: usize,
    /// Packets emitted per port name (every configured port).
    pub packets_out: BTreeMap<String, usize>,
    /// `[[expect]]` comparisons that passed.
    pub expectations: usize,
    pub oracles: Vec<OracleOutcome>,
    pub counters: Vec<(String, u64)>,
}

impl std::fmt::Display for CaseReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "case {}: {}", self.name, self.description)?;
        let outs: Vec<String> = self
            .packets_out
            .iter()
            .map(|(p, n)| format!("{p}={n}"))
            .collect();
        writeln!(
            f,
            "  {} packets in; out: {}; {} expectation(s) matched; outputs in {}",
            self.packets_in,
            outs.join(" "),
            self.expectations,
            self.out_dir.display()
        )?;
        for o in &self.oracles {
            match o {
                OracleOutcome::Passed { name, output } => {
                    writeln!(f, "  oracle {name}: passed")?;
                    // The oracle's summary lines (not verify.py's per-frame PFC listing).
                    for l in output
                        .lines()
                        .filter(|l| !l.trim().is_empty() && !l.starts_with("out_"))
                        .take(12)
                    {
                        writeln!(f, "    {l}")?;
                    }
                }
                OracleOutcome::Skipped { name, reason } => {
                    writeln!(f, "  oracle {name}: SKIPPED ({reason})")?
                }
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Comparison
// ---------------------------------------------------------------------------------------------

fn fmt_ts(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Name of the header field at `off` in an Ethernet frame (IPv4/IPv6 + UDP/TCP + BTH), for diffs.
pub fn field_at(frame: &[u8], off: usize) -> &'static str {
    let mut l3 = 14;
    if frame.len() < 14 {
        return "frame";
    }
    let mut et = u16::from_be_bytes([frame[12], frame[13]]);
    while (et == 0x8100 || et == 0x88a8) && frame.len() >= l3 + 4 {
        if off >= l3 - 2 && off < l3 + 2 {
            return "VLAN tag";
        }
        et = u16::from_be_bytes([frame[l3 + 2], frame[l3 + 3]]);
        l3 += 4;
    }
    match off {
        0..=5 => return "Ethernet destination MAC",
        6..=11 => return "Ethernet source MAC",
        _ if off < l3 => return "EtherType",
        _ => {}
    }
    let (l4, proto) = match et {
        0x0800 if frame.len() >= l3 + 20 => {
            let ihl = (frame[l3] & 0x0f) as usize * 4;
            let name = match off - l3 {
                0 => "IPv4 version/IHL",
                1 => "IPv4 ToS (DSCP/ECN)",
                2 | 3 => "IPv4 total length",
                4 | 5 => "IPv4 identification",
                6 | 7 => "IPv4 flags/fragment offset",
                8 => "IPv4 TTL",
                9 => "IPv4 protocol",
                10 | 11 => "IPv4 header checksum",
                12..=15 => "IPv4 source address",
                16..=19 => "IPv4 destination address",
                o if o < ihl => "IPv4 options",
                _ => "",
            };
            if !name.is_empty() {
                return name;
            }
            (l3 + ihl, frame[l3 + 9])
        }
        0x86dd if frame.len() >= l3 + 40 => {
            let name = match off - l3 {
                0..=3 => "IPv6 version/traffic class/flow label",
                4 | 5 => "IPv6 payload length",
                6 => "IPv6 next header",
                7 => "IPv6 hop limit",
                8..=23 => "IPv6 source address",
                24..=39 => "IPv6 destination address",
                _ => "",
            };
            if !name.is_empty() {
                return name;
            }
            (l3 + 40, frame[l3 + 6])
        }
        0x8808 => return "MAC control",
        _ => return "L3 payload",
    };
    let o = off - l4;
    match proto {
        17 => match o {
            0 | 1 => "UDP source port",
            2 | 3 => "UDP destination port",
            4 | 5 => "UDP length",
            6 | 7 => "UDP checksum",
            _ => {
                let is_roce = frame.len() >= l4 + 4 && frame[l4 + 2..l4 + 4] == [0x12, 0xb7];
                if !is_roce {
                    "UDP payload"
                } else if off + 4 >= frame.len() {
                    "RoCE ICRC (or trailing bytes)"
                } else {
                    match o - 8 {
                        0 => "BTH opcode",
                        1 => "BTH SE/M/PadCnt/TVer",
                        2 | 3 => "BTH P_Key",
                        4 => "BTH FECN/BECN",
                        5..=7 => "BTH DestQP",
                        8 => "BTH AckReq",
                        9..=11 => "BTH PSN",
                        _ => "RoCE payload (ext headers/data)",
                    }
                }
            }
        },
        6 => match o {
            0..=3 => "TCP ports",
            4..=11 => "TCP seq/ack",
            12 | 13 => "TCP data offset/flags",
            14 | 15 => "TCP window",
            16 | 17 => "TCP checksum",
            _ => "TCP options/payload",
        },
        _ => "L4",
    }
}

fn hex_window(data: &[u8], off: usize) -> String {
    let start = off.saturating_sub(8);
    let end = (off + 8).min(data.len());
    let mut s = format!("[{start}..{end}]");
    for (i, b) in data[start.min(data.len())..end].iter().enumerate() {
        let sep = if start + i == off { '>' } else { ' ' };
        let _ = write!(s, "{sep}{b:02x}");
    }
    s
}

/// Compare `actual` with `expected`, in order: bytes and, if `timestamps`, nanosecond
/// timestamps. The error names the first differing packet index and byte offset (with the header
/// field there), both lengths and timestamps, and any difference in packet count.
pub fn compare_records(
    expected: &[PcapRecord],
    actual: &[PcapRecord],
    timestamps: bool,
) -> Result<(), String> {
    let mut msg = String::new();
    if expected.len() != actual.len() {
        let _ = writeln!(
            msg,
            "expected {} packets, got {}",
            expected.len(),
            actual.len()
        );
    }
    for (i, (e, a)) in expected.iter().zip(actual).enumerate() {
        let bytes_differ = e.data != a.data;
        let ts_differs = timestamps && e.ts_ns != a.ts_ns;
        if !bytes_differ && !ts_differs {
            continue;
        }
        let _ = writeln!(
            msg,
            "first difference at packet #{i}: expected {} bytes at t={}, got {} bytes at t={}",
            e.data.len(),
            fmt_ts(e.ts_ns),
            a.data.len(),
            fmt_ts(a.ts_ns)
        );
        if bytes_differ {
            let off = e
                .data
                .iter()
                .zip(&a.data)
                .position(|(x, y)| x != y)
                .unwrap_or_else(|| e.data.len().min(a.data.len()));
            let _ = writeln!(
                msg,
                "  bytes differ at offset {off} ({}):\n    expected {}\n    actual   {}",
                field_at(&e.data, off),
                hex_window(&e.data, off),
                hex_window(&a.data, off)
            );
        } else {
            let d = a.ts_ns as i128 - e.ts_ns as i128;
            let _ = writeln!(msg, "  bytes equal; timestamp off by {d} ns");
        }
        let others = expected
            .iter()
            .zip(actual)
            .skip(i + 1)
            .filter(|(e, a)| e.data != a.data || (timestamps && e.ts_ns != a.ts_ns))
            .count();
        if others > 0 {
            let _ = writeln!(msg, "  ... and {others} more differing packet(s) after it");
        }
        break;
    }
    if expected.len() != actual.len() {
        let n = expected.len().min(actual.len());
        let (which, extra) = if expected.len() > actual.len() {
            ("missing", &expected[n..])
        } else {
            ("unexpected", &actual[n..])
        };
        let _ = writeln!(
            msg,
            "  first {which} packet #{n}: {} bytes at t={}",
            extra[0].data.len(),
            fmt_ts(extra[0].ts_ns)
        );
    }
    if msg.is_empty() {
        Ok(())
    } else {
        Err(msg)
    }
}

// ---------------------------------------------------------------------------------------------
// Oracles
// ---------------------------------------------------------------------------------------------

/// `LONGHAUL_REQUIRE_ORACLES=1`: a missing oracle tool fails the case instead of skipping.
pub fn oracles_required() -> bool {
    std::env::var("LONGHAUL_REQUIRE_ORACLES")
        .map(|v| v == "1" || v.eq_ignore_ascii_case("true"))
        .unwrap_or(false)
}

/// The Python interpreter (`LONGHAUL_PYTHON`, default `python3`).
pub fn python_exe() -> String {
    std::env::var("LONGHAUL_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// The tshark executable (`LONGHAUL_TSHARK`, default `tshark`).
pub fn tshark_exe() -> String {
    std::env::var("LONGHAUL_TSHARK").unwrap_or_else(|_| "tshark".into())
}

/// Whether python3 with scapy is usable; `Err(reason)` otherwise. Probed once per process.
pub fn python_available() -> Result<(), String> {
    static P: OnceLock<Result<(), String>> = OnceLock::new();
    P.get_or_init(|| {
        match Command::new(python_exe())
            .args(["-c", "import scapy.contrib.roce"])
            .output()
        {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(format!(
                "{} cannot import scapy ({}); pip install scapy",
                python_exe(),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => Err(format!("{} not runnable: {e}", python_exe())),
        }
    })
    .clone()
}

/// Whether tshark is usable; `Err(reason)` otherwise. Probed once per process.
pub fn tshark_available() -> Result<(), String> {
    static T: OnceLock<Result<(), String>> = OnceLock::new();
    T.get_or_init(
        || match Command::new(tshark_exe()).arg("--version").output() {
            Ok(o) if o.status.success() => Ok(()),
            Ok(o) => Err(format!("{} --version failed: {}", tshark_exe(), o.status)),
            Err(e) => Err(format!("{} not runnable: {e}", tshark_exe())),
        },
    )
    .clone()
}

/// Decide what to do about a missing tool: `Ok(Some(skip))` to skip with a note, `Err` when
/// oracles are required.
fn gate(name: &str, avail: Result<(), String>) -> Result<Option<OracleOutcome>, String> {
    match avail {
        Ok(()) => Ok(None),
        Err(reason) if oracles_required() => Err(format!(
            "oracle {name} required (LONGHAUL_REQUIRE_ORACLES=1) but unavailable: {reason}"
        )),
        Err(reason) => {
            eprintln!("note: skipping oracle {name}: {reason} (set LONGHAUL_REQUIRE_ORACLES=1 to require it)");
            Ok(Some(OracleOutcome::Skipped {
                name: name.into(),
                reason,
            }))
        }
    }
}

fn run_cmd(mut cmd: Command, what: &str) -> Result<String, String> {
    let o = cmd
        .output()
        .map_err(|e| format!("{what}: cannot run: {e}"))?;
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if o.status.success() {
        Ok(out)
    } else {
        Err(format!("{what} failed ({}):\n{}", o.status, out.trim_end()))
    }
}

/// Run `oracle/verify.py` over `files` (ICRC, IPv4/UDP/TCP checksums, PFC fields).
pub fn run_verify(files: &[PathBuf]) -> Result<OracleOutcome, String> {
    if let Some(skip) = gate("verify.py", python_available())? {
        return Ok(skip);
    }
    let mut cmd = Command::new(python_exe());
    cmd.arg(oracle_dir().join("verify.py")).args(files);
    let output = run_cmd(cmd, "oracle verify.py")?;
    Ok(OracleOutcome::Passed {
        name: "verify.py".into(),
        output,
    })
}

const TSHARK_FIELDS: &[&str] = &[
    "frame.number",
    "eth.type",
    "udp.dstport",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "macc.opcode",
    "macc.cbfc.enbv",
    "_ws.malformed",
];

/// Decode `file` with tshark; fail on malformed frames and on RoCE (UDP 4791) or MAC-control
/// frames that tshark does not decode as such. Returns the decode table.
pub fn tshark_decode(file: &Path) -> Result<String, String> {
    let mut cmd = Command::new(tshark_exe());
    cmd.arg("-r")
        .arg(file)
        .args(["-T", "fields", "-E", "header=y", "-E", "separator=\t"]);
    for f in TSHARK_FIELDS {
        cmd.args(["-e", f]);
    }
    let o = cmd
        .output()
        .map_err(|e| format!("tshark: cannot run: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "tshark -r {} failed ({}): {}",
            file.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    let table = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut bad = Vec::new();
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        let col = |i: usize| cols.get(i).copied().unwrap_or("");
        let frame = col(0);
        if !col(8).is_empty() {
            bad.push(format!(
                "frame {frame}: tshark reports a malformed packet: {}",
                col(8)
            ));
        }
        let first = |s: &str| s.split(',').next().unwrap_or("").to_string();
        if first(col(2)) == "4791" && col(3).is_empty() {
            bad.push(format!(
                "frame {frame}: UDP 4791 not decoded as RoCE (no infiniband.bth.opcode)"
            ));
        }
        if col(1).split(',').any(|t| t == "0x8808") && col(6).is_empty() {
            bad.push(format!(
                "frame {frame}: EtherType 0x8808 not decoded as MAC control"
            ));
        }
    }
    if bad.is_empty() {
        Ok(table)
    } else {
        Err(format!(
            "tshark on {}:\n  {}",
            file.display(),
            bad.join("\n  ")
        ))
    }
}

/// Run the tshark oracle over `files`, saving each decode table as `tshark_<stem>.txt` in
/// `save_dir` when given.
pub fn run_tshark(files: &[PathBuf], save_dir: Option<&Path>) -> Result<OracleOutcome, String> {
    if let Some(skip) = gate("tshark", tshark_available())? {
        return Ok(skip);
    }
    let mut errs = Vec::new();
    let mut frames = 0;
    for f in files {
        match tshark_decode(f) {
            Ok(table) => {
                frames += table.lines().count().saturating_sub(1);
                if let (Some(dir), Some(stem)) = (save_dir, f.file_stem()) {
                    let p = dir.join(format!("tshark_{}.txt", stem.to_string_lossy()));
                    let _ = std::fs::write(p, &table);
                }
            }
            Err(e) => errs.push(e),
        }
    }
    if errs.is_empty() {
        Ok(OracleOutcome::Passed {
            name: "tshark".into(),
            output: format!("{} file(s), {frames} frame(s) decoded", files.len()),
        })
    } else {
        Err(errs.join("\n"))
    }
}

/// Run a case's check script: `python3 <script> <out_dir>` with the case dir as cwd and
/// `oracle/` on PYTHONPATH.
pub fn run_check(case_dir: &Path, script: &str, out_dir: &Path) -> Result<OracleOutcome, String> {
    let name = format!("check {script}");
    if let Some(skip) = gate(&name, python_available())? {
        return Ok(skip);
    }
    let path = case_dir.join(script);
    if !path.is_file() {
        return Err(format!("{name}: {} does not exist", path.display()));
    }
    let mut cmd = Command::new(python_exe());
    cmd.arg(&path)
        .arg(out_dir)
        .current_dir(case_dir)
        .env("PYTHONPATH", oracle_dir())
        .env("LONGHAUL_CASE_DIR", case_dir);
    let output = run_cmd(cmd, &name)?;
    Ok(OracleOutcome::Passed { name, output })
}

// ---------------------------------------------------------------------------------------------
// The runner
// ---------------------------------------------------------------------------------------------

fn resolve_port(cfg: &Config, p: &PortRef) -> Result<(u16, String), String> {
    let found = match p {
        PortRef::Id(id) => cfg.ports.iter().find(|x| x.id == *id),
        PortRef::Name(n) => cfg.ports.iter().find(|x| &x.name == n),
    };
    found.map(|x| (x.id, x.name.clone())).ok_or_else(|| {
        let known: Vec<String> = cfg
            .ports
            .iter()
            .map(|x| format!("{} ({})", x.name, x.id))
            .collect();
        format!(
            "port {p} is not in the config (ports: {})",
            known.join(", ")
        )
    })
}

/// Run the case in directory `dir` (its name is the directory's name). See the crate docs.
pub fn run_case(dir: &Path) -> Result<CaseReport, String> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| format!("{}: not a case directory", dir.display()))?;
    let fail = |m: String| format!("case {name}: {m}");
    let spec = CaseSpec::load(dir).map_err(fail)?;
    let cfg_path = dir.join(&spec.config);
    let cfg = load_config(&cfg_path).map_err(|e| fail(format!("config: {e}")))?;

    let out_dir = out_root().join(&name);
    if out_dir.exists() {
        std::fs::remove_dir_all(&out_dir)
            .map_err(|e| fail(format!("cannot clear {}: {e}", out_dir.display())))?;
    }
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| fail(format!("cannot create {}: {e}", out_dir.display())))?;

    // Inputs.
    let mut inputs = Vec::new();
    let mut packets_in = 0;
    for inp in &spec.input {
        let (id, _) = resolve_port(&cfg, &inp.port).map_err(|e| fail(format!("[[input]] {e}")))?;
        let path = dir.join(&inp.pcap);
        let records = read_pcap(&path).map_err(|e| fail(format!("[[input]] {e}")))?;
        packets_in += records.len();
        if let Some(base) = Path::new(&inp.pcap).file_name() {
            std::fs::copy(&path, out_dir.join(base))
                .map_err(|e| fail(format!("copy {}: {e}", path.display())))?;
        }
        inputs.push(ReplayInput { port: id, records });
    }

    let result = replay(&cfg, inputs).map_err(|e| fail(format!("replay: {e}")))?;

    // Outputs: one pcap per configured port.
    let mut errors = Vec::new();
    let mut outputs = result.outputs;
    let mut packets_out = BTreeMap::new();
    let mut out_files = Vec::new();
    let mut by_id: BTreeMap<u16, Vec<PcapRecord>> = BTreeMap::new();
    for port in &cfg.ports {
        let recs = outputs.remove(&port.id).unwrap_or_default();
        let p = out_dir.join(format!("out_{}.pcap", port.name));
        write_pcap(&p, &recs).map_err(|e| fail(e.to_string()))?;
        packets_out.insert(port.name.clone(), recs.len());
        out_files.push(p);
        by_id.insert(port.id, recs);
    }
    for (id, recs) in &outputs {
        errors.push(format!(
            "replay emitted {} packet(s) on port id {id}, which is not in the config",
            recs.len()
        ));
    }
    let mut counters_txt = String::new();
    for (k, v) in &result.counters {
        let _ = writeln!(counters_txt, "{k} {v}");
    }
    let _ = std::fs::write(out_dir.join("counters.txt"), counters_txt);

    // Expectations.
    let mut expectations = 0;
    for ex in &spec.expect {
        let (id, pname) = match resolve_port(&cfg, &ex.port) {
            Ok(x) => x,
            Err(e) => {
                errors.push(format!("[[expect]] {e}"));
                continue;
            }
        };
        let expected = match read_pcap(dir.join(&ex.pcap)) {
            Ok(r) => r,
            Err(e) => {
                errors.push(format!("[[expect]] {e}"));
                continue;
            }
        };
        match compare_records(&expected, &by_id[&id], ex.timestamps) {
            Ok(()) => expectations += 1,
            Err(d) => errors.push(format!(
                "output of port {pname} (out_{pname}.pcap) differs from {}:\n{}",
                ex.pcap,
                d.trim_end()
            )),
        }
    }

    // Oracles.
    let mut oracles = Vec::new();
    let nonempty: Vec<PathBuf> = cfg
        .ports
        .iter()
        .zip(&out_files)
        .filter(|(p, _)| !by_id[&p.id].is_empty())
        .map(|(_, f)| f.clone())
        .collect();
    let mut results = vec![run_verify(&out_files)];
    if nonempty.is_empty() {
        results.push(Ok(OracleOutcome::Skipped {
            name: "tshark".into(),
            reason: "no output packets".into(),
        }));
    } else {
        results.push(run_tshark(&nonempty, Some(&out_dir)));
    }
    for c in &spec.check {
        results.push(run_check(dir, &c.script, &out_dir));
    }
    for r in results {
        match r {
            Ok(o) => oracles.push(o),
            Err(e) => errors.push(e),
        }
    }

    if errors.is_empty() {
        Ok(CaseReport {
            name,
            description: spec.description,
            out_dir,
            packets_in,
            packets_out,
            expectations,
            oracles,
            counters: result.counters,
        })
    } else {
        let outs: Vec<String> = packets_out
            .iter()
            .map(|(p, n)| format!("{p}={n}"))
            .collect();
        Err(format!(
            "case {name} FAILED ({} packets in; out: {}; outputs in {}):\n- {}",
            packets_in,
            outs.join(" "),
            out_dir.display(),
            errors.join("\n- ")
        ))
    }
}

/// Run the case called `name` in `cases/`, printing its report.
pub fn run_named_case(name: &str) -> Result<CaseReport, String> {
    let r = run_case(&cases_dir().join(name))?;
    println!("{r}");
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ts_ns: u64, data: &[u8]) -> PcapRecord {
        PcapRecord {
            ts_ns,
            data: data.to_vec(),
        }
    }

    fn ipv4_frame() -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 12 + 4];
        f[12] = 0x08;
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[34 + 2] = 0x12;
        f[34 + 3] = 0xb7;
        f
    }

    #[test]
    fn compare_equal() {
        let a = vec![rec(1, &[1, 2]), rec(2, &[3])];
        assert!(compare_records(&a, &a, true).is_ok());
        let b = vec![rec(5, &[1, 2]), rec(9, &[3])];
        assert!(compare_records(&a, &b, false).is_ok());
    }

    #[test]
    fn compare_reports_first_byte_difference() {
        let e = ipv4_frame();
        let mut a = e.clone();
        a[22] = 63; // TTL
        a[52] = 1; // BTH PSN
        let err = compare_records(
            &[rec(0, &e), rec(1, &e), rec(2, &e)],
            &[rec(0, &e), rec(1_000_000_123, &a), rec(2, &a)],
            false,
        )
        .unwrap_err();
        assert!(err.contains("packet #1"), "{err}");
        assert!(err.contains("offset 22 (IPv4 TTL)"), "{err}");
        assert!(err.contains("t=1.000000123"), "{err}");
        assert!(err.contains("1 more differing"), "{err}");
        assert_eq!(field_at(&e, 52), "BTH PSN");
        assert_eq!(field_at(&e, 50), "BTH AckReq");
        assert_eq!(field_at(&e, e.len() - 2), "RoCE ICRC (or trailing bytes)");
        assert_eq!(field_at(&e, 7), "Ethernet source MAC");
    }

    #[test]
    fn compare_reports_lengths_counts_and_timestamps() {
        let err = compare_records(&[rec(0, &[1, 2, 3])], &[rec(0, &[1, 2])], false).unwrap_err();
        assert!(
            err.contains("expected 3 bytes") && err.contains("got 2 bytes"),
            "{err}"
        );
        assert!(err.contains("offset 2"), "{err}");
        let err =
            compare_records(&[rec(0, &[1]), rec(7, &[2])], &[rec(0, &[1])], false).unwrap_err();
        assert!(err.contains("expected 2 packets, got 1"), "{err}");
        assert!(err.contains("first missing packet #1"), "{err}");
        let err = compare_records(&[], &[rec(0, &[1])], false).unwrap_err();
        assert!(err.contains("first unexpected packet #0"), "{err}");
        let err = compare_records(&[rec(100, &[1])], &[rec(90, &[1])], true).unwrap_err();
        assert!(err.contains("off by -10 ns"), "{err}");
    }

    #[test]
    fn case_toml_parses_and_rejects_unknown_keys() {
        let f = Path::new("case.toml");
        let s = CaseSpec::parse(
            r#"
description = "x"
config = "switch.toml"
[[input]]
port = "dc0"
pcap = "in.pcap"
[[input]]
port = 3
pcap = "in3.pcap"
[[expect]]
port = "wan0"
pcap = "e.pcap"
timestamps = true
[[check]]
script = "check.py"
"#,
            f,
        )
        .unwrap();
        assert_eq!(s.input[0].port, PortRef::Name("dc0".into()));
        assert_eq!(s.input[1].port, PortRef::Id(3));
        assert!(s.expect[0].timestamps);
        let e = CaseSpec::parse(
            "description=\"x\"\nconfig=\"c\"\n[[input]]\nport=0\npcap=\"a\"\nbogus=1\n",
            f,
        )
        .unwrap_err();
        assert!(e.contains("case.toml") && e.contains("bogus"), "{e}");
        let e = CaseSpec::parse(
            "description=\"x\"\nconfig=\"c\"\n[[input]]\nport=0\npcap=\"a\"\n",
            f,
        )
        .unwrap_err();
        assert!(e.contains("[[expect]] or [[check]]"), "{e}");
    }
}
