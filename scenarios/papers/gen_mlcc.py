#!/usr/bin/env python3
"""Writes MLCC's NS-3 evaluation (paper 001, section 5.1, Figures 11 and 12) as `longhaul
emulate` scenarios, for `longhaul reproduce mlcc`:

- "Each datacenter has two spines and four leaves. The capacity of all switch-to-switch links
  is 100 Gbps, and the capacity of server-to-switch links is 25 Gbps, leading to 4 : 1
  oversubscription" (so 32 servers per leaf: 4 x 25 Gb/s per 100 Gb/s of the leaf's two
  uplinks), a DCI behind both spines of each DC, the DCIs joined by one 100 Gb/s link;
- "The propagation delay of server-to-switch is 1 us, and the propagation delay of other links
  in the datacenter is 5 us. The propagation delay of long-distance links is 3 ms";
- "The buffer sizes of the switches within the datacenter and the DCI-switches are 22 MB and
  128 MB";
- WebSearch and Hadoop, "Heavy load refers to 50% intra-datacenter traffic and 20%
  cross-datacenter traffic", light load 30% + 10%;
- DCQCN against MLCC (INT at the leaves and spines, MLCC at both DCIs: near-source feedback,
  per-flow queues with the credit loop and DQM at the paper's section 4.1 values, MLCC's host
  side on every server).

Where the paper is silent (docs/reproduce.md, "MLCC"):
- the load: read as the HPCC simulator's traffic generator reads it (and gen_bifrost.py here),
  a share of each server's NIC: every server sends Poisson flows at 50% (heavy) or 30% (light)
  of 25 Gb/s to the other servers of its DC, and at 20% or 10% to the servers of the other DC.
  The network cannot carry that for long: the intra-DC flows ask about 1.5x of the leaves'
  uplinks (4:1 oversubscription, three quarters of them leave their leaf) and the cross-DC ones
  6.4x of the 100 Gb/s DCI link, so the runs are bursts of overload the flows drain after;
  `TIER=1` writes the other reading (each load a share of the tier it crosses: the leaves'
  uplinks, the DCI link) into `tier/`, for the comparison in docs/reproduce.md;
- DCQCN's parameters and the ECN thresholds: the HPCC simulator's (KMIN 4 KB and KMAX 16 KB
  per Gb/s of the port, Pmax 0.2, marked at dequeue);
- PFC on the dynamic threshold (alpha 1, HPCC's default); the DCIs' long port gets the
  headroom a pause of the 3 ms link needs (2 x delay x rate), on top of the 128 MB shared.

Scales: the paper's network with 10 ms of arrivals, and `quick/`: the same network with 1 ms
of arrivals, heavy load only (a slice with fewer servers would need switch links slower than a
server's, which changes what one flow can do to a link). Files: `VARIANT-CDF-INTRA.toml` (INTRA: the intra-DC load, 50 heavy, 30
light).

    python3 scenarios/papers/gen_mlcc.py
"""
import os

import gen_themis
import twodc

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "mlcc")

HOST_GBPS = 25
SERVER_NS = 1000
DC_NS = 5000
WAN_NS = 3_000_000
LEAFS = 4
SPINES = 2
PAYLOAD = 1000
# (name, intra-DC load, cross-DC load), percent.
LOADS = (("heavy", 50, 20), ("light", 30, 10))
# (dir, servers per leaf, switch-link Gb/s, buffer scale, arrivals us, loads, CDFs).
SCALES = (("", 32, 100, 1, 10_000, ("heavy", "light"), ("websearch", "hadoop")),
          ("quick/", 32, 100, 1, 1_000, ("heavy",), ("websearch", "hadoop")))
# TIER=1: each load a share of the tier it crosses (see the docstring), into tier/.
TIER = os.environ.get("TIER") == "1"
DC_BUFFER = 22 * 2**20
DCI_BUFFER = 128 * 2**20



def ecn(gbps):
    """HPCC's KMIN/KMAX maps: 4 KB and 16 KB per Gb/s of the port."""
    return (int(4000 * gbps), int(16000 * gbps))


def ip(dc, l, h):
    return "10.%d.%d.%d" % (dc, l, h + 1)


def host(dc, l, h):
    return "dc%d-l%d-h%d" % (dc, l, h)


def leaf_mac(dc, l, p):
    return twodc.mac(dc, 0x20, l, p)


def spine_mac(dc, s, p):
    return twodc.mac(dc, 0x30, s, p)


def dci_mac(dc, p):
    return twodc.mac(dc, 0x40, 0, p)


def host_mac(dc, l, h):
    return twodc.mac(dc, 0x10, l, h)


