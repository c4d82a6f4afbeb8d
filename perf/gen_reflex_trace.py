#!/usr/bin/env python3
"""Writes perf/reflex-64flows.pcap and perf/reflex-64flows-active.pcap: examples/roce-64flows.pcap
with Reflex's timestamp hop in every packet (docs/wire-formats.md), for perf/dpdk-reflex*.toml
and the Reflex benchmark.

    python3 perf/gen_reflex_trace.py

Each packet carries the requester QPN 0x100 + its flow (the flows are the trace's 64 source
hosts). In reflex-64flows.pcap the timestamp is 2^62 ns, after any live clock: NSF takes
T_src as 0 (counted in `reflex.nsf.ts_future`) and every flow stays Silent, the common case of
an uncongested source DC. In reflex-64flows-active.pcap it is 0: T_src is then far above
T_src_thresh, NSF keeps every flow Active and answers a packet of each flow every T_interval
with a pseudo-ACK (the worst case: feedback for every flow, at a looped trace's rate one for
nearly every data packet). The INT is inserted by pcap-tests/oracle/reflex_model.py (an
encoder independent of longhaul's).
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
    for name, hop_ts in (("reflex-64flows.pcap", 1 << 62), ("reflex-64flows-active.pcap", 0)):
        out = []
        for ts, frame in recs:
            host = frame[29]  # the last octet of the IPv4 source 10.0.0.N: flow N - 1
            out.append((ts, reflex_model.insert_int(frame, hop_ts, 0x100 + host - 1)))
        write_pcap(os.path.join(HERE, name), out)


if __name__ == "__main__":
    main()
