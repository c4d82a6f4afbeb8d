"""The two-DC network of the THEMIS (000) and Reflex (003) evaluations, which share it: per DC
4 ToR and 4 Leaf switches in full mesh ("Leaf-Spine ... 16 servers and 9 switches, including one
External Switch"), 4 servers per ToR, one ESW behind the Leafs; the ESWs 500 us apart on a
1.6 Tb/s link; 1 us per link inside a DC (base RTT 8 us inside a DC, 1012 us between DCs in
both papers). Used by gen_themis.py and gen_reflex.py here; `write` writes the switch configs,
`scenario` a scenario's text.
"""
import os

DCS = 2
TORS = 4
LEAFS = 4
HOSTS_PER_TOR = 4
HOST_GBPS = 100
WAN_GBPS = 1600
LINK_NS = 1000
WAN_NS = 500_000
RESUME_OFFSET = 3 * 1024         # HPCC's SwitchMmu: resume 3 KB below the threshold


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


def host_name(dc, t, h):
    return "dc%d-t%d-h%d" % (dc, t, h)


HOSTS = [(host_name(dc, t, h), ip(dc, t, h), host_mac(dc, t, h), "DC%d" % dc)
         for dc in range(DCS) for t in range(TORS) for h in range(HOSTS_PER_TOR)]


class Params:
    """What the papers set differently. `ecn(gbps)`: (kmin, kmax) bytes at a port rate, or None
    for no ECN; `esw`: {suffix: (pipeline, scheduler, section(dc) -> TOML)} the ESW variants
    beside the commodity one ("")."""

    def __init__(self, generator, leaf_esw_gbps, buffer, pfc_alpha, ecn, esw):
        self.generator = generator
        self.leaf_esw_gbps = leaf_esw_gbps
        self.buffer = buffer
        self.pfc_alpha = pfc_alpha
        self.ecn = ecn
        self.esw = esw


