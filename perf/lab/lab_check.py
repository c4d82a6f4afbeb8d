#!/usr/bin/env python3
"""Helpers of perf/lab/netns.sh: trace generation, config reading and capture checks.

    lab_check.py config FILE                     shell assignments read from a longhaul config
    lab_check.py gen-roce OUT.pcap --src-mac M --dst-mac M --src IP --dst IP --dqpn Q --count N [--ce]
    lab_check.py send-daemon TO DST CQPN SQPN FLAG   send a THEMIS daemon message to TO:12345
    lab_check.py tcp-sink ADDR PORT OUT / tcp-send ADDR PORT FILE   one TCP transfer
    lab_check.py retarget IN.pcap OUT.pcap --src-mac M --dst-mac M [--src IP] [--dst IP]
    lab_check.py forwarded IN.pcap CAPTURE.pcap --src-mac M --dst-mac M --ttl-dec D
    lab_check.py neighbor CAPTURE.pcap --port-mac M --port-ip IP --port-ip6 IP6 --host-mac M --host-ip IP --host-ip6 IP6
    lab_check.py cnps CAPTURE.pcap --count N --dqpn Q --src IP --dst IP --eth-src M --eth-dst M
    lab_check.py ecn CAPTURE.pcap --src IP --dst IP --dqpn Q --count N --ecn E
    lab_check.py stats S0.json S1.json           per-port counter deltas between two /stats
    lab_check.py counter S0.json S1.json NAME...  pipeline counter deltas, one per line

Each check prints one line saying what it saw and exits 1 when it does not hold. Frames are
decoded with plain struct unpacking, and RoCEv2 ICRCs are recomputed by
pcap-tests/oracle/verify.py's icrc() (CRC-32 over the masked IP packet, independent of longhaul);
scapy builds the generated trace and decodes ARP / neighbour discovery (`neighbor`).
"""
import argparse
import collections
import json
import ipaddress
import os
import re
import struct
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pcap-tests", "oracle"))
from pcaputil import read_pcap, write_pcap  # noqa: E402
from verify import icrc, inet_checksum  # noqa: E402

ROCE_PORT = 4791


def mac_bytes(s):
    return bytes(int(x, 16) for x in s.replace("-", ":").split(":"))


def ip_bytes(s):
    return bytes(int(x) for x in s.split("."))


def ipv4(f):
    """(ip_offset, ihl) of an untagged IPv4 frame, or None."""
    if len(f) < 34 or struct.unpack("!H", f[12:14])[0] != 0x0800 or f[14] >> 4 != 4:
        return None
    return 14, (f[14] & 0x0F) * 4


def roce(f):
    """(ip_off, l4_off, end, bth) of a RoCEv2-over-IPv4 frame, or None."""
    p = ipv4(f)
    if p is None:
        return None
    off, ihl = p
    if f[off + 9] != 17:
        return None
    l4 = off + ihl
    if len(f) < l4 + 8 + 12 + 4 or struct.unpack("!H", f[l4 + 2:l4 + 4])[0] != ROCE_PORT:
        return None
    end = off + struct.unpack("!H", f[off + 2:off + 4])[0]
    return off, l4, end, f[l4 + 8:l4 + 20]


# ---- config ---------------------------------------------------------------------------------

MODES = ("routed-static", "routed-arp", "wire")


def lab_mode(text, cfg, port_of):
    """The lab mode: a `# lab: mode = MODE` line in the file, else what the config does (a
    [[wire]] pair: wire; ports with addresses: routed-arp; [[routes]]: routed-static). The
    config must then be set up that way for the lab's two ports; exits with the reason if not."""
    declared = None
    for line in text.splitlines():
        m = re.match(r"\s*#\s*lab:\s*mode\s*=\s*(\S+)\s*$", line)
        if m:
            declared = m.group(1)
            if declared not in MODES:
                sys.exit(f"'# lab: mode = {declared}': unknown mode (one of {', '.join(MODES)})")
    names = {port_of["sw-h1"]["name"], port_of["sw-h2"]["name"]}
    wired = any(set(w.get("ports", [])) == names for w in cfg.get("wire", []))
    addressed = all(port_of[i].get("addresses") for i in ("sw-h1", "sw-h2"))
    detected = ("wire" if wired else "routed-arp" if addressed
                else "routed-static" if cfg.get("routes") else None)
    mode = declared or detected
    if mode is None:
        sys.exit("no lab mode: the config has no [[wire]] pair of the lab's ports, no addresses "
                 "on them and no [[routes]] (or say '# lab: mode = ...')")
    if mode == "wire" and not wired:
        sys.exit(f"mode wire: no [[wire]] pair of the lab's ports {sorted(names)}")
    if mode == "routed-arp" and not addressed:
        sys.exit("mode routed-arp: both lab ports need addresses (an IPv4 one at least)")
    if mode == "routed-static" and (wired or not cfg.get("routes")):
        sys.exit("mode routed-static: needs [[routes]] and no [[wire]] pair of the lab's ports")
    return mode


