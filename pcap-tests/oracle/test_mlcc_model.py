#!/usr/bin/env python3
"""Self-test of oracle/mlcc_model.py and of the MLCC cases' check.py scripts: python3 test_mlcc_model.py.

* Round trips: frames built with scapy (mlcc_model's builders) decode to the fields they were
  built with; the exact bytes of docs/wire-formats.md; stripping the INT gives back the frame
  scapy built (its ICRC verifies); the Switch-INT and the MCETH ACK have valid ICRCs.
* Broken inputs are rejected or flagged: other domains, ports, opcodes, wrong lengths, reserved
  bits, a changed byte under the ICRC, truncation.
* Each MLCC case's check.py passes on outputs made here from the docs (a few lines of Python per
  case: the expected pcaps, or a token-bucket model of the PFQ) and fails on mutations of them.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "cases")
sys.path.insert(0, HERE)
import mlcc_model as mm  # noqa: E402
from mlcc_dqm import Dqm  # noqa: E402
from pcaputil import read_pcap, write_pcap  # noqa: E402
from verify import icrc, inet_checksum  # noqa: E402

H, S = "02:00:00:00:10:01", "02:00:00:00:00:01"
HOPS = [mm.hop(12, 3, 0xABCDEF, 0x0102030405060708, 0x1122334455667788, 100_000),
        mm.hop(11, 5, 0xFFFFFF, 7, 0, 25_000)]


def data_frame(**kw):
    args = dict(dqpn=0x800ABC, psn=0xABCDE, hops=HOPS, payload=bytes(range(256)) * 2, pkey=0x8012,
                sport=50001, ipid=7, opcode=0x07)
    args.update(kw)
    return mm.build_int_data(H, S, "10.0.0.5", "10.1.0.7", **args)


def flip(f, off, x=0x01):
    return f[:off] + bytes([f[off] ^ x]) + f[off + 1:]


def put(f, off, b):
    return f[:off] + bytes(b) + f[off + len(b):]


def with_icrc(f):
    """`f` with its ICRC recomputed by scapy."""
    from scapy.layers.l2 import Ether
    from scapy.contrib.roce import BTH
    p = Ether(bytes(f))
    p[BTH].icrc = None
    return bytes(p)


def fix_ip_checksum(f):
    b = bytearray(f)
    b[24:26] = b"\0\0"
    b[24:26] = struct.pack("!H", inet_checksum(bytes(b[14:34])))
    return bytes(b)


# --- INT in data ----------------------------------------------------------------------------------

def test_int_round_trip():
    f = data_frame()
    n = 4 + 12 + 2 * 28
    assert len(f) == 14 + 20 + 8 + n + 12 + 512 + 4
    d = mm.decode_int(f)
    assert d is not None and d["conforms"], d["problems"]
    want = dict(ip_version=4, ip_src="10.0.0.5", ip_dst="10.1.0.7", dscp=26, ecn=2, ttl=64, ip_id=7,
                df=True, ip_len=20 + 8 + n + 12 + 512 + 4, udp_sport=50001, udp_dport=5000,
                udp_len=8 + n + 12 + 512 + 4, udp_checksum=0, shim_byte0=0x14, shim_type=1, shim_npt=1,
                shim_len_words=n // 4, shim_orig_dport=4791, md_ver=2, md_e=0, md_hop_ml=7, md_rhc=1,
                md_instructions=0x9400, ds_id=0x4D4C, ds_instruction=0xC000, ds_flags=0, c_d=None,
                e=False, hops=HOPS, n_hops=2, bth_opcode=0x07, bth_destqp=0x800ABC, bth_psn=0xABCDE,
                bth_pkey=0x8012, payload_len=512, icrc_ok=True, eth_dst=S, eth_src=H)
    for k, v in want.items():
        assert d[k] == v, (k, d[k], v)
    # The exact bytes after the UDP header (docs/wire-formats.md).
    assert f[42:42 + n] == bytes.fromhex(
        "141212b7" "20000701" "9400" "4d4c" "c000" "0000"
        "0000000c" "03abcdef" "0102030405060708" "1122334455667788" "000186a0"
        "0000000b" "05ffffff" "0000000000000007" "0000000000000000" "000061a8"), f[42:42 + n].hex()
    # Stripping gives back the RoCEv2 frame scapy built, whose ICRC verifies.
    plain = mm.strip_int(f)
    orig = mm.roce_frame(H, S, "10.0.0.5", "10.1.0.7", dqpn=0x800ABC, psn=0xABCDE, opcode=0x07,
                         payload=bytes(range(256)) * 2, pkey=0x8012, sport=50001, ipid=7)
    assert plain == orig
    assert icrc(plain[14:-4], False) == plain[-4:]
    assert f[-4:] == orig[-4:], "the INT frame keeps the ICRC of the frame without INT"
    assert icrc(f[14:-4], False) != f[-4:], "with the INT in place the ICRC does not verify"
    assert mm.decode_int(plain) is None


def test_int_c_d_e_and_rhc():
    for c_d in (0, 1, 0x1234, 0x7FFF):
        d = mm.decode_int(data_frame(c_d=c_d))
        assert d["conforms"] and d["c_d"] == c_d and d["ds_flags"] == 0x8000 | c_d, (c_d, d["problems"])
    d = mm.decode_int(data_frame(c_d=0x8001))          # 15 bits: counts modulo 2^15
    assert d["c_d"] == 1
    d = mm.decode_int(data_frame(rhc=0, e=True))
    assert d["conforms"] and d["e"] and d["md_e"] == 1 and d["md_rhc"] == 0
    assert mm.decode_int(data_frame(hops=HOPS[:1], max_hops=3))["md_rhc"] == 2
    d = mm.decode_int(data_frame(hops=[]))
    assert d["conforms"] and d["hops"] == [] and d["shim_len_words"] == 4
    nine = [mm.hop(i, 3, i, i, i, 100_000) for i in range(9)]
    d = mm.decode_int(data_frame(hops=nine))
    assert d["conforms"] and d["hops"] == nine and d["md_rhc"] == 0


def test_int_ipv6_and_opcodes():
    f = mm.build_int_data(H, S, "2001:db8:1::1", "2001:db8:2::1", dqpn=2, psn=3, hops=HOPS,
                          payload=b"x" * 64, ipv6=True)
    d = mm.decode_int(f)
    assert d["conforms"] and d["ip_version"] == 6 and d["ip_len"] == 8 + 16 + 56 + 12 + 64 + 4, d
    assert d["dscp"] == 26 and d["ecn"] == 2 and d["icrc_ok"] and d["hops"] == HOPS
    assert mm.strip_int(f) == mm.roce_frame(H, S, "2001:db8:1::1", "2001:db8:2::1", dqpn=2, psn=3,
                                            opcode=0x0A, payload=b"x" * 64, ipv6=True)
    for op in (0x00, 0x04, 0x06, 0x0A, 0x0B):
        assert mm.decode_int(data_frame(opcode=op))["conforms"], op
    # INT on something that is not RC data (an RC ACK, opcode 0x11; a UD SEND, 0x64): flagged.
    for op in (0x11, 0x64):
        d = mm.decode_int(data_frame(opcode=op))
        assert not d["conforms"] and any("opcode" in p for p in d["problems"]), op


def test_int_icrc_coverage():
    f = data_frame()
    n = 4 + 12 + 56
    b = 42 + n
    assert not mm.decode_int(flip(f, b + 12 + 100))["icrc_ok"]          # payload
    assert not mm.decode_int(flip(f, b + 11))["icrc_ok"]                # PSN
    assert not mm.decode_int(flip(f, b + 7))["icrc_ok"]                 # DestQP
    assert not mm.decode_int(flip(f, len(f) - 1, 0xFF))["icrc_ok"]      # the ICRC itself
    # Not covered: the INT (hops, C_D), ECN/DSCP, TTL, BTH byte 4.
    for off in (42 + 16, 42 + 16 + 27, 42 + 14, b + 4):
        assert mm.decode_int(flip(f, off, 0x40))["icrc_ok"], off
    for off in (15, 22):
        assert mm.decode_int(fix_ip_checksum(flip(f, off)))["icrc_ok"], off


def test_int_refuses_and_flags():
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP, TCP
    f = data_frame()
    assert mm.decode_int(mm.strip_int(f)) is None                       # RoCE without INT
    assert mm.decode_int(bytes(Ether() / IP() / TCP())) is None
    assert mm.decode_int(bytes(Ether() / IP() / UDP(dport=5000) / (b"\x00" * 40))) is None
    assert mm.decode_int(put(f, 42 + 10, b"\x52\x46")) is None           # the Reflex domain
    assert mm.decode_int(put(f, 42, b"\x24")) is None                    # shim type 2 (INT-MX)
    assert mm.decode_int(f, int_port=6000) is None
    assert mm.decode_int(data_frame(int_port=6000), int_port=6000)["conforms"]
    assert mm.decode_int(f[:50]) is None                                 # truncated in the INT
    # Deviations from version 1 are listed.
    for off, val, needle in [(43, 0x13, "whole number"), (43, 0xD6, "runs past"),
                             (42 + 4, 0x10, "md_ver"), (42 + 6, 0x06, "md_hop_ml"),
                             (42 + 8, 0x84, "md_instructions"), (42 + 12, 0x80, "ds_instruction"),
                             (42 + 15, 0x01, "without the C_D flag"), (42 + 2, 0x13, "shim_orig_dport"),
                             (42 + 4, 0x28, "md_d"), (42 + 5, 0x08, "md_rsvd"), (42 + 4, 0x22, "md_m"), (42, 0x15, "shim_byte0")]:
        d = mm.decode_int(put(f, off, [val]))
        assert d is not None and not d["conforms"] and any(needle in p for p in d["problems"]), \
            (needle, d and d["problems"])
    d = mm.decode_int(put(f, 38, b"\x01\x00"))                           # UDP length
    assert not d["conforms"] and any("UDP length" in p for p in d["problems"])
    d = mm.decode_int(put(f, 16, b"\x02\x00"))                           # IPv4 total length
    assert not d["conforms"] and any("IPv4 header checksum" in p for p in d["problems"])
    d = mm.decode_int(f[:-10])                                           # truncated frame
    assert not d["conforms"] and any("exceeds the frame" in p for p in d["problems"])
    d = mm.decode_int(f[:42 + 72 + 8])                                   # no room for BTH + ICRC
    assert not d["conforms"]


# --- Switch-INT -----------------------------------------------------------------------------------

def test_switch_int_round_trip():
    f = data_frame(ttl=64)
    s = mm.expected_switch_int(f, S, H, ttl=63, dscp=48)
    d = mm.decode_switch_int(s)
    assert d is not None and d["conforms"], d["problems"]
    want = dict(eth_dst=H, eth_src=S, ip_src="10.1.0.7", ip_dst="10.0.0.5", dscp=48, ecn=2, ttl=63,
                ip_id=0, df=True, ip_len=60 + 56, udp_sport=50001, udp_dport=4791, udp_len=40 + 56,
                udp_checksum=0, bth_opcode=0x81, bth_becn=1, bth_fecn=0, bth_pkey=0xFFFF, bth_psn=0,
                bth_destqp=0x800ABC, si_magic=0x4D4C, si_version=1, si_n=2, si_instructions=0x9400,
                si_ds_instruction=0xC000, si_hop_ml=7, si_flags=0, e=False, cut=False, si_rsvd=0,
                data_psn=0xABCDE, hops=HOPS, icrc_ok=True, len=14 + 116)
    for k, v in want.items():
        assert d[k] == v, (k, d[k], v)
    assert s[12:14] == b"\x08\x00" and s[15] == 0xC2
    assert s[42:54] == bytes.fromhex("8100ffff" "40800abc" "00000000"), s[42:54].hex()
    assert s[54:70] == bytes.fromhex("4d4c0102" "9400c000" "07000000" "000abcde"), s[54:70].hex()
    assert s[70:70 + 56] == f[42 + 16:42 + 16 + 56], "the hops as they were in the data"
    assert icrc(s[14:-4], False) == s[-4:]
    # The E bit and a stack cut to 8 hops.
    d = mm.decode_switch_int(mm.expected_switch_int(data_frame(rhc=0, e=True), S, H))
    assert d["conforms"] and d["si_flags"] == 0x40 and d["e"]
    nine = [mm.hop(i, 3, i, i, i, 100_000) for i in range(9)]
    d = mm.decode_switch_int(mm.expected_switch_int(data_frame(hops=nine), S, H))
    assert d["conforms"] and d["si_n"] == 8 and d["cut"] and d["hops"] == nine[:8], d["problems"]
    d = mm.decode_switch_int(mm.expected_switch_int(data_frame(hops=[]), S, H))
    assert d["conforms"] and d["si_n"] == 0 and d["ip_len"] == 60


def test_switch_int_refuses_and_flags():
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.contrib.roce import cnp
    s = mm.expected_switch_int(data_frame(), S, H)
    plain_cnp = bytes(Ether() / IP(src="1.1.1.1", dst="2.2.2.2", tos=0xC2) / UDP(sport=1, dport=4791, chksum=0)
                      / cnp(0x123))
    assert mm.decode_switch_int(plain_cnp) is None                      # a real CNP: reserved zeros
    assert mm.decode_switch_int(data_frame()) is None                   # INT data
    assert mm.decode_switch_int(put(s, 42, [0x11])) is None             # not opcode 0x81
    assert mm.decode_switch_int(put(s, 36, b"\x13\x88")) is None        # not UDP 4791
    assert mm.decode_switch_int(s[:60]) is None
    for off, val, needle in [(56, 2, "si_version"), (57, 3, "hops between"), (57, 9, "hop count 9"),
                             (58, 0x84, "si_instructions"), (60, 0x80, "si_ds_instruction"),
                             (62, 6, "si_hop_ml"), (63, 0x20, "si_flags"), (64, 1, "si_rsvd"),
                             (66, 1, "top byte"), (46, 0x00, "bth_becn"), (44, 0x7F, "bth_pkey"),
                             (53, 1, "bth_psn"), (50, 0x80, "bth_ackreq")]:
        d = mm.decode_switch_int(put(s, off, [val]))
        assert d is not None and not d["conforms"] and any(needle in p for p in d["problems"]), \
            (needle, d and d["problems"])
    # Under the ICRC: a hop byte, the PSN word, DestQP; outside it: DSCP, TTL.
    for off in (70 + 3, 69, 49):
        d = mm.decode_switch_int(flip(s, off))
        assert not d["icrc_ok"] and not d["conforms"], off
    for off in (15, 22):
        assert mm.decode_switch_int(fix_ip_checksum(flip(s, off, 0x04)))["icrc_ok"], off
    # Extra bytes before the ICRC (a hop too many for the count) with lengths fixed up.
    d = mm.decode_switch_int(mm.build_switch_int(S, H, "1.1.1.1", "2.2.2.2", dqpn=1, data_psn=2,
                                                  hops=HOPS)[:-4] + b"\0\0\0\0")
    assert not d["icrc_ok"]


# --- MCETH ----------------------------------------------------------------------------------------

def test_mceth_round_trip():
    a = mm.build_ack_mceth(H, S, "10.0.0.5", "10.1.0.7", dqpn=0x77, psn=19, qpn=0xABC, c_r=0x7FFF,
                           r_credit_kbps=10_000_000, msn=20, sport=49401)
    d = mm.decode_mceth(a)
    assert d is not None and d["conforms"], d["problems"]
    for k, v in dict(bth_opcode=0x11, bth_destqp=0x77, bth_psn=19, aeth_syndrome=0x1F, aeth_msn=20,
                     magic=0x4D4C, version=1, flags=0x80, credit=True, dqm=False, qpn=0xABC, c_r=0x7FFF,
                     r_credit_kbps=10_000_000, r_dqm_kbps=0, ip_len=68, udp_len=48, len=82, icrc_ok=True,
                     dscp=26, ecn=0).items():
        assert d[k] == v, (k, d[k], v)
    assert a[58:78] == bytes.fromhex("4d4c0180" "00000abc" "7fff0000" "00989680" "00000000"), a[58:78].hex()
    b = mm.with_r_dqm(a, 9_998_666)
    e = mm.decode_mceth(b)
    assert e["conforms"] and e["flags"] == 0xC0 and e["dqm"] and e["r_dqm_kbps"] == 9_998_666
    assert b[:-4] == a[:58 + 3] + b"\xc0" + a[62:74] + struct.pack("!I", 9_998_666) and b[-4:] != a[-4:]
    assert mm.kbps(9_998_666_666.67) == 9_998_666 and mm.kbps(999) == 0


def test_mceth_refuses_and_flags():
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP
    from scapy.contrib.roce import BTH, AETH
    a = mm.build_ack_mceth(H, S, "10.0.0.5", "10.1.0.7", dqpn=0x77, psn=19, qpn=0xABC, c_r=1,
                           r_credit_kbps=10_000_000)
    plain = bytes(Ether() / IP() / UDP(dport=4791, chksum=0) / BTH(opcode=0x11) / AETH(syndrome=0x1F))
    assert mm.decode_mceth(plain) is None
    assert mm.decode_mceth(put(a, 42, [0x0D])) is None                   # not an ACK opcode
    assert mm.decode_mceth(put(a, 58, b"\x52\x46")) is None
    for off, val, needle in [(60, 2, "version"), (61, 0x81, "flags"), (62, 1, "rsvd4"),
                             (66, 0x80, "bit 15"), (68, 1, "rsvd10")]:
        d = mm.decode_mceth(put(a, off, [val]))
        assert d is not None and not d["conforms"] and any(needle in p for p in d["problems"]), \
            (needle, d and d["problems"])
    for off in (61, 65, 67, 73, 77):                  # flags, qpn, C_R, R_credit, R_DQM: under the ICRC
        d = mm.decode_mceth(flip(a, off, 0x40))
        assert not d["icrc_ok"], off
    longer = bytearray(a[:-4] + b"\0\0\0\0" + a[-4:])                     # 4 bytes too many
    longer[16:18] = struct.pack("!H", 72)
    longer[38:40] = struct.pack("!H", 52)
    d = mm.decode_mceth(fix_ip_checksum(bytes(longer)))
    assert not d["conforms"] and any("between the AETH" in p for p in d["problems"])


def test_routed():
    f = data_frame()
    r = mm.routed(f, "02:00:00:00:00:02", "02:00:00:00:20:01")
    assert r[0:12] == bytes.fromhex("020000002001" "020000000002") and r[22] == f[22] - 1
    assert r[34:] == f[34:] and inet_checksum(r[14:34]) == 0 and r[24:26] != f[24:26]


def test_cli():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.pcap")
        a = mm.build_ack_mceth(H, S, "10.0.0.5", "10.1.0.7", dqpn=0x77, psn=1, qpn=0xABC, c_r=1,
                               r_credit_kbps=5)
        write_pcap(p, [(1000, data_frame()), (2000, mm.expected_switch_int(data_frame(), S, H)),
                       (3000, a), (4000, mm.strip_int(data_frame()))])
        r = subprocess.run([sys.executable, os.path.join(HERE, "mlcc_model.py"), "decode", p],
                           capture_output=True, text=True, check=True)
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        assert [x["kind"] for x in lines] == ["int", "switch_int", "mceth", None], lines
        assert lines[0]["pcap_ts_ns"] == 1000 and lines[0]["hops"] == HOPS and lines[1]["si_n"] == 2


# --- the cases' check.py scripts ------------------------------------------------------------------

def run_check(case, inputs, outs):
    with tempfile.TemporaryDirectory() as d:
        for p, recs in inputs.items():
            write_pcap(os.path.join(d, f"in_{p}.pcap"), recs)
        for p, recs in outs.items():
            write_pcap(os.path.join(d, f"out_{p}.pcap"), recs)
        r = subprocess.run([sys.executable, os.path.join(CASES, case, "check.py"), d],
                           capture_output=True, text=True, cwd=os.path.join(CASES, case))
        return r.returncode, r.stdout + r.stderr


def assert_passes(case, inputs, outs):
    rc, out = run_check(case, inputs, outs)
    assert rc == 0, out


def assert_fails(case, inputs, outs, needle):
    rc, out = run_check(case, inputs, outs)
    assert rc == 1, f"{case}: expected a failure ({needle!r}):\n{out}"
    assert needle in out, f"{case}: failure without {needle!r}:\n{out}"


def case_pcaps(case, prefix):
    d = os.path.join(CASES, case)
    return {f[len(prefix):-5]: read_pcap(os.path.join(d, f)) for f in sorted(os.listdir(d))
            if f.startswith(prefix) and f.endswith(".pcap")}


def replace_at(recs, i, rec):
    return recs[:i] + [rec] + recs[i + 1:]


def test_check_switch_int_feedback():
    case = "mlcc_switch_int_feedback"
    inputs = case_pcaps(case, "in_")
    outs = case_pcaps(case, "expected_")    # the doc's output; arrival = departure on idle ports
    assert len(outs["dc0"]) == 8 and len(outs["wan0"]) == 9
    assert_passes(case, inputs, outs)
    dc0, wan = outs["dc0"], outs["wan0"]
    t, s = dc0[2]
    assert_fails(case, inputs, dict(outs, dc0=dc0[:2] + dc0[3:]), "Switch-INTs for PSNs")
    assert_fails(case, inputs, dict(outs, dc0=dc0 + [dc0[0]]), "second Switch-INT")
    # The two hops swapped (ICRC recomputed by scapy: a well-formed Switch-INT with the wrong order).
    d = mm.decode_switch_int(s)
    swapped = mm.build_switch_int(d["eth_src"], d["eth_dst"], d["ip_src"], d["ip_dst"], dqpn=d["bth_destqp"],
                                  data_psn=d["data_psn"], hops=d["hops"][::-1], sport=d["udp_sport"], ttl=63)
    assert_fails(case, inputs, dict(outs, dc0=replace_at(dc0, 2, (t, swapped))), "hops =")
    assert_fails(case, inputs, dict(outs, dc0=replace_at(dc0, 2, (t, fix_ip_checksum(put(s, 15, [46 << 2 | 2]))))),
                 "dscp = 46")
    assert_fails(case, inputs, dict(outs, dc0=replace_at(dc0, 2, (t, flip(s, len(s) - 1)))), "icrc_ok")
    assert_fails(case, inputs, dict(outs, dc0=replace_at(dc0, 2, (t, put(s, 0, [0x12])))), "eth_dst")
    requester_qp = mm.build_switch_int(d["eth_src"], d["eth_dst"], d["ip_src"], d["ip_dst"], dqpn=0x77,
                                       data_psn=d["data_psn"], hops=d["hops"], sport=d["udp_sport"], ttl=63)
    assert_fails(case, inputs, dict(outs, dc0=replace_at(dc0, 2, (t, requester_qp))), "answers no INT data")
    # The E bit's flag dropped (ICRC recomputed).
    t5, s5 = dc0[5]
    assert mm.decode_switch_int(s5)["si_flags"] == 0x40
    assert_fails(case, inputs, dict(outs, dc0=replace_at(dc0, 5, (t5, with_icrc(put(s5, 63, [0]))))),
                 "si_flags = 0")
    assert_fails(case, inputs, dict(outs, dc0=replace_at(dc0, 2, (t + 5000, s))), "ns after its data packet")
    # Data: INT left in; one lost; the plain packet altered.
    tw, fw = wan[1]
    kept = mm.routed(inputs["dc0"][1][1], S, "02:00:00:00:20:01")
    assert_fails(case, inputs, dict(outs, wan0=replace_at(wan, 1, (tw, kept))), "not input #1 without its INT")
    assert_fails(case, inputs, dict(outs, wan0=wan[:3] + wan[4:]), "frames out of wan0")
    assert_fails(case, inputs, dict(outs, wan0=replace_at(wan, 8, (wan[8][0], flip(wan[8][1], 100)))),
                 "ICRC does not verify")


def tor_outputs(inputs, tx_without_int=False):
    """int_source_tor's output as docs/wire-formats.md and docs/mlcc.md say (idle ports:
    departure = arrival)."""
    cfg = mm.load_case_config(os.path.join(CASES, "int_source_tor"))
    macs = mm.port_macs(cfg)
    up, host1 = [], []
    sent = 0
    for t, f in inputs["host0"]:
        dst = f[30:34]
        if dst == bytes([10, 0, 1, 9]):
            host1.append((t, mm.routed(f, macs["host1"], "02:00:00:00:40:02")))
            continue
        r = mm.routed(f, macs["up0"], "02:00:00:00:00:01")
        if f[42] in mm.RC_DATA_OPCODES:
            h = mm.hop(1, 3, 0, t, sent, 100_000)
            out = mm.insert_int(r, mm.int_bytes([h], max_hops=3))
        else:
            out = r
        up.append((t, out))
        sent += len(r) if tx_without_int else len(out)
    return dict(up0=up, host1=host1, host0=[])


def test_check_int_source_tor():
    case = "int_source_tor"
    inputs = case_pcaps(case, "in_")
    outs = tor_outputs(inputs)
    assert len(outs["up0"]) == 4 and len(outs["host1"]) == 1
    assert_passes(case, inputs, outs)
    up = outs["up0"]
    assert_fails(case, inputs, tor_outputs(inputs, tx_without_int=True), "hop tx_bytes = 758, expected 802")
    t, f = up[1]
    assert_fails(case, inputs, dict(outs, up0=replace_at(up, 1, (t, put(f, 42 + 7, [3])))), "md_rhc = 3")
    assert_fails(case, inputs, dict(outs, up0=replace_at(up, 1, (t + 1, f))), "hop ts =")
    assert_fails(case, inputs, dict(outs, up0=replace_at(up, 1, (t, put(f, 42 + 16 + 4, [6])))), "hop queue_id")
    assert_fails(case, inputs, dict(outs, up0=replace_at(up, 1, (t, put(f, 42 + 16 + 27, [0x01])))),
                 "hop rate_mbps")
    assert_fails(case, inputs, dict(outs, up0=replace_at(up, 1, (t, put(f, 42 + 14, b"\x80\x01")))), "c_d = 1")
    plain = mm.strip_int(f)
    assert_fails(case, inputs, dict(outs, up0=replace_at(up, 1, (t, plain))), "without the MLCC INT")
    ta, fa = up[3]
    with_int = mm.insert_int(fa, mm.int_bytes([mm.hop(1, 3, 0, ta, 0, 100_000)]))
    assert_fails(case, inputs, dict(outs, up0=replace_at(up, 3, (ta, with_int))), "carries INT (not data)")
    th, fh = outs["host1"][0]
    h_int = mm.insert_int(fh, mm.int_bytes([mm.hop(1, 3, 0, th, 0, 25_000)]))
    assert_fails(case, inputs, dict(outs, host1=[(th, h_int)]), "carries INT (not an [int] port)")
    assert_fails(case, inputs, dict(outs, up0=up[:2]), "frame(s) out of up0")
    assert_fails(case, inputs, dict(outs, up0=replace_at(up, 0, (t, flip(up[0][1], 200)))), "ICRC does not verify")


def pfq_outputs(inputs, *, no_rate_change=False, no_cd=False, dqm_delta=0, tx_without_int=False,
                line_len_without_int=False, bucket=4200):
    """mlcc_pfq_credit's output by a small model of docs/mlcc.md: the PFQ is a token bucket
    (depth `bucket`, full when the flow appears, a frame leaves when the bucket holds its length
    without INT), refilled at 25 Gb/s until the ACK and at its R_credit after; dc0 serializes
    the emitted frames at 100 Gb/s ((len + 24) x 8 / rate, rounded up); the MLCC INT with the
    DCI's hop is added at departure; the ACK leaves wan0 at its arrival with R_DQM from
    oracle/mlcc_dqm.py."""
    cfg = mm.load_case_config(os.path.join(CASES, "mlcc_pfq_credit"))
    macs = mm.port_macs(cfg)
    t_ack, ack = inputs["dc0"][0]
    a = mm.decode_mceth(ack)
    r0 = Fraction(25 * 10**9, 8 * 10**9)                  # bytes per ns
    r1 = r0 if no_rate_change else Fraction(a["r_credit_kbps"] * 1000, 8 * 10**9)
    data = inputs["wan0"]
    tok, t_tok = Fraction(bucket), Fraction(data[0][0])

    def refill(t_from, t_to, tok):
        for lo, hi, r in ((t_from, min(t_to, t_ack), r0), (max(t_from, t_ack), t_to, r1)):
            if hi > lo:
                tok = min(Fraction(bucket), tok + r * (hi - lo))
        return tok

    def when_tokens(t_from, tok, need):
        # The exact time the bucket (at tok at t_from) holds `need` bytes.
        if tok >= need:
            return t_from
        if t_from < t_ack:
            t = t_from + (need - tok) / r0
            if t <= t_ack:
                return t
            tok = tok + r0 * (t_ack - t_from)
            t_from = Fraction(t_ack)
        return t_from + (need - tok) / r1

    out, line_free, sent, deps = [], 0, 0, []
    for t_arr, f in data:
        L = len(f)
        start = max(Fraction(t_arr), Fraction(line_free), t_tok)
        tok = refill(t_tok, start, tok)
        t_ok = when_tokens(start, tok, L)
        tok = refill(start, t_ok, tok) - L
        t_tok = t_ok
        td = -(-t_ok.numerator // t_ok.denominator)
        cd = None if (td < t_ack or no_cd) else a["c_r"]
        h = mm.hop(100, 3, 0, td, sent, 100_000)
        g = mm.insert_int(mm.routed(f, macs["dc0"], "02:00:00:00:10:01"), mm.int_bytes([h], max_hops=3, c_d=cd))
        out.append((td, g))
        deps.append((td, L, t_arr))
        sent += L + 16 if tx_without_int else len(g)
        line_free = td + -(-((L + 16 if line_len_without_int else len(g)) + 24) * 8 // 100)
    q_c = sum(L for td, L, ta in deps if ta < t_ack < td)
    o = Dqm(dict(max_rate_bps=100 * 10**9)).on_ack(t_ack, a["c_r"], a["r_credit_kbps"] * 1000, q_c)
    acked = mm.with_r_dqm(mm.routed(ack, macs["wan0"], "02:00:00:00:20:01"), mm.kbps(o["r_bar_bps"]) + dqm_delta)
    return dict(dc0=out, wan0=[(t_ack, acked)])


def test_check_pfq_credit():
    case = "mlcc_pfq_credit"
    inputs = case_pcaps(case, "in_")
    outs = pfq_outputs(inputs)
    assert len(outs["dc0"]) == 30
    assert_passes(case, inputs, outs)
    dc0 = outs["dc0"]
    assert_fails(case, inputs, pfq_outputs(inputs, no_rate_change=True), "(+-1) for 1058 B at 10 Gb/s")
    assert_fails(case, inputs, pfq_outputs(inputs, no_cd=True), "c_d = None, expected 1")
    assert_fails(case, inputs, pfq_outputs(inputs, dqm_delta=1), "r_dqm_kbps")
    assert_fails(case, inputs, pfq_outputs(inputs, tx_without_int=True), "hop tx_bytes = 1074, expected 1102")
    assert_fails(case, inputs, pfq_outputs(inputs, line_len_without_int=True), "faster than line rate")
    assert_fails(case, inputs, pfq_outputs(inputs, bucket=8400), "initial burst of")
    assert_fails(case, inputs, dict(outs, dc0=dc0[:10] + dc0[11:]), "frames out of dc0")
    swapped = dc0[:10] + [(dc0[10][0], dc0[11][1]), (dc0[11][0], dc0[10][1])] + dc0[12:]
    assert_fails(case, inputs, dict(outs, dc0=swapped), "out of order")
    t, f = dc0[12]
    assert_fails(case, inputs, dict(outs, dc0=replace_at(dc0, 12, (t, put(f, 42 + 16 + 3, [0x01])))),
                 "hop node_id")
    assert_fails(case, inputs, dict(outs, dc0=replace_at(dc0, 12, (t, flip(f, 300)))), "ICRC does not verify")
    late = [(t + 200 if i >= 12 else t, g) for i, (t, g) in enumerate(dc0)]
    assert_fails(case, inputs, dict(outs, dc0=late), "gap #11->#12")
    ta, fa = outs["wan0"][0]
    assert_fails(case, inputs, dict(outs, wan0=[(ta, mm.with_r_dqm(fa, mm.decode_mceth(fa)["r_dqm_kbps"],
                                                                   flags=0x80))]), "flags = 128")
    assert_fails(case, inputs, dict(outs, wan0=[(ta, flip(fa, len(fa) - 2))]), "icrc_ok")
    assert_fails(case, inputs, dict(outs, wan0=[]), "frames out of wan0")


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_") and callable(f)]
    failed = 0
    for name, fn in tests:
        try:
            fn()
            print(f"ok   {name}")
        except AssertionError as e:
            failed += 1
            print(f"FAIL {name}: {e}")
    print(f"{len(tests) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
