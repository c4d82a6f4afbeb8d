//! One flow alone on an idle network finishes, for every host model, inside a datacenter and
//! across datacenters 0.5, 1 and 5 ms apart (one way), at 1 MB and 100 MB: the hosts survive
//! long round trips. Each run prints its FCT and the ratio to its standalone FCT, the table in
//! docs/emulator.md:
//!
//!     cargo test --release -p longhaul-emulator --test long_rtt -- --nocapture
//!
//! The networks are the shipped scenarios' (the THEMIS scenario's for DCQCN, TIMELY and Swift,
//! with its ESWs as plain commodity switches; MLCC's and Reflex's with their mechanisms and
//! host agents), holding one flow, with the long-haul link's delay set.

use longhaul_emulator::scenario::Scenario;
use longhaul_emulator::{emulate, Overrides};
use std::path::Path;

/// A network: its scenario file, what to take out of its `[emulation]`, the long-haul link's
/// first end, and an intra-DC and an inter-DC pair of hosts.
struct Net {
    file: &'static str,
    cc: Option<&'static str>,
    wan_a: &'static str,
    intra: (&'static str, &'static str),
    inter: (&'static str, &'static str),
}

/// `file`'s text with `cc`, the long link's delay set to `delay_ns`, and only one flow.
fn text(net: &Net, delay_ns: u64, src: &str, dst: &str, size: u64) -> String {
    let raw = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../scenarios")
            .join(net.file),
    )
    .unwrap();
    // Up to the flows or the traffic; without THEMIS's daemon and DCQCN settings (the plain
    // networks run the host models' defaults).
    let end = ["\n[[flows]]", "\n[[traffic]]"]
        .iter()
        .filter_map(|m| raw.find(m))
        .min()
        .unwrap_or(raw.len());
    let mut out = String::new();
    let mut skip = false;
    let mut wan = false;
    for line in raw[..end].lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            skip = net.cc.is_some() && t.starts_with("[emulation.dcqcn]");
        }
        if skip || (net.cc.is_some() && (t.starts_with("host_agents") || t.starts_with("cc ="))) {
            continue;
        }
        if t.starts_with("a = ") {
            wan = t == format!("a = \"{}\"", net.wan_a);
        }
        if wan && t.starts_with("delay_ns") {
            out.push_str(&format!("delay_ns = {delay_ns}\n"));
            wan = false;
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if let (Some(cc), "[emulation]") = (net.cc, t) {
            out.push_str(&format!("cc = \"{cc}\"\n"));
        }
    }
    out.push_str(&format!(
        "\n[[flows]]\nsrc = \"{src}\"\ndst = \"{dst}\"\nsize_bytes = {size}\n"
    ));
    out
}

#[test]
fn one_flow_alone_finishes_for_every_host_model_at_every_distance() {
    // A mechanism's own network (its scenario's `[emulation]` kept), one flow a0 -> `intra`
    // and one a0 -> b0.
    let own = |file, wan_a, intra| Net {
        file,
        cc: None,
        wan_a,
        intra: ("a0", intra),
        inter: ("a0", "b0"),
    };
    // THEMIS's network with its ESWs as plain switches, for a host model alone.
    let plain = |cc| Net {
        cc: Some(cc),
        ..own("themis-off.toml", "esw-a:wan", "a1")
    };
    let nets = [
        ("DCQCN", plain("dcqcn")),
        ("TIMELY", plain("timely")),
        ("Swift", plain("swift")),
        ("MLCC", own("mlcc.toml", "dci-a:wan", "a1")),
        (
            "Reflex (TIMELY)",
            own("reflex-timely.toml", "dc0-esw:wan", "a4"),
        ),
        (
            "Reflex (Swift)",
            own("reflex-swift.toml", "dc0-esw:wan", "a4"),
        ),
    ];
    let reg = longhaul_pipelines::registry();
    let o = Overrides {
        until_done_ns: Some(20_000_000_000),
        ..Overrides::default()
    };
    let mut failed = Vec::new();
    println!("| host model | path | size | FCT (ms) | standalone (ms) | ratio |");
    println!("|---|---|---|---|---|---|");
    for (name, net) in &nets {
        let mut cases = vec![("intra-DC".to_string(), 1_000_000, net.intra)];
        for ms in [0.5, 1.0, 5.0] {
            cases.push((format!("inter-DC {ms} ms"), (ms * 1e6) as u64, net.inter));
        }
        for (path, delay, (src, dst)) in cases {
            for size in [1_000_000u64, 100_000_000] {
                let t = text(net, delay, src, dst, size);
                let file = Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../scenarios")
                    .join("long-rtt.toml");
                let mut s = Scenario::parse(&t, &file, reg.as_ref())
                    .unwrap_or_else(|e| panic!("{name} {path}: {e:?}"));
                let r = emulate(&mut s, &reg, o).unwrap();
                let f = &r.outcome.flows[0];
                let ideal = r.standalone_fct_ns[0].expect("a path");
                match f.fct_ns() {
                    Some(fct) => println!(
                        "| {name} | {path} | {} MB | {:.3} | {:.3} | {:.2} |",
                        size / 1_000_000,
                        fct as f64 / 1e6,
                        ideal as f64 / 1e6,
                        fct as f64 / ideal as f64
                    ),
                    None => {
                        println!(
                            "| {name} | {path} | {} MB | not done: {} |",
                            size / 1_000_000,
                            f.state.map_or(String::new(), |s| s.to_string())
                        );
                        failed.push(format!("{name} {path} {size}"));
                    }
                }
            }
        }
    }
    assert!(failed.is_empty(), "unfinished: {failed:?}");
}
