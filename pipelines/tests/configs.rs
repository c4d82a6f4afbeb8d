//! Every shipped config in `configs/` must load and validate with every registered mechanism.

use longhaul_pipelines::load_config_all;
use std::path::PathBuf;

#[test]
fn every_shipped_config_validates() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no configs in {}", dir.display());
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
