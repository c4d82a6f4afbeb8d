#!/usr/bin/env python3
"""Independent model of MLCC's DQM (paper 001, section 3.3.1; equations 1-9, Algorithm 2).

    python3 mlcc_dqm.py TRACE.csv        # the output CSV on stdout

Written from docs/mlcc.md ("DQM, exactly as implemented"), never from longhaul's Rust code
(pipelines/src/mlcc/dqm.rs); pipelines/tests/mlcc_dqm.rs compares both on the traces of
pipelines/tests/fixtures/mlcc_dqm/ (made by gen_mlcc_dqm_traces.py).

Units: rates in bits per second (float), queues in bytes, times in ns; all arithmetic is Python
float (IEEE f64), in the order written below (left to right), so that a Rust f64 implementation
doing the same operations in the same order gets bit-identical numbers.

Per flow (one Dqm object = one inter-DC flow at its receiver-side DCI):

* `on_data(t)`: a data packet carrying the current C_D left the PFQ at t: t_cd = t if C_D is set
  and t_cd is unset (the start of the RTT_D measurement).
* `on_ack(t, c_r, r_credit, q_c)`: an ACK of the flow with the receiver's C_R and R_credit, Q_c
  the PFQ's bytes. It is an epoch when C_D is unset (the first ACK) or C_R != C_D. At an epoch:
    1. if t_cd is set: RTT_D = t - t_cd (kept unchanged when that is <= 0); C_D = C_R; t_cd unset
    2. R_credit = the ACK's; hist_credit += [R_credit] (last m)
    3. n = min(max(floor(RTT_C / RTT_D + 0.5), 1), H)
    4. R_pre_eq = mean of the last min(n, len) of hist_dqm (R_credit if empty)
    5. Q_pre = max(0, (R_pre_eq - R_credit) * RTT_C / 8e9 + Q_c); if Q_pre == 0 and dw < 0: dw = 0
    6. D_pre = 0 if Q_pre == 0; theta + D_t if mean(hist_credit) == 0; else Q_pre * 8e9 / mean
    7. R_DQM = max(0, R_credit * (1 - (D_pre - D_t) / theta))
    8. hist_dqm += [clamp(R_credit + dw * step, min_rate, max_rate)] (last H; dw not clamped)
  Then, at every ACK (epochs included), one token step:
    inc = min(alpha * R_DQM / R_credit, 1) (R_credit == 0: 1 if R_DQM > 0 else 0); token += inc;
    token >= 1: dw += 1, token -= 1; else dw -= 1;
    dw = min(max(dw, ceil((min_rate - R_credit) / step)), floor((max_rate - R_credit) / step));
    R_bar = min(max(R_credit + dw * step, min_rate), max_rate)    (the ACK's output)
  with step = MTU * 8e9 / RTT_C (bit/s per unit of dw). A non-epoch ACK's R_credit and Q_c
  fields are not used: R_credit is the flow's state, set at epochs (step 2).

Sums (means) run from the oldest to the newest entry, starting from 0.0.

Trace format (input):
    # theta_ns=18000000 d_t_ns=1000000 m=5 alpha=0.5 rtt_c_ns=6000000 rtt_d_ns=20000 ...
    event,t_ns,c_r,r_credit_bps,q_c_bytes
    data,T,,,
    ack,T,C,R,Q
Output: `t_ns,epoch,n,rtt_d_ns,r_pre_eq_bps,q_pre_bytes,d_pre_ns,r_dqm_bps,token,dw,r_bar_bps`,
one line per ACK; floats as repr() (shortest round-trip), ints as ints, epoch 1/0.
"""
import math
import sys
from collections import deque

PARAM_KEYS = ("theta_ns", "d_t_ns", "m", "alpha", "rtt_c_ns", "rtt_d_ns", "mtu_bytes", "history",
              "min_rate_bps", "max_rate_bps")
