//! Validation of the emulator itself (issue 14): an isolated flow's FCT against the hand formula,
//! DCQCN flows sharing a bottleneck fairly, no loss with PFC, go-back-N over a lossy link,
//! determinism, and the scenario errors a user gets. The switch is the real baseline pipeline
//! (scenarios/switches/tor4.toml) built through the registry.

use longhaul_emulator::host::wire_time;
use longhaul_emulator::scenario::Scenario;
use longhaul_emulator::sim::Emulation;
use longhaul_emulator::{emulate, output, Overrides};
use longhaul_pipelines::mlcc::host::MlccHostParams;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// Four hosts on the ToR (100 Gb/s, 1 us links), then `extra` (`[emulation]` keys, flows).
fn scenario(emulation: &str, flows: &str, link0: &str) -> String {
    let mut s = format!("[emulation]\n{emulation}\n");
    for k in 0..4 {
        s.push_str(&format!(
            "[[hosts]]\nname = \"h{k}\"\nip = \"10.0.0.{}\"\nmac = \"02:00:00:00:10:{:02x}\"\nrate_gbps = 100\n",
            k + 1,
            k + 1
        ));
    }
    s.push_str("[[switches]]\nname = \"tor\"\nconfig = \"switches/tor4.toml\"\n");
    for k in 0..4 {
        let extra = if k == 0 { link0 } else { "" };
        s.push_str(&format!(
            "[[links]]\na = \"h{k}\"\nb = \"tor:h{k}\"\nrate_gbps = 100\ndelay_ns = 1000\n{extra}\n"
        ));
    }
    s.push_str(flows);
    s
}

fn flow(src: usize, dst: usize, size: u64, start_us: f64) -> String {
    format!("[[flows]]\nsrc = \"h{src}\"\ndst = \"h{dst}\"\nsize_bytes = {size}\nstart_us = {start_us}\n")
}

