#!/usr/bin/env python3
"""themis_pnp_cnp oracle: python3 check.py OUTDIR.

Independent of longhaul: decodes the outputs with plain struct unpacking. Expects, relative to
the first input: CNPs out of dc0 at exactly 10 us and 70 us (data at 10, 30, 50, 70, 90, 110 us,
cnp_interval 50 us; none for the untrusted QP at 130 us nor after the destroy at 200 us), each a
standard RoCEv2 CNP (opcode 0x81, BECN, P_Key 0xFFFF, PSN 0, DestQP = cQPN 0x111, 16 zero bytes,
IPv4 total length 60, UDP length 40, DSCP 48, from 10.1.0.1 to 10.0.0.1, to the sender's MAC);
the 8 data packets out of wan0 with CE cleared to ECT(0) for the first six (entry present) and CE
kept for the other two. ICRCs and checksums of every output are checked by oracle/verify.py.
"""
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402

US = 1000


def main(outdir):
    fails = Failures("themis_pnp_cnp")
    inp = read_pcap(os.path.join(outdir, "in_dc0.pcap"))
    base = inp[0][0]
    cnps = read_pcap(os.path.join(outdir, "out_dc0.pcap"))
    times = [ts - base for ts, _ in cnps]
    fails.expect(times == [10 * US, 70 * US], f"CNP times {times}, expected [10000, 70000]")
    for ts, f in cnps:
        fails.expect(len(f) == 74, f"CNP length {len(f)}")
        if len(f) < 74:
            continue
        fails.expect(f[0:6] == bytes.fromhex("020000001001"), "CNP not sent to the data sender's MAC")
        fails.expect(struct.unpack("!H", f[12:14])[0] == 0x0800, "not IPv4")
        tos, total = f[15], struct.unpack("!H", f[16:18])[0]
        fails.expect(tos >> 2 == 48, f"DSCP {tos >> 2}")
        fails.expect(total == 60, f"IPv4 total length {total}")
        fails.expect(f[26:30] == bytes([10, 1, 0, 1]) and f[30:34] == bytes([10, 0, 0, 1]),
                     "CNP addresses not swapped")
        dport, ulen = struct.unpack("!HH", f[36:40])
        fails.expect(dport == 4791 and ulen == 40, f"UDP dport {dport} length {ulen}")
        bth = f[42:54]
        fails.expect(bth[0] == 0x81, f"opcode {bth[0]:#x}")
        fails.expect(struct.unpack("!H", bth[2:4])[0] == 0xFFFF, "P_Key")
        fails.expect(bth[4] & 0x40, "BECN not set")
        fails.expect(int.from_bytes(bth[5:8], "big") == 0x111, "DestQP != cQPN")
        fails.expect(int.from_bytes(bth[9:12], "big") == 0, "PSN != 0")
        fails.expect(f[54:70] == bytes(16), "reserved bytes not zero")
    out = read_pcap(os.path.join(outdir, "out_wan0.pcap"))
    fails.expect(len(out) == 8, f"{len(out)} data packets forwarded, expected 8")
    ecns = [f[15] & 3 for _, f in out]
    fails.expect(ecns == [2] * 6 + [3, 3], f"ECN of forwarded packets {ecns}")
    fails.done()


if __name__ == "__main__":
    main(sys.argv[1])
