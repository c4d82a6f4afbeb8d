//! One test per conformance case in `pcap-tests/cases/`, plus a test that every case directory
//! is listed here. Outputs land in `pcap-tests/out/<case>/`. See pcap-tests/README.md.

use longhaul_pcap_tests::{list_cases, run_named_case};

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                if let Err(e) = run_named_case(stringify!($name)) {
                    panic!("{e}");
                }
            }
        )*
        const LISTED: &[&str] = &[$(stringify!($name)),*];
    };
}

cases!(
    l3_forward_roce_tcp,
    ecn_marking,
    pfc_xoff_xon,
    themis_pnp_cnp,
    themis_syn_cookie,
    themis_daemon,
    themis_trp_loops,
    themis_alg1_trace,
    spray_fig6_nack_validation,
    spray_fig7_lazy_drop,
    bifrost_slot_pause,
    reflex_nsf_pseudo_ack,
    reflex_ndt_queues,
    mlcc_switch_int_feedback,
    mlcc_pfq_credit,
    int_source_tor,
    wire_pair_transparent,
    neighbor_arp_nd,
    ecmp_groups
);

#[test]
fn every_case_directory_is_listed() {
    let dirs = list_cases();
    assert!(!dirs.is_empty(), "no cases found");
    let missing: Vec<&String> = dirs
        .iter()
        .filter(|d| !LISTED.contains(&d.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "case directories not listed in tests/conformance.rs cases!(...): {missing:?}"
    );
    let stale: Vec<&&str> = LISTED
        .iter()
        .filter(|n| !dirs.iter().any(|d| d == *n))
        .collect();
    assert!(
        stale.is_empty(),
        "listed cases without a cases/<name>/case.toml: {stale:?}"
    );
}
