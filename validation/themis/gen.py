#!/usr/bin/env python3
"""Writes the THEMIS cross-check scenario (validation/themis/README.md) twice: for the THEMIS
authors' NS-3 simulator (Networked-System-and-Security-Group/Themis, NS3/simulation: its
topology.txt, flow.txt and config.txt formats, the settings of its mix/mix_50%_0.03s/config.txt)
and for `longhaul emulate` (scenario TOMLs and switch configs), the same hosts, links, flows,
ECN, PFC, buffers and DCQCN on both sides.

    python3 validation/themis/gen.py [--out DIR] [--load L] [--arrivals-us T] [--seed S]

The network is the fork's two-DC topology (its mix/*/topology.txt, node for node): per DC four
ToRs of four 100 Gb/s hosts, four aggregation switches (every ToR to every one, 100 Gb/s), each
aggregation switch to the DC's external switch (ESW) at 400 Gb/s; the two ESWs joined by a
1600 Gb/s, 500 us link; 1 us everywhere else. The flows are the fork's recipe
(run_themis.py: traffic_gen/mix_gen.py then trim-mix.py) scaled down: WebSearch sizes,
Poisson arrivals per host at `load` of its NIC for `arrivals_us` (the fork: 30 ms at 30, 50 and
70%), a uniform destination among the 31 other hosts, then inter-DC flows moved to a random
destination in the source's own DC until one flow in 11 is inter-DC (trim-mix.py). Written out
explicitly so that both simulators run the same flows.

DIR/themis/ holds:
  hpcc/topology.txt, hpcc/flow.txt, hpcc/config.txt, hpcc/trace.txt   the NS-3 input, in the
                    HPCC simulator's formats the fork keeps (paths relative to hpcc/;
                    compare.py rewrites them per run)
  off.toml          longhaul, commodity ESWs (the fork with THEMIS_NS3_OFF=1)
  themis.toml       longhaul, THEMIS's PNP at both ESWs: what the fork's published code runs
                    (its recirculation throttling is compiled out)
  themis-trp.toml   longhaul, PNP and TRP (longhaul's THEMIS as scenarios/themis.toml runs it)
  switches/*.toml   ToRs, aggregation switches, ESWs without THEMIS
  switches-themis/  the ESWs with PNP; switches-themis-trp/: with PNP and TRP
"""
import argparse
import collections
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hpcc"))
import gen as hgen  # noqa: E402  (validation/hpcc/gen.py: the network helpers and the CDF)

NAME = "themis"
HOSTS = list(range(32))               # 0-15 DC A, 16-31 DC B
TORS = list(range(32, 40))            # 32-35 DC A, 36-39 DC B
AGGS = list(range(40, 48))            # 40-43 DC A, 44-47 DC B
ESWS = [48, 49]                       # third.cc: nodes 48 and 49 are the ESWs (hard-coded)
HOST_GBPS, AGG_ESW_GBPS, WAN_GBPS = 100, 400, 1600
DELAY_NS, WAN_DELAY_NS = 1000, 500_000
PAYLOAD = 1000                        # PACKET_PAYLOAD_SIZE
BUFFER_BYTES = 32 * 1024 * 1024       # BUFFER_SIZE 32 (MiB)
RESUME_OFFSET = 3 * 1024              # switch-mmu.cc resume_offset
# The fork's KMIN_MAP / KMAX_MAP (KB) and PMAX_MAP per port rate (Gb/s).
KMIN_KB = {50: 200, 100: 400, 400: 800, 1600: 1600}
KMAX_KB = {50: 800, 100: 1600, 400: 6400, 1600: 25600}
PMAX = 0.2
# The fork's DCQCN (mix/*/config.txt), longhaul's names; the first cut and the first CNP's
# effect as the HPCC simulator's (validation/hpcc/gen.py says why).
DCQCN = collections.OrderedDict([
    ("g", 0.00390625),                  # EWMA_GAIN
    ("alpha_resume_interval_us", 1),    # ALPHA_RESUME_INTERVAL
    ("rate_decrease_interval_us", 4),   # RATE_DECREASE_INTERVAL
    ("rp_timer_us", 900),               # RP_TIMER
    ("fast_recovery_times", 1),         # FAST_RECOVERY_TIMES
    ("rate_ai_mbps", 50),               # RATE_AI
    ("rate_hai_mbps", 100),             # RATE_HAI
    ("min_rate_mbps", 100),             # MIN_RATE
    ("first_decrease", "next-check"),
    ("rate_on_first_cnp", 1.0),
])
# The fork's module 1 (switch-node.cc SwitchNotifyDequeue): a CE-marked data packet leaving an
# ESW has its mark cleared and a CNP sent back 2 us later, unless one was scheduled for the flow
# within 5 us before that (the register holds the send time, now + 2 us): 7 us apart at least.
PNP_INTERVAL_NS = 7000
# The fork's receivers (rdma-hw.cc ReceiveUdp) set the CNP flag on an ACK of a CE-marked packet
# at most once per QP per 5 us (the HPCC simulator flags every one).
NP_CNP_INTERVAL_US = 5
# scenarios/themis.toml's TRP (longhaul's THEMIS), for themis-trp.toml.
TRP = ["alpha = 5", "beta_ns = 500000", "recirc_rate_gbps = 100.0", "loop_delay_ns = 2000",
       "recirc_capacity_pkts = 16384"]

