//! DQM (pipelines/src/mlcc/dqm.rs) against the independent Python oracle
//! (pcap-tests/oracle/mlcc_dqm.py) on the fixed traces in tests/fixtures/mlcc_dqm/: every ACK's
//! epoch flag, n, RTT_D, R_pre_eq, Q_pre, D_pre, R_DQM, token, dw and R_bar must agree. The
//! expected files are the oracle's output; `pcap-tests/tests/oracles.rs` checks that running the
//! oracle again reproduces them.

use longhaul_pipelines::mlcc::dqm::{Dqm, DqmParams};
use std::path::PathBuf;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mlcc_dqm")
}

fn params(line: &str) -> DqmParams {
    let kv = |k: &str| -> String {
        line.trim_start_matches('#')
            .split_whitespace()
            .find_map(|t| t.strip_prefix(&format!("{k}=")).map(str::to_string))
            .unwrap_or_else(|| panic!("no {k} in {line}"))
    };
    let int = |k: &str| kv(k).parse::<u64>().unwrap();
    DqmParams {
        theta_ns: int("theta_ns"),
        d_t_ns: int("d_t_ns"),
        m: int("m") as usize,
        alpha: kv("alpha").parse().unwrap(),
        rtt_c_ns: int("rtt_c_ns"),
        rtt_d_ns: int("rtt_d_ns"),
        mtu_bytes: int("mtu_bytes") as u32,
        history: int("history") as usize,
        min_rate_bps: int("min_rate_bps") as f64,
        max_rate_bps: int("max_rate_bps") as f64,
    }
}

/// Equal as numbers (so -0.0 == 0.0), or within 1e-12 relative: both sides are IEEE f64 in
/// the same order of operations, so in practice they are identical.
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fn check(name: &str) {
    let input = std::fs::read_to_string(fixtures().join(format!("{name}.csv"))).unwrap();
    let expected =
        std::fs::read_to_string(fixtures().join(format!("{name}.expected.csv"))).unwrap();
    let mut lines = input.lines();
    let p = params(lines.next().unwrap());
    assert_eq!(lines.next(), Some("event,t_ns,c_r,r_credit_bps,q_c_bytes"));
    let mut exp = expected.lines();
    assert_eq!(
        exp.next(),
        Some(
            "t_ns,epoch,n,rtt_d_ns,r_pre_eq_bps,q_pre_bytes,d_pre_ns,r_dqm_bps,token,dw,r_bar_bps"
        )
    );
    let mut d = Dqm::new(&p);
    let mut acks = 0;
    for (i, l) in lines.enumerate() {
        let f: Vec<&str> = l.split(',').collect();
        let t: u64 = f[1].parse().unwrap();
        match f[0] {
            "data" => d.on_data(t),
            "ack" => {
                let s = d.on_ack(
                    &p,
                    t,
                    f[2].parse().unwrap(),
                    f[3].parse::<u64>().unwrap() as f64,
                    f[4].parse().unwrap(),
                );
                let e: Vec<&str> = exp
                    .next()
                    .expect("fewer expected lines")
                    .split(',')
                    .collect();
                let ctx = format!("{name} line {}: {l}\n  ours {s:?}\n  oracle {e:?}", i + 3);
                assert_eq!(e[0].parse::<u64>().unwrap(), t, "{ctx}");
                assert_eq!(e[1] == "1", s.epoch, "{ctx}");
                assert_eq!(e[2].parse::<usize>().unwrap(), s.n, "{ctx}");
                assert_eq!(e[3].parse::<u64>().unwrap(), s.rtt_d_ns, "{ctx}");
                let fl = |k: usize| e[k].parse::<f64>().unwrap();
                assert!(close(fl(4), s.r_pre_eq_bps), "r_pre_eq {ctx}");
                assert!(close(fl(5), s.q_pre_bytes), "q_pre {ctx}");
                assert!(close(fl(6), s.d_pre_ns), "d_pre {ctx}");
                assert!(close(fl(7), s.r_dqm_bps), "r_dqm {ctx}");
                assert!(close(fl(8), s.token), "token {ctx}");
                assert_eq!(e[9].parse::<i64>().unwrap(), s.dw, "{ctx}");
                assert!(close(fl(10), s.r_bar_bps), "r_bar {ctx}");
                acks += 1;
            }
            other => panic!("{name}: unknown event {other}"),
        }
    }
    assert!(
        exp.next().is_none(),
        "{name}: more expected lines than ACKs"
    );
    assert!(acks > 100, "{name}: only {acks} ACKs");
}

#[test]
fn steady_matches_the_oracle() {
    check("steady");
}

#[test]
fn credit_changes_match_the_oracle() {
    check("credit_changes");
}

#[test]
fn edge_cases_match_the_oracle() {
    check("edge");
}
