#!/usr/bin/env python3
"""Helpers of perf/lab/netns.sh: trace generation, config reading and capture checks.

    lab_check.py config FILE                     shell assignments read from a longhaul config
    lab_check.py gen-roce OUT.pcap --src-mac M --dst-mac M --src IP --dst IP --dqpn Q --count N [--ce]
    lab_check.py send-daemon TO DST CQPN SQPN FLAG   send a THEMIS daemon message to TO:12345
    lab_check.py tcp-sink ADDR PORT OUT / tcp-send ADDR PORT FILE   one TCP transfer
    lab_check.py forwarded IN.pcap CAPTURE.pcap --src-mac M --dst-mac M --ttl-dec D
    lab_check.py cnps CAPTURE.pcap --count N --dqpn Q --src IP --dst IP --eth-src M --eth-dst M
    lab_check.py ecn CAPTURE.pcap --src IP --dst IP --dqpn Q --count N --ecn E
    lab_check.py stats S0.json S1.json           per-port counter deltas between two /stats
    lab_check.py counter S0.json S1.json NAME...  pipeline counter deltas, one per line

Each check prints one line saying what it saw and exits 1 when it does not hold. Frames are
decoded with plain struct unpacking, and RoCEv2 ICRCs are recomputed by
pcap-tests/oracle/verify.py's icrc() (CRC-32 over the masked IP packet, independent of longhaul);
scapy is used only to build the generated trace.
"""
import argparse
import collections
import json
import os
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

def cmd_config(a):
    """Shell assignments: API address, pipeline, routed or not, the MACs of the ports bound to
    the lab's interfaces (sw-h1, sw-h2) through --vdev=...,iface=..."""
    with open(a.file, "rb") as f:
        cfg = tomllib.load(f)
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
    ctl = cfg.get("control", {})
    out = {
        "CFG_API": ctl.get("api_listen", "127.0.0.1:9410"),
        "CFG_TOKEN": ctl.get("api_token", ""),
        "CFG_PIPELINE": cfg["switch"].get("pipeline", "baseline"),
        "CFG_ROUTED": "1" if cfg.get("routes") else "0",
        "CFG_H1_PORT": port_of["sw-h1"]["name"],
        "CFG_H1_PORT_MAC": port_of["sw-h1"]["mac"].lower(),
        "CFG_H2_PORT": port_of["sw-h2"]["name"],
        "CFG_H2_PORT_MAC": port_of["sw-h2"]["mac"].lower(),
    }
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


def cmd_tcp_sink(a):
    """Accept one TCP connection on ADDR:PORT, write what arrives to OUT."""
    import socket
    with socket.create_server((a.addr, a.port)) as srv:
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
    with socket.create_connection((a.addr, a.port), timeout=a.timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)  # the sink closes after reading everything
    dt = time.monotonic() - t0
    print(f"{len(data)} bytes in {dt:.3f} s ({len(data) * 8 / dt / 1e6:.0f} Mb/s)")


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
    print(f"{matched}/{len(sent)} frames arrived byte-exact (MACs {a.src_mac} -> {a.dst_mac}, "
          f"TTL -{a.ttl_dec}, IPv4 checksum updated), {dup} duplicates, {bad_icrc} bad ICRCs")
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
            print(f"  drop.{k} {v}")
    for k, v in sorted(q1.items()):
        if v:
            print(f"  {k} {v}")
    for n in names:
        print(f"TX_{n}={p1[(n, 'tx_pkts')] - p0[(n, 'tx_pkts')]}")
    errs = sum(p1[(n, k)] for n in names for k in ("rx_errors", "tx_errors", "rx_nobuf"))
    print(f"DROPS={sum(d1.values())}")
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
     "forwarded": cmd_forwarded, "cnps": cmd_cnps, "ecn": cmd_ecn, "counter": cmd_counter,
     "stats": cmd_stats}[a.cmd](a)


if __name__ == "__main__":
    main()
