#!/usr/bin/env python3
"""ecn_marking oracle: python3 check.py OUTDIR (OUTDIR holds in_dc*.pcap and out_<port>.pcap).

From the actual arrival (input) and departure (output) times it bounds every packet's egress
queue depth at enqueue, then checks the RED/ECN marks of class 3 (Kmin/Kmax/Pmax read from
switch.toml): never marked below Kmin, always at or above Kmax, some but not all in between (and
a count consistent with the linear probability). Also: no packet lost or duplicated, per-flow
order kept, frames rewritten correctly (MACs, TTL, valid IPv4 checksum, only ECT->CE), wan0
serializes at its line rate, and nothing is sent back to dc0/dc1 (PFC is disabled).
"""
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import (Failures, base_time, load_config, class_config, read_pcap, match_flows,  # noqa: E402
                     check_serialization, queue_depth_bounds)

NEXT_HOP = bytes.fromhex("020000000201")


def main(outdir):
    fails = Failures("ecn_marking")
    cfg = load_config(HERE)
    ports = cfg["_ports"]
    ecn = class_config(cfg, 3)["ecn"]
    kmin, kmax, pmax = ecn["kmin_bytes"], ecn["kmax_bytes"], float(ecn["pmax"])

    inputs = {p: read_pcap(os.path.join(outdir, f"in_{p}.pcap")) for p in ("dc0", "dc1")}
    out = read_pcap(os.path.join(outdir, "out_wan0.pcap"))
    base = base_time(inputs)
    for p in ("dc0", "dc1"):
        back = read_pcap(os.path.join(outdir, f"out_{p}.pcap"))
        fails.expect(not back, f"{len(back)} frame(s) sent out of {p} (expected none)")

    recs = match_flows(fails, inputs, out, ports["wan0"], NEXT_HOP, base)
    check_serialization(fails, recs, ports["wan0"], ports["dc0"], "wan0")

    below = above = 0
    middle = []  # (lo, hi, marked)
    max_hi = 0
    for r in recs:
        lo, hi = queue_depth_bounds(recs, r, ports[r["port"]], ports["wan0"])
        max_hi = max(max_hi, hi)
        where = f"{r['port']} psn {r['psn']} (depth at enqueue {lo}..{hi} B)"
        if hi < kmin:
            below += 1
            fails.expect(not r["ce"], f"{where}: CE-marked below Kmin={kmin}")
        elif lo >= kmax:
            above += 1
            fails.expect(r["ce"], f"{where}: not marked at or above Kmax={kmax}")
        elif lo >= kmin and hi < kmax:
            middle.append((lo, hi, r["ce"]))

    marked = sum(1 for m in middle if m[2])
    print(f"ecn_marking: {len(recs)} packets; depth bounds up to {max_hi} B; {below} below Kmin, "
          f"{len(middle)} between Kmin and Kmax ({marked} marked), {above} at/above Kmax; "
          f"{sum(1 for r in recs if r['ce'])} CE in total")
    # The case must exercise every region, else it tests nothing.
    fails.expect(below >= 10, f"only {below} packets clearly below Kmin")
    fails.expect(above >= 10, f"only {above} packets clearly above Kmax (queue never grew past Kmax?)")
    fails.expect(len(middle) >= 10, f"only {len(middle)} packets clearly between Kmin and Kmax")
    if middle and pmax < 1:
        fails.expect(0 < marked < len(middle),
                     f"{marked} of {len(middle)} packets between Kmin and Kmax marked (expected some, not all)")
        p = lambda d: pmax * (d - kmin) / (kmax - kmin)  # noqa: E731
        mu_lo = sum(p(lo) for lo, _, _ in middle)
        mu_hi = sum(p(hi) for _, hi, _ in middle)
        sigma = math.sqrt(sum(max(p(lo) * (1 - p(lo)), p(hi) * (1 - p(hi))) for lo, hi, _ in middle))
        lo_b, hi_b = mu_lo - 4 * sigma - 2, mu_hi + 4 * sigma + 2
        fails.expect(lo_b <= marked <= hi_b,
                     f"{marked} marks between Kmin and Kmax, outside the plausible range "
                     f"[{lo_b:.1f}, {hi_b:.1f}] for linear RED up to pmax={pmax}")
    fails.done()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
