#!/usr/bin/env python3
"""int_source_tor oracle: python3 check.py OUTDIR.

Independent of longhaul (oracle/mlcc_model.py decodes docs/wire-formats.md's MLCC INT with the
standard library; the ICRC is checked with oracle/verify.py's code). Every input leaves exactly
once, on the port its destination's longest-prefix route names, in input order, no earlier than
it arrived. Requires:

* out_up0 (an `[int] ports` port): each RoCE RC data packet (SEND / RDMA WRITE, opcodes
  0x00-0x0B) carries the MLCC INT on `[int] udp_port`: shim type 1 / NPT 1 / 4791, INT-MD
  version 2, HopML 7, RemainingHopCount = max_hops - 1, instructions 0x9400, DS ID 0x4d4c, DS
  Instruction 0xc000, DS Flags 0 (no C_D), no E bit, and exactly one hop: node id =
  `[int] switch_id`, queue id = the data's class (`[qos] dscp_map` of its DSCP), occupancy 0 (up0
  is idle when each arrives: checked), egress timestamp = the departure (pcap) time, tx bytes =
  the bytes up0 sent before it (the lengths of the frames it emitted, as in the pcap), link rate
  = up0's rate in Mbit/s; stripping the INT gives the input routed (MACs: up0's, the default
  route's next hop; TTL - 1; IPv4 checksum), byte for byte, with a valid ICRC;
* out_up0: anything else (the RC ACK) routed, byte for byte, no INT;
* out_host1: routed, byte for byte, no INT (host1 is not an `[int]` port); nothing out of host0.
"""
import ipaddress
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402
import mlcc_model as mm  # noqa: E402
from verify import icrc  # noqa: E402

NAME = "int_source_tor"


def route(cfg, dst):
    """(port, next hop MAC) of the longest matching prefix."""
    best = None
    for r in cfg["routes"]:
        net = ipaddress.ip_network(r["prefix"])
        if ipaddress.ip_address(dst) in net and (best is None or net.prefixlen > best[0]):
            best = (net.prefixlen, r["port"], r["next_hop_mac"])
    return best[1:] if best else (None, None)


def main(outdir):
    fails = Failures(NAME)
    cfg = mm.load_case_config(HERE)
    macs = mm.port_macs(cfg)
    icfg = cfg["int"]
    int_port, switch_id, max_hops = icfg["udp_port"], icfg["switch_id"], icfg.get("max_hops", 3)
    int_ports = set(icfg["ports"])
    dscp_map = {int(k): v for k, v in cfg["qos"]["dscp_map"].items()}
    default_class = cfg["qos"].get("default_class", 0)
    rates = {p["name"]: mm.port_rate_bps(cfg, p["name"]) for p in cfg["ports"]}

    inp = read_pcap(os.path.join(outdir, "in_host0.pcap"))
    base = inp[0][0]
    outs = {p["name"]: mm.read_port(outdir, p["name"]) for p in cfg["ports"]}
    want = {name: [] for name in outs}
    for i, (ta, f) in enumerate(inp):
        dst = ".".join(str(x) for x in f[30:34])
        port, nh = route(cfg, dst)
        want[port].append((i, ta, f, nh))
    fails.expect(len(want.get("up0", [])) >= 2 and len(want.get("host1", [])) >= 1,
                 "the case needs inputs toward up0 and host1")

    n_int = 0
    for name, exp in want.items():
        got = outs[name]
        fails.expect(len(got) == len(exp), f"{len(got)} frame(s) out of {name}, expected {len(exp)}")
        sent = 0            # bytes the port emitted before this frame
        free_at = None      # when its previous frame's transmission ended
        for (i, ta, fin, nh), (td, fout) in zip(exp, got):
            where = f"{name} frame (input #{i}, +{td - base} ns)"
            fails.expect(td >= ta, f"{where}: departs before it arrived (+{ta - base} ns)")
            routed = mm.routed(fin, macs[name], nh)
            is_data = fin[36:38] == b"\x12\xb7" and fin[42] in mm.RC_DATA_OPCODES
            d = mm.decode_int(fout, int_port)
            if name in int_ports and is_data:
                if not fails.expect(d is not None, f"{where}: RC data (opcode {fin[42]:#04x}) without the "
                                                   f"MLCC INT"):
                    continue
                n_int += 1
                fails.expect(d["conforms"], f"{where}: {d['problems']}")
                dscp = fin[15] >> 2
                idle = free_at is None or free_at <= ta
                fails.expect(idle, f"{where}: up0 was still busy when it arrived: the case wants an idle port")
                exp_f = {"udp_dport": int_port, "shim_type": 1, "shim_npt": 1, "shim_orig_dport": 4791,
                         "shim_len_words": (4 + 12 + 28) // 4, "md_ver": 2, "md_hop_ml": 7,
                         "md_rhc": max_hops - 1, "md_e": 0, "md_instructions": 0x9400, "ds_id": 0x4D4C,
                         "ds_instruction": 0xC000, "ds_flags": 0, "c_d": None, "n_hops": 1,
                         "icrc_ok": True, "len": len(fin) + 44}
                for field, v in exp_f.items():
                    fails.expect(d.get(field) == v, f"{where}: {field} = {d.get(field)!r}, expected {v!r}")
                if d["hops"]:
                    h = d["hops"][0]
                    exp_h = {"node_id": switch_id, "queue_id": dscp_map.get(dscp, default_class), "qocc": 0,
                             "ts": td, "tx_bytes": sent, "rate_mbps": rates[name] // 1_000_000}
                    for field, v in exp_h.items():
                        fails.expect(h[field] == v, f"{where}: hop {field} = {h[field]}, expected {v}")
                    print(f"{NAME}: +{td - base:>6} ns {name} opcode {d['bth_opcode']:#04x} PSN "
                          f"{d['bth_psn']:#x}: INT hop node {h['node_id']} queue {h['queue_id']} qocc "
                          f"{h['qocc']} ts +{h['ts'] - base} tx_bytes {h['tx_bytes']} rate {h['rate_mbps']}"
                          f" Mbit/s, RemainingHopCount {d['md_rhc']}")
                plain = mm.strip_int(fout, int_port)
                k = mm.first_diff(plain, routed)
                fails.expect(k is None, f"{where}: with the INT stripped, not input #{i} routed "
                                        f"(first differing byte {k})")
                fails.expect(icrc(plain[14:-4], False) == plain[-4:],
                             f"{where}: ICRC does not verify with the INT stripped")
            else:
                fails.expect(d is None, f"{where}: carries INT ({'not data' if not is_data else 'not an [int] port'})")
                k = mm.first_diff(fout, routed)
                fails.expect(k is None, f"{where}: not input #{i} routed (first differing byte {k})")
                print(f"{NAME}: +{td - base:>6} ns {name} {len(fout)}-byte frame routed, no INT")
            sent += len(fout)
            free_at = td + -(-(len(fout) + 24) * 8 * 1_000_000_000 // rates[name])
    fails.expect(n_int >= 2, f"only {n_int} INT frame(s) checked")
    fails.done()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
