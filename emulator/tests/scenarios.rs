//! The shipped paper scenarios, each asserting the direction of its paper's headline effect.

use longhaul_emulator::scenario::Scenario;
use longhaul_emulator::sim::{Emulation, Outcome};
use std::path::Path;

fn run(name: &str) -> Outcome {
    let reg = longhaul_pipelines::registry();
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(name);
    let s = Scenario::load(&path, reg.as_ref()).unwrap_or_else(|e| panic!("{e:?}"));
    Emulation::new(&s, &reg).unwrap().run()
}

fn switch<'a>(o: &'a Outcome, name: &str) -> &'a longhaul_dataplane::engine::SwitchSnapshot {
    &o.switches.iter().find(|(n, _)| n == name).unwrap().1
}

/// Bifrost (paper 004, section III-B and Theorem 1): on a long lossless link, classic PFC
/// needs about twice the buffer Bifrost does for the same result. Both runs lose nothing and
/// finish together (same throughput); Bifrost's peak buffer at the downstream switch is at
/// most 60% of classic PFC's.
#[test]
fn bifrost_halves_the_buffer_of_classic_pfc_on_a_long_link() {
    let pfc = run("bifrost-pfc.toml");
    let bf = run("bifrost.toml");
    for o in [&pfc, &bf] {
        for (name, sw) in &o.switches {
            let drops: u64 = sw.stats.drops.iter().map(|(_, v)| v).sum();
            assert_eq!(drops, 0, "{name}");
        }
        assert!(o
            .flows
            .iter()
            .all(|f| f.finish_ns.is_some() && f.retransmitted == 0));
    }
    let last = |o: &Outcome| o.flows.iter().map(|f| f.finish_ns.unwrap()).max().unwrap();
    let (a, b) = (last(&pfc), last(&bf));
    assert!(
        a.abs_diff(b) * 50 <= a,
        "same throughput: last flow done at {a} vs {b} ns"
    );
    let (peak_pfc, peak_bf) = (
        switch(&pfc, "dci-b").stats.buffer_max_bytes,
        switch(&bf, "dci-b").stats.buffer_max_bytes,
    );
    assert!(
        peak_bf * 10 <= peak_pfc * 6,
        "peak buffer: Bifrost {peak_bf} bytes, classic PFC {peak_pfc} bytes"
    );
    // Bifrost really ran: its pause frames went up the long link.
    let b = switch(&bf, "dci-b")
        .bifrost
        .as_ref()
        .expect("[bifrost] configured");
    assert!(b.frames > 0 && b.slots > 0, "{b:?}");
    assert!(switch(&pfc, "dci-b").bifrost.is_none());
}
