#!/usr/bin/env python3
"""Writes the DQM traces that pipelines/tests/mlcc_dqm.rs replays, with mlcc_dqm.py's outputs:

    python3 pcap-tests/oracle/gen_mlcc_dqm_traces.py            # (re)write the files
    python3 pcap-tests/oracle/gen_mlcc_dqm_traces.py --check    # exit 1 if the files differ
    python3 pcap-tests/oracle/gen_mlcc_dqm_traces.py --out DIR  # write elsewhere

into pipelines/tests/fixtures/mlcc_dqm/: for each NAME, NAME.csv (the trace: mlcc_dqm.py's input
format) and NAME.expected.csv (`python3 mlcc_dqm.py NAME.csv`). Deterministic (no randomness but
random.Random(fixed seed)):

* steady: one flow at R_credit = 12.5 Gbit/s whose PFQ starts at 10 MB, in a closed loop: the
  PFQ's enqueue rate is the oracle's own R_bar output RTT_C earlier (R_credit before that),
  its dequeue rate R_credit; epochs every 20 us (RTT_D 17.7 to 19.5 us), 3 ACKs per epoch, 30 ms.
  The queue falls from 10 MB to 7.9 MB (it holds for the first RTT_C).
* credit_changes: R_credit stepping between 25, 10 and 40 Gbit/s, a random-walk queue (with a
  stretch at 0), 1-4 ACKs per epoch, jittered epochs; RTT_C = 2 ms, H = 128.
* edge: RTT_C = 1 ms (step = 8 Mbit/s per dw), H = 32, m = 3, max_rate = 40 Gbit/s:
  R_credit = 0 epochs (dw pushed up to the min_rate bound), Q_c = 0, data before the first ACK,
  RTT_D of 0 (not a measurement: kept), 1 ns, 5 us and 16 us (n = 62.5 clamped to H), 31.25 us
  (n = 32 = H), 32 us (31.25 -> 31), 40 us, 80 us (12.5 -> 13), 160 us (6.25 -> 6), 250 us,
  400 us (2.5 -> 3), 2 ms (0.5 -> 1), 3 ms (0.33 -> 0 -> 1); epochs without data (RTT_D kept),
  several data packets in one epoch (the first counts), dw falling to the min_rate bound
  (R_bar = min_rate exactly), C_R going back, a non-epoch ACK carrying another R_credit and Q_c
  (not used), more epochs than H, then R_credit = max_rate (dw_max = 0), above it (dw pushed
  down to its bound) and back below (dw pushed up to the min_rate bound); R_credit = 0 after
  non-zero credits under a large queue (R_DQM = max(0, -0.0)).
"""
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mlcc_dqm import DEFAULTS, TRACE_HEADER, Dqm, format_params, run_trace  # noqa: E402

OUT_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "pipelines", "tests", "fixtures", "mlcc_dqm"))


def trace_text(params, events):
    lines = [format_params(params), TRACE_HEADER]
    for e in events:
        if e[0] == "data":
            lines.append(f"data,{e[1]},,,")
        else:
            _, t, c, r, q = e
            lines.append(f"ack,{t},{c},{r},{q}")
    return "\n".join(lines) + "\n"


def check_times(events):
    ts = [e[1] for e in events]
    assert all(a <= b for a, b in zip(ts, ts[1:])), "trace times go back"


# ---------------------------------------------------------------------------------------------
# steady: the closed loop


