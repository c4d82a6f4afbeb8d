#!/usr/bin/env python3
"""themis_alg1_trace oracle: python3 check.py OUTDIR.

Replays Algorithm 1 (paper 000, appendix B) step by step in Python over the case's CNPs and data
packets, and requires each data packet's observed delay through the switch to be exactly its loop
count x one trip round the recirculation port (serialization at recirc_rate_gbps + loop_delay_ns).

Two independent derivations of the loop count, which must agree with each other and with the
output: (1) `step_trace` below, Algorithm 1 evaluated once per input packet (no recirculation),
where a data packet gets loop_num loops when the flow is throttled, 0 when normal or recovering in
order; (2) the event-driven model in oracle/themis_model.py that also runs the recirculation port
and appendix D pass by pass (oracle/themis_trp_check.py). Every data packet in this trace has
left before the next event, so the two coincide except for the packet that starts a recovery,
handled as below.

Deliberate readings of the pseudocode, as pipelines/src/themis/trp.rs documents them (module
documentation, "Where the paper is ambiguous"), followed here:
- line 5 `cnp_num % alpha == 1` literally (trp.rs point 1): with alpha0 = 5, loop_num grows at
  CNPs 1, 7, 8, 9, ...;
- lines 17-21 are a transition, run once when a throttled flow's quiet period exceeds beta, and
  alpha is floored at 1 (points 2, 3); loop_num is never reset (point 4);
- line 17 runs after the packet's own branch (point 5): a data packet arriving more than beta
  after the last CNP is still redirected, then starts the recovery; a CNP after a long quiet
  period with no packet in between sets cnp_time first, so it does NOT start a recovery (third
  episode below: cnp_num goes on from 7);
- the loop target is read again at every pass (point 6) and recovery is reorder-free (point 7):
  the packet that started the recovery comes back from its first loop to a recovering flow whose
  last forwarded PSN is its predecessor, so it leaves after exactly one loop.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from themis_trp_check import TrpRun  # noqa: E402


def step_trace(events, alpha0, beta):
    """Algorithm 1, one step per input packet of the throttled flow. Returns the loops expected
    for each data packet (by PSN) and the trace rows."""
    cnp_num, status, cnp_time, loop_num, alpha = 0, "normal", None, 0, alpha0
    loops, rows = {}, []
    for t, kind, _key, psn, _ln in events:
        if kind == "cnp":  # lines 1-8
            cnp_num += 1
            status = "throttled"
            cnp_time = t
            if cnp_num % alpha == 1:
                loop_num += 1
                alpha += 1
            what = "CNP"
        else:  # lines 9-16
            if status == "throttled" and t - cnp_time > beta:
                loops[psn] = 1  # redirected (reading 5), released after one loop (points 6, 7)
            elif status == "throttled":
                loops[psn] = loop_num
            else:
                loops[psn] = 0  # normal, or recovering with its predecessor already forwarded
            what = f"data psn {psn} -> {loops[psn]} loop(s)"
        if status == "throttled" and t - cnp_time > beta:  # lines 17-21
            status, alpha, cnp_num = "recover", max(alpha // 2, 1), 0
            what += "; beta expired: recover"
        rows.append((t, what, cnp_num, status, loop_num, alpha))
    return loops, rows


def main(outdir):
    r = TrpRun("themis_alg1_trace", HERE, outdir)
    fails = r.fails
    seen = r.compare()
    trp = r.cfg["themis"]["trp"]
    flow_events = [e for e in r.events if e[2] == ("10.0.0.1", 0x111)]
    loops, rows = step_trace(flow_events, trp["alpha"], trp["beta_ns"])
    print("themis_alg1_trace: Algorithm 1 step by step (t us, event, cnp_num, flow_status, loop_num, alpha):")
    for t, what, n, st, ln, a in rows:
        print(f"  {r.rel(t) / 1000:8.3f}  {what:45s} cnp_num={n:<2d} {st:9s} loop_num={ln} alpha={a}")
    for (key, psn), (arr, dep, mloops) in sorted(r.expected.items(), key=lambda kv: kv[0][1]):
        fails.expect(mloops == loops[psn], f"psn {psn}: the two models disagree ({mloops} vs {loops[psn]} loops)")
        if (key, psn) not in seen:
            continue
        a, d, _ = seen[(key, psn)]
        per = r.model.per_loop_ns(len(r.frames[(key, psn)]))
        fails.expect(d - a == loops[psn] * per,
                     f"psn {psn}: observed delay {d - a} ns != loop_num {loops[psn]} x {per} ns")
    fails.expect(sorted(set(loops.values())) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                 f"fixture: loop counts {sorted(set(loops.values()))} do not cover 0-9")
    fails.done()


if __name__ == "__main__":
    main(sys.argv[1])