def port_addrs(port):
    """(IPv4 interface, IPv6 interface or None) of a port's `addresses`."""
    v4 = [ipaddress.ip_interface(a) for a in port.get("addresses", []) if ":" not in a]
    v6 = [ipaddress.ip_interface(a) for a in port.get("addresses", []) if ":" in a]
    return (v4[0] if v4 else None), (v6[0] if v6 else None)


def host_addr(iface):
    """The lab host's address next to a port's: the port's + 1, on the same subnet."""
    h = ipaddress.ip_interface(f"{iface.ip + 1}/{iface.network.prefixlen}")
    if h.network != iface.network or h.ip == iface.network.broadcast_address:
        sys.exit(f"no room for a host after {iface} on its subnet")
    return h


def cmd_config(a):
    """Shell assignments: API address, pipeline, lab mode, the MACs of the ports bound to the
    lab's interfaces (sw-h1, sw-h2) through --vdev=...,iface=..., and in routed-arp mode the
    ports' addresses (gateways) and the hosts' (the port's + 1)."""
    with open(a.file, "rb") as f:
        raw = f.read()
    cfg = tomllib.loads(raw.decode())
    vdev_iface = {}
    for arg in cfg.get("dpdk", {}).get("eal_args", []):
        if arg.startswith("--vdev="):
            name, *kv = arg[len("--vdev="):].split(",")
            for item in kv:
                if item.startswith("iface="):
                    vdev_iface[name] = item[len("iface="):]
    port_of = {}
    for p in cfg.get("ports", []):
        dev = p.get("io", {}).get("device")
        if dev in vdev_iface:
            port_of[vdev_iface[dev]] = p
    missing = [i for i in ("sw-h1", "sw-h2") if i not in port_of]
    if missing:
        sys.exit(f"{a.file}: no DPDK port on interface(s) {', '.join(missing)} "
                 "(a port with io.device = a vdev whose eal_args entry has iface=sw-h1 / sw-h2)")
    mode = lab_mode(raw.decode(), cfg, port_of)
    ctl = cfg.get("control", {})
    out = {
        "CFG_API": ctl.get("api_listen", "127.0.0.1:9410"),
        "CFG_TOKEN": ctl.get("api_token", ""),
        "CFG_PIPELINE": cfg["switch"].get("pipeline", "baseline"),
        "CFG_MODE": mode,
        "CFG_H1_PORT": port_of["sw-h1"]["name"],
        "CFG_H1_PORT_MAC": port_of["sw-h1"]["mac"].lower(),
        "CFG_H2_PORT": port_of["sw-h2"]["name"],
        "CFG_H2_PORT_MAC": port_of["sw-h2"]["mac"].lower(),
    }
    if mode == "routed-arp":
        if len({port_addrs(port_of[i])[1] is None for i in ("sw-h1", "sw-h2")}) != 1:
            sys.exit("mode routed-arp: give both lab ports an IPv6 address, or neither")
        for h, iface in (("H1", "sw-h1"), ("H2", "sw-h2")):
            v4, v6 = port_addrs(port_of[iface])
            if v4 is None:
                sys.exit(f"mode routed-arp: port {port_of[iface]['name']} has no IPv4 address")
            out[f"CFG_{h}_GW"] = str(v4.ip)
            out[f"CFG_{h}_ADDR"] = str(host_addr(v4))
            out[f"CFG_{h}_GW6"] = str(v6.ip) if v6 else ""
            out[f"CFG_{h}_ADDR6"] = str(host_addr(v6)) if v6 else ""
    for k, v in out.items():
        if any(c in v for c in "'\\\n"):
            sys.exit(f"{a.file}: unexpected characters in {k}")
        print(f"{k}='{v}'")


