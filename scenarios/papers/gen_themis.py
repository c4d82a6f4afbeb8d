#!/usr/bin/env python3
"""Writes THEMIS's main evaluation (paper 000, section VII-A "THEMIS Setup") as `longhaul
emulate` scenarios, for `longhaul reproduce themis` (reproduce/themis.toml):

- the topology of Figure 1 and section VII-A: two DCs, each with 4 ToR and 4 Leaf switches in
  full mesh, 4 servers per ToR (32 servers in all), and one ESW per DC behind the Leafs; the ESWs
  500 us apart. Link rates and delays are those of the THEMIS authors' NS-3 input
  (Networked-System-and-Security-Group/Themis, NS3/simulation/mix/mix_30%_0.03s/topology.txt):
  100 Gb/s server and ToR-Leaf links, 400 Gb/s Leaf-ESW links, a 1.6 Tb/s ESW-ESW link, 1 us per
  link inside a DC ("The maximum RTT within a DC is 8 microseconds, while the maximum RTT between
  DCs is 1012 microseconds");
- 16 MB of buffer per switch, PFC on a dynamic threshold "when an ingress queue consumes more
  than 11% of the available buffer" (dynamic_alpha 0.11), ECMP;
- WebSearch traffic at 30, 50 and 70% load: every server sends Poisson flows to the 31 others
  (about half of them in the other DC, as in the authors' flow files: 1110 of 2133 inter-DC at
  30%), for 30 ms (the authors' `mix_*_0.03s` runs);
- DCQCN "with the parameters from HPCC": the values of the authors' config.txt (RP_TIMER 900,
  RATE_AI 50 Mb/s, RATE_HAI 100 Mb/s, MIN_RATE 100 Mb/s, EWMA_GAIN 1/256, one fast-recovery
  stage), their ECN maps (KMIN/KMAX 400/1600 KB at 100 Gb/s, 800/6400 KB at 400 Gb/s, Pmax 0.2),
  marked at dequeue as in their switch model, ACKs and CNPs in the data queue at switches.

Two variants per load: `dcqcn-LOAD.toml` (commodity ESWs) and `themis-LOAD.toml` (THEMIS at both
ESWs, every server running the THEMIS daemon). Two scales: the paper's (30 ms of arrivals) and
`quick/` (the same network, 3 ms of arrivals: the seconds-long run CI checks directions on).

Where the paper is silent (docs/themis.md, "Main evaluation"):
- the ESWs: the paper's 16 MB cannot hold what a paused 1.6 Tb/s x 500 us link still delivers
  (200 MB), and the authors' NS-3 switch model never pauses that link (its headroom, 3 x rate x
  delay, exceeds the buffer); the ESWs here get a deep buffer ("ESWs typically have deep buffer",
  section VII, Figure 13: up to 70 MB used by TRP), 16 MB shared plus the long link's headroom, so
  that the WAN is lossless as the paper's results imply;
- TRP's recirculation port runs at 100 Gb/s; PNP's cnp_interval and TRP's alpha/beta are
  those of scenarios/switches/esw-a-themis.toml (docs/themis.md cites them).

    python3 scenarios/papers/gen_themis.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "themis")

DCS = 2
TORS = 4
LEAFS = 4
HOSTS_PER_TOR = 4
HOST_GBPS = 100
LEAF_ESW_GBPS = 400
WAN_GBPS = 1600
LINK_NS = 1000
WAN_NS = 500_000
PAYLOAD = 1000                   # PACKET_PAYLOAD_SIZE
BUFFER = 16 * 2**20              # "All switches in the topology have a buffer capacity of 16MB"
PFC_ALPHA = 0.11                 # "more than 11% of the available buffer"
RESUME_OFFSET = 3 * 1024         # HPCC's SwitchMmu: resume 3 KB below the threshold
LOADS = (30, 50, 70)
SCALES = (("", 30_000, 120_000), ("quick/", 3_000, 40_000))  # (dir, arrivals us, duration us)

DCQCN = """[emulation.dcqcn]            # the THEMIS authors' config.txt (HPCC's DCQCN)
alpha_resume_interval_us = 1  # ALPHA_RESUME_INTERVAL 1
rate_decrease_interval_us = 4 # RATE_DECREASE_INTERVAL 4
rp_timer_us = 900             # RP_TIMER 900
g = 0.00390625                # EWMA_GAIN 1/256
fast_recovery_times = 1       # FAST_RECOVERY_TIMES 1
rate_ai_mbps = 50             # RATE_AI 50Mb/s
rate_hai_mbps = 100           # RATE_HAI 100Mb/s
min_rate_mbps = 100           # MIN_RATE 100Mb/s
"""


def ecn(gbps):
    """The authors' KMIN_MAP / KMAX_MAP (KB, x 1000 in HPCC's switch-mmu.cc) by port rate."""
    return {100: (400_000, 1_600_000), 400: (800_000, 6_400_000),
            1600: (1_600_000, 25_600_000)}[gbps]


def mac(dc, kind, a, b):
    return "02:%02x:%02x:%02x:%02x:00" % (dc, kind, a, b)


def host_mac(dc, t, h):
    return mac(dc, 0x10, t, h)


def tor_mac(dc, t, p):
    return mac(dc, 0x20, t, p)


def leaf_mac(dc, l, p):
    return mac(dc, 0x30, l, p)


def esw_mac(dc, p):
    return mac(dc, 0x40, 0, p)


def ip(dc, t, h):
    return "10.%d.%d.%d" % (dc, t, h + 1)


def switch(name, ports, routes, pipeline="baseline", buffer=BUFFER, headroom=None, extra=""):
    """ports: (name, mac, Gb/s); routes: (prefix, port, next-hop MAC) or (prefix, [(port, MAC)])
    for an ECMP group. ECN at the thresholds of the switch's slowest port (where its queues
    build); the headroom HPCC's third.cc gives a port, 3 x its rate x its link's delay, at the
    fastest port, unless given."""
    rates = [p[2] for p in ports]
    kmin, kmax = ecn(min(rates))
    if headroom is None:
        headroom = 3 * max(rates) * 10**9 * LINK_NS // 8 // 10**9
    xoff = buffer - len(ports) * headroom
    s = ['[switch]', 'name = "%s"' % name, 'pipeline = "%s"' % pipeline,
         'pool_buffers = %d' % min(max(65536, buffer // 1024), 262144), 'buffer_data_room = 2048',
         'buffer_bytes = %d' % buffer, 'seed = 1', 'ecmp_seed = %d' % (len(name) + sum(map(ord, name)))]
    for i, (pn, pm, g) in enumerate(ports):
        s += ['', '[[ports]]', 'id = %d' % i, 'name = "%s"' % pn, 'mac = "%s"' % pm,
              'rate_gbps = %d' % g, 'mtu = 1500']
    s += ['', '[qos]', 'trust = "dscp"', 'default_class = 0', 'dscp_map = { "26" = 3, "48" = 6 }',
          'scheduler = "drr"', 'strict_classes = [6, 7]', 'weights = [1, 1, 1, 4, 1, 1, 1, 1]',
          'drr_quantum_bytes = 4224', 'queue_limit_bytes = 1048576',
          '', '[[qos.classes]]', 'class = 3', 'lossless = true', 'limit_bytes = %d' % buffer,
          'ecn = { kmin_bytes = %d, kmax_bytes = %d, pmax = 0.2, at = "dequeue" }' % (kmin, kmax),
          '', '[[qos.classes]]', 'class = 6', 'limit_bytes = 262144',
          '', '[pfc]', 'enabled = true',
          'xoff_bytes = %d' % xoff, 'xon_bytes = %d' % (xoff - RESUME_OFFSET),
          'dynamic_alpha = %s' % PFC_ALPHA, 'headroom_bytes = %d' % headroom,
          'pause_quanta = 65535',
          # HPCC holds a pause until RESUME: refresh at 90% of the pause at the fastest port.
          'refresh_ns = %d' % (65535 * 512 * 9 // (10 * max(rates)))]
    for r in routes:
        if isinstance(r[1], list):
            members = ", ".join('{ port = "%s", next_hop_mac = "%s" }' % m for m in r[1])
            s += ['', '[[routes]]', 'prefix = "%s"' % r[0], 'next_hops = [%s]' % members]
        else:
            s += ['', '[[routes]]', 'prefix = "%s"' % r[0], 'port = "%s"' % r[1],
                  'next_hop_mac = "%s"' % r[2]]
    return "\n".join(s) + "\n" + extra


def themis_section(dc):
    other = 1 - dc
    return """
