#!/usr/bin/env python3
"""Writes Bifrost's simulations (paper 004, section VI-B) as `longhaul emulate` scenarios, for
`longhaul reproduce bifrost` (scenarios/papers/bifrost.toml: Figure 13, inter-DC traffic) and
`longhaul reproduce bifrost-a2a` (scenarios/papers/bifrost-a2a.toml: Figures 14 and 15,
all-to-all traffic):

- the topology of Figure 10 and "Topology settings": per DC a fat tree (k = 4: 4 pods of 2 ToR
  and 2 aggregation switches, 4 core switches), "Each Top-of-Rack (ToR) switch connects to 2
  servers, so there are 16 servers in one DC", "Each link in the fat-tree topology is 100 Gbps",
  one DCI switch "with every core switch connecting to it"; the DCIs joined by a 400 Gb/s link
  "600 kilometers long ... the one-way-delay of the long link is 3 ms"; ECMP;
- "PFC settings": in the DCs XOFF and XON 288 KB, "The headroom for each queue is 30 KB", "a 10
  MB shared buffer and a dynamic threshold of PFC by setting alpha to 4"; at the DCI the
  long-haul port's "PFC threshold ... 1 MB and a headroom of 286 MB. Shared buffer is disabled
  in DCI switch";
- "Bifrost settings": Bifrost on the long-haul ports of the DCIs only (the PFC above everywhere
  else), "The time slot T of Bifrost is configured to 10 us", "k is set to 1", H just above the
  long link's BDP ("The BDP of the long distance link is 286 MB. H is set to 287 MB");
- "DCQCN [44] is enabled in the experiments";
- FB_Hadoop traffic: Figure 13's "flows generated from 16 servers of DC A to 16 servers in DC
  B" at 30% and 70%, and Figure 14's all-to-all traffic "with some flows staying within DC and
  others sent across two DCs" at 50%.

Variants: `pfc` (classic PFC on the long link) and `bifrost`. Files: `VARIANT-inter-LOAD.toml`
(Figure 13) and `VARIANT-a2a-LOAD.toml` (Figures 14, 15). Two scales: 30 ms of arrivals (the
paper does not say how long; THEMIS's runs take 30 ms) and `quick/`: Figure 13 at 30% only, 10
ms of arrivals (with 3 ms most flows end within a round trip of the long link, before either
flow control acts: the two variants' FCTs were the same), all-to-all 3 ms.

Where the paper is silent or cannot be taken literally (docs/reproduce.md, "Bifrost"):
- units: MB and KB are binary (the long link's BDP, 400 Gb/s x 6 ms = 300e6 bytes, is the
  paper's "286 MB");
- H: 287 MiB is 59 KB short of Theorem 1's bound for D = 3 ms (BDP + 2 Rs T = 301e6 bytes), which
  longhaul refuses; H is that bound plus RTT/T + 1 frames (bifrost.md: no throughput loss);
- XON: XOFF less HPCC's 3 KB resume offset (our PFC needs XON below XOFF);
- the DCI of the `pfc` variant: our `[pfc]` thresholds are per switch, so every DCI port gets
  the long-haul port's 1 MB / 286 MB (the intra-DC ports' 288 KB / 30 KB in the `bifrost`
  variant, whose long link is Bifrost's);
- the load: each server's, of its own 100 Gb/s (HPCC's traffic generator, which the papers'
  NS-3 runs use). Figure 13's 16 senders then offer 480 Gb/s (30%) to 1.12 Tb/s (70%) to the
  400 Gb/s long link ("16 servers are enough to generate flows that fill up the link
  bandwidth"), and DCQCN holds them to it; all-to-all at 50% offers about 103% of the long link
  each way. (Read as a share of the long link instead, 30% leaves the fabric and the long link
  idle enough that neither flow control acts: PFC and Bifrost gave the same FCT to the flow.)
- intra-DC links 1 us (the HPCC simulator's; 30 KB of headroom is 100 Gb/s x 2.4 us); DCQCN and
  ECN as the THEMIS family (the HPCC simulator's parameters); a 1000-byte payload; no window.

    python3 scenarios/papers/gen_bifrost.py
"""
import os

import gen_themis
import twodc

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "bifrost")

