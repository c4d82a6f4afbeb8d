#!/usr/bin/env python3
"""themis_syn_cookie oracle: python3 check.py OUTDIR.

Independent of longhaul: segments are decoded with scapy, checksums recomputed by scapy, cookies
computed by oracle/themis_model.py (SipHash-2-4 from the SipHash paper, cookie layout from
docs/wire-formats.md). Requires:

- out_dc0: one SYN-ACK per input SYN of a pair not yet known as inter-DC (the legit client's first
  SYN, the second client's SYN, every flood SYN): addresses, ports and MACs swapped, flags exactly
  SYN+ACK, ack = ISN + 1, seq = the cookie, MSS option = the cookie's MSS table entry, valid IPv4
  and TCP checksums, not before the SYN arrived. One RST, for the ACK that carries the valid
  cookie: flags exactly RST, seq = that ACK's ack number, checksums valid. Nothing else.
- out_wan0: the client's retried SYN (its pair recorded by then) and the wrong-cookie ACK,
  forwarded (MACs rewritten, TTL - 1, otherwise unchanged); no other SYN and no valid-cookie ACK.
  The monitor is not a firewall: a segment that is not a valid cookie ACK is forwarded as the
  bump in the wire must (DESIGN.md section 8, fail-open), it just earns no RST and no record.
- counters.txt: 1 valid ACK, 1 bad cookie, 1 handshake punt, exactly 1 inter-DC pair (the flood
  leaves no state), SYN-ACK count = SYNs answered, QP_field empty.
"""
import os
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402
from themis_model import syn_cookie, mss_index, MSS_TABLE  # noqa: E402

from scapy.config import conf  # noqa: E402
conf.verb = 0
from scapy.layers.l2 import Ether  # noqa: E402
from scapy.layers.inet import IP, TCP  # noqa: E402

ROUTER_DC0 = "02:00:00:00:00:01"
ROUTER_WAN0 = "02:00:00:00:00:03"
PEER_WAN0 = "02:00:00:00:20:01"


def checksums_ok(f):
    p = Ether(f)
    q = Ether(f)
    del q[IP].chksum
    del q[TCP].chksum
    q = Ether(bytes(q))
    return p[IP].chksum == q[IP].chksum and p[TCP].chksum == q[TCP].chksum


def load_counters(outdir):
    c = {}
    with open(os.path.join(outdir, "counters.txt")) as f:
        for line in f:
            k, v = line.split()
            c[k] = int(v)
    return c


