#!/usr/bin/env python3
"""Generate every conformance case's input and expected pcaps with scapy.

    python3 pcap-tests/gen_fixtures.py            # rewrite pcap-tests/cases/*/ *.pcap
    python3 pcap-tests/gen_fixtures.py --out DIR  # write DIR/<case>/*.pcap instead (CI compares)

Independent of longhaul (DESIGN.md section 6): packets are built with scapy's layers, RoCEv2 with
scapy.contrib.roce (BTH, AETH and its ICRC); nothing here imports or runs Rust code. The output is
deterministic -- fixed MACs, IPs, payloads and timestamps, written by oracle/pcaputil.py as
little-endian nanosecond pcaps -- so a rerun is byte-identical to the checked-in files.

The constants below must agree with each case's switch.toml (checked at the start).
"""
import argparse
import os
import struct
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "oracle"))
from pcaputil import write_pcap  # noqa: E402

from scapy.config import conf  # noqa: E402
conf.verb = 0
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.layers.inet import IP, UDP, TCP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.packet import Raw  # noqa: E402
from scapy.contrib.roce import BTH, AETH, cnp  # noqa: E402

T0 = 1_700_000_000 * 1_000_000_000  # ns; every case starts here

# Switch port MACs (as in the cases' switch.toml).
MAC_DC0 = "02:4c:48:00:00:00"
MAC_DC1 = "02:4c:48:00:00:01"
MAC_WAN0 = "02:4c:48:00:00:10"
# Next hop behind wan0 (the remote DC's edge switch) and local hosts.
MAC_REMOTE_NH = "02:00:00:00:02:01"
MAC_H0 = "02:00:00:00:01:01"
MAC_H1 = "02:00:00:00:01:02"
IP_H0, IP_H1 = "10.1.0.1", "10.1.1.1"
IP_R0, IP_R1 = "10.2.0.1", "10.2.0.2"
IP6_H0, IP6_R0 = "2001:db8:1::1", "2001:db8:2::1"

TOS_RDMA = (26 << 2) | 0b10  # DSCP 26 (class 3), ECT(0)
TOS_CNP = 48 << 2            # DSCP 48 (class 6), Not-ECT


def payload(n, seed):
    """Deterministic, non-trivial payload bytes."""
    return bytes((seed * 31 + i * 7) & 0xFF for i in range(n))


def reth(va, rkey, length):
    # RDMA Extended Transport Header (not in scapy): VA (8), R_Key (4), DMA length (4).
    return struct.pack("!QII", va, rkey, length)


def roce4(src_mac, dst_mac, src, dst, opcode, dqpn, psn, data=b"", tos=TOS_RDMA, ttl=64,
          ipid=1, sport=49152, pad=0, ackreq=0, solicited=0):
    """RoCEv2 over IPv4: Ether/IP/UDP(4791, checksum 0 as RNICs send it)/BTH/data/pad/ICRC."""
    return (Ether(src=src_mac, dst=dst_mac)
            / IP(src=src, dst=dst, tos=tos, ttl=ttl, id=ipid, flags="DF")
            / UDP(sport=sport, dport=4791, chksum=0)
            / BTH(opcode=opcode, solicited=solicited, padcount=pad, dqpn=dqpn, psn=psn, ackreq=ackreq)
            / Raw(data + bytes(pad)))


def forwarded(frame, src_mac, dst_mac):
    """What the baseline switch emits for `frame` (bytes): MACs rewritten, TTL/hop limit - 1, IPv4
    checksum recomputed by scapy; the ICRC bytes are kept as they were (TTL is masked)."""
    p = Ether(frame)
    p.src, p.dst = src_mac, dst_mac
    if IP in p:
        p[IP].ttl -= 1
        del p[IP].chksum
    else:
        p[IPv6].hlim -= 1
    out = bytes(p)
    assert len(out) == len(frame)
    if p.haslayer(BTH):
        # The stored ICRC is unchanged, and it is what scapy computes for the rewritten packet.
        q = Ether(out)
        assert out[-4:] == frame[-4:]
        q[BTH].icrc = None
        assert bytes(q)[-4:] == frame[-4:], "ICRC should not depend on TTL"
    return out


