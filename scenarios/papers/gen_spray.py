#!/usr/bin/env python3
"""Writes Themis packet spraying's NS-3 evaluation (paper 002, section 6.2, Figures 12 and 16)
as `longhaul emulate` scenarios, for `longhaul reproduce spray`, `spray-a2a` and
`spray-failure`:

- "a 16x16 leaf-spine topology with 1:1 oversubscription ratio. All links operate at 200Gbps
  with 1us propagation delay, and each switch is equipped with a 64MB buffer. Each of the 16
  ToR switches connects to 16 NICs ... One ToR-to-spine link is configured with a specified
  packet loss rate" (here tor0's link to spine0, both ways);
- "The 256 NICs are divided into 16 communication groups, each containing 16 NICs, with each
  NIC in a group connected to a different ToR switch ... all 16 groups simultaneously initiate
  the same collective communication. The total traffic for one AllReduce operation is 1GB, and
  for AllToAll is 512MB" (read as each rank's buffer: a ring AllReduce of 1 GB, an AllToAll of
  512 MB split among the ranks; emulator/src/collective.rs);
- "All schemes use the CX7 RNIC's default TX window size of 512 packets. The timeout value is
  set to 4ms. For Themis, we set OOO_THRESHOLD to 448 and AVOIDANCE_WINDOW to 2x10^6";
  DCQCN with "(Kmin, Kmax, Pmax) = (800KB, 3200KB, 0.2)";
- the metric: "the slowest group's collective completion time (tail CCT)";
- link failure (section 6.3, Figure 16): "a link down event on one ToR-to-Spine link during
  collective communication".

Variants: `themis` (Themis-S and Themis-D at every ToR), `sr-spray` (the same PSN spraying
without Themis-D: RNIC-SR sees every NACK reordering makes; it stands in for the paper's SR-AR,
whose adaptive routing picks the shortest queue: both spread one flow's packets over every
path) and `sr-ecmp` (no spraying: ECMP by the 5-tuple). The hosts are RNIC-SR (out-of-order
placement, selective retransmission) in all three. TO-AR and ConWeave are not built.

Where the paper is silent (docs/reproduce.md, "Themis spraying"): the RNICs' DCQCN is the
HPCC simulator's (the paper's [45] is not given); the payload is 1000 bytes (HPCC's); PFC on,
on the switches' dynamic threshold (HPCC's default); the failure, at a quarter of the ideal
CCT and for good, takes the link's port out of the ECMP groups of the two switches at its ends
(no other switch's routes change).

Scale (the paper's 256 NICs and 1 GB per rank do not run here): a k x k leaf-spine with k NICs
per ToR, k groups of k, and each rank's buffer cut in the same proportion as the ranks; rates,
delays, window, timeout, thresholds and the per-switch buffer as the paper's. The full scale is
k = 8 with 16 MB (AllReduce) / 8 MB (AllToAll) per rank; `quick/` is k = 4 with 4 MB / 2 MB.

    python3 scenarios/papers/gen_spray.py
"""
import os

import gen_themis
import twodc

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "spray")

GBPS = 200
LINK_NS = 1000
PAYLOAD = 1000
# Loss on tor0 <-> spine0, in parts per million: 0, 0.001%, 0.01%, 0.1%, 1% (Figure 12's x).
LOSS_PPM = (0, 10, 100, 1000, 10000)
# (dir, k, AllReduce bytes per rank, AllToAll bytes per rank).
SCALES = (("", 8, 16 * 2**20, 8 * 2**20), ("quick/", 4, 4 * 2**20, 2 * 2**20))
QPN_REQ, QPN_RESP = 0x100, 0x800000   # the emulator's QPNs of flow i: requester, responder



def ip(t, h):
    return "10.0.%d.%d" % (t, h + 1)


def host(t, h):
    return "t%d-h%d" % (t, h)


def tor_mac(t, p):
    return twodc.mac(0, 0x20, t, p)


def spine_mac(s, p):
    return twodc.mac(0, 0x30, s, p)


def host_mac(t, h):
    return twodc.mac(0, 0x10, t, h)