fn load(text: &str) -> Scenario {
    let reg = longhaul_pipelines::registry();
    Scenario::parse(text, &dir().join("test.toml"), reg.as_ref()).unwrap_or_else(|e| {
        panic!(
            "{}",
            e.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    })
}

fn errors(text: &str) -> Vec<String> {
    let reg = longhaul_pipelines::registry();
    match Scenario::parse(text, &dir().join("bad.toml"), reg.as_ref()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.iter().map(|e| e.to_string()).collect(),
    }
}

/// One flow alone: FCT = every packet through the sender's NIC + the last one's second hop
/// (store and forward at the switch) + two propagation delays, then the ACK's two hops back.
#[test]
fn isolated_flow_fct_matches_the_formula() {
    let size = 100_000u64;
    let s = load(&scenario("", &flow(0, 1, size, 0.0), ""));
    let out = Emulation::new(&s, &longhaul_pipelines::registry())
        .unwrap()
        .run();
    let fct = out.flows[0].fct_ns().expect("done");
    let (mtu, rate, d) = (1024u64, 100_000_000_000u64, 1000u64);
    // RoCEv2 WRITE frames: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 (+ RETH 16 on the first) +
    // payload + ICRC 4; ACKs are 62 bytes.
    let n = size.div_ceil(mtu);
    let frame = |i: u64| {
        let payload = if i + 1 == n {
            size - (n - 1) * mtu
        } else {
            mtu
        };
        (58 + payload + if i == 0 { 16 } else { 0 }) as usize
    };
    let sent: u64 = (0..n).map(|i| wire_time(frame(i), rate)).sum();
    let last = wire_time(frame(n - 1), rate);
    let ack = wire_time(62, rate);
    let expected = sent + d + last + d + 2 * (ack + d);
    let one_packet = wire_time(frame(0), rate);
    assert!(
        fct.abs_diff(expected) <= one_packet,
        "FCT {fct} ns, formula {expected} ns"
    );
    assert_eq!(out.flows[0].retransmitted, 0);
}

/// The standalone FCT (the papers' normalized FCT's denominator) is the HPCC simulator's
/// formula on the idle path, computed by hand here: two propagation delays (2 x 1 us each way),
/// plus one full frame's store and forward on both links, plus every frame's bytes on the wire
/// over the 100 Gb/s bottleneck. The same flow emulated alone takes within 2% of it (its ACK's way
/// back is the difference), so its slowdown is 1.
#[test]
fn standalone_fct_is_the_papers_formula_and_a_lone_flow_meets_it() {
    let size = 1_000_000u64;
    let mut s = load(&scenario("", &flow(0, 1, size, 0.0), ""));
    let paths = longhaul_emulator::path::Paths::of(&s);
    let p = paths.get(0, 1).expect("h0 -> h1");
    assert_eq!(
        (p.links, p.prop_ns, p.bottleneck_bps),
        (2, 2000, 100_000_000_000)
    );
    assert!(paths.get(0, 0).is_none());
    let (mtu, rate) = (1024u64, 100_000_000_000u64);
    let n = size.div_ceil(mtu);
    let frame = |i: u64| {
        let payload = if i + 1 == n {
            size - (n - 1) * mtu
        } else {
            mtu
        };
        58 + payload + if i == 0 { 16 } else { 0 }
    };
    let bytes: u64 = (0..n).map(|i| frame(i) + 24).sum();
    let full = wire_time(58 + mtu as usize, rate);
    let expected = 2 * 2 * 1000 + 2 * full + (bytes * 8 * 1_000_000_000).div_ceil(rate);
    assert_eq!(p.standalone_fct_ns(size, 1024), expected);
    // The network's largest BDP: base RTT x 100 Gb/s.
    assert_eq!(
        paths.max_bdp_bytes(),
        (4000 + 2 * full) * 100 / 8,
        "base RTT {} ns",
        4000 + 2 * full
    );
    let r = emulate(
        &mut s,
        &longhaul_pipelines::registry(),
        Overrides::default(),
    )
    .unwrap();
    let fct = r.outcome.flows[0].fct_ns().expect("done");
    assert_eq!(r.standalone_fct_ns, [Some(expected)]);
    assert!(
        fct >= expected && fct - expected <= expected / 50,
        "FCT {fct} ns, standalone {expected} ns"
    );
    assert_eq!(r.slowdown(0), Some((fct as f64 / expected as f64).max(1.0)));
}

/// A run cut short says, per unfinished flow, why and how much it delivered: in an incast
/// without congestion control, cut at 150 us, the senders are paused by the ToR's PFC or
/// sending; `--until-done` then finishes them all, in the same network.
#[test]
fn unfinished_flows_say_why_and_until_done_finishes_them() {
    let flows = [
        flow(0, 3, 4_000_000, 0.0),
        flow(1, 3, 4_000_000, 0.0),
        flow(2, 3, 4_000_000, 0.0),
    ]
    .concat();
    let text = scenario("cc = \"none\"\nduration_us = 150", &flows, "");
    let reg = longhaul_pipelines::registry();
    let r = emulate(&mut load(&text), &reg, Overrides::default()).unwrap();
    let csv = output::flows_csv(&r);
    for f in &r.outcome.flows {
        assert!(f.finish_ns.is_none());
        assert!(f.acked_bytes > 0 && f.acked_bytes < f.size_bytes, "{f:?}");
    }
    assert!(
        r.outcome
            .flows
            .iter()
            .any(|f| f.state == Some(longhaul_emulator::host::FlowState::PausedByPfc)),
        "{csv}"
    );
    assert!(csv.contains(",paused by PFC\n"), "{csv}");
    let summary = output::summary(&r);
    assert!(summary.contains("unfinished: "), "{summary}");
    let o = Overrides {
        until_done_ns: Some(100_000_000),
        ..Overrides::default()
    };
    let r = emulate(&mut load(&text), &reg, o).unwrap();
    assert!(r
        .outcome
        .flows
        .iter()
        .all(|f| f.state.is_none() && f.finish_ns.is_some()));
    assert!(r.outcome.end_ns > 150_000);
    let csv = output::flows_csv(&r);
    assert_eq!(csv.matches(",done\n").count(), 3, "{csv}");
}

/// Dynamic PFC thresholds (`[pfc] dynamic_alpha`, the HPCC simulator's 1/16 of the free shared
/// buffer here, capped at 4 MB): an incast without congestion control stays lossless, and each
/// sender's ingress may hold far more than the static 512 KB before it is paused, so the ToR's
/// buffer peaks at more than twice the static run's.
#[test]
fn dynamic_pfc_thresholds_follow_the_free_buffer() {
    let flows = [
        flow(0, 3, 4_000_000, 0.0),
        flow(1, 3, 4_000_000, 0.0),
        flow(2, 3, 4_000_000, 0.0),
    ]
    .concat();
    let reg = longhaul_pipelines::registry();
    let peak = |text: &str| {
        let r = emulate(&mut load(text), &reg, Overrides::default()).unwrap();
        let (_, sw) = &r.outcome.switches[0];
        assert!(r.outcome.flows.iter().all(|f| f.finish_ns.is_some()));
        assert_eq!(sw.stats.drops.iter().map(|(_, v)| v).sum::<u64>(), 0);
        assert!(sw.ports.iter().map(|p| p.stats.pfc_tx).sum::<u64>() > 0);
        sw.stats.buffer_max_bytes
    };
    let stat = peak(&scenario("cc = \"none\"", &flows, ""));
    let tor = std::fs::read_to_string(dir().join("switches/tor4.toml"))
        .unwrap()
        .replace("limit_bytes = 4194304", "limit_bytes = 8388608")
        .replace(
            "xoff_bytes = 524288\nxon_bytes = 458752",
            "xoff_bytes = 4194304\nxon_bytes = 4191232\ndynamic_alpha = 0.0625",
        );
    assert!(tor.contains("dynamic_alpha"));
    let cfg = std::env::temp_dir().join(format!("longhaul-dyn-pfc-{}.toml", std::process::id()));
    std::fs::write(&cfg, tor).unwrap();
    let text = scenario("cc = \"none\"", &flows, "")
        .replace("switches/tor4.toml", &cfg.display().to_string());
    let dynamic = peak(&text);
    let _ = std::fs::remove_file(&cfg);
    assert!(
        dynamic > 2 * stat,
        "buffer peak: dynamic {dynamic}, static {stat}"
    );
}

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * q)
}