# The fork's config.txt (mix/mix_50%_0.03s), as published but for the file names, the stop time
# and ENABLE_TRACE (the binary packet trace: no effect on the run, and nothing here reads it).
NS3_CONFIG = """ENABLE_QCN 1
USE_DYNAMIC_PFC_THRESHOLD 1

PACKET_PAYLOAD_SIZE {payload}

TOPOLOGY_FILE topology.txt
FLOW_FILE flow.txt
FCT_OUTPUT_FILE fct.txt
PFC_OUTPUT_FILE pfc.txt
TRACE_FILE trace.txt
TRACE_OUTPUT_FILE mix.tr

SIMULATOR_STOP_TIME {stop}

CC_MODE 1
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 900
EWMA_GAIN 0.00390625
FAST_RECOVERY_TIMES 1
RATE_AI 50Mb/s
RATE_HAI 100Mb/s
MIN_RATE 100Mb/s
DCTCP_RATE_AI 1000Mb/s

ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0

HAS_WIN 1
GLOBAL_T 1
VAR_WIN 1
FAST_REACT 1
U_TARGET 0.95
MI_THRESH 0
INT_MULTI 1
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.05
PINT_PROB 1.0

RATE_BOUND 1

ACK_HIGH_PRIO 1

LINK_DOWN 0 0 0

ENABLE_TRACE 0

KMAX_MAP 4  50000000000 800 100000000000 1600 400000000000 6400 1600000000000 25600
KMIN_MAP 4  50000000000 200 100000000000 400 400000000000 800 1600000000000 1600
PMAX_MAP 4  50000000000 0.2 100000000000 0.2 400000000000 0.2 1600000000000 0.2
BUFFER_SIZE 32
QLEN_MON_FILE qlen.txt
QLEN_MON_START {qlen_start}
QLEN_MON_END {qlen_start}
"""
# The fork's flows start at 2 s (mix_gen.py base_t); third.cc starts its flow-distribution
# printer at 2 s and keeps it going every 50 us until the stop time: starting the flows at
# 10 ms (as validation/hpcc does) leaves it out of the run.
T0_S = hgen.HPCC_T0_S


def dc_of(h):
    return 0 if h < 16 else 1


def fail(msg):
    sys.exit("gen.py: " + msg)


