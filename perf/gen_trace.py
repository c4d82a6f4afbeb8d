#!/usr/bin/env python3
"""Generate the 64-flow RoCEv2 trace used by the README's first command and the benchmarks.

An independent encoder (scapy's RoCE layer, which also computes the ICRC) writes it, so the trace
also exercises our parser against someone else's idea of a RoCE frame. Deterministic: fixed
addresses, QPNs and timestamps, so re-running gives the same bytes.

    python3 perf/gen_trace.py examples/roce-64flows.pcap
    python3 perf/gen_trace.py perf/roce-64flows-1082.pcap 1024 4   # PAYLOAD PKTS_PER_FLOW

The second form writes perf/dpdk-1082.toml's trace: 1024-byte payloads (1082-byte frames, the
issue's 100 GbE line-rate size), 4 packets per QP (256 frames), the same flows and spacing.

64 RC queue pairs from hosts 10.0.0.1..64 (behind port dc0 of configs/baseline.toml) to
10.1.0.1..64 (routed to wan0), SEND packets (first/middle/last, no extension headers) with 256-byte payloads, DSCP 26 (class 3),
ECT(0), 16 packets per QP interleaved round robin (1024 packets), one every 100 ns (about
26 Gb/s offered into a 100 Gb/s port: no queueing).
"""
import sys
from decimal import Decimal

from scapy.all import Ether, IP, UDP, Raw, wrpcap
from scapy.contrib.roce import BTH, opcode

ROUTER_MAC = "02:00:00:00:00:01"  # dc0's MAC in configs/baseline.toml
HOST_MAC = "02:00:00:00:10:01"
FLOWS = 64
PKTS_PER_FLOW = 16
GAP_NS = 100
T0_NS = 1_700_000_000 * 10**9


def frames(payload=256, per_flow=PKTS_PER_FLOW):
    out = []
    n = 0
    for k in range(per_flow):
        for f in range(FLOWS):
            first, last = k == 0, k == per_flow - 1
            op = ("RC", "SEND_FIRST" if first else "SEND_LAST" if last else "SEND_MIDDLE")
            p = (
                Ether(dst=ROUTER_MAC, src=HOST_MAC)
                / IP(src=f"10.0.0.{f + 1}", dst=f"10.1.0.{f + 1}", tos=(26 << 2) | 0b10, ttl=64, id=0, flags="DF")
                / UDP(sport=49152 + f, dport=4791, chksum=0)
                / BTH(opcode=opcode(*op)[0], pkey=0xFFFF, dqpn=0x100 + f, psn=1000 * f + k)
                / Raw(bytes([(f + k) & 0xFF]) * payload)
            )
            p.time = Decimal(T0_NS + n * GAP_NS) / Decimal(10**9)
            out.append(p)
            n += 1
    return out


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "examples/roce-64flows.pcap"
    payload = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    per_flow = int(sys.argv[3]) if len(sys.argv) > 3 else PKTS_PER_FLOW
    pkts = frames(payload, per_flow)
    # nano=True keeps the exact ns timestamps.
    wrpcap(path, pkts, nano=True)
    print(f"wrote {len(pkts)} frames to {path}")
