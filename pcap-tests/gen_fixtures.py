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
from scapy.layers.inet import IP, UDP, TCP, fragment  # noqa: E402
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

# THEMIS cases with their own switch.toml (configs/themis-esw.toml's ports and addresses).
TH_MAC_DC0 = "02:00:00:00:00:01"     # switch port dc0
TH_MAC_WAN0 = "02:00:00:00:00:03"    # switch port wan0
TH_MAC_HOST = "02:00:00:00:10:01"    # host-side neighbour behind dc0
TH_MAC_PEER = "02:00:00:00:20:01"    # DCI peer behind wan0
US = 1000


def th_cfg(case):
    with open(os.path.join(HERE, "cases", case, "switch.toml"), "rb") as f:
        return tomllib.load(f)


def th_daemon(src, dst, cqpn, sqpn, flag, ipid=7, sport=40000):
    """A THEMIS daemon message (docs/wire-formats.md): UDP to 12345, four big-endian u32."""
    body = struct.pack("!IIII", int.from_bytes(bytes(map(int, dst.split("."))), "big"), cqpn, sqpn, flag)
    return bytes(Ether(src=TH_MAC_HOST, dst=TH_MAC_DC0) / IP(src=src, dst="10.0.255.254", id=ipid)
                 / UDP(sport=sport, dport=12345) / Raw(body))


def th_cnp(src, dst, dqpn, ipid):
    """A receiver's CNP toward the WAN, built by scapy's own helper (DSCP 48)."""
    return bytes(Ether(src=TH_MAC_HOST, dst=TH_MAC_DC0) / IP(src=src, dst=dst, tos=TOS_CNP, id=ipid, flags="DF")
                 / UDP(sport=49200, dport=4791, chksum=0) / cnp(dqpn))


def th_wan_data(src, dst, qp, psn, ce=False):
    """WAN -> DC RC SEND_ONLY data (314-byte frames), ECT(0)."""
    return bytes(roce4(TH_MAC_PEER, TH_MAC_WAN0, src, dst, opcode=0x04, dqpn=qp, psn=psn,
                       data=payload(256, psn), tos=(26 << 2) | (0b11 if ce else 0b10), ipid=psn & 0xFFFF))


def th_tcp(src, dst, sport, dport, seq, ack, flags, options=(), ipid=1):
    return bytes(Ether(src=TH_MAC_HOST, dst=TH_MAC_DC0) / IP(src=src, dst=dst, id=ipid, flags="DF")
                 / TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=64240,
                       options=list(options)))


SYN_FLOOD = 1000


def case_themis_syn_cookie():
    """Fig. 5 handshake monitor: a legit SYN, its ACK carrying the cookie (computed here with an
    independent SipHash-2-4 implementation of docs/wire-formats.md), a second client whose ACK
    carries a wrong cookie, the first client's retried SYN, then a flood of SYN_FLOOD SYNs from
    pseudo-random sources and ports."""
    import random
    from themis_model import syn_cookie
    cfg = th_cfg("themis_syn_cookie")
    seed = cfg["switch"]["seed"]
    period = cfg["themis"]["pnp"]["syn_cookie_period_ms"] * 1_000_000
    assert cfg["control"]["control_latency_ns"] <= 10 * US
    opts = [("MSS", 1460), ("SAckOK", b""), ("WScale", 7)]

    def ip(a):
        return bytes(map(int, a.split(".")))

    recs = []
    t_syn = T0
    recs.append((t_syn, th_tcp("10.0.0.1", "10.1.0.1", 40000, 5201, 1000, 0, "S", opts, ipid=1)))
    c1 = syn_cookie(seed, period, t_syn, ip("10.0.0.1"), ip("10.1.0.1"), 40000, 5201, 1000, 1460)
    recs.append((T0 + 10 * US, th_tcp("10.0.0.1", "10.1.0.1", 40000, 5201, 1001, (c1 + 1) & 0xFFFFFFFF, "A", ipid=2)))
    recs.append((T0 + 15 * US, th_tcp("10.0.0.2", "10.1.0.2", 40001, 5201, 77, 0, "S", opts, ipid=3)))
    c2 = syn_cookie(seed, period, T0 + 15 * US, ip("10.0.0.2"), ip("10.1.0.2"), 40001, 5201, 77, 1460)
    recs.append((T0 + 20 * US, th_tcp("10.0.0.2", "10.1.0.2", 40001, 5201, 78, (c2 ^ 0x00A5A5A5) + 1 & 0xFFFFFFFF, "A", ipid=4)))
    recs.append((T0 + 30 * US, th_tcp("10.0.0.1", "10.1.0.1", 40002, 5201, 5000, 0, "S", opts, ipid=5)))
    rng = random.Random(5)
    for k in range(SYN_FLOOD):
        src = "%d.%d.%d.%d" % (rng.randrange(1, 224), rng.randrange(256), rng.randrange(256), rng.randrange(1, 255))
        dst = "10.1.%d.%d" % (rng.randrange(256), rng.randrange(1, 255))
        recs.append((T0 + 100 * US + k * 100,
                     th_tcp(src, dst, rng.randrange(1024, 65536), rng.choice([80, 443, 5201]),
                            rng.randrange(1 << 32), 0, "S", ipid=k & 0xFFFF)))
    return {"in_dc0.pcap": recs}


def case_themis_daemon():
    """Daemon messages (create, destroy; an untrusted source; one arriving on the WAN side) and
    CE-marked inter-DC data, spaced around the 20 us control latency and 50 us cnp_interval."""
    c, r = "10.0.0.1", "10.1.0.1"

    def data(qp, psn):
        return bytes(roce4(TH_MAC_HOST, TH_MAC_DC0, c, r, opcode=0x04, dqpn=qp, psn=psn,
                           data=payload(128, psn), tos=(26 << 2) | 0b11, ipid=psn))

    dc0 = [
        (T0, th_daemon(c, r, 0x111, 0x222, 1)),                      # create, effective at +20 us
        (T0 + 10 * US, data(0x222, 1)),                              # before the entry: no CNP
        (T0 + 30 * US, data(0x222, 2)),                              # CNP, DestQP 0x111
        (T0 + 100 * US, th_daemon(c, r, 0x111, 0x222, 0, ipid=8)),   # destroy, effective at +120 us
        (T0 + 110 * US, data(0x222, 3)),                             # still installed: CNP
        (T0 + 130 * US, data(0x222, 4)),                             # destroyed: no CNP
        (T0 + 200 * US, th_daemon("192.168.7.1", r, 0x444, 0x333, 1, ipid=9)),  # untrusted source
        (T0 + 250 * US, data(0x333, 5)),                             # no CNP
        (T0 + 300 * US, data(0x555, 6)),                             # no CNP (WAN-side message)
        (T0 + 400 * US, th_daemon(c, r, 0x666, 0x222, 1, ipid=10)),  # re-create, new cQPN
        (T0 + 430 * US, data(0x222, 7)),                             # CNP, DestQP 0x666
    ]
    # A daemon-format datagram arriving from the WAN (source inside host_prefixes, spoofed):
    # not a control input there, forwarded to the DC like any UDP datagram.
    body = struct.pack("!IIII", int.from_bytes(bytes([10, 1, 0, 1]), "big"), 0x777, 0x555, 1)
    wan = [(T0 + 220 * US, bytes(Ether(src=TH_MAC_PEER, dst=TH_MAC_WAN0)
                                 / IP(src="10.0.0.1", dst="10.0.0.9", id=11)
                                 / UDP(sport=40000, dport=12345) / Raw(body)))]
    return {"in_dc0.pcap": dc0, "in_wan0.pcap": wan}


