#!/usr/bin/env python3
"""Independent wire-format oracle for longhaul outputs (DESIGN.md sections 5 and 6).

    python3 verify.py [--quiet] FILE.pcap [FILE.pcap ...]

For every frame of every file:
  * RoCEv2 (UDP dst port 4791, over IPv4 or IPv6): recompute the ICRC from scratch -- CRC-32
    (IEEE) over 8 bytes of 0xFF, then IP+UDP+BTH with IPv4 ToS/TTL/checksum (IPv6 traffic class,
    flow label, hop limit), UDP checksum and BTH byte 4 set to all ones, then the rest of the
    packet up to the ICRC -- and compare with the 4 trailing bytes (stored LSB first);
  * IPv4: header checksum; UDP checksum when non-zero; TCP checksum always;
    lengths consistent with the captured frame;
  * MAC control (EtherType 0x8808): PFC (opcode 0x0101) and PAUSE (0x0001) frames must be sent
    to 01:80:c2:00:00:01 and be exactly 60 bytes (no FCS); PFC frames are printed.
Exits 1 listing every violation, 0 otherwise. Uses no longhaul code: only the Python standard
library, plus scapy (when importable) to print a readable summary of offending frames.
"""
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pcaputil import read_pcap, PcapError  # noqa: E402

ROCE_PORT = 4791
PFC_DST = bytes.fromhex("0180c2000001")
MAX_REPORTED = 50


def ones_sum(data):
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def inet_checksum(data):
    return (~ones_sum(data)) & 0xFFFF


def icrc(ip_and_rest, ipv6):
    """ICRC over the IP packet (without the trailing 4 ICRC bytes). Returns the 4 stored bytes."""
    b = bytearray(ip_and_rest)
    if ipv6:
        b[0] |= 0x0F          # traffic class (high nibble)
        b[1] = b[2] = b[3] = 0xFF  # traffic class (low nibble) + flow label
        b[7] = 0xFF           # hop limit
        l4 = 40
    else:
        ihl = (b[0] & 0x0F) * 4
        b[1] = 0xFF           # ToS (DSCP + ECN)
        b[8] = 0xFF           # TTL
        b[10] = b[11] = 0xFF  # header checksum
        l4 = ihl
    b[l4 + 6] = b[l4 + 7] = 0xFF  # UDP checksum
    b[l4 + 8 + 4] = 0xFF          # BTH byte 4: FECN, BECN, resv6
    crc = zlib.crc32(b"\xff" * 8 + bytes(b)) & 0xFFFFFFFF
    return struct.pack("<I", crc)


def mac(b):
    return ":".join("%02x" % x for x in b)


