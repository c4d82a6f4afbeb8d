#!/usr/bin/env python3
"""Runs the THEMIS cross-check scenario (gen.py) in `longhaul emulate` and, given a build of the
THEMIS authors' NS-3 simulator (build.sh), in NS-3 too, and prints the side-by-side table
(docs/validation.md, "THEMIS against the THEMIS authors' NS-3").

    python3 validation/themis/compare.py --longhaul target/release/longhaul [--ns3 BUILD_DIR]
        [--seeds N] [--out FILE] [--record] [--check]

Without --ns3 the NS-3 half comes from the recorded runs in validation/themis/results/ (their
wall and CPU times too). --record writes the NS-3 runs made here into results/. --check compares
longhaul's figures with the recorded NS-3 ones within the bounds of tolerances.json and exits 1
when one is out.

Runs: longhaul `off` (commodity ESWs), `themis` (THEMIS's PNP at both ESWs) and `themis-trp`
(PNP and TRP); NS-3 `themis` (the fork as published: its ESWs answer CE with CNPs) and `off`
(THEMIS_NS3_OFF=1, patch_themis.py), plus `themis-wire` / `off-wire` (34 more bytes per
packet on the wire, validation/hpcc/patch_variants.py) to tell the wire bytes apart.

The run, read and statistics code is validation/hpcc/compare.py's, imported (its SCEN_DIR,
run tables and NS-3 environments are set to this scenario's). Python 3 standard library only.
"""
import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
HPCC = os.path.join(os.path.dirname(HERE), "hpcc")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


# validation/hpcc/compare.py does `import gen` (its own gen.py); themis/gen.py imports it as well.
_hgen = _load("gen", os.path.join(HPCC, "gen.py"))
hc = _load("hpcc_compare", os.path.join(HPCC, "compare.py"))
tgen = _load("themis_gen", os.path.join(HERE, "gen.py"))

SCEN = tgen.NAME
hc.SCEN_DIR = os.path.join(HERE, "scenarios")
RESULTS = os.path.join(HERE, "results")
hc.RESULTS = RESULTS
hc.LONGHAUL_RUNS = {"off": "off.toml", "themis": "themis.toml", "themis-trp": "themis-trp.toml"}
OFF = {"THEMIS_NS3_OFF": "1"}
hc.NS3_RUNS = {"themis": {}, "off": dict(OFF), "themis-wire": dict(hc.WIRE),
               "off-wire": dict(OFF, **hc.WIRE)}
# (label, longhaul run, NS-3 run).
PAIRS = [
    ("THEMIS off: commodity ESWs", "off", "off"),
    ("THEMIS on: the ESWs answer CE with CNPs (PNP)", "themis", "themis"),
    ("longhaul's PNP + TRP against the fork (TRP compiled out there)", "themis-trp", "themis"),
    ("THEMIS off, NS-3 with longhaul's wire bytes", "off", "off-wire"),
    ("THEMIS on, NS-3 with longhaul's wire bytes", "themis", "themis-wire"),
]
SCOPES = ("intra", "inter")
NS3_COUNTERS = re.compile(r"^themis-ns3-counters: (.*)$")


def fail(msg):
    sys.exit("validation/themis/compare.py: " + msg)


def scope_of(f):
    return "intra" if tgen.dc_of(f["src"]) == tgen.dc_of(f["dst"]) else "inter"


def slow(flows, scope):
    """(avg, p99, n) slowdown of the finished flows of `scope`, each tool's own standalone FCT
    (hpcc/compare.py's definition: at least 1, p99 the element at int(0.99 n))."""
    return hc.slowdowns([f for f in flows if scope_of(f) == scope], 0, 10**15)


def pause_us(pfc_path):
    """NS-3: total time ports were paused, from pfc.txt's pause (1) and resume (0) events per
    receiving (node, port); a pause still on at the end counts to the last event."""
    on, total, last = {}, 0, 0
    with open(pfc_path) as f:
        for line in f:
            t, node, _typ, port, kind = (int(x) for x in line.split()[:5])
            last = max(last, t)
            key = (node, port)
            if kind == 1:
                on.setdefault(key, t)
            elif key in on:
                total += t - on.pop(key)
    total += sum(last - t for t in on.values())
    return total / 1e3