/// Three DCQCN flows into one 100 Gb/s port, the first starting 200 us before the others:
/// once all run, each gets its share (Jain's index over the bytes each delivered in the last
/// window >= 0.95), and the port stays busy.
#[test]
fn dcqcn_flows_converge_to_fair_share() {
    let flows = [
        flow(0, 3, 40_000_000, 0.0),
        flow(1, 3, 40_000_000, 200.0),
        flow(2, 3, 40_000_000, 200.0),
    ]
    .concat();
    // The DCQCN paper's faster increase timer (55 us) so that convergence fits a short run.
    let s = load(&scenario(
        "duration_us = 6000\n[emulation.dcqcn]\nrp_timer_us = 55\nrate_ai_mbps = 40\nrate_hai_mbps = 200\n",
        &flows,
        "",
    ));
    let mut e = Emulation::new(&s, &longhaul_pipelines::registry()).unwrap();
    e.sample_every(100_000);
    let out = e.run();
    let at = |t: u64| {
        &out.samples
            .iter()
            .find(|(ts, _)| *ts == t)
            .expect("sample")
            .1
    };
    let (a, b) = (at(4_000_000), at(6_000_000));
    let got: Vec<f64> = (0..3).map(|i| (b[i] - a[i]) as f64).collect();
    let j = jain(&got);
    eprintln!("Jain {j:.4} over {got:?}");
    assert!(j >= 0.95, "Jain {j:.3} over {got:?}");
    let total: f64 = got.iter().sum();
    // Goodput over 1 ms: at least 80% of the 100 Gb/s port (12.5 MB), after headers.
    assert!(
        total >= 0.8 * 12.5e6 * 1024.0 / 1086.0,
        "{total} bytes in 1 ms"
    );
    assert!(
        out.flows.iter().all(|f| f.cnps > 0),
        "every sender saw CNPs"
    );
}