# --------------------------------------------------------------------------------------------
# a. l3_forward_roce_tcp
# --------------------------------------------------------------------------------------------

def case_l3_forward_roce_tcp():
    qp = 0x000123
    h0 = dict(src_mac=MAC_H0, dst_mac=MAC_DC0)
    pkts = [  # (frame, forwarded?)
        # RC RDMA WRITE, three packets: FIRST (with RETH), MIDDLE, LAST (2 pad bytes).
        (roce4(**h0, src=IP_H0, dst=IP_R0, opcode=0x06, dqpn=qp, psn=100, ipid=10,
               data=reth(0x7f0000001000, 0x1234, 610) + payload(256, 1)), True),
        (roce4(**h0, src=IP_H0, dst=IP_R0, opcode=0x07, dqpn=qp, psn=101, ipid=11,
               data=payload(256, 2)), True),
        (roce4(**h0, src=IP_H0, dst=IP_R0, opcode=0x08, dqpn=qp, psn=102, ipid=12,
               data=payload(98, 3), pad=2, ackreq=1), True),
        # RC SEND ONLY, solicited.
        (roce4(**h0, src=IP_H0, dst=IP_R0, opcode=0x04, dqpn=qp, psn=103, ipid=13,
               data=payload(64, 4), solicited=1, ackreq=1), True),
        # RC ACK with AETH (for the reverse flow).
        (Ether(src=MAC_H0, dst=MAC_DC0) / IP(src=IP_H0, dst=IP_R0, tos=TOS_RDMA, id=14, flags="DF")
         / UDP(sport=49153, dport=4791, chksum=0) / BTH(opcode=0x11, dqpn=0x000456, psn=7)
         / AETH(syndrome=0x1F, msn=3), True),
        # CNP (DSCP 48), built by scapy's own helper.
        (Ether(src=MAC_H0, dst=MAC_DC0) / IP(src=IP_H0, dst=IP_R0, tos=TOS_CNP, id=15, flags="DF")
         / UDP(sport=49154, dport=4791, chksum=0) / cnp(0x000456), True),
        # TCP: SYN, then a data segment (checksums computed by scapy).
        (Ether(src=MAC_H0, dst=MAC_DC0) / IP(src=IP_H0, dst=IP_R0, id=16, flags="DF")
         / TCP(sport=40000, dport=5201, seq=1000, flags="S", window=64240,
               options=[("MSS", 1460), ("SAckOK", b""), ("WScale", 7)]), True),
        (Ether(src=MAC_H0, dst=MAC_DC0) / IP(src=IP_H0, dst=IP_R1, id=17, flags="DF")
         / TCP(sport=40000, dport=5201, seq=1001, ack=5001, flags="PA", window=502)
         / Raw(payload(200, 5)), True),
        # Plain UDP (not RoCE), with a checksum.
        (Ether(src=MAC_H0, dst=MAC_DC0) / IP(src=IP_H0, dst=IP_R0, id=18)
         / UDP(sport=40404, dport=5000) / Raw(payload(40, 6)), True),
        # Unrouted destination: dropped.
        (roce4(**h0, src=IP_H0, dst="192.0.2.7", opcode=0x04, dqpn=qp, psn=104, ipid=19,
               data=payload(32, 7)), False),
        # TTL 1: dropped (would expire).
        (roce4(**h0, src=IP_H0, dst=IP_R0, opcode=0x04, dqpn=qp, psn=105, ipid=20, ttl=1,
               data=payload(32, 8)), False),
        # TTL 2: forwarded with TTL 1.
        (Ether(src=MAC_H0, dst=MAC_DC0) / IP(src=IP_H0, dst=IP_R0, ttl=2, id=21, flags="DF")
         / TCP(sport=40001, dport=5201, seq=1, ack=1, flags="A", window=502), True),
        # RoCEv2 over IPv6 (hop limit decremented, ICRC unchanged).
        (Ether(src=MAC_H0, dst=MAC_DC0)
         / IPv6(src=IP6_H0, dst=IP6_R0, tc=TOS_RDMA, fl=0x12345, hlim=64)
         / UDP(sport=49155, dport=4791, chksum=0)
         / BTH(opcode=0x0A, dqpn=0x000789, psn=1, ackreq=1)
         / Raw(reth(0x1000, 0x99, 128) + payload(128, 9)), True),
        # RoCE WRITE ONLY after the drops, to check the flow continues.
        (roce4(**h0, src=IP_H0, dst=IP_R0, opcode=0x0A, dqpn=qp, psn=106, ipid=22,
               data=reth(0x7f0000002000, 0x1234, 64) + payload(64, 10), ackreq=1), True),
    ]
    inputs, expected = [], []
    for i, (p, fwd) in enumerate(pkts):
        frame = bytes(p)
        ts = T0 + i * 10_000  # 10 us apart: no queueing at 100 Gb/s
        inputs.append((ts, frame))
        if fwd:
            expected.append((ts, forwarded(frame, MAC_WAN0, MAC_REMOTE_NH)))
    return {
        "in_dc0.pcap": inputs,
        "expected_wan0.pcap": expected,
        "expected_dc0.pcap": [],
    }


