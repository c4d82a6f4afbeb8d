"""Shared part of the THEMIS TRP cases' check.py (themis_trp_loops, themis_alg1_trace).

Reads the case's inputs (in_dc0: the receiver's daemon message and its CNPs; in_wan0: WAN -> DC
RoCE data) and switch.toml, maps each CNP to its flow through a model of QP_field (the daemon's
entry, effective control_latency_ns after the message), runs oracle/themis_model.TrpModel, and
compares every data packet leaving dc0 with the model: departure time exactly, bytes (MACs, TTL
and IPv4 checksum aside) unchanged. No longhaul code.
"""
import ipaddress
import os
import struct
import tomllib

from casekit import Failures, read_pcap, ones_sum
from themis_model import TrpModel

OUT_MAC_DC0_NH = bytes.fromhex("020000001001")


def ip4(b):
    return str(ipaddress.IPv4Address(bytes(b)))


def udp_dport(f):
    if len(f) < 42 or f[12:14] != b"\x08\x00" or f[23] != 17:
        return None
    u = 14 + (f[14] & 0xF) * 4
    return struct.unpack("!H", f[u + 2:u + 4])[0]


def bth(f):
    """(opcode, DestQP, PSN) of an IPv4 RoCEv2 frame."""
    b = 14 + (f[14] & 0xF) * 4 + 8
    return f[b], int.from_bytes(f[b + 5:b + 8], "big"), int.from_bytes(f[b + 9:b + 12], "big")


class TrpRun:
    def __init__(self, name, case_dir, outdir):
        self.fails = Failures(name)
        with open(os.path.join(case_dir, "switch.toml"), "rb") as f:
            self.cfg = tomllib.load(f)
        trp = self.cfg["themis"]["trp"]
        ports = {p["name"]: p for p in self.cfg["ports"]}
        self.model = TrpModel(alpha=trp.get("alpha", 5), beta_ns=trp.get("beta_ns", 500000),
                              loop_delay_ns=trp.get("loop_delay_ns", 1000),
                              recirc_rate_gbps=trp.get("recirc_rate_gbps", 100.0),
                              egress_rate_gbps=ports["dc0"]["rate_gbps"],
                              reorder_free=trp.get("recovery", "reorder_free") == "reorder_free")
        latency = self.cfg.get("control", {}).get("control_latency_ns", 0)
        self.in_dc0 = read_pcap(os.path.join(outdir, "in_dc0.pcap"))
        self.in_wan0 = read_pcap(os.path.join(outdir, "in_wan0.pcap"))
        self.base = min(self.in_dc0[0][0], self.in_wan0[0][0])
        # QP_field, as the daemon messages make it (all from a trusted host in these cases).
        qp_field = []  # (effective, (client, server, sqpn), cqpn)
        events = []
        self.frames = {}
        self.unmapped_cnps = 0
        for ts, f in self.in_dc0:
            if udp_dport(f) == 12345:
                u = 14 + (f[14] & 0xF) * 4
                dst, cqpn, sqpn, flag = struct.unpack("!IIII", f[u + 8:u + 24])
                assert flag == 1
                qp_field.append((ts + latency, (ip4(f[26:30]), str(ipaddress.IPv4Address(dst)), sqpn), cqpn))
            elif udp_dport(f) == 4791 and bth(f)[0] == 0x81:
                k = (ip4(f[26:30]), ip4(f[30:34]), bth(f)[1])
                local = [c for t, key, c in qp_field if key == k and t <= ts]
                if not local:
                    self.unmapped_cnps += 1
                    continue
                # TRP key = (receiver IP, receiver QPN): the data packets' (IP dst, DestQP).
                events.append((ts, "cnp", (k[0], local[-1]), None, len(f)))
        for ts, f in self.in_wan0:
            _, qpn, psn = bth(f)
            key = (ip4(f[30:34]), qpn)
            events.append((ts, "data", key, psn, len(f)))
            self.frames[(key, psn)] = f
        self.events = sorted(events, key=lambda e: e[0])
        self.expected = self.model.run(self.events)
        self.out = read_pcap(os.path.join(outdir, "out_dc0.pcap"))
        self.wan_out = read_pcap(os.path.join(outdir, "out_wan0.pcap"))

    def rel(self, t):
        return t - self.base

    def compare(self):
        """Every data packet leaves dc0 exactly when the model says, unchanged; returns
        {(key, psn): (arrival, departure, loops)} observed (times relative to the first input)."""
        fails = self.fails
        seen = {}
        order = []
        for j, (ts, f) in enumerate(self.out):
            if udp_dport(f) != 4791:
                fails.add(f"out_dc0 #{j}: not RoCE")
                continue
            _, qpn, psn = bth(f)
            k = ((ip4(f[30:34]), qpn), psn)
            fin = self.frames.get(k)
            if not fails.expect(fin is not None, f"out_dc0 #{j}: matches no input (qpn {qpn:#x} psn {psn})"):
                continue
            fails.expect(k not in seen, f"out_dc0 #{j}: duplicate of qpn {qpn:#x} psn {psn}")
            where = f"out_dc0 #{j} (qpn {qpn:#x} psn {psn})"
            fails.expect(len(f) == len(fin) and f[12:22] == fin[12:22] and f[23:24] == fin[23:24]
                         and f[26:] == fin[26:], f"{where}: bytes differ from the input")
            fails.expect(f[22] == fin[22] - 1, f"{where}: TTL {f[22]}")
            fails.expect(ones_sum(f[14:34]) == 0xFFFF, f"{where}: bad IPv4 checksum")
            fails.expect(f[0:6] == OUT_MAC_DC0_NH, f"{where}: dst MAC {f[0:6].hex()}")
            exp = self.expected.get(k)
            arr, dep, loops = exp
            fails.expect(ts == dep, f"{where}: departs at {self.rel(ts)} ns (delay {ts - arr}), model: "
                                    f"{self.rel(dep)} (delay {dep - arr} = {loops} loop(s))")
            seen[k] = (self.rel(arr), self.rel(ts), loops)
            order.append(k)
        missing = [k for k in self.expected if k not in seen]
        fails.expect(not missing, f"{len(missing)} data packet(s) never left dc0: {missing[:5]}")
        # PSN order per flow.
        by_flow = {}
        for key, psn in order:
            by_flow.setdefault(key, []).append(psn)
        for key, psns in by_flow.items():
            fails.expect(psns == sorted(psns), f"flow {key} left dc0 out of PSN order: {psns}")
        # The CNPs themselves go on to the WAN untouched but for the rewrite.
        n_cnp = sum(1 for _, f in self.in_dc0 if udp_dport(f) == 4791)
        fails.expect(len(self.wan_out) == n_cnp, f"{len(self.wan_out)} CNPs forwarded to wan0, expected {n_cnp}")
        fails.expect(self.unmapped_cnps == 0, f"fixture: {self.unmapped_cnps} CNP(s) before the QP_field entry")
        return seen