KB, MB = 1024, 1024 * 1024
PODS = 4
TORS = 8                       # 2 per pod
CORES = 4
HOSTS_PER_TOR = 2
GBPS = 100
WAN_GBPS = 400
WAN_NS = 3_000_000             # 600 km
LINK_NS = twodc.LINK_NS
SLOT_NS = 10_000
XOFF, HEADROOM, SHARED = 288 * KB, 30 * KB, 10 * MB
WAN_XOFF, WAN_HEADROOM = 1 * MB, 286 * MB
PAYLOAD = 1000
FRAME = PAYLOAD + 58 + 24      # RoCE headers and wire overhead (largest frame on the wire)
INTER_LOADS = (30, 70)
A2A_LOADS = (50,)
# (dir, {experiment: (loads, arrivals us)}, duration us): the paper's scale and the quick one.
SCALES = (("", {"inter": (INTER_LOADS, 30_000), "a2a": (A2A_LOADS, 30_000)}, 200_000),
          ("quick/", {"inter": ((30,), 10_000), "a2a": (A2A_LOADS, 3_000)}, 60_000))


def host(dc, t, h):
    return ("dc%d-t%d-h%d" % (dc, t, h), twodc.ip(dc, t, h), twodc.host_mac(dc, t, h), "DC%d" % dc)


HOSTS = [host(dc, t, h) for dc in range(2) for t in range(TORS) for h in range(HOSTS_PER_TOR)]


def agg_mac(dc, a, p):
    return twodc.mac(dc, 0x50, a, p)


def core_mac(dc, c, p):
    return twodc.mac(dc, 0x60, c, p)


def dci_mac(dc, p):
    return twodc.esw_mac(dc, p)


