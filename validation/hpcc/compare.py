#!/usr/bin/env python3
"""Runs the reference scenarios (gen.py) in `longhaul emulate` and, given a build of the HPCC
simulator (build.sh), in NS-3 too, and prints the side-by-side table (docs/validation.md).

    python3 validation/hpcc/compare.py --longhaul target/release/longhaul [--ns3 BUILD_DIR]
        [--scenarios dumbbell,incast,websearch] [--out FILE] [--record] [--check]

Without --ns3 the NS-3 half comes from the recorded runs in validation/hpcc/results/ (their
wall and CPU times too: then the speed rows compare runs made at different times). --record
writes the NS-3 runs made here into results/. --check compares longhaul's figures with the
recorded NS-3 ones within the bounds of tolerances.json and exits 1 when one is out.

Runs: longhaul `default` (NAME.toml: ACK/NAK/CNP in strict class 6), `ackdata`
(NAME-ackdata.toml: in the data class, as HPCC's switches) and `hpcc` (NAME-hpcc.toml: that, ECN
at dequeue and dynamic PFC thresholds, as HPCC's switches); NS-3 `stock` (as published, with
run.py --cc dcqcn's settings) and with longhaul's choices switched on (patch_variants.py):
`ack-high` (ACKs/NAKs in the switches' strict-priority queue), `ecn-enq` (ECN marked at
enqueue), `wire` (34 more bytes per packet on the wire). The pairs compared are in PAIRS.
Python 3 standard library only.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import gen

HERE = os.path.dirname(os.path.abspath(__file__))
SCEN_DIR = os.path.join(HERE, "scenarios")
RESULTS = os.path.join(HERE, "results")
SCENARIOS = ["dumbbell", "incast", "incast-pfc", "websearch"]
LONGHAUL_RUNS = {"default": "{name}.toml", "ackdata": "{name}-ackdata.toml",
                 "hpcc": "{name}-hpcc.toml", "dcqcn-paper": "{name}-dcqcn-paper.toml"}
# longhaul's frames are 34 bytes longer on the wire than HPCC's packets (1082 against 1048 for a
# full data packet: patch_variants.py says why).
WIRE = {"HPCC_WIRE_EXTRA_BYTES": "34"}
ECN = {"HPCC_ECN_AT_ENQUEUE": "1"}
ACK = {"HPCC_SWITCH_ACK_HIGH_PRIO": "1"}
NS3_RUNS = {
    "stock": {},
    "ack-high": dict(ACK),
    "ecn-enq": dict(ECN),
    "ack-high+ecn-enq": dict(ACK, **ECN),
    "ecn-enq+wire": dict(ECN, **WIRE),
    "ack-high+ecn-enq+wire": dict(ACK, **ECN, **WIRE),
}
# (label, longhaul run, NS-3 run): what each row of the table compares.
PAIRS = [
    ("longhaul's defaults vs NS-3 as published", "default", "stock"),
    ("longhaul with HPCC's ACK class", "ackdata", "stock"),
    ("NS-3 with longhaul's ACK class", "default", "ack-high"),
    ("NS-3 with longhaul's ACK class and ECN point", "default", "ack-high+ecn-enq"),
    ("NS-3 with longhaul's ACK class, ECN point and wire bytes", "default", "ack-high+ecn-enq+wire"),
    ("HPCC's ACK class in both, NS-3 with longhaul's ECN point and wire bytes", "ackdata", "ecn-enq+wire"),
    ("longhaul with HPCC's ACK class, ECN point and PFC thresholds vs NS-3 as published (the wire bytes remain)",
     "hpcc", "stock"),
    ("longhaul's DCQCN before issue 41 (cut at the CNP, a CNP per 50 us), NS-3 with the three choices",
     "dcqcn-paper", "ack-high+ecn-enq+wire"),
]
# Size buckets (bytes, upper bounds inclusive) for the slowdown.
BUCKETS = [(0, 100_000), (100_001, 1_000_000), (1_000_001, 10_000_000), (10_000_001, 10**12)]
MAX_DURATION_US = 200_000  # --until-done's bound


def fail(msg):
    sys.exit("compare.py: " + msg)


def bucket_name(lo, hi):
    def fmt(b):
        return "%gKB" % (b / 1e3) if b < 10**6 else "%gMB" % (b / 1e6)
    if lo == 0:
        return "<=" + fmt(hi)
    if hi >= 10**12:
        return ">" + fmt(lo - 1)
    return "%s-%s" % (fmt(lo - 1), fmt(hi))


def run_timed(cmd, env=None, cwd=None, log=None):
    """Runs cmd; returns (wall s, CPU s of the child: user + system)."""
    t0 = time.monotonic()
    out = open(log, "w") if log else subprocess.DEVNULL
    try:
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        if log:
            out.close()
    wall = time.monotonic() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        fail("%s exited with %d%s" % (" ".join(cmd), code, " (log: %s)" % log if log else ""))
    return wall, ru.ru_utime + ru.ru_stime


# --- flows and the figures of one run --------------------------------------------------------

def path_hops(scen):
    """Links between every pair of hosts of a scenario (from its HPCC topology file)."""
    path = os.path.join(SCEN_DIR, scen, "hpcc", "topology.txt")
    try:
        with open(path) as f:
            nodes, nsw, nlinks = (int(x) for x in f.readline().split())
            switches = set(int(x) for x in f.readline().split())
            adj = {i: [] for i in range(nodes)}
            for _ in range(nlinks):
                a, b = (int(x) for x in f.readline().split()[:2])
                adj[a].append(b)
                adj[b].append(a)
    except (OSError, ValueError) as e:
        fail("%s: cannot read the topology: %s (run gen.py)" % (path, e))
    hops = {}
    for src in range(nodes):
        if src in switches:
            continue
        dist, q = {src: 0}, [src]
        for n in q:
            if n != src and n not in switches:
                continue
            for m in adj[n]:
                if m not in dist:
                    dist[m] = dist[n] + 1
                    q.append(m)
        for dst, d in dist.items():
            if dst not in switches:
                hops[(src, dst)] = d
    return hops


def flow_work(scen, flows):
    """Packet hops the flows need at least: every data packet and its ACK over every link of
    the path (the same count for both simulators, retransmissions and PFC left out)."""
    hops = path_hops(scen)
    return sum(-(-f["size"] // 1000) * hops[(f["src"], f["dst"])] * 2 for f in flows)


def read_longhaul(out_dir):
    path = os.path.join(out_dir, "flows.csv")
    flows = []
    with open(path) as f:
        head = f.readline().strip().split(",")
        for line in f:
            r = dict(zip(head, line.strip().split(",")))
            flows.append({
                "src": int(r["src"].lstrip("h")), "dst": int(r["dst"].lstrip("h")),
                "size": int(r["size_bytes"]), "start": int(r["start_ns"]),
                "fct": int(r["fct_ns"]) if r["fct_ns"] else None,
                "standalone": int(r["standalone_fct_ns"]) if r["standalone_fct_ns"] else None,
            })
    pfc, peak, hops = 0, 0, 0
    with open(os.path.join(out_dir, "summary.txt")) as f:
        for line in f:
            if line.startswith("switch ") and "pfc frames sent" in line:
                pfc += int(line.split("pfc frames sent ")[1].split(",")[0])
                peak = max(peak, int(line.split("buffer peak ")[1].split()[0]))
    # The stderr line: every frame hop, the runs alone included.
    with open(os.path.join(out_dir, "log.txt")) as f:
        for line in f:
            if line.startswith("longhaul: ") and " frame hops emulated" in line:
                hops = int(line.split()[1])
    return {"flows": flows, "pfc_frames": pfc, "buffer_peak": peak, "hops": hops}


def read_hpcc(run_dir, scen):
    """fct.txt (sip dip sport dport size start fct standalone_fct) and pfc.txt (time node type
    if type: 1 pause received, 0 resume)."""
    path = os.path.join(run_dir, "fct.txt")
    with open(os.path.join(SCEN_DIR, scen, "hpcc", "flow.txt")) as f:
        n = int(f.readline())
        planned = [line.split() for line in f][:n]
    t0 = gen.HPCC_T0_S
    flows = []
    with open(path) as f:
        for line in f:
            sip, dip, _sport, _dport, size, start, fct, standalone = line.split()[:8]
            flows.append({"src": (int(sip, 16) >> 8) & 0xffff, "dst": (int(dip, 16) >> 8) & 0xffff,
                          "size": int(size), "start": int(start) - int(round(t0 * 1e9)),
                          "fct": int(fct), "standalone": int(standalone)})
    pauses = frames = 0
    with open(os.path.join(run_dir, "pfc.txt")) as f:
        for line in f:
            frames += 1
            pauses += line.split()[4] == "1"
    return {"flows": flows, "planned": len(planned), "pfc_frames": frames, "pfc_pauses": pauses}


def slowdowns(flows, lo, hi):
    v = sorted(max(1.0, f["fct"] / f["standalone"]) for f in flows
               if f["fct"] is not None and lo <= f["size"] <= hi)
    if not v:
        return None
    # analysis/fct_analysis.py's p99: the element at int(n * 0.99).
    return sum(v) / len(v), v[min(int(len(v) * 0.99), len(v) - 1)], len(v)


def mean_fct(flows):
    v = [f["fct"] for f in flows if f["fct"] is not None]
    return sum(v) / len(v) if v else None


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if xs else None


# --- the runs --------------------------------------------------------------------------------

def run_name(variant, seed):
    return variant if seed == 1 else "%s-seed%d" % (variant, seed)


def run_longhaul(binary, scen, variant, work, seed=1):
    toml = os.path.join(SCEN_DIR, scen, LONGHAUL_RUNS[variant].format(name=scen))
    if not os.path.exists(toml):
        fail("%s: missing (run validation/hpcc/gen.py)" % toml)
    out = os.path.join(work, "longhaul", scen, run_name(variant, seed))
    os.makedirs(out, exist_ok=True)
    wall, cpu = run_timed([binary, "emulate", toml, "--out-dir", out, "--until-done",
                           "--max-duration", str(MAX_DURATION_US), "--seed", str(seed)],
                          log=os.path.join(out, "log.txt"))
    r = read_longhaul(out)
    r.update(wall=wall, cpu=cpu)
    return r


def ns3_binary(build):
    bdir = os.path.join(build, "simulation", "build", "scratch")
    if not os.path.isdir(bdir):
        fail("%s: no such directory: --ns3 takes build.sh's BUILD_DIR" % bdir)
    for name in sorted(os.listdir(bdir)):
        p = os.path.join(bdir, name)
        if "third" in name and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    fail("%s: no built 'third' executable (did build.sh finish?)" % bdir)


def run_ns3(build, scen, variant, work, seed=1):
    src = os.path.join(SCEN_DIR, scen, "hpcc")
    out = os.path.join(work, "ns3", scen, run_name(variant, seed))
    os.makedirs(out, exist_ok=True)
    for name in ("topology.txt", "flow.txt", "trace.txt"):
        shutil.copy(os.path.join(src, name), out)
    with open(os.path.join(src, "config.txt")) as f, \
            open(os.path.join(out, "config.txt"), "w") as g:
        for line in f:
            k, _, v = line.strip().partition(" ")
            if k.endswith("_FILE"):
                v = os.path.join(out, v)
            g.write("%s %s\n" % (k, v))
    env = dict(os.environ)
    env.update(NS3_RUNS[variant])
    # ns-3's run number (third.cc leaves the seed alone): RED's coin flips per seed.
    env["NS_GLOBAL_VALUE"] = "RngRun=%d" % seed
    lib = os.path.join(build, "simulation", "build")
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    wall, cpu = run_timed([ns3_binary(build), os.path.join(out, "config.txt")], env=env,
                          cwd=out, log=os.path.join(out, "log.txt"))
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                   "env": NS3_RUNS[variant], "seed": seed,
                   "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, f)
    return out


def load_ns3(run_dir, scen, live):
    r = read_hpcc(run_dir, scen)
    try:
        with open(os.path.join(run_dir, "run.json")) as f:
            meta = json.load(f)
    except OSError:
        fail("%s: no run.json (record with --ns3 BUILD --record)" % run_dir)
    r.update(wall=meta["wall_s"], cpu=meta["cpu_s"], when="" if live else meta.get("when", ""))
    return r


def record(run_dir, scen, name):
    dst = os.path.join(RESULTS, scen, name)
    os.makedirs(dst, exist_ok=True)
    for name in ("fct.txt", "pfc.txt", "run.json"):
        shutil.copy(os.path.join(run_dir, name), dst)


# --- the table -------------------------------------------------------------------------------

def ratio(a, b):
    return a / b if a is not None and b else None


def f3(x, fmt="%.3f"):
    return "-" if x is None else fmt % x


def tables(scens, lh, ns):
    out = []
    out.append("### Mean FCT and PFC\n")
    out.append("| scenario | comparison (longhaul run / NS-3 run) | flows done (lh / ns-3) | mean FCT lh (us) | mean FCT ns-3 (us) | ratio lh/ns-3 | PFC frames lh / ns-3 (pauses) |")
    out.append("|---|---|---|---|---|---|---|")
    for s in scens:
        for label, lv, nv in PAIRS:
            a, b = lh.get((s, lv)), ns.get((s, nv))
            if a is None or b is None:
                continue
            ma, mb = mean_fct(a["flows"]), mean_fct(b["flows"])
            done_a = sum(f["fct"] is not None for f in a["flows"])
            out.append("| %s | %s (%s / %s) | %d/%d / %d/%d | %s | %s | %s | %d / %d (%d) |" % (
                s, label, lv, nv, done_a, len(a["flows"]), len(b["flows"]), b["planned"],
                f3(ma and ma / 1e3, "%.1f"), f3(mb and mb / 1e3, "%.1f"), f3(ratio(ma, mb)),
                a["pfc_frames"], b["pfc_frames"], b["pfc_pauses"]))
    out.append("\n### FCT slowdown by size (FCT / each tool's standalone FCT; avg, p99)\n")
    out.append("| scenario | comparison | size | flows | lh avg | ns-3 avg | lh p99 | ns-3 p99 | p99 ratio |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for s in scens:
        for label, lv, nv in PAIRS:
            a, b = lh.get((s, lv)), ns.get((s, nv))
            if a is None or b is None:
                continue
            for lo, hi in BUCKETS:
                x, y = slowdowns(a["flows"], lo, hi), slowdowns(b["flows"], lo, hi)
                if x is None and y is None:
                    continue
                out.append("| %s | %s / %s | %s | %s | %s | %s | %s | %s | %s |" % (
                    s, lv, nv, bucket_name(lo, hi),
                    "%s/%s" % (x[2] if x else 0, y[2] if y else 0),
                    f3(x and x[0]), f3(y and y[0]), f3(x and x[1]), f3(y and y[1]),
                    f3(ratio(x and x[1], y and y[1]))))
    if "dumbbell" in scens:
        out.append("\n### Dumbbell: per-flow throughput (size / FCT, Gb/s) and finish (us)\n")
        out.append("| run | flow 0 (t=0) | flow 1 (t=100 us) | flow 2 (t=200 us) | Jain | last finish (us) |")
        out.append("|---|---|---|---|---|---|")
        rows = [("longhaul " + v, lh.get(("dumbbell", v))) for v in LONGHAUL_RUNS]
        rows += [("NS-3 " + v, ns.get(("dumbbell", v))) for v in NS3_RUNS]
        for name, r in rows:
            if r is None:
                continue
            fl = sorted((f for f in r["flows"] if f["fct"]), key=lambda f: f["start"])
            gbps = [f["size"] * 8 / f["fct"] for f in fl]
            last = max((f["start"] + f["fct"]) for f in fl) if fl else None
            out.append("| %s | %s | %s | %s | %s | %s |" % (
                name, *(f3(g, "%.1f") for g in (gbps + [None] * 3)[:3]), f3(jain(gbps)),
                f3(last and last / 1e3, "%.0f")))
    seeds = sorted(set(int(k[1].split("-seed")[1]) if "-seed" in k[1] else 1 for k in lh))
    if len(seeds) > 1:
        out.append("\n### Mean FCT by seed (longhaul --seed, NS-3 RngRun): the noise band\n")
        out.append("| scenario | longhaul / NS-3 run | %s | ratio of the means |" % " | ".join(
            "seed %d lh / ns-3 (us)" % k for k in seeds))
        out.append("|---|---|%s---|" % ("---|" * len(seeds)))
        for s in scens:
            for _, lv, nv in PAIRS:
                cells, ma, mb = [], [], []
                for k in seeds:
                    a, b = lh.get((s, run_name(lv, k))), ns.get((s, run_name(nv, k)))
                    x = a and mean_fct(a["flows"])
                    y = b and mean_fct(b["flows"])
                    cells.append("%s / %s" % (f3(x and x / 1e3, "%.1f"), f3(y and y / 1e3, "%.1f")))
                    if x and y:
                        ma.append(x)
                        mb.append(y)
                if ma:
                    out.append("| %s | %s / %s | %s | %.3f (%s) |" % (
                        s, lv, nv, " | ".join(cells), sum(ma) / sum(mb),
                        " ".join("%.3f" % (x / y) for x, y in zip(ma, mb))))
    out.append("\n### Speed (same flows; work = every data packet and its ACK over every link of the path)\n")
    out.append("| scenario | run | wall s | CPU s | work (M packet hops) | M work hops / CPU s | longhaul's own frame hops / CPU s (M, the runs alone included) |")
    out.append("|---|---|---|---|---|---|---|")
    for s in scens:
        for tool, runs in (("longhaul", lh), ("NS-3", ns)):
            for (sc, v), r in sorted(runs.items()):
                if sc != s or "-seed" in v:
                    continue
                w = flow_work(s, [f for f in r["flows"] if f["fct"] is not None])
                own = "%.2f" % (r["hops"] / r["cpu"] / 1e6) if "hops" in r and r["cpu"] else "-"
                when = " (recorded %s)" % r["when"] if r.get("when") else ""
                out.append("| %s | %s %s%s | %.2f | %.2f | %.2f | %.2f | %s |" % (
                    s, tool, v, when, r["wall"], r["cpu"], w / 1e6,
                    w / 1e6 / max(r["cpu"], 1e-9), own))
    return "\n".join(out) + "\n"


# --- the CI check ----------------------------------------------------------------------------

def check(scens, lh, ns, path):
    try:
        with open(path) as f:
            tol = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))
    bad = 0
    for t in tol["checks"]:
        s = t["scenario"]
        if s not in scens:
            continue
        a, b = lh.get((s, t["longhaul"])), ns.get((s, t["ns3"]))
        if a is None:
            print("skip %s %s (%s / %s): longhaul run %s not made here"
                  % (s, t["what"], t["longhaul"], t["ns3"], t["longhaul"]))
            continue
        if b is None:
            fail("%s: check %s of %s needs the recorded NS-3 run results/%s/%s"
                 % (path, t["what"], s, s, t["ns3"]))
        if t["what"] == "mean_fct_ratio":
            val = ratio(mean_fct(a["flows"]), mean_fct(b["flows"]))
        elif t["what"] == "p99_slowdown_ratio":
            lo, hi = t["bucket"]
            x, y = slowdowns(a["flows"], lo, hi), slowdowns(b["flows"], lo, hi)
            val = ratio(x and x[1], y and y[1])
        elif t["what"] == "flows_done":
            val = sum(f["fct"] is not None for f in a["flows"]) / max(len(a["flows"]), 1)
        elif t["what"] == "pfc_frames_ratio":
            val = (a["pfc_frames"] + 1) / (b["pfc_frames"] + 1)
        else:
            fail("%s: unknown check '%s'" % (path, t["what"]))
        ok = val is not None and t["min"] <= val <= t["max"]
        bad += not ok
        print("%s %s %s (%s / %s)%s: %s in [%s, %s]%s" % (
            "ok  " if ok else "FAIL", s, t["what"], t["longhaul"], t["ns3"],
            " " + bucket_name(*t["bucket"]) if "bucket" in t else "", f3(val), t["min"], t["max"],
            " -- " + t["why"] if t.get("why") else ""))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--longhaul", required=True, help="the longhaul binary")
    ap.add_argument("--ns3", help="build.sh's BUILD_DIR (default: the recorded results)")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--longhaul-runs", default=",".join(LONGHAUL_RUNS))
    ap.add_argument("--ns3-runs", default=",".join(NS3_RUNS))
    ap.add_argument("--seeds", type=int, default=1,
                    help="run seeds 1..N (longhaul --seed, NS-3 RngRun); the tables but the "
                    "seed table use seed 1")
    ap.add_argument("--out", help="also write the table here")
    ap.add_argument("--work", help="where the runs write (default: a temporary directory)")
    ap.add_argument("--record", action="store_true", help="store the NS-3 runs in results/")
    ap.add_argument("--check", action="store_true", help="check against tolerances.json")
    ap.add_argument("--tolerances", default=os.path.join(HERE, "tolerances.json"),
                    help="the bounds --check uses (default: tolerances.json)")
    args = ap.parse_args()
    scens = [s for s in args.scenarios.split(",") if s]
    for s in scens:
        if s not in SCENARIOS:
            fail("--scenarios: unknown '%s' (known: %s)" % (s, ", ".join(SCENARIOS)))
    if not os.access(args.longhaul, os.X_OK):
        fail("--longhaul %s: not an executable" % args.longhaul)
    work = args.work or tempfile.mkdtemp(prefix="hpcc-compare-")
    lh, ns = {}, {}
    seeds = range(1, args.seeds + 1)
    for s in scens:
        for v in args.ns3_runs.split(","):
            if v not in NS3_RUNS:
                fail("--ns3-runs: unknown '%s' (known: %s)" % (v, ", ".join(NS3_RUNS)))
            for seed in seeds:
                name = run_name(v, seed)
                if args.ns3:
                    print("NS-3 %s %s ..." % (s, name), file=sys.stderr, flush=True)
                    d = run_ns3(args.ns3, s, v, work, seed)
                    if args.record:
                        record(d, s, name)
                else:
                    d = os.path.join(RESULTS, s, name)
                    if not os.path.isdir(d):
                        continue
                ns[(s, name)] = load_ns3(d, s, bool(args.ns3))
        for v in args.longhaul_runs.split(","):
            if v not in LONGHAUL_RUNS:
                fail("--longhaul-runs: unknown '%s'" % v)
            for seed in seeds:
                name = run_name(v, seed)
                print("longhaul %s %s ..." % (s, name), file=sys.stderr, flush=True)
                lh[(s, name)] = run_longhaul(args.longhaul, s, v, work, seed)
    text = tables(scens, lh, ns)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    if args.check and check(scens, lh, ns, args.tolerances):
        sys.exit(1)


if __name__ == "__main__":
    main()