def int_section(switch_id, ports=None):
    s = "\n[int]\nswitch_id = %d\nudp_port = 5000\nmax_hops = 4\n" % switch_id
    if ports:
        s += "ports = [%s]\n" % ", ".join('"%s"' % p for p in ports)
    return s


def mlcc_section(dc, servers, fabric_gbps):
    """MLCC at a DCI (section 4.1's values: theta 18 ms, D_t 1 ms, m 5, alpha 0.5). The paper
    does not size the per-flow queues: 8 per server of the DC, each up to an eighth of the
    DCI's 128 MB (16 MB, 16384 packets)."""
    dc_ports = ", ".join('"s%d"' % s for s in range(SPINES))
    return """
[mlcc]
dc_ports = [%s]
wan_ports = ["wan"]
int_udp_port = 5000

[mlcc.feedback]
dscp = 48

[mlcc.receiver]
max_flows = %d
queue_pkts = %d
queue_bytes = %d
initial_rate_gbps = %d
theta_ns = 18000000
d_t_ns = 1000000
m = 5
alpha = 0.5
rtt_c_ns = %d
rtt_d_ns = %d
mtu_bytes = %d
""" % (dc_ports, 8 * servers, 16384, DCI_BUFFER // 8, HOST_GBPS, 2 * WAN_NS,
       2 * (SERVER_NS + 2 * DC_NS) + 4000, PAYLOAD)


