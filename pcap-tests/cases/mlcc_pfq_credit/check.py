#!/usr/bin/env python3
"""mlcc_pfq_credit oracle: python3 check.py OUTDIR.

Independent of longhaul (oracle/mlcc_model.py decodes docs/wire-formats.md's MLCC formats with
the standard library, ICRCs are checked with oracle/verify.py's code, and R_DQM is recomputed by
oracle/mlcc_dqm.py, the independent DQM model of docs/mlcc.md). Inputs: a burst of RoCE RC data
on wan0 (one inter-DC flow, no INT) and one ACK with an MCETH on dc0. Requires:

* out_dc0: the data, every packet once, in input order, nothing else. Each with the MLCC INT on
  `[mlcc] int_udp_port` (shim/INT-MD of version 1, RemainingHopCount = `[int] max_hops` - 1, no E
  bit) holding exactly one hop, the DCI's: node id `[int] switch_id`, queue id = the data's class
  (`[qos] dscp_map`), egress timestamp = the departure (pcap) time, tx bytes = the bytes dc0 sent
  before it (the lengths of the frames it emitted), link rate = dc0's rate in Mbit/s, occupancy
  at most the bytes of later data that had arrived by then; C_D absent for packets that left
  before the ACK arrived and = the ACK's C_R for those that left after it. Stripping the INT
  gives the input routed (MACs: dc0's, the 10.0.0.0/16 next hop; TTL - 1), byte for byte, with a
  valid ICRC.
* dc0 at line rate at most: each departure no earlier than the previous frame's end on the wire,
  (len + 24) x 8 / rate, with len the frame as emitted.
* The PFQ's shaper (docs/mlcc.md: a new flow's PFQ is dequeued at `initial_rate_gbps`, then at
  the ACK's R_credit; a token bucket starting full at `BUCKET_BYTES`): with L = the frame length
  without INT (what the PFQ holds), before the ACK: after the initial burst (the first frame
  whose gap exceeds 2 wire times; at least 2 and at most what a full bucket allows at line rate
  went before it), every gap = L x 8 / initial rate (+-1 ns); after the ACK: every gap but the
  one spanning the ACK = L x 8 / R_credit (+-1 ns), that one in between; over any run of
  departures i..j on one side of the ACK, bytes <= BUCKET_BYTES + rate x (d_j - d_i).
* out_wan0: exactly the ACK, routed (MACs: wan0's, the 10.1.0.0/16 next hop; TTL - 1), byte for
  byte but for MCETH flags |= 0x40, R_DQM and the ICRC (valid); C_R, R_credit, qpn as sent; R_DQM
  = mlcc_dqm's R_bar (kbit/s, bps // 1000) for this flow's first ACK (C_R, R_credit as sent,
  Q_c = bytes of data that arrived on wan0 before the ACK but left dc0 after it), with the
  parameters of `[mlcc.receiver]` (max rate: dc0's rate).
* nothing else out of either port; at least 20 data packets left before the ACK and at least 5
  after it (the case tests both rates).
"""
import os
import sys
from fractions import Fraction

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402
import mlcc_model as mm  # noqa: E402
from mlcc_dqm import Dqm  # noqa: E402
from verify import icrc  # noqa: E402

NAME = "mlcc_pfq_credit"
BUCKET_BYTES = 4200     # the PFQ shaper's depth: one dc0 MTU (checked against the config below)


