//! Every shipped scenario's flows finish when the run goes on past its duration
//! (`longhaul emulate --until-done`), within a stated bound of virtual time: no flow is
//! stranded. Prints, per scenario, when its last flow finished:
//!
//!     cargo test --release -p longhaul-emulator --test until_done -- --nocapture

use longhaul_emulator::scenario::Scenario;
use longhaul_emulator::sim::Emulation;
use std::path::Path;

/// The bound: virtual time by which every flow of every shipped scenario is done. The slowest
/// is Reflex with Swift (`reflex-swift.toml`, `-nopause`): a flow whose window NSF cut keeps it
/// once NSF turns Silent, as the end-to-end ACKs feed Swift nothing (paper 003, section III-C;
/// docs/reflex.md), and a 19.9 MB one ends at about 1.35 s.
const BOUND_NS: u64 = 2_000_000_000;

#[test]
fn every_shipped_scenario_finishes_its_flows() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 20, "{files:?}");
    let reg = longhaul_pipelines::registry();
    let mut stranded = Vec::new();
    for f in &files {
        let s = Scenario::load(f, reg.as_ref()).unwrap_or_else(|e| panic!("{e:?}"));
        let mut e = Emulation::new(&s, &reg).unwrap();
        e.until_done(BOUND_NS);
        let o = e.run();
        let name = f.file_name().unwrap().to_string_lossy();
        let last = o
            .flows
            .iter()
            .filter_map(|f| f.finish_ns)
            .max()
            .unwrap_or(0);
        let left: Vec<String> = o
            .flows
            .iter()
            .filter(|f| f.finish_ns.is_none())
            .map(|f| format!("{} {}->{} {:?}", f.id, f.src, f.dst, f.state))
            .collect();
        println!(
            "{name}: {} flows, duration {:.1} ms, last done at {:.1} ms, {} not done",
            o.flows.len(),
            s.params.duration_ns as f64 / 1e6,
            last as f64 / 1e6,
            left.len()
        );
        if !left.is_empty() {
            stranded.push(format!("{name}: {left:?}"));
        }
    }
    assert!(stranded.is_empty(), "{stranded:#?}");
}
