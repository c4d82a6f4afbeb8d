//! A switch's quiet steps taken in one call (`Emulation::set_quiet_steps`, the default) give
//! the same run as one step per iteration of the emulator's loop.

use longhaul_emulator::scenario::Scenario;
use longhaul_emulator::sim::Emulation;
use std::path::Path;

/// Everything a run reports, main run and runs alone, with `set` applied to each emulation
/// (quiet steps or loop steps on or off).
fn runs(name: &str, duration_ns: u64, set: fn(&mut Emulation)) -> (String, String) {
    let reg = longhaul_pipelines::registry();
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(name);
    let mut s = Scenario::load(&path, reg.as_ref()).unwrap_or_else(|e| panic!("{e:?}"));
    s.params.duration_ns = duration_ns;
    let mut e = Emulation::new(&s, &reg).unwrap();
    set(&mut e);
    let main = format!("{:?}", e.run());
    let mut e =
        Emulation::one_at_a_time(&s, &reg, s.all_flows().into_iter().zip(0..).collect()).unwrap();
    set(&mut e);
    let alone = format!("{:?}", e.run());
    (main, alone)
}

/// THEMIS (recirculation passes: most quiet steps), spraying and a PFC scenario.
#[test]
fn quiet_steps_in_one_call_change_nothing() {
    for (name, ns) in [
        ("themis.toml", 6_000_000),
        ("spray-themis.toml", 400_000),
        ("dcqcn-fairness.toml", 300_000),
    ] {
        let (a, b) = (
            runs(name, ns, |e| e.set_quiet_steps(true)),
            runs(name, ns, |e| e.set_quiet_steps(false)),
        );
        assert!(a.0 == b.0, "{name}: main run differs");
        assert!(a.1 == b.1, "{name}: runs alone differ");
    }
}

/// The steps in which only a switch's recirculation loop is due, taken without the driver's
/// step around them, give the same run as the driver's steps: THEMIS's throttled and
/// recovering packets (most of its recirculation passes), and spraying with THEMIS. Debug
/// builds also check, at every such step, the kept next event of the switch's other parts and
/// the switch's next event against the switch's own.
#[test]
fn loop_steps_change_nothing() {
    for (name, ns) in [("themis.toml", 6_000_000), ("spray-themis.toml", 400_000)] {
        let (a, b) = (
            runs(name, ns, |e| e.set_loop_steps(true)),
            runs(name, ns, |e| e.set_loop_steps(false)),
        );
        assert!(a.0 == b.0, "{name}: main run differs");
        assert!(a.1 == b.1, "{name}: runs alone differ");
    }
}
