#!/usr/bin/env python3
"""bifrost_slot_pause oracle: python3 check.py OUTDIR (OUTDIR holds in_*.pcap and out_<port>.pcap).

Recomputes Bifrost's Algorithm 1 (paper 004, section IV-B) on its own, from the switch.toml and
the observed times: L at each slot boundary b = bytes that arrived on wan0 by b minus bytes whose
transmission on dc0 started before b (the switch receives, then updates, then transmits at one
instant); r = bytes arrived since the previous update. The slot timer runs on the grid of multiples
of T, is armed by an arrival and stops when L = 0 and F is back at BDP + Rs*T. The longhaul choices
(docs/bifrost.md) are applied: the leak check deducts only an excess, the grant is clamped to
[0, Rs*T], a frame that opens a window grants one largest frame (MTU + overhead) less than that
(whole frames), p is rounded up to quanta of 64 bytes at line rate, and F is the history of the
grants of the last RTT + T: line 17 takes off what the grants expected in the slot (not the bytes
measured) and adds the window plus its last frame. Then every frame on wan0 must be exactly the
expected PFC frame at the expected time, and every data packet must leave on dc0.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, load_config, read_pcap, parse_pfc, PFC_DST  # noqa: E402

PRIO = 3


def main(outdir):
    fails = Failures("bifrost_slot_pause")
    cfg = load_config(HERE)
    ports = cfg["_ports"]
    b = cfg["bifrost"]
    rate = ports["wan0"]["rate_bps"]
    T = b["slot_ns"]
    rs_t = rate * T // 8_000_000_000
    bdp = rate * 2 * b["one_way_delay_ns"] // 8_000_000_000
    H, k = b["buffer_bytes"], b["k"]
    cap = bdp + rs_t
    frame = max(p.get("mtu", 1500) + p.get("frame_overhead", 24)
                for p in cfg["ports"] if p["name"] == "wan0")
    # The grant history: the grant sent at the end of slot j covers arrivals [jT + RTT, (j+1)T +
    # RTT), i.e. Rs*T - rho bytes of slot j + m + 1 and rho of slot j + m + 2.
    m, rho = bdp // rs_t, bdp % rs_t
    hist = {}  # slot -> grant (missing: a whole slot, no frame was sent)

    def late(g):
        return g * rho // rs_t

    def expected_in(n):
        a, b_ = hist.get(n - m - 1, rs_t), hist.get(n - m - 2, rs_t)
        return a - late(a) + late(b_)

    arr = [(ts, len(f)) for ts, f in read_pcap(os.path.join(outdir, "in_wan0.pcap"))]
    dep = [(ts, len(f)) for ts, f in read_pcap(os.path.join(outdir, "out_dc0.pcap"))]
    fails.expect(len(dep) == len(arr), f"{len(arr)} packets in on wan0, {len(dep)} out on dc0")

    def bytes_by(events, t, strict):
        return sum(s for ts, s in events if (ts < t if strict else ts <= t))

    expected = []  # (ts, quanta)
    F, i, armed, rx, closed, last_n = cap, 0, None, 0, False, None
    while True:
        if armed is None:
            if i >= len(arr):
                break
            armed = (arr[i][0] // T + 1) * T
        bnd = armed
        while i < len(arr) and arr[i][0] <= bnd:
            rx += arr[i][1]
            i += 1
        L = bytes_by(arr, bnd, False) - bytes_by(dep, bnd, True)
        n = bnd // T
        if last_n is not None and n > last_n + 1:     # disarmed at rest: whole slots, no frame
            for j in range(last_n + 1, n):
                F = F - expected_in(j) + rs_t
                hist[j] = rs_t
            closed = False
        last_n = n
        c = min(rs_t, H - L - F)                      # line 10
        c_hat = c                                     # line 11
        if n % k == 0:                                # lines 12-15
            c_hat = max(0, c - max(0, L + F - H))
        grant = min(max(c_hat, 0), rs_t)              # line 16, one slot at most
        opens = grant > 0 and (grant < rs_t or closed)
        cut = min(frame, grant) if opens else 0       # whole frames
        q = min(65535, -(-(rs_t - (grant - cut)) // 64))
        window = max(0, rs_t - 64 * q)
        closed = q > 0 and window == 0
        g = window + cut if window > 0 else 0
        F = F - expected_in(n) + g                       # line 17, grant history
        hist[n] = g
        rx = 0
        if q > 0:
            expected.append((bnd, q))
        armed = bnd + T if (L > 0 or F != cap) else None

    got = []
    for j, (ts, f) in enumerate(read_pcap(os.path.join(outdir, "out_wan0.pcap"))):
        where = f"wan0 frame #{j} at {ts}"
        p = parse_pfc(f)
        if p is None:
            fails.add(f"{where}: not a PFC frame ({len(f)} bytes, type {f[12:14].hex()})")
            continue
        enbv, times = p
        fails.expect(len(f) == 60, f"{where}: {len(f)} bytes")
        fails.expect(f[0:6] == PFC_DST, f"{where}: dst {f[0:6].hex()}")
        fails.expect(f[6:12] == ports["wan0"]["mac"], f"{where}: src {f[6:12].hex()}")
        fails.expect(enbv == 1 << PRIO, f"{where}: class-enable {enbv:#06x}, expected 0x0008")
        fails.expect(all(t == 0 for c, t in enumerate(times) if c != PRIO), f"{where}: times {times}")
        fails.expect(0 < times[PRIO] <= -(-rs_t // 64), f"{where}: pause {times[PRIO]} > one slot")
        got.append((ts, times[PRIO]))
    fails.expect(len(expected) > 5, f"only {len(expected)} frames expected: the case exercises little")
    fails.expect(any(q < -(-rs_t // 64) for _, q in expected), "no partial pause in the case")
    for j, (e, g) in enumerate(zip(expected, got)):
        if e != g:
            fails.add(f"frame #{j}: expected (ts, quanta) {e}, got {g}")
            break
    fails.expect(len(expected) == len(got), f"{len(expected)} frames expected, {len(got)} sent")
    print(f"bifrost_slot_pause: {len(got)} pause frames, quanta {[q for _, q in got][:12]}...")
    fails.done()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