def switch(p, name, ports, routes, pipeline="baseline", scheduler="drr", buffer=None,
           headroom=None, extra="", xoff=None):
    """ports: (name, mac, Gb/s); routes: (prefix, port, next-hop MAC) or (prefix, [(port, MAC)])
    for an ECMP group. ECN at the thresholds of the switch's slowest port (where its queues
    build); PFC on the dynamic threshold (`p.pfc_alpha`; None: static), with the headroom HPCC's
    third.cc gives a port (3 x its rate x its link's delay) at the fastest port unless given,
    XOFF at most `xoff` (default: all the shared buffer, so that the dynamic share alone
    decides)."""
    buffer = buffer or p.buffer
    rates = [x[2] for x in ports]
    if headroom is None:
        headroom = 3 * max(rates) * 10**9 * LINK_NS // 8 // 10**9
    if xoff is None:
        xoff = buffer - len(ports) * headroom
    s = ['[switch]', 'name = "%s"' % name, 'pipeline = "%s"' % pipeline,
         'pool_buffers = %d' % min(max(65536, buffer // 1024), 262144), 'buffer_data_room = 2048',
         'buffer_bytes = %d' % buffer, 'seed = 1', 'ecmp_seed = %d' % (len(name) + sum(map(ord, name)))]
    for i, (pn, pm, g) in enumerate(ports):
        s += ['', '[[ports]]', 'id = %d' % i, 'name = "%s"' % pn, 'mac = "%s"' % pm,
              'rate_gbps = %g' % g, 'mtu = 1500']
    s += ['', '[qos]', 'trust = "dscp"', 'default_class = 0', 'dscp_map = { "26" = 3, "48" = 6 }',
          'scheduler = "%s"' % scheduler, 'strict_classes = [6, 7]',
          'weights = [1, 1, 1, 4, 1, 1, 1, 1]']
    if scheduler == "drr":
        s.append('drr_quantum_bytes = 4224')
    s.append('queue_limit_bytes = 1048576')
    s += ['', '[[qos.classes]]', 'class = 3', 'lossless = true', 'limit_bytes = %d' % buffer]
    ecn = p.ecn(min(rates))
    if ecn:
        s.append('ecn = { kmin_bytes = %d, kmax_bytes = %d, pmax = 0.2, at = "dequeue" }' % ecn)
    s += ['', '[[qos.classes]]', 'class = 6', 'limit_bytes = 262144',
          '', '[pfc]', 'enabled = true',
          'xoff_bytes = %d' % xoff, 'xon_bytes = %d' % (xoff - RESUME_OFFSET)]
    if p.pfc_alpha is not None:
        s.append('dynamic_alpha = %s' % p.pfc_alpha)
    s += ['headroom_bytes = %d' % headroom, 'pause_quanta = 65535',
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


def write(out, p):
    """Writes every switch config into out/switches/; returns ({ESW suffix: [(switch, file)]},
    links)."""
    os.makedirs(os.path.join(out, "switches"), exist_ok=True)
    # (switch, {ESW suffix: file}) in the order of the network; "" for every variant's.
    order, links = [], []

    def put(name, text):
        with open(os.path.join(out, "switches", name + ".toml"), "w") as f:
            f.write("# Generated by %s.\n" % p.generator + text)
        return (name, "switches/%s.toml" % name)

    for dc in range(DCS):
        other = 1 - dc
        for t in range(TORS):
            ports = [("h%d" % h, tor_mac(dc, t, h), HOST_GBPS) for h in range(HOSTS_PER_TOR)]
            ports += [("l%d" % l, tor_mac(dc, t, HOSTS_PER_TOR + l), HOST_GBPS) for l in range(LEAFS)]
            routes = [(ip(dc, t, h) + "/32", "h%d" % h, host_mac(dc, t, h)) for h in range(HOSTS_PER_TOR)]
            routes.append(("10.0.0.0/8", [("l%d" % l, leaf_mac(dc, l, t)) for l in range(LEAFS)]))
            name = "dc%d-tor%d" % (dc, t)
            order.append((name, {"": put(name, switch(p, name, ports, routes))[1]}))
            for h in range(HOSTS_PER_TOR):
                links.append((host_name(dc, t, h), "%s:h%d" % (name, h), LINK_NS, HOST_GBPS))
        for l in range(LEAFS):
            ports = [("t%d" % t, leaf_mac(dc, l, t), HOST_GBPS) for t in range(TORS)]
            ports.append(("esw", leaf_mac(dc, l, TORS), p.leaf_esw_gbps))
            routes = [("10.%d.%d.0/24" % (dc, t), "t%d" % t, tor_mac(dc, t, HOSTS_PER_TOR + l)) for t in range(TORS)]
            routes.append(("10.%d.0.0/16" % other, "esw", esw_mac(dc, l)))
            name = "dc%d-leaf%d" % (dc, l)
            order.append((name, {"": put(name, switch(p, name, ports, routes))[1]}))
            for t in range(TORS):
                links.append(("dc%d-tor%d:l%d" % (dc, t, l), "%s:t%d" % (name, t), LINK_NS, HOST_GBPS))
        ports = [("l%d" % l, esw_mac(dc, l), p.leaf_esw_gbps) for l in range(LEAFS)]
        ports.append(("wan", esw_mac(dc, LEAFS), WAN_GBPS))
        routes = [("10.%d.0.0/16" % dc, [("l%d" % l, leaf_mac(dc, l, TORS)) for l in range(LEAFS)]),
                  ("10.%d.0.0/16" % other, "wan", esw_mac(other, LEAFS))]
        # Deep buffer: the papers' buffer shared plus, per port, the long link's headroom (2 x
        # one-way delay x 1.6 Tb/s and two frames), so that a pause of the WAN loses nothing.
        hdrm = 2 * WAN_NS * WAN_GBPS // 8 + 2 * 1500
        buf = p.buffer + len(ports) * hdrm
        name = "dc%d-esw" % dc
        files = {"": put(name, switch(p, name, ports, routes, buffer=buf, headroom=hdrm))[1]}
        for suffix, (pipeline, scheduler, section) in sorted(p.esw.items()):
            files[suffix] = put(name + "-" + suffix, switch(
                p, name, ports, routes, pipeline, scheduler, buf, hdrm, section(dc)))[1]
        order.append((name, files))
        for l in range(LEAFS):
            links.append(("dc%d-leaf%d:esw" % (dc, l), "%s:l%d" % (name, l), LINK_NS, p.leaf_esw_gbps))
    links.append(("dc0-esw:wan", "dc1-esw:wan", WAN_NS, WAN_GBPS))
    variants = [""] + sorted(p.esw)
    return {v: [(n, f.get(v, f[""])) for n, f in order] for v in variants}, links


def dc_ports():
    """The ESW's ports toward its own DC."""
    return ", ".join('"l%d"' % l for l in range(LEAFS))


def scenario(comment, emulation, switches, links, load, arrivals_us, up, hosts=None,
             traffic=None):
    """A scenario's text: `comment` lines, `emulation` lines after `[emulation]`, `hosts`
    ((name, IP, MAC, DC); default twodc's 32) at HOST_GBPS, and `traffic` ((sources,
    destinations, load, CDF); default every server sending WebSearch flows to all the others at
    `load`) for `arrivals_us`; `up` prefixes the switch configs' paths."""
    hosts = hosts or HOSTS
    s = ["# " + c for c in comment] + ["", "[emulation]"] + emulation
    for hn, hip, hmac, dc in hosts:
        s += ["[[hosts]]", 'name = "%s"' % hn, 'ip = "%s"' % hip, 'mac = "%s"' % hmac,
              "rate_gbps = %d" % HOST_GBPS, 'dc = "%s"' % dc, ""]
    for name, cfg in switches:
        s += ["[[switches]]", 'name = "%s"' % name,
              'config = "%s%s"' % (up, cfg), ""]
    for a, b, ns, gbps in links:
        s += ["[[links]]", 'a = "%s"' % a, 'b = "%s"' % b, "rate_gbps = %d" % gbps,
              "delay_ns = %d" % ns, ""]
    everyone = [h[0] for h in hosts]
    for src, dst, ld, cdf in traffic or [(everyone, everyone, load, "websearch")]:
        s += ["[[traffic]]", "sources = [%s]" % ", ".join('"%s"' % h for h in src),
              "destinations = [%s]" % ", ".join('"%s"' % h for h in dst),
              "load = %s" % ld, 'cdf = "%s"' % cdf, "stop_us = %d" % arrivals_us, ""]
    return "\n".join(s)


def write_family(out, p, scales, loads, variants):
    """Writes the switch configs and, per scale (dir, arrivals us, duration us), load and
    variant, `DIR/NAME-LOAD.toml`. `variants`: (NAME, ESW suffix, comment(load, arrivals_us),
    emulation lines)."""
    switches, links = write(out, p)
    for sub, arrivals_us, duration_us in scales:
        d = os.path.join(out, sub)
        os.makedirs(d, exist_ok=True)
        for load in loads:
            for name, esw, comment, emulation in variants:
                text = scenario(comment(load, arrivals_us),
                                ["duration_us = %d" % duration_us, "seed = 1"] + emulation,
                                switches[esw], links, load / 100, arrivals_us,
                                "../" if sub else "")
                with open(os.path.join(d, "%s-%d.toml" % (name, load)), "w") as f:
                    f.write(text)
