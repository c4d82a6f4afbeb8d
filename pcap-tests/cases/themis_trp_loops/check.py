#!/usr/bin/env python3
"""themis_trp_loops oracle: python3 check.py OUTDIR.

Independent of longhaul. oracle/themis_trp_check.py runs the inputs through an independent model
of Algorithm 1 + appendix D + the recirculation port (oracle/themis_model.py) and requires every
data packet out of dc0 to leave exactly when the model says, unchanged, in PSN order per flow.
On top of that, this script pins the loop counts derived by hand from the paper (alpha = 5,
beta = 100 us, readings of trp.rs's module documentation as in themis_model.py), so a change of
the model is caught too:

  psn 0 (before any CNP): 0 loops; psn 1 (1 us after the first CNP, from CNP_Cache before the
  CNP_Store install): 1; the train psn 2-11 (500 ns apart, closer than one loop) after CNPs 2-8
  (CNP 7: 7 % 6 == 1, CNP 8: 8 % 7 == 1): 3 each; the train psn 12-21 more than beta after the
  last CNP: the first pass of psn 12 is still throttled (reading 5) and starts recovery, then each
  packet loops exactly once (appendix D), in order; psn 22 alone: 0 (recovered); second episode:
  alpha halved to 8 // 2 = 4 and cnp_num reset, so CNP 1 (1 % 4 == 1) gives loop_num 4 (psn 23,
  after CNP 3) and CNP 6 (6 % 5 == 1) gives 5 (psn 24). Without the halving the sixth CNP would
  not increment (6 % 9), without the reset CNP 3 (cnp_num 11, 11 % 5 == 1) would.

The unrelated flow (QPN 0x333) must leave within one frame time of its arrival (no loops).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from themis_trp_check import TrpRun  # noqa: E402

HAND = [0, 1] + [3] * 10 + [1] * 10 + [0, 4, 5]


def main(outdir):
    r = TrpRun("themis_trp_loops", HERE, outdir)
    fails = r.fails
    seen = r.compare()
    flow = sorted((k for k in r.expected if k[0][1] == 0x111), key=lambda k: k[1])
    model_loops = [r.expected[k][2] for k in flow]
    fails.expect(model_loops == HAND, f"model loop counts {model_loops} != hand-derived {HAND}")
    obs = [seen[k][2] if k in seen else None for k in flow]
    delays = [seen[k][1] - seen[k][0] if k in seen else None for k in flow]
    for k, d, loops in zip(flow, delays, HAND):
        ln = len(r.frames[k])
        fails.expect(d == loops * r.model.per_loop_ns(ln),
                     f"psn {k[1]}: delay {d} ns != {loops} x {r.model.per_loop_ns(ln)} ns")
    wire = r.model.ser(314 + 24, r.model.egress_bps)
    for k in r.expected:
        if k[0][1] == 0x333 and k in seen:
            arr, dep, _ = seen[k]
            fails.expect(0 <= dep - arr <= wire,
                         f"untouched flow psn {k[1]}: delay {dep - arr} ns (more than one frame time {wire})")
    flog = r.model.flows[("10.0.0.1", 0x111)].log
    print("themis_trp_loops: loops per PSN", obs)
    print("themis_trp_loops: delays (ns)", delays)
    print("themis_trp_loops: model state changes (t us, event, cnp_num, status, loop_num, alpha):")
    for t, what, n, st, ln, a in flog:
        print(f"  {r.rel(t) / 1000:8.3f} {what:8s} cnp_num={n} {st} loop_num={ln} alpha={a}")
    fails.done()


if __name__ == "__main__":
    main(sys.argv[1])