def ns3_counters(run_dir):
    """patch_themis.py's line in the run's log (NS-3's stdout and stderr), or {} (older runs)."""
    out = {}
    for name in ("log.txt", "counters.txt"):
        p = os.path.join(run_dir, name)
        if not os.path.exists(p):
            continue
        with open(p, errors="replace") as f:
            for line in f:
                m = NS3_COUNTERS.match(line.strip())
                if m:
                    out = {k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split())}
    return out


def longhaul_counters(out_dir):
    """From summary.txt: NAKs sent by receivers, CNPs sent by receivers, and the ESWs' pipeline
    counters (PNP's CNPs, TRP's recirculations)."""
    c = {"naks": 0, "host_cnps": 0}
    with open(os.path.join(out_dir, "summary.txt")) as f:
        for line in f:
            if line.startswith("host "):
                m = re.search(r"cnps_sent (\d+) naks_sent (\d+)", line)
                if m:
                    c["host_cnps"] += int(m.group(1))
                    c["naks"] += int(m.group(2))
            elif line.startswith("switch ") and " pipeline: " in line:
                for kv in line.split(" pipeline: ", 1)[1].split(", "):
                    k, _, v = kv.rpartition(" ")
                    if v.isdigit():
                        c[k] = c.get(k, 0) + int(v)
    return c


def run_longhaul(binary, variant, work, seed):
    r = hc.run_longhaul(binary, SCEN, variant, work, seed)
    out = os.path.join(work, "longhaul", SCEN, hc.run_name(variant, seed))
    r["counters"] = longhaul_counters(out)
    return r


def load_ns3(run_dir, live):
    r = hc.load_ns3(run_dir, SCEN, live)
    r["pause_us"] = pause_us(os.path.join(run_dir, "pfc.txt"))
    r["counters"] = ns3_counters(run_dir)
    return r


def record(run_dir, name):
    dst = os.path.join(RESULTS, SCEN, name)
    os.makedirs(dst, exist_ok=True)
    for n in ("fct.txt", "pfc.txt", "run.json"):
        shutil.copy(os.path.join(run_dir, n), dst)
    with open(os.path.join(dst, "counters.txt"), "w") as f:
        c = ns3_counters(run_dir)
        f.write("themis-ns3-counters: %s\n" % " ".join("%s=%d" % kv for kv in sorted(c.items())))


# --- the tables ------------------------------------------------------------------------------

def f3(x, fmt="%.3f"):
    return hc.f3(x, fmt)


def done(r):
    return sum(f["fct"] is not None for f in r["flows"])


def row_cells(r):
    cells = []
    for s in SCOPES:
        x = slow(r["flows"], s)
        cells += [f3(x and x[0]), f3(x and x[1])]
    return cells


def ns3_cnp_cell(c):
    if not c:
        return "-"
    return "%d / %d" % (c.get("esw_cnps", 0), c.get("ack_cnps", 0))


def lh_cnp_cell(c):
    pnp = sum(v for k, v in c.items() if k.endswith("cnps_sent") or k == "pnp.generated")
    return "%d / %d" % (pnp, c.get("host_cnps", 0))


