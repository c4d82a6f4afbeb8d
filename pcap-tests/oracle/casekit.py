"""Helpers shared by the cases' check.py scripts and the reference model (no longhaul code).

Frames are raw bytes (Ethernet II, IPv4, no VLAN -- what the cases generate). Timestamps are
integer nanoseconds (pcaputil).
"""
import os
import re
import struct
import sys
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcaputil import read_pcap  # noqa: E402,F401
from verify import ones_sum, inet_checksum  # noqa: E402,F401

PFC_DST = bytes.fromhex("0180c2000001")


class CheckFailed(Exception):
    pass


class Failures:
    """Collects violations; `done()` prints them and exits 1, or prints OK."""

    def __init__(self, name):
        self.name = name
        self.msgs = []

    def add(self, msg):
        self.msgs.append(msg)

    def expect(self, cond, msg):
        if not cond:
            self.add(msg)
        return cond

    def done(self):
        if self.msgs:
            # Up to 5 messages of each kind (same text once digits are ignored), in order.
            kinds = {}
            for m in self.msgs:
                kinds.setdefault(re.sub(r"[0-9a-fx]*[0-9][0-9a-fx]*", "#", m), []).append(m)
            for ms in kinds.values():
                for m in ms[:5]:
                    print(f"{self.name}: FAIL: {m}")
                if len(ms) > 5:
                    print(f"{self.name}: ... and {len(ms) - 5} more like the above")
            print(f"{self.name}: FAILED: {len(self.msgs)} violation(s)")
            sys.exit(1)
        print(f"{self.name}: OK")
        sys.exit(0)


def load_config(case_dir):
    """The case's switch.toml as a dict, with ports indexed by name (rate_bps, overhead, mac bytes)."""
    with open(os.path.join(case_dir, "switch.toml"), "rb") as f:
        cfg = tomllib.load(f)
    ports = {}
    for p in cfg.get("ports", []):
        ports[p["name"]] = dict(
            id=p["id"], mac=bytes.fromhex(p["mac"].replace(":", "")),
            rate_bps=int(round(float(p["rate_gbps"]) * 1e9)),
            overhead=int(p.get("frame_overhead", 24)))
    cfg["_ports"] = ports
    return cfg


def class_config(cfg, cls):
    for c in cfg.get("qos", {}).get("classes", []):
        if c.get("class") == cls:
            return c
    raise CheckFailed(f"class {cls} not in switch.toml")


def wire_ns(frame_len, port):
    """Serialization time of a frame (ns, float) on `port`, overhead included."""
    return (frame_len + port["overhead"]) * 8 * 1e9 / port["rate_bps"]


def roce_key(f):
    """(src ip, dest QP, PSN) of an IPv4 RoCEv2 frame, or None."""
    if len(f) < 14 + 20 + 8 + 12 or f[12:14] != b"\x08\x00":
        return None
    ihl = (f[14] & 0x0F) * 4
    u = 14 + ihl
    if f[23] != 17 or f[u + 2:u + 4] != b"\x12\xb7":
        return None
    b = u + 8
    return (f[26:30], int.from_bytes(f[b + 5:b + 8], "big"), int.from_bytes(f[b + 9:b + 12], "big"))


def ecn(f):
    return f[15] & 3


def normalized(f):
    """A frame with what the switch may change blanked: MACs, ECN bits, TTL, IPv4 checksum."""
    b = bytearray(f)
    b[0:12] = bytes(12)
    b[15] &= 0xFC
    b[22] = 0
    b[24:26] = b"\0\0"
    return bytes(b)


def base_time(inputs):
    """The earliest input timestamp: times are made relative to it (floats cannot hold absolute ns)."""
    return min(recs[0][0] for recs in inputs.values() if recs)


