#!/usr/bin/env python3
"""Generate the RDMA WRITE trace for the spraying ToR's testpmd comparison (perf/dpdk-spray.toml).

Like perf/gen_trace.py, scapy's RoCE layer (which also computes the ICRC) writes it, and the output
is deterministic (fixed addresses, QPNs and timestamps: re-running gives the same bytes).

    python3 perf/gen_spray_trace.py perf/spray-64qps.pcap

64 cross-rack RC queue pairs, QP f (0..63) from host 10.0.0.(f+1) behind port h0 of
configs/spray-tor.toml (local QPN 0x100+f) to 10.1.0.(f+1) in another rack (remote QPN 0x200+f,
the BTH DestQP; perf/dpdk-spray.toml lists all 64 in [[spray.qps]]). RDMA WRITE MIDDLE packets
(no extension headers, 256-byte payload: 314-byte frames, as in the criterion spray benchmarks),
DSCP 26 (class 3), ECT(0), UDP source port 49152+f. 4 packets per QP with sequential PSNs
1000*f + 0..3, QPs interleaved round robin (256 packets, about 84 KB), one every 100 ns. With
N = 4 paths, equation 1 sends each QP's 4 PSNs over the 4 paths once per pass of the trace, so a
looped replay (infinite_rx=1) loads up0..up3 evenly.
"""
import sys
from decimal import Decimal

from scapy.all import Ether, IP, UDP, Raw, wrpcap
from scapy.contrib.roce import BTH, opcode

TOR_MAC = "02:00:00:00:00:01"  # h0's MAC in configs/spray-tor.toml
HOST_MAC = "02:00:00:00:10:01"
QPS = 64
PKTS_PER_QP = 4
GAP_NS = 100
T0_NS = 1_700_000_000 * 10**9


def frames():
    out = []
    n = 0
    for k in range(PKTS_PER_QP):
        for f in range(QPS):
            p = (
                Ether(dst=TOR_MAC, src=HOST_MAC)
                / IP(src=f"10.0.0.{f + 1}", dst=f"10.1.0.{f + 1}", tos=(26 << 2) | 0b10, ttl=64, id=0, flags="DF")
                / UDP(sport=49152 + f, dport=4791, chksum=0)
                / BTH(opcode=opcode("RC", "RDMA_WRITE_MIDDLE")[0], pkey=0xFFFF, dqpn=0x200 + f, psn=1000 * f + k)
                / Raw(bytes([(f + k) & 0xFF]) * 256)
            )
            p.time = Decimal(T0_NS + n * GAP_NS) / Decimal(10**9)
            out.append(p)
            n += 1
    return out


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "perf/spray-64qps.pcap"
    pkts = frames()
    assert all(len(p) == 314 for p in pkts), {len(p) for p in pkts}
    # nano=True keeps the exact ns timestamps.
    wrpcap(path, pkts, nano=True)
    print(f"wrote {len(pkts)} frames to {path}")