# TRP cases: receiver 10.0.0.1 (QPN 0x111) behind dc0, remote sender 10.1.0.1 (QPN 0x222).
TRP_RECV, TRP_SEND, TRP_RQP, TRP_SQP = "10.0.0.1", "10.1.0.1", 0x111, 0x222
# An unrelated WAN -> DC flow that must not be touched.
TRP_OTHER = ("10.1.0.2", "10.0.0.2", 0x333)


def trp_case(cnp_us, data_us, other_us=()):
    """in_dc0: the receiver's daemon message at 0 (so a CNP's DestQP maps to the receiver's QPN),
    then CNPs at `cnp_us`; in_wan0: the throttled flow's data at `data_us` (PSNs 0, 1, ...) and
    the other flow's at `other_us`. Times in us (floats allowed) after T0."""
    dc0 = [(T0, th_daemon(TRP_RECV, TRP_SEND, TRP_RQP, TRP_SQP, 1))]
    for i, t in enumerate(cnp_us):
        dc0.append((T0 + round(t * US), th_cnp(TRP_RECV, TRP_SEND, TRP_SQP, ipid=100 + i)))
    wan = [(T0 + round(t * US), th_wan_data(TRP_SEND, TRP_RECV, TRP_RQP, psn)) for psn, t in enumerate(data_us)]
    wan += [(T0 + round(t * US), th_wan_data(TRP_OTHER[0], TRP_OTHER[1], TRP_OTHER[2], 1000 + k))
            for k, t in enumerate(other_us)]
    wan.sort(key=lambda r: r[0])
    assert len({t for t, _ in wan}) == len(wan) and len({t for t, _ in dc0}) == len(dc0)
    return {"in_dc0.pcap": dc0, "in_wan0.pcap": wan}


def case_themis_trp_loops():
    """A CNP burst throttles the WAN -> DC flow; a train closer than one loop through throttling
    and through recovery after beta; an unrelated flow interleaved; a second episode after
    recovery (alpha halved, cnp_num reset)."""
    cnps = [40] + [60 + 5 * k for k in range(7)] + [310 + 10 * k for k in range(6)]
    data = [20, 41] + [95 + 0.5 * k for k in range(10)] + [200 + 0.5 * k for k in range(10)] + [300, 331, 361]
    other = [30, 45, 95.25, 96.25, 97.25, 98.25, 101.3, 150, 200.25, 201.75, 202.3, 305]
    return trp_case(cnps, data, other)


def case_themis_alg1_trace():
    """Algorithm 1 step by step: CNPs with gaps shorter than beta (25 us) and longer (130-140 us),
    one data packet 1 us after each CNP and a few in the quiet periods."""
    ep1 = [20 + 25 * k for k in range(9)]              # 20 .. 220
    ep2 = [360 + 25 * k for k in range(7)]             # 360 .. 510
    ep3 = [650, 675]                                   # after a quiet gap with no data at all
    cnps = ep1 + ep2 + ep3
    data = ([t + 1 for t in ep1] + [240, 330, 345] + [t + 1 for t in ep2]
            + [t + 1 for t in ep3] + [800, 815])
    return trp_case(cnps, sorted(data))


# --------------------------------------------------------------------------------------------
# Themis spraying (paper 002): Themis-D at a destination ToR, cases/spray_*/tor.toml
# --------------------------------------------------------------------------------------------

SPRAY_MAC_H0, SPRAY_MAC_UP = "02:00:00:00:00:01", ["02:00:00:00:00:03", "02:00:00:00:00:04"]
SPRAY_MAC_SPINE = ["02:00:00:00:20:00", "02:00:00:00:20:01"]
SPRAY_MAC_RNIC = "02:00:00:00:10:01"
SPRAY_SENDER, SPRAY_RECEIVER = "10.0.0.1", "10.1.0.1"
SPRAY_SQPN, SPRAY_RQPN = 0x11, 0x22
SPRAY_NAK_SPORT, SPRAY_NAK_ID = 50000, 0x1234
SPRAY_OFF_POLICY, SPRAY_AVOIDANCE = 0x10, 0x20  # BTH byte 4 reserved bits (resv6)


def spray_data(psn):
    """RDMA WRITE MIDDLE from the remote sender, arriving from spine `psn mod 2` (2 paths,
    equation 1 with P_base 0), one hop already behind it (TTL 63)."""
    path = psn % 2
    return bytes(roce4(SPRAY_MAC_SPINE[path], SPRAY_MAC_UP[path], SPRAY_SENDER, SPRAY_RECEIVER,
                       opcode=0x07, dqpn=SPRAY_RQPN, psn=psn, data=payload(256, psn), ttl=63,
                       ipid=psn))


def spray_ack(psn, syndrome, msn, ipid=SPRAY_NAK_ID, src=SPRAY_MAC_RNIC, dst=SPRAY_MAC_H0, ttl=64,
              resv6=0):
    """An RC ACK (syndrome < 0x20) or PSN-sequence-error NAK (0x60) from the receiver RNIC."""
    return bytes(Ether(src=src, dst=dst)
                 / IP(src=SPRAY_RECEIVER, dst=SPRAY_SENDER, tos=TOS_CNP, ttl=ttl, id=ipid, flags="DF")
                 / UDP(sport=SPRAY_NAK_SPORT, dport=4791, chksum=0)
                 / BTH(opcode=0x11, dqpn=SPRAY_SQPN, psn=psn, resv6=resv6)
                 / AETH(syndrome=syndrome, msn=msn))


def spray_regenerated_nak(epsn, msn, avoid):
    """The NAK Themis-D sends itself (section 5): the stashed NAK's fields, IP ID 0, TTL 64 - 1,
    routed out of up0 to spine 0; with the path avoidance signal when `avoid`."""
    return spray_ack(epsn, 0x60, msn, ipid=0, src=SPRAY_MAC_UP[0], dst=SPRAY_MAC_SPINE[0], ttl=63,
                     resv6=SPRAY_AVOIDANCE if avoid else 0)


def spray_to_rnic(frame):
    return forwarded(frame, SPRAY_MAC_H0, SPRAY_MAC_RNIC)


def spray_to_spine0(frame):
    return forwarded(frame, SPRAY_MAC_UP[0], SPRAY_MAC_SPINE[0])


