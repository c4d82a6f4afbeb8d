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
  stage, a window of the largest BDP scaled by rate: HAS_WIN 1, GLOBAL_T 1, VAR_WIN 1; at most a
  CNP per QP per 5 us from receivers, as their ReceiveUdp), their ECN maps (KMIN/KMAX 400/1600 KB at 100 Gb/s, 800/6400 KB at 400 Gb/s, Pmax 0.2),
  marked at dequeue as in their switch model, ACKs and CNPs in the data queue at switches.

Two variants per load: `dcqcn-LOAD.toml` (commodity ESWs) and `themis-LOAD.toml` (THEMIS at both
ESWs, every server running the THEMIS daemon). Two scales: the paper's (30 ms of arrivals) and
`quick/` (the same network, 3 ms of arrivals: the seconds-long run CI checks directions on).

The network is twodc.py's (shared with Reflex's evaluation). Where the paper is silent
(docs/reproduce.md, "THEMIS"):
- the ESWs: the paper's 16 MB cannot hold what a paused 1.6 Tb/s x 500 us link still delivers
  (200 MB), and the authors' NS-3 switch model never pauses that link (its headroom, 3 x rate x
  delay, exceeds the buffer); the ESWs here get a deep buffer ("ESWs typically have deep buffer",
  section VII, Figure 13: up to 70 MB used by TRP), 16 MB shared plus the long link's headroom, so
  that the WAN is lossless as the paper's results imply;
- TRP's recirculation port: the authors' topology gives each ESW a 1.6 Tb/s, 100 ns link to
  itself (the loop their switch model recirculates into); PNP's CNP interval is their 7 us;
  TRP's alpha/beta are those of scenarios/switches/esw-a-themis.toml.

    python3 scenarios/papers/gen_themis.py
"""
import os

import twodc

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "themis")

LOADS = (30, 50, 70)
# (dir, arrivals us, duration us): the paper's scale and the quick one.
SCALES = (("", 30_000, 120_000), ("quick/", 3_000, 40_000))
PAYLOAD = 1000                   # PACKET_PAYLOAD_SIZE

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


def themis_section(dc):
    return """
[themis]
dc_ports = [%s]
wan_ports = ["wan"]

[themis.pnp]
cnp_interval_ns = 7000          # the authors' PNP: a CNP per flow per 7 us at most
cnp_dscp = 48
host_prefixes = ["10.%d.0.0/16"]
inter_dc_prefixes = ["10.%d.0.0/16"]

[themis.trp]
alpha = 5
beta_ns = 500000
recirc_rate_gbps = 1600.0       # the authors' loop: a 1.6 Tb/s link from the ESW to itself
loop_delay_ns = 100             # of 100 ns (topology.txt: "48 48 1600Gbps 100ns")
recirc_capacity_pkts = 65536    # about 70 MB of 1 KB packets (Figure 13: under 70 MB used)
""" % (twodc.dc_ports(), dc, 1 - dc)


PARAMS = twodc.Params(
    "scenarios/papers/gen_themis.py (THEMIS section VII-A)",
    leaf_esw_gbps=400,            # the authors' topology.txt
    buffer=16 * 2**20,            # "All switches in the topology have a buffer capacity of 16MB"
    pfc_alpha=0.11,               # "more than 11% of the available buffer"
    ecn=ecn,
    esw={"themis": ("themis", "drr", themis_section)})


def variants():
    out = []
    for name, esw in (("dcqcn", ""), ("themis", "themis")):
        def comment(load, arrivals_us, esw=esw):
            return ["Generated by scenarios/papers/gen_themis.py: THEMIS (paper 000) section VII-A,",
                    "WebSearch at %d%% load for %d ms, %s." % (
                        load, arrivals_us // 1000,
                        "THEMIS at both ESWs" if esw else "commodity ESWs (DCQCN alone)")]
        emulation = ["mtu = %d" % PAYLOAD,
                     'bdp_window = "max"            # HAS_WIN 1, GLOBAL_T 1 in the authors\' config.txt',
                     "var_window = true             # VAR_WIN 1",
                     "cnp_interval_us = 5           # the authors' receivers: a CNP per QP per 5 us at most",
                     "data_dscp = 26",
                     "control_dscp = 26             # ACKs and CNPs in the data queue, as the authors' switches"]
        if esw:
            emulation.append('host_agents = ["themis"]      # the THEMIS daemon (QPs reported to the ESW)')
        out.append((name, esw, comment, emulation + ["", DCQCN]))
    return out


def main():
    twodc.write_family(OUT, PARAMS, SCALES, LOADS, variants())


if __name__ == "__main__":
    main()