[themis]
dc_ports = [%s]
wan_ports = ["wan"]

[themis.pnp]
cnp_interval_ns = 50000
cnp_dscp = 48
host_prefixes = ["10.%d.0.0/16"]
inter_dc_prefixes = ["10.%d.0.0/16"]

[themis.trp]
alpha = 5
beta_ns = 500000
recirc_rate_gbps = 100.0
loop_delay_ns = 2000
recirc_capacity_pkts = 65536
""" % (", ".join('"l%d"' % l for l in range(LEAFS)), dc, other)


def write_switches(out):
    """Every switch config; returns [(name, file)] for the commodity and THEMIS variants."""
    os.makedirs(os.path.join(out, "switches"), exist_ok=True)
    plain, themis, links = [], [], []

    def put(name, text):
        with open(os.path.join(out, "switches", name + ".toml"), "w") as f:
            f.write("# Generated by scenarios/papers/gen_themis.py (THEMIS section VII-A).\n" + text)
        return (name, "switches/%s.toml" % name)

    for dc in range(DCS):
        other = 1 - dc
        for t in range(TORS):
            ports = [("h%d" % h, tor_mac(dc, t, h), HOST_GBPS) for h in range(HOSTS_PER_TOR)]
            ports += [("l%d" % l, tor_mac(dc, t, HOSTS_PER_TOR + l), HOST_GBPS) for l in range(LEAFS)]
            routes = [(ip(dc, t, h) + "/32", "h%d" % h, host_mac(dc, t, h)) for h in range(HOSTS_PER_TOR)]
            routes.append(("10.0.0.0/8", [("l%d" % l, leaf_mac(dc, l, t)) for l in range(LEAFS)]))
            sw = put("dc%d-tor%d" % (dc, t), switch("dc%d-tor%d" % (dc, t), ports, routes))
            plain.append(sw)
            themis.append(sw)
            for h in range(HOSTS_PER_TOR):
                links.append(("dc%d-t%d-h%d" % (dc, t, h), "dc%d-tor%d:h%d" % (dc, t, h), LINK_NS, HOST_GBPS))
        for l in range(LEAFS):
            ports = [("t%d" % t, leaf_mac(dc, l, t), HOST_GBPS) for t in range(TORS)]
            ports.append(("esw", leaf_mac(dc, l, TORS), LEAF_ESW_GBPS))
            routes = [("10.%d.%d.0/24" % (dc, t), "t%d" % t, tor_mac(dc, t, HOSTS_PER_TOR + l)) for t in range(TORS)]
            routes.append(("10.%d.0.0/16" % other, "esw", esw_mac(dc, l)))
            sw = put("dc%d-leaf%d" % (dc, l), switch("dc%d-leaf%d" % (dc, l), ports, routes))
            plain.append(sw)
            themis.append(sw)
            for t in range(TORS):
                links.append(("dc%d-tor%d:l%d" % (dc, t, l), "dc%d-leaf%d:t%d" % (dc, l, t), LINK_NS, HOST_GBPS))
        ports = [("l%d" % l, esw_mac(dc, l), LEAF_ESW_GBPS) for l in range(LEAFS)]
        ports.append(("wan", esw_mac(dc, LEAFS), WAN_GBPS))
        routes = [("10.%d.0.0/16" % dc, [("l%d" % l, leaf_mac(dc, l, TORS)) for l in range(LEAFS)]),
                  ("10.%d.0.0/16" % other, "wan", esw_mac(other, LEAFS))]
        # Deep buffer: 16 MB shared plus, per port, the long link's headroom (2 x one-way delay
        # x 1.6 Tb/s and two frames), so that a pause of the WAN loses nothing.
        hdrm = 2 * WAN_NS * WAN_GBPS // 8 + 2 * 1500
        buf = BUFFER + len(ports) * hdrm
        name = "dc%d-esw" % dc
        plain.append(put(name, switch(name, ports, routes, buffer=buf, headroom=hdrm)))
        themis.append(put(name + "-themis", switch(name, ports, routes, "themis", buf, hdrm,
                                                   themis_section(dc))))
        for l in range(LEAFS):
            links.append(("dc%d-leaf%d:esw" % (dc, l), "%s:l%d" % (name, l), LINK_NS, LEAF_ESW_GBPS))
    links.append(("dc0-esw:wan", "dc1-esw:wan", WAN_NS, WAN_GBPS))
    return plain, themis, links


def main():
    plain, themis, links = write_switches(OUT)
    hosts = [("dc%d-t%d-h%d" % (dc, t, h), ip(dc, t, h), host_mac(dc, t, h), "DC%d" % dc)
             for dc in range(DCS) for t in range(TORS) for h in range(HOSTS_PER_TOR)]
    for sub, arrivals_us, duration_us in SCALES:
        d = os.path.join(OUT, sub)
        os.makedirs(d, exist_ok=True)
        up = "../" if sub else ""
        for load in LOADS:
            for variant, switches in (("dcqcn", plain), ("themis", themis)):
                s = ["# Generated by scenarios/papers/gen_themis.py: THEMIS (paper 000) section VII-A,",
                     "# WebSearch at %d%% load for %d ms, %s." % (
                         load, arrivals_us // 1000,
                         "THEMIS at both ESWs" if variant == "themis" else "commodity ESWs (DCQCN alone)"),
                     "", "[emulation]", "duration_us = %d" % duration_us, "seed = 1",
                     "mtu = %d" % PAYLOAD,
                     "data_dscp = 26",
                     "control_dscp = 26             # ACKs and CNPs in the data queue, as the authors' switches"]
                if variant == "themis":
                    s.append('host_agents = ["themis"]      # the THEMIS daemon (QPs reported to the ESW)')
                s += ["", DCQCN]
                for hn, hip, hmac, dc in hosts:
                    s += ["[[hosts]]", 'name = "%s"' % hn, 'ip = "%s"' % hip, 'mac = "%s"' % hmac,
                          "rate_gbps = %d" % HOST_GBPS, 'dc = "%s"' % dc, ""]
                for name, cfg in switches:
                    s += ["[[switches]]", 'name = "%s"' % name.replace("-themis", ""),
                          'config = "%s%s"' % (up, cfg), ""]
                for a, b, ns, gbps in links:
                    s += ["[[links]]", 'a = "%s"' % a, 'b = "%s"' % b, "rate_gbps = %d" % gbps,
                          "delay_ns = %d" % ns, ""]
                everyone = ", ".join('"%s"' % h[0] for h in hosts)
                s += ["[[traffic]]", "sources = [%s]" % everyone, "destinations = [%s]" % everyone,
                      "load = %s" % (load / 100), 'cdf = "websearch"', "stop_us = %d" % arrivals_us, ""]
                with open(os.path.join(d, "%s-%d.toml" % (variant, load)), "w") as f:
                    f.write("\n".join(s))


if __name__ == "__main__":
    main()