def main(outdir):
    fails = Failures("themis_syn_cookie")
    with open(os.path.join(HERE, "switch.toml"), "rb") as f:
        cfg = tomllib.load(f)
    seed = cfg["switch"]["seed"]
    period = cfg["themis"]["pnp"]["syn_cookie_period_ms"] * 1_000_000
    latency = cfg["control"]["control_latency_ns"]

    inp = read_pcap(os.path.join(outdir, "in_dc0.pcap"))
    base = inp[0][0]
    # Walk the input as the monitor should see it: which segments get a SYN-ACK, a RST, or are
    # forwarded, given the pairs recorded (control_latency after the valid ACK).
    known = {}  # (client, server) -> time the record takes effect
    want_synack, want_rst, want_fwd = {}, {}, []
    n_bad = 0
    for ts, f in inp:
        p = Ether(f)
        ip, tcp = p[IP], p[TCP]
        pair = (ip.src, ip.dst)
        is_known = pair in known and known[pair] <= ts
        flags = int(tcp.flags)
        four = (ip.src, tcp.sport, ip.dst, tcp.dport)
        if is_known:
            want_fwd.append((ts, f))
        elif flags & 0x16 == 0x02:  # SYN
            mss = dict((o[0], o[1]) for o in tcp.options).get("MSS")
            cookie = syn_cookie(seed, period, ts, bytes(map(int, ip.src.split("."))),
                                bytes(map(int, ip.dst.split("."))), tcp.sport, tcp.dport, tcp.seq, mss)
            assert four not in want_synack
            want_synack[four] = (ts, tcp.seq, cookie, MSS_TABLE[mss_index(mss)], f)
        elif flags & 0x16 == 0x10:  # ACK
            prior = want_synack.get(four)
            if prior and (tcp.ack - 1) & 0xFFFFFFFF == prior[2] and (tcp.seq - 1) & 0xFFFFFFFF == prior[1]:
                want_rst[four] = (ts, tcp.ack, f)
                known[pair] = ts + latency
            else:
                n_bad += 1
                want_fwd.append((ts, f))
        else:
            want_fwd.append((ts, f))
    fails.expect(len(want_rst) == 1 and n_bad == 1 and len(want_synack) == 1002,
                 f"fixture: {len(want_synack)} SYNs, {len(want_rst)} valid ACKs, {n_bad} bad ACKs")

    out = read_pcap(os.path.join(outdir, "out_dc0.pcap"))
    seen_sa, seen_rst = set(), set()
    for j, (ts, f) in enumerate(out):
        p = Ether(f)
        where = f"out_dc0 #{j}"
        if IP not in p or TCP not in p:
            fails.add(f"{where}: not TCP/IPv4")
            continue
        ip, tcp = p[IP], p[TCP]
        four = (ip.dst, tcp.dport, ip.src, tcp.sport)  # the client's view
        flags = int(tcp.flags)
        fails.expect(checksums_ok(f), f"{where}: bad IPv4 or TCP checksum")
        fails.expect(p.src == ROUTER_DC0, f"{where}: src MAC {p.src}")
        if flags == 0x12:
            w = want_synack.get(four)
            if not fails.expect(w is not None, f"{where}: SYN-ACK for no input SYN {four}"):
                continue
            fails.expect(four not in seen_sa, f"{where}: second SYN-ACK for {four}")
            seen_sa.add(four)
            t_syn, isn, cookie, mss, fin = w
            fails.expect(tcp.ack == (isn + 1) & 0xFFFFFFFF, f"{where}: ack {tcp.ack} != ISN + 1 = {isn + 1}")
            fails.expect(tcp.seq == cookie, f"{where}: seq {tcp.seq:#x} != cookie {cookie:#x}")
            opts = dict((o[0], o[1]) for o in tcp.options)
            fails.expect(opts.get("MSS") == mss, f"{where}: MSS option {opts.get('MSS')} != {mss}")
            fails.expect(ts >= t_syn, f"{where}: SYN-ACK at {ts - base} before its SYN at {t_syn - base}")
            fails.expect(p.dst == Ether(fin).src, f"{where}: dst MAC {p.dst} is not the SYN's source")
        elif flags == 0x04:
            w = want_rst.get(four)
            if not fails.expect(w is not None, f"{where}: RST for no valid-cookie ACK {four}"):
                continue
            fails.expect(four not in seen_rst, f"{where}: second RST for {four}")
            seen_rst.add(four)
            fails.expect(tcp.seq == w[1], f"{where}: RST seq {tcp.seq:#x} != the ACK's ack {w[1]:#x}")
            fails.expect(ts >= w[0], f"{where}: RST before the ACK")
        else:
            fails.add(f"{where}: unexpected segment with flags {flags:#x}")
    fails.expect(len(seen_sa) == len(want_synack), f"{len(seen_sa)} SYN-ACKs for {len(want_synack)} SYNs")
    fails.expect(len(seen_rst) == len(want_rst), f"{len(seen_rst)} RSTs, expected {len(want_rst)}")

    wan = read_pcap(os.path.join(outdir, "out_wan0.pcap"))
    fails.expect(len(wan) == len(want_fwd), f"out_wan0 has {len(wan)} segments, expected {len(want_fwd)}")
    for j, ((ts, f), (t_in, fin)) in enumerate(zip(wan, want_fwd)):
        where = f"out_wan0 #{j}"
        fails.expect(ts >= t_in, f"{where}: leaves before it arrived")
        fails.expect(f[0:6] == bytes.fromhex(PEER_WAN0.replace(":", ""))
                     and f[6:12] == bytes.fromhex(ROUTER_WAN0.replace(":", "")), f"{where}: MACs")
        fails.expect(f[22] == fin[22] - 1, f"{where}: TTL")
        fails.expect(len(f) == len(fin) and f[34:] == fin[34:] and f[14:22] == fin[14:22]
                     and f[26:34] == fin[26:34], f"{where}: not the input segment")
        fails.expect(checksums_ok(f), f"{where}: bad checksum")

    c = load_counters(outdir)
    want = {
        "themis.synacks_sent": len(want_synack),
        "themis.rsts_sent": len(want_rst),
        "themis.handshake_punts": len(want_rst),
        "themis.syncookie.valid_acks": len(want_rst),
        "themis.syncookie.bad_cookies": n_bad,
        "table.inter_dc.entries": len(known),
        "table.qp_field.entries": 0,
        "control.punts": len(want_rst),
    }
    for k, v in want.items():
        fails.expect(c.get(k) == v, f"counter {k} = {c.get(k)}, expected {v}")
    print(f"themis_syn_cookie: {len(seen_sa)} SYN-ACKs, {len(seen_rst)} RST, {len(wan)} forwarded, "
          f"inter_dc entries {c.get('table.inter_dc.entries')}")
    fails.done()


if __name__ == "__main__":
    main(sys.argv[1])