def match_flows(fails, inputs, out_recs, out_port_cfg, next_hop_mac, base):
    """Match every output frame with its input (by RoCE src ip/QPN/PSN). `inputs`: {port: [(ts, f)]}.
    Returns a list of dicts (port, arr, dep, size, ce, idx_in, idx_out), times in ns relative to
    `base`, in output order; records unmatched/duplicate/missing packets and rewrite errors in
    `fails`."""
    by_key = {}
    for port, recs in inputs.items():
        for i, (ts, f) in enumerate(recs):
            k = roce_key(f)
            assert k is not None and k not in by_key, "inputs must be unique RoCE packets"
            by_key[k] = (port, i, ts - base, f)
    seen = set()
    out = []
    for j, (ts, f) in enumerate(out_recs):
        k = roce_key(f)
        if k is None or k not in by_key:
            fails.add(f"egress frame #{j} matches no input packet")
            continue
        if k in seen:
            fails.add(f"egress frame #{j} duplicates an input packet (qpn {k[1]:#x} psn {k[2]})")
            continue
        seen.add(k)
        ts -= base
        port, i, arr, fin = by_key[k]
        rec = dict(port=port, arr=arr, dep=ts, size=len(f), idx_in=i, idx_out=j, qpn=k[1], psn=k[2],
                   ce=ecn(f) == 3, ecn_in=ecn(fin))
        where = f"egress frame #{j} ({port} psn {k[2]})"
        if len(f) != len(fin) or normalized(f) != normalized(fin):
            fails.add(f"{where}: bytes differ from the input beyond MACs/ECN/TTL/checksum")
        fails.expect(f[0:6] == next_hop_mac, f"{where}: dst MAC {f[0:6].hex()} != next hop")
        fails.expect(f[6:12] == out_port_cfg["mac"], f"{where}: src MAC {f[6:12].hex()} != egress port MAC")
        fails.expect(f[22] == fin[22] - 1, f"{where}: TTL {f[22]}, expected {fin[22] - 1}")
        fails.expect(ones_sum(f[14:34]) == 0xFFFF, f"{where}: bad IPv4 header checksum")
        ein, eout = ecn(fin), ecn(f)
        fails.expect(eout == ein or (ein != 0 and eout == 3),
                     f"{where}: ECN {ein:02b} -> {eout:02b} (only ECT -> CE allowed)")
        fails.expect(ts >= arr, f"{where}: departs at {ts} before it arrived at {arr}")
        out.append(rec)
    missing = len(by_key) - len(seen)
    fails.expect(missing == 0, f"{missing} input packet(s) never left the egress port (dropped)")
    for port in inputs:
        psns = [r["psn"] for r in out if r["port"] == port]
        fails.expect(psns == sorted(psns), f"packets from {port} left out of order")
    return out


def check_serialization(fails, recs, port_cfg, in_port_cfg, label):
    """Departures (start of transmission) are spaced by at least the previous frame's wire time;
    while the queue is clearly backlogged, by exactly that (work conservation)."""
    recs = sorted(recs, key=lambda r: r["dep"])
    for a, b in zip(recs, recs[1:]):
        w = wire_ns(a["size"], port_cfg)
        gap = b["dep"] - a["dep"]
        fails.expect(gap >= w - 1, f"{label}: frames #{a['idx_out']} and #{b['idx_out']} depart "
                                   f"{gap} ns apart, less than the {w:.1f} ns wire time")
        backlogged = b["arr"] + wire_ns(b["size"], in_port_cfg) + 2000 <= a["dep"]
        if backlogged:
            fails.expect(gap <= w + 1, f"{label}: idle gap while backlogged: frames #{a['idx_out']} "
                                       f"and #{b['idx_out']} depart {gap} ns apart (wire time {w:.1f} ns)")


def queue_depth_bounds(recs, p, in_port_cfg, out_port_cfg):
    """Bounds (lo, hi) on the egress queue depth in bytes (buffered frame bytes, no overhead) seen
    by packet `p` at enqueue, from the actual arrival and departure times of all packets. Packets
    leave the queue when their transmission starts. The bounds cover the usual conventions:
    enqueue at first bit (arrival) or after store-and-forward (arrival + wire time); counting or not
    the frame being transmitted and the packet itself."""
    t0 = p["arr"]
    t1 = p["arr"] + wire_ns(p["size"], in_port_cfg)
    lo = hi = None
    for t in (t0, t1):
        waiting = in_tx = 0
        for q in recs:
            if q is p:
                continue
            earlier = (q["arr"], q["port"]) < (p["arr"], p["port"])
            if earlier and q["dep"] > t:
                waiting += q["size"]
            elif q["dep"] <= t < q["dep"] + wire_ns(q["size"], out_port_cfg):
                in_tx = q["size"]
        l, h = waiting, waiting + in_tx + p["size"]
        lo = l if lo is None else min(lo, l)
        hi = h if hi is None else max(hi, h)
    return lo, hi


def parse_pfc(f):
    """(enable vector, [8 pause times]) of a PFC frame, or None."""
    if len(f) < 14 + 20 or f[12:14] != b"\x88\x08" or f[14:16] != b"\x01\x01":
        return None
    enbv = struct.unpack("!H", f[16:18])[0]
    return enbv, list(struct.unpack("!8H", f[18:34]))


def build_pfc(src_mac, enbv, times):
    f = PFC_DST + src_mac + b"\x88\x08" + struct.pack("!HH8H", 0x0101, enbv, *times)
    return f + bytes(60 - len(f))
