#!/usr/bin/env python3
"""themis_daemon oracle: python3 check.py OUTDIR.

Independent of longhaul: daemon messages and RoCE frames are decoded with struct. A small model
of the control path derives the expected CNPs from the inputs and switch.toml:

- a daemon message (UDP to 12345, 16-byte payload: dst IP, cQPN, sQPN, flag) counts only when it
  arrives on a dc port from a source in host_prefixes with a destination in inter_dc_prefixes;
  it takes effect control_latency_ns after it arrived: flag 1 sets QP_field[(src, dst, sQPN)] =
  cQPN, flag 0 removes the entry and forgets its last-CNP time;
- CE-marked RoCE data from a dc port toward the WAN, with an entry for (IP src, IP dst,
  BTH.DestQP), yields a CNP back to the sender (DestQP = cQPN) unless one was sent for that entry
  less than cnp_interval_ns before; with an entry its CE is cleared (ECT(0)), without it is kept.

Then requires: the CNPs out of dc0 exactly as modelled (times, DestQP, every CNP field as in
DESIGN.md section 5), the WAN-side daemon-format datagram forwarded out of dc0 as ordinary UDP,
every data packet out of wan0 with the modelled ECN, and the QP_field size in counters.txt.
"""
import ipaddress
import os
import struct
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402


def ip4(b):
    return str(ipaddress.IPv4Address(bytes(b)))


def udp_dport(f):
    if f[12:14] != b"\x08\x00" or f[23] != 17:
        return None
    u = 14 + (f[14] & 0xF) * 4
    return struct.unpack("!H", f[u + 2:u + 4])[0]


def in_prefixes(addr, prefixes):
    a = ipaddress.IPv4Address(addr)
    return any(a in ipaddress.IPv4Network(p) for p in prefixes)


def main(outdir):
    fails = Failures("themis_daemon")
    with open(os.path.join(HERE, "switch.toml"), "rb") as f:
        cfg = tomllib.load(f)
    pnp = cfg["themis"]["pnp"]
    latency = cfg["control"]["control_latency_ns"]
    interval = pnp["cnp_interval_ns"]
    cnp_dscp = pnp.get("cnp_dscp", 48)
    dc_ports = set(cfg["themis"]["dc_ports"])
    mac = {p["name"]: bytes.fromhex(p["mac"].replace(":", "")) for p in cfg["ports"]}

    events = []
    for port in ("dc0", "wan0"):
        for ts, f in read_pcap(os.path.join(outdir, f"in_{port}.pcap")):
            events.append((ts, port, f))
    events.sort(key=lambda e: e[0])
    base = events[0][0]

    # The model.
    pending = []  # (effective time, op, key, cqpn)
    table, last_cnp = {}, {}
    want_cnps, want_ecn, want_udp = [], [], []
    for ts, port, f in events:
        for item in sorted(p for p in pending if p[0] <= ts):
            _, op, key, cqpn = item
            if op == "add":
                table[key] = cqpn
            else:
                table.pop(key, None)
                last_cnp.pop(key, None)
            pending.remove(item)
        if udp_dport(f) == 12345:
            u = 14 + (f[14] & 0xF) * 4
            dst, cqpn, sqpn, flag = struct.unpack("!IIII", f[u + 8:u + 24])
            src = ip4(f[26:30])
            dst = str(ipaddress.IPv4Address(dst))
            trusted = (port in dc_ports and in_prefixes(src, pnp["host_prefixes"])
                       and in_prefixes(dst, pnp["inter_dc_prefixes"]) and flag in (0, 1))
            if trusted:
                pending.append((ts + latency, "add" if flag else "del", (src, dst, sqpn), cqpn))
            elif port not in dc_ports:
                want_udp.append((ts, f))
            continue
        if udp_dport(f) == 4791 and port in dc_ports:
            key = (ip4(f[26:30]), ip4(f[30:34]), int.from_bytes(f[47:50], "big"))
            ce = f[15] & 3 == 3
            if ce and key in table:
                if key not in last_cnp or ts - last_cnp[key] >= interval:
                    last_cnp[key] = ts
                    want_cnps.append((ts, table[key], f))
                want_ecn.append(2)
            else:
                want_ecn.append(f[15] & 3)
    fails.expect(len(want_cnps) == 3, f"fixture: the model expects {len(want_cnps)} CNPs, not 3")

    out = read_pcap(os.path.join(outdir, "out_dc0.pcap"))
    cnps = [(ts, f) for ts, f in out if udp_dport(f) == 4791]
    others = [(ts, f) for ts, f in out if udp_dport(f) != 4791]
    got = [(ts - base, int.from_bytes(f[47:50], "big")) for ts, f in cnps]
    exp = [(ts - base, q) for ts, q, _ in want_cnps]
    fails.expect(got == exp, f"CNPs (time ns, DestQP) {got}, expected {exp}")
    for (ts, f), (_, _, data) in zip(cnps, want_cnps):
        where = f"CNP at {ts - base}"
        if not fails.expect(len(f) == 74, f"{where}: length {len(f)}"):
            continue
        fails.expect(f[0:6] == data[6:12] and f[6:12] == mac["dc0"], f"{where}: MACs")
        fails.expect(f[15] >> 2 == cnp_dscp, f"{where}: DSCP {f[15] >> 2}")
        fails.expect(struct.unpack("!H", f[16:18])[0] == 60, f"{where}: IPv4 total length")
        fails.expect(f[26:30] == data[30:34] and f[30:34] == data[26:30], f"{where}: addresses not swapped")
        dport, ulen = struct.unpack("!HH", f[36:40])
        fails.expect(dport == 4791 and ulen == 40, f"{where}: UDP dport {dport} length {ulen}")
        bth = f[42:54]
        fails.expect(bth[0] == 0x81 and bth[2:4] == b"\xff\xff" and bth[4] & 0x40
                     and int.from_bytes(bth[9:12], "big") == 0, f"{where}: BTH {bth.hex()}")
        fails.expect(f[54:70] == bytes(16), f"{where}: reserved bytes")
    fails.expect(len(others) == len(want_udp), f"{len(others)} non-CNP frames out of dc0, expected {len(want_udp)}")
    for (ts, f), (t_in, fin) in zip(others, want_udp):
        fails.expect(f[14:22] == fin[14:22] and f[23] == fin[23] and f[26:] == fin[26:] and f[22] == fin[22] - 1,
                     "the WAN-side daemon datagram was not forwarded unchanged (but TTL)")
        fails.expect(ts >= t_in, "forwarded before it arrived")

    wan = read_pcap(os.path.join(outdir, "out_wan0.pcap"))
    ecns = [f[15] & 3 for _, f in wan if udp_dport(f) == 4791]
    fails.expect(ecns == want_ecn, f"ECN of data out of wan0 {ecns}, expected {want_ecn}")
    fails.expect(all(udp_dport(f) == 4791 for _, f in wan), "a daemon message leaked to the WAN")

    counters = dict(line.split() for line in open(os.path.join(outdir, "counters.txt")))
    fails.expect(int(counters.get("table.qp_field.entries", -1)) == len(table),
                 f"QP_field entries {counters.get('table.qp_field.entries')}, expected {len(table)}")
    print(f"themis_daemon: CNPs {got}; data ECN {ecns}; QP_field entries {len(table)}")
    fails.done()


if __name__ == "__main__":
    main(sys.argv[1])