def tables(lh, ns, seeds):
    out = []
    n = len(next(iter(lh.values()))["flows"]) if lh else 0
    out.append("### Side by side (seed 1): FCT slowdown (FCT over each tool's own standalone FCT), PFC, THEMIS's counters\n")
    out.append("| tool, run | flows done | intra-DC avg | intra-DC p99 | inter-DC avg | inter-DC p99 | PFC frames (NS-3: received, pauses) | paused port-time (us) | CNPs from ESWs / from receivers | NACKs | wall / CPU s |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for v in hc.NS3_RUNS:
        r = ns.get(hc.run_name(v, 1))
        if r is None:
            continue
        c = r["counters"]
        out.append("| NS-3 %s | %d/%d | %s | %s | %s | %s | %d (%d) | %.1f | %s | %s | %.2f / %.2f%s |" % (
            v, done(r), r["planned"], *row_cells(r), r["pfc_frames"], r["pfc_pauses"],
            r["pause_us"], ns3_cnp_cell(c), c.get("nacks", "-") if c else "-", r["wall"],
            r["cpu"], " (recorded %s)" % r["when"] if r.get("when") else ""))
    for v in hc.LONGHAUL_RUNS:
        r = lh.get(hc.run_name(v, 1))
        if r is None:
            continue
        c = r["counters"]
        out.append("| longhaul %s | %d/%d | %s | %s | %s | %s | %d | - | %s | %d | %.2f / %.2f |" % (
            v, done(r), n, *row_cells(r), r["pfc_frames"], lh_cnp_cell(c), c.get("naks", 0),
            r["wall"], r["cpu"]))
    out.append("\n### Pairs: longhaul over NS-3 (average slowdown, p99 slowdown, mean FCT, PFC frames + 1)\n")
    out.append("| comparison (longhaul / NS-3) | intra avg | intra p99 | inter avg | inter p99 | mean FCT intra | mean FCT inter | PFC |")
    out.append("|---|---|---|---|---|---|---|---|")
    for label, lv, nv in PAIRS:
        a, b = lh.get(lv), ns.get(nv)
        if a is None or b is None:
            continue
        cells = []
        for s in SCOPES:
            x, y = slow(a["flows"], s), slow(b["flows"], s)
            cells += [f3(hc.ratio(x and x[0], y and y[0])), f3(hc.ratio(x and x[1], y and y[1]))]
        for s in SCOPES:
            cells.append(f3(hc.ratio(hc.mean_fct([f for f in a["flows"] if scope_of(f) == s]),
                                     hc.mean_fct([f for f in b["flows"] if scope_of(f) == s]))))
        out.append("| %s (%s / %s) | %s | %s | %s | %s | %s | %s | %.2f |" % (
            label, lv, nv, *cells, (a["pfc_frames"] + 1) / (b["pfc_frames"] + 1)))
    out.append("\n### THEMIS on over off, per tool (average slowdown; below 1: THEMIS helps)\n")
    out.append("| tool | on / off | intra avg | inter avg | intra p99 | inter p99 |")
    out.append("|---|---|---|---|---|---|")
    for tool, runs, combos in (("NS-3", ns, [("themis", "off"), ("themis-wire", "off-wire")]),
                               ("longhaul", lh, [("themis", "off"), ("themis-trp", "off")])):
        for on, off in combos:
            a, b = runs.get(on), runs.get(off)
            if a is None or b is None:
                continue
            cells = []
            for i in (0, 1):
                for s in SCOPES:
                    x, y = slow(a["flows"], s), slow(b["flows"], s)
                    cells.append(f3(hc.ratio(x and x[i], y and y[i])))
            out.append("| %s | %s / %s | %s | %s | %s | %s |" % (tool, on, off, *cells))
    if len(seeds) > 1:
        out.append("\n### Seeds (longhaul --seed, NS-3 RngRun): average slowdown intra / inter\n")
        out.append("| run | %s |" % " | ".join("seed %d" % k for k in seeds))
        out.append("|---|%s" % ("---|" * len(seeds)))
        for tool, runs, variants in (("NS-3", ns, hc.NS3_RUNS), ("longhaul", lh, hc.LONGHAUL_RUNS)):
            for v in variants:
                cells = []
                for k in seeds:
                    r = runs.get(hc.run_name(v, k))
                    if r is None:
                        cells.append("-")
                        continue
                    x, y = slow(r["flows"], "intra"), slow(r["flows"], "inter")
                    cells.append("%s / %s" % (f3(x and x[0]), f3(y and y[0])))
                if any(c != "-" for c in cells):
                    out.append("| %s %s | %s |" % (tool, v, " | ".join(cells)))
    out.append("\n### Speed (same flows; work = every data packet and its ACK over every link of the path)\n")
    out.append("| run | wall s | CPU s | work (M packet hops) | M work hops / CPU s |")
    out.append("|---|---|---|---|---|")
    for tool, runs in (("NS-3", ns), ("longhaul", lh)):
        for v, r in sorted(runs.items()):
            if "-seed" in v:
                continue
            w = hc.flow_work(SCEN, [f for f in r["flows"] if f["fct"] is not None])
            out.append("| %s %s | %.2f | %.2f | %.2f | %.2f |" % (
                tool, v, r["wall"], r["cpu"], w / 1e6, w / 1e6 / max(r["cpu"], 1e-9)))
    return "\n".join(out) + "\n"


# --- the CI check ----------------------------------------------------------------------------

def value(what, a, b, t):
    if what == "flows_done":
        return done(a) / max(len(a["flows"]), 1)
    if what in ("avg_slowdown_ratio", "p99_slowdown_ratio"):
        i = 0 if what.startswith("avg") else 1
        x, y = slow(a["flows"], t["scope"]), slow(b["flows"], t["scope"])
        return hc.ratio(x and x[i], y and y[i])
    if what == "pfc_frames_ratio":
        return (a["pfc_frames"] + 1) / (b["pfc_frames"] + 1)
    fail("unknown check '%s'" % what)


def check(lh, ns, path):
    try:
        with open(path) as f:
            tol = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: %s" % (path, e))
    if not isinstance(tol.get("checks"), list) or not tol["checks"]:
        fail("%s: no 'checks' list" % path)
    bad = 0
    for t in tol["checks"]:
        for k in ("what", "longhaul", "ns3", "min", "max"):
            if k not in t:
                fail("%s: a check without '%s': %s" % (path, k, t))
        if t["what"] in ("avg_slowdown_ratio", "p99_slowdown_ratio") and t.get("scope") not in SCOPES:
            fail("%s: %s needs scope intra or inter: %s" % (path, t["what"], t))
        if t["what"] == "themis_gain_ratio":
            # (longhaul on / off) over (NS-3 on / off), average slowdown of `scope`.
            on, off = t["longhaul"].split("/"), t["ns3"].split("/")
            runs = [lh.get(on[0]), lh.get(on[1]), ns.get(off[0]), ns.get(off[1])]
            if None in runs[:2]:
                print("skip %s: longhaul runs %s not made here" % (t["what"], t["longhaul"]))
                continue
            if None in runs[2:]:
                fail("%s: %s needs the recorded NS-3 runs %s" % (path, t["what"], t["ns3"]))
            g = [slow(r["flows"], t["scope"]) for r in runs]
            val = None if None in g else (g[0][0] / g[1][0]) / (g[2][0] / g[3][0])
        else:
            a, b = lh.get(t["longhaul"]), ns.get(t["ns3"])
            if a is None:
                print("skip %s (%s / %s): longhaul run not made here" % (t["what"], t["longhaul"], t["ns3"]))
                continue
            if b is None:
                fail("%s: check %s needs the recorded NS-3 run results/%s/%s"
                     % (path, t["what"], SCEN, t["ns3"]))
            val = value(t["what"], a, b, t)
        ok = val is not None and t["min"] <= val <= t["max"]
        bad += not ok
        print("%s %s%s (%s / %s): %s in [%s, %s]%s" % (
            "ok  " if ok else "FAIL", t["what"], " " + t["scope"] if "scope" in t else "",
            t["longhaul"], t["ns3"], f3(val), t["min"], t["max"],
            " -- " + t["why"] if t.get("why") else ""))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--longhaul", required=True, help="the longhaul binary")
    ap.add_argument("--ns3", help="build.sh's BUILD_DIR (default: the recorded results)")
    ap.add_argument("--longhaul-runs", default=",".join(hc.LONGHAUL_RUNS))
    ap.add_argument("--ns3-runs", default=",".join(hc.NS3_RUNS))
    ap.add_argument("--seeds", type=int, default=1,
                    help="run seeds 1..N (longhaul --seed, NS-3 RngRun); tables use seed 1 "
                    "but the seed table")
    ap.add_argument("--out", help="also write the table here")
    ap.add_argument("--work", help="where the runs write (default: a temporary directory)")
    ap.add_argument("--record", action="store_true", help="store the NS-3 runs in results/")
    ap.add_argument("--check", action="store_true", help="check against tolerances.json")
    ap.add_argument("--tolerances", default=os.path.join(HERE, "tolerances.json"))
    ap.add_argument("--scenarios-dir", default=hc.SCEN_DIR,
                    help="gen.py's --out (default: validation/themis/scenarios); with another "
                    "one (gen.py --load ...), --ns3 is needed: the recorded runs are of the default")
    ap.add_argument("--ecmp-salt", type=int, default=0,
                    help="other ECMP paths on both sides: the scenario of gen.py --ecmp-salt N "
                    "(written into the work directory) and THEMIS_NS3_ECMP_SALT=N for NS-3; "
                    "with --ns3, without --record, --check and --scenarios-dir")
    args = ap.parse_args()
    if args.ecmp_salt and (args.ecmp_salt < 0 or not args.ns3 or args.record or args.check or
                           os.path.abspath(args.scenarios_dir) != os.path.abspath(hc.SCEN_DIR)):
        fail("--ecmp-salt: a positive salt, with --ns3, without --record, --check and "
             "--scenarios-dir")
    if os.path.abspath(args.scenarios_dir) != os.path.abspath(hc.SCEN_DIR):
        if not args.ns3 or args.record or args.check:
            fail("--scenarios-dir: only with --ns3, without --record and --check (the recorded "
                 "NS-3 runs are of validation/themis/scenarios)")
        hc.SCEN_DIR = args.scenarios_dir
    if args.seeds < 1:
        fail("--seeds %d: must be at least 1" % args.seeds)
    if not os.access(args.longhaul, os.X_OK):
        fail("--longhaul %s: not an executable" % args.longhaul)
    if args.record and not args.ns3:
        fail("--record needs --ns3 (it stores the NS-3 runs made here)")
    lruns = [v for v in args.longhaul_runs.split(",") if v]
    nruns = [v for v in args.ns3_runs.split(",") if v]
    for v in lruns:
        if v not in hc.LONGHAUL_RUNS:
            fail("--longhaul-runs: unknown '%s' (known: %s)" % (v, ", ".join(hc.LONGHAUL_RUNS)))
    for v in nruns:
        if v not in hc.NS3_RUNS:
            fail("--ns3-runs: unknown '%s' (known: %s)" % (v, ", ".join(hc.NS3_RUNS)))
    work = args.work or tempfile.mkdtemp(prefix="themis-compare-")
    try:
        run(args, work, lruns, nruns)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)