# ---- trace generation -----------------------------------------------------------------------

def cmd_gen_roce(a):
    from scapy.config import conf
    conf.verb = 0
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.packet import Raw
    from scapy.contrib.roce import BTH

    ecn = 0b11 if a.ce else 0b10
    recs = []
    t0 = 1_700_000_000 * 1_000_000_000
    for psn in range(a.count):
        data = bytes((psn * 31 + i * 7) & 0xFF for i in range(256))
        # RC SEND_ONLY (opcode 0x04), DSCP 26 (RoCE data class), UDP checksum 0 as RNICs send it.
        p = (Ether(src=a.src_mac, dst=a.dst_mac)
             / IP(src=a.src, dst=a.dst, tos=(26 << 2) | ecn, ttl=64, id=psn + 1, flags="DF")
             / UDP(sport=49152, dport=ROCE_PORT, chksum=0)
             / BTH(opcode=0x04, dqpn=a.dqpn, psn=psn, ackreq=1)
             / Raw(data))
        f = bytes(p)
        r = roce(f)
        assert r and f[r[2] - 4:r[2]] == icrc(f[r[0]:r[2] - 4], False), "scapy ICRC mismatch"
        recs.append((t0 + psn * 1000, f))
    write_pcap(a.out, recs)
    print(f"{a.out}: {a.count} RoCEv2 SEND_ONLY frames {a.src} -> {a.dst}, DestQP {a.dqpn:#x}, "
          f"ECN {'CE' if a.ce else 'ECT(0)'}")


def cmd_send_daemon(a):
    """A THEMIS daemon message (docs/wire-formats.md: UDP to port 12345, four big-endian u32:
    destination IP, cQPN, sQPN, flag) sent from a kernel UDP socket, as the host daemon does."""
    import socket
    body = struct.pack("!IIII", int.from_bytes(ip_bytes(a.dst), "big"), a.cqpn, a.sqpn, a.flag)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(body, (a.to, 12345))
    print(f"daemon message to {a.to}:12345: dst {a.dst} cQPN {a.cqpn:#x} sQPN {a.sqpn:#x} flag {a.flag}")


# Socket buffers of the TCP transfer. The lab checks forwarding, not congestion: with Linux's
# autotuned buffers (4-6 MB) one flow keeps more in flight than longhaul's egress queue holds
# (queue_limit_bytes = 1 MiB in the lab configs), and whenever af_packet's transmit falls behind
# on the busy 2-core VM the queue fills and tail-drops (drop.queue_full: seen twice in about 20
# runs; TCP recovers). 256 KiB (the kernel doubles it; about half of that is window) keeps what
# is in flight well below the queue limit, so a drop is always worth a FAIL.
TCP_BUF = 256 * 1024


def cmd_tcp_sink(a):
    """Accept one TCP connection on ADDR:PORT, write what arrives to OUT."""
    import socket
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TCP_BUF)  # inherited by the connection
        srv.bind((a.addr, a.port))
        srv.listen(1)
        srv.settimeout(a.timeout)
        print("listening", flush=True)
        c, _ = srv.accept()
        c.settimeout(a.timeout)
        with c, open(a.out, "wb") as f:
            while True:
                b = c.recv(1 << 16)
                if not b:
                    break
                f.write(b)


def cmd_tcp_send(a):
    """Connect to ADDR:PORT, send FILE, close; prints the goodput."""
    import socket
    import time
    with open(a.file, "rb") as f:
        data = f.read()
    t0 = time.monotonic()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, TCP_BUF)
        s.settimeout(a.timeout)
        s.connect((a.addr, a.port))
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)  # the sink closes after reading everything
    dt = time.monotonic() - t0
    print(f"{len(data)} bytes in {dt:.3f} s ({len(data) * 8 / dt / 1e6:.0f} Mb/s)")


