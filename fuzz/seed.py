#!/usr/bin/env python3
"""Regenerate the seed corpora fuzz/corpus/<target>/ from the shipped traces, conformance
fixtures and configs (fuzz/README.md). Deterministic; the whole corpus stays small (about 320 KB).

Usage: python3 fuzz/seed.py        (from anywhere; rewrites fuzz/corpus/*/seed-*)

Files named `finding-*` (minimized inputs of fixed findings) are kept as they are.
"""
import glob
import hashlib
import os
import struct

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def rel(p):
    return os.path.relpath(p, ROOT)


def read_pcap(path, limit=None):
    """Frames of a classic pcap (either byte order, us or ns)."""
    b = open(path, "rb").read()
    magic = b[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    else:
        e = ">"
    off, frames = 24, []
    while off + 16 <= len(b) and (limit is None or len(frames) < limit):
        _, _, caplen, _ = struct.unpack(e + "IIII", b[off:off + 16])
        frames.append(b[off + 16:off + 16 + caplen])
        off += 16 + caplen
    return frames


def pcap_bytes(frames, ns=False, big=False, ts0=1_000_000):
    e = ">" if big else "<"
    magic = 0xA1B23C4D if ns else 0xA1B2C3D4
    out = struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)
    for i, f in enumerate(frames):
        t = ts0 + i * 1000
        out += struct.pack(e + "IIII", t // 1_000_000, t % 1_000_000, len(f), len(f)) + f
    return out


class Corpus:
    def __init__(self, name):
        self.dir = os.path.join(OUT, name)
        os.makedirs(self.dir, exist_ok=True)
        for f in glob.glob(os.path.join(self.dir, "seed-*")):
            os.remove(f)
        self.seen = set()

    def add(self, data):
        h = hashlib.sha1(data).hexdigest()[:16]
        if h in self.seen:
            return
        self.seen.add(h)
        with open(os.path.join(self.dir, "seed-" + h), "wb") as f:
            f.write(data)


TRACE_FILES = sorted(
    glob.glob(os.path.join(ROOT, "pcap-tests/cases/*/in_*.pcap"))
    + glob.glob(os.path.join(ROOT, "pcap-tests/cases/*/expected_*.pcap"))
) + [
    os.path.join(ROOT, "examples/roce-64flows.pcap"),
    os.path.join(ROOT, "perf/spray-64qps.pcap"),
    os.path.join(ROOT, "perf/reflex-64flows.pcap"),
]


def all_frames(per_file=12):
    out = []
    for p in TRACE_FILES:
        fr = read_pcap(p)
        step = max(1, len(fr) // per_file)
        out.extend(fr[::step][:per_file])
    return out


def wire():
    c = Corpus("wire")
    # Option byte: bits 0-1 VLAN limit (2), bit 2 verify IPv4 checksum, bit 3 RoCE port 4791,
    # bits 6-7 the INT port (0 = 5000).
    for f in all_frames():
        c.add(bytes([0x0E]) + f)
    # A few with other options.
    for f in all_frames(2):
        c.add(bytes([0x01]) + f)


def pcap():
    c = Corpus("pcap")
    for p in TRACE_FILES:
        fr = read_pcap(p, 3)
        c.add(pcap_bytes(fr))
    fr = read_pcap(TRACE_FILES[0], 2)
    c.add(pcap_bytes(fr, ns=True))
    c.add(pcap_bytes(fr, big=True))
    c.add(pcap_bytes(fr, ns=True, big=True)[:60])
    c.add(pcap_bytes([]))


def config():
    c = Corpus("config")
    files = sorted(
        glob.glob(os.path.join(ROOT, "configs/*.toml"))
        + glob.glob(os.path.join(ROOT, "pcap-tests/cases/*/switch.toml"))
        + glob.glob(os.path.join(ROOT, "pcap-tests/cases/*/tor.toml"))
        + glob.glob(os.path.join(ROOT, "scenarios/switches/*.toml"))
        + glob.glob(os.path.join(ROOT, "perf/*.toml"))
    )
    for p in files:
        c.add(open(p, "rb").read())


def themis_daemon():
    c = Corpus("themis_daemon")
    for p in glob.glob(os.path.join(ROOT, "pcap-tests/cases/themis_daemon/in_*.pcap")):
        for f in read_pcap(p, 16):
            c.add(b"\x01" + f)
    # Records: port byte, then dst IP, cQPN, sQPN, flag (create, modify, destroy).
    def rec(port, dst, cq, sq, flag):
        return bytes([port]) + struct.pack(">IIII", dst, cq, sq, flag)
    c.add(b"\x00" + rec(0, 0x0A010007, 0x000102, 0x200, 1) + rec(0, 0x0A010007, 0x000102, 0x200, 0))
    c.add(b"\x02" + rec(1, 0x0A010001, 0x000300, 0x400, 1) + rec(1, 0x0A010001, 0x000302, 0x400, 1))
    c.add(b"\x00" + rec(2, 0x0B000001, 0x1000000, 0x5, 7))


def api():
    c = Corpus("api")
    reqs = [
        b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /stats HTTP/1.1\r\n\r\n",
        b"GET /tables HTTP/1.1\r\n\r\n",
        b"GET /tables/routes?offset=0&limit=10 HTTP/1.1\r\n\r\n",
        b"GET /tables/l2?limit=99999999999999999999 HTTP/1.0\r\n\r\n",
        b"GET /tables/qp_field HTTP/1.1\r\n\r\n",
        b"GET /tables/spray_qps HTTP/1.1\r\n\r\n",
        b"GET /tables/neighbors HTTP/1.1\r\n\r\n",
        b"PUT /health HTTP/1.1\r\n\r\n",
        b"GET /tables/%2e%2e HTTP/1.1\r\n\r\n",
        b"POST /reload HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
        b'POST /reload HTTP/1.1\r\nContent-Length: 22\r\n\r\n{"path": "/dev/null"}\n',
        b"POST /tables/l2 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /tables/l2 HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}",
        b"POST /tables/l2 HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        b"POST /tables/l2 HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 10\r\n\r\n{}",
        b"GET /health HTTP/2\r\n\r\n",
        b"GET health HTTP/1.1\r\n\r\n",
        b"GET /health HTTP/1.1\r\nbad header\r\n\r\n",
        b"GET /health HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n",
        b"GET /health HTTP/1.1\r\nAuthorization: Bearer wrong\r\n\r\n",
    ]
    bodies = [
        (b"POST", b"l2", b'{"mac": "02:00:00:00:00:09", "port": "dc1"}'),
        (b"DELETE", b"l2", b'{"mac": "02:00:00:00:00:09"}'),
        (b"POST", b"routes", b'{"prefix": "10.9.0.0/16", "port": "wan0", "next_hop_mac": "02:00:00:00:20:01"}'),
        (b"POST", b"routes", b'{"prefix": "10.9.0.0/16", "port": "wan0", "next_hop": "192.0.2.2"}'),
        (b"POST", b"routes", b'{"prefix": "2001:db8::/32", "port": 2, "next_hop_mac": "02:00:00:00:20:01"}'),
        (b"DELETE", b"routes", b'{"prefix": "10.9.0.0/16"}'),
        (b"POST", b"neighbors", b'{"port": "wan0", "ip": "192.0.2.2", "mac": "02:00:00:00:20:02"}'),
        (b"DELETE", b"neighbors", b'{"port": "wan0", "ip": "192.0.2.2"}'),
        (b"POST", b"spray_qps", b'{"local": "10.0.0.1", "local_qpn": 17, "remote": "10.1.0.1", "remote_qpn": 34}'),
        (b"DELETE", b"spray_qps", b'{"local": "10.0.0.1", "local_qpn": 17}'),
        (b"POST", b"qp_field", b"{}"),
        (b"POST", b"l2", b"[1, 2"),
    ]
    for m, t, b in bodies:
        reqs.append(m + b" /tables/" + t + b" HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(b)).encode() + b"\r\n\r\n" + b)
    for r in reqs:
        for sel in (0, 1, 2, 3):
            c.add(bytes([sel]) + r)
    c.add(bytes([4]) + reqs[0])
    c.add(bytes([8]) + reqs[-1])


# The pipeline programs (fuzz/src/pipeline.rs): op 0 = raw frame, 1 = template frame,
# 3 = advance, 4 = loop outputs back, 5 = table op, 7 = inject, 8 = port rate, 9 = listings.
def op_raw(port, dt, frame):
    frame = frame[:2048]
    return struct.pack(">BBHH", 0, port, dt, len(frame)) + frame


def op_tpl(port, dt, idx, edits=(), cut=2):
    b = struct.pack(">BBHB", 1, port, dt, idx) + bytes([len(edits)])
    for pos, val in edits:
        b += struct.pack(">HB", pos, val)
    return b + bytes([cut])


def op_advance(dt):
    return struct.pack(">BI", 3, dt)


PIPELINES = {
    "pipeline_baseline": (["pcap-tests/cases/l3_forward_roce_tcp/in_dc0.pcap",
                           "pcap-tests/cases/neighbor_arp_nd/in_dc0.pcap",
                           "pcap-tests/cases/neighbor_arp_nd/in_wan0.pcap",
                           "pcap-tests/cases/pfc_xoff_xon/in_dc0.pcap"], [b"\x00", b"\x01"]),
    "pipeline_themis": (["pcap-tests/cases/themis_daemon/in_dc0.pcap",
                         "pcap-tests/cases/themis_trp_loops/in_wan0.pcap",
                         "pcap-tests/cases/themis_syn_cookie/in_dc0.pcap"], [b""]),
    "pipeline_spray": (["pcap-tests/cases/spray_fig6_nack_validation/in_h0.pcap",
                        "pcap-tests/cases/spray_fig7_lazy_drop/in_up1.pcap"], [b""]),
    "pipeline_mlcc": (["pcap-tests/cases/mlcc_pfq_credit/in_dc0.pcap",
                       "pcap-tests/cases/mlcc_switch_int_feedback/in_dc0.pcap",
                       "pcap-tests/cases/int_source_tor/in_host0.pcap"], [b"\x00", b"\x01"]),
    "pipeline_reflex": (["pcap-tests/cases/reflex_nsf_pseudo_ack/in_dc0.pcap",
                         "pcap-tests/cases/reflex_ndt_queues/in_wan0.pcap"], [b""]),
    "pipeline_bifrost": (["pcap-tests/cases/bifrost_slot_pause/in_dc0.pcap",
                          "pcap-tests/cases/bifrost_slot_pause/in_wan0.pcap"], [b""]),
}


def pipelines():
    for name, (files, prefixes) in sorted(PIPELINES.items()):
        c = Corpus(name)
        for pre in prefixes:
            # Template frames, one after another on every port, then time, loops, listings.
            for start in (0, 24, 48, 72):
                prog = b"".join(op_tpl(i % 4, 200, start + i) for i in range(24))
                c.add(pre + prog + op_advance(2_000_000) + b"\x04" + bytes(32) + b"\x09\x00\x05")
            # Template frames with edits and cuts, commands interleaved.
            prog = b"".join(op_tpl(i % 4, 50, i * 7, [(14 + i, i), (40 + i, 0xFF)], i % 3) for i in range(16))
            prog += b"\x05\x01\x00\x07\x00" + b"\x01" * 20 + b"\x01" + b"\x08\x01\x00" + bytes(8)
            prog += b"\x07\x01\x00\x01\x01\x00\x00\x02" + op_advance(500_000)
            c.add(pre + prog)
            # Raw frames of the fixtures (the fuzzer learns real headers from them).
            for p in files:
                fr = read_pcap(os.path.join(ROOT, p), 8)
                prog = b"".join(op_raw(i % 2, 1000, f) for i, f in enumerate(fr))
                c.add(pre + prog + op_advance(1_000_000))


def main():
    wire()
    pcap()
    config()
    themis_daemon()
    api()
    pipelines()
    total = sum(os.path.getsize(f) for f in glob.glob(os.path.join(OUT, "*", "*")))
    n = len(glob.glob(os.path.join(OUT, "*", "*")))
    print(f"{rel(OUT)}: {n} files, {total} bytes")


if __name__ == "__main__":
    main()