class Checker:
    def __init__(self, quiet=False):
        self.violations = []
        self.quiet = quiet
        self.stats = {}

    def bad(self, where, frame, msg):
        summary = ""
        try:
            from scapy.layers.l2 import Ether
            import scapy.contrib.roce  # noqa: F401  (binds UDP 4791 to BTH)
            summary = " [" + Ether(frame).summary() + "]"
        except Exception:
            pass
        self.violations.append(f"{where}: {msg}{summary}")

    def count(self, k):
        self.stats[k] = self.stats.get(k, 0) + 1

    def frame(self, where, ts, f):
        self.count("frames")
        if len(f) < 14:
            return self.bad(where, f, f"runt frame of {len(f)} bytes")
        et = struct.unpack("!H", f[12:14])[0]
        off = 14
        while et in (0x8100, 0x88A8) and len(f) >= off + 4:
            et = struct.unpack("!H", f[off + 2:off + 4])[0]
            off += 4
        if et == 0x0800:
            self.ipv4(where, f, off)
        elif et == 0x86DD:
            self.ipv6(where, f, off)
        elif et == 0x8808:
            self.mac_control(where, ts, f, off)
        else:
            self.count("other")

    def ipv4(self, where, f, off):
        self.count("ipv4")
        if len(f) < off + 20:
            return self.bad(where, f, "IPv4 header truncated")
        ver, ihl = f[off] >> 4, (f[off] & 0x0F) * 4
        if ver != 4 or ihl < 20:
            return self.bad(where, f, f"bad IPv4 version/IHL {f[off]:#04x}")
        tot = struct.unpack("!H", f[off + 2:off + 4])[0]
        if tot < ihl or off + tot > len(f):
            return self.bad(where, f, f"IPv4 total length {tot} does not fit the {len(f)}-byte frame")
        hdr = f[off:off + ihl]
        if ones_sum(hdr) != 0xFFFF:
            got = struct.unpack("!H", hdr[10:12])[0]
            h0 = bytearray(hdr)
            h0[10:12] = b"\0\0"
            return self.bad(where, f, f"IPv4 header checksum {got:#06x}, expected {inet_checksum(bytes(h0)):#06x}")
        if f[off + 1] & 3 == 3:
            self.count("ce")
        frag = struct.unpack("!H", f[off + 6:off + 8])[0]
        if frag & 0x3FFF:
            self.count("fragment")
            return
        proto = f[off + 9]
        pseudo = f[off + 12:off + 20] + struct.pack("!BBH", 0, proto, tot - ihl)
        self.l4(where, f, off, off + ihl, off + tot, proto, pseudo, ipv6=False)

    def ipv6(self, where, f, off):
        self.count("ipv6")
        if len(f) < off + 40 or f[off] >> 4 != 6:
            return self.bad(where, f, "IPv6 header truncated or bad version")
        plen = struct.unpack("!H", f[off + 4:off + 6])[0]
        end = off + 40 + plen
        if end > len(f):
            return self.bad(where, f, f"IPv6 payload length {plen} does not fit the {len(f)}-byte frame")
        if (struct.unpack("!I", f[off:off + 4])[0] >> 20) & 3 == 3:
            self.count("ce")
        proto = f[off + 6]
        pseudo = f[off + 8:off + 40] + struct.pack("!IxxxB", plen, proto)
        self.l4(where, f, off, off + 40, end, proto, pseudo, ipv6=True)

    def l4(self, where, f, ip_off, l4_off, end, proto, pseudo, ipv6):
        seg = f[l4_off:end]
        if proto == 17:
            self.count("udp")
            if len(seg) < 8:
                return self.bad(where, f, "UDP header truncated")
            dport, ulen, csum = struct.unpack("!HHH", seg[2:8])
            if ulen != len(seg):
                return self.bad(where, f, f"UDP length {ulen} != IP payload length {len(seg)}")
            if csum != 0 and ones_sum(pseudo + seg) != 0xFFFF:
                s0 = bytearray(seg)
                s0[6:8] = b"\0\0"
                exp = inet_checksum(pseudo + bytes(s0)) or 0xFFFF
                self.bad(where, f, f"UDP checksum {csum:#06x}, expected {exp:#06x}")
            if csum == 0 and ipv6 and dport != ROCE_PORT:
                self.bad(where, f, "UDP over IPv6 with a zero checksum")
            if dport == ROCE_PORT:
                self.roce(where, f, ip_off, l4_off, end, ipv6)
        elif proto == 6:
            self.count("tcp")
            if len(seg) < 20:
                return self.bad(where, f, "TCP header truncated")
            if ones_sum(pseudo + seg) != 0xFFFF:
                s0 = bytearray(seg)
                s0[16:18] = b"\0\0"
                got = struct.unpack("!H", seg[16:18])[0]
                self.bad(where, f, f"TCP checksum {got:#06x}, expected {inet_checksum(pseudo + bytes(s0)):#06x}")

    def roce(self, where, f, ip_off, l4_off, end, ipv6):
        self.count("roce")
        if end - (l4_off + 8) < 12 + 4:
            return self.bad(where, f, f"RoCEv2 packet too short for BTH + ICRC ({end - l4_off - 8} UDP payload bytes)")
        bth = f[l4_off + 8:l4_off + 20]
        if bth[0] == 0x81:
            self.count("cnp")
        if bth[4] & 0x80:
            self.count("fecn")
        stored = f[end - 4:end]
        want = icrc(f[ip_off:end - 4], ipv6)
        if stored != want:
            self.bad(where, f, f"bad ICRC {stored.hex()}, expected {want.hex()} (opcode {bth[0]:#04x}, "
                               f"dqpn {int.from_bytes(bth[5:8], 'big'):#x}, psn {int.from_bytes(bth[9:12], 'big')})")

    def mac_control(self, where, ts, f, off):
        self.count("mac_control")
        if len(f) < off + 2:
            return self.bad(where, f, "MAC control frame truncated")
        op = struct.unpack("!H", f[off:off + 2])[0]
        if op not in (0x0101, 0x0001):
            return self.bad(where, f, f"unknown MAC control opcode {op:#06x}")
        kind = "PFC" if op == 0x0101 else "PAUSE"
        if f[0:6] != PFC_DST:
            self.bad(where, f, f"{kind} frame to {mac(f[0:6])}, expected 01:80:c2:00:00:01")
        if len(f) != 60:
            return self.bad(where, f, f"{kind} frame of {len(f)} bytes, expected 60 (padded, no FCS)")
        if op == 0x0001:
            self.count("pause")
            t = struct.unpack("!H", f[off + 2:off + 4])[0]
            if any(f[off + 4:]):
                self.bad(where, f, "PAUSE frame padding not zero")
            if not self.quiet:
                print(f"{where} t={ts} PAUSE src={mac(f[6:12])} time={t}")
            return
        self.count("pfc")
        enbv = struct.unpack("!H", f[off + 2:off + 4])[0]
        times = struct.unpack("!8H", f[off + 4:off + 20])
        if enbv >> 8:
            self.bad(where, f, f"PFC class-enable vector {enbv:#06x} has reserved high bits set")
        if any(f[off + 20:]):
            self.bad(where, f, "PFC frame padding not zero")
        for i in range(8):
            if times[i] and not (enbv >> i) & 1:
                self.bad(where, f, f"PFC pause time for priority {i} set but its enable bit is clear")
        if not self.quiet:
            prios = ",".join(f"p{i}={'XON' if times[i] == 0 else times[i]}" for i in range(8) if enbv >> i & 1)
            print(f"{where} t={ts} PFC src={mac(f[6:12])} enbv={enbv:#04x} {prios}")


def main(argv):
    quiet = "--quiet" in argv
    files = [a for a in argv if a != "--quiet"]
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    chk = Checker(quiet)
    for path in files:
        try:
            recs = read_pcap(path)
        except (OSError, PcapError) as e:
            chk.violations.append(f"{path}: cannot read: {e}")
            continue
        for i, (ts, f) in enumerate(recs):
            chk.frame(f"{os.path.basename(path)} frame #{i}", ts, f)
    stats = " ".join(f"{k}={v}" for k, v in sorted(chk.stats.items()))
    print(f"verify.py: {len(files)} file(s): {stats or 'no frames'}")
    if chk.violations:
        for v in chk.violations[:MAX_REPORTED]:
            print("VIOLATION " + v)
        if len(chk.violations) > MAX_REPORTED:
            print(f"... and {len(chk.violations) - MAX_REPORTED} more")
        print(f"verify.py: FAILED: {len(chk.violations)} violation(s)")
        return 1
    print("verify.py: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
