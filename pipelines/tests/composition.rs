//! Mechanisms compose through the registry: Bifrost (a section, not a pipeline) on the WAN port
//! of the THEMIS ESW. The THEMIS conformance traces (TRP loops and recovery; PNP CNPs) replayed
//! with and without `[bifrost]` give the same THEMIS behaviour (same data and CNPs on every
//! port, same THEMIS counters), while Bifrost's slot timer runs on the governed pair and its
//! counters appear next to THEMIS's.

use longhaul_dataplane::pcap::read_pcap;
use longhaul_dataplane::wire::ethernet::ETHERTYPE_MAC_CONTROL;
use longhaul_pipelines::bifrost::config::BifrostConfig;
use longhaul_pipelines::themis::config::ThemisConfig;
use longhaul_pipelines::{parse_config, replay};
use longhaul_runtime::{ReplayInput, ReplayResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Bifrost on (wan0, class 3) of a THEMIS ESW: D = 100 us, T = 10 us at 100 Gb/s, so
/// H >= BDP + 2*Rs*T = 2 500 000 + 250 000 bytes, within class 3's 4 MiB limit.
const BIFROST: &str = "\n[bifrost]\nports = [\"wan0\"]\npriorities = [3]\nslot_ns = 10000\n\
                       one_way_delay_ns = 100000\nbuffer_bytes = 2800000\n";

fn run(case: &str, cfg_text: &str) -> ReplayResult {
    let dir = root().join("pcap-tests/cases").join(case);
    let cfg = parse_config(cfg_text, &dir.join("switch.toml")).unwrap_or_else(|e| panic!("{e}"));
    let mut inputs = Vec::new();
    for (port, id) in [("dc0", 0), ("wan0", 2)] {
        let p = dir.join(format!("in_{port}.pcap"));
        if p.exists() {
            inputs.push(ReplayInput {
                port: id,
                records: read_pcap(&p).unwrap(),
            });
        }
    }
    replay(&cfg, inputs).unwrap()
}

/// Every non-PFC frame each port emitted, with its departure time.
fn frames(r: &ReplayResult) -> BTreeMap<u16, Vec<(u64, Vec<u8>)>> {
    r.outputs
        .iter()
        .map(|(port, recs)| {
            let v = recs
                .iter()
                .filter(|r| {
                    r.data.len() < 14 || r.data[12..14] != ETHERTYPE_MAC_CONTROL.to_be_bytes()
                })
                .map(|r| (r.ts_ns, r.data.clone()))
                .collect();
            (*port, v)
        })
        .collect()
}

fn counters(r: &ReplayResult, prefix: &str) -> Vec<(String, u64)> {
    r.counters
        .iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .cloned()
        .collect()
}

#[test]
fn themis_with_bifrost_behaves_as_themis_alone() {
    for case in ["themis_trp_loops", "themis_alg1_trace"] {
        let base = std::fs::read_to_string(
            root()
                .join("pcap-tests/cases")
                .join(case)
                .join("switch.toml"),
        )
        .unwrap();
        let with = format!("{base}{BIFROST}");
        let cfg = parse_config(&with, Path::new("t.toml")).unwrap();
        assert!(
            cfg.section::<ThemisConfig>().is_some() && cfg.section::<BifrostConfig>().is_some()
        );

        let alone = run(case, &base);
        let both = run(case, &with);
        assert_eq!(
            frames(&alone),
            frames(&both),
            "{case}: THEMIS's output changed"
        );
        let themis = counters(&alone, "themis.");
        assert!(
            themis
                .iter()
                .any(|(k, v)| k == "themis.recirculated" && *v > 0),
            "{case}: {themis:?}"
        );
        assert_eq!(themis, counters(&both, "themis."), "{case}");
        assert!(counters(&alone, "bifrost.").is_empty());
        let bifrost = counters(&both, "bifrost.");
        let slots = bifrost
            .iter()
            .find(|(k, _)| k == "bifrost.slots")
            .map(|x| x.1);
        assert!(slots.is_some_and(|n| n > 0), "{case}: {bifrost:?}");
    }
}
