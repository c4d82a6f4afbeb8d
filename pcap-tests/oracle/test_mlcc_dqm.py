#!/usr/bin/env python3
"""Self-tests of oracle/mlcc_dqm.py (plain asserts, standard library only):
python3 pcap-tests/oracle/test_mlcc_dqm.py

Hand-computed cases of docs/mlcc.md "DQM, exactly as implemented": the first epoch, the token's
0.5/0 alternation at R_DQM = R_credit, a large queue, eq. 1's rounding and clamp, RTT_D measured
from the first data packet to the next epoch, eq. 2 over the last n suggestion rates, eq. 4 over
the last m credits, a negative dw lifted to 0 when no queue is predicted (step 5b), the dw clamps
at min_rate and max_rate, what a non-epoch ACK does not change,
the trace CLI, and gen_mlcc_dqm_traces.py's determinism.

Default parameters unless a test says otherwise: theta = 18 ms, D_t = 1 ms, m = 5, alpha = 0.5,
RTT_C = 6 ms, RTT_D = 20 us, MTU = 1000 B, H = 512, min_rate = 100 Mbit/s, max_rate = 100 Gbit/s;
step = MTU * 8e9 / RTT_C = 8e12 / 6e6 = 1333333.33 bit/s per unit of dw.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mlcc_dqm as md  # noqa: E402
import gen_mlcc_dqm_traces as gen  # noqa: E402

STEP = 8e12 / 6e6            # 1333333.333... bit/s


def close(a, b, rel=1e-12):
    assert abs(a - b) <= rel * max(abs(a), abs(b), 1.0), (a, b)


def test_first_epoch_empty_queue():
    d = md.Dqm()
    o = d.on_ack(0, 1, 12_500_000_000, 0)
    assert o["epoch"] is True
    # n = round(6e6 / 20000) = 300; no suggestion rate yet: R_pre_eq = R_credit.
    assert o["n"] == 300 and o["rtt_d_ns"] == 20_000
    assert o["r_pre_eq_bps"] == 12.5e9
    # Q_pre = max(0, 0 * 6e6 / 8e9 + 0) = 0 -> D_pre = 0
    assert o["q_pre_bytes"] == 0.0 and o["d_pre_ns"] == 0.0
    # R_DQM = 12.5e9 * (1 - (0 - 1e6) / 18e6) = 12.5e9 * 19 / 18 = 13194444444.44
    close(o["r_dqm_bps"], 13_194_444_444.444444)
    # inc = min(0.5 * 19 / 18, 1) = 0.52778 < 1 -> dw = -1
    close(o["token"], 0.527777777777778)
    assert o["dw"] == -1
    # R_bar = 12.5e9 - 1333333.33 = 12498666666.67
    close(o["r_bar_bps"], 12_498_666_666.666667)
    # step 8 appended R_bar with dw = 0 (before the token step): 12.5e9
    assert list(d.hist_dqm) == [12.5e9] and list(d.hist_credit) == [12.5e9]
    # next ACK (same C_R): token 1.05556 -> dw 0, token 0.05556; R_bar = R_credit
    o = d.on_ack(5_000, 1, 12_500_000_000, 0)
    assert o["epoch"] is False and o["dw"] == 0 and o["r_bar_bps"] == 12.5e9
    close(o["token"], 0.0555555555555556, rel=1e-9)
    # the epoch's values are reported again
    close(o["r_dqm_bps"], 13_194_444_444.444444)
    assert o["n"] == 300 and o["q_pre_bytes"] == 0.0
    o = d.on_ack(10_000, 1, 12_500_000_000, 0)      # token 0.58333 -> dw -1
    assert o["dw"] == -1
    close(o["token"], 0.583333333333333, rel=1e-9)


def test_token_alternates_at_the_fair_rate():
    # R_credit = 8 Gbit/s, Q_c = 1 MB: Q_pre = 1e6 B, D_pre = 1e6 * 8e9 / 8e9 = 1e6 = D_t
    # -> R_DQM = R_credit exactly, inc = 0.5: token 0.5, 0.0, 0.5, ...; dw -1, 0, -1, 0 (net 0).
    d = md.Dqm()
    outs = [d.on_ack(0, 1, 8_000_000_000, 1_000_000)]
    outs += [d.on_ack(1000 * i, 1, 8_000_000_000, 1_000_000) for i in range(1, 6)]
    o = outs[0]
    assert o["q_pre_bytes"] == 1e6 and o["d_pre_ns"] == 1e6 and o["r_dqm_bps"] == 8e9
    assert [o["token"] for o in outs] == [0.5, 0.0] * 3
    assert [o["dw"] for o in outs] == [-1, 0] * 3
    assert [o["r_bar_bps"] for o in outs] == [8e9 - STEP, 8e9] * 3
    # A second epoch after an even number of ACKs: step 8 appended 8e9 twice, R_pre_eq = 8e9.
    o = d.on_ack(20_000, 2, 8_000_000_000, 1_000_000)
    assert o["epoch"] and o["r_pre_eq_bps"] == 8e9 and o["r_dqm_bps"] == 8e9
    assert (o["token"], o["dw"]) == (0.5, -1)
    assert list(d.hist_dqm) == [8e9, 8e9]


def test_large_queue_makes_dw_fall():
    # R_credit = 10 Gbit/s, Q_c = 20 MB: Q_pre = 2e7 B; D_pre = 2e7 * 8e9 / 1e10 = 16e6 ns > D_t;
    # R_DQM = 1e10 * (1 - 15e6 / 18e6) = 1e10 / 6 = 1666666666.67 < R_credit;
    # inc = 0.5 / 6 = 1/12: dw falls by 1 for the 11 ACKs before the token reaches ~1.
    d = md.Dqm()
    outs = [d.on_ack(0, 1, 10_000_000_000, 20_000_000)]
    o = outs[0]
    assert o["q_pre_bytes"] == 2e7 and o["d_pre_ns"] == 16e6
    close(o["r_dqm_bps"], 1_666_666_666.6666667)
    assert o["d_pre_ns"] > 1e6 and o["r_dqm_bps"] < 1e10
    outs += [d.on_ack(1000 * i, 1, 10_000_000_000, 20_000_000) for i in range(1, 24)]
    assert [o["dw"] for o in outs[:11]] == list(range(-1, -12, -1))
    close(outs[10]["token"], 11 / 12, rel=1e-9)
    # R_bar after 11 ACKs = 1e10 - 11 * 1333333.33 = 9985333333.33
    close(outs[10]["r_bar_bps"], 9_985_333_333.333333)
    # over 24 ACKs: 22 decrements and 2 increments at most: dw = -20 (or -22 if rounding delays
    # the 2nd crossing)
    assert outs[-1]["dw"] in (-20, -22), outs[-1]["dw"]
    assert all(o["r_bar_bps"] < 1e10 for o in outs)


def test_n_is_rounded_and_clamped():
    # n = min(max(floor(6e6 / RTT_D + 0.5), 1), H)
    for rtt_d, n in [(20_000, 300), (1, 512), (11_730, 512), (11_742, 511), (1_600_000, 4),
                     (2_400_000, 3),          # 2.5 -> 3 (half away from zero)
                     (4_000_000, 2),          # 1.5 -> 2
                     (7_000_000, 1),          # 0.857 -> 1
                     (12_000_000, 1),         # 0.5 -> 1
                     (60_000_000, 1)]:        # 0.1 -> 0 -> clamped to 1
        o = md.Dqm(dict(rtt_d_ns=rtt_d)).on_ack(0, 1, 1_000_000_000, 0)
        assert o["n"] == n, (rtt_d, o["n"], n)
    o = md.Dqm(dict(rtt_d_ns=100, history=7)).on_ack(0, 1, 1_000_000_000, 0)
    assert o["n"] == 7


def test_rtt_d_from_data_to_the_next_epoch():
    d = md.Dqm()
    d.on_data(500)                                    # C_D unset: no measurement starts
    assert d.t_cd is None
    o = d.on_ack(1_000, 1, 10_000_000_000, 0)         # first ACK: epoch, nothing measured
    assert o["epoch"] and o["rtt_d_ns"] == 20_000 and o["n"] == 300
    d.on_data(2_000)                                  # first data carrying C_D = 1: t_cd = 2000
    d.on_data(3_000)                                  # not the first: ignored
    o = d.on_ack(10_000, 1, 10_000_000_000, 0)        # same C_R: no epoch, RTT_D unchanged
    assert not o["epoch"] and o["rtt_d_ns"] == 20_000
    o = d.on_ack(32_000, 2, 10_000_000_000, 0)        # epoch: RTT_D = 32000 - 2000 = 30000
    assert o["epoch"] and o["rtt_d_ns"] == 30_000 and o["n"] == 200
    assert d.c_d == 2 and d.t_cd is None
    o = d.on_ack(60_000, 3, 10_000_000_000, 0)        # no data since: RTT_D kept
    assert o["epoch"] and o["rtt_d_ns"] == 30_000
    d.on_data(70_000)
    o = d.on_ack(70_000, 4, 10_000_000_000, 0)        # measured 0: kept (no division by 0)
    assert o["epoch"] and o["rtt_d_ns"] == 30_000 and o["n"] == 200 and d.t_cd is None
    d.on_data(71_000)
    o = d.on_ack(71_001, 5, 10_000_000_000, 0)        # 1 ns: n = 6e6 -> H
    assert o["rtt_d_ns"] == 1 and o["n"] == 512
    o = d.on_ack(80_000, 4, 10_000_000_000, 0)        # C_R going back differs from C_D: epoch
    assert o["epoch"] and d.c_d == 4


def test_r_pre_eq_over_the_last_n_and_d_pre_over_m():
    # RTT_D = 3 ms -> n = 2, no data (RTT_D never re-measured). Q_c = 0 throughout.
    d = md.Dqm(dict(rtt_d_ns=3_000_000))
    o = d.on_ack(0, 1, 10_000_000_000, 0)
    # hist_dqm empty: R_pre_eq = 1e10; step 8 appends 1e10 (dw 0); token 0.52778, dw -1
    assert o["n"] == 2 and o["r_pre_eq_bps"] == 1e10 and o["dw"] == -1
    o = d.on_ack(1_000, 2, 20_000_000_000, 0)
    # R_pre_eq = mean([1e10]) = 1e10; Q_pre = max(0, (1e10 - 2e10) * 6e6 / 8e9) = max(0, -7.5e6) = 0,
    # so step 5b lifts dw from -1 to 0; step 8 appends 2e10 + 0 * step = 2e10;
    # token 1.05556 -> dw 1, token 0.05556
    assert o["r_pre_eq_bps"] == 1e10 and o["q_pre_bytes"] == 0.0 and o["d_pre_ns"] == 0.0
    assert o["dw"] == 1
    assert d.hist_dqm[-1] == 2e10
    o = d.on_ack(2_000, 3, 30_000_000_000, 0)
    # R_pre_eq = (1e10 + 2e10) / 2 = 1.5e10; Q_pre = 0, dw 1 stays (5b lifts only a negative dw);
    # step 8 appends 3e10 + 1 * step = 30001333333.33; token 0.58333 -> dw 0
    assert o["r_pre_eq_bps"] == 1.5e10 and o["dw"] == 0
    close(d.hist_dqm[-1], 30_001_333_333.333333)
    o = d.on_ack(3_000, 4, 10_000_000_000, 0)
    # R_pre_eq = mean of the LAST 2 = (2e10 + 30001333333.33) / 2 = 25000666666.67 (1e10 left out)
    close(o["r_pre_eq_bps"], 25_000_666_666.666667)
    # Q_pre = (25000666666.67 - 1e10) * 6e6 / 8e9 = 15000666666.67 * 7.5e-4 = 11250500 B
    close(o["q_pre_bytes"], 11_250_500.0)
    # D_pre = 11250500 * 8e9 / mean(1e10, 2e10, 3e10, 1e10) = 9.0004e16 / 1.75e10 = 5143085.71 ns
    close(o["d_pre_ns"], 5_143_085.7142857143)
    # R_DQM = 1e10 * (1 - 4143085.7143 / 18e6) = 7698285714.29
    close(o["r_dqm_bps"], 7_698_285_714.2857143)


def test_d_pre_uses_the_last_m_credits():
    # m = 2, RTT_D = 6 ms -> n = 1 (R_pre_eq = the last suggestion rate).
    d = md.Dqm(dict(m=2, rtt_d_ns=6_000_000))
    d.on_ack(0, 1, 4_000_000_000, 0)                  # dw -> -1 (inc 0.52778)
    d.on_ack(1_000, 2, 8_000_000_000, 0)              # Q_pre 0: dw 0 (5b); step 8: 8e9; dw -> 1
    o = d.on_ack(2_000, 3, 12_000_000_000, 4_000_000)
    # R_pre_eq = 8e9; Q_pre = (8e9 - 12e9) * 6e6 / 8e9 + 4000000 = -3000000 + 4000000 = 1e6 B
    assert o["r_pre_eq_bps"] == 8e9
    close(o["q_pre_bytes"], 1_000_000.0, rel=1e-9)
    # D_pre = 1e6 * 8e9 / mean(8e9, 12e9) = 8e15 / 1e10 = 800000 ns (m = 5 would give 1e6)
    close(o["d_pre_ns"], 800_000.0, rel=1e-9)
    # R_DQM = 12e9 * (1 + 200000 / 18e6) = 12133333333.33
    close(o["r_dqm_bps"], 12_133_333_333.333333, rel=1e-9)
    assert list(d.hist_credit) == [8e9, 12e9]


def test_no_predicted_queue_lifts_a_negative_dw():
    # A deep queue drives dw down; once the queue is gone (Q_c 0, the suggestions below R_credit:
    # Q_pre 0) the next epoch lifts dw to 0: R_bar = R_credit, not a leftover cut below it.
    d = md.Dqm(dict(rtt_d_ns=6_000_000))               # n = 1
    d.on_ack(0, 1, 10_000_000_000, 50_000_000)
    for k in range(20):
        o = d.on_ack(1 + k, 1, 10_000_000_000, 0)    # non-epoch ACKs: dw falls
    assert o["dw"] < -10
    o = d.on_ack(100, 2, 10_000_000_000, 0)
    assert o["q_pre_bytes"] == 0.0
    # 5b: dw 0, then this ACK's token step (token 0 + 0.52778 < 1): dw -1, R_bar one step below
    # R_credit (without 5b: dw -22)
    assert o["dw"] == -1
    close(o["r_bar_bps"], 1e10 - d.step)


def test_dw_clamped_at_min_rate():
    # RTT_C = 1 ms: step = 1000 * 8e9 / 1e6 = 8e6 bit/s. R_credit = 180 Mbit/s under 50 MB:
    # D_pre = 5e7 * 8e9 / 1.8e8 = 2.2e9 ns -> R_DQM = max(0, negative) = 0 -> inc = 0:
    # dw -1 per ACK down to ceil((1e8 - 1.8e8) / 8e6) = -10, where R_bar = 1.8e8 - 8e7 = 1e8.
    p = dict(rtt_c_ns=1_000_000)
    d = md.Dqm(p)
    outs = [d.on_ack(1000 * i, 1, 180_000_000, 50_000_000) for i in range(15)]
    assert outs[0]["r_dqm_bps"] == 0.0 and all(o["token"] == 0.0 for o in outs)
    assert [o["dw"] for o in outs] == list(range(-1, -11, -1)) + [-10] * 5
    assert outs[9]["r_bar_bps"] == 1e8 and outs[-1]["r_bar_bps"] == 1e8
    # R_credit = 0: R_DQM = 0, inc = 0, and the bound ceil((1e8 - 0) / 8e6) = ceil(12.5) = 13
    # pushes dw UP from -1 to 13: R_bar = 13 * 8e6 = 1.04e8.
    d = md.Dqm(p)
    o = d.on_ack(0, 1, 0, 0)
    assert (o["r_dqm_bps"], o["token"], o["dw"], o["r_bar_bps"]) == (0.0, 0.0, 13, 1.04e8)
    assert d.hist_dqm[-1] == 1e8                      # step 8: clamp(0 + 0 * step) = min_rate
    # with a queue: mean(hist_credit) = 0 and Q_pre > 0 -> D_pre = theta + D_t = 19e6
    # Q_pre = (1e8 - 0) * 1e6 / 8e9 + 500000 = 12500 + 500000 = 512500
    o = d.on_ack(20_000, 2, 0, 500_000)
    assert o["q_pre_bytes"] == 512_500.0 and o["d_pre_ns"] == 19e6 and o["r_dqm_bps"] == 0.0
    assert o["dw"] == 13


def test_dw_clamped_at_max_rate():
    p = dict(rtt_c_ns=1_000_000, max_rate_bps=40_000_000_000)
    # R_credit = max_rate, empty queue: inc = 0.52778, dw never above floor(0 / 8e6) = 0.
    d = md.Dqm(p)
    outs = [d.on_ack(1000 * i, 1, 40_000_000_000, 0) for i in range(40)]
    assert all(o["dw"] <= 0 and o["r_bar_bps"] <= 4e10 for o in outs)
    assert any(o["dw"] == 0 for o in outs) and outs[-1]["r_bar_bps"] in (4e10, 4e10 - 8e6)
    # R_credit above max_rate: dw pushed down to floor(-1e10 / 8e6) = -1250, R_bar = max_rate.
    o = md.Dqm(p).on_ack(0, 1, 50_000_000_000, 0)
    assert o["dw"] == -1250 and o["r_bar_bps"] == 4e10


def test_non_epoch_ack_fields_not_used():
    # R_credit and Q_c are read at epochs only (docs/mlcc.md step 2): a non-epoch ACK carrying
    # other values changes nothing.
    a, b = md.Dqm(), md.Dqm()
    for d in (a, b):
        d.on_ack(0, 1, 10_000_000_000, 3_000_000)
        d.on_data(1_000)
    oa = a.on_ack(5_000, 1, 10_000_000_000, 3_000_000)
    ob = b.on_ack(5_000, 1, 40_000_000_000, 0)
    assert oa == ob
    assert a.on_ack(21_000, 2, 10_000_000_000, 0) == b.on_ack(21_000, 2, 10_000_000_000, 0)


TRACE = """# theta_ns=18000000 d_t_ns=1000000 m=5 alpha=0.5 rtt_c_ns=6000000 rtt_d_ns=20000 mtu_bytes=1000 history=512 min_rate_bps=100000000 max_rate_bps=100000000000
event,t_ns,c_r,r_credit_bps,q_c_bytes
data,0,,,
ack,1000,1,12500000000,0
data,2000,,,
ack,5000,1,12500000000,0
ack,27000,2,12500000000,3000000
"""


def test_cli_and_formats():
    with tempfile.TemporaryDirectory() as td:
        p = os.path.join(td, "t.csv")
        with open(p, "w") as fh:
            fh.write(TRACE)
        r = subprocess.run([sys.executable, os.path.join(HERE, "mlcc_dqm.py"), p],
                           capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == md.run_trace(TRACE)
    lines = r.stdout.splitlines()
    assert lines[0] == ("t_ns,epoch,n,rtt_d_ns,r_pre_eq_bps,q_pre_bytes,d_pre_ns,r_dqm_bps,"
                        "token,dw,r_bar_bps")
    assert len(lines) == 4
    assert lines[1].startswith("1000,1,300,20000,12500000000.0,0.0,0.0,13194444444.44444")
    assert lines[1].endswith(",-1,12498666666.666666")
    assert lines[2].startswith("5000,0,300,20000,12500000000.0,0.0,0.0,")
    assert lines[2].endswith(",0,12500000000.0")
    # RTT_D = 27000 - 2000 = 25000 -> n = 240
    assert lines[3].startswith("27000,1,240,25000,")
    # every float column round-trips and equals the class's output
    d = md.Dqm(md.parse_params(TRACE.splitlines()[0]))
    d.on_data(0)
    want = [d.on_ack(1000, 1, 12_500_000_000, 0)]
    d.on_data(2000)
    want += [d.on_ack(5000, 1, 12_500_000_000, 0), d.on_ack(27000, 2, 12_500_000_000, 3_000_000)]
    for line, w in zip(lines[1:], want):
        f = line.split(",")
        assert int(f[0]) == w["t_ns"] and f[1] == ("1" if w["epoch"] else "0")
        assert int(f[2]) == w["n"] and int(f[3]) == w["rtt_d_ns"] and int(f[9]) == w["dw"]
        for i, k in [(4, "r_pre_eq_bps"), (5, "q_pre_bytes"), (6, "d_pre_ns"), (7, "r_dqm_bps"),
                     (8, "token"), (10, "r_bar_bps")]:
            assert float(f[i]) == w[k] and f[i] == repr(w[k]), (k, f[i], w[k])


def test_bad_traces_refused():
    for bad in ["event,t_ns,c_r,r_credit_bps,q_c_bytes\n",                      # no parameters
                "# theta_ns=1 d_t_ns=1\nevent,t_ns,c_r,r_credit_bps,q_c_bytes\n",   # missing keys
                TRACE.replace("alpha=0.5", "alpha=0.5 foo=1"),
                TRACE.replace("event,t_ns", "evt,t_ns"),
                TRACE + "nack,1,2,3,4\n"]:
        try:
            md.run_trace(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_generator_is_deterministic_and_steady_drains():
    a, b = gen.build(), gen.build()
    assert a == b
    assert sorted(a) == sorted(f"{n}{s}" for n in ("steady", "credit_changes", "edge")
                               for s in (".csv", ".expected.csv"))
    for name in ("steady", "credit_changes", "edge"):
        assert md.run_trace(a[f"{name}.csv"]) == a[f"{name}.expected.csv"]
    acks = [l.split(",") for l in a["steady.csv"].splitlines()[2:] if l.startswith("ack")]
    assert len(acks) <= 5000 and {l[3] for l in acks} == {"12500000000"}
    qs = [int(l[4]) for l in acks]
    assert qs[0] == 10_000_000 and qs[-1] < 9_000_000
    assert all(x >= y for x, y in zip(qs, qs[1:])), "the closed loop's queue only falls"


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    failed = 0
    for name, fn in tests:
        try:
            fn()
            print(f"ok   {name}")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {name}: {e}")
        except Exception as e:  # a crash of the oracle is a failure too
            failed += 1
            print(f"FAIL {name}: {type(e).__name__}: {e}")
    print(f"{len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
