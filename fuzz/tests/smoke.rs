//! The corpus smoke (CI, no AFL needed): every file of fuzz/corpus/<target>/ and a few thousand
//! deterministic pseudo-random inputs (random bytes, and corpus files mutated as a fuzzer
//! would) through every target. A panic here is a finding: fuzz/README.md.

use longhaul_fuzz::input::SplitMix;
use longhaul_fuzz::TARGETS;
use std::path::Path;

/// Pseudo-random inputs per target (cheap targets get more: see `budget`).
const RANDOM_INPUTS: usize = 2_000;

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read(p).expect("corpus file"))
        .collect()
}

/// Pseudo-random inputs for a target: the switch targets build a switch per input, so fewer.
fn budget(name: &str) -> usize {
    if name.starts_with("pipeline_") || name == "config" {
        RANDOM_INPUTS / 8
    } else {
        RANDOM_INPUTS
    }
}

fn run(name: &str) {
    let target = longhaul_fuzz::target(name).expect("target");
    let seeds = corpus(name);
    assert!(
        !seeds.is_empty(),
        "fuzz/corpus/{name} is empty (run fuzz/seed.py)"
    );
    for s in &seeds {
        target(s);
    }
    let mut rng = SplitMix(0x5eed ^ name.len() as u64);
    for i in 0..budget(name) {
        let input = if i % 2 == 0 {
            let len = (rng.next_u64() % 512) as usize;
            rng.bytes(len)
        } else {
            let base = &seeds[(rng.next_u64() % seeds.len() as u64) as usize];
            rng.mutate(base)
        };
        target(&input);
    }
}

#[test]
fn every_target_has_a_test_and_a_corpus() {
    let names: Vec<&str> = TARGETS.iter().map(|(n, _)| *n).collect();
    for n in &names {
        assert!(!corpus(n).is_empty(), "{n}");
    }
    assert_eq!(names.len(), 11);
}

macro_rules! smoke {
    ($($t:ident),*) => {$(
        #[test]
        fn $t() {
            run(stringify!($t));
        }
    )*};
}

smoke!(
    wire,
    pcap,
    config,
    themis_daemon,
    api,
    pipeline_baseline,
    pipeline_themis,
    pipeline_spray,
    pipeline_mlcc,
    pipeline_reflex,
    pipeline_bifrost
);