def steady():
    params = dict(DEFAULTS)
    r_credit = 12_500_000_000
    q = 10_000_000.0               # PFQ bytes (fluid)
    rtt_c = params["rtt_c_ns"]
    dqm = Dqm(params)
    changes = []                   # (time the rate reaches the PFQ, enqueue rate bit/s)
    ci = 0                         # changes[:ci] are in effect
    rate_in = float(r_credit)      # the sender's rate before any R_bar arrived
    t_prev = 0
    events = []

    def advance(t):
        nonlocal q, t_prev, ci, rate_in
        while t_prev < t:
            nxt = changes[ci][0] if ci < len(changes) else t
            if nxt <= t_prev:
                rate_in = changes[ci][1]
                ci += 1
                continue
            end = min(nxt, t)
            q = max(0.0, q + (rate_in - r_credit) * (end - t_prev) / 8e9)
            t_prev = end
        while ci < len(changes) and changes[ci][0] <= t:
            rate_in = changes[ci][1]
            ci += 1

    for k in range(1500):                       # 1500 x 20 us = 30 ms
        te = k * 20_000
        sched = [(0, "ack"), (500 + (k % 7) * 300, "data"), (6_000, "ack"), (13_000, "ack")]
        sched.sort()
        for dt, kind in sched:
            t = te + dt
            advance(t)
            if kind == "data":
                events.append(("data", t))
                dqm.on_data(t)
            else:
                qc = int(math.floor(q + 0.5))
                events.append(("ack", t, k + 1, r_credit, qc))
                o = dqm.on_ack(t, k + 1, r_credit, qc)
                changes.append((t + rtt_c, o["r_bar_bps"]))
    check_times(events)
    return params, events


# ---------------------------------------------------------------------------------------------
# credit_changes


def credit_changes():
    params = dict(DEFAULTS, rtt_c_ns=2_000_000, history=128)
    rng = random.Random(20240501)
    rates = ([25_000_000_000] * 40 + [10_000_000_000] * 40 + [40_000_000_000] * 40
             + [25_000_000_000] * 15 + [10_000_000_000] * 10 + [40_000_000_000] * 5)
    events = []
    q = 3_000_000
    te = 1_000
    c = 7
    for k, r in enumerate(rates):
        c += 1
        n_acks = rng.randint(1, 4)
        evs = []
        for j in range(n_acks):
            if 60 <= k < 72:
                q = 0
            else:
                q = max(0, q + rng.randint(-250_000, 300_000))
            evs.append((te + j * 4_000, 1, ("ack", te + j * 4_000, c, r, q)))
        u = rng.random()
        if u >= 0.05:                               # 5 %: no data this epoch (RTT_D kept)
            td = te + rng.randint(0, 2_000)
            evs.append((td, 0, ("data", td)))
            if u >= 0.8:                            # a second data packet: not the first, ignored
                evs.append((td + 700, 0, ("data", td + 700)))
        evs.sort(key=lambda x: (x[0], -x[1]))       # at equal times the ACK first
        events.extend(e for _, _, e in evs)
        te += 20_000 + rng.randint(-3_000, 3_000)
    check_times(events)
    return params, events


# ---------------------------------------------------------------------------------------------
# edge