def cmd_retarget(a):
    """IN's frames with new MACs and, for IPv4, new source and destination addresses: the IPv4
    header checksum, a non-zero UDP checksum and the RoCEv2 ICRC recomputed (tcprewrite would
    leave the ICRC invalid). The rest of each frame is kept byte for byte."""
    smac, dmac = mac_bytes(a.src_mac), mac_bytes(a.dst_mac)
    recs, n_ip, n_roce = [], 0, 0
    for ts, f in read_pcap(a.inp):
        g = bytearray(f)
        g[0:6], g[6:12] = dmac, smac
        p = ipv4(f)
        if p and (a.src or a.dst):
            off, ihl = p
            n_ip += 1
            if a.src:
                g[off + 12:off + 16] = ip_bytes(a.src)
            if a.dst:
                g[off + 16:off + 20] = ip_bytes(a.dst)
            g[off + 10:off + 12] = b"\0\0"
            g[off + 10:off + 12] = struct.pack("!H", inet_checksum(bytes(g[off:off + ihl])))
            end = off + struct.unpack("!H", f[off + 2:off + 4])[0]
            l4 = off + ihl
            if g[off + 9] in (6, 17):
                ck = l4 + (16 if g[off + 9] == 6 else 6)
                if g[off + 9] == 6 or g[ck:ck + 2] != b"\0\0":
                    g[ck:ck + 2] = b"\0\0"
                    pseudo = bytes(g[off + 12:off + 20]) + struct.pack("!BBH", 0, g[off + 9], end - l4)
                    c = inet_checksum(pseudo + bytes(g[l4:end]))
                    g[ck:ck + 2] = struct.pack("!H", c or (0xFFFF if g[off + 9] == 17 else 0))
            r = roce(bytes(g))
            if r:
                n_roce += 1
                g[end - 4:end] = icrc(bytes(g[off:end - 4]), False)
        recs.append((ts, bytes(g)))
    write_pcap(a.out, recs)
    print(f"{a.out}: {len(recs)} frames, MACs {a.src_mac} -> {a.dst_mac}"
          + (f", {n_ip} IPv4 packets now {a.src or '(source kept)'} -> {a.dst or '(destination kept)'}, "
             f"{n_roce} ICRCs recomputed" if a.src or a.dst else ""))


# ---- checks ---------------------------------------------------------------------------------

def routed_copy(f, src_mac, dst_mac, ttl_dec):
    """What a router makes of an IPv4 frame: MACs rewritten, TTL - ttl_dec, header checksum
    recomputed (the RoCE ICRC masks the TTL, so it is kept)."""
    g = bytearray(f)
    g[0:6], g[6:12] = dst_mac, src_mac
    p = ipv4(f)
    if p and ttl_dec:
        off, ihl = p
        g[off + 8] = (g[off + 8] - ttl_dec) & 0xFF
        g[off + 10:off + 12] = b"\0\0"
        g[off + 10:off + 12] = struct.pack("!H", inet_checksum(bytes(g[off:off + ihl])))
    return bytes(g)


def cmd_forwarded(a):
    """Every frame of IN, as the switch should forward it, is in CAPTURE exactly once (the
    capture may hold other frames too: those are not counted)."""
    sent = [f for _, f in read_pcap(a.inp)]
    want = collections.Counter(routed_copy(f, mac_bytes(a.src_mac), mac_bytes(a.dst_mac), a.ttl_dec)
                               for f in sent)
    got = collections.Counter(f for _, f in read_pcap(a.capture))
    matched = sum(min(n, got[f]) for f, n in want.items())
    dup = sum(max(0, got[f] - n) for f, n in want.items())
    bad_icrc = 0
    for f in want:
        r = roce(f)
        if r and got[f] and f[r[2] - 4:r[2]] != icrc(f[r[0]:r[2] - 4], False):
            bad_icrc += 1
    how = f"TTL -{a.ttl_dec}, IPv4 checksum updated" if a.ttl_dec else "TTL and the rest unchanged"
    print(f"{matched}/{len(sent)} frames arrived byte-exact (MACs {a.src_mac} -> {a.dst_mac}, "
          f"{how}), {dup} duplicates, {bad_icrc} bad ICRCs")
    sys.exit(0 if matched == len(sent) and dup == 0 and bad_icrc == 0 else 1)


