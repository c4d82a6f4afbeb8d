#!/usr/bin/env python3
"""neighbor_arp_nd oracle: python3 check.py OUTDIR.

Independent of longhaul: every ARP and ICMPv6 neighbour-discovery frame the switch sent is decoded
by scapy and checked as RFC 826 / RFC 4861 say: ARP is Ethernet/IPv4 (htype 1, ptype 0x0800, 6, 4)
padded to 60 bytes; NS/NA have hop limit 255, code 0, a valid ICMPv6 checksum (scapy recomputes it
from the pseudo-header), a link-layer address option equal to the Ethernet source, an NS goes to
the target's solicited-node address (ff02::1:ffXX:XXXX) and its 33:33 MAC, an NA answering a
solicitation has the Solicited and Override flags and, from a router, the Router flag.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402

from scapy.config import conf  # noqa: E402
conf.verb = 0
from scapy.layers.l2 import Ether, ARP  # noqa: E402
from scapy.layers.inet6 import (IPv6, ICMPv6ND_NS, ICMPv6ND_NA, ICMPv6NDOptSrcLLAddr,  # noqa: E402
                                ICMPv6NDOptDstLLAddr, in6_getnsma, in6_getnsmac)
import socket  # noqa: E402


def check_frame(fails, where, f):
    p = Ether(f)
    if ARP in p:
        a = p[ARP]
        fails.expect(len(f) == 60, f"{where}: ARP frame of {len(f)} bytes, expected 60")
        fails.expect((a.hwtype, a.ptype, a.hwlen, a.plen) == (1, 0x800, 6, 4),
                     f"{where}: not Ethernet/IPv4 ARP")
        fails.expect(a.hwsrc == p.src, f"{where}: ARP sender MAC {a.hwsrc} != Ethernet source")
        if a.op == 1:
            fails.expect(p.dst == "ff:ff:ff:ff:ff:ff", f"{where}: request not broadcast")
        return "arp"
    if IPv6 in p and (ICMPv6ND_NS in p or ICMPv6ND_NA in p):
        ip = p[IPv6]
        fails.expect(ip.hlim == 255, f"{where}: hop limit {ip.hlim}, RFC 4861 needs 255")
        icmp = p[ICMPv6ND_NS] if ICMPv6ND_NS in p else p[ICMPv6ND_NA]
        fails.expect(icmp.code == 0, f"{where}: code {icmp.code}")
        sent = icmp.cksum
        q = Ether(f)
        layer = q[ICMPv6ND_NS] if ICMPv6ND_NS in q else q[ICMPv6ND_NA]
        del layer.cksum
        fails.expect(Ether(bytes(q))[layer.__class__].cksum == sent,
                     f"{where}: ICMPv6 checksum {sent:#x} does not verify")
        fails.expect(ip.plen == len(bytes(ip.payload)), f"{where}: payload length {ip.plen}")
        if ICMPv6ND_NS in p:
            fails.expect(ICMPv6NDOptSrcLLAddr in p and p[ICMPv6NDOptSrcLLAddr].lladdr == p.src,
                         f"{where}: NS without its source link-layer address")
            nsma = in6_getnsma(socket.inet_pton(socket.AF_INET6, icmp.tgt))
            fails.expect(ip.dst == socket.inet_ntop(socket.AF_INET6, nsma),
                         f"{where}: NS to {ip.dst}, not the solicited-node address")
            fails.expect(p.dst == in6_getnsmac(nsma), f"{where}: NS to MAC {p.dst}")
            return "ns"
        fails.expect(icmp.R == 1 and icmp.S == 1 and icmp.O == 1,
                     f"{where}: NA flags R={icmp.R} S={icmp.S} O={icmp.O}")
        fails.expect(ICMPv6NDOptDstLLAddr in p and p[ICMPv6NDOptDstLLAddr].lladdr == p.src,
                     f"{where}: NA without its target link-layer address")
        fails.expect(ip.src == icmp.tgt, f"{where}: NA from {ip.src} for {icmp.tgt}")
        return "na"
    return "other"


def main(outdir):
    fails = Failures("neighbor_arp_nd")
    kinds = {}
    for port in ("dc0", "wan0"):
        for i, (_, f) in enumerate(read_pcap(os.path.join(outdir, f"out_{port}.pcap"))):
            k = check_frame(fails, f"out_{port}[{i}]", f)
            kinds.setdefault(port, []).append(k)
    fails.expect(kinds.get("dc0") == ["arp", "na"], f"dc0 sent {kinds.get('dc0')}")
    fails.expect(kinds.get("wan0") == ["arp", "ns", "other", "other"], f"wan0 sent {kinds.get('wan0')}")
    fails.done()


if __name__ == "__main__":
    main(sys.argv[1])
