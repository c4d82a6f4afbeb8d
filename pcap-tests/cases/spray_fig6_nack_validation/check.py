#!/usr/bin/env python3
"""spray_fig6_nack_validation oracle: python3 check.py OUTDIR.

Independent of longhaul: decodes the outputs with scapy. Expects out of up0 (toward the sender)
the three ACKs and exactly one NAK, for ePSN 4, unchanged from the RNIC's (syndrome 0x60, DestQP
0x11, source port 50000, no reserved BTH bits); nothing out of up1; the counters of Algorithm 1:
one invalid NAK, one valid, none undetermined or regenerated.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402
from scapy.config import conf  # noqa: E402
conf.verb = 0
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.layers.inet import UDP  # noqa: E402
from scapy.contrib.roce import BTH, AETH  # noqa: E402


def counters(outdir):
    with open(os.path.join(outdir, "counters.txt")) as f:
        return {k: int(v) for k, v in (line.split() for line in f if line.strip())}


def main(outdir):
    fails = Failures("spray_fig6_nack_validation")
    up0 = [Ether(f) for _, f in read_pcap(os.path.join(outdir, "out_up0.pcap"))]
    acks = [(p[BTH].psn, p[AETH].syndrome) for p in up0 if p.haslayer(AETH)]
    fails.expect(acks == [(0, 0), (1, 0), (3, 0), (4, 0x60)], f"ACK/NAKs to the sender {acks}")
    for p in up0:
        fails.expect(p[BTH].opcode == 0x11 and p[BTH].dqpn == 0x11, "not an ACK to QPN 0x11")
        fails.expect(p[BTH].resv6 == 0, f"reserved bits {p[BTH].resv6:#x}")
        fails.expect(p[UDP].sport == 50000, "source port changed")
    fails.expect(read_pcap(os.path.join(outdir, "out_up1.pcap")) == [], "traffic on up1")
    c = counters(outdir)
    want = {"spray.d.nacks_invalid": 1, "spray.d.nacks_valid": 1,
            "spray.d.nacks_undetermined": 0, "spray.d.nacks_regenerated": 0,
            "spray.nacks_dropped": 1}
    for k, v in want.items():
        fails.expect(c.get(k) == v, f"{k} = {c.get(k)}, expected {v}")
    fails.done()


if __name__ == "__main__":
    main(sys.argv[1])
