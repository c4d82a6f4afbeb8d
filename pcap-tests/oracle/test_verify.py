#!/usr/bin/env python3
"""Self-tests of the oracle: python3 pcap-tests/oracle/test_verify.py (run by the Rust suite too)."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import verify  # noqa: E402
from pcaputil import write_pcap, read_pcap  # noqa: E402

# DESIGN.md section 5: a real ConnectX-4 Lx CNP and its ICRC.
KNOWN_CNP = bytes.fromhex(
    "e41d2dab2bc27cfe90643b32" "0800" "45c2003c718c400040119161" "0a001101" "0a001201"
    "000012b700280000" "8100ffff40000118" "00000000") + bytes(16)
KNOWN_ICRC = bytes.fromhex("82fd002a")


def roce_frame():
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.packet import Raw
    from scapy.contrib.roce import BTH
    p = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
         / IP(src="10.1.0.1", dst="10.2.0.1", tos=0x6a, ttl=64)
         / UDP(sport=49152, dport=4791, chksum=0)
         / BTH(opcode=0x0a, dqpn=0x123, psn=7, ackreq=1) / Raw(bytes(range(16)) + b"p" * 48))
    return bytes(p)


def pfc_frame(enbv=0x08, times=(0, 0, 0, 0xFFFF, 0, 0, 0, 0), dst="0180c2000001", length=60):
    f = bytes.fromhex(dst) + bytes.fromhex("020000000001") + b"\x88\x08" + struct.pack("!HH8H", 0x0101, enbv, *times)
    return f + bytes(max(0, length - len(f))) if length >= len(f) else f[:length]


class TestVerify(unittest.TestCase):
    def run_on(self, frames):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "f.pcap")
            write_pcap(p, [(1000 * i, f) for i, f in enumerate(frames)])
            r = subprocess.run([sys.executable, os.path.join(HERE, "verify.py"), p],
                               capture_output=True, text=True)
            return r.returncode, r.stdout + r.stderr

    def test_known_answer_cnp(self):
        ip = KNOWN_CNP[14:]
        self.assertEqual(verify.icrc(ip, ipv6=False), KNOWN_ICRC)
        rc, out = self.run_on([KNOWN_CNP + KNOWN_ICRC])
        self.assertEqual(rc, 0, out)

    def test_scapy_roce_passes_and_icrc_corruption_fails(self):
        f = roce_frame()
        self.assertEqual(self.run_on([f])[0], 0)
        bad = bytearray(f)
        bad[-2] ^= 0x01
        rc, out = self.run_on([bytes(bad)])
        self.assertEqual(rc, 1, out)
        self.assertIn("bad ICRC", out)

    def test_masked_fields_keep_icrc_valid(self):
        f = bytearray(roce_frame())
        f[15] |= 3          # CE
        f[22] -= 1          # TTL
        f[24:26] = b"\0\0"  # recompute the IPv4 checksum
        f[24:26] = struct.pack("!H", verify.inet_checksum(bytes(f[14:34])))
        f[42 + 4] |= 0xC0   # FECN + BECN
        self.assertEqual(self.run_on([bytes(f)])[0], 0)
        f[42 + 11] ^= 1     # PSN is covered
        self.assertEqual(self.run_on([bytes(f)])[0], 1)

    def test_ipv4_checksum_corruption_fails(self):
        f = bytearray(roce_frame())
        f[24] ^= 0xFF
        rc, out = self.run_on([bytes(f)])
        self.assertEqual(rc, 1)
        self.assertIn("IPv4 header checksum", out)

    def test_tcp_and_udp_checksums(self):
        from scapy.layers.l2 import Ether
        from scapy.layers.inet import IP, UDP, TCP
        t = bytes(Ether() / IP(src="10.1.0.1", dst="10.2.0.1") / TCP(sport=1, dport=2, flags="PA") / (b"d" * 20))
        u = bytes(Ether() / IP(src="10.1.0.1", dst="10.2.0.1") / UDP(sport=1, dport=53) / (b"q" * 20))
        self.assertEqual(self.run_on([t, u])[0], 0)
        for frame in (t, u):
            bad = bytearray(frame)
            bad[-1] ^= 0x55
            rc, out = self.run_on([bytes(bad)])
            self.assertEqual(rc, 1, out)
            self.assertIn("checksum", out)

    def test_pfc_frames(self):
        rc, out = self.run_on([pfc_frame(), pfc_frame(times=(0,) * 8)])
        self.assertEqual(rc, 0, out)
        self.assertIn("enbv=0x08 p3=65535", out)
        self.assertIn("p3=XON", out)
        for bad, why in ((pfc_frame(dst="0180c2000002"), "expected 01:80:c2:00:00:01"),
                         (pfc_frame(length=64), "expected 60"),
                         (pfc_frame(enbv=0x01), "enable bit is clear")):
            rc, out = self.run_on([bad])
            self.assertEqual(rc, 1, out)
            self.assertIn(why, out)

    def test_pcaputil_round_trip(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "x.pcap")
            recs = [(1_700_000_000_123_456_789, b"abc"), (5, b"")]
            write_pcap(p, recs)
            self.assertEqual(read_pcap(p), recs)


if __name__ == "__main__":
    unittest.main()