/// Without congestion control, an incast fills the ToR's buffer: PFC pauses the senders and
/// nothing is dropped; every flow completes without a retransmission.
#[test]
fn pfc_makes_the_incast_lossless() {
    let flows = [
        flow(0, 3, 2_000_000, 0.0),
        flow(1, 3, 2_000_000, 0.0),
        flow(2, 3, 2_000_000, 0.0),
    ]
    .concat();
    let s = load(&scenario(
        "[emulation.dcqcn]\nenabled = false\n",
        &flows,
        "",
    ));
    let out = Emulation::new(&s, &longhaul_pipelines::registry())
        .unwrap()
        .run();
    let (_, sw) = &out.switches[0];
    let drops: u64 = sw.stats.drops.iter().map(|(_, v)| v).sum();
    assert_eq!(drops, 0);
    let pauses: u64 = out.hosts.iter().map(|(_, h)| h.pfc_rx).sum();
    assert!(pauses > 0, "the senders were paused");
    for f in &out.flows {
        assert!(f.finish_ns.is_some(), "{f:?}");
        assert_eq!(f.retransmitted, 0);
    }
    // Pause time, read off the PFC frames: the senders (hosts 0-2) were paused, for less than
    // the run; the receiver and the switch ports never.
    let (hosts, switches) = out.pauses.per_node(out.hosts.len(), out.switches.len());
    let last = out.flows.iter().filter_map(|f| f.finish_ns).max().unwrap();
    assert!(hosts[..3].iter().all(|&t| t > 0 && t < last), "{hosts:?}");
    assert_eq!((hosts[3], switches[0]), (0, 0));
    // Three 2 MB flows into one 100 Gb/s port: 480 us of work at line rate, paused a good share
    // of it (each sender could send at 100 Gb/s).
    let span = out.pauses.fraction(0, last);
    assert!(span > 0.1 && span < 1.0, "{span}");
}

/// 1% of the frames on h0's link are lost: go-back-N (NAKs, and the timeout when the last
/// packets are lost) still delivers the whole flow.
#[test]
fn a_lossy_link_triggers_go_back_n_and_the_flow_completes() {
    let s = load(&scenario(
        "duration_us = 20000\nrto_us = 100\n",
        &flow(0, 1, 2_000_000, 0.0),
        "loss = 0.01",
    ));
    let out = Emulation::new(&s, &longhaul_pipelines::registry())
        .unwrap()
        .run();
    let f = &out.flows[0];
    assert!(out.link_drops > 0);
    assert!(f.finish_ns.is_some(), "{f:?}");
    assert!(f.naks > 0 && f.retransmitted > 0, "{f:?}");
}

