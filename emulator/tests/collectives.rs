//! Collectives as a workload (`[[collectives]]`: ring AllReduce, AllToAll) and failed links
//! (`[[link_failures]]`), on four hosts around one baseline ToR (scenarios/switches/tor4.toml).

use longhaul_emulator::host::{data_frame_len, wire_time};
use longhaul_emulator::scenario::Scenario;
use longhaul_emulator::sim::{Emulation, Outcome};
use longhaul_emulator::{emulate, output, Overrides};
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// Four hosts on the ToR (100 Gb/s, 1 us links), then `extra` (collectives, failures).
fn scenario(extra: &str) -> String {
    let mut s = String::from("[emulation]\nduration_us = 2000\nmtu = 1000\nrto_us = 100\n");
    for k in 0..4 {
        s.push_str(&format!(
            "[[hosts]]\nname = \"h{k}\"\nip = \"10.0.0.{}\"\nmac = \"02:00:00:00:10:{:02x}\"\nrate_gbps = 100\n",
            k + 1,
            k + 1
        ));
    }
    s.push_str("[[switches]]\nname = \"tor\"\nconfig = \"switches/tor4.toml\"\n");
    for k in 0..4 {
        s.push_str(&format!(
            "[[links]]\na = \"h{k}\"\nb = \"tor:h{k}\"\nrate_gbps = 100\ndelay_ns = 1000\n"
        ));
    }
    s.push_str(extra);
    s
}

const RING: &str = "[[collectives]]\nname = \"ring\"\nkind = \"allreduce\"\nranks = [\"h0\", \"h1\", \"h2\", \"h3\"]\nbytes = 400000\nstart_us = 10\n";

fn load(text: &str) -> Scenario {
    let reg = longhaul_pipelines::registry();
    Scenario::parse(text, &dir().join("test.toml"), reg.as_ref())
        .unwrap_or_else(|e| panic!("{e:?}"))
}

fn run(text: &str) -> Outcome {
    let reg = longhaul_pipelines::registry();
    let mut e = Emulation::new(&load(text), &reg).unwrap();
    e.until_done(50_000_000);
    e.run()
}

fn errors(text: &str) -> Vec<String> {
    let reg = longhaul_pipelines::registry();
    match Scenario::parse(text, &dir().join("bad.toml"), reg.as_ref()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.iter().map(|e| e.to_string()).collect(),
    }
}

/// A 4-rank ring: 6 steps of 4 flows of 100 KB. Every step starts when its input arrived
/// (the same instant), never before; the CCT is the last delivery, and at least the six
/// chunks one after the other on a rank's NIC.
#[test]
fn ring_allreduce_steps_start_when_their_input_arrives() {
    let s = load(&scenario(RING));
    let after: Vec<Vec<usize>> = s.all_flows().iter().map(|f| f.after.clone()).collect();
    let o = run(&scenario(RING));
    assert_eq!(o.flows.len(), 24);
    assert!(
        o.flows.iter().all(|f| f.finish_ns.is_some()),
        "{:?}",
        o.flows
    );
    for (i, f) in o.flows.iter().enumerate() {
        let delivered = f.delivered_ns.unwrap();
        assert!(delivered <= f.finish_ns.unwrap());
        match after[i].as_slice() {
            [] => assert_eq!(f.start_ns, 10_000, "flow {i}"),
            [d] => assert_eq!(
                f.start_ns,
                o.flows[*d].delivered_ns.unwrap(),
                "flow {i} starts when flow {d}'s data is in"
            ),
            _ => unreachable!(),
        }
    }
    let c = &o.collectives[0];
    assert_eq!(
        (c.name.as_str(), c.ranks, c.flows.clone()),
        ("ring", 4, 0..24)
    );
    let last = o
        .flows
        .iter()
        .map(|f| f.delivered_ns.unwrap())
        .max()
        .unwrap();
    assert_eq!(c.finish_ns, Some(last));
    let packets = 100_000 / 1000;
    let chunk_ns = packets * wire_time(data_frame_len(1000, false), 100_000_000_000);
    let cct = c.cct_ns().unwrap();
    assert!(cct >= 6 * chunk_ns, "{cct} ns < 6 x {chunk_ns} ns");
    assert!(
        cct < 8 * chunk_ns,
        "{cct} ns: the steps should not wait much longer than a chunk"
    );
}

