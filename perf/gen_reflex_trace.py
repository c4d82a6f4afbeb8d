#!/usr/bin/env python3
"""Writes perf/reflex-64flows.pcap: examples/roce-64flows.pcap with Reflex's timestamp hop in
every packet (docs/wire-formats.md), for perf/dpdk-reflex.toml and the Reflex benchmark.

    python3 perf/gen_reflex_trace.py

Each packet carries the requester QPN 0x100 + its flow (the flows are the trace's 64 source
hosts) and the timestamp 0: on a live clock T_src is then far above T_src_thresh, so NSF keeps
every flow Active and answers a packet of each flow every T_interval with a pseudo-ACK (the
worst case for the ESW: feedback for every flow). The INT is inserted by
pcap-tests/oracle/reflex_model.py (an encoder independent of longhaul's).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "pcap-tests", "oracle"))
from pcaputil import read_pcap, write_pcap  # noqa: E402
import reflex_model  # noqa: E402


def main():
    recs = read_pcap(os.path.join(ROOT, "examples", "roce-64flows.pcap"))
    out = []
    for ts, frame in recs:
        host = frame[29]  # the last octet of the IPv4 source 10.0.0.N: flow N - 1
        out.append((ts, reflex_model.insert_int(frame, 0, 0x100 + host - 1)))
    write_pcap(os.path.join(HERE, "reflex-64flows.pcap"), out)


if __name__ == "__main__":
    main()