def run(args, work, lruns, nruns):
    if args.ecmp_salt:
        hc.SCEN_DIR = os.path.join(work, "scenarios-salt%d" % args.ecmp_salt)
        hc.run_timed([sys.executable, os.path.join(HERE, "gen.py"), "--out", hc.SCEN_DIR,
                      "--ecmp-salt", str(args.ecmp_salt)])
        for env in hc.NS3_RUNS.values():
            env["THEMIS_NS3_ECMP_SALT"] = str(args.ecmp_salt)
    if not os.path.isfile(os.path.join(hc.SCEN_DIR, SCEN, "hpcc", "flow.txt")):
        fail("%s: no scenario (run validation/themis/gen.py)" % os.path.join(hc.SCEN_DIR, SCEN))
    seeds = list(range(1, args.seeds + 1))
    lh, ns = {}, {}
    for v in nruns:
        for seed in seeds:
            name = hc.run_name(v, seed)
            if args.ns3:
                print("NS-3 %s ..." % name, file=sys.stderr, flush=True)
                d = hc.run_ns3(args.ns3, SCEN, v, work, seed)
                if args.record:
                    record(d, name)
            else:
                d = os.path.join(RESULTS, SCEN, name)
                if not os.path.isdir(d):
                    continue
            ns[name] = load_ns3(d, bool(args.ns3))
    for v in lruns:
        for seed in seeds:
            name = hc.run_name(v, seed)
            print("longhaul %s ..." % name, file=sys.stderr, flush=True)
            lh[name] = run_longhaul(args.longhaul, v, work, seed)
    text = tables(lh, ns, seeds)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if args.check and check(lh, ns, args.tolerances):
        sys.exit(1)


if __name__ == "__main__":
    main()