/// AllToAll: twelve flows at once; the CCT is the slowest rank's, about three chunks on a NIC
/// (each rank sends and receives three).
#[test]
fn alltoall_and_the_reports() {
    let text = scenario(&RING.replace("allreduce", "alltoall").replace("ring", "a2a"));
    let reg = longhaul_pipelines::registry();
    let mut s = load(&text);
    let r = emulate(
        &mut s,
        &reg,
        Overrides {
            until_done_ns: Some(50_000_000),
            skip_alone: true,
            ..Overrides::default()
        },
    )
    .unwrap();
    let o = &r.outcome;
    assert_eq!(o.flows.len(), 12);
    assert!(o.flows.iter().all(|f| f.start_ns == 10_000));
    let cct = r.tail_cct_ns().unwrap();
    let chunk_ns = 100 * wire_time(data_frame_len(1000, false), 100_000_000_000);
    assert!(cct >= 3 * chunk_ns && cct < 5 * chunk_ns, "{cct}");
    let csv = output::collectives_csv(&r);
    assert!(csv.starts_with("name,kind,ranks,bytes,flows,start_ns,finish_ns,cct_ns\n"));
    assert!(
        csv.contains(&format!(
            "a2a,alltoall,4,400000,12,10000,{},{cct}\n",
            10_000 + cct
        )),
        "{csv}"
    );
    assert!(output::summary(&r).contains("tail CCT (the slowest collective)"));
}

/// A link that fails for good cuts a rank off: the collective never completes and the lost
/// frames are counted. One that comes back after 200 us delays it (the senders' timeouts).
#[test]
fn a_failed_link_drops_everything_until_it_comes_back() {
    let base = run(&scenario(RING)).collectives[0].cct_ns().unwrap();
    let failure = "[[link_failures]]\nlink = \"tor:h2\"\nat_us = 20\n";
    let mut s = load(&scenario(&format!("{RING}{failure}")));
    s.params.duration_ns = 3_000_000;
    let reg = longhaul_pipelines::registry();
    let o = Emulation::new(&s, &reg).unwrap().run();
    assert_eq!(o.collectives[0].finish_ns, None);
    assert!(o.link_down_drops > 0);
    let o = run(&scenario(&format!("{RING}{failure}until_us = 220\n")));
    let cct = o.collectives[0].cct_ns().unwrap();
    assert!(
        o.link_down_drops > 0 && cct > base + 200_000,
        "{cct} vs {base}"
    );
    assert!(o.flows.iter().any(|f| f.timeouts > 0));
}

#[test]
fn bad_collectives_and_failures_are_named() {
    let e = errors(&scenario(&RING.replace("allreduce", "allgather")));
    assert!(
        e.iter()
            .any(|m| m.contains("bad.toml: collectives[0].kind: 'allgather': must be")),
        "{e:?}"
    );
    let e = errors(&scenario(&RING.replace("\"h3\"", "\"h9\"")));
    assert!(
        e.iter()
            .any(|m| m.contains("collectives[0].ranks[3]: no host 'h9'")),
        "{e:?}"
    );
    let e = errors(&scenario(&RING.replace("\"h3\"", "\"h0\"")));
    assert!(
        e.iter()
            .any(|m| m.contains("collectives[0].ranks[3]: host listed twice")),
        "{e:?}"
    );
    let e = errors(&scenario(&RING.replace("bytes = 400000", "bytes = 2")));
    assert!(
        e.iter().any(|m| m.contains("collectives[0].bytes")),
        "{e:?}"
    );
    let e = errors(&scenario(
        "[[link_failures]]\nlink = \"tor:nope\"\nat_us = 1\n",
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("link_failures[0].link: switch 'tor' has no port 'nope'")),
        "{e:?}"
    );
    let e = errors(&scenario(
        "[[link_failures]]\nlink = \"h1\"\nat_us = 5\nuntil_us = 5\n",
    ));
    assert!(
        e.iter()
            .any(|m| m.contains("link_failures[0].until_us: must be after at_us")),
        "{e:?}"
    );
    let e = errors(&scenario(RING).replace("rto_us = 100\n", "rto_us = 100\nconnect = \"tcp\"\n"));
    assert!(
        e.iter()
            .any(|m| m.contains("emulation.connect: collectives start their steps")),
        "{e:?}"
    );
}
