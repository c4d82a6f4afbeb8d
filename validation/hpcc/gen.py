#!/usr/bin/env python3
"""Writes the reference scenarios of the HPCC cross-check (validation/hpcc/README.md) twice: for
the HPCC NS-3 simulator (topology.txt, flow.txt, config.txt in its own formats, DCQCN as its
`run.py --cc dcqcn --bw 100`) and for `longhaul emulate` (a scenario TOML and baseline switch
configs), the same hosts, links, flows, ECN, PFC and buffer on both sides.

    python3 validation/hpcc/gen.py [--out DIR]      (default: validation/hpcc/scenarios)

Per scenario NAME, DIR/NAME/ holds:
  hpcc/topology.txt, hpcc/flow.txt, hpcc/config.txt   the NS-3 input (config paths relative to
                                                      hpcc/; compare.py rewrites them per run)
  NAME.toml                                           longhaul, its own defaults (ACK/NAK/CNP in
                                                      strict class 6 at the switches)
  NAME-ackdata.toml                                   the same with control_dscp = 26: ACKs in
                                                      the data queue at switches, as HPCC's
  NAME-hpcc.toml                                      ACKs in the data queue, ECN at dequeue
                                                      and dynamic PFC thresholds (switches-
                                                      dequeue/): HPCC's switches, from longhaul
  NAME-dcqcn-paper.toml                               the first cut at the CNP, at most a CNP
                                                      per QP per 50 us (longhaul before issue 41)
  switches/SWITCH.toml                                one baseline config per switch
"""
import argparse
import collections
import os
import re
import random

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CDF_DIR = os.path.join(REPO, "scenarios", "cdf")

GBPS = 100
LINK_DELAY_NS = 1000
PAYLOAD = 1000  # PACKET_PAYLOAD_SIZE (HPCC) = [emulation] mtu (longhaul)
# run.py --bw 100: BUFFER_SIZE = 16 * bw / 50 MB (MiB: third.cc multiplies by 1024 * 1024).
BUFFER_BYTES = 16 * GBPS // 50 * 1024 * 1024
PMAX = 0.2
RESERVE_BYTES = 4 * 1024
RESUME_OFFSET = 3 * 1024


def kmin_bytes(gbps):
    """run.py's KMIN_MAP: 100 * bw / 25 KB for bw = the NIC rate, 4x that at 4x the rate; that
    is 4 KB per Gb/s of the port (switch-mmu.cc ConfigEcn multiplies KB by 1000)."""
    return 100 * gbps // 25 * 1000


def kmax_bytes(gbps):
    """run.py's KMAX_MAP: 400 * bw / 25 KB, scaled with the port rate as KMIN_MAP."""
    return 400 * gbps // 25 * 1000


def headroom_bytes(gbps):
    """third.cc: a port's PFC headroom is 3 x its rate x its link's delay."""
    return gbps * 10**9 * LINK_DELAY_NS // 8 // 10**9 * 3


def pfc_shift(gbps):
    """third.cc: an ingress port's PFC threshold is the free buffer >> shift, shift 3 at the NIC
    rate and one less per doubling above it."""
    shift = 3
    while gbps > GBPS and shift > 0:
        shift -= 1
        gbps //= 2
    return shift