DEFAULTS = dict(theta_ns=18_000_000, d_t_ns=1_000_000, m=5, alpha=0.5, rtt_c_ns=6_000_000,
                rtt_d_ns=20_000, mtu_bytes=1000, history=512, min_rate_bps=100_000_000,
                max_rate_bps=100_000_000_000)
TRACE_HEADER = "event,t_ns,c_r,r_credit_bps,q_c_bytes"
OUT_COLUMNS = ("t_ns", "epoch", "n", "rtt_d_ns", "r_pre_eq_bps", "q_pre_bytes", "d_pre_ns",
               "r_dqm_bps", "token", "dw", "r_bar_bps")


def _sum(xs):
    """Plain left-to-right float sum from 0.0 (not math.fsum, not Python 3.12's compensated sum)."""
    s = 0.0
    for x in xs:
        s = s + x
    return s


def _round_half_away(x):
    # x > 0 here (RTT_C / RTT_D with both > 0).
    return math.floor(x + 0.5)


class Dqm:
    def __init__(self, params=None):
        p = dict(DEFAULTS)
        p.update(params or {})
        unknown = set(p) - set(PARAM_KEYS)
        if unknown:
            raise ValueError(f"unknown DQM parameters {sorted(unknown)}")
        self.theta = float(p["theta_ns"])
        self.d_t = float(p["d_t_ns"])
        self.m = int(p["m"])
        self.alpha = float(p["alpha"])
        self.rtt_c = float(p["rtt_c_ns"])
        self.mtu = float(p["mtu_bytes"])
        self.h = int(p["history"])
        self.min_rate = float(p["min_rate_bps"])
        self.max_rate = float(p["max_rate_bps"])
        if self.m < 1 or self.h < 1 or self.theta <= 0 or self.rtt_c <= 0 or p["rtt_d_ns"] <= 0:
            raise ValueError(f"bad DQM parameters {p}")
        # bit/s per unit of dw (eq. 9: dw * MTU / RTT_C in bytes/s)
        self.step = self.mtu * 8e9 / self.rtt_c
        # state
        self.c_d = None
        self.t_cd = None
        self.rtt_d = p["rtt_d_ns"]          # int ns (the measured values are int differences)
        self.r_credit = None
        self.hist_credit = deque(maxlen=self.m)
        self.hist_dqm = deque(maxlen=self.h)
        self.r_dqm = None
        self.token = 0.0
        self.dw = 0
        self.r_bar = None
        # last epoch's intermediate values (reported on non-epoch ACKs too)
        self.n = None
        self.r_pre_eq = None
        self.q_pre = None
        self.d_pre = None

    def on_data(self, t_ns):
        if self.c_d is not None and self.t_cd is None:
            self.t_cd = t_ns

    def _rbar(self, dw):
        return min(max(self.r_credit + dw * self.step, self.min_rate), self.max_rate)

    def _epoch(self, t_ns, c_r, r_credit, q_c):
        # 1. RTT_D from the first data packet carrying the previous C_D to this ACK
        if self.t_cd is not None:
            meas = t_ns - self.t_cd
            if meas > 0:
                self.rtt_d = meas
        self.c_d = c_r
        self.t_cd = None
        # 2.
        self.r_credit = float(r_credit)
        self.hist_credit.append(self.r_credit)
        # 3. eq. 1
        self.n = min(max(_round_half_away(self.rtt_c / float(self.rtt_d)), 1), self.h)
        # 4. eq. 2
        if self.hist_dqm:
            k = min(self.n, len(self.hist_dqm))
            last = list(self.hist_dqm)[-k:]
            self.r_pre_eq = _sum(last) / k
        else:
            self.r_pre_eq = self.r_credit
        # 5. eq. 3 (bits/s * ns / 8e9 = bytes)
        self.q_pre = max(0.0, (self.r_pre_eq - self.r_credit) * self.rtt_c / 8e9 + float(q_c))
        # 5b. no queue predicted: a negative dw (a cut left over from a drained queue) goes to 0
        if self.q_pre == 0.0 and self.dw < 0:
            self.dw = 0
        # 6. eq. 4
        mean_credit = _sum(self.hist_credit) / len(self.hist_credit)
        if self.q_pre == 0.0:
            self.d_pre = 0.0
        elif mean_credit == 0.0:
            self.d_pre = self.theta + self.d_t
        else:
            self.d_pre = self.q_pre * 8e9 / mean_credit
        # 7. eq. 5, on both sides of D_t
        self.r_dqm = max(0.0, self.r_credit * (1.0 - (self.d_pre - self.d_t) / self.theta))
        # 8. the suggestion rate with the new R_credit and the current dw (dw itself unchanged)
        self.hist_dqm.append(self._rbar(self.dw))

    def _token_step(self):
        if self.r_credit > 0.0:
            inc = min(self.alpha * self.r_dqm / self.r_credit, 1.0)
        else:
            inc = 1.0 if self.r_dqm > 0.0 else 0.0
        self.token = self.token + inc
        if self.token >= 1.0:
            self.dw += 1
            self.token = self.token - 1.0
        else:
            self.dw -= 1
        dw_min = math.ceil((self.min_rate - self.r_credit) / self.step)
        dw_max = math.floor((self.max_rate - self.r_credit) / self.step)
        self.dw = min(max(self.dw, dw_min), dw_max)
        self.r_bar = self._rbar(self.dw)

    def on_ack(self, t_ns, c_r, r_credit_bps, q_c_bytes):
        epoch = self.c_d is None or c_r != self.c_d
        if epoch:
            self._epoch(t_ns, c_r, r_credit_bps, q_c_bytes)
        self._token_step()
        return dict(t_ns=t_ns, epoch=epoch, n=self.n, rtt_d_ns=self.rtt_d, r_pre_eq_bps=self.r_pre_eq,
                    q_pre_bytes=self.q_pre, d_pre_ns=self.d_pre, r_dqm_bps=self.r_dqm,
                    token=self.token, dw=self.dw, r_bar_bps=self.r_bar)