PARAMS = twodc.Params(
    "scenarios/papers/gen_spray.py (Themis spraying section 6.2)",
    leaf_esw_gbps=GBPS,
    buffer=64 * 2**20,            # "each switch is equipped with a 64MB buffer"
    pfc_alpha=1,                  # HPCC's default dynamic threshold (the paper is silent)
    ecn=lambda gbps: (800_000, 3_200_000),   # (800KB, 3200KB, 0.2) "for 200Gbps link capacity"
    esw={})


def groups(k):
    """k groups of k ranks, rank t of group g on ToR t (each NIC of a group on another ToR)."""
    return [[(t, g) for t in range(k)] for g in range(k)]


def flows(k, kind):
    """(src, dst) of every flow, numbered as the emulator expands the collectives: group by
    group; AllReduce: step s, rank r -> r + 1; AllToAll: rank r -> r + j, j = 1..k-1."""
    out = []
    for g in groups(k):
        if kind == "allreduce":
            for _ in range(2 * (k - 1)):
                out += [(g[r], g[(r + 1) % k]) for r in range(k)]
        else:
            for r in range(k):
                out += [(g[r], g[(r + j) % k]) for j in range(1, k)]
    return out


def spray_section(k, t, kind, dest):
    """[spray] of ToR t: sources and destinations on it, every uplink a path."""
    s = ['', '[spray]', 'host_ports = [%s]' % ", ".join('"h%d"' % h for h in range(k)),
         'fabric_ports = [%s]' % ", ".join('"s%d"' % x for x in range(k)),
         'source = true', 'dest = %s' % ("true" if dest else "false"), 'mode = "port"',
         'window = 512', 'ooo_threshold = 448', 'avoidance_window = 2000000']
    qps = []
    for i, ((st, sh), (dt, dh)) in enumerate(flows(k, kind)):
        if st == t:
            qps.append((ip(st, sh), QPN_REQ + i, ip(dt, dh), QPN_RESP + i))
        if dt == t:
            qps.append((ip(dt, dh), QPN_RESP + i, ip(st, sh), QPN_REQ + i))
    s.append('qp_capacity = %d' % max(64, 1 << (len(qps) - 1).bit_length()))
    for x in range(k):
        s += ['', '[[spray.path_ports]]', 'port = "s%d"' % x, 'next_hop_mac = "%s"' % spine_mac(x, t)]
    for local, lq, remote, rq in qps:
        s += ['', '[[spray.qps]]', 'local = "%s"' % local, 'local_qpn = 0x%x' % lq,
              'remote = "%s"' % remote, 'remote_qpn = 0x%x' % rq]
    return "\n".join(s) + "\n"


def write_switches(d, k, kind):
    """The switch configs of one scale and workload; returns ({variant: [(switch, file)]},
    links)."""

    put = twodc.switch_writer(d, PARAMS.generator)

    per = {"themis": [], "sr-spray": [], "sr-ecmp": []}
    links = []
    for t in range(k):
        ports = [("h%d" % h, tor_mac(t, h), GBPS) for h in range(k)]
        ports += [("s%d" % x, tor_mac(t, k + x), GBPS) for x in range(k)]
        routes = [(ip(t, h) + "/32", "h%d" % h, host_mac(t, h)) for h in range(k)]
        routes.append(("10.0.0.0/16", [("s%d" % x, spine_mac(x, t)) for x in range(k)]))
        name = "tor%d" % t
        base = twodc.switch(PARAMS, name, ports, routes)
        per["sr-ecmp"].append((name, put("%s-%s-ecmp" % (name, kind), base)))
        for v, dest in (("themis", True), ("sr-spray", False)):
            text = twodc.switch(PARAMS, name, ports, routes, pipeline="spray",
                                extra=spray_section(k, t, kind, dest))
            per[v].append((name, put("%s-%s-%s" % (name, kind, v), text)))
        for h in range(k):
            links.append((host(t, h), "%s:h%d" % (name, h)))
    for x in range(k):
        ports = [("t%d" % t, spine_mac(x, t), GBPS) for t in range(k)]
        routes = [("10.0.%d.0/24" % t, "t%d" % t, tor_mac(t, k + x)) for t in range(k)]
        name = "spine%d" % x
        f = put(name, twodc.switch(PARAMS, name, ports, routes))
        for v in per:
            per[v].append((name, f))
        for t in range(k):
            links.append(("tor%d:s%d" % (t, x), "%s:t%d" % (name, t)))
    return per, links