def cmd_cnps(a):
    """CNPs in CAPTURE (BTH opcode 0x81): exactly --count, each a standard RoCEv2 CNP from
    --src to --dst with DestQP --dqpn, BECN, P_Key 0xFFFF, 16 zero bytes, a valid ICRC."""
    cnps, problems = 0, []
    for i, (_, f) in enumerate(read_pcap(a.capture)):
        r = roce(f)
        if not r or r[3][0] != 0x81:
            continue
        cnps += 1
        off, l4, end, bth = r

        def bad(msg):
            problems.append(f"frame {i + 1}: {msg}")
        if f[0:6] != mac_bytes(a.eth_dst) or f[6:12] != mac_bytes(a.eth_src):
            bad(f"MACs {f[6:12].hex(':')} -> {f[0:6].hex(':')}")
        if f[off + 12:off + 16] != ip_bytes(a.src) or f[off + 16:off + 20] != ip_bytes(a.dst):
            bad("addresses")
        if int.from_bytes(bth[5:8], "big") != a.dqpn:
            bad(f"DestQP {int.from_bytes(bth[5:8], 'big'):#x}, expected {a.dqpn:#x}")
        if not bth[4] & 0x40:
            bad("BECN not set")
        if bth[2:4] != b"\xff\xff":
            bad(f"P_Key {bth[2:4].hex()}")
        if end - l4 != 8 + 12 + 16 + 4 or f[l4 + 20:end - 4] != bytes(16):
            bad(f"UDP payload of {end - l4 - 8} bytes, not BTH + 16 zero bytes + ICRC")
        if f[end - 4:end] != icrc(f[off:end - 4], False):
            bad(f"ICRC {f[end - 4:end].hex()}, recomputed {icrc(f[off:end - 4], False).hex()}")
    for p in problems[:10]:
        print("  " + p)
    print(f"{cnps} CNPs (expected {a.count}), {len(problems)} problems "
          f"(ICRC recomputed independently for each)")
    sys.exit(0 if cnps == a.count and not problems else 1)