def params(buffer_div):
    return twodc.Params("scenarios/papers/gen_mlcc.py (MLCC section 5.1)", leaf_esw_gbps=None,
                        buffer=DC_BUFFER // buffer_div, pfc_alpha=1, ecn=ecn, esw={})


def write_switches(d, servers, fabric, buffer_div):
    """Every switch config of one scale; returns ({variant: [(switch, file)]}, links)."""
    p = params(buffer_div)

    put = twodc.switch_writer(d, p.generator)

    per = {"dcqcn": [], "mlcc": []}
    links = []
    for dc in range(2):
        other = 1 - dc
        for l in range(LEAFS):
            ports = [("h%d" % h, leaf_mac(dc, l, h), HOST_GBPS) for h in range(servers)]
            ports += [("s%d" % s, leaf_mac(dc, l, servers + s), fabric) for s in range(SPINES)]
            routes = [(ip(dc, l, h) + "/32", "h%d" % h, host_mac(dc, l, h)) for h in range(servers)]
            routes.append(("10.0.0.0/8", [("s%d" % s, spine_mac(dc, s, l)) for s in range(SPINES)]))
            name = "dc%d-leaf%d" % (dc, l)
            hr = 3 * fabric * 10**9 * DC_NS // 8 // 10**9
            per["dcqcn"].append((name, put(name + "-dcqcn", twodc.switch(p, name, ports, routes, headroom=hr))))
            per["mlcc"].append((name, put(name + "-mlcc", twodc.switch(
                p, name, ports, routes, headroom=hr, extra=int_section(dc * 100 + l)))))
            for h in range(servers):
                links.append((host(dc, l, h), "%s:h%d" % (name, h), SERVER_NS, HOST_GBPS))
        for s in range(SPINES):
            ports = [("l%d" % l, spine_mac(dc, s, l), fabric) for l in range(LEAFS)]
            ports.append(("dci", spine_mac(dc, s, LEAFS), fabric))
            routes = [("10.%d.%d.0/24" % (dc, l), "l%d" % l, leaf_mac(dc, l, servers + s)) for l in range(LEAFS)]
            routes.append(("10.%d.0.0/16" % other, "dci", dci_mac(dc, s)))
            name = "dc%d-spine%d" % (dc, s)
            hr = 3 * fabric * 10**9 * DC_NS // 8 // 10**9
            per["dcqcn"].append((name, put(name + "-dcqcn", twodc.switch(p, name, ports, routes, headroom=hr))))
            per["mlcc"].append((name, put(name + "-mlcc", twodc.switch(
                p, name, ports, routes, headroom=hr, extra=int_section(dc * 100 + 10 + s)))))
            for l in range(LEAFS):
                links.append(("dc%d-leaf%d:s%d" % (dc, l, s), "%s:l%d" % (name, l), DC_NS, fabric))
        ports = [("s%d" % s, dci_mac(dc, s), fabric) for s in range(SPINES)]
        ports.append(("wan", dci_mac(dc, SPINES), fabric))
        routes = [("10.%d.0.0/16" % dc, [("s%d" % s, spine_mac(dc, s, LEAFS)) for s in range(SPINES)]),
                  ("10.%d.0.0/16" % other, "wan", dci_mac(other, SPINES))]
        hdrm = int(2 * WAN_NS * fabric * 10**9 // 8 // 10**9) + 2 * 1500
        buf = DCI_BUFFER // buffer_div + len(ports) * hdrm
        name = "dc%d-dci" % dc
        per["dcqcn"].append((name, put(name + "-dcqcn", twodc.switch(
            p, name, ports, routes, buffer=buf, headroom=hdrm))))
        mlcc = twodc.switch(p, name, ports, routes, pipeline="mlcc", buffer=buf, headroom=hdrm,
                            extra=int_section(dc * 100 + 20, ["s%d" % s for s in range(SPINES)])
                            + mlcc_section(dc, servers, fabric))
        per["mlcc"].append((name, put(name + "-mlcc", mlcc)))
        for s in range(SPINES):
            links.append(("dc%d-spine%d:dci" % (dc, s), "%s:s%d" % (name, s), DC_NS, fabric))
    links.append(("dc0-dci:wan", "dc1-dci:wan", WAN_NS, fabric))
    return per, links


def main():
    for sub, servers, fabric, div, arrivals_us, loads, cdfs in SCALES:
        d = os.path.join(OUT, "tier/" + sub if TIER else sub)
        per, links = write_switches(d, servers, fabric, div)
        hosts = [(host(dc, l, h), ip(dc, l, h), host_mac(dc, l, h), "DC%d" % dc)
                 for dc in range(2) for l in range(LEAFS) for h in range(servers)]
        dcs = [[x[0] for x in hosts if x[3] == "DC%d" % dc] for dc in range(2)]
        n = len(dcs[0])
        for lname, intra, cross in LOADS:
            if lname not in loads:
                continue
            for cdf in cdfs:
                # A share of each server's NIC; TIER: of the leaf's uplinks (25 / 4 Gb/s per
                # server) and of the long link (its rate / the DC's servers).
                intra_load = intra / 100 / (4 if TIER else 1)
                cross_load = cross / 100 * (fabric / (n * HOST_GBPS) if TIER else 1)
                traffic = []
                for dc in range(2):
                    traffic.append((dcs[dc], dcs[dc], "%.6f" % intra_load, cdf))
                    traffic.append((dcs[dc], dcs[1 - dc], "%.6f" % cross_load, cdf))
                for variant in ("dcqcn", "mlcc"):
                    comment = ["Generated by scenarios/papers/gen_mlcc.py: MLCC (paper 001) section 5.1,",
                               "%s at %s load (%d%% intra-DC + %d%% cross-DC), %d servers per leaf, %s." % (
                                   cdf, lname, intra, cross, servers,
                                   "MLCC at the DCIs, INT at leaves and spines" if variant == "mlcc"
                                   else "DCQCN alone")]
                    emulation = ["duration_us = %d" % (arrivals_us + 20_000), "seed = 1",
                                 "mtu = %d" % PAYLOAD, "data_dscp = 26", "control_dscp = 48"]
                    if variant == "mlcc":
                        emulation.append('host_agents = ["mlcc"]       # MLCC\'s host side')
                    text = scenario(comment, emulation + ["", gen_themis.DCQCN], per[variant], links,
                                    hosts, traffic, arrivals_us)
                    with open(os.path.join(d, "%s-%s-%d.toml" % (variant, cdf, intra)), "w") as f:
                        f.write(text)


def scenario(comment, emulation, switches, links, hosts, traffic, arrivals_us):
    s = ["# " + c for c in comment] + ["", "[emulation]"] + emulation
    for hn, hip, hmac, dc in hosts:
        s += ["[[hosts]]", 'name = "%s"' % hn, 'ip = "%s"' % hip, 'mac = "%s"' % hmac,
              "rate_gbps = %d" % HOST_GBPS, 'dc = "%s"' % dc, ""]
    for name, cfg in switches:
        s += ["[[switches]]", 'name = "%s"' % name, 'config = "%s"' % cfg, ""]
    for a, b, ns, gbps in links:
        s += ["[[links]]", 'a = "%s"' % a, 'b = "%s"' % b, "rate_gbps = %g" % gbps,
              "delay_ns = %d" % ns, ""]
    for src, dst, ld, cdf in traffic:
        s += ["[[traffic]]", "sources = [%s]" % ", ".join('"%s"' % h for h in src),
              "destinations = [%s]" % ", ".join('"%s"' % h for h in dst),
              "load = %s" % ld, 'cdf = "%s"' % cdf, "stop_us = %d" % arrivals_us, ""]
    return "\n".join(s)


if __name__ == "__main__":
    main()