def topology():
    """The fork's topology.txt, line for line (third.cc finds the ESWs' devices by index: the
    WAN link must come before the two self-links, 49's before 48's)."""
    links = []  # (a, b, Gb/s, delay ns, error rate text)
    for h in HOSTS:
        links.append((h, TORS[h // 4], HOST_GBPS, DELAY_NS, "0.000000"))
    for t in TORS:
        dc_aggs = AGGS[:4] if t < 36 else AGGS[4:]
        for a in dc_aggs:
            links.append((t, a, HOST_GBPS, DELAY_NS, "0.000000"))
    for a in AGGS:
        links.append((a, ESWS[0] if a < 44 else ESWS[1], AGG_ESW_GBPS, DELAY_NS, "0.000000"))
    links.append((48, 49, WAN_GBPS, WAN_DELAY_NS, "0.000000"))
    # The recirculation loops of the fork's (compiled-out) throttling: carry nothing here.
    links.append((49, 49, WAN_GBPS, 100, "0.000000"))
    links.append((48, 48, WAN_GBPS, 100, "0.000000"))
    return links


def net_of(links):
    """longhaul's network: the same, without the self-links."""
    net = hgen.Net(HOSTS, TORS + AGGS + ESWS)
    for a, b, g, _, _ in links:
        if a != b:
            net.link(a, b, g)
    return net


def delay_of(links, a, b):
    return next(d for x, y, _, d, _ in links if {x, y} == {a, b})


def max_bdp(links):
    """third.cc: every QP's window (HAS_WIN 1, GLOBAL_T 1) is the largest pair BDP: (2 x the
    path's delay + a payload's serialization on every link) x the pair's bottleneck rate. The
    inter-DC path: host, ToR, agg, ESW, ESW, agg, ToR, host."""
    rates = [HOST_GBPS, HOST_GBPS, AGG_ESW_GBPS, WAN_GBPS, AGG_ESW_GBPS, HOST_GBPS, HOST_GBPS]
    delays = [DELAY_NS] * 3 + [WAN_DELAY_NS] + [DELAY_NS] * 3
    tx = sum(PAYLOAD * 8 // g for g in rates)  # ns (integer: third.cc's 1e9 * 8 / bps)
    rtt = 2 * sum(delays) + tx
    return rtt * HOST_GBPS // 8


def flows_of(load, arrivals_us, seed):
    """mix_gen.py then trim-mix.py, from one seeded generator."""
    pts = hgen.read_cdf("websearch")
    gap_ns = hgen.cdf_mean(pts) * 8 / (HOST_GBPS * 1e9 * load) * 1e9
    rng = random.Random(seed)
    flows = []
    for h in HOSTS:
        t = rng.expovariate(1 / gap_ns)
        while t < arrivals_us * 1000:
            size = max(1, int(round(hgen.cdf_sample(pts, rng.random()))))
            dst = rng.choice([x for x in HOSTS if x != h])
            flows.append([h, dst, size, int(t)])
            t += rng.expovariate(1 / gap_ns)
    flows.sort(key=lambda f: (f[3], f[0]))
    inter = [i for i, f in enumerate(flows) if dc_of(f[0]) != dc_of(f[1])]
    keep = len(flows) // 11
    if len(inter) < keep:
        fail("only %d inter-DC flows of %d: cannot keep one in 11" % (len(inter), len(flows)))
    for i in rng.sample(inter, len(inter) - keep):
        src = flows[i][0]
        same = [x for x in HOSTS if dc_of(x) == dc_of(src) and x != src]
        flows[i][1] = rng.choice(same)
    return [tuple(f) for f in flows]


def switch_config(net, links, sw, themis, ecmp_salt=0):
    """One switch. ECN per class where the fork sets it per port rate: the switch's slowest
    port's thresholds, marked at dequeue (SwitchNotifyDequeue). PFC: the fork's dynamic
    threshold, 1/8 of the free buffer (its 400 Gb/s ports get 1/2: one share per switch here);
    at the ESWs none (third.cc's WAN headroom, 3 x 1600 Gb/s x 500 us = 300 MB, exceeds the 32 MiB
    buffer and SwitchMmu's unsigned free-buffer count wraps: their thresholds are never
    reached, they never pause and never drop)."""
    ports = net.ports[sw]
    rates = [hgen.port_gbps(net, sw, i) for i in range(len(ports))]
    esw = sw in ESWS
    slow = min(rates)
    buffer_bytes = 4 * BUFFER_BYTES if esw else BUFFER_BYTES
    lines = ["# Generated by validation/themis/gen.py: the THEMIS fork's two-DC network, %s."
             % hgen.switch_name(sw),
             "",
             "[switch]",
             'name = "%s"' % hgen.switch_name(sw),
             'pipeline = "%s"' % ("themis" if themis else "baseline"),
             "pool_buffers = %d" % (262144 if esw else 65536),
             "buffer_data_room = 4480",
             "buffer_bytes = %d" % buffer_bytes,
             "seed = 1",
             "ecmp_seed = %d" % (sw + ecmp_salt)]
    for i in range(len(ports)):
        lines += ["", "[[ports]]", "id = %d" % i, 'name = "%s"' % hgen.port_name(net, sw, i),
                  'mac = "%s"' % hgen.port_mac(sw, i), "rate_gbps = %d" % rates[i], "mtu = 4200"]
    lines += ["", "[qos]", 'trust = "dscp"', "default_class = 0",
              'dscp_map = { "26" = 3, "48" = 6 }', 'scheduler = "drr"', "strict_classes = [6, 7]",
              "weights = [1, 1, 1, 4, 1, 1, 1, 1]", "drr_quantum_bytes = 4224",
              "queue_limit_bytes = 1048576",
              "", "[[qos.classes]]", "class = 3", "lossless = %s" % ("false" if esw else "true"),
              "limit_bytes = %d" % buffer_bytes,
              'ecn = { kmin_bytes = %d, kmax_bytes = %d, pmax = %s, at = "dequeue" }'
              % (KMIN_KB[slow] * 1000, KMAX_KB[slow] * 1000, PMAX),
              "", "[[qos.classes]]", "class = 6", "limit_bytes = 262144", ""]
    if esw:
        lines += ["# No PFC: the fork's ESWs never reach their threshold (see gen.py).",
                  "[pfc]", "enabled = false"]
    else:
        fastest = max(rates)
        hdrm = fastest * 10**9 * max(delay_of(links, sw, p) for p in ports) // 8 // 10**9 * 3
        cap = BUFFER_BYTES - hdrm
        lines += ["# third.cc: headroom 3 x rate x delay (the fastest port's), dynamic threshold",
                  "# 1/8 of the free buffer, resume 3 KB below; HPCC holds a pause until RESUME:",
                  "# a refresh at 90% of the pause time at the fastest port.",
                  "[pfc]", "enabled = true",
                  "xoff_bytes = %d" % cap, "xon_bytes = %d" % (cap - RESUME_OFFSET),
                  "dynamic_alpha = 0.125",
                  "headroom_bytes = %d" % hdrm, "pause_quanta = 65535",
                  "refresh_ns = %d" % (65535 * 512 * 9 // (10 * fastest))]
    lines += hgen.route_lines(net, sw)
    if themis:
        dc = 0 if sw == 48 else 1
        dc_ports = [hgen.port_name(net, sw, i) for i, p in enumerate(ports) if p in AGGS]
        wan = [hgen.port_name(net, sw, i) for i, p in enumerate(ports) if p in ESWS]
        lines += ["", "[themis]",
                  "dc_ports = [%s]" % ", ".join('"%s"' % p for p in dc_ports),
                  "wan_ports = [%s]" % ", ".join('"%s"' % p for p in wan),
                  "", "[themis.pnp]",
                  "# the fork's module 1: a CNP per flow at most every 7 us (gen.py)",
                  "cnp_interval_ns = %d" % PNP_INTERVAL_NS, "cnp_dscp = 48",
                  'host_prefixes = ["%s"]' % dc_prefix(dc),
                  'inter_dc_prefixes = ["%s"]' % dc_prefix(1 - dc),
                  "", "[themis.trp]"]
        lines += TRP if themis == "trp" else ["enabled = false"]
    return "\n".join(lines) + "\n"


def dc_prefix(dc):
    """Hosts 0-15 are 11.0.0-15.1, 16-31 11.0.16-31.1 (third.cc node_id_to_ip)."""
    return "11.0.%d.0/20" % (16 * dc)


def scenario_toml(net, links, flows, variant, swdirs, title, duration_us, window):
    s = ["# Generated by validation/themis/gen.py: %s" % title,
         "# The same network and flows as hpcc/ (the THEMIS fork's NS-3 input), DCQCN and switches",
         "# as its mix/mix_50%%_0.03s/config.txt. This variant: %s." % variant,
         "", "[emulation]", "duration_us = %d" % duration_us, "seed = 1",
         "mtu = %d" % PAYLOAD, "ack_interval = 1",
         "# HAS_WIN 1, GLOBAL_T 1: the largest pair BDP (the fork's VAR_WIN scales it with the",
         "# rate; here it stays)",
         "window = %d" % window,
         "nak_interval_us = 500",
         "# the fork's receivers flag at most one ACK per QP per 5 us with the CNP (ReceiveUdp)",
         "cnp_interval_us = %d" % NP_CNP_INTERVAL_US,
         "data_dscp = 26", "control_dscp = 48", "data_priority = 3",
         'host_agents = ["themis"]', "", "[emulation.dcqcn]"]
    for k, v in DCQCN.items():
        s.append("%s = %s" % (k, '"%s"' % v if isinstance(v, str) else v))
    s.append("")
    for h in sorted(net.hosts):
        s += ["[[hosts]]", 'name = "%s"' % hgen.host_name(h), 'ip = "%s"' % hgen.host_ip(h),
              'mac = "%s"' % hgen.host_mac(h), "rate_gbps = %d" % HOST_GBPS,
              'dc = "%s"' % "AB"[dc_of(h)], ""]
    for sw in sorted(net.switches):
        d = swdirs.get(sw, "switches")
        s += ["[[switches]]", 'name = "%s"' % hgen.switch_name(sw),
              'config = "%s/%s.toml"' % (d, hgen.switch_name(sw)), ""]
    for a, b, gbps, delay, _ in links:
        if a == b:
            continue

        def end(n, other):
            if net.is_host(n):
                return hgen.host_name(n)
            return "%s:%s" % (hgen.switch_name(n),
                              hgen.port_name(net, n, net.ports[n].index(other)))
        s += ["[[links]]", 'a = "%s"' % end(a, b), 'b = "%s"' % end(b, a),
              "rate_gbps = %d" % gbps, "delay_ns = %d" % delay, ""]
    for src, dst, size, start in flows:
        s += ["[[flows]]", 'src = "%s"' % hgen.host_name(src), 'dst = "%s"' % hgen.host_name(dst),
              "size_bytes = %d" % size, "start_us = %.3f" % (start / 1e3), ""]
    return "\n".join(s)


def write(out, load, arrivals_us, seed, stop_ms, ecmp_salt=0):
    d = os.path.join(out, NAME)
    for sub in ("hpcc", "switches", "switches-themis", "switches-themis-trp"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    links = topology()
    net = net_of(links)
    flows = flows_of(load, arrivals_us, seed)
    n_inter = sum(dc_of(s) != dc_of(t) for s, t, _, _ in flows)
    # NS-3.
    topo = ["%d %d %d" % (len(HOSTS) + len(TORS) + len(AGGS) + len(ESWS),
                          len(TORS) + len(AGGS) + len(ESWS), len(links)),
            " ".join(str(x) for x in TORS + AGGS + ESWS)]
    topo += ["%d %d %dGbps %dns %s" % (a, b, g, dl, e) for a, b, g, dl, e in links]
    with open(os.path.join(d, "hpcc", "topology.txt"), "w") as f:
        f.write("\n".join(topo) + "\n")
    hgen.write_flows(os.path.join(d, "hpcc"), flows)
    stop = T0_S + stop_ms / 1e3
    with open(os.path.join(d, "hpcc", "config.txt"), "w") as f:
        f.write(NS3_CONFIG.format(payload=PAYLOAD, stop="%.3f" % stop,
                                  qlen_start=int((stop + 1) * 1e9)))
    # longhaul.
    for sub, themis in (("switches", None), ("switches-themis", "pnp"),
                        ("switches-themis-trp", "trp")):
        for sw in sorted(net.switches):
            if themis and sw not in ESWS:
                continue
            with open(os.path.join(d, sub, hgen.switch_name(sw) + ".toml"), "w") as f:
                f.write(switch_config(net, links, sw, themis, ecmp_salt))
    title = ("the THEMIS fork's two DCs (2 x 16 hosts at 100 Gb/s, 1600 Gb/s WAN, 500 us), "
             "WebSearch at %d%% load for %d us, one flow in 11 inter-DC: %d flows, %d inter-DC"
             % (load * 100, arrivals_us, len(flows), n_inter))
    window = -(-max_bdp(links) // PAYLOAD)
    for variant, swdir, what in (
            ("off", "switches", "commodity ESWs (the fork with THEMIS_NS3_OFF=1)"),
            ("themis", "switches-themis", "THEMIS's PNP at both ESWs, as the fork's published "
             "code runs THEMIS"),
            ("themis-trp", "switches-themis-trp", "THEMIS's PNP and TRP at both ESWs "
             "(longhaul's THEMIS, scenarios/themis.toml's TRP)")):
        text = scenario_toml(net, links, flows, what, {sw: swdir for sw in ESWS}, title,
                             arrivals_us, window)
        with open(os.path.join(d, variant + ".toml"), "w") as f:
            f.write(text)
    return d, len(flows), n_inter


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "scenarios"),
                    help="where to write (default: validation/themis/scenarios)")
    ap.add_argument("--load", type=float, default=0.5,
                    help="load of each NIC, 0 < L <= 1 (default 0.5: the fork's middle one)")
    ap.add_argument("--arrivals-us", type=int, default=2000,
                    help="flows arrive for this long (default 2000; the fork: 30000)")
    ap.add_argument("--seed", type=int, default=1, help="the flows' generator seed")
    ap.add_argument("--stop-ms", type=int, default=100,
                    help="NS-3's SIMULATOR_STOP_TIME after the first flow (default 100)")
    ap.add_argument("--ecmp-salt", type=int, default=0,
                    help="added to every switch's ecmp_seed (longhaul's paths, not NS-3's): "
                    "how much the ECMP hash alone moves the figures (default 0)")
    args = ap.parse_args()
    if args.ecmp_salt < 0:
        fail("--ecmp-salt %d: must be >= 0" % args.ecmp_salt)
    if not 0 < args.load <= 1:
        fail("--load %s: must be in (0, 1]" % args.load)
    if args.arrivals_us <= 0 or args.stop_ms * 1000 <= args.arrivals_us:
        fail("--arrivals-us must be > 0 and below --stop-ms")
    d, n, ni = write(args.out, args.load, args.arrivals_us, args.seed, args.stop_ms,
                     args.ecmp_salt)
    print("wrote %s: %d flows, %d inter-DC" % (d, n, ni))


if __name__ == "__main__":
    main()