def cmd_neighbor(a):
    """The ARP and IPv6 neighbour discovery frames the port (--port-mac) sent to the host in
    CAPTURE, decoded by scapy and checked independently (RFC 826 / RFC 4861, as
    pcap-tests/cases/neighbor_arp_nd/check.py does, plus the lab's addresses): ARP is
    Ethernet/IPv4, 60 bytes, from the port's MAC and IPv4 address, a reply to the host's MAC and
    address, a request broadcast (or a unicast probe to the host) for the host's address; NS and
    NA have hop limit 255, code 0, an ICMPv6 checksum that scapy recomputes equal, a link-layer
    option equal to the port's MAC; an NS is for the host's address, from the port's IPv6 address,
    to the solicited-node address and its 33:33 MAC (or a unicast probe); an NA answers with
    Router, Solicited and Override set, for and from the port's address, to the host. Prints a
    summary line, then the counts as shell assignments (NEIGH_ARP_REPLY=...). ARP frames: a
    request longhaul builds must be padded to 60 bytes; a reply (the request turned around in
    place) may be as short as the request was: 42 bytes from a veth, where nothing pads."""
    import socket
    from scapy.config import conf
    conf.verb = 0
    from scapy.layers.l2 import Ether, ARP
    from scapy.layers.inet6 import (IPv6, ICMPv6ND_NS, ICMPv6ND_NA, ICMPv6NDOptSrcLLAddr,
                                    ICMPv6NDOptDstLLAddr, in6_getnsma, in6_getnsmac)
    pmac, hmac = a.port_mac.lower(), a.host_mac.lower()
    n6 = (lambda s: socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, s)))
    counts = collections.Counter()
    problems = []
    pmac_b = mac_bytes(pmac)
    for i, (_, f) in enumerate(read_pcap(a.capture)):
        # scapy decodes only the port's own ARP / IPv6 frames (fast on a capture of thousands).
        if f[6:12] != pmac_b or f[12:14] not in (b"\x08\x06", b"\x86\xdd"):
            continue
        p = Ether(f)
        where = f"frame {i + 1}"

        def expect(cond, msg):
            if not cond:
                problems.append(f"{where}: {msg} [{p.summary()}]")
        if ARP in p:
            r = p[ARP]
            # A request longhaul builds is zero-padded to the Ethernet minimum (60 bytes); a reply
            # is the host's request turned around in place, as long as it was (42 bytes from a
            # veth: Linux leaves the padding to the NIC, and a veth has none).
            expect(len(f) >= 42, f"ARP frame of {len(f)} bytes, shorter than Ethernet + ARP (42)")
            expect(r.op != 1 or len(f) == 60, f"ARP request of {len(f)} bytes, expected 60 (padded)")
            counts[f"ARP_LEN_{len(f)}"] += 1
            expect((r.hwtype, r.ptype, r.hwlen, r.plen) == (1, 0x800, 6, 4), "not Ethernet/IPv4 ARP")
            expect(r.hwsrc.lower() == pmac, f"sender MAC {r.hwsrc}, not the port's")
            expect(r.psrc == a.port_ip, f"sender address {r.psrc}, not the port's {a.port_ip}")
            expect(r.pdst == a.host_ip, f"target address {r.pdst}, not the host's {a.host_ip}")
            if r.op == 2:
                counts["ARP_REPLY"] += 1
                expect(p.dst.lower() == hmac and r.hwdst.lower() == hmac,
                       f"reply to {p.dst} / target MAC {r.hwdst}, not the host's {hmac}")
            elif r.op == 1 and p.dst == "ff:ff:ff:ff:ff:ff":
                counts["ARP_REQUEST"] += 1
            elif r.op == 1:
                counts["ARP_PROBE"] += 1
                expect(p.dst.lower() == hmac, f"unicast request to {p.dst}, not the host")
            else:
                expect(False, f"ARP op {r.op}")
            continue
        if IPv6 not in p or not (ICMPv6ND_NS in p or ICMPv6ND_NA in p):
            continue
        ip = p[IPv6]
        kind = ICMPv6ND_NS if ICMPv6ND_NS in p else ICMPv6ND_NA
        if not a.port_ip6 or not a.host_ip6:
            expect(False, "neighbour discovery, but the port or the host has no IPv6 address")
            continue
        m = p[kind]
        expect(ip.hlim == 255, f"hop limit {ip.hlim}, RFC 4861 needs 255")
        expect(m.code == 0, f"code {m.code}")
        expect(ip.plen == len(bytes(ip.payload)), f"payload length {ip.plen}")
        q = Ether(f)
        del q[kind].cksum
        again = Ether(bytes(q))[kind].cksum
        expect(again == m.cksum, f"ICMPv6 checksum {m.cksum:#06x}, scapy computes {again:#06x}")
        if kind is ICMPv6ND_NS:
            expect(ICMPv6NDOptSrcLLAddr in p and p[ICMPv6NDOptSrcLLAddr].lladdr.lower() == pmac,
                   "NS without the port's MAC as source link-layer address")
            expect(n6(ip.src) == n6(a.port_ip6), f"NS from {ip.src}, not the port's {a.port_ip6}")
            expect(n6(m.tgt) == n6(a.host_ip6), f"NS for {m.tgt}, not the host's {a.host_ip6}")
            nsma = socket.inet_ntop(socket.AF_INET6, in6_getnsma(socket.inet_pton(socket.AF_INET6, m.tgt)))
            if n6(ip.dst) == n6(nsma):
                counts["NS"] += 1
                expect(p.dst.lower() == in6_getnsmac(in6_getnsma(socket.inet_pton(socket.AF_INET6, m.tgt))),
                       f"NS to MAC {p.dst}, not the solicited-node address's")
            else:
                counts["NS_PROBE"] += 1
                expect(n6(ip.dst) == n6(a.host_ip6) and p.dst.lower() == hmac,
                       f"NS to {ip.dst} / {p.dst}: neither solicited-node nor a probe of the host")
        else:
            counts["NA"] += 1
            expect((m.R, m.S, m.O) == (1, 1, 1), f"NA flags R={m.R} S={m.S} O={m.O}, expected 1 1 1")
            expect(ICMPv6NDOptDstLLAddr in p and p[ICMPv6NDOptDstLLAddr].lladdr.lower() == pmac,
                   "NA without the port's MAC as target link-layer address")
            expect(n6(m.tgt) == n6(a.port_ip6) and n6(ip.src) == n6(a.port_ip6),
                   f"NA from {ip.src} for {m.tgt}, not the port's {a.port_ip6}")
            expect(n6(ip.dst) == n6(a.host_ip6) and p.dst.lower() == hmac,
                   f"NA to {ip.dst} / {p.dst}, not the host")
    for p in problems[:10]:
        print("  " + p)
    keys = ("ARP_REPLY", "ARP_REQUEST", "ARP_PROBE", "NA", "NS", "NS_PROBE")
    lens = ", ".join(f"{k[8:]} bytes x{v}" for k, v in sorted(counts.items()) if k.startswith("ARP_LEN_"))
    print(f"from {pmac}: {counts['ARP_REPLY']} ARP replies, {counts['ARP_REQUEST']} ARP requests "
          f"(+{counts['ARP_PROBE']} unicast), {counts['NA']} NAs, {counts['NS']} NSs "
          f"(+{counts['NS_PROBE']} unicast), {len(problems)} problems (decoded by scapy, ICMPv6 "
          f"checksums recomputed; ARP frames: {lens or 'none'})")
    for k in keys:
        print(f"NEIGH_{k}={counts[k]}")
    sys.exit(1 if problems else 0)


