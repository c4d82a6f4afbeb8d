#!/usr/bin/env python3
"""pfc_xoff_xon oracle: python3 check.py OUTDIR (OUTDIR holds in_dc*.pcap and out_<port>.pcap).

For each ingress port (dc0, dc1), from the actual arrival (input) and departure (out_wan0) times,
it bounds the bytes buffered from that port, and checks the PFC frames the port sent upstream
(out_<port>.pcap): only PFC frames (60 bytes, to 01:80:c2:00:00:01, opcode 0x0101, source = the
port's MAC), only the lossless priority 3; XOFF with the configured pause quanta first, sent when
the buffered bytes crossed xoff_bytes (not before, not late), refreshed every refresh_ns while
paused, then one XON (time 0) once they drained to xon_bytes after the input stopped. Also zero
drops in the lossless class (every input packet leaves wan0 once, in order, correctly rewritten,
never CE-marked: class 3 has no ECN here) and wan0 serializes at line rate.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import (Failures, base_time, load_config, read_pcap, match_flows, check_serialization,  # noqa: E402
                     parse_pfc, wire_ns, PFC_DST)

NEXT_HOP = bytes.fromhex("020000000201")
PRIO = 3            # class 3 is the lossless one; PFC priority = class
LATE_NS = 2000      # a PFC frame may leave this long after its trigger


def buffered(recs, port, t, in_cfg, out_cfg):
    """(lo, hi) bytes from `port` held in the switch at time t (packets leave the buffer when their
    transmission starts (lo) or ends (hi); are counted from their first bit (hi) or last bit (lo))."""
    lo = hi = 0
    for r in recs:
        if r["port"] != port:
            continue
        if r["arr"] + wire_ns(r["size"], in_cfg) <= t < r["dep"]:
            lo += r["size"]
        if r["arr"] <= t < r["dep"] + wire_ns(r["size"], out_cfg):
            hi += r["size"]
    return lo, hi


def main(outdir):
    fails = Failures("pfc_xoff_xon")
    cfg = load_config(HERE)
    ports = cfg["_ports"]
    pfc = cfg["pfc"]
    xoff, xon, quanta, refresh = pfc["xoff_bytes"], pfc["xon_bytes"], pfc["pause_quanta"], pfc["refresh_ns"]

    inputs = {p: read_pcap(os.path.join(outdir, f"in_{p}.pcap")) for p in ("dc0", "dc1")}
    out = read_pcap(os.path.join(outdir, "out_wan0.pcap"))
    base = base_time(inputs)
    recs = match_flows(fails, inputs, out, ports["wan0"], NEXT_HOP, base)
    fails.expect(not any(r["ce"] for r in recs), "CE marks in class 3, which has no ECN config")
    check_serialization(fails, recs, ports["wan0"], ports["dc0"], "wan0")
    events = sorted({t for r in recs for t in (r["arr"], r["dep"])})

    for port in ("dc0", "dc1"):
        pc = ports[port]
        frames = read_pcap(os.path.join(outdir, f"out_{port}.pcap"))
        seq = []  # (ts, "XOFF"/"XON", time)
        for i, (ts, f) in enumerate(frames):
            ts -= base
            where = f"{port} frame #{i} at +{ts} ns"
            p = parse_pfc(f)
            if p is None:
                fails.add(f"{where}: not a PFC frame ({len(f)} bytes, type {f[12:14].hex()})")
                continue
            enbv, times = p
            fails.expect(len(f) == 60, f"{where}: {len(f)} bytes, expected 60")
            fails.expect(f[0:6] == PFC_DST, f"{where}: dst {f[0:6].hex()}")
            fails.expect(f[6:12] == pc["mac"], f"{where}: src {f[6:12].hex()} is not {port}'s MAC")
            fails.expect(enbv == 1 << PRIO, f"{where}: class-enable vector {enbv:#04x}, expected {1 << PRIO:#04x}")
            fails.expect(all(t == 0 for k, t in enumerate(times) if k != PRIO),
                         f"{where}: pause times for other priorities {times}")
            t = times[PRIO]
            if t:
                fails.expect(t == quanta, f"{where}: XOFF pause time {t}, expected pause_quanta={quanta}")
            seq.append((ts, "XOFF" if t else "XON", t))
        kinds = [k for _, k, _ in seq]
        print(f"pfc_xoff_xon: {port}: " + ", ".join(f"{k}@{ts}" for ts, k, _ in seq))
        if not fails.expect(kinds and kinds[0] == "XOFF", f"{port}: no XOFF sent first (got {kinds[:3]})"):
            continue
        if not fails.expect(kinds[-1] == "XON" and kinds.count("XON") == 1,
                            f"{port}: expected XOFF... then one final XON, got {kinds}"):
            continue
        t_x, t_on = seq[0][0], seq[-1][0]
        # XOFF: the port's buffered bytes had crossed xoff_bytes, and not long before.
        lo, hi = buffered(recs, port, t_x, pc, ports["wan0"])
        fails.expect(hi >= xoff, f"{port}: XOFF at {t_x} with only {hi} bytes buffered (< xoff_bytes={xoff})")
        first_over = next((t for t in events if buffered(recs, port, t, pc, ports["wan0"])[0] >= xoff), None)
        fails.expect(first_over is not None, f"{port}: buffered bytes never clearly crossed xoff_bytes")
        if first_over is not None:
            fails.expect(t_x <= first_over + LATE_NS,
                         f"{port}: XOFF at {t_x}, but {xoff} bytes were buffered by {first_over}")
        # Refresh while paused.
        for (a, ka, _), (b, kb, _) in zip(seq, seq[1:]):
            fails.expect(b - a <= refresh + LATE_NS,
                         f"{port}: {b - a} ns between {ka}@{a} and {kb}@{b}: pause not refreshed every refresh_ns={refresh}")
            if kb == "XOFF":
                fails.expect(b - a >= refresh - LATE_NS,
                             f"{port}: XOFF refreshed after {b - a} ns, refresh_ns={refresh}")
        # XON: after the input stopped, once drained to xon_bytes, and not late.
        last_in = inputs[port][-1][0] - base
        fails.expect(t_on > last_in, f"{port}: XON at {t_on} before its input stopped at {last_in}")
        lo, hi = buffered(recs, port, t_on, pc, ports["wan0"])
        fails.expect(lo <= xon, f"{port}: XON at {t_on} with {lo} bytes still buffered (> xon_bytes={xon})")
        drained = next((t for t in events if t > max(t_x, last_in) and buffered(recs, port, t, pc, ports["wan0"])[1] <= xon), None)
        if drained is not None:
            fails.expect(t_on <= drained + LATE_NS,
                         f"{port}: XON at {t_on}, but only {xon} bytes were buffered by {drained}")
        peak = max(buffered(recs, port, t, pc, ports["wan0"])[1] for t in events)
        print(f"pfc_xoff_xon: {port}: peak buffered {peak} B; {kinds.count('XOFF')} XOFF, XON after {t_on - last_in} ns")
    fails.done()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
