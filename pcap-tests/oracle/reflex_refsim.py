"""A small reference simulation of the Reflex ESW (docs/reflex.md), for testing the reflex_*
cases' check.py scripts: they must pass on its output and fail on mutations of it
(test_reflex_model.py). Independent of the Rust code; simplifications (stated, so that a
difference from longhaul is not mistaken for a bug there):

* IPv4 only, no VLANs, LPM routes and the DSCP map from the config, MACs rewritten, TTL - 1;
* a packet is enqueued at its pcap timestamp (no ingress serialization, no pipeline latency);
  an idle port starts sending at once; a frame occupies the link ceil((len + 24) * 8 / rate) ns;
  events at the same ns: arrivals first, then departures (`arrivals_first=False`: the other way);
* per port: strict classes 6 and 7 first, then packet WRR (weights from [qos] weights; on the DC
  ports class 3 = n_throttle and the Controlled queue = 1), visited in index order, a turn ends
  when its credit is used or the queue is empty at a pick;
* NSF at WAN egress, NDT (Flow State Table, tickets, timestamp rewrite at DC egress) as
  docs/reflex.md says; no pause (the cases keep congested/active <= alpha, asserted), no PFC,
  no idle ageing, no buffer limits.

`ndt_normal_only=True` / `ndt_no_ooo=True` / `n_throttle=...` make deliberately broken switches.
"""
import ipaddress
import os
import sys
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reflex_model as rm  # noqa: E402

OVERHEAD = 24


def load_case_config(case_dir):
    return rm.load_case_config(case_dir)


def mac_bytes(s):
    return bytes.fromhex(s.replace(":", ""))


def rewrite(frame, src_mac, dst_mac):
    return rm.routed(frame, src_mac, dst_mac)


def set_ts(frame, ts):
    return rm.with_ts(frame, ts)


class Port:
    def __init__(self, p, rate_bps):
        self.name, self.id, self.mac = p["name"], p["id"], mac_bytes(p["mac"])
        self.rate = rate_bps
        self.queues = [[] for _ in range(8)]
        self.busy_until = 0
        self.ready = None
        self.out = []
        self.wrr_cur, self.wrr_credit = 7, 0

    def empty(self):
        return not any(self.queues)