def spray_case(events):
    """events: (us, port, frame, expected_port or None, expected frame). Returns the pcaps."""
    us = 1000
    ins, exp = {}, {"h0": [], "up0": [], "up1": []}
    for t, port, frame, out_port, out_frame in events:
        ins.setdefault(port, []).append((T0 + t * us, frame))
        if out_port:
            exp[out_port].append((T0 + t * us, out_frame))
    out = {f"in_{p}.pcap": r for p, r in ins.items()}
    out.update({f"expected_{p}.pcap": r for p, r in exp.items()})
    return out


def case_spray_fig6_nack_validation():
    """Fig. 6: 0, 1, 3 reach the RNIC, then 2; the RNIC's NAK for ePSN 2 (sent when 3 arrived)
    reaches the ToR after 2 went through: invalid, dropped. 4 is lost; 6 arrives: the NAK for 4
    is valid (PathMaxPSN[0] = 6 > 4) and forwarded."""
    ev = []
    for t, psn in [(1, 0), (3, 1), (5, 3), (6, 2), (10, 6)]:
        d = spray_data(psn)
        ev.append((t, f"up{psn % 2}", d, "h0", spray_to_rnic(d)))
    for t, psn, syn in [(2, 0, 0x00), (4, 1, 0x00), (8, 3, 0x00), (11, 4, 0x60)]:
        a = spray_ack(psn, syn, 1)
        ev.append((t, "h0", a, "up0", spray_to_spine0(a)))
    ev.append((7, "h0", spray_ack(2, 0x60, 1), None, None))  # invalid: dropped
    ev.sort(key=lambda e: e[0])
    return spray_case(ev)


def case_spray_fig7_lazy_drop():
    """Fig. 7 then failure detection: 1 reaches the RNIC, whose NAK for 0 is undetermined
    (PathMaxPSN[0] = -inf): stashed and dropped. 3 (path 1) changes nothing; 2 (path 0, 2 > 0)
    confirms the loss: Themis-D sends the NAK for 0 itself. The retransmitted 0 comes back on
    path 1 with Themis-S's off-policy mark, which is cleared toward the RNIC. Path 0 then fails:
    the NAK for 4 is undetermined; 9 makes the OOO degree 9 - 4 = 5 > ooo_threshold 4: Themis-D
    sends the NAK for 4 with the path avoidance signal."""
    ev = []
    for t, psn in [(1, 1), (3, 3), (4, 2), (7, 5), (9, 7), (10, 9)]:
        d = spray_data(psn)
        ev.append((t, f"up{psn % 2}", d, "h0", spray_to_rnic(d)))
    # The retransmission of 0, rerouted by the source ToR onto path 1 and marked off-policy.
    marked = Ether(spray_data(0))
    marked.src, marked.dst = SPRAY_MAC_SPINE[1], SPRAY_MAC_UP[1]
    marked[BTH].resv6 = SPRAY_OFF_POLICY
    marked[BTH].icrc = None
    ev.append((5, "up1", bytes(marked), "h0", spray_to_rnic(spray_data(0))))
    ev.append((2, "h0", spray_ack(0, 0x60, 1), None, None))  # undetermined: stashed
    ev.append((4, "h0", None, "up0", spray_regenerated_nak(0, 1, False)))
    a = spray_ack(3, 0x00, 2)
    ev.append((6, "h0", a, "up0", spray_to_spine0(a)))
    ev.append((8, "h0", spray_ack(4, 0x60, 2), None, None))  # undetermined: stashed
    ev.append((10, "h0", None, "up0", spray_regenerated_nak(4, 2, True)))
    ev.sort(key=lambda e: (e[0], e[2] is None))
    ins = [(t, p, f, op, of) for t, p, f, op, of in ev if f is not None]
    outs = [(t, None, None, op, of) for t, p, f, op, of in ev if f is None]
    out = spray_case(ins)
    # Regenerated NAKs are emitted while the confirming data packet leaves toward the RNIC.
    for t, _, _, op, of in outs:
        out[f"expected_{op}.pcap"].append((T0 + t * 1000, of))
        out[f"expected_{op}.pcap"].sort(key=lambda r: r[0])
    return out


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


# --------------------------------------------------------------------------------------------
# Reflex (paper 003) on configs/reflex-esw.toml: INT-over-UDP timestamps (docs/wire-formats.md),
# frames built by oracle/reflex_model.py with scapy (ICRC of the packet without INT).
# --------------------------------------------------------------------------------------------

RF_MAC_DC0, RF_MAC_WAN0, RF_MAC_WAN1 = "02:00:00:00:00:01", "02:00:00:00:00:03", "02:00:00:00:00:04"
RF_MAC_HOST = "02:00:00:00:10:01"    # next hop for 10.0.0.0/24 behind dc0
RF_MAC_PEER0 = "02:00:00:00:20:01"   # DCI peer behind wan0 (next hop for 10.1.0.0/16)
RF_MAC_PEER1 = "02:00:00:00:20:02"   # DCI peer behind wan1
RF_LOCAL, RF_REMOTE = "10.0.0.5", "10.1.0.7"


def rf_cfg(case):
    """The Reflex config a case uses (case.toml's `config`), checked against the constants here."""
    d = os.path.join(HERE, "cases", case)
    with open(os.path.join(d, "case.toml"), "rb") as f:
        path = os.path.normpath(os.path.join(d, tomllib.load(f)["config"]))
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    macs = {p["name"]: p["mac"] for p in cfg["ports"]}
    assert (macs["dc0"], macs["wan0"], macs["wan1"]) == (RF_MAC_DC0, RF_MAC_WAN0, RF_MAC_WAN1), path
    nh = {r["prefix"]: (r["port"], r["next_hop_mac"]) for r in cfg["routes"]}
    assert nh["10.0.0.0/24"] == ("dc0", RF_MAC_HOST) and nh["10.1.0.0/16"] == ("wan0", RF_MAC_PEER0), path
    assert cfg["qos"]["dscp_map"]["26"] == 3 and cfg["reflex"]["int_udp_port"] == 5000, path
    return cfg


# reflex_nsf_pseudo_ack: T_src (ns) of flow 1's 32 packets, 1.1 us apart (H: > 5 us, L: <= 5 us).
# Expected (T_interval 5 us = 4.5 packet gaps, N_cool 5): pseudo-ACKs for packets
# 2 (Silent -> Active), 7 (Active, interval), 12 (Cooling, counter 2), 17 (Active -> Cooling),
# 25 (Silent -> Active), 30 (Cooling, counter 1); 13 (Cooling -> Active), 22 and 31 (-> Silent)
# make none.
RF_NSF_TSRC = [800, 1200,                                      # 0-1 Silent
               9000, 12000, 15000, 18000, 21000, 24000, 20000,  # 2-8 Active
               3000, 2000, 1000, 500,                          # 9-12 Cooling 5, 4, 3, 2
               8000, 9500, 11000, 6000,                        # 13-16 back to Active
               4000, 3000, 2000, 1500, 1000, 900, 700, 600,    # 17-24 Cooling 5..1, Silent at 22
               30000,                                          # 25 Active
               2500, 2000, 1500, 1000, 800, 700]               # 26-31 Cooling 5..1, Silent at 31