def _num(s):
    try:
        return int(s)
    except ValueError:
        return float(s)


def parse_params(line):
    line = line.strip()
    if not line.startswith("#"):
        raise ValueError(f"first line must be '# key=value ...', got {line!r}")
    p = {}
    for kv in line[1:].split():
        k, _, v = kv.partition("=")
        if k not in PARAM_KEYS or not v:
            raise ValueError(f"bad parameter {kv!r}")
        p[k] = float(v) if k == "alpha" else _num(v)
    missing = [k for k in PARAM_KEYS if k not in p]
    if missing:
        raise ValueError(f"missing parameters {missing}")
    return p


def format_params(p):
    return "# " + " ".join(f"{k}={p[k]}" for k in PARAM_KEYS)


def fmt(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def format_row(o):
    return ",".join(fmt(o[c]) for c in OUT_COLUMNS)


def run_trace(text):
    """Trace text -> output CSV text."""
    lines = text.splitlines()
    if len(lines) < 2:
        raise ValueError("a trace needs the parameter line and the header")
    dqm = Dqm(parse_params(lines[0]))
    if lines[1].strip() != TRACE_HEADER:
        raise ValueError(f"line 2 must be {TRACE_HEADER!r}, got {lines[1]!r}")
    out = [",".join(OUT_COLUMNS)]
    for i, line in enumerate(lines[2:], start=3):
        if not line.strip():
            continue
        f = line.strip().split(",")
        if len(f) != 5:
            raise ValueError(f"line {i}: expected 5 fields: {line!r}")
        if f[0] == "data":
            dqm.on_data(int(f[1]))
        elif f[0] == "ack":
            out.append(format_row(dqm.on_ack(int(f[1]), int(f[2]), int(f[3]), int(f[4]))))
        else:
            raise ValueError(f"line {i}: unknown event {f[0]!r}")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    with open(argv[1]) as fh:
        sys.stdout.write(run_trace(fh.read()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