# DCQCN: run.py --cc dcqcn --bw 100 (longhaul's defaults since issue 41; set here anyway).
DCQCN = collections.OrderedDict([
    ("g", 0.00390625),                 # EWMA_GAIN
    ("alpha_resume_interval_us", 1),   # ALPHA_RESUME_INTERVAL
    ("rate_decrease_interval_us", 4),  # RATE_DECREASE_INTERVAL
    ("rp_timer_us", 300),              # RP_TIMER
    ("fast_recovery_times", 1),        # FAST_RECOVERY_TIMES
    ("rate_ai_mbps", 5 * GBPS // 25),  # RATE_AI
    ("rate_hai_mbps", 50 * GBPS // 25),  # RATE_HAI
    ("min_rate_mbps", 1000),           # MIN_RATE
    ("first_decrease", "next-check"),  # rdma-hw.cc ScheduleDecreaseRateMlx(q, 1)
    ("rate_on_first_cnp", 1.0),        # rdma-hw.cc: the first CNP sets alpha, not the rate
])

HPCC_CONFIG = """ENABLE_QCN 1
USE_DYNAMIC_PFC_THRESHOLD 1
PACKET_PAYLOAD_SIZE {payload}
TOPOLOGY_FILE topology.txt
FLOW_FILE flow.txt
TRACE_FILE trace.txt
TRACE_OUTPUT_FILE mix.tr
FCT_OUTPUT_FILE fct.txt
PFC_OUTPUT_FILE pfc.txt
SIMULATOR_STOP_TIME {stop}
CC_MODE 1
ALPHA_RESUME_INTERVAL 1
RATE_DECREASE_INTERVAL 4
CLAMP_TARGET_RATE 0
RP_TIMER 300
EWMA_GAIN 0.00390625
FAST_RECOVERY_TIMES 1
RATE_AI {ai}Mb/s
RATE_HAI {hai}Mb/s
MIN_RATE 1000Mb/s
DCTCP_RATE_AI 1000Mb/s
ERROR_RATE_PER_LINK 0.0000
L2_CHUNK_SIZE 4000
L2_ACK_INTERVAL 1
L2_BACK_TO_ZERO 0
HAS_WIN 0
GLOBAL_T 1
VAR_WIN 0
FAST_REACT 0
U_TARGET 0.95
MI_THRESH 0
INT_MULTI 1
MULTI_RATE 0
SAMPLE_FEEDBACK 0
PINT_LOG_BASE 1.01
PINT_PROB 1.0
RATE_BOUND 1
ACK_HIGH_PRIO 1
LINK_DOWN 0 0 0
ENABLE_TRACE 0
KMAX_MAP {kmax}
KMIN_MAP {kmin}
PMAX_MAP {pmax}
BUFFER_SIZE {buffer_mb}
QLEN_MON_FILE qlen.txt
QLEN_MON_START {qlen_start}
QLEN_MON_END {qlen_start}
"""

# HPCC's flows start at T0 (seconds): its examples start at 2 s; any time works, 10 ms here.
HPCC_T0_S = 0.01


class Net:
    """Nodes 0..n-1 (HPCC's numbering): hosts, then switches; links between them."""

    def __init__(self, hosts, switches):
        self.hosts = hosts
        self.switches = switches
        self.links = []  # (a, b, Gb/s)
        self.ports = collections.defaultdict(list)  # switch -> [neighbour], port index = position

    def link(self, a, b, gbps=GBPS):
        self.links.append((a, b, gbps))
        for x, y in ((a, b), (b, a)):
            if x in self.switches:
                self.ports[x].append(y)

    def is_host(self, n):
        return n in self.hosts


def host_name(n):
    return "h%d" % n


def switch_name(n):
    return "sw%d" % n


def host_ip(n):
    # third.cc node_id_to_ip: 11.0.0.1 + (id / 256) << 16 + (id % 256) << 8.
    return "11.%d.%d.1" % (n // 256, n % 256)


def host_mac(n):
    return "02:00:00:10:%02x:%02x" % (n // 256, n % 256)


def port_mac(sw, i):
    return "02:00:00:20:%02x:%02x" % (sw, i)


def port_name(net, sw, i):
    peer = net.ports[sw][i]
    return host_name(peer) if net.is_host(peer) else switch_name(peer)


def mac_towards(net, sw, i):
    """The MAC of what is at the other end of switch `sw`'s port `i`."""
    peer = net.ports[sw][i]
    if net.is_host(peer):
        return host_mac(peer)
    return port_mac(peer, net.ports[peer].index(sw))


def hops_to(net, dst):
    """Links from every node to host `dst` (through switches only)."""
    adj = collections.defaultdict(list)
    for a, b, _ in net.links:
        adj[a].append(b)
        adj[b].append(a)
    dist = {dst: 0}
    q = collections.deque([dst])
    while q:
        n = q.popleft()
        if n != dst and net.is_host(n):
            continue
        for m in adj[n]:
            if m not in dist:
                dist[m] = dist[n] + 1
                q.append(m)
    return dist


def port_gbps(net, sw, i):
    peer = net.ports[sw][i]
    return next(g for a, b, g in net.links if {a, b} == {sw, peer})


def switch_config(net, sw, congested_ingress, comment):
    """The baseline config of switch `sw`. Where HPCC sets ECN per port rate, longhaul per class:
    the thresholds of the switch's slowest port (where its queues build)."""
    rates = [port_gbps(net, sw, i) for i in range(len(net.ports[sw]))]
    xoff = static_xoff(net, sw, congested_ingress)
    lines = ["# Generated by validation/hpcc/gen.py: %s" % comment,
             "# The baseline pipeline with HPCC run.py's (--cc dcqcn --bw 100) ECN and buffer;",
             "# PFC static at the dynamic threshold HPCC's switch-mmu.cc reaches (gen.py says how).",
             "",
             "[switch]",
             'name = "%s"' % switch_name(sw),
             'pipeline = "baseline"',
             "pool_buffers = 65536",
             "buffer_data_room = 4480",
             "buffer_bytes = %d" % BUFFER_BYTES,
             "seed = 1",
             "ecmp_seed = %d" % sw]
    for i in range(len(net.ports[sw])):
        lines += ["", "[[ports]]", "id = %d" % i, 'name = "%s"' % port_name(net, sw, i),
                  'mac = "%s"' % port_mac(sw, i), "rate_gbps = %d" % rates[i], "mtu = 4200"]
    lines += ["", "[qos]", 'trust = "dscp"', "default_class = 0",
              'dscp_map = { "26" = 3, "48" = 6 }', 'scheduler = "drr"', "strict_classes = [6, 7]",
              "weights = [1, 1, 1, 4, 1, 1, 1, 1]", "drr_quantum_bytes = 4224",
              "queue_limit_bytes = 1048576",
              "", "[[qos.classes]]", "class = 3", "lossless = true",
              "limit_bytes = %d" % BUFFER_BYTES,
              "ecn = { kmin_bytes = %d, kmax_bytes = %d, pmax = %s }"
              % (kmin_bytes(min(rates)), kmax_bytes(min(rates)), PMAX),
              "", "[[qos.classes]]", "class = 6", "limit_bytes = 262144",
              "", "[pfc]", "enabled = true",
              "xoff_bytes = %d" % xoff,
              "xon_bytes = %d" % (xoff - RESUME_OFFSET),
              "headroom_bytes = %d" % headroom_bytes(max(rates)),
              "pause_quanta = 65535",
              "# HPCC holds a pause until RESUME: a refresh at 90% of the pause time at the",
              "# fastest port (65535 quanta of 512 bit times).",
              "refresh_ns = %d" % (65535 * 512 * 9 // (10 * max(rates)))]
    lines += route_lines(net, sw)
    return "\n".join(lines) + "\n"


def route_lines(net, sw):
    """Switch `sw`'s [[routes]]: a /32 per host over its ports on a shortest path, an ECMP
    group (`next_hops`) where there are several (validation/themis/gen.py uses it too)."""
    lines = []
    for dst in sorted(net.hosts):
        dist = hops_to(net, dst)
        best = [i for i, peer in enumerate(net.ports[sw])
                if peer in dist and dist[peer] == dist[sw] - 1]
        if len(best) == 1:
            i = best[0]
            lines += ["", "[[routes]]", 'prefix = "%s/32"' % host_ip(dst),
                      'port = "%s"' % port_name(net, sw, i),
                      'next_hop_mac = "%s"' % mac_towards(net, sw, i)]
        else:
            members = ", ".join('{ port = "%s", next_hop_mac = "%s" }'
                                % (port_name(net, sw, i), mac_towards(net, sw, i)) for i in best)
            lines += ["", "[[routes]]", 'prefix = "%s/32"' % host_ip(dst),
                      "next_hops = [%s]" % members]
    return lines


def static_xoff(net, sw, congested_ingress):
    """HPCC's PFC threshold is dynamic (switch-mmu.cc): an ingress queue pauses its upstream when
    its shared bytes reach (buffer - headroom - reserve - all shared bytes) >> shift. With N
    ingress queues filling alike, each pauses at x = free / (2^shift + N): our static XOFF, with
    the 4 KB reserve on top. N is the number of ingress ports feeding the scenario's bottleneck;
    the shift that of the switch's slowest port."""
    rates = [port_gbps(net, sw, i) for i in range(len(net.ports[sw]))]
    free = BUFFER_BYTES - sum(headroom_bytes(g) + RESERVE_BYTES for g in rates)
    return RESERVE_BYTES + free // ((1 << pfc_shift(min(rates))) + congested_ingress)


def ecn_map(net, value):
    """A KMIN_MAP / KMAX_MAP / PMAX_MAP line: every link rate of the network (KB for K)."""
    rates = sorted(set(g for _, _, g in net.links))
    vals = [value(g) for g in rates]
    vals = [v // 1000 if isinstance(v, int) else v for v in vals]
    return "%d %s" % (len(rates), " ".join("%d %s" % (g * 10**9, v) for g, v in zip(rates, vals)))


def write_flows(hpcc_dir, flows):
    """The simulator's flow.txt (src dst priority port bytes start_s, from HPCC_T0_S) and an
    empty trace.txt (validation/themis/gen.py uses it too)."""
    lines = ["%d" % len(flows)]
    lines += ["%d %d 3 100 %d %.9f" % (s, t, size, HPCC_T0_S + start / 1e9)
              for s, t, size, start in flows]
    with open(os.path.join(hpcc_dir, "flow.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(hpcc_dir, "trace.txt"), "w") as f:
        f.write("0\n")


def write_scenario(out, name, net, flows, congested_ingress, title, duration_us, stop_s):
    """flows: (src, dst, bytes, start_ns), sorted by start."""
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "hpcc"), exist_ok=True)
    os.makedirs(os.path.join(d, "switches"), exist_ok=True)
    nodes = len(net.hosts) + len(net.switches)
    # HPCC: topology, flows, config.
    topo = ["%d %d %d" % (nodes, len(net.switches), len(net.links)),
            " ".join(str(s) for s in sorted(net.switches))]
    topo += ["%d %d %dGbps %gms 0" % (a, b, g, LINK_DELAY_NS / 1e6) for a, b, g in net.links]
    with open(os.path.join(d, "hpcc", "topology.txt"), "w") as f:
        f.write("\n".join(topo) + "\n")
    write_flows(os.path.join(d, "hpcc"), flows)
    with open(os.path.join(d, "hpcc", "config.txt"), "w") as f:
        f.write(HPCC_CONFIG.format(
            payload=PAYLOAD, stop="%.3f" % (HPCC_T0_S + stop_s), ai=DCQCN["rate_ai_mbps"],
            hai=DCQCN["rate_hai_mbps"], kmax=ecn_map(net, kmax_bytes),
            kmin=ecn_map(net, kmin_bytes), pmax=ecn_map(net, lambda g: "%.2f" % PMAX),
            buffer_mb=BUFFER_BYTES // 2**20,
            qlen_start=int((HPCC_T0_S + stop_s + 1) * 1e9)))
    # longhaul: switches and the scenario, in two variants.
    os.makedirs(os.path.join(d, "switches-dequeue"), exist_ok=True)
    for sw in sorted(net.switches):
        text = switch_config(net, sw, congested_ingress, "%s, %s" % (name, switch_name(sw)))
        with open(os.path.join(d, "switches", switch_name(sw) + ".toml"), "w") as f:
            f.write(text)
        # HPCC's marking point (on the depth a packet leaves behind) and its dynamic PFC
        # threshold (1/8 of the free buffer, SwitchMmu's pfc_a_shift 3 at NIC rate; one share
        # for every port here, where HPCC gives a faster port a larger one), the 3 KB resume
        # offset, and the cap out of the way.
        deq = text.replace("pmax = %s }" % PMAX, 'pmax = %s, at = "dequeue" }' % PMAX)
        hdrm = int(re.search(r"headroom_bytes = (\d+)", text).group(1))
        cap = BUFFER_BYTES - hdrm
        deq = re.sub(r"xoff_bytes = \d+\nxon_bytes = \d+",
                     "xoff_bytes = %d\nxon_bytes = %d\ndynamic_alpha = 0.125"
                     % (cap, cap - RESUME_OFFSET), deq)
        assert deq.count("dynamic_alpha") == 1 and 'at = "dequeue"' in deq
        with open(os.path.join(d, "switches-dequeue", switch_name(sw) + ".toml"), "w") as f:
            f.write(deq)
    # (file suffix, control DSCP, CNP interval us, first decrease, switch configs, what).
    variants = [
        ("", 48, 0, "next-check", "switches",
         "ACK/NAK/CNP in strict class 6 at the switches (longhaul's default)"),
        ("-ackdata", 26, 0, "next-check", "switches",
         "ACK/NAK/CNP in the data class 3, as HPCC's switches"),
        ("-hpcc", 26, 0, "next-check", "switches-dequeue",
         "ACK/NAK/CNP in the data class 3, ECN marked at dequeue and dynamic PFC thresholds, "
         "as HPCC's switches"),
        ("-dcqcn-paper", 48, 50, "immediate", "switches",
         "DCQCN's first cut at the first CNP and at most one CNP "
         "per QP per 50 us (the DCQCN paper; longhaul's defaults before issue 41)"),
    ]
    for variant, control_dscp, cnp_us, first, swdir, what in variants:
        s = ["# Generated by validation/hpcc/gen.py: %s" % title,
             "# The same network and flows as hpcc/ (the HPCC simulator's input); DCQCN as HPCC's",
             "# run.py --cc dcqcn --bw 100. This variant: %s." % what,
             "", "[emulation]", "duration_us = %d" % duration_us, "seed = 1",
             "mtu = %d" % PAYLOAD, "ack_interval = 1", "window = 0",
             "nak_interval_us = 500", "cnp_interval_us = %d" % cnp_us,
             "data_dscp = 26", "control_dscp = %d" % control_dscp, "data_priority = 3",
             "", "[emulation.dcqcn]"]
        for k, v in DCQCN.items():
            v = first if k == "first_decrease" else v
            s.append("%s = %s" % (k, '"%s"' % v if isinstance(v, str) else v))
        s.append("")
        for h in sorted(net.hosts):
            s += ["[[hosts]]", 'name = "%s"' % host_name(h), 'ip = "%s"' % host_ip(h),
                  'mac = "%s"' % host_mac(h), "rate_gbps = %d" % GBPS, ""]
        for sw in sorted(net.switches):
            s += ["[[switches]]", 'name = "%s"' % switch_name(sw),
                  'config = "%s/%s.toml"' % (swdir, switch_name(sw)), ""]
        for a, b, gbps in net.links:
            def end(n, other):
                if net.is_host(n):
                    return host_name(n)
                return "%s:%s" % (switch_name(n), port_name(net, n, net.ports[n].index(other)))
            s += ["[[links]]", 'a = "%s"' % end(a, b), 'b = "%s"' % end(b, a),
                  "rate_gbps = %d" % gbps, "delay_ns = %d" % LINK_DELAY_NS, ""]
        for src, dst, size, start in flows:
            s += ["[[flows]]", 'src = "%s"' % host_name(src), 'dst = "%s"' % host_name(dst),
                  "size_bytes = %d" % size, "start_us = %.3f" % (start / 1e3), ""]
        with open(os.path.join(d, name + variant + ".toml"), "w") as f:
            f.write("\n".join(s))


def dumbbell(out):
    """Three senders on sw6, three receivers on sw7, one 100 Gb/s link between: 3 x 25 MB flows
    s_i -> r_i starting 0, 100, 200 us apart, all on sw6's port to sw7."""
    senders, receivers = [0, 1, 2], [3, 4, 5]
    net = Net(senders + receivers, [6, 7])
    for h in senders:
        net.link(h, 6)
    for h in receivers:
        net.link(h, 7)
    net.link(6, 7)
    flows = [(s, r, 25_000_000, 100_000 * i) for i, (s, r) in enumerate(zip(senders, receivers))]
    write_scenario(out, "dumbbell", net, flows, 3,
                   "dumbbell: 3 DCQCN flows of 25 MB on one 100 Gb/s bottleneck", 8000, 0.05)


def incast(out, name="incast", n=16):
    """n senders to one receiver behind one switch, 1 MB each, all at t = 0."""
    senders = list(range(n))
    net = Net(senders + [n], [n + 1])
    for h in senders + [n]:
        net.link(h, n + 1)
    flows = [(s, n, 1_000_000, 0) for s in senders]
    write_scenario(out, name, net, flows, n,
                   "incast: %d senders x 1 MB to one receiver at once" % n, 3000, 0.05)


def incast_pfc(out):
    """As incast with 48 senders: the queue passes the PFC threshold before DCQCN's cuts act."""
    incast(out, "incast-pfc", 48)


def read_cdf(name):
    path = os.path.join(CDF_DIR, name + ".txt")
    pts = []
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.split("#")[0].strip()
            if not line:
                continue
            try:
                size, pct = (float(x) for x in line.split())
            except ValueError:
                raise SystemExit("%s: line %d: expected two numbers: bytes percent" % (path, ln))
            pts.append((size, pct / 100.0))
    if len(pts) < 2 or pts[-1][1] != 1.0:
        raise SystemExit("%s: needs at least two points and to end at 100%%" % path)
    return pts


def cdf_sample(pts, u):
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if u <= y1:
            return x1 if y1 == y0 else x0 + (x1 - x0) * (u - y0) / (y1 - y0)
    return pts[-1][0]


def cdf_mean(pts):
    return sum((y1 - y0) * (x0 + x1) / 2 for (x0, y0), (x1, y1) in zip(pts, pts[1:]))


def websearch(out, load=0.5, arrivals_us=3000, seed=1):
    """Two tiers: four leaves of four hosts at 100 Gb/s, each leaf's 400 Gb/s uplink to one spine
    (no oversubscription, and no ECMP: the two simulators' hashes would put flows on different
    paths), 1 us links. Every host sends WebSearch flows (scenarios/cdf/websearch.txt, linear
    between points) to a uniform other host, Poisson arrivals at `load` of its NIC rate for
    `arrivals_us`; the flows are written out explicitly so that both simulators run the same
    ones."""
    hosts = list(range(16))
    leaves, spine = [16, 17, 18, 19], 20
    net = Net(hosts, leaves + [spine])
    for h in hosts:
        net.link(h, leaves[h // 4])
    for leaf in leaves:
        net.link(leaf, spine, 4 * GBPS)
    pts = read_cdf("websearch")
    gap_ns = cdf_mean(pts) * 8 / (GBPS * 1e9 * load) * 1e9
    rng = random.Random(seed)
    flows = []
    for h in hosts:
        t = rng.expovariate(1 / gap_ns)
        while t < arrivals_us * 1000:
            size = max(1, int(round(cdf_sample(pts, rng.random()))))
            dst = rng.choice([x for x in hosts if x != h])
            flows.append((h, dst, size, int(t)))
            t += rng.expovariate(1 / gap_ns)
    flows.sort(key=lambda f: (f[3], f[0]))
    write_scenario(out, "websearch", net, flows, 4,
                   "leaf-spine (4 x 4 hosts at 100 Gb/s, one spine at 400 Gb/s), WebSearch at %d%% load for %d us"
                   % (load * 100, arrivals_us), arrivals_us, 0.2)


SCENARIOS = collections.OrderedDict([("dumbbell", dumbbell), ("incast", incast),
                                     ("incast-pfc", incast_pfc), ("websearch", websearch)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "scenarios"),
                    help="where to write (default: validation/hpcc/scenarios)")
    args = ap.parse_args()
    for name, make in SCENARIOS.items():
        make(args.out)
        print("wrote %s" % os.path.join(args.out, name))


if __name__ == "__main__":
    main()