RF_NSF_EXPECTED = [2, 7, 12, 17, 25, 30]
RF_NSF_GAP = 1100
# Flow 2 (another requester QPN, same addresses): never above the threshold; 5000 is equal to it
# (stays Silent), -2000 is a timestamp 2 us in the future (T_src 0).
RF_NSF_TSRC2 = [0, 1000, 4999, 5000, 3000, -2000, 2500, 5000]


def case_reflex_nsf_pseudo_ack():
    """dc0: Reflex data (RDMA WRITE MIDDLE, 512 B) from local 10.0.0.5 to remote 10.1.0.7: flow 1
    (requester QPN 0x123) walks Silent -> Active -> Cooling -> Active -> Cooling -> Silent ->
    Active -> Cooling -> Silent; flow 2 (QPN 0x124) stays Silent; one plain RoCE packet (no INT).
    Hop timestamps are arrival - T_src: wan0 is idle, so the departure on wan0 is the arrival."""
    rf_cfg("reflex_nsf_pseudo_ack")
    from reflex_model import build_reflex_data
    start = T0 + 10 * US
    recs = []
    ipid = 1

    def data(t, qpn, dqpn, psn, tsrc, sport, pkey):
        nonlocal ipid
        ipid += 1
        return (t, build_reflex_data(RF_MAC_HOST, RF_MAC_DC0, RF_LOCAL, RF_REMOTE, ts=t - tsrc, qpn=qpn,
                                     dqpn=dqpn, psn=psn, payload=payload(512, psn), pkey=pkey,
                                     sport=sport, ipid=ipid))

    for k, tsrc in enumerate(RF_NSF_TSRC):
        recs.append(data(start + k * RF_NSF_GAP, 0x000123, 0x800456, 1000 + k, tsrc, 50001, 0x8012))
    for j, tsrc in enumerate(RF_NSF_TSRC2):
        recs.append(data(start + (1 + 4 * j) * RF_NSF_GAP + 550, 0x000124, 0x800457, 5000 + j, tsrc,
                         50002, 0xFFFF))
    plain = roce4(RF_MAC_HOST, RF_MAC_DC0, RF_LOCAL, RF_REMOTE, opcode=0x07, dqpn=0x800458, psn=7000,
                  data=payload(512, 77), ipid=99, sport=50003)
    recs.append((start + 11 * RF_NSF_GAP + 550, bytes(plain)))
    recs.sort(key=lambda r: r[0])
    from reflex_model import decode, nsf_model, t_src
    ev = [(t, d["qpn"], t_src(t, d["ts"])) for t, d in ((t, decode(f)) for t, f in recs) if d]
    nsf = rf_cfg("reflex_nsf_pseudo_ack")["reflex"]["nsf"]
    answered = [ev[i] for i in nsf_model(ev, nsf["t_src_thresh_ns"], nsf["t_interval_ns"], nsf["n_cool"])]
    assert [(t - start) // RF_NSF_GAP for t, _, _ in answered] == RF_NSF_EXPECTED, answered
    assert all(q == 0x000123 for _, q, _ in answered)
    # Expected pseudo-ACKs (scapy-built from docs/wire-formats.md), timestamps = the data's
    # departure = arrival; compared without timestamps.
    from reflex_model import expected_pseudo_ack
    acks = []
    for k in RF_NSF_EXPECTED:
        t = start + k * RF_NSF_GAP
        f = next(fr for ts, fr in recs if ts == t)
        acks.append((t, expected_pseudo_ack(f, RF_MAC_DC0, RF_MAC_HOST)))
    return {"in_dc0.pcap": recs, "expected_dc0.pcap": acks, "expected_dc1.pcap": [],
            "expected_wan1.pcap": []}


# reflex_ndt_queues: flow A (requester QPN 0xA01) and B (0xA02), 10.1.0.7 -> 10.0.0.5, 342-byte
# frames (30 ns on a 100 Gb/s link, serialization rounded up).
RF_NDT_A, RF_NDT_B = (0x000A01, 0x000B01, 50011), (0x000A02, 0x000B02, 50012)
RF_NDT_GAP = 30          # ns: one frame time, i.e. line rate per ingress port
RF_NDT_BURST = 30_000    # ns after T0: B from both WAN ports (2x line rate into dc0)
RF_NDT_A_NORMAL = 32_000  # ns: A's ACK with RTT_dst 2 us (Normal) while A waits in Controlled


def case_reflex_ndt_queues():
    """NDT on dc0. wan0/wan1: Reflex data from remote 10.1.0.7 to local 10.0.0.5 (DS flags 0);
    dc0: the local RNIC's ACKs (ECHO) whose echoed timestamps give A RTT_dst 20 us (Congested)
    and B 3 us (Normal). Then B arrives at 2x line rate (both WAN ports) for 16 packets, then A
    on wan0 and B on wan1 together, each at line rate: both dc0 queues fill, Normal (B) : Controlled
    (A) = 8:1. A's Normal ACK while A is still queued in Controlled, then 4 more A packets (must
    stay behind the queued ones), and an idle A and B at the end."""
    rf_cfg("reflex_ndt_queues")
    from reflex_model import build_reflex_data, build_reflex_ack, FLAG_ECHO
    wan0, wan1, dc0 = [], [], []
    psn = {"A": 0, "B": 0}
    ipid = [0]

    def data(port, t, flow):
        qpn, dqpn, sport = RF_NDT_A if flow == "A" else RF_NDT_B
        p = psn[flow]
        psn[flow] += 1
        ipid[0] += 1
        src_mac, dst_mac = (RF_MAC_PEER0, RF_MAC_WAN0) if port is wan0 else (RF_MAC_PEER1, RF_MAC_WAN1)
        # The requester stamped it 40 us before (its own clock; NDT overwrites it at dc0 egress).
        port.append((T0 + t, build_reflex_data(src_mac, dst_mac, RF_REMOTE, RF_LOCAL, ts=T0 + t - 40_000,
                                               qpn=qpn, dqpn=dqpn, psn=p, payload=payload(256, p),
                                               sport=sport, ttl=60, ipid=ipid[0])))

    def ack(t, flow, echo_ts, acked_psn, msn):
        qpn, _, sport = RF_NDT_A if flow == "A" else RF_NDT_B
        dc0.append((T0 + t, build_reflex_ack(RF_MAC_HOST, RF_MAC_DC0, RF_LOCAL, RF_REMOTE, ts=T0 + echo_ts,
                                             qpn=qpn, psn=acked_psn, msn=msn, tos=26 << 2, ipid=msn,
                                             sport=sport, ds_flags=FLAG_ECHO)))

    # Phase 1: unknown flows enter the Flow State Table as Normal; nothing queues.
    for t, flow in [(0, "A"), (1000, "B"), (2000, "A"), (3000, "B"), (4000, "A"), (20_000, "B")]:
        data(wan0, t, flow)
    # ACKs echo the egress timestamps dc0 wrote (departure = arrival on the idle port).
    ack(23_000, "B", 20_000, 2, 1)   # RTT_dst 3 us: Normal
    ack(24_000, "A", 4_000, 2, 1)    # RTT_dst 20 us: Congested
    # Phase 2: B alone at 2x line rate (wan0 and wan1 interleaved) builds a Normal backlog.
    t = RF_NDT_BURST
    for k in range(16):
        data(wan0 if k % 2 == 0 else wan1, t + 15 * k, "B")
    # Phase 3: A on wan0 (-> Controlled) and B on wan1, each at line rate.
    t3 = t + 15 * 16
    for k in range(24):
        data(wan0, t3 + RF_NDT_GAP * k, "A")
    for k in range(72):
        data(wan1, t3 + 15 + RF_NDT_GAP * k, "B")
    # Phase 4: A turns Normal (RTT_dst 2 us) while its packets wait in Controlled; A's next
    # packets must still go to Controlled (behind them) until they have left.
    ack(RF_NDT_A_NORMAL, "A", RF_NDT_A_NORMAL - 2_000, 20, 2)
    for k in range(4):
        data(wan0, RF_NDT_A_NORMAL + 300 + RF_NDT_GAP * k, "A")
    # Phase 5: long after the drain, one A and one B on idle ports.
    data(wan0, 60_000, "A")
    data(wan1, 61_000, "B")
    for recs in (wan0, wan1, dc0):
        recs.sort(key=lambda r: r[0])
    acks_out = [(ts, forwarded(f, RF_MAC_WAN0, RF_MAC_PEER0)) for ts, f in dc0]
    return {"in_wan0.pcap": wan0, "in_wan1.pcap": wan1, "in_dc0.pcap": dc0,
            "expected_wan0.pcap": acks_out, "expected_wan1.pcap": [], "expected_dc1.pcap": []}


# --------------------------------------------------------------------------------------------
# MLCC (paper 001, section 3) on configs/mlcc-dci.toml (the DCI) and configs/mlcc-tor.toml (an
# intra-DC switch with [int]). Frames built by oracle/mlcc_model.py (scapy + struct, from
# docs/wire-formats.md).
# --------------------------------------------------------------------------------------------

ML_MAC_DC0, ML_MAC_WAN0 = "02:00:00:00:00:01", "02:00:00:00:00:02"
ML_MAC_SPINE = "02:00:00:00:10:01"   # next hop for 10.0.0.0/16 behind dc0
ML_MAC_PEER = "02:00:00:00:20:01"    # the remote DCI behind wan0 (10.1.0.0/16)
ML_LOCAL, ML_REMOTE = "10.0.0.5", "10.1.0.7"
ML_QPN = 0x000ABC                    # the responder's QPN (data BTH.DestQP, MCETH qpn)
ML_REQ_QPN = 0x000077                # the requester's QPN (the ACK's BTH.DestQP)
ML_TOR_MAC_HOST0, ML_TOR_MAC_UP0 = "02:00:00:00:30:01", "02:00:00:00:30:03"
ML_TOR_MAC_HOST1 = "02:00:00:00:30:02"
ML_MAC_HOST = "02:00:00:00:40:01"    # the local host behind the ToR's host0
ML_MAC_HOST1 = "02:00:00:00:40:02"   # next hop for 10.0.1.0/24 behind host1
ML_MAC_DCI = "02:00:00:00:00:01"     # the ToR's default route (up0): the DCI
ML_LOCAL2 = "10.0.1.9"               # another host of the DC, behind the ToR's host1


def ml_cfg(case):
    """The config a case runs (case.toml's `config`), checked against the constants here."""
    d = os.path.join(HERE, "cases", case)
    with open(os.path.join(d, "case.toml"), "rb") as f:
        path = os.path.normpath(os.path.join(d, tomllib.load(f)["config"]))
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    macs = {p["name"]: p["mac"] for p in cfg["ports"]}
    nh = {r["prefix"]: (r["port"], r["next_hop_mac"]) for r in cfg["routes"]}
    assert cfg["int"]["udp_port"] == 5000 and cfg["qos"]["dscp_map"]["26"] == 3, path
    if cfg["switch"].get("pipeline") == "mlcc":
        assert (macs["dc0"], macs["wan0"]) == (ML_MAC_DC0, ML_MAC_WAN0), path
        assert nh["10.0.0.0/16"] == ("dc0", ML_MAC_SPINE), path
        assert nh["10.1.0.0/16"] == ("wan0", ML_MAC_PEER), path
        assert cfg["mlcc"]["int_udp_port"] == 5000, path
    else:
        assert (macs["host0"], macs["host1"], macs["up0"]) == (ML_TOR_MAC_HOST0, ML_TOR_MAC_HOST1,
                                                               ML_TOR_MAC_UP0), path
        assert nh["10.0.0.0/24"] == ("host0", ML_MAC_HOST), path
        assert nh["10.0.1.0/24"] == ("host1", ML_MAC_HOST1), path
        assert nh["0.0.0.0/0"] == ("up0", ML_MAC_DCI), path
    return cfg


# mlcc_switch_int_feedback: 8 INT data packets (one RDMA WRITE message: FIRST with a RETH,
# MIDDLE x 6, LAST), each with two made-up hops pushed by the DC's switches (ToR node 11 first,
# then spine node 12: newest first in the stack), then one plain RoCE packet. Packet 5's INT
# has RemainingHopCount 0 and the E bit (a third switch found no room): its Switch-INT must
# carry flag 0x40.
ML_FB_PSN0 = 0x100
ML_FB_N = 8
ML_FB_E = 5


def mlcc_hop(node_id, queue_id, qocc, ts, tx_bytes, rate_mbps):
    from mlcc_model import hop
    return hop(node_id, queue_id, qocc, ts, tx_bytes, rate_mbps)


def ml_fb_hops(k):
    t = T0 + 9 * US + k * US
    spine = mlcc_hop(12, 3, 1500 * k + 300, t - 700, 0x1_0000_0000 + 1058 * k, 100_000)
    tor = mlcc_hop(11, 3, (4096 * k) % 0x1000000, t - 1900, 7 * 1058 * k, 25_000)
    return [spine, tor]


def case_mlcc_switch_int_feedback():
    """dc0: RDMA WRITE packets from local 10.0.0.5 to remote 10.1.0.7 (DSCP 26, responder QPN
    0xabc) carrying the MLCC INT with two hops, 1 us apart, then one plain RoCE WRITE ONLY.
    Expected on wan0: each without INT, routed (TTL - 1, MACs), i.e. the RoCE packet scapy built
    before the INT was inserted, forwarded; on dc0: one Switch-INT per INT data packet
    (psn_stride 1), built by mlcc_model.expected_switch_int from the data's fields."""
    cfg = ml_cfg("mlcc_switch_int_feedback")
    assert cfg["mlcc"]["feedback"]["psn_stride"] == 1 and cfg["mlcc"]["feedback"]["dscp"] == 48
    from mlcc_model import roce_frame, insert_int, int_bytes, expected_switch_int
    start = T0 + 10 * US
    recs, wan, fb = [], [], []
    for k in range(ML_FB_N):
        op = 0x06 if k == 0 else (0x08 if k == ML_FB_N - 1 else 0x07)   # WRITE FIRST/MIDDLE/LAST
        ext = reth(0x7F00_0000_0000 + 0x10000, 0x1234, ML_FB_N * 512) if k == 0 else b""
        plain = roce_frame(ML_MAC_SPINE, ML_MAC_DC0, ML_LOCAL, ML_REMOTE, dqpn=ML_QPN,
                           psn=ML_FB_PSN0 + k, opcode=op, payload=payload(512, k), ext=ext,
                           ipid=0x200 + k, sport=49300, ackreq=1 if k == ML_FB_N - 1 else 0)
        hops = ml_fb_hops(k)
        ins = int_bytes(hops, rhc=0, e=True) if k == ML_FB_E else int_bytes(hops, max_hops=3)
        f = insert_int(plain, ins)
        t = start + k * US
        recs.append((t, f))
        wan.append((t, forwarded(plain, ML_MAC_WAN0, ML_MAC_PEER)))
        fb.append((t, expected_switch_int(f, ML_MAC_DC0, ML_MAC_SPINE, ttl=63, dscp=48)))
    plain = roce_frame(ML_MAC_SPINE, ML_MAC_DC0, ML_LOCAL, ML_REMOTE, dqpn=ML_QPN + 1, psn=0x300,
                       opcode=0x0A, payload=payload(256, 99),
                       ext=reth(0x7F00_0000_0000, 0x1234, 256), ipid=0x300, sport=49301)
    t = start + ML_FB_N * US
    recs.append((t, plain))
    wan.append((t, forwarded(plain, ML_MAC_WAN0, ML_MAC_PEER)))
    return {"in_dc0.pcap": recs, "expected_wan0.pcap": wan, "expected_dc0.pcap": fb}


# mlcc_pfq_credit: a line-rate burst from the WAN into one PFQ, then the receiver's ACK.
ML_PFQ_N = 30
ML_PFQ_PAYLOAD = 1000
ML_PFQ_START = 10 * US
ML_PFQ_ACK = 16_300           # ns after T0: after the first 20 data packets left dc0
ML_PFQ_R_CREDIT_KBPS = 10_000_000


def case_mlcc_pfq_credit():
    """wan0: ML_PFQ_N RDMA WRITE MIDDLE packets (1000-byte payload, 1058-byte frames) from remote
    10.1.0.7 to local 10.0.0.5, responder QPN 0xabc, no INT, back to back at 100 Gb/s ((frame +
    24) x 8 / 100 ns apart, floored). dc0: the local receiver's ACK (requester QP 0x77) with an
    MCETH: flags 0x80, qpn 0xabc, C_R 1, R_credit 10 Gb/s, R_DQM 0."""
    ml_cfg("mlcc_pfq_credit")
    from mlcc_model import roce_frame, build_ack_mceth, MCETH_CREDIT
    wan = []
    for k in range(ML_PFQ_N):
        f = roce_frame(ML_MAC_PEER, ML_MAC_WAN0, ML_REMOTE, ML_LOCAL, dqpn=ML_QPN, psn=0x500 + k,
                       opcode=0x07, payload=payload(ML_PFQ_PAYLOAD, k), ipid=0x600 + k, sport=49400,
                       ttl=60)
        assert len(f) == 14 + 20 + 8 + 12 + ML_PFQ_PAYLOAD + 4
        wan.append((T0 + ML_PFQ_START + k * (len(f) + 24) * 8 // 100, f))
    ack = build_ack_mceth(ML_MAC_SPINE, ML_MAC_DC0, ML_LOCAL, ML_REMOTE, dqpn=ML_REQ_QPN,
                          psn=0x500 + 19, qpn=ML_QPN, c_r=1, r_credit_kbps=ML_PFQ_R_CREDIT_KBPS,
                          flags=MCETH_CREDIT, msn=20, ipid=0, sport=49401)
    return {"in_wan0.pcap": wan, "in_dc0.pcap": [(T0 + ML_PFQ_ACK, ack)]}


def case_int_source_tor():
    """host0: RoCE from local 10.0.0.5 (behind the ToR's host0): three RC data packets (SEND ONLY,
    RDMA WRITE FIRST with a RETH, RDMA WRITE LAST) and an RC ACK to remote 10.1.0.7 (default
    route, up0), and one RDMA WRITE ONLY to 10.0.1.9 (host1), 2 us apart so no queue builds.
    Expected on host1: the packet routed, no INT (INT only on up0)."""
    ml_cfg("int_source_tor")
    from mlcc_model import roce_frame
    start = T0 + 10 * US
    recs = []
    up = [(0x04, b""), (0x06, reth(0x7E00_0000_0000, 0x4321, 2048)), (0x08, b"")]
    for k, (op, ext) in enumerate(up):
        recs.append((start + 2 * k * US,
                     roce_frame(ML_MAC_HOST, ML_TOR_MAC_HOST0, ML_LOCAL, ML_REMOTE, dqpn=ML_QPN,
                                psn=0x700 + k, opcode=op, ext=ext, payload=payload(700 + 100 * k, k),
                                ipid=0x700 + k, sport=49500)))
    ack = (Ether(src=ML_MAC_HOST, dst=ML_TOR_MAC_HOST0)
           / IP(src=ML_LOCAL, dst=ML_REMOTE, tos=26 << 2, ttl=64, id=0x7FF, flags="DF")
           / UDP(sport=49501, dport=4791, chksum=0)
           / BTH(opcode=0x11, dqpn=0x000099, psn=0x42) / AETH(syndrome=0x1F, msn=3))
    recs.append((start + 6 * US, bytes(ack)))
    local = roce_frame(ML_MAC_HOST, ML_TOR_MAC_HOST0, ML_LOCAL, ML_LOCAL2, dqpn=0x000DEF, psn=0x800,
                       opcode=0x0A, ext=reth(0x7D00_0000_0000, 0x5555, 600), payload=payload(600, 7),
                       ipid=0x800, sport=49502)
    recs.append((start + 8 * US, local))
    return {"in_host0.pcap": recs,
            "expected_host1.pcap": [(start + 8 * US, forwarded(local, ML_TOR_MAC_HOST1, ML_MAC_HOST1))]}


# --------------------------------------------------------------------------------------------
# Where the box sits (configs/routed-arp.toml): a wire pair, and ARP / ND on routed ports
# --------------------------------------------------------------------------------------------

RA_MAC = {"dc0": "02:00:00:00:00:01", "wan0": "02:00:00:00:00:02",
          "dc1": "02:00:00:00:00:03", "wan1": "02:00:00:00:00:04"}
RA_HOST_MAC, RA_GW_MAC = "02:00:00:00:10:07", "02:00:00:00:20:02"


def routed_arp_config():
    """configs/routed-arp.toml must match the constants above."""
    with open(os.path.join(HERE, "..", "configs", "routed-arp.toml"), "rb") as f:
        cfg = tomllib.load(f)
    for port in cfg["ports"]:
        assert RA_MAC[port["name"]] == port["mac"], f"routed-arp.toml: {port['name']}"
    assert cfg["wire"][0]["ports"] == ["dc1", "wan1"]
    return cfg


def pad60(frame):
    return frame + bytes(max(0, 60 - len(frame)))


def case_wire_pair_transparent():
    """A [[wire]] pair passes everything unchanged, both ways: ARP, LLDP, IPv6 ND, a TTL-1 IPv4
    packet (not routed, not expired), RoCEv2, a frame with an unknown EtherType, a VLAN-tagged
    frame."""
    from scapy.layers.l2 import ARP, Dot1Q
    from scapy.layers.inet6 import ICMPv6ND_NS, ICMPv6NDOptSrcLLAddr
    routed_arp_config()
    a, b = "02:00:00:00:30:01", "02:00:00:00:30:02"
    frames = [
        pad60(bytes(Ether(src=a, dst="ff:ff:ff:ff:ff:ff") / ARP(op=1, hwsrc=a, psrc="10.9.0.1",
                                                            pdst="10.9.0.2"))),
        pad60(bytes(Ether(src=a, dst="01:80:c2:00:00:0e", type=0x88cc) / Raw(bytes.fromhex(
            "0207040200000030010403056574683006020078" + "0000")))),
        bytes(Ether(src=a, dst="33:33:ff:00:00:02") / IPv6(src="2001:db8:9::1",
              dst="ff02::1:ff00:2", hlim=255) / ICMPv6ND_NS(tgt="2001:db8:9::2")
              / ICMPv6NDOptSrcLLAddr(lladdr=a)),
        bytes(Ether(src=a, dst=b) / IP(src="10.9.0.1", dst="10.8.0.1", ttl=1, id=7)
              / UDP(sport=1000, dport=2000) / Raw(payload(20, 1))),
        bytes(roce4(a, b, "10.9.0.1", "10.8.0.1", opcode=0x04, dqpn=0x42, psn=9,
                    data=payload(64, 2), ackreq=1)),
        pad60(bytes(Ether(src=a, dst=b, type=0x88b5) / Raw(payload(30, 3)))),
        bytes(Ether(src=a, dst=b) / Dot1Q(vlan=100, prio=3) / IP(src="10.9.0.1", dst="10.8.0.1")
              / UDP(sport=1, dport=2) / Raw(payload(30, 4))),
    ]
    dc1 = [(T0 + i * 10_000, f) for i, f in enumerate(frames)]
    wan1 = [(T0 + 5_000 + i * 10_000, f) for i, f in enumerate(frames)]
    return {
        "in_dc1.pcap": dc1,
        "in_wan1.pcap": wan1,
        "expected_wan1.pcap": dc1,
        "expected_dc1.pcap": wan1,
        "expected_dc0.pcap": [],
        "expected_wan0.pcap": [],
    }


def case_neighbor_arp_nd():
    """Routed ports (configs/routed-arp.toml): dc0 answers an ARP request and a neighbour
    solicitation for its addresses; IPv4 and IPv6 data toward the remote DC make wan0 solicit
    its gateways (broadcast ARP request, multicast NS), and are dropped; the gateways answer on
    wan0; the same data 60 us later goes out of wan0 to the learned MAC. ARP for an address that
    is not the switch's gets nothing (never flooded)."""
    from scapy.layers.l2 import ARP
    from scapy.layers.inet6 import (ICMPv6ND_NS, ICMPv6ND_NA, ICMPv6NDOptSrcLLAddr,
                                    ICMPv6NDOptDstLLAddr)
    routed_arp_config()
    h, gw = RA_HOST_MAC, RA_GW_MAC
    m0, mw = RA_MAC["dc0"], RA_MAC["wan0"]
    us = 1_000
    arp_req = pad60(bytes(Ether(src=h, dst="ff:ff:ff:ff:ff:ff")
                          / ARP(op=1, hwsrc=h, psrc="10.0.0.7", pdst="10.0.0.1")))
    ns = bytes(Ether(src=h, dst="33:33:ff:00:00:01")
               / IPv6(src="2001:db8:a::7", dst="ff02::1:ff00:1", hlim=255)
               / ICMPv6ND_NS(tgt="2001:db8:a::1") / ICMPv6NDOptSrcLLAddr(lladdr=h))
    d4 = bytes(roce4(h, m0, "10.0.0.7", "10.1.0.5", opcode=0x04, dqpn=0x42, psn=1,
                     data=payload(64, 1), ackreq=1))
    d6 = bytes(Ether(src=h, dst=m0) / IPv6(src="2001:db8:a::7", dst="2001:db8:1::5", hlim=64)
               / UDP(sport=49152, dport=4791, chksum=0) / BTH(opcode=0x04, dqpn=0x43, psn=1)
               / Raw(payload(64, 2)))
    other = pad60(bytes(Ether(src=h, dst="ff:ff:ff:ff:ff:ff")
                        / ARP(op=1, hwsrc=h, psrc="10.0.0.7", pdst="10.0.0.9")))
    dc0 = [(T0, arp_req), (T0 + 10 * us, ns), (T0 + 20 * us, d4), (T0 + 30 * us, d6),
           (T0 + 100 * us, d4), (T0 + 110 * us, d6), (T0 + 120 * us, other)]
    arp_rep = pad60(bytes(Ether(src=gw, dst=mw)
                          / ARP(op=2, hwsrc=gw, psrc="192.0.2.2", hwdst=mw, pdst="192.0.2.1")))
    na = bytes(Ether(src=gw, dst=mw) / IPv6(src="2001:db8:ff::2", dst="2001:db8:ff::1", hlim=255)
               / ICMPv6ND_NA(R=1, S=1, O=1, tgt="2001:db8:ff::2")
               / ICMPv6NDOptDstLLAddr(lladdr=gw))
    wan0 = [(T0 + 40 * us, arp_rep), (T0 + 41 * us, na)]
    # What the switch must send, built by scapy.
    rep = pad60(bytes(Ether(src=m0, dst=h)
                      / ARP(op=2, hwsrc=m0, psrc="10.0.0.1", hwdst=h, pdst="10.0.0.7")))
    adv = bytes(Ether(src=m0, dst=h) / IPv6(src="2001:db8:a::1", dst="2001:db8:a::7", hlim=255)
                / ICMPv6ND_NA(R=1, S=1, O=1, tgt="2001:db8:a::1")
                / ICMPv6NDOptDstLLAddr(lladdr=m0))
    who = pad60(bytes(Ether(src=mw, dst="ff:ff:ff:ff:ff:ff")
                      / ARP(op=1, hwsrc=mw, psrc="192.0.2.1", hwdst="00:00:00:00:00:00",
                            pdst="192.0.2.2")))
    sol = bytes(Ether(src=mw, dst="33:33:ff:00:00:02")
                / IPv6(src="2001:db8:ff::1", dst="ff02::1:ff00:2", hlim=255)
                / ICMPv6ND_NS(tgt="2001:db8:ff::2") / ICMPv6NDOptSrcLLAddr(lladdr=mw))
    return {
        "in_dc0.pcap": dc0,
        "in_wan0.pcap": wan0,
        "expected_dc0.pcap": [(T0, rep), (T0 + 10 * us, adv)],
        "expected_wan0.pcap": [(T0 + 20 * us, who), (T0 + 30 * us, sol),
                               (T0 + 100 * us, forwarded(d4, mw, gw)),
                               (T0 + 110 * us, forwarded(d6, mw, gw))],
    }


# --------------------------------------------------------------------------------------------
# ecmp_groups
# --------------------------------------------------------------------------------------------

ECMP_SEED = 7
# The group's members in config order: (port, next-hop MAC).
ECMP_MEMBERS = [("wan0", "02:00:00:00:02:01"), ("wan0", "02:00:00:00:02:02"),
                ("dc1", "02:00:00:00:02:03")]
M64 = (1 << 64) - 1


def ecmp_hash5(src, dst, proto, sport, dport, seed):
    """The 5-tuple hash as docs/config.md and dataplane/src/asic/ecmp.rs define it, written again
    from that description: addresses as 128-bit IPv4-mapped integers, each 64-bit word mixed in
    with a multiply and a shift, then splitmix64's finaliser."""
    h = seed ^ 0x9E3779B97F4A7C15
    for w in (src & M64, src >> 64, dst & M64, dst >> 64, (sport << 16) | dport | (proto << 32)):
        h = ((h ^ w) * 0xBF58476D1CE4E5B9) & M64
        h ^= h >> 29
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & M64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & M64
    return h ^ (h >> 31)


def ecmp_member(frame):
    """The member index the switch must pick for `frame` (IPv4: TCP/UDP ports unless a fragment)."""
    p = Ether(frame)
    ip = p[IP]

    def mapped(a):
        return 0xFFFF00000000 | int.from_bytes(bytes(map(int, a.split("."))), "big")

    frag = ip.frag != 0 or (ip.flags & 1)
    sport = dport = 0
    if not frag and (TCP in p or UDP in p):
        l4 = p[TCP] if TCP in p else p[UDP]
        sport, dport = l4.sport, l4.dport
    h = ecmp_hash5(mapped(ip.src), mapped(ip.dst), ip.proto, sport, dport, ECMP_SEED)
    return (h >> 32) % len(ECMP_MEMBERS)


def case_ecmp_groups():
    h0 = dict(src_mac=MAC_H0, dst_mac=MAC_DC0)
    flows = []
    for i in range(32):  # RoCEv2 QPs: the UDP source port is the QP's entropy
        flows.append([roce4(**h0, src=IP_H0, dst=f"10.2.{i % 4}.{1 + i}", opcode=0x04,
                            dqpn=0x100 + i, psn=k, ipid=100 + 2 * i + k, sport=49152 + i,
                            data=payload(64, i)) for k in range(2)])
    for i in range(8):  # TCP
        flows.append([Ether(src=MAC_H0, dst=MAC_DC0)
                      / IP(src=IP_H1, dst=f"10.2.9.{1 + i}", id=300 + 2 * i + k, flags="DF")
                      / TCP(sport=40000 + i, dport=5201, seq=1 + 100 * k, ack=1, flags="PA",
                            window=502) / Raw(payload(100, 50 + i)) for k in range(2)])
    # One UDP datagram in two fragments: no ports in the hash, both on one member.
    whole = (IP(src=IP_H0, dst="10.2.7.7", id=777, tos=TOS_RDMA)
             / UDP(sport=40404, dport=5000) / Raw(payload(600, 99)))
    flows.append([Ether(src=MAC_H0, dst=MAC_DC0) / f for f in fragment(whole, fragsize=320)])
    inputs, out = [], {"wan0": [], "dc1": []}
    used = set()
    i = 0
    # Round by round: packet k of every flow, then packet k + 1.
    for k in range(2):
        for fl in flows:
            frame = bytes(fl[k])
            ts = T0 + i * 2_000  # 2 us apart: no queueing at 100 Gb/s
            i += 1
            inputs.append((ts, frame))
            m = ecmp_member(frame)
            used.add(m)
            port, nh = ECMP_MEMBERS[m]
            src_mac = MAC_WAN0 if port == "wan0" else MAC_DC1
            out[port].append((ts, forwarded(frame, src_mac, nh)))
    assert used == {0, 1, 2}, f"the flows reach only members {used}"
    return {
        "in_dc0.pcap": inputs,
        "expected_wan0.pcap": out["wan0"],
        "expected_dc1.pcap": out["dc1"],
        "expected_dc0.pcap": [],
    }


CASES = {
    "themis_pnp_cnp": case_themis_pnp_cnp,
    "themis_syn_cookie": case_themis_syn_cookie,
    "themis_daemon": case_themis_daemon,
    "themis_trp_loops": case_themis_trp_loops,
    "themis_alg1_trace": case_themis_alg1_trace,
    "l3_forward_roce_tcp": case_l3_forward_roce_tcp,
    "ecn_marking": two_to_one,
    "pfc_xoff_xon": two_to_one,
    "spray_fig6_nack_validation": case_spray_fig6_nack_validation,
    "spray_fig7_lazy_drop": case_spray_fig7_lazy_drop,
    "bifrost_slot_pause": case_bifrost_slot_pause,
    "reflex_nsf_pseudo_ack": case_reflex_nsf_pseudo_ack,
    "reflex_ndt_queues": case_reflex_ndt_queues,
    "mlcc_switch_int_feedback": case_mlcc_switch_int_feedback,
    "mlcc_pfq_credit": case_mlcc_pfq_credit,
    "int_source_tor": case_int_source_tor,
    "wire_pair_transparent": case_wire_pair_transparent,
    "neighbor_arp_nd": case_neighbor_arp_nd,
    "ecmp_groups": case_ecmp_groups,
}


def check_config(case_dir):
    """The constants above must match the case's switch.toml."""
    path = os.path.join(case_dir, "switch.toml")
    if not os.path.exists(path):
        return
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    macs = {p["name"]: p["mac"] for p in cfg.get("ports", [])}
    if cfg["switch"].get("pipeline") == "themis":
        want = {"dc0": TH_MAC_DC0, "wan0": TH_MAC_WAN0}
        nh = {"dc0": TH_MAC_HOST, "wan0": TH_MAC_PEER}
    else:
        want = {"dc0": MAC_DC0, "dc1": MAC_DC1, "wan0": MAC_WAN0}
        nh = {"wan0": MAC_REMOTE_NH}
    for name, mac in macs.items():
        if name in want or cfg["switch"].get("pipeline") != "themis":
            assert want.get(name) == mac, f"{path}: port {name} mac {mac} != {want.get(name)}"
    for r in cfg.get("routes", []):
        if r.get("port") in nh:
            assert r["next_hop_mac"] == nh[r["port"]], f"{path}: route {r['prefix']}"


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