def wire_ns(length, rate_bps):
    return -(-(length + 24) * 8 * 1_000_000_000 // rate_bps)


def main(outdir):
    fails = Failures(NAME)
    cfg = mm.load_case_config(HERE)
    macs = mm.port_macs(cfg)
    int_port = cfg["mlcc"]["int_udp_port"]
    rx = cfg["mlcc"]["receiver"]
    icfg = cfg["int"]
    dc_rate = mm.port_rate_bps(cfg, "dc0")
    dc_mtu = next(p["mtu"] for p in cfg["ports"] if p["name"] == "dc0")
    fails.expect(dc_mtu == BUCKET_BYTES, f"dc0 mtu {dc_mtu} != BUCKET_BYTES {BUCKET_BYTES}")
    init_rate = int(round(float(rx.get("initial_rate_gbps", 25.0)) * 1e9))
    dscp_map = {int(k): v for k, v in cfg["qos"]["dscp_map"].items()}
    _, nh_local = mm.next_hop(cfg, "10.0.0.0/16")
    _, nh_remote = mm.next_hop(cfg, "10.1.0.0/16")

    data_in = read_pcap(os.path.join(outdir, "in_wan0.pcap"))
    acks_in = read_pcap(os.path.join(outdir, "in_dc0.pcap"))
    base = data_in[0][0]
    dc0 = mm.read_port(outdir, "dc0")
    wan = mm.read_port(outdir, "wan0")
    if not fails.expect(len(acks_in) == 1, f"{len(acks_in)} ACK inputs, expected 1"):
        fails.done()
    t_ack, ack_in = acks_in[0]
    a_in = mm.decode_mceth(ack_in)
    fails.expect(a_in is not None and a_in["conforms"] and a_in["flags"] == mm.MCETH_CREDIT,
                 f"the input ACK is not an MCETH ACK with flags 0x80: {a_in and a_in['problems']}")
    c_r, r_credit_bps = a_in["c_r"], a_in["r_credit_kbps"] * 1000

    # 1. Data out of dc0: one per input, in order, INT reinserted with the DCI's hop.
    fails.expect(len(dc0) == len(data_in), f"{len(dc0)} frames out of dc0, expected {len(data_in)}")
    deps = []          # (departure, L without INT, arrival)
    sent = 0
    for i, ((ta, fin), (td, fout)) in enumerate(zip(data_in, dc0)):
        where = f"dc0 frame #{i} (+{td - base} ns)"
        fails.expect(td >= ta, f"{where}: departs before it arrived (+{ta - base} ns)")
        d = mm.decode_int(fout, int_port)
        if not fails.expect(d is not None, f"{where}: no MLCC INT ({len(fout)} bytes)"):
            sent += len(fout)
            continue
        fails.expect(d["conforms"], f"{where}: {d['problems']}")
        want_cd = None if td < t_ack else c_r
        exp = {"md_rhc": icfg.get("max_hops", 3) - 1, "md_e": 0, "n_hops": 1, "c_d": want_cd,
               "ds_flags": 0 if want_cd is None else 0x8000 | want_cd, "len": len(fin) + 44,
               "icrc_ok": True}
        if td == t_ack:
            exp.pop("c_d"), exp.pop("ds_flags")      # dequeued at the ACK's instant: either
        for field, v in exp.items():
            fails.expect(d.get(field) == v, f"{where}: {field} = {d.get(field)!r}, expected {v!r}")
        if d["hops"]:
            h = d["hops"][0]
            later = sum(len(f) for t, f in data_in[i + 1:] if t <= td)
            exp_h = {"node_id": icfg["switch_id"], "queue_id": dscp_map[fin[15] >> 2], "ts": td,
                     "tx_bytes": sent, "rate_mbps": dc_rate // 1_000_000}
            for field, v in exp_h.items():
                fails.expect(h[field] == v, f"{where}: hop {field} = {h[field]}, expected {v}")
            fails.expect(h["qocc"] <= later, f"{where}: hop occupancy {h['qocc']} > {later} bytes of "
                                             f"later data that had arrived")
        plain = mm.strip_int(fout, int_port)
        k = mm.first_diff(plain, mm.routed(fin, macs["dc0"], nh_local))
        fails.expect(k is None, f"{where}: with the INT stripped, not input #{i} routed (first differing "
                                f"byte {k})")
        fails.expect(icrc(plain[14:-4], False) == plain[-4:], f"{where}: ICRC does not verify with the "
                                                              f"INT stripped")
        fails.expect(d.get("bth_psn") == int.from_bytes(fin[51:54], "big"), f"{where}: out of order")
        deps.append((td, len(plain), ta))
        sent += len(fout)

    # 2. Line rate at most.
    for k in range(1, len(dc0)):
        w = wire_ns(len(dc0[k - 1][1]), dc_rate)
        gap = dc0[k][0] - dc0[k - 1][0]
        fails.expect(gap >= w, f"dc0 frame #{k} (+{dc0[k][0] - base} ns): {gap} ns after the previous "
                               f"{len(dc0[k - 1][1])}-byte frame started, whose wire time is {w} ns "
                               f"(faster than line rate)")

    # 3. The PFQ's shaper.
    before = [x for x in deps if x[0] < t_ack]
    after = [x for x in deps if x[0] > t_ack]
    fails.expect(len(before) >= 20 and len(after) >= 5,
                 f"{len(before)} data packets left before the ACK and {len(after)} after: the case wants "
                 f">= 20 and >= 5")

    def conform(run, rate, label):
        for i in range(len(run)):
            total = 0
            for j in range(i, len(run)):
                total += run[j][1]
                allowed = BUCKET_BYTES + Fraction(rate, 8 * 10**9) * (run[j][0] - run[i][0]) + \
                    Fraction(rate, 8 * 10**9)          # 1 ns of rounding
                if total > allowed:
                    fails.add(f"{label}: departures #{i}..#{j} carry {total} bytes in "
                              f"{run[j][0] - run[i][0]} ns: more than the bucket ({BUCKET_BYTES} B) "
                              f"plus {rate / 1e9:g} Gb/s allow")
                    return

    def paced(run, rate, first, label):
        for k in range(first, len(run)):
            gap = run[k][0] - run[k - 1][0]
            want = Fraction(run[k][1] * 8 * 10**9, rate)
            fails.expect(abs(gap - want) <= 1, f"{label}: gap #{k - 1}->#{k} {gap} ns, expected "
                                               f"{float(want):.2f} (+-1) for {run[k][1]} B at {rate / 1e9:g} Gb/s")

    L = before[0][1] if before else 1058
    w_line = wire_ns(len(dc0[0][1]), dc_rate) if dc0 else 1
    first_paced = next((k for k in range(1, len(before)) if before[k][0] - before[k - 1][0] > 2 * w_line),
                       None)
    # A full bucket at line rate: frames 0..j go while (j + 1) L <= B + r j w.
    max_burst = max(j + 1 for j in range(0, 64)
                    if (j + 1) * L <= BUCKET_BYTES + Fraction(init_rate, 8 * 10**9) * j * w_line)
    if fails.expect(first_paced is not None and 2 <= first_paced <= max_burst,
                    f"initial burst of {first_paced} frame(s) at line rate; a full {BUCKET_BYTES}-byte bucket "
                    f"allows 2..{max_burst}"):
        want = Fraction(before[first_paced][1] * 8 * 10**9, init_rate)
        g = before[first_paced][0] - before[first_paced - 1][0]
        fails.expect(g <= want + 1, f"first paced gap {g} ns > {float(want):.2f}")
        paced(before, init_rate, first_paced + 1, "before the ACK")
    conform(before, init_rate, "before the ACK")
    if before and after:
        g = after[0][0] - before[-1][0]
        lo = Fraction(L * 8 * 10**9, init_rate) - 1
        hi = Fraction(after[0][1] * 8 * 10**9, r_credit_bps) + 1
        fails.expect(lo <= g <= hi, f"the gap spanning the ACK is {g} ns, expected between {float(lo):.2f} "
                                    f"and {float(hi):.2f}")
    paced(after, r_credit_bps, 1, "after the ACK")
    conform(after, r_credit_bps, "after the ACK")

    # 4. The ACK on wan0 with R_DQM.
    q_c = sum(L for td, L, ta in deps if ta < t_ack and td > t_ack)
    params = dict(theta_ns=rx.get("theta_ns", 18_000_000), d_t_ns=rx.get("d_t_ns", 1_000_000),
                  m=rx.get("m", 5), alpha=float(rx.get("alpha", 0.5)), rtt_c_ns=rx.get("rtt_c_ns", 6_000_000),
                  rtt_d_ns=rx.get("rtt_d_ns", 20_000), mtu_bytes=rx.get("mtu_bytes", 1000),
                  history=rx.get("history", 512),
                  min_rate_bps=int(round(float(rx.get("min_rate_gbps", 0.1)) * 1e9)),
                  max_rate_bps=int(round(float(rx["max_rate_gbps"]) * 1e9)) if "max_rate_gbps" in rx
                  else dc_rate)
    dqm = Dqm(params)
    for td, _, _ in deps:
        if td < t_ack:
            dqm.on_data(td)
    o = dqm.on_ack(t_ack, c_r, r_credit_bps, q_c)
    want_dqm = mm.kbps(o["r_bar_bps"])
    if fails.expect(len(wan) == 1, f"{len(wan)} frames out of wan0, expected 1 (the ACK)"):
        ts, f = wan[0]
        where = f"wan0 ACK (+{ts - base} ns)"
        fails.expect(ts >= t_ack, f"{where}: leaves before it arrived")
        a = mm.decode_mceth(f)
        if fails.expect(a is not None, f"{where}: not an ACK with an MCETH"):
            fails.expect(a["conforms"], f"{where}: {a['problems']}")
            exp = {"flags": mm.MCETH_CREDIT | mm.MCETH_DQM, "c_r": c_r, "r_credit_kbps": a_in["r_credit_kbps"],
                   "qpn": a_in["qpn"], "r_dqm_kbps": want_dqm, "icrc_ok": True, "ttl": a_in["ttl"] - 1,
                   "eth_src": macs["wan0"], "eth_dst": nh_remote}
            for field, v in exp.items():
                fails.expect(a.get(field) == v, f"{where}: {field} = {a.get(field)!r}, expected {v!r}")
            want = mm.with_r_dqm(mm.routed(ack_in, macs["wan0"], nh_remote), want_dqm)
            k = mm.first_diff(f, want)
            fails.expect(k is None, f"{where}: differs from the input ACK routed with R_DQM {want_dqm} "
                                    f"written at byte {k}")
            print(f"{NAME}: ACK +{t_ack - base} ns: C_R {c_r}, R_credit {r_credit_bps / 1e9:g} Gb/s, Q_c "
                  f"{q_c} B -> R_DQM {a['r_dqm_kbps']} kbit/s (model {want_dqm}; D_pre {o['d_pre_ns']:.0f} ns, "
                  f"R_DQM(eq. 5) {o['r_dqm_bps'] / 1e9:.6f} Gb/s, dw {o['dw']})")
    gaps = [deps[k][0] - deps[k - 1][0] for k in range(1, len(deps))]
    print(f"{NAME}: {len(deps)} data packets out of dc0, {len(before)} before the ACK, {len(after)} after; "
          f"gaps (ns) {gaps}")
    fails.done()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
