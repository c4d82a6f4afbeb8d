#!/usr/bin/env python3
"""Writes the Reflex scenarios (scenarios/reflex-*.toml) and their switch configs
(scenarios/reflex/): paper 003's setting (section II-C, IV-A) at a size that runs in seconds.
Two DCs 500 us apart (the paper's WAN delay) on a 100 Gb/s WAN link; in each, two leaves of four
25 Gb/s hosts under one spine (non-blocking 100 Gb/s uplinks), and an ESW between the spine and
the WAN. WebSearch flows between every pair of hosts (8 of each host's 15 destinations are in the
other DC) at 70% load for 10 ms; TIMELY or Swift senders.

- `reflex-CC-off.toml`: every switch is the commodity baseline (PFC, no Reflex);
- `reflex-CC.toml`: Reflex at both ESWs with Table I's values (NSF + NDT with its pause;
  T_interval 5 us for TIMELY, 3 us for Swift), and the RNICs' timestamps (host agent "reflex");
- `reflex-CC-nopause.toml`: the same with alpha = 1 (the Controlled queue never pauses): the
  ablation docs/reflex.md reports;
- `reflex-CC-shortpause.toml`: Table I's values but T_maxpause 50 us instead of 500 us (knob
  TMAX_SHORT): the pause bounded to what the measurements in docs/reflex.md (issue 16) show it
  helps with.

Swift runs the paper's base_delay and hop_delay; its windows start at the largest BDP of the
network (the inter-DC path), the emulator's default, as the HPCC simulator's senders do.

    python3 scenarios/gen_reflex.py

Environment knobs for experiments (defaults in brackets): OUT, the directory the scenarios go to
(their switch configs in OUT/reflex/) [scenarios/], HOSTS per leaf [4], UPLINK Gb/s [100], ESW
(the spine-ESW link) and WAN Gb/s [100, 100], LOAD [0.7], STOP_US of traffic [10000], DUR_US of
the run [60000], ALPHA [0.7], TMAX (T_maxpause ns) [500000], TMAX_SHORT (the shortpause
variants' T_maxpause ns) [50000], TDST (T_dst_thresh ns) [10000],
ACT (active_timeout ns) [100000], ESW_XOFF and ESW_LIMIT (bytes) [256 KiB, 32 MiB].
"""
import os