def scenario(k, kind, nbytes, variant, switches, links, loss_ppm, fail_us, up):
    what = {"themis": "Themis-S and Themis-D at every ToR",
            "sr-spray": "PSN spraying without Themis-D (RNIC-SR sees every NACK)",
            "sr-ecmp": "ECMP, no spraying"}[variant]
    s = ["# Generated by scenarios/papers/gen_spray.py: Themis spraying (paper 002) section 6.2,",
         "# %dx%d leaf-spine, %d NICs per ToR, %d %s groups of %d bytes per rank, %s;" % (
             k, k, k, k, kind, nbytes, what),
         "# loss %g%% on tor0 <-> spine0%s." % (loss_ppm / 1e4, (", which fails at %d us" % fail_us) if fail_us else ""),
         "", "[emulation]", "duration_us = 100000", "seed = 1", "mtu = %d" % PAYLOAD,
         "window = 512                  # the CX7's default TX window",
         "rto_us = 4000                 # \"The timeout value is set to 4ms\"",
         'responder = "selective"       # RNIC-SR: out-of-order placement',
         'requester = "selective"       # RNIC-SR: the NAKed packet again, then on',
         "data_dscp = 26", "control_dscp = 48", "", gen_themis.DCQCN]
    for t in range(k):
        for h in range(k):
            s += ["[[hosts]]", 'name = "%s"' % host(t, h), 'ip = "%s"' % ip(t, h),
                  'mac = "%s"' % host_mac(t, h), "rate_gbps = %d" % GBPS, ""]
    for name, cfg in switches:
        s += ["[[switches]]", 'name = "%s"' % name, 'config = "%s%s"' % (up, cfg), ""]
    for a, b in links:
        s += ["[[links]]", 'a = "%s"' % a, 'b = "%s"' % b, "rate_gbps = %d" % GBPS,
              "delay_ns = %d" % LINK_NS]
        if loss_ppm and a == "tor0:s0":
            s.append("loss = %g" % (loss_ppm / 1e6))
        s.append("")
    for g, members in enumerate(groups(k)):
        s += ["[[collectives]]", 'name = "group%d"' % g, 'kind = "%s"' % kind,
              "ranks = [%s]" % ", ".join('"%s"' % host(t, h) for t, h in members),
              "bytes = %d" % nbytes, ""]
    if fail_us:
        s += ["[[link_failures]]", 'link = "tor0:s0"', "at_us = %d" % fail_us, ""]
    return "\n".join(s)


def ideal_cct_us(k, kind, nbytes):
    """Each rank's bytes at line rate (a lower bound of the CCT)."""
    sent = nbytes * 2 * (k - 1) / k if kind == "allreduce" else nbytes * (k - 1) / k
    return sent * 8 / (GBPS * 1e3)


def main():
    for sub, k, ar_bytes, a2a_bytes in SCALES:
        for kind, nbytes in (("allreduce", ar_bytes), ("alltoall", a2a_bytes)):
            d = os.path.join(OUT, sub)
            per, links = write_switches(d, k, kind)
            up = ""
            for variant in per:
                for loss in LOSS_PPM:
                    text = scenario(k, kind, nbytes, variant, per[variant], links, loss, 0, up)
                    with open(os.path.join(d, "%s-%s-%d.toml" % (variant, kind, loss)), "w") as f:
                        f.write(text)
            if kind == "allreduce":
                fail_us = max(1, int(ideal_cct_us(k, kind, nbytes) / 4))
                text = scenario(k, kind, nbytes, "themis", per["themis"], links, 0, fail_us, up)
                with open(os.path.join(d, "themis-failure-%s-0.toml" % kind), "w") as f:
                    f.write(text)


if __name__ == "__main__":
    main()
