"""A tiny reference model of the baseline switch for the 2:1 cases, used only to self-test the
check scripts (oracle/test_checks.py) before and independently of the Rust engine.

One egress FIFO served at line rate (departure = start of transmission; frame_overhead added per
frame); packets are enqueued at their arrival timestamp; RED/ECN on the depth (bytes waiting, not
yet transmitting) at enqueue with a seeded random.Random; PFC per ingress port on the bytes it has
waiting: XOFF when >= xoff_bytes, refreshed every refresh_ns, XON when <= xon_bytes.
"""
import random
import struct

from casekit import load_config, class_config, wire_ns, build_pfc, inet_checksum


def rewrite(f, src_mac, dst_mac, ce):
    b = bytearray(f)
    b[0:6], b[6:12] = dst_mac, src_mac
    b[22] -= 1
    if ce and b[15] & 3:
        b[15] |= 3
    b[24:26] = b"\0\0"
    b[24:26] = struct.pack("!H", inet_checksum(bytes(b[14:34])))
    return bytes(b)


def run(case_dir, inputs, next_hop):
    """inputs: {port: [(ts, frame)]} -> {port: [(ts, frame)]} outputs of the model."""
    cfg = load_config(case_dir)
    ports = cfg["_ports"]
    wan = ports["wan0"]
    cls = class_config(cfg, 3)
    ecn = cls.get("ecn")
    pfc = cfg.get("pfc", {})
    rng = random.Random(cfg["switch"].get("seed", 0))
    arrivals = sorted((ts, ports[p]["id"], p, f) for p, recs in inputs.items() for ts, f in recs)
    base = min(a[0] for a in arrivals)
    free_at = 0.0
    pkts = []  # (arr, port, frame, dep)
    for ts, _, port, f in arrivals:
        depth = sum(len(q[2]) for q in pkts if q[3] > ts - base)
        ce = False
        if ecn:
            kmin, kmax, pmax = ecn["kmin_bytes"], ecn["kmax_bytes"], ecn["pmax"]
            p = 0 if depth < kmin else 1 if depth >= kmax else pmax * (depth - kmin) / (kmax - kmin)
            ce = rng.random() < p
        dep = max(float(ts - base), free_at)
        free_at = dep + wire_ns(len(f), wan)
        pkts.append((ts, port, rewrite(f, wan["mac"], next_hop, ce), dep))
    out = {"wan0": [(base + int(round(d)), f) for _, _, f, d in pkts]}
    for port in inputs:
        frames = []
        if pfc.get("enabled"):
            evs = sorted([(a, 1, len(f)) for a, p, f, _ in pkts if p == port]
                         + [(base + int(round(d)), 0, -len(f)) for a, p, f, d in pkts if p == port])
            level, paused, last = 0, False, None
            for t, _, delta in evs:
                while paused and last + pfc["refresh_ns"] <= t:
                    last += pfc["refresh_ns"]
                    frames.append((last, build_pfc(ports[port]["mac"], 8, [0, 0, 0, pfc["pause_quanta"], 0, 0, 0, 0])))
                level += delta
                if not paused and level >= pfc["xoff_bytes"]:
                    paused, last = True, t
                    frames.append((t, build_pfc(ports[port]["mac"], 8, [0, 0, 0, pfc["pause_quanta"], 0, 0, 0, 0])))
                elif paused and level <= pfc["xon_bytes"]:
                    paused = False
                    frames.append((t, build_pfc(ports[port]["mac"], 8, [0] * 8)))
        out[port] = frames
    return out