HERE = os.environ.get("OUT", os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(HERE, "reflex")

WAN_DELAY_NS = 500_000
HOST_GBPS = 25
UPLINK_GBPS = int(os.environ.get("UPLINK", 100))
ESW_GBPS = int(os.environ.get("ESW", 100))
WAN_GBPS = int(os.environ.get("WAN", 100))
HOSTS_PER_LEAF = int(os.environ.get("HOSTS", 4))
LOAD = float(os.environ.get("LOAD", 0.7))
STOP_US = int(os.environ.get("STOP_US", 10000))
DURATION_US = int(os.environ.get("DUR_US", 60000))
ALPHA = os.environ.get("ALPHA", "0.7")
TMAX = os.environ.get("TMAX", "500000")
TMAX_SHORT = os.environ.get("TMAX_SHORT", "50000")
ACT = os.environ.get("ACT", "100000")
TDST = os.environ.get("TDST", "10000")
ESW_XOFF = int(os.environ.get("ESW_XOFF", 262144))
ESW_LIMIT = int(os.environ.get("ESW_LIMIT", 33554432))

# 2 * one-way delay * rate of the WAN port, plus two frames each way.
WAN_HEADROOM = 2 * WAN_DELAY_NS * WAN_GBPS // 8 + 4 * 4224

QOS = """
[qos]
trust = "dscp"
default_class = 0
dscp_map = {{ "26" = 3, "48" = 6 }}
scheduler = "wrr"
strict_classes = [6, 7]
weights = [1, 1, 1, 4, 1, 1, 1, 1]
queue_limit_bytes = 1048576

[[qos.classes]]
class = 3
lossless = true
limit_bytes = {limit}

[[qos.classes]]
class = 6
limit_bytes = 262144

[pfc]
enabled = true
xoff_bytes = {xoff}
xon_bytes = {xon}
headroom_bytes = {headroom}
pause_quanta = 65535
"""

REFLEX = """
[reflex]
dc_ports = ["spine"]
wan_ports = ["wan"]

[reflex.nsf]
t_src_thresh_ns = 5000
t_interval_ns = {interval}
n_cool = 5

[reflex.ndt]
t_dst_thresh_ns = {tdst}
n_throttle = 8
alpha = {alpha}
t_maxpause_ns = {tmax}
controlled_queue = 2
active_timeout_ns = {act}
"""


def mac(dc, kind, a, b):
    return "02:%02x:%02x:%02x:%02x:00" % (dc, kind, a, b)


def host_ip(dc, leaf, h):
    return "10.%d.%d.%d" % (dc, leaf, h + 1)


def host_mac(dc, leaf, h):
    return mac(dc, 0x10, leaf, h)


def switch(name, pipeline, ports, routes, headroom=None, limit=8388608, extra="",
           xoff=262144):
    if headroom is None:
        # What arrives after an XOFF on the fastest 1 us port (a round trip at its rate, plus two
        # frames each way), at least 64 KiB.
        fastest = max(gbps for _, _, gbps in ports)
        headroom = max(65536, 2 * 1000 * fastest // 8 + 4 * 4224)
    s = ('[switch]\nname = "%s"\npipeline = "%s"\npool_buffers = 131072\n'
         'buffer_data_room = 4480\nbuffer_bytes = 134217728\nseed = 1\n' % (name, pipeline))
    for i, (pname, pmac, gbps) in enumerate(ports):
        s += ('\n[[ports]]\nid = %d\nname = "%s"\nmac = "%s"\nrate_gbps = %d\nmtu = 4200\n'
              % (i, pname, pmac, gbps))
    s += QOS.format(headroom=headroom, limit=limit, xoff=xoff, xon=xoff - 32768)
    for prefix, port, nh in routes:
        s += '\n[[routes]]\nprefix = "%s"\nport = "%s"\nnext_hop_mac = "%s"\n' % (prefix, port, nh)
    return s + extra


def dc_switches(dc, other):
    """The switch configs of DC `dc` (0 = A, 1 = B): two leaves, a spine, the ESW (baseline and
    Reflex for TIMELY and for Swift). Returns {file name: text}."""
    out = {}
    spine_port = lambda p: mac(dc, 0x30, 0, p)  # noqa: E731
    esw_port = lambda p: mac(dc, 0x40, 0, p)  # noqa: E731
    for leaf in range(2):
        ports = [("h%d" % h, mac(dc, 0x20, leaf, h), HOST_GBPS) for h in range(HOSTS_PER_LEAF)]
        ports.append(("up", mac(dc, 0x20, leaf, 0xff), UPLINK_GBPS))
        routes = [("%s/32" % host_ip(dc, leaf, h), "h%d" % h, host_mac(dc, leaf, h))
                  for h in range(HOSTS_PER_LEAF)]
        routes.append(("10.0.0.0/8", "up", spine_port(leaf)))
        out["dc%d-leaf%d.toml" % (dc, leaf)] = switch("dc%d-leaf%d" % (dc, leaf), "baseline",
                                                      ports, routes)
    ports = [("leaf%d" % l, spine_port(l), UPLINK_GBPS) for l in range(2)]
    ports.append(("esw", spine_port(2), ESW_GBPS))
    routes = [("10.%d.%d.0/24" % (dc, l), "leaf%d" % l, mac(dc, 0x20, l, 0xff)) for l in range(2)]
    routes.append(("10.%d.0.0/16" % other, "esw", esw_port(0)))
    out["dc%d-spine.toml" % dc] = switch("dc%d-spine" % dc, "baseline", ports, routes)
    ports = [("spine", esw_port(0), ESW_GBPS), ("wan", esw_port(1), WAN_GBPS)]
    routes = [("10.%d.0.0/16" % dc, "spine", spine_port(2)),
              ("10.%d.0.0/16" % other, "wan", mac(other, 0x40, 0, 1))]
    kw = dict(headroom=WAN_HEADROOM, limit=ESW_LIMIT, xoff=ESW_XOFF)
    out["dc%d-esw.toml" % dc] = switch("dc%d-esw" % dc, "baseline", ports, routes, **kw)
    for cc, interval, alpha, tmax in (
            ("timely", 5000, ALPHA, TMAX), ("swift", 3000, ALPHA, TMAX),
            ("timely-nopause", 5000, "1.0", TMAX), ("swift-nopause", 3000, "1.0", TMAX),
            ("timely-shortpause", 5000, ALPHA, TMAX_SHORT),
            ("swift-shortpause", 3000, ALPHA, TMAX_SHORT)):
        out["dc%d-esw-reflex-%s.toml" % (dc, cc)] = switch(
            "dc%d-esw" % dc, "reflex", ports, routes,
            extra=REFLEX.format(interval=interval, alpha=alpha, tmax=tmax, act=ACT, tdst=TDST),
            **kw)
    return out


def scenario(variant, reflex):
    cc = variant.split("-")[0]
    name = "reflex-%s%s" % (variant, "" if reflex else "-off")
    if not reflex:
        what = "commodity ESWs (the baseline), no Reflex"
    elif variant.endswith("nopause"):
        what = "Reflex at both ESWs without NDT's pause (alpha = 1), timestamps on the RNICs"
    elif variant.endswith("shortpause"):
        what = ("Reflex at both ESWs, Table I but T_maxpause %d us, timestamps on the RNICs"
                % (int(TMAX_SHORT) // 1000))
    else:
        what = "Reflex (NSF + NDT, Table I) at both ESWs, timestamps on the RNICs"
    s = ("# Generated by scenarios/gen_reflex.py: paper 003's setting, small. Two DCs 500 us apart\n"
         "# on a %d Gb/s WAN, each two leaves of %d %d Gb/s hosts, a spine and an ESW; WebSearch\n"
         "# between all hosts at %d%% load for %d ms; %s senders; %s.\n"
         "# emulator/tests/scenarios.rs compares it with reflex-%s-off.toml.\n\n"
         % (WAN_GBPS, HOSTS_PER_LEAF, HOST_GBPS, int(LOAD * 100), STOP_US // 1000,
            "TIMELY" if cc == "timely" else "Swift", what, cc))
    s += "[emulation]\nduration_us = %d\nseed = 1\nmtu = 1024\nsample_us = 100\ncc = \"%s\"\n" % (
        DURATION_US, cc)
    if reflex:
        s += 'host_agents = ["reflex"]\n'
    if cc == "swift":
        # Section II-C: "Swift uses a base_delay of 200ns and a hop_delay of 1us". Every window
        # starts at the network's largest BDP, the emulator's default (as the HPCC simulator's
        # senders, which the paper's NS-3 runs build on).
        s += "\n[emulation.swift]\nbase_target_us = 0.2\nhop_delay_us = 1\n"
    names = []
    for dc in range(2):
        for leaf in range(2):
            for h in range(HOSTS_PER_LEAF):
                n = "%s%d" % ("ab"[dc], leaf * HOSTS_PER_LEAF + h)
                names.append(n)
                s += ('\n[[hosts]]\nname = "%s"\nip = "%s"\nmac = "%s"\nrate_gbps = %d\ndc = "%s"\n'
                      % (n, host_ip(dc, leaf, h), host_mac(dc, leaf, h), HOST_GBPS, "AB"[dc]))
    for dc in range(2):
        esw = "dc%d-esw%s.toml" % (dc, "-reflex-" + variant if reflex else "")
        for sw in ("dc%d-leaf0.toml" % dc, "dc%d-leaf1.toml" % dc, "dc%d-spine.toml" % dc, esw):
            s += '\n[[switches]]\nname = "%s"\nconfig = "reflex/%s"\n' % (
                sw.split(".")[0].replace("-reflex-" + variant, ""), sw)
    link = '\n[[links]]\na = "%s"\nb = "%s"\nrate_gbps = %d\ndelay_ns = %d\n'
    for dc in range(2):
        for leaf in range(2):
            for h in range(HOSTS_PER_LEAF):
                s += link % ("%s%d" % ("ab"[dc], leaf * HOSTS_PER_LEAF + h), "dc%d-leaf%d:h%d" % (dc, leaf, h),
                             HOST_GBPS, 1000)
            s += link % ("dc%d-leaf%d:up" % (dc, leaf), "dc%d-spine:leaf%d" % (dc, leaf),
                         UPLINK_GBPS, 1000)
        s += link % ("dc%d-spine:esw" % dc, "dc%d-esw:spine" % dc, ESW_GBPS, 1000)
    s += link % ("dc0-esw:wan", "dc1-esw:wan", WAN_GBPS, WAN_DELAY_NS)
    quoted = ", ".join('"%s"' % n for n in names)
    s += ('\n[[traffic]]\nsources = [%s]\ndestinations = [%s]\nload = %s\ncdf = "websearch"\n'
          'stop_us = %d\n' % (quoted, quoted, LOAD, STOP_US))
    return name + ".toml", s


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {}
    files.update(dc_switches(0, 1))
    files.update(dc_switches(1, 0))
    for f, text in sorted(files.items()):
        with open(os.path.join(OUT, f), "w") as fh:
            fh.write("# Generated by scenarios/gen_reflex.py.\n" + text)
    for cc, reflex in (("timely", False), ("timely", True), ("timely-nopause", True),
                       ("timely-shortpause", True), ("swift", False), ("swift", True),
                       ("swift-nopause", True), ("swift-shortpause", True)):
        f, text = scenario(cc, reflex)
        with open(os.path.join(HERE, f), "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
