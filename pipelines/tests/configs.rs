//! Every shipped config in `configs/` must load and validate with every registered mechanism.

use longhaul_dataplane::time::Nanos;
use longhaul_pipelines::load_config_all;
use std::path::PathBuf;

/// The files in `configs/`, sorted.
fn shipped_configs() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no configs in {}", dir.display());
    files
}

#[test]
fn every_shipped_config_validates() {
    let files = shipped_configs();
    let mut failures = Vec::new();
    for f in &files {
        if let Err(errors) = load_config_all(f) {
            failures.extend(errors.iter().map(|e| e.to_string()));
        }
    }
    assert!(
        failures.is_empty(),
        "invalid shipped configs:\n{}",
        failures.join("\n")
    );
}

/// Every shipped config's pipeline counters (the names `/stats` and the Prometheus series take):
/// each name once, each `<group>.<counter>` with a group of the baseline's or the pipeline's.
#[test]
fn every_pipeline_counter_name_is_unique_and_prefixed() {
    let files = shipped_configs();
    for f in &files {
        let cfg = longhaul_pipelines::load_config(f).unwrap_or_else(|e| panic!("{e}"));
        let mut sink = |_: u16, _: Nanos, _: &[u8]| {};
        let st = longhaul_pipelines::replay_stream(&cfg, Vec::new(), &mut sink, Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let names: Vec<&str> = st.snapshot.pipeline.iter().map(|(n, _)| *n).collect();
        assert!(!names.is_empty(), "{}: no pipeline counters", f.display());
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "{}: a name twice", f.display());
        let groups = ["baseline", "neighbor", "int", cfg.switch.pipeline.as_str()];
        for n in names {
            let group = n
                .split_once('.')
                .filter(|(_, c)| !c.is_empty())
                .map(|(g, _)| g);
            assert!(
                group.is_some_and(|g| groups.contains(&g)),
                "{}: {n} is not <group>.<counter> with a group of {groups:?}",
                f.display()
            );
        }
    }
}