/// The same scenario and seed give the same bytes; another seed changes the losses.
#[test]
fn runs_are_deterministic() {
    let text = scenario(
        "duration_us = 5000\nrto_us = 100\n",
        &[flow(0, 3, 1_000_000, 0.0), flow(1, 3, 1_000_000, 10.0)].concat(),
        "loss = 0.005",
    );
    let reg = longhaul_pipelines::registry();
    let run = |seed: u64| {
        let mut s = load(&text);
        let r = emulate(
            &mut s,
            &reg,
            Overrides {
                seed: Some(seed),
                ..Overrides::default()
            },
        )
        .unwrap();
        output::flows_csv(&r) + &output::summary(&r)
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn the_shipped_incast_scenario_runs() {
    let reg = longhaul_pipelines::registry();
    let mut s = Scenario::load(&dir().join("incast.toml"), reg.as_ref()).unwrap();
    let r = emulate(&mut s, &reg, Overrides::default()).unwrap();
    assert!(r.outcome.flows.iter().all(|f| f.finish_ns.is_some()));
    let csv = output::flows_csv(&r);
    assert_eq!(csv.lines().count(), 4, "{csv}");
    // Three flows into one port: each is slower than alone, and than its standalone FCT.
    for (i, (f, alone)) in r.outcome.flows.iter().zip(&r.alone_fct_ns).enumerate() {
        assert!(f.fct_ns().unwrap() > alone.unwrap());
        assert!(r.slowdown(i).unwrap() > 1.2, "{f:?}");
    }
}

#[test]
fn bad_scenarios_name_the_file_and_key() {
    let ok_flow = flow(0, 1, 1000, 0.0);
    let e = errors(&scenario(
        "",
        &flow(0, 9, 1000, 0.0).replace("h9", "nobody"),
        "",
    ));
    assert!(
        e[0].contains("bad.toml: flows[0].dst: no host 'nobody' (hosts: h0, h1, h2, h3)"),
        "{e:?}"
    );
    let e = errors(
        &scenario("", &ok_flow, "").replace("rate_gbps = 100\ndelay_ns", "rate_gbps = 0\ndelay_ns"),
    );
    assert!(
        e[0].contains("links[0].rate_gbps: 0 is out of range"),
        "{e:?}"
    );
    let e = errors(&scenario("", &ok_flow, "").replace("b = \"tor:h3\"", "b = \"tor:h9\""));
    assert!(
        e.iter().any(
            |m| m.contains("links[3].b: switch 'tor' has no port 'h9' (ports: h0, h1, h2, h3)")
        ),
        "{e:?}"
    );
    let text = scenario("", &ok_flow, "");
    let unlinked = text.replace(
        "[[links]]\na = \"h3\"\nb = \"tor:h3\"\nrate_gbps = 100\ndelay_ns = 1000\n",
        "",
    );
    assert_ne!(text, unlinked);
    let e = errors(&unlinked);
    assert!(
        e.iter()
            .any(|m| m.contains("bad.toml: hosts: host 'h3' is not connected")),
        "{e:?}"
    );
    let e = errors(&scenario("", &ok_flow, "").replace("switches/tor4.toml", "switches/none.toml"));
    assert!(
        e[0].contains("switches[0].config: cannot read the file"),
        "{e:?}"
    );
    let e = errors(&scenario("bogus = 1", &ok_flow, ""));
    assert!(
        e[0].contains("emulation.bogus: unknown field `bogus`"),
        "{e:?}"
    );
    assert!(e[0].contains("(line 2, column 1)"), "{e:?}");
}

/// Generated traffic: Poisson arrivals with WebSearch sizes, drawn from the seed; the time
/// series are written when sampling is on.
#[test]
fn websearch_traffic_and_time_series() {
    let reg = longhaul_pipelines::registry();
    let mut s = Scenario::load(&dir().join("websearch.toml"), reg.as_ref()).unwrap();
    let flows = s.all_flows();
    assert!(flows.len() >= 10, "{} flows", flows.len());
    assert!(flows
        .iter()
        .all(|f| f.src != f.dst && f.start_ns < 2_000_000));
    assert_eq!(flows, s.all_flows(), "drawn from the seed");
    let r = emulate(&mut s, &reg, Overrides::default()).unwrap();
    let ts = output::timeseries_csv(&r).expect("sampled");
    assert!(ts.starts_with("time_ns,series,value\n"));
    assert!(ts.contains(",switch.tor.h3.queue_bytes,"));
    assert!(ts.contains(",flow.0.rate_bps,"));
    // 4 ms sampled every 20 us: 201 instants, each with 4 ports x 2 series + drops.
    let q = ts.lines().filter(|l| l.contains(".h0.queue_bytes")).count();
    assert_eq!(q, 201);
    let done = r
        .outcome
        .flows
        .iter()
        .filter(|f| f.finish_ns.is_some())
        .count();
    assert!(
        done * 10 >= flows.len() * 9,
        "{done} of {} done",
        flows.len()
    );
    let mut other = Scenario::load(&dir().join("websearch.toml"), reg.as_ref()).unwrap();
    other.params.seed = 2;
    assert_ne!(other.all_flows(), flows, "another seed, other flows");
}

#[test]
fn bad_traffic_is_named() {
    let t =
        "[[traffic]]\nsources = [\"h0\"]\ndestinations = [\"h5\"]\nload = 1.5\ncdf = \"nope\"\n";
    let e = errors(&scenario("", t, "")).join("\n");
    for part in [
        "traffic[0].destinations[0]: no host 'h5'",
        "traffic[0].load: 1.5 is out of range",
        "traffic[0].cdf: 'nope' is neither a shipped CDF (websearch, hadoop) nor a readable file",
    ] {
        assert!(e.contains(part), "{part} not in\n{e}");
    }
}

/// The FCTs alone (every distinct flow alone, one after the other in one run) are each flow's
/// FCT when the scenario holds only that flow.
#[test]
fn alone_fcts_equal_each_flow_alone() {
    let flows = [
        flow(0, 3, 300_000, 5.0),
        flow(1, 2, 2_000, 0.0),
        flow(2, 3, 50_000, 1.0),
    ]
    .concat();
    let s = load(&scenario("", &flows, ""));
    let reg = longhaul_pipelines::registry();
    let (ideal, _) = longhaul_emulator::alone_fcts(&s, &reg).unwrap();
    for (i, f) in s.flows.iter().enumerate() {
        let alone = load(&scenario("", &flow(f.src, f.dst, f.size_bytes, 0.0), ""));
        let fct = Emulation::new(&alone, &reg).unwrap().run().flows[0].fct_ns();
        assert_eq!(ideal[i], fct, "flow {i}");
    }
}

/// A flow that does not finish in the run has no slowdown, so it is not run alone: its FCT
/// alone is empty, and the finished flows' are those of `alone_fcts` (which runs them all).
#[test]
fn unfinished_flows_are_not_run_alone() {
    // Alone, each 4 MB flow takes about 0.34 ms; together on h3's port, twice that.
    let flows = [
        flow(0, 1, 50_000, 0.0),
        flow(2, 3, 4_000_000, 0.0),
        flow(1, 3, 4_000_000, 0.0),
    ]
    .concat();
    let mut s = load(&scenario("duration_us = 500", &flows, ""));
    let reg = longhaul_pipelines::registry();
    let (all, all_hops) = longhaul_emulator::alone_fcts(&s, &reg).unwrap();
    assert!(all.iter().all(Option::is_some), "{all:?}");
    let r = emulate(&mut s, &reg, Overrides::default()).unwrap();
    let done: Vec<bool> = r
        .outcome
        .flows
        .iter()
        .map(|f| f.finish_ns.is_some())
        .collect();
    assert_eq!(done, [true, false, false]);
    assert_eq!(r.alone_fct_ns, [all[0], None, None]);
    // The 4 MB flows alone are most of the runs alone's frames.
    assert!(
        r.alone_hops * 10 < all_hops,
        "{} of {all_hops}",
        r.alone_hops
    );
}

/// `--out-dir` gets the CSVs, the summary and the plots (PNG and SVG), the same bytes on every
/// run.
#[test]
fn out_dir_has_the_plots() {
    let reg = longhaul_pipelines::registry();
    let run = |out: &Path| {
        let mut s = Scenario::load(&dir().join("websearch.toml"), reg.as_ref()).unwrap();
        let r = emulate(&mut s, &reg, Overrides::default()).unwrap();
        output::write(out, &r).unwrap()
    };
    let base = std::env::temp_dir().join(format!("longhaul-emu-{}", std::process::id()));
    let (a, b) = (base.join("a"), base.join("b"));
    let names = run(&a);
    run(&b);
    for plot in ["fct_slowdown", "queues", "rates"] {
        let png = std::fs::read(a.join(format!("{plot}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{plot}.png");
        let svg = std::fs::read_to_string(a.join(format!("{plot}.svg"))).unwrap();
        assert!(svg.starts_with("<svg"), "{plot}.svg");
        assert!(
            svg.contains("time (us)") || svg.contains("flow size"),
            "{plot}.svg has its axes"
        );
    }
    for n in &names {
        assert_eq!(
            std::fs::read(a.join(n)).unwrap(),
            std::fs::read(b.join(n)).unwrap(),
            "{n} differs between two runs"
        );
    }
    assert_eq!(names.len(), 10, "{names:?}");
    let _ = std::fs::remove_dir_all(&base);
}

/// TIMELY senders (thresholds and step scaled to 100 Gb/s: T_low 5 us, T_high 50 us, delta
/// 100 Mb/s) in a three-to-one incast: the queue stays below the PFC threshold (no pause), the
/// flows share the port evenly and all complete.
#[test]
fn timely_keeps_the_incast_queue_below_pfc() {
    let flows = [
        flow(0, 3, 4_000_000, 0.0),
        flow(1, 3, 4_000_000, 0.0),
        flow(2, 3, 4_000_000, 0.0),
    ]
    .concat();
    let s = load(&scenario(
        "cc = \"timely\"\n[emulation.timely]\nt_low_us = 5\nt_high_us = 50\nmin_rtt_us = 4\ndelta_mbps = 100\n",
        &flows,
        "",
    ));
    assert!(s.params.timely.is_some() && s.params.dcqcn.is_none());
    let out = Emulation::new(&s, &longhaul_pipelines::registry())
        .unwrap()
        .run();
    let (_, sw) = &out.switches[0];
    let pfc: u64 = sw.ports.iter().map(|p| p.stats.pfc_tx).sum();
    assert_eq!(pfc, 0);
    assert!(
        sw.stats.buffer_max_bytes < 524_288,
        "{}",
        sw.stats.buffer_max_bytes
    );
    let fcts: Vec<u64> = out
        .flows
        .iter()
        .map(|f| f.fct_ns().expect("done"))
        .collect();
    let (lo, hi) = (*fcts.iter().min().unwrap(), *fcts.iter().max().unwrap());
    assert!(hi * 100 <= lo * 105, "uneven: {fcts:?}");
    let e = errors(&scenario("cc = \"bbr\"", &flow(0, 1, 1000, 0.0), ""));
    assert!(
        e[0].contains("emulation.cc: 'bbr': expected \"dcqcn\", \"timely\", \"swift\" or \"none\""),
        "{e:?}"
    );
}

/// Swift senders (window-based, delay target) in a three-to-one incast keep the port busy
/// (each flow within 5% of the 3x slowdown of a fair share), share it evenly and never let the
/// queue reach the PFC threshold.
#[test]
fn swift_shares_the_incast_port_without_pfc() {
    let flows = [
        flow(0, 3, 4_000_000, 0.0),
        flow(1, 3, 4_000_000, 0.0),
        flow(2, 3, 4_000_000, 0.0),
    ]
    .concat();
    let mut s = load(&scenario("cc = \"swift\"\n", &flows, ""));
    assert!(s.params.swift.is_some() && s.params.dcqcn.is_none());
    let reg = longhaul_pipelines::registry();
    let r = emulate(&mut s, &reg, Overrides::default()).unwrap();
    let (_, sw) = &r.outcome.switches[0];
    assert_eq!(sw.ports.iter().map(|p| p.stats.pfc_tx).sum::<u64>(), 0);
    assert_eq!(r.pause_fraction(), 0.0);
    assert!(
        sw.stats.buffer_max_bytes < 524_288,
        "{}",
        sw.stats.buffer_max_bytes
    );
    for (i, f) in r.outcome.flows.iter().enumerate() {
        let slowdown = r.slowdown(i).expect("done");
        assert!(slowdown < 3.15, "{f:?}: {slowdown}");
        assert_eq!(f.retransmitted, 0);
    }
}

/// `[emulation] connect` and `connect_from` take only their documented values, and the error
/// names the file and the key.
#[test]
fn bad_connect_values_are_errors_naming_the_key() {
    let e = errors(&scenario(
        "connect = \"rdma_cm\"\nconnect_from = \"both\"",
        &flow(0, 1, 1000, 0.0),
        "",
    ));
    let all = e.join("\n");
    assert!(
        e.iter().any(|m| m.contains("bad.toml")
            && m.contains("emulation.connect:")
            && m.contains("'rdma_cm'")),
        "{all}"
    );
    assert!(
        e.iter()
            .any(|m| m.contains("emulation.connect_from") && m.contains("'both'")),
        "{all}"
    );
    let ok = load(&scenario(
        "connect = \"tcp\"\nconnect_from = \"receiver\"",
        &flow(0, 1, 1000, 0.0),
        "",
    ));
    assert_eq!(
        ok.params.connect,
        longhaul_emulator::scenario::Connect::Tcp { by_receiver: true }
    );
}

/// `[emulation.agents.NAME]`: a host agent's parameters, validated by its mechanism before
/// anything runs. MLCC's `base_rtt_us` (HPCC's `T`): 0, negative, not a number, an unknown key
/// are errors naming the file, the key and the line; a table for an agent the scenario does not
/// run, one that takes no parameters, or no agent at all, too.
#[test]
fn bad_host_agent_parameters_name_the_file_and_key() {
    let ok_flow = flow(0, 1, 1000, 0.0);
    let mlcc = |t: &str| format!("host_agents = [\"mlcc\"]\n[emulation.agents.mlcc]\n{t}");
    for (value, what) in [
        (
            "0",
            "0 is out of range: HPCC's base RTT must be 0.001 to 1000000 us",
        ),
        (
            "-25",
            "-25 is out of range: HPCC's base RTT must be 0.001 to 1000000 us",
        ),
        ("0.0001", "0.0001 is out of range"),
        ("2e6", "2000000 is out of range"),
        ("nan", "NaN is out of range"),
        (
            "\"25us\"",
            "invalid type: string \"25us\", expected a number",
        ),
    ] {
        let e = errors(&scenario(
            &mlcc(&format!("base_rtt_us = {value}")),
            &ok_flow,
            "",
        ));
        assert!(
            e[0].contains("bad.toml: emulation.agents.mlcc.base_rtt_us: ")
                && e[0].contains(what)
                && e[0].contains("(line 4, column "),
            "{value}: {e:?}"
        );
    }
    let e = errors(&scenario(&mlcc("base_rtt = 25"), &ok_flow, ""));
    assert!(
        e[0].contains("bad.toml: emulation.agents.mlcc.base_rtt: unknown field `base_rtt`"),
        "{e:?}"
    );
    let e = errors(&scenario(
        "[emulation.agents.mlcc]\nbase_rtt_us = 10",
        &ok_flow,
        "",
    ));
    assert!(
        e[0].contains(
            "bad.toml: emulation.agents.mlcc: 'mlcc' is not in emulation.host_agents: its agent does not run"
        ),
        "{e:?}"
    );
    let e = errors(&scenario(
        "host_agents = [\"themis\"]\n[emulation.agents.themis]\nx = 1",
        &ok_flow,
        "",
    ));
    assert!(
        e[0].contains(
            "bad.toml: emulation.agents.themis: the 'themis' host agent takes no parameters"
        ),
        "{e:?}"
    );
    let e = errors(&scenario("[emulation.agents.nope]\nx = 1", &ok_flow, ""));
    assert!(
        e[0].contains(
            "bad.toml: emulation.agents.nope: no mechanism 'nope' with a host-side agent"
        ),
        "{e:?}"
    );
    // Valid: the value in ns, what the hosts' agent is built with; absent: no parameters (the
    // agent's defaults, 25 us).
    let s = load(&scenario(&mlcc("base_rtt_us = 12.5"), &ok_flow, ""));
    let a = &s.params.host_agents[0];
    let p = a
        .params
        .as_ref()
        .and_then(|p| p.as_any().downcast_ref::<MlccHostParams>())
        .expect("MLCC's parameters");
    assert_eq!((a.name.as_str(), p.base_rtt_ns), ("mlcc", 12_500));
    let s = load(&scenario("host_agents = [\"mlcc\"]", &ok_flow, ""));
    assert!(s.params.host_agents[0].params.is_none());
}

/// `--seed` reseeds the switches too (their ECN coin flips): seed 1 keeps each config's seed,
/// every other seed gives each switch another one.
#[test]
fn the_emulation_seed_reseeds_the_switches() {
    use longhaul_emulator::sim::switch_seed;
    assert_eq!(switch_seed(7, 1), 7);
    let seeds: std::collections::HashSet<u64> = (1..=1000).map(|s| switch_seed(7, s)).collect();
    assert_eq!(seeds.len(), 1000);
    assert_ne!(switch_seed(7, 2), switch_seed(8, 2));
}

/// `bdp_window` (the HPCC simulator's HAS_WIN): a QP's window is a BDP, so a flow alone still
/// fills the link (its FCT within 2% of the standalone one), while a window of a quarter of that
/// (`window`) holds it to about a quarter of the rate; `var_window` (VAR_WIN) scales it with the
/// rate, which at line rate changes nothing. The values are checked.
#[test]
fn a_bdp_window_fills_the_path_and_no_more() {
    use longhaul_emulator::scenario::BdpWindow;
    let size = 4_000_000u64;
    // 100 us each way on h0's link: a BDP of about 2.5 MB, 2,450 packets of 1024 bytes.
    let reg = longhaul_pipelines::registry();
    let run = |emulation: &str| {
        let text = scenario(emulation, &flow(0, 1, size, 0.0), "").replacen(
            "delay_ns = 1000\n",
            "delay_ns = 100000\n",
            1,
        );
        let mut s = load(&text);
        let r = emulate(&mut s, &reg, Overrides::default()).unwrap();
        let fct = r.outcome.flows[0].fct_ns().expect("done");
        (s.params.bdp_window, fct, r.standalone_fct_ns[0].unwrap())
    };
    let off = "[emulation.dcqcn]\nenabled = false\n";
    for (keys, which) in [
        ("bdp_window = \"pair\"\n", BdpWindow::Pair),
        ("bdp_window = \"max\"\nvar_window = true\n", BdpWindow::Max),
    ] {
        let (w, fct, ideal) = run(&format!("{keys}{off}"));
        assert_eq!(w, Some(which));
        assert!(
            fct as f64 <= ideal as f64 * 1.02,
            "{keys}: FCT {fct} ns, standalone {ideal} ns"
        );
    }
    let (_, fct, _) = run(&format!("bdp_window = \"pair\"\n{off}"));
    let (w, quarter, _) = run(&format!("window = 612\n{off}"));
    assert_eq!(w, None);
    assert!(quarter as f64 > fct as f64 * 2.5, "{quarter} vs {fct}");
    let e = errors(&scenario("bdp_window = \"all\"\n", "", ""));
    assert!(
        e.iter().any(|e| e.contains("emulation.bdp_window")),
        "{e:?}"
    );
    let e = errors(&scenario("var_window = 1\n", "", ""));
    assert!(
        e.iter().any(|e| e.contains("emulation.var_window")),
        "{e:?}"
    );
}