def bifrost_section():
    bdp = WAN_GBPS * 10**9 * 2 * WAN_NS // 8 // 10**9
    bound = bdp + 2 * WAN_GBPS * 10**9 * SLOT_NS // 8 // 10**9
    h = bound + (2 * WAN_NS // SLOT_NS + 1) * FRAME
    return """
[bifrost]
ports = ["wan"]
priorities = [3]
slot_ns = %d                # T = 10 us
one_way_delay_ns = %d     # 600 km
buffer_bytes = %d       # H: Theorem 1's bound BDP + 2 Rs T plus RTT/T + 1 frames (paper: 287 MB)
k = 1
""" % (SLOT_NS, WAN_NS, h)


INTRA = twodc.Params("scenarios/papers/gen_bifrost.py (Bifrost section VI-B)",
                     leaf_esw_gbps=GBPS, buffer=None, pfc_alpha=4, ecn=gen_themis.ecn, esw={})
DCI_PFC = twodc.Params(INTRA.generator, GBPS, None, None, gen_themis.ecn, {})


def write_switches():
    """The switch configs into OUT/switches/; returns ({variant: [(switch, file)]}, links)."""
    os.makedirs(os.path.join(OUT, "switches"), exist_ok=True)
    common, links, dcis = [], [], {"pfc": [], "bifrost": []}

    def put(name, text):
        with open(os.path.join(OUT, "switches", name + ".toml"), "w") as f:
            f.write("# Generated by %s.\n" % INTRA.generator + text)
        return (name, "switches/%s.toml" % name)

    def intra(name, ports, routes, extra=""):
        buf = SHARED + len(ports) * HEADROOM
        return twodc.switch(INTRA, name, ports, routes, buffer=buf, headroom=HEADROOM,
                            xoff=XOFF, extra=extra)

    for dc in range(2):
        other = 1 - dc
        for t in range(TORS):
            pod = t // 2
            ports = [("h%d" % h, twodc.tor_mac(dc, t, h), GBPS) for h in range(HOSTS_PER_TOR)]
            ports += [("a%d" % j, twodc.tor_mac(dc, t, HOSTS_PER_TOR + j), GBPS) for j in range(2)]
            routes = [(twodc.ip(dc, t, h) + "/32", "h%d" % h, twodc.host_mac(dc, t, h))
                      for h in range(HOSTS_PER_TOR)]
            routes.append(("10.0.0.0/8", [("a%d" % j, agg_mac(dc, 2 * pod + j, t % 2))
                                          for j in range(2)]))
            name = "dc%d-tor%d" % (dc, t)
            common.append(put(name, intra(name, ports, routes)))
            for h in range(HOSTS_PER_TOR):
                links.append((host(dc, t, h)[0], "%s:h%d" % (name, h), LINK_NS, GBPS))
        for a in range(2 * PODS):
            pod, j = a // 2, a % 2
            ports = [("t%d" % i, agg_mac(dc, a, i), GBPS) for i in range(2)]
            ports += [("c%d" % k, agg_mac(dc, a, 2 + k), GBPS) for k in range(2)]
            routes = [("10.%d.%d.0/24" % (dc, 2 * pod + i), "t%d" % i,
                       twodc.tor_mac(dc, 2 * pod + i, HOSTS_PER_TOR + j)) for i in range(2)]
            routes.append(("10.0.0.0/8", [("c%d" % k, core_mac(dc, 2 * j + k, pod))
                                          for k in range(2)]))
            name = "dc%d-agg%d" % (dc, a)
            common.append(put(name, intra(name, ports, routes)))
            for i in range(2):
                links.append(("dc%d-tor%d:a%d" % (dc, 2 * pod + i, j), "%s:t%d" % (name, i),
                              LINK_NS, GBPS))
        for c in range(CORES):
            ports = [("p%d" % p, core_mac(dc, c, p), GBPS) for p in range(PODS)]
            ports.append(("dci", core_mac(dc, c, PODS), GBPS))
            routes = [("10.%d.%d.0/23" % (dc, 2 * p), "p%d" % p, agg_mac(dc, 2 * p + c // 2, 2 + c % 2))
                      for p in range(PODS)]
            routes.append(("10.%d.0.0/16" % other, "dci", dci_mac(dc, c)))
            name = "dc%d-core%d" % (dc, c)
            common.append(put(name, intra(name, ports, routes)))
            for p in range(PODS):
                links.append(("dc%d-agg%d:c%d" % (dc, 2 * p + c // 2, c % 2), "%s:p%d" % (name, p),
                              LINK_NS, GBPS))
        ports = [("c%d" % c, dci_mac(dc, c), GBPS) for c in range(CORES)]
        ports.append(("wan", dci_mac(dc, CORES), WAN_GBPS))
        routes = [("10.%d.0.0/16" % dc, [("c%d" % c, core_mac(dc, c, PODS)) for c in range(CORES)]),
                  ("10.%d.0.0/16" % other, "wan", dci_mac(other, CORES))]
        name = "dc%d-dci" % dc
        # Shared buffer disabled: the buffer is every (port, class)'s XOFF plus its headroom.
        pfc_buf = len(ports) * (WAN_XOFF + WAN_HEADROOM)
        dcis["pfc"].append((name, put(name + "-pfc", twodc.switch(
            DCI_PFC, name, ports, routes, buffer=pfc_buf, headroom=WAN_HEADROOM, xoff=WAN_XOFF))[1]))
        bif = bifrost_section()
        h = int(bif.split("buffer_bytes = ")[1].split()[0])
        dcis["bifrost"].append((name, put(name + "-bifrost", twodc.switch(
            DCI_PFC, name, ports, routes, buffer=CORES * (XOFF + HEADROOM) + h + XOFF,
            headroom=HEADROOM, xoff=XOFF, extra=bif))[1]))
        for c in range(CORES):
            links.append(("dc%d-core%d:dci" % (dc, c), "%s:c%d" % (name, c), LINK_NS, GBPS))
    links.append(("dc0-dci:wan", "dc1-dci:wan", WAN_NS, WAN_GBPS))
    return {v: common + d for v, d in dcis.items()}, links


def emulation():
    return ["mtu = %d" % PAYLOAD, "data_dscp = 26", "", gen_themis.DCQCN]


def main():
    switches, links = write_switches()
    senders = [h[0] for h in HOSTS if h[3] == "DC0"]
    receivers = [h[0] for h in HOSTS if h[3] == "DC1"]
    everyone = [h[0] for h in HOSTS]
    for sub, experiments, duration_us in SCALES:
        d = os.path.join(OUT, sub)
        os.makedirs(d, exist_ok=True)
        for variant in ("pfc", "bifrost"):
            what = "Bifrost on the long link" if variant == "bifrost" else "classic PFC on the long link"
            for kind, (loads, arrivals_us) in sorted(experiments.items()):
                for load in loads:
                    if kind == "inter":
                        traffic = [(senders, receivers, load / 100, "hadoop")]
                        title = "16 servers of DC A to 16 of DC B, FB_Hadoop at %d%% load" % load
                    else:
                        traffic = [(everyone, everyone, load / 100, "hadoop")]
                        title = "all-to-all FB_Hadoop at %d%% load" % load
                    comment = ["Generated by scenarios/papers/gen_bifrost.py: Bifrost (paper 004) section VI-B,",
                               "%s for %d ms, %s." % (title, arrivals_us // 1000, what)]
                    text = twodc.scenario(comment, ["duration_us = %d" % duration_us, "seed = 1"] + emulation(),
                                          switches[variant], links, None, arrivals_us,
                                          "../" if sub else "", hosts=HOSTS, traffic=traffic)
                    with open(os.path.join(d, "%s-%s-%d.toml" % (variant, kind, load)), "w") as f:
                        f.write(text)


if __name__ == "__main__":
    main()
