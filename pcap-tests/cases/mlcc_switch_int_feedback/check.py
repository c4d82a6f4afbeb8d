#!/usr/bin/env python3
"""mlcc_switch_int_feedback oracle: python3 check.py OUTDIR.

Independent of longhaul (oracle/mlcc_model.py decodes docs/wire-formats.md's MLCC formats with
the standard library; ICRCs are checked with oracle/verify.py's code). Requires:

* out_wan0: every input frame, in order, without its INT (UDP dport 4791 again, the lengths and
  the IPv4 checksum restored) and routed (MACs: wan0's, the 10.1.0.0/16 next hop; TTL - 1):
  byte for byte `routed(strip_int(input))`, the RoCE packet as the sender built it, its ICRC
  valid; a plain RoCE input only routed; none leaves before it arrived;
* out_dc0: only Switch-INTs, exactly one per INT data packet whose PSN is a multiple of
  `[mlcc.feedback] psn_stride`, none for the plain packet; each decoded with every field of
  docs/wire-formats.md: Ethernet dst = the 10.0.0.0/16 next hop (toward the sender), src = dc0's
  MAC; IPv4 addresses = the data's swapped, DSCP = `[mlcc.feedback] dscp`, ECT(0), TTL 63
  (64 - 1 after routing), IP ID 0, DF, total length 60 + 28 n; UDP sport = the data's, dport
  4791, checksum 0; BTH opcode 0x81, BECN, P_Key 0xffff, PSN 0, DestQP = the data's DestQP;
  header 0x4d4c, version 1, hop count n = the data's, instructions 0x9400, DS Instruction 0xc000,
  HopML 7, flags 0x40 iff the data's INT had the E bit (0x80 never: 2 hops), bytes 10-11 zero,
  the data's PSN; the hops identical to the data's and in the same order; a valid ICRC; byte for
  byte what scapy builds for those fields (mlcc_model.expected_switch_int); sent no earlier than
  its data packet arrived and within 1 us of it;
* the Switch-INTs leave in the order of their data packets.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402
import mlcc_model as mm  # noqa: E402
from verify import icrc  # noqa: E402

NAME = "mlcc_switch_int_feedback"


def main(outdir):
    fails = Failures(NAME)
    cfg = mm.load_case_config(HERE)
    macs = mm.port_macs(cfg)
    int_port = cfg["mlcc"]["int_udp_port"]
    fb = cfg["mlcc"]["feedback"]
    stride, dscp = fb.get("psn_stride", 1), fb.get("dscp", 48)
    _, nh_remote = mm.next_hop(cfg, "10.1.0.0/16")
    _, nh_local = mm.next_hop(cfg, "10.0.0.0/16")

    inp = read_pcap(os.path.join(outdir, "in_dc0.pcap"))
    base = inp[0][0]
    wan = mm.read_port(outdir, "wan0")
    dc0 = mm.read_port(outdir, "dc0")

    # 1. Data: INT stripped, routed, ICRC valid.
    fails.expect(len(wan) == len(inp), f"{len(wan)} frames out of wan0, expected {len(inp)}")
    data = {}          # (ip_src, ip_dst, destqp, psn) -> (input index, arrival, input frame, decode)
    n_int = 0
    for i, ((ta, fin), (td, fout)) in enumerate(zip(inp, wan)):
        where = f"wan0 frame #{i} (+{td - base} ns)"
        d = mm.decode_int(fin, int_port)
        if d is not None:
            n_int += 1
            fails.expect(d["conforms"], f"input #{i}: fixture does not conform: {d['problems']}")
            plain = mm.strip_int(fin, int_port)
            key = (d["ip_src"], d["ip_dst"], d["bth_destqp"], d["bth_psn"])
            data[key] = (i, ta, fin, d)
        else:
            plain = fin
        want = mm.routed(plain, macs["wan0"], nh_remote)
        k = mm.first_diff(fout, want)
        fails.expect(k is None, f"{where}: not input #{i} {'without its INT and ' if d else ''}routed "
                                f"(first differing byte {k}; {len(fout)} vs {len(want)} bytes)")
        fails.expect(fout[36:38] == b"\x12\xb7", f"{where}: UDP dport {fout[36:38].hex()}, expected 4791")
        fails.expect(icrc(fout[14:-4], False) == fout[-4:], f"{where}: ICRC does not verify")
        fails.expect(td >= ta, f"{where}: departs before it arrived (+{ta - base} ns)")
    fails.expect(n_int >= 2 and n_int < len(inp), f"{n_int} INT data inputs of {len(inp)}: the case needs "
                                                  f"several and one plain packet")

    # 2. Switch-INTs.
    answered = []
    for j, (ts, f) in enumerate(dc0):
        where = f"dc0 frame #{j} (+{ts - base} ns)"
        s = mm.decode_switch_int(f)
        if not fails.expect(s is not None, f"{where}: not a Switch-INT ({len(f)} bytes)"):
            continue
        fails.expect(s["conforms"], f"{where}: {s['problems']}")
        key = (s["ip_dst"], s["ip_src"], s["bth_destqp"], s["data_psn"])
        if not fails.expect(key in data, f"{where}: answers no INT data packet (addresses {s['ip_src']} -> "
                                         f"{s['ip_dst']}, DestQP {s['bth_destqp']:#x}, PSN {s['data_psn']})"):
            continue
        i, ta, fin, d = data[key]
        fails.expect(key not in answered, f"{where}: second Switch-INT for input #{i}")
        answered.append(key)
        n = len(d["hops"])
        exp = {
            "eth_dst": nh_local, "eth_src": macs["dc0"], "ethertype": 0x0800, "ip_version": 4,
            "ip_src": d["ip_dst"], "ip_dst": d["ip_src"], "dscp": dscp, "ecn": 2, "ttl": 63,
            "ip_id": 0, "df": True, "mf": False, "frag_offset": 0, "ip_len": 60 + 28 * n,
            "udp_sport": d["udp_sport"], "udp_dport": 4791, "udp_len": 40 + 28 * n, "udp_checksum": 0,
            "bth_opcode": 0x81, "bth_becn": 1, "bth_fecn": 0, "bth_pkey": 0xFFFF, "bth_psn": 0,
            "bth_destqp": d["bth_destqp"], "si_magic": 0x4D4C, "si_version": 1, "si_n": n,
            "si_instructions": 0x9400, "si_ds_instruction": 0xC000, "si_hop_ml": 7,
            "si_flags": 0x40 if d["e"] else 0, "e": d["e"], "cut": False, "si_rsvd": 0,
            "data_psn": d["bth_psn"], "hops": d["hops"], "icrc_ok": True, "len": 14 + 60 + 28 * n,
            "trailer_len": 0,
        }
        for field, v in exp.items():
            fails.expect(s.get(field) == v, f"{where}: {field} = {s.get(field)!r}, expected {v!r}")
        want = mm.expected_switch_int(fin, macs["dc0"], nh_local, ttl=63, dscp=dscp, int_port=int_port)
        k = mm.first_diff(f, want)
        fails.expect(k is None, f"{where}: differs from the scapy-built Switch-INT at byte {k}")
        fails.expect(ta <= ts <= ta + 1000, f"{where}: sent {ts - ta} ns after its data packet arrived")
        print(f"{NAME}: +{ts - base:>6} ns Switch-INT for PSN {s['data_psn']:#x} -> {s['ip_dst']} "
              f"DestQP {s['bth_destqp']:#x}, {s['si_n']} hops (node ids "
              f"{[h['node_id'] for h in s['hops']]}), flags {s['si_flags']:#04x}")

    # 3. Exactly the data packets with PSN % stride == 0, in their order.
    want_keys = [k for k, v in sorted(data.items(), key=lambda kv: kv[1][0]) if k[3] % stride == 0]
    fails.expect(answered == want_keys,
                 f"Switch-INTs for PSNs {[k[3] for k in answered]}, expected {[k[3] for k in want_keys]} "
                 f"(every INT data packet whose PSN is a multiple of psn_stride {stride}, in order)")
    fails.expect(any(v[3]["e"] for v in data.values()), "no input has the E bit: flag 0x40 untested")
    print(f"{NAME}: {len(wan)} frame(s) out of wan0 ({n_int} with INT stripped), {len(dc0)} Switch-INT(s)")
    fails.done()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