# --------------------------------------------------------------------------------------------
# b/c. two 10G ingress ports at line rate into one 10G egress (ecn_marking, pfc_xoff_xon)
# --------------------------------------------------------------------------------------------

FRAME_2TO1 = 286        # bytes; + 24 overhead = 310 wire bytes = 248 ns at 10 Gb/s
GAP_2TO1 = 248          # ns, back to back at 10 Gb/s
PKTS_2TO1 = 100         # per ingress port


def two_to_one():
    """dc0 and dc1 each send PKTS_2TO1 back-to-back RC WRITE MIDDLE packets (ECT(0), DSCP 26);
    dc1 is offset by half a frame time so arrival order is unambiguous."""
    data_len = FRAME_2TO1 - (14 + 20 + 8 + 12 + 4)
    out = {}
    for port, mac, src, dst, qp, offset in (("dc0", MAC_H0, IP_H0, IP_R0, 0x000B01, 0),
                                            ("dc1", MAC_H1, IP_H1, IP_R1, 0x000B02, GAP_2TO1 // 2)):
        recs = []
        for k in range(PKTS_2TO1):
            p = roce4(mac, MAC_DC0 if port == "dc0" else MAC_DC1, src, dst, opcode=0x07,
                      dqpn=qp, psn=k, ipid=k, sport=49152 + qp % 256, data=payload(data_len, k))
            f = bytes(p)
            assert len(f) == FRAME_2TO1
            recs.append((T0 + offset + k * GAP_2TO1, f))
        out[f"in_{port}.pcap"] = recs
    return out


def case_themis_pnp_cnp():
    """THEMIS PNP on configs/themis-esw.toml's dc0: daemon messages (UDP 12345, four big-endian
    u32: destination IP, cQPN, sQPN, flag) from a trusted host and an untrusted one, CE-marked RC
    SEND_ONLY data toward the remote DC every 20 us, a destroy, and data after it."""
    router, host = "02:00:00:00:00:01", "02:00:00:00:10:01"
    client, remote = "10.0.0.1", "10.1.0.1"

    def daemon(src, sqpn, flag):
        body = struct.pack("!IIII", int.from_bytes(bytes(map(int, remote.split("."))), "big"),
                           THEMIS_CQPN, sqpn, flag)
        return bytes(Ether(src=host, dst=router) / IP(src=src, dst="10.0.255.254", id=7)
                     / UDP(sport=40000, dport=12345) / Raw(body))

    def data(qp, psn):
        # ECN CE (0b11) with DSCP 26: the congestion the ESW turns into a CNP.
        return bytes(roce4(host, router, client, remote, opcode=0x04, dqpn=qp, psn=psn,
                           data=payload(256, psn), tos=(26 << 2) | 0b11, ipid=psn))

    us = 1000
    recs = [(T0, daemon(client, THEMIS_SQPN, 1)),
            (T0 + 1 * us, daemon("192.168.1.1", THEMIS_SQPN_UNTRUSTED, 1))]
    for k in range(6):
        recs.append((T0 + (10 + 20 * k) * us, data(THEMIS_SQPN, k)))
    recs.append((T0 + 130 * us, data(THEMIS_SQPN_UNTRUSTED, 100)))
    recs.append((T0 + 150 * us, daemon(client, THEMIS_SQPN, 0)))
    recs.append((T0 + 200 * us, data(THEMIS_SQPN, 200)))
    return {"in_dc0.pcap": recs}


THEMIS_CQPN, THEMIS_SQPN, THEMIS_SQPN_UNTRUSTED = 0x000111, 0x000222, 0x000333


# --------------------------------------------------------------------------------------------
# Bifrost: data from the long-haul link on wan0, the DC fabric pausing dc0
# --------------------------------------------------------------------------------------------

FRAME_BIFROST = 256      # bytes; + 24 overhead = 280 wire bytes = 224 ns at 10 Gb/s
GAP_BIFROST = 224        # ns, back to back at 10 Gb/s
PKTS_BIFROST = 500
BIFROST_DC_PAUSE = 1172  # quanta of 51.2 ns at 10 Gb/s = 60 us


def case_bifrost_slot_pause():
    """wan0: PKTS_BIFROST back-to-back RC WRITE MIDDLE packets (DSCP 26) from the remote DC to a
    local host; dc0: at the same instant, a PFC frame from the DC fabric pausing priority 3 for
    60 us (built by hand from 802.1Qbb: opcode 0x0101, class-enable, 8 x u16)."""
    data_len = FRAME_BIFROST - (14 + 20 + 8 + 12 + 4)
    recs = []
    for k in range(PKTS_BIFROST):
        p = roce4(MAC_REMOTE_NH, MAC_WAN0, IP_R0, IP_H0, opcode=0x07, dqpn=0x000C01, psn=k,
                  ipid=k, data=payload(data_len, k))
        f = bytes(p)
        assert len(f) == FRAME_BIFROST
        recs.append((T0 + k * GAP_BIFROST, f))
    times = [0, 0, 0, BIFROST_DC_PAUSE, 0, 0, 0, 0]
    pfc = bytes(Ether(dst="01:80:c2:00:00:01", src=MAC_H0, type=0x8808)
                / Raw(struct.pack("!HH8H", 0x0101, 1 << 3, *times)))
    pfc += bytes(60 - len(pfc))
    return {"in_wan0.pcap": recs, "in_dc0.pcap": [(T0, pfc)]}


CASES = {
    "themis_pnp_cnp": case_themis_pnp_cnp,
    "l3_forward_roce_tcp": case_l3_forward_roce_tcp,
    "ecn_marking": two_to_one,
    "pfc_xoff_xon": two_to_one,
    "bifrost_slot_pause": case_bifrost_slot_pause,
}


def check_config(case_dir):
    """The constants above must match the case's switch.toml."""
    path = os.path.join(case_dir, "switch.toml")
    if not os.path.exists(path):
        return
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    macs = {p["name"]: p["mac"] for p in cfg.get("ports", [])}
    want = {"dc0": MAC_DC0, "dc1": MAC_DC1, "wan0": MAC_WAN0}
    for name, mac in macs.items():
        assert want.get(name) == mac, f"{path}: port {name} mac {mac} != {want.get(name)}"
    for r in cfg.get("routes", []):
        if r["port"] == "wan0":
            assert r["next_hop_mac"] == MAC_REMOTE_NH, f"{path}: route {r['prefix']}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write DIR/<case>/ instead of pcap-tests/cases/<case>/")
    ap.add_argument("cases", nargs="*", help="only these cases (default: all)")
    a = ap.parse_args()
    names = a.cases or sorted(CASES)
    for name in names:
        if name not in CASES:
            sys.exit(f"unknown case {name!r}; known: {', '.join(sorted(CASES))}")
        check_config(os.path.join(HERE, "cases", name))
        out_dir = os.path.join(a.out or os.path.join(HERE, "cases"), name)
        os.makedirs(out_dir, exist_ok=True)
        files = CASES[name]()
        for fname, recs in sorted(files.items()):
            write_pcap(os.path.join(out_dir, fname), recs)
        print(f"{name}: " + ", ".join(f"{f} ({len(r)} pkts)" for f, r in sorted(files.items())))


if __name__ == "__main__":
    main()
