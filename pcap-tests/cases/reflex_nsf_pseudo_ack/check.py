#!/usr/bin/env python3
"""reflex_nsf_pseudo_ack oracle: python3 check.py OUTDIR.

Independent of longhaul (oracle/reflex_model.py decodes docs/wire-formats.md's format with the
standard library and checks ICRCs with oracle/verify.py's code). Requires:

* out_wan0: every input frame, in order, exactly as a router forwards it (MACs: wan0's, the
  10.1.0.0/16 next hop; TTL - 1; IPv4 checksum updated), INT bytes and ICRC untouched;
* out_dc0: only pseudo-ACKs, each (decoded) exactly as docs/wire-formats.md says for the data
  packet it answers (found by hop QPN and PSN): addresses swapped, DSCP = nsf.ack_dscp, Not-ECT,
  TTL 63 (64 - 1 after routing), IPv4 ID 0, DF, UDP sport = the data's, dport = the INT port,
  shim/INT-MD fields of version 1, DS flags NSF|ECHO, the hop (timestamp, QPN) copied, opcode
  0x11, DestQP = hop QPN, PSN and P_Key = the data's, AETH 0x1f / MSN 0, a valid ICRC once the
  INT is stripped; Ether dst = the 10.0.0.0/24 next hop, src = dc0's MAC; byte for byte what
  scapy builds for those fields (reflex_model.expected_pseudo_ack); sent no earlier than its
  data packet left wan0 and within T_interval of it;
* the set of answered data packets = the reference NSF model (reflex_model.nsf_model) run on the
  observed departure times (T_src = departure - timestamp), and = the same model run on the
  arrival times (the design: wan0 is idle, so departure = arrival); non-empty, and the model's
  trace visits Silent, Active and Cooling;
* nothing out of dc1 or wan1.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402
import reflex_model as rm  # noqa: E402


def main(outdir):
    fails = Failures("reflex_nsf_pseudo_ack")
    cfg = rm.load_case_config(HERE)
    macs = rm.port_macs(cfg)
    nsf = cfg["reflex"]["nsf"]
    int_port = cfg["reflex"]["int_udp_port"]
    thresh, interval, n_cool = nsf["t_src_thresh_ns"], nsf["t_interval_ns"], nsf["n_cool"]
    ack_dscp = nsf.get("ack_dscp", 48)
    _, nh_remote = rm.next_hop(cfg, "10.1.0.0/16")
    _, nh_local = rm.next_hop(cfg, "10.0.0.0/24")

    inp = read_pcap(os.path.join(outdir, "in_dc0.pcap"))
    base = inp[0][0]
    wan = rm.read_port(outdir, "wan0")
    dc0 = rm.read_port(outdir, "dc0")
    for p in ("dc1", "wan1"):
        n = len(rm.read_port(outdir, p))
        fails.expect(n == 0, f"{n} frame(s) out of {p}, expected none")

    # 1. Data forwarded unchanged apart from routing.
    fails.expect(len(wan) == len(inp), f"{len(wan)} frames out of wan0, expected {len(inp)}")
    events_dep, events_arr, data = [], [], {}
    for i, ((ta, fin), (td, fout)) in enumerate(zip(inp, wan)):
        where = f"wan0 frame #{i} (+{td - base} ns)"
        want = rm.routed(fin, macs["wan0"], nh_remote)
        if not fails.expect(fout == want, f"{where}: not the input frame #{i} routed "
                            f"(first differing byte {next((k for k in range(min(len(fout), len(want))) if fout[k] != want[k]), min(len(fout), len(want)))})"):
            continue
        fails.expect(td >= ta, f"{where}: departs before it arrived (+{ta - base} ns)")
        d = rm.decode(fin, int_port)
        if d is None:
            continue
        fails.expect(d["conforms"], f"input #{i}: fixture does not conform: {d['problems']}")
        key = (d["ip_src"], d["ip_dst"], d["qpn"])
        events_dep.append((td, key, rm.t_src(td, d["ts"])))
        events_arr.append((ta, key, rm.t_src(ta, d["ts"])))
        data[(d["qpn"], d["bth_psn"])] = (len(events_dep) - 1, td, fin, d)
    fails.expect(len(data) >= 2, "fewer than two Reflex data packets left wan0")

    # 2. Pseudo-ACKs.
    answered = []
    for j, (ts, f) in enumerate(dc0):
        where = f"dc0 frame #{j} (+{ts - base} ns)"
        a = rm.decode(f, int_port)
        if not fails.expect(a is not None, f"{where}: not a Reflex INT frame ({len(f)} bytes)"):
            continue
        fails.expect(a["conforms"], f"{where}: {a['problems']}")
        k = (a["qpn"], a.get("bth_psn"))
        if not fails.expect(k in data, f"{where}: answers no data packet that left wan0 (hop QPN "
                                       f"{a['qpn']:#x}, PSN {a.get('bth_psn')})"):
            continue
        idx, td, fin, d = data[k]
        fails.expect(k not in answered, f"{where}: second pseudo-ACK for QPN {k[0]:#x} PSN {k[1]}")
        answered.append(k)
        exp = {
            "eth_dst": rm.mac_str(nh_local), "eth_src": rm.mac_str(macs["dc0"]), "ip_version": 4,
            "ip_src": d["ip_dst"], "ip_dst": d["ip_src"], "dscp": ack_dscp, "ecn": 0, "ttl": 63,
            "ip_id": 0, "df": True, "mf": False, "frag_offset": 0, "udp_sport": d["udp_sport"],
            "udp_dport": int_port, "udp_checksum": 0, "shim_type": 1, "shim_npt": 1,
            "shim_len_words": 7, "shim_orig_dport": 4791, "md_ver": 2, "md_hop_ml": 3, "md_rhc": 0,
            "md_instructions": 0x0400, "ds_id": 0x5246, "ds_instruction": 0x8000,
            "ds_flags": rm.FLAG_NSF | rm.FLAG_ECHO, "ts": d["ts"], "qpn": d["qpn"],
            "bth_opcode": rm.OP_ACK, "bth_destqp": d["qpn"], "bth_psn": d["bth_psn"],
            "bth_pkey": d["bth_pkey"], "aeth_syndrome": 0x1F, "aeth_msn": 0, "icrc_ok": True,
            "ip_len": 76, "udp_len": 56, "payload_len": 0, "len": 90,
        }
        for field, v in exp.items():
            fails.expect(a.get(field) == v, f"{where}: {field} = {a.get(field)!r}, expected {v!r}")
        want = rm.expected_pseudo_ack(fin, rm.mac_str(macs["dc0"]), rm.mac_str(nh_local), ttl=63,
                                      dscp=ack_dscp, int_port=int_port)
        fails.expect(f == want, f"{where}: bytes differ from the scapy-built pseudo-ACK "
                                f"({f.hex()} != {want.hex()})")
        fails.expect(td <= ts < td + interval,
                     f"{where}: sent {ts - td} ns after its data packet left wan0")

    # 3. Which packets were answered: the reference NSF model on departures and on arrivals.
    trace = []
    pred_dep = rm.nsf_model(events_dep, thresh, interval, n_cool, trace)
    pred_arr = rm.nsf_model(events_arr, thresh, interval, n_cool)
    by_idx = {v[0]: k for k, v in data.items()}
    want_dep = sorted(by_idx[i] for i in pred_dep)
    got = sorted(answered)
    fails.expect(got == want_dep, f"answered packets (QPN, PSN) {[(hex(q), p) for q, p in got]}; the NSF "
                                  f"model on the observed departures answers {[(hex(q), p) for q, p in want_dep]}")
    fails.expect(pred_dep == pred_arr, f"the model answers packets {pred_dep} from the departure times but "
                                       f"{pred_arr} from the arrival times: wan0 was meant to be idle "
                                       f"(departure = arrival)")
    fails.expect(len(want_dep) > 0, "the model predicts no pseudo-ACK: the case tests nothing")
    states = {s for _, _, _, s, _, _ in trace}
    fails.expect(states == {rm.SILENT, rm.ACTIVE, rm.COOLING}, f"the trace visits only {sorted(states)}")
    for i, key, tsrc, st, c, pa in trace:
        td = events_dep[i][0]
        print(f"reflex_nsf_pseudo_ack: +{td - base:>6} ns qpn {key[2]:#07x} T_src {tsrc:>6} -> {st:<7}"
              f"{' c=%d' % c if st == rm.COOLING else '    '}{'  pseudo-ACK' if pa else ''}")
    print(f"reflex_nsf_pseudo_ack: {len(dc0)} pseudo-ACK(s) for (QPN, PSN) {[(hex(q), p) for q, p in got]}")
    fails.done()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
