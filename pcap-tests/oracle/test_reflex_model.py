#!/usr/bin/env python3
"""Self-tests of oracle/reflex_model.py and of the reflex_* cases' check.py scripts (plain
asserts): python3 pcap-tests/oracle/test_reflex_model.py

* build -> decode round trips, the ICRC with the INT stripped (good, flipped payload byte,
  changed PSN), what decode() refuses, the CLI;
* the NSF model on hand traces (docs/reflex.md's table, N_cool, T_interval, thresholds);
* each reflex_* check.py passes on the output of oracle/reflex_refsim.py (a small reference
  switch) and fails on mutations of it (lost/extra/altered pseudo-ACKs, a wrong WRR weight, no
  throttling, no reorder protection, a timestamp not rewritten, an altered ACK).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "cases")
sys.path.insert(0, HERE)
import reflex_model as rm  # noqa: E402
import reflex_refsim as rs  # noqa: E402
from pcaputil import write_pcap  # noqa: E402
from verify import icrc  # noqa: E402

H, S = "02:00:00:00:10:01", "02:00:00:00:00:01"


def data_frame(**kw):
    args = dict(ts=0x0123456789ABCDEF, qpn=0x000123, dqpn=0x800456, psn=0xABCDE,
                payload=bytes(range(256)) * 4, pkey=0x8012, sport=50001, ipid=7)
    args.update(kw)
    return rm.build_reflex_data(H, S, "10.0.0.5", "10.1.0.7", **args)


def test_round_trip_data():
    f = data_frame()
    d = rm.decode(f)
    assert d is not None and d["conforms"], d["problems"]
    assert len(f) == 14 + 20 + 8 + 28 + 12 + 1024 + 4 == d["len"]
    want = dict(ip_version=4, ip_src="10.0.0.5", ip_dst="10.1.0.7", dscp=26, ecn=2, ttl=64, ip_id=7,
                df=True, ip_len=20 + 8 + 28 + 12 + 1024 + 4, udp_sport=50001, udp_dport=5000,
                udp_len=8 + 28 + 12 + 1024 + 4, udp_checksum=0, shim_byte0=0x14, shim_type=1,
                shim_npt=1, shim_len_words=7, shim_orig_dport=4791, md_ver=2, md_hop_ml=3, md_rhc=0,
                md_instructions=0x0400, ds_id=0x5246, ds_instruction=0x8000, ds_flags=0, nsf=False,
                echo=False, ts=0x0123456789ABCDEF, qpn=0x123, bth_opcode=0x07, bth_destqp=0x800456,
                bth_psn=0xABCDE, bth_pkey=0x8012, bth_ackreq=0, payload_len=1024, icrc_ok=True,
                eth_dst=S, eth_src=H)
    for k, v in want.items():
        assert d[k] == v, (k, d[k], v)
    assert "aeth_syndrome" not in d
    # The exact bytes of docs/wire-formats.md after the UDP header.
    assert f[42:70] == bytes.fromhex("140712b7" "20000300" "0400" "5246" "8000" "0000"
                                     "0123456789abcdef" "00000123")
    # Stripping gives back the RoCEv2 frame scapy built (its ICRC verifies with verify.py's code).
    plain = rm.strip_int(f)
    assert len(plain) == len(f) - 28 and plain[36:38] == b"\x12\xb7"
    from scapy.layers.l2 import Ether
    from scapy.contrib.roce import BTH
    p = Ether(plain)
    assert p[BTH].psn == 0xABCDE and p[BTH].dqpn == 0x800456
    assert icrc(plain[14:-4], False) == plain[-4:]
    q = Ether(plain)
    q[BTH].icrc = None
    assert bytes(q) == plain, "scapy recomputes the same ICRC"
    assert rm.is_data(d)


def test_round_trip_ack_and_pseudo_ack():
    a = rm.build_reflex_ack(S, H, "10.1.0.7", "10.0.0.5", ts=42, qpn=0xABCDEF, psn=77, pkey=0x8012,
                            ttl=63, sport=50001)
    d = rm.decode(a)
    assert d["conforms"], d["problems"]
    for k, v in dict(ds_flags=0xC000, nsf=True, echo=True, bth_opcode=0x11, bth_destqp=0xABCDEF,
                     qpn=0xABCDEF, bth_psn=77, aeth_syndrome=0x1F, aeth_msn=0, dscp=48, ecn=0,
                     ip_id=0, df=True, ttl=63, ip_len=76, udp_len=56, len=90, icrc_ok=True,
                     payload_len=0).items():
        assert d[k] == v, (k, d[k], v)
    assert not rm.is_data(d)
    # expected_pseudo_ack follows the data packet's fields.
    f = data_frame()
    e = rm.decode(rm.expected_pseudo_ack(f, S, H))
    assert (e["ip_src"], e["ip_dst"], e["udp_sport"], e["bth_psn"], e["bth_pkey"], e["ts"], e["qpn"],
            e["bth_destqp"], e["ttl"]) == ("10.1.0.7", "10.0.0.5", 50001, 0xABCDE, 0x8012,
                                           0x0123456789ABCDEF, 0x123, 0x123, 63)
    # An RNIC's ACK: ECHO only, MSN and syndrome as given.
    r = rm.decode(rm.build_reflex_ack(H, S, "10.0.0.5", "10.1.0.7", ts=9, qpn=0x5, psn=3, msn=12,
                                      tos=26 << 2, ds_flags=rm.FLAG_ECHO))
    assert r["conforms"] and r["echo"] and not r["nsf"] and r["aeth_msn"] == 12 and r["dscp"] == 26


def test_ipv6():
    f = rm.build_reflex_data(H, S, "2001:db8:1::1", "2001:db8:2::1", ts=5, qpn=1, dqpn=2, psn=3,
                             payload=b"x" * 64, ipv6=True)
    d = rm.decode(f)
    assert d["conforms"] and d["ip_version"] == 6 and d["ip_len"] == 8 + 28 + 12 + 64 + 4, d
    assert d["dscp"] == 26 and d["ecn"] == 2 and d["icrc_ok"]


def test_icrc_detects_changes():
    f = data_frame()
    off = 14 + 20 + 8 + 28 + 12 + 100        # a payload byte
    bad = f[:off] + bytes([f[off] ^ 0x01]) + f[off + 1:]
    d = rm.decode(bad)
    assert not d["icrc_ok"] and not d["conforms"]
    psn_off = 14 + 20 + 8 + 28 + 9
    bad = f[:psn_off] + bytes([f[psn_off] ^ 0x10]) + f[psn_off + 1:]
    d = rm.decode(bad)
    assert not d["icrc_ok"] and d["bth_psn"] == 0xABCDE ^ 0x100000
    # Not covered by the ICRC: the hop (timestamp, QPN), TTL, ECN, BTH byte 4.
    for off, x in [(14 + 20 + 8 + 16, 0xFF), (14 + 20 + 8 + 27, 0x01), (22, 0x01), (15, 0x01),
                   (14 + 20 + 8 + 28 + 4, 0x80)]:
        g = bytearray(f)
        g[off] ^= x
        if off in (22, 15):   # keep the IPv4 header checksum right
            g[24:26] = b"\0\0"
            from verify import inet_checksum
            g[24:26] = struct.pack("!H", inet_checksum(bytes(g[14:34])))
        assert rm.decode(bytes(g))["icrc_ok"], off
    # An ICRC byte itself.
    assert not rm.decode(f[:-1] + bytes([f[-1] ^ 0xFF]))["icrc_ok"]


def test_decode_refuses_and_flags():
    from scapy.layers.l2 import Ether
    from scapy.layers.inet import IP, UDP, TCP
    plain = bytes(rm.strip_int(data_frame()))
    assert rm.decode(plain) is None                          # RoCE without INT
    assert rm.decode(bytes(Ether() / IP() / TCP())) is None
    assert rm.decode(bytes(Ether() / IP() / UDP(dport=5000) / (b"\x00" * 40))) is None
    f = bytearray(data_frame())
    f[42 + 10:42 + 12] = b"\x12\x34"                         # another INT domain
    assert rm.decode(bytes(f)) is None
    assert rm.decode(data_frame(), int_port=6000) is None     # another INT port
    assert rm.decode(data_frame(int_port=6000), int_port=6000)["conforms"]
    # Deviations from version 1 are listed.
    for off, val, needle in [(43, 8, "shim_len_words"), (42 + 4 + 2, 0x02, "md_hop_ml"),
                             (42 + 4 + 3, 1, "md_rhc"), (42 + 8, 0x08, "md_instructions"),
                             (42 + 14, 0x20, "ds_flags"), (42 + 24, 0x01, "top byte")]:
        g = bytearray(data_frame())
        g[off] = val
        d = rm.decode(bytes(g))
        assert d is not None and not d["conforms"] and any(needle in p for p in d["problems"]), (needle, d["problems"])


def test_nsf_model_hand_trace():
    T, I, N = 5000, 5000, 5
    k = ("a", "b", 1)
    hi, lo = 9000, 1000
    # Packets every I/5 = 1 us: Silent x2, Active x7, Cooling x5 then Silent, Silent x2.
    tsrc = [lo, lo] + [hi] * 7 + [lo] * 6 + [lo, lo]
    ev = [(i * 1000, k, t) for i, t in enumerate(tsrc)]
    tr = []
    got = rm.nsf_model(ev, T, I, N, tr)
    states = [s for _, _, _, s, _, _ in tr]
    assert states == ["Silent"] * 2 + ["Active"] * 7 + ["Cooling"] * 5 + ["Silent"] * 3, states
    assert [c for _, _, _, s, c, _ in tr if s == "Cooling"] == [5, 4, 3, 2, 1]
    # Active at 2 (at once), 7 (2 + 5 us: now - last = interval counts), then Cooling at 12
    # (7 + 5 us, counter 2); 14 turns Silent without one.
    assert got == [2, 7, 12], got
    # With 1.1 us spacing: 2, 7 (5.5 us), Cooling 9..13 -> 12 (5.5 us), Silent at 14.
    ev = [(i * 1100, k, t) for i, t in enumerate(tsrc)]
    assert rm.nsf_model(ev, T, I, N) == [2, 7, 12]
    # Cooling -> Active does not reset the interval; the counter restarts on the next low delay.
    tsrc = [hi, lo, lo, hi, lo, lo, lo, lo, lo, lo]
    ev = [(i * 1000, k, t) for i, t in enumerate(tsrc)]
    tr = []
    assert rm.nsf_model(ev, T, I, N, tr) == [0, 5]
    assert [s for _, _, _, s, _, _ in tr] == ["Active", "Cooling", "Cooling", "Active"] + ["Cooling"] * 5 + ["Silent"]
    # The threshold itself is not above it; a future timestamp counts as 0.
    assert rm.nsf_model([(0, k, T)], T, I, N) == []
    assert rm.nsf_model([(0, k, T + 1)], T, I, N) == [0]
    assert rm.nsf_model([(0, k, -7000)], T, I, N) == []
    assert rm.t_src(100, 300) == 0 and rm.t_src(300, 100) == 200
    # N_cool = 0: Active -> Silent at once, no pseudo-ACK on the low packet.
    ev = [(0, k, hi), (10_000, k, lo), (20_000, k, hi)]
    assert rm.nsf_model(ev, T, I, 0) == [0, 2]
    # Flows are independent (their own state and interval).
    k2 = ("a", "b", 2)
    ev = [(0, k, hi), (100, k2, hi), (200, k, hi), (300, k2, lo), (5100, k2, hi)]
    assert rm.nsf_model(ev, T, I, N) == [0, 1, 4]
    # Interval just short of T_interval: suppressed.
    ev = [(0, k, hi), (4999, k, hi), (5000, k, hi)]
    assert rm.nsf_model(ev, T, I, N) == [0, 2]


def test_cli():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x.pcap")
        plain = rm.strip_int(data_frame())
        write_pcap(p, [(1000, data_frame()), (2000, plain)])
        r = subprocess.run([sys.executable, os.path.join(HERE, "reflex_model.py"), "decode", p],
                           capture_output=True, text=True, check=True)
        lines = [json.loads(x) for x in r.stdout.splitlines()]
        assert len(lines) == 2 and lines[1] == {"reflex": False}, lines
        assert lines[0]["reflex"] and lines[0]["icrc_ok"] and lines[0]["pcap_ts_ns"] == 1000
        assert lines[0]["ts"] == 0x0123456789ABCDEF and lines[0]["bth_psn"] == 0xABCDE


# --- the cases' check.py scripts -------------------------------------------------------------

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


def patch(f, off, val):
    return f[:off] + bytes([val]) + f[off + 1:]


def test_check_nsf_pseudo_ack():
    case = "reflex_nsf_pseudo_ack"
    inputs, outs, _ = rs.run_case(os.path.join(CASES, case))
    assert len(outs["dc0"]) == 6 and len(outs["wan0"]) == 41
    assert_passes(case, inputs, outs)
    dc0, wan = outs["dc0"], outs["wan0"]
    assert_fails(case, inputs, dict(outs, dc0=dc0[:2] + dc0[3:]), "NSF model")
    # An extra pseudo-ACK, for the data packet after the first answered one.
    extra = rm.expected_pseudo_ack(inputs["dc0"][4][1], S, H)
    assert_fails(case, inputs, dict(outs, dc0=sorted(dc0 + [(wan[4][0], extra)])), "NSF model")
    assert_fails(case, inputs, dict(outs, dc0=dc0 + [dc0[0]]), "second pseudo-ACK")
    t, f = dc0[1]
    assert_fails(case, inputs, dict(outs, dc0=[dc0[0], (t, patch(f, 15, 46 << 2)), *dc0[2:]]), "dscp")
    psn_off = 14 + 20 + 8 + 28 + 10      # PSN + 0x4000: no such data packet
    assert_fails(case, inputs, dict(outs, dc0=[dc0[0], (t, patch(f, psn_off, f[psn_off] ^ 0x40)), *dc0[2:]]),
                 "answers no data packet")
    assert_fails(case, inputs, dict(outs, dc0=[dc0[0], (t, f[:-1] + bytes([f[-1] ^ 1])), *dc0[2:]]), "icrc_ok")
    assert_fails(case, inputs, dict(outs, dc0=[dc0[0], (t, patch(f, 42 + 14, 0x80)), *dc0[2:]]), "ds_flags")
    assert_fails(case, inputs, dict(outs, dc0=[dc0[0], (t, patch(f, 0, 0x12)), *dc0[2:]]), "eth_dst")
    assert_fails(case, inputs, dict(outs, dc0=[dc0[0], (t + 6000, f), *dc0[2:]]), "after its data packet")
    # Data: the hop timestamp changed, a packet lost, departures late enough to change T_src.
    tw, fw = wan[3]
    assert_fails(case, inputs, dict(outs, wan0=wan[:3] + [(tw, patch(fw, 42 + 23, fw[42 + 23] ^ 1))] + wan[4:]),
                 "not the input frame")
    assert_fails(case, inputs, dict(outs, wan0=wan[:5] + wan[6:]), "frames out of wan0")
    late = [(t + 4500, f) for t, f in wan]
    assert_fails(case, inputs, dict(outs, wan0=late), "wan0 was meant to be idle")
    assert_fails(case, inputs, dict(outs, dc1=[dc0[0]]), "out of dc1")


def test_check_ndt_queues():
    case = "reflex_ndt_queues"
    d = os.path.join(CASES, case)
    inputs, outs, _ = rs.run_case(d)
    assert_passes(case, inputs, outs)
    _, o, _ = rs.run_case(d, n_throttle=4)
    assert_fails(case, inputs, o, "4 Normal departures between two Controlled ones")
    _, o, _ = rs.run_case(d, n_throttle=16)
    assert_fails(case, inputs, o, "Normal departures in a row while Controlled had backlog")
    _, o, _ = rs.run_case(d, ndt_normal_only=True)
    assert_fails(case, inputs, o, "two Controlled ones with both queues backlogged, expected 8")
    _, o, _ = rs.run_case(d, ndt_no_ooo=True)
    assert_fails(case, inputs, o, "out of PSN order")
    dc0, wan = outs["dc0"], outs["wan0"]
    t, f = dc0[40]
    assert_fails(case, inputs, dict(outs, dc0=dc0[:40] + [(t + 1, f)] + dc0[41:]), "expected its departure time")
    assert_fails(case, inputs, dict(outs, dc0=dc0[:40] + dc0[41:]), "never left dc0")
    assert_fails(case, inputs, dict(outs, dc0=dc0 + [(dc0[-1][0] + 1000, dc0[-1][1])]), "duplicate")
    swapped = dc0[:40] + [(dc0[40][0], rm.with_ts(dc0[41][1], dc0[40][0])),
                          (dc0[41][0], rm.with_ts(dc0[40][1], dc0[41][0]))] + dc0[42:]
    assert_fails(case, inputs, dict(outs, dc0=swapped), "out of PSN order")
    squeezed = dc0[:60] + [(t - 5, rm.with_ts(f, t - 5)) for t, f in dc0[60:70]] + dc0[70:]
    assert_fails(case, inputs, dict(outs, dc0=squeezed), "wire time")
    ta, fa = wan[1]
    assert_fails(case, inputs, dict(outs, wan0=[wan[0], (ta, patch(fa, 42 + 20, fa[42 + 20] ^ 1)), wan[2]]),
                 "not ACK #1 routed")
    pa = rm.expected_pseudo_ack(inputs["wan0"][0][1], S, H)
    assert_fails(case, inputs, dict(outs, dc0=sorted(dc0 + [(dc0[3][0] + 1, pa)])), "not Reflex data")
    assert_fails(case, inputs, dict(outs, wan1=[wan[0]]), "out of wan1")


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
