#!/usr/bin/env python3
"""reflex_ndt_queues oracle: python3 check.py OUTDIR.

Independent of longhaul (oracle/reflex_model.py decodes the Reflex INT and checks ICRCs).
From the inputs (arrival times, the ACKs' echoed timestamps) and the observed departures on dc0
it requires:

* out_dc0: every data packet exactly once, as a router forwards it (MACs: dc0's, the
  10.0.0.0/24 next hop; TTL - 1; IPv4 checksum) with its hop timestamp = its own departure time
  (the pcap timestamp), nothing else changed (ICRC valid with the INT stripped); no other frame
  (no pseudo-ACK: NSF does not answer WAN -> DC data); PSN order kept within each flow; frames
  spaced by at least their serialization time and no idle link while a packet waits;
* out_wan0: the three ACKs, in order, routed, INT untouched (no pseudo-ACK for them either);
  nothing out of wan1 or dc1;
* the queues: a flow's verdict is that of its latest ACK (Congested if arrival - echoed
  timestamp > t_dst_thresh); a data packet goes to the Controlled queue if its flow is
  Congested, or if it is Normal but an older packet of it sent to Controlled has not left yet;
  else Normal (packets too close to an ACK or to such a departure to tell are left out). At each
  departure (a scheduling decision) a queue "has backlog" if one of its packets had arrived
  `margin` ns before and had not left. Then (N = n_throttle): a run of Normal departures while
  Controlled has backlog is at most N long; a Controlled departure is never followed by another
  while Normal has backlog; between two Controlled departures with both queues backlogged
  throughout, exactly N Normal ones (the 8:1 pattern). Each rule must apply several times.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "oracle"))
from casekit import Failures, read_pcap  # noqa: E402
import reflex_model as rm  # noqa: E402

MIN_EXACT = 5       # "exactly N Normal between two Controlled" must be checked this often


def main(outdir):
    fails = Failures("reflex_ndt_queues")
    cfg = rm.load_case_config(HERE)
    macs = rm.port_macs(cfg)
    ndt = cfg["reflex"]["ndt"]
    int_port = cfg["reflex"]["int_udp_port"]
    n_thr, thresh = ndt["n_throttle"], ndt["t_dst_thresh_ns"]
    rate = {p["name"]: int(round(p["rate_gbps"] * 1e9)) for p in cfg["ports"]}
    _, nh_local = rm.next_hop(cfg, "10.0.0.0/24")
    _, nh_remote = rm.next_hop(cfg, "10.1.0.0/16")

    inputs = {p: read_pcap(os.path.join(outdir, f"in_{p}.pcap")) for p in ("wan0", "wan1", "dc0")}
    base = min(r[0][0] for r in inputs.values() if r)
    for p in ("wan1", "dc1"):
        n = len(rm.read_port(outdir, p))
        fails.expect(n == 0, f"{n} frame(s) out of {p}, expected none")

    # ACKs: forwarded to wan0 unchanged apart from routing; their verdicts.
    acks_in = inputs["dc0"]
    wan = rm.read_port(outdir, "wan0")
    fails.expect(len(wan) == len(acks_in), f"{len(wan)} frames out of wan0, expected the {len(acks_in)} ACKs")
    for i, ((ta, fin), (td, fout)) in enumerate(zip(acks_in, wan)):
        fails.expect(fout == rm.routed(fin, macs["wan0"], nh_remote),
                     f"wan0 frame #{i}: not ACK #{i} routed (INT or other bytes changed)")
        fails.expect(td >= ta, f"wan0 frame #{i}: departs before it arrived")
    verdicts = []   # (t, flow key, congested)
    for ta, f in acks_in:
        a = rm.decode(f, int_port)
        assert a is not None and a["echo"] and a["bth_opcode"] == rm.OP_ACK, "fixture ACK"
        rtt = ta - a["ts"]
        verdicts.append((ta - base, (a["ip_dst"], a["ip_src"], a["bth_destqp"]), rtt > thresh))
        print(f"reflex_ndt_queues: ACK at +{ta - base} ns QPN {a['bth_destqp']:#x}: RTT_dst {rtt} ns -> "
              f"{'Congested' if rtt > thresh else 'Normal'}")

    # Data in and out.
    pk = {}
    for port in ("wan0", "wan1"):
        for ta, f in inputs[port]:
            d = rm.decode(f, int_port)
            assert d is not None and rm.is_data(d) and d["conforms"], "fixture data"
            k = (d["qpn"], d["bth_psn"])
            assert k not in pk, "fixture keys must be unique"
            pk[k] = dict(arr=ta - base, f=f, flow=(d["ip_src"], d["ip_dst"], d["qpn"]), qpn=d["qpn"],
                         psn=d["bth_psn"], port=port, dep=None)
    out = rm.read_port(outdir, "dc0")
    order = []
    for j, (ts, f) in enumerate(out):
        where = f"dc0 frame #{j} (+{ts - base} ns)"
        d = rm.decode(f, int_port)
        if not fails.expect(d is not None and rm.is_data(d), f"{where}: not Reflex data ({len(f)} bytes)"):
            continue
        k = (d["qpn"], d["bth_psn"])
        p = pk.get(k)
        if not fails.expect(p is not None, f"{where}: matches no input (QPN {k[0]:#x} PSN {k[1]})"):
            continue
        if not fails.expect(p["dep"] is None, f"{where}: duplicate of QPN {k[0]:#x} PSN {k[1]}"):
            continue
        p["dep"], p["size"], p["idx"] = ts - base, len(f), j
        order.append(p)
        fails.expect(d["ts"] == ts, f"{where}: hop timestamp {d['ts']}, expected its departure time {ts}")
        want = rm.with_ts(rm.routed(p["f"], macs["dc0"], nh_local), ts)
        fails.expect(f == want, f"{where}: not the input (QPN {k[0]:#x} PSN {k[1]}) routed with the timestamp rewritten")
        fails.expect(d["conforms"], f"{where}: {d['problems']}")
        fails.expect(p["dep"] >= p["arr"], f"{where}: departs before it arrived (+{p['arr']} ns)")
    missing = [k for k, p in pk.items() if p["dep"] is None]
    fails.expect(not missing, f"{len(missing)} data packet(s) never left dc0: {[(hex(q), s) for q, s in missing[:8]]}")
    for q in sorted({p["qpn"] for p in order}):
        psns = [p["psn"] for p in order if p["qpn"] == q]
        fails.expect(psns == sorted(psns), f"flow QPN {q:#x} left dc0 out of PSN order: {psns}")

    # Serialization and work conservation on dc0.
    wire_in = max(rm.wire_ns(p["size"], rate[p["port"]]) for p in order) if order else 0
    margin = wire_in + 100
    for a, b in zip(order, order[1:]):
        w = rm.wire_ns(a["size"], rate["dc0"])
        gap = b["dep"] - a["dep"]
        fails.expect(gap >= w - 1, f"dc0 frames #{a['idx']}, #{b['idx']}: {gap} ns apart, wire time {w} ns")
        if b["arr"] + margin <= a["dep"] + w:
            fails.expect(gap <= w + 1, f"dc0 idle while backlogged: frames #{a['idx']}, #{b['idx']} {gap} ns apart")

    # Queue of each packet (None: too close to call).
    def verdict(flow, t):
        v, close = False, False
        for ta, f, cong in verdicts:
            if f != flow:
                continue
            if abs(t - ta) <= margin:
                close = True
            if ta < t:
                v = cong
        return None if close else v

    for p in sorted(pk.values(), key=lambda p: p["arr"]):
        cong = verdict(p["flow"], p["arr"])
        if cong is None:
            q = None
        elif cong:
            q = "C"
        else:
            # A Normal flow goes on to Controlled while an older packet of it waits there.
            older = [o for o in pk.values() if o["flow"] == p["flow"] and o["arr"] < p["arr"]]
            unsure = [o for o in older if o["q"] is None and (o["dep"] is None or o["dep"] > p["arr"] - margin)]
            ctl = [o for o in older if o["q"] == "C" and o["dep"] is not None]
            if any(o["dep"] > p["arr"] + margin for o in ctl):
                q = "C"
            elif unsure or any(o["dep"] > p["arr"] - margin for o in ctl):
                q = None
            else:
                q = "N"
        p["q"] = q
    n_c = sum(1 for p in pk.values() if p["q"] == "C")
    n_n = sum(1 for p in pk.values() if p["q"] == "N")
    n_u = sum(1 for p in pk.values() if p["q"] is None)
    held = [p for p in pk.values() if p["q"] == "C" and verdict(p["flow"], p["arr"]) is False]
    print(f"reflex_ndt_queues: {n_c} packets to Controlled ({len(held)} of a Normal flow held behind "
          f"older ones), {n_n} to Normal, {n_u} too close to call")
    fails.expect(n_c >= 10 and held, "the case should send at least 10 packets to Controlled, some held")

    # WRR N:1 at each scheduling decision.
    def backlog(t, q):
        return any(o["q"] == q and o["arr"] + margin <= t and o["dep"] is not None and o["dep"] >= t
                   for o in order)

    pattern = "".join({"C": "c", "N": "n", None: "?"}[p["q"]] for p in order)
    print(f"reflex_ndt_queues: dc0 departures by queue (c Controlled, n Normal): {pattern}")
    print("reflex_ndt_queues: by flow: " + "".join("A" if p["qpn"] == 0x000A01 else "B" for p in order))
    runs = exact = 0
    run = 0
    last_c = None          # index in `order` of the last Controlled departure
    both_since = True      # both queues backlogged at every decision since last_c
    for j, p in enumerate(order):
        t = p["dep"]
        bc, bn = backlog(t, "C"), backlog(t, "N")
        if p["q"] == "N":
            run = run + 1 if bc else 0
            if bc:
                runs += 1
                fails.expect(run <= n_thr, f"dc0 frame #{p['idx']}: {run} Normal departures in a row while "
                                           f"Controlled had backlog (N_throttle {n_thr})")
        elif p["q"] == "C":
            run = 0
            if j > 0 and order[j - 1]["q"] == "C" and bn:
                fails.add(f"dc0 frame #{p['idx']}: two Controlled departures in a row while Normal had backlog")
            if last_c is not None and both_since and bc and bn:
                between = sum(1 for o in order[last_c + 1:j] if o["q"] == "N")
                exact += 1
                fails.expect(between == n_thr, f"dc0 frame #{p['idx']}: {between} Normal departures between two "
                                               f"Controlled ones with both queues backlogged, expected {n_thr}")
            last_c, both_since = j, True
            continue
        else:
            run = 0
        both_since = both_since and bc and bn and p["q"] is not None
    print(f"reflex_ndt_queues: {exact} Controlled-to-Controlled intervals with both queues backlogged "
          f"(each needs {n_thr} Normal), {runs} Normal departures with Controlled backlog")
    fails.expect(exact >= MIN_EXACT, f"the 8:1 pattern was checkable only {exact} times (< {MIN_EXACT}): "
                                     f"the queues were not both backlogged long enough")
    fails.done()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