class Sim:
    def __init__(self, cfg, ndt_normal_only=False, ndt_no_ooo=False, n_throttle=None, arrivals_first=True):
        self.cfg = cfg
        self.arrivals_first = arrivals_first
        self.ports = {p["name"]: Port(p, int(round(p["rate_gbps"] * 1e9))) for p in cfg["ports"]}
        self.by_id = {p.id: p for p in self.ports.values()}
        self.routes = [(ipaddress.ip_network(r["prefix"]), r["port"], mac_bytes(r["next_hop_mac"]))
                       for r in cfg["routes"]]
        q = cfg["qos"]
        self.dscp = {int(k): v for k, v in q["dscp_map"].items()}
        self.strict = sorted(q.get("strict_classes", []), reverse=True)
        rf = cfg["reflex"]
        self.dc, self.wan = set(rf["dc_ports"]), set(rf["wan_ports"])
        self.int_port = rf["int_udp_port"]
        self.nsf_p, self.ndt_p = rf["nsf"], rf["ndt"]
        self.cq = self.ndt_p["controlled_queue"]
        nt = n_throttle if n_throttle is not None else self.ndt_p["n_throttle"]
        self.weights = {}
        for name, port in self.ports.items():
            w = list(q["weights"])
            if name in self.dc:
                w[3], w[self.cq] = nt, 1
            self.weights[name] = w
        self.normal_only, self.no_ooo = ndt_normal_only, ndt_no_ooo
        self.nsf = {}       # flow -> dict(state, c, last)
        self.fst = {}       # flow -> dict(congested, last_ticket)
        self.ticket = {}    # port -> next ticket
        self.left = {}      # port -> last ticket that left
        self.trace = []     # NSF decisions (t, key, t_src, state, pa)
        self.seq = 0

    def route(self, dst):
        best = None
        for net, port, nh in self.routes:
            if net.version == 4 and ipaddress.ip_address(dst) in net:
                if best is None or net.prefixlen > best[0].prefixlen:
                    best = (net, port, nh)
        return best

    def enqueue(self, port, cls, t, frame, meta):
        if port.empty():
            port.ready = max(port.busy_until, t)
        meta["seq"] = self.seq
        self.seq += 1
        port.queues[cls].append((frame, meta))

    def arrive(self, t, in_port, frame):
        d = rm.decode(frame, self.int_port)
        if frame[12:14] != b"\x08\x00" or frame[22] <= 1:
            return
        dst = ".".join(str(x) for x in frame[30:34])
        r = self.route(dst)
        if r is None:
            return
        _, out_name, nh = r
        out = self.ports[out_name]
        f = rewrite(frame, out.mac, nh)
        cls = self.dscp.get(frame[15] >> 2, self.cfg["qos"]["default_class"])
        meta = dict(in_port=in_port, cls=cls)
        if d is not None and in_port in self.wan and out_name in self.dc and rm.is_data(d):
            key = (d["ip_src"], d["ip_dst"], d["qpn"])
            fl = self.fst.setdefault(key, dict(congested=False, last_ticket=None))
            held = (fl["last_ticket"] is not None and fl["last_ticket"] > self.left.get(out_name, -1)
                    and out.queues[self.cq])
            if not self.normal_only and (fl["congested"] or (held and not self.no_ooo)):
                tk = self.ticket.get(out_name, 0)
                self.ticket[out_name] = tk + 1
                fl["last_ticket"] = tk
                meta["ticket"] = tk
                cls = self.cq
            meta["ndt"] = True
        elif (d is not None and in_port in self.dc and out_name in self.wan and d["echo"] and not d["nsf"]
              and d.get("bth_opcode") == rm.OP_ACK):
            key = (d["ip_dst"], d["ip_src"], d["bth_destqp"])
            if key in self.fst:
                self.fst[key]["congested"] = t - d["ts"] > self.ndt_p["t_dst_thresh_ns"]
                active = [k for k in self.fst]
                cong = [k for k in active if self.fst[k]["congested"]]
                assert len(cong) / len(active) <= self.ndt_p["alpha"], "the simulation has no pause"
        elif d is not None and in_port in self.dc and out_name in self.wan and rm.is_data(d):
            meta["nsf"] = (d, frame)
        self.enqueue(out, cls, t, f, meta)

    def pick(self, port):
        for c in self.strict:
            if port.queues[c]:
                return c
        w = self.weights[port.name]
        if port.wrr_credit > 0 and port.queues[port.wrr_cur] and port.wrr_cur not in self.strict:
            port.wrr_credit -= 1
            return port.wrr_cur
        q = port.wrr_cur
        for _ in range(8):
            q = (q + 1) % 8
            if q not in self.strict and w[q] > 0 and port.queues[q]:
                port.wrr_cur, port.wrr_credit = q, w[q] - 1
                return q
        raise AssertionError("nothing to pick")

    def depart(self, port, t):
        c = self.pick(port)
        frame, meta = port.queues[c].pop(0)
        if meta.get("ndt"):
            frame = set_ts(frame, t)
            if "ticket" in meta:
                self.left[port.name] = meta["ticket"]
        port.out.append((t, frame))
        wire = rm.wire_ns(len(frame), port.rate, OVERHEAD)
        port.busy_until = t + wire
        port.ready = port.busy_until if not port.empty() else None
        if "nsf" in meta:
            self.nsf_step(port, t, *meta["nsf"])

    def nsf_step(self, port, t, d, data):
        p = self.nsf_p
        key = (d["ip_src"], d["ip_dst"], d["qpn"])
        trace = []
        self.nsf.setdefault(key, [])
        self.nsf[key].append((t, key, rm.t_src(t, d["ts"])))
        # Re-run the reference model on the flow's history: the last event decides.
        idx = rm.nsf_model(self.nsf[key], p["t_src_thresh_ns"], p["t_interval_ns"], p["n_cool"], trace)
        pa = bool(idx) and idx[-1] == len(self.nsf[key]) - 1
        self.trace.append((t, key, trace[-1][2], trace[-1][3], pa))
        if not pa:
            return
        r = self.route(d["ip_src"])
        if r is None:
            return
        out = self.ports[r[1]]
        ack = rm.expected_pseudo_ack(data, out.mac, r[2], ttl=63, dscp=p.get("ack_dscp", 48),
                                     int_port=self.int_port)
        self.enqueue(out, self.dscp.get(p.get("ack_dscp", 48), 0), t, ack, dict(cls=6))
        if out.ready is None or out.ready < t:
            out.ready = max(out.busy_until, t)

    def run(self, inputs):
        """inputs: {port name: [(ts, frame)]}. Returns {port name: [(ts, frame)]}."""
        ev = sorted(((ts, self.ports[p].id, i, p, f) for p, recs in inputs.items()
                     for i, (ts, f) in enumerate(recs)), key=lambda e: e[:3])
        k = 0
        while True:
            t_arr = ev[k][0] if k < len(ev) else None
            busy = [p for p in self.ports.values() if p.ready is not None]
            t_dep = min((p.ready for p in busy), default=None)
            if t_arr is None and t_dep is None:
                break
            if t_dep is None or (t_arr is not None and (t_arr < t_dep or (t_arr == t_dep and self.arrivals_first))):
                ts, _, _, pname, f = ev[k]
                k += 1
                self.arrive(ts, pname, f)
            else:
                port = min(busy, key=lambda p: (p.ready, p.id))
                self.depart(port, t_dep)
        return {name: p.out for name, p in self.ports.items()}


def run_case(case_dir, **kw):
    """Inputs of cases/<case_dir> through the simulation; {port: [(ts, frame)]}."""
    from pcaputil import read_pcap
    cfg = load_case_config(case_dir)
    with open(os.path.join(case_dir, "case.toml"), "rb") as f:
        case = tomllib.load(f)
    inputs = {i["port"]: read_pcap(os.path.join(case_dir, i["pcap"])) for i in case["input"]}
    sim = Sim(cfg, **kw)
    return inputs, sim.run(inputs), sim