def edge():
    params = dict(DEFAULTS, m=3, rtt_c_ns=1_000_000, history=32, max_rate_bps=40_000_000_000)
    ev = []
    t = 0

    def ack(c, r, q, at=None):
        nonlocal t
        t = t if at is None else at
        ev.append(("ack", t, c, r, q))

    def data(at):
        nonlocal t
        t = at
        ev.append(("data", t))

    # A: R_credit = 0 (first ACK; data before it is ignored). dw is pushed up to
    # ceil(min_rate / step) = ceil(12.5) = 13.
    data(100)
    ack(1, 0, 0, at=1_000)
    ack(1, 0, 0, at=5_000)
    data(6_000)
    data(7_000)                                   # not the first: ignored
    ack(2, 0, 500_000, at=26_000)                 # RTT_D = 20000; mean(hist_credit) = 0, Q_pre > 0
    ack(2, 0, 700_000, at=30_000)
    # B: R_credit = 180 Mbit/s under a huge queue: R_DQM = 0, dw falls by 1 per ACK to
    # ceil((min_rate - R_credit) / step) = -10 where R_bar = min_rate exactly.
    data(31_000)
    ack(3, 180_000_000, 50_000_000, at=51_000)    # RTT_D = 20000
    for i in range(25):
        if i == 7:
            ack(3, 25_000_000_000, 0, at=52_000 + i * 500)   # non-epoch: fields not used
        else:
            ack(3, 180_000_000, 50_000_000 - i * 1000, at=52_000 + i * 500)
    # C: RTT_D of various sizes at R_credit = 10 Gbit/s (no data since 51000: RTT_D kept first).
    ack(4, 10_000_000_000, 2_000_000, at=100_000)             # no t_cd: RTT_D stays 20000
    ack(4, 10_000_000_000, 2_000_000, at=104_000)
    c = 4
    for gap, q in [(0, 0), (1, 1_500_000), (5_000, 1_200_000), (31_250, 0), (32_000, 3_000_000),
                   (40_000, 800_000), (400_000, 0), (2_000_000, 250_000), (3_000_000, 0),
                   (80_000, 9_000_000), (250_000, 0), (16_000, 600_000),
                   (160_000, 1_000_000)]:
        td = t + 10_000
        data(td)
        if gap > 0:
            data(td + 1)                          # not the first: ignored
        c += 1
        ack(c, 10_000_000_000, q, at=td + gap)    # RTT_D = gap (gap 0: not a measurement, kept)
        ack(c, 10_000_000_000, q + 1000, at=t + 2_000)
    # C_R going back: an epoch too (RTT_D kept: no data since the last epoch).
    ack(2, 10_000_000_000, 0, at=t + 20_000)
    ack(2, 10_000_000_000, 0, at=t + 3_000)
    # E: more epochs than H = 32 (hist_dqm keeps the last 32; n = round(1e6 / 20000) = 50 -> 32),
    # R_credit alternating 10 / 5 Gbit/s, Q_c a sawtooth through 0 (Q_pre clamped at 0 when
    # R_pre_eq < R_credit).
    c = 5
    for k in range(40):
        c += 1
        data(t + 1_000)
        r = 10_000_000_000 if (k // 5) % 2 == 0 else 5_000_000_000
        q = (k % 6) * 700_000
        ack(c, r, q, at=t + 19_000 + (k % 3) * 1_000)
        if k % 2 == 0:
            ack(c, r, q + 5_000, at=t + 4_000)
    # D: R_credit = max_rate (dw_max = 0), then above it (dw pushed down to
    # floor((40e9 - 50e9) / 8e6) = -1250), then back to 10 Gbit/s (dw pushed up to
    # ceil((1e8 - 1e10) / 8e6) = -1237).
    data(t + 1_000)
    ack(3, 40_000_000_000, 0, at=t + 20_000)
    for _ in range(5):
        ack(3, 40_000_000_000, 0, at=t + 3_000)
    data(t + 1_000)
    ack(4, 50_000_000_000, 0, at=t + 20_000)
    ack(4, 50_000_000_000, 0, at=t + 3_000)
    data(t + 1_000)
    ack(5, 10_000_000_000, 0, at=t + 20_000)
    ack(5, 10_000_000_000, 0, at=t + 3_000)
    # F: R_credit falling to 0 under a 60 MB queue while mean(hist_credit) > 0: D_pre > theta + D_t,
    # R_credit * (1 - (D_pre - D_t) / theta) = 0 * negative = -0.0, max(0, -0.0) printed 0.0.
    data(t + 1_000)
    ack(6, 0, 60_000_000, at=t + 20_000)
    ack(6, 0, 60_000_000, at=t + 3_000)
    ack(7, 0, 60_000_000, at=t + 20_000)
    check_times(ev)
    return params, ev


TRACES = (("steady", steady), ("credit_changes", credit_changes), ("edge", edge))


def build():
    """{file name: text} of every file."""
    files = {}
    for name, fn in TRACES:
        params, events = fn()
        text = trace_text(params, events)
        files[f"{name}.csv"] = text
        files[f"{name}.expected.csv"] = run_trace(text)
    return files


def main(argv):
    args = argv[1:]
    check = "--check" in args
    out = OUT_DIR
    if "--out" in args:
        out = args[args.index("--out") + 1]
    files = build()
    if check:
        bad = []
        for name, text in files.items():
            p = os.path.join(out, name)
            try:
                with open(p, newline="") as fh:
                    same = fh.read() == text
            except FileNotFoundError:
                same = False
            if not same:
                bad.append(name)
        if bad:
            print(f"gen_mlcc_dqm_traces.py --check: {', '.join(bad)} in {out} differ from a fresh "
                  f"generation; run python3 pcap-tests/oracle/gen_mlcc_dqm_traces.py")
            return 1
        print(f"gen_mlcc_dqm_traces.py --check: OK ({len(files)} files)")
        return 0
    os.makedirs(out, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(out, name), "w", newline="") as fh:
            fh.write(text)
    print(f"wrote {len(files)} files into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