def cmd_ecn(a):
    """RoCE frames from --src to --dst with DestQP --dqpn in CAPTURE: --count of them, every one
    with ECN --ecn."""
    n, ecns, times = 0, collections.Counter(), []
    for ts, f in read_pcap(a.capture):
        r = roce(f)
        if not r or f[r[0] + 12:r[0] + 16] != ip_bytes(a.src) or f[r[0] + 16:r[0] + 20] != ip_bytes(a.dst):
            continue
        if int.from_bytes(r[3][5:8], "big") != a.dqpn:
            continue
        n += 1
        ecns[f[r[0] + 1] & 3] += 1
        times.append(ts)
    names = {0: "not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}
    seen = ", ".join(f"{names[k]} x{v}" for k, v in sorted(ecns.items()))
    print(f"{n} RoCE frames {a.src} -> {a.dst} DestQP {a.dqpn:#x} (expected {a.count}): {seen or 'none'}; "
          f"expected all {names[a.ecn]}"
          + (f"; smallest gap between two of them {min(b - a for a, b in zip(times, times[1:])) / 1000:.0f} us"
             if len(times) > 1 else ""))
    sys.exit(0 if n == a.count and ecns[a.ecn] == n else 1)


def cmd_stats(a):
    """Per-port rx/tx packet and byte deltas, drops and pipeline counters, as `key value` lines
    (also KEY=VALUE on the last lines for the script)."""
    with open(a.s0) as f:
        s0 = json.load(f)
    with open(a.s1) as f:
        s1 = json.load(f)

    def total(s):
        ports, drops, pipe = collections.Counter(), collections.Counter(), collections.Counter()
        for w in s["workers"]:
            for p in w["ports"]:
                for k in ("rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes", "rx_errors", "tx_errors", "rx_nobuf"):
                    if k in p:
                        ports[(p["name"], k)] += p[k]
            drops.update(w.get("drops", {}))
            pipe.update({k: v for k, v in w.get("pipeline", {}).items() if isinstance(v, int)})
        return ports, drops, pipe
    p0, d0, q0 = total(s0)
    p1, d1, q1 = total(s1)
    names = sorted({n for n, _ in p1}, key=lambda n: [p["name"] for p in s1["workers"][0]["ports"]].index(n))
    print(f"  {'port':8s} {'rx_pkts':>9s} {'rx_bytes':>11s} {'tx_pkts':>9s} {'tx_bytes':>11s}  (during the checks; whole run in brackets)")
    for n in names:
        d = {k: p1[(n, k)] - p0[(n, k)] for k in ("rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes")}
        print(f"  {n:8s} {d['rx_pkts']:9d} {d['rx_bytes']:11d} {d['tx_pkts']:9d} {d['tx_bytes']:11d}"
              f"  [{p1[(n, 'rx_pkts')]} / {p1[(n, 'tx_pkts')]}]")
        for k in ("rx_errors", "tx_errors", "rx_nobuf"):
            if p1[(n, k)]:
                print(f"  {n}.{k} {p1[(n, k)]}")
    for k, v in sorted(d1.items()):
        if v:
            print(f"  drop.{k} {v - d0[k]}  [{v}]")
    for k, v in sorted(q1.items()):
        if v:
            print(f"  {k} {v}")
    for n in names:
        print(f"TX_{n}={p1[(n, 'tx_pkts')] - p0[(n, 'tx_pkts')]}")
    errs = sum(p1[(n, k)] for n in names for k in ("rx_errors", "tx_errors", "rx_nobuf"))
    # Drops during the checks, and before them (the hosts' kernels' own frames, if any).
    print(f"DROPS={sum(d1.values()) - sum(d0.values())}")
    for k, v in sorted(d1.items()):
        print(f"DROP_{k}={v - d0[k]}")
    print(f"DROPS_BEFORE={sum(d0.values())}")
    print(f"DROPS_BEFORE_NO_ROUTE={d0['no_route']}")
    print(f"ERRORS={errs}")


def cmd_counter(a):
    """The change of pipeline counters (summed over workers) between two /stats, one per line."""
    def get(path):
        with open(path) as f:
            s = json.load(f)
        c = collections.Counter()
        for w in s["workers"]:
            c.update({k: v for k, v in w.get("pipeline", {}).items() if isinstance(v, int)})
        return c
    c0, c1 = get(a.s0), get(a.s1)
    for name in a.names:
        print(c1[name] - c0[name])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("config")
    p.add_argument("file")
    p = sub.add_parser("gen-roce")
    p.add_argument("out")
    for k in ("--src-mac", "--dst-mac", "--src", "--dst"):
        p.add_argument(k, required=True)
    p.add_argument("--dqpn", type=lambda s: int(s, 0), required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--ce", action="store_true")
    p = sub.add_parser("send-daemon")
    p.add_argument("to")
    p.add_argument("dst")
    for k in ("cqpn", "sqpn", "flag"):
        p.add_argument(k, type=lambda s: int(s, 0))
    for name in ("tcp-sink", "tcp-send"):
        p = sub.add_parser(name)
        p.add_argument("addr")
        p.add_argument("port", type=int)
        p.add_argument("out" if name == "tcp-sink" else "file")
        p.add_argument("--timeout", type=float, default=30.0)
    p = sub.add_parser("forwarded")
    p.add_argument("inp")
    p.add_argument("capture")
    p.add_argument("--src-mac", required=True)
    p.add_argument("--dst-mac", required=True)
    p.add_argument("--ttl-dec", type=int, required=True)
    p = sub.add_parser("cnps")
    p.add_argument("capture")
    for k in ("--src", "--dst", "--eth-src", "--eth-dst"):
        p.add_argument(k, required=True)
    p.add_argument("--dqpn", type=lambda s: int(s, 0), required=True)
    p.add_argument("--count", type=int, required=True)
    p = sub.add_parser("retarget")
    p.add_argument("inp")
    p.add_argument("out")
    p.add_argument("--src-mac", required=True)
    p.add_argument("--dst-mac", required=True)
    p.add_argument("--src")
    p.add_argument("--dst")
    p = sub.add_parser("neighbor")
    p.add_argument("capture")
    for k in ("--port-mac", "--port-ip", "--host-mac", "--host-ip"):
        p.add_argument(k, required=True)
    p.add_argument("--port-ip6", default="")
    p.add_argument("--host-ip6", default="")
    p = sub.add_parser("ecn")
    p.add_argument("capture")
    p.add_argument("--dqpn", type=lambda s: int(s, 0), required=True)
    p.add_argument("--src", required=True)
    p.add_argument("--dst", required=True)
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--ecn", type=int, required=True)
    p = sub.add_parser("counter")
    p.add_argument("s0")
    p.add_argument("s1")
    p.add_argument("names", nargs="+")
    p = sub.add_parser("stats")
    p.add_argument("s0")
    p.add_argument("s1")
    a = ap.parse_args()
    {"config": cmd_config, "gen-roce": cmd_gen_roce, "send-daemon": cmd_send_daemon,
     "tcp-sink": cmd_tcp_sink, "tcp-send": cmd_tcp_send,
     "retarget": cmd_retarget, "neighbor": cmd_neighbor,
     "forwarded": cmd_forwarded, "cnps": cmd_cnps, "ecn": cmd_ecn, "counter": cmd_counter,
     "stats": cmd_stats}[a.cmd](a)


if __name__ == "__main__":
    main()
